//! Max-flow refinement of a bipartition (the method of KaHyPar-MF: Heuer, Sanders & Schlag,
//! "Network flow-based refinement for multilevel hypergraph partitioning", 2018).
//!
//! FM moves one vertex at a time and stops in local minima; a minimum cut of a region around
//! the cut finds the best cut of that whole region at once. The region: on each side, vertices
//! grown breadth-first from the pins of cut nets while their weight fits `alpha` times the
//! other side's slack (`max[other] − w[other]`). Everything outside the region stays put: side
//! 0's rest becomes the source, side 1's the sink. Each net touching the region becomes
//! Lawler's pair of nodes `e_in → e_out` with capacity `cost(e)`, every pin `u → e_in` and
//! `e_out → u` with infinite capacity; a minimum `s`–`t` cut then cuts exactly the nets a
//! bipartition cuts. Nets with pins outside the region on both sides are cut whatever happens
//! and are left out. The maximum flow comes from two search trees (module `search_trees`:
//! Boykov and Kolmogorov's algorithm, which keeps its trees between augmentations); Dinic's,
//! which rebuilds a level graph per phase, took much longer on large regions
//! (docs/benchmarks.md) and stays as the tests' reference.
//!
//! Balance: at `alpha = 1` every minimum cut is a feasible split (side 0 can at most gain side
//! 1's region, whose weight fits side 0's slack, and the other way round). Larger regions hold
//! better cuts, so the region starts larger and, among all minimum cuts, the one closest to the
//! target weights is taken (the residual network's components in topological order); if none
//! is feasible, the next smaller region is tried. A cut is taken only if it beats the split
//! given.

mod search_trees;

use super::fm::Bounds;
use super::hypergraph::Hypergraph;
use std::collections::VecDeque;

const INF: u64 = u64::MAX / 4;
const NONE: u32 = u32::MAX;

/// A flow network in compressed form: the arcs of every node, each with its reverse.
struct Network {
    /// `first[x]..first[x + 1]` indexes the arcs leaving node `x`.
    first: Vec<u32>,
    head: Vec<u32>,
    /// The index of each arc's reverse.
    rev: Vec<u32>,
    cap: Vec<u64>,
}

impl Network {
    /// Builds the network of `n` nodes from arcs `(from, to, capacity)`; each gets a reverse
    /// arc of capacity 0.
    fn new(n: usize, arcs: &[(u32, u32, u64)]) -> Self {
        let mut first = vec![0u32; n + 1];
        for &(a, b, _) in arcs {
            first[a as usize + 1] += 1;
            first[b as usize + 1] += 1;
        }
        for x in 0..n {
            first[x + 1] += first[x];
        }
        let m = 2 * arcs.len();
        let mut fill = first[..n].to_vec();
        let (mut head, mut rev, mut cap) = (vec![0u32; m], vec![0u32; m], vec![0u64; m]);
        for &(a, b, c) in arcs {
            let i = fill[a as usize];
            fill[a as usize] += 1;
            let j = fill[b as usize];
            fill[b as usize] += 1;
            (head[i as usize], rev[i as usize], cap[i as usize]) = (b, j, c);
            (head[j as usize], rev[j as usize], cap[j as usize]) = (a, i, 0);
        }
        Network {
            first,
            head,
            rev,
            cap,
        }
    }

    fn nodes(&self) -> usize {
        self.first.len() - 1
    }

    /// Dinic's maximum flow from `s` to `t`, at most `limit`. Capacities become residual
    /// capacities. The reference the search trees (module `search_trees`, which the
    /// refinement uses) are tested against: an independent algorithm for the same value.
    #[cfg(test)]
    fn max_flow(&mut self, s: usize, t: usize, limit: u64) -> u64 {
        let n = self.nodes();
        let mut flow = 0u64;
        let mut level = vec![u32::MAX; n];
        let mut next = vec![0u32; n];
        let mut queue: VecDeque<usize> = VecDeque::new();
        while flow < limit {
            // Levels by breadth-first search, no further than the sink's.
            level.fill(u32::MAX);
            level[s] = 0;
            queue.clear();
            queue.push_back(s);
            while let Some(x) = queue.pop_front() {
                if level[t] != u32::MAX && level[x] >= level[t] {
                    break;
                }
                for a in self.first[x]..self.first[x + 1] {
                    let y = self.head[a as usize] as usize;
                    if self.cap[a as usize] > 0 && level[y] == u32::MAX {
                        level[y] = level[x] + 1;
                        queue.push_back(y);
                    }
                }
            }
            if level[t] == u32::MAX {
                break;
            }
            next.copy_from_slice(&self.first[..n]);
            let pushed = self.blocking_flow(s, t, limit - flow, &level, &mut next);
            if pushed == 0 {
                break;
            }
            flow += pushed;
        }
        flow
    }

