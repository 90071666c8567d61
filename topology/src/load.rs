//! Loading machine trees through hwloc: the real machine, a synthetic description, an XML file,
//! or whatever `MBSP_TOPOLOGY` says.

use crate::error::{HwlocError, TopologyError};
use crate::tree::{Cache, Core, Machine, Numa, Package, Pu, Source};
use hwlocality::Topology;
use hwlocality::object::TopologyObject;
use hwlocality::object::attributes::ObjectAttributes;
use hwlocality::object::types::ObjectType;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// The environment variable every mbsp program honours to run on (or plan for) another machine:
/// `synthetic:<hwloc synthetic description>` (e.g. `synthetic:package:2 numa:2 core:8 pu:2`),
/// `xml:<path>`, or a path ending in `.xml`.
pub const ENV: &str = "MBSP_TOPOLOGY";

/// A machine tree together with the hwloc topology it came from (kept for binding when the tree
/// describes this machine).
#[derive(Clone)]
pub struct Loaded {
    /// The tree.
    pub machine: Arc<Machine>,
    /// The hwloc topology, when it describes the machine we run on (kept inside the crate: the
    /// hwloc binding's types are not part of this crate's API).
    pub(crate) hwloc: Option<Arc<Topology>>,
}

impl Loaded {
    /// Whether the tree describes the machine this program runs on, so that a
    /// [`Binder`](crate::Binder) of it applies placements (a detected machine, not a synthetic
    /// or XML one).
    ///
    /// ```
    /// let m = mbsp_topology::Machine::synthetic("package:1 core:2 pu:1").unwrap();
    /// assert!(!m.bindable());
    /// ```
    pub fn bindable(&self) -> bool {
        self.hwloc.is_some()
    }
}

impl fmt::Debug for Loaded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Loaded")
            .field("machine", &self.machine)
            .field("bindable", &self.hwloc.is_some())
            .finish()
    }
}

impl Machine {
    /// Detect the machine this program runs on. If `HWLOC_SYNTHETIC` or `HWLOC_XMLFILE` is set,
    /// hwloc loads that fake machine instead; the result says so ([`Source::HwlocEnv`]) and
    /// binding is not applied.
    ///
    /// Fails with [`TopologyError::Detect`] (hwloc's error as its source).
    pub fn detect() -> Result<Loaded, TopologyError> {
        let topo = Topology::new().map_err(|e| TopologyError::Detect {
            source: HwlocError::from_raw(e),
        })?;
        let source = if topo.is_this_system() {
            Source::Detected
        } else {
            let var = ["HWLOC_SYNTHETIC", "HWLOC_XMLFILE"]
                .iter()
                .find_map(|v| std::env::var(v).ok().map(|x| format!("{v}={x}")))
                .unwrap_or_else(|| "not this system".into());
            Source::HwlocEnv(var)
        };
        finish(topo, source)
    }

    /// Load an hwloc synthetic description such as `package:2 numa:2 core:8 pu:2`.
    ///
    /// hwloc wants the description to end with the PU level; one that ends above it (`package:2
    /// core:4`) gets one PU per object of its last level: `pu:1` is appended, and the machine's
    /// [`Source`] shows the description as loaded.
    ///
    /// ```
    /// use mbsp_topology::{Machine, Source};
    /// let m = Machine::synthetic("package:2 numa:2 core:8 pu:2").unwrap();
    /// assert_eq!(m.machine.cores().len(), 32);
    /// assert!(!m.bindable(), "a synthetic machine is never bound");
    /// let m = Machine::synthetic("package:2 core:4").unwrap();
    /// assert_eq!((m.machine.cores().len(), m.machine.pus().len()), (8, 8));
    /// assert_eq!(m.machine.source(), &Source::Synthetic("package:2 core:4 pu:1".into()));
    /// ```
    ///
    /// Fails with [`TopologyError::Synthetic`] (hwloc's error as its source).
    pub fn synthetic(description: &str) -> Result<Loaded, TopologyError> {
        match load_synthetic(description) {
            Err(e) if !synthetic_ends_with_pu(description) => {
                let completed = format!("{} pu:1", description.trim_end());
                load_synthetic(&completed).map_err(|_| e)
            }
            r => r,
        }
    }

    /// Load an hwloc XML file.
    ///
    /// Fails with [`TopologyError::XmlFile`] (the [`std::io::Error`] as its source) when the
    /// file cannot be opened, or [`TopologyError::Xml`] (hwloc's error) when hwloc rejects it.
    pub fn xml(path: impl AsRef<Path>) -> Result<Loaded, TopologyError> {
        let path = path.as_ref();
        let unreadable = |e: std::io::Error| TopologyError::XmlFile {
            path: path.to_path_buf(),
            source: Arc::new(e),
        };
        // hwloc only says "invalid" for a file it cannot open: check first, to say why.
        match std::fs::metadata(path) {
            Ok(m) if m.is_file() => {}
            Ok(_) => return Err(unreadable(std::io::Error::other("not a regular file"))),
            Err(e) => return Err(unreadable(e)),
        }
        let bad = |e: HwlocError| TopologyError::Xml {
            path: path.to_path_buf(),
            source: e,
        };
        let topo = Topology::builder()
            .from_xml_file(path)
            .map_err(|e| bad(HwlocError::from_file(e)))?
            .build()
            .map_err(|e| bad(HwlocError::from_raw(e)))?;
        finish(topo, Source::Xml(path.to_path_buf()))
    }

