//! A rank's sync: the exchange of one superstep (the protocol in the module documentation).

use super::lazy::Stop;
use super::net::Net;
use super::protocol::*;
use super::shm::Source;
use super::wire::{decode_error, encode_error, split_stream};
use crate::ctx::Ctx;
use crate::error::{Error, ErrorKind, Result};
use crate::flags::{FLAG_CHECKPOINT, FLAG_COMM, FLAG_GETS, FLAG_REGS, FLAG_TAGS};
use crate::outbox::{Outbox, copy_bytes};
use mpi::ffi;
use mpi::raw::AsRaw;

/// What the header exchange told this rank (every rank learns the same, but for the streams
/// to it): the flags of all ranks ORed, each rank's state and superstep, and where each rank's
/// stream to this rank is in `Net::recv`.
struct Heard {
    g: u64,
    states: Vec<u64>,
    steps: Vec<u64>,
    streams: Vec<std::ops::Range<usize>>,
}

impl Ctx {
    /// The sync of a process at the top level of a run over ranks (module docs).
    pub(super) fn rank_sync(&mut self, net: &mut Net, ending: bool) -> Result<()> {
        let op = if ending { "end" } else { "sync" };
        if net.over {
            return Err(self.stopped(op));
        }
        net.in_collective = false;
        let comm = net.comm.as_raw();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.engine_fault();
            if let (Some(m), false, false) = (self.lazy.get(), ending, self.run.tree.is_aborted()) {
                match self.rank_lazy(net, m) {
                    Ok(()) => return Ok(()),
                    // The run's failure (`misuse` recorded it): the exchange below takes it to
                    // every rank.
                    Err(Stop::Misuse(e)) => self.run.tree.fail(&e),
                    // Another rank failed: the exchange below brings its error.
                    Err(Stop::Peer) => {}
                }
            }
            self.rank_exchange(net, op, ending)
        }));
        let r = match r {
            Ok(r) => r,
            // Inside a collective call the other ranks wait for this rank's part, which it will
            // never give: nothing but ending the job helps.
            Err(payload) if net.in_collective => {
                let what = crate::process::panic_message(&*payload);
                abort_job(comm, op, self.pid, self.step, &what)
            }
            // Before any collective call of this sync: the panic goes on like any other, and
            // the process's end takes it to the other ranks (`Engine::leave`: the failure
            // exchange).
            Err(payload) => std::panic::resume_unwind(payload),
        };
        if let Err(e) = &r {
            net.over = true;
            // The run's error is the one every rank got here, whatever this rank's process
            // recorded first (its own misuse, say, when several ranks failed at once).
            net.verdict = Some(e.clone());
            // This process has seen the run fail: it touches no other rank's memory again.
            self.note_stopped();
            net.publish_failed();
            // Nothing of this superstep will be delivered: let go of what it holds.
            let st = self.st.get_mut();
            st.gets.clear();
            st.getbuf.clear();
            for b in net.big.get_mut().iter_mut() {
                b.data.clear();
                b.recs.clear();
            }
        }
        r
    }

    /// The last exchange of a process that failed outside a sync (its error travels to every
    /// rank), unless an exchange already ended the run: the run's error as every rank has it.
    pub(super) fn rank_fail(&mut self, net: &mut Net) -> Option<Error> {
        if net.over {
            return net.verdict.clone();
        }
        self.rank_sync(net, false).err()
    }

    /// A full sync over ranks, phase by phase (module documentation); also the failure
    /// exchange of a failed rank.
    pub(super) fn rank_exchange(
        &mut self,
        net: &mut Net,
        op: &'static str,
        ending: bool,
    ) -> Result<()> {
        let (state, flags) = self.rank_enter(net, ending);
        self.encode_streams(net, op, state, flags);
        let heard = self.exchange_headers(net, state, flags);
        if let Some(h) = heard.as_ref().filter(|h| h.g as u32 & FLAG_CHECKPOINT != 0) {
            self.synced_flags.set(h.g as u32);
        }
        let Some(heard) = heard else {
            // The empty superstep: nothing else to exchange.
            self.rank_finish(net);
            return Ok(());
        };
        self.verdict(net, op, state, &heard)?;
        let g = heard.g as u32;
        if g == 0 {
            self.end_count(0)?;
            self.rank_finish(net);
            return Ok(());
        }
        let sent_tagsize = self.tagsize.get();
        if g & (FLAG_REGS | FLAG_TAGS) != 0 {
            if let Err(e) = self.rank_collective(net, g) {
                self.run.tree.fail(&e);
                return Err(e);
            }
        }
        if g & FLAG_GETS != 0 {
            self.rank_serve_gets(net, &heard);
        }
        if heard.g & BIG != 0 {
            let recv = std::mem::take(&mut net.recv);
            let incoming: Vec<(usize, &[u64])> = (0..self.run.p)
                .filter(|&k| k != self.pid && !heard.streams[k].is_empty())
                .map(|k| (k, split_stream(&recv[heard.streams[k].clone()]).2))
                .filter(|(_, b)| !b.is_empty())
                .collect();
            net.move_big(&incoming);
            drop(incoming);
            net.recv = recv;
        }
        if heard.g & GROW != 0 {
            net.grow_segments();
        }
        let reply_displ = (g & FLAG_GETS != 0).then(|| net.exchange_replies());
        net.in_collective = false;
        let records = self.deliver_streams(net, &heard.streams, sent_tagsize);
        self.rank_write_gets(net, reply_displ);
        self.end_count(records)?;
        self.rank_finish(net);
        Ok(())
    }

    /// Enter the sync: this rank's state (syncing, ended, or failed: its error travels in this
    /// exchange), published where lazy syncs and immediate primitives of other ranks look,
    /// and its flags; hpsend payloads and one-sided puts completed.
    fn rank_enter(&mut self, net: &mut Net, ending: bool) -> (u64, u32) {
        self.st.get_mut().queue.clear();
        let state = if self.run.tree.is_aborted() {
            FAILED
        } else if ending {
            ENDED
        } else {
            SYNCING
        };
        if state == FAILED {
            net.publish_failed();
        } else {
            // A rank in a lazy sync of this superstep reads this (a misuse it reports).
            net.lazy.enter_full(net.win, self.step);
        }
        // The last superstep's communication is delivered at the end too (as on threads).
        let flags = if state != FAILED { self.flags.get() } else { 0 };
        if flags & FLAG_COMM != 0 {
            self.flush_hpsends();
        }
        net.flush_puts();
        (state, flags)
    }

    /// The stream to each other rank in `net.send` (its length in `net.send_counts`): this
    /// rank's error if it failed, else `[outbox][get requests][large-put records]`.
    fn encode_streams(&mut self, net: &mut Net, op: &'static str, state: u64, flags: u32) {
        let (me, o, fresh) = (self.pid, self.slot, self.step + 1);
        net.send.clear();
        for j in 0..self.run.p {
            let start = net.send.len();
            if j == me {
                net.send_counts[j] = 0;
                continue;
            }
            if state == FAILED {
                let e = self.run.tree.error().unwrap_or_else(|| self.stopped(op));
                encode_error(&e, &mut net.send);
            } else if flags & (FLAG_COMM | FLAG_GETS) != 0 {
                // SAFETY: our own outboxes, in our sync (no other thread touches them).
                let has_out = unsafe {
                    self.me().outboxes(o, |outs| match outs[j].as_deref() {
                        Some(ob) if ob.stamp == fresh => {
                            ob.encode(&mut net.send);
                            true
                        }
                        _ => false,
                    })
                };
                let gets = &self.st.get_mut().gets;
                let n = gets.iter().filter(|g| g.from as usize == j).count();
                let big = net.big.borrow();
                let nb = big[j].recs.len();
                if has_out || n > 0 || nb > 0 {
                    if !has_out {
                        Outbox::default().encode(&mut net.send);
                    }
                    net.send.push(n as u64);
                    for g in gets.iter().filter(|g| g.from as usize == j) {
                        let apart = if g.len >= BIG_PUT { APART } else { 0 };
                        net.send
                            .extend_from_slice(&[g.src as u64, g.len as u64 | apart]);
                    }
                    net.send.push(nb as u64);
                    for &(dst, len, src) in &big[j].recs {
                        let from = match src {
                            Source::Shared(off) => off as u64,
                            _ => AS_MESSAGE,
                        };
                        net.send.extend_from_slice(&[dst, len, from]);
                    }
                }
            }
            net.send_counts[j] = net.send.len() - start;
        }
    }

    /// The all-to-all of the headers (state, stream length, flags, and a short stream
    /// inline), then the long streams; `None` for the empty superstep (nobody communicated,
    /// everybody synced), where nothing else is exchanged.
    fn exchange_headers(&mut self, net: &mut Net, state: u64, flags: u32) -> Option<Heard> {
        let (me, p) = (self.pid, self.run.p);
        // Streams of up to INLINE words ride in the header exchange itself.
        let sends = net.send_counts.iter().any(|&c| c > INLINE);
        // No rank receives more than one call can count when every rank sends at most a p-th
        // of it: else every stream travels in pieces.
        let pieces = !super::wire::one_call(&net.send_counts)
            || net.send_counts.iter().sum::<usize>() > super::wire::count_limit() / p;
        let bigs = state != FAILED && net.big.borrow().iter().any(|b| !b.recs.is_empty());
        let big_gets = state != FAILED
            && self
                .st
                .get_mut()
                .gets
                .iter()
                .any(|g| g.from as usize != me && g.len >= BIG_PUT);
        let grow = state != FAILED && net.shm.get_mut().missed > 0;
        let prev_lazy = self.prev_lazy && state != FAILED;
        let word = flags as u64
            | [(grow, GROW), (sends, STREAM), (pieces, PIECES), (bigs, BIG)]
                .iter()
                .chain(&[(big_gets, BIG_GETS), (prev_lazy, PREV_LAZY)])
                .filter(|(on, _)| *on)
                .fold(0, |w, (_, f)| w | f);
        let (mut header, mut got) = (
            std::mem::take(&mut net.header),
            std::mem::take(&mut net.got),
        );
        header.clear();
        let mut at = 0;
        for &c in &net.send_counts {
            header.extend_from_slice(&[state | self.step << STATE_BITS, c as u64, word]);
            let inline = if c <= INLINE { c } else { 0 };
            header.extend_from_slice(&net.send[at..at + inline]);
            header.resize(header.len() + INLINE - inline, 0);
            at += c;
        }
        got.resize(SLOT * p, 0);
        net.in_collective = true;
        net.headers(&header, &mut got, me, self.step);
        let g = got.chunks_exact(SLOT).fold(0u64, |a, h| a | h[2]);
        let all_syncing = got
            .chunks_exact(SLOT)
            .all(|h| h[0] == self.step << STATE_BITS);
        if g == 0 && all_syncing && state == SYNCING {
            (net.header, net.got) = (header, got);
            net.in_collective = false;
            return None;
        }
        let states = got
            .chunks_exact(SLOT)
            .map(|h| h[0] & ((1 << STATE_BITS) - 1))
            .collect();
        let steps = got.chunks_exact(SLOT).map(|h| h[0] >> STATE_BITS).collect();
        let counts: Vec<usize> = got.chunks_exact(SLOT).map(|h| h[1] as usize).collect();
        // Each rank's stream to us: received by the all-to-all-v (long ones), or copied from
        // its header slot to the end of the receive buffer (short ones).
        let mut streams: Vec<std::ops::Range<usize>> = if g & STREAM != 0 {
            let long: Vec<usize> = counts
                .iter()
                .map(|&c| if c > INLINE { c } else { 0 })
                .collect();
            let d = net.exchange_words(&long, g & PIECES != 0);
            (0..p).map(|k| d[k]..d[k + 1]).collect()
        } else {
            net.recv.clear();
            vec![0..0; p]
        };
        for (k, &c) in counts.iter().enumerate() {
            if c > 0 && c <= INLINE {
                let start = net.recv.len();
                net.recv
                    .extend_from_slice(&got[k * SLOT + 3..k * SLOT + 3 + c]);
                streams[k] = start..start + c;
            }
        }
        (net.header, net.got) = (header, got);
        Some(Heard {
            g,
            states,
            steps,
            streams,
        })
    }

    /// Every rank reaches the same verdict from the same headers: a failed rank's error, a
    /// superstep some ranks made lazy and others full, some ranks ending while others sync, or
    /// a lazy superstep before whose streams did not all arrive.
    fn verdict(
        &mut self,
        net: &mut Net,
        op: &'static str,
        state: u64,
        heard: &Heard,
    ) -> Result<()> {
        let (me, p) = (self.pid, self.run.p);
        let Heard {
            states,
            steps,
            streams,
            ..
        } = heard;
        if states.iter().any(|&s| s != SYNCING) || state != SYNCING {
            net.over = true;
        }
        let failed: Vec<Error> = (0..p)
            .filter(|&k| states[k] == FAILED)
            .map(|k| {
                if k == me {
                    self.run.tree.error().unwrap_or_else(|| self.stopped(op))
                } else {
                    decode_error(&net.recv[streams[k].clone()])
                }
            })
            .collect();
        let e = if let Some(first) = failed.first() {
            // Every rank reports the same error: the first failed rank's root cause (a rank
            // that only stopped because another failed reports a secondary error, e.g. one
            // whose hpget saw the other's failure), else the first failed rank's.
            failed
                .iter()
                .find(|e| !e.is_secondary())
                .unwrap_or(first)
                .clone()
        } else if steps.iter().any(|&t| t != self.step) {
            self.mixed_steps(steps)
        } else if states.iter().any(|&s| s != state) {
            self.ended_while_syncing(states)
        } else if heard.g & PREV_LAZY != 0 {
            match self.rank_check_lazy(net) {
                Ok(()) => return Ok(()),
                Err(e) => e,
            }
        } else {
            return Ok(());
        };
        self.run.tree.fail(&e);
        Err(e)
    }

    /// Some ranks' lazy syncs completed and they went on; the others made a full sync of that
    /// superstep. The same error on every rank (they all see every step).
    fn mixed_steps(&self, steps: &[u64]) -> Error {
        let p = self.run.p;
        let low = steps.iter().copied().min().unwrap_or(self.step);
        let (full, lazy): (Vec<usize>, Vec<usize>) = (0..p).partition(|&k| steps[k] == low);
        let mut path = self.path.clone();
        if let Some(last) = path.last_mut() {
            *last = full[0];
        }
        Error::new(
            ErrorKind::Misuse,
            "sync",
            path,
            Some(low),
            format!(
                "pid(s) {full:?} made a full sync in superstep {low} while pid(s) {lazy:?} \
                 made a lazy one and went on (declare_incoming is collective: every process declares \
                 in the same superstep)"
            ),
        )
    }

    /// Some ranks ended while others synced: the same error on every rank, in the thread
    /// engine's words, named after pid 0 (in its sync, or its end), where the thread engine
    /// names the process that noticed first.
    fn ended_while_syncing(&self, states: &[u64]) -> Error {
        let (ended, synced): (Vec<usize>, Vec<usize>) =
            (0..self.run.p).partition(|&k| states[k] == ENDED);
        let mut path = self.path.clone();
        if let Some(last) = path.last_mut() {
            *last = 0;
        }
        let op0 = if states[0] == ENDED { "end" } else { "sync" };
        Error::new(
            ErrorKind::Misuse,
            op0,
            path,
            Some(self.step),
            format!(
                "pid(s) {ended:?} returned from the SPMD function while pid(s) {synced:?} \
                 called sync (every process must call sync the same number of times)"
            ),
        )
    }

    /// Gets: served from our memory before any put lands (the replies are exchanged later);
    /// our own gets of our memory are read into the get buffer now, for the same reason; and
    /// large gets travel apart, now.
    fn rank_serve_gets(&mut self, net: &mut Net, heard: &Heard) {
        let (me, p, g32) = (self.pid, self.run.p, heard.g as u32);
        net.replies.iter_mut().for_each(Vec::clear);
        let mut sends = Vec::new();
        for k in (0..p).filter(|&k| k != me && !heard.streams[k].is_empty()) {
            let (_, gets, _) = split_stream(&net.recv[heard.streams[k].clone()]);
            for req in gets.chunks_exact(2) {
                if req[1] & APART != 0 {
                    sends.push((k, req[0], req[1] & !APART));
                    continue;
                }
                // SAFETY: the requester checked the range against its mirror of our table;
                // the area is registered (or in our graveyard until this sync ends).
                let data =
                    unsafe { std::slice::from_raw_parts(req[0] as *const u8, req[1] as usize) };
                net.replies[k].extend_from_slice(data);
            }
        }
        let st = self.st.get_mut();
        for op in st.gets.iter_mut().filter(|g| g.from as usize == me) {
            // SAFETY: our own registered memory, in bounds (checked at the get).
            op.buf_off = unsafe { st.getbuf.push_raw(op.src, op.len) };
        }
        // Large gets travel apart, before any put lands: straight from the owner's memory
        // (no get writes a get source: see below), into the destination when no get of this
        // superstep reads a registration overlapping it (the source bits of `g`), else into
        // the get buffer.
        let mut recvs = Vec::new();
        for op in st.gets.iter_mut() {
            if op.from as usize != me && op.len >= BIG_PUT {
                op.direct = op.dst_bits & g32 == 0;
                if !op.direct {
                    op.buf_off = st.getbuf.reserve(op.len);
                }
            }
        }
        let base = st.getbuf.base_mut();
        for op in st
            .gets
            .iter()
            .filter(|o| o.from as usize != me && o.len >= BIG_PUT)
        {
            let at = if op.direct {
                op.dst
            } else {
                // SAFETY: `buf_off` was reserved in the get buffer above.
                unsafe { base.add(op.buf_off) }
            };
            recvs.push((op.from as usize, at as u64, op.len as u64));
        }
        if heard.g & BIG_GETS != 0 {
            // SAFETY: destinations are our own memory (kept alive by the ops), written
            // directly only when no get reads them; sources are our registered memory,
            // which nothing writes during this phase (direct destinations are never get
            // sources; puts land later).
            unsafe { net.transfer(&recvs, &sends, BIG_GET_TAG) };
        }
    }

    /// Puts and messages, in rank order: our own to ourselves, then each rank's stream;
    /// returns the records delivered (a declared final sync counts them).
    fn deliver_streams(
        &mut self,
        net: &Net,
        streams: &[std::ops::Range<usize>],
        tagsize: usize,
    ) -> u64 {
        let (me, o, fresh) = (self.pid, self.slot, self.step + 1);
        let queue = &mut self.st.get_mut().queue;
        queue.tagsize = tagsize;
        queue.slot = o;
        let mut records = 0;
        for (k, range) in streams.iter().enumerate() {
            let (count, bytes) = if k == me {
                let (n, count, bytes) = self.deliver_own(o, fresh);
                records += n;
                (count, bytes)
            } else if !range.is_empty() {
                let (ob, _, bigs) = split_stream(&net.recv[range.clone()]);
                records += Outbox::encoded_records(ob) + bigs.len() as u64 / 3;
                self.deliver_stream(k, ob, o, fresh)
            } else {
                (0, 0)
            };
            self.queue_from(k, count, bytes);
        }
        records
    }

    /// Get data, last (as in the thread runtime): from the get buffer, or from the replies
    /// (`reply_displ`: where each rank's replies start).
    fn rank_write_gets(&mut self, net: &Net, reply_displ: Option<Vec<usize>>) {
        let me = self.pid;
        let st = self.st.get_mut();
        if st.gets.is_empty() {
            return;
        }
        let mut at = reply_displ.unwrap_or_default();
        let base = st.getbuf.base();
        for op in st.gets.drain(..) {
            if op.from as usize != me && op.len >= BIG_PUT && op.direct {
                continue; // received in place
            }
            let src = if op.from as usize == me || op.len >= BIG_PUT {
                // SAFETY: within the get buffer filled above.
                unsafe { base.add(op.buf_off) }
            } else {
                let k = op.from as usize;
                let s = net.reply_recv[at[k]..].as_ptr();
                at[k] += op.len;
                s
            };
            // SAFETY: the destination is this process's own memory (kept alive by the op
            // or promised by the raw caller), `len` bytes at `src` were received for it.
            unsafe { crate::stream::copy_any(src, op.dst, op.len) };
        }
        st.getbuf.clear();
    }

    /// A count declared before `end` (a full sync) is checked there, on this rank, as on
    /// threads: `got` records arrived.
    fn end_count(&self, got: u64) -> Result<()> {
        match self.lazy.get() {
            Some(m) if m != got => Err(self.misuse(
                "end",
                format!(
                    "pid {} called declare_incoming({m}) in superstep {} but received {got} \
                     puts/messages (the final sync is a full one: the count is checked there)",
                    self.pid, self.step
                ),
            )),
            _ => Ok(()),
        }
    }

    pub(super) fn rank_finish(&mut self, net: &mut Net) {
        // Our segment's half of this parity is free again two syncs from now (see `Shm`): its
        // next writer is the superstep after next.
        net.shm.get_mut().used[(self.step & 1) as usize] = 0;
        // A sync with declared counts over ranks is always lazy (the next one acknowledges).
        self.finish_sync(self.lazy.get().is_some());
        net.publish_done(self.step);
    }
}

