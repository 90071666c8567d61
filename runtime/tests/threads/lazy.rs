//! Lazy syncs (`Ctx::declare_incoming`): the same programs give the same results with declared counts as
//! with full syncs, processes may drift apart without mixing supersteps, and every wrong count
//! or misuse ends the run with an error naming it, never a hang. Runs on a reused run state
//! count on from the sync counts, mode words and barrier episodes of the run before.

use crate::common;

use common::within;
use mbsp::{Ctx, ErrorKind};

/// How a lazy sync announces its records (through lanes, as runs of at most 16 processes do,
/// or through the receivers' inboxes, as larger runs do) and how many sets of outboxes the
/// processes use in turn (2, or 3 as runs with more processes than cores do: a sender may then
/// run two supersteps ahead of its receivers); every test here takes all four.
const LANES: [Way; 4] = [(true, 2), (false, 2), (true, 3), (false, 3)];

/// Lanes or not, and the sets of outboxes.
type Way = (bool, usize);

/// `mbsp::run`, announcing lazy syncs through lanes or not, with 2 or 3 sets of outboxes; runs
/// of two and of coroutines make the lazy protocol's syncs too (by default their declared
/// syncs take the barrier: tested at the end).
fn run_on<R: Send>(
    way: Way,
    p: usize,
    f: impl Fn(&mut Ctx) -> mbsp::Result<R> + Sync,
) -> mbsp::Result<Vec<R>> {
    run_of(way, mbsp::Run::new(p)).run(f)
}

/// `run` announcing lazy syncs and using outbox sets as `way` says, its declared syncs (at
/// p = 2 or as coroutines) not at the barrier.
fn run_of((lanes, slots): Way, run: mbsp::Run) -> mbsp::Run {
    let run = mbsp::internals::lanes(run, lanes);
    let run = mbsp::internals::slots(run, slots);
    mbsp::internals::declared_at_barrier(run, false)
}

/// The tests of misuse at p = 2 run four ways: the lazy protocol through lanes and through
/// inboxes (with 3 sets of outboxes too), and as users get it, with the declared syncs at the
/// barrier (`pair`: true).
const PAIR_WAYS: [(Way, bool); 4] = [
    ((true, 2), false),
    ((false, 2), false),
    ((false, 3), false),
    ((true, 2), true),
];

/// [`run_on`], or with `pair` a run as users get it (declared syncs of a run of two at the
/// barrier).
fn run_way<R: Send>(
    (lanes, pair): (Way, bool),
    p: usize,
    f: impl Fn(&mut Ctx) -> mbsp::Result<R> + Sync,
) -> mbsp::Result<Vec<R>> {
    if pair {
        mbsp::Run::new(p).run(f)
    } else {
        run_on(lanes, p, f)
    }
}

/// Superstep `t` of a program with a changing pattern: process `i` puts one word to `dest(t,
/// i)` (into slot `i` of the destination's array) and sends `msgs(t, i)` messages to process
/// `(i + t) % p`. Every process can compute every count.
fn dest(t: u64, i: usize, p: usize) -> usize {
    (i + 1 + (t as usize * 7 + i * 3) % p.max(2)) % p
}

fn msgs(t: u64, i: usize) -> usize {
    (t as usize + i) % 3
}

fn incoming(t: u64, r: usize, p: usize) -> usize {
    (0..p).filter(|&i| dest(t, i, p) == r).count()
        + (0..p)
            .filter(|&i| (i + t as usize) % p == r)
            .map(|i| msgs(t, i))
            .sum::<usize>()
}

/// Run the program for `steps` supersteps, lazily or not; each process logs its array and its
/// sorted messages after every sync.
fn program(ctx: &mut Ctx, steps: u64, lazy: bool) -> mbsp::Result<Vec<u64>> {
    let (pid, p) = (ctx.pid(), ctx.nprocs());
    let x = ctx.push_reg(vec![0u64; p])?;
    ctx.set_tagsize(8)?;
    ctx.sync()?;
    let mut log = Vec::new();
    for t in 1..=steps {
        // A long sequential phase on one process now and then lets the others drift ahead.
        if t % 17 == pid as u64 {
            std::thread::sleep(std::time::Duration::from_micros(300));
        }
        ctx.put(dest(t, pid, p), &[t * 1000 + pid as u64], &x, pid)?;
        for k in 0..msgs(t, pid) {
            let payload = [t, pid as u64, k as u64];
            ctx.send_pod((pid + t as usize) % p, &(t * 10 + k as u64), &payload)?;
        }
        if lazy {
            ctx.declare_incoming(incoming(t, pid, p))?;
        }
        ctx.sync()?;
        log.extend_from_slice(ctx.local(&x)?);
        let mut got = Vec::new();
        while let Some(m) = ctx.hpmove()? {
            let mut rec = vec![m.tag_as::<u64>()];
            rec.extend_from_slice(m.payload_as::<u64>());
            got.push(rec);
        }
        got.sort();
        log.extend(got.into_iter().flatten());
    }
    Ok(log)
}

