//! `mbsp-bench nested`: sync latency of a flat run of p processes against nested runs with the
//! same total (2 × p/2), for compact and scattered placement, side by side in one run.

use crate::stats::{Samples, ns, timed};
use mbsp::{Policy, Run};

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
    Run::new(outer)
        .policy(policy.clone())
        .run(|ctx| {
            let nested = || Run::new(inner).reuse_threads(reuse);
            timed(samples, iters, || {
                ctx.run_with(nested(), |_| Ok(())).map(drop)
            })
        })
        .expect("benchmark run")
        .swap_remove(0)
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

/// The cost of starting runs: parked teams against threads started per run.
fn start_table(samples: usize, quick: bool) {
    let iters = if quick { 20 } else { 2000 };
    let spawn_iters = if quick { 5 } else { 200 };
    println!("\nstarting and ending a run (empty function), median [min–max]");
    println!(
        "  {:<48} {:<26} {:<26} {:>9}",
        "", "worker teams", "threads started per run", "speed-up"
    );
    let rows: Vec<(String, Samples, Samples)> = vec![
        (
            "nested run of 2, in a top-level run of 1".into(),
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
            "2 nested runs of 2 at once (top-level run of 2)".into(),
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
            "top-level run of 2, caller bound (default)".into(),
            Samples(top_start(2, true, true, iters, samples)),
            Samples(top_start(2, false, true, spawn_iters, samples)),
        ),
        (
            "top-level run of 2, unbound (bind(false))".into(),
            Samples(top_start(2, true, false, iters, samples)),
            Samples(top_start(2, false, false, spawn_iters, samples)),
        ),
    ];
    for (name, team, spawn) in rows {
        println!(
            "  {name:<48} {:<26} {:<26} {:>8.1}x",
            team.show(ns),
            spawn.show(ns),
            spawn.median() / team.median()
        );
    }
    println!(
        "  (a top-level run binds the caller's thread as process 0 and restores it at the end: two\n   \
         binding system calls, which the unbound row leaves out)"
    );
}

/// Run the benchmark and print the table.
pub fn run(samples: usize, quick: bool) {
    println!("mbsp-bench nested: {}", crate::machine::describe());
    let m = mbsp::Machine::current().expect("machine");
    println!(
        "machine tree: {} packages, {} NUMA nodes, {} cores, {} PUs ({})",
        m.machine.packages().len(),
        m.machine.numas().len(),
        m.machine.cores().len(),
        m.machine.pus().len(),
        m.machine.source()
    );
    println!("{samples} samples per figure; median [min–max] per sync\n");
    let iters = if quick { 200 } else { 20_000 };
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
    for p in [2usize, 4, 8] {
        for policy in [Policy::Compact, Policy::Scattered] {
            let f = Samples(flat(p, &policy, iters, samples));
            let (i, o) = nested(p / 2, &policy, iters, samples);
            let (i, o) = (Samples(i), Samples(o));
            let s = Samples(nested_start(
                2,
                p / 2,
                &policy,
                true,
                if quick { 10 } else { 2000 },
                samples,
            ));
            println!(
                "  {p:>2}  {:<10} {:<26} {:<26} {:<26} {:>12.2}x  {}",
                policy.to_string(),
                f.show(ns),
                i.show(ns),
                o.show(ns),
                i.median() / f.median(),
                s.show(ns)
            );
        }
    }
    println!(
        "\n(inner/flat < 1: a sync among the p/2 processes of a nested run is cheaper than one over all p.)"
    );
    start_table(samples, quick);
}
