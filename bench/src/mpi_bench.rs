//! `mbsp-bench mpi`: mbsp's top level over MPI ranks against plain MPI on the same ranks, in
//! the same run (`mbsp_mpi::bench`): empty superstep against `MPI_Barrier`, one-word put +
//! sync (full, and lazy with a declared count) and bulk put and get + sync against
//! `MPI_Put`/`MPI_Get` + flush + barrier; then the hybrid figures (thread runs nested in the
//! ranks): a random-communication program with a nested run every few supersteps against the
//! same without, and a nested run's start in a rank against its start on threads. Start it
//! under `mpiexec -n P`; rank 0 prints.

use mbsp_tools::{Classify, Error, Result};
use std::path::PathBuf;

/// What to run and where the results go.
pub struct Options {
    /// Smoke run.
    pub quick: bool,
    /// JSON instead of the table.
    pub json: bool,
    /// CSV output file.
    pub csv: Option<PathBuf>,
}

/// Measures on every rank; rank 0 prints and writes.
pub fn run(o: &Options) -> Result<()> {
    if let Some(path) = &o.csv {
        crate::spmv_bench::check_output("--csv", std::path::Path::new(path))?;
    }
    let m = if o.quick {
        mbsp_mpi::bench::Options {
            reps: 200,
            batches: 3,
            bulk: 1 << 20,
        }
    } else {
        mbsp_mpi::bench::Options {
            reps: 2000,
            batches: 7,
            bulk: 16 << 20,
        }
    };
    let h = if o.quick {
        mbsp_mpi::bench::HybridOptions {
            supersteps: 2000,
            every: 500,
            rounds: 1,
            starts: 50,
        }
    } else {
        mbsp_mpi::bench::HybridOptions {
            supersteps: 20_000,
            every: 1000,
            rounds: 3,
            starts: 1000,
        }
    };
    let world = mbsp::ranks::World::init().or_run()?;
    let ranks = world.size();
    let mine = world
        .run(mbsp::Run::new(ranks), |ctx| {
            if ctx.pid() == 0 {
                eprintln!(
                    "mbsp-bench mpi: {} ranks; {} batches per figure, {} operations per batch ({} \
                 for the bulk figures of {} MiB), mbsp and plain MPI interleaved",
                    ctx.nprocs(),
                    m.batches,
                    m.reps,
                    (m.reps / 10).max(2),
                    m.bulk >> 20
                );
                if ctx.nprocs() == 1 {
                    eprintln!("mbsp-bench mpi: one rank; start it under `mpiexec -n 2` to measure");
                }
            }
            let f = mbsp_mpi::bench::measure(ctx, &m)?;
            if ctx.pid() == 0 {
                eprintln!(
                    "mbsp-bench mpi: hybrid: {} supersteps with a nested run of 2 every {} and \
                     without, {} round(s) each, alternating; {} nested starts per round",
                    h.supersteps, h.every, h.rounds, h.starts
                );
            }
            let hy = mbsp_mpi::bench::hybrid(ctx, &h)?;
            Ok((ctx.pid(), ctx.nprocs(), f, hy))
        })
        .or_run()?;
    let Some((pid, p, figures, hybrid)) = mine.value else {
        return Ok(());
    };
    if pid != 0 {
        return Ok(());
    }
    let barrier = figures[0].mpi;
    let gbs = |bytes: usize, s: f64| bytes as f64 / s / 1e9;
    if o.json {
        let rows: Vec<serde_json::Value> = figures
            .iter()
            .map(|f| {
                serde_json::json!({
                    "figure": f.name, "bytes": f.bytes, "mbsp_seconds": f.mbsp,
                    "mpi_seconds": f.mpi, "ratio": f.mbsp / f.mpi, "ranks": p,
                })
            })
            .collect();
        let hy = &hybrid;
        let hrows = vec![
            serde_json::json!({
                "figure": format!("{} supersteps, a nested run every {}", h.supersteps, h.every),
                "seconds": hy.with_nested, "baseline": "the same without nested runs",
                "baseline_seconds": hy.without, "ratio": hy.with_nested / hy.without, "ranks": p,
            }),
            serde_json::json!({
                "figure": "a nested run's start in a rank", "seconds": hy.start_in_rank,
                "baseline": "its start on threads, on the rank's share",
                "baseline_seconds": hy.start_on_threads,
                "ratio": hy.start_in_rank / hy.start_on_threads, "ranks": p,
            }),
        ];
        println!(
            "{}",
            serde_json::json!({ "figures": rows, "hybrid": hrows, "share": hy.share })
        );
    } else {
        println!("mbsp-bench mpi: {p} ranks (every rank to the next), medians");
        println!(
            "{:<16} {:>10} {:>12} {:>12} {:>9} {:>13}",
            "figure", "bytes", "mbsp", "plain MPI", "mbsp/MPI", "per barrier"
        );
        for f in &figures {
            let (a, b) = if f.bytes > 8 {
                (
                    format!("{:.2} GB/s", gbs(f.bytes, f.mbsp)),
                    format!("{:.2} GB/s", gbs(f.bytes, f.mpi)),
                )
            } else {
                (
                    format!("{:.2} µs", f.mbsp * 1e6),
                    format!("{:.2} µs", f.mpi * 1e6),
                )
            };
            let per_barrier = if f.bytes > 8 {
                "-".to_string()
            } else {
                format!("{:.2}", f.mbsp / barrier)
            };
            println!(
                "{:<16} {:>10} {:>12} {:>12} {:>9.2} {:>13}",
                f.name,
                f.bytes,
                a,
                b,
                f.mbsp / f.mpi,
                per_barrier
            );
        }
        println!("(plain MPI: MPI_Barrier; MPI_Put or MPI_Get + MPI_Win_flush + MPI_Barrier)");
        let mark = |ok: bool| if ok { "met   " } else { "missed" };
        let named = |n: &str| figures.iter().find(|f| f.name == n).expect("a figure");
        let (empty, put1, bulk) = (&figures[0], named("one-word put"), named("bulk put"));
        let lazy1 = named("one-word expect");
        println!("targets (from the issue):");
        println!(
            "  [{}] empty sync <= 2x MPI_Barrier: {:.2}x",
            mark(empty.mbsp <= 2.0 * barrier),
            empty.mbsp / barrier
        );
        println!(
            "  [{}] one-word put + sync <= 3x MPI_Barrier: {:.2}x",
            mark(put1.mbsp <= 3.0 * barrier),
            put1.mbsp / barrier
        );
        println!(
            "  (one-word put with a declared count, a lazy sync: {:.2}x the full sync's)",
            lazy1.mbsp / put1.mbsp
        );
        println!(
            "  [{}] bulk put >= 80% of MPI_Put's bandwidth: {:.0}%",
            mark(bulk.mpi / bulk.mbsp >= 0.8),
            100.0 * bulk.mpi / bulk.mbsp
        );
        print_hybrid(&hybrid, &h, p);
    }
    if let Some(path) = &o.csv {
        crate::whole_file::write(path, |w| {
            use std::io::Write;
            writeln!(w, "figure,bytes,mbsp_seconds,baseline,baseline_seconds,ratio,ranks")?;
            for f in &figures {
                writeln!(
                    w,
                    "{},{},{:.9},plain MPI,{:.9},{:.4},{p}",
                    f.name,
                    f.bytes,
                    f.mbsp,
                    f.mpi,
                    f.mbsp / f.mpi
                )?;
            }
            let hy = &hybrid;
            writeln!(
                w,
                "{} supersteps with a nested run every {},0,{:.9},without nested runs,{:.9},{:.4},{p}",
                h.supersteps,
                h.every,
                hy.with_nested,
                hy.without,
                hy.with_nested / hy.without
            )?;
            writeln!(
                w,
                "nested run start in a rank,0,{:.9},on threads on the rank's share,{:.9},{:.4},{p}",
                hy.start_in_rank,
                hy.start_on_threads,
                hy.start_in_rank / hy.start_on_threads
            )?;
            Ok(())
        })
        .map_err(|e| Error::io("--csv").with_source(e))?;
    }
    Ok(())
}

