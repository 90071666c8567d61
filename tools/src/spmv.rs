//! The SpMV measurements the commands share (`mbsp spmv`, `mbsp demo`, `mbsp affinity`,
//! `mbsp-bench spmv`): a matrix partitioned and planned for one variant ([`Prepared`]), its
//! multiplies timed in batches interleaved with sequential CSR ([`measure`]), the rate of the
//! local kernel ([`plan_seconds_per_nz`]), and the check of the result ([`max_rel_error`]).
//!
//! The runs go through [`crate::run_on`]: over MPI ranks when the program put them there.

use crate::error::{Classify, Error, Result};
use crate::run_on;
use crate::stats::median;
use mbsp_algorithms::sparse::partition::{Options as PartitionOptions, partition};
use mbsp_algorithms::sparse::spmv::{
    Fanout, HierPlan, HierSpmv, HpSpmv, SHARED_BLOCKS, SharedSpmv, SharedVectors, Spmv, SpmvPlan,
};
use mbsp_algorithms::sparse::{CooMatrix, Distribution, metrics};
use mbsp_algorithms::timer::RegionTimer;
use std::time::Instant;

/// Compressed rows, the sequential baseline.
///
/// ```
/// use mbsp_algorithms::sparse::CooMatrix;
/// let a = CooMatrix::new(2, 2, vec![(0, 0, 2.0), (0, 1, 1.0), (1, 1, 3.0)])?;
/// let csr = mbsp_tools::spmv::Csr::new(&a);
/// let mut y = [0.0; 2];
/// csr.multiply(&[1.0, 2.0], &mut y);
/// assert_eq!(y, [4.0, 6.0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Csr {
    /// Where each row starts in `col` and `val` (rows + 1 entries).
    pub ptr: Vec<usize>,
    /// Column of each entry.
    pub col: Vec<u32>,
    /// Value of each entry.
    pub val: Vec<f64>,
}

impl Csr {
    /// The rows of `a`, compressed.
    pub fn new(a: &CooMatrix) -> Self {
        let mut ptr = vec![0usize; a.rows + 1];
        for &i in &a.row_idx {
            ptr[i as usize + 1] += 1;
        }
        for i in 0..a.rows {
            ptr[i + 1] += ptr[i];
        }
        let mut fill = ptr.clone();
        let (mut col, mut val) = (vec![0u32; a.nnz()], vec![0.0; a.nnz()]);
        for k in 0..a.nnz() {
            let i = a.row_idx[k] as usize;
            col[fill[i]] = a.col_idx[k];
            val[fill[i]] = a.vals[k];
            fill[i] += 1;
        }
        Csr { ptr, col, val }
    }

    /// `y = A x` over the rows `rows` (`y` holds exactly those rows).
    pub fn multiply_rows(&self, rows: std::ops::Range<usize>, x: &[f64], y: &mut [f64]) {
        // Slices zipped per row: one bounds check per entry (on x), as a careful user writes it.
        let ptr = &self.ptr[rows.start..=rows.end];
        for (yi, w) in y.iter_mut().zip(ptr.windows(2)) {
            let (a, b) = (w[0], w[1]);
            let mut s = 0.0;
            for (v, &c) in self.val[a..b].iter().zip(&self.col[a..b]) {
                s += v * x[c as usize];
            }
            *yi = s;
        }
    }

    /// `y = A x` over all rows.
    pub fn multiply(&self, x: &[f64], y: &mut [f64]) {
        self.multiply_rows(0..y.len(), x, y);
    }
}

/// The BSP variants.
///
/// ```
/// use mbsp_tools::spmv::Variant;
/// let names: Vec<&str> = Variant::ALL.iter().map(|v| v.name()).collect();
/// assert_eq!(names, ["plain", "hp", "hp-puts", "shared", "hier"]);
/// assert!(Variant::Hp.predicts_hp() && !Variant::Shared.predicts_hp());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// Gets and puts, two supersteps per multiply.
    Plain,
    /// `direct_get` and `hpsend`, one superstep per multiply ending with a full sync (the
    /// default fan-out of `HpSpmv`).
    Hp,
    /// Puts from the owners and `hpsend`, two lazy supersteps per multiply (declared counts).
    HpPuts,
    /// Packages (plain) with a nested run over each package's cores.
    Hier,
    /// Whole vectors the processes share (`SharedSpmv`: `x` read in place, each process
    /// summing whole rows of `y`, whole cache lines of it, in place; no messages), as Python's
    /// `plan @ x`; threads only.
    Shared,
}

