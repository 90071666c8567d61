//! Communicable memory (`send_owned`, `move_owned`, the buffer pool; runtime/src/owned.rs) on the
//! engine the harness selects (`common/engine.rs`: threads, or MPI ranks under `mpiexec`): round
//! trips, the queue's order among ordinary messages, type checks, every buffer freed exactly
//! once (failures included), and no allocation per superstep in a steady state (nor per nested
//! run on a reused team).
//!
//! This program's allocator counts, for a few watched allocation sizes, how many blocks of that
//! size were allocated and freed (each test watches a size of its own, which nothing else here
//! allocates), and per thread how many allocations it made.

mod common;
use common::{expect_err, over_ranks, procs, run, skip_part, skip_test, within};
use mbsp::internals::{SyncPoint, fail_next_sync};
use mbsp::{Ctx, ErrorKind, QueueSize, bytemuck};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Watched sizes, in bytes, by slot (0 = none).
static WATCHED: [AtomicUsize; 8] = [const { AtomicUsize::new(0) }; 8];
static ALLOCATED: [AtomicUsize; 8] = [const { AtomicUsize::new(0) }; 8];
static FREED: [AtomicUsize; 8] = [const { AtomicUsize::new(0) }; 8];

thread_local! {
    /// Allocations made by this thread.
    static MINE: Cell<u64> = const { Cell::new(0) };
}

struct Counting;

fn note(size: usize, counts: &[AtomicUsize; 8]) {
    for (w, c) in WATCHED.iter().zip(counts) {
        if w.load(Relaxed) == size {
            c.fetch_add(1, Relaxed);
        }
    }
}

fn note_alloc(size: usize) {
    let _ = MINE.try_with(|n| n.set(n.get() + 1));
    note(size, &ALLOCATED);
}

// SAFETY: forwards to the system allocator; the counting touches no allocation.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note_alloc(l.size());
        // SAFETY: forwarded.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        note_alloc(l.size());
        // SAFETY: forwarded.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        note(l.size(), &FREED);
        // SAFETY: forwarded.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        note(l.size(), &FREED);
        note_alloc(new);
        // SAFETY: forwarded.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Blocks of the size watched in `slot`: (allocated, freed) since the watch began.
fn watch(slot: usize, bytes: usize) {
    WATCHED[slot].store(bytes, Relaxed);
}
fn watched(slot: usize) -> (usize, usize) {
    (ALLOCATED[slot].load(Relaxed), FREED[slot].load(Relaxed))
}

/// Allocations this thread has made.
fn my_allocations() -> u64 {
    MINE.with(|n| n.get())
}

/// A buffer of `n` elements from the pool, filled with `f(i)`.
fn filled(ctx: &Ctx, n: usize, f: impl Fn(usize) -> u64) -> mbsp::Result<Vec<u64>> {
    let mut v = ctx.buffer::<u64>(n)?;
    v.extend((0..n).map(f));
    Ok(v)
}

