//! Direct k-way refinement: multilevel FM on all `p` parts at once, with the whole balance bound.
//!
//! Recursive bisection settles every split for good and gives each of its `⌈log2 p⌉` levels an
//! even share of the allowed imbalance, so at large `p` each split is made nearly balanced, and
//! nonzeros separated at an early split never meet again. This pass refines the finished
//! partition as a whole. The fine-grain hypergraph of the matrix (a vertex per nonzero, a net per
//! row and column with two or more nonzeros: the sum of `λ − 1` over its nets is exactly the
//! SpMV volume) is coarsened by matching within parts, so the partition projects exactly onto
//! every level; from the coarsest level down, k-way FM passes move one vertex at a time to the
//! adjacent part of largest gain, negative gains allowed so that a pass climbs out of local
//! minima, keeping every part within `lmax`, and return to the best state of the pass. No level
//! makes the volume larger. Mt-KaHyPar refines its partitions this way (with parallel FM, label
//! propagation and flows between pairs of parts); this is a sequential FM.
//!
//! The passes are localized (as in KaHyPar's k-way FM): a search starts from one boundary vertex
//! and grows only to the vertices whose gain its own moves raised, gives up after `PATIENCE`
//! moves without a new best, and keeps its best prefix; then the next search starts from a
//! boundary vertex no earlier search has moved. One global sequence of moves would give up
//! as soon as the gains of unrelated corners of the matrix stopped adding up; many small
//! searches climb out of many local minima, each on its own.
//!
//! Gain of moving `v` from part `s` to part `t`: `Σ_{e ∋ v} cost(e) · ([pins of e in s = 1] −
//! [pins of e in t = 0])`. Only parts adjacent to `v` (holding a pin of one of its nets) are
//! candidates: any other target has the lowest possible gain.

use super::super::CooMatrix;
use super::super::metrics::Buckets;
use super::coarsen::cluster;
use super::fm::{Queues, is_set};
use super::hypergraph::Hypergraph;
use mbsp::rng::SplitMix64;
use std::sync::atomic::AtomicBool;

/// With fewer parts the bisections leave little to gain: recursive bisection into 4 parts has
/// two levels, each with half of the allowed imbalance and its own V-cycles, and on the shared
/// matrices at p = 4 this pass found little for much more time (docs/benchmarks.md has the
/// figures).
pub(crate) const MIN_PARTS: usize = 5;
/// Coarsening stops at this many vertices per part, and clusters weigh at most the total over
/// this many per part: small against the slack of a part (`eps · nnz / p`), so coarse vertices
/// can still move.
const COARSEST_PER_PART: usize = 160;
/// Passes per level (each ends the level's refinement when it gains nothing).
const PASSES: usize = 2;
/// A search gives up after this many moves without a new best state.
const PATIENCE: usize = 50;
/// A part entering a net longer than this does not requeue the net's pins: their keys are left
/// low (they are exact again when next computed), which saves `O(|e|)` per move on dense rows.
const LONG_NET: usize = 256;

