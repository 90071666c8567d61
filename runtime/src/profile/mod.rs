//! Superstep profiles: what every process did in every superstep, and the BSP prediction of it.
//!
//! Opt-in: [`Run::profile`](crate::Run::profile)`(true)` or `MBSP_PROFILE` in the environment.
//! When off, a run pays one predictable branch per communication request and per sync (the
//! recorder is an `Option` in the process's context).
//!
//! **What is recorded**, per process and superstep: the compute time (from the end of the
//! previous sync, or the start of the run, to the start of this sync), the time in the sync,
//! and the bytes, 8-byte words (each request rounded up) and messages this process sends and
//! receives. A put or a message counts as sent by its source and received by its destination;
//! a get (also `hpget`, `direct_get`) as sent by the process it reads and received by the
//! reader — BSPlib's h-relation counts both sides. Communication of a process with itself is
//! not counted (it is a local copy). The last superstep runs from the last sync to the end of
//! the SPMD function. `hpput`, `hpget` and `direct_get` copy at once, during the computation,
//! so their time is part of the compute time: their words are counted as well, and also apart
//! (`immediate_words_*`), and the sync's h-relation leaves them out.
//!
//! **The report** ([`Profile::report`]) gives each superstep's `w` (the largest compute time),
//! `h` (the largest of any process's words sent or received through the sync), imbalance (largest compute time
//! over the mean) and the BSP prediction `w + h·g + m·(g_msg − g) + l`, with `m` the most
//! buffered requests any process sent or received ([`Superstep::requests`]; an h-relation of
//! many one-word puts pays the per-message `g_msg`, [`Params::time_of`]) — the measured
//! computation plus the communication and synchronisation the parameters predict — beside the
//! measured time (the
//! largest compute + sync of any process), and whether the sync that ended it was lazy
//! ([`Superstep::lazy`]: every process declared its incoming records with
//! [`Ctx::declare_incoming`](crate::Ctx::declare_incoming)). Nested runs are priced with the
//! parameters of their level ([`Params::for_level`]); the text summarises them per level of
//! nesting (how many runs, their totals, the regions over them, the longest few), or shows
//! every one in full ([`Report::text`] with [`Detail::Full`]); the JSON has them all.
//!
//! **Regions.** [`Ctx::region`](crate::Ctx::region)(crate::Ctx::region) (or
//! [`region_begin`](crate::Ctx::region_begin)/[`region_end`](crate::Ctx::region_end); from C,
//! `mbsp_region_begin`/`mbsp_region_end`) names a part of the program. Regions nest. A
//! superstep belongs to the region innermost-open in a process when its computation ends (its
//! sync begins): a superstep is the unit of measurement, so it is not split. When processes
//! are in different regions at that moment, the superstep goes to the innermost region they
//! are all in (none, if they share none). The report totals every region over its supersteps,
//! sub-regions included, so the top-level regions and "(outside regions)" add up to the run;
//! a region that contains no sync gets no supersteps of its own (its work is in the superstep
//! of the region open at the next sync). A nested run has its own regions.
//!
//! **Waiting.** A process's time in a sync is waiting for the others plus the sync's own work
//! (barrier, communication). The process that arrives last waits for no one, so the report
//! takes the shortest time any process spent in a superstep's sync as that work, and the rest
//! of each process's time in the sync as its wait.
//!
//! `MBSP_PROFILE=1` prints the report of every top-level run to stderr when it ends (so C
//! programs get it through the C ABI too), `MBSP_PROFILE=full` the same with every nested run in
//! full (over MPI ranks, rank 0 reports the whole run, however it was started: see
//! `ranks::World::run`, docs/mpi.md); `MBSP_PROFILE=FILE.json` writes the JSON report of
//! the last top-level run to `FILE.json`, and `MBSP_PROFILE=FILE.svg` its timeline
//! ([`Profile::timeline_svg`]), both whole: through a temporary file renamed into place. The
//! timeline is drawn by this module (plain SVG text, no plotting library), so a program that
//! sets the variable — a C program included — gets it with no other tool.
//! The predictions use [`Params::current`]: `MBSP_PARAMS`, else the parameters `mbsp params
//! --save` stored for this machine, else the defaults (the report says which).

