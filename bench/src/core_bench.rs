//! `mbsp-bench core`: the runtime's synchronisation and communication costs, side by side with
//! baselines measured in the same process run.

use crate::floor::SpinBarrier;
use crate::stats::{Samples, fit_gl, gbs, ns, timed};
use mbsp_tools::{Error, Result};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// `println!` for the tables of `o`: they go to standard output, unless it carries the JSON.
macro_rules! table {
    ($o:expr) => {
        if !$o.json {
            std::println!();
        }
    };
    ($o:expr, $($t:tt)*) => {
        if !$o.json {
            std::println!($($t)*);
        }
    };
}

/// Options of `mbsp-bench core`.
#[derive(Clone, Debug)]
pub struct Options {
    /// Samples per figure (the median is reported).
    pub samples: usize,
    /// Time budget of one sample.
    pub sample_time: Duration,
    /// Bytes per process of the bulk put test.
    pub bulk_bytes: usize,
    /// Supersteps of the oversubscribed ring.
    pub ring_steps: usize,
    /// Process counts for the latency tables.
    pub procs: Vec<usize>,
    /// Process counts of the oversubscription table.
    pub oversub_procs: Vec<usize>,
    /// Print the figures as JSON instead of tables.
    pub json: bool,
    /// Also write the figures as CSV to this file.
    pub csv: Option<std::path::PathBuf>,
}

impl Options {
    /// The full benchmark.
    pub fn full() -> Self {
        Options {
            samples: 7,
            sample_time: Duration::from_millis(60),
            bulk_bytes: 16 << 20,
            ring_steps: 20_000,
            procs: vec![1, 2, 4],
            oversub_procs: crate::wait_bench::oversubscribed_procs(false),
            json: false,
            csv: None,
        }
    }

    /// A smoke-test sized run (seconds, not minutes; numbers are not meaningful).
    pub fn quick() -> Self {
        Options {
            samples: 3,
            sample_time: Duration::from_millis(3),
            bulk_bytes: 1 << 20,
            ring_steps: 1_000,
            procs: vec![1, 2, 4],
            oversub_procs: crate::wait_bench::oversubscribed_procs(true),
            json: false,
            csv: None,
        }
    }
}

/// Per-iteration nanoseconds, `samples` times, of a loop of `iters` iterations.
type Measure<'a> = dyn Fn(usize, usize) -> Vec<f64> + 'a;

/// Pick an iteration count that makes one sample last about `budget`, then sample.
fn figure(o: &Options, measure: &Measure<'_>) -> Samples {
    let probe = measure(32, 1)[0].max(1.0);
    let iters = ((o.sample_time.as_nanos() as f64 / probe) as usize).clamp(16, 20_000_000);
    Samples(measure(iters, o.samples))
}

fn per_iter(t: Instant, iters: usize) -> f64 {
    t.elapsed().as_nanos() as f64 / iters as f64
}

/// Empty supersteps through mbsp.
pub(crate) fn mbsp_sync(p: usize, iters: usize, samples: usize) -> Vec<f64> {
    mbsp::run(p, |ctx| timed(samples, iters, || ctx.sync()))
        .expect("benchmark run")
        .swap_remove(0)
}

/// [`mbsp_sync`] with the processes as coroutines (`Run::coroutines`).
pub(crate) fn coroutine_sync(p: usize, iters: usize, samples: usize) -> Vec<f64> {
    mbsp::Run::new(p)
        .coroutines(true)
        .run(|ctx| timed(samples, iters, || ctx.sync()))
        .expect("benchmark run")
        .swap_remove(0)
}

/// Empty supersteps through mbsp with the superstep profiler on or off.
fn mbsp_sync_profiled(p: usize, on: bool, iters: usize, samples: usize) -> Vec<f64> {
    mbsp::Run::new(p)
        .profile(on)
        .run(|ctx| timed(samples, iters, || ctx.sync()))
        .expect("benchmark run")
        .swap_remove(0)
}

/// One-word put to the right neighbour, then sync.
fn mbsp_put_sync(p: usize, iters: usize, samples: usize) -> Vec<f64> {
    mbsp_put_sync_profiled(p, false, iters, samples)
}

