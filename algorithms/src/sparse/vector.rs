//! Distributing the vectors `x` and `y` of `y = Ax` once the nonzeros have their parts.
//!
//! # Cost model
//!
//! The parallel multiply has two communication phases (BSPlib paper §5.4, Bisseling's
//! BSPedupack `bspmv`):
//!
//! * **fan-out**: the owner of `x_j` sends `x_j` to every *other* part that holds a nonzero of
//!   column `j`;
//! * **fan-in**: every part that holds a nonzero of row `i`, other than the owner of `y_i`, sends
//!   the owner one partial sum.
//!
//! Each phase is one superstep whose cost is its h-relation: the largest number of words a
//! process sends or receives in it. The cost of a multiply is `fanout_h + fanin_h`
//! ([`metrics::Traffic::max_h`](super::metrics::Traffic::max_h)).
//!
//! Every owner chosen here is a part that holds a nonzero of the row or column (a *candidate*),
//! so the total volume is the minimum `Σ (λ - 1)`; what is left to choose is how the words are
//! spread over the processes.
//!
//! # The assignment problem of one phase
//!
//! `x` owners only change the fan-out and `y` owners only the fan-in, so the two phases are
//! solved separately (in parallel). Take the fan-out; the fan-in is the mirror image with sends
//! and receives swapped, and since `h` takes the maximum of the two, it is the same problem.
//!
//! A column `j` with `λ_j ≥ 2` candidates is an *item* of weight `w_j = λ_j - 1`. If part `s`
//! owns it, `s` sends `w_j` words and each of the other `λ_j - 1` candidates receives one word.
//! Hence, with `base_s` the number of items that `s` is a candidate of:
//!
//! * `send_s = Σ w_j` over the items `s` owns,
//! * `recv_s = base_s - (number of items s owns)`: a candidate receives one word per item it
//!   touches but does not own — owning an item *saves* its owner one received word.
//!
//! The goal is to minimise `max_s max(send_s, recv_s)`. Columns with `λ = 1` cost nothing (owner:
//! the only part) and empty columns (`λ = 0`) cost nothing wherever they go.
//!
//! # Method
//!
//! Local search from three starting assignments, keeping the best result; the moves are those
//! of the "local-best" heuristic of Bisseling & Meesen (2005), *Communication balancing in
//! parallel sparse matrix-vector multiplication*, ETNA 21 (also Mondriaan's vector
//! partitioner), the rest is this module's own:
//!
//! 1. **Starts.**
//!    * *Incremental greedy*: items by decreasing weight (heavy items are the hard ones to fit,
//!      as in LPT scheduling), ties by index; each goes to the candidate that leaves the smallest
//!      largest cost `max(send, recv)` among its candidates, counting only the words of the
//!      items placed so far (the new owner sends `w`, the other candidates receive one each).
//!    * *Pessimistic greedy*: the same, but every candidate starts charged with all its `base_s`
//!      receives and owning an item takes one back; this favours the parts that would receive
//!      most, and wins on some inputs where the first start loses.
//!    * *First seen*: the part of the first nonzero of the row or column.
//! 2. **Improvement.** Passes over all items move an item from its owner `s` to another
//!    candidate `t` when that lowers `max(cost_s, cost_t)`, or keeps it and lowers
//!    `cost_s² + cost_t²`; each item takes its best such move. Both kinds of move lower the list
//!    of all costs sorted decreasingly, in lexicographic order, so the search cannot cycle and
//!    the largest cost never rises. Passes stop after one without moves or after
//!    [`MAX_PASSES`].
//! 3. **Choice.** The result with the smallest h, then the smallest sum of squared costs, then
//!    the earlier start. Since the search never raises the largest cost, the result is never
//!    worse than the first-seen rule.
//! 4. **Empty rows and columns** go, one by one, to the part owning the fewest entries of that
//!    vector so far (smallest part number on ties): they cost no communication, and this
//!    balances the vector lengths.
//!
//! On small random cases checked against exhaustive search (the tests), the result is optimal
//! for 597 of 600 phases and one word above the optimum for the others.
//!
//! The three starts (and the two phases) run in parallel, but each computation is sequential
//! and ordered by indices, and the results are combined in a fixed order: the owners depend only
//! on the input, not on thread timing or hashing. Time `O(nnz + m + n + p + c log c)` for `c`
//! cut rows and columns, plus `O(Σλ)` per improvement pass; memory `O(nnz + m + n + p)`.
//!
//! [`h_lower_bounds`] gives lower bounds on the two h-relations over all owner choices among the
//! candidates, to judge how far from optimal a result can be.

