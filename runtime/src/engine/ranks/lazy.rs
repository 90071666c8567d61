//! Lazy syncs over ranks (semantics in `crate::lazy`): no header all-to-all; each rank sends
//! its streams point to point to the ranks it wrote to, and receives until its declared
//! number of records has arrived.
//!
//! ```text
//! lazy sync, superstep s, parity q, declared m
//!   refuse gets, registration and tag-size changes (misuse)
//!   wait until our streams of superstep s-1 are matched (MPI_Issend complete): their
//!     buffers are free, and their receivers were in sync s-1
//!   for every rank d we wrote to: make sure d has completed sync s-2 (known when our last
//!     sync was full, d sent us a stream in s-1, or d matched ours of s-1; else read d's
//!     published count of completed syncs), then
//!     MPI_Issend [s, records, outbox, large-put records, large-put data] with tag q
//!     sent[q][d] += 1 (published in our window)
//!   publish entered = lazy sync s (in our window)
//!   receive streams of tag q from any rank until m records have arrived (our own count);
//!     got[q][k] += 1 for each (published with the count of completed syncs)
//!   deliver in rank order: large puts, then puts and messages (as a full sync does)
//!   publish s + 1 completed syncs
//! ```
//!
//! ## Why point to point, with synchronous sends
//!
//! A one-sided design (streams written into a window at the receiver) needs room reserved at
//! each receiver for every possible sender; messages size themselves, and MPI matches them in
//! order. `MPI_Issend` completes only once the receiver has matched the stream: that is the
//! acknowledgement the thread engine's outboxes wait for (a stream's buffer is reused two
//! supersteps later, after the next lazy sync saw it matched), and it tells the sender that
//! the receiver has reached that sync.
//!
//! ## Why no stream is delivered into another superstep
//!
//! A rank in superstep t receives only tag `t & 1`. A sender sends a stream of superstep u
//! only after its destination has completed sync u - 2, so the streams a rank in superstep t
//! can find are those of t and stale ones of t - 2, t - 4, ... (which came after their
//! receiver completed their superstep). Every stream begins with its superstep: a stale one is
//! an error (the receiver's), never delivered. A stream that is never received is found by its
//! sender: at its next lazy sync its `MPI_Issend` is still incomplete although the receiver
//! has completed that superstep with fewer streams from it (`got` in the receiver's window);
//! at its next full sync, from every rank's published `sent` and `got` counts (gathered by
//! every rank when the superstep before was lazy, so that every rank reports the same error).
//!
//! ## Never a hang
//!
//! A lazy wait (for records, for its streams to be matched, for a destination to complete a
//! sync) polls locally, and now and then reads the other ranks' published words (`watch`):
//! * a rank that failed (its count of completed syncs is `DONE_FAILED`): this rank joins the
//!   failure exchange of the full sync path, which reports the first root cause everywhere;
//! * a rank inside a full sync of a superstep this rank made lazy: a misuse (declare_incoming is
//!   collective), reported through the same exchange (the full sync's all-to-all is the
//!   partner of this rank's last exchange);
//! * a short count: every other rank has entered this sync (or a later one) and every stream
//!   it sent here in this parity has been received: nothing more can come.
//!
//! A full sync publishes its superstep too and carries it in its header, so a full sync that
//! meets the full sync of another superstep (a rank whose lazy sync completed went on) fails
//! on every rank with the mixed-syncs misuse.
//!
//! ## Large puts
//!
//! Large puts to another node travel inside the stream (one copy more than a full sync's
//! separate message, which would have to be matched by superstep too). Large puts through a
//! node's shared segments need every reader of a segment half to be done with it before it is
//! refilled two supersteps later: a superstep after a lazy sync does not use the segments (its
//! large puts travel in the streams), since the lazy sync did not wait for those readers.

