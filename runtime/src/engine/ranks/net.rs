//! A rank's connection to the others: the MPI window of its registered memory, the exchanges
//! of a sync, one-sided transfers, and the published count of completed syncs.

use super::active::Active;
use super::protocol::*;
use super::shm::{BigPuts, Shm, Source};
use super::watchdog::watchdog;
use super::wire::{count, offsets, one_call, piece, transfer};
use crate::wait::{Aborted, Sleep, WaitPolicy, wait_until};
use mpi::collective::CommunicatorCollectives;
use mpi::datatype::{Partition, PartitionMut};
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::{Communicator, SimpleCommunicator};

/// What a rank's top-level process needs to talk to the others.
pub(crate) struct Net {
    /// This program's run over ranks is going on while the connection lives.
    _active: Active,
    pub(super) comm: SimpleCommunicator,
    /// The dynamic window holding every registered area of this rank, and `done`.
    pub(super) win: ffi::MPI_Win,
    /// This rank's completed syncs, readable by the others through `win`.
    pub(super) done: Box<u64>,
    /// Per rank: the address of its `done` in its address space.
    pub(super) done_at: Vec<u64>,
    /// Per rank: the superstep up to which it is known to have completed its syncs.
    pub(super) settled: std::cell::RefCell<Vec<u64>>,
    /// One-sided puts were issued in this superstep (to complete at the sync).
    pub(super) hp_pending: std::cell::Cell<bool>,
    /// An exchange reported the end or a failure: no more exchanges.
    pub(super) over: bool,
    /// This rank is inside the collective calls of an exchange (from its header exchange on):
    /// a panic there cannot be taken to the others by a failure exchange (`exchange.rs`).
    pub(super) in_collective: bool,
    /// The run's error that the exchange which ended it gave every rank (the same on all).
    pub(super) verdict: Option<crate::error::Error>,
    /// The sync headers sent and received (kept from sync to sync).
    pub(super) header: Vec<u64>,
    pub(super) got: Vec<u64>,
    /// Large puts of this superstep, by destination rank.
    pub(super) big: std::cell::RefCell<Vec<BigPuts>>,
    /// The shared segments of this node's ranks, for large puts between them.
    pub(super) shm: std::cell::RefCell<Shm>,
    /// This rank.
    pub(super) me: usize,
    /// The intervals of our memory attached to `win`, disjoint and sorted.
    pub(super) attached: Vec<(usize, usize)>,
    pub(super) send: Vec<u64>,
    pub(super) send_counts: Vec<usize>,
    pub(super) recv: Vec<u64>,
    pub(super) replies: Vec<Vec<u8>>,
    pub(super) reply_send: Vec<u8>,
    pub(super) reply_recv: Vec<u8>,
    /// What lazy syncs publish and keep (`lazy.rs`).
    pub(super) lazy: super::lazy_state::LazyNet,
}

// SAFETY: MPI handles are plain values; a `Net` is used by its process's thread only (it lives
// in a `Ctx`, which is not `Send`; the bound is for `Box<Net>` inside `Ctx`'s fields).
unsafe impl Send for Net {}

