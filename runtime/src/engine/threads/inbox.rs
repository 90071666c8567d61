//! What other processes write to tell one process about the data they sent it: which senders
//! wrote to it, how many records lazy senders announced, which of its own outboxes receivers
//! have finished with, and which sync it last entered.
//!
//! Every field is an atomic that other threads read or write; the methods state the ordering
//! each pairing relies on once, so that the sync code (`engine/threads/`) does not repeat it.
//!
//! Each field comes in one copy per outbox slot of the run (`RunShared::slot`: the superstep
//! modulo the run's slots, 2 or [`SLOTS`]), so that lazy senders up to that many supersteps
//! less one ahead of this process do not mix their announcements with those it is taking.
//!
//! * `writers[o]`: a bitmap of the processes that wrote to this one in the superstep of slot
//!   `o` now being synced. A sender sets its bit (Release) after it has filled its outbox;
//!   the receiver takes the whole bitmap with a swap (Acquire) and then reads those outboxes,
//!   and only those: a full sync reads p / 64 words instead of p outbox stamps, and a lazy sync
//!   never touches the outboxes of a sender that did not write to it (that sender may already
//!   be filling them for a later superstep).
//! * `records[o]`: the put and message records lazy senders announced since the run began (a
//!   sender adds after setting its bit, Release; the receiver waits until the count exceeds
//!   what it has taken by its declared count, with Acquire loads, which then see every bit of
//!   the senders counted). The receiver keeps what it has taken to itself (no write of its
//!   own to the line that its senders write).
//! * `acks[o]`: receivers add one when they no longer read an outbox this process filled in a
//!   superstep of slot `o` (Release: their reads happen before the sender refills it).
//! * `mode[o]`: `(superstep + 1) << 1 | lazy` of the last sync of a superstep of slot `o` that
//!   this process entered, stored after everything it sends in that sync is announced (Release),
//!   so a process that reads it (Acquire) knows whether the count it waits for can still grow.
//!   Supersteps are counted on from the runs before on the same state ([`mode_word`]), so the
//!   words need no reset between runs that ended well.

use crate::outbox::SLOTS;
use crate::shim::{AtomicU64, Ordering, Zero};
use crossbeam_utils::CachePadded;

/// Bits per word of the writers bitmap.
const BITS: usize = 64;

/// Words of the writers bitmap that share a cache line with the record count (the senders
/// `0 .. 64 * HEAD` mark and announce with one cache-line transfer).
const HEAD: usize = 6;

/// One slot's count and first bitmap words, and the acknowledgements of the slot before, in
/// one cache line: a lazy sync of slot o acknowledges the senders of the superstep before
/// (slot o - 1) and then announces its own records, to the same processes in a symmetric
/// exchange, so both land in one line.
#[repr(C, align(64))]
struct Head {
    records: AtomicU64,
    acks_other: AtomicU64,
    bits: [AtomicU64; HEAD],
}

/// One process's inbox (module documentation).
pub(crate) struct Inbox {
    head: [Head; SLOTS],
    /// Bitmap words `HEAD ..` by slot (runs of more than `64 * HEAD` processes).
    tail: [Box<[AtomicU64]>; SLOTS],
    mode: CachePadded<[AtomicU64; SLOTS]>,
    /// The slots the run uses (2 or `SLOTS`).
    slots: usize,
}

/// The mode word of a sync of superstep `step` of a run whose processes started with `base`
/// completed syncs (`done::Done`: the words count on across the runs of a state, as the sync
/// counts do, so that a word left by an earlier run is always lower than any of this run's;
/// `lazy`: one that waits only for its declared records).
#[inline]
pub(crate) fn mode_word(base: u64, step: u64, lazy: bool) -> u64 {
    (base + step + 1) << 1 | lazy as u64
}

