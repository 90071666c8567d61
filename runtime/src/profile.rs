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
//! over the mean) and the BSP prediction `w + h·g + l` — the measured computation plus the
//! communication and synchronisation the parameters predict — beside the measured time (the
//! largest compute + sync of any process). Nested runs are reported level by level, each with
//! the parameters of its level ([`Params::for_level`]).
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
//! programs get it through the C ABI too); `MBSP_PROFILE=FILE.json` writes the JSON report of
//! the last top-level run to `FILE.json`, and `MBSP_PROFILE=FILE.svg` its timeline
//! ([`Profile::timeline_svg`]), both whole: through a temporary file renamed into place. The
//! timeline is drawn by this module (plain SVG text, no plotting library), so a program that
//! sets the variable — a C program included — gets it with no other tool.
//! The predictions use [`Params::current`]: `MBSP_PARAMS`, else the parameters `mbsp params
//! --save` stored for this machine, else the defaults (the report says which).

use crate::params::{Params, judge_prediction};
use std::fmt;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// The environment variable that turns profiling on for every run (`1`: text report on
/// stderr; a path ending in `.json`: the JSON report there; ending in `.svg`: the timeline
/// there; `0` or empty: off).
pub const PROFILE_ENV: &str = "MBSP_PROFILE";

/// What `MBSP_PROFILE` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum EnvRequest {
    Off,
    Text,
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
        Some(_) => EnvRequest::Text,
    }
}

/// What one process sent to and read from one other process in one superstep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Peer {
    /// Bytes, words and messages put or sent to it.
    pub(crate) out_bytes: u64,
    pub(crate) out_words: u64,
    pub(crate) out_msgs: u64,
    /// Bytes and words read from it (gets).
    pub(crate) in_bytes: u64,
    pub(crate) in_words: u64,
    /// The words of those that were copied at once (hpput; hpget and direct_get).
    pub(crate) imm_out_words: u64,
    pub(crate) imm_in_words: u64,
}

/// One process's record of one superstep: the range of the recorder's `peers` that holds the
/// peers it communicated with (one growing list for all supersteps: no allocation per step).
#[derive(Clone, Debug)]
pub(crate) struct Step {
    pub(crate) compute: f64,
    pub(crate) sync: f64,
    pub(crate) peers: std::ops::Range<usize>,
    /// The region innermost-open when the computation ended (index into `Recorder::regions`).
    pub(crate) region: Option<u32>,
}

/// The recorder in a profiled process's context.
#[derive(Debug)]
pub(crate) struct Recorder {
    pub(crate) pid: usize,
    pub(crate) p: usize,
    pub(crate) last: Instant,
    pub(crate) sync_start: Option<Instant>,
    /// This superstep's counts per peer (reused), and the peers touched (maybe repeated).
    pub(crate) cur: Vec<Peer>,
    pub(crate) touched: Vec<usize>,
    /// The peers of all closed supersteps, in order.
    pub(crate) peers: Vec<(usize, Peer)>,
    pub(crate) steps: Vec<Step>,
    /// Profiles of the nested runs this process started.
    pub(crate) nested: Vec<Profile>,
    /// The regions this process opened: (parent, name), each (parent, name) once.
    pub(crate) regions: Vec<(Option<u32>, String)>,
    /// The regions open now, innermost last.
    pub(crate) open: Vec<u32>,
}

impl Recorder {
    pub(crate) fn new(pid: usize, p: usize) -> Recorder {
        Recorder {
            pid,
            p,
            last: Instant::now(),
            sync_start: None,
            cur: vec![Peer::default(); p],
            touched: Vec::new(),
            peers: Vec::new(),
            steps: Vec::new(),
            nested: Vec::new(),
            regions: Vec::new(),
            open: Vec::new(),
        }
    }

    /// Region `name` opens inside the innermost open one.
    pub(crate) fn region_begin(&mut self, name: &str) {
        let parent = self.open.last().copied();
        let id = match self
            .regions
            .iter()
            .position(|(p, n)| *p == parent && n == name)
        {
            Some(i) => i as u32,
            None => {
                self.regions.push((parent, name.to_string()));
                (self.regions.len() - 1) as u32
            }
        };
        self.open.push(id);
    }