#[test]
fn round_trips_hand_over_the_buffer_itself() {
    for p in procs([2, 3]) {
        let got = within(60, move || {
            run(p, |ctx| {
                let (me, p) = (ctx.pid(), ctx.nprocs());
                ctx.set_tagsize(8)?;
                ctx.sync()?;
                // To everyone, itself included: 100 * me + to in each of (to + 1) * 1000 words,
                // tagged with the buffer's address.
                for to in 0..p {
                    let v = filled(ctx, (to + 1) * 1000, |_| (100 * me + to) as u64)?;
                    let at = v.as_ptr() as u64;
                    ctx.send_owned(to, &at.to_ne_bytes(), v)?;
                }
                ctx.sync()?;
                assert_eq!(
                    ctx.qsize()?,
                    QueueSize {
                        messages: p,
                        bytes: p * (me + 1) * 8000
                    }
                );
                let mut out = Vec::new();
                while let Some(m) = ctx.move_owned::<u64>()? {
                    let at = m.tag_as::<u64>();
                    let v = m.payload;
                    assert_eq!(v.len(), (me + 1) * 1000);
                    let from = (v[0] as usize - me) / 100;
                    assert!(v.iter().all(|&x| x == (100 * from + me) as u64));
                    // On threads the buffer is the one sent; over ranks, one of our pool.
                    out.push((from as u64, u64::from(v.as_ptr() as u64 == at)));
                    ctx.recycle(v);
                }
                assert_eq!(ctx.qsize()?, QueueSize::default());
                Ok(out)
            })
            .unwrap()
        });
        for (me, mine) in got.into_iter().enumerate() {
            let from: Vec<u64> = mine.iter().map(|x| x.0).collect();
            assert_eq!(
                from,
                (0..p as u64).collect::<Vec<_>>(),
                "pid {me}: senders in order"
            );
            // Over ranks the bytes travel (and may land in the very buffer the sender
            // recycled, for a message to itself).
            if !over_ranks() {
                assert!(
                    mine.iter().all(|x| x.1 == 1),
                    "pid {me}: a buffer was copied: {mine:?}"
                );
            }
        }
    }
}

#[test]
fn owned_and_ordinary_messages_keep_their_send_order() {
    for p in procs([2, 3]) {
        let got = within(60, move || {
            run(p, |ctx| {
                let (me, p) = (ctx.pid(), ctx.nprocs());
                let x = ctx.push_reg(vec![0u64; p])?;
                ctx.set_tagsize(2)?;
                ctx.sync()?;
                let data = [7u8; 3];
                for to in 0..p {
                    let t = |k: u8| [me as u8, k];
                    ctx.send(to, &t(0), b"plain")?;
                    ctx.send_owned(to, &t(1), vec![me as u32; 3])?;
                    // SAFETY: `data` is neither changed nor freed before the sync.
                    unsafe { ctx.hpsend(to, &t(2), &data)? };
                    ctx.send_owned(to, &t(3), vec![me as u64 + 1; 2])?;
                    ctx.put(to, &[me as u64 + 10], &x, me)?;
                    ctx.send_pod(to, &t(4), &[5.0f64])?;
                }
                ctx.sync()?;
                // 5 messages from each sender: 5 + 12 + 3 + 16 + 8 payload bytes.
                assert_eq!(
                    ctx.qsize()?,
                    QueueSize {
                        messages: 5 * p,
                        bytes: 44 * p
                    }
                );
                let puts = ctx.local(&x)?.to_vec();
                assert_eq!(puts, (10..10 + p as u64).collect::<Vec<_>>());
                let mut order = Vec::new();
                for from in 0..p {
                    // Read every kind through every accessor.
                    let (len, tag) = ctx.get_tag()?.unwrap();
                    assert_eq!((len, tag), (5, &[from as u8, 0][..]));
                    let plain = ctx.move_owned::<u8>()?.unwrap();
                    assert_eq!(plain.payload, b"plain");
                    order.push(plain.tag[1]);
                    let owned = ctx.peek()?.unwrap();
                    assert_eq!(
                        owned.payload,
                        bytemuck::cast_slice::<u32, u8>(&[from as u32; 3])
                    );
                    let m = ctx.hpmove()?.unwrap();
                    assert_eq!(m.payload_as::<u32>(), &[from as u32; 3]);
                    order.push(m.tag[1]);
                    let hp = ctx.move_owned::<[u8; 3]>()?.unwrap();
                    assert_eq!(hp.payload, vec![[7u8; 3]]);
                    order.push(hp.tag[1]);
                    let mut buf = [0u64; 4];
                    let tag = ctx.get_tag()?.unwrap().1[1];
                    let n = ctx.move_message(bytemuck::cast_slice_mut(&mut buf))?;
                    assert_eq!((n, &buf[..2]), (Some(16), &[from as u64 + 1; 2][..]));
                    order.push(tag);
                    let last = ctx.move_owned::<f64>()?.unwrap();
                    assert_eq!(last.payload, vec![5.0]);
                    order.push(last.tag[1]);
                }
                assert!(ctx.move_owned::<u64>()?.is_none());
                Ok(order)
            })
            .unwrap()
        });
        let want: Vec<u8> = (0..p).flat_map(|_| 0..5u8).collect();
        assert!(got.iter().all(|o| *o == want), "{got:?}");
    }
}

