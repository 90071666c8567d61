//! Where the processes of a run are: the plan, the binding, and what each process owns.

use crate::error::{Error, ErrorKind, Result};
use mbsp_topology::{
    Binder, Binding, Domain, Level, Loaded, Machine, NotBound, PlanError, Policy, plan, plan_per,
};
use std::fmt;
use std::num::ParseIntError;
use std::sync::Arc;

/// The environment variable choosing the default affinity of runs: `compact`, `scattered`
/// (the default), `none` (planned as scattered, never bound), or `manual:<cpus>;<cpus>;...`
/// with one CPU list per process (e.g. `manual:0-3;4-7`).
///
/// It applies to the runs whose program chose no policy ([`Run::policy`](crate::Run::policy)):
/// a program's choice comes first. Prefixed with `force:` (`force:compact`,
/// `force:manual:0-3;4-7`, `force:none`) it comes before the program's: every
/// [`Run::policy`](crate::Run::policy) is ignored, so top-level runs take the environment's
/// policy and nested runs inherit it (a manual one as scattered), and `force:none` also turns
/// binding off where the program turned it on ([`Run::bind`](crate::Run::bind)).
/// docs/placement.md, "Which policy applies", has the whole order.
pub const AFFINITY_ENV: &str = "MBSP_AFFINITY";

/// The prefix of an [`AFFINITY_ENV`] that overrides the program's policies.
const FORCE: &str = "force:";

/// The affinity [`AFFINITY_ENV`] forces (`force:<policy>`), if it does: the policy and whether
/// runs bind. Read once, when first asked (a [`Run`](crate::Run) asks when it is given a
/// policy or a binding); an `AFFINITY_ENV` that cannot be parsed forces nothing (the first run
/// fails with its error).
///
/// ```
/// // Unless the environment says `MBSP_AFFINITY=force:...`, the program's policy stands.
/// if mbsp::forced_affinity().is_none() {
///     let m = mbsp::Machine::synthetic("package:2 core:2 pu:1").unwrap();
///     let r = mbsp::Run::new(2).machine(m).policy(mbsp::Policy::Compact);
///     assert_eq!(r.run(|ctx| Ok(ctx.placement().cores)).unwrap(), vec![vec![0], vec![1]]);
/// }
/// ```
pub fn forced_affinity() -> Option<&'static (Policy, bool)> {
    static FORCED: std::sync::OnceLock<Option<(Policy, bool)>> = std::sync::OnceLock::new();
    FORCED
        .get_or_init(|| {
            let v = std::env::var(AFFINITY_ENV).ok()?;
            if !v.trim_start().starts_with(FORCE) {
                return None;
            }
            parse_affinity(&v).ok()
        })
        .as_ref()
}

/// The environment variable choosing how the MPI ranks of a run that share a node divide it
/// (docs/placement.md, "Ranks sharing a node"): `split` (the default: the ranks split the CPUs
/// the launcher left them, by the run's placement policy, unless the launcher bound them apart,
/// which then stands), `launcher` (each rank keeps what the launcher left it, split or not), or
/// `manual:<cpus>;<cpus>;...` with one CPU list per rank of the node, in local-rank order.
pub const RANK_SHARE_ENV: &str = "MBSP_RANK_SHARE";

/// The environment variable that makes runs report their placement on stderr (`1`): every run
/// over MPI ranks prints each rank's share of its node, and every thread run (top-level or
/// nested, in any rank) its plan, once per distinct plan; `0` or unset: nothing.
pub const PLACEMENT_ENV: &str = "MBSP_PLACEMENT";

/// Whether [`PLACEMENT_ENV`] asks for reports (read once).
pub(crate) fn reporting() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var(PLACEMENT_ENV).is_ok_and(|v| !matches!(v.trim(), "" | "0" | "off"))
    })
}

/// Print `line` on stderr whole, once per distinct line (a loop of nested runs of one shape
/// reports it once).
pub(crate) fn report(line: String) {
    static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if seen.contains(&line) {
        return;
    }
    use std::io::Write;
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
    seen.push(line);
}