/// A put of `words` words to the right neighbour, then sync.
fn mbsp_short_put_sync(p: usize, words: usize, iters: usize, samples: usize) -> Vec<f64> {
    mbsp::run(p, |ctx| {
        let right = (ctx.pid() + 1) % ctx.nprocs();
        let x = ctx.push_reg(vec![0u64; words])?;
        let mut src = vec![0u64; words];
        ctx.sync()?;
        timed(samples, iters, || {
            src[0] += 1;
            ctx.put(right, &src, &x, 0)?;
            ctx.sync()
        })
    })
    .expect("benchmark run")
    .swap_remove(0)
}

/// [`mbsp_put_sync`] with the superstep profiler on or off.
fn mbsp_put_sync_profiled(p: usize, on: bool, iters: usize, samples: usize) -> Vec<f64> {
    mbsp::Run::new(p)
        .profile(on)
        .run(|ctx| {
            let right = (ctx.pid() + 1) % ctx.nprocs();
            let x = ctx.push_reg(vec![0u64; 1])?;
            ctx.sync()?;
            let mut i = 0u64;
            timed(samples, iters, || {
                i += 1;
                ctx.put(right, &[i], &x, 0)?;
                ctx.sync()
            })
        })
        .expect("benchmark run")
        .swap_remove(0)
}

/// `p` scoped threads each running `body(thread, iters, samples)`; thread 0's samples.
fn threads(
    p: usize,
    iters: usize,
    samples: usize,
    body: impl Fn(usize, usize, usize) -> Vec<f64> + Sync,
) -> Vec<f64> {
    std::thread::scope(|s| {
        let hs: Vec<_> = (1..p)
            .map(|t| {
                s.spawn({
                    let body = &body;
                    move || body(t, iters, samples)
                })
            })
            .collect();
        let r = body(0, iters, samples);
        for h in hs {
            h.join().unwrap();
        }
        r
    })
}

fn floor_sync(p: usize, iters: usize, samples: usize) -> Vec<f64> {
    let b = SpinBarrier::new(p);
    threads(p, iters, samples, |_, iters, samples| {
        timed(samples, iters, || {
            b.wait();
            Ok::<(), ()>(())
        })
        .unwrap()
    })
}

pub(crate) fn std_sync(p: usize, iters: usize, samples: usize) -> Vec<f64> {
    let b = Barrier::new(p);
    threads(p, iters, samples, |_, iters, samples| {
        timed(samples, iters, || {
            b.wait();
            Ok::<(), ()>(())
        })
        .unwrap()
    })
}

/// How a bulk transfer is made.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Bulk {
    Put,
    HpPut,
    Get,
}

/// Bulk transfer of `bytes` per process to (or, for a get, from) the right neighbour, then
/// sync; GB/s per process.
pub(crate) fn mbsp_bulk(
    p: usize,
    bytes: usize,
    iters: usize,
    samples: usize,
    how: Bulk,
) -> Vec<f64> {
    mbsp::run(p, |ctx| {
        let (right, left) = (
            (ctx.pid() + 1) % ctx.nprocs(),
            (ctx.pid() + ctx.nprocs() - 1) % ctx.nprocs(),
        );
        let dst = ctx.push_reg(vec![0u8; bytes])?;
        let src = vec![ctx.pid() as u8 + 1; bytes];
        let from = ctx.push_reg(vec![left as u8 + 1; bytes])?; // gets read the left neighbour's
        ctx.sync()?; // the registrations become valid
        let ns = timed(samples, iters, || {
            match how {
                // SAFETY: nobody else touches `dst` on `right` during the superstep, and `src`
                // is not modified.
                Bulk::HpPut => unsafe { ctx.hpput(right, &src, &dst, 0)? },
                Bulk::Put => ctx.put(right, &src, &dst, 0)?,
                Bulk::Get => ctx.get(right, &from, .., &dst, 0)?,
            }
            ctx.sync()
        })?;
        let out: Vec<f64> = ns.iter().map(|t| bytes as f64 / t).collect();
        // A get reads the right neighbour's `from`, which holds its left neighbour's (our) mark.
        let want = if how == Bulk::Get { ctx.pid() } else { left } as u8 + 1;
        assert!(ctx.local(&dst)?.iter().all(|&b| b == want), "data arrived");
        Ok(out)
    })
    .expect("benchmark run")
    .swap_remove(0)
}