#[test]
fn moving_as_another_type_is_a_misuse_naming_both() {
    let r = within(60, || {
        run(2, |ctx| {
            ctx.sync()?;
            ctx.send_owned(1 - ctx.pid(), &[], vec![1u32, 2, 3])?;
            ctx.sync()?;
            if ctx.pid() == 1 {
                ctx.move_owned::<f64>()?;
            }
            ctx.sync()?;
            Ok(())
        })
    });
    expect_err(
        r,
        ErrorKind::Misuse,
        "move_owned",
        Some(1),
        Some(2),
        &["from pid 0", "Vec<u32>", "not a Vec<f64>"],
    );
    // An ordinary message whose length is not a whole number of elements.
    let r = within(60, || {
        run(2, |ctx| {
            ctx.send(1 - ctx.pid(), &[], &[1u8; 7])?;
            ctx.sync()?;
            if ctx.pid() == 0 {
                ctx.move_owned::<u32>()?;
            }
            ctx.sync()?;
            Ok(())
        })
    });
    expect_err(
        r,
        ErrorKind::Misuse,
        "move_owned",
        Some(0),
        Some(1),
        &["from pid 1", "7 payload bytes", "u32 (4 bytes each)"],
    );
    // Sends are checked like any other.
    let r = within(60, || {
        run(2, |ctx| {
            ctx.send_owned(2, &[], vec![1u8])?;
            Ok(())
        })
    });
    expect_err(
        r,
        ErrorKind::Misuse,
        "send_owned",
        None,
        Some(0),
        &["pid 2 is out of range"],
    );
    let r = within(60, || {
        run(1, |ctx| {
            ctx.buffer::<u64>(usize::MAX / 4)?;
            Ok(())
        })
    });
    expect_err(
        r,
        ErrorKind::Misuse,
        "buffer",
        Some(0),
        Some(0),
        &["isize::MAX"],
    );
}

/// Element counts whose buffers only these tests allocate (watched sizes).
const N_LEAK: usize = 12_345;
const N_FAIL: usize = 12_347;
const N_POOL: usize = 12_349;
const N_LAZY: usize = 12_351;

#[test]
fn every_buffer_is_freed_once_whether_moved_read_or_ignored() {
    if common::needs_procs(3) {
        return;
    }
    let bytes = N_LEAK * 8;
    watch(0, bytes);
    let sent = within(60, move || {
        run(3, |ctx| {
            let (me, p) = (ctx.pid(), ctx.nprocs());
            let mut sent = 0u64;
            for _ in 0..4 {
                // To each other process: one moved out, one read in place, one ignored.
                for to in (0..p).filter(|&to| to != me) {
                    for k in 0..3u64 {
                        let mut v = Vec::with_capacity(N_LEAK);
                        v.resize(N_LEAK, k);
                        ctx.send_owned(to, &[], v)?;
                        sent += 1;
                    }
                }
                ctx.sync()?;
                // From each sender: the first moved out, the second read in place, the third
                // dropped unread, but the last sender's third only peeked at (left in the queue).
                for i in 0..p - 1 {
                    let v = ctx.move_owned::<u64>()?.unwrap().payload;
                    assert_eq!((v.len(), v[0]), (N_LEAK, 0));
                    assert_eq!(ctx.hpmove()?.unwrap().payload_as::<u64>()[N_LEAK - 1], 1);
                    assert_eq!(ctx.peek()?.unwrap().payload.len(), bytes);
                    if i < p - 2 {
                        assert_eq!(ctx.move_message(&mut [])?, Some(bytes));
                    }
                }
                assert_eq!(ctx.qsize()?.messages, 1);
            }
            // The last superstep's messages are never received.
            ctx.send_owned((me + 1) % p, &[], vec![9u64; N_LEAK])?;
            Ok(sent + 1)
        })
        .unwrap()
        .iter()
        .sum::<u64>()
    });
    let (allocated, freed) = watched(0);
    assert_eq!(
        allocated, freed,
        "every buffer freed ({allocated} allocated)"
    );
    if over_ranks() {
        assert!(allocated > 0);
    } else {
        // One allocation per buffer sent, none to receive: nothing was copied.
        assert_eq!(allocated as u64, sent);
    }
}

