//! The same heat-stencil loop written inline in the SPMD closure and in an `#[inline(never)]`
//! function, timed alternately in one program (see "Performance" in docs/semantics.md).
//!
//! Each process owns a block of `n` cells plus two halo cells; every step it puts its first and
//! last cells into its neighbours' halos, syncs, and updates its block:
//! `u'[i] = u[i] + a (u[i-1] - 2 u[i] + u[i+1])`.
//!
//! `cargo run --release -p mbsp --example inline_loop [-- N P STEPS ROUNDS]`
//! (defaults: 1000000 cells per process, p = 1, 100 steps, 5 rounds of each variant).

const A: f64 = 0.25;

/// One step of the stencil over cells `1..=len` of `u` into `next`, then copied back.
#[inline(never)]
fn step(u: &mut [f64], next: &mut [f64], len: usize) {
    for i in 1..=len {
        next[i] = u[i] + A * (u[i - 1] - 2.0 * u[i] + u[i + 1]);
    }
    u[1..=len].copy_from_slice(&next[1..=len]);
}

/// Put this process's boundary cells into its neighbours' halos and sync.
fn exchange(ctx: &mut mbsp::Ctx, u: &mbsp::Reg<f64>, len: usize) -> mbsp::Result<()> {
    let (me, p) = (ctx.pid(), ctx.nprocs());
    let cells = ctx.local(u)?;
    let (first, last) = (cells[1], cells[len]);
    if me > 0 {
        ctx.put(me - 1, &[first], u, len + 1)?;
    }
    if me + 1 < p {
        ctx.put(me + 1, &[last], u, 0)?;
    }
    ctx.sync()
}

fn main() -> mbsp::Result<()> {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>().expect("a number"));
    let n = args.next().unwrap_or(1_000_000).max(1);
    let p = args.next().unwrap_or(1).max(1);
    let steps = args.next().unwrap_or(100).max(1);
    let rounds = args.next().unwrap_or(5).max(1);

    // Per round: (inline, function) milliseconds per step, as process 0 measured them.
    let times = mbsp::run(p, |ctx| {
        let len = n;
        let mut u = ctx.push_reg(vec![0.0f64; len + 2])?;
        ctx.sync()?;
        for (i, x) in ctx.local_mut(&mut u)?[1..=len].iter_mut().enumerate() {
            *x = (i % 100) as f64;
        }
        let mut next = vec![0.0f64; len + 2];
        let mut out = Vec::new();
        for _ in 0..rounds {
            // The loop written inline in the closure.
            ctx.sync()?;
            let t = std::time::Instant::now();
            for _ in 0..steps {
                exchange(ctx, &u, len)?;
                let cells = ctx.local_mut(&mut u)?;
                for i in 1..=len {
                    next[i] = cells[i] + A * (cells[i - 1] - 2.0 * cells[i] + cells[i + 1]);
                }
                cells[1..=len].copy_from_slice(&next[1..=len]);
            }
            let inline = t.elapsed().as_secs_f64() * 1e3 / steps as f64;
            // The same loop in a function.
            ctx.sync()?;
            let t = std::time::Instant::now();
            for _ in 0..steps {
                exchange(ctx, &u, len)?;
                step(ctx.local_mut(&mut u)?, &mut next, len);
            }
            let function = t.elapsed().as_secs_f64() * 1e3 / steps as f64;
            out.push((inline, function));
        }
        let check: f64 = ctx.local(&u)?.iter().sum();
        Ok((out, check))
    })?;
    let (rounds_ms, check) = &times[0];
    println!("n = {n} cells per process, p = {p}, {steps} steps per round (checksum {check:.6e})");
    println!("round  inline ms/step  function ms/step");
    for (r, (a, b)) in rounds_ms.iter().enumerate() {
        println!("{r:>5}  {a:>14.3}  {b:>16.3}");
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (a, b): (Vec<f64>, Vec<f64>) = rounds_ms.iter().copied().unzip();
    let spread = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(0.0, f64::max);
        (lo, hi)
    };
    let ((al, ah), (bl, bh)) = (spread(&a), spread(&b));
    println!(
        "median inline {:.3} ms/step (min {al:.3}, max {ah:.3}), function {:.3} ms/step (min {bl:.3}, max {bh:.3})",
        median(a.clone()),
        median(b.clone())
    );
    Ok(())
}
