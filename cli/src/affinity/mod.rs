//! `mbsp affinity`: the same kernels under several placement policies and nesting shapes,
//! repeated, side by side with their BSP predictions.
//!
//! The question an affinity experiment asks — does this kernel run faster with its processes
//! packed onto one package (compact), spread over the packages (scattered), on CPU sets of
//! one's own (manual), flat or nested per package — needs the same kernel run under each
//! placement, several times, and the results compared. This command does exactly that:
//!
//! * a **policy** ([`PolicySpec`]) is `compact`, `scattered`, `none` (planned as scattered,
//!   never bound) or `manual:<cpus>;<cpus>;...`, the syntax of `MBSP_AFFINITY`, so that an
//!   external program run under it (given after `--`) gets the same value in its environment;
//! * a **shape** ([`Shape`]) is `flat` (`-p` processes, or one per manual set), `flat:P`,
//!   `nested` (one process per package, or per manual set, each running one per core) or
//!   `nested:AxB`;
//! * each (kernel, policy, shape) is a configuration, run `--repeat` times, each time as a new
//!   run, in rounds: every round runs every configuration once, in a random order of its own,
//!   so that a change of the machine's state falls on all of them alike, not on the ones
//!   measured last; the machine's state is watched meanwhile ([`mbsp_tools::machine_state`]);
//! * the table gives each row's median with its confidence interval, a verdict for every
//!   pair compared, and the BSP prediction, judged only where the measurement is trusted
//!   ([`report`]);
//! * an external program is run the same way, its shape passed as `MBSP_SHAPE` and its own
//!   figure used when it reports one ([`program`]).
//!
//! On a machine that is not this one (`--xml`, `--synthetic`, or `MBSP_TOPOLOGY`) nothing can
//! be run or bound: the command prints the plans of every policy side by side instead
//! ([`plan_view`]), with the code of `mbsp topo`.

pub mod kernels;
pub mod plan_view;
pub mod program;
pub mod report;

use crate::cli;
use mbsp_tools::machine_state::Snapshot;
use mbsp_tools::placement::{self, Count, Process};
use mbsp_tools::state_rounds::{self, Pass};
use mbsp_tools::{Error, Result};
use mbsp_topology::{Level, Loaded, Machine, Policy};
use std::path::PathBuf;

/// A placement policy as the user wrote it: its label and the runtime's [`Policy`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicySpec {
    /// What the user wrote (trimmed): `compact`, `scattered` or `manual:...`; also the value
    /// of `MBSP_AFFINITY` an external program is given.
    pub label: String,
    /// The policy (scattered for `none`: planned so, never bound).
    pub policy: Policy,
    /// Whether processes are bound (all but `none`).
    pub bind: bool,
}

/// A parser of [`PolicySpec`] for `--policy`: `compact`, `scattered`, `none` or
/// `manual:<cpus>;...` (the syntax of `MBSP_AFFINITY`).
///
/// ```
/// let p = mbsp_cli::affinity::policy("manual:0-3;4-7").unwrap();
/// assert_eq!(p.policy, mbsp::Policy::Manual(vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]));
/// let none = mbsp_cli::affinity::policy("none").unwrap();
/// assert!(!none.bind && none.label == "none");
/// assert!(mbsp_cli::affinity::policy("tight").unwrap_err().to_string().starts_with("--policy tight: "));
/// ```
pub fn policy(s: &str) -> Result<PolicySpec> {
    let label = s.trim().to_string();
    let bad = |why: String| Error::usage(format!("--policy {s}: {why}"));
    if label.is_empty() {
        return Err(bad(
            "use compact, scattered, none or manual:<cpus>;<cpus>;... (e.g. manual:0-3;4-7)".into(),
        ));
    }
    let (policy, bind) = mbsp::parse_affinity(&label).map_err(|e| bad(e.to_string()))?;
    if let Policy::Manual(sets) = &policy
        && let Some(i) = sets.iter().position(Vec::is_empty)
    {
        return Err(bad(format!("CPU set {i} is empty")));
    }
    Ok(PolicySpec {
        label,
        policy,
        bind,
    })
}