#[test]
fn lazy_syncs_give_the_results_of_full_syncs() {
    for lanes in LANES {
        within(120, move || {
            // 16 and 17: the largest run with lanes, and the smallest without.
            for p in [1, 2, 3, 4, 5, 16, 17] {
                let full = run_on(lanes, p, |ctx| program(ctx, 60, false)).unwrap();
                let lazy = run_on(lanes, p, |ctx| program(ctx, 60, true)).unwrap();
                assert_eq!(full, lazy, "p = {p}");
            }
        });
    }
}

#[test]
fn lazy_and_full_syncs_alternate() {
    for lanes in LANES {
        within(60, move || {
            let run = |pattern: &'static [bool]| {
                run_on(lanes, 3, move |ctx| {
                    let (pid, p) = (ctx.pid(), ctx.nprocs());
                    let x = ctx.push_reg(vec![0u64; 3])?;
                    ctx.sync()?;
                    let mut seen = Vec::new();
                    for (t, &lazy) in pattern.iter().enumerate() {
                        let t = t as u64 + 1;
                        // Everyone puts into the right neighbour; pid 0 also into itself.
                        ctx.put((pid + 1) % p, &[t * 10 + pid as u64], &x, pid)?;
                        if pid == 0 {
                            ctx.put(0, &[t], &x, 1)?;
                        }
                        if lazy {
                            ctx.declare_incoming(if pid == 0 { 2 } else { 1 })?;
                        }
                        ctx.sync()?;
                        seen.extend_from_slice(ctx.local(&x)?);
                    }
                    Ok(seen)
                })
                .unwrap()
            };
            let all_full = run(&[false; 12]);
            let mixed = run(&[
                true, true, false, true, false, false, true, true, true, false, true, false,
            ]);
            assert_eq!(all_full, mixed);
        });
    }
}

