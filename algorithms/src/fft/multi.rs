//! Multi-BSP FFT: the top level runs over the first level of the machine tree with more than one
//! child (packages on a multi-socket server), and each top-level process computes its local
//! FFT with a nested BSP FFT over the part of the machine it owns, to any depth (MulticoreBSP
//! for C paper §5.1).
//!
//! At every level the algorithm is the flat one ([`BspFft`]): local FFT, twiddle and pack, one
//! superstep of direct gets, length-`p` FFTs across the packs. A process with levels below it
//! has its cores do the local work in two nested runs: the first hands the local array out
//! cyclically (each nested process copies its part in), transforms it with the same algorithm
//! one level down, and writes the twiddled outputs straight into the parent's pack; after the
//! parent's superstep and its fetch of the other packs, the second nested run does the
//! length-`p` FFTs, each nested process on its own columns, writing the parent's output. The
//! tables of every process of the subtree are made once, in [`MultiFft::new`]. A nested leaf
//! whose local FFT is split keeps its plan (owned exchange: nothing registered, so the plan
//! outlives the nested run), its local array and its tile from the first transform on; other
//! nested levels register their pack buffers in the first superstep of each nested run.
//!
//! **A top level of one process** with one level below it (`[1, c]`: a one-package machine)
//! skips the cyclic form: its array holds the whole vector in natural order, and one nested run
//! transforms it in place (`natural.rs`): the length-`L` DIF transforms and twiddles by column
//! blocks, a sync, each nested process's kernels into its rows of one buffer of the plan, a
//! sync, and each writing one contiguous block of the outputs (a transpose of the buffer's
//! rows) back into the array. No cyclic part is copied out or scattered back, and after the
//! first transform nothing is allocated, registered or checked.
//! In the parts order ([`Order::Parts`], [`MultiFft::with_order`]) the array holds the
//! nested processes' cyclic parts end to end instead, and each nested process runs the flat
//! algorithm on its part in place: the vector crosses between the cores once per transform,
//! as in a flat run, where natural order moves it three times.
//!
//! **Cost** of a transform with fan-outs `P` (top) and `c` (below), `p = P·c`: every process
//! does `5(n/p)·log₂ n` flops and the pack and column passes over its `n/p` entries; the nested
//! level adds one superstep of `h = 2(n/p)(c-1)/c` words with the inner `g` and `l` and two
//! nested runs; the top level one superstep of `h = 2(n/P)(P-1)/P` words
//! with the `g` and `l` of a run of one process per top-level part (the fetch is done by that
//! process alone). The flat algorithm on all `p` processes pays the `g` of a run of all of
//! them (every core crossing the top level's links at once) for `2(n/p)(p-1)/p` words per
//! process. [`FftCost::choose`] compares the two: nesting wins when crossing the top level is
//! dear and the transform is long enough to pay for the nested runs.
//!
//! The flat variant with `p² ≤ n` (one level, sequential local work) is priced as what it
//! runs: the split local FFT's kernels of [`kernel_len`](super::kernel_len) at `r`, and its two
//! passes as their flops (a length-`L` and a length-`p` transform and a twiddle made and
//! applied per entry and pass) at the same `r`, with `r` measured on kernels of that length
//! with all `p` cores running them (`mbsp-bench fft`, `mbsp fft`); a split in two levels
//! (`p = 2` from `n = 2^22`, kernels in L2) adds its two passes' memory traffic at the
//! streaming rate `r_stream`. The fetch of the other processes' packs (direct gets of data
//! their owners wrote a superstep before, `g_direct`, or `g_direct_far` past the cache) runs
//! inside the final pass and overlaps its flops: the pass costs the larger of the two. How
//! well it predicts is
//! measured by `mbsp-bench fft` (docs/benchmarks.md).

use super::natural::Natural;
use super::num::{Complex, Float};
use super::plan::{Below, BspFft, Direction, Exchange, Tables, check_shape, group_cyclic};
use super::split;
use crate::cost::Params;
use mbsp::{Ctx, Domain, Machine, Result};
use std::sync::Arc;

/// A Multi-BSP FFT of length `n`: this run's processes are the top level, with nested runs of
/// the given fan-outs below each (see the [module docs](self)). Cyclic distribution over the
/// top level in and out, as [`BspFft`].
///
/// ```
/// use mbsp_algorithms::fft::{Complex, MultiFft};
/// let n = 256;
/// let x: Vec<Complex<f64>> = (0..n).map(|j| Complex::new((j % 5) as f64, 0.0)).collect();
/// let mut want = x.clone();
/// mbsp_algorithms::fft::fft(&mut want, 1)?;
/// // 2 top-level processes, each with a nested run of 2.
/// mbsp::run(2, |ctx| {
///     let (p, me) = (ctx.nprocs(), ctx.pid());
///     let mut plan = MultiFft::<f64>::new(ctx, n, &[2])?;
///     let mut local: Vec<_> = (me..n).step_by(p).map(|j| x[j]).collect();
///     plan.forward(ctx, &mut local)?;
///     for (i, y) in local.iter().enumerate() {
///         assert!((y - want[me + p * i]).norm() < 1e-9);
///     }
///     plan.free(ctx)
/// })?;
/// # Ok::<(), mbsp::Error>(())
/// ```
pub struct MultiFft<T: Float> {
    levels: Levels<T>,
}

