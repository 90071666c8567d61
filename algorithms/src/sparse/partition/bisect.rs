//! Multilevel hypergraph bipartitioning: coarsen, split the coarsest hypergraph, refine on the
//! way back up.
//!
//! Coarsening ([`super::coarsen`]) repeats until a few hundred vertices remain or a step stops
//! shrinking the hypergraph. The coarsest hypergraph is split several times — greedy growing
//! from a random vertex and random balanced splits, each followed by FM — and the best split is
//! kept. Each level's split is projected to the finer level and refined by FM ([`super::fm`]).
//!
//! Given a starting bipartition instead, the same V-cycle refines it: clusters stay within a
//! side, the coarsest level starts from the projection, and no level ever makes the split worse
//! (FM returns to its best state), so the result is never worse than the start.

use super::coarsen::cluster;
use super::flow;
use super::fm::{Bounds, Fm};
use super::hypergraph::Hypergraph;
use super::seeded_rng;
use mbsp::rng::SplitMix64;
use rayon::prelude::*;
use std::sync::Mutex;

/// Coarsening stops at this many vertices.
const COARSEST: usize = 200;
/// Initial splits tried at the coarsest level.
const TRIES: usize = 8;
/// With flows, the coarse levels of more vertices than this are left to FM: a flow's cost
/// grows faster than its region, and on the shared matrices flows on larger levels found no
/// lower volumes, with either maximum-flow algorithm (docs/benchmarks.md).
const FLOW_LEVEL_MAX: usize = 20_000;
/// FM passes per level.
pub(crate) const PASSES: usize = 8;

/// The coarsening of a hypergraph: the levels, the clusterings between them, and (when
/// refining) the projection of the starting split onto the coarsest level.
struct Hierarchy<'h> {
    top: &'h Hypergraph,
    levels: Vec<Hypergraph>,
    maps: Vec<Vec<u32>>,
    coarse_side: Option<Vec<u8>>,
}

impl<'h> Hierarchy<'h> {
    fn new(h: &'h Hypergraph, mut side: Option<Vec<u8>>, b: &Bounds, rng: &mut SplitMix64) -> Self {
        let total = h.total_weight();
        let max_cluster = ((total as f64 * 1.5 / COARSEST as f64).ceil() as u64).max(1);
        let mut levels: Vec<Hypergraph> = Vec::new();
        let mut maps: Vec<Vec<u32>> = Vec::new();
        loop {
            let cur = levels.last().unwrap_or(h);
            if cur.nv() <= COARSEST || b.cancelled() {
                break;
            }
            let (cmap, nc) = cluster(cur, max_cluster, side.as_deref(), rng);
            if nc as f64 > 0.95 * cur.nv() as f64 {
                break;
            }
            let coarse = cur.contract(&cmap, nc);
            if let Some(s) = &side {
                let mut cs = vec![0u8; nc];
                for (v, &c) in cmap.iter().enumerate() {
                    cs[c as usize] = s[v];
                }
                side = Some(cs);
            }
            levels.push(coarse);
            maps.push(cmap);
        }
        Hierarchy {
            top: h,
            levels,
            maps,
            coarse_side: side,
        }
    }

    fn coarsest(&self) -> &Hypergraph {
        self.levels.last().unwrap_or(self.top)
    }

