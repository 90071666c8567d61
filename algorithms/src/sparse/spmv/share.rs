//! Work shared among the processes of a [`SharedSpmv`](super::SharedSpmv) multiply.
//!
//! The partitioner balances nonzeros, not time: the same number of nonzeros takes longer where
//! `x` is read from farther apart, and on a shared machine one core is often slower than the
//! other for a while. A process that finishes its rows early waits in the sync for the last
//! one. With whole vectors shared, any process can compute any row of `y`: the rows a process
//! computes (`rows.rs`) are cut into [`BLOCKS`] blocks of chunks, and a process that has
//! finished its own blocks takes blocks of the others' from their other ends, while each owner
//! takes its own from one end (so that the two meet in the middle, each keeping the part of
//! `x` it has in its caches; in an iso-valued matrix the chunks with padding come last,
//! `sell.rs`). Even processes take their own from the front, odd ones from the back: where
//! one takes a block of the other's, the two then work at opposite ends of the other's rows.
//!
//! **The queue.** Each process's blocks are one word in a cache line of its own: the number of
//! the multiply (`epoch`, 16 bits), the next block from the front and one past the last block
//! from the back (24 bits each). The owner opens the queue at the start of each of its
//! multiplies (epoch, 0, blocks); every take is a compare-and-swap that moves `front` up or
//! `back` down while `front < back`, so each block is taken exactly once per epoch. A taker
//! names the epoch it is in: the processes of a run multiply in lockstep (a multiply is one
//! superstep), so a queue of another epoch is either not yet opened for this multiply (the
//! owner has not started it: nothing is taken, the owner takes everything itself) or left
//! from before. A queue is closed (epoch 0, no blocks) when its process's multiply is made and
//! dropped, so a run never sees the blocks of an earlier run.
//!
//! **Why the writes are sound.** A block's rows are written by the one thread that took the
//! block, in the multiply that took it; the rows of different blocks, and of different
//! processes, are disjoint. Every process ends a multiply with a sync, which every taker
//! reaches after its last write, and opens its next multiply's queue after it (a release), so
//! a taker of the next multiply, whose take acquires that opening, writes after everything of
//! the one before. A taker takes only for the vectors the owner opened its queue with (the
//! address of `y`, stored before the opening). The matrices are the plan's, immutable once
//! made ([`Shares::part`]).

use super::SpmvPlan;
use super::rows::{LINE, Split, Whole};
use super::sell::Sell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// Blocks of each process's owned rows: enough that the last one taken is a small part of a
/// multiply, few enough that taking one costs nothing next to computing it.
pub const BLOCKS: u32 = 32;

#[repr(align(64))]
#[derive(Default)]
struct Line {
    queue: AtomicU64,
    /// Where the owner's `y` is in the epoch open (its address): a process takes blocks only
    /// for the same `y` (processes handed different vectors, against the API, keep to their
    /// own rows).
    key: AtomicUsize,
}

/// One line per process of a plan; see the module docs.
pub(crate) struct Shares {
    lines: Box<[Line]>,
    /// The matrix whole (`rows.rs`), made when the processes' rows are to be made and
    /// dropped once every process has made its own (a copy of the matrix, needed only to
    /// make them).
    whole: Mutex<Option<Arc<Whole>>>,
    /// The rows of each process (`rows.rs`), for the position in its cache line of the first
    /// `y` multiplied, made then.
    split: OnceLock<Split>,
}

const BITS: u32 = 24;
const MASK: u64 = (1 << BITS) - 1;

fn pack(epoch: u16, front: u32, back: u32) -> u64 {
    (epoch as u64) << (2 * BITS) | (front as u64) << BITS | back as u64
}

fn unpack(w: u64) -> (u16, u32, u32) {
    (
        (w >> (2 * BITS)) as u16,
        ((w >> BITS) & MASK) as u32,
        (w & MASK) as u32,
    )
}

impl Shares {
    pub(crate) fn new(p: usize) -> Self {
        Shares {
            lines: (0..p).map(|_| Line::default()).collect(),
            whole: Mutex::new(None),
            split: OnceLock::new(),
        }
    }