impl Variant {
    /// Every variant, in the order of the tables.
    pub const ALL: [Variant; 5] = [
        Variant::Plain,
        Variant::Hp,
        Variant::HpPuts,
        Variant::Shared,
        Variant::Hier,
    ];

    /// The variant's name on the command line and in tables.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Plain => "plain",
            Variant::Hp => "hp",
            Variant::HpPuts => "hp-puts",
            Variant::Hier => "hier",
            Variant::Shared => "shared",
        }
    }

    /// Whether the BSP prediction is the hp one (one superstep, direct reads of `x`). The
    /// shared multiply has its own ([`shared_prediction`]).
    pub fn predicts_hp(self) -> bool {
        matches!(self, Variant::Hp)
    }
}

/// The plan of one variant.
pub enum Plan {
    /// `plain` and `hp`: one level of processes.
    Flat(SpmvPlan),
    /// `hier`: packages, each a nested run over its cores.
    Hier(HierPlan),
}

/// A matrix with its partition and plan for one variant at one p.
///
/// ```
/// use mbsp_tools::spmv::{Csr, Per, Prepared, Variant, measure, test_x};
/// let a = mbsp_algorithms::sparse::CooMatrix::new(
///     4, 4, (0..4).map(|i| (i, i, 1.0 + i as f64)).collect::<Vec<(usize, usize, f64)>>(),
/// )?;
/// let prep = Prepared::new(&a, 2, Variant::Plain)?;
/// let x = test_x(a.cols);
/// let m = measure(&a, &Csr::new(&a), &x, &prep, Variant::Plain, 3, Per::Exactly(2))?;
/// assert!(m.expect("threads: this process prints").max_rel_error < 1e-12);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Prepared {
    /// Processes in all.
    pub p: usize,
    /// The plan.
    pub plan: Plan,
    /// Seconds spent partitioning.
    pub partition_seconds: f64,
    /// Communication volume (for `hier`: between packages plus inside packages).
    pub volume: u64,
    /// The largest h-relation of a superstep (for `hier`: of the top level).
    pub max_h: u64,
    /// `hier`: packages x cores.
    pub shape: (usize, usize),
}

/// The hierarchical shape for `p` processes: as many packages as the machine has (or the
/// largest divisor of `p` below that), `p / packages` cores each.
pub fn hier_shape(p: usize) -> Result<(usize, usize)> {
    let machine = mbsp::Machine::current().or_run()?;
    let packages = machine.machine.packages().len().max(1);
    let top = (1..=packages.min(p))
        .rev()
        .find(|&d| p.is_multiple_of(d))
        .unwrap_or(1);
    Ok((top, p / top))
}

impl Prepared {
    /// Plan the flat variants on a given distribution (no partitioning).
    pub fn from_distribution(a: &CooMatrix, d: Distribution) -> Result<Self> {
        let m = metrics::traffic(a, &d);
        let plan = SpmvPlan::new(a, &d).or_usage()?;
        Ok(Prepared {
            p: d.p,
            plan: Plan::Flat(plan),
            partition_seconds: 0.0,
            volume: m.volume(),
            max_h: m.max_h(),
            shape: (d.p, 1),
        })
    }

