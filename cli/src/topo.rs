//! `mbsp topo`: print a machine tree and the placement of a (possibly nested) plan.

use crate::error::{Classify, Error, Result};
use mbsp_topology::{Domain, Level, Loaded, Machine, Policy, plan, plan_per, ranges};
use serde_json::{Value, json};

/// How many processes one level of the plan has.
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

/// One process of a plan, with its nested children.
pub(crate) struct Node {
    pub(crate) domain: Domain,
    pub(crate) children: Vec<Node>,
}

/// The plan of `levels` (outermost first) inside `domain` of `m` under `policy`.
pub(crate) fn build(
    m: &Machine,
    domain: &Domain,
    levels: &[Count],
    policy: &Policy,
) -> Result<Vec<Node>> {
    let Some((first, rest)) = levels.split_first() else {
        return Ok(Vec::new());
    };
    let domains = match first {
        Count::N(p) => plan(m, domain, *p, policy).or_usage()?,
        Count::Per(level) => plan_per(m, domain, *level),
    };
    // Nested levels use the same policy, except that manual sets apply to the top level only.
    let inner = match policy {
        Policy::Manual(_) => Policy::Scattered,
        p => p.clone(),
    };
    domains
        .into_iter()
        .map(|d| {
            let children = build(m, &d, rest, &inner)?;
            Ok(Node {
                domain: d,
                children,
            })
        })
        .collect()
}

fn one_or_many<T: Into<Value> + Copy>(v: &[T]) -> Value {
    if v.len() == 1 {
        v[0].into()
    } else {
        Value::from(v.iter().map(|&x| x.into()).collect::<Vec<Value>>())
    }
}

/// The processes of a plan as `mbsp topo --json` prints them.
pub(crate) fn to_json(m: &Machine, nodes: &[Node]) -> Value {
    Value::from(
        nodes
            .iter()
            .enumerate()
            .map(|(pid, n)| {
                let mut o = json!({
                    "pid": pid,
                    "package": one_or_many(&n.domain.packages(m)),
                    // null when the tree has no NUMA level (see `Machine::has_numa_level`).
                    "numa": if m.has_numa_level() {
                        one_or_many(&n.domain.numas(m))
                    } else {
                        Value::Null
                    },
                    "cores": n.domain.cores(m),
                    "pus": n.domain.pu_os(m),
                });
                if !n.children.is_empty() {
                    o["children"] = to_json(m, &n.children);
                }
                o
            })
            .collect::<Vec<_>>(),
    )
}

fn print_plan(m: &Machine, nodes: &[Node], path: &str, depth: usize) {
    for (pid, n) in nodes.iter().enumerate() {
        let d = &n.domain;
        let name = if path.is_empty() {
            pid.to_string()
        } else {
            format!("{path}/{pid}")
        };
        println!(
            "{:indent$}pid {name}: package {}, NUMA {}, cores {}, PUs {}",
            "",
            ranges(d.packages(m).iter().map(|&x| x as u32)),
            if m.has_numa_level() {
                ranges(d.numas(m))
            } else {
                "-".to_string()
            },
            ranges(d.cores(m).iter().map(|&x| x as u32)),
            ranges(d.pu_os(m)),
            indent = 2 + 2 * depth
        );
        print_plan(m, &n.children, &name, depth + 1);
    }
}

