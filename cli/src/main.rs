//! `mbsp`: the command-line tool of the mbsp project.
//!
//! * `mbsp demo` (or `mbsp` alone) — the machine, placements, BSP parameters, and the FFT and
//!   SpMV checked, timed and predicted, in under a minute.
//! * `mbsp fft` — one BSP FFT of random data, checked, timed, with the cost model's choice.
//! * `mbsp params` — the BSP parameters (r, g, l) of every level of the machine tree, as a
//!   table, a JSON file for the cost functions (`MBSP_PARAMS`) and a plot.
//! * `mbsp topo` — the machine tree (detected, or loaded from XML / a synthetic description /
//!   `MBSP_TOPOLOGY`) and the placement of a (possibly nested) plan.
//! * `mbsp bench core` — synchronisation and communication costs of the runtime against
//!   baselines (spinning barrier, `std::sync::Barrier`, memcpy) measured in the same run.
//! * `mbsp bench nested` — sync latency of flat against nested runs, compact against scattered.
//! * `mbsp bench fft` — the BSP FFT against sequential rustfft, in Gflop/s.
//! * `mbsp bench collectives` — the collectives against their BSP prediction and hand-written
//!   put + sync, and sample sort against the sequential and rayon sorts.
//! * `mbsp partition` — split a sparse matrix over p processes, write Mondriaan's files.
//! * `mbsp bench partition` — communication volume against Mondriaan 4.2.1 and the 1D row-block
//!   and 2D checkerboard baselines.
//! * `mbsp bench spmv` — SpMV Mflop/s of the mbsp variants against sequential and rayon CSR,
//!   and the bandwidth achieved against a STREAM triad.

