//! Large puts between ranks of one node, through shared-memory segments.

use super::protocol::MAX_SEGMENT;
use mpi::collective::CommunicatorCollectives;
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::{Communicator, SimpleCommunicator};

/// The large puts of one superstep to one rank: their data (copied at the call) and records
/// (destination address, length, where the data is).
#[derive(Default)]
pub(super) struct BigPuts {
    pub(super) data: Vec<u8>,
    pub(super) recs: Vec<(u64, u64, Source)>,
}

#[derive(Clone, Copy)]
pub(super) enum Source {
    Copied(usize),
    /// At this offset of our shared segment (read by the receiver itself).
    Shared(usize),
}

/// The shared-memory segments of the ranks of this node, for large puts between them: the
/// sender copies the data (at the call, as a buffered put must) into its own segment, and the
/// receiver copies it from there into place at the sync — two copies in all, where a message
/// through MPICH's shared memory adds its own. Each segment has two halves, one per superstep
/// parity: a sender writes the half of parity `q` again only two syncs later, after every
/// receiver has entered the next sync and so finished reading it (the outboxes' argument).
/// A put that does not fit travels as a message and makes every node grow its segments at the
/// end of that sync (behind a barrier of the node: nobody reads the old ones any more).
pub(super) struct Shm {
    /// The ranks of the run on this node.
    pub(super) node: ffi::MPI_Comm,
    /// By rank of the run: its rank in `node`, if it is on this node.
    pub(super) node_rank: Vec<Option<usize>>,
    pub(super) win: Option<ffi::MPI_Win>,
    /// By rank of `node`: the address of its segment (as mapped here).
    pub(super) bases: Vec<u64>,
    /// Our segment: bytes per half, bytes used in each half.
    pub(super) cap: usize,
    pub(super) used: [usize; 2],
    /// Bytes that did not fit this superstep.
    pub(super) missed: usize,
    /// Allocation failed somewhere on the node: no segments for the rest of the run.
    pub(super) disabled: bool,
}

impl Shm {
    /// Collective over `comm`.
    pub(super) fn new(comm: &SimpleCommunicator) -> Shm {
        let p = comm.size() as usize;
        // SAFETY: an MPI handle is plain data (an integer in MPICH, a pointer in Open MPI),
        // for which all-zero bytes are a valid value; the call below overwrites it.
        let mut node: ffi::MPI_Comm = unsafe { std::mem::zeroed() };
        // SAFETY: a valid communicator; `node` is written by the call.
        unsafe {
            ffi::MPI_Comm_split_type(
                comm.as_raw(),
                ffi::RSMPI_COMM_TYPE_SHARED,
                comm.rank(),
                ffi::RSMPI_INFO_NULL,
                &mut node,
            )
        };
        // Every rank's lowest node mate identifies its node; node ranks follow run ranks.
        let mut lowest = 0i32;
        // SAFETY: `node` is valid; one int reduced.
        unsafe {
            ffi::MPI_Allreduce(
                &comm.rank() as *const i32 as *const _,
                &mut lowest as *mut i32 as *mut _,
                1,
                ffi::RSMPI_INT32_T,
                ffi::RSMPI_MIN,
                node,
            )
        };
        let mut leaders = vec![0i32; p];
        comm.all_gather_into(&lowest, &mut leaders[..]);
        let mut node_rank = vec![None; p];
        let mut next = 0;
        for k in 0..p {
            if leaders[k] == lowest {
                node_rank[k] = Some(next);
                next += 1;
            }
        }
        Shm {
            node,
            node_rank,
            win: None,
            bases: Vec::new(),
            cap: 0,
            used: [0; 2],
            missed: 0,
            disabled: false,
        }
    }

    /// Copy `src` into half `q` of our segment if it fits: its offset in the segment.
    pub(super) fn place(&mut self, q: usize, src: &[u8]) -> Option<usize> {
        let need = src.len().next_multiple_of(64);
        if self.win.is_none() || self.used[q] + need > self.cap {
            if !self.disabled && self.cap < MAX_SEGMENT {
                self.missed += need;
            }
            return None;
        }
        let off = q * self.cap + self.used[q];
        self.used[q] += need;
        Some(off)
    }

    /// Collective over the node: free the segments and allocate ones with `cap` bytes per
    /// half for us.
    pub(super) fn regrow(&mut self, my_rank_in_node: usize, cap: usize) {
        if self.disabled {
            return; // on every rank of the node alike (they agreed when it failed)
        }
        self.free();
        let mut base: *mut u8 = std::ptr::null_mut();
        // SAFETY: an MPI handle is plain data (an integer in MPICH, a pointer in Open MPI),
        // for which all-zero bytes are a valid value; the call below overwrites it.
        let mut win: ffi::MPI_Win = unsafe { std::mem::zeroed() };
        // SAFETY: collective over the node; `base` and `win` are written by the call. Errors
        // return (the node communicator's handler) instead of ending the job.
        let rc = unsafe {
            ffi::MPI_Comm_set_errhandler(self.node, ffi::RSMPI_ERRORS_RETURN);
            ffi::MPI_Win_allocate_shared(
                (2 * cap) as ffi::MPI_Aint,
                1,
                ffi::RSMPI_INFO_NULL,
                self.node,
                &mut base as *mut *mut u8 as *mut _,
                &mut win,
            )
        };
        // Every rank of the node must have its segment, or nobody uses them: large puts then
        // travel as messages for the rest of the run.
        let ok = i32::from(rc == 0);
        let mut all = 0i32;
        // SAFETY: one int reduced over the node.
        unsafe {
            ffi::MPI_Allreduce(
                &ok as *const i32 as *const _,
                &mut all as *mut i32 as *mut _,
                1,
                ffi::RSMPI_INT32_T,
                ffi::RSMPI_MIN,
                self.node,
            )
        };
        if all == 0 {
            if rc == 0 {
                // SAFETY: just allocated; collective like the allocation (every rank of the node
                // that succeeded frees; MPI frees failed ones itself).
                unsafe { ffi::MPI_Win_free(&mut win) };
            }
            self.disabled = true;
            self.cap = 0;
            return;
        }
        let mut n = 0;
        // SAFETY: a valid communicator.
        unsafe { ffi::MPI_Comm_size(self.node, &mut n) };
        self.bases = (0..n)
            .map(|r| {
                let (mut size, mut unit, mut at): (ffi::MPI_Aint, i32, *mut u8) =
                    (0, 0, std::ptr::null_mut());
                // SAFETY: `r` is a rank of the window's group.
                unsafe {
                    ffi::MPI_Win_shared_query(
                        win,
                        r,
                        &mut size,
                        &mut unit,
                        &mut at as *mut *mut u8 as *mut _,
                    )
                };
                at as u64
            })
            .collect();
        debug_assert_eq!(self.bases[my_rank_in_node], base as u64);
        self.win = Some(win);
        self.cap = cap;
        self.used = [0; 2];
    }

    /// Collective over the node: free the segments.
    pub(super) fn free(&mut self) {
        if let Some(mut w) = self.win.take() {
            // SAFETY: nobody reads the segments any more (the caller's barrier or the end).
            unsafe { ffi::MPI_Win_free(&mut w) };
        }
    }
}
