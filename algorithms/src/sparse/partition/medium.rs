//! The medium-grain model (Pelt & Bisseling, 2014) and iterative refinement of a bipartition.
//!
//! Every nonzero of the (sub)matrix is put in a group: the nonzeros of row `i` that were given
//! to rows form one vertex, the nonzeros of column `j` given to columns another. Each row and
//! each column of the matrix is a net whose pins are the groups holding its nonzeros. A group
//! lies on one side of a split, so a net is cut exactly when its row or column has nonzeros on
//! both sides: the cut of the hypergraph is the communication volume of the split, and the
//! hypergraph has about `m + n` vertices instead of the fine-grain model's `nnz`.
//!
//! The first split gives each nonzero to the shorter of its row and column (a short line is
//! then likely to stay whole, and it is the long lines that are cut anyway); several multilevel
//! splits of that hypergraph compete with the 1D row-block and column-block splits (each refined
//! once), and the best goes on. Iterative refinement then alternates: with a split in hand,
//! nonzeros are regrouped — by rows where the row is uncut (or both lines are cut), by columns
//! otherwise, and the other way round on the next round — with every group inside one side, so
//! the split is a valid start for FM on the new hypergraph (cheap single-level rounds) or for a
//! multilevel V-cycle (when the cheap rounds stall), neither of which can make it worse. Rounds
//! continue while they improve (by default, while they improve by at least `IR_MIN_GAIN`). With
//! the quality setting, max-flow rounds (module `flow`) on the regrouped hypergraph follow,
//! while they improve.
//!
//! The first split of a partitioning has the thread pool to itself, and its refinement rounds
//! depend each on the one before, so by default two refinement paths race there, one per core:
//! cheap rounds alone, and a V-cycle first followed by cheap rounds; the better split goes on.
//! Both paths are fixed by the seed, not by who finishes first, so the result does not depend
//! on the number of threads.

use super::super::CooMatrix;
use super::bisect::PASSES;
use super::bisect::{bisect, refine};
use super::fm::{Bounds, Fm};
use super::hypergraph::Hypergraph;
use mbsp::rng::SplitMix64;

/// Rounds of iterative refinement without improvement before changing method (single-level FM
/// -> multilevel V-cycle) or giving up. Two, so that both regroupings (rows first, columns
/// first) get their chance.
const IR_PATIENCE: usize = 2;
/// Independent multilevel splits tried before refinement: three tries instead of one lower the
/// volume on the shared matrices and remove the worst outliers, for a little more time
/// (docs/benchmarks.md).
const INITIAL_TRIES: usize = 3;
/// With [`Options::quality`](super::Options::quality), splits of fewer nonzeros than
/// `QUALITY_SMALL` try `QUALITY_TRIES` times: at p = 64 most splits are that small, each try
/// is cheap, and more starts find lower volumes there (docs/benchmarks.md).
const QUALITY_TRIES: usize = 8;
const QUALITY_SMALL: usize = 30_000;
/// Splits of more than this many nonzeros try twice only (two uncoarsenings run side by side
/// on two cores; on such matrices — meshes, circuits — the tries differ by a few percent) and
/// skip the multilevel refinement rounds and the quality setting's max-flow rounds.
const HUGE: usize = 2_000_000;
/// At most this many rounds.
const IR_MAX: usize = 40;
/// With [`Options::quality`](super::Options::quality): at most this many max-flow rounds after
/// iterative refinement (each stops the loop if it gains nothing).
const FLOW_ROUNDS: usize = 4;
/// At most this many multilevel rounds per split, and none after one that gained under 0.5%:
/// on the shared matrices the first two give most of what V-cycles add, and further ones cost
/// more time than their small gain is worth; on the large meshes they add little. The default
/// setting stops after one: with `IR_MIN_GAIN` it leaves the shared matrices' volumes where
/// they were on the whole (some up, some down) for less time (docs/benchmarks.md).
const V_CYCLES: usize = 2;
const V_CYCLES_DEFAULT: usize = 1;
/// In the default setting, a single-level round that gains less than this fraction of the
/// volume (in units of 1/10 000) counts as a round without gain for `IR_PATIENCE` (it is still
/// kept): the long tails of rounds that each gain a few lines cost a rebuild of the
/// hypergraph and an FM run apiece for next to no volume (docs/benchmarks.md).
const IR_MIN_GAIN: u64 = 20;