    /// Partition `a` for `p` processes (seed 1, eps 0.03) and cut it into per-process parts.
    pub fn new(a: &CooMatrix, p: usize, variant: Variant) -> Result<Self> {
        let t = Instant::now();
        if variant == Variant::Hier {
            let shape = hier_shape(p)?;
            let plan = HierPlan::partition(a, shape.0, shape.1, &PartitionOptions::default())
                .or_usage()?;
            let (top, inner) = plan.volumes();
            let max_h = plan
                .top
                .procs
                .iter()
                .map(|l| {
                    let (i, o) = l.traffic();
                    i.max(o) as u64
                })
                .max()
                .unwrap_or(0);
            return Ok(Prepared {
                p,
                plan: Plan::Hier(plan),
                partition_seconds: t.elapsed().as_secs_f64(),
                volume: (top + inner) as u64,
                max_h,
                shape,
            });
        }
        let r = partition(a, p, &PartitionOptions::default()).or_usage()?;
        let partition_seconds = t.elapsed().as_secs_f64();
        let plan = SpmvPlan::new(a, &r.dist).or_usage()?;
        Ok(Prepared {
            p,
            plan: Plan::Flat(plan),
            partition_seconds,
            volume: r.volume,
            max_h: r.max_h,
            shape: (p, 1),
        })
    }
}

/// Multiplies per batch: as many as asked, or at most so many, fewer when they would take more
/// than about [`DEFAULT_SECONDS`] in all.
#[derive(Clone, Copy, Debug)]
pub enum Per {
    /// This many (`--reps` given).
    Exactly(usize),
    /// At most this many (the default `--reps`).
    AtMost(usize),
}

/// Multiplies timed when `--reps` is not given.
pub const DEFAULT_REPS: usize = 500;

/// About how long the timed multiplies of the default `--reps` may take in all, in seconds: with
/// thousands of processes on a few cores a multiply takes milliseconds, and 500 of them would
/// make the command slow without making its median better.
pub const DEFAULT_SECONDS: f64 = 2.0;

/// Times `per` multiplies by `step` in `batches` batches inside a run; between them process
/// 0 times as many sequential CSR multiplies (the others wait in the timer's sync), and, given
/// `local` (which runs so many local multiplies of this process's part), every process times
/// as many local multiplies at once, the slowest's time counting. Returns (median seconds per
/// BSP multiply, median seconds per sequential multiply, median ratio sequential / BSP of the
/// batch pairs; the last two 0 off pid 0; median seconds per local multiply, 0 without
/// `local`).
fn batches_of(
    ctx: &mut mbsp::Ctx,
    batches: usize,
    per: Per,
    seq: &dyn Fn(),
    local: Option<&dyn Fn(usize)>,
    mut step: impl FnMut(&mut mbsp::Ctx) -> mbsp::Result<()>,
) -> mbsp::Result<(f64, f64, f64, f64)> {
    step(ctx)?; // warm-up
    let per = match per {
        Per::Exactly(n) => n,
        Per::AtMost(most) => {
            // Every process gets the slowest process's time, so all agree on the count.
            let timer = RegionTimer::start(ctx)?;
            step(ctx)?;
            let t = timer.stop(ctx)?.max(f64::MIN_POSITIVE);
            // The timed multiplies and the untimed ones before each batch.
            let runs = (DEFAULT_SECONDS / (batches as f64 * t * 1.2)) as usize;
            runs.clamp(1, most)
        }
    };
    let (mut times, mut seqs, mut locals) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..batches {
        if ctx.pid() == 0 {
            let t = Instant::now();
            for _ in 0..per {
                seq();
            }
            seqs.push(t.elapsed().as_secs_f64() / per as f64);
        }
        // A few untimed multiplies first: the processes that waited through the sequential
        // batch have gone to sleep, and their cores need a moment to come back up to speed.
        for _ in 0..per.div_ceil(5).max(2) {
            step(ctx)?;
        }
        let timer = RegionTimer::start(ctx)?;
        for _ in 0..per {
            step(ctx)?;
        }
        times.push(timer.stop(ctx)? / per as f64);
        // The model's rate of the local phase, taken in the same batches as the multiplies it
        // predicts: one measurement after them saw another state of a shared machine as often
        // as not.
        if let Some(local) = local {
            let timer = RegionTimer::start(ctx)?;
            local(per);
            locals.push(timer.stop(ctx)? / per as f64);
        }
    }
    let ratio = if seqs.is_empty() {
        0.0
    } else {
        median(
            &seqs
                .iter()
                .zip(&times)
                .map(|(s, t)| s / t)
                .collect::<Vec<_>>(),
        )
    };
    let t_seq = if seqs.is_empty() { 0.0 } else { median(&seqs) };
    let t_local = if locals.is_empty() {
        0.0
    } else {
        median(&locals)
    };
    Ok((median(&times), t_seq, ratio, t_local))
}

