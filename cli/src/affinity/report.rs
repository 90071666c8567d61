//! The results of `mbsp affinity`: the table, JSON, CSV and the SVG bar chart.

use super::{Experiment, Options};
use mbsp_tools::stats::Samples;
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
    /// Logical indices of the packages the processes are placed on.
    pub packages: Vec<usize>,
    /// Whether every process was bound to its placement.
    pub bound: bool,
    /// Why the kernel was not run under this placement (no samples then).
    pub skipped: Option<String>,
}

impl Row {
    fn stats(&self) -> Option<(f64, f64, f64)> {
        if self.samples.is_empty() {
            return None;
        }
        let s = Samples(self.samples.clone());
        let (lo, hi) = s.range();
        Some((s.median(), lo, hi))
    }
}

/// Seconds, compactly (ns, µs or ms).
fn secs(v: f64) -> String {
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
    /// The rows, in the order measured.
    pub rows: Vec<Row>,
    /// The experiment.
    pub e: &'a Experiment,
    /// The command line.
    pub o: &'a Options,
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
    /// The table for the terminal, with notes below.
    pub fn table(&self) -> String {
        let mut t = vec![
            [
                "kernel",
                "policy",
                "shape",
                "p",
                "packages",
                "median",
                "range (min-max)",
                "BSP prediction",
                "size",
            ]
            .map(String::from)
            .to_vec(),
        ];
        let mut missed = false;
        for r in &self.rows {
            let p = r.p.map_or("-".into(), |p| p.to_string());
            let packages = if r.packages.is_empty() {
                "-".into()
            } else {
                format!(
                    "{}{}",
                    mbsp_topology::ranges(r.packages.iter().map(|&x| x as u32)),
                    if r.bound { "" } else { " (not bound)" }
                )
            };
            let (median, range, pred) = match (r.stats(), &r.skipped) {
                (_, Some(why)) => (format!("skipped: {why}"), String::new(), String::new()),
                (Some((med, lo, hi)), None) => {
                    let pred = r.predicted.map_or("-".into(), |t| {
                        let miss = (t - med) / med;
                        missed |= miss.abs() > 0.5;
                        format!(
                            "{} ({:+.0}%){}",
                            secs(t),
                            100.0 * miss,
                            if miss.abs() > 0.5 { " !" } else { "" }
                        )
                    });
                    (secs(med), format!("{} - {}", secs(lo), secs(hi)), pred)
                }
                (None, None) => ("-".into(), String::new(), String::new()),
            };
            t.push(vec![
                r.kernel.clone(),
                r.policy.clone(),
                r.shape.clone(),
                p,
                packages,
                median,
                range,
                pred,
                r.size.clone(),
            ]);
        }
        let mut out = align(&t, &[3, 5, 6, 7]);
        out.push_str(&format!(
            "\nmedian and range of {} runs per row, seconds per step (the slowest process's); \
             programs: wall clock per run\n",
            self.o.repeat
        ));
        out.push_str(&format!(
            "BSP predictions from {} (triad: 2n/r; sync: l; h-relations: l + h g; FFT and \
             SpMV: their cost functions)\n",
            params_source()
        ));
        if missed {
            out.push_str(
                "! the prediction misses the measurement by more than 50%: the parameters may \
                 be another machine's, or the kernel is limited by something the model leaves \
                 out (memory bandwidth for the triad)\n",
            );
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
                let st = r.stats();
                json!({
                    "kernel": r.kernel,
                    "policy": r.policy,
                    "shape": r.shape,
                    "plan": r.plan,
                    "fan_outs": r.fan_outs,
                    "p": r.p,
                    "size": r.size,
                    "iterations": r.iterations,
                    "samples_seconds": r.samples,
                    "median_seconds": st.map(|s| s.0),
                    "min_seconds": st.map(|s| s.1),
                    "max_seconds": st.map(|s| s.2),
                    "predicted_seconds": r.predicted,
                    "packages": r.packages,
                    "bound": r.bound,
                    "skipped": r.skipped,
                })
            })
            .collect();
        json!({
            "machine": mbsp_tools::machine::describe(),
            "repeat": self.o.repeat,
            "quick": self.o.quick,
            "params": params_source(),
            "rows": rows,
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
            "kernel,policy,shape,p,packages,bound,size,iterations,median_seconds,min_seconds,\
             max_seconds,predicted_seconds,skipped\n",
        );
        for r in &self.rows {
            let st = r.stats();
            let packages: Vec<String> = r.packages.iter().map(|p| p.to_string()).collect();
            let cells = [
                field(&r.kernel),
                field(&r.policy),
                field(&r.shape),
                r.p.map_or(String::new(), |p| p.to_string()),
                field(&packages.join(" ")),
                r.bound.to_string(),
                field(&r.size),
                r.iterations.to_string(),
                num(st.map(|s| s.0)),
                num(st.map(|s| s.1)),
                num(st.map(|s| s.2)),
                num(r.predicted),
                field(r.skipped.as_deref().unwrap_or("")),
            ];
            text.push_str(&cells.join(","));
            text.push('\n');
        }
        crate::whole_file::write(path, |f| std::io::Write::write_all(f, text.as_bytes()))
            .map_err(|e| Error::io("").with_source(e))
    }

    /// Writes the bar chart: per kernel and shape, a bar per policy with its median time
    /// relative to the fastest policy's median (1 = fastest), and a whisker over its range.
    pub fn plot(&self, path: &Path) -> Result<()> {
        use plotters::prelude::*;
        // Groups: (kernel, shape), in the order measured; bars: the policies.
        let mut groups: Vec<(String, String)> = Vec::new();
        for r in self.rows.iter().filter(|r| r.stats().is_some()) {
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
                    .filter_map(|r| r.stats().map(|s| s.0))
                    .fold(f64::INFINITY, f64::min);
                of_group
                    .into_iter()
                    .filter_map(|r| {
                        let (med, lo, hi) = r.stats()?;
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
