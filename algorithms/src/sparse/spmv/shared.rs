//! The multiply of processes that share the whole vectors: `x` read where the caller keeps it,
//! `y` written in place.
//!
//! [`HpSpmv`](super::HpSpmv) with direct gets copies the `x` entries a process reads from their
//! owners' registered `x` into a local buffer, and hands each process its own entries of `y`.
//! A caller that holds whole vectors (Python's `plan @ x`) then copies its `x` into the owners'
//! buffers before the multiply and assembles `y` from the parts after it: two passes over both
//! vectors, as long as the multiply itself on a matrix of a few nonzeros per row (measured:
//! CHANGELOG.md, under the shared SpMV). [`SharedSpmv`] does neither. The vectors are one
//! [`SharedVectors`], shared by the processes of the run; the local matrices are kept over the
//! global columns; and process `s`, in one superstep (two where some cache line of `y` holds
//! rows of more than one process):
//!
//! 1. fan-out: none; the local multiply reads each `x_j` straight from the caller's `x` (what a
//!    direct get from `x_j`'s owner reads, without the copy);
//! 2. local multiply: the sums of the rows `s` owns go straight into `y` (owned rows without a
//!    nonzero here get zero), the others into the send buffer; an owned row in a cache line of
//!    `y` that rows of other processes share goes to `s`'s stretch of a buffer of the vectors
//!    instead (`lines.rs`: two cores writing rows of one line take the line from each other at
//!    every write);
//! 3. fan-in: one `hpsend` per owner of partial sums (as [`HpSpmv`](super::HpSpmv));
//! 4. the owned rows of the others that they have not started yet, taken block by block from
//!    the other ends of their queues (`share.rs`: the partitioner balances nonzeros, not time;
//!    even processes take their own from the front, odd ones from the back), then a full sync;
//! 5. `hpmove` every partial-sum message and add it in place (into `y` or the buffer);
//! 6. where lines are shared: a full sync, then each process writes its run of the shared
//!    lines of `y`, whole, from the buffer.
//!
//! **Why the writes are sound.** The entries of `y` a process owns (`y_owned`) are disjoint
//! from the others'. Of the rows of `s` that have a nonzero here, each block is computed and
//! written by the one thread that took it from `s`'s queue in this multiply (`share.rs`); the
//! other entries of `s` (owned rows without a nonzero here, the fan-in's adds) by `s` alone,
//! the adds after the sync that every taker reaches after its writes. A process multiplies
//! only while it holds its line of the plan's guard (claimed by [`SharedSpmv::new`], given
//! back on drop; the claim [`HpSpmv`](super::HpSpmv) takes too), so one run at a time uses a
//! plan's parts and queues; and vectors are made for one plan ([`SharedVectors::new`]; a
//! multiply with another plan's vectors is an error), so two plans never write one `y`. `x`
//! is only read. The buffer of shared lines follows the same rules as `y` up to the sync of
//! step 5 (each of its positions is one owned row's); after the sync of step 6 it is only read,
//! and each row of a shared line is written by the one process whose run holds the line; a
//! process that starts its next multiply while others still read writes the buffer's other
//! half (`Lines::half`). `y` is complete once every process has returned from the multiply:
//! after the next sync, or once the run has ended.
//!
//! Cost per multiply: `max_s 2 nz(s) + h_fanout g_direct + h_fanin g + l`, that of the hp
//! multiply with direct gets (the reads of remote `x` are the same, without the copies), with
//! `max_s 2 nz(s)` nearer the mean when a process is slower than the others; where lines of
//! `y` are shared, plus `l` and the writes of those lines from the buffer.

use super::{
    LocalSpmv, SpmvPlan,
    guard::HpGuard,
    lines::{self, Lines},
    sell::Sell,
    share::{BLOCKS, Shares},
};
use crate::shared::Shared;
use crate::sparse::spmv::SpmvError;
use mbsp::Ctx;
use std::sync::atomic::AtomicU64;

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
    /// The sums of the rows of mixed lines (`lines.rs`), each process's in its stretch.
    mixed: Box<[AtomicU64]>,
}