/// Refines the `p`-way partition `part` of the nonzeros of `a` in place, every part at most
/// `lmax` nonzeros (parts already above it only shrink); returns the decrease of the volume.
pub(crate) fn refine(
    a: &CooMatrix,
    part: &mut [u32],
    p: usize,
    lmax: u64,
    rng: &mut SplitMix64,
    cancel: Option<&AtomicBool>,
) -> u64 {
    // Pins (two per nonzero) are numbered in `u32`.
    if p < 2 || a.nnz().saturating_mul(2) > u32::MAX as usize {
        return 0;
    }
    let h = fine_grain(a);
    let coarsest = COARSEST_PER_PART.saturating_mul(p);
    let max_cluster = (a.nnz() as u64 / coarsest as u64).max(1);
    let mut levels: Vec<Hypergraph> = Vec::new();
    let mut maps: Vec<Vec<u32>> = Vec::new();
    let mut labels: Vec<u32> = part.to_vec();
    loop {
        let cur = levels.last().unwrap_or(&h);
        if cur.nv() <= coarsest || max_cluster < 2 || is_set(cancel) {
            break;
        }
        let (cmap, nc) = cluster(cur, max_cluster, Some(&labels[..]), rng);
        if nc as f64 > 0.9 * cur.nv() as f64 {
            break;
        }
        let coarse = cur.contract(&cmap, nc);
        let mut cl = vec![0u32; nc];
        for (v, &c) in cmap.iter().enumerate() {
            cl[c as usize] = labels[v];
        }
        labels = cl;
        levels.push(coarse);
        maps.push(cmap);
    }
    // Each coarse level is dropped once refined: the finest levels, the largest, are refined
    // with the coarse ones gone.
    let mut gained = 0u64;
    while let Some(level) = levels.pop() {
        gained += KwayFm::new(&level, p, lmax, &labels).refine(&mut labels, rng, cancel);
        let cmap = maps.pop().expect("one clustering per level");
        labels = cmap.iter().map(|&c| labels[c as usize]).collect();
    }
    gained += KwayFm::new(&h, p, lmax, &labels).refine(&mut labels, rng, cancel);
    part.copy_from_slice(&labels);
    gained
}

/// The fine-grain hypergraph of `a`: vertex `k` is nonzero `k`; the nets are the rows, then the
/// columns, that hold two nonzeros or more (a line with one can never be cut).
fn fine_grain(a: &CooMatrix) -> Hypergraph {
    let mut nptr = vec![0u32];
    let mut pins: Vec<u32> = Vec::with_capacity(2 * a.nnz());
    for (keys, n) in [(&a.row_idx, a.rows), (&a.col_idx, a.cols)] {
        let lines = Buckets::new(keys, n);
        for l in 0..n {
            let members = lines.get(l);
            if members.len() >= 2 {
                pins.extend_from_slice(members);
                nptr.push(pins.len() as u32);
            }
        }
    }
    let nn = nptr.len() - 1;
    Hypergraph::new(vec![1; a.nnz()], vec![1; nn], nptr, pins)
}

/// The state of k-way FM on one level: part sizes, and per net the parts it touches with their
/// pin counts (a short list: a net touches at most `min(|e|, p)` parts).
struct KwayFm<'h> {
    h: &'h Hypergraph,
    lmax: u64,
    sizes: Vec<u64>,
    /// Net `e`'s list is `counts[start[e]..start[e] + len[e]]`, room for `min(|e|, p)`.
    start: Vec<u32>,
    len: Vec<u32>,
    counts: Vec<(u32, u32)>,
    /// Scratch of `best`: per part, the summed cost of `v`'s nets it touches.
    conn: Vec<i64>,
    touched: Vec<u32>,
    /// Moved in this pass: a search's kept moves stay put until the pass ends.
    locked: Vec<bool>,
    /// Moved by some search of this pass (kept or undone): no longer a seed.
    tried: Vec<bool>,
    /// The search's max-heap of vertices by the gain of their best move (side 0 of the
    /// bipartitioner's queues).
    queue: Queues,
}

impl<'h> KwayFm<'h> {
    fn new(h: &'h Hypergraph, p: usize, lmax: u64, part: &[u32]) -> Self {
        let mut sizes = vec![0u64; p];
        for (v, &s) in part.iter().enumerate() {
            sizes[s as usize] += h.vwgt[v] as u64;
        }
        let mut start = Vec::with_capacity(h.nn());
        let mut room = 0u32;
        for e in 0..h.nn() {
            start.push(room);
            room += h.net(e).len().min(p) as u32;
        }
        let mut f = KwayFm {
            h,
            lmax,
            sizes,
            start,
            len: vec![0; h.nn()],
            counts: vec![(0, 0); room as usize],
            conn: vec![0; p],
            touched: Vec::new(),
            locked: vec![false; h.nv()],
            tried: vec![false; h.nv()],
            queue: Queues::new(h.nv()),
        };
        for e in 0..h.nn() {
            for &v in h.net(e) {
                f.add(e, part[v as usize]);
            }
        }
        f
    }

