//! The top level over MPI ranks (feature `mpi`): a program started under `mpiexec` runs the
//! processes of its top-level runs as MPI ranks, one per rank, with the same [`Ctx`] API;
//! nested runs inside a rank are thread runs, as on one machine. Started plainly (no MPI
//! launcher in the environment, or `MBSP_MPI=0`), runs are thread runs as always.
//!
//! ## What a rank keeps
//!
//! A run over ranks has the usual [`RunShared`] on every rank, with one real process (this
//! rank's) and `p - 1` mirrors. A mirror holds what this rank knows of another rank: its
//! registration table (addresses and sizes, exchanged when registrations take effect, so
//! `put`/`get` are bounds-checked at the call exactly as in the thread runtime) and, during a
//! superstep, the messages that rank sent here. Puts and messages are written into this
//! rank's outboxes by the thread runtime's code unchanged; records carry the destination's
//! address in the destination's address space (from the mirrored table).
//!
//! ## One superstep's sync
//!
//! ```text
//! hpsend payloads into outboxes; one-sided hpputs completed (MPI_Win_flush_all)
//! stream to each other rank: [outbox words][get requests][large-put records]
//! all-to-all of headers (state, stream words, flags, and the stream itself if it is short)
//!                                                             <- an empty sync stops here
//! any rank failed / ended while others sync -> every rank stops with the same error
//! REGS|TAGS: all-gather of every rank's requests (+ areas of its pushes); the thread
//!            runtime's agreement check; own table, mirrors and the window updated
//! all-to-all-v of the long streams (only if some rank sends one)
//! get requests served from this rank's memory, before any put lands; replies all-to-all-v
//! puts delivered, messages into the mirrors' outboxes (as with threads, which of several puts
//! writing the same bytes in one superstep wins is left open: here large ones land first)
//! get replies written; superstep counted done (published in the window for one-sided reads)
//! ```
//!
//! Puts and gets of at least [`BIG_PUT`] bytes do not go through the streams (whose copies
//! cost more than the data): their records travel in the streams, their data apart — a large
//! get is sent from the owner's memory and received in place (through the get buffer when
//! another get reads the destination), before any put lands; a large put to a rank of the
//! same node is copied at the call into the sender's shared-memory segment (`Shm`) and copied
//! into place by the receiver, one to another node travels as a message received in place.
//!
//! ## One-sided primitives
//!
//! Registered memory is attached to one dynamic MPI window per run (`MPI_Win_attach` when a
//! push takes effect), opened for passive access with `MPI_Win_lock_all`. `hpput` is an
//! `MPI_Put`, completed at the next sync (one of at least [`BIG_PUT`] bytes goes the way of a
//! large buffered put, copied at the call, which MPICH does several times faster than a put
//! into a dynamic window); `hpget` and `direct_get` are an `MPI_Get` plus
//! `MPI_Win_flush`, after checking (atomically, in the window) that the target has finished
//! the previous sync, as the thread runtime's immediate primitives wait for it.
//!
//! ## Failure
//!
//! Every exchange begins with each rank's state. A rank whose process failed (abort, panic,
//! misuse, an error returned) makes one last exchange with the state "failed" and its error;
//! every rank then reports that error (kind, pid, superstep and message preserved) and stops.
//! Before that exchange the failed rank publishes the failure where others read its completed
//! syncs, so that a rank waiting in an `hpput`, `hpget` or `direct_get` for it to complete a
//! sync stops waiting (with the stopped error) and joins the exchange; when several ranks
//! failed, the first root cause among their errors is reported.
//! A rank that is killed is the MPI launcher's business: MPICH's `mpiexec` ends the others.
//!
//! Trust: a rank writes where another rank's put record says and reads where its get request
//! says; both were checked by the sender against the mirrored table, as one process of the
//! thread runtime trusts another's checks.

use crate::barrier::{FLAG_COMM, FLAG_GETS, FLAG_REGS, FLAG_TAGS, NO_RIDE};
use crate::ctx::{Coll, Ctx, RunShared};
use crate::error::{Error, ErrorKind, Result};
use crate::outbox::Outbox;
use crate::registry::{ElemType, RegOp, RegSig};
use crate::wait::{Aborted, Sleep, WaitPolicy, wait_until};
use mpi::collective::CommunicatorCollectives;
use mpi::datatype::{Partition, PartitionMut};
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::{Communicator, SimpleCommunicator};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// The environment variable that forces (`1`) or forbids (`0`) running top levels over MPI
/// ranks; by default they do when an MPI launcher started the program.
pub const MPI_ENV: &str = "MBSP_MPI";

const SYNCING: u64 = 0;
const ENDED: u64 = 1;
const FAILED: u64 = 2;

/// A rank's published count of completed syncs once its run has failed: a rank waiting for it
/// to complete a sync ([`Net::wait_settled`]) stops waiting instead of waiting forever.
const DONE_FAILED: u64 = u64::MAX;

/// Words per pair in the header exchange: state, stream length, flags, and a stream of up to
/// [`INLINE`] words (a few small puts or messages), which then needs no second exchange.
const SLOT: usize = 16;
const INLINE: usize = SLOT - 3;

/// Header flag: the sender has a stream too long for its header slot for somebody.
const STREAM: u64 = 1 << 32;
/// Header flag: the sender has large puts, which travel apart (received in place).
const BIG: u64 = 1 << 33;
/// Header flag: the sender has large gets, whose data travels apart.
const BIG_GETS: u64 = 1 << 34;

/// Puts to another rank of at least this many bytes travel as messages of their own, received
/// straight into the destination: two copies fewer than through the stream.
pub(crate) const BIG_PUT: usize = 32 << 10;

/// MPI tag of the large puts (matched in order between each pair of ranks).
const BIG_TAG: i32 = 0x6d62;
/// MPI tag of the large gets' data.
const BIG_GET_TAG: i32 = 0x6d63;

/// A get request's length word: the data travels apart (sent from the owner's memory, received
/// in place when safe).
const APART: u64 = 1 << 63;

/// The large puts of one superstep to one rank: their data (copied at the call) and records
/// (destination address, length, where the data is).
#[derive(Default)]
struct BigPuts {
    data: Vec<u8>,
    recs: Vec<(u64, u64, Source)>,
}

