//! Taking a checkpoint: the sync, the decision, each process's part, process 0's manifest
//! (the flow is in the [module docs](super)).

use super::format::{Area, Meta, Msg, Part};
use super::words;
use super::{Checkpointer, RELAXED, lock};
use crate::ctx::Ctx;
use crate::error::{ErrorKind, Result};
use crate::flags::FLAG_CHECKPOINT;
use crate::registry::SlotState;
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

impl Ctx {
    /// A sync after which the processes checkpoint when the run's policy says so
    /// ([`Run::checkpoints`](crate::Run::checkpoints)): every `k` supersteps, every `t`
    /// seconds, or because a process asked ([`Ctx::request_checkpoint`]). Collective: every
    /// process calls it in the same superstep, each with its own `state` (the program's
    /// variables that [`Ctx::resume`] gives back). Without a policy it is a plain sync.
    ///
    /// It is always a full sync (counts declared with `declare_incoming` in the superstep are
    /// not checked). A checkpoint saves, per process, `state`, the contents of its registered
    /// areas, its message queue and tag size, and the superstep count; see
    /// docs/semantics.md, "Checkpoints", for what is not saved.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("mbsp-doc-sync-ckpt-{}", std::process::id()));
    /// let policy = mbsp::Checkpoints::in_folder(&dir).every_supersteps(2);
    /// let sums = mbsp::Run::new(2).checkpoints(policy).run(|ctx| {
    ///     let mut x = ctx.push_reg(vec![0u64; 4])?;
    ///     ctx.sync()?;
    ///     let mut it: u64 = ctx.resume()?.unwrap_or(0); // a fresh run: None
    ///     while it < 6 {
    ///         ctx.local_mut(&mut x)?[0] += it;
    ///         it += 1;
    ///         ctx.sync_checkpoint(&it)?;
    ///     }
    ///     Ok(ctx.local(&x)?[0])
    /// })?;
    /// assert_eq!(sums, vec![15, 15]);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn sync_checkpoint<S: Serialize>(&mut self, state: &S) -> Result<()> {
        self.checkpoint_sync(state, false)
    }

    /// A sync and a checkpoint at it, whatever the policy says (see
    /// [`Ctx::sync_checkpoint`]); an error in a run without a checkpoint policy.
    pub fn checkpoint<S: Serialize>(&mut self, state: &S) -> Result<()> {
        self.checkpoint_sync(state, true)
    }

    /// Ask for a checkpoint at the next [`Ctx::sync_checkpoint`] (not collective: one process
    /// asking is enough). Without a policy it does nothing.
    pub fn request_checkpoint(&self) {
        if let Some(ck) = &self.run.ckpt {
            ck.pending[self.pid].store(true, RELAXED);
        }
    }

    fn checkpoint_sync<S: Serialize>(&mut self, state: &S, force: bool) -> Result<()> {
        let op = if force {
            "checkpoint"
        } else {
            "sync_checkpoint"
        };
        self.live(op)?;
        if self.path.len() > 1 {
            return Err(self.misuse(
                op,
                "a nested run cannot checkpoint: checkpoints are taken by the top-level run, \
                 at its own superstep boundaries (when no nested run is active)"
                    .into(),
            ));
        }
        if self.run.ckpt.is_none() {
            if force {
                return Err(self.misuse(
                    op,
                    "this run has no checkpoint policy: give it one with Run::checkpoints \
                     (or MBSP_CHECKPOINT_DIR)"
                        .into(),
                ));
            }
            return self.sync();
        }
        self.ask(force)?;
        // A full sync: every process's flags, the ask included, are ORed in it.
        self.lazy.set(None);
        self.sync_step()?;
        // Taken: the flag is set only by a sync at which someone asked.
        if self.synced_flags.replace(0) & FLAG_CHECKPOINT == 0 {
            return Ok(());
        }
        let ck = self.run.ckpt.clone().expect("a checkpoint policy");
        if !matches!(self.engine.kind(), crate::engine::state::Kind::Threads) {
            return self.checkpoint_over_ranks(&ck, state, op);
        }
        let part = self.snapshot(state, op)?;
        self.write_checkpoint(&ck, part)
    }

    /// A plain `sync` at which other processes checkpoint (they called `sync_checkpoint` or
    /// `checkpoint`): a misuse. Over ranks this rank still joins the checkpoint's all-gather,
    /// with its error as its part's report, so that no rank waits for it.
    #[cold]
    #[inline(never)]
    pub(crate) fn sync_in_checkpoint(&mut self) -> crate::error::Error {
        let why = format!(
            "pid {} called sync where the other processes called sync_checkpoint or \
             checkpoint and took a checkpoint: every process makes the same call at a \
             superstep that checkpoints",
            self.pid
        );
        if !matches!(self.engine.kind(), crate::engine::state::Kind::Threads) {
            let _ = self.engine_all_gather(&words::report(&Err(why.clone())));
        }
        self.misuse("sync", why)
    }

    /// A checkpoint over ranks: each rank writes its part (to the shared folder), the ranks
    /// gather every part's report (an all-gather every rank makes, whatever happened to its
    /// part: none is left waiting), and rank 0 writes the manifest. Always in the foreground
    /// (a writer thread would have to make the collective call).
    fn checkpoint_over_ranks<S: Serialize>(
        &mut self,
        ck: &Arc<Checkpointer>,
        state: &S,
        op: &'static str,
    ) -> Result<()> {
        // A panic (in the state's `Serialize`, say) is held until this rank has made the
        // all-gather the others make: a rank that left it would leave them waiting.
        let snapped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            match self.snapshot(state, op) {
                Ok(part) => {
                    let meta = self.meta_of(ck, &part);
                    let report = ck.write_file(&meta, self.pid, &part);
                    (Some(meta), report, None)
                }
                Err(e) => (
                    None,
                    Err(format!("pid {}: {}", self.pid, e.message())),
                    Some(e),
                ),
            }
        }));
        let (meta, report, failed, panic) = match snapped {
            Ok((meta, report, failed)) => (meta, report, failed, None),
            Err(payload) => {
                let why = format!("pid {}: a panic while saving its state", self.pid);
                (None, Err(why), None, Some(payload))
            }
        };
        let reports = self
            .engine_all_gather(&words::report(&report))
            .expect("ranks gather");
        if let Some(payload) = panic {
            std::panic::resume_unwind(payload);
        }
        if let Some(e) = failed {
            return Err(e);
        }
        match meta.filter(|_| self.pid == 0) {
            Some(meta) => {
                let parts = reports.iter().map(|w| words::read_report(w)).collect();
                match ck.seal_with(&meta, parts) {
                    Ok(()) => Ok(()),
                    Err(message) => self.unwritten(ck, message),
                }
            }
            None => Ok(()),
        }
    }

    /// What every part of the checkpoint `part` belongs to shares.
    fn meta_of(&self, ck: &Checkpointer, part: &Part<'_>) -> Meta {
        Meta {
            seq: ck.base.saturating_add(part.superstep),
            p: self.run.p,
            superstep: part.superstep,
            state_type: part.state_type.clone(),
            areas: part.areas.len(),
        }
    }

    /// Before the sync: ask for a checkpoint at it when forced, when this process asked
    /// (`request_checkpoint`), when the superstep count after it is a multiple of the policy's
    /// `k`, or (process 0) when the policy's time is up; report a background checkpoint that
    /// could not be written (process 0). The ask is the only thing that decides, so a process
    /// that makes a plain `sync` where the others checkpoint learns it (`sync_in_checkpoint`).
    fn ask(&self, force: bool) -> Result<()> {
        // Borrowed, not cloned: the count of the run state's `Arc` is shared by all
        // processes, and changing it at every call would bounce its cache line.
        let ck = self.run.ckpt.as_deref().expect("a checkpoint policy");
        let next = self.superstep().wrapping_add(1);
        let every = ck.policy.every_supersteps.is_some_and(|k| next % k == 0);
        if self.pid == 0
            && ck.policy.background
            && let Some(message) = lock(&ck.failure).take()
        {
            self.unwritten(ck, message)?;
        }
        let due_by_clock = self.pid == 0
            && ck
                .policy
                .every
                .is_some_and(|t| lock(&ck.last).elapsed() >= t);
        // Read before it is cleared: the processes' flags share cache lines, which a write at
        // every call would bounce between their cores.
        let pending = &ck.pending[self.pid];
        let asked = pending.load(RELAXED) && pending.swap(false, RELAXED);
        if force || every || due_by_clock || asked {
            self.flag(FLAG_CHECKPOINT);
        }
        Ok(())
    }

    /// This process's part of a checkpoint taken now (right after a sync).
    fn snapshot<S: Serialize>(&self, state: &S, op: &'static str) -> Result<Part<'_>> {
        let bytes = postcard::to_stdvec(state).map_err(|e| {
            self.fail_with(self.error(
                ErrorKind::Misuse,
                op,
                format!(
                    "the state ({}) could not be serialised: {e}",
                    std::any::type_name::<S>()
                ),
            ))
        })?;
        let queue = self.saved_queue(op)?;
        // SAFETY: this process's own table, outside a sync.
        let areas = unsafe {
            self.me().table(|t| {
                t.order
                    .iter()
                    .map(|&slot| {
                        let e = t.entry(slot);
                        let bytes: &[u8] = if e.state == SlotState::Active && e.len > 0 {
                            // SAFETY: a registered area of this process, alive while it is
                            // registered (the part is written before this process's next
                            // sync, and a pop takes effect only at a sync); no put writes it
                            // outside a sync, and the program holds no view of it while
                            // `sync_checkpoint` (which has `&mut self`) writes the part.
                            std::slice::from_raw_parts(e.ptr, e.len)
                        } else {
                            &[]
                        };
                        Area {
                            slot,
                            null: e.state == SlotState::Empty,
                            ty: t.type_name(slot).to_string(),
                            bytes: bytes.into(),
                        }
                    })
                    .collect()
            })
        };
        Ok(Part {
            pid: self.pid as u32,
            p: self.run.p as u32,
            superstep: self.superstep(),
            tagsize: self.tagsize.get() as u64,
            queue_tagsize: self.st.borrow().queue.tagsize as u64,
            state_type: super::state_type::<S>(),
            state: bytes,
            areas,
            queue,
        })
    }

    /// The messages of this process's queue, in order, left in the queue.
    fn saved_queue(&self, op: &'static str) -> Result<Vec<Msg>> {
        let owned = self.st.borrow().queue.owned;
        if owned > 0 {
            return Err(self.misuse(
                op,
                format!(
                    "{owned} owned message(s) (send_owned) are in this process's queue: a \
                     checkpoint cannot save them; checkpoint at a superstep that receives none"
                ),
            ));
        }
        let before = self.st.borrow().queue.clone();
        let mut out = Vec::with_capacity(before.left);
        // Not `hpmove`: another process may have failed since the sync (the checkpoint is
        // complete all the same), and `hpmove` would then refuse.
        while let Some(m) = self.queued_message(true) {
            out.push(Msg {
                from: m.from as u32,
                tag: m.tag.to_vec(),
                payload: m.payload.to_vec(),
            });
        }
        self.st.borrow_mut().queue = before;
        Ok(out)
    }

    /// Write this process's part; process 0 then waits for every part and writes the
    /// manifest (or, when a part failed, removes the folder and warns or fails). In the
    /// background: hand a copy of the part to the run's writer thread.
    fn write_checkpoint(&self, ck: &Arc<Checkpointer>, part: Part<'_>) -> Result<()> {
        let meta = self.meta_of(ck, &part);
        if ck.policy.background {
            let part = part.into_owned(&mut lock(&ck.spare[self.pid]));
            self.await_snapshots(ck, meta.seq)?;
            ck.hand_over(&meta, self.pid, part);
            return Ok(());
        }
        ck.write_part(&meta, self.pid, &part);
        drop(part);
        self.await_snapshots(ck, meta.seq)?;
        if self.pid != 0 {
            return Ok(());
        }
        match ck.seal(&meta) {
            Ok(()) => Ok(()),
            Err(message) => self.unwritten(ck, message),
        }
    }

    /// A checkpoint was not written: a warning, or the run's error if the policy requires
    /// checkpoints.
    fn unwritten(&self, ck: &Checkpointer, message: String) -> Result<()> {
        if ck.policy.required {
            Err(self.fail_with(self.error(ErrorKind::System, "checkpoint", message)))
        } else {
            eprintln!("mbsp: warning: {message}");
            Ok(())
        }
    }

    /// Wait until every process has its part of checkpoint `seq` written (in the foreground)
    /// or copied (in the background). Until then no process may leave the checkpoint's sync:
    /// in the next superstep it could `hpput` into, or `hpget` from, memory another process is
    /// still reading for its part. Gives up when the run fails (the checkpoint may then be
    /// incomplete, and a restart uses the previous one).
    fn await_snapshots(&self, ck: &Checkpointer, seq: u64) -> Result<()> {
        let mut arrived = lock(&ck.arrived);
        // Older checkpoints are done: every process left them before this sync.
        arrived.retain(|&s, _| s >= seq);
        *arrived.entry(seq).or_insert(0) += 1;
        ck.arrivals.notify_all();
        loop {
            if arrived.get(&seq).copied() == Some(self.run.p) {
                return Ok(());
            }
            if self.run.tree.is_aborted() {
                return Err(self.stopped("checkpoint"));
            }
            arrived = ck
                .arrivals
                .wait_timeout(arrived, Duration::from_millis(20))
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }
}
