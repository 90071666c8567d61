//! What the thread engine keeps: per run ([`RunState`], inside the run's shared state) its
//! barrier, the barrier rounds small puts ride in, the lanes and inboxes of lazy syncs; per
//! process ([`ProcState`], inside its context) its barrier membership, the puts and messages
//! riding in its barrier lines, and the bookkeeping of lazy syncs. Data only: the protocols
//! that use it are `sync.rs`, `lazy.rs` and `lane_sync.rs` beside this file.
//!
//! ## Who touches what when
//!
//! * [`RunState`]'s barrier, lanes and inboxes are shared by the run's threads; their own
//!   modules (`barrier.rs`, `lane.rs`, `inbox.rs`) state the orderings each access relies on.
//! * `riders`, `groups` and `declared_at_barrier` are fixed when the run state is made (or
//!   reused for a new run, with exclusive access) and only read while processes run.
//! * [`ProcState`] belongs to its process's thread: `rides` is filled by `put` and `send`
//!   (through a `RefCell`, as they take `&Ctx`) and emptied by the sync; `rode` is written by
//!   the sync and its messages read by the queue during the next superstep (`bsmp.rs`); the
//!   rest is touched only by the sync, which holds the context mutably.

use super::barrier::{Barrier, Member};
use super::bulk::BulkAreas;
use super::inbox::Inbox;
use super::lane::Lanes;
use super::ride::Ride;
use super::riders::Riders;
use super::share::Desk;
use crate::isolated::Isolated;
use crate::outbox::SLOTS;
use crate::place::Layout;
use crate::shim::{AtomicBool, AtomicU32, AtomicU64, Ordering, SharedCell};
use crate::tree::Tree;
use crate::wait::WaitPolicy;
use crossbeam_utils::CachePadded;
use std::cell::{Cell, RefCell};
use std::sync::Arc;

/// What one process of a thread run shares with the others beyond the engine-independent
/// `ProcShared`: what they tell it about their data, and whether it has ended.
pub(crate) struct Peer {
    /// What senders and receivers tell this process about its data (`inbox.rs`).
    pub(crate) inbox: Inbox,
    /// The number (`RunShared::id`) of the last run in which the process's SPMD function
    /// returned and it arrived at the final barrier. Never reset: run numbers only grow, so a
    /// mark of an earlier run on this state is lower than the current run's (a reset by the
    /// starter would take the line from the process's core at every run). On a line of its
    /// own, away from what the starter's resets read.
    pub(crate) ended: CachePadded<AtomicU64>,
    /// Its bulk areas, by destination: touched by this process alone, their bytes read by
    /// the destinations (`bulk.rs`).
    pub(crate) bulk: BulkAreas,
    /// Where it lays out its large copies for helpers (`share.rs`).
    pub(crate) desk: CachePadded<Desk>,
}

/// The thread engine's part of a run's shared state (module documentation).
pub(crate) struct RunState {
    pub(crate) barrier: Arc<Barrier>,
    /// Each process's barrier group (its first package).
    pub(crate) groups: Vec<usize>,
    /// By process, then destination: the barrier round in which puts to it can ride.
    pub(crate) riders: Riders,
    /// By process: its inbox and end flag.
    pub(crate) peers: Box<[CachePadded<Peer>]>,
    /// Some process has made a lazy sync in this run (full syncs then check that every process
    /// made a full sync in the same superstep).
    pub(crate) lazy_used: AtomicBool,
    /// Processes asleep in a lazy sync's wait (`lazy.rs`): a process entering a sync wakes
    /// them when every process has entered it (their stop condition).
    pub(crate) lazy_sleepers: CachePadded<AtomicU32>,
    /// The lanes of a small run (`lane.rs`): its lazy syncs announce through them.
    pub(crate) lanes: Option<Lanes>,
    /// A sync with declared counts takes the barrier, counts checked (`crate::lazy`, "Where
    /// the barrier is cheaper"): runs of two processes, where the barrier is one cache line
    /// each way that small puts ride in, and runs whose processes take turns as coroutines,
    /// whose barrier costs each thread a few cache lines while the lazy protocol's per-sender
    /// waits and acknowledgements cost each process. Both cheaper than the lazy protocol. Off
    /// elsewhere, and where tests ask for the lazy protocol (`internals::declared_at_barrier`).
    pub(crate) declared_at_barrier: bool,
    /// How lazy syncs wait for records and acknowledgements ([`Shape::lazy_policy`]).
    pub(crate) lazy_policy: WaitPolicy,
    /// The sets of outboxes the processes use in turn ([`Shape::slots`]).
    pub(crate) slots: usize,
    /// Senders help their receivers with large deliveries ([`Shape::share`]).
    pub(crate) share: bool,
    /// The processes that share a thread take turns on it as coroutines ([`Shape::coroutines`]).
    pub(crate) coroutines: bool,
    /// By process: its state of the last run, kept for the next one (touched only by the
    /// thread running that process: when it enters a run, and when it leaves it; a team's
    /// runs never overlap), so that a nested run does not allocate it anew.
    spare: Spares,
}

