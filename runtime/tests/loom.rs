//! Model checks (loom) of the runtime's barrier, its superstep code and its worker teams, as written in
//! runtime/src (the atomics and shared cells go through the `shim` module, which switches them
//! to loom's models).
//!
//! Run with: `RUSTFLAGS="--cfg loom" cargo test -p mbsp --test loom` (a target dir of its own, say `CARGO_TARGET_DIR=target/loom`: every crate is built with the cfg)
//! (scripts/test does). Without the feature `loom` this file is empty.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use mbsp::WaitPolicy;
use mbsp::internals::{
    Aborted, Barrier, Member, model_run, model_run_slots, model_run_with, model_runs_on_one_state,
};

const TIGHT: WaitPolicy = WaitPolicy::new(1, 1);
/// Sleep at once. Loom does not let a load return a value its thread saw before its last
/// yield (so that spin loops make progress), which hides the sleep handshake's
/// store-buffering race from a waiter that spun or yielded first; a waiter that goes straight
/// to sleep exposes it.
const SLEEPY: WaitPolicy = WaitPolicy::new(0, 0);

/// The waiting of `model_run`: one spin, one yield, then sleep.
const TIGHT_LAZY: WaitPolicy = WaitPolicy::new(1, 1);

/// The ways a lazy sync is modelled: through lanes or the inboxes, with two sets of outboxes
/// or three (a sender then runs two supersteps ahead of a receiver that has not
/// acknowledged); and the lazy supersteps each model makes, enough for every outbox set (and
/// lane) to be refilled once.
const LAZY_WAYS: [(bool, usize, u64); 4] =
    [(true, 2, 3), (false, 2, 3), (true, 3, 4), (false, 3, 4)];

fn model(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(bound);
    }
    // Waiting threads loop (spin, yield, "sleep" = yield under loom): allow long paths.
    b.max_branches = 100_000;
    b.check(f);
}

/// The real superstep code (runtime/src/sync.rs, ctx.rs, outbox.rs, barrier.rs) with two
/// processes: registration, then a superstep with a riding put, a put through the outbox, a
/// riding message and a get, then one in which the queue is read in place while the other
/// process fills its outbox of the other parity with a message too big to ride, read in place
/// in the third. Loom explores the interleavings and reports any
/// access to the shared cells (registration tables, outboxes, collective requests) that the
/// barrier does not order; the asserts check the data.
#[test]
fn supersteps_of_the_real_runtime() {
    model(2, || {
        let r = model_run(2, |ctx| {
            let (me, other) = (ctx.pid(), 1 - ctx.pid());
            let x = ctx.push_reg(vec![me as u64 * 10; 4])?;
            let y = ctx.push_reg(vec![0u64; 36])?;
            ctx.sync()?;
            ctx.put(other, &[me as u64 + 1], &y, 0)?; // rides in the barrier line
            ctx.put(other, &[7u64; 32], &y, 4)?; // too big to ride: outbox
            ctx.send(other, &[], &[me as u8 + 5])?; // rides beside the put
            ctx.get(other, &x, 1..2, &y, 1)?;
            ctx.sync()?;
            let got = ctx.local(&y)?.to_vec();
            assert_eq!(&got[..2], &[other as u64 + 1, other as u64 * 10]);
            assert_eq!(&got[4..], &[7; 32]);
            // Too big to ride: the other parity's outbox, while the queue is read.
            ctx.send(other, &[], &[9; 256])?;
            let m = ctx.hpmove()?.expect("a message");
            assert_eq!(m.payload, &[other as u8 + 5]);
            ctx.sync()?;
            assert_eq!(ctx.hpmove()?.expect("a message").payload, &[9; 256]);
            Ok(())
        });
        for x in r {
            x.unwrap();
        }
    });
}

