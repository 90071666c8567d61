//! Which rows of `y` each process of a [`SharedSpmv`](super::SharedSpmv) multiply computes:
//! whole rows, whole cache lines of `y` each.
//!
//! **Why.** A partition gives each process the rows that suit its nonzeros, not whole cache
//! lines of `y`: on most of the shared matrices many lines of `y` hold rows of both processes
//! (at p = 2: most lines of a mesh or a power-law graph, a tenth of a road network's), and
//! two cores writing rows of one line take it from each other at nearly every write, however
//! they order their writes. And a row whose nonzeros the partition splits is summed in two
//! parts, one sent to the other as a message. Both serve processes with memories of their
//! own; processes that share `x` and `y` can each read any `x_j` where it lies. So the shared
//! multiply gives each line of `y` to one process, the one that owns most of its rows in the
//! plan (ties to the one with the fewest nonzeros so far: where nearly every line is split,
//! ties are many, and the lower pid would take them all), so that the partition's rows and
//! their `x` reads stay where they were except in lines it split; that process computes the
//! line's rows whole, from all
//! their nonzeros: no partial sums, no messages, no line written by two processes (except by
//! a process that takes another's block, `share.rs`).
//!
//! **Lines.** Which rows share a line depends on where `y` lies: row `r` is in line
//! `(r + o) / 8` with `o` the position of `y[0]` in its line (`(address mod 64) / 8`). The
//! [`Split`] is made once per plan, for the `o` of the first `y` multiplied (an allocator gives
//! large vectors the same `o` as a rule), from the matrix as a whole ([`Whole`], assembled from
//! the plan's parts and dropped once every process has made its rows). A `y` elsewhere in its
//! lines is multiplied with the same rows: correct, the lines' boundaries then falling between
//! rows of two processes where the owner changes (a few percent slower on matrices whose
//! lines were mostly shared); one split rather than one per `o`, each a copy of the matrix.
//!
//! **Sums.** Each row is summed in the order of its columns (entries of one column, where the
//! matrix repeats one, by their bits), whatever the partition: the shared multiply's `y` is
//! the same for every plan of a matrix and every number of processes, bit for bit.

use super::sell::Sell;
use super::{LocalSpmv, SpmvPlan};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Rows of `y` per cache line (8-byte entries in 64-byte lines).
pub(crate) const LINE: usize = 8;

/// The matrix of a plan, whole, in CRS over the global rows and columns: each row's entries
/// by column.
pub(crate) struct Whole {
    ptr: Vec<usize>,
    col: Vec<u32>,
    val: Vec<f64>,
}

impl Whole {
    /// The matrix of `plan`, from its parts.
    pub(crate) fn new(plan: &SpmvPlan) -> Whole {
        let mut e: Vec<(u32, u32, f64)> = Vec::new();
        for local in &plan.procs {
            let rows = global_rows(plan, local);
            let cols = super::shared::global_cols(plan, local);
            e.extend(
                local
                    .own
                    .entries()
                    .chain(local.other.entries())
                    .map(|(r, c, v)| (rows[r as usize], cols[c as usize], v)),
            );
        }
        // (Entries of one row and column, where the matrix has several, by their bits: the
        // order does not depend on the partition either.)
        e.sort_unstable_by_key(|&(r, c, v)| (r, c, v.to_bits()));
        let mut ptr = vec![0usize; plan.rows + 1];
        for &(r, _, _) in &e {
            ptr[r as usize + 1] += 1;
        }
        for r in 0..plan.rows {
            ptr[r + 1] += ptr[r];
        }
        Whole {
            ptr,
            col: e.iter().map(|&(_, c, _)| c).collect(),
            val: e.iter().map(|&(_, _, v)| v).collect(),
        }
    }

    /// Nonzeros of the rows `rows`.
    #[cfg(test)]
    pub(crate) fn nnz(&self, rows: &[u32]) -> usize {
        rows.iter()
            .map(|&r| self.ptr[r as usize + 1] - self.ptr[r as usize])
            .sum()
    }

