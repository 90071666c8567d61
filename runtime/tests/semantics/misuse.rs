//! Every misuse gets a clear error naming the operation, the process, the superstep and the
//! values; the run ends promptly (no hang, all threads joined) and `run` returns the error.
//! On the engine the harness selects (`common/engine.rs`): over MPI ranks, every rank must
//! return the same error as the thread engine does.

use crate::common;
use common::{expect_err, run, within};
use mbsp::Ctx;
use mbsp::ErrorKind::{Abort, Misuse, Panic};

#[test]
fn put_and_get_through_a_popped_registration() {
    if common::needs_procs(3) {
        return;
    }
    within(60, || {
        let r = run(3, |ctx| {
            let x = ctx.push_reg(vec![0u32; 4])?;
            ctx.sync()?;
            ctx.pop_reg(&x)?;
            ctx.put(0, &[1], &x, 0)?; // still allowed in the superstep of the pop
            ctx.sync()?;
            if ctx.pid() == 1 {
                ctx.put(2, &[1], &x, 0)?;
            }
            ctx.sync()?;
            Ok(())
        });
        expect_err(
            r,
            Misuse,
            "put",
            Some(1),
            Some(2),
            &["popped in an earlier superstep"],
        );

        let r = run(2, |ctx| {
            let x = ctx.push_reg(vec![0u32; 4])?;
            let y = ctx.push_reg(vec![0u32; 4])?;
            ctx.sync()?;
            ctx.pop_reg(&x)?;
            ctx.sync()?;
            ctx.get(1, &x, 0..1, &y, 0)?;
            Ok(())
        });
        expect_err(r, Misuse, "get", None, Some(2), &["popped"]);
    });
}

#[test]
fn raw_put_and_get_of_an_unregistered_address() {
    within(60, || {
        let r = run(2, |ctx| {
            let buf = [0u8; 8];
            if ctx.pid() == 0 {
                ctx.put_raw(1, &[1, 2], buf.as_ptr(), 0)?;
            }
            ctx.sync()?;
            Ok(())
        });
        expect_err(r, Misuse, "put", Some(0), Some(0), &["is not registered"]);

        let r = run(2, |ctx| {
            let mut buf = [0u8; 8];
            // SAFETY: never executed past the error; `buf` outlives the call.
            unsafe { ctx.get_raw(1 - ctx.pid(), buf.as_ptr(), 0, buf.as_mut_ptr(), 4)? };
            ctx.sync()?;
            Ok(buf[0])
        });
        expect_err(r, Misuse, "get", None, Some(0), &["is not registered"]);
    });
}

#[test]
fn offset_plus_length_beyond_the_remote_registration() {
    if common::needs_procs(3) {
        return;
    }
    within(60, || {
        // pid i registers i + 1 elements of u64.
        let r = run(3, |ctx| {
            let x = ctx.push_reg(vec![0u64; ctx.pid() + 1])?;
            ctx.sync()?;
            if ctx.pid() == 0 {
                ctx.put(2, &[1, 2], &x, 1)?; // fine: 8 + 16 <= 24
                ctx.put(1, &[1, 2], &x, 1)?; // 8 + 16 > 16
            }
            ctx.sync()?;
            Ok(())
        });
        expect_err(
            r,
            Misuse,
            "put",
            Some(0),
            Some(1),
            &["to pid 1: offset 8 + 16 bytes exceeds the 16 bytes pid 1 registered"],
        );

        let r = run(2, |ctx| {
            let x = ctx.push_reg(vec![0u8; 10 * (ctx.pid() + 1)])?;
            ctx.sync()?;
            if ctx.pid() == 1 {
                ctx.get_bytes(0, &x, 6..11, &x, 0)?;
            }
            ctx.sync()?;
            Ok(())
        });
        expect_err(
            r,
            Misuse,
            "get",
            Some(1),
            Some(1),
            &["from pid 0: offset 6 + 5 bytes exceeds the 10 bytes pid 0 registered"],
        );

        let r = run(1, |ctx| {
            let x = ctx.push_reg(vec![0u8; 4])?;
            let small = ctx.push_reg(vec![0u8; 2])?;
            ctx.sync()?;
            ctx.get_bytes(0, &x, 0..2, &small, 1)?;
            Ok(())
        });
        expect_err(
            r,
            Misuse,
            "get",
            Some(0),
            Some(1),
            &["destination offset 1 + 2 bytes exceeds the 2 bytes"],
        );
    });
}