/// `t` threads each copying `bytes` from their own source to their own destination; GB/s per
/// thread.
pub(crate) fn memcpy(t: usize, bytes: usize, iters: usize, samples: usize) -> Vec<f64> {
    let b = Barrier::new(t);
    threads(t, iters, samples, |me, iters, samples| {
        let src = vec![me as u8 + 1; bytes];
        let mut dst = vec![0u8; bytes];
        (0..samples)
            .map(|_| {
                b.wait();
                let t0 = Instant::now();
                for _ in 0..iters {
                    dst.copy_from_slice(std::hint::black_box(&src));
                    std::hint::black_box(&mut dst);
                }
                bytes as f64 / per_iter(t0, iters)
            })
            .collect()
    })
}

/// Seconds for `steps` supersteps of a ring of one-word puts with `p` processes.
fn ring(p: usize, steps: usize) -> f64 {
    let t = Instant::now();
    mbsp::run(p, |ctx| {
        let right = (ctx.pid() + 1) % ctx.nprocs();
        let x = ctx.push_reg(vec![0u64; 1])?;
        ctx.sync()?;
        for i in 0..steps {
            ctx.put(right, &[i as u64], &x, 0)?;
            ctx.sync()?;
        }
        Ok(())
    })
    .expect("benchmark run");
    t.elapsed().as_secs_f64()
}

/// Nanoseconds per superstep in which every process makes `h` one-word puts (or sends),
/// spread round-robin over all processes (itself included), then syncs; receivers of sends
/// move every message out of the queue.
fn hrel(p: usize, h: usize, send: bool, iters: usize, samples: usize) -> Vec<f64> {
    mbsp::run(p, |ctx| {
        let (me, p) = (ctx.pid(), ctx.nprocs());
        let x = ctx.push_reg(vec![0u64; h.max(1)])?;
        ctx.sync()?;
        let mut buf = [0u8; 8];
        timed(samples, iters, || {
            for k in 0..h {
                let to = (me + 1 + k) % p;
                if send {
                    ctx.send(to, &[], &(k as u64).to_ne_bytes())?;
                } else {
                    ctx.put(to, &[k as u64], &x, k)?;
                }
            }
            ctx.sync()?;
            while ctx.move_message(&mut buf)?.is_some() {}
            Ok(())
        })
    })
    .expect("benchmark run")
    .swap_remove(0)
}

/// The h-relation sweep: g and l of single-word puts and sends at each p.
fn hrelations(o: &Options, rep: &mut Report) {
    let hs: Vec<usize> = (0..=12).map(|e| 1usize << e).collect();
    table!(
        o,
        "\nh-relations of one-word puts and sends (each process sends h words round-robin to all \
         processes, itself included), h = 1 ... 4096: fit of time per superstep t = l + g h"
    );
    table!(
        o,
        "  {:>2}  {:<6} {:>10} {:>10} {:>12} {:>12} {:>14}",
        "p",
        "",
        "g (ns/w)",
        "l (ns)",
        "t(1)",
        "t(4096)",
        "fit error max"
    );
    for &p in o.procs.iter().filter(|&&p| p >= 2) {
        for send in [false, true] {
            let pts: Vec<(f64, f64)> = hs
                .iter()
                .map(|&h| {
                    let budget = o.sample_time.as_nanos() as f64;
                    let iters = ((budget / (200.0 + 30.0 * h as f64)) as usize).clamp(4, 50_000);
                    (
                        h as f64,
                        Samples(hrel(p, h, send, iters, o.samples)).median(),
                    )
                })
                .collect();
            let (g, l) = fit_gl(&pts);
            let err = pts
                .iter()
                .map(|&(h, t)| ((l + g * h) - t).abs() / t)
                .fold(0.0, f64::max);
            let kind = if send { "send" } else { "put" };
            rep.value("h-relation", p, &format!("{kind} g"), "ns/word", g);
            rep.value("h-relation", p, &format!("{kind} l"), "ns", l);
            rep.value("h-relation", p, &format!("{kind} t(1)"), "ns", pts[0].1);
            rep.value(
                "h-relation",
                p,
                &format!("{kind} t(4096)"),
                "ns",
                pts[pts.len() - 1].1,
            );
            table!(
                o,
                "  {p:>2}  {:<6} {g:>10.1} {l:>10.0} {:>12} {:>12} {:>13.0}%",
                if send { "send" } else { "put" },
                ns(pts[0].1),
                ns(pts[pts.len() - 1].1),
                100.0 * err
            );
            if p == 2 {
                table!(
                    o,
                    "      target at p = 2: g <= 20 ns per word: {}",
                    verdict(g <= 20.0)
                );
            }
        }
    }
}

pub(crate) fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

