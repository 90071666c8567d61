//! Machine trees and placement plans on real multi-socket machines (hwloc XML files in
//! `../shared/data/topologies`) and on synthetic trees. Nothing here depends on the shape of
//! the machine running the tests.

use mbsp_topology::{Domain, Level, Machine, Policy, count_at, plan, plan_per};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

fn data_dir() -> PathBuf {
    // MBSP_DATA_DIR, else ../shared/data next to the repository.
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let candidates: Vec<PathBuf> = [
        std::env::var_os("MBSP_DATA_DIR").map(PathBuf::from),
        Some(repo.join("../shared/data")),
    ]
    .into_iter()
    .flatten()
    .map(|d| d.join("topologies"))
    .collect();
    let found = candidates.iter().find(|d| d.is_dir()).cloned();
    found.unwrap_or_else(|| {
        panic!(
            "topology test data not found (looked in {candidates:?}): set MBSP_DATA_DIR to the \
             shared data directory"
        )
    })
}

/// (file, packages, NUMA nodes, cores, PUs), from the data README.
const MACHINES: &[(&str, usize, usize, usize, usize)] = &[
    ("hwloc_32em64t-2n8c2t-pci-normalio.xml", 2, 2, 16, 32),
    ("hwloc_28intel64-2p2g7c-CoDgroups.v1tov2.xml", 2, 4, 28, 28),
    ("hwloc_memorysidecaches.xml", 2, 4, 40, 80),
    ("mpibind_g4dnmetal.xml", 2, 2, 48, 96),
    ("mpibind_cascade-lake-ap-snl-hwloc1.xml", 4, 4, 96, 192),
    ("hwlocgen_40intel64-2g2n4c+pci.xml", 4, 4, 40, 40),
    ("hwloc_16amd64-4distances.xml", 8, 8, 16, 16),
    ("mpibind_epyc-corona.xml", 2, 8, 48, 96),
    ("mpibind_eas-tioga.xml", 1, 4, 64, 128),
];

const SYNTHETIC: &[&str] = &[
    "package:2 numa:2 core:8 pu:2",
    "package:4 numa:2 core:8 pu:2",
    "package:2 core:3 pu:1",
    "numa:3 core:5 pu:4",
    "package:3 numa:1 l3:2 core:3 pu:2",
    "core:1 pu:1",
];

fn machines() -> Vec<Machine> {
    let mut v: Vec<Machine> = MACHINES
        .iter()
        .map(|(f, ..)| (*Machine::xml(data_dir().join(f)).unwrap().machine).clone())
        .collect();
    v.extend(
        SYNTHETIC
            .iter()
            .map(|s| (*Machine::synthetic(s).unwrap().machine).clone()),
    );
    v
}

#[test]
fn xml_machines_have_the_documented_shape() {
    for &(file, packages, numas, cores, pus) in MACHINES {
        let loaded = Machine::xml(data_dir().join(file)).unwrap();
        let m = &loaded.machine;
        assert_eq!(
            (
                m.packages().len(),
                m.numas().len(),
                m.cores().len(),
                m.pus().len()
            ),
            (packages, numas, cores, pus),
            "{file}"
        );
        assert!(!loaded.bindable(), "a loaded machine is never bound");
        assert!(
            m.has_numa_level(),
            "{file}: a real machine's tree has NUMA nodes"
        );
        assert!(!m.source().is_real());
        // Every core is in a package and a NUMA node that list it.
        for (i, c) in m.cores().iter().enumerate() {
            assert!(m.packages()[c.package].cores.contains(&i), "{file}");
            assert!(m.numas()[c.numa].cores.contains(&i), "{file}");
        }
        let plural = if packages == 1 {
            "1 package,"
        } else {
            "packages,"
        };
        assert!(m.to_string().contains(plural), "{}", m);
    }
}

#[test]
fn synthetic_machines_have_the_described_shape() {
    let m = Machine::synthetic("package:4 numa:2 core:8 pu:2")
        .unwrap()
        .machine;
    assert_eq!(
        (
            m.packages().len(),
            m.numas().len(),
            m.cores().len(),
            m.pus().len()
        ),
        (4, 8, 64, 128)
    );
    let m = Machine::synthetic("package:3 numa:1 l3:2 core:3 pu:2")
        .unwrap()
        .machine;
    assert_eq!(m.caches().iter().filter(|c| c.level == 3).count(), 6);
    assert!(m.has_numa_level());
}

