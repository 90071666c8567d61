//! Sample sort against the standard library's sort: `u64`, `i32` and `f64` (with -0.0, NaNs
//! and infinities, compared bit for bit with `sort_by(total_cmp)`), random, sorted, reversed,
//! all-equal and few-distinct inputs, p in {1, 2, 3, 4, 7, 8}, sizes from 0 to ~10^5; uneven
//! and empty local parts; balance with duplicates; nested runs; the caller's tag size and queue
//! afterwards; malformed messages.

use crate::common;

use common::{mix, within};
use mbsp::bytemuck;
use mbsp_algorithms::sort::{SortKey, par_sort, sample_sort};
use std::cmp::Ordering;
use std::fmt::Debug;

const PROCS: [usize; 6] = [1, 2, 3, 4, 7, 8];

/// Test items: made from words; small words give the few distinct values.
trait Item: SortKey + Debug + 'static {
    fn from_word(x: u64) -> Self;
}

impl Item for u64 {
    fn from_word(x: u64) -> Self {
        x
    }
}

impl Item for i32 {
    fn from_word(x: u64) -> Self {
        x as i32
    }
}

/// Only to reuse `sorted` and `assert_same` for the other primitive types.
macro_rules! plain_items {
    ($($t:ty),*) => {$(
        impl Item for $t {
            fn from_word(x: u64) -> Self {
                x as $t
            }
        }
    )*};
}
plain_items!(u128, u8, f32, isize);

/// Special values first (so few-distinct inputs are made of them), then ordinary numbers.
const SPECIAL: [f64; 12] = [
    -0.0,
    0.0,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::MIN_POSITIVE,
    -f64::MIN_POSITIVE,
    5e-324, // the smallest subnormal
    f64::MAX,
    f64::MIN,
    1.0,
    -1.0,
];