mod json;
pub(crate) mod record;
mod regions;
mod report;
mod text;
mod timeline;

pub use report::{ProcTotals, Report, Row, Totals};
pub use text::{Detail, Text};

use crate::params::Params;
use std::sync::OnceLock;

/// The environment variable that turns profiling on for every run (`1`: text report on
/// stderr, nested runs summarised per level; `full`: the same with every nested run in full;
/// a path ending in `.json`: the JSON report there; ending in `.svg`: the timeline there;
/// `0` or empty: off).
pub const PROFILE_ENV: &str = "MBSP_PROFILE";

/// What `MBSP_PROFILE` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum EnvRequest {
    Off,
    Text(Detail),
    Json(std::path::PathBuf),
    Svg(std::path::PathBuf),
}

/// `MBSP_PROFILE`, read once.
pub(crate) fn env_request() -> &'static EnvRequest {
    static REQ: OnceLock<EnvRequest> = OnceLock::new();
    REQ.get_or_init(|| parse_env(std::env::var_os(PROFILE_ENV).as_deref()))
}

fn parse_env(v: Option<&std::ffi::OsStr>) -> EnvRequest {
    match v.map(|v| v.to_string_lossy().into_owned()) {
        None => EnvRequest::Off,
        Some(s) if s.is_empty() || s == "0" || s.eq_ignore_ascii_case("off") => EnvRequest::Off,
        Some(s) if s.ends_with(".json") => EnvRequest::Json(s.into()),
        Some(s) if s.ends_with(".svg") => EnvRequest::Svg(s.into()),
        Some(s) if s.eq_ignore_ascii_case("full") => EnvRequest::Text(Detail::Full),
        Some(_) => EnvRequest::Text(Detail::Summary),
    }
}

/// A region of a [`Profile`]: its name and the region it is nested in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionName {
    /// As given to [`Ctx::region`](crate::Ctx::region)(crate::Ctx::region).
    pub name: String,
    /// The enclosing region (an index into [`Profile::regions`]), if any.
    pub parent: Option<usize>,
}

/// One process in one superstep.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcStep {
    /// Seconds of computation (before the sync).
    pub compute: f64,
    /// Seconds in the sync (waiting for the others, communicating).
    pub sync: f64,
    /// Bytes sent: puts and messages from this process, and what others read from it.
    pub bytes_sent: u64,
    /// Bytes received: puts and messages to this process, and what it read from others.
    pub bytes_received: u64,
    /// [`bytes_sent`](Self::bytes_sent) in 8-byte words, each request rounded up.
    pub words_sent: u64,
    /// [`bytes_received`](Self::bytes_received) in 8-byte words, each request rounded up.
    pub words_received: u64,
    /// BSMP messages sent.
    pub messages_sent: u64,
    /// BSMP messages received.
    pub messages_received: u64,
    /// The part of [`words_sent`](Self::words_sent) copied at once, during the computation
    /// (`hpput` by this process; `hpget`/`direct_get` from it by others).
    pub immediate_words_sent: u64,
    /// The part of [`words_received`](Self::words_received) copied at once.
    pub immediate_words_received: u64,
    /// Buffered requests (puts, gets, messages) this process made or that others made of it
    /// and that leave it: each carried by the sync (immediate copies excepted).
    pub requests_sent: u64,
    /// Buffered requests whose words reach this process through the sync.
    pub requests_received: u64,
    /// The region innermost-open in this process when its computation ended (an index into
    /// [`Profile::regions`]).
    pub region: Option<usize>,
    /// When the sync that ended this superstep was a lazy one: the puts and messages this
    /// process declared it receives ([`Ctx::declare_incoming`](crate::Ctx::declare_incoming));
    /// `None` after a full sync (the final sync, which ends the run, is always full).
    pub declared: Option<u64>,
}

/// One superstep of a run: a record per process.
#[derive(Clone, Debug, PartialEq)]
pub struct Superstep {
    /// Indexed by pid.
    pub procs: Vec<ProcStep>,
}

impl ProcStep {
    /// The words this process sent or received through the sync (the larger), leaving out
    /// those copied at once: its part of the superstep's h-relation.
    pub fn buffered_words(&self) -> u64 {
        (self.words_sent - self.immediate_words_sent)
            .max(self.words_received - self.immediate_words_received)
    }
}

