//! Placement plans: which PUs each of `p` processes owns inside a domain.
//!
//! Rules (deterministic; they depend only on the tree):
//!
//! * **Compact** — fewest packages, shared caches. With `p ≤ C` (cores in the domain), process `i`
//!   owns core `i` in logical order (which fills a NUMA node, then a package, before the next),
//!   with all its PUs. A process owns exactly one core, so a nested run inside it shares that
//!   core.
//! * **Scattered** — most total bandwidth. With `p ≤ C`, the cores are divided into `p` shares
//!   that follow the tree and together cover the domain: processes are spread evenly over
//!   packages (in proportion to their cores; with fewer processes than packages, each process
//!   gets a contiguous block of whole packages), then over the NUMA nodes of a package, then over
//!   L3 caches, then into contiguous blocks of cores; pids alternate between packages (pid 0 on
//!   package 0, pid 1 on package 1, ...). Each process owns its whole share (e.g. a package when
//!   `p` equals the number of packages), so nested runs inside it spread over that share.
//! * **Hardware threads only when cores run out** — with `C < p ≤ P` (PUs in the domain), each
//!   process owns a single PU: first one PU of every core (in the policy's core order), then
//!   the second PU of every core, and so on.
//! * **Sharing** — with `p > P`, every PU carries ⌊p/P⌋ or ⌈p/P⌉ processes. Scattered: process
//!   `i` gets the PU process `i mod P` would get (shared round-robin, neighbouring pids on
//!   different PUs). Compact: consecutive pids get the same PU (shared in
//!   blocks, neighbouring pids on one PU, so what they exchange stays in its caches and a
//!   process waiting for its neighbour gives its PU to that neighbour; the first `p mod P` PUs
//!   carry the extra ones).
//! * **Manual** — the user gives each process's PUs (OS indices); they must exist and lie in the
//!   domain.

use crate::error::PlanError;
use crate::tree::{Domain, Machine};
use std::fmt;

/// How processes are placed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Fill a core, then a NUMA node, then a package before the next.
    Compact,
    /// Spread evenly over packages, then NUMA nodes, then caches, then cores.
    Scattered,
    /// Process `i` owns the PUs (OS indices) of set `i`.
    Manual(Vec<Vec<u32>>),
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Compact => f.write_str("compact"),
            Policy::Scattered => f.write_str("scattered"),
            Policy::Manual(_) => f.write_str("manual"),
        }
    }
}

/// A level of the machine tree, for "one process per ..." plans.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    /// Processor packages (sockets).
    Package,
    /// NUMA nodes.
    Numa,
    /// Cores.
    Core,
    /// Hardware threads.
    Pu,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Package => "package",
            Level::Numa => "NUMA node",
            Level::Core => "core",
            Level::Pu => "PU",
        })
    }
}

impl std::str::FromStr for Level {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self, PlanError> {
        match s.to_ascii_lowercase().as_str() {
            "package" | "socket" => Ok(Level::Package),
            "numa" | "node" => Ok(Level::Numa),
            "core" => Ok(Level::Core),
            "pu" | "thread" | "hwthread" => Ok(Level::Pu),
            _ => Err(PlanError::UnknownLevel {
                name: s.to_string(),
            }),
        }
    }
}

/// The domains of `p` processes placed in `domain` under `policy`, in pid order.
pub fn plan(
    m: &Machine,
    domain: &Domain,
    p: usize,
    policy: &Policy,
) -> Result<Vec<Domain>, PlanError> {
    if p == 0 {
        return Err(PlanError::ZeroProcesses);
    }
    if domain.pus().is_empty() {
        return Err(PlanError::EmptyDomain);
    }
    let cores = domain.cores(m);
    let pus_of = |c: usize| -> Vec<usize> {
        m.cores()[c]
            .pus
            .iter()
            .copied()
            .filter(|u| domain.pus().binary_search(u).is_ok())
            .collect()
    };
    match policy {
        Policy::Manual(sets) => manual(m, domain, p, sets),
        Policy::Compact if p <= cores.len() => Ok(cores
            .iter()
            .take(p)
            .map(|&c| Domain::from_pus(m, pus_of(c)))
            .collect()),
        Policy::Scattered if p <= cores.len() => Ok(split(m, &cores, p, 0)
            .into_iter()
            .map(|share| Domain::from_pus(m, share.iter().flat_map(|&c| pus_of(c))))
            .collect()),
        _ => {
            // One PU each: round r takes the r-th PU of every core, in the policy's core order.
            let order: Vec<usize> = if *policy == Policy::Compact {
                cores.clone()
            } else {
                split(m, &cores, cores.len(), 0).concat()
            };
            let per_core: Vec<Vec<usize>> = order.iter().map(|&c| pus_of(c)).collect();
            let rounds = per_core.iter().map(Vec::len).max().unwrap_or(0);
            let pus: Vec<usize> = (0..rounds)
                .flat_map(|r| per_core.iter().filter_map(move |v| v.get(r).copied()))
                .collect();
            // Compact blocks: the first p mod P PUs (one per core first, as above) carry one
            // process more, so the extra load lands on distinct cores as round-robin's does.
            let (q, r) = (p / pus.len(), p % pus.len());
            let at = |i: usize| {
                if *policy != Policy::Compact || p <= pus.len() {
                    i % pus.len()
                } else if i < r * (q + 1) {
                    i / (q + 1)
                } else {
                    r + (i - r * (q + 1)) / q
                }
            };
            Ok((0..p).map(|i| Domain::from_pus(m, [pus[at(i)]])).collect())
        }
    }
}