/// How a [`MultiFft`] runs its levels.
enum Levels<T: Float> {
    /// The top level's BSP FFT with the cyclic levels below each process.
    Cyclic {
        top: BspFft<T>,
        below: Option<Below<T>>,
    },
    /// A top level of one process with one level below it: the nested run transforms the
    /// process's array in place (`natural.rs`).
    Natural(Natural<T>),
    /// A top level of one process whose array holds the nested processes' parts end to end
    /// ([`Order::Parts`]): each nested process transforms its part where it lies.
    Parts(Below<T>),
}

/// Where a top level of one process keeps the vector ([`MultiFft::with_order`]).
///
/// The flat transform over `c` processes moves the vector between the cores once (its one
/// exchange). With the vector in natural order in and out, a transform by a nested run of `c`
/// moves it three times (the column pass, the kernels' rows and the transpose back; FFTW's
/// distributed 1D transform needs the same three transposes for natural order). In the parts
/// order the nested run is the flat transform with its processes' local arrays laid end to
/// end, so it moves the vector once and costs what the flat run costs plus the nested run's
/// start. Transforms that go forward and back with only entry-by-entry work in between
/// (convolutions, spectral solvers) do not care where each frequency lies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Order {
    /// Entry `j` of the vector (and frequency `j` of the output) at position `j`.
    #[default]
    Natural,
    /// The cyclic parts of the `c` nested processes one after another, in and out: entry `j`
    /// (and frequency `j`) at position `(j mod c)·(n/c) + j div c`, where `c` is
    /// [`MultiFft::procs`]. Needs a top level of one process.
    ///
    /// ```
    /// use mbsp_algorithms::fft::{Complex, MultiFft, Order};
    /// let (n, c) = (1 << 12, 2);
    /// let at = |j: usize| (j % c) * (n / c) + j / c; // where entry j lies
    /// let x: Vec<Complex<f64>> = (0..n).map(|j| Complex::new((j % 7) as f64, 1.0)).collect();
    /// let mut want = x.clone();
    /// mbsp_algorithms::fft::fft(&mut want, 1)?;
    /// mbsp::run(1, |ctx| {
    ///     let mut plan = MultiFft::<f64>::with_order(ctx, n, &[c], Order::Parts)?;
    ///     let mut a = vec![Complex::new(0.0, 0.0); n];
    ///     for j in 0..n {
    ///         a[at(j)] = x[j];
    ///     }
    ///     plan.forward(ctx, &mut a)?;
    ///     for k in 0..n {
    ///         assert!((a[at(k)] - want[k]).norm() < 1e-9);
    ///     }
    ///     plan.inverse(ctx, &mut a)?; // back, in the same order
    ///     for j in 0..n {
    ///         assert!((a[at(j)] - x[j]).norm() < 1e-9);
    ///     }
    ///     plan.free(ctx)
    /// })?;
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    Parts,
}

/// From this length a top level of one process always transforms with its nested run
/// ([`MultiFft::new`]); below [`MEASURED_FROM`] it always transforms alone, and in between it
/// keeps whichever of the two ran faster when the plan was made. Nesting costs the nested run's
/// start and syncs, and the passes that move the vector between the nested processes' caches
/// (three, where the flat transform has one exchange); where that outweighs the second core
/// depends on the machine (`mbsp-bench fft`'s nested / flat table and docs/benchmarks.md).
pub const NESTED_FROM: usize = 1 << 15;

/// Below this length a top level of one process transforms alone ([`MultiFft::new`]): the
/// nested run's start is a large part of a transform this short (about a microsecond against
/// 5-10 us), whatever the machine.
pub const MEASURED_FROM: usize = 1 << 13;

impl<T: Float> MultiFft<T> {
    /// Plan (collective over this run, one superstep): `below` gives the nested runs' sizes,
    /// outermost first, each a power of two (e.g. `[cores per package]`, or
    /// [`hierarchy`]`(..)[1..]`). A top level of one process with one level below transforms
    /// vectors shorter than [`MEASURED_FROM`] alone, where nesting would cost more than it
    /// saves ([`MultiFft::procs`] then says 1), and vectors of [`NESTED_FROM`] or more with
    /// its nested run. In between it makes both plans, times a few transforms of each on a
    /// vector of zeros, and keeps the faster (as FFTW's measured plans do: which one a run
    /// keeps can differ from run to run, and with it the last bits of the results); the
    /// timing takes a few supersteps of this one process and a few transforms' time.
    /// [`MultiFft::nested`] always nests.
    ///
    /// ```
    /// use mbsp_algorithms::fft::{MultiFft, NESTED_FROM};
    /// mbsp::run(1, |ctx| {
    ///     let short = MultiFft::<f64>::new(ctx, 1 << 10, &[2])?;
    ///     assert_eq!(short.procs(ctx), 1, "alone: a nested run would cost more");
    ///     let long = MultiFft::<f64>::new(ctx, NESTED_FROM, &[2])?;
    ///     assert_eq!(long.procs(ctx), 2);
    ///     short.free(ctx)?;
    ///     long.free(ctx)
    /// })?;
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn new(ctx: &mut Ctx, n: usize, below: &[usize]) -> Result<Self> {
        let one_on_top = ctx.nprocs() == 1 && below.iter().any(|&c| c > 1);
        if !one_on_top || n >= NESTED_FROM {
            Self::plan(ctx, n, below)
        } else if n < MEASURED_FROM || !n.is_power_of_two() {
            // (A length the plan refuses is refused by the plan alone, once.)
            Self::plan(ctx, n, &[])
        } else {
            Self::faster(ctx, n, below)
        }
    }