/// The nonzeros of a submatrix grouped by row and by column.
pub(crate) struct Sub {
    /// Local row line of each position.
    rline: Vec<u32>,
    /// Local column line of each position.
    cline: Vec<u32>,
    /// Positions grouped by row line: `rstart[l]..rstart[l + 1]` indexes `rpos`.
    rstart: Vec<u32>,
    rpos: Vec<u32>,
    cstart: Vec<u32>,
    cpos: Vec<u32>,
}

/// Groups positions `0..keys.len()` by key; lines are numbered in increasing key order.
fn group(keys: &[u32], nkeys: usize) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let w = keys.len();
    let mut line = vec![0u32; w];
    let mut start = vec![0u32];
    let mut pos = vec![0u32; w];
    if nkeys <= 4 * w {
        // Counting sort over the whole key range.
        let mut cnt = vec![0u32; nkeys + 1];
        for &k in keys {
            cnt[k as usize + 1] += 1;
        }
        let mut id = vec![u32::MAX; nkeys];
        let mut nl = 0u32;
        for k in 0..nkeys {
            if cnt[k + 1] > 0 {
                id[k] = nl;
                nl += 1;
                start.push(start.last().unwrap() + cnt[k + 1]);
            }
        }
        let mut fill: Vec<u32> = start[..nl as usize].to_vec();
        for (t, &k) in keys.iter().enumerate() {
            let l = id[k as usize];
            line[t] = l;
            pos[fill[l as usize] as usize] = t as u32;
            fill[l as usize] += 1;
        }
    } else {
        let mut order: Vec<u64> = keys
            .iter()
            .enumerate()
            .map(|(t, &k)| ((k as u64) << 32) | t as u64)
            .collect();
        order.sort_unstable();
        let mut nl = 0u32;
        for (x, &o) in order.iter().enumerate() {
            let t = (o & 0xffff_ffff) as usize;
            if x > 0 && (order[x - 1] >> 32) != (o >> 32) {
                start.push(x as u32);
                nl += 1;
            }
            line[t] = nl;
            pos[x] = t as u32;
        }
        if w > 0 {
            start.push(w as u32);
        }
    }
    (line, start, pos)
}

impl Sub {
    pub fn new(a: &CooMatrix, nz: &[u32]) -> Self {
        // The two groupings are independent: on the first split the second core is free.
        let ((rline, rstart, rpos), (cline, cstart, cpos)) = rayon::join(
            || {
                let rk: Vec<u32> = nz.iter().map(|&k| a.row_idx[k as usize]).collect();
                group(&rk, a.rows)
            },
            || {
                let ck: Vec<u32> = nz.iter().map(|&k| a.col_idx[k as usize]).collect();
                group(&ck, a.cols)
            },
        );
        Sub {
            rline,
            cline,
            rstart,
            rpos,
            cstart,
            cpos,
        }
    }

    fn len(&self) -> usize {
        self.rline.len()
    }

    fn rows(&self) -> usize {
        self.rstart.len() - 1
    }

    fn cols(&self) -> usize {
        self.cstart.len() - 1
    }

    fn row(&self, l: usize) -> &[u32] {
        &self.rpos[self.rstart[l] as usize..self.rstart[l + 1] as usize]
    }

    fn col(&self, l: usize) -> &[u32] {
        &self.cpos[self.cstart[l] as usize..self.cstart[l + 1] as usize]
    }

    /// The hypergraph of the grouping: `by_row[t]` says whether position `t` joins its row's
    /// group or its column's; with `side`, groups are further split by side. Returns the
    /// hypergraph and the vertex of every position.
    fn hypergraph(&self, by_row: &[bool], side: Option<&[u8]>) -> (Hypergraph, Vec<u32>) {
        let w = self.len();
        let mut vertex = vec![0u32; w];
        let mut vwgt: Vec<u32> = Vec::new();
        let sd = |t: usize| side.map_or(0, |s| s[t] as usize);
        let mut lines = |start: &[u32], pos: &[u32], want: bool| {
            for l in 0..start.len() - 1 {
                let mut id = [u32::MAX; 2];
                for &t in &pos[start[l] as usize..start[l + 1] as usize] {
                    let t = t as usize;
                    if by_row[t] != want {
                        continue;
                    }
                    let s = sd(t);
                    if id[s] == u32::MAX {
                        id[s] = vwgt.len() as u32;
                        vwgt.push(0);
                    }
                    vertex[t] = id[s];
                    vwgt[id[s] as usize] += 1;
                }
            }
        };
        lines(&self.rstart, &self.rpos, true);
        lines(&self.cstart, &self.cpos, false);
        let nv = vwgt.len();
        let mut stamp = vec![u32::MAX; nv];
        let mut nptr = vec![0u32];
        let mut pins: Vec<u32> = Vec::with_capacity(w + nv);
        let mut net = 0u32;
        let mut nets = |lstart: &[u32], pos: &[u32]| {
            for l in 0..lstart.len() - 1 {
                let start = pins.len();
                for &t in &pos[lstart[l] as usize..lstart[l + 1] as usize] {
                    let v = vertex[t as usize];
                    if stamp[v as usize] != net {
                        stamp[v as usize] = net;
                        pins.push(v);
                    }
                }
                net += 1;
                if pins.len() - start >= 2 {
                    nptr.push(pins.len() as u32);
                } else {
                    pins.truncate(start);
                }
            }
        };
        nets(&self.rstart, &self.rpos);
        nets(&self.cstart, &self.cpos);
        let nn = nptr.len() - 1;
        (Hypergraph::new(vwgt, vec![1; nn], nptr, pins), vertex)
    }

