//! The text form of a [`Report`]: the run's header, regions, processes and supersteps; the
//! runs nested in it summarised per level of nesting ([`Detail::Summary`], the default) or
//! each in full ([`Detail::Full`]); then the totals per level.

use super::report::{ProcTotals, Report, Row, Totals};
use crate::params::judge_prediction;
use std::fmt;

/// How much of the runs nested in a run the text report shows (the JSON has everything).
///
/// ```
/// use mbsp::profile::Detail;
/// let (_, profile) = mbsp::Run::new(2).run_profiled(|ctx| {
///     ctx.run(2, |inner| inner.sync())?;
///     ctx.sync()
/// })?;
/// let report = profile.report(&mbsp::params::Params::DEFAULT);
/// assert_eq!(report.to_string(), report.text(Detail::default()).to_string());
/// assert!(report.to_string().contains("  runs nested 1 deep: 2 runs, 4 supersteps"));
/// let full = report.text(Detail::Full).to_string();
/// assert!(full.contains("  run nested in process 1 (superstep 0): p = 2, 2 supersteps"));
/// # Ok::<(), mbsp::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Detail {
    /// Each level of nesting in one summary: how many runs, their supersteps and totals,
    /// measured against predicted, the regions over them and the longest few runs
    /// (`Display`, `MBSP_PROFILE=1`).
    #[default]
    Summary,
    /// Every nested run in full, as the top-level run is (`MBSP_PROFILE=full`).
    Full,
}

/// A [`Report`] as text with a chosen [`Detail`] ([`Report::text`]); `Display` writes it.
#[derive(Clone, Copy, Debug)]
pub struct Text<'a> {
    report: &'a Report,
    detail: Detail,
}

/// Supersteps of a run shown in full: the first ones, then the longest of the rest.
const SHOW_FIRST: usize = 20;
const SHOW_LONGEST: usize = 5;
/// Processes of a run shown: those that waited least and most.
const SHOW_PROCS: usize = 32;
/// Runs of a level of nesting shown in its summary: the longest.
const SHOW_RUNS: usize = 3;

impl Report {
    /// The report as text, the nested runs as `detail` says: `Display` is
    /// `text(Detail::Summary)`, one summary per level of nesting.
    ///
    /// ```
    /// use mbsp::profile::Detail;
    /// let (_, profile) = mbsp::Run::new(2).run_profiled(|ctx| {
    ///     for _ in 0..20 {
    ///         ctx.run(2, |inner| inner.sync())?; // one nested run per process
    ///         ctx.sync()?;
    ///     }
    ///     Ok(())
    /// })?;
    /// let report = profile.report(&mbsp::params::Params::DEFAULT);
    /// let summary = report.to_string();
    /// assert!(summary.contains("runs nested 1 deep: 40 runs"), "{summary}");
    /// assert!(summary.contains("the 3 longest of the 40 runs"));
    /// let full = report.text(Detail::Full).to_string();
    /// assert_eq!(full.matches("run nested in process").count(), 40);
    /// assert!(summary.lines().count() < full.lines().count() / 5);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn text(&self, detail: Detail) -> Text<'_> {
        Text {
            report: self,
            detail,
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.text(Detail::Summary).fmt(f)
    }
}

impl fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.report;
        match self.detail {
            Detail::Full => write_full(r, f, 0)?,
            Detail::Summary => {
                write_run(r, f, 0)?;
                for (depth, runs) in r.runs_by_level().iter().enumerate().skip(1) {
                    write_level(f, depth, runs)?;
                }
            }
        }
        if !r.nested.is_empty() {
            writeln!(f, "per level of nesting:")?;
            totals_table(f, "", "level", &r.levels())?;
        }
        Ok(())
    }
}

/// `r` and every run nested in it, each in full, indented by its depth.
fn write_full(r: &Report, f: &mut fmt::Formatter<'_>, depth: usize) -> fmt::Result {
    write_run(r, f, depth)?;
    for n in &r.nested {
        write_full(n, f, depth + 1)?;
    }
    Ok(())
}

/// " (n lazy)" when `n` supersteps ended with a lazy sync, else nothing.
fn lazy_note(n: usize) -> String {
    if n > 0 {
        format!(" ({n} lazy)")
    } else {
        String::new()
    }
}

/// How far a run's prediction is off ([`judge_prediction`]), and, where its processes took
/// turns on shared hardware threads, how the turns were priced.
fn judge_run(r: &Report, measured: f64, predicted: f64) -> String {
    let judged = judge_prediction(measured, predicted);
    if r.turns <= 1 {
        return judged;
    }
    let (how, key, comm) = if r.coroutines {
        ("as coroutines", "turn_coroutine", "turn_comm_coroutine")
    } else {
        (
            "as threads the kernel switches between",
            "turn",
            "turn_comm",
        )
    };
    let absent = crate::params::defaulted();
    let default = if absent.contains(&key) || absent.contains(&comm) {
        "; defaults: measure this machine's with `mbsp params --save`"
    } else {
        ""
    };
    format!(
        "{judged}; up to {} processes took turns on each hardware thread {how} (each beyond the \
         first: {:.2} µs per superstep, `{key}`, and {:.2} µs more where it communicates, \
         `{comm}`{default})",
        r.turns,
        r.turn * 1e6,
        r.turn_comm * 1e6
    )
}

