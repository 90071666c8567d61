//! Lending this process's own memory to the other processes, soundly under panics and errors.
//!
//! The safe primitives never lend caller memory: a [`Reg`](crate::Reg) is owned by the runtime
//! and outlives every access through the registration tables. The unsafe ones can:
//! [`Ctx::push_reg_raw`] registers memory the caller owns (a stack array, a slice of a vector),
//! which other processes then read with `direct_get` or `get` and write with `put`. The caller
//! pops the registration and passes a sync before it frees that memory, but if its frame
//! *unwinds* (a panicking operator in a reduction) or *returns early* (an error) in between,
//! the memory is freed while another process may still be copying from it.
//!
//! [`Ctx::lending`] is the scope that closes that hole, as rayon's `scope` does for borrowed
//! data: a panic or an error that leaves the scope fails the run, and the scope hands control
//! back (returns the error, or resumes the panic) only once every process of the run has
//! stopped touching shared memory. A process counts as stopped once it has seen the failure
//! (its next primitive, or the barrier it waits in, fails) or has ended; from then on it
//! touches no other process's memory. Over MPI ranks, the wait is the failed rank's last
//! exchange, which every rank joins before it stops.
//!
//! Code that lends memory takes a [`Lent`] to show that it runs inside such a scope (the
//! collectives of `mbsp-algorithms` require one to expose a caller's buffer).

use crate::ctx::Ctx;
use crate::error::{Error, ErrorKind, Result};
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

/// Proof that code runs inside [`Ctx::lending`]: memory it lends to other processes cannot be
/// freed by an unwind or an early return while they may still touch it.
///
/// A `Lent` cannot be made outside the scope, nor kept beyond it (its lifetime is the scope's).
#[derive(Clone, Copy, Debug)]
pub struct Lent<'scope> {
    /// Invariant in `'scope`, so the token cannot be stretched to outlive its scope.
    _scope: PhantomData<fn(&'scope ()) -> &'scope ()>,
}

impl Ctx {
    /// Run `f`, which may lend this process's own memory to the others (through
    /// [`push_reg_raw`](Ctx::push_reg_raw) and the unbuffered primitives), so that neither a
    /// panic nor an error inside it can free that memory while another process still touches
    /// it.
    ///
    /// If `f` returns `Ok`, so does `lending`: `f` must have popped its raw registrations and
    /// passed a sync before that (as BSPlib requires before memory is freed). If `f` returns an
    /// error or panics, the run fails (with that error or the panic, unless it had failed
    /// already) and `lending` waits until every process of the run has stopped touching shared
    /// memory; then it returns the error, or resumes the panic (which ends this process as
    /// every panic does: [`run`](fn@crate::run) returns it as an [`ErrorKind::Panic`] error).
    ///
    /// Cost: nothing on the normal path (no barrier, no allocation); the wait only on failure.
    ///
    /// ```
    /// // Each process exposes a buffer on its stack; pid 1 reads pid 0's with a direct get.
    /// let got = mbsp::run(2, |ctx| {
    ///     let mut mine = [ctx.pid() as u64 + 10; 4];
    ///     ctx.lending(|ctx, _lent| {
    ///         let at = mine.as_mut_ptr().cast::<u8>();
    ///         // SAFETY: `mine` outlives the scope, which pops it and syncs before it ends (and
    ///         // waits for every process on the way out of a panic or an error).
    ///         unsafe { ctx.push_reg_raw(at, 32)? };
    ///         ctx.sync()?;
    ///         let mut theirs = [0u64; 4];
    ///         if ctx.pid() == 1 {
    ///             // SAFETY: nobody writes pid 0's buffer in this superstep.
    ///             unsafe { ctx.direct_get_raw(0, at, 0, theirs.as_mut_ptr().cast(), 32)? };
    ///         }
    ///         ctx.pop_reg_raw(at)?;
    ///         ctx.sync()?;
    ///         Ok(theirs[0])
    ///     })
    /// })?;
    /// assert_eq!(got, vec![0, 10]);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn lending<R, F>(&mut self, f: F) -> Result<R>
    where
        F: FnOnce(&mut Ctx, Lent<'_>) -> Result<R>,
    {
        let lent = Lent {
            _scope: PhantomData,
        };
        match catch_unwind(AssertUnwindSafe(|| f(self, lent))) {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(self.stop_lending(e)),
            Err(payload) => {
                let message = crate::process::panic_message(&*payload);
                let e = crate::error::raised(&message, false)
                    .unwrap_or_else(|| self.error(ErrorKind::Panic, "spmd", message));
                self.stop_lending(e);
                resume_unwind(payload)
            }
        }
    }

    /// Fail the run with `e` (the first failure stays the root cause) and wait until no process
    /// touches this process's memory any more.
    #[cold]
    #[inline(never)]
    fn stop_lending(&mut self, e: Error) -> Error {
        self.run.tree.fail(&e);
        let _ = self.engine_stop();
        e
    }
}
