//! Placements of (nested) plans as plain data: where each process of a plan goes on a machine
//! tree ([`plan`]), as `mbsp topo` prints it and the Python package's `Machine.placement`
//! returns it.

use crate::error::{Classify, Error, Result};
use mbsp_topology::{Domain, Level, Machine, Policy, core_sharing, plan_per};
use serde_json::{Value, json};
use std::fmt;

/// How many processes one level of a plan has.
///
/// ```
/// use mbsp_tools::placement::Count;
/// use mbsp_topology::Level;
/// assert_eq!("4".parse::<Count>()?, Count::N(4));
/// assert_eq!("package".parse::<Count>()?, Count::Per(Level::Package));
/// assert_eq!(Count::Per(Level::Core).to_string(), "one per core");
/// assert!("socketz".parse::<Count>().is_err());
/// # Ok::<(), mbsp_tools::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Count {
    /// This many.
    N(usize),
    /// One per object of this level in the domain.
    Per(Level),
}

impl std::str::FromStr for Count {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.parse::<usize>() {
            Ok(n) => Ok(Count::N(n)),
            Err(_) => s
                .parse::<Level>()
                .map(Count::Per)
                .map_err(|e| Error::usage(format!("{s}: {e}"))),
        }
    }
}

/// `4`, or `one per package`.
impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Count::N(n) => write!(f, "{n}"),
            Count::Per(level) => write!(f, "one per {level}"),
        }
    }
}

/// One process of a plan: where it runs, and the processes nested in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Process {
    /// Its pid among its siblings.
    pub pid: usize,
    /// The PUs it owns.
    pub domain: Domain,
    /// The packages it runs on (indices).
    pub packages: Vec<usize>,
    /// The OS indices of the NUMA nodes it runs on (`None` when the tree has no NUMA level).
    pub numas: Option<Vec<u32>>,
    /// The cores it runs on (indices).
    pub cores: Vec<usize>,
    /// The OS indices of its PUs.
    pub pus: Vec<u32>,
    /// The most processes of its run (itself included) placed on one of its cores: 1 when its
    /// cores are its own, more when its run stacks processes on a core (a run of more processes
    /// than its domain has cores; under the compact policy, any run of two or more nested in a
    /// process, which owns one core).
    pub per_core: usize,
    /// The processes of the nested run it starts, if the plan has a level below.
    pub children: Vec<Process>,
}

impl Process {
    /// The process as `mbsp topo --json` prints it: `pid`, `package` and `numa` (a number, a
    /// list when there are several, `numa` null without a NUMA level), `cores`, `pus`,
    /// `per_core` when its run puts more than one process on one of its cores, and `children`
    /// when it has some.
    pub fn to_json(&self) -> Value {
        let mut o = json!({
            "pid": self.pid,
            "package": one_or_many(&self.packages),
            "numa": self.numas.as_deref().map_or(Value::Null, one_or_many),
            "cores": self.cores,
            "pus": self.pus,
        });
        if self.per_core > 1 {
            o["per_core"] = self.per_core.into();
        }
        if !self.children.is_empty() {
            o["children"] = to_json(&self.children);
        }
        o
    }

    /// Whether it starts no nested run.
    pub fn is_leaf(&self) -> bool {
        self.children.is_empty()
    }
}

/// One number, or a list of several.
fn one_or_many<T: Into<Value> + Copy>(v: &[T]) -> Value {
    if v.len() == 1 {
        v[0].into()
    } else {
        Value::from(v.iter().map(|&x| x.into()).collect::<Vec<Value>>())
    }
}

/// The processes of a plan as `mbsp topo --json` prints them under `"processes"`.
pub fn to_json(processes: &[Process]) -> Value {
    Value::from(processes.iter().map(Process::to_json).collect::<Vec<_>>())
}

/// The innermost processes of a plan, in order.
///
/// ```
/// use mbsp_tools::placement::{Count, leaves, plan};
/// let m = mbsp_topology::Machine::synthetic("package:2 core:2 pu:1").unwrap().machine;
/// let procs = plan(&m, &[Count::N(2), Count::N(2)], &mbsp_topology::Policy::Scattered)?;
/// assert_eq!(leaves(&procs).len(), 4);
/// # Ok::<(), mbsp_tools::Error>(())
/// ```
pub fn leaves(processes: &[Process]) -> Vec<&Process> {
    let mut out = Vec::new();
    for p in processes {
        if p.is_leaf() {
            out.push(p);
        } else {
            out.extend(leaves(&p.children));
        }
    }
    out
}

