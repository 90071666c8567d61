//! Probe: empty sync, puts + sync and Comm all-reduce at p = 2 (ns, best of 7 samples):
//! `cargo run --release -p mbsp-bench --example sync_probe`.
use std::time::Instant;
fn t(
    p: usize,
    f: impl Fn(
        &mut mbsp::Ctx,
        &mbsp::Reg<u64>,
        &mut mbsp_algorithms::collectives::Comm,
    ) -> mbsp::Result<()>
    + Sync,
) -> f64 {
    mbsp::run(p, |ctx| {
        let r = ctx.push_reg(vec![0u64; 4])?;
        let mut comm = mbsp_algorithms::collectives::Comm::new(ctx)?;
        let mut best = f64::MAX;
        for _ in 0..7 {
            ctx.sync()?;
            let t0 = Instant::now();
            for _ in 0..20000 {
                f(ctx, &r, &mut comm)?;
            }
            best = best.min(t0.elapsed().as_nanos() as f64 / 20000.0);
        }
        Ok(best)
    })
    .unwrap()[0]
}
fn main() {
    for _ in 0..3 {
        let e = t(2, |ctx, _, _| ctx.sync());
        let p = t(2, |ctx, r, _| {
            ctx.put(1 - ctx.pid(), &[7u64], r, 0)?;
            ctx.sync()
        });
        let c = t(2, |ctx, _, comm| {
            comm.allreduce_value(ctx, 1u64, |a, b| a + b).map(drop)
        });
        let one = t(2, |ctx, r, _| {
            if ctx.pid() == 0 {
                ctx.put(1, &[7u64], r, 0)?;
            }
            ctx.sync()
        });
        let three = t(2, |ctx, r, _| {
            ctx.put(1 - ctx.pid(), &[7u64, 8, 9], r, 0)?;
            ctx.sync()
        });
        println!(
            "one-word put one way {one:.0} ns ({:.2}x), three words both ways {three:.0} ns ({:.2}x)",
            one / e,
            three / e
        );
        println!(
            "empty {e:.0} ns, put+sync {p:.0} ns ({:.2}x), comm allreduce {c:.0} ns ({:.2}x)",
            p / e,
            c / e
        );
    }
}
