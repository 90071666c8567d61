//! Random BSP programs checked against a sequential model of BSPlib, with some supersteps
//! lazy (their counts declared with `Ctx::declare_incoming`, see `lazy_count`) (the generator, the
//! processes' part and the model are in `common/bsplib_model.rs`, which the MPI self-test
//! uses too), on the engine the harness selects (`common/engine.rs`). Over MPI ranks the
//! property test draws at most as many processes as there are ranks, fewer cases, and the same
//! cases on every rank (a fixed seed).

#[path = "../common/bsplib_model.rs"]
mod bsplib_model;
use crate::common;

use bsplib_model::*;
use common::Wire;
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

impl Wire for Record {
    fn put(&self, out: &mut Vec<u8>) {
        self.bufs.put(out);
        self.qsize.put(out);
        self.msgs.put(out);
    }
    fn take(inp: &mut &[u8]) -> Self {
        Record {
            bufs: Wire::take(inp),
            qsize: Wire::take(inp),
            msgs: Wire::take(inp),
        }
    }
}

/// Run `prog` on `p` processes of the selected engine: every process's records.
fn execute(p: usize, prog: &[Step]) -> Vec<Vec<Record>> {
    let mine = common::run_local(p, |ctx| process(ctx, prog))
        .unwrap_or_else(|e| panic!("run failed: {e}"));
    // The run is over: nothing writes this process's buffers any more.
    let records = mine
        .into_iter()
        .map(|(pid, (records, bufs))| {
            free(bufs);
            (pid, records)
        })
        .collect();
    common::gather(p, records)
}

/// Random on threads; over ranks the same on every rank.
fn rng_seed() -> RngSeed {
    if common::over_ranks() {
        RngSeed::Fixed(0x05EE_DB5B)
    } else {
        RngSeed::Random
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: common::limit(160, 12),
        rng_seed: rng_seed(),
        ..ProptestConfig::default()
    })]

    #[test]
    fn runtime_agrees_with_sequential_model(
        p in 1usize..=5.min(common::max_procs()),
        steps in 1usize..=10,
        seed in any::<u64>(),
    ) {
        let prog = generate(p, steps, seed);
        let records = execute(p, &prog);
        if let Err(e) = check(p, &prog, &records) {
            prop_assert!(false, "seed {seed}, p {p}: {e}");
        }
    }
}

/// `prog` without the gets of two supersteps in three, so that more of them can be lazy
/// (`lazy_count`).
fn fewer_gets(mut prog: Vec<Step>) -> Vec<Step> {
    for (k, step) in prog.iter_mut().enumerate() {
        if k % 3 != 2 {
            for ops in &mut step.ops {
                ops.retain(|op| !matches!(op, Op::Get { .. }));
            }
        }
    }
    prog
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: common::limit(80, 6),
        rng_seed: rng_seed(),
        ..ProptestConfig::default()
    })]

    /// The same with more lazy supersteps, in runs of several.
    #[test]
    fn runtime_with_lazy_syncs_agrees_with_sequential_model(
        p in 1usize..=5.min(common::max_procs()),
        steps in 1usize..=12,
        seed in any::<u64>(),
    ) {
        let prog = fewer_gets(generate(p, steps, seed));
        let records = execute(p, &prog);
        if let Err(e) = check(p, &prog, &records) {
            prop_assert!(false, "seed {seed}, p {p}: {e}");
        }
    }
}

/// A long fixed-seed program at a size proptest rarely reaches.
#[test]
fn long_program_agrees_with_model() {
    // Over ranks: as many processes as there are ranks.
    let p = 6.min(common::max_procs());
    let mut lazy = 0;
    for seed in 0..4 {
        let mut prog = generate(p, 40, 0xC0FFEE + seed);
        if seed >= 2 {
            prog = fewer_gets(prog);
        }
        let records = execute(p, &prog);
        check(p, &prog, &records).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        lazy += (0..prog.len())
            .filter(|&k| (0..p).any(|i| lazy_count(&prog, k, i).is_some_and(|m| m > 0)))
            .count();
    }
    // Lazy supersteps (declared counts, `Ctx::declare_incoming`) with data are among them.
    assert!(lazy >= 6, "only {lazy} lazy supersteps with data");
}

#[test]
fn generator_exercises_every_operation() {
    let (mut puts, mut gets, mut sends, mut pushes, mut pops, mut nulls, mut shadows) =
        (0, 0, 0, 0, 0, 0, 0);
    for seed in 0..200 {
        let prog = generate(4, 8, seed);
        let mut live: Vec<Vec<Option<usize>>> = Vec::new();
        for step in &prog {
            for ops in &step.ops {
                for op in ops {
                    match op {
                        Op::Put { .. } => puts += 1,
                        Op::Get { .. } => gets += 1,
                        Op::Send { .. } => sends += 1,
                        Op::Write { .. } => {}
                    }
                }
            }
            for call in &step.regs {
                match call {
                    RegCall::Push(per) => {
                        pushes += 1;
                        nulls += per.iter().filter(|x| x.0.is_none()).count();
                        let addrs: Vec<_> = per.iter().map(|x| x.0).collect();
                        if live
                            .iter()
                            .any(|l| l.iter().zip(&addrs).any(|(a, b)| a.is_some() && a == b))
                        {
                            shadows += 1;
                        }
                        live.push(addrs);
                    }
                    RegCall::Pop(_) => pops += 1,
                }
            }
        }
    }
    eprintln!(
        "puts {puts} gets {gets} sends {sends} pushes {pushes} pops {pops} nulls {nulls} shadows {shadows}"
    );
    for (what, n) in [
        ("puts", puts),
        ("gets", gets),
        ("sends", sends),
        ("pops", pops),
        ("nulls", nulls),
        ("shadows", shadows),
    ] {
        assert!(n > 100, "too few {what}: {n}");
    }
}

/// A case proptest found: two pops of NULL in one superstep, with two null registrations, both
/// resolved to the newest one ("pops the registration in slot 2 twice").
#[test]
fn regression_two_null_pops_in_one_superstep() {
    let (p, seed) = (1, 14382256994169017907);
    let prog = generate(p, 6, seed);
    let records = execute(p, &prog);
    check(p, &prog, &records).unwrap();
}