    #[cfg(test)]
    /// A blocking flow of the level graph, at most `most`: depth-first along current arcs;
    /// after each augmentation the search resumes from the first arc it saturated, not from
    /// `s`, so a path's unsaturated prefix is walked once.
    fn blocking_flow(
        &mut self,
        s: usize,
        t: usize,
        most: u64,
        level: &[u32],
        next: &mut [u32],
    ) -> u64 {
        let mut path: Vec<u32> = Vec::new();
        let mut total = 0u64;
        let mut x = s;
        loop {
            if x == t {
                let push = path
                    .iter()
                    .map(|&a| self.cap[a as usize])
                    .min()
                    .unwrap_or(0)
                    .min(most - total);
                for &a in &path {
                    self.cap[a as usize] -= push;
                    self.cap[self.rev[a as usize] as usize] += push;
                }
                total += push;
                if total >= most {
                    return total;
                }
                let k = path
                    .iter()
                    .position(|&a| self.cap[a as usize] == 0)
                    .expect("an augmentation saturates an arc");
                x = self.tail(path[k]);
                path.truncate(k);
                continue;
            }
            let mut advanced = false;
            while next[x] < self.first[x + 1] {
                let a = next[x] as usize;
                let y = self.head[a] as usize;
                if self.cap[a] > 0 && level[y] == level[x] + 1 {
                    path.push(a as u32);
                    x = y;
                    advanced = true;
                    break;
                }
                next[x] += 1;
            }
            if !advanced {
                // Dead end: retreat, and never try the arc that led here again.
                let Some(a) = path.pop() else {
                    return total;
                };
                x = self.tail(a);
                next[x] += 1;
            }
        }
    }

    /// The node an arc leaves.
    fn tail(&self, a: u32) -> usize {
        self.head[self.rev[a as usize] as usize] as usize
    }

    /// The nodes reachable from `s` through arcs with residual capacity.
    fn reached_from(&self, s: usize) -> Vec<bool> {
        self.residual_reach(s, true)
    }

    /// The nodes that reach `t` through arcs with residual capacity.
    fn reaching(&self, t: usize) -> Vec<bool> {
        self.residual_reach(t, false)
    }

    /// Depth-first search from `root` along residual arcs (`forward`), or against them: an
    /// arc x -> y with residual capacity is met from y as the reverse of an arc y -> x.
    fn residual_reach(&self, root: usize, forward: bool) -> Vec<bool> {
        let mut seen = vec![false; self.nodes()];
        seen[root] = true;
        let mut stack = vec![root];
        while let Some(x) = stack.pop() {
            for a in self.first[x] as usize..self.first[x + 1] as usize {
                let y = self.head[a] as usize;
                let residual = if forward { a } else { self.rev[a] as usize };
                if self.cap[residual] > 0 && !seen[y] {
                    seen[y] = true;
                    stack.push(y);
                }
            }
        }
        seen
    }