/// Seconds per nonzero of mbsp's local multiply kernel (SELL-C-σ) under `plan`, measured with
/// every process of the plan running its own part at once (as BSP's r is measured: on a
/// memory-bound kernel, two cores sharing the memory each run slower than one alone): the
/// slowest part's time over the largest part's nonzeros, the rate the BSP prediction charges
/// for the local phase (not the CSR baseline's: the kernels differ). `None` on the MPI ranks
/// that do not print ([`run_on`]).
pub fn plan_seconds_per_nz(plan: &SpmvPlan) -> Result<Option<f64>> {
    let most = plan.most_nnz().max(1);
    let reps = (2_000_000 / most).clamp(1, 1000);
    let times = run_on::gathered::<f64, _>(plan.p(), |ctx| {
        ctx.sync()?; // start together
        Ok((
            Vec::new(),
            vec![plan.procs[ctx.pid()].time_local_multiply(reps)],
        ))
    })?;
    Ok(times.map(|t| t.iter().map(|(_, t)| t[0]).fold(0.0, f64::max) / most as f64))
}

/// The BSP prediction of one [`SharedSpmv`] multiply with the parameters `params`: the local
/// phase as timed by every process at once ([`SpmvPlan::time_shared_rows`]: each process's
/// whole rows over the whole `x`, the reads across the cores included; the largest), and one
/// sync, `l` (no messages). `None` on the MPI ranks that do not print.
pub fn shared_prediction(plan: &SpmvPlan, params: &mbsp::params::Params) -> Result<Option<f64>> {
    let most = plan.most_nnz().max(1);
    let reps = (2_000_000 / most).clamp(1, 1000);
    let times = run_on::gathered::<f64, _>(plan.p(), |ctx| {
        ctx.sync()?; // start together
        Ok((Vec::new(), vec![plan.time_shared_rows(ctx.pid(), reps)]))
    })?;
    Ok(times.map(|t| {
        let each: Vec<f64> = t.iter().map(|(_, t)| t[0]).collect();
        // Processes that finish their rows take the others' blocks (`share.rs`): the multiply
        // ends near the mean of their times, one block of the slowest's later at most.
        let mean = each.iter().sum::<f64>() / each.len() as f64;
        let most = each.iter().copied().fold(0.0, f64::max);
        (mean + most / SHARED_BLOCKS as f64).min(most) + params.l
    }))
}

/// The BSP prediction of one hierarchical multiply ([`HierSpmv`]): the top level's fan-out and
/// fan-in among the packages with the `top` parameters (`(h_fanout + h_fanin) g + 2 l`, nothing
/// when the top level has one process), then in every package at once one nested run (`start`
/// seconds; none for a package of one core) of the local multiply (`max nz · t_nz`) and, where
/// the package's cores sum partial rows, one superstep of them with the `inner` parameters
/// (`h_fanin g + l`): the slowest package's.
pub fn hier_predict(
    plan: &HierPlan,
    top: &mbsp::params::Params,
    inner: &mbsp::params::Params,
    seconds_per_nz: f64,
    start: f64,
) -> f64 {
    let top_comm = if plan.top.p() > 1 {
        let (fo, fi) = plan.top.h_relations();
        (fo + fi) as f64 * top.g + 2.0 * top.l
    } else {
        0.0
    };
    let package = |ip: &SpmvPlan| {
        let work = ip.most_nnz() as f64 * seconds_per_nz;
        if ip.p() == 1 {
            return work;
        }
        let (_, fan_in) = ip.h_relations();
        let sums = if fan_in > 0 {
            fan_in as f64 * inner.g + inner.l
        } else {
            0.0
        };
        start + work + sums
    };
    top_comm + plan.inner.iter().map(package).fold(0.0, f64::max)
}