/// The placement of a plan of `levels` (outermost first) on the whole of `m` under `policy`:
/// per process its place and the processes nested in it. Nested levels use the same policy,
/// except that manual CPU sets apply to the top level only (the levels below are scattered).
/// A level of 0 processes, or a plan the policy cannot make, is a usage error.
///
/// ```
/// use mbsp_tools::placement::{Count, plan};
/// use mbsp_topology::{Machine, Policy};
/// let m = Machine::synthetic("package:2 core:4 pu:1").unwrap().machine;
/// let procs = plan(&m, &[Count::N(2), Count::N(2)], &Policy::Scattered)?;
/// assert_eq!(procs[1].packages, [1]);
/// assert_eq!(procs[1].children.len(), 2);
/// let v = mbsp_tools::placement::to_json(&procs);
/// assert_eq!(v[1]["package"], 1);
/// # Ok::<(), mbsp_tools::Error>(())
/// ```
pub fn plan(m: &Machine, levels: &[Count], policy: &Policy) -> Result<Vec<Process>> {
    if levels.contains(&Count::N(0)) {
        return Err(Error::usage("a level of a plan needs at least 1 process"));
    }
    plan_in(m, &m.whole(), levels, policy)
}

/// The plan of `levels` inside `domain` of `m` under `policy`.
fn plan_in(
    m: &Machine,
    domain: &Domain,
    levels: &[Count],
    policy: &Policy,
) -> Result<Vec<Process>> {
    let Some((first, rest)) = levels.split_first() else {
        return Ok(Vec::new());
    };
    let domains = match first {
        Count::N(p) => mbsp_topology::plan(m, domain, *p, policy).or_usage()?,
        Count::Per(level) => plan_per(m, domain, *level),
    };
    let inner = match policy {
        Policy::Manual(_) => Policy::Scattered,
        p => p.clone(),
    };
    let sharing = core_sharing(m, &domains);
    domains
        .into_iter()
        .zip(sharing)
        .enumerate()
        .map(|(pid, (d, per_core))| {
            let children = plan_in(m, &d, rest, &inner)?;
            Ok(Process {
                pid,
                packages: d.packages(m),
                numas: m.has_numa_level().then(|| d.numas(m)),
                cores: d.cores(m),
                pus: d.pu_os(m),
                per_core,
                domain: d,
                children,
            })
        })
        .collect()
}

/// A run of a plan that puts several of its processes on one core ([`stacked`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stacked {
    /// The pid path of the process the run is nested in (`[0, 1]`: pid 0/1); empty for the
    /// top level.
    pub parent: Vec<usize>,
    /// Its processes.
    pub procs: usize,
    /// The cores they are on (indices).
    pub cores: Vec<usize>,
    /// The most of them on one core.
    pub most: usize,
}

/// The runs of a plan that stack processes on a core, outermost first, in pid order.
///
/// ```
/// use mbsp_tools::placement::{Count, plan, stacked};
/// use mbsp_topology::{Machine, Policy};
/// let m = Machine::synthetic("package:2 core:4 pu:1").unwrap().machine;
/// // Compact: a process owns one core, and the run nested in it stacks there.
/// let procs = plan(&m, &[Count::N(1), Count::N(2)], &Policy::Compact)?;
/// let s = stacked(&procs);
/// assert_eq!((s.len(), s[0].parent.as_slice(), s[0].procs, s[0].cores.as_slice()), (1, &[0][..], 2, &[0][..]));
/// // Scattered: the process owns the machine, the nested run a core each.
/// assert!(stacked(&plan(&m, &[Count::N(1), Count::N(2)], &Policy::Scattered)?).is_empty());
/// # Ok::<(), mbsp_tools::Error>(())
/// ```
pub fn stacked(processes: &[Process]) -> Vec<Stacked> {
    let mut out = Vec::new();
    stacked_in(processes, &mut Vec::new(), &mut out);
    out
}

fn stacked_in(run: &[Process], parent: &mut Vec<usize>, out: &mut Vec<Stacked>) {
    let most = run.iter().map(|p| p.per_core).max().unwrap_or(1);
    if most > 1 {
        let mut cores: Vec<usize> = run.iter().flat_map(|p| p.cores.iter().copied()).collect();
        cores.sort_unstable();
        cores.dedup();
        out.push(Stacked {
            parent: parent.clone(),
            procs: run.len(),
            cores,
            most,
        });
    }
    for p in run {
        parent.push(p.pid);
        stacked_in(&p.children, parent, out);
        parent.pop();
    }
}