/// The machine tree as `mbsp topo --json` prints it under `"machine"`: its source, whether it
/// has a NUMA level, and its packages, NUMA nodes (memory in bytes) and cores (PU OS indices).
///
/// ```
/// let m = mbsp_topology::Machine::synthetic("package:2 core:2 pu:1").unwrap().machine;
/// let v = mbsp_cli::topo::machine_json(&m);
/// assert_eq!(v["packages"].as_array().unwrap().len(), 2);
/// assert_eq!(v["cores"].as_array().unwrap().len(), 4);
/// ```
pub fn machine_json(m: &Machine) -> Value {
    json!({
        "source": m.source().to_string(),
        "numa_level": m.has_numa_level(),
        "packages": m.packages().iter().map(|p| json!({
            "os_index": p.os_index,
            "numas": p.numas.iter().map(|&n| m.numas()[n].os_index).collect::<Vec<_>>(),
            "cores": p.cores,
        })).collect::<Vec<_>>(),
        "numas": m.numas().iter().map(|n| json!({
            "os_index": n.os_index, "memory": n.memory, "cores": n.cores,
        })).collect::<Vec<_>>(),
        "cores": m.cores().iter().map(|c| json!({
            "package": c.package,
            "numa": m.has_numa_level().then(|| m.numas()[c.numa].os_index),
            "pus": c.pus.iter().map(|&u| m.pus()[u].os_index).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

/// The placement policies of `mbsp topo --policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PolicyName {
    /// Fill one package (and NUMA node) before the next.
    Compact,
    /// Spread over the packages first.
    Scattered,
    /// The CPU sets of --cpus.
    Manual,
}

/// The command line of `mbsp topo`.
#[derive(Clone, Debug, clap::Args)]
pub struct Args {
    /// Load the tree from an hwloc XML file.
    #[arg(long, value_name = "FILE")]
    pub xml: Option<String>,
    /// Load the tree from an hwloc synthetic description, e.g. "package:2 numa:2 core:8 pu:2".
    #[arg(long, value_name = "DESC")]
    pub synthetic: Option<String>,
    /// Top-level processes: a number, or a level (package, numa, core, pu) for one per object.
    #[arg(short = 'p', long = "procs", value_name = "N|LEVEL")]
    pub procs: Option<Count>,
    /// A nested level inside each process (repeat for deeper nesting): a number or a level.
    #[arg(long, value_name = "N|LEVEL")]
    pub nest: Vec<Count>,
    /// Placement policy.
    #[arg(long, value_enum, default_value = "scattered")]
    pub policy: PolicyName,
    /// CPU sets for --policy manual, one per top-level process: "0-3;4-7".
    #[arg(long, value_name = "SETS")]
    pub cpus: Option<String>,
    /// Print JSON: per process pid, package, numa, cores, pus and children.
    #[arg(long)]
    pub json: bool,
}

impl Args {
    /// The options these arguments ask for: the policy with its CPU sets checked.
    pub fn options(self) -> Result<Options> {
        let policy = match (self.policy, self.cpus) {
            (PolicyName::Compact, None) => Policy::Compact,
            (PolicyName::Scattered, None) => Policy::Scattered,
            (PolicyName::Manual, Some(c)) => Policy::Manual(mbsp::parse_cpu_sets(&c).or_usage()?),
            (PolicyName::Manual, None) => {
                return Err(Error::usage(
                    "--policy manual needs --cpus \"<cpus>;<cpus>;...\"",
                ));
            }
            (_, Some(_)) => return Err(Error::usage("--cpus goes with --policy manual")),
        };
        Ok(Options {
            xml: self.xml,
            synthetic: self.synthetic,
            procs: self.procs,
            nest: self.nest,
            policy,
            json: self.json,
        })
    }
}

/// Options of `mbsp topo`.
pub struct Options {
    /// Load this XML file instead of detecting.
    pub xml: Option<String>,
    /// Load this synthetic description instead of detecting.
    pub synthetic: Option<String>,
    /// Top-level processes (none: print the tree only).
    pub procs: Option<Count>,
    /// Nested levels below the top level.
    pub nest: Vec<Count>,
    /// Placement policy.
    pub policy: Policy,
    /// Machine-readable output.
    pub json: bool,
}

/// The placement of a plan of `levels` (outermost first) on the whole of `m` under `policy`, as
/// `mbsp topo --json` prints it under `"processes"`: per process its pid, package, NUMA node,
/// cores, PUs (OS indices) and the processes nested in it (`"children"`).
///
/// ```
/// use mbsp_cli::topo::{Count, plan_json};
/// use mbsp_topology::{Machine, Policy};
/// let m = Machine::synthetic("package:2 core:4 pu:1").unwrap().machine;
/// let v = plan_json(&m, &[Count::N(2), Count::N(2)], &Policy::Scattered).unwrap();
/// assert_eq!(v[1]["package"], 1);
/// assert_eq!(v[1]["children"].as_array().unwrap().len(), 2);
/// ```
pub fn plan_json(m: &Machine, levels: &[Count], policy: &Policy) -> Result<Value> {
    if levels.contains(&Count::N(0)) {
        return Err(Error::usage("a level of a plan needs at least 1 process"));
    }
    Ok(to_json(m, &build(m, &m.whole(), levels, policy)?))
}

/// Print the placement of a plan of `levels` (outermost first) on the whole of `m`.
pub fn print_nested(m: &Machine, levels: &[Count], policy: &Policy) -> Result<()> {
    let nodes = build(m, &m.whole(), levels, policy)?;
    print_plan(m, &nodes, "", 0);
    Ok(())
}

/// Runs `mbsp topo`.
pub fn run(o: Options) -> Result<()> {
    let loaded: Loaded = match (&o.xml, &o.synthetic) {
        (Some(_), Some(_)) => return Err(Error::usage("give --xml or --synthetic, not both")),
        (Some(f), None) => Machine::xml(f).map_err(|e| Error::io("").with_source(e))?,
        (None, Some(s)) => Machine::synthetic(s).map_err(|e| Error::usage("").with_source(e))?,
        (None, None) => Machine::current().map_err(|e| Error::usage("").with_source(e))?,
    };
    let m = &loaded.machine;
    let mut levels = Vec::new();
    if let Some(p) = &o.procs {
        if *p == Count::N(0) {
            return Err(Error::usage("-p must be at least 1"));
        }
        levels.push(p.clone());
        levels.extend(o.nest.iter().cloned());
    } else if !o.nest.is_empty() {
        return Err(Error::usage("--nest needs -p (the top level of the plan)"));
    }
    if levels.contains(&Count::N(0)) {
        return Err(Error::usage(
            "--nest 0: a nested run needs at least 1 process",
        ));
    }
    let nodes = build(m, &m.whole(), &levels, &o.policy)?;
    let applied = m.source().is_real();
    if o.json {
        let mut out = json!({ "machine": machine_json(m) });
        if !levels.is_empty() {
            out["policy"] = o.policy.to_string().into();
            out["applied"] = applied.into();
            out["processes"] = to_json(m, &nodes);
        }
        println!("{}", serde_json::to_string_pretty(&out).expect("JSON"));
        return Ok(());
    }
    print!("{m}");
    if !levels.is_empty() {
        let shape: Vec<String> = levels
            .iter()
            .map(|l| match l {
                Count::N(n) => n.to_string(),
                Count::Per(level) => format!("one per {level}"),
            })
            .collect();
        println!(
            "plan: {} processes ({}), policy {}{}",
            nodes.len(),
            shape.join(", nested: "),
            o.policy,
            if applied {
                ", bound when run here"
            } else {
                ", planned only (not this machine)"
            }
        );
        print_plan(m, &nodes, "", 0);
    }
    Ok(())
}
