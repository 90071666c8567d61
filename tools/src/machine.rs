//! The machine: a one-line description of the machine the numbers were measured on
//! ([`describe`]), and its tree as plain data ([`Tree`]: what `mbsp topo --json` prints under
//! `"machine"` and the Python package's `Machine` holds).

use mbsp_topology::Machine;
use serde_json::{Value, json};

/// CPU model, hardware threads, kernel: `"AMD EPYC 7763 64-Core Processor, 2 hardware
/// threads, Linux 6.1.0"`.
///
/// ```
/// assert!(mbsp_tools::machine::describe().contains("hardware threads"));
/// ```
pub fn describe() -> String {
    let cpu = mbsp::params::cpu_model().unwrap_or_else(|| "unknown CPU".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| format!("Linux {}", s.trim()))
        .unwrap_or_else(|_| std::env::consts::OS.into());
    format!("{cpu}, {} hardware threads, {kernel}", mbsp::nprocs())
}

/// A machine tree as plain data: where it comes from, whether it has a NUMA level, and its
/// packages, NUMA nodes and cores, each naming the others by index (cores, packages) or OS
/// index (NUMA nodes, PUs).
///
/// ```
/// let m = mbsp_topology::Machine::synthetic("package:2 core:2 pu:2").unwrap().machine;
/// let t = mbsp_tools::machine::Tree::of(&m);
/// assert_eq!((t.packages.len(), t.cores.len()), (2, 4));
/// assert_eq!(t.cores[3].package, 1);
/// assert_eq!(t.cores[3].pus, [6, 7]);
/// assert_eq!(t.to_json()["cores"][3]["pus"][1], 7);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Tree {
    /// Where the tree comes from (`detected on this machine`, the synthetic description, the
    /// XML file).
    pub source: String,
    /// Whether the tree has NUMA nodes between packages and cores
    /// ([`Machine::has_numa_level`]).
    pub numa_level: bool,
    /// The packages, in order.
    pub packages: Vec<Package>,
    /// The NUMA nodes, in order.
    pub numas: Vec<Numa>,
    /// The cores, in order.
    pub cores: Vec<Core>,
}

/// One package of a [`Tree`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Package {
    /// Its OS index, if the tree names one.
    pub os_index: Option<u32>,
    /// The OS indices of its NUMA nodes.
    pub numas: Vec<u32>,
    /// Its cores (indices into [`Tree::cores`]).
    pub cores: Vec<usize>,
}

/// One NUMA node of a [`Tree`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Numa {
    /// Its OS index.
    pub os_index: u32,
    /// Its memory in bytes.
    pub memory: u64,
    /// Its cores (indices into [`Tree::cores`]).
    pub cores: Vec<usize>,
}

/// One core of a [`Tree`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Core {
    /// Its package (an index into [`Tree::packages`]).
    pub package: usize,
    /// The OS index of its NUMA node (`None` when the tree has no NUMA level).
    pub numa: Option<u32>,
    /// The OS indices of its PUs (hardware threads).
    pub pus: Vec<u32>,
}

impl Tree {
    /// The tree of `m`.
    pub fn of(m: &Machine) -> Tree {
        let numa_os = |n: usize| m.numas()[n].os_index;
        Tree {
            source: m.source().to_string(),
            numa_level: m.has_numa_level(),
            packages: m
                .packages()
                .iter()
                .map(|p| Package {
                    os_index: p.os_index,
                    numas: p.numas.iter().map(|&n| numa_os(n)).collect(),
                    cores: p.cores.clone(),
                })
                .collect(),
            numas: m
                .numas()
                .iter()
                .map(|n| Numa {
                    os_index: n.os_index,
                    memory: n.memory,
                    cores: n.cores.clone(),
                })
                .collect(),
            cores: m
                .cores()
                .iter()
                .map(|c| Core {
                    package: c.package,
                    numa: m.has_numa_level().then(|| numa_os(c.numa)),
                    pus: c.pus.iter().map(|&u| m.pus()[u].os_index).collect(),
                })
                .collect(),
        }
    }

    /// The tree as `mbsp topo --json` prints it under `"machine"`.
    pub fn to_json(&self) -> Value {
        json!({
            "source": self.source,
            "numa_level": self.numa_level,
            "packages": self.packages.iter().map(|p| json!({
                "os_index": p.os_index, "numas": p.numas, "cores": p.cores,
            })).collect::<Vec<_>>(),
            "numas": self.numas.iter().map(|n| json!({
                "os_index": n.os_index, "memory": n.memory, "cores": n.cores,
            })).collect::<Vec<_>>(),
            "cores": self.cores.iter().map(|c| json!({
                "package": c.package, "numa": c.numa, "pus": c.pus,
            })).collect::<Vec<_>>(),
        })
    }
}