/// The hybrid table: ranks on top, thread runs nested in each, with the targets.
fn print_hybrid(hy: &mbsp_mpi::bench::Hybrid, h: &mbsp_mpi::bench::HybridOptions, p: usize) {
    let mark = |ok: bool| if ok { "met   " } else { "missed" };
    let slow = hy.with_nested / hy.without;
    let start = hy.start_in_rank / hy.start_on_threads;
    println!();
    println!(
        "hybrid: {p} ranks, thread runs of 2 nested in each (rank 0's share: PUs {}), medians",
        mbsp::topology::ranges(hy.share.iter().copied())
    );
    println!(
        "{:<46} {:>12} {:>12} {:>7}",
        "figure", "seconds", "baseline", "ratio"
    );
    println!(
        "{:<46} {:>12.4} {:>12.4} {:>7.2}",
        format!(
            "{} supersteps, a nested run every {}",
            h.supersteps, h.every
        ),
        hy.with_nested,
        hy.without,
        slow
    );
    println!(
        "{:<46} {:>9.2} µs {:>9.2} µs {:>7.2}",
        "a nested run's start (2 processes, 1 sync)",
        hy.start_in_rank * 1e6,
        hy.start_on_threads * 1e6,
        start
    );
    println!(
        "(baselines: the same program without nested runs; the same nested run in a thread run \
         on the rank's share)"
    );
    println!("targets (from the issue):");
    println!(
        "  [{}] with nested runs <= 2x without: {slow:.2}x",
        mark(slow <= 2.0)
    );
    println!(
        "  [{}] a nested run's start in a rank <= 2x on threads: {start:.2}x",
        mark(start <= 2.0)
    );
}
