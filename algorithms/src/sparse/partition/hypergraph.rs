//! Hypergraphs in compressed form.
//!
//! Vertices carry weights (nonzeros), nets carry costs (1 per row or column of the matrix; more
//! after identical nets are merged while coarsening). Both directions are stored: the pins of
//! every net and the nets of every vertex.

use mbsp::rng::SplitMix64;

/// A hypergraph with weighted vertices and costed nets.
#[derive(Clone, Debug, Default)]
pub(crate) struct Hypergraph {
    /// Weight of each vertex.
    pub vwgt: Vec<u32>,
    /// Cost of each net.
    pub ncost: Vec<u32>,
    /// `nptr[e]..nptr[e + 1]` indexes `pins` for net `e`.
    pub nptr: Vec<u32>,
    /// The vertices of every net, net after net.
    pub pins: Vec<u32>,
    /// `vptr[v]..vptr[v + 1]` indexes `vnets` for vertex `v`.
    pub vptr: Vec<u32>,
    /// The nets of every vertex.
    pub vnets: Vec<u32>,
}

impl Hypergraph {
    /// Builds the vertex -> nets direction from the nets' pins.
    pub fn new(vwgt: Vec<u32>, ncost: Vec<u32>, nptr: Vec<u32>, pins: Vec<u32>) -> Self {
        let nv = vwgt.len();
        let mut vptr = vec![0u32; nv + 1];
        for &v in &pins {
            vptr[v as usize + 1] += 1;
        }
        for v in 0..nv {
            vptr[v + 1] += vptr[v];
        }
        let mut fill: Vec<u32> = vptr[..nv].to_vec();
        let mut vnets = vec![0u32; pins.len()];
        for e in 0..ncost.len() {
            for &v in &pins[nptr[e] as usize..nptr[e + 1] as usize] {
                vnets[fill[v as usize] as usize] = e as u32;
                fill[v as usize] += 1;
            }
        }
        Hypergraph {
            vwgt,
            ncost,
            nptr,
            pins,
            vptr,
            vnets,
        }
    }

    pub fn nv(&self) -> usize {
        self.vwgt.len()
    }

    pub fn nn(&self) -> usize {
        self.ncost.len()
    }

    pub fn net(&self, e: usize) -> &[u32] {
        &self.pins[self.nptr[e] as usize..self.nptr[e + 1] as usize]
    }

    pub fn nets(&self, v: usize) -> &[u32] {
        &self.vnets[self.vptr[v] as usize..self.vptr[v + 1] as usize]
    }

    pub fn total_weight(&self) -> u64 {
        self.vwgt.iter().map(|&w| w as u64).sum()
    }

    /// Cut cost of a bipartition: the summed cost of nets with pins on both sides (the tests'
    /// independent check of FM's books).
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn cut(&self, side: &[u8]) -> u64 {
        (0..self.nn())
            .filter(|&e| {
                let pins = self.net(e);
                let s = side[pins[0] as usize];
                pins.iter().any(|&v| side[v as usize] != s)
            })
            .map(|e| self.ncost[e] as u64)
            .sum()
    }

    /// Weight on each side of a bipartition.
    pub fn side_weights(&self, side: &[u8]) -> [u64; 2] {
        let mut w = [0u64; 2];
        for (v, &s) in side.iter().enumerate() {
            w[s as usize] += self.vwgt[v] as u64;
        }
        w
    }

    /// The coarse hypergraph of the clustering `cmap` (fine vertex -> coarse vertex, `nc`
    /// coarse vertices): weights summed, pins mapped and deduplicated, nets left with one pin
    /// dropped (they can never be cut), identical nets merged into one with the summed cost.
    pub fn contract(&self, cmap: &[u32], nc: usize) -> Hypergraph {
        let mut vwgt = vec![0u32; nc];
        for (v, &c) in cmap.iter().enumerate() {
            vwgt[c as usize] += self.vwgt[v];
        }
        let mut stamp = vec![u32::MAX; nc];
        let mut nptr = vec![0u32];
        let mut pins: Vec<u32> = Vec::with_capacity(self.pins.len());
        let mut ncost: Vec<u32> = Vec::with_capacity(self.nn());
        // (hash of the pin set, net) of every kept net, for `merge_identical`.
        let mut keyed: Vec<(u64, u32)> = Vec::with_capacity(self.nn());
        for e in 0..self.nn() {
            let start = pins.len();
            let mut h = 0u64;
            for &v in self.net(e) {
                let c = cmap[v as usize];
                if stamp[c as usize] != e as u32 {
                    stamp[c as usize] = e as u32;
                    pins.push(c);
                    // Order-independent hash of the pin set, to find identical nets.
                    h = h.wrapping_add(SplitMix64::mix(c as u64 + 1));
                }
            }
            if pins.len() - start < 2 {
                pins.truncate(start);
                continue;
            }
            keyed.push((h ^ (pins.len() - start) as u64, ncost.len() as u32));
            nptr.push(pins.len() as u32);
            ncost.push(self.ncost[e]);
        }
        let (ncost, nptr, pins) = merge_identical(ncost, nptr, pins, keyed);
        Hypergraph::new(vwgt, ncost, nptr, pins)
    }
}