/// Run the benchmark and print the tables (or JSON), and write the CSV if asked: the empty
/// superstep, a one-word put, bulk transfers, h-relations, the profiler's cost, starting a
/// run, oversubscription and a ring, each against its baselines.
pub fn run(o: &Options) -> Result<()> {
    if let Some(path) = &o.csv {
        crate::spmv_bench::check_output("--csv", path)?;
    }
    let cores = mbsp::nprocs();
    let mut rep = Report::default();
    table!(o, "mbsp-bench core: {}", crate::machine::describe());
    table!(
        o,
        "{} samples per figure; shown: median [min–max]; ratios of medians measured in this run\n",
        o.samples
    );
    empty_superstep(o, &mut rep, cores);
    one_word_put(o, &mut rep);
    short_puts(o, &mut rep);
    bulk(o, &mut rep, cores);
    hrelations(o, &mut rep);
    profiler(o, &mut rep);
    starting_runs(o, &mut rep);
    oversubscription(o, &mut rep, cores);
    ring_of_puts(o, &mut rep, cores);
    if let Some(path) = &o.csv {
        rep.write_csv(path)
            .map_err(|e| Error::io("--csv").with_source(e))?;
    }
    if o.json {
        std::println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "machine": crate::machine::describe(),
                "samples": o.samples,
                "figures": rep.figures.iter().map(Fig::to_json).collect::<Vec<_>>(),
            }))
            .unwrap_or_default()
        );
    }
    Ok(())
}

/// The empty superstep against a spinning barrier (the floor) and `std::sync::Barrier`.
fn empty_superstep(o: &Options, rep: &mut Report, cores: usize) {
    table!(o, "empty superstep (time per sync)");
    table!(
        o,
        "  {:>2}  {:<28} {:<28} {:<28} {:>10} {:>10}",
        "p",
        "mbsp",
        "spin floor",
        "std Barrier",
        "mbsp/floor",
        "std/mbsp"
    );
    for &p in &o.procs {
        let m = figure(o, &|i, s| mbsp_sync(p, i, s));
        let f = figure(o, &|i, s| floor_sync(p, i, s));
        let b = figure(o, &|i, s| std_sync(p, i, s));
        rep.add("empty sync", p, "mbsp", "ns", &m);
        rep.add("empty sync", p, "spin floor", "ns", &f);
        rep.add("empty sync", p, "std Barrier", "ns", &b);
        table!(
            o,
            "  {p:>2}  {:<28} {:<28} {:<28} {:>10.2} {:>10.1}{}",
            m.show(ns),
            f.show(ns),
            b.show(ns),
            m.median() / f.median(),
            b.median() / m.median(),
            if p > cores { "  (oversubscribed)" } else { "" }
        );
        if p == 2 {
            table!(
                o,
                "      target at p = 2: mbsp within 2x of the floor: {}",
                verdict(m.median() <= 2.0 * f.median())
            );
        }
    }
}

/// A one-word put to the right neighbour and a sync, against the empty sync.
fn one_word_put(o: &Options, rep: &mut Report) {
    table!(
        o,
        "\none-word put to the right neighbour + sync (time per superstep)"
    );
    table!(o, "  {:>2}  {:<28} {:>14}", "p", "mbsp", "vs empty sync");
    for &p in &o.procs {
        let m = figure(o, &|i, s| mbsp_put_sync(p, i, s));
        let e = figure(o, &|i, s| mbsp_sync(p, i, s));
        rep.add("put + sync", p, "one-word put + sync", "ns", &m);
        rep.add("put + sync", p, "empty sync", "ns", &e);
        table!(
            o,
            "  {p:>2}  {:<28} {:>13.2}x",
            m.show(ns),
            m.median() / e.median()
        );
        if p == 2 {
            table!(
                o,
                "      target at p = 2: at most 1.5x the empty sync: {}",
                verdict(m.median() <= 1.5 * e.median())
            );
        }
    }
}

/// Word counts of the short-put table: up to what rides in a barrier line (30 words, on the
/// thread engine) and past it, into the outboxes.
const SHORT_PUT_WORDS: [usize; 7] = [2, 5, 8, 16, 30, 31, 64];