    /// The innermost open region closes.
    pub(crate) fn region_end(&mut self) {
        self.open.pop();
    }

    /// Close the regions opened after the first `depth` ones.
    pub(crate) fn close_to(&mut self, depth: usize) {
        self.open.truncate(depth);
    }

    /// A put or message of `bytes` to `to` (`immediate`: copied now, not by the sync).
    #[inline]
    pub(crate) fn out(&mut self, to: usize, bytes: usize, message: bool, immediate: bool) {
        if to != self.pid && to < self.p {
            let words = bytes.div_ceil(8) as u64;
            let c = self.peer(to);
            c.out_bytes += bytes as u64;
            c.out_words += words;
            c.out_msgs += u64::from(message);
            if immediate {
                c.imm_out_words += words;
            }
        }
    }

    /// A get of `bytes` from `from` (`immediate`: copied now, not by the sync).
    #[inline]
    pub(crate) fn get(&mut self, from: usize, bytes: usize, immediate: bool) {
        if from != self.pid && from < self.p {
            let words = bytes.div_ceil(8) as u64;
            let c = self.peer(from);
            c.in_bytes += bytes as u64;
            c.in_words += words;
            if immediate {
                c.imm_in_words += words;
            }
        }
    }

    /// The counts of peer `q`, remembered as touched when they were zero.
    #[inline]
    fn peer(&mut self, q: usize) -> &mut Peer {
        if self.cur[q] == Peer::default() {
            self.touched.push(q);
        }
        &mut self.cur[q]
    }

    /// The sync starts: the superstep's computation ends.
    pub(crate) fn sync_begins(&mut self) {
        self.sync_start = Some(Instant::now());
    }

    /// The sync is over (successfully or not): close the superstep.
    pub(crate) fn sync_ends(&mut self) {
        let now = Instant::now();
        let start = self.sync_start.take().unwrap_or(now);
        let region = self.open.last().copied();
        let first = self.peers.len();
        for q in self.touched.drain(..) {
            // A peer touched twice (counts that stayed zero) is taken once.
            let c = std::mem::take(&mut self.cur[q]);
            if c != Peer::default() {
                self.peers.push((q, c));
            }
        }
        self.steps.push(Step {
            compute: start.duration_since(self.last).as_secs_f64(),
            sync: now.duration_since(start).as_secs_f64(),
            peers: first..self.peers.len(),
            region,
        });
        self.last = now;
    }

    /// A nested run this process started has ended.
    pub(crate) fn add_nested(&mut self, profile: Profile) {
        self.nested.push(profile);
    }
}