/// One run: its header, regions, processes and supersteps (not the runs nested in it).
fn write_run(r: &Report, f: &mut fmt::Formatter<'_>, depth: usize) -> fmt::Result {
    let pad = "  ".repeat(depth);
    let (measured, predicted) = r.totals();
    let whom = if r.path.is_empty() {
        "top-level run".to_string()
    } else {
        let path: Vec<String> = r.path.iter().map(usize::to_string).collect();
        match r.started_in {
            Some(s) => format!("run nested in process {} (superstep {s})", path.join("/")),
            None => format!("run nested in process {}", path.join("/")),
        }
    };
    writeln!(
        f,
        "{pad}{whom}: p = {}, {} supersteps{}, measured {}, BSP-predicted {} ({}) (g = {:.2} ns/word, l = {:.2} µs)",
        r.p,
        r.rows.len(),
        lazy_note(r.run_totals().lazy),
        secs(measured),
        secs(predicted),
        judge_run(r, measured, predicted),
        r.g * 1e9,
        r.l * 1e6
    )?;
    if !r.regions.is_empty() {
        writeln!(
            f,
            "{pad}  regions (a superstep counts for the region open when its sync began, and for the regions around it):"
        )?;
        totals_table(f, &pad, "region", &r.regions)?;
    }
    write_processes(r, f, &pad)?;
    write_supersteps(r, f, &pad)
}

/// A run's processes (hundreds of them: those that waited least and most).
fn write_processes(r: &Report, f: &mut fmt::Formatter<'_>, pad: &str) -> fmt::Result {
    writeln!(
        f,
        "{pad}  processes (wait: time in syncs waiting for slower processes):"
    )?;
    writeln!(
        f,
        "{pad}  {:>9} {:>11} {:>11} {:>11} {:>12} {:>14}  where",
        "pid", "compute", "in syncs", "wait", "words sent", "words received"
    )?;
    let mut procs: Vec<&ProcTotals> = r.processes.iter().collect();
    if procs.len() > SHOW_PROCS {
        procs.sort_by(|a, b| a.wait.total_cmp(&b.wait));
        procs.drain(SHOW_PROCS / 2..procs.len() - SHOW_PROCS / 2);
    }
    for t in &procs {
        writeln!(
            f,
            "{pad}  {:>9} {:>11} {:>11} {:>11} {:>12} {:>14}  {}",
            t.pid,
            secs(t.compute),
            secs(t.sync),
            secs(t.wait),
            t.words_sent,
            t.words_received,
            t.place
        )?;
    }
    if r.processes.len() > procs.len() {
        writeln!(
            f,
            "{pad}  ... {} more processes (the {SHOW_PROCS} that waited least and most are shown; the JSON has all)",
            r.processes.len() - procs.len(),
        )?;
    }
    Ok(())
}

