//! The two passes of the flat transform around its local kernels when `p² ≤ n` and the local
//! work is sequential (see "split local FFT" in the [module docs](super)).
//!
//! Both passes stream the local array once, a slab of columns at a time (`p` rows of
//! [`SLAB`] entries stay in L1), and are compiled twice: for the baseline target and for AVX2
//! with FMA, chosen at run time (the crate is built for baseline x86-64; rustfft's kernels
//! choose their instructions the same way). The gather fuses the fetch, the twiddle and the
//! butterflies in one loop over a slab in L1.
//!
//! `p = 2` has its own kernel placement and final pass ([`kernels2`], [`gather2_pass`]): only
//! the other process's pack goes to the registered buffer, this process's stays in its local
//! array (see "footprint" in the [module docs](super)), in two, four or eight rows; from
//! `n = 2^22` in 64 rows in two levels ([`DEEP_MIN`]), its own pack then in a buffer of its
//! own.

use super::num::{Complex, Float, butterflies, root};
use super::simd::{self, SlabTwiddles};
use crate::shared::Shared;
use mbsp::Result;

/// Complex entries per row of a slab.
pub(crate) const SLAB: usize = 512;

/// Local lengths from which `p = 2` splits its local FFT in four rows instead of two (kernels
/// of `n/8`). rustfft's kernels get slower per flop once they outgrow the caches, so kernels
/// of a quarter of the local array instead of half pay for the extra radix-4 pass on long
/// transforms, and not on shorter ones: with the passes vectorised by hand (`simd.rs`), from
/// `n = 2^17` (kernels of `2^14` instead of `2^15`; four rows cost 8% more at `2^15` and 20%
/// more at `2^16`, docs/benchmarks.md).
const QUAD_MIN: usize = 1 << 16;

/// Local lengths for which `p = 2` splits in eight rows (kernels of `n/16`) instead of four,
/// as measured (docs/benchmarks.md): `n = 2^18`, `2^20` and `2^21`, where rustfft's kernels of
/// `n/16` run enough faster per flop than those of `n/8` to pay for the radix-8 passes; not at
/// `2^19` (kernels of `2^15` against `2^16`: 10% slower). From `2^22` two levels
/// ([`DEEP_MIN`]).
fn eight_rows(m: usize) -> bool {
    [1 << 17, 1 << 19, 1 << 20].contains(&m)
}

/// Local lengths from which `p = 2` splits its local array in two levels, [`DEEP_ROWS`] rows
/// in all (kernels of `n/128`). From `n = 2^22` the kernels of a split in four or eight rows
/// (`2^18` and longer) run from the last-level cache, and rustfft's large kernels spend half
/// their time in transposes; kernels of `2^15 … 2^16` stay in L2, and the splits' passes
/// reorder nothing (the final pass reads the rows in their order of frequencies). Measured
/// against four and eight rows at `2^21 … 2^24` (docs/benchmarks.md): 10–26% faster from
/// `2^22`, no gain at `2^21`.
const DEEP_MIN: usize = 1 << 21;

/// The rows of a split in two levels ([`deep_levels`]: 8 × 8). 32 rows ran as fast at `2^22`
/// and slower from `2^23`; 128 (three levels) slower everywhere measured.
const DEEP_ROWS: usize = 64;

/// The two levels `(L₁, L₂)` of a split in `8 < l ≤ 64` rows: a pass of length-`L₁`
/// transforms down the local array's columns, then one of length `L₂` down the columns of each
/// of its rows, seen as `L₂` rows (`kernels2` runs it row by row, just before the row's
/// kernels, while the row is in cache).
pub(crate) fn deep_levels(l: usize) -> (usize, usize) {
    let l1 = if l == 16 { 4 } else { 8 };
    (l1, l / l1)
}

/// `x`'s bits reversed in `log₂ l` bits.
fn rev(x: usize, l: usize) -> usize {
    let bits = l.trailing_zeros();
    if bits == 0 {
        0
    } else {
        x.reverse_bits() >> (usize::BITS - bits)
    }
}

/// The rows `L` the local array of a flat transform of length `n` over `p` processes is split
/// into (its kernels have length `n/(p·L)`), or 0 when it is not split (`p = 1`, `p² > n`).
pub(crate) fn rows(n: usize, p: usize) -> usize {
    if p <= 1 || p * p > n {
        0
    } else if p == 2 && n / 2 >= DEEP_MIN {
        DEEP_ROWS
    } else if p == 2 && eight_rows(n / 2) {
        8
    } else if p == 2 && n / 2 >= QUAD_MIN {
        4
    } else {
        p
    }
}

/// The length of the sequential kernels a flat transform of length `n` over `p` processes
/// runs: `n/p²` when its local FFT is split (`1 < p`, `p² ≤ n`; for `p = 2`, `n/8` from
/// `n = 2^17`, split in four, `n/16` at `n = 2^18`, `2^20` and `2^21`, split in eight, and
/// `n/128` from `2^22`, split in 64 rows in two levels),
/// else `n/p` (the rate of a kernel depends on its length through the caches: this is the
/// length to measure `r` at).
///
/// ```
/// use mbsp_algorithms::fft::kernel_len;
/// assert_eq!(kernel_len(1 << 20, 1), 1 << 20);
/// assert_eq!(kernel_len(1 << 23, 2), 1 << 16); // 64 rows in two levels
/// assert_eq!(kernel_len(1 << 20, 2), 1 << 16); // eight rows
/// assert_eq!(kernel_len(1 << 19, 2), 1 << 16); // four rows
/// assert_eq!(kernel_len(1 << 18, 2), 1 << 14); // eight rows
/// assert_eq!(kernel_len(1 << 17, 2), 1 << 14); // four rows
/// assert_eq!(kernel_len(1 << 16, 2), 1 << 14); // two rows
/// assert_eq!(kernel_len(1 << 12, 2), 1 << 10);
/// assert_eq!(kernel_len(1 << 20, 4), 1 << 16);
/// assert_eq!(kernel_len(64, 16), 4); // p² > n: group-cyclic stages of n/p
/// ```
pub fn kernel_len(n: usize, p: usize) -> usize {
    let p = p.clamp(1, n.max(1));
    match rows(n, p) {
        0 => n / p,
        rows => n / p / rows,
    }
}

/// The twiddles of the two passes of process `me`: `ω_m^{r·u}` (`m = n/p`) for `u < b = m/p`
/// and `r = 1 .. L` (`L` the split's rows), kept as a per-slab factor times a within-slab
/// factor — two small tables that stay in cache, where a whole table (`n/p` entries) would be
/// streamed from memory by both passes — and the factors of the rows the gather pass fetches.
pub(crate) struct Twiddles<T: Float> {
    /// `ω_m^{r·j}` for `j < min(SLAB, b)`, row `r - 1`.
    lo: Vec<Complex<T>>,
    /// `ω_m^{r·h·SLAB}` for `h < ⌈b / SLAB⌉`, row `r - 1`.
    hi: Vec<Complex<T>>,
    /// The factor of the row fetched from process `s`: `ω_n^{s·me}` forward, `ω_n^{-s·me}`
    /// times the inverse scale when inverse.
    row_fwd: Vec<Complex<T>>,
    row_inv: Vec<Complex<T>>,
    /// Entries per row of `hi`.
    hi_len: usize,
    /// The second level of a split in more than eight rows ([`deep_levels`]): the twiddles
    /// of one first-level row's own split.
    sub: Option<Box<Twiddles<T>>>,
}

