//! Hand-vectorised loops of the two passes of the flat transform with `p = 2` in two and four
//! rows, and of the radix-4 and radix-8 column passes of the natural-order transform (a top
//! level of one process), for `f64` on x86-64 with AVX2 and FMA: two complex numbers per
//! 256-bit register.
//!
//! Why by hand: the compiler keeps `Complex<f64>` arithmetic in 128-bit registers, one complex
//! number per iteration with its shuffles, and the two passes around the kernels then took a
//! third of a transform's time at `n = 2^17` (`perf`, docs/benchmarks.md). Each function returns
//! `false` where it cannot run (another element type, another processor), and the caller runs
//! its portable loop; the results agree with it to rounding (the products use fused
//! multiply-adds).

use super::num::{Complex, Float};
use std::any::TypeId;

type C = Complex<f64>;

/// `x` as `f64` numbers when `T` is `f64`.
#[inline(always)]
fn f64s_mut<T: Float>(x: &mut [Complex<T>]) -> Option<&mut [C]> {
    (TypeId::of::<T>() == TypeId::of::<f64>())
        // SAFETY: `T` is `f64`: the same type.
        .then(|| unsafe { std::slice::from_raw_parts_mut(x.as_mut_ptr() as *mut C, x.len()) })
}

/// `x` as `f64` numbers when `T` is `f64`.
#[inline(always)]
fn f64s<T: Float>(x: &[Complex<T>]) -> Option<&[C]> {
    (TypeId::of::<T>() == TypeId::of::<f64>())
        // SAFETY: `T` is `f64`: the same type.
        .then(|| unsafe { std::slice::from_raw_parts(x.as_ptr() as *const C, x.len()) })
}

/// `z` as an `f64` number when `T` is `f64`.
#[inline(always)]
fn f64_of<T: Float>(z: Complex<T>) -> Option<C> {
    f64s(std::slice::from_ref(&z)).map(|s| s[0])
}

/// `k` as an `f64` number when `T` is `f64` (`Some(None)` for none).
#[inline(always)]
fn f64_opt<T: Float>(k: Option<Complex<T>>) -> Option<Option<C>> {
    match k {
        None => Some(None),
        Some(k) => f64_of(k).map(Some),
    }
}

/// Whether the loops here may run for `T` (f64, and the standard library's cached detection
/// of AVX2 and FMA).
#[inline]
fn available<T: Float>() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        TypeId::of::<T>() == TypeId::of::<f64>()
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The twiddles of a slab as `split::Twiddles::slab` makes them: entry `j`'s is `f·t[j]`, `t[j]`
/// conjugated when `conj` (the inverse).
#[derive(Clone, Copy)]
pub(crate) struct SlabTwiddles<'a, T: Float> {
    pub(crate) f: Complex<T>,
    pub(crate) t: &'a [Complex<T>],
    pub(crate) conj: bool,
}

impl<'a, T: Float> SlabTwiddles<'a, T> {
    /// The same twiddles in `f64` numbers when `T` is `f64`.
    #[inline(always)]
    fn f64(self) -> Option<(C, &'a [C], bool)> {
        Some((f64_of(self.f)?, f64s(self.t)?, self.conj))
    }
}

