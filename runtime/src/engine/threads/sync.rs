//! The thread engine's sync (the protocol in the module documentation above).

use super::lazy::wake_if_all_entered;
use super::ride::Ride;
use super::riders::NO_RIDE;
use crate::ctx::{Ctx, SyncPoint};
use crate::error::{Error, Result};
use crate::flags::{
    FLAG_CHECKPOINT, FLAG_COMM, FLAG_DECLARED, FLAG_EVEN_STEP, FLAG_GETS, FLAG_ODD_STEP,
    FLAG_OUTBOX, FLAG_REGS, FLAG_TAGS, FLAG_UNDECLARED, step_flag,
};
use crate::queue::Src;
use crate::requests::Coll;
use crate::shim::Ordering;

impl Ctx {
    /// A sync of a run that has already failed: like every failed sync, it returns once no
    /// process touches shared memory any more.
    #[cold]
    #[inline(never)]
    pub(super) fn refused_sync(&mut self, op: &'static str) -> Error {
        let e = self.stopped(op);
        self.quiesce();
        e
    }

    /// The sync of a thread run: a lazy sync when the processes declared their counts (and the
    /// run's declared syncs do not take the barrier), else the full sync below.
    pub(super) fn superstep_end(&mut self, ending: bool) -> Result<()> {
        let op = if ending { "end" } else { "sync" };
        // Messages live for one superstep, and their senders overwrite them once past barrier 1
        // (or, after a lazy sync, once we have acknowledged them): owned messages nobody moved
        // out are freed here, before that.
        self.clear_queue();
        let declared = self.lazy.get();
        // A run whose declared syncs take the barrier (`RunState::declared_at_barrier`).
        let at_barrier = self.run.engine.threads().declared_at_barrier && !ending;
        match declared {
            Some(m) if !ending && !at_barrier => self.lazy_sync(m),
            _ => self
                .full_sync(op, ending, declared, at_barrier)
                .map_err(|e| self.failed_sync(e)),
        }
    }

    /// The full sync of the module documentation, phase by phase; an error is the run's
    /// failure, which the caller completes ([`failed_sync`](Self::failed_sync)).
    #[inline]
    fn full_sync(
        &mut self,
        op: &'static str,
        ending: bool,
        declared: Option<u64>,
        at_barrier: bool,
    ) -> Result<()> {
        let (q, o) = ((self.step & 1) as usize, self.slot);
        // A declared sync that takes the barrier is a full one (the next one acknowledges
        // nothing); a declared final sync counts as lazy, which nothing after the end reads.
        let lazy = declared.is_some() && !self.run.engine.threads().declared_at_barrier;
        let flags = self.enter_full(ending, declared, at_barrier)?;
        let g = self.barrier_one(op, flags, ending, at_barrier)?;
        // Every process has made this superstep's sync a full one (`Ctx::stuck_at`).
        self.engine.threads_mut().lazy_since = self.step + 1;
        if g & FLAG_CHECKPOINT != 0 {
            self.synced_flags.set(g);
        }
        self.fault_point(SyncPoint::AfterBarrier1)?;
        if g == 0 && declared.is_none() {
            self.finish_sync(lazy);
            return Ok(());
        }
        let sent_tagsize = self.tagsize.get();
        if g & (FLAG_REGS | FLAG_TAGS) != 0 {
            self.collective(q, g)?;
        }
        if g & FLAG_GETS != 0 {
            self.read_gets(g);
        }
        self.fault_point(SyncPoint::AfterReads)?;
        if g & (FLAG_GETS | FLAG_REGS) != 0 {
            self.barrier_two(op)?;
        }
        self.fault_point(SyncPoint::AfterBarrier2)?;
        let got = self.deliver(o, g, declared.is_some(), sent_tagsize);
        if g & FLAG_OUTBOX != 0 {
            self.share_deliveries(o);
        }
        if let Some(m) = declared.filter(|&m| m != got) {
            return Err(self.wrong_count(op, m, got, ending));
        }
        self.write_gets();
        self.finish_sync(lazy);
        Ok(())
    }

