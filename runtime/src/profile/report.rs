//! The report of a profile against the BSP cost model: per superstep, region, level and
//! process, measured beside predicted, and its text form.

use crate::params::judge_prediction;
use std::fmt;

/// One superstep of a [`Report`].
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Its number.
    pub superstep: usize,
    /// Its region ([`Profile::superstep_region`](super::Profile::superstep_region)), as an index into [`Report::regions`].
    pub region: Option<usize>,
    /// The largest computation time, seconds.
    pub w: f64,
    /// Largest computation time over the mean.
    pub imbalance: f64,
    /// Words of the h-relation the sync carries.
    pub h: u64,
    /// Words copied at once during the computation (their time is in `w`).
    pub h_immediate: u64,
    /// The processes' mean wait for the others in the sync ([`Superstep::wait`](super::Superstep::wait)), seconds.
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
    pub(super) fn add(&mut self, r: &Row) {
        self.supersteps += 1;
        self.w += r.w;
        self.h += r.h;
        self.wait += r.mean_wait;
        self.measured += r.measured;
        self.predicted += r.predicted;
    }

    pub(super) fn merge(&mut self, o: &Totals) {
        self.supersteps += o.supersteps;
        self.w += o.w;
        self.h += o.h;
        self.wait += o.wait;
        self.measured += o.measured;
        self.predicted += o.predicted;
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
    /// The part of [`sync`](Self::sync) spent waiting for the others ([`Superstep::wait`](super::Superstep::wait)).
    pub wait: f64,
    /// Words sent ([`ProcStep::words_sent`](super::ProcStep::words_sent), summed).
    pub words_sent: u64,
    /// Words received.
    pub words_received: u64,
    /// Where it ran ([`Profile::places`](super::Profile::places)).
    pub place: String,
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

    /// The full name of region `i` ([`Row::region`]).
    pub(super) fn region_name(&self, i: usize) -> String {
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
            "{pad}  {:>9} {:>11} {:>11} {:>11} {:>12} {:>14}  where",
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
pub(super) fn secs(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.2} µs", s * 1e6)
    }
}
