//! A rank's share of its node (docs/placement.md, "Ranks sharing a node"): what decides it
//! ([`RANK_SHARE_ENV`]), how it is found from what the launcher left the node's ranks
//! ([`rank_share`]), and the report of it under [`PLACEMENT_ENV`](crate::PLACEMENT_ENV).

use crate::place::{Placement, RANK_SHARE_ENV, parse_cpu_sets, report, reporting};
use mbsp_topology::{Binding, Domain, Machine, Policy, shares};
use std::fmt;

/// What decides a rank's share of its node ([`RANK_SHARE_ENV`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ShareSpec {
    /// Split the launcher's CPUs between the node's ranks, unless it bound them apart.
    Split,
    /// Keep what the launcher left each rank.
    Launcher,
    /// These CPUs (OS indices) for the node's ranks, by local rank.
    Manual(Vec<Vec<u32>>),
}

impl ShareSpec {
    /// [`RANK_SHARE_ENV`], read now: a bad value is an error naming it.
    pub(crate) fn from_env() -> std::result::Result<ShareSpec, String> {
        match std::env::var(RANK_SHARE_ENV) {
            Err(_) => Ok(ShareSpec::Split),
            Ok(v) => match v.trim() {
                "" | "split" => Ok(ShareSpec::Split),
                "launcher" => Ok(ShareSpec::Launcher),
                s if s.starts_with("manual:") => parse_cpu_sets(&s[7..])
                    .map(ShareSpec::Manual)
                    .map_err(|e| format!("{RANK_SHARE_ENV}: {e}")),
                s => Err(format!(
                    "{RANK_SHARE_ENV}=\"{s}\" is not understood: use split, launcher or \
                     manual:<cpus>;<cpus>;... (one CPU list per rank of the node)"
                )),
            },
        }
    }
}

/// How a rank's share of its node came about (the placement report says it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ShareHow {
    /// The node's `ranks` ranks split the CPUs the launcher left them all, by `policy`.
    Split { ranks: usize, policy: Policy },
    /// The launcher bound the node's ranks apart: its binding stands.
    BoundApart,
    /// [`RANK_SHARE_ENV`] is `launcher`.
    Kept,
    /// The CPUs given (by [`RANK_SHARE_ENV`], or the run's manual policy, one set per rank).
    Manual,
}

impl fmt::Display for ShareHow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShareHow::Split { ranks: 1, .. } => f.write_str("the node's one rank"),
            ShareHow::Split { ranks, policy } => {
                write!(f, "split {policy} between the node's {ranks} ranks")
            }
            ShareHow::BoundApart => f.write_str("as the launcher bound it"),
            ShareHow::Kept => write!(f, "as the launcher left it ({RANK_SHARE_ENV}=launcher)"),
            ShareHow::Manual => f.write_str("given"),
        }
    }
}

/// The share of its node of rank `rank` of a run over `p` ranks, local rank `local` of its
/// node: `sets[i]` holds the CPUs (OS indices) the launcher left local rank `i` (empty when
/// unknown: the whole machine). Under `spec`, the node's ranks split what the launcher left them
/// when it left them all the same CPUs (it did not bind them, or bound them all alike), by
/// `policy` ([`shares`]); a launcher that bound them apart is followed. A manual `policy` gives
/// one set per rank of the run. The error is the message of a misuse.
pub(crate) fn rank_share(
    m: &Machine,
    sets: &[Vec<u32>],
    local: usize,
    (rank, p): (usize, usize),
    spec: &ShareSpec,
    policy: &Policy,
) -> std::result::Result<(Domain, ShareHow), String> {
    let domain_of = |cpus: &[u32], what: &str| -> std::result::Result<Domain, String> {
        let mut pus = Vec::with_capacity(cpus.len());
        for &cpu in cpus {
            match m.pu_by_os(cpu) {
                Some(u) => pus.push(u),
                None => return Err(format!("{what}: CPU {cpu} is not a CPU of this machine")),
            }
        }
        Ok(Domain::from_pus(m, pus))
    };
    let own = match &sets[local] {
        cpus if cpus.is_empty() => m.whole(),
        cpus => domain_of(cpus, "the launcher's CPUs")?,
    };
    match (spec, policy) {
        (ShareSpec::Launcher, _) => Ok((own, ShareHow::Kept)),
        (ShareSpec::Manual(given), _) => {
            if given.len() != sets.len() {
                return Err(format!(
                    "{RANK_SHARE_ENV} gives {} CPU lists for the {} ranks of this node",
                    given.len(),
                    sets.len()
                ));
            }
            let share = domain_of(&given[local], RANK_SHARE_ENV)?;
            if share.pus().is_empty() {
                return Err(format!(
                    "{RANK_SHARE_ENV}: the list of local rank {local} is empty"
                ));
            }
            Ok((share, ShareHow::Manual))
        }
        (ShareSpec::Split, Policy::Manual(given)) => {
            if given.len() != p {
                return Err(format!(
                    "a manual placement of a run over {p} ranks needs {p} CPU lists, one per \
                     rank, but {} were given",
                    given.len()
                ));
            }
            let share = domain_of(&given[rank], "the manual placement")?;
            if share.pus().is_empty() {
                return Err(format!(
                    "the manual placement's list of rank {rank} is empty"
                ));
            }
            Ok((share, ShareHow::Manual))
        }
        (ShareSpec::Split, policy) => {
            if sets.iter().any(|s| s != &sets[local]) {
                return Ok((own, ShareHow::BoundApart));
            }
            let mut all = shares(m, &own, sets.len(), policy).map_err(|e| e.to_string())?;
            let ranks = sets.len();
            Ok((
                all.swap_remove(local),
                ShareHow::Split {
                    ranks,
                    policy: policy.clone(),
                },
            ))
        }
    }
}