    /// Projects splits of the coarsest level back to the top, all in step (in parallel),
    /// refining each on every level by FM and, with `flows`, on the coarse levels of at most
    /// `FLOW_LEVEL_MAX` vertices by max-flow refinement too (then FM again). A coarse level's
    /// flow region holds heavy vertices, so it reaches far in few nodes and finds cuts FM
    /// cannot; the top level is left to the caller, whose split is refined further before its
    /// own flow rounds (`medium::split`).
    ///
    /// With `narrow`, only the best split on the level below the top goes on to the top level
    /// (the first of equals): there the ranking of the splits rarely changes (on the shared
    /// matrices the volumes came out the same on the whole), and the top level costs as much
    /// as all the levels below it together. Without a level between the coarsest and the top,
    /// the best on the top is returned; without any coarsening, every split.
    fn uncoarsen(
        &self,
        mut sides: Vec<Vec<u8>>,
        b: &Bounds,
        flows: bool,
        narrow: bool,
    ) -> Vec<Vec<u8>> {
        for k in (0..self.levels.len()).rev() {
            let finer = if k == 0 {
                self.top
            } else {
                &self.levels[k - 1]
            };
            let map = &self.maps[k];
            let refined: Vec<((u64, u64, u64), Vec<u8>)> = sides
                .into_par_iter()
                .map(|side| {
                    let mut fine: Vec<u8> = map.iter().map(|&c| side[c as usize]).collect();
                    let mut fm = Fm::new(finer);
                    let mut cut = fm.refine(&mut fine, b, PASSES);
                    if flows
                        && k > 0
                        && finer.nv() <= FLOW_LEVEL_MAX
                        && flow::refine(finer, b, &mut fine)
                    {
                        cut = fm.refine(&mut fine, b, PASSES);
                    }
                    (b.key(finer.side_weights(&fine), cut), fine)
                })
                .collect();
            // (With a single level below the coarsest, the ranking is made on the top level.)
            sides = if narrow && k <= 1 {
                let best = refined.iter().map(|(key, _)| *key).min();
                let first = refined.into_iter().find(|(key, _)| Some(*key) == best);
                first.map(|(_, side)| side).into_iter().collect()
            } else {
                refined.into_iter().map(|(_, side)| side).collect()
            };
        }
        sides
    }
}

/// Refines the bipartition `start` of `h` within `b` by a V-cycle; never makes it worse.
pub(crate) fn refine(h: &Hypergraph, b: &Bounds, start: Vec<u8>, rng: &mut SplitMix64) -> Vec<u8> {
    let hi = Hierarchy::new(h, Some(start), b, rng);
    let mut s = hi.coarse_side.clone().expect("a starting split");
    Fm::new(hi.coarsest()).refine(&mut s, b, PASSES);
    let mut top = hi.uncoarsen(vec![s], b, false, false);
    top.pop().expect("one split in, one out")
}

/// Bipartitions `h` within `b` `tries` times (in parallel) from one coarsening and different
/// initial splits; returns the side (0 or 1) of every vertex for each try whose initial split
/// differs from the earlier tries' (at least one). With `flows`, the coarse levels are refined
/// by max-flow refinement too (the quality setting); with `narrow`, only the best of them is
/// refined on the top level and returned (see `Hierarchy::uncoarsen`).
pub(crate) fn bisect(
    h: &Hypergraph,
    b: &Bounds,
    tries: usize,
    flows: bool,
    narrow: bool,
    rng: &mut SplitMix64,
) -> Vec<Vec<u8>> {
    let hi = Hierarchy::new(h, None, b, rng);
    let seeds: Vec<u64> = (0..tries).map(|_| rng.next_u64()).collect();
    let grown = Grown::default();
    let starts: Vec<Vec<u8>> = seeds
        .par_iter()
        .map(|&seed| initial(hi.coarsest(), b, &grown, &mut seeded_rng(seed)))
        .collect();
    // On a small coarsest level different tries often end in the same split; uncoarsening
    // depends on nothing else, so each distinct split is uncoarsened once.
    let mut distinct: Vec<Vec<u8>> = Vec::with_capacity(starts.len());
    for s in starts {
        if !distinct.contains(&s) {
            distinct.push(s);
        }
    }
    hi.uncoarsen(distinct, b, flows, narrow)
}

/// The splits grown from single vertices of one coarsest level and refined by FM, shared by
/// the tries of one bisection ([`initial`]): growing and refining depend on nothing but the
/// vertex (FM starts each refinement from a clean state), so a try that grows from a vertex
/// another try grew from takes that split instead of growing it again. Different tries often
/// grow from the same vertex: a BFS's last vertex is the same from many starts (a mesh's rim).
/// Two tries that grow from one vertex at the same time both compute it and store the same
/// split, so what a try gets does not depend on the threads' timing.
#[derive(Default)]
struct Grown {
    known: Mutex<Vec<(usize, Start)>>,
    /// Splits taken from another try (tests check that tries do share).
    #[cfg(test)]
    hits: std::sync::atomic::AtomicUsize,
}

