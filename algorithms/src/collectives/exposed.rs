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
//! * **Lifetime.** A buffer can only be exposed inside [`Ctx::lending`] (`push` takes its
//!   [`Lent`] token). The collective pops the registration and passes a sync before the scope
//!   ends normally; when it ends by an error or a panic (a panicking reduction operator), the
//!   scope fails the run and waits until every process of the run has stopped touching shared
//!   memory before the buffer's owner gets it back or unwinds past it.

use bytemuck::Pod;
use mbsp::{Ctx, Lent, Result};
use std::marker::PhantomData;
use std::ops::Range;

/// A buffer of `T` registered for direct gets by other processes.
pub struct Exposed<'a, T> {
    base: *mut T,
    len: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

impl<'a, T: Pod> Exposed<'a, T> {
    /// Register `buf` (it takes effect at the next sync, as any registration), inside the
    /// lending scope `_lent`.
    pub fn push(ctx: &Ctx, _lent: Lent<'_>, buf: &'a mut [T]) -> Result<Self> {
        let (base, len) = (buf.as_mut_ptr(), buf.len());
        // SAFETY: `buf` is borrowed mutably for 'a, which outlives this value; the collective
        // pops the registration and syncs before its lending scope ends normally, and the scope
        // waits for every process before it lets an error or a panic out (module docs). No
        // other process writes into it: the registration is known only to this collective,
        // which issues direct gets from it only.
        unsafe { ctx.push_reg_raw(base.cast(), len * size_of::<T>()) }?;
        Ok(Exposed {
            base,
            len,
            _borrow: PhantomData,
        })
    }

    /// Register the first `len` elements of `v`'s spare capacity (`v` must have room for
    /// them: [`Ctx::buffer`] gives an empty vector that has) without initializing them, inside
    /// the lending scope `_lent`: scratch that this process fills with [`write`](Self::write)
    /// and [`fill`](Self::fill) before anyone reads it, so it is not zeroed first (a pass over
    /// memory as long as the copies). `v`'s length stays as it was.
    pub fn push_spare(ctx: &Ctx, _lent: Lent<'_>, v: &'a mut Vec<T>, len: usize) -> Result<Self> {
        let spare = &mut v.spare_capacity_mut()[..len];
        let base = spare.as_mut_ptr().cast::<T>();
        // SAFETY: as in `push`; the region is `v`'s, borrowed mutably for 'a.
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
    /// Nobody writes `r` of this buffer while the slice lives (other processes only read), and
    /// every element of `r` is initialized (the buffer was exposed by [`push`](Self::push), or
    /// the elements were written by [`write`](Self::write) or [`fill`](Self::fill)).
    pub unsafe fn range(&self, r: Range<usize>) -> &[T] {
        assert!(r.start <= r.end && r.end <= self.len);
        // SAFETY: in bounds; not written meanwhile (caller's promise).
        unsafe { std::slice::from_raw_parts(self.base.add(r.start), r.len()) }
    }

    /// This process's elements in `r`, to write.
    ///
    /// # Safety
    /// No other process reads `r` of this buffer while the slice lives, no other slice of
    /// this buffer overlapping `r` is alive, and every element of `r` is initialized (as for
    /// [`range`](Self::range)).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn range_mut(&self, r: Range<usize>) -> &mut [T] {
        assert!(r.start <= r.end && r.end <= self.len);
        // SAFETY: in bounds; exclusive by the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.base.add(r.start), r.len()) }
    }

    /// Copy `src` into this process's elements from `at` on (initializing them).
    ///
    /// # Safety
    /// No other process reads those elements, and no slice of them is alive, meanwhile.
    pub unsafe fn write(&self, at: usize, src: &[T]) {
        assert!(at <= self.len && src.len() <= self.len - at);
        // SAFETY: in bounds; exclusive by the caller's promise; `src` is another borrow.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.base.add(at), src.len()) }
    }

    /// Set this process's elements in `r` to `x` (initializing them).
    ///
    /// # Safety
    /// As [`write`](Self::write).
    pub unsafe fn fill(&self, r: Range<usize>, x: T) {
        assert!(r.start <= r.end && r.end <= self.len);
        for i in r {
            // SAFETY: in bounds; exclusive by the caller's promise.
            unsafe { self.base.add(i).write(x) }
        }
    }
}
