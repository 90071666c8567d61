//! Checks mbsp's semantics over MPI ranks — the runtime's own `mbsp::Ctx`, whose top level
//! runs over the ranks when started by `mpiexec` — on however many ranks it is started on
//! (`mpiexec -n P mbsp-mpi-selftest [MODE]`); every rank prints `selftest ok on P ranks` and
//! exits 0, or prints the failure on stderr and exits 1. MODE `model` runs random programs
//! against a sequential model; `hybrid` runs nested thread runs inside every rank;
//! `abort`, `panic`, `misuse` or `mismatch` makes one rank fail on purpose (the run must then
//! fail on every rank, promptly, with that rank's error), `abort-hpget` makes one rank abort
//! while the others `hpget` from it (they must see the failure), `die` makes one rank kill
//! itself with SIGKILL (mpiexec must then end the others); `timing` prints sync costs.
//! `lazy` compares a program with declared counts (`Ctx::declare_incoming`) against the same with full
//! syncs; `lazy-short`, `lazy-many`, `lazy-mixed` (`-late`, `lazy-star`) and `lazy-panic` make
//! one rank declare too many or receive too many records, make a full sync among lazy ones, or
//! panic while the others are in lazy syncs (the run must fail on every rank with one error);
//! `lazy-mixed-late` lets the lazy ranks go on to a full sync of the next superstep,
//! `lazy-star` to lazy syncs that wait for the rank that made the full one.
//! `profile-env` starts a run each way there is (`World::run`, `run_profiled`, `begin`) for
//! `MBSP_PROFILE` to report.

use mbsp::rng::SplitMix64;
use mbsp::{Ctx, ErrorKind, Result};

/// The runtime's own random-program generator and sequential model
/// (`runtime/tests/semantics/model.rs` runs them on either engine).
#[path = "../../../runtime/tests/common/bsplib_model.rs"]
mod bsplib_model;

fn check(ctx: &Ctx, ok: bool, what: &str) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(ctx.abort(format!("check failed: {what}")))
    }
}

fn early_put(ctx: &mut Ctx) -> Result<()> {
    let (me, p) = (ctx.pid(), ctx.nprocs());
    let next = (me + 1) % p;
    let a = ctx.push_reg(vec![me as u64 * 100; me + 2])?;
    let early = ctx.put(next, &[1u64], &a, 0).unwrap_err();
    check(
        ctx,
        early.kind() == ErrorKind::Misuse,
        "a put before the registration's sync fails",
    )?;
    // That put's misuse failed the run on this rank; a fresh run goes on.
    Ok(())
}

fn semantics(ctx: &mut Ctx) -> Result<()> {
    let (me, p) = (ctx.pid(), ctx.nprocs());
    let next = (me + 1) % p;
    // Sizes differ per rank: rank r registers r + 2 words.
    let a = ctx.push_reg(vec![me as u64 * 100; me + 2])?;
    let b = ctx.push_reg(vec![0u64; 4])?;
    ctx.sync()?;
    // Put into the next rank's area, bounds checked against *its* size.
    ctx.put(next, &[me as u64 + 1000], &a, next + 1)?;
    // A get of the area the put writes sees the value before the put.
    ctx.get(next, &a, next + 1..next + 2, &b, 0)?;
    ctx.sync()?;
    let prev = (me + p - 1) % p;
    let mine = ctx.local(&a)?.to_vec();
    check(
        ctx,
        mine[me + 1] == prev as u64 + 1000,
        &format!("put arrived: {mine:?}"),
    )?;
    let got = ctx.local(&b)?[0];
    check(
        ctx,
        got == next as u64 * 100,
        &format!("get saw the value before the put: {got}"),
    )?;
    // Gets after the sync see the put.
    ctx.get(next, &a, next + 1..next + 2, &b, 1)?;
    ctx.sync()?;
    let got = ctx.local(&b)?[1];
    check(
        ctx,
        got == me as u64 + 1000,
        &format!("get after sync: {got}"),
    )?;
    // BSMP: tag size takes effect at the sync; every rank sends to every rank.
    let old = ctx.set_tagsize(4)?;
    check(ctx, old == 0, "initial tag size 0")?;
    ctx.sync()?;
    for to in 0..p {
        let payload = vec![me as u8; to + 1];
        ctx.send(to, &(me as u32).to_le_bytes(), &payload)?;
    }
    ctx.sync()?;
    let q = ctx.qsize()?;
    check(
        ctx,
        q.messages == p && q.bytes == p * (me + 1),
        &format!("queue {q:?}"),
    )?;
    let mut from = Vec::new();
    while let Some(m) = ctx.hpmove()? {
        let s = m.tag_as::<u32>() as usize;
        let ok = m.payload == vec![s as u8; me + 1];
        check(ctx, ok, "payload from its sender")?;
        from.push(s);
    }
    from.sort_unstable();
    check(
        ctx,
        from == (0..p).collect::<Vec<_>>(),
        "one message per sender",
    )?;
    ctx.sync()?;
    check(
        ctx,
        ctx.qsize()?.messages == 0,
        "messages live one superstep",
    )?;
    // Pop: the area is gone after the sync.
    ctx.pop_reg(b)?;
    ctx.sync()?;
    let t = ctx.time();
    check(ctx, t > 0.0, "time runs")?;
    // Many small supersteps: a ring of puts.
    let ring = ctx.push_reg(vec![0u64; 1])?;
    ctx.sync()?;
    for step in 0..200u64 {
        ctx.put(next, &[step * p as u64 + me as u64], &ring, 0)?;
        ctx.sync()?;
        let v = ctx.local(&ring)?[0];
        check(ctx, v == step * p as u64 + prev as u64, "ring")?;
    }
    high_performance(ctx)
}

