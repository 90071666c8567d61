//! The level-1 operations of the BSPlib paper (§6): broadcast, reduce and all-reduce with a user
//! operator, inclusive and exclusive scan, gather, scatter, all-gather and all-to-all, for any
//! plain-old-data element type ([`bytemuck::Pod`]).
//!
//! ```
//! use mbsp_algorithms::collectives as coll;
//! let out = mbsp::run(4, |ctx| {
//!     let mut x = [ctx.pid() as u64 + 1];
//!     coll::allreduce(ctx, &mut x, |a, b| a + b)?;       // 1 + 2 + 3 + 4 on every process
//!     let mut s = [ctx.pid() as u64 + 1];
//!     coll::scan_inclusive(ctx, &mut s, |a, b| a + b)?;  // prefix sums over the processes
//!     let all = coll::allgather(ctx, &[ctx.pid() as u8])?;
//!     Ok((x[0], s[0], all.into_vec()))
//! })?;
//! assert_eq!(out[2], (10, 6, vec![0, 1, 2, 3]));
//! # Ok::<(), mbsp::Error>(())
//! ```
//!
//! # Semantics
//!
//! Every process of the run calls the same collective with the same root, element type and (where
//! the operation says so) length. Each call is one or more whole supersteps: it syncs, so puts
//! and gets the caller issued before it complete in its first sync, and messages the caller had
//! not moved out of the queue are gone afterwards, as after any sync. Following the paper's
//! rules for level-1 operations:
//!
//! * memory it accesses remotely is registered and deregistered inside (the caller's
//!   registrations are untouched and may be used around it);
//! * its messages carry a zero tag of whatever tag size is in force, so the caller's tag size is
//!   neither needed nor changed; all its messages are moved out of the queue before it returns;
//! * nothing is left pending on return.
//!
//! The caller must not send messages in the superstep in which it calls a collective (they would
//! arrive in the collective's sync; the collective reports them as an error). Processes that call
//! collectives that do not match — different operations, roots, element types or lengths — get
//! an error naming both calls, never wrong data or a hang; the error ends the run like every misuse.
//! To that end every process sends its call's header to every other process in the call's
//! superstep of messages (with the data where the other needs some, alone where not), and the
//! registered algorithms exchange headers first: whichever process notices a mismatch knows
//! both calls. A process that sent nothing at all (it synced instead, or its call exchanges
//! along a tree) is named as such, with the call of the process that noticed.
//!
//! Reductions and scans apply the operator elementwise, in pid order
//! (`x₀ ⊕ x₁ ⊕ … ⊕ x_{p-1}`), so an associative operator need not be commutative; the operator
//! is never applied to an element with itself twice.
//!
//! # Algorithms and cost
//!
//! For `n` words per process (`w` = `n` elements in 8-byte words):
//!
//! | operation | messages (1 superstep) | registered, direct gets | trees (`L = ⌈log₂ p⌉`) |
//! |---|---|---|---|
//! | broadcast | `h = (p-1)w` | direct: `h = (p-1)w`, 2 supersteps; two-phase (scatter, all-gather): `h = 2(p-1)/p·w`, 3 | `L` supersteps of `h = w` |
//! | reduce, all-reduce | `h = (p-1)w` | two-phase (reduce-scatter, gather / all-gather): `h = 2(p-1)/p·w`, 3 (reduce: `w/p` words of scratch on the processes other than the root) | reduce `L` (+1 if the root is not pid 0), all-reduce `2L`, each `h = w` |
//! | scan | `h = (p-1)w` | two-phase (per block: prefixes over processes, then fetch): `h = 2(p-1)/p·w`, 3, `(p-1)/p·w` words of scratch | `L` supersteps of `h = w` |
//! | gather, scatter, all-gather, all-to-all | `h` = the data a process sends or receives | — | — |
//!
//! Every message also carries the call's header (`H` = 3 words); in a superstep of messages a
//! process sends the header alone to those it has no data for, which leaves `h` at the
//! `(p-1)(w+H)` of the process with data; and the registered algorithms first exchange one
//! header between every pair of processes: with many processes and little
//! data the `(p-1)(w+H)` words of one superstep of messages cost more than the trees' extra
//! supersteps, and the trees are chosen (at p = 1000 a one-word all-reduce by messages is a
//! million messages in all, by trees 20 supersteps of at most one message per process).
//!
//! Messages are copied twice (into the sender's outbox, out of it; a header with up to two words
//! of data rides in the barrier's line instead, as a small put does); direct gets once, so their
//! `g` is lower, but each superstep that registers or deregisters memory costs a second barrier.
//! The cheapest by [`cost::Params`](crate::cost::Params) is chosen from the length, which all
//! processes agree on ([`Algorithm::Auto`]); [`Collectives::algorithm`] forces one. Gather,
//! scatter, all-gather and all-to-all are already `h`-optimal in one superstep, and their
//! lengths may differ per process, so they always use messages.
//!
//! # Memory
//!
//! The vectors the collectives return (the [`Parts`] of gather, all-gather and all-to-all-v,
//! the `Vec` of scatter and all-to-all) come from the process's buffer pool ([`Ctx::buffer`])
//! when they hold 64 KiB or more (smaller ones from the allocator, which is faster for them).
//! Give a result back with [`Ctx::recycle`] (`ctx.recycle(parts.into_vec())`) once done with
//! it, and the next collective of that element type takes its result from the pool: a loop of
//! large collectives then touches no fresh memory after its first call. That matters: the
//! first touch of fresh memory costs a page fault per 4 KiB page, which for results of
//! hundreds of MiB takes longer than the collective's copies. The scratch of the registered
//! reductions and scans (`TwoPhase`), and the accumulator of a reduction by messages on the
//! processes whose own contribution is not the first, come from the pool and go back to it
//! when they hold 64 KiB or more, so the pool keeps the largest until the run ends (at most
//! `max(64, 2p)` buffers per element type: [`Ctx::recycle`]) or [`Ctx::clear_pool`] frees
//! them.
//!
//! ```
//! use mbsp_algorithms::collectives::Collectives;
//! mbsp::run(2, |ctx| {
//!     let mine = vec![ctx.pid() as f64; 1 << 14]; // 128 KiB each: results from the pool
//!     for _ in 0..3 {
//!         let all = Collectives::default().allgather(ctx, &mine)?;
//!         assert_eq!(all.part(1)[0], 1.0);
//!         ctx.recycle(all.into_vec()); // the next call's result
//!     }
//!     Ok(())
//! })?;
//! # Ok::<(), mbsp::Error>(())
//! ```

mod comm;
mod elem;
mod exposed;
mod tree;
mod wire;

use crate::cost::{Params, words};
use crate::dist::block_range;
use bytemuck::Pod;
pub use comm::Comm;
use exposed::Exposed;
use mbsp::{Ctx, Result};
use smallvec::SmallVec;
pub use wire::Op as Collective;
use wire::{Call, Inbox, Op, copy_into};

