//! The guard that keeps [`HpSpmv`](super::HpSpmv)'s direct reads of remote `x` sound.
//!
//! The high-performance fan-out copies `x` entries straight out of their owners' memory with
//! `direct_get`, which requires that the owner does not write them in the same superstep. A
//! process cannot know locally what the others do in a superstep, so the plan carries one
//! cache line per process, shared by every process of the run, with two stamps (superstep + 1,
//! 0 for never):
//!
//! * `written` — the last superstep in which the process handed out its `x` for writing;
//! * `reading` — the last superstep in which the process started reading remote `x`.
//!
//! A writer stores its `written` stamp, then loads the `reading` stamp of every process that
//! reads its `x`; a reader stores its `reading` stamp, then loads the `written` stamp of every
//! owner it reads from. All four accesses are `SeqCst`, so in the single total order of
//! sequentially consistent operations one of the two stores comes first and the other side's
//! load sees it (the store-buffering outcome, both loads missing both stores, is forbidden):
//! whenever a write and a read of the same `x` fall in the same superstep, at least one side
//! sees the conflict and fails with an error before touching the data. Stamps of different
//! supersteps never conflict: the barrier between them orders all accesses.
//!
//! Stamps are only comparable within one run, so a process claims its line for the lifetime of
//! its `HpSpmv` (a second claim, e.g. from another run using the same plan, is refused) and
//! clears the stamps when claiming, before the registration superstep that precedes any read.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};

#[repr(align(64))]
#[derive(Default)]
struct Line {
    claimed: AtomicBool,
    written: AtomicU64,
    reading: AtomicU64,
}

/// One line per process; see the module docs.
pub(crate) struct HpGuard {
    lines: Box<[Line]>,
}

impl HpGuard {
    pub(crate) fn new(p: usize) -> Self {
        HpGuard {
            lines: (0..p).map(|_| Line::default()).collect(),
        }
    }

    /// Claims `pid`'s line and clears its stamps; `false` if it is claimed already.
    pub(crate) fn claim(&self, pid: usize) -> bool {
        let l = &self.lines[pid];
        if l.claimed.swap(true, SeqCst) {
            return false;
        }
        l.written.store(0, SeqCst);
        l.reading.store(0, SeqCst);
        true
    }

    pub(crate) fn release(&self, pid: usize) {
        self.lines[pid].claimed.store(false, SeqCst);
    }

    /// `pid` is about to write its `x` in superstep `step`; `Err(t)` if reader `t` (one of
    /// `readers`) reads it in the same superstep.
    pub(crate) fn begin_write(&self, pid: usize, step: u64, readers: &[u32]) -> Result<(), u32> {
        self.lines[pid].written.store(step + 1, SeqCst);
        match readers
            .iter()
            .find(|&&t| self.lines[t as usize].reading.load(SeqCst) == step + 1)
        {
            Some(&t) => Err(t),
            None => Ok(()),
        }
    }

    /// `pid` is about to read the `x` of `sources` in superstep `step`; `Err(s)` if owner `s`
    /// writes it in the same superstep.
    pub(crate) fn begin_read(&self, pid: usize, step: u64, sources: &[u32]) -> Result<(), u32> {
        self.lines[pid].reading.store(step + 1, SeqCst);
        match sources
            .iter()
            .find(|&&s| self.lines[s as usize].written.load(SeqCst) == step + 1)
        {
            Some(&s) => Err(s),
            None => Ok(()),
        }
    }
}

/// A clone is a fresh guard (a cloned plan serves its own runs).
impl Clone for HpGuard {
    fn clone(&self) -> Self {
        HpGuard::new(self.lines.len())
    }
}

impl std::fmt::Debug for HpGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HpGuard({} lines)", self.lines.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_superstep_conflicts_other_supersteps_do_not() {
        let g = HpGuard::new(2);
        assert!(g.claim(0) && g.claim(1));
        assert!(!g.claim(0), "a second claim is refused");
        assert_eq!(g.begin_read(1, 4, &[0]), Ok(()));
        assert_eq!(g.begin_write(0, 4, &[1]), Err(1));
        assert_eq!(g.begin_write(0, 5, &[1]), Ok(()));
        assert_eq!(g.begin_read(1, 5, &[0]), Err(0));
        assert_eq!(g.begin_read(1, 6, &[0]), Ok(()));
        g.release(0);
        assert!(g.claim(0));
        assert_eq!(
            g.begin_read(1, 7, &[0]),
            Ok(()),
            "claiming cleared the stamps"
        );
    }

    /// Two threads race a write and a read in the same superstep many times: at least one of
    /// them must see the other every time.
    #[test]
    fn racing_write_and_read_never_both_miss() {
        for step in 0..2000u64 {
            let g = HpGuard::new(2);
            let (w, r) = std::thread::scope(|s| {
                let w = s.spawn(|| g.begin_write(0, step, &[1]).is_err());
                let r = s.spawn(|| g.begin_read(1, step, &[0]).is_err());
                (w.join().unwrap(), r.join().unwrap())
            });
            assert!(w || r, "superstep {step}: both sides missed the conflict");
        }
    }
}
