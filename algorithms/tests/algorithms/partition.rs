//! The partitioner: invariants of its result on random and real matrices, the volume it reports
//! against an independent count, determinism, edge cases and bad input.

use crate::common;

use common::{SplitMix64, within};
use mbsp_algorithms::sparse::partition::{Options, PartitionError, partition, partition_nonzeros};
use mbsp_algorithms::sparse::{CooMatrix, mtx};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Volume counted the slow, obvious way: the set of parts of every row and column.
fn naive_volume(a: &CooMatrix, part: &[u32]) -> u64 {
    let mut rows: HashMap<u32, HashSet<u32>> = HashMap::new();
    let mut cols: HashMap<u32, HashSet<u32>> = HashMap::new();
    for (k, &s) in part.iter().enumerate() {
        rows.entry(a.row_idx[k]).or_default().insert(s);
        cols.entry(a.col_idx[k]).or_default().insert(s);
    }
    rows.values()
        .chain(cols.values())
        .map(|s| s.len() as u64 - 1)
        .sum()
}

/// A random sparse matrix with some structure (a band plus random entries), no duplicates.
fn random_matrix(m: usize, n: usize, nnz: usize, seed: u64) -> CooMatrix {
    let mut rng = SplitMix64::new(seed);
    let mut next = move || rng.next_u64();
    let mut seen = HashSet::new();
    let mut e = Vec::new();
    while e.len() < nnz.min(m * n) {
        let i = (next() % m as u64) as usize;
        let j = if next() % 2 == 0 {
            ((i * n / m) + (next() % 5) as usize).min(n - 1)
        } else {
            (next() % n as u64) as usize
        };
        if seen.insert((i, j)) {
            e.push((i, j, 1.0));
        }
    }
    CooMatrix::new(m, n, e).unwrap()
}

/// Partitions `a` and checks every invariant; returns the volume.
fn check(a: &CooMatrix, p: usize, eps: f64, seed: u64) -> u64 {
    check_with(a, p, eps, seed, false)
}

/// [`check`], with or without [`Options::quality`].
fn check_with(a: &CooMatrix, p: usize, eps: f64, seed: u64, quality: bool) -> u64 {
    let opts = Options {
        eps,
        seed,
        threads: 0,
        quality,
        cancel: None,
    };
    let r = partition(a, p, &opts).unwrap();
    let part = &r.dist.nz_part;
    assert_eq!(part.len(), a.nnz(), "one part per nonzero");
    assert!(
        part.iter().all(|&s| (s as usize) < p),
        "parts below p = {p}"
    );
    let mut sizes = vec![0u64; p];
    for &s in part {
        sizes[s as usize] += 1;
    }
    let nnz = a.nnz() as u64;
    let bound = (((1.0 + eps) * nnz as f64 / p as f64).floor() as u64).max(nnz.div_ceil(p as u64));
    assert!(
        sizes.iter().all(|&s| s <= bound),
        "sizes {sizes:?} over {bound} (p = {p})"
    );
    assert_eq!(r.volume, naive_volume(a, part), "reported volume, p = {p}");
    r.volume
}

/// Row blocks with about `nnz / p` nonzeros each: the 1D baseline.
fn row_block_volume(a: &CooMatrix, p: usize) -> u64 {
    let mut block = vec![0u32; a.rows];
    let mut seen = 0usize;
    for (i, &c) in a.row_counts().iter().enumerate() {
        block[i] = ((seen * p) / a.nnz().max(1)) as u32;
        seen += c as usize;
    }
    let rows: Vec<u32> = a.row_idx.iter().map(|&i| block[i as usize]).collect();
    naive_volume(a, &rows)
}

#[test]
fn random_matrices_meet_balance_and_report_their_volume() {
    within(300, || {
        let shapes = [
            (50, 50, 300),
            (200, 120, 1500),
            (30, 400, 900),
            (1000, 1000, 6000),
        ];
        for (t, &(m, n, nnz)) in shapes.iter().enumerate() {
            let a = random_matrix(m, n, nnz, t as u64 + 1);
            for quality in [false, true] {
                for p in [1, 2, 3, 4, 5, 7, 8, 16] {
                    check_with(&a, p, 0.03, 5, quality);
                }
                check_with(&a, 4, 0.0, 5, quality);
                check_with(&a, 6, 0.2, 5, quality);
            }
        }
    });
}