#[test]
fn pid_out_of_range() {
    within(60, || {
        if common::can(4) {
            let r = run(4, |ctx| {
                let x = ctx.push_reg(vec![0u8; 4])?;
                ctx.sync()?;
                if ctx.pid() == 3 {
                    ctx.put(4, &[1], &x, 0)?;
                }
                ctx.sync()?;
                Ok(())
            });
            expect_err(
                r,
                Misuse,
                "put",
                Some(3),
                Some(1),
                &["pid 4 is out of range: valid pids are 0..=3"],
            );
        }

        let r = run(2, |ctx| {
            ctx.send(9, &[], b"hi")?;
            Ok(())
        });
        expect_err(r, Misuse, "send", None, Some(0), &["pid 9 is out of range"]);

        let r = run(2, |ctx| {
            let x = ctx.push_reg(vec![0u8; 4])?;
            ctx.sync()?;
            let mut d = [0u8; 1];
            // SAFETY: nobody writes `x`.
            unsafe { ctx.direct_get(7, &x, 0, &mut d)? };
            Ok(())
        });
        expect_err(
            r,
            Misuse,
            "direct_get",
            None,
            Some(1),
            &["pid 7 is out of range"],
        );
    });
}

#[test]
fn pop_reg_of_something_not_registered() {
    within(60, || {
        let r = run(2, |ctx| {
            let x = ctx.push_reg(vec![0u8; 4])?;
            ctx.sync()?;
            ctx.pop_reg(&x)?;
            ctx.sync()?;
            ctx.pop_reg(&x)?;
            ctx.sync()?;
            Ok(())
        });
        expect_err(r, Misuse, "pop_reg", None, Some(2), &["already popped"]);

        let r = run(2, |ctx| {
            let x = ctx.push_reg(vec![0u8; 4])?;
            ctx.sync()?;
            ctx.pop_reg(&x)?;
            ctx.pop_reg(&x)?;
            Ok(())
        });
        expect_err(
            r,
            Misuse,
            "pop_reg",
            None,
            Some(1),
            &["already being popped in this superstep"],
        );

        let r = run(2, |ctx| {
            let local = [0u8; 4];
            ctx.pop_reg_raw(local.as_ptr())?;
            Ok(())
        });
        expect_err(r, Misuse, "pop_reg", None, Some(0), &["is not registered"]);
    });
}

#[test]
fn registration_order_that_differs_between_processes() {
    if common::needs_procs(3) {
        return;
    }
    within(60, || {
        let r = run(2, |ctx| {
            ctx.push_reg(vec![0u8; 4])?;
            if ctx.pid() == 0 {
                ctx.push_reg(vec![0u8; 4])?;
            }
            ctx.sync()?;
            Ok(())
        });
        expect_err(
            r,
            Misuse,
            "sync",
            Some(1),
            Some(0),
            &[
                "push_reg/pop_reg calls differ",
                "pid 0 made [push_reg of u8 (slot 0), push_reg of u8 (slot 1)]",
                "pid 1 made [push_reg of u8 (slot 0)]",
            ],
        );

        // Same pushes, pops of different registrations.
        let r = run(3, |ctx| {
            let a = ctx.push_reg(vec![0u8; 4])?;
            let b = ctx.push_reg(vec![0u8; 4])?;
            ctx.sync()?;
            ctx.pop_reg(if ctx.pid() == 2 { &b } else { &a })?;
            ctx.sync()?;
            Ok(())
        });
        expect_err(
            r,
            Misuse,
            "sync",
            Some(2),
            Some(1),
            &[
                "pid 0 made [pop_reg (slot 0)]",
                "pid 2 made [pop_reg (slot 1)]",
            ],
        );

        // One process does not take part at all.
        let r = run(2, |ctx| {
            if ctx.pid() == 0 {
                ctx.push_reg(vec![0u8; 4])?;
            }
            ctx.sync()?;
            Ok(())
        });
        expect_err(
            r,
            Misuse,
            "sync",
            Some(1),
            Some(0),
            &["pid 1 made no push_reg/pop_reg"],
        );
    });
}

