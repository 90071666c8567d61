//! Checkpoint and restart: the 1D heat equation of `heat`, checkpointed every 50 supersteps (25
//! steps), killed past half-way and started again.
//!
//! Each process's block of the rod (with its two halo cells) is registered memory, so the
//! runtime saves and restores it; the step count is the state the program hands to
//! `sync_checkpoint`. The example runs the computation three times: once without checkpoints
//! (the reference), once with checkpoints that "crashes" (aborts) at step `STEPS/2 + 25`, and
//! once more with the same folder, which resumes from the newest checkpoint and finishes. The
//! resumed run's rod must equal the reference bit for bit.
//!
//! A real crash works the same way: run a program with a checkpoint policy, kill it (`kill -9`),
//! start it again with the same folder and number of processes. C programs do it through
//! `MBSP_CHECKPOINT_DIR` (docs/c-abi.md).
//!
//! `cargo run --release -p mbsp-examples --bin checkpoint_heat [-- N P STEPS FOLDER]`

use mbsp::{Checkpoints, Ctx, Run};
use mbsp_algorithms::dist::{block_range, concat};

const A: f64 = 0.25;

/// `steps` steps of the stencil on this process's block of a rod of `n` cells (a hot middle
/// third); `crash_at`: abort when that step begins. Returns the block.
fn heat(ctx: &mut Ctx, n: usize, steps: u64, crash_at: Option<u64>) -> mbsp::Result<Vec<f64>> {
    let (p, s) = (ctx.nprocs(), ctx.pid());
    let mine = block_range(n, p, s);
    let m = mine.len();
    // Cells 1..=m, halos 0 and m + 1 (the rod's ends stay at 0).
    let mut u = ctx.push_reg(vec![0.0f64; m + 2])?;
    ctx.sync()?;
    let mut step: u64 = match ctx.resume()? {
        Some(step) => {
            if s == 0 {
                println!("  resumed at step {step} (superstep {})", ctx.superstep());
            }
            step
        }
        None => {
            for (k, i) in mine.clone().enumerate() {
                let hot = i >= n / 3 && i < 2 * n / 3;
                ctx.local_mut(&mut u)?[k + 1] = if hot { 100.0 } else { 0.0 };
            }
            0
        }
    };
    while step < steps {
        if crash_at == Some(step) {
            return Err(ctx.abort(format!("crashed at step {step}")));
        }
        let (first, last) = {
            let v = ctx.local(&u)?;
            (v[1], v[m])
        };
        if s > 0 {
            ctx.put(s - 1, &[first], &u, block_range(n, p, s - 1).len() + 1)?;
        }
        if s + 1 < p {
            ctx.put(s + 1, &[last], &u, 0)?;
        }
        ctx.sync()?;
        let v = ctx.local_mut(&mut u)?;
        let old = v.to_vec();
        for i in 1..=m {
            v[i] = old[i] + A * (old[i - 1] - 2.0 * old[i] + old[i + 1]);
        }
        step += 1;
        ctx.sync_checkpoint(&step)?;
    }
    Ok(ctx.local(&u)?[1..=m].to_vec())
}

const USAGE: &str = "[N] [P] [STEPS] [FOLDER]";

fn main() -> std::process::ExitCode {
    mbsp_examples::report(run())
}

fn run() -> mbsp_examples::Outcome {
    use mbsp_examples::arg;
    let n: usize = arg(0, 100_000, "a number", USAGE);
    let p: usize = arg(1, mbsp::nprocs(), "a process count", USAGE);
    let steps: u64 = arg(2, 300, "a number of steps", USAGE);
    let folder = std::env::args().nth(4).map_or_else(
        || std::env::temp_dir().join(format!("mbsp-checkpoint-heat-{}", std::process::id())),
        std::path::PathBuf::from,
    );
    if n < p {
        return Err(format!("N = {n} cells cannot be split over P = {p} processes").into());
    }
    println!(
        "1D heat, {n} cells, {p} processes, {steps} steps; checkpoints in {}",
        folder.display()
    );
    let want = concat(Run::new(p).run(|ctx| heat(ctx, n, steps, None))?);
    let policy = Checkpoints::in_folder(&folder).every_supersteps(50).keep(2);
    let crash = steps / 2 + 25;
    println!("run 1: checkpoints every 50 supersteps, crashes at step {crash}");
    let err = Run::new(p)
        .checkpoints(policy.clone())
        .run(|ctx| heat(ctx, n, steps, Some(crash)))
        .expect_err("the first run crashes");
    println!("  {err}");
    println!("run 2: the same program and folder");
    let got = concat(
        Run::new(p)
            .checkpoints(policy)
            .run(|ctx| heat(ctx, n, steps, None))?,
    );
    std::fs::remove_dir_all(&folder)?;
    let same = got.len() == want.len()
        && got
            .iter()
            .zip(&want)
            .all(|(a, b)| a.to_bits() == b.to_bits());
    if !same {
        return Err("the resumed run's rod differs from the uninterrupted run's".into());
    }
    println!("ok: the resumed run's rod equals the uninterrupted run's, bit for bit");
    Ok(())
}