impl crate::Ctx {
    /// Run `f` as the region `name` of the profile: the supersteps whose sync begins inside
    /// it are counted for it (and for the regions around it) in the profile's report. Regions
    /// nest; see the [profile module](crate::profile) for how supersteps are attributed. Not
    /// profiled, it just runs `f`. The region ends when `f` returns, also regions `f` began
    /// and did not end.
    ///
    /// ```
    /// let (_, profile) = mbsp::Run::new(2).run_profiled(|ctx| {
    ///     ctx.region("solve", |ctx| {
    ///         for _ in 0..3 {
    ///             ctx.region("halo", |ctx| ctx.sync())?;
    ///         }
    ///         ctx.sync()
    ///     })
    /// })?;
    /// let report = profile.report(&mbsp::params::Params::DEFAULT);
    /// let names: Vec<_> = report.regions.iter().map(|t| (t.name.as_str(), t.supersteps)).collect();
    /// assert_eq!(names, [("solve", 4), ("solve/halo", 3), ("(outside regions)", 1)]);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn region<R>(&mut self, name: &str, f: impl FnOnce(&mut crate::Ctx) -> R) -> R {
        let depth = self.regions_open;
        self.open_region(name);
        let r = f(self);
        self.regions_open = depth;
        if let Some(rec) = &self.prof {
            rec.borrow_mut().close_to(depth);
        }
        r
    }

    /// Begin the region `name` (see [`Ctx::region`](crate::Ctx::region), which ends it for you); end it with
    /// [`Ctx::region_end`](crate::Ctx::region_end). For code whose regions do not fit a closure (the C ABI's
    /// `mbsp_region_begin`). Regions still open when the process ends are closed then.
    ///
    /// ```
    /// mbsp::run(2, |ctx| {
    ///     ctx.region_begin("step");
    ///     ctx.sync()?;
    ///     ctx.region_end()
    /// })?;
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn region_begin(&mut self, name: &str) {
        self.open_region(name);
    }

    fn open_region(&mut self, name: &str) {
        self.regions_open += 1;
        if let Some(rec) = &self.prof {
            rec.borrow_mut().region_begin(name);
        }
    }

    /// End the innermost region begun by [`Ctx::region_begin`](crate::Ctx::region_begin). Ending a region when none is
    /// open is a misuse (the run fails with an error naming this process and superstep).
    ///
    /// ```
    /// let e = mbsp::run(1, |ctx| ctx.region_end()).unwrap_err();
    /// assert!(e.to_string().contains("no region is open"), "{e}");
    /// ```
    pub fn region_end(&mut self) -> crate::Result<()> {
        if self.regions_open == 0 {
            return Err(self.misuse(
                "region_end",
                "no region is open (every region_end needs a region_begin before it)".into(),
            ));
        }
        self.regions_open -= 1;
        if let Some(rec) = &self.prof {
            rec.borrow_mut().region_end();
        }
        Ok(())
    }
}

/// What a run's processes hand in at their end, assembled into a [`Profile`].
#[derive(Debug, Default)]
pub(crate) struct Sink {
    pub(crate) records: Mutex<Vec<Recorder>>,
}

impl Sink {
    pub(crate) fn hand_in(&self, r: Recorder) {
        if let Ok(mut v) = self.records.lock() {
            v.push(r);
        }
    }