/// A process that aborts while the other waits in a sync: the waiting one is released with an
/// error, and both leave only when neither touches the other's memory.
#[test]
fn an_abort_while_the_other_process_syncs() {
    model(2, || {
        // A result channel outside the model (the run's own results are its errors).
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = seen.clone();
        let r = model_run(2, move |ctx| -> mbsp::Result<()> {
            let x = ctx.push_reg(vec![0u64; 2])?;
            let first = ctx.sync(); // pid 1's abort may even win the race with this one
            if ctx.pid() == 1 {
                first?;
                return Err(ctx.abort("stop"));
            }
            let failed = first.is_err() || {
                let _ = ctx.put(1, &[1], &x, 0); // fails if pid 1 has aborted already
                ctx.sync().is_err()
            };
            s.store(
                failed && ctx.local(&x).is_err(),
                std::sync::atomic::Ordering::SeqCst,
            );
            Ok(())
        });
        assert!(r.iter().all(|x| x.is_err()));
        assert!(
            seen.load(std::sync::atomic::Ordering::SeqCst),
            "pid 0's sync and local view fail"
        );
    });
}

/// Flags are ORed per episode, ending arrivals are reported, and round words are reused
/// correctly across episodes. (Three or more threads are covered by the barrier's unit test;
/// loom's state space explodes with three spinning threads.)
#[test]
fn flags_and_ends_combine_over_three_episodes() {
    for policy in [TIGHT, SLEEPY] {
        flags_and_ends(policy);
    }
}

/// The same episodes through a tree barrier (the one of oversubscribed runs): arrival by a
/// counter, release down the tree, each process sleeping on its own signal.
#[test]
fn a_tree_barrier_combines_flags_and_ends_over_three_episodes() {
    for policy in [TIGHT, SLEEPY] {
        flags_and_ends_through(move || Barrier::tree(2, policy));
    }
}

/// The same episodes through the tree of threads of coroutine runs: two threads of one process
/// each (both arrive on the run's counter, the last publishes), and one thread of two (its
/// last arriver publishes and releases the other through the thread's word).
#[test]
fn a_tree_of_threads_combines_flags_and_ends_over_three_episodes() {
    for policy in [TIGHT, SLEEPY] {
        flags_and_ends_through(move || Barrier::by_thread(&[vec![0], vec![1]], policy));
        flags_and_ends_through(move || Barrier::by_thread(&[vec![0, 1]], policy));
    }
}

fn flags_and_ends(policy: WaitPolicy) {
    flags_and_ends_through(move || Barrier::new(2, policy));
}

fn flags_and_ends_through(make: impl Fn() -> Barrier + Sync + Send + 'static) {
    model(3, move || {
        let barrier = Arc::new(make());
        let body = |barrier: &Barrier, pid: usize| {
            let mut me = Member::new(pid);
            let out = barrier
                .wait(&mut me, if pid == 1 { 4 } else { 1 }, false)
                .unwrap();
            assert_eq!(
                (out.flags, out.some_ended, out.all_ended),
                (5, false, false)
            );
            let out = barrier.wait(&mut me, 0, pid == 1).unwrap();
            assert_eq!((out.flags, out.some_ended, out.all_ended), (0, true, false));
            let out = barrier.wait(&mut me, 2, true).unwrap();
            assert_eq!((out.flags, out.some_ended, out.all_ended), (2, true, true));
        };
        let handles: Vec<_> = (1..2)
            .map(|pid| {
                let barrier = barrier.clone();
                thread::spawn(move || body(&barrier, pid))
            })
            .collect();
        body(&barrier, 0);
        for h in handles {
            h.join().unwrap();
        }
    });
}

/// Three processes asleep at once, no wake-up lost: in a tree barrier the last arriver wakes
/// the root, which wakes its children (two notifiers per episode, each waking a different
/// sleeper); in a dissemination barrier over groups {0, 1} and {2}, process 2's cross-package
/// line has two readers, both of which its one publication must wake; in a tree of threads
/// {0, 2} and {1}, the publisher wakes each thread's last arriver, which wakes the rest of its
/// thread.
#[test]
fn three_sleepy_processes_wake_each_other() {
    let tree: fn() -> Barrier = || Barrier::tree(3, SLEEPY);
    let grouped: fn() -> Barrier = || Barrier::grouped(&[0, 0, 1], SLEEPY);
    let threads: fn() -> Barrier = || Barrier::by_thread(&[vec![0, 2], vec![1]], SLEEPY);
    for make in [tree, grouped, threads] {
        model(1, move || {
            let barrier = Arc::new(make());
            let body = |barrier: &Barrier, pid: usize| {
                let mut me = Member::new(pid);
                let out = barrier.wait(&mut me, 1 << pid, false).unwrap();
                assert_eq!(out.flags, 7);
                let out = barrier.wait(&mut me, 0, true).unwrap();
                assert!(out.all_ended && out.flags == 0);
            };
            let handles: Vec<_> = (1..3)
                .map(|pid| {
                    let barrier = barrier.clone();
                    thread::spawn(move || body(&barrier, pid))
                })
                .collect();
            body(&barrier, 0);
            for h in handles {
                h.join().unwrap();
            }
        });
    }
}

