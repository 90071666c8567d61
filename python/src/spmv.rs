//! The SpMV plan of the Python package: a matrix and its distribution cut into per-process
//! parts once; each multiply is one BSP run of the plan's processes on the runtime's threads,
//! with the GIL released; CG is one run for the whole solve.
//!
//! Each multiply: the run starts (its worker team is reused: ~10 µs), every process copies its
//! owned entries of `x` from the caller's array into the multiply's buffer, the BSP multiply
//! runs (plain: two supersteps; hp: one; hier: two top-level supersteps around a nested run in
//! each package), and every process writes its owned rows of `y` into the caller's array
//! ([`RowsOut`]). Cost: that of the variant (see `mbsp_algorithms::sparse::spmv`) plus the start
//! of a run, one registration superstep, and `n/p` scattered reads and writes per process.

use crate::errors;
use crate::sparse::{coo, distribution, slice};
use mbsp_algorithms::collectives::Comm;
use mbsp_algorithms::sparse::partition::Options;
use mbsp_algorithms::sparse::spmv::{HierPlan, HierSpmv, HpSpmv, LocalSpmv, Spmv, SpmvPlan};
use numpy::{PyArray1, PyReadonlyArray1, PyReadwriteArray1};
use pyo3::prelude::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The rows of `y` that the processes of a run write, each its own.
///
/// Every row has exactly one owner in a plan's distribution (`y_owner` holds one process per
/// row), so the processes write disjoint entries; the caller holds the only reference to `y`
/// for as long as the run lasts.
struct RowsOut {
    ptr: *mut f64,
    len: usize,
}

// SAFETY: the processes of a run write disjoint entries (see the type's docs) and the run ends
// before the borrow of `y` that made the pointer does.
unsafe impl Send for RowsOut {}
// SAFETY: as above.
unsafe impl Sync for RowsOut {}

impl RowsOut {
    fn new(y: &mut [f64]) -> Self {
        RowsOut {
            ptr: y.as_mut_ptr(),
            len: y.len(),
        }
    }