/// hpput, hpget, direct_get (one-sided over ranks), hpsend, raw registrations and NULL pops.
fn high_performance(ctx: &mut Ctx) -> Result<()> {
    let (me, p) = (ctx.pid(), ctx.nprocs());
    let (next, prev) = ((me + 1) % p, (me + p - 1) % p);
    // Large puts (received in place over ranks) land, and a get of the same superstep still
    // sees the value before them.
    // Large gets too (sent apart), into memory no get reads (in place) and into get sources
    // (through the get buffer).
    let big = ctx.push_reg(vec![me as u64; 20_000])?;
    let big2 = ctx.push_reg(vec![me as u64 + 50; 10_000])?;
    let big3 = ctx.push_reg(vec![0u64; 6000])?;
    let seen = ctx.push_reg(vec![0u64; 1])?;
    ctx.sync()?;
    ctx.put(next, &vec![me as u64 + 1; 9000], &big, 500)?;
    ctx.put(next, &vec![me as u64 + 7; 5000], &big, 0)?;
    ctx.get(next, &big, 600..601, &seen, 0)?;
    ctx.get(next, &big, 2000..8000, &big2, 0)?;
    ctx.get(next, &big2, 0..6000, &big, 12_000)?;
    ctx.get(next, &big, 2000..8000, &big3, 0)?;
    ctx.sync()?;
    let mine = ctx.local(&big)?;
    let ok = mine[..500].iter().all(|&v| v == prev as u64 + 7)
        && mine[5000..9500].iter().all(|&v| v == prev as u64 + 1)
        && mine[9500..12_000].iter().all(|&v| v == me as u64)
        && mine[12_000..18_000].iter().all(|&v| v == next as u64 + 50)
        && mine[18_000..].iter().all(|&v| v == me as u64);
    check(ctx, ok, "large puts and gets landed in big")?;
    let two = ctx.local(&big2)?;
    let ok = two[..6000].iter().all(|&v| v == next as u64)
        && two[6000..].iter().all(|&v| v == me as u64 + 50);
    check(ctx, ok, "a large get into a get source")?;
    let ok = ctx.local(&big3)?.iter().all(|&v| v == next as u64);
    check(ctx, ok, "a large get in place")?;
    ctx.pop_reg(big2)?;
    ctx.pop_reg(big3)?;
    check(
        ctx,
        ctx.local(&seen)?[0] == next as u64,
        "a get before large puts",
    )?;
    let src = vec![me as u64 + 100; 9999];
    // SAFETY: `src` lives, unchanged, until the sync; nobody else writes `big` of `next`.
    unsafe { ctx.hpput(next, &src, &big, 1)? };
    ctx.sync()?;
    let ok = ctx.local(&big)?[1..10_000]
        .iter()
        .all(|&v| v == prev as u64 + 100);
    check(ctx, ok, "a large hpput landed")?;
    ctx.pop_reg(big)?;
    ctx.pop_reg(seen)?;
    // Many supersteps of large puts in a ring, growing (the shared segments between ranks of
    // a node are made anew several times) and then steady (double-buffered halves reused):
    // every superstep's data must be its own.
    let ring = ctx.push_reg(vec![0u64; 1 << 16])?;
    ctx.sync()?;
    for step in 0..24u64 {
        let words = (4096usize << (step.min(4) as usize)).min(1 << 16) - step as usize;
        let v = step * 1000 + me as u64;
        ctx.put(next, &vec![v; words], &ring, 0)?;
        ctx.sync()?;
        let got = &ctx.local(&ring)?[..words];
        let want = step * 1000 + prev as u64;
        check(
            ctx,
            got.iter().all(|&x| x == want),
            &format!("large put ring, superstep {step}"),
        )?;
    }
    ctx.pop_reg(ring)?;
    let mut x = ctx.push_reg(vec![me as u64; 8])?;
    let y = ctx.push_reg(vec![0u64; 8])?;
    ctx.sync()?;
    let mut got = [0u64; 3];
    // SAFETY: nobody writes x in this superstep; `got` outlives the call.
    unsafe { ctx.direct_get(next, &x, 2, &mut got)? };
    check(ctx, got == [next as u64; 3], &format!("direct_get {got:?}"))?;
    let src = [me as u64 + 7; 2];
    // SAFETY: y's words 4..6 of `next` are written by nobody else this superstep; `src` lives
    // until the sync.
    unsafe { ctx.hpput(next, &src, &y, 4)? };
    ctx.sync()?;
    check(
        ctx,
        ctx.local(&y)?[4..6] == [prev as u64 + 7; 2],
        "hpput landed by the sync",
    )?;
    ctx.local_mut(&mut x)?[0] = 1000 + me as u64;
    ctx.sync()?;
    let mut one = [0u64; 1];
    // SAFETY: as above.
    unsafe { ctx.hpget(prev, &x, 0, &mut one)? };
    ctx.sync()?;
    check(
        ctx,
        one[0] == 1000 + prev as u64,
        "hpget saw the last superstep's write",
    )?;
    // hpsend: the payload is read at the sync.
    ctx.set_tagsize(8)?;
    ctx.sync()?;
    let payload = vec![me as u8; 5];
    // SAFETY: `payload` lives, unchanged, until the sync.
    unsafe { ctx.hpsend(next, &(me as u64).to_le_bytes(), &payload)? };
    ctx.sync()?;
    let m = ctx.hpmove()?;
    let ok = m.is_some_and(|m| m.tag_as::<u64>() == prev as u64 && m.payload == [prev as u8; 5]);
    check(ctx, ok, "hpsend arrived")?;
    // Raw registrations (BSPlib's), a NULL registration popped by NULL.
    let mut raw = vec![0u8; 16 + me];
    // SAFETY: `raw` stays allocated, and is not referenced across syncs, until popped.
    unsafe {
        ctx.push_reg_raw(raw.as_mut_ptr(), raw.len())?;
        ctx.push_reg_raw(std::ptr::null_mut(), 0)?;
    }
    ctx.sync()?;
    ctx.put_raw(next, &[9u8, 8, 7], raw.as_ptr(), 16 + next - 3)?;
    ctx.sync()?;
    let tail = raw[raw.len() - 3..].to_vec();
    check(ctx, tail == [9, 8, 7], &format!("raw put {tail:?}"))?;
    ctx.pop_reg_raw(std::ptr::null())?;
    ctx.pop_reg_raw(raw.as_ptr())?;
    ctx.sync()?;
    check(ctx, ctx.registrations() == 4, "a, ring, x and y left")?;
    Ok(())
}