    /// The profile of the run of `p` processes started by the process at `path`.
    pub(crate) fn take(&self, p: usize, path: Vec<usize>) -> Profile {
        let mut recs = self
            .records
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default();
        recs.sort_by_key(|r| r.pid);
        // One region table for the run: every process's (parent, name) pairs merged.
        let mut regions: Vec<RegionName> = Vec::new();
        let maps: Vec<Vec<usize>> = recs
            .iter()
            .map(|r| {
                let mut map: Vec<usize> = Vec::with_capacity(r.regions.len());
                for (parent, name) in &r.regions {
                    // A process's parents come before their children.
                    let parent = parent.map(|q| map[q as usize]);
                    let id = regions
                        .iter()
                        .position(|g| g.parent == parent && g.name == *name)
                        .unwrap_or_else(|| {
                            regions.push(RegionName {
                                name: name.clone(),
                                parent,
                            });
                            regions.len() - 1
                        });
                    map.push(id);
                }
                map
            })
            .collect();
        let steps = recs.iter().map(|r| r.steps.len()).max().unwrap_or(0);
        let mut supersteps = Vec::with_capacity(steps);
        for i in 0..steps {
            let mut procs = vec![ProcStep::default(); p];
            for (r, map) in recs.iter().zip(&maps) {
                let Some(s) = r.steps.get(i) else { continue };
                let me = &mut procs[r.pid];
                me.compute = s.compute;
                me.sync = s.sync;
                me.region = s.region.map(|q| map[q as usize]);
                for (_, c) in &r.peers[s.peers.clone()] {
                    me.add(c, true);
                }
            }
            // The other side of each request.
            for r in &recs {
                let Some(s) = r.steps.get(i) else { continue };
                for (q, c) in &r.peers[s.peers.clone()] {
                    procs[*q].add(c, false);
                }
            }
            supersteps.push(Superstep { procs });
        }
        let mut nested: Vec<Profile> = Vec::new();
        for r in recs {
            nested.extend(r.nested);
        }
        Profile {
            p,
            path,
            supersteps,
            regions,
            nested,
        }
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
    /// The region innermost-open in this process when its computation ended (an index into
    /// [`Profile::regions`]).
    pub region: Option<usize>,
}

/// One superstep of a run: a record per process.
#[derive(Clone, Debug, PartialEq)]
pub struct Superstep {
    /// Indexed by pid.
    pub procs: Vec<ProcStep>,
}

impl ProcStep {
    /// Counts `c`, the requests of one process to one peer, on the side of the process that
    /// made them (`requester`) or on the peer's.
    fn add(&mut self, c: &Peer, requester: bool) {
        // (bytes, words, immediate words) leaving and reaching the requester.
        let out = (c.out_bytes, c.out_words, c.imm_out_words);
        let inn = (c.in_bytes, c.in_words, c.imm_in_words);
        let (sent, received) = if requester { (out, inn) } else { (inn, out) };
        self.bytes_sent += sent.0;
        self.words_sent += sent.1;
        self.immediate_words_sent += sent.2;
        self.bytes_received += received.0;
        self.words_received += received.1;
        self.immediate_words_received += received.2;
        if requester {
            self.messages_sent += c.out_msgs;
        } else {
            self.messages_received += c.out_msgs;
        }
    }
}

impl Superstep {
    /// The h of the h-relation the sync carries: the largest number of words any process sent
    /// or received, leaving out those copied at once.
    pub fn h(&self) -> u64 {
        self.procs
            .iter()
            .map(|s| {
                (s.words_sent - s.immediate_words_sent)
                    .max(s.words_received - s.immediate_words_received)
            })
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
    /// In order; the last one runs from the last sync to the end of the SPMD function.
    pub supersteps: Vec<Superstep>,
    /// The regions any process opened; a region's parent comes before it.
    pub regions: Vec<RegionName>,
    /// The runs nested in this one, in the order their starting processes handed them in.
    pub nested: Vec<Profile>,
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

    /// The report with `params` for this run and `nested(p)` for the runs nested in it.
    pub fn report_with(&self, params: &Params, nested: &dyn Fn(usize) -> Params) -> Report {
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
                    mean_wait: s.mean_wait(),
                    predicted: s.w() + h as f64 * params.g + params.l,
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

    /// The timeline of this run as an SVG picture: one lane per process, each superstep drawn
    /// as its computation, then its wait for the others, then the sync's own work (see the
    /// [module docs](self)), in the superstep's slot of the measured time; region names above
    /// the supersteps where a region starts. Runs nested in it are not drawn.
    ///
    /// ```
    /// let (_, profile) = mbsp::Run::new(2).run_profiled(|ctx| ctx.sync())?;
    /// let svg = profile.timeline_svg();
    /// assert!(svg.starts_with("<svg") && svg.contains("pid 1"));
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn timeline_svg(&self) -> String {
        use std::fmt::Write as _;
        // Very long runs are drawn in part: a picture of more boxes than this is unreadable
        // and slow to open.
        const MAX_BOXES: usize = 60_000;
        let shown = (MAX_BOXES / (3 * self.p.max(1))).clamp(1, self.supersteps.len().max(1));
        let steps = &self.supersteps[..shown.min(self.supersteps.len())];
        let total: f64 = steps.iter().map(Superstep::measured).sum();
        let (left, top, lane, width) = (70.0, 40.0, 22.0, 1000.0);
        let scale = if total > 0.0 { width / total } else { 0.0 };
        let height = top + lane * self.p as f64 + 40.0;
        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{height}" font-family="sans-serif" font-size="11">"#,
            left + width + 20.0
        );
        let _ = writeln!(
            out,
            r#"<text x="{left}" y="14">mbsp profile: p = {}, {} of {} supersteps, {} (compute: blue, wait: orange, sync work: grey)</text>"#,
            self.p,
            steps.len(),
            self.supersteps.len(),
            xml(&secs(total))
        );
        for pid in 0..self.p {
            let y = top + lane * pid as f64;
            let _ = writeln!(
                out,
                r#"<text x="4" y="{}">pid {pid}</text>"#,
                y + lane * 0.65
            );
        }
        let mut t0 = 0.0;
        let mut last_region = None;
        for (i, s) in steps.iter().enumerate() {
            let region = self.superstep_region(i);
            if region.is_some() && region != last_region {
                let name = self.region_path(region.unwrap_or(0));
                let x = left + t0 * scale;
                let _ = writeln!(
                    out,
                    r#"<line x1="{x:.2}" y1="{}" x2="{x:.2}" y2="{}" stroke="black" stroke-dasharray="2,2"/><text x="{:.2}" y="{}">{}</text>"#,
                    top - 12.0,
                    top + lane * self.p as f64,
                    x + 2.0,
                    top - 4.0,
                    xml(&name)
                );
            }
            last_region = region;
            for (pid, me) in s.procs.iter().enumerate() {
                let y = top + lane * pid as f64 + 2.0;
                let wait = s.wait(pid);
                let mut x = left + t0 * scale;
                for (len, colour, what) in [
                    (me.compute, "#4477aa", "compute"),
                    (wait, "#ee8833", "wait"),
                    (me.sync - wait, "#999999", "sync work"),
                ] {
                    let w = len.max(0.0) * scale;
                    if w > 0.0 {
                        let _ = writeln!(
                            out,
                            r#"<rect x="{x:.3}" y="{y}" width="{w:.3}" height="{}" fill="{colour}"><title>superstep {i}, pid {pid}: {what} {}</title></rect>"#,
                            lane - 4.0,
                            xml(&secs(len))
                        );
                    }
                    x += w;
                }
            }
            t0 += s.measured();
        }
        let _ = writeln!(
            out,
            r#"<text x="{left}" y="{}">0</text><text x="{}" y="{}" text-anchor="end">{}</text>"#,
            height - 14.0,
            left + width,
            height - 14.0,
            xml(&secs(total))
        );
        out.push_str("</svg>\n");
        out
    }

    /// Write [`timeline_svg`](Self::timeline_svg) to `path`, whole (through a temporary file
    /// renamed into place).
    ///
    /// ```
    /// let (_, profile) = mbsp::Run::new(2).run_profiled(|ctx| ctx.sync())?;
    /// let path = std::env::temp_dir().join(format!("mbsp-doc-{}.svg", std::process::id()));
    /// profile.write_svg(&path).unwrap();
    /// assert!(std::fs::read_to_string(&path).unwrap().contains("</svg>"));
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn write_svg(&self, path: impl AsRef<std::path::Path>) -> std::io::Result<()> {
        write_whole(path.as_ref(), &self.timeline_svg())
    }
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

/// `text` with XML's special characters escaped.
fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One superstep of a [`Report`].
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Its number.
    pub superstep: usize,
    /// Its region ([`Profile::superstep_region`]), as an index into [`Report::regions`].
    pub region: Option<usize>,
    /// The largest computation time, seconds.
    pub w: f64,
    /// Largest computation time over the mean.
    pub imbalance: f64,
    /// Words of the h-relation the sync carries.
    pub h: u64,
    /// Words copied at once during the computation (their time is in `w`).
    pub h_immediate: u64,
    /// The processes' mean wait for the others in the sync ([`Superstep::wait`]), seconds.
    pub mean_wait: f64,
    /// `w + h·g + l`, seconds.
    pub predicted: f64,
    /// The largest computation + sync time of any process, seconds.
    pub measured: f64,
}

/// Totals over a set of supersteps: a region's, a level's, or a whole run's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Totals {
    /// The region's full name (`outer/inner`), `(outside regions)`, or the level's name.
    pub name: String,
    /// Nesting depth: of a region (1 = outside any other; 0 for "(outside regions)"), or of a
    /// run (0 = the top-level run).
    pub depth: usize,
    /// Supersteps.
    pub supersteps: usize,
    /// Sum of the supersteps' w, seconds.
    pub w: f64,
    /// Sum of the supersteps' h, words.
    pub h: u64,
    /// Sum of the supersteps' mean wait, seconds.
    pub wait: f64,
    /// Sum of the measured times, seconds.
    pub measured: f64,
    /// Sum of the predicted times, seconds.
    pub predicted: f64,
}

impl Totals {
    fn add(&mut self, r: &Row) {
        self.supersteps += 1;
        self.w += r.w;
        self.h += r.h;
        self.wait += r.mean_wait;
        self.measured += r.measured;
        self.predicted += r.predicted;
    }