/// The quality setting's max-flow rounds find better cuts on meshes: never worse than the
/// default on a 2D grid and a 3D grid, lower on at least one (every part within balance:
/// `check_with`).
#[test]
fn quality_setting_lowers_the_volume_on_meshes() {
    within(300, || {
        let mut lower = 0;
        for (dims, p) in [(vec![60, 60], 4), (vec![60, 60], 8), (vec![16, 16, 16], 4)] {
            let a = grid_laplacian(&dims);
            let fast = check_with(&a, p, 0.03, 1, false);
            let good = check_with(&a, p, 0.03, 1, true);
            assert!(
                good <= fast,
                "{dims:?}, p = {p}: quality {good} > default {fast}"
            );
            lower += usize::from(good < fast);
        }
        assert!(lower >= 1, "the quality setting never found a lower volume");
    });
}

/// The Laplacian of a grid with the given side lengths (2 * dims + 1 point stencil).
fn grid_laplacian(dims: &[usize]) -> CooMatrix {
    let n: usize = dims.iter().product();
    let mut e = Vec::new();
    for i in 0..n {
        e.push((i, i, 2.0 * dims.len() as f64));
        let mut stride = 1;
        let mut rest = i;
        for &d in dims {
            let x = rest % d;
            rest /= d;
            if x > 0 {
                e.push((i, i - stride, -1.0));
            }
            if x + 1 < d {
                e.push((i, i + stride, -1.0));
            }
            stride *= d;
        }
    }
    CooMatrix::new(n, n, e).unwrap()
}

#[test]
fn beats_row_blocks_on_a_mesh() {
    within(120, || {
        // A 2D 5-point Laplacian on a 40 x 40 grid.
        let k = 40;
        let mut e = Vec::new();
        for x in 0..k {
            for y in 0..k {
                let i = x * k + y;
                e.push((i, i, 4.0));
                for (dx, dy) in [(-1i64, 0i64), (1, 0), (0, -1), (0, 1)] {
                    let (nx, ny) = (x as i64 + dx, y as i64 + dy);
                    if (0..k as i64).contains(&nx) && (0..k as i64).contains(&ny) {
                        e.push((i, (nx * k as i64 + ny) as usize, -1.0));
                    }
                }
            }
        }
        let a = CooMatrix::new(k * k, k * k, e).unwrap();
        let ours = check(&a, 4, 0.03, 1);
        let rows = row_block_volume(&a, 4);
        assert!(ours < rows, "ours {ours} vs row blocks {rows}");
    });
}

#[test]
fn same_seed_same_partition_whatever_the_threads() {
    within(300, || {
        let a = random_matrix(3000, 3000, 30_000, 9);
        // The quality setting too: its flows run in the splits' threads, its k-way pass
        // (p = 8) after them.
        for quality in [false, true] {
            let opts = |seed, threads| Options {
                seed,
                threads,
                quality,
                ..Options::default()
            };
            let one = partition_nonzeros(&a, 8, &opts(1, 1)).unwrap();
            let two = partition_nonzeros(&a, 8, &opts(1, 2)).unwrap();
            assert_eq!(one, two, "quality {quality}");
            let other = partition_nonzeros(&a, 8, &opts(2, 1)).unwrap();
            assert_ne!(
                one, other,
                "quality {quality}: another seed, another partition"
            );
        }
    });
}

#[test]
fn edge_cases() {
    within(120, || {
        // 1 x 1.
        let a = CooMatrix::new(1, 1, vec![(0, 0, 2.0)]).unwrap();
        assert_eq!(check(&a, 1, 0.03, 1), 0);
        assert_eq!(check(&a, 3, 0.03, 1), 0);
        // Empty matrix.
        let e = CooMatrix::new(5, 7, Vec::new()).unwrap();
        for p in [1, 4] {
            let r = partition(&e, p, &Options::default()).unwrap();
            assert!(r.dist.nz_part.is_empty());
            assert_eq!((r.volume, r.max_h), (0, 0));
            assert_eq!((r.dist.x_owner.len(), r.dist.y_owner.len()), (7, 5));
        }
        // More parts than nonzeros: each nonzero alone, the other parts empty.
        let a = random_matrix(6, 6, 5, 3);
        check(&a, 9, 0.03, 1);
        // Empty rows and columns, rectangular both ways.
        let a = CooMatrix::new(100, 10, (0..50).map(|k| (2 * k, k % 10, 1.0))).unwrap();
        check(&a, 4, 0.03, 1);
        let a = CooMatrix::new(10, 300, (0..200).map(|k| (k % 10, k + 50, 1.0))).unwrap();
        check(&a, 3, 0.03, 1);
    });
}