impl<T: Float> Twiddles<T> {
    /// The twiddles of process `me` of `p` for length `n` split in `l` rows, inverse scaled
    /// by `scale`.
    pub(crate) fn new(n: usize, p: usize, l: usize, me: usize, scale: f64) -> Self {
        let m = n / p;
        // More than eight rows for p = 2: two levels. (p > 2 splits in p rows, one level.)
        let (l, sub) = if p == 2 && l > 8 {
            let (l1, l2) = deep_levels(l);
            assert!(l2 <= 8, "a split in {l} rows");
            // A row of m/l₁ entries split in l₂: ω_{m/l₁}^{r·u}, as for a transform of
            // length 2m/l₁ over two processes.
            (
                l1,
                Some(Box::new(Twiddles::new(2 * (m / l1), 2, l2, 0, 1.0))),
            )
        } else {
            (l, None)
        };
        let b = m / p;
        let (w, h) = (SLAB.min(b), b.div_ceil(SLAB));
        let root = |k: usize, sign: f64, scale: f64| root::<T>(k, n, sign, scale);
        Twiddles {
            // ω_m^k = ω_n^{p·k}.
            lo: (1..l)
                .flat_map(|r| (0..w).map(move |j| root(p * r * j, -1.0, 1.0)))
                .collect(),
            hi: (1..l)
                .flat_map(|r| (0..h).map(move |i| root(p * r * i * SLAB, -1.0, 1.0)))
                .collect(),
            row_fwd: (0..p).map(|s| root(s * me, -1.0, 1.0)).collect(),
            row_inv: (0..p).map(|s| root(s * me, 1.0, scale)).collect(),
            hi_len: h,
            sub,
        }
    }

    /// `k·ω_m^{±r·u}` for the `out.len()` entries `u = e0 ..` of a slab (`e0` a multiple of
    /// `SLAB`), conjugated when `inverse`.
    #[inline(always)]
    pub(crate) fn slab(
        &self,
        r: usize,
        e0: usize,
        k: Complex<T>,
        inverse: bool,
        out: &mut [Complex<T>],
    ) {
        let rows = self.hi.len() / self.hi_len;
        let w = self.lo.len() / rows;
        let h = self.hi_len;
        let hi = self.hi[(r - 1) * h + e0 / SLAB];
        let lo = &self.lo[(r - 1) * w..][..out.len()];
        if inverse {
            let f = k * hi.conj();
            for (o, l) in out.iter_mut().zip(lo) {
                *o = f * l.conj();
            }
        } else {
            let f = k * hi;
            for (o, l) in out.iter_mut().zip(lo) {
                *o = f * l;
            }
        }
    }

    /// What [`slab`](Self::slab) writes, unmultiplied (for the vectorised loops, `simd.rs`):
    /// the slab's factor `k·ω^{±hi}` and the within-slab factors, for `len` entries from `e0`.
    #[inline(always)]
    pub(crate) fn slab_parts(
        &self,
        r: usize,
        e0: usize,
        k: Complex<T>,
        inverse: bool,
        len: usize,
    ) -> SlabTwiddles<'_, T> {
        let rows = self.hi.len() / self.hi_len;
        let w = self.lo.len() / rows;
        let hi = self.hi[(r - 1) * self.hi_len + e0 / SLAB];
        SlabTwiddles {
            f: if inverse { k * hi.conj() } else { k * hi },
            t: &self.lo[(r - 1) * w..][..len],
            conj: inverse,
        }
    }

    /// The rows `L` of the split these twiddles are for.
    pub(crate) fn rows(&self) -> usize {
        self.top_rows() * self.sub.as_ref().map_or(1, |s| s.rows())
    }

    /// The rows of the first level (all of them but in a two-level split).
    fn top_rows(&self) -> usize {
        self.hi.len() / self.hi_len + 1
    }

    /// The frequency (mod `L`) of row `r` after the split's passes: row `i` of the first level
    /// holds frequency `f₁ = bitrev_{L₁}(i)`, and its row `j` of the second level frequency
    /// `f₂` of that row's transform, so entry `u` of row `r = i·L₂ + j` is entry
    /// `f₁ + L₁·(f₂ + L₂·u)` of the local FFT.
    pub(crate) fn freq(&self, r: usize) -> usize {
        match &self.sub {
            None => rev(r, self.top_rows()),
            Some(sub) => {
                let l2 = sub.rows();
                rev(r / l2, self.top_rows()) + self.top_rows() * sub.freq(r % l2)
            }
        }
    }

    /// The factor of the row fetched from process `s`.
    fn row(&self, s: usize, inverse: bool) -> Complex<T> {
        if inverse {
            self.row_inv[s]
        } else {
            self.row_fwd[s]
        }
    }
}

/// Whether the AVX2 + FMA versions may run (the standard library caches the detection).
#[cfg(target_arch = "x86_64")]
pub(crate) fn avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

/// The first pass: length-`l` DIF transforms down the columns of `local` seen as `l` rows
/// (natural order in, bit-reversed out), and row `i` times `ω_m^{±bitrev(i)·u}`. `roots` and
/// `bitrev` are those of length `l` (unused for `l = 2, 4`, done by hand). In a split in two
/// levels only the first (`kernels2` does the second).
pub(crate) fn dif_pass<T: Float>(
    local: &mut [Complex<T>],
    l: usize,
    roots: &[Complex<T>],
    bitrev: &[usize],
    tw: &Twiddles<T>,
    inverse: bool,
) {
    if tw.sub.is_some() {
        // Two levels: the first here, the rest row by row before the row's kernels
        // (`kernels2`), while the row is in cache.
        dif_level(local, tw.top_rows(), roots, bitrev, tw, inverse);
        return;
    }
    dif_level(local, l, roots, bitrev, tw, inverse)
}

/// One level of [`dif_pass`].
fn dif_level<T: Float>(
    local: &mut [Complex<T>],
    l: usize,
    roots: &[Complex<T>],
    bitrev: &[usize],
    tw: &Twiddles<T>,
    inverse: bool,
) {
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        // SAFETY: the processor has AVX2 and FMA, checked just now.
        return unsafe { dif_pass_avx2(local, l, roots, bitrev, tw, inverse) };
    }
    dif_pass_body(local, l, roots, bitrev, tw, inverse)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn dif_pass_avx2<T: Float>(
    local: &mut [Complex<T>],
    l: usize,
    roots: &[Complex<T>],
    bitrev: &[usize],
    tw: &Twiddles<T>,
    inverse: bool,
) {
    dif_pass_body(local, l, roots, bitrev, tw, inverse)
}

