//! The kernels of `mbsp affinity`, each timed under one placement, and the external program.
//!
//! Every measurement is a new run placed by the policy and shape asked for: in a nested shape
//! the kernel runs inside each nested run (the processes of one package, say) while all the
//! nested runs go at once. A process times `iterations` steps between two syncs after one
//! untimed step; a repeat's figure is the slowest process's seconds per step. FFT and SpMV
//! results are checked, so that a placement that breaks them fails instead of looking fast.

use super::report::Row;
use super::{Experiment, Kernel, PolicySpec, Shape, levels_text, plan_of};
use mbsp::{Binding, Ctx, Run};
use mbsp_algorithms::cost::Params;
use mbsp_algorithms::fft::{BspFft, Complex, FftCost, MultiFft, Order, kernel_len};
use mbsp_algorithms::sparse::partition::{Options as PartitionOptions, partition};
use mbsp_algorithms::sparse::spmv::{HierPlan, HierSpmv, Spmv, SpmvPlan};
use mbsp_algorithms::sparse::{CooMatrix, mtx};
use mbsp_tools::placement::{Count, Process, leaves};
use mbsp_tools::preflight::{self, Need};
use mbsp_tools::{Classify, Error, Result};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

/// Problem sizes and iterations per repeat of each kernel.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Elements of each of the triad's three arrays, per process.
    pub triad_n: usize,
    /// Triads per repeat.
    pub triad_iters: usize,
    /// Empty syncs per repeat.
    pub sync_iters: usize,
    /// One-word puts per process per superstep.
    pub hword_h: usize,
    /// Words per process per superstep of the bulk h-relation.
    pub hbulk_h: usize,
    /// Supersteps per repeat of either h-relation.
    pub h_iters: usize,
    /// FFT length.
    pub fft_n: usize,
    /// Transforms per repeat (even: forward and inverse alternate, and the data is checked).
    pub fft_iters: usize,
    /// Multiplies per repeat.
    pub spmv_iters: usize,
}

impl Sizes {
    /// The sizes of a normal run, or of `--quick` (tiny).
    pub fn new(quick: bool) -> Sizes {
        if quick {
            Sizes {
                triad_n: 1 << 12,
                triad_iters: 5,
                sync_iters: 50,
                hword_h: 64,
                hbulk_h: 1 << 12,
                h_iters: 5,
                fft_n: 1 << 10,
                fft_iters: 4,
                spmv_iters: 4,
            }
        } else {
            Sizes {
                triad_n: 1 << 21,
                triad_iters: 10,
                sync_iters: 1000,
                hword_h: 4096,
                hbulk_h: 1 << 18,
                h_iters: 20,
                fft_n: 1 << 20,
                fft_iters: 10,
                spmv_iters: 50,
            }
        }
    }
}

/// The spmv kernel's matrix and the plans made for it (one partitioning per process count,
/// shared by every policy).
pub struct Matrix {
    /// The file's name, for the table.
    pub name: String,
    /// The matrix.
    pub a: CooMatrix,
    /// Its sequential product with [`x`](Matrix::x), and each row's scale (sum of the terms'
    /// magnitudes) for the check.
    want: Vec<f64>,
    scale: Vec<f64>,
    /// The vector multiplied.
    pub x: Vec<f64>,
    flat: std::sync::Mutex<BTreeMap<usize, std::sync::Arc<SpmvPlan>>>,
    hier: std::sync::Mutex<BTreeMap<(usize, usize), std::sync::Arc<HierPlan>>>,
}

/// Reads the matrix of the spmv kernel (refused before reading if it cannot fit in memory
/// with the largest process count of the experiment).
pub fn load_matrix(file: &Path, e: &Experiment) -> Result<Matrix> {
    let most = e
        .shapes
        .iter()
        .flat_map(|s| e.policies.iter().map(move |pol| leaf_count(e, s, pol)))
        .max()
        .unwrap_or(1);
    mbsp_tools::preflight::spmv_file(file, most)?;
    let a = mtx::read_path(file).map_err(|e| Error::io("").with_source(e))?;
    let x: Vec<f64> = (0..a.cols)
        .map(|j| ((j.wrapping_mul(2_654_435_761)) % 1000) as f64 / 1000.0 - 0.5)
        .collect();
    let (mut want, mut scale) = (vec![0.0; a.rows], vec![0.0; a.rows]);
    for k in 0..a.nnz() {
        let (i, j) = (a.row_idx[k] as usize, a.col_idx[k] as usize);
        want[i] += a.vals[k] * x[j];
        scale[i] += (a.vals[k] * x[j]).abs();
    }
    let name = file
        .file_name()
        .map_or("?".into(), |n| n.to_string_lossy().into_owned());
    eprintln!(
        "affinity: {name}: {} x {}, {} nonzeros",
        a.rows,
        a.cols,
        a.nnz()
    );
    Ok(Matrix {
        name,
        a,
        want,
        scale,
        x,
        flat: Default::default(),
        hier: Default::default(),
    })
}