impl Superstep {
    /// The h of the h-relation the sync carries: the largest number of words any process sent
    /// or received, leaving out those copied at once.
    pub fn h(&self) -> u64 {
        self.procs
            .iter()
            .map(ProcStep::buffered_words)
            .max()
            .unwrap_or(0)
    }

    /// The largest number of buffered requests (puts, gets, messages) any process sent or
    /// received: what an h-relation of many small requests pays per request
    /// ([`Params::time_of`]).
    pub fn requests(&self) -> u64 {
        self.procs
            .iter()
            .map(|s| s.requests_sent.max(s.requests_received))
            .max()
            .unwrap_or(0)
    }

    /// The largest number of words any process sent or received by immediate copies (their
    /// time is in the computation).
    pub fn h_immediate(&self) -> u64 {
        self.procs
            .iter()
            .map(|s| s.immediate_words_sent.max(s.immediate_words_received))
            .max()
            .unwrap_or(0)
    }

    /// Whether the sync that ended this superstep was lazy: every process declared how many
    /// puts and messages it receives ([`ProcStep::declared`]).
    ///
    /// ```
    /// let (_, profile) = mbsp::Run::new(2).run_profiled(|ctx| {
    ///     let x = ctx.push_reg(vec![0u64; 1])?;
    ///     ctx.sync()?;
    ///     ctx.put(1 - ctx.pid(), &[7], &x, 0)?;
    ///     ctx.declare_incoming(1)?; // one put arrives here: the sync is lazy
    ///     ctx.sync()
    /// })?;
    /// let lazy: Vec<bool> = profile.supersteps.iter().map(|s| s.lazy()).collect();
    /// assert_eq!(lazy, [false, true, false]);
    /// assert_eq!(profile.supersteps[1].procs[0].declared, Some(1));
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn lazy(&self) -> bool {
        !self.procs.is_empty() && self.procs.iter().all(|s| s.declared.is_some())
    }

    /// The largest computation time.
    pub fn w(&self) -> f64 {
        self.procs.iter().map(|s| s.compute).fold(0.0, f64::max)
    }

    /// The measured time: the largest computation + sync of any process.
    pub fn measured(&self) -> f64 {
        self.procs
            .iter()
            .map(|s| s.compute + s.sync)
            .fold(0.0, f64::max)
    }

    /// The shortest time any process spent in the sync: the sync's own work (barrier,
    /// communication), which the process that arrived last did without waiting.
    pub fn sync_work(&self) -> f64 {
        self.procs
            .iter()
            .map(|s| s.sync)
            .fold(f64::INFINITY, f64::min)
            .min(self.procs.iter().map(|s| s.sync).fold(0.0, f64::max))
    }

    /// How long process `pid` waited for the others in the sync: its time in the sync beyond
    /// [`sync_work`](Self::sync_work).
    pub fn wait(&self, pid: usize) -> f64 {
        self.procs
            .get(pid)
            .map_or(0.0, |s| (s.sync - self.sync_work()).max(0.0))
    }

    /// The mean of the processes' [`wait`](Self::wait).
    pub fn mean_wait(&self) -> f64 {
        let work = self.sync_work();
        self.procs.iter().map(|s| s.sync - work).sum::<f64>() / self.procs.len().max(1) as f64
    }

    /// Largest computation time over the mean (1 = balanced).
    pub fn imbalance(&self) -> f64 {
        let mean =
            self.procs.iter().map(|s| s.compute).sum::<f64>() / self.procs.len().max(1) as f64;
        if mean > 0.0 { self.w() / mean } else { 1.0 }
    }
}

