//! `mbsp-bench wait`: how the runtime's waiting scales and recovers.
//!
//! * Oversubscription: the empty sync with many more processes than cores, where what a sync
//!   costs is the context switches it needs (each process must run at least once per
//!   superstep), next to `std::sync::Barrier` (a mutex and a condition variable: every waiter
//!   sleeps, the last arriver wakes them all) with as many threads.
//! * Starting and ending a run of as many processes, a thread each against coroutines.
//! * Recovery after a long wait: passes of back-to-back empty syncs, each pass after every
//!   process has slept (the shape of MulticoreBSP for C's barrier benchmark,
//!   benchmarks/src/barrier.c): after the sleep the syncs must return to the fast path (spinning)
//!   within a few supersteps, so the worst pass should cost about what the median pass costs.
//! * Who waits while another copies: supersteps of buffered puts at p = 2 in three patterns
//!   (the shape of MulticoreBSP for C's put benchmark, benchmarks/src/collectives.c with
//!   PRIMITIVE=0): balanced all-to-all (every process puts the size to every other), one-to-all
//!   (pid 0 puts it to every other) and all-to-one (every other puts it to pid 0). The
//!   unbalanced patterns move less data than the balanced one, so a process that waits while
//!   another copies must not pay more than the copy: they should cost at most what the
//!   balanced exchange of the same size costs.

use crate::stats::{Samples, ns};
use mbsp_tools::{Error, Result};
use serde_json::json;
use std::io::Write;
use std::time::{Duration, Instant};

/// Options of `mbsp-bench wait`.
#[derive(Clone, Debug)]
pub struct Options {
    /// Samples per figure of the oversubscription table (the median is reported).
    pub samples: usize,
    /// Time budget of one sample of the oversubscription table.
    pub sample_time: Duration,
    /// Process counts of the oversubscription table.
    pub procs: Vec<usize>,
    /// Passes of the recovery table.
    pub passes: usize,
    /// Syncs per pass.
    pub syncs: usize,
    /// How long every process sleeps before each pass.
    pub sleep: Duration,
    /// Print JSON instead of tables.
    pub json: bool,
    /// Also write the figures as CSV to this file.
    pub csv: Option<String>,
    /// Supersteps per sample of the put-pattern table.
    pub put_iters: usize,
}

impl Options {
    /// The full benchmark (about a minute: 30 passes after a second of sleep each).
    pub fn full() -> Self {
        Options {
            samples: 7,
            sample_time: Duration::from_millis(100),
            procs: oversubscribed_procs(false),
            passes: 30,
            syncs: 1000,
            sleep: Duration::from_secs(1),
            json: false,
            csv: None,
            put_iters: 2000,
        }
    }

    /// A smoke-test sized run (a second or two; numbers are not meaningful).
    pub fn quick() -> Self {
        Options {
            samples: 3,
            sample_time: Duration::from_millis(5),
            procs: oversubscribed_procs(true),
            passes: 4,
            syncs: 200,
            sleep: Duration::from_millis(20),
            json: false,
            csv: None,
            put_iters: 20,
        }
    }
}

/// The process counts of the oversubscription table.
pub fn oversubscribed_procs(quick: bool) -> Vec<usize> {
    if quick {
        vec![2, 16]
    } else {
        vec![2, 4, 16, 64, 256, 512]
    }
}

/// Nanoseconds per empty sync of `p` processes, `samples` times, each over about `budget`.
pub fn mbsp_sync_many(p: usize, samples: usize, budget: Duration) -> Samples {
    // A probe run sizes the samples (a run of hundreds of processes syncs in milliseconds).
    let probe = crate::core_bench::mbsp_sync(p, 32, 1)[0].max(1.0);
    let iters = ((budget.as_nanos() as f64 / probe) as usize).clamp(16, 1_000_000);
    Samples(crate::core_bench::mbsp_sync(p, iters, samples))
}

/// [`mbsp_sync_many`] with the processes as coroutines (`Run::coroutines`).
pub fn coroutine_sync_many(p: usize, samples: usize, budget: Duration) -> Samples {
    let probe = crate::core_bench::coroutine_sync(p, 32, 1)[0].max(1.0);
    let iters = ((budget.as_nanos() as f64 / probe) as usize).clamp(16, 1_000_000);
    Samples(crate::core_bench::coroutine_sync(p, iters, samples))
}