    /// `plan`'s matrix whole (`plan` must be the plan these shares are part of), made if it
    /// is not kept.
    fn whole(&self, plan: &SpmvPlan) -> Arc<Whole> {
        // (Made under the lock: whoever else wants it waits for it rather than making another.)
        let mut w = self.whole.lock().unwrap_or_else(PoisonError::into_inner);
        w.get_or_insert_with(|| Arc::new(Whole::new(plan))).clone()
    }

    /// The rows of each process of `plan`, made once, for vectors whose first entry is at
    /// position `o` of its cache line: those of the first multiply (`rows.rs`).
    pub(crate) fn split(&self, plan: &SpmvPlan, o: usize) -> &Split {
        self.split
            .get_or_init(|| Split::new(plan, &self.whole(plan), o % LINE))
    }

    /// Process `s`'s matrix (made once, by the caller: `s` itself, at its first multiply,
    /// with `o` as in [`split`](Self::split)); the whole matrix is dropped once every process
    /// has its own.
    pub(crate) fn part(&self, plan: &SpmvPlan, o: usize, s: usize) -> &Sell {
        let split = self.split(plan, o);
        let (sell, all) = split.part(s, || self.whole(plan).sell(split.rows(s), plan.cols));
        if all {
            *self.whole.lock().unwrap_or_else(PoisonError::into_inner) = None;
        }
        sell
    }

    /// Opens `pid`'s queue for its multiply `epoch` (not 0) with `blocks` blocks, writing to
    /// the `y` at address `key`.
    pub(crate) fn open(&self, pid: usize, epoch: u16, blocks: u32, key: usize) {
        assert!(epoch != 0 && (blocks as u64) <= MASK);
        let l = &self.lines[pid];
        l.key.store(key, Ordering::Relaxed);
        // (Release: a taker that sees this epoch sees the key above.)
        l.queue.store(pack(epoch, 0, blocks), Ordering::Release);
    }

    /// Closes `pid`'s queue: nothing to take in any epoch.
    pub(crate) fn close(&self, pid: usize) {
        self.lines[pid].queue.store(0, Ordering::Release);
    }

    /// Takes the next of `q`'s blocks for `q` itself, in multiply `epoch` for the `y` at `key`:
    /// from the front for an even `q`, from the back for an odd one (see the module docs).
    pub(crate) fn take_own(&self, q: usize, epoch: u16, key: usize) -> Option<u32> {
        if q.is_multiple_of(2) {
            self.take_front(q, epoch, key)
        } else {
            self.take_back(q, epoch, key)
        }
    }

    /// Takes one of `q`'s blocks for another process: from the end `q` does not take from.
    pub(crate) fn take_for_other(&self, q: usize, epoch: u16, key: usize) -> Option<u32> {
        if q.is_multiple_of(2) {
            self.take_back(q, epoch, key)
        } else {
            self.take_front(q, epoch, key)
        }
    }

    /// Takes the next block from the front of `q`'s queue in multiply `epoch` for the `y` at
    /// `key`.
    pub(crate) fn take_front(&self, q: usize, epoch: u16, key: usize) -> Option<u32> {
        self.take(q, epoch, key, |front, back| {
            (front, pack(epoch, front + 1, back))
        })
    }

    /// Takes the last block from the back of `q`'s queue in multiply `epoch` for the `y` at
    /// `key`.
    pub(crate) fn take_back(&self, q: usize, epoch: u16, key: usize) -> Option<u32> {
        self.take(q, epoch, key, |front, back| {
            (back - 1, pack(epoch, front, back - 1))
        })
    }

    fn take(
        &self,
        q: usize,
        epoch: u16,
        key: usize,
        next: impl Fn(u32, u32) -> (u32, u64),
    ) -> Option<u32> {
        let l = &self.lines[q];
        let mut w = l.queue.load(Ordering::Acquire);
        loop {
            let (e, front, back) = unpack(w);
            if e != epoch || front >= back || l.key.load(Ordering::Relaxed) != key {
                return None;
            }
            let (block, new) = next(front, back);
            match l
                .queue
                .compare_exchange_weak(w, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(block),
                Err(now) => w = now,
            }
        }
    }
}

