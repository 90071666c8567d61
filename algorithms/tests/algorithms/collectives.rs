//! Every collective against a sequential model: random sizes, every algorithm, p in
//! {1, 2, 3, 4, 7, 8}, flat and nested at two levels; the caller's tag size, registrations and
//! queue are as they were afterwards.
//!
//! Inputs are a deterministic function of (seed, pid), so every process rebuilds all inputs and
//! checks its own result against the model itself.

use crate::common;

use common::{mix, within};
use mbsp::Ctx;
use mbsp_algorithms::collectives::{Algorithm, Collectives};
use mbsp_algorithms::dist::block_range;
use proptest::prelude::*;

/// 2x2 matrices mod 2^64: associative, not commutative, so the pid order of reductions shows.
type M = [u64; 4];

fn mul(a: M, b: M) -> M {
    let m = |x: u64, y: u64| x.wrapping_mul(y);
    [
        m(a[0], b[0]).wrapping_add(m(a[1], b[2])),
        m(a[0], b[1]).wrapping_add(m(a[1], b[3])),
        m(a[2], b[0]).wrapping_add(m(a[3], b[2])),
        m(a[2], b[1]).wrapping_add(m(a[3], b[3])),
    ]
}

const IDENTITY: M = [1, 0, 0, 1];

fn matrices(seed: u64, pid: usize, n: usize, salt: u64) -> Vec<M> {
    (0..n as u64)
        .map(|i| {
            let b = mix(seed ^ mix(pid as u64 * 1_000_003 + i) ^ salt);
            [b % 7 + 1, b >> 8 & 3, b >> 16 & 3, b >> 24 & 7]
        })
        .collect()
}

fn bytes(seed: u64, pid: usize, n: usize, salt: u64) -> Vec<u8> {
    (0..n as u64)
        .map(|i| mix(seed ^ salt ^ mix(pid as u64 ^ (i << 20))) as u8)
        .collect()
}

/// The model of a reduction over processes `pids`, elementwise, in pid order.
fn fold<T: Copy>(
    inputs: &[Vec<T>],
    pids: std::ops::Range<usize>,
    op: impl Fn(T, T) -> T,
) -> Option<Vec<T>> {
    let mut pids = pids;
    let first = pids.next()?;
    let mut acc = inputs[first].clone();
    for q in pids {
        for (a, &b) in acc.iter_mut().zip(&inputs[q]) {
            *a = op(*a, b);
        }
    }
    Some(acc)
}

/// Every fixed-length collective by one algorithm, checked against the model.
fn fixed_length(ctx: &mut Ctx, c: &Collectives, seed: u64, n: usize) -> mbsp::Result<()> {
    let (me, p) = (ctx.pid(), ctx.nprocs());
    let root = (mix(seed) % p as u64) as usize;
    let all: Vec<Vec<M>> = (0..p).map(|q| matrices(seed, q, n, 1)).collect();
    let what = |op: &str| format!("{op}: pid {me} of {p}, n {n}, seed {seed}, {c:?}");

    let mut b = if me == root {
        all[root].clone()
    } else {
        vec![[0; 4]; n]
    };
    c.broadcast(ctx, root, &mut b)?;
    assert_eq!(b, all[root], "{}", what("broadcast"));

    let mut b = all[me].clone();
    c.reduce(ctx, root, &mut b, mul)?;
    let want = if me == root {
        fold(&all, 0..p, mul).unwrap()
    } else {
        all[me].clone()
    };
    assert_eq!(b, want, "{}", what("reduce"));

    let mut b = all[me].clone();
    c.allreduce(ctx, &mut b, mul)?;
    assert_eq!(b, fold(&all, 0..p, mul).unwrap(), "{}", what("allreduce"));

    let mut b = all[me].clone();
    c.scan_inclusive(ctx, &mut b, mul)?;
    assert_eq!(
        b,
        fold(&all, 0..me + 1, mul).unwrap(),
        "{}",
        what("scan_inclusive")
    );

    let mut b = all[me].clone();
    c.scan_exclusive(ctx, &mut b, IDENTITY, mul)?;
    let want = fold(&all, 0..me, mul).unwrap_or_else(|| vec![IDENTITY; n]);
    assert_eq!(b, want, "{}", what("scan_exclusive"));

    // One-byte elements: block boundaries in elements, not words.
    let small: Vec<Vec<u8>> = (0..p).map(|q| bytes(seed, q, n + 3, 2)).collect();
    let mut b = small[me].clone();
    c.allreduce(ctx, &mut b, u8::wrapping_add)?;
    assert_eq!(
        b,
        fold(&small, 0..p, u8::wrapping_add).unwrap(),
        "{}",
        what("allreduce u8")
    );
    let mut b = if me == root {
        small[root].clone()
    } else {
        vec![0; n + 3]
    };
    c.broadcast(ctx, root, &mut b)?;
    assert_eq!(b, small[root], "{}", what("broadcast u8"));
    Ok(())
}

