//! The hierarchical (Multi-BSP) multiply: packages at the top, each package's cores below.
//!
//! [`HierPlan::partition`] partitions the matrix over the packages, then each package's part
//! (its nonzeros in its local rows and columns, [`LocalSpmv::matrix`]) over that package's
//! cores. A multiply is the plain [`Spmv`] over the packages whose local phase is a nested BSP
//! run over the package's cores:
//!
//! 1. top fan-out: the package fetches the `x` entries it needs into its local buffer
//!    (package-level gets, one top superstep);
//! 2. nested run, one superstep: each core multiplies its nonzeros reading the package's `x`
//!    buffer in place (the package's memory is shared: no communication at the lower level,
//!    and no copy: a compact per-core copy of `x` cost more traffic than it saved), and
//!    sends the partial sums of rows summed by another core of the package to that core
//!    (`hpsend`, header word first); after the nested sync each core adds what it received
//!    and writes the package's row sums where the top level wants them: into `y` for rows the
//!    package owns, into the top send buffer for the others (each row has one summing core,
//!    so the writes are disjoint). Where no core of the package sends or receives partial
//!    sums (row blocks, [`HierPlan::partition`]) the nested run has no superstep: each core
//!    writes its row sums straight away, and the end of the nested run is the only
//!    synchronisation they need. With one package on top (a one-package machine), the top
//!    supersteps move nothing, and a multiply is the cores' row-block multiply reading and
//!    writing the package's vectors in place, plus the start of a nested run;
//! 3. top fan-in and summation (one top superstep).
//!
//! Cost: top `2 l_top + (h_top_fanout + h_top_fanin) g_top`, plus per package
//! `max_c 2 nz(c) + h_core g_core + l_core` and the start of a nested run (worker teams: a few
//! µs). Communication between packages is what the top partition minimises; the cores of a
//! package only exchange partial sums, through the package's memory.

use super::{LocalSpmv, Spmv, SpmvError, SpmvPlan};
use crate::shared::Shared;
use crate::sparse::partition::{Options, PartitionError, partition};
use crate::sparse::{CooMatrix, Distribution};
use crossbeam_utils::CachePadded;
use mbsp::Ctx;
use std::sync::Mutex;

/// A two-level plan: the top plan over packages and, per package, the plan of its part over
/// its cores.
#[derive(Clone, Debug)]
pub struct HierPlan {
    /// Rows of the matrix.
    pub rows: usize,
    /// Columns of the matrix.
    pub cols: usize,
    /// The plan over the packages.
    pub top: SpmvPlan,
    /// Per package, the plan of its part ([`LocalSpmv::matrix`] of `top.procs[P]`) over its
    /// cores, reading the package's local `x` buffer in place.
    pub inner: Vec<SpmvPlan>,
}

impl HierPlan {
    /// The plan for the distribution `top` of `a` over packages and the distributions
    /// `inner[P]` of each package's part ([`LocalSpmv::matrix`]) over its cores. The `x`
    /// owners of the inner distributions are not used (the cores read the package's buffer).
    pub fn new(
        a: &CooMatrix,
        top: &Distribution,
        inner: &[Distribution],
    ) -> Result<Self, SpmvError> {
        Self::over(a, SpmvPlan::new(a, top)?, inner)
    }