/// The number of leaf processes of `shape` under `pol` on the experiment's machine (0 if it
/// cannot be planned).
fn leaf_count(e: &Experiment, shape: &Shape, pol: &PolicySpec) -> usize {
    let levels = shape.levels(&pol.policy, e.p);
    plan_of(&e.loaded.machine, &levels, &pol.policy)
        .map(|nodes| leaves(&nodes).len())
        .unwrap_or(0)
}

/// One timed step of a kernel in one process (its data set up in the closure).
type Step = Box<dyn FnMut(&mut Ctx) -> mbsp::Result<()>>;

/// What one process of a measurement reports: seconds per step, and whether it was bound.
pub type Leaf = (f64, bool);

/// Runs `step` in every leaf of `levels` under `policy`: `iters` timed steps after one
/// untimed one; returns the slowest leaf's seconds per step and whether all were bound.
fn on_leaves<S>(levels: &[Count], policy: &PolicySpec, iters: usize, step: &S) -> Result<Leaf>
where
    S: Fn(&mut Ctx) -> mbsp::Result<Step> + Sync,
{
    let leaf = |ctx: &mut Ctx| -> mbsp::Result<Leaf> {
        let mut one = step(ctx)?;
        one(ctx)?; // warm-up: first touch, caches, and the processes lined up by the sync
        ctx.sync()?;
        let t = Instant::now();
        for _ in 0..iters {
            one(ctx)?;
        }
        ctx.sync()?;
        let secs = t.elapsed().as_secs_f64() / iters as f64;
        Ok((secs, matches!(ctx.placement().binding, Binding::Applied(_))))
    };
    let per_top = top_run(&levels[0], policy).run(|ctx| {
        let Some(inner) = levels.get(1) else {
            return Ok(vec![leaf(ctx)?]);
        };
        ctx.sync()?; // the nested runs start together
        let r = ctx.run_with(run_of(inner), leaf)?;
        ctx.sync()?;
        Ok(r)
    })?;
    Ok(per_top
        .into_iter()
        .flatten()
        .fold((0.0, true), |(t, b), (s, bound)| {
            (f64::max(t, s), b && bound)
        }))
}

/// A run of `count` processes (options only).
fn run_of(count: &Count) -> Run {
    match count {
        Count::N(p) => Run::new(*p),
        Count::Per(level) => Run::per(*level),
    }
}

/// The top-level run of a measurement: `count` processes placed by `policy`.
fn top_run(count: &Count, policy: &PolicySpec) -> Run {
    run_of(count)
        .policy(policy.policy.clone())
        .bind(policy.bind)
}

/// The fan-outs of a plan (`[p]`, or `[a, b]` when every top process has `b` children), or
/// why the plan is not uniform.
pub(crate) fn fan_outs(nodes: &[Process]) -> std::result::Result<Vec<usize>, String> {
    let a = nodes.len();
    let kids: Vec<usize> = nodes.iter().map(|n| n.children.len()).collect();
    match kids.first() {
        None | Some(0) => Ok(vec![a]),
        Some(&b) if kids.iter().all(|&k| k == b) => Ok(vec![a, b]),
        _ => Err(format!(
            "the nested runs differ in size ({kids:?}); this kernel needs equal ones"
        )),
    }
}

/// One repeat's result: its figure in seconds (per step, the slowest process's, for the
/// kernels), whether every process was bound (`None`: not known, for a program), and where the
/// figure came from when that varies (a program's).
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// Seconds.
    pub secs: f64,
    /// Whether every process was bound.
    pub bound: Option<bool>,
    /// What the figure is, if the row's description does not say.
    pub figure: Option<&'static str>,
    /// The BSP prediction with the model's inputs measured in this round (`None`: the row's
    /// prediction, if any, was made once when the command prepared it).
    pub predicted: Option<f64>,
}

impl From<Leaf> for Sample {
    fn from((secs, bound): Leaf) -> Sample {
        Sample {
            secs,
            bound: Some(bound),
            figure: None,
            predicted: None,
        }
    }
}

/// One repeat of a configuration.
pub type Job<'a> = Box<dyn FnMut() -> Result<Sample> + 'a>;

/// One configuration of the experiment (a kernel, or the program, under one policy and
/// shape): its row, filled as repeats are run, and the job that runs one repeat (`None`: the
/// configuration does not apply, and the row says why).
pub struct Cell<'a> {
    /// The row of the table.
    pub row: Row,
    job: Option<Job<'a>>,
    /// The prediction made in each round so far (see [`Sample::predicted`]; `None`: none
    /// that round).
    predictions: Vec<Option<f64>>,
}

