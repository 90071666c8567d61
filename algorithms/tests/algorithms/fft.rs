//! The BSP FFT against a multiprecision reference, against sequential rustfft for every valid p,
//! and on the classic identities; bad input gets an error, never a panic or a hang.

use crate::common;

use common::{mix, within};
use mbsp::ErrorKind;
use mbsp_algorithms::fft::{BspFft, Complex, Direction, fft, ifft};
use std::path::PathBuf;

type C = Complex<f64>;

fn data_file() -> PathBuf {
    common::shared("fft").join("dft_reference_mpmath.json")
}

fn random(n: usize, seed: u64) -> Vec<C> {
    (0..n as u64)
        .map(|i| {
            let (a, b) = (mix(seed ^ (2 * i)), mix(seed ^ (2 * i + 1)));
            C::new(
                a as f64 / u64::MAX as f64 - 0.5,
                b as f64 / u64::MAX as f64 - 0.5,
            )
        })
        .collect()
}

/// ‖a - b‖₂ / ‖b‖₂ (or ‖a‖₂ when b is 0).
fn rel_error(a: &[C], b: &[C]) -> f64 {
    let d: f64 = a.iter().zip(b).map(|(x, y)| (x - y).norm_sqr()).sum();
    let r: f64 = b.iter().map(|y| y.norm_sqr()).sum();
    if r == 0.0 { d.sqrt() } else { (d / r).sqrt() }
}

fn sequential(x: &[C], dir: Direction) -> Vec<C> {
    let mut y = x.to_vec();
    // rustfft's plan through the library's one instance of its planner (a planner used here
    // directly would be compiled again into this test binary).
    match dir {
        Direction::Forward => {
            mbsp_algorithms::fft::sequential_plan::<f64>(x.len(), false).process(&mut y)
        }
        Direction::Inverse => {
            mbsp_algorithms::fft::sequential_plan::<f64>(x.len(), true).process(&mut y);
            let s = 1.0 / x.len() as f64;
            y.iter_mut().for_each(|v| *v *= s);
        }
    }
    y
}

#[test]
fn matches_the_multiprecision_reference() {
    let text = std::fs::read_to_string(data_file()).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut checked = 0;
    for case in doc["cases"].as_array().unwrap() {
        let n = case["N"].as_u64().unwrap() as usize;
        let num = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) => s.parse::<f64>().unwrap(),
            v => v.as_f64().unwrap(),
        };
        let pair = |v: &serde_json::Value| C::new(num(&v[0]), num(&v[1]));
        let x: Vec<C> = case["x"].as_array().unwrap().iter().map(pair).collect();
        let want: Vec<C> = case["X"].as_array().unwrap().iter().map(pair).collect();
        if !n.is_power_of_two() {
            // Not a power of two: a clear error at every p.
            let e = fft(&mut x.clone(), 1).unwrap_err();
            assert!(e.to_string().contains("not a power of two"), "{e}");
            continue;
        }
        for p in [1, 2, 4, 8].into_iter().filter(|&p| p <= n) {
            let mut y = x.clone();
            within(60, move || fft(&mut y, p).map(|_| y))
                .map(|y| {
                    let err = rel_error(&y, &want);
                    assert!(err <= 1e-12, "n {n} p {p}: relative error {err:e}");
                })
                .unwrap();
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} reference cases checked");
}

#[test]
fn matches_sequential_rustfft_for_every_valid_p() {
    within(300, || {
        for m in 0..=14 {
            let n = 1usize << m;
            let x = random(n, m as u64);
            let want = sequential(&x, Direction::Forward);
            for p in [1, 2, 4, 8].into_iter().filter(|&p| p <= n) {
                let mut y = x.clone();
                fft(&mut y, p).unwrap();
                let err = rel_error(&y, &want);
                assert!(err <= 1e-13, "n {n} p {p}: relative error {err:e}");
            }
        }
        // Large: 2^20 at p = 2 and 8, 2^18 at p = 4.
        for (m, p) in [(20, 2), (18, 4), (20, 8)] {
            let n = 1usize << m;
            let x = random(n, 99);
            let want = sequential(&x, Direction::Forward);
            let mut y = x.clone();
            fft(&mut y, p).unwrap();
            let err = rel_error(&y, &want);
            assert!(err <= 1e-12, "n {n} p {p}: relative error {err:e}");
        }
    });
}