    /// The rows `rows` (ascending) in SELL over the global columns, each named by its global
    /// row, for a multiply on the whole `x` of `cols` entries ([`Sell::multiply_whole_chunks`]).
    pub(crate) fn sell(&self, rows: &[u32], cols: usize) -> Sell {
        let mut ptr = Vec::with_capacity(rows.len() + 1);
        let (mut col, mut val) = (Vec::new(), Vec::new());
        ptr.push(0u32);
        for &r in rows {
            let e = self.ptr[r as usize]..self.ptr[r as usize + 1];
            col.extend_from_slice(&self.col[e.clone()]);
            val.extend_from_slice(&self.val[e]);
            // (A process's nonzeros fit in u32: its local matrix counts them in u32 too.)
            ptr.push(u32::try_from(col.len()).expect("a process's nonzeros fit in u32"));
        }
        // Local rows 0.. and the global columns; padding reads column 0 until `renamed` gives
        // it real columns, and names each row by its global row.
        let identity: Vec<u32> = (0..cols as u32).collect();
        Sell::new(0, &ptr, &col, &val, 0).renamed(&identity, rows)
    }
}

/// The global row of each local row of `local`, a part of `plan`: owned rows by `y_owned`,
/// the others by where their partial sums go (the owner's receive slot, `build.rs`'s
/// `fan_in`).
fn global_rows(plan: &SpmvPlan, local: &LocalSpmv) -> Vec<u32> {
    let mut rows = Vec::with_capacity(local.dest.len());
    for (r, &d) in local.dest.iter().enumerate() {
        if r < local.own_rows {
            rows.push(local.y_owned[d as usize]);
            continue;
        }
        let o = local
            .outs
            .iter()
            .find(|o| (o.start..o.start + o.len).contains(&d))
            .expect("every other row is in a message");
        let owner = &plan.procs[o.to as usize];
        let slot = (o.offset + d - o.start) as usize;
        rows.push(owner.y_owned[owner.recv_to_y[slot] as usize]);
    }
    rows
}

/// The rows each process computes for vectors `y` whose first entry is at position `o` of its
/// cache line (see the module docs), and each process's matrix of them, made by that process
/// at its first multiply.
pub(crate) struct Split {
    rows: Vec<Vec<u32>>,
    parts: Box<[OnceLock<Sell>]>,
    /// Parts made so far.
    made: AtomicUsize,
}

impl Split {
    /// Each line of `y` to the process that owns most of its rows in `plan` (ties to the one
    /// with the fewest nonzeros so far), for `y[0]` at position `o` of its line.
    pub(crate) fn new(plan: &SpmvPlan, whole: &Whole, o: usize) -> Split {
        let p = plan.p();
        let mut owner = vec![0u32; plan.rows];
        for (s, l) in plan.procs.iter().enumerate() {
            for &r in &l.y_owned {
                owner[r as usize] = s as u32;
            }
        }
        let mut rows = vec![Vec::new(); p];
        let mut count = vec![0usize; p];
        let mut load = vec![0usize; p];
        // Line k holds rows `k·LINE - o ..` (the first line fewer).
        let mut start = 0usize;
        while start < plan.rows {
            let end = (start + LINE - (start + o) % LINE).min(plan.rows);
            count.iter_mut().for_each(|c| *c = 0);
            for &s in &owner[start..end] {
                count[s as usize] += 1;
            }
            let s = (0..p)
                .max_by_key(|&s| (count[s], std::cmp::Reverse((load[s], s))))
                .unwrap_or(0);
            rows[s].extend(start as u32..end as u32);
            load[s] += whole.ptr[end] - whole.ptr[start];
            start = end;
        }
        Split {
            rows,
            parts: (0..p).map(|_| OnceLock::new()).collect(),
            made: AtomicUsize::new(0),
        }
    }

    /// The rows process `s` computes, ascending.
    pub(crate) fn rows(&self, s: usize) -> &[u32] {
        &self.rows[s]
    }

    /// Process `s`'s matrix, made once by `make` (by `s`, at its first multiply, so that its
    /// memory is near the core that reads it), and whether this call made the last part.
    pub(crate) fn part(&self, s: usize, make: impl FnOnce() -> Sell) -> (&Sell, bool) {
        let mut last = false;
        let sell = self.parts[s].get_or_init(|| {
            let sell = make();
            last = self.made.fetch_add(1, Ordering::AcqRel) + 1 == self.parts.len();
            sell
        });
        (sell, last)
    }

    /// Process `s`'s matrix, if made.
    pub(crate) fn part_of(&self, s: usize) -> Option<&Sell> {
        self.parts[s].get()
    }