impl<'a> Cell<'a> {
    /// A cell that runs `job`.
    pub fn new(row: Row, job: Job<'a>) -> Cell<'a> {
        Cell {
            row,
            job: Some(job),
            predictions: Vec::new(),
        }
    }

    /// Runs one repeat and records it.
    pub fn run_once(&mut self) -> Result<()> {
        let Some(job) = self.job.as_mut() else {
            return Ok(());
        };
        let s = job().map_err(|err| {
            err.context(format!(
                "{} under {} ({})",
                self.row.kernel, self.row.policy, self.row.shape
            ))
        })?;
        let first = self.row.samples.is_empty();
        self.row.samples.push(s.secs);
        // A model input measured once, when the command prepared the row, catches the machine
        // in one moment; measured in every round it is as interleaved as the figures, and the
        // median of the predictions is compared with the median of the figures.
        self.predictions.push(s.predicted.filter(|t| t.is_finite()));
        self.predict();
        self.row.bound = match (first, self.row.bound, s.bound) {
            (true, _, b) => b,
            (false, Some(a), Some(b)) => Some(a && b),
            _ => None,
        };
        if let Some(f) = s.figure {
            if first {
                self.row.figure = f.to_string();
            } else if self.row.figure != f {
                self.row.figure = "mixed: the runs reported different figures".into();
            }
        }
        Ok(())
    }

    /// The row's prediction: the median of the rounds' own, where they made any.
    fn predict(&mut self) {
        let made: Vec<f64> = self.predictions.iter().flatten().copied().collect();
        if !made.is_empty() {
            self.row.predicted = Some(mbsp_tools::stats::median(&made));
        }
    }

    /// Keeps the figures (and the predictions) of the given runs only, numbered from 0 in the
    /// order they ran ([`mbsp_tools::machine_state::Watch::steady_rounds`]).
    pub fn keep_runs(&mut self, kept: &[usize]) {
        let samples = &self.row.samples;
        self.row.samples = kept
            .iter()
            .filter_map(|&r| samples.get(r).copied())
            .collect();
        let predictions = &self.predictions;
        self.predictions = kept
            .iter()
            .filter_map(|&r| predictions.get(r).copied())
            .collect();
        self.predict();
    }

    /// Whether it runs at all.
    pub fn runs(&self) -> bool {
        self.job.is_some()
    }
}

/// Where the processes that communicate in a kernel (one leaf run: all of a flat run, one
/// nested run of a nested one) sit: how many of them, and on how many packages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Group {
    /// Processes.
    pub p: usize,
    /// Packages they use.
    pub packages: usize,
    /// Whether they are a nested run.
    pub nested: bool,
}

impl Group {
    /// The group of a plan: the top-level processes of a flat plan, the children of process 0
    /// of a nested one.
    pub fn of(nodes: &[Process]) -> Group {
        let (members, nested): (&[Process], bool) = match nodes.first() {
            Some(n) if !n.children.is_empty() => (&n.children, true),
            _ => (nodes, false),
        };
        let mut packages: Vec<usize> = members
            .iter()
            .flat_map(|n| n.packages.iter().copied())
            .collect();
        packages.sort_unstable();
        packages.dedup();
        Group {
            p: members.len(),
            packages: packages.len(),
            nested,
        }
    }

    /// The level of the machine tree whose parameters describe the group, as `mbsp params`
    /// names them: `package` when it sits in one package and is a nested run, or in one
    /// package of a machine of several (its syncs and words never cross the packages' link),
    /// else `machine`.
    pub fn level(&self, m: &mbsp::Machine) -> &'static str {
        if self.packages <= 1 && (self.nested || m.packages().len() > 1) {
            "package"
        } else {
            "machine"
        }
    }
}

/// The BSP parameters of a group under a policy: its level's, measured with as many processes
/// under that policy where the file in force has them
/// ([`mbsp::params::Params::for_placement`]).
fn params_of(policy: &PolicySpec, m: &mbsp::Machine, group: Group) -> Params {
    Params::for_placement(group.level(m), group.p, &policy.label)
}