/// Puts of a few words to the right neighbour and a sync, against the empty sync: where the
/// cost steps up from a put that rides in the barrier's lines to one through the outboxes.
fn short_puts(o: &Options, rep: &mut Report) {
    table!(
        o,
        "\nput of w words to the right neighbour + sync, against the empty sync (time per \
         superstep; up to 30 words ride in the barrier's lines at p > 1)"
    );
    table!(
        o,
        "  {:>2}  {:>4}  {:<28} {:>14}",
        "p",
        "w",
        "mbsp",
        "vs empty sync"
    );
    for &p in o.procs.iter().filter(|&&p| p > 1) {
        let e = figure(o, &|i, s| mbsp_sync(p, i, s));
        rep.add("short puts", p, "empty sync", "ns", &e);
        for w in SHORT_PUT_WORDS {
            let m = figure(o, &|i, s| mbsp_short_put_sync(p, w, i, s));
            rep.add("short puts", p, &format!("{w}-word put + sync"), "ns", &m);
            table!(
                o,
                "  {p:>2}  {w:>4}  {:<28} {:>13.2}x",
                m.show(ns),
                m.median() / e.median()
            );
        }
    }
}

/// Bulk put, get and hpput per process against memcpy on 1 and p threads.
fn bulk(o: &Options, rep: &mut Report, cores: usize) {
    let mib = o.bulk_bytes as f64 / (1 << 20) as f64;
    table!(
        o,
        "\nbulk put of {mib:.0} MiB per process to its neighbour, then sync (GB/s per process)"
    );
    table!(
        o,
        "  {:>2}  {:<22} {:<22} {:<22} {:<22} {:<22} {:>9} {:>9} {:>9}",
        "p",
        "memcpy, 1 thread",
        "memcpy, p threads",
        "put",
        "get",
        "hpput",
        "put/mcpy",
        "get/mcpy",
        "hp/mcpy"
    );
    for &p in o.procs.iter().filter(|&&p| p <= cores.max(2)) {
        let bulk_iters =
            |target: f64| ((target * 1e9 / (o.bulk_bytes as f64 / 4.0)) as usize).max(2);
        let it = bulk_iters(o.sample_time.as_secs_f64());
        let m1 = Samples(memcpy(1, o.bulk_bytes, it, o.samples));
        let mp = Samples(memcpy(p, o.bulk_bytes, it, o.samples));
        let put = Samples(mbsp_bulk(p, o.bulk_bytes, it, o.samples, Bulk::Put));
        let get = Samples(mbsp_bulk(p, o.bulk_bytes, it, o.samples, Bulk::Get));
        let hp = Samples(mbsp_bulk(p, o.bulk_bytes, it, o.samples, Bulk::HpPut));
        let pct = |x: &Samples| 100.0 * x.median() / mp.median();
        for (name, x) in [
            ("memcpy, 1 thread", &m1),
            ("memcpy, p threads", &mp),
            ("put", &put),
            ("get", &get),
            ("hpput", &hp),
        ] {
            rep.add("bulk", p, name, "GB/s", x);
        }
        table!(
            o,
            "  {p:>2}  {:<22} {:<22} {:<22} {:<22} {:<22} {:>8.0}% {:>8.0}% {:>8.0}%",
            m1.show(gbs),
            mp.show(gbs),
            put.show(gbs),
            get.show(gbs),
            hp.show(gbs),
            pct(&put),
            pct(&get),
            pct(&hp)
        );
        if p == 2 {
            table!(
                o,
                "      targets at p = 2: put and get >= 45% of memcpy (p threads; a put copies twice, which bounds it to 50%): {} / {}; hpput >= 70%: {}",
                verdict(pct(&put) >= 45.0),
                verdict(pct(&get) >= 45.0),
                verdict(pct(&hp) >= 70.0)
            );
        }
    }
}

/// The superstep profiler's cost: off against on.
fn profiler(o: &Options, rep: &mut Report) {
    table!(
        o,
        "\nthe superstep profiler (Run::profile, MBSP_PROFILE) at p = 2: off (the default; one \
         branch per request and per sync) against on (a record per superstep and process)"
    );
    let off = figure(o, &|i, s| mbsp_sync_profiled(2, false, i, s));
    let on = figure(o, &|i, s| mbsp_sync_profiled(2, true, i, s));
    let put_off = figure(o, &|i, s| mbsp_put_sync_profiled(2, false, i, s));
    let put_on = figure(o, &|i, s| mbsp_put_sync_profiled(2, true, i, s));
    rep.add("profiler", 2, "empty sync, off", "ns", &off);
    rep.add("profiler", 2, "empty sync, on", "ns", &on);
    rep.add("profiler", 2, "put + sync, off", "ns", &put_off);
    rep.add("profiler", 2, "put + sync, on", "ns", &put_on);
    table!(
        o,
        "  empty sync: off {}  on {}  ({:.2}x);  one-word put + sync: off {}  on {}  ({:.2}x)",
        off.show(ns),
        on.show(ns),
        on.median() / off.median(),
        put_off.show(ns),
        put_on.show(ns),
        put_on.median() / put_off.median()
    );
}