/// [`RunState`]'s kept process states, by process.
///
/// Each on its own cache line: process 0's thread takes and keeps its state while the others'
/// threads take and keep theirs.
struct Spares(Box<[CachePadded<SharedCell<Option<ProcState>>>]>);

// SAFETY: each cell is touched only by the thread running its process, when it enters and
// when it leaves a run ([`RunState::proc_state`], [`RunState::keep_proc_state`]).
unsafe impl Sync for Spares {}

/// How a thread run's state is made: what [`Run`](crate::Run) chose for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    /// The waiting policy of its barrier.
    pub(crate) policy: WaitPolicy,
    /// The waiting policy of its lazy syncs' waits ([`WaitPolicy::for_lazy_waits`]).
    pub(crate) lazy_policy: WaitPolicy,
    /// A tree barrier (many more processes than cores) instead of a dissemination barrier
    /// over the packages.
    pub(crate) tree_barrier: bool,
    /// Lazy syncs announce through lanes (when the run is small enough for them).
    pub(crate) lanes: bool,
    /// Declared syncs take the barrier where it is cheaper ([`RunState::declared_at_barrier`]):
    /// asked for (the default), and the run has two processes or coroutines.
    pub(crate) declared_at_barrier: bool,
    /// The sets of outboxes the processes use in turn (`outbox::SLOTS`): 2, or `SLOTS` where a
    /// lazy sender's slack pays (more processes than cores).
    pub(crate) slots: usize,
    /// Senders help their receivers with large deliveries (`share.rs`): where every process
    /// has a core, so that a helper's wait takes no receiver's.
    pub(crate) share: bool,
    /// The processes that share a thread take turns on it as coroutines (`coroutines.rs`):
    /// a wait costs a switch in user space, not a kernel's context switch.
    pub(crate) coroutines: bool,
}

impl Shape {
    /// Whether a run of `p` processes of this shape makes its declared syncs at the barrier
    /// ([`RunState::declared_at_barrier`]).
    pub(crate) fn declared_take_barrier(&self, p: usize) -> bool {
        self.declared_at_barrier && (p == 2 || self.coroutines)
    }
}

/// Which barrier a run gets: the one choice that [`RunState::new`] makes and
/// [`RunState::fits`] checks.
enum BarrierKind {
    /// A tree of threads (`Barrier::by_thread`) over these threads' processes.
    ByThread(Vec<Vec<usize>>),
    /// A tree of processes (`Barrier::tree_in_order`) in this order.
    Tree(Vec<u32>),
    /// A dissemination barrier over the layout's groups (`Barrier::grouped`).
    Grouped,
}

impl BarrierKind {
    fn of(layout: &Layout, shape: Shape) -> BarrierKind {
        // Coroutines never sleep, so a tree of threads costs a few cache lines between cores;
        // threads of an oversubscribed run sleep, and there a thread's last arriver would
        // wake its thread's sleepers one after another, which the tree of processes spreads
        // over its nodes (measured: docs/benchmarks.md, "A tree of threads for coroutines").
        match (shape.tree_barrier, shape.coroutines) {
            (true, true) => BarrierKind::ByThread(layout.thread_groups()),
            (true, false) => BarrierKind::Tree(super::barrier::tree_order(&layout.pus)),
            (false, _) => BarrierKind::Grouped,
        }
    }
}

impl RunState {
    /// The thread engine's state of a run placed by `layout`, of `shape`.
    pub(crate) fn new(layout: &Layout, shape: Shape) -> Self {
        let p = layout.domains.len();
        let groups = layout.groups.clone();
        let barrier = Arc::new(match BarrierKind::of(layout, shape) {
            BarrierKind::ByThread(threads) => Barrier::by_thread(&threads, shape.policy),
            BarrierKind::Tree(order) => Barrier::tree_in_order(order, shape.policy),
            BarrierKind::Grouped => Barrier::grouped(&groups, shape.policy),
        });
        let riders = barrier.rider_rounds();
        RunState {
            barrier,
            groups,
            riders,
            peers: (0..p)
                .map(|_| {
                    CachePadded::new(Peer {
                        inbox: Inbox::new(p, shape.slots),
                        ended: CachePadded::new(AtomicU64::new(0)),
                        bulk: BulkAreas::new(p),
                        desk: CachePadded::new(Desk::default()),
                    })
                })
                .collect(),
            lazy_used: AtomicBool::new(false),
            lazy_sleepers: CachePadded::new(AtomicU32::new(0)),
            lanes: if shape.lanes {
                Lanes::for_run(p, shape.slots)
            } else {
                None
            },
            declared_at_barrier: shape.declared_take_barrier(p),
            lazy_policy: shape.lazy_policy,
            slots: shape.slots,
            share: shape.share,
            coroutines: shape.coroutines,
            spare: Spares(
                (0..p)
                    .map(|_| CachePadded::new(SharedCell::new(None)))
                    .collect(),
            ),
        }
    }

