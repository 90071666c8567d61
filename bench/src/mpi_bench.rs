//! `mbsp-bench mpi`: mbsp's top level over MPI ranks against plain MPI on the same ranks, in
//! the same run (`mbsp_mpi::bench`): empty superstep against `MPI_Barrier`, one-word put +
//! sync (full, and lazy with a declared count) and bulk put and get + sync against
//! `MPI_Put`/`MPI_Get` + flush + barrier. Start it
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
            Ok((ctx.pid(), ctx.nprocs(), f))
        })
        .or_run()?;
    let Some((pid, p, figures)) = mine.value else {
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
        println!("{}", serde_json::Value::Array(rows));
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
    }
    if let Some(path) = &o.csv {
        crate::whole_file::write(path, |w| {
            use std::io::Write;
            writeln!(w, "figure,bytes,mbsp_seconds,mpi_seconds,ratio,ranks")?;
            for f in &figures {
                writeln!(
                    w,
                    "{},{},{:.9},{:.9},{:.4},{p}",
                    f.name,
                    f.bytes,
                    f.mbsp,
                    f.mpi,
                    f.mbsp / f.mpi
                )?;
            }
            Ok(())
        })
        .map_err(|e| Error::io("--csv").with_source(e))?;
    }
    Ok(())
}