/// Gather, scatter, all-gather, all-to-all with random lengths per process.
fn variable_length(ctx: &mut Ctx, c: &Collectives, seed: u64, n: usize) -> mbsp::Result<()> {
    let (me, p) = (ctx.pid(), ctx.nprocs());
    let root = (mix(seed ^ 5) % p as u64) as usize;
    let len = |q: usize| (mix(seed ^ (q as u64 + 77)) % (n as u64 + 1)) as usize;
    let local = |q: usize| -> Vec<u32> { (0..len(q)).map(|i| (q * 1000 + i) as u32).collect() };
    let concat: Vec<u32> = (0..p).flat_map(local).collect();
    let what = |op: &str| format!("{op}: pid {me} of {p}, n {n}, seed {seed}");

    let g = c.gather(ctx, root, &local(me))?;
    match g {
        Some(parts) => {
            assert_eq!(me, root, "{}", what("gather"));
            assert_eq!(parts.as_slice(), &concat[..], "{}", what("gather"));
            for q in 0..p {
                assert_eq!(parts.part(q), &local(q)[..], "{}", what("gather part"));
            }
        }
        None => assert_ne!(me, root, "{}", what("gather")),
    }

    let g = c.allgather(ctx, &local(me))?;
    assert_eq!(g.as_slice(), &concat[..], "{}", what("allgather"));
    assert_eq!(g.parts(), p);

    let data = if me == root { concat.clone() } else { vec![] };
    let s = c.scatter(ctx, root, &data)?;
    assert_eq!(
        s,
        concat[block_range(concat.len(), p, me)],
        "{}",
        what("scatter")
    );

    let counts: Vec<usize> = (0..p).map(len).collect();
    let s = if me == root {
        c.scatterv(ctx, root, &concat, &counts)?
    } else {
        c.scatterv(ctx, root, &[], &[])?
    };
    assert_eq!(s, local(me), "{}", what("scatterv"));

    // alltoall: piece j of process i is [i, j, 0..k).
    let k = n % 5;
    let piece = |i: usize, j: usize| -> Vec<u64> {
        (0..k).map(|t| (i * 10_000 + j * 100 + t) as u64).collect()
    };
    let send: Vec<u64> = (0..p).flat_map(|j| piece(me, j)).collect();
    let got = c.alltoall(ctx, &send)?;
    let want: Vec<u64> = (0..p).flat_map(|i| piece(i, me)).collect();
    assert_eq!(got, want, "{}", what("alltoall"));

    // alltoallv: process i sends count(i, j) items to j.
    let count = |i: usize, j: usize| (mix(seed ^ (i * 64 + j) as u64) % (n as u64 + 1)) as usize;
    let vpiece = |i: usize, j: usize| -> Vec<u16> {
        (0..count(i, j))
            .map(|t| (i * 1000 + j * 10 + t) as u16)
            .collect()
    };
    let send: Vec<u16> = (0..p).flat_map(|j| vpiece(me, j)).collect();
    let counts: Vec<usize> = (0..p).map(|j| count(me, j)).collect();
    let got = c.alltoallv(ctx, &send, &counts)?;
    for i in 0..p {
        assert_eq!(got.part(i), &vpiece(i, me)[..], "{}", what("alltoallv"));
    }
    Ok(())
}

