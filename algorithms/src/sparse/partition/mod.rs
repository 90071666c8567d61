//! Partitioning the nonzeros of a sparse matrix for the 2D SpMV (Mondriaan's method).
//!
//! Recursive bipartitioning: the nonzeros are split in two with minimal communication volume
//! under a balance bound, then each half is split again, until there are `p` parts (any `p`, the
//! halves get `⌊q/2⌋` and `⌈q/2⌉` parts). The volume of the final partition — `Σ (λ − 1)` over
//! rows and columns — is the sum of the volumes of the splits. Each split uses the medium-grain
//! hypergraph model (module `medium`), the multilevel bipartitioner (`bisect`: coarsening by
//! matching, several initial splits, FM refinement on every level) and iterative refinement
//! (with [`Options::quality`], then max-flow refinement: module `flow`). The finished
//! partition is refined as a whole: moves of row and column groups between parts (`kway`), and
//! with [`Options::quality`] at `p >= 5` multilevel k-way FM on all parts at once with the whole
//! balance bound (`kway_fm`). The two halves of a split are partitioned in parallel (rayon),
//! and the first split, alone on the pool, races two refinement paths (`medium`). Every random
//! choice comes from a
//! generator seeded by the seed and the position in the recursion: the same seed gives the same
//! partition whatever the number of threads.
//!
//! Cost: each split is linear in its nonzeros per coarsening level and FM pass, so a partition
//! takes about `O(nnz log p)` times a constant of a few dozen passes.

mod bisect;
mod coarsen;
mod flow;
mod fm;
mod hypergraph;
mod kway;
mod kway_fm;
mod medium;

use super::{CooMatrix, Distribution, ShapeError};
use fm::Bounds;
use mbsp::rng::{GOLDEN, SplitMix64};
use medium::Sub;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// The generator of one of the partitioner's random streams: SplitMix64 started at a hash of
/// `seed`, so that related seeds (the seeds of neighbouring splits) start unrelated streams.
/// Every random choice comes from such a stream, so a partition depends only on the seed, never
/// on thread timing.
fn seeded_rng(seed: u64) -> SplitMix64 {
    SplitMix64::new(SplitMix64::mix(seed ^ GOLDEN))
}

/// Settings of [`partition`].
#[derive(Clone, Debug)]
pub struct Options {
    /// Allowed load imbalance: every part gets at most `(1 + eps) nnz / p` nonzeros.
    pub eps: f64,
    /// Seed of the random choices; the same seed gives the same partition.
    pub seed: u64,
    /// Threads to use (0: all available).
    pub threads: usize,
    /// Spend more time for a lower volume: every split ends with rounds of max-flow refinement
    /// (a minimum cut of a wide region around the cut, KaHyPar-MF's method), which finds
    /// better cuts than moving one vertex at a time, most on meshes and road networks; the
    /// coarse levels of every initial split get flows too, small splits more initial tries;
    /// and with `p >= 5` the finished partition gets multilevel k-way FM on all parts at once
    /// with the whole `eps`. On the shared matrices: about 5% less volume for about 1.7x the
    /// time (docs/benchmarks.md). Splits of more than two million nonzeros skip the flows
    /// (their regions would hold millions of vertices).
    ///
    /// ```
    /// use mbsp_algorithms::sparse::{CooMatrix, partition::{Options, partition}};
    /// let n = 40; // a 40 x 40 grid's Laplacian
    /// let id = |i: usize, j: usize| i * n + j;
    /// let a = CooMatrix::new(n * n, n * n, (0..n).flat_map(|i| (0..n).flat_map(move |j| {
    ///     [(id(i, j), id(i, j), 4.0)].into_iter()
    ///         .chain((i > 0).then(|| (id(i, j), id(i - 1, j), -1.0)))
    ///         .chain((j > 0).then(|| (id(i, j), id(i, j - 1), -1.0)))
    ///         .chain((i + 1 < n).then(|| (id(i, j), id(i + 1, j), -1.0)))
    ///         .chain((j + 1 < n).then(|| (id(i, j), id(i, j + 1), -1.0)))
    /// }))).unwrap();
    /// let fast = partition(&a, 4, &Options::default()).unwrap();
    /// let good = partition(&a, 4, &Options { quality: true, ..Options::default() }).unwrap();
    /// assert!(good.volume <= fast.volume);
    /// assert!(good.imbalance <= 0.03);
    /// ```
    pub quality: bool,
    /// A stop flag: once another thread sets it, the partitioner stops within one refinement
    /// pass (a pass over the current level's hypergraph) and returns
    /// [`PartitionError::Cancelled`]. For callers that must end a long partition on request
    /// (Ctrl-C in the Python package) without leaving its threads running.
    ///
    /// ```
    /// use mbsp_algorithms::sparse::{CooMatrix, partition::{Options, PartitionError, partition}};
    /// use std::sync::{Arc, atomic::AtomicBool};
    /// let a = CooMatrix::new(3, 3, vec![(0, 0, 1.0), (1, 1, 1.0), (2, 2, 1.0)]).unwrap();
    /// let stop = Arc::new(AtomicBool::new(true)); // set before the call: stops at once
    /// let o = Options { cancel: Some(stop), ..Options::default() };
    /// assert!(matches!(partition(&a, 2, &o), Err(PartitionError::Cancelled)));
    /// ```
    pub cancel: Option<Arc<AtomicBool>>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            eps: 0.03,
            seed: 1,
            threads: 0,
            quality: false,
            cancel: None,
        }
    }
}

