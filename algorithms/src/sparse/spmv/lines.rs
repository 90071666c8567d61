//! Where a [`SharedSpmv`](super::SharedSpmv) multiply puts each owned row's sum: the rows of
//! `y` whose cache line belongs to one process go straight to `y`; the rows of a line that
//! several processes own go first to a buffer of each owner's own, and after one more sync
//! each such line is written whole by one process, where that pays.
//!
//! **Why.** A partition gives each process the rows that suit its nonzeros, not whole cache
//! lines of `y`: on most of the shared matrices nearly every line of `y` holds rows of both
//! processes. Where a process writes its rows in an order far from `y`'s (its matrix sorted by
//! row length over wide windows, `sell.rs`: a power-law matrix), both cores write rows all
//! over `y` at once and take each line from the other at nearly every write; the buffer, its
//! extra sync and its copy cost less than that. Where the order follows `y`'s (windows of a
//! few lines), the two processes sweep `y` from opposite ends (`share.rs`), a line moves about
//! once, and the buffer costs more than it saves: there every row goes to `y`. The figures
//! are in docs/benchmarks.md ("The shared multiply's writes").
//!
//! **Codes.** A row's destination is one `u32`: below `rows`, the row of `y` itself; from
//! `rows` on, `rows + k` for position `k` of the buffer. The owner's matrix keeps the codes as
//! its row names (`Sell::renamed`), so a block taken by another process writes where the
//! owner would.

use super::SpmvPlan;
use std::sync::atomic::{AtomicU64, Ordering};

/// Rows of `y` per cache line.
const LINE: usize = 8;

/// The mean distance in `y`, in rows, between the rows a process writes one after the other,
/// from which its writes count as spread over `y` (see the module docs): SELL windows of 128
/// rows keep it at a few dozen rows, windows of thousands of rows put it in the hundreds;
/// measured where the buffer pays and where it does not in docs/benchmarks.md.
const SPREAD: f64 = 256.0;

/// The destinations of the owned rows of every process of a plan, and who writes which mixed
/// lines of `y` (see the module docs). Made once per plan.
pub(crate) struct Lines {
    /// Rows of `y`: codes below are rows, from here on buffer positions.
    rows: u32,
    /// Per process, per position in its `y_owned`: the code of that row.
    codes: Vec<Vec<u32>>,
    /// Per process, the rows of the mixed lines it writes after the second sync and where
    /// their sums are in the buffer, by row.
    scatter: Vec<Vec<(u32, u32)>>,
    /// Positions of one half of the buffer (each process's stretch starts at a multiple of a
    /// line).
    len: usize,
}

impl Lines {
    /// The layout of `plan`: through the buffer where some process writes its rows spread
    /// over `y` ([`spread`]), else every row to `y`.
    pub(crate) fn new(plan: &SpmvPlan) -> Lines {
        // Codes are `u32`: the buffer (at most the rows, each stretch padded to a line) must
        // number past the rows within it, else every row goes to `y`.
        let room = (plan.rows.checked_mul(2))
            .and_then(|r| r.checked_add(LINE.checked_mul(plan.p())?))
            .is_some_and(|most| most <= u32::MAX as usize);
        Lines::layout(plan, room && spread(plan))
    }

    /// The layout with the rows of mixed lines through the buffer (`through`), or none: the
    /// lines of `y` that rows of more than one process share, each process's rows in them
    /// numbered into its stretch of the buffer in its `y_owned` order, and the mixed lines
    /// cut into `p` runs of consecutive lines, one per writer.
    fn layout(plan: &SpmvPlan, through: bool) -> Lines {
        let (rows, p) = (plan.rows, plan.p());
        let mut owner = vec![u32::MAX; rows];
        for (s, l) in plan.procs.iter().enumerate() {
            for &r in &l.y_owned {
                owner[r as usize] = s as u32;
            }
        }
        let mixed: Vec<bool> = owner
            .chunks(LINE)
            .map(|c| through && c.iter().any(|&o| o != c[0]))
            .collect();
        let mut pos = vec![u32::MAX; rows];
        let mut len = 0usize;
        let codes = plan
            .procs
            .iter()
            .map(|l| {
                let codes = l
                    .y_owned
                    .iter()
                    .map(|&r| {
                        if mixed[r as usize / LINE] {
                            pos[r as usize] = len as u32;
                            len += 1;
                            rows as u32 + pos[r as usize]
                        } else {
                            r
                        }
                    })
                    .collect();
                len = len.next_multiple_of(LINE);
                codes
            })
            .collect();
        let lines: Vec<usize> = (0..mixed.len()).filter(|&i| mixed[i]).collect();
        let scatter = (0..p)
            .map(|s| {
                let (a, b) = (s * lines.len() / p, (s + 1) * lines.len() / p);
                lines[a..b]
                    .iter()
                    .flat_map(|&i| i * LINE..((i + 1) * LINE).min(rows))
                    // (A row nobody owns, were there one, is nobody's to write.)
                    .filter(|&r| pos[r] != u32::MAX)
                    .map(|r| (r as u32, pos[r]))
                    .collect()
            })
            .collect();
        Lines {
            rows: rows as u32,
            codes,
            scatter,
            len,
        }
    }

    /// The codes of process `s`'s owned rows, in its `y_owned` order.
    pub(crate) fn codes(&self, s: usize) -> &[u32] {
        &self.codes[s]
    }

