//! Runs placed on machine trees: plans, nesting through the levels, binding and its restoration,
//! NUMA-local memory. Synthetic trees make the multi-socket cases testable on any machine.

mod common;
use common::within;
use mbsp::topology::Binder;
use mbsp::{Binding, Level, Machine, Policy, Run};

fn fake(desc: &str) -> mbsp::topology::Loaded {
    Machine::synthetic(desc).unwrap()
}

#[test]
fn one_process_per_package_then_per_core_then_per_pu() {
    within(60, || {
        let m = fake("package:2 numa:2 core:3 pu:2");
        let r = Run::per(Level::Package)
            .machine(m)
            .run(|ctx| {
                let me = ctx.placement();
                assert_eq!(me.packages, vec![ctx.pid()]);
                assert_eq!(me.cores.len(), 6);
                assert!(
                    matches!(me.binding, Binding::NotApplied(_)),
                    "fake machine: not bound"
                );
                let numas = ctx.run_per(Level::Numa, |n| {
                    let mine = n.placement();
                    let cores = n.run_per(Level::Core, |c| {
                        let pus = c.run_per(Level::Pu, |u| {
                            u.sync()?;
                            Ok(u.placement().pus)
                        })?;
                        Ok((c.placement().cores, pus))
                    })?;
                    Ok((mine.numas, cores))
                })?;
                ctx.sync()?;
                Ok(numas)
            })
            .unwrap();
        assert_eq!(r.len(), 2);
        // Package 1, NUMA node 3, core 11 (its third), PUs 22 and 23.
        let (numa, cores) = &r[1][1];
        assert_eq!(numa, &vec![3]);
        assert_eq!(cores[2].0, vec![11]);
        assert_eq!(cores[2].1, vec![vec![22], vec![23]]);
        let leaves: usize = r
            .iter()
            .flatten()
            .flat_map(|x| &x.1)
            .map(|c| c.1.len())
            .sum();
        assert_eq!(leaves, 24, "every PU of the machine runs exactly one leaf");
    });
}

#[test]
fn placements_follow_the_policy_and_nested_runs_stay_inside() {
    within(60, || {
        let m = fake("package:2 numa:2 core:4 pu:2");
        let scattered = Run::new(4)
            .machine(m.clone())
            .policy(Policy::Scattered)
            .run(|ctx| {
                let mine = ctx.placement();
                // Nested runs inherit the policy and are planned inside the parent's domain.
                let inner = ctx.run(2, |n| Ok(n.placement()))?;
                for x in &inner {
                    assert!(
                        x.pus.iter().all(|p| mine.pus.contains(p)),
                        "{x} inside {mine}"
                    );
                }
                Ok((mine, inner))
            })
            .unwrap();
        let packages: Vec<_> = scattered.iter().map(|x| x.0.packages.clone()).collect();
        assert_eq!(packages, vec![vec![0], vec![1], vec![0], vec![1]]);
        assert!(
            scattered
                .iter()
                .all(|x| x.0.cores.len() == 4 && x.0.numas.len() == 1)
        );
        assert_eq!(scattered[1].1[1].cores, vec![10, 11]);

        let compact = Run::new(3)
            .machine(m.clone())
            .policy(Policy::Compact)
            .run(|ctx| Ok(ctx.placement().cores))
            .unwrap();
        assert_eq!(compact, vec![vec![0], vec![1], vec![2]]);

        let manual = Run::new(2)
            .machine(m)
            .policy(Policy::Manual(vec![vec![5], vec![6, 7]]))
            .run(|ctx| Ok(ctx.placement().pus))
            .unwrap();
        assert_eq!(manual, vec![vec![5], vec![6, 7]]);
    });
}

