//! `mbsp-bench`: mbsp's benchmarks, each against baselines measured in the same run (the user
//! commands are `mbsp`, crate mbsp-cli).
//!
//! * `mbsp-bench core` — synchronisation and communication costs of the runtime against
//!   baselines (spinning barrier, `std::sync::Barrier`, memcpy).
//! * `mbsp-bench nested` — sync latency of flat against nested runs, compact against scattered.
//! * `mbsp-bench lazy` — lazy syncs (declared counts) against full syncs: a one-word exchange,
//!   a ring halo exchange, a star, a ring and a sparse exchange at p = 16 and 64 (default and
//!   compact placement), the `Comm` all-reduce.
//! * `mbsp-bench collectives` — the collectives against their BSP prediction and hand-written
//!   put + sync, and sample sort against the sequential and rayon sorts.
//! * `mbsp-bench fft` — the BSP FFT against sequential rustfft (and FFTW, feature `fftw`).
//! * `mbsp-bench partition` — communication volume against Mondriaan 4.2.1 and the 1D
//!   row-block and 2D checkerboard baselines.
//! * `mbsp-bench spmv` — SpMV Mflop/s of the mbsp variants against sequential and rayon CSR,
//!   and the bandwidth achieved against a STREAM triad.
//! * `mbsp-bench wait` — the empty sync with many more processes than cores, passes of
//!   back-to-back syncs after every process slept (how fast waiting returns to spinning), and
//!   one-to-all and all-to-one puts against the balanced all-to-all.
//! * `mbsp-bench owned` — owned messages (communicable memory): a 16 MiB hand-off against a
//!   memcpy of it, and the allocations of a steady loop of owned messages.
//! * `mbsp-bench layouts` — the same supersteps of two processes in processes whose heaps start
//!   from different layouts: where a figure moves with the layout (false sharing).
//! * `mbsp-bench mpi` — the MPI engine against plain MPI on the same ranks (under `mpiexec`).
//!
//! This crate depends on the MPI engine (mbsp-mpi: MPICH and libclang to build); `mbsp` does
//! not. The measurements it shares with `mbsp` (statistics, the memory preflight, the SpMV and
//! FFT measurements) are in the library mbsp-tools; errors and exit statuses are those of
//! `mbsp` ([`mbsp_tools::command`]).

mod alloc_count;
mod checkpoint_bench;
mod cli;
mod collectives_bench;
mod core_bench;
mod fft_bench;
mod fftw;
mod floor;
mod layouts_bench;
mod lazy_bench;
mod mpi_bench;
mod nested_bench;
mod owned_bench;
mod partition_bench;
mod sort_bench;
mod spmv_bench;
mod wait_bench;
mod watch;
mod whole_file;

// The helpers shared with `mbsp`, under the paths the benchmarks use.
use mbsp_tools::{machine, preflight, stats};

use clap::{Parser, Subcommand};
use cli::Counts;
use mbsp_tools::command::report;
use mbsp_tools::{Error, Result};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "mbsp-bench",
    version,
    about = "mbsp's benchmarks against baselines measured in the same run",
    after_help = cli::EXIT_STATUS_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Bench,
}

