//! `Ctx::lending`: memory a process lends to the others is never freed while another process
//! still copies from it, whether the lender panics or returns an error in the middle — and the
//! run ends with the lender's panic or error as its root cause, nothing hung.
//!
//! The lender waits until the reader is inside a large `direct_get` of its buffer (a copy of
//! many milliseconds), then fails. Without the scope's wait, the buffer is unmapped under the
//! reader's copy and the test process dies of a segmentation fault.

use crate::common;

use common::within;
use mbsp::{Ctx, ErrorKind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Bytes lent: large enough to be a mapping of its own and to take milliseconds to copy.
const LEN: usize = 64 << 20;

/// How the lender leaves its scope while pid 1 copies from its buffer.
#[derive(Clone, Copy)]
enum Leave {
    Panic,
    Error,
}

/// Pid 0 lends a buffer, pid 1 copies it with one `direct_get`; once pid 1 has started, pid 0
/// leaves the scope by `leave`.
fn lend_and_leave(ctx: &mut Ctx, leave: Leave, copying: &AtomicBool) -> mbsp::Result<()> {
    let me = ctx.pid();
    let mut mine = vec![me as u8 + 1; LEN];
    let mut into = vec![0u8; if me == 1 { LEN } else { 0 }];
    ctx.lending(|ctx, _lent| {
        let at = mine.as_mut_ptr();
        // SAFETY: `mine` outlives the scope; the scope pops it and syncs before it ends
        // normally and waits for every process before an error or a panic leaves it.
        unsafe { ctx.push_reg_raw(at, LEN)? };
        ctx.sync()?;
        if me == 1 {
            copying.store(true, Ordering::SeqCst);
            // SAFETY: nobody writes pid 0's buffer in this superstep; `into` is private.
            unsafe { ctx.direct_get_raw(0, at, 0, into.as_mut_ptr(), LEN)? };
        } else {
            while !copying.load(Ordering::SeqCst) {
                std::hint::spin_loop();
            }
            // Let the reader get well into its copy.
            std::thread::sleep(Duration::from_millis(2));
            match leave {
                Leave::Panic => panic!("lender panics mid-copy"),
                Leave::Error => return Err(ctx.abort("lender gives up mid-copy")),
            }
        }
        ctx.pop_reg_raw(at)?;
        ctx.sync()
    })?;
    drop(mine);
    Ok(())
}

fn run_leaving(leave: Leave) -> mbsp::Error {
    within(120, move || {
        let copying = Arc::new(AtomicBool::new(false));
        mbsp::run(2, move |ctx| lend_and_leave(ctx, leave, &copying))
    })
    .expect_err("the run must fail")
}

/// Runs per case; one under scripts/memcheck (`MBSP_TEST_MEMCHECK`).
fn rounds() -> usize {
    if std::env::var_os("MBSP_TEST_MEMCHECK").is_some() {
        1
    } else {
        5
    }
}

#[test]
fn a_panic_waits_for_the_reader() {
    for _ in 0..rounds() {
        let e = run_leaving(Leave::Panic);
        assert_eq!(e.kind(), ErrorKind::Panic, "{e}");
        assert_eq!(e.pid(), Some(0), "{e}");
        assert!(e.to_string().contains("lender panics mid-copy"), "{e}");
    }
}

#[test]
fn an_error_waits_for_the_reader() {
    for _ in 0..rounds() {
        let e = run_leaving(Leave::Error);
        assert_eq!(e.kind(), ErrorKind::Abort, "{e}");
        assert_eq!(e.pid(), Some(0), "{e}");
        assert!(e.to_string().contains("lender gives up mid-copy"), "{e}");
    }
}

/// The normal path: a lent buffer read by everyone, popped, and the scope's value returned.
#[test]
fn lending_returns_the_value() {
    let got = within(60, || {
        mbsp::run(3, |ctx| {
            let mut mine = [ctx.pid() as u32 * 10; 8];
            ctx.lending(|ctx, _lent| {
                let at = mine.as_mut_ptr().cast::<u8>();
                // SAFETY: as above.
                unsafe { ctx.push_reg_raw(at, 32)? };
                ctx.sync()?;
                let mut sum = 0;
                for q in 0..ctx.nprocs() {
                    let mut x = [0u32; 1];
                    // SAFETY: nobody writes the lent buffers.
                    unsafe { ctx.direct_get_raw(q, at, 4 * q, x.as_mut_ptr().cast(), 4)? };
                    sum += x[0];
                }
                ctx.pop_reg_raw(at)?;
                ctx.sync()?;
                Ok(sum)
            })
        })
    })
    .unwrap();
    assert_eq!(got, vec![30; 3]);
}