use super::lazy_state::{LAZY_TAG, LazyNet, mode};
use super::net::Net;
use super::protocol::*;
use super::shm::Source;
use super::watchdog::watchdog;
use super::wire::{count, count_limit, split_stream};
use crate::arena::align8;
use crate::ctx::Ctx;
use crate::error::{Error, ErrorKind};
use crate::flags::FLAG_COMM;
use crate::outbox::Outbox;
use mpi::ffi;
use std::time::{Duration, Instant};

/// Why a lazy sync stopped: this rank's misuse (already recorded as the run's failure), or
/// another rank's failure (its error comes with the failure exchange).
pub(super) enum Stop {
    Misuse(Error),
    Peer,
}

/// A wait: `ready` (local, cheap) until it says done, and `watch` (reads of other ranks'
/// windows) now and then: first after 1 ms, then at doubling intervals up to 20 ms. Each read
/// of another rank's window may wait for that rank to make MPI progress (a time slice when
/// ranks outnumber cores), so watching often would slow the waits it is meant to end only on
/// failures and misuse. It spins briefly, then yields between polls, as MPICH's own blocking
/// calls do (a lazy wait on an oversubscribed node must leave the core to the ranks it waits
/// for; napping instead made a 3-rank ring on 2 cores several times slower, `mbsp-bench mpi`).
/// The rank watchdog watches it as it watches the header exchange.
fn poll<S, T>(
    pid: usize,
    step: u64,
    state: &mut S,
    mut ready: impl FnMut(&mut S) -> Result<Option<T>, Stop>,
    mut watch: impl FnMut(&mut S) -> Result<Option<T>, Stop>,
) -> Result<T, Stop> {
    if let Some(v) = ready(state)? {
        return Ok(v);
    }
    let armed = watchdog().map(|w| w.enter(pid, step));
    let start = Instant::now();
    let mut gap = Duration::from_millis(1);
    let mut next = gap;
    let mut spins = 0u32;
    let r = loop {
        match ready(state) {
            Ok(None) => {}
            Ok(Some(v)) => break Ok(v),
            Err(e) => break Err(e),
        }
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
            continue;
        }
        let t = start.elapsed();
        if t >= next {
            match watch(state) {
                Ok(None) => {}
                Ok(Some(v)) => break Ok(v),
                Err(e) => break Err(e),
            }
            gap = (gap * 2).min(Duration::from_millis(20));
            next = t + gap;
        }
        std::thread::yield_now();
    };
    if let Some(w) = armed {
        w.leave();
    }
    r
}

/// What a look at the other ranks' windows found that ends a lazy wait.
enum Seen {
    /// Every other rank has entered this sync or a later one, and every stream of this
    /// parity it sent here has been received: nothing more can come.
    Final,
}