    /// Process `pid`'s state for a new run: the one it left at the end of its last run in this
    /// state, made fresh, or a new one.
    ///
    /// # Safety
    /// The caller runs process `pid` of this state's run, entering it.
    pub(crate) unsafe fn proc_state(&self, pid: usize) -> ProcState {
        // Renewed where it is kept, and then moved out once (it is large).
        // SAFETY: the caller's promise (see `spare`).
        let kept = unsafe {
            self.spare.0[pid].write(|kept| {
                if let Some(st) = kept {
                    st.renew(pid);
                }
                kept.take()
            })
        };
        kept.unwrap_or_else(|| ProcState::new(self, pid))
    }

    /// Keep process `pid`'s state for its next run ([`RunState::proc_state`]), leaving an
    /// empty one in `st` (moved straight to where it is kept: it is large).
    ///
    /// # Safety
    /// The caller runs process `pid` of this state's run, leaving it.
    pub(crate) unsafe fn keep_proc_state(&self, pid: usize, st: &mut ProcState) {
        // SAFETY: the caller's promise (see `spare`).
        unsafe {
            self.spare.0[pid].write(|s| *s = Some(std::mem::replace(st, ProcState::empty())))
        };
    }

    /// Whether this state, made for a run of `p` processes, serves a new run placed by
    /// `layout` with `shape` (a team's reuse of its last run state).
    pub(crate) fn fits(&self, layout: &Layout, shape: Shape) -> bool {
        let p = self.peers.len();
        p == layout.domains.len()
            && self.barrier.policy() == shape.policy
            && self.lazy_policy == shape.lazy_policy
            && match BarrierKind::of(layout, shape) {
                BarrierKind::ByThread(threads) => self.barrier.is_by_thread_of(&threads),
                BarrierKind::Tree(order) => {
                    self.barrier.is_tree()
                        && !self.barrier.is_by_thread()
                        && self.barrier.order() == order
                }
                BarrierKind::Grouped => !self.barrier.is_tree(),
            }
            && self.groups == layout.groups
            && self.lanes.is_some() == (shape.lanes && Lanes::fits(p))
            && self.slots == shape.slots
    }

    /// Make the state ready for a new run of `shape` (exclusive access: the processes of the
    /// previous run have all dropped their contexts). A run that `continues` the last (which
    /// ended well: every process passed the same barrier episodes and completed the same
    /// syncs) counts on from its episodes, sync counts and mode words, which the last run's
    /// processes wrote last and which stay where they are; else they start again from zero.
    pub(crate) fn reuse(&mut self, shape: Shape, continues: bool) {
        // (Every reset below writes only what changed: see `shim::Zero`.)
        let declared_at_barrier = shape.declared_take_barrier(self.peers.len());
        if self.declared_at_barrier != declared_at_barrier {
            self.declared_at_barrier = declared_at_barrier;
        }
        if self.share != shape.share {
            self.share = shape.share;
        }
        if self.coroutines != shape.coroutines {
            self.coroutines = shape.coroutines;
        }
        // After a run that ended well with full syncs only, the inboxes and lanes are as a new
        // run needs them and are not even read (their lines are the processes'): every
        // sender's bit was taken by its receiver in the sync of its superstep, the lazy counts
        // and the lanes were never written, and the mode words count on. (`lazy_used` is set
        // by the first lazy sync of a run, through lanes or inboxes.)
        let lazy_used = self.lazy_used.load(Ordering::Relaxed);
        let reset = lazy_used || !continues;
        for peer in self.peers.iter_mut() {
            if reset {
                peer.inbox.reset(continues);
            }
            peer.bulk.reset();
        }
        if let Some(lanes) = self.lanes.as_ref().filter(|_| reset) {
            lanes.reset();
        }
        if lazy_used {
            self.lazy_used.store(false, Ordering::Relaxed);
        }
        if continues {
            self.barrier.reopen();
        } else {
            self.barrier.reset();
            for (pid, spare) in self.spare.0.iter_mut().enumerate() {
                spare.with_mut(|st| {
                    if let Some(st) = st {
                        st.member = Member::new(pid);
                    }
                });
            }
        }
    }