const ALGORITHMS: [Algorithm; 5] = [
    Algorithm::Auto,
    Algorithm::Messages,
    Algorithm::Direct,
    Algorithm::TwoPhase,
    Algorithm::Tree,
];

/// Everything, with a caller's tag size and registration in place that must survive.
fn program(ctx: &mut Ctx, seed: u64, n: usize) -> mbsp::Result<()> {
    let old = ctx.set_tagsize(12)?;
    let mine = ctx.push_reg(vec![0u64; 2])?;
    ctx.sync()?;
    let regs = ctx.registrations();
    for a in ALGORITHMS {
        let c = Collectives::default().algorithm(a);
        fixed_length(ctx, &c, seed, n)?;
    }
    variable_length(ctx, &Collectives::default(), seed, n)?;
    assert_eq!(ctx.tagsize(), 12, "tag size restored");
    assert_eq!(ctx.qsize()?.messages, 0, "queue empty");
    assert_eq!(ctx.registrations(), regs, "registrations restored");
    // The caller's registration still works.
    let next = (ctx.pid() + 1) % ctx.nprocs();
    ctx.put(next, &[ctx.pid() as u64], &mine, 1)?;
    ctx.sync()?;
    let prev = (ctx.pid() + ctx.nprocs() - 1) % ctx.nprocs();
    assert_eq!(ctx.local(&mine)?[1], prev as u64);
    ctx.pop_reg(&mine)?;
    ctx.set_tagsize(old)?;
    ctx.sync()
}

const PS: [usize; 6] = [1, 2, 3, 4, 7, 8];

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn every_collective_matches_the_model(pi in 0..PS.len(), n in 0usize..40, seed in any::<u64>()) {
        let p = PS[pi];
        within(120, move || mbsp::run(p, |ctx| program(ctx, seed, n)))
            .unwrap_or_else(|e| panic!("p {p} n {n} seed {seed}: {e}"));
    }
}

#[test]
fn every_p_and_sizes_around_the_blocks() {
    within(300, || {
        for p in PS {
            for n in [0, 1, p - 1, p, p + 1, 3 * p + 2, 1000] {
                mbsp::run(p, |ctx| program(ctx, 42 + n as u64, n))
                    .unwrap_or_else(|e| panic!("p {p} n {n}: {e}"));
            }
        }
    });
}

#[test]
fn large_data_takes_the_registered_algorithms_automatically() {
    use mbsp_algorithms::collectives::Collective;
    let c = Collectives::default();
    // Large enough that the default parameters pick two-phase at p = 4.
    let n = 1 << 16;
    assert_eq!(
        c.plan(Collective::AllReduce, 4, n, 8).0,
        Algorithm::TwoPhase
    );
    within(120, move || {
        mbsp::run(4, |ctx| {
            let all: Vec<Vec<u64>> = (0..4)
                .map(|q| (0..n as u64).map(|i| mix(i ^ q)).collect())
                .collect();
            let mut b = all[ctx.pid()].clone();
            mbsp_algorithms::collectives::allreduce(ctx, &mut b, u64::wrapping_add)?;
            assert_eq!(b, fold(&all, 0..4, u64::wrapping_add).unwrap());
            let mut b = if ctx.pid() == 3 {
                all[3].clone()
            } else {
                vec![0; n]
            };
            mbsp_algorithms::collectives::broadcast(ctx, 3, &mut b)?;
            assert_eq!(b, all[3]);
            Ok(())
        })
        .unwrap();
    });
}

