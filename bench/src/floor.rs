//! Baselines for synchronisation: the smallest possible spinning barrier (the floor any barrier
//! is measured against) and a thin wrapper over `std::sync::Barrier`.

use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A sense-reversing centralised spinning barrier: one atomic add per arrival, the last arriver
/// bumps a generation counter the others spin on. When the run is oversubscribed, spinning
/// threads yield (a pure spinner would wait for whole time slices).
pub struct SpinBarrier {
    p: usize,
    count: CachePadded<AtomicUsize>,
    generation: CachePadded<AtomicUsize>,
    yielding: bool,
}

impl SpinBarrier {
    /// A barrier for `p` threads.
    pub fn new(p: usize) -> Self {
        SpinBarrier {
            p,
            count: CachePadded::new(AtomicUsize::new(0)),
            generation: CachePadded::new(AtomicUsize::new(0)),
            yielding: p > mbsp::nprocs(),
        }
    }

    /// Wait for all `p` threads.
    pub fn wait(&self) {
        let g = self.generation.load(Ordering::Acquire);
        if self.count.fetch_add(1, Ordering::AcqRel) + 1 == self.p {
            self.count.store(0, Ordering::Relaxed);
            self.generation.store(g.wrapping_add(1), Ordering::Release);
            return;
        }
        while self.generation.load(Ordering::Acquire) == g {
            if self.yielding {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}
