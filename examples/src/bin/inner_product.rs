//! Inner product with a put-broadcast (MulticoreBSP for C paper, Algorithm 2).
//!
//! Each process owns a cyclic share of x and y, computes its partial sum, and puts it into
//! slot `pid` of every process's buffer; after one sync every process adds the p partial sums.
//! Cost: one superstep, an h-relation with h = p - 1 words, so T = 2n/p + p·g + l.
//!
//! `cargo run --release -p mbsp-examples --bin inner_product [-- N P]`

fn main() -> std::process::ExitCode {
    mbsp_examples::report(run())
}

fn run() -> mbsp_examples::Outcome {
    let mut args = mbsp_examples::numbers("[N] [P]");
    let n = args.next().unwrap_or(1_000_000);
    let p = args.next().unwrap_or_else(mbsp::nprocs);

    let alphas = mbsp::run(p, |ctx| {
        let (s, p) = (ctx.pid(), ctx.nprocs());
        // Local vectors: global entry i lives on process i mod p (cyclic distribution).
        let x: Vec<f64> = (s..n).step_by(p).map(|i| i as f64).collect();
        let y: Vec<f64> = (s..n).step_by(p).map(|i| 1.0 / (1.0 + i as f64)).collect();

        // ip_init: register a buffer of p partial sums.
        let buffer = ctx.push_reg(vec![0.0f64; p])?;
        ctx.sync()?;

        // ip: local inner product, then broadcast it into slot s everywhere.
        let alpha: f64 = x.iter().zip(&y).map(|(a, b)| a * b).sum();
        for k in 0..p {
            ctx.put(k, &[alpha], &buffer, s)?;
        }
        ctx.sync()?;
        Ok(ctx.local(&buffer)?.iter().sum::<f64>())
    })?;

    let exact: f64 = (0..n).map(|i| i as f64 / (1.0 + i as f64)).sum();
    println!(
        "n = {n}, p = {p}: <x, y> = {:.6} (sequential: {exact:.6})",
        alphas[0]
    );
    assert!(
        alphas
            .iter()
            .all(|a| (a - exact).abs() <= 1e-9 * exact.abs()),
        "all processes agree"
    );
    Ok(())
}