mod collectives_bench;
mod core_bench;
mod demo;
mod fft_bench;
mod fft_cmd;
mod fftw;
mod floor;
mod machine;
mod mpi_bench;
mod nested_bench;
mod params_cmd;
mod partition_bench;
mod partition_cmd;
mod preflight;
mod sort_bench;
mod spmv_bench;
mod spmv_cmd;
mod stats;
mod topo;
mod whole_file;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "mbsp",
    version,
    about = "mbsp: hierarchical BSP on NUMA machines"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// The project in a minute (also what `mbsp` without arguments runs): the machine tree,
    /// nested placements under both policies, the measured BSP parameters, and the FFT and SpMV
    /// verified and timed against sequential baselines and their BSP predictions.
    Demo {
        /// A smoke run in seconds (small problems; the numbers are not meaningful).
        #[arg(long)]
        quick: bool,
    },
    /// Print the machine tree and, with -p, the placement of a plan.
    Topo {
        /// Load the tree from an hwloc XML file.
        #[arg(long, value_name = "FILE")]
        xml: Option<String>,
        /// Load the tree from an hwloc synthetic description, e.g. "package:2 numa:2 core:8 pu:2".
        #[arg(long, value_name = "DESC")]
        synthetic: Option<String>,
        /// Top-level processes: a number, or a level (package, numa, core, pu) for one per object.
        #[arg(short = 'p', long = "procs", value_name = "N|LEVEL")]
        procs: Option<topo::Count>,
        /// A nested level inside each process (repeat for deeper nesting): a number or a level.
        #[arg(long, value_name = "N|LEVEL")]
        nest: Vec<topo::Count>,
        /// Placement policy.
        #[arg(long, default_value = "scattered", value_parser = ["compact", "scattered", "manual"])]
        policy: String,
        /// CPU sets for --policy manual, one per top-level process: "0-3;4-7".
        #[arg(long, value_name = "SETS")]
        cpus: Option<String>,
        /// Print JSON: per process pid, package, numa, cores, pus and children.
        #[arg(long)]
        json: bool,
    },
    /// One BSP FFT of random data: time, Gflop/s, error against sequential rustfft, and the
    /// cost model's flat/nested choice.
    Fft {
        /// Transform length (a power of two).
        #[arg(long, value_name = "N")]
        n: usize,
        /// Processes of the flat variant (a power of two; default: the hardware threads).
        #[arg(short = 'p', long = "procs", value_name = "P")]
        procs: Option<usize>,
        /// The Multi-BSP variant over the machine tree (MBSP_TOPOLOGY is honoured).
        #[arg(long)]
        nested: bool,
        /// The inverse transform (scaled by 1/n).
        #[arg(long)]
        inverse: bool,
        /// Timed transforms after a warm-up (the median is reported).
        #[arg(long, default_value_t = 5)]
        reps: usize,
        /// Print one JSON object (n, p, variant, seconds, gflops, rel_error, choice, ...).
        #[arg(long)]
        json: bool,
    },
    /// Multiply by one sparse matrix with the 2D BSP SpMV (partitioned first), check the result
    /// against sequential CSR, print Mflop/s and the speedup.
    Spmv {
        /// The Matrix Market file.
        #[arg(value_name = "FILE")]
        file: std::path::PathBuf,
        /// Processes.
        #[arg(short = 'p', long = "procs", value_name = "P", default_value_t = 2)]
        procs: usize,
        /// Variant: plain (gets and puts, two supersteps), hp (direct_get and hpsend, one
        /// superstep) or hier (packages of the machine, each a nested run over its cores).
        #[arg(long, value_name = "V", default_value = "plain")]
        variant: String,
        /// Multiplies timed (median of 9 batches).
        #[arg(long, default_value_t = 500)]
        reps: usize,
        /// Use the partition in Mondriaan's files PREFIX-P4, PREFIX-u4, PREFIX-v4 (for -p 4; as
        /// written by `mbsp partition --out PREFIX` or Mondriaan) instead of partitioning;
        /// plain and hp only.
        #[arg(long, value_name = "PREFIX")]
        partition: Option<std::path::PathBuf>,
        /// Print one JSON object (matrix, p, variant, mflops, speedup, max_rel_error,
        /// partition_seconds, ...).
        #[arg(long)]
        json: bool,
    },
    /// Partition a sparse matrix (Matrix Market, .mtx or .mtx.gz) into p parts with minimal
    /// communication volume and write Mondriaan's files PREFIX-P4, PREFIX-u4 and PREFIX-v4 for p = 4.
    Partition {
        /// The Matrix Market file.
        #[arg(value_name = "FILE")]
        file: std::path::PathBuf,
        /// Number of parts (a positive integer).
        #[arg(
            short = 'p',
            long = "procs",
            value_name = "P",
            allow_hyphen_values = true
        )]
        procs: String,
        /// Allowed load imbalance: every part gets at most (1 + eps) nnz / p nonzeros.
        #[arg(
            long,
            value_name = "E",
            default_value = "0.03",
            allow_hyphen_values = true
        )]
        eps: String,
        /// Seed of the partitioner's random choices.
        #[arg(
            long,
            value_name = "S",
            default_value = "1",
            allow_hyphen_values = true
        )]
        seed: String,
        /// Prefix of the output files (default: the input path; a directory: the input's name
        /// inside it).
        #[arg(long, value_name = "PREFIX")]
        out: Option<std::path::PathBuf>,
        /// Print one JSON object (volume, imbalance, max_h, seconds, p, nnz, m, n, files, ...).
        #[arg(long)]
        json: bool,
    },
    /// Measure the BSP parameters (r, g, l) of every level of the machine tree under both
    /// affinity policies: a table like the BSPlib paper's Table 1, the JSON file the cost
    /// functions read (MBSP_PARAMS) and a plot of time against h with the fitted lines.
    Params {
        /// Write the parameters as JSON to FILE (then: MBSP_PARAMS=FILE).
        #[arg(long, value_name = "FILE")]
        json: Option<std::path::PathBuf>,
        /// Plot time per superstep against h with the fitted lines (SVG) to FILE.
        #[arg(long, value_name = "FILE")]
        plot: Option<std::path::PathBuf>,
        /// Only these levels, comma-separated: machine (a process per core), packages (a
        /// process per package), package (the cores of one), numa, core (its hardware threads).
        #[arg(long, value_delimiter = ',', value_name = "LEVEL,...")]
        levels: Option<Vec<String>>,
        /// Samples per point (the median is used).
        #[arg(long, default_value_t = 7)]
        samples: usize,
        /// Largest h of the h-relations, in 8-byte words.
        #[arg(long, default_value_t = 4096)]
        max_h: usize,
        /// A smoke run (h up to 1024, short samples); the numbers are not meaningful.
        #[arg(long)]
        quick: bool,
    },
    /// Run a benchmark.
    Bench {
        #[command(subcommand)]
        which: Bench,
    },
}