/// Abort releases a waiter whichever way the two threads interleave, and never lets a
/// completed barrier be mistaken for an aborted one before the abort happened.
#[test]
fn abort_releases_waiters() {
    for policy in [TIGHT, SLEEPY] {
        abort_releases(move || Barrier::new(2, policy));
        abort_releases(move || Barrier::tree(2, policy));
        abort_releases(move || Barrier::by_thread(&[vec![0], vec![1]], policy));
    }
}

fn abort_releases(make: impl Fn() -> Barrier + Sync + Send + 'static) {
    model(3, move || {
        let barrier = Arc::new(make());
        let b2 = barrier.clone();
        let waiter = thread::spawn(move || b2.wait(&mut Member::new(1), 0, false));
        barrier.abort();
        assert_eq!(waiter.join().unwrap(), Err(Aborted));
        assert_eq!(barrier.wait(&mut Member::new(0), 0, false), Err(Aborted));
    });
}

/// The hand-off of processes to a worker team (runtime/src/team.rs), through the real
/// mailboxes, launches and waiting code: a parked worker, the starter posting a job and waking
/// it, the worker running it and counting itself out, the starter seeing its result; then the
/// same worker, idle again, taking the next run's job; then the team's shutdown, which must wake
/// and join the worker. A lost wake-up is a deadlock and a result or job read before it was
/// published is a data race; loom reports both.
#[test]
fn a_parked_worker_takes_two_runs_and_the_team_shuts_down() {
    model(3, || {
        for (id, results) in mbsp::internals::model_team(2, 2) {
            let got: Vec<u64> = results.into_iter().map(|r| r.unwrap()).collect();
            assert_eq!(got, [1000 + id]);
        }
    });
}

/// Two workers: the last of them to count itself out wakes the starter.
#[test]
fn the_last_of_two_workers_wakes_the_starter() {
    model(2, || {
        for (id, results) in mbsp::internals::model_team(3, 1) {
            let got: Vec<u64> = results.into_iter().map(|r| r.unwrap()).collect();
            assert_eq!(got, [1000 + id, 2000 + id]);
        }
    });
}

/// A run with coroutines hands its other cores' groups to the team's workers
/// (`Team::fan_out`): two rounds on a parked worker, each piece of work writing a plain cell
/// that the caller reads once the fan-out returns. A lost wake-up is a deadlock, a read not
/// ordered after the worker's write a data race; loom reports both.
#[test]
fn a_fan_out_to_a_parked_worker_twice() {
    model(3, || {
        let rounds = mbsp::internals::model_fan_out(2, 2);
        assert_eq!(rounds, [vec![0, 1], vec![100, 101]]);
    });
}

/// Shared deliveries (engine/threads/share.rs): a receiver copies a job of two chunks that it
/// and a helper claim, on a desk that held job 0 before. Loom reports a chunk copied twice or
/// while the owner reads the job's cells (before the close of the job, a helper could claim a
/// chunk of the old job number with the new job's length: this model found that); the asserts
/// check that the job is whole once the owner closes it.
#[test]
fn a_helper_takes_chunks_of_a_receivers_copy() {
    model(2, || {
        let cells = mbsp::internals::model_share(2, &[(0, 2, 7)], 1);
        assert_eq!(cells, [7, 7]);
    });
}