/// Under [`PLACEMENT_ENV`]: the plan of a run started by the process at `path` (empty: a
/// top-level run), one entry per process.
pub(crate) fn report_run(path: &[usize], layout: &Layout) {
    if !reporting() {
        return;
    }
    let m = layout.machine();
    let p = layout.domains.len();
    let who = if path.is_empty() {
        format!("top-level run of {p}")
    } else {
        format!("run of {p} nested in process {}", path_text(path))
    };
    let procs: Vec<String> = layout
        .domains
        .iter()
        .enumerate()
        .map(|(pid, d)| format!("pid {pid}: PUs {}", mbsp_topology::ranges(d.pu_os(m))))
        .collect();
    let bound = if layout.bind { "bound" } else { "not bound" };
    let forced = if forced_affinity().is_some() {
        " (forced by MBSP_AFFINITY)"
    } else {
        ""
    };
    report(format!(
        "mbsp placement: {who} ({}{forced}, {bound}): {}",
        layout.policy,
        procs.join("; ")
    ));
}

/// `1/3` for the process at path `[1, 3]`.
fn path_text(path: &[usize]) -> String {
    let at: Vec<String> = path.iter().map(usize::to_string).collect();
    at.join("/")
}

/// The warning for a run of `p` processes (a count, not one per object of a level) nested in
/// the process at `path` whose plan puts several of them on one core, if it does: which run,
/// where, why, and what to do instead.
pub(crate) fn stacking_warning(path: &[usize], layout: &Layout) -> Option<String> {
    let m = layout.machine();
    let most = mbsp_topology::core_sharing(m, &layout.domains)
        .into_iter()
        .max()
        .filter(|&n| n > 1)?;
    let p = layout.domains.len();
    let mut cores: Vec<u32> = layout
        .domains
        .iter()
        .flat_map(|d| d.cores(m))
        .map(|c| c as u32)
        .collect();
    cores.sort_unstable();
    cores.dedup();
    let pus: Vec<u32> = layout.domains.iter().flat_map(|d| d.pu_os(m)).collect();
    let (at, n) = (path_text(path), cores.len());
    let s = if n == 1 { "" } else { "s" };
    let why = match layout.policy {
        Policy::Compact => format!(
            "the compact policy gives each process one core, and process {at} nests its run \
             there. Place the runs above it scattered (Run::policy(Policy::Scattered), or \
             MBSP_AFFINITY=scattered, the default) so that each process owns a share of the \
             machine to nest in, or nest at most {n} process{es} in it",
            es = if n == 1 { "" } else { "es" }
        ),
        _ => format!(
            "process {at} owns {n} core{s}. Start fewer processes above it (each then owns more \
             cores), or nest at most {n} in it"
        ),
    };
    Some(format!(
        "mbsp: warning: the run of {p} nested in process {at} ({}) puts its {p} processes on \
         {n} core{s} (core{s} {}, PUs {}; up to {most} on one core): {why} (this warning is \
         printed once per program)",
        layout.policy,
        mbsp_topology::ranges(cores),
        mbsp_topology::ranges(pus),
    ))
}

/// Print [`stacking_warning`] on stderr for the first nested run of the program that stacks
/// its processes on cores (docs/placement.md, "Nested runs"). `procs`: how the run counts its
/// processes; runs of one process per object of a level and manual plans are as asked, and
/// never warned about.
pub(crate) fn warn_stacking(path: &[usize], procs: Procs, layout: &Layout) {
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    use std::sync::atomic::Ordering::Relaxed;
    if WARNED.load(Relaxed)
        || matches!(procs, Procs::Per(_))
        || matches!(layout.policy, Policy::Manual(_))
    {
        return;
    }
    if let Some(w) = stacking_warning(path, layout)
        && !WARNED.swap(true, Relaxed)
    {
        use std::io::Write;
        let _ = std::io::stderr().write_all(format!("{w}\n").as_bytes());
    }
}

/// How many processes a run has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Procs {
    /// Exactly this many.
    Count(usize),
    /// One per object of this level in the part of the machine the run is placed in.
    Per(Level),
}

