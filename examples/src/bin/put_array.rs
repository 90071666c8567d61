//! `put_array` (BSPlib paper §3.2.3): the concurrent assignment `xs[xs[i]] := xs[i]` on a
//! block-distributed array, one put per element with a computed (pid, offset).
//!
//! `cargo run --release -p mbsp-examples --bin put_array [-- N P]`

fn put_array(ctx: &mut mbsp::Ctx, xs: &mbsp::Reg<u32>, n: usize) -> mbsp::Result<()> {
    let p = ctx.nprocs();
    if !n.is_multiple_of(p) {
        return Err(ctx.abort(format!("put_array: n={n} not divisible by p={p}")));
    }
    let n_over_p = n / p;
    for &v in ctx.local(xs)? {
        let (dst_pid, dst_idx) = (v as usize / n_over_p, v as usize % n_over_p);
        ctx.put(dst_pid, &[v], xs, dst_idx)?;
    }
    ctx.sync()?;
    Ok(())
}

fn main() -> std::process::ExitCode {
    mbsp_examples::report(run())
}

fn run() -> mbsp_examples::Outcome {
    let mut args = mbsp_examples::numbers("[N] [P]");
    let n = args.next().unwrap_or(1 << 16);
    let p = args.next().unwrap_or_else(mbsp::nprocs);
    // A permutation of 0..n: element i holds perm(i); afterwards slot perm(i) holds perm(i),
    // i.e. process s holds s*n/p .. (s+1)*n/p in order.
    let perm = |i: usize| ((i as u64 * 40_503 + 17) % n as u64) as u32; // a bijection when gcd(40503, n) = 1
    let blocks = mbsp::run(p, |ctx| {
        let s = ctx.pid();
        let b = n / ctx.nprocs();
        let xs = ctx.push_reg((s * b..(s + 1) * b).map(perm).collect::<Vec<u32>>())?;
        ctx.sync()?;
        put_array(ctx, &xs, n)?;
        Ok(ctx.local(&xs)?.to_vec())
    })?;
    let all: Vec<u32> = blocks.concat();
    assert!(
        all.iter().enumerate().all(|(i, &v)| v as usize == i),
        "xs[xs[i]] = xs[i]"
    );
    println!("put_array: n = {n}, p = {p}: every element landed at its own index");
    Ok(())
}
