//! The multiply of processes that share the whole vectors: `x` read where the caller keeps it,
//! `y` written in place.
//!
//! [`HpSpmv`](super::HpSpmv) with direct gets copies the `x` entries a process reads from their
//! owners' registered `x` into a local buffer, and hands each process its own entries of `y`.
//! A caller that holds whole vectors (Python's `plan @ x`) then copies its `x` into the owners'
//! buffers before the multiply and assembles `y` from the parts after it: two passes over both
//! vectors, as long as the multiply itself on a matrix of a few nonzeros per row (measured:
//! CHANGELOG.md, under the shared SpMV). [`SharedSpmv`] does neither. The vectors are one
//! [`SharedVectors`], shared by the processes of the run. Each process computes whole rows of
//! `y`, whole cache lines of it, from the matrix over the global columns (`rows.rs`: each line
//! goes to the process that owns most of its rows in the plan), and in one superstep:
//!
//! 1. computes its rows block by block, reading each `x_j` straight from the caller's `x`
//!    (what a direct get from `x_j`'s owner reads, without the copy) and writing each row's
//!    sum straight into `y`;
//! 2. takes the blocks of the others that they have not started yet, from the other ends of
//!    their queues (`share.rs`: the partitioner balances nonzeros, not time);
//! 3. a full sync.
//!
//! No partial sums, no messages: a process reads any `x_j` where it lies, so a row needs no
//! second process, and no two processes write one line of `y` (but where one takes a block of
//! another's, at the block's ends).
//!
//! **Why the writes are sound.** The rows of different processes are disjoint, and each block
//! of a process's rows is computed and written by the one thread that took it from that
//! process's queue in this multiply (`share.rs`); every writer reaches the sync that ends the
//! multiply after its last write, and a process writes `y` again only in a later multiply. A
//! process multiplies only while it holds its line of the plan's guard (claimed by
//! [`SharedSpmv::new`], given back on drop; the claim [`HpSpmv`](super::HpSpmv) takes too), so
//! one run at a time uses a plan's queues; and vectors are made for one plan
//! ([`SharedVectors::new`]; a multiply with another plan's vectors is an error), so two plans
//! never write one `y`. `x` is only read. `y` is complete once every process has returned from
//! the multiply.
//!
//! Cost per multiply: `max_s 2 nz(s) + l`, the nonzeros of each process's rows at the rate
//! of its reads of `x` (which cross between the cores where the partition cut the matrix,
//! as a direct get's would), nearer the mean when a process is slower than the others.

use super::{LocalSpmv, SpmvPlan, guard::HpGuard, rows::LINE, share::BLOCKS, share::Shares};
use crate::shared::Shared;
use crate::sparse::spmv::SpmvError;
use mbsp::Ctx;

/// The whole `x` and `y` of multiplies by [`SharedSpmv`], shared by the processes of a run
/// (made outside it, borrowed by all of them).
///
/// ```
/// use mbsp_algorithms::sparse::{CooMatrix, spmv::{SharedSpmv, SharedVectors, SpmvPlan}};
/// use mbsp_algorithms::sparse::partition::{partition, Options};
/// // y = A x with A = [[2, 1], [0, 3]], x = (1, 1).
/// let a = CooMatrix::new(2, 2, vec![(0, 0, 2.0), (0, 1, 1.0), (1, 1, 3.0)]).unwrap();
/// let plan = SpmvPlan::new(&a, &partition(&a, 2, &Options::default()).unwrap().dist).unwrap();
/// let x = vec![1.0; 2];
/// let mut y = vec![0.0; 2];
/// let v = SharedVectors::new(&plan, &x, &mut y).unwrap();
/// mbsp::run(2, |ctx| {
///     let mut spmv = SharedSpmv::new(ctx, &plan)?;
///     spmv.multiply(ctx, &v)
/// }).unwrap();
/// // (`v` borrows `y` until its last use, in the run)
/// assert_eq!(y, vec![3.0, 3.0]);
/// ```
pub struct SharedVectors<'v> {
    plan: &'v SpmvPlan,
    x: &'v [f64],
    y: Shared<'v, f64>,
}

impl<'v> SharedVectors<'v> {
    /// Which vectors these are, for the queues of blocks (`share.rs`): where `y` is.
    fn key(&self) -> usize {
        self.y.addr()
    }

    /// The position of `y[0]` in its cache line, in entries (`rows.rs`).
    fn offset(&self) -> usize {
        self.y.addr() % (LINE * size_of::<f64>()) / size_of::<f64>()
    }

