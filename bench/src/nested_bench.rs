//! `mbsp bench nested`: sync latency of a flat run of p processes against nested runs with the
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

/// Nanoseconds to start and end a nested run of `inner` processes (threads are started per run).
fn nested_start(inner: usize, policy: &Policy, iters: usize, samples: usize) -> Vec<f64> {
    Run::new(2)
        .policy(policy.clone())
        .run(|ctx| timed(samples, iters, || ctx.run(inner, |_| Ok(())).map(drop)))
        .expect("benchmark run")
        .swap_remove(0)
}

/// Run the benchmark and print the table.
pub fn run(samples: usize, quick: bool) {
    println!("mbsp bench nested: {}", crate::machine::describe());
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
        "nested run start+end"
    );
    for p in [2usize, 4, 8] {
        for policy in [Policy::Compact, Policy::Scattered] {
            let f = Samples(flat(p, &policy, iters, samples));
            let (i, o) = nested(p / 2, &policy, iters, samples);
            let (i, o) = (Samples(i), Samples(o));
            let s = Samples(nested_start(
                p / 2,
                &policy,
                if quick { 10 } else { 300 },
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
}
