//! The numbers of the FFT and the small kernels every level shares: the element types, exact
//! roots of unity, and the radix-2 transforms across the rows of a tile. A leaf of the FFT's
//! modules: it uses none of them.

pub use num_complex::Complex;
use rustfft::FftNum;

/// Floating-point types the FFT works on (`f32`, `f64`).
pub trait Float: FftNum + bytemuck::Pod {}
impl Float for f32 {}
impl Float for f64 {}

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
