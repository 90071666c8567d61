//! The results of `mbsp affinity`: the table, JSON, CSV and the SVG bar chart.
//!
//! Every row gives the median of its runs with a distribution-free confidence interval
//! ([`median_interval`]); every pair of rows the user compares — the same kernel under two
//! policies in one shape, or in two shapes under one policy — gets a verdict from the
//! interval of the ratio of their times ([`compare`]): they differ at that confidence, or the
//! runs cannot tell them apart. A row is *trusted* when the machine was quiet
//! ([`MachineState`]) and its interval is tight ([`MAX_WIDTH`]); only a trusted row's
//! prediction is judged ("!" past [`MAX_MISS`]).

use super::{Experiment, Options};
use mbsp_tools::machine_state::{MachineState, SetAside};
use mbsp_tools::stats::{CONFIDENCE, Comparison, MedianInterval, compare, median_interval};
use mbsp_tools::{Error, Result};
use serde_json::{Value, json};
use std::path::Path;

/// One kernel (or the external program) under one policy and shape.
#[derive(Clone, Debug)]
pub struct Row {
    /// `triad`, `sync`, `hword`, `hbulk`, `fft`, `spmv`, or `program <command line>`.
    pub kernel: String,
    /// The policy as given (also the program's `MBSP_AFFINITY`).
    pub policy: String,
    /// The shape as given (`-` for the program: it nests as it likes).
    pub shape: String,
    /// The plan's levels as `mbsp topo` prints them (`4`, `one per package, nested: ...`).
    pub plan: String,
    /// Processes per level, outermost first, when every nested run has the same size.
    pub fan_outs: Vec<usize>,
    /// Processes running the kernel (the leaves); `None` for the program.
    pub p: Option<usize>,
    /// The problem size.
    pub size: String,
    /// Steps timed per repeat.
    pub iterations: usize,
    /// Seconds per step, one per repeat.
    pub samples: Vec<f64>,
    /// The BSP cost model's seconds per step, if it has one for this kernel and shape.
    pub predicted: Option<f64>,
    /// The cost formula of the prediction (or why there is none).
    pub model: String,
    /// The model's parameters that the parameter file in force does not give (the defaults
    /// stand in for them).
    pub missing: Vec<String>,
    /// What the figure of a run is (seconds per step of a kernel, or a program's figure).
    pub figure: String,
    /// The level of the parameter file the prediction uses and the processes of the group
    /// (`machine p=2`, `package p=8`).
    pub params_level: String,
    /// Logical indices of the packages the processes are placed on.
    pub packages: Vec<usize>,
    /// Whether every process was bound to its placement (`None`: not known, for a program).
    pub bound: Option<bool>,
    /// Why the kernel was not run under this placement (no samples then).
    pub skipped: Option<String>,
}

/// The largest relative half-width of a row's confidence interval whose median is trusted
/// enough to judge a prediction by.
pub const MAX_WIDTH: f64 = 0.10;

/// How far a prediction may miss a trusted median before it is flagged.
pub const MAX_MISS: f64 = 0.20;

impl Row {
    /// The median and its confidence interval.
    pub fn interval(&self) -> Option<MedianInterval> {
        median_interval(&self.samples, CONFIDENCE)
    }

    /// Why this row's median is not to be trusted (empty: trusted): the machine's causes, a
    /// wide interval, too few runs.
    pub fn doubts(&self, state: &MachineState) -> Vec<String> {
        let mut why = state.causes();
        if let Some(ci) = self.interval() {
            if ci.short {
                why.push(format!(
                    "{} runs give only {:.0}% confidence",
                    self.samples.len(),
                    100.0 * ci.level
                ));
            } else if ci.relative_width() > MAX_WIDTH {
                why.push(format!(
                    "interval ±{:.0}% of the median (above ±{:.0}%)",
                    100.0 * ci.relative_width(),
                    100.0 * MAX_WIDTH
                ));
            }
        }
        why
    }

