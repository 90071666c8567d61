//! The barrier of one run: a centralised counter barrier that also combines flags.
//!
//! Every process adds 1 to one arrival word (and 2^32 if it is ending its SPMD function).
//! The last arriver resets the word, publishes the OR of the arrivals' flags and the number of
//! ending arrivals, and bumps the release word. Waiters spin on the release word, then yield,
//! then sleep on it as on a futex: this keeps the empty superstep at one atomic add plus one
//! cache-line transfer, and keeps oversubscribed runs (more processes than cores) from burning
//! the time slices of the processes they wait for.
//!
//! Abort sets bit 0 of the release word (epochs count in steps of 2, so they never touch it) and
//! wakes all sleepers; every waiter returns [`Aborted`].

use crate::shim::{AtomicU32, AtomicU64, Ordering, spin_hint, wait_while, wake_all, yield_now};
use crossbeam_utils::CachePadded;

/// Someone in this superstep issued a put, send, hpsend or hpput.
pub(crate) const FLAG_COMM: u32 = 1;
/// Someone issued a buffered get: reads need their own phase before the writes.
pub(crate) const FLAG_GETS: u32 = 2;
/// Someone pushed or popped a registration.
pub(crate) const FLAG_REGS: u32 = 4;
/// Someone called `set_tagsize`.
pub(crate) const FLAG_TAGS: u32 = 8;

const ABORT: u32 = 1;
const EPOCH_STEP: u32 = 2;
const END_UNIT: u64 = 1 << 32;

/// How long a waiting thread spins and yields before it sleeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitPolicy {
    /// Busy-wait iterations (each one a CPU pause hint) before yielding.
    pub spins: u32,
    /// `sched_yield` calls before sleeping on a futex.
    pub yields: u32,
}

impl WaitPolicy {
    /// The default for `p` runnable threads on `cores` hardware threads: spin long when every
    /// process has its own core (the awaited process is running), barely when oversubscribed
    /// (the awaited process probably needs this core).
    pub fn for_load(p: usize, cores: usize) -> Self {
        if p <= cores {
            WaitPolicy {
                spins: 20_000,
                yields: 2_000,
            }
        } else {
            WaitPolicy {
                spins: 50,
                yields: 200,
            }
        }
    }
}

/// What the last arriver saw: the OR of all arrivals' flags and how many arrivals were ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// OR of the flags passed to [`Barrier::wait`] by every process this round.
    pub flags: u32,
    /// How many processes arrived with `ending = true`.
    pub ends: u32,
}

/// The run was aborted while (or before) waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aborted;

struct ReleaseLine {
    word: AtomicU32,
    result: AtomicU64,
    sleepers: AtomicU32,
}

/// A flag-combining barrier for a fixed number of processes.
pub struct Barrier {
    p: u32,
    arrive: CachePadded<AtomicU64>,
    flags: CachePadded<AtomicU32>,
    release: CachePadded<ReleaseLine>,
    policy: WaitPolicy,
}

impl Barrier {
    /// A barrier for `p` processes (1 ≤ p < 2^32).
    pub fn new(p: usize, policy: WaitPolicy) -> Self {
        assert!(p >= 1 && p < u32::MAX as usize, "barrier size {p}");
        Barrier {
            p: p as u32,
            arrive: CachePadded::new(AtomicU64::new(0)),
            flags: CachePadded::new(AtomicU32::new(0)),
            release: CachePadded::new(ReleaseLine {
                word: AtomicU32::new(0),
                result: AtomicU64::new(0),
                sleepers: AtomicU32::new(0),
            }),
            policy,
        }
    }

    /// Arrive with `flags`, wait for all `p` processes, and return the combined outcome.
    pub fn wait(&self, flags: u32, ending: bool) -> Result<Outcome, Aborted> {
        // Read the epoch before arriving: it cannot change until this process has arrived.
        let seen = self.release.word.load(Ordering::Acquire);
        if seen & ABORT != 0 {
            return Err(Aborted);
        }
        if flags != 0 {
            // Published to the last arriver by the AcqRel add below.
            self.flags.fetch_or(flags, Ordering::Relaxed);
        }
        let add = 1 + if ending { END_UNIT } else { 0 };
        let old = self.arrive.fetch_add(add, Ordering::AcqRel);
        if (old as u32) + 1 == self.p {
            let total = old + add;
            let out = Outcome {
                flags: self.flags.swap(0, Ordering::Relaxed),
                ends: (total >> 32) as u32,
            };
            // Nobody arrives for the next round before seeing the new epoch, so resetting
            // here (ordered before the release below) is safe.
            self.arrive.store(0, Ordering::Relaxed);
            self.release.result.store(
                out.flags as u64 | ((out.ends as u64) << 32),
                Ordering::Relaxed,
            );
            let prev = self.release.word.fetch_add(EPOCH_STEP, Ordering::SeqCst);
            if self.release.sleepers.load(Ordering::SeqCst) != 0 {
                wake_all(&self.release.word);
            }
            if prev & ABORT != 0 {
                return Err(Aborted);
            }
            return Ok(out);
        }
        self.await_release(seen)
    }