    /// The strongly connected components of the residual network among the nodes that are
    /// neither in `from_source` nor in `to_sink`, in the order Tarjan's algorithm finds them:
    /// a component comes after every component it reaches, so each prefix of the list is
    /// closed under residual arcs (iterative, so deep networks cannot overflow the stack).
    fn components_between(&self, from_source: &[bool], to_sink: &[bool]) -> Vec<Vec<u32>> {
        let n = self.nodes();
        let between = |x: usize| !from_source[x] && !to_sink[x];
        let mut index = vec![u32::MAX; n];
        let mut low = vec![0u32; n];
        let mut on_stack = vec![false; n];
        let mut stack: Vec<u32> = Vec::new();
        let mut out: Vec<Vec<u32>> = Vec::new();
        let mut counter = 0u32;
        // The depth-first search's own stack: (node, next arc to look at).
        let mut dfs: Vec<(u32, u32)> = Vec::new();
        for root in 0..n {
            if !between(root) || index[root] != u32::MAX {
                continue;
            }
            dfs.push((root as u32, self.first[root]));
            index[root] = counter;
            low[root] = counter;
            counter += 1;
            stack.push(root as u32);
            on_stack[root] = true;
            while let Some(&mut (x, ref mut a)) = dfs.last_mut() {
                let x = x as usize;
                if *a < self.first[x + 1] {
                    let arc = *a as usize;
                    *a += 1;
                    let y = self.head[arc] as usize;
                    if self.cap[arc] == 0 || !between(y) {
                        continue;
                    }
                    if index[y] == u32::MAX {
                        index[y] = counter;
                        low[y] = counter;
                        counter += 1;
                        stack.push(y as u32);
                        on_stack[y] = true;
                        dfs.push((y as u32, self.first[y]));
                    } else if on_stack[y] {
                        low[x] = low[x].min(index[y]);
                    }
                    continue;
                }
                dfs.pop();
                if let Some(&(parent, _)) = dfs.last() {
                    let parent = parent as usize;
                    low[parent] = low[parent].min(low[x]);
                }
                if low[x] == index[x] {
                    let mut component = Vec::new();
                    loop {
                        let y = stack.pop().expect("x is on the stack");
                        on_stack[y as usize] = false;
                        component.push(y);
                        if y as usize == x {
                            break;
                        }
                    }
                    out.push(component);
                }
            }
        }
        out
    }
}

/// Grows side `s`'s part of the region from the pins of cut nets, breadth-first, while the
/// weight fits `budget`. Marks members in `region` with their node number.
fn grow(
    h: &Hypergraph,
    side: &[u8],
    s: u8,
    budget: u64,
    region: &mut [u32],
    members: &mut Vec<u32>,
) {
    let mut weight = 0u64;
    let mut queue: VecDeque<u32> = VecDeque::new();
    let mut seen = vec![false; h.nv()];
    // A net's pins are queued by the first member that reaches it; later ones would find them
    // all seen (long nets would otherwise be scanned once per member).
    let mut net_done = vec![false; h.nn()];
    for e in 0..h.nn() {
        let pins = h.net(e);
        let first = side[pins[0] as usize];
        if pins.iter().any(|&u| side[u as usize] != first) {
            for &u in pins {
                if side[u as usize] == s && !seen[u as usize] {
                    seen[u as usize] = true;
                    queue.push_back(u);
                }
            }
        }
    }
    while let Some(u) = queue.pop_front() {
        let w = h.vwgt[u as usize] as u64;
        if weight + w > budget {
            continue;
        }
        weight += w;
        region[u as usize] = (2 + members.len()) as u32;
        members.push(u);
        for &e in h.nets(u as usize) {
            if std::mem::replace(&mut net_done[e as usize], true) {
                continue;
            }
            for &x in h.net(e as usize) {
                if side[x as usize] == s && !seen[x as usize] {
                    seen[x as usize] = true;
                    queue.push_back(x);
                }
            }
        }
    }
}

/// Region sizes tried, as multiples of the other side's slack: a larger region holds better
/// cuts, but its minimum cuts may all leave the balance bounds; then the next, smaller one is
/// tried (KaHyPar-MF's adaptive region). At 1 every minimum cut is feasible. KaHyPar-MF starts
/// at 16; on the shared matrices 8 gave nearly the same volumes in a third of the time
/// (docs/benchmarks.md).
const ALPHAS: [u64; 3] = [8, 2, 1];

/// Refines `side` in place by a minimum cut of the region around the cut; returns whether it
/// changed. Never makes the split worse by `b`'s key, never leaves the balance bounds if it
/// was within them (it does nothing if it was not).
pub(crate) fn refine(h: &Hypergraph, b: &Bounds, side: &mut [u8]) -> bool {
    let w = h.side_weights(side);
    if w[0] > b.max[0] || w[1] > b.max[1] {
        return false;
    }
    let old_cut = h.cut(side);
    if old_cut == 0 {
        return false;
    }
    let old_key = b.key(w, old_cut);
    let mut tried = None;
    for alpha in ALPHAS {
        // Side s's region may hold up to alpha times the other side's slack, never all of s.
        let budget = |s: usize| (alpha * (b.max[1 - s] - w[1 - s])).min(w[s] / 2);
        let budgets = [budget(0), budget(1)];
        // Where the slack is large, both budgets are capped at half a side for several
        // alphas: the same region again would give the same unbalanced cut.
        if tried.replace(budgets) == Some(budgets) {
            continue;
        }
        match attempt(h, b, side, budgets, old_key) {
            Attempt::Better(new) => {
                side.copy_from_slice(&new);
                return true;
            }
            // A smaller region has no smaller minimum cut.
            Attempt::NoSmallerCut => return false,
            Attempt::Unbalanced => {}
        }
    }
    false
}