    fn merge(&mut self, o: &Totals) {
        self.supersteps += o.supersteps;
        self.w += o.w;
        self.h += o.h;
        self.wait += o.wait;
        self.measured += o.measured;
        self.predicted += o.predicted;
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name, "depth": self.depth, "supersteps": self.supersteps,
            "w": self.w, "h": self.h, "mean_wait": self.wait,
            "measured": self.measured, "predicted": self.predicted,
        })
    }
}

/// One process's totals over a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcTotals {
    /// The process.
    pub pid: usize,
    /// Seconds computing.
    pub compute: f64,
    /// Seconds in syncs.
    pub sync: f64,
    /// The part of [`sync`](Self::sync) spent waiting for the others ([`Superstep::wait`]).
    pub wait: f64,
    /// Words sent ([`ProcStep::words_sent`], summed).
    pub words_sent: u64,
    /// Words received.
    pub words_received: u64,
}

/// A profile against the BSP cost model: per superstep, per region and per process the
/// measured and the predicted time (text with `Display`, JSON with [`Report::to_json`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Processes.
    pub p: usize,
    /// Where the run was started (empty: top level).
    pub path: Vec<usize>,
    /// The `g` used, seconds per word.
    pub g: f64,
    /// The `l` used, seconds.
    pub l: f64,
    /// One per superstep.
    pub rows: Vec<Row>,
    /// One per region, each after its parent, sub-regions' supersteps included; then the
    /// supersteps outside any region (when there are regions and such supersteps).
    pub regions: Vec<Totals>,
    /// One per process.
    pub processes: Vec<ProcTotals>,
    /// The nested runs' reports.
    pub nested: Vec<Report>,
}