    fn await_release(&self, seen: u32) -> Result<Outcome, Aborted> {
        let word = &self.release.word;
        for _ in 0..self.policy.spins {
            let w = word.load(Ordering::Acquire);
            if w != seen {
                return self.finish(w);
            }
            spin_hint();
        }
        for _ in 0..self.policy.yields {
            let w = word.load(Ordering::Acquire);
            if w != seen {
                return self.finish(w);
            }
            yield_now();
        }
        // Sleep. Announcing ourselves (SeqCst) before re-reading the word pairs with the
        // releaser's SeqCst bump-then-read-sleepers: one of the two sees the other.
        self.release.sleepers.fetch_add(1, Ordering::SeqCst);
        let w = loop {
            let w = word.load(Ordering::SeqCst);
            if w != seen {
                break w;
            }
            wait_while(word, seen);
        };
        self.release.sleepers.fetch_sub(1, Ordering::Relaxed);
        self.finish(w)
    }

    fn finish(&self, w: u32) -> Result<Outcome, Aborted> {
        if w & ABORT != 0 {
            return Err(Aborted);
        }
        let r = self.release.result.load(Ordering::Relaxed);
        Ok(Outcome {
            flags: r as u32,
            ends: (r >> 32) as u32,
        })
    }

    /// Make every current and future [`wait`](Self::wait) return [`Aborted`].
    pub fn abort(&self) {
        self.release.word.fetch_or(ABORT, Ordering::SeqCst);
        wake_all(&self.release.word);
    }

    /// Whether [`abort`](Self::abort) was called.
    pub fn is_aborted(&self) -> bool {
        self.release.word.load(Ordering::Relaxed) & ABORT != 0
    }

    /// The waiting policy.
    pub fn policy(&self) -> WaitPolicy {
        self.policy
    }
}

/// Wait until `ready()` holds with the same spin → yield → sleep policy (sleeping in short
/// naps, since nobody wakes us), giving up with [`Aborted`] when `aborted()` turns true.
pub(crate) fn wait_until(
    policy: WaitPolicy,
    mut ready: impl FnMut() -> bool,
    aborted: impl Fn() -> bool,
) -> Result<(), Aborted> {
    let mut i: u64 = 0;
    loop {
        if ready() {
            return Ok(());
        }
        if aborted() {
            return Err(Aborted);
        }
        if i < policy.spins as u64 {
            spin_hint();
        } else if i < (policy.spins + policy.yields) as u64 {
            yield_now();
        } else {
            #[cfg(loom)]
            yield_now();
            #[cfg(not(loom))]
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
        i += 1;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn policies() -> [WaitPolicy; 2] {
        [
            WaitPolicy::for_load(1, 64),
            WaitPolicy {
                spins: 0,
                yields: 0,
            },
        ]
    }

    #[test]
    fn combines_flags_and_ends_over_many_rounds() {
        for policy in policies() {
            let p = 4;
            let b = Arc::new(Barrier::new(p, policy));
            std::thread::scope(|s| {
                for pid in 0..p {
                    let b = &b;
                    s.spawn(move || {
                        for round in 0..2000u32 {
                            // pid contributes bit (pid) in rounds where round % (pid+1) == 0
                            let mine = if round % (pid as u32 + 1) == 0 {
                                1 << pid
                            } else {
                                0
                            };
                            let out = b.wait(mine, false).unwrap();
                            let want: u32 = (0..p as u32)
                                .filter(|q| round % (q + 1) == 0)
                                .map(|q| 1 << q)
                                .sum();
                            assert_eq!(out.flags, want, "round {round}");
                            assert_eq!(out.ends, 0);
                        }
                        let out = b.wait(0, pid % 2 == 0).unwrap();
                        assert_eq!(out.ends, 2);
                    });
                }
            });
        }
    }

    #[test]
    fn abort_wakes_sleeping_waiters() {
        let b = Arc::new(Barrier::new(
            3,
            WaitPolicy {
                spins: 0,
                yields: 0,
            },
        ));
        std::thread::scope(|s| {
            let h: Vec<_> = (0..2)
                .map(|_| {
                    let b = &b;
                    s.spawn(move || b.wait(0, false))
                })
                .collect();
            std::thread::sleep(std::time::Duration::from_millis(50));
            b.abort();
            for h in h {
                assert_eq!(h.join().unwrap(), Err(Aborted));
            }
        });
        assert_eq!(b.wait(0, false), Err(Aborted));
    }

    #[test]
    fn single_process_barrier_returns_immediately() {
        let b = Barrier::new(1, WaitPolicy::for_load(1, 1));
        for _ in 0..10 {
            assert_eq!(b.wait(FLAG_GETS, false).unwrap().flags, FLAG_GETS);
        }
        assert_eq!(b.wait(0, true).unwrap().ends, 1);
    }
}