impl Ctx {
    /// The lazy sync of the current superstep, `m` records declared (module documentation).
    pub(super) fn rank_lazy(&mut self, net: &mut Net, m: u64) -> Result<(), Stop> {
        let (me, p, s) = (self.pid, self.run.p, self.step);
        let q = (s & 1) as usize;
        let fresh = s + 1;
        self.st.get_mut().queue.clear();
        let flags = self.flags.get();
        if let Some(e) = self.lazy_refusal(flags, m) {
            return Err(Stop::Misuse(e));
        }
        if flags & FLAG_COMM != 0 {
            self.flush_hpsends();
        }
        net.flush_puts();
        let win = net.win;

        // Our streams of the last superstep: matched, so their buffers are free again.
        self.lazy_sends_matched(net)?;

        // Our streams of this one, then word that they are out.
        for j in (0..p).filter(|&j| j != me) {
            self.lazy_send(net, j, q, s)?;
        }
        for b in net.big.get_mut().iter_mut() {
            b.data.clear();
            b.recs.clear();
        }
        net.lazy.pending_step = s;
        net.lazy.matched.iter_mut().for_each(|x| *x = false);
        net.lazy.publish(win, mode(s, true));

        // Our records: our own outbox's, then streams until the count is met.
        // SAFETY: our own outbox, in our sync.
        let own = unsafe {
            self.me()
                .outboxes(self.run.slot(s), |outs| match outs[me].as_deref() {
                    Some(ob) if ob.stamp == fresh => ob.records(),
                    _ => 0,
                })
        };
        let lazy = &mut net.lazy;
        lazy.heard.iter_mut().for_each(|h| *h = false);
        let mut st = (lazy, own, Vec::<usize>::new());
        if own < m {
            let seen = poll(
                me,
                s,
                &mut st,
                |(lazy, records, from)| {
                    while let Some(k) = self.lazy_receive(lazy, q)? {
                        from.push(k);
                        *records += lazy.inbox[k][1];
                        if *records >= m {
                            return Ok(Some(None));
                        }
                    }
                    Ok(None)
                },
                |(lazy, _, _)| Ok(self.lazy_watch(lazy, win, Some(q))?.map(Some)),
            )?;
            if let Some(Seen::Final) = seen {
                let got = st.1;
                return Err(Stop::Misuse(self.misuse(
                    "sync",
                    format!(
                        "pid {me} called declare_incoming({m}) in superstep {s} but received {got} \
                         puts/messages, and every other process has already synced (nothing \
                         more can arrive)"
                    ),
                )));
            }
        }
        let (lazy, mut records, mut from) = st;
        // Streams beyond the count that are already here: too many (later ones are found by
        // their senders).
        if records == m {
            if let Some(k) = self.lazy_receive(lazy, q)? {
                from.push(k);
                records += lazy.inbox[k][1];
            }
        }
        if records != m {
            from.sort_unstable();
            return Err(Stop::Misuse(self.misuse(
                "sync",
                format!(
                    "pid {me} called declare_incoming({m}) in superstep {s} but received {records} \
                     puts/messages (from pid(s) {from:?})"
                ),
            )));
        }
        from.sort_unstable();
        for &k in &from {
            lazy.heard[k] = true;
        }
        self.lazy_deliver(net, &from);
        self.rank_finish(net);
        Ok(())
    }

    /// Wait until the streams of our last lazy sync are matched by their receivers; fail if a
    /// receiver completed that superstep without one of them.
    fn lazy_sends_matched(&mut self, net: &mut Net) -> Result<(), Stop> {
        if net.lazy.pending.is_empty() {
            return Ok(());
        }
        let (me, s, win) = (self.pid, self.step, net.win);
        let u = net.lazy.pending_step;
        let pq = (u & 1) as usize;
        poll(
            me,
            s,
            &mut net.lazy,
            |lazy| {
                let mut i = 0;
                while i < lazy.pending.len() {
                    let mut flag = 0;
                    // SAFETY: a live request (completed ones are removed).
                    unsafe {
                        ffi::MPI_Test(&mut lazy.pending[i].1, &mut flag, ffi::RSMPI_STATUS_IGNORE)
                    };
                    if flag != 0 {
                        let (d, _) = lazy.pending.swap_remove(i);
                        lazy.matched[d] = true;
                    } else {
                        i += 1;
                    }
                }
                Ok(lazy.pending.is_empty().then_some(()))
            },
            |lazy| {
                self.lazy_watch(lazy, win, None)?;
                // A receiver that has completed superstep u (read first) with fewer streams
                // from us than we sent it (read second) never takes the rest.
                let mut late = Vec::new();
                for &(d, _) in &lazy.pending {
                    let mut w = [0u64; 2];
                    lazy.read(
                        win,
                        d,
                        &[lazy.done_at[d], lazy.word(d, lazy.got_at(pq, me))],
                        &mut w,
                    );
                    if w[0] != DONE_FAILED && w[0] > u && w[1] < lazy.board[lazy.sent_at(pq, d)] {
                        late.push(d);
                    }
                }
                if late.is_empty() {
                    return Ok(None);
                }
                late.sort_unstable();
                Err(Stop::Misuse(self.misuse(
                    "sync",
                    format!(
                        "the puts/messages pid {me} sent in superstep {u} (to pid(s) {late:?}) \
                         arrived after a receiver had completed that superstep (its declared \
                         count was met without them)"
                    ),
                )))
            },
        )
    }