#[derive(Subcommand)]
enum Bench {
    /// The MPI engine against plain MPI on the same ranks, same run: empty sync against
    /// MPI_Barrier, one-word put + sync and 16 MiB put and get + sync against MPI_Put/MPI_Get +
    /// flush + barrier. Start it under `mpiexec -n 2` (or more); rank 0 prints.
    Mpi(MpiArgs),
    /// Empty-sync latency, one-word put + sync, bulk put throughput, the empty sync with up to
    /// 512 processes and an oversubscribed ring, against a spinning barrier, std::sync::Barrier
    /// and memcpy.
    Core(CoreArgs),
    /// The empty sync with up to 512 processes against std::sync::Barrier (and with the
    /// processes as coroutines), the start and end of such runs (threads against coroutines),
    /// and passes of 1000 back-to-back syncs at p = 2 each after every process slept a second
    /// (the worst pass against the median: how fast waiting returns to spinning), and
    /// one-to-all and all-to-one puts of 4 and 48 KiB against the balanced all-to-all.
    Wait(WaitArgs),
    /// Owned messages (communicable memory): a 16 MiB buffer handed between 2 processes
    /// against a memcpy of it, and a loop of 10^5 supersteps of owned messages (allocations
    /// per superstep, resident size).
    Owned(OwnedArgs),
    /// Each collective for one word and for large data at p = 1, 2, 4, next to its BSP-predicted
    /// time and to the same operation written with put + sync; then sample sort against the
    /// sequential and rayon sorts.
    Collectives(CollectivesArgs),
    /// Gflop/s of the BSP FFT (flat, p = 1, 2, ...) against sequential rustfft, n = 2^10 ... 2^24.
    Fft(FftArgs),
    /// Sync latency of a flat run of p against nested runs (2 x p/2), compact against scattered.
    Nested(NestedArgs),
    /// The empty sync, a one-word put + sync, a one-word message and the `Comm` one-word
    /// all-reduce at p = 2, in a process per heap layout (k small blocks allocated first): each
    /// figure over the empty sync of the same round, and the layouts where it is more than 1.5x
    /// its median (a small block sharing a cache line with one another core writes).
    Layouts(LayoutsArgs),
    /// Lazy syncs (declared counts, `Ctx::declare_incoming`) against full syncs: a one-word exchange at
    /// p = 2 against the empty sync, a ring halo exchange at p = 4, a star, a ring and a sparse
    /// exchange at p = 16 and 64 (default and compact placement), the `Comm` one-word all-reduce.
    Lazy(LazyArgs),
    /// Checkpoints: write bandwidth against the disk's, the cost to a superstep (foreground,
    /// background, a sync_checkpoint that takes none), and CG with a checkpoint every few
    /// seconds against CG without.
    Checkpoint(CheckpointArgs),
    /// Communication volume of the sparse-matrix partitioner against Mondriaan 4.2.1 and the 1D
    /// row-block and 2D checkerboard baselines, per matrix and p.
    Partition(PartitionArgs),
    /// SpMV Mflop/s and speedup over sequential CSR of rayon row-parallel CSR and each mbsp
    /// variant, per matrix and p, with the bandwidth achieved against a STREAM triad, all
    /// measured in the same run.
    Spmv(spmv_bench::Args),
}

/// `mbsp-bench mpi`.
#[derive(clap::Args)]
struct MpiArgs {
    /// A seconds-long smoke run (1 MiB bulk, few batches); the numbers are not meaningful.
    #[arg(long)]
    quick: bool,
    /// Print the figures as JSON.
    #[arg(long)]
    json: bool,
    /// Also write the figures as CSV (figure, bytes, mbsp_seconds, mpi_seconds, ratio, ranks)
    /// to FILE.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
}

/// `mbsp-bench core`.
#[derive(clap::Args)]
struct CoreArgs {
    /// Samples per figure (the median is printed).
    #[arg(long, default_value = "7", value_parser = cli::at_least("--samples", 1))]
    samples: usize,
    /// A seconds-long smoke run; the numbers are not meaningful.
    #[arg(long)]
    quick: bool,
    /// Print the figures as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Also write the figures as CSV (table, p, figure, unit, median, min, max) to FILE.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
}

