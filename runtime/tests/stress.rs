//! Long runs: many supersteps with p = 4 on however many cores the machine has (2 in CI), so the
//! barrier's spin/yield/sleep path and the parity-buffered outboxes are exercised under
//! oversubscription.

mod common;
use common::within;

#[test]
fn hundred_thousand_supersteps_with_four_processes() {
    const STEPS: u64 = 100_000;
    within(600, || {
        let r = mbsp::run(4, |ctx| {
            let p = ctx.nprocs();
            let (me, right) = (ctx.pid(), (ctx.pid() + 1) % p);
            let left = (me + p - 1) % p;
            let ring = ctx.push_reg(vec![0u64; 2])?;
            ctx.sync()?;
            let mut checksum = 0u64;
            for k in 1..=STEPS {
                // A one-word put every superstep, a message every third, an empty superstep
                // every fifth.
                if k % 5 != 0 {
                    ctx.put(right, &[k * 4 + me as u64], &ring, (k % 2) as usize)?;
                }
                if k % 3 == 0 {
                    ctx.send(left, &[], &k.to_le_bytes())?;
                }
                ctx.sync()?;
                if k % 5 != 0 {
                    let got = ctx.local(&ring)?[(k % 2) as usize];
                    assert_eq!(got, k * 4 + left as u64, "superstep {k}");
                    checksum = checksum.wrapping_add(got);
                }
                if k % 3 == 0 {
                    let m = ctx.hpmove()?.expect("one message");
                    assert_eq!(m.payload, &k.to_le_bytes());
                }
                assert!(ctx.hpmove()?.is_none());
            }
            Ok(checksum)
        })
        .unwrap();
        assert_eq!(r.len(), 4);
    });
}

#[test]
fn many_short_runs_and_nested_runs_leave_no_threads_behind() {
    within(300, || {
        for i in 0..300 {
            let r = mbsp::run(3, |ctx| {
                let inner = ctx.run(2, |n| {
                    n.sync()?;
                    Ok(n.pid())
                })?;
                if i % 10 == 0 && ctx.pid() == 1 {
                    return Err(ctx.abort("planned"));
                }
                ctx.sync()?;
                Ok(inner.len())
            });
            assert_eq!(r.is_err(), i % 10 == 0);
        }
    });
    // Every run joins its threads before returning; a leak would show up as growing thread
    // counts in /proc (Linux only).
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        let threads: usize = status
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .map(|v| v.trim().parse().unwrap())
            .unwrap();
        assert!(threads < 50, "{threads} threads alive after 900 runs");
    }
}