#[test]
fn failures_with_owned_messages_in_flight_free_every_buffer() {
    if common::needs_procs(3) {
        return;
    }
    watch(1, N_FAIL * 8);
    // Where pid 1 fails: 0 = before the sync that would deliver (the messages stay in the
    // senders' outboxes), 1 = after it, having moved one out and read another in place, 2 =
    // in a sync (an injected fault, threads only) with messages of two supersteps around.
    for case in 0..3 {
        if case == 2 && skip_part("fault injection inside a sync is the thread engine's") {
            continue;
        }
        let before = watched(1);
        // Counted when the run returns, on the thread that ran it: the buffers are freed by
        // then, not when that thread's worker team is dropped.
        let (r, after) = within(60, move || {
            let r = run(3, move |ctx| {
                let (me, p) = (ctx.pid(), ctx.nprocs());
                for to in 0..p {
                    for _ in 0..2 {
                        ctx.send_owned(to, &[], vec![me as u64; N_FAIL])?;
                    }
                }
                if case == 0 && me == 1 {
                    panic!("pid 1 fails with owned messages unsent");
                }
                ctx.sync()?;
                if me == 1 {
                    let v = ctx.move_owned::<u64>()?.unwrap().payload;
                    assert_eq!(v[0], 0);
                    ctx.hpmove()?.unwrap();
                    if case == 1 {
                        panic!("pid 1 fails holding an owned message");
                    }
                    fail_next_sync(ctx, SyncPoint::AfterBarrier1);
                }
                for to in 0..p {
                    ctx.send_owned(to, &[], vec![me as u64; N_FAIL])?;
                }
                ctx.sync()?;
                ctx.sync()?;
                Ok(())
            });
            (r, watched(1))
        });
        let e = r.expect_err("the run fails");
        assert!(
            matches!(e.kind(), ErrorKind::Panic | ErrorKind::Abort),
            "case {case}: {e}"
        );
        let (allocated, freed) = (after.0 - before.0, after.1 - before.1);
        assert!(allocated > 0, "case {case}");
        assert_eq!(allocated, freed, "case {case}: every buffer freed once");
    }
}

