//! Maximum flow by two search trees (Boykov & Kolmogorov, "An experimental comparison of
//! min-cut/max-flow algorithms for energy minimization in vision", 2004).
//!
//! Why not only Dinic: a flow region around a cut is a wide, deep network (a mesh's worth of
//! vertices between the source's and the sink's borders); Dinic rebuilds its level graph from
//! the source in every phase, and the number of phases grows with the region's depth, so large
//! regions cost seconds. Here a tree grows from the source and one from the sink; where they
//! touch there is an augmenting path; after an augmentation only the nodes cut off from their
//! tree by a saturated arc (orphans) look for a new parent, and the trees are otherwise kept.
//!
//! The invariants: every node is free or in the source's tree or the sink's; a node of the
//! source's tree is reached from its parent by an arc with residual capacity (`parent[v]` is
//! that arc, into `v`), a node of the sink's tree reaches its parent by one (`parent[v]` is
//! that arc, out of `v`); every non-orphan's parents lead to its terminal. Active nodes (at
//! the trees' rims) are the ones still to scan. When no node is active, no residual path joins
//! the trees, so the flow is maximum; it is a flow, not a preflow (every augmentation is a
//! whole path), so the residual network's reach and components mean what the caller needs.
//!
//! Orphans adopt the parent closest to its terminal among the neighbours whose own parents
//! lead there, checked by walking up; the walk's result is remembered per augmentation (a
//! node marked in this augmentation's time with its distance), as in the paper.

use super::{INF, Network};
use std::collections::VecDeque;

const FREE: u8 = 0;
const SOURCE: u8 = 1;
const SINK: u8 = 2;
/// `parent` of a terminal.
const ROOT: u32 = u32::MAX;
/// `parent` of an orphan (and of a free node).
const ORPHAN: u32 = u32::MAX - 1;

struct Trees {
    tree: Vec<u8>,
    parent: Vec<u32>,
    /// The augmentation in which `dist` was last known to be right (64 bits: a count of
    /// augmentations never wraps around to a stale mark).
    time: Vec<u64>,
    /// Arcs from the node to its terminal, where `time` is current.
    dist: Vec<u32>,
    active: VecDeque<u32>,
    queued: Vec<bool>,
    orphans: Vec<u32>,
    now: u64,
}

impl Trees {
    fn activate(&mut self, x: usize) {
        if !std::mem::replace(&mut self.queued[x], true) {
            self.active.push_back(x as u32);
        }
    }
}

impl Network {
    /// The maximum flow from `s` to `t`, or at least `limit` (the search stops once the flow
    /// reaches it: the caller needs only to know that). Capacities become residual
    /// capacities. The same flow value as Dinic's `max_flow`, the tests' reference.
    pub(super) fn max_flow_trees(&mut self, s: usize, t: usize, limit: u64) -> u64 {
        let n = self.nodes();
        let mut tr = Trees {
            tree: vec![FREE; n],
            parent: vec![ORPHAN; n],
            time: vec![0; n],
            dist: vec![0; n],
            active: VecDeque::new(),
            queued: vec![false; n],
            orphans: Vec::new(),
            now: 1,
        };
        for (x, side) in [(s, SOURCE), (t, SINK)] {
            tr.tree[x] = side;
            tr.parent[x] = ROOT;
            tr.time[x] = u64::MAX;
            tr.activate(x);
        }
        let mut flow = 0u64;
        while flow < limit {
            let Some(meet) = self.grow(&mut tr) else {
                break;
            };
            flow += self.augment(&mut tr, meet, s, t, limit - flow);
            tr.now += 1;
            self.adopt(&mut tr, s, t);
        }
        flow
    }

    /// Residual capacity from `p` along arc `a` (out of `p`) in the direction of `p`'s tree:
    /// outwards for the source's tree, inwards (the reverse arc) for the sink's.
    fn tree_cap(&self, side: u8, a: usize) -> u64 {
        if side == SOURCE {
            self.cap[a]
        } else {
            self.cap[self.rev[a] as usize]
        }
    }

    /// Grows the trees from their active nodes until they touch; returns the arc (from the
    /// source's tree to the sink's) where they do, or `None` if they cannot grow further.
    fn grow(&self, tr: &mut Trees) -> Option<usize> {
        while let Some(&p) = tr.active.front() {
            let p = p as usize;
            let side = tr.tree[p];
            if side != FREE {
                for a in self.first[p] as usize..self.first[p + 1] as usize {
                    if self.tree_cap(side, a) == 0 {
                        continue;
                    }
                    let q = self.head[a] as usize;
                    if tr.tree[q] == FREE {
                        tr.tree[q] = side;
                        tr.parent[q] = if side == SOURCE {
                            a
                        } else {
                            self.rev[a] as usize
                        } as u32;
                        tr.time[q] = tr.time[p];
                        tr.dist[q] = tr.dist[p] + 1;
                        tr.activate(q);
                    } else if tr.tree[q] != side {
                        // p stays at the front: it is scanned again after the augmentation.
                        return Some(if side == SOURCE {
                            a
                        } else {
                            self.rev[a] as usize
                        });
                    }
                }
            }
            tr.active.pop_front();
            tr.queued[p] = false;
        }
        None
    }