    /// Send our stream of superstep `s` to rank `j`, if we wrote to it.
    fn lazy_send(&mut self, net: &mut Net, j: usize, q: usize, s: u64) -> Result<(), Stop> {
        let fresh = s + 1;
        let nb = net.big.get_mut()[j].recs.len();
        // SAFETY: our own outboxes, in our sync.
        let has_out = unsafe {
            self.me().outboxes(self.run.slot(s), |outs| {
                outs[j].as_deref().is_some_and(|ob| ob.stamp == fresh)
            })
        };
        if !has_out && nb == 0 {
            return Ok(());
        }
        // Rank j must have completed sync s - 2 (module docs): then it looks for this stream
        // only in superstep s.
        let lazy = &mut net.lazy;
        if s >= 2 && self.prev_lazy && !lazy.heard[j] && !lazy.matched[j] {
            let (me, win) = (self.pid, net.win);
            poll(
                me,
                s,
                lazy,
                |lazy| {
                    let mut done = [0u64];
                    lazy.read(win, j, &[lazy.done_at[j]], &mut done);
                    match done[0] {
                        DONE_FAILED => Err(Stop::Peer),
                        d if d + 1 >= s => Ok(Some(())),
                        _ => Ok(None),
                    }
                },
                |lazy| self.lazy_watch(lazy, win, None).map(|_| None),
            )?;
        }
        let buf = &mut lazy.out[q][j];
        buf.clear();
        buf.extend_from_slice(&[s, 0]);
        // SAFETY: as above.
        let mut records = unsafe {
            self.me()
                .outboxes(self.run.slot(s), |outs| match outs[j].as_deref() {
                    Some(ob) if ob.stamp == fresh => {
                        ob.encode(buf);
                        ob.records()
                    }
                    _ => {
                        Outbox::default().encode(buf);
                        0
                    }
                })
        };
        let big = &net.big.get_mut()[j];
        buf.extend_from_slice(&[0, nb as u64]);
        for &(dst, len, src) in &big.recs {
            let from = match src {
                Source::Shared(off) => off as u64,
                Source::Copied(_) => AS_MESSAGE,
            };
            buf.extend_from_slice(&[dst, len, from]);
        }
        for &(_, len, src) in &big.recs {
            if let Source::Copied(off) = src {
                let bytes = &big.data[off..off + len as usize];
                let at = buf.len();
                buf.resize(at + align8(bytes.len()) / 8, 0);
                // SAFETY: the words just added hold `bytes.len()` bytes.
                unsafe {
                    crate::stream::copy_any(
                        bytes.as_ptr(),
                        buf[at..].as_mut_ptr() as *mut u8,
                        bytes.len(),
                    )
                };
            }
        }
        records += nb as u64;
        buf[1] = records;
        if buf.len() > count_limit() {
            // One message per destination (its receiver probes for it): it cannot travel in
            // pieces as a full sync's streams do.
            let e = self.fail_with(self.error(
                ErrorKind::System,
                "sync",
                format!(
                    "the lazy superstep's data for pid {j} is {} words, more than one MPI \
                     message carries ({} words: MPI counts are C ints); a full sync (no \
                     declare_incoming) sends it in pieces",
                    buf.len(),
                    count_limit()
                ),
            ));
            return Err(Stop::Misuse(e));
        }
        let n = count(buf.len());
        // SAFETY: a plain handle, written by the call.
        let mut req: ffi::MPI_Request = unsafe { std::mem::zeroed() };
        // SAFETY: the buffer stays untouched until the send completes (it is refilled only
        // after `lazy_sends_matched` or a full sync completed it; leaked if it never does).
        unsafe {
            ffi::MPI_Issend(
                buf.as_ptr() as *const _,
                n,
                ffi::RSMPI_UINT64_T,
                j as i32,
                LAZY_TAG + q as i32,
                lazy.comm,
                &mut req,
            )
        };
        lazy.pending.push((j, req));
        let i = lazy.sent_at(q, j);
        lazy.bump(i);
        Ok(())
    }