/// A matrix that cannot be partitioned as asked ([`partition`], [`partition_nonzeros`]).
///
/// ```
/// use mbsp_algorithms::sparse::{CooMatrix, partition::{Options, PartitionError, partition}};
/// let a = CooMatrix::new(2, 2, vec![(0, 0, 1.0)]).unwrap();
/// let bad = Options { eps: -1.0, ..Options::default() };
/// let e = partition(&a, 2, &bad).unwrap_err();
/// assert!(matches!(e, PartitionError::Imbalance { .. }));
/// assert_eq!(e.to_string(), "partition: eps = -1 must be a finite number >= 0");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum PartitionError {
    /// `p = 0`.
    NoParts,
    /// More parts than `u32` part numbers address.
    TooManyParts {
        /// Parts asked for.
        p: usize,
    },
    /// An allowed imbalance that is negative or not finite.
    Imbalance {
        /// The `eps` given.
        eps: f64,
    },
    /// The matrix is inconsistent (the source says how).
    Matrix(ShapeError),
    /// More nonzeros than `u32` nonzero numbers address.
    TooManyNonzeros {
        /// Nonzeros of the matrix.
        nnz: usize,
    },
    /// The threads of [`Options::threads`] could not be started.
    Threads {
        /// Threads asked for.
        threads: usize,
        /// What the thread pool said.
        source: rayon::ThreadPoolBuildError,
    },
    /// [`Options::cancel`] was set before the partition was complete.
    Cancelled,
}

impl fmt::Display for PartitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("partition: ")?;
        match self {
            PartitionError::NoParts => f.write_str("p = 0; need at least one part"),
            PartitionError::TooManyParts { p } => write!(f, "p = {p} is too large"),
            PartitionError::Imbalance { eps } => {
                write!(f, "eps = {eps} must be a finite number >= 0")
            }
            PartitionError::Matrix(e) => write!(f, "{e}"),
            PartitionError::TooManyNonzeros { nnz } => {
                write!(f, "{nnz} nonzeros is too many (at most {})", u32::MAX)
            }
            PartitionError::Threads { threads, source } => {
                write!(f, "cannot start {threads} threads: {source}")
            }
            PartitionError::Cancelled => f.write_str("cancelled (Options::cancel was set)"),
        }
    }
}