    /// The vectors of multiplies with `plan`: `x` of the matrix's columns, `y` of its rows.
    ///
    /// ```
    /// # use mbsp_algorithms::sparse::{CooMatrix, Distribution, spmv::{SpmvError, SharedVectors, SpmvPlan}};
    /// let a = CooMatrix::new(2, 3, vec![(0, 0, 1.0)]).unwrap();
    /// let d = Distribution { p: 1, nz_part: vec![0], x_owner: vec![0; 3], y_owner: vec![0; 2] };
    /// let plan = SpmvPlan::new(&a, &d).unwrap();
    /// let e = SharedVectors::new(&plan, &[1.0; 2], &mut [0.0; 2]).err().unwrap();
    /// assert_eq!(e.to_string(), "spmv shared vectors: x has 2 entries; the matrix needs 3");
    /// ```
    pub fn new(plan: &'v SpmvPlan, x: &'v [f64], y: &'v mut [f64]) -> Result<Self, SpmvError> {
        for (which, len, needed) in [("x", x.len(), plan.cols), ("y", y.len(), plan.rows)] {
            if len != needed {
                return Err(SpmvError::VectorLength { which, len, needed });
            }
        }
        Ok(SharedVectors {
            plan,
            x,
            y: Shared::new(y),
        })
    }
}

/// One process's multiply on [`SharedVectors`] (see the module docs), made once per run
/// ([`SharedSpmv::new`], no superstep) and used for any number of multiplies.
pub struct SharedSpmv<'p> {
    plan: &'p SpmvPlan,
    local: &'p LocalSpmv,
    guard: &'p HpGuard,
    shares: &'p Shares,
    /// This process's multiplies so far (wrapping past 0): the epoch of its queue of blocks.
    epoch: u16,
    /// Blocks of other processes' rows computed here.
    taken: u64,
}

/// Global column of each local column of `local`, a part of `plan`: its own `x` entries first,
/// then the fetched ones (see `SpmvPlan::build`).
pub(super) fn global_cols(plan: &SpmvPlan, local: &LocalSpmv) -> Vec<u32> {
    if plan.shared_x {
        return (0..local.local_cols as u32).collect();
    }
    let mut g = local.x_owned.clone();
    g.resize(local.local_cols, u32::MAX);
    for f in &local.fetches {
        let src = &plan.procs[f.from as usize].x_owned[f.src as usize..(f.src + f.len) as usize];
        g[f.dst as usize..(f.dst + f.len) as usize].copy_from_slice(src);
    }
    g
}

impl<'p> SharedSpmv<'p> {
    /// This process's multiply of `plan`: claims its part of the plan (refused while another
    /// multiply of this plan that claims, this or an [`HpSpmv`](super::HpSpmv), holds it).
    /// Every process of the run calls it; no superstep. The matrix of the rows this process
    /// computes is made at its first multiply (once per plan, and the matrix whole once per
    /// plan by the first process there).
    pub fn new(ctx: &mut Ctx, plan: &'p SpmvPlan) -> mbsp::Result<Self> {
        const OP: &str = "spmv shared";
        let pid = ctx.pid();
        plan.check_run(ctx, OP)?;
        if !plan.guard.claim(pid) {
            return Err(ctx.misuse_error(
                OP,
                format!(
                    "part {pid} of this plan is in use by another multiply (one per plan and \
                     process at a time; clone the plan for concurrent runs)"
                ),
            ));
        }
        plan.shares.close(pid);
        Ok(SharedSpmv {
            plan,
            local: &plan.procs[pid],
            guard: &plan.guard,
            shares: &plan.shares,
            epoch: 0,
            taken: 0,
        })
    }