    /// The plan of a top level of one process alone and the nested one, timed in turn (a
    /// warm-up, then three forward and inverse pairs each, on a vector of zeros: the work of
    /// a transform does not depend on the values); the faster is kept, the other freed.
    fn faster(ctx: &mut Ctx, n: usize, below: &[usize]) -> Result<Self> {
        let mut plans = [Self::plan(ctx, n, &[])?, Self::plan(ctx, n, below)?];
        let mut x = vec![Complex::new(T::zeroed(), T::zeroed()); n];
        let mut best = [f64::INFINITY; 2];
        for round in 0..4 {
            for (plan, best) in plans.iter_mut().zip(&mut best) {
                let t = std::time::Instant::now();
                plan.forward(ctx, &mut x)?;
                plan.inverse(ctx, &mut x)?;
                if round > 0 {
                    *best = best.min(t.elapsed().as_secs_f64());
                }
            }
        }
        let [alone, nested] = plans;
        if best[1] < best[0] {
            alone.free(ctx)?;
            Ok(nested)
        } else {
            nested.free(ctx)?;
            Ok(alone)
        }
    }

    /// [`MultiFft::new`] without the shortcut for short vectors: the levels below always run
    /// (to measure them, or where the second core is wanted whatever it costs).
    pub fn nested(ctx: &mut Ctx, n: usize, below: &[usize]) -> Result<Self> {
        Self::plan(ctx, n, below)
    }

    /// [`MultiFft::nested`] with the vector of a top level of one process in the given
    /// [`Order`] (in and out). [`Order::Parts`] needs a top level of one process; the levels
    /// below always run.
    pub fn with_order(ctx: &mut Ctx, n: usize, below: &[usize], order: Order) -> Result<Self> {
        if order == Order::Natural {
            return Self::plan(ctx, n, below);
        }
        let p = ctx.nprocs();
        check_shape(ctx, n, p)?;
        if p != 1 {
            return Err(ctx.misuse_error(
                "fft",
                format!(
                    "Order::Parts needs a top level of one process, not {p}: over several \
                     processes the vector is already cyclic over the top level"
                ),
            ));
        }
        check_fans(ctx, below)?;
        let Some(parts) = Below::plan(n, below) else {
            // No level below: one part, the natural order.
            return Self::plan(ctx, n, below);
        };
        // The superstep every plan has (nothing to register or check: one process).
        ctx.sync()?;
        Ok(MultiFft {
            levels: Levels::Parts(parts),
        })
    }

    fn plan(ctx: &mut Ctx, n: usize, below: &[usize]) -> Result<Self> {
        let (p, me) = (ctx.nprocs(), ctx.pid());
        check_shape(ctx, n, p)?;
        check_fans(ctx, below)?;
        let fans: Vec<usize> = below.iter().copied().filter(|&c| c > 1).collect();
        if let ([c], 1) = (&fans[..], p)
            && let Some(natural) = Natural::plan(n, (*c).min(n))
        {
            // The superstep every plan has (nothing to register or check: one process).
            ctx.sync()?;
            return Ok(MultiFft {
                levels: Levels::Natural(natural),
            });
        }
        let below = Below::plan(n / p, below);
        let tables = Arc::new(Tables::new(n, p, me, below.is_some()));
        Ok(MultiFft {
            levels: Levels::Cyclic {
                top: BspFft::with_tables(ctx, tables, Exchange::default())?,
                below,
            },
        })
    }

    /// All processes of the hierarchy: this run's times the nested runs' below each.
    pub fn procs(&self, ctx: &Ctx) -> usize {
        ctx.nprocs()
            * match &self.levels {
                Levels::Cyclic { below, .. } => below.as_ref().map_or(1, Below::procs),
                Levels::Natural(natural) => natural.procs(),
                Levels::Parts(parts) => parts.procs(),
            }
    }

    /// Forward transform (see [`BspFft::forward`]).
    pub fn forward(&mut self, ctx: &mut Ctx, local: &mut [Complex<T>]) -> Result<()> {
        self.transform(ctx, local, Direction::Forward)
    }

    /// Inverse transform, scaled by `1/n`.
    pub fn inverse(&mut self, ctx: &mut Ctx, local: &mut [Complex<T>]) -> Result<()> {
        self.transform(ctx, local, Direction::Inverse)
    }