/// [`hier_predict`] with the local rate and the nested run's start measured now: the slowest
/// package's local rate ([`plan_seconds_per_nz`], each package's cores at once) and a nested
/// run's start ([`crate::params::nested_run_seconds`]), with `top` for the level over the
/// packages and `inner` for the cores below. `None` where no package's rate could be measured
/// (every package without nonzeros).
pub fn hier_prediction(
    plan: &HierPlan,
    top: &mbsp::params::Params,
    inner: &mbsp::params::Params,
) -> Result<Option<f64>> {
    let mut per_nz: Option<f64> = None;
    for ip in &plan.inner {
        if let Some(t) = plan_seconds_per_nz(ip)? {
            per_nz = Some(per_nz.map_or(t, |m: f64| m.max(t)));
        }
    }
    let Some(per_nz) = per_nz else {
        return Ok(None);
    };
    let below = plan.inner.iter().map(|ip| ip.p()).max().unwrap_or(1);
    let start = crate::params::nested_run_seconds(below)?;
    Ok(Some(hier_predict(plan, top, inner, per_nz, start)))
}

/// [`hier_prediction`] with the parameters in force: the packages' for the top level and the
/// machine's of `p` processes below ([`crate::params::flat`]), under the policy in force.
pub fn hier_prediction_in_force(plan: &HierPlan, p: usize) -> Result<Option<f64>> {
    let policy = crate::params::policy_in_force();
    let top = mbsp::params::Params::for_placement("packages", plan.top.p(), &policy);
    hier_prediction(plan, &top, &crate::params::flat(p))
}

/// Seconds per multiply of the BSP variant and of the sequential baseline, measured in the
/// same run, and the largest relative error of the result.
pub struct Measured {
    /// Median seconds per BSP multiply.
    pub bsp: f64,
    /// Median seconds per sequential CSR multiply.
    pub seq: f64,
    /// The median over the batches of sequential / BSP time of the same batch pair: steadier
    /// than the ratio of the medians when the machine changes state during the measurement.
    pub ratio: f64,
    /// The largest relative error of an entry of the result ([`max_rel_error`]).
    pub max_rel_error: f64,
    /// Median seconds of the local phase alone (every process its part at once, the slowest
    /// counting), timed in the same batches as the multiplies: the plain and hp variants'
    /// (`None` for the others). Over the largest part's nonzeros, the rate
    /// [`SpmvPlan::predict`] wants ([`Measured::seconds_per_nz`]).
    pub local: Option<f64>,
}

impl Measured {
    /// Seconds per nonzero of the local phase under `plan` ([`Measured::local`] over its
    /// largest part's nonzeros), where it was timed.
    pub fn seconds_per_nz(&self, plan: &SpmvPlan) -> Option<f64> {
        let most = plan.most_nnz().max(1);
        self.local.map(|t| t / most as f64)
    }
}

/// [`batches_of`] of a flat plan's multiply `step`, with this process's local phase timed in
/// every batch beside it: (seconds per multiply, per sequential multiply, their ratio, per
/// local phase).
fn flat_batches(
    ctx: &mut mbsp::Ctx,
    plan: &SpmvPlan,
    batches: usize,
    per: Per,
    seq: &dyn Fn(),
    step: impl FnMut(&mut mbsp::Ctx) -> mbsp::Result<()>,
) -> mbsp::Result<Vec<f64>> {
    let part = &plan.procs[ctx.pid()];
    let phase = |n: usize| part.run_local_multiplies(n);
    let (t, ts, q, tl) = batches_of(ctx, batches, per, seq, Some(&phase), step)?;
    Ok(vec![t, ts, q, tl])
}

