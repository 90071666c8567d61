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
//! `MBSP_PROFILE=1` prints the report of every top-level run to stderr when it ends (so C
//! programs get it through the C ABI too); `MBSP_PROFILE=FILE.json` writes the JSON report of
//! the last top-level run to `FILE.json` (whole: through a temporary file renamed into place).

use crate::params::Params;
use std::fmt;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// The environment variable that turns profiling on for every run (`1`: text report on
/// stderr; a path ending in `.json`: the JSON report there; `0` or empty: off).
pub const PROFILE_ENV: &str = "MBSP_PROFILE";

/// What `MBSP_PROFILE` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum EnvRequest {
    Off,
    Text,
    Json(std::path::PathBuf),
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
        }
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
        });
        self.last = now;
    }

    /// A nested run this process started has ended.
    pub(crate) fn add_nested(&mut self, profile: Profile) {
        self.nested.push(profile);
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
        let steps = recs.iter().map(|r| r.steps.len()).max().unwrap_or(0);
        let mut supersteps = Vec::with_capacity(steps);
        for i in 0..steps {
            let mut procs = vec![ProcStep::default(); p];
            for r in &recs {
                let Some(s) = r.steps.get(i) else { continue };
                let me = &mut procs[r.pid];
                me.compute = s.compute;
                me.sync = s.sync;
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
            nested,
        }
    }
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

    /// Largest computation time over the mean (1 = balanced).
    pub fn imbalance(&self) -> f64 {
        let mean =
            self.procs.iter().map(|s| s.compute).sum::<f64>() / self.procs.len().max(1) as f64;
        if mean > 0.0 { self.w() / mean } else { 1.0 }
    }
}

/// The profile of one run: its supersteps, and the profiles of the runs nested in it.
///
/// ```
/// let (sums, profile) = mbsp::Run::new(2).profile(true).run_profiled(|ctx| {
///     let x = ctx.push_reg(vec![0u64; 4])?;
///     ctx.sync()?;
///     let other = 1 - ctx.pid();
///     ctx.put(other, &[1u64, 2, 3], &x, 0)?; // 3 words to the other process
///     ctx.sync()?;
///     Ok(ctx.local(&x)?.iter().sum::<u64>())
/// })?;
/// assert_eq!(sums, vec![6, 6]);
/// assert_eq!(profile.supersteps.len(), 3); // two syncs, then the end
/// assert_eq!(profile.supersteps[1].h(), 3);
/// let report = profile.report(&mbsp::params::Params::DEFAULT);
/// assert!(report.to_string().contains("superstep"));
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
    /// The runs nested in this one, in the order their starting processes handed them in.
    pub nested: Vec<Profile>,
}

impl Profile {
    /// The report with `params` for this run and [`Params::for_level`] for nested runs
    /// (`package` level, matching `p`).
    pub fn report(&self, params: &Params) -> Report {
        self.report_with(params, &|p| Params::for_level("package", p))
    }

    /// The report with `params` for this run and `nested(p)` for the runs nested in it.
    pub fn report_with(&self, params: &Params, nested: &dyn Fn(usize) -> Params) -> Report {
        let rows = self
            .supersteps
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let h = s.h();
                Row {
                    superstep: i,
                    w: s.w(),
                    imbalance: s.imbalance(),
                    h,
                    h_immediate: s.h_immediate(),
                    predicted: s.w() + h as f64 * params.g + params.l,
                    measured: s.measured(),
                }
            })
            .collect();
        Report {
            p: self.p,
            path: self.path.clone(),
            g: params.g,
            l: params.l,
            rows,
            nested: self
                .nested
                .iter()
                .map(|n| n.report_with(&nested(n.p), nested))
                .collect(),
        }
    }
}

/// One superstep of a [`Report`].
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Its number.
    pub superstep: usize,
    /// The largest computation time, seconds.
    pub w: f64,
    /// Largest computation time over the mean.
    pub imbalance: f64,
    /// Words of the h-relation the sync carries.
    pub h: u64,
    /// Words copied at once during the computation (their time is in `w`).
    pub h_immediate: u64,
    /// `w + h·g + l`, seconds.
    pub predicted: f64,
    /// The largest computation + sync time of any process, seconds.
    pub measured: f64,
}

/// A profile against the BSP cost model: per superstep the measured and the predicted time
/// (text with `Display`, JSON with [`Report::to_json`]).
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

    /// The report as JSON (nested runs under `"nested"`).
    pub fn to_json(&self) -> String {
        self.json().to_string()
    }

    fn json(&self) -> serde_json::Value {
        let (measured, predicted) = self.totals();
        serde_json::json!({
            "p": self.p,
            "path": self.path,
            "g": self.g,
            "l": self.l,
            "measured_seconds": measured,
            "predicted_seconds": predicted,
            "supersteps": self.rows.iter().map(|r| serde_json::json!({
                "superstep": r.superstep, "w": r.w, "imbalance": r.imbalance, "h": r.h,
                "h_immediate": r.h_immediate,
                "predicted": r.predicted, "measured": r.measured,
            })).collect::<Vec<_>>(),
            "nested": self.nested.iter().map(Report::json).collect::<Vec<_>>(),
        })
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
            "{pad}{whom}: p = {}, {} supersteps, measured {}, BSP-predicted {} (g = {:.2} ns/word, l = {:.2} µs)",
            self.p,
            self.rows.len(),
            secs(measured),
            secs(predicted),
            self.g * 1e9,
            self.l * 1e6
        )?;
        writeln!(
            f,
            "{pad}  {:>9} {:>11} {:>9} {:>9} {:>9} {:>11} {:>11} {:>7}",
            "superstep", "w", "imbal.", "h words", "h imm.", "measured", "predicted", "pred/m"
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
                "{pad}  {:>9} {:>11} {:>9.2} {:>9} {:>9} {:>11} {:>11} {:>7.2}",
                r.superstep,
                secs(r.w),
                r.imbalance,
                r.h,
                r.h_immediate,
                secs(r.measured),
                secs(r.predicted),
                r.predicted / r.measured
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
        Ok(())
    }
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

/// The report of a top-level run for `MBSP_PROFILE`: on stderr, or as JSON to the file.
pub(crate) fn emit(profile: &Profile) {
    let report = profile.report(Params::current());
    match env_request() {
        EnvRequest::Off => {}
        EnvRequest::Text => eprint!("mbsp profile: {report}"),
        EnvRequest::Json(path) => {
            let tmp = path.with_extension(format!("json.tmp{}", std::process::id()));
            let written =
                std::fs::write(&tmp, report.to_json()).and_then(|()| std::fs::rename(&tmp, path));
            if let Err(e) = written {
                let _ = std::fs::remove_file(&tmp);
                eprintln!("mbsp: {PROFILE_ENV}={}: {e}", path.display());
            }
        }
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
    }
}