fn manual(
    m: &Machine,
    domain: &Domain,
    p: usize,
    sets: &[Vec<u32>],
) -> Result<Vec<Domain>, PlanError> {
    if sets.len() != p {
        return Err(PlanError::ManualCount {
            sets: sets.len(),
            procs: p,
        });
    }
    let owned = domain.pu_os(m);
    sets.iter()
        .enumerate()
        .map(|(pid, set)| {
            if set.is_empty() {
                return Err(PlanError::ManualEmpty { pid });
            }
            let mut pus = Vec::with_capacity(set.len());
            for &cpu in set {
                let Some(u) = m.pu_by_os(cpu) else {
                    return Err(PlanError::ManualNoSuchCpu {
                        pid,
                        cpu,
                        available: m.pus().iter().map(|u| u.os_index).collect(),
                    });
                };
                if domain.pus().binary_search(&u).is_err() {
                    return Err(PlanError::ManualOutside {
                        pid,
                        cpu,
                        domain: owned.clone(),
                    });
                }
                pus.push(u);
            }
            Ok(Domain::from_pus(m, pus))
        })
        .collect()
}

/// Split `cores` into `q ≤ cores.len()` shares following the tree from `depth` (0 = package,
/// 1 = NUMA node, 2 = L3 cache, 3 = contiguous blocks); shares of different groups alternate.
fn split(m: &Machine, cores: &[usize], q: usize, depth: usize) -> Vec<Vec<usize>> {
    debug_assert!(q >= 1 && q <= cores.len());
    if q == 1 {
        return vec![cores.to_vec()];
    }
    if depth >= 3 {
        let n = cores.len();
        return (0..q)
            .map(|i| cores[i * n / q..(i + 1) * n / q].to_vec())
            .collect();
    }
    let key = |c: usize| -> usize {
        let core = &m.cores()[c];
        match depth {
            0 => core.package,
            1 => core.numa,
            _ => core.l3.unwrap_or(usize::MAX),
        }
    };
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for &c in cores {
        match groups.iter_mut().find(|g| g.0 == key(c)) {
            Some(g) => g.1.push(c),
            None => groups.push((key(c), vec![c])),
        }
    }
    if groups.len() == 1 {
        return split(m, cores, q, depth + 1);
    }
    if q < groups.len() {
        // Fewer processes than groups: contiguous blocks of whole groups.
        let g = groups.len();
        return (0..q)
            .map(|i| {
                groups[i * g / q..(i + 1) * g / q]
                    .iter()
                    .flat_map(|x| x.1.iter().copied())
                    .collect()
            })
            .collect();
    }
    // Largest-remainder apportionment of q over the groups by their number of cores.
    let n = cores.len();
    let mut counts: Vec<usize> = groups.iter().map(|g| q * g.1.len() / n).collect();
    let mut by_rest: Vec<usize> = (0..groups.len()).collect();
    by_rest.sort_by_key(|&j| (std::cmp::Reverse(q * groups[j].1.len() % n), j));
    let mut left = q - counts.iter().sum::<usize>();
    for &j in by_rest.iter().cycle() {
        if left == 0 {
            break;
        }
        if counts[j] < groups[j].1.len() {
            counts[j] += 1;
            left -= 1;
        }
    }
    let subs: Vec<Vec<Vec<usize>>> = groups
        .iter()
        .zip(&counts)
        .filter(|(_, k)| **k > 0)
        .map(|(g, &k)| split(m, &g.1, k, depth + 1))
        .collect();
    // Interleave: first share of each group, then the second of each, ...
    let longest = subs.iter().map(Vec::len).max().unwrap_or(0);
    (0..longest)
        .flat_map(|i| subs.iter().filter_map(move |s| s.get(i).cloned()))
        .collect()
}

