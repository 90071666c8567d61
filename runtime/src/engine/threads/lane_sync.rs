//! The lazy sync of a run with lanes (`lane.rs`, runs of at most `LANE_P` processes): the
//! protocol of `lazy.rs` with each announcement, and most acknowledgements, in a line the
//! sender owns.
//!
//! ```text
//! lazy sync, superstep s, slot o, declared m
//!   (records of s already in our outboxes)
//!   ack the senders taken in the last sync: in our lane to them if we write to them now,
//!     else in their inbox
//!   publish, for every destination written: records, acked?, inline puts; stamp s + 1
//!   enter: mode[o] = (s+1) << 1 | 1; fence; wake the destinations and acked senders if asleep
//!   poll the lanes to us until the stamped ones hold m records
//!     (or every process has entered sync s: then a short count is final)
//!   deliver them in pid order: inline puts from a copy of the lane, the rest from the outbox
//!   check: no lane of s left untaken (too many), none of an earlier superstep (late)
//!   acknowledgements of our records of s - 1: from the lanes we just took (their acked bit),
//!     and owed in our inbox by the destinations that did not write to us
//!   wait for the acknowledgements owed for superstep s+1-S (its outboxes and lanes are
//!     refilled next): at once with S = 2, one superstep later with S = 3 (`lazy.rs`, "Slack")
//! ```
//!
//! A receiver that writes to its sender in the next superstep acknowledges in its lane, which
//! it publishes after it has emptied its message queue of the superstep before: the sender
//! reads that lane anyway to take the receiver's records, so a symmetric exchange moves one
//! line each way and no read-modify-write. A receiver that took a sender's records sets the
//! bit only then; a sender whose destination wrote to it without the bit knows its records
//! came too late (an error, as is a missing explicit acknowledgement once the destination has
//! entered its sync). Records of a lane the receiver did not take stay visible there until
//! the sender rewrites it, which it does only after an acknowledgement that never comes: the
//! receiver finds them at its next lazy sync of that slot, or the sender's sync fails.

use super::lane::LANE_WORDS;
use super::sync::take_outbox;
use crate::ctx::Ctx;
use crate::error::Result;
use crate::outbox::Outbox;
use crate::outbox::SLOTS;

/// What the lanes to this process showed while it waited for its records: the senders whose
/// stamped lanes it took, the senders not seen yet (a bit per pid), and the records taken.
struct Seen {
    took: Vec<u32>,
    pending: u32,
    got: u64,
}

impl Ctx {
    /// The lazy sync of the current superstep in a run with lanes, `m` records declared; the
    /// superstep's records are in the outboxes (`lazy_sync` put them there). Its phases are
    /// those of the module documentation; an error is the run's failure, which the caller
    /// (`lazy_sync`) completes.
    pub(super) fn lane_sync(&mut self, m: u64) -> Result<()> {
        let p = self.run.p;
        let me = self.engine.threads_mut();
        if me.lane_seen.len() != p {
            me.lane_seen = vec![[0; SLOTS]; p];
        }
        self.ack_and_publish();
        let seen = self.await_lanes(m)?;
        let acked_by = self.take_lanes(&seen.took);
        self.check_untaken(m, seen)?;
        self.settle_previous(acked_by)?;
        self.finish_sync(true);
        Ok(())
    }

    /// Acknowledge the senders of the last sync that we do not write to now (the others find
    /// the bit in our lane), publish what we sent in our lanes, and enter the sync.
    fn ack_and_publish(&mut self) {
        let (s, pid) = (self.step, self.pid);
        let (o, fresh) = (self.run.slot(s), s + 1);
        let run = self.run.engine.threads();
        {
            let written = self.written.borrow();
            let prev = self.run.slot(s.wrapping_sub(1));
            for &from in &self.engine.threads().took {
                if !written[o].contains(&from) {
                    run.inbox(from as usize).ack(prev);
                }
            }
        }
        let me = self.engine.threads_mut();
        std::mem::swap(&mut me.took, &mut me.took_before);
        me.took.clear();
        let lanes = lanes_of(run);
        let written = self.written.borrow();
        for &d in &written[o] {
            let acked = self.engine.threads().took_before.contains(&d);
            // SAFETY: our own outbox of the current slot, during our own sync.
            unsafe {
                self.me().outboxes(o, |outs| {
                    let (records, inline) = outs[d as usize]
                        .as_deref()
                        .map_or((0, Some(&[][..])), |ob| (ob.records(), ob.inline_only()));
                    lanes
                        .get(pid, d as usize, o)
                        .publish(fresh, records, acked, inline);
                })
            };
        }
        drop(written);
        run.inbox(pid).enter(o, self.base, s, true);
        self.wake_after_enter(s);
        self.engine.threads_mut().took_before.clear();
    }