/// hwloc rejects a description that does not end with the PU level: one PU per object of the
/// last level is added, and the source says so.
#[test]
fn synthetic_machines_without_a_pu_level_get_one_pu_per_core() {
    use mbsp_topology::Source;
    let l = Machine::from_spec("synthetic:package:2 core:4").unwrap();
    let m = &l.machine;
    assert_eq!(
        (m.packages().len(), m.cores().len(), m.pus().len()),
        (2, 8, 8)
    );
    assert_eq!(
        m.source(),
        &Source::Synthetic("package:2 core:4 pu:1".into())
    );
    assert!(
        m.to_string()
            .starts_with("machine (synthetic \"package:2 core:4 pu:1\"): 2 packages"),
        "{m}"
    );
    // The same plans as the description written out.
    let full = Machine::synthetic("package:2 core:4 pu:1").unwrap().machine;
    for p in [1, 3, 8] {
        assert_eq!(
            plan(m, &m.whole(), p, &Policy::Scattered).unwrap(),
            plan(&full, &full.whole(), p, &Policy::Scattered).unwrap()
        );
    }
    // A level above cores only: one PU per NUMA node, each its own core.
    let m = Machine::synthetic("package:2 numa:2").unwrap().machine;
    assert_eq!((m.numas().len(), m.cores().len(), m.pus().len()), (4, 4, 4));
    // A description that is wrong otherwise keeps hwloc's error, for the text as written.
    let e = Machine::synthetic("package:2 banana:3").unwrap_err();
    assert!(e.to_string().contains("\"package:2 banana:3\""), "{e}");
}

#[test]
fn synthetic_machines_without_numa_level_say_so() {
    // hwloc gives such a tree one NUMA node of its own, spanning both packages.
    let m = Machine::synthetic("package:2 core:2 pu:1").unwrap().machine;
    assert!(!m.has_numa_level());
    assert_eq!(m.numas().len(), 1);
    let text = m.to_string();
    assert!(
        text.contains("2 packages, no NUMA level, 4 cores"),
        "{text}"
    );
    assert!(!text.contains("NUMA node"), "{text}");
    assert_eq!(
        text.matches("    no NUMA level: 2 cores").count(),
        2,
        "{text}"
    );
    let m = Machine::synthetic("package:2 numa:1 core:2 pu:1")
        .unwrap()
        .machine;
    assert!(m.has_numa_level());
    assert!(m.to_string().contains("2 NUMA nodes"), "{m}");
}

