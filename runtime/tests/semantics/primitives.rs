//! The semantics of each primitive (DESIGN.md §3), one behaviour per test, on the engine the
//! harness selects (`common/engine.rs`: threads, or MPI ranks under `mpiexec`).

use crate::common;
use common::{run, within};
use mbsp::{Ctx, QueueSize};

#[test]
fn pid_zero_is_the_caller_and_results_come_back_in_pid_order() {
    if common::skip_test("pid 0 runs on the calling thread: the thread engine's promise") {
        return;
    }
    let caller = std::thread::current().id();
    let data = [10, 20, 30, 40, 50];
    let r = run(5, |ctx| {
        let on_caller = std::thread::current().id() == caller;
        Ok((ctx.pid(), ctx.nprocs(), on_caller, data[ctx.pid()]))
    })
    .unwrap();
    for (i, (pid, p, on_caller, d)) in r.into_iter().enumerate() {
        assert_eq!((pid, p, d), (i, 5, data[i]));
        if common::engine() == common::Engine::Coroutines {
            // The calling thread runs its core's processes in turns (`Run::coroutines`).
            assert!(on_caller || i != 0, "pid 0 runs on the calling thread");
        } else {
            assert_eq!(on_caller, i == 0, "only pid 0 runs on the calling thread");
        }
    }
}

#[test]
fn nprocs_outside_a_run_is_the_hardware_thread_count() {
    assert_eq!(
        mbsp::nprocs(),
        std::thread::available_parallelism().unwrap().get()
    );
}

#[test]
fn time_is_per_process_and_increases() {
    if common::needs_procs(3) {
        return;
    }
    run(3, |ctx| {
        let t0 = ctx.time();
        std::thread::sleep(std::time::Duration::from_millis(5));
        ctx.sync()?;
        let t1 = ctx.time();
        assert!(t0 >= 0.0 && t1 >= t0 + 0.004, "{t0} {t1}");
        Ok(())
    })
    .unwrap();
}

#[test]
fn put_source_is_captured_when_put_is_called() {
    let r = run(2, |ctx| {
        let mut x = ctx.push_reg(vec![0i64; 2])?;
        ctx.sync()?;
        let mut src = [ctx.pid() as i64 + 1, 0];
        ctx.put(1 - ctx.pid(), &src, &x, 0)?;
        src[0] = -99; // after the put: must not matter
        ctx.local_mut(&mut x)?[1] = src[0];
        ctx.sync()?;
        Ok(ctx.local(&x)?.to_vec())
    })
    .unwrap();
    assert_eq!(r, vec![vec![2, 0], vec![1, 0]]);
}

#[test]
fn get_reads_the_source_at_sync_entry_and_never_sees_puts_of_the_same_superstep() {
    let r = run(2, |ctx| {
        let mut x = ctx.push_reg(vec![0u32; 1])?;
        let y = ctx.push_reg(vec![0u32; 1])?;
        ctx.sync()?;
        let other = 1 - ctx.pid();
        ctx.get(other, &x, 0..1, &y, 0)?;
        // Written after the get was issued but before the sync: the get sees it.
        ctx.local_mut(&mut x)?[0] = 100 + ctx.pid() as u32;
        // A put into the get's source in the same superstep: the get must not see it.
        ctx.put(other, &[7], &x, 0)?;
        ctx.sync()?;
        Ok((ctx.local(&x)?[0], ctx.local(&y)?[0]))
    })
    .unwrap();
    assert_eq!(r, vec![(7, 101), (7, 100)]);
}

#[test]
fn puts_and_gets_to_self_take_effect_at_the_sync() {
    run(1, |ctx| {
        let mut x = ctx.push_reg(vec![1u8, 2, 3, 4])?;
        ctx.sync()?;
        ctx.put(0, &[9, 9], &x, 2)?;
        assert_eq!(ctx.local(&x)?, &[1, 2, 3, 4], "not before the sync");
        ctx.get(0, &x, 2..4, &x, 0)?; // reads [3, 4] at sync entry
        ctx.sync()?;
        assert_eq!(ctx.local(&x)?, &[3, 4, 9, 9]);
        ctx.local_mut(&mut x)?[0] = 0;
        Ok(())
    })
    .unwrap();
}

