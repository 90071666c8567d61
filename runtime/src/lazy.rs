//! Lazy barriers (BSPk's message counting): a superstep whose processes declare how many puts
//! and messages each of them receives ends, for each process, as soon as its own incoming data
//! has arrived and the receivers of its data from the superstep before have finished with it.
//! No process waits for processes it does not exchange data with.
//!
//! ## Semantics
//!
//! [`Ctx::declare_incoming`]`(m)` declares that this process receives exactly `m` records in the current
//! superstep: one per non-empty buffered put ([`Ctx::put`] and its relatives) and one per
//! message ([`Ctx::send`], `hpsend`, ...) addressed to it, its own included. The next sync is
//! then lazy. After it, the process's puts have landed and its messages are in its queue
//! exactly as after a full sync: BSPlib's semantics do not change, only who waits for whom.
//!
//! * Lazy syncs are collective, as in BSPk: in a superstep, either every process calls
//!   `declare_incoming` or none does. A process that makes a full sync while another makes a lazy one is
//!   a misuse reported on the processes that notice it (at the latest at the next full sync).
//! * A count that does not match is a misuse, never a hang or a mix of supersteps: more records
//!   than declared fail the receiver's sync; fewer fail it once every other process has entered
//!   its sync (nothing more can arrive); records that arrive after their receiver has completed
//!   the superstep (its count was met without them) fail the sender's next sync.
//! * A lazy superstep allows only puts and messages. Gets, registration and tag-size changes need
//!   every process's requests at the sync (they fail the sync); the immediate primitives
//!   (`hpput`, `hpget`, `direct_get`) need the target to be in the same superstep, which a lazy
//!   sync does not promise (they fail at the call, and `declare_incoming` fails after them).
//! * [`Ctx::end`] (and returning from the SPMD function) is always a full sync.
//!
//! ## Cost
//!
//! A lazy sync costs the arrival of the process's own data (one cache-line transfer per sender:
//! in runs of up to 16 processes a *lane* that carries the count, an acknowledgement and up to
//! six words of put records, `engine/threads/lane.rs`) and a glance at the acknowledgements of the superstep
//! before (two supersteps before in runs with more processes than cores, whose senders may
//! run two supersteps ahead), instead of a barrier over all processes: a halo exchange waits for its neighbours only, and a process with nothing to
//! receive does not wait at all. A lazy wait spins, yields and then sleeps as the run's barrier
//! waits do (`WaitPolicy`), until the announcement it waits for wakes it; processes that do not
//! exchange data need not take turns on a core (`engine/threads/lazy.rs`).
//!
//! So declaring pays where a barrier costs more than waiting for one's own senders: many
//! processes, more processes than cores, processes with nothing to receive, senders that may run
//! ahead. Where every process hears from every other it does not, least at p = 2, where the full
//! sync is one cache line each way that small puts ride in (`docs/semantics.md`, "When
//! declaring pays").
//!
//! ## Where the barrier is cheaper
//!
//! A thread run of two processes therefore makes its declared syncs at the barrier: the counts
//! are checked after it (a wrong count fails the sync of the process that declared it), a get,
//! registration or tag-size change in the superstep is refused as in any lazy superstep, and a
//! superstep in which one process declared and the other did not is reported by both, through
//! two barrier flags. What changes is only who waits: each process waits for the other, as in
//! a full sync (a process expecting nothing is not released early). So does a run whose
//! processes take turns as coroutines (`Run::coroutines`): its barrier costs each thread a few
//! cache lines, while the lazy protocol's waits, announcements and acknowledgements cost each
//! process, and every process of a thread must run in every superstep anyway.
//! `internals::declared_at_barrier` turns this off (tests of the lazy protocol); runs over MPI
//! ranks keep the lazy protocol, which saves them the header all-to-all.

use crate::ctx::Ctx;
use crate::error::Result;

impl Ctx {
    /// Declare that this process receives exactly `records` puts and messages in the current
    /// superstep (every process of the run must declare in the same superstep); the next sync
    /// then waits only for them (module documentation of `lazy`, BSPk's `bspk_expect`). Calling
    /// it again in the same superstep replaces the count.
    ///
    /// Errors: the run has failed; this superstep already used an immediate primitive.
    ///
    /// ```
    /// // A ring: every process puts one word into its right neighbour.
    /// let got = mbsp::run(3, |ctx| {
    ///     let (pid, p) = (ctx.pid(), ctx.nprocs());
    ///     let x = ctx.push_reg(vec![0u64; 1])?;
    ///     ctx.sync()?;
    ///     for step in 1..=10u64 {
    ///         ctx.put((pid + 1) % p, &[step * 10 + pid as u64], &x, 0)?;
    ///         ctx.declare_incoming(1)?; // from the left neighbour
    ///         ctx.sync()?;
    ///     }
    ///     Ok(ctx.local(&x)?[0])
    /// })
    /// .unwrap();
    /// assert_eq!(got, vec![102, 100, 101]);
    /// ```
    pub fn declare_incoming(&self, records: usize) -> Result<()> {
        self.live("declare_incoming")?;
        if self.immediate.get() {
            return Err(self.misuse(
                "declare_incoming",
                format!(
                    "declare_incoming({records}) in superstep {} after an immediate primitive (hpput, \
                     hpget or direct_get) in the same superstep: a lazy superstep allows only \
                     puts and messages",
                    self.step
                ),
            ));
        }
        self.lazy.set(Some(records as u64));
        Ok(())
    }

    /// The former name of [`declare_incoming`](Ctx::declare_incoming), after BSPk's
    /// `bspk_expect` (the C ABI keeps it as `bsp_expect`). It read like `Option::expect`.
    #[deprecated(
        note = "renamed `declare_incoming`: it declares how many puts and messages \
                         this process receives in the superstep"
    )]
    pub fn expect(&self, records: usize) -> Result<()> {
        self.declare_incoming(records)
    }

    /// Fail an immediate primitive called after [`Ctx::declare_incoming`] in the same superstep (else
    /// note that this superstep used one).
    #[inline]
    pub(crate) fn immediate_allowed(&self, op: &'static str) -> Result<()> {
        if let Some(m) = self.lazy.get() {
            return Err(self.misuse(
                op,
                format!(
                    "{op} in superstep {} after declare_incoming({m}): a lazy superstep allows only puts \
                     and messages (the target may already be in the next superstep)",
                    self.step
                ),
            ));
        }
        self.immediate.set(true);
        Ok(())
    }
}
