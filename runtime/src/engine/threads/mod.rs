//! The thread engine: every process of the run is a thread of this address space, and every
//! process reads the others' shared state ([`RunShared`](crate::ctx::RunShared)) directly.
//! This is the engine of every run started by [`run`](fn@crate::run) and [`Run`](crate::Run), and
//! of every nested run.
//!
//! ## One superstep's sync
//!
//! ```text
//! sync, superstep k, parity q = k mod 2, outbox slot o = k mod S (S = 2, or 3 for more
//! processes than cores: `ctx::RunShared::slot`)
//!   (during the superstep: puts and messages were copied into outboxes[o]; the data of a put
//!    of 256 KiB or more into the sender's one bulk area per destination instead, when free)
//!   copy hpsend payloads into outboxes[o]; publish registration/tag-size requests (coll[q])
//!   barrier 1 ........ combines flags: COMM, GETS, REGS, TAGS, and whether processes ended
//!   nothing anywhere? -> done (one barrier)
//!   REGS|TAGS: compare own requests with pid 0's; apply own registration changes
//!   GETS: read the sources of own gets into the get buffer
//!   GETS|REGS: barrier 2 (all reads done, all tables updated)
//!   COMM: for every sender that wrote to us: copy its puts into our memory, queue its messages
//!     (a large put's copy shared with senders that help: `share.rs`)
//!   OUTBOX: help the destinations of our large puts with their copies until they are done
//!   write own gets' data; count this sync as done
//! ```
//! Every write lands in the writer's own memory, so no third barrier is needed: a process
//! leaving the sync early can only touch its own memory and its next slot's outboxes.
//!
//! A superstep in which nobody communicated or changed registrations costs one barrier; puts
//! and messages of a few words ride in the barrier's own lines (`ride.rs`).
//!
//! ## Failure
//!
//! A process that fails (misuse, abort, panic, an error returned) marks the run's tree failed;
//! every process stops at its next primitive, or at once when it waits in a barrier. A failed
//! sync (and [`Engine::stop`]) returns only once every process of the run has marked itself
//! stopped in this run ([`Ctx::quiesce`]; each process stamps its own line with the run's
//! number): no process is then still reading or writing this one's memory.
//!
//! ## Immediate primitives
//!
//! `hpput`, `hpget` and `direct_get` copy at the call, once the target process has completed
//! as many syncs as the caller (so that its memory holds what earlier supersteps wrote).
//!
//! ## Trust
//!
//! Every process is the same program in one address space: a receiver writes where a
//! sender's put record says, checked by the sender against the receiver's table.
//!
//! ## Modules
//!
//! `state` (what the engine keeps per run and per process), `barrier` (the barrier, whose
//! lines carry small puts and messages: `ride`, `riders`), `bulk` (where large puts wait for
//! their receivers), `share` (large deliveries shared with the senders that wait for them),
//! `inbox` and `lane` (how lazy syncs announce), `sync` (the full sync above), `lazy` and
//! `lane_sync` (syncs with declared counts).

pub(crate) mod barrier;
pub(crate) mod bulk;
pub(crate) mod inbox;
pub(crate) mod lane;
mod lane_sync;
mod lazy;
pub(crate) mod ride;
pub(crate) mod riders;
pub(crate) mod share;
pub(crate) mod state;
mod sync;

use crate::ctx::Ctx;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::outbox::{Kind, Record};
use crate::wait::Sleep;
use bytemuck::Pod;
use riders::NO_RIDE;

/// The thread engine (module documentation); its state is in `state.rs`.
pub(crate) struct Threads;

impl Engine for Threads {
    #[inline(always)]
    fn sync(ctx: &mut Ctx, ending: bool) -> Result<()> {
        ctx.engine_fault();
        if ctx.run.tree.is_aborted() {
            return Err(ctx.refused_sync(if ending { "end" } else { "sync" }));
        }
        ctx.superstep_end(ending)
    }

    fn stop(ctx: &mut Ctx) -> Option<Error> {
        ctx.quiesce();
        None
    }