#[test]
fn the_pool_hands_back_recycled_buffers_and_keeps_a_bounded_number() {
    if skip_test("a thread run of one process (the pool is the same code on either engine)") {
        return;
    }
    watch(2, N_POOL * 4);
    within(60, || {
        // One process: the watched counts are this run's alone.
        mbsp::run(1, |ctx| {
            let a = ctx.buffer::<u32>(N_POOL)?;
            let small = ctx.buffer::<u32>(10)?;
            assert!(a.is_empty() && a.capacity() >= N_POOL);
            let (at, small_at) = (a.as_ptr(), small.as_ptr());
            ctx.recycle(a);
            ctx.recycle(small);
            // The smallest that fits.
            let b = ctx.buffer::<u32>(5)?;
            assert_eq!(b.as_ptr(), small_at);
            let c = ctx.buffer::<u32>(N_POOL)?;
            assert_eq!(c.as_ptr(), at);
            assert_eq!(watched(2).0, 1);
            // Another element type has its own pool.
            let d = ctx.buffer::<f32>(N_POOL)?;
            assert_eq!(watched(2).0, 2);
            ctx.recycle(d);
            // At most max(64, 2p) = 64 kept per type.
            let many = (0..100)
                .map(|_| ctx.buffer::<u32>(N_POOL))
                .collect::<mbsp::Result<Vec<_>>>()?;
            assert_eq!(watched(2), (102, 0));
            many.into_iter().for_each(|v| ctx.recycle(v));
            assert_eq!(watched(2), (102, 100 - 64), "recycled beyond 64: freed");
            let again = (0..100)
                .map(|_| ctx.buffer::<u32>(N_POOL))
                .collect::<mbsp::Result<Vec<_>>>()?;
            assert_eq!(watched(2), (102 + 36, 36), "64 from the pool, 36 new");
            drop((again, b, c));
            Ok(())
        })
        .unwrap()
    });
    let (allocated, freed) = watched(2);
    assert_eq!(allocated, freed);
}

#[test]
fn a_steady_loop_of_owned_messages_allocates_nothing() {
    if skip_test("the rank engine's exchange allocates in every sync") {
        return;
    }
    // Fewer under scripts/memcheck (`MBSP_TEST_MEMCHECK`), where each costs a hundred times more.
    let steps = if std::env::var_os("MBSP_TEST_MEMCHECK").is_some() {
        200
    } else {
        2000
    };
    for (p, lazy) in [(2, false), (3, false), (3, true)] {
        let per_proc = within(120, move || {
            mbsp::run(p, |ctx| {
                let (me, p) = (ctx.pid(), ctx.nprocs());
                let mut counted = 0;
                for step in 0..steps + 20 {
                    if step == 20 {
                        counted = my_allocations();
                    }
                    // Each process hands a buffer to every process (itself included), plus an
                    // ordinary message, receives them, and recycles what it got.
                    for to in 0..p {
                        let mut v = ctx.buffer::<f64>(4096)?;
                        v.resize(4096, (me * step) as f64);
                        ctx.send_owned(to, &[], v)?;
                        ctx.send_pod(to, &(), &[step as u64])?;
                    }
                    if lazy {
                        ctx.declare_incoming(2 * p)?; // a lazy sync: the records counted
                    }
                    ctx.sync()?;
                    for from in 0..p {
                        let v = ctx.move_owned::<f64>()?.unwrap().payload;
                        assert_eq!(v[4095], (from * step) as f64);
                        ctx.recycle(v);
                        assert_eq!(ctx.hpmove()?.unwrap().payload_as::<u64>(), &[step as u64]);
                    }
                }
                Ok(my_allocations() - counted)
            })
            .unwrap()
        });
        assert_eq!(
            per_proc,
            vec![0; p],
            "allocations per process in {steps} supersteps at p = {p} (lazy: {lazy})"
        );
    }
}

/// Assert that a loop of nested runs of 2 running `body(ctx, run)` (`what` they do) allocates
/// nothing once warm ([`nested_run_allocations`]).
fn assert_nested_runs_allocate_nothing(
    what: &str,
    body: impl Fn(&mut Ctx, usize) -> mbsp::Result<()> + Send + Sync + 'static,
) {
    let (starter, worker) = nested_run_allocations(body);
    assert_eq!(
        starter, 0,
        "the starter's allocations in {RUNS} nested runs {what}"
    );
    assert!(
        worker.iter().all(|&n| n == 0),
        "pid 1's allocations from one nested run {what} to the next: {worker:?}"
    );
}

