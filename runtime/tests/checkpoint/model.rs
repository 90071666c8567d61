//! Random BSP programs (the generator and sequential model of `common/bsplib_model.rs`)
//! checkpointed after a random superstep, stopped right there, and resumed in a new run that
//! makes the same registrations again: the records of both runs together must pass the
//! model's check, as an uninterrupted run's do. The checkpoint's superstep carries whatever the
//! program has in flight: puts and gets just delivered, messages in the queue, a new tag size.

#[path = "../common/bsplib_model.rs"]
#[allow(unreachable_pub)]
mod bsplib_model;

use bsplib_model::*;
use mbsp::{Checkpoints, Ctx, Run};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::Mutex;

/// A record as the checkpoint keeps it.
type Saved = (Vec<Vec<u8>>, (usize, usize), Vec<Msg>);

/// A process's own state at the checkpoint: its records so far, its buffers (read when the
/// checkpoint is written, after its sync: what the sync delivered included) and its tag size.
/// One type both ways, so that the checkpoint's state type is the one `resume` asks for.
#[derive(Default)]
struct Snap {
    records: Vec<Saved>,
    /// Written from these buffers' addresses; read back into `bufs`.
    from: Vec<usize>,
    bufs: Vec<Vec<u8>>,
    tagsize: usize,
}

impl Serialize for Snap {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let ptrs: Vec<*mut u8> = self.from.iter().map(|&b| b as *mut u8).collect();
        (&self.records, snapshot(&ptrs), self.tagsize).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Snap {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (records, bufs, tagsize) = <(Vec<Saved>, Vec<Vec<u8>>, usize)>::deserialize(d)?;
        Ok(Snap {
            records,
            from: Vec::new(),
            bufs,
            tagsize,
        })
    }
}

/// Buffers of runs that were stopped, freed once their run is over.
static STOPPED: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// Supersteps `0..=c` of `prog`, a checkpoint at the sync of `c`, then a stop (the run fails):
/// process 0 aborts once its `checkpoint` has returned, which is when the checkpoint is complete
/// (the others sync on and are stopped).
fn until_checkpoint(ctx: &mut Ctx, prog: &[Step], c: usize) -> mbsp::Result<()> {
    let bufs = buffers(ctx.pid());
    STOPPED
        .lock()
        .unwrap()
        .extend(bufs.iter().map(|&b| b as usize));
    let (mut records, mut tagsize) = (Vec::new(), 0);
    for k in 0..=c {
        issue(ctx, prog, k, &bufs, &mut tagsize)?;
        if k < c {
            ctx.sync()?;
            records.push(drain(ctx, &prog[k], &bufs)?);
        }
    }
    let snap = Snap {
        records: records
            .into_iter()
            .map(|r: Record| (r.bufs, r.qsize, r.msgs))
            .collect(),
        from: bufs.iter().map(|&b| b as usize).collect(),
        bufs: Vec::new(),
        tagsize,
    };
    ctx.checkpoint(&snap)?;
    if ctx.pid() == 0 {
        return Err(ctx.abort("stopped after the checkpoint"));
    }
    loop {
        ctx.sync()?;
    }
}

/// The same program resumed: the registrations of supersteps `0..=c` again, the checkpoint
/// back, then the rest of `prog` from the record of superstep `c` on.
fn resumed(ctx: &mut Ctx, prog: &[Step], c: usize) -> mbsp::Result<(Vec<Record>, Vec<usize>)> {
    let bufs = buffers(ctx.pid());
    for step in &prog[..=c] {
        registrations(ctx, step, &bufs)?;
        ctx.sync()?;
    }
    let snap: Snap = ctx.resume()?.expect("the checkpoint");
    for (&b, saved) in bufs.iter().zip(&snap.bufs) {
        // SAFETY: our buffer of BUF_LEN bytes, written outside a sync.
        unsafe { std::ptr::copy_nonoverlapping(saved.as_ptr(), b, BUF_LEN) };
    }
    let mut records: Vec<Record> = snap
        .records
        .into_iter()
        .map(|(bufs, qsize, msgs)| Record { bufs, qsize, msgs })
        .collect();
    let mut tagsize = snap.tagsize;
    records.push(drain(ctx, &prog[c], &bufs)?);
    for k in c + 1..prog.len() {
        issue(ctx, prog, k, &bufs, &mut tagsize)?;
        ctx.sync()?;
        records.push(drain(ctx, &prog[k], &bufs)?);
    }
    Ok((records, bufs.into_iter().map(|b| b as usize).collect()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn a_random_program_resumed_from_any_superstep_agrees_with_the_model(
        p in 1usize..=4,
        steps in 1usize..=8,
        seed in any::<u64>(),
        at in any::<prop::sample::Index>(),
    ) {
        let prog = generate(p, steps, seed);
        let c = at.index(steps);
        let dir = std::env::temp_dir()
            .join(format!("mbsp-ckpt-model-{}-{seed:x}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let policy = Checkpoints::in_folder(&dir);
        let stopped = Run::new(p)
            .checkpoints(policy.clone())
            .run(|ctx| until_checkpoint(ctx, &prog, c))
            .unwrap_err();
        prop_assert_eq!(stopped.message(), "stopped after the checkpoint");
        free(std::mem::take(&mut *STOPPED.lock().unwrap()));
        let out = Run::new(p)
            .checkpoints(policy)
            .run(|ctx| resumed(ctx, &prog, c));
        let _ = std::fs::remove_dir_all(&dir);
        let out = out.map_err(|e| TestCaseError::fail(format!("seed {seed}, p {p}, c {c}: {e}")))?;
        let mut records = Vec::new();
        for (recs, bufs) in out {
            free(bufs);
            records.push(recs);
        }
        if let Err(e) = check(p, &prog, &records) {
            prop_assert!(false, "seed {seed}, p {p}, checkpoint at {c}: {e}");
        }
    }
}
