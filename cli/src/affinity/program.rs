//! An external program as the subject of `mbsp affinity`: run under every policy and shape
//! through the environment, timed by the figure it reports.
//!
//! Each run of the program gets
//!
//! * `MBSP_AFFINITY` = the policy (`none` included), which every run of the program reads;
//! * `MBSP_SHAPE` = the shape's process counts on this machine, outermost first (`2`, `1x2`),
//!   which a program that lets itself be shaped reads ([`mbsp::shape_from_env`], C
//!   `mbsp_shape_level`) for its top-level run and the runs its processes nest;
//! * `MBSP_PROFILE` = a JSON file of this command's (unless `--wall-clock`), so that the
//!   program's own supersteps are timed and its start-up, input and checks are not.
//!
//! The figure of a run, in this order: the last line the program prints on standard output of
//! the form `mbsp-figure: SECONDS` ([`FIGURE_PREFIX`]: what the program itself wants timed),
//! else the measured time of the last top-level run in its profile, else the wall clock of the
//! process. The row says which, and whether the profile's process count matches the shape's
//! (a program that does not read `MBSP_SHAPE` runs its own).

use super::kernels::{Cell, Job, Sample, fan_outs};
use super::report::Row;
use super::{Experiment, PolicySpec, Shape, levels_text, plan_of};
use mbsp_tools::placement::leaves;
use mbsp_tools::{Error, Result};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The start of the line a program prints to report its own figure, in seconds.
pub const FIGURE_PREFIX: &str = "mbsp-figure:";

/// Where the figure of a run came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Figure {
    /// The program's `mbsp-figure:` line.
    Line,
    /// The profile's measured time of the last top-level run.
    Profile,
    /// The wall clock of the whole process.
    Wall,
}

impl Figure {
    fn describe(self) -> &'static str {
        match self {
            Figure::Line => "the program's mbsp-figure: line, seconds",
            Figure::Profile => "the program's supersteps (MBSP_PROFILE JSON), seconds",
            Figure::Wall => "wall clock of the whole process",
        }
    }
}

/// A scratch folder of this command's, removed when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    /// A new folder under the system's temporary one.
    pub fn new() -> Result<Scratch> {
        let d = std::env::temp_dir().join(format!("mbsp-affinity-{}", std::process::id()));
        std::fs::create_dir_all(&d)
            .map_err(|e| Error::io(format!("cannot create {}", d.display())).with_source(e))?;
        Ok(Scratch(d))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The figure a program reported on a line of its output, if the line is one.
///
/// ```
/// use mbsp_cli::affinity::program::reported;
/// assert_eq!(reported("mbsp-figure: 0.25"), Some(0.25));
/// assert_eq!(reported("  mbsp-figure:1e-3 "), Some(1e-3));
/// assert_eq!(reported("result 0.25"), None);
/// assert_eq!(reported("mbsp-figure: soon"), None);
/// ```
pub fn reported(line: &str) -> Option<f64> {
    let v = line.trim().strip_prefix(FIGURE_PREFIX)?.trim();
    v.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0)
}

/// The measured seconds and process count of the top-level run in a profile's JSON.
fn from_profile(file: &Path) -> Option<(f64, Option<u64>)> {
    let text = std::fs::read_to_string(file).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some((v["measured_seconds"].as_f64()?, v["p"].as_u64()))
}

/// The program's cell under `pol` and `shape`.
pub fn cell<'a>(
    program: &'a [String],
    pol: &'a PolicySpec,
    shape: Shape,
    e: &Experiment,
    scratch: &'a Scratch,
    wall_clock: bool,
    index: usize,
) -> Result<Cell<'a>> {
    let (exe, args) = program
        .split_first()
        .ok_or_else(|| Error::usage("no program after --"))?;
    let levels = shape.levels(&pol.policy, e.p);
    let nodes = plan_of(&e.loaded.machine, &levels, &pol.policy)
        .map_err(|err| err.context(format!("the program under {} ({shape})", pol.label)))?;
    let fans = fan_outs(&nodes).map_err(Error::usage)?;
    let spec: Vec<String> = fans.iter().map(usize::to_string).collect();
    let spec = spec.join("x");
    let mut packages: Vec<usize> = leaves(&nodes)
        .iter()
        .flat_map(|n| n.packages.iter().copied())
        .collect();
    packages.sort_unstable();
    packages.dedup();
    let row = Row {
        kernel: format!("program {}", program.join(" ")),
        policy: pol.label.clone(),
        shape: shape.to_string(),
        plan: levels_text(&levels),
        fan_outs: fans.clone(),
        p: Some(fans.iter().product()),
        size: format!("MBSP_SHAPE={spec}"),
        iterations: 1,
        samples: Vec::new(),
        predicted: None,
        model: "none: an external program has no cost function here".into(),
        missing: Vec::new(),
        figure: String::new(),
        params_level: String::new(),
        packages,
        bound: None,
        skipped: None,
    };
    let profile = scratch.path().join(format!("profile-{index}.json"));
    let top = fans[0] as u64;
    let mut runs = 0usize;
    let label = pol.label.clone();
    let job: Job<'a> = Box::new(move || {
        runs += 1;
        let _ = std::fs::remove_file(&profile);
        let mut cmd = Command::new(exe);
        cmd.args(args)
            .env(mbsp::AFFINITY_ENV, &label)
            .env(mbsp::SHAPE_ENV, &spec)
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        if wall_clock {
            cmd.env_remove(mbsp::profile::PROFILE_ENV);
        } else {
            cmd.env(mbsp::profile::PROFILE_ENV, &profile);
        }
        let t = Instant::now();
        let mut child = cmd
            .spawn()
            .map_err(|err| Error::io(format!("cannot start {exe}")).with_source(err))?;
        // Its output goes to this command's standard error (the table or JSON on standard
        // output stays whole), its figure line is kept.
        let mut line_figure = None;
        if let Some(out) = child.stdout.take() {
            let mut err = std::io::stderr().lock();
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if let Some(x) = reported(&line) {
                    line_figure = Some(x);
                }
                let _ = writeln!(err, "{line}");
            }
        }
        let status = child
            .wait()
            .map_err(|err| Error::io(format!("waiting for {exe}")).with_source(err))?;
        let wall = t.elapsed().as_secs_f64();
        if !status.success() {
            return Err(Error::run(format!(
                "{exe} with MBSP_AFFINITY={label} MBSP_SHAPE={spec} (run {runs}) failed: \
                 {status}"
            )));
        }
        let (secs, figure) = match (line_figure, from_profile(&profile)) {
            (Some(x), _) => (x, Figure::Line),
            (None, Some((x, p))) => {
                if p.is_some_and(|p| p != top) {
                    eprintln!(
                        "affinity: {exe} ran a top-level run of {} processes, not the {top} \
                         of MBSP_SHAPE={spec} (read it with mbsp::shape_from_env or \
                         mbsp_shape_level)",
                        p.unwrap_or(0)
                    );
                }
                (x, Figure::Profile)
            }
            (None, None) => (wall, Figure::Wall),
        };
        Ok(Sample {
            secs,
            bound: None,
            figure: Some(figure.describe()),
            predicted: None,
        })
    });
    Ok(Cell::new(row, job))
}