/// A nesting shape: how many processes, and whether each starts a nested run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// One run of `-p` processes (or one per manual CPU set; `Some(p)`: exactly `p`).
    Flat(Option<usize>),
    /// One process per package (or per manual CPU set), each running one per core of what it
    /// owns (`Some((a, b))`: `a` processes, each running `b`).
    Nested(Option<(usize, usize)>),
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shape::Flat(None) => f.write_str("flat"),
            Shape::Flat(Some(p)) => write!(f, "flat:{p}"),
            Shape::Nested(None) => f.write_str("nested"),
            Shape::Nested(Some((a, b))) => write!(f, "nested:{a}x{b}"),
        }
    }
}

/// A parser of [`Shape`] for `--shape`: `flat`, `flat:P`, `nested` or `nested:AxB`.
///
/// ```
/// use mbsp_cli::affinity::{Shape, shape};
/// assert_eq!(shape("nested:2x4").unwrap(), Shape::Nested(Some((2, 4))));
/// assert_eq!(shape("flat").unwrap(), Shape::Flat(None));
/// assert!(shape("nested:2x0").unwrap_err().to_string().starts_with("--shape nested:2x0: "));
/// ```
pub fn shape(s: &str) -> Result<Shape> {
    let t = s.trim();
    let bad = || {
        Error::usage(format!(
            "--shape {s}: use flat, flat:P, nested (per package x per core) or nested:AxB, \
             with positive counts"
        ))
    };
    let count = |x: &str| x.trim().parse::<usize>().ok().filter(|&n| n > 0);
    match t.split_once(':') {
        None if t == "flat" => Ok(Shape::Flat(None)),
        None if t == "nested" => Ok(Shape::Nested(None)),
        Some(("flat", p)) => count(p).map(|p| Shape::Flat(Some(p))).ok_or_else(bad),
        Some(("nested", ab)) => {
            let (a, b) = ab.split_once(['x', 'X']).ok_or_else(bad)?;
            match (count(a), count(b)) {
                (Some(a), Some(b)) => Ok(Shape::Nested(Some((a, b)))),
                _ => Err(bad()),
            }
        }
        _ => Err(bad()),
    }
}

impl Shape {
    /// The plan's levels (outermost first) under `policy`, with `p` processes for a plain
    /// `flat`: what `mbsp topo -p .. --nest ..` would be given.
    pub fn levels(&self, policy: &Policy, p: usize) -> Vec<Count> {
        let sets = match policy {
            Policy::Manual(sets) => Some(sets.len()),
            _ => None,
        };
        match *self {
            Shape::Flat(Some(p)) => vec![Count::N(p)],
            Shape::Flat(None) => vec![Count::N(sets.unwrap_or(p))],
            Shape::Nested(Some((a, b))) => vec![Count::N(a), Count::N(b)],
            Shape::Nested(None) => vec![
                sets.map_or(Count::Per(Level::Package), Count::N),
                Count::Per(Level::Core),
            ],
        }
    }
}

/// The kernels of `mbsp affinity`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum Kernel {
    /// STREAM triad a = b + s·c on each process's own arrays (memory bandwidth).
    Triad,
    /// An empty superstep (the BSP latency l).
    Sync,
    /// An h-relation of h one-word puts per process (the cost per message).
    Hword,
    /// An h-relation of one bulk put per destination, h words per process (the cost per word).
    Hbulk,
    /// A BSP FFT of random data (flat: BspFft; nested: the Multi-BSP FFT).
    Fft,
    /// The 2D BSP SpMV of the --matrix file (flat: plain; nested: per level).
    Spmv,
}

impl Kernel {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Triad => "triad",
            Kernel::Sync => "sync",
            Kernel::Hword => "hword",
            Kernel::Hbulk => "hbulk",
            Kernel::Fft => "fft",
            Kernel::Spmv => "spmv",
        }
    }
}

