//! Runs with their processes as coroutines (`Run::coroutines`): many processes on few threads
//! give what a thread per process gives (the semantic test files run whole with coroutines
//! too, `MBSP_TEST_ENGINE=coroutines`), a failure ends the run as promptly, nested runs work
//! inside such processes and with coroutines of their own, and what cannot work is refused.

#[path = "../common/bsplib_model.rs"]
mod bsplib_model;
use crate::common;

use common::within;
use mbsp::{Ctx, ErrorKind, Run};
use std::collections::HashSet;
use std::sync::Mutex;
use std::thread::ThreadId;

/// Superstep `s` of a pattern where process `i` puts `(i, s)` to each of `dests(i)` and
/// declares or not what it receives; returns every value it received, in order.
fn exchange(ctx: &mut Ctx, steps: usize, lazy: bool, offsets: &[usize]) -> mbsp::Result<u64> {
    let (p, me) = (ctx.nprocs(), ctx.pid());
    let inbox = ctx.push_reg(vec![0u64; offsets.len()])?;
    ctx.sync()?;
    let mut sum = 0u64;
    for s in 0..steps as u64 {
        for (k, off) in offsets.iter().enumerate() {
            ctx.put((me + off) % p, &[me as u64 * 1000 + s], &inbox, k)?;
        }
        if lazy {
            ctx.declare_incoming(offsets.len())?;
        }
        ctx.sync()?;
        for (k, off) in offsets.iter().enumerate() {
            let from = (me + p - off % p) % p;
            let got = ctx.local(&inbox)?[k];
            if got != from as u64 * 1000 + s {
                return Err(ctx.abort(format!(
                    "slot {k} holds {got} in superstep {s}, not from pid {from}"
                )));
            }
            sum += got;
        }
    }
    Ok(sum)
}

/// Oversubscribed star-free patterns (a ring, a sparse exchange to +1, +5, +11) at p = 16 and
/// 64, with full and declared syncs: every process receives exactly what was sent to it, and
/// both ways agree with a thread per process.
#[test]
fn many_processes_on_few_threads_exchange_as_threads_do() {
    within(120, || {
        for p in [16, 64] {
            for offsets in [&[1usize][..], &[1, 5, 11][..]] {
                let want = Run::new(p)
                    .run(|ctx| exchange(ctx, 20, false, offsets))
                    .unwrap();
                for lazy in [false, true] {
                    let got = Run::new(p)
                        .coroutines(true)
                        .run(|ctx| exchange(ctx, 20, lazy, offsets))
                        .unwrap();
                    assert_eq!(got, want, "p {p}, offsets {offsets:?}, lazy {lazy}");
                }
            }
        }
    });
}

/// Processes share threads: a run of 12 uses at most as many threads as there are distinct
/// placements (one per core the run is placed on), and process 0 runs on the calling thread.
#[test]
fn a_core_s_processes_share_its_thread() {
    let caller = std::thread::current().id();
    let seen: Mutex<Vec<(usize, ThreadId, Vec<u32>)>> = Mutex::new(Vec::new());
    Run::new(12)
        .coroutines(true)
        .run(|ctx| {
            let pus = ctx.placement().pus.clone();
            seen.lock()
                .unwrap()
                .push((ctx.pid(), std::thread::current().id(), pus));
            ctx.sync()
        })
        .unwrap();
    let seen = seen.into_inner().unwrap();
    let threads: HashSet<ThreadId> = seen.iter().map(|s| s.1).collect();
    let places: HashSet<&Vec<u32>> = seen.iter().map(|s| &s.2).collect();
    assert!(
        threads.len() <= places.len().max(mbsp::nprocs()),
        "{} threads",
        threads.len()
    );
    assert!(threads.len() < 12);
    assert!(seen.iter().any(|s| s.0 == 0 && s.1 == caller));
}

/// The threads of a run's other cores are the calling thread's parked workers, the same from
/// run to run.
#[test]
fn the_next_run_reuses_the_threads() {
    let threads = || {
        let seen: Mutex<HashSet<ThreadId>> = Mutex::new(HashSet::new());
        Run::new(12)
            .coroutines(true)
            .run(|ctx| {
                seen.lock().unwrap().insert(std::thread::current().id());
                ctx.sync()
            })
            .unwrap();
        seen.into_inner().unwrap()
    };
    let first = threads();
    assert_eq!(threads(), first);
}

/// Runs in a row on one thread keep the last run's state where it fits (`Team::keep`): every
/// run of a sequence with full and declared syncs, a failed run between good ones (after
/// which the next starts its counts again), and runs on threads with the coroutines' waiting
/// policy between them (whose tree barrier is not the coroutines' tree of threads, so the
/// state is made again each way), gives what a fresh run gives.
#[test]
fn runs_in_a_row_with_a_failure_between_them_agree_with_fresh_runs() {
    within(120, || {
        let offsets = [1usize, 5, 11];
        let want = Run::new(16)
            .reuse_threads(false)
            .run(|ctx| exchange(ctx, 7, false, &offsets))
            .unwrap();
        let spin_free = mbsp::WaitPolicy::new(0, 0);
        for round in 0..6 {
            let lazy = round % 2 == 1;
            let got = Run::new(16)
                .coroutines(true)
                .run(|ctx| exchange(ctx, 7, lazy, &offsets))
                .unwrap();
            assert_eq!(got, want, "round {round}, lazy {lazy}");
            if round % 3 == 1 {
                let e = Run::new(16)
                    .coroutines(true)
                    .run(|ctx| {
                        if ctx.pid() == 9 {
                            ctx.sync()?;
                            return Err(ctx.abort("process 9 stops after one sync"));
                        }
                        exchange(ctx, 7, lazy, &offsets)
                    })
                    .unwrap_err();
                assert_eq!(e.pid(), Some(9), "round {round}: {e}");
            }
            if round % 3 == 2 {
                let threads = Run::new(16)
                    .wait_policy(spin_free)
                    .run(|ctx| exchange(ctx, 7, lazy, &offsets))
                    .unwrap();
                assert_eq!(threads, want, "round {round} on threads");
            }
        }
    });
}