    /// [`forward`](Self::forward) or [`inverse`](Self::inverse).
    pub fn transform(
        &mut self,
        ctx: &mut Ctx,
        local: &mut [Complex<T>],
        dir: Direction,
    ) -> Result<()> {
        match &mut self.levels {
            Levels::Cyclic { top, below } => top.transform_with(ctx, local, dir, below.as_ref()),
            Levels::Natural(natural) => {
                if local.len() != natural.len() {
                    return Err(one_process_len(ctx, local.len(), natural.len()));
                }
                natural.transform(ctx, local, dir == Direction::Inverse)?;
                // The transform's superstep, as the flat one of one process has.
                ctx.sync()
            }
            Levels::Parts(parts) => {
                if local.len() != parts.len() {
                    return Err(one_process_len(ctx, local.len(), parts.len()));
                }
                parts.transform_parts(ctx, local, dir)?;
                ctx.sync()
            }
        }
    }

    /// How many times the processes of the nested levels made their buffers since the plan
    /// was made: once each for a top level of one process (at the first transform), however
    /// many transforms follow. Tests check it.
    #[cfg(test)]
    pub(crate) fn nested_setups(&self) -> Option<usize> {
        match &self.levels {
            Levels::Natural(natural) => Some(natural.setups()),
            Levels::Cyclic { .. } | Levels::Parts(_) => None,
        }
    }

    /// Deregister the top level's pack buffers (effective at the next sync).
    pub fn free(self, ctx: &mut Ctx) -> Result<()> {
        match self.levels {
            Levels::Cyclic { top, .. } => top.free(ctx),
            Levels::Natural(_) | Levels::Parts(_) => Ok(()),
        }
    }
}

/// An error unless every nested run's size is a power of two.
fn check_fans(ctx: &Ctx, below: &[usize]) -> Result<()> {
    match below.iter().find(|c| !c.is_power_of_two()) {
        Some(bad) => Err(ctx.misuse_error(
            "fft",
            format!("nested run of {bad} processes: fan-outs must be powers of two"),
        )),
        None => Ok(()),
    }
}

/// The error for a local array of the wrong length on a top level of one process.
fn one_process_len(ctx: &Ctx, len: usize, n: usize) -> mbsp::Error {
    ctx.misuse_error(
        "fft",
        format!(
            "the local array of pid 0 has {len} entries; a transform of n = {n} over 1 \
             process needs n"
        ),
    )
}

/// The fan-outs of the machine tree below `domain`, outermost first: packages, then NUMA nodes
/// per package, then cores per NUMA node — each level with more than one child, rounded down to
/// a power of two. On a one-package, one-NUMA-node machine with 2 cores: `[2]`.
///
/// ```
/// let m = mbsp::Machine::synthetic("package:2 numa:2 core:4 pu:2").unwrap().machine;
/// assert_eq!(mbsp_algorithms::fft::hierarchy(&m, &m.whole()), vec![2, 2, 4]);
/// ```
pub fn hierarchy(machine: &Machine, domain: &Domain) -> Vec<usize> {
    let pow2 = |k: usize| if k == 0 { 1 } else { 1 << k.ilog2() };
    let cores = machine.cores();
    let mut group = domain.cores(machine);
    let mut out = Vec::new();
    for key in [
        &(|c: usize| cores[c].package) as &dyn Fn(usize) -> usize,
        &|c: usize| cores[c].numa,
    ] {
        let mut ids: Vec<usize> = group.iter().map(|&c| key(c)).collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.len() > 1 {
            out.push(pow2(ids.len()));
            group.retain(|&c| key(c) == ids[0]);
        }
    }
    if group.len() > 1 {
        out.push(pow2(group.len()));
    }
    out
}

/// What moving one 8-byte word through a core's own cache costs in a local pass (a pack, a
/// column pass), in flops at the kernels' rate `r`: a copy within the cache moves a word in
/// about the time the kernels take for two flops (docs/benchmarks.md, "Predicted against
/// measured"), and tying it to `r` keeps that right on a faster or slower core.
const PASS_FLOPS: f64 = 2.0;

/// Which variant to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// One BSP FFT over all processes.
    Flat,
    /// The Multi-BSP FFT over the machine tree.
    Nested,
}

/// The cost model that picks [`Variant::Flat`] or [`Variant::Nested`], from BSP parameters
/// measured on three kinds of runs: all `p` processes at once (the flat variant), one process
/// per top-level part (the nested variant's top level), and the processes inside one part.
#[derive(Clone, Copy, Debug)]
pub struct FftCost {
    /// A run of all processes (spanning the top level, every core communicating).
    pub flat: Params,
    /// A run of one process per top-level part (e.g. per package).
    pub top: Params,
    /// A run inside one top-level part.
    pub inner: Params,
    /// Seconds to start and end a nested run (worker teams: a few µs).
    pub nested_start: f64,
}

/// The choice and both predictions, in seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Choice {
    /// The cheaper variant.
    pub variant: Variant,
    /// Predicted seconds of the flat variant.
    pub flat: f64,
    /// Predicted seconds of the nested variant (infinite when the tree has one level).
    pub nested: f64,
}