/// The BSP prediction of the parameter-only kernels (triad, sync, the h-relations) with
/// `params` for a group of `p` processes: seconds per step, the formula, and the parameters
/// it uses.
pub fn model(
    k: Kernel,
    params: &Params,
    sizes: &Sizes,
    p: usize,
) -> Option<(f64, &'static str, &'static [&'static str])> {
    match k {
        Kernel::Triad => Some((
            2.0 * sizes.triad_n as f64 / params.r_stream,
            "2n / r_stream",
            &["r_stream"],
        )),
        Kernel::Sync => Some((params.l, "l", &["l"])),
        Kernel::Hword => {
            let h = sizes.hword_h as f64;
            Some((params.time_of(1, h, h), "l + h g_msg", &["l", "g_msg"]))
        }
        Kernel::Hbulk => {
            // One bulk put per destination; what a process sends and receives moves at the
            // rate measured for that size where mbsp params' ladder reaches it, else at g or,
            // past the cache, at the far rate.
            let (h, puts) = (sizes.hbulk_h as f64, (p - 1).max(1) as f64);
            let bytes = 16.0 * h;
            let t = params.for_data(bytes).time_of(1, h, puts);
            Some(if params.g_ladder.at(bytes).is_some() {
                (
                    t,
                    "l + h g(16h), the rate of mbsp params' ladder of bulk puts at that size (+ \
                     g_msg - g per put)",
                    &["l", "cache_ladder"],
                )
            } else if bytes > params.cache {
                (
                    t,
                    "l + h g_far (+ g_msg - g_far per put)",
                    &["l", "g_far", "cache"],
                )
            } else {
                (t, "l + h g (+ g_msg - g per put)", &["l", "g"])
            })
        }
        Kernel::Fft | Kernel::Spmv => None,
    }
}

/// Prepares kernel `k` under `pol` and `shape`: its row (what it is, its prediction) and the
/// job of one repeat.
pub fn prepare<'a>(
    k: Kernel,
    pol: &'a PolicySpec,
    shape: Shape,
    e: &'a Experiment,
    sizes: &'a Sizes,
    matrix: Option<&'a Matrix>,
) -> Result<Cell<'a>> {
    let m = &e.loaded.machine;
    let levels = shape.levels(&pol.policy, e.p);
    let context = |err: Error| err.context(format!("{} under {} ({shape})", k.name(), pol.label));
    let nodes = plan_of(m, &levels, &pol.policy).map_err(context)?;
    let leaves = leaves(&nodes);
    let mut packages: Vec<usize> = leaves
        .iter()
        .flat_map(|n| n.packages.iter().copied())
        .collect();
    packages.sort_unstable();
    packages.dedup();
    let fans = fan_outs(&nodes);
    // The processes that communicate in the kernel: a leaf's run.
    let group = Group::of(&nodes);
    let params = params_of(pol, m, group);
    eprintln!(
        "affinity: {} under {}, {shape} ({} processes): preparing",
        k.name(),
        pol.label,
        leaves.len()
    );
    let mut row = Row {
        kernel: k.name().into(),
        policy: pol.label.clone(),
        shape: shape.to_string(),
        plan: levels_text(&levels),
        fan_outs: fans.clone().unwrap_or_default(),
        p: Some(leaves.len()),
        size: String::new(),
        iterations: 0,
        samples: Vec::new(),
        predicted: None,
        model: String::new(),
        missing: Vec::new(),
        figure: "seconds per step, the slowest process's".into(),
        params_level: format!("{} p={}", group.level(m), group.p),
        packages,
        bound: None,
        skipped: None,
    };
    let job: Option<Job<'a>> = match k {
        Kernel::Triad => {
            let n = sizes.triad_n;
            need_per_leaf(leaves.len(), 3 * n as u128, "the triad's 3 arrays")?;
            row.size = format!("n = {n} per process");
            row.iterations = sizes.triad_iters;
            let iters = sizes.triad_iters;
            Some(Box::new(move || {
                on_leaves(&levels, pol, iters, &triad_step(n)).map(Sample::from)
            }))
        }
        Kernel::Sync => {
            row.size = "empty superstep".into();
            row.iterations = sizes.sync_iters;
            let iters = sizes.sync_iters;
            let step =
                |_: &mut Ctx| -> mbsp::Result<Step> { Ok(Box::new(|ctx: &mut Ctx| ctx.sync())) };
            Some(Box::new(move || {
                on_leaves(&levels, pol, iters, &step).map(Sample::from)
            }))
        }
        Kernel::Hword | Kernel::Hbulk => {
            let words = k == Kernel::Hword;
            let h = if words { sizes.hword_h } else { sizes.hbulk_h };
            need_per_leaf(leaves.len(), 2 * h as u128, "the h-relation's buffers")?;
            row.size = if words {
                format!("h = {h} one-word puts")
            } else {
                format!("h = {h} words in bulk puts")
            };
            row.iterations = sizes.h_iters;
            let iters = sizes.h_iters;
            Some(Box::new(move || {
                let step = |ctx: &mut Ctx| -> mbsp::Result<Step> { h_relation(ctx, h, words) };
                on_leaves(&levels, pol, iters, &step).map(Sample::from)
            }))
        }
        Kernel::Fft => {
            row.size = format!("n = {}", sizes.fft_n);
            row.iterations = sizes.fft_iters;
            match &fans {
                Ok(f) => match fft_job(levels, f.clone(), pol, params, sizes, &mut row) {
                    Ok(job) => Some(job),
                    Err(Skip::Not(why)) => {
                        row.skipped = Some(why);
                        None
                    }
                    Err(Skip::Failed(err)) => return Err(context(err)),
                },
                Err(why) => {
                    row.skipped = Some(why.clone());
                    None
                }
            }
        }
        Kernel::Spmv => {
            let mx = matrix.ok_or_else(|| Error::usage("the spmv kernel needs --matrix FILE"))?;
            row.size = format!("{}, nnz {}", mx.name, mx.a.nnz());
            row.iterations = sizes.spmv_iters;
            match &fans {
                Ok(f) => match spmv_job(
                    mx,
                    levels,
                    f.clone(),
                    pol,
                    params,
                    sizes.spmv_iters,
                    &mut row,
                ) {
                    Ok(job) => Some(job),
                    Err(Skip::Not(why)) => {
                        row.skipped = Some(why);
                        None
                    }
                    Err(Skip::Failed(err)) => return Err(context(err)),
                },
                Err(why) => {
                    row.skipped = Some(why.clone());
                    None
                }
            }
        }
    };
    if let Some((t, formula, keys)) = model(k, &params, sizes, group.p) {
        row.predicted = Some(t);
        row.model = formula.into();
        row.missing = missing(keys);
    }
    if let Some(why) = &row.skipped {
        eprintln!(
            "affinity: {} under {} ({shape}) skipped: {why}",
            k.name(),
            pol.label
        );
    }
    Ok(Cell {
        row,
        job,
        predictions: Vec::new(),
    })
}