impl Inbox {
    /// The inbox of a process of a run of `p` processes that uses `slots` slots.
    pub(crate) fn new(p: usize, slots: usize) -> Self {
        assert!((2..=SLOTS).contains(&slots), "2 to {SLOTS} slots");
        let head = || Head {
            records: AtomicU64::new(0),
            acks_other: AtomicU64::new(0),
            bits: std::array::from_fn(|_| AtomicU64::new(0)),
        };
        let tail = || {
            (HEAD..p.div_ceil(BITS))
                .map(|_| AtomicU64::new(0))
                .collect()
        };
        Inbox {
            head: std::array::from_fn(|_| head()),
            tail: std::array::from_fn(|_| tail()),
            mode: CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0))),
            slots,
        }
    }

    /// Bitmap word `k` of slot `o`.
    #[inline]
    fn word(&self, o: usize, k: usize) -> &AtomicU64 {
        match self.head[o].bits.get(k) {
            Some(w) => w,
            None => &self.tail[o][k - HEAD],
        }
    }

    /// Forget a previous run (no process of the run is running), but for the mode words when
    /// the new run `continues` its supersteps ([`mode_word`]). Slots beyond the run's were
    /// never written (a reused state serves runs of the same slots).
    pub(crate) fn reset(&self, continues: bool) {
        for o in 0..self.slots {
            let h = &self.head[o];
            for w in h.bits.iter().chain(self.tail[o].iter()) {
                w.zero();
            }
            h.records.zero();
            h.acks_other.zero();
            if !continues {
                self.mode[o].zero();
            }
        }
    }

    /// Process `from` has filled its outbox of slot `o` for this process.
    #[inline]
    pub(crate) fn mark(&self, o: usize, from: usize) {
        self.word(o, from / BITS)
            .fetch_or(1 << (from % BITS), Ordering::Release);
    }

    /// Take the senders marked for slot `o` (they are cleared), in pid order, into `out`.
    #[inline]
    pub(crate) fn take_writers(&self, o: usize, out: &mut Vec<u32>) {
        let words = self.head[o].bits.iter().chain(self.tail[o].iter());
        for (k, w) in words.enumerate() {
            if w.load(Ordering::Relaxed) == 0 {
                continue;
            }
            let mut bits = w.swap(0, Ordering::Acquire);
            while bits != 0 {
                out.push((k * BITS) as u32 + bits.trailing_zeros());
                bits &= bits - 1;
            }
        }
    }

    /// A lazy sender announces `n` records for slot `o` (after marking itself).
    #[inline]
    pub(crate) fn announce(&self, o: usize, n: u64) {
        self.head[o].records.fetch_add(n, Ordering::Release);
    }

    /// Records announced for slot `o` since the run began.
    #[inline]
    pub(crate) fn announced(&self, o: usize) -> u64 {
        self.head[o].records.load(Ordering::Acquire)
    }

    /// A receiver no longer reads the outbox this process filled for it in a superstep of
    /// slot `o`.
    #[inline]
    pub(crate) fn ack(&self, o: usize) {
        self.head[self.next(o)]
            .acks_other
            .fetch_add(1, Ordering::Release);
    }

    /// Acknowledgements received for slot `o` since the run began.
    #[inline]
    pub(crate) fn acks(&self, o: usize) -> u64 {
        self.head[self.next(o)].acks_other.load(Ordering::Acquire)
    }

    /// This process enters the sync of superstep `step`, of slot `o` (everything it sends
    /// there announced).
    #[inline]
    pub(crate) fn enter(&self, o: usize, base: u64, step: u64, lazy: bool) {
        self.mode[o].store(mode_word(base, step, lazy), Ordering::Release);
    }

    /// The mode word of the last sync of slot `o` this process entered (0: none).
    #[inline]
    pub(crate) fn mode(&self, o: usize) -> u64 {
        self.mode[o].load(Ordering::Acquire)
    }

    /// The slot after `o` (whose head line holds the acknowledgements of `o`).
    #[inline(always)]
    fn next(&self, o: usize) -> usize {
        if o + 1 == self.slots { 0 } else { o + 1 }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn writers_are_taken_once_in_pid_order() {
        let inbox = Inbox::new(600, 2);
        for from in [129, 0, 64, 3, 64, 599, 448] {
            inbox.mark(1, from);
        }
        let mut got = Vec::new();
        inbox.take_writers(1, &mut got);
        assert_eq!(got, vec![0, 3, 64, 129, 448, 599]);
        got.clear();
        inbox.take_writers(1, &mut got);
        inbox.take_writers(0, &mut got);
        assert!(got.is_empty());
    }

    #[test]
    fn mode_words_order_supersteps_and_mark_lazy_syncs() {
        assert!(mode_word(0, 3, false) < mode_word(0, 3, true));
        assert!(mode_word(0, 3, true) < mode_word(0, 4, false));
        assert_eq!(mode_word(2, 3, true), mode_word(0, 5, true));
        let inbox = Inbox::new(2, 3);
        inbox.enter(2, 0, 5, true);
        assert_eq!(inbox.mode(2), mode_word(0, 5, true));
        assert_eq!(inbox.mode(0), 0);
    }
}