/// The command line of `mbsp affinity`.
#[derive(Clone, Debug, clap::Args)]
#[command(after_help = "\
Examples:
  mbsp affinity --quick
  mbsp affinity -k sync,hbulk,fft --policy compact --policy scattered --shape flat --shape nested
  mbsp affinity -k spmv --matrix m.mtx --policy manual:0-3;8-11 --policy compact --json
  mbsp affinity --xml server.xml -p 8 --shape flat --shape nested:2x4
  mbsp affinity -k sync --policy compact --policy scattered -- ./my_bsp_program arg")]
pub struct Options {
    /// Kernels to run, separated by commas (default: triad, sync, hword, hbulk, fft, and spmv
    /// with --matrix).
    #[arg(
        short = 'k',
        long = "kernels",
        value_enum,
        value_delimiter = ',',
        value_name = "K,.."
    )]
    pub kernels: Vec<Kernel>,
    /// A placement policy (repeat for several): compact, scattered, none (not bound) or
    /// manual:CPUS;CPUS;... (e.g. manual:0-3;4-7), as MBSP_AFFINITY takes it (default: compact
    /// and scattered).
    #[arg(long = "policy", value_name = "POLICY", value_parser = policy)]
    pub policies: Vec<PolicySpec>,
    /// A nesting shape (repeat for several): flat, flat:P, nested (one process per package or
    /// manual set, each running one per core) or nested:AxB (default: flat).
    #[arg(long = "shape", value_name = "SHAPE", value_parser = shape)]
    pub shapes: Vec<Shape>,
    /// Processes of a plain `flat` shape (default: the cores of one package, so that compact
    /// and scattered differ on a multi-socket machine).
    #[arg(short = 'p', long = "procs", value_name = "P", allow_hyphen_values = true,
          value_parser = cli::at_least("-p", 1))]
    pub p: Option<usize>,
    /// Runs of each configuration (a new run each time), in rounds of every configuration in
    /// random order; the median's 95% interval needs 6 or more, a verdict 4 or more.
    #[arg(long, default_value = "9", value_name = "N", allow_hyphen_values = true,
          value_parser = cli::at_least("--repeat", 1))]
    pub repeat: usize,
    /// The seed of the rounds' random orders (default: from the clock; the table and JSON
    /// say which, to repeat an experiment's order).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Time the external program by its wall clock (default: its own mbsp-figure: line, else
    /// its supersteps from the MBSP_PROFILE JSON this command asks it for, else wall clock).
    #[arg(long)]
    pub wall_clock: bool,
    /// Keep every run's figure even where the machine changed state during the rounds
    /// (default: where the probes before and after every run show one state around at least
    /// half of every configuration's runs, the figures are of those runs alone; the table says
    /// how many).
    #[arg(long)]
    pub all_rounds: bool,
    /// Tiny sizes and few iterations (seconds in all: for a first look and for tests).
    #[arg(long)]
    pub quick: bool,
    /// The Matrix Market file of the spmv kernel (.mtx or .mtx.gz).
    #[arg(long, value_name = "FILE")]
    pub matrix: Option<PathBuf>,
    /// Plan on an hwloc XML file instead of this machine (prints the plans, runs nothing).
    #[arg(long, value_name = "FILE")]
    pub xml: Option<String>,
    /// Plan on an hwloc synthetic description, e.g. "package:2 numa:2 core:8 pu:2" (prints the
    /// plans, runs nothing).
    #[arg(long, value_name = "DESC")]
    pub synthetic: Option<String>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write the table as CSV to FILE (one row per kernel, policy and shape).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Also write an SVG bar chart to FILE: per kernel and shape, each policy's median time
    /// relative to the fastest, with its range.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// An external program (C or Rust, built on mbsp) and its arguments, run under every
    /// policy and shape: MBSP_AFFINITY is the policy, MBSP_SHAPE the shape's process counts
    /// (e.g. 1x2: read it with mbsp::shape_from_env or mbsp_shape_level); timed by the figure
    /// it prints as "mbsp-figure: SECONDS", else its profile's supersteps, else wall clock.
    #[arg(last = true, value_name = "PROGRAM")]
    pub program: Vec<String>,
}

