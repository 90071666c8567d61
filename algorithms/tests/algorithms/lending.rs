//! A panic in a process whose memory other processes are reading ends the run with the panic as
//! its error, never a crash: every lending path of the algorithms, with a panicking user
//! operator (or a panic in user code between the lend and the release), run many times while
//! spinning threads load the machine so that the other processes are often mid-copy when the
//! panic unwinds.
//!
//! * Collectives with two phases of direct gets lend the caller's own buffer (and scratch):
//!   a panicking reduction operator unwinds through the frame that owns them. `Ctx::lending`
//!   must hold the unwind until no process reads them any more.
//! * The high-performance SpMV lends runtime-owned registrations (`Reg`): a panic between two
//!   multiplies drops the plan's handles while others still read them; the registration tables
//!   must keep the memory alive. (The FFT's packs, lent the same way, are tested in fft.rs,
//!   which instantiates the FFT anyway: instantiating it costs a test binary much compile
//!   time.)

use crate::common;

use common::{Load, memcheck, within};
use mbsp::{Ctx, ErrorKind};
use mbsp_algorithms::collectives::{Algorithm, Collectives};
use std::sync::Arc;

/// Runs per case; one under scripts/memcheck (`MBSP_TEST_MEMCHECK`), where memcheck itself
/// catches any read of freed memory.
fn rounds() -> usize {
    if memcheck() { 1 } else { 5 }
}

/// Run `f` on `p` processes [`rounds`] times under load; every run must fail with a panic whose
/// message contains `needle`.
fn expect_panic(p: usize, needle: &'static str, f: fn(&mut Ctx) -> mbsp::Result<()>) {
    let _load = Load::new();
    for round in 0..rounds() {
        let e = within(120, move || mbsp::run(p, f)).expect_err("the run must fail");
        assert_eq!(e.kind(), ErrorKind::Panic, "round {round}: {e}");
        assert!(e.to_string().contains(needle), "round {round}: {e}");
    }
}

/// Elements per process: 64 MiB, above glibc's largest mmap threshold (32 MiB), so that a
/// buffer is always a mapping of its own (freeing it unmaps it, and a read after the free
/// faults), and large enough that reading it takes a while.
const N: usize = 1 << 23;

/// Pid 0's first element overflows when pid 0 combines its block (block 0 of every buffer), at
/// the start of phase 1, while the other processes read their blocks of pid 0's buffer.
fn overflowing(ctx: &Ctx) -> Vec<u64> {
    let mut v = vec![1u64; N];
    if ctx.pid() == 0 {
        v[0] = u64::MAX;
    }
    v
}

fn checked(a: u64, b: u64) -> u64 {
    a.checked_add(b).expect("overflow in the operator")
}

fn two_phase() -> Collectives {
    Collectives::default().algorithm(Algorithm::TwoPhase)
}

#[test]
fn allreduce_with_a_panicking_operator() {
    for p in [2, 3] {
        expect_panic(p, "overflow in the operator", |ctx| {
            let mut v = overflowing(ctx);
            two_phase().allreduce(ctx, &mut v, checked)
        });
    }
}

#[test]
fn reduce_with_a_panicking_operator() {
    expect_panic(2, "overflow in the operator", |ctx| {
        let mut v = overflowing(ctx);
        two_phase().reduce(ctx, 1, &mut v, checked)
    });
}

#[test]
fn scans_with_a_panicking_operator() {
    expect_panic(2, "overflow in the operator", |ctx| {
        let mut v = overflowing(ctx);
        two_phase().scan_inclusive(ctx, &mut v, checked)
    });
    expect_panic(3, "overflow in the operator", |ctx| {
        let mut v = overflowing(ctx);
        two_phase().scan_exclusive(ctx, &mut v, 0, checked)
    });
}

/// The free function with the automatic choice, as the reproduction calls it.
#[test]
fn automatic_allreduce_with_a_panicking_operator() {
    expect_panic(2, "overflow in the operator", |ctx| {
        let mut v = overflowing(ctx);
        mbsp_algorithms::collectives::allreduce(ctx, &mut v, checked)
    });
}

/// An operator that panics on a process other than the one whose buffer is being read: the
/// lenders that do not panic see the failure at their next primitive and leave their scope
/// only once the panicking process has stopped reading their memory.
#[test]
fn a_panic_elsewhere_releases_every_lender() {
    expect_panic(3, "operator of pid 2", |ctx| {
        let me = ctx.pid();
        let mut v = vec![me as u64; N];
        two_phase().allreduce(ctx, &mut v, move |a, b| {
            if me == 2 {
                panic!("operator of pid 2");
            }
            a + b
        })
    });
}

/// A panic in user code between two high-performance multiplies, while the other processes
/// read this process's `x` with direct gets in their multiply.
#[test]
fn hp_spmv_with_a_panic_between_multiplies() {
    use mbsp_algorithms::sparse::CooMatrix;
    use mbsp_algorithms::sparse::partition::{Options, partition};
    use mbsp_algorithms::sparse::spmv::{Fanout, HpSpmv, SpmvPlan};
    // A dense-ish band: every process reads much of every other's x.
    let n = 4000usize;
    let mut entries = Vec::new();
    for i in 0..n {
        for d in [0, 1, 7, 500, 1999] {
            entries.push((i, (i + d) % n, 1.0));
        }
    }
    let a = CooMatrix::new(n, n, entries).unwrap();
    let plan =
        Arc::new(SpmvPlan::new(&a, &partition(&a, 2, &Options::default()).unwrap().dist).unwrap());
    let _load = Load::new();
    for round in 0..rounds() {
        let plan = plan.clone();
        let e = within(120, move || {
            mbsp::run(2, |ctx| {
                let mut spmv = HpSpmv::with_fanout(ctx, &plan, Fanout::DirectGet)?;
                spmv.x_mut(ctx)?.fill(1.0);
                ctx.sync()?;
                let mut y = vec![0.0; spmv.local().y_owned.len()];
                for k in 0..50 {
                    if ctx.pid() == 0 && k == 10 + round {
                        panic!("user code between multiplies");
                    }
                    spmv.multiply(ctx, &mut y)?;
                }
                Ok(())
            })
        })
        .expect_err("the run must fail");
        assert_eq!(e.kind(), ErrorKind::Panic, "round {round}: {e}");
        assert!(e.to_string().contains("between multiplies"), "{e}");
    }
}