impl<'v> SharedVectors<'v> {
    /// Which vectors these are, for the queues of blocks (`share.rs`): where `y` is.
    fn key(&self) -> usize {
        self.y.addr()
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
            mixed: plan.shares.dest(|| Lines::new(plan)).buffer(),
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
    /// The owned local rows and the others, over the global columns, their rows renamed: the
    /// owned ones to their global rows (the plan's, shared with the other processes: see
    /// `share.rs`), the others to their slots in the send buffer.
    own: &'p Sell,
    other: Sell,
    /// This process's multiplies so far (wrapping past 0): the epoch of its queue of blocks.
    epoch: u16,
    /// Blocks of other processes' rows computed here.
    taken: u64,
    /// Where the owned rows' sums go (`lines.rs`).
    dest: &'p Lines,
    /// The destinations of the owned rows, in `y_owned` order.
    codes: &'p [u32],
    /// The destinations of the owned rows without a nonzero here.
    empty_y: Vec<u32>,
    /// This process's multiplies so far: which half of the buffer of mixed lines the next
    /// one uses ([`Lines::half`]).
    count: u64,
    send: Vec<f64>,
    slot_of: Vec<u32>,
    tag: Vec<u8>,
}

/// Global column of each local column of `local`, a part of `plan`: its own `x` entries first,
/// then the fetched ones (see `SpmvPlan::build`).
fn global_cols(plan: &SpmvPlan, local: &LocalSpmv) -> Vec<u32> {
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
    /// multiply of this plan that claims, this or an [`HpSpmv`](super::HpSpmv), holds it) and
    /// turns its local matrix into one over the global columns. Every process of the run calls
    /// it; no superstep.
    pub fn new(ctx: &mut Ctx, plan: &'p SpmvPlan) -> mbsp::Result<Self> {
        const OP: &str = "spmv shared";
        let pid = ctx.pid();
        plan.check_run(ctx, OP)?;
        let local = &plan.procs[pid];
        if !plan.guard.claim(pid) {
            return Err(ctx.misuse_error(
                OP,
                format!(
                    "part {pid} of this plan is in use by another multiply (one per plan and \
                     process at a time; clone the plan for concurrent runs)"
                ),
            ));
        }
        let map = global_cols(plan, local);
        let dest = plan.shares.dest(|| Lines::new(plan));
        let codes = dest.codes(pid);
        let own_y: Vec<u32> = local.dest[..local.own_rows]
            .iter()
            .map(|&q| codes[q as usize])
            .collect();
        plan.shares.close(pid);
        Ok(SharedSpmv {
            plan,
            local,
            guard: &plan.guard,
            shares: &plan.shares,
            own: plan.shares.own(pid, || local.own.renamed(&map, &own_y)),
            other: local.other.renamed(&map, &local.dest),
            epoch: 0,
            taken: 0,
            dest,
            codes,
            empty_y: local.y_empty.iter().map(|&q| codes[q as usize]).collect(),
            count: 0,
            send: local.send_buffer(),
            slot_of: local.slot_of(plan.p()),
            tag: Vec::new(),
        })
    }

    /// This process's part of the plan.
    pub fn local(&self) -> &'p LocalSpmv {
        self.local
    }