/// The profile of one run: its supersteps, its regions, and the profiles of the runs nested
/// in it.
///
/// ```
/// let (sums, profile) = mbsp::Run::new(2).profile(true).run_profiled(|ctx| {
///     let x = ctx.push_reg(vec![0u64; 4])?;
///     ctx.sync()?;
///     let other = 1 - ctx.pid();
///     ctx.region("exchange", |ctx| {
///         ctx.put(other, &[1u64, 2, 3], &x, 0)?; // 3 words to the other process
///         ctx.sync()
///     })?;
///     Ok(ctx.local(&x)?.iter().sum::<u64>())
/// })?;
/// assert_eq!(sums, vec![6, 6]);
/// assert_eq!(profile.supersteps.len(), 3); // two syncs, then the end
/// assert_eq!(profile.supersteps[1].h(), 3);
/// assert_eq!(profile.region_path(profile.superstep_region(1).unwrap()), "exchange");
/// let report = profile.report(&mbsp::params::Params::DEFAULT);
/// assert_eq!(report.regions[0].supersteps, 1);
/// assert!(report.to_string().contains("exchange"));
/// # Ok::<(), mbsp::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// Processes of the run.
    pub p: usize,
    /// Pids from the top-level run down to the process that started this run (empty for a
    /// top-level run).
    pub path: Vec<usize>,
    /// For a nested run, the superstep of the run it is nested in during which it ran
    /// (`None` for a top-level run).
    pub started_in: Option<usize>,
    /// In order; the last one runs from the last sync to the end of the SPMD function.
    pub supersteps: Vec<Superstep>,
    /// The regions any process opened; a region's parent comes before it.
    pub regions: Vec<RegionName>,
    /// The runs nested in this one, in the order their starting processes handed them in.
    pub nested: Vec<Profile>,
    /// Where each process ran, by pid: its placement (packages, NUMA nodes, cores, PUs and
    /// binding, as [`Placement`](crate::Placement) prints it), over MPI ranks with its node.
    pub places: Vec<String>,
    /// The OS indices of the PUs each process's domain holds, by pid (empty over MPI ranks,
    /// whose processes have a node each): processes with the same domain take turns on its
    /// hardware threads when they outnumber them ([`Profile::turns`]).
    pub pus: Vec<Vec<u32>>,
    /// Whether processes that shared a hardware thread took turns on it as coroutines
    /// ([`Run::coroutines`](crate::Run::coroutines)), rather than as threads the kernel
    /// switches between.
    pub coroutines: bool,
}

impl Profile {
    /// The report with `params` for this run and [`Params::for_level`] for nested runs
    /// (`package` level, matching `p`).
    pub fn report(&self, params: &Params) -> Report {
        self.report_with(params, &|p| Params::for_level("package", p))
    }

    /// The full name of region `id`, its enclosing regions' names first, joined by `/`.
    pub fn region_path(&self, id: usize) -> String {
        let mut names = Vec::new();
        let mut at = Some(id);
        while let Some(r) = at.and_then(|i| self.regions.get(i)) {
            names.push(r.name.as_str());
            at = r.parent;
        }
        names.reverse();
        names.join("/")
    }

    /// How deep region `id` is nested (a region opened outside any other: 1).
    fn region_depth(&self, id: usize) -> usize {
        let mut depth = 0;
        let mut at = Some(id);
        while let Some(r) = at.and_then(|i| self.regions.get(i)) {
            depth += 1;
            at = r.parent;
        }
        depth
    }

    /// The region superstep `i` belongs to: the innermost region every process was in when
    /// its computation ended (see the [module docs](self)).
    pub fn superstep_region(&self, i: usize) -> Option<usize> {
        let step = self.supersteps.get(i)?;
        let chain = |r: Option<usize>| {
            let mut c = Vec::new();
            let mut at = r;
            while let Some(x) = at {
                c.push(x);
                at = self.regions.get(x).and_then(|g| g.parent);
            }
            c.reverse(); // outermost first
            c
        };
        let mut common = chain(step.procs.first()?.region);
        for s in &step.procs[1..] {
            let other = chain(s.region);
            let same = common
                .iter()
                .zip(&other)
                .take_while(|(a, b)| a == b)
                .count();
            common.truncate(same);
        }
        common.last().copied()
    }

    /// The groups of processes that took turns on the same hardware threads: the pids whose
    /// domains hold the same PUs, and how many PUs that is (empty where they are not known).
    fn turn_groups(&self) -> Vec<(Vec<usize>, usize)> {
        let mut groups: Vec<(&[u32], Vec<usize>)> = Vec::new();
        for (pid, pus) in self.pus.iter().enumerate() {
            match groups.iter_mut().find(|(set, _)| *set == pus.as_slice()) {
                Some((_, pids)) => pids.push(pid),
                None => groups.push((pus, vec![pid])),
            }
        }
        groups
            .into_iter()
            .filter(|(set, _)| !set.is_empty())
            .map(|(set, pids)| (pids, set.len()))
            .collect()
    }