impl std::error::Error for PartitionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PartitionError::Matrix(e) => Some(e),
            PartitionError::Threads { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<ShapeError> for PartitionError {
    fn from(e: ShapeError) -> Self {
        PartitionError::Matrix(e)
    }
}

/// For callers whose errors are text (command-line tools): the error's message.
impl From<PartitionError> for String {
    fn from(e: PartitionError) -> Self {
        e.to_string()
    }
}

/// The result of [`partition`]: the distribution and its quality.
#[derive(Clone, Debug)]
pub struct Partitioned {
    /// Nonzero parts and vector owners.
    pub dist: Distribution,
    /// Communication volume (sum of `λ - 1` over rows and columns).
    pub volume: u64,
    /// Load imbalance `max nnz(s) / (nnz / p) - 1`.
    pub imbalance: f64,
    /// `h` of the fan-out plus `h` of the fan-in.
    pub max_h: u64,
    /// Wall-clock seconds for the whole partitioning (nonzeros and vectors).
    pub seconds: f64,
}

/// Partitions the nonzeros of `a` into `p` parts and distributes the vectors.
///
/// The reported `volume` comes from the partitioner's own books (the sum of the splits' cuts
/// minus the gains of the final refinement); `max_h` from the vector distribution.
///
/// ```
/// use mbsp_algorithms::sparse::{CooMatrix, metrics, partition::{Options, partition}};
/// // A 1D Laplacian (tridiagonal, 300 x 300): two parts meet in one place.
/// let n = 300;
/// let a = CooMatrix::new(n, n, (0..n).flat_map(|i| {
///     [(i, i, 2.0)].into_iter()
///         .chain((i > 0).then(|| (i, i - 1, -1.0)))
///         .chain((i + 1 < n).then(|| (i, i + 1, -1.0)))
/// })).unwrap();
/// let r = partition(&a, 2, &Options::default()).unwrap();
/// assert_eq!(r.volume, 2);
/// assert!(r.imbalance <= 0.03);
/// assert_eq!(r.volume, metrics::volume(&a, &r.dist.nz_part, 2));
/// ```
pub fn partition(a: &CooMatrix, p: usize, opts: &Options) -> Result<Partitioned, PartitionError> {
    let t = std::time::Instant::now();
    let (nz_part, volume) = nonzeros(a, p, opts)?;
    let dist = super::vector::distribute(a, nz_part, p);
    let imbalance = super::metrics::imbalance(&dist.nz_part, p);
    let max_h = super::metrics::traffic(a, &dist).max_h();
    Ok(Partitioned {
        dist,
        volume,
        imbalance,
        max_h,
        seconds: t.elapsed().as_secs_f64(),
    })
}

/// [`partition`] for iterative methods on a square matrix (CG, power iteration, ...), where the
/// `y` of one multiply is the `x` of the next: `x_i` and `y_i` get the same owner, so
/// `x_owned == y_owned` on every process and a process's part of `y` can be copied straight
/// into its `x` (or be it). The owners are still chosen among the parts holding nonzeros of row
/// and column `i` where possible (always when `a_ii` is stored), keeping the volume minimal; the
/// h-relations may be larger than with independent owners.
///
/// ```
/// use mbsp_algorithms::sparse::{CooMatrix, partition::{Options, partition_square}};
/// let n = 100;
/// let a = CooMatrix::new(n, n, (0..n).flat_map(|i| {
///     [(i, i, 2.0)].into_iter().chain((i > 0).then(|| (i, i - 1, -1.0)))
///         .chain((i + 1 < n).then(|| (i, i + 1, -1.0)))
/// })).unwrap();
/// let r = partition_square(&a, 3, &Options::default()).unwrap();
/// assert_eq!(r.dist.x_owner, r.dist.y_owner);
/// assert!(partition_square(&CooMatrix::new(2, 3, vec![]).unwrap(), 2, &Options::default()).is_err());
/// ```
pub fn partition_square(
    a: &CooMatrix,
    p: usize,
    opts: &Options,
) -> Result<Partitioned, PartitionError> {
    if a.rows != a.cols {
        return Err(PartitionError::Matrix(ShapeError::NotSquare {
            rows: a.rows,
            cols: a.cols,
        }));
    }
    let t = std::time::Instant::now();
    let mut r = partition(a, p, opts)?;
    super::vector::equal_owners(a, &mut r.dist);
    let traffic = super::metrics::traffic(a, &r.dist);
    r.volume = traffic.volume();
    r.max_h = traffic.max_h();
    r.seconds = t.elapsed().as_secs_f64();
    Ok(r)
}

/// Partitions the nonzeros of `a` into `p` parts: the part of each nonzero.
///
/// Every part gets at most `max(⌊(1 + eps) nnz / p⌋, ⌈nnz / p⌉)` nonzeros (the second term only
/// matters when `eps` is too small for any split to meet the first). With `p > nnz` some parts
/// are empty.
///
/// ```
/// use mbsp_algorithms::sparse::{CooMatrix, partition::{Options, partition_nonzeros}};
/// let a = CooMatrix::new(2, 2, vec![(0, 0, 1.0), (1, 1, 1.0)]).unwrap();
/// let parts = partition_nonzeros(&a, 5, &Options::default()).unwrap();
/// assert_eq!(parts.len(), 2);             // one part per nonzero
/// assert!(parts.iter().all(|&s| s < 5));  // three parts stay empty
/// let err = partition_nonzeros(&a, 0, &Options::default()).unwrap_err();
/// assert!(err.to_string().contains("p = 0"));
/// ```
pub fn partition_nonzeros(
    a: &CooMatrix,
    p: usize,
    opts: &Options,
) -> Result<Vec<u32>, PartitionError> {
    nonzeros(a, p, opts).map(|(parts, _)| parts)
}

/// The parts, and the volume as the sum of the splits' volumes (the partitioner's own books).
fn nonzeros(a: &CooMatrix, p: usize, opts: &Options) -> Result<(Vec<u32>, u64), PartitionError> {
    check(a, p, opts)?;
    let nnz = a.nnz() as u64;
    let lmax =
        (((1.0 + opts.eps) * nnz as f64 / p as f64).floor() as u64).max(nnz.div_ceil(p as u64));
    let nz: Vec<u32> = (0..a.nnz() as u32).collect();
    let cancel = opts.cancel.as_deref();
    let run = Run {
        a,
        lmax,
        seed: opts.seed,
        p,
        quality: opts.quality,
        cancel,
    };
    let job = || split(&run, &nz, 0, p);
    let (mut parts, volume) = if opts.threads == 0 {
        job()
    } else {
        // Named: a thread otherwise takes the name of the thread that started it (`top` would
        // show the caller's name on threads that only partition).
        rayon::ThreadPoolBuilder::new()
            .num_threads(opts.threads)
            .thread_name(|i| format!("mbsp-part-{i}"))
            .build()
            .map_err(|source| PartitionError::Threads {
                threads: opts.threads,
                source,
            })?
            .install(job)
    };
    if fm::is_set(cancel) {
        return Err(PartitionError::Cancelled);
    }
    let mut gained = kway::refine(a, &mut parts, p, lmax, KWAY_PASSES);
    if opts.quality && p >= kway_fm::MIN_PARTS {
        let mut rng = seeded_rng(opts.seed ^ SplitMix64::mix(u64::MAX));
        gained += kway_fm::refine(a, &mut parts, p, lmax, &mut rng, cancel);
    }
    // (k-way passes are a few and cheap: none looks at the flag.)
    if fm::is_set(cancel) {
        return Err(PartitionError::Cancelled);
    }
    Ok((parts, volume - gained))
}

/// Passes of the final p-way refinement (each stops the loop if it gains nothing).
const KWAY_PASSES: usize = 8;

fn check(a: &CooMatrix, p: usize, opts: &Options) -> Result<(), PartitionError> {
    if p == 0 {
        return Err(PartitionError::NoParts);
    }
    if p > u32::MAX as usize {
        return Err(PartitionError::TooManyParts { p });
    }
    if !(opts.eps >= 0.0 && opts.eps.is_finite()) {
        return Err(PartitionError::Imbalance { eps: opts.eps });
    }
    a.validate()?;
    if a.nnz() > u32::MAX as usize {
        return Err(PartitionError::TooManyNonzeros { nnz: a.nnz() });
    }
    Ok(())
}

/// Below this many nonzeros the two halves of a split are partitioned one after the other.
const PARALLEL_MIN: usize = 20_000;

/// What every split of one partitioning shares.
struct Run<'a> {
    a: &'a CooMatrix,
    /// Most nonzeros a final part may hold.
    lmax: u64,
    seed: u64,
    /// Parts in all: the split of `p` parts is the first, which runs alone.
    p: usize,
    quality: bool,
    cancel: Option<&'a AtomicBool>,
}