    /// The blocks of other processes' owned rows this process has computed in its multiplies
    /// so far (taken from processes that had not started them when this one was done with its
    /// own; see the module docs). Depends on timing: a measure, not a result.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// `y = A x` on `v`, one superstep (two where lines of `y` are shared: see the module
    /// docs): this process writes its owned entries of `v`'s `y`.
    /// Every process calls it with the same vectors; `y` is complete when all have returned
    /// (after the next sync, or when the run has ended). Its superstep carries nothing of the
    /// caller's (messages sent before the call make the fan-in fail).
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
        let dest = self.dest;
        let (x, y, mixed) = (v.x, &v.y, &v.mixed[dest.half(self.count)..]);
        self.count += 1;
        let pid = self.local.pid;
        self.epoch = self.epoch.checked_add(1).unwrap_or(1);
        let (epoch, key) = (self.epoch, v.key());
        // Why the writes below are sound: each is a row of a block this thread took from a queue
        // of this multiply, which no other thread writes (each block is taken once) and the
        // owner reads only after the sync below, or an owned row without a nonzero here (see
        // `compute`); `v` is this plan's (checked above) and the same vectors as the owner's
        // (the queue's key): see the module docs and `share.rs`. Where lines of `y` are
        // shared, a row of a shared line goes to the buffer instead (`lines.rs`), under the
        // same rule; elsewhere the writes go to `y` without a test per row.
        if dest.any_mixed() {
            self.compute(ctx, x, epoch, key, |code, s| {
                match dest.target(code as u32) {
                    // SAFETY: as said above.
                    Ok(r) => unsafe { y.write(r, s) },
                    Err(k) => lines::store(mixed, k, s),
                }
            })?;
        } else {
            // SAFETY: as said above.
            self.compute(ctx, x, epoch, key, |r, s| unsafe { y.write(r, s) })?;
        }
        ctx.sync()?;
        let codes = self.codes;
        self.local
            .receive_partial_sums(ctx, OP, &self.slot_of, |q, s| {
                match dest.target(codes[q]) {
                    // SAFETY: as above.
                    Ok(r) => unsafe { y.add(r, s) },
                    Err(k) => lines::store(mixed, k, lines::load(mixed, k) + s),
                }
            })?;
        if !dest.any_mixed() {
            return Ok(());
        }
        // The mixed lines: every owner's sums are in the buffer once all have passed this sync;
        // each line is written whole by the one process it falls to.
        ctx.sync()?;
        for &(r, k) in dest.scatter(pid) {
            // SAFETY: rows of mixed lines are written by no one but this line's writer, and
            // no process reads `y` before the multiply has ended on every process.
            unsafe { y.write(r as usize, lines::load(mixed, k as usize)) };
        }
        Ok(())
    }

    /// Steps 2-4 of a multiply (see the module docs), each owned row's sum handed to
    /// `write(destination, sum)`: this process's blocks, its owned rows without a nonzero
    /// here, the partial sums of the others' rows and their messages, then the blocks the
    /// others have not started.
    fn compute(
        &mut self,
        ctx: &mut Ctx,
        x: &[f64],
        epoch: u16,
        key: usize,
        write: impl Fn(usize, f64) + Copy,
    ) -> mbsp::Result<()> {
        let (pid, p) = (self.local.pid, self.plan.p());
        self.shares.open(pid, epoch, blocks(self.own.chunks()), key);
        while let Some(b) = self.shares.take_own(pid, epoch, key) {
            self.own
                .multiply_whole_chunks(x, block(self.own.chunks(), b), write);
        }
        for &i in &self.empty_y {
            // (This write and the adds after the sync) entries this process owns without a
            // nonzero here, which no other thread writes while this process holds its claim on
            // the plan: see the module docs.
            write(i as usize, 0.0);
        }
        let send = &mut self.send[..];
        self.other.multiply_whole(x, |slot, s| send[slot] = s);
        // SAFETY: `self.send` is neither changed nor freed before the caller's sync (`self`
        // stays borrowed until the multiply returns).
        unsafe {
            self.local
                .send_partial_sums(ctx, &mut self.tag, &self.send)?
        };
        // Then the blocks the others have not started, from the other ends of their queues.
        for q in (1..p).map(|i| (pid + i) % p) {
            let Some(m) = self.shares.own_of(q) else {
                continue;
            };
            while let Some(b) = self.shares.take_for_other(q, epoch, key) {
                m.multiply_whole_chunks(x, block(m.chunks(), b), write);
                self.taken += 1;
            }
        }
        Ok(())
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
