//! The SpMV plan of the Python package: a matrix and its distribution cut into per-process
//! parts once; each multiply is one BSP run of the plan's processes on the runtime's threads,
//! with the GIL released; CG is one run for the whole solve.
//!
//! Each multiply runs on a run this thread keeps ([`crate::live`]). An hp plan's multiply there
//! is [`SharedSpmv`] on the caller's arrays ([`Io::Shared`]): each process computes whole rows
//! of `y`, whole cache lines of it, reading the `x` entries of their nonzeros where the caller
//! keeps them and writing the sums in place (one superstep, no messages); one sync before (the
//! command) and one after (`y` complete). Cost: that of the hp multiply with direct gets
//! without its fan-in (see `mbsp_algorithms::sparse::spmv`) plus two syncs. It saves what going through the
//! parts costs (below: copying each process's owned `x` entries in and publishing them with a
//! sync, assembling `y` from the processes' parts after another): two passes over both
//! vectors, a large share of a multiply on matrices of a few nonzeros per row
//! (CHANGELOG.md has the measurement, under the shared SpMV).
//!
//! The plain and hierarchical multiplies (and an hp plan multiplied from a thread whose runs do
//! not hold it: the plain multiply) go through the parts ([`Io::Parts`]): every process copies
//! its owned entries of `x` into the multiply's registered buffer, the BSP multiply runs (plain:
//! two supersteps; hier: two top-level supersteps around a nested run in each package) into
//! the process's part of `y`, and after a sync every process fills one contiguous block of the
//! caller's `y` from all parts ([`Parts`], [`RowsOut`]). Cost: that of the variant plus three
//! syncs and `n/p` reads and writes per process.

use crate::errors;
use crate::sparse::{CooArgs, DistArgs, cancellable, options, slice};
use mbsp::Ctx;
use mbsp_algorithms::collectives::Comm;
use mbsp_algorithms::sparse::spmv::{
    HierPlan, HierSpmv, SharedSpmv, SharedVectors, Spmv, SpmvPlan,
};
use numpy::{PyArray1, PyReadonlyArray1, PyReadwriteArray1};
use pyo3::prelude::*;
use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The caller's `y`, which the processes of a run fill, each its own block of rows.
///
/// The caller holds the only reference to `y` for as long as the run uses it (see
/// [`crate::live`]); each process writes a different range of rows ([`block`]), so the writes
/// are disjoint, and contiguous: no two processes write one cache line but at the blocks' ends.
pub struct RowsOut {
    ptr: *mut f64,
    len: usize,
}

// SAFETY: the processes of a run write disjoint ranges (see the type's docs) and the run is
// done with `y` before the borrow that made the pointer ends.
unsafe impl Send for RowsOut {}
// SAFETY: as above.
unsafe impl Sync for RowsOut {}

impl RowsOut {
    pub fn new(y: &mut [f64]) -> Self {
        RowsOut {
            ptr: y.as_mut_ptr(),
            len: y.len(),
        }
    }

    /// The rows `range` of `y`, to write.
    ///
    /// # Safety
    /// No other thread reads or writes these rows while the slice lives (each process of a run
    /// takes its own [`block`]).
    #[allow(clippy::mut_from_ref)] // disjoint ranges of one buffer, by construction
    unsafe fn rows(&self, range: std::ops::Range<usize>) -> &mut [f64] {
        assert!(
            range.start <= range.end && range.end <= self.len,
            "rows {range:?} of {}",
            self.len
        );
        // SAFETY: inside `y` (checked), and this range is the caller's alone (contract).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(range.start), range.len()) }
    }
}

/// Block `s` of `p` of `n` rows: `s n / p .. (s + 1) n / p`.
fn block(n: usize, s: usize, p: usize) -> std::ops::Range<usize> {
    let at = |k: usize| (n as u128 * k as u128 / p as u128) as usize;
    at(s)..at(s + 1)
}

/// Each process's owned rows of `y` from the multiply, and where each row of `y` lies in them.
///
/// A step of the multiply ([`PlanCore::step`]) has each process write its own buffer (its
/// rows, in the order of its `y_owned`), then sync, then each process read every buffer to
/// fill its block of `y` ([`RowsOut`]), then sync again. So a buffer is written by its process
/// alone while nobody reads it, and read by all while nobody writes it; one run uses a plan at
/// a time (the plan's turn lock), so no two steps overlap.
struct Parts {
    bufs: Vec<UnsafeCell<Vec<f64>>>,
    /// Per row of `y`: its owner (high 32 bits) and its position among the owner's rows.
    src: Vec<u64>,
}