    /// Whether each row line and column line has positions on both sides.
    fn cut_lines(&self, side: &[u8]) -> (Vec<bool>, Vec<bool>) {
        let cut = |start: &[u32], pos: &[u32]| -> Vec<bool> {
            (0..start.len() - 1)
                .map(|l| {
                    let p = &pos[start[l] as usize..start[l + 1] as usize];
                    let s = side[p[0] as usize];
                    p.iter().any(|&t| side[t as usize] != s)
                })
                .collect()
        };
        (cut(&self.rstart, &self.rpos), cut(&self.cstart, &self.cpos))
    }

    /// Communication volume of a split into any number of parts: `Σ (λ − 1)` over the lines.
    pub fn volume_of_parts(&self, part: &[u32]) -> u64 {
        let mut seen: Vec<u32> = Vec::new();
        let mut total = 0u64;
        for (start, pos) in [(&self.rstart, &self.rpos), (&self.cstart, &self.cpos)] {
            for l in 0..start.len() - 1 {
                seen.clear();
                seen.extend(
                    pos[start[l] as usize..start[l + 1] as usize]
                        .iter()
                        .map(|&t| part[t as usize]),
                );
                seen.sort_unstable();
                seen.dedup();
                total += seen.len() as u64 - 1;
            }
        }
        total
    }

    /// Communication volume of a split: the number of cut rows and columns.
    pub fn volume(&self, side: &[u8]) -> u64 {
        let (r, c) = self.cut_lines(side);
        (r.iter().filter(|&&x| x).count() + c.iter().filter(|&&x| x).count()) as u64
    }
}

/// Splits the positions of `sub` into two sides within `b` (weights = nonzero counts) with
/// small volume: a multilevel split of the medium-grain hypergraph, then iterative refinement.
/// `alone`: no other split runs meanwhile (the first split), so a second core is free.
pub(crate) fn split(
    sub: &Sub,
    b: &Bounds,
    quality: bool,
    alone: bool,
    rng: &mut SplitMix64,
) -> Vec<u8> {
    let w = sub.len();
    // Several multilevel splits (from one coarsening), in parallel; the best one is refined.
    // The medium-grain hypergraph is built here, beside the block splits, which need only
    // `sub`.
    let multilevel = || -> Vec<((u64, u64, u64), Vec<u8>)> {
        let rlen: Vec<u32> = (0..sub.rows()).map(|l| sub.row(l).len() as u32).collect();
        let clen: Vec<u32> = (0..sub.cols()).map(|l| sub.col(l).len() as u32).collect();
        let by_row: Vec<bool> = (0..w)
            .map(|t| {
                let (r, c) = (rlen[sub.rline[t] as usize], clen[sub.cline[t] as usize]);
                if r != c {
                    r < c
                } else {
                    rng.next_u64() & 1 == 0
                }
            })
            .collect();
        let (h, vertex) = sub.hypergraph(&by_row, None);
        let tries = match w {
            _ if w > HUGE => 2,
            _ if quality && w < QUALITY_SMALL => QUALITY_TRIES,
            _ => INITIAL_TRIES,
        };
        // No flows on huge splits, as for the flow rounds below.
        bisect(&h, b, tries, quality && w <= HUGE, !quality, rng)
            .into_iter()
            .map(|vside| {
                let side: Vec<u8> = vertex.iter().map(|&v| vside[v as usize]).collect();
                (b.key(weights(&side), sub.volume(&side)), side)
            })
            .collect()
    };
    // Contiguous blocks of rows and of columns (the 1D splits), refined by one round: on
    // matrices whose numbering already follows their structure (bands, meshes in natural
    // order) they are a floor the multilevel splits must beat. They need no random choice,
    // so they run beside the coarsening, which has only itself to do.
    let blocks = || -> Vec<((u64, u64, u64), Vec<u8>)> {
        [
            block_split(&sub.rstart, &sub.rline, b.target[0]),
            block_split(&sub.cstart, &sub.cline, b.target[0]),
        ]
        .into_iter()
        .enumerate()
        .map(|(i, side)| round_of_refinement(sub, b, &side, i == 0, None, false))
        .collect()
    };
    let (tries, refined) = rayon::join(multilevel, blocks);
    let best_try = tries.into_iter().chain(refined).min_by_key(|(key, _)| *key);
    let (best, side) = best_try.expect("at least one try");
    let (mut best, mut side) = if alone && !quality && w <= HUGE {
        race(sub, b, rng, best, side)
    } else {
        let plan = Plan::usual(w, quality);
        iterate(sub, b, plan, rng, best, side)
    };
    // Max-flow rounds (module flow), the two regroupings in turn, while they improve; not on
    // huge splits, whose regions would hold millions of vertices (seconds per flow).
    if quality && w <= HUGE {
        for round in 0..FLOW_ROUNDS {
            if b.cancelled() {
                break;
            }
            let (key, new) = round_of_refinement(sub, b, &side, round % 2 == 0, None, true);
            if (key.0, key.1) >= (best.0, best.1) {
                break;
            }
            best = key;
            side = new;
        }
    }
    side
}