/// How a collective moves its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Algorithm {
    /// The cheapest for the length and the BSP parameters.
    Auto,
    /// One superstep of messages.
    Messages,
    /// Register, then every process fetches what it needs with direct gets (broadcast only).
    Direct,
    /// Register, then two phases of direct gets, each moving a 1/p block per pair of processes
    /// (broadcast: scatter + all-gather; reduce: reduce-scatter + gather; all-reduce:
    /// reduce-scatter + all-gather; scan: per-block prefixes + fetch).
    TwoPhase,
    /// Trees of messages: `⌈log₂ p⌉` supersteps per phase in which every process sends and
    /// receives at most one message (broadcast: binomial tree; reduce and all-reduce: binomial
    /// tree to pid 0, then to the root or broadcast; scans: recursive doubling). For many
    /// processes, where the `p²` messages of one superstep cost more than the extra supersteps.
    Tree,
}

impl Algorithm {
    fn code(self) -> u8 {
        match self {
            Algorithm::Auto | Algorithm::Messages => 0,
            Algorithm::Direct => 1,
            Algorithm::TwoPhase => 2,
            Algorithm::Tree => 3,
        }
    }
}

/// Collectives with a chosen algorithm and BSP parameters; the free functions of this module use
/// [`Collectives::default`] (automatic choice, [`Params::current`]).
///
/// ```
/// use mbsp_algorithms::collectives::{Algorithm, Collectives};
/// let c = Collectives::default().algorithm(Algorithm::TwoPhase);
/// let v = mbsp::run(3, |ctx| {
///     let mut data = vec![ctx.pid() as f64; 1000];
///     c.allreduce(ctx, &mut data, f64::max)?;
///     Ok(data[999])
/// })?;
/// assert_eq!(v, vec![2.0; 3]);
/// # Ok::<(), mbsp::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Collectives {
    algorithm: Algorithm,
    params: Params,
}

impl Default for Collectives {
    fn default() -> Self {
        Collectives {
            algorithm: Algorithm::Auto,
            params: *Params::current(),
        }
    }
}

/// Bytes of the chunks the two-phase algorithms combine at a time (fits in L1 with its partner).
const CHUNK_BYTES: usize = 16 << 10;

impl Collectives {
    /// Use `algorithm` where the operation has it (others use their only algorithm).
    pub fn algorithm(mut self, algorithm: Algorithm) -> Self {
        self.algorithm = algorithm;
        self
    }

    /// Choose algorithms with these BSP parameters.
    pub fn params(mut self, params: Params) -> Self {
        self.params = params;
        self
    }

    /// The algorithm [`Algorithm::Auto`] picks for `op` on `p` processes with `n` elements of
    /// `elem` bytes per process, and its predicted time in seconds.
    ///
    /// ```
    /// use mbsp_algorithms::collectives::{Algorithm, Collective, Collectives};
    /// let c = Collectives::default();
    /// assert_eq!(c.plan(Collective::AllReduce, 2, 1, 8).0, Algorithm::Messages);
    /// assert_eq!(c.plan(Collective::Broadcast, 4, 1 << 21, 8).0, Algorithm::TwoPhase);
    /// ```
    pub fn plan(&self, op: Collective, p: usize, n: usize, elem: usize) -> (Algorithm, f64) {
        let mut best = (
            Algorithm::Messages,
            self.predict(op, Algorithm::Messages, p, n, elem),
        );
        // Every other algorithm takes at least two supersteps (two registering ones, for the
        // direct broadcast), but for the tree of a broadcast or scan at p = 2, which costs what
        // messages cost (and a tie keeps messages): a call whose messages cost at most 2 l (and
        // 2 l_reg) is planned without the other predictions (small collectives plan on every
        // call).
        if best.1 <= 2.0 * self.params.l.min(self.params.l_reg) {
            return best;
        }
        for a in [Algorithm::Direct, Algorithm::TwoPhase, Algorithm::Tree] {
            if let Some(t) = self.predict_some(op, a, p, n, elem)
                && t < best.1
            {
                best = (a, t);
            }
        }
        best
    }

    /// The BSP-predicted seconds of `op` by `algorithm` (its nearest available algorithm) on `p`
    /// processes with `n` elements of `elem` bytes per process.
    pub fn predict(
        &self,
        op: Collective,
        algorithm: Algorithm,
        p: usize,
        n: usize,
        elem: usize,
    ) -> f64 {
        match algorithm {
            Algorithm::Auto => self.plan(op, p, n, elem).1,
            a => self.predict_some(op, a, p, n, elem).unwrap_or_else(|| {
                self.predict_some(op, Algorithm::Messages, p, n, elem)
                    .unwrap()
            }),
        }
    }

    fn predict_some(
        &self,
        op: Collective,
        a: Algorithm,
        p: usize,
        n: usize,
        elem: usize,
    ) -> Option<f64> {
        let w = words(n, elem);
        let pm = p.saturating_sub(1) as f64;
        let block = pm / p.max(1) as f64 * w;
        // Past the cache, data moves at the far rates: a process's data and its copy (the
        // outbox, the result or the scratch) are what must fit.
        let prm = &self.params.for_data(16.0 * w);
        // Every message carries the call's header; the registered algorithms check the call
        // with one header from every other process first. Each message also costs what a
        // request costs beyond its words (`g_msg`: queued, matched and moved on its own), which
        // is what makes the p - 1 messages of one superstep dearer than a tree's one per step
        // as p grows.
        let head = words(wire::HEADER, 1);
        let checks = prm.time_of(0, pm * head, pm);
        let tree = tree::rounds(p);
        // `steps` supersteps of one message of `w` words and a header each.
        let chain = |steps: usize| prm.time_of(steps, steps as f64 * (w + head), steps as f64);
        // The registered algorithms register in their first superstep and deregister in their
        // last (`Params::l_reg` each); two phases have one plain superstep between.
        Some(match (a, op) {
            (Algorithm::Messages | Algorithm::Auto, _) => prm.time_of(1, pm * (w + head), pm),
            (Algorithm::Direct, Op::Broadcast) => prm.time_reg(0, 2, pm * w, true) + checks,
            (Algorithm::TwoPhase, Op::Broadcast | Op::AllReduce) => {
                prm.time_reg(1, 2, 2.0 * block, true) + checks
            }
            // Plus a first touch (`Params::fresh`) of the scratch: the combined block (reduce),
            // the block's prefixes (scan). The scratch comes from the pool now, so a loop pays
            // it once; the term stays as a stand-in for the local passes over the blocks that
            // the model lacks: without it the defaults pick two-phase from 64 KiB, where
            // messages measure up to 2x faster (docs/benchmarks.md, "Large collectives").
            (Algorithm::TwoPhase, Op::Reduce) => {
                prm.time_reg(1, 2, 2.0 * block, true) + w / p.max(1) as f64 * prm.fresh + checks
            }
            (Algorithm::TwoPhase, Op::ScanInclusive | Op::ScanExclusive) => {
                prm.time_reg(1, 2, 2.0 * block, true) + w * prm.fresh + checks
            }
            (Algorithm::Tree, Op::Broadcast | Op::ScanInclusive | Op::ScanExclusive) => chain(tree),
            // Reduce: to pid 0, and one more superstep when the root is another.
            (Algorithm::Tree, Op::Reduce) => chain(tree + 1),
            (Algorithm::Tree, Op::AllReduce) => chain(2 * tree),
            _ => return None,
        })
    }