/// `mbsp-bench wait`.
#[derive(clap::Args)]
struct WaitArgs {
    /// Samples per figure of the oversubscription table (the median is printed).
    #[arg(long, default_value = "7", value_parser = cli::at_least("--samples", 1))]
    samples: usize,
    /// Passes of back-to-back syncs after a sleep.
    #[arg(long, default_value = "30", value_parser = cli::at_least("--passes", 1))]
    passes: usize,
    /// How long every process sleeps before each pass, in milliseconds.
    #[arg(long, default_value = "1000")]
    sleep_ms: u64,
    /// A seconds-long smoke run (few processes, a few short passes); the numbers are not
    /// meaningful.
    #[arg(long)]
    quick: bool,
    /// Print the figures as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Also write the figures as CSV (table, p, pass, syncs, mbsp_ns, mbsp_ns_min,
    /// mbsp_ns_max, std_barrier_ns, slept, preempted, coroutines_ns; start rows: time per
    /// run on threads in the mbsp columns; put rows: pattern in `pass`, bytes in `syncs`,
    /// time per superstep in the mbsp columns) to FILE.
    #[arg(long, value_name = "FILE")]
    csv: Option<String>,
}

/// `mbsp-bench layouts`.
#[derive(clap::Args)]
struct LayoutsArgs {
    /// Heap layouts (one process each): k = 0 .. LAYOUTS - 1 small blocks allocated first.
    #[arg(long, default_value = "16", value_parser = cli::at_least("--layouts", 1))]
    layouts: usize,
    /// Rounds per layout (the figures in turn each round; a warm-up round before them).
    #[arg(long, default_value = "9", value_parser = cli::at_least("--rounds", 1))]
    rounds: usize,
    /// Supersteps per figure and round.
    #[arg(long, default_value = "1000", value_parser = cli::at_least("--steps", 1))]
    steps: usize,
    /// A seconds-long smoke run (3 layouts, 2 rounds of 200 supersteps); the numbers are not
    /// meaningful.
    #[arg(long)]
    quick: bool,
    /// Print the figures as JSON.
    #[arg(long)]
    json: bool,
    /// Also write the figures as CSV (layout, figure, ns, ratio) to FILE.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Internal: measure layout K in this process and print its figures as one JSON line.
    #[arg(long, hide = true, value_name = "K")]
    child: Option<usize>,
}

/// `mbsp-bench owned`.
#[derive(clap::Args)]
struct OwnedArgs {
    /// Samples per figure (the median is printed).
    #[arg(long, default_value = "7", value_parser = cli::at_least("--samples", 1))]
    samples: usize,
    /// Supersteps of the steady-state loop.
    #[arg(long, default_value = "100000", value_parser = cli::at_least("--steps", 1))]
    steps: usize,
    /// A seconds-long smoke run (1 MiB, 1000 supersteps); the numbers are not meaningful.
    #[arg(long)]
    quick: bool,
    /// Print the figures as JSON.
    #[arg(long)]
    json: bool,
    /// Also write the figures as CSV (figure, unit, median, min, max) to FILE.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
}

/// `mbsp-bench collectives`.
#[derive(clap::Args)]
struct CollectivesArgs {
    /// Samples per figure (the median is printed).
    #[arg(long, default_value = "5", value_parser = cli::at_least("--samples", 1))]
    samples: usize,
    /// Process counts, comma-separated.
    #[arg(long, default_value = "1,2,4", value_parser = cli::counts("--procs"))]
    procs: Counts,
    /// Size of the large case in MiB.
    #[arg(long, default_value = "16", value_parser = cli::at_least("--large-mib", 1))]
    large_mib: usize,
    /// Elements of the sort benchmark (0 = skip it).
    #[arg(long, default_value_t = 10_000_000)]
    sort_n: usize,
    /// A seconds-long smoke run; the numbers are not meaningful.
    #[arg(long)]
    quick: bool,
    /// Print the results as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Also write the table of collectives as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    csv: Option<String>,
}