/// The number of group-cyclic redistributions for n over p: while the group is larger than the
/// local length m = n/p, it shrinks by a factor m (DESIGN.md §7; BSPlib paper §5.2).
fn redistributions(n: usize, p: usize) -> usize {
    let (m, mut g, mut r) = (n / p, p, 0);
    while m >= 2 && g > m {
        g /= m;
        r += 1;
    }
    r
}

/// p > √n: group-cyclic stages, each a superstep whose h is the local length (2 words per
/// complex entry) — never the all-to-all of every pack — with the output still cyclic.
#[test]
fn group_cyclic_when_p_exceeds_sqrt_n() {
    within(300, || {
        for p in [4usize, 8, 16, 32, 64] {
            for n in (p.trailing_zeros()..=2 * p.trailing_zeros() + 1).map(|k| 1usize << k) {
                let x = random(n, (n * 31 + p) as u64);
                let fwd = sequential(&x, Direction::Forward);
                let (m, steps) = (n / p, redistributions(n, p));
                let (outs, profile) = mbsp::Run::new(p)
                    .profile(true)
                    .run_profiled(|ctx| {
                        let me = ctx.pid();
                        let mut plan = BspFft::<f64>::new(ctx, n)?;
                        let mut local: Vec<C> = (me..n).step_by(p).map(|i| x[i]).collect();
                        plan.forward(ctx, &mut local)?;
                        let y = local.clone();
                        plan.inverse(ctx, &mut local)?;
                        plan.free(ctx)?;
                        Ok((y, local))
                    })
                    .unwrap();
                let (mut y, mut back) = (vec![C::new(0.0, 0.0); n], vec![C::new(0.0, 0.0); n]);
                for (me, (a, b)) in outs.into_iter().enumerate() {
                    for (i, (u, v)) in a.into_iter().zip(b).enumerate() {
                        y[me + p * i] = u;
                        back[me + p * i] = v;
                    }
                }
                let err = rel_error(&y, &fwd);
                assert!(err <= 1e-13, "n {n} p {p}: relative error {err:e}");
                let err = rel_error(&back, &x);
                assert!(err <= 1e-13, "n {n} p {p}: round trip error {err:e}");
                // The plan's superstep, then (1 + redistributions) per transform, then the end.
                let s = &profile.supersteps;
                assert_eq!(s.len(), 2 + 2 * (1 + steps), "n {n} p {p}: supersteps");
                if m >= 2 {
                    for (i, step) in s[1..s.len() - 1].iter().enumerate() {
                        assert!(
                            step.h() <= 2 * m as u64,
                            "n {n} p {p}: superstep {} has h = {} > 2 n/p",
                            i + 1,
                            step.h()
                        );
                    }
                }
            }
        }
    });
}