    /// Nonzeros of each process's rows.
    #[cfg(test)]
    fn loads(&self, whole: &Whole) -> Vec<usize> {
        self.rows.iter().map(|r| whole.nnz(r)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sparse::partition::{Options, partition};
    use crate::sparse::{CooMatrix, Distribution};

    fn random(rows: usize, cols: usize, nnz: usize, seed: u64) -> CooMatrix {
        let mut s = seed;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let e: Vec<(usize, usize, f64)> = (0..nnz)
            .map(|_| {
                let r = (next() % rows as u64) as usize;
                let c = (next() % cols as u64) as usize;
                (r, c, (next() % 1000) as f64 / 7.0)
            })
            .collect();
        CooMatrix::new(rows, cols, e).unwrap()
    }

    /// The parts of plans of several shapes (a partition, rows and columns dealt cyclically so
    /// that most rows are split) put back together give the matrix: every nonzero once, each
    /// at its row and column.
    #[test]
    fn the_parts_make_the_whole_matrix() {
        let a = random(70, 50, 600, 5);
        let cyclic = |p: usize| Distribution {
            p,
            nz_part: (0..a.nnz() as u32).map(|k| k % p as u32).collect(),
            x_owner: (0..a.cols as u32).map(|j| j % p as u32).collect(),
            y_owner: (0..a.rows as u32).map(|i| (i / 3) % p as u32).collect(),
        };
        let dists = [
            partition(&a, 3, &Options::default()).unwrap().dist,
            cyclic(2),
            cyclic(5),
        ];
        let mut want: Vec<(u32, u32, u64)> = (0..a.nnz())
            .map(|k| (a.row_idx[k], a.col_idx[k], a.vals[k].to_bits()))
            .collect();
        want.sort_unstable();
        for d in &dists {
            let plan = SpmvPlan::new(&a, d).unwrap();
            let w = Whole::new(&plan);
            let mut got: Vec<(u32, u32, u64)> = (0..a.rows)
                .flat_map(|r| {
                    let w = &w;
                    (w.ptr[r]..w.ptr[r + 1]).map(move |e| (r as u32, w.col[e], w.val[e].to_bits()))
                })
                .collect();
            got.sort_unstable();
            assert_eq!(got, want, "p = {}", d.p);
        }
    }

    /// Every row goes to one process, every line of `y` (for each position of `y[0]` in its
    /// line) to one process, and that process is one owning most of the line's rows, the one
    /// with the fewest nonzeros so far where several do.
    #[test]
    fn each_line_goes_whole_to_its_main_owner() {
        let a = random(203, 90, 900, 9);
        let d = Distribution {
            p: 3,
            nz_part: (0..a.nnz() as u32).map(|k| k % 3).collect(),
            x_owner: (0..a.cols as u32).map(|j| j % 3).collect(),
            // Mostly blocks of 5 rows, so that lines are mixed and majorities vary.
            y_owner: (0..a.rows as u32).map(|i| (i / 5 + i / 17) % 3).collect(),
        };
        let plan = SpmvPlan::new(&a, &d).unwrap();
        let whole = Whole::new(&plan);
        for o in 0..LINE {
            let split = Split::new(&plan, &whole, o);
            let mut who = vec![usize::MAX; a.rows];
            for (s, rows) in split.rows.iter().enumerate() {
                assert!(rows.windows(2).all(|w| w[0] < w[1]), "ascending");
                for &r in rows {
                    assert_eq!(who[r as usize], usize::MAX, "row {r} twice");
                    who[r as usize] = s;
                }
            }
            assert!(who.iter().all(|&s| s < 3), "every row computed");
            let line = |r: usize| (r + o) / LINE;
            for r in 1..a.rows {
                if line(r) == line(r - 1) {
                    assert_eq!(
                        who[r],
                        who[r - 1],
                        "o = {o}: rows {} and {r} share a line",
                        r - 1
                    );
                }
            }
            // Line by line in order, with the nonzeros given so far.
            let mut load = [0usize; 3];
            let mut r = 0;
            while r < a.rows {
                let rows: Vec<u32> = (r..a.rows)
                    .take_while(|&q| line(q) == line(r))
                    .map(|q| q as u32)
                    .collect();
                let mut count = [0usize; 3];
                for &q in &rows {
                    count[d.y_owner[q as usize] as usize] += 1;
                }
                let best = *count.iter().max().unwrap();
                let s = who[r];
                assert_eq!(count[s], best, "o = {o}, row {r}: {count:?}");
                for t in (0..3).filter(|&t| t != s && count[t] == best) {
                    assert!(
                        (load[s], s) < (load[t], t),
                        "o = {o}, row {r}: a tie to the less loaded"
                    );
                }
                load[s] += whole.nnz(&rows);
                r += rows.len();
            }
            let loads = split.loads(&whole);
            assert_eq!(loads.iter().sum::<usize>(), a.nnz());
        }
    }
}