use super::metrics::Buckets;
use super::{CooMatrix, Distribution};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Largest number of improvement passes per phase. Passes after the first few rarely move
/// anything; the cap bounds the time on adversarial inputs.
pub const MAX_PASSES: usize = 16;

/// Chooses the owners of `x` and `y` for the nonzero parts `nz_part`, minimising the
/// h-relations of the fan-out and the fan-in (see the [module documentation](self)).
///
/// The owner of a nonempty row or column is always a part holding one of its nonzeros, so the
/// communication volume is the minimum `Σ (λ - 1)`. Empty rows and columns are spread over the
/// parts so that every part owns about the same number of entries of each vector.
///
/// # Panics
///
/// If `nz_part.len() != a.nnz()`, a part is `>= p`, an index of `a` lies outside the matrix, or
/// `p == 0` while the matrix has rows or columns.
///
/// ```
/// use mbsp_algorithms::sparse::{CooMatrix, metrics, vector};
/// // A 2 x 2 matrix with all four nonzeros; the diagonal in part 0, the rest in part 1.
/// let a = CooMatrix::new(2, 2, vec![(0, 0, 1.0), (0, 1, 1.0), (1, 0, 1.0), (1, 1, 1.0)])
///     .unwrap();
/// let d = vector::distribute(&a, vec![0, 1, 1, 0], 2);
/// let t = metrics::traffic(&a, &d);
/// assert_eq!(t.volume(), metrics::volume(&a, &d.nz_part, 2)); // minimum volume: 4
/// assert_eq!(t.max_h(), 2); // each process sends and receives one word per phase
/// ```
pub fn distribute(a: &CooMatrix, nz_part: Vec<u32>, p: usize) -> Distribution {
    check(a, &nz_part, p);
    let (x_owner, y_owner) = rayon::join(
        || owners(&a.col_idx, a.cols, &nz_part, p),
        || owners(&a.row_idx, a.rows, &nz_part, p),
    );
    Distribution {
        p,
        nz_part,
        x_owner,
        y_owner,
    }
}

/// Lower bounds `(fanout, fanin)` on the h of the two phases, valid for every choice of owners
/// among the candidate parts (so for every result of [`distribute`]).
///
/// For a phase with communication volume `V`, the sends and the receives each add up to `V`, so
/// some process has at least `⌈V / p⌉`. And a part `s` that owns `k` of the `base_s` items it
/// touches receives `base_s - k` words and sends at least the `k` smallest of their weights; the
/// bound takes the best `k` for each part and the worst part.
///
/// # Panics
///
/// As [`distribute`].
pub fn h_lower_bounds(a: &CooMatrix, nz_part: &[u32], p: usize) -> (u64, u64) {
    check(a, nz_part, p);
    (
        phase_lower_bound(&a.col_idx, a.cols, nz_part, p),
        phase_lower_bound(&a.row_idx, a.rows, nz_part, p),
    )
}

fn check(a: &CooMatrix, nz_part: &[u32], p: usize) {
    assert_eq!(
        nz_part.len(),
        a.nnz(),
        "vector::distribute: {} parts for {} nonzeros",
        nz_part.len(),
        a.nnz()
    );
    if let Err(e) = a.validate() {
        panic!("vector::distribute: {e}");
    }
    assert!(
        p > 0 || (a.rows == 0 && a.cols == 0),
        "vector::distribute: p = 0 for a {} x {} matrix",
        a.rows,
        a.cols
    );
    if let Some(k) = nz_part.iter().position(|&s| s as usize >= p) {
        panic!(
            "vector::distribute: nonzero {k} is in part {}, but p = {p}",
            nz_part[k]
        );
    }
}

