//! The state of one run and the handle ([`Ctx`]) each of its processes works through: what
//! every engine needs, and the engine's own part (`engine/state.rs`), which only the engine
//! reads.
//!
//! Shared (per run, [`RunShared`]): the hierarchy's failure state, the placement, the waiting
//! policy, the engine's part of the run (the thread engine's barrier, lanes and inboxes), and
//! per process a [`ProcShared`] holding what other processes read: its registration table, its
//! outboxes (two or [`SLOTS`] sets, used by supersteps in turn), its collective requests, and how many
//! syncs it has completed.
//!
//! Private (per process, inside [`Ctx`]): the superstep counter, requests not yet executed
//! (gets, registration changes, hpsends, a new tag size), the view of the message queue, and the
//! engine's part of the process.
//!
//! ## Who touches what when
//!
//! The cells of [`ProcShared`] are read and written only through its methods, each of which
//! states the phase of the superstep protocol (`engine/threads/sync.rs`) in which it may be called:
//!
//! * the registration table: written by its owner only inside a sync, after the first barrier
//!   and before a second one (which every sync with registration changes has); read by anyone
//!   only outside syncs (and by the owner at any time);
//! * the outboxes of slot `o` ([`RunShared::slot`]): written by their owner during the supersteps whose
//!   slot is `o`; read by receivers during the sync that ends such a superstep and during the
//!   following superstep (the message queue). The owner writes slot `o` again only
//!   as many supersteps later as the run has slots, and only once no receiver reads it any more: after a full sync
//!   in between, whose first barrier no receiver passes before it has stopped reading (the
//!   queue is emptied when a sync starts), or after every receiver has acknowledged it
//!   (`engine/threads/lazy.rs`; over ranks, `engine/ranks/lazy.rs`). A bulk put's record points
//!   into the sender's bulk area for the receiver, which has a rule of its own
//!   (`engine/threads/bulk.rs`);
//! * the collective requests of parity `q` (two sets; they travel in full syncs only): read
//!   right after barrier 1 of a sync ending a superstep of parity `q`, and written again by
//!   their owner in a later such sync, before its barrier 1, once every process has completed
//!   the sync that read them;
//! * between two runs on a kept state: the starter resets what the last run left
//!   ([`RunShared::reuse`], [`RunShared::release`]) while no process runs, writing a word only
//!   where it changed (`shim::Zero`), since a line it writes must cross back to the core of the
//!   process that uses it next. What a process writes between runs (its spare buffers and its
//!   stop mark, [`ProcShared::own`]) is on lines of its own and touched by the starter only on
//!   a failure; marks are stamped with the run's number (which only grows) instead of being
//!   reset. After a run that ended well, the sync counts ([`Done`]), the inbox mode words and
//!   the barrier's episodes are not reset either: the next run counts on from them (every
//!   process of the last run completed as many syncs and passed as many episodes), and the
//!   starter resets them only after a run that failed.
//!
//! ## Failure
//!
//! Once a process has seen the run fail (any primitive returned an error), every later
//! primitive on its `Ctx` fails too, including the local views of registered memory and the
//! queue accessors, so user code that ignores an error cannot race with processes that are
//! still communicating. A sync that fails does not return before every process of the run has
//! stopped touching other processes' memory (the engine's `stop`): each process marks itself
//! stopped (once, [`ProcShared::mark_stopped`]) when it first sees the failure or when it ends.

use crate::done::Done;
use crate::engine::state::{ProcEngine, RunEngine};
use crate::error::{Error, ErrorKind, Result};
use crate::outbox::{Outbox, SLOTS};
use crate::place::{Layout, Placement};
use crate::queue::Queue;
use crate::registry::{Entry, KEPT_ROOM, Keep, RegOp, RegTable, SlotAlloc};
use crate::requests::{Coll, GetOp, HpSend};
use crate::shim::{AtomicU64, Ordering, SharedCell};
use crate::tree::Tree;
use crate::wait::WaitPolicy;
use crossbeam_utils::CachePadded;
use mbsp_topology::{Binding, Domain, Machine};
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Instant;