    /// Receive one stream of parity `q` if one has arrived: its sender. A stream of an earlier
    /// superstep is a misuse (it came after we completed that superstep).
    fn lazy_receive(&self, lazy: &mut LazyNet, q: usize) -> Result<Option<usize>, Stop> {
        let tag = LAZY_TAG + q as i32;
        let mut flag = 0;
        // SAFETY: a plain struct, written by the call.
        let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        // SAFETY: our communicator; `flag` and `status` are written by the call.
        unsafe {
            ffi::MPI_Iprobe(
                ffi::RSMPI_ANY_SOURCE,
                tag,
                lazy.comm,
                &mut flag,
                &mut status,
            )
        };
        if flag == 0 {
            return Ok(None);
        }
        let k = status.MPI_SOURCE as usize;
        let mut n = 0;
        // SAFETY: the status of the probe above.
        unsafe { ffi::MPI_Get_count(&status, ffi::RSMPI_UINT64_T, &mut n) };
        let buf = &mut lazy.inbox[k];
        buf.clear();
        buf.resize(n as usize, 0);
        // SAFETY: `buf` holds the `n` words of the probed message.
        unsafe {
            ffi::MPI_Recv(
                buf.as_mut_ptr() as *mut _,
                n,
                ffi::RSMPI_UINT64_T,
                k as i32,
                tag,
                lazy.comm,
                ffi::RSMPI_STATUS_IGNORE,
            )
        };
        let i = lazy.got_at(q, k);
        lazy.bump(i);
        if lazy.inbox[k][0] != self.step {
            return Err(Stop::Misuse(self.misuse(
                "sync",
                format!(
                    "pid {} received puts/messages of an earlier superstep from pid(s) [{k}] \
                     in superstep {}: they arrived after it had completed that superstep (its \
                     declared count was met without them)",
                    self.pid, self.step
                ),
            )));
        }
        Ok(Some(k))
    }

    /// Read the other ranks' windows (module docs): a failed rank, a rank inside a full sync
    /// of a superstep we made lazy (misuse), or, when `count` gives our receiving parity, a
    /// count that nothing more can meet.
    fn lazy_watch(
        &self,
        lazy: &LazyNet,
        win: ffi::MPI_Win,
        count: Option<usize>,
    ) -> Result<Option<Seen>, Stop> {
        let (me, s) = (self.pid, self.step);
        let mut all_in = true;
        let mut full = Vec::new();
        let mut full_at = 0;
        for k in (0..lazy.p).filter(|&k| k != me) {
            // Entered first: a sender writes its sent counts before its entered word.
            let mut w = [0u64; 3];
            let mut at = vec![lazy.word(k, 0), lazy.done_at[k]];
            if let Some(q) = count {
                at.push(lazy.word(k, lazy.sent_at(q, me)));
            }
            lazy.read(win, k, &at, &mut w[..at.len()]);
            let (entered, done) = (w[0], w[1]);
            if done == DONE_FAILED {
                return Err(Stop::Peer);
            }
            if entered >= 2 && entered & 1 == 0 {
                // In (or past) the full sync of superstep v.
                let v = (entered >> 1) - 1;
                let ours_lazy = lazy.last_full.is_none_or(|f| v > f) && v <= s;
                if done <= v && ours_lazy {
                    full.push(k);
                    full_at = v;
                }
            }
            if entered < mode(s, true) {
                all_in = false;
            } else if let Some(q) = count {
                if w[2] != lazy.board[lazy.got_at(q, k)] {
                    all_in = false;
                }
            }
        }
        if !full.is_empty() {
            return Err(Stop::Misuse(self.misuse(
                "sync",
                format!(
                    "pid(s) {full:?} made a full sync in superstep {full_at} while pid {me} made \
                     a lazy one (declare_incoming is collective: every process declares in the same \
                     superstep)"
                ),
            )));
        }
        Ok((count.is_some() && all_in).then_some(Seen::Final))
    }