/// The items of one phase: keys (columns for the fan-out, rows for the fan-in) with at least
/// two candidate parts, and their candidates.
struct Items {
    /// Key (row or column index) of each item.
    key: Vec<u32>,
    /// `cand[start[c]..start[c + 1]]` are the distinct parts holding a nonzero of item `c`.
    start: Vec<usize>,
    cand: Vec<u32>,
}

impl Items {
    fn len(&self) -> usize {
        self.key.len()
    }

    fn cands(&self, c: usize) -> &[u32] {
        &self.cand[self.start[c]..self.start[c + 1]]
    }
}

/// Splits the keys of one phase into cut items (λ ≥ 2), returned as [`Items`], and the rest:
/// `owner[k]` is set to the only part for λ = 1 and left `u32::MAX` for empty keys.
///
/// One pass over the nonzeros finds each key's first part and whether another part occurs;
/// only the nonzeros of cut keys are then grouped. With a good partition most keys have λ = 1,
/// so the grouping touches a small fraction of the nonzeros.
fn collect(keys: &[u32], nkeys: usize, part: &[u32], p: usize) -> (Items, Vec<u32>) {
    const NONE: u32 = u32::MAX;
    // owner[k]: first part seen for key k; cut[k]: another part seen too.
    let mut owner = vec![NONE; nkeys];
    let mut cut = vec![false; nkeys];
    for (&k, &s) in keys.iter().zip(part) {
        let o = &mut owner[k as usize];
        if *o == NONE {
            *o = s;
        } else if *o != s {
            cut[k as usize] = true;
        }
    }
    // Item number of each cut key, in key order.
    let mut item_of = vec![NONE; nkeys];
    let mut key = Vec::new();
    for k in 0..nkeys {
        if cut[k] {
            item_of[k] = key.len() as u32;
            key.push(k as u32);
        }
    }
    drop(cut);
    let n = key.len();
    // Counting sort of the cut keys' nonzeros by item, stable, so that each item's first
    // candidate is the part of its first nonzero.
    let mut start = vec![0usize; n + 1];
    for &k in keys {
        let c = item_of[k as usize];
        if c != NONE {
            start[c as usize + 1] += 1;
        }
    }
    for c in 0..n {
        start[c + 1] += start[c];
    }
    let mut fill = start.clone();
    let mut grouped = vec![0u32; start[n]];
    for (&k, &s) in keys.iter().zip(part) {
        let c = item_of[k as usize];
        if c != NONE {
            grouped[fill[c as usize]] = s;
            fill[c as usize] += 1;
        }
    }
    drop(fill);
    // Distinct parts per item, in order of first occurrence: seen[s] == c marks part s as
    // listed for item c (one array for all items, never cleared).
    let mut seen = vec![NONE; p];
    let mut cand = Vec::with_capacity(grouped.len());
    let mut cstart = Vec::with_capacity(n + 1);
    cstart.push(0);
    for c in 0..n {
        for &s in &grouped[start[c]..start[c + 1]] {
            if seen[s as usize] != c as u32 {
                seen[s as usize] = c as u32;
                cand.push(s);
            }
        }
        cstart.push(cand.len());
    }
    (
        Items {
            key,
            start: cstart,
            cand,
        },
        owner,
    )
}

/// The running books of one phase: for each part, the words it moves as owner (`big`: sends in
/// the fan-out, receives in the fan-in) and the words it moves as non-owner (`small`).
struct Loads {
    big: Vec<u64>,
    small: Vec<u64>,
}

impl Loads {
    /// The loads of the owners `own` of `items`.
    fn of(items: &Items, own: &[u32], p: usize) -> Loads {
        let mut loads = Loads {
            big: vec![0; p],
            small: vec![0; p],
        };
        for (c, &s) in own.iter().enumerate() {
            let cands = items.cands(c);
            loads.big[s as usize] += cands.len() as u64 - 1;
            for &t in cands {
                if t != s {
                    loads.small[t as usize] += 1;
                }
            }
        }
        loads
    }