#[test]
fn overlapping_puts_leave_one_of_the_written_values() {
    if common::needs_procs(4) {
        return;
    }
    let r = run(4, |ctx| {
        let x = ctx.push_reg(vec![0u64; 1])?;
        ctx.sync()?;
        ctx.put(0, &[ctx.pid() as u64 + 1], &x, 0)?;
        ctx.sync()?;
        Ok(ctx.local(&x)?[0])
    })
    .unwrap();
    assert!((1..=4).contains(&r[0]), "{}", r[0]);
}

#[test]
fn zero_length_communication_does_nothing() {
    run(2, |ctx| {
        let x = ctx.push_reg(vec![5u8; 3])?;
        ctx.sync()?;
        ctx.put(1 - ctx.pid(), &[], &x, 3)?;
        ctx.get(1 - ctx.pid(), &x, 3..3, &x, 3)?;
        ctx.send(0, &[], &[])?;
        ctx.sync()?;
        assert_eq!(ctx.local(&x)?, &[5, 5, 5]);
        // A message with neither tag nor payload is still a message.
        assert_eq!(ctx.qsize()?.messages, if ctx.pid() == 0 { 2 } else { 0 });
        Ok(())
    })
    .unwrap();
}

#[test]
fn registration_sizes_may_differ_and_empty_registrations_receive_nothing() {
    if common::needs_procs(3) {
        return;
    }
    let r = run(3, |ctx| {
        // pid 1 takes part without memory; the others register pid + 2 bytes.
        let x = if ctx.pid() == 1 {
            ctx.push_reg_empty::<u8>()?
        } else {
            ctx.push_reg(vec![0u8; ctx.pid() + 2])?
        };
        assert_eq!(x.is_null(), ctx.pid() == 1);
        ctx.sync()?;
        // Everybody (including pid 1, through its empty handle) writes into pid 2's 4 bytes.
        ctx.put(2, &[ctx.pid() as u8 + 1], &x, ctx.pid())?;
        ctx.sync()?;
        Ok(ctx.local(&x)?.to_vec())
    })
    .unwrap();
    assert_eq!(r, vec![vec![0, 0], vec![], vec![1, 2, 3, 0]]);

    let e = run(2, |ctx| {
        let x = if ctx.pid() == 1 {
            ctx.push_reg_empty::<u8>()?
        } else {
            ctx.push_reg(vec![0u8; 4])?
        };
        ctx.sync()?;
        ctx.put(1, &[1], &x, 0)
    })
    .unwrap_err();
    assert!(e.to_string().contains("pid 1 registered no memory"), "{e}");
}

#[test]
fn a_popped_registration_still_works_in_its_superstep_and_its_slot_is_reused() {
    let r = run(2, |ctx| {
        let a = ctx.push_reg(vec![0u16; 2])?;
        ctx.sync()?;
        ctx.pop_reg(&a)?;
        ctx.put(1 - ctx.pid(), &[ctx.pid() as u16 + 1], &a, 1)?;
        assert_eq!(ctx.registrations(), 1);
        ctx.sync()?;
        assert_eq!(ctx.registrations(), 0);
        let got = ctx.local(&a)?.to_vec();
        let b = ctx.push_reg(vec![0u16; 1])?; // reuses a's slot with a new generation
        ctx.sync()?;
        ctx.put(1 - ctx.pid(), &[9], &b, 0)?;
        ctx.sync()?;
        Ok((
            got,
            ctx.local(&b)?[0],
            a.into_vec().expect("popped: memory returned"),
        ))
    })
    .unwrap();
    assert_eq!(r[0], (vec![0, 2], 9, vec![0, 2]));
    assert_eq!(r[1], (vec![0, 1], 9, vec![0, 1]));
}

#[test]
fn into_vec_refuses_while_registered_and_succeeds_after_the_run() {
    // The registrations stay with their processes (over ranks, each rank has its own).
    let regs = common::run_local(2, |ctx| {
        let x = ctx.push_reg(vec![ctx.pid() as u8; 2])?;
        ctx.sync()?;
        let x = x.into_vec().expect_err("still registered");
        Ok(x)
    })
    .unwrap();
    let v = regs
        .into_iter()
        .map(|(pid, r)| (pid, r.into_vec().unwrap()))
        .collect();
    let v: Vec<Vec<u8>> = common::gather(2, v);
    assert_eq!(v, vec![vec![0, 0], vec![1, 1]]);
}