    fn list(&self, e: usize) -> &[(u32, u32)] {
        let s = self.start[e] as usize;
        &self.counts[s..s + self.len[e] as usize]
    }

    /// Pins of net `e` in part `s`.
    fn count(&self, e: usize, s: u32) -> u32 {
        self.list(e)
            .iter()
            .find(|&&(t, _)| t == s)
            .map_or(0, |&(_, n)| n)
    }

    fn add(&mut self, e: usize, s: u32) {
        let b = self.start[e] as usize;
        let n = self.len[e] as usize;
        match self.counts[b..b + n].iter().position(|&(t, _)| t == s) {
            Some(i) => self.counts[b + i].1 += 1,
            None => {
                // Room for min(|e|, p) parts: a net cannot touch more.
                self.counts[b + n] = (s, 1);
                self.len[e] += 1;
            }
        }
    }

    fn sub(&mut self, e: usize, s: u32) {
        let b = self.start[e] as usize;
        let n = self.len[e] as usize;
        let i = b + self.counts[b..b + n]
            .iter()
            .position(|&(t, _)| t == s)
            .expect("the pin's part is listed");
        self.counts[i].1 -= 1;
        if self.counts[i].1 == 0 {
            self.counts[i] = self.counts[b + n - 1];
            self.len[e] -= 1;
        }
    }

    /// The best move of `v` the bound allows: (gain, target part); ties go to the lighter part.
    fn best(&mut self, v: usize, part: &[u32]) -> Option<(i64, u32)> {
        let h = self.h;
        let s = part[v];
        let w = h.vwgt[v] as u64;
        let (mut leave, mut total) = (0i64, 0i64);
        for &e in h.nets(v) {
            let e = e as usize;
            let c = h.ncost[e] as i64;
            total += c;
            let b = self.start[e] as usize;
            for &(t, n) in &self.counts[b..b + self.len[e] as usize] {
                if t == s {
                    if n == 1 {
                        leave += c;
                    }
                } else {
                    if self.conn[t as usize] == 0 {
                        self.touched.push(t);
                    }
                    self.conn[t as usize] += c;
                }
            }
        }
        let mut best: Option<(i64, u32)> = None;
        for &t in &self.touched {
            let g = leave - total + self.conn[t as usize];
            self.conn[t as usize] = 0;
            let size = self.sizes[t as usize];
            if size + w <= self.lmax
                && best.is_none_or(|(bg, bt)| g > bg || (g == bg && size < self.sizes[bt as usize]))
            {
                best = Some((g, t));
            }
        }
        self.touched.clear();
        best
    }

    /// Queues `u` with its best move's gain, or takes it out when it has none.
    fn requeue(&mut self, u: u32, part: &[u32]) {
        match (self.best(u as usize, part), self.queue.contains(u)) {
            (Some((g, _)), true) => self.queue.update(0, u, g),
            (Some((g, _)), false) => self.queue.insert(0, u, g),
            (None, true) => self.queue.remove(0, u),
            (None, false) => {}
        }
    }

    /// Moves `v` to part `t`; unless `undoing`, (re)queues the free pins whose best gain may have
    /// risen: all pins of a net that `t` enters, and the last pin of a net in `v`'s old part (it
    /// can now leave that net). These are the vertices a search grows to. Keys that may have
    /// fallen are left: a vertex's gain is computed again when it reaches the top.
    fn apply(&mut self, v: usize, t: u32, part: &mut [u32], undoing: bool) {
        let h = self.h;
        let s = part[v];
        let w = h.vwgt[v] as u64;
        part[v] = t;
        self.sizes[s as usize] -= w;
        self.sizes[t as usize] += w;
        for &e in h.nets(v) {
            let e = e as usize;
            self.sub(e, s);
            self.add(e, t);
            if undoing {
                continue;
            }
            let pins = h.net(e);
            if self.count(e, t) == 1 && pins.len() <= LONG_NET {
                for &u in pins {
                    if !self.locked[u as usize] {
                        self.requeue(u, part);
                    }
                }
            } else if self.count(e, s) == 1 {
                let u = *pins
                    .iter()
                    .find(|&&u| part[u as usize] == s)
                    .expect("one pin left in the old part");
                if !self.locked[u as usize] {
                    self.requeue(u, part);
                }
            }
        }
    }