/// Nanoseconds per `std::sync::Barrier::wait` of `p` threads, like [`mbsp_sync_many`].
pub fn std_barrier_many(p: usize, samples: usize, budget: Duration) -> Samples {
    let probe = crate::core_bench::std_sync(p, 32, 1)[0].max(1.0);
    let iters = ((budget.as_nanos() as f64 / probe) as usize).clamp(16, 1_000_000);
    Samples(crate::core_bench::std_sync(p, iters, samples))
}

/// One row of the oversubscription table.
pub struct OversubRow {
    /// Processes (threads).
    pub p: usize,
    /// Nanoseconds per empty mbsp sync.
    pub mbsp: Samples,
    /// The same with the processes as coroutines (`Run::coroutines`).
    pub coroutines: Samples,
    /// Nanoseconds per `std::sync::Barrier::wait`.
    pub std: Samples,
}

/// Measure the oversubscription table.
pub fn oversubscription(procs: &[usize], samples: usize, budget: Duration) -> Vec<OversubRow> {
    procs
        .iter()
        .map(|&p| OversubRow {
            p,
            mbsp: mbsp_sync_many(p, samples, budget),
            coroutines: coroutine_sync_many(p, samples, budget),
            std: std_barrier_many(p, samples, budget),
        })
        .collect()
}

/// Nanoseconds to start and end a run of `p` processes that syncs once, with a thread per
/// process (`coroutines` false) or with the processes as coroutines; `samples` times, each
/// over about `budget` (the threads of both kinds are the calling thread's parked team, warm
/// from the first run).
pub fn run_start_many(p: usize, coroutines: bool, samples: usize, budget: Duration) -> Samples {
    let run = || {
        mbsp::Run::new(p)
            .coroutines(coroutines)
            .run(|ctx| ctx.sync())
            .expect("benchmark run")
    };
    let t = Instant::now();
    run(); // warm-up, and the probe that sizes the samples
    let probe = t.elapsed().as_nanos().max(1) as f64;
    let iters = ((budget.as_nanos() as f64 / probe) as usize).clamp(3, 100_000);
    Samples(
        (0..samples)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..iters {
                    run();
                }
                t.elapsed().as_nanos() as f64 / iters as f64
            })
            .collect(),
    )
}

/// One row of the run start table.
pub struct StartRow {
    /// Processes.
    pub p: usize,
    /// Nanoseconds to start and end a run that syncs once, a thread per process.
    pub threads: Samples,
    /// The same with the processes as coroutines.
    pub coroutines: Samples,
}

/// Measure the run start table: for each p, threads and coroutines in turn.
pub fn run_starts(procs: &[usize], samples: usize, budget: Duration) -> Vec<StartRow> {
    procs
        .iter()
        .map(|&p| StartRow {
            p,
            threads: run_start_many(p, false, samples, budget),
            coroutines: run_start_many(p, true, samples, budget),
        })
        .collect()
}

/// Print the run start table.
pub fn print_run_starts(rows: &[StartRow]) {
    println!(
        "\nstarting and ending a run that syncs once (time per run): a thread per process \
         against the processes as coroutines (Run::coroutines; where no two share a thread the \
         run goes as threads)"
    );
    println!(
        "  {:>4}  {:<30} {:<30} {:>9}",
        "p", "threads", "coroutines", "co/thr"
    );
    for r in rows {
        println!(
            "  {:>4}  {:<30} {:<30} {:>9.3}",
            r.p,
            r.threads.show(ns),
            r.coroutines.show(ns),
            r.coroutines.median() / r.threads.median()
        );
    }
}

/// The oversubscription targets (2 cores): P = 256 at most 3 ms, P = 512 at most 6 ms per sync.
fn oversub_target(p: usize) -> Option<f64> {
    match p {
        256 => Some(3e6),
        512 => Some(6e6),
        _ => None,
    }
}

