//! A process's end of the run (`Ctx::end`, what the C ABI's `bsp_end` does before leaving the
//! SPMD function): a synchronisation of every process that delivers the last superstep's
//! communication; after it nothing touches the process's memory and every primitive but the
//! local views is a misuse.

use crate::common;
use common::{expect_err, within};
use mbsp::ErrorKind::Misuse;
use mbsp::run;

/// Memory lent on a process's stack (as C programs register it) stays readable until every
/// process has ended: pid 0 reads the others' areas with direct_get before its end and with a
/// get served at it, while they end at once and then wipe the area.
#[test]
fn end_waits_until_the_others_stopped_reading() {
    within(120, || {
        for p in [2, 3, 5] {
            for _ in 0..20 {
                let sums = run(p, |ctx| {
                    let mut mine = Box::new([ctx.pid() as u64 + 1; 64]);
                    let at = mine.as_mut_ptr() as *mut u8;
                    let mut got = vec![0u64; 64 * ctx.nprocs()];
                    let into = got.as_mut_ptr() as *mut u8;
                    // SAFETY: `mine` stays allocated until after `end`, with no reference to it
                    // held across a sync.
                    unsafe { ctx.push_reg_raw(at, 512)? };
                    ctx.sync()?;
                    let mut direct = 0;
                    if ctx.pid() == 0 {
                        for k in 1..ctx.nprocs() {
                            let mut v = [0u64; 64];
                            // SAFETY: nobody writes the others' areas in this superstep.
                            unsafe {
                                ctx.direct_get_raw(k, at, 0, v.as_mut_ptr() as *mut u8, 512)?
                            };
                            direct += v.iter().sum::<u64>();
                            // SAFETY: `got` is written by the get at the end, and not used
                            // until then.
                            unsafe { ctx.get_raw(k, at, 0, into.add(512 * k), 512)? };
                        }
                    }
                    ctx.end()?;
                    // The area may go now: wipe it, as a returning C function's stack would be.
                    mine.fill(u64::MAX);
                    let gathered: u64 = got.iter().sum();
                    Ok((direct, gathered))
                })
                .unwrap();
                let want: u64 = (2..=p as u64).map(|k| 64 * k).sum();
                assert_eq!(sums[0], (want, want), "p = {p}");
            }
        }
    });
}

#[test]
fn end_twice_returns_its_first_outcome() {
    within(60, || {
        let r = run(2, |ctx| {
            ctx.end()?;
            ctx.end()?;
            Ok(ctx.superstep())
        })
        .unwrap();
        assert_eq!(r, vec![1, 1]);
        // A process that ends while the other syncs: both get the mismatch, and ending again
        // repeats it.
        let r = run(2, |ctx| {
            if ctx.pid() == 0 {
                let first = ctx.end().unwrap_err();
                let again = ctx.end().unwrap_err();
                assert_eq!(first.to_string(), again.to_string());
                return Err(first);
            }
            ctx.sync()
        });
        expect_err(
            r,
            Misuse,
            "",
            None,
            None,
            &["returned from the SPMD function"],
        );
    });
}

#[test]
fn primitives_after_end_are_misuse() {
    within(60, || {
        let r = run(2, |ctx| {
            ctx.end()?;
            ctx.sync()
        });
        expect_err(
            r,
            Misuse,
            "sync",
            None,
            Some(1),
            &["called after this process ended its part of the run"],
        );
        let r = run(2, |ctx| {
            let x = ctx.push_reg(vec![0u8; 4])?;
            ctx.sync()?;
            ctx.end()?;
            ctx.put(1 - ctx.pid(), &[1], &x, 0)
        });
        expect_err(
            r,
            Misuse,
            "put",
            None,
            Some(2),
            &["called after this process ended"],
        );
        let r = run(2, |ctx| {
            ctx.end()?;
            ctx.send(1 - ctx.pid(), &[], b"late")
        });
        expect_err(
            r,
            Misuse,
            "send",
            None,
            Some(1),
            &["called after this process ended"],
        );
        let r = run(2, |ctx| {
            let x = ctx.push_reg(vec![0u8; 4])?;
            ctx.sync()?;
            ctx.end()?;
            let mut v = [0u8; 4];
            // SAFETY: refused before anything is read.
            unsafe { ctx.direct_get(1 - ctx.pid(), &x, 0, &mut v) }
        });
        expect_err(
            r,
            Misuse,
            "direct_get",
            None,
            Some(2),
            &["called after this process ended"],
        );
    });
}