    /// The algorithm to run: forced, or planned; only ones `op` has.
    fn choose<T>(&self, op: Op, p: usize, n: usize) -> Algorithm {
        if p == 1 {
            return Algorithm::Messages;
        }
        match self.algorithm {
            // The plan picks only algorithms `op` has.
            Algorithm::Auto => self.plan(op, p, n, size_of::<T>()).0,
            a => match self.predict_some(op, a, p, n, size_of::<T>()) {
                Some(_) => a,
                None => Algorithm::Messages,
            },
        }
    }

    // ------------------------------------------------------------------ broadcast

    /// Copy `buf` of process `root` into `buf` of every process. Every process passes a buffer
    /// of the same length. Cost: see the [module docs](self).
    ///
    /// ```
    /// use mbsp_algorithms::collectives::Collectives;
    /// let got = mbsp::run(3, |ctx| {
    ///     let mut v = if ctx.pid() == 1 { vec![7u32, 8, 9] } else { vec![0; 3] };
    ///     Collectives::default().broadcast(ctx, 1, &mut v)?;
    ///     Ok(v)
    /// })?;
    /// assert!(got.iter().all(|v| v == &[7, 8, 9]));
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn broadcast<T: Pod>(&self, ctx: &mut Ctx, root: usize, buf: &mut [T]) -> Result<()> {
        let op = Op::Broadcast;
        check_root(ctx, op, root)?;
        let algo = self.choose::<T>(op, ctx.nprocs(), buf.len());
        let mut call = Call::new::<T>(op, Some(root), Some(buf.len()));
        call.algo = algo.code();
        match algo {
            Algorithm::Direct | Algorithm::TwoPhase => {
                broadcast_registered(ctx, &call, root, buf, algo == Algorithm::TwoPhase)
            }
            Algorithm::Tree => tree::broadcast(ctx, &call, root, buf),
            _ => {
                let me = ctx.pid();
                call.send_all(ctx, |_| (me == root).then_some(&*buf))?;
                ctx.sync()?;
                let inbox = Inbox::take_all(ctx, &call)?;
                if me != root {
                    copy_into(buf, inbox.from(ctx, &call, root)?);
                }
                Ok(())
            }
        }
    }

    // ------------------------------------------------------------------ reductions