/// The shares of `q` processes that divide `domain` between them, each to place a run of its own
/// inside (the MPI ranks of one node, each with nested thread runs), in order: one domain each,
/// together covering the domain. Unlike [`plan`], whose processes each own one core under
/// [`Policy::Compact`], a share is a block of cores for the runs placed in it:
///
/// * **Scattered** — the cores divided into `q` shares that follow the tree, as [`plan`]
///   divides them: whole packages when the shares divide the packages, then whole NUMA nodes,
///   caches, blocks of cores; shares alternate between packages.
/// * **Compact** — `q` contiguous blocks of cores in logical order, as equal as they can be
///   (share 0 the first cores).
/// * **Manual** — share `i` is set `i`.
/// * More shares than cores: one PU each, as [`plan`] gives them (PUs shared beyond their
///   number: round-robin, or in blocks for compact).
///
/// ```
/// use mbsp_topology::{Machine, Policy, shares};
/// let m = Machine::synthetic("package:2 core:4 pu:1").unwrap().machine;
/// // Two ranks on a two-package node: a package each.
/// let two = shares(&m, &m.whole(), 2, &Policy::Scattered).unwrap();
/// assert_eq!(two[1].pu_os(&m), vec![4, 5, 6, 7]);
/// // Three ranks, compact: blocks of 2, 3 and 3 cores.
/// let three = shares(&m, &m.whole(), 3, &Policy::Compact).unwrap();
/// let sizes: Vec<usize> = three.iter().map(|d| d.pus().len()).collect();
/// assert_eq!(sizes, vec![2, 3, 3]);
/// ```
pub fn shares(
    m: &Machine,
    domain: &Domain,
    q: usize,
    policy: &Policy,
) -> Result<Vec<Domain>, PlanError> {
    if q == 0 {
        return Err(PlanError::ZeroProcesses);
    }
    if domain.pus().is_empty() {
        return Err(PlanError::EmptyDomain);
    }
    let cores = domain.cores(m);
    if q > cores.len() || matches!(policy, Policy::Manual(_)) {
        return plan(m, domain, q, policy);
    }
    let blocks: Vec<Vec<usize>> = match policy {
        Policy::Compact => {
            let n = cores.len();
            (0..q)
                .map(|i| cores[i * n / q..(i + 1) * n / q].to_vec())
                .collect()
        }
        _ => split(m, &cores, q, 0),
    };
    Ok(blocks
        .into_iter()
        .map(|block| {
            let pus = block.iter().flat_map(|&c| {
                m.cores()[c]
                    .pus
                    .iter()
                    .copied()
                    .filter(|u| domain.pus().binary_search(u).is_ok())
            });
            Domain::from_pus(m, pus)
        })
        .collect())
}

/// One domain per object of `level` that `domain` touches, in logical order, each holding the
/// object's PUs inside `domain`.
///
/// ```
/// use mbsp_topology::{Level, Machine, plan_per};
/// let m = Machine::synthetic("package:2 numa:2 core:2 pu:2").unwrap().machine;
/// let per_numa = plan_per(&m, &m.whole(), Level::Numa);
/// assert_eq!(per_numa.len(), 4);
/// assert_eq!(per_numa[3].pu_os(&m), vec![12, 13, 14, 15]);
/// ```
pub fn plan_per(m: &Machine, domain: &Domain, level: Level) -> Vec<Domain> {
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for &u in domain.pus() {
        let core = &m.cores()[m.pus()[u].core];
        let key = match level {
            Level::Package => core.package,
            Level::Numa => core.numa,
            Level::Core => m.pus()[u].core,
            Level::Pu => u,
        };
        match groups.iter_mut().find(|g| g.0 == key) {
            Some(g) => g.1.push(u),
            None => groups.push((key, vec![u])),
        }
    }
    groups.sort_by_key(|g| g.0);
    groups
        .into_iter()
        .map(|(_, pus)| Domain::from_pus(m, pus))
        .collect()
}

/// For each of `domains` (the processes of one plan), the most of them that share one of its
/// cores, itself included: all 1 when no two processes of the plan share a core. A plan of more
/// processes than its domain has cores stacks them (on the cores' hardware threads, or sharing
/// PUs): under [`Policy::Compact`] a process owns one core, so a plan nested inside it stacks
/// from 2 processes on.
///
/// ```
/// use mbsp_topology::{Machine, Policy, core_sharing, plan};
/// let m = Machine::synthetic("package:2 core:4 pu:1").unwrap().machine;
/// let top = plan(&m, &m.whole(), 2, &Policy::Compact).unwrap();
/// assert_eq!(core_sharing(&m, &top), vec![1, 1]);
/// // Nested in a compact process: its one core, 4 times.
/// let nested = plan(&m, &top[0], 4, &Policy::Compact).unwrap();
/// assert_eq!(core_sharing(&m, &nested), vec![4; 4]);
/// ```
pub fn core_sharing(m: &Machine, domains: &[Domain]) -> Vec<usize> {
    let cores: Vec<Vec<usize>> = domains
        .iter()
        .map(|d| {
            let mut v = d.cores(m);
            v.sort_unstable();
            v.dedup();
            v
        })
        .collect();
    let mut count = std::collections::HashMap::<usize, usize>::new();
    for &c in cores.iter().flatten() {
        *count.entry(c).or_default() += 1;
    }
    cores
        .iter()
        .map(|cs| cs.iter().map(|c| count[c]).max().unwrap_or(1))
        .collect()
}

/// The number of objects of `level` that `domain` touches.
pub fn count_at(m: &Machine, domain: &Domain, level: Level) -> usize {
    plan_per(m, domain, level).len()
}