/// The plan is the cheapest prediction over every algorithm (messages on a tie), whatever the
/// parameters: its shortcut for small calls (messages at most 2 l) never changes the choice.
#[test]
fn the_plan_is_the_cheapest_prediction() {
    use mbsp::params::Params;
    use mbsp_algorithms::collectives::Collective;
    let ops = [
        Collective::Broadcast,
        Collective::Reduce,
        Collective::AllReduce,
        Collective::ScanInclusive,
        Collective::ScanExclusive,
        Collective::Gather,
        Collective::AllGather,
        Collective::Scatter,
        Collective::AllToAll,
    ];
    let machines = [
        Params::DEFAULT,
        Params {
            l: 1.6e-7,
            g: 1.6e-9,
            g_msg: 2.5e-8,
            g_direct: 7.7e-10,
            ..Params::DEFAULT
        },
        Params {
            l: 1e-9,
            ..Params::DEFAULT
        },
        Params {
            l: 1e-4,
            g_msg: 1e-6,
            ..Params::DEFAULT
        },
        Params {
            g_msg: Params::DEFAULT.g,
            ..Params::DEFAULT
        },
    ];
    let algorithms = [Algorithm::Direct, Algorithm::TwoPhase, Algorithm::Tree];
    for prm in machines {
        let c = Collectives::default().params(prm);
        for op in ops {
            for p in [2, 3, 4, 7, 64, 1000] {
                for n in [0, 1, 2, 5, 100, 1 << 12, 1 << 16, 1 << 22] {
                    let messages = c.predict(op, Algorithm::Messages, p, n, 8);
                    // `predict` falls back to messages for an algorithm `op` lacks.
                    let best =
                        algorithms
                            .iter()
                            .fold((Algorithm::Messages, messages), |best, &a| {
                                match c.predict(op, a, p, n, 8) {
                                    t if t < best.1 => (a, t),
                                    _ => best,
                                }
                            });
                    assert_eq!(c.plan(op, p, n, 8), best, "{op:?} p {p} n {n} {prm:?}");
                }
            }
        }
    }
}

/// The registered algorithms pay two registering supersteps, and their direct gets read what
/// another core has just written: with the parameters `mbsp params` measured on a 2-vCPU Intel
/// Xeon VM (l 0.155 µs, a registering superstep 0.95 µs, g 1.32 ns, direct gets of freshly
/// written data 1.6 ns, g_msg 14.3 ns per word), every broadcast, reduce, all-reduce and scan
/// of up to 16 384 words at p = 2 is planned by messages, which measured fastest there
/// (docs/benchmarks.md, "Registering supersteps"). With a registering superstep priced as
/// two barriers and direct gets of clean data (0.18 ns: the copy of lines already in the
/// reader's cache, which `mbsp params` measured before), the plan broadcast 1 024 words and
/// more by direct gets, which measured 3-5x slower.
#[test]
fn registering_supersteps_and_fresh_gets_keep_small_collectives_on_messages() {
    use mbsp::params::Params;
    use mbsp_algorithms::collectives::Collective;
    let measured = Params {
        l: 1.55e-7,
        l_reg: 9.5e-7,
        g: 1.32e-9,
        g_direct: 1.6e-9,
        g_msg: 1.43e-8,
        ..Params::DEFAULT
    };
    let c = Collectives::default().params(measured);
    for op in [
        Collective::Broadcast,
        Collective::Reduce,
        Collective::AllReduce,
        Collective::ScanInclusive,
    ] {
        for n in [1, 16, 256, 1024, 4096, 16384] {
            assert_eq!(
                c.plan(op, 2, n, 8).0,
                Algorithm::Messages,
                "{op:?} of {n} words"
            );
        }
    }
    let before = Collectives::default().params(Params {
        l_reg: 2.0 * measured.l,
        g_direct: 1.8e-10,
        ..measured
    });
    assert_eq!(
        before.plan(Collective::Broadcast, 2, 1024, 8).0,
        Algorithm::Direct
    );
}

