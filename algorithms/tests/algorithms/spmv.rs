//! The BSP SpMV (plain, hp, shared vectors, hierarchical) against a sequential multiply: random and real matrices, p = 1, 2, 3, 4, 7,
//! many multiplies per run, empty rows, columns and parts, rectangular matrices, bad input.

use crate::common;

use common::{SplitMix64, within};
use mbsp_algorithms::sparse::partition::{Options, partition, partition_square};
use mbsp_algorithms::sparse::spmv::{
    Fanout, HierPlan, HierSpmv, HpSpmv, SharedSpmv, SharedVectors, Spmv, SpmvError, SpmvPlan,
};
use mbsp_algorithms::sparse::{CooMatrix, Distribution, mondriaan, mtx};
use std::cell::OnceCell;

fn sequential(a: &CooMatrix, x: &[f64]) -> Vec<f64> {
    let mut y = vec![0.0; a.rows];
    for k in 0..a.nnz() {
        y[a.row_idx[k] as usize] += a.vals[k] * x[a.col_idx[k] as usize];
    }
    y
}

/// Which multiply a test runs.
#[derive(Clone, Copy, Debug)]
enum Form {
    Plain,
    Hp(Fanout),
    /// [`SharedSpmv`] on whole vectors.
    Shared,
    /// Packages x cores: packages by the partitioner, row blocks inside.
    Hier(usize, usize),
    /// Packages x cores, both levels by the partitioner.
    Hier2d(usize, usize),
    /// Packages x cores on quick scattered-block distributions ([`scattered`]).
    HierQuick(usize, usize),
}

/// Every form at `p`: plain, hp, and the hierarchical forms for every factorisation of `p`.
fn forms(p: usize) -> Vec<Form> {
    let mut v = vec![
        Form::Plain,
        Form::Hp(Fanout::Puts),
        Form::Hp(Fanout::DirectGet),
        Form::Shared,
    ];
    for c in (1..=p).filter(|c| p.is_multiple_of(*c)) {
        v.push(Form::Hier(p / c, c));
        v.push(Form::Hier2d(p / c, c));
    }
    v
}

fn x_at(j: u32, t: usize) -> f64 {
    (j as usize + t + 1) as f64
}

/// A process's owned entries of x_t.
fn fill(x: &mut [f64], owned: &[u32], t: usize) {
    for (v, &j) in x.iter_mut().zip(owned) {
        *v = x_at(j, t);
    }
}

