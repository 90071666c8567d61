//! Passes of back-to-back syncs, each after every process has slept (the shape of MulticoreBSP
//! for C's barrier benchmark, benchmarks/src/barrier.c): how fast waiting returns to spinning
//! after a long idle phase. Prints each pass's time per sync, then the median and worst pass.
//!
//! `cargo run -p mbsp --release --example sync_after_sleep -- [passes] [sleep_ms] [p] [spins
//! yields]` (default 10 passes, 1000 ms, p = 2, the default wait policy). A short policy (e.g.
//! `100 0`) makes every wait longer than a wake-up sleep, which shows whether two processes that
//! wake each other up keep doing so.

use std::time::{Duration, Instant};

const SYNCS: u32 = 1000;

fn main() -> mbsp::Result<()> {
    let arg = |i: usize, default: u64| {
        std::env::args()
            .nth(i)
            .map_or(default, |s| s.parse().expect("a whole number"))
    };
    let (passes, sleep_ms, p) = (arg(1, 10), arg(2, 1000), arg(3, 2) as usize);
    let mut run = mbsp::Run::new(p);
    if std::env::args().nth(4).is_some() {
        run = run.wait_policy(mbsp::WaitPolicy::new(arg(4, 0) as u32, arg(5, 0) as u32));
    }
    let times = run.run(move |ctx| {
        let mut per_sync = Vec::new();
        let mut slow = Vec::new();
        for _ in 0..passes {
            std::thread::sleep(Duration::from_millis(sleep_ms));
            ctx.sync()?;
            let t = Instant::now();
            // Syncs slower than 5 us: how many, and the index of the last one.
            let (mut n, mut last, mut prev) = (0, 0, Instant::now());
            for i in 0..SYNCS {
                ctx.sync()?;
                let now = Instant::now();
                if now - prev > Duration::from_micros(5) {
                    (n, last) = (n + 1, i);
                }
                prev = now;
            }
            per_sync.push(t.elapsed().as_secs_f64() * 1e6 / f64::from(SYNCS));
            slow.push((n, last));
        }
        Ok((per_sync, slow))
    })?;
    let (pass, slow) = times[0].clone();
    let shown: Vec<String> = slow.iter().map(|(n, last)| format!("{n}/{last}")).collect();
    println!(
        "syncs over 5 us / index of the last one, by pass: {}",
        shown.join(" ")
    );
    let mut pass = pass;
    let shown: Vec<String> = pass.iter().map(|t| format!("{t:.2}")).collect();
    println!("us per sync, by pass (pid 0): {}", shown.join(" "));
    pass.sort_by(f64::total_cmp);
    let median = pass[pass.len() / 2];
    let worst = pass[pass.len() - 1];
    println!(
        "p {p}, {passes} passes of {SYNCS} syncs after {sleep_ms} ms asleep: median {median:.2} us, \
         worst {worst:.2} us per sync (worst/median {:.1})",
        worst / median
    );
    Ok(())
}