    /// Writes the rows `owned` (global indices) with `values`, in order.
    ///
    /// # Safety
    /// `owned` are the rows of one process of the plan, and no other thread of the run writes
    /// them (each process calls this with its own).
    unsafe fn write(&self, owned: &[u32], values: &[f64]) {
        for (&i, &v) in owned.iter().zip(values) {
            let i = i as usize;
            assert!(i < self.len, "row {i} outside y of {}", self.len);
            // SAFETY: `i < len` (checked), and no other process writes row `i` (caller).
            unsafe { self.ptr.add(i).write(v) };
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

/// A plan of the multiply (the Python class `mbsp.SpmvPlan` wraps it).
#[pyclass(frozen, module = "mbsp._native")]
pub struct NativePlan {
    plans: Plans,
    kind: Kind,
}

/// Copies the process's owned entries of `x` (global indices `owned`) into `buf`.
fn gather(buf: &mut [f64], owned: &[u32], x: &[f64]) {
    for (b, &j) in buf.iter_mut().zip(owned) {
        *b = x[j as usize];
    }
}

impl NativePlan {
    fn top(&self) -> &SpmvPlan {
        match &self.plans {
            Plans::Flat(p) => p,
            Plans::Hier(h) => &h.top,
        }
    }

    /// `y = A x` in one run.
    fn run_multiply(&self, x: &[f64], y: &mut [f64]) -> mbsp::Result<()> {
        let out = RowsOut::new(y);
        let finish = |l: &LocalSpmv, yl: &[f64]| {
            // SAFETY: `l.y_owned` are this process's rows (each process passes its own part).
            unsafe { out.write(&l.y_owned, yl) }
        };
        match (&self.plans, self.kind) {
            (Plans::Flat(plan), Kind::Plain) => mbsp::run(plan.p(), |ctx| {
                let mut s = Spmv::new(ctx, plan)?;
                let l = s.local();
                gather(s.x_mut(ctx)?, &l.x_owned, x);
                let mut yl = vec![0.0; l.y_owned.len()];
                s.multiply(ctx, &mut yl)?;
                finish(l, &yl);
                Ok(())
            }),
            (Plans::Flat(plan), _) => mbsp::run(plan.p(), |ctx| {
                let mut s = HpSpmv::new(ctx, plan)?;
                let l = s.local();
                gather(s.x_mut(ctx)?, &l.x_owned, x);
                // Direct gets read the owners' x after the sync that publishes it.
                ctx.sync()?;
                let mut yl = vec![0.0; l.y_owned.len()];
                s.multiply(ctx, &mut yl)?;
                finish(l, &yl);
                Ok(())
            }),
            (Plans::Hier(plan), _) => mbsp::run(plan.top.p(), |ctx| {
                let mut s = HierSpmv::new(ctx, plan)?;
                let l = s.local();
                gather(s.x_mut(ctx)?, &l.x_owned, x);
                let mut yl = vec![0.0; l.y_owned.len()];
                s.multiply(ctx, &mut yl)?;
                finish(l, &yl);
                Ok(())
            }),
        }
        .map(drop)
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
    ctx: &mut mbsp::Ctx,
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
    #[allow(clippy::too_many_arguments)] // the arrays of a matrix and of its distribution
    fn flat(
        py: Python<'_>,
        kind: &str,
        rows: usize,
        cols: usize,
        row: PyReadonlyArray1<'_, i64>,
        col: PyReadonlyArray1<'_, i64>,
        vals: PyReadonlyArray1<'_, f64>,
        p: usize,
        parts: PyReadonlyArray1<'_, u32>,
        x_owner: PyReadonlyArray1<'_, u32>,
        y_owner: PyReadonlyArray1<'_, u32>,
    ) -> PyResult<Self> {
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
        let a = coo(
            OP,
            rows,
            cols,
            slice(&row, OP, "row")?,
            slice(&col, OP, "col")?,
            slice(&vals, OP, "data")?,
        )?;
        let d = distribution(
            OP,
            &a,
            p,
            slice(&parts, OP, "parts")?,
            slice(&x_owner, OP, "x_owner")?,
            slice(&y_owner, OP, "y_owner")?,
        )?;
        errors::preflight(mbsp_cli::spmv_cmd::fits(&a, p))?;
        check_procs(OP, p)?;
        let plan = py
            .detach(move || SpmvPlan::new(&a, &d))
            .map_err(errors::value)?;
        Ok(NativePlan {
            plans: Plans::Flat(Arc::new(plan)),
            kind,
        })
    }

    /// A two-level plan: the matrix partitioned over `packages`, each package's part split
    /// into `cores` row blocks (2D inside too with `inner_2d`).
    #[staticmethod]
    #[allow(clippy::too_many_arguments)] // the arrays of a matrix and the partitioner's options
    #[pyo3(signature = (rows, cols, row, col, vals, packages, cores, eps, seed, inner_2d=false))]
    fn hier(
        py: Python<'_>,
        rows: usize,
        cols: usize,
        row: PyReadonlyArray1<'_, i64>,
        col: PyReadonlyArray1<'_, i64>,
        vals: PyReadonlyArray1<'_, f64>,
        packages: usize,
        cores: usize,
        eps: f64,
        seed: u64,
        inner_2d: bool,
    ) -> PyResult<Self> {
        const OP: &str = "SpmvPlan";
        let a = coo(
            OP,
            rows,
            cols,
            slice(&row, OP, "row")?,
            slice(&col, OP, "col")?,
            slice(&vals, OP, "data")?,
        )?;
        if packages == 0 || cores == 0 {
            return Err(errors::value(format!(
                "{OP}: levels ({packages}, {cores}) need at least one process each"
            )));
        }
        let total = packages.checked_mul(cores).ok_or_else(|| {
            errors::value(format!("{OP}: {packages} x {cores} processes is too many"))
        })?;
        check_procs(OP, total)?;
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(errors::value(format!(
                "{OP}: eps = {eps} must be a finite number >= 0"
            )));
        }
        errors::preflight(mbsp_cli::spmv_cmd::fits(&a, total))?;
        let o = Options {
            eps,
            seed,
            threads: 0,
        };
        let plan = crate::wait::interruptible(py, "SpmvPlan", None, move || {
            if inner_2d {
                HierPlan::partition_2d(&a, packages, cores, &o)
            } else {
                HierPlan::partition(&a, packages, cores, &o)
            }
        })?
        .map_err(errors::value)?;
        Ok(NativePlan {
            plans: Plans::Hier(Arc::new(plan)),
            kind: Kind::Hier,
        })
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
        py.detach(|| self.run_multiply(xs, ys)).map_err(errors::run)
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
        let Plans::Flat(plan) = &self.plans else {
            return Err(errors::value(format!(
                "{OP}: runs on flat plans (kind 'plain' or 'hp'), not '{}'",
                self.kind.name()
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
        let parts = crate::wait::interruptible(py, "cg", Some(stop), move || {
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
        match &self.plans {
            Plans::Flat(p) => p.p(),
            Plans::Hier(h) => h.top.p() * h.inner.first().map_or(1, |i| i.p()),
        }
    }

    /// "plain", "hp" or "hier".
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind.name()
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
        match &self.plans {
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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativePlan>()?;
    Ok(())
}