#[test]
fn set_tagsize_that_differs_between_processes() {
    if common::needs_procs(3) {
        return;
    }
    within(60, || {
        let r = run(3, |ctx| {
            ctx.set_tagsize(if ctx.pid() == 1 { 8 } else { 4 })?;
            ctx.sync()?;
            Ok(())
        });
        expect_err(
            r,
            Misuse,
            "sync",
            Some(1),
            Some(0),
            &[
                "set_tagsize differs",
                "pid 0 asked for 4 bytes",
                "pid 1 asked for 8 bytes",
            ],
        );

        let r = run(2, |ctx| {
            ctx.sync()?;
            if ctx.pid() == 0 {
                ctx.set_tagsize(4)?;
            }
            ctx.sync()?;
            Ok(())
        });
        expect_err(
            r,
            Misuse,
            "sync",
            Some(1),
            Some(1),
            &["pid 1 did not call set_tagsize"],
        );
    });
}

#[test]
fn send_with_a_tag_of_the_wrong_size() {
    within(60, || {
        let r = run(2, |ctx| {
            ctx.set_tagsize(4)?;
            // The new size applies from the next superstep on.
            ctx.send(0, &[1, 2, 3, 4], &[])?;
            Ok(())
        });
        expect_err(
            r,
            Misuse,
            "send",
            None,
            Some(0),
            &["the tag has 4 bytes, but the tag size in this superstep is 0 bytes"],
        );
    });
}

#[test]
fn a_process_ending_while_others_sync_is_an_error_not_a_hang() {
    if common::needs_procs(3) {
        return;
    }
    within(60, || {
        // A run that ends well first: the failing one below reuses its state, whose end marks
        // (every process's) must not count as ended in the next run.
        run(3, |_| Ok(())).expect("a run of 3");
        let r = run(3, |ctx| {
            ctx.sync()?;
            if ctx.pid() != 2 {
                ctx.sync()?;
            }
            Ok(())
        });
        let e = expect_err(
            r,
            Misuse,
            "",
            None,
            Some(1),
            &["pid(s) [2] returned from the SPMD function"],
        );
        assert!(e.op() == "sync" || e.op() == "end");
    });
}

#[test]
fn a_registration_used_before_the_sync_that_makes_it_valid() {
    within(60, || {
        let r = run(2, |ctx| {
            let x = ctx.push_reg(vec![0u8; 4])?;
            ctx.put(1, &[1], &x, 0)?;
            ctx.sync()?;
            Ok(())
        });
        expect_err(
            r,
            Misuse,
            "put",
            None,
            Some(0),
            &["pushed in superstep 0 becomes valid only after the next sync"],
        );

        let r = run(2, |ctx| {
            let buf = vec![0u8; 4].into_boxed_slice();
            let ptr = Box::into_raw(buf) as *mut u8;
            ctx.sync()?;
            // SAFETY: leaked buffer; lives forever.
            unsafe { ctx.push_reg_raw(ptr, 4)? };
            ctx.put_raw(0, &[1], ptr, 0)?;
            Ok(())
        });
        expect_err(
            r,
            Misuse,
            "put",
            None,
            Some(1),
            &[
                "registered in this superstep",
                "valid only after the next sync",
            ],
        );
    });
}

#[test]
fn a_run_of_zero_processes() {
    let r = run(0, |_ctx| Ok(()));
    let e = expect_err(
        r,
        Misuse,
        "run",
        None,
        None,
        &["at least 1 process", "p = 0"],
    );
    assert_eq!(e.path(), &[] as &[usize]);

    within(60, || {
        let r = run(2, |ctx| {
            ctx.run(0, |_| Ok(()))?;
            Ok(())
        });
        expect_err(
            r,
            Misuse,
            "run",
            None,
            Some(0),
            &["nested run needs at least 1 process"],
        );
    });
}