#[derive(Clone, Copy)]
enum Source {
    Copied(usize),
    /// At this offset of our shared segment (read by the receiver itself).
    Shared(usize),
}

/// Largest half of a shared segment (each rank has two): 256 MiB. Larger large puts travel
/// as messages.
const MAX_SEGMENT: usize = 256 << 20;

/// A stream's large-put record word for data that travels as a message.
const AS_MESSAGE: u64 = u64::MAX;

/// Header flag: some rank's large puts to ranks of its node did not fit its shared segment;
/// every node grows its segments at the end of this sync.
const GROW: u64 = 1 << 35;

/// The shared-memory segments of the ranks of this node, for large puts between them: the
/// sender copies the data (at the call, as a buffered put must) into its own segment, and the
/// receiver copies it from there into place at the sync — two copies in all, where a message
/// through MPICH's shared memory adds its own. Each segment has two halves, one per superstep
/// parity: a sender writes the half of parity `q` again only two syncs later, after every
/// receiver has entered the next sync and so finished reading it (the outboxes' argument).
/// A put that does not fit travels as a message and makes every node grow its segments at the
/// end of that sync (behind a barrier of the node: nobody reads the old ones any more).
struct Shm {
    /// The ranks of the run on this node.
    node: ffi::MPI_Comm,
    /// By rank of the run: its rank in `node`, if it is on this node.
    node_rank: Vec<Option<usize>>,
    win: Option<ffi::MPI_Win>,
    /// By rank of `node`: the address of its segment (as mapped here).
    bases: Vec<u64>,
    /// Our segment: bytes per half, bytes used in each half.
    cap: usize,
    used: [usize; 2],
    /// Bytes that did not fit this superstep.
    missed: usize,
    /// Allocation failed somewhere on the node: no segments for the rest of the run.
    disabled: bool,
}