    /// Poll the lanes to us until the stamped ones hold `m` records (or every other process has
    /// entered this sync: then a short count is final).
    fn await_lanes(&mut self, m: u64) -> Result<Seen> {
        let (s, pid, p) = (self.step, self.pid, self.run.p);
        let (o, fresh) = (self.run.slot(s), s + 1);
        let run = &*self.run;
        let lanes = lanes_of(run.engine.threads());
        let mut seen = Seen {
            took: std::mem::take(&mut self.engine.threads_mut().took),
            pending: (1u32 << p) - 1,
            got: 0,
        };
        let poll = |seen: &mut Seen| {
            let mut bits = seen.pending;
            while bits != 0 {
                let k = bits.trailing_zeros();
                bits &= bits - 1;
                let lane = lanes.get(k as usize, pid, o);
                if lane.stamp() == fresh {
                    seen.pending &= !(1 << k);
                    seen.took.push(k);
                    seen.got += lane.records();
                }
            }
        };
        let mut waiter = self.engine.threads_mut().member.take_waiter();
        let waited = waiter.wait(
            run.engine.threads().lazy_policy,
            self.lazy_sleep(),
            || {
                poll(&mut seen);
                (seen.got >= m).then_some(())
            },
            || run.tree.is_aborted() || self.lazy_wait_over(s, (0..p).filter(|&j| j != pid)),
            || false,
        );
        self.engine.threads_mut().member.restore_waiter(waiter);
        if waited.is_err() {
            if run.tree.is_aborted() {
                self.engine.threads_mut().took = seen.took;
                return Err(self.stopped("sync"));
            }
            if let Some(e) = self.stuck_in_full((0..p).filter(|&j| j != pid)) {
                self.engine.threads_mut().took = seen.took;
                return Err(e);
            }
            // Every other process has entered sync s: every lane of s is stamped.
            poll(&mut seen);
            if seen.got < m {
                self.engine.threads_mut().took = seen.took;
                return Err(self.short_count(m, seen.got));
            }
        }
        seen.took.sort_unstable();
        Ok(seen)
    }

    /// Deliver the records of the lanes `took` in pid order; returns the senders that
    /// acknowledged our records of the superstep before (a bit per pid).
    fn take_lanes(&mut self, took: &[u32]) -> u32 {
        let (pid, o, fresh) = (self.pid, self.slot, self.step + 1);
        let run = &*self.run;
        let lanes = lanes_of(run.engine.threads());
        let mut buf = [0u64; LANE_WORDS];
        let mut acked_by = 0u32;
        let queue = &mut self.st.get_mut().queue;
        queue.tagsize = self.tagsize.get();
        queue.slot = o;
        for &k in took {
            let published = lanes.get(k as usize, pid, o).read(&mut buf);
            if published.acked {
                acked_by |= 1 << k;
            }
            match published.inline {
                // SAFETY: the records were made by `put` of a sender whose checks made their
                // destinations our own registered memory, kept alive by our table or
                // graveyard, with no live references (we hold `&mut self`); `n` words of
                // `buf` hold them.
                Some(n) => unsafe { Outbox::deliver(buf.as_ptr() as *const u8, n * 8) },
                None => {
                    // SAFETY: the sender filled that outbox for us before stamping the lane
                    // and leaves it alone until we acknowledge it (module documentation).
                    let taken = unsafe { take_outbox(run, k, pid, o, fresh, queue) };
                    debug_assert_eq!(taken, published.records);
                }
            }
            self.engine.threads_mut().lane_seen[k as usize][o] = fresh;
        }
        acked_by
    }

    /// Records we did not take: of this superstep (beyond our count), or of an earlier one
    /// that came after we had completed it. Keeps the senders taken in `took`.
    fn check_untaken(&mut self, m: u64, seen: Seen) -> Result<()> {
        let (pid, o, fresh) = (self.pid, self.slot, self.step + 1);
        let lanes = lanes_of(self.run.engine.threads());
        let Seen {
            mut took,
            pending,
            got,
        } = seen;
        let (mut late, mut stale) = (0u64, Vec::new());
        let mut bits = pending;
        while bits != 0 {
            let k = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let lane = lanes.get(k, pid, o);
            let t = lane.stamp();
            if t == fresh {
                late += lane.records();
                took.push(k as u32);
            } else if t < fresh && t > self.engine.threads().lane_seen[k][o] {
                stale.push(k);
            }
        }
        self.engine.threads_mut().took = took;
        if got + late != m || !stale.is_empty() {
            return Err(self.count_mismatch(m, got + late, &stale));
        }
        Ok(())
    }

    /// Our records of the superstep before: the receivers that wrote to us acknowledged them
    /// in their lanes (`acked_by`); the others acknowledge in our inbox, owed until the
    /// outboxes and lanes of that superstep are about to be refilled. Then wait for the
    /// acknowledgements owed for those the next superstep refills (`settle_owed`: the
    /// superstep before with two slots, the one before that with three).
    fn settle_previous(&mut self, acked_by: u32) -> Result<()> {
        // A run's first superstep has none before it (and with three slots, the slot "before"
        // superstep 0 would be its own).
        if let Some(t) = self.step.checked_sub(1) {
            let prev = self.run.slot(t);
            let mut explicit = std::mem::take(&mut self.engine.threads_mut().owed_dests[prev]);
            explicit.clear();
            let mut unacked = Vec::new();
            for &d in &self.written.borrow()[prev] {
                if acked_by & (1 << d) != 0 {
                    continue;
                }
                if self.engine.threads().took.contains(&d) {
                    // It wrote to us without taking what we sent it: ours came too late.
                    unacked.push(d);
                } else {
                    explicit.push(d);
                }
            }
            let me = self.engine.threads_mut();
            me.owed_dests[prev] = explicit;
            me.owed[prev] = Some(t);
            if !unacked.is_empty() {
                return Err(self.unacked(&unacked, t, true));
            }
        }
        self.settle_owed(self.run.slot(self.step + 1))
    }
}

/// The lanes of a run that has them (a lane sync runs only in such a run).
fn lanes_of(run: &super::state::RunState) -> &super::lane::Lanes {
    match run.lanes.as_ref() {
        Some(lanes) => lanes,
        None => unreachable!("lane_sync in a run with lanes"),
    }
}
