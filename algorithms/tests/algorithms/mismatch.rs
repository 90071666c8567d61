//! Collectives called differently by different processes end the run with a clear error — never
//! a hang or wrong data.

use crate::common;

use common::within;
use mbsp::{Ctx, ErrorKind};
use mbsp_algorithms::collectives::{self as coll, Algorithm, Collectives, Comm};

/// Run `f` on `p` processes and expect a misuse error whose text contains every needle.
fn expect_misuse(p: usize, needles: &'static [&'static str], f: fn(&mut Ctx) -> mbsp::Result<()>) {
    let e = within(60, move || mbsp::run(p, f)).expect_err("the run must fail");
    assert_eq!(e.kind(), ErrorKind::Misuse, "{e}");
    let text = e.to_string();
    for n in needles {
        assert!(text.contains(n), "{text:?} should mention {n:?}");
    }
}

/// Run `f` on `p` processes and expect a misuse error whose text contains every needle of one
/// of the `alternatives` (which side of a mismatch notices it first may vary).
fn expect_misuse_any(p: usize, alternatives: &'static [&'static [&'static str]], f: Program) {
    let e = within(60, move || mbsp::run(p, f)).expect_err("the run must fail");
    assert_eq!(e.kind(), ErrorKind::Misuse, "{e}");
    let text = e.to_string();
    assert!(
        alternatives
            .iter()
            .any(|needles| needles.iter().all(|n| text.contains(n))),
        "{text:?} should mention all of one of {alternatives:?}"
    );
}

#[test]
fn different_roots() {
    expect_misuse(3, &["broadcast"], |ctx| {
        let root = usize::from(ctx.pid() == 1);
        let mut b = [ctx.pid() as u64; 4];
        coll::broadcast(ctx, root, &mut b)
    });
    // Each thinks the other is the root: neither sends data, but each sends its header.
    expect_misuse(
        2,
        &["broadcast", "disagree", "with root 0", "with root 1"],
        |ctx| {
            let root = 1 - ctx.pid();
            let mut b = [0u8; 3];
            coll::broadcast(ctx, root, &mut b)
        },
    );
    expect_misuse(3, &["reduce", "root"], |ctx| {
        let mut b = [1u32];
        coll::reduce(ctx, ctx.pid() % 2, &mut b, |a, b| a + b)
    });
    expect_misuse(4, &["broadcast", "disagree", "root 2", "root 0"], |ctx| {
        let root = if ctx.pid() == 3 { 2 } else { 0 };
        let mut b = vec![0u64; 100];
        Collectives::default()
            .algorithm(Algorithm::TwoPhase)
            .broadcast(ctx, root, &mut b)
    });
}

#[test]
fn different_lengths() {
    expect_misuse(
        2,
        &["allreduce", "disagree", "on 3 elements", "on 4 elements"],
        |ctx| {
            let mut b = vec![1.0f64; 3 + ctx.pid()];
            coll::allreduce(ctx, &mut b, |a, b| a + b)
        },
    );
    expect_misuse(
        3,
        &[
            "allreduce",
            "disagree",
            "on 1000 elements",
            "on 1001 elements",
        ],
        |ctx| {
            let mut b = vec![1u64; 1000 + usize::from(ctx.pid() == 2)];
            Collectives::default()
                .algorithm(Algorithm::TwoPhase)
                .allreduce(ctx, &mut b, |a, b| a + b)
        },
    );
    expect_misuse(2, &["scan_inclusive", "disagree"], |ctx| {
        let mut b = vec![1i32; 10 * (1 + ctx.pid())];
        coll::scan_inclusive(ctx, &mut b, |a, b| a + b)
    });
    expect_misuse(3, &["alltoall", "disagree"], |ctx| {
        let k = if ctx.pid() == 0 { 2 } else { 1 };
        coll::alltoall(ctx, &vec![0u8; 3 * k]).map(drop)
    });
}

/// Lengths on both sides of the automatic choice: one process registers, the other sends.
#[test]
fn lengths_that_choose_different_algorithms() {
    let e = within(60, || {
        mbsp::run(4, |ctx| {
            let n = if ctx.pid() == 0 { 1 } else { 1 << 16 };
            let mut b = vec![0u64; n];
            coll::broadcast(ctx, 0, &mut b)
        })
    })
    .expect_err("the run must fail");
    assert_eq!(e.kind(), ErrorKind::Misuse, "{e}");
}

#[test]
fn different_operations_and_types() {
    expect_misuse(
        2,
        &["disagree", "broadcast with root 0", "allreduce"],
        |ctx| {
            let mut b = [0u64; 2];
            if ctx.pid() == 0 {
                coll::broadcast(ctx, 0, &mut b)
            } else {
                coll::allreduce(ctx, &mut b, |a, b| a + b)
            }
        },
    );
    expect_misuse(
        2,
        &["allgather", "disagree", "u32 (4 bytes)", "u64 (8 bytes)"],
        |ctx| {
            if ctx.pid() == 0 {
                coll::allgather(ctx, &[1u32]).map(drop)
            } else {
                coll::allgather(ctx, &[1u64]).map(drop)
            }
        },
    );
    // One process syncs instead of calling the collective.
    expect_misuse(
        2,
        &[
            "allreduce",
            "pid 1 sent pid 0 no message in this superstep",
            "pid 0 called allreduce on 1 elements of u64",
        ],
        |ctx| {
            if ctx.pid() == 0 {
                coll::allreduce_value(ctx, 1u64, |a, b| a + b).map(drop)
            } else {
                ctx.sync()?;
                ctx.sync()
            }
        },
    );
}

/// Calls in which one process has nothing to send the other (a broadcast's non-root, a
/// reduction's or gather's root, a scatter's non-root): whichever process notices the mismatch
/// first, the error names both calls, for it has the other's header. Repeated, for either side
/// may notice first.
#[test]
fn the_error_names_both_calls_whoever_notices() {
    type Case = (&'static [&'static str], Program);
    let cases: [Case; 4] = [
        (
            &[
                "disagree",
                "called allreduce on 2 elements of u64",
                "called broadcast with root 0 on 2 elements of u64",
            ],
            |ctx| {
                let mut b = [1u64; 2];
                if ctx.pid() == 0 {
                    coll::allreduce(ctx, &mut b, |a, b| a + b)
                } else {
                    coll::broadcast(ctx, 0, &mut b)
                }
            },
        ),
        (
            &[
                "disagree",
                "called reduce with root 0 on 2 elements of u64",
                "called broadcast with root 0 on 2 elements of u64",
            ],
            |ctx| {
                let mut b = [1u64; 2];
                if ctx.pid() == 0 {
                    coll::reduce(ctx, 0, &mut b, |a, b| a + b)
                } else {
                    coll::broadcast(ctx, 0, &mut b)
                }
            },
        ),
        (
            &[
                "disagree",
                "called gather with root 0",
                "called scatter with root 0",
            ],
            |ctx| {
                if ctx.pid() == 0 {
                    coll::gather(ctx, 0, &[1u32]).map(drop)
                } else {
                    coll::scatter::<u32>(ctx, 0, &[]).map(drop)
                }
            },
        ),
        (
            &[
                "disagree",
                "called scan_exclusive on 1 elements of i64",
                "called gather with root 2",
            ],
            |ctx| {
                if ctx.pid() == 2 {
                    coll::gather(ctx, 2, &[1i64]).map(drop)
                } else {
                    coll::scan_exclusive(ctx, &mut [1i64], 0, |a, b| a + b)
                }
            },
        ),
    ];
    for (i, (needles, f)) in cases.into_iter().enumerate() {
        let p = if i == 3 { 3 } else { 2 };
        for _ in 0..20 {
            expect_misuse(p, needles, f);
        }
    }
}