/// The parameters among `keys` that the file in force does not give (the defaults stand in
/// for them: a prediction from them is not this machine's).
fn missing(keys: &[&str]) -> Vec<String> {
    let absent = mbsp::params::defaulted();
    keys.iter()
        .filter(|k| absent.contains(*k))
        .map(|k| k.to_string())
        .collect()
}

/// The triad's step: `a = b + 3c` on the process's own arrays of `n` doubles.
fn triad_step(n: usize) -> impl Fn(&mut Ctx) -> mbsp::Result<Step> + Sync {
    move |_: &mut Ctx| -> mbsp::Result<Step> {
        let (mut a, b, c) = (vec![0.0f64; n], vec![1.0f64; n], vec![2.0f64; n]);
        Ok(Box::new(move |_| {
            for ((a, b), c) in a.iter_mut().zip(&b).zip(&c) {
                *a = b + 3.0 * c;
            }
            std::hint::black_box(&mut a);
            Ok(())
        }))
    }
}

/// Refuses `words` 8-byte words per process on `leaves` processes if they cannot fit in memory.
fn need_per_leaf(leaves: usize, words: u128, what: &str) -> Result<()> {
    let mut need = Need::new();
    need.add(
        words.saturating_mul(leaves as u128),
        8,
        format!("{what} on {leaves} processes"),
    );
    need.add(
        leaves as u128,
        preflight::PER_PROCESS,
        format!("{leaves} processes"),
    );
    need.check()
}

/// One h-relation step: process `s` sends `h` words to the others (to itself when alone), as
/// `h` one-word puts (`words`) or one bulk put per destination; every process receives as
/// many words as it sends.
fn h_relation(ctx: &mut Ctx, h: usize, words: bool) -> mbsp::Result<Step> {
    let (p, s) = (ctx.nprocs(), ctx.pid());
    // Destinations s+1, s+2, ... (all others; itself when alone), `q` of them; destination
    // `(s + 1 + j) % p` receives this process's words in its slot `j`, which no other sender
    // uses.
    let q = (p - 1).max(1);
    let chunk = if words { 1 } else { (h / q).max(1) };
    let slots = if words { h } else { q };
    // At most max(h, q) words: q chunks of h / q, or h single words.
    let len = slots * chunk;
    let reg = ctx.push_reg(vec![0u64; len])?;
    ctx.sync()?;
    // Never zeros: a large zeroed vector is fresh pages that the kernel maps to its one
    // shared zero page until written, and process 0's sends would read that one page.
    let src = vec![s as u64 + 1; chunk];
    Ok(Box::new(move |ctx: &mut Ctx| {
        for j in 0..slots {
            let dest = (s + 1 + j % q) % p;
            ctx.put(dest, &src, &reg, j * chunk)?;
        }
        ctx.sync()
    }))
}

/// A model input measured in a round (see [`Sample::predicted`]), or a warning and no
/// prediction for the round when it cannot be measured: the round's figure is kept.
fn model_input<T, E: std::fmt::Display>(r: std::result::Result<T, E>, kernel: &str) -> Option<T> {
    r.map_err(|e| eprintln!("affinity: warning: {kernel}: no prediction this round: {e}"))
        .ok()
}

/// Why a kernel did not give a figure: it does not apply to this placement (a row that says
/// why), or it failed (the command fails).
enum Skip {
    Not(String),
    Failed(Error),
}

impl From<Error> for Skip {
    fn from(e: Error) -> Skip {
        Skip::Failed(e)
    }
}

impl From<mbsp::Error> for Skip {
    fn from(e: mbsp::Error) -> Skip {
        Skip::Failed(e.into())
    }
}