#[derive(Subcommand)]
enum Bench {
    /// The MPI engine against plain MPI on the same ranks, same run: empty sync against
    /// MPI_Barrier, one-word put + sync and 16 MiB put and get + sync against MPI_Put/MPI_Get +
    /// flush + barrier. Start it under `mpiexec -n 2` (or more); rank 0 prints.
    Mpi {
        /// A seconds-long smoke run (1 MiB bulk, few batches); the numbers are not meaningful.
        #[arg(long)]
        quick: bool,
        /// Print the figures as JSON.
        #[arg(long)]
        json: bool,
        /// Also write the figures as CSV (figure, bytes, mbsp_seconds, mpi_seconds, ratio,
        /// ranks) to FILE.
        #[arg(long, value_name = "FILE")]
        csv: Option<std::path::PathBuf>,
    },
    /// Empty-sync latency, one-word put + sync, bulk put throughput and an oversubscribed ring,
    /// against a spinning barrier, std::sync::Barrier and memcpy.
    Core {
        /// Samples per figure (the median is printed).
        #[arg(long, default_value_t = 7)]
        samples: usize,
        /// A seconds-long smoke run; the numbers are not meaningful.
        #[arg(long)]
        quick: bool,
    },
    /// Each collective for one word and for large data at p = 1, 2, 4, next to its BSP-predicted
    /// time and to the same operation written with put + sync; then sample sort against the
    /// sequential and rayon sorts.
    Collectives {
        /// Samples per figure (the median is printed).
        #[arg(long, default_value_t = 5)]
        samples: usize,
        /// Process counts, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
        procs: Vec<usize>,
        /// Size of the large case in MiB.
        #[arg(long, default_value_t = 16)]
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
    },
    /// Gflop/s of the BSP FFT (flat, p = 1, 2, ...) against sequential rustfft, n = 2^10 ... 2^24.
    Fft {
        /// log2 of the smallest n.
        #[arg(long, default_value_t = 10)]
        min_log: u32,
        /// log2 of the largest n.
        #[arg(long, default_value_t = 24)]
        max_log: u32,
        /// Process counts of the flat BSP FFT (powers of two), comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "1,2")]
        procs: Vec<usize>,
        /// Timed transforms per figure (the median is printed).
        #[arg(long, default_value_t = 9)]
        samples: usize,
        /// Rounds the samples are taken in, every variant in turn each round (a change of the
        /// machine's speed then reaches all variants alike).
        #[arg(long, default_value_t = 3)]
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
    },
    /// Sync latency of a flat run of p against nested runs (2 x p/2), compact against scattered.
    Nested {
        /// Samples per figure (the median is printed).
        #[arg(long, default_value_t = 7)]
        samples: usize,
        /// A seconds-long smoke run; the numbers are not meaningful.
        #[arg(long)]
        quick: bool,
    },
    /// Communication volume of the sparse-matrix partitioner against Mondriaan 4.2.1 and the 1D
    /// row-block and 2D checkerboard baselines, per matrix and p.
    Partition {
        /// Matrix Market files (default: every matrix in shared/data/matrices, found through
        /// MBSP_DATA_DIR, in or above the current directory, or /work/shared/data).
        #[arg(value_name = "FILES")]
        files: Vec<std::path::PathBuf>,
        /// Numbers of parts, comma-separated (default 2,4,8,16,64; 2,4 with --quick).
        #[arg(long, value_name = "P,P,...")]
        procs: Option<String>,
        /// Seed of the partitioner.
        #[arg(
            long,
            value_name = "S",
            default_value = "1",
            allow_hyphen_values = true
        )]
        seed: String,
        /// Allowed load imbalance (the Mondriaan volumes are for 0.03).
        #[arg(
            long,
            value_name = "E",
            default_value = "0.03",
            allow_hyphen_values = true
        )]
        eps: String,
        /// Also write the rows as CSV to FILE.
        #[arg(long, value_name = "FILE")]
        csv: Option<std::path::PathBuf>,
        /// Print the results as one JSON object instead of a table.
        #[arg(long)]
        json: bool,
        /// A smoke run: only rajat01, bayer10 and wiki-Vote, p = 2, 4.
        #[arg(long)]
        quick: bool,
    },
    /// SpMV Mflop/s and speedup over sequential CSR of rayon row-parallel CSR and each mbsp
    /// variant, per matrix and p, with the bandwidth achieved against a STREAM triad, all
    /// measured in the same run (options: `mbsp bench spmv --help`).
    #[command(disable_help_flag = true)]
    Spmv {
        /// Matrix files and options, parsed by the benchmark itself (`mbsp bench spmv --help`)
        /// so that every bad argument, an unknown option too, is reported in one line.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<std::ffi::OsString>,
    },
}