/// An affinity specification ([`AFFINITY_ENV`], [`parse_affinity`]) or a list of CPU sets
/// ([`parse_cpu_sets`]) that could not be parsed.
///
/// A run started with a bad [`AFFINITY_ENV`] fails with an [`Error`] whose message is this
/// error's text and whose [`std::error::Error::source`] is this error.
///
/// ```
/// use mbsp::AffinityError;
/// let e = mbsp::parse_affinity("manual:0-3;4-x").unwrap_err();
/// assert!(matches!(&e, AffinityError::NotACpu { token, .. } if token == "x"));
/// assert_eq!(e.to_string(), "\"x\" is not a CPU number (in \"0-3;4-x\")");
/// // The number's own parse error is the source.
/// assert!(std::error::Error::source(&e).unwrap().is::<std::num::ParseIntError>());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AffinityError {
    /// The specification is none of `compact`, `scattered`, `none`, `manual:...`.
    UnknownPolicy {
        /// The specification (trimmed).
        value: String,
    },
    /// An element of a CPU list is not a CPU number.
    NotACpu {
        /// The element.
        token: String,
        /// The whole CPU list.
        spec: String,
        /// Why it is not a number.
        source: ParseIntError,
    },
    /// A CPU range `a-b` has `a > b`.
    EmptyRange {
        /// The first CPU of the range.
        a: u32,
        /// The last CPU of the range.
        b: u32,
        /// The whole CPU list.
        spec: String,
    },
}

impl fmt::Display for AffinityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AffinityError::UnknownPolicy { value } => write!(
                f,
                "{AFFINITY_ENV}=\"{value}\" is not understood: use compact, scattered, none or \
                 manual:<cpus>;<cpus>;..., or one of them after force: to override the \
                 program's Run::policy"
            ),
            AffinityError::NotACpu { token, spec, .. } => {
                write!(f, "\"{token}\" is not a CPU number (in \"{spec}\")")
            }
            AffinityError::EmptyRange { a, b, spec } => {
                write!(f, "CPU range {a}-{b} is empty (in \"{spec}\")")
            }
        }
    }
}

