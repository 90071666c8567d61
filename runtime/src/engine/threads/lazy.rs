//! The thread engine's lazy sync (semantics in `crate::lazy`), and the checks full syncs make
//! once a run has used lazy syncs. Runs of at most `LANE_P` processes announce through lanes
//! instead of the inboxes below (`lane_sync.rs`); everything else here holds for both.
//!
//! ```text
//! lazy sync, superstep s, slot o = s mod S (the run's sets of outboxes), declared m
//!   copy hpsend payloads and barrier-line puts into outboxes
//!   ack: tell every sender read in the last sync that its outbox of slot o-1 is free
//!   announce: for every destination written: mark our bit in its writers[o], add our records
//!   enter: mode[o] = (s+1) << 1 | 1   (everything we send in s is announced)
//!   fence; wake the acked and announced-to processes if asleep, and every lazy sleeper if
//!     every process has now entered sync s
//!   wait until announced(o) - taken >= m   (or: every process has entered sync s -> too few)
//!   take the marked senders' outboxes: deliver puts, queue messages; records taken == m?
//!   our records of s-1 are now owed acks (their receivers ack them in this sync)
//!   wait until every destination of superstep s+1-S has acked (the outboxes of slot o+1,
//!     which superstep s+1 refills, are free)
//! ```
//!
//! ## Slack
//!
//! A sender waits for the acknowledgements of a superstep only when it is about to refill
//! that superstep's outboxes, S supersteps later: it may run up to S - 1 supersteps ahead of a
//! receiver that has not acknowledged yet. Runs with more processes than cores have S = 3
//! (`outbox::SLOTS`): a process then runs two supersteps per turn on its core before it yields,
//! where with S = 2 it yielded in nearly every superstep (all to one, 64 processes on 2 cores:
//! `mbsp-bench lazy`). Other runs have S = 2, which keeps buffered puts' memory at two
//! supersteps' worth. Runs with lanes do the same with one lane per slot (`lane_sync.rs`): the
//! acknowledgements a receiver gave in its lane are read at once, those owed in the inbox
//! are awaited when their slot comes round.
//!
//! ## Why no process reads or writes what another still uses
//!
//! * A receiver reads a sender's outboxes of slot o only for senders whose bit it took, and
//!   only until its next sync starts (the queue is emptied there); it acks them in that next
//!   sync when it is lazy, and a full next sync is a barrier.
//! * A sender refills its slot-o outboxes in superstep s+S only after its sync s+S-1: when
//!   that is lazy it waited for the acks of every destination of superstep s (owed since its
//!   sync s+1); when a full sync came in between, every process had entered it, and the sender
//!   checked there that every ack owed was in.
//! * Inbox slots work the same way: a sender marks and announces in slot o of a destination
//!   only once that destination has completed its sync of superstep s-S, where it took that
//!   slot's bits last (at once when the destination wrote to it in superstep s-1).
//! * Records that reach a receiver after it completed their superstep are never delivered into
//!   a later one: the sender's ack wait fails when every destination has entered the next sync
//!   without acking (lazy next sync), or the receiver finds their bit left over at its next
//!   full sync.
//!
//! ## Never a hang
//!
//! A wait for records or acks that cannot come ends as soon as every process it could come
//! from has entered the sync (their `mode` words say so, and say whether that sync is lazy):
//! then nothing more will arrive, and the count is final. It ends too when the first of them
//! that has not entered it made a full sync of an earlier superstep in which this process made
//! a lazy one (`stuck_at`): that process waits at its barrier for processes that will not
//! come, and this one passed that superstep without waiting (it declared nothing, as a star's
//! senders do). The misuse is reported, the run fails, and the barrier's wait ends with it.
//!
//! ## Mixed syncs
//!
//! A process that makes a lazy sync where others make a full one skips a barrier episode, so
//! its next full sync arrives at the episode of the others' superstep from a later one. Every
//! process ORs its superstep's parity into barrier 1's flags (`barrier::step_flag`): an episode
//! that sees both parities fails on every process that completes it. A full sync after lazy
//! ones also looks at the next process's mode word of the superstep's slot (one that skipped
//! two episodes has the same parity again); each process looks at one, not at all p.
//!
//! ## Sleeping and waking
//!
//! A lazy wait that must sleep (oversubscription: its senders need its core) sleeps on the
//! process's barrier signal, so that an abort wakes it, and counts itself in the run's
//! `lazy_sleepers`. A process that enters a sync issues one `fence(SeqCst)` after its acks,
//! announcements and mode word (a lazy sync in `wake_after_enter`, a full one in its barrier
//! arrival, whose notification shares the fence), then runs the notifier's side
//! of the sleep handshake (`wait.rs`): it wakes the processes it acked or announced to if they
//! sleep; and if `lazy_sleepers` is not zero and every process has now entered the sync, it
//! wakes every sleeper, whose stop condition now holds (a short count is then an error, never
//! a hang; a full sync where others made lazy ones does the same, so the misuse is reported).
//! With nobody asleep this costs the fence and loads of lines that stay in the cache. The
//! wait for a destination to complete an earlier sync (`wait_completed`, taken only when a
//! process writes to one that did not write to it) still polls in naps: `done` is stored by
//! every sync, full ones included, and is rarely awaited.

