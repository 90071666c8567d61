//! `mbsp-bench sort`: BSP sample sort ([`mbsp_algorithms::sort::par_sort`]) against the
//! standard library's sequential `sort_unstable` and rayon's `par_sort_unstable` on a pool of
//! the same number of threads, on the same random `u64` input, measured in the same process.
//!
//! Each sample sorts a fresh copy of the input (the copy is not timed); each round runs the
//! three sorts one after the other, so that a noisy machine slows them alike. Every result is
//! checked against the sequential sort's.

use crate::stats::Samples;
use mbsp::rng::SplitMix64;
use mbsp_algorithms::sort::par_sort;
use rayon::prelude::*;
use serde_json::{Value, json};
use std::time::Instant;

/// The seed of the input.
const SEED: u64 = 0x5eed_2026_0001;

/// `n` pseudo-random `u64` ([`SplitMix64`] from `seed`).
fn random_u64(n: usize, seed: u64) -> Vec<u64> {
    let mut r = SplitMix64::new(seed);
    (0..n).map(|_| r.next_u64()).collect()
}

/// Seconds `sort` takes on a fresh copy of `input`; panics unless the result is `expect`.
fn time_one(input: &[u64], expect: &[u64], what: &str, sort: impl FnOnce(&mut [u64])) -> f64 {
    let mut data = input.to_vec();
    let t = Instant::now();
    sort(&mut data);
    let secs = t.elapsed().as_secs_f64();
    assert!(data == expect, "{what}: the result is not the sorted input");
    secs
}

/// Sort `n` random `u64` for each `p` of `procs` with the sequential standard sort, with rayon
/// on `p` threads and with `par_sort` on `p` processes: the median of `samples` runs of each
/// (after one warm-up run). Prints a table on stdout and progress on stderr; returns the
/// figures (seconds; per row, and the median of all sequential runs) as JSON.
pub fn run(n: usize, procs: &[usize], samples: usize, print: bool) -> Value {
    let samples = samples.max(1);
    eprintln!("sort: generating {n} random u64");
    let input = random_u64(n, SEED);
    let mut expect = input.clone();
    expect.sort_unstable();
    let pools: Vec<rayon::ThreadPool> = procs
        .iter()
        .map(|&p| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(p)
                .build()
                .expect("a rayon thread pool")
        })
        .collect();

    // For each p: a warm-up round (threads started, pages touched; not counted), then rounds
    // of the three sorts. The rounds of one p are consecutive: the runtime keeps the state of
    // the last run (outboxes already touched) for the next run of the same size only.
    if print {
        println!("\nsort: {n} random u64, median of {samples} runs (seconds)");
        println!(
            "  {:>10} {:>4} {:>12} {:>12} {:>12} {:>10} {:>14}",
            "n", "p", "sequential", "rayon", "par_sort", "speedup", "par_sort/rayon"
        );
    }
    let mut all_seq = Vec::with_capacity(samples * procs.len());
    let mut rows = Vec::with_capacity(procs.len());
    for (&p, pool) in procs.iter().zip(&pools) {
        let (mut seq, mut ray, mut bsp) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..=samples {
            if round == 0 {
                eprintln!("sort: p = {p}: warm-up round");
            } else {
                eprintln!("sort: p = {p}: round {round} of {samples}");
            }
            let s = time_one(&input, &expect, "sort_unstable", |d| d.sort_unstable());
            let r = time_one(&input, &expect, "rayon par_sort_unstable", |d| {
                pool.install(|| d.par_sort_unstable())
            });
            let b = time_one(&input, &expect, "par_sort", |d| {
                par_sort(d, p).expect("par_sort")
            });
            if round > 0 {
                seq.push(s);
                ray.push(r);
                bsp.push(b);
            }
        }
        let (seq, ray, bsp) = (Samples(seq), Samples(ray), Samples(bsp));
        let (s_med, r_med, b_med) = (seq.median(), ray.median(), bsp.median());
        if print {
            println!(
                "  {n:>10} {p:>4} {s_med:>12.4} {r_med:>12.4} {b_med:>12.4} {:>9.2}x {:>14.3}",
                s_med / b_med,
                b_med / r_med
            );
        }
        rows.push(json!({
            "p": p,
            "sequential_s": s_med,
            "rayon_s": r_med,
            "par_sort_s": b_med,
            "speedup_over_sequential": s_med / b_med,
            "par_sort_over_rayon": b_med / r_med,
            "sequential_samples_s": seq.0,
            "rayon_samples_s": ray.0,
            "par_sort_samples_s": bsp.0,
        }));
        all_seq.extend(seq.0);
    }
    json!({
        "bench": "sort",
        "element": "u64",
        "n": n,
        "seed": SEED,
        "samples": samples,
        "sequential_s": Samples(all_seq).median(),
        "rows": rows,
    })
}
