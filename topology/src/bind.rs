//! Applying placements: binding threads to their PUs and memory to their NUMA nodes.
//!
//! Only a tree detected on the machine we run on is applied. On a loaded (synthetic, XML, or
//! `HWLOC_*`-environment) machine, placements are planned and reported, never applied — the
//! CPUs it names are not this machine's. When the operating system refuses a binding
//! (containers often deny NUMA system calls), a warning is printed once per kind and the
//! program carries on unbound.

use crate::error::{HwlocError, LocationError};
use crate::load::Loaded;
use crate::tree::{Domain, Machine, Source};
use hwlocality::Topology;
use hwlocality::cpu::binding::CpuBindingFlags;
use hwlocality::cpu::cpuset::CpuSet;
use hwlocality::memory::binding::{MemoryBindingFlags, MemoryBindingPolicy};
use hwlocality::memory::nodeset::NodeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// What happened to a requested binding.
///
/// Its [`Display`](std::fmt::Display) is what placement reports print after the PUs:
///
/// ```
/// use mbsp_topology::{Binding, NotBound};
/// assert_eq!(Binding::Applied(vec![0, 1]).to_string(), "bound");
/// assert_eq!(
///     Binding::NotApplied(NotBound::Disabled { by: "MBSP_AFFINITY=none" }).to_string(),
///     "not bound: binding disabled by MBSP_AFFINITY=none"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Binding {
    /// Applied: the thread (or memory) is now bound to these OS indices (CPUs or NUMA nodes).
    Applied(Vec<u32>),
    /// Not applied, on purpose, for this reason.
    NotApplied(NotBound),
    /// The operating system refused; hwloc's error (with the system error it saw).
    Refused(String),
}

impl Binding {
    /// Whether the binding is in effect.
    pub fn is_applied(&self) -> bool {
        matches!(self, Binding::Applied(_))
    }
}

impl std::fmt::Display for Binding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Binding::Applied(_) => f.write_str("bound"),
            Binding::NotApplied(why) => write!(f, "not bound: {why}"),
            Binding::Refused(why) => {
                write!(f, "not bound: the operating system refused ({why})")
            }
        }
    }
}

/// Why a placement was not applied ([`Binding::NotApplied`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotBound {
    /// The machine tree is not this machine (synthetic, XML, or `HWLOC_*` environment): the
    /// plan is reported, but the CPUs it names are not this machine's.
    OtherMachine {
        /// Where the tree came from.
        origin: Source,
    },
    /// Binding was turned off for the run.
    Disabled {
        /// What turned it off, e.g. `MBSP_AFFINITY=none` or `Run::bind(false)`.
        by: &'static str,
    },
    /// The top level runs over MPI ranks and this rank's CPU binding could not be read: its
    /// thread stays where the MPI launcher put it.
    Launcher,
}

impl std::fmt::Display for NotBound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotBound::OtherMachine { origin } => {
                write!(f, "planned for another machine ({origin})")
            }
            NotBound::Disabled { by } => write!(f, "binding disabled by {by}"),
            NotBound::Launcher => f.write_str(
                "MPI rank whose CPU binding cannot be read; its thread stays where the \
                 launcher put it",
            ),
        }
    }
}

/// Applies placements of one machine.
#[derive(Clone)]
pub struct Binder {
    machine: Arc<Machine>,
    hwloc: Option<Arc<Topology>>,
}

impl std::fmt::Debug for Binder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Binder")
            .field("source", self.machine.source())
            .field("applies", &self.hwloc.is_some())
            .finish()
    }
}

fn warn_once(flag: &AtomicBool, what: &str, why: &str) {
    if !flag.swap(true, Ordering::Relaxed) {
        eprintln!("mbsp: {what} refused by the operating system ({why}); continuing unbound");
    }
}

static CPU_WARNED: AtomicBool = AtomicBool::new(false);
static MEM_WARNED: AtomicBool = AtomicBool::new(false);

impl Binder {
    /// A binder for a loaded machine (applies bindings only if it is this machine).
    pub fn new(loaded: &Loaded) -> Binder {
        Binder {
            machine: loaded.machine.clone(),
            hwloc: loaded.hwloc.clone(),
        }
    }

    /// The machine placements refer to.
    pub fn machine(&self) -> &Arc<Machine> {
        &self.machine
    }

    /// Whether bindings are applied (the tree is this machine's).
    pub fn applies(&self) -> bool {
        self.hwloc.is_some()
    }