enum Attempt {
    Better(Vec<u8>),
    NoSmallerCut,
    Unbalanced,
}

/// One region: the minimum cut, if it beats the split given and keeps the balance.
fn attempt(
    h: &Hypergraph,
    b: &Bounds,
    side: &[u8],
    budget: [u64; 2],
    old_key: (u64, u64, u64),
) -> Attempt {
    // Node numbers: 0 the source, 1 the sink, then region vertices, then two per net.
    let mut region = vec![NONE; h.nv()];
    let mut members: Vec<u32> = Vec::new();
    grow(h, side, 0, budget[0], &mut region, &mut members);
    grow(h, side, 1, budget[1], &mut region, &mut members);
    if members.is_empty() {
        return Attempt::NoSmallerCut;
    }
    let mut arcs: Vec<(u32, u32, u64)> = Vec::new();
    let mut node = 2 + members.len() as u32;
    let mut net_seen = vec![false; h.nn()];
    let mut fixed = 0u64;
    for &u in &members {
        for &e in h.nets(u as usize) {
            let e = e as usize;
            if std::mem::replace(&mut net_seen[e], true) {
                continue;
            }
            let pins = h.net(e);
            let outside = |s: u8| {
                pins.iter()
                    .any(|&x| region[x as usize] == NONE && side[x as usize] == s)
            };
            let (to_source, to_sink) = (outside(0), outside(1));
            if to_source && to_sink {
                fixed += h.ncost[e] as u64;
                continue; // cut whatever the region does
            }
            let (ein, eout) = (node, node + 1);
            node += 2;
            arcs.push((ein, eout, h.ncost[e] as u64));
            for &x in pins {
                let r = region[x as usize];
                if r != NONE {
                    arcs.push((r, ein, INF));
                    arcs.push((eout, r, INF));
                }
            }
            if to_source {
                arcs.push((0, ein, INF));
            }
            if to_sink {
                arcs.push((eout, 1, INF));
            }
        }
    }
    // The cut nets that touch no region vertex stay cut: the rest of the old cut is what the
    // network's cut must beat.
    let touching: u64 = (0..h.nn())
        .filter(|&e| net_seen[e])
        .filter(|&e| {
            let pins = h.net(e);
            let s = side[pins[0] as usize];
            pins.iter().any(|&x| side[x as usize] != s)
        })
        .map(|e| h.ncost[e] as u64)
        .sum();
    let limit = touching - fixed.min(touching);
    let mut net = Network::new(node as usize, &arcs);
    let flow = net.max_flow_trees(0, 1, limit);
    if flow >= limit {
        return Attempt::NoSmallerCut;
    }
    // Every minimum cut's source side is the source's residual reach plus a closed set of
    // the nodes between (those neither reached from the source nor reaching the sink): a set
    // no residual arc leaves. Tarjan's algorithm emits the strongly connected components of
    // the residual network in an order whose every prefix is closed, so the cuts along it
    // are all minimum; of them the one with the best balance is taken (KaHyPar-MF's most
    // balanced minimum cut).
    let from_source = net.reached_from(0);
    let to_sink = net.reaching(1);
    let mut new = side.to_vec();
    for (i, &u) in members.iter().enumerate() {
        new[u as usize] = u8::from(!from_source[2 + i]);
    }
    let cut = h.cut(&new);
    let mut w = h.side_weights(&new);
    let mut best = (b.key(w, cut), 0usize);
    let order = net.components_between(&from_source, &to_sink);
    for (k, component) in order.iter().enumerate() {
        for &x in component {
            if (2..2 + members.len()).contains(&(x as usize)) {
                let vw = h.vwgt[members[x as usize - 2] as usize] as u64;
                w[0] += vw;
                w[1] -= vw;
            }
        }
        let key = b.key(w, cut);
        if key < best.0 {
            best = (key, k + 1);
        }
    }
    for component in &order[..best.1] {
        for &x in component {
            if (2..2 + members.len()).contains(&(x as usize)) {
                new[members[x as usize - 2] as usize] = 0;
            }
        }
    }
    let key = best.0;
    debug_assert_eq!(b.key(h.side_weights(&new), h.cut(&new)), key);
    if key < old_key {
        Attempt::Better(new)
    } else if key.0 > 0 {
        Attempt::Unbalanced
    } else {
        Attempt::NoSmallerCut
    }
}