impl FftCost {
    /// The same parameters at both levels (e.g. [`Params::current`]), 5 µs per nested run.
    pub fn uniform(p: Params) -> Self {
        FftCost {
            flat: p,
            top: p,
            inner: p,
            nested_start: 5e-6,
        }
    }

    /// Predict both variants for length `n` on the fan-outs `levels` (outermost first) and
    /// pick the cheaper.
    ///
    /// ```
    /// use mbsp_algorithms::cost::Params;
    /// use mbsp_algorithms::fft::{FftCost, Variant};
    /// let c = FftCost::uniform(Params::DEFAULT);
    /// assert_eq!(c.choose(1 << 20, &[2]).variant, Variant::Flat); // one level: nothing to nest
    /// // 2 packages x 8 cores whose link is swamped when all 16 processes cross it at once:
    /// let numa = FftCost { flat: Params { g_direct: 60e-9, ..Params::DEFAULT }, ..c };
    /// let choice = numa.choose(1 << 22, &[2, 8]);
    /// assert_eq!(choice.variant, Variant::Nested);
    /// assert!(choice.nested < choice.flat);
    /// ```
    pub fn choose(&self, n: usize, levels: &[usize]) -> Choice {
        let levels: Vec<usize> = levels.iter().copied().filter(|&c| c > 1).collect();
        let p: usize = levels.iter().product::<usize>().max(1);
        let nf = n as f64;
        let lg = |x: f64| x.max(1.0).log2();
        let (f, o, i) = (&self.flat, &self.top, &self.inner);
        // Local work: the FFT flops at rate r, plus pack and length-p passes (~4 memory
        // passes of 2 words per entry through the core's own cache, PASS_FLOPS each).
        let passes = |entries: f64| 8.0 * entries * PASS_FLOPS / i.r;
        let work = |entries: f64, len: f64| 5.0 * entries * lg(len) / i.r + passes(entries);
        let pf = p as f64;
        // One process: the sequential kernel alone (no packs, no superstep).
        let m = (n / p.min(n)).max(1);
        let flat = if p == 1 {
            5.0 * nf * lg(nf) / i.r
        } else if m >= 2 && p > m {
            // Group-cyclic: L redistributions of h = 2m, each followed by a local FFT of length
            // m (5 m log₂ n flops in all, as the flat one) and a pass more, and the final
            // exchange within groups of gp processes.
            let (stages, gp) = group_cyclic(n, p);
            let (mf, gf) = (m as f64, gp as f64);
            work(mf, nf)
                + stages as f64 * passes(mf)
                + f.time(
                    stages + 1,
                    2.0 * mf * (stages as f64 + (gf - 1.0) / gf),
                    true,
                )
        } else if let rows @ 1.. = split::rows(n, p) {
            // The split local FFT: kernels of n/(p·L) (5·log₂ of their length flops per
            // entry, at r), and two passes over the local array, the length-L DIF transforms
            // and the length-p transforms after the fetch, each with a twiddle multiplication
            // and its making per entry (5·log₂ L + 12 and 5·log₂ p + 12 flops per entry; their
            // memory traffic is taken to cost what it costs the kernels, as r is measured on
            // kernels of the same length); then one superstep of direct gets. With p = 2 the
            // passes are vectorised by hand (`simd.rs`, f64 with AVX2: two complex numbers per
            // instruction where the kernels' rate r counts one), so their twiddle work counts
            // half.
            let e = nf / pf;
            let kernel = (e / rows as f64).max(1.0);
            let l = rows as f64;
            let twiddles = if p == 2 { 12.0 } else { 24.0 };
            // A split in two levels keeps its kernels in L2 while the local array is far
            // larger than the caches, so r (measured on those kernels) does not see that its
            // first-level pass and its final pass stream the array from memory: each reads
            // and writes four words per entry, 4/3 of a triad's element (two flops) at
            // r_stream.
            // A split in one level whose data ([`split_bytes`]) outgrows the cache streams the part the
            // cache cannot hold in its first pass (the length-L transforms down the columns
            // read and write every entry, and r, measured on one row's kernel, does not see
            // it); its final pass streams too, but beside its fetch of the other packs, whose
            // far rate prices that memory already. `mbsp-bench fft` with a parameter file of
            // the same minutes: the gap to the measured time grew with the array past the
            // cache as this term does (docs/benchmarks.md, "Predicted against measured").
            let pass = e * (4.0 / 3.0) * 2.0 / i.r_stream;
            let bytes = split_bytes(e);
            // How much of it streams: the ladder's far share of that data where `mbsp params`
            // measured one (the rate rises over a range of sizes), else the part past `cache`.
            let stream = if rows > 8 {
                2.0 * pass
            } else if let Some(share) = i.g_ladder.far_share(bytes) {
                pass * share
            } else if bytes > i.cache {
                pass * (bytes - i.cache) / bytes
            } else {
                0.0
            };
            // The fetch is fused with the final pass (`split::gather_pass`): the process reads
            // the other packs slab by slab while it transforms the slab before, so the
            // transfer and the pass's flops overlap, and the pass costs about the larger of
            // the two. Its data is the local array (16 bytes per entry).
            let before = 5.0 * e * lg(kernel) / i.r + e * (5.0 * lg(l) + twiddles / 2.0) / i.r;
            let last = e * (5.0 * lg(pf) + twiddles / 2.0) / i.r;
            let fetch = 2.0 * e * (pf - 1.0) / pf * f.g_direct_for(bytes);
            before + stream + f.l + last.max(fetch)
        } else {
            work(nf / pf, nf) + f.time(1, 2.0 * nf / pf * (pf - 1.0) / pf, true)
        };
        let nested = if levels.len() < 2 {
            f64::INFINITY
        } else {
            let top = levels[0] as f64;
            let below = pf / top;
            // Top level: one superstep among the top-level processes; the fetch of the other
            // packs by each of them alone.
            let outer = o.time(1, 2.0 * nf / top * (top - 1.0) / top, true);
            // Below: copy in, all flops and passes spread over the cores, one superstep inside,
            // the nested runs (two per level), and a registration superstep per level between
            // the top and the leaves (the leaves keep their plans: owned exchange).
            let inner = work(nf / pf, nf)
                + 2.0 * nf / pf * i.g_direct
                + i.time(
                    levels.len() - 1,
                    2.0 * nf / pf * (below - 1.0) / below,
                    true,
                )
                + 2.0 * self.nested_start * (levels.len() - 1) as f64;
            outer + inner
        };
        Choice {
            variant: if nested < flat {
                Variant::Nested
            } else {
                Variant::Flat
            },
            flat,
            nested,
        }
    }