/// Times `batches` batches of `per` multiplies of the variant; between them process 0 times
/// the same number of sequential CSR multiplies (the other processes wait in a sync), so both
/// see the same machine state: this machine switches between a fast and a slow state, and
/// figures timed minutes apart are not comparable. Medians of the batches. `None` on the MPI
/// ranks that do not print ([`run_on`]): they took part, rank 0 checks the result.
pub fn measure(
    a: &CooMatrix,
    csr: &Csr,
    x: &[f64],
    prep: &Prepared,
    variant: Variant,
    batches: usize,
    per: Per,
) -> Result<Option<Measured>> {
    // The sequential baseline writes its own y (one per thread that may run it).
    let y_seq = std::sync::Mutex::new(vec![0.0; a.rows]);
    let seq = || csr.multiply(x, &mut y_seq.lock().unwrap());
    let fill = |owned: &[u32], xs: &mut [f64]| {
        for (v, &j) in xs.iter_mut().zip(owned) {
            *v = x[j as usize];
        }
    };
    type Out = mbsp::Result<Option<Vec<run_on::Part<f64>>>>;
    let (out, owned): (Out, Vec<&[u32]>) = match (&prep.plan, variant) {
        (Plan::Flat(plan), Variant::Plain) => (
            run_on::gathered(prep.p, |ctx| {
                let mut spmv = Spmv::new(ctx, plan)?;
                let local = spmv.local();
                fill(&local.x_owned, spmv.x_mut(ctx)?);
                let mut y = vec![0.0; local.y_owned.len()];
                let numbers = flat_batches(ctx, plan, batches, per, &seq, |ctx| {
                    spmv.multiply(ctx, &mut y)
                })?;
                Ok((y, numbers))
            }),
            plan.procs.iter().map(|l| l.y_owned.as_slice()).collect(),
        ),
        (Plan::Flat(plan), Variant::Hp | Variant::HpPuts) => (
            run_on::gathered(prep.p, |ctx| {
                let fanout = if variant == Variant::HpPuts {
                    Fanout::Puts
                } else {
                    Fanout::DirectGet
                };
                let mut spmv = HpSpmv::with_fanout(ctx, plan, fanout)?;
                let local = spmv.local();
                fill(&local.x_owned, spmv.x_mut(ctx)?);
                ctx.sync()?;
                let mut y = vec![0.0; local.y_owned.len()];
                let numbers = flat_batches(ctx, plan, batches, per, &seq, |ctx| {
                    spmv.multiply(ctx, &mut y)
                })?;
                Ok((y, numbers))
            }),
            plan.procs.iter().map(|l| l.y_owned.as_slice()).collect(),
        ),
        (Plan::Flat(plan), Variant::Shared) => {
            run_on::threads_only(
                "the shared variant",
                "its processes share x and y in memory",
            )?;
            // Whole vectors, made before the run and shared by its processes; one y for the
            // multiplies of every batch (each process writes its own rows).
            let mut y = vec![0.0; a.rows];
            let v = SharedVectors::new(plan, x, &mut y).or_usage()?;
            let out = run_on::gathered(prep.p, |ctx| {
                let mut spmv = SharedSpmv::new(ctx, plan)?;
                let (t, ts, q, _) =
                    batches_of(ctx, batches, per, &seq, None, |ctx| spmv.multiply(ctx, &v))?;
                Ok((Vec::<f64>::new(), vec![t, ts, q]))
            });
            let Some(out) = out? else {
                return Ok(None);
            };
            let mut ys = vec![0.0; a.rows];
            csr.multiply(x, &mut ys);
            let all: Vec<u32> = (0..a.rows as u32).collect();
            let (bsp, seq, ratio) = (out[0].1[0], out[0].1[1], out[0].1[2]);
            return Ok(Some(Measured {
                bsp,
                ratio,
                seq,
                max_rel_error: max_rel_error(a, x, &ys, &[(&all, &y)]),
                local: None,
            }));
        }
        (Plan::Hier(plan), Variant::Hier) => (
            run_on::gathered(plan.top.p(), |ctx| {
                let mut spmv = HierSpmv::new(ctx, plan)?;
                let local = spmv.local();
                fill(&local.x_owned, spmv.x_mut(ctx)?);
                let mut y = vec![0.0; local.y_owned.len()];
                let (t, ts, q, _) = batches_of(ctx, batches, per, &seq, None, |ctx| {
                    spmv.multiply(ctx, &mut y)
                })?;
                Ok((y, vec![t, ts, q]))
            }),
            plan.top
                .procs
                .iter()
                .map(|l| l.y_owned.as_slice())
                .collect(),
        ),
        _ => {
            return Err(Error::usage(format!("no {} plan prepared", variant.name())));
        }
    };
    let Some(out) = out? else {
        return Ok(None);
    };
    let mut ys = vec![0.0; a.rows];
    csr.multiply(x, &mut ys);
    let parts: Vec<(&[u32], &[f64])> = out
        .iter()
        .enumerate()
        .map(|(s, o)| (owned[s], o.0.as_slice()))
        .collect();
    let (bsp, seq, ratio) = (out[0].1[0], out[0].1[1], out[0].1[2]);
    Ok(Some(Measured {
        bsp,
        ratio,
        seq,
        max_rel_error: max_rel_error(a, x, &ys, &parts),
        local: out[0].1.get(3).copied(),
    }))
}