/// Two jobs that overlap, one after the other, with a helper: the later job wins (a helper's
/// copy of the first cannot land after the second's), and the second job, with more chunks
/// than the first's claim word counted to, cannot be claimed under the first's number
/// (without the close of each job, the owner here waits forever for a chunk counted twice).
#[test]
fn a_receivers_shared_copies_land_in_order() {
    model(1, || {
        let cells = mbsp::internals::model_share(5, &[(0, 2, 7), (1, 4, 9)], 1);
        assert_eq!(cells, [7, 9, 9, 9, 9]);
    });
}

/// Lazy syncs (`Ctx::declare_incoming`, engine/threads/lazy.rs) through the real superstep code: three
/// supersteps in a row with declared counts, each with a put through the outbox and a message,
/// so that each process refills an outbox of a parity the other may still be reading unless
/// the acknowledgements hold it back; then a full sync. Loom reports any access to the outboxes
/// and the queue that the counting protocol does not order; the asserts check the data.
#[test]
fn lazy_supersteps_of_the_real_runtime() {
    for (lanes, slots, steps) in LAZY_WAYS {
        model(2, move || {
            let r = model_run_slots(2, TIGHT_LAZY, lanes, slots, move |ctx| {
                let (me, other) = (ctx.pid(), 1 - ctx.pid());
                let y = ctx.push_reg(vec![0u64; 4])?;
                ctx.sync()?;
                for t in 1..=steps {
                    ctx.put(other, &[t * 10 + me as u64; 4], &y, 0)?; // too big to ride
                    ctx.send(other, &[], &[t as u8])?;
                    ctx.declare_incoming(2)?;
                    ctx.sync()?;
                    assert_eq!(ctx.local(&y)?, &[t * 10 + other as u64; 4]);
                    assert_eq!(ctx.hpmove()?.expect("a message").payload, &[t as u8]);
                }
                ctx.sync()?;
                Ok(())
            });
            for x in r {
                x.unwrap();
            }
        });
    }
}

/// One direction only: pid 0 puts and sends to pid 1 in every superstep and receives nothing,
/// so its syncs wait for nothing but pid 1's acknowledgements before it refills an outbox pid
/// 1 may still be reading (the queue is read in place during the next superstep).
#[test]
fn a_lazy_sender_runs_ahead_only_as_far_as_its_outboxes_are_free() {
    for (lanes, slots, steps) in LAZY_WAYS {
        model(2, move || {
            let r = model_run_slots(2, TIGHT_LAZY, lanes, slots, move |ctx| {
                let me = ctx.pid();
                let y = ctx.push_reg(vec![0u64; 4])?;
                ctx.sync()?;
                for t in 1..=steps {
                    if me == 0 {
                        ctx.put(1, &[t; 4], &y, 0)?;
                        ctx.send(1, &[], &[t as u8])?;
                    }
                    ctx.declare_incoming(if me == 1 { 2 } else { 0 })?;
                    ctx.sync()?;
                    if me == 1 {
                        assert_eq!(ctx.local(&y)?, &[t; 4]);
                        assert_eq!(ctx.hpmove()?.expect("a message").payload, &[t as u8]);
                    }
                }
                ctx.sync()?;
                Ok(())
            });
            for x in r {
                x.unwrap();
            }
        });
    }
}

/// Two runs on one run state, the second counting on from the first's sync counts, mode
/// words and barrier episodes (nothing reset between them): in each, pid 0 sends to pid 1 in
/// lazy supersteps and so may run into the second run's syncs while pid 1 is still leaving
/// the first or not yet in the second, reading pid 1's count and mode words as the first run
/// left them. Loom reports any access the counts do not order; the asserts check the data.
#[test]
fn a_second_run_on_a_state_counts_on_from_the_first() {
    for (lanes, slots) in [(true, 2), (false, 2)] {
        model(2, move || {
            let runs = model_runs_on_one_state(2, TIGHT_LAZY, lanes, slots, 2, move |ctx| {
                let me = ctx.pid();
                // Three supersteps: the first outbox set is refilled within the run.
                for t in 1..=3u8 {
                    if me == 0 {
                        ctx.send(1, &[], &[t])?;
                    }
                    ctx.declare_incoming(if me == 1 { 1 } else { 0 })?;
                    ctx.sync()?;
                    if me == 1 {
                        assert_eq!(ctx.hpmove()?.expect("a message").payload, &[t]);
                    }
                }
                Ok(())
            });
            for r in runs.into_iter().flatten() {
                r.unwrap();
            }
        });
    }
}

