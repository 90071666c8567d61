//! The machine tree as plain data: packages → NUMA nodes → cores → PUs, with caches.
//!
//! Everything is stored in flat vectors indexed by *logical* index (hwloc's depth-first order,
//! so core `i + 1` is the next core of the same NUMA node when there is one); PUs and NUMA nodes
//! also carry the operating system's index (CPU number, node number), which is what binding,
//! `taskset` and `numactl` use.

use std::fmt;
use std::path::PathBuf;

/// Where a machine tree came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Detected on the machine this program runs on: binding is applied.
    Detected,
    /// An hwloc synthetic description, e.g. `package:2 numa:2 core:8 pu:2`.
    Synthetic(String),
    /// An hwloc XML file (e.g. exported with `lstopo file.xml` on another machine).
    Xml(PathBuf),
    /// A fake machine that hwloc loaded because `HWLOC_SYNTHETIC` or `HWLOC_XMLFILE` is set in
    /// the environment (the value is the variable's content).
    HwlocEnv(String),
}

impl Source {
    /// Whether this tree describes the machine we run on (only then is binding applied).
    pub fn is_real(&self) -> bool {
        matches!(self, Source::Detected)
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Detected => f.write_str("detected on this machine"),
            Source::Synthetic(s) => write!(f, "synthetic \"{s}\""),
            Source::Xml(p) => write!(f, "XML file {}", p.display()),
            Source::HwlocEnv(s) => write!(f, "hwloc environment ({s})"),
        }
    }
}

/// A processor package (socket).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Package {
    /// OS index (physical package id), if known.
    pub os_index: Option<u32>,
    /// Logical indices of its NUMA nodes.
    pub numas: Vec<usize>,
    /// Logical indices of its cores.
    pub cores: Vec<usize>,
}

/// A NUMA node (memory domain).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Numa {
    /// OS index (the node number of `numactl`).
    pub os_index: u32,
    /// Local memory in bytes (0 if unknown).
    pub memory: u64,
    /// Logical indices of the cores whose first PU it serves.
    pub cores: Vec<usize>,
}

/// A core: one or more PUs (hardware threads) sharing execution units.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Core {
    /// Logical index of its package.
    pub package: usize,
    /// Logical index of its NUMA node.
    pub numa: usize,
    /// Logical indices of its PUs.
    pub pus: Vec<usize>,
    /// Index (into [`Machine::caches`]) of the L2 cache it uses, if known.
    pub l2: Option<usize>,
    /// Index (into [`Machine::caches`]) of the L3 cache it uses, if known.
    pub l3: Option<usize>,
}

/// A processing unit (hardware thread), what the OS schedules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pu {
    /// OS index (the CPU number of `taskset`).
    pub os_index: u32,
    /// Logical index of its core.
    pub core: usize,
}

/// A data cache shared by some cores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cache {
    /// 1, 2, 3...
    pub level: u8,
    /// Size in bytes (0 if unknown).
    pub size: u64,
    /// Logical indices of the cores sharing it.
    pub cores: Vec<usize>,
}

/// A machine tree: machine → package → NUMA node → core → PU, with caches.
#[derive(Clone, Debug)]
pub struct Machine {
    pub(crate) source: Source,
    pub(crate) packages: Vec<Package>,
    pub(crate) numas: Vec<Numa>,
    pub(crate) cores: Vec<Core>,
    pub(crate) pus: Vec<Pu>,
    pub(crate) caches: Vec<Cache>,
    /// Whether the tree has a NUMA level (see [`Machine::has_numa_level`]).
    pub(crate) numa_level: bool,
}

impl Machine {
    /// Build a machine from its parts, checking the cross references.
    pub(crate) fn new(
        source: Source,
        packages: Vec<Package>,
        numas: Vec<Numa>,
        cores: Vec<Core>,
        pus: Vec<Pu>,
        caches: Vec<Cache>,
    ) -> Machine {
        for (i, c) in cores.iter().enumerate() {
            assert!(c.package < packages.len() && c.numa < numas.len() && !c.pus.is_empty());
            assert!(c.pus.iter().all(|&u| pus[u].core == i));
        }
        Machine {
            source,
            packages,
            numas,
            cores,
            pus,
            caches,
            numa_level: true,
        }
    }

    /// Where the tree came from.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// Packages in logical order.
    pub fn packages(&self) -> &[Package] {
        &self.packages
    }

    /// Whether the tree has a NUMA level. A synthetic description without one (e.g.
    /// `package:2 core:2 pu:1`) gets a single NUMA node from hwloc that stands for no real
    /// memory domain: [`Machine::numas`] still lists it (every core needs one), but reports
    /// should say "no NUMA level" rather than "NUMA 0". Trees detected on a machine or read
    /// from its XML export always have one.
    ///
    /// ```
    /// use mbsp_topology::Machine;
    /// assert!(!Machine::synthetic("package:2 core:2 pu:1").unwrap().machine.has_numa_level());
    /// assert!(Machine::synthetic("package:2 numa:1 core:2 pu:1").unwrap().machine.has_numa_level());
    /// ```
    pub fn has_numa_level(&self) -> bool {
        self.numa_level
    }

