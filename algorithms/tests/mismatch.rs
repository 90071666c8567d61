//! Collectives called differently by different processes end the run with a clear error — never
//! a hang or wrong data.

mod common;

use common::within;
use mbsp::{Ctx, ErrorKind};
use mbsp_algorithms::collectives::{self as coll, Algorithm, Collectives};

/// Run `f` on `p` processes and expect a misuse error whose text contains every needle.
fn expect_misuse(p: usize, needles: &'static [&'static str], f: fn(&mut Ctx) -> mbsp::Result<()>) {
    let e = within(60, move || mbsp::run(p, f)).expect_err("the run must fail");
    assert_eq!(e.kind(), ErrorKind::Misuse, "{e}");
    let text = e.to_string();
    for n in needles {
        assert!(text.contains(n), "{text:?} should mention {n:?}");
    }
}

#[test]
fn different_roots() {
    expect_misuse(3, &["broadcast"], |ctx| {
        let root = usize::from(ctx.pid() == 1);
        let mut b = [ctx.pid() as u64; 4];
        coll::broadcast(ctx, root, &mut b)
    });
    expect_misuse(2, &["broadcast", "expected data from pid"], |ctx| {
        let root = 1 - ctx.pid(); // each thinks the other is the root: nobody sends
        let mut b = [0u8; 3];
        coll::broadcast(ctx, root, &mut b)
    });
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
        &["allgather", "disagree", "of 4 bytes", "of 8 bytes"],
        |ctx| {
            if ctx.pid() == 0 {
                coll::allgather(ctx, &[1u32]).map(drop)
            } else {
                coll::allgather(ctx, &[1u64]).map(drop)
            }
        },
    );
    // One process syncs instead of calling the collective.
    expect_misuse(2, &["allreduce", "expected data from pid 1"], |ctx| {
        if ctx.pid() == 0 {
            coll::allreduce_value(ctx, 1u64, |a, b| a + b).map(drop)
        } else {
            ctx.sync()?;
            ctx.sync()
        }
    });
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
    use mbsp_algorithms::collectives::Comm;
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
    // pid 1 skips the first all-reduce: the call counters differ.
    expect_misuse(
        2,
        &["allreduce", "disagree", "pid 1 sent nothing", "call 1"],
        |ctx| {
            let mut comm = Comm::new(ctx)?;
            if ctx.pid() == 0 {
                comm.allreduce_value(ctx, 1u64, |a, b| a + b)?;
            } else {
                ctx.sync()?;
            }
            comm.allreduce_value(ctx, 1u64, |a, b| a + b).map(drop)
        },
    );
    // pid 0's scan reads nothing; pid 1's all-reduce finds pid 0's scan in its slot.
    expect_misuse(
        2,
        &["allreduce", "disagree", "pid 0 called scan_inclusive"],
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
