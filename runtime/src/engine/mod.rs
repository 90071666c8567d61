//! The seam between the superstep logic and the engines that carry it out.
//!
//! The primitives of [`Ctx`] (`drma.rs`, `bsmp.rs`, `reg.rs`, `owned.rs`, `sync.rs`) check
//! their arguments, write puts and messages into the sender's outboxes, queue gets and
//! registration requests; everything that moves data between processes or waits for them goes
//! through the run's [`Engine`]:
//!
//! * [`Engine::sync`]: one superstep's end (or the final one): registration agreement, puts,
//!   gets and messages delivered, the superstep counted;
//! * [`Engine::put`]: a buffered put the engine carries itself instead of the outbox (small
//!   puts riding in the thread engine's barrier, large puts between ranks);
//! * [`Engine::send_owned`]: an owned message, its buffer handed over (threads) or its bytes
//!   copied (ranks);
//! * [`Engine::hpput`], [`Engine::get_now`]: the immediate primitives (`hpput`; `hpget` and
//!   `direct_get`), once the target has completed the previous sync;
//! * [`Engine::stop`]: after this process has seen the run fail, return only once no process
//!   touches its memory any more;
//! * [`Engine::leave`]: the process leaves the run.
//!
//! Two engines implement it, each in its own folder with its state (`state.rs` there) and the
//! guarantees it gives at its top: [`threads`] (every process is a thread of this address
//! space; the default, and the engine of every nested run) and `ranks` (feature `mpi`: the top
//! level of a run over MPI ranks, one process per rank). What each keeps in the run state and
//! in a process's context is an enum of `state.rs` here ([`state::RunEngine`],
//! [`state::ProcEngine`]); the methods of `Ctx` in `dispatch.rs` (`engine_sync`,
//! `engine_put`, ...) dispatch on it with static calls, so the thread engine's hot paths cost
//! what they would without the seam. Code outside `engine/` calls those methods and never asks
//! which engine it runs on.
//!
//! Layers: `state.rs` (data) sits below the context, which holds it; this trait and the
//! engines sit above the context; `dispatch.rs` above the engines. So no module imports one
//! that imports it back (`tests/source.rs`).

mod dispatch;
pub(crate) mod state;
pub(crate) mod threads;

#[cfg(feature = "mpi")]
pub mod ranks;

use crate::ctx::Ctx;
use crate::error::{Error, Result};
use bytemuck::Pod;

/// The largest payload an engine may carry itself ([`Engine::send`]: a message without a tag
/// riding in the thread engine's barrier lines); `Ctx::send_parts` gathers parts up to this
/// size before it asks.
pub(crate) const CARRIED_PAYLOAD: usize = threads::ride::RIDE_PAYLOAD;

/// What an engine does for the processes of its runs (module documentation). Its functions
/// take the process's context, which holds the engine's own part of the process
/// ([`state::ProcEngine`]) and of the run ([`state::RunEngine`]).
pub(crate) trait Engine {
    /// End the superstep of `ctx`'s process (`ending`: its final sync, [`Ctx::end`]). On
    /// success everything requested in the superstep has taken effect for this process; on
    /// failure the run has failed and no process touches this process's memory any more.
    fn sync(ctx: &mut Ctx, ending: bool) -> Result<()>;

    /// After `ctx`'s process has seen the run fail outside a sync: return once no process of
    /// the run touches its memory. Returns the run's error as the engine has it, if it has
    /// one: learnt from another rank while waiting, or agreed with the others in the exchange
    /// that ended the run.
    fn stop(ctx: &mut Ctx) -> Option<Error>;

    /// A buffered put of `src` to `dst` in process `pid` (checked by the caller) carried by
    /// the engine itself, or `None` when it goes through the outbox.
    fn put(ctx: &Ctx, pid: usize, dst: *mut u8, src: &[u8]) -> Option<Result<()>>;

    /// A message of `tag` and `payload` to process `pid` (checked by the caller) carried by
    /// the engine itself (true), or not: it goes through the outbox, and the engine carries no
    /// more messages to `pid` in this superstep (the queue keeps each sender's messages in
    /// the order sent, those the engine carried first).
    fn send(ctx: &Ctx, pid: usize, tag: &[u8], payload: &[u8]) -> bool;

    /// A message to `pid` goes through the outbox without asking [`send`](Engine::send) (an
    /// owned message): the engine carries no more messages to `pid` in this superstep.
    fn to_outbox(ctx: &Ctx, pid: usize);

    /// Queue `payload` with `tag` as an owned message to `pid` (checked by the caller) in the
    /// outbox; `None` if the memory for its record cannot be allocated.
    fn send_owned<T: Pod>(ctx: &Ctx, pid: usize, tag: &[u8], payload: Vec<T>) -> Option<()>;

    /// `hpput` of `len` bytes from `src` to `dst` in process `pid`.
    ///
    /// # Safety
    /// `src` valid for `len` bytes until the next sync; `dst .. dst + len` inside a registered
    /// area of `pid` (checked by the caller) that nobody else touches in this superstep.
    unsafe fn hpput(ctx: &Ctx, pid: usize, src: *const u8, dst: *mut u8, len: usize) -> Result<()>;

    /// `hpget`/`direct_get` (`op`) of `len` bytes from `src` in process `pid` into `dst`,
    /// completed when it returns.
    ///
    /// # Safety
    /// `dst` valid for `len` bytes; `src .. src + len` inside a registered area of `pid`
    /// (checked by the caller) that nobody writes in this superstep.
    unsafe fn get_now(
        ctx: &Ctx,
        op: &'static str,
        pid: usize,
        src: *const u8,
        dst: *mut u8,
        len: usize,
    ) -> Result<()>;

    /// The process leaves the run, after its final sync or, when `failure` is its error
    /// (recorded as the run's), after the engine has taken the failure to the others. Returns
    /// the run's error as the engine agreed it with the others, if it did.
    fn leave(ctx: &mut Ctx, failure: Option<&Error>) -> Option<Error>;

    /// Every process's `mine`, in pid order, where the processes live in other address spaces
    /// (ranks: an all-gather, which every rank must call alike); `None` where they share this
    /// one (threads share memory instead).
    fn all_gather(ctx: &mut Ctx, mine: &[u64]) -> Option<Vec<Vec<u64>>>;
}