    /// [`HierPlan::new`] over a top plan already made.
    fn over(a: &CooMatrix, top: SpmvPlan, inner: &[Distribution]) -> Result<Self, SpmvError> {
        if inner.len() != top.p() {
            return Err(SpmvError::InnerCount {
                inner: inner.len(),
                packages: top.p(),
            });
        }
        let inner = top
            .procs
            .iter()
            .zip(inner)
            .map(|(l, d)| {
                SpmvPlan::build(&l.matrix(), d, true).map_err(|e| SpmvError::Package {
                    package: l.pid,
                    source: Box::new(e),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(HierPlan {
            rows: a.rows,
            cols: a.cols,
            top,
            inner,
        })
    }

    /// Partitions `a` over `packages` parts with the partitioner's `options`, then splits each
    /// package's part into `cores` blocks of consecutive rows balanced by nonzeros
    /// ([`row_blocks`]), and plans the multiply.
    ///
    /// Why rows inside a package: the cores of a package share its `x` and its memory, so the
    /// communication a 2D partition saves there costs nothing, while the rows it interleaves
    /// between cores make them write their sums into the same cache lines of the package's
    /// `y`, and that false sharing can cost more than the multiply itself (docs/benchmarks.md).
    /// Row blocks need no partial sums
    /// between cores and give each core its own stretch of `y`. [`HierPlan::partition_2d`]
    /// partitions the packages' parts with the partitioner as well.
    ///
    /// Which rows and columns a block holds is chosen by the partitioner all the same: each
    /// package's part is partitioned over its cores, and the package's owned `y` and `x`
    /// entries ([`LocalSpmv::y_owned`], [`LocalSpmv::x_owned`]) are ordered by the core the
    /// partition gives them to (ascending index within a core). The blocks of consecutive rows
    /// are then the partition's rows, and each core reads mostly a stretch of the package's
    /// `x` of its own, as the flat multiply's processes read their local `x`. In the matrix's
    /// own order a block's rows may read columns all over `x`, which costs the cores their
    /// caches (docs/benchmarks.md, "hier with one package on top").
    ///
    /// ```
    /// use mbsp_algorithms::sparse::{CooMatrix, spmv::HierPlan, partition::Options};
    /// let a = CooMatrix::new(4, 4, (0..4).map(|i| (i, i, 1.0))).unwrap();
    /// let plan = HierPlan::partition(&a, 2, 2, &Options::default()).unwrap();
    /// assert_eq!((plan.top.p(), plan.inner[0].p()), (2, 2));
    /// assert_eq!(plan.volumes().1, 0); // no partial sums between the cores of a package
    /// ```
    pub fn partition(
        a: &CooMatrix,
        packages: usize,
        cores: usize,
        options: &Options,
    ) -> Result<Self, SpmvError> {
        let top = partition(a, packages, options)?;
        let plan = SpmvPlan::new(a, &top.dist)?;
        let plan = if cores > 1 {
            let (rows, cols) = core_order(a, &plan, cores, options)?;
            SpmvPlan::build_ordered(a, &top.dist, false, Some((&rows, &cols)))?
        } else {
            plan
        };
        let inner: Vec<Distribution> = plan
            .procs
            .iter()
            .map(|l| row_blocks(&l.matrix(), cores))
            .collect();
        Self::over(a, plan, &inner)
    }

    /// [`HierPlan::partition`] with each package's part partitioned over its cores by the
    /// partitioner too (2D inside packages as well).
    ///
    /// ```
    /// use mbsp_algorithms::sparse::{CooMatrix, spmv::HierPlan, partition::Options};
    /// let a = CooMatrix::new(4, 4, (0..4).map(|i| (i, i, 1.0))).unwrap();
    /// let plan = HierPlan::partition_2d(&a, 2, 2, &Options::default()).unwrap();
    /// assert_eq!((plan.top.p(), plan.inner[0].p()), (2, 2));
    /// ```
    pub fn partition_2d(
        a: &CooMatrix,
        packages: usize,
        cores: usize,
        options: &Options,
    ) -> Result<Self, SpmvError> {
        Self::partition_with(a, packages, options, |l| {
            partition(&l.matrix(), cores, options).map(|r| r.dist)
        })
    }

    fn partition_with(
        a: &CooMatrix,
        packages: usize,
        options: &Options,
        inner: impl Fn(&LocalSpmv) -> Result<Distribution, PartitionError>,
    ) -> Result<Self, SpmvError> {
        let top = partition(a, packages, options)?;
        let top_plan = SpmvPlan::new(a, &top.dist)?;
        let inner = top_plan
            .procs
            .iter()
            .map(|l| {
                inner(l).map_err(|e| SpmvError::Package {
                    package: l.pid,
                    source: Box::new(SpmvError::Partition(e)),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(a, &top.dist, &inner)
    }

    /// Communication volume between packages and the sum over packages of the volume between
    /// the cores of a package (partial sums only).
    pub fn volumes(&self) -> (usize, usize) {
        let words = |plan: &SpmvPlan| -> usize {
            plan.procs
                .iter()
                .map(|l| {
                    let (fan_out, fan_in) = l.traffic();
                    fan_out + fan_in
                })
                .sum()
        };
        (words(&self.top), self.inner.iter().map(words).sum())
    }
}

/// Per global row and column of `a`, the core of its owning package that the partitioner gives
/// it when each package's part in `top` is partitioned over `cores` (the keys by which
/// [`HierPlan::partition`] orders the packages' vectors); entries a package owns but does not
/// use get key 0.
fn core_order(
    a: &CooMatrix,
    top: &SpmvPlan,
    cores: usize,
    options: &Options,
) -> Result<(Vec<u32>, Vec<u32>), SpmvError> {
    let (mut rows, mut cols) = (vec![0u32; a.rows], vec![0u32; a.cols]);
    for l in &top.procs {
        if l.nnz() == 0 {
            continue;
        }
        let d = partition(&l.matrix(), cores, options)
            .map_err(|e| SpmvError::Package {
                package: l.pid,
                source: Box::new(SpmvError::Partition(e)),
            })?
            .dist;
        // Local rows `..own_rows` are the package's owned rows with nonzeros here, at
        // `y_owned[dest[r]]`; local columns `..x_owned.len()` are its owned columns.
        for (r, &q) in l.dest[..l.own_rows].iter().enumerate() {
            rows[l.y_owned[q as usize] as usize] = d.y_owner[r];
        }
        for (c, &j) in l.x_owned.iter().enumerate() {
            cols[j as usize] = d.x_owner[c];
        }
    }
    Ok((rows, cols))
}

/// A distribution of `a` over `p` parts by blocks of consecutive rows with about `nnz / p`
/// nonzeros each (a row is never split): part `s` owns its rows' nonzeros and `y` entries; `x`
/// entries go by the same blocks of columns (the nested level of [`HierSpmv`] reads `x` from
/// the package's buffer and ignores them).
///
/// ```
/// use mbsp_algorithms::sparse::{CooMatrix, spmv::row_blocks};
/// let a = CooMatrix::new(4, 4, vec![(0, 0, 1.0), (0, 1, 1.0), (1, 1, 1.0), (2, 2, 1.0), (3, 3, 1.0)]).unwrap();
/// let d = row_blocks(&a, 2);
/// assert_eq!(d.y_owner, vec![0, 0, 1, 1]);
/// assert_eq!(d.nz_part, vec![0, 0, 0, 1, 1]);
/// ```
pub fn row_blocks(a: &CooMatrix, p: usize) -> Distribution {
    let p = p.max(1);
    let counts = a.row_counts();
    let total: u64 = counts.iter().map(|&c| c as u64).sum();
    let mut y_owner = Vec::with_capacity(a.rows);
    let mut seen = 0u64;
    for &c in &counts {
        // The part whose share [s·total/p, (s+1)·total/p) holds this row's first nonzero.
        let s = (seen * p as u64)
            .checked_div(total)
            .map_or(0, |s| s.min(p as u64 - 1));
        y_owner.push(s as u32);
        seen += c as u64;
    }
    let nz_part = a.row_idx.iter().map(|&i| y_owner[i as usize]).collect();
    let x_owner = (0..a.cols)
        .map(|j| ((j * p) / a.cols.max(1)) as u32)
        .collect();
    Distribution {
        p,
        nz_part,
        x_owner,
        y_owner,
    }
}

/// One core's buffers, taken by the nested process of that number in each multiply.
struct Scratch {
    send: Vec<f64>,
    slot_of: Vec<u32>,
    /// Per row this core sums (position in its `y_owned`): where the package wants the sum,
    /// a position in the package's `y`, or in its top send buffer when [`TO_SEND`] is set.
    out: Vec<u32>,
    /// The same per owned local row (`out[dest[r]]`): one lookup per row in the multiply.
    row_out: Vec<u32>,
    /// Where every row this core sums goes to the package's `y`, inside a stretch `lo..hi`
    /// that no other core's rows reach (row blocks): that stretch, and `row_out` relative to
    /// `lo`. The multiply then writes into a slice of its own, as the flat one does: writes
    /// through [`CoreOut`] (a lookup and a branch per row) in its inner loop slow the kernel
    /// down markedly (docs/benchmarks.md).
    block: Option<std::ops::Range<usize>>,
    /// Whether the rows this core sums land in [`Scratch::block`] in the order of its own
    /// `y_owned`, each at its position there (`out[q] = block.start + q`): with one package
    /// on top, always. The core's multiply is then the flat multiply's own
    /// ([`LocalSpmv::multiply_local`] into the stretch), one compiled loop for both: copies
    /// of the same loop compiled into two functions have run measurably apart (their
    /// placement in the binary), and hier's local phase would differ from flat's for no
    /// reason of its own (docs/benchmarks.md, "One kernel for flat and hier").
    in_order: bool,
}

/// The cores' buffers with [`Scratch::block`] set where every core's rows go to a stretch of
/// the package's `y` of its own (each then writes its stretch alone); unchanged otherwise.
/// Only for cores that exchange no partial sums (the caller's check).
fn own_blocks(mut cores: Vec<Scratch>) -> Vec<Scratch> {
    let stretch = |sc: &Scratch| -> Option<std::ops::Range<usize>> {
        if sc.out.iter().any(|&d| d & TO_SEND != 0) {
            return None;
        }
        let lo = sc.out.iter().min().map_or(0, |&d| d as usize);
        let hi = sc.out.iter().max().map_or(0, |&d| d as usize + 1);
        Some(lo..hi)
    };
    let Some(mut blocks) = cores.iter().map(stretch).collect::<Option<Vec<_>>>() else {
        return cores;
    };
    let mut sorted: Vec<&std::ops::Range<usize>> =
        blocks.iter().filter(|b| !b.is_empty()).collect();
    sorted.sort_by_key(|b| b.start);
    if sorted.windows(2).any(|w| w[0].end > w[1].start) {
        return cores;
    }
    for (sc, block) in cores.iter_mut().zip(blocks.drain(..)) {
        for d in &mut sc.row_out {
            *d -= block.start as u32;
        }
        sc.in_order = sc
            .out
            .iter()
            .enumerate()
            .all(|(q, &d)| d as usize == block.start + q);
        sc.block = Some(block);
    }
    cores
}

/// Marks an entry of [`Scratch::out`] as a position in the top send buffer.
const TO_SEND: u32 = 1 << 31;

/// The package's outputs as one core writes them: the destinations of the rows it sums.
struct CoreOut<'s, 'a> {
    y: &'s Shared<'a, f64>,
    send: &'s Shared<'a, f64>,
    out: &'s [u32],
    row_out: &'s [u32],
}

impl<'s, 'a> CoreOut<'s, 'a> {
    /// # Safety
    /// `out` must be the destinations of the rows this core sums (`row_out` the same ones by
    /// local row), and the nested run's other
    /// processes may touch no other entries of `y` and `send` than theirs. [`HierSpmv::new`]
    /// builds one `out` per core from the inner plan, where every local row of the package
    /// has exactly one summing core and distinct rows have distinct destinations: the cores'
    /// destinations are disjoint, and nobody else reads `y` or `send` before the nested run
    /// has ended.
    unsafe fn new(
        y: &'s Shared<'a, f64>,
        send: &'s Shared<'a, f64>,
        out: &'s [u32],
        row_out: &'s [u32],
    ) -> Self {
        CoreOut {
            y,
            send,
            out,
            row_out,
        }
    }

    fn target(&self, q: usize) -> (&Shared<'a, f64>, usize) {
        self.decode(self.out[q])
    }

    fn decode(&self, d: u32) -> (&Shared<'a, f64>, usize) {
        if d & TO_SEND != 0 {
            (self.send, (d & !TO_SEND) as usize)
        } else {
            (self.y, d as usize)
        }
    }

    fn set(&self, q: usize, v: f64) {
        let (s, i) = self.target(q);
        // SAFETY: entry `i` is this core's alone (`new`).
        unsafe { s.write(i, v) }
    }

    /// The core's local multiply `l` on the package's `x` buffer `xb`, each owned row's sum
    /// to its destination, the others' to `send`. Not inlined, and the destinations taken
    /// out of `self` first, as in
    /// [`LocalSpmv::multiply_local_mapped`](super::LocalSpmv::multiply_local_mapped): the
    /// kernel then keeps them in registers instead of reloading them at every row.
    #[inline(never)]
    fn multiply(&self, l: &LocalSpmv, xb: &[f64], send: &mut [f64]) {
        let (y, to_send, row_out) = (self.y, self.send, self.row_out);
        l.multiply_local_rows(
            xb,
            |r, v| {
                let d = row_out[r];
                let (s, i) = if d & TO_SEND != 0 {
                    (to_send, (d & !TO_SEND) as usize)
                } else {
                    (y, d as usize)
                };
                // SAFETY: entry `i` is this core's alone (`new`).
                unsafe { s.write(i, v) }
            },
            send,
        );
    }

    fn add(&self, q: usize, v: f64) {
        let (s, i) = self.target(q);
        // SAFETY: entry `i` is this core's alone (`new`).
        unsafe { s.slice_mut(i..i + 1)[0] += v }
    }
}

/// One package's hierarchical multiply, made once per top-level run ([`HierSpmv::new`]).
///
/// ```
/// use mbsp_algorithms::sparse::{CooMatrix, spmv::{HierPlan, HierSpmv}, partition::Options};
/// // y = A x with A = [[2, 1], [0, 3]], x = (1, 1): 2 packages of 2 cores.
/// let a = CooMatrix::new(2, 2, vec![(0, 0, 2.0), (0, 1, 1.0), (1, 1, 3.0)]).unwrap();
/// let plan = HierPlan::partition(&a, 2, 2, &Options::default()).unwrap();
/// let parts = mbsp::run(2, |ctx| {
///     let mut spmv = HierSpmv::new(ctx, &plan)?;
///     spmv.x_mut(ctx)?.fill(1.0);
///     let mut y = vec![0.0; spmv.local().y_owned.len()];
///     spmv.multiply(ctx, &mut y)?;
///     Ok(y)
/// }).unwrap();
/// assert_eq!(plan.top.collect_y(&parts).unwrap(), vec![3.0, 3.0]);
/// ```
pub struct HierSpmv<'p> {
    top: Spmv<'p>,
    inner: &'p SpmvPlan,
    /// By core, each on cache lines of its own: every core locks and reads its own at every
    /// multiply, and neighbours on one line would take it from each other's cores each time.
    scratch: Vec<CachePadded<Mutex<Scratch>>>,
    /// Whether the cores of the package exchange partial sums (a nested superstep per
    /// multiply); not with row blocks ([`HierPlan::partition`]), whose cores sum their own rows.
    partial_sums: bool,
}

impl<'p> HierSpmv<'p> {
    /// Registers the package's buffers (one top superstep). Called by every process of the
    /// top-level run (one per package) with the same plan.
    pub fn new(ctx: &mut Ctx, plan: &'p HierPlan) -> mbsp::Result<Self> {
        plan.top.check_run(ctx, "spmv hier")?;
        let (top, inner) = (&plan.top.procs[ctx.pid()], &plan.inner[ctx.pid()]);
        let scratch: Vec<Scratch> = inner
            .procs
            .iter()
            .map(|l| {
                let out: Vec<u32> = l
                    .y_owned
                    .iter()
                    .map(|&r| {
                        let (r, d) = (r as usize, top.dest[r as usize]);
                        if r < top.own_rows { d } else { d | TO_SEND }
                    })
                    .collect();
                let row_out = l.dest[..l.own_rows]
                    .iter()
                    .map(|&q| out[q as usize])
                    .collect();
                Scratch {
                    send: l.send_buffer(),
                    slot_of: l.slot_of(inner.p()),
                    out,
                    row_out,
                    block: None,
                    in_order: false,
                }
            })
            .collect();
        let partial_sums = inner
            .procs
            .iter()
            .any(|l| !(l.outs.is_empty() && l.recv_from.is_empty()));
        let scratch = if partial_sums {
            scratch
        } else {
            own_blocks(scratch)
        };
        let scratch = scratch
            .into_iter()
            .map(|s| CachePadded::new(Mutex::new(s)))
            .collect();
        Ok(HierSpmv {
            top: Spmv::for_part(ctx, top)?,
            inner,
            scratch,
            partial_sums,
        })
    }

    /// The package's part of the top plan (its owned `x` and `y` entries).
    pub fn local(&self) -> &'p LocalSpmv {
        self.top.local
    }

    /// The package's owned entries of `x` (in the order of `x_owned`), to fill before a
    /// multiply.
    pub fn x_mut<'a>(&'a mut self, ctx: &'a Ctx) -> mbsp::Result<&'a mut [f64]> {
        self.top.x_mut(ctx)
    }

    /// The package's owned entries of `x` (in the order of `x_owned`), to read: what the last
    /// multiply used, unchanged by it.
    ///
    /// ```
    /// # use mbsp_algorithms::sparse::{CooMatrix, spmv::{HierPlan, HierSpmv}, partition::Options};
    /// # let a = CooMatrix::new(2, 2, vec![(0, 0, 2.0), (1, 1, 3.0)]).unwrap();
    /// # let plan = HierPlan::partition(&a, 2, 2, &Options::default()).unwrap();
    /// mbsp::run(2, |ctx| {
    ///     let mut spmv = HierSpmv::new(ctx, &plan)?;
    ///     spmv.x_mut(ctx)?.fill(1.5);
    ///     let mut y = vec![0.0; spmv.local().y_owned.len()];
    ///     spmv.multiply(ctx, &mut y)?;
    ///     assert!(spmv.x(ctx)?.iter().all(|&v| v == 1.5));
    ///     Ok(())
    /// })?;
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn x<'a>(&'a self, ctx: &'a Ctx) -> mbsp::Result<&'a [f64]> {
        self.top.x(ctx)
    }

    /// Deregisters the package's buffers (effective at the next top-level sync); every
    /// top-level process calls it (see [`Spmv::free`](super::Spmv::free)).
    pub fn free(self, ctx: &mut Ctx) -> mbsp::Result<()> {
        self.top.free(ctx)
    }

    /// `y = A x`: `y` receives the package's owned entries (in the order of `y_owned`). Two
    /// top supersteps around one nested run (none for a package of one core), which has one
    /// superstep where its cores exchange partial sums and none where they do not (row blocks:
    /// [`HierPlan::partition`]); every top-level process must call it.
    pub fn multiply(&mut self, ctx: &mut Ctx, y: &mut [f64]) -> mbsp::Result<()> {
        if self.inner.p() == 1 {
            // One core: its part is the package's; a nested run would only add its start.
            return self.top.multiply(ctx, y);
        }
        let (inner, scratch, top) = (self.inner, &self.scratch, self.top.local);
        let partial_sums = self.partial_sums;
        self.top.multiply_with(ctx, y, |ctx, xb, y, send| {
            for &q in &top.y_empty {
                y[q as usize] = 0.0;
            }
            let (y, send) = (Shared::new(y), Shared::new(send));
            ctx.run(inner.p(), |n| {
                const OP: &str = "spmv hier multiply";
                let l = &inner.procs[n.pid()];
                let mut sc = scratch[n.pid()]
                    .lock()
                    .map_err(|_| n.misuse_error(OP, "a core's buffers are poisoned"))?;
                let sc = &mut *sc;
                if let Some(block) = sc.block.clone() {
                    // SAFETY: no other core's rows reach this stretch of `y` (`own_blocks`),
                    // and nobody else touches `y` before the nested run ends.
                    let ys = unsafe { y.slice_mut(block.clone()) };
                    if sc.in_order {
                        // `row_out` is `dest` here, and `ys` this core's `y` (`Scratch::in_order`).
                        l.multiply_local(xb, ys, &mut sc.send);
                        return Ok(());
                    }
                    l.multiply_local_mapped(xb, ys, &sc.row_out, &mut sc.send);
                    for &q in &l.y_empty {
                        ys[sc.out[q as usize] as usize - block.start] = 0.0;
                    }
                    return Ok(());
                }
                // SAFETY: `sc.out` is this core's part of the inner plan (see `CoreOut::new`).
                let mine = unsafe { CoreOut::new(&y, &send, &sc.out, &sc.row_out) };
                mine.multiply(l, xb, &mut sc.send);
                for &q in &l.y_empty {
                    mine.set(q as usize, 0.0);
                }
                if !partial_sums {
                    // Every row is summed by its core alone: the end of the nested run is
                    // all the synchronisation the package's outputs need.
                    return Ok(());
                }
                // SAFETY: `sc.send` is neither changed nor freed before the sync below (this
                // core holds its lock until it returns).
                unsafe { l.send_partial_sums(n, &mut Vec::new(), &sc.send)? };
                // One message from each core that sums rows of this one (a lazy sync).
                n.declare_incoming(l.recv_from.len())?;
                n.sync()?;
                l.receive_partial_sums(n, OP, &sc.slot_of, |q, v| mine.add(q, v))?;
                Ok(())
            })?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sparse::partition::Options;

    /// A banded matrix of `n` rows: every row has its diagonal and its two neighbours.
    fn band(n: usize) -> CooMatrix {
        let e = (0..n).flat_map(|i| {
            [i.wrapping_sub(1), i, i + 1]
                .into_iter()
                .filter(move |&j| j < n)
                .map(move |j| (i, j, 1.0 + (i * 7 + j) as f64 % 5.0))
        });
        CooMatrix::new(n, n, e.collect::<Vec<_>>()).unwrap()
    }

    /// The distribution of `a` over one package.
    fn one_package(a: &CooMatrix) -> Distribution {
        let one = |n: usize| vec![0u32; n];
        Distribution {
            p: 1,
            nz_part: one(a.nnz()),
            x_owner: one(a.cols),
            y_owner: one(a.rows),
        }
    }

    /// The stretches of `y` each core writes alone, from a run of `plan.top.p()` processes.
    fn blocks(plan: &HierPlan) -> Vec<Vec<Option<std::ops::Range<usize>>>> {
        mbsp::run(plan.top.p(), |ctx| {
            let spmv = HierSpmv::new(ctx, plan)?;
            let b = spmv
                .scratch
                .iter()
                .map(|m| m.lock().unwrap().block.clone())
                .collect();
            spmv.free(ctx)?;
            Ok(b)
        })
        .unwrap()
    }

    /// Per process of the top level, per core, whether the core runs the flat multiply's
    /// kernel ([`Scratch::in_order`]).
    fn in_order(plan: &HierPlan) -> Vec<Vec<bool>> {
        mbsp::run(plan.top.p(), |ctx| {
            let spmv = HierSpmv::new(ctx, plan)?;
            let b = spmv
                .scratch
                .iter()
                .map(|m| m.lock().unwrap().in_order)
                .collect();
            spmv.free(ctx)?;
            Ok(b)
        })
        .unwrap()
    }

    /// Row blocks under one package: every core writes a stretch of the package's `y` of its
    /// own, the stretches cover `y` in order, no partial sums flow (no nested superstep), and
    /// each core's rows are in the order of its stretch (it runs the flat kernel).
    #[test]
    fn row_blocks_under_one_package_write_their_own_stretches() {
        let a = band(1000);
        for cores in [2, 3, 4] {
            let plan = HierPlan::partition(&a, 1, cores, &Options::default()).unwrap();
            assert_eq!(in_order(&plan), vec![vec![true; cores]]);
            let b = blocks(&plan).pop().unwrap();
            let b: Vec<_> = b.into_iter().map(|r| r.expect("a stretch")).collect();
            assert_eq!(b[0].start, 0, "{b:?}");
            assert_eq!(b[cores - 1].end, 1000, "{b:?}");
            assert!(b.windows(2).all(|w| w[0].end == w[1].start), "{b:?}");
            assert_eq!(plan.volumes().1, 0);
        }
    }

    /// A grid whose rows and columns are numbered at random: row blocks in that order would
    /// read `x` all over, but ordered by the partition each core of one package reads its own
    /// stretch of the package's `x` but for the cut.
    #[test]
    fn row_blocks_under_one_package_read_their_own_stretch_of_x() {
        let grid = CooMatrix::laplacian_2d(40, 0.0).unwrap();
        let n = grid.rows;
        // A fixed scramble: i -> i·k mod n with k coprime to n.
        let k = 977;
        let e: Vec<(usize, usize, f64)> = (0..grid.nnz())
            .map(|z| {
                let (i, j) = (grid.row_idx[z] as usize, grid.col_idx[z] as usize);
                (i * k % n, j * k % n, grid.vals[z])
            })
            .collect();
        let a = CooMatrix::new(n, n, e).unwrap();
        // Nonzeros a core reads from the other half of the package's `x`.
        let far = |plan: &HierPlan| -> usize {
            plan.inner[0]
                .procs
                .iter()
                .enumerate()
                .map(|(c, l)| {
                    let m = l.matrix();
                    m.col_idx
                        .iter()
                        .filter(|&&j| (j as usize) * 2 / n != c)
                        .count()
                })
                .sum()
        };
        let plan = HierPlan::partition(&a, 1, 2, &Options::default()).unwrap();
        let unordered = {
            let top = one_package(&a);
            let local = SpmvPlan::new(&a, &top).unwrap().procs[0].matrix();
            HierPlan::new(&a, &top, &[row_blocks(&local, 2)]).unwrap()
        };
        let (ordered, scrambled) = (far(&plan), far(&unordered));
        assert!(ordered * 10 < a.nnz(), "{ordered} of {} read far", a.nnz());
        assert!(
            scrambled * 3 > a.nnz(),
            "{scrambled} of {} read far",
            a.nnz()
        );
        // Still a permutation of the rows and columns, and the same products.
        let mut rows = plan.top.procs[0].y_owned.clone();
        rows.sort_unstable();
        assert!(rows.iter().copied().eq(0..n as u32));
        let x: Vec<f64> = (0..n).map(|j| 1.0 + (j % 7) as f64).collect();
        let want: Vec<f64> = (0..n)
            .map(|i| {
                (0..a.nnz())
                    .filter(|&z| a.row_idx[z] as usize == i)
                    .map(|z| a.vals[z] * x[a.col_idx[z] as usize])
                    .sum()
            })
            .collect();
        let got = mbsp::run(1, |ctx| {
            let mut spmv = HierSpmv::new(ctx, &plan)?;
            let local = spmv.local();
            let xs: Vec<f64> = local.x_owned.iter().map(|&j| x[j as usize]).collect();
            spmv.x_mut(ctx)?.copy_from_slice(&xs);
            let mut y = vec![0.0; local.y_owned.len()];
            spmv.multiply(ctx, &mut y)?;
            Ok(y)
        })
        .unwrap();
        for (q, &i) in plan.top.procs[0].y_owned.iter().enumerate() {
            assert!((got[0][q] - want[i as usize]).abs() < 1e-12, "row {i}");
        }
    }

    /// Cores that exchange partial sums (nonzeros of a row on several cores) keep the general
    /// path.
    #[test]
    fn partial_sums_keep_the_general_path() {
        let a = band(400);
        let top = one_package(&a);
        let local = SpmvPlan::new(&a, &top).unwrap().procs[0].matrix();
        let cyclic = |n: usize| (0..n).map(|k| (k % 2) as u32).collect::<Vec<_>>();
        let inner = Distribution {
            p: 2,
            nz_part: cyclic(local.nnz()),
            x_owner: cyclic(local.cols),
            y_owner: cyclic(local.rows),
        };
        let plan = HierPlan::new(&a, &top, &[inner]).unwrap();
        assert!(plan.volumes().1 > 0, "nonzeros of a row on both cores");
        assert!(blocks(&plan).pop().unwrap().iter().all(Option::is_none));
    }
}