/// The job of the FFT of length `sizes.fft_n` on the fan-outs `fans` (flat: BspFft; nested:
/// MultiFft): one repeat is a new run of `fft_iters` transforms alternating forward and
/// inverse, the data checked at the end. The prediction goes into `row`.
fn fft_job<'a>(
    levels: Vec<Count>,
    fans: Vec<usize>,
    pol: &'a PolicySpec,
    params: Params,
    sizes: &Sizes,
    row: &mut Row,
) -> std::result::Result<Job<'a>, Skip> {
    let n = sizes.fft_n;
    let p: usize = fans.iter().product();
    if let Some(f) = fans.iter().find(|f| !f.is_power_of_two()) {
        return Err(Skip::Not(format!(
            "the FFT needs powers of two, not {f} processes"
        )));
    }
    if p > n {
        return Err(Skip::Not(format!("{p} processes exceed n = {n}")));
    }
    let mut need = Need::new();
    need.add(
        4 * n as u128,
        preflight::COMPLEX,
        format!("4 arrays of n = {n} complex numbers"),
    );
    need.check()?;
    // The model: every level's own parameters (the whole machine for the flat FFT; the
    // packages and one package for the nested one), r = rustfft's rate at the kernel length
    // each process runs, all processes at once, measured in every round (see
    // `Sample::predicted`).
    let nested = fans.len() > 1 && fans.iter().all(|&f| f > 1);
    let mut cost = mbsp_tools::params::fft_cost(&fans, &pol.label);
    if !nested {
        // One level, or a top level of one process: the FFT of the processes below is flat.
        cost = FftCost::uniform(params);
    }
    // A top level of one process hands its array to one nested run per transform: the FFT
    // below, plus that run's start and end (measured).
    let handed_down = fans.len() > 1 && fans[0] == 1;
    let predict = {
        let fans = fans.clone();
        let policy = pol.clone();
        move || -> Result<f64> {
            let mut rates = BTreeMap::new();
            // r where this configuration runs: its policy and binding.
            let cores = p.min(mbsp::nprocs());
            let place = |run: Run| run.policy(policy.policy.clone()).bind(policy.bind);
            let r = mbsp_tools::fft::rate_on(&mut rates, kernel_len(n, p), cores, place)?;
            let mut cost = cost;
            for prm in [&mut cost.flat, &mut cost.top, &mut cost.inner] {
                prm.r = r;
            }
            Ok(if nested {
                cost.choose(n, &fans).nested
            } else if handed_down {
                // The parts order (`Plan::new`), the nested run's start measured.
                cost.nested_start = mbsp_tools::params::nested_run_seconds(p)?;
                cost.top_of_one(n, p, Order::Parts)
            } else {
                cost.choose(n, &fans).flat
            })
        }
    };
    row.model = if nested {
        "Multi-BSP FFT cost, packages' and a package's parameters; r of rustfft".into()
    } else if handed_down {
        "BSP FFT cost of the nested run in the parts order, plus its start (measured); r of \
         rustfft"
            .into()
    } else {
        "BSP FFT cost; r of rustfft at the kernel length".into()
    };
    row.missing = missing(&["l", "g_direct"]);
    let x = mbsp_tools::fft::random(n, mbsp_tools::fft::SEED);
    let iters = sizes.fft_iters.next_multiple_of(2);
    Ok(Box::new(move || {
        let top = fans[0];
        let below = &fans[1..];
        let r = top_run(&levels[0], pol).run(|ctx| {
            let me = ctx.pid();
            let mine: Vec<Complex<f64>> = (me..n).step_by(top).map(|i| x[i]).collect();
            let mut local = mine.clone();
            let mut plan = Plan::new(ctx, n, below)?;
            plan.forward(ctx, &mut local)?; // warm-up
            plan.inverse(ctx, &mut local)?;
            ctx.sync()?;
            let t = Instant::now();
            for i in 0..iters {
                if i % 2 == 0 {
                    plan.forward(ctx, &mut local)?;
                } else {
                    plan.inverse(ctx, &mut local)?;
                }
            }
            ctx.sync()?;
            let secs = t.elapsed().as_secs_f64() / iters as f64;
            plan.free(ctx)?;
            let err = local
                .iter()
                .zip(&mine)
                .map(|(a, b)| (a - b).norm())
                .fold(0.0, f64::max);
            let bound = matches!(ctx.placement().binding, Binding::Applied(_));
            Ok((secs, err, bound))
        })?;
        let secs = r.iter().map(|x| x.0).fold(0.0, f64::max);
        let err = r.iter().map(|x| x.1).fold(0.0, f64::max);
        if err > 1e-9 {
            return Err(Error::run(format!(
                "FFT n = {n}: forward and inverse transforms differ from the data by {err:e}"
            )));
        }
        Ok(Sample {
            predicted: model_input(predict(), "fft"),
            ..Sample::from((secs, r.iter().all(|x| x.2)))
        })
    }))
}

