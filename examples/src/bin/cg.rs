//! Conjugate gradients on a sparse symmetric positive definite matrix, with the 2D BSP SpMV.
//!
//! The matrix (default: the shared bcsstk16, a structural stiffness matrix) is partitioned by
//! the medium-grain partitioner with [`partition_square`], which gives `x_i` and `y_i` one owner:
//! every vector of CG is distributed like `y`, so the vector updates are local and the `x` of
//! the multiply is read and written in place ([`Spmv::x`], [`Spmv::x_mut`]). The solution is
//! assembled from the processes' parts with [`SpmvPlan::collect_y`].
//! The right-hand side is `b = A·1`, so the solution is all ones; the result is checked against
//! the same CG run sequentially. Two variants:
//!
//! * `plain` (default): each iteration multiplies `q = A p` with [`Spmv`] (two supersteps:
//!   fan-out, fan-in) and does two inner products (one all-reduce superstep each, through a
//!   `Comm` mailbox): four supersteps, `2 nz(s) + 10 n/p` flops, `h_fanout + h_fanin + 2(p − 1)`
//!   words.
//! * `hp`: the one-superstep [`HpSpmv`] (direct gets), whose `x` must be written before a sync. `p` is only
//!   known after the `r·r` all-reduce, so the multiply is of `r` instead (written before that
//!   all-reduce, whose sync publishes it) and `q = A p = A r + β q_old` is updated alongside
//!   `p = r + β p_old`: three supersteps per iteration, `2 nz(s) + 14 n/p` flops.
//!
//! The iterations' time (from the end of the setup to the last all-reduce, as process 0 saw it;
//! the run's whole time is printed too) is printed beside its BSP prediction: per iteration, the multiply's cost
//! ([`SpmvPlan::predict`] with the time per nonzero of mbsp's local multiply, measured here
//! with every process running its part at once, as `mbsp spmv` measures it), the vector work
//! of the largest part at its time per entry measured the same way (both just before and just
//! after the solve, averaged), and two all-reduce
//! supersteps of `p − 1` words, with `g` and `l` from `MBSP_PARAMS` (`mbsp params --json`) or the
//! defaults.
//!
//! `cargo run --release -p mbsp-examples --bin cg [-- MATRIX P TOLERANCE MAX_ITERATIONS
//! plain|hp]`

use mbsp_algorithms::collectives::Comm;
use mbsp_algorithms::sparse::partition::{Options, partition_square};
use mbsp_algorithms::sparse::spmv::{Fanout, HpSpmv, Spmv, SpmvPlan};
use mbsp_algorithms::sparse::{CooMatrix, mtx};
use std::path::PathBuf;