/// With many processes and one word, the trees are chosen (a superstep of messages would be
/// `p²` messages), and they agree with the model at a process count that is not a power of two.
///
/// The choice follows the parameters, so they are given here rather than taken from the machine
/// (`Params::current`: a saved `mbsp params` file, or the defaults): an empty superstep of
/// 0.3 µs, the order of a barrier of two threads. Each message costs `g_msg` beyond its words:
/// without that term the 999 messages of one superstep at p = 1000 would look cheaper than a
/// tree's 20 supersteps with the defaults' `l` of 1 µs.
#[test]
fn many_processes_take_the_trees_automatically() {
    use mbsp::params::Params;
    use mbsp_algorithms::collectives::Collective;
    let defaults = Collectives::default().params(Params::DEFAULT);
    assert_eq!(
        defaults.plan(Collective::AllReduce, 1000, 1, 8).0,
        Algorithm::Tree
    );
    let free_messages = Params {
        g_msg: Params::DEFAULT.g,
        ..Params::DEFAULT
    };
    assert_eq!(
        Collectives::default()
            .params(free_messages)
            .plan(Collective::AllReduce, 1000, 1, 8)
            .0,
        Algorithm::Messages
    );
    let c = Collectives::default().params(Params {
        l: 3e-7,
        ..Params::DEFAULT
    });
    for op in [
        Collective::AllReduce,
        Collective::Broadcast,
        Collective::Reduce,
    ] {
        assert_eq!(
            c.plan(op, 1000, 1, 8).0,
            Algorithm::Tree,
            "{op:?} at p = 1000"
        );
        assert_eq!(
            c.plan(op, 2, 1, 8).0,
            Algorithm::Messages,
            "{op:?} at p = 2"
        );
    }
    within(120, || {
        let p = 37;
        mbsp::run(p, |ctx| {
            let me = ctx.pid() as u64;
            let sum = mbsp_algorithms::collectives::allreduce_value(ctx, me, u64::wrapping_add)?;
            assert_eq!(sum, (p * (p - 1) / 2) as u64);
            program(ctx, 5, 3)
        })
        .unwrap();
    });
}

/// Collectives at two levels: outer processes call them, each starts a nested run whose
/// processes call them (nested runs of different outer processes run at the same time), then
/// the outer level again.
#[test]
fn nested_runs_at_two_levels() {
    within(300, || {
        for (outer, inner) in [(2, 2), (3, 2), (2, 3)] {
            mbsp::run(outer, |ctx| {
                let me = ctx.pid();
                program(ctx, 7, 9)?;
                ctx.run(inner, |nctx| program(nctx, 100 + me as u64, 5 + me))?;
                let mut x = [me as u64];
                mbsp_algorithms::collectives::allreduce(ctx, &mut x, |a, b| a + b)?;
                assert_eq!(x[0], (outer * (outer - 1) / 2) as u64);
                program(ctx, 8, 17)
            })
            .unwrap_or_else(|e| panic!("{outer} x {inner}: {e}"));
        }
    });
}

