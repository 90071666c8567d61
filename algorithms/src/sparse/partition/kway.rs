//! Refinement of the final `p`-way partition: greedy moves of row and column groups.
//!
//! Recursive bipartitioning optimises each split on its own; parts that were separated early
//! never exchange nonzeros again. This pass looks at the whole partition: for every row `i`
//! with `λ_i ≥ 2` and every part `s` holding some of it, moving those nonzeros (the group of
//! row `i` in `s`) to another part `t` of row `i` takes `s` out of the row (`λ_i − 1`), and for
//! each column `j` the group touches, may take `s` out of the column (`−1` if the group holds all
//! of `s`'s nonzeros in `j`) and may bring `t` in (`+1` if `t` had none). A move is made when this
//! gain is positive and `t` stays within the balance bound; then the same for column groups,
//! pass after pass while the volume drops. Each pass costs `O(nnz · λ)`.

use super::super::CooMatrix;
use super::super::metrics::Buckets;

/// Per line (row or column), the parts holding it and how many nonzeros each holds there.
struct Counts(Vec<Vec<(u32, u32)>>);

impl Counts {
    fn new(lines: &[u32], nlines: usize, part: &[u32]) -> Self {
        let mut c: Vec<Vec<(u32, u32)>> = vec![Vec::new(); nlines];
        for (k, &l) in lines.iter().enumerate() {
            let list = &mut c[l as usize];
            match list.iter_mut().find(|(s, _)| *s == part[k]) {
                Some((_, n)) => *n += 1,
                None => list.push((part[k], 1)),
            }
        }
        Counts(c)
    }

    fn get(&self, l: usize, s: u32) -> u32 {
        self.0[l]
            .iter()
            .find(|(x, _)| *x == s)
            .map_or(0, |&(_, n)| n)
    }

    fn add(&mut self, l: usize, s: u32, delta: i64) {
        let list = &mut self.0[l];
        match list.iter().position(|(x, _)| *x == s) {
            Some(i) => {
                let n = list[i].1 as i64 + delta;
                if n == 0 {
                    list.swap_remove(i);
                } else {
                    list[i].1 = n as u32;
                }
            }
            None => list.push((s, delta as u32)),
        }
    }
}

/// One side of the refinement: groups along `lines` (rows or columns), crossing `cross`.
struct Side<'a> {
    cross: &'a [u32],
    by_line: Buckets,
}

/// Refines `part` in place; every part keeps at most `lmax` nonzeros (parts already above it
/// only shrink). Returns the total decrease of the volume.
pub(crate) fn refine(
    a: &CooMatrix,
    part: &mut [u32],
    p: usize,
    lmax: u64,
    max_passes: usize,
) -> u64 {
    let mut sizes = vec![0u64; p];
    for &s in part.iter() {
        sizes[s as usize] += 1;
    }
    let rows = Side {
        cross: &a.col_idx,
        by_line: Buckets::new(&a.row_idx, a.rows),
    };
    let cols = Side {
        cross: &a.row_idx,
        by_line: Buckets::new(&a.col_idx, a.cols),
    };
    let mut rc = Counts::new(&a.row_idx, a.rows, part);
    let mut cc = Counts::new(&a.col_idx, a.cols, part);
    // Scratch: how many nonzeros of the moving group lie in each crossing line.
    let mut mult = vec![0u32; a.rows.max(a.cols)];
    let mut crossing: Vec<u32> = Vec::new();
    let mut total = 0u64;
    for _ in 0..max_passes {
        let mut gained = 0u64;
        for by_rows in [true, false] {
            let (side, own, other) = if by_rows {
                (&rows, &mut rc, &mut cc)
            } else {
                (&cols, &mut cc, &mut rc)
            };
            let nlines = side.by_line.start.len() - 1;
            for l in 0..nlines {
                if own.0[l].len() < 2 {
                    continue;
                }
                let members = side.by_line.get(l);
                let parts: Vec<(u32, u32)> = own.0[l].clone();
                for &(s, g) in &parts {
                    // The group may have moved or shrunk earlier in this line's loop.
                    if own.get(l, s) != g {
                        continue;
                    }
                    let group: Vec<u32> = members
                        .iter()
                        .copied()
                        .filter(|&k| part[k as usize] == s)
                        .collect();
                    // The distinct crossing lines of the group, each with its multiplicity.
                    crossing.clear();
                    for &k in &group {
                        let j = side.cross[k as usize] as usize;
                        if mult[j] == 0 {
                            crossing.push(j as u32);
                        }
                        mult[j] += 1;
                    }
                    let mut best: Option<(i64, u32)> = None;
                    for &(t, _) in &own.0[l] {
                        if t == s || sizes[t as usize] + g as u64 > lmax {
                            continue;
                        }
                        let mut gain = 1i64;
                        for &j in &crossing {
                            let j = j as usize;
                            if other.get(j, s) == mult[j] {
                                gain += 1;
                            }
                            if other.get(j, t) == 0 {
                                gain -= 1;
                            }
                        }
                        if gain > 0 && best.is_none_or(|(bg, _)| gain > bg) {
                            best = Some((gain, t));
                        }
                    }
                    for &j in &crossing {
                        mult[j as usize] = 0;
                    }
                    if let Some((gain, t)) = best {
                        for &k in &group {
                            part[k as usize] = t;
                            other.add(side.cross[k as usize] as usize, s, -1);
                            other.add(side.cross[k as usize] as usize, t, 1);
                        }
                        own.add(l, s, -(g as i64));
                        own.add(l, t, g as i64);
                        sizes[s as usize] -= g as u64;
                        sizes[t as usize] += g as u64;
                        gained += gain as u64;
                    }
                }
            }
        }
        total += gained;
        if gained == 0 {
            break;
        }
    }
    total
}