#[test]
fn bad_arguments() {
    expect_misuse(
        3,
        &["broadcast", "root 5 is not a pid", "3 processes"],
        |ctx| coll::broadcast(ctx, 5, &mut [0u8; 1]),
    );
    expect_misuse(3, &["alltoall", "do not split into 3"], |ctx| {
        coll::alltoall(ctx, &[0u8; 4]).map(drop)
    });
    expect_misuse(2, &["alltoallv", "counts summing to"], |ctx| {
        coll::alltoallv(ctx, &[0u8; 4], &[1, 1]).map(drop)
    });
    expect_misuse(2, &["scatter", "counts summing to 3"], |ctx| {
        if ctx.pid() == 0 {
            coll::scatterv(ctx, 0, &[1u8, 2, 3, 4], &[1, 2]).map(drop)
        } else {
            coll::scatterv::<u8>(ctx, 0, &[], &[]).map(drop)
        }
    });
}

#[test]
fn messages_sent_before_the_call() {
    expect_misuse(2, &["allreduce", "not sent by this collective"], |ctx| {
        let other = 1 - ctx.pid();
        ctx.send(other, &[], b"user data")?;
        coll::allreduce_value(ctx, 1u64, |a, b| a + b).map(drop)
    });
}

#[test]
fn comm_calls_that_do_not_match() {
    expect_misuse(
        2,
        &["allreduce", "disagree", "on 1 elements", "on 2 elements"],
        |ctx| {
            let mut comm = Comm::new(ctx)?;
            let mut b = vec![1u64; 1 + ctx.pid()];
            comm.allreduce(ctx, &mut b, |a, b| a + b)
        },
    );
    expect_misuse(3, &["broadcast", "disagree", "root 1"], |ctx| {
        let mut comm = Comm::new(ctx)?;
        let mut b = [0u32; 2];
        comm.broadcast(ctx, usize::from(ctx.pid() == 2), &mut b)
    });
    // pid 1 skips the first all-reduce: with full syncs the call counters differ; with lazy
    // ones the runtime reports pid 1's full sync.
    expect_misuse(
        2,
        &[
            "allreduce",
            "disagree",
            "pid 1 made no call of this Comm",
            "call 1",
        ],
        skip_first::<false>,
    );
    expect_misuse(2, LAZY_MEETS_FULL, skip_first::<true>);
    // pid 0's scan reads no data, but it checks pid 1's header as pid 1 checks pid 0's.
    expect_misuse(
        2,
        &["disagree", "called scan_inclusive", "called allreduce"],
        |ctx| {
            let mut comm = Comm::new(ctx)?;
            let mut b = [1i64];
            if ctx.pid() == 0 {
                comm.scan_inclusive(ctx, &mut b, |a, b| a + b)
            } else {
                comm.allreduce(ctx, &mut b, |a, b| a + b)
            }
        },
    );
}