/// Print the oversubscription table (`cores` hardware threads).
pub fn print_oversubscription(rows: &[OversubRow], cores: usize) {
    println!(
        "empty sync of up to {} processes on {cores} hardware threads (time per sync); std \
         Barrier: a mutex and condition variable, every waiter sleeps; coroutines: the same \
         mbsp run with its processes as coroutines (Run::coroutines)",
        rows.iter().map(|r| r.p).max().unwrap_or(0)
    );
    println!(
        "  {:>4}  {:>7}  {:<30} {:<30} {:>9} {:>14}  {:<30} {:>8}",
        "p", "p/cores", "mbsp", "std Barrier", "std/mbsp", "mbsp per proc", "coroutines", "co/mbsp"
    );
    for r in rows {
        let m = r.mbsp.median();
        print!(
            "  {:>4}  {:>7.1}  {:<30} {:<30} {:>9.2} {:>14}  {:<30} {:>8.3}",
            r.p,
            r.p as f64 / cores as f64,
            r.mbsp.show(ns),
            r.std.show(ns),
            r.std.median() / m,
            ns(m / r.p as f64),
            r.coroutines.show(ns),
            r.coroutines.median() / m
        );
        match oversub_target(r.p) {
            Some(t) if cores == 2 => println!(
                "  target on 2 cores <= {}: {}",
                ns(t),
                crate::core_bench::verdict(m <= t)
            ),
            _ => println!(),
        }
    }
}

/// One pass of back-to-back syncs after a sleep.
#[derive(Clone, Copy, Debug)]
pub struct Pass {
    /// Microseconds per sync, as process 0 saw it.
    pub us: f64,
    /// Times a process went to sleep during the pass (voluntary context switches, all
    /// processes): the waiting that should have returned to spinning did not.
    pub slept: u64,
    /// Times a process was preempted during the pass (involuntary context switches, all
    /// processes): another thread of the machine took its core.
    pub preempted: u64,
    /// Microseconds per round of the two-thread cache-line exchange (`floor::LinePair`) run by
    /// the same two processes right after the pass: what one line each way cost at that
    /// moment (the hypervisor may place the two vCPUs nearer or farther apart from one pass to
    /// the next).
    pub floor_us: f64,
    /// Microseconds per sync in the other nine tenths of the pass, without its slowest tenth
    /// (process 0 times each tenth): a pass slow throughout did not return to the fast path,
    /// a pass fast without its slowest tenth had one stall (a wake-up, or the hypervisor
    /// taking a vCPU away) and recovered from it.
    pub rest_us: f64,
}

/// Tenths of a pass, each timed on its own ([`Pass::rest_us`]).
const PASS_PARTS: usize = 10;

/// This thread's voluntary and involuntary context switches so far (Linux; zeros elsewhere).
fn context_switches() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    (
        field("voluntary_ctxt_switches:"),
        field("nonvoluntary_ctxt_switches:"),
    )
}

/// Passes of `syncs` back-to-back empty syncs of `p` processes, each pass after every process
/// slept for `sleep`.
pub fn after_sleep(p: usize, passes: usize, syncs: usize, sleep: Duration) -> Vec<Pass> {
    let pair = crate::floor::LinePair::new();
    let by_pid = mbsp::run(p, |ctx| {
        let mut out = Vec::with_capacity(passes);
        let mut round = 0;
        for _ in 0..passes {
            std::thread::sleep(sleep);
            ctx.sync()?; // the processes line up after their sleep
            let before = context_switches();
            let t = Instant::now();
            let (mut last, mut slowest, mut slowest_n) = (t, 0.0f64, 0);
            for part in 0..PASS_PARTS {
                let n = syncs * (part + 1) / PASS_PARTS - syncs * part / PASS_PARTS;
                for _ in 0..n {
                    ctx.sync()?;
                }
                let now = Instant::now();
                let part_us = (now - last).as_secs_f64() * 1e6;
                if n > 0 && part_us / n as f64 > slowest / slowest_n.max(1) as f64 {
                    (slowest, slowest_n) = (part_us, n);
                }
                last = now;
            }
            let total_us = t.elapsed().as_secs_f64() * 1e6;
            let us = total_us / syncs as f64;
            let rest_us = if syncs > slowest_n {
                (total_us - slowest) / (syncs - slowest_n) as f64
            } else {
                us
            };
            let after = context_switches();
            // The floor, by processes 0 and 1 (the others, if any, wait in the sync).
            let mut floor_us = 0.0;
            if ctx.pid() < 2 && ctx.nprocs() >= 2 {
                let t = Instant::now();
                for _ in 0..syncs {
                    round += 1;
                    pair.exchange(ctx.pid(), round);
                }
                floor_us = t.elapsed().as_secs_f64() * 1e6 / syncs as f64;
            }
            ctx.sync()?;
            out.push(Pass {
                us,
                slept: after.0 - before.0,
                preempted: after.1 - before.1,
                floor_us,
                rest_us,
            });
        }
        Ok(out)
    })
    .expect("benchmark run");
    (0..passes)
        .map(|i| Pass {
            us: by_pid[0][i].us,
            slept: by_pid.iter().map(|v| v[i].slept).sum(),
            preempted: by_pid.iter().map(|v| v[i].preempted).sum(),
            floor_us: by_pid[0][i].floor_us,
            rest_us: by_pid[0][i].rest_us,
        })
        .collect()
}