/// A clone is fresh (a cloned plan serves its own runs and makes its matrices again).
impl Clone for Shares {
    fn clone(&self) -> Self {
        Shares::new(self.lines.len())
    }
}

impl std::fmt::Debug for Shares {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Shares({} lines)", self.lines.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_block_is_taken_once_from_either_end_and_only_in_its_epoch() {
        let s = Shares::new(2);
        assert_eq!(s.take_front(0, 1, 7), None, "a closed queue");
        s.open(0, 1, 3, 7);
        assert_eq!(s.take_front(0, 1, 8), None, "another y");
        assert_eq!(s.take_front(0, 2, 7), None, "another epoch");
        assert_eq!(s.take_back(0, 1, 7), Some(2));
        assert_eq!(s.take_front(0, 1, 7), Some(0));
        assert_eq!(s.take_front(0, 1, 7), Some(1));
        assert_eq!(s.take_back(0, 1, 7), None);
        assert_eq!(s.take_front(0, 1, 7), None);
        s.open(0, 2, (1 << BITS) - 1, 7);
        assert_eq!(s.take_back(0, 2, 7), Some((1 << BITS) - 2));
        s.close(0);
        assert_eq!(s.take_front(0, 2, 7), None);
        assert_eq!(s.take_front(1, 2, 7), None, "the other line is its own");
    }

    /// The whole matrix is kept while processes still have to make their rows, and dropped
    /// once all have; vectors at another position in their lines use the same rows.
    #[test]
    fn the_whole_matrix_lives_until_every_part_is_made() {
        use crate::sparse::{CooMatrix, Distribution};
        let a = CooMatrix::new(20, 20, (0..20).map(|i| (i, (i * 7) % 20, 1.0 + i as f64))).unwrap();
        let d = Distribution {
            p: 2,
            nz_part: (0..20).map(|k| k % 2).collect(),
            x_owner: (0..20).map(|j| j % 2).collect(),
            y_owner: (0..20).map(|i| i / 10).collect(),
        };
        let plan = SpmvPlan::new(&a, &d).unwrap();
        let kept = |s: &Shares| s.whole.lock().unwrap().is_some();
        let s = &plan.shares;
        assert!(!kept(s), "nothing made yet");
        let p0 = s.part(&plan, 3, 0).chunks();
        assert!(kept(s), "process 1 has still to make its rows");
        let p1 = s.part(&plan, 3, 1).chunks();
        assert!(!kept(s), "dropped once both are made");
        assert_eq!(s.part(&plan, 3, 0).chunks(), p0, "made once");
        assert_eq!(
            s.part(&plan, 5, 1).chunks(),
            p1,
            "the first position's rows"
        );
        assert!(!kept(s), "not made again");
        assert!(p0 + p1 > 0);
    }

    /// Threads take from both ends of one queue at once, many times: every block is taken by
    /// exactly one of them.
    #[test]
    fn racing_takers_share_the_blocks_exactly() {
        let s = Shares::new(1);
        for epoch in 1..=300u16 {
            let blocks = 64 + u32::from(epoch) % 7;
            s.open(0, epoch, blocks, 1);
            let taken: Vec<Vec<u32>> = std::thread::scope(|sc| {
                let hs: Vec<_> = (0..3)
                    .map(|t| {
                        let s = &s;
                        sc.spawn(move || {
                            let mut got = Vec::new();
                            while let Some(b) = if t == 0 {
                                s.take_front(0, epoch, 1)
                            } else {
                                s.take_back(0, epoch, 1)
                            } {
                                got.push(b);
                            }
                            got
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let mut all: Vec<u32> = taken.concat();
            all.sort_unstable();
            assert_eq!(all, (0..blocks).collect::<Vec<_>>(), "epoch {epoch}");
        }
    }
}
