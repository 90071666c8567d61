//! `mbsp-bench checkpoint`: what checkpoints cost (issue 43), each figure beside its reference
//! measured in the same run, in alternating rounds:
//!
//! * **Bandwidth**: a checkpoint of `--mib` MiB of registered memory at p = 2 (each process
//!   registers half), written in the foreground, against the folder's disk writing the same
//!   number of bytes sequentially from one thread (buffered writes, `fsync`, rename: what a
//!   checkpoint's file goes through). Target: at least 0.8 of the disk's rate.
//! * **The superstep's cost**: the same checkpoint in the background (the copy, not the disk,
//!   is on the superstep's path), and a `sync_checkpoint` that takes no checkpoint against a
//!   plain `sync`.
//! * **CG**: conjugate gradients on a 2D Laplacian at p = 2 for about `--cg-seconds`, with and
//!   without a checkpoint every `--every` seconds (its vectors are the state). Target: under 2%
//!   more time.
//!
//! The checkpoints go to `--dir` (default: a folder made in the current directory, removed at
//! the end), whose file system is named in the output: on tmpfs the "disk" is memory.

use crate::stats::{Samples, ns};
use mbsp::{Checkpoints, Ctx, Run};
use mbsp_algorithms::collectives::Comm;
use mbsp_algorithms::sparse::CooMatrix;
use mbsp_algorithms::sparse::partition::{Options as PartOptions, partition_square};
use mbsp_algorithms::sparse::spmv::{Spmv, SpmvPlan};
use mbsp_tools::{Error, Result};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Options of `mbsp-bench checkpoint`.
#[derive(Clone, Debug)]
pub struct Options {
    /// Registered bytes of the bandwidth figure (all processes together).
    pub bytes: usize,
    /// Rounds of each figure (the median is reported).
    pub rounds: usize,
    /// The CG run's length in seconds (0: no CG figure).
    pub cg_seconds: f64,
    /// Seconds between the CG run's checkpoints.
    pub every: f64,
    /// Where the checkpoints go (default: a new folder in the current directory).
    pub dir: Option<PathBuf>,
    /// Print JSON instead of tables.
    pub json: bool,
    /// Also write the figures as CSV to this file.
    pub csv: Option<PathBuf>,
}

/// One figure: its samples (seconds) and what it is compared with.
struct Row {
    name: &'static str,
    samples: Samples,
    /// (the reference's row, the target ratio if any, whether higher is better)
    against: Option<(usize, Option<f64>, bool)>,
}

/// The file system `dir` is on (from /proc/mounts: the longest mount point above it).
fn file_system(dir: &Path) -> String {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            (w.len() > 2 && dir.starts_with(w[1])).then(|| (w[1].len(), w[2].to_string()))
        })
        .max()
        .map_or_else(|| "unknown".into(), |(_, fs)| fs)
}

/// Seconds to write `bytes` bytes to a new file in `dir` from one thread, synced and renamed.
fn disk_write(dir: &Path, bytes: usize) -> std::io::Result<f64> {
    let chunk = vec![0x5au8; 8 << 20];
    let (tmp, path) = (dir.join(".disk.tmp"), dir.join("disk"));
    let t = Instant::now();
    let mut w = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp)?);
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len());
        w.write_all(&chunk[..n])?;
        left -= n;
    }
    let f = w
        .into_inner()
        .map_err(std::io::IntoInnerError::into_error)?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    std::fs::File::open(dir)?.sync_all()?;
    let s = t.elapsed().as_secs_f64();
    std::fs::remove_file(&path)?;
    Ok(s)
}