#[test]
fn round_trip_and_identities() {
    within(120, || {
        let n = 1 << 12;
        for p in [1, 2, 4, 8] {
            // Round trip.
            let x = random(n, 7 + p as u64);
            let mut y = x.clone();
            fft(&mut y, p).unwrap();
            // Parseval: Σ|x|² = Σ|y|² / n.
            let ex: f64 = x.iter().map(|v| v.norm_sqr()).sum();
            let ey: f64 = y.iter().map(|v| v.norm_sqr()).sum::<f64>() / n as f64;
            assert!(
                (ex - ey).abs() <= 1e-12 * ex,
                "Parseval at p {p}: {ex} vs {ey}"
            );
            ifft(&mut y, p).unwrap();
            assert!(rel_error(&y, &x) <= 1e-13, "round trip at p {p}");
            // Impulse at 0 -> constant 1; constant -> impulse n at 0.
            let mut imp = vec![C::new(0.0, 0.0); n];
            imp[0] = C::new(1.0, 0.0);
            fft(&mut imp, p).unwrap();
            assert!(imp.iter().all(|v| (v - C::new(1.0, 0.0)).norm() < 1e-14));
            let mut con = vec![C::new(1.0, 0.0); n];
            fft(&mut con, p).unwrap();
            assert!((con[0] - C::new(n as f64, 0.0)).norm() < 1e-9);
            assert!(con[1..].iter().all(|v| v.norm() < 1e-9));
            // A single tone e^{2πi f j/n} -> n at bin f.
            let f = 37;
            let mut tone: Vec<C> = (0..n)
                .map(|j| C::from_polar(1.0, 2.0 * std::f64::consts::PI * (f * j) as f64 / n as f64))
                .collect();
            fft(&mut tone, p).unwrap();
            for (k, v) in tone.iter().enumerate() {
                let want = if k == f { n as f64 } else { 0.0 };
                assert!(
                    (v - C::new(want, 0.0)).norm() < 1e-8,
                    "tone bin {k} at p {p}: {v}"
                );
            }
        }
    });
}

#[test]
fn single_precision() {
    within(60, || {
        let n = 1 << 10;
        let x64 = random(n, 3);
        let want = sequential(&x64, Direction::Forward);
        let mut x: Vec<Complex<f32>> = x64
            .iter()
            .map(|v| Complex::new(v.re as f32, v.im as f32))
            .collect();
        fft(&mut x, 4).unwrap();
        let y: Vec<C> = x.iter().map(|v| C::new(v.re as f64, v.im as f64)).collect();
        assert!(rel_error(&y, &want) <= 1e-5);
    });
}

/// The split local FFT's special cases (`fft::kernel_len`): p = 2 splits its local array in
/// two rows below n = 2^17, in four from there, in eight at 2^18, 2^20 and 2^21 (whose final
/// pass keeps half of two of its own blocks aside), and in 64 rows in two levels from 2^22
/// (its own pack in a buffer of its own); p = 4 uses the radix-4 pass. Forward and
/// inverse against sequential rustfft on both sides of the threshold, in f64 and f32, and
/// repeated transforms on one plan (both pack parities).
#[test]
fn split_local_fft_on_both_sides_of_its_thresholds() {
    within(120, || {
        for (m, p) in [
            (16, 2),
            (17, 2),
            (18, 2),
            (19, 2),
            (20, 2),
            (21, 2),
            (22, 2),
            (12, 4),
            (16, 4),
        ] {
            let n = 1usize << m;
            let x = random(n, 1000 + m as u64);
            for dir in [Direction::Forward, Direction::Inverse] {
                let want = sequential(&x, dir);
                let got = mbsp::run(p, |ctx| {
                    let (p, me) = (ctx.nprocs(), ctx.pid());
                    let mut plan = BspFft::<f64>::new(ctx, n)?;
                    let mine: Vec<C> = (me..n).step_by(p).map(|i| x[i]).collect();
                    let mut local = mine.clone();
                    for _ in 0..3 {
                        local.copy_from_slice(&mine);
                        plan.transform(ctx, &mut local, dir)?;
                    }
                    plan.free(ctx)?;
                    Ok(local)
                })
                .unwrap();
                let mut y = vec![C::new(0.0, 0.0); n];
                for (me, local) in got.iter().enumerate() {
                    for (i, v) in local.iter().enumerate() {
                        y[me + p * i] = *v;
                    }
                }
                let err = rel_error(&y, &want);
                assert!(
                    err <= 1e-13,
                    "n 2^{m} p {p} {dir:?}: relative error {err:e}"
                );
            }
            let mut x32: Vec<Complex<f32>> = x
                .iter()
                .map(|v| Complex::new(v.re as f32, v.im as f32))
                .collect();
            fft(&mut x32, p).unwrap();
            let y: Vec<C> = x32
                .iter()
                .map(|v| C::new(v.re as f64, v.im as f64))
                .collect();
            let err = rel_error(&y, &sequential(&x, Direction::Forward));
            assert!(err <= 1e-5, "f32 n 2^{m} p {p}: relative error {err:e}");
        }
    });
}

