//! Fiduccia–Mattheyses refinement of a bipartition, with boundary moves.
//!
//! A pass moves vertices one at a time, each time the free vertex with the largest gain (cut
//! decrease) whose move the balance allows, locks it, and updates its neighbours' gains from the
//! pin counts of its nets (the classic four cases). Moves with negative gain are allowed, so a
//! pass climbs out of local minima; at the end the pass is rolled back to the best state seen.
//! States are compared by (balance violation, cut, distance from the target split). Only
//! vertices on the boundary (in a cut net) enter the priority queues; a vertex joins when a
//! neighbour's move puts it on the boundary. A pass stops early after a run of moves without
//! improvement. Passes repeat while they improve.
//!
//! Gain of `v` on side `s`: `Σ_{e ∋ v} cost(e) · ([pins of e on s = 1] − [pins of e on the other
//! side = 0])`.

use super::hypergraph::Hypergraph;
use std::sync::atomic::{AtomicBool, Ordering};

/// The two priority queues of a bipartition (one per side): addressable binary max-heaps of
/// vertices keyed by gain, sharing one position array. Sharing is sound because a vertex is
/// queued on at most one side, its own: it changes side only after leaving its queue (a move
/// removes it first; a rollback clears both queues first). One array instead of two halves
/// the memory that the boundary scans touch, and `contains` needs no side lookup. The k-way
/// refinement (`kway_fm`) uses side 0 alone, as one addressable heap.
pub(super) struct Queues {
    items: [Vec<(i64, u32)>; 2],
    /// Index of each vertex in its side's `items`, or `ABSENT`.
    pos: Vec<u32>,
}

const ABSENT: u32 = u32::MAX;

impl Queues {
    pub(super) fn new(n: usize) -> Self {
        Queues {
            items: [Vec::new(), Vec::new()],
            pos: vec![ABSENT; n],
        }
    }

    /// Whether `v` is queued (on its own side).
    pub(super) fn contains(&self, v: u32) -> bool {
        self.pos[v as usize] != ABSENT
    }

    pub(super) fn top(&self, s: usize) -> Option<(i64, u32)> {
        self.items[s].first().copied()
    }

    pub(super) fn insert(&mut self, s: usize, v: u32, key: i64) {
        self.items[s].push((key, v));
        let i = self.items[s].len() - 1;
        self.pos[v as usize] = i as u32;
        self.up(s, i);
    }

    /// New key of `v`, queued on side `s`.
    pub(super) fn update(&mut self, s: usize, v: u32, key: i64) {
        let i = self.pos[v as usize] as usize;
        let old = self.items[s][i].0;
        self.items[s][i].0 = key;
        if key > old {
            self.up(s, i);
        } else {
            self.down(s, i);
        }
    }

    /// Takes `v`, queued on side `s`, out.
    pub(super) fn remove(&mut self, s: usize, v: u32) {
        let i = self.pos[v as usize] as usize;
        self.pos[v as usize] = ABSENT;
        let last = self.items[s].pop().expect("heap not empty");
        if i < self.items[s].len() {
            let old = self.items[s][i].0;
            self.items[s][i] = last;
            self.pos[last.1 as usize] = i as u32;
            if last.0 > old {
                self.up(s, i);
            } else {
                self.down(s, i);
            }
        }
    }

    pub(super) fn clear(&mut self) {
        for items in &mut self.items {
            for &(_, v) in items.iter() {
                self.pos[v as usize] = ABSENT;
            }
            items.clear();
        }
    }

    // Sifting moves the parents (children) into a hole and writes the sifted item once, where
    // swapping would write it at every level: the same comparisons and the same final heap.
    fn up(&mut self, s: usize, mut i: usize) {
        let items = &mut self.items[s];
        let item = items[i];
        while i > 0 {
            let parent = (i - 1) / 2;
            if items[parent].0 >= item.0 {
                break;
            }
            items[i] = items[parent];
            self.pos[items[i].1 as usize] = i as u32;
            i = parent;
        }
        items[i] = item;
        self.pos[item.1 as usize] = i as u32;
    }