#[test]
fn raw_registrations_shadow_by_address_and_pop_newest_first() {
    let r = run(2, |ctx| {
        let buf = Box::into_raw(vec![0u8; 8].into_boxed_slice()) as *mut u8;
        // SAFETY: `buf` lives until after the run (freed below by the caller's copy).
        unsafe {
            ctx.push_reg_raw(buf, 8)?;
            ctx.push_reg_raw(buf, 2)?; // shadows: only 2 bytes reachable now
        }
        ctx.sync()?;
        let too_far = ctx.put_raw(1 - ctx.pid(), &[1, 1, 1], buf, 0);
        assert!(too_far.is_err());
        Ok(buf as usize)
    });
    let e = r.unwrap_err();
    assert!(e.to_string().contains("exceeds the 2 bytes"), "{e}");

    let r = run(2, |ctx| {
        let buf = Box::into_raw(vec![0u8; 8].into_boxed_slice()) as *mut u8;
        // SAFETY: `buf` lives until the end of the closure, after the last sync.
        unsafe {
            ctx.push_reg_raw(buf, 8)?;
            ctx.push_reg_raw(buf, 2)?;
        }
        ctx.sync()?;
        ctx.pop_reg_raw(buf)?; // removes the 2-byte registration
        ctx.sync()?;
        ctx.put_raw(1 - ctx.pid(), &[ctx.pid() as u8 + 1; 3], buf, 5)?;
        ctx.sync()?;
        // SAFETY: read outside a sync; freed right after.
        let v = unsafe { std::slice::from_raw_parts(buf, 8) }.to_vec();
        ctx.pop_reg_raw(buf)?;
        ctx.sync()?;
        // SAFETY: popped and synced; nobody can reach it.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(buf, 8)) });
        Ok(v)
    })
    .unwrap();
    assert_eq!(r[0], vec![0, 0, 0, 0, 0, 2, 2, 2]);
    assert_eq!(r[1], vec![0, 0, 0, 0, 0, 1, 1, 1]);
}

#[test]
fn hpput_hpget_and_direct_get_see_previous_supersteps() {
    // Every superstep: buffered put of the superstep number into the neighbour, then after
    // the sync, read it back from the neighbour with direct_get/hpget, many times (catches a
    // direct_get that runs before the neighbour has finished writing its incoming puts).
    // Any p of at least 2 shows it: as many as the ranks allow over ranks.
    let p = 4.min(common::max_procs());
    within(120, move || {
        run(p, |ctx| {
            let p = ctx.nprocs();
            let (me, right) = (ctx.pid(), (ctx.pid() + 1) % p);
            let x = ctx.push_reg(vec![0u64; 64])?;
            ctx.sync()?;
            for k in 1..common::limit(2000u64, 50) {
                ctx.put(right, &[k * 10 + me as u64; 64], &x, 0)?;
                ctx.sync()?;
                let mut got = [0u64; 64];
                // SAFETY: nobody writes `x` in this superstep.
                unsafe {
                    if k % 2 == 0 {
                        ctx.direct_get(right, &x, 0, &mut got)?;
                    } else {
                        ctx.hpget(right, &x, 0, &mut got)?;
                    }
                }
                let writer = (right + p - 1) % p;
                assert_eq!(got, [k * 10 + writer as u64; 64], "superstep {k}");
                ctx.sync()?;
            }
            Ok(())
        })
        .unwrap();
    });
    if !common::can(3) {
        return;
    }
    let r = run(3, |ctx| {
        let x = ctx.push_reg(vec![0u32; 3])?;
        ctx.sync()?;
        // SAFETY: each process writes a distinct element of each destination.
        unsafe {
            for q in 0..ctx.nprocs() {
                ctx.hpput(q, &[ctx.pid() as u32 + 1], &x, ctx.pid())?;
            }
        }
        ctx.sync()?;
        Ok(ctx.local(&x)?.to_vec())
    })
    .unwrap();
    assert!(r.iter().all(|v| v == &[1, 2, 3]));
}