/// `mbsp-bench fft`.
#[derive(clap::Args)]
struct FftArgs {
    /// log2 of the smallest n.
    #[arg(long, default_value_t = 10)]
    min_log: u32,
    /// log2 of the largest n (at most 30).
    #[arg(long, default_value_t = 24)]
    max_log: u32,
    /// Process counts of the flat BSP FFT (powers of two), comma-separated.
    #[arg(long, default_value = "1,2", value_parser = cli::counts("--procs"))]
    procs: Counts,
    /// Also measure the flat BSP FFT with direct gets (`fft::Exchange::DirectGet`, a full
    /// sync) as `mbsp-direct`, in one run with `mbsp-flat` (the default exchange: owned
    /// messages and a lazy sync), sample by sample in turn.
    #[arg(long)]
    direct: bool,
    /// Timed transforms per figure (the median is printed).
    #[arg(long, default_value = "9", value_parser = cli::at_least("--samples", 1))]
    samples: usize,
    /// Rounds the samples are taken in, every variant in turn each round (a change of the
    /// machine's speed then reaches all variants alike).
    #[arg(long, default_value = "3", value_parser = cli::at_least("--rounds", 1))]
    rounds: usize,
    /// A seconds-long smoke run (n = 2^10 ... 2^14); the numbers are not meaningful.
    #[arg(long)]
    quick: bool,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also write the rows as CSV (n, variant, p, gflops, rel_error) to FILE.
    #[arg(long, value_name = "FILE")]
    csv: Option<String>,
    /// Also plot Gflop/s against n, one line per variant (SVG), to FILE.
    #[arg(long, value_name = "FILE")]
    plot: Option<String>,
}

/// `mbsp-bench nested`.
#[derive(clap::Args)]
struct NestedArgs {
    /// Samples per figure (the median is printed).
    #[arg(long, default_value = "7", value_parser = cli::at_least("--samples", 1))]
    samples: usize,
    /// A seconds-long smoke run; the numbers are not meaningful.
    #[arg(long)]
    quick: bool,
    /// Print the figures as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Also write the figures as CSV (table, p, setting, figure, median_ns, min_ns, max_ns) to
    /// FILE.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
}

/// `mbsp-bench lazy`.
#[derive(clap::Args)]
struct LazyArgs {
    /// Samples per figure (the median is printed).
    #[arg(long, default_value = "7", value_parser = cli::at_least("--samples", 1))]
    samples: usize,
    /// A seconds-long smoke run; the numbers are not meaningful.
    #[arg(long)]
    quick: bool,
    /// Print the figures as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also write the table as CSV (kernel, p, median_ns, min_ns, max_ns, samples, ratio,
    /// target, switches: context switches per process and superstep where p exceeds the
    /// cores) to FILE.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
}

/// `mbsp-bench checkpoint`.
#[derive(clap::Args)]
struct CheckpointArgs {
    /// MiB of registered memory checkpointed (both processes together).
    #[arg(long, default_value = "1024", value_parser = cli::at_least("--mib", 1))]
    mib: usize,
    /// Rounds of each figure, alternating (the median is printed).
    #[arg(long, default_value = "3", value_parser = cli::at_least("--rounds", 1))]
    rounds: usize,
    /// Seconds of the CG run (0: no CG figure).
    #[arg(long, default_value = "40")]
    cg_seconds: f64,
    /// Seconds between the CG run's checkpoints.
    #[arg(long, default_value = "10")]
    every: f64,
    /// Folder the checkpoints go to (default: a new folder in the current directory, removed
    /// at the end).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// A seconds-long smoke run (16 MiB, one round, a short CG); the numbers are not
    /// meaningful.
    #[arg(long)]
    quick: bool,
    /// Print the figures as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also write the figures as CSV (figure, median_s, min_s, max_s, samples, ratio, target)
    /// to FILE.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
}

