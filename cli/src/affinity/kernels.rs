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
use mbsp_algorithms::fft::{BspFft, Complex, FftCost, MultiFft, kernel_len};
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
type Leaf = (f64, bool);

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
    run_of(count).policy(policy.policy.clone())
}

/// The fan-outs of a plan (`[p]`, or `[a, b]` when every top process has `b` children), or
/// why the plan is not uniform.
fn fan_outs(nodes: &[Process]) -> std::result::Result<Vec<usize>, String> {
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

/// Measures kernel `k` under `pol` and `shape`, `repeat` times.
pub fn measure(
    k: Kernel,
    pol: &PolicySpec,
    shape: Shape,
    e: &Experiment,
    sizes: &Sizes,
    repeat: usize,
    matrix: Option<&Matrix>,
) -> Result<Row> {
    let m = &e.loaded.machine;
    let levels = shape.levels(&pol.policy, e.p);
    let nodes = plan_of(m, &levels, &pol.policy)
        .map_err(|err| err.context(format!("{} under {} ({shape})", k.name(), pol.label)))?;
    let leaves = leaves(&nodes);
    let mut packages: Vec<usize> = leaves
        .iter()
        .flat_map(|n| n.packages.iter().copied())
        .collect();
    packages.sort_unstable();
    packages.dedup();
    let fans = fan_outs(&nodes);
    // The processes that communicate in the kernel: a leaf's run.
    let group = fans.as_ref().map_or(1, |f| *f.last().unwrap_or(&1));
    let params = if levels.len() > 1 {
        Params::for_level("package", group)
    } else {
        Params::for_level("machine", group)
    };
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
        packages,
        bound: false,
        skipped: None,
    };
    eprintln!(
        "affinity: {} under {}, {shape} ({} processes): {repeat} runs",
        k.name(),
        pol.label,
        leaves.len()
    );
    let mut bound = true;
    let mut sample = |f: &mut dyn FnMut() -> Result<Leaf>| -> Result<()> {
        for _ in 0..repeat {
            let (s, b) = f()?;
            row.samples.push(s);
            bound &= b;
        }
        Ok(())
    };
    let context = |err: Error| err.context(format!("{} under {} ({shape})", k.name(), pol.label));
    match k {
        Kernel::Triad => {
            let n = sizes.triad_n;
            need_per_leaf(leaves.len(), 3 * n as u128, "the triad's 3 arrays")?;
            let step = |_: &mut Ctx| -> mbsp::Result<Step> {
                let (mut a, b, c) = (vec![0.0f64; n], vec![1.0f64; n], vec![2.0f64; n]);
                Ok(Box::new(move |_| {
                    for ((a, b), c) in a.iter_mut().zip(&b).zip(&c) {
                        *a = b + 3.0 * c;
                    }
                    std::hint::black_box(&mut a);
                    Ok(())
                }))
            };
            sample(&mut || on_leaves(&levels, pol, sizes.triad_iters, &step)).map_err(context)?;
            row.size = format!("n = {n} per process");
            row.iterations = sizes.triad_iters;
            // w = 2n flops per superstep at rate r (optimistic for a memory-bound kernel).
            row.predicted = Some(2.0 * n as f64 / params.r);
        }
        Kernel::Sync => {
            let step =
                |_: &mut Ctx| -> mbsp::Result<Step> { Ok(Box::new(|ctx: &mut Ctx| ctx.sync())) };
            sample(&mut || on_leaves(&levels, pol, sizes.sync_iters, &step)).map_err(context)?;
            row.size = "empty superstep".into();
            row.iterations = sizes.sync_iters;
            row.predicted = Some(params.l);
        }
        Kernel::Hword | Kernel::Hbulk => {
            let words = k == Kernel::Hword;
            let h = if words { sizes.hword_h } else { sizes.hbulk_h };
            need_per_leaf(leaves.len(), 2 * h as u128, "the h-relation's buffers")?;
            let step = |ctx: &mut Ctx| -> mbsp::Result<Step> { h_relation(ctx, h, words) };
            sample(&mut || on_leaves(&levels, pol, sizes.h_iters, &step)).map_err(context)?;
            row.size = if words {
                format!("h = {h} one-word puts")
            } else {
                format!("h = {h} words in bulk puts")
            };
            row.iterations = sizes.h_iters;
            row.predicted = Some(params.time(1, h as f64, false));
        }
        Kernel::Fft => match &fans {
            Ok(f) => {
                let n = sizes.fft_n;
                match fft(&levels, f, pol, n, sizes.fft_iters, params, repeat) {
                    Ok((samples, b, predicted)) => {
                        row.samples = samples;
                        bound = b;
                        row.predicted = predicted;
                    }
                    Err(Skip::Not(why)) => row.skipped = Some(why),
                    Err(Skip::Failed(err)) => return Err(context(err)),
                }
                row.size = format!("n = {n}");
                row.iterations = sizes.fft_iters;
            }
            Err(why) => row.skipped = Some(why.clone()),
        },
        Kernel::Spmv => {
            let mx = matrix.ok_or_else(|| Error::usage("the spmv kernel needs --matrix FILE"))?;
            match &fans {
                Ok(f) => match spmv(mx, &levels, f, pol, sizes.spmv_iters, params, repeat) {
                    Ok((samples, b, predicted)) => {
                        row.samples = samples;
                        bound = b;
                        row.predicted = predicted;
                    }
                    Err(Skip::Not(why)) => row.skipped = Some(why),
                    Err(Skip::Failed(err)) => return Err(context(err)),
                },
                Err(why) => row.skipped = Some(why.clone()),
            }
            row.size = format!("{}, nnz {}", mx.name, mx.a.nnz());
            row.iterations = sizes.spmv_iters;
        }
    }
    row.bound = bound && row.skipped.is_none();
    if let Some(why) = &row.skipped {
        eprintln!(
            "affinity: {} under {} ({shape}) skipped: {why}",
            k.name(),
            pol.label
        );
    }
    Ok(row)
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
    let src = vec![s as u64; chunk];
    Ok(Box::new(move |ctx: &mut Ctx| {
        for j in 0..slots {
            let dest = (s + 1 + j % q) % p;
            ctx.put(dest, &src, &reg, j * chunk)?;
        }
        ctx.sync()
    }))
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

/// Seconds per transform of each repeat, whether bound, and the prediction.
type Measured = (Vec<f64>, bool, Option<f64>);

/// The FFT of length `n` on the fan-outs `fans` (flat: BspFft; nested: MultiFft), `iters`
/// transforms per repeat alternating forward and inverse, the data checked at the end.
fn fft(
    levels: &[Count],
    fans: &[usize],
    pol: &PolicySpec,
    n: usize,
    iters: usize,
    params: Params,
    repeat: usize,
) -> std::result::Result<Measured, Skip> {
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
    let x = mbsp_tools::fft::random(n, mbsp_tools::fft::SEED);
    let top = fans[0];
    let below = &fans[1..];
    let iters = iters.next_multiple_of(2);
    let mut samples = Vec::with_capacity(repeat);
    let mut all_bound = true;
    for _ in 0..repeat {
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
            return Err(Skip::Failed(Error::run(format!(
                "FFT n = {n}: forward and inverse transforms differ from the data by {err:e}"
            ))));
        }
        all_bound &= r.iter().all(|x| x.2);
        samples.push(secs);
    }
    // r: rustfft's rate at the kernel length each process runs, all processes at once.
    let mut rates = BTreeMap::new();
    let r = mbsp_tools::fft::rate(&mut rates, kernel_len(n, p), p.min(mbsp::nprocs()));
    let cost = FftCost::uniform(Params { r, ..params });
    let choice = cost.choose(n, fans);
    let predicted = if fans.len() > 1 && fans.iter().all(|&f| f > 1) {
        choice.nested
    } else {
        choice.flat
    };
    Ok((
        samples,
        all_bound,
        predicted.is_finite().then_some(predicted),
    ))
}