#[test]
fn abort_stops_processes_waiting_in_sync_and_computing() {
    // Over ranks a computing process learns of another rank's abort at its next sync, not
    // through `is_aborted` (which sees its own rank's hierarchy only): pid 3's loop below
    // would never end. Processes waiting in sync are stopped over ranks too (other tests).
    if common::skip_test("is_aborted does not see an abort on another rank until a sync") {
        return;
    }
    within(60, || {
        let r = run(4, |ctx| {
            match ctx.pid() {
                2 => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    Err(ctx.abort(format!("bad input on pid {}", ctx.pid())))
                }
                3 => {
                    // A long computation that polls for abort.
                    while !ctx.is_aborted() {
                        std::hint::spin_loop();
                    }
                    ctx.sync() // returns the "stopped" error
                }
                _ => ctx.sync(),
            }
        });
        let e = expect_err(
            r,
            Abort,
            "abort",
            Some(2),
            Some(0),
            &["aborted: bad input on pid 2"],
        );
        assert_eq!(e.message(), "bad input on pid 2");
    });
}

#[test]
fn a_panic_ends_the_run_with_its_message() {
    if common::needs_procs(3) {
        return;
    }
    within(60, || {
        let r = run(3, |ctx| -> mbsp::Result<()> {
            ctx.sync()?;
            if ctx.pid() == 1 {
                panic!("index {} out of range", 42);
            }
            ctx.sync()?;
            ctx.sync()?;
            Ok(())
        });
        expect_err(
            r,
            Panic,
            "spmd",
            Some(1),
            Some(1),
            &["panicked: index 42 out of range"],
        );
    });
}

#[test]
fn an_ignored_error_still_ends_the_run() {
    within(60, || {
        let r = run(2, |ctx| {
            let x = ctx.push_reg(vec![0u8; 2])?;
            ctx.sync()?;
            let _ignored = ctx.put(1 - ctx.pid(), &[1, 2, 3], &x, 0);
            ctx.sync()?;
            Ok(())
        });
        expect_err(r, Misuse, "put", None, Some(1), &["exceeds the 2 bytes"]);
    });
}

#[test]
fn a_user_error_returned_from_a_process_ends_the_run() {
    if common::needs_procs(3) {
        return;
    }
    within(60, || {
        let r = run(3, |ctx| -> mbsp::Result<()> {
            if ctx.pid() == 1 {
                return Err(ctx.abort("custom failure"));
            }
            loop {
                ctx.sync()?;
            }
        });
        expect_err(r, Abort, "abort", Some(1), None, &["custom failure"]);
    });
}

#[test]
fn abort_in_a_nested_run_reaches_the_top_level_caller() {
    within(60, || {
        let r = run(2, |ctx| {
            let inner = ctx.run(3, |n: &mut Ctx| {
                n.sync()?;
                if n.path() == [1, 2] {
                    return Err(n.abort("deep failure"));
                }
                n.sync()?;
                Ok(())
            });
            inner?;
            ctx.sync()?;
            Ok(())
        });
        let e = expect_err(
            r,
            Abort,
            "abort",
            Some(2),
            Some(1),
            &["pid 1/2", "deep failure"],
        );
        assert_eq!(e.path(), &[1, 2]);
    });

    // A failure at the top level stops a nested run that is still busy. Over ranks the nested
    // run (threads inside rank 1) does not learn of rank 0's abort until rank 1's next
    // top-level sync, which its endless loop never reaches.
    if common::skip_part("a nested run does not see an abort on another rank") {
        return;
    }
    within(60, || {
        let r = run(2, |ctx| {
            if ctx.pid() == 0 {
                std::thread::sleep(std::time::Duration::from_millis(20));
                return Err(ctx.abort("top-level failure"));
            }
            ctx.run(2, |n| -> mbsp::Result<()> {
                loop {
                    n.sync()?;
                }
            })?;
            Ok(())
        });
        expect_err(r, Abort, "abort", Some(0), None, &["top-level failure"]);
    });
}

#[test]
fn local_access_to_another_processs_memory_is_refused() {
    within(60, || {
        let r = run(2, |ctx| {
            let x = ctx.push_reg(vec![0u8; 2])?;
            let y = ctx.run(1, |n| {
                let _ = n.local(&x)?;
                Ok(())
            });
            y?;
            Ok(())
        });
        expect_err(
            r,
            Misuse,
            "local",
            None,
            Some(0),
            &["belongs to pid", "of another run"],
        );
    });
}