#[test]
fn impossible_plans_are_clear_errors() {
    let e = Run::new(2)
        .machine(fake("package:2 core:2 pu:1"))
        .policy(Policy::Manual(vec![vec![0], vec![99]]))
        .run(|_| Ok(()))
        .unwrap_err();
    assert_eq!(e.op(), "run");
    assert!(
        e.to_string().contains("names CPU 99, which does not exist"),
        "{e}"
    );

    within(60, || {
        let e = Run::per(Level::Package)
            .machine(fake("package:2 core:2 pu:1"))
            .run(|ctx| {
                ctx.run_with(
                    Run::new(1).policy(Policy::Manual(vec![vec![3 - 2 * ctx.pid() as u32]])),
                    |_| Ok(()),
                )?;
                Ok(())
            })
            .unwrap_err();
        assert!(
            e.to_string().contains("outside the CPUs being placed"),
            "{e}"
        );
    });
}

#[test]
fn more_processes_than_the_domain_has_pus_share_them() {
    within(60, || {
        let r = Run::new(2)
            .machine(fake("package:2 core:1 pu:1"))
            .run(|ctx| {
                let inner = ctx.run(3, |n| {
                    n.sync()?;
                    Ok(n.placement().pus)
                })?;
                Ok(inner)
            })
            .unwrap();
        assert_eq!(r[1], vec![vec![1], vec![1], vec![1]]);
    });
}

/// On the machine running the tests: threads are bound to their placement (read back from the
/// OS), nested pid 0 gets its parent's binding back, and the caller gets its own back.
#[test]
fn bindings_on_this_machine_read_back_and_are_restored() {
    let loaded = Machine::current().unwrap();
    let binder = Binder::new(&loaded);
    if !binder.applies() {
        eprintln!(
            "not a real machine ({}); skipping the read-back",
            loaded.machine.source()
        );
        return;
    }
    within(60, move || {
        let before = binder.thread_cpus();
        let p = loaded.machine.pus().len().max(2);
        let r = Run::new(p)
            .run(|ctx| {
                let mine = ctx.placement();
                let b = Binder::new(&Machine::current().unwrap());
                let now = b.thread_cpus();
                if let Binding::Applied(cpus) = &mine.binding {
                    assert_eq!(cpus, &mine.pus);
                    assert_eq!(now.as_ref(), Some(&mine.pus), "the OS agrees");
                }
                let inner = ctx.run(2, |n| Ok(n.placement().pus))?;
                assert_eq!(b.thread_cpus(), now, "restored after the nested run");
                Ok((mine, inner))
            })
            .unwrap();
        assert_eq!(
            binder.thread_cpus(),
            before,
            "the caller's binding is restored"
        );
        for (mine, inner) in &r {
            for x in inner {
                assert!(x.iter().all(|p| mine.pus.contains(p)));
            }
        }
    });
}

#[test]
fn registered_memory_reports_its_numa_node() {
    let r = mbsp::run(2, |ctx| {
        let x = ctx.push_reg(vec![7u64; 1 << 14])?;
        let at = ctx.memory_nodes(&x);
        Ok((ctx.placement(), at.map_err(|e| e.to_string())))
    })
    .unwrap();
    for (place, at) in r {
        match (&place.binding, at) {
            (Binding::Applied(_), Ok(nodes)) => {
                assert!(
                    !nodes.is_empty() && nodes.iter().all(|n| place.numas.contains(n)),
                    "{nodes:?} vs {place}"
                )
            }
            (Binding::Applied(_), Err(e)) => eprintln!("memory location not available here: {e}"),
            (_, r) => eprintln!("unbound ({place}): {r:?}"),
        }
    }
    // On a loaded machine the location is unknown and the error says why.
    let r = Run::new(1)
        .machine(fake("package:2 core:2 pu:1"))
        .run(|ctx| {
            let x = ctx.push_reg(vec![0u8; 64])?;
            Ok(ctx.memory_nodes(&x).unwrap_err().to_string())
        })
        .unwrap();
    assert!(r[0].contains("not this machine"), "{}", r[0]);
}

#[test]
fn unbound_runs_are_planned_but_not_bound() {
    let r = Run::new(2)
        .bind(false)
        .run(|ctx| Ok(ctx.placement()))
        .unwrap();
    for x in r {
        assert!(matches!(x.binding, Binding::NotApplied(_)), "{x}");
        assert!(!x.pus.is_empty());
    }
}