/// A process with nothing to receive does not wait for the others: pid 0 runs ahead through
/// many lazy supersteps while pid 1 sleeps, and the data of every superstep still lands in
/// that superstep.
#[test]
fn processes_drift_apart_without_mixing_supersteps() {
    for lanes in LANES {
        within(60, move || {
            let logs = run_on(lanes, 2, |ctx| {
                let pid = ctx.pid();
                let x = ctx.push_reg(vec![0u64; 1])?;
                ctx.sync()?;
                let mut seen = Vec::new();
                for t in 1..=200u64 {
                    if pid == 1 && t % 50 == 0 {
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                    if pid == 0 {
                        ctx.put(1, &[t], &x, 0)?;
                    }
                    ctx.declare_incoming(if pid == 1 { 1 } else { 0 })?;
                    ctx.sync()?;
                    if pid == 1 {
                        seen.push(ctx.local(&x)?[0]);
                    }
                }
                Ok(seen)
            })
            .unwrap();
            assert_eq!(logs[1], (1..=200).collect::<Vec<u64>>());
        });
    }
}

/// How far a lazy sender runs ahead of a receiver that has not entered its sync: pid 0 puts
/// to pid 1 in every superstep and receives nothing; pid 1 stops before its sync of superstep
/// 2 until pid 0 has completed its syncs of supersteps 1 and 2. With three sets of outboxes
/// (through the inboxes or the lanes) pid 0 gets there: it waits for the acknowledgement of superstep 1
/// only when superstep 4 refills that set. With two it must not (the acknowledgement of
/// superstep 1 comes in pid 1's sync 2), so pid 1 gives up after a while and the run goes on;
/// in both, every superstep's word lands in that superstep.
#[test]
fn a_lazy_sender_runs_two_supersteps_ahead_with_three_sets_of_outboxes() {
    use std::sync::atomic::{AtomicU64, Ordering};
    for (lanes, slots) in [(false, 2), (true, 2), (false, 3), (true, 3)] {
        within(60, move || {
            // 1 + the last superstep whose sync pid 0 has completed.
            let reached = AtomicU64::new(0);
            let logs = run_on((lanes, slots), 2, |ctx| {
                let pid = ctx.pid();
                let x = ctx.push_reg(vec![0u64; 1])?;
                ctx.sync()?;
                let mut seen = Vec::new();
                let mut ahead = false;
                for t in 1..=5u64 {
                    if pid == 0 {
                        ctx.put(1, &[t], &x, 0)?;
                    }
                    if pid == 1 && t == 2 {
                        // Two sets: pid 0 cannot get there, so give up after a second (with three it
                        // comes at once: ten seconds mean it does not).
                        let patience = if slots == 3 { 10_000 } else { 1000 };
                        for _ in 0..patience {
                            if reached.load(Ordering::Acquire) >= 3 {
                                ahead = true;
                                break;
                            }
                            std::thread::sleep(std::time::Duration::from_millis(1));
                        }
                    }
                    ctx.declare_incoming(if pid == 1 { 1 } else { 0 })?;
                    ctx.sync()?;
                    if pid == 0 {
                        reached.store(t + 1, Ordering::Release);
                    } else {
                        seen.push(ctx.local(&x)?[0]);
                    }
                }
                Ok((seen, ahead))
            })
            .unwrap();
            assert_eq!(logs[1].0, (1..=5).collect::<Vec<u64>>(), "slots {slots}");
            assert_eq!(
                logs[1].1,
                slots == 3,
                "slots {slots}: pid 0 two syncs ahead"
            );
        });
    }
}

/// One process's wrong count fails the run (on the process that notices) within the hang
/// detector's limit.
fn wrong_count(
    lanes: Way,
    p: usize,
    declare: impl Fn(usize) -> usize + Send + Sync + 'static,
) -> mbsp::Error {
    within(60, move || wrong_count_here(lanes, p, declare))
}

/// [`wrong_count`] on this thread (its team), without the hang detector.
fn wrong_count_here(lanes: Way, p: usize, declare: impl Fn(usize) -> usize + Sync) -> mbsp::Error {
    run_on(lanes, p, |ctx| {
        let (pid, p) = (ctx.pid(), ctx.nprocs());
        let x = ctx.push_reg(vec![0u64; p])?;
        ctx.sync()?;
        for _ in 0..3 {
            ctx.put((pid + 1) % p, &[1], &x, pid)?;
            ctx.declare_incoming(1)?;
            ctx.sync()?;
        }
        ctx.put((pid + 1) % p, &[1], &x, pid)?;
        ctx.declare_incoming(declare(pid))?;
        ctx.sync()?;
        Ok(())
    })
    .unwrap_err()
}

#[test]
fn more_records_than_declared_fail_the_run() {
    for lanes in LANES {
        // pid 1 declares none but receives one: it notices when the record is there before it
        // completes the superstep, else pid 0 notices that its record arrived too late.
        for _ in 0..10 {
            let e = wrong_count(lanes, 3, |pid| if pid == 1 { 0 } else { 1 });
            assert_eq!((e.kind(), e.op()), (ErrorKind::Misuse, "sync"), "{e}");
            let msg = e.to_string();
            if e.path() == [1] {
                assert!(
                    msg.contains("declare_incoming(0)") && msg.contains("received 1"),
                    "{msg}"
                );
            } else {
                assert_eq!(e.path(), &[0], "{e}");
                assert!(msg.contains("arrived after"), "{msg}");
            }
        }
    }
}

#[test]
fn fewer_records_than_declared_fail_without_a_hang() {
    for lanes in LANES {
        let e = wrong_count(lanes, 3, |pid| if pid == 2 { 2 } else { 1 });
        assert_eq!(e.kind(), ErrorKind::Misuse, "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("declare_incoming(2)")
                && msg.contains("received 1")
                && msg.contains("already synced"),
            "{msg}"
        );
        assert_eq!(e.path(), &[2], "{e}");
    }
}

#[test]
fn a_full_sync_among_lazy_ones_is_reported() {
    for way in PAIR_WAYS {
        for lazy_pid in [0, 1] {
            let e = within(60, move || {
                run_way(way, 2, move |ctx| {
                    let x = ctx.push_reg(vec![0u64; 1])?;
                    ctx.sync()?;
                    ctx.put(1 - ctx.pid(), &[1], &x, 0)?;
                    if ctx.pid() == lazy_pid {
                        ctx.declare_incoming(1)?;
                    }
                    ctx.sync()?;
                    ctx.sync()?;
                    Ok(())
                })
                .unwrap_err()
            });
            assert_eq!(e.kind(), ErrorKind::Misuse, "{e}");
            let msg = e.to_string();
            assert!(
                msg.contains("full sync")
                    && msg.contains("lazy one")
                    && msg.contains("declare_incoming is collective"),
                "{way:?}: {msg}"
            );
        }
    }
}

/// A lazy sync among full ones whose wait sleeps at once (nothing spins or yields): it waits
/// for a record nobody sends, so only the last process to enter the superstep's sync can end
/// its wait, by waking it once everybody has entered (a full sync does so after its barrier
/// arrival's fence). Under the tree barrier no arrival notifies it otherwise: without that wake
/// the run hangs. Each lazy pid, both barriers, all four ways, several times.
#[test]
fn a_sleeping_lazy_sync_among_full_ones_is_woken_to_fail() {
    let sleepy = mbsp::WaitPolicy::new(0, 0);
    for tree in [true, false] {
        for (lanes, slots) in LANES {
            for lazy_pid in 0..4 {
                for _ in 0..5 {
                    let e = within(60, move || {
                        let run = mbsp::Run::new(4).wait_policy(sleepy);
                        let run = mbsp::internals::tree_barrier(run, tree);
                        let run = mbsp::internals::lanes(run, lanes);
                        mbsp::internals::slots(run, slots)
                            .run(move |ctx| {
                                ctx.sync()?;
                                if ctx.pid() == lazy_pid {
                                    ctx.declare_incoming(1)?;
                                }
                                ctx.sync()?;
                                Ok(())
                            })
                            .unwrap_err()
                    });
                    assert_eq!(e.kind(), ErrorKind::Misuse, "lazy pid {lazy_pid}: {e}");
                    assert!(
                        e.to_string().contains("lazy one"),
                        "tree {tree}, lazy pid {lazy_pid}: {e}"
                    );
                }
            }
        }
    }
}

/// A star of lazy syncs whose receiver makes one full sync, or returns from the SPMD function
/// (its end is a full sync): its senders declare nothing, so they pass that superstep without
/// waiting and go on putting to it, while it waits at its barrier for them. A sender then
/// waits for the receiver's records or acknowledgements of a later superstep, which never
/// come: the wait must end with the misuse (not hang), naming the receiver, what it did and
/// the superstep. Every way, 3, 4 and 16 processes (16 on threads and as coroutines), in the
/// first superstep that declares and later.
#[test]
fn a_receiver_that_makes_a_full_sync_among_lazy_senders_is_reported() {
    for way in LANES {
        for (p, coroutines) in [(3, false), (4, false), (16, false), (16, true)] {
            for (full_at, ends) in [(0u64, false), (3, false), (3, true)] {
                let e = within(60, move || {
                    run_of(way, mbsp::Run::new(p).coroutines(coroutines))
                        .run(move |ctx| {
                            let (me, p) = (ctx.pid(), ctx.nprocs());
                            let x = ctx.push_reg(vec![0u64; p])?;
                            ctx.sync()?;
                            for i in 0..12u64 {
                                if me == 0 && i == full_at && ends {
                                    return Ok(());
                                }
                                if me != 0 {
                                    ctx.put(0, &[i], &x, me)?;
                                }
                                if me != 0 || i != full_at {
                                    ctx.declare_incoming(if me == 0 { p - 1 } else { 0 })?;
                                }
                                ctx.sync()?;
                            }
                            Ok(())
                        })
                        .unwrap_err()
                });
                let case = format!("{way:?}, p {p}, coroutines {coroutines}, at {full_at}");
                assert_eq!(e.kind(), ErrorKind::Misuse, "{case}: {e}");
                let msg = e.to_string();
                let what = if ends {
                    "returned from the SPMD function in superstep"
                } else {
                    "made a full sync in superstep"
                };
                let said = format!("pid(s) [0] {what} {}", full_at + 1);
                assert!(msg.contains(&said), "{case}: {msg}");
            }
        }
    }
}

/// The same misuse where the lazy processes wait for the one in a full sync only much later,
/// when one of them first writes to it: with 3 sets of outboxes a process waits before it
/// announces to a destination that has not completed the sync that last used the slot, long
/// after the superstep of the full sync (so the look at that superstep alone misses it).
#[test]
fn a_first_write_to_a_process_that_waits_in_an_old_full_sync_is_reported() {
    for way in LANES {
        for p in [3, 4] {
            let e = within(60, move || {
                run_of(way, mbsp::Run::new(p))
                    .run(move |ctx| {
                        let me = ctx.pid();
                        let x = ctx.push_reg(vec![0u64; 1])?;
                        ctx.sync()?;
                        for i in 0..12u64 {
                            if me == 1 && i == 8 {
                                ctx.put(0, &[i], &x, 0)?;
                            }
                            if me != 0 || i != 1 {
                                ctx.declare_incoming(usize::from(me == 0 && i == 8))?;
                            }
                            ctx.sync()?;
                        }
                        Ok(())
                    })
                    .unwrap_err()
            });
            let case = format!("{way:?}, p {p}");
            assert_eq!(e.kind(), ErrorKind::Misuse, "{case}: {e}");
            let msg = e.to_string();
            assert!(
                msg.contains("pid(s) [0] made a full sync in superstep 2 while pid")
                    && msg.contains("declare_incoming is collective"),
                "{case}: {msg}"
            );
        }
    }
}

/// A lazy sync that receives nothing among full ones, with four processes and the lazy one
/// anywhere in the ring: it does not wait, so only the full syncs can notice (each looks at the
/// next process only).
#[test]
fn a_lazy_sync_among_full_ones_is_reported_wherever_it_is() {
    for lanes in LANES {
        for lazy_pid in 0..4 {
            let e = within(60, move || {
                run_on(lanes, 4, move |ctx| {
                    ctx.declare_incoming(0)?;
                    ctx.sync()?; // the run has used lazy syncs
                    ctx.sync()?;
                    ctx.sync()?;
                    if ctx.pid() == lazy_pid {
                        ctx.declare_incoming(0)?;
                    }
                    ctx.sync()?;
                    ctx.sync()?;
                    Ok(())
                })
                .unwrap_err()
            });
            assert_eq!(e.kind(), ErrorKind::Misuse, "lazy pid {lazy_pid}: {e}");
            let msg = e.to_string();
            // Noticed at superstep 3 by the process before the lazy one, or at 4 by the lazy one
            // itself if it gets there first (its barrier of 4 completes with the others' arrivals
            // of 3).
            assert!(msg.contains("made a lazy one"), "lazy pid {lazy_pid}: {e}");
        }
    }
}

#[test]
fn records_sent_to_a_process_that_completed_the_superstep_are_reported() {
    for lanes in LANES {
        // pid 0 declares one record but pids 1 and 2 both send it one: either pid 0 sees both (too
        // many), or it completes with one and the other arrives late.
        for _ in 0..20 {
            let e = within(60, move || {
                run_on(lanes, 3, |ctx| {
                    let pid = ctx.pid();
                    let x = ctx.push_reg(vec![0u64; 3])?;
                    ctx.sync()?;
                    if pid != 0 {
                        ctx.put(0, &[1], &x, pid)?;
                    }
                    ctx.declare_incoming(if pid == 0 { 1 } else { 0 })?;
                    ctx.sync()?;
                    ctx.declare_incoming(0)?;
                    ctx.sync()?;
                    Ok(())
                })
                .unwrap_err()
            });
            assert_eq!(e.kind(), ErrorKind::Misuse, "{e}");
            let msg = e.to_string();
            assert!(
                msg.contains("received 2") || msg.contains("arrived after"),
                "{msg}"
            );
        }
    }
}

#[test]
fn gets_and_registrations_need_a_full_sync() {
    for way in PAIR_WAYS {
        let e = within(60, move || {
            run_way(way, 2, |ctx| {
                let x = ctx.push_reg(vec![0u64; 4])?;
                let y = ctx.push_reg(vec![0u64; 4])?;
                ctx.sync()?;
                ctx.get(1 - ctx.pid(), &x, 0..2, &y, 0)?;
                ctx.declare_incoming(0)?;
                ctx.sync()?;
                Ok(())
            })
            .unwrap_err()
        });
        assert_eq!(e.kind(), ErrorKind::Misuse, "{e}");
        assert!(e.to_string().contains("also called get"), "{e}");
    }
}

#[test]
fn immediate_primitives_are_refused_in_a_lazy_superstep() {
    for lanes in LANES {
        let e = within(60, move || {
            run_on(lanes, 2, |ctx| {
                let x = ctx.push_reg(vec![0u64; 4])?;
                ctx.sync()?;
                ctx.declare_incoming(0)?;
                // SAFETY: refused before it touches anything.
                unsafe { ctx.hpput(1 - ctx.pid(), &[1u64], &x, 0)? };
                ctx.sync()?;
                Ok(())
            })
            .unwrap_err()
        });
        assert_eq!((e.kind(), e.op()), (ErrorKind::Misuse, "hpput"), "{e}");
        assert!(e.to_string().contains("after declare_incoming(0)"), "{e}");

        let e = within(60, move || {
            run_on(lanes, 2, |ctx| {
                let x = ctx.push_reg(vec![0u64; 4])?;
                ctx.sync()?;
                let mut local = [0u64; 1];
                // SAFETY: nobody writes `x` in this superstep.
                unsafe { ctx.hpget(1 - ctx.pid(), &x, 0, &mut local)? };
                ctx.declare_incoming(0)?;
                ctx.sync()?;
                Ok(())
            })
            .unwrap_err()
        });
        assert_eq!(
            (e.kind(), e.op()),
            (ErrorKind::Misuse, "declare_incoming"),
            "{e}"
        );
    }
}

#[test]
fn a_count_declared_before_the_end_is_checked() {
    for lanes in LANES {
        let e = within(60, move || {
            run_on(lanes, 2, |ctx| {
                let x = ctx.push_reg(vec![0u64; 1])?;
                ctx.sync()?;
                ctx.put(1 - ctx.pid(), &[1], &x, 0)?;
                ctx.declare_incoming(2)?;
                Ok(())
            })
            .unwrap_err()
        });
        assert_eq!(e.kind(), ErrorKind::Misuse, "{e}");
        assert!(e.to_string().contains("declare_incoming(2)"), "{e}");
    }
}

#[test]
fn lazy_syncs_in_repeated_nested_runs() {
    for lanes in LANES {
        within(60, move || {
            let out = run_on(lanes, 2, |ctx| {
                let x = ctx.push_reg(vec![0u64; 1])?;
                ctx.sync()?;
                let mut inner_seen = Vec::new();
                for round in 0..5u64 {
                    for t in 0..20 {
                        ctx.put(1 - ctx.pid(), &[round * 100 + t], &x, 0)?;
                        ctx.declare_incoming(1)?;
                        ctx.sync()?;
                    }
                    // Nested runs of one shape reuse their state: the lazy counters must start
                    // afresh each time.
                    let inner = ctx.run(2, |c| {
                        let y = c.push_reg(vec![0u64; 1])?;
                        c.sync()?;
                        for t in 0..(3 + round) {
                            c.put(1 - c.pid(), &[c.pid() as u64 + 10 * t], &y, 0)?;
                            c.declare_incoming(1)?;
                            c.sync()?;
                        }
                        Ok(c.local(&y)?[0])
                    })?;
                    inner_seen.push(inner);
                }
                Ok((ctx.local(&x)?[0], inner_seen))
            })
            .unwrap();
            let inner: Vec<Vec<u64>> = (0..5u64)
                .map(|r| vec![1 + 10 * (2 + r), 10 * (2 + r)])
                .collect();
            assert_eq!(out, vec![(419, inner); 2]);
        });
    }
}

// ------------------------------------------------------------------------------ runs of two
// A run of two processes makes its declared syncs at the barrier (one cache line each way there,
// cheaper than the lazy protocol), with the counts checked, what a lazy superstep refuses
// refused, and a process that does not declare reported.

/// `mbsp::run` of two processes as users get it: declared syncs take the barrier.
fn pair<R: Send>(f: impl Fn(&mut Ctx) -> mbsp::Result<R> + Sync) -> mbsp::Result<Vec<R>> {
    mbsp::Run::new(2).run(f)
}

#[test]
fn declared_syncs_of_a_run_of_two_give_the_results_of_full_and_lazy_syncs() {
    within(60, || {
        let full = pair(|ctx| program(ctx, 60, false)).unwrap();
        let declared = pair(|ctx| program(ctx, 60, true)).unwrap();
        let protocol = run_on((true, 2), 2, |ctx| program(ctx, 60, true)).unwrap();
        assert_eq!(full, declared);
        assert_eq!(full, protocol);
    });
}

#[test]
fn a_run_of_two_checks_declared_counts_at_the_barrier() {
    // Each process puts one word to the other in every superstep; in the last one, `declare`
    // gives what each declares.
    let wrong = |declare: fn(usize) -> usize| {
        within(60, move || {
            pair(move |ctx| {
                let x = ctx.push_reg(vec![0u64; 1])?;
                ctx.sync()?;
                for _ in 0..3 {
                    ctx.put(1 - ctx.pid(), &[1], &x, 0)?;
                    ctx.declare_incoming(1)?;
                    ctx.sync()?;
                }
                ctx.put(1 - ctx.pid(), &[1], &x, 0)?;
                ctx.declare_incoming(declare(ctx.pid()))?;
                ctx.sync()?;
                Ok(())
            })
            .unwrap_err()
        })
    };
    let e = wrong(|pid| if pid == 1 { 0 } else { 1 });
    assert_eq!(
        (e.kind(), e.op(), e.path()),
        (ErrorKind::Misuse, "sync", &[1][..]),
        "{e}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("declare_incoming(0) in superstep 4") && msg.contains("received 1"),
        "{msg}"
    );
    let e = wrong(|pid| if pid == 0 { 2 } else { 1 });
    assert_eq!((e.kind(), e.path()), (ErrorKind::Misuse, &[0][..]), "{e}");
    assert!(
        e.to_string().contains("declare_incoming(2)") && e.to_string().contains("received 1"),
        "{e}"
    );
}

// ------------------------------------------------------------------------- coroutine runs
// A run whose processes take turns as coroutines makes its declared syncs at the barrier too
// (a few cache lines per thread there, against waits and acknowledgements per process), with
// the same checks as a run of two.

/// A run of `p` processes as coroutines on a machine of two hardware threads, as users get it:
/// declared syncs take the barrier.
fn coroutines<R: Send>(
    p: usize,
    f: impl Fn(&mut Ctx) -> mbsp::Result<R> + Sync,
) -> mbsp::Result<Vec<R>> {
    let two = mbsp::Machine::synthetic("package:1 core:2 pu:1").unwrap();
    mbsp::Run::new(p).machine(two).coroutines(true).run(f)
}

/// At p = 4 (two coroutines a thread, the dissemination barrier) and 16 (eight, the tree of
/// threads): declared syncs give what full syncs and the lazy protocol give.
#[test]
fn declared_syncs_of_coroutines_give_the_results_of_full_and_lazy_syncs() {
    within(120, || {
        for p in [4, 16] {
            let full = coroutines(p, |ctx| program(ctx, 40, false)).unwrap();
            let declared = coroutines(p, |ctx| program(ctx, 40, true)).unwrap();
            let two = mbsp::Machine::synthetic("package:1 core:2 pu:1").unwrap();
            let run = mbsp::Run::new(p).machine(two).coroutines(true);
            let protocol = run_of((false, 3), run)
                .run(|ctx| program(ctx, 40, true))
                .unwrap();
            assert_eq!(full, declared, "p = {p}");
            assert_eq!(full, protocol, "p = {p}");
        }
    });
}

/// Declared syncs of coroutines are barriers: no process starts superstep `s + 1` before
/// every process has started superstep `s`, even where nobody receives anything (the lazy
/// protocol would let a process that expects nothing run on at once).
#[test]
fn declared_syncs_of_coroutines_keep_the_processes_in_step() {
    within(60, || {
        let log = std::sync::Mutex::new(Vec::new());
        coroutines(16, |ctx| {
            for s in 0..4 {
                log.lock().unwrap().push(s);
                ctx.declare_incoming(0)?;
                ctx.sync()?;
            }
            Ok(())
        })
        .unwrap();
        let log = log.into_inner().unwrap();
        assert!(log.is_sorted(), "{log:?}");
    });
}

#[test]
fn coroutines_check_declared_counts_and_that_all_declare() {
    // Each process puts one word to the next in every superstep; in the last one, `declare`
    // gives what each declares (None: it does not declare).
    let wrong = |declare: fn(usize) -> Option<usize>| {
        within(60, move || {
            coroutines(16, move |ctx| {
                let p = ctx.nprocs();
                let x = ctx.push_reg(vec![0u64; 1])?;
                ctx.sync()?;
                for _ in 0..3 {
                    ctx.put((ctx.pid() + 1) % p, &[1], &x, 0)?;
                    ctx.declare_incoming(1)?;
                    ctx.sync()?;
                }
                ctx.put((ctx.pid() + 1) % p, &[1], &x, 0)?;
                if let Some(m) = declare(ctx.pid()) {
                    ctx.declare_incoming(m)?;
                }
                ctx.sync()?;
                Ok(())
            })
            .unwrap_err()
        })
    };
    for (pid, m) in [(5, 0), (11, 2)] {
        let e = wrong(if m == 0 {
            |pid| Some(usize::from(pid != 5))
        } else {
            |pid| Some(if pid == 11 { 2 } else { 1 })
        });
        assert_eq!(
            (e.kind(), e.op(), e.path()),
            (ErrorKind::Misuse, "sync", &[pid][..]),
            "{e}"
        );
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("declare_incoming({m}) in superstep 4"))
                && msg.contains("received 1"),
            "{msg}"
        );
    }
    let e = wrong(|pid| (pid != 3).then_some(1));
    assert_eq!(e.kind(), ErrorKind::Misuse, "{e}");
    assert!(
        e.to_string().contains("declare_incoming is collective"),
        "{e}"
    );
}

