//! A run after one that failed, on the same thread: the kept run state (its barrier, the
//! processes' members, inboxes and mode words) starts afresh, whatever the failed run left in
//! it. A run that fails while the other processes wait at its barrier leaves their arrivals
//! behind; the next run must not count them.

use crate::common::within;
use mbsp::{Ctx, Result, Run};
use std::time::Duration;

/// The failed run: pid 0 stops in superstep 1 only once the others have had time to arrive at
/// that superstep's barrier (and, in a lazy sync, to announce their records to pid 0).
fn fail_at_the_barrier(ctx: &mut Ctx, lazy: bool) -> Result<()> {
    ctx.set_tagsize(8)?;
    ctx.sync()?;
    let (me, p) = (ctx.pid(), ctx.nprocs());
    if me == 0 {
        std::thread::sleep(Duration::from_millis(20));
        return Err(ctx.abort("pid 0 stops while the others wait at the barrier"));
    }
    ctx.send_pod((me + 1) % p, &(me as u64), &[0u8; 0])?;
    if lazy {
        ctx.declare_incoming(usize::from(me >= 2))?;
    }
    ctx.sync()
}

/// The next run: every process but pid 0 sends pid 0 a message late (after a nap), then all
/// sync; pid 0 must find every message. A barrier that counted the failed run's arrivals would
/// let pid 0 through before the others had sent.
fn late_senders(ctx: &mut Ctx, lazy: bool) -> Result<Vec<u64>> {
    let me = ctx.pid();
    if me != 0 {
        std::thread::sleep(Duration::from_millis(10));
        ctx.send_pod(0, &(me as u64), &[0u8; 0])?;
    }
    if lazy {
        ctx.declare_incoming(if me == 0 { ctx.nprocs() - 1 } else { 0 })?;
    }
    ctx.sync()?;
    let mut from = Vec::new();
    while let Some(m) = ctx.hpmove()? {
        from.push(m.tag_as::<u64>());
    }
    from.sort_unstable();
    ctx.sync()?;
    Ok(from)
}

/// On threads and as coroutines, at p = 2 (the pair barrier), 3 and 4 (the dissemination
/// barrier) and 16 (more processes than cores here: the tree barrier), a failed run with full
/// or lazy syncs followed by one with full or lazy syncs.
#[test]
fn a_run_after_one_that_failed_at_its_barrier_waits_for_every_process() {
    within(120, || {
        for (p, coroutines) in [(2, false), (3, false), (4, false), (16, false), (16, true)] {
            for (failed_lazy, next_lazy) in [(false, false), (false, true), (true, false)] {
                let case = format!(
                    "p {p}, coroutines {coroutines}, failed lazy {failed_lazy}, next lazy \
                     {next_lazy}"
                );
                for round in 0..2 {
                    let e = Run::new(p)
                        .coroutines(coroutines)
                        .run(|ctx| fail_at_the_barrier(ctx, failed_lazy))
                        .unwrap_err();
                    assert_eq!(e.pid(), Some(0), "{case}: {e}");
                    let got = Run::new(p)
                        .coroutines(coroutines)
                        .run(|ctx| {
                            ctx.set_tagsize(8)?;
                            ctx.sync()?;
                            late_senders(ctx, next_lazy)
                        })
                        .unwrap_or_else(|e| panic!("{case}, round {round}: {e}"));
                    let want: Vec<u64> = (1..p as u64).collect();
                    assert_eq!(got[0], want, "{case}, round {round}");
                }
            }
        }
    });
}
