//! Checks the MPI engine's semantics on however many ranks it is started on
//! (`mpiexec -n P mbsp-mpi-selftest [MODE]`); prints `selftest ok on P ranks` from rank 0 and
//! exits 0, or prints the failure on stderr and exits 1. MODE `abort`, `panic` or `mismatch`
//! makes one rank fail on purpose (the run must then fail on every rank, promptly).

use mbsp_mpi::{ErrorKind, MpiCtx, Result, run};

fn check(ctx: &MpiCtx, ok: bool, what: &str) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(ctx.abort(format!("check failed: {what}")))
    }
}

fn semantics(ctx: &mut MpiCtx) -> Result<()> {
    let (me, p) = (ctx.pid(), ctx.nprocs());
    let next = (me + 1) % p;
    // Sizes differ per rank: rank r registers r + 2 words.
    let a = ctx.push_reg(vec![me as u64 * 100; me + 2])?;
    let b = ctx.push_reg(vec![0u64; 4])?;
    let early = ctx.put(next, &[1u64], &a, 0).unwrap_err();
    check(
        ctx,
        early.kind == ErrorKind::Misuse,
        "a put before the registration's sync fails",
    )?;
    ctx.sync()?;
    // Put into the next rank's area, bounds checked against *its* size.
    ctx.put(next, &[me as u64 + 1000], &a, next + 1)?;
    let err = ctx.put(next, &[1u64, 2], &a, next + 1).unwrap_err();
    check(
        ctx,
        err.kind == ErrorKind::Misuse && err.message.contains(&format!("holds {}", next + 2)),
        &format!("out-of-bounds put names the remote size: {err}"),
    )?;
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
    let old = ctx.set_tagsize(4);
    check(ctx, old == 0, "initial tag size 0")?;
    ctx.sync()?;
    for to in 0..p {
        let payload = vec![me as u8; to + 1];
        ctx.send(to, &(me as u32).to_le_bytes(), &payload)?;
    }
    let wrong = ctx.send(0, &[1, 2], &[]).is_err();
    check(ctx, wrong, "a tag of the wrong size fails")?;
    ctx.sync()?;
    let q = ctx.qsize();
    check(
        ctx,
        q.messages == p && q.bytes == p * (me + 1),
        &format!("queue {q:?}"),
    )?;
    let mut from = Vec::new();
    while let Some((tag, payload)) = ctx.move_message() {
        let s = u32::from_le_bytes(tag.try_into().unwrap()) as usize;
        check(
            ctx,
            payload == vec![s as u8; me + 1],
            "payload from its sender",
        )?;
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
        ctx.qsize().messages == 0,
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
    Ok(())
}

/// Mode `timing`: rank 0 prints the median of 9 batches of 2000 empty syncs and of 2000
/// one-word put + sync (a first look; `mbsp bench mpi` is to come).
fn timing(ctx: &mut MpiCtx) -> Result<()> {
    let next = (ctx.pid() + 1) % ctx.nprocs();
    let r = ctx.push_reg(vec![0u64; 1])?;
    ctx.sync()?;
    let batch = |ctx: &mut MpiCtx, put: bool| -> Result<f64> {
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

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let r = run(|ctx| {
        let (me, p) = (ctx.pid(), ctx.nprocs());
        match mode.as_str() {
            "" => semantics(ctx)?,
            "abort" | "panic" | "mismatch" => {
                ctx.sync()?;
                if me == p - 1 {
                    match mode.as_str() {
                        "abort" => return Err(ctx.abort("rank asked to abort")),
                        "panic" => panic!("rank asked to panic"),
                        _ => return Ok(p), // ends while the others sync
                    }
                }
                for _ in 0..1000 {
                    ctx.sync()?;
                }
            }
            "timing" => timing(ctx)?,
            other => return Err(ctx.abort(format!("unknown mode {other:?}"))),
        }
        Ok(p)
    });
    match r {
        Ok(p) => {
            if mode.is_empty() {
                // Every rank prints (the rank is not known out here); the test counts lines.
                println!("selftest ok on {p} ranks");
            }
        }
        Err(e) => {
            eprintln!("mbsp-mpi-selftest: {e}");
            std::process::exit(1);
        }
    }
}