/// The FFT plan of one top-level process: flat or Multi-BSP.
enum Plan {
    Flat(BspFft<f64>),
    Nested(MultiFft<f64>),
}

impl Plan {
    /// A top level of one process keeps its vector in the parts order: the flat row's
    /// transform leaves each process's part in the BSP FFT's own distribution, and so does a
    /// nested run in the parts order, so the two shapes do the same work. (The natural order
    /// moves the vector between the cores twice more, for the caller's sake: `mbsp-bench
    /// fft`'s `mbsp-top1` row.)
    fn new(ctx: &mut Ctx, n: usize, below: &[usize]) -> mbsp::Result<Plan> {
        Ok(if below.is_empty() {
            Plan::Flat(BspFft::new(ctx, n)?)
        } else if ctx.nprocs() == 1 {
            Plan::Nested(MultiFft::with_order(ctx, n, below, Order::Parts)?)
        } else {
            Plan::Nested(MultiFft::nested(ctx, n, below)?)
        })
    }
    fn forward(&mut self, ctx: &mut Ctx, x: &mut [Complex<f64>]) -> mbsp::Result<()> {
        match self {
            Plan::Flat(p) => p.forward(ctx, x),
            Plan::Nested(p) => p.forward(ctx, x),
        }
    }
    fn inverse(&mut self, ctx: &mut Ctx, x: &mut [Complex<f64>]) -> mbsp::Result<()> {
        match self {
            Plan::Flat(p) => p.inverse(ctx, x),
            Plan::Nested(p) => p.inverse(ctx, x),
        }
    }
    fn free(self, ctx: &mut Ctx) -> mbsp::Result<()> {
        match self {
            Plan::Flat(p) => p.free(ctx),
            Plan::Nested(p) => p.free(ctx),
        }
    }
}

