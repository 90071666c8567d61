//! Random BSP programs checked against a sequential model of BSPlib (the generator, the runs
//! and the model are in `common/bsplib_model.rs`, which the MPI self-test runs over ranks too).

#[path = "common/bsplib_model.rs"]
mod bsplib_model;

use bsplib_model::*;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    #[test]
    fn runtime_agrees_with_sequential_model(p in 1usize..=5, steps in 1usize..=10, seed in any::<u64>()) {
        let prog = generate(p, steps, seed);
        let records = execute(p, &prog);
        if let Err(e) = check(p, &prog, &records) {
            prop_assert!(false, "seed {seed}, p {p}: {e}");
        }
    }
}

/// A long fixed-seed program at a size proptest rarely reaches.
#[test]
fn long_program_agrees_with_model() {
    for seed in 0..4 {
        let prog = generate(6, 40, 0xC0FFEE + seed);
        let records = execute(6, &prog);
        check(6, &prog, &records).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
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