    /// Predicted seconds of one transform of length `n` by a top level of one process whose
    /// nested run of `c` processes transforms the array in its `order` (what
    /// [`MultiFft::new`] and [`MultiFft::with_order`] run on fan-outs `[1, c]` when they nest;
    /// a [`MultiFft::new`] below [`NESTED_FROM`] may transform alone instead, at the
    /// sequential kernel's rate). The nested run is the flat transform of `c` processes with
    /// the inner parameters, plus its start ([`FftCost::nested_start`]). In natural order its
    /// first phase, length-`L` transforms down the columns, reads the rows every process wrote
    /// in the last phase of the transform before: a transfer between the cores of the same
    /// size as the flat transform's fetch, with few flops to hide it (the kernels' reads of
    /// rows another process wrote hide behind their flops, and the last phase's transpose
    /// costs what the flat transform's fused fetch costs), and a sync more.
    ///
    /// ```
    /// use mbsp_algorithms::cost::Params;
    /// use mbsp_algorithms::fft::{FftCost, Order};
    /// let c = FftCost::uniform(Params { r: 1e10, ..Params::DEFAULT });
    /// let flat = c.choose(1 << 20, &[2]).flat;
    /// assert_eq!(c.top_of_one(1 << 20, 2, Order::Parts), flat + c.nested_start);
    /// assert!(c.top_of_one(1 << 20, 2, Order::Natural) > flat + c.nested_start);
    /// ```
    pub fn top_of_one(&self, n: usize, c: usize, order: Order) -> f64 {
        let below = FftCost {
            flat: self.inner,
            ..*self
        };
        let flat = below.choose(n, &[c]).flat + self.nested_start;
        if order == Order::Parts || c < 2 {
            return flat;
        }
        let (e, cf) = (n as f64 / c as f64, c as f64);
        let h = 2.0 * e * (cf - 1.0) / cf;
        flat + self.inner.l + h * self.inner.g_direct_for(16.0 * e)
    }
}

