//! Lanes: how a lazy sync of a small run tells a receiver what it sent, in one cache line.
//!
//! In a run of at most [`LANE_P`] processes, every sender has one lane per receiver and
//! outbox slot (`ctx::RunShared::slot`: the superstep modulo the run's slots S, 2 or 3): a
//! cache line that only the sender writes and only the receiver reads. In its lazy sync of
//! superstep `s` (slot `o`) a sender publishes, for each destination it
//! wrote to, the number of records it sent there, whether it took that destination's records
//! of superstep `s - 1` (an acknowledgement that rides along, below), and, when they are all
//! short puts that fit, the put records themselves; then the stamp `s + 1` (Release). The
//! receiver polls the stamps of its lanes (Acquire) until the records of the stamped ones make
//! its declared count, and delivers inline records from a copy of the line: a one-word
//! exchange moves one line each way, with no read-modify-write of a shared line (the inbox
//! path of larger runs costs three atomic additions on the receiver's line and a read of the
//! sender's outbox).
//!
//! ## Why the receiver reads a line the sender no longer writes
//!
//! A sender rewrites its lane of slot `o` to a receiver in superstep `s + S` only after that
//! receiver has finished with the records of superstep `s`: the sender's sync `s + S - 1`
//! waits for the receiver's acknowledgement, which is either an explicit one in the receiver's
//! inbox (`Inbox::ack`) or, when the receiver writes to the sender in superstep `s + 1`, the
//! `acked` bit of the receiver's own lane of that superstep, published after it cleared its
//! message queue of superstep `s` (the sender reads it in its sync `s + 1`). A lane's stamp therefore shows `s + 1` from the sender's
//! publication until the receiver's sync `s` has read it, and an older stamp otherwise.
//!
//! ## Sizes
//!
//! A run of `p` processes has `S p²` lanes of one cache line each, padded to 128 bytes (64 KiB
//! at `p = 16` with two slots, 96 KiB with three); larger runs use the inbox path only.

use crate::shim::{AtomicU64, Ordering, Zero};

/// The largest run that uses lanes.
pub(crate) const LANE_P: usize = 16;

/// Words of put records a lane carries inline (stamp + info + inline = 64 bytes).
pub(crate) const LANE_WORDS: usize = 6;

// A lane carries every outbox whose put records fit in the outbox's own first line.
const _: () = assert!(crate::outbox::INLINE <= LANE_WORDS);

/// Bits of a lane's info word holding the record count.
const COUNT_BITS: u32 = 40;
/// The info bit of an acknowledgement (`Published::acked`).
const ACKED: u64 = 1 << 48;

/// What a sender published in a lane (see [`Lane::read`]).
pub(crate) struct Published {
    /// Puts and messages sent to the lane's receiver in the lane's superstep.
    pub(crate) records: u64,
    /// The sender took the receiver's records of the superstep before.
    pub(crate) acked: bool,
    /// The records are all short puts, copied into the caller's buffer: this many words of
    /// it (`None`: read them from the sender's outbox).
    pub(crate) inline: Option<usize>,
}

/// One lane (module documentation). Aligned to 128 bytes, the unit of the adjacent-line
/// prefetchers of x86 cores (as crossbeam's `CachePadded`): a lane then shares no prefetched
/// pair of lines with a lane another process writes.
#[repr(C, align(128))]
pub(crate) struct Lane {
    /// 1 + the superstep whose records the lane describes (0: none yet).
    stamp: AtomicU64,
    /// Record count (low [`COUNT_BITS`] bits), inline words + 1 (4 bits above; 0: not
    /// inline), [`ACKED`].
    info: AtomicU64,
    words: [AtomicU64; LANE_WORDS],
}

