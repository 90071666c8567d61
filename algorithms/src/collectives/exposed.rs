//! Caller memory exposed to the other processes for direct gets, for the duration of one
//! collective.
//!
//! The large-data algorithms register the caller's buffer (and scratch) with the raw BSPlib
//! registration, let the other processes copy from it with `direct_get` (one copy, reader-driven),
//! and pop the registration before their last sync. [`Exposed`] holds the buffer as a raw pointer
//! for the whole call, so that this process's own accesses and the other processes' reads all
//! derive from one pointer, and carries the safety argument in one place:
//!
//! * **Disjointness.** Each algorithm is written so that in every superstep, the ranges other
//!   processes read from this buffer are not written by this process, and this process writes
//!   only ranges nobody else reads in that superstep. Methods that hand out `&mut` to a range
//!   are `unsafe` and state this as their precondition.
//! * **Lifetime.** The registration is popped and a sync passes before the collective returns
//!   normally. When it fails in the middle, [`Exposed::fail`] syncs once more: a failed sync
//!   returns only after every process of the run has stopped touching shared memory, so no
//!   other process can still be reading the buffer when the caller gets it back.

use bytemuck::Pod;
use mbsp::{Ctx, Error, Result};
use std::marker::PhantomData;
use std::ops::Range;

/// A buffer of `T` registered for direct gets by other processes.
pub struct Exposed<'a, T> {
    base: *mut T,
    len: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

impl<'a, T: Pod> Exposed<'a, T> {
    /// Register `buf` (it takes effect at the next sync, as any registration).
    pub fn push(ctx: &Ctx, buf: &'a mut [T]) -> Result<Self> {
        let (base, len) = (buf.as_mut_ptr(), buf.len());
        // SAFETY: `buf` is borrowed mutably for 'a, which outlives this value, and the
        // collective pops the registration and syncs before giving the buffer back (see the
        // module docs; on failure `fail` quiesces the run). No other process writes into it: the
        // registration is known only to this collective, which issues direct gets from it only.
        unsafe { ctx.push_reg_raw(base.cast(), len * size_of::<T>()) }?;
        Ok(Exposed {
            base,
            len,
            _borrow: PhantomData,
        })
    }

    /// Pop the registration (effective at the next sync, which the caller must pass before
    /// returning).
    pub fn pop(&self, ctx: &Ctx) -> Result<()> {
        ctx.pop_reg_raw(self.base.cast())
    }

    /// Turn an error in the middle of the algorithm into the collective's error, after waiting
    /// until no process touches shared memory any more.
    pub fn fail(&self, ctx: &mut Ctx, e: Error) -> Error {
        if ctx.failure().is_some() {
            // The run has failed (by `e` or earlier): this sync returns its error at once, but
            // only after every process has stopped touching shared memory.
            let _ = ctx.sync();
        }
        e
    }

    /// Copy `count` elements starting at element `offset` of `pid`'s exposed buffer (the one
    /// registered at the same place of the registration stack) into `dst`.
    ///
    /// # Safety
    /// The source range must not be written by anyone during this superstep, and `dst` must not
    /// be read by other processes during this superstep.
    pub unsafe fn get_from(
        &self,
        ctx: &Ctx,
        pid: usize,
        offset: usize,
        dst: &mut [T],
    ) -> Result<()> {
        let sz = size_of::<T>();
        // SAFETY: by the caller's promise; the runtime checks bounds against what `pid`
        // registered.
        unsafe {
            ctx.direct_get_raw(
                pid,
                self.base.cast(),
                offset * sz,
                dst.as_mut_ptr().cast(),
                std::mem::size_of_val(dst),
            )
        }
    }

    /// This process's elements in `r`, to read.
    ///
    /// # Safety
    /// Nobody writes `r` of this buffer while the slice lives (other processes only read).
    pub unsafe fn range(&self, r: Range<usize>) -> &[T] {
        assert!(r.start <= r.end && r.end <= self.len);
        // SAFETY: in bounds; not written meanwhile (caller's promise).
        unsafe { std::slice::from_raw_parts(self.base.add(r.start), r.len()) }
    }

    /// This process's elements in `r`, to write.
    ///
    /// # Safety
    /// No other process reads `r` of this buffer while the slice lives, and no other slice of
    /// this buffer overlapping `r` is alive.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn range_mut(&self, r: Range<usize>) -> &mut [T] {
        assert!(r.start <= r.end && r.end <= self.len);
        // SAFETY: in bounds; exclusive by the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.base.add(r.start), r.len()) }
    }
}