impl Net {
    /// Collective over `comm`: the window is created and `done` published.
    pub(super) fn new(comm: SimpleCommunicator, active: Active) -> Net {
        let p = comm.size() as usize;
        // SAFETY: an MPI handle is plain data (an integer in MPICH, a pointer in Open MPI),
        // for which all-zero bytes are a valid value; the call below overwrites it.
        let mut win: ffi::MPI_Win = unsafe { std::mem::zeroed() };
        let done = Box::new(0u64);
        // SAFETY: MPI calls on a valid communicator; `done` lives (boxed) as long as the window
        // (detached and the window freed in `close`).
        unsafe {
            ffi::MPI_Win_create_dynamic(ffi::RSMPI_INFO_NULL, comm.as_raw(), &mut win);
            ffi::MPI_Win_attach(win, &*done as *const u64 as *mut _, 8);
            ffi::MPI_Win_lock_all(ffi::MPI_MODE_NOCHECK as i32, win);
        }
        let mine = &*done as *const u64 as u64;
        let mut done_at = vec![0u64; p];
        comm.all_gather_into(&mine, &mut done_at[..]);
        let shm = std::cell::RefCell::new(Shm::new(&comm));
        let me = comm.rank() as usize;
        let lazy = super::lazy_state::LazyNet::new(&comm, win, &done_at);
        Net {
            _active: active,
            shm,
            me,
            attached: Vec::new(),
            comm,
            win,
            done,
            done_at,
            settled: std::cell::RefCell::new(vec![0; p]),
            hp_pending: std::cell::Cell::new(false),
            over: false,
            in_collective: false,
            verdict: None,
            header: Vec::new(),
            got: Vec::new(),
            big: std::cell::RefCell::new((0..p).map(|_| BigPuts::default()).collect()),
            send: Vec::new(),
            send_counts: vec![0; p],
            recv: Vec::new(),
            replies: vec![Vec::new(); p],
            reply_send: Vec::new(),
            reply_recv: Vec::new(),
            lazy,
        }
    }

    /// Collective: close the window (after the last exchange of the run).
    pub(super) fn close(mut self) {
        self.lazy.close(self.win);
        let shm = self.shm.get_mut();
        shm.free();
        // SAFETY: every one-sided operation was completed by the last exchange's flush; the
        // node communicator is ours.
        unsafe {
            ffi::MPI_Win_unlock_all(self.win);
            ffi::MPI_Win_free(&mut self.win);
            ffi::MPI_Comm_free(&mut shm.node);
        }
    }

    /// The all-to-all of the sync headers, where a rank waits for the others, watched by
    /// [`Watchdog`](super::watchdog::Watchdog).
    pub(super) fn headers(&self, header: &[u64], got: &mut [u64], pid: usize, step: u64) {
        let armed = watchdog().map(|w| w.enter(pid, step));
        self.comm.all_to_all_into(header, got);
        if let Some(w) = armed {
            w.leave();
        }
    }

    /// All-to-all-v of words: `send` (`send_counts` words to each rank, in rank order; short
    /// ones went in the headers) into `recv`; returns the offset of each rank's part in `recv`
    /// (`p + 1` of them). `pieces`: some rank's streams do not fit one call's counts (a header
    /// flag, so every rank knows), and every stream travels point to point, in pieces.
    pub(super) fn exchange_words(&mut self, recv_counts: &[usize], pieces: bool) -> Vec<usize> {
        let sd = offsets(&self.send_counts);
        let send_counts: Vec<usize> = self
            .send_counts
            .iter()
            .map(|&c| if c > INLINE { c } else { 0 })
            .collect();
        let rd = offsets(recv_counts);
        self.recv.clear();
        self.recv.resize(rd[rd.len() - 1], 0);
        let me = self.me;
        if pieces {
            let (send, recv) = (self.send.as_ptr() as u64, self.recv.as_mut_ptr() as u64);
            let part = |base: u64, at: &[usize], n: &[usize], k: usize| {
                (k, base + 8 * at[k] as u64, 8 * n[k] as u64)
            };
            let ranks = || (0..recv_counts.len()).filter(|&k| k != me);
            let recvs: Vec<_> = ranks().map(|k| part(recv, &rd, recv_counts, k)).collect();
            let sends: Vec<_> = ranks().map(|k| part(send, &sd, &send_counts, k)).collect();
            // SAFETY: each receive area is rank k's part of `recv`, sized for it above and
            // written only by its receive; the send areas are parts of `send`, unchanged until
            // the transfers complete.
            unsafe { transfer(&self.comm, &recvs, &sends, STREAM_TAG) };
        } else {
            let c = |v: &[usize]| v.iter().map(|&n| count(n)).collect::<Vec<i32>>();
            let (sc, sdc, rc, rdc) = (c(&send_counts), c(&sd), c(recv_counts), c(&rd));
            let s = Partition::new(&self.send[..], &sc[..], &sdc[..sdc.len() - 1]);
            let mut r = PartitionMut::new(&mut self.recv[..], &rc[..], &rdc[..rdc.len() - 1]);
            self.comm.all_to_all_varcount_into(&s, &mut r);
        }
        rd
    }