/// The `Comm` collectives (mailbox registered once) against the same model, with data that fits
/// a slot and data that does not (which goes through `Collectives`).
/// `lazy`: the small collectives end with lazy syncs or full ones (the default).
fn comm_program(ctx: &mut Ctx, seed: u64, n: usize, lazy: bool) -> mbsp::Result<()> {
    use mbsp_algorithms::collectives::Comm;
    let (me, p) = (ctx.pid(), ctx.nprocs());
    let mut comm = Comm::with_capacity(ctx, 4, Collectives::default())?;
    assert!(!comm.is_lazy(), "full syncs are the default");
    comm.set_lazy(lazy);
    for round in 0..3u64 {
        let seed = seed ^ round;
        let root = (mix(seed) % p as u64) as usize;
        let all: Vec<Vec<M>> = (0..p).map(|q| matrices(seed, q, n % 3, 3)).collect();
        let what = |op: &str| format!("Comm {op}: pid {me} of {p}, n {n}, seed {seed}");
        let mut b = if me == root {
            all[root].clone()
        } else {
            vec![[0; 4]; n % 3]
        };
        comm.broadcast(ctx, root, &mut b)?;
        assert_eq!(b, all[root], "{}", what("broadcast"));
        let mut b = all[me].clone();
        comm.reduce(ctx, root, &mut b, mul)?;
        let want = if me == root {
            fold(&all, 0..p, mul).unwrap()
        } else {
            all[me].clone()
        };
        assert_eq!(b, want, "{}", what("reduce"));
        let mut b = all[me].clone();
        comm.allreduce(ctx, &mut b, mul)?;
        assert_eq!(b, fold(&all, 0..p, mul).unwrap(), "{}", what("allreduce"));
        let mut b = all[me].clone();
        comm.scan_inclusive(ctx, &mut b, mul)?;
        assert_eq!(
            b,
            fold(&all, 0..me + 1, mul).unwrap(),
            "{}",
            what("scan_inclusive")
        );
        let mut b = all[me].clone();
        comm.scan_exclusive(ctx, &mut b, IDENTITY, mul)?;
        let want = fold(&all, 0..me, mul).unwrap_or_else(|| vec![IDENTITY; n % 3]);
        assert_eq!(b, want, "{}", what("scan_exclusive"));
        let x = comm.allreduce_value(ctx, (me as u64 + 1) << round, u64::wrapping_add)?;
        assert_eq!(
            x,
            ((p * (p + 1) / 2) as u64) << round,
            "{}",
            what("allreduce_value")
        );
        // One value that does not commute (2x2 matrices of u16, multiplied mod 2^16): every
        // process combines in pid order; `allreduce_value` on even pids meets `allreduce` on a
        // buffer of one element on odd ones (the same call).
        let m2 = |q: usize| -> [u16; 4] {
            let s = mix(seed ^ (q as u64 + 7));
            [
                s as u16,
                (s >> 16) as u16,
                (s >> 32) as u16,
                (s >> 48) as u16,
            ]
        };
        let mul2 = |a: [u16; 4], b: [u16; 4]| {
            let dot =
                |x: u16, y: u16, z: u16, w: u16| x.wrapping_mul(y).wrapping_add(z.wrapping_mul(w));
            [
                dot(a[0], b[0], a[1], b[2]),
                dot(a[0], b[1], a[1], b[3]),
                dot(a[2], b[0], a[3], b[2]),
                dot(a[2], b[1], a[3], b[3]),
            ]
        };
        let got = if me % 2 == 0 {
            comm.allreduce_value(ctx, m2(me), mul2)?
        } else {
            let mut b = [m2(me)];
            comm.allreduce(ctx, &mut b, mul2)?;
            b[0]
        };
        let want = (1..p).fold(m2(0), |acc, q| mul2(acc, m2(q)));
        assert_eq!(got, want, "{}", what("allreduce_value of a 2x2 matrix"));
        // Pieces of different lengths, some beyond a slot when n is large.
        let len = |q: usize| (mix(seed ^ q as u64) % (n as u64 + 1)) as usize;
        let local = |q: usize| -> Vec<u8> { (0..len(q)).map(|i| (q * 31 + i) as u8).collect() };
        let g = comm.allgather(ctx, &local(me), n)?;
        let want: Vec<u8> = (0..p).flat_map(local).collect();
        assert_eq!(g.as_slice(), &want[..], "{}", what("allgather"));
    }
    comm.free(ctx)?;
    ctx.sync()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn comm_matches_the_model(
        pi in 0..PS.len(),
        n in 0usize..80,
        seed in any::<u64>(),
        lazy in any::<bool>(),
    ) {
        let p = PS[pi];
        within(120, move || mbsp::run(p, |ctx| comm_program(ctx, seed, n, lazy)))
            .unwrap_or_else(|e| panic!("p {p} n {n} seed {seed} lazy {lazy}: {e}"));
    }
}

/// Runs of 32 processes or more that take turns on their hardware threads all-reduce small data
/// through a `Comm` in two supersteps (gathered at process 0, then spread back), and broadcast
/// and reduce it with headers to and from the root only, as do runs of 8 or more as coroutines:
/// the same results as the model, with full and lazy syncs, for data that fits a slot (n = 1,
/// 4: one element) and data that does not (n = 2). (Two processes per hardware thread at least,
/// whatever the machine.)
#[test]
fn comm_in_oversubscribed_runs_matches_the_model() {
    let twice = 2 * mbsp::nprocs() + 1;
    within(300, move || {
        for (coroutines, p) in [(false, 33.max(twice)), (true, 8.max(twice))] {
            for (lazy, n) in [(false, 1), (true, 4), (true, 2)] {
                mbsp::Run::new(p)
                    .coroutines(coroutines)
                    .run(|ctx| {
                        assert!(ctx.oversubscribed());
                        assert_eq!(ctx.coroutines(), coroutines);
                        comm_program(ctx, 42 + n as u64, n, lazy)
                    })
                    .unwrap_or_else(|e| panic!("p {p} lazy {lazy} coroutines {coroutines}: {e}"));
            }
        }
    });
}

