//! What a rank keeps and publishes for its lazy syncs (`lazy.rs`): the streams it sent and
//! has not seen matched, the streams it received, and the board of counts other ranks read in
//! its window. Data and its bookkeeping only; the protocol is in `lazy.rs`.

use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::SimpleCommunicator;

/// MPI tag of the lazy streams of superstep parity 0 (parity 1: the next one).
pub(super) const LAZY_TAG: i32 = 0x6d70;

/// A rank's sync mode word in its window: `(s + 1) << 1`, plus 1 for a lazy sync.
pub(super) fn mode(s: u64, lazy: bool) -> u64 {
    (s + 1) << 1 | u64::from(lazy)
}

/// What lazy syncs keep and publish on a rank.
pub(super) struct LazyNet {
    /// The streams' communicator (a duplicate: its receives match nothing else).
    pub(super) comm: ffi::MPI_Comm,
    /// Words published in our window: `[entered, sent[0][..p], sent[1][..p], got[0][..p],
    /// got[1][..p]]`: the mode word of the last sync we entered; the streams sent to and
    /// received from each rank, by superstep parity, since the run began.
    pub(super) board: Box<[u64]>,
    /// Per rank: the address of its board, and of its count of completed syncs, in its
    /// address space.
    pub(super) board_at: Vec<u64>,
    pub(super) done_at: Vec<u64>,
    pub(super) p: usize,
    /// Per parity, per destination: a stream's words (kept until its send completes).
    pub(super) out: [Vec<Vec<u64>>; 2],
    /// The sends of our last lazy sync not known to be complete: (destination, request).
    pub(super) pending: Vec<(usize, ffi::MPI_Request)>,
    /// The superstep of `pending`.
    pub(super) pending_step: u64,
    /// Per rank: it matched our stream of the last superstep (so it had entered that sync).
    pub(super) matched: Vec<bool>,
    /// Per rank: its stream of the last superstep arrived (so it had entered that sync).
    pub(super) heard: Vec<bool>,
    /// Streams received in this sync, by sender.
    pub(super) inbox: Vec<Vec<u64>>,
    /// The superstep of our last full sync.
    pub(super) last_full: Option<u64>,
}

impl LazyNet {
    /// Collective over `comm`: the board is attached to `win` and its address published.
    pub(super) fn new(comm: &SimpleCommunicator, win: ffi::MPI_Win, done_at: &[u64]) -> LazyNet {
        use mpi::collective::CommunicatorCollectives;
        use mpi::topology::Communicator;
        let p = comm.size() as usize;
        // SAFETY: a plain handle, written by MPI_Comm_dup.
        let mut dup: ffi::MPI_Comm = unsafe { std::mem::zeroed() };
        let board = vec![0u64; 1 + 4 * p].into_boxed_slice();
        // SAFETY: a valid communicator and window; the board lives (boxed, never moved) until
        // `close` detaches it.
        unsafe {
            ffi::MPI_Comm_dup(comm.as_raw(), &mut dup);
            ffi::MPI_Win_attach(win, board.as_ptr() as *mut _, (board.len() * 8) as _);
        }
        let mine = board.as_ptr() as u64;
        let mut board_at = vec![0u64; p];
        comm.all_gather_into(&mine, &mut board_at[..]);
        LazyNet {
            comm: dup,
            board,
            board_at,
            done_at: done_at.to_vec(),
            p,
            out: [vec![Vec::new(); p], vec![Vec::new(); p]],
            pending: Vec::new(),
            pending_step: 0,
            matched: vec![false; p],
            heard: vec![false; p],
            inbox: vec![Vec::new(); p],
            last_full: None,
        }
    }