/// A large put's data waits in the sender's area for the receiver (`bulk.rs`); a sender that
/// runs ahead after a lazy sync must not overwrite it before the receiver has delivered it.
/// Process 1 sleeps before each sync, so process 0 makes its next large put while process 1
/// has not yet delivered the previous one.
#[test]
fn a_sender_ahead_of_its_receiver_never_overwrites_a_large_put_not_yet_delivered() {
    const N: usize = 300_000;
    for lanes in LANES {
        within(60, move || {
            let r = run_on(lanes, 2, |ctx| {
                let pid = ctx.pid();
                let x = ctx.push_reg(vec![0u8; N])?;
                ctx.sync()?;
                let mut firsts = Vec::new();
                for t in 1..=4u8 {
                    if pid == 0 {
                        ctx.put(1, &vec![t; N], &x, 0)?;
                        ctx.declare_incoming(0)?;
                    } else {
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        ctx.declare_incoming(1)?;
                    }
                    ctx.sync()?;
                    let got = ctx.local(&x)?;
                    firsts.push((got[0], got[N - 1], got.iter().all(|&b| b == got[0])));
                }
                Ok(firsts)
            })
            .unwrap();
            let want: Vec<_> = (1..=4u8).map(|t| (t, t, true)).collect();
            assert_eq!(r[1], want, "{lanes:?}");
        });
    }
}