    /// The most processes that took turns on one hardware thread: the largest group of
    /// processes with the same domain over its PUs, rounded up; 1 where every process had a
    /// hardware thread to itself, or where the PUs are not known (runs over MPI ranks).
    ///
    /// ```
    /// // Four processes on a machine of one hardware thread take turns on it.
    /// let one = mbsp::Machine::synthetic("package:1 core:1 pu:1").unwrap();
    /// let run = mbsp::Run::new(4).machine(one);
    /// let (_, profile) = run.run_profiled(|ctx| ctx.sync())?;
    /// assert_eq!(profile.turns(), 4);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn turns(&self) -> usize {
        turns_of(&self.turn_groups())
    }

    /// The BSP prediction of superstep `s` (module documentation). Where processes took turns
    /// on shared hardware threads, each group's buffered words and requests go through its
    /// hardware threads one process after another, so the h-relation is the largest group's
    /// sum over its PUs; so is the computation, at least the slowest process's. Coroutines
    /// compute uninterrupted in their turns; threads woken one after another by the barrier
    /// mostly do too, and a thread preempted while it computes counts the others' slices in
    /// its own time, which the sum then counts twice. Measured on threads computing for
    /// microseconds, the sum predicted closer than the slowest process's alone in every run
    /// (docs/benchmarks.md, "Threads that take turns compute one after another"). The
    /// turns themselves (switches, each process's own part of the sync, more of it where the
    /// superstep communicates) cost [`Params::turns_time`].
    fn predict(&self, s: &Superstep, params: &Params, groups: &[(Vec<usize>, usize)]) -> f64 {
        // The near g even for data past the cache (not `Params::for_data`): `g_far` prices a
        // whole superstep's copies, but a buffered put's copy at the call is in w already, and
        // what is left of a large put past the cache costs about g per word.
        if turns_of(groups) <= 1 {
            return s.w() + params.time_of(1, s.h() as f64, s.requests() as f64);
        }
        let per_group = |f: &dyn Fn(&ProcStep) -> f64| {
            groups
                .iter()
                .map(|(pids, pus)| {
                    let sum: f64 = pids.iter().filter_map(|&q| s.procs.get(q)).map(f).sum();
                    sum / *pus as f64
                })
                .fold(0.0, f64::max)
        };
        let w = per_group(&|q| q.compute).max(s.w());
        let h = per_group(&|q| q.buffered_words() as f64);
        let requests = per_group(&|q| q.requests_sent.max(q.requests_received) as f64);
        let communicates = h > 0.0 || requests > 0.0;
        w + params.time_of(1, h, requests)
            + params.turns_time(turns_of(groups), self.coroutines, communicates)
    }

    /// The report with `params` for this run and `nested(p)` for the runs nested in it.
    pub fn report_with(&self, params: &Params, nested: &dyn Fn(usize) -> Params) -> Report {
        let groups = self.turn_groups();
        let rows: Vec<Row> = self
            .supersteps
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let h = s.h();
                Row {
                    superstep: i,
                    region: self.superstep_region(i),
                    w: s.w(),
                    imbalance: s.imbalance(),
                    h,
                    h_immediate: s.h_immediate(),
                    lazy: s.lazy(),
                    mean_wait: s.mean_wait(),
                    predicted: self.predict(s, params, &groups),
                    measured: s.measured(),
                }
            })
            .collect();
        // Every region's totals, sub-regions included: each row counts for its region and
        // all that enclose it.
        let mut regions: Vec<Totals> = self
            .regions
            .iter()
            .enumerate()
            .map(|(i, _)| Totals {
                name: self.region_path(i),
                depth: self.region_depth(i),
                ..Totals::default()
            })
            .collect();
        let mut outside = Totals {
            name: "(outside regions)".into(),
            ..Totals::default()
        };
        for r in &rows {
            let mut at = r.region;
            if at.is_none() {
                outside.add(r);
            }
            while let Some(i) = at {
                regions[i].add(r);
                at = self.regions[i].parent;
            }
        }
        // Shown as a tree: each region right after its parent.
        let mut order = Vec::new();
        fn visit(prof: &Profile, parent: Option<usize>, order: &mut Vec<usize>) {
            for (i, g) in prof.regions.iter().enumerate() {
                if g.parent == parent {
                    order.push(i);
                    visit(prof, Some(i), order);
                }
            }
        }
        visit(self, None, &mut order);
        let mut position = vec![0; self.regions.len()];
        for (at, &i) in order.iter().enumerate() {
            position[i] = at;
        }
        let mut regions: Vec<Totals> = order
            .into_iter()
            .map(|i| std::mem::take(&mut regions[i]))
            .collect();
        // Rows name their region as the report lists it.
        let mut rows = rows;
        for r in &mut rows {
            r.region = r.region.map(|i| position[i]);
        }
        if !regions.is_empty() && outside.supersteps > 0 {
            regions.push(outside);
        }
        let processes = (0..self.p)
            .map(|pid| {
                let mut t = ProcTotals {
                    pid,
                    place: self.places.get(pid).cloned().unwrap_or_default(),
                    ..ProcTotals::default()
                };
                for s in &self.supersteps {
                    let me = &s.procs[pid];
                    t.compute += me.compute;
                    t.sync += me.sync;
                    t.wait += s.wait(pid);
                    t.words_sent += me.words_sent;
                    t.words_received += me.words_received;
                }
                t
            })
            .collect();
        Report {
            p: self.p,
            path: self.path.clone(),
            started_in: self.started_in,
            turns: turns_of(&groups),
            coroutines: self.coroutines && turns_of(&groups) > 1,
            turn: params.turns_time(2, self.coroutines, false),
            turn_comm: if self.coroutines {
                params.turn_comm_coroutine
            } else {
                params.turn_comm
            },
            g: params.g,
            l: params.l,
            rows,
            regions,
            processes,
            nested: self
                .nested
                .iter()
                .map(|n| n.report_with(&nested(n.p), nested))
                .collect(),
        }
    }
}