impl Lane {
    fn new() -> Self {
        Lane {
            stamp: AtomicU64::new(0),
            info: AtomicU64::new(0),
            words: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// The sender publishes `records` records of the superstep whose stamp is `stamp`
    /// (`inline`: their put records, at most [`LANE_WORDS`] words). Only the lane's sender
    /// calls this, once the receiver has finished with the lane's last contents (module
    /// documentation).
    #[inline]
    pub(crate) fn publish(&self, stamp: u64, records: u64, acked: bool, inline: Option<&[u64]>) {
        debug_assert!(records < 1 << COUNT_BITS, "2^40 records take 16 TiB");
        let mut info = records | if acked { ACKED } else { 0 };
        if let Some(words) = inline {
            debug_assert!(words.len() <= LANE_WORDS);
            for (slot, &w) in self.words.iter().zip(words) {
                slot.store(w, Ordering::Relaxed);
            }
            info |= (words.len() as u64 + 1) << COUNT_BITS;
        }
        self.info.store(info, Ordering::Relaxed);
        // Release: a receiver that sees the stamp sees the info and words above.
        self.stamp.store(stamp, Ordering::Release);
    }

    /// The stamp of the lane's last publication (Acquire: a caller that sees a stamp may
    /// [`read`](Self::read) what was published with it).
    #[inline]
    pub(crate) fn stamp(&self) -> u64 {
        self.stamp.load(Ordering::Acquire)
    }

    /// The record count published with the stamp last seen by [`stamp`](Self::stamp).
    #[inline]
    pub(crate) fn records(&self) -> u64 {
        self.info.load(Ordering::Relaxed) & ((1 << COUNT_BITS) - 1)
    }

    /// What was published with the stamp last seen by [`stamp`](Self::stamp); inline put
    /// records are copied into `buf`.
    #[inline]
    pub(crate) fn read(&self, buf: &mut [u64; LANE_WORDS]) -> Published {
        let info = self.info.load(Ordering::Relaxed);
        let n = ((info >> COUNT_BITS) & 0xF) as usize;
        let inline = n.checked_sub(1);
        if let Some(n) = inline {
            for (b, w) in buf.iter_mut().zip(&self.words[..n]) {
                *b = w.load(Ordering::Relaxed);
            }
        }
        Published {
            records: info & ((1 << COUNT_BITS) - 1),
            acked: info & ACKED != 0,
            inline,
        }
    }
}

/// The lanes of a run (module documentation).
pub(crate) struct Lanes {
    p: usize,
    /// Lanes per sender and receiver: one per outbox slot of the run.
    slots: usize,
    lanes: Box<[Lane]>,
}

impl Lanes {
    /// Whether a run of `p` processes is small enough to use lanes.
    pub(crate) fn fits(p: usize) -> bool {
        p <= LANE_P
    }

    /// The lanes of a run of `p` processes that uses `slots` outbox slots, if it is small
    /// enough to use them.
    pub(crate) fn for_run(p: usize, slots: usize) -> Option<Self> {
        Self::fits(p).then(|| Lanes {
            p,
            slots,
            lanes: (0..slots * p * p).map(|_| Lane::new()).collect(),
        })
    }

    /// The lane of slot `o` from `from` to `to`.
    #[inline]
    pub(crate) fn get(&self, from: usize, to: usize, o: usize) -> &Lane {
        &self.lanes[(from * self.p + to) * self.slots + o]
    }

    /// Forget a previous run (no process of the run is running).
    pub(crate) fn reset(&self) {
        for lane in self.lanes.iter() {
            lane.stamp.zero();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_lane_carries_counts_acknowledgements_and_inline_records() {
        let lanes = Lanes::for_run(3, 3).expect("small run");
        let lane = lanes.get(2, 1, 1);
        assert_eq!(lane.stamp(), 0);
        lane.publish(8, 2, true, Some(&[5, 6, 7]));
        assert_eq!(lane.stamp(), 8);
        let mut buf = [0; LANE_WORDS];
        let got = lane.read(&mut buf);
        assert_eq!((got.records, got.acked, got.inline), (2, true, Some(3)));
        assert_eq!(&buf[..3], &[5, 6, 7]);
        lane.publish(10, 1 << 39, false, None);
        let got = lane.read(&mut buf);
        assert_eq!((got.records, got.acked, got.inline), (1 << 39, false, None));
        lane.publish(12, 0, false, Some(&[]));
        assert_eq!(lane.read(&mut buf).inline, Some(0));
        assert_eq!(lanes.get(1, 2, 1).stamp(), 0, "lanes are per direction");
        assert_eq!(lanes.get(2, 1, 2).stamp(), 0, "lanes are per slot");
        lanes.reset();
        assert_eq!(lane.stamp(), 0);
        assert!(Lanes::for_run(LANE_P + 1, 2).is_none());
    }
}