/// This machine's host name, for the reports and profiles of ranks.
pub(crate) fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// Under [`PLACEMENT_ENV`]: rank `rank` of a run over `p` ranks, local rank `local.0` of the
/// `local.1` ranks of its node, has `share` (found as `how`) and is bound as `binding` says.
pub(crate) fn report_rank(
    rank: usize,
    p: usize,
    local: (usize, usize),
    m: &Machine,
    share: &Domain,
    how: &ShareHow,
    binding: &Binding,
) {
    if reporting() {
        let place = Placement::new(m, share, binding.clone());
        report(format!(
            "mbsp placement: rank {rank} of {p} (node {}, local rank {} of {}): {place}; {how}",
            host(),
            local.0,
            local.1
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ranks of one node: `sets` as the launcher left them.
    fn share(
        spec: &str,
        sets: &[Vec<u32>],
        local: usize,
        spec_env: &ShareSpec,
        policy: Policy,
    ) -> std::result::Result<(Vec<u32>, ShareHow), String> {
        let m = Machine::synthetic(spec).unwrap().machine;
        rank_share(&m, sets, local, (local, sets.len()), spec_env, &policy)
            .map(|(d, how)| (d.pu_os(&m), how))
    }

    #[test]
    fn ranks_of_a_node_split_it_unless_the_launcher_bound_them_apart() {
        let all: Vec<u32> = (0..8).collect();
        let tree = "package:2 core:4 pu:1";
        // Not bound (every rank has every CPU): one package each.
        for (local, want) in [(0, vec![0, 1, 2, 3]), (1, vec![4, 5, 6, 7])] {
            let (got, how) = share(
                tree,
                &[all.clone(), all.clone()],
                local,
                &ShareSpec::Split,
                Policy::Scattered,
            )
            .unwrap();
            assert_eq!(got, want);
            assert_eq!(
                how.to_string(),
                "split scattered between the node's 2 ranks"
            );
        }
        // Four ranks, compact: blocks of two cores in order.
        let four = vec![all.clone(); 4];
        let (got, _) = share(tree, &four, 2, &ShareSpec::Split, Policy::Compact).unwrap();
        assert_eq!(got, vec![4, 5]);
        // Unknown sets (empty) count as the whole machine.
        let (got, _) = share(
            tree,
            &[vec![], vec![]],
            1,
            &ShareSpec::Split,
            Policy::Scattered,
        )
        .unwrap();
        assert_eq!(got, vec![4, 5, 6, 7]);
        // Bound apart by the launcher (`-bind-to core`): its binding stands.
        let apart = [vec![2], vec![6]];
        let (got, how) = share(tree, &apart, 1, &ShareSpec::Split, Policy::Scattered).unwrap();
        assert_eq!((got, how), (vec![6], ShareHow::BoundApart));
        // Bound alike (`-bind-to socket`, both on package 1): they split it.
        let alike = [vec![4, 5, 6, 7], vec![4, 5, 6, 7]];
        let (got, _) = share(tree, &alike, 0, &ShareSpec::Split, Policy::Scattered).unwrap();
        assert_eq!(got, vec![4, 5]);
        // More ranks than CPUs: one each, shared (compact: in blocks of consecutive ranks).
        let many = vec![all.clone(); 10];
        let (got, _) = share(tree, &many, 9, &ShareSpec::Split, Policy::Compact).unwrap();
        assert_eq!(got.len(), 1);
        // Kept, given, and the run's manual policy (a list per rank of the run).
        let (got, how) = share(
            tree,
            &[all.clone(), all.clone()],
            0,
            &ShareSpec::Launcher,
            Policy::Scattered,
        )
        .unwrap();
        assert_eq!((got, how), (all.clone(), ShareHow::Kept));
        let given = ShareSpec::Manual(vec![vec![7], vec![0, 1]]);
        let (got, _) = share(
            tree,
            &[all.clone(), all.clone()],
            1,
            &given,
            Policy::Scattered,
        )
        .unwrap();
        assert_eq!(got, vec![0, 1]);
        let manual = Policy::Manual(vec![vec![3], vec![5]]);
        let (got, how) = share(
            tree,
            &[all.clone(), all.clone()],
            1,
            &ShareSpec::Split,
            manual,
        )
        .unwrap();
        assert_eq!((got, how), (vec![5], ShareHow::Manual));
        // Errors name what is wrong.
        let bad = ShareSpec::Manual(vec![vec![0]]);
        let e = share(
            tree,
            &[all.clone(), all.clone()],
            0,
            &bad,
            Policy::Scattered,
        )
        .unwrap_err();
        assert!(e.contains("1 CPU lists for the 2 ranks"), "{e}");
        let e = share(tree, &[vec![99]], 0, &ShareSpec::Split, Policy::Scattered).unwrap_err();
        assert!(e.contains("CPU 99 is not a CPU of this machine"), "{e}");
        let e = share(
            tree,
            &[all.clone(), all],
            0,
            &ShareSpec::Split,
            Policy::Manual(vec![vec![1]]),
        )
        .unwrap_err();
        assert!(e.contains("needs 2 CPU lists"), "{e}");
    }
}