/// A process's lazy-sync bookkeeping is kept for its next run on the same team (so that a
/// nested run allocates none of it) and made fresh there: runs after a failed lazy run, and
/// after a good one, give the results of full syncs.
#[test]
fn runs_after_a_failed_lazy_run_start_afresh() {
    for lanes in LANES {
        within(60, move || {
            for _ in 0..3 {
                let e = wrong_count_here(lanes, 3, |pid| if pid == 2 { 2 } else { 1 });
                assert_eq!(e.kind(), ErrorKind::Misuse, "{e}");
                let full = run_on(lanes, 3, |ctx| program(ctx, 20, false)).unwrap();
                let lazy = run_on(lanes, 3, |ctx| program(ctx, 20, true)).unwrap();
                let again = run_on(lanes, 3, |ctx| program(ctx, 20, true)).unwrap();
                assert_eq!((&full, &full), (&lazy, &again), "{lanes:?}");
            }
        });
    }
}

/// Large puts (through the sender's area, `bulk.rs`) and immediate gets, each of which waits on
/// the other process's count of completed syncs: every process puts 300 000 bytes to the next
/// one, and after the sync reads one word of the next one's array with `hpget`.
fn large_and_immediate(ctx: &mut Ctx, tag: u8) -> mbsp::Result<Vec<u64>> {
    const N: usize = 300_000;
    let (pid, p) = (ctx.pid(), ctx.nprocs());
    let next = (pid + 1) % p;
    let big = ctx.push_reg(vec![0u8; N])?;
    let word = ctx.push_reg(vec![pid as u64 * 100 + tag as u64])?;
    ctx.sync()?;
    ctx.put(next, &vec![tag ^ pid as u8; N], &big, 0)?;
    ctx.sync()?;
    let mut got = [0u64];
    // SAFETY: nobody writes `word` in this superstep.
    unsafe { ctx.hpget(next, &word, 0, &mut got)? };
    ctx.sync()?;
    let b = ctx.local(&big)?;
    Ok(vec![b[0] as u64, b[N - 1] as u64, got[0]])
}

