//! The barrier follows the machine: a run spanning packages combines within each package
//! first and crosses packages in ⌈log₂ #packages⌉ rounds, whatever the placement policy; a
//! one-package run keeps the flat dissemination. Communication across such barriers (puts that
//! ride in barrier lines, puts through outboxes, gets, messages) delivers the right data, and so
//! does communication across the tree barrier of oversubscribed runs.

use crate::common;

use common::within;
use mbsp::internals::{barrier_shape, tree_barrier};
use mbsp::{Machine, Policy, Run};

fn machine(desc: &str) -> mbsp::topology::Loaded {
    Machine::synthetic(desc).expect("synthetic machine")
}

/// Rounds in which process `pid` reads from another package.
fn cross_rounds(groups: &[usize], sources: &[Vec<u32>], pid: usize) -> usize {
    sources[pid]
        .iter()
        .filter(|&&s| groups[s as usize] != groups[pid])
        .count()
}

#[test]
fn runs_spanning_packages_cross_them_in_log_rounds() {
    within(120, || {
        let cases = [
            ("package:2 core:4 pu:1", 8, 1),
            ("package:2 core:4 pu:1", 4, 1),
            ("package:4 core:2 pu:1", 8, 2),
            ("package:4 numa:2 core:2 pu:1", 16, 2),
            ("package:1 core:8 pu:1", 8, 0),
        ];
        for (desc, p, want) in cases {
            for policy in [Policy::Scattered, Policy::Compact] {
                // The machine's own barrier, even where this one has fewer cores (there runs
                // of more than twice as many processes as cores get a tree barrier: barrier.rs).
                let run = Run::new(p).machine(machine(desc)).policy(policy.clone());
                let shapes = tree_barrier(run, false)
                    .run(|ctx| Ok(barrier_shape(ctx)))
                    .unwrap();
                let (groups, sources) = &shapes[0];
                let packages: std::collections::BTreeSet<_> = groups.iter().collect();
                for pid in 0..p {
                    let cross = cross_rounds(groups, sources, pid);
                    if packages.len() > 1 {
                        assert_eq!(cross, want, "{desc} p {p} {policy}: pid {pid}");
                    } else {
                        assert_eq!(cross, 0, "{desc} p {p} {policy}");
                    }
                }
            }
        }
    });
}

/// A ring of puts (small ones ride in the barrier, large ones go through outboxes), gets and
/// messages over several supersteps, on machines with 2 and 4 packages.
#[test]
fn communication_across_grouped_barriers() {
    within(120, || {
        for (desc, p) in [
            ("package:2 core:3 pu:1", 6),
            ("package:2 core:4 pu:1", 5),
            ("package:4 core:2 pu:1", 8),
            ("package:4 core:2 pu:1", 7),
        ] {
            // Both barriers: the machine's own, and the tree of oversubscribed runs.
            let runs = [Policy::Scattered, Policy::Compact]
                .into_iter()
                .flat_map(|policy| {
                    let run = Run::new(p).machine(machine(desc)).policy(policy);
                    [tree_barrier(run.clone(), false), tree_barrier(run, true)]
                });
            for run in runs {
                let r = run.run(|ctx| {
                    let (me, p) = (ctx.pid(), ctx.nprocs());
                    let x = ctx.push_reg(vec![me as u64; 64])?;
                    let y = ctx.push_reg(vec![0u64; 64 * p])?;
                    ctx.sync()?;
                    for step in 0..20u64 {
                        for d in 0..p {
                            // One word to everyone (rides where it can), 40 more to one
                            // (more than a line carries: through the outbox).
                            ctx.put(d, &[step * 1000 + me as u64], &y, me)?;
                            if d == (me + 1) % p {
                                ctx.put(d, &[step; 40], &y, p + 40 * me)?;
                            }
                            ctx.send_pod(d, &(), &[me as u64, step])?;
                        }
                        let left = (me + p - 1) % p;
                        ctx.get(left, &x, 0..8, &y, 48 * p)?;
                        ctx.sync()?;
                        let v = ctx.local(&y)?;
                        for (q, &got) in v[..p].iter().enumerate() {
                            assert_eq!(got, step * 1000 + q as u64);
                        }
                        assert_eq!(&v[p + 40 * left..p + 40 * left + 40], &[step; 40]);
                        assert_eq!(&v[48 * p..48 * p + 8], &[left as u64; 8]);
                        let mut seen = vec![false; p];
                        while let Some(m) = ctx.hpmove()? {
                            let w = m.payload_as::<u64>();
                            assert_eq!(w[1], step);
                            seen[w[0] as usize] = true;
                        }
                        assert!(seen.iter().all(|&s| s), "a message from everyone");
                    }
                    Ok(())
                });
                r.unwrap_or_else(|e| panic!("{desc} p {p}: {e}"));
            }
        }
    });
}