// SAFETY: the buffers are written and read only as the protocol of the type's docs allows.
unsafe impl Sync for Parts {}

impl Parts {
    fn new(plan: &SpmvPlan) -> Self {
        let mut src = vec![0u64; plan.rows];
        for l in &plan.procs {
            for (k, &i) in l.y_owned.iter().enumerate() {
                src[i as usize] = ((l.pid as u64) << 32) | k as u64;
            }
        }
        Parts {
            bufs: plan
                .procs
                .iter()
                .map(|l| UnsafeCell::new(vec![0.0; l.y_owned.len()]))
                .collect(),
            src,
        }
    }

    /// Process `pid`'s buffer, to write its rows into.
    ///
    /// # Safety
    /// Called by process `pid` of the run using the plan, before the sync that publishes the
    /// buffers; nobody reads them until then.
    #[allow(clippy::mut_from_ref)] // one buffer per process, by the protocol
    unsafe fn mine(&self, pid: usize) -> &mut [f64] {
        // SAFETY: only process `pid` touches its buffer now (contract).
        unsafe { &mut *self.bufs[pid].get() }
    }

    /// Fills `rows` (a block of `y`) from every process's buffer.
    ///
    /// # Safety
    /// Called after the sync that follows every process's writes, before the sync that ends
    /// the step; nobody writes a buffer in between.
    unsafe fn fill(&self, rows: &mut [f64], first: usize) {
        for (k, y) in rows.iter_mut().enumerate() {
            let v = self.src[first + k];
            // SAFETY: only reads now (contract).
            let buf = unsafe { &*self.bufs[(v >> 32) as usize].get() };
            *y = buf[(v & 0xffff_ffff) as usize];
        }
    }
}

/// Which multiply a plan runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Plain,
    Hp,
    Hier,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::Hp => "hp",
            Kind::Hier => "hier",
        }
    }
}

/// The plan a kind runs: flat or two levels.
enum Plans {
    Flat(Arc<SpmvPlan>),
    Hier(Arc<HierPlan>),
}

/// What a plan multiplies with, shared by the plan object and the runs that serve it
/// ([`crate::live`]).
pub struct PlanCore {
    plans: Plans,
    kind: Kind,
    parts: Parts,
    /// The thread whose kept run holds this plan's multiply ([`Attached`]) between calls.
    pub holder: Mutex<Option<std::thread::ThreadId>>,
    /// Set when the Python object is gone: a kept run holding the plan lets it go.
    pub dropped: AtomicBool,
}

/// Copies the process's owned entries of `x` (global indices `owned`) into `buf`.
fn gather(buf: &mut [f64], owned: &[u32], x: &[f64]) {
    for (b, &j) in buf.iter_mut().zip(owned) {
        *b = x[j as usize];
    }
}