#[cfg(test)]
mod tests {
    use super::super::seeded_rng;
    use super::*;

    use super::super::hypergraph::samples::{path, random};

    /// The two search trees find Dinic's flow value on random networks (capacities 1-4 and
    /// infinite, with and without a limit), and leave no residual path from source to sink.
    #[test]
    fn search_trees_find_dinics_flow() {
        let mut rng = seeded_rng(3);
        for case in 0..500 {
            let n = 2 + rng.below(60);
            let m = rng.below(6 * n);
            let arcs: Vec<(u32, u32, u64)> = (0..m)
                .filter_map(|_| {
                    let (a, b) = (rng.below(n) as u32, rng.below(n) as u32);
                    let c = if rng.below(4) == 0 {
                        INF
                    } else {
                        1 + rng.below(4) as u64
                    };
                    (a != b).then_some((a, b, c))
                })
                .collect();
            let limit = if case % 3 == 0 {
                1 + rng.below(8) as u64
            } else {
                INF
            };
            let mut dinic = Network::new(n, &arcs);
            let mut trees = Network::new(n, &arcs);
            let want = dinic.max_flow(0, 1, limit);
            let got = trees.max_flow_trees(0, 1, limit);
            assert_eq!(
                got.min(limit),
                want.min(limit),
                "case {case}: {n} nodes, {arcs:?}"
            );
            if want < limit {
                assert!(
                    !trees.reached_from(0)[1],
                    "case {case}: a residual path is left"
                );
            }
        }
    }

    #[test]
    fn a_zigzag_cut_of_a_path_becomes_one_cut() {
        // Sides 0 0 0 0 1 0 1 1 1 1: three cut nets; one cut is feasible within the slack.
        let h = path(10);
        let mut side = vec![0, 0, 0, 0, 1, 0, 1, 1, 1, 1];
        let b = Bounds {
            max: [7, 7],
            target: [5, 5],
            cancel: None,
        };
        assert!(refine(&h, &b, &mut side));
        assert_eq!(h.cut(&side), 1);
        let w = h.side_weights(&side);
        assert!(w[0] <= 7 && w[1] <= 7, "{w:?}");
    }

    #[test]
    fn never_worse_and_always_within_bounds_on_random_hypergraphs() {
        let mut rng = seeded_rng(5);
        let mut improved = 0;
        for case in 0..400 {
            let h = random(&mut rng, 4, 40, 60);
            let nv = h.nv();
            let total = h.total_weight();
            let half = total / 2;
            let slack = rng.below(6) as u64;
            let b = Bounds {
                max: [half + slack, total - half + slack],
                target: [half, total - half],
                cancel: None,
            };
            // A feasible start: fill side 0 in random order up to its target.
            let mut order: Vec<usize> = (0..nv).collect();
            rng.shuffle(&mut order);
            let mut side = vec![1u8; nv];
            let mut w0 = 0u64;
            for &v in &order {
                if w0 + h.vwgt[v] as u64 <= half {
                    w0 += h.vwgt[v] as u64;
                    side[v] = 0;
                }
            }
            let before = b.key(h.side_weights(&side), h.cut(&side));
            let changed = refine(&h, &b, &mut side);
            let w = h.side_weights(&side);
            let after = b.key(w, h.cut(&side));
            if before.0 == 0 {
                assert!(w[0] <= b.max[0] && w[1] <= b.max[1], "case {case}: {w:?}");
            }
            assert!(
                after <= before,
                "case {case}: {after:?} worse than {before:?}"
            );
            assert_eq!(changed, after < before, "case {case}");
            improved += usize::from(changed);
        }
        // The random starts are poor: flows must find better cuts in many of them.
        assert!(improved > 100, "improved only {improved} of 400");
    }
}
