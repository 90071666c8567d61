//! Prefix sums of a distributed array (the BSPlib paper's scan, done with the collectives).
//!
//! The caller's array is split into blocks, one per process, handed out without copying
//! (`dist::run_on_blocks`). Each process sums its block, an exclusive scan over the processes
//! gives the sum of everything before its block, and each process finishes its prefix sums
//! locally. Cost: local work 2n/p, one superstep with h = p - 1 words (the scan of one word).
//!
//! `cargo run --release -p mbsp-examples --bin scan [-- N P]`

use mbsp_algorithms::collectives::scan_exclusive;
use mbsp_algorithms::dist::run_on_blocks;
use mbsp_algorithms::timer::RegionTimer;

fn main() -> std::process::ExitCode {
    mbsp_examples::report(run())
}

fn run() -> mbsp_examples::Outcome {
    let mut args = mbsp_examples::numbers("[N] [P]");
    let n = args.next().unwrap_or(10_000_000);
    let p = args.next().unwrap_or_else(mbsp::nprocs);

    let mut data: Vec<u64> = (0..n as u64).map(|i| i % 7).collect();
    let input = data.clone();
    let times = run_on_blocks(p, &mut data, |ctx, block| {
        let timer = RegionTimer::start(ctx)?;
        let mine: u64 = block.iter().sum();
        let mut before = [mine];
        scan_exclusive(ctx, &mut before, 0, |a, b| a + b)?;
        let mut running = before[0];
        for x in block.iter_mut() {
            running += *x;
            *x = running;
        }
        timer.stop(ctx)
    })?;

    let mut want = input;
    for i in 1..n {
        want[i] += want[i - 1];
    }
    assert!(data == want, "prefix sums differ from the sequential ones");
    println!(
        "n = {n}, p = {p}: prefix sums correct, last = {}, {:.3} ms (slowest process)",
        data.last().copied().unwrap_or(0),
        times[0] * 1e3
    );
    Ok(())
}