/// The FFT plan of one top-level process: flat or Multi-BSP.
enum Plan {
    Flat(BspFft<f64>),
    Nested(MultiFft<f64>),
}

impl Plan {
    fn new(ctx: &mut Ctx, n: usize, below: &[usize]) -> mbsp::Result<Plan> {
        Ok(if below.is_empty() {
            Plan::Flat(BspFft::new(ctx, n)?)
        } else {
            Plan::Nested(MultiFft::new(ctx, n, below)?)
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

/// The SpMV of `mx` on the fan-outs `fans` (flat: the plain 2D SpMV; nested: the hierarchical
/// one), `iters` multiplies per repeat, the result checked.
fn spmv(
    mx: &Matrix,
    levels: &[Count],
    fans: &[usize],
    pol: &PolicySpec,
    iters: usize,
    params: Params,
    repeat: usize,
) -> std::result::Result<Measured, Skip> {
    let a = &mx.a;
    let mut samples = Vec::with_capacity(repeat);
    let mut all_bound = true;
    let predicted;
    let check = |rows: &[u32], y: &[f64]| -> f64 {
        rows.iter()
            .zip(y)
            .map(|(&i, &v)| {
                let i = i as usize;
                mbsp_tools::spmv::entry_error(v, mx.want[i], mx.scale[i])
            })
            .fold(0.0, f64::max)
    };
    let fill = |owned: &[u32], xs: &mut [f64]| {
        for (v, &j) in xs.iter_mut().zip(owned) {
            *v = mx.x[j as usize];
        }
    };
    type Out = (f64, f64, bool);
    let timed = |ctx: &mut Ctx,
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
        for _ in 0..repeat {
            let r: Vec<Out> = top_run(&levels[0], pol).run(|ctx| {
                let mut s = Spmv::new(ctx, &plan)?;
                let local = s.local();
                fill(&local.x_owned, s.x_mut(ctx)?);
                let mut y = vec![0.0; local.y_owned.len()];
                let secs = timed(ctx, &mut y, &mut |ctx, y| s.multiply(ctx, y))?;
                Ok((secs, check(&local.y_owned, &y), bound(ctx)))
            })?;
            push(&mut samples, &mut all_bound, &r)?;
        }
        // Threads here (the command refuses to run over MPI ranks), so the rate is measured.
        let spnz = mbsp_tools::spmv::plan_seconds_per_nz(&plan)?;
        predicted = spnz.map(|s| plan.predict(&params, s, false));
    } else {
        let &[top, inner] = fans else {
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
                    let plan = HierPlan::partition(a, top, inner, &PartitionOptions::default())
                        .or_usage()?;
                    let plan = std::sync::Arc::new(plan);
                    cache.insert((top, inner), plan.clone());
                    plan
                }
            }
        };
        for _ in 0..repeat {
            let r: Vec<Out> = top_run(&levels[0], pol).run(|ctx| {
                let mut s = HierSpmv::new(ctx, &plan)?;
                let local = s.local();
                fill(&local.x_owned, s.x_mut(ctx)?);
                let mut y = vec![0.0; local.y_owned.len()];
                let secs = timed(ctx, &mut y, &mut |ctx, y| s.multiply(ctx, y))?;
                Ok((secs, check(&local.y_owned, &y), bound(ctx)))
            })?;
            push(&mut samples, &mut all_bound, &r)?;
        }
        // The cost model covers the flat SpMV only (as `mbsp spmv` prints it).
        predicted = None;
    }
    Ok((samples, all_bound, predicted))
}

/// Adds one repeat's figure (the slowest process) after checking its results.
fn push(samples: &mut Vec<f64>, bound: &mut bool, r: &[(f64, f64, bool)]) -> Result<()> {
    let err = r.iter().map(|x| x.1).fold(0.0, f64::max);
    if err > 1e-12 {
        return Err(Error::run(format!(
            "SpMV result differs from the sequential product: max relative error {err:e}"
        )));
    }
    samples.push(r.iter().map(|x| x.0).fold(0.0, f64::max));
    *bound &= r.iter().all(|x| x.2);
    Ok(())
}

/// Runs `program` (with its arguments) `repeat` times with `MBSP_AFFINITY` set to the policy,
/// timing each run's wall clock. Its standard output goes to this command's standard error,
/// so that the table (or JSON) on standard output stays whole.
pub fn external(program: &[String], pol: &PolicySpec, repeat: usize) -> Result<Row> {
    let (exe, args) = program
        .split_first()
        .ok_or_else(|| Error::usage("no program after --"))?;
    eprintln!(
        "affinity: {exe} under MBSP_AFFINITY={}: {repeat} runs",
        pol.label
    );
    let mut samples = Vec::with_capacity(repeat);
    for i in 0..repeat {
        let t = Instant::now();
        let status = std::process::Command::new(exe)
            .args(args)
            .env(mbsp::AFFINITY_ENV, &pol.label)
            .stdin(std::process::Stdio::null())
            .stdout(std::io::stderr())
            .status()
            .map_err(|err| Error::io(format!("cannot start {exe}")).with_source(err))?;
        let secs = t.elapsed().as_secs_f64();
        if !status.success() {
            return Err(Error::run(format!(
                "{exe} under MBSP_AFFINITY={} (run {} of {repeat}) failed: {status}",
                pol.label,
                i + 1
            )));
        }
        samples.push(secs);
    }
    Ok(Row {
        kernel: format!("program {}", program.join(" ")),
        policy: pol.label.clone(),
        shape: "-".into(),
        plan: "the program's own".into(),
        fan_outs: Vec::new(),
        p: None,
        size: "wall clock of the process".into(),
        iterations: 1,
        samples,
        predicted: None,
        packages: Vec::new(),
        bound: false,
        skipped: None,
    })
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
