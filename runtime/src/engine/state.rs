//! The engine's own part of the run state and of every process's context: one enum each, so
//! that `RunShared` and `Ctx` (`ctx.rs`) hold it without knowing its insides, and each engine
//! keeps its state in its own folder (`threads/state.rs`, `ranks/net.rs`). Data only: the
//! behaviour is the [`Engine`](super::Engine) trait, dispatched in `engine/mod.rs`.

use super::threads::state::{ProcState, RunState};
use crate::tree::Tree;

/// Which engine a run's processes reach each other through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Every process a thread of this address space (`engine/threads`).
    Threads,
    /// One process per MPI rank (`engine/ranks`, feature `mpi`).
    #[cfg(feature = "mpi")]
    Ranks,
}

/// The engine's part of a run's shared state.
#[allow(
    clippy::large_enum_variant,
    reason = "one per run, in its shared state; the other variant is empty"
)]
pub(crate) enum RunEngine {
    /// The thread engine's barrier, lanes and inboxes.
    Threads(RunState),
    /// A run over ranks keeps its engine state per process (each rank has one process).
    #[cfg(feature = "mpi")]
    Ranks,
}

impl RunEngine {
    /// The thread engine's run state.
    ///
    /// # Panics
    /// In a run over ranks: only the thread engine's code asks, and it runs only in thread
    /// runs.
    #[inline(always)]
    pub(crate) fn threads(&self) -> &RunState {
        match self {
            RunEngine::Threads(t) => t,
            #[cfg(feature = "mpi")]
            RunEngine::Ranks => unreachable!("the thread engine's state of a run over ranks"),
        }
    }

    /// [`RunEngine::threads`], mutably (exclusive access to the run state).
    pub(crate) fn threads_mut(&mut self) -> &mut RunState {
        match self {
            RunEngine::Threads(t) => t,
            #[cfg(feature = "mpi")]
            RunEngine::Ranks => unreachable!("the thread engine's state of a run over ranks"),
        }
    }

    /// The sets of outboxes the run's processes use in turn (`ctx::RunShared::slots`): the
    /// thread engine's choice; two over ranks, which copy outboxes into streams at the sync.
    pub(crate) fn slots(&self) -> usize {
        match self {
            RunEngine::Threads(t) => t.slots,
            #[cfg(feature = "mpi")]
            RunEngine::Ranks => 2,
        }
    }

    /// Whether the processes of a run placed by `layout` outnumber the hardware threads they
    /// are placed on (`Ctx::oversubscribed`); never over ranks, where each rank's process is
    /// placed in a share of its own node.
    pub(crate) fn oversubscribed(&self, layout: &crate::place::Layout) -> bool {
        match self {
            RunEngine::Threads(_) => layout.domains.len() > layout.cores,
            #[cfg(feature = "mpi")]
            RunEngine::Ranks => false,
        }
    }

    /// Whether the processes of the run that share a hardware thread take turns on it as
    /// coroutines (`Ctx::coroutines`); never over ranks.
    pub(crate) fn coroutines(&self) -> bool {
        match self {
            RunEngine::Threads(t) => t.coroutines,
            #[cfg(feature = "mpi")]
            RunEngine::Ranks => false,
        }
    }

    /// Let `tree` stop every wait of the run when the hierarchy fails.
    pub(crate) fn attach(&self, tree: &Tree) {
        match self {
            RunEngine::Threads(t) => t.attach(tree),
            #[cfg(feature = "mpi")]
            RunEngine::Ranks => {}
        }
    }

    /// [`RunEngine::attach`] again, to the tree the state is attached to already: its waits
    /// stopped now if the hierarchy has failed.
    pub(crate) fn recheck(&self, tree: &Tree) {
        match self {
            RunEngine::Threads(t) => tree.stop_if_aborted(&*t.barrier),
            #[cfg(feature = "mpi")]
            RunEngine::Ranks => {}
        }
    }
}

/// The engine's part of one process's context.
// One per process, reached on every primitive: the thread engine's part stays inline (a box
// would cost an indirection on the hot path to save a few hundred bytes per process).
#[allow(clippy::large_enum_variant)]
pub(crate) enum ProcEngine {
    /// The thread engine's barrier membership, riding puts and lazy-sync bookkeeping.
    Threads(ProcState),
    /// The rank engine's connection to the other ranks (`None` only while a call of the rank
    /// engine has it out: `engine/ranks/mod.rs`).
    #[cfg(feature = "mpi")]
    Ranks(Option<Box<super::ranks::net::Net>>),
}

impl ProcEngine {
    /// Which engine this is.
    #[inline(always)]
    pub(crate) fn kind(&self) -> Kind {
        match self {
            ProcEngine::Threads(_) => Kind::Threads,
            #[cfg(feature = "mpi")]
            ProcEngine::Ranks(_) => Kind::Ranks,
        }
    }

    /// The thread engine's state of this process.
    ///
    /// # Panics
    /// In a process of a run over ranks (see [`RunEngine::threads`]).
    #[inline(always)]
    pub(crate) fn threads(&self) -> &ProcState {
        match self {
            ProcEngine::Threads(t) => t,
            #[cfg(feature = "mpi")]
            ProcEngine::Ranks(_) => unreachable!("the thread engine's state of a rank"),
        }
    }

    /// Give this process's engine state back to its run for the process's next run (the
    /// thread engine keeps it: `RunState::proc_state`), leaving an empty one.
    ///
    /// # Safety
    /// The caller runs process `pid` of `run`, leaving it (its context is being dropped).
    pub(crate) unsafe fn give_back(&mut self, run: &RunEngine, pid: usize) {
        match self {
            // SAFETY: the caller's promise.
            ProcEngine::Threads(st) => unsafe { run.threads().keep_proc_state(pid, st) },
            #[cfg(feature = "mpi")]
            ProcEngine::Ranks(_) => {}
        }
    }

    /// [`ProcEngine::threads`], mutably.
    #[inline(always)]
    pub(crate) fn threads_mut(&mut self) -> &mut ProcState {
        match self {
            ProcEngine::Threads(t) => t,
            #[cfg(feature = "mpi")]
            ProcEngine::Ranks(_) => unreachable!("the thread engine's state of a rank"),
        }
    }
}