    /// The h of the phase and the sum of the squared costs (the tie-break between results).
    fn score(&self) -> (u64, u128) {
        (0..self.big.len() as u32).fold((0, 0), |(m, q), s| {
            let c = self.cost(s);
            (m.max(c), q + sq(c))
        })
    }

    fn cost(&self, s: u32) -> u64 {
        self.big[s as usize].max(self.small[s as usize])
    }

    /// Cost of `s` after it takes ownership of an item of weight `w`.
    fn cost_take(&self, s: u32, w: u64) -> u64 {
        (self.big[s as usize] + w).max(self.small[s as usize] - 1)
    }

    /// Cost of `s` after it gives up ownership of an item of weight `w`.
    fn cost_give(&self, s: u32, w: u64) -> u64 {
        (self.big[s as usize] - w).max(self.small[s as usize] + 1)
    }

    fn take(&mut self, s: u32, w: u64) {
        self.big[s as usize] += w;
        self.small[s as usize] -= 1;
    }

    fn give(&mut self, s: u32, w: u64) {
        self.big[s as usize] -= w;
        self.small[s as usize] += 1;
    }
}

fn sq(x: u64) -> u128 {
    (x as u128) * (x as u128)
}

/// A starting assignment: the owner of each item, given the items heaviest first and `p`.
type Start = fn(&Items, &[u32], usize) -> Vec<u32>;

/// Owners of the keys of one phase (see the module documentation for the method).
fn owners(keys: &[u32], nkeys: usize, part: &[u32], p: usize) -> Vec<u32> {
    let (items, mut owner) = collect(keys, nkeys, part, p);

    // Heaviest items first, ties by index.
    let mut order: Vec<u32> = (0..items.len() as u32).collect();
    order.sort_unstable_by_key(|&c| (Reverse(items.cands(c as usize).len()), c));

    // Local search from each start, the starts in parallel; the first best one wins, so the
    // result does not depend on which thread finishes first.
    let starts: [Start; 3] = [greedy_incremental, greedy_pessimistic, first_seen];
    let results: Vec<(u64, u128, Vec<u32>)> = {
        use rayon::prelude::*;
        starts
            .par_iter()
            .map(|start| {
                let mut own = start(&items, &order, p);
                let mut loads = Loads::of(&items, &own, p);
                improve(&items, &mut own, &mut loads);
                let (max, sumsq) = loads.score();
                (max, sumsq, own)
            })
            .collect()
    };
    let best = results
        .into_iter()
        .reduce(|b, r| if (r.0, r.1) < (b.0, b.1) { r } else { b })
        .map(|r| r.2)
        .unwrap_or_default();
    for (c, &k) in items.key.iter().enumerate() {
        owner[k as usize] = best[c];
    }

    // Empty keys: to the part with the fewest entries so far, round robin among equals.
    if owner.contains(&u32::MAX) {
        let mut count = vec![0u64; p];
        for &o in owner.iter().filter(|&&o| o != u32::MAX) {
            count[o as usize] += 1;
        }
        let mut heap: BinaryHeap<Reverse<(u64, u32)>> =
            (0..p).map(|s| Reverse((count[s], s as u32))).collect();
        for o in owner.iter_mut().filter(|o| **o == u32::MAX) {
            let Reverse((cnt, s)) = heap.pop().expect("p > 0 when there are keys");
            *o = s;
            heap.push(Reverse((cnt + 1, s)));
        }
    }
    owner
}