    /// Passes of localized searches while they gain; returns the total gain (the volume's
    /// decrease). Seeds are the boundary vertices (pins of nets in two parts or more) with a
    /// move of gain `>= 0`, in random order.
    fn refine(
        &mut self,
        part: &mut [u32],
        rng: &mut SplitMix64,
        cancel: Option<&AtomicBool>,
    ) -> u64 {
        let h = self.h;
        let mut gained = 0u64;
        for _ in 0..PASSES {
            if is_set(cancel) {
                break;
            }
            let mut seeds: Vec<u32> = Vec::new();
            for e in 0..h.nn() {
                if self.len[e] >= 2 {
                    for &u in h.net(e) {
                        // `tried` marks the vertices already looked at, until the searches.
                        if !self.tried[u as usize] {
                            self.tried[u as usize] = true;
                            if self.best(u as usize, part).is_some_and(|(g, _)| g >= 0) {
                                seeds.push(u);
                            }
                        }
                    }
                }
            }
            self.tried.fill(false);
            rng.shuffle(&mut seeds);
            let mut kept: Vec<u32> = Vec::new();
            let mut pass = 0u64;
            for &seed in &seeds {
                if !self.tried[seed as usize] {
                    pass += self.search(seed, part, &mut kept);
                }
            }
            for &v in &kept {
                self.locked[v as usize] = false;
            }
            self.tried.fill(false);
            if pass == 0 {
                break;
            }
            gained += pass;
        }
        gained
    }