/// A pattern of the put table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pattern {
    /// Every process puts the size to every other process.
    AllToAll,
    /// Pid 0 puts the size to every other process.
    OneToAll,
    /// Every process but pid 0 puts the size to pid 0.
    AllToOne,
}

impl Pattern {
    /// Every pattern, the baseline first.
    pub const ALL: [Pattern; 3] = [Pattern::AllToAll, Pattern::OneToAll, Pattern::AllToOne];

    /// Its name in the tables.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::AllToAll => "all-to-all",
            Pattern::OneToAll => "one-to-all",
            Pattern::AllToOne => "all-to-one",
        }
    }

    /// Whether process `from` puts to process `to` (`from != to`).
    fn puts(self, from: usize, to: usize) -> bool {
        match self {
            Pattern::AllToAll => true,
            Pattern::OneToAll => from == 0,
            Pattern::AllToOne => to == 0,
        }
    }
}

/// The sizes of the put table (the sizes the issue quotes MulticoreBSP for C's figures for).
pub const PUT_SIZES: [usize; 2] = [4 << 10, 48 << 10];

/// One figure of the put table.
pub struct PutRow {
    /// The pattern.
    pub pattern: Pattern,
    /// Bytes per put.
    pub bytes: usize,
    /// Nanoseconds per superstep (puts + sync), pid 0's view.
    pub ns: Samples,
}

/// Nanoseconds per superstep of `pattern` with puts of `bytes` at p = 2, `samples` samples of
/// `iters` supersteps (pid 0's view).
pub fn put_pattern(pattern: Pattern, bytes: usize, samples: usize, iters: usize) -> Samples {
    let p = 2;
    let by_pid = mbsp::run(p, |ctx| {
        let (me, p) = (ctx.pid(), ctx.nprocs());
        let dst = ctx.push_reg(vec![0u8; bytes])?;
        let src = vec![me as u8; bytes];
        ctx.sync()?;
        crate::stats::timed(samples, iters, || {
            for to in (0..p).filter(|&to| to != me && pattern.puts(me, to)) {
                ctx.put(to, &src, &dst, 0)?;
            }
            ctx.sync()
        })
    })
    .expect("benchmark run");
    Samples(by_pid.into_iter().next().unwrap_or_default())
}

/// Measure the put table.
pub fn put_table(samples: usize, iters: usize) -> Vec<PutRow> {
    let mut rows = Vec::new();
    for bytes in PUT_SIZES {
        for pattern in Pattern::ALL {
            rows.push(PutRow {
                pattern,
                bytes,
                ns: put_pattern(pattern, bytes, samples, iters),
            });
        }
    }
    rows
}

/// The median of the balanced exchange of `bytes` in `rows`.
fn balanced(rows: &[PutRow], bytes: usize) -> f64 {
    rows.iter()
        .find(|r| r.bytes == bytes && r.pattern == Pattern::AllToAll)
        .map_or(f64::NAN, |r| r.ns.median())
}

/// Print the put table.
pub fn print_put_table(rows: &[PutRow]) {
    println!(
        "\nwho waits while another copies: puts + sync at p = 2 (time per superstep; the shape of \
         MulticoreBSP for C's put benchmark)"
    );
    println!(
        "  {:<11} {:>7}  {:<30} {:>26}",
        "pattern", "size", "time per superstep", "vs all-to-all (target)"
    );
    for r in rows {
        let ratio = r.ns.median() / balanced(rows, r.bytes);
        let vs = if r.pattern == Pattern::AllToAll {
            String::new()
        } else {
            format!(
                "{ratio:.2}x (<= 1.5: {})",
                crate::core_bench::verdict(ratio <= 1.5)
            )
        };
        println!(
            "  {:<11} {:>4} KiB  {:<30} {:>26}",
            r.pattern.name(),
            r.bytes >> 10,
            r.ns.show(ns),
            vs
        );
    }
    println!(
        "  target (issue 25): one-to-all and all-to-one at most 1.5x the balanced all-to-all of \
         the same size (MulticoreBSP for C on this machine kind: one-to-all 48 KiB 7-15 µs, 4 KiB \
         1-3 µs, all-to-one 48 KiB 6-18 µs, all-to-all 48 KiB 35-48 µs)"
    );
}

