//! CG on a partitioned matrix with a checkpoint every iteration (issue 43): a run that crashes
//! at any iteration and restarts from its checkpoints ends with the uninterrupted run's
//! solution, bit for bit. The multiply's vector and the all-reduces' buffers are registered
//! memory (saved and restored by the runtime); x, r, ρ and the iteration count are the state
//! the program hands over.

use mbsp::{Checkpoints, Ctx, Result, Run};
use mbsp_algorithms::collectives::Comm;
use mbsp_algorithms::sparse::CooMatrix;
use mbsp_algorithms::sparse::partition::{Options, partition_square};
use mbsp_algorithms::sparse::spmv::{Spmv, SpmvPlan};

/// The 2D Laplacian of a `k` x `k` grid (symmetric positive definite).
fn laplacian(k: usize) -> CooMatrix {
    let mut e = Vec::new();
    for i in 0..k {
        for j in 0..k {
            let v = i * k + j;
            e.push((v, v, 4.0));
            for (di, dj) in [(0, 1), (1, 0)] {
                if i + di < k && j + dj < k {
                    let w = (i + di) * k + j + dj;
                    e.push((v, w, -1.0));
                    e.push((w, v, -1.0));
                }
            }
        }
    }
    CooMatrix::new(k * k, k * k, e).unwrap()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// What the program hands to each checkpoint: x, r, ρ, ‖b‖², iterations.
type State = (Vec<f64>, Vec<f64>, f64, f64, usize);

/// `iters` CG iterations on `A x = A·1` (process `who` crashes when iteration `stop` begins);
/// this process's part of x.
fn cg(
    ctx: &mut Ctx,
    plan: &SpmvPlan,
    iters: usize,
    stop: Option<(usize, usize)>,
) -> Result<Vec<f64>> {
    let mut spmv = Spmv::new(ctx, plan)?;
    let m = spmv.local().y_owned.len();
    let mut comm = Comm::new(ctx)?;
    ctx.sync()?;
    let (mut x, mut r, mut rho, bb, mut it) = match ctx.resume::<State>()? {
        Some(state) => state,
        None => {
            spmv.x_mut(ctx)?.fill(1.0);
            let mut b = vec![0.0; m];
            spmv.multiply(ctx, &mut b)?;
            let bb = comm.allreduce_value(ctx, dot(&b, &b), |x, y| x + y)?;
            spmv.x_mut(ctx)?.copy_from_slice(&b); // p = r = b lives in the multiply's x
            (vec![0.0; m], b, bb, bb, 0)
        }
    };
    let mut q = vec![0.0; m];
    while it < iters {
        if stop == Some((it, ctx.pid())) {
            return Err(ctx.abort("crashed by the test"));
        }
        spmv.multiply(ctx, &mut q)?;
        let pq = comm.allreduce_value(ctx, dot(spmv.x(ctx)?, &q), |x, y| x + y)?;
        let alpha = rho / pq;
        let p = spmv.x(ctx)?;
        for i in 0..m {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        let next = comm.allreduce_value(ctx, dot(&r, &r), |x, y| x + y)?;
        let beta = next / rho;
        rho = next;
        let p = spmv.x_mut(ctx)?;
        for i in 0..m {
            p[i] = r[i] + beta * p[i];
        }
        it += 1;
        ctx.sync_checkpoint(&(&x, &r, rho, bb, it))?;
    }
    assert!(rho < bb, "CG reduced the residual");
    comm.free(ctx)?;
    Ok(x)
}

#[test]
fn cg_restarted_after_crashes_gives_the_uninterrupted_solution() {
    let a = laplacian(12);
    for p in [1, 2, 3, 4] {
        let d = partition_square(&a, p, &Options::default()).unwrap().dist;
        let plan = SpmvPlan::new(&a, &d).unwrap();
        let iters = 25;
        let want = Run::new(p).run(|ctx| cg(ctx, &plan, iters, None)).unwrap();
        let dir = std::env::temp_dir().join(format!("mbsp-ckpt-cg-{p}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let policy = Checkpoints::in_folder(&dir).every_supersteps(1).keep(2);
        let mut got = None;
        for stop in [
            Some((3, 0)),
            Some((9, p - 1)),
            Some((10, p / 2)),
            Some((24, 0)),
            None,
        ] {
            match Run::new(p)
                .checkpoints(policy.clone())
                .run(|ctx| cg(ctx, &plan, iters, stop))
            {
                Ok(x) => got = Some(x),
                Err(e) => assert_eq!(e.message(), "crashed by the test"),
            }
        }
        let bits = |parts: &Vec<Vec<f64>>| -> Vec<Vec<u64>> {
            parts
                .iter()
                .map(|v| v.iter().map(|x| x.to_bits()).collect())
                .collect()
        };
        assert_eq!(bits(&got.unwrap()), bits(&want), "p = {p}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