    /// One localized search from `seed`; keeps (and lists in `kept`, locked) the moves up to
    /// its best state, undoes the rest. Returns its gain (`>= 0`).
    fn search(&mut self, seed: u32, part: &mut [u32], kept: &mut Vec<u32>) -> u64 {
        self.requeue(seed, part);
        let mut moves: Vec<(u32, u32)> = Vec::new();
        let (mut sum, mut best, mut best_len) = (0i64, 0i64, 0usize);
        while let Some((key, v)) = self.queue.top(0) {
            self.queue.remove(0, v);
            let Some((g, t)) = self.best(v as usize, part) else {
                continue;
            };
            if g < key {
                // A stale key (the gain fell since): back in at its true place. Keys only
                // fall this way, so the loop ends.
                self.queue.insert(0, v, g);
                continue;
            }
            let s = part[v as usize];
            self.locked[v as usize] = true;
            self.tried[v as usize] = true;
            self.apply(v as usize, t, part, false);
            moves.push((v, s));
            sum += g;
            if sum > best {
                best = sum;
                best_len = moves.len();
            } else if moves.len() - best_len > PATIENCE {
                break;
            }
        }
        self.queue.clear();
        while moves.len() > best_len {
            let (v, s) = moves.pop().expect("a move to undo");
            self.apply(v as usize, s, part, true);
            self.locked[v as usize] = false;
        }
        kept.extend(moves.iter().map(|&(v, _)| v));
        best as u64
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::metrics::{part_sizes, volume};
    use super::*;

    /// A random `m x n` matrix with about `nnz` distinct nonzeros: a band plus scattered ones.
    fn random_matrix(rng: &mut SplitMix64, m: usize, n: usize, nnz: usize) -> CooMatrix {
        let mut seen = std::collections::HashSet::new();
        let mut e = Vec::new();
        for _ in 0..nnz {
            let i = rng.below(m);
            let j = if rng.below(2) == 0 {
                (i * n / m + rng.below(4)).min(n - 1)
            } else {
                rng.below(n)
            };
            if seen.insert((i, j)) {
                e.push((i, j, 1.0));
            }
        }
        CooMatrix::new(m, n, e).unwrap()
    }

    /// Nonzeros per part, as the bound counts them.
    fn sizes(part: &[u32], p: usize) -> Vec<u64> {
        part_sizes(part, p).into_iter().map(|n| n as u64).collect()
    }

    /// Single moves of positive gain (the volume recomputed from scratch) until none is left:
    /// a partition no greedy pass can improve.
    fn greedy(a: &CooMatrix, part: &mut [u32], p: usize, lmax: u64) {
        let mut vol = volume(a, part, p);
        loop {
            let mut moved = false;
            for k in 0..part.len() {
                let s = part[k];
                for t in 0..p as u32 {
                    if t == s || sizes(part, p)[t as usize] + 1 > lmax {
                        continue;
                    }
                    part[k] = t;
                    let v = volume(a, part, p);
                    if v < vol {
                        vol = v;
                        moved = true;
                        break;
                    }
                    part[k] = s;
                }
            }
            if !moved {
                return;
            }
        }
    }

    /// On random matrices and random partitions (3 to 16 parts, some above the bound): the
    /// returned gain is exactly the drop of the volume recomputed from scratch, no part ends
    /// above the bound unless it started there, and then it did not grow.
    #[test]
    fn the_gain_is_the_volume_drop_and_parts_keep_the_bound() {
        let mut rng = SplitMix64::new(7);
        for case in 0..40 {
            let (m, n) = (20 + rng.below(200), 20 + rng.below(200));
            let a = random_matrix(&mut rng, m, n, 3 * (m + n));
            let p = [3, 4, 8, 16][case % 4];
            let mut part: Vec<u32> = (0..a.nnz()).map(|_| rng.below(p) as u32).collect();
            let lmax = (a.nnz() as u64).div_ceil(p as u64) + rng.below(8) as u64;
            let before = sizes(&part, p);
            let v0 = volume(&a, &part, p);
            let gained = refine(&a, &mut part, p, lmax, &mut rng, None);
            let v1 = volume(&a, &part, p);
            assert_eq!(
                v0 - v1,
                gained,
                "case {case}: books against the recomputed volume"
            );
            assert!(gained > 0, "case {case}: a random partition must improve");
            for (s, (&b, &e)) in before.iter().zip(&sizes(&part, p)).enumerate() {
                assert!(
                    e <= lmax.max(b),
                    "case {case}: part {s} {b} -> {e}, bound {lmax}"
                );
            }
        }
    }

    /// Partitions that no single move of positive gain improves still get better: the
    /// searches pass through moves of zero and negative gain (a pass of greedy moves alone
    /// finds nothing here by construction).
    #[test]
    fn searches_climb_out_of_greedy_minima() {
        let mut rng = SplitMix64::new(11);
        let mut improved = 0;
        for case in 0..12 {
            let a = random_matrix(&mut rng, 40, 40, 160);
            let p = [2, 4, 6][case % 3];
            let lmax = ((a.nnz() as f64 * 1.1 / p as f64).ceil() as u64).max(1);
            let mut part: Vec<u32> = (0..a.nnz()).map(|k| (k * p / a.nnz()) as u32).collect();
            greedy(&a, &mut part, p, lmax);
            let v0 = volume(&a, &part, p);
            let gained = refine(&a, &mut part, p, lmax, &mut rng, None);
            assert_eq!(v0 - volume(&a, &part, p), gained);
            improved += usize::from(gained > 0);
        }
        assert!(
            improved >= 6,
            "only {improved} of 12 greedy minima improved"
        );
    }

    /// The same generator state gives the same partition.
    #[test]
    fn deterministic_for_a_seed() {
        let mut rng = SplitMix64::new(3);
        let a = random_matrix(&mut rng, 300, 300, 3000);
        let start: Vec<u32> = (0..a.nnz()).map(|_| rng.below(8) as u32).collect();
        let run = || {
            let mut part = start.clone();
            refine(&a, &mut part, 8, 400, &mut SplitMix64::new(5), None);
            part
        };
        assert_eq!(run(), run());
    }
}