    /// Combine `buf` of all processes elementwise with `op` (in pid order) into `buf` of
    /// `root`; the other processes' buffers are left as they were. All buffers have the same
    /// length.
    ///
    /// ```
    /// use mbsp_algorithms::collectives::Collectives;
    /// let got = mbsp::run(4, |ctx| {
    ///     let mut v = [ctx.pid() as i64, 1];
    ///     Collectives::default().reduce(ctx, 0, &mut v, |a, b| a + b)?;
    ///     Ok(v)
    /// })?;
    /// assert_eq!(got[0], [6, 4]);
    /// assert_eq!(got[3], [3, 1]);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn reduce<T: Pod, F: Fn(T, T) -> T>(
        &self,
        ctx: &mut Ctx,
        root: usize,
        buf: &mut [T],
        op: F,
    ) -> Result<()> {
        check_root(ctx, Op::Reduce, root)?;
        self.reduction(ctx, Op::Reduce, Some(root), buf, None, op)
    }

    /// Combine `buf` of all processes elementwise with `op` (in pid order) into `buf` of every
    /// process. All buffers have the same length.
    ///
    /// ```
    /// use mbsp_algorithms::collectives::Collectives;
    /// let got = mbsp::run(3, |ctx| {
    ///     let mut v = [ctx.pid() as u32, 10];
    ///     Collectives::default().allreduce(ctx, &mut v, u32::max)?;
    ///     Ok(v)
    /// })?;
    /// assert!(got.iter().all(|v| *v == [2, 10]));
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn allreduce<T: Pod, F: Fn(T, T) -> T>(
        &self,
        ctx: &mut Ctx,
        buf: &mut [T],
        op: F,
    ) -> Result<()> {
        self.reduction(ctx, Op::AllReduce, None, buf, None, op)
    }

    /// Inclusive prefix over the processes: afterwards `buf` of pid `j` holds
    /// `x₀ ⊕ … ⊕ x_j` elementwise. All buffers have the same length.
    ///
    /// ```
    /// use mbsp_algorithms::collectives::Collectives;
    /// let got = mbsp::run(4, |ctx| {
    ///     let mut v = [1u64];
    ///     Collectives::default().scan_inclusive(ctx, &mut v, |a, b| a + b)?;
    ///     Ok(v[0])
    /// })?;
    /// assert_eq!(got, vec![1, 2, 3, 4]);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn scan_inclusive<T: Pod, F: Fn(T, T) -> T>(
        &self,
        ctx: &mut Ctx,
        buf: &mut [T],
        op: F,
    ) -> Result<()> {
        self.reduction(ctx, Op::ScanInclusive, None, buf, None, op)
    }

    /// Exclusive prefix over the processes: afterwards `buf` of pid `j` holds
    /// `x₀ ⊕ … ⊕ x_{j-1}` elementwise, and pid 0's holds `identity`. All buffers have the same
    /// length.
    ///
    /// ```
    /// use mbsp_algorithms::collectives::Collectives;
    /// // Where each process's block starts in the concatenation of all blocks.
    /// let got = mbsp::run(3, |ctx| {
    ///     let mut start = [10 * (ctx.pid() + 1)]; // block lengths 10, 20, 30
    ///     Collectives::default().scan_exclusive(ctx, &mut start, 0, |a, b| a + b)?;
    ///     Ok(start[0])
    /// })?;
    /// assert_eq!(got, vec![0, 10, 30]);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn scan_exclusive<T: Pod, F: Fn(T, T) -> T>(
        &self,
        ctx: &mut Ctx,
        buf: &mut [T],
        identity: T,
        op: F,
    ) -> Result<()> {
        self.reduction(ctx, Op::ScanExclusive, None, buf, Some(identity), op)
    }

    fn reduction<T: Pod, F: Fn(T, T) -> T>(
        &self,
        ctx: &mut Ctx,
        kind: Op,
        root: Option<usize>,
        buf: &mut [T],
        identity: Option<T>,
        op: F,
    ) -> Result<()> {
        let algo = self.choose::<T>(kind, ctx.nprocs(), buf.len());
        let mut call = Call::new::<T>(kind, root, Some(buf.len()));
        call.algo = algo.code();
        if algo == Algorithm::TwoPhase {
            return reduction_registered(ctx, &call, buf, identity, &op);
        }
        if algo == Algorithm::Tree {
            return tree::reduction(ctx, &call, root, buf, identity, &op);
        }
        let (me, p) = (ctx.pid(), ctx.nprocs());
        let r = root.unwrap_or(0);
        // Whose contribution this process needs (its own included where it counts), and who
        // needs this process's.
        let needs = |q: usize| match kind {
            Op::Reduce => me == r,
            Op::AllReduce => true,
            Op::ScanInclusive => q <= me,
            _ => q < me, // exclusive scan
        };
        let needed_by = |q: usize| match kind {
            Op::Reduce => q == r,
            Op::AllReduce => true,
            _ => q > me,
        };
        call.send_all(ctx, |q| needed_by(q).then_some(&*buf))?;
        ctx.sync()?;
        let inbox = Inbox::take_all(ctx, &call)?;
        if buf.len() <= SMALL_FOLD {
            return fold_small(ctx, &call, &inbox, buf, kind, identity, &op, &needs);
        }
        // The contributions this process folds, in pid order (its own where it counts).
        let mut parts: SmallVec<[Part<'_>; 8]> = SmallVec::new();
        for q in (0..p).filter(|&q| needs(q)) {
            parts.push(match q == me {
                true => Part::Own,
                false => Part::Bytes(inbox.from(ctx, &call, q)?),
            });
        }
        if parts.is_empty() {
            if let Some(id) = identity.filter(|_| kind == Op::ScanExclusive && me == 0) {
                buf.fill(id);
            }
            return Ok(());
        }
        // From its own contribution on, the fold runs in place in `buf` (at p = 1: no copy at
        // all), and so does the one contribution before it if there is only one (at p = 2).
        let own = parts.iter().position(|x| matches!(x, Part::Own));
        let rest = match (own, parts[0]) {
            (Some(0), _) => 1,
            (Some(1), Part::Bytes(b)) => {
                // The message's element comes first: `op(x0, own)`.
                fold_bytes(buf, b, &|own: T, x: T| op(x, own));
                2
            }
            _ => {
                fold_parts(buf, &parts, &op);
                parts.len()
            }
        };
        for part in &parts[rest..] {
            if let Part::Bytes(b) = part {
                fold_bytes(buf, b, &op);
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------------ gather / scatter

    /// Collect every process's `local` (lengths may differ) at `root`, in pid order: `Some` at
    /// the root, `None` elsewhere. Cost: one superstep, `h` = the total length at the root.
    ///
    /// ```
    /// use mbsp_algorithms::collectives::Collectives;
    /// let got = mbsp::run(3, |ctx| {
    ///     let mine = vec![ctx.pid() as u16; ctx.pid()];
    ///     Collectives::default().gather(ctx, 0, &mine)
    /// })?;
    /// let parts = got[0].as_ref().unwrap();
    /// assert_eq!(parts.part(2), &[2, 2]);
    /// assert_eq!(parts.as_slice(), &[1, 2, 2]);
    /// assert!(got[1].is_none());
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn gather<T: Pod>(
        &self,
        ctx: &mut Ctx,
        root: usize,
        local: &[T],
    ) -> Result<Option<Parts<T>>> {
        let op = Op::Gather;
        check_root(ctx, op, root)?;
        let call = Call::new::<T>(op, Some(root), None);
        let me = ctx.pid();
        call.send_all(ctx, |q| (q == root).then_some(local))?;
        ctx.sync()?;
        let inbox = Inbox::take_all(ctx, &call)?;
        if me != root {
            return Ok(None);
        }
        let sources: SmallVec<[Source<'_, T>; 8]> = (0..ctx.nprocs())
            .map(|q| {
                Ok(if q == me {
                    Source::Local(local)
                } else {
                    Source::Bytes(inbox.from(ctx, &call, q)?)
                })
            })
            .collect::<Result<_>>()?;
        Ok(Some(Parts::concat(ctx, &sources)?))
    }

    /// Every process's `local` (lengths may differ), in pid order, at every process.
    /// Cost: one superstep, `h = (p-1)·` the longest contribution (sent), the total (received).
    ///
    /// ```
    /// use mbsp_algorithms::collectives::Collectives;
    /// let got = mbsp::run(3, |ctx| {
    ///     let mine = vec![ctx.pid() as i8; ctx.pid() + 1];
    ///     Collectives::default().allgather(ctx, &mine)
    /// })?;
    /// assert_eq!(got[1].as_slice(), &[0, 1, 1, 2, 2, 2]);
    /// assert_eq!(got[0].offsets(), &[0, 1, 3, 6]);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn allgather<T: Pod>(&self, ctx: &mut Ctx, local: &[T]) -> Result<Parts<T>> {
        let call = Call::new::<T>(Op::AllGather, None, None);
        let (me, p) = (ctx.pid(), ctx.nprocs());
        call.send_all(ctx, |_| Some(local))?;
        ctx.sync()?;
        let inbox = Inbox::take_all(ctx, &call)?;
        let sources: SmallVec<[Source<'_, T>; 8]> = (0..p)
            .map(|q| {
                Ok(if q == me {
                    Source::Local(local)
                } else {
                    Source::Bytes(inbox.from(ctx, &call, q)?)
                })
            })
            .collect::<Result<_>>()?;
        Parts::concat(ctx, &sources)
    }

    /// Hand out the block distribution of `root`'s `data`: process `i` receives
    /// `data[block_range(data.len(), p, i)]`. Other processes pass an empty slice.
    /// Cost: one superstep, `h` = the root's data minus its own block.
    ///
    /// ```
    /// use mbsp_algorithms::collectives::Collectives;
    /// let got = mbsp::run(3, |ctx| {
    ///     let all: Vec<u32> = if ctx.pid() == 0 { (0..7).collect() } else { vec![] };
    ///     Collectives::default().scatter(ctx, 0, &all)
    /// })?;
    /// assert_eq!(got, vec![vec![0, 1, 2], vec![3, 4], vec![5, 6]]);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn scatter<T: Pod>(&self, ctx: &mut Ctx, root: usize, data: &[T]) -> Result<Vec<T>> {
        let p = ctx.nprocs();
        let counts: Vec<usize> = if ctx.pid() == root {
            (0..p)
                .map(|q| block_range(data.len(), p, q).len())
                .collect()
        } else {
            Vec::new()
        };
        self.scatterv(ctx, root, data, &counts)
    }

    /// Hand out consecutive pieces of `root`'s `data`: process `i` receives the `counts[i]`
    /// elements after the first `counts[..i]`. Only the root's `data` and `counts` are read
    /// (`counts` has one entry per process and sums to `data.len()`); others pass empty slices.
    /// Cost: one superstep, `h` = the data the root sends.
    ///
    /// ```
    /// use mbsp_algorithms::collectives::Collectives;
    /// let got = mbsp::run(3, |ctx| {
    ///     if ctx.pid() == 2 {
    ///         Collectives::default().scatterv(ctx, 2, &[1u8, 2, 3, 4], &[3, 0, 1])
    ///     } else {
    ///         Collectives::default().scatterv::<u8>(ctx, 2, &[], &[])
    ///     }
    /// })?;
    /// assert_eq!(got, vec![vec![1, 2, 3], vec![], vec![4]]);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn scatterv<T: Pod>(
        &self,
        ctx: &mut Ctx,
        root: usize,
        data: &[T],
        counts: &[usize],
    ) -> Result<Vec<T>> {
        let op = Op::Scatter;
        check_root(ctx, op, root)?;
        let call = Call::new::<T>(op, Some(root), None);
        let (me, p) = (ctx.pid(), ctx.nprocs());
        let mut own = Vec::new();
        let mut offsets = Vec::new();
        if me == root {
            let total = checked_sum(counts);
            if counts.len() != p || total != Some(data.len()) {
                return Err(ctx.misuse_error(
                    op.name(),
                    format!(
                        "root pid {root} passed {} counts summing to {} for {} processes and \
                         {} elements of data",
                        counts.len(),
                        show_sum(total),
                        p,
                        data.len()
                    ),
                ));
            }
            offsets = prefix(counts.iter().copied());
            own = result_vec(ctx, counts[me])?;
            Source::Local(&data[offsets[me]..offsets[me + 1]]).append_to(&mut own);
        }
        // The root's pieces; the others send their headers alone.
        call.send_all(ctx, |q| {
            (me == root).then(|| &data[offsets[q]..offsets[q + 1]])
        })?;
        ctx.sync()?;
        let inbox = Inbox::take_all(ctx, &call)?;
        if me != root {
            let piece = Source::Bytes(inbox.from(ctx, &call, root)?);
            own = result_vec(ctx, piece.len())?;
            piece.append_to(&mut own);
        }
        Ok(own)
    }

    // ------------------------------------------------------------------ all-to-all

    /// Total exchange with equal pieces: `send` holds `p` pieces of `k = send.len() / p`
    /// elements, piece `j` for pid `j`; the result holds piece `me` of every process, in pid
    /// order. Every process passes the same `k`. Cost: one superstep, `h = (p-1)·k` words.
    ///
    /// ```
    /// use mbsp_algorithms::collectives::Collectives;
    /// let got = mbsp::run(2, |ctx| {
    ///     let me = ctx.pid() as u8;
    ///     Collectives::default().alltoall(ctx, &[10 * me, 10 * me + 1])
    /// })?;
    /// assert_eq!(got, vec![vec![0, 10], vec![1, 11]]);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn alltoall<T: Pod>(&self, ctx: &mut Ctx, send: &[T]) -> Result<Vec<T>> {
        let p = ctx.nprocs();
        let op = Op::AllToAll;
        if !send.len().is_multiple_of(p) {
            return Err(ctx.misuse_error(
                op.name(),
                format!("{} elements do not split into {p} equal pieces", send.len()),
            ));
        }
        let k = send.len() / p;
        let call = Call::new::<T>(op, None, Some(k));
        // Equal pieces need no counts nor offsets (a small all-to-all allocates its result
        // alone).
        let parts = self.exchange(ctx, &call, |q| &send[q * k..(q + 1) * k], false)?;
        Ok(parts.data)
    }

    /// Total exchange with pieces of any size: piece `j` of `send` (the `counts[j]` elements
    /// after the first `counts[..j]`) goes to pid `j`; part `i` of the result is what pid `i`
    /// sent here. Cost: one superstep, `h` = the larger of the data sent and received.
    ///
    /// ```
    /// use mbsp_algorithms::collectives::Collectives;
    /// let got = mbsp::run(3, |ctx| {
    ///     // pid i sends i + 1 copies of its pid to every process.
    ///     let me = ctx.pid();
    ///     let send = vec![me as u32; 3 * (me + 1)];
    ///     Collectives::default().alltoallv(ctx, &send, &[me + 1; 3])
    /// })?;
    /// assert_eq!(got[0].as_slice(), &[0, 1, 1, 2, 2, 2]);
    /// assert_eq!(got[1].part(2), &[2, 2, 2]);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn alltoallv<T: Pod>(
        &self,
        ctx: &mut Ctx,
        send: &[T],
        counts: &[usize],
    ) -> Result<Parts<T>> {
        let call = Call::new::<T>(Op::AllToAllV, None, None);
        let p = ctx.nprocs();
        let total = checked_sum(counts);
        if counts.len() != p || total != Some(send.len()) {
            return Err(ctx.misuse_error(
                call.op.name(),
                format!(
                    "{} counts summing to {} for {p} processes and {} elements to send",
                    counts.len(),
                    show_sum(total),
                    send.len()
                ),
            ));
        }
        let offsets = prefix(counts.iter().copied());
        self.exchange(ctx, &call, |q| &send[offsets[q]..offsets[q + 1]], true)
    }

    /// Send `piece(q)` to every other pid `q`, sync, and concatenate what each sent here in pid
    /// order (this process's own piece in its place), with the parts' offsets if `offsets`.
    fn exchange<'s, T: Pod>(
        &self,
        ctx: &mut Ctx,
        call: &Call,
        piece: impl Fn(usize) -> &'s [T],
        offsets: bool,
    ) -> Result<Parts<T>> {
        let (me, p) = (ctx.pid(), ctx.nprocs());
        call.send_all(ctx, |q| Some(piece(q)))?;
        ctx.sync()?;
        let inbox = Inbox::take_all(ctx, call)?;
        let sources: SmallVec<[Source<'_, T>; 8]> = (0..p)
            .map(|q| {
                Ok(if q == me {
                    Source::Local(piece(q))
                } else {
                    Source::Bytes(inbox.from(ctx, call, q)?)
                })
            })
            .collect::<Result<_>>()?;
        match offsets {
            true => Parts::concat(ctx, &sources),
            false => Parts::concat_data(ctx, &sources),
        }
    }
}