#[test]
fn bad_input_is_refused_clearly() {
    let a = random_matrix(10, 10, 20, 1);
    let err = partition(&a, 0, &Options::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("p = 0"), "{err}");
    for eps in [-0.1, f64::NAN, f64::INFINITY] {
        let err = partition(
            &a,
            2,
            &Options {
                eps,
                ..Options::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("eps"), "{err}");
    }
    let mut bad = a.clone();
    bad.row_idx[3] = 10;
    let err = partition(&bad, 2, &Options::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("outside the 10 x 10 matrix"), "{err}");
    // Typed: the matrix's own error is the source.
    let err = partition(&bad, 2, &Options::default()).unwrap_err();
    let source = std::error::Error::source(&err).expect("a source");
    assert_eq!(
        source.downcast_ref::<mbsp_algorithms::sparse::ShapeError>(),
        Some(&mbsp_algorithms::sparse::ShapeError::Outside {
            nonzero: 3,
            row: 10,
            col: bad.col_idx[3] as usize,
            rows: 10,
            cols: 10
        })
    );
}

#[test]
fn real_matrices_beat_row_blocks() {
    within(300, || {
        let dir = common::matrices_dir();
        for name in ["rajat01.mtx", "bayer10.mtx"] {
            let a = mtx::read_path(dir.join(name)).unwrap();
            for p in [2, 3, 4] {
                let ours = check(&a, p, 0.03, 1);
                let rows = row_block_volume(&a, p);
                assert!(
                    ours < rows,
                    "{name} p = {p}: ours {ours} vs row blocks {rows}"
                );
            }
        }
    });
}

#[test]
fn a_stop_flag_ends_a_long_partition_with_an_error() {
    within(120, || {
        // A random matrix takes seconds to split into 64 parts; the flag, set from another
        // thread a moment in, stops every split (the parallel halves too) within a pass.
        let n = 100_000u32;
        let mut rng = SplitMix64::new(7);
        let mut next = move || rng.below(n as usize);
        let a = CooMatrix::new(
            n as usize,
            n as usize,
            (0..400_000)
                .map(|_| (next(), next(), 1.0))
                .collect::<Vec<_>>(),
        )
        .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let o = Options {
            cancel: Some(stop.clone()),
            ..Options::default()
        };
        let setter = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            stop.store(true, Ordering::Relaxed);
        });
        let e = partition(&a, 64, &o).unwrap_err();
        setter.join().unwrap();
        assert!(matches!(e, PartitionError::Cancelled), "{e}");
        assert_eq!(
            e.to_string(),
            "partition: cancelled (Options::cancel was set)"
        );
        // A flag that stays down changes nothing: the same partition as without one.
        let small = CooMatrix::new(
            500,
            500,
            (0..3000)
                .map(|k| (k % 500, (k * 7 + k / 500) % 500, 1.0))
                .collect::<Vec<_>>(),
        )
        .unwrap();
        let quiet = Options {
            cancel: Some(Arc::new(AtomicBool::new(false))),
            ..Options::default()
        };
        assert_eq!(
            partition(&small, 4, &quiet).unwrap().dist.nz_part,
            partition(&small, 4, &Options::default())
                .unwrap()
                .dist
                .nz_part
        );
    });
}

#[test]
fn tridiagonal_in_two_parts_is_cut_in_one_place() {
    within(60, || {
        let n = 300;
        let mut e = Vec::new();
        for i in 0..n {
            e.push((i, i, 2.0));
            if i > 0 {
                e.push((i, i - 1, -1.0));
            }
            if i + 1 < n {
                e.push((i, i + 1, -1.0));
            }
        }
        let a = CooMatrix::new(n, n, e).unwrap();
        // One row and one column cross, whatever the seed (a split that grows a part from
        // the middle of the band cuts it twice).
        for seed in 1..6 {
            assert_eq!(check(&a, 2, 0.03, seed), 2, "seed {seed}");
        }
    });
}