/// A run on a reused run state counts on from the syncs, mode words and barrier episodes of
/// the run before when that one ended well (`done::Done`, `Barrier::reopen`), and starts them
/// again after a failed one. Nested runs of 3 on one team, of changing lengths (each starts at
/// another count and slot parity), lazy and full, with large puts and immediate gets, and
/// rounds that end with a failed nested run: each gives what the same program gives in a run
/// of threads of its own.
#[test]
fn nested_runs_on_a_reused_state_count_on_from_the_last() {
    for lanes in LANES {
        within(120, move || {
            let fresh = |steps: u64| {
                run_of(lanes, mbsp::Run::new(3).reuse_threads(false))
                    .run(|ctx| {
                        let mut log = program(ctx, steps, false)?;
                        log.extend(large_and_immediate(ctx, steps as u8)?);
                        Ok(log)
                    })
                    .unwrap()
            };
            let want: Vec<_> = (1..=5).map(fresh).collect();
            for round in 0..3 {
                mbsp::run(1, |ctx| {
                    for k in 0..8u64 {
                        let steps = 1 + (k * 3 + round) % 5;
                        let got = ctx.run_with(run_of(lanes, mbsp::Run::new(3)), |n| {
                            let mut log = program(n, steps, k % 2 == 1)?;
                            log.extend(large_and_immediate(n, steps as u8)?);
                            Ok(log)
                        })?;
                        assert_eq!(
                            got,
                            want[steps as usize - 1],
                            "{lanes:?} round {round} run {k}"
                        );
                    }
                    Ok(())
                })
                .unwrap();
                // A nested run that fails (a wrong count) on the same team's state.
                let e = mbsp::run(1, |ctx| {
                    ctx.run_with(run_of(lanes, mbsp::Run::new(3)), |n| {
                        program(n, 2, true)?;
                        n.declare_incoming(if n.pid() == 2 { 1 } else { 0 })?;
                        n.sync()
                    })
                })
                .unwrap_err();
                assert_eq!(e.kind(), ErrorKind::Misuse, "{e}");
            }
        });
    }
}

/// The barrier's words are not reset between runs that ended well: a run that follows one of
/// a single episode (its end) waits in its first episode for a process that comes late, as
/// the episodes count on (an episode counted from zero again would find the word the run
/// before left, and pass).
#[test]
fn a_run_after_a_short_one_waits_for_a_late_process() {
    within(60, || {
        mbsp::run(1, |ctx| {
            for _ in 0..5 {
                ctx.run(3, |_| Ok(()))?;
                let got = ctx.run(3, |n| {
                    let x = n.push_reg(vec![0u64; 1])?;
                    n.sync()?;
                    if n.pid() == 2 {
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        n.put(0, &[7u64], &x, 0)?;
                    }
                    n.sync()?;
                    Ok(n.local(&x)?[0])
                })?;
                assert_eq!(got, vec![7, 0, 0]);
            }
            Ok(())
        })
        .unwrap();
    });
}