    fn down(&mut self, s: usize, mut i: usize) {
        let items = &mut self.items[s];
        let item = items[i];
        loop {
            let l = 2 * i + 1;
            if l >= items.len() {
                break;
            }
            let r = l + 1;
            let c = if r < items.len() && items[r].0 > items[l].0 {
                r
            } else {
                l
            };
            if item.0 >= items[c].0 {
                break;
            }
            items[i] = items[c];
            self.pos[items[i].1 as usize] = i as u32;
            i = c;
        }
        items[i] = item;
        self.pos[item.1 as usize] = i as u32;
    }
}

/// Whether a stop flag ([`Options::cancel`](super::Options::cancel)) is given and set.
pub(crate) fn is_set(flag: Option<&AtomicBool>) -> bool {
    flag.is_some_and(|c| c.load(Ordering::Relaxed))
}

/// Balance bounds of a bipartition: side `s` may weigh at most `max[s]`; `target[s]` is the
/// ideal weight (used to prefer the more even of two equally cut states).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds<'c> {
    pub max: [u64; 2],
    pub target: [u64; 2],
    /// The caller's stop flag ([`Options::cancel`](super::Options::cancel)).
    pub cancel: Option<&'c AtomicBool>,
}

impl Bounds<'_> {
    /// Whether the caller asked to stop: every loop of the partitioner that repeats a pass
    /// over the hypergraph looks here first and stops early (with a valid, poorer split that
    /// `partition` then throws away).
    pub fn cancelled(&self) -> bool {
        is_set(self.cancel)
    }

    fn violation(&self, w: [u64; 2]) -> u64 {
        w[0].saturating_sub(self.max[0]) + w[1].saturating_sub(self.max[1])
    }

    fn deviation(&self, w: [u64; 2]) -> u64 {
        w[0].abs_diff(self.target[0])
    }

    /// The (violation, cut, deviation) key by which states are compared; smaller is better.
    pub fn key(&self, w: [u64; 2], cut: u64) -> (u64, u64, u64) {
        (self.violation(w), cut, self.deviation(w))
    }
}

/// Reusable refinement state: pin counts per net and side, gains, locks, queues.
///
/// Besides its pin count, each net keeps the XOR of the ids of its pins on each side: when a
/// side holds one pin of the net, that XOR is the pin, so the lone pin whose gain a move
/// changes is found without scanning the net.
pub(crate) struct Fm<'h> {
    h: &'h Hypergraph,
    count: Vec<[u32; 2]>,
    lone: Vec<[u32; 2]>,
    gain: Vec<i64>,
    locked: Vec<bool>,
    queues: Queues,
    w: [u64; 2],
    cut: u64,
    /// Rolling back a pass: gains are updated, queues are left alone.
    undoing: bool,
    /// The cut nets at the start of a pass (a buffer kept between passes).
    cut_nets: Vec<u32>,
}

impl<'h> Fm<'h> {
    pub fn new(h: &'h Hypergraph) -> Self {
        Fm {
            h,
            count: vec![[0, 0]; h.nn()],
            lone: vec![[0, 0]; h.nn()],
            gain: vec![0; h.nv()],
            locked: vec![false; h.nv()],
            queues: Queues::new(h.nv()),
            w: [0, 0],
            cut: 0,
            undoing: false,
            cut_nets: Vec::new(),
        }
    }

    /// Counts, XORs, cut and gains of `side`, in one pass over the nets: a pin's gain is the sum
    /// over its nets of `+cost` where it is its side's lone pin (found by the XOR) and `-cost`
    /// where the net is uncut, so each net hands out its terms while its pins are in cache.
    fn init(&mut self, side: &[u8]) {
        let h = self.h;
        self.w = h.side_weights(side);
        self.cut = 0;
        self.gain.fill(0);
        for e in 0..h.nn() {
            // Scalars, not arrays indexed by the side: an array built by indexed stores and
            // read back whole waits on store forwarding, in the partitioner's hottest loops.
            let pins = h.net(e);
            let (mut ones, mut x_all, mut x1) = (0u32, 0u32, 0u32);
            for &v in pins {
                let s = side[v as usize] as u32;
                ones += s;
                x_all ^= v;
                x1 ^= v & s.wrapping_neg();
            }
            let c = [pins.len() as u32 - ones, ones];
            let x = [x_all ^ x1, x1];
            self.count[e] = c;
            self.lone[e] = x;
            let cost = h.ncost[e] as i64;
            for s in 0..2 {
                if c[s] == 1 {
                    self.gain[x[s] as usize] += cost;
                }
            }
            if c[0] > 0 && c[1] > 0 {
                self.cut += cost as u64;
            } else {
                for &v in pins {
                    self.gain[v as usize] -= cost;
                }
            }
        }
    }

