//! `all_gather_sparse_vec` (BSPlib paper §4.5.2): gather the nonzeros of a block-distributed
//! vector on every process with bulk synchronous message passing — tag = global index,
//! payload = value — because how much each process sends depends on the data.
//!
//! `cargo run --release -p mbsp-examples --bin sparse_allgather [-- N P]`

/// Returns (indices, values) of all nonzeros of the distributed vector, on every process.
fn all_gather_sparse_vec(ctx: &mut mbsp::Ctx, dense: &[f32]) -> mbsp::Result<(Vec<u32>, Vec<f32>)> {
    let old_tag = ctx.set_tagsize(std::mem::size_of::<u32>())?;
    ctx.sync()?;

    let n_over_p = dense.len();
    for (i, &v) in dense.iter().enumerate() {
        if v != 0.0 {
            let global = (n_over_p * ctx.pid() + i) as u32;
            for q in 0..ctx.nprocs() {
                ctx.send_pod(q, &global, &[v])?;
            }
        }
    }
    ctx.sync()?;

    let count = ctx.qsize()?.messages;
    let (mut idx, mut val) = (Vec::with_capacity(count), Vec::with_capacity(count));
    while let Some(m) = ctx.hpmove()? {
        if m.payload.len() != std::mem::size_of::<f32>() {
            return Err(ctx.abort("all_gather_sparse_vec: unexpected payload size"));
        }
        idx.push(m.tag_as::<u32>());
        val.push(m.payload_as::<f32>()[0]);
    }
    ctx.set_tagsize(old_tag)?; // restore the caller's tag size at the next sync
    Ok((idx, val))
}

fn main() -> std::process::ExitCode {
    mbsp_examples::report(run())
}

fn run() -> mbsp_examples::Outcome {
    let mut args = mbsp_examples::numbers("[N] [P]");
    let n = args.next().unwrap_or(10_000);
    let p = args.next().unwrap_or_else(mbsp::nprocs);
    let b = n.div_ceil(p);
    let value = |i: usize| if i % 7 == 3 { i as f32 } else { 0.0 };

    let gathered = mbsp::run(p, |ctx| {
        let s = ctx.pid();
        let dense: Vec<f32> = (s * b..(s + 1) * b)
            .map(|i| if i < n { value(i) } else { 0.0 })
            .collect();
        let (idx, val) = all_gather_sparse_vec(ctx, &dense)?;
        ctx.sync()?;
        let mut pairs: Vec<(u32, f32)> = idx.into_iter().zip(val).collect();
        pairs.sort_by_key(|x| x.0); // messages arrive in no particular order
        Ok(pairs)
    })?;

    let want: Vec<(u32, f32)> = (0..n)
        .filter(|&i| value(i) != 0.0)
        .map(|i| (i as u32, value(i)))
        .collect();
    assert!(
        gathered.iter().all(|g| *g == want),
        "every process has every nonzero"
    );
    println!(
        "sparse all-gather: n = {n}, p = {p}: {} nonzeros on every process",
        want.len()
    );
    Ok(())
}