/// An initial split and its (violation, cut, deviation) key.
type Start = ((u64, u64, u64), Vec<u8>);

impl Grown {
    /// The split grown from `seed`: stored by an earlier try, else `grow()` stored.
    fn get_or(&self, seed: usize, grow: impl FnOnce() -> Start) -> Start {
        let known = |list: &[(usize, Start)]| {
            list.iter()
                .find(|(v, _)| *v == seed)
                .map(|(_, start)| start.clone())
        };
        if let Some(start) = known(&self.known.lock().expect("no panic while held")) {
            #[cfg(test)]
            self.hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return start;
        }
        let start = grow();
        let mut list = self.known.lock().expect("no panic while held");
        if known(&list).is_none() {
            list.push((seed, start.clone()));
        }
        start
    }
}

/// The best of several initial splits of a small hypergraph.
fn initial(h: &Hypergraph, b: &Bounds, shared: &Grown, rng: &mut SplitMix64) -> Vec<u8> {
    let nv = h.nv();
    let mut fm = Fm::new(h);
    let mut best: Option<Start> = None;
    // A vertex this try (or another) grew from already gives the split it gave then, from
    // `shared`, which cannot replace the best (only a strictly better one does).
    for t in 0..TRIES {
        let mut side = vec![0u8; nv];
        let mut from = None;
        if nv > 0 {
            match t % 4 {
                0..=2 => {
                    // Greedy growing: side 1 starts as one vertex; FM, seeing side 0 too heavy,
                    // moves the best-connected vertices across until the split is balanced.
                    // Two tries in four from a vertex far from a random one (a BFS's last
                    // vertex): grown from the rim of a mesh, the part has one boundary, not two;
                    // one from the random vertex itself; the fourth is a random split.
                    let start = rng.below(nv);
                    let seed = if t % 4 == 2 {
                        start
                    } else {
                        farthest(h, start)
                    };
                    side[seed] = 1;
                    from = Some(seed);
                }
                _ => {
                    let mut order: Vec<u32> = (0..nv as u32).collect();
                    rng.shuffle(&mut order);
                    let mut w0 = 0u64;
                    for &v in &order {
                        if w0 < b.target[0] {
                            w0 += h.vwgt[v as usize] as u64;
                        } else {
                            side[v as usize] = 1;
                        }
                    }
                }
            }
        }
        let refine = || {
            let cut = fm.refine(&mut side, b, PASSES);
            (b.key(h.side_weights(&side), cut), side)
        };
        let (key, side) = match from {
            Some(seed) => shared.get_or(seed, refine),
            None => refine(),
        };
        if best.as_ref().is_none_or(|(k, _)| key < *k) {
            best = Some((key, side));
        }
    }
    best.map(|(_, s)| s).unwrap_or_default()
}