impl Shm {
    /// Collective over `comm`.
    fn new(comm: &SimpleCommunicator) -> Shm {
        let p = comm.size() as usize;
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
    fn place(&mut self, q: usize, src: &[u8]) -> Option<usize> {
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
    fn regrow(&mut self, my_rank_in_node: usize, cap: usize) {
        if self.disabled {
            return; // on every rank of the node alike (they agreed when it failed)
        }
        self.free();
        let mut base: *mut u8 = std::ptr::null_mut();
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
    fn free(&mut self) {
        if let Some(mut w) = self.win.take() {
            // SAFETY: nobody reads the segments any more (the caller's barrier or the end).
            unsafe { ffi::MPI_Win_free(&mut w) };
        }
    }
}

/// The environment variable bounding how long a rank waits in a sync for the others, in
/// seconds (default 3600; 0: forever). It must exceed the longest superstep of the program:
/// a rank computing longer than this before its next sync is taken for dead. A rank that dies is normally reported by the MPI
/// launcher, which ends the others; this bounds the wait when it does not.
pub const TIMEOUT_ENV: &str = "MBSP_MPI_TIMEOUT";

/// How long a rank waits in a sync for the others ([`TIMEOUT_ENV`]).
fn timeout() -> Option<std::time::Duration> {
    static T: OnceLock<Option<std::time::Duration>> = OnceLock::new();
    *T.get_or_init(|| {
        let secs = std::env::var(TIMEOUT_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(3600.0);
        (secs > 0.0).then(|| std::time::Duration::from_secs_f64(secs))
    })
}

/// A thread that ends this rank if it waits in a sync's header exchange longer than
/// [`timeout`]: the MPI launcher then ends the others (MPICH's does on any non-zero exit). The
/// waiting rank only stores two words on entry and one on exit, so the empty sync costs no more
/// than without it; the thread sleeps between checks.
struct Watchdog {
    /// Milliseconds since `base` at which the current wait began, plus 1 (0: not waiting).
    since: std::sync::atomic::AtomicU64,
    /// pid << 40 | superstep of the current wait (for the message).
    at: std::sync::atomic::AtomicU64,
    base: std::time::Instant,
}

impl Watchdog {
    fn enter(&'static self, pid: usize, step: u64) -> &'static Watchdog {
        let now = self.base.elapsed().as_millis() as u64 + 1;
        self.at.store(
            (pid as u64) << 40 | (step & ((1 << 40) - 1)),
            Ordering::Relaxed,
        );
        self.since.store(now, Ordering::Release);
        self
    }

    fn leave(&self) {
        self.since.store(0, Ordering::Release);
    }

    fn watch(&self, limit: std::time::Duration) {
        let period = (limit / 10).clamp(
            std::time::Duration::from_millis(10),
            std::time::Duration::from_secs(1),
        );
        loop {
            std::thread::sleep(period);
            let since = self.since.load(Ordering::Acquire);
            if since == 0 {
                continue;
            }
            let now = self.base.elapsed().as_millis() as u64 + 1;
            if now.saturating_sub(since) <= limit.as_millis() as u64 {
                continue;
            }
            let at = self.at.load(Ordering::Relaxed);
            let line = format!(
                "mbsp: sync (pid {}, superstep {}): no word from the other ranks for {:.0} s (one \
                 may have died or stopped syncing); ending this rank ({TIMEOUT_ENV}=seconds \
                 changes the limit, 0 waits forever)\n",
                at >> 40,
                at & ((1 << 40) - 1),
                limit.as_secs_f64()
            );
            use std::io::Write;
            let _ = std::io::stderr().write_all(line.as_bytes());
            // SAFETY: ends the process at once, without running exit handlers (MPI_Finalize
            // would wait for the ranks we gave up on).
            unsafe { _exit(1) };
        }
    }
}

unsafe extern "C" {
    fn _exit(status: std::ffi::c_int) -> !;
}

/// The watchdog, started on first use, when a timeout applies.
fn watchdog() -> Option<&'static Watchdog> {
    static W: OnceLock<Option<&'static Watchdog>> = OnceLock::new();
    *W.get_or_init(|| {
        let limit = timeout()?;
        let w: &'static Watchdog = Box::leak(Box::new(Watchdog {
            since: std::sync::atomic::AtomicU64::new(0),
            at: std::sync::atomic::AtomicU64::new(0),
            base: std::time::Instant::now(),
        }));
        std::thread::Builder::new()
            .name("mbsp-mpi-watchdog".into())
            .spawn(move || w.watch(limit))
            .ok()?;
        Some(w)
    })
}

/// A run over ranks is going on in this program (runs started inside it are thread runs).
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Whether the environment says an MPI launcher started this program.
fn launched() -> bool {
    match std::env::var(MPI_ENV).as_deref() {
        Ok("0") => false,
        Ok("1") => true,
        _ => ["PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK"]
            .iter()
            .any(|v| std::env::var_os(v).is_some()),
    }
}

unsafe extern "C" {
    fn atexit(f: extern "C" fn()) -> std::ffi::c_int;
}

extern "C" fn finalize() {
    let mut done = 0;
    // SAFETY: plain MPI calls on an initialised MPI (registered only after initialisation).
    unsafe {
        ffi::MPI_Finalized(&mut done);
        if done == 0 {
            ffi::MPI_Finalize();
        }
    }
}

/// MPI is initialised (by mbsp, or already by the program) because a launcher started us.
fn initialised() -> bool {
    static INIT: OnceLock<bool> = OnceLock::new();
    *INIT.get_or_init(|| {
        if !launched() {
            return false;
        }
        if mpi::environment::is_initialized() {
            return true;
        }
        match mpi::initialize_with_threading(mpi::Threading::Serialized) {
            Some((universe, _)) => {
                // MPI stays up for every later run; it is finalised when the program exits.
                std::mem::forget(universe);
                // SAFETY: registering a plain function.
                unsafe { atexit(finalize) };
                true
            }
            None => false,
        }
    })
}

/// This program's MPI rank and the number of ranks, when top-level runs go over ranks (the
/// program was started by an MPI launcher and mbsp was built with the `mpi` feature).
///
/// ```
/// // Started plainly, there are no ranks.
/// if std::env::var_os("PMI_SIZE").is_none() && std::env::var_os("MBSP_MPI").is_none() {
///     assert_eq!(mbsp::mpi_ranks(), None);
/// }
/// ```
pub fn mpi_ranks() -> Option<(usize, usize)> {
    if !initialised() {
        return None;
    }
    let w = SimpleCommunicator::world();
    Some((w.rank() as usize, w.size() as usize))
}

/// The communicator for a new top-level run, if it goes over ranks.
pub(crate) fn world_for_top_level() -> Option<SimpleCommunicator> {
    (initialised() && !ACTIVE.load(Ordering::Acquire)).then(SimpleCommunicator::world)
}

/// Marks the program as inside a run over ranks while alive.
pub(crate) struct Active;

impl Active {
    pub(crate) fn enter() -> Active {
        ACTIVE.store(true, Ordering::Release);
        Active
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        ACTIVE.store(false, Ordering::Release);
    }
}

/// The communicator of a run of `p` processes: all ranks, or the first `p` (the others get
/// `None`: they take no part). Collective over the world.
pub(crate) fn comm_for(world: SimpleCommunicator, p: usize) -> Option<SimpleCommunicator> {
    if p == world.size() as usize {
        return Some(world);
    }
    let inside = (world.rank() as usize) < p;
    let color = mpi::topology::Color::with_value(if inside { 0 } else { 1 });
    let sub = world.split_by_color(color);
    if inside { sub } else { None }
}

/// Collective over `world`: every rank learns whether all of them could prepare the run; a
/// rank that could not returns its own error, the others one naming it.
pub(crate) fn agree_start(world: &SimpleCommunicator, mine: Option<&Error>) -> Result<()> {
    let code = if mine.is_some() {
        world.rank()
    } else {
        i32::MAX
    };
    let mut first = 0i32;
    world.all_reduce_into(&code, &mut first, mpi::collective::SystemOperation::min());
    match (mine, first) {
        (Some(e), _) => Err(e.clone()),
        (None, i32::MAX) => Ok(()),
        (None, k) => Err(Error::outside(
            ErrorKind::Aborted,
            "run",
            format!("rank {k} could not start the run over MPI ranks (it reports why)"),
        )),
    }
}

/// Make `shared` a run over ranks: no barrier rides, and the mirrors count as stopped (a
/// failed sync never waits for other ranks' threads: they are not in this address space).
pub(crate) fn adapt(shared: &mut RunShared) {
    let p = shared.p;
    shared.riders = (0..p).map(|_| vec![NO_RIDE; p].into()).collect();
    shared
        .stopped
        .store(p.saturating_sub(1), std::sync::atomic::Ordering::Relaxed);
}

/// What a rank's top-level process needs to talk to the others.
pub(crate) struct Net {
    comm: SimpleCommunicator,
    /// The dynamic window holding every registered area of this rank, and `done`.
    win: ffi::MPI_Win,
    /// This rank's completed syncs, readable by the others through `win`.
    done: Box<u64>,
    /// Per rank: the address of its `done` in its address space.
    done_at: Vec<u64>,
    /// Per rank: the superstep up to which it is known to have completed its syncs.
    settled: std::cell::RefCell<Vec<u64>>,
    /// One-sided puts were issued in this superstep (to complete at the sync).
    hp_pending: std::cell::Cell<bool>,
    /// An exchange reported the end or a failure: no more exchanges.
    over: bool,
    /// The sync headers sent and received (kept from sync to sync).
    header: Vec<u64>,
    got: Vec<u64>,
    /// Large puts of this superstep, by destination rank.
    big: std::cell::RefCell<Vec<BigPuts>>,
    /// The shared segments of this node's ranks, for large puts between them.
    shm: std::cell::RefCell<Shm>,
    /// This rank.
    me: usize,
    /// The intervals of our memory attached to `win`, disjoint and sorted.
    attached: Vec<(usize, usize)>,
    send: Vec<u64>,
    send_counts: Vec<i32>,
    recv: Vec<u64>,
    replies: Vec<Vec<u8>>,
    reply_send: Vec<u8>,
    reply_recv: Vec<u8>,
}

// SAFETY: MPI handles are plain values; a `Net` is used by its process's thread only (it lives
// in a `Ctx`, which is not `Send`; the bound is for `Box<Net>` inside `Ctx`'s fields).
unsafe impl Send for Net {}

impl Net {
    /// Collective over `comm`: the window is created and `done` published.
    pub(crate) fn new(comm: SimpleCommunicator) -> Net {
        let p = comm.size() as usize;
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
        Net {
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
            header: Vec::new(),
            got: Vec::new(),
            big: std::cell::RefCell::new((0..p).map(|_| BigPuts::default()).collect()),
            send: Vec::new(),
            send_counts: vec![0; p],
            recv: Vec::new(),
            replies: vec![Vec::new(); p],
            reply_send: Vec::new(),
            reply_recv: Vec::new(),
        }
    }