use super::inbox::mode_word;
use super::ride::Rec;
use crate::ctx::{Ctx, RunShared};
use crate::error::{Error, Result};
use crate::flags::FLAG_COMM;
use crate::outbox::SLOTS;
use crate::shim::Ordering;
use crate::wait::Sleep;

impl Ctx {
    /// The lazy sync of the current superstep, `m` records declared (module documentation).
    pub(super) fn lazy_sync(&mut self, m: u64) -> Result<()> {
        self.lazy_phases(m).map_err(|e| self.failed_sync(e))
    }

    /// The phases of a lazy sync, through lanes in a run that has them (`lane_sync.rs`), else
    /// through the inboxes; an error is the run's failure, which the caller completes.
    fn lazy_phases(&mut self, m: u64) -> Result<()> {
        let flags = self.flags.get();
        if let Some(e) = self.lazy_refusal(flags, m) {
            return Err(e);
        }
        let lazy_used = &self.run.engine.threads().lazy_used;
        if !lazy_used.load(Ordering::Relaxed) {
            lazy_used.store(true, Ordering::Relaxed);
        }
        if flags & FLAG_COMM != 0 {
            self.flush_hpsends();
            self.rides_to_outboxes()?;
        }
        if self.run.engine.threads().lanes.is_some() {
            return self.lane_sync(m);
        }
        // The senders read in the last sync may refill those outboxes.
        self.ack_previous(true);
        self.announce_and_enter()?;
        let o = self.slot;
        let base = self.engine.threads().records_taken[o];
        self.await_announced(m, base)?;
        let got = self.receive(o, self.tagsize.get(), false);
        self.check_announced(m, base, got)?;
        self.engine.threads_mut().records_taken[o] = base + got;
        // Our records of the superstep before are acknowledged in this sync; the outboxes the
        // next superstep refills are free once their readers have acknowledged them.
        self.owe_previous();
        self.settle_owed(self.run.slot(self.step + 1))?;
        self.finish_sync(true);
        Ok(())
    }

    /// The receivers of our records of the superstep before acknowledge them in this sync (it
    /// or the one before is lazy): note them as owed, to wait for when their outboxes are
    /// about to be refilled (`settle_owed`) or at the next full sync (`check_owed`).
    pub(super) fn owe_previous(&mut self) {
        if let Some(t) = self.step.checked_sub(1) {
            let o = self.run.slot(t);
            let me = self.engine.threads_mut();
            me.owed[o] = Some(t);
            me.owed_dests[o].clear();
            me.owed_dests[o].extend_from_slice(&self.written.borrow()[o]);
        }
    }