/// The allocations of a loop of nested runs of 2 running `body(ctx, run)`, started by pid 1
/// of a top-level run of 2: a worker thread bound to exactly its placement, where the nested
/// run stacks both its processes, so their placement is the thread's binding and no binding
/// call is made (pid 0, the test's thread, may keep a wider binding and narrow it or not as
/// the scheduler places it: a system call that allocates). Counted after five runs: the
/// starter's thread over `RUNS` runs, and the worker running the nested pid 1 (the team's, the
/// same thread every time) from the end of its body in one run to the next.
fn nested_run_allocations(
    body: impl Fn(&mut Ctx, usize) -> mbsp::Result<()> + Send + Sync + 'static,
) -> (u64, Vec<u64>) {
    within(120, move || {
        let at: Vec<std::sync::atomic::AtomicU64> = (0..RUNS).map(|_| Default::default()).collect();
        let starter = mbsp::run(2, |ctx| {
            let mut counted = 0;
            if ctx.pid() == 1 {
                for i in 0..RUNS + 5 {
                    if i == 5 {
                        counted = my_allocations();
                    }
                    ctx.run(2, |n| {
                        body(n, i)?;
                        if n.pid() == 1 && i >= 5 {
                            at[i - 5].store(my_allocations(), Relaxed);
                        }
                        Ok(())
                    })?;
                }
                counted = my_allocations() - counted;
            }
            ctx.sync()?;
            Ok(counted)
        })
        .unwrap();
        let worker: Vec<u64> = at
            .windows(2)
            .map(|w| w[1].load(Relaxed) - w[0].load(Relaxed))
            .collect();
        (starter[1], worker)
    })
}

/// The nested runs of [`nested_run_allocations`].
const RUNS: usize = 200;

#[test]
fn a_steady_loop_of_nested_runs_allocates_nothing() {
    if skip_test("the nested runs are the thread engine's; this test starts its own top level") {
        return;
    }
    assert_nested_runs_allocate_nothing("that only sync", |n, _| n.sync());
}

#[test]
fn a_steady_loop_of_nested_runs_that_communicate_allocates_nothing() {
    if skip_test("the nested runs are the thread engine's; this test starts its own top level") {
        return;
    }
    // Each nested run registers an area of each process's stack (no allocation of the
    // program's own) and sets a tag size in its first superstep, puts a word into the other's,
    // gets one from it and sends it a tagged message in the next, and every other run pops the
    // area: the registration tables, the request lists and each process's private lists
    // (changes, free slots, gets, message queue) keep their room from one run to the next, and
    // a tag size all set alike is agreed without copying requests.
    assert_nested_runs_allocate_nothing("that communicate", |n, i| {
        let mut area = [0u64; 4];
        let at_area = area.as_mut_ptr() as *mut u8;
        // SAFETY: `area` outlives the registration, which the run's end releases (the final
        // sync returns only once nobody touches it).
        unsafe { n.push_reg_raw(at_area, 32)? };
        n.set_tagsize(4)?;
        n.sync()?;
        // The other process registered its own `area` in the same order.
        n.put_raw(1 - n.pid(), &[7u8; 8], at_area, 8)?;
        let mut got = [0u8; 8];
        // SAFETY: `got` outlives the sync that writes it.
        unsafe { n.get_raw(1 - n.pid(), at_area, 0, got.as_mut_ptr(), 8)? };
        n.send(1 - n.pid(), &[1, 2, 3, 4], &[9u8; 8])?;
        n.sync()?;
        assert_eq!(area[1], u64::from_ne_bytes([7; 8]));
        assert_eq!(got, [0; 8], "the get reads the area before the put lands");
        let mut msg = [0u8; 8];
        assert_eq!(n.move_message(&mut msg)?, Some(8));
        assert_eq!(msg, [9; 8]);
        // Every other run pops it too (its slot goes to the free list).
        if i % 2 == 0 {
            n.pop_reg_raw(at_area)?;
            n.sync()?;
        }
        Ok(())
    });
}

