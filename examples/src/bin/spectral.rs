//! Spectral differentiation with the BSP FFT.
//!
//! Samples `f(x) = sin(3x) + cos(5x) + 0.5 sin(40x)` at `n` points of `[0, 2π)`, transforms
//! with `p` processes, multiplies mode `k` by `i·k` (the derivative of `e^{ikx}`), transforms
//! back, and compares with the exact derivative: for a band-limited function the error is at
//! rounding level (about n·ε, from the wave numbers up to n/2). Cost: two BSP FFTs (one superstep each) and `n/p` local multiplications.
//!
//! `cargo run --release -p mbsp-examples --bin spectral [-- N P]`

use mbsp_algorithms::fft::{Complex, fft, ifft};
use std::f64::consts::PI;

fn main() -> std::process::ExitCode {
    mbsp_examples::report(run())
}

fn run() -> mbsp_examples::Outcome {
    let mut args = mbsp_examples::numbers("[N] [P]");
    let n = args.next().unwrap_or(1 << 16);
    let p = args.next().unwrap_or(2);
    let x = |j: usize| 2.0 * PI * j as f64 / n as f64;
    let f = |t: f64| (3.0 * t).sin() + (5.0 * t).cos() + 0.5 * (40.0 * t).sin();
    let df = |t: f64| 3.0 * (3.0 * t).cos() - 5.0 * (5.0 * t).sin() + 20.0 * (40.0 * t).cos();

    let mut u: Vec<Complex<f64>> = (0..n).map(|j| Complex::new(f(x(j)), 0.0)).collect();
    fft(&mut u, p)?;
    for (k, c) in u.iter_mut().enumerate() {
        // Wave number of bin k: 0, 1, ..., n/2 - 1, then -n/2, ..., -1 (the Nyquist mode of a
        // real signal has no derivative that is real: drop it).
        let kk = if k < n / 2 {
            k as f64
        } else if k == n / 2 {
            0.0
        } else {
            k as f64 - n as f64
        };
        *c *= Complex::new(0.0, kk);
    }
    ifft(&mut u, p)?;
    let err = (0..n)
        .map(|j| (u[j].re - df(x(j))).abs())
        .fold(0.0, f64::max);
    println!("n = {n}, p = {p}: max error of the spectral derivative {err:.2e}");
    // Rounding in the transforms, amplified by wave numbers up to n/2: ~n·ε.
    assert!(err < 1e-13 * n as f64, "spectral derivative error {err}");
    Ok(())
}
