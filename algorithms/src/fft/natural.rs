//! The Multi-BSP FFT whose top level is one process: the whole vector lies in that process's
//! array in natural order, and one nested run of `c` processes transforms it there, in place,
//! without handing out cyclic copies (see "a top level of one process" in
//! [`MultiFft`](super::MultiFft)).
//!
//! The array of length `n` is seen as `L = q·c` rows of `R = n/L` entries (row `i` holds
//! `x[i·R ..]`; `q` rows per nested process: for two processes those of the flat transform's
//! split, so that the kernels have its length; four for more). With
//! `j = j₁ + R·i` and `k = f + L·u`,
//!
//! ```text
//! y[f + L·u] = Σ_{j₁} ω_R^{j₁·u} · ( ω_n^{j₁·f} · Σ_i x[j₁ + R·i] ω_L^{i·f} )
//! ```
//!
//! so a transform is three phases of the nested run, each process on its own part:
//!
//! 1. length-`L` transforms down the columns `j₁` (each process its own block of columns,
//!    in place in the parent's array), the row of frequency `f` times `ω_n^{j₁·f}`; a sync;
//! 2. each process runs the kernels of length `R` of its `q` frequencies
//!    `f = s·q .. (s+1)·q` from the parent's rows into rows `f` of the plan's output buffer
//!    (`L` rows of `R`); a sync;
//! 3. each process writes a block of `u` of the outputs `y[f + L·u]` (all `L` frequencies,
//!    reading every process's rows of the buffer) into the parent's array: one contiguous
//!    stretch of it per process. (Writing instead each process's own `q` frequencies for
//!    every `u`, a cache line in every `L·16` bytes, was the slowest phase: the two cores
//!    wrote neighbouring lines, which the hardware fetches in pairs.)
//!
//! Every phase streams its part of the array once, as the flat transform's three passes do
//! over a local array, and no phase copies a cyclic part out or scatters one back; phase 3 is
//! a transpose the flat transform, in and out in the cyclic distribution, does not make. The
//! kernels have the length of the flat transform's for `c = 2` (`n/4`, `n/8` from `n = 2^17`),
//! or nearly (`n/64` from `n = 2^22`, where phase 2 first splits each of its rows in eight with
//! a radix-8 pass, as the flat transform's second level does, and phase 3 interleaves 64 rows:
//! the kernels' outputs go to rows `f + L·f₂` of the buffer, `f₂` their frequency in the row).
//! The
//! tables and kernels are made once per plan, the buffers at the first transform (each
//! process's own by that process; the output buffer, which every process reads in phase 3, by
//! the parent), so a transform allocates, registers and communicates nothing: it costs the
//! nested run's start and its two syncs.

use super::num::{Complex, Float, root};
use super::split::{self, SLAB, Scratch, Twiddles};
use crate::dist::block_range;
use crate::shared::Shared;
use crossbeam_utils::CachePadded;
use mbsp::{Ctx, Result};
use rustfft::Fft;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// A transform of length `n` by a nested run of `c` processes over an array in natural order.
pub(crate) struct Natural<T: Float> {
    n: usize,
    c: usize,
    /// Rows `L` and rows per process `q = L/c`.
    l: usize,
    q: usize,
    /// Rows `L₂` each row is split in before its kernels (1: not split), and their twiddles
    /// (`ω_R^{f₂·u}`, `R = n/L`): see [`NATURAL_DEEP_MIN`].
    l2: usize,
    sub: Option<Twiddles<T>>,
    /// `ω_L^j` for `j < L/2`, forward.
    roots: Vec<Complex<T>>,
    /// Bit reversal in `log₂ L` bits: row `i` holds frequency `bitrev[i]` after phase 1.
    bitrev: Vec<usize>,
    /// `ω_n^{f·j₁}` for `j₁ < R`, by slab.
    tw: Twiddles<T>,
    fwd: Arc<dyn Fft<T>>,
    inv: OnceLock<Arc<dyn Fft<T>>>,
    /// Per nested process: its buffers, made at its first transform (each on lines of its
    /// own: its process locks it at every transform).
    nodes: Vec<CachePadded<Mutex<Option<Node<T>>>>>,
    /// The kernels' outputs, row `f` of `R` for frequency `f` (made at the first transform).
    out: Mutex<Vec<Complex<T>>>,
    /// How many times a nested process made its buffers (a test checks: once per plan).
    setups: AtomicUsize,
}

/// One nested process's buffers, kept across transforms.
struct Node<T: Float> {
    scratch: Scratch<T>,
    /// `L` rows of a slab of columns (phase 1).
    tile: Vec<Complex<T>>,
}

/// Lengths from which a top level of one process over two splits in four rows per process
/// (kernels of `n/8`) instead of two.
const NATURAL_QUAD_MIN: usize = 1 << 17;