    /// This process's part of the plan.
    pub fn local(&self) -> &'p LocalSpmv {
        self.local
    }

    /// The blocks of other processes' rows this process has computed in its multiplies so far
    /// (taken from processes that had not started them when this one was done with its own;
    /// see the module docs). Depends on timing: a measure, not a result.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// `y = A x` on `v`, one superstep (see the module docs): this process writes its rows of
    /// `v`'s `y`. Every process calls it with the same vectors; `y` is complete when all have
    /// returned. Messages sent before the call are delivered by its sync, as by any other.
    pub fn multiply(&mut self, ctx: &mut Ctx, v: &SharedVectors<'_>) -> mbsp::Result<()> {
        const OP: &str = "spmv shared multiply";
        if !std::ptr::eq(v.plan, self.plan) {
            return Err(ctx.misuse_error(
                OP,
                format!(
                    "process {}: the vectors were made for another plan",
                    self.local.pid
                ),
            ));
        }
        let (pid, p) = (self.local.pid, self.plan.p());
        let (x, y) = (v.x, &v.y);
        self.epoch = self.epoch.checked_add(1).unwrap_or(1);
        let (epoch, key) = (self.epoch, v.key());
        let split = self.shares.split(self.plan, v.offset());
        let own = self.shares.part(self.plan, v.offset(), pid);
        // Why the writes below are sound: each is a row of a block this thread took from a
        // queue of this multiply, which no other thread writes (each block is taken once, and
        // the rows of blocks and processes are disjoint) before the sync that ends the
        // multiply; `v` is this plan's (checked above) and the same vectors as the owner's
        // (the queue's key): see the module docs and `share.rs`. Every row a matrix of the
        // split names is below the plan's rows (`rows.rs`), which is `y`'s length
        // (`SharedVectors::new`): no check per row, a large part of a row of two nonzeros.
        // SAFETY: as said above.
        let write = |r: usize, s: f64| unsafe { y.write_unchecked(r, s) };
        self.shares.open(pid, epoch, blocks(own.chunks()), key);
        while let Some(b) = self.shares.take_own(pid, epoch, key) {
            own.multiply_whole_chunks(x, block(own.chunks(), b), write);
        }
        // Then the blocks the others have not started, from the other ends of their queues.
        for q in (1..p).map(|i| (pid + i) % p) {
            let Some(m) = split.part_of(q) else {
                continue;
            };
            while let Some(b) = self.shares.take_for_other(q, epoch, key) {
                m.multiply_whole_chunks(x, block(m.chunks(), b), write);
                self.taken += 1;
            }
        }
        ctx.sync()
    }
}

impl SpmvPlan {
    /// Seconds of process `pid`'s part of a [`SharedSpmv`] multiply, alone: its rows, whole,
    /// over a whole `x` of ones, written into a whole `y` (on this thread; the best of three
    /// batches of `multiplies`). Timed by every process of a run at once, the largest is the
    /// local phase of a shared multiply on this machine, reads of `x` across the cores
    /// included; what `mbsp spmv --variant shared` predicts with. Makes the process's rows'
    /// matrix if no multiply has (once per plan).
    ///
    /// ```
    /// use mbsp_algorithms::sparse::{CooMatrix, spmv::SpmvPlan, partition::{partition, Options}};
    /// let a = CooMatrix::new(3, 3, vec![(0, 0, 1.0), (1, 1, 2.0), (2, 0, 3.0)]).unwrap();
    /// let plan = SpmvPlan::new(&a, &partition(&a, 2, &Options::default()).unwrap().dist).unwrap();
    /// let t = plan.time_shared_rows(1, 10);
    /// assert!(t > 0.0 && t < 1.0);
    /// ```
    pub fn time_shared_rows(&self, pid: usize, multiplies: usize) -> f64 {
        assert!(
            pid < self.p(),
            "time_shared_rows: pid {pid} of {}",
            self.p()
        );
        let x = vec![1.0; self.cols];
        let mut y = vec![0.0; self.rows];
        let ys = Shared::new(&mut y);
        let o = ys.addr() % (LINE * size_of::<f64>()) / size_of::<f64>();
        let own = self.shares.part(self, o, pid);
        let n = multiplies.max(1);
        (0..3)
            .map(|_| {
                let t = std::time::Instant::now();
                for _ in 0..n {
                    // SAFETY: the rows of a part are below `rows` (`rows.rs`), `y`'s length,
                    // and no other thread sees `y`.
                    own.multiply_whole_chunks(
                        std::hint::black_box(&x),
                        0..own.chunks(),
                        |r, s| unsafe { ys.write_unchecked(r, s) },
                    );
                    // (The writes reach `y`: its pointer escapes here.)
                    std::hint::black_box(&ys);
                }
                t.elapsed().as_secs_f64() / n as f64
            })
            .fold(f64::INFINITY, f64::min)
    }
}

/// Blocks of a matrix of `chunks` chunks ([`BLOCKS`], fewer for a small one).
fn blocks(chunks: usize) -> u32 {
    BLOCKS.min(chunks as u32)
}

/// The chunks of block `b` of a matrix of `chunks` chunks.
fn block(chunks: usize, b: u32) -> std::ops::Range<usize> {
    let n = blocks(chunks) as usize;
    let b = b as usize;
    b * chunks / n..(b + 1) * chunks / n
}

impl Drop for SharedSpmv<'_> {
    fn drop(&mut self) {
        self.shares.close(self.local.pid);
        self.guard.release(self.local.pid);
    }
}