    /// Before barrier 1: acknowledge the senders of a lazy sync, tell the destinations of our
    /// outboxes, publish the collective requests; returns the flags this process brings to the
    /// barrier.
    #[inline(always)]
    fn enter_full(&mut self, ending: bool, declared: Option<u64>, at_barrier: bool) -> Result<u32> {
        let (q, o) = ((self.step & 1) as usize, self.slot);
        if let (Some(m), true) = (declared, at_barrier) {
            // What a lazy superstep refuses, this one refuses too.
            if let Some(e) = self.lazy_refusal(self.flags.get(), m) {
                return Err(e);
            }
        }
        self.ack_previous(false);
        let mut flags = self.flags.get();
        if at_barrier {
            flags |= if declared.is_some() {
                FLAG_DECLARED
            } else {
                FLAG_UNDECLARED
            };
        }
        if flags & FLAG_COMM != 0 {
            self.flush_hpsends();
        }
        self.mark_written(o)?;
        if ending {
            // Before the mode word, which publishes it: a lazy process that finds this one
            // waiting in its final sync says that it ended (`Ctx::mixed_syncs_at`).
            let me = &self.run.engine.threads().peers[self.pid];
            me.ended.store(self.run_id, Ordering::Relaxed);
        }
        self.run
            .engine
            .threads()
            .inbox(self.pid)
            .enter(o, self.base, self.step, false);
        if flags & (FLAG_REGS | FLAG_TAGS) != 0 {
            // The requests of this parity were last read in the sync two supersteps back: after
            // a full sync every process had finished it, after a lazy one we make sure.
            if self.prev_lazy {
                for j in 0..self.run.p {
                    self.wait_completed(j, self.step - 1)?;
                }
            }
            self.publish_collective(q);
        }
        Ok(flags)
    }

    /// Barrier 1, with our riding puts: returns the flags of every process ORed, once they
    /// are checked for processes of different supersteps or kinds of sync, and for some
    /// processes ending while others sync.
    #[inline]
    fn barrier_one(
        &mut self,
        op: &'static str,
        flags: u32,
        ending: bool,
        at_barrier: bool,
    ) -> Result<u32> {
        let arrived = {
            let (run, pid, base, step) = (&*self.run, self.pid, self.base, self.step);
            let barrier = &run.engine.threads().barrier;
            let me = self.engine.threads_mut();
            let rides = me.rides.get_mut();
            let flags = flags | step_flag(step);
            // A process that made a lazy sync of this superstep (a misuse) may sleep until
            // every process has entered it: we wake it after our arrival's fence, which
            // follows our mode word (`Inbox::enter` above).
            let r = barrier.wait_riding(&mut me.member, flags, ending, rides, &mut me.rode, || {
                wake_if_all_entered(run, pid, base, step)
            });
            for ride in rides.iter_mut() {
                ride.clear();
            }
            r
        };
        let out = arrived.map_err(|_| self.stopped(op))?;
        if out.flags & (FLAG_EVEN_STEP | FLAG_ODD_STEP) == FLAG_EVEN_STEP | FLAG_ODD_STEP {
            return Err(self.mixed_at_barrier());
        }
        if at_barrier
            && out.flags & (FLAG_DECLARED | FLAG_UNDECLARED) == FLAG_DECLARED | FLAG_UNDECLARED
        {
            return Err(self.declared_and_not());
        }
        if out.some_ended && !out.all_ended {
            return Err(self.end_mismatch(op));
        }
        if self.run.engine.threads().lazy_used.load(Ordering::Relaxed) {
            self.check_after_lazy()?;
            if self.prev_lazy {
                self.check_owed()?;
            }
        }
        Ok(out.flags & !(FLAG_EVEN_STEP | FLAG_ODD_STEP | FLAG_DECLARED | FLAG_UNDECLARED))
    }