/// Bytes a process of the split transform touches, for `e` entries per process (16 bytes
/// each): its local array, the packs it exposes to the others and the packs it fetches from
/// them (together as large as the local array). What the cache must hold for the transform to
/// run from it.
fn split_bytes(e: f64) -> f64 {
    32.0 * e
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flat transform's fetch runs inside its final pass: a fetch faster than that pass's
    /// flops costs nothing, a slower one what it takes beyond them, at the far rate when the
    /// local array outgrows the cache.
    #[test]
    fn the_fetch_overlaps_the_final_pass() {
        let n = 1 << 14;
        let (e, h) = (8192.0, 8192.0); // entries per process, words fetched (half of 2e)
        let base = Params {
            r: 1e10,
            l: 1e-6,
            cache: 1e9,
            ..Params::DEFAULT
        };
        let flat = |p: Params| FftCost::uniform(p).choose(n, &[2]).flat;
        let last = e * (5.0 + 6.0) / base.r;
        let free = flat(Params {
            g_direct: 1e-15,
            ..base
        });
        let hidden = flat(Params {
            g_direct: 0.9 * last / h,
            ..base
        });
        assert_eq!(free, hidden);
        let dear = flat(Params {
            g_direct: 2e-9,
            ..base
        });
        assert!(
            (dear - free - (h * 2e-9 - last)).abs() < 1e-12,
            "{dear} {free}"
        );
        // The transform's data (its array and the packs) past the cache: the far rate (and no
        // time to stream the byte past the cache:
        // `a_split_past_the_cache_streams_what_it_cannot_hold`).
        let far = flat(Params {
            g_direct: 1e-15,
            g_direct_far: 2e-9,
            cache: split_bytes(e) - 1.0,
            r_stream: 1e30,
            ..base
        });
        assert!((far - dear).abs() < 1e-12, "{far} {dear}");
    }

    /// A split in one level whose local array outgrows the cache streams, in its first pass,
    /// the part the cache cannot hold (four words per entry, 8/3 flops at `r_stream`).
    #[test]
    fn a_split_past_the_cache_streams_what_it_cannot_hold() {
        let n = 1 << 20; // p = 2: eight rows in one level
        assert_eq!(split::rows(n, 2), 8);
        let e = (n / 2) as f64;
        let base = Params {
            r: 1e10,
            r_stream: 1e9,
            l: 1e-6,
            cache: split_bytes(e),
            ..Params::DEFAULT
        };
        let flat = |p: Params| FftCost::uniform(p).choose(n, &[2]).flat;
        let fits = flat(base);
        let half = flat(Params {
            cache: split_bytes(e) / 2.0,
            ..base
        });
        let pass = e * 8.0 / 3.0 / 1e9;
        assert!((half - fits - pass / 2.0).abs() < 1e-12, "{half} {fits}");
        let none = flat(Params { cache: 0.0, ..base });
        assert!((none - fits - pass).abs() < 1e-12, "{none} {fits}");
    }

    /// Where `mbsp params` measured a ladder of bulk puts, the split streams the ladder's far
    /// share of its first pass whatever `cache` says, and its fetch runs at the rate that share
    /// puts between `g_direct` and `g_direct_far`.
    #[test]
    fn a_split_streams_the_ladders_far_share() {
        let n = 1 << 20;
        let e = (n / 2) as f64;
        let bytes = split_bytes(e);
        // Halfway from the fastest rung (1 ns) to the last (3 ns) at the transform's data.
        let g_ladder =
            mbsp::params::Ladder::new(&[(bytes / 4.0, 1e-9), (bytes, 2e-9), (bytes * 4.0, 3e-9)])
                .unwrap();
        let base = Params {
            r: 1e10,
            r_stream: 1e9,
            l: 1e-6,
            g_direct: 1e-15,
            g_direct_far: 1e-15,
            ..Params::DEFAULT
        };
        let flat = |p: Params| FftCost::uniform(p).choose(n, &[2]).flat;
        let pass = e * 8.0 / 3.0 / 1e9;
        for cache in [0.0, bytes, 1e12] {
            let fits = flat(Params {
                cache: 1e12,
                ..base
            });
            let laddered = flat(Params {
                cache,
                g_ladder,
                ..base
            });
            assert!(
                (laddered - fits - pass / 2.0).abs() < 1e-12,
                "{cache}: {laddered}"
            );
        }
        // A fetch that costs more than the final pass's flops: at the rate halfway between.
        let fetching = Params {
            g_direct: 4e-9,
            g_direct_far: 8e-9,
            r_stream: 1e30,
            ..base
        };
        let at = |g: f64| {
            flat(Params {
                g_direct: g,
                g_direct_far: g,
                cache: 1e12,
                ..fetching
            })
        };
        let laddered = flat(Params {
            g_ladder,
            ..fetching
        });
        assert!(
            (laddered - at(6e-9)).abs() < 1e-12,
            "{laddered} {}",
            at(6e-9)
        );
    }

    /// A top level of one process: the nested processes make their buffers at the first
    /// transform and keep them, so further transforms (both directions) make none; every
    /// transform stays right. (The allocations themselves are counted in
    /// `tests/fft_threads.rs`.)
    #[test]
    fn one_process_on_top_keeps_its_nested_buffers() {
        for (n, c) in [(1usize << 10, 2usize), (1 << 12, 4)] {
            let x: Vec<Complex<f64>> = (0..n)
                .map(|j| Complex::new((j % 7) as f64 - 3.0, (j % 3) as f64))
                .collect();
            let setups = mbsp::run(1, |ctx| {
                let mut plan = MultiFft::<f64>::nested(ctx, n, &[c])?;
                assert_eq!(
                    plan.nested_setups(),
                    Some(0),
                    "none before the first transform"
                );
                let mut y = x.clone();
                let mut counts = Vec::new();
                for _ in 0..4 {
                    plan.forward(ctx, &mut y)?;
                    counts.push(plan.nested_setups());
                    plan.inverse(ctx, &mut y)?;
                    counts.push(plan.nested_setups());
                }
                let err = y
                    .iter()
                    .zip(&x)
                    .map(|(a, b)| (a - b).norm())
                    .fold(0.0, f64::max);
                assert!(err < 1e-9, "round trips: {err:e}");
                plan.free(ctx)?;
                Ok(counts)
            })
            .unwrap()
            .pop()
            .unwrap();
            assert_eq!(setups, vec![Some(c); 8], "n = {n}, c = {c}");
        }
    }

    /// A top level of one transforms short vectors alone (no nested run), long ones with its
    /// nested run, and those in between with whichever it measured faster; all right, both
    /// ways.
    #[test]
    fn one_process_on_top_nests_only_where_it_pays() {
        for n in [
            MEASURED_FROM / 2,
            MEASURED_FROM,
            NESTED_FROM / 2,
            NESTED_FROM,
        ] {
            let x: Vec<Complex<f64>> = (0..n)
                .map(|j| Complex::new((j % 11) as f64 - 5.0, (j % 5) as f64))
                .collect();
            let mut want = x.clone();
            crate::fft::fft(&mut want, 1).unwrap();
            let (procs, forward, back) = mbsp::run(1, |ctx| {
                let mut plan = MultiFft::<f64>::new(ctx, n, &[2])?;
                let mut y = x.clone();
                plan.forward(ctx, &mut y)?;
                let forward = y.clone();
                plan.inverse(ctx, &mut y)?;
                let procs = plan.procs(ctx);
                plan.free(ctx)?;
                Ok((procs, forward, y))
            })
            .unwrap()
            .pop()
            .unwrap();
            match n {
                n if n < MEASURED_FROM => assert_eq!(procs, 1, "n = {n}"),
                n if n >= NESTED_FROM => assert_eq!(procs, 2, "n = {n}"),
                _ => assert!(procs == 1 || procs == 2, "n = {n}: {procs}"),
            }
            let err = |a: &[Complex<f64>], b: &[Complex<f64>]| {
                a.iter()
                    .zip(b)
                    .map(|(u, v)| (u - v).norm())
                    .fold(0.0, f64::max)
            };
            assert!(err(&forward, &want) < 1e-9 * n as f64, "n = {n}");
            assert!(err(&back, &x) < 1e-9, "n = {n}");
        }
    }

    /// The parts order: every shape of levels below a top level of one process (kept leaf
    /// plans in two, four and eight rows, levels below the parts, a leaf too short to split)
    /// gives the natural transform at the parts' positions, both ways, over repeated
    /// transforms.
    #[test]
    fn parts_order_is_the_flat_distribution_end_to_end() {
        for (n, below) in [
            (1usize << 10, vec![2usize]),
            (1 << 12, vec![4]),
            (1 << 11, vec![2, 2]),
            (8, vec![4]),
            // Kept plans split in eight rows (`split::rows`).
            (1 << 18, vec![2]),
        ] {
            let c = below[0];
            let at = |j: usize| (j % c) * (n / c) + j / c;
            let x: Vec<Complex<f64>> = (0..n)
                .map(|j| Complex::new((j % 13) as f64 - 6.0, (j % 4) as f64))
                .collect();
            let mut want = x.clone();
            crate::fft::fft(&mut want, 1).unwrap();
            let (procs, rounds) = mbsp::run(1, |ctx| {
                let mut plan = MultiFft::<f64>::with_order(ctx, n, &below, Order::Parts)?;
                let mut a = vec![Complex::new(0.0, 0.0); n];
                for j in 0..n {
                    a[at(j)] = x[j];
                }
                let mut rounds = Vec::new();
                for _ in 0..3 {
                    plan.forward(ctx, &mut a)?;
                    let f: Vec<_> = (0..n).map(|k| a[at(k)]).collect();
                    plan.inverse(ctx, &mut a)?;
                    let b: Vec<_> = (0..n).map(|j| a[at(j)]).collect();
                    rounds.push((f, b));
                }
                let procs = plan.procs(ctx);
                plan.free(ctx)?;
                Ok((procs, rounds))
            })
            .unwrap()
            .pop()
            .unwrap();
            assert_eq!(procs, below.iter().product::<usize>(), "n = {n}, {below:?}");
            let err = |a: &[Complex<f64>], b: &[Complex<f64>]| {
                a.iter()
                    .zip(b)
                    .map(|(u, v)| (u - v).norm())
                    .fold(0.0, f64::max)
            };
            for (f, b) in rounds {
                assert!(err(&f, &want) < 1e-9 * n as f64, "n = {n}, {below:?}");
                assert!(err(&b, &x) < 1e-9, "n = {n}, {below:?}");
            }
        }
    }

    /// The parts order over several top-level processes, or a local array of the wrong
    /// length, is an error that says why.
    #[test]
    fn parts_order_misuse_is_an_error() {
        let e = mbsp::run(2, |ctx| {
            MultiFft::<f64>::with_order(ctx, 64, &[2], Order::Parts)?;
            Ok(())
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("Order::Parts needs a top level of one process, not 2"),
            "{e}"
        );
        let e = mbsp::run(1, |ctx| {
            let mut plan = MultiFft::<f64>::with_order(ctx, 64, &[2], Order::Parts)?;
            let mut short = vec![Complex::new(0.0, 0.0); 32];
            plan.forward(ctx, &mut short)
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("has 32 entries; a transform of n = 64"), "{e}");
    }

    /// Nested levels below a top level of several processes keep the cyclic form.
    #[test]
    fn several_processes_on_top_keep_the_cyclic_levels() {
        let out = mbsp::run(2, |ctx| {
            let plan = MultiFft::<f64>::new(ctx, 1 << 8, &[2])?;
            let setups = plan.nested_setups();
            plan.free(ctx)?;
            Ok(setups)
        })
        .unwrap();
        assert_eq!(out, vec![None, None]);
    }
}