    /// Load what an [`ENV`]-style specification names: `synthetic:...`, `xml:...`, or a path
    /// ending in `.xml`.
    ///
    /// ```
    /// let m = mbsp_topology::Machine::from_spec("synthetic:package:4 core:2 pu:1").unwrap();
    /// assert_eq!(m.machine.packages().len(), 4);
    /// assert!(matches!(
    ///     mbsp_topology::Machine::from_spec("nonsense"),
    ///     Err(mbsp_topology::TopologyError::EnvSpec { .. })
    /// ));
    /// ```
    ///
    /// Fails with [`TopologyError::EnvSpec`] for anything else, or with the error of
    /// [`Machine::synthetic`] or [`Machine::xml`].
    pub fn from_spec(spec: &str) -> Result<Loaded, TopologyError> {
        if let Some(d) = spec.strip_prefix("synthetic:") {
            Machine::synthetic(d)
        } else if let Some(p) = spec.strip_prefix("xml:") {
            Machine::xml(p)
        } else if spec.ends_with(".xml") {
            Machine::xml(spec)
        } else {
            Err(TopologyError::EnvSpec {
                var: ENV,
                value: spec.to_string(),
            })
        }
    }

    /// The machine every run uses by default, loaded once: [`ENV`] if set, otherwise detected.
    ///
    /// The first call (in mbsp, the first top-level run that is not given a machine) loads the
    /// machine with hwloc — detecting it takes milliseconds, more on large machines — and the
    /// result is cached for the rest of the program: later calls only clone it, and changing
    /// [`ENV`] afterwards has no effect. A failure is cached too: with a bad [`ENV`], every call
    /// returns the same [`TopologyError`].
    pub fn current() -> Result<Loaded, TopologyError> {
        static CURRENT: OnceLock<Result<Loaded, TopologyError>> = OnceLock::new();
        CURRENT
            .get_or_init(|| match std::env::var(ENV) {
                Ok(spec) if !spec.is_empty() => Machine::from_spec(&spec),
                _ => Machine::detect(),
            })
            .clone()
    }
}

/// Load a synthetic description as it is.
fn load_synthetic(description: &str) -> Result<Loaded, TopologyError> {
    let bad = |e: HwlocError| TopologyError::Synthetic {
        description: description.to_string(),
        source: e,
    };
    let topo = Topology::builder()
        .from_synthetic(description)
        .map_err(|e| bad(HwlocError::from_input(e)))?
        .build()
        .map_err(|e| bad(HwlocError::from_raw(e)))?;
    finish(topo, Source::Synthetic(description.to_string()))
}

/// Whether the last level of a synthetic description is the PU level (`pu:2`, `PU:1`).
fn synthetic_ends_with_pu(description: &str) -> bool {
    description.split_whitespace().last().is_some_and(|token| {
        token
            .trim_start_matches('[')
            .split([':', '('])
            .next()
            .unwrap_or("")
            .to_ascii_lowercase()
            .starts_with("pu")
    })
}

fn finish(topo: Topology, source: Source) -> Result<Loaded, TopologyError> {
    let machine = Arc::new(extract(&topo, source.clone())?);
    Ok(Loaded {
        machine,
        hwloc: source.is_real().then(|| Arc::new(topo)),
    })
}

fn memory_of(o: &TopologyObject) -> u64 {
    match o.attributes() {
        Some(ObjectAttributes::NUMANode(n)) => n.local_memory().map_or(0, |m| m.get()),
        _ => 0,
    }
}

fn cache_size(o: &TopologyObject) -> u64 {
    match o.attributes() {
        Some(ObjectAttributes::Cache(c)) => c.size().map_or(0, |s| s.get()),
        _ => 0,
    }
}