/// The machine the plans are made on, and whether it is this one (the run view) or a loaded
/// tree (the plan view).
fn machine(o: &Options) -> Result<Loaded> {
    match (&o.xml, &o.synthetic) {
        (Some(_), Some(_)) => Err(Error::usage("give --xml or --synthetic, not both")),
        (Some(f), None) => Machine::xml(f).map_err(|e| Error::io("").with_source(e)),
        (None, Some(s)) => Machine::synthetic(s).map_err(|e| Error::usage("").with_source(e)),
        (None, None) => Machine::current().map_err(|e| Error::usage("").with_source(e)),
    }
}

/// The experiment asked for, with defaults filled in and checked.
pub struct Experiment {
    /// The machine.
    pub loaded: Loaded,
    /// Kernels, in the order given.
    pub kernels: Vec<Kernel>,
    /// Policies, in the order given.
    pub policies: Vec<PolicySpec>,
    /// Shapes, in the order given.
    pub shapes: Vec<Shape>,
    /// Processes of a plain `flat` shape.
    pub p: usize,
}

impl Experiment {
    /// The experiment of `o`: defaults filled in, repeated values removed.
    pub fn of(o: &Options) -> Result<Experiment> {
        let loaded = machine(o)?;
        let m = &loaded.machine;
        let mut kernels = o.kernels.clone();
        if kernels.is_empty() {
            kernels = vec![
                Kernel::Triad,
                Kernel::Sync,
                Kernel::Hword,
                Kernel::Hbulk,
                Kernel::Fft,
            ];
            if o.matrix.is_some() {
                kernels.push(Kernel::Spmv);
            }
        }
        dedup(&mut kernels);
        if kernels.contains(&Kernel::Spmv) && o.matrix.is_none() {
            return Err(Error::usage(
                "the spmv kernel needs --matrix FILE (a Matrix Market file)",
            ));
        }
        let mut policies = o.policies.clone();
        if policies.is_empty() {
            policies = ["compact", "scattered"]
                .iter()
                .map(|s| policy(s))
                .collect::<Result<_>>()?;
        }
        dedup(&mut policies);
        let mut shapes = o.shapes.clone();
        if shapes.is_empty() {
            shapes.push(Shape::Flat(None));
        }
        dedup(&mut shapes);
        let per_package = m.packages().first().map_or(1, |p| p.cores.len()).max(1);
        let p = o.p.unwrap_or(per_package);
        Ok(Experiment {
            loaded,
            kernels,
            policies,
            shapes,
            p,
        })
    }
}

/// Removes later repeats of a value, keeping the first's place.
fn dedup<T: PartialEq + Clone>(v: &mut Vec<T>) {
    let mut seen: Vec<T> = Vec::new();
    v.retain(|x| {
        let new = !seen.contains(x);
        if new {
            seen.push(x.clone());
        }
        new
    });
}

/// Runs `mbsp affinity`: the plan view on a loaded tree, else every kernel under every
/// placement.
pub fn run(o: &Options) -> Result<()> {
    let e = Experiment::of(o)?;
    if !e.loaded.machine.source().is_real() {
        if o.csv.is_some() || o.plot.is_some() {
            return Err(Error::usage(
                "--csv and --plot need measurements: on a loaded machine (--xml, --synthetic, \
                 MBSP_TOPOLOGY) the plans are printed and nothing is run",
            ));
        }
        return plan_view::print(&e, o);
    }
    refuse_forced("mbsp affinity")?;
    let sizes = kernels::Sizes::new(o.quick);
    let matrix = match (&o.matrix, e.kernels.contains(&Kernel::Spmv)) {
        (Some(f), true) => Some(kernels::load_matrix(f, &e)?),
        _ => None,
    };
    let scratch = program::Scratch::new()?;
    let mut cells = Vec::new();
    let kernels = if o.program.is_empty() {
        &e.kernels[..]
    } else {
        // With a program, the kernels run only when asked for.
        &o.kernels[..]
    };
    for &k in kernels {
        for shape in &e.shapes {
            for pol in &e.policies {
                cells.push(kernels::prepare(
                    k,
                    pol,
                    *shape,
                    &e,
                    &sizes,
                    matrix.as_ref(),
                )?);
            }
        }
    }
    if !o.program.is_empty() {
        for shape in &e.shapes {
            for pol in &e.policies {
                let i = cells.len();
                cells.push(program::cell(
                    &o.program,
                    pol,
                    *shape,
                    &e,
                    &scratch,
                    o.wall_clock,
                    i,
                )?);
            }
        }
    }
    let seed = o.seed.unwrap_or_else(clock_seed);
    let rounds = rounds(&mut cells, o.repeat, seed, o.all_rounds)?;
    let rows = cells.into_iter().map(|c| c.row).collect();
    let out = report::Report {
        rows,
        state: rounds.state,
        set_aside: rounds.set_aside,
        seed,
        e: &e,
        o,
    };
    if let Some(f) = &o.csv {
        out.csv(f)?;
    }
    if let Some(f) = &o.plot {
        out.plot(f)?;
    }
    if o.json {
        println!("{:#}", out.json());
    } else {
        print!("{}", out.table());
    }
    Ok(())
}

