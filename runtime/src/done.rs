//! [`Done`]: a process's count of completed syncs, which the other processes of its run read.

use crate::shim::{AtomicU64, Ordering, Zero};
use crossbeam_utils::CachePadded;

/// A process's count of completed syncs, as the other processes of its run read it.
///
/// Counted since the run state was made or last reset, not since the run began: a run that
/// follows one that ended well on the same state counts on (`RunState::reuse`), so the
/// starter does not write zero into a line that the process wrote last (which would cross to
/// the starter's core and back at every run). Every process of a run starts it with the same
/// count — the runs before ended well, so all completed as many syncs, or the starter reset
/// them all — and reads it from its own line when it enters (`Ctx::base`); a count read from
/// another process is taken relative to that base. A process that has not entered the run
/// yet still holds the base: it has completed no sync of this run.
pub(crate) struct Done(CachePadded<AtomicU64>);

impl Default for Done {
    fn default() -> Self {
        Done(CachePadded::new(AtomicU64::new(0)))
    }
}

impl Done {
    /// The syncs completed in the run whose processes started with count `base`.
    #[inline]
    pub(crate) fn since(&self, base: u64) -> u64 {
        self.0.load(Ordering::Acquire).wrapping_sub(base)
    }

    /// The owner has completed `syncs` syncs of the run that started with count `base`
    /// (Release: what it wrote in them is visible to whoever reads the count with `since`).
    #[inline]
    pub(crate) fn publish(&self, base: u64, syncs: u64) {
        self.0.store(base.wrapping_add(syncs), Ordering::Release);
    }

    /// The count at the start of a run, read by the owner as it enters (its own last store, or
    /// the starter's reset, published by the hand-over of the run).
    #[inline]
    pub(crate) fn base(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Start the count again from zero (exclusive access: no process of the state runs; after
    /// a run that failed). Written only if it is not zero (`shim::Zero`).
    pub(crate) fn reset(&mut self) {
        self.0.zero();
    }
}
