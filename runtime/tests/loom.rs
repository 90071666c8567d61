//! Model checks (loom) of the barrier and the superstep handshake built on it.
//!
//! Run with: `RUSTFLAGS="--cfg loom" cargo test -p mbsp --test loom --release`
//! (scripts/test does). Without `--cfg loom` this file is empty.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;
use mbsp::WaitPolicy;
use mbsp::internals::{Aborted, Barrier, Member};

const TIGHT: WaitPolicy = WaitPolicy {
    spins: 1,
    yields: 1,
};

fn model(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(bound);
    }
    // Waiting threads loop (spin, yield, "sleep" = yield under loom): allow long paths.
    b.max_branches = 100_000;
    b.check(f);
}

/// The superstep protocol: each process writes its outbox of the current parity before the
/// barrier, and the receiver reads it after the barrier, while the writer may already be in the
/// next superstep writing the other parity. Loom reports any access to a cell that is not
/// ordered by the barrier, and the asserts check that the data read is the data of the round.
#[test]
fn parity_outboxes_are_handed_over_without_races() {
    model(3, || {
        let barrier = Arc::new(Barrier::new(2, TIGHT));
        // outbox[pid][parity]
        let outbox: Arc<Vec<[UnsafeCell<u32>; 2]>> = Arc::new(
            (0..2)
                .map(|_| [UnsafeCell::new(0), UnsafeCell::new(0)])
                .collect(),
        );
        let handles: Vec<_> = (0..2)
            .map(|pid| {
                let (barrier, outbox) = (barrier.clone(), outbox.clone());
                thread::spawn(move || {
                    let mut me = Member::new(pid);
                    for round in 0..3u32 {
                        let q = (round % 2) as usize;
                        outbox[pid][q].with_mut(|v| unsafe { *v = round * 10 + pid as u32 });
                        let out = barrier.wait(&mut me, 1 << pid, false).unwrap();
                        assert_eq!(out.flags, 0b11);
                        let got = outbox[1 - pid][q].with(|v| unsafe { *v });
                        assert_eq!(got, round * 10 + (1 - pid) as u32);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
}

/// Flags are ORed per episode, ending arrivals are reported, and round words are reused
/// correctly across episodes. (Three or more threads are covered by the barrier's unit test;
/// loom's state space explodes with three spinning threads.)
#[test]
fn flags_and_ends_combine_over_three_episodes() {
    model(3, || {
        let barrier = Arc::new(Barrier::new(2, TIGHT));
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

/// Abort releases a waiter whichever way the two threads interleave, and never lets a
/// completed barrier be mistaken for an aborted one before the abort happened.
#[test]
fn abort_releases_waiters() {
    model(3, || {
        let barrier = Arc::new(Barrier::new(2, TIGHT));
        let b2 = barrier.clone();
        let waiter = thread::spawn(move || b2.wait(&mut Member::new(1), 0, false));
        barrier.abort();
        assert_eq!(waiter.join().unwrap(), Err(Aborted));
        assert_eq!(barrier.wait(&mut Member::new(0), 0, false), Err(Aborted));
    });
}