/// A run of 32 processes or more that take turns on their hardware threads all-reduces through
/// a `Comm` in two supersteps (process 0 gathers, then spreads the result), and broadcasts and
/// reduces with headers to and from the root only: a mismatch is named by the root, which
/// checks every header, or by a process that checks the root's; with lazy syncs a skipped call
/// is the runtime's lazy-meets-full error.
#[test]
fn comm_calls_that_do_not_match_in_oversubscribed_runs() {
    let p = 33.max(2 * mbsp::nprocs() + 1);
    expect_misuse(
        p,
        &[
            "allreduce",
            "disagree",
            "f64 (8 bytes)",
            "i64 (8 bytes)",
            "pid 5",
        ],
        |ctx| {
            let mut comm = Comm::new(ctx)?;
            if ctx.pid() == 5 {
                comm.allreduce_value(ctx, 1i64, |a, b| a + b).map(drop)
            } else {
                comm.allreduce_value(ctx, 1.0f64, |a, b| a + b).map(drop)
            }
        },
    );
    expect_misuse(
        p,
        &["allreduce", "disagree", "on 1 elements", "on 2 elements"],
        |ctx| {
            let mut comm = Comm::new(ctx)?;
            let mut b = vec![1u64; 1 + usize::from(ctx.pid() == 0)];
            comm.allreduce(ctx, &mut b, |a, b| a + b)
        },
    );
    expect_misuse(
        p,
        &["allreduce", "pid 7 made no call of this Comm"],
        |ctx| {
            let mut comm = Comm::new(ctx)?;
            if ctx.pid() == 7 {
                return ctx.sync();
            }
            comm.allreduce_value(ctx, 1u64, |a, b| a + b).map(drop)
        },
    );
    expect_misuse(
        p,
        &["allreduce", "skipped or added"],
        skip_allreduce::<false, 1>,
    );
    expect_misuse(p, LAZY_MEETS_FULL, skip_allreduce::<true, 1>);
    // Process 0 skips with a full sync: the others declared nothing in the first superstep
    // and wait for its result in the second (they must not hang).
    expect_misuse(p, LAZY_MEETS_FULL, skip_allreduce::<true, 0>);
    // Rooted calls: another root (its header went elsewhere), another operation, a length.
    expect_misuse(
        p,
        &["broadcast", "made no call", "name", "another root"],
        |ctx| {
            let mut comm = Comm::new(ctx)?;
            let mut b = [0u32; 2];
            comm.broadcast(ctx, usize::from(ctx.pid() == 2), &mut b)
        },
    );
    expect_misuse_any(
        p,
        &[
            &["disagree", "called broadcast", "called reduce"],
            &["made no call", "another of them"],
        ],
        |ctx| {
            let mut comm = Comm::new(ctx)?;
            let mut b = [1u64; 2];
            if ctx.pid() == 9 {
                comm.broadcast(ctx, 3, &mut b)
            } else {
                comm.reduce(ctx, 3, &mut b, |a, b| a + b)
            }
        },
    );
    expect_misuse(
        p,
        &["reduce", "disagree", "on 1 elements", "on 2 elements"],
        |ctx| {
            let mut comm = Comm::new(ctx)?;
            let mut b = vec![1u64; 1 + usize::from(ctx.pid() == 11)];
            comm.reduce(ctx, 4, &mut b, |a, b| a + b)
        },
    );
    // Process 0, which gathers, skips the third call: the others find no result of it.
    expect_misuse_any(
        p,
        &[
            &["allreduce", "skipped or added"],
            &["allreduce", "pid 0 made no call"],
        ],
        skip_allreduce::<false, 0>,
    );
    // All-gathers relay through process 0: it names a type that differs and a call another
    // process skipped; the receivers of its relay name a call it skipped.
    expect_misuse(
        p,
        &[
            "allgather",
            "disagree",
            "f32 (4 bytes)",
            "u32 (4 bytes)",
            "pid 6",
        ],
        |ctx| {
            let mut comm = Comm::new(ctx)?;
            if ctx.pid() == 6 {
                comm.allgather(ctx, &[1.0f32], 1).map(drop)
            } else {
                comm.allgather(ctx, &[1u32], 1).map(drop)
            }
        },
    );
    expect_misuse(
        p,
        &["allgather", "skipped or added", "pid 5"],
        skip_allgather::<false, 5>,
    );
    expect_misuse(
        p,
        &["allgather", "skipped or added", "pid 0 made 2"],
        skip_allgather::<false, 0>,
    );
    expect_misuse(p, LAZY_MEETS_FULL, skip_allgather::<true, 0>);
}