    /// All-to-all-v of the get replies; returns each rank's offset in `reply_recv`. The counts
    /// travel first, each with a flag when its sender's replies do not fit one call's counts
    /// (then every rank sees it, and every reply travels point to point, in pieces).
    pub(super) fn exchange_replies(&mut self) -> Vec<usize> {
        /// The flag of a reply count whose sender's replies travel in pieces.
        const REPLY_PIECES: u64 = 1 << 63;
        let p = self.replies.len();
        let counts: Vec<usize> = self.replies.iter().map(Vec::len).collect();
        // No rank receives more than one call can count when every rank sends at most a
        // p-th of it.
        let big =
            !one_call(&counts) || counts.iter().sum::<usize>() > super::wire::count_limit() / p;
        let flag = if big { REPLY_PIECES } else { 0 };
        let words: Vec<u64> = counts.iter().map(|&c| c as u64 | flag).collect();
        let mut back = vec![0u64; p];
        self.comm.all_to_all_into(&words[..], &mut back[..]);
        let pieces = back.iter().any(|&w| w & REPLY_PIECES != 0);
        let back: Vec<usize> = back.iter().map(|&w| (w & !REPLY_PIECES) as usize).collect();
        self.reply_send.clear();
        for r in &self.replies {
            self.reply_send.extend_from_slice(r);
        }
        let (sd, rd) = (offsets(&counts), offsets(&back));
        self.reply_recv.clear();
        self.reply_recv.resize(rd[rd.len() - 1], 0);
        if pieces {
            let me = self.me;
            let send = self.reply_send.as_ptr() as u64;
            let recv = self.reply_recv.as_mut_ptr() as u64;
            let ranks = || (0..p).filter(|&k| k != me);
            let recvs: Vec<_> = ranks()
                .map(|k| (k, recv + rd[k] as u64, back[k] as u64))
                .collect();
            let sends: Vec<_> = ranks()
                .map(|k| (k, send + sd[k] as u64, counts[k] as u64))
                .collect();
            // SAFETY: as in `exchange_words`, for the parts of `reply_recv` and `reply_send`.
            unsafe { transfer(&self.comm, &recvs, &sends, REPLY_TAG) };
            // Our replies to ourselves.
            let own = sd[me]..sd[me + 1];
            self.reply_recv[rd[me]..rd[me + 1]].copy_from_slice(&self.reply_send[own]);
        } else {
            let c = |v: &[usize]| v.iter().map(|&n| count(n)).collect::<Vec<i32>>();
            let (sc, sdc, rc, rdc) = (c(&counts), c(&sd), c(&back), c(&rd));
            let s = Partition::new(&self.reply_send[..], &sc[..], &sdc[..p]);
            let mut r = PartitionMut::new(&mut self.reply_recv[..], &rc[..], &rdc[..p]);
            self.comm.all_to_all_varcount_into(&s, &mut r);
        }
        rd
    }

    /// All-gather of variable-length word vectors: each rank's part.
    pub(super) fn all_gather_words(&self, mine: &[u64]) -> Vec<Vec<u64>> {
        super::wire::all_gather_words(&self.comm, mine)
    }

    /// Queue a large put of `src` to `dst` on rank `pid` (copied now: a buffered put); `None`
    /// if the memory for the copy cannot be allocated (nothing is queued then). `after_lazy`:
    /// the last sync was lazy, so the shared segments are not used (`lazy.rs`).
    pub(super) fn big_put(
        &self,
        pid: usize,
        dst: *mut u8,
        src: &[u8],
        step: u64,
        after_lazy: bool,
    ) -> Option<()> {
        let mut big = self.big.borrow_mut();
        let b = &mut big[pid];
        let mut shm = self.shm.borrow_mut();
        if shm.node_rank[pid].is_some() && !after_lazy {
            if let Some(off) = shm.place((step & 1) as usize, src) {
                let base = shm.bases[shm.node_rank[self.me].expect("on our node")];
                // SAFETY: `off .. off + len` lies in our segment (checked by `place`), which
                // no receiver reads before the sync (double buffering: module docs of `Shm`).
                unsafe {
                    crate::stream::copy_any(src.as_ptr(), (base + off as u64) as *mut u8, src.len())
                };
                b.recs
                    .push((dst as u64, src.len() as u64, Source::Shared(off)));
                return Some(());
            }
        }
        b.data.try_reserve(src.len()).ok()?;
        b.recs
            .push((dst as u64, src.len() as u64, Source::Copied(b.data.len())));
        b.data.extend_from_slice(src);
        Some(())
    }