    /// Moves `v` to the other side and updates counts, gains, weights and the cut. `v` must not
    /// be queued (the queues' invariant), unless the queues are ignored (rolling back).
    fn apply(&mut self, v: usize, side: &mut [u8]) {
        debug_assert!(self.undoing || !self.queues.contains(v as u32));
        let h = self.h;
        let s = side[v] as usize;
        let t = 1 - s;
        self.cut = (self.cut as i64 - self.gain[v]) as u64;
        self.w[s] -= h.vwgt[v] as u64;
        self.w[t] += h.vwgt[v] as u64;
        side[v] = t as u8;
        // Moving back would undo this move exactly.
        self.gain[v] = -self.gain[v];
        for &e in h.nets(v) {
            let e = e as usize;
            let cost = h.ncost[e] as i64;
            // The counts as scalars (see `init`).
            let [c0, c1] = self.count[e];
            let (cs, ct) = if s == 0 { (c0, c1) } else { (c1, c0) };
            if ct == 0 {
                // The net was uncut: every other pin now gains by following `v`.
                for &u in h.net(e) {
                    if u as usize != v {
                        self.bump(u as usize, cost, side);
                    }
                }
            } else if ct == 1 {
                // The lone pin on `t` no longer uncuts the net by leaving.
                self.bump(self.lone[e][t] as usize, -cost, side);
            }
            // `v` leaves one side's XOR and joins the other's.
            let x = &mut self.lone[e];
            x[0] ^= v as u32;
            x[1] ^= v as u32;
            let (cs, ct) = (cs - 1, ct + 1);
            self.count[e] = if s == 0 { [cs, ct] } else { [ct, cs] };
            if cs == 0 {
                // The net is now uncut: moving any pin would cut it.
                for &u in h.net(e) {
                    if u as usize != v {
                        self.bump(u as usize, -cost, side);
                    }
                }
            } else if cs == 1 {
                // The lone pin left on `s` would uncut the net by leaving.
                self.bump(self.lone[e][s] as usize, cost, side);
            }
        }
    }

    /// Adds `delta` to the gain of `u`; a free vertex enters its side's queue if absent.
    fn bump(&mut self, u: usize, delta: i64, side: &[u8]) {
        self.gain[u] += delta;
        if self.locked[u] || self.undoing {
            return;
        }
        let s = side[u] as usize;
        if self.queues.contains(u as u32) {
            self.queues.update(s, u as u32, self.gain[u]);
        } else {
            self.queues.insert(s, u as u32, self.gain[u]);
        }
    }

