//! `mbsp-bench nested`: sync latency of a flat run of p processes against nested runs with the
//! same total (2 × p/2), for compact and scattered placement, side by side in one run; then
//! the cost of starting and ending runs, against issue 42's targets (a top-level run of 2 in at
//! most [`TOP_TARGET_NS`], a nested run in at most [`NESTED_TARGET_NS`]) with the cost of the
//! two binding system calls a run makes when its process 0 (the starter's thread) runs where
//! another process is placed measured beside them (the thread bound to one CPU and given its
//! binding back). A run whose starter's thread runs on a CPU of its own makes none. One row
//! runs a nested program as BSPlib programs are written (registering an array, then a put, a
//! get and a message), so that what its runs allocate or free shows.

use crate::stats::{CONFIDENCE, Samples, Verdict, median_at_most, ns, timed};
use mbsp::{Policy, Run};
use mbsp_tools::{Error, Result};
use serde_json::json;

/// Issue 42's target for starting and ending a top-level run of 2, in ns.
const TOP_TARGET_NS: f64 = 5000.0;

/// Issue 42's target for starting and ending a nested run of 2, in ns.
const NESTED_TARGET_NS: f64 = 2000.0;

/// Nanoseconds per empty sync of a flat run.
fn flat(p: usize, policy: &Policy, iters: usize, samples: usize) -> Vec<f64> {
    Run::new(p)
        .policy(policy.clone())
        .run(|ctx| timed(samples, iters, || ctx.sync()))
        .expect("benchmark run")
        .swap_remove(0)
}

/// Nanoseconds per empty sync inside nested runs of `inner` processes, both groups syncing at
/// once; and per top-level sync of the 2 outer processes.
fn nested(inner: usize, policy: &Policy, iters: usize, samples: usize) -> (Vec<f64>, Vec<f64>) {
    Run::new(2)
        .policy(policy.clone())
        .run(|ctx| {
            let inner_t = ctx
                .run(inner, |n| timed(samples, iters, || n.sync()))?
                .swap_remove(0);
            let outer_t = timed(samples, iters, || ctx.sync())?;
            Ok((inner_t, outer_t))
        })
        .expect("benchmark run")
        .swap_remove(0)
}

/// Nanoseconds to start and end a nested run of `inner` processes in each of `outer` top-level
/// processes at once, with parked worker teams (`reuse`) or threads started per run.
fn nested_start(
    outer: usize,
    inner: usize,
    policy: &Policy,
    reuse: bool,
    iters: usize,
    samples: usize,
) -> Vec<f64> {
    nested_start_with(
        Run::new(outer).policy(policy.clone()),
        inner,
        reuse,
        iters,
        samples,
    )
}

/// [`nested_start`] from the top-level run `top`.
fn nested_start_with(
    top: Run,
    inner: usize,
    reuse: bool,
    iters: usize,
    samples: usize,
) -> Vec<f64> {
    nested_runs_of(top, inner, reuse, iters, samples, |_| Ok(()))
}

/// Nanoseconds per nested run of `inner` processes running `body`, started by process 0 of the
/// top-level run `top`.
fn nested_runs_of(
    top: Run,
    inner: usize,
    reuse: bool,
    iters: usize,
    samples: usize,
    body: fn(&mut mbsp::Ctx) -> mbsp::Result<()>,
) -> Vec<f64> {
    top.run(|ctx| {
        let nested = || Run::new(inner).reuse_threads(reuse);
        timed(samples, iters, || ctx.run_with(nested(), body).map(drop))
    })
    .expect("benchmark run")
    .swap_remove(0)
}

/// The body of a nested run as a BSPlib program's: each process registers an array of its
/// own, puts a word into its right neighbour's and gets one from it, sends it a message, and
/// syncs (two supersteps: registering, communicating).
fn register_and_communicate(n: &mut mbsp::Ctx) -> mbsp::Result<()> {
    let mut area = [0u64; 4];
    let at = area.as_mut_ptr() as *mut u8;
    // SAFETY: `area` outlives its registration, which the run's end releases once nobody
    // touches it.
    unsafe { n.push_reg_raw(at, 32)? };
    n.sync()?;
    let right = (n.pid() + 1) % n.nprocs();
    n.put_raw(right, &[1u8; 8], at, 8)?;
    let mut got = [0u8; 8];
    // SAFETY: `got` outlives the sync that writes it.
    unsafe { n.get_raw(right, at, 16, got.as_mut_ptr(), 8)? };
    n.send(right, &[], &[2u8; 8])?;
    n.sync()?;
    while n.move_message(&mut [0u8; 8])?.is_some() {}
    Ok(())
}