    /// Wait for the acknowledgements owed for our outboxes of slot `o`, if any.
    pub(super) fn settle_owed(&mut self, o: usize) -> Result<()> {
        let Some(t) = self.engine.threads().owed[o] else {
            return Ok(());
        };
        let acked = self.await_acks(o, t, &self.engine.threads().owed_dests[o]);
        let me = self.engine.threads_mut();
        me.acks_due[o] = acked?;
        me.owed[o] = None;
        Ok(())
    }

    /// Announce what we sent, then say that we have entered the sync, then wake whoever
    /// sleeps on that.
    fn announce_and_enter(&mut self) -> Result<()> {
        let s = self.step;
        let announced = self.announce(self.run.slot(s));
        if announced.is_ok() {
            self.run
                .engine
                .threads()
                .inbox(self.pid)
                .enter(self.run.slot(s), self.base, s, true);
            self.wake_after_enter(s);
        }
        self.engine.threads_mut().took_before.clear();
        announced
    }

    /// Wait until `m` records beyond the `base` taken before are announced to us (or every
    /// other process has entered this sync: then a short count is final).
    fn await_announced(&mut self, m: u64, base: u64) -> Result<()> {
        let (s, pid, p) = (self.step, self.pid, self.run.p);
        let q = self.run.slot(s);
        let mut waiter = self.engine.threads_mut().member.take_waiter();
        let run = &*self.run;
        let inbox = run.engine.threads().inbox(pid);
        let waited = waiter.wait(
            run.engine.threads().lazy_policy,
            self.lazy_sleep(),
            || (inbox.announced(q) - base >= m).then_some(()),
            || run.tree.is_aborted() || self.lazy_wait_over(s, (0..p).filter(|&j| j != pid)),
            || false,
        );
        self.engine.threads_mut().member.restore_waiter(waiter);
        if waited.is_err() {
            if self.run.tree.is_aborted() {
                return Err(self.stopped("sync"));
            }
            if let Some(e) = self.stuck_in_full((0..p).filter(|&j| j != pid)) {
                return Err(e);
            }
            let got = self.run.engine.threads().inbox(pid).announced(q) - base;
            if got < m {
                return Err(self.short_count(m, got));
            }
        }
        Ok(())
    }

    /// After taking `got` records: they are the `m` declared, and exactly those announced
    /// (more announced than taken: records that came after we took our senders, too many or
    /// late from an earlier superstep).
    fn check_announced(&self, m: u64, base: u64, got: u64) -> Result<()> {
        let (s, q) = (self.step, self.slot);
        let run = &*self.run;
        let inbox = run.engine.threads().inbox(self.pid);
        // A sender we took may not have announced yet (it marks first): that takes a moment.
        let _ = crate::wait::wait_until(
            run.engine.threads().lazy_policy,
            self.lazy_sleep(),
            || (inbox.announced(q) - base >= got).then_some(()),
            || run.tree.is_aborted(),
        );
        let announced = inbox.announced(q) - base;
        let stale = self.stale_senders(s);
        if got != m || announced != got || !stale.is_empty() {
            return Err(self.count_mismatch(m, got.max(announced), &stale));
        }
        Ok(())
    }

    /// Wait until the receivers `dests` of our records of superstep `t` (slot `o`) have
    /// acknowledged them in our inbox, one each; returns the acknowledgements then due since
    /// the run began (the new `acks_due[o]`). Fails when the run fails, or when every one of
    /// `dests` has entered its sync of superstep `t + 1` (where it acknowledges what it took)
    /// without acknowledging (our records came late).
    pub(super) fn await_acks(&self, o: usize, t: u64, dests: &[u32]) -> Result<u64> {
        let inbox = &self.run.engine.threads().inbox(self.pid);
        let want = self.engine.threads().acks_due[o] + dests.len() as u64;
        if inbox.acks(o) >= want {
            return Ok(want);
        }
        let acked = crate::wait::wait_until(
            self.run.engine.threads().lazy_policy,
            self.lazy_sleep(),
            || (inbox.acks(o) >= want).then_some(()),
            || {
                self.run.tree.is_aborted()
                    || self.lazy_wait_over(t + 1, dests.iter().map(|&d| d as usize))
            },
        );
        if acked.is_err() {
            if self.run.tree.is_aborted() {
                return Err(self.stopped("sync"));
            }
            if let Some(e) = self.stuck_in_full(dests.iter().map(|&d| d as usize)) {
                return Err(e);
            }
            if inbox.acks(o) < want {
                return Err(self.unacked(dests, t, true));
            }
        }
        Ok(want)
    }