/// The invariants every plan must satisfy (see the rules in plan.rs).
fn check_plan(m: &Machine, p: usize, policy: &Policy, what: &str) {
    let whole = m.whole();
    let d = plan(m, &whole, p, policy).unwrap();
    assert_eq!(
        d,
        plan(m, &whole, p, policy).unwrap(),
        "{what}: deterministic"
    );
    assert_eq!(d.len(), p, "{what}");
    let (c, u) = (m.cores().len(), m.pus().len());
    assert!(d.iter().all(|x| !x.pus().is_empty()), "{what}: non-empty");
    if p <= c {
        // Whole cores, disjoint.
        let mut seen = BTreeSet::new();
        for x in &d {
            for core in x.cores(m) {
                assert!(seen.insert(core), "{what}: core {core} owned twice");
                let all: BTreeSet<usize> = m.cores()[core].pus.iter().copied().collect();
                assert!(
                    all.iter().all(|pu| x.pus().contains(pu)),
                    "{what}: whole cores"
                );
            }
        }
        match policy {
            Policy::Compact => {
                // One core each, the first p cores: packages filled in order.
                for (i, x) in d.iter().enumerate() {
                    assert_eq!(x.cores(m), vec![i], "{what}: compact pid {i}");
                }
            }
            Policy::Scattered => {
                // All cores used; every package gets processes in proportion to its cores.
                assert_eq!(seen.len(), c, "{what}: shares cover the machine");
                let mut per_pkg: BTreeMap<usize, usize> = BTreeMap::new();
                for x in &d {
                    let pk = x.packages(m);
                    if p >= m.packages().len() {
                        assert_eq!(
                            pk.len(),
                            1,
                            "{what}: shares stay in a package when p >= packages"
                        );
                    }
                    for k in pk {
                        *per_pkg.entry(k).or_default() += 1;
                    }
                }
                for (pk, pkg) in m.packages().iter().enumerate() {
                    let fair = p as f64 * pkg.cores.len() as f64 / c as f64;
                    let got = *per_pkg.get(&pk).unwrap_or(&0) as f64;
                    // With fewer processes than packages every package belongs to one process.
                    let want_ok = if p < m.packages().len() {
                        got == 1.0
                    } else {
                        (got - fair).abs() < 1.0 + 1e-9
                    };
                    assert!(want_ok, "{what}: package {pk} has {got}, fair {fair}");
                }
                // pids alternate packages when there is more than one.
                if m.packages().len() > 1 && p >= 2 {
                    assert_ne!(
                        d[0].packages(m),
                        d[1].packages(m),
                        "{what}: pid 0 and 1 on different packages"
                    );
                }
            }
            Policy::Manual(_) => {}
        }
    } else {
        // Single PUs; every core used once before any is used twice; beyond P, even sharing.
        assert!(d.iter().all(|x| x.pus().len() == 1), "{what}: one PU each");
        if *policy == Policy::Compact && p > u {
            // Shared in blocks: the processes of a PU are consecutive pids.
            let mut ends: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
            for (i, x) in d.iter().enumerate() {
                let e = ends.entry(x.pus()[0]).or_insert((i, i));
                e.1 = i;
            }
            for (pu, (lo, hi)) in &ends {
                assert!(
                    d[*lo..=*hi].iter().all(|x| x.pus()[0] == *pu),
                    "{what}: compact shares PU {pu} in a block of pids"
                );
            }
        } else {
            let first: BTreeSet<usize> = d.iter().take(c).map(|x| x.cores(m)[0]).collect();
            assert_eq!(
                first.len(),
                c,
                "{what}: the first C processes cover all cores"
            );
        }
        let mut load: BTreeMap<usize, usize> = BTreeMap::new();
        for x in &d {
            *load.entry(x.pus()[0]).or_default() += 1;
        }
        let (lo, hi) = (p / u, p.div_ceil(u));
        assert!(
            load.values().all(|&n| n >= lo.max(1) && n <= hi),
            "{what}: even sharing"
        );
        if p <= u {
            assert_eq!(load.len(), p, "{what}: distinct PUs");
        }
    }
}

#[test]
fn plans_satisfy_the_rules_on_every_machine() {
    for m in machines() {
        let (k, n, c, u) = (
            m.packages().len(),
            m.numas().len(),
            m.cores().len(),
            m.pus().len(),
        );
        let mut ps = vec![1, 2, 3, 5, k, n, c, c + 1, u, u + 5, 2 * u + 1];
        ps.retain(|&p| p >= 1);
        ps.sort_unstable();
        ps.dedup();
        for p in ps {
            for policy in [Policy::Compact, Policy::Scattered] {
                check_plan(&m, p, &policy, &format!("{} p={p} {policy}", m.source()));
            }
        }
    }
}

#[test]
fn scattered_gives_one_package_each_when_p_equals_packages() {
    for &(file, packages, ..) in MACHINES {
        let m = Machine::xml(data_dir().join(file)).unwrap().machine;
        let d = plan(&m, &m.whole(), packages, &Policy::Scattered).unwrap();
        for (i, x) in d.iter().enumerate() {
            assert_eq!(x.packages(&m), vec![i], "{file}");
            assert_eq!(
                x.cores(&m),
                m.packages()[i].cores,
                "{file}: owns the whole package"
            );
        }
        assert_eq!(d, plan_per(&m, &m.whole(), Level::Package), "{file}");
    }
}