#[inline(always)]
fn dif_pass_body<T: Float>(
    local: &mut [Complex<T>],
    l: usize,
    roots: &[Complex<T>],
    bitrev: &[usize],
    tw: &Twiddles<T>,
    inverse: bool,
) {
    let b = local.len() / l;
    let one = Complex::new(T::one(), T::zero());
    let mut w = [one; SLAB];
    let mut e0 = 0;
    if l == 4 {
        // Radix 4 in one loop: rows j = 0..4 in, frequencies 0, 2, 1, 3 out (bit-reversed).
        let mut w2 = [one; SLAB];
        let mut w3 = [one; SLAB];
        let (r01, r23) = local.split_at_mut(2 * b);
        let (r0, r1) = r01.split_at_mut(b);
        let (r2, r3) = r23.split_at_mut(b);
        while e0 < b {
            let cl = SLAB.min(b - e0);
            let rows = [
                &mut r0[e0..e0 + cl],
                &mut r1[e0..e0 + cl],
                &mut r2[e0..e0 + cl],
                &mut r3[e0..e0 + cl],
            ];
            if simd::dif4(
                rows,
                std::array::from_fn(|r| tw.slab_parts(r + 1, e0, one, inverse, cl)),
            ) {
                e0 += cl;
                continue;
            }
            tw.slab(1, e0, one, inverse, &mut w[..cl]);
            tw.slab(2, e0, one, inverse, &mut w2[..cl]);
            tw.slab(3, e0, one, inverse, &mut w3[..cl]);
            let rows = (r0[e0..e0 + cl].iter_mut().zip(&mut r1[e0..e0 + cl]))
                .zip(r2[e0..e0 + cl].iter_mut().zip(&mut r3[e0..e0 + cl]));
            for (j, ((a0, a1), (a2, a3))) in rows.enumerate() {
                let (s02, d02) = (*a0 + *a2, *a0 - *a2);
                let (s13, d13) = (*a1 + *a3, *a1 - *a3);
                // ∓i·d13: the odd frequencies' ω₄ = ∓i.
                let e = if inverse {
                    Complex::new(-d13.im, d13.re)
                } else {
                    Complex::new(d13.im, -d13.re)
                };
                *a0 = s02 + s13;
                *a1 = (s02 - s13) * w2[j];
                *a2 = (d02 + e) * w[j];
                *a3 = (d02 - e) * w3[j];
            }
            e0 += cl;
        }
        return;
    }
    if l == 2 {
        // One loop: the butterfly and the twiddle of the second row.
        let (lo, hi) = local.split_at_mut(b);
        while e0 < b {
            let cl = SLAB.min(b - e0);
            let w1 = tw.slab_parts(1, e0, one, inverse, cl);
            if simd::dif2(&mut lo[e0..e0 + cl], &mut hi[e0..e0 + cl], w1) {
                e0 += cl;
                continue;
            }
            tw.slab(1, e0, one, inverse, &mut w[..cl]);
            let rows = lo[e0..e0 + cl].iter_mut().zip(&mut hi[e0..e0 + cl]);
            for ((x, y), w) in rows.zip(&w) {
                let d = *x - *y;
                *x = *x + *y;
                *y = d * w;
            }
            e0 += cl;
        }
        return;
    }
    // Eight rows for p = 2: the tables' roots and bit reversal are those of length p, so the
    // portable loop makes its own (once, if the vectorised one cannot run).
    let mut roots8: Option<Vec<Complex<T>>> = None;
    while e0 < b {
        let cl = SLAB.min(b - e0);
        if l == 8 {
            let mut rows = local.chunks_exact_mut(b).map(|r| &mut r[e0..e0 + cl]);
            let rows = std::array::from_fn(|_| rows.next().expect("eight rows"));
            let w = std::array::from_fn(|r| tw.slab_parts(r + 1, e0, one, inverse, cl));
            if simd::dif8(rows, w) {
                e0 += cl;
                continue;
            }
        }
        let (roots, bitrev) = if l == 8 && roots.len() < 4 {
            let r8 = roots8.get_or_insert_with(|| (0..4).map(|j| root(j, 8, -1.0, 1.0)).collect());
            (&r8[..], &[0, 4, 2, 6, 1, 5, 3, 7][..])
        } else {
            (roots, bitrev)
        };
        dif_butterflies(&mut local[e0..], l, b, cl, roots, inverse);
        for i in 1..l {
            tw.slab(bitrev[i], e0, one, inverse, &mut w[..cl]);
            for (x, w) in local[i * b + e0..][..cl].iter_mut().zip(&w) {
                *x = *x * w;
            }
        }
        e0 += cl;
    }
}

/// `fetch(s, from, dst)`: entries `from ..` of the pack of process `s` for this process into
/// `dst`.
pub(crate) type Fetch<'a, T> = dyn FnMut(usize, usize, &mut [Complex<T>]) -> Result<()> + 'a;

/// `fetch(from, dst)`: entries `from ..` of the other process's pack into `dst` (`p = 2`).
pub(crate) type Fetch2<'a, T> = dyn FnMut(usize, &mut [Complex<T>]) -> Result<()> + 'a;

/// Where the gather pass of `p = 2` reads the other process's pack.
pub(crate) enum Theirs<'a, T: Float> {
    /// Fetched slab by slab into the slab buffer (`fetch(from, dst)` copies entries `from ..`
    /// into `dst`): the direct-get exchange.
    Fetch(&'a mut Fetch2<'a, T>),
    /// Read in place: the pack received as an owned message.
    Here(&'a [Complex<T>]),
}

impl<'a, T: Float> Theirs<'a, T> {
    /// Entries `from .. from + slab.len()` of the other process's pack: in place, or fetched
    /// into `slab`.
    #[inline(always)]
    fn read<'s>(&mut self, from: usize, slab: &'s mut [Complex<T>]) -> Result<&'s [Complex<T>]>
    where
        'a: 's,
    {
        match self {
            Theirs::Fetch(fetch) => {
                fetch(from, slab)?;
                Ok(slab)
            }
            Theirs::Here(pack) => {
                let pack: &'a [Complex<T>] = pack;
                Ok(&pack[from..from + slab.len()])
            }
        }
    }
}

/// What the gather pass needs besides the local array: this process, its pack from every
/// process, and the factors its senders left out.
pub(crate) struct Gather<'a, T: Float> {
    pub(crate) me: usize,
    pub(crate) p: usize,
    /// This process's pack for itself (`b` entries).
    pub(crate) own: &'a [Complex<T>],
    /// `fetch(s, from, dst)` copies entries `from ..` of the pack of process `s` for this
    /// process into `dst`.
    pub(crate) fetch: &'a mut Fetch<'a, T>,
    pub(crate) tw: &'a Twiddles<T>,
    pub(crate) roots: &'a [Complex<T>],
    pub(crate) bitrev: &'a [usize],
    pub(crate) inverse: bool,
}

/// The last pass for `p > 2`: fetch pack `me` of every process slab by slab, multiply in the
/// twiddles its sender left out, and do the length-`p` FFTs across the packs; `local` ends up
/// holding the output in the cyclic distribution (row `k₂` of `b` entries per output block).
pub(crate) fn gather_pass<T: Float>(local: &mut [Complex<T>], g: Gather<'_, T>) -> Result<()> {
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        // SAFETY: the processor has AVX2 and FMA, checked just now.
        return unsafe { gather_pass_avx2(local, g) };
    }
    gather_pass_body(local, g)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn gather_pass_avx2<T: Float>(local: &mut [Complex<T>], g: Gather<'_, T>) -> Result<()> {
    gather_pass_body(local, g)
}