/// The vectors the collectives return come from the process's pool, and the scratch of large
/// reductions and scans goes back to it: a loop of large collectives that recycles its results
/// takes no fresh memory after its first call (docs/benchmarks.md: fresh memory's page faults
/// cost more than the copies). The scratch is not zeroed: under memcheck (scripts/memcheck)
/// this test also shows that none of it is read before it is written.
#[test]
fn results_come_from_the_pool_and_scratch_goes_back() {
    within(120, || {
        mbsp::run(2, |ctx| {
            let me = ctx.pid();
            let c = Collectives::default();
            // Results of at least 64 KiB (`POOL_FROM`) come from the pool: 10 000 words and more.
            let local = vec![me as u64 + 1; 20_000];
            // One pooled buffer, large enough for every result below: each must be it.
            let v = ctx.buffer::<u64>(40_000)?;
            let at = v.as_ptr();
            ctx.recycle(v);
            let parts = c.allgather(ctx, &local)?;
            assert_eq!(parts.as_slice().as_ptr(), at, "allgather");
            assert!(parts.part(1) == [2; 20_000]);
            ctx.recycle(parts.into_vec());
            if let Some(parts) = c.gather(ctx, 1, &local)? {
                assert_eq!(parts.as_slice().as_ptr(), at, "gather");
                assert!(parts.part(0) == [1; 20_000]);
                ctx.recycle(parts.into_vec());
            }
            let mine = c.scatter(ctx, 0, if me == 0 { &local } else { &[] })?;
            assert_eq!(mine.as_ptr(), at, "scatter at pid {me}");
            assert!(mine == [1; 10_000]);
            ctx.recycle(mine);
            let mine = c.alltoall(ctx, &local)?;
            assert_eq!(mine.as_ptr(), at, "alltoall");
            ctx.recycle(mine);
            // Scratch: with the pool emptied, what it holds after a collective is what the
            // collective gave back (a fresh buffer for one element has room for one).
            let n = 20_000; // scratch of n / 2 words: 80 KiB, from the pool
            let held = ctx.buffer::<u64>(1)?;
            assert!(held.capacity() >= 40_000);
            let cases = [
                // Scans: the prefixes of a process's block for the other process; a reduce:
                // the combined block, at the process that is not the root.
                (Algorithm::TwoPhase, "scan", n / 2, true),
                (Algorithm::TwoPhase, "exclusive scan", n / 2, true),
                (Algorithm::TwoPhase, "reduce", n / 2, me == 1),
                // By messages, no scratch: pid 1 folds pid 0's contribution and its own
                // chunk by chunk into its buffer.
                (Algorithm::Messages, "allreduce", 0, false),
            ];
            for (algo, what, scratch, here) in cases {
                let c = Collectives::default().algorithm(algo);
                let mut b: Vec<u64> = (0..n as u64).map(|i| i * 3 + me as u64).collect();
                match what {
                    "scan" => c.scan_inclusive(ctx, &mut b, u64::wrapping_add)?,
                    "exclusive scan" => c.scan_exclusive(ctx, &mut b, 0, u64::wrapping_add)?,
                    "reduce" => c.reduce(ctx, 0, &mut b, u64::wrapping_add)?,
                    _ => c.allreduce(ctx, &mut b, u64::wrapping_add)?,
                }
                if what != "reduce" || me == 0 {
                    let want = |i: u64| match (what, me) {
                        ("scan", 0) => i * 3,
                        ("exclusive scan", 0) => 0,
                        ("exclusive scan", _) => i * 3,
                        _ => i * 6 + 1,
                    };
                    assert!((0..n as u64).all(|i| b[i as usize] == want(i)), "{what}");
                }
                let pooled = ctx.buffer::<u64>(1)?;
                if here {
                    assert!(
                        pooled.capacity() >= scratch,
                        "{what} by {algo:?} at pid {me}: the pool holds {} elements, not its \
                         scratch of {scratch}",
                        pooled.capacity()
                    );
                } else if scratch == 0 {
                    assert!(
                        pooled.capacity() < n,
                        "{what} by {algo:?} at pid {me}: gave the pool {} elements",
                        pooled.capacity()
                    );
                }
            }
            drop(held);
            Ok(())
        })
        .unwrap();
    });
}