/// A run's supersteps (thousands of them: the first ones and the longest of the rest).
fn write_supersteps(r: &Report, f: &mut fmt::Formatter<'_>, pad: &str) -> fmt::Result {
    writeln!(
        f,
        "{pad}  {:>9} {:>11} {:>9} {:>9} {:>9} {:>11} {:>11} {:>11} {:>7}  sync  region",
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
    let mut shown: Vec<&Row> = r.rows.iter().take(SHOW_FIRST).collect();
    if r.rows.len() > SHOW_FIRST {
        let mut rest: Vec<&Row> = r.rows[SHOW_FIRST..].iter().collect();
        rest.sort_by(|a, b| b.measured.total_cmp(&a.measured));
        shown.extend(rest.into_iter().take(SHOW_LONGEST));
    }
    for row in &shown {
        writeln!(
            f,
            "{pad}  {:>9} {:>11} {:>9.2} {:>9} {:>9} {:>11} {:>11} {:>11} {:>7.2}  {:<4}  {}",
            row.superstep,
            secs(row.w),
            row.imbalance,
            row.h,
            row.h_immediate,
            secs(row.mean_wait),
            secs(row.measured),
            secs(row.predicted),
            row.predicted / row.measured,
            if row.lazy { "lazy" } else { "full" },
            row.region.map_or(String::new(), |i| r.region_name(i))
        )?;
    }
    if r.rows.len() > shown.len() {
        writeln!(
            f,
            "{pad}  ... {} more supersteps (the first {SHOW_FIRST} and the {SHOW_LONGEST} longest of the rest are shown)",
            r.rows.len() - shown.len()
        )?;
    }
    Ok(())
}

/// `lo`, or `lo-hi` when they differ.
fn span(lo: usize, hi: usize) -> String {
    if lo == hi {
        lo.to_string()
    } else {
        format!("{lo}-{hi}")
    }
}

/// The summary of the runs of one level of nesting (`depth` ≥ 1): their count and totals,
/// what one run is like, the regions over all of them, and the longest few.
fn write_level(f: &mut fmt::Formatter<'_>, depth: usize, runs: &[&Report]) -> fmt::Result {
    let mut total = Totals::default();
    for r in runs {
        total.merge(&r.run_totals());
    }
    let n = runs.len();
    writeln!(
        f,
        "  runs nested {depth} deep: {n} run{}, {} supersteps{}, measured {}, BSP-predicted {} ({})",
        if n == 1 { "" } else { "s" },
        total.supersteps,
        lazy_note(total.lazy),
        secs(total.measured),
        secs(total.predicted),
        judge_prediction(total.measured, total.predicted)
    )?;
    let mut measured: Vec<f64> = runs.iter().map(|r| r.totals().0).collect();
    measured.sort_by(f64::total_cmp);
    let (p_lo, p_hi) = min_max(runs.iter().map(|r| r.p));
    let (s_lo, s_hi) = min_max(runs.iter().map(|r| r.rows.len()));
    let same_params = runs.iter().all(|r| (r.g, r.l) == (runs[0].g, runs[0].l));
    writeln!(
        f,
        "    each run: p = {}, {} supersteps, measured {} (median), {} (longest); {}",
        span(p_lo, p_hi),
        span(s_lo, s_hi),
        secs(measured[(n - 1) / 2]),
        secs(measured[n - 1]),
        if same_params {
            format!(
                "g = {:.2} ns/word, l = {:.2} µs",
                runs[0].g * 1e9,
                runs[0].l * 1e6
            )
        } else {
            "g and l of each run's level".to_string()
        }
    )?;
    let regions = merged_regions(runs);
    if !regions.is_empty() {
        writeln!(f, "    regions, over all {n} runs:")?;
        totals_table(f, "  ", "region", &regions)?;
    }
    write_longest(f, runs)
}

/// The smallest and the largest of `xs` (`(0, 0)` for none).
fn min_max(xs: impl Iterator<Item = usize>) -> (usize, usize) {
    xs.fold(None, |acc: Option<(usize, usize)>, x| {
        Some(acc.map_or((x, x), |(lo, hi)| (lo.min(x), hi.max(x))))
    })
    .unwrap_or((0, 0))
}

/// The regions of `runs` totalled by name, as a tree (each region after its parent, siblings
/// in the order they first appear), then "(outside regions)".
fn merged_regions(runs: &[&Report]) -> Vec<Totals> {
    let mut merged: Vec<Totals> = Vec::new();
    for t in runs.iter().flat_map(|r| &r.regions) {
        match merged.iter_mut().find(|m| m.name == t.name) {
            Some(m) => m.merge(t),
            None => merged.push(t.clone()),
        }
    }
    // A region's key: where each of its enclosing regions and itself first appeared.
    let first = |name: &str| {
        merged
            .iter()
            .position(|m| m.depth > 0 && m.name == name)
            .unwrap_or(usize::MAX)
    };
    let key = |t: &Totals| -> Vec<usize> {
        if t.depth == 0 {
            return vec![usize::MAX];
        }
        let mut key = Vec::new();
        let mut end = 0;
        for part in t.name.split('/') {
            end += part.len();
            key.push(first(&t.name[..end]));
            end += 1;
        }
        key
    };
    let mut keyed: Vec<(Vec<usize>, Totals)> = merged.iter().map(|t| (key(t), t.clone())).collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    keyed.into_iter().map(|(_, t)| t).collect()
}

/// The longest few of a level's runs: who started them, in which superstep, and their totals.
fn write_longest(f: &mut fmt::Formatter<'_>, runs: &[&Report]) -> fmt::Result {
    let mut longest: Vec<&Report> = runs.to_vec();
    longest.sort_by(|a, b| b.totals().0.total_cmp(&a.totals().0));
    longest.truncate(SHOW_RUNS);
    if runs.len() > longest.len() {
        writeln!(
            f,
            "    the {} longest of the {} runs (every run: MBSP_PROFILE=full, or Report::text(Detail::Full)):",
            longest.len(),
            runs.len()
        )?;
    } else {
        writeln!(f, "    the runs, longest first:")?;
    }
    writeln!(
        f,
        "    {:>11} {:>10} {:>5} {:>10} {:>11} {:>11}  prediction",
        "started by", "superstep", "p", "supersteps", "measured", "predicted"
    )?;
    for r in longest {
        let (measured, predicted) = r.totals();
        let by: Vec<String> = r.path.iter().map(usize::to_string).collect();
        writeln!(
            f,
            "    {:>11} {:>10} {:>5} {:>10} {:>11} {:>11}  {}",
            by.join("/"),
            r.started_in.map_or("-".to_string(), |s| s.to_string()),
            r.p,
            format!("{}{}", r.rows.len(), lazy_note(r.run_totals().lazy)),
            secs(measured),
            secs(predicted),
            short_judgement(measured, predicted)
        )?;
    }
    Ok(())
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

/// Seconds compactly.
pub(super) fn secs(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.2} µs", s * 1e6)
    }
}