static NEXT_RUN_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A fresh run identity (registrations remember the run they belong to).
pub(crate) fn next_run_id() -> u64 {
    NEXT_RUN_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A point inside `sync` where a test can make a process fail, to check the failure paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPoint {
    /// Right after the first barrier (peers may be starting their communication phase).
    AfterBarrier1,
    /// After reading the sources of this process's gets (peers are reading too).
    AfterReads,
    /// After the second barrier (peers are delivering puts and writing gets).
    AfterBarrier2,
    /// The engine panics as the sync begins, before it exchanges anything with the other
    /// processes (on either engine: tests of how a panic inside an engine ends the run).
    EnginePanic,
}

/// One process's outboxes of one slot, by destination pid (allocated on first use).
pub(crate) type Outboxes = Vec<Option<Box<CachePadded<Outbox>>>>;

/// What one process shares with the others of its run.
pub(crate) struct ProcShared {
    regs: SharedCell<RegTable>,
    out: [SharedCell<Outboxes>; SLOTS],
    coll: [SharedCell<Coll>; 2],
    /// Number of syncs this process has completed (its communication is then written).
    pub(crate) done: Done,
    /// What only the process's own thread touches between runs, on lines of its own: the
    /// starter's resets (`RunShared::reuse`, `release`) read the fields above at every run,
    /// and a line that both touch would cross between their cores twice a run.
    own: CachePadded<Own>,
    /// The emptied lists of the process's last context, for its next run on this state
    /// ([`Lists`]); touched, like `own`, only by the process's own contexts, when made and
    /// when dropped.
    spare_lists: CachePadded<SharedCell<Lists>>,
}

/// The lists of a process's [`Local`] that its next run on the same state reuses, emptied, so
/// that a nested run in a loop allocates nothing for them once they have room: registration
/// changes and free slots, gets, the message queue's senders (each keeping its room up to
/// [`KEPT_ROOM`] entries), and the pool's stacks of buffers, without their buffers.
#[derive(Default)]
struct Lists {
    reg_ops: Vec<RegOp>,
    slots: SlotAlloc,
    gets: Vec<GetOp>,
    srcs: Vec<crate::queue::Src>,
    pool: crate::pool::Pool,
}

impl Lists {
    /// The lists of `st`, the private state of a context being dropped (the run has ended for
    /// its process, and nobody touches its memory any more), emptied: what they held goes now
    /// (the memory of registrations never applied, gets never made, the pool's buffers).
    fn kept_from(st: &mut Local) -> Lists {
        fn emptied<T>(mut v: Vec<T>) -> Vec<T> {
            if v.capacity() > KEPT_ROOM {
                return Vec::new();
            }
            v.clear();
            v
        }
        let mut slots = std::mem::take(&mut st.slots);
        slots.reset();
        let mut pool = std::mem::take(&mut st.pool);
        pool.free_buffers();
        Lists {
            reg_ops: emptied(std::mem::take(&mut st.reg_ops)),
            slots,
            gets: emptied(std::mem::take(&mut st.gets)),
            srcs: emptied(std::mem::take(&mut st.queue.srcs)),
            pool,
        }
    }
}

/// [`ProcShared::own`].
struct Own {
    /// The get buffer and the path vector of the process's last context, kept for the next
    /// run on this state (touched only by the process's own context, when it is made and
    /// when it is dropped).
    spare_getbuf: SharedCell<crate::arena::Arena>,
    spare_path: SharedCell<Vec<usize>>,
    /// The CPU list of the last context's binding (`process::bind` fills it again).
    spare_cpus: SharedCell<Vec<u32>>,
    /// The number ([`RunShared::id`]) of the last run in which this process stopped: saw the
    /// run fail, or ended, and touches no memory of the others any more. Written by the
    /// process alone (or for it by the starter, when its thread could not be started); never
    /// reset, as run numbers only grow: a mark left by an earlier run on this state is lower
    /// than the current run's. (One counter for the run, which every process added to at
    /// its end, was a line that crossed between the cores on every run.)
    stopped_in: AtomicU64,
}

// SAFETY: the cells are accessed only through the methods below, under the protocol in the
// module documentation; the raw pointers inside point to memory that the registration and sync
// protocol keeps alive.
unsafe impl Sync for ProcShared {}
// SAFETY: as above; nothing in it is tied to a thread.
unsafe impl Send for ProcShared {}

impl ProcShared {
    fn new(p: usize) -> Self {
        let outs = || SharedCell::new((0..p).map(|_| None).collect::<Vec<_>>());
        ProcShared {
            regs: SharedCell::new(RegTable::default()),
            out: std::array::from_fn(|_| outs()),
            coll: [
                SharedCell::new(Coll::default()),
                SharedCell::new(Coll::default()),
            ],
            done: Done::default(),
            spare_lists: CachePadded::new(SharedCell::new(Lists::default())),
            own: CachePadded::new(Own {
                spare_getbuf: SharedCell::new(crate::arena::Arena::default()),
                spare_path: SharedCell::new(Vec::new()),
                spare_cpus: SharedCell::new(Vec::new()),
                stopped_in: AtomicU64::new(0),
            }),
        }
    }

    /// The CPU list that this process's last context was bound to, for the binding of its
    /// next context (`process::bind`): a nested run then allocates nothing for it.
    ///
    /// # Safety
    /// The owner's thread, entering a run (only this process's contexts touch the spares, one
    /// at a time: see `Ctx::new`).
    #[inline]
    pub(crate) unsafe fn take_spare_cpus(&self) -> Vec<u32> {
        // SAFETY: the caller's promise.
        unsafe { self.own.spare_cpus.write(std::mem::take) }
    }

    /// Mark this process stopped in run `id` ([`Own::stopped_in`]).
    #[inline]
    pub(crate) fn mark_stopped(&self, id: u64) {
        // Release: whatever the process did with the others' memory happens before a
        // quiescing process sees the mark.
        self.own.stopped_in.store(id, Ordering::Release);
    }

    /// Whether this process has stopped in run `id`, or a later one.
    #[inline]
    pub(crate) fn stopped_in(&self, id: u64) -> bool {
        self.own.stopped_in.load(Ordering::Acquire) >= id
    }

    /// Read the registration table.
    ///
    /// # Safety
    /// The caller is the owner, or a process of the run outside its syncs (the owner then does
    /// not update the table: it does so only between the barriers of a sync).
    #[inline]
    pub(crate) unsafe fn table<R>(&self, f: impl FnOnce(&RegTable) -> R) -> R {
        // SAFETY: forwarded to the caller.
        unsafe { self.regs.read(f) }
    }

    /// One entry of the registration table (see [`ProcShared::table`]).
    ///
    /// # Safety
    /// As [`ProcShared::table`].
    #[inline]
    pub(crate) unsafe fn entry(&self, slot: u32) -> Entry {
        // SAFETY: forwarded to the caller.
        unsafe { self.table(|t| *t.entry(slot)) }
    }

    /// Update the registration table.
    ///
    /// # Safety
    /// Only the owner, inside a sync between barrier 1 and barrier 2.
    #[inline]
    pub(crate) unsafe fn table_mut<R>(&self, f: impl FnOnce(&mut RegTable) -> R) -> R {
        // SAFETY: forwarded to the caller.
        unsafe { self.regs.write(f) }
    }

    /// Write the outboxes of slot `o`.
    ///
    /// # Safety
    /// Only the owner, during a superstep of slot `o` (or in its sync before it announces them
    /// or reaches barrier 1).
    #[inline]
    pub(crate) unsafe fn outboxes_mut<R>(&self, o: usize, f: impl FnOnce(&mut Outboxes) -> R) -> R {
        // SAFETY: forwarded to the caller.
        unsafe { self.out[o].write(f) }
    }

    /// Read the outboxes of slot `o`.
    ///
    /// # Safety
    /// The owner; or a receiver from the sync that ends a superstep of slot `o` (once the
    /// owner has marked it, or after barrier 1) until it starts its next sync.
    #[inline]
    pub(crate) unsafe fn outboxes<R>(&self, o: usize, f: impl FnOnce(&Outboxes) -> R) -> R {
        // SAFETY: forwarded to the caller.
        unsafe { self.out[o].read(f) }
    }

    /// Publish the collective requests of a superstep of parity `q`: `f` rewrites them in
    /// place (reusing the vectors of the ones it replaces).
    ///
    /// # Safety
    /// Only the owner, in its sync before barrier 1.
    #[inline]
    pub(crate) unsafe fn publish_with(&self, q: usize, f: impl FnOnce(&mut Coll)) {
        // SAFETY: forwarded to the caller.
        unsafe { self.coll[q].write(f) }
    }

    /// Read the collective requests of parity `q`.
    ///
    /// # Safety
    /// As [`ProcShared::outboxes`].
    #[inline]
    pub(crate) unsafe fn coll<R>(&self, q: usize, f: impl FnOnce(&Coll) -> R) -> R {
        // SAFETY: forwarded to the caller.
        unsafe { self.coll[q].read(f) }
    }

    /// Forget the registrations of a previous run, and its sync count unless the new run
    /// `continues` it ([`Done`]) (exclusive access: no process runs). The outboxes and
    /// requests are the owner's to clear ([`ProcShared::clear_at_entry`]).
    pub(crate) fn reset(&mut self, continues: bool) {
        self.regs.with_mut(RegTable::clear);
        if !continues {
            self.done.reset();
        }
    }

    /// Mark this process's outboxes unwritten (keeping their buffers) and its collective
    /// requests unpublished, for a new run on this state: done by the process itself when it
    /// enters the run, on lines it wrote last, rather than by the starter between runs (each
    /// line the starter writes crosses to the process's core and back at every run).
    ///
    /// # Safety
    /// The owner, entering a run, before its first sync. No other process reads them before
    /// this process has reached a barrier or announced in this run: a receiver reads an
    /// outbox after barrier 1 of a full sync, which this process has reached, or in a lazy
    /// sync once this process has marked it in the receiver's inbox (reset before the run),
    /// and the requests after barrier 1.
    pub(crate) unsafe fn clear_at_entry(&self) {
        for out in &self.out {
            // SAFETY: the caller's promise.
            unsafe {
                out.write(|outs| {
                    for ob in outs.iter_mut().flatten().filter(|ob| ob.stamp != 0) {
                        ob.clear();
                        ob.stamp = 0;
                    }
                })
            };
        }
        for coll in &self.coll {
            // SAFETY: as above.
            unsafe { coll.write(Coll::unpublish) };
        }
    }
}

/// Everything the processes of one run share.
pub(crate) struct RunShared {
    /// This run's number, new for every run on this state. On a line of its own: the other
    /// fields the processes read (`p`, `procs`, `parent_path`...) do not change from one run
    /// to the next on a kept state, and stay in every core's cache (`Run::shared_from`).
    pub(crate) id: CachePadded<u64>,
    pub(crate) p: usize,
    /// Pids from the top-level run down to the process that started this run.
    pub(crate) parent_path: Vec<usize>,
    pub(crate) tree: Arc<Tree>,
    pub(crate) procs: Box<[CachePadded<ProcShared>]>,
    pub(crate) layout: Arc<Layout>,
    /// How the run's processes wait (spin, yield, sleep): in syncs and immediate primitives.
    pub(crate) policy: WaitPolicy,
    /// For a nested run: the binding of the thread that starts it (kept by its process 0).
    pub(crate) inherited: Option<Binding>,
    /// Where a profiled run's processes hand in their records (`None`: not profiled).
    pub(crate) prof: Option<Arc<crate::profile::record::Sink>>,
    /// The engine's own part (`engine/state.rs`).
    pub(crate) engine: RunEngine,
    /// A top-level run's checkpointing, when it has a policy (`checkpoint/`).
    pub(crate) ckpt: Option<Arc<crate::checkpoint::Checkpointer>>,
    /// The sets of outboxes the processes use in turn: 2 or [`SLOTS`] (chosen by the engine).
    pub(crate) slots: u64,
}

impl RunShared {
    /// The run state of the processes of `layout`, who wait as `policy` says and reach each
    /// other through `engine`.
    pub(crate) fn new(
        parent_path: Vec<usize>,
        tree: Arc<Tree>,
        policy: WaitPolicy,
        layout: Arc<Layout>,
        engine: RunEngine,
    ) -> Self {
        let p = layout.domains.len();
        engine.attach(&tree);
        let slots = engine.slots() as u64;
        debug_assert!(slots == 2 || slots == SLOTS as u64);
        RunShared {
            id: CachePadded::new(next_run_id()),
            p,
            parent_path,
            tree,
            procs: (0..p)
                .map(|_| CachePadded::new(ProcShared::new(p)))
                .collect(),
            layout,
            policy,
            inherited: None,
            prof: None,
            engine,
            ckpt: None,
            slots,
        }
    }

    /// The outbox set (and inbox slot) of superstep `step`: supersteps use the run's sets in
    /// turn.
    #[inline(always)]
    pub(crate) fn slot(&self, step: u64) -> usize {
        // Two cases, so that neither divides.
        (if self.slots == 2 {
            step & 1
        } else {
            step % SLOTS as u64
        }) as usize
    }

    /// The syncs a destination must have completed before a sender marks and announces in
    /// its inbox slot of superstep `s` (thread engine): that of the superstep the slot served
    /// last, where it took the slot's bits (none in the first supersteps).
    #[inline]
    pub(crate) fn slot_free_after(&self, s: u64) -> u64 {
        (s + 1).saturating_sub(self.slots)
    }

    /// Make a finished run's state ready for a new run in `tree` (exclusive access: the
    /// processes of the previous run have all dropped their contexts); the engine's part is
    /// made ready by the caller, who knows the engine, and says whether the new run
    /// `continues` the sync counts of the last ([`Done`]).
    pub(crate) fn reuse(&mut self, parent_path: &[usize], tree: &Arc<Tree>, continues: bool) {
        *self.id = next_run_id();
        // Into the vector the last run left (a nested run allocates nothing here).
        // Written only when it changes: every process reads it when it enters the run, and a
        // line written here would have to cross to each of their cores.
        if self.parent_path != parent_path {
            self.parent_path.clear();
            self.parent_path.extend_from_slice(parent_path);
        }
        for proc in self.procs.iter_mut() {
            proc.reset(continues);
        }
        if Arc::ptr_eq(&self.tree, tree) {
            // The state's waits are the tree's since it was attached to it (a reused state
            // brings the same barrier): stopped again if the hierarchy has failed since.
            self.engine.recheck(tree);
        } else {
            self.engine.attach(tree);
            self.tree = tree.clone();
        }
    }

    /// Release what a run that has ended still holds of its processes' memory (registered
    /// areas); keep the buffers.
    pub(crate) fn release(&mut self) {
        if self.ckpt.is_some() {
            self.ckpt = None;
        }
        for proc in self.procs.iter_mut() {
            proc.regs.with_mut(RegTable::clear);
            // Owned messages nobody received (the run failed, or nobody synced again).
            for out in proc.out.iter_mut() {
                out.with_mut(|outs| outs.iter().flatten().for_each(|ob| ob.free_owned()));
            }
        }
    }

    /// Process `pid`'s shared state.
    #[inline]
    pub(crate) fn proc(&self, pid: usize) -> &ProcShared {
        &self.procs[pid]
    }
}

/// A context's way to its run's shared state, without a reference count of its own where the
/// run's starter keeps the state alive ([`RunRef::lent`]): the count is one cache line that
/// every process of a run would change when it enters and when it leaves, each change taking
/// the line from the core that changed it last.
pub(crate) struct RunRef {
    ptr: std::ptr::NonNull<RunShared>,
    /// The state's keeper where nobody else keeps it (a run over ranks: its one process here).
    _own: Option<Arc<RunShared>>,
}

impl RunRef {
    /// The state `run`, kept alive by the caller.
    ///
    /// # Safety
    /// `run` (an `Arc` of the caller, or one it knows is kept) must outlive the `RunRef`:
    /// the starter of a run keeps its state until every process of the run has dropped its
    /// context (`process::process`, `Run::launch`, `Spmd`).
    pub(crate) unsafe fn lent(run: &Arc<RunShared>) -> Self {
        RunRef {
            ptr: std::ptr::NonNull::from(&**run),
            _own: None,
        }
    }

    /// The state `run`, kept alive by this reference.
    #[allow(dead_code, reason = "the rank engine's (a build with MPI)")]
    pub(crate) fn owned(run: Arc<RunShared>) -> Self {
        RunRef {
            ptr: std::ptr::NonNull::from(&*run),
            _own: Some(run),
        }
    }
}

impl std::ops::Deref for RunRef {
    type Target = RunShared;

    #[inline(always)]
    fn deref(&self) -> &RunShared {
        // SAFETY: alive as long as this reference ([`RunRef::lent`]'s contract, or `_own`).
        unsafe { self.ptr.as_ref() }
    }
}

/// Private per-process state changed by `&self` primitives.
#[derive(Default)]
pub(crate) struct Local {
    pub(crate) slots: SlotAlloc,
    pub(crate) reg_ops: Vec<RegOp>,
    pub(crate) graveyard: Vec<Keep>,
    pub(crate) gets: Vec<GetOp>,
    pub(crate) getbuf: crate::arena::Arena,
    pub(crate) hpsends: Vec<HpSend>,
    /// Bytes the get buffer may need for this superstep's gets (room reserved when queued).
    pub(crate) get_room: usize,
    pub(crate) new_tagsize: Option<usize>,
    pub(crate) queue: Queue,
    /// Buffers for owned messages (`owned.rs`).
    pub(crate) pool: crate::pool::Pool,
}

/// One process's handle on its run: every BSPlib primitive is a method of `Ctx`.
///
/// A `Ctx` is created by the runtime and lent to the SPMD function (`&mut Ctx`). Communication
/// primitives take `&self`, so they can be called while local views of registered memory
/// ([`Ctx::local`]) are alive; [`Ctx::sync`] takes `&mut self`, so no such view survives a sync
/// and the runtime's writes into registered memory never alias a live reference.
pub struct Ctx {
    pub(crate) run: RunRef,
    /// The run's number ([`RunShared::id`]), handed to the process by its starter: the
    /// state's copy is written by the starter at every run, and each read of it from another
    /// core would have to fetch the line.
    pub(crate) run_id: u64,
    /// The count of syncs this run's processes started with ([`Done`]): the syncs of the runs
    /// before on this run state, when they ended well. This run's `done` counts and inbox mode
    /// words count on from it.
    pub(crate) base: u64,
    pub(crate) pid: usize,
    pub(crate) path: Vec<usize>,
    pub(crate) step: u64,
    /// The outbox slot of the current superstep (`run.slot(step)`), kept beside `step` so
    /// that a put or send does not compute it.
    pub(crate) slot: usize,
    pub(crate) start: Instant,
    pub(crate) st: RefCell<Local>,
    /// `FLAG_*` bits of what this process did in the current superstep.
    pub(crate) flags: Cell<u32>,
    /// The tag size of messages sent in this superstep.
    pub(crate) tagsize: Cell<usize>,
    /// The last address resolved to a registration slot (raw primitives): (address, slot,
    /// generation); cleared whenever this process's registrations change.
    pub(crate) named_cache: Cell<Option<(*const u8, u32, u32)>>,
    pub(crate) binding: Binding,
    /// This process has marked itself stopped (`ProcShared::mark_stopped`).
    pub(crate) stopped: Cell<bool>,
    /// The outcome of this process's end of the run ([`Ctx::end`]), once it has ended.
    pub(crate) end_outcome: Option<Result<()>>,
    /// A failure to inject in the next sync (tests of the failure paths).
    pub(crate) fault: Cell<Option<SyncPoint>>,
    /// The superstep recorder of a profiled run (see [`crate::profile`]).
    pub(crate) prof: Option<Box<RefCell<crate::profile::record::Recorder>>>,
    /// Regions open in this process ([`Ctx::region_begin`]), profiled or not.
    pub(crate) regions_open: usize,
    /// The engine's own part of this process (`engine/state.rs`): reached only through the
    /// engine (`engine/mod.rs`).
    pub(crate) engine: ProcEngine,
    /// The records this process declared it receives in this superstep ([`Ctx::declare_incoming`]).
    pub(crate) lazy: Cell<Option<u64>>,
    /// This process used an immediate primitive (hpput, hpget, direct_get) in this superstep.
    pub(crate) immediate: Cell<bool>,
    /// By slot ([`slot`]): the destinations of this process's outboxes written in the last
    /// superstep of that slot, in the order first written.
    pub(crate) written: RefCell<[Vec<u32>; SLOTS]>,
    /// The last sync was lazy (the next one acknowledges the senders it read).
    pub(crate) prev_lazy: bool,
    /// The `FLAG_*` bits of every process ORed at the last full sync that had
    /// `FLAG_CHECKPOINT` among them (set by the engines, taken by `sync_checkpoint`; 0 when
    /// no such sync is pending).
    pub(crate) synced_flags: Cell<u32>,
    /// What [`Ctx::superstep`] adds to `step` (wrapping): a run resumed from a checkpoint
    /// counts on from the checkpoint's superstep, while `step` keeps the protocol's parity.
    pub(crate) step_offset: u64,
    /// A `Ctx` belongs to its process's thread.
    _not_send: PhantomData<*const ()>,
}

impl Ctx {
    /// Process `pid`'s context in `run`, its thread bound as `binding` says, reaching the
    /// others through `engine`. Inlined: made where its caller keeps it, the context and the
    /// engine state (both large) are not copied on the way (a nested run makes one per
    /// process).
    #[inline(always)]
    pub(crate) fn new(
        run: RunRef,
        run_id: u64,
        pid: usize,
        binding: Binding,
        engine: ProcEngine,
    ) -> Ctx {
        // SAFETY: only this process's contexts touch the spare buffers, one at a time (a run's
        // contexts are made after the previous run's were dropped); this process is entering
        // the run, before its first sync (`clear_at_entry`).
        let (getbuf, mut path, lists, base) = unsafe {
            let me = run.proc(pid);
            me.clear_at_entry();
            (
                me.own.spare_getbuf.write(std::mem::take),
                me.own.spare_path.write(std::mem::take),
                me.spare_lists.write(std::mem::take),
                me.done.base(),
            )
        };
        path.clear();
        path.extend_from_slice(&run.parent_path);
        path.push(pid);
        let prof = run.prof.as_ref().map(|_| {
            let mut rec = crate::profile::record::Recorder::new(pid, run.p);
            let layout = &run.layout;
            let placement = Placement::new(layout.machine(), &layout.domains[pid], binding.clone());
            rec.place = placement.to_string();
            rec.pus = placement.pus;
            rec.coroutines = run.engine.coroutines();
            Box::new(RefCell::new(rec))
        });
        Ctx {
            run,
            run_id,
            base,
            pid,
            path,
            step: 0,
            slot: 0,
            step_offset: 0,
            start: Instant::now(),
            st: RefCell::new(Local {
                getbuf,
                reg_ops: lists.reg_ops,
                slots: lists.slots,
                gets: lists.gets,
                queue: Queue {
                    srcs: lists.srcs,
                    ..Queue::default()
                },
                pool: lists.pool,
                ..Local::default()
            }),
            flags: Cell::new(0),
            synced_flags: Cell::new(0),
            tagsize: Cell::new(0),
            named_cache: Cell::new(None),
            binding,
            stopped: Cell::new(false),
            end_outcome: None,
            fault: Cell::new(None),
            prof,
            regions_open: 0,
            engine,
            lazy: Cell::new(None),
            immediate: Cell::new(false),
            written: RefCell::new(Default::default()),
            prev_lazy: false,
            _not_send: PhantomData,
        }
    }

    /// Profiling: a put or message of `bytes` to `to` (one branch when not profiling).
    #[inline(always)]
    pub(crate) fn note_out(&self, to: usize, bytes: usize, message: bool, immediate: bool) {
        if let Some(r) = &self.prof {
            r.borrow_mut().out(to, bytes, message, immediate);
        }
    }

    /// Profiling: an owned message of a `tag`-byte tag and a `payload`-byte payload to `to`.
    #[inline(always)]
    pub(crate) fn note_owned(&self, to: usize, tag: usize, payload: usize) {
        if let Some(r) = &self.prof {
            r.borrow_mut().out_owned(to, tag, payload);
        }
    }

    /// Profiling: a get of `bytes` from `from` (`immediate`: copied now).
    #[inline(always)]
    pub(crate) fn note_get(&self, from: usize, bytes: usize, immediate: bool) {
        if let Some(r) = &self.prof {
            r.borrow_mut().get(from, bytes, immediate);
        }
    }

    /// This process's id, in `0..nprocs()`.
    ///
    /// ```
    /// let pids = mbsp::run(3, |ctx| Ok(ctx.pid())).unwrap();
    /// assert_eq!(pids, vec![0, 1, 2]);
    /// ```
    #[inline]
    pub fn pid(&self) -> usize {
        self.pid
    }

    /// The number of processes of this run.
    #[inline]
    pub fn nprocs(&self) -> usize {
        self.run.p
    }

    /// Seconds since this process's run started (high resolution; clocks of different processes
    /// are not synchronised).
    ///
    /// ```
    /// mbsp::run(1, |ctx| {
    ///     let t0 = ctx.time();
    ///     assert!(ctx.time() >= t0 && t0 >= 0.0);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    #[inline]
    pub fn time(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// The current superstep, counted from 0 (the number of syncs this process has completed).
    ///
    /// ```
    /// mbsp::run(2, |ctx| {
    ///     assert_eq!(ctx.superstep(), 0);
    ///     ctx.sync()?;
    ///     assert_eq!(ctx.superstep(), 1);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    #[inline]
    pub fn superstep(&self) -> u64 {
        self.step.wrapping_add(self.step_offset)
    }

    /// The pids from the top-level run down to this process: `[pid]` in a top-level run,
    /// `[1, 3]` for process 3 of a run nested in top-level process 1.
    pub fn path(&self) -> &[usize] {
        &self.path
    }

    /// The part of the machine this process owns — packages, NUMA nodes, cores and PUs — and
    /// whether its thread is bound there. A nested run started by this process is placed inside
    /// it.
    ///
    /// ```
    /// let owned = mbsp::run(2, |ctx| Ok(ctx.placement())).unwrap();
    /// assert!(!owned[0].pus.is_empty() && !owned[0].cores.is_empty());
    /// println!("pid 0 owns {}", owned[0]);
    /// ```
    pub fn placement(&self) -> Placement {
        Placement::new(self.machine(), self.domain(), self.binding.clone())
    }

    /// Whether this run has more processes than the hardware threads it is placed on, so that
    /// its processes take turns on them (kernel context switches, or coroutine switches with
    /// [`Run::coroutines`](crate::Run::coroutines)); `false` for a run over MPI ranks. A
    /// superstep of such a run costs its turns more than its data: an algorithm may then
    /// prefer more supersteps of fewer records (`Comm`'s all-reduce gathers at one process
    /// first from 32 processes on; from 8 where [`Ctx::coroutines`] says the turns are
    /// coroutines').
    ///
    /// ```
    /// assert!(!mbsp::run(1, |ctx| Ok(ctx.oversubscribed()))?[0]);
    /// let twice = 2 * mbsp::nprocs(); // two processes per hardware thread
    /// assert!(mbsp::run(twice, |ctx| Ok(ctx.oversubscribed()))?[0]);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn oversubscribed(&self) -> bool {
        self.run.engine.oversubscribed(&self.run.layout)
    }

    /// Whether this run's processes that share a hardware thread take turns on it as
    /// coroutines ([`Run::coroutines`](crate::Run::coroutines)): asked for, and some thread
    /// has more than one process. A wait then hands the thread to the next process in user
    /// space, so that a superstep costs its records more than its turns: an algorithm that
    /// trades records for supersteps may do so with fewer processes than on threads (`Comm`
    /// gathers its small all-reduces from 8 processes on, not 32).
    ///
    /// ```
    /// let twice = 2 * mbsp::nprocs(); // two processes per hardware thread
    /// let on = |co: bool| mbsp::Run::new(twice).coroutines(co).run(|ctx| Ok(ctx.coroutines()));
    /// assert!(on(true)?.iter().all(|&c| c));
    /// assert!(!on(false)?[0]);
    /// // One process per hardware thread: nothing to take turns on, the run goes as threads.
    /// assert!(!mbsp::Run::new(1).coroutines(true).run(|ctx| Ok(ctx.coroutines()))?[0]);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn coroutines(&self) -> bool {
        self.run.engine.coroutines()
    }

    /// The PUs this process owns, as a [`Domain`] of [`Ctx::machine`].
    pub fn domain(&self) -> &Domain {
        &self.run.layout.domains[self.pid]
    }

    /// The machine tree the run is placed on (detected, or loaded from `MBSP_TOPOLOGY`).
    pub fn machine(&self) -> &Machine {
        self.run.layout.machine()
    }

    /// Whether some process of this run (or of any run in the same hierarchy) has failed or
    /// aborted. Long computations may poll this to stop early; every primitive checks it.
    #[inline]
    pub fn is_aborted(&self) -> bool {
        self.run.tree.is_aborted()
    }

    /// Report a misuse detected outside the runtime (e.g. by a foreign-language binding) as
    /// this process's failure: the run ends, and the returned error names `op`, this process
    /// and the superstep.
    pub fn misuse_error(&self, op: &'static str, message: impl Into<String>) -> Error {
        self.misuse(op, message.into())
    }

    /// The first failure of this run's hierarchy (the root cause), if any process failed.
    ///
    /// ```
    /// let r = mbsp::run(2, |ctx| -> mbsp::Result<()> {
    ///     if ctx.pid() == 1 {
    ///         return Err(ctx.abort("root cause"));
    ///     }
    ///     let err = ctx.sync().unwrap_err(); // pid 0 is stopped by pid 1's abort...
    ///     assert_eq!(ctx.failure().unwrap().message(), "root cause"); // ...and can see why
    ///     Err(err)
    /// });
    /// assert_eq!(r.unwrap_err().pid(), Some(1));
    /// ```
    pub fn failure(&self) -> Option<Error> {
        self.run.tree.error()
    }

    /// Abort the whole program (every run of the hierarchy) without a barrier.
    ///
    /// Returns the error to hand back from the SPMD function: `return Err(ctx.abort("..."))`.
    /// Every other process stops at its next primitive (or at once, if it waits in a sync) and
    /// the top-level `run` returns this error.
    ///
    /// ```
    /// let err = mbsp::run(4, |ctx| {
    ///     if ctx.pid() == 2 {
    ///         return Err(ctx.abort("input file is empty"));
    ///     }
    ///     ctx.sync()?;
    ///     Ok(())
    /// }).unwrap_err();
    /// assert_eq!(err.kind(), mbsp::ErrorKind::Abort);
    /// assert_eq!(err.pid(), Some(2));
    /// assert!(err.to_string().contains("input file is empty"));
    /// ```
    pub fn abort(&self, message: impl Into<String>) -> Error {
        let e = self.error(ErrorKind::Abort, "abort", message);
        self.run.tree.fail(&e);
        self.note_stopped();
        e
    }

    // ----- helpers shared by the primitives -----

    pub(crate) fn error(&self, kind: ErrorKind, op: &'static str, msg: impl Into<String>) -> Error {
        Error::new(kind, op, self.path.clone(), Some(self.superstep()), msg)
    }

    /// Record a misuse as the run's failure and return it.
    #[cold]
    #[inline(never)]
    pub(crate) fn misuse(&self, op: &'static str, msg: String) -> Error {
        self.fail_with(self.error(ErrorKind::Misuse, op, msg))
    }

    /// Record `e` (made by this process) as the run's failure and return it.
    #[cold]
    pub(crate) fn fail_with(&self, e: Error) -> Error {
        self.run.tree.fail(&e);
        self.note_stopped();
        e
    }

    /// Panic here, at the start of the engine's sync, if a test asked for it
    /// ([`SyncPoint::EnginePanic`]).
    #[inline(always)]
    pub(crate) fn engine_fault(&self) {
        if self.fault.get() == Some(SyncPoint::EnginePanic) {
            self.injected_panic();
        }
    }

    /// The panic of [`engine_fault`](Self::engine_fault).
    #[cold]
    #[inline(never)]
    fn injected_panic(&self) -> ! {
        self.fault.set(None);
        panic!("failure injected: a panic inside the engine's sync");
    }

    /// Record that memory for `op` could not be allocated as the run's failure (kind
    /// [`System`](ErrorKind::System)) and return it.
    #[cold]
    #[inline(never)]
    pub(crate) fn out_of_memory(&self, op: &'static str, msg: String) -> Error {
        self.fail_with(self.error(ErrorKind::System, op, msg))
    }

    /// The error returned by primitives once the run is aborted.
    #[cold]
    #[inline(never)]
    pub(crate) fn stopped(&self, op: &'static str) -> Error {
        self.note_stopped();
        let why = match self.run.tree.error() {
            Some(e) => format!("stopped because the run failed: {e}"),
            None => "stopped because the run was aborted".into(),
        };
        self.error(ErrorKind::Aborted, op, why)
    }

    /// Fail with [`Ctx::stopped`] if the run is aborted, and with a misuse if this process
    /// has ended its part of the run ([`Ctx::end`]).
    #[inline]
    pub(crate) fn live(&self, op: &'static str) -> Result<()> {
        if self.run.tree.is_aborted() {
            Err(self.stopped(op))
        } else if self.end_outcome.is_some() {
            Err(self.after_end(op))
        } else {
            Ok(())
        }
    }

    /// The error of a primitive called after this process's end.
    #[cold]
    #[inline(never)]
    pub(crate) fn after_end(&self, op: &'static str) -> Error {
        self.misuse(
            op,
            "called after this process ended its part of the run (Ctx::end, bsp_end): only \
             its local views of registered memory remain"
                .into(),
        )
    }

    #[inline]
    pub(crate) fn check_pid(&self, op: &'static str, pid: usize) -> Result<()> {
        if pid < self.run.p {
            Ok(())
        } else {
            Err(self.misuse(
                op,
                format!(
                    "pid {pid} is out of range: valid pids are 0..={}",
                    self.run.p - 1
                ),
            ))
        }
    }

    #[inline]
    pub(crate) fn flag(&self, f: u32) {
        self.flags.set(self.flags.get() | f);
    }

    #[inline]
    pub(crate) fn me(&self) -> &ProcShared {
        self.run.proc(self.pid)
    }

    /// Run `f` on this process's outbox for `pid` in the current superstep, cleared on first
    /// use (the receiver recognises it as fresh by its stamp).
    #[inline]
    pub(crate) fn with_outbox<R>(&self, pid: usize, f: impl FnOnce(&mut Outbox) -> R) -> R {
        let (o, stamp) = (self.slot, self.step + 1);
        // SAFETY: our own outboxes of the current slot, during the superstep.
        unsafe {
            self.me().outboxes_mut(o, |outs| {
                let ob = outs[pid].get_or_insert_with(Box::default);
                if ob.stamp != stamp {
                    ob.clear();
                    ob.stamp = stamp;
                    self.written.borrow_mut()[o].push(pid as u32);
                }
                f(ob)
            })
        }
    }

    /// Count this process as stopped (once): it has seen the run fail, or it ends. From then on
    /// it touches no memory of other processes.
    #[inline]
    pub(crate) fn note_stopped(&self) {
        if !self.stopped.replace(true) {
            self.run.proc(self.pid).mark_stopped(self.run_id);
        }
    }

    /// Whether every process of the run has stopped ([`Ctx::note_stopped`]).
    pub(crate) fn all_stopped(&self) -> bool {
        self.run.procs.iter().all(|q| q.stopped_in(self.run_id))
    }
}