/// Runs of 8 or more processes as coroutines gather as runs of 32 on threads do: a broadcast
/// that names another root at one process is reported with the gathering runs' hint (its
/// header went to that root only), where a run of threads of fewer than 32 checks every header.
#[test]
fn comm_in_coroutine_runs_of_eight_sends_headers_to_the_root_only() {
    let p = 8.max(2 * mbsp::nprocs() + 1);
    let other_root: Program = |ctx| {
        let mut comm = Comm::new(ctx)?;
        let mut b = [0u32; 2];
        comm.broadcast(ctx, usize::from(ctx.pid() == 2), &mut b)
    };
    let fail = |coroutines: bool| {
        let e = within(60, move || {
            mbsp::Run::new(p).coroutines(coroutines).run(other_root)
        })
        .expect_err("the run must fail");
        assert_eq!(e.kind(), ErrorKind::Misuse, "{e}");
        e.to_string()
    };
    let text = fail(true);
    for n in [
        "broadcast",
        "made no call",
        "or 8 or more as coroutines",
        "another root",
    ] {
        assert!(text.contains(n), "{text:?} should mention {n:?}");
    }
    if p < 32 {
        let text = fail(false);
        assert!(
            text.contains("broadcast") && !text.contains("another root"),
            "{text:?}"
        );
    }
}

