//! State shared by a top-level run and every run nested inside it: the first error, the abort
//! flag, and what to wake when a process fails (the runs' barriers, through [`Stop`]).

use crate::error::Error;
use crate::shim::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// Something processes wait in (a run's barrier) that every wait must leave when the hierarchy
/// fails. The tree knows it only through this, so it sits below the engines that own barriers.
pub(crate) trait Stop: Send + Sync {
    /// Make every current and future wait return (the run has failed).
    fn stop(&self);
}

/// One per top-level run; nested runs share their parent's.
pub(crate) struct Tree {
    /// Read by every primitive: alone on its cache line, away from the mutexes below.
    aborted: crossbeam_utils::CachePadded<AtomicBool>,
    first_error: Mutex<Option<Error>>,
    waits: Mutex<Vec<Weak<dyn Stop>>>,
}

impl Tree {
    pub(crate) fn new() -> Arc<Tree> {
        Arc::new(Tree {
            aborted: crossbeam_utils::CachePadded::new(AtomicBool::new(false)),
            first_error: Mutex::new(None),
            waits: Mutex::new(Vec::new()),
        })
    }

    /// Whether any process of the hierarchy failed. Cheap: one relaxed load of a line that is
    /// written once.
    #[inline]
    pub(crate) fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::Relaxed)
    }

    /// Record `err` (the first root cause wins; secondary "aborted" errors never replace one)
    /// and stop every run of the hierarchy.
    pub(crate) fn fail(&self, err: &Error) {
        {
            let mut slot = lock(&self.first_error);
            let replace = match &*slot {
                None => true,
                Some(old) => old.is_secondary() && !err.is_secondary(),
            };
            if replace {
                *slot = Some(err.clone());
            }
        }
        if !self.aborted.swap(true, Ordering::SeqCst) {
            let waits = lock(&self.waits);
            for w in waits.iter().filter_map(Weak::upgrade) {
                w.stop();
            }
        }
    }

    /// The first recorded error, if any.
    pub(crate) fn error(&self) -> Option<Error> {
        lock(&self.first_error).clone()
    }

    /// Stop `w` if the hierarchy has failed (a wait already added, reset for a new run).
    pub(crate) fn stop_if_aborted<W: Stop + ?Sized>(&self, w: &W) {
        if self.aborted.load(Ordering::SeqCst) {
            w.stop();
        }
    }

    /// Add what the processes of a new run wait in; it is stopped at once if the hierarchy
    /// already failed.
    pub(crate) fn add_wait<W: Stop + 'static>(&self, w: &Arc<W>) {
        {
            let mut waits = lock(&self.waits);
            waits.retain(|w| w.strong_count() > 0);
            // A reused run state brings the same barrier again.
            if !waits
                .iter()
                .any(|old| std::ptr::addr_eq(old.as_ptr(), Arc::as_ptr(w)))
            {
                let weak: Weak<dyn Stop> = Arc::downgrade(w) as Weak<dyn Stop>;
                waits.push(weak);
            }
        }
        if self.aborted.load(Ordering::SeqCst) {
            w.stop();
        }
    }
}

/// Lock, ignoring poisoning: the data behind these mutexes stays consistent across a panic
/// (they only hold an `Option` and a list of weak pointers).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