/// Mode `hybrid`: each rank runs nested thread runs over its own machine (2 threads, then
/// one per core), with registrations and puts inside; the rank's top level goes on after.
/// A program of puts, messages, owned messages and large puts whose supersteps declare their
/// counts when `lazy` (else every sync is full); returns what every superstep observed (the
/// words put, a digest of the large put, the messages in queue order).
fn lazy_program(ctx: &mut Ctx, lazy: bool) -> Result<Vec<u64>> {
    let (me, p) = (ctx.pid(), ctx.nprocs());
    let (next, prev) = ((me + 1) % p, (me + p - 1) % p);
    let a = ctx.push_reg(vec![0u64; 4])?;
    // Larger than the rank engine's large-put threshold (32 KiB).
    let big = ctx.push_reg(vec![0u8; 40 << 10])?;
    ctx.set_tagsize(8)?;
    ctx.sync()?;
    let mut seen = Vec::new();
    for step in 0..16u64 {
        let mut records = 0;
        let word = step * 100 + me as u64;
        match step % 5 {
            // A ring of one-word puts.
            0 => {
                ctx.put(next, &[word], &a, 0)?;
                records = 1;
            }
            // All-to-all messages (our own included) and a put to the left.
            1 => {
                for j in 0..p {
                    ctx.send(j, &word.to_le_bytes(), &[me as u8, j as u8, step as u8])?;
                }
                ctx.put(prev, &[word, word + 1], &a, 1)?;
                records = p + 1;
            }
            // A large put and two messages to the right.
            2 => {
                let data: Vec<u8> = (0..40 << 10).map(|i| (i as u64 * 7 + word) as u8).collect();
                ctx.put(next, &data, &big, 0)?;
                ctx.send(next, &word.to_le_bytes(), b"first")?;
                ctx.send(next, &word.to_le_bytes(), b"second")?;
                records = 3;
            }
            // An owned message to the right and a message to ourselves.
            3 => {
                ctx.send_owned(next, &word.to_le_bytes(), vec![word; 5])?;
                ctx.send(me, &word.to_le_bytes(), b"selfself")?;
                records = 2;
            }
            // Nothing (a rank with nothing to receive does not wait).
            _ => {}
        }
        if lazy {
            ctx.declare_incoming(records)?;
        }
        ctx.sync()?;
        seen.extend_from_slice(ctx.local(&a)?);
        let b = ctx.local(&big)?;
        seen.push(
            b.iter()
                .fold(0u64, |h, &x| h.wrapping_mul(31).wrapping_add(x as u64)),
        );
        if step % 5 == 3 {
            // The owned message and the plain one to ourselves, in sender order.
            while let Some(m) = ctx.move_owned::<u64>()? {
                seen.push(m.tag_as::<u64>());
                seen.extend_from_slice(&m.payload);
            }
        }
        while let Some(m) = ctx.peek()? {
            seen.push(m.tag_as::<u64>());
            seen.extend(m.payload.iter().map(|&x| x as u64));
            let mut sink = [0u8; 16];
            ctx.move_message(&mut sink)?;
        }
    }
    Ok(seen)
}

/// Lazy syncs over ranks give what full syncs give; the messages of the all-to-all superstep
/// come in sender order.
fn lazy_semantics(ctx: &mut Ctx) -> Result<()> {
    let p = ctx.nprocs();
    let full = lazy_program(ctx, false)?;
    let lazy = lazy_program(ctx, true)?;
    check(
        ctx,
        full == lazy,
        "lazy syncs observe what full syncs observe",
    )?;
    // The all-to-all superstep (1): after the words of `a` (4) and the digest (1), each
    // message is its tag then 3 payload bytes: the senders in order 0..p.
    let per_step: usize = 5;
    let start = per_step; // step 0 has no messages
    let senders: Vec<u64> = (0..p).map(|k| full[start + per_step + 4 * k + 1]).collect();
    check(
        ctx,
        senders == (0..p as u64).collect::<Vec<_>>(),
        &format!("messages in sender order: {senders:?}"),
    )?;
    Ok(())
}

fn hybrid(ctx: &mut Ctx) -> Result<()> {
    let (me, p) = (ctx.pid(), ctx.nprocs());
    let total = ctx.push_reg(vec![0u64; p])?;
    ctx.sync()?;
    for round in 0..3u64 {
        let sums = ctx.run(2, |n| {
            let s = n.push_reg(vec![0u64; 2])?;
            n.sync()?;
            let v = (me as u64 + 1) * 10 + n.pid() as u64 + round;
            for to in 0..2 {
                n.put(to, &[v], &s, n.pid())?;
            }
            n.sync()?;
            Ok(n.local(&s)?.iter().sum::<u64>())
        })?;
        check(
            ctx,
            sums.len() == 2 && sums[0] == sums[1],
            &format!("nested sums {sums:?}"),
        )?;
        for to in 0..p {
            ctx.put(to, &[sums[0]], &total, me)?;
        }
        ctx.sync()?;
        let all = ctx.local(&total)?.to_vec();
        let want: Vec<u64> = (0..p as u64)
            .map(|r| 2 * ((r + 1) * 10 + round) + 1)
            .collect();
        check(
            ctx,
            all == want,
            &format!("round {round}: {all:?}, want {want:?}"),
        )?;
    }
    // Nested processes are placed inside the rank's own PUs (its cpuset under
    // `mpiexec -bind-to core`, the whole machine when the launcher does not bind).
    let rank_pus = ctx.domain().pu_os(ctx.machine());
    let per_core = ctx.run_per(mbsp::Level::Core, |n| Ok(n.domain().pu_os(n.machine())))?;
    let inside = per_core.iter().flatten().all(|pu| rank_pus.contains(pu));
    check(
        ctx,
        !per_core.is_empty() && inside,
        &format!("a run per core inside the rank's PUs {rank_pus:?}: {per_core:?}"),
    )?;
    Ok(())
}

/// The CPUs (OS indices) the launcher left this rank's main thread, read once, before any run.
fn launcher_cpus() -> &'static [u32] {
    static CPUS: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();
    CPUS.get_or_init(|| {
        let loaded = mbsp::Machine::current().unwrap_or_else(|e| fail(&e.to_string()));
        let all = || loaded.machine.pus().iter().map(|u| u.os_index).collect();
        mbsp::topology::Binder::new(&loaded)
            .thread_cpus()
            .unwrap_or_else(all)
    })
}

/// The CPUs this thread may run on now.
fn cpus_now(ctx: &Ctx) -> Vec<u32> {
    let loaded = mbsp::Machine::current().unwrap_or_else(|e| fail(&e.to_string()));
    mbsp::topology::Binder::new(&loaded)
        .thread_cpus()
        .unwrap_or_else(|| ctx.domain().pu_os(ctx.machine()))
}

/// `cpus` as a bit mask of `words` words.
fn mask(cpus: &[u32], words: usize) -> Vec<u64> {
    let mut m = vec![0u64; words];
    for &c in cpus {
        m[c as usize / 64] |= 1 << (c % 64);
    }
    m
}