/// Merges nets with the same pin set (same hash, then compared exactly) into one net whose
/// cost is the sum: the cut is unchanged and FM does the work once. Works on the nets alone
/// (costs, `nptr`, pins; `keyed` holds each net's pin-set hash beside its number), before the
/// vertex -> nets direction is built.
fn merge_identical(
    ncost: Vec<u32>,
    nptr: Vec<u32>,
    pins: Vec<u32>,
    mut keyed: Vec<(u64, u32)>,
) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let nn = ncost.len();
    let net = |e: usize| &pins[nptr[e] as usize..nptr[e + 1] as usize];
    // Sorted as (hash, net) pairs rather than net numbers keyed by their hash: comparisons and
    // the scan for runs of equal hashes then read the keys in place, not at random.
    keyed.sort_unstable();
    let mut keep = vec![true; nn];
    let mut cost = ncost.clone();
    let mut sorted_a: Vec<u32> = Vec::new();
    let mut sorted_b: Vec<u32> = Vec::new();
    let mut merged = 0usize;
    let mut i = 0;
    while i < nn {
        let mut j = i + 1;
        while j < nn && keyed[j].0 == keyed[i].0 {
            j += 1;
        }
        if j - i > 1 {
            // Compare every later net of the run with the earlier survivors.
            for x in i + 1..j {
                let ex = keyed[x].1 as usize;
                sorted_a.clear();
                sorted_a.extend_from_slice(net(ex));
                sorted_a.sort_unstable();
                for &(_, ey) in &keyed[i..x] {
                    let ey = ey as usize;
                    if !keep[ey] || net(ey).len() != sorted_a.len() {
                        continue;
                    }
                    sorted_b.clear();
                    sorted_b.extend_from_slice(net(ey));
                    sorted_b.sort_unstable();
                    if sorted_a == sorted_b {
                        cost[ey] += cost[ex];
                        keep[ex] = false;
                        merged += 1;
                        break;
                    }
                }
            }
        }
        i = j;
    }
    if merged == 0 {
        return (ncost, nptr, pins);
    }
    let mut new_nptr = vec![0u32];
    let mut new_pins = Vec::with_capacity(pins.len());
    let mut new_cost = Vec::with_capacity(nn - merged);
    for e in 0..nn {
        if keep[e] {
            new_pins.extend_from_slice(net(e));
            new_nptr.push(new_pins.len() as u32);
            new_cost.push(cost[e]);
        }
    }
    (new_cost, new_nptr, new_pins)
}

/// Hypergraphs for the partitioner's unit tests.
#[cfg(test)]
pub(crate) mod samples {
    use super::Hypergraph;
    use mbsp::rng::SplitMix64;

    /// A path of `n` unit vertices, nets {i, i + 1}.
    pub fn path(n: usize) -> Hypergraph {
        let pins: Vec<u32> = (0..n as u32 - 1).flat_map(|i| [i, i + 1]).collect();
        let nptr: Vec<u32> = (0..n as u32).map(|e| 2 * e).collect();
        Hypergraph::new(vec![1; n], vec![1; n - 1], nptr, pins)
    }

    /// `min_nv + below(nv_span)` vertices of weight 1-4, `1 + below(nn_span)` nets of 2-6
    /// distinct pins and cost 1-3.
    pub fn random(
        rng: &mut SplitMix64,
        min_nv: usize,
        nv_span: usize,
        nn_span: usize,
    ) -> Hypergraph {
        let nv = min_nv + rng.below(nv_span);
        let nn = 1 + rng.below(nn_span);
        let vwgt: Vec<u32> = (0..nv).map(|_| 1 + rng.below(4) as u32).collect();
        let mut nptr = vec![0u32];
        let mut pins = Vec::new();
        let mut ncost = Vec::new();
        for _ in 0..nn {
            let size = 2 + rng.below(5.min(nv - 1));
            let mut net: Vec<u32> = Vec::new();
            while net.len() < size {
                let v = rng.below(nv) as u32;
                if !net.contains(&v) {
                    net.push(v);
                }
            }
            pins.extend(net);
            nptr.push(pins.len() as u32);
            ncost.push(1 + rng.below(3) as u32);
        }
        Hypergraph::new(vwgt, ncost, nptr, pins)
    }
}