impl Report {
    /// Total measured and predicted seconds.
    pub fn totals(&self) -> (f64, f64) {
        self.rows
            .iter()
            .fold((0.0, 0.0), |(m, p), r| (m + r.measured, p + r.predicted))
    }

    /// Totals of this run's supersteps.
    pub fn run_totals(&self) -> Totals {
        let mut t = Totals {
            name: "run".into(),
            ..Totals::default()
        };
        for r in &self.rows {
            t.add(r);
        }
        t
    }

    /// Totals per level of run nesting: this run (depth 0), then all runs nested in it
    /// (depth 1), in those (depth 2), and so on; `name` says how many runs each level has.
    ///
    /// ```
    /// let (_, profile) = mbsp::Run::new(2).run_profiled(|ctx| {
    ///     ctx.run(2, |inner| inner.sync())?;
    ///     ctx.sync()
    /// })?;
    /// let levels = profile.report(&mbsp::params::Params::DEFAULT).levels();
    /// assert_eq!(levels.len(), 2);
    /// assert_eq!(levels[1].name, "2 runs nested 1 deep");
    /// assert_eq!(levels[1].supersteps, 4); // two supersteps in each of two nested runs
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn levels(&self) -> Vec<Totals> {
        let mut levels: Vec<(usize, Totals)> = Vec::new();
        fn walk(r: &Report, depth: usize, levels: &mut Vec<(usize, Totals)>) {
            if levels.len() <= depth {
                levels.push((0, Totals::default()));
            }
            levels[depth].0 += 1;
            levels[depth].1.merge(&r.run_totals());
            for n in &r.nested {
                walk(n, depth + 1, levels);
            }
        }
        walk(self, 0, &mut levels);
        levels
            .into_iter()
            .enumerate()
            .map(|(depth, (runs, mut t))| {
                t.depth = depth;
                t.name = match (depth, runs) {
                    (0, _) => "this run".into(),
                    (d, 1) => format!("1 run nested {d} deep"),
                    (d, n) => format!("{n} runs nested {d} deep"),
                };
                t
            })
            .collect()
    }

    /// The report as JSON (nested runs under `"nested"`).
    pub fn to_json(&self) -> String {
        self.json(true).to_string()
    }