#[inline(always)]
fn gather_pass_body<T: Float>(local: &mut [Complex<T>], g: Gather<'_, T>) -> Result<()> {
    let (p, me) = (g.p, g.me);
    let b = local.len() / p;
    let mut w = [Complex::new(T::zero(), T::zero()); SLAB];
    let mut e0 = 0;
    while e0 < b {
        let cl = SLAB.min(b - e0);
        for s in 0..p {
            let dst = &mut local[g.bitrev[s] * b + e0..][..cl];
            if s == me {
                dst.copy_from_slice(&g.own[e0..e0 + cl]);
            } else {
                (g.fetch)(s, e0, dst)?;
            }
            let k = g.tw.row(s, g.inverse);
            if s > 0 {
                let w = &mut w[..cl];
                g.tw.slab(s, e0, k, g.inverse, w);
                for (x, w) in dst.iter_mut().zip(&*w) {
                    *x = *x * w;
                }
            } else if g.inverse {
                dst.iter_mut().for_each(|x| *x = *x * k);
            }
        }
        butterflies(&mut local[e0..], p, b, cl, g.roots, g.inverse);
        e0 += cl;
    }
    Ok(())
}

/// `p = 2`: where this process's own pack lies in its local array after [`kernels2`], in
/// rows of `c = n/(p·L)`: block `q` of the pack (the row of frequency `me + 2q`) at row
/// `own_rows(l, me)[q]`.
///
/// The gather pass writes the outputs of entry `u` of the blocks (`Q = L/2` blocks per pack)
/// to positions `Q·u .. Q·u + Q` of both output rows (`local[..b]`, `local[b..]`, `b = n/p`)
/// while reading the blocks in order of `u`, so a block may lie only where no entry is
/// overwritten before it is read: anywhere for `Q = 1` (position `u` itself), in the upper
/// halves of the output rows for `Q = 2` — entry `u'` there sits at `c + u'`, which the
/// outputs of entry `u` reach only when `2u + 1 ≥ c + u'`, so `u ≥ (c + u' - 1)/2 ≥ u'`
/// (as `u' < c`): after it has been read.
fn own_rows(l: usize, me: usize) -> [usize; 2] {
    match (l, me) {
        (2, _) => [1 - me, 1 - me],
        (4, 0) => [1, 3],
        (4, _) => [3, 1],
        _ => unreachable!("p = 2 splits in 2 or 4 rows, not {l}"),
    }
}

/// `p = 2` with eight rows: where this process's four blocks lie after [`kernels2`] (block `q`,
/// the row of frequency `me + 2q`, at row `own_rows8(me)[q]` of `local`).
///
/// With `Q = 4` only the last row of each output row's four (rows 3 and 7) is never
/// overwritten before it is read (the argument of [`own_rows`]: entry `u'` of row `k` sits at
/// `k·c + u'`, reached by the outputs of entry `u` when `4u + 3 ≥ k·c + u'`). Rows 2 and 6 are
/// safe for `u' ≤ 2c/3`: their second halves are copied aside once the gather reaches
/// `u = c/2`, when the outputs have reached only position `2c` of each output row (the start
/// of row 2 or 6), and read from there.
fn own_rows8(me: usize) -> [usize; 4] {
    if me == 0 { [2, 6, 3, 7] } else { [6, 2, 7, 3] }
}

/// The room the gather pass of `p = 2` needs besides the local array, for a local array of
/// `m` entries split in `l` rows: a fetched slab and a copy of this process's own, with
/// eight rows the second halves of the blocks in rows 2 and 6 ([`own_rows8`]), and in two
/// levels this process's whole pack (past the slabs).
pub(crate) fn gather2_room(m: usize, l: usize) -> usize {
    2 * SLAB
        + match l {
            8 => m / 8,
            // This process's own pack, whole (see `kernels2`).
            l if l > 8 => m / 2,
            _ => 0,
        }
}

/// The kernels of the split local FFT for `p = 2` (`tw` the split's twiddles): `run(row,
/// out)` computes the FFT of `row` into `out`, destroying `row`. The rows of the other
/// process's pack go to `pack` (its blocks in order, `c` entries each); this process's own
/// rows go to the rows [`own_rows`] of `local` — rows the remote kernels have already
/// consumed — so only half the local FFT leaves the local array and the registered pack holds
/// only the other process's half (`n/p` entries fewer in cache per parity than a full pack).
/// In two levels ([`deep_levels`]) each first-level row gets its second-level pass here, just
/// before its kernels, and this process's blocks go to `own` instead: the final pass's
/// outputs would overwrite most of them before reading them if they stayed in `local`.
pub(crate) fn kernels2<T: Float>(
    local: &mut [Complex<T>],
    pack: &mut [Complex<T>],
    own: &mut [Complex<T>],
    me: usize,
    tw: &Twiddles<T>,
    inverse: bool,
    mut run: impl FnMut(&mut [Complex<T>], &mut [Complex<T>]),
) {
    let l = tw.rows();
    let c = local.len() / l;
    if let Some(sub) = tw.sub.as_deref() {
        // Levels below the first, each first-level row's passes just before its kernels.
        // Block q of either pack is the row of frequency s + 2q; this process's go to `own`
        // (the outputs of the gather fill all of `local`).
        let l2 = sub.rows();
        for (i, row1) in local.chunks_exact_mut(c * l2).enumerate() {
            dif_level(row1, l2, &[], &[], sub, inverse);
            for (j, row) in row1.chunks_exact_mut(c).enumerate() {
                let f = tw.freq(i * l2 + j);
                let out = if f % 2 == me { &mut *own } else { &mut *pack };
                run(row, &mut out[f / 2 * c..][..c]);
            }
        }
        return;
    }
    // After the DIF pass row position i holds frequency bitrev(i): (0, 1) for two rows,
    // (0, 2, 1, 3) for four. The other process's frequencies are those ≡ 1 - me (mod 2).
    if l == 2 {
        let (r0, r1) = local.split_at_mut(c);
        let (mine, theirs) = if me == 0 { (r0, r1) } else { (r1, r0) };
        run(theirs, &mut pack[..c]);
        run(mine, theirs);
        return;
    }
    if l == 8 {
        // Rows hold frequencies 0, 4, 2, 6, 1, 5, 3, 7. The other process's blocks (its
        // frequencies in the order 0, 2, 4, 6 past its parity) go to the pack, then this
        // process's to the rows `own_rows8`, each into a row already consumed.
        let [r0, r1, r2, r3, r4, r5, r6, r7]: [&mut [Complex<T>]; 8] = {
            let mut it = local.chunks_exact_mut(c);
            std::array::from_fn(|_| it.next().expect("eight rows"))
        };
        let [p0, p1, p2, p3]: [&mut [Complex<T>]; 4] = {
            let mut it = pack.chunks_exact_mut(c);
            std::array::from_fn(|_| it.next().expect("four blocks"))
        };
        if me == 0 {
            // Theirs: 1, 3, 5, 7 at rows 4, 6, 5, 7. Mine: 0, 2, 4, 6 at rows 0, 2, 1, 3.
            run(r4, p0);
            run(r6, p1);
            run(r5, p2);
            run(r7, p3);
            run(r2, r6);
            run(r3, r7);
            run(r0, r2);
            run(r1, r3);
        } else {
            // Theirs: 0, 2, 4, 6 at rows 0, 2, 1, 3. Mine: 1, 3, 5, 7 at rows 4, 6, 5, 7.
            run(r0, p0);
            run(r2, p1);
            run(r1, p2);
            run(r3, p3);
            run(r6, r2);
            run(r7, r3);
            run(r4, r6);
            run(r5, r7);
        }
        return;
    }
    debug_assert_eq!(l, 4);
    let [r0, r1, r2, r3]: [&mut [Complex<T>]; 4] = {
        let mut it = local.chunks_exact_mut(c);
        std::array::from_fn(|_| it.next().expect("four rows"))
    };
    let (pack0, pack1) = pack.split_at_mut(c);
    if me == 0 {
        // Theirs: frequencies 1, 3 at rows 2, 3. Mine: 0, 2 at rows 0, 1, to rows 1, 3.
        run(r2, pack0);
        run(r3, pack1);
        run(r1, r3);
        run(r0, r1);
    } else {
        // Theirs: frequencies 0, 2 at rows 0, 1. Mine: 1, 3 at rows 2, 3, to rows 3, 1.
        run(r0, pack0);
        run(r1, pack1);
        run(r3, r1);
        run(r2, r3);
    }
}