/// Lengths from which a top level of one process over two splits each of its eight rows in
/// eight more in phase 2, just before the row's kernels (kernels of `n/64`, in L2), as the flat
/// transform splits in two levels from the same length (`split::DEEP_MIN`): the kernels'
/// outputs go to the rows of their frequencies `f + L·f₂` of the buffer, and phase 3
/// interleaves 64 rows instead of eight.
const NATURAL_DEEP_MIN: usize = 1 << 22;

/// The rows each row is split in from [`NATURAL_DEEP_MIN`].
const NATURAL_DEEP_ROWS: usize = 8;

impl<T: Float> Natural<T> {
    /// The plan for length `n` over `c` nested processes, or `None` where the rows would be
    /// empty (`n < L`): the caller then uses the cyclic levels.
    pub(crate) fn plan(n: usize, c: usize) -> Option<Self> {
        Self::plan_from(n, c, NATURAL_DEEP_MIN)
    }

    /// [`plan`](Self::plan), splitting rows in two levels from length `deep_min`.
    fn plan_from(n: usize, c: usize, deep_min: usize) -> Option<Self> {
        if c < 2 || !c.is_power_of_two() || !n.is_power_of_two() {
            return None;
        }
        // Two processes: the rows of the flat transform's split, so that the kernels have its
        // length (`n/4`, or `n/8` from `n = 2^17`: with the radix-8 column pass vectorised,
        // eight rows cost less than four from there; below, the passes cost more than the
        // shorter kernels save); more: four rows each (a tile of `4c` rows of a slab stays in
        // the caches in phase 1).
        let q = match c {
            2 if n < 4 => 0,
            2 if n < NATURAL_QUAD_MIN => 2,
            _ => 4,
        };
        let l = q * c;
        if q == 0 || n < l {
            return None;
        }
        let l2 = if c == 2 && n >= deep_min {
            NATURAL_DEEP_ROWS
        } else {
            1
        };
        let r = n / l;
        let bits = l.trailing_zeros();
        Some(Natural {
            n,
            c,
            l,
            q,
            roots: (0..l / 2).map(|j| root(j, l, -1.0, 1.0)).collect(),
            bitrev: (0..l)
                .map(|i: usize| i.reverse_bits() >> (usize::BITS - bits))
                .collect(),
            // Twiddles of a split of n·L over L processes: ω_n^{r·j} for j < n/L.
            tw: Twiddles::new(n * l, l, l, 0, 1.0),
            fwd: T::rustfft_plan(r / l2, false),
            l2,
            // A row of R split in L₂ rows: ω_R^{f₂·u}, as the flat transform of 2R over two
            // processes has them.
            sub: (l2 > 1).then(|| Twiddles::new(2 * r, 2, l2, 0, 1.0)),
            inv: OnceLock::new(),
            nodes: (0..c).map(|_| CachePadded::new(Mutex::new(None))).collect(),
            out: Mutex::new(Vec::new()),
            setups: AtomicUsize::new(0),
        })
    }

    /// The transform length `n`.
    pub(crate) fn len(&self) -> usize {
        self.n
    }

    /// The processes of the nested run.
    pub(crate) fn procs(&self) -> usize {
        self.c
    }

    /// How many times nested processes made their buffers.
    #[cfg(test)]
    pub(crate) fn setups(&self) -> usize {
        self.setups.load(Ordering::Relaxed)
    }

    /// The transform of `x` (length `n`, natural order) in place, scaled by `1/n` when
    /// `inverse`: one nested run of `c` processes.
    pub(crate) fn transform(&self, ctx: &Ctx, x: &mut [Complex<T>], inverse: bool) -> Result<()> {
        let kernel = if inverse {
            self.inv
                .get_or_init(|| T::rustfft_plan(self.n / (self.l * self.l2), true))
                .clone()
        } else {
            self.fwd.clone()
        };
        let shared = Shared::new(x);
        let mut out = self
            .out
            .lock()
            .map_err(|_| ctx.misuse_error("fft", "the nested transform's buffer is poisoned"))?;
        if out.len() != self.n {
            *out = vec![Complex::new(T::zero(), T::zero()); self.n];
        }
        let out = Shared::new(&mut out[..]);
        ctx.run(self.c, |nctx| {
            let s = nctx.pid();
            let mut slot = self.nodes[s]
                .lock()
                .map_err(|_| nctx.misuse_error("fft", "a nested process's buffers are poisoned"))?;
            let node = slot.get_or_insert_with(|| self.node(&*kernel));
            self.columns(&shared, s, node, inverse);
            nctx.sync()?;
            self.kernels(&shared, &out, s, node, &*kernel, inverse);
            nctx.sync()?;
            self.interleave(&shared, &out, s, inverse);
            Ok(())
        })?;
        Ok(())
    }

    /// A nested process's buffers (its first transform).
    fn node(&self, kernel: &dyn Fft<T>) -> Node<T> {
        self.setups.fetch_add(1, Ordering::Relaxed);
        let zero = Complex::new(T::zero(), T::zero());
        let len = kernel
            .get_outofplace_scratch_len()
            .max(self.fwd.get_outofplace_scratch_len());
        Node {
            scratch: Scratch::new(len),
            tile: vec![zero; self.l * SLAB],
        }
    }