/// `mbsp-bench partition`.
#[derive(clap::Args)]
struct PartitionArgs {
    /// Matrix Market files (default: every matrix in MBSP_DATA_DIR/matrices, or in
    /// ../shared/data/matrices beside the repository).
    #[arg(value_name = "FILES")]
    files: Vec<PathBuf>,
    /// Numbers of parts, comma-separated (default 2,4,8,16,64; 2,4 with --quick).
    #[arg(long, value_name = "P,P,...", allow_hyphen_values = true,
          value_parser = cli::counts("--procs"))]
    procs: Option<Counts>,
    /// Seed of the partitioner.
    #[arg(long, value_name = "S", default_value = "1", allow_hyphen_values = true,
          value_parser = cli::seed("--seed"))]
    seed: u64,
    /// Allowed load imbalance (the Mondriaan volumes are for 0.03).
    #[arg(long, value_name = "E", default_value = "0.03", allow_hyphen_values = true,
          value_parser = cli::non_negative("--eps"))]
    eps: f64,
    /// The partitioner's quality setting (max-flow refinement; more time, lower volume).
    #[arg(long)]
    quality: bool,
    /// Also write the rows as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Print the results as one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// A smoke run: only rajat01, bayer10 and wiki-Vote, p = 2, 4.
    #[arg(long)]
    quick: bool,
}

/// Refuses `--samples` whose times cannot fit in memory (8 bytes each, per figure).
fn samples_fit(samples: usize) -> Result<()> {
    let mut need = preflight::Need::new();
    need.add(samples as u128, 8, format!("--samples {samples} times"));
    need.check()
}

/// Refuses a collectives benchmark that cannot fit in memory: the large case at the largest p
/// (a reduction's data and its receive buffer of p parts: (p + 1) x the size on each of p
/// processes), the sort's input and sorted copy, the samples, the processes.
fn collectives_fit(o: &collectives_bench::Options) -> Result<()> {
    let p = o.procs.iter().copied().max().unwrap_or(1) as u128;
    let mut need = preflight::Need::new();
    need.add(
        p.saturating_mul(p + 1),
        o.large as u128,
        format!(
            "the large case at p = {p}: p + 1 buffers of --large-mib {} on each process",
            o.large >> 20
        ),
    );
    need.add(
        2 * o.sort_n as u128,
        8,
        format!("--sort-n {}: the input and its sorted copy", o.sort_n),
    );
    need.add(
        o.samples as u128,
        8,
        format!("--samples {} times", o.samples),
    );
    need.add(p, preflight::PER_PROCESS, format!("{p} processes"));
    need.check()
}

/// Refuses a wait benchmark that cannot fit in memory: the samples, the passes, the processes.
fn wait_fits(o: &wait_bench::Options) -> Result<()> {
    let p = o.procs.iter().copied().max().unwrap_or(1) as u128;
    let mut need = preflight::Need::new();
    need.add(
        o.samples as u128,
        8,
        format!("--samples {} times", o.samples),
    );
    need.add(o.passes as u128, 8, format!("--passes {}", o.passes));
    need.add(p, preflight::PER_PROCESS, format!("{p} processes"));
    need.check()
}

/// Refuses an FFT benchmark that cannot fit in memory: at the largest n, the data, a
/// transform's working copy and the reference (3 arrays of complex numbers); the samples; the
/// processes.
fn fft_bench_fits(o: &fft_bench::Options) -> Result<()> {
    let n = 1u128 << o.max_log;
    let p = o.procs.iter().copied().max().unwrap_or(1) as u128;
    let mut need = preflight::Need::new();
    need.add(
        3 * n,
        preflight::COMPLEX,
        format!("--max-log {}: 3 arrays of {n} complex numbers", o.max_log),
    );
    need.add(
        (o.samples as u128).saturating_mul(o.rounds as u128),
        8,
        format!("--samples {} x --rounds {} times", o.samples, o.rounds),
    );
    need.add(p, preflight::PER_PROCESS, format!("{p} processes"));
    need.check()
}

/// `mib` MiB in bytes, or a usage error naming `flag` where that overflows.
fn mib_bytes(flag: &str, mib: usize) -> Result<usize> {
    mib.checked_mul(1 << 20).ok_or_else(|| {
        Error::usage(format!(
            "{flag} {mib}: more bytes than this machine can address"
        ))
    })
}