/// A thousand transforms in one run: one plan, no growth.
#[test]
fn many_transforms_in_one_run() {
    within(120, || {
        let n = 1 << 10;
        let x = random(n, 5);
        let want = sequential(&x, Direction::Forward);
        mbsp::run(4, |ctx| {
            let (p, me) = (ctx.nprocs(), ctx.pid());
            let mut plan = BspFft::<f64>::new(ctx, n)?;
            let mine: Vec<C> = (me..n).step_by(p).map(|i| x[i]).collect();
            let mut local = mine.clone();
            for i in 0..1000 {
                plan.forward(ctx, &mut local)?;
                for (j, v) in local.iter().enumerate() {
                    assert!((v - want[me + p * j]).norm() < 1e-9, "transform {i}");
                }
                plan.inverse(ctx, &mut local)?;
            }
            assert!(local.iter().zip(&mine).all(|(a, b)| (a - b).norm() < 1e-9));
            plan.free(ctx)?;
            ctx.sync()
        })
        .unwrap();
    });
}

#[test]
fn inside_nested_runs() {
    within(60, || {
        let n = 256;
        let x = random(n, 11);
        let want = sequential(&x, Direction::Forward);
        mbsp::run(2, |ctx| {
            ctx.run(2, |inner| {
                let mut y = x.clone();
                let (p, me) = (inner.nprocs(), inner.pid());
                let mut plan = BspFft::<f64>::new(inner, n)?;
                let mut local: Vec<C> = (me..n).step_by(p).map(|i| y[i]).collect();
                plan.forward(inner, &mut local)?;
                for (j, v) in local.iter().enumerate() {
                    y[me + p * j] = *v;
                    assert!((v - want[me + p * j]).norm() < 1e-10);
                }
                plan.free(inner)
            })?;
            Ok(())
        })
        .unwrap();
    });
}

#[test]
fn bad_input_gets_a_clear_error() {
    let expect = |r: mbsp::Result<()>, needle: &str| {
        let e = r.expect_err("must fail");
        assert_eq!(e.kind(), ErrorKind::Misuse, "{e}");
        assert!(
            e.to_string().contains(needle),
            "{e} should mention {needle:?}"
        );
    };
    within(60, move || {
        expect(
            fft(&mut [C::new(1.0, 0.0); 12], 2),
            "n = 12 is not a power of two",
        );
        expect(
            fft(&mut [C::new(1.0, 0.0); 16], 3),
            "p = 3 processes is not a power of two",
        );
        expect(
            fft(&mut [C::new(1.0, 0.0); 4], 8),
            "p = 8 processes exceeds n = 4",
        );
        expect(fft(&mut Vec::<C>::new(), 1), "n = 0 is not a power of two");
        expect(
            mbsp::run(2, |ctx| {
                let mut plan = BspFft::<f64>::new(ctx, 64)?;
                plan.forward(ctx, &mut vec![C::new(0.0, 0.0); 31])
            })
            .map(drop),
            "has 31 entries",
        );
        expect(
            mbsp::run(2, |ctx| BspFft::<f64>::new(ctx, 64 << ctx.pid()).map(drop)).map(drop),
            "processes plan different transforms",
        );
    });
}

#[test]
fn nan_and_infinity_propagate() {
    let mut x = random(64, 1);
    x[5] = C::new(f64::NAN, 0.0);
    fft(&mut x, 4).unwrap();
    assert!(x.iter().all(|v| v.re.is_nan()));
    let mut x = vec![C::new(0.0, 0.0); 64];
    x[0] = C::new(f64::INFINITY, 0.0);
    fft(&mut x, 2).unwrap();
    // Every output depends on x[0]: each is infinite or NaN (inf · 0 in a twiddle), as in any
    // FFT; nothing panics or hangs.
    assert!(x.iter().all(|v| !v.re.is_finite() || !v.im.is_finite()));
}