/// Seconds of a checkpoint of `bytes` registered bytes at p = 2 (process 0's view of
/// `Ctx::checkpoint`), in the foreground or the background: the run's first, a later one (in
/// the background, taken once the first was written), and, for the later one, the seconds until
/// the run's end has waited for the writers.
fn checkpoint_once(dir: &Path, bytes: usize, background: bool) -> Result<(f64, f64, f64)> {
    let folder = dir.join(if background { "bg" } else { "fg" });
    let _ = std::fs::remove_dir_all(&folder);
    let policy = Checkpoints::in_folder(&folder)
        .keep(1)
        .background(background);
    let r = Run::new(2).checkpoints(policy).run(|ctx| {
        let _area = ctx.push_reg(vec![0xa5u8; bytes / 2])?;
        ctx.sync()?;
        let mut t = Instant::now();
        ctx.checkpoint(&())?;
        let first = t.elapsed().as_secs_f64();
        if !background {
            return Ok((first, first, Instant::now()));
        }
        // The steady state of a run that checkpoints every so often: the previous checkpoint
        // written (its copy's buffers free again) when the next is taken.
        while ctx.newest_checkpoint()?.is_none() {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(50));
        ctx.sync()?;
        t = Instant::now();
        ctx.checkpoint(&())?;
        Ok((first, t.elapsed().as_secs_f64(), Instant::now()))
    });
    // The run's end waits for a background writer: from the call's return to the run's end.
    let (first, later, returned) =
        r.map_err(|e| Error::io(format!("checkpoint of {bytes} bytes: {e}")))?[0];
    let durable = returned.elapsed().as_secs_f64();
    std::fs::remove_dir_all(&folder)
        .map_err(|e| Error::io(format!("{}: {e}", folder.display())))?;
    Ok((first, later, later + durable))
}

