//! `mbsp topo`: print a machine tree and the placement of a (possibly nested) plan
//! ([`mbsp_tools::placement`], [`mbsp_tools::machine::Tree`]).

use mbsp_tools::machine::Tree;
use mbsp_tools::placement::{self, Count, Process};
use mbsp_tools::{Classify, Error, Result};
use mbsp_topology::{Loaded, Machine, Policy, ranges};
use serde_json::json;

/// Prints each process of a plan on a line (`pid 1/0: package 1, NUMA 2, cores 8-11, PUs
/// 16-23`), indented by its depth, marked `(stacked: 2 processes on its core)` when its run puts
/// more than one process on one of its cores.
fn print_plan(processes: &[Process], path: &str, depth: usize) {
    for p in processes {
        let name = if path.is_empty() {
            p.pid.to_string()
        } else {
            format!("{path}/{}", p.pid)
        };
        let mark = if p.per_core > 1 {
            format!(" (stacked: {} processes on its core)", p.per_core)
        } else {
            String::new()
        };
        println!(
            "{:indent$}pid {name}: package {}, NUMA {}, cores {}, PUs {}{mark}",
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

/// `0/1` for the pid path `[0, 1]`.
fn path_text(path: &[usize]) -> String {
    let v: Vec<String> = path.iter().map(usize::to_string).collect();
    v.join("/")
}

/// The warning line about the runs of a plan that stack processes on a core, if any: the first
/// such run, why it stacks and what to do, and how many more do.
pub fn stacking_warning(processes: &[Process], policy: &Policy) -> Option<String> {
    let all = placement::stacked(processes);
    let first = all.first()?;
    let n = first.cores.len();
    let s = if n == 1 { "" } else { "s" };
    let on = format!(
        "puts its {} processes on {n} core{s} (core{s} {}, up to {} on one core)",
        first.procs,
        ranges(first.cores.iter().map(|&c| c as u32)),
        first.most
    );
    let mut line = if first.parent.is_empty() {
        let why = match policy {
            Policy::Manual(_) => "the CPU sets of --cpus share cores",
            _ => "more processes than the machine has cores",
        };
        format!("warning: the top-level run {on}: {why}")
    } else {
        let at = path_text(&first.parent);
        let why = match policy {
            Policy::Compact => format!(
                "the compact policy gives each process one core, so a run nested in it shares \
                 that core; use --policy scattered (each process then owns a share of the \
                 machine to nest in), or nest at most {n} in it"
            ),
            _ => format!(
                "pid {at} owns {n} core{s}; start fewer processes above it, or nest at most {n} in it"
            ),
        };
        format!("warning: the run nested in pid {at} {on}: {why}")
    };
    match all.len() - 1 {
        0 => {}
        1 => line += " (1 more run of the plan stacks too)",
        k => line += &format!(" ({k} more runs of the plan stack too)"),
    }
    Some(line)
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
    /// Placement policy [default: MBSP_AFFINITY's, else scattered; MBSP_AFFINITY=force:POLICY
    /// overrides this option, as it overrides a program's Run::policy].
    #[arg(long, value_enum)]
    pub policy: Option<PolicyName>,
    /// CPU sets for --policy manual, one per top-level process: "0-3;4-7".
    #[arg(long, value_name = "SETS")]
    pub cpus: Option<String>,
    /// Print JSON: per process pid, package, numa, cores, pus and children.
    #[arg(long)]
    pub json: bool,
}

impl Args {
    /// The options these arguments ask for: the policy with its CPU sets checked, and where it
    /// comes from (`--policy`, or `MBSP_AFFINITY`, which a run would follow too).
    pub fn options(self) -> Result<Options> {
        let given = match (self.policy, self.cpus) {
            (None, None) => None,
            (Some(PolicyName::Compact), None) => Some(Policy::Compact),
            (Some(PolicyName::Scattered), None) => Some(Policy::Scattered),
            (Some(PolicyName::Manual), Some(c)) => {
                Some(Policy::Manual(mbsp::parse_cpu_sets(&c).or_usage()?))
            }
            (Some(PolicyName::Manual), None) => {
                return Err(Error::usage(
                    "--policy manual needs --cpus \"<cpus>;<cpus>;...\"",
                ));
            }
            (_, Some(_)) => return Err(Error::usage("--cpus goes with --policy manual")),
        };
        let env = match std::env::var(mbsp::AFFINITY_ENV) {
            Ok(v) => Some((mbsp::parse_affinity(&v).or_usage()?, v.trim().to_string())),
            Err(_) => None,
        };
        let bind = env.as_ref().is_none_or(|((_, bind), _)| *bind);
        let (policy, from) = choose_policy(given, env);
        Ok(Options {
            bind,
            xml: self.xml,
            synthetic: self.synthetic,
            procs: self.procs,
            nest: self.nest,
            policy,
            from,
            json: self.json,
        })
    }
}

/// Where the policy of `mbsp topo` comes from, in the order a run takes them
/// (docs/placement.md, "Which policy applies").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PolicyFrom {
    /// `MBSP_AFFINITY=force:<policy>` (the value), before `--policy`.
    Forced(String),
    /// `--policy`.
    Option,
    /// `MBSP_AFFINITY` (the value), without `--policy`.
    Env(String),
    /// Neither: scattered.
    Default,
}

/// The policy of a plan given `--policy` (`given`) and `MBSP_AFFINITY` (its policy and whether
/// it binds, and its value), and where it comes from: a forced environment first, then
/// `--policy`, then the environment, then scattered. The binding is not planned here: a
/// policy of `none` plans as scattered.
pub fn choose_policy(
    given: Option<Policy>,
    env: Option<((Policy, bool), String)>,
) -> (Policy, PolicyFrom) {
    match (given, env) {
        (_, Some(((p, _), v))) if v.starts_with("force:") => (p, PolicyFrom::Forced(v)),
        (Some(p), _) => (p, PolicyFrom::Option),
        (None, Some(((p, _), v))) => (p, PolicyFrom::Env(v)),
        (None, None) => (Policy::Scattered, PolicyFrom::Default),
    }
}

impl PolicyFrom {
    /// ` (MBSP_AFFINITY=compact)` and the like, after the policy's name; nothing for
    /// `--policy` and the default.
    fn note(&self) -> String {
        match self {
            PolicyFrom::Forced(v) => format!(" ({}={v}, before --policy)", mbsp::AFFINITY_ENV),
            PolicyFrom::Env(v) => format!(" ({}={v})", mbsp::AFFINITY_ENV),
            PolicyFrom::Option | PolicyFrom::Default => String::new(),
        }
    }

    /// The JSON name: `forced`, `option`, `environment`, `default`.
    fn name(&self) -> &'static str {
        match self {
            PolicyFrom::Forced(_) => "forced",
            PolicyFrom::Option => "option",
            PolicyFrom::Env(_) => "environment",
            PolicyFrom::Default => "default",
        }
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
    /// Where the policy comes from.
    pub from: PolicyFrom,
    /// Whether runs bind (`MBSP_AFFINITY=none` says they do not).
    pub bind: bool,
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
    let applied = m.source().is_real() && o.bind;
    if o.json {
        let mut out = json!({ "machine": Tree::of(m).to_json() });
        if !levels.is_empty() {
            out["policy"] = o.policy.to_string().into();
            out["policy_from"] = o.from.name().into();
            out["applied"] = applied.into();
            out["processes"] = placement::to_json(&processes);
            out["stacked"] = placement::stacked(&processes)
                .iter()
                .map(|r| {
                    json!({
                        "parent": r.parent,
                        "processes": r.procs,
                        "cores": r.cores,
                        "most": r.most,
                    })
                })
                .collect::<Vec<_>>()
                .into();
        }
        println!("{}", serde_json::to_string_pretty(&out).expect("JSON"));
        return Ok(());
    }
    print!("{m}");
    if !levels.is_empty() {
        let shape: Vec<String> = levels.iter().map(Count::to_string).collect();
        println!(
            "plan: {} processes ({}), policy {}{}{}",
            processes.len(),
            shape.join(", nested: "),
            o.policy,
            o.from.note(),
            match (applied, m.source().is_real()) {
                (true, _) => ", bound when run here",
                (false, true) => ", not bound (MBSP_AFFINITY=none)",
                (false, false) => ", planned only (not this machine)",
            }
        );
        print_plan(&processes, "", 0);
        if let Some(w) = stacking_warning(&processes, &o.policy) {
            println!("{w}");
        }
    }
    Ok(())
}
