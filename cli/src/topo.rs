//! `mbsp topo`: print a machine tree and the placement of a (possibly nested) plan
//! ([`mbsp_tools::placement`], [`mbsp_tools::machine::Tree`]).

use mbsp_tools::machine::Tree;
use mbsp_tools::placement::{self, Count, Process};
use mbsp_tools::{Classify, Error, Result};
use mbsp_topology::{Loaded, Machine, Policy, ranges};
use serde_json::json;

/// Prints each process of a plan on a line (`pid 1/0: package 1, NUMA 2, cores 8-11, PUs
/// 16-23`), indented by its depth.
fn print_plan(processes: &[Process], path: &str, depth: usize) {
    for p in processes {
        let name = if path.is_empty() {
            p.pid.to_string()
        } else {
            format!("{path}/{}", p.pid)
        };
        println!(
            "{:indent$}pid {name}: package {}, NUMA {}, cores {}, PUs {}",
            "",
            ranges(p.packages.iter().map(|&x| x as u32)),
            p.numas
                .as_ref()
                .map_or_else(|| "-".to_string(), |n| ranges(n.iter().copied())),
            ranges(p.cores.iter().map(|&x| x as u32)),
            ranges(p.pus.iter().copied()),
            indent = 2 + 2 * depth
        );
        print_plan(&p.children, &name, depth + 1);
    }
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

/// Print the placement of a plan of `levels` (outermost first) on the whole of `m`.
pub fn print_nested(m: &Machine, levels: &[Count], policy: &Policy) -> Result<()> {
    let processes = placement::plan(m, levels, policy)?;
    print_plan(&processes, "", 0);
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
    let processes = placement::plan(m, &levels, &o.policy)?;
    let applied = m.source().is_real();
    if o.json {
        let mut out = json!({ "machine": Tree::of(m).to_json() });
        if !levels.is_empty() {
            out["policy"] = o.policy.to_string().into();
            out["applied"] = applied.into();
            out["processes"] = placement::to_json(&processes);
        }
        println!("{}", serde_json::to_string_pretty(&out).expect("JSON"));
        return Ok(());
    }
    print!("{m}");
    if !levels.is_empty() {
        let shape: Vec<String> = levels.iter().map(Count::to_string).collect();
        println!(
            "plan: {} processes ({}), policy {}{}",
            processes.len(),
            shape.join(", nested: "),
            o.policy,
            if applied {
                ", bound when run here"
            } else {
                ", planned only (not this machine)"
            }
        );
        print_plan(&processes, "", 0);
    }
    Ok(())
}