/// Element types of the same size: the headers carry the type, not only its size.
#[test]
fn element_types_of_one_size() {
    expect_misuse(
        2,
        &["allreduce", "disagree", "f64 (8 bytes)", "u64 (8 bytes)"],
        |ctx| {
            if ctx.pid() == 0 {
                coll::allreduce(ctx, &mut [1.0f64; 4], |a, b| a + b)
            } else {
                coll::allreduce(ctx, &mut [1u64; 4], |a, b| a + b)
            }
        },
    );
    expect_misuse(
        2,
        &["allreduce", "disagree", "i32 (4 bytes)", "f32 (4 bytes)"],
        |ctx| {
            let two = Collectives::default().algorithm(Algorithm::TwoPhase);
            if ctx.pid() == 0 {
                two.allreduce(ctx, &mut vec![1.0f32; 1000], |a, b| a + b)
            } else {
                two.allreduce(ctx, &mut vec![1i32; 1000], |a, b| a + b)
            }
        },
    );
    expect_misuse(
        3,
        &["allreduce", "disagree", "f64 (8 bytes)", "i64 (8 bytes)"],
        |ctx| {
            let mut comm = Comm::new(ctx)?;
            if ctx.pid() == 2 {
                comm.allreduce_value(ctx, 1i64, |a, b| a + b).map(drop)
            } else {
                comm.allreduce_value(ctx, 1.0f64, |a, b| a + b).map(drop)
            }
        },
    );
}

/// The runtime's error for a process that makes a full sync where the others make the lazy sync
/// of a `Comm` collective (or the other way round), whichever side notices it first.
const LAZY_MEETS_FULL: &[&str] = &["full sync", "lazy one", "declare_incoming is collective"];

/// A `Comm` call skipped by one process (which syncs instead) is a named mismatch in that very
/// call on the processes that made it, whatever the operation reads: no call returns data of
/// another call (the processes check their results, so data of another call would end the run
/// with a panic, not a misuse error). With full syncs the `Comm`'s header check names the
/// skipped call; with lazy syncs the runtime reports the full sync that met the
/// collective's lazy one.
#[test]
fn comm_call_skipped_by_one_process() {
    for p in [2, 3] {
        expect_misuse(
            p,
            &["allreduce", "skipped or added"],
            skip_allreduce::<false, 1>,
        );
        expect_misuse(p, LAZY_MEETS_FULL, skip_allreduce::<true, 1>);
        // Scans: pid 0 reads no data in an inclusive scan, the last pid sends none.
        for skipper in [0, p - 1] {
            let (full, lazy): (Program, Program) = match skipper {
                0 => (skip_scan::<0, false>, skip_scan::<0, true>),
                1 => (skip_scan::<1, false>, skip_scan::<1, true>),
                _ => (skip_scan::<2, false>, skip_scan::<2, true>),
            };
            expect_misuse(p, &["scan_inclusive", "skipped or added"], full);
            expect_misuse(p, LAZY_MEETS_FULL, lazy);
        }
        // Broadcast: the root reads nothing.
        expect_misuse(
            p,
            &["broadcast", "skipped or added"],
            skip_broadcast::<false>,
        );
        expect_misuse(p, LAZY_MEETS_FULL, skip_broadcast::<true>);
    }
}

type Program = fn(&mut Ctx) -> mbsp::Result<()>;

/// A `Comm` whose small collectives end with lazy syncs or not.
fn comm_of(ctx: &mut Ctx, lazy: bool) -> mbsp::Result<Comm> {
    let mut comm = Comm::new(ctx)?;
    comm.set_lazy(lazy);
    Ok(comm)
}

/// pid 1 syncs where pid 0 makes its first all-reduce.
fn skip_first<const LAZY: bool>(ctx: &mut Ctx) -> mbsp::Result<()> {
    let mut comm = comm_of(ctx, LAZY)?;
    if ctx.pid() == 0 {
        comm.allreduce_value(ctx, 1u64, |a, b| a + b)?;
    } else {
        ctx.sync()?;
    }
    comm.allreduce_value(ctx, 1u64, |a, b| a + b).map(drop)
}

/// All-reduces of the call number, in which pid `WHO` skips call 2 (and syncs instead).
fn skip_allreduce<const LAZY: bool, const WHO: usize>(ctx: &mut Ctx) -> mbsp::Result<()> {
    let (me, p) = (ctx.pid(), ctx.nprocs() as u64);
    let mut comm = comm_of(ctx, LAZY)?;
    for i in 0..6u64 {
        if me == WHO && i == 2 {
            ctx.sync()?;
            continue;
        }
        let got = comm.allreduce_value(ctx, i, |a, b| a + b)?;
        assert_eq!(got, i * p, "pid {me}, call {i}: data of another call");
    }
    Ok(())
}

