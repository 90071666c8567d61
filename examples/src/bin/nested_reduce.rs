//! A reduction at two levels of the machine: one process per package, and inside each, one per
//! core of that package.
//!
//! The data is split into blocks per package (block distribution), each package's block into
//! blocks per core. The cores of a package sum their blocks with an all-reduce inside their
//! nested run (its own barrier, registrations and message queue); then the packages combine
//! their sums with an all-reduce at the top level. On a one-package machine both levels still
//! run (1 package x its cores); set `MBSP_TOPOLOGY="synthetic:package:2 core:2 pu:1"` to try a two-package
//! tree (placement is then planned, not applied).
//! Cost: inner level one superstep with h = c - 1 words (c cores per package); top level one
//! superstep with h = P - 1 (P packages): the slower inter-package g and l are paid once.
//!
//! `cargo run --release -p mbsp-examples --bin nested_reduce [-- N]`

use mbsp::{Level, Run};
use mbsp_algorithms::collectives::allreduce_value;
use mbsp_algorithms::dist::block_range;

fn main() -> std::process::ExitCode {
    mbsp_examples::report(run())
}

fn run() -> mbsp_examples::Outcome {
    let n = mbsp_examples::numbers("[N]").next().unwrap_or(10_000_000);
    let x: Vec<f64> = (0..n).map(|i| 1.0 / (1.0 + i as f64)).collect();

    let per_package = Run::per(Level::Package).run(|ctx| {
        let (pkg, packages) = (ctx.pid(), ctx.nprocs());
        let mine = block_range(n, packages, pkg);
        let x = &x[mine.clone()];
        let inner = ctx.run_per(Level::Core, |core| {
            let r = block_range(x.len(), core.nprocs(), core.pid());
            let partial: f64 = x[r].iter().sum();
            // Sum over the cores of this package only.
            allreduce_value(core, partial, |a, b| a + b)
        })?;
        let cores = inner.len();
        // Then over the packages.
        let total = allreduce_value(ctx, inner[0], |a, b| a + b)?;
        Ok((cores, inner[0], total))
    })?;

    let exact: f64 = x.iter().sum();
    for (pkg, (cores, sum, total)) in per_package.iter().enumerate() {
        println!("package {pkg}: {cores} cores, package sum {sum:.9}, total {total:.9}");
        assert!(
            (total - exact).abs() <= 1e-9 * exact,
            "total {total} vs {exact}"
        );
    }
    println!(
        "n = {n}: {} packages agree on the sum {exact:.9}",
        per_package.len()
    );
    Ok(())
}
