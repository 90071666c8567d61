//! [`Riders`]: by process and destination, the barrier round whose line carries small puts to
//! that destination (`barrier.rs`, "Riding puts").
//!
//! Every put reads its process's row, so the table is [`Isolated`]: on cache lines that no
//! other heap block shares (that module says why).

use crate::isolated::Isolated;

/// In a [`Riders`] row: no line of the sender is read by that destination alone.
pub const NO_RIDE: u8 = u8::MAX;

/// By process, then destination: the barrier round in which puts to it can ride, or
/// [`NO_RIDE`]. Fixed when the barrier is made; only read while processes run.
pub struct Riders {
    p: usize,
    /// Process `i`'s round for destination `d` at `i * p + d`.
    rounds: Isolated<u8>,
}

impl Riders {
    /// The table of `p` processes, with no puts riding anywhere.
    pub fn none(p: usize) -> Self {
        Riders {
            p,
            rounds: Isolated::new(p * p, NO_RIDE),
        }
    }

    /// The round in which process `pid`'s puts to `dest` ride, or [`NO_RIDE`].
    #[inline(always)]
    pub fn round(&self, pid: usize, dest: usize) -> u8 {
        self.rounds[pid * self.p + dest]
    }

    /// Set the round of process `pid`'s puts to `dest`.
    pub fn set(&mut self, pid: usize, dest: usize, round: u8) {
        self.rounds[pid * self.p + dest] = round;
    }

    /// The destination whose puts from process `pid` ride in round `round`, if any.
    pub fn reader(&self, pid: usize, round: usize) -> Option<usize> {
        (0..self.p).find(|&d| self.round(pid, d) as usize == round)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (process, destination) pair has its own byte.
    #[test]
    fn every_pair_keeps_its_round() {
        for p in [1, 2, 3, 129, 300] {
            let mut r = Riders::none(p);
            for i in 0..p {
                for d in 0..p {
                    if (i + d) % 3 == 0 {
                        r.set(i, d, ((i * 7 + d) % 200) as u8);
                    }
                }
            }
            for i in 0..p {
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
                    let k = (i * 7 + d) % 200;
                    assert_eq!(r.reader(i, k).map(|d| r.round(i, d)), Some(k as u8));
                }
                None => assert_eq!(r.reader(i, 0), None),
            }
        }
    }
}
