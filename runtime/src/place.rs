//! Where the processes of a run are: the plan, the binding, and what each process owns.

use crate::error::{Error, ErrorKind, Result};
use mbsp_topology::{Binder, Binding, Domain, Level, Loaded, Machine, Policy, plan, plan_per};
use std::fmt;
use std::sync::Arc;

/// The environment variable choosing the default affinity of runs: `compact`, `scattered`
/// (the default), `none` (planned as scattered, never bound), or `manual:<cpus>;<cpus>;...`
/// with one CPU list per process (e.g. `manual:0-3;4-7`).
pub const AFFINITY_ENV: &str = "MBSP_AFFINITY";

/// How many processes a run has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Procs {
    /// Exactly this many.
    Count(usize),
    /// One per object of this level in the part of the machine the run is placed in.
    Per(Level),
}

/// The affinity a run uses when none is given: from [`AFFINITY_ENV`], else scattered and bound.
pub(crate) fn default_affinity() -> Result<(Policy, bool)> {
    match std::env::var(AFFINITY_ENV) {
        Err(_) => Ok((Policy::Scattered, true)),
        Ok(v) => parse_affinity(&v).map_err(|m| Error::outside(ErrorKind::Misuse, "run", m)),
    }
}

/// Parse an affinity specification (see [`AFFINITY_ENV`]).
pub fn parse_affinity(v: &str) -> std::result::Result<(Policy, bool), String> {
    match v.trim() {
        "" | "scattered" | "scatter" => Ok((Policy::Scattered, true)),
        "compact" => Ok((Policy::Compact, true)),
        "none" | "unbound" => Ok((Policy::Scattered, false)),
        s if s.starts_with("manual:") => Ok((Policy::Manual(parse_cpu_sets(&s[7..])?), true)),
        s => Err(format!(
            "{AFFINITY_ENV}=\"{s}\" is not understood: use compact, scattered, none or manual:<cpus>;<cpus>;..."
        )),
    }
}

/// Parse `0-3,8;4-7` into `[[0,1,2,3,8],[4,5,6,7]]`.
pub fn parse_cpu_sets(s: &str) -> std::result::Result<Vec<Vec<u32>>, String> {
    s.split(';')
        .map(|set| {
            let mut out = Vec::new();
            for part in set.split(',').map(str::trim).filter(|x| !x.is_empty()) {
                let num = |x: &str| {
                    x.trim()
                        .parse::<u32>()
                        .map_err(|_| format!("\"{x}\" is not a CPU number (in \"{s}\")"))
                };
                match part.split_once('-') {
                    Some((a, b)) => {
                        let (a, b) = (num(a)?, num(b)?);
                        if a > b {
                            return Err(format!("CPU range {a}-{b} is empty (in \"{s}\")"));
                        }
                        out.extend(a..=b);
                    }
                    None => out.push(num(part)?),
                }
            }
            Ok(out)
        })
        .collect()
}

/// The placement of one run: the machine, the policy, each process's domain, and whether
/// bindings are applied.
pub(crate) struct Layout {
    pub(crate) loaded: Loaded,
    pub(crate) binder: Binder,
    pub(crate) policy: Policy,
    pub(crate) bind: bool,
    pub(crate) domains: Vec<Domain>,
}

impl Layout {
    /// Plan `procs` processes in `domain` of `loaded`.
    pub(crate) fn plan(
        loaded: Loaded,
        domain: &Domain,
        procs: Procs,
        policy: Policy,
        bind: bool,
    ) -> std::result::Result<Layout, String> {
        let m = &loaded.machine;
        let domains = match procs {
            Procs::Count(p) => plan(m, domain, p, &policy).map_err(|e| e.0)?,
            Procs::Per(level) => plan_per(m, domain, level),
        };
        let binder = Binder::new(&loaded);
        Ok(Layout {
            bind: bind && binder.applies(),
            binder,
            loaded,
            policy,
            domains,
        })
    }

    pub(crate) fn machine(&self) -> &Arc<Machine> {
        &self.loaded.machine
    }

    /// Each process's barrier group: the first package of its domain.
    pub(crate) fn groups(&self) -> Vec<usize> {
        let m = self.machine();
        self.domains
            .iter()
            .map(|d| d.packages(m).first().copied().unwrap_or(0))
            .collect()
    }

    /// Hardware threads really available to the run's processes (for the waiting policy).
    pub(crate) fn cores_for(&self) -> usize {
        let pus: std::collections::BTreeSet<usize> = self
            .domains
            .iter()
            .flat_map(|d| d.pus().iter().copied())
            .collect();
        if self.binder.applies() {
            pus.len()
        } else {
            pus.len().min(crate::nprocs())
        }
    }
}

/// What a process owns: the part of the machine it is placed on (and bound to, on the real
/// machine), which is also where a nested run it starts is placed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Logical indices of the packages it touches.
    pub packages: Vec<usize>,
    /// OS indices of the NUMA nodes it touches.
    pub numas: Vec<u32>,
    /// Logical indices of its cores.
    pub cores: Vec<usize>,
    /// OS indices of its PUs (CPU numbers).
    pub pus: Vec<u32>,
    /// Whether its thread is bound to `pus`, or why not.
    pub binding: Binding,
}

impl Placement {
    pub(crate) fn new(m: &Machine, d: &Domain, binding: Binding) -> Placement {
        Placement {
            packages: d.packages(m),
            numas: d.numas(m),
            cores: d.cores(m),
            pus: d.pu_os(m),
            binding,
        }
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |v: &[usize]| mbsp_topology::ranges(v.iter().map(|&x| x as u32));
        write!(
            f,
            "package {}, NUMA {}, cores {}, PUs {}",
            list(&self.packages),
            mbsp_topology::ranges(self.numas.iter().copied()),
            list(&self.cores),
            mbsp_topology::ranges(self.pus.iter().copied())
        )?;
        match &self.binding {
            Binding::Applied(_) => f.write_str(" (bound)"),
            Binding::NotApplied(_) => f.write_str(" (not bound)"),
            Binding::Refused(_) => f.write_str(" (binding refused)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affinity_specifications() {
        assert_eq!(parse_affinity("compact").unwrap(), (Policy::Compact, true));
        assert_eq!(parse_affinity("none").unwrap(), (Policy::Scattered, false));
        assert_eq!(
            parse_affinity("manual:0-2,7;4").unwrap(),
            (Policy::Manual(vec![vec![0, 1, 2, 7], vec![4]]), true)
        );
        assert!(
            parse_affinity("manual:0-x")
                .unwrap_err()
                .contains("not a CPU number")
        );
        assert!(
            parse_affinity("spread")
                .unwrap_err()
                .contains("MBSP_AFFINITY=\"spread\"")
        );
    }
}