/// What the gather pass of `p = 2` needs besides the local array.
pub(crate) struct Gather2<'a, T: Float> {
    pub(crate) me: usize,
    /// The split's rows (2, 4, 8 or, in two levels, more).
    pub(crate) l: usize,
    /// The other process's pack.
    pub(crate) theirs: Theirs<'a, T>,
    pub(crate) tw: &'a Twiddles<T>,
    pub(crate) inverse: bool,
    /// `2·SLAB` entries of room: a fetched slab and a copy of this process's own.
    pub(crate) slab: &'a mut [Complex<T>],
    /// This process's own pack when split in more than eight rows (else empty).
    pub(crate) own: &'a [Complex<T>],
}

/// The last pass for `p = 2`, after [`kernels2`]: fetch the other process's pack slab by
/// slab, multiply in the twiddles its sender left out, and do the length-2 FFTs with this
/// process's own pack (in `local`); the output is written straight to both output rows, so
/// `local` ends up holding the output in the cyclic distribution. With `L = 2Q` rows each
/// pack is `Q` blocks of `c = b/Q`, block `q` entry `u` being entry `me + 2·(q + Q·u)` of
/// the local FFT, and output `v = q + Q·u` interleaves the blocks.
pub(crate) fn gather2_pass<T: Float>(local: &mut [Complex<T>], g: Gather2<'_, T>) -> Result<()> {
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        // SAFETY: the processor has AVX2 and FMA, checked just now.
        return unsafe { gather2_avx2(local, g) };
    }
    gather2_body(local, g)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn gather2_avx2<T: Float>(local: &mut [Complex<T>], g: Gather2<'_, T>) -> Result<()> {
    gather2_body(local, g)
}

#[inline(always)]
fn gather2_body<T: Float>(local: &mut [Complex<T>], mut g: Gather2<'_, T>) -> Result<()> {
    let me = g.me;
    let b = local.len() / 2;
    let k0 = g.tw.row(0, g.inverse);
    let k1 = g.tw.row(1, g.inverse);
    let mut w = [Complex::new(T::zero(), T::zero()); SLAB];
    let (theirs, mine) = g.slab.split_at_mut(SLAB);
    // The butterfly of the entries (a, c) of processes 0 and 1 with the twiddle w of c.
    let fly = |a: Complex<T>, c: Complex<T>, w: &Complex<T>| {
        let a = if g.inverse { a * k0 } else { a };
        let c = c * w;
        (a + c, a - c)
    };
    if g.l == 2 {
        // One block per pack, this process's in row 1 - me: read in place, entry by entry,
        // before the outputs at the same position are written.
        let (lo, hi) = local.split_at_mut(b);
        let mut e0 = 0;
        while e0 < b {
            let cl = SLAB.min(b - e0);
            let theirs = g.theirs.read(e0, &mut theirs[..cl])?;
            let (p0, p1) = (lo[e0..].as_mut_ptr(), hi[e0..].as_mut_ptr());
            // Process 0's entries are a, process 1's c: ours in place (row 1 - me).
            let (a, c) = if me == 0 {
                (p1 as *const _, theirs.as_ptr())
            } else {
                (theirs.as_ptr(), p0 as *const _)
            };
            let w1 = g.tw.slab_parts(1, e0, k1, g.inverse, cl);
            // SAFETY: both rows hold `cl` entries from `e0`, the fetched slab `cl`; our own
            // input is one of the outputs, entry for entry; nothing else overlaps.
            if unsafe { simd::fly2([p0, p1], a, c, cl, g.inverse.then_some(k0), w1) } {
                e0 += cl;
                continue;
            }
            let w = &mut w[..cl];
            g.tw.slab(1, e0, k1, g.inverse, w);
            let outs = lo[e0..e0 + cl].iter_mut().zip(&mut hi[e0..e0 + cl]);
            if me == 0 {
                for (((y0, y1), t), w) in outs.zip(theirs).zip(&*w) {
                    (*y0, *y1) = fly(*y1, *t, w);
                }
            } else {
                for (((y0, y1), t), w) in outs.zip(theirs).zip(&*w) {
                    (*y0, *y1) = fly(*t, *y0, w);
                }
            }
            e0 += cl;
        }
        return Ok(());
    }
    if g.l == 8 {
        return gather8(local, g, k0, k1, &mut w);
    }
    match g.l {
        16 => return gather_deep::<T, 8>(local, g, k0, k1, &mut w),
        32 => return gather_deep::<T, 16>(local, g, k0, k1, &mut w),
        64 => return gather_deep::<T, 32>(local, g, k0, k1, &mut w),
        _ => {}
    }
    // Two blocks per pack (four rows), interleaved in the output; this process's are copied
    // before the slab's outputs are written (they share memory: see `own_rows`).
    debug_assert_eq!(g.l, 4);
    let c = b / 2;
    let at = own_rows(g.l, me);
    let half = SLAB / 2;
    let mut u0 = 0;
    while u0 < c {
        let cl = half.min(c - u0);
        for q in 0..2 {
            mine[q * half..][..cl].copy_from_slice(&local[at[q] * c + u0..][..cl]);
        }
        let (t0, rest) = theirs.split_at_mut(half);
        let t0 = g.theirs.read(u0, &mut t0[..cl])?;
        let t1 = g.theirs.read(c + u0, &mut rest[..cl])?;
        let (m0, m1) = (&mine[..cl], &mine[half..][..cl]);
        // Blocks 0 and 1 of processes 0 and 1.
        let ((x00, x01), (x10, x11)) = if me == 0 {
            ((m0, m1), (t0, t1))
        } else {
            ((t0, t1), (m0, m1))
        };
        let (v0, len) = (2 * u0, 2 * cl);
        let (lo, hi) = local.split_at_mut(b);
        let y = [&mut lo[v0..v0 + len], &mut hi[v0..v0 + len]];
        let w1 = g.tw.slab_parts(1, v0, k1, g.inverse, len);
        if simd::fly_blocks(y, [x00, x01], [x10, x11], g.inverse.then_some(k0), w1) {
            u0 += cl;
            continue;
        }
        let w = &mut w[..len];
        g.tw.slab(1, v0, k1, g.inverse, w);
        let y0 = lo[v0..v0 + len].chunks_exact_mut(2);
        let y1 = hi[v0..v0 + len].chunks_exact_mut(2);
        let xs = (x00.iter().zip(x01)).zip(x10.iter().zip(x11));
        for (((y0, y1), ((a0, a1), (c0, c1))), w) in y0.zip(y1).zip(xs).zip(w.chunks_exact(2)) {
            (y0[0], y1[0]) = fly(*a0, *c0, &w[0]);
            (y0[1], y1[1]) = fly(*a1, *c1, &w[1]);
        }
        u0 += cl;
    }
    Ok(())
}