/// Start 1: items in `order` (heaviest first), each to the candidate that leaves the smallest
/// largest cost among its candidates, counting only the words of the items placed so far (the
/// owner sends `w`, every other candidate receives one). Ties: the smaller cost of the owner,
/// then the smaller send load, then the smaller part number.
fn greedy_incremental(items: &Items, order: &[u32], p: usize) -> Vec<u32> {
    let mut loads = Loads {
        big: vec![0; p],
        small: vec![0; p],
    };
    let mut own = vec![0u32; items.len()];
    for &c in order {
        let cands = items.cands(c as usize);
        let w = cands.len() as u64 - 1;
        // A candidate that does not become the owner receives one more word.
        let not_owner = |s: u32| loads.big[s as usize].max(loads.small[s as usize] + 1);
        let (top1, top1_at, top2) = top_two(cands.iter().map(|&s| not_owner(s)));
        let mut best = (u64::MAX, u64::MAX, u64::MAX, u32::MAX);
        for (i, &s) in cands.iter().enumerate() {
            let others = if i == top1_at { top2 } else { top1 };
            let after = (loads.big[s as usize] + w).max(loads.small[s as usize]);
            best = best.min((after.max(others), after, loads.big[s as usize], s));
        }
        let s = best.3;
        own[c as usize] = s;
        for &t in cands {
            if t != s {
                loads.small[t as usize] += 1;
            }
        }
        loads.big[s as usize] += w;
    }
    own
}

/// Start 2: as [`greedy_incremental`], but every candidate starts charged with a receive for
/// every item it touches, and owning an item takes that receive back. This favours giving items
/// to the parts that would receive most; it wins on some inputs where the first start loses.
fn greedy_pessimistic(items: &Items, order: &[u32], p: usize) -> Vec<u32> {
    let mut loads = Loads {
        big: vec![0; p],
        small: vec![0; p],
    };
    for &s in &items.cand {
        loads.small[s as usize] += 1;
    }
    let mut own = vec![0u32; items.len()];
    for &c in order {
        let cands = items.cands(c as usize);
        let w = cands.len() as u64 - 1;
        let (top1, top1_at, top2) = top_two(cands.iter().map(|&s| loads.cost(s)));
        let mut best = (u64::MAX, u64::MAX, u32::MAX);
        for (i, &s) in cands.iter().enumerate() {
            let others = if i == top1_at { top2 } else { top1 };
            let after = loads.cost_take(s, w);
            best = best.min((after.max(others), after, s));
        }
        own[c as usize] = best.2;
        loads.take(best.2, w);
    }
    own
}

/// Start 3: the part of the first nonzero of each row or column. The local search never raises
/// the largest cost, so keeping the best result makes [`distribute`] never worse than this
/// simple rule.
fn first_seen(items: &Items, _order: &[u32], _p: usize) -> Vec<u32> {
    (0..items.len()).map(|c| items.cands(c)[0]).collect()
}

/// The largest value, the position of its first occurrence, and the largest value among the
/// other positions (0 if none).
fn top_two(costs: impl Iterator<Item = u64>) -> (u64, usize, u64) {
    let (mut top1, mut top1_at, mut top2) = (0u64, usize::MAX, 0u64);
    for (i, c) in costs.enumerate() {
        if top1_at == usize::MAX || c > top1 {
            top2 = top1;
            top1 = c;
            top1_at = i;
        } else if c > top2 {
            top2 = c;
        }
    }
    (top1, top1_at, top2)
}