/// Run the benchmark and print (or write) its figures.
pub fn run(o: &Options) -> Result<()> {
    if let Some(path) = &o.csv {
        crate::spmv_bench::check_output("--csv", std::path::Path::new(path))?;
    }
    let cores = mbsp::nprocs();
    if !o.json {
        println!("mbsp-bench wait: {}", crate::machine::describe());
        println!(
            "{} samples per figure; shown: median [min–max]\n",
            o.samples
        );
    }
    let rows = oversubscription(&o.procs, o.samples, o.sample_time);
    if !o.json {
        print_oversubscription(&rows, cores);
    }
    let starts = run_starts(&o.procs, o.samples, o.sample_time);
    if !o.json {
        print_run_starts(&starts);
    }
    let p = 2;
    let passes = after_sleep(p, o.passes, o.syncs, o.sleep);
    let pass = Samples(passes.iter().map(|x| x.us).collect());
    let (median, worst) = (pass.median(), pass.range().1);
    // The passes no other thread of the machine interrupted.
    let quiet = Samples(
        passes
            .iter()
            .filter(|x| x.preempted == 0)
            .map(|x| x.us)
            .collect(),
    );
    let quiet_worst = quiet.range().1;
    if !o.json {
        println!(
            "\nrecovery after a long wait: {} passes of {} back-to-back empty syncs at p = {p}, \
             each after every process slept {} ms (time per sync within a pass)",
            o.passes,
            o.syncs,
            o.sleep.as_millis()
        );
        println!(
            "  median pass {}  best {}  worst {}  worst/median {:.2}",
            ns(median * 1e3),
            ns(pass.range().0 * 1e3),
            ns(worst * 1e3),
            worst / median
        );
        println!(
            "  {} of {} passes not preempted (no involuntary context switch of a process): worst \
             of those {} ({:.2}x the median pass)",
            quiet.0.len(),
            passes.len(),
            ns(quiet_worst * 1e3),
            quiet_worst / median
        );
        let shown: Vec<String> = passes
            .iter()
            .map(|x| {
                let mut v = ns(x.us * 1e3);
                if x.slept > 0 {
                    v += &format!(" s{}", x.slept);
                }
                if x.preempted > 0 {
                    v += &format!(" p{}", x.preempted);
                }
                v
            })
            .collect();
        println!(
            "  by pass (sN: processes went to sleep N times during the pass, pN: were preempted N \
             times): {}",
            shown.join(", ")
        );
        let over_floor = Samples(
            passes
                .iter()
                .map(|x| x.us / x.floor_us.max(f64::MIN_POSITIVE))
                .collect(),
        );
        let floors = Samples(passes.iter().map(|x| x.floor_us).collect());
        println!(
            "  one cache line each way between the same two processes right after each pass (no \
             library): {} [{}–{}]; pass / that floor: median {:.2}, worst {:.2} ({:.2}x the \
             median)",
            ns(floors.median() * 1e3),
            ns(floors.range().0 * 1e3),
            ns(floors.range().1 * 1e3),
            over_floor.median(),
            over_floor.range().1,
            over_floor.range().1 / over_floor.median()
        );
        let worst_pass = passes
            .iter()
            .max_by(|a, b| a.us.total_cmp(&b.us))
            .expect("at least one pass");
        let rest = Samples(passes.iter().map(|x| x.rest_us).collect());
        println!(
            "  without its slowest tenth the worst pass takes {} ({:.2}x the median pass); the \
             slowest of all passes so measured {} ({:.2}x): a pass fast without its slowest tenth \
             had one stall and recovered from it",
            ns(worst_pass.rest_us * 1e3),
            worst_pass.rest_us / median,
            ns(rest.range().1 * 1e3),
            rest.range().1 / median
        );
        println!(
            "  target: worst pass <= 3x the median pass: {} (passes not preempted: {})",
            crate::core_bench::verdict(worst <= 3.0 * median),
            crate::core_bench::verdict(quiet.0.is_empty() || quiet_worst <= 3.0 * median)
        );
    }
    let puts = put_table(o.samples, o.put_iters);
    if !o.json {
        print_put_table(&puts);
    }
    if let Some(path) = &o.csv {
        write_csv(path, &rows, &starts, &passes, o.syncs, &puts)
            .map_err(|e| Error::io("--csv").with_source(e))?;
    }
    if o.json {
        let j = json!({
            "machine": crate::machine::describe(),
            "cores": cores,
            "samples": o.samples,
            "oversubscription": rows.iter().map(|r| json!({
                "p": r.p, "mbsp_sync_ns": r.mbsp.median(), "mbsp_sync_ns_min": r.mbsp.range().0,
                "mbsp_sync_ns_max": r.mbsp.range().1, "std_barrier_ns": r.std.median(),
                "coroutines_sync_ns": r.coroutines.median(),
            })).collect::<Vec<_>>(),
            "run_start": starts.iter().map(|r| json!({
                "p": r.p, "threads_ns": r.threads.median(),
                "threads_ns_min": r.threads.range().0, "threads_ns_max": r.threads.range().1,
                "coroutines_ns": r.coroutines.median(),
                "coroutines_ns_min": r.coroutines.range().0,
                "coroutines_ns_max": r.coroutines.range().1,
            })).collect::<Vec<_>>(),
            "after_sleep": {
                "p": p, "syncs_per_pass": o.syncs, "sleep_ms": o.sleep.as_millis() as u64,
                "passes": passes.iter().map(|x| json!({
                    "sync_ns": x.us * 1e3, "slept": x.slept, "preempted": x.preempted,
                    "floor_ns": x.floor_us * 1e3,
                    "rest_ns": x.rest_us * 1e3,
                })).collect::<Vec<_>>(),
                "median_ns": median * 1e3, "worst_ns": worst * 1e3,
                "worst_over_median": worst / median,
                "passes_not_preempted": quiet.0.len(),
                "worst_not_preempted_ns": (!quiet.0.is_empty()).then_some(quiet_worst * 1e3),
            },
            "puts": puts.iter().map(|r| json!({
                "pattern": r.pattern.name(), "bytes": r.bytes, "p": 2,
                "superstep_ns": r.ns.median(), "superstep_ns_min": r.ns.range().0,
                "superstep_ns_max": r.ns.range().1,
                "over_all_to_all": r.ns.median() / balanced(&puts, r.bytes),
            })).collect::<Vec<_>>(),
        });
        println!("{j:#}");
    }
    Ok(())
}