/// A parameter file named by `MBSP_PARAMS` that cannot be used is an error of the command
/// line (exit status 2), not a warning: the predictions printed would silently come from the
/// defaults. It is read whole, but no more than [`PARAMS_FILE_LIMIT`] bytes of it.
fn check_params_file() {
    let Some(path) = std::env::var_os(mbsp_algorithms::cost::PARAMS_ENV) else {
        return;
    };
    let checked = read_bounded(std::path::Path::new(&path), PARAMS_FILE_LIMIT)
        .and_then(|text| mbsp_algorithms::cost::Params::from_json(&text).map(|_| ()));
    if let Err(e) = checked {
        let e = format!(
            "{}={}: {e} (write one with `mbsp params --json FILE`)",
            mbsp_algorithms::cost::PARAMS_ENV,
            path.to_string_lossy()
        );
        fail("mbsp", e, 2);
    }
}

/// The most bytes a parameter file may hold: the files `mbsp params --json` writes are a few
/// kilobytes; anything this large is not one (and `/dev/zero` must not be read to the end).
const PARAMS_FILE_LIMIT: u64 = 16 << 20;

/// The text of `path`, if it holds at most `limit` bytes of UTF-8.
fn read_bounded(path: &std::path::Path, limit: u64) -> Result<String, String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(limit + 1).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            "the file is larger than {limit} bytes, too large for a parameter file"
        ));
    }
    String::from_utf8(bytes).map_err(|_| "the file is not UTF-8 text".to_string())
}

/// Refuses `--samples` whose times cannot fit in memory (8 bytes each, per figure).
fn samples_fit(samples: usize) -> Result<(), String> {
    let mut need = preflight::Need::new();
    need.add(samples as u128, 8, format!("--samples {samples} times"));
    need.check()
}