/// Where no two processes would share a thread (one per hardware thread), the run goes as
/// without coroutines: a thread per process.
#[test]
fn a_run_of_one_process_per_core_keeps_a_thread_each() {
    let p = mbsp::nprocs();
    let seen: Mutex<HashSet<ThreadId>> = Mutex::new(HashSet::new());
    Run::new(p)
        .coroutines(true)
        .run(|ctx| {
            seen.lock().unwrap().insert(std::thread::current().id());
            ctx.sync()
        })
        .unwrap();
    assert_eq!(seen.into_inner().unwrap().len(), p);
}

/// A panic in one process of 32 ends the run with that process's error, while the others wait
/// in syncs: nothing hangs, and the next run on the same thread works.
#[test]
fn a_panic_in_one_coroutine_ends_the_run() {
    within(60, || {
        let r = Run::new(32).coroutines(true).run(|ctx| {
            for s in 0..10 {
                if ctx.pid() == 7 && s == 3 {
                    panic!("process 7 gives up");
                }
                ctx.sync()?;
            }
            Ok(())
        });
        let e = r.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Panic, "{e}");
        assert_eq!(e.pid(), Some(7), "{e}");
        assert!(e.to_string().contains("process 7 gives up"), "{e}");
        let again = Run::new(8)
            .coroutines(true)
            .run(|ctx| Ok(ctx.pid()))
            .unwrap();
        assert_eq!(again, (0..8).collect::<Vec<_>>());
    });
}

/// An error returned by one process while the others are in lazy syncs waiting for its puts
/// ends the run with that error.
#[test]
fn an_error_in_a_lazy_superstep_ends_the_run() {
    within(60, || {
        let r = Run::new(16).coroutines(true).run(|ctx| {
            let x = ctx.push_reg(vec![0u8; 1])?;
            ctx.sync()?;
            let p = ctx.nprocs();
            for s in 0..5 {
                if ctx.pid() == 3 && s == 2 {
                    return Err(ctx.abort("process 3 stops"));
                }
                ctx.put((ctx.pid() + 1) % p, &[1u8], &x, 0)?;
                ctx.declare_incoming(1)?;
                ctx.sync()?;
            }
            Ok(())
        });
        let e = r.unwrap_err();
        assert_eq!(e.pid(), Some(3), "{e}");
        assert!(e.to_string().contains("process 3 stops"), "{e}");
    });
}

/// Nested runs in processes that are coroutines: a nested run on threads of its own, and one
/// with coroutines of its own (run by the nesting process's thread, in turns of their own).
#[test]
fn nested_runs_inside_coroutine_processes() {
    within(60, || {
        let r = Run::new(6)
            .coroutines(true)
            .run(|ctx| {
                let me = ctx.pid();
                let a: usize = ctx.run(2, |n| Ok(n.pid() + me))?.iter().sum();
                let b: usize = ctx
                    .run_with(Run::new(5).coroutines(true), |n| {
                        n.sync()?;
                        Ok(n.pid() * 10 + me)
                    })?
                    .iter()
                    .sum();
                ctx.sync()?;
                Ok((a, b))
            })
            .unwrap();
        for (me, (a, b)) in r.into_iter().enumerate() {
            assert_eq!((a, b), (2 * me + 1, 100 + 5 * me));
        }
    });
}

/// What cannot run as coroutines is refused with an error that says why.
#[test]
fn begin_and_checkpoints_are_refused() {
    let e = Run::new(4).coroutines(true).begin(|_| Ok(())).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Misuse);
    assert!(
        e.to_string()
            .contains("Run::coroutines(true) cannot be combined with Run::begin"),
        "{e}"
    );
    let dir = std::env::temp_dir().join(format!("mbsp-coroutines-ckpt-{}", std::process::id()));
    let e = Run::new(4)
        .coroutines(true)
        .checkpoints(mbsp::Checkpoints::in_folder(&dir))
        .run(|ctx| ctx.sync())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Misuse);
    assert!(e.to_string().contains("checkpoints"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
    // A misuse inside a run, like the other misuses of `begin_nested`: the run fails with it.
    let e = mbsp::run(1, |ctx| {
        let inner = Run::new(2).coroutines(true).begin_nested(ctx, |_| Ok(()))?;
        inner.end()
    })
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Misuse);
    assert!(e.to_string().contains("begin_nested"), "{e}");
}

/// Random BSP programs (the sequential model's generator: puts, gets, messages with changing
/// tag sizes, pushes and pops, lazy supersteps) on 12 and 24 processes as coroutines, several
/// to a thread, checked against the sequential model of BSPlib.
#[test]
fn random_programs_of_many_coroutines_agree_with_the_sequential_model() {
    use bsplib_model::*;
    within(120, || {
        for (p, seed) in [(12, 0xC0C0_u64), (12, 0xC0C1), (24, 0xC0C2)] {
            let prog = generate(p, 30, seed);
            let mine = Run::new(p)
                .coroutines(true)
                .run(|ctx| process(ctx, &prog))
                .unwrap_or_else(|e| panic!("seed {seed:#x}, p {p}: {e}"));
            let records: Vec<Vec<Record>> = mine
                .into_iter()
                .map(|(records, bufs)| {
                    free(bufs);
                    records
                })
                .collect();
            check(p, &prog, &records).unwrap_or_else(|e| panic!("seed {seed:#x}, p {p}: {e}"));
        }
    });
}
