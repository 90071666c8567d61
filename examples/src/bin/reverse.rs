//! `reverse` (BSPlib paper §3.2.2): process i ends up with the value of process p - 1 - i.
//!
//! Shows registration, a put from and into the same variable in one superstep (safe because
//! put is buffered on source and destination), and deregistration.
//!
//! `cargo run --release -p mbsp-examples --bin reverse [-- P]`

fn reverse(ctx: &mut mbsp::Ctx, x: i64) -> mbsp::Result<i64> {
    let cell = ctx.push_reg(vec![x])?;
    ctx.sync()?;
    let target = ctx.nprocs() - ctx.pid() - 1;
    ctx.put(target, ctx.local(&cell)?, &cell, 0)?;
    ctx.sync()?;
    ctx.pop_reg(&cell)?; // takes effect at the next sync
    Ok(ctx.local(&cell)?[0])
}

fn main() -> std::process::ExitCode {
    mbsp_examples::report(run())
}

fn run() -> mbsp_examples::Outcome {
    let p = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(mbsp::nprocs);
    let out = mbsp::run(p, |ctx| {
        let mine = 100 + ctx.pid() as i64;
        let got = reverse(ctx, mine)?;
        ctx.sync()?;
        Ok(got)
    })?;
    for (pid, v) in out.iter().enumerate() {
        println!("process {pid} now holds {v}");
        assert_eq!(*v, 100 + (p - 1 - pid) as i64);
    }
    Ok(())
}