/// The most processes per hardware thread over `groups` ([`Profile::turns`]).
fn turns_of(groups: &[(Vec<usize>, usize)]) -> usize {
    groups
        .iter()
        .map(|(pids, pus)| pids.len().div_ceil((*pus).max(1)))
        .max()
        .unwrap_or(1)
}

/// `text` to `path` through a temporary file in the same directory, renamed into place.
fn write_whole(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp{}", std::process::id()));
    let tmp = path.with_file_name(name);
    let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Whether `MBSP_PROFILE` asks for the reports of top-level runs.
pub(crate) fn env_on() -> bool {
    *env_request() != EnvRequest::Off
}

/// The report of a top-level run for `MBSP_PROFILE`: on stderr, or as JSON or the timeline
/// to the file.
pub(crate) fn emit(profile: &Profile) {
    let (path, written) = match env_request() {
        EnvRequest::Off => return,
        EnvRequest::Text(detail) => {
            let report = profile.report(Params::current());
            eprintln!(
                "mbsp profile: {}mbsp profile: BSP parameters: {}",
                report.text(*detail),
                crate::params::source()
            );
            return;
        }
        EnvRequest::Json(path) => {
            let report = profile.report(Params::current());
            (path, write_whole(path, &report.to_json()))
        }
        EnvRequest::Svg(path) => (path, profile.write_svg(path)),
    };
    if let Err(e) = written {
        eprintln!("mbsp: {PROFILE_ENV}={}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_variable() {
        let p = |s: &str| parse_env(Some(std::ffi::OsStr::new(s)));
        assert_eq!(parse_env(None), EnvRequest::Off);
        assert_eq!(p(""), EnvRequest::Off);
        assert_eq!(p("0"), EnvRequest::Off);
        assert_eq!(p("1"), EnvRequest::Text(Detail::Summary));
        assert_eq!(p("yes"), EnvRequest::Text(Detail::Summary));
        assert_eq!(p("full"), EnvRequest::Text(Detail::Full));
        assert_eq!(p("FULL"), EnvRequest::Text(Detail::Full));
        assert_eq!(p("out/run.json"), EnvRequest::Json("out/run.json".into()));
        assert_eq!(p("t.svg"), EnvRequest::Svg("t.svg".into()));
    }
}