    /// At the end of the run (collective, before the window is freed): streams that a failed
    /// run left unreceived are received and dropped (on both sides of a barrier, so that
    /// those sent before it are in), sends still unmatched are let go and their buffers
    /// leaked (MPI may still read them); the board is detached.
    pub(super) fn close(&mut self, win: ffi::MPI_Win) {
        self.drain();
        // SAFETY: our communicator; every rank closes.
        unsafe { ffi::MPI_Barrier(self.comm) };
        self.drain();
        self.pending.retain_mut(|(_, r)| {
            let mut flag = 0;
            // SAFETY: a live request.
            unsafe { ffi::MPI_Test(r, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
            flag == 0
        });
        if !self.pending.is_empty() {
            for (_, r) in &mut self.pending {
                // SAFETY: a live request; MPI completes it on its own.
                unsafe { ffi::MPI_Request_free(r) };
            }
            self.pending.clear();
            for q in &mut self.out {
                std::mem::forget(std::mem::take(q));
            }
        }
        // SAFETY: attached in `new`; our communicator.
        unsafe {
            ffi::MPI_Win_detach(win, self.board.as_ptr() as *const _);
            ffi::MPI_Comm_free(&mut self.comm);
        }
    }

    /// Receive and drop every stream that has arrived.
    pub(super) fn drain(&mut self) {
        loop {
            let mut flag = 0;
            // SAFETY: a plain struct, written by the call.
            let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
            // SAFETY: our communicator; `flag` and `status` are written by the call.
            unsafe {
                ffi::MPI_Iprobe(
                    ffi::RSMPI_ANY_SOURCE,
                    ffi::RSMPI_ANY_TAG,
                    self.comm,
                    &mut flag,
                    &mut status,
                )
            };
            if flag == 0 {
                return;
            }
            let mut n = 0;
            // SAFETY: the status of the probe above.
            unsafe { ffi::MPI_Get_count(&status, ffi::RSMPI_UINT64_T, &mut n) };
            let mut buf = vec![0u64; n.max(0) as usize];
            // SAFETY: `buf` holds the `n` words of the probed message.
            unsafe {
                ffi::MPI_Recv(
                    buf.as_mut_ptr() as *mut _,
                    n,
                    ffi::RSMPI_UINT64_T,
                    status.MPI_SOURCE,
                    status.MPI_TAG,
                    self.comm,
                    ffi::RSMPI_STATUS_IGNORE,
                )
            };
        }
    }

    pub(super) fn sent_at(&self, q: usize, k: usize) -> usize {
        1 + q * self.p + k
    }

    pub(super) fn got_at(&self, q: usize, k: usize) -> usize {
        1 + (2 + q) * self.p + k
    }

    /// Add one to our board's word `i` (visible to the others after the next `MPI_Win_sync`).
    pub(super) fn bump(&mut self, i: usize) {
        let w = &mut self.board[i];
        // SAFETY: our own window memory; others read it only with atomic operations.
        unsafe { std::ptr::write_volatile(w, *w + 1) };
    }

    /// Publish `entered` (and the board words written before it).
    pub(super) fn publish(&mut self, win: ffi::MPI_Win, entered: u64) {
        // SAFETY: as in `bump`; MPI_Win_sync makes the stores visible to the others.
        unsafe {
            std::ptr::write_volatile(&mut self.board[0], entered);
            ffi::MPI_Win_sync(win);
        }
    }

    /// Publish that this rank has entered the full sync of superstep `s`.
    pub(super) fn enter_full(&mut self, win: ffi::MPI_Win, s: u64) {
        self.last_full = Some(s);
        self.publish(win, mode(s, false));
    }

    /// Rank `k`'s words at `at` (addresses in its window), each read atomically and completed
    /// before the next is read (a later word is at least as recent as an earlier one).
    pub(super) fn read(&self, win: ffi::MPI_Win, k: usize, at: &[u64], out: &mut [u64]) {
        let nothing = 0u64;
        for (o, &a) in out.iter_mut().zip(at) {
            // SAFETY: `a` is attached in rank k's window for the whole run (its board or its
            // count of completed syncs); an atomic fetch of one u64, completed by the flush.
            unsafe {
                ffi::MPI_Fetch_and_op(
                    &nothing as *const u64 as *const _,
                    o as *mut u64 as *mut _,
                    ffi::RSMPI_UINT64_T,
                    k as i32,
                    a as ffi::MPI_Aint,
                    ffi::RSMPI_SUM,
                    win,
                );
                ffi::MPI_Win_flush(k as i32, win);
            }
        }
    }

    /// The address of word `i` of rank `k`'s board.
    pub(super) fn word(&self, k: usize, i: usize) -> u64 {
        self.board_at[k] + 8 * i as u64
    }

    /// Our board's counts of parity `q`: `[sent[q][..p], got[q][..p]]`.
    pub(super) fn counts(&self, q: usize) -> Vec<u64> {
        let (s, g) = (self.sent_at(q, 0), self.got_at(q, 0));
        let mut w = self.board[s..s + self.p].to_vec();
        w.extend_from_slice(&self.board[g..g + self.p]);
        w
    }

    /// In a full sync after a lazy one, once every stream is known to have been received:
    /// the sends complete.
    pub(super) fn complete_pending(&mut self) {
        for (_, r) in &mut self.pending {
            // SAFETY: a live request of a matched send.
            unsafe { ffi::MPI_Wait(r, ffi::RSMPI_STATUS_IGNORE) };
        }
        self.pending.clear();
    }
}