/// Runs `times` multiplies y = A x_t with x_t[j] = j + t + 1 and returns the last y, gathered.
/// The hierarchical form partitions for itself.
/// The multiply `form` of `a` on `d`, `times` times; the plain and hp forms share the plan of
/// `d` in `flat` (made by the first that needs it: plans of big matrices take seconds).
fn distributed(
    a: &CooMatrix,
    d: &Distribution,
    form: Form,
    times: usize,
    flat: &OnceCell<SpmvPlan>,
) -> Vec<f64> {
    let (parts, owned): (Vec<Vec<f64>>, Vec<Vec<u32>>) = match form {
        Form::Plain => {
            let plan = flat.get_or_init(|| SpmvPlan::new(a, d).unwrap());
            let parts = mbsp::run(d.p, |ctx| {
                let mut spmv = Spmv::new(ctx, plan)?;
                let local = spmv.local();
                let mut y = vec![0.0; local.y_owned.len()];
                for t in 0..times {
                    fill(spmv.x_mut(ctx)?, &local.x_owned, t);
                    spmv.multiply(ctx, &mut y)?;
                }
                Ok(y)
            })
            .unwrap();
            (
                parts,
                plan.procs.iter().map(|l| l.y_owned.clone()).collect(),
            )
        }
        Form::Hp(fanout) => {
            let plan = flat.get_or_init(|| SpmvPlan::new(a, d).unwrap());
            let parts = mbsp::run(d.p, |ctx| {
                let mut spmv = HpSpmv::with_fanout(ctx, plan, fanout)?;
                assert_eq!(spmv.fanout(), fanout);
                let local = spmv.local();
                let mut y = vec![0.0; local.y_owned.len()];
                for t in 0..times {
                    fill(spmv.x_mut(ctx)?, &local.x_owned, t);
                    // With puts, x may be written right before the multiply.
                    if fanout == Fanout::DirectGet {
                        ctx.sync()?;
                    }
                    spmv.multiply(ctx, &mut y)?;
                }
                Ok(y)
            })
            .unwrap();
            (
                parts,
                plan.procs.iter().map(|l| l.y_owned.clone()).collect(),
            )
        }
        Form::Shared => {
            // Every x_t and a y for each, whole, made before the run.
            let plan = flat.get_or_init(|| SpmvPlan::new(a, d).unwrap());
            let xs: Vec<Vec<f64>> = (0..times)
                .map(|t| (0..a.cols as u32).map(|j| x_at(j, t)).collect())
                .collect();
            let mut ys = vec![vec![f64::NAN; a.rows]; times];
            let vs: Vec<SharedVectors> = xs
                .iter()
                .zip(&mut ys)
                .map(|(x, y)| SharedVectors::new(plan, x, y).unwrap())
                .collect();
            mbsp::run(d.p, |ctx| {
                let mut spmv = SharedSpmv::new(ctx, plan)?;
                for v in &vs {
                    spmv.multiply(ctx, v)?;
                }
                Ok(())
            })
            .unwrap();
            drop(vs);
            return ys.pop().unwrap();
        }
        Form::Hier(packages, cores)
        | Form::Hier2d(packages, cores)
        | Form::HierQuick(packages, cores) => {
            let plan = if let Form::Hier(..) = form {
                HierPlan::partition(a, packages, cores, &Options::default()).unwrap()
            } else if let Form::Hier2d(..) = form {
                HierPlan::partition_2d(a, packages, cores, &Options::default()).unwrap()
            } else {
                let top = scattered(a, packages, 1);
                let parts = SpmvPlan::new(a, &top).unwrap();
                let inner: Vec<Distribution> = parts
                    .procs
                    .iter()
                    .map(|l| scattered(&l.matrix(), cores, 2))
                    .collect();
                HierPlan::new(a, &top, &inner).unwrap()
            };
            let parts = mbsp::run(packages, |ctx| {
                let mut spmv = HierSpmv::new(ctx, &plan)?;
                let local = spmv.local();
                let mut y = vec![0.0; local.y_owned.len()];
                for t in 0..times {
                    fill(spmv.x_mut(ctx)?, &local.x_owned, t);
                    spmv.multiply(ctx, &mut y)?;
                }
                Ok(y)
            })
            .unwrap();
            let owned = plan.top.procs.iter().map(|l| l.y_owned.clone()).collect();
            (parts, owned)
        }
    };
    let mut y = vec![f64::NAN; a.rows];
    for (part, rows) in parts.into_iter().zip(owned) {
        for (q, &i) in rows.iter().enumerate() {
            y[i as usize] = part[q];
        }
    }
    y
}

/// Every form in `forms` on distribution `d` against the sequential multiply: relative error
/// per entry at most 1e-12 of the sum of the magnitudes of its terms.
fn check_on(a: &CooMatrix, d: &Distribution, forms: &[Form], times: usize) {
    let x: Vec<f64> = (0..a.cols as u32).map(|j| x_at(j, times - 1)).collect();
    let want = sequential(a, &x);
    let mut scale = vec![0.0f64; a.rows];
    for k in 0..a.nnz() {
        scale[a.row_idx[k] as usize] += (a.vals[k] * x[a.col_idx[k] as usize]).abs();
    }
    let flat = OnceCell::new();
    for &form in forms {
        let y = distributed(a, d, form, times, &flat);
        for (i, (&got, &exp)) in y.iter().zip(&want).enumerate() {
            assert!(
                (got - exp).abs() <= 1e-12 * scale[i],
                "p = {}, {form:?}, row {i}: {got} vs {exp}",
                d.p
            );
        }
    }
}

