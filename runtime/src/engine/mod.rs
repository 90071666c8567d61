//! The seam between the superstep logic and the engines that carry it out.
//!
//! The primitives of [`Ctx`](crate::Ctx) (`drma.rs`, `bsmp.rs`, `reg.rs`, `sync.rs`) check
//! their arguments, write puts and messages into the sender's outboxes, queue gets and
//! registration requests, and agree on registrations; everything that moves data between
//! processes or waits for them goes through an [`Engine`]:
//!
//! * [`Engine::sync`]: one superstep's end (or the final one): registration agreement, puts,
//!   gets and messages delivered, the superstep counted;
//! * [`Engine::put`]: a buffered put the engine carries itself instead of the outbox;
//! * [`Engine::hpput`], [`Engine::get_now`]: the immediate primitives (`hpput`; `hpget` and
//!   `direct_get`), once the target has completed the previous sync;
//! * [`Engine::stop`]: after this process has seen the run fail, return only once no process
//!   touches its memory any more;
//! * [`Engine::close`]: the process leaves the run.
//!
//! Two engines implement it, each in its own module tree with the guarantees it gives at its
//! top: [`threads`] (every process is a thread of this address space; the default, and the
//! engine of every nested run) and `ranks` (feature `mpi`: the top level of a run over MPI
//! ranks, one process per rank). A context holds a [`Link`]: the thread engine is reached by
//! a match on it and static calls (its hot paths cost what they would without the seam),
//! another engine through a trait object (its costs are those of the network).
//!
//! The trait is generic over the context type `C` (always `Ctx`) so that this module sits below
//! the context in the module order: the context names the seam, the engines name both.

pub(crate) mod threads;

#[cfg(feature = "mpi")]
pub mod ranks;

use crate::error::{Error, Result};

/// What a process of a run uses to reach the others: see the module documentation.
pub(crate) trait Engine<C> {
    /// End the superstep of `ctx`'s process (`ending`: its final sync, [`Ctx::end`]). On
    /// success everything requested in the superstep has taken effect for this process; on
    /// failure the run has failed and no process touches this process's memory any more.
    ///
    /// [`Ctx::end`]: crate::Ctx::end
    fn sync(&mut self, ctx: &mut C, ending: bool) -> Result<()>;

    /// After `ctx`'s process has seen the run fail outside a sync: return once no process of
    /// the run touches its memory. Returns the run's error as the engine has it, if it has
    /// one: learnt from another rank while waiting, or agreed with the others in the exchange
    /// that ended the run.
    fn stop(&mut self, ctx: &mut C) -> Option<Error>;

    /// A buffered put of `src` to `dst` in process `pid` (another process, checked by the
    /// caller) carried by the engine itself, or `None` when it goes through the outbox.
    fn put(&self, ctx: &C, pid: usize, dst: *mut u8, src: &[u8]) -> Option<Result<()>>;

    /// `hpput` of `len` bytes from `src` to `dst` in process `pid`.
    ///
    /// # Safety
    /// `src` valid for `len` bytes until the next sync; `dst .. dst + len` inside a registered
    /// area of `pid` (checked by the caller) that nobody else touches in this superstep.
    unsafe fn hpput(
        &self,
        ctx: &C,
        pid: usize,
        src: *const u8,
        dst: *mut u8,
        len: usize,
    ) -> Result<()>;

    /// `hpget`/`direct_get` (`op`) of `len` bytes from `src` in process `pid` into `dst`,
    /// completed when it returns.
    ///
    /// # Safety
    /// `dst` valid for `len` bytes; `src .. src + len` inside a registered area of `pid`
    /// (checked by the caller) that nobody writes in this superstep.
    unsafe fn get_now(
        &self,
        ctx: &C,
        op: &'static str,
        pid: usize,
        src: *const u8,
        dst: *mut u8,
        len: usize,
    ) -> Result<()>;

    /// The process leaves the run (after its final sync, or its last exchange of a failure).
    fn close(self: Box<Self>);
}

/// The engine a context reaches the other processes of its run through.
pub(crate) enum Link<C> {
    /// The thread engine ([`threads`]), reached by static calls.
    Threads,
    /// Another engine (`None` only while a call of `Ctx::with_remote` has it out).
    #[allow(dead_code, reason = "made by the rank engine only (feature `mpi`)")]
    Remote(Option<Box<dyn Engine<C>>>),
}

impl<C> Link<C> {
    /// The engine other than the thread engine, if this link has one.
    #[inline(always)]
    pub(crate) fn remote(&self) -> Option<&dyn Engine<C>> {
        match self {
            Link::Threads => None,
            Link::Remote(e) => e.as_deref(),
        }
    }

    /// Whether this link leads to another engine than threads.
    #[inline(always)]
    pub(crate) fn is_remote(&self) -> bool {
        matches!(self, Link::Remote(_))
    }
}

/// Take the remote engine out of the link (the process leaves the run), if it has one.
pub(crate) fn take_remote<C>(link: &mut Link<C>) -> Option<Box<dyn Engine<C>>> {
    match std::mem::replace(link, Link::Threads) {
        Link::Remote(e) => e,
        Link::Threads => None,
    }
}