/// The course of one iterative refinement: how many multilevel rounds it may run, whether it
/// starts with one, and the smallest gain of a single-level round that resets its patience.
#[derive(Clone, Copy)]
struct Plan {
    vcycles: usize,
    vcycle_first: bool,
    min_gain: u64,
}

impl Plan {
    /// Cheap rounds first, a multilevel round when they stall.
    fn usual(w: usize, quality: bool) -> Self {
        Plan {
            // Multilevel rounds on huge splits cost a coarsening each and gain next to nothing
            // on large circuits and meshes (G3_circuit): none there.
            vcycles: if w > HUGE {
                0
            } else if quality {
                V_CYCLES
            } else {
                V_CYCLES_DEFAULT
            },
            vcycle_first: false,
            min_gain: if quality { 0 } else { IR_MIN_GAIN },
        }
    }
}

/// The default setting's refinement of a split that has the pool to itself: two paths from
/// `side`, one per core — single-level rounds only, and a V-cycle first, then single-level
/// rounds — and the better result (the first path's on a tie). The V-cycle path usually wins
/// (a V-cycle from the initial split finds more than one after the cheap rounds have settled
/// in a local minimum), the cheap path catches the splits where it does not, and the race
/// takes as long as its longer path, usually less than the usual plan's cheap, V-cycle,
/// cheap sequence (docs/benchmarks.md). The cheap path draws no random numbers and the
/// V-cycle path's generator is drawn from `rng` before either starts, so the result depends
/// on the seed only, not on which path ends first or how many threads there are.
fn race(
    sub: &Sub,
    b: &Bounds,
    rng: &mut SplitMix64,
    best: (u64, u64, u64),
    side: Vec<u8>,
) -> ((u64, u64, u64), Vec<u8>) {
    let mut rng_v = super::seeded_rng(rng.next_u64());
    let usual = Plan::usual(sub.len(), false);
    let cheap = Plan {
        vcycles: 0,
        vcycle_first: false,
        ..usual
    };
    let vcycle = Plan {
        vcycle_first: true,
        ..usual
    };
    let start = side.clone();
    let (a, v) = rayon::join(
        || iterate(sub, b, cheap, rng, best, start),
        || iterate(sub, b, vcycle, &mut rng_v, best, side),
    );
    if v.0 < a.0 { v } else { a }
}

