//! [`Riders`]: by process and destination, the barrier round whose line carries small puts to
//! that destination (`barrier.rs`, "Riding puts").
//!
//! Every put reads its process's row, so the rows live where no other data does: each row on
//! cache lines of its own, in an allocation aligned to them. A row in a small heap block of its
//! own shared its line with whatever the allocator put next to it; where that was written by
//! another core every superstep, each put paid a cache-line transfer to read one byte
//! (docs/benchmarks.md, "Lazy syncs").

use crossbeam_utils::CachePadded;

/// In a [`Riders`] row: no line of the sender is read by that destination alone.
pub const NO_RIDE: u8 = u8::MAX;

/// Bytes of one padded chunk of a row.
const CHUNK: usize = 128;

/// By process, then destination: the barrier round in which puts to it can ride, or
/// [`NO_RIDE`]. Fixed when the barrier is made; only read while processes run.
pub struct Riders {
    /// Chunks per row.
    per_row: usize,
    /// Process `i`'s row at chunks `i * per_row ..`, destination `d` at byte `d % CHUNK` of
    /// chunk `d / CHUNK` of it.
    chunks: Box<[CachePadded<[u8; CHUNK]>]>,
}

impl Riders {
    /// The table of `p` processes, with no puts riding anywhere.
    pub fn none(p: usize) -> Self {
        let per_row = p.div_ceil(CHUNK).max(1);
        Riders {
            per_row,
            chunks: (0..p * per_row)
                .map(|_| CachePadded::new([NO_RIDE; CHUNK]))
                .collect(),
        }
    }

    /// The round in which process `pid`'s puts to `dest` ride, or [`NO_RIDE`].
    #[inline(always)]
    pub fn round(&self, pid: usize, dest: usize) -> u8 {
        self.chunks[pid * self.per_row + dest / CHUNK][dest % CHUNK]
    }

    /// Set the round of process `pid`'s puts to `dest`.
    pub fn set(&mut self, pid: usize, dest: usize, round: u8) {
        self.chunks[pid * self.per_row + dest / CHUNK][dest % CHUNK] = round;
    }

    /// The destination whose puts from process `pid` ride in round `round`, if any (among the
    /// `p` processes).
    pub fn reader(&self, pid: usize, round: usize, p: usize) -> Option<usize> {
        (0..p).find(|&d| self.round(pid, d) as usize == round)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (process, destination) pair has its own byte, across chunk boundaries, and the
    /// rows are cache-line aligned.
    #[test]
    fn every_pair_keeps_its_round() {
        for p in [1, 2, 3, 127, 128, 129, 300] {
            let mut r = Riders::none(p);
            for i in 0..p {
                for d in 0..p {
                    if (i + d) % 3 == 0 {
                        r.set(i, d, ((i * 7 + d) % 200) as u8);
                    }
                }
            }
            for i in 0..p {
                let row = &r.chunks[i * r.per_row];
                assert_eq!(
                    row as *const _ as usize % align_of::<CachePadded<[u8; CHUNK]>>(),
                    0
                );
                for d in 0..p {
                    let want = if (i + d) % 3 == 0 {
                        ((i * 7 + d) % 200) as u8
                    } else {
                        NO_RIDE
                    };
                    assert_eq!(r.round(i, d), want, "p {p}, {i} -> {d}");
                }
            }
            let i = p / 2;
            match (0..p).find(|&d| (i + d) % 3 == 0) {
                Some(d) => {
                    let k = ((i * 7 + d) % 200) as usize;
                    assert_eq!(r.reader(i, k, p).map(|d| r.round(i, d)), Some(k as u8));
                }
                None => assert_eq!(r.reader(i, 0, p), None),
            }
        }
    }
}
