//! Nested runs in every Multi-BSP transform: no thread growth. In a file of its own, so that
//! no other test of the same process starts threads meanwhile.

mod common;

use common::{mix, within};
use mbsp_algorithms::fft::{Complex, MultiFft};

type C = Complex<f64>;

fn random(n: usize, seed: u64) -> Vec<C> {
    (0..n as u64)
        .map(|i| C::new(mix(seed ^ i) as f64 / u64::MAX as f64, 0.25))
        .collect()
}

fn threads() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("Threads:")
                    .map(|v| v.trim().parse().unwrap())
            })
        })
        .unwrap_or(0)
}

/// Nested runs in every transform: hundreds of them in one run, no thread growth.
#[test]
fn multi_bsp_in_a_loop_does_not_grow_threads() {
    within(300, || {
        let n = 1 << 8;
        let x = random(n, 9);
        let mut want = x.clone();
        mbsp_algorithms::fft::fft(&mut want, 1).unwrap();
        let run = || {
            mbsp::run(2, |ctx| {
                let (p, me) = (ctx.nprocs(), ctx.pid());
                let mut plan = MultiFft::<f64>::new(ctx, n, &[2])?;
                let mine: Vec<C> = (me..n).step_by(p).map(|i| x[i]).collect();
                for _ in 0..300 {
                    let mut local = mine.clone();
                    plan.forward(ctx, &mut local)?;
                    assert!((local[1] - want[me + p]).norm() < 1e-9);
                }
                plan.free(ctx)
            })
            .unwrap()
        };
        run();
        let before = threads();
        run();
        assert!(
            threads() <= before,
            "threads grew from {before} to {}",
            threads()
        );
    });
}