/// Mode `shares` (all ranks on one node, as here): the node's ranks divide it. Every rank's
/// share lies in what the launcher left it; ranks the launcher left the same CPUs split them
/// (disjoint shares covering them, when there are no more ranks than cores), ranks it bound
/// apart keep their binding, and so does every rank under `MBSP_RANK_SHARE=launcher`; the rank's thread is bound to its share; nested runs of 1, 2 and
/// 3 processes (and runs nested in those) place and bind every thread inside the share, and
/// each thread has its binding back after the runs nested in it.
fn shares(ctx: &mut Ctx) -> Result<()> {
    let (me, p) = (ctx.pid(), ctx.nprocs());
    let m = ctx.machine().clone();
    let bound = matches!(ctx.placement().binding, mbsp::Binding::Applied(_));
    let share = ctx.domain().pu_os(&m);
    let launcher = launcher_cpus().to_vec();
    let cores = m.cores().len();
    let words = m
        .pus()
        .iter()
        .map(|u| u.os_index as usize)
        .max()
        .unwrap_or(0)
        / 64
        + 1;
    let all = ctx.push_reg(vec![0u64; 2 * words * p])?;
    ctx.sync()?;
    let mut row = mask(&launcher, words);
    row.extend(mask(&share, words));
    for to in 0..p {
        ctx.put(to, &row, &all, 2 * words * me)?;
    }
    ctx.sync()?;
    let rows: Vec<(Vec<u64>, Vec<u64>)> = ctx
        .local(&all)?
        .chunks(2 * words)
        .map(|r| (r[..words].to_vec(), r[words..].to_vec()))
        .collect();
    let inside = |small: &[u64], big: &[u64]| small.iter().zip(big).all(|(s, b)| s & !b == 0);
    check(
        ctx,
        inside(&rows[me].1, &rows[me].0),
        &format!("rank {me}: share {share:?} outside the launcher's {launcher:?}"),
    )?;
    let same = rows.iter().all(|r| r.0 == rows[0].0);
    let kept = std::env::var("MBSP_RANK_SHARE").is_ok_and(|v| v.trim() == "launcher");
    if kept || !same {
        // Kept as the launcher left it (MBSP_RANK_SHARE=launcher), or bound apart by it.
        check(
            ctx,
            rows[me].1 == rows[me].0,
            &format!("rank {me}: the launcher left it {launcher:?}, its share is {share:?}"),
        )?;
    } else if p <= cores {
        // Split: disjoint, together covering what the launcher left them.
        let mut union = vec![0u64; words];
        for (k, r) in rows.iter().enumerate() {
            for (j, other) in rows.iter().enumerate().skip(k + 1) {
                let overlap = r.1.iter().zip(&other.1).any(|(a, b)| a & b != 0);
                check(ctx, !overlap, &format!("ranks {k} and {j} share CPUs"))?;
            }
            union.iter_mut().zip(&r.1).for_each(|(u, s)| *u |= s);
        }
        check(ctx, union == rows[0].0, "the shares do not cover the node")?;
    }
    if bound {
        check(
            ctx,
            cpus_now(ctx) == share,
            &format!("rank {me}'s thread not bound to its share {share:?}"),
        )?;
    }
    for q in [1, 2, 3] {
        let before = cpus_now(ctx);
        let seen = ctx.run(q, |n| {
            let mine = cpus_now(n);
            let deeper = n.run(2, |d| Ok(cpus_now(d)))?;
            let after = cpus_now(n);
            Ok((n.domain().pu_os(n.machine()), mine, deeper, after))
        })?;
        for (pid, (place, mine, deeper, after)) in seen.iter().enumerate() {
            let all_in = place.iter().chain(mine).chain(deeper.iter().flatten());
            let all_in = all_in.clone().all(|c| share.contains(c));
            check(
                ctx,
                all_in,
                &format!(
                    "rank {me}, nested run of {q}, pid {pid}: {place:?} {mine:?} {deeper:?} outside {share:?}"
                ),
            )?;
            if bound {
                check(
                    ctx,
                    mine == after,
                    &format!("rank {me}, nested pid {pid}: binding {mine:?} became {after:?}"),
                )?;
            }
        }
        check(
            ctx,
            cpus_now(ctx) == before,
            &format!(
                "rank {me}: binding {before:?} became {:?} after a nested run",
                cpus_now(ctx)
            ),
        )?;
    }
    ctx.sync()
}

/// Mode `algorithms`: the FFT (flat, and Multi-BSP with 2 threads under each rank) and the
/// SpMV (plain, hp, hierarchical with 2 threads under each rank) with the top level over the
/// ranks, checked on every rank against sequential results.
fn algorithms(ctx: &mut Ctx) -> Result<()> {
    use mbsp_algorithms::fft::{BspFft, Complex, MultiFft, fft};
    use mbsp_algorithms::sparse::CooMatrix;
    use mbsp_algorithms::sparse::partition::{Options, partition};
    use mbsp_algorithms::sparse::spmv::{HierPlan, HierSpmv, HpSpmv, Spmv, SpmvPlan};
    let (me, p) = (ctx.pid(), ctx.nprocs());
    let p2 = p.next_power_of_two() == p;
    if p2 {
        let n = 1 << 14;
        let x: Vec<Complex<f64>> = (0..n)
            .map(|j| Complex::new(((j * 7919) % 101) as f64 - 50.0, ((j * 31) % 17) as f64))
            .collect();
        let mut want = x.clone();
        fft(&mut want, 1)?;
        let scale = want.iter().map(|v| v.norm()).fold(0.0, f64::max);
        let mine = |x: &[Complex<f64>]| -> Vec<Complex<f64>> {
            (me..n).step_by(p).map(|j| x[j]).collect()
        };
        let close = |got: &[Complex<f64>]| {
            got.iter()
                .enumerate()
                .all(|(i, y)| (y - want[me + p * i]).norm() <= 1e-12 * scale)
        };
        let mut flat = BspFft::<f64>::new(ctx, n)?;
        let mut local = mine(&x);
        flat.forward(ctx, &mut local)?;
        check(ctx, close(&local), "flat FFT over ranks")?;
        flat.inverse(ctx, &mut local)?;
        let back = local
            .iter()
            .zip(mine(&x))
            .all(|(a, b)| (a - b).norm() < 1e-9);
        check(ctx, back, "flat FFT round trip")?;
        flat.free(ctx)?;
        let mut multi = MultiFft::<f64>::nested(ctx, n, &[2])?;
        let mut local = mine(&x);
        multi.forward(ctx, &mut local)?;
        check(
            ctx,
            close(&local),
            "Multi-BSP FFT, 2 threads under each rank",
        )?;
        multi.free(ctx)?;
    }
    // A 2D grid Laplacian with a few long-range couplings.
    let side = 40;
    let mut entries = Vec::new();
    for i in 0..side * side {
        entries.push((i, i, 4.0 + (i % 3) as f64));
        for j in [i + 1, i + side, (i * 7 + 11) % (side * side)] {
            if j < side * side && j != i {
                entries.push((i, j, -1.0 - (j % 5) as f64 / 10.0));
            }
        }
    }
    let a = CooMatrix::new(side * side, side * side, entries.clone())
        .map_err(|e| ctx.abort(e.to_string()))?;
    let xv: Vec<f64> = (0..side * side)
        .map(|j| 1.0 + (j % 13) as f64 / 7.0)
        .collect();
    let mut want = vec![0.0; side * side];
    for &(i, j, v) in &entries {
        want[i] += v * xv[j];
    }
    let dist = partition(&a, p, &Options::default())
        .map_err(|e| ctx.abort(e.to_string()))?
        .dist;
    let plan = SpmvPlan::new(&a, &dist).map_err(|e| ctx.abort(e))?;
    let agree = |rows: &[u32], y: &[f64]| {
        rows.iter()
            .zip(y)
            .all(|(&r, v)| (v - want[r as usize]).abs() <= 1e-12 * want[r as usize].abs().max(1.0))
    };
    let local = &plan.procs[me];
    let mut y = vec![0.0; local.y_owned.len()];
    let mut plain = Spmv::new(ctx, &plan)?;
    for (slot, &j) in plain.x_mut(ctx)?.iter_mut().zip(&local.x_owned) {
        *slot = xv[j as usize];
    }
    plain.multiply(ctx, &mut y)?;
    check(ctx, agree(&local.y_owned, &y), "plain SpMV over ranks")?;
    let mut hp = HpSpmv::new(ctx, &plan)?;
    for (slot, &j) in hp.x_mut(ctx)?.iter_mut().zip(&local.x_owned) {
        *slot = xv[j as usize];
    }
    ctx.sync()?;
    for _ in 0..3 {
        hp.multiply(ctx, &mut y)?;
    }
    check(
        ctx,
        agree(&local.y_owned, &y),
        "hp SpMV over ranks (one-sided)",
    )?;
    let hplan = HierPlan::partition(&a, p, 2, &Options::default()).map_err(|e| ctx.abort(e))?;
    let mut hier = HierSpmv::new(ctx, &hplan)?;
    let owned = hier.local().x_owned.clone();
    for (slot, &j) in hier.x_mut(ctx)?.iter_mut().zip(&owned) {
        *slot = xv[j as usize];
    }
    let mut y = vec![0.0; hier.local().y_owned.len()];
    hier.multiply(ctx, &mut y)?;
    let rows = hier.local().y_owned.clone();
    check(
        ctx,
        agree(&rows, &y),
        "hierarchical SpMV, 2 threads under each rank",
    )?;
    Ok(())
}

