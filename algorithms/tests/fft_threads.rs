//! The FFT's resources in loops of transforms: nested runs in every Multi-BSP transform grow no
//! threads; the owned exchange allocates nothing per transform. In a file of its own, so that no
//! other test of the same process starts threads meanwhile, and so that this program's
//! allocator can count each thread's allocations.

mod common;

use common::{mix, within};
use mbsp_algorithms::fft::{BspFft, Complex, Exchange, MultiFft};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    /// Allocations made by this thread.
    static MINE: Cell<u64> = const { Cell::new(0) };
}

struct Counting;

fn note_alloc() {
    let _ = MINE.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: forwards to the system allocator; the counting touches no allocation.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note_alloc();
        // SAFETY: forwarded.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        note_alloc();
        // SAFETY: forwarded.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        note_alloc();
        // SAFETY: forwarded.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Held by each test: the thread count of one must not see the runs of another.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Allocations this thread has made.
fn my_allocations() -> u64 {
    MINE.with(|n| n.get())
}

type C = Complex<f64>;

/// The calling thread's allocations over `rounds` calls of `work`, beyond what `2 * rounds`
/// calls of `empty` allocate (the runtime's share of the same nested runs: a transform starts
/// two), after one call of `empty` to warm up.
fn allocations_beyond(
    ctx: &mut mbsp::Ctx,
    rounds: usize,
    empty: impl Fn(&mut mbsp::Ctx) -> mbsp::Result<()>,
    mut work: impl FnMut(&mut mbsp::Ctx) -> mbsp::Result<()>,
) -> mbsp::Result<u64> {
    empty(ctx)?;
    let before = my_allocations();
    for _ in 0..2 * rounds {
        empty(ctx)?;
    }
    let runtime = my_allocations() - before;
    let before = my_allocations();
    for _ in 0..rounds {
        work(ctx)?;
    }
    Ok((my_allocations() - before).saturating_sub(runtime))
}

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
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
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

/// The owned exchange in a steady state: the packs received become the next transform's, so
/// hundreds of transforms (forward and inverse) allocate nothing on any process once the first
/// few of each direction have run; the results stay right.
#[test]
fn owned_exchange_allocates_nothing_per_transform() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    within(120, || {
        for (p, n) in [(2, 1 << 10), (2, 1 << 19), (4, 1 << 10), (8, 1 << 12)] {
            let x = random(n, 3);
            let mut want = x.clone();
            mbsp_algorithms::fft::fft(&mut want, 1).unwrap();
            let rounds = if n > 1 << 12 { 5 } else { 100 };
            let allocated = mbsp::run(p, |ctx| {
                let me = ctx.pid();
                let mut plan = BspFft::<f64>::with_exchange(ctx, n, Exchange::Owned)?;
                assert_eq!(plan.exchange(), Exchange::Owned);
                let mine: Vec<C> = (me..n).step_by(p).map(|i| x[i]).collect();
                let mut local = mine.clone();
                // The first of each direction plans its kernel; three of each use every set
                // of outboxes (a run with more processes than cores has three) once.
                for _ in 0..3 {
                    plan.forward(ctx, &mut local)?;
                    plan.inverse(ctx, &mut local)?;
                }
                let before = my_allocations();
                for _ in 0..rounds {
                    plan.forward(ctx, &mut local)?;
                    assert!((local[1] - want[me + p]).norm() < 1e-9 * n as f64);
                    plan.inverse(ctx, &mut local)?;
                }
                let allocated = my_allocations() - before;
                assert!(local.iter().zip(&mine).all(|(a, b)| (a - b).norm() < 1e-9));
                plan.free(ctx)?;
                Ok(allocated)
            })
            .unwrap();
            assert_eq!(
                allocated,
                vec![0; p],
                "allocations per process over {rounds} forward and inverse transforms, \
                 p = {p}, n = {n}"
            );
        }
    });
}