#[test]
fn golden_placements_on_a_small_machine() {
    // 2 packages x 2 NUMA nodes x 2 cores x 2 PUs: PUs 0..16, core c has PUs 2c, 2c+1.
    let m = Machine::synthetic("package:2 numa:2 core:2 pu:2")
        .unwrap()
        .machine;
    let show = |d: &[Domain]| -> Vec<Vec<u32>> { d.iter().map(|x| x.pu_os(&m)).collect() };
    let w = m.whole();
    assert_eq!(
        show(&plan(&m, &w, 3, &Policy::Compact).unwrap()),
        vec![vec![0, 1], vec![2, 3], vec![4, 5]]
    );
    // Scattered 4: one NUMA node each, alternating packages.
    assert_eq!(
        show(&plan(&m, &w, 4, &Policy::Scattered).unwrap()),
        vec![
            vec![0, 1, 2, 3],
            vec![8, 9, 10, 11],
            vec![4, 5, 6, 7],
            vec![12, 13, 14, 15]
        ]
    );
    // Scattered 2: one package each.
    assert_eq!(
        show(&plan(&m, &w, 2, &Policy::Scattered).unwrap()),
        vec![(0..8).collect::<Vec<u32>>(), (8..16).collect()]
    );
    // 10 > 8 cores: single PUs, first PU of every core first.
    assert_eq!(
        show(&plan(&m, &w, 10, &Policy::Compact).unwrap()),
        vec![
            vec![0],
            vec![2],
            vec![4],
            vec![6],
            vec![8],
            vec![10],
            vec![12],
            vec![14],
            vec![1],
            vec![3]
        ]
    );
    assert_eq!(
        show(&plan(&m, &w, 10, &Policy::Scattered).unwrap())[..4],
        [vec![0], vec![8], vec![4], vec![12]]
    );
    // Nested: inside the second package's share, 2 processes scattered get a NUMA node each.
    let pkg1 = &plan(&m, &w, 2, &Policy::Scattered).unwrap()[1];
    assert_eq!(
        show(&plan(&m, pkg1, 2, &Policy::Scattered).unwrap()),
        vec![vec![8, 9, 10, 11], vec![12, 13, 14, 15]]
    );
    assert_eq!(count_at(&m, pkg1, Level::Core), 4);
    assert_eq!(plan_per(&m, pkg1, Level::Numa).len(), 2);
}

#[test]
fn manual_plans_and_their_errors() {
    let m = Machine::synthetic("package:2 core:2 pu:2").unwrap().machine;
    let w = m.whole();
    let d = plan(&m, &w, 2, &Policy::Manual(vec![vec![0, 1], vec![7]])).unwrap();
    assert_eq!(d[1].pu_os(&m), vec![7]);
    assert_eq!(d[1].cores(&m), vec![3]);
    let e = plan(&m, &w, 2, &Policy::Manual(vec![vec![0], vec![9]])).unwrap_err();
    assert!(
        e.to_string()
            .contains("pid 1 names CPU 9, which does not exist (this machine has CPUs 0-7)"),
        "{e}"
    );
    let e = plan(&m, &w, 3, &Policy::Manual(vec![vec![0]])).unwrap_err();
    assert!(
        e.to_string().contains("gives 1 CPU sets for 3 processes"),
        "{e}"
    );
    let pkg0 = &plan_per(&m, &w, Level::Package)[0];
    let e = plan(&m, pkg0, 1, &Policy::Manual(vec![vec![5]])).unwrap_err();
    assert!(
        e.to_string()
            .contains("outside the CPUs being placed (0-3)"),
        "{e}"
    );
    let e = plan(&m, &w, 0, &Policy::Compact).unwrap_err();
    assert!(e.to_string().contains("p = 0"), "{e}");
}

#[test]
fn loading_errors_are_clear() {
    let e = Machine::xml("/nonexistent/machine.xml").unwrap_err();
    assert!(
        e.to_string()
            .contains("cannot load topology from XML file /nonexistent/machine.xml"),
        "{e}"
    );
    let e = Machine::synthetic("package:2 banana:3").unwrap_err();
    assert!(
        e.to_string()
            .contains("invalid synthetic topology \"package:2 banana:3\""),
        "{e}"
    );
    let e = Machine::from_spec("whatever").unwrap_err();
    assert!(
        e.to_string()
            .contains("MBSP_TOPOLOGY=\"whatever\" is not understood"),
        "{e}"
    );
    let m = Machine::from_spec("synthetic:package:2 core:2 pu:1").unwrap();
    assert_eq!(m.machine.cores().len(), 4);
    let f = data_dir().join(MACHINES[0].0);
    assert_eq!(
        Machine::from_spec(&format!("xml:{}", f.display()))
            .unwrap()
            .machine
            .pus()
            .len(),
        32
    );
    assert_eq!(
        Machine::from_spec(f.to_str().unwrap())
            .unwrap()
            .machine
            .pus()
            .len(),
        32
    );
}