/// Refuses a collectives benchmark that cannot fit in memory: the large case at the largest p
/// (a reduction's data and its receive buffer of p parts: (p + 1) x the size on each of p
/// processes), the sort's input and sorted copy, the samples, the processes.
fn collectives_fit(o: &collectives_bench::Options) -> Result<(), String> {
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

/// Refuses an FFT benchmark that cannot fit in memory: at the largest n, the data, a
/// transform's working copy and the reference (3 arrays of complex numbers); the samples; the
/// processes.
fn fft_bench_fits(o: &fft_bench::Options) -> Result<(), String> {
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

/// Ends the program with `status` after printing `cmd: e` as one line, with any control
/// characters escaped: a message may quote a path or input, and raw control bytes (NUL, ESC)
/// must not reach the terminal.
fn fail(cmd: &str, e: impl std::fmt::Display, status: i32) -> ! {
    eprintln!("{cmd}: {}", mbsp_algorithms::text::escaped(&e.to_string()));
    std::process::exit(status);
}

fn main() {
    let cli = Cli::parse();
    let mpi_bench = matches!(
        &cli.command,
        Some(Command::Bench {
            which: Bench::Mpi { .. }
        })
    );
    if !mpi_bench && mbsp::mpi_ranks().is_some_and(|(_, ranks)| ranks > 1) {
        // Their runs would go over the ranks, each rank getting its own results only.
        eprintln!(
            "mbsp: under mpiexec only `mbsp bench mpi` runs; the other commands measure one \
             machine (start them without mpiexec)"
        );
        std::process::exit(2);
    }
    whole_file::on_interrupt();
    check_params_file();
    match cli.command.unwrap_or(Command::Demo { quick: false }) {
        Command::Demo { quick } => {
            if let Err(e) = demo::run(&demo::Options { quick }) {
                fail("mbsp demo", e, 1);
            }
        }
        Command::Topo {
            xml,
            synthetic,
            procs,
            nest,
            policy,
            cpus,
            json,
        } => {
            let policy = match (policy.as_str(), cpus) {
                ("compact", None) => Ok(mbsp_topology::Policy::Compact),
                ("scattered", None) => Ok(mbsp_topology::Policy::Scattered),
                ("manual", Some(c)) => mbsp::parse_cpu_sets(&c)
                    .map(mbsp_topology::Policy::Manual)
                    .map_err(|e| e.to_string()),
                ("manual", None) => {
                    Err("--policy manual needs --cpus \"<cpus>;<cpus>;...\"".to_string())
                }
                (_, Some(_)) => Err("--cpus goes with --policy manual".to_string()),
                _ => unreachable!("clap checks the policy"),
            };
            let result = policy.and_then(|policy| {
                topo::run(topo::Options {
                    xml,
                    synthetic,
                    procs,
                    nest,
                    policy,
                    json,
                })
            });
            if let Err(e) = result {
                fail("mbsp topo", e, 2);
            }
        }
        Command::Fft {
            n,
            procs,
            nested,
            inverse,
            reps,
            json,
        } => {
            let o = fft_cmd::Options {
                n,
                p: procs,
                nested,
                inverse,
                json,
                reps,
            };
            if let Err(e) = fft_cmd::run(&o) {
                fail("mbsp fft", e, 2);
            }
        }
        Command::Spmv {
            file,
            procs,
            variant,
            reps,
            partition,
            json,
        } => {
            let o = spmv_cmd::Options {
                file,
                p: procs,
                variant,
                reps,
                partition,
                json,
            };
            if let Err(e) = spmv_cmd::run(&o) {
                fail("mbsp spmv", e, 2);
            }
        }
        Command::Partition {
            file,
            procs,
            eps,
            seed,
            out,
            json,
        } => {
            let o = partition_cmd::Options {
                file,
                p: procs,
                eps,
                seed,
                out,
                json,
            };
            if let Err(e) = partition_cmd::run(&o) {
                fail("mbsp partition", e, 2);
            }
        }
        Command::Params {
            json,
            plot,
            levels,
            samples,
            max_h,
            quick,
        } => {
            let mut o = if quick {
                params_cmd::Options::quick()
            } else {
                params_cmd::Options::full()
            };
            o.json = json;
            o.plot = plot;
            o.levels = levels;
            let result = if samples == 0 || max_h < 8 {
                Err("--samples must be >= 1 and --max-h >= 8".to_string())
            } else {
                if !quick {
                    o.samples = samples;
                    o.max_h = max_h;
                }
                params_cmd::run(&o)
            };
            if let Err(e) = result {
                fail("mbsp params", e, 2);
            }
        }
        Command::Bench { which } => match which {
            Bench::Mpi { quick, json, csv } => {
                if let Err(e) = mpi_bench::run(&mpi_bench::Options { quick, json, csv }) {
                    fail("mbsp bench mpi", e, 2);
                }
            }
            Bench::Core { samples, quick } => {
                let mut o = if quick {
                    core_bench::Options::quick()
                } else {
                    core_bench::Options::full()
                };
                if !quick {
                    o.samples = samples.max(1);
                }
                if let Err(e) = samples_fit(o.samples) {
                    fail("mbsp bench core", e, 2);
                }
                core_bench::run(&o);
            }
            Bench::Collectives {
                samples,
                procs,
                large_mib,
                sort_n,
                quick,
                json,
                csv,
            } => {
                if procs.is_empty() || procs.contains(&0) || large_mib == 0 {
                    fail(
                        "mbsp bench collectives",
                        "--procs needs counts >= 1 and --large-mib >= 1",
                        2,
                    );
                }
                let large = if quick {
                    Some(1 << 20)
                } else {
                    large_mib.checked_mul(1 << 20)
                };
                let Some(large) = large else {
                    fail(
                        "mbsp bench collectives",
                        format!(
                            "--large-mib {large_mib}: more bytes than this machine can address"
                        ),
                        2,
                    );
                };
                let o = collectives_bench::Options {
                    samples: if quick { 2 } else { samples.max(1) },
                    procs,
                    large,
                    sort_n: if quick { sort_n.min(100_000) } else { sort_n },
                    json,
                    csv,
                };
                if let Err(e) = collectives_fit(&o) {
                    fail("mbsp bench collectives", e, 2);
                }
                if let Err(e) = collectives_bench::run(&o) {
                    fail("mbsp bench collectives", e, 2);
                }
            }
            Bench::Fft {
                min_log,
                max_log,
                procs,
                samples,
                rounds,
                quick,
                json,
                csv,
                plot,
            } => {
                let max_log = if quick { max_log.min(14) } else { max_log };
                if min_log > max_log || max_log > 30 || procs.iter().any(|p| !p.is_power_of_two()) {
                    fail(
                        "mbsp bench fft",
                        "need --min-log <= --max-log <= 30 and --procs powers of two",
                        2,
                    );
                }
                let o = fft_bench::Options {
                    min_log,
                    max_log,
                    procs,
                    samples: if quick { 3 } else { samples.max(1) },
                    rounds: if quick { 1 } else { rounds.max(1) },
                    json,
                    csv,
                    plot,
                };
                if let Err(e) = fft_bench_fits(&o) {
                    fail("mbsp bench fft", e, 2);
                }
                if let Err(e) = fft_bench::run(&o) {
                    fail("mbsp bench fft", e, 2);
                }
            }
            Bench::Nested { samples, quick } => {
                let samples = if quick { 3 } else { samples.max(1) };
                if let Err(e) = samples_fit(samples) {
                    fail("mbsp bench nested", e, 2);
                }
                nested_bench::run(samples, quick)
            }
            Bench::Partition {
                files,
                procs,
                seed,
                eps,
                csv,
                json,
                quick,
            } => {
                let result = (|| {
                    let o = partition_bench::Options {
                        files,
                        procs: procs
                            .as_deref()
                            .map(partition_bench::parse_procs)
                            .transpose()?,
                        seed: partition_cmd::parse_seed(&seed)?,
                        eps: partition_cmd::parse_eps(&eps)?,
                        csv,
                        json,
                        quick,
                    };
                    partition_bench::run(&o)
                })();
                if let Err(e) = result {
                    fail("mbsp bench partition", e, 2);
                }
            }
            Bench::Spmv { args } => {
                if let Err(e) = spmv_bench::parse_args(&args).and_then(|o| spmv_bench::run(&o)) {
                    fail("mbsp bench spmv", e, 2);
                }
            }
        },
    }
}