// ----------------------------------------------------------------------------- Multi-BSP

use mbsp_algorithms::fft::{MultiFft, fft_multi, hierarchy};

#[test]
fn multi_bsp_matches_rustfft() {
    within(300, || {
        // [8, 2] and [16, 2] at n = 2^6: a top level above √n (group-cyclic stages whose local
        // transforms are nested runs, scaled at every stage when inverse).
        for levels in [
            &[2usize][..],
            &[2, 2],
            &[4, 2],
            &[2, 4],
            &[2, 2, 2],
            &[8, 2],
            &[16, 2],
            &[1, 2],
            &[1, 4],
            &[1, 2, 2],
        ] {
            for m in [3usize, 6, 10, 14]
                .into_iter()
                .filter(|&m| 1 << m >= levels[0])
            {
                let n = 1 << m;
                let x = random(n, m as u64 ^ 77);
                let want = sequential(&x, Direction::Forward);
                let mut y = x.clone();
                fft_multi(&mut y, levels, Direction::Forward).unwrap();
                let err = rel_error(&y, &want);
                assert!(
                    err <= 1e-13,
                    "levels {levels:?} n {n}: relative error {err:e}"
                );
                fft_multi(&mut y, levels, Direction::Inverse).unwrap();
                assert!(
                    rel_error(&y, &x) <= 1e-13,
                    "levels {levels:?} n {n}: round trip"
                );
            }
        }
    });
}

/// A top level of one process: the nested run transforms the process's array in place
/// (natural order, no cyclic parts), with the same results as the flat BSP FFT over the same
/// number of processes and as rustfft, forward and inverse, f64 and f32, over many transforms
/// of one plan (its nested buffers are kept between them).
#[test]
fn top_level_of_one_process_matches_flat() {
    within(300, || {
        for c in [2usize, 4, 8] {
            // From 2^17 two processes split in eight rows instead of four (the flat
            // transform's split).
            for m in [3u32, 4, 5, 7, 10, 13, 16, 17, 19] {
                let n = 1usize << m;
                if n < c {
                    continue;
                }
                let x = random(n, u64::from(m) ^ 41);
                let want = sequential(&x, Direction::Forward);
                // The flat BSP FFT over c processes, gathered from the cyclic distribution.
                let parts = mbsp::run(c, |ctx| {
                    let me = ctx.pid();
                    let mut plan = BspFft::<f64>::new(ctx, n)?;
                    let mut local: Vec<C> = (me..n).step_by(c).map(|i| x[i]).collect();
                    plan.forward(ctx, &mut local)?;
                    plan.free(ctx)?;
                    Ok(local)
                })
                .unwrap();
                let mut flat = vec![C::default(); n];
                for (me, part) in parts.iter().enumerate() {
                    for (i, v) in part.iter().enumerate() {
                        flat[me + c * i] = *v;
                    }
                }
                let nested = mbsp::run(1, |ctx| {
                    let mut plan = MultiFft::<f64>::nested(ctx, n, &[c])?;
                    assert_eq!(plan.procs(ctx), c);
                    let mut y = x.clone();
                    let mut out = Vec::new();
                    for _ in 0..3 {
                        y.copy_from_slice(&x);
                        plan.forward(ctx, &mut y)?;
                        out = y.clone();
                        plan.inverse(ctx, &mut y)?;
                        let back = rel_error(&y, &x);
                        assert!(back <= 1e-13, "c {c} n {n}: round trip {back:e}");
                    }
                    plan.free(ctx)?;
                    Ok(out)
                })
                .unwrap()
                .pop()
                .unwrap();
                let (e_flat, e_seq) = (rel_error(&nested, &flat), rel_error(&nested, &want));
                assert!(e_flat <= 1e-13, "c {c} n {n}: against flat {e_flat:e}");
                assert!(e_seq <= 1e-13, "c {c} n {n}: against rustfft {e_seq:e}");
            }
        }
        // Single precision, forward and back: four rows (R = 1 at n = 4), and eight.
        for n in [4usize, 1 << 12, 1 << 19] {
            let x: Vec<Complex<f32>> = random(n, 7)
                .iter()
                .map(|v| Complex::new(v.re as f32, v.im as f32))
                .collect();
            let mut want = x.clone();
            fft(&mut want, 1).unwrap();
            let mut y = x.clone();
            fft_multi(&mut y, &[1, 2], Direction::Forward).unwrap();
            let err = |a: &[Complex<f32>], b: &[Complex<f32>]| {
                let d: f32 = a.iter().zip(b).map(|(a, b)| (a - b).norm_sqr()).sum();
                let r: f32 = b.iter().map(|v| v.norm_sqr()).sum();
                (d / r).sqrt()
            };
            assert!(err(&y, &want) < 1e-5, "f32 n {n}: {}", err(&y, &want));
            fft_multi(&mut y, &[1, 2], Direction::Inverse).unwrap();
            assert!(err(&y, &x) < 1e-5, "f32 n {n} back: {}", err(&y, &x));
        }
    });
}