/// Runs one benchmark.
fn run(which: Bench) -> Result<()> {
    match which {
        Bench::Mpi(a) => mpi_bench::run(&mpi_bench::Options {
            quick: a.quick,
            json: a.json,
            csv: a.csv,
        }),
        Bench::Core(a) => {
            let mut o = if a.quick {
                core_bench::Options::quick()
            } else {
                core_bench::Options::full()
            };
            if !a.quick {
                o.samples = a.samples;
            }
            samples_fit(o.samples)?;
            o.json = a.json;
            o.csv = a.csv;
            core_bench::run(&o)
        }
        Bench::Wait(a) => {
            let mut o = if a.quick {
                wait_bench::Options::quick()
            } else {
                wait_bench::Options::full()
            };
            if !a.quick {
                o.samples = a.samples;
                o.passes = a.passes;
                o.sleep = std::time::Duration::from_millis(a.sleep_ms);
            }
            o.json = a.json;
            o.csv = a.csv;
            wait_fits(&o)?;
            wait_bench::run(&o)
        }
        Bench::Layouts(a) => {
            let (layouts, rounds, steps) = if a.quick {
                (3, 2, 200)
            } else {
                (a.layouts, a.rounds, a.steps)
            };
            // Layout k allocates k small blocks: a few megabytes at the most.
            let most = layouts_bench::MAX_LAYOUTS;
            if layouts > most || a.child.is_some_and(|k| k >= most) {
                return Err(Error::usage(format!(
                    "--layouts {layouts}: at most {most} (layout k allocates k small blocks)"
                )));
            }
            if let Some(k) = a.child {
                return layouts_bench::child(k, rounds, steps);
            }
            layouts_bench::run(&layouts_bench::Options {
                layouts,
                rounds,
                steps,
                json: a.json,
                csv: a.csv,
            })
        }
        Bench::Owned(a) => {
            let mut o = if a.quick {
                owned_bench::Options::quick()
            } else {
                owned_bench::Options::full()
            };
            if !a.quick {
                o.samples = a.samples;
                o.steps = a.steps;
            }
            o.json = a.json;
            o.csv = a.csv;
            samples_fit(o.samples)?;
            owned_bench::run(&o)
        }
        Bench::Collectives(a) => {
            let large = if a.quick {
                1 << 20
            } else {
                mib_bytes("--large-mib", a.large_mib)?
            };
            let o = collectives_bench::Options {
                samples: if a.quick { 2 } else { a.samples },
                procs: a.procs.0,
                large,
                sort_n: if a.quick {
                    a.sort_n.min(100_000)
                } else {
                    a.sort_n
                },
                json: a.json,
                csv: a.csv,
                crossover_words: if a.quick {
                    vec![16, 1024]
                } else {
                    vec![16, 1024, 16384, 262144]
                },
            };
            collectives_fit(&o)?;
            collectives_bench::run(&o)
        }
        Bench::Fft(a) => {
            let max_log = if a.quick {
                a.max_log.min(14)
            } else {
                a.max_log
            };
            if a.min_log > max_log || max_log > 30 {
                return Err(Error::usage(format!(
                    "--min-log {} --max-log {max_log}: need --min-log <= --max-log <= 30",
                    a.min_log
                )));
            }
            if let Some(p) = a.procs.0.iter().find(|p| !p.is_power_of_two()) {
                return Err(Error::usage(format!(
                    "--procs {p}: the flat BSP FFT needs powers of two"
                )));
            }
            let o = fft_bench::Options {
                min_log: a.min_log,
                max_log,
                procs: a.procs.0,
                direct: a.direct,
                samples: if a.quick { 3 } else { a.samples },
                rounds: if a.quick { 1 } else { a.rounds },
                json: a.json,
                csv: a.csv,
                plot: a.plot,
            };
            fft_bench_fits(&o)?;
            fft_bench::run(&o)
        }
        Bench::Nested(a) => {
            let samples = if a.quick { 3 } else { a.samples };
            samples_fit(samples)?;
            nested_bench::run(&nested_bench::Options {
                samples,
                quick: a.quick,
                json: a.json,
                csv: a.csv,
            })
        }
        Bench::Lazy(a) => {
            samples_fit(a.samples)?;
            let mut o = if a.quick {
                lazy_bench::Options::quick()
            } else {
                lazy_bench::Options::full(a.samples)
            };
            o.json = a.json;
            o.csv = a.csv;
            lazy_bench::run(&o)
        }
        Bench::Checkpoint(a) => {
            if !(a.cg_seconds >= 0.0 && a.cg_seconds.is_finite()) {
                return Err(Error::usage(format!(
                    "--cg-seconds {}: need a number of seconds, 0 or more",
                    a.cg_seconds
                )));
            }
            if !(a.every > 0.0 && a.every.is_finite()) {
                return Err(Error::usage(format!(
                    "--every {}: need a number of seconds above 0",
                    a.every
                )));
            }
            let bytes = if a.quick {
                16 << 20
            } else {
                mib_bytes("--mib", a.mib)?
            };
            checkpoint_bench::run(&checkpoint_bench::Options {
                bytes,
                rounds: if a.quick { 1 } else { a.rounds },
                cg_seconds: if a.quick {
                    a.cg_seconds.min(0.5)
                } else {
                    a.cg_seconds
                },
                every: if a.quick { a.every.min(0.1) } else { a.every },
                dir: a.dir,
                json: a.json,
                csv: a.csv,
            })
        }
        Bench::Partition(a) => partition_bench::run(&partition_bench::Options {
            files: a.files,
            procs: a.procs.map(|c| c.0),
            seed: a.seed,
            eps: a.eps,
            csv: a.csv,
            json: a.json,
            quality: a.quality,
            quick: a.quick,
        }),
        Bench::Spmv(a) => spmv_bench::run(&a.options()),
    }
}