#[test]
fn levels_parse() {
    assert_eq!("socket".parse::<Level>().unwrap(), Level::Package);
    assert_eq!("NUMA".parse::<Level>().unwrap(), Level::Numa);
    assert!("rack".parse::<Level>().is_err());
}

/// The shares of `q` ranks on a node, checked for every policy: non-empty, inside the domain;
/// with no more ranks than cores (and not manual), disjoint, of whole cores, and covering it;
/// with more, one PU each (`shares`).
fn check_shares(m: &Machine, domain: &Domain, q: usize, policy: &Policy) -> Vec<Domain> {
    let got = mbsp_topology::shares(m, domain, q, policy).unwrap();
    let what = format!("{} q = {q} {policy}", m.source());
    assert_eq!(got.len(), q, "{what}");
    let inside: BTreeSet<usize> = domain.pus().iter().copied().collect();
    for d in &got {
        assert!(!d.pus().is_empty(), "{what}");
        assert!(d.pus().iter().all(|u| inside.contains(u)), "{what}");
    }
    if matches!(policy, Policy::Manual(_)) {
        return got; // the user's sets, checked against the domain above
    }
    if q <= domain.cores(m).len() {
        let mut all: Vec<usize> = got.iter().flat_map(|d| d.pus().iter().copied()).collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "{what}: shares overlap");
        assert_eq!(all, domain.pus(), "{what}: shares do not cover the domain");
        // Whole cores: a core's PUs are in one share.
        for d in &got {
            for c in d.cores(m) {
                assert!(
                    m.cores()[c].pus.iter().all(|u| d.pus().contains(u)),
                    "{what}"
                );
            }
        }
    } else {
        assert!(
            got.iter().all(|d| d.pus().len() == 1),
            "{what}: one PU each"
        );
    }
    got
}

#[test]
fn ranks_sharing_a_node_split_it_along_the_tree() {
    for m in machines() {
        let whole = m.whole();
        let (packages, cores) = (m.packages().len(), m.cores().len());
        for q in [1, 2, 3, packages, 2 * packages, cores.max(1), cores + 1] {
            for policy in [Policy::Scattered, Policy::Compact] {
                let got = check_shares(&m, &whole, q, &policy);
                if q > cores {
                    continue;
                }
                let sizes: Vec<usize> = got.iter().map(|d| d.cores(&m).len()).collect();
                match policy {
                    // Contiguous blocks, as equal as they can be.
                    Policy::Compact => {
                        let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                        assert!(hi - lo <= 1, "{} q = {q}: {sizes:?}", m.source());
                        let firsts: Vec<usize> = got.iter().map(|d| d.cores(&m)[0]).collect();
                        assert!(firsts.windows(2).all(|w| w[0] < w[1]), "{firsts:?}");
                    }
                    // One rank per package: each share is a whole package; two per package:
                    // each share inside one package, two in each.
                    _ if packages > 1 && q == packages => {
                        let mut own: Vec<Vec<usize>> = got.iter().map(|d| d.packages(&m)).collect();
                        assert!(own.iter().all(|p| p.len() == 1), "{} {own:?}", m.source());
                        for (d, p) in got.iter().zip(&own) {
                            assert_eq!(d.cores(&m), m.packages()[p[0]].cores, "{}", m.source());
                        }
                        own.sort();
                        own.dedup();
                        assert_eq!(own.len(), packages, "{}", m.source());
                    }
                    _ if packages > 1
                        && q == 2 * packages
                        && m.packages().iter().all(|p| p.cores.len() >= 2) =>
                    {
                        let mut per = BTreeMap::new();
                        for d in &got {
                            let p = d.packages(&m);
                            assert_eq!(p.len(), 1, "{}: a share across packages", m.source());
                            *per.entry(p[0]).or_insert(0) += 1;
                        }
                        assert!(per.values().all(|&k| k == 2), "{} {per:?}", m.source());
                    }
                    _ => {}
                }
            }
        }
    }
}