/// Synthetic trees of 2 and 4 packages: the hierarchy, and the transform placed on them (top
/// level one process per package, nested runs inside each package's cores).
#[test]
fn multi_bsp_on_synthetic_trees() {
    within(300, || {
        for (desc, want_levels) in [
            ("package:2 core:2 pu:1", vec![2, 2]),
            ("package:4 core:2 pu:2", vec![4, 2]),
            ("package:2 numa:2 core:2 pu:1", vec![2, 2, 2]),
        ] {
            let loaded = mbsp::Machine::synthetic(desc).unwrap();
            let levels = hierarchy(&loaded.machine, &loaded.machine.whole());
            assert_eq!(levels, want_levels, "{desc}");
            let n = 1 << 12;
            let x = random(n, 5);
            let want = sequential(&x, Direction::Forward);
            let packages = mbsp::Run::new(levels[0])
                .machine(loaded.clone())
                .run(|ctx| {
                    let (p, me) = (ctx.nprocs(), ctx.pid());
                    let mut plan = MultiFft::<f64>::nested(ctx, n, &levels[1..])?;
                    let mut local: Vec<C> = (me..n).step_by(p).map(|i| x[i]).collect();
                    plan.forward(ctx, &mut local)?;
                    for (i, v) in local.iter().enumerate() {
                        assert!(
                            (v - want[me + p * i]).norm() < 1e-9,
                            "{desc}: entry {}",
                            me + p * i
                        );
                    }
                    let procs = plan.procs(ctx);
                    plan.free(ctx)?;
                    Ok((ctx.placement().packages.clone(), procs))
                })
                .unwrap();
            // One top-level process per package.
            for (pid, (pk, procs)) in packages.iter().enumerate() {
                assert_eq!(pk, &vec![pid], "{desc}");
                assert_eq!(*procs, levels.iter().product::<usize>());
            }
        }
    });
}

/// A panic in user code between two flat BSP FFTs, while the other processes read this
/// process's packs with direct gets (lent through runtime-owned registrations, which the
/// registration tables keep alive): the run ends with the panic as its error, never a crash.
#[test]
fn fft_with_a_panic_between_transforms() {
    let _load = common::Load::new();
    for round in 0..if common::memcheck() { 1 } else { 5 } {
        let e = within(120, move || {
            mbsp::run(2, move |ctx| {
                let n = 1 << 18;
                let mut fft = BspFft::<f64>::new(ctx, n)?;
                let mut x = vec![Complex::new(1.0, 0.0); n / ctx.nprocs()];
                for k in 0..20 {
                    if ctx.pid() == 1 && k == 3 + round % 5 {
                        panic!("user code between transforms");
                    }
                    fft.transform(ctx, &mut x, Direction::Forward)?;
                }
                Ok(())
            })
        })
        .expect_err("the run must fail");
        assert_eq!(e.kind(), ErrorKind::Panic, "round {round}: {e}");
        assert!(e.to_string().contains("between transforms"), "{e}");
    }
}