fn main() -> ExitCode {
    let cli = match cli::parse::<Cli>("mbsp-bench") {
        Ok(c) => c,
        Err(status) => return status,
    };
    let name = match &cli.command {
        Bench::Mpi(_) => "mbsp-bench mpi",
        Bench::Core(_) => "mbsp-bench core",
        Bench::Wait(_) => "mbsp-bench wait",
        Bench::Layouts(_) => "mbsp-bench layouts",
        Bench::Owned(_) => "mbsp-bench owned",
        Bench::Collectives(_) => "mbsp-bench collectives",
        Bench::Fft(_) => "mbsp-bench fft",
        Bench::Nested(_) => "mbsp-bench nested",
        Bench::Lazy(_) => "mbsp-bench lazy",
        Bench::Checkpoint(_) => "mbsp-bench checkpoint",
        Bench::Partition(_) => "mbsp-bench partition",
        Bench::Spmv(_) => "mbsp-bench spmv",
    };
    // This crate builds the runtime over MPI ranks (mbsp-mpi turns its `mpi` feature on): under
    // an MPI launcher every run would go over the ranks, each rank getting its own results
    // only. Only `mpi` is written for that.
    if !matches!(cli.command, Bench::Mpi(_))
        && mbsp::ranks::bsplib_world().is_some_and(|w| w.size() > 1)
    {
        let e = Error::usage(
            "under mpiexec only `mbsp-bench mpi` runs; the other benchmarks measure one machine \
             (start them without mpiexec)",
        );
        return report(&e, "mbsp-bench");
    }
    if let Err(e) = mbsp_tools::command::preamble() {
        return report(&e, "mbsp-bench");
    }
    whole_file::on_interrupt();
    // Not over ranks: each rank would watch (and probe) its own machine at the same moment;
    // nor in a layout's process, whose parent watches.
    let child = matches!(&cli.command, Bench::Layouts(a) if a.child.is_some());
    if !matches!(cli.command, Bench::Mpi(_)) && !child {
        watch::start();
    }
    match run(cli.command) {
        Ok(()) => {
            if let Some(state) = watch::finish() {
                eprintln!("{name}: {}", state.line());
            }
            ExitCode::SUCCESS
        }
        Err(e) => report(&e, name),
    }
}