/// Turn an hwloc topology into a [`Machine`].
fn extract(topo: &Topology, source: Source) -> Result<Machine, TopologyError> {
    let pu_objs: Vec<&TopologyObject> = topo.objects_with_type(ObjectType::PU).collect();
    if pu_objs.is_empty() {
        return Err(TopologyError::NoPus { origin: source });
    }
    let numa_objs: Vec<&TopologyObject> = topo.objects_with_type(ObjectType::NUMANode).collect();
    let pkg_objs: Vec<&TopologyObject> = topo.objects_with_type(ObjectType::Package).collect();

    let mut packages: Vec<Package> = if pkg_objs.is_empty() {
        vec![Package {
            os_index: None,
            numas: Vec::new(),
            cores: Vec::new(),
        }]
    } else {
        pkg_objs
            .iter()
            .map(|o| Package {
                os_index: o.os_index().map(|i| i as u32),
                numas: Vec::new(),
                cores: Vec::new(),
            })
            .collect()
    };
    let mut numas: Vec<Numa> = if numa_objs.is_empty() {
        vec![Numa {
            os_index: 0,
            memory: 0,
            cores: Vec::new(),
        }]
    } else {
        numa_objs
            .iter()
            .map(|o| Numa {
                os_index: o.os_index().unwrap_or(0) as u32,
                memory: memory_of(o),
                cores: Vec::new(),
            })
            .collect()
    };
    let mut cores: Vec<Core> = Vec::new();
    let mut pus: Vec<Pu> = Vec::new();
    let mut caches: Vec<Cache> = Vec::new();
    // hwloc (global persistent index) of a core or cache -> our index
    let mut core_of: std::collections::HashMap<u64, usize> = Default::default();
    let mut cache_of: std::collections::HashMap<u64, usize> = Default::default();

    for pu in &pu_objs {
        let os = pu.os_index().unwrap_or(pu.logical_index()) as u32;
        let core_obj = pu.first_ancestor_with_type(ObjectType::Core);
        let key = core_obj.map_or(u64::MAX - pu.global_persistent_index(), |c| {
            c.global_persistent_index()
        });
        let ci = match core_of.get(&key) {
            Some(&ci) => ci,
            None => {
                let anchor = core_obj.unwrap_or(pu);
                let package = anchor
                    .first_ancestor_with_type(ObjectType::Package)
                    .map_or(0, |p| p.logical_index());
                let numa = numa_objs
                    .iter()
                    .position(|n| n.cpuset().is_some_and(|s| s.is_set(os as usize)))
                    .unwrap_or(0);
                let mut cache = |ty: ObjectType, level: u8| {
                    anchor.first_ancestor_with_type(ty).map(|c| {
                        let k = c.global_persistent_index();
                        let idx = *cache_of.entry(k).or_insert_with(|| {
                            caches.push(Cache {
                                level,
                                size: cache_size(c),
                                cores: Vec::new(),
                            });
                            caches.len() - 1
                        });
                        caches[idx].cores.push(cores.len());
                        idx
                    })
                };
                let l2 = cache(ObjectType::L2Cache, 2);
                let l3 = cache(ObjectType::L3Cache, 3);
                cores.push(Core {
                    package,
                    numa,
                    pus: Vec::new(),
                    l2,
                    l3,
                });
                let ci = cores.len() - 1;
                packages[package].cores.push(ci);
                numas[numa].cores.push(ci);
                if !packages[package].numas.contains(&numa) {
                    packages[package].numas.push(numa);
                }
                core_of.insert(key, ci);
                ci
            }
        };
        cores[ci].pus.push(pus.len());
        pus.push(Pu {
            os_index: os,
            core: ci,
        });
    }
    // Packages list their NUMA nodes in logical order; drop NUMA nodes without cores (e.g.
    // memory-only nodes) from package lists but keep them in `numas` for completeness.
    for p in &mut packages {
        p.numas.sort_unstable();
    }
    let mut m = Machine::new(source, packages, numas, cores, pus, caches);
    m.numa_level = !numa_objs.is_empty()
        && topo
            .root_object()
            .info("SyntheticDescription")
            .is_none_or(|d| synthetic_has_numa(&d.to_string_lossy()));
    Ok(m)
}

/// Whether an hwloc synthetic description names a NUMA level (`numa:2`, `NUMANode:2`,
/// `node:2`, or NUMA nodes attached as memory children, `[numa]`). Without one, hwloc inserts a
/// single NUMA node of its own under the machine.
fn synthetic_has_numa(description: &str) -> bool {
    description.split_whitespace().any(|token| {
        let ty = token
            .trim_start_matches('[')
            .split([':', '(', ']'])
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        ty.starts_with("numa") || ty == "node"
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn synthetic_numa_levels() {
        for (d, has) in [
            ("package:2 core:2 pu:1", false),
            ("pack:2 l3:1 core:2 pu:2", false),
            ("package:2 numa:2 core:8 pu:2", true),
            ("package:2 NUMANode:1 core:2 pu:1", true),
            ("package:2 node:1 core:2 pu:1", true),
            ("package:2 [numa] core:2 pu:1", true),
            ("package:2 numa:2(memory=1GB) core:2 pu:1", true),
        ] {
            assert_eq!(super::synthetic_has_numa(d), has, "{d}");
        }
    }

    #[test]
    fn synthetic_pu_levels() {
        for (d, ends) in [
            ("package:2 core:2 pu:1", true),
            ("package:2 core:2 PU:2", true),
            ("package:2 core:2 pu:2(indexes=0,1,2,3,4,5,6,7) ", true),
            ("package:2 core:4", false),
            ("package:2 numa:2", false),
            ("", false),
        ] {
            assert_eq!(super::synthetic_ends_with_pu(d), ends, "{d:?}");
        }
    }
}