// ---------------------------------------------------------------------- free functions

/// [`Collectives::broadcast`] with the automatic choice of algorithm.
pub fn broadcast<T: Pod>(ctx: &mut Ctx, root: usize, buf: &mut [T]) -> Result<()> {
    Collectives::default().broadcast(ctx, root, buf)
}

/// [`Collectives::reduce`] with the automatic choice of algorithm.
pub fn reduce<T: Pod, F: Fn(T, T) -> T>(
    ctx: &mut Ctx,
    root: usize,
    buf: &mut [T],
    op: F,
) -> Result<()> {
    Collectives::default().reduce(ctx, root, buf, op)
}

/// [`Collectives::allreduce`] with the automatic choice of algorithm.
pub fn allreduce<T: Pod, F: Fn(T, T) -> T>(ctx: &mut Ctx, buf: &mut [T], op: F) -> Result<()> {
    Collectives::default().allreduce(ctx, buf, op)
}

/// All-reduce of one value: `x` of every process combined with `op` in pid order.
///
/// ```
/// let m = mbsp::run(3, |ctx| {
///     mbsp_algorithms::collectives::allreduce_value(ctx, ctx.pid() as f64, f64::max)
/// })?;
/// assert_eq!(m, vec![2.0; 3]);
/// # Ok::<(), mbsp::Error>(())
/// ```
pub fn allreduce_value<T: Pod, F: Fn(T, T) -> T>(ctx: &mut Ctx, x: T, op: F) -> Result<T> {
    let mut b = [x];
    Collectives::default().allreduce(ctx, &mut b, op)?;
    Ok(b[0])
}

/// [`Collectives::scan_inclusive`] with the automatic choice of algorithm.
pub fn scan_inclusive<T: Pod, F: Fn(T, T) -> T>(ctx: &mut Ctx, buf: &mut [T], op: F) -> Result<()> {
    Collectives::default().scan_inclusive(ctx, buf, op)
}

/// [`Collectives::scan_exclusive`] with the automatic choice of algorithm.
pub fn scan_exclusive<T: Pod, F: Fn(T, T) -> T>(
    ctx: &mut Ctx,
    buf: &mut [T],
    identity: T,
    op: F,
) -> Result<()> {
    Collectives::default().scan_exclusive(ctx, buf, identity, op)
}

/// [`Collectives::gather`].
pub fn gather<T: Pod>(ctx: &mut Ctx, root: usize, local: &[T]) -> Result<Option<Parts<T>>> {
    Collectives::default().gather(ctx, root, local)
}