    /// Why bindings are not applied, if they are not ([`Binder::applies`]).
    pub fn not_applied(&self) -> Option<NotBound> {
        (!self.applies()).then(|| NotBound::OtherMachine {
            origin: self.machine.source().clone(),
        })
    }

    fn other_machine(&self) -> Binding {
        Binding::NotApplied(NotBound::OtherMachine {
            origin: self.machine.source().clone(),
        })
    }

    /// Bind the calling thread to the PUs of `d`.
    pub fn bind_thread(&self, d: &Domain) -> Binding {
        if self.hwloc.is_none() {
            return self.other_machine();
        }
        self.bind_thread_cpus(&d.pu_os(&self.machine))
    }

    /// [`Binder::bind_thread`] to the OS CPU indices `os` (a domain's
    /// [`pu_os`](Domain::pu_os), worked out once by a caller that binds to it again and again).
    pub fn bind_thread_cpus(&self, os: &[u32]) -> Binding {
        let Some(topo) = &self.hwloc else {
            return self.other_machine();
        };
        let done = crate::affinity::set_thread(os).unwrap_or_else(|| {
            let mut set = CpuSet::new();
            for &i in os {
                set.set(i as usize);
            }
            topo.bind_cpu(&set, CpuBindingFlags::THREAD)
                .map_err(|e| std::io::Error::other(e.to_string()))
        });
        match done {
            Ok(()) => Binding::Applied(os.to_vec()),
            Err(e) => {
                let why = e.to_string();
                warn_once(&CPU_WARNED, "thread binding", &why);
                Binding::Refused(why)
            }
        }
    }

    /// The calling thread's current CPU binding (OS indices), if it can be read.
    pub fn thread_cpus(&self) -> Option<Vec<u32>> {
        let topo = self.hwloc.as_ref()?;
        crate::affinity::thread().or_else(|| {
            let set = topo.cpu_binding(CpuBindingFlags::THREAD).ok()?;
            Some(set.iter_set().map(|i| usize::from(i) as u32).collect())
        })
    }

    /// The OS CPU the calling thread runs on now, when bindings apply here and the system says
    /// (a snapshot: the scheduler may move the thread anywhere its binding allows).
    pub fn current_cpu(&self) -> Option<u32> {
        self.hwloc.as_ref()?;
        crate::affinity::current_cpu()
    }

    /// Rebind the calling thread to the OS CPU indices `cpus` (e.g. what [`thread_cpus`]
    /// returned before a run).
    ///
    /// [`thread_cpus`]: Binder::thread_cpus
    pub fn restore_thread(&self, cpus: &[u32]) {
        if let Some(topo) = &self.hwloc
            && crate::affinity::set_thread(cpus).is_none()
        {
            let mut set = CpuSet::new();
            for &c in cpus {
                set.set(c as usize);
            }
            let _ = topo.bind_cpu(&set, CpuBindingFlags::THREAD);
        }
    }

    /// Bind the pages of `area` to the NUMA node(s) of `d`: pages not yet touched will be
    /// allocated there (hwlocality does not allow migrating an area's existing pages).
    pub fn bind_memory(&self, area: &[u8], d: &Domain) -> Binding {
        let Some(topo) = &self.hwloc else {
            return self.other_machine();
        };
        if area.is_empty() {
            return Binding::Applied(Vec::new());
        }
        let nodes = d.numas(&self.machine);
        let mut set = NodeSet::new();
        for &n in &nodes {
            set.set(n as usize);
        }
        match topo.bind_memory_area(
            area,
            &set,
            MemoryBindingPolicy::Bind,
            MemoryBindingFlags::empty(),
        ) {
            Ok(()) => Binding::Applied(nodes),
            Err(e) => {
                let why = e.to_string();
                warn_once(&MEM_WARNED, "memory binding", &why);
                Binding::Refused(why)
            }
        }
    }

    /// The NUMA nodes (OS indices) holding the pages of `area`, as the OS reports them.
    pub fn memory_nodes(&self, area: &[u8]) -> Result<Vec<u32>, LocationError> {
        let Some(topo) = &self.hwloc else {
            return Err(LocationError::NotThisMachine {
                origin: self.machine.source().clone(),
            });
        };
        if area.is_empty() {
            return Ok(Vec::new());
        }
        let set: NodeSet = topo
            .area_memory_location(area, MemoryBindingFlags::empty())
            .map_err(|e| LocationError::Query {
                source: HwlocError::from_hybrid(e),
            })?;
        Ok(set.iter_set().map(|i| usize::from(i) as u32).collect())
    }
}