/// [`gather2_pass`] with eight rows: four blocks per pack, interleaved in the output. This
/// process's blocks are copied out of `local` a slab at a time before the slab's outputs are
/// written, and the second halves of those in rows 2 and 6 once, before the outputs reach
/// them ([`own_rows8`]).
#[inline(always)]
fn gather8<T: Float>(
    local: &mut [Complex<T>],
    g: Gather2<'_, T>,
    k0: Complex<T>,
    k1: Complex<T>,
    w: &mut [Complex<T>; SLAB],
) -> Result<()> {
    let Gather2 {
        me,
        mut theirs,
        tw,
        inverse,
        slab,
        ..
    } = g;
    let b = local.len() / 2;
    let c = b / 4;
    let at = own_rows8(me);
    let quarter = SLAB / 4;
    debug_assert!(c.is_multiple_of(quarter) && c >= 2 * SLAB, "rows of {c}");
    let half = c / 2;
    let (fetched, rest) = slab.split_at_mut(SLAB);
    let (mine, tails) = rest.split_at_mut(SLAB);
    let tails = &mut tails[..c];
    // Block q's second half in `tails`, once copied: at tail[q]·half.
    let tail: [Option<usize>; 4] = at.map(|r| match r {
        2 => Some(0),
        6 => Some(1),
        _ => None,
    });
    let mut copied = false;
    let mut u0 = 0;
    while u0 < c {
        let cl = quarter.min(c - u0);
        if u0 >= half && !copied {
            // The outputs have reached position 4·u0 < 2c + SLAB ≤ 2c + half of each output
            // row: the second halves of rows 2 and 6 are intact.
            for (q, t) in tail.iter().enumerate() {
                if let Some(t) = t {
                    tails[t * half..][..c - half]
                        .copy_from_slice(&local[at[q] * c + half..][..c - half]);
                }
            }
            copied = true;
        }
        for q in 0..4 {
            let src = match tail[q] {
                Some(t) if u0 >= half => &tails[t * half + u0 - half..][..cl],
                _ => &local[at[q] * c + u0..][..cl],
            };
            mine[q * quarter..][..cl].copy_from_slice(src);
        }
        let mut got: [&[Complex<T>]; 4] = [&[]; 4];
        for (q, chunk) in fetched.chunks_exact_mut(quarter).enumerate() {
            got[q] = theirs.read(q * c + u0, &mut chunk[..cl])?;
        }
        let own: [&[Complex<T>]; 4] = std::array::from_fn(|q| &mine[q * quarter..][..cl]);
        // Blocks of processes 0 and 1.
        let (x0, x1) = if me == 0 { (own, got) } else { (got, own) };
        let (v0, len) = (4 * u0, 4 * cl);
        let (lo, hi) = local.split_at_mut(b);
        let y = [&mut lo[v0..v0 + len], &mut hi[v0..v0 + len]];
        let w1 = tw.slab_parts(1, v0, k1, inverse, len);
        if simd::fly_blocks(y, x0, x1, inverse.then_some(k0), w1) {
            u0 += cl;
            continue;
        }
        let w = &mut w[..len];
        tw.slab(1, v0, k1, inverse, w);
        for u in 0..cl {
            for q in 0..4 {
                let a = if inverse { x0[q][u] * k0 } else { x0[q][u] };
                let cv = x1[q][u] * w[4 * u + q];
                (lo[v0 + 4 * u + q], hi[v0 + 4 * u + q]) = (a + cv, a - cv);
            }
        }
        u0 += cl;
    }
    Ok(())
}

/// [`gather2_pass`] with `2Q` rows in two levels: `Q` blocks per pack, interleaved in the
/// output, this process's read from its own pack (`g.own`), whole, outside `local`.
#[inline(always)]
fn gather_deep<T: Float, const Q: usize>(
    local: &mut [Complex<T>],
    g: Gather2<'_, T>,
    k0: Complex<T>,
    k1: Complex<T>,
    w: &mut [Complex<T>; SLAB],
) -> Result<()> {
    let Gather2 {
        me,
        mut theirs,
        tw,
        inverse,
        slab,
        own,
        ..
    } = g;
    let b = local.len() / 2;
    let c = b / Q;
    let step = SLAB / Q;
    assert!(
        own.len() == b && c.is_multiple_of(step) && slab.len() >= SLAB,
        "rows of {c}"
    );
    let mut u0 = 0;
    while u0 < c {
        let mut got: [&[Complex<T>]; Q] = [&[]; Q];
        for (q, chunk) in slab.chunks_exact_mut(step).take(Q).enumerate() {
            got[q] = theirs.read(q * c + u0, chunk)?;
        }
        let mine: [&[Complex<T>]; Q] = std::array::from_fn(|q| &own[q * c + u0..][..step]);
        // Blocks of processes 0 and 1.
        let (x0, x1) = if me == 0 { (mine, got) } else { (got, mine) };
        let v0 = Q * u0;
        let (lo, hi) = local.split_at_mut(b);
        let y = [&mut lo[v0..v0 + SLAB], &mut hi[v0..v0 + SLAB]];
        let w1 = tw.slab_parts(1, v0, k1, inverse, SLAB);
        if simd::fly_blocks(y, x0, x1, inverse.then_some(k0), w1) {
            u0 += step;
            continue;
        }
        tw.slab(1, v0, k1, inverse, &mut w[..]);
        for u in 0..step {
            for q in 0..Q {
                let a = if inverse { x0[q][u] * k0 } else { x0[q][u] };
                let cv = x1[q][u] * w[Q * u + q];
                (lo[v0 + Q * u + q], hi[v0 + Q * u + q]) = (a + cv, a - cv);
            }
        }
        u0 += step;
    }
    Ok(())
}