    fn json(&self, top: bool) -> serde_json::Value {
        let (measured, predicted) = self.totals();
        let mut v = serde_json::json!({
            "p": self.p,
            "path": self.path,
            "g": self.g,
            "l": self.l,
            "measured_seconds": measured,
            "predicted_seconds": predicted,
            "supersteps": self.rows.iter().map(|r| serde_json::json!({
                "superstep": r.superstep, "region": r.region.map(|i| self.region_name(i)),
                "w": r.w, "imbalance": r.imbalance, "h": r.h,
                "h_immediate": r.h_immediate, "mean_wait": r.mean_wait,
                "predicted": r.predicted, "measured": r.measured,
            })).collect::<Vec<_>>(),
            "regions": self.regions.iter().map(Totals::json).collect::<Vec<_>>(),
            "processes": self.processes.iter().map(|t| serde_json::json!({
                "pid": t.pid, "compute": t.compute, "sync": t.sync, "wait": t.wait,
                "words_sent": t.words_sent, "words_received": t.words_received,
            })).collect::<Vec<_>>(),
            "nested": self.nested.iter().map(|n| n.json(false)).collect::<Vec<_>>(),
        });
        if top {
            v["levels"] = self.levels().iter().map(Totals::json).collect();
        }
        v
    }

    /// The full name of region `i` ([`Row::region`]).
    fn region_name(&self, i: usize) -> String {
        self.regions
            .get(i)
            .map_or_else(String::new, |t| t.name.clone())
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, depth: usize) -> fmt::Result {
        let pad = "  ".repeat(depth);
        let (measured, predicted) = self.totals();
        let whom = if self.path.is_empty() {
            "top-level run".to_string()
        } else {
            let path: Vec<String> = self.path.iter().map(usize::to_string).collect();
            format!("run nested in process {}", path.join("/"))
        };
        writeln!(
            f,
            "{pad}{whom}: p = {}, {} supersteps, measured {}, BSP-predicted {} ({}) (g = {:.2} ns/word, l = {:.2} µs)",
            self.p,
            self.rows.len(),
            secs(measured),
            secs(predicted),
            judge_prediction(measured, predicted),
            self.g * 1e9,
            self.l * 1e6
        )?;
        if !self.regions.is_empty() {
            writeln!(
                f,
                "{pad}  regions (a superstep counts for the region open when its sync began, and for the regions around it):"
            )?;
            totals_table(f, &pad, "region", &self.regions)?;
        }
        writeln!(
            f,
            "{pad}  processes (wait: time in syncs waiting for slower processes):"
        )?;
        writeln!(
            f,
            "{pad}  {:>9} {:>11} {:>11} {:>11} {:>12} {:>14}",
            "pid", "compute", "in syncs", "wait", "words sent", "words received"
        )?;
        // Hundreds of processes: those that waited least and most.
        const SHOW_PROCS: usize = 32;
        let mut procs: Vec<&ProcTotals> = self.processes.iter().collect();
        if procs.len() > SHOW_PROCS {
            procs.sort_by(|a, b| a.wait.total_cmp(&b.wait));
            procs.drain(SHOW_PROCS / 2..procs.len() - SHOW_PROCS / 2);
        }
        for t in &procs {
            writeln!(
                f,
                "{pad}  {:>9} {:>11} {:>11} {:>11} {:>12} {:>14}",
                t.pid,
                secs(t.compute),
                secs(t.sync),
                secs(t.wait),
                t.words_sent,
                t.words_received
            )?;
        }
        if self.processes.len() > procs.len() {
            writeln!(
                f,
                "{pad}  ... {} more processes (the {} that waited least and most are shown; the JSON has all)",
                self.processes.len() - procs.len(),
                SHOW_PROCS
            )?;
        }
        writeln!(
            f,
            "{pad}  {:>9} {:>11} {:>9} {:>9} {:>9} {:>11} {:>11} {:>11} {:>7}  region",
            "superstep",
            "w",
            "imbal.",
            "h words",
            "h imm.",
            "mean wait",
            "measured",
            "predicted",
            "pred/m"
        )?;
        // Thousands of supersteps: the first ones, the largest ones, and a summary.
        const SHOW: usize = 20;
        let mut shown: Vec<&Row> = self.rows.iter().take(SHOW).collect();
        if self.rows.len() > SHOW {
            let mut rest: Vec<&Row> = self.rows[SHOW..].iter().collect();
            rest.sort_by(|a, b| b.measured.total_cmp(&a.measured));
            shown.extend(rest.into_iter().take(5));
        }
        for r in &shown {
            writeln!(
                f,
                "{pad}  {:>9} {:>11} {:>9.2} {:>9} {:>9} {:>11} {:>11} {:>11} {:>7.2}  {}",
                r.superstep,
                secs(r.w),
                r.imbalance,
                r.h,
                r.h_immediate,
                secs(r.mean_wait),
                secs(r.measured),
                secs(r.predicted),
                r.predicted / r.measured,
                r.region.map_or(String::new(), |i| self.region_name(i))
            )?;
        }
        if self.rows.len() > shown.len() {
            writeln!(
                f,
                "{pad}  ... {} more supersteps (the first {SHOW} and the 5 longest of the rest are shown)",
                self.rows.len() - shown.len()
            )?;
        }
        for n in &self.nested {
            n.write(f, depth + 1)?;
        }
        if depth == 0 && !self.nested.is_empty() {
            writeln!(f, "per level of nesting:")?;
            totals_table(f, "", "level", &self.levels())?;
        }
        Ok(())
    }
}