#[test]
fn tag_size_changes_at_the_next_superstep_and_queue_keeps_the_senders_size() {
    run(2, |ctx| {
        assert_eq!(ctx.tagsize(), 0);
        assert_eq!(ctx.set_tagsize(2)?, 0);
        assert_eq!(
            ctx.set_tagsize(3)?,
            0,
            "last call in a superstep wins; returns current"
        );
        ctx.send(1 - ctx.pid(), &[], b"abc")?; // tag size 0 in this superstep
        ctx.sync()?;
        assert_eq!(ctx.tagsize(), 3);
        let m = ctx.peek()?.unwrap();
        assert_eq!((m.tag, m.payload), (&[][..], &b"abc"[..]));
        ctx.send(1 - ctx.pid(), &[1, 2, 3], b"")?;
        assert_eq!(ctx.set_tagsize(1)?, 3);
        ctx.sync()?;
        let m = ctx.hpmove()?.unwrap();
        assert_eq!((m.tag, m.payload), (&[1u8, 2, 3][..], &[][..]));
        assert_eq!(ctx.tagsize(), 1);
        Ok(())
    })
    .unwrap();
}

#[test]
fn queue_size_get_tag_move_and_truncation() {
    if common::needs_procs(3) {
        return;
    }
    run(3, |ctx| {
        ctx.set_tagsize(1)?;
        ctx.sync()?;
        if ctx.pid() != 0 {
            let n = ctx.pid() * 4;
            ctx.send(0, &[ctx.pid() as u8], &vec![ctx.pid() as u8; n])?;
        }
        ctx.sync()?;
        if ctx.pid() == 0 {
            assert_eq!(
                ctx.qsize()?,
                QueueSize {
                    messages: 2,
                    bytes: 12
                }
            );
            let mut seen = Vec::new();
            let (len, tag) = ctx.get_tag()?.unwrap();
            assert_eq!(
                ctx.get_tag()?.unwrap(),
                (len, tag),
                "get_tag does not consume"
            );
            let tag = tag[0];
            let mut small = [0u8; 2];
            assert_eq!(
                ctx.move_message(&mut small)?,
                Some(len),
                "returns the full length"
            );
            assert_eq!(small, [tag; 2], "truncated copy");
            seen.push(tag);
            assert_eq!(ctx.qsize()?.messages, 1);
            assert_eq!(ctx.qsize()?.bytes, 12 - len);
            let m = ctx.hpmove()?.unwrap();
            seen.push(m.tag_as::<u8>());
            assert_eq!(m.payload.len(), m.tag[0] as usize * 4);
            seen.sort();
            assert_eq!(seen, vec![1, 2]);
            assert_eq!(ctx.qsize()?, QueueSize::default());
            assert_eq!(ctx.get_tag()?, None);
            assert_eq!(ctx.move_message(&mut small)?, None);
        } else {
            assert_eq!(ctx.qsize()?, QueueSize::default());
        }
        ctx.sync()?;
        Ok(())
    })
    .unwrap();
}

#[test]
fn messages_live_for_one_superstep() {
    run(2, |ctx| {
        ctx.send(1 - ctx.pid(), &[], b"x")?;
        ctx.sync()?;
        assert_eq!(ctx.qsize()?.messages, 1);
        ctx.sync()?;
        assert_eq!(
            ctx.qsize()?.messages,
            0,
            "unread messages are dropped at the next sync"
        );
        Ok(())
    })
    .unwrap();
}

#[test]
fn hpmove_payloads_are_aligned_views() {
    run(2, |ctx| {
        ctx.set_tagsize(3)?; // odd tag size: payload must still be 8-aligned
        ctx.sync()?;
        let data: Vec<f64> = (0..5).map(|i| i as f64 + ctx.pid() as f64 / 10.0).collect();
        ctx.send_pod(1 - ctx.pid(), &[1u8, 2, 3], &data)?;
        ctx.send_pod(1 - ctx.pid(), &[4u8, 5, 6], &data[..2])?;
        ctx.sync()?;
        let mut total = 0;
        while let Some(m) = ctx.hpmove()? {
            let v: &[f64] = m.payload_as();
            assert_eq!(v[1], 1.0 + (1 - ctx.pid()) as f64 / 10.0);
            total += v.len();
        }
        assert_eq!(total, 7);
        Ok(())
    })
    .unwrap();
}

