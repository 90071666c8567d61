//! The numbers of the FFT and the small kernels every level shares: the element types, exact
//! roots of unity, and the radix-2 transforms across the rows of a tile. A leaf of the FFT's
//! modules: it uses none of them.

pub use num_complex::Complex;
use rustfft::{Fft, FftNum, FftPlanner};
use std::sync::Arc;

/// Floating-point types the FFT works on (`f32`, `f64`; sealed).
pub trait Float: FftNum + bytemuck::Pod + sealed::Sealed {
    /// A sequential rustfft plan of length `n` (forward, or inverse when `inverse`;
    /// unscaled either way): what [`sequential_plan`] returns.
    #[doc(hidden)]
    fn rustfft_plan(n: usize, inverse: bool) -> Arc<dyn Fft<Self>>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

// Why the planner sits behind a method of concrete impls: rustfft's planner is generic over the
// element type, and a generic function is compiled again in every crate (every test binary,
// example and command) that calls it with a type, the largest part of the FFT's compile time.
// The f64 method is an ordinary function, compiled once, here; the f32 one is `#[inline]`, so
// that only the few crates that transform f32 compile a planner for it.
impl Float for f32 {
    #[inline]
    fn rustfft_plan(n: usize, inverse: bool) -> Arc<dyn Fft<f32>> {
        plan_with(&mut FftPlanner::new(), n, inverse)
    }
}
impl Float for f64 {
    #[inline(never)]
    fn rustfft_plan(n: usize, inverse: bool) -> Arc<dyn Fft<f64>> {
        plan_with(&mut FftPlanner::new(), n, inverse)
    }
}

fn plan_with<T: FftNum>(planner: &mut FftPlanner<T>, n: usize, inverse: bool) -> Arc<dyn Fft<T>> {
    if inverse {
        planner.plan_fft_inverse(n)
    } else {
        planner.plan_fft_forward(n)
    }
}

/// A sequential (one-thread) rustfft plan of length `n`, forward or inverse (unscaled either
/// way): the kernel the BSP FFT runs on each process, and the baseline to compare it with.
/// Plans are made by rustfft's planner, which picks the best algorithm for `n` and this CPU
/// (AVX, SSE or scalar).
///
/// ```
/// use mbsp_algorithms::fft::{Complex, sequential_plan};
/// let plan = sequential_plan::<f64>(8, false);
/// let mut x = vec![Complex::new(1.0, 0.0); 8];
/// plan.process(&mut x);
/// assert_eq!(x[0], Complex::new(8.0, 0.0));
/// assert!(x[1..].iter().all(|z| z.norm() < 1e-12));
/// ```
pub fn sequential_plan<T: Float>(n: usize, inverse: bool) -> Arc<dyn Fft<T>> {
    T::rustfft_plan(n, inverse)
}

/// `e^{sign·2πi·num/den}` computed in f64 (the argument reduced exactly first).
pub(crate) fn root<T: Float>(num: usize, den: usize, sign: f64, scale: f64) -> Complex<T> {
    let a = sign * 2.0 * std::f64::consts::PI * ((num % den) as f64) / den as f64;
    let (s, c) = a.sin_cos();
    let f = |x: f64| T::from_f64(x * scale).expect("a float");
    Complex::new(f(c), f(s))
}

/// In-place radix-2 FFTs of length `p` down the columns of a tile of `p` rows of stride `c`
/// (the first `cl` columns), rows in bit-reversed order on input, natural order on output.
#[inline(always)]
pub(crate) fn butterflies<T: Float>(
    tile: &mut [Complex<T>],
    p: usize,
    c: usize,
    cl: usize,
    roots: &[Complex<T>],
    inverse: bool,
) {
    let mut len = 2;
    while len <= p {
        let half = len / 2;
        let step = p / len;
        for g in (0..p).step_by(len) {
            for j in 0..half {
                let w = roots[j * step];
                let w = if inverse { w.conj() } else { w };
                let (lo, hi) = tile.split_at_mut((g + j + half) * c);
                let a = &mut lo[(g + j) * c..(g + j) * c + cl];
                let bb = &mut hi[..cl];
                if j == 0 {
                    for (x, y) in a.iter_mut().zip(bb.iter_mut()) {
                        let t = *y;
                        *y = *x - t;
                        *x = *x + t;
                    }
                } else {
                    for (x, y) in a.iter_mut().zip(bb.iter_mut()) {
                        let t = *y * w;
                        *y = *x - t;
                        *x = *x + t;
                    }
                }
            }
        }
        len *= 2;
    }
}

/// What the FFT's unit tests share: an input and the error measure.
#[cfg(test)]
pub(crate) mod testing {
    use num_complex::Complex;

    /// A deterministic input of length `n` with entries in [-0.5, 0.5).
    pub(crate) fn input(n: usize) -> Vec<Complex<f64>> {
        (0..n)
            .map(|i| {
                let (a, b) = ((i * 7919) % 1000, (i * 104_729) % 997);
                Complex::new(a as f64 / 1000.0 - 0.5, b as f64 / 997.0 - 0.5)
            })
            .collect()
    }

    /// The largest difference between `got` and `want`, relative to `want`'s largest entry.
    pub(crate) fn rel_error(got: &[Complex<f64>], want: &[Complex<f64>]) -> f64 {
        let scale = want.iter().map(|w| w.norm()).fold(0.0, f64::max);
        let diff = got.iter().zip(want).map(|(g, w)| (g - w).norm());
        diff.fold(0.0, f64::max) / scale
    }
}