/// Starting and ending a top-level run: worker teams against threads started per run.
fn starting_runs(o: &Options, rep: &mut Report) {
    table!(
        o,
        "\nstarting and ending a top-level run of 2 processes (empty function)"
    );
    let (team_iters, spawn_iters) = if o.ring_steps < 20_000 {
        (20, 5)
    } else {
        (2000, 200)
    };
    let team = Samples(crate::nested_bench::top_start(
        2, true, true, team_iters, o.samples,
    ));
    let spawn = Samples(crate::nested_bench::top_start(
        2,
        false,
        true,
        spawn_iters,
        o.samples,
    ));
    rep.add("start", 2, "worker teams", "ns", &team);
    rep.add("start", 2, "threads started per run", "ns", &spawn);
    table!(
        o,
        "  worker teams {}   threads started per run {}   ({:.1}x)",
        team.show(ns),
        spawn.show(ns),
        spawn.median() / team.median()
    );
}

/// The empty sync of oversubscribed runs ([`crate::wait_bench::oversubscription`]).
fn oversubscription(o: &Options, rep: &mut Report, cores: usize) {
    table!(o);
    let rows = crate::wait_bench::oversubscription(&o.oversub_procs, o.samples, o.sample_time);
    if !o.json {
        crate::wait_bench::print_oversubscription(&rows, cores);
    }
    for r in &rows {
        rep.add("oversubscription", r.p, "mbsp", "ns", &r.mbsp);
        rep.add("oversubscription", r.p, "std Barrier", "ns", &r.std);
        rep.add(
            "oversubscription",
            r.p,
            "mbsp, coroutines",
            "ns",
            &r.coroutines,
        );
    }
}

/// A ring of one-word puts at p = 4, against the target for 20 000 supersteps.
fn ring_of_puts(o: &Options, rep: &mut Report, cores: usize) {
    table!(
        o,
        "\nring of one-word puts, p = 4 on {cores} hardware threads, {} supersteps",
        o.ring_steps
    );
    let r = Samples::collect(o.samples.min(5), || ring(4, o.ring_steps));
    rep.add("ring", 4, "seconds per run", "s", &r);
    table!(
        o,
        "  {} s per run ({:.1} µs per superstep); target (20 000 supersteps) under 2 s: {}",
        r.show(|v| format!("{v:.3}")),
        r.median() * 1e6 / o.ring_steps as f64,
        verdict(r.median() * 20_000.0 / (o.ring_steps as f64) < 2.0)
    );
}

/// One figure of the report: the table it belongs to, its process count, its name and unit,
/// and its median, min and max (all three the same for a fitted value).
struct Fig {
    table: &'static str,
    p: usize,
    figure: String,
    unit: &'static str,
    median: f64,
    min: f64,
    max: f64,
}

impl Fig {
    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "table": self.table, "p": self.p, "figure": self.figure, "unit": self.unit,
            "median": self.median, "min": self.min, "max": self.max,
        })
    }
}

/// Every figure the run printed, for `--json` and `--csv`.
#[derive(Default)]
struct Report {
    figures: Vec<Fig>,
}

impl Report {
    fn add(
        &mut self,
        table: &'static str,
        p: usize,
        figure: &str,
        unit: &'static str,
        s: &Samples,
    ) {
        let (min, max) = s.range();
        self.figures.push(Fig {
            table,
            p,
            figure: figure.to_string(),
            unit,
            median: s.median(),
            min,
            max,
        });
    }

    fn value(&mut self, table: &'static str, p: usize, figure: &str, unit: &'static str, v: f64) {
        self.add(table, p, figure, unit, &Samples(vec![v]));
    }

    fn write_csv(&self, path: &std::path::Path) -> std::io::Result<()> {
        use std::io::Write;
        crate::whole_file::write(path, |f| {
            writeln!(f, "table,p,figure,unit,median,min,max")?;
            for x in &self.figures {
                writeln!(
                    f,
                    "{},{},\"{}\",{},{},{},{}",
                    x.table, x.p, x.figure, x.unit, x.median, x.min, x.max
                )?;
            }
            Ok(())
        })
    }
}