#[test]
fn hpsend_delivers_the_payload_as_it_stands_at_the_sync() {
    let r = run(2, |ctx| {
        let payload = vec![ctx.pid() as u8; 4];
        // SAFETY: `payload` stays alive and unchanged until the sync.
        unsafe { ctx.hpsend(1 - ctx.pid(), &[], &payload)? };
        ctx.sync()?;
        drop(payload);
        let mut buf = [0u8; 4];
        assert_eq!(ctx.move_message(&mut buf)?, Some(4));
        Ok(buf)
    })
    .unwrap();
    assert_eq!(r, vec![[1; 4], [0; 4]]);
}

#[test]
fn nested_runs_have_their_own_registrations_tag_size_and_queue() {
    let r = run(2, |ctx| {
        let x = ctx.push_reg(vec![0u32; 2])?;
        ctx.set_tagsize(4)?;
        ctx.sync()?;
        // A request of the parent made before the nested run stays queued for its next sync.
        ctx.put(1 - ctx.pid(), &[ctx.pid() as u32 + 1], &x, 0)?;
        ctx.send(1 - ctx.pid(), &[0, 0, 0, 7], b"parent")?;
        let inner = ctx.run(3, |n| {
            assert_eq!(n.tagsize(), 0, "a nested run starts with tag size 0");
            assert_eq!(n.registrations(), 0);
            let y = n.push_reg(vec![0u32; 3])?;
            n.sync()?;
            n.put(0, &[n.pid() as u32 * 10], &y, n.pid())?;
            n.send(0, &[], b"inner")?;
            n.sync()?;
            Ok((n.local(&y)?.to_vec(), n.qsize()?.messages))
        })?;
        assert_eq!(
            ctx.registrations(),
            1,
            "the parent's registration is valid again"
        );
        ctx.sync()?;
        let m = ctx.hpmove()?.unwrap();
        assert_eq!((m.tag, m.payload), (&[0u8, 0, 0, 7][..], &b"parent"[..]));
        Ok((ctx.local(&x)?[0], inner))
    })
    .unwrap();
    for (pid, (x0, inner)) in r.iter().enumerate() {
        assert_eq!(*x0, 2 - pid as u32);
        assert_eq!(inner[0], (vec![0, 10, 20], 3));
        assert_eq!(inner[1].1, 0);
    }
}

#[test]
fn nesting_works_three_levels_deep() {
    let r = run(2, |a| {
        let v = a.run(2, |b| {
            let w = b.run(2, |c| {
                let x = c.push_reg(vec![0usize; 1])?;
                c.sync()?;
                let path = c.path().iter().fold(0, |acc, p| acc * 10 + p);
                c.put(1 - c.pid(), &[path], &x, 0)?;
                c.sync()?;
                Ok(c.local(&x)?[0])
            })?;
            b.sync()?;
            Ok(w)
        })?;
        a.sync()?;
        Ok(v)
    })
    .unwrap();
    // leaf (i, j, k) receives the path number of (i, j, 1 - k)
    assert_eq!(r[1][0], vec![101, 100]);
    assert_eq!(r[0][1], vec![11, 10]);
}

#[test]
fn more_processes_than_hardware_threads() {
    if common::skip_test("more processes than hardware threads: a thread engine's case") {
        return;
    }
    within(120, || {
        let p = 4 * mbsp::nprocs() + 3;
        let r = run(p, |ctx: &mut Ctx| {
            let x = ctx.push_reg(vec![0usize; 1])?;
            ctx.sync()?;
            for k in 0..200 {
                ctx.put((ctx.pid() + 1) % ctx.nprocs(), &[k + ctx.pid()], &x, 0)?;
                ctx.sync()?;
            }
            Ok(ctx.local(&x)?[0])
        })
        .unwrap();
        for (i, v) in r.iter().enumerate() {
            assert_eq!(*v, 199 + (i + p - 1) % p);
        }
    });
}

#[test]
fn sync_without_communication_keeps_state() {
    if common::needs_procs(3) {
        return;
    }
    run(3, |ctx| {
        let mut x = ctx.push_reg(vec![ctx.pid() as u8; 2])?;
        for _ in 0..100 {
            ctx.sync()?;
        }
        ctx.local_mut(&mut x)?[0] += 1;
        ctx.sync()?;
        assert_eq!(ctx.local(&x)?, &[ctx.pid() as u8 + 1, ctx.pid() as u8]);
        assert_eq!(ctx.superstep(), 101);
        Ok(())
    })
    .unwrap();
}