impl Ctx {
    /// Deliver this rank's own puts to itself of the superstep of slot `o` (stamped `fresh`);
    /// returns its records and its messages to itself (count, bytes), which stay in its outbox.
    pub(super) fn deliver_own(&self, o: usize, fresh: u64) -> (u64, usize, usize) {
        let me = self.pid;
        // SAFETY: our own outboxes, in our sync; put destinations are our own registered
        // memory, with no live references (the caller holds `&mut self`'s sync).
        unsafe {
            self.run
                .proc(me)
                .outboxes(o, |outs| match outs[me].as_deref() {
                    Some(ob) if ob.stamp == fresh => {
                        let n = ob.records();
                        ob.deliver_puts_with(|src, dst, len| copy_bytes(src, dst, len));
                        (n, ob.msg_count, ob.msg_bytes)
                    }
                    _ => (0, 0, 0),
                })
        }
    }

    /// Deliver the puts of rank `k`'s encoded outbox `ob` (from its stream) and hand its
    /// messages to `k`'s mirror's outbox for us (slot `o`, stamped `fresh`); returns the
    /// messages (count, bytes).
    pub(super) fn deliver_stream(
        &self,
        k: usize,
        ob: &[u64],
        o: usize,
        fresh: u64,
    ) -> (usize, usize) {
        let (puts, msgs, count, bytes, _) = Outbox::decode(ob);
        // SAFETY: put records made by rank k's `put`, whose checks against its mirror of our
        // table made their destinations our registered memory (alive in our table or
        // graveyard), with no live references (in our sync).
        unsafe { Outbox::deliver(puts.as_ptr() as *const u8, puts.len() * 8) };
        if count > 0 {
            let me = self.pid;
            // SAFETY: the mirror of rank k exists on this rank only; only this thread touches
            // it.
            unsafe {
                self.run.proc(k).outboxes_mut(o, |outs| {
                    outs[me]
                        .get_or_insert_with(Box::default)
                        .set_messages(fresh, msgs, count, bytes)
                })
            };
        }
        (count, bytes)
    }

    /// Queue `count` messages (`bytes`) from rank `k` for this superstep's reads.
    pub(super) fn queue_from(&mut self, k: usize, count: usize, bytes: usize) {
        if count > 0 {
            let queue = &mut self.st.get_mut().queue;
            queue.srcs.push(crate::queue::Src {
                pid: k as u32,
                rode: None,
            });
            queue.left += count;
            queue.left_bytes += bytes;
        }
    }
}

/// End every rank of the job: a panic inside a collective call of the exchange (the other
/// ranks wait in it for this rank's part). Says why on stderr first.
fn abort_job(comm: ffi::MPI_Comm, op: &str, pid: usize, step: u64, what: &str) -> ! {
    use std::io::Write;
    let line = format!(
        "mbsp: {op} (pid {pid}, superstep {step}): the exchange between ranks failed: {what}; \
         ending every rank\n"
    );
    let _ = std::io::stderr().write_all(line.as_bytes());
    // SAFETY: ends every rank of the job.
    unsafe { ffi::MPI_Abort(comm, 1) };
    unreachable!("MPI_Abort returned")
}