/// Mode `bsplib-model`: the runtime's own model check (`runtime/tests/semantics/model.rs`: raw
/// registrations with null and shadowed ones, per-process sizes, puts, gets, messages drained
/// four ways, overlapping writes) over the ranks, one top-level run per program: every rank
/// runs its part, the records are all-gathered (BSMP), and every rank checks all of them
/// against the model.
fn bsplib_model_over_ranks(world: &mbsp::ranks::World, programs: u64) -> Result<()> {
    let ranks = world.size();
    for seed in 0..programs {
        let prog = bsplib_model::generate(ranks, 8, 0xB5B + seed);
        let out = world.run(mbsp::Run::new(ranks), |ctx| {
            let p = ctx.nprocs();
            let (mine, bufs) = bsplib_model::process(ctx, &prog)?;
            // All-gather the records: one message per process and destination.
            ctx.set_tagsize(8)?;
            ctx.sync()?;
            let bytes = encode_records(&mine);
            for to in 0..p {
                ctx.send(to, &(ctx.pid() as u64).to_le_bytes(), &bytes)?;
            }
            ctx.sync()?;
            let mut all = vec![Vec::new(); p];
            while let Some(m) = ctx.hpmove()? {
                all[m.tag_as::<u64>() as usize] = decode_records(m.payload);
            }
            if let Err(e) = bsplib_model::check(p, &prog, &all) {
                return Err(ctx.abort(format!("bsplib model, seed {seed}, p {p}: {e}")));
            }
            Ok(bufs)
        })?;
        // The run is over: nothing can write the program's buffers any more.
        out.value.into_iter().for_each(bsplib_model::free);
    }
    Ok(())
}

fn encode_records(recs: &[bsplib_model::Record]) -> Vec<u8> {
    let mut w = Vec::new();
    let put = |w: &mut Vec<u8>, b: &[u8]| {
        w.extend_from_slice(&(b.len() as u64).to_le_bytes());
        w.extend_from_slice(b);
    };
    w.extend_from_slice(&(recs.len() as u64).to_le_bytes());
    for r in recs {
        w.extend_from_slice(&(r.bufs.len() as u64).to_le_bytes());
        for b in &r.bufs {
            put(&mut w, b);
        }
        w.extend_from_slice(&(r.qsize.0 as u64).to_le_bytes());
        w.extend_from_slice(&(r.qsize.1 as u64).to_le_bytes());
        w.extend_from_slice(&(r.msgs.len() as u64).to_le_bytes());
        for (from, t, m) in &r.msgs {
            w.extend_from_slice(&(*from as u64).to_le_bytes());
            put(&mut w, t);
            put(&mut w, m);
        }
    }
    w
}

fn decode_records(b: &[u8]) -> Vec<bsplib_model::Record> {
    struct Cursor<'a>(&'a [u8], usize);
    impl Cursor<'_> {
        fn word(&mut self) -> usize {
            let v = u64::from_le_bytes(self.0[self.1..self.1 + 8].try_into().unwrap());
            self.1 += 8;
            v as usize
        }
        fn bytes(&mut self) -> Vec<u8> {
            let len = self.word();
            self.1 += len;
            self.0[self.1 - len..self.1].to_vec()
        }
    }
    let mut c = Cursor(b, 0);
    (0..c.word())
        .map(|_| {
            let bufs = (0..c.word()).map(|_| c.bytes()).collect();
            let qsize = (c.word(), c.word());
            let msgs = (0..c.word())
                .map(|_| (c.word(), c.bytes(), c.bytes()))
                .collect();
            bsplib_model::Record { bufs, qsize, msgs }
        })
        .collect()
}

/// Mode `timing`: rank 0 prints the median of 9 batches of 2000 empty syncs and of 2000
/// one-word put + sync (a first look; `mbsp-bench mpi` is to come).
fn timing(ctx: &mut Ctx) -> Result<()> {
    let next = (ctx.pid() + 1) % ctx.nprocs();
    let r = ctx.push_reg(vec![0u64; 1])?;
    ctx.sync()?;
    let batch = |ctx: &mut Ctx, put: bool| -> Result<f64> {
        let mut t = Vec::new();
        for _ in 0..9 {
            let s = ctx.time();
            for i in 0..2000u64 {
                if put {
                    ctx.put(next, &[i], &r, 0)?;
                }
                ctx.sync()?;
            }
            t.push((ctx.time() - s) / 2000.0);
        }
        t.sort_by(f64::total_cmp);
        Ok(t[4])
    };
    let (empty, put) = (batch(ctx, false)?, batch(ctx, true)?);
    if ctx.pid() == 0 {
        println!(
            "{} ranks: empty sync {:.2} us, one-word put + sync {:.2} us (medians of 9 x 2000)",
            ctx.nprocs(),
            empty * 1e6,
            put * 1e6
        );
    }
    Ok(())
}

/// One rank's operations in one superstep of a random program.
#[derive(Default)]
struct StepOps {
    /// (registration, word, value)
    writes: Vec<(usize, usize, u64)>,
    /// (to, registration, word, values)
    puts: Vec<(usize, usize, usize, Vec<u64>)>,
    /// (from, source registration, source words, destination registration, destination word)
    gets: Vec<(usize, usize, std::ops::Range<usize>, usize, usize)>,
    /// (to, tag, payload)
    sends: Vec<(usize, Vec<u8>, Vec<u8>)>,
}