#[test]
fn a_parent_registration_is_invisible_inside_a_nested_run() {
    within(60, || {
        let r = run(2, |ctx| {
            let x = ctx.push_reg(vec![0u8; 4])?;
            ctx.sync()?;
            ctx.run(2, |n| n.put(1, &[1], &x, 0))?;
            Ok(())
        });
        expect_err(r, Misuse, "put", None, Some(0), &["belongs to another run"]);
    });
}

#[test]
fn a_get_into_another_processs_memory_is_refused() {
    within(60, || {
        let r = run(2, |ctx| {
            let x = ctx.push_reg(vec![0u8; 4])?;
            ctx.sync()?;
            let y = ctx.run(1, |n| {
                let z = n.push_reg(vec![0u8; 4])?;
                n.sync()?;
                n.get(0, &z, 0..1, &x, 0)
            });
            y?;
            Ok(())
        });
        expect_err(
            r,
            Misuse,
            "get",
            None,
            None,
            &[
                "destination must be this process's own memory",
                "of another run",
            ],
        );
    });
}

/// A payload read as a type it does not hold: `try_payload_as` returns the error as a value (the
/// run goes on), `payload_as` panics with it and the run ends with that very error, naming the
/// operation, the reading process, the superstep, the sender, the type and both lengths.
#[test]
fn a_payload_read_as_the_wrong_type() {
    const WANT: &str = "the payload of the message from pid 0 has 12 bytes, not a whole number \
                        of f64 (8 bytes each); 12 bytes are 3 elements of a 4-byte type (f32, \
                        u32, i32)";
    within(60, || {
        // As a value: the process decides, and the run goes on.
        let r = run(2, |ctx| {
            ctx.send_pod(1 - ctx.pid(), &(), &[1.0f32, 2.0, 3.0])?;
            ctx.sync()?;
            let m = ctx.hpmove()?.expect("a message");
            let e = m.try_payload_as::<f64>().expect_err("12 bytes are no f64s");
            assert_eq!(
                (e.kind(), e.op(), e.superstep()),
                (Misuse, "payload_as", Some(1))
            );
            assert_eq!(e.pid(), Some(ctx.pid()));
            assert_eq!(e.message().replace("pid 1 ", "pid 0 "), WANT);
            let ok = m.try_payload_as::<f32>()?.to_vec();
            ctx.sync()?;
            Ok(ok)
        })
        .unwrap();
        assert_eq!(r, vec![vec![1.0, 2.0, 3.0]; 2]);

        // As a panic: the run's error is the misuse itself, not a panic of "spmd".
        let r = run(2, |ctx| {
            ctx.sync()?;
            if ctx.pid() == 0 {
                ctx.send_pod(1, &(), &[1.0f32, 2.0, 3.0])?;
            }
            ctx.sync()?;
            if ctx.pid() == 1 {
                let m = ctx.hpmove()?.expect("a message");
                let _: &[f64] = m.payload_as();
            }
            ctx.sync()
        });
        let e = expect_err(r, Misuse, "payload_as", Some(1), Some(2), &[WANT]);
        assert_eq!(
            e.to_string(),
            format!("payload_as (pid 1, superstep 2): {WANT}")
        );

        // The tag read as a type of another size.
        const TAG_WANT: &[&str] = &[
            "the tag of the message from pid",
            "has 4 bytes",
            "but a u64 has 8",
        ];
        let r = run(2, |ctx| {
            ctx.set_tagsize(4)?;
            ctx.sync()?;
            ctx.send(1 - ctx.pid(), &7u32.to_ne_bytes(), &[])?;
            ctx.sync()?;
            let m = ctx.hpmove()?.expect("a message");
            Ok(m.tag_as::<u64>())
        });
        expect_err(r, Misuse, "tag_as", None, Some(2), TAG_WANT);

        // The same for an owned message: the error names the process and superstep too.
        let r = run(2, |ctx| {
            ctx.set_tagsize(4)?;
            ctx.sync()?;
            ctx.send_owned(1 - ctx.pid(), &7u32.to_ne_bytes(), vec![1u16, 2])?;
            ctx.sync()?;
            let m = ctx.move_owned::<u16>()?.expect("a message");
            Ok(m.tag_as::<u64>())
        });
        let e = expect_err(r, Misuse, "tag_as", None, Some(2), TAG_WANT);
        assert!(e.to_string().starts_with("tag_as (pid "), "{e}");
    });
}