impl Drop for Ctx {
    /// A process that ends no longer touches the run's memory.
    fn drop(&mut self) {
        self.note_stopped();
        if let (Some(rec), Some(sink)) = (self.prof.take(), &self.run.prof) {
            sink.hand_in(rec.into_inner());
        }
        let mut getbuf = std::mem::take(&mut self.st.get_mut().getbuf);
        getbuf.clear();
        let lists = Lists::kept_from(self.st.get_mut());
        let path = std::mem::take(&mut self.path);
        let cpus = match &mut self.binding {
            Binding::Applied(cpus) => Some(std::mem::take(cpus)),
            _ => None,
        };
        // SAFETY: as in `Ctx::new`.
        unsafe {
            let me = self.run.proc(self.pid);
            me.own.spare_getbuf.write(|b| *b = getbuf);
            me.spare_lists.write(|l| *l = lists);
            me.own.spare_path.write(|p| *p = path);
            if let Some(cpus) = cpus {
                me.own.spare_cpus.write(|c| *c = cpus);
            }
        }
        // SAFETY: this context's process is leaving the run.
        unsafe { self.engine.give_back(&self.run.engine, self.pid) };
    }
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("path", &self.path)
            .field("nprocs", &self.run.p)
            .field("superstep", &self.superstep())
            .finish()
    }
}