    /// A small put to a process that alone reads one of this process's barrier lines rides
    /// in that line (`barrier.rs`) when the record fits; a large one is a bulk put where it can
    /// be (`bulk.rs`).
    #[inline(always)]
    fn put(ctx: &Ctx, pid: usize, dst: *mut u8, src: &[u8]) -> Option<Result<()>> {
        if src.len() >= bulk::BULK_FROM {
            return ctx.large_put(pid, dst, src);
        }
        let round = ctx.run.engine.threads().riders.round(ctx.pid, pid);
        let rides = &ctx.engine.threads().rides;
        (round != NO_RIDE && rides.borrow_mut()[round as usize].put(dst, src)).then_some(Ok(()))
    }

    /// A small message to a process that alone reads one of this process's barrier lines
    /// rides in that line, as a small put does, while the ride is open to messages
    /// (`ride.rs`).
    #[inline(always)]
    fn send(ctx: &Ctx, pid: usize, tag: &[u8], payload: &[u8]) -> bool {
        let round = ctx.run.engine.threads().riders.round(ctx.pid, pid);
        if round == NO_RIDE {
            return false;
        }
        let mut rides = ctx.engine.threads().rides.borrow_mut();
        let ride = &mut rides[round as usize];
        if ride.send(tag, payload) {
            return true;
        }
        ride.close();
        false
    }

    #[inline]
    fn to_outbox(ctx: &Ctx, pid: usize) {
        let round = ctx.run.engine.threads().riders.round(ctx.pid, pid);
        if round != NO_RIDE {
            ctx.close_ride(round);
        }
    }

    /// The buffer itself is handed over: one address space.
    #[inline]
    fn send_owned<T: Pod>(ctx: &Ctx, pid: usize, tag: &[u8], payload: Vec<T>) -> Option<()> {
        ctx.with_outbox(pid, |ob| ob.hand_over(tag, payload)).ok()
    }

    #[inline]
    unsafe fn hpput(ctx: &Ctx, pid: usize, src: *const u8, dst: *mut u8, len: usize) -> Result<()> {
        if len > 0 {
            ctx.wait_settled("hpput", pid)?;
            // SAFETY: `dst` is in bounds of a live registration; exclusivity is the caller's
            // promise. The copy tolerates overlap (a process may hpput into itself).
            unsafe { crate::stream::copy_may_overlap(src, dst, len) };
        }
        Ok(())
    }

    #[inline]
    unsafe fn get_now(
        ctx: &Ctx,
        op: &'static str,
        pid: usize,
        src: *const u8,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        if len > 0 {
            ctx.wait_settled(op, pid)?;
            // SAFETY: the source is in bounds of a live registration and not written during
            // this superstep (caller's promise); `dst` is valid for `len` bytes.
            unsafe { crate::stream::copy_may_overlap(src, dst, len) };
        }
        Ok(())
    }

    /// Nothing to tell the others: a failure reached them through the run's tree.
    fn leave(_: &mut Ctx, _: Option<&Error>) -> Option<Error> {
        None
    }

    /// The processes share memory: nothing to gather.
    #[cold]
    #[inline(never)]
    fn all_gather(_: &mut Ctx, _: &[u64]) -> Option<Vec<Vec<u64>>> {
        None
    }
}

impl Ctx {
    /// Close this process's ride of round `round` to messages ([`Ride::close`]).
    #[inline]
    pub(super) fn close_ride(&self, round: u8) {
        self.engine.threads().rides.borrow_mut()[round as usize].close();
    }

    /// The message record at word `off` of what rode in this process's line of round `round`
    /// at the last barrier: a queued message is there (`sync.rs`, `deliver_rides`).
    #[inline]
    pub(crate) fn rode_record(&self, round: u8, off: usize) -> Record<'_> {
        let (tag, payload, next) = self.engine.threads().rode[round as usize].message(off);
        Record {
            tag,
            payload,
            next,
            kind: Kind::Plain,
        }
    }
}