/// The default matrix, in the shared data directory: `$MBSP_DATA_DIR`, else `../shared/data`
/// from the current directory (the repository's root), else `../shared/data` beside the
/// repository this program was built from.
fn default_matrix() -> PathBuf {
    let candidates: Vec<PathBuf> = [
        std::env::var_os("MBSP_DATA_DIR").map(PathBuf::from),
        Some(PathBuf::from("../shared/data")),
        Some(PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/data"
        ))),
    ]
    .into_iter()
    .flatten()
    .map(|d| d.join("matrices/bcsstk16.mtx"))
    .collect();
    let found = candidates.iter().find(|f| f.is_file()).cloned();
    found.unwrap_or_else(|| {
        panic!(
            "bcsstk16.mtx not found (looked for {candidates:?}): give a matrix file or set \
             MBSP_DATA_DIR"
        )
    })
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The same CG, sequentially: returns (solution, iterations).
fn sequential_cg(a: &CooMatrix, b: &[f64], tol: f64, max_it: usize) -> (Vec<f64>, usize) {
    let n = a.rows;
    let mul = |v: &[f64]| {
        let mut y = vec![0.0; n];
        for k in 0..a.nnz() {
            y[a.row_idx[k] as usize] += a.vals[k] * v[a.col_idx[k] as usize];
        }
        y
    };
    let (mut x, mut r) = (vec![0.0; n], b.to_vec());
    let mut p = r.clone();
    let mut rho = dot(&r, &r);
    let stop = tol * tol * dot(b, b);
    for it in 0..max_it {
        if rho <= stop {
            return (x, it);
        }
        let q = mul(&p);
        let alpha = rho / dot(&p, &q);
        for i in 0..n {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        let next = dot(&r, &r);
        let beta = next / rho;
        rho = next;
        for i in 0..n {
            p[i] = r[i] + beta * p[i];
        }
    }
    (x, max_it)
}

/// Seconds per nonzero of the local multiply under `plan`, and per vector entry of one CG
/// iteration's vector work (two inner products, three updates), each timed as a superstep of
/// every process running its own part at once, from sync to sync (as BSP's r is measured:
/// cores that share a cache and the memory run slower together than one alone, and processes
/// that share a hardware thread compute one after another), over the largest part: the
/// measure [`predict_iteration`] charges it by. Each is the best of a few supersteps.
fn parallel_rates(plan: &SpmvPlan) -> mbsp::Result<(f64, f64)> {
    let most_nz = plan.most_nnz().max(1);
    let most_rows = plan
        .procs
        .iter()
        .map(|l| l.y_owned.len())
        .max()
        .unwrap_or(0)
        .max(1);
    let reps = (2_000_000 / most_nz).clamp(1, 1000);
    let times = mbsp::run(plan.p(), |ctx| {
        let part = &plan.procs[ctx.pid()];
        let m = part.y_owned.len();
        let (mut x, mut r, mut p, y) = (vec![0.0; m], vec![1.0; m], vec![0.5; m], vec![0.25; m]);
        let mut vector_work = || {
            let alpha = 1e-3 / dot(&p, &y).abs().max(1.0);
            for i in 0..m {
                x[i] += alpha * p[i];
                r[i] -= alpha * y[i];
            }
            let beta = 1e-3 * dot(&r, &r).min(1.0);
            for i in 0..m {
                p[i] = r[i] + beta * p[i];
            }
            std::hint::black_box((&x, &p));
        };
        let (mut t_mul, mut t_vec) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..5 {
            ctx.sync()?;
            let t = std::time::Instant::now();
            part.run_local_multiplies(reps);
            ctx.sync()?;
            t_mul = t_mul.min(t.elapsed().as_secs_f64() / reps as f64);
            let t = std::time::Instant::now();
            vector_work();
            ctx.sync()?;
            t_vec = t_vec.min(t.elapsed().as_secs_f64());
        }
        Ok((t_mul, t_vec))
    })?;
    let slowest = |f: fn(&(f64, f64)) -> f64| times.iter().map(f).fold(0.0, f64::max);
    Ok((
        slowest(|t| t.0) / most_nz as f64,
        slowest(|t| t.1) / most_rows as f64,
    ))
}

/// The BSP-predicted seconds of one CG iteration: the multiply ([`SpmvPlan::predict`]), the
/// vector work of the largest part (the hp variant updates `q` too: 14 instead of 10 flops
/// per entry), two one-superstep all-reduces of `p − 1` words, and the turns of processes
/// that share a hardware thread.
fn predict_iteration(plan: &SpmvPlan, per_nz: f64, per_entry: f64, hp: bool) -> f64 {
    let params = mbsp_algorithms::cost::Params::current();
    let rows = plan
        .procs
        .iter()
        .map(|l| l.y_owned.len())
        .max()
        .unwrap_or(0) as f64;
    let vector = rows * per_entry * if hp { 1.4 } else { 1.0 };
    let allreduces = 2.0 * params.time(1, (plan.p() - 1) as f64, false);
    // Where processes outnumber the hardware threads, every superstep also pays for their
    // turns (`Params::turns_time`); their computation is in the rates already.
    let turns = plan.p().div_ceil(mbsp::nprocs().max(1));
    let supersteps = if hp { 3.0 } else { 4.0 };
    let turning = supersteps * params.turns_time(turns, false, true);
    plan.predict(params, per_nz, hp) + vector + allreduces + turning
}

/// (this process's part of the solution, iterations, relative residual, seconds of the
/// iterations: from the sync that ends the setup to the last one).
type Solved = (Vec<f64>, usize, f64, f64);

/// CG with the plain multiply: each iteration multiplies `A p` (two supersteps) and does two
/// all-reduces.
fn cg_plain(ctx: &mut mbsp::Ctx, plan: &SpmvPlan, tol: f64, max_it: usize) -> mbsp::Result<Solved> {
    let mut spmv = Spmv::new(ctx, plan)?;
    let m = spmv.local().y_owned.len();
    let mut comm = Comm::new(ctx)?;
    // b = A·1.
    spmv.x_mut(ctx)?.fill(1.0);
    let mut b = vec![0.0; m];
    spmv.multiply(ctx, &mut b)?;
    let bb = comm.allreduce_value(ctx, dot(&b, &b), |x, y| x + y)?;
    let (mut x, mut r, mut q) = (vec![0.0; m], b.clone(), vec![0.0; m]);
    let mut rho = bb;
    let stop = tol * tol * bb;
    let mut it = 0;
    spmv.x_mut(ctx)?.copy_from_slice(&r); // p = r lives in the multiply's x
    let t = std::time::Instant::now();
    while it < max_it && rho > stop {
        spmv.multiply(ctx, &mut q)?;
        let pq = comm.allreduce_value(ctx, dot(spmv.x(ctx)?, &q), |x, y| x + y)?;
        let alpha = rho / pq;
        let pv = spmv.x(ctx)?;
        for i in 0..m {
            x[i] += alpha * pv[i];
            r[i] -= alpha * q[i];
        }
        let next = comm.allreduce_value(ctx, dot(&r, &r), |x, y| x + y)?;
        let beta = next / rho;
        rho = next;
        let pv = spmv.x_mut(ctx)?;
        for i in 0..m {
            pv[i] = r[i] + beta * pv[i];
        }
        it += 1;
    }
    let secs = t.elapsed().as_secs_f64();
    comm.free(ctx)?;
    Ok((x, it, (rho / bb).sqrt(), secs))
}

/// CG with the one-superstep multiply. Its `x` must be written before a sync, so the multiply
/// is of the residual `r` (updated before the `r·r` all-reduce, whose sync publishes it) and
/// `q = A p` follows from `A p = A r + β A p_old`: one superstep per multiply, two all-reduces.
fn cg_hp(ctx: &mut mbsp::Ctx, plan: &SpmvPlan, tol: f64, max_it: usize) -> mbsp::Result<Solved> {
    let mut spmv = HpSpmv::with_fanout(ctx, plan, Fanout::DirectGet)?;
    let m = spmv.local().y_owned.len();
    let mut comm = Comm::new(ctx)?;
    spmv.x_mut(ctx)?.fill(1.0);
    ctx.sync()?;
    let mut b = vec![0.0; m];
    spmv.multiply(ctx, &mut b)?;
    spmv.x_mut(ctx)?.copy_from_slice(&b); // r = b lives in the multiply's x
    let bb = comm.allreduce_value(ctx, dot(&b, &b), |x, y| x + y)?;
    let (mut x, mut p, mut q, mut s) = (vec![0.0; m], vec![0.0; m], vec![0.0; m], vec![0.0; m]);
    let (mut rho, mut beta) = (bb, 0.0);
    let stop = tol * tol * bb;
    let mut it = 0;
    let t = std::time::Instant::now();
    while it < max_it && rho > stop {
        spmv.multiply(ctx, &mut s)?; // s = A r
        let r = spmv.x(ctx)?;
        for i in 0..m {
            p[i] = r[i] + beta * p[i];
            q[i] = s[i] + beta * q[i];
        }
        let pq = comm.allreduce_value(ctx, dot(&p, &q), |x, y| x + y)?;
        let alpha = rho / pq;
        let r = spmv.x_mut(ctx)?;
        let mut rr = 0.0;
        for i in 0..m {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
            rr += r[i] * r[i];
        }
        let next = comm.allreduce_value(ctx, rr, |x, y| x + y)?;
        beta = next / rho;
        rho = next;
        it += 1;
    }
    let secs = t.elapsed().as_secs_f64();
    comm.free(ctx)?;
    Ok((x, it, (rho / bb).sqrt(), secs))
}

const USAGE: &str = "[MATRIX] [P] [TOLERANCE] [MAX_ITERATIONS] [plain|hp]";

fn main() -> std::process::ExitCode {
    mbsp_examples::report(run())
}

fn run() -> mbsp_examples::Outcome {
    use mbsp_examples::arg;
    let file = std::env::args()
        .nth(1)
        .map_or_else(default_matrix, PathBuf::from);
    let p: usize = arg(1, mbsp::nprocs(), "a process count", USAGE);
    let tol: f64 = arg(2, 1e-10, "a tolerance", USAGE);
    let max_it: usize = arg(3, 20_000, "an iteration count", USAGE);
    let hp = match std::env::args().nth(5).as_deref() {
        None | Some("plain") => false,
        Some("hp") => true,
        Some(v) => mbsp_examples::usage_error(&format!("variant {v:?}: plain or hp"), USAGE),
    };
    let a = mtx::read_path(&file)?;
    if a.rows != a.cols {
        return Err(format!(
            "{}: CG needs a square matrix, not {} x {}",
            file.display(),
            a.rows,
            a.cols
        )
        .into());
    }
    let n = a.rows;
    // x and y distributed alike: CG's vectors, and the multiply's x and y, all share owners.
    let d = partition_square(&a, p, &Options::default())?.dist;
    let plan = SpmvPlan::new(&a, &d)?;
    let b_seq: Vec<f64> = {
        let mut y = vec![0.0; n];
        for k in 0..a.nnz() {
            y[a.row_idx[k] as usize] += a.vals[k];
        }
        y
    };

    // The rates, measured just before the solve and again just after it (the mean of the
    // two): a shared machine changes speed within seconds, and one measurement taken in
    // another state than the solve moves the prediction by as much.
    let before = parallel_rates(&plan)?;
    let t = std::time::Instant::now();
    let out = if hp {
        mbsp::run(p, |ctx| cg_hp(ctx, &plan, tol, max_it))?
    } else {
        mbsp::run(p, |ctx| cg_plain(ctx, &plan, tol, max_it))?
    };
    let secs = t.elapsed().as_secs_f64();

    let (it, rel, iterating) = (out[0].1, out[0].2, out[0].3);
    let parts: Vec<&[f64]> = out.iter().map(|(part, ..)| part.as_slice()).collect();
    let x = plan.collect_y(&parts)?;
    let after = parallel_rates(&plan)?;
    let (per_nz, per_entry) = ((before.0 + after.0) / 2.0, (before.1 + after.1) / 2.0);
    let predicted = it as f64 * predict_iteration(&plan, per_nz, per_entry, hp);
    let (xs, it_seq) = sequential_cg(&a, &b_seq, tol, max_it);
    let diff = x
        .iter()
        .zip(&xs)
        .map(|(u, v)| (u - v).abs())
        .fold(0.0, f64::max);
    // ‖x − 1‖ / ‖1‖: the error of the solution (bounded by the condition number times the
    // relative residual: bcsstk16's is large, so the error is far above the residual).
    let err = (x.iter().map(|v| (v - 1.0).powi(2)).sum::<f64>() / n as f64).sqrt();
    println!(
        "{}: n = {n}, nnz = {}, p = {p}: {it} iterations ({it_seq} sequential), relative residual \
         {rel:.2e}, ‖x − 1‖/‖1‖ = {err:.2e}, max |x - x_seq| = {diff:.2e}, {secs:.3} s \
         (the iterations {iterating:.3} s, BSP prediction {predicted:.3} s, {})",
        file.display(),
        a.nnz(),
        mbsp::params::judge_prediction(iterating, predicted)
    );
    if it >= max_it || rel > tol {
        return Err(format!("CG did not converge to {tol:e} in {max_it} iterations").into());
    }
    // Summation order differs from the sequential CG, so iterates drift apart slowly: compare
    // the solutions at the accuracy the residual allows, and the iteration counts loosely.
    let scale = xs.iter().map(|v| v.abs()).fold(1.0, f64::max);
    if diff > 1e-4 * scale || it.abs_diff(it_seq) > it_seq / 10 + 5 {
        return Err(format!(
            "differs from sequential CG: max diff {diff:e}, {it} vs {it_seq} iterations"
        )
        .into());
    }
    println!("ok: matches sequential CG");
    Ok(())
}