    /// Collective (every rank, when some rank's large puts missed its segment): after a
    /// barrier of the node (nobody reads the old segments any more), every segment is made
    /// anew, large enough for what missed this superstep (at most [`MAX_SEGMENT`] per half).
    pub(super) fn grow_segments(&mut self) {
        let shm = self.shm.get_mut();
        // SAFETY: a valid communicator.
        unsafe { ffi::MPI_Barrier(shm.node) };
        let q_used = shm.used.iter().copied().max().unwrap_or(0);
        let cap = if shm.missed > 0 {
            (q_used + shm.missed)
                .next_power_of_two()
                .max(2 * shm.cap)
                .min(MAX_SEGMENT)
        } else {
            shm.cap
        };
        shm.missed = 0;
        let mine = shm.node_rank[self.me].expect("on our node");
        shm.regrow(mine, cap);
    }

    /// Move the large puts: receive those of `incoming` (each rank's records, as
    /// `[address, length]` words) in place, send ours.
    pub(super) fn move_big(&mut self, incoming: &[(usize, &[u64])]) {
        let recvs: Vec<(usize, u64, u64)> = incoming
            .iter()
            .flat_map(|&(k, recs)| {
                recs.chunks_exact(3)
                    .filter(|r| r[2] == AS_MESSAGE)
                    .map(move |r| (k, r[0], r[1]))
            })
            .collect();
        let big = self.big.get_mut();
        let sends: Vec<(usize, u64, u64)> = big
            .iter()
            .enumerate()
            .flat_map(|(j, b)| {
                b.recs.iter().filter_map(move |&(_, len, src)| {
                    let at = match src {
                        Source::Copied(off) => b.data.as_ptr() as u64 + off as u64,
                        Source::Shared(_) => return None,
                    };
                    Some((j, at, len))
                })
            })
            .collect();
        {
            // Large puts from this node's ranks: copied from their segments.
            let shm = self.shm.get_mut();
            for &(k, recs) in incoming {
                for r in recs.chunks_exact(3).filter(|r| r[2] != AS_MESSAGE) {
                    let base = shm.bases[shm.node_rank[k].expect("a node mate")];
                    // SAFETY: rank k wrote these bytes into its segment before the sync and
                    // leaves them alone until after the next one; the destination is our
                    // registered memory, checked by rank k against its mirror of our table,
                    // with no live references (the caller holds `&mut Ctx`).
                    unsafe {
                        crate::stream::copy_any(
                            (base + r[2]) as *const u8,
                            r[0] as *mut u8,
                            r[1] as usize,
                        )
                    };
                }
            }
        }
        // SAFETY: the receive areas are our registered memory, checked by their senders
        // against their mirrors of our table, with no live references (the caller holds
        // `&mut Ctx`); the send areas are our copies (untouched until cleared below).
        unsafe { self.transfer(&recvs, &sends, BIG_TAG) };
        for b in self.big.get_mut().iter_mut() {
            b.data.clear();
            b.recs.clear();
        }
    }

    /// [`transfer`] over this rank's communicator.
    ///
    /// # Safety
    /// As [`transfer`].
    pub(super) unsafe fn transfer(
        &self,
        recvs: &[(usize, u64, u64)],
        sends: &[(usize, u64, u64)],
        tag: i32,
    ) {
        // SAFETY: forwarded to the caller.
        unsafe { transfer(&self.comm, recvs, sends, tag) }
    }