/// Draws superstep `step` of the program for all `p` ranks: local writes, puts, gets and
/// messages, with no two writes to one word of one rank landing at the same sync (BSPlib
/// leaves the winner of overlapping writes unspecified; the model here is exact).
fn draw(rng: &mut SplitMix64, p: usize, sizes: &[Vec<usize>], tagsize: usize) -> Vec<StepOps> {
    let regs = sizes.len();
    let mut landing: std::collections::HashSet<(usize, usize, usize)> = Default::default();
    let mut ops: Vec<StepOps> = (0..p).map(|_| StepOps::default()).collect();
    for (me, op) in ops.iter_mut().enumerate() {
        for _ in 0..rng.below(3) {
            let r = rng.below(regs);
            op.writes
                .push((r, rng.below(sizes[r][me]), rng.next_u64() >> 8));
        }
        for _ in 0..rng.below(4) {
            let (to, r) = (rng.below(p), rng.below(regs));
            let size = sizes[r][to];
            let at = rng.below(size);
            let len = 1 + rng.below(size - at);
            if (at..at + len).any(|w| landing.contains(&(to, r, w))) {
                continue;
            }
            landing.extend((at..at + len).map(|w| (to, r, w)));
            op.puts
                .push((to, r, at, (0..len).map(|_| rng.next_u64() >> 8).collect()));
        }
        for _ in 0..rng.below(3) {
            let (from, sr, dr) = (rng.below(p), rng.below(regs), rng.below(regs));
            let len = 1 + rng.below(sizes[sr][from].min(sizes[dr][me]));
            let src = rng.below(sizes[sr][from] - len + 1);
            let dst = rng.below(sizes[dr][me] - len + 1);
            if (dst..dst + len).any(|w| landing.contains(&(me, dr, w))) {
                continue;
            }
            landing.extend((dst..dst + len).map(|w| (me, dr, w)));
            op.gets.push((from, sr, src..src + len, dr, dst));
        }
        for _ in 0..rng.below(3) {
            let to = rng.below(p);
            let tag = (0..tagsize).map(|_| rng.next_u64() as u8).collect();
            let payload = (0..rng.below(20)).map(|_| rng.next_u64() as u8).collect();
            op.sends.push((to, tag, payload));
        }
    }
    ops
}

/// Mode `model`: random programs (seeds 1..=programs, 12 supersteps each, three
/// registrations of per-rank sizes, a tag size that changes) run on the ranks and, on every
/// rank, on a sequential model of all ranks; after every sync each rank compares its memory
/// and its queue (as a multiset) with the model's.
fn model(ctx: &mut Ctx, programs: u64) -> Result<()> {
    let (me, p) = (ctx.pid(), ctx.nprocs());
    for seed in 1..=programs {
        // Every rank draws the same program from the same seed.
        let mut rng = SplitMix64::new(seed);
        let sizes: Vec<Vec<usize>> = (0..3)
            .map(|_| (0..p).map(|_| 1 + rng.below(6)).collect())
            .collect();
        let mut state: Vec<Vec<Vec<u64>>> = (0..p)
            .map(|k| sizes.iter().map(|s| vec![0u64; s[k]]).collect())
            .collect();
        let mut regs: Vec<_> = sizes
            .iter()
            .map(|s| ctx.push_reg(vec![0u64; s[me]]))
            .collect::<Result<_>>()?;
        let mut tagsize = ctx.tagsize();
        ctx.sync()?;
        for step in 0..12 {
            let ops = draw(&mut rng, p, &sizes, tagsize);
            let new_tagsize = (step % 4 == 3).then(|| rng.below(5));
            // The ranks.
            let mine = &ops[me];
            for &(r, w, v) in &mine.writes {
                ctx.local_mut(&mut regs[r])?[w] = v;
            }
            for (to, r, at, vals) in &mine.puts {
                ctx.put(*to, vals, &regs[*r], *at)?;
            }
            for (from, sr, range, dr, dst) in &mine.gets {
                ctx.get(*from, &regs[*sr], range.clone(), &regs[*dr], *dst)?;
            }
            for (to, tag, payload) in &mine.sends {
                ctx.send(*to, tag, payload)?;
            }
            if let Some(t) = new_tagsize {
                ctx.set_tagsize(t)?;
            }
            ctx.sync()?;
            // The model: local writes, then gets read, then puts and gets land.
            for (k, op) in ops.iter().enumerate() {
                for &(r, w, v) in &op.writes {
                    state[k][r][w] = v;
                }
            }
            let before = state.clone();
            for (k, op) in ops.iter().enumerate() {
                for (to, r, at, vals) in &op.puts {
                    state[*to][*r][*at..*at + vals.len()].copy_from_slice(vals);
                }
                for (from, sr, range, dr, dst) in &op.gets {
                    let src = &before[*from][*sr][range.clone()];
                    state[k][*dr][*dst..*dst + src.len()].copy_from_slice(src);
                }
            }
            if let Some(t) = new_tagsize {
                tagsize = t;
            }
            // Compare.
            for (r, reg) in regs.iter().enumerate() {
                let got = ctx.local(reg)?.to_vec();
                check(
                    ctx,
                    got == state[me][r],
                    &format!(
                        "program {seed}, superstep {step}, registration {r}: {got:?}, model {:?}",
                        state[me][r]
                    ),
                )?;
            }
            let mut want: Vec<(Vec<u8>, Vec<u8>)> = ops
                .iter()
                .flat_map(|op| op.sends.iter().filter(|s| s.0 == me))
                .map(|(_, t, pl)| (t.clone(), pl.clone()))
                .collect();
            let mut got = Vec::new();
            while let Some(m) = ctx.hpmove()? {
                got.push((m.tag.to_vec(), m.payload.to_vec()));
            }
            want.sort();
            got.sort();
            check(
                ctx,
                got == want,
                &format!("program {seed}, superstep {step}: queue {got:?}, model {want:?}"),
            )?;
            check(ctx, ctx.tagsize() == tagsize, "tag size")?;
        }
        for reg in regs {
            ctx.pop_reg(reg)?;
        }
        ctx.sync()?;
    }
    Ok(())
}

/// Mode `profile-env` (run under `MBSP_PROFILE`): the same program started each way a run
/// goes over the ranks — `World::run`, `World::run_profiled`, `World::begin` and `Spmd::end` —
/// each with a lazy superstep and one nested thread run per rank; rank 0 reports every run
/// (the test reads its stderr, or the file of the last run).
fn profile_env(world: &mbsp::ranks::World) -> Result<()> {
    let ranks = world.size();
    let program = |ctx: &mut Ctx| -> Result<()> {
        let (me, p) = (ctx.pid(), ctx.nprocs());
        let x = ctx.push_reg(vec![0u64; 1])?;
        ctx.sync()?;
        ctx.put((me + 1) % p, &[me as u64], &x, 0)?;
        ctx.declare_incoming(1)?;
        ctx.sync()?;
        ctx.run(2, |n| n.sync())?;
        ctx.sync()
    };
    world.run(mbsp::Run::new(ranks), program)?;
    world.run_profiled(mbsp::Run::new(ranks), program)?;
    let mut spmd = world.begin(mbsp::Run::new(ranks))?;
    program(spmd.ctx())?;
    spmd.end()
}