/// Error per entry, relative to the sum of the magnitudes of its terms (the scale of the
/// rounding error of any summation order); `parts` are (owned rows, values) per process.
/// See [`entry_error`] for entries that are not finite.
pub fn max_rel_error(a: &CooMatrix, x: &[f64], want: &[f64], parts: &[(&[u32], &[f64])]) -> f64 {
    let mut scale = vec![0.0f64; a.rows];
    for k in 0..a.nnz() {
        scale[a.row_idx[k] as usize] += (a.vals[k] * x[a.col_idx[k] as usize]).abs();
    }
    let mut worst = 0.0f64;
    for &(rows, ys) in parts {
        for (&i, &y) in rows.iter().zip(ys) {
            let i = i as usize;
            worst = worst.max(entry_error(y, want[i], scale[i]));
        }
    }
    worst
}

/// The relative error of one entry `y` against `want`, whose terms' magnitudes sum to `scale`.
///
/// Entries that are not finite are compared exactly: a NaN where the sequential result has a
/// NaN, or the same infinity, is no error at all (a matrix with NaN or infinite entries gives
/// them in both multiplies); any other pair with a non-finite side is an infinite error (also a
/// NaN where none belongs, which `f64::max` would otherwise skip). Finite pairs: the difference
/// over `scale`, and where the scale is 0 (every term is 0) any difference is infinite.
///
/// ```
/// use mbsp_tools::spmv::entry_error;
/// assert_eq!(entry_error(1.5, 1.0, 2.0), 0.25);
/// assert_eq!(entry_error(f64::NAN, f64::NAN, 1.0), 0.0);
/// assert_eq!(entry_error(f64::NAN, 1.0, 1.0), f64::INFINITY);
/// ```
pub fn entry_error(y: f64, want: f64, scale: f64) -> f64 {
    if !(y.is_finite() && want.is_finite()) {
        let same = (y.is_nan() && want.is_nan()) || y == want;
        return if same { 0.0 } else { f64::INFINITY };
    }
    if scale > 0.0 {
        // An infinite scale (terms too large to sum) leaves room for any finite difference.
        (y - want).abs() / scale
    } else if y != want {
        f64::INFINITY
    } else {
        0.0
    }
}