    /// Between the barriers: read the sources of this process's gets (`g`: every process's
    /// flags, with the get-source bits of the slots some get reads).
    #[inline]
    fn read_gets(&mut self, g: u32) {
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

    /// Barrier 2: every process has read its gets' sources and updated its registrations.
    #[inline]
    fn barrier_two(&mut self, op: &'static str) -> Result<()> {
        let barrier = &self.run.engine.threads().barrier;
        let me = &mut self.engine.threads_mut().member;
        if barrier.wait(me, 0, false).is_err() {
            return Err(self.stopped(op));
        }
        Ok(())
    }

    /// After the barriers: deliver the puts that rode in the barrier lines we read and those
    /// of every sender that wrote to our outbox, and queue its messages; returns the records
    /// taken when they are counted (`declared`: this superstep declared its count).
    #[inline]
    fn deliver(&mut self, o: usize, g: u32, declared: bool, tagsize: usize) -> u64 {
        let mut got = 0;
        let mut rode_messages = false;
        if g & FLAG_COMM != 0 {
            if declared {
                got += self
                    .engine
                    .threads()
                    .rode
                    .iter()
                    .map(Ride::records)
                    .sum::<u64>();
            }
            rode_messages = self.deliver_rides(tagsize);
        }
        if g & FLAG_OUTBOX != 0 {
            got += self.receive(o, tagsize, true);
            if rode_messages {
                // Senders in pid order, each one's riding messages (queued first, and kept
                // first by the stable sort) before its outbox's: it sent them first (`ride.rs`).
                self.st.get_mut().queue.srcs.sort_by_key(|s| s.pid);
            }
        }
        got
    }

    /// After our deliveries of a sync in which some process wrote to an outbox (`share.rs`):
    /// tell our helpers, if we shared a copy, that they are complete; then, if we made a large
    /// put, help each destination of one in our package with its copies until its deliveries
    /// are complete too. No cycle of waits: each process marks its own deliveries complete
    /// before it helps.
    #[inline]
    fn share_deliveries(&self, o: usize) {
        let threads = self.run.engine.threads();
        let (mark, me) = (self.base.wrapping_add(self.step + 1), self.pid);
        threads.peers[me].desk.delivered(mark);
        if !self.engine.threads().sent_large.replace(false) || !threads.share {
            return;
        }
        for &d in &self.written.borrow()[o] {
            let d = d as usize;
            // Across packages a helper's writes would be remote ones: receivers write their
            // own memory there. SAFETY: our own outboxes of this superstep, which receivers
            // only read now.
            let large = d != me
                && threads.groups[d] == threads.groups[me]
                && unsafe {
                    self.me()
                        .outboxes(o, |outs| outs[d].as_deref().is_some_and(|ob| ob.large))
                };
            if !large {
                continue;
            }
            let (done, step, base) = (&self.run.procs[d].done, self.step, self.base);
            let stop = || self.run.tree.is_aborted() || done.since(base) > step;
            // SAFETY: `d` opens jobs only to deliver puts (`take_outbox`), and we are not `d`.
            unsafe { threads.peers[d].desk.help(mark, self.run.policy, stop) };
        }
    }

    /// Write this process's gets' data from the get buffer (those not written directly).
    #[inline]
    fn write_gets(&mut self) {
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
    }

    /// The error of a declared sync that took the barrier (or the final sync after a
    /// declaration) and received `got` records where `m` were declared.
    #[cold]
    fn wrong_count(&self, op: &'static str, m: u64, got: u64, ending: bool) -> Error {
        self.misuse(
            op,
            format!(
                "pid {} called declare_incoming({m}) in superstep {} but received {got} puts/messages{}",
                self.pid,
                self.step,
                if ending {
                    " (the final sync is a full one: the count is checked there)"
                } else {
                    ""
                }
            ),
        )
    }

    /// Leave a failed sync: the error is recorded (the run ends), and we wait until no process
    /// can still read our memory before user code gets control back.
    #[cold]
    #[inline(never)]
    pub(super) fn failed_sync(&mut self, e: Error) -> Error {
        self.run.tree.fail(&e);
        let st = self.st.get_mut();
        st.gets.clear();
        st.getbuf.clear();
        for ride in self.engine.threads_mut().rode.iter_mut() {
            ride.reset();
        }
        self.quiesce();
        e
    }

    /// Fail here if a test asked for a failure at this point of this sync.
    #[inline(always)]
    fn fault_point(&mut self, at: SyncPoint) -> Result<()> {
        if self.fault.get() != Some(at) {
            return Ok(());
        }
        Err(self.injected_failure(at))
    }

    /// The failure a test asked for at `at` ([`fault_point`](Self::fault_point)).
    #[cold]
    #[inline(never)]
    fn injected_failure(&mut self, at: SyncPoint) -> Error {
        self.fault.set(None);
        self.abort(format!("failure injected {at:?}"))
    }

    fn publish_collective(&mut self, q: usize) {
        // SAFETY: our own requests, before barrier 1.
        unsafe { self.me().publish_with(q, |c| self.fill_coll(c)) };
    }

    /// Check that every process's registration and tag-size requests agree, then apply this
    /// process's registration changes to its own table. Every process checks all of them, so
    /// all reach the same verdict without another barrier, and none communicates after a
    /// mismatch.
    fn collective(&mut self, q: usize, g: u32) -> Result<()> {
        if self.same_requests_everywhere(q) {
            self.apply_requests(Vec::new(), None);
            return Ok(());
        }
        let colls = self.colls(q);
        self.collective_with(&colls, g).map(drop)
    }

    /// Whether every process published exactly this process's registration and tag-size
    /// requests for the superstep of parity `q`, and they are plain ([`Ctx::plain_requests`]):
    /// the usual case (a registration made by all, a collective's exposed buffer, a tag size
    /// set by all), which `agree` would accept with nothing to resolve. Found by reading the
    /// others' requests where they lie: copying them all, as the general check does, allocated
    /// several vectors per registering sync.
    fn same_requests_everywhere(&self, q: usize) -> bool {
        let (stamp, run, me) = (self.step + 1, &*self.run, self.pid);
        // SAFETY: requests are written before barrier 1 and not again before the next sync's.
        unsafe {
            run.proc(me).coll(q, |mine| {
                mine.stamp == stamp
                    && Ctx::plain_requests(mine)
                    && (0..run.p).filter(|&pid| pid != me).all(|pid| {
                        run.proc(pid).coll(q, |c| {
                            c.stamp == stamp && c.regs == mine.regs && c.tagsize == mine.tagsize
                        })
                    })
            })
        }
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

    /// Deliver the puts that rode in the barrier lines we read, and queue the messages (they
    /// stay in our copy of the lines until the next barrier); whether there were any.
    fn deliver_rides(&mut self, tagsize: usize) -> bool {
        let (run, me) = (&*self.run, self.pid);
        let queue = &mut self.st.get_mut().queue;
        let mut any = false;
        for (round, ride) in self.engine.threads_mut().rode.iter_mut().enumerate() {
            if ride.len == 0 {
                continue;
            }
            // SAFETY: the records were made by `put` of a sender whose checks made their
            // destinations our own registered memory, kept alive by our table or graveyard,
            // with no live references (we hold `&mut self`).
            let (count, bytes) = unsafe { ride.deliver_puts() };
            if count > 0 {
                queue.srcs.push(Src {
                    pid: run.engine.threads().barrier.sources(me)[round],
                    rode: Some(round as u8),
                });
                queue.left += count;
                queue.left_bytes += bytes;
                any = true;
            }
        }
        // Set whether or not messages came: a checkpoint saves it with the queue.
        queue.tagsize = tagsize;
        any
    }

    /// Tell every destination of this superstep's outboxes that we wrote to it (before the
    /// barrier, or before announcing in a lazy sync). After lazy syncs a destination may be
    /// behind: its bits of this slot are free once it has completed the sync `SLOTS`
    /// supersteps back (where it took them), which we wait for (usually at once).
    #[inline(always)]
    pub(super) fn mark_written(&self, o: usize) -> Result<()> {
        // Most supersteps of short syncs write to nobody: no call then.
        if self.written.borrow()[o].is_empty() {
            return Ok(());
        }
        self.mark_destinations(o)
    }

    /// [`mark_written`](Self::mark_written) of a superstep that wrote to some process.
    #[inline(never)]
    fn mark_destinations(&self, o: usize) -> Result<()> {
        let written = self.written.borrow();
        let threads = self.run.engine.threads();
        let lazy_used = threads.lazy_used.load(Ordering::Relaxed);
        let mut rides = self.engine.threads().rides.borrow_mut();
        for &d in &written[o] {
            if lazy_used {
                self.wait_completed(d as usize, self.run.slot_free_after(self.step))?;
            } else {
                // A destination that alone reads one of our barrier lines learns it from that
                // line (`Ride::outbox`): its inbox's line stays in its own cache. Not after
                // lazy syncs, whose receivers take their senders from the inbox alone.
                let round = threads.riders.round(self.pid, d as usize);
                if round != NO_RIDE {
                    rides[round as usize].outbox = true;
                    continue;
                }
            }
            threads.inbox(d as usize).mark(o, self.pid);
        }
        Ok(())
    }

    /// Deliver the puts of every sender that marked us (`inbox.rs`) and queue its messages;
    /// returns the number of records taken and keeps the senders in `took`. Only their
    /// outboxes are read: a full sync reads p / 64 bitmap words instead of p outbox stamps, and
    /// a lazy one never touches an outbox another process may be refilling.
    pub(super) fn receive(&mut self, o: usize, tagsize: usize, rode: bool) -> u64 {
        let (me, fresh) = (self.pid, self.step + 1);
        let run = &*self.run;
        let threads = self.engine.threads_mut();
        let took = &mut threads.took;
        took.clear();
        run.engine.threads().inbox(me).take_writers(o, took);
        if rode {
            // The senders whose barrier lines said so (a full sync's `mark_destinations`),
            // merged in pid order: the queue keeps the senders' messages in that order.
            let sources = run.engine.threads().barrier.sources(me);
            for (round, ride) in threads.rode.iter().enumerate() {
                if ride.outbox {
                    took.push(sources[round]);
                }
            }
            if !took.is_sorted() {
                took.sort_unstable();
            }
        }
        let queue = &mut self.st.get_mut().queue;
        queue.tagsize = tagsize;
        queue.slot = o;
        let mut records = 0;
        for &i in took.iter() {
            // SAFETY: the sender filled its slot-o outbox for us before marking us (in our
            // inbox, or in its barrier line: both stores Release, our reads Acquire) and leaves
            // it alone until we have finished with it (the next sync's barrier 1, or our ack).
            records += unsafe { take_outbox(run, i, me, o, fresh, queue) };
        }
        records
    }

    /// The error of a superstep of a run whose declared syncs take the barrier in which some
    /// processes declared counts and others did not (both sides see it at the barrier).
    #[cold]
    fn declared_and_not(&self) -> Error {
        let others: Vec<usize> = (0..self.run.p).filter(|&j| j != self.pid).collect();
        let (s, me) = (self.step, self.pid);
        let text = match self.lazy.get() {
            Some(m) => format!(
                "pid(s) {others:?} made a full sync in superstep {s} while pid {me} made a lazy \
                 one (it called declare_incoming({m}); declare_incoming is collective: every process declares in \
                 the same superstep)"
            ),
            None => format!(
                "pid {me} made a full sync in superstep {s} while pid(s) {others:?} made a lazy \
                 one (declare_incoming is collective: every process declares \
                 in the same superstep)"
            ),
        };
        self.misuse("sync", text)
    }

    #[cold]
    fn end_mismatch(&self, op: &'static str) -> Error {
        let (ended, synced): (Vec<usize>, Vec<usize>) = (0..self.run.p).partition(|&i| {
            self.run.engine.threads().peers[i]
                .ended
                .load(Ordering::Relaxed)
                == self.run_id
        });
        self.misuse(
            op,
            format!(
                "pid(s) {ended:?} returned from the SPMD function while pid(s) {synced:?} called \
                 sync (every process must call sync the same number of times)"
            ),
        )
    }
}

/// Deliver the puts of sender `i`'s outbox of slot `o` for process `me` and queue its
/// messages, if the outbox is of the superstep whose stamp is `fresh`; returns its records.
///
/// # Safety
/// The sender has filled that outbox for `me` (it marked or announced it) and leaves it alone
/// until `me` has finished with it (the next sync's barrier 1, or `me`'s acknowledgement); the
/// caller is process `me`, holding its context mutably (put destinations are its own
/// registered memory, kept alive by its table or graveyard, with no live references).
pub(super) unsafe fn take_outbox(
    run: &crate::ctx::RunShared,
    i: u32,
    me: usize,
    o: usize,
    fresh: u64,
    queue: &mut crate::queue::Queue,
) -> u64 {
    let mut records = 0;
    // SAFETY: the caller's promise.
    unsafe {
        run.proc(i as usize).outboxes(o, |outs| {
            let Some(ob) = outs[me].as_deref() else {
                return;
            };
            if ob.stamp != fresh {
                // Records of an earlier superstep that came late: reported by the lazy
                // sync's checks, never delivered.
                return;
            }
            records = ob.records();
            let desk = &run.engine.threads().peers[me].desk;
            // SAFETY: the caller is `me`, the desk's owner; a put's source (the sender's
            // outbox or bulk area) and destination (our memory) do not overlap, and nobody
            // else writes either while we deliver.
            ob.deliver_puts_with(|src, dst, len| desk.copy(src, dst, len));
            if ob.msg_count > 0 {
                queue.srcs.push(Src { pid: i, rode: None });
                queue.left += ob.msg_count;
                queue.left_bytes += ob.msg_bytes;
                queue.owned += ob.owned.len();
            }
        })
    };
    records
}