/// A process's multiply of one plan, in one run.
enum Mult<'p> {
    Plain(Spmv<'p>),
    /// The hp plan's multiply in the run that holds the plan: on the caller's whole vectors.
    Shared(Box<SharedSpmv<'p>>),
    Hier(HierSpmv<'p>),
}

/// The caller's vectors of one multiply, as every process of the run sees them.
pub enum Io<'a> {
    /// `x` whole, read for the process's owned entries; `y` filled in blocks from the
    /// processes' parts ([`Parts`]).
    Parts { x: &'a [f64], out: &'a RowsOut },
    /// Both whole, for [`Mult::Shared`] (one object, made by process 0).
    Shared(&'a SharedVectors<'a>),
}

/// A process's multiply of a plan, registered in its run and kept between calls: its buffers
/// stay registered, allocated and claimed until [`Attached::free`].
pub struct Attached {
    /// Borrows from `core` (see [`PlanCore::attach`]); declared first, so dropped first.
    mult: Mult<'static>,
    core: Arc<PlanCore>,
}

impl PlanCore {
    fn top(&self) -> &SpmvPlan {
        match &self.plans {
            Plans::Flat(p) => p,
            Plans::Hier(h) => &h.top,
        }
    }

    /// The plan whose multiply reads and writes the caller's whole vectors in the run that
    /// holds it ([`Io::Shared`]): an hp plan's.
    pub fn shared_plan(&self) -> Option<&SpmvPlan> {
        match (&self.plans, self.kind) {
            (Plans::Flat(p), Kind::Hp) => Some(p),
            _ => None,
        }
    }

    /// Processes of a run of the plan (the top level's, for a two-level plan).
    pub fn run_procs(&self) -> usize {
        self.top().p()
    }

    /// This process's multiply of `core` in its run: registers its buffers (one superstep;
    /// every process of the run calls it). `plain` makes an hp plan's multiply the plain one
    /// (which claims nothing: for a run other than the one that holds the plan).
    pub fn attach(core: &Arc<PlanCore>, ctx: &mut Ctx, plain: bool) -> mbsp::Result<Attached> {
        // SAFETY: the reference points into the allocation of `core` (and the plans it owns),
        // which never moves and is not mutated; `Attached` keeps a clone of `core` alive for
        // as long as `mult`, which holds the reference, lives (its field order drops `mult`
        // first), and `mult` is not handed out with the 'static lifetime.
        let plans: &'static Plans = unsafe { &*std::ptr::addr_of!((*Arc::as_ptr(core)).plans) };
        let mult = match (plans, core.kind) {
            (Plans::Flat(plan), Kind::Plain) => Mult::Plain(Spmv::new(ctx, plan)?),
            (Plans::Flat(plan), _) if plain => Mult::Plain(Spmv::new(ctx, plan)?),
            (Plans::Flat(plan), _) => Mult::Shared(Box::new(SharedSpmv::new(ctx, plan)?)),
            (Plans::Hier(plan), _) => Mult::Hier(HierSpmv::new(ctx, plan)?),
        };
        Ok(Attached {
            mult,
            core: core.clone(),
        })
    }
}

impl Attached {
    /// Whether this is the multiply of `core`.
    pub fn is_of(&self, core: &Arc<PlanCore>) -> bool {
        Arc::ptr_eq(&self.core, core)
    }

    /// The plan.
    pub fn core(&self) -> &Arc<PlanCore> {
        &self.core
    }

    /// One multiply `y = A x` by this process. On [`Io::Shared`] vectors (an hp plan's
    /// multiply) the processes read `x` and write their rows of `y` in place; otherwise each
    /// copies its owned entries of `x`, multiplies into its part of [`Parts`], syncs, and fills
    /// its block of `y` from every process's part. Ends with a sync: after it no process reads
    /// `x` or writes `y`.
    pub fn multiply(&mut self, ctx: &mut Ctx, io: &Io<'_>) -> mbsp::Result<()> {
        let me = ctx.pid();
        let parts = &self.core.parts;
        let internal = |ctx: &Ctx| {
            ctx.misuse_error(
                "SpmvPlan.multiply",
                "internal: the vectors do not suit the multiply held",
            )
        };
        let (x, out) = match io {
            Io::Shared(v) => {
                let Mult::Shared(s) = &mut self.mult else {
                    return Err(internal(ctx));
                };
                s.multiply(ctx, v)?;
                return ctx.sync();
            }
            Io::Parts { x, out } => (*x, *out),
        };
        // SAFETY: this process's part, written before the sync below (the `Parts` protocol:
        // one run uses a plan at a time, under the plan's turn lock).
        let yl = unsafe { parts.mine(me) };
        match &mut self.mult {
            Mult::Plain(s) => {
                let owned = &s.local().x_owned;
                gather(s.x_mut(ctx)?, owned, x);
                s.multiply(ctx, yl)?;
            }
            Mult::Hier(s) => {
                let owned = &s.local().x_owned;
                gather(s.x_mut(ctx)?, owned, x);
                s.multiply(ctx, yl)?;
            }
            Mult::Shared(_) => return Err(internal(ctx)),
        }
        ctx.sync()?;
        let rows = block(out.len, me, ctx.nprocs());
        let first = rows.start;
        // SAFETY: every process wrote its part before the sync above and none writes until the
        // sync below (the `Parts` protocol); this block of `y` is this process's alone.
        unsafe { parts.fill(out.rows(rows), first) };
        ctx.sync()
    }

    /// Deregisters the buffers (effective at the next sync) and gives up the claim on the
    /// plan; every process of the run calls it.
    pub fn free(self, ctx: &mut Ctx) -> mbsp::Result<()> {
        let Attached { mult, core } = self;
        let r = match mult {
            Mult::Plain(s) => s.free(ctx),
            // Registers nothing; dropped, it gives its claim on the plan back.
            Mult::Shared(s) => {
                drop(s);
                Ok(())
            }
            Mult::Hier(s) => s.free(ctx),
        };
        drop(core);
        r
    }
}

/// A plan of the multiply (the Python class `mbsp.SpmvPlan` wraps it).
#[pyclass(frozen, module = "mbsp._native")]
pub struct NativePlan {
    core: Arc<PlanCore>,
    /// Multiplies of one plan take turns (a plan serves one run at a time).
    busy: Mutex<()>,
}

impl Drop for NativePlan {
    /// The run of this thread that holds the plan lets it go now; one of another thread does
    /// at that thread's next multiply or end ([`crate::live`]).
    fn drop(&mut self) {
        self.core.dropped.store(true, Ordering::Relaxed);
        crate::live::release(&self.core);
    }
}

impl NativePlan {
    fn new(plans: Plans, kind: Kind) -> Self {
        NativePlan {
            core: Arc::new(PlanCore {
                parts: Parts::new(match &plans {
                    Plans::Flat(p) => p,
                    Plans::Hier(h) => &h.top,
                }),
                plans,
                kind,
                holder: Mutex::new(None),
                dropped: AtomicBool::new(false),
            }),
            busy: Mutex::new(()),
        }
    }

    fn top(&self) -> &SpmvPlan {
        self.core.top()
    }
}

/// Why CG stopped, when not by converging or running out of iterations.
enum CgEnd {
    Done,
    Interrupted,
    NotPositive { it: usize, pq: f64 },
}

/// One process's CG: its owned rows of the solution, iterations, relative residual, end.
type CgPart = (Vec<u32>, Vec<f64>, usize, f64, CgEnd);

/// CG on `plan` (x and y owners equal) for `b` from `x0`: until `|r| <= tol |b|` or `maxiter`
/// iterations. Each iteration: the plain multiply (two supersteps) and two all-reduces, the
/// second carrying the stop flag that process 0 reads (Ctrl-C), so that all stop together.
fn cg_process(
    ctx: &mut Ctx,
    plan: &SpmvPlan,
    b: &[f64],
    x0: &[f64],
    tol: f64,
    maxiter: usize,
    stop: &AtomicBool,
) -> mbsp::Result<CgPart> {
    let mut spmv = Spmv::new(ctx, plan)?;
    let l = spmv.local();
    let m = l.y_owned.len();
    let mut comm = Comm::new(ctx)?;
    let own = l.y_owned.clone();
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let mut x: Vec<f64> = own.iter().map(|&i| x0[i as usize]).collect();
    let bl: Vec<f64> = own.iter().map(|&i| b[i as usize]).collect();
    // r = b - A x0
    spmv.x_mut(ctx)?.copy_from_slice(&x);
    let mut q = vec![0.0; m];
    spmv.multiply(ctx, &mut q)?;
    let mut r: Vec<f64> = bl.iter().zip(&q).map(|(b, q)| b - q).collect();
    let mut sums = [dot(&bl, &bl), dot(&r, &r)];
    comm.allreduce(ctx, &mut sums, |a, b| a + b)?;
    let [bb, mut rho] = sums;
    let (mut it, mut end) = (0, CgEnd::Done);
    let target = tol * tol * bb;
    spmv.x_mut(ctx)?.copy_from_slice(&r); // the search direction lives in the multiply's x
    while it < maxiter && rho > target && bb > 0.0 {
        spmv.multiply(ctx, &mut q)?;
        let pq = comm.allreduce_value(ctx, dot(spmv.x(ctx)?, &q), |a, b| a + b)?;
        if pq.is_nan() || pq <= 0.0 {
            end = CgEnd::NotPositive { it, pq };
            break;
        }
        let alpha = rho / pq;
        let pv = spmv.x(ctx)?;
        for i in 0..m {
            x[i] += alpha * pv[i];
            r[i] -= alpha * q[i];
        }
        let flag = if ctx.pid() == 0 && stop.load(Ordering::Relaxed) {
            1.0
        } else {
            0.0
        };
        let mut sums = [dot(&r, &r), flag];
        comm.allreduce(ctx, &mut sums, |a, b| a + b)?;
        let beta = sums[0] / rho;
        rho = sums[0];
        it += 1;
        if sums[1] > 0.0 {
            end = CgEnd::Interrupted;
            break;
        }
        let pv = spmv.x_mut(ctx)?;
        for i in 0..m {
            pv[i] = r[i] + beta * pv[i];
        }
    }
    comm.free(ctx)?;
    let rel = if bb > 0.0 { (rho / bb).sqrt() } else { 0.0 };
    Ok((own, x, it, rel, end))
}

#[pymethods]
impl NativePlan {
    /// A flat plan (`kind` "plain" or "hp") of the matrix of the arrays under the distribution
    /// of the arrays.
    #[staticmethod]
    fn flat(py: Python<'_>, kind: &str, a: CooArgs<'_>, d: DistArgs<'_>) -> PyResult<Self> {
        const OP: &str = "SpmvPlan";
        let kind = match kind {
            "plain" => Kind::Plain,
            "hp" => Kind::Hp,
            other => {
                return Err(errors::value(format!(
                    "{OP}: kind '{other}' is not a flat multiply (plain, hp)"
                )));
            }
        };
        let a = a.matrix(OP)?;
        let d = d.distribution(OP, &a)?;
        let p = d.p;
        errors::preflight(mbsp_tools::preflight::spmv_matrix(&a, p))?;
        check_procs(OP, p)?;
        let plan = py
            .detach(move || SpmvPlan::new(&a, &d))
            .map_err(errors::value)?;
        Ok(NativePlan::new(Plans::Flat(Arc::new(plan)), kind))
    }

    /// A two-level plan: the matrix partitioned over `packages`, each package's part split
    /// into `cores` row blocks (2D inside too with `inner_2d`).
    #[staticmethod]
    #[pyo3(signature = (a, packages, cores, eps, seed, inner_2d=false))]
    fn hier(
        py: Python<'_>,
        a: CooArgs<'_>,
        packages: usize,
        cores: usize,
        eps: f64,
        seed: u64,
        inner_2d: bool,
    ) -> PyResult<Self> {
        const OP: &str = "SpmvPlan";
        let a = a.matrix(OP)?;
        if packages == 0 || cores == 0 {
            return Err(errors::value(format!(
                "{OP}: levels ({packages}, {cores}) need at least one process each"
            )));
        }
        let total = packages.checked_mul(cores).ok_or_else(|| {
            errors::value(format!("{OP}: {packages} x {cores} processes is too many"))
        })?;
        check_procs(OP, total)?;
        let o = options(OP, eps, seed, 0)?;
        errors::preflight(mbsp_tools::preflight::spmv_matrix(&a, total))?;
        let (o, stop) = cancellable(o);
        let plan = crate::wait::interruptible(py, "SpmvPlan", stop, move || {
            if inner_2d {
                HierPlan::partition_2d(&a, packages, cores, &o)
            } else {
                HierPlan::partition(&a, packages, cores, &o)
            }
        })?
        .map_err(errors::value)?;
        Ok(NativePlan::new(Plans::Hier(Arc::new(plan)), Kind::Hier))
    }

    /// `y = A x` (`x` of length cols, `y` of length rows, both contiguous float64).
    fn multiply(
        &self,
        py: Python<'_>,
        x: PyReadonlyArray1<'_, f64>,
        mut y: PyReadwriteArray1<'_, f64>,
    ) -> PyResult<()> {
        const OP: &str = "SpmvPlan.multiply";
        let top = self.top();
        let xs = slice(&x, OP, "x")?;
        if xs.len() != top.cols {
            return Err(errors::value(format!(
                "{OP}: x has {} entries, the matrix has {} columns",
                xs.len(),
                top.cols
            )));
        }
        let ys = y
            .as_slice_mut()
            .map_err(|_| errors::value(format!("{OP}: out must be a contiguous array")))?;
        if ys.len() != top.rows {
            return Err(errors::value(format!(
                "{OP}: out has {} entries, the matrix has {} rows",
                ys.len(),
                top.rows
            )));
        }
        if !xs.is_empty() && std::ptr::eq(xs.as_ptr(), ys.as_ptr()) {
            return Err(errors::value(format!("{OP}: out must not be x")));
        }
        py.detach(|| {
            let _turn = self.busy.lock().unwrap_or_else(|e| e.into_inner());
            crate::live::multiply(&self.core, xs, ys)
        })
        .map_err(errors::run)
    }

    /// CG for `A x = b` from `x0`: (x, iterations, relative residual, interrupted).
    fn cg<'py>(
        &self,
        py: Python<'py>,
        b: PyReadonlyArray1<'py, f64>,
        x0: PyReadonlyArray1<'py, f64>,
        tol: f64,
        maxiter: usize,
    ) -> PyResult<(Bound<'py, PyArray1<f64>>, usize, f64)> {
        const OP: &str = "cg";
        let Plans::Flat(plan) = &self.core.plans else {
            return Err(errors::value(format!(
                "{OP}: runs on flat plans (kind 'plain' or 'hp'), not '{}'",
                self.core.kind.name()
            )));
        };
        if plan.rows != plan.cols {
            return Err(errors::value(format!(
                "{OP}: the matrix is {} x {}, not square",
                plan.rows, plan.cols
            )));
        }
        if let Some(l) = plan.procs.iter().find(|l| l.x_owned != l.y_owned) {
            return Err(errors::value(format!(
                "{OP}: process {} owns different entries of x and y; make the plan with \
                 square=True (x and y owners equal)",
                l.pid
            )));
        }
        if !(tol.is_finite() && tol >= 0.0) {
            return Err(errors::value(format!("{OP}: tol = {tol} must be >= 0")));
        }
        let n = plan.rows;
        let (b, x0) = (slice(&b, OP, "b")?.to_vec(), slice(&x0, OP, "x0")?.to_vec());
        for (name, v) in [("b", &b), ("x0", &x0)] {
            if v.len() != n {
                return Err(errors::value(format!(
                    "{OP}: {name} has {} entries, the matrix has {n} rows",
                    v.len()
                )));
            }
        }
        let plan = plan.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let parts = crate::wait::interruptible(py, "cg", stop, move || {
            mbsp::run(plan.p(), |ctx| {
                cg_process(ctx, &plan, &b, &x0, tol, maxiter, &flag)
            })
        })?
        .map_err(errors::run)?;
        let mut x = vec![0.0; n];
        let (mut its, mut rel) = (0, 0.0);
        for (own, xl, it, r, end) in parts {
            if let CgEnd::NotPositive { it, pq } = end {
                return Err(errors::value(format!(
                    "{OP}: p·Ap = {pq} at iteration {it}: the matrix is not symmetric positive \
                     definite"
                )));
            }
            for (&i, v) in own.iter().zip(xl) {
                x[i as usize] = v;
            }
            (its, rel) = (it, r);
        }
        Ok((PyArray1::from_vec(py, x), its, rel))
    }

    /// Processes of the run (packages x cores for a two-level plan).
    #[getter]
    fn procs(&self) -> usize {
        match &self.core.plans {
            Plans::Flat(p) => p.p(),
            Plans::Hier(h) => h.top.p() * h.inner.first().map_or(1, |i| i.p()),
        }
    }

    /// "plain", "hp" or "hier".
    #[getter]
    fn kind(&self) -> &'static str {
        self.core.kind.name()
    }

    /// (rows, cols).
    #[getter]
    fn shape(&self) -> (usize, usize) {
        (self.top().rows, self.top().cols)
    }

    /// Nonzeros of each (top-level) process.
    #[getter]
    fn nnz_per_process(&self) -> Vec<usize> {
        self.top().procs.iter().map(|l| l.nnz()).collect()
    }

    /// (fan-out h, fan-in h) of the (top-level) multiply, in words.
    #[getter]
    fn h_relations(&self) -> (usize, usize) {
        self.top().h_relations()
    }

    /// Words communicated per multiply: between the (top-level) processes, and, for a
    /// two-level plan, inside the packages (partial sums between cores).
    #[getter]
    fn volumes(&self) -> (usize, usize) {
        match &self.core.plans {
            Plans::Flat(p) => {
                let w = p.procs.iter().map(|l| {
                    let (o, i) = l.traffic();
                    o + i
                });
                (w.sum(), 0)
            }
            Plans::Hier(h) => h.volumes(),
        }
    }
}

/// Refuses more processes than a run can have.
fn check_procs(op: &str, p: usize) -> PyResult<()> {
    match mbsp::max_procs() {
        Some((max, why)) if p > max => Err(errors::value(format!(
            "{op}: {p} processes is more than a run can have here ({max}: {why})"
        ))),
        _ => Ok(()),
    }
}

/// Runs this thread keeps for its plans (see `live`): for tests.
#[pyfunction]
fn kept_runs() -> usize {
    crate::live::kept()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativePlan>()?;
    m.add_function(wrap_pyfunction!(kept_runs, m)?)?;
    Ok(())
}