/// Local search: passes over all items, moving an item from its owner `s` to the candidate `t`
/// that lowers `(max(cost_s, cost_t), cost_s² + cost_t²)` the most, if any does. Every move
/// lowers the decreasingly sorted list of all costs lexicographically, so the largest cost never
/// rises and the search ends; it stops after a pass without moves or [`MAX_PASSES`] passes.
fn improve(items: &Items, own: &mut [u32], loads: &mut Loads) {
    for _ in 0..MAX_PASSES {
        let mut moved = false;
        for (c, oc) in own.iter_mut().enumerate() {
            let s = *oc;
            let cands = items.cands(c);
            let w = cands.len() as u64 - 1;
            let cs = loads.cost(s);
            let cs_after = loads.cost_give(s, w);
            // Key of the best move so far: (pair max after, change of pair sum of squares, t).
            let mut best: Option<(u64, i128, u32)> = None;
            for &t in cands {
                if t == s {
                    continue;
                }
                let ct = loads.cost(t);
                let ct_after = loads.cost_take(t, w);
                let before = cs.max(ct);
                let after = cs_after.max(ct_after);
                let dsq = (sq(cs_after) + sq(ct_after)) as i128 - (sq(cs) + sq(ct)) as i128;
                if (after, dsq) < (before, 0) {
                    let key = (after, dsq, t);
                    if best.is_none_or(|b| key < b) {
                        best = Some(key);
                    }
                }
            }
            if let Some((_, _, t)) = best {
                loads.give(s, w);
                loads.take(t, w);
                *oc = t;
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
}

/// Lower bound on the h of one phase (see [`h_lower_bounds`]).
fn phase_lower_bound(keys: &[u32], nkeys: usize, part: &[u32], p: usize) -> u64 {
    let (items, _) = collect(keys, nkeys, part, p);
    let volume: u64 = (0..items.len())
        .map(|c| items.cands(c).len() as u64 - 1)
        .sum();
    let mut bound = volume.div_ceil(p.max(1) as u64);
    // (part, weight) of every candidacy, sorted: each part's weights in increasing order.
    let mut pw: Vec<(u32, u64)> = (0..items.len())
        .flat_map(|c| {
            let w = items.cands(c).len() as u64 - 1;
            items.cands(c).iter().map(move |&s| (s, w))
        })
        .collect();
    pw.sort_unstable();
    for group in pw.chunk_by(|x, y| x.0 == y.0) {
        let base = group.len() as u64;
        // Owning the k lightest items: sends >= their weight sum, receives = base - k.
        let mut sent = 0u64;
        let mut best = base; // k = 0
        for (k, &(_, w)) in group.iter().enumerate() {
            sent += w;
            best = best.min(sent.max(base - k as u64 - 1));
        }
        bound = bound.max(best);
    }
    bound
}

/// Gives `x_i` and `y_i` one owner for every `i` of a square matrix (for iterative methods, where
/// the `y` of one multiply is the `x` of the next): the owner of `y_i` when it holds a nonzero of
/// column `i` (or the column is empty), else that of `x_i` when it holds a nonzero of row `i`
/// (or the row is empty), else a part holding nonzeros of both (the part of `a_ii` if stored),
/// else the owner of `y_i`. Every choice but the last keeps the volume at its minimum `Σ (λ-1)`;
/// the last costs one word more in the fan-out of `x_i`. The h-relations may grow.
pub(crate) fn equal_owners(a: &CooMatrix, d: &mut Distribution) {
    debug_assert_eq!(a.rows, a.cols);
    let rows = Buckets::new(&a.row_idx, a.rows);
    let cols = Buckets::new(&a.col_idx, a.cols);
    fn parts<'a>(b: &'a Buckets, nz_part: &'a [u32], i: usize) -> impl Iterator<Item = u32> + 'a {
        b.order[b.start[i]..b.start[i + 1]]
            .iter()
            .map(|&k| nz_part[k as usize])
    }
    let nz_part = &d.nz_part;
    let holds = |b: &Buckets, i: usize, s: u32| {
        b.start[i] == b.start[i + 1] || parts(b, nz_part, i).any(|t| t == s)
    };
    // The last index whose column holds each part (linear in the row and column, whatever
    // their lengths).
    let mut in_col = vec![usize::MAX; d.p];
    let owners: Vec<u32> = (0..a.rows)
        .map(|i| {
            let (y, x) = (d.y_owner[i], d.x_owner[i]);
            if holds(&cols, i, y) {
                y
            } else if holds(&rows, i, x) {
                x
            } else {
                parts(&cols, nz_part, i).for_each(|t| in_col[t as usize] = i);
                parts(&rows, nz_part, i)
                    .find(|&s| in_col[s as usize] == i)
                    .unwrap_or(y)
            }
        })
        .collect();
    d.x_owner.clone_from(&owners);
    d.y_owner = owners;
}