/// A declared count that cannot be met ends the run with an error on that process instead of
/// a wait that never ends (loom reports a deadlock or a livelock otherwise).
#[test]
fn a_lazy_count_that_cannot_be_met_fails() {
    model(2, || {
        let r = model_run(2, |ctx| {
            let other = 1 - ctx.pid();
            let y = ctx.push_reg(vec![0u64; 4])?;
            ctx.sync()?;
            ctx.put(other, &[1u64; 4], &y, 0)?;
            ctx.declare_incoming(if ctx.pid() == 0 { 2 } else { 1 })?;
            ctx.sync()?;
            Ok(())
        });
        let e = r[0].as_ref().expect_err("pid 0 waits for a second record");
        assert!(e.to_string().contains("declare_incoming(2)"), "{e}");
    });
}

/// A symmetric lazy exchange whose waits sleep at once (`SLEEPY`): each process sleeps on its
/// signal for the other's record and acknowledgement, and must be woken once its condition
/// holds (engine/threads/lazy.rs, `wake_after_enter`); a lost wake-up is a deadlock that loom
/// reports, a read of an outbox the protocol does not order is reported too.
#[test]
fn sleeping_lazy_waits_are_woken() {
    for (lanes, slots, _) in LAZY_WAYS {
        model(2, move || {
            let r = model_run_slots(2, SLEEPY, lanes, slots, |ctx| {
                let (me, other) = (ctx.pid(), 1 - ctx.pid());
                let y = ctx.push_reg(vec![0u64; 4])?;
                ctx.sync()?;
                for t in 1..=2u64 {
                    ctx.put(other, &[t * 10 + me as u64; 4], &y, 0)?;
                    ctx.declare_incoming(1)?;
                    ctx.sync()?;
                    assert_eq!(ctx.local(&y)?, &[t * 10 + other as u64; 4]);
                }
                Ok(())
            });
            for x in r {
                x.unwrap();
            }
        });
    }
}

/// A count that cannot be met, with waits that sleep at once: the short process is woken by
/// the last process to enter the sync (its stop condition), never left asleep.
#[test]
fn a_sleeping_lazy_wait_with_a_short_count_is_woken_to_fail() {
    model(2, || {
        let r = model_run_with(2, SLEEPY, |ctx| {
            let other = 1 - ctx.pid();
            let y = ctx.push_reg(vec![0u64; 4])?;
            ctx.sync()?;
            ctx.put(other, &[1u64; 4], &y, 0)?;
            ctx.declare_incoming(if ctx.pid() == 0 { 2 } else { 1 })?;
            ctx.sync()?;
            Ok(())
        });
        let e = r[0].as_ref().expect_err("pid 0 waits for a second record");
        assert!(e.to_string().contains("declare_incoming(2)"), "{e}");
    });
}

/// One process makes a full sync where the other makes a lazy one (a misuse), with waits that
/// sleep at once: the lazy one is woken when the full one enters its sync (it checks for
/// sleepers after a fence; at p = 2 its barrier arrival notifies the lazy one's signal too),
/// fails, and its abort releases the full one from the barrier.
#[test]
fn a_full_sync_against_a_sleeping_lazy_one_fails_both() {
    model(2, || {
        let r = model_run_with(2, SLEEPY, |ctx| {
            let other = 1 - ctx.pid();
            let y = ctx.push_reg(vec![0u64; 4])?;
            ctx.sync()?;
            if ctx.pid() == 0 {
                ctx.put(other, &[1u64; 4], &y, 0)?;
                ctx.declare_incoming(1)?;
            }
            ctx.sync()?;
            Ok(())
        });
        assert!(r.iter().all(|x| x.is_err()), "{r:?}");
    });
}