    /// Collective: close the window (after the last exchange of the run).
    pub(crate) fn close(mut self) {
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
    /// [`Watchdog`].
    fn headers(&self, header: &[u64], got: &mut [u64], pid: usize, step: u64) {
        let armed = watchdog().map(|w| w.enter(pid, step));
        self.comm.all_to_all_into(header, got);
        if let Some(w) = armed {
            w.leave();
        }
    }

    /// All-to-all-v of words: `send` (`send_counts` words to each rank, in rank order) into
    /// `recv`; returns the offset of each rank's part in `recv` (`p + 1` of them).
    fn exchange_words(&mut self, recv_counts: &[i32]) -> Vec<usize> {
        // Where each stream starts in `send`; short ones went in the headers.
        let sd = offsets(&self.send_counts);
        let send_counts: Vec<i32> = self
            .send_counts
            .iter()
            .map(|&c| if c as usize > INLINE { c } else { 0 })
            .collect();
        let rd = offsets(recv_counts);
        let total = rd[rd.len() - 1] as usize;
        self.recv.clear();
        self.recv.resize(total, 0);
        {
            let s = Partition::new(&self.send[..], &send_counts[..], &sd[..sd.len() - 1]);
            let mut r = PartitionMut::new(&mut self.recv[..], recv_counts, &rd[..rd.len() - 1]);
            self.comm.all_to_all_varcount_into(&s, &mut r);
        }
        rd.iter().map(|&d| d as usize).collect()
    }

    /// All-to-all-v of the get replies; returns each rank's offset in `reply_recv`.
    fn exchange_replies(&mut self) -> Vec<usize> {
        let counts: Vec<u64> = self.replies.iter().map(|r| r.len() as u64).collect();
        let mut back = vec![0u64; counts.len()];
        self.comm.all_to_all_into(&counts[..], &mut back[..]);
        self.reply_send.clear();
        for r in &self.replies {
            self.reply_send.extend_from_slice(r);
        }
        let sc: Vec<i32> = counts.iter().map(|&c| count(c as usize)).collect();
        let rc: Vec<i32> = back.iter().map(|&c| count(c as usize)).collect();
        let (sd, rd) = (offsets(&sc), offsets(&rc));
        self.reply_recv.clear();
        self.reply_recv.resize(rd[rd.len() - 1] as usize, 0);
        {
            let s = Partition::new(&self.reply_send[..], &sc[..], &sd[..sd.len() - 1]);
            let mut r = PartitionMut::new(&mut self.reply_recv[..], &rc[..], &rd[..rd.len() - 1]);
            self.comm.all_to_all_varcount_into(&s, &mut r);
        }
        rd.iter().map(|&d| d as usize).collect()
    }

    /// All-gather of variable-length word vectors: each rank's part.
    fn all_gather_words(&self, mine: &[u64]) -> Vec<Vec<u64>> {
        let p = self.comm.size() as usize;
        let n = mine.len() as u64;
        let mut lens = vec![0u64; p];
        self.comm.all_gather_into(&n, &mut lens[..]);
        let counts: Vec<i32> = lens.iter().map(|&l| count(l as usize)).collect();
        let displ = offsets(&counts);
        let mut all = vec![0u64; displ[p] as usize];
        {
            let mut r = PartitionMut::new(&mut all[..], &counts[..], &displ[..p]);
            self.comm.all_gather_varcount_into(mine, &mut r);
        }
        (0..p)
            .map(|k| all[displ[k] as usize..displ[k + 1] as usize].to_vec())
            .collect()
    }

    /// Queue a large put of `src` to `dst` on rank `pid` (copied now: a buffered put); `None`
    /// if the memory for the copy cannot be allocated (nothing is queued then).
    pub(crate) fn big_put(&self, pid: usize, dst: *mut u8, src: &[u8], step: u64) -> Option<()> {
        let mut big = self.big.borrow_mut();
        let b = &mut big[pid];
        let mut shm = self.shm.borrow_mut();
        if shm.node_rank[pid].is_some() {
            if let Some(off) = shm.place((step & 1) as usize, src) {
                let base = shm.bases[shm.node_rank[self.me].expect("on our node")];
                // SAFETY: `off .. off + len` lies in our segment (checked by `place`), which
                // no receiver reads before the sync (double buffering: module docs of `Shm`).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        src.as_ptr(),
                        (base + off as u64) as *mut u8,
                        src.len(),
                    )
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
    fn grow_segments(&mut self) {
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
    fn move_big(&mut self, incoming: &[(usize, &[u64])]) {
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
                        std::ptr::copy_nonoverlapping(
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

    /// Point-to-point transfers: `(rank, address, length)` to receive and to send, matched in
    /// order between each pair of ranks; returns when all are complete.
    ///
    /// # Safety
    /// Receive areas valid for writing and not otherwise accessed until the return; send areas
    /// valid for reading and unchanged until the return.
    unsafe fn transfer(&self, recvs: &[(usize, u64, u64)], sends: &[(usize, u64, u64)], tag: i32) {
        let mut reqs: Vec<ffi::MPI_Request> = Vec::new();
        let comm = self.comm.as_raw();
        for (list, recv) in [(recvs, true), (sends, false)] {
            for &(k, addr, len) in list {
                let mut done = 0;
                while done < len {
                    let n = (len - done).min(PIECE as u64) as i32;
                    // SAFETY: a plain handle, written by the call.
                    let mut req: ffi::MPI_Request = unsafe { std::mem::zeroed() };
                    let at = addr + done;
                    // SAFETY: the caller's promises on the areas.
                    unsafe {
                        if recv {
                            ffi::MPI_Irecv(
                                at as *mut _,
                                n,
                                ffi::RSMPI_UINT8_T,
                                k as i32,
                                tag,
                                comm,
                                &mut req,
                            );
                        } else {
                            ffi::MPI_Isend(
                                at as *const _,
                                n,
                                ffi::RSMPI_UINT8_T,
                                k as i32,
                                tag,
                                comm,
                                &mut req,
                            );
                        }
                    }
                    reqs.push(req);
                    done += n as u64;
                }
            }
        }
        // SAFETY: the requests were just posted; their buffers live until they complete.
        unsafe {
            ffi::MPI_Waitall(
                reqs.len() as i32,
                reqs.as_mut_ptr(),
                ffi::RSMPI_STATUSES_IGNORE,
            )
        };
    }

    /// `MPI_Put` (`put`) of `len` bytes at `local` to address `remote` of rank `pid`, or
    /// `MPI_Get` from there into `local`, in pieces of at most [`PIECE`] bytes (not completed).
    ///
    /// # Safety
    /// `local` valid for `len` bytes until completion; `remote .. remote + len` attached in
    /// `pid`'s window.
    unsafe fn one_sided(&self, put: bool, pid: usize, local: *mut u8, remote: usize, len: usize) {
        let mut done = 0;
        while done < len {
            let n = (len - done).min(PIECE) as i32;
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
    fn flush_puts(&self) {
        if self.hp_pending.replace(false) {
            // SAFETY: a valid window, locked for all targets.
            unsafe { ffi::MPI_Win_flush_all(self.win) };
        }
    }

    /// Wait until rank `pid` has completed `step` syncs, as `policy` says (each check is an
    /// atomic read of `pid`'s window; the sleep phase naps). Gives up with [`Aborted`] when
    /// `aborted()` turns true or `pid` has published that its run failed ([`DONE_FAILED`]).
    fn wait_settled(
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
    fn read_done(&self, pid: usize) -> u64 {
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
    fn publish_done(&mut self, step: u64) {
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
    fn publish_failed(&mut self) {
        self.publish_done(DONE_FAILED);
    }
}

/// The parts of a stream from another rank: (encoded outbox, get requests as `[address,
/// length]` word pairs, large-put records as `[address, length, offset in the sender's shared
/// segment or AS_MESSAGE]` triples).
fn split_stream(w: &[u64]) -> (&[u64], &[u64], &[u64]) {
    let used = Outbox::decode(w).4;
    let n = w[used] as usize;
    let gets = &w[used + 1..used + 1 + 2 * n];
    let at = used + 1 + 2 * n;
    let nb = w[at] as usize;
    (&w[..used], gets, &w[at + 1..at + 1 + 3 * nb])
}

/// Largest piece of one MPI call (counts are C ints).
const PIECE: usize = 1 << 30;

fn count(n: usize) -> i32 {
    i32::try_from(n).expect(
        "mbsp over MPI: more than 2^31 - 1 units between two ranks in one exchange (MPI counts \
         are C ints)",
    )
}

fn offsets(counts: &[i32]) -> Vec<i32> {
    let mut d = Vec::with_capacity(counts.len() + 1);
    let mut acc = 0i32;
    d.push(0);
    for &c in counts {
        acc = acc.checked_add(c).expect(
            "mbsp over MPI: more than 2^31 - 1 units in one exchange (MPI counts are C ints)",
        );
        d.push(acc);
    }
    d
}

/// A `&'static str` equal to `s` (names of types and operations that arrive from other ranks;
/// few distinct ones).
fn intern(s: &str) -> &'static str {
    static NAMES: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.iter().find(|n| **n == s) {
        return n;
    }
    let n: &'static str = Box::leak(s.to_string().into_boxed_str());
    names.push(n);
    n
}

fn put_str(w: &mut Vec<u64>, s: &str) {
    w.push(s.len() as u64);
    for chunk in s.as_bytes().chunks(8) {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        w.push(u64::from_le_bytes(b));
    }
}

fn take_str(w: &[u64], at: &mut usize) -> String {
    let n = w[*at] as usize;
    *at += 1;
    let words = n.div_ceil(8);
    let bytes: Vec<u8> = w[*at..*at + words]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .take(n)
        .collect();
    *at += words;
    String::from_utf8_lossy(&bytes).into_owned()
}

const KINDS: [ErrorKind; 5] = [
    ErrorKind::Misuse,
    ErrorKind::Abort,
    ErrorKind::Panic,
    ErrorKind::Aborted,
    ErrorKind::System,
];

/// An error for another rank: kind, op, path, superstep, message.
fn encode_error(e: &Error, w: &mut Vec<u64>) {
    w.push(KINDS.iter().position(|k| *k == e.kind()).unwrap_or(0) as u64);
    put_str(w, e.op());
    w.push(e.path().len() as u64);
    w.extend(e.path().iter().map(|&p| p as u64));
    w.push(e.superstep().map_or(u64::MAX, |s| s));
    put_str(w, e.message());
}

fn decode_error(w: &[u64]) -> Error {
    let mut at = 0;
    let kind = KINDS[(w[0] as usize).min(KINDS.len() - 1)];
    at += 1;
    let op = intern(&take_str(w, &mut at));
    let n = w[at] as usize;
    at += 1;
    let path = w[at..at + n].iter().map(|&p| p as usize).collect();
    at += n;
    let step = (w[at] != u64::MAX).then_some(w[at]);
    at += 1;
    let message = take_str(w, &mut at);
    Error::new(kind, op, path, step, message)
}

/// A rank's registration and tag-size requests, and the areas of its pushes.
fn encode_coll(c: &Coll, areas: &[(u64, u64)], w: &mut Vec<u64>) {
    w.push(c.tagsize.map_or(0, |t| t as u64 + 1));
    w.push(c.regs.len() as u64);
    for r in &c.regs {
        w.push(r.push as u64);
        w.push(r.slot as u64);
        put_str(w, r.ty.name);
    }
    w.push(c.wild.len() as u64);
    for cands in &c.wild {
        w.push(cands.len() as u64);
        w.extend(cands.iter().map(|&s| s as u64));
    }
    for &(ptr, len) in areas {
        w.push(ptr);
        w.push(len);
    }
}

fn decode_coll(w: &[u64], stamp: u64) -> (Coll, Vec<(u64, u64)>) {
    let mut at = 2;
    let tagsize = (w[0] > 0).then(|| (w[0] - 1) as usize);
    let mut regs = Vec::new();
    for _ in 0..w[1] {
        let push = w[at] != 0;
        let slot = w[at + 1] as u32;
        at += 2;
        let name = intern(&take_str(w, &mut at));
        regs.push(RegSig {
            push,
            slot,
            ty: ElemType { id: None, name },
        });
    }
    let nw = w[at] as usize;
    at += 1;
    let mut wild = Vec::new();
    for _ in 0..nw {
        let n = w[at] as usize;
        wild.push(w[at + 1..at + 1 + n].iter().map(|&s| s as u32).collect());
        at += 1 + n;
    }
    let areas = w[at..].chunks_exact(2).map(|a| (a[0], a[1])).collect();
    (
        Coll {
            stamp,
            regs,
            wild,
            tagsize,
        },
        areas,
    )
}

impl Ctx {
    /// The sync of a process at the top level of a run over ranks (module docs).
    pub(crate) fn rank_sync(&mut self, ending: bool) -> Result<()> {
        let op = if ending { "end" } else { "sync" };
        let mut net = self.net.take().expect("a run over ranks");
        let r = if net.over {
            Err(self.stopped(op))
        } else {
            // A panic inside the exchange (a C-int count overflow, say) leaves the other ranks
            // inside a collective this rank will never join: nothing but ending the job helps.
            let comm = net.comm.as_raw();
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.rank_exchange(&mut net, op, ending)
            }))
            .unwrap_or_else(|payload| {
                let what = crate::run::panic_message(&*payload);
                use std::io::Write;
                let line = format!(
                    "mbsp: {op} (pid {}, superstep {}): the exchange between ranks failed: \
                     {what}; ending every rank\n",
                    self.pid, self.step
                );
                let _ = std::io::stderr().write_all(line.as_bytes());
                // SAFETY: ends every rank of the job.
                unsafe { ffi::MPI_Abort(comm, 1) };
                unreachable!("MPI_Abort returned")
            });
            if r.is_err() {
                net.over = true;
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
        };
        self.net = Some(net);
        r
    }

    /// The last exchange of a process that failed outside a sync (its error travels to every
    /// rank), unless an exchange already ended the run.
    pub(crate) fn rank_fail(&mut self) -> Option<Error> {
        match &self.net {
            Some(net) if !net.over => self.rank_sync(false).err(),
            _ => None,
        }
    }

    fn rank_exchange(&mut self, net: &mut Net, op: &'static str, ending: bool) -> Result<()> {
        let (me, p, q) = (self.pid, self.run.p, (self.step & 1) as usize);
        let fresh = self.step + 1;
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
        }
        // The last superstep's communication is delivered at the end too (as on threads).
        let flags = if state != FAILED { self.flags.get() } else { 0 };
        if flags & FLAG_COMM != 0 {
            self.flush_hpsends();
        }
        net.flush_puts();

        // Streams: an error, or [outbox][get requests] for each other rank.
        net.send.clear();
        for (j, c) in net.send_counts.iter_mut().enumerate() {
            let start = net.send.len();
            if j == me {
                *c = 0;
                continue;
            }
            if state == FAILED {
                let e = self.run.tree.error().unwrap_or_else(|| self.stopped(op));
                encode_error(&e, &mut net.send);
            } else if state != FAILED && flags & (FLAG_COMM | FLAG_GETS) != 0 {
                // SAFETY: our own outboxes, in our sync (no other thread touches them).
                let has_out = unsafe {
                    self.me().outboxes(q, |outs| match outs[j].as_deref() {
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
            *c = count(net.send.len() - start);
        }

        // Headers.
        // Streams of up to INLINE words ride in the header exchange itself.
        let sends = net.send_counts.iter().any(|&c| c as usize > INLINE);
        let bigs = state != FAILED && net.big.borrow().iter().any(|b| !b.recs.is_empty());
        let big_gets = state != FAILED
            && self
                .st
                .get_mut()
                .gets
                .iter()
                .any(|g| g.from as usize != me && g.len >= BIG_PUT);
        let grow = state != FAILED && net.shm.get_mut().missed > 0;
        let word = flags as u64
            | if grow { GROW } else { 0 }
            | if sends { STREAM } else { 0 }
            | if bigs { BIG } else { 0 }
            | if big_gets { BIG_GETS } else { 0 };
        let (mut header, mut got) = (
            std::mem::take(&mut net.header),
            std::mem::take(&mut net.got),
        );
        header.clear();
        let mut at = 0;
        for &c in &net.send_counts {
            let c = c as usize;
            header.extend_from_slice(&[state, c as u64, word]);
            let inline = if c <= INLINE { c } else { 0 };
            header.extend_from_slice(&net.send[at..at + inline]);
            header.resize(header.len() + INLINE - inline, 0);
            at += c;
        }
        got.resize(SLOT * p, 0);
        net.headers(&header, &mut got, me, self.step);
        let g = got.chunks_exact(SLOT).fold(0u64, |a, h| a | h[2]);
        let all_syncing = got.chunks_exact(SLOT).all(|h| h[0] == SYNCING);
        if g == 0 && all_syncing && state == SYNCING {
            // The empty superstep: nothing else to exchange.
            (net.header, net.got) = (header, got);
            self.rank_finish(net);
            return Ok(());
        }
        let states: Vec<u64> = got.chunks_exact(SLOT).map(|h| h[0]).collect();
        let counts: Vec<usize> = got.chunks_exact(SLOT).map(|h| h[1] as usize).collect();
        // Each rank's stream to us: received by the all-to-all-v (long ones), or copied from
        // its header slot to the end of the receive buffer (short ones).
        let mut rng: Vec<std::ops::Range<usize>> = if g & STREAM != 0 {
            let recv_counts: Vec<i32> = counts
                .iter()
                .map(|&c| if c > INLINE { c as i32 } else { 0 })
                .collect();
            let d = net.exchange_words(&recv_counts);
            (0..p).map(|k| d[k]..d[k + 1]).collect()
        } else {
            net.recv.clear();
            vec![0..0; p]
        };
        for k in 0..p {
            let c = counts[k];
            if c > 0 && c <= INLINE {
                let start = net.recv.len();
                net.recv
                    .extend_from_slice(&got[k * SLOT + 3..k * SLOT + 3 + c]);
                rng[k] = start..start + c;
            }
        }
        (net.header, net.got) = (header, got);

        // Verdict: every rank sees the same states.
        if states.iter().any(|&s| s != SYNCING) || state != SYNCING {
            net.over = true;
        }
        let failed: Vec<Error> = (0..p)
            .filter(|&k| states[k] == FAILED)
            .map(|k| {
                if k == me {
                    self.run.tree.error().unwrap_or_else(|| self.stopped(op))
                } else {
                    decode_error(&net.recv[rng[k].clone()])
                }
            })
            .collect();
        if let Some(first) = failed.first() {
            // Every rank reports the same error: the first failed rank's root cause (a rank
            // that only stopped because another failed reports a secondary error, e.g. one
            // whose hpget saw the other's failure), else the first failed rank's.
            let e = failed.iter().find(|e| !e.is_secondary()).unwrap_or(first);
            self.run.tree.fail(e);
            return Err(e.clone());
        }
        if states.iter().any(|&s| s != state) {
            let (ended, synced): (Vec<usize>, Vec<usize>) =
                (0..p).partition(|&k| states[k] == ENDED);
            let e = self.error(
                ErrorKind::Misuse,
                op,
                format!(
                    "ranks {ended:?} returned from the SPMD function while ranks {synced:?} \
                     called sync (every process must call sync the same number of times)"
                ),
            );
            self.run.tree.fail(&e);
            return Err(e);
        }
        let g32 = g as u32;
        if g32 == 0 {
            self.rank_finish(net);
            return Ok(());
        }

        let sent_tagsize = self.tagsize.get();
        if g32 & (FLAG_REGS | FLAG_TAGS) != 0 {
            if let Err(e) = self.rank_collective(net, g32) {
                self.run.tree.fail(&e);
                return Err(e);
            }
        }

        // Gets: served from our memory before any put lands; our own gets of our memory are
        // read into the get buffer now, for the same reason.
        if g32 & FLAG_GETS != 0 {
            net.replies.iter_mut().for_each(Vec::clear);
            let mut sends = Vec::new();
            for k in (0..p).filter(|&k| k != me && !rng[k].is_empty()) {
                let (_, gets, _) = split_stream(&net.recv[rng[k].clone()]);
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
                // SAFETY: `buf_off` was reserved in the get buffer above.
                let at = if op.direct {
                    op.dst
                } else {
                    unsafe { base.add(op.buf_off) }
                };
                recvs.push((op.from as usize, at as u64, op.len as u64));
            }
            if g & BIG_GETS != 0 {
                // SAFETY: destinations are our own memory (kept alive by the ops), written
                // directly only when no get reads them; sources are our registered memory,
                // which nothing writes during this phase (direct destinations are never get
                // sources; puts land later).
                unsafe { net.transfer(&recvs, &sends, BIG_GET_TAG) };
            }
        }
        if g & BIG != 0 {
            let recv = std::mem::take(&mut net.recv);
            let incoming: Vec<(usize, &[u64])> = (0..p)
                .filter(|&k| k != me && !rng[k].is_empty())
                .map(|k| (k, split_stream(&recv[rng[k].clone()]).2))
                .filter(|(_, b)| !b.is_empty())
                .collect();
            net.move_big(&incoming);
            drop(incoming);
            net.recv = recv;
        }
        if g & GROW != 0 {
            net.grow_segments();
        }
        let reply_displ = (g32 & FLAG_GETS != 0).then(|| net.exchange_replies());

        // Puts and messages, in rank order.
        let queue = &mut self.st.get_mut().queue;
        queue.tagsize = sent_tagsize;
        queue.parity = q;
        for (k, range) in rng.iter().enumerate() {
            let (count, bytes) = if k == me {
                // SAFETY: our own outboxes, in our sync; put destinations are our own
                // registered memory, with no live references (we hold `&mut self`).
                unsafe {
                    self.run
                        .proc(me)
                        .outboxes(q, |outs| match outs[me].as_deref() {
                            Some(ob) if ob.stamp == fresh => {
                                ob.deliver_puts();
                                (ob.msg_count, ob.msg_bytes)
                            }
                            _ => (0, 0),
                        })
                }
            } else if !range.is_empty() {
                let (ob, _, _) = split_stream(&net.recv[range.clone()]);
                let (puts, msgs, count, bytes, _) = Outbox::decode(ob);
                // SAFETY: put records made by rank k's `put`, whose checks against its mirror
                // of our table made their destinations our registered memory (alive in our
                // table or graveyard), with no live references (we hold `&mut self`).
                unsafe { Outbox::deliver(puts.as_ptr() as *const u8, puts.len() * 8) };
                if count > 0 {
                    // SAFETY: the mirror of rank k exists on this rank only; only this thread
                    // touches it.
                    unsafe {
                        self.run.proc(k).outboxes_mut(q, |outs| {
                            outs[me]
                                .get_or_insert_with(Box::default)
                                .set_messages(fresh, msgs, count, bytes)
                        })
                    };
                }
                (count, bytes)
            } else {
                (0, 0)
            };
            if count > 0 {
                queue.srcs.push(k as u32);
                queue.left += count;
                queue.left_bytes += bytes;
            }
        }

        // Get data, last (as in the thread runtime).
        let st = self.st.get_mut();
        if !st.gets.is_empty() {
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
                unsafe { std::ptr::copy_nonoverlapping(src, op.dst, op.len) };
            }
            st.getbuf.clear();
        }
        self.rank_finish(net);
        Ok(())
    }

    fn rank_finish(&mut self, net: &mut Net) {
        // Our segment's half of this parity is free again two syncs from now (see `Shm`): its
        // next writer is the superstep after next.
        net.shm.get_mut().used[(self.step & 1) as usize] = 0;
        self.finish_sync();
        net.publish_done(self.step);
    }

    /// Registration and tag-size changes over ranks: every rank's requests gathered, checked
    /// as in the thread runtime, applied to our table, the mirrors and the window.
    fn rank_collective(&mut self, net: &mut Net, g: u32) -> Result<()> {
        let me = self.pid;
        let own = self.own_coll();
        let areas: Vec<(u64, u64)> = self
            .st
            .get_mut()
            .reg_ops
            .iter()
            .filter_map(|o| match o {
                RegOp::Push {
                    ptr, len, empty, ..
                } => Some((*ptr as u64, if *empty { u64::MAX } else { *len as u64 })),
                _ => None,
            })
            .collect();
        let mut w = Vec::new();
        encode_coll(&own, &areas, &mut w);
        let all = net.all_gather_words(&w);
        let (colls, all_areas): (Vec<Coll>, Vec<Vec<(u64, u64)>>) =
            all.iter().map(|w| decode_coll(w, self.step + 1)).unzip();
        let applied = self.collective_with(&colls, g)?;
        let mut push_no = 0;
        for &(push, slot, generation) in &applied {
            for (k, areas) in all_areas.iter().enumerate() {
                let (ptr, len) = if push { areas[push_no] } else { (0, 0) };
                let empty = push && len == u64::MAX;
                if k == me {
                    continue;
                }
                let op = if push {
                    RegOp::Push {
                        slot,
                        generation,
                        ptr: ptr as *mut u8,
                        len: if empty { 0 } else { len as usize },
                        empty,
                        ty: ElemType::RAW,
                        keep: None,
                    }
                } else {
                    RegOp::Pop { slot }
                };
                let mut graveyard = Vec::new();
                // SAFETY: the mirror of rank k exists on this rank only; only this thread
                // touches it.
                unsafe { self.run.proc(k).table_mut(|t| t.apply(op, &mut graveyard)) };
            }
            if push {
                push_no += 1;
            }
        }
        // The window holds the union of our registered areas, as disjoint intervals (MPI
        // forbids attaching overlapping memory, and registrations may overlap or be popped and
        // pushed again in one superstep): detach what is no longer an interval, then attach
        // the new ones. No one-sided access reaches us before we publish this sync as done.
        let mut areas: Vec<(usize, usize)> = Vec::new();
        // SAFETY: our own table, in our sync, after its changes.
        unsafe {
            self.me().table(|t| {
                t.active_areas(|ptr, len| areas.push((ptr as usize, ptr as usize + len)))
            })
        };
        areas.sort_unstable();
        let mut union: Vec<(usize, usize)> = Vec::new();
        for (a, b) in areas {
            match union.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => union.push((a, b)),
            }
        }
        for iv in net.attached.iter().filter(|iv| !union.contains(iv)) {
            // SAFETY: attached by an earlier sync, still allocated (a popped area is kept in
            // the graveyard until this sync ends; raw ones by the caller's contract).
            unsafe { ffi::MPI_Win_detach(net.win, iv.0 as *const _) };
        }
        for iv in union.iter().filter(|iv| !net.attached.contains(iv)) {
            // SAFETY: our registered memory, alive until a later sync detaches it.
            unsafe { ffi::MPI_Win_attach(net.win, iv.0 as *mut _, (iv.1 - iv.0) as ffi::MPI_Aint) };
        }
        net.attached = union;
        Ok(())
    }

    /// `hpput` to another rank: an `MPI_Put` into its window, completed at the next sync.
    ///
    /// # Safety
    /// `src` valid for `len` bytes until the next sync; `dst` inside `pid`'s registered area
    /// (checked against the mirror).
    pub(crate) unsafe fn rank_hpput(
        &self,
        pid: usize,
        src: *const u8,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        let net = self.net.as_ref().expect("a run over ranks");
        if len >= BIG_PUT {
            // As a large buffered put (copied now, so that whatever lands in the source later
            // in this superstep or its sync cannot reach the destination): MPICH's dynamic
            // windows move large blocks several times slower (`mbsp bench mpi`).
            // SAFETY: the caller keeps `src` valid for `len` bytes during this call.
            let data = unsafe { std::slice::from_raw_parts(src, len) };
            net.big_put(pid, dst, data, self.step);
            self.flag(FLAG_COMM);
            return Ok(());
        }
        self.rank_settled("hpput", net, pid)?;
        // SAFETY: forwarded to the caller; the target area is attached in `pid`'s window.
        unsafe { net.one_sided(true, pid, src as *mut u8, dst as usize, len) };
        net.hp_pending.set(true);
        Ok(())
    }

    /// `hpget`/`direct_get` from another rank: an `MPI_Get` from its window, completed now.
    ///
    /// # Safety
    /// `dst` valid for `len` bytes; `src` inside `pid`'s registered area (checked against the
    /// mirror).
    pub(crate) unsafe fn rank_get_now(
        &self,
        op: &'static str,
        pid: usize,
        src: *const u8,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        let net = self.net.as_ref().expect("a run over ranks");
        self.rank_settled(op, net, pid)?;
        // SAFETY: forwarded to the caller; the source area is attached in `pid`'s window.
        unsafe { net.one_sided(false, pid, dst, src as usize, len) };
        // SAFETY: a valid window, locked for all targets.
        unsafe { ffi::MPI_Win_flush(pid as i32, net.win) };
        Ok(())
    }

    /// Wait until rank `pid` has completed as many syncs as we have (as the thread runtime's
    /// `Ctx::wait_settled`): the stopped error if the run fails here or there meanwhile.
    fn rank_settled(&self, op: &'static str, net: &Net, pid: usize) -> Result<()> {
        net.wait_settled(pid, self.step, self.run.barrier.policy(), || {
            self.run.tree.is_aborted()
        })
        .map_err(|_| self.stopped(op))
    }
}