#[test]
fn shares_of_a_launcher_set_stay_inside_it_and_manual_shares_are_given() {
    let m = Machine::synthetic("package:2 numa:2 core:4 pu:2")
        .unwrap()
        .machine;
    // The launcher left this node's ranks the second package: they split it.
    let second = Domain::from_pus(
        &m,
        m.packages()[1]
            .cores
            .iter()
            .flat_map(|&c| m.cores()[c].pus.clone()),
    );
    for q in [1, 2, 3, 8, 9, 17] {
        for policy in [Policy::Scattered, Policy::Compact] {
            check_shares(&m, &second, q, &policy);
        }
    }
    // Two ranks: a NUMA node of the second package each, under either policy.
    let two = check_shares(&m, &second, 2, &Policy::Scattered);
    assert_eq!(two[0].numas(&m).len(), 1);
    assert_ne!(two[0].numas(&m), two[1].numas(&m));
    let manual = Policy::Manual(vec![vec![16, 17], vec![18, 19, 20]]);
    let got = check_shares(&m, &second, 2, &manual);
    assert_eq!(got[1].pu_os(&m), vec![18, 19, 20]);
    // Errors: no ranks; a manual set outside the launcher's.
    assert!(mbsp_topology::shares(&m, &second, 0, &Policy::Scattered).is_err());
    let outside = Policy::Manual(vec![vec![0], vec![16]]);
    assert!(mbsp_topology::shares(&m, &second, 2, &outside).is_err());
}

/// Which processes of a plan share a core: none while there are cores enough; all of a plan of
/// more processes than its domain has cores, on the hardware threads or on shared PUs.
#[test]
fn core_sharing_of_plans() {
    use mbsp_topology::core_sharing;
    let m = Machine::synthetic("package:2 core:2 pu:2").unwrap().machine;
    for policy in [Policy::Compact, Policy::Scattered] {
        for p in 1..=4 {
            let d = plan(&m, &m.whole(), p, &policy).unwrap();
            assert_eq!(core_sharing(&m, &d), vec![1; p], "{policy} p = {p}");
        }
        // 5..8 processes on 4 cores: one PU each, so some cores carry 2.
        let d = plan(&m, &m.whole(), 6, &policy).unwrap();
        let s = core_sharing(&m, &d);
        assert_eq!(s.iter().filter(|&&n| n == 2).count(), 4, "{policy}: {s:?}");
        assert_eq!(s.iter().filter(|&&n| n == 1).count(), 2, "{policy}: {s:?}");
        // 10 on 8 PUs: PUs shared, 3 on some cores.
        let d = plan(&m, &m.whole(), 10, &policy).unwrap();
        assert_eq!(core_sharing(&m, &d).iter().max(), Some(&3), "{policy}");
    }
    // Compact nesting: a process owns one core (of 2 PUs), a run of 2 nested in it shares it.
    let top = plan(&m, &m.whole(), 1, &Policy::Compact).unwrap();
    let nested = plan(&m, &top[0], 2, &Policy::Compact).unwrap();
    assert_eq!(core_sharing(&m, &nested), vec![2, 2]);
    // Manual sets naming the same core twice.
    let d = plan(&m, &m.whole(), 2, &Policy::Manual(vec![vec![0], vec![1]])).unwrap();
    assert_eq!(core_sharing(&m, &d), vec![2, 2]);
    assert!(core_sharing(&m, &[]).is_empty());
}

/// More processes than PUs: compact shares each PU with a block of consecutive pids (the first
/// `p mod P` PUs, one per core first, carrying one more), scattered round-robin.
#[test]
fn sharing_is_in_blocks_for_compact_and_round_robin_for_scattered() {
    let pu_of = |spec: &str, p: usize, policy: &Policy| -> Vec<usize> {
        let m = Machine::synthetic(spec).unwrap().machine;
        plan(&m, &m.whole(), p, policy)
            .unwrap()
            .iter()
            .map(|d| d.pus()[0])
            .collect()
    };
    let two = "package:1 core:2 pu:1";
    assert_eq!(pu_of(two, 5, &Policy::Compact), vec![0, 0, 0, 1, 1]);
    assert_eq!(pu_of(two, 5, &Policy::Scattered), vec![0, 1, 0, 1, 0]);
    assert_eq!(
        pu_of(two, 64, &Policy::Compact)[..33]
            .iter()
            .filter(|&&u| u == 0)
            .count(),
        32
    );
    // Two PUs per core: the PU order takes one PU of every core first, so the two PUs with a
    // third process are on different cores.
    let ht = "package:1 core:2 pu:2";
    let got = pu_of(ht, 10, &Policy::Compact);
    assert_eq!(got, vec![0, 0, 0, 2, 2, 2, 1, 1, 3, 3]);
}
