//! State shared by a top-level run and every run nested inside it: the first error, the abort
//! flag, and the barriers to wake when a process fails.

use crate::barrier::Barrier;
use crate::error::Error;
use crate::shim::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// One per top-level run; nested runs share their parent's.
pub(crate) struct Tree {
    /// Read by every primitive: alone on its cache line, away from the mutexes below.
    aborted: crossbeam_utils::CachePadded<AtomicBool>,
    first_error: Mutex<Option<Error>>,
    barriers: Mutex<Vec<Weak<Barrier>>>,
}

impl Tree {
    pub(crate) fn new() -> Arc<Tree> {
        Arc::new(Tree {
            aborted: crossbeam_utils::CachePadded::new(AtomicBool::new(false)),
            first_error: Mutex::new(None),
            barriers: Mutex::new(Vec::new()),
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
            let barriers = lock(&self.barriers);
            for b in barriers.iter().filter_map(Weak::upgrade) {
                b.abort();
            }
        }
    }

    /// The first recorded error, if any.
    pub(crate) fn error(&self) -> Option<Error> {
        lock(&self.first_error).clone()
    }

    /// Add the barrier of a new run; it is aborted at once if the hierarchy already failed.
    pub(crate) fn add_barrier(&self, b: &Arc<Barrier>) {
        {
            let mut barriers = lock(&self.barriers);
            barriers.retain(|w| w.strong_count() > 0);
            // A reused run state brings the same barrier again.
            if !barriers
                .iter()
                .any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(b)))
            {
                barriers.push(Arc::downgrade(b));
            }
        }
        if self.aborted.load(Ordering::SeqCst) {
            b.abort();
        }
    }
}

/// Lock, ignoring poisoning: the data behind these mutexes stays consistent across a panic
/// (they only hold an `Option` and a list of weak pointers).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