    /// Refines `side` in place; returns the final cut. `max_passes` bounds the work.
    pub fn refine(&mut self, side: &mut [u8], b: &Bounds, max_passes: usize) -> u64 {
        let h = self.h;
        let nv = h.nv();
        self.init(side);
        // A pass gives up after this many moves without a new best state.
        let patience = (nv / 4).clamp(25, 400);
        for _ in 0..max_passes {
            if b.cancelled() {
                break;
            }
            let start_key = b.key(self.w, self.cut);
            // The boundary: pins of cut nets. (When a side is too heavy and there is no
            // boundary, pick() floods the queue with that side's vertices.)
            // The cut nets are listed first without a branch on whether each is cut: that
            // branch is unpredictable, and this scan runs once per pass over every net.
            let mut cut_nets = std::mem::take(&mut self.cut_nets);
            cut_nets.resize(h.nn(), 0);
            let mut k = 0;
            for (e, c) in self.count.iter().enumerate() {
                cut_nets[k] = e as u32;
                k += usize::from((c[0] != 0) & (c[1] != 0));
            }
            for &e in &cut_nets[..k] {
                for &u in h.net(e as usize) {
                    if !self.queues.contains(u) {
                        let s = side[u as usize] as usize;
                        self.queues.insert(s, u, self.gain[u as usize]);
                    }
                }
            }
            self.cut_nets = cut_nets;
            let mut flooded = false;
            let mut moves: Vec<u32> = Vec::new();
            let mut best_key = start_key;
            let mut best_len = 0usize;
            let mut deferred: Vec<u32> = Vec::new();
            while let Some(v) = self.pick(b, side, &mut deferred, &mut flooded) {
                self.queues.remove(side[v] as usize, v as u32);
                self.locked[v] = true;
                self.apply(v, side);
                moves.push(v as u32);
                let key = b.key(self.w, self.cut);
                if key < best_key {
                    best_key = key;
                    best_len = moves.len();
                } else if moves.len() - best_len > patience {
                    break;
                }
            }
            // Undo the moves after the best state, keeping gains exact (no queue insertions);
            // the vertices moved back are free again for the next pass, as are the kept ones.
            self.queues.clear();
            self.undoing = true;
            while moves.len() > best_len {
                let v = moves.pop().unwrap() as usize;
                self.apply(v, side);
                self.locked[v] = false;
            }
            self.undoing = false;
            for &v in &moves {
                self.locked[v as usize] = false;
            }
            for v in deferred.drain(..) {
                self.locked[v as usize] = false;
            }
            if best_key >= start_key {
                break;
            }
        }
        self.cut
    }