/// A profiled run over the ranks with regions (one nested thread run per rank, with its own
/// region): every rank gets the whole profile, regions and all, as gathered over the ranks.
fn profile_over_ranks(world: &mbsp::ranks::World) -> std::result::Result<(), String> {
    let ranks = world.size();
    let (_, profile) = world
        .run_profiled(mbsp::Run::new(ranks), |ctx| {
            let other = (ctx.pid() + 1) % ctx.nprocs();
            let x = ctx.region("setup", |ctx| {
                let x = ctx.push_reg(vec![0u64; 2])?;
                ctx.sync()?;
                Ok::<_, mbsp::Error>(x)
            })?;
            ctx.region("solve", |ctx| {
                ctx.region("halo", |ctx| {
                    ctx.put(other, &[1u64, 2], &x, 0)?;
                    ctx.sync()
                })?;
                ctx.run(2, |n| n.region("inner", |n| n.sync()))?;
                ctx.sync()
            })
        })
        .map_err(|e| e.to_string())?;
    let names: Vec<String> = (0..profile.supersteps.len())
        .map(|i| {
            profile
                .superstep_region(i)
                .map_or(String::new(), |r| profile.region_path(r))
        })
        .collect();
    let want = ["setup", "solve/halo", "solve", ""];
    if names != want {
        return Err(format!("superstep regions {names:?}, want {want:?}"));
    }
    let report = profile.report(&mbsp::params::Params::DEFAULT);
    let halo = report.regions.iter().find(|t| t.name == "solve/halo");
    let h = if ranks > 1 { 2 } else { 0 };
    if halo.map(|t| (t.supersteps, t.h)) != Some((1, h)) {
        return Err(format!("the halo region's totals: {:?}", report.regions));
    }
    if profile.nested.len() != ranks || profile.nested.iter().any(|n| n.regions[0].name != "inner")
    {
        return Err(format!("nested runs' regions: {:?}", profile.nested));
    }
    // Where every rank ran: its node and its share there; its nested runs' processes inside.
    let placed = profile.places.len() == ranks
        && profile
            .places
            .iter()
            .all(|w| w.starts_with("node ") && w.contains("PUs"));
    if !placed {
        return Err(format!("the ranks' places: {:?}", profile.places));
    }
    if profile
        .nested
        .iter()
        .any(|n| n.places.iter().any(|w| !w.contains("PUs")))
    {
        return Err(format!("nested places: {:?}", profile.nested));
    }
    Ok(())
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    // What the launcher left this rank, before any run binds it (mode `shares` checks it).
    let _ = launcher_cpus();
    let world = mbsp::ranks::World::init().unwrap_or_else(|e| fail(&e.to_string()));
    let ranks = world.size();
    if mode.is_empty() {
        an_early_put_fails_every_rank(world);
    }
    if mode == "profile" {
        match profile_over_ranks(world) {
            Ok(()) => println!("selftest profile ok on {ranks} ranks"),
            Err(e) => fail(&e),
        }
        return;
    }
    if mode == "profile-env" {
        match profile_env(world) {
            Ok(()) => println!("selftest profile-env ok on {ranks} ranks"),
            Err(e) => fail(&e.to_string()),
        }
        return;
    }
    if mode == "bsplib-model" {
        // 20 programs on each of 1, 2 and 3 ranks; scripts/test-ranks runs the same generator's
        // property tests over 2 and 3 ranks in the runtime's own test binary.
        match bsplib_model_over_ranks(world, 20) {
            Ok(()) => println!("selftest bsplib-model ok on {ranks} ranks"),
            Err(e) => fail(&e.to_string()),
        }
        return;
    }
    if mode == "lazy" {
        a_count_declared_before_the_end_is_checked(world);
    }
    if mode.is_empty() {
        the_last_superstep_lands_at_the_end(world);
    }
    let r = world.run(mbsp::Run::new(ranks), |ctx| run_mode(ctx, &mode));
    match r {
        Ok(mine) => {
            if let Some(p) = mine.value.filter(|_| {
                ["", "model", "hybrid", "shares", "algorithms", "lazy"].contains(&mode.as_str())
            }) {
                let what = if mode.is_empty() {
                    "selftest".to_string()
                } else {
                    format!("selftest {mode}")
                };
                println!("{what} ok on {p} ranks");
            }
        }
        Err(e) => fail(&e.to_string()),
    }
}

/// Mode "": a misuse fails the run on every rank, naming the operation, rank and superstep.
fn an_early_put_fails_every_rank(world: &mbsp::ranks::World) {
    let ranks = world.size();
    let e = world.run(mbsp::Run::new(ranks), early_put).unwrap_err();
    let ok = e.kind() == ErrorKind::Misuse && e.op() == "put" && e.superstep() == Some(0);
    if !ok {
        fail(&format!(
            "an early put should fail every rank with its misuse, got: {e}"
        ));
    }
}

/// Mode `lazy`: a count declared before the end is checked there (a full sync), on its rank.
fn a_count_declared_before_the_end_is_checked(world: &mbsp::ranks::World) {
    let ranks = world.size();
    for declared in [1, 2] {
        let r = world.run(mbsp::Run::new(ranks), |ctx| {
            let (me, p) = (ctx.pid(), ctx.nprocs());
            let x = ctx.push_reg(vec![0u64; 1])?;
            ctx.sync()?;
            ctx.put((me + 1) % p, &[7], &x, 0)?;
            ctx.declare_incoming(if me == 0 { declared } else { 1 })?;
            Ok(())
        });
        let ok = match (&r, world.rank(), declared) {
            (Ok(_), _, 1) | (Ok(_), 1.., 2) => true,
            (Err(e), 0, 2) => e.to_string().contains(
                "end (pid 0, superstep 1): pid 0 called declare_incoming(2) in superstep 1 but \
                 received 1 puts/messages (the final sync is a full one",
            ),
            _ => false,
        };
        if !ok {
            fail(&format!(
                "a count of {declared} declared before the end: {r:?}"
            ));
        }
    }
}

/// Mode "": communication of the last superstep lands at the end of the run, as on threads: a
/// put and a get after the last sync, into memory that outlives the run.
fn the_last_superstep_lands_at_the_end(world: &mbsp::ranks::World) {
    let ranks = world.size();
    let mut landed = vec![0u64; 2];
    let at = landed.as_mut_ptr() as usize;
    let r = world.run(mbsp::Run::new(ranks), |ctx| {
        let (me, p) = (ctx.pid(), ctx.nprocs());
        let mine = at as *mut u8;
        // SAFETY: `landed` outlives the run and is not touched during it.
        unsafe { ctx.push_reg_raw(mine, 16)? };
        ctx.sync()?;
        let next = (me + 1) % p;
        ctx.put_raw(next, &(me as u64 + 5).to_le_bytes(), mine, 0)?;
        // SAFETY: as above; reads next's word 0 as it is when the end begins.
        unsafe { ctx.get_raw(next, mine, 0, mine.add(8), 8)? };
        Ok(())
    });
    if let Err(e) = r {
        fail(&format!("the last superstep's communication: {e}"));
    }
    let (me, p) = (world.rank(), world.size());
    let prev = (me + p - 1) % p;
    if landed != [prev as u64 + 5, 0] {
        fail(&format!(
            "the last superstep's put and get did not land at the end: {landed:?}"
        ));
    }
}