/// [`Collectives::allgather`].
pub fn allgather<T: Pod>(ctx: &mut Ctx, local: &[T]) -> Result<Parts<T>> {
    Collectives::default().allgather(ctx, local)
}

/// [`Collectives::scatter`].
pub fn scatter<T: Pod>(ctx: &mut Ctx, root: usize, data: &[T]) -> Result<Vec<T>> {
    Collectives::default().scatter(ctx, root, data)
}

/// [`Collectives::scatterv`].
pub fn scatterv<T: Pod>(
    ctx: &mut Ctx,
    root: usize,
    data: &[T],
    counts: &[usize],
) -> Result<Vec<T>> {
    Collectives::default().scatterv(ctx, root, data, counts)
}

/// [`Collectives::alltoall`].
pub fn alltoall<T: Pod>(ctx: &mut Ctx, send: &[T]) -> Result<Vec<T>> {
    Collectives::default().alltoall(ctx, send)
}

/// [`Collectives::alltoallv`].
pub fn alltoallv<T: Pod>(ctx: &mut Ctx, send: &[T], counts: &[usize]) -> Result<Parts<T>> {
    Collectives::default().alltoallv(ctx, send, counts)
}

// ---------------------------------------------------------------------- results

/// Per-process pieces in pid order, stored as one vector (`part(i)` is pid `i`'s piece); give
/// a large one back with `ctx.recycle(parts.into_vec())` for a later collective to reuse
/// (module docs, "Memory").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parts<T> {
    data: Vec<T>,
    offsets: Vec<usize>,
}

impl<T> Parts<T> {
    /// The piece of pid `i`.
    ///
    /// # Panics
    /// If `i` is not a pid of the run.
    pub fn part(&self, i: usize) -> &[T] {
        &self.data[self.offsets[i]..self.offsets[i + 1]]
    }

    /// The number of pieces (processes).
    pub fn parts(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Where each piece starts in [`as_slice`](Self::as_slice), plus the total length at the end.
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }

    /// All pieces, concatenated in pid order.
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }

    /// All pieces, concatenated in pid order.
    pub fn into_vec(self) -> Vec<T> {
        self.data
    }
}