/// Nanoseconds per `sync` and per `sync_checkpoint` that takes no checkpoint, at p = 2.
fn sync_costs(dir: &Path, iters: usize) -> Result<(f64, f64)> {
    let policy = Checkpoints::in_folder(dir.join("none"));
    let r = Run::new(2).checkpoints(policy).run(|ctx| {
        let time = |ctx: &mut Ctx, check: bool| -> mbsp::Result<f64> {
            ctx.sync()?;
            let t = Instant::now();
            for i in 0..iters {
                if check {
                    ctx.sync_checkpoint(&i)?;
                } else {
                    ctx.sync()?;
                }
            }
            Ok(t.elapsed().as_secs_f64() * 1e9 / iters as f64)
        };
        Ok((time(ctx, false)?, time(ctx, true)?))
    });
    Ok(r.map_err(|e| Error::io(format!("sync: {e}")))?[0])
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `iters` CG iterations on `A x = A·1`, checkpointing as the run's policy says; seconds.
fn cg(ctx: &mut Ctx, plan: &SpmvPlan, iters: usize) -> mbsp::Result<f64> {
    let mut spmv = Spmv::new(ctx, plan)?;
    let m = spmv.local().y_owned.len();
    let mut comm = Comm::new(ctx)?;
    spmv.x_mut(ctx)?.fill(1.0);
    let mut b = vec![0.0; m];
    spmv.multiply(ctx, &mut b)?;
    let mut rho = comm.allreduce_value(ctx, dot(&b, &b), |x, y| x + y)?;
    spmv.x_mut(ctx)?.copy_from_slice(&b);
    let (mut x, mut r, mut q) = (vec![0.0; m], b, vec![0.0; m]);
    let t = Instant::now();
    for it in 0..iters {
        spmv.multiply(ctx, &mut q)?;
        let pq = comm.allreduce_value(ctx, dot(spmv.x(ctx)?, &q), |x, y| x + y)?;
        let alpha = rho / pq;
        let p = spmv.x(ctx)?;
        for i in 0..m {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        let next = comm.allreduce_value(ctx, dot(&r, &r), |x, y| x + y)?;
        let beta = next / rho;
        rho = next;
        let p = spmv.x_mut(ctx)?;
        for i in 0..m {
            p[i] = r[i] + beta * p[i];
        }
        ctx.sync_checkpoint(&(&x, &r, rho, it))?;
    }
    let s = t.elapsed().as_secs_f64();
    comm.free(ctx)?;
    Ok(s)
}

/// Seconds of the CG run, without checkpoints or with one every `every` seconds.
fn cg_once(plan: &SpmvPlan, iters: usize, dir: &Path, every: Option<f64>) -> Result<f64> {
    let folder = dir.join("cg");
    let _ = std::fs::remove_dir_all(&folder);
    let run = match every {
        Some(t) => Run::new(2).checkpoints(
            Checkpoints::in_folder(&folder)
                .every(Duration::from_secs_f64(t))
                .keep(1),
        ),
        None => Run::new(2),
    };
    let r = run
        .run(|ctx| cg(ctx, plan, iters))
        .map_err(|e| Error::io(format!("CG: {e}")))?;
    let _ = std::fs::remove_dir_all(&folder);
    Ok(r[0])
}

/// The folder of the run's checkpoints (made; removed at the end if the benchmark made it).
fn folder(o: &Options) -> Result<(PathBuf, bool)> {
    let (dir, made) = match &o.dir {
        Some(d) => (d.clone(), false),
        None => (
            PathBuf::from(format!(".mbsp-checkpoint-bench-{}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(format!("{}: {e}", dir.display())))?;
    Ok((dir, made))
}

/// Run the benchmark and print its table (or JSON).
pub fn run(o: &Options) -> Result<()> {
    let (dir, made) = folder(o)?;
    let fs = file_system(&dir);
    let outcome = measure(o, &dir);
    if made {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let rows = outcome?;
    report(o, &dir, &fs, &rows)
}

fn measure(o: &Options, dir: &Path) -> Result<Vec<Row>> {
    let io = |e: std::io::Error| Error::io(format!("{}: {e}", dir.display()));
    let mib = o.bytes as f64 / (1 << 20) as f64;
    let (mut disk, mut fg, mut bg, mut bg_later, mut bg_durable) =
        (vec![], vec![], vec![], vec![], vec![]);
    for round in 1..=o.rounds {
        eprintln!(
            "checkpoint: round {round}/{}: disk, foreground and background checkpoints of \
             {mib:.0} MiB",
            o.rounds
        );
        disk.push(disk_write(dir, o.bytes).map_err(io)?);
        fg.push(checkpoint_once(dir, o.bytes, false)?.0);
        let (first, later, durable) = checkpoint_once(dir, o.bytes, true)?;
        bg.push(first);
        bg_later.push(later);
        bg_durable.push(durable);
    }
    eprintln!("checkpoint: sync and sync_checkpoint without a checkpoint");
    let (mut sync, mut sync_ck) = (vec![], vec![]);
    for _ in 0..o.rounds {
        let (s, c) = sync_costs(dir, 20_000)?;
        sync.push(s * 1e-9);
        sync_ck.push(c * 1e-9);
    }
    let mut rows = vec![
        Row {
            name: "disk: sequential write, one thread",
            samples: Samples(disk),
            against: None,
        },
        Row {
            name: "checkpoint, foreground (p = 2)",
            samples: Samples(fg),
            against: Some((0, Some(0.8), true)),
        },
        Row {
            name: "checkpoint, background: the call, first of the run",
            samples: Samples(bg),
            against: Some((1, None, true)),
        },
        Row {
            name: "checkpoint, background: the call, a later one",
            samples: Samples(bg_later),
            against: Some((1, None, true)),
        },
        Row {
            name: "checkpoint, background: until written",
            samples: Samples(bg_durable),
            against: Some((0, None, true)),
        },
        Row {
            name: "sync (p = 2)",
            samples: Samples(sync),
            against: None,
        },
        Row {
            name: "sync_checkpoint, no checkpoint taken",
            samples: Samples(sync_ck),
            against: Some((5, None, false)),
        },
    ];
    if o.cg_seconds > 0.0 {
        rows.extend(cg_rows(o, dir)?);
    }
    Ok(rows)
}

/// The CG figures: calibrate the iterations to `cg_seconds`, then alternate runs without and
/// with checkpoints.
fn cg_rows(o: &Options, dir: &Path) -> Result<Vec<Row>> {
    let k = 700;
    eprintln!("checkpoint: CG on the Laplacian of a {k} x {k} grid, p = 2: partitioning");
    let a = CooMatrix::laplacian_2d(k, 0.0).expect("a grid that fits");
    let d = partition_square(&a, 2, &PartOptions::default())
        .map_err(|e| Error::io(format!("partitioning: {e}")))?
        .dist;
    let plan = SpmvPlan::new(&a, &d).map_err(|e| Error::io(format!("SpMV plan: {e}")))?;
    let probe = 20;
    let per_it = cg_once(&plan, probe, dir, None)? / probe as f64;
    let iters = ((o.cg_seconds / per_it) as usize).max(probe);
    let (mut plain, mut ck) = (vec![], vec![]);
    for round in 1..=o.rounds {
        eprintln!(
            "checkpoint: CG round {round}/{}: {iters} iterations without and with a checkpoint \
             every {} s",
            o.rounds, o.every
        );
        plain.push(cg_once(&plan, iters, dir, None)?);
        ck.push(cg_once(&plan, iters, dir, Some(o.every))?);
    }
    let base = 7;
    Ok(vec![
        Row {
            name: "CG, no checkpoints",
            samples: Samples(plain),
            against: None,
        },
        Row {
            name: "CG, checkpoint every --every seconds",
            samples: Samples(ck),
            against: Some((base, Some(1.02), false)),
        },
    ])
}

/// The ratio of row `r` to its reference (time of the reference over time of the row when
/// higher is better: a rate ratio).
fn ratio(rows: &[Row], r: &Row) -> Option<f64> {
    r.against.map(|(b, _, rate)| {
        let (mine, other) = (r.samples.median(), rows[b].samples.median());
        if rate { other / mine } else { mine / other }
    })
}

fn verdict(rows: &[Row], r: &Row) -> String {
    match (r.against, ratio(rows, r)) {
        (Some((_, Some(t), true)), Some(x)) => {
            format!("target >= {t}: {}", if x >= t { "met" } else { "missed" })
        }
        (Some((_, Some(t), false)), Some(x)) => {
            format!("target <= {t}: {}", if x <= t { "met" } else { "missed" })
        }
        _ => String::new(),
    }
}

fn report(o: &Options, dir: &Path, fs: &str, rows: &[Row]) -> Result<()> {
    let gbs = |s: f64| o.bytes as f64 / s / 1e9;
    if let Some(path) = &o.csv {
        write_csv(path, rows).map_err(|e| Error::io(format!("{}: {e}", path.display())))?;
    }
    if o.json {
        let out = json!({
            "bytes": o.bytes,
            "file_system": fs,
            "rows": rows.iter().map(|r| json!({
                "name": r.name,
                "median_s": r.samples.median(),
                "min_s": r.samples.range().0,
                "max_s": r.samples.range().1,
                "samples": r.samples.0.len(),
                "ratio": ratio(rows, r),
                "target": r.against.and_then(|a| a.1),
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out).expect("JSON"));
        return Ok(());
    }
    println!(
        "checkpoints of {:.0} MiB at p = 2 into {} ({fs}); medians of {} rounds (min-max)",
        o.bytes as f64 / (1 << 20) as f64,
        dir.display(),
        o.rounds
    );
    for (i, r) in rows.iter().enumerate() {
        let (lo, hi) = r.samples.range();
        let rate = if i < 5 {
            format!("  {:.2} GB/s", gbs(r.samples.median()))
        } else {
            String::new()
        };
        let ratio = ratio(rows, r).map_or(String::new(), |x| format!("  ratio {x:.3}"));
        println!(
            "  {:<42} {:>10} ({} - {}){rate}{ratio}  {}",
            r.name,
            ns(r.samples.median() * 1e9),
            ns(lo * 1e9),
            ns(hi * 1e9),
            verdict(rows, r)
        );
    }
    Ok(())
}

fn write_csv(path: &Path, rows: &[Row]) -> std::io::Result<()> {
    crate::whole_file::write(path, |f| {
        writeln!(f, "figure,median_s,min_s,max_s,samples,ratio,target")?;
        for r in rows {
            let (lo, hi) = r.samples.range();
            writeln!(
                f,
                "\"{}\",{:.6e},{:.6e},{:.6e},{},{},{}",
                r.name,
                r.samples.median(),
                lo,
                hi,
                r.samples.0.len(),
                ratio(rows, r).map_or(String::new(), |x| format!("{x:.4}")),
                r.against
                    .and_then(|a| a.1)
                    .map_or(String::new(), |t| t.to_string())
            )?;
        }
        Ok(())
    })
}