    /// The next vertex to move: the best-gain free vertex whose move the balance allows. A
    /// queue top that may not move is set aside (locked) for the rest of the pass.
    ///
    /// Only boundary vertices are queued, so a side grown from one vertex while the other is
    /// too heavy grows contiguously (a far-away vertex of low degree would otherwise often
    /// have the better gain); if the boundary runs dry while a side is still too heavy, all
    /// of that side's free vertices are queued once.
    fn pick(
        &mut self,
        b: &Bounds,
        side: &[u8],
        deferred: &mut Vec<u32>,
        flooded: &mut bool,
    ) -> Option<usize> {
        let h = self.h;
        loop {
            let mut best: Option<(i64, usize)> = None;
            let mut blocked: Option<(usize, usize)> = None;
            for s in 0..2 {
                let Some((g, v)) = self.queues.top(s) else {
                    continue;
                };
                let v = v as usize;
                let t = 1 - s;
                let w = h.vwgt[v] as u64;
                let allowed = self.w[t] + w <= b.max[t] || self.w[s] > b.max[s];
                // When a side is too heavy, only moves out of it count.
                let needed = b.violation(self.w) == 0 || self.w[s] > b.max[s];
                if allowed && needed {
                    if best.is_none_or(|(bg, _)| g > bg) {
                        best = Some((g, v));
                    }
                } else if blocked.is_none() {
                    blocked = Some((s, v));
                }
            }
            if let Some((_, v)) = best {
                return Some(v);
            }
            if blocked.is_none() && !*flooded && b.violation(self.w) > 0 {
                *flooded = true;
                let heavy = if self.w[0] > b.max[0] { 0 } else { 1 };
                for (v, &s) in side.iter().enumerate() {
                    if s as usize == heavy && !self.locked[v] && !self.queues.contains(v as u32) {
                        self.queues.insert(heavy, v as u32, self.gain[v]);
                    }
                }
                continue;
            }
            let (s, v) = blocked?;
            self.queues.remove(s, v as u32);
            self.locked[v] = true;
            deferred.push(v as u32);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::seeded_rng;
    use super::*;
    use mbsp::rng::SplitMix64;

    fn random_hypergraph(rng: &mut SplitMix64) -> Hypergraph {
        super::super::hypergraph::samples::random(rng, 2, 30, 40)
    }

    /// Bounds of an even split of `h`, each side allowed `slack` over half.
    fn halves(h: &Hypergraph, slack: u64) -> Bounds<'static> {
        let total = h.total_weight();
        let half = total / 2;
        Bounds {
            max: [half + slack, total - half + slack],
            target: [half, total - half],
            cancel: None,
        }
    }

    /// Gain of moving `v`, by recomputing the cut.
    fn brute_gain(h: &Hypergraph, side: &[u8], v: usize) -> i64 {
        let mut flipped = side.to_vec();
        flipped[v] ^= 1;
        h.cut(side) as i64 - h.cut(&flipped) as i64
    }

    #[test]
    fn gains_and_cut_match_brute_force_through_moves_and_rollback() {
        let mut rng = seeded_rng(7);
        for _ in 0..300 {
            let h = random_hypergraph(&mut rng);
            let mut side: Vec<u8> = (0..h.nv()).map(|_| rng.below(2) as u8).collect();
            let mut fm = Fm::new(&h);
            fm.init(&side);
            let mut moved = Vec::new();
            for step in 0..10 {
                for v in 0..h.nv() {
                    assert_eq!(
                        fm.gain[v],
                        brute_gain(&h, &side, v),
                        "vertex {v} after {step} moves"
                    );
                }
                assert_eq!(fm.cut, h.cut(&side));
                assert_eq!(fm.w, h.side_weights(&side));
                // As pick() does: a vertex leaves its queue before it moves.
                let v = rng.below(h.nv());
                if fm.queues.contains(v as u32) {
                    fm.queues.remove(side[v] as usize, v as u32);
                }
                fm.apply(v, &mut side);
                moved.push(v);
                // Every queued vertex sits in its own side's queue under its current gain.
                for (s, items) in fm.queues.items.iter().enumerate() {
                    for (i, &(key, u)) in items.iter().enumerate() {
                        assert_eq!(side[u as usize] as usize, s, "vertex {u} queued on {s}");
                        assert_eq!(fm.queues.pos[u as usize] as usize, i);
                        assert_eq!(key, fm.gain[u as usize]);
                    }
                }
            }
            // Rolling back keeps the books exact too.
            fm.undoing = true;
            while let Some(v) = moved.pop() {
                fm.apply(v, &mut side);
                for u in 0..h.nv() {
                    assert_eq!(fm.gain[u], brute_gain(&h, &side, u));
                }
                assert_eq!(fm.cut, h.cut(&side));
            }
        }
    }

    #[test]
    fn refine_never_worsens_and_reports_the_true_cut() {
        let mut rng = seeded_rng(11);
        for _ in 0..300 {
            let h = random_hypergraph(&mut rng);
            let b = halves(&h, 3);
            let mut side: Vec<u8> = (0..h.nv()).map(|_| rng.below(2) as u8).collect();
            let before = b.key(h.side_weights(&side), h.cut(&side));
            let cut = Fm::new(&h).refine(&mut side, &b, 8);
            assert_eq!(cut, h.cut(&side));
            let after = b.key(h.side_weights(&side), cut);
            assert!(after <= before, "{after:?} worse than {before:?}");
        }
    }

    /// A refinement depends on its start alone, not on what the same `Fm` refined before:
    /// every pass starts with every vertex free (the vertices a pass moved back included), so
    /// `initial` may skip a start it has already refined, and a reused `Fm` finds what a fresh
    /// one finds.
    #[test]
    fn refine_leaves_no_vertex_locked_behind() {
        let mut rng = seeded_rng(13);
        for _ in 0..300 {
            let h = random_hypergraph(&mut rng);
            let b = halves(&h, 2);
            let mut reused = Fm::new(&h);
            for _ in 0..4 {
                let start: Vec<u8> = (0..h.nv()).map(|_| rng.below(2) as u8).collect();
                let mut a = start.clone();
                let mut c = start;
                let cut_a = reused.refine(&mut a, &b, 8);
                let cut_c = Fm::new(&h).refine(&mut c, &b, 8);
                assert_eq!((cut_a, &a), (cut_c, &c));
                assert!(reused.locked.iter().all(|&l| !l), "a vertex stayed locked");
            }
        }
    }
}
