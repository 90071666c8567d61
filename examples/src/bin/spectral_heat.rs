//! The heat equation `u_t = u_xx` on `[0, 2π)` (periodic), solved spectrally inside one run.
//!
//! Each of the `STEPS` time steps transforms the distributed `u` forward, multiplies mode `k` by
//! `e^{-k² dt}` (the exact propagator of the step) and transforms back. The vector stays
//! distributed the whole time: process `s` holds `u[s], u[s + p], ...` (the cyclic distribution
//! of [`BspFft`], the same before and after a transform, for samples and modes alike), and the
//! plan is made once, so every transform is one superstep. Only the final maximum error is
//! combined (an all-reduce). With `u(x, 0) = sin x + ½ sin 3x` the exact solution is
//! `e^{-t} sin x + ½ e^{-9t} sin 3x`.
//!
//! Cost per step: two transforms (`5 (n/p) log₂ n` flops and one superstep of
//! `h = 2 (n/p)(p-1)/p` words each) and `n/p` multiplications.
//!
//! `cargo run --release -p mbsp-examples --bin spectral_heat [-- N P STEPS]`

use mbsp_algorithms::collectives::allreduce_value;
use mbsp_algorithms::dist::cyclic_indices;
use mbsp_algorithms::fft::{BspFft, Complex};
use std::f64::consts::PI;

fn main() -> std::process::ExitCode {
    mbsp_examples::report(run())
}

fn run() -> mbsp_examples::Outcome {
    let mut args = mbsp_examples::numbers("[N] [P] [STEPS]");
    let n = args.next().unwrap_or(1 << 12);
    let p = args.next().unwrap_or(2);
    let steps = args.next().unwrap_or(100);
    let (dt, t_end) = (1e-3, 1e-3 * steps as f64);
    let x = |j: usize| 2.0 * PI * j as f64 / n as f64;
    let exact = |x: f64, t: f64| (-t).exp() * x.sin() + 0.5 * (-9.0 * t).exp() * (3.0 * x).sin();

    let errors = mbsp::run(p, |ctx| {
        let (me, p) = (ctx.pid(), ctx.nprocs());
        let mut plan = BspFft::<f64>::new(ctx, n)?;
        // This process's samples, then (after a forward transform) its modes: same indices.
        let mine: Vec<usize> = cyclic_indices(n, p, me).collect();
        let mut u: Vec<Complex<f64>> = mine
            .iter()
            .map(|&j| Complex::new(exact(x(j), 0.0), 0.0))
            .collect();
        let decay: Vec<f64> = mine
            .iter()
            .map(|&k| {
                let wave = if k <= n / 2 {
                    k as f64
                } else {
                    k as f64 - n as f64
                };
                (-wave * wave * dt).exp()
            })
            .collect();
        for _ in 0..steps {
            plan.forward(ctx, &mut u)?;
            for (c, d) in u.iter_mut().zip(&decay) {
                *c *= d;
            }
            plan.inverse(ctx, &mut u)?;
        }
        let err = mine
            .iter()
            .zip(&u)
            .map(|(&j, v)| (v.re - exact(x(j), t_end)).abs())
            .fold(0.0, f64::max);
        let err = allreduce_value(ctx, err, f64::max)?;
        plan.free(ctx)?;
        Ok(err)
    })?;
    let err = errors[0];
    println!("n = {n}, p = {p}, {steps} steps to t = {t_end}: max error {err:.2e}");
    // Rounding only: each step's transforms add a few ulps times log n.
    assert!(err < 1e-12 * steps as f64, "error {err}");
    Ok(())
}