/// BSPlib's `bsp_pop_reg(NULL)` pops the registration the other processes pop, which must be a
/// null registration here (as other BSPlib implementations accept), whatever the order.
#[test]
fn a_null_pop_matches_the_registration_the_others_pop() {
    if common::needs_procs(3) {
        return;
    }
    let r = run(3, |ctx| {
        let mut x = [0u8; 8];
        let mut y = [0u8; 8];
        let (px, py) = (x.as_mut_ptr(), y.as_mut_ptr());
        let null = std::ptr::null_mut();
        let me = ctx.pid();
        // SAFETY: `x` and `y` outlive their registrations (popped and synced below), and no
        // reference to them is held across a sync.
        unsafe {
            ctx.push_reg_raw(if me == 0 { null } else { px }, 8)?;
            ctx.push_reg_raw(if me == 0 { null } else { py }, 8)?;
        }
        ctx.sync()?;
        // The oldest registration first: pid 0's NULL stands for x's slot, not the newest NULL.
        ctx.pop_reg_raw(if me == 0 { null } else { px })?;
        ctx.sync()?;
        assert_eq!(ctx.registrations(), 1);
        // y's slot is still registered everywhere: pid 1 puts into pid 2's y through it.
        if me == 1 {
            ctx.put_raw(2, &[7; 8], py, 0)?;
        }
        ctx.sync()?;
        ctx.pop_reg_raw(if me == 0 { null } else { py })?;
        ctx.sync()?;
        Ok((ctx.registrations(), y, x))
    })
    .unwrap();
    assert_eq!(r[2], (0, [7; 8], [0; 8]));
    assert_eq!(r[0].0, 0);

    // A NULL pop where the others pop a slot that is not null here is an error naming it.
    let e = run(2, |ctx| {
        let mut a = [0u8; 4];
        let pa = a.as_mut_ptr();
        // SAFETY: as above.
        unsafe {
            ctx.push_reg_raw(pa, 4)?;
            ctx.push_reg_raw(std::ptr::null_mut(), 0)?;
        }
        ctx.sync()?;
        ctx.pop_reg_raw(if ctx.pid() == 0 { pa } else { std::ptr::null() })?;
        ctx.sync()?;
        Ok(a)
    })
    .unwrap_err();
    assert_eq!(e.pid(), Some(1), "{e}");
    assert!(e.message().contains("pop_reg of NULL"), "{e}");
}

/// A get whose destination another get of the same superstep reads still sees the value from
/// before the sync (gets into areas nobody reads are written directly, the others through the
/// get buffer); with many slots, so that slots share get-source bits too.
#[test]
fn a_get_destination_read_by_another_get_keeps_its_old_value_for_it() {
    if common::needs_procs(3) {
        return;
    }
    let r = run(3, |ctx| {
        let me = ctx.pid() as u64;
        let regs: Vec<_> = (0..25)
            .map(|k| ctx.push_reg(vec![me * 100 + k as u64; 4]))
            .collect::<mbsp::Result<_>>()?;
        let out = ctx.push_reg(vec![0u64; 4])?;
        ctx.sync()?;
        let (p, right) = (ctx.nprocs(), (ctx.pid() + 1) % ctx.nprocs());
        // Everyone reads slot k of its right neighbour into its own slot k + 1, for every k:
        // each destination is also a source of the left neighbour's get.
        for k in 0..24 {
            ctx.get(right, &regs[k], .., &regs[k + 1], 0)?;
        }
        // And one get into an area nobody reads: written directly.
        ctx.get(right, &regs[24], 0..1, &out, 3)?;
        ctx.sync()?;
        let mut got = Vec::new();
        for reg in &regs {
            got.push(ctx.local(reg)?[0]);
        }
        got.push(ctx.local(&out)?[3]);
        let r = right as u64;
        let mut want = vec![me * 100];
        want.extend((0..24).map(|k| r * 100 + k));
        want.push(r * 100 + 24);
        assert_eq!(got, want, "pid {me} of {p}");
        Ok(())
    });
    r.unwrap();
}