/// A command that compares policies cannot run when `MBSP_AFFINITY` forces one on every run:
/// the error says so.
pub(crate) fn refuse_forced(command: &str) -> Result<()> {
    match mbsp::forced_affinity() {
        None => Ok(()),
        Some(_) => Err(Error::usage(format!(
            "{command} compares placement policies, but MBSP_AFFINITY={} forces one on every \
             run: unset it (give a program's forced policies as --policy force:...)",
            std::env::var(mbsp::AFFINITY_ENV).unwrap_or_default()
        ))),
    }
}

/// A seed from the clock (nanoseconds since the epoch, mixed).
fn clock_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    mbsp::rng::SplitMix64::mix(t) % 1_000_000
}

/// Runs `repeat` rounds of every cell that runs, each round in a random order of its own
/// (from `seed`), watching the machine before and after every run; progress on stderr. Unless
/// `all_rounds`, where the machine changed state during the rounds but held one state around
/// most runs, and most of every configuration's, the cells keep the figures of those runs
/// alone; configurations that ran mostly in another state run again first (at most `repeat`
/// more times each; [`mbsp_tools::state_rounds`], each run a measurement).
fn rounds(
    cells: &mut [kernels::Cell<'_>],
    repeat: usize,
    seed: u64,
    all_rounds: bool,
) -> Result<report::Rounds> {
    rounds_probed(cells, repeat, seed, all_rounds, &mut Snapshot::probed)
}

/// [`rounds`], the machine probed by `probe`.
fn rounds_probed(
    cells: &mut [kernels::Cell<'_>],
    repeat: usize,
    seed: u64,
    all_rounds: bool,
    probe: &mut dyn FnMut() -> Snapshot,
) -> Result<report::Rounds> {
    let mut rng = mbsp::rng::SplitMix64::new(seed);
    let mut order: Vec<usize> = (0..cells.len()).filter(|&i| cells[i].runs()).collect();
    let orders: Vec<Vec<usize>> = (0..repeat)
        .map(|_| {
            rng.shuffle(&mut order);
            order.clone()
        })
        .collect();
    let start = std::time::Instant::now();
    let o = state_rounds::Options {
        again: repeat,
        again_all: false,
        all: all_rounds,
    };
    // Probed after every run, not every round: this machine kind changes state within
    // seconds, within a round.
    let out = state_rounds::measure(cells.len(), &orders, o, probe, &mut |i, pass| {
        match pass {
            Pass::Round {
                round,
                rounds,
                index: 0,
                len,
            } => eprintln!(
                "affinity: round {} of {rounds}: {len} configurations in random order ({:.1} s \
                 so far)",
                round + 1,
                start.elapsed().as_secs_f64()
            ),
            Pass::Again {
                pass,
                passes,
                index: 0,
                len,
            } => eprintln!(
                "affinity: again ({pass}/{passes}): {len} configurations ran mostly in another \
                 state of the machine than most runs"
            ),
            _ => {}
        }
        cells[i].run_once()
    })?;
    let Some(set_aside) = out.set_aside() else {
        if !out.whole.quiet() {
            eprintln!("affinity: warning: {}", out.whole.line());
        }
        return Ok(report::Rounds {
            state: out.whole,
            set_aside: None,
        });
    };
    let kept = out.kept_of(cells.len());
    for (c, runs) in cells.iter_mut().zip(kept) {
        c.keep_runs(&runs);
    }
    eprintln!(
        "affinity: the machine changed state during the rounds; keeping the {} of {} runs taken \
         in one state (--all-rounds keeps every run): {}",
        set_aside.kept,
        set_aside.of,
        out.state.line_during("those runs")
    );
    Ok(report::Rounds {
        state: out.state,
        set_aside: Some(set_aside),
    })
}

pub(crate) fn plan_of(m: &Machine, levels: &[Count], policy: &Policy) -> Result<Vec<Process>> {
    placement::plan(m, levels, policy)
        .map_err(|e| e.context(format!("the plan of {}", levels_text(levels))))
}

/// Levels as `mbsp topo` prints them: `4`, `one per package, nested: one per core`.
pub(crate) fn levels_text(levels: &[Count]) -> String {
    let shown: Vec<String> = levels.iter().map(Count::to_string).collect();
    shown.join(", nested: ")
}

#[cfg(test)]
mod tests {
    use super::kernels::{Cell, Sample};
    use super::report::Row;
    use super::*;
    use std::sync::Mutex;

    fn row(name: &str) -> Row {
        Row {
            kernel: name.into(),
            policy: "compact".into(),
            shape: "flat".into(),
            plan: String::new(),
            fan_outs: Vec::new(),
            p: None,
            size: String::new(),
            iterations: 1,
            samples: Vec::new(),
            predicted: None,
            model: String::new(),
            missing: Vec::new(),
            figure: String::new(),
            params_level: String::new(),
            packages: Vec::new(),
            bound: None,
            skipped: None,
        }
    }

    #[test]
    fn a_prediction_made_in_every_round_is_their_median() {
        // Rounds predict 3, 1, NaN (not kept), 2: after each the row holds the median so far.
        let preds = [Some(3.0), Some(1.0), Some(f64::NAN), Some(2.0), None];
        let mut cell = counting_cell(move |k| Sample {
            predicted: preds[k],
            ..secs(1.0)
        });
        let mut seen = Vec::new();
        for _ in 0..preds.len() {
            cell.run_once().unwrap();
            seen.push(cell.row.predicted);
        }
        assert_eq!(
            seen,
            [Some(3.0), Some(2.0), Some(2.0), Some(2.0), Some(2.0)]
        );
        assert_eq!(cell.row.samples.len(), preds.len());
    }

    #[test]
    fn runs_set_aside_take_their_figures_and_predictions_with_them() {
        // Run r measures 10 + r seconds and predicts 20 + r, except run 2: no prediction.
        let mut cell = counting_cell(|r| Sample {
            predicted: (r != 2).then_some(20.0 + r as f64),
            ..secs(10.0 + r as f64)
        });
        for _ in 0..6 {
            cell.run_once().unwrap();
        }
        assert_eq!(cell.row.predicted, Some(23.0));
        cell.keep_runs(&[0, 2, 4, 5]);
        assert_eq!(cell.row.samples, [10.0, 12.0, 14.0, 15.0]);
        // The predictions of runs 0, 4 and 5 (run 2 made none): their median.
        assert_eq!(cell.row.predicted, Some(24.0));
    }

    /// `n` cells whose runs log their index in `log`; cell `i`'s run `r` (its r-th) measures
    /// `sample(i, r)`.
    fn logging_cells<'a>(
        n: usize,
        log: &'a Mutex<Vec<usize>>,
        sample: fn(usize, usize) -> Sample,
    ) -> Vec<Cell<'a>> {
        (0..n)
            .map(|i| {
                let mut r = 0;
                Cell::new(
                    row(&format!("k{i}")),
                    Box::new(move || {
                        log.lock().unwrap().push(i);
                        r += 1;
                        Ok(sample(i, r - 1))
                    }),
                )
            })
            .collect()
    }

    /// A cell of `fft` whose `r`-th run (from 0) measures `sample(r)`.
    fn counting_cell(mut sample: impl FnMut(usize) -> Sample + Send + 'static) -> Cell<'static> {
        let mut r = 0;
        Cell::new(
            row("fft"),
            Box::new(move || {
                r += 1;
                Ok(sample(r - 1))
            }),
        )
    }

    fn secs(secs: f64) -> Sample {
        Sample {
            secs,
            bound: Some(true),
            figure: None,
            predicted: None,
        }
    }

    #[test]
    fn rounds_run_every_configuration_once_each_in_orders_of_their_own() {
        let log = Mutex::new(Vec::new());
        let mut cells = logging_cells(6, &log, |i, _| secs(1.0 + i as f64));
        rounds(&mut cells, 5, 42, true).unwrap();
        let log = log.lock().unwrap().clone();
        let orders: Vec<&[usize]> = log.chunks(6).collect();
        assert_eq!(orders.len(), 5);
        for o in &orders {
            let mut sorted = o.to_vec();
            sorted.sort_unstable();
            assert_eq!(sorted, [0, 1, 2, 3, 4, 5], "{log:?}");
        }
        assert!(
            orders.windows(2).any(|w| w[0] != w[1]),
            "the rounds' orders are random: {log:?}"
        );
        for (i, c) in cells.iter().enumerate() {
            assert_eq!(c.row.samples, vec![1.0 + i as f64; 5]);
            assert_eq!(c.row.bound, Some(true));
        }
        // The same seed, the same orders.
        let again = Mutex::new(Vec::new());
        let mut cells = logging_cells(6, &again, |_, _| Sample {
            figure: Some("the program's"),
            ..secs(1.0)
        });
        rounds(&mut cells, 5, 42, true).unwrap();
        assert_eq!(*again.lock().unwrap(), log);
        assert_eq!(cells[0].row.figure, "the program's");
    }

    #[test]
    fn configurations_that_ran_in_another_state_run_again_and_keep_runs_of_one() {
        // Cell i's run r measures 100 i + r seconds. The machine is far (a line's round trip
        // of 400 ns, against 100) after every run of cell 2 in the first three rounds of five.
        let log = Mutex::new(Vec::new());
        let mut cells = logging_cells(4, &log, |i, r| secs((100 * i + r) as f64));
        let probes = Mutex::new(Vec::new());
        let mut probe = || {
            let log = log.lock().unwrap();
            let far = log.len() <= 12 && log.last() == Some(&2);
            let line = if far { 400.0 } else { 100.0 };
            probes.lock().unwrap().push(line);
            Snapshot::with_probes(Some(line), Some(22.0))
        };
        let got = rounds_probed(&mut cells, 5, 7, false, &mut probe).unwrap();
        let log = log.lock().unwrap().clone();
        let probes = probes.lock().unwrap().clone();
        assert!(log.len() > 20, "some cells ran again: {log:?}");
        assert!(log[20..].contains(&2), "cell 2 ran again: {log:?}");
        // Each cell keeps exactly the runs whose probes before and after were near.
        let mut runs = [0usize; 4];
        let mut want = vec![Vec::new(); 4];
        for (k, &i) in log.iter().enumerate() {
            if probes[k] == 100.0 && probes[k + 1] == 100.0 {
                want[i].push((100 * i + runs[i]) as f64);
            }
            runs[i] += 1;
        }
        for (i, c) in cells.iter().enumerate() {
            assert_eq!(c.row.samples, want[i], "cell {i}: {log:?} {probes:?}");
            assert!(2 * want[i].len() >= runs[i], "cell {i} keeps half its runs");
        }
        let aside = got.set_aside.expect("runs set aside");
        assert_eq!(aside.of, log.len());
        assert_eq!(aside.kept, want.iter().map(Vec::len).sum::<usize>());
        assert_eq!(got.state.line_ns, Some((100.0, 100.0)));
        assert_eq!(aside.whole.line_ns, Some((100.0, 400.0)));
    }
}