/// The test vector: deterministic, entries in [-0.5, 0.5).
///
/// ```
/// let x = mbsp_tools::spmv::test_x(1000);
/// assert!(x.iter().all(|v| (-0.5..0.5).contains(v)));
/// ```
pub fn test_x(n: usize) -> Vec<f64> {
    (0..n)
        .map(|j| ((j * 2_654_435_761) % 1000) as f64 / 1000.0 - 0.5)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hierarchical_prediction_adds_what_each_level_does() {
        // A 6 x 6 tridiagonal matrix: row blocks over 2 packages of 2 cores.
        let mut e = Vec::new();
        for i in 0..6usize {
            for j in i.saturating_sub(1)..(i + 2).min(6) {
                e.push((i, j, 1.0));
            }
        }
        let a = CooMatrix::new(6, 6, e).unwrap();
        let plan = HierPlan::partition(&a, 2, 2, &PartitionOptions::default()).unwrap();
        let top = mbsp::params::Params {
            g: 1e-6,
            l: 1e-3,
            ..mbsp::params::Params::DEFAULT
        };
        let inner = mbsp::params::Params {
            g: 1e-8,
            l: 1e-5,
            ..mbsp::params::Params::DEFAULT
        };
        let t = hier_predict(&plan, &top, &inner, 1e-9, 1e-4);
        let (fo, fi) = plan.top.h_relations();
        let top_part = (fo + fi) as f64 * 1e-6 + 2e-3;
        // Every package: a nested run, its largest part's nonzeros, its partial sums if any.
        let want = top_part
            + plan
                .inner
                .iter()
                .map(|ip| {
                    let nz = ip.most_nnz() as f64;
                    let fan_in = ip.h_relations().1 as f64;
                    let sums = if fan_in > 0.0 {
                        fan_in * 1e-8 + 1e-5
                    } else {
                        0.0
                    };
                    1e-4 + nz * 1e-9 + sums
                })
                .fold(0.0, f64::max);
        assert!((t - want).abs() < 1e-15, "{t} {want}");
        // A top level of one package: no top-level communication.
        let one = HierPlan::partition(&a, 1, 2, &PartitionOptions::default()).unwrap();
        assert!(hier_predict(&one, &top, &inner, 1e-9, 1e-4) < 1e-3);
    }

    #[test]
    fn equal_non_finite_results_are_equal_and_real_differences_are_caught() {
        let (nan, inf) = (f64::NAN, f64::INFINITY);
        // The same NaN position, the same infinity: no error.
        assert_eq!(entry_error(nan, nan, nan), 0.0);
        assert_eq!(entry_error(-nan, nan, 1.0), 0.0);
        assert_eq!(entry_error(inf, inf, inf), 0.0);
        assert_eq!(entry_error(-inf, -inf, inf), 0.0);
        // Any other pair with a non-finite side: infinite.
        for (y, want) in [
            (nan, 1.0),
            (1.0, nan),
            (inf, -inf),
            (inf, 1e308),
            (nan, inf),
        ] {
            assert_eq!(entry_error(y, want, 1.0), inf, "{y} against {want}");
        }
        // Finite: relative to the scale; a zero scale tolerates no difference.
        assert_eq!(entry_error(1.5, 1.0, 2.0), 0.25);
        assert_eq!(entry_error(1e-300, 0.0, 0.0), inf);
        assert_eq!(entry_error(0.0, -0.0, 0.0), 0.0);
        assert_eq!(entry_error(1.0, 0.0, inf), 0.0);
    }

    #[test]
    fn a_matrix_with_nan_and_infinite_entries_checks_out() {
        // Row 0 has a NaN, row 1 an infinity, row 2 a finite sum.
        let a = CooMatrix::new(
            3,
            3,
            vec![
                (0, 0, f64::NAN),
                (0, 1, 1.0),
                (1, 1, f64::INFINITY),
                (2, 2, 2.0),
            ],
        )
        .unwrap();
        let x = [1.0, 2.0, 3.0];
        let want = [f64::NAN, f64::INFINITY, 6.0];
        let rows = [0u32, 1, 2];
        assert_eq!(max_rel_error(&a, &x, &want, &[(&rows, &want)]), 0.0);
        // The NaN moved to another row: caught, wherever it is.
        let moved = [2.0, f64::INFINITY, f64::NAN];
        assert_eq!(
            max_rel_error(&a, &x, &want, &[(&rows, &moved)]),
            f64::INFINITY
        );
        let finite = [2.0, f64::INFINITY, 6.0];
        assert_eq!(
            max_rel_error(&a, &x, &want, &[(&rows, &finite)]),
            f64::INFINITY
        );
        // A small difference in a finite row: relative to its scale (6).
        let off = [f64::NAN, f64::INFINITY, 6.0 + 6e-9];
        let e = max_rel_error(&a, &x, &want, &[(&rows, &off)]);
        assert!((e - 1e-9).abs() < 1e-15, "{e}");
    }
}
