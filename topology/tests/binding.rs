//! Binding on the machine running the tests (whatever its shape), and its absence on loaded
//! machines.

use mbsp_topology::{Binder, Binding, Level, Machine, NotBound, Policy, Source, plan, plan_per};

#[test]
fn threads_are_bound_to_their_plan_and_the_binding_reads_back() {
    let loaded = Machine::detect().unwrap();
    let binder = Binder::new(&loaded);
    let m = loaded.machine.clone();
    if !m.source().is_real() {
        eprintln!("HWLOC_* environment makes hwloc load a fake machine; nothing to bind");
        assert!(!binder.applies());
        return;
    }
    assert!(binder.applies());
    // Every PU of the machine in turn, each from a fresh thread.
    for d in plan_per(&m, &m.whole(), Level::Pu) {
        let b = binder.clone();
        let want = d.pu_os(&m);
        let got = std::thread::spawn(move || match b.bind_thread(&d) {
            Binding::Applied(cpus) => Some((cpus, b.thread_cpus())),
            Binding::Refused(why) => {
                assert!(
                    !why.contains("isn't valid"),
                    "our request was malformed: {why}"
                );
                eprintln!("binding refused here: {why}");
                None
            }
            Binding::NotApplied(why) => panic!("real machine but not applied: {why}"),
        })
        .join()
        .unwrap();
        if let Some((applied, read_back)) = got {
            assert_eq!(applied, want);
            assert_eq!(read_back, Some(want), "the OS reports the binding we set");
        }
    }
}

#[test]
fn memory_is_bound_to_the_plans_numa_node_and_reported() {
    let loaded = Machine::detect().unwrap();
    let binder = Binder::new(&loaded);
    let m = loaded.machine.clone();
    if !binder.applies() {
        return;
    }
    let d = &plan(&m, &m.whole(), 1, &Policy::Compact).unwrap()[0];
    let buf = vec![1u8; 1 << 20];
    match binder.bind_memory(&buf, d) {
        Binding::Applied(nodes) => {
            assert_eq!(nodes, d.numas(&m));
            let at = binder.memory_nodes(&buf).expect("location query");
            assert!(
                !at.is_empty() && at.iter().all(|n| nodes.contains(n)),
                "{at:?} vs {nodes:?}"
            );
        }
        Binding::Refused(why) => {
            assert!(
                !why.contains("isn't valid"),
                "our request was malformed: {why}"
            );
            eprintln!("memory binding refused here: {why}");
        }
        Binding::NotApplied(why) => panic!("{why}"),
    }
}

#[test]
fn loaded_machines_are_planned_but_never_bound() {
    let loaded = Machine::synthetic("package:2 core:4 pu:2").unwrap();
    let binder = Binder::new(&loaded);
    assert!(!binder.applies());
    let d = &plan_per(&loaded.machine, &loaded.machine.whole(), Level::Core)[0];
    let want = NotBound::OtherMachine {
        origin: Source::Synthetic("package:2 core:4 pu:2".into()),
    };
    assert_eq!(binder.not_applied(), Some(want.clone()));
    let b = binder.bind_thread(d);
    assert_eq!(b, Binding::NotApplied(want.clone()));
    assert_eq!(
        b.to_string(),
        "not bound: planned for another machine (synthetic \"package:2 core:4 pu:2\")"
    );
    assert_eq!(binder.bind_memory(&[1, 2, 3], d), Binding::NotApplied(want));
    assert!(
        binder
            .memory_nodes(&[1, 2, 3])
            .unwrap_err()
            .to_string()
            .contains("not this machine")
    );
}