    /// Pushes the bottleneck (at most `most`) along the path through `meet`; the nodes below
    /// the arcs it saturates become orphans. Returns the amount pushed.
    fn augment(&mut self, tr: &mut Trees, meet: usize, s: usize, t: usize, most: u64) -> u64 {
        let mut push = self.cap[meet].min(most);
        let mut x = self.tail(meet as u32);
        while x != s {
            let a = tr.parent[x] as usize;
            push = push.min(self.cap[a]);
            x = self.tail(a as u32);
        }
        let mut y = self.head[meet] as usize;
        while y != t {
            let a = tr.parent[y] as usize;
            push = push.min(self.cap[a]);
            y = self.head[a] as usize;
        }
        self.send(meet, push);
        let mut x = self.tail(meet as u32);
        while x != s {
            let a = tr.parent[x] as usize;
            self.send(a, push);
            let up = self.tail(a as u32);
            if self.cap[a] == 0 {
                tr.parent[x] = ORPHAN;
                tr.orphans.push(x as u32);
            }
            x = up;
        }
        let mut y = self.head[meet] as usize;
        while y != t {
            let a = tr.parent[y] as usize;
            self.send(a, push);
            let up = self.head[a] as usize;
            if self.cap[a] == 0 {
                tr.parent[y] = ORPHAN;
                tr.orphans.push(y as u32);
            }
            y = up;
        }
        push
    }

    /// Sends `amount` along arc `a` (as Dinic does: an infinite arc stays far above any flow).
    fn send(&mut self, a: usize, amount: u64) {
        debug_assert!(self.cap[a] >= amount && self.cap[a] <= INF);
        self.cap[a] -= amount;
        self.cap[self.rev[a] as usize] += amount;
    }

    /// The node `x`'s parent arc leads to.
    fn parent_node(&self, tr: &Trees, x: usize) -> usize {
        let a = tr.parent[x];
        if tr.tree[x] == SOURCE {
            self.tail(a)
        } else {
            self.head[a as usize] as usize
        }
    }

    /// The distance from `q` to its terminal if its parents lead there (not to an orphan);
    /// marks the nodes walked with it.
    fn origin(&self, tr: &mut Trees, q: usize, s: usize, t: usize) -> Option<u32> {
        let mut d = 0u32;
        let mut x = q;
        loop {
            if tr.time[x] == tr.now || x == s || x == t {
                d += if x == s || x == t { 0 } else { tr.dist[x] };
                break;
            }
            if tr.parent[x] == ORPHAN {
                return None;
            }
            x = self.parent_node(tr, x);
            d += 1;
        }
        // Mark the walk with its distances, for the next walks in this augmentation.
        let mut x = q;
        let mut dx = d;
        while tr.time[x] != tr.now && x != s && x != t {
            tr.time[x] = tr.now;
            tr.dist[x] = dx;
            x = self.parent_node(tr, x);
            dx -= 1;
        }
        Some(d)
    }

    /// Finds every orphan a new parent in its tree, or frees it (its children become orphans,
    /// its tree neighbours active again, to regrow into the space it leaves).
    fn adopt(&self, tr: &mut Trees, s: usize, t: usize) {
        while let Some(v) = tr.orphans.pop() {
            let v = v as usize;
            let side = tr.tree[v];
            let mut best: Option<(u32, usize)> = None;
            for a in self.first[v] as usize..self.first[v + 1] as usize {
                let q = self.head[a] as usize;
                // An arc towards v in the source's tree (q -> v), from v in the sink's (v -> q).
                let link = if side == SOURCE {
                    self.cap[self.rev[a] as usize]
                } else {
                    self.cap[a]
                };
                if tr.tree[q] != side || link == 0 {
                    continue;
                }
                if let Some(d) = self.origin(tr, q, s, t)
                    && best.is_none_or(|(bd, _)| d < bd)
                {
                    best = Some((d, a));
                }
            }
            if let Some((d, a)) = best {
                tr.parent[v] = if side == SOURCE {
                    self.rev[a]
                } else {
                    a as u32
                };
                tr.time[v] = tr.now;
                tr.dist[v] = d + 1;
                continue;
            }
            for a in self.first[v] as usize..self.first[v + 1] as usize {
                let q = self.head[a] as usize;
                if tr.tree[q] != side {
                    continue;
                }
                let link = if side == SOURCE {
                    self.cap[self.rev[a] as usize]
                } else {
                    self.cap[a]
                };
                if link > 0 {
                    tr.activate(q);
                }
                if tr.parent[q] != ORPHAN && tr.parent[q] != ROOT && self.parent_node(tr, q) == v {
                    tr.parent[q] = ORPHAN;
                    tr.orphans.push(q as u32);
                }
            }
            tr.tree[v] = FREE;
        }
    }
}