// ------------------------------------------------------------------------ owned exchange

use mbsp_algorithms::fft::Exchange;

/// Both exchanges (owned: lazy sync, packs handed over as owned messages; direct gets) give
/// sequential rustfft's results, forward and inverse, over repeated transforms of new inputs on
/// one plan, for every p and on both sides of the split's thresholds (p = 2 with two and four
/// rows); where the local FFT is not split (p = 1, p² > n) the plan says it uses direct gets,
/// and is right.
#[test]
fn both_exchanges_match_sequential_rustfft() {
    within(300, || {
        for exchange in [Exchange::Owned, Exchange::DirectGet] {
            let cases: [(usize, &[u32]); 4] = [
                (1, &[0, 6]),
                (2, &[1, 2, 6, 11, 18, 19]),
                (4, &[3, 4, 9, 12]),
                (8, &[5, 6, 10, 13]),
            ];
            for (p, logs) in cases {
                for &m in logs {
                    let n = 1usize << m;
                    let inputs: Vec<Vec<C>> =
                        (0..4).map(|k| random(n, 1000 * m as u64 + k)).collect();
                    let dirs = [
                        Direction::Forward,
                        Direction::Inverse,
                        Direction::Forward,
                        Direction::Inverse,
                    ];
                    let wants: Vec<Vec<C>> = inputs
                        .iter()
                        .zip(dirs)
                        .map(|(x, d)| sequential(x, d))
                        .collect();
                    let split = p > 1 && p * p <= n;
                    let (inputs, wants) = (&inputs, &wants);
                    mbsp::run(p, |ctx| {
                        let me = ctx.pid();
                        let mut plan = BspFft::<f64>::with_exchange(ctx, n, exchange)?;
                        let want_exchange = if split { exchange } else { Exchange::DirectGet };
                        assert_eq!(plan.exchange(), want_exchange, "n {n} p {p}");
                        for (k, dir) in dirs.into_iter().enumerate() {
                            let mut local: Vec<C> =
                                (me..n).step_by(p).map(|i| inputs[k][i]).collect();
                            plan.transform(ctx, &mut local, dir)?;
                            let want: Vec<C> = (me..n).step_by(p).map(|i| wants[k][i]).collect();
                            let err = rel_error(&local, &want);
                            assert!(
                                err <= 1e-12,
                                "{exchange:?}: n 2^{m} p {p} transform {k}: error {err:e}"
                            );
                        }
                        plan.free(ctx)?;
                        ctx.sync()
                    })
                    .unwrap();
                }
            }
        }
    });
}

/// Misuse of the owned exchange is an error naming it: processes asking for different
/// exchanges, and a message of the caller's in the transform's superstep (the declared count
/// does not match).
#[test]
fn owned_exchange_misuse_gets_a_clear_error() {
    within(60, || {
        let err = mbsp::run(2, |ctx| {
            let ex = if ctx.pid() == 0 {
                Exchange::Owned
            } else {
                Exchange::DirectGet
            };
            BspFft::<f64>::with_exchange(ctx, 64, ex).map(drop)
        })
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Misuse, "{err}");
        assert!(
            err.to_string()
                .contains("processes plan different exchanges"),
            "{err}"
        );
        let err = mbsp::run(2, |ctx| {
            let mut plan = BspFft::<f64>::with_exchange(ctx, 64, Exchange::Owned)?;
            let mut local = vec![C::new(1.0, 0.0); 32];
            ctx.send(1 - ctx.pid(), &[], &[1u8])?;
            plan.forward(ctx, &mut local)
        })
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Misuse, "{err}");
        assert!(err.to_string().contains("declare_incoming"), "{err}");
    });
}