/// Rows `table,p,pass,ns_per_sync,...`: one per oversubscription figure, one per run start
/// figure (time per run: threads in the mbsp columns), one per pass and one per put figure
/// (`pass` holds the pattern, `syncs` the bytes per put).
fn write_csv(
    path: &str,
    rows: &[OversubRow],
    starts: &[StartRow],
    passes: &[Pass],
    syncs: usize,
    puts: &[PutRow],
) -> std::io::Result<()> {
    crate::whole_file::write(std::path::Path::new(path), |f| {
        writeln!(
            f,
            "table,p,pass,syncs,mbsp_ns,mbsp_ns_min,mbsp_ns_max,std_barrier_ns,slept,preempted,\
             coroutines_ns"
        )?;
        for r in rows {
            let (lo, hi) = r.mbsp.range();
            writeln!(
                f,
                "oversubscription,{},,,{:.1},{:.1},{:.1},{:.1},,,{:.1}",
                r.p,
                r.mbsp.median(),
                lo,
                hi,
                r.std.median(),
                r.coroutines.median()
            )?;
        }
        for r in starts {
            let (lo, hi) = r.threads.range();
            writeln!(
                f,
                "start,{},,,{:.1},{:.1},{:.1},,,,{:.1}",
                r.p,
                r.threads.median(),
                lo,
                hi,
                r.coroutines.median()
            )?;
        }
        for (i, x) in passes.iter().enumerate() {
            writeln!(
                f,
                "after_sleep,2,{i},{syncs},{:.1},,,,{},{},",
                x.us * 1e3,
                x.slept,
                x.preempted
            )?;
        }
        for r in puts {
            let (lo, hi) = r.ns.range();
            writeln!(
                f,
                "puts,2,{},{},{:.1},{:.1},{:.1},,,,",
                r.pattern.name(),
                r.bytes,
                r.ns.median(),
                lo,
                hi
            )?;
        }
        Ok(())
    })
}