    /// Whether some rows go through the buffer: the multiply then takes a second superstep.
    pub(crate) fn any_mixed(&self) -> bool {
        self.len > 0
    }

    /// The buffer of one set of vectors: two halves, one for the multiplies of even number
    /// and one for the odd (see [`Lines::half`]); every position zero.
    pub(crate) fn buffer(&self) -> Box<[AtomicU64]> {
        (0..2 * self.len).map(|_| AtomicU64::new(0)).collect()
    }

    /// The half of the buffer multiply number `count` uses. A process that has written its
    /// mixed rows of a multiply may start the next before the others have read them (the
    /// multiply ends at the writes of `y`, with no sync after them); its next multiply
    /// writes the other half, and it cannot get to the one after that before every process
    /// has passed that next multiply's first sync, after its reads.
    pub(crate) fn half(&self, count: u64) -> usize {
        (count % 2) as usize * self.len
    }

    /// Where a sum with destination `code` goes: `Ok(row of y)` or `Err(buffer position)`.
    #[inline(always)]
    pub(crate) fn target(&self, code: u32) -> Result<usize, usize> {
        match code.checked_sub(self.rows) {
            None => Ok(code as usize),
            Some(k) => Err(k as usize),
        }
    }

    /// The rows of the mixed lines process `s` writes, with their buffer positions.
    pub(crate) fn scatter(&self, s: usize) -> &[(u32, u32)] {
        &self.scatter[s]
    }
}

/// Whether some process of `plan` writes its owned rows spread over `y`: a mean distance
/// above [`SPREAD`] rows between consecutive writes, in the order its matrix writes them.
fn spread(plan: &SpmvPlan) -> bool {
    plan.procs.iter().any(|l| {
        let written = l.own.slot_rows().iter().filter(|&&r| r != u32::MAX);
        let global = written.map(|&r| l.y_owned[l.dest[r as usize] as usize] as f64);
        let (mut prev, mut jumps, mut n) = (None, 0.0, 0usize);
        for g in global {
            if let Some(q) = prev {
                jumps += f64::abs(g - q);
                n += 1;
            }
            prev = Some(g);
        }
        n > 0 && jumps / n as f64 > SPREAD
    })
}

/// Writes `v` at buffer position `k`. The buffer's positions are plain words to the hardware
/// (relaxed atomics compile to plain loads and stores); who may write which, and when the
/// others may read it, is the multiply's (the syncs order them).
#[inline(always)]
pub(crate) fn store(buf: &[AtomicU64], k: usize, v: f64) {
    buf[k].store(v.to_bits(), Ordering::Relaxed);
}

/// Reads buffer position `k`.
#[inline(always)]
pub(crate) fn load(buf: &[AtomicU64], k: usize) -> f64 {
    f64::from_bits(buf[k].load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sparse::{CooMatrix, Distribution};

    /// Three lines of `y` at p = 2: process 0's alone, both processes' in turn, process 1's
    /// alone (and a last line of four rows, both's). Through the buffer, clean rows keep their
    /// rows; the rows of mixed lines get positions in their owner's stretch, which starts at a
    /// line; the two writers cover every row of the mixed lines once, whole lines each. The
    /// rows are written in order (one nonzero each), so the plan itself keeps every row in `y`.
    #[test]
    fn mixed_lines_go_through_the_buffer_and_are_written_whole_once() {
        let rows = 28;
        let owner = |i: usize| match i {
            0..8 => 0,
            8..16 | 24.. => (i % 2) as u32,
            _ => 1,
        };
        let a = CooMatrix::new(rows, 2, (0..rows).map(|i| (i, i % 2, 1.0))).unwrap();
        let d = Distribution {
            p: 2,
            nz_part: a.row_idx.iter().map(|&i| owner(i as usize)).collect(),
            x_owner: vec![0, 1],
            y_owner: (0..rows).map(owner).collect(),
        };
        let plan = SpmvPlan::new(&a, &d).unwrap();
        assert!(!spread(&plan) && !Lines::new(&plan).any_mixed());
        let lines = Lines::layout(&plan, true);
        assert!(lines.any_mixed());
        let mut written = vec![0; rows];
        for s in 0..2 {
            let l = &plan.procs[s];
            for (q, &code) in lines.codes(s).iter().enumerate() {
                let r = l.y_owned[q] as usize;
                match lines.target(code) {
                    Ok(row) => {
                        assert_eq!(row, r);
                        assert!(
                            !(8..16).contains(&r) && r < 24,
                            "row {r} is in a mixed line"
                        );
                    }
                    Err(k) => {
                        assert!(
                            (8..16).contains(&r) || r >= 24,
                            "row {r} is in a clean line"
                        );
                        // Process 1's stretch starts past process 0's, at a line.
                        assert_eq!(k >= 8, s == 1, "row {r} at {k}");
                    }
                }
            }
            for &(r, k) in lines.scatter(s) {
                written[r as usize] += 1;
                let o = owner(r as usize) as usize;
                let q = plan.procs[o].y_owned.iter().position(|&y| y == r).unwrap();
                assert_eq!(lines.target(lines.codes(o)[q]), Err(k as usize));
            }
        }
        let want: Vec<i32> = (0..rows)
            .map(|r| i32::from((8..16).contains(&r) || r >= 24))
            .collect();
        assert_eq!(written, want);
        // Each writer has whole lines: one each.
        assert_eq!((lines.scatter(0).len(), lines.scatter(1).len()), (8, 4));
        assert_eq!(lines.buffer().len(), 2 * 16);
    }
}