/// In-place radix-2 FFTs of length `p` down the columns of a tile of `p` rows of stride `c`
/// (the first `cl` columns), decimation in frequency: rows in natural order on input,
/// bit-reversed on output.
#[inline(always)]
pub(crate) fn dif_butterflies<T: Float>(
    tile: &mut [Complex<T>],
    p: usize,
    c: usize,
    cl: usize,
    roots: &[Complex<T>],
    inverse: bool,
) {
    let mut len = p;
    while len >= 2 {
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
                        let d = *x - *y;
                        *x = *x + *y;
                        *y = d;
                    }
                } else {
                    for (x, y) in a.iter_mut().zip(bb.iter_mut()) {
                        let d = *x - *y;
                        *x = *x + *y;
                        *y = d * w;
                    }
                }
            }
        }
        len /= 2;
    }
}

/// Phase 1 of the natural-order transform of a top level of one process (`natural.rs`): the
/// length-`L` transforms down columns `cols` of the `L` rows of `r` entries of the parent's
/// array, in place, natural order in and bit-reversed out, row `i` times `ω_n^{±f·j}` (`f`
/// its frequency `bitrev[i]`, `j` the column).
pub(crate) struct Columns<'a, T: Float> {
    /// Entries per row.
    pub(crate) r: usize,
    /// The columns, from a multiple of [`SLAB`].
    pub(crate) cols: std::ops::Range<usize>,
    /// `ω_L^j` for `j < L/2`.
    pub(crate) roots: &'a [Complex<T>],
    /// Bit reversal of the `L` rows.
    pub(crate) bitrev: &'a [usize],
    /// `ω_n^{f·j}`.
    pub(crate) tw: &'a Twiddles<T>,
    pub(crate) inverse: bool,
}

/// The pass of [`Columns`] over `x`; `tile` has room for `L` rows of [`SLAB`].
///
/// # Safety
/// No other thread touches the columns `p.cols` of the rows of `x` meanwhile.
pub(crate) unsafe fn columns_pass<T: Float>(
    x: &Shared<'_, Complex<T>>,
    tile: &mut [Complex<T>],
    p: Columns<'_, T>,
) {
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        // SAFETY: the processor has AVX2 and FMA, checked just now; the columns are the
        // caller's alone (its promise).
        return unsafe { columns_avx2(x, tile, p) };
    }
    // SAFETY: the caller's promise.
    unsafe { columns_body(x, tile, p) }
}

/// # Safety
/// As [`columns_pass`], on a processor with AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn columns_avx2<T: Float>(
    x: &Shared<'_, Complex<T>>,
    tile: &mut [Complex<T>],
    p: Columns<'_, T>,
) {
    // SAFETY: the caller's promise.
    unsafe { columns_body(x, tile, p) }
}

/// # Safety
/// As [`columns_pass`].
#[inline(always)]
unsafe fn columns_body<T: Float>(
    x: &Shared<'_, Complex<T>>,
    tile: &mut [Complex<T>],
    p: Columns<'_, T>,
) {
    let (l, r) = (p.bitrev.len(), p.r);
    let one = Complex::new(T::one(), T::zero());
    let mut w = [one; SLAB];
    // SAFETY: the columns `cols` of row `i`, the caller's alone.
    let row = |i: usize, cols: std::ops::Range<usize>| unsafe {
        x.slice_mut(i * r + cols.start..i * r + cols.end)
    };
    if l == 8 {
        let rows: [&mut [Complex<T>]; 8] = std::array::from_fn(|i| row(i, p.cols.clone()));
        return radix8(rows, tile, &p);
    }
    if l == 4 {
        let rows: [&mut [Complex<T>]; 4] = std::array::from_fn(|i| row(i, p.cols.clone()));
        return radix4(rows, tile, &p);
    }
    let mut e0 = p.cols.start;
    while e0 < p.cols.end {
        let cl = SLAB.min(p.cols.end - e0);
        for i in 0..l {
            tile[i * SLAB..][..cl].copy_from_slice(row(i, e0..e0 + cl));
        }
        dif_butterflies(tile, l, SLAB, cl, p.roots, p.inverse);
        for i in 1..l {
            p.tw.slab(p.bitrev[i], e0, one, p.inverse, &mut w[..cl]);
            for (x, w) in tile[i * SLAB..][..cl].iter_mut().zip(&w) {
                *x = *x * w;
            }
        }
        for i in 0..l {
            row(i, e0..e0 + cl).copy_from_slice(&tile[i * SLAB..][..cl]);
        }
        e0 += cl;
    }
}

/// The twiddles of rows `f = 1 .. l` for the `cl` columns from `j0` of the pass's columns into
/// tile row `f - 1` (the rows' frequencies are their order in the hand-written radix passes).
#[inline(always)]
fn row_twiddles<T: Float>(
    tile: &mut [Complex<T>],
    p: &Columns<'_, T>,
    l: usize,
    j0: usize,
    cl: usize,
) {
    let one = Complex::new(T::one(), T::zero());
    for f in 1..l {
        let w = &mut tile[(f - 1) * SLAB..][..cl];
        p.tw.slab(f, p.cols.start + j0, one, p.inverse, w);
    }
}

/// Entries `j0 .. j0 + cl` of each row: slices of exactly `cl` entries, so that the loops over
/// them need no bounds checks.
#[inline(always)]
fn slab_of<'r, T: Float, const L: usize>(
    rows: &'r mut [&mut [Complex<T>]; L],
    j0: usize,
    cl: usize,
) -> [&'r mut [Complex<T>]; L] {
    rows.each_mut().map(|r| &mut r[j0..][..cl])
}

/// The twiddles of rows `f = 1 .. L` for the `cl` columns from `j0` of the pass's columns, for
/// the vectorised radix passes (`simd.rs`): entry `f - 1` is row `f`'s.
#[inline(always)]
fn slab_twiddles<'a, T: Float, const N: usize>(
    p: &'a Columns<'_, T>,
    j0: usize,
    cl: usize,
) -> [SlabTwiddles<'a, T>; N] {
    let one = Complex::new(T::one(), T::zero());
    std::array::from_fn(|f| {
        p.tw.slab_parts(f + 1, p.cols.start + j0, one, p.inverse, cl)
    })
}

/// [`columns_body`] for `L = 4` in one loop, as the flat transform's radix-4 pass: rows in
/// natural order in, frequencies 0, 2, 1, 3 out, each times its twiddle (the tile holds them,
/// row `f - 1`).
#[inline(always)]
fn radix4<T: Float>(mut rows: [&mut [Complex<T>]; 4], tile: &mut [Complex<T>], p: &Columns<'_, T>) {
    let len = rows[0].len();
    let mut j0 = 0;
    while j0 < len {
        let cl = SLAB.min(len - j0);
        if simd::dif4(slab_of(&mut rows, j0, cl), slab_twiddles(p, j0, cl)) {
            j0 += cl;
            continue;
        }
        row_twiddles(tile, p, 4, j0, cl);
        // Slices of exactly `cl` entries: no bounds checks in the loop.
        let (w1, rest) = tile.split_at(SLAB);
        let (w2, w3) = rest.split_at(SLAB);
        let (w1, w2, w3) = (&w1[..cl], &w2[..cl], &w3[..cl]);
        let [a0, a1, a2, a3] = slab_of(&mut rows, j0, cl);
        for j in 0..cl {
            let (s02, d02) = (a0[j] + a2[j], a0[j] - a2[j]);
            let (s13, d13) = (a1[j] + a3[j], a1[j] - a3[j]);
            // ∓i·d13: the odd frequencies' ω₄ = ∓i.
            let e = if p.inverse {
                Complex::new(-d13.im, d13.re)
            } else {
                Complex::new(d13.im, -d13.re)
            };
            a0[j] = s02 + s13;
            a1[j] = (s02 - s13) * w2[j];
            a2[j] = (d02 + e) * w1[j];
            a3[j] = (d02 - e) * w3[j];
        }
        j0 += cl;
    }
}