/// The DIF butterfly of two rows with the second row's twiddles `w`: for every `j`,
/// `(lo[j], hi[j]) ← (lo[j] + hi[j], (lo[j] − hi[j])·w[j])`. `false`: not run (see the module
/// docs).
pub(crate) fn dif2<T: Float>(
    lo: &mut [Complex<T>],
    hi: &mut [Complex<T>],
    w: SlabTwiddles<'_, T>,
) -> bool {
    assert!(hi.len() == lo.len() && w.t.len() >= lo.len());
    if !available::<T>() {
        return false;
    }
    let (Some(lo), Some(hi), Some((f, t, conj))) = (f64s_mut(lo), f64s_mut(hi), w.f64()) else {
        return false;
    };
    #[cfg(target_arch = "x86_64")]
    // SAFETY: AVX2 and FMA are present (checked); the lengths are checked above.
    unsafe {
        avx2::dif2(lo, hi, f, t, conj)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (lo, hi, f, t, conj);
    true
}

/// The last pass's butterflies for `p = 2` in two rows: for every `j`,
/// `(y0[j], y1[j]) ← (a + c, a − c)` with `a = a_src[j]` (times `k0` when given) and
/// `c = c_src[j]·w[j]`. `false`: not run.
///
/// # Safety
/// `y0` and `y1` are valid for `n` writes and `a_src` and `c_src` for `n` reads, with
/// `w.t.len() ≥ n`; an input may be one of the outputs (entry `j` is read before entry `j` is
/// written), and nothing else overlaps.
pub(crate) unsafe fn fly2<T: Float>(
    y: [*mut Complex<T>; 2],
    a_src: *const Complex<T>,
    c_src: *const Complex<T>,
    n: usize,
    k0: Option<Complex<T>>,
    w: SlabTwiddles<'_, T>,
) -> bool {
    assert!(w.t.len() >= n);
    if !available::<T>() {
        return false;
    }
    let (Some((f, t, conj)), Some(k0)) = (w.f64(), f64_opt(k0)) else {
        return false;
    };
    // `T` is `f64` (checked): the pointers address `f64` numbers.
    let (y, a_src, c_src) = (y.map(|p| p as *mut C), a_src as *const C, c_src as *const C);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: AVX2 and FMA are present (checked); the pointers as the caller promises.
    unsafe {
        avx2::fly2(y, a_src, c_src, n, k0, f, t, conj)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (y, a_src, c_src, k0, f, t, conj);
    true
}

/// The rows and their twiddles of a radix-`L` DIF pass as `f64` numbers (rows, twiddle
/// factors, within-slab twiddles, conjugated), when the loops here may run for `T`; checks
/// that the rows have one length and the twiddles cover it.
#[allow(clippy::type_complexity)]
fn radix_args<'r, 'w, T: Float, const L: usize, const W: usize>(
    rows: [&'r mut [Complex<T>]; L],
    w: [SlabTwiddles<'w, T>; W],
) -> Option<([&'r mut [C]; L], [C; W], [&'w [C]; W], bool)> {
    let n = rows[0].len();
    assert!(rows.iter().all(|r| r.len() == n) && w.iter().all(|w| w.t.len() >= n));
    if !available::<T>() {
        return None;
    }
    let w = w.map(|w| w.f64());
    let mut rows = rows.map(f64s_mut);
    if w.iter().any(Option::is_none) || rows.iter().any(Option::is_none) {
        return None;
    }
    let w = w.map(|w| w.expect("checked"));
    let rows = std::array::from_fn(|i| rows[i].take().expect("checked"));
    Some((rows, w.map(|w| w.0), w.map(|w| w.1), w[0].2))
}

/// The radix-4 DIF butterflies of four rows with their twiddles, as `split::dif_pass` makes
/// them: rows in natural order, out in bit-reversed order (frequencies 0, 2, 1, 3), the row of
/// frequency `r` times `w[r−1]` (the inverse's `ω₄` is `+i`: `w[0].conj`). `false`: not run.
pub(crate) fn dif4<T: Float>(rows: [&mut [Complex<T>]; 4], w: [SlabTwiddles<'_, T>; 3]) -> bool {
    let Some((rows, f, t, conj)) = radix_args(rows, w) else {
        return false;
    };
    #[cfg(target_arch = "x86_64")]
    // SAFETY: AVX2 and FMA are present (checked); the lengths are checked (`radix_args`).
    unsafe {
        avx2::dif4(rows, f, t, conj)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (rows, f, t, conj);
    true
}

/// The radix-8 DIF butterflies of eight rows with their twiddles, as `split::radix8` makes
/// them: rows in natural order in, frequencies 0, 4, 2, 6, 1, 5, 3, 7 out, the row of frequency
/// `f ≥ 1` times `w[f−1]`. `false`: not run.
pub(crate) fn dif8<T: Float>(rows: [&mut [Complex<T>]; 8], w: [SlabTwiddles<'_, T>; 7]) -> bool {
    let Some((rows, f, t, conj)) = radix_args(rows, w) else {
        return false;
    };
    #[cfg(target_arch = "x86_64")]
    // SAFETY: AVX2 and FMA are present (checked); the lengths are checked (`radix_args`).
    unsafe {
        avx2::dif8(rows, f, t, conj)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (rows, f, t, conj);
    true
}

/// The last pass's butterflies for `p = 2` in `2Q` rows (`Q` = 2 or 4 blocks per pack,
/// interleaved in the output): for every `u` and `q < Q`, `(y0[Q·u+q], y1[Q·u+q]) ← (a + c,
/// a − c)` with `a = a_q[u]` (times `k0` when given) and `c = c_q[u]·w[Q·u+q]`. `false`: not
/// run.
pub(crate) fn fly_blocks<T: Float, const Q: usize>(
    y: [&mut [Complex<T>]; 2],
    a: [&[Complex<T>]; Q],
    c: [&[Complex<T>]; Q],
    k0: Option<Complex<T>>,
    w: SlabTwiddles<'_, T>,
) -> bool {
    let n = a[0].len();
    assert!(
        Q.is_multiple_of(2)
            && a.iter().chain(&c).all(|x| x.len() == n)
            && y.iter().all(|y| y.len() == Q * n)
            && w.t.len() >= Q * n
    );
    if !available::<T>() {
        return false;
    }
    let [y0, y1] = y;
    let (Some(y0), Some(y1), Some((f, t, conj))) = (f64s_mut(y0), f64s_mut(y1), w.f64()) else {
        return false;
    };
    let (a, c) = (a.map(f64s), c.map(f64s));
    if a.iter().chain(&c).any(Option::is_none) {
        return false;
    }
    let (a, c) = (
        a.map(|x| x.expect("checked")),
        c.map(|x| x.expect("checked")),
    );
    let Some(k0) = f64_opt(k0) else {
        return false;
    };
    #[cfg(target_arch = "x86_64")]
    // SAFETY: AVX2 and FMA are present (checked); the lengths are checked above.
    unsafe {
        avx2::fly_blocks(y0, y1, a, c, k0, f, t, conj)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (y0, y1, a, c, k0, f, t, conj);
    true
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    // The outer module's `C`, named afresh (a `super` path would read as one into `fft`).
    type C = num_complex::Complex<f64>;
    use std::arch::x86_64::*;

    /// Two complex products `a·b` (`[re, im, re, im]` each).
    #[inline(always)]
    unsafe fn cmul(a: __m256d, b: __m256d) -> __m256d {
        // SAFETY: the caller has the target features (every function of this module does).
        unsafe {
            let bre = _mm256_movedup_pd(b);
            let bim = _mm256_permute_pd(b, 0b1111);
            let swapped = _mm256_permute_pd(a, 0b0101);
            // Even lanes a.re·b.re − a.im·b.im, odd lanes a.im·b.re + a.re·b.im.
            _mm256_fmaddsub_pd(a, bre, _mm256_mul_pd(swapped, bim))
        }
    }

    /// `f` twice.
    #[inline(always)]
    unsafe fn splat(f: C) -> __m256d {
        // SAFETY: this module's functions run only where AVX2 and FMA are present (their
        // target features, or the caller's); the pointers address the entries the lengths checked
        // by the callers allow.
        unsafe { _mm256_setr_pd(f.re, f.im, f.re, f.im) }
    }

    /// The sign mask that conjugates two complex numbers (or none).
    #[inline(always)]
    unsafe fn conj_mask(conj: bool) -> __m256d {
        // SAFETY: this module's functions run only where AVX2 and FMA are present (their
        // target features, or the caller's); the pointers address the entries the lengths checked
        // by the callers allow.
        unsafe {
            if conj {
                _mm256_setr_pd(0.0, -0.0, 0.0, -0.0)
            } else {
                _mm256_setzero_pd()
            }
        }
    }

    /// [`super::dif2`].
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dif2(lo: &mut [C], hi: &mut [C], f: C, t: &[C], conj: bool) {
        let n = lo.len();
        let (lp, hp, tp) = (
            lo.as_mut_ptr() as *mut f64,
            hi.as_mut_ptr() as *mut f64,
            t.as_ptr() as *const f64,
        );
        // SAFETY: this module's functions run only where AVX2 and FMA are present (their
        // target features, or the caller's); the pointers address the entries the lengths checked
        // by the callers allow.
        unsafe {
            let (fv, mask) = (splat(f), conj_mask(conj));
            let mut j = 0;
            while j + 2 <= n {
                let x = _mm256_loadu_pd(lp.add(2 * j));
                let y = _mm256_loadu_pd(hp.add(2 * j));
                let w = cmul(_mm256_xor_pd(_mm256_loadu_pd(tp.add(2 * j)), mask), fv);
                _mm256_storeu_pd(lp.add(2 * j), _mm256_add_pd(x, y));
                _mm256_storeu_pd(hp.add(2 * j), cmul(_mm256_sub_pd(x, y), w));
                j += 2;
            }
            if j < n {
                let tj = if conj { t[j].conj() } else { t[j] };
                let (x, y) = (lo[j], hi[j]);
                lo[j] = x + y;
                hi[j] = (x - y) * (f * tj);
            }
        }
    }

    /// [`super::fly2`].
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn fly2(
        [y0, y1]: [*mut C; 2],
        a_src: *const C,
        c_src: *const C,
        n: usize,
        k0: Option<C>,
        f: C,
        t: &[C],
        conj: bool,
    ) {
        let (o0, o1) = (y0 as *mut f64, y1 as *mut f64);
        let (ap, cp, tp) = (
            a_src as *const f64,
            c_src as *const f64,
            t.as_ptr() as *const f64,
        );
        // SAFETY: this module's functions run only where AVX2 and FMA are present (their
        // target features, or the caller's); the pointers address the entries the lengths checked
        // by the callers allow.
        unsafe {
            let (fv, mask) = (splat(f), conj_mask(conj));
            let kv = k0.map(|k| splat(k));
            let mut j = 0;
            while j + 2 <= n {
                let mut a = _mm256_loadu_pd(ap.add(2 * j));
                if let Some(kv) = kv {
                    a = cmul(a, kv);
                }
                let w = cmul(_mm256_xor_pd(_mm256_loadu_pd(tp.add(2 * j)), mask), fv);
                let c = cmul(_mm256_loadu_pd(cp.add(2 * j)), w);
                _mm256_storeu_pd(o0.add(2 * j), _mm256_add_pd(a, c));
                _mm256_storeu_pd(o1.add(2 * j), _mm256_sub_pd(a, c));
                j += 2;
            }
            if j < n {
                let tj = if conj { t[j].conj() } else { t[j] };
                let a = *a_src.add(j);
                let a = k0.map_or(a, |k| a * k);
                let c = *c_src.add(j) * (f * tj);
                *y0.add(j) = a + c;
                *y1.add(j) = a - c;
            }
        }
    }

    /// `±i·z` for two complex numbers: `−i` forward, `+i` when `conj`.
    #[inline(always)]
    unsafe fn times_i(z: __m256d, conj: bool) -> __m256d {
        // SAFETY: this module's functions run only where AVX2 and FMA are present (their
        // target features, or the caller's); the pointers address the entries the lengths checked
        // by the callers allow.
        unsafe {
            let swapped = _mm256_permute_pd(z, 0b0101);
            let sign = if conj {
                _mm256_setr_pd(-0.0, 0.0, -0.0, 0.0)
            } else {
                _mm256_setr_pd(0.0, -0.0, 0.0, -0.0)
            };
            _mm256_xor_pd(swapped, sign)
        }
    }

    /// [`super::dif4`].
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dif4(rows: [&mut [C]; 4], f: [C; 3], t: [&[C]; 3], conj: bool) {
        let n = rows[0].len();
        let [r0, r1, r2, r3] = rows;
        let p: [*mut f64; 4] = [
            r0.as_mut_ptr() as *mut f64,
            r1.as_mut_ptr() as *mut f64,
            r2.as_mut_ptr() as *mut f64,
            r3.as_mut_ptr() as *mut f64,
        ];
        let tp: [*const f64; 3] = std::array::from_fn(|i| t[i].as_ptr() as *const f64);
        // SAFETY: this module's functions run only where AVX2 and FMA are present (their
        // target features, or the caller's); the pointers address the entries the lengths checked
        // by the callers allow.
        unsafe {
            let mask = conj_mask(conj);
            let fv = [splat(f[0]), splat(f[1]), splat(f[2])];
            let mut j = 0;
            while j + 2 <= n {
                let a0 = _mm256_loadu_pd(p[0].add(2 * j));
                let a1 = _mm256_loadu_pd(p[1].add(2 * j));
                let a2 = _mm256_loadu_pd(p[2].add(2 * j));
                let a3 = _mm256_loadu_pd(p[3].add(2 * j));
                let w = |i: usize| {
                    cmul(
                        _mm256_xor_pd(_mm256_loadu_pd(tp[i].add(2 * j)), mask),
                        fv[i],
                    )
                };
                let (s02, d02) = (_mm256_add_pd(a0, a2), _mm256_sub_pd(a0, a2));
                let (s13, d13) = (_mm256_add_pd(a1, a3), _mm256_sub_pd(a1, a3));
                let e = times_i(d13, conj);
                _mm256_storeu_pd(p[0].add(2 * j), _mm256_add_pd(s02, s13));
                _mm256_storeu_pd(p[1].add(2 * j), cmul(_mm256_sub_pd(s02, s13), w(1)));
                _mm256_storeu_pd(p[2].add(2 * j), cmul(_mm256_add_pd(d02, e), w(0)));
                _mm256_storeu_pd(p[3].add(2 * j), cmul(_mm256_sub_pd(d02, e), w(2)));
                j += 2;
            }
            if j < n {
                let tw = |i: usize| f[i] * if conj { t[i][j].conj() } else { t[i][j] };
                let (a0, a1, a2, a3) = (r0[j], r1[j], r2[j], r3[j]);
                let (s02, d02) = (a0 + a2, a0 - a2);
                let (s13, d13) = (a1 + a3, a1 - a3);
                let e = if conj {
                    C::new(-d13.im, d13.re)
                } else {
                    C::new(d13.im, -d13.re)
                };
                r0[j] = s02 + s13;
                r1[j] = (s02 - s13) * tw(1);
                r2[j] = (d02 + e) * tw(0);
                r3[j] = (d02 - e) * tw(2);
            }
        }
    }

    /// [`super::dif8`].
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dif8(rows: [&mut [C]; 8], f: [C; 7], t: [&[C]; 7], conj: bool) {
        const FREQ: [usize; 8] = [0, 4, 2, 6, 1, 5, 3, 7];
        let n = rows[0].len();
        let mut rows = rows;
        let p: [*mut f64; 8] = std::array::from_fn(|i| rows[i].as_mut_ptr() as *mut f64);
        let tp: [*const f64; 7] = std::array::from_fn(|i| t[i].as_ptr() as *const f64);
        let h = std::f64::consts::FRAC_1_SQRT_2;
        let sign = if conj { h } else { -h };
        // ω₈ and ω₈³ (ω₈² = ∓i is `times_i`).
        let (w1, w3) = (C::new(h, sign), C::new(-h, sign));
        // SAFETY: this module's functions run only where AVX2 and FMA are present (their
        // target features, or the caller's); the pointers address the entries the lengths checked
        // by the callers allow.
        unsafe {
            let mask = conj_mask(conj);
            let fv: [__m256d; 7] = std::array::from_fn(|i| splat(f[i]));
            let (w1v, w3v) = (splat(w1), splat(w3));
            // The radix-4 DIF of (a0, a1, a2, a3): frequencies 0, 2, 1, 3.
            let dft4 = |a0: __m256d, a1: __m256d, a2: __m256d, a3: __m256d| {
                let (s02, d02) = (_mm256_add_pd(a0, a2), _mm256_sub_pd(a0, a2));
                let (s13, d13) = (_mm256_add_pd(a1, a3), _mm256_sub_pd(a1, a3));
                let e = times_i(d13, conj);
                [
                    _mm256_add_pd(s02, s13),
                    _mm256_sub_pd(s02, s13),
                    _mm256_add_pd(d02, e),
                    _mm256_sub_pd(d02, e),
                ]
            };
            let mut j = 0;
            while j + 2 <= n {
                let x: [__m256d; 8] = std::array::from_fn(|i| _mm256_loadu_pd(p[i].add(2 * j)));
                let b = dft4(
                    _mm256_add_pd(x[0], x[4]),
                    _mm256_add_pd(x[1], x[5]),
                    _mm256_add_pd(x[2], x[6]),
                    _mm256_add_pd(x[3], x[7]),
                );
                let d = dft4(
                    _mm256_sub_pd(x[0], x[4]),
                    cmul(_mm256_sub_pd(x[1], x[5]), w1v),
                    times_i(_mm256_sub_pd(x[2], x[6]), conj),
                    cmul(_mm256_sub_pd(x[3], x[7]), w3v),
                );
                let out = [b[0], b[1], b[2], b[3], d[0], d[1], d[2], d[3]];
                _mm256_storeu_pd(p[0].add(2 * j), out[0]);
                for i in 1..8 {
                    let g = FREQ[i] - 1;
                    let w = cmul(
                        _mm256_xor_pd(_mm256_loadu_pd(tp[g].add(2 * j)), mask),
                        fv[g],
                    );
                    _mm256_storeu_pd(p[i].add(2 * j), cmul(out[i], w));
                }
                j += 2;
            }
            if j < n {
                let mi = |z: C| {
                    if conj {
                        C::new(-z.im, z.re)
                    } else {
                        C::new(z.im, -z.re)
                    }
                };
                let dft4 = |a0: C, a1: C, a2: C, a3: C| {
                    let (s02, d02) = (a0 + a2, a0 - a2);
                    let (s13, d13) = (a1 + a3, a1 - a3);
                    let e = mi(d13);
                    [s02 + s13, s02 - s13, d02 + e, d02 - e]
                };
                let x: [C; 8] = std::array::from_fn(|i| *(p[i] as *const C).add(j));
                let b = dft4(x[0] + x[4], x[1] + x[5], x[2] + x[6], x[3] + x[7]);
                let d = dft4(
                    x[0] - x[4],
                    (x[1] - x[5]) * w1,
                    mi(x[2] - x[6]),
                    (x[3] - x[7]) * w3,
                );
                let out = [b[0], b[1], b[2], b[3], d[0], d[1], d[2], d[3]];
                *(p[0] as *mut C).add(j) = out[0];
                for i in 1..8 {
                    let g = FREQ[i] - 1;
                    let tw = f[g] * if conj { t[g][j].conj() } else { t[g][j] };
                    *(p[i] as *mut C).add(j) = out[i] * tw;
                }
            }
        }
    }

    /// Two complex numbers from two places.
    #[inline(always)]
    unsafe fn pair(lo: *const f64, hi: *const f64) -> __m256d {
        // SAFETY: this module's functions run only where AVX2 and FMA are present (their
        // target features, or the caller's); the pointers address the entries the lengths checked
        // by the callers allow.
        unsafe { _mm256_set_m128d(_mm_loadu_pd(hi), _mm_loadu_pd(lo)) }
    }

    /// [`super::fly_blocks`]: `Q` blocks per pack.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn fly_blocks<const Q: usize>(
        y0: &mut [C],
        y1: &mut [C],
        a: [&[C]; Q],
        c: [&[C]; Q],
        k0: Option<C>,
        f: C,
        t: &[C],
        conj: bool,
    ) {
        let n = a[0].len();
        let (o0, o1) = (y0.as_mut_ptr() as *mut f64, y1.as_mut_ptr() as *mut f64);
        let (a, c) = (
            a.map(|x| x.as_ptr() as *const f64),
            c.map(|x| x.as_ptr() as *const f64),
        );
        let tp = t.as_ptr() as *const f64;
        // SAFETY: this module's functions run only where AVX2 and FMA are present (their
        // target features, or the caller's); the pointers address the entries the lengths checked
        // by the callers allow.
        unsafe {
            let (fv, mask) = (splat(f), conj_mask(conj));
            let kv = k0.map(|k| splat(k));
            for u in 0..n {
                // Outputs Q·u + 2h and + 2h + 1 from blocks 2h and 2h + 1, one register each.
                for h in 0..Q / 2 {
                    let v = Q * u + 2 * h;
                    let mut av = pair(a[2 * h].add(2 * u), a[2 * h + 1].add(2 * u));
                    if let Some(kv) = kv {
                        av = cmul(av, kv);
                    }
                    let w = cmul(_mm256_xor_pd(_mm256_loadu_pd(tp.add(2 * v)), mask), fv);
                    let cv = cmul(pair(c[2 * h].add(2 * u), c[2 * h + 1].add(2 * u)), w);
                    _mm256_storeu_pd(o0.add(2 * v), _mm256_add_pd(av, cv));
                    _mm256_storeu_pd(o1.add(2 * v), _mm256_sub_pd(av, cv));
                }
            }
        }
    }
}