    /// The prediction's relative miss of the median.
    pub fn miss(&self) -> Option<f64> {
        let med = self.interval()?.median;
        self.predicted.map(|t| (t - med) / med)
    }
}

/// A pair of rows the user compares and their verdict.
#[derive(Clone, Debug)]
pub struct Verdict {
    /// Indices of the two rows.
    pub a: usize,
    /// Second row.
    pub b: usize,
    /// What differs between them: `policy` or `shape`.
    pub differs_in: &'static str,
    /// The comparison of A's times to B's.
    pub c: Comparison,
}

/// Every pair of measured rows of one kernel that differ in exactly one of policy and shape.
pub fn verdicts(rows: &[Row]) -> Vec<Verdict> {
    let mut out = Vec::new();
    for (i, a) in rows.iter().enumerate() {
        for (j, b) in rows.iter().enumerate().skip(i + 1) {
            if a.kernel != b.kernel || a.samples.is_empty() || b.samples.is_empty() {
                continue;
            }
            let differs_in = match (a.policy == b.policy, a.shape == b.shape) {
                (false, true) => "policy",
                (true, false) => "shape",
                _ => continue,
            };
            out.push(Verdict {
                a: i,
                b: j,
                differs_in,
                c: compare(&a.samples, &b.samples, CONFIDENCE),
            });
        }
    }
    out
}

impl Verdict {
    /// The verdict in words: `compact is faster: 0.82x [0.78-0.86]`, `no difference ...`.
    pub fn words(&self, rows: &[Row]) -> String {
        let (a, b) = (&rows[self.a], &rows[self.b]);
        let name = |r: &Row| match self.differs_in {
            "policy" => r.policy.clone(),
            _ => r.shape.clone(),
        };
        let c = &self.c;
        let x = |v: f64| {
            if v < 10.0 {
                format!("{v:.3}")
            } else {
                format!("{v:.1}")
            }
        };
        let ratio = format!("{}x [{}-{}]", x(c.ratio), x(c.lo), x(c.hi));
        match c.differ {
            Some(true) if c.ratio < 1.0 => {
                format!("{} is faster than {}: time ratio {ratio}", name(a), name(b))
            }
            Some(true) => format!("{} is slower than {}: time ratio {ratio}", name(a), name(b)),
            Some(false) => format!(
                "{} and {}: no difference at {:.0}% (time ratio {ratio})",
                name(a),
                name(b),
                100.0 * CONFIDENCE
            ),
            None => format!(
                "{} and {}: too few runs to tell at {:.0}% (4 or more each)",
                name(a),
                name(b),
                100.0 * CONFIDENCE
            ),
        }
    }
}

/// Seconds, compactly (ns, µs or ms).
pub(crate) fn secs(v: f64) -> String {
    if v >= 0.1 {
        format!("{v:.3} s")
    } else if v >= 1e-3 {
        format!("{:.2} ms", v * 1e3)
    } else {
        mbsp_tools::stats::ns(v * 1e9)
    }
}