/// Iterative refinement of the split `side` (whose key is `best`) as `plan` says: cheap
/// single-level rounds first (unless the plan starts with a multilevel round), a multilevel
/// round when they stop improving, back to cheap rounds after a multilevel round that
/// improved. Returns the final key and split.
fn iterate(
    sub: &Sub,
    b: &Bounds,
    plan: Plan,
    rng: &mut SplitMix64,
    mut best: (u64, u64, u64),
    mut side: Vec<u8>,
) -> ((u64, u64, u64), Vec<u8>) {
    let mut multilevel_left = plan.vcycles;
    let min_gain = plan.min_gain;
    let mut stale = 0;
    let mut vcycle = plan.vcycle_first;
    for round in 0..IR_MAX {
        // A balanced split that cuts nothing cannot be beaten: a round only replaces the split
        // with a strictly smaller (violation, volume).
        if b.cancelled() || (best.0, best.1) == (0, 0) {
            break;
        }
        if vcycle {
            if multilevel_left == 0 {
                break;
            }
            multilevel_left -= 1;
        }
        let (key, new) = round_of_refinement(
            sub,
            b,
            &side,
            round % 2 == 0,
            vcycle.then_some(&mut *rng),
            false,
        );
        if (key.0, key.1) < (best.0, best.1) {
            if vcycle && best.1.saturating_sub(key.1) * 200 < best.1 {
                // A multilevel round that gained under 0.5% will not pay for another.
                multilevel_left = 0;
            }
            // (Same violation, so a lower volume.)
            let small = !vcycle && key.0 == best.0 && (best.1 - key.1) * 10_000 < best.1 * min_gain;
            best = key;
            side = new;
            vcycle = false;
            if !small {
                stale = 0;
                continue;
            }
        } else if vcycle {
            // A multilevel round that found nothing: the split is as good as this gets.
            break;
        }
        // A single-level round without gain (or with too small a gain).
        stale += 1;
        if stale >= IR_PATIENCE {
            if multilevel_left == 0 {
                break;
            }
            vcycle = true;
            stale = 0;
        }
    }
    (best, side)
}

/// One round of iterative refinement of `side`: regroup (rows or columns first), then FM on
/// one level, or a V-cycle when given the generator of its coarsening's random choices, or
/// (`flow`) a max-flow refinement followed by FM on one level when it improved anything.
/// Returns the new split and its (violation, volume, deviation) key.
fn round_of_refinement(
    sub: &Sub,
    b: &Bounds,
    side: &[u8],
    prefer_rows: bool,
    vcycle: Option<&mut SplitMix64>,
    flow: bool,
) -> ((u64, u64, u64), Vec<u8>) {
    let (rcut, ccut) = sub.cut_lines(side);
    let by_row: Vec<bool> = (0..sub.len())
        .map(|t| {
            let r = rcut[sub.rline[t] as usize];
            let c = ccut[sub.cline[t] as usize];
            if prefer_rows { !r || c } else { c && !r }
        })
        .collect();
    let (h, vertex) = sub.hypergraph(&by_row, Some(side));
    let mut start = vec![0u8; h.nv()];
    for (t, &v) in vertex.iter().enumerate() {
        start[v as usize] = side[t];
    }
    let (vside, cut) = match vcycle {
        Some(rng) => (refine(&h, b, start, rng), None),
        None if flow => {
            let mut s = start;
            if !super::flow::refine(&h, b, &mut s) {
                return (b.key(weights(side), sub.volume(side)), side.to_vec());
            }
            let cut = Fm::new(&h).refine(&mut s, b, PASSES);
            (s, Some(cut))
        }
        None => {
            let mut s = start;
            let cut = Fm::new(&h).refine(&mut s, b, PASSES);
            (s, Some(cut))
        }
    };
    let new: Vec<u8> = vertex.iter().map(|&v| vside[v as usize]).collect();
    // The hypergraph's cut is the split's volume (module doc): FM's books give it.
    let volume = cut.unwrap_or_else(|| sub.volume(&new));
    debug_assert_eq!(volume, sub.volume(&new));
    (b.key(weights(&new), volume), new)
}

/// Side 0 = the first lines (in index order) up to `target0` nonzeros, side 1 the rest.
fn block_split(start: &[u32], line: &[u32], target0: u64) -> Vec<u8> {
    // The first line whose end passes the target goes to side 1 if that is closer.
    let cut = (1..start.len())
        .find(|&l| start[l] as u64 >= target0)
        .map(|l| {
            if start[l] as u64 - target0 > target0 - start[l - 1] as u64 {
                l - 1
            } else {
                l
            }
        })
        .unwrap_or(start.len() - 1);
    line.iter().map(|&l| u8::from(l as usize >= cut)).collect()
}

fn weights(side: &[u8]) -> [u64; 2] {
    let ones = side.iter().filter(|&&s| s == 1).count() as u64;
    [side.len() as u64 - ones, ones]
}
