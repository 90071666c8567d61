//! The end of a superstep: the public `sync` and `end`, which hand the superstep to the run's
//! engine (`engine/`), timed when the run is profiled. What the engines' syncs share is in
//! `superstep.rs`.

use crate::ctx::Ctx;
use crate::error::Result;

impl Ctx {
    /// End the superstep: wait for all processes, then carry out all communication requested
    /// in it. Afterwards, puts and gets have landed, messages sent to this process are in its
    /// queue, and registration and tag-size changes are in effect.
    ///
    /// A superstep in which no process communicated or changed registrations costs one barrier.
    ///
    /// If the run has failed (here or in any process), `sync` returns the error, and so does
    /// every later primitive of this process; a failed sync returns only once every process of
    /// the run has stopped touching shared memory (has seen the failure, or ended).
    ///
    /// ```
    /// let steps = mbsp::run(2, |ctx| {
    ///     for _ in 0..10 {
    ///         ctx.sync()?;
    ///     }
    ///     Ok(ctx.superstep())
    /// }).unwrap();
    /// assert_eq!(steps, vec![10, 10]);
    /// ```
    pub fn sync(&mut self) -> Result<()> {
        self.sync_step()?;
        // Set by a sync at which some process asked for a checkpoint (and taken by the
        // `sync_checkpoint` that reads it): here, the others checkpoint and this one does not.
        if self.synced_flags.get() != 0 {
            return Err(self.sync_in_checkpoint());
        }
        Ok(())
    }

    /// [`sync`](Self::sync) without the check that no other process checkpoints at it (for
    /// `sync_checkpoint` and `resume`, which make that check themselves or need none).
    #[inline(always)]
    pub(crate) fn sync_step(&mut self) -> Result<()> {
        if self.end_outcome.is_some() {
            return Err(self.after_end("sync"));
        }
        if self.prof.is_some() {
            return self.profiled_sync(false);
        }
        self.engine_sync(false)
    }

    /// [`engine_sync`](Self::engine_sync) timed for the profile.
    #[cold]
    #[inline(never)]
    fn profiled_sync(&mut self, ending: bool) -> Result<()> {
        // Whether this sync is a lazy one, read before the sync clears it: declared counts
        // (`declare_incoming`), except at the end, which is always a full sync.
        let declared = if ending { None } else { self.lazy.get() };
        if let Some(r) = &self.prof {
            r.borrow_mut().sync_begins();
        }
        let result = self.engine_sync(ending);
        if let Some(r) = &self.prof {
            r.borrow_mut().sync_ends(declared);
        }
        result
    }

    /// End this process's part of the run now: the final synchronisation, which otherwise
    /// happens when the SPMD function returns. Like a sync, it completes the last superstep
    /// (its puts, gets and messages are delivered), and every process must reach it (a process
    /// that syncs instead is a misuse, as when an SPMD function returns early). When it
    /// returns, every process of the run has reached its end and no process touches this
    /// process's memory any more: what it registered may go.
    ///
    /// Afterwards every primitive is a misuse except the local views of registered memory
    /// ([`Ctx::local`], [`Ctx::local_mut`]); calling `end` again returns its first outcome, and
    /// returning from the SPMD function does not synchronise again. Rust code usually just
    /// returns; this is for callers whose processes leave by other means (the C ABI's
    /// `bsp_end`, which leaves the SPMD function by `longjmp` after ending here, so that
    /// memory the function registered on its stack outlives every access to it).
    ///
    /// ```
    /// let last = mbsp::run(2, |ctx| {
    ///     let x = ctx.push_reg(vec![ctx.pid() as u64 + 1; 4])?;
    ///     let y = ctx.push_reg(vec![0u64; 4])?;
    ///     ctx.sync()?;
    ///     ctx.get(1 - ctx.pid(), &x, .., &y, 0)?;
    ///     ctx.end()?; // the get lands here; everyone has ended
    ///     Ok(ctx.local(&y)?[3])
    /// }).unwrap();
    /// assert_eq!(last, vec![2, 1]);
    /// ```
    pub fn end(&mut self) -> Result<()> {
        if let Some(outcome) = &self.end_outcome {
            return outcome.clone();
        }
        let outcome = self.final_sync();
        self.end_outcome = Some(outcome.clone());
        outcome
    }

    /// The final sync (see [`Ctx::end`]).
    fn final_sync(&mut self) -> Result<()> {
        if self.prof.is_some() {
            return self.profiled_sync(true);
        }
        self.engine_sync(true)
    }
}