impl std::error::Error for AffinityError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AffinityError::NotACpu { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The affinity a run uses when none is given: from [`AFFINITY_ENV`], else scattered and bound.
/// A bad [`AFFINITY_ENV`] is a misuse error of `run` with the [`AffinityError`] as its source.
pub(crate) fn default_affinity() -> Result<(Policy, bool)> {
    match std::env::var(AFFINITY_ENV) {
        Err(_) => Ok((Policy::Scattered, true)),
        Ok(v) => parse_affinity(&v)
            .map_err(|e| Error::outside(ErrorKind::Misuse, "run", e.to_string()).with_source(e)),
    }
}

/// Parse an affinity specification (see [`AFFINITY_ENV`]): the policy and whether it binds.
/// A `force:` prefix is accepted and does not change the result ([`forced_affinity`] says
/// whether the environment's specification forces).
///
/// ```
/// use mbsp::{Policy, parse_affinity};
/// assert_eq!(parse_affinity("compact"), Ok((Policy::Compact, true)));
/// assert_eq!(parse_affinity("force:none"), Ok((Policy::Scattered, false)));
/// assert!(parse_affinity("force:").is_err());
/// ```
pub fn parse_affinity(v: &str) -> std::result::Result<(Policy, bool), AffinityError> {
    let v = v.trim();
    let spec = match v.strip_prefix(FORCE) {
        Some(rest) if rest.trim().is_empty() => {
            return Err(AffinityError::UnknownPolicy {
                value: v.to_string(),
            });
        }
        Some(rest) => rest.trim(),
        None => v,
    };
    match spec {
        "" | "scattered" | "scatter" => Ok((Policy::Scattered, true)),
        "compact" => Ok((Policy::Compact, true)),
        "none" | "unbound" => Ok((Policy::Scattered, false)),
        s if s.starts_with("manual:") => Ok((Policy::Manual(parse_cpu_sets(&s[7..])?), true)),
        _ => Err(AffinityError::UnknownPolicy {
            value: v.to_string(),
        }),
    }
}

/// Parse `0-3,8;4-7` into `[[0,1,2,3,8],[4,5,6,7]]`.
pub fn parse_cpu_sets(s: &str) -> std::result::Result<Vec<Vec<u32>>, AffinityError> {
    s.split(';')
        .map(|set| {
            let mut out = Vec::new();
            for part in set.split(',').map(str::trim).filter(|x| !x.is_empty()) {
                let num = |x: &str| {
                    x.trim()
                        .parse::<u32>()
                        .map_err(|source| AffinityError::NotACpu {
                            token: x.to_string(),
                            spec: s.to_string(),
                            source,
                        })
                };
                match part.split_once('-') {
                    Some((a, b)) => {
                        let (a, b) = (num(a)?, num(b)?);
                        if a > b {
                            return Err(AffinityError::EmptyRange {
                                a,
                                b,
                                spec: s.to_string(),
                            });
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

/// Why a run's binding is off: [`Run::bind(false)`](crate::Run::bind).
pub(crate) const OFF_BY_RUN: NotBound = NotBound::Disabled {
    by: "Run::bind(false)",
};

/// Why a run's binding is off: [`AFFINITY_ENV`] is `none`.
pub(crate) const OFF_BY_ENV: NotBound = NotBound::Disabled {
    by: "MBSP_AFFINITY=none",
};

/// Why a run's binding is off: [`AFFINITY_ENV`] is `force:none`.
pub(crate) const OFF_BY_FORCE: NotBound = NotBound::Disabled {
    by: "MBSP_AFFINITY=force:none",
};

/// The placement of one run: the machine, the policy, each process's domain, and whether
/// bindings are applied; with what starting the run asks of it worked out once (each
/// process's CPUs, the barrier groups, the hardware threads), since a plan is kept and used
/// again by every run of the same shape ([`Layout::cached`]).
#[derive(Clone)]
pub(crate) struct Layout {
    pub(crate) loaded: Loaded,
    pub(crate) binder: Binder,
    pub(crate) policy: Policy,
    /// Whether bindings are applied: the machine is this one and binding is not off.
    pub(crate) bind: bool,
    /// Why binding is off for this run (and, by default, for the runs nested in it).
    pub(crate) off: Option<NotBound>,
    pub(crate) domains: Vec<Domain>,
    /// Each process's OS CPUs (its domain's PUs, sorted): what it is bound to.
    pub(crate) pus: Vec<Vec<u32>>,
    /// Each process's barrier group: the first package of its domain.
    pub(crate) groups: Vec<usize>,
    /// Process 0's PUs that no other process of the run is placed on (OS indices): where a
    /// nested run's process 0, its parent's thread, may stay without being narrowed
    /// ([`Layout::process0_stays_at`]).
    pub(crate) alone0: Vec<u32>,
    /// Hardware threads really available to the run's processes (for the waiting policy).
    pub(crate) cores: usize,
}

impl Layout {
    /// The processes of a run with coroutines, by the thread that runs them: those placed on the
    /// same PUs together (so that each thread is bound once), in pid order; on an unbound run,
    /// pid modulo the cores. Process 0's group comes first.
    pub(crate) fn thread_groups(&self) -> Vec<Vec<usize>> {
        let p = self.domains.len();
        let mut groups: Vec<Vec<usize>> = Vec::new();
        if self.bind {
            let mut keys: Vec<&[u32]> = Vec::new();
            for pid in 0..p {
                let key = self.pus[pid].as_slice();
                match keys.iter().position(|k| *k == key) {
                    Some(g) => groups[g].push(pid),
                    None => {
                        keys.push(key);
                        groups.push(vec![pid]);
                    }
                }
            }
        } else {
            let threads = self.cores.clamp(1, p);
            groups = (0..threads)
                .map(|t| (t..p).step_by(threads).collect())
                .collect();
        }
        groups
    }

    /// Plan `procs` processes in `domain` of `loaded`. Top-level runs get `loaded` from the
    /// caller or from [`Machine::current`], which detects the machine with hwloc on the first
    /// run of the program (a few milliseconds) and caches it for every later run. `off` says
    /// why binding is turned off, if it is.
    pub(crate) fn plan(
        loaded: Loaded,
        domain: &Domain,
        procs: Procs,
        policy: Policy,
        off: Option<NotBound>,
    ) -> std::result::Result<Layout, PlanError> {
        let m = &loaded.machine;
        let domains = match procs {
            Procs::Count(p) => plan(m, domain, p, &policy)?,
            Procs::Per(level) => plan_per(m, domain, level),
        };
        let binder = Binder::new(&loaded);
        let pus: Vec<Vec<u32>> = domains.iter().map(|d| d.pu_os(m)).collect();
        let alone0 = alone(&pus);
        let groups = domains
            .iter()
            .map(|d| d.packages(m).first().copied().unwrap_or(0))
            .collect();
        let all: std::collections::BTreeSet<usize> = domains
            .iter()
            .flat_map(|d| d.pus().iter().copied())
            .collect();
        let cores = if binder.applies() {
            all.len()
        } else {
            all.len().min(hardware_threads())
        };
        Ok(Layout {
            bind: off.is_none() && binder.applies(),
            off,
            binder,
            loaded,
            policy,
            domains,
            pus,
            groups,
            alone0,
            cores,
        })
    }

    /// Whether process 0's thread, running on OS CPU `cpu` (`None`: unknown), may stay there
    /// unnarrowed: `cpu` is one of process 0's PUs that no other process is placed on
    /// (`process::enter` says why that is enough).
    pub(crate) fn process0_stays_at(&self, cpu: Option<u32>) -> bool {
        cpu.is_some_and(|c| self.alone0.contains(&c))
    }

    /// Whether a top-level run's process 0, the caller's thread running on OS CPU `cpu`, may
    /// keep the caller's binding: as [`Layout::process0_stays_at`], unless the placement is
    /// manual (a program that names process 0's CPUs has the caller's thread bound to them).
    pub(crate) fn caller_stays_at(&self, cpu: Option<u32>) -> bool {
        !matches!(self.policy, Policy::Manual(_)) && self.process0_stays_at(cpu)
    }

    /// [`Layout::plan`], or the same plan made before on this thread. A plan depends only on
    /// its inputs, and making one allocates a few dozen times (domains, CPU lists, sets):
    /// about as much time as the rest of a nested run's start. A program that starts the same
    /// run again and again (a nested run per multiply, a top-level run per call) plans it once;
    /// each thread keeps its last [`KEPT_PLANS`] plans. `on_new` sees each plan made here
    /// (warnings about it are printed once, when it is made).
    pub(crate) fn cached(
        loaded: &Loaded,
        domain: &Domain,
        procs: Procs,
        policy: Policy,
        off: Option<NotBound>,
        on_new: impl FnOnce(&Layout),
    ) -> std::result::Result<Arc<Layout>, PlanError> {
        let same = |(within, asked, l): &(Domain, Procs, Arc<Layout>)| {
            // The machine by identity: a kept plan holds its `Loaded`, so the address cannot
            // be another machine's while the plan is kept.
            Arc::ptr_eq(&l.loaded.machine, &loaded.machine)
                && l.binder.applies() == loaded.bindable()
                && *asked == procs
                && l.policy == policy
                && l.off == off
                && within == domain
        };
        let hit = PLANS.with(|plans| {
            let mut plans = plans.borrow_mut();
            let at = plans.iter().position(same)?;
            // Newest first: the plan asked for again, usually the newest already (a nested
            // run in a loop), moves to the front.
            plans[..=at].rotate_right(1);
            Some(plans[0].2.clone())
        });
        if let Some(l) = hit {
            return Ok(l);
        }
        let l = Layout::plan(loaded.clone(), domain, procs, policy, off)?;
        on_new(&l);
        let l = Arc::new(l);
        PLANS.with(|plans| {
            let mut plans = plans.borrow_mut();
            plans.truncate(KEPT_PLANS - 1);
            plans.insert(0, (domain.clone(), procs, l.clone()));
        });
        Ok(l)
    }

    pub(crate) fn machine(&self) -> &Arc<Machine> {
        &self.loaded.machine
    }

    /// Why this run's processes are not bound, when they are not (`bind` is false): the plan
    /// is for another machine, or binding is off.
    pub(crate) fn unbound(&self) -> Binding {
        let why = self.binder.not_applied().or_else(|| self.off.clone());
        Binding::NotApplied(why.unwrap_or(OFF_BY_RUN))
    }
}

/// How many plans each thread keeps ([`Layout::cached`]): a program alternates between a few
/// shapes of run at most (a top-level run and the nested runs of each of its levels).
const KEPT_PLANS: usize = 8;

thread_local! {
    /// The plans this thread made last, newest first, with the domain each was made in and
    /// the processes asked for ([`Layout::cached`]).
    static PLANS: std::cell::RefCell<Vec<(Domain, Procs, Arc<Layout>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// What a process owns: the part of the machine it is placed on (and bound to, on the real
/// machine), which is also where a nested run it starts is placed.
///
/// Only the runtime makes placements ([`Ctx::placement`](crate::Ctx::placement)); the type is
/// `#[non_exhaustive]` so that fields can be added.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Placement {
    /// Logical indices of the packages it touches.
    pub packages: Vec<usize>,
    /// OS indices of the NUMA nodes it touches; `None` when the machine tree has no NUMA level
    /// (a synthetic description without one, see [`Machine::has_numa_level`]).
    pub numas: Option<Vec<u32>>,
    /// Logical indices of its cores.
    pub cores: Vec<usize>,
    /// OS indices of its PUs (CPU numbers).
    pub pus: Vec<u32>,
    /// Whether its thread is bound to `pus`, or why not (printed as the reason, e.g.
    /// "not bound: binding disabled by MBSP_AFFINITY=none").
    pub binding: Binding,
}

impl Placement {
    pub(crate) fn new(m: &Machine, d: &Domain, binding: Binding) -> Placement {
        Placement {
            packages: d.packages(m),
            numas: m.has_numa_level().then(|| d.numas(m)),
            cores: d.cores(m),
            pus: d.pu_os(m),
            binding,
        }
    }
}

impl fmt::Display for Placement {
    /// `package 0, NUMA 0, cores 0-1, PUs 0-1 (bound)`; "NUMA -" when the machine tree has no
    /// NUMA level, and the reason when the thread is not bound.
    ///
    /// ```
    /// let m = mbsp_topology::Machine::synthetic("package:2 core:2 pu:1").unwrap();
    /// let places = mbsp::Run::new(2)
    ///     .machine(m)
    ///     .run(|ctx| Ok(ctx.placement().to_string()))
    ///     .unwrap();
    /// assert_eq!(
    ///     places[1],
    ///     "package 1, NUMA -, cores 2-3, PUs 2-3 (not bound: planned for another machine \
    ///      (synthetic \"package:2 core:2 pu:1\"))"
    /// );
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |v: &[usize]| mbsp_topology::ranges(v.iter().map(|&x| x as u32));
        let numas = match &self.numas {
            Some(n) => mbsp_topology::ranges(n.iter().copied()),
            None => "-".to_string(),
        };
        write!(
            f,
            "package {}, NUMA {numas}, cores {}, PUs {} ({})",
            list(&self.packages),
            list(&self.cores),
            mbsp_topology::ranges(self.pus.iter().copied()),
            self.binding
        )
    }
}

/// The CPUs of `pus[0]` that no other entry of `pus` has.
fn alone(pus: &[Vec<u32>]) -> Vec<u32> {
    let Some((first, rest)) = pus.split_first() else {
        return Vec::new();
    };
    first
        .iter()
        .copied()
        .filter(|c| rest.iter().all(|o| !o.contains(c)))
        .collect()
}

/// The number of hardware threads available to this program, as the standard library reports
/// it when first asked ([`nprocs`](crate::nprocs)).
pub(crate) fn hardware_threads() -> usize {
    // Asked once: the standard library reads cgroup files to answer, which costs tens of
    // microseconds — more than starting a run with a warm team.
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
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
                .to_string()
                .contains("not a CPU number")
        );
        assert!(
            parse_affinity("spread")
                .unwrap_err()
                .to_string()
                .contains("MBSP_AFFINITY=\"spread\"")
        );
    }

    /// Process 0 may stay unnarrowed only on a PU of its own that no other process shares.
    #[test]
    fn process_zero_stays_only_on_a_pu_no_sibling_has() {
        let loaded = Machine::synthetic("package:2 core:2 pu:2").unwrap();
        let whole = loaded.machine.whole();
        let plan = |p: usize, policy: Policy| {
            Layout::plan(loaded.clone(), &whole, Procs::Count(p), policy, None).unwrap()
        };
        // One process per package: process 0 alone on package 0's PUs.
        let two = plan(2, Policy::Scattered);
        assert_eq!(two.alone0, two.pus[0]);
        assert_eq!(two.alone0.len(), 4);
        assert!(two.process0_stays_at(Some(two.pus[0][3])));
        assert!(!two.process0_stays_at(Some(two.pus[1][0])));
        assert!(!two.process0_stays_at(None));
        // A run of one has its whole placement to itself.
        for policy in [Policy::Compact, Policy::Scattered] {
            let one = plan(1, policy);
            assert_eq!(one.alone0, one.pus[0]);
        }
        // More processes than PUs: process 0 shares its PU, so it is always narrowed.
        let many = plan(16, Policy::Compact);
        assert!(many.alone0.is_empty());
        assert!(!many.process0_stays_at(Some(many.pus[0][0])));
        // Manual sets that overlap in part: the PUs only process 0 has.
        let manual = plan(2, Policy::Manual(vec![vec![0, 1, 2], vec![2, 3]]));
        assert_eq!(manual.alone0, vec![0, 1]);
        // The caller's thread stays as process 0 does, but never under a manual placement.
        assert!(manual.process0_stays_at(Some(0)));
        assert!(!manual.caller_stays_at(Some(0)));
        assert!(two.caller_stays_at(Some(two.pus[0][3])));
        assert!(!two.caller_stays_at(Some(two.pus[1][0])));
        assert!(!many.caller_stays_at(Some(many.pus[0][0])));
    }

    /// A plan is made once per thread for the same machine, domain, processes, policy and
    /// binding, and anew when any of them differs; what it works out for the processes (CPUs,
    /// barrier groups, hardware threads) is its domains'.
    #[test]
    fn plans_are_kept_per_inputs() {
        let loaded = Machine::synthetic("package:2 core:2 pu:2").unwrap();
        let whole = loaded.machine.whole();
        let made = std::cell::Cell::new(0);
        let get = |l: &Loaded, d: &Domain, p: usize, policy: Policy, off: Option<NotBound>| {
            Layout::cached(l, d, Procs::Count(p), policy, off, |_| {
                made.set(made.get() + 1)
            })
            .unwrap()
        };
        let a = get(&loaded, &whole, 4, Policy::Scattered, None);
        let b = get(&loaded, &whole, 4, Policy::Scattered, None);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(made.get(), 1);
        let others = [
            get(&loaded, &whole, 2, Policy::Scattered, None),
            get(&loaded, &whole, 4, Policy::Compact, None),
            get(&loaded, &whole, 4, Policy::Scattered, Some(OFF_BY_RUN)),
            get(&loaded, &a.domains[0], 4, Policy::Scattered, None),
            // The same tree loaded again is another machine (its plans may not be bound alike).
            get(
                &Machine::synthetic("package:2 core:2 pu:2").unwrap(),
                &whole,
                4,
                Policy::Scattered,
                None,
            ),
        ];
        assert_eq!(made.get(), 6);
        for o in &others {
            assert!(!Arc::ptr_eq(&a, o));
        }
        assert_eq!(others[3].domains.len(), 4);
        assert!(others[2].off.is_some() && !others[2].bind);
        // Kept plans come back newest first while the others are used (at most KEPT_PLANS).
        let c = get(&loaded, &whole, 4, Policy::Scattered, None);
        assert!(Arc::ptr_eq(&a, &c));
        assert_eq!(made.get(), 6);
        for p in 1..=KEPT_PLANS {
            get(&loaded, &whole, p + 4, Policy::Scattered, None);
        }
        let d = get(&loaded, &whole, 4, Policy::Scattered, None);
        assert!(
            !Arc::ptr_eq(&a, &d),
            "pushed out by {KEPT_PLANS} newer plans"
        );
        // What a plan works out is its domains'.
        let m = &loaded.machine;
        for l in [&a, &others[0], &others[3]] {
            for (pid, dom) in l.domains.iter().enumerate() {
                assert_eq!(l.pus[pid], dom.pu_os(m));
                assert_eq!(l.groups[pid], dom.packages(m)[0]);
            }
            let pus: std::collections::BTreeSet<usize> = l
                .domains
                .iter()
                .flat_map(|d| d.pus().iter().copied())
                .collect();
            assert_eq!(l.cores, pus.len().min(hardware_threads()));
        }
    }

    /// The warning of a stacked nested run says where it stacks, why and what to do, by policy;
    /// plans that do not stack have none.
    #[test]
    fn stacking_warnings() {
        let loaded = Machine::synthetic("package:2 core:2 pu:2").unwrap();
        let m = loaded.machine.clone();
        let layout = |domain: &Domain, p: usize, policy: Policy| {
            Layout::plan(loaded.clone(), domain, Procs::Count(p), policy, None).unwrap()
        };
        let top = layout(&m.whole(), 4, Policy::Scattered);
        assert_eq!(stacking_warning(&[], &top), None);
        // Scattered: process 3 owns core 3 (PUs 6-7); 3 processes there.
        let w = stacking_warning(&[3], &layout(&top.domains[3], 3, Policy::Scattered)).unwrap();
        assert_eq!(
            w,
            "mbsp: warning: the run of 3 nested in process 3 (scattered) puts its 3 processes on \
             1 core (core 3, PUs 6-7; up to 3 on one core): process 3 owns 1 core. Start fewer \
             processes above it (each then owns more cores), or nest at most 1 in it (this \
             warning is printed once per program)"
        );
        // Compact, two levels down: 2 processes on the 2 hardware threads of core 0.
        let w = stacking_warning(&[0, 1], &layout(&top.domains[0], 2, Policy::Compact)).unwrap();
        assert!(
            w.starts_with(
                "mbsp: warning: the run of 2 nested in process 0/1 (compact) puts its 2 \
                 processes on 1 core (core 0, PUs 0-1; up to 2 on one core): the compact policy \
                 gives each process one core, and process 0/1 nests its run there."
            ),
            "{w}"
        );
        // 2 processes nested in a share of 2 cores: one each.
        let half = layout(&m.whole(), 2, Policy::Scattered);
        assert_eq!(
            stacking_warning(&[1], &layout(&half.domains[1], 2, Policy::Compact)),
            None
        );
    }

    /// `force:` before any specification gives the same policy and binding; it must name one.
    #[test]
    fn forced_specifications() {
        for spec in ["compact", "scattered", "none", "manual:0-1;3", " compact "] {
            assert_eq!(
                parse_affinity(&format!("force:{spec}")),
                parse_affinity(spec),
                "{spec}"
            );
        }
        assert_eq!(
            parse_affinity(" force: manual:2;0 ").unwrap(),
            (Policy::Manual(vec![vec![2], vec![0]]), true)
        );
        for bad in ["force:", "force: ", "force:spread", "force:force:compact"] {
            let e = parse_affinity(bad).unwrap_err();
            assert_eq!(
                e,
                AffinityError::UnknownPolicy {
                    value: bad.trim().into()
                },
                "{bad}"
            );
        }
        assert!(matches!(
            parse_affinity("force:manual:0-x"),
            Err(AffinityError::NotACpu { .. })
        ));
    }

    #[test]
    fn affinity_errors_are_typed() {
        use std::error::Error as _;
        let e = parse_affinity(" spread ").unwrap_err();
        assert_eq!(
            e,
            AffinityError::UnknownPolicy {
                value: "spread".into()
            }
        );
        assert_eq!(
            e.to_string(),
            "MBSP_AFFINITY=\"spread\" is not understood: use compact, scattered, none or \
             manual:<cpus>;<cpus>;..., or one of them after force: to override the program's \
             Run::policy"
        );
        assert!(e.source().is_none());
        let e = parse_cpu_sets("0-3; 4-x").unwrap_err();
        assert!(
            matches!(&e, AffinityError::NotACpu { token, spec, .. } if token == "x" && spec == "0-3; 4-x"),
            "{e:?}"
        );
        assert_eq!(e.to_string(), "\"x\" is not a CPU number (in \"0-3; 4-x\")");
        let int = e.source().unwrap().downcast_ref::<ParseIntError>().unwrap();
        assert_eq!(int, &"x".parse::<u32>().unwrap_err());
        let e = parse_affinity("manual:7-5").unwrap_err();
        assert_eq!(
            e,
            AffinityError::EmptyRange {
                a: 7,
                b: 5,
                spec: "7-5".into()
            }
        );
        assert_eq!(e.to_string(), "CPU range 7-5 is empty (in \"7-5\")");
        assert!(e.source().is_none());
    }
}