/// Every process of a run of `p` found every put whole: its list of (superstep, sender, first
/// wrong byte) is empty.
fn assert_arrived_whole(p: usize, r: &[Vec<(usize, usize, usize)>]) {
    for (pid, bad) in r.iter().enumerate() {
        assert!(
            bad.is_empty(),
            "p = {p}, pid {pid}: (superstep, sender, first wrong byte) {bad:?}"
        );
    }
}

/// Large puts (the thread engine keeps their data in one area per destination: `bulk.rs`)
/// arrive whole in every superstep: two or three puts from each process to each, large and
/// small, side by side (writes that overlap have no order: DESIGN.md), the area growing and
/// moving in the first supersteps, and sizes that change between supersteps.
#[test]
fn large_puts_arrive_whole_in_every_superstep() {
    const B: usize = 600_005; // a region per sender
    let byte =
        |t: usize, i: usize, j: usize, k: usize| ((t * 7 + i * 13 + j * 29 + k * 3) % 251) as u8;
    for p in common::procs([2, 3]) {
        let r = run(p, move |ctx| {
            let (me, p) = (ctx.pid(), ctx.nprocs());
            let x = ctx.push_reg(vec![0u8; p * B])?;
            ctx.sync()?;
            let mut bad = Vec::new();
            for t in 0..5 {
                // Below and above the size of a bulk put, in turn.
                let half = if t % 2 == 0 { B / 2 } else { B / 3 };
                for j in 0..p {
                    let all: Vec<u8> = (0..B).map(|k| byte(t, me, j, k)).collect();
                    ctx.put(j, &all[..half], &x, me * B)?;
                    ctx.put(j, &all[half..half + 16], &x, me * B + half)?;
                    ctx.put(j, &all[half + 16..], &x, me * B + half + 16)?;
                }
                ctx.sync()?;
                let got = ctx.local(&x)?;
                for i in 0..p {
                    if let Some(k) = (0..B).find(|&k| got[i * B + k] != byte(t, i, me, k)) {
                        bad.push((t, i, k));
                    }
                }
            }
            Ok(bad)
        })
        .unwrap();
        assert_arrived_whole(p, &r);
    }
}

/// Large puts (from 512 KiB, which a thread receiver shares with the senders that wait for
/// it: `share.rs`) arrive whole: all to one and each to each in the same superstep, lengths
/// that are no multiple of the chunk, odd offsets, a get beside them, sizes that change.
#[test]
fn large_puts_to_one_and_to_each_arrive_whole() {
    const B: usize = 1_700_011; // a region per sender
    let byte = |t: usize, i: usize, k: usize| ((t * 11 + i * 17 + k * 5 + k / 65_536) % 253) as u8;
    for p in common::procs([2, 3]) {
        let r = run(p, move |ctx| {
            let (me, p) = (ctx.pid(), ctx.nprocs());
            let to_one = ctx.push_reg(vec![0u8; p * B])?;
            let to_each = ctx.push_reg(vec![0u8; p * B])?;
            let word = ctx.push_reg(vec![me as u64; 1])?;
            let other = ctx.push_reg(vec![0u64; 1])?;
            ctx.sync()?;
            let mut bad = Vec::new();
            for t in 0..4 {
                let len = [B, 524_288, 1_048_583, 700_001][t];
                let off = me * B + (B - len);
                let all: Vec<u8> = (0..len).map(|k| byte(t, me, k)).collect();
                ctx.put(0, &all, &to_one, off)?;
                for j in 0..p {
                    ctx.put(j, &all, &to_each, off)?;
                }
                ctx.get((me + 1) % p, &word, .., &other, 0)?;
                ctx.sync()?;
                if ctx.local(&other)?[0] != ((me + 1) % p) as u64 {
                    bad.push((t, usize::MAX, 0));
                }
                for (area, check) in [(&to_one, me == 0), (&to_each, true)] {
                    let got = ctx.local(area)?;
                    for i in (0..p).filter(|_| check) {
                        let at = i * B + (B - len);
                        if let Some(k) = (0..len).find(|&k| got[at + k] != byte(t, i, k)) {
                            bad.push((t, i, k));
                        }
                    }
                }
            }
            Ok(bad)
        })
        .unwrap();
        assert_arrived_whole(p, &r);
    }
}