/// The job of the SpMV of `mx` on the fan-outs `fans` (flat: the plain 2D SpMV; nested: the
/// hierarchical one): one repeat is a new run of `iters` multiplies, the result checked. The
/// partitioning is made once per fan-out and shared by every policy; the prediction goes into
/// `row`.
fn spmv_job<'a>(
    mx: &'a Matrix,
    levels: Vec<Count>,
    fans: Vec<usize>,
    pol: &'a PolicySpec,
    params: Params,
    iters: usize,
    row: &mut Row,
) -> std::result::Result<Job<'a>, Skip> {
    let a = &mx.a;
    let check = move |rows: &[u32], y: &[f64]| -> f64 {
        rows.iter()
            .zip(y)
            .map(|(&i, &v)| {
                let i = i as usize;
                mbsp_tools::spmv::entry_error(v, mx.want[i], mx.scale[i])
            })
            .fold(0.0, f64::max)
    };
    let fill = move |owned: &[u32], xs: &mut [f64]| {
        for (v, &j) in xs.iter_mut().zip(owned) {
            *v = mx.x[j as usize];
        }
    };
    let timed = move |ctx: &mut Ctx,
                      y: &mut Vec<f64>,
                      step: &mut dyn FnMut(&mut Ctx, &mut [f64]) -> mbsp::Result<()>|
          -> mbsp::Result<f64> {
        step(ctx, y)?; // warm-up
        ctx.sync()?;
        let t = Instant::now();
        for _ in 0..iters {
            step(ctx, y)?;
        }
        ctx.sync()?;
        Ok(t.elapsed().as_secs_f64() / iters as f64)
    };
    let bound = |ctx: &Ctx| matches!(ctx.placement().binding, Binding::Applied(_));
    // (seconds per multiply, relative error, bound, seconds per local phase alone: flat only).
    type Out = (f64, f64, bool, f64);
    if let [p] = *fans {
        let plan = {
            let mut cache = mx.flat.lock().unwrap_or_else(|e| e.into_inner());
            match cache.get(&p) {
                Some(plan) => plan.clone(),
                None => {
                    eprintln!("affinity: partitioning {} for p = {p}", mx.name);
                    let r = partition(a, p, &PartitionOptions::default()).or_usage()?;
                    let plan = std::sync::Arc::new(SpmvPlan::new(a, &r.dist).or_usage()?);
                    cache.insert(p, plan.clone());
                    plan
                }
            }
        };
        // The local phase's rate, t_nz, is timed in the same run as the multiplies, right
        // after them, under the same placement (every process its part at once, from sync to
        // sync): what this configuration's multiply computes at, in the machine's state of
        // that run (see `Sample::predicted`).
        row.model = "max nz t_nz + (h_fanout + h_fanin) g + q_fanout (g_get_msg - g) + \
                     q_fanin (g_msg - g) + 2 l; t_nz measured"
            .into();
        row.missing = missing(&["l", "g", "g_msg", "g_get_msg"]);
        let most_nz = plan.most_nnz().max(1);
        return Ok(Box::new(move || {
            let r: Vec<Out> = top_run(&levels[0], pol).run(|ctx| {
                let mut s = Spmv::new(ctx, &plan)?;
                let local = s.local();
                fill(&local.x_owned, s.x_mut(ctx)?);
                let mut y = vec![0.0; local.y_owned.len()];
                let secs = timed(ctx, &mut y, &mut |ctx, y| s.multiply(ctx, y))?;
                ctx.sync()?;
                let t = Instant::now();
                plan.procs[ctx.pid()].run_local_multiplies(iters);
                ctx.sync()?;
                let phase = t.elapsed().as_secs_f64() / iters as f64;
                Ok((secs, check(&local.y_owned, &y), bound(ctx), phase))
            })?;
            let phase = r.iter().map(|x| x.3).fold(0.0, f64::max);
            let predicted = plan.predict(&params, phase / most_nz as f64, false);
            checked(&r).map(|leaf| Sample {
                predicted: Some(predicted),
                ..Sample::from(leaf)
            })
        }));
    }
    let &[top, inner] = &fans[..] else {
        return Err(Skip::Not(format!(
            "fan-outs {fans:?}: one or two levels only"
        )));
    };
    let plan = {
        let mut cache = mx.hier.lock().unwrap_or_else(|e| e.into_inner());
        match cache.get(&(top, inner)) {
            Some(plan) => plan.clone(),
            None => {
                eprintln!("affinity: partitioning {} for {top} x {inner}", mx.name);
                let plan =
                    HierPlan::partition(a, top, inner, &PartitionOptions::default()).or_usage()?;
                let plan = std::sync::Arc::new(plan);
                cache.insert((top, inner), plan.clone());
                plan
            }
        }
    };
    // The local kernel's rate with every core of a package at once (the packages measured one
    // after another), and a nested run's start and end: measured in every round (see
    // `Sample::predicted`).
    let top_params = Params::for_placement("packages", top, &pol.label);
    let predict = {
        let plan = plan.clone();
        move || -> Result<Option<f64>> {
            mbsp_tools::spmv::hier_prediction(&plan, &top_params, &params)
        }
    };
    row.model = "top (h_fanout + h_fanin) g + 2 l, then per package a nested run (measured) of \
                 max nz t_nz (+ h_fanin g + l where cores sum partial rows)"
        .into();
    row.missing = missing(&["l", "g"]);
    Ok(Box::new(move || {
        let r: Vec<Out> = top_run(&levels[0], pol).run(|ctx| {
            let mut s = HierSpmv::new(ctx, &plan)?;
            let local = s.local();
            fill(&local.x_owned, s.x_mut(ctx)?);
            let mut y = vec![0.0; local.y_owned.len()];
            let secs = timed(ctx, &mut y, &mut |ctx, y| s.multiply(ctx, y))?;
            Ok((secs, check(&local.y_owned, &y), bound(ctx), 0.0))
        })?;
        let predicted = model_input(predict(), "spmv").flatten();
        checked(&r).map(|leaf| Sample {
            predicted,
            ..Sample::from(leaf)
        })
    }))
}

/// One repeat's figure (the slowest process) and binding, after checking its results.
fn checked(r: &[(f64, f64, bool, f64)]) -> Result<Leaf> {
    let err = r.iter().map(|x| x.1).fold(0.0, f64::max);
    if err > 1e-12 {
        return Err(Error::run(format!(
            "SpMV result differs from the sequential product: max relative error {err:e}"
        )));
    }
    Ok((
        r.iter().map(|x| x.0).fold(0.0, f64::max),
        r.iter().all(|x| x.2),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h_relations_deliver_h_words_to_every_process() {
        for (p, h, words) in [(1, 8, true), (3, 8, true), (3, 9, false), (4, 1, false)] {
            let got = mbsp::run(p, |ctx| {
                let mut step = h_relation(ctx, h, words)?;
                step(ctx)?;
                Ok(())
            });
            assert!(got.is_ok(), "p = {p}, h = {h}: {got:?}");
        }
    }

    #[test]
    fn a_plan_with_unequal_nested_runs_is_not_uniform() {
        let m = mbsp::Machine::synthetic("package:2 core:3 pu:1")
            .unwrap()
            .machine;
        let nodes = plan_of(&m, &[Count::N(2), Count::N(2)], &mbsp::Policy::Compact).unwrap();
        assert_eq!(fan_outs(&nodes).unwrap(), vec![2, 2]);
        let nodes = plan_of(
            &m,
            &[Count::N(2), Count::Per(mbsp::Level::Core)],
            &mbsp::Policy::Manual(vec![vec![0, 1, 2], vec![3]]),
        )
        .unwrap();
        assert!(fan_outs(&nodes).unwrap_err().contains("[3, 1]"));
    }
}