/// Nanoseconds of one pair of thread-binding system calls: the calling thread narrowed to its
/// first CPU, then given all of them back (what a run does to its starter's thread when that
/// runs on a CPU where another of its processes is placed). `None` where threads are not bound
/// (another machine's tree) or the thread has one CPU.
fn binding_pair(iters: usize, samples: usize) -> Option<Vec<f64>> {
    let loaded = mbsp::Machine::current().ok()?;
    let binder = mbsp::topology::Binder::new(&loaded);
    let all = binder.thread_cpus()?;
    if !binder.applies() || all.len() < 2 {
        return None;
    }
    let one = [all[0]];
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t = std::time::Instant::now();
        for _ in 0..iters {
            binder.restore_thread(&one);
            binder.restore_thread(&all);
        }
        out.push(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    Some(out)
}

/// Nanoseconds to start and end a top-level run of `p` processes with an empty function.
pub(crate) fn top_start(
    p: usize,
    reuse: bool,
    bind: bool,
    iters: usize,
    samples: usize,
) -> Vec<f64> {
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        let run = || Run::new(p).reuse_threads(reuse).bind(bind).run(|_| Ok(()));
        run().expect("benchmark run"); // warm-up
        let t = std::time::Instant::now();
        for _ in 0..iters {
            run().expect("benchmark run");
        }
        out.push(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    out
}

/// The cost of starting runs: parked teams against threads started per run (name, worker
/// teams, threads started per run).
fn start_rows(samples: usize, quick: bool) -> Vec<(&'static str, Samples, Samples)> {
    let iters = if quick { 20 } else { 2000 };
    let spawn_iters = if quick { 5 } else { 200 };
    vec![
        (
            "nested run of 2, in a top-level run of 1",
            Samples(nested_start(1, 2, &Policy::Scattered, true, iters, samples)),
            Samples(nested_start(
                1,
                2,
                &Policy::Scattered,
                false,
                spawn_iters,
                samples,
            )),
        ),
        (
            "nested run of 2, in a top-level run of 1, unbound",
            Samples(nested_start_with(
                Run::new(1).bind(false),
                2,
                true,
                iters,
                samples,
            )),
            Samples(nested_start_with(
                Run::new(1).bind(false),
                2,
                false,
                spawn_iters,
                samples,
            )),
        ),
        (
            "nested run of 2 that registers and communicates",
            Samples(nested_runs_of(
                Run::new(1),
                2,
                true,
                iters,
                samples,
                register_and_communicate,
            )),
            Samples(nested_runs_of(
                Run::new(1),
                2,
                false,
                spawn_iters,
                samples,
                register_and_communicate,
            )),
        ),
        (
            "2 nested runs of 2 at once (top-level run of 2)",
            Samples(nested_start(2, 2, &Policy::Scattered, true, iters, samples)),
            Samples(nested_start(
                2,
                2,
                &Policy::Scattered,
                false,
                spawn_iters,
                samples,
            )),
        ),
        (
            "top-level run of 2, caller bound (default)",
            Samples(top_start(2, true, true, iters, samples)),
            Samples(top_start(2, false, true, spawn_iters, samples)),
        ),
        (
            "top-level run of 2, unbound (bind(false))",
            Samples(top_start(2, true, false, iters, samples)),
            Samples(top_start(2, false, false, spawn_iters, samples)),
        ),
    ]
}

/// Options of `mbsp-bench nested`.
#[derive(Clone, Debug)]
pub struct Options {
    /// Samples per figure (the median is reported).
    pub samples: usize,
    /// A smoke-test sized run (the numbers mean nothing).
    pub quick: bool,
    /// Print JSON instead of tables.
    pub json: bool,
    /// Also write the figures as CSV to this file.
    pub csv: Option<std::path::PathBuf>,
}

/// One line of the sync table: p processes, flat against 2 nested runs of p/2.
struct SyncRow {
    p: usize,
    policy: Policy,
    flat: Samples,
    inner: Samples,
    outer: Samples,
    start: Samples,
}

/// Run the benchmark and print the tables (or JSON), and write the CSV if asked.
pub fn run(o: &Options) -> Result<()> {
    if let Some(path) = &o.csv {
        crate::spmv_bench::check_output("--csv", path)?;
    }
    let (samples, quick) = (o.samples, o.quick);
    let m = mbsp::Machine::current().map_err(|e| Error::run(format!("mbsp-bench nested: {e}")))?;
    let tree = (
        m.machine.packages().len(),
        m.machine.numas().len(),
        m.machine.cores().len(),
        m.machine.pus().len(),
    );
    if !o.json {
        println!("mbsp-bench nested: {}", crate::machine::describe());
        println!(
            "machine tree: {} packages, {} NUMA nodes, {} cores, {} PUs ({})",
            tree.0,
            tree.1,
            tree.2,
            tree.3,
            m.machine.source()
        );
        println!("{samples} samples per figure; median [min–max] per sync\n");
    }
    let iters = if quick { 200 } else { 20_000 };
    let mut rows = Vec::new();
    for p in [2usize, 4, 8] {
        for policy in [Policy::Compact, Policy::Scattered] {
            eprintln!("nested: p = {p}, {policy}");
            let flat = Samples(flat(p, &policy, iters, samples));
            let (i, o) = nested(p / 2, &policy, iters, samples);
            let start = Samples(nested_start(
                2,
                p / 2,
                &policy,
                true,
                if quick { 10 } else { 2000 },
                samples,
            ));
            rows.push(SyncRow {
                p,
                policy,
                flat,
                inner: Samples(i),
                outer: Samples(o),
                start,
            });
        }
    }
    eprintln!("nested: starting and ending runs");
    let starts = start_rows(samples, quick);
    let pair = binding_pair(if quick { 20 } else { 20_000 }, samples).map(Samples);
    let targets = start_targets(&starts);
    if let Some(path) = &o.csv {
        write_csv(path, &rows, &starts).map_err(|e| Error::io("--csv").with_source(e))?;
    }
    if o.json {
        let fig = |s: &Samples| json!({ "median_ns": s.median(), "min_ns": s.range().0, "max_ns": s.range().1 });
        let j = json!({
            "machine": crate::machine::describe(),
            "tree": { "packages": tree.0, "numas": tree.1, "cores": tree.2, "pus": tree.3 },
            "samples": samples,
            "syncs": rows.iter().map(|r| json!({
                "p": r.p,
                "policy": r.policy.to_string(),
                "flat": fig(&r.flat),
                "nested_inner": fig(&r.inner),
                "nested_outer": fig(&r.outer),
                "inner_over_flat": r.inner.median() / r.flat.median(),
                "nested_start_end": fig(&r.start),
            })).collect::<Vec<_>>(),
            "starts": starts.iter().map(|(name, team, spawn)| json!({
                "run": name,
                "worker_teams": fig(team),
                "threads_per_run": fig(spawn),
                "speedup": spawn.median() / team.median(),
            })).collect::<Vec<_>>(),
            "binding_pair": pair.as_ref().map(fig),
            "targets": targets.iter().map(|t| json!({
                "target": t.text, "met": t.verdict == Verdict::Met, "verdict": t.verdict.word(),
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&j).unwrap_or_default());
        return Ok(());
    }
    println!(
        "  {:>2}  {:<10} {:<26} {:<26} {:<26} {:>13}  {:<20}",
        "p",
        "policy",
        "flat, p processes",
        "nested, inner p/2",
        "nested, outer 2",
        "inner/flat",
        "nested start+end (teams)"
    );
    for r in &rows {
        println!(
            "  {:>2}  {:<10} {:<26} {:<26} {:<26} {:>12.2}x  {}",
            r.p,
            r.policy.to_string(),
            r.flat.show(ns),
            r.inner.show(ns),
            r.outer.show(ns),
            r.inner.median() / r.flat.median(),
            r.start.show(ns)
        );
    }
    println!(
        "\n(inner/flat < 1: a sync among the p/2 processes of a nested run is cheaper than one over all p.)"
    );
    println!(
        "\nstarting and ending a run (an empty function, but where a row says what it does), \
         median [min–max]"
    );
    println!(
        "  {:<52} {:<26} {:<26} {:>9}",
        "", "worker teams", "threads started per run", "speed-up"
    );
    for (name, team, spawn) in &starts {
        println!(
            "  {name:<52} {:<26} {:<26} {:>8.1}x",
            team.show(ns),
            spawn.show(ns),
            spawn.median() / team.median()
        );
    }
    println!(
        "  (process 0 of a run is its starter's thread; it is bound, and given its binding back at\n   \
         the end, only when it runs where another process of the run is placed: two binding\n   \
         system calls, measured below. Runs stacked on one core narrow it every time.)"
    );
    match &pair {
        Some(b) => println!(
            "\none pair of thread-binding system calls (narrow to one CPU, widen back): {}",
            b.show(ns)
        ),
        None => println!("\nthread binding not measured: threads are not bound here"),
    }
    println!("\ntargets (issue 42):");
    for t in &targets {
        println!("  [{:<7}] {}", t.verdict.word(), t.text);
    }
    Ok(())
}

/// One of issue 42's start targets, judged on a row of the start table by the 95% interval
/// of its median ([`median_at_most`]).
struct StartTarget {
    text: String,
    verdict: Verdict,
}

/// The targets: a top-level run of 2 (caller bound, the default) within [`TOP_TARGET_NS`], a
/// nested run of 2 within [`NESTED_TARGET_NS`], bound (the default) and unbound.
fn start_targets(starts: &[(&'static str, Samples, Samples)]) -> Vec<StartTarget> {
    let row = |name: &str| starts.iter().find(|r| r.0 == name).map(|r| &r.1);
    [
        ("top-level run of 2, caller bound (default)", TOP_TARGET_NS),
        ("nested run of 2, in a top-level run of 1", NESTED_TARGET_NS),
        (
            "nested run of 2, in a top-level run of 1, unbound",
            NESTED_TARGET_NS,
        ),
    ]
    .into_iter()
    .filter_map(|(name, target)| {
        let t = row(name)?;
        let (ci, verdict) = median_at_most(&t.0, target, CONFIDENCE);
        let interval = ci.map_or(String::new(), |c| {
            format!(
                " ({:.0}% interval {}-{})",
                100.0 * c.level,
                ns(c.lo),
                ns(c.hi)
            )
        });
        Some(StartTarget {
            text: format!("{name} <= {}: {}{interval}", ns(target), ns(t.median())),
            verdict,
        })
    })
    .collect()
}

/// The figures as CSV, one line per figure: table (`sync` or `start`), p, policy (`sync`) or
/// run (`start`), figure, median, min and max ns.
fn write_csv(
    path: &std::path::Path,
    rows: &[SyncRow],
    starts: &[(&'static str, Samples, Samples)],
) -> std::io::Result<()> {
    use std::io::Write;
    crate::whole_file::write(path, |f| {
        writeln!(f, "table,p,setting,figure,median_ns,min_ns,max_ns")?;
        let mut line = |table: &str, p: usize, setting: &str, figure: &str, s: &Samples| {
            let (lo, hi) = s.range();
            writeln!(
                f,
                "{table},{p},\"{setting}\",{figure},{:.1},{lo:.1},{hi:.1}",
                s.median()
            )
        };
        for r in rows {
            let policy = r.policy.to_string();
            line("sync", r.p, &policy, "flat", &r.flat)?;
            line("sync", r.p, &policy, "nested_inner", &r.inner)?;
            line("sync", r.p, &policy, "nested_outer", &r.outer)?;
            line("sync", r.p, &policy, "nested_start_end", &r.start)?;
        }
        for (name, team, spawn) in starts {
            line("start", 2, name, "worker_teams", team)?;
            line("start", 2, name, "threads_per_run", spawn)?;
        }
        Ok(())
    })
}