/// All-gathers of the call number, in which pid `WHO` skips call 2 (and syncs instead).
fn skip_allgather<const LAZY: bool, const WHO: usize>(ctx: &mut Ctx) -> mbsp::Result<()> {
    let (me, p) = (ctx.pid(), ctx.nprocs());
    let mut comm = comm_of(ctx, LAZY)?;
    for i in 0..6u64 {
        if me == WHO && i == 2 {
            ctx.sync()?;
            continue;
        }
        let got = comm.allgather(ctx, &[i], 1)?;
        assert_eq!(
            got.as_slice(),
            vec![i; p],
            "pid {me}, call {i}: data of another call"
        );
    }
    Ok(())
}

/// Broadcasts of the call number from pid 0, which skips call 1 (and syncs instead).
fn skip_broadcast<const LAZY: bool>(ctx: &mut Ctx) -> mbsp::Result<()> {
    let me = ctx.pid();
    let mut comm = comm_of(ctx, LAZY)?;
    for i in 0..4u32 {
        if me == 0 && i == 1 {
            ctx.sync()?;
            continue;
        }
        let mut b = [if me == 0 { i } else { u32::MAX }];
        comm.broadcast(ctx, 0, &mut b)?;
        assert_eq!(b[0], i, "pid {me}, call {i}: data of another call");
    }
    Ok(())
}

/// A skipped call followed by calls of the same shape cannot be told from a call with other
/// data (the calls pair up in order, as syncs do): the run ends when one process has made
/// more calls than another, with the end-of-run mismatch naming both sides (full syncs), or the
/// runtime's report of a count that cannot be met at the final sync (lazy syncs).
#[test]
fn comm_call_skipped_in_a_loop_of_equal_calls() {
    expect_misuse(
        2,
        &["returned from the SPMD function", "called sync"],
        skip_in_loop::<false>,
    );
    expect_misuse_any(
        2,
        &[
            LAZY_MEETS_FULL,
            &["returned from the SPMD function", "called sync"],
            &["called declare_incoming(1)", "received 0"],
        ],
        skip_in_loop::<true>,
    );
}

fn skip_in_loop<const LAZY: bool>(ctx: &mut Ctx) -> mbsp::Result<()> {
    let me = ctx.pid();
    let mut comm = comm_of(ctx, LAZY)?;
    for i in 0..6u64 {
        if me == 1 && i == 2 {
            continue;
        }
        comm.allreduce_value(ctx, i, |a, b| a + b)?;
    }
    Ok(())
}

/// A put of the caller's own left pending before a lazy `Comm` call: the receiver gets one
/// record more than the `p - 1` headers it declared, and the runtime's count error says so.
/// With full syncs the put is delivered by the collective's sync, as by any sync.
#[test]
fn a_put_pending_before_a_comm_call() {
    expect_misuse(
        2,
        &["called declare_incoming(1)", "received 2 puts/messages"],
        put_before_allreduce::<true>,
    );
    within(60, || mbsp::run(2, put_before_allreduce::<false>)).unwrap();
}

fn put_before_allreduce<const LAZY: bool>(ctx: &mut Ctx) -> mbsp::Result<()> {
    let mut comm = comm_of(ctx, LAZY)?;
    let x = ctx.push_reg(vec![0u64; 1])?;
    ctx.sync()?;
    let other = 1 - ctx.pid();
    ctx.put(other, &[5u64], &x, 0)?;
    let sum = comm.allreduce_value(ctx, 1u64, |a, b| a + b)?;
    assert_eq!((sum, ctx.local(&x)?[0]), (2, 5));
    Ok(())
}

/// Inclusive scans of the call number, in which pid `SKIP` skips call 1 (and syncs instead).
fn skip_scan<const SKIP: usize, const LAZY: bool>(ctx: &mut Ctx) -> mbsp::Result<()> {
    let me = ctx.pid();
    let mut comm = comm_of(ctx, LAZY)?;
    for i in 0..4u64 {
        if me == SKIP && i == 1 {
            ctx.sync()?;
            continue;
        }
        let mut b = [i];
        comm.scan_inclusive(ctx, &mut b, |a, b| a + b)?;
        assert_eq!(
            b[0],
            i * (me as u64 + 1),
            "pid {me}, call {i}: data of another call"
        );
    }
    Ok(())
}