    /// Phase 1 on process `s`'s slabs of columns.
    fn columns(&self, x: &Shared<'_, Complex<T>>, s: usize, node: &mut Node<T>, inverse: bool) {
        let r = self.n / self.l;
        let slabs = block_range(r.div_ceil(SLAB), self.c, s);
        let cols = (slabs.start * SLAB).min(r)..(slabs.end * SLAB).min(r);
        if cols.is_empty() {
            return;
        }
        let p = split::Columns {
            r,
            cols,
            roots: &self.roots,
            bitrev: &self.bitrev,
            tw: &self.tw,
            inverse,
        };
        // SAFETY: the columns `cols` of every row are this process's alone in this phase (the
        // slabs of the processes are disjoint), and nobody reads them before the sync after it.
        unsafe { split::columns_pass(x, &mut node.tile, p) };
    }

    /// Phase 2: the kernels of process `s`'s frequencies, from the parent's rows into their
    /// rows of the output buffer.
    fn kernels(
        &self,
        x: &Shared<'_, Complex<T>>,
        out: &Shared<'_, Complex<T>>,
        s: usize,
        node: &mut Node<T>,
        k: &dyn Fft<T>,
        inverse: bool,
    ) {
        let r = self.n / self.l;
        let (l2, rk) = (self.l2, r / self.l2);
        let scratch = node.scratch.get(k.get_outofplace_scratch_len());
        for f in s * self.q..(s + 1) * self.q {
            let i = self.bitrev[f];
            // SAFETY: row `i` holds frequency `f`, which only this process transforms; the
            // kernel (and the second level's pass) destroys it, and nobody reads it again
            // before it is overwritten after the next sync (phase 3).
            let row = unsafe { x.slice_mut(i * r..(i + 1) * r) };
            if let Some(sub) = &self.sub {
                split::dif_pass(row, l2, &[], &[], sub, inverse);
            }
            for (j, part) in row.chunks_exact_mut(rk).enumerate() {
                // Sub-row j holds frequency f₂ = bitrev(j) of the row's transform: entries
                // f + L·(f₂ + L₂·u) of the output, row f + L·f₂ of the buffer.
                let f2 = if l2 > 1 {
                    j.reverse_bits() >> (usize::BITS - l2.trailing_zeros())
                } else {
                    0
                };
                let at = f + self.l * f2;
                // SAFETY: row `at` of the buffer is this process's alone in this phase (its
                // frequency f is); the others read it only after the next sync.
                let dst = unsafe { out.slice_mut(at * rk..(at + 1) * rk) };
                k.process_outofplace_with_scratch(part, dst, scratch);
            }
        }
    }

    /// Phase 3: the outputs `y[f + L·u]` of process `s`'s block of `u` (every frequency) into
    /// the parent's array, times `1/n` when inverse.
    fn interleave(
        &self,
        x: &Shared<'_, Complex<T>>,
        out: &Shared<'_, Complex<T>>,
        s: usize,
        inverse: bool,
    ) {
        let scale = T::from_f64(1.0 / self.n as f64).expect("a float");
        let l = self.l * self.l2;
        let us = block_range(self.n / l, self.c, s);
        // SAFETY: the buffer was written in phase 2, before the last sync, and is written
        // again only after this nested run; entries `L·u ..` of `x` for `u` in `us` are this
        // process's alone (the blocks are disjoint), and every process has read the rows of
        // the array (phase 2) before the last sync.
        unsafe {
            let out = out.slice(0..self.n);
            split::interleave_pass(x, out, l, us, inverse.then_some(scale))
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fft::num::testing::{input, rel_error};

    /// Rows split in two levels (from a length far below `NATURAL_DEEP_MIN`): forward against
    /// rustfft and back to the input, three times on one plan, in a top level of one process.
    #[test]
    fn two_levels_match_rustfft() {
        for log in [12u32, 14, 17] {
            let n = 1usize << log;
            let x = input(n);
            let mut want = x.clone();
            f64::rustfft_plan(n, false).process(&mut want);
            let plan = Natural::<f64>::plan_from(n, 2, 1 << 10).expect("a plan");
            assert_eq!(plan.l2, NATURAL_DEEP_ROWS);
            let got = mbsp::run(1, |ctx| {
                let (mut fwd, mut back) = (x.clone(), x.clone());
                for _ in 0..3 {
                    fwd.copy_from_slice(&x);
                    plan.transform(ctx, &mut fwd, false)?;
                    back.copy_from_slice(&fwd);
                    plan.transform(ctx, &mut back, true)?;
                }
                Ok((fwd, back))
            })
            .unwrap();
            let (fwd, back) = &got[0];
            assert!(rel_error(fwd, &want) < 1e-13, "forward, n = 2^{log}");
            assert!(rel_error(back, &x) < 1e-13, "inverse, n = 2^{log}");
        }
    }
}