#[test]
fn owned_messages_count_in_the_profile_as_their_bytes_their_payload_immediate() {
    if skip_test(
        "a thread run's profile (Run::run_profiled); send_owned counts the same on either engine",
    ) {
        return;
    }
    let prof = within(60, || {
        mbsp::Run::new(2)
            .run_profiled(|ctx| {
                ctx.send_owned(1 - ctx.pid(), &[], vec![1u64; 100])?;
                ctx.send(1 - ctx.pid(), &[], &[1u8; 8])?;
                ctx.set_tagsize(9)?; // from the next superstep
                ctx.sync()?;
                // A tag of 9 bytes: two words queued, the payload's 100 words not copied.
                ctx.send_owned(1 - ctx.pid(), &[7u8; 9], vec![1u64; 100])?;
                ctx.sync()?;
                Ok(())
            })
            .unwrap()
            .1
    });
    let s = &prof.supersteps[0];
    for me in &s.procs {
        assert_eq!((me.messages_sent, me.messages_received), (2, 2));
        assert_eq!((me.bytes_sent, me.words_sent), (808, 101));
        // The payload is read where its sender wrote it: in the receiver's computation, as
        // a direct get's words are, so it is out of the sync's h.
        assert_eq!(me.immediate_words_sent, 100);
        assert_eq!(me.immediate_words_received, 100);
    }
    assert_eq!((s.h(), s.h_immediate(), s.requests()), (1, 100, 2));
    let s = &prof.supersteps[1];
    for me in &s.procs {
        assert_eq!((me.bytes_sent, me.words_sent), (809, 102));
    }
    assert_eq!((s.h(), s.h_immediate()), (2, 100));
}

#[test]
fn owned_messages_in_lazy_supersteps_arrive_and_are_freed() {
    if common::needs_procs(3) {
        return;
    }
    watch(3, N_LAZY * 8);
    let got = within(60, || {
        run(3, |ctx| {
            let (me, p) = (ctx.pid(), ctx.nprocs());
            let right = (me + 1) % p;
            let mut sum = 0u64;
            for step in 0..50u64 {
                let mut v = ctx.buffer::<u64>(N_LAZY)?;
                v.resize(N_LAZY, step * 10 + me as u64);
                ctx.send_owned(right, &[], v)?;
                // Every third superstep a second one, left in the queue (freed at the sync).
                if step % 3 == 0 {
                    ctx.send_owned(right, &[], vec![0u64; N_LAZY])?;
                }
                ctx.declare_incoming(1 + usize::from(step % 3 == 0))?;
                ctx.sync()?;
                let v = ctx.move_owned::<u64>()?.unwrap().payload;
                assert_eq!(v[N_LAZY - 1], step * 10 + ((me + p - 1) % p) as u64);
                sum += v[0];
                ctx.recycle(v);
            }
            Ok(sum)
        })
        .unwrap()
    });
    let left = |me: u64| (me + 2) % 3;
    for (me, s) in got.iter().enumerate() {
        assert_eq!(*s, (0..50).map(|k| k * 10 + left(me as u64)).sum::<u64>());
    }
    let (allocated, freed) = watched(3);
    assert_eq!(
        allocated, freed,
        "every buffer freed ({allocated} allocated)"
    );
}

#[test]
fn empty_buffers_and_empty_messages_travel_too() {
    let got = within(60, || {
        run(2, |ctx| {
            let other = 1 - ctx.pid();
            ctx.send_owned(other, &[], Vec::<u16>::new())?;
            ctx.send(other, &[], &[])?;
            ctx.send_owned(other, &[], ctx.buffer::<u16>(0)?)?;
            ctx.sync()?;
            assert_eq!(
                ctx.qsize()?,
                QueueSize {
                    messages: 3,
                    bytes: 0
                }
            );
            let mut lens = Vec::new();
            while let Some(m) = ctx.move_owned::<u16>()? {
                lens.push(m.payload.len() as u64);
            }
            Ok(lens)
        })
        .unwrap()
    });
    assert_eq!(got, vec![vec![0, 0, 0]; 2]);
}