    /// Where this process's lazy waits sleep: on its barrier signal (an abort wakes it),
    /// counted among the run's lazy sleepers (see `wake_after_enter`).
    pub(super) fn lazy_sleep(&self) -> Sleep<'_> {
        Sleep::Counted(
            self.run.engine.threads().barrier.signal(self.pid),
            &self.run.engine.threads().lazy_sleepers,
        )
    }

    /// Right after this process entered the lazy sync of superstep `s`, after acknowledging
    /// `took_before` and announcing to `written`: the notifier's side of the sleep handshake
    /// (`wait.rs`) for every wait this may end. Those destinations and acknowledged senders may
    /// sleep waiting for records or acknowledgements; and the sleepers whose stop condition
    /// this entry completes are woken ([`wake_if_all_entered`]). One fence covers all: in the
    /// common case nobody sleeps, and this costs the fence and loads of lines that stay in our
    /// cache (the signals and the sleeper count are written only by sleepers). A full sync
    /// runs [`wake_if_all_entered`] after its barrier arrival's fence instead.
    pub(super) fn wake_after_enter(&self, s: u64) {
        if self.run.p == 1 {
            // Nobody else can sleep.
            return;
        }
        // N of the handshake: orders the acks, announcements and the mode word before the
        // loads of the sleeper counts below.
        crate::shim::fence(Ordering::SeqCst);
        let barrier = &self.run.engine.threads().barrier;
        for &d in self.written.borrow()[self.run.slot(s)]
            .iter()
            .chain(&self.engine.threads().took_before)
        {
            barrier.signal(d as usize).wake_if_sleeping();
        }
        wake_if_all_entered(&self.run, self.pid, self.base, s);
    }

    /// The stop condition of a lazy wait for what processes `pids` send or acknowledge in
    /// their sync of superstep `t`, besides the run's failure: every one of them has entered
    /// it (what they send is announced: a count is final), or the first that has not waits at
    /// the barrier of a full sync where this process made a lazy one ([`stuck_at`]): it will
    /// never enter, and the wait ends with that misuse. Costs what `all_entered` does, and the
    /// look at one process's mode words.
    ///
    /// [`stuck_at`]: Self::stuck_at
    pub(super) fn lazy_wait_over(&self, t: u64, mut pids: impl Iterator<Item = usize>) -> bool {
        let (o, want) = (self.run.slot(t), mode_word(self.base, t, false));
        let inboxes = |j: usize| self.run.engine.threads().inbox(j);
        pids.find(|&j| inboxes(j).mode(o) < want)
            .is_none_or(|j| self.stuck_at(j).is_some())
    }

    /// The superstep, if any, in which process `j` made a full sync where this one made a lazy
    /// one: one of the supersteps since this process's last full sync (`lazy_since`) before the
    /// current one, whose full sync `j`'s mode word in that superstep's slot still shows (it
    /// has not entered a sync since, or not one that reuses the slot). `j` then waits at that
    /// sync's barrier for processes that will not come, while this one went on without waiting
    /// (it declared nothing, as a star's senders do) and only now waits for `j`. Costs a load
    /// of each of `j`'s mode words.
    pub(super) fn stuck_at(&self, j: usize) -> Option<u64> {
        let inbox = self.run.engine.threads().inbox(j);
        let since = self.engine.threads().lazy_since;
        let (from, to) = (
            mode_word(self.base, since, false),
            mode_word(self.base, self.step, false),
        );
        (0..self.run.slots as usize)
            .map(|o| inbox.mode(o))
            .filter(|&w| w & 1 == 0 && (from..to).contains(&w))
            .max()
            .map(|w| (w >> 1) - self.base - 1)
    }

    /// The misuse of a lazy wait that ended because one of `pids` waits in a full sync where
    /// this process made a lazy one ([`stuck_at`](Self::stuck_at)), if one does.
    #[cold]
    pub(super) fn stuck_in_full(&self, pids: impl Iterator<Item = usize>) -> Option<Error> {
        let mut stuck = pids.filter_map(|j| self.stuck_at(j).map(|u| (j, u)));
        let (j, u) = stuck.next()?;
        let mut full = vec![j];
        full.extend(stuck.filter(|&(_, v)| v == u).map(|(i, _)| i));
        Some(self.mixed_syncs_at(&full, u))
    }

    /// Processes that entered the sync of superstep `s` as a full sync.
    fn full_syncs_at(&self, s: u64) -> Vec<usize> {
        let (o, full) = (self.run.slot(s), mode_word(self.base, s, false));
        (0..self.run.p)
            .filter(|&j| self.run.engine.threads().inbox(j).mode(o) == full)
            .collect()
    }

    /// The error of a lazy sync whose records cannot all come: every other process has entered
    /// its sync.
    #[cold]
    pub(super) fn short_count(&self, m: u64, got: u64) -> Error {
        let s = self.step;
        let full = self.full_syncs_at(s);
        if !full.is_empty() {
            return self.mixed_syncs(&full);
        }
        self.misuse(
            "sync",
            format!(
                "pid {} called declare_incoming({m}) in superstep {s} but received {got} puts/messages, \
                 and every other process has already synced (nothing more can arrive)",
                self.pid
            ),
        )
    }

    /// The error of processes that made a full sync where this one made a lazy one.
    #[cold]
    fn mixed_syncs(&self, full: &[usize]) -> Error {
        self.mixed_syncs_at(full, self.step)
    }

    /// [`mixed_syncs`](Self::mixed_syncs) in superstep `u` (this one, or an earlier one whose
    /// full sync the processes `full` still wait in).
    #[cold]
    fn mixed_syncs_at(&self, full: &[usize], u: u64) -> Error {
        let now = if u == self.step {
            String::new()
        } else {
            format!(
                ", and went on to superstep {} (it declared nothing to wait for in between)",
                self.step
            )
        };
        // A process whose full sync is its end (published before its mode word).
        let run_id = self.run_id;
        let ended: Vec<usize> = full
            .iter()
            .copied()
            .filter(|&j| {
                self.run.engine.threads().peers[j]
                    .ended
                    .load(Ordering::Relaxed)
                    == run_id
            })
            .collect();
        if !ended.is_empty() {
            return self.misuse(
                "sync",
                format!(
                    "pid(s) {ended:?} returned from the SPMD function in superstep {u} (a final \
                     sync, a full one) while pid {} made a lazy sync there{now} (every process \
                     must call sync the same number of times)",
                    self.pid
                ),
            );
        }
        self.misuse(
            "sync",
            format!(
                "pid(s) {full:?} made a full sync in superstep {u} while pid {} made a lazy one{now} \
                 (declare_incoming is collective: every process declares in the same superstep)",
                self.pid
            ),
        )
    }

    /// The error of a lazy sync that took `got` records where `m` were declared, or found
    /// records of an earlier superstep (`stale`: their senders).
    #[cold]
    pub(super) fn count_mismatch(&self, m: u64, got: u64, stale: &[usize]) -> Error {
        let s = self.step;
        if !stale.is_empty() {
            return self.misuse(
                "sync",
                format!(
                    "pid {} received puts/messages of an earlier superstep from pid(s) {stale:?} \
                     in superstep {s}: they arrived after it had completed that superstep (its \
                     declared count was met without them)",
                    self.pid
                ),
            );
        }
        let full = self.full_syncs_at(s);
        if !full.is_empty() {
            return self.mixed_syncs(&full);
        }
        self.misuse(
            "sync",
            format!(
                "pid {} called declare_incoming({m}) in superstep {s} but received {got} puts/messages \
                 (from pid(s) {:?})",
                self.pid,
                self.engine.threads().took
            ),
        )
    }

    /// The error of a sender whose records of superstep `t` were never taken: every
    /// destination has entered its next sync without acknowledging them.
    #[cold]
    pub(super) fn unacked(&self, dests: &[u32], t: u64, lazy_now: bool) -> Error {
        let s = self.step;
        let full = self.full_syncs_at(s);
        if lazy_now && !full.is_empty() {
            return self.mixed_syncs(&full);
        }
        self.misuse(
            "sync",
            format!(
                "the puts/messages pid {} sent in superstep {} (to pid(s) {dests:?}) arrived \
                 after a receiver had completed that superstep (its declared count was met \
                 without them)",
                self.pid, t
            ),
        )
    }

    /// Senders whose outboxes taken in this sync belong to an earlier superstep.
    fn stale_senders(&self, s: u64) -> Vec<usize> {
        let o = self.run.slot(s);
        let mut stale = Vec::new();
        for &i in &self.engine.threads().took {
            // SAFETY: we took the sender's bit: it filled this outbox for us and does not refill
            // it before we ack it (a stale one: before its own sync fails, see module docs).
            let stamp = unsafe {
                self.run
                    .proc(i as usize)
                    .outboxes(o, |outs| outs[self.pid].as_deref().map_or(0, |ob| ob.stamp))
            };
            if stamp != s + 1 {
                stale.push(i as usize);
            }
        }
        stale
    }

    /// Move the puts and messages riding in this process's barrier lines into its outboxes (a
    /// lazy sync has no barrier to carry them). A destination's riding messages were sent
    /// before its outbox's messages (`ride.rs`), so they go ahead of them.
    fn rides_to_outboxes(&mut self) -> Result<()> {
        let me = self.pid;
        let mut rides = std::mem::take(self.engine.threads_mut().rides.get_mut());
        let mut out = Ok(());
        for (round, ride) in rides.iter_mut().enumerate().filter(|(_, r)| r.len > 0) {
            let riders = &self.run.engine.threads().riders;
            let Some(d) = riders.reader(me, round) else {
                unreachable!("a ride has a reader");
            };
            let ok = self.with_outbox(d, |ob| {
                let mut ok = true;
                ride.each(|rec| {
                    if let Rec::Put(words) = rec {
                        ok &= ob.put_records(words).is_some();
                    }
                });
                let first = ob.messages_first(|ob| {
                    let mut ok = true;
                    ride.each(|rec| {
                        if let Rec::Msg(tag, payload) = rec {
                            // SAFETY: `payload` is a valid slice.
                            ok &=
                                unsafe { ob.send(tag, payload.as_ptr(), payload.len()) }.is_some();
                        }
                    });
                    ok.then_some(())
                });
                ok && first.is_some()
            });
            if !ok {
                out = Err(self.no_room_for_put(d, ride.len * 8));
            }
            ride.clear();
        }
        *self.engine.threads_mut().rides.get_mut() = rides;
        out
    }

    /// In a full sync of a run that has used lazy syncs, after barrier 1: the next process
    /// (in pid order, wrapping) made a full sync of this superstep too. One look per process
    /// finds every mix: if some processes made a full sync of superstep s and others did not,
    /// some process of the first kind is followed by one of the second, and it reports the
    /// misuse (the run then fails everywhere). Looking at every process instead would cost
    /// p² loads per superstep over the run, which at p = 1000 was most of a superstep's work.
    /// The other process's word in this superstep's slot is of superstep s, of an earlier
    /// superstep of that slot (it did not enter sync s), or of s + S or later, S the run's
    /// slots (it has moved on since it passed this barrier, so its sync of s was full).
    pub(super) fn check_after_lazy(&self) -> Result<()> {
        let s = self.step;
        let o = self.run.slot(s);
        let (full, next) = (
            mode_word(self.base, s, false),
            mode_word(self.base, s + self.run.slots, false),
        );
        let j = (self.pid + 1) % self.run.p;
        let w = self.run.engine.threads().inbox(j).mode(o);
        let lazy = if w != full && w < next {
            vec![j]
        } else {
            Vec::new()
        };
        if !lazy.is_empty() {
            return Err(self.misuse(
                "sync",
                format!(
                    "pid {} made a full sync in superstep {s} while pid(s) {lazy:?} made a lazy \
                     one or synced in another superstep (declare_incoming is collective: every process \
                     declares in the same superstep)",
                    self.pid
                ),
            ));
        }
        Ok(())
    }

    /// The error of a full sync whose barrier episode had processes arriving from supersteps of
    /// both parities: some process made a lazy sync where others made a full one. Names the
    /// processes whose last sync of this slot was not a full sync of this superstep, if any
    /// still shows it (one that moved on has overwritten its word).
    #[cold]
    pub(super) fn mixed_at_barrier(&self) -> Error {
        let s = self.step;
        let o = self.run.slot(s);
        let full = mode_word(self.base, s, false);
        let others: Vec<usize> = (0..self.run.p)
            .filter(|&j| self.run.engine.threads().inbox(j).mode(o) != full)
            .collect();
        let who = if others.is_empty() {
            "another process".to_string()
        } else {
            format!("pid(s) {others:?}")
        };
        self.misuse(
            "sync",
            format!(
                "pid {} made a full sync in superstep {s} while {who} made a lazy one or synced \
                 in another superstep: processes of different supersteps met at its barrier \
                 (declare_incoming is collective: every process declares in the same superstep)",
                self.pid
            ),
        )
    }

    /// In a full sync, after barrier 1: every process has entered this sync, so every
    /// acknowledgement we are owed (`owe_previous`; those of the superstep before when the
    /// last sync was lazy) is in if its receiver took our records. Checks them all.
    pub(super) fn check_owed(&mut self) -> Result<()> {
        if self.prev_lazy {
            self.owe_previous();
        }
        for o in 0..SLOTS {
            let Some(t) = self.engine.threads().owed[o] else {
                continue;
            };
            let due = self.engine.threads().owed_dests[o].len() as u64;
            let want = self.engine.threads().acks_due[o] + due;
            if self.run.engine.threads().inbox(self.pid).acks(o) < want {
                let dests = self.engine.threads().owed_dests[o].clone();
                return Err(self.unacked(&dests, t, false));
            }
            let me = self.engine.threads_mut();
            me.acks_due[o] = want;
            me.owed[o] = None;
        }
        Ok(())
    }

    /// At the start of a sync: tell the senders whose outboxes we read in the last sync that we
    /// have finished with them, when this sync or the last one is lazy (after two full syncs
    /// the barrier says so).
    #[inline(always)]
    pub(super) fn ack_previous(&mut self, lazy_now: bool) {
        if lazy_now || self.prev_lazy {
            self.ack_senders();
        }
        // Kept for the announcements of a lazy sync (see `announce`).
        let me = self.engine.threads_mut();
        std::mem::swap(&mut me.took, &mut me.took_before);
        me.took.clear();
    }

    /// Acknowledge the senders whose outboxes we read in the last sync ([`ack_previous`]).
    ///
    /// [`ack_previous`]: Self::ack_previous
    #[inline(never)]
    fn ack_senders(&self) {
        let prev = self.run.slot(self.step.wrapping_sub(1));
        for &from in &self.engine.threads().took {
            self.run.engine.threads().inbox(from as usize).ack(prev);
        }
    }

    /// Mark and announce this superstep's outboxes at their destinations.
    fn announce(&self, o: usize) -> Result<()> {
        let written = self.written.borrow();
        for &d in &written[o] {
            // A destination that wrote to us in the last superstep had entered the last sync,
            // so it had completed the one before: its bits of this slot are free.
            if !self.engine.threads().took_before.contains(&d) {
                self.wait_completed(d as usize, self.run.slot_free_after(self.step))?;
            }
            // SAFETY: our own outbox of the current slot, during our own sync.
            let n = unsafe {
                self.me().outboxes(o, |outs| {
                    outs[d as usize].as_deref().map_or(0, |ob| ob.records())
                })
            };
            let inbox = &self.run.engine.threads().inbox(d as usize);
            inbox.mark(o, self.pid);
            inbox.announce(o, n);
        }
        Ok(())
    }

    /// Wait until process `d` has completed `syncs` syncs. Fails if the run fails, or if `d`
    /// made a full sync in superstep `syncs - 1` where this process made a lazy one (it then
    /// waits at a barrier that we will not reach).
    pub(super) fn wait_completed(&self, d: usize, syncs: u64) -> Result<()> {
        let done = &self.run.proc(d).done;
        if done.since(self.base) >= syncs {
            return Ok(());
        }
        let s = syncs - 1;
        let o = self.run.slot(s);
        let mixed = || {
            self.run.engine.threads().inbox(self.pid).mode(o) == mode_word(self.base, s, true)
                && self.run.engine.threads().inbox(d).mode(o) == mode_word(self.base, s, false)
        };
        // `d` may wait in a full sync of an earlier superstep where this process made a lazy
        // one, and never complete the syncs awaited here (`stuck_at`).
        let stuck = std::cell::Cell::new(None);
        let r = crate::wait::wait_until(
            self.run.engine.threads().barrier.policy(),
            Sleep::Naps,
            || (done.since(self.base) >= syncs).then_some(()),
            || {
                stuck.set(self.stuck_at(d));
                self.run.tree.is_aborted() || mixed() || stuck.get().is_some()
            },
        );
        match (r, stuck.get()) {
            (Ok(()), _) => Ok(()),
            (Err(_), _) if self.run.tree.is_aborted() => Err(self.stopped("sync")),
            (Err(_), Some(u)) => Err(self.mixed_syncs_at(&[d], u)),
            (Err(_), None) => Err(self.misuse(
                "sync",
                format!(
                    "pid {d} made a full sync in superstep {s} while pid {} made a lazy one \
                     (declare_incoming is collective: every process declares in the same superstep)",
                    self.pid
                ),
            )),
        }
    }
}