/// Recursive bipartitioning of the nonzeros `nz` into the `q` parts `first..first + q`, each
/// at most `run.lmax` nonzeros; returns the part of each entry of `nz`.
///
/// The imbalance allowed at this split is what is left of the overall budget, spread evenly
/// over the splits still to come: with slack `δ = q·lmax/W − 1` and `L = ⌈log2 q⌉` levels to go,
/// this split may be off by `(1 + δ)^(1/L) − 1`, so splits that come out better than allowed
/// leave more room below.
/// With `cancel` set, it returns at once (every entry in part `first`: a valid result the
/// caller throws away).
fn split(run: &Run, nz: &[u32], first: u32, q: usize) -> (Vec<u32>, u64) {
    let Run {
        a,
        lmax,
        seed,
        cancel,
        ..
    } = *run;
    let w = nz.len();
    if q == 1 || fm::is_set(cancel) {
        return (vec![first; w], 0);
    }
    if w <= q {
        // At most one nonzero per part: nothing to optimise.
        let parts: Vec<u32> = (0..w as u32).map(|t| first + t).collect();
        let sub = Sub::new(a, nz);
        let volume = sub.volume_of_parts(&parts);
        return (parts, volume);
    }
    let q0 = q / 2;
    let q1 = q - q0;
    let wf = w as f64;
    let levels = (q as f64).log2().ceil();
    let slack = q as f64 * lmax as f64 / wf - 1.0;
    let eps = (1.0 + slack.max(0.0)).powf(1.0 / levels) - 1.0;
    let bound = |qk: usize| -> u64 {
        let ideal = wf * qk as f64 / q as f64;
        let lo = (w as u64 * qk as u64).div_ceil(q as u64);
        (((1.0 + eps) * ideal).floor() as u64)
            .max(lo)
            .min(qk as u64 * lmax)
    };
    let b = Bounds {
        max: [bound(q0), bound(q1)],
        target: [
            (w as u64 * q0 as u64) / q as u64,
            w as u64 - (w as u64 * q0 as u64) / q as u64,
        ],
        cancel,
    };
    let mut rng = seeded_rng(seed ^ SplitMix64::mix(((first as u64) << 32) | q as u64));
    let sub = Sub::new(a, nz);
    let side = medium::split(&sub, &b, run.quality, q == run.p, &mut rng);
    let cut = sub.volume(&side);
    drop(sub);
    let mut halves: [Vec<u32>; 2] = [Vec::new(), Vec::new()];
    for (t, &s) in side.iter().enumerate() {
        halves[s as usize].push(nz[t]);
    }
    let ((p0, v0), (p1, v1)) = if w >= PARALLEL_MIN {
        rayon::join(
            || split(run, &halves[0], first, q0),
            || split(run, &halves[1], first + q0 as u32, q1),
        )
    } else {
        (
            split(run, &halves[0], first, q0),
            split(run, &halves[1], first + q0 as u32, q1),
        )
    };
    let mut out = Vec::with_capacity(w);
    let (mut i0, mut i1) = (0, 0);
    let volume = cut + v0 + v1;
    for &s in &side {
        if s == 0 {
            out.push(p0[i0]);
            i0 += 1;
        } else {
            out.push(p1[i1]);
            i1 += 1;
        }
    }
    (out, volume)
}

#[cfg(test)]
mod tests {
    use super::seeded_rng;

    /// The partitions of every seed are those of the generator the partitioner had before it
    /// used `mbsp::rng` (its first words for three seeds, from that generator).
    #[test]
    fn the_seeded_streams_are_unchanged() {
        let first = |seed| {
            let mut r = seeded_rng(seed);
            [r.next_u64(), r.next_u64(), r.next_u64()]
        };
        assert_eq!(
            first(0),
            [
                0xa706_dd2f_4d19_7e6f,
                0xb382_a305_f441_4f5e,
                0x631a_9154_fbab_f717
            ]
        );
        assert_eq!(
            first(1),
            [
                0x5dc2_0aa7_b2a2_7137,
                0xbda5_668a_01d7_049c,
                0x82b4_3276_abb8_0226
            ]
        );
        assert_eq!(
            first(42),
            [
                0x57e1_faba_6510_7204,
                0xf4ab_d143_feb2_4055,
                0x7c81_6738_c129_03b2
            ]
        );
    }
}