    /// Let `tree` stop this run's waits when the hierarchy fails.
    pub(crate) fn attach(&self, tree: &Tree) {
        tree.add_wait(&self.barrier);
    }

    /// Process `pid`'s inbox.
    #[inline]
    pub(crate) fn inbox(&self, pid: usize) -> &Inbox {
        &self.peers[pid].inbox
    }
}

/// The thread engine's part of one process's context (module documentation).
pub(crate) struct ProcState {
    pub(crate) member: Member,
    /// Put and message records riding in this process's barrier lines at the next sync, by
    /// round. Written in every superstep with such records, so [`Isolated`] (as `rode`): no
    /// other process's data shares their lines.
    pub(crate) rides: RefCell<Isolated<Ride>>,
    /// Put and message records that rode in the lines this process read at the last barrier,
    /// by round: its queue reads the messages here until the next sync.
    pub(crate) rode: Isolated<Ride>,
    /// The senders whose outboxes this process read in its last sync (a lazy next sync tells
    /// them when it has finished with them).
    pub(crate) took: Vec<u32>,
    /// `took` of the sync before, during a lazy sync's announcements.
    pub(crate) took_before: Vec<u32>,
    /// By slot (`ctx::slot`): acknowledgements this process has waited for, since the run
    /// began.
    pub(crate) acks_due: [u64; SLOTS],
    /// By slot: the superstep whose records in this slot's outboxes are being acknowledged
    /// by their receivers, and whose acknowledgements this process has not yet waited for
    /// (`lazy.rs`: it waits before refilling the slot, or at the next full sync).
    pub(crate) owed: [Option<u64>; SLOTS],
    /// By slot: the receivers whose acknowledgements `owed` awaits in this process's inbox
    /// (every destination of that superstep, or in a lane sync those that did not acknowledge
    /// in their lanes).
    pub(crate) owed_dests: [Vec<u32>; SLOTS],
    /// By slot: records announced to this process that its lazy syncs took, since the run
    /// began (the inbox's counts only grow: its senders alone write them).
    pub(crate) records_taken: [u64; SLOTS],
    /// In a run with lanes (`lane.rs`), by sender and slot: the stamp of the sender's last
    /// lane this process took (a later one it did not take came too late).
    pub(crate) lane_seen: Vec<[u64; SLOTS]>,
    /// This superstep made a large put to another process (`share.rs`): its sync may help
    /// the receivers copy it. (A `Cell`: puts take the context shared.)
    pub(crate) sent_large: Cell<bool>,
    /// The first superstep since this process's last full sync: its syncs from there to the
    /// current one are lazy (`lazy.rs`, `Ctx::stuck_at`).
    pub(crate) lazy_since: u64,
}

impl ProcState {
    /// Make this state, kept from a run that has ended, as [`ProcState::new`] makes it for
    /// process `pid` of a new run of the same state, its buffers kept.
    fn renew(&mut self, pid: usize) {
        // Destructured, so that a field added to the state cannot be forgotten here.
        let ProcState {
            member,
            rides,
            rode,
            took,
            took_before,
            acks_due,
            owed,
            owed_dests,
            records_taken,
            lane_seen,
            sent_large,
            lazy_since,
        } = self;
        for ride in rides.get_mut().iter_mut().chain(rode.iter_mut()) {
            ride.reset();
        }
        for d in owed_dests.iter_mut() {
            d.clear();
        }
        took.clear();
        took_before.clear();
        // Zeroed, not emptied: a lane sync then finds it of the run's size (`lane_sync.rs`).
        lane_seen.fill([0; SLOTS]);
        *member = member.next_run(pid);
        *acks_due = [0; SLOTS];
        *owed = [None; SLOTS];
        *records_taken = [0; SLOTS];
        sent_large.set(false);
        *lazy_since = 0;
    }

    /// An empty state (allocates nothing), for a context whose state went back to its run.
    pub(crate) fn empty() -> Self {
        ProcState {
            member: Member::new(0),
            rides: RefCell::new(Isolated::default()),
            rode: Isolated::default(),
            took: Vec::new(),
            took_before: Vec::new(),
            acks_due: [0; SLOTS],
            owed: [None; SLOTS],
            owed_dests: Default::default(),
            records_taken: [0; SLOTS],
            lane_seen: Vec::new(),
            sent_large: Cell::new(false),
            lazy_since: 0,
        }
    }

    /// Process `pid`'s state in a run whose engine state is `run`.
    pub(crate) fn new(run: &RunState, pid: usize) -> Self {
        let rounds = run.barrier.rounds();
        ProcState {
            member: Member::new(pid),
            rides: RefCell::new(Isolated::new(rounds, Ride::default())),
            rode: Isolated::new(rounds, Ride::default()),
            ..ProcState::empty()
        }
    }
}
