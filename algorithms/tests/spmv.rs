//! The plain BSP SpMV against a sequential multiply: random and real matrices, p = 1, 2, 3, 4, 7,
//! many multiplies per run, empty rows, columns and parts, rectangular matrices, bad input.

mod common;

use common::{Rng, within};
use mbsp_algorithms::sparse::partition::{Options, partition};
use mbsp_algorithms::sparse::spmv::{Spmv, SpmvPlan};
use mbsp_algorithms::sparse::{CooMatrix, Distribution, mtx};

fn sequential(a: &CooMatrix, x: &[f64]) -> Vec<f64> {
    let mut y = vec![0.0; a.rows];
    for k in 0..a.nnz() {
        y[a.row_idx[k] as usize] += a.vals[k] * x[a.col_idx[k] as usize];
    }
    y
}

/// Runs `times` multiplies y = A x_t with x_t[j] = j + t + 1 and returns the last y, gathered.
fn distributed(a: &CooMatrix, d: &Distribution, times: usize) -> Vec<f64> {
    let plan = SpmvPlan::new(a, d).unwrap();
    let parts = mbsp::run(d.p, |ctx| {
        let local = &plan.procs[ctx.pid()];
        let mut spmv = Spmv::new(ctx, local)?;
        let mut y = vec![0.0; local.y_owned.len()];
        for t in 0..times {
            let x = spmv.x_mut(ctx)?;
            for (v, &j) in x.iter_mut().zip(&local.x_owned) {
                *v = (j as usize + t + 1) as f64;
            }
            spmv.multiply(ctx, &mut y)?;
        }
        Ok(y)
    })
    .unwrap();
    let mut y = vec![f64::NAN; a.rows];
    for (s, part) in parts.into_iter().enumerate() {
        for (q, &i) in plan.procs[s].y_owned.iter().enumerate() {
            y[i as usize] = part[q];
        }
    }
    y
}

fn check(a: &CooMatrix, p: usize, times: usize) {
    let d = partition(a, p, &Options::default()).unwrap().dist;
    let y = distributed(a, &d, times);
    let x: Vec<f64> = (0..a.cols).map(|j| (j + times) as f64).collect();
    let want = sequential(a, &x);
    for (i, (&got, &exp)) in y.iter().zip(&want).enumerate() {
        let scale = exp.abs().max(1.0);
        assert!(
            (got - exp).abs() <= 1e-12 * scale,
            "p = {p}, row {i}: {got} vs {exp}"
        );
    }
}

fn random_matrix(rng: &mut Rng, m: usize, n: usize, nnz: usize) -> CooMatrix {
    let e: Vec<(usize, usize, f64)> = (0..nnz)
        .map(|_| {
            (
                rng.below(m),
                rng.below(n),
                rng.below(1000) as f64 / 7.0 - 50.0,
            )
        })
        .collect();
    CooMatrix::new(m, n, e).unwrap()
}

#[test]
fn random_matrices_every_p() {
    within(300, || {
        let mut rng = Rng(3);
        for &(m, n, nnz) in &[
            (40, 40, 200),
            (100, 30, 500),
            (20, 150, 400),
            (300, 300, 3000),
        ] {
            let a = random_matrix(&mut rng, m, n, nnz);
            for p in [1, 2, 3, 4, 7] {
                check(&a, p, 3);
            }
        }
    });
}

#[test]
fn real_matrices() {
    within(300, || {
        let dir = common::matrices_dir();
        for name in ["rajat01.mtx", "bayer10.mtx"] {
            let a = mtx::read_path(dir.join(name)).unwrap();
            for p in [1, 2, 3, 4, 7] {
                check(&a, p, 2);
            }
        }
    });
}

#[test]
fn many_multiplies_in_one_run() {
    within(120, || {
        let mut rng = Rng(5);
        let a = random_matrix(&mut rng, 200, 200, 1500);
        check(&a, 4, 200);
    });
}

#[test]
fn empty_rows_columns_and_parts() {
    within(120, || {
        // Rows 1, 3, ... and columns >= 10 are empty; p > nnz leaves parts empty.
        let a = CooMatrix::new(20, 30, (0..10).map(|k| (2 * k, k, k as f64 + 1.0))).unwrap();
        for p in [1, 2, 4, 13] {
            check(&a, p, 2);
        }
        let e = CooMatrix::new(4, 5, Vec::new()).unwrap();
        check(&e, 3, 1);
    });
}

#[test]
fn mismatched_plans_and_vectors_are_refused() {
    let mut rng = Rng(7);
    let a = random_matrix(&mut rng, 30, 30, 100);
    let b = random_matrix(&mut rng, 30, 31, 100);
    let d = partition(&a, 2, &Options::default()).unwrap().dist;
    let err = SpmvPlan::new(&b, &d).unwrap_err();
    assert!(err.contains("another matrix"), "{err}");
    let plan = SpmvPlan::new(&a, &d).unwrap();
    let err = mbsp::run(2, |ctx| {
        let mut spmv = Spmv::new(ctx, &plan.procs[ctx.pid()])?;
        let mut y = vec![0.0; plan.procs[ctx.pid()].y_owned.len() + 1];
        spmv.multiply(ctx, &mut y)
    })
    .unwrap_err();
    assert!(err.to_string().contains("spmv multiply"), "{err}");
}