impl Item for f64 {
    fn from_word(x: u64) -> Self {
        match x {
            0..12 => SPECIAL[x as usize],
            // A NaN with the sign bit set sorts first under total_cmp.
            12 => -f64::NAN,
            _ if x.is_multiple_of(17) => SPECIAL[(x % 12) as usize],
            _ => (x >> 11) as i64 as f64 / 1e6 - 4e9,
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Shape {
    Random,
    Sorted,
    Reversed,
    AllEqual,
    FewDistinct,
}

const SHAPES: [Shape; 5] = [
    Shape::Random,
    Shape::Sorted,
    Shape::Reversed,
    Shape::AllEqual,
    Shape::FewDistinct,
];

fn input<T: Item>(shape: Shape, n: usize, seed: u64) -> Vec<T> {
    let word = |i: usize| mix(seed ^ (i as u64) << 8);
    let mut v: Vec<T> = match shape {
        Shape::AllEqual => vec![T::from_word(13); n],
        Shape::FewDistinct => (0..n).map(|i| T::from_word(word(i) % 3)).collect(),
        _ => (0..n).map(|i| T::from_word(word(i))).collect(),
    };
    match shape {
        Shape::Sorted => v.sort_by(T::key_cmp),
        Shape::Reversed => {
            v.sort_by(T::key_cmp);
            v.reverse();
        }
        _ => {}
    }
    v
}

/// The standard library's result.
fn sorted<T: Item>(v: &[T]) -> Vec<T> {
    let mut want = v.to_vec();
    want.sort_by(T::key_cmp);
    want
}

/// Equal bit for bit (so -0.0 differs from 0.0, and NaNs are compared by their bits).
fn assert_same<T: Item>(got: &[T], want: &[T], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let (g, w): (&[u8], &[u8]) = (bytemuck::cast_slice(got), bytemuck::cast_slice(want));
    if g != w {
        let i = got
            .iter()
            .zip(want)
            .position(|(a, b)| bytemuck::bytes_of(a) != bytemuck::bytes_of(b))
            .expect("some item differs");
        panic!("{what}: item {i} is {:?}, expected {:?}", got[i], want[i]);
    }
}

fn sizes(p: usize) -> Vec<usize> {
    vec![0, 1, p.saturating_sub(1), p + 1, 1000, 30_011]
}

fn check_par_sort<T: Item>(name: &str) {
    for p in PROCS {
        for shape in SHAPES {
            for n in sizes(p) {
                let data: Vec<T> = input(shape, n, 0x5eed + n as u64);
                let mut got = data.clone();
                par_sort(&mut got, p).expect("par_sort");
                assert_same(
                    &got,
                    &sorted(&data),
                    &format!("{name} {shape:?} n {n} p {p}"),
                );
            }
        }
    }
}

#[test]
fn par_sort_matches_the_standard_sort_u64() {
    within(120, || check_par_sort::<u64>("u64"));
}

#[test]
fn par_sort_matches_the_standard_sort_i32() {
    within(120, || check_par_sort::<i32>("i32"));
}

#[test]
fn par_sort_matches_the_standard_sort_f64_bit_for_bit() {
    within(120, || {
        check_par_sort::<f64>("f64");
        // Every special value many times over, -0.0 before +0.0, NaNs by sign.
        let data: Vec<f64> = (0..5000).map(|i| f64::from_word(i % 13)).collect();
        for p in PROCS {
            let mut got = data.clone();
            par_sort(&mut got, p).expect("par_sort");
            let mut want = data.clone();
            want.sort_by(f64::total_cmp);
            assert_same(&got, &want, &format!("specials p {p}"));
            assert!(got[0].is_nan() && got[0].is_sign_negative());
            assert!(got.last().unwrap().is_nan() && got.last().unwrap().is_sign_positive());
        }
    });
}

#[test]
fn larger_inputs_for_every_p() {
    within(120, || {
        for p in PROCS {
            let data: Vec<u64> = input(Shape::Random, 100_003, p as u64);
            let mut got = data.clone();
            par_sort(&mut got, p).expect("par_sort");
            assert_same(&got, &sorted(&data), &format!("u64 random 100003 p {p}"));
        }
    });
}

#[test]
fn other_primitive_types() {
    within(120, || {
        // u128 needs 16-byte alignment, more than message payloads promise: copied out.
        let wide: Vec<u128> = (0..5000)
            .map(|i| (mix(i) as u128) << 64 | mix(i + 1) as u128)
            .collect();
        let bytes: Vec<u8> = (0..5000).map(|i| mix(i) as u8).collect();
        let floats: Vec<f32> = (0..5000)
            .map(|i| match i % 7 {
                0 => -0.0,
                1 => f32::NAN,
                _ => (mix(i) % 1000) as f32 - 500.0,
            })
            .collect();
        let signed: Vec<isize> = (0..5000).map(|i| mix(i) as isize).collect();
        for p in [2, 3, 5] {
            let mut w = wide.clone();
            par_sort(&mut w, p).expect("u128");
            assert_eq!(w, sorted(&wide), "u128 p {p}");
            let mut b = bytes.clone();
            par_sort(&mut b, p).expect("u8");
            assert_eq!(b, sorted(&bytes), "u8 p {p}");
            let mut f = floats.clone();
            par_sort(&mut f, p).expect("f32");
            assert_same(&f, &sorted(&floats), &format!("f32 p {p}"));
            let mut i = signed.clone();
            par_sort(&mut i, p).expect("isize");
            assert_eq!(i, sorted(&signed), "isize p {p}");
        }
    });
}

/// Runs `sample_sort` on `p` processes, process `q` holding `parts[q]`; returns the parts.
fn sample_sort_parts<T: Item>(p: usize, parts: &[Vec<T>]) -> Vec<Vec<T>> {
    mbsp::run(p, |ctx| sample_sort(ctx, parts[ctx.pid()].clone())).expect("sample_sort run")
}

#[test]
fn sample_sort_with_uneven_and_empty_local_parts() {
    within(120, || {
        for p in PROCS {
            for shape in SHAPES {
                let n = 20_000;
                let data: Vec<i32> = input(shape, n, 99);
                // Layouts: everything on the last process; sizes growing quadratically with
                // the pid (the first ones empty or tiny); one item each where there is one.
                let last: Vec<usize> = (0..p).map(|q| if q + 1 == p { n } else { 0 }).collect();
                let weights: Vec<usize> = (0..p).map(|q| q * q).collect();
                let total: usize = weights.iter().sum::<usize>().max(1);
                let mut quad: Vec<usize> = weights.iter().map(|w| w * n / total).collect();
                quad[p - 1] += n - quad.iter().sum::<usize>();
                let tiny: Vec<usize> = (0..p).map(|q| usize::from(q < 3)).collect();
                for layout in [last, quad, tiny] {
                    let mut at = 0;
                    let parts: Vec<Vec<i32>> = layout
                        .iter()
                        .map(|&len| {
                            at += len;
                            data[at - len..at].to_vec()
                        })
                        .collect();
                    let all: Vec<i32> = parts.concat();
                    let got = sample_sort_parts(p, &parts);
                    let what = format!("{shape:?} p {p} layout {layout:?}");
                    assert_same(&got.concat(), &sorted(&all), &what);
                    // Balanced even when the input is not.
                    let m = all.len();
                    if m >= 1000 {
                        let biggest = got.iter().map(Vec::len).max().unwrap();
                        assert!(biggest <= m / p + m / 20, "{what}: a part of {biggest}");
                    }
                }
            }
        }
    });
}

#[test]
fn duplicates_are_split_evenly() {
    within(120, || {
        let n = 100_000;
        for p in [2, 3, 4, 7] {
            for shape in [Shape::AllEqual, Shape::FewDistinct] {
                let data: Vec<u64> = input(shape, n, 5);
                let parts: Vec<Vec<u64>> = (0..p)
                    .map(|q| data[mbsp_algorithms::dist::block_range(n, p, q)].to_vec())
                    .collect();
                let got = sample_sort_parts(p, &parts);
                assert_same(&got.concat(), &sorted(&data), &format!("{shape:?} p {p}"));
                for (q, part) in got.iter().enumerate() {
                    let dev = part.len().abs_diff(n / p);
                    assert!(
                        dev <= n / 100,
                        "{shape:?} p {p}: pid {q} ended with {}",
                        part.len()
                    );
                }
            }
        }
    });
}

#[test]
fn random_input_parts_are_balanced() {
    within(120, || {
        let n = 200_000;
        let data: Vec<u64> = input(Shape::Random, n, 11);
        for p in [2, 3, 4] {
            let parts: Vec<Vec<u64>> = (0..p)
                .map(|q| data[mbsp_algorithms::dist::block_range(n, p, q)].to_vec())
                .collect();
            let got = sample_sort_parts(p, &parts);
            for part in &got {
                assert!(
                    part.len().abs_diff(n / p) <= n / 200,
                    "p {p}: {}",
                    part.len()
                );
            }
        }
    });
}

#[test]
fn sample_sort_in_a_nested_run() {
    within(120, || {
        let n = 10_000;
        let data: Vec<f64> = input(Shape::Random, n, 3);
        let got = mbsp::run(2, |ctx| {
            let outer = ctx.pid();
            let data = &data;
            let inner = ctx.run(2, |inner| {
                // Each outer process sorts its half, spread over its 2 nested processes.
                let half = mbsp_algorithms::dist::block_range(n, 2, outer);
                let mine = mbsp_algorithms::dist::block_range(half.len(), 2, inner.pid());
                let local = data[half.start + mine.start..half.start + mine.end].to_vec();
                sample_sort(inner, local)
            })?;
            ctx.sync()?;
            Ok(inner.concat())
        })
        .expect("nested run");
        for (outer, got) in got.iter().enumerate() {
            let half = &data[mbsp_algorithms::dist::block_range(n, 2, outer)];
            assert_same(got, &sorted(half), &format!("outer pid {outer}"));
        }
    });
}

#[test]
fn the_callers_tag_size_and_queue_are_as_before() {
    within(120, || {
        for p in [1, 2, 3] {
            mbsp::run(p, |ctx| {
                assert_eq!(ctx.set_tagsize(12)?, 0);
                ctx.sync()?;
                let local: Vec<u64> = (0..1000)
                    .map(|i| mix(i + ctx.pid() as u64 * 1000))
                    .collect();
                let part = sample_sort(ctx, local)?;
                assert!(part.windows(2).all(|w| w[0] <= w[1]));
                assert_eq!(ctx.tagsize(), 12, "tag size restored");
                assert_eq!(ctx.qsize()?.messages, 0, "queue empty");
                // The caller's messages work as before, with its tag size.
                let next = (ctx.pid() + 1) % ctx.nprocs();
                ctx.send(next, &[7u8; 12], b"after")?;
                ctx.sync()?;
                let m = ctx.hpmove()?.expect("the caller's message");
                assert_eq!((m.tag, m.payload), (&[7u8; 12][..], &b"after"[..]));
                assert_eq!(ctx.qsize()?.messages, 0);
                Ok(())
            })
            .expect("run");
        }
    });
}

#[test]
fn a_message_sent_before_the_call_is_reported_not_misread() {
    within(120, || {
        let err = mbsp::run(3, |ctx| {
            // Sent in the superstep of the call: arrives among the sort's samples.
            ctx.send((ctx.pid() + 1) % 3, &[], b"stray")?;
            sample_sort(ctx, vec![1u64, 2, 3])
        })
        .expect_err("a stray message must fail the sort");
        assert_eq!(err.kind(), mbsp::ErrorKind::Misuse, "{err}");
        assert_eq!(err.op(), "sample_sort", "{err}");
        assert!(err.message().contains("not a sample message"), "{err}");
        assert!(err.message().contains("5 bytes"), "{err}");
    });
}

#[test]
fn par_sort_on_no_processes_is_an_error() {
    within(120, || {
        let err = par_sort(&mut [3u32, 1, 2], 0).expect_err("p = 0");
        assert!(err.to_string().contains("p = 0"), "{err}");
    });
}

/// A user type ordered by one field: equal keys may end in any order.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Rec {
    key: u32,
    id: u32,
}

impl SortKey for Rec {
    fn key_cmp(&self, other: &Self) -> Ordering {
        self.key.cmp(&other.key)
    }
}

#[test]
fn user_types_sort_by_their_key() {
    within(120, || {
        let data: Vec<Rec> = (0..20_000u32)
            .map(|id| Rec {
                key: (mix(id as u64) % 500) as u32,
                id,
            })
            .collect();
        for p in [2, 3, 5] {
            let mut got = data.clone();
            par_sort(&mut got, p).expect("par_sort");
            assert!(got.windows(2).all(|w| w[0].key <= w[1].key), "p {p}");
            // A permutation of the input.
            let mut ids: Vec<u32> = got.iter().map(|r| r.id).collect();
            ids.sort_unstable();
            assert!(
                ids.iter().enumerate().all(|(i, &id)| i as u32 == id),
                "p {p}"
            );
            assert!(got.iter().all(|r| data[r.id as usize] == *r));
        }
    });
}