/// A quick distribution for big matrices: 16 x 16 blocks of the matrix scattered over the parts,
/// each vector entry owned by the part of the first nonzero in its row or column (or cyclic).
fn scattered(a: &CooMatrix, p: usize, seed: u64) -> Distribution {
    let nz_part: Vec<u32> = (0..a.nnz())
        .map(|k| {
            let block = ((a.row_idx[k] as u64 / 16) << 32) | (a.col_idx[k] as u64 / 16);
            (common::mix(block ^ seed << 60) % p as u64) as u32
        })
        .collect();
    let mut x_owner: Vec<u32> = (0..a.cols).map(|j| (j % p) as u32).collect();
    let mut y_owner: Vec<u32> = (0..a.rows).map(|i| (i % p) as u32).collect();
    for k in (0..a.nnz()).rev() {
        x_owner[a.col_idx[k] as usize] = nz_part[k];
        y_owner[a.row_idx[k] as usize] = nz_part[k];
    }
    Distribution {
        p,
        nz_part,
        x_owner,
        y_owner,
    }
}

fn check(a: &CooMatrix, p: usize, times: usize) {
    let d = partition(a, p, &Options::default()).unwrap().dist;
    check_on(a, &d, &forms(p), times);
}

fn random_matrix(rng: &mut SplitMix64, m: usize, n: usize, nnz: usize) -> CooMatrix {
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
        let mut rng = SplitMix64::new(3);
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
fn one_valued_matrices_every_p() {
    // Every nonzero of one value: the local matrices keep it once (sell.rs), renamed ones
    // (the shared form) with values stored for their chunks with padding alone.
    within(300, || {
        let mut rng = SplitMix64::new(4);
        for &(m, n, nnz, v) in &[(40, 40, 200, 1.0), (300, 300, 3000, -0.75)] {
            let mut a = random_matrix(&mut rng, m, n, nnz);
            a.vals.fill(v);
            for p in [1, 2, 3, 7] {
                check(&a, p, 3);
            }
        }
    });
}

#[test]
fn real_matrices() {
    within(300, || {
        let dir = common::matrices_dir();
        // (Each p partitions the matrix: most of the time. p = 1 and 4 are covered by the
        // random matrices and the shared ones.)
        for name in ["rajat01.mtx", "bayer10.mtx"] {
            let a = mtx::read_path(dir.join(name)).unwrap();
            for p in [2, 3, 7] {
                check(&a, p, 2);
            }
        }
    });
}

#[test]
fn many_multiplies_in_one_run() {
    within(120, || {
        let mut rng = SplitMix64::new(5);
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
    let mut rng = SplitMix64::new(7);
    let a = random_matrix(&mut rng, 30, 30, 100);
    let b = random_matrix(&mut rng, 30, 31, 100);
    let d = partition(&a, 2, &Options::default()).unwrap().dist;
    let err = SpmvPlan::new(&b, &d).unwrap_err();
    assert!(
        matches!(err, SpmvError::OtherMatrix { cols: 31, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("another matrix"), "{err}");
    let plan = SpmvPlan::new(&a, &d).unwrap();
    // A plan serves runs of its own size only, for every variant alike.
    let err = mbsp::run(3, |ctx| Spmv::new(ctx, &plan).map(drop)).unwrap_err();
    assert!(
        err.to_string().contains("spmv") && err.to_string().contains("the plan is for 2"),
        "{err}"
    );
    let err = mbsp::run(2, |ctx| {
        let mut spmv = Spmv::new(ctx, &plan)?;
        let mut y = vec![0.0; plan.procs[ctx.pid()].y_owned.len() + 1];
        spmv.multiply(ctx, &mut y)
    })
    .unwrap_err();
    assert!(err.to_string().contains("spmv multiply"), "{err}");
}

/// The shared matrices of at most 2 million nonzeros, in two tests (alternate files by name)
/// that run side by side: through every variant for every p they take half a minute.
#[test]
fn every_shared_matrix_every_variant_first_half() {
    shared_matrices(Some(0));
}

#[test]
fn every_shared_matrix_every_variant_second_half() {
    shared_matrices(Some(1));
}

/// G3_circuit (7.7 million nonzeros) in one configuration of every variant: a sweep over every
/// p would take most of the matrix tests' time, and the smaller matrices cover every p. A test
/// of its own, so that it runs beside the others; named to come first (the test harness starts
/// tests in the order of their names), so that the others fill the second thread meanwhile.
#[test]
fn big_shared_matrix_every_variant() {
    shared_matrices(None);
}

/// The shared matrices of more than 2 million nonzeros (`half` None), or every other one of the
/// others starting at `half`, through every multiply: the smaller ones for every p, the large
/// ones at p = 4 (hierarchically 2 x 2).
fn shared_matrices(half: Option<usize>) {
    let large = half.is_none();
    within(900, move || {
        let dir = common::matrices_dir();
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            // Matrices only: a partition written beside one (`name.mtx-P4`) is not one.
            .filter(|f| {
                let n = f.to_string_lossy();
                n.ends_with(".mtx") || n.ends_with(".mtx.gz")
            })
            .collect();
        names.sort();
        assert!(
            names.len() >= 10,
            "shared matrices missing in {}",
            dir.display()
        );
        // (p = 1, without communication, is covered by the random matrices.)
        let every_p = [(2, (1, 2)), (3, (3, 1)), (4, (2, 2)), (7, (1, 7))];
        let mut tested = 0;
        let mut small = 0;
        for f in names {
            let h = mtx::read_header(&f).unwrap();
            if (h.entries > 2_000_000) != large {
                continue;
            }
            if let Some(half) = half {
                small += 1;
                if small % 2 != half {
                    continue;
                }
            }
            let a = mtx::read_path(&f).unwrap();
            let configs = if large { &every_p[2..3] } else { &every_p[..] };
            for &(p, hier) in configs {
                let d = scattered(&a, p, 3);
                let mut forms = vec![
                    Form::Plain,
                    Form::Hp(Fanout::DirectGet),
                    Form::Shared,
                    Form::HierQuick(hier.0, hier.1),
                ];
                // The put fan-out on the smaller matrices at two process counts (one
                // oversubscribed): the plans' counts are the same code at every p, and the
                // random matrices of `forms` cover it at every p.
                if !large && (p == 2 || p == 4) {
                    forms.push(Form::Hp(Fanout::Puts));
                }
                check_on(&a, &d, &forms, 1);
            }
            tested += 1;
        }
        let which = if large { "more than" } else { "at most" };
        assert!(
            tested >= 1,
            "no shared matrix with {which} 2 million nonzeros"
        );
    });
}

#[test]
fn partition_read_from_mondriaan_files() {
    within(300, || {
        let a = mtx::read_path(common::matrices_dir().join("rajat01.mtx")).unwrap();
        let d = partition(&a, 4, &Options::default()).unwrap().dist;
        let dir = std::env::temp_dir().join(format!("mbsp-spmv-mondriaan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let prefix = dir.join("rajat01");
        mondriaan::write(&a, &d, &prefix).unwrap();
        let (b, e) = mondriaan::read(&prefix, 4).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(b.nnz(), a.nnz());
        check_on(
            &b,
            &e,
            &[
                Form::Plain,
                Form::Hp(Fanout::Puts),
                Form::Hp(Fanout::DirectGet),
            ],
            3,
        );
    });
}

#[test]
fn hp_writing_x_and_multiplying_in_one_superstep_is_an_error() {
    within(120, || {
        let mut rng = SplitMix64::new(11);
        let a = random_matrix(&mut rng, 50, 50, 400);
        let d = partition(&a, 2, &Options::default()).unwrap().dist;
        let plan = SpmvPlan::new(&a, &d).unwrap();
        assert!(
            plan.procs.iter().all(|l| l.traffic().0 > 0),
            "both must read remote x"
        );
        for _ in 0..20 {
            let err = mbsp::run(2, |ctx| {
                let mut spmv = HpSpmv::with_fanout(ctx, &plan, Fanout::DirectGet)?;
                let mut y = vec![0.0; spmv.local().y_owned.len()];
                spmv.x_mut(ctx)?.fill(1.0); // no sync before the multiply
                spmv.multiply(ctx, &mut y)
            })
            .unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains("spmv hp"), "{msg}");
            assert!(msg.contains("superstep"), "{msg}");
        }
        // The plan is free again after the failed runs, and a correct program works.
        check_on(&a, &d, &[Form::Hp(Fanout::DirectGet)], 2);
    });
}

/// Processes that choose different fan-outs end the run with an error naming the lazy sync
/// that met a full one (or a count that cannot be met), never a hang or wrong sums.
#[test]
fn hp_fanouts_that_differ_are_an_error() {
    within(120, || {
        let mut rng = SplitMix64::new(13);
        let a = random_matrix(&mut rng, 40, 40, 300);
        let d = partition(&a, 2, &Options::default()).unwrap().dist;
        let plan = SpmvPlan::new(&a, &d).unwrap();
        let err = mbsp::run(2, |ctx| {
            let fanout = [Fanout::Puts, Fanout::DirectGet][ctx.pid()];
            let mut spmv = HpSpmv::with_fanout(ctx, &plan, fanout)?;
            spmv.x_mut(ctx)?.fill(1.0);
            ctx.sync()?;
            let mut y = vec![0.0; spmv.local().y_owned.len()];
            spmv.multiply(ctx, &mut y)
        })
        .unwrap_err();
        assert_eq!(err.kind(), mbsp::ErrorKind::Misuse, "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("lazy") || msg.contains("declare_incoming("),
            "{msg}"
        );
    });
}

/// With puts, a put of the caller's own left pending before the multiply makes its receiver's
/// count differ from the one the plan declares: an error naming the counts.
#[test]
fn hp_puts_with_a_pending_put_of_the_caller_is_an_error() {
    within(120, || {
        let mut rng = SplitMix64::new(14);
        let a = random_matrix(&mut rng, 40, 40, 300);
        let d = partition(&a, 2, &Options::default()).unwrap().dist;
        let plan = SpmvPlan::new(&a, &d).unwrap();
        let err = mbsp::run(2, |ctx| {
            let mut spmv = HpSpmv::with_fanout(ctx, &plan, Fanout::Puts)?;
            let r = ctx.push_reg(vec![0u8; 1])?;
            ctx.sync()?;
            ctx.put(1 - ctx.pid(), &[1u8], &r, 0)?;
            let mut y = vec![0.0; spmv.local().y_owned.len()];
            spmv.multiply(ctx, &mut y)
        })
        .unwrap_err();
        assert_eq!(err.kind(), mbsp::ErrorKind::Misuse, "{err}");
        assert!(
            err.to_string().contains("called declare_incoming("),
            "{err}"
        );
    });
}

#[test]
fn hp_plan_serves_one_run_at_a_time() {
    within(120, || {
        let mut rng = SplitMix64::new(12);
        let a = random_matrix(&mut rng, 30, 30, 100);
        let plan = SpmvPlan::new(&a, &partition(&a, 2, &Options::default()).unwrap().dist).unwrap();
        let err = mbsp::run(2, |ctx| {
            let _first = HpSpmv::new(ctx, &plan)?;
            HpSpmv::new(ctx, &plan).map(drop)
        })
        .unwrap_err();
        assert!(err.to_string().contains("in use"), "{err}");
        let err = mbsp::run(3, |ctx| HpSpmv::new(ctx, &plan).map(drop)).unwrap_err();
        assert!(
            err.to_string().contains("the plan is for 2 processes"),
            "{err}"
        );
        let copy = plan.clone();
        let out = mbsp::run(2, |ctx| {
            let _a = HpSpmv::new(ctx, &plan)?;
            let _b = HpSpmv::new(ctx, &copy)?; // a clone has its own guard
            Ok(())
        });
        assert!(out.is_ok(), "{out:?}");
    });
}

/// A distribution that gives process `p - 1` nearly all the rows: the others finish early and
/// take blocks of its rows (`share.rs`). Multiplies back to back (no sync between them: the
/// fan-in's adds of one multiply and the takers' writes of the next must not meet), in two runs
/// of the same plan, each result exact; the blocks taken are reported, not asserted (they
/// depend on timing).
#[test]
fn shared_multiplies_share_the_rows_of_a_slow_process() {
    within(120, || {
        let mut rng = SplitMix64::new(33);
        let (m, n, p) = (6000, 5000, 3);
        let a = random_matrix(&mut rng, m, n, 60_000);
        // Row i: one in ten to processes 0 and 1 in turn, the rest to process 2.
        let owner = |i: u32| {
            let i = i as usize;
            (if i.is_multiple_of(10) {
                (i / 10) % (p - 1)
            } else {
                p - 1
            }) as u32
        };
        let d = Distribution {
            p,
            nz_part: a.row_idx.iter().map(|&i| owner(i)).collect(),
            x_owner: (0..n as u32).map(|j| j % p as u32).collect(),
            y_owner: (0..m as u32).map(owner).collect(),
        };
        let plan = SpmvPlan::new(&a, &d).unwrap();
        for run in 0..2 {
            let xs: Vec<Vec<f64>> = (0..20)
                .map(|t| (0..n as u32).map(|j| x_at(j, t + run)).collect())
                .collect();
            let mut ys = vec![vec![f64::NAN; m]; xs.len()];
            let vs: Vec<SharedVectors> = xs
                .iter()
                .zip(ys.iter_mut())
                .map(|(x, y)| SharedVectors::new(&plan, x, y).unwrap())
                .collect();
            let taken = mbsp::run(p, |ctx| {
                let mut spmv = SharedSpmv::new(ctx, &plan)?;
                for v in &vs {
                    spmv.multiply(ctx, v)?;
                }
                Ok(spmv.taken())
            })
            .unwrap();
            drop(vs);
            for (x, y) in xs.iter().zip(&ys) {
                near(y, &sequential(&a, x));
            }
            eprintln!("run {run}: blocks taken per process {taken:?}");
        }
    });
}

/// One pair of whole vectors multiplied many times in one run (a sync between multiplies, so
/// that `y` is complete before the next overwrites it), then the claims: a plan held by an
/// [`HpSpmv`] is refused, vectors of another plan (a clone) are an error naming the process.
#[test]
fn shared_vectors_reused_and_misused() {
    within(120, || {
        let mut rng = SplitMix64::new(21);
        let a = random_matrix(&mut rng, 120, 90, 700);
        let plan = SpmvPlan::new(&a, &partition(&a, 3, &Options::default()).unwrap().dist).unwrap();
        let x: Vec<f64> = (0..90).map(|j| x_at(j, 0)).collect();
        let mut y = vec![f64::NAN; 120];
        let v = SharedVectors::new(&plan, &x, &mut y).unwrap();
        mbsp::run(3, |ctx| {
            let mut spmv = SharedSpmv::new(ctx, &plan)?;
            for _ in 0..50 {
                spmv.multiply(ctx, &v)?;
                ctx.sync()?;
            }
            Ok(())
        })
        .unwrap();
        near(&y, &sequential(&a, &x));

        let err = mbsp::run(3, |ctx| {
            let _hp = HpSpmv::new(ctx, &plan)?;
            SharedSpmv::new(ctx, &plan).map(drop)
        })
        .unwrap_err();
        assert!(
            err.to_string().contains("spmv shared") && err.to_string().contains("in use"),
            "{err}"
        );
        let copy = plan.clone();
        let v = SharedVectors::new(&copy, &x, &mut y).unwrap();
        let err = mbsp::run(3, |ctx| SharedSpmv::new(ctx, &plan)?.multiply(ctx, &v)).unwrap_err();
        assert!(
            err.to_string().contains("spmv shared multiply")
                && err.to_string().contains("another plan"),
            "{err}"
        );
        let e = SharedVectors::new(&plan, &x, &mut [0.0; 7]).err().unwrap();
        assert_eq!(
            e.to_string(),
            "spmv shared vectors: y has 7 entries; the matrix needs 120"
        );
    });
}

/// [`SharedSpmv`] on the inner plans of a hierarchical plan, whose local columns are their
/// package's columns already: each package's part over its cores against the sequential
/// multiply of that part.
#[test]
fn shared_vectors_on_nested_plans() {
    within(120, || {
        let mut rng = SplitMix64::new(22);
        let a = random_matrix(&mut rng, 200, 160, 1500);
        let plan = HierPlan::partition_2d(&a, 2, 3, &Options::default()).unwrap();
        for (k, inner) in plan.inner.iter().enumerate() {
            let part = plan.top.procs[k].matrix();
            let x: Vec<f64> = (0..part.cols as u32).map(|j| x_at(j, 3)).collect();
            let mut y = vec![f64::NAN; part.rows];
            let v = SharedVectors::new(inner, &x, &mut y).unwrap();
            mbsp::run(3, |ctx| SharedSpmv::new(ctx, inner)?.multiply(ctx, &v)).unwrap();
            near(&y, &sequential(&part, &x));
        }
    });
}

/// [`SharedSpmv`] sums each row in the order of its columns whatever the plan: its `y` is the
/// same, bit for bit, for every partition and number of processes, and equals a CRS multiply
/// whose rows hold their entries by column (a matrix with repeated entries and values of
/// mixed magnitudes, so that another order would change the last bits).
#[test]
fn shared_sums_are_the_same_bits_for_every_plan() {
    within(120, || {
        let mut rng = SplitMix64::new(23);
        let mut a = random_matrix(&mut rng, 150, 110, 1400);
        for (k, v) in a.vals.iter_mut().enumerate() {
            *v *= [1e-8, 1.0, 3e7][k % 3];
        }
        // A repeated entry: summed by its values' bits.
        let (r, c) = (a.row_idx[0], a.col_idx[0]);
        a.row_idx.push(r);
        a.col_idx.push(c);
        a.vals.push(-0.75);
        let x: Vec<f64> = (0..a.cols as u32).map(|j| x_at(j, 5) * 1.1).collect();
        let mut order: Vec<usize> = (0..a.nnz()).collect();
        order.sort_by_key(|&k| (a.row_idx[k], a.col_idx[k], a.vals[k].to_bits()));
        let mut want = vec![0.0; a.rows];
        for k in order {
            want[a.row_idx[k] as usize] += a.vals[k] * x[a.col_idx[k] as usize];
        }
        let bits = |v: &[f64]| v.iter().map(|s| s.to_bits()).collect::<Vec<_>>();
        for p in [1, 2, 3, 5] {
            let cyclic = Distribution {
                p,
                nz_part: (0..a.nnz() as u32).map(|k| k % p as u32).collect(),
                x_owner: (0..a.cols as u32).map(|j| j % p as u32).collect(),
                y_owner: (0..a.rows as u32).map(|i| (i / 3) % p as u32).collect(),
            };
            let parted = partition(&a, p, &Options::default()).unwrap().dist;
            for d in [cyclic, parted] {
                let plan = SpmvPlan::new(&a, &d).unwrap();
                // Vectors at every position in a cache line: each has its own rows per process.
                let mut ys = vec![f64::NAN; a.rows + 8];
                for o in [0, 3, 7] {
                    let y = &mut ys[o..o + a.rows];
                    let v = SharedVectors::new(&plan, &x, y).unwrap();
                    mbsp::run(p, |ctx| {
                        let mut spmv = SharedSpmv::new(ctx, &plan)?;
                        spmv.multiply(ctx, &v)?;
                        spmv.multiply(ctx, &v)
                    })
                    .unwrap();
                    assert_eq!(bits(&ys[o..o + a.rows]), bits(&want), "p = {p}, offset {o}");
                }
            }
        }
    });
}

/// `got` equals `want` up to 1e-9 relative to the largest magnitude.
fn near(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-9 * scale, "entry {i}: {g} vs {w}");
    }
}

/// The whole-vector helpers: scatter x from a root, multiply, gather y at a root and at all,
/// collect the parts a run returns; all against the sequential multiply, on a random matrix
/// whose x and y distributions differ.
#[test]
fn vectors_scatter_and_gather_by_owned_indices() {
    let mut rng = SplitMix64::new(11);
    let a = random_matrix(&mut rng, 40, 33, 200);
    let x: Vec<f64> = (0..a.cols).map(|j| x_at(j as u32, 0)).collect();
    let want = sequential(&a, &x);
    for p in [1, 3] {
        let d = partition(&a, p, &Options::default()).unwrap().dist;
        let plan = SpmvPlan::new(&a, &d).unwrap();
        let root = p - 1;
        let out = mbsp::run(p, |ctx| {
            let whole = if ctx.pid() == root { x.clone() } else { vec![] };
            let mine = plan.scatter_x(ctx, root, &whole)?;
            let mut spmv = Spmv::new(ctx, &plan)?;
            spmv.x_mut(ctx)?.copy_from_slice(&mine);
            let mut y = vec![0.0; spmv.local().y_owned.len()];
            spmv.multiply(ctx, &mut y)?;
            let mine = spmv.x(ctx)?.to_vec();
            let x_back = plan.allgather_x(ctx, &mine)?;
            let at_root = plan.gather_y(ctx, root, &y)?;
            let at_all = plan.allgather_y(ctx, &y)?;
            Ok((y, x_back, at_root, at_all))
        })
        .unwrap();
        for (s, (_, x_back, at_root, at_all)) in out.iter().enumerate() {
            assert_eq!(x_back, &x, "p = {p}, pid {s}");
            near(at_all, &want);
            assert_eq!(at_root.is_some(), s == root);
        }
        near(out[root].2.as_ref().unwrap(), &want);
        let parts: Vec<&[f64]> = out.iter().map(|o| o.0.as_slice()).collect();
        near(&plan.collect_y(&parts).unwrap(), &want);
        // Wrong parts are refused, inside a run and outside.
        let e = plan.collect_y(&parts[1..]).unwrap_err();
        assert!(matches!(e, SpmvError::Parts { .. }), "{e}");
        let e = mbsp::run(p, |ctx| plan.gather_y(ctx, 0, &[1.0; 41]).map(drop)).unwrap_err();
        assert!(
            e.to_string().contains("spmv gather_y") && e.to_string().contains("41"),
            "{e}"
        );
        let e = mbsp::run(p, |ctx| plan.scatter_x(ctx, 0, &[1.0; 2]).map(drop)).unwrap_err();
        assert!(e.to_string().contains("the whole x has 2 entries"), "{e}");
    }
}

/// `partition_square` gives x and y one owner per index, with minimal volume where a_ii is
/// stored, and its multiply's y feeds the next x without any copy between processes.
#[test]
fn square_partition_shares_owners() {
    let mut rng = SplitMix64::new(5);
    let n = 60;
    let mut a = random_matrix(&mut rng, n, n, 300);
    for i in 0..n {
        a.row_idx.push(i as u32);
        a.col_idx.push(i as u32);
        a.vals.push(4.0);
    }
    let r = partition_square(&a, 4, &Options::default()).unwrap();
    assert_eq!(r.dist.x_owner, r.dist.y_owner);
    assert_eq!(
        r.volume,
        mbsp_algorithms::sparse::metrics::volume(&a, &r.dist.nz_part, 4)
    );
    let plan = SpmvPlan::new(&a, &r.dist).unwrap();
    // Two multiplies, y of the first as x of the second, in place.
    let out = mbsp::run(4, |ctx| {
        let mut spmv = HpSpmv::new(ctx, &plan)?;
        assert_eq!(spmv.local().x_owned, spmv.local().y_owned);
        spmv.x_mut(ctx)?.fill(1.0);
        ctx.sync()?;
        let mut y = vec![0.0; spmv.local().y_owned.len()];
        spmv.multiply(ctx, &mut y)?;
        spmv.x_mut(ctx)?.copy_from_slice(&y);
        ctx.sync()?;
        spmv.multiply(ctx, &mut y)?;
        Ok(y)
    })
    .unwrap();
    let once = sequential(&a, &vec![1.0; n]);
    near(&plan.collect_y(&out).unwrap(), &sequential(&a, &once));
    let e = partition_square(&random_matrix(&mut rng, 3, 4, 5), 2, &Options::default());
    assert!(e.unwrap_err().to_string().contains("not square"));
}