/// The last part of the notifier's side of the sleep handshake (`wait.rs`) for process `me`,
/// which has just entered the sync of superstep `s`, its mode word stored and a
/// `fence(SeqCst)` issued after it (N): if some process sleeps in a lazy wait and every
/// process has now entered `s`, the stop condition of every lazy wait of `s` holds (a count
/// that is still short is final, and a full sync where others made lazy ones is a misuse to
/// report), so every sleeper is woken.
#[inline(always)]
pub(super) fn wake_if_all_entered(run: &RunShared, me: usize, base: u64, s: u64) {
    // Inlined: every full sync makes this check, and nobody sleeps but in a misuse.
    if run.engine.threads().lazy_sleepers.load(Ordering::Relaxed) != 0 {
        wake_sleepers_if_all_entered(run, me, base, s);
    }
}

/// [`wake_if_all_entered`] once some process sleeps in a lazy wait.
#[cold]
#[inline(never)]
fn wake_sleepers_if_all_entered(run: &RunShared, me: usize, base: u64, s: u64) {
    if all_entered(run, base, s, 0..run.p) {
        for j in (0..run.p).filter(|&j| j != me) {
            run.engine.threads().barrier.signal(j).wake_if_sleeping();
        }
    }
}

/// Whether every process of `pids` has entered the sync of superstep `s` (or a later one) of
/// the run whose processes started with `base` syncs.
fn all_entered(run: &RunShared, base: u64, s: u64, mut pids: impl Iterator<Item = usize>) -> bool {
    let (o, want) = (run.slot(s), mode_word(base, s, false));
    pids.all(|j| run.engine.threads().inbox(j).mode(o) >= want)
}