/// The run of `mode` on every rank: the semantic checks, a failure on purpose, or a check of
/// its own; returns the number of processes.
fn run_mode(ctx: &mut Ctx, mode: &str) -> Result<usize> {
    match mode {
        "" => semantics(ctx)?,
        "abort" | "panic" | "misuse" | "mismatch" | "die" => failure(ctx, mode)?,
        "abort-hpget" => abort_during_hpget(ctx)?,
        "stall" => stall(ctx)?,
        "lazy" => lazy_semantics(ctx)?,
        "lazy-short" | "lazy-many" | "lazy-mixed" | "lazy-mixed-late" | "lazy-star"
        | "lazy-panic" => {
            return Err(lazy_misuse(ctx, mode));
        }
        "hybrid" => hybrid(ctx)?,
        "shares" => shares(ctx)?,
        "algorithms" => algorithms(ctx)?,
        "timing" => timing(ctx)?,
        "model" => model(ctx, 40)?,
        other => return Err(ctx.abort(format!("unknown mode {other:?}"))),
    }
    Ok(ctx.nprocs())
}

/// Modes `abort`, `panic`, `misuse`, `mismatch` and `die`: the last rank fails that way (for
/// `mismatch`: it ends while the others sync) while the others sync on.
fn failure(ctx: &mut Ctx, mode: &str) -> Result<()> {
    let (me, p) = (ctx.pid(), ctx.nprocs());
    ctx.sync()?;
    if me == p - 1 {
        match mode {
            "abort" => return Err(ctx.abort("rank asked to abort")),
            "panic" => panic!("rank asked to panic"),
            "misuse" => {
                ctx.put(p, &[1u8], &ctx.push_reg_empty::<u8>()?, 0)?;
            }
            // Killed from outside as far as the others can tell (SIGKILL).
            "die" => {
                let _ = std::process::Command::new("kill")
                    .args(["-9", &std::process::id().to_string()])
                    .status();
                std::thread::sleep(std::time::Duration::from_secs(60));
            }
            _ => return Ok(()), // ends while the others sync
        }
    }
    for _ in 0..1000 {
        ctx.sync()?;
    }
    Ok(())
}

/// Mode `abort-hpget`: the last rank aborts while the others `hpget` from it; they must see
/// the failure.
fn abort_during_hpget(ctx: &mut Ctx) -> Result<()> {
    let (me, p) = (ctx.pid(), ctx.nprocs());
    let x = ctx.push_reg(vec![me as u64; 2])?;
    ctx.sync()?;
    if me == p - 1 {
        return Err(ctx.abort("rank asked to abort"));
    }
    // Time for the last rank to publish its failure (which it does before it waits
    // in its last exchange): the hpget below then sees it.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut got = [0u64; 1];
    // SAFETY: nobody writes `x` in this superstep.
    match unsafe { ctx.hpget(p - 1, &x, 0, &mut got) } {
        Err(e) if e.kind() == ErrorKind::Aborted => {
            println!("rank {me}: {e}");
            Err(e)
        }
        other => {
            let what = format!("hpget from the aborted rank returned {other:?}");
            Err(ctx.abort(what))
        }
    }
}

/// Mode `stall`: rank 0 stops syncing (as if hung); the others must give up after
/// `MBSP_MPI_TIMEOUT` seconds and end the job.
fn stall(ctx: &mut Ctx) -> Result<()> {
    let me = ctx.pid();
    ctx.sync()?;
    if me == 0 {
        std::thread::sleep(std::time::Duration::from_secs(100));
    }
    ctx.sync()?;
    Ok(())
}

/// Modes `lazy-short`, `lazy-many`, `lazy-mixed`, `lazy-mixed-late`, `lazy-star` and
/// `lazy-panic`: one rank
/// misuses declared counts (or panics) among lazy syncs; the run must fail on every rank. The
/// error that ends the run.
fn lazy_misuse(ctx: &mut Ctx, mode: &str) -> mbsp::Error {
    match lazy_misuse_steps(ctx, mode) {
        Ok(()) => ctx.abort("the lazy misuse went unnoticed"),
        Err(e) => e,
    }
}

/// The supersteps of [`lazy_misuse`]; `Ok` if none of them failed.
fn lazy_misuse_steps(ctx: &mut Ctx, mode: &str) -> Result<()> {
    let (me, p) = (ctx.pid(), ctx.nprocs());
    let a = ctx.push_reg(vec![0u64; 2])?;
    ctx.sync()?;
    let next = (me + 1) % p;
    for step in 1..=10u64 {
        let odd = step == 2 && me == p - 1;
        if mode == "lazy-star" {
            // Everyone puts to the last rank, which makes a full sync in superstep 2: the
            // others declare nothing and go on, then wait for its acknowledgements.
            if me != p - 1 {
                ctx.put(p - 1, &[step], &a, 0)?;
            }
            if !odd {
                ctx.declare_incoming(if me == p - 1 { p - 1 } else { 0 })?;
            }
            ctx.sync()?;
            continue;
        }
        match mode {
            "lazy-many" if odd => {
                // Two records for a receiver that declares one.
                ctx.put(next, &[step], &a, 0)?;
                ctx.put(next, &[step], &a, 1)?;
            }
            "lazy-panic" if odd => panic!("rank asked to panic"),
            // Nothing to receive: the lazy ranks pass superstep 2 at once.
            "lazy-mixed-late" if step >= 2 => {}
            _ => ctx.put(next, &[step], &a, 0)?,
        }
        match mode {
            "lazy-short" if step == 2 && me == 0 => ctx.declare_incoming(2)?,
            "lazy-mixed" if odd => {} // a full sync where the others are lazy
            // Then the lazy ones make a full sync of superstep 3.
            "lazy-mixed-late" if odd || step > 2 => {}
            "lazy-mixed-late" if step == 2 => ctx.declare_incoming(0)?,
            _ => ctx.declare_incoming(1)?,
        }
        ctx.sync()?;
    }
    Ok(())
}

fn fail(msg: &str) -> ! {
    // One write for the whole line: the ranks share mpiexec's stderr, and a line written in
    // pieces interleaves with the others' lines.
    use std::io::Write;
    let line = format!("mbsp-mpi-selftest: {msg}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    std::process::exit(1);
}