    /// `MPI_Put` (`put`) of `len` bytes at `local` to address `remote` of rank `pid`, or
    /// `MPI_Get` from there into `local`, in pieces of at most [`piece`] bytes (not completed).
    ///
    /// # Safety
    /// `local` valid for `len` bytes until completion; `remote .. remote + len` attached in
    /// `pid`'s window.
    pub(super) unsafe fn one_sided(
        &self,
        put: bool,
        pid: usize,
        local: *mut u8,
        remote: usize,
        len: usize,
    ) {
        let mut done = 0;
        while done < len {
            let n = count((len - done).min(piece()));
            let (at, target) = (local.wrapping_add(done), (remote + done) as ffi::MPI_Aint);
            // SAFETY: forwarded to the caller; the datatype is a constant MPI handle.
            unsafe {
                let byte = ffi::RSMPI_UINT8_T;
                if put {
                    ffi::MPI_Put(
                        at as *const _,
                        n,
                        byte,
                        pid as i32,
                        target,
                        n,
                        byte,
                        self.win,
                    );
                } else {
                    ffi::MPI_Get(at as *mut _, n, byte, pid as i32, target, n, byte, self.win);
                }
            }
            done += n as usize;
        }
    }

    /// Complete this superstep's one-sided puts at their targets.
    pub(super) fn flush_puts(&self) {
        if self.hp_pending.replace(false) {
            // SAFETY: a valid window, locked for all targets.
            unsafe { ffi::MPI_Win_flush_all(self.win) };
        }
    }

    /// Wait until rank `pid` has completed `step` syncs, as `policy` says (each check is an
    /// atomic read of `pid`'s window; the sleep phase naps). Gives up with [`Aborted`] when
    /// `aborted()` turns true or `pid` has published that its run failed ([`DONE_FAILED`]).
    pub(super) fn wait_settled(
        &self,
        pid: usize,
        step: u64,
        policy: WaitPolicy,
        aborted: impl Fn() -> bool,
    ) -> std::result::Result<(), Aborted> {
        if self.settled.borrow()[pid] >= step {
            return Ok(());
        }
        let seen = wait_until(
            policy,
            Sleep::Naps,
            || {
                let seen = self.read_done(pid);
                (seen >= step).then_some(seen)
            },
            aborted,
        )?;
        if seen == DONE_FAILED {
            return Err(Aborted);
        }
        self.settled.borrow_mut()[pid] = seen;
        Ok(())
    }

    /// Rank `pid`'s published count of completed syncs.
    pub(super) fn read_done(&self, pid: usize) -> u64 {
        let mut seen = 0u64;
        // Fetch-and-add of 0: an atomic read (MPICH has no MPI_NO_OP constant in rsmpi).
        let nothing = 0u64;
        // SAFETY: `done_at[pid]` is attached in `pid`'s window for the whole run; an atomic
        // fetch of one u64, completed by the flush.
        unsafe {
            ffi::MPI_Fetch_and_op(
                &nothing as *const u64 as *const _,
                &mut seen as *mut u64 as *mut _,
                ffi::RSMPI_UINT64_T,
                pid as i32,
                self.done_at[pid] as ffi::MPI_Aint,
                ffi::RSMPI_SUM,
                self.win,
            );
            ffi::MPI_Win_flush(pid as i32, self.win);
        }
        seen
    }

    /// Publish `step` completed syncs.
    pub(super) fn publish_done(&mut self, step: u64) {
        // SAFETY: our own window memory; others read it only with atomic operations, and
        // MPI_Win_sync makes the store visible to them.
        unsafe {
            std::ptr::write_volatile(&mut *self.done, step);
            ffi::MPI_Win_sync(self.win);
        }
    }

    /// Publish that this rank's run has failed (it completes no more syncs): before an
    /// exchange that reports the failure, which blocks until every rank joins it — a rank
    /// waiting for this one to complete a sync must stop waiting to join.
    pub(super) fn publish_failed(&mut self) {
        self.publish_done(DONE_FAILED);
    }
}