/// Copies long enough to stream past the caches (`copies::STREAM_FROM`) arrive whole at
/// odd offsets: a put to the other process, puts of both to pid 0 (whose delivery the sender
/// helps with, in chunks), an hpput, an hpget, and an hpput of a process into its own area
/// whose ranges overlap (moved, never streamed).
#[test]
fn copies_past_the_caches_arrive_whole() {
    const L: usize = mbsp::copies::STREAM_FROM + 4099;
    // Each superstep's and sender's bytes: a block of a prime length (no chunk or line size is
    // a multiple of it) repeated, so that they are cheap to make and to compare under
    // scripts/memcheck, and a byte out of place still differs.
    let data = |t: usize, i: usize| -> Vec<u8> {
        let block: Vec<u8> = (0..4093)
            .map(|k| ((t * 11 + i * 17 + k * 5) % 253) as u8)
            .collect();
        let mut v = Vec::with_capacity(L);
        while v.len() < L {
            let n = (L - v.len()).min(block.len());
            v.extend_from_slice(&block[..n]);
        }
        v
    };
    let r = run(2, move |ctx| {
        let (me, other) = (ctx.pid(), 1 - ctx.pid());
        let area = ctx.push_reg(vec![0u8; 2 * L + 16])?;
        ctx.sync()?;
        let mut bad = Vec::new();
        let mut check = |t: usize, got: &[u8], at: usize, from: usize| {
            let want = data(t, from);
            if got[at..at + L] != want[..] {
                let k = (0..L).find(|&k| got[at + k] != want[k]);
                bad.push((t, from, k.unwrap_or(usize::MAX)));
            }
        };
        // A put to the other process, and one of each to pid 0, side by side.
        let mine = data(0, me);
        ctx.put(other, &mine, &area, 3)?;
        ctx.sync()?;
        check(0, ctx.local(&area)?, 3, other);
        let mine = data(1, me);
        ctx.put(0, &mine, &area, 5 + me * L)?;
        ctx.sync()?;
        if me == 0 {
            let got = ctx.local(&area)?;
            check(1, got, 5, 0);
            check(1, got, 5 + L, 1);
        }
        // An hpput to the other process, a superstep later: an hpput writes at once, and the
        // other process reads its area in the superstep after a sync.
        let mine = data(2, me);
        ctx.sync()?;
        // SAFETY: nothing else writes the other process's area, nor reads it, this superstep.
        unsafe { ctx.hpput(other, &mine, &area, 7)? };
        ctx.sync()?;
        check(2, ctx.local(&area)?, 7, other);
        // An hpget of what the other process got, into a vector of one's own.
        let mut got = vec![0u8; L + 1];
        // SAFETY: nobody writes the other process's area this superstep.
        unsafe { ctx.hpget(other, &area, 7, &mut got[1..])? };
        ctx.sync()?;
        check(2, &got, 1, me);
        // An hpput into one's own area whose ranges overlap: moved as memmove moves.
        let own = ctx.local(&area)?[7..7 + L].to_vec();
        let base = ctx.local(&area)?.as_ptr();
        // SAFETY: both ranges lie in this process's area, which it alone touches this
        // superstep (the other process's last hpget was before the sync).
        unsafe { ctx.hpput_raw(me, base.add(7), base, 9, L)? };
        ctx.sync()?;
        if ctx.local(&area)?[9..9 + L] != own[..] {
            bad.push((3, me, usize::MAX));
        }
        Ok(bad)
    })
    .unwrap();
    assert_arrived_whole(2, &r);
}

/// A registration popped twice in one superstep is refused, even when every process makes the
/// same two pops (at the second call; the sync's check of identical requests would refuse them
/// too).
#[test]
fn a_registration_popped_twice_in_one_superstep_is_refused() {
    let e = mbsp::run(2, |ctx| {
        let x = ctx.push_reg(vec![0u8; 4])?;
        ctx.sync()?;
        ctx.pop_reg(&x)?;
        ctx.pop_reg(&x)?;
        ctx.sync()
    })
    .unwrap_err();
    let text = e.to_string();
    assert!(text.contains("already being popped"), "{text}");
}