/// How far a prediction is off, in a table: the percentage, flagged beyond 50% (the report's
/// first line says what to do).
fn short_judgement(measured: f64, predicted: f64) -> String {
    if measured.is_nan() || measured <= 0.0 {
        return String::new();
    }
    let off = (predicted - measured) / measured;
    if off.abs() > 0.5 {
        format!("{:+.0}% off by more than 50%", 100.0 * off)
    } else {
        format!("{:+.0}%", 100.0 * off)
    }
}

/// Rows of totals (regions or levels), indented by their depth.
fn totals_table(f: &mut fmt::Formatter<'_>, pad: &str, what: &str, rows: &[Totals]) -> fmt::Result {
    writeln!(
        f,
        "{pad}  {:<28} {:>10} {:>11} {:>9} {:>11} {:>11} {:>11}  prediction",
        what, "supersteps", "w", "h words", "mean wait", "measured", "predicted"
    )?;
    for t in rows {
        let indent = "  ".repeat(t.depth.saturating_sub(1));
        let name = t.name.rsplit('/').next().unwrap_or(&t.name);
        let name = if what == "region" {
            format!("{indent}{name}")
        } else {
            t.name.clone()
        };
        writeln!(
            f,
            "{pad}  {:<28} {:>10} {:>11} {:>9} {:>11} {:>11} {:>11}  {}",
            name,
            t.supersteps,
            secs(t.w),
            t.h,
            secs(t.wait),
            secs(t.measured),
            secs(t.predicted),
            short_judgement(t.measured, t.predicted)
        )?;
    }
    Ok(())
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, 0)
    }
}

/// Seconds compactly.
fn secs(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.2} µs", s * 1e6)
    }
}

/// The report of a top-level run for `MBSP_PROFILE`: on stderr, or as JSON or the timeline
/// to the file.
pub(crate) fn emit(profile: &Profile) {
    let report = profile.report(Params::current());
    let (path, written) = match env_request() {
        EnvRequest::Off => return,
        EnvRequest::Text => {
            eprintln!(
                "mbsp profile: {report}mbsp profile: BSP parameters: {}",
                crate::params::source()
            );
            return;
        }
        EnvRequest::Json(path) => (path, write_whole(path, &report.to_json())),
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
        assert_eq!(p("1"), EnvRequest::Text);
        assert_eq!(p("yes"), EnvRequest::Text);
        assert_eq!(p("out/run.json"), EnvRequest::Json("out/run.json".into()));
        assert_eq!(p("t.svg"), EnvRequest::Svg("t.svg".into()));
    }
}
