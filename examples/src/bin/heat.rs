//! The 1D heat equation with an explicit stencil and halo exchange.
//!
//! The rod of N cells is split into blocks (block distribution). Every step, each process puts
//! its first and last cell into the halo cells of its neighbours, syncs, and updates its block:
//! `u'[i] = u[i] + a (u[i-1] - 2 u[i] + u[i+1])`; the rod's ends are held at 0. Every 100 steps
//! an all-reduce of the total heat (which decays slowly through the cold ends) is printed.
//! The result is checked against the same computation done sequentially.
//! Cost per step: 3n/p flops (local), one superstep with h = 2 words, ended by a lazy sync
//! (`Ctx::declare_incoming`: each process waits for its neighbours' cells only). For blocks that are never
//! empty, `mbsp_algorithms::dist::Halo1d` does the exchange in one call.
//!
//! `cargo run --release -p mbsp-examples --bin heat [-- N P STEPS]`

use mbsp_algorithms::collectives::Comm;
use mbsp_algorithms::dist::{block_range, concat};
use mbsp_algorithms::timer::RegionTimer;

const A: f64 = 0.25;

fn initial(n: usize) -> Vec<f64> {
    // A hot spot in the middle third.
    (0..n)
        .map(|i| {
            if i >= n / 3 && i < 2 * n / 3 {
                100.0
            } else {
                0.0
            }
        })
        .collect()
}

fn main() -> std::process::ExitCode {
    mbsp_examples::report(run())
}

fn run() -> mbsp_examples::Outcome {
    let mut args = mbsp_examples::numbers("[N] [P] [STEPS]");
    let n = args.next().unwrap_or(1_000_000);
    let p = args.next().unwrap_or_else(mbsp::nprocs);
    let steps = args.next().unwrap_or(500);
    let start = initial(n);

    let out = mbsp::run(p, |ctx| {
        let (me, p) = (ctx.pid(), ctx.nprocs());
        let r = block_range(n, p, me);
        let len = r.len();
        // Cells 1..=len are ours; 0 and len + 1 are halos (0.0 at the rod's ends).
        let mut u = ctx.push_reg(vec![0.0f64; len + 2])?;
        let mut comm = Comm::new(ctx)?; // its sync also makes `u` usable
        ctx.local_mut(&mut u)?[1..=len].copy_from_slice(&start[r.clone()]);
        let mut next = vec![0.0; len + 2];
        // Neighbours owning cells (empty blocks own none: skip over them).
        let left = (0..me).rev().find(|&q| !block_range(n, p, q).is_empty());
        let right = (me + 1..p).find(|&q| !block_range(n, p, q).is_empty());
        let timer = RegionTimer::start(ctx)?;
        for step in 0..steps {
            if len > 0 {
                let cells = ctx.local(&u)?;
                let (first, last) = (cells[1], cells[len]);
                if let Some(l) = left {
                    let l_len = block_range(n, p, l).len();
                    ctx.put(l, &[first], &u, l_len + 1)?;
                }
                if let Some(rq) = right {
                    ctx.put(rq, &[last], &u, 0)?;
                }
            }
            // A lazy sync: wait for the neighbours' two cells only, not for every process.
            ctx.declare_incoming(if len > 0 {
                left.is_some() as usize + right.is_some() as usize
            } else {
                0
            })?;
            ctx.sync()?;
            let cells = ctx.local_mut(&mut u)?;
            for i in 1..=len {
                next[i] = cells[i] + A * (cells[i - 1] - 2.0 * cells[i] + cells[i + 1]);
            }
            cells[1..=len].copy_from_slice(&next[1..=len]);
            if (step + 1) % 100 == 0 {
                let heat: f64 = cells[1..=len].iter().sum();
                let total = comm.allreduce_value(ctx, heat, |a, b| a + b)?;
                if me == 0 {
                    eprintln!("step {:>5}: total heat {total:.3}", step + 1);
                }
            }
        }
        let secs = timer.stop(ctx)?;
        let mine = ctx.local(&u)?[1..=len].to_vec();
        comm.free(ctx)?;
        Ok((mine, secs))
    })?;
    let secs = out[0].1;
    let result = concat(out.into_iter().map(|(v, _)| v).collect());

    // The same computation, sequentially.
    let mut u = start;
    let mut next = vec![0.0; n];
    for _ in 0..steps {
        for i in 0..n {
            let l = if i > 0 { u[i - 1] } else { 0.0 };
            let r = if i + 1 < n { u[i + 1] } else { 0.0 };
            next[i] = u[i] + A * (l - 2.0 * u[i] + r);
        }
        std::mem::swap(&mut u, &mut next);
    }
    assert!(
        result == u,
        "the BSP result differs from the sequential one"
    );
    println!(
        "n = {n}, p = {p}, {steps} steps: matches the sequential stencil, {:.1} µs per step",
        secs / steps.max(1) as f64 * 1e6
    );
    Ok(())
}