/// A top level of one process with a nested level below: the nested processes keep their
/// buffers between transforms, so once the first transform of each direction has run,
/// hundreds more allocate nothing on the calling thread (nested process 0, and the one that
/// starts the nested runs) beyond what starting as many nested runs of two empty supersteps
/// allocates (the runtime's share, measured alongside); the results stay right.
#[test]
fn one_process_on_top_allocates_nothing_per_transform() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    within(120, || {
        for (c, n) in [(2, 1 << 10), (2, 1 << 16), (4, 1 << 12)] {
            let x = random(n, 4);
            let mut want = x.clone();
            mbsp_algorithms::fft::fft(&mut want, 1).unwrap();
            let rounds = if n > 1 << 12 { 10 } else { 100 };
            // Unbound: whether a nested run narrows its process 0 depends on the CPU the
            // scheduler runs the thread on at that moment, and a narrowing allocates; the
            // count here is the transform's.
            let allocated = mbsp::Run::new(1)
                .bind(false)
                .run(|ctx| {
                    let mut plan = MultiFft::<f64>::nested(ctx, n, &[c])?;
                    let mut y = x.clone();
                    plan.forward(ctx, &mut y)?;
                    plan.inverse(ctx, &mut y)?;
                    let empty = |ctx: &mut mbsp::Ctx| {
                        ctx.run(c, |nctx| {
                            nctx.sync()?;
                            nctx.sync()
                        })
                        .map(drop)
                    };
                    let allocated = allocations_beyond(ctx, rounds, empty, |ctx| {
                        plan.forward(ctx, &mut y)?;
                        assert!((y[1] - want[1]).norm() < 1e-9 * n as f64);
                        plan.inverse(ctx, &mut y)
                    })?;
                    assert!(y.iter().zip(&x).all(|(a, b)| (a - b).norm() < 1e-9));
                    plan.free(ctx)?;
                    Ok(allocated)
                })
                .unwrap();
            assert_eq!(
                allocated,
                vec![0],
                "allocations over {rounds} forward and inverse transforms, c = {c}, n = {n}"
            );
        }
    });
}

/// A top level of two processes, each with a nested run of two below: the nested leaves keep
/// their plans (owned exchange, nothing registered) and local arrays, and the nested processes
/// their tiles, so a transform allocates nothing on the calling thread beyond the runtime's
/// share of its two nested runs, one of which hands an owned message to each process
/// (measured alongside, with empty messages); the results stay right.
#[test]
fn nested_leaves_keep_their_plans() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    within(120, || {
        let (top, c, n) = (2, 2, 1 << 12);
        let x = random(n, 6);
        let mut want = x.clone();
        mbsp_algorithms::fft::fft(&mut want, 1).unwrap();
        let rounds = 50;
        let allocated = mbsp::run(top, |ctx| {
            let me = ctx.pid();
            let mut plan = MultiFft::<f64>::new(ctx, n, &[c])?;
            let mine: Vec<C> = (me..n).step_by(top).map(|i| x[i]).collect();
            let mut local = mine.clone();
            plan.forward(ctx, &mut local)?;
            plan.inverse(ctx, &mut local)?;
            // Each transform: a nested run of one superstep (the leaves' exchange), a top
            // superstep, a nested run of none (the length-p FFTs).
            let empty = |ctx: &mut mbsp::Ctx| {
                ctx.run(c, |nctx| {
                    let (me, tag) = (nctx.pid(), vec![0u8; nctx.tagsize()]);
                    nctx.send_owned((me + 1) % c, &tag, Vec::<C>::new())?;
                    nctx.declare_incoming(1)?;
                    nctx.sync()?;
                    while nctx.move_owned::<C>()?.is_some() {}
                    Ok(())
                })?;
                ctx.sync()?;
                ctx.run(c, |_| Ok(())).map(drop)
            };
            let allocated = allocations_beyond(ctx, rounds, empty, |ctx| {
                plan.forward(ctx, &mut local)?;
                assert!((local[1] - want[me + top]).norm() < 1e-9 * n as f64);
                plan.inverse(ctx, &mut local)
            })?;
            assert!(local.iter().zip(&mine).all(|(a, b)| (a - b).norm() < 1e-9));
            plan.free(ctx)?;
            Ok(allocated)
        })
        .unwrap();
        assert_eq!(
            allocated,
            vec![0; top],
            "allocations over {rounds} transforms"
        );
    });
}