    /// NUMA nodes in logical order.
    pub fn numas(&self) -> &[Numa] {
        &self.numas
    }

    /// Cores in logical order.
    pub fn cores(&self) -> &[Core] {
        &self.cores
    }

    /// PUs in logical order.
    pub fn pus(&self) -> &[Pu] {
        &self.pus
    }

    /// Data caches (L2 and L3) in the order found.
    pub fn caches(&self) -> &[Cache] {
        &self.caches
    }

    /// The logical index of the PU with OS index `os`.
    pub fn pu_by_os(&self, os: u32) -> Option<usize> {
        self.pus.iter().position(|p| p.os_index == os)
    }

    /// Every PU of the machine, as a [`Domain`].
    pub fn whole(&self) -> Domain {
        Domain::from_pus(self, 0..self.pus.len())
    }
}

/// Format OS indices compactly: `0-7,16-23`.
pub fn ranges(ids: impl IntoIterator<Item = u32>) -> String {
    let mut v: Vec<u32> = ids.into_iter().collect();
    v.sort_unstable();
    v.dedup();
    let mut out = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    out.join(",")
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

fn bytes(n: u64) -> String {
    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;
    if n >= GIB {
        format!("{:.1} GiB", n as f64 / GIB as f64)
    } else if n >= MIB {
        format!("{} MiB", n / MIB)
    } else {
        format!("{} KiB", n / 1024)
    }
}

impl fmt::Display for Machine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "machine ({}): {}, {}, {}, {}",
            self.source,
            plural(self.packages.len(), "package"),
            if self.numa_level {
                plural(self.numas.len(), "NUMA node")
            } else {
                "no NUMA level".to_string()
            },
            plural(self.cores.len(), "core"),
            plural(self.pus.len(), "PU")
        )?;
        for (pi, p) in self.packages.iter().enumerate() {
            writeln!(f, "  package {pi}")?;
            for &n in &p.numas {
                let numa = &self.numas[n];
                let cores: Vec<usize> = numa
                    .cores
                    .iter()
                    .copied()
                    .filter(|&c| self.cores[c].package == pi)
                    .collect();
                let pus = cores
                    .iter()
                    .flat_map(|&c| self.cores[c].pus.iter().map(|&u| self.pus[u].os_index));
                let l3: Vec<usize> = {
                    let mut v: Vec<usize> =
                        cores.iter().filter_map(|&c| self.cores[c].l3).collect();
                    v.dedup();
                    v
                };
                if self.numa_level {
                    write!(
                        f,
                        "    NUMA node {} ({}): ",
                        numa.os_index,
                        bytes(numa.memory)
                    )?;
                } else {
                    write!(f, "    no NUMA level: ")?;
                }
                write!(
                    f,
                    "{} cores ({}), PUs {}",
                    cores.len(),
                    ranges(cores.iter().map(|&c| c as u32)),
                    ranges(pus)
                )?;
                if !l3.is_empty() {
                    write!(f, ", {} L3 of {}", l3.len(), bytes(self.caches[l3[0]].size))?;
                }
                writeln!(f)?;
            }
        }
        Ok(())
    }
}

/// A set of PUs of a machine: what a process owns (and is bound to), and the part of the machine
/// a nested run is planned over.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Domain {
    /// Logical PU indices, sorted.
    pus: Vec<usize>,
}

impl Domain {
    /// The domain made of these logical PU indices.
    pub fn from_pus(_m: &Machine, pus: impl IntoIterator<Item = usize>) -> Domain {
        let mut pus: Vec<usize> = pus.into_iter().collect();
        pus.sort_unstable();
        pus.dedup();
        Domain { pus }
    }

    /// Logical PU indices.
    pub fn pus(&self) -> &[usize] {
        &self.pus
    }

    /// OS indices of the PUs (CPU numbers), ascending.
    pub fn pu_os(&self, m: &Machine) -> Vec<u32> {
        let mut v: Vec<u32> = self.pus.iter().map(|&u| m.pus[u].os_index).collect();
        v.sort_unstable();
        v
    }

    /// Logical indices of the cores it touches, in order.
    pub fn cores(&self, m: &Machine) -> Vec<usize> {
        let mut v: Vec<usize> = self.pus.iter().map(|&u| m.pus[u].core).collect();
        v.dedup();
        v
    }

    /// OS indices of the NUMA nodes of its cores.
    pub fn numas(&self, m: &Machine) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .cores(m)
            .iter()
            .map(|&c| m.numas[m.cores[c].numa].os_index)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Logical indices of the packages of its cores.
    pub fn packages(&self, m: &Machine) -> Vec<usize> {
        let mut v: Vec<usize> = self.cores(m).iter().map(|&c| m.cores[c].package).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ranges_are_compact() {
        assert_eq!(super::ranges([0, 1, 2, 3, 16, 17, 5]), "0-3,5,16-17");
        assert_eq!(super::ranges([]), "");
    }
}
