//! The end of a superstep.
//!
//! ```text
//! sync, superstep k, parity q = k mod 2
//!   copy hpsend payloads into outboxes; publish registration/tag-size requests (coll[q])
//!   barrier 1 ........ combines flags: COMM, GETS, REGS, TAGS, and whether processes ended
//!   nothing anywhere? -> done (one barrier)
//!   REGS|TAGS: compare own requests with pid 0's; apply own registration changes
//!   GETS: read the sources of own gets into the get buffer
//!   GETS|REGS: barrier 2 (all reads done, all tables updated)
//!   COMM: for every sender that wrote to us: copy its puts into our memory, queue its messages
//!   write own gets' data; count this sync as done
//! ```
//! Every write lands in the writer's own memory, so no third barrier is needed: a process
//! leaving the sync early can only touch its own memory and its next-parity outboxes.

use crate::barrier::{FLAG_COMM, FLAG_GETS, FLAG_OUTBOX, FLAG_REGS, FLAG_TAGS};
use crate::ctx::{Coll, Ctx};
use crate::error::{Error, ErrorKind, Result};
use crate::internals::SyncPoint;
use crate::outbox::Outbox;
use crate::registry::{RegOp, WILD, describe};
use crate::shim::Ordering;

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
        if self.end_outcome.is_some() {
            return Err(self.after_end("sync"));
        }
        #[cfg(feature = "mpi")]
        if self.net.is_some() {
            return self.rank_sync(false);
        }
        if self.run.tree.is_aborted() {
            return Err(self.refused_sync("sync"));
        }
        if self.prof.is_some() {
            return self.profiled_superstep_end(false);
        }
        self.superstep_end(false)
    }

    /// [`superstep_end`](Self::superstep_end) timed for the profile.
    #[cold]
    #[inline(never)]
    fn profiled_superstep_end(&mut self, ending: bool) -> Result<()> {
        if let Some(r) = &self.prof {
            r.borrow_mut().sync_begins();
        }
        let result = self.superstep_end(ending);
        if let Some(r) = &self.prof {
            r.borrow_mut().sync_ends();
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
        #[cfg(feature = "mpi")]
        if self.net.is_some() {
            return self.rank_sync(true);
        }
        if self.run.tree.is_aborted() {
            return Err(self.refused_sync("end"));
        }
        if self.prof.is_some() {
            return self.profiled_superstep_end(true);
        }
        self.superstep_end(true)
    }

    /// A sync of a run that has already failed: like every failed sync, it returns once no
    /// process touches shared memory any more.
    #[cold]
    #[inline(never)]
    fn refused_sync(&mut self, op: &'static str) -> Error {
        let e = self.stopped(op);
        self.quiesce();
        e
    }

    fn superstep_end(&mut self, ending: bool) -> Result<()> {
        let op = if ending { "end" } else { "sync" };
        let q = (self.step & 1) as usize;
        // Messages live for one superstep, and their senders overwrite them once past barrier 1.
        self.st.get_mut().queue.clear();
        let flags = self.flags.get();
        if flags & FLAG_COMM != 0 {
            self.flush_hpsends();
        }
        if flags & (FLAG_REGS | FLAG_TAGS) != 0 {
            self.publish_collective(q);
        }
        if ending {
            self.me().ended.store(true, Ordering::Relaxed);
        }

        let arrived = {
            let rides = self.rides.get_mut();
            let r = self.run.barrier.wait_riding(
                &mut self.member,
                flags,
                ending,
                rides,
                &mut self.rode,
            );
            for ride in rides.iter_mut() {
                ride.len = 0;
            }
            r
        };
        let out = match arrived {
            Ok(out) => out,
            Err(_) => return Err(self.failed_sync(self.stopped(op))),
        };
        if out.some_ended && !out.all_ended {
            let e = self.end_mismatch(op);
            return Err(self.failed_sync(e));
        }
        self.fault_point(SyncPoint::AfterBarrier1)?;
        let g = out.flags;
        if g == 0 {
            self.finish_sync();
            return Ok(());
        }

        let sent_tagsize = self.tagsize.get();
        if g & (FLAG_REGS | FLAG_TAGS) != 0 {
            if let Err(e) = self.collective(q, g) {
                return Err(self.failed_sync(e));
            }
        }
        if g & FLAG_GETS != 0 {
            let st = self.st.get_mut();
            for op in st.gets.iter_mut() {
                if op.dst_bits & g == 0 {
                    // No get of this superstep reads the destination (no process's get names a
                    // slot overlapping it): write it now, one copy instead of two.
                    // SAFETY: the source is in bounds of a live registration, which nobody
                    // writes before barrier 2 (the only writes before it are such direct gets,
                    // into areas no get reads); the destination is our own memory, with no live
                    // reference (we hold `&mut self`). `copy` tolerates overlap.
                    unsafe { std::ptr::copy(op.src, op.dst, op.len) };
                    op.direct = true;
                } else {
                    // SAFETY: as above, for the source.
                    op.buf_off = unsafe { st.getbuf.push_raw(op.src, op.len) };
                }
            }
        }
        self.fault_point(SyncPoint::AfterReads)?;
        if g & (FLAG_GETS | FLAG_REGS) != 0
            && self.run.barrier.wait(&mut self.member, 0, false).is_err()
        {
            return Err(self.failed_sync(self.stopped(op)));
        }
        self.fault_point(SyncPoint::AfterBarrier2)?;
        if g & FLAG_COMM != 0 {
            self.deliver_rides();
        }
        if g & FLAG_OUTBOX != 0 {
            self.receive(q, sent_tagsize);
        }
        let st = self.st.get_mut();
        if !st.gets.is_empty() {
            let base = st.getbuf.base();
            for op in st.gets.drain(..).filter(|op| !op.direct) {
                // SAFETY: the destination is this process's own memory (kept alive by the op or
                // promised by the raw caller) and no reference to it lives across `&mut self`.
                unsafe { std::ptr::copy_nonoverlapping(base.add(op.buf_off), op.dst, op.len) };
            }
            st.getbuf.clear();
        }
        self.finish_sync();
        Ok(())
    }

    /// Leave a failed sync: the error is recorded (the run ends), and we wait until no process
    /// can still read our memory before user code gets control back.
    #[cold]
    #[inline(never)]
    fn failed_sync(&mut self, e: Error) -> Error {
        self.run.tree.fail(&e);
        let st = self.st.get_mut();
        st.gets.clear();
        st.getbuf.clear();
        for ride in self.rode.iter_mut() {
            ride.len = 0;
        }
        self.quiesce();
        e
    }

    /// Fail here if a test asked for a failure at this point of this sync.
    #[inline]
    fn fault_point(&mut self, at: SyncPoint) -> Result<()> {
        if self.fault.get() != Some(at) {
            return Ok(());
        }
        self.fault.set(None);
        let e = self.abort(format!("failure injected {at:?}"));
        Err(self.failed_sync(e))
    }

    pub(crate) fn finish_sync(&mut self) {
        let st = self.st.get_mut();
        if !st.graveyard.is_empty() {
            st.graveyard.clear();
        }
        self.flags.set(0);
        self.step += 1;
        self.me().done.store(self.step, Ordering::Release);
    }

    pub(crate) fn flush_hpsends(&mut self) {
        let mut hps = std::mem::take(&mut self.st.get_mut().hpsends);
        for h in hps.drain(..) {
            // SAFETY: the hpsend caller promised the payload stays valid until this sync; its
            // record was reserved in this superstep's outbox for `h.pid` when it was called.
            self.with_outbox(h.pid, |ob| unsafe { ob.fill(h.at, h.payload, h.len) });
        }
        self.st.get_mut().hpsends = hps;
    }

    fn publish_collective(&mut self, q: usize) {
        let c = self.own_coll();
        // SAFETY: our own requests, before barrier 1.
        unsafe { self.me().publish(q, c) };
    }

    /// This superstep's registration and tag-size requests.
    pub(crate) fn own_coll(&mut self) -> Coll {
        let st = self.st.get_mut();
        Coll {
            stamp: self.step + 1,
            regs: st.reg_ops.iter().map(RegOp::signature).collect(),
            wild: st
                .reg_ops
                .iter()
                .filter_map(|o| match o {
                    RegOp::PopNull { cands } => Some(cands.clone()),
                    _ => None,
                })
                .collect(),
            tagsize: st.new_tagsize,
        }
    }

    /// Check that every process's registration and tag-size requests agree, then apply this
    /// process's registration changes to its own table. Every process checks all of them, so
    /// all reach the same verdict without another barrier, and none communicates after a
    /// mismatch.
    fn collective(&mut self, q: usize, g: u32) -> Result<()> {
        let colls = self.colls(q);
        self.collective_with(&colls, g).map(drop)
    }

    /// [`collective`](Self::collective) with every process's requests at hand; returns the
    /// registration changes applied, in order: (push?, slot, generation).
    pub(crate) fn collective_with(
        &mut self,
        colls: &[Coll],
        g: u32,
    ) -> Result<Vec<(bool, u32, u32)>> {
        let resolved = match self.agree(colls, g) {
            Ok(r) => r,
            Err((pid, msg)) => {
                let mut path = self.run.parent_path.clone();
                path.push(pid);
                return Err(Error::new(
                    ErrorKind::Misuse,
                    "sync",
                    path,
                    Some(self.step),
                    msg,
                ));
            }
        };
        self.named_cache.set(None);
        let st = self.st.get_mut();
        let (ops, graveyard, slots) = (&mut st.reg_ops, &mut st.graveyard, &mut st.slots);
        let mut resolved = resolved.into_iter();
        let mut applied = Vec::new();
        // SAFETY: our own table, between barrier 1 and barrier 2 (REGS forces barrier 2).
        unsafe {
            self.run.proc(self.pid).table_mut(|table| {
                for op in ops.drain(..) {
                    let op = match op {
                        RegOp::PopNull { .. } => RegOp::Pop {
                            slot: resolved.next().expect("a resolved NULL pop"),
                        },
                        op => op,
                    };
                    match op {
                        RegOp::Pop { slot } => {
                            slots.release(slot);
                            applied.push((false, slot, 0));
                        }
                        RegOp::Push {
                            slot, generation, ..
                        } => applied.push((true, slot, generation)),
                        RegOp::PopNull { .. } => {}
                    }
                    table.apply(op, graveyard);
                }
            })
        };
        if let Some(t) = st.new_tagsize.take() {
            self.tagsize.set(t);
        }
        Ok(applied)
    }

    /// Whether the requests of all processes agree: the registration calls of every process
    /// equal pid 0's (pushes of the same element type in the same slots, pops of the same
    /// slots; a NULL pop stands for the slot the others pop, which must be one of its null
    /// registrations) and so do the tag sizes. Returns the slots this process's NULL pops
    /// resolve to, or the first process that differs and the explanation.
    fn agree(&self, colls: &[Coll], g: u32) -> std::result::Result<Vec<u32>, (usize, String)> {
        let (step, p) = (self.step, self.run.p);
        if g & FLAG_TAGS != 0 {
            if let Some(pid) = (1..p).find(|&pid| colls[pid].tagsize != colls[0].tagsize) {
                let show = |t: Option<usize>| match t {
                    Some(t) => format!("asked for {t} bytes"),
                    None => "did not call set_tagsize".to_string(),
                };
                return Err((
                    pid,
                    format!(
                        "set_tagsize differs between processes in superstep {step}: pid 0 {}, \
                         pid {pid} {} (set_tagsize is collective)",
                        show(colls[0].tagsize),
                        show(colls[pid].tagsize)
                    ),
                ));
            }
        }
        if g & FLAG_REGS == 0 {
            return Ok(Vec::new());
        }
        let differ = |pid: usize| {
            (
                pid,
                format!(
                    "push_reg/pop_reg calls differ between processes in superstep {step}: pid 0 \
                     made {}, pid {pid} made {} (all processes must register and deregister in \
                     the same order, with the same element types)",
                    describe(&colls[0].regs),
                    describe(&colls[pid].regs)
                ),
            )
        };
        let root = &colls[0].regs;
        for (pid, c) in colls.iter().enumerate().skip(1) {
            let mine = &c.regs;
            let same_shape = mine.len() == root.len()
                && mine
                    .iter()
                    .zip(root)
                    .all(|(a, b)| a.push == b.push && (!a.push || a == b));
            if !same_shape {
                return Err(differ(pid));
            }
        }
        // Pops: every process pops the same slot; NULL pops take the others' slot.
        let mut resolved: Vec<Vec<u32>> = vec![Vec::new(); p];
        let mut popped: Vec<Vec<u32>> = vec![Vec::new(); p];
        let mut next_wild = vec![0usize; p];
        for i in (0..root.len()).filter(|&i| !root[i].push) {
            let named = (0..p).find_map(|pid| Some(colls[pid].regs[i].slot).filter(|&s| s != WILD));
            let agreed = match named {
                Some(s) => s,
                None => {
                    // Everyone pops NULL: the newest null registration all of them have and
                    // none of them pops already in this superstep (an earlier NULL pop of the
                    // same superstep had the same candidates).
                    let cands = |pid: usize| &colls[pid].wild[next_wild[pid]];
                    let free = |q: usize, s: &u32| cands(q).contains(s) && !popped[q].contains(s);
                    match cands(0)
                        .iter()
                        .copied()
                        .find(|s| (0..p).all(|q| free(q, s)))
                    {
                        Some(s) => s,
                        None => {
                            return Err((
                                0,
                                format!(
                                    "every process popped NULL in superstep {step}, but they \
                                     have no null registration in common"
                                ),
                            ));
                        }
                    }
                }
            };
            for pid in 0..p {
                if colls[pid].regs[i].slot == WILD {
                    let cands = &colls[pid].wild[next_wild[pid]];
                    next_wild[pid] += 1;
                    if !cands.contains(&agreed) {
                        return Err((
                            pid,
                            format!(
                                "pop_reg of NULL in superstep {step}: the other processes pop slot \
                                 {agreed}, where pid {pid} has no null registration (a NULL pop \
                                 stands for the registration the others pop)"
                            ),
                        ));
                    }
                    resolved[pid].push(agreed);
                } else if colls[pid].regs[i].slot != agreed {
                    return Err(differ(if pid == 0 { 1 } else { pid }));
                }
                if popped[pid].contains(&agreed) {
                    return Err((
                        pid,
                        format!(
                            "pid {pid} pops the registration in slot {agreed} twice in superstep \
                             {step}"
                        ),
                    ));
                }
                popped[pid].push(agreed);
            }
        }
        Ok(std::mem::take(&mut resolved[self.pid]))
    }

    /// Every process's requests of the superstep of parity `q` (published before barrier 1).
    fn colls(&self, q: usize) -> Vec<Coll> {
        let (stamp, run) = (self.step + 1, &*self.run);
        // SAFETY: requests are written before barrier 1 and not again before the next sync's.
        (0..run.p)
            .map(|pid| unsafe {
                run.proc(pid).coll(q, |c| {
                    if c.stamp == stamp {
                        c.clone()
                    } else {
                        Coll::default()
                    }
                })
            })
            .collect()
    }

    /// Deliver the puts that rode in the barrier lines we read.
    fn deliver_rides(&mut self) {
        for ride in self.rode.iter_mut().filter(|r| r.len > 0) {
            // SAFETY: the records were made by `put` of a sender whose checks made their
            // destinations our own registered memory, kept alive by our table or graveyard,
            // with no live references (we hold `&mut self`).
            unsafe { Outbox::deliver(ride.words.as_ptr() as *const u8, ride.len * 8) };
            ride.len = 0;
        }
    }

    /// Deliver the puts of every sender that wrote to us and queue its messages. An outbox is
    /// fresh iff its stamp names this superstep; stale ones stay cached, so checking all p
    /// senders costs little more than reading the ones that wrote.
    fn receive(&mut self, q: usize, tagsize: usize) {
        let (me, fresh) = (self.pid, self.step + 1);
        let run = &*self.run;
        let queue = &mut self.st.get_mut().queue;
        queue.tagsize = tagsize;
        queue.parity = q;
        for (i, sender) in run.procs.iter().enumerate() {
            // SAFETY: the sender filled its parity-q outboxes before barrier 1 and leaves them
            // alone until after the next sync's barrier 1.
            unsafe {
                sender.outboxes(q, |outs| {
                    let Some(ob) = outs[me].as_deref() else {
                        return;
                    };
                    if ob.stamp != fresh {
                        return;
                    }
                    // Put destinations are our own registered memory, kept alive by our table
                    // or graveyard, with no live references (we hold `&mut self`).
                    ob.deliver_puts();
                    if ob.msg_count > 0 {
                        queue.srcs.push(i as u32);
                        queue.left += ob.msg_count;
                        queue.left_bytes += ob.msg_bytes;
                    }
                })
            };
        }
    }

    #[cold]
    fn end_mismatch(&self, op: &'static str) -> Error {
        let (ended, synced): (Vec<usize>, Vec<usize>) =
            (0..self.run.p).partition(|&i| self.run.proc(i).ended.load(Ordering::Relaxed));
        self.misuse(
            op,
            format!(
                "pid(s) {ended:?} returned from the SPMD function while pid(s) {synced:?} called \
                 sync (every process must call sync the same number of times)"
            ),
        )
    }
}
