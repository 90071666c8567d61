//! Persistent worker teams: runs reuse parked threads and run state, a reused state starts
//! clean, failures do not poison a team, sleeping workers are woken, threads do not
//! accumulate, and teams are released.
//!
//! One test function only: it counts the process's threads, which concurrent tests would skew.

mod common;

use common::within;
use mbsp::topology::Binder;
use mbsp::{Binding, Machine, Policy, Run};

fn threads_now() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux /proc");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .map(|v| v.trim().parse().unwrap())
        .unwrap()
}

/// The process's thread count once it has settled. A joined thread can still be counted in
/// /proc for a moment: `pthread_join` returns when the kernel clears the thread's id, before
/// the thread has left the thread group. So read until the count has not changed for 50 ms
/// (at most 10 s); counts only fall while settling, since nothing starts threads meanwhile.
fn threads() -> usize {
    let start = std::time::Instant::now();
    let (mut last, mut same) = (threads_now(), 0);
    while same < 10 && start.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(5));
        let now = threads_now();
        same = if now == last { same + 1 } else { 0 };
        last = now;
    }
    last
}

/// A run that leaves everything behind: registrations, a tag size, messages, pending requests.
fn messy(ctx: &mut mbsp::Ctx) -> mbsp::Result<usize> {
    let x = ctx.push_reg(vec![ctx.pid() as u64; 8])?;
    ctx.set_tagsize(4)?;
    ctx.sync()?;
    let p = ctx.nprocs();
    ctx.put((ctx.pid() + 1) % p, &[7u64], &x, 0)?;
    ctx.send((ctx.pid() + 1) % p, &[1, 2, 3, 4], b"left in the queue")?;
    ctx.sync()?;
    ctx.send(0, &[0; 4], b"sent in the last superstep")?;
    let _y = ctx.push_reg(vec![0u8; 4])?; // pending at the end
    Ok(ctx.registrations())
}

/// What a fresh run sees.
fn fresh(ctx: &mut mbsp::Ctx) -> mbsp::Result<(usize, usize, usize, u64)> {
    let q = ctx.qsize()?.messages;
    let seen = (ctx.registrations(), ctx.tagsize(), q, ctx.superstep());
    let a = ctx.push_reg(vec![0u32; 2])?;
    ctx.sync()?;
    // The first slot again: the same handle numbering as a brand-new run.
    ctx.put(
        (ctx.pid() + 1) % ctx.nprocs(),
        &[ctx.pid() as u32 + 1],
        &a,
        1,
    )?;
    ctx.sync()?;
    let left = (ctx.pid() + ctx.nprocs() - 1) % ctx.nprocs();
    assert_eq!(ctx.local(&a)?, &[0, left as u32 + 1]);
    // Superstep 1 wrote the outboxes `messy` filled with a put and a message in its own
    // superstep 1: nothing of those may come along.
    assert_eq!(ctx.qsize()?.messages, 0, "a message of the run before");
    Ok(seen)
}

#[test]
fn teams() {
    within(300, || {
        // A reused run state starts clean, for top-level and nested runs.
        for p in [1, 2, 3] {
            assert!(mbsp::run(p, messy).unwrap().iter().all(|&r| r == 1));
            let seen = mbsp::run(p, fresh).unwrap();
            assert!(seen.iter().all(|&s| s == (0, 0, 0, 0)), "p {p}: {seen:?}");
        }
        let seen = mbsp::run(2, |ctx| {
            ctx.run(2, messy)?;
            ctx.run(2, fresh)
        })
        .unwrap();
        assert!(seen.iter().flatten().all(|&s| s == (0, 0, 0, 0)));

        // A failed run does not poison the team: the next run of the same size works.
        for i in 0..20 {
            let r = mbsp::run(3, |ctx| {
                if ctx.pid() == i % 3 {
                    return Err(ctx.abort("planned"));
                }
                ctx.sync()?;
                Ok(())
            });
            assert!(r.is_err());
            assert_eq!(mbsp::run(3, fresh).unwrap().len(), 3);
        }

        // Idle workers that have stopped spinning and sleep are woken by the next run's jobs,
        // each time (the hand-off's sleep handshake, `team.rs`; loom checks it exhaustively).
        for i in 0..20u64 {
            std::thread::sleep(std::time::Duration::from_millis(2 + i % 3));
            let r = mbsp::run(3, |ctx| {
                ctx.sync()?;
                Ok(ctx.pid() as u64 + i)
            })
            .unwrap();
            assert_eq!(r, [i, i + 1, i + 2]);
        }

        // Interleaved sizes, begun runs, and runs without reuse.
        for i in 0..50usize {
            let p = 1 + i % 4;
            let r = mbsp::run(p, |ctx| Ok(ctx.pid() * 10)).unwrap();
            assert_eq!(r, (0..p).map(|q| q * 10).collect::<Vec<_>>());
            let mut s = Run::new(2).begin(|ctx| ctx.sync()).unwrap();
            s.ctx().sync().unwrap();
            s.end().unwrap();
            let r = Run::new(2)
                .reuse_threads(false)
                .run(|ctx| Ok(ctx.pid()))
                .unwrap();
            assert_eq!(r, vec![0, 1]);
        }

        // Threads do not accumulate: a thousand nested runs in a loop, run after run.
        let loop_of_nested = || {
            mbsp::run(2, |ctx| {
                for _ in 0..500 {
                    let r = ctx.run(2, |n| {
                        n.sync()?;
                        Ok(n.pid())
                    })?;
                    assert_eq!(r, vec![0, 1]);
                }
                Ok(())
            })
            .unwrap();
        };
        let before = threads();
        mbsp::release_threads(); // the teams of the runs above are joined...
        let base = threads();
        assert!(
            base < before,
            "{base} threads after release, {before} before"
        );
        loop_of_nested();
        let warm = threads();
        assert_eq!(warm, base + 3, "one worker at the top, one per nested team");
        for _ in 0..4 {
            loop_of_nested();
        }
        assert_eq!(threads(), warm, "no thread growth once warm");
        mbsp::release_threads();
        assert_eq!(
            threads(),
            base,
            "the workers and their nested teams are joined"
        );
    });

    // On the real machine: workers follow placements that change from run to run.
    let loaded = Machine::current().unwrap();
    let binder = Binder::new(&loaded);
    if binder.applies() && loaded.machine.pus().len() >= 2 {
        let pus = loaded.machine.pus().len() as u32;
        for round in 0..6u32 {
            // Process 1 on a different CPU each round.
            let sets: Vec<Vec<u32>> = vec![vec![0], vec![1 + round % (pus - 1)]];
            let r = Run::new(2)
                .policy(Policy::Manual(sets.clone()))
                .run(|ctx| {
                    let now = Binder::new(&Machine::current().unwrap()).thread_cpus();
                    Ok((ctx.placement(), now))
                })
                .unwrap();
            let (place, now) = &r[1];
            assert_eq!(place.pus, sets[1]);
            if let Binding::Applied(cpus) = &place.binding {
                assert_eq!(cpus, &sets[1][..]);
                assert_eq!(now.as_ref(), Some(&sets[1]), "the OS agrees");
            }
        }
    }
}