impl Ctx {
    /// A put of at least `BULK_FROM` bytes: a bulk put where it can be (else the outbox's:
    /// `None`), noted if its receiver may share its copy with us (`share.rs`).
    #[inline(never)]
    fn large_put(&self, pid: usize, dst: *mut u8, src: &[u8]) -> Option<Result<()>> {
        if src.len() >= crate::outbox::LARGE && pid != self.pid {
            self.engine.threads().sent_large.set(true);
        }
        self.bulk_put(pid, dst, src).then_some(Ok(()))
    }

    /// Queue a bulk put to `pid` if this process's bulk area for `pid` is free (`bulk.rs`):
    /// the data goes into the area, a record pointing to it into this superstep's outbox.
    /// Returns false, having queued nothing, where `pid` may still read the area or the memory
    /// cannot be allocated; the put then goes into the outbox as any other (which says what
    /// memory is missing, if any). A sender waits here only for a receiver that is finishing
    /// the full sync both have passed the barriers of, never for one after a lazy sync, which
    /// keeps the slack the outbox sets give it.
    fn bulk_put(&self, pid: usize, dst: *mut u8, src: &[u8]) -> bool {
        let areas = &self.run.engine.threads().peers[self.pid].bulk;
        let done = &self.run.procs[pid].done;
        // SAFETY: this process owns `areas`.
        let need = unsafe { areas.free_after(pid, self.step) };
        if !self.prev_lazy && done.since(self.base) < need {
            // After a full sync, `pid` is past its barriers, delivering what it received: it
            // completes the sync soon, and the area stays where the caches keep it. (After a
            // lazy one, `pid` may not even have reached its sync: the put goes to the outbox.)
            let _ = crate::wait::wait_until(
                self.run.policy,
                Sleep::Naps,
                || (done.since(self.base) >= need).then_some(()),
                || self.run.tree.is_aborted(),
            );
        }
        // SAFETY: this process owns `areas` and is in superstep `self.step`.
        let placed = unsafe { areas.put(pid, done, self.base, self.step, dst, src) };
        let recorded = placed.and_then(|(area, off)| {
            self.with_outbox(pid, |ob| ob.put_bulk(dst, src.len(), area, off))
        });
        if recorded.is_some() {
            self.flag(crate::flags::FLAG_OUTBOX);
        }
        recorded.is_some()
    }

    /// After a failed sync: wait until every process of the run has stopped, so that none is
    /// still reading this process's memory (get sources, popped registrations, raw areas) when
    /// the error reaches user code. Every process stops promptly: the run is aborted, so its
    /// next primitive (or the barrier it waits in) fails.
    #[cold]
    pub(super) fn quiesce(&self) {
        self.note_stopped();
        let _ = crate::wait::wait_until(
            self.run.policy,
            Sleep::Naps,
            || self.all_stopped().then_some(()),
            || false,
        );
    }

    /// The error of an immediate primitive whose target has already completed this superstep
    /// (only a lazy sync lets it).
    #[cold]
    fn ahead(&self, op: &'static str, pid: usize, done: u64) -> Error {
        self.misuse(
            op,
            format!(
                "{op} in superstep {} to pid {pid}, which has already completed {done} syncs: \
                 the immediate primitives are not allowed in a lazy superstep (see declare_incoming)",
                self.step
            ),
        )
    }

    /// Wait until process `pid` has completed as many syncs as we have, so that its memory holds
    /// everything the previous supersteps wrote (needed by the immediate primitives).
    #[inline]
    fn wait_settled(&self, op: &'static str, pid: usize) -> Result<()> {
        let done = &self.run.procs[pid].done;
        let seen = done.since(self.base);
        if seen > self.step {
            return Err(self.ahead(op, pid, seen));
        }
        if seen == self.step {
            return Ok(());
        }
        crate::wait::wait_until(
            self.run.policy,
            Sleep::Naps,
            || (done.since(self.base) >= self.step).then_some(()),
            || self.run.tree.is_aborted(),
        )
        .map_err(|_| self.stopped(op))
    }
}
