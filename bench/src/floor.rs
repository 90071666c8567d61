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

/// The least any superstep of two threads that hears from the other can cost: each thread
/// writes a round number into its own cache line and spins until the other's line shows the
/// same round (one line transfer each way, no library). A one-word exchange can ride in that
/// same line, so this is also the floor of a two-process exchange.
pub struct LinePair {
    lines: [CachePadded<AtomicUsize>; 2],
}

impl Default for LinePair {
    fn default() -> Self {
        Self::new()
    }
}

impl LinePair {
    /// Two lines at round 0.
    pub fn new() -> Self {
        LinePair {
            lines: [
                CachePadded::new(AtomicUsize::new(0)),
                CachePadded::new(AtomicUsize::new(0)),
            ],
        }
    }

    /// Thread `me` (0 or 1) publishes `round` and waits for the other's.
    pub fn exchange(&self, me: usize, round: usize) {
        self.lines[me].store(round, Ordering::Release);
        while self.lines[1 - me].load(Ordering::Acquire) < round {
            std::hint::spin_loop();
        }
    }
}

/// A ring halo exchange without a library: `p` threads in a ring, each
/// writes a round number into its own cache line and waits until both neighbours' lines show
/// it, yielding its core while it waits (when there are more threads than cores a spinner would
/// hold its core for a whole time slice). No barrier: each thread waits for its neighbours only,
/// as a lazy sync does.
pub struct Ring {
    lines: Vec<CachePadded<AtomicUsize>>,
}

impl Ring {
    /// A ring of `p` threads at round 0.
    pub fn new(p: usize) -> Self {
        Ring {
            lines: (0..p)
                .map(|_| CachePadded::new(AtomicUsize::new(0)))
                .collect(),
        }
    }

    /// Thread `me` publishes `round` and waits for its two neighbours'.
    pub fn exchange(&self, me: usize, round: usize) {
        let p = self.lines.len();
        self.lines[me].store(round, Ordering::Release);
        for n in [(me + 1) % p, (me + p - 1) % p] {
            while self.lines[n].load(Ordering::Acquire) < round {
                std::thread::yield_now();
            }
        }
    }
}