/// [`columns_body`] for `L = 8` in one loop: a radix-2 step (`ω₈^k` on the differences) and
/// the radix-4 transforms of both halves, by hand; rows in natural order in, frequencies
/// 0, 4, 2, 6, 1, 5, 3, 7 out, each times its twiddle (the tile holds them, row `f - 1`).
#[inline(always)]
fn radix8<T: Float>(rows: [&mut [Complex<T>]; 8], tile: &mut [Complex<T>], p: &Columns<'_, T>) {
    let h = T::from_f64(std::f64::consts::FRAC_1_SQRT_2).expect("a float");
    let sign = if p.inverse { h } else { -h };
    // ω₈^1, ω₈^3 (ω₈^2 = ∓i by hand).
    let (w1, w3) = (Complex::new(h, sign), Complex::new(-h, sign));
    // ∓i·z.
    let mi = |z: Complex<T>| {
        if p.inverse {
            Complex::new(-z.im, z.re)
        } else {
            Complex::new(z.im, -z.re)
        }
    };
    // The radix-4 DIF of (a0, a1, a2, a3): frequencies 0, 2, 1, 3.
    let dft4 = |a0: Complex<T>, a1: Complex<T>, a2: Complex<T>, a3: Complex<T>| {
        let (s02, d02) = (a0 + a2, a0 - a2);
        let (s13, d13) = (a1 + a3, a1 - a3);
        let e = mi(d13);
        [s02 + s13, s02 - s13, d02 + e, d02 - e]
    };
    const FREQ: [usize; 8] = [0, 4, 2, 6, 1, 5, 3, 7];
    let mut rows = rows;
    let len = rows[0].len();
    let mut j0 = 0;
    while j0 < len {
        let cl = SLAB.min(len - j0);
        if simd::dif8(slab_of(&mut rows, j0, cl), slab_twiddles(p, j0, cl)) {
            j0 += cl;
            continue;
        }
        row_twiddles(tile, p, 8, j0, cl);
        // Slices of exactly `cl` entries: no bounds checks in the loop.
        let tw: [&[Complex<T>]; 8] =
            std::array::from_fn(|i| &tile[FREQ[i].max(1) * SLAB - SLAB..][..cl]);
        let [a0, a1, a2, a3, a4, a5, a6, a7] = slab_of(&mut rows, j0, cl);
        for j in 0..cl {
            let (x0, x4) = (a0[j], a4[j]);
            let (x1, x5) = (a1[j], a5[j]);
            let (x2, x6) = (a2[j], a6[j]);
            let (x3, x7) = (a3[j], a7[j]);
            let b = dft4(x0 + x4, x1 + x5, x2 + x6, x3 + x7);
            let d = dft4(x0 - x4, (x1 - x5) * w1, mi(x2 - x6), (x3 - x7) * w3);
            a0[j] = b[0];
            a1[j] = b[1] * tw[1][j];
            a2[j] = b[2] * tw[2][j];
            a3[j] = b[3] * tw[3][j];
            a4[j] = d[0] * tw[4][j];
            a5[j] = d[1] * tw[5][j];
            a6[j] = d[2] * tw[6][j];
            a7[j] = d[3] * tw[7][j];
        }
        j0 += cl;
    }
}

/// Phase 3 of the natural-order transform: entries `y[f + L·u] = out[f·R + u]` of `x` for
/// the `u` in `us` and every frequency `f < L` (`out` holds `L` rows of `R`; `L = l`), times
/// `scale` if given: a transpose whose writes are one contiguous stretch of `x`.
///
/// # Safety
/// No other thread touches entries `L·u .. L·(u + 1)` of `x` for `u` in `us` meanwhile.
pub(crate) unsafe fn interleave_pass<T: Float>(
    x: &Shared<'_, Complex<T>>,
    out: &[Complex<T>],
    l: usize,
    us: std::ops::Range<usize>,
    scale: Option<T>,
) {
    let r = out.len() / l;
    let k = scale.unwrap_or(T::one());
    if us.is_empty() {
        return;
    }
    // SAFETY: the entries of `us`, the caller's (its promise).
    let dst = unsafe { x.slice_mut(l * us.start..l * us.end) };
    let row = |f: usize| &out[f * r..][us.clone()];
    let put = |d: &mut [Complex<T>], v: &[Complex<T>]| {
        if scale.is_some() {
            for (d, v) in d.iter_mut().zip(v) {
                *d = v.scale(k);
            }
        } else {
            d.copy_from_slice(v);
        }
    };
    // Rows in step through zipped iterators (no bounds checks), one stretch of `L` entries of
    // `x` per `u`.
    if l == 4 {
        let rows = row(0).iter().zip(row(1)).zip(row(2).iter().zip(row(3)));
        for (d, ((a, b), (c, e))) in dst.chunks_exact_mut(4).zip(rows) {
            put(d, &[*a, *b, *c, *e]);
        }
        return;
    }
    if l == 8 {
        let lo = row(0).iter().zip(row(1)).zip(row(2).iter().zip(row(3)));
        let hi = row(4).iter().zip(row(5)).zip(row(6).iter().zip(row(7)));
        for (d, (((a, b), (c, e)), ((f, g), (h, i)))) in dst.chunks_exact_mut(8).zip(lo.zip(hi)) {
            put(d, &[*a, *b, *c, *e, *f, *g, *h, *i]);
        }
        return;
    }
    for (j, d) in dst.chunks_exact_mut(l).enumerate() {
        let u = us.start + j;
        for (f, d) in d.iter_mut().enumerate() {
            *d = out[f * r + u].scale(k);
        }
    }
}

/// Kernel scratch that starts on a cache line, grown on demand.
pub(crate) struct Scratch<T: Float>(Vec<Complex<T>>);

impl<T: Float> Scratch<T> {
    /// Scratch of `len` entries.
    pub(crate) fn new(len: usize) -> Self {
        let mut s = Scratch(Vec::new());
        s.get(len);
        s
    }

    /// `len` entries of scratch.
    pub(crate) fn get(&mut self, len: usize) -> &mut [Complex<T>] {
        if self.0.len() < len + 8 {
            self.0.resize(len + 8, Complex::new(T::zero(), T::zero()));
        }
        let skew = self.0.as_ptr().align_offset(64).min(8);
        &mut self.0[skew..skew + len]
    }
}
