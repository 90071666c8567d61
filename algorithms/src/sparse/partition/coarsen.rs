//! Coarsening by matching: pairs of vertices that share many small nets are merged.
//!
//! Vertices are visited in random order; an unmatched vertex `v` is matched with the unmatched
//! neighbour `u` of the largest score `Σ_{e ∋ u, v} cost(e) / (|e| - 1)` (the scaled inner
//! product of the two vertices' net vectors: a net of two pins binds them strongly, a long net
//! weakly), among those whose combined weight stays under a cap, so that the coarsest level still
//! allows a balanced split. Nets longer than `LONG_NET` are ignored when scoring: they tie
//! everything to everything and cost quadratic time. A vertex with no free neighbour joins the
//! cluster of its best matched neighbour if the weight allows (this keeps the coarsening rate up
//! on hypergraphs with many degree-1 vertices), else it stays alone.
//!
//! With `side` given (refining an existing bipartition, or a `p`-way partition's part labels),
//! only vertices on the same side merge, so the partition projects exactly onto the coarse
//! hypergraph.

use super::hypergraph::Hypergraph;
use mbsp::rng::SplitMix64;

const LONG_NET: usize = 64;
/// Hypergraphs with more vertices are visited in random blocks (see `cluster`).
const CACHE_SIZED: usize = 200_000;

/// One coarsening step: the cluster of every vertex (`cmap`) and the number of clusters.
pub(crate) fn cluster<L: Copy + PartialEq>(
    h: &Hypergraph,
    max_weight: u64,
    side: Option<&[L]>,
    rng: &mut SplitMix64,
) -> (Vec<u32>, usize) {
    let nv = h.nv();
    // Random order; on hypergraphs too large for the caches, random blocks of consecutive
    // vertices: the matrix's numbering has locality, which visiting blocks keeps in the
    // caches, for the same volumes on the shared matrices (docs/benchmarks.md).
    let order: Vec<u32> = if nv <= CACHE_SIZED {
        let mut order: Vec<u32> = (0..nv as u32).collect();
        rng.shuffle(&mut order);
        order
    } else {
        let block = 256;
        let mut blocks: Vec<u32> = (0..nv.div_ceil(block) as u32).collect();
        rng.shuffle(&mut blocks);
        blocks
            .iter()
            .flat_map(|&b| {
                (b as usize * block..((b as usize + 1) * block).min(nv)).map(|v| v as u32)
            })
            .collect()
    };
    // Each net's contribution to the score of a pair, once per net (0: ignored).
    let weight: Vec<f32> = (0..h.nn())
        .map(|e| {
            let len = h.net(e).len();
            if len > LONG_NET {
                0.0
            } else {
                h.ncost[e] as f32 / (len - 1) as f32
            }
        })
        .collect();
    let mut cmap = vec![u32::MAX; nv];
    let mut cweight: Vec<u64> = Vec::with_capacity(nv / 2 + 1);
    let mut score = vec![0f32; nv];
    // The candidates of one vertex: `touched[..nt]`, written without a branch on whether each
    // pin is new (that branch is unpredictable; a vertex has at most `nv` candidates).
    let mut touched: Vec<u32> = vec![0; nv];
    for &v in &order {
        let v = v as usize;
        if cmap[v] != u32::MAX {
            continue;
        }
        let wv = h.vwgt[v] as u64;
        let mut nt = 0;
        for &e in h.nets(v) {
            let s = weight[e as usize];
            if s == 0.0 {
                continue;
            }
            for &u in h.net(e as usize) {
                let u = u as usize;
                // `v` itself is no candidate: not scoring it saves a pin of every net.
                if u == v || side.is_some_and(|sd| sd[u] != sd[v]) {
                    continue;
                }
                touched[nt] = u as u32;
                nt += usize::from(score[u] == 0.0);
                score[u] += s;
            }
        }
        // Best free neighbour, else best cluster to join.
        let mut best_free: Option<(f32, usize)> = None;
        let mut best_join: Option<(f32, usize)> = None;
        for &u in &touched[..nt] {
            let u = u as usize;
            let sc = score[u];
            score[u] = 0.0;
            if cmap[u] == u32::MAX {
                if wv + h.vwgt[u] as u64 <= max_weight && best_free.is_none_or(|(b, _)| sc > b) {
                    best_free = Some((sc, u));
                }
            } else {
                let c = cmap[u] as usize;
                if wv + cweight[c] <= max_weight && best_join.is_none_or(|(b, _)| sc > b) {
                    best_join = Some((sc, c));
                }
            }
        }
        if let Some((_, u)) = best_free {
            let c = cweight.len();
            cmap[v] = c as u32;
            cmap[u] = c as u32;
            cweight.push(wv + h.vwgt[u] as u64);
        } else if let Some((_, c)) = best_join {
            cmap[v] = c as u32;
            cweight[c] += wv;
        } else {
            cmap[v] = cweight.len() as u32;
            cweight.push(wv);
        }
    }
    let nc = cweight.len();
    (cmap, nc)
}