    /// Deliver the streams of this lazy sync (from `from`, in rank order) and our own outbox,
    /// as a full sync does: large puts first, then puts and messages in rank order.
    fn lazy_deliver(&mut self, net: &mut Net, from: &[usize]) {
        let (o, fresh) = (self.slot, self.step + 1);
        {
            let shm = net.shm.get_mut();
            for &k in from {
                let w = &net.lazy.inbox[k][2..];
                let (ob, gets, bigs) = split_stream(w);
                let mut at = ob.len() + 2 + gets.len() + bigs.len();
                for r in bigs.chunks_exact(3) {
                    let (dst, len) = (r[0] as *mut u8, r[1] as usize);
                    let src = if r[2] == AS_MESSAGE {
                        let src = w[at..].as_ptr() as *const u8;
                        at += align8(len) / 8;
                        src
                    } else {
                        let base = shm.bases[shm.node_rank[k].expect("a node mate")];
                        (base + r[2]) as *const u8
                    };
                    // SAFETY: rank k checked the destination against its mirror of our table
                    // (our registered memory, no live references: we hold `&mut self`); the
                    // source is in its stream, or in its segment, which it leaves alone until
                    // every reader is done (module docs).
                    unsafe { crate::stream::copy_any(src, dst, len) };
                }
            }
        }
        let queue = &mut self.st.get_mut().queue;
        queue.tagsize = self.tagsize.get();
        queue.slot = o;
        let me = self.pid;
        let mut next = from.iter().peekable();
        for k in 0..self.run.p {
            let (count, bytes) = if k == me {
                let (_, count, bytes) = self.deliver_own(o, fresh);
                (count, bytes)
            } else if next.next_if_eq(&&k).is_some() {
                let (ob, _, _) = split_stream(&net.lazy.inbox[k][2..]);
                self.deliver_stream(k, ob, o, fresh)
            } else {
                (0, 0)
            };
            self.queue_from(k, count, bytes);
        }
    }
}

impl Ctx {
    /// In a full sync after a lazy one (every rank, the header flags agreeing): gather every
    /// rank's counts of streams sent and received in the last superstep's parity; a stream
    /// that was sent and never received (its receiver's count was met without it) fails the
    /// run on every rank with the same error. Else our sends of that sync complete.
    pub(super) fn rank_check_lazy(&mut self, net: &mut Net) -> crate::error::Result<()> {
        let p = self.run.p;
        let prev = ((self.step & 1) ^ 1) as usize;
        let all = net.all_gather_words(&net.lazy.counts(prev));
        for (k, counts) in all.iter().enumerate() {
            let late: Vec<usize> = (0..p).filter(|&j| counts[j] > all[j][p + k]).collect();
            if !late.is_empty() {
                let mut path = self.path.clone();
                if let Some(last) = path.last_mut() {
                    *last = k;
                }
                let s = self.step - 1;
                return Err(Error::new(
                    crate::error::ErrorKind::Misuse,
                    "sync",
                    path,
                    Some(self.step),
                    format!(
                        "the puts/messages pid {k} sent in superstep {s} (to pid(s) {late:?}) \
                         arrived after a receiver had completed that superstep (its declared \
                         count was met without them)"
                    ),
                ));
            }
        }
        net.lazy.complete_pending();
        Ok(())
    }
}
