//! `mbsp topo`: print a machine tree and the placement of a (possibly nested) plan.

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
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.parse::<usize>() {
            Ok(n) => Ok(Count::N(n)),
            Err(_) => s
                .parse::<Level>()
                .map(Count::Per)
                .map_err(|e| e.to_string()),
        }
    }
}

/// One process of a plan, with its nested children.
struct Node {
    domain: Domain,
    children: Vec<Node>,
}

fn build(
    m: &Machine,
    domain: &Domain,
    levels: &[Count],
    policy: &Policy,
) -> Result<Vec<Node>, String> {
    let Some((first, rest)) = levels.split_first() else {
        return Ok(Vec::new());
    };
    let domains = match first {
        Count::N(p) => plan(m, domain, *p, policy).map_err(|e| e.to_string())?,
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

fn to_json(m: &Machine, nodes: &[Node]) -> Value {
    Value::from(
        nodes
            .iter()
            .enumerate()
            .map(|(pid, n)| {
                let mut o = json!({
                    "pid": pid,
                    "package": one_or_many(&n.domain.packages(m)),
                    "numa": one_or_many(&n.domain.numas(m)),
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
            ranges(d.numas(m)),
            ranges(d.cores(m).iter().map(|&x| x as u32)),
            ranges(d.pu_os(m)),
            indent = 2 + 2 * depth
        );
        print_plan(m, &n.children, &name, depth + 1);
    }
}

fn machine_json(m: &Machine) -> Value {
    json!({
        "source": m.source().to_string(),
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
            "numa": m.numas()[c.numa].os_index,
            "pus": c.pus.iter().map(|&u| m.pus()[u].os_index).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
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
pub fn print_nested(m: &Machine, levels: &[Count], policy: &Policy) -> Result<(), String> {
    let nodes = build(m, &m.whole(), levels, policy)?;
    print_plan(m, &nodes, "", 0);
    Ok(())
}

/// Run `mbsp topo`; an error is a message for the user.
pub fn run(o: Options) -> Result<(), String> {
    let loaded: Loaded = match (&o.xml, &o.synthetic) {
        (Some(_), Some(_)) => return Err("give --xml or --synthetic, not both".into()),
        (Some(f), None) => Machine::xml(f).map_err(|e| e.to_string())?,
        (None, Some(s)) => Machine::synthetic(s).map_err(|e| e.to_string())?,
        (None, None) => Machine::current().map_err(|e| e.to_string())?,
    };
    let m = &loaded.machine;
    let mut levels = Vec::new();
    if let Some(p) = &o.procs {
        if *p == Count::N(0) {
            return Err("-p must be at least 1".into());
        }
        levels.push(p.clone());
        levels.extend(o.nest.iter().cloned());
    } else if !o.nest.is_empty() {
        return Err("--nest needs -p (the top level of the plan)".into());
    }
    if levels.contains(&Count::N(0)) {
        return Err("--nest 0: a nested run needs at least 1 process".into());
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