impl<T: Pod> Parts<T> {
    /// The pieces in pid order, in a vector from the process's pool if it is large
    /// ([`result_vec`]).
    fn concat(ctx: &Ctx, sources: &[Source<'_, T>]) -> Result<Parts<T>> {
        let offsets = prefix(sources.iter().map(Source::len));
        let data = Self::assemble(ctx, sources, offsets[sources.len()])?;
        Ok(Parts { data, offsets })
    }

    /// [`concat`](Self::concat) without the offsets (an all-to-all returns the data alone).
    fn concat_data(ctx: &Ctx, sources: &[Source<'_, T>]) -> Result<Parts<T>> {
        // The pieces lie in memory (the caller's, a message's): their lengths sum in range.
        let total = sources
            .iter()
            .map(Source::len)
            .fold(0, usize::saturating_add);
        let data = Self::assemble(ctx, sources, total)?;
        Ok(Parts {
            data,
            offsets: Vec::new(),
        })
    }

    /// The `total` elements of the pieces in pid order, in a vector from the process's pool if
    /// it is large ([`result_vec`]).
    fn assemble(ctx: &Ctx, sources: &[Source<'_, T>], total: usize) -> Result<Vec<T>> {
        let mut data = result_vec(ctx, total)?;
        let whole = total.saturating_mul(size_of::<T>());
        let typed = || {
            sources
                .iter()
                .map(Source::typed)
                .collect::<Option<Vec<_>>>()
        };
        match (whole >= mbsp::copies::STREAM_FROM).then(typed).flatten() {
            // Past the caches when the result is larger than they are.
            Some(pieces) => mbsp::copies::append_all(&mut data, &pieces),
            None => sources.iter().for_each(|s| s.append_to(&mut data)),
        }
        Ok(data)
    }
}

enum Source<'a, T> {
    Local(&'a [T]),
    Bytes(&'a [u8]),
}

impl<T: Pod> Source<'_, T> {
    fn len(&self) -> usize {
        match self {
            Source::Local(x) => x.len(),
            Source::Bytes(b) => b.len() / size_of::<T>(),
        }
    }

    /// The piece as elements, if its bytes are aligned for `T`.
    fn typed(&self) -> Option<&[T]> {
        match self {
            Source::Local(x) => Some(x),
            Source::Bytes(b) => bytemuck::try_cast_slice(b).ok(),
        }
    }

    /// Append the piece's elements to `out` (a message's bytes need not be aligned for `T`).
    fn append_to(&self, out: &mut Vec<T>) {
        // Past the caches when the piece alone is larger than they are.
        let append = |out: &mut Vec<T>, x: &[T]| match size_of_val(x) >= mbsp::copies::STREAM_FROM {
            true => mbsp::copies::append_all(out, &[x]),
            false => out.extend_from_slice(x),
        };
        match self {
            Source::Local(x) => append(out, x),
            Source::Bytes(b) => match bytemuck::try_cast_slice::<u8, T>(b) {
                Ok(x) => append(out, x),
                Err(_) => out.extend(
                    b.chunks_exact(size_of::<T>())
                        .map(bytemuck::pod_read_unaligned::<T>),
                ),
            },
        }
    }
}

/// From this many bytes on, a result (or an accumulator) comes from the process's pool: below,
/// the allocator hands out blocks freed a moment ago faster than the pool, and without page
/// faults (glibc maps fresh pages only from 128 KiB).
const POOL_FROM: usize = 64 << 10;

/// An empty vector with room for `n` elements: from the pool if they take at least
/// [`POOL_FROM`] bytes, else from the allocator.
fn result_vec<T: Pod>(ctx: &Ctx, n: usize) -> Result<Vec<T>> {
    if n.saturating_mul(size_of::<T>()) >= POOL_FROM {
        ctx.buffer(n)
    } else {
        Ok(Vec::with_capacity(n))
    }
}

/// Give `v` to the process's pool if it holds [`POOL_FROM`] bytes or more (where
/// [`result_vec`] would take it from); free it otherwise.
fn give_back<T: Pod>(ctx: &Ctx, v: Vec<T>) {
    if v.capacity().saturating_mul(size_of::<T>()) >= POOL_FROM {
        ctx.recycle(v);
    }
}

/// Reductions of at most this many elements fold through an accumulator on the stack.
const SMALL_FOLD: usize = 4;

/// A reduction by messages of at most [`SMALL_FOLD`] elements: contributions before this
/// process's own are folded into an accumulator on the stack; from its own on, the fold runs in
/// place in `buf`. Without the bookkeeping of [`fold_parts`], which a one-word reduction in a
/// loop would pay on every call.
#[allow(clippy::too_many_arguments)]
fn fold_small<T: Pod, F: Fn(T, T) -> T>(
    ctx: &Ctx,
    call: &Call,
    inbox: &Inbox<'_>,
    buf: &mut [T],
    kind: Op,
    identity: Option<T>,
    op: &F,
    needs: &dyn Fn(usize) -> bool,
) -> Result<()> {
    let (me, p) = (ctx.pid(), ctx.nprocs());
    let mut acc: SmallVec<[T; SMALL_FOLD]> = SmallVec::new();
    let (mut started, mut in_buf) = (false, false);
    for q in (0..p).filter(|&q| needs(q)) {
        if q == me {
            if started {
                for (b, &a) in buf.iter_mut().zip(&acc) {
                    *b = op(a, *b);
                }
            }
            in_buf = true;
        } else {
            let bytes = inbox.from(ctx, call, q)?;
            if in_buf {
                fold_bytes(buf, bytes, op);
            } else if !started {
                let each = bytes.chunks_exact(size_of::<T>());
                acc.extend(each.map(bytemuck::pod_read_unaligned));
            } else {
                fold_bytes(&mut acc, bytes, op);
            }
        }
        started = true;
    }
    if !in_buf {
        if started {
            let k = acc.len().min(buf.len());
            buf[..k].copy_from_slice(&acc[..k]);
        } else if let Some(id) = identity.filter(|_| kind == Op::ScanExclusive && me == 0) {
            buf.fill(id);
        }
    }
    Ok(())
}

/// One contribution to a fold: this process's own buffer, or a message's bytes.
#[derive(Clone, Copy)]
enum Part<'a> {
    Own,
    Bytes(&'a [u8]),
}

/// `buf = parts[0] ⊕ parts[1] ⊕ …`, elementwise, folded left in the order of `parts`
/// (`Part::Own` is `buf` as it was), chunk by chunk through a buffer that stays in L1: one
/// pass over `buf` and over each message. Folding into an accumulator as long as `buf` and
/// copying it back would read and write every element twice more, which beyond the caches
/// doubles the time.
fn fold_parts<'a, T: Pod, F: Fn(T, T) -> T>(buf: &mut [T], parts: &[Part<'a>], op: &F) {
    let size = size_of::<T>();
    let chunk = (CHUNK_BYTES / size.max(1)).clamp(1, buf.len().max(1));
    // One allocation of at most `CHUNK_BYTES` (reductions of a few elements fold on the stack,
    // in `fold_small`).
    let mut acc: Vec<T> = Vec::with_capacity(chunk);
    for (c, out) in buf.chunks_mut(chunk).enumerate() {
        // The bytes of this chunk in a message (shorter if the message is: the fold then
        // covers what it holds, as `fold_bytes` does).
        let (from, len) = (c * chunk * size, size_of_val(out));
        let piece = |b: &'a [u8]| b.get(from..).map_or(&[][..], |b| &b[..len.min(b.len())]);
        acc.clear();
        for (i, part) in parts.iter().enumerate() {
            match (i, part) {
                (0, Part::Own) => acc.extend_from_slice(out),
                (0, Part::Bytes(b)) => {
                    let each = piece(b).chunks_exact(size);
                    acc.extend(each.map(bytemuck::pod_read_unaligned::<T>));
                    // A short message: the rest of the chunk keeps this process's values.
                    acc.extend_from_slice(&out[acc.len().min(out.len())..]);
                }
                (_, Part::Own) => {
                    for (a, &b) in acc.iter_mut().zip(out.iter()) {
                        *a = op(*a, b);
                    }
                }
                (_, Part::Bytes(b)) => fold_bytes(&mut acc, piece(b), op),
            }
        }
        out.copy_from_slice(&acc);
    }
}

/// `dst[i] = op(dst[i], x[i])` for the elements `x` of a message's bytes (aligned for `T` or
/// not).
fn fold_bytes<T: Pod, F: Fn(T, T) -> T>(dst: &mut [T], bytes: &[u8], op: &F) {
    match bytemuck::try_cast_slice::<u8, T>(bytes) {
        Ok(x) => {
            for (d, &x) in dst.iter_mut().zip(x) {
                *d = op(*d, x);
            }
        }
        Err(_) => {
            for (d, x) in dst.iter_mut().zip(bytes.chunks_exact(size_of::<T>())) {
                *d = op(*d, bytemuck::pod_read_unaligned(x));
            }
        }
    }
}

/// The sum of `counts`, or `None` if it overflows.
fn checked_sum(counts: &[usize]) -> Option<usize> {
    counts.iter().try_fold(0usize, |a, &c| a.checked_add(c))
}

fn show_sum(total: Option<usize>) -> String {
    total.map_or_else(|| "more than usize::MAX".into(), |t| t.to_string())
}

/// Where each piece starts, and the total at the end (`counts` sum without overflow: checked
/// by the callers, or the lengths of slices held in memory at once).
fn prefix(counts: impl ExactSizeIterator<Item = usize>) -> Vec<usize> {
    let mut out = Vec::with_capacity(counts.len() + 1);
    let mut at = 0;
    out.push(0);
    for c in counts {
        at += c;
        out.push(at);
    }
    out
}

fn check_root(ctx: &Ctx, op: Op, root: usize) -> Result<()> {
    if root >= ctx.nprocs() {
        return Err(ctx.misuse_error(
            op.name(),
            format!(
                "root {root} is not a pid of this run of {} processes",
                ctx.nprocs()
            ),
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------- registered algorithms

/// Superstep 1 of the registered algorithms: every process sends its call's header to every
/// other; after the sync, check them all (the registrations made in the same superstep are then
/// in effect).
fn exchange_headers(ctx: &mut Ctx, call: &Call) -> Result<()> {
    call.send_all::<u8>(ctx, |_| None)?;
    ctx.sync()?;
    Inbox::take_all(ctx, call).map(drop)
}

/// Broadcast by direct gets: after registering, every process fetches the whole buffer from the
/// root (`two_phase = false`), or its own block from the root and then every other block from
/// that block's owner (`two_phase = true`).
fn broadcast_registered<T: Pod>(
    ctx: &mut Ctx,
    call: &Call,
    root: usize,
    buf: &mut [T],
    two_phase: bool,
) -> Result<()> {
    let (me, p, n) = (ctx.pid(), ctx.nprocs(), buf.len());
    ctx.lending(|ctx, lent| {
        let ex = Exposed::push(ctx, lent, buf)?;
        exchange_headers(ctx, call)?;
        if !two_phase {
            if me != root {
                // SAFETY: superstep 2: nobody writes the root's buffer; this process writes its
                // own, which nobody reads (everyone reads from the root only).
                unsafe { ex.get_from(ctx, root, 0, ex.range_mut(0..n))? };
            }
        } else {
            let mine = block_range(n, p, me);
            if me != root {
                // SAFETY: superstep 2: everyone reads only the root's buffer, which nobody writes;
                // this process writes only its own block of its own buffer.
                unsafe { ex.get_from(ctx, root, mine.start, ex.range_mut(mine))? };
            }
            ctx.sync()?;
            for q in (0..p).filter(|&q| q != me && me != root) {
                let r = block_range(n, p, q);
                // SAFETY: superstep 3: pid q's block q is final (the root's whole buffer is) and
                // nobody writes it; this process writes blocks other than its own, which others
                // do not read (they read block `me` of this buffer, or the root's).
                unsafe { ex.get_from(ctx, q, r.start, ex.range_mut(r))? };
            }
        }
        ex.pop(ctx)?;
        ctx.sync()
    })
}

/// Reduce, all-reduce and scans by two phases of direct gets. Phase 1: process `i` combines
/// block `i` of every process's buffer, in pid order, chunk by chunk. Phase 2: reduce — the root
/// fetches every combined block; all-reduce — everyone fetches every other combined block; scan —
/// process `j` fetches, from every `i`, block `i`'s prefix up to `j`. What a process computes
/// for itself (the root's combined block, its own prefix of its block) goes straight into its
/// buffer; only what others fetch goes through the scratch.
fn reduction_registered<T: Pod, F: Fn(T, T) -> T>(
    ctx: &mut Ctx,
    call: &Call,
    buf: &mut [T],
    identity: Option<T>,
    op: &F,
) -> Result<()> {
    let (me, p, n) = (ctx.pid(), ctx.nprocs(), buf.len());
    let mine = block_range(n, p, me);
    let kind = call.op;
    let root = call.root as usize;
    // Scratch: reduce — the combined block, at the processes other than the root; scan — the
    // block's prefixes for the p - 1 other processes; all-reduce combines into the buffer.
    let scratch_len = match kind {
        Op::Reduce if me != root => mine.len(),
        Op::ScanInclusive | Op::ScanExclusive => (p - 1) * mine.len(),
        _ => 0,
    };
    // From the pool and back to it: a loop of large scans takes no fresh memory (whose page
    // faults would cost more than the scan's copies). Not zeroed: phase 1 writes all of it
    // (every slot of every chunk of this process's block) before anyone reads it in phase 2.
    let mut scratch = result_vec::<T>(ctx, scratch_len)?;
    // A panicking operator unwinds out of the scope only after every process has stopped
    // reading `buf` and `scratch`.
    let done = ctx.lending(|ctx, lent| {
        let ex = Exposed::push(ctx, lent, buf)?;
        let sx = Exposed::push_spare(ctx, lent, &mut scratch, scratch_len)?;
        exchange_headers(ctx, call)?;
        let two = TwoPhase {
            ex: &ex,
            sx: &sx,
            kind,
            root,
            me,
            p,
            n,
        };
        two.combine(ctx, identity, op)?;
        ctx.sync()?;
        two.fetch(ctx)?;
        sx.pop(ctx)?;
        ex.pop(ctx)?;
        ctx.sync()
    });
    give_back(ctx, scratch);
    done
}

/// One process's view of a registered reduction: its buffer and scratch, exposed.
struct TwoPhase<'x, 'a, T> {
    ex: &'x Exposed<'a, T>,
    sx: &'x Exposed<'a, T>,
    kind: Op,
    root: usize,
    me: usize,
    p: usize,
    n: usize,
}

impl<T: Pod> TwoPhase<'_, '_, T> {
    /// Where process `owner`'s scratch keeps the prefix of its block for process `q != owner`.
    fn slot(q: usize, owner: usize) -> usize {
        if q > owner { q - 1 } else { q }
    }

    /// Phase 1. Others read block `q != me` of this buffer; this process reads block `me` of
    /// every buffer, and writes only that block of its own buffer (each chunk after its last
    /// read of it) and its scratch, which others read in phase 2 only.
    fn combine<F: Fn(T, T) -> T>(&self, ctx: &Ctx, identity: Option<T>, op: &F) -> Result<()> {
        let (ex, me, kind) = (self.ex, self.me, self.kind);
        let mine = block_range(self.n, self.p, me);
        let chunk = (CHUNK_BYTES / size_of::<T>().max(1)).max(1);
        let mut acc = vec![T::zeroed(); chunk.min(mine.len())];
        let mut tmp = acc.clone();
        let mut at = mine.start;
        while at < mine.end {
            let c = chunk.min(mine.end - at);
            let (acc, tmp) = (&mut acc[..c], &mut tmp[..c]);
            for q in 0..self.p {
                let x: &[T] = if q != me {
                    // SAFETY: nobody writes block `me` of pid q's buffer in phase 1; `tmp` is
                    // private.
                    unsafe { ex.get_from(ctx, q, at, tmp)? };
                    tmp
                } else if kind == Op::ScanExclusive {
                    // The chunk is about to be overwritten with the prefix before it.
                    // SAFETY: nobody else reads or writes this block in phase 1.
                    tmp.copy_from_slice(unsafe { ex.range(at..at + c) });
                    tmp
                } else {
                    // SAFETY: as above; this process writes it below, after this last read.
                    unsafe { ex.range(at..at + c) }
                };
                if kind == Op::ScanExclusive {
                    let id = identity.expect("exclusive scan has an identity");
                    self.keep(q, at, c, if q == 0 { Err(id) } else { Ok(acc) });
                }
                if q == 0 {
                    acc.copy_from_slice(x);
                } else {
                    for (a, &b) in acc.iter_mut().zip(x.iter()) {
                        *a = op(*a, b);
                    }
                }
                if kind == Op::ScanInclusive {
                    self.keep(q, at, c, Ok(acc));
                }
            }
            match kind {
                Op::AllReduce => self.keep(me, at, c, Ok(acc)),
                // The root keeps its block in its buffer; the others in their scratch.
                Op::Reduce => self.keep(self.root, at, c, Ok(acc)),
                _ => {}
            }
            at += c;
        }
        Ok(())
    }

    /// Keep the `c` elements from `at` of block `me` combined for process `q` (a prefix, or
    /// `Err(identity)` for all of them): in this process's own buffer if `q == me` (its final
    /// value), else in the scratch, where `q` (or the root) fetches it in phase 2. For a
    /// reduce the scratch holds one combined block: the root (`q != me`) names it.
    fn keep(&self, q: usize, at: usize, c: usize, what: std::result::Result<&[T], T>) {
        let mine = block_range(self.n, self.p, self.me);
        let (to, from) = if q == self.me {
            (self.ex, at)
        } else {
            let slot = if self.kind == Op::Reduce {
                0
            } else {
                Self::slot(q, self.me)
            };
            (self.sx, slot * mine.len() + (at - mine.start))
        };
        // SAFETY: block `me` of this buffer is read by nobody else in phase 1, and this
        // process no longer reads this chunk of it (`combine`); the scratch is read by others
        // in phase 2 only; no slice of either is alive.
        unsafe {
            match what {
                Ok(prefix) => to.write(from, prefix),
                Err(id) => to.fill(from..from + c, id),
            }
        }
    }

    /// Phase 2. Reads go to the scratch (reduce, scan) or to owners' own blocks (all-reduce),
    /// which nobody writes now; each process writes only its own buffer, outside the blocks
    /// others read.
    fn fetch(&self, ctx: &Ctx) -> Result<()> {
        let (ex, me) = (self.ex, self.me);
        for q in (0..self.p).filter(|&q| q != me) {
            let r = block_range(self.n, self.p, q);
            if r.is_empty() {
                continue;
            }
            // SAFETY: (all three) pid q's scratch, and block q of its buffer, are final and
            // read-only now; this process writes block q != me of its own buffer, which others
            // do not read in phase 2 (they read the scratch, or block `me` of this buffer).
            unsafe {
                match self.kind {
                    Op::Reduce if me == self.root => {
                        self.sx.get_from(ctx, q, 0, ex.range_mut(r))?
                    }
                    Op::AllReduce => ex.get_from(ctx, q, r.start, ex.range_mut(r))?,
                    Op::ScanInclusive | Op::ScanExclusive => {
                        let at = Self::slot(me, q) * r.len();
                        self.sx.get_from(ctx, q, at, ex.range_mut(r))?
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }
}