/// The columns of `table` padded to their widths, two spaces apart; columns in `right` are
/// right-aligned.
pub fn align(table: &[Vec<String>], right: &[usize]) -> String {
    let cols = table.iter().map(Vec::len).max().unwrap_or(0);
    let width: Vec<usize> = (0..cols)
        .map(|c| {
            table
                .iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in table {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            let pad = width[c] - cell.chars().count();
            if right.contains(&c) {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The measured rows of one experiment.
pub struct Report<'a> {
    /// The rows, in the order of the table (kernel, shape, policy).
    pub rows: Vec<Row>,
    /// What the machine did meanwhile (around the runs kept).
    pub state: MachineState,
    /// The runs set aside, if any: taken in another state of the machine.
    pub set_aside: Option<SetAside>,
    /// The seed of the random order of each round.
    pub seed: u64,
    /// The experiment.
    pub e: &'a Experiment,
    /// The command line.
    pub o: &'a Options,
}

/// What the rounds left: the machine's state around the runs whose figures count, and how
/// many those are when not all.
pub struct Rounds {
    /// The machine's state around the runs kept.
    pub state: MachineState,
    /// The runs kept, where the others were set aside.
    pub set_aside: Option<SetAside>,
}

/// Where the predictions' parameters come from: the runtime's own lookup (`MBSP_PARAMS`, else
/// this machine's saved parameters, else the defaults), with the way to measure them when they
/// are the defaults.
fn params_source() -> String {
    let from = mbsp::params::source();
    match from {
        mbsp::params::ParamsSource::Default => format!(
            "{from} (measure them with `mbsp params --save`, which every command then uses)"
        ),
        _ => from.to_string(),
    }
}

impl Report<'_> {
    /// Whether the parameter file in force was measured in another state of this machine
    /// than this run saw (their cache-line round trips lie apart), and how
    /// ([`mbsp_tools::machine_state::other_state`]).
    fn params_other_state(&self) -> Option<String> {
        let then = mbsp::params::measured_line_ns()?;
        mbsp_tools::machine_state::other_state(then, self.state.line_ns?)
    }

    /// The packages column of a row: `0-1`, with `(not bound)` or `(planned)` (a program's:
    /// its binding is its own).
    fn packages(r: &Row) -> String {
        if r.packages.is_empty() {
            return "-".into();
        }
        let note = match r.bound {
            Some(true) => "",
            Some(false) => " (not bound)",
            None => " (planned)",
        };
        format!(
            "{}{note}",
            mbsp_topology::ranges(r.packages.iter().map(|&x| x as u32))
        )
    }

    /// The table for the terminal, with the verdicts and notes below.
    pub fn table(&self) -> String {
        let mut t = vec![
            [
                "kernel",
                "policy",
                "shape",
                "p",
                "packages",
                "median",
                &format!("{:.0}% interval", 100.0 * CONFIDENCE),
                "±",
                "BSP prediction",
                "size",
            ]
            .map(String::from)
            .to_vec(),
        ];
        let (mut flagged, mut doubted, mut suspect_missed) = (false, false, false);
        // What the parameter file's own record says against it (another CPU model, another
        // state of this machine than this run saw, or a busy or unsteady machine while it was
        // measured): then a miss blames the parameters.
        let suspect = mbsp::params::Doubt::in_force(self.params_other_state());
        for r in &self.rows {
            let p = r.p.map_or("-".into(), |p| p.to_string());
            let (median, range, width, pred) = match (r.interval(), &r.skipped) {
                (_, Some(why)) => (
                    format!("skipped: {why}"),
                    String::new(),
                    String::new(),
                    String::new(),
                ),
                (Some(ci), None) => {
                    let trusted = r.doubts(&self.state).is_empty();
                    let pred = match (r.predicted, r.miss()) {
                        (Some(t), Some(miss)) => {
                            let mark = if !trusted {
                                doubted = true;
                                " ?"
                            } else if miss.abs() > MAX_MISS && suspect.is_some() {
                                suspect_missed = true;
                                " ~"
                            } else if miss.abs() > MAX_MISS {
                                flagged = true;
                                " !"
                            } else {
                                ""
                            };
                            format!("{} ({:+.0}%){mark}", secs(t), 100.0 * miss)
                        }
                        _ => "-".into(),
                    };
                    (
                        secs(ci.median),
                        format!("{} - {}", secs(ci.lo), secs(ci.hi)),
                        format!("{:.0}%", 100.0 * ci.relative_width()),
                        pred,
                    )
                }
                (None, None) => ("-".into(), String::new(), String::new(), String::new()),
            };
            t.push(vec![
                r.kernel.clone(),
                r.policy.clone(),
                r.shape.clone(),
                p,
                Self::packages(r),
                median,
                range,
                width,
                pred,
                r.size.clone(),
            ]);
        }
        let mut out = align(&t, &[3, 5, 6, 7, 8]);
        let verdicts = verdicts(&self.rows);
        if !verdicts.is_empty() {
            out.push_str(&format!(
                "\nverdicts ({:.0}% confidence; the interval of the ratio of times, \
                 Mann-Whitney):\n",
                100.0 * CONFIDENCE
            ));
            let busy = if self.state.quiet() {
                ""
            } else {
                " (busy or unsteady machine: not to be trusted)"
            };
            for v in &verdicts {
                let a = &self.rows[v.a];
                let group = match v.differs_in {
                    "policy" => format!("{} {}", a.kernel, a.shape),
                    _ => format!("{} {}", a.kernel, a.policy),
                };
                out.push_str(&format!("  {group}: {}{busy}\n", v.words(&self.rows)));
            }
        }
        // Rows can differ: runs set aside, or run again where the machine was in another state.
        let counts = || {
            self.rows
                .iter()
                .filter(|r| r.skipped.is_none())
                .map(|r| r.samples.len())
        };
        let (least, most) = (counts().min().unwrap_or(0), counts().max().unwrap_or(0));
        let runs = match (&self.set_aside, least == most) {
            (None, true) => format!("{least}"),
            (None, false) => format!("{least}-{most}"),
            (Some(_), true) => format!("{least} (those kept)"),
            (Some(_), false) => format!("{least}-{most} (those kept)"),
        };
        out.push_str(&format!(
            "\nmedian and its {:.0}% confidence interval (order statistics) of {runs} runs per \
             row, the configurations interleaved in rounds in random order (seed {}); ± = the \
             interval's half-width over the median\n",
            100.0 * CONFIDENCE,
            self.seed
        ));
        let mut figures: Vec<String> = Vec::new();
        let mut models: Vec<String> = Vec::new();
        let mut missing: Vec<String> = Vec::new();
        for r in &self.rows {
            let name = r.kernel.split_whitespace().next().unwrap_or("");
            let f = format!("{name}: {}", r.figure);
            if !figures.contains(&f) && !r.figure.is_empty() {
                figures.push(f);
            }
            let m = format!("{name}: {}", r.model);
            if !models.contains(&m) && !r.model.is_empty() {
                models.push(m);
            }
            for key in &r.missing {
                let m = format!("{key} ({name})");
                if !missing.contains(&m) {
                    missing.push(m);
                }
            }
        }
        out.push_str(&format!("figures: {}\n", figures.join("; ")));
        out.push_str(&format!(
            "BSP predictions from {}: {}\n",
            params_source(),
            models.join("; ")
        ));
        if !missing.is_empty() {
            out.push_str(&format!(
                "missing model terms: the parameter file does not give {}: the defaults stand \
                 in, not this machine's values (measure them: mbsp params --save)\n",
                missing.join(", ")
            ));
        }
        if flagged {
            out.push_str(&format!(
                "! the prediction misses a trusted median by more than {:.0}%: the model leaves \
                 out what this kernel is limited by, or the parameters are not this \
                 placement's\n",
                100.0 * MAX_MISS
            ));
        }
        if let Some(why) = &suspect {
            out.push_str(&format!(
                "{}{why}\n",
                if suspect_missed {
                    format!(
                        "~ the prediction misses a trusted median by more than {:.0}%, but ",
                        100.0 * MAX_MISS
                    )
                } else {
                    String::new()
                }
            ));
        }
        if doubted {
            out.push_str(
                "? the measurement is not to be trusted (a busy or unsteady machine, or its interval wider \
                 than ±10%, or too few runs): its miss says nothing about the model\n",
            );
        }
        match &self.set_aside {
            Some(set_aside) => out.push_str(&format!(
                "{}\n{}\n",
                set_aside.line("runs", "--all-rounds keeps them"),
                self.state.line_during("the runs kept")
            )),
            None => out.push_str(&format!("{}\n", self.state.line())),
        }
        out.push_str(&format!("machine: {}\n", mbsp_tools::machine::describe()));
        out
    }

    /// The results as one JSON object.
    pub fn json(&self) -> Value {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                let ci = r.interval();
                let doubts = r.doubts(&self.state);
                json!({
                    "kernel": r.kernel,
                    "policy": r.policy,
                    "shape": r.shape,
                    "plan": r.plan,
                    "fan_outs": r.fan_outs,
                    "p": r.p,
                    "size": r.size,
                    "iterations": r.iterations,
                    "figure": r.figure,
                    "samples_seconds": r.samples,
                    "median_seconds": ci.map(|c| c.median),
                    "interval_seconds": ci.map(|c| json!({
                        "low": c.lo, "high": c.hi, "confidence": c.level, "short": c.short,
                    })),
                    "relative_half_width": ci.map(|c| c.relative_width()),
                    "trusted": ci.is_some() && doubts.is_empty(),
                    "doubts": doubts,
                    "predicted_seconds": r.predicted,
                    "prediction_error": r.miss(),
                    "model": r.model,
                    "params_level": r.params_level,
                    "missing_terms": r.missing,
                    "packages": r.packages,
                    "bound": r.bound,
                    "skipped": r.skipped,
                })
            })
            .collect();
        let verdicts: Vec<Value> = verdicts(&self.rows)
            .iter()
            .map(|v| {
                let row = |i: usize| {
                    let r = &self.rows[i];
                    json!({"kernel": r.kernel, "policy": r.policy, "shape": r.shape})
                };
                json!({
                    "a": row(v.a),
                    "b": row(v.b),
                    "differs_in": v.differs_in,
                    "ratio": v.c.ratio,
                    "low": v.c.lo,
                    "high": v.c.hi,
                    "confidence": v.c.level,
                    "differ": v.c.differ,
                    "verdict": v.words(&self.rows),
                    "trusted": self.state.quiet(),
                })
            })
            .collect();
        json!({
            "machine": mbsp_tools::machine::describe(),
            "machine_state": self.state.json(),
            "runs_set_aside": self.set_aside.as_ref().map(SetAside::json),
            "repeat": self.o.repeat,
            "seed": self.seed,
            "confidence": CONFIDENCE,
            "quick": self.o.quick,
            "params": params_source(),
            "params_unsteady": mbsp::params::measured_unsteady(),
            "params_elsewhere": mbsp::params::measured_elsewhere(),
            "params_other_state": self.params_other_state(),
            "rows": rows,
            "verdicts": verdicts,
        })
    }

    /// Writes the table as CSV (whole, through a temporary file).
    pub fn csv(&self, path: &Path) -> Result<()> {
        let field = |s: &str| {
            if s.contains([',', '"', '\n']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.to_string()
            }
        };
        let num = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:e}"));
        let mut text = String::from(
            "kernel,policy,shape,p,packages,bound,size,iterations,median_seconds,low_seconds,\
             high_seconds,confidence,trusted,predicted_seconds,prediction_error,skipped\n",
        );
        for r in &self.rows {
            let ci = r.interval();
            let packages: Vec<String> = r.packages.iter().map(|p| p.to_string()).collect();
            let cells = [
                field(&r.kernel),
                field(&r.policy),
                field(&r.shape),
                r.p.map_or(String::new(), |p| p.to_string()),
                field(&packages.join(" ")),
                r.bound.map_or("unknown".into(), |b| b.to_string()),
                field(&r.size),
                r.iterations.to_string(),
                num(ci.map(|c| c.median)),
                num(ci.map(|c| c.lo)),
                num(ci.map(|c| c.hi)),
                num(ci.map(|c| c.level)),
                (ci.is_some() && r.doubts(&self.state).is_empty()).to_string(),
                num(r.predicted),
                num(r.miss()),
                field(r.skipped.as_deref().unwrap_or("")),
            ];
            text.push_str(&cells.join(","));
            text.push('\n');
        }
        crate::whole_file::write(path, |f| std::io::Write::write_all(f, text.as_bytes()))
            .map_err(|e| Error::io("").with_source(e))
    }

    /// Writes the bar chart: per kernel and shape, a bar per policy with its median time
    /// relative to the fastest policy's median (1 = fastest), and a whisker over its
    /// confidence interval.
    pub fn plot(&self, path: &Path) -> Result<()> {
        use plotters::prelude::*;
        // Groups: (kernel, shape), in the order measured; bars: the policies.
        let mut groups: Vec<(String, String)> = Vec::new();
        for r in self.rows.iter().filter(|r| r.interval().is_some()) {
            let g = (r.kernel.clone(), r.shape.clone());
            if !groups.contains(&g) {
                groups.push(g);
            }
        }
        let policies: Vec<String> = self.e.policies.iter().map(|p| p.label.clone()).collect();
        let bars: Vec<(usize, usize, f64, f64, f64)> = groups
            .iter()
            .enumerate()
            .flat_map(|(gi, (k, s))| {
                let of_group: Vec<&Row> = self
                    .rows
                    .iter()
                    .filter(|r| &r.kernel == k && &r.shape == s)
                    .collect();
                let best = of_group
                    .iter()
                    .filter_map(|r| r.interval().map(|c| c.median))
                    .fold(f64::INFINITY, f64::min);
                of_group
                    .into_iter()
                    .filter_map(|r| {
                        let c = r.interval()?;
                        let (med, lo, hi) = (c.median, c.lo, c.hi);
                        let pi = policies.iter().position(|p| p == &r.policy)?;
                        Some((gi, pi, med / best, lo / best, hi / best))
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        let top = bars.iter().map(|b| b.4).fold(1.0, f64::max) * 1.1;
        let np = policies.len().max(1);
        let width = (160 + 110 * groups.len().max(1) * np.min(4)).min(4000) as u32;
        let err = |e: &dyn std::fmt::Display| e.to_string();
        crate::whole_file::svg(path, (width.max(640), 480), |root| {
            root.fill(&WHITE).map_err(|e| err(&e))?;
            let (area, legend) = root.split_vertically(430);
            let n = groups.len().max(1) as f64;
            let mut chart = ChartBuilder::on(&area)
                .caption(
                    "mbsp affinity: median time relative to the fastest policy (1 = fastest)",
                    ("sans-serif", 18),
                )
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(50)
                .build_cartesian_2d(0.0..n, 0.0..top)
                .map_err(|e| err(&e))?;
            let names = groups.clone();
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(groups.len().max(1) * 2 + 1)
                .x_label_formatter(&|x| {
                    let i = x.floor() as usize;
                    if (x - x.floor() - 0.5).abs() < 0.26 && i < names.len() {
                        let (k, s) = &names[i];
                        if s == "-" {
                            k.clone()
                        } else {
                            format!("{k} {s}")
                        }
                    } else {
                        String::new()
                    }
                })
                .y_desc("time / fastest")
                .draw()
                .map_err(|e| err(&e))?;
            let slot = 0.8 / np as f64;
            for &(gi, pi, med, lo, hi) in &bars {
                let color = crate::whole_file::color(pi);
                let x0 = gi as f64 + 0.1 + slot * pi as f64;
                let x1 = x0 + slot * 0.9;
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x0, 0.0), (x1, med)],
                        color.filled(),
                    )))
                    .map_err(|e| err(&e))?;
                let xm = (x0 + x1) / 2.0;
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(xm, lo), (xm, hi)],
                        BLACK.stroke_width(2),
                    )))
                    .map_err(|e| err(&e))?;
            }
            for (pi, p) in policies.iter().enumerate() {
                let color = crate::whole_file::color(pi);
                legend
                    .draw(&Text::new(
                        format!("■ {p}"),
                        (60 + 200 * pi as i32, 20),
                        ("sans-serif", 14).into_font().color(&color),
                    ))
                    .map_err(|e| err(&e))?;
            }
            root.present().map_err(|e| err(&e))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up() {
        let t = vec![
            vec!["a".to_string(), "1".into()],
            vec!["long".to_string(), "100".into()],
        ];
        assert_eq!(align(&t, &[1]), "a       1\nlong  100\n");
        assert_eq!(secs(2.5e-6), "2500 ns");
        assert_eq!(secs(2.5e-3), "2.50 ms");
    }
}