/// The vertex a breadth-first search from `start` reaches last (a pseudo-peripheral vertex).
fn farthest(h: &Hypergraph, start: usize) -> usize {
    let mut seen = vec![false; h.nv()];
    let mut net_done = vec![false; h.nn()];
    let mut queue = std::collections::VecDeque::from([start]);
    seen[start] = true;
    let mut last = start;
    while let Some(v) = queue.pop_front() {
        last = v;
        for &e in h.nets(v) {
            if std::mem::replace(&mut net_done[e as usize], true) {
                continue;
            }
            for &u in h.net(e as usize) {
                if !std::mem::replace(&mut seen[u as usize], true) {
                    queue.push_back(u as usize);
                }
            }
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::hypergraph::samples::{path, random};

    #[test]
    fn a_path_is_cut_once() {
        for n in [50, 200, 1000, 5000] {
            let h = path(n);
            let half = n as u64 / 2;
            let b = Bounds {
                max: [half + n as u64 / 30, half + n as u64 / 30],
                target: [half, n as u64 - half],
                cancel: None,
            };
            for seed in 0..5 {
                for side in bisect(&h, &b, 3, false, false, &mut seeded_rng(seed)) {
                    assert_eq!(h.cut(&side), 1, "n = {n}, seed {seed}");
                }
            }
        }
    }

    /// Even halves of `h`'s weight, each side allowed up to 52% of it.
    fn halves_within_52(h: &Hypergraph) -> Bounds<'static> {
        let total = h.total_weight();
        Bounds {
            max: [total * 52 / 100, total * 52 / 100],
            target: [total / 2, total - total / 2],
            cancel: None,
        }
    }

    /// Narrowed, a bisection returns one split (all of them only when nothing was coarsened),
    /// and it is one of the splits the same tries return unnarrowed: each try's path up the
    /// levels depends on nothing else, narrowing only stops the others below the top.
    #[test]
    fn narrowing_keeps_one_of_the_tries() {
        let mut rng = seeded_rng(5);
        let mut several = 0;
        for case in 0..40 {
            let h = random(&mut rng, 600, 900, 1500);
            let b = halves_within_52(&h);
            let all = bisect(&h, &b, 3, false, false, &mut seeded_rng(case));
            let one = bisect(&h, &b, 3, false, true, &mut seeded_rng(case));
            assert!(
                one.iter().all(|s| all.contains(s)),
                "case {case}: not one of the tries"
            );
            assert!(
                one.len() == 1 || one == all,
                "case {case}: {} splits",
                one.len()
            );
            several += usize::from(all.len() > 1 && one.len() == 1);
        }
        assert!(several > 0, "no case had two distinct tries");
    }

    /// A try that grows from a vertex another try grew from takes that try's split, and it is
    /// exactly the split it would have grown itself: sharing changes the work, not the result.
    /// On a path every BFS ends at one of its two ends, so tries grow from the same vertices.
    #[test]
    fn tries_share_grown_splits_without_changing_them() {
        let mut rng = seeded_rng(3);
        let mut graphs = vec![path(300), path(1000)];
        graphs.extend((0..20).map(|_| random(&mut rng, 150, 250, 400)));
        let mut hits = 0;
        for (case, h) in graphs.iter().enumerate() {
            let b = halves_within_52(h);
            let shared = Grown::default();
            for t in 0..4 {
                let seed = (case * 10 + t) as u64;
                let alone = initial(h, &b, &Grown::default(), &mut seeded_rng(seed));
                let with = initial(h, &b, &shared, &mut seeded_rng(seed));
                assert_eq!(alone, with, "case {case}, try {t}");
            }
            hits += shared.hits.load(std::sync::atomic::Ordering::Relaxed);
        }
        assert!(hits > 0, "no try took a split another had grown");
    }

    /// With flows on the coarse levels (the quality setting), every try is still a split
    /// within the bounds, a path is still cut once, and the flows change the outcome on some
    /// of the hypergraphs (they run: the coarse levels have cuts to improve).
    #[test]
    fn flows_on_coarse_levels_keep_every_try_within_bounds() {
        let h = path(3000);
        let b = Bounds {
            max: [1550, 1550],
            target: [1500, 1500],
            cancel: None,
        };
        for side in bisect(&h, &b, 3, true, false, &mut seeded_rng(7)) {
            assert_eq!(h.cut(&side), 1);
        }
        let mut rng = seeded_rng(11);
        let mut changed = 0;
        for case in 0..40 {
            let h = random(&mut rng, 600, 900, 1500);
            let b = halves_within_52(&h);
            let plain = bisect(&h, &b, 2, false, false, &mut seeded_rng(case));
            let flows = bisect(&h, &b, 2, true, false, &mut seeded_rng(case));
            for side in &flows {
                let w = h.side_weights(side);
                assert!(w[0] <= b.max[0] && w[1] <= b.max[1], "case {case}: {w:?}");
            }
            changed += usize::from(plain != flows);
        }
        assert!(changed > 0, "the flows changed no split in 40 cases");
    }
}
