//! Mondriaan files: round trips, the exact text written, and an error naming file and line for
//! every malformed input.

use crate::common;

use common::SplitMix64;
use mbsp_algorithms::sparse::mondriaan::{self, Files, MondriaanError};
use mbsp_algorithms::sparse::{CooMatrix, Distribution};
use std::path::{Path, PathBuf};

/// Test values for the number formatting.
trait Values {
    fn value(&mut self) -> f64;
}

impl Values for SplitMix64 {
    /// A value that exercises the number formatting: random bits (finite), awkward constants,
    /// or simple numbers.
    fn value(&mut self) -> f64 {
        const SPECIAL: [f64; 12] = [
            0.0,
            -0.0,
            1.0,
            -2.5,
            0.1,
            1.0 / 3.0,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324, // smallest subnormal
            1e-5,
            1e16,
            123456789012345680.0,
        ];
        match self.below(3) {
            0 => SPECIAL[self.below(SPECIAL.len())],
            1 => (self.below(2001) as f64 - 1000.0) / 8.0,
            _ => loop {
                let v = f64::from_bits(self.next_u64());
                if v.is_finite() {
                    break v;
                }
            },
        }
    }
}

/// A fresh directory for one test, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("mbsp-mondriaan-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
    fn path(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
    /// Writes `text` to file `f` and returns its path.
    fn file(&self, f: &str, text: &str) -> PathBuf {
        let p = self.path(f);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A random distribution of a random matrix; `used` parts of `p` get nonzeros (the others are
/// empty), and some rows and columns stay empty.
fn random_case(
    rng: &mut SplitMix64,
    m: usize,
    n: usize,
    nnz: usize,
    p: usize,
) -> (CooMatrix, Distribution) {
    let used = 1 + rng.below(p);
    let entries: Vec<(usize, usize, f64)> = (0..nnz)
        .map(|_| (rng.below(m), rng.below(n), rng.value()))
        .collect();
    let a = CooMatrix::new(m, n, entries).unwrap();
    let d = Distribution {
        p,
        nz_part: (0..a.nnz()).map(|_| rng.below(used) as u32).collect(),
        x_owner: (0..n).map(|_| rng.below(p) as u32).collect(),
        y_owner: (0..m).map(|_| rng.below(p) as u32).collect(),
    };
    (a, d)
}

/// `a` and `d` with the nonzeros stably sorted by part: what reading the written files gives.
fn in_file_order(a: &CooMatrix, d: &Distribution) -> (CooMatrix, Distribution) {
    let mut order: Vec<usize> = (0..a.nnz()).collect();
    order.sort_by_key(|&k| d.nz_part[k]);
    let b = CooMatrix {
        rows: a.rows,
        cols: a.cols,
        row_idx: order.iter().map(|&k| a.row_idx[k]).collect(),
        col_idx: order.iter().map(|&k| a.col_idx[k]).collect(),
        vals: order.iter().map(|&k| a.vals[k]).collect(),
    };
    let e = Distribution {
        nz_part: order.iter().map(|&k| d.nz_part[k]).collect(),
        ..d.clone()
    };
    (b, e)
}

/// Equal, with values compared bit for bit (so -0.0 differs from 0.0).
fn assert_same(got: &CooMatrix, want: &CooMatrix) {
    assert_eq!((got.rows, got.cols), (want.rows, want.cols));
    assert_eq!(got.row_idx, want.row_idx);
    assert_eq!(got.col_idx, want.col_idx);
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&got.vals), bits(&want.vals));
}

fn round_trip(dir: &TempDir, name: &str, a: &CooMatrix, d: &Distribution) {
    let prefix = dir.path(name);
    let files = mondriaan::write(a, d, &prefix).unwrap();
    assert_eq!(files, Files::new(&prefix, d.p));
    let (b, e) = mondriaan::read(&prefix, d.p).unwrap();
    let (wa, wd) = in_file_order(a, d);
    assert_same(&b, &wa);
    assert_eq!(e, wd);
    // The single-file readers agree with `read`.
    let (b2, parts, p) = mondriaan::read_matrix(&files.matrix).unwrap();
    assert_same(&b2, &wa);
    assert_eq!((parts, p), (wd.nz_part.clone(), d.p));
    assert_eq!(
        mondriaan::read_vector(&files.u).unwrap(),
        (d.y_owner.clone(), d.p)
    );
    assert_eq!(
        mondriaan::read_vector(&files.v).unwrap(),
        (d.x_owner.clone(), d.p)
    );
}

#[test]
fn round_trip_random() {
    let dir = TempDir::new("random");
    let mut rng = SplitMix64::new(1);
    for case in 0..120 {
        let p = [1, 2, 3, 7][case % 4];
        let m = 1 + rng.below(30);
        let n = 1 + rng.below(30);
        let nnz = rng.below(m * n + 1);
        let (a, d) = random_case(&mut rng, m, n, nnz, p);
        round_trip(&dir, &format!("r{case}.mtx"), &a, &d);
    }
}

#[test]
fn round_trip_edge_cases() {
    let dir = TempDir::new("edges");
    // 1 x 1.
    let a = CooMatrix::new(1, 1, vec![(0, 0, -0.0)]).unwrap();
    let d = Distribution {
        p: 1,
        nz_part: vec![0],
        x_owner: vec![0],
        y_owner: vec![0],
    };
    round_trip(&dir, "one.mtx", &a, &d);
    // No nonzeros, several parts (all empty).
    let a = CooMatrix::new(3, 2, vec![]).unwrap();
    let d = Distribution {
        p: 3,
        nz_part: vec![],
        x_owner: vec![2, 0],
        y_owner: vec![0, 1, 2],
    };
    round_trip(&dir, "empty.mtx", &a, &d);
    // Empty rows and columns, an empty first and last part, rectangular.
    let a = CooMatrix::new(5, 9, vec![(4, 8, 1.0), (0, 0, 2.0), (2, 3, 3.0)]).unwrap();
    let d = Distribution {
        p: 4,
        nz_part: vec![2, 1, 2],
        x_owner: vec![3; 9],
        y_owner: vec![0, 1, 2, 3, 0],
    };
    round_trip(&dir, "rect.mtx", &a, &d);
    // Zero rows or columns.
    let a = CooMatrix::new(0, 4, vec![]).unwrap();
    let d = Distribution {
        p: 2,
        nz_part: vec![],
        x_owner: vec![1, 0, 1, 0],
        y_owner: vec![],
    };
    round_trip(&dir, "norows.mtx", &a, &d);
}

#[test]
fn files_look_as_specified() {
    let dir = TempDir::new("text");
    // 3 x 4; nonzeros in matrix order with parts 1, 0, 1, 0 of p = 3 (part 2 empty).
    let a = CooMatrix::new(
        3,
        4,
        vec![(0, 0, 1.0), (2, 3, -0.5), (1, 1, 1e-300), (0, 3, 2.0e20)],
    )
    .unwrap();
    let d = Distribution {
        p: 3,
        nz_part: vec![1, 0, 1, 0],
        x_owner: vec![1, 1, 2, 0],
        y_owner: vec![1, 0, 0],
    };
    let files = mondriaan::write(&a, &d, dir.path("t.mtx")).unwrap();
    assert_eq!(files.matrix, dir.path("t.mtx-P3"));
    assert_eq!(files.u, dir.path("t.mtx-u3"));
    assert_eq!(files.v, dir.path("t.mtx-v3"));
    let matrix = std::fs::read_to_string(&files.matrix).unwrap();
    assert_eq!(
        matrix,
        "%%MatrixMarket distributed-matrix coordinate real general\n\
         3 4 4 3\n\
         0\n\
         2\n\
         4\n\
         4\n\
         3 4 -0.5\n\
         1 4 2e20\n\
         1 1 1\n\
         2 2 1e-300\n"
    );
    // u is y (one owner per row), v is x (one per column); 1-based, no banner or comment.
    assert_eq!(
        std::fs::read_to_string(&files.u).unwrap(),
        "3 3\n1 2\n2 1\n3 1\n"
    );
    assert_eq!(
        std::fs::read_to_string(&files.v).unwrap(),
        "4 3\n1 2\n2 2\n3 3\n4 1\n"
    );
}

#[test]
fn reads_mondriaan_and_bspedupack_variants() {
    let dir = TempDir::new("variants");
    // As Mondriaan 4 writes it (values with %g), with a header comment as Mondriaan copies it
    // from its input, and blank lines and CRLF line ends.
    let f = dir.file(
        "m.mtx-P2",
        "%%MatrixMarket distributed-matrix coordinate real general\r\n\
         % copied comment\r\n\
         \r\n\
         3 3 4 2\r\n0\r\n2\r\n4\r\n5 1 3.9564e-09\n1 2 -1\n2 3 0\n3 3 1.05034\n% tail\n\n",
    );
    let err = mondriaan::read_matrix(&f).unwrap_err();
    assert_eq!(err.line(), Some(8), "{err}"); // row 5 > m = 3
    let f = dir.file(
        "m.mtx-P2",
        "%%MatrixMarket distributed-matrix coordinate real general\r\n\
         % copied comment\r\n\
         \r\n\
         3 3 4 2\r\n0\r\n2\r\n4\r\n3 1 3.9564e-09\n1 2 -1\n2 3 0\n3 3 1.05034\n% tail\n\n",
    );
    let (a, parts, p) = mondriaan::read_matrix(&f).unwrap();
    assert_eq!(p, 2);
    assert_eq!(parts, vec![0, 0, 1, 1]);
    assert_eq!((a.rows, a.cols), (3, 3));
    assert_eq!(a.row_idx, vec![2, 0, 1, 2]);
    assert_eq!(a.col_idx, vec![0, 1, 2, 2]);
    assert_eq!(a.vals, vec![3.9564e-09, -1.0, 0.0, 1.05034]);

    // No banner at all (BSPedupack's own examples): real general, 0-based starts.
    let f = dir.file("nb-P1", "2 2 1 1\n0\n1\n2 1 7.5\n");
    let (a, parts, p) = mondriaan::read_matrix(&f).unwrap();
    assert_eq!(
        (a.row_idx, a.col_idx, a.vals, parts, p),
        (vec![1], vec![0], vec![7.5], vec![0], 1)
    );

    // Pattern and integer fields.
    let f = dir.file(
        "pat-P2",
        "%%MatrixMarket distributed-matrix coordinate pattern general\n\
         2 2 2 2\n0\n1\n2\n1 1\n2 2\n",
    );
    let (a, parts, _) = mondriaan::read_matrix(&f).unwrap();
    assert_eq!((a.vals, parts), (vec![1.0, 1.0], vec![0, 1]));
    let f = dir.file(
        "int-P1",
        "%%MatrixMarket distributed-matrix coordinate integer general\n\
         1 2 2 1\n0\n2\n1 1 3\n1 2 -4\n",
    );
    assert_eq!(mondriaan::read_matrix(&f).unwrap().0.vals, vec![3.0, -4.0]);

    // Mondriaan's extended format: 1-based part starts, a view word; a banner on the vector.
    let f = dir.file(
        "emm-P2",
        "%%Extended-MatrixMarket distributed-matrix coordinate real general original\n\
         2 2 3 2\n1\n2\n4\n1 1 1\n2 2 2\n1 2 3\n",
    );
    let (_, parts, _) = mondriaan::read_matrix(&f).unwrap();
    assert_eq!(parts, vec![0, 1, 1]);
    let f = dir.file(
        "emm-u2",
        "%%Extended-MatrixMarket distributed-vector array integer general global\n2 2\n1 2\n2 1\n",
    );
    assert_eq!(mondriaan::read_vector(&f).unwrap(), (vec![1, 0], 2));
}

/// Expects a format error at `line` of `path` whose message contains `msg`, and checks that
/// the error's text names the file and the line.
fn expect_err<T: std::fmt::Debug>(
    r: Result<T, MondriaanError>,
    path: &Path,
    line: usize,
    msg: &str,
) {
    let e = r.expect_err("malformed input was accepted");
    let text = e.to_string();
    assert_eq!(e.path(), path, "{text}");
    assert_eq!(e.line(), Some(line), "{text}");
    assert!(text.contains(msg), "`{text}` does not mention `{msg}`");
    assert!(
        text.starts_with(&format!("{}:{line}: ", path.display())),
        "{text}"
    );
}

#[test]
fn malformed_matrix_files() {
    let dir = TempDir::new("bad-matrix");
    const B: &str = "%%MatrixMarket distributed-matrix coordinate real general\n";
    let cases: Vec<(String, usize, &str)> = vec![
        (String::new(), 1, "empty"),
        ("\n\n".into(), 3, "empty"),
        (
            "%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 1\n".into(),
            1,
            "distributed-matrix",
        ),
        (
            "%%MatrixMart distributed-matrix coordinate real general\n".into(),
            1,
            "unknown banner",
        ),
        (
            "%%MatrixMarket distributed-matrix array real general\n".into(),
            1,
            "coordinate",
        ),
        (
            "%%MatrixMarket distributed-matrix coordinate complex general\n".into(),
            1,
            "complex",
        ),
        (
            "%%MatrixMarket distributed-matrix coordinate real symmetric\n".into(),
            1,
            "symmetric",
        ),
        (
            "%%MatrixMarket distributed-matrix coordinate real\n".into(),
            1,
            "banner",
        ),
        (format!("{B}% only comments\n"), 3, "size line"),
        (format!("{B}2 2 1\n0\n1\n1 1 1\n"), 2, "4 numbers"),
        (format!("{B}2 2 1 1 5\n"), 2, "found 5 fields"),
        (
            format!("{B}2 x 1 1\n"),
            2,
            "`x` is not a nonnegative integer",
        ),
        (format!("{B}2 2 -1 1\n"), 2, "nnz `-1`"),
        (format!("{B}2 2 1 0\n"), 2, "p = 0"),
        (format!("{B}5000000000 2 1 1\n"), 2, "too large"),
        (
            format!("{B}2 2 1 2\n1\n1\n1\n1 1 1\n"),
            3,
            "first part start is 1, expected 0",
        ),
        (
            format!("{B}2 2 2 3\n0\n2\n1\n2\n1 1 1\n2 2 1\n"),
            5,
            "smaller than the previous",
        ),
        (
            format!("{B}2 2 2 2\n0\n1\n3\n1 1 1\n2 2 1\n"),
            5,
            "expected nnz = 2",
        ),
        (format!("{B}2 2 2 2\n0\n5\n2\n"), 4, "beyond"),
        (format!("{B}2 2 2 2\n0\n1 1\n"), 4, "one part start"),
        (format!("{B}2 2 2 2\n0\n1\n"), 5, "part start 3 of 3"),
        (format!("{B}2 2 1 1\n0\n1\n0 1 1\n"), 5, "row index 0"),
        (
            format!("{B}2 2 1 1\n0\n1\n3 1 1\n"),
            5,
            "row index 3 is outside 1..=2",
        ),
        (format!("{B}2 2 1 1\n0\n1\n1 3 1\n"), 5, "column index 3"),
        (format!("{B}2 2 1 1\n0\n1\n1 1 abc\n"), 5, "value `abc`"),
        (
            format!("{B}2 2 1 1\n0\n1\n1 1\n"),
            5,
            "expected `i j value`",
        ),
        (format!("{B}2 2 1 1\n0\n1\n1 1 1 1\n"), 5, "found 4 fields"),
        (format!("{B}2 2 2 1\n0\n2\n1 1 1\n"), 6, "nonzero 2 of 2"),
        (
            format!("{B}2 2 1 1\n0\n1\n1 1 1\n2 2 2\n"),
            6,
            "unexpected line after the 1 nonzeros",
        ),
        (format!("{B}2 2 1 1\n0\n1\n1.5 1 1\n"), 5, "row index `1.5`"),
        (
            format!("{}2 2 1 1\n0\n1\n1 1 1\n", B.replace("real", "pattern")),
            5,
            "expected `i j`",
        ),
        (
            "%%Extended-MatrixMarket distributed-matrix coordinate real general local\n".into(),
            1,
            "view `local`",
        ),
        (
            format!("%%Extended-{}1 1 1 1\n0\n1\n1 1 1\n", &B[2..]),
            3,
            "expected 1",
        ),
        // 1-based starts that decrease by one, and down to 0.
        (
            format!("%%Extended-{}2 2 2 3\n1\n3\n2\n3\n", &B[2..]),
            5,
            "part start 2 is smaller than the previous one, 3",
        ),
        (
            format!("%%Extended-{}2 2 0 2\n1\n0\n", &B[2..]),
            4,
            "smaller than the previous one, 1",
        ),
    ];
    for (k, (text, line, msg)) in cases.iter().enumerate() {
        let f = dir.file(&format!("bad{k}-P1"), text);
        expect_err(mondriaan::read_matrix(&f), &f, *line, msg);
    }
    // Not UTF-8.
    let f = dir.path("binary-P1");
    std::fs::write(
        &f,
        b"%%MatrixMarket distributed-matrix coordinate real general\n2 2 1 1\n0\n1\n1 1 \xff\n",
    )
    .unwrap();
    expect_err(mondriaan::read_matrix(&f), &f, 5, "UTF-8");
}

#[test]
fn malformed_vector_files() {
    let dir = TempDir::new("bad-vector");
    let cases: Vec<(&str, usize, &str)> = vec![
        ("", 1, "size line `n p`"),
        ("% comment only\n", 2, "size line"),
        ("3\n", 1, "2 numbers"),
        ("3 2 1\n", 1, "found 3 fields"),
        ("3 0\n", 1, "p = 0"),
        ("x 2\n", 1, "n `x`"),
        ("2 2\n1 1\n2 0\n", 3, "owner 0 is outside 1..=2"),
        ("2 2\n1 1\n2 3\n", 3, "owner 3"),
        ("2 2\n2 1\n1 1\n", 2, "index 2, expected 1"),
        ("2 2\n1 1\n", 3, "entry 2 of 2"),
        (
            "2 2\n1 1\n2 2\n3 1\n",
            4,
            "unexpected line after the 2 entries",
        ),
        ("2 2\n1 1\n2\n", 3, "expected `index owner`"),
        ("2 2\n1 one\n", 2, "owner `one`"),
    ];
    for (k, (text, line, msg)) in cases.iter().enumerate() {
        let f = dir.file(&format!("bad{k}-v2"), text);
        expect_err(mondriaan::read_vector(&f), &f, *line, msg);
    }
}

#[test]
fn read_checks_the_files_agree() {
    let dir = TempDir::new("agree");
    let a = CooMatrix::new(2, 3, vec![(0, 0, 1.0), (1, 2, 2.0)]).unwrap();
    let d = Distribution {
        p: 2,
        nz_part: vec![0, 1],
        x_owner: vec![0, 1, 1],
        y_owner: vec![0, 1],
    };
    let prefix = dir.path("a.mtx");
    let files = mondriaan::write(&a, &d, &prefix).unwrap();
    assert!(mondriaan::read(&prefix, 2).is_ok());
    // Asking for another p looks for other files.
    match mondriaan::read(&prefix, 3) {
        Err(e @ MondriaanError::Io { .. }) => {
            assert_eq!(e.path(), dir.path("a.mtx-P3"));
            assert!(
                e.to_string()
                    .starts_with(&dir.path("a.mtx-P3").display().to_string())
            );
        }
        other => panic!("expected an I/O error, got {other:?}"),
    }
    // A u file for another p, or of the wrong length.
    std::fs::write(&files.u, "2 3\n1 1\n2 1\n").unwrap();
    expect_err(
        mondriaan::read(&prefix, 2),
        &files.u,
        1,
        "p = 3, expected 2",
    );
    std::fs::write(&files.u, "3 2\n1 1\n2 1\n3 1\n").unwrap();
    expect_err(
        mondriaan::read(&prefix, 2),
        &files.u,
        1,
        "length 3, but the matrix has 2 rows",
    );
    mondriaan::write_vector(&d.y_owner, 2, &files.u).unwrap();
    std::fs::write(&files.v, "2 2\n1 1\n2 1\n").unwrap();
    expect_err(mondriaan::read(&prefix, 2), &files.v, 1, "has 3 columns");
    // A matrix file for another p under this name.
    mondriaan::write_vector(&d.x_owner, 2, &files.v).unwrap();
    mondriaan::write_matrix(&a, &[0, 0], 1, &files.matrix).unwrap();
    expect_err(
        mondriaan::read(&prefix, 2),
        &files.matrix,
        2,
        "p = 1, expected 2",
    );
}

#[test]
fn write_rejects_inconsistent_input() {
    let dir = TempDir::new("write-bad");
    let a = CooMatrix::new(2, 2, vec![(0, 0, 1.0)]).unwrap();
    let good = Distribution {
        p: 2,
        nz_part: vec![1],
        x_owner: vec![0, 1],
        y_owner: vec![1, 0],
    };
    let bad = [
        Distribution {
            nz_part: vec![2],
            ..good.clone()
        },
        Distribution {
            nz_part: vec![],
            ..good.clone()
        },
        Distribution {
            x_owner: vec![0],
            ..good.clone()
        },
        Distribution {
            y_owner: vec![0, 5],
            ..good.clone()
        },
        Distribution {
            p: 0,
            nz_part: vec![0],
            ..good.clone()
        },
    ];
    for d in &bad {
        let e = mondriaan::write(&a, d, dir.path("x.mtx")).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
    }
    // Nothing was written by the rejected calls.
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 0);
    // A missing directory: the error names the file.
    let missing = dir.path("no/such/dir/x.mtx");
    let e = mondriaan::write(&a, &good, &missing).unwrap_err();
    assert!(e.to_string().contains("x.mtx-P2"), "{e}");
}

/// Timing of a G3_circuit-sized file (run in release with `--ignored --nocapture`).
#[test]
#[ignore]
fn timing_large() {
    let dir = TempDir::new("large");
    let g = 1259usize;
    let mut e = Vec::with_capacity(5 * g * g);
    let mut rng = SplitMix64::new(7);
    for x in 0..g {
        for y in 0..g {
            let i = x * g + y;
            e.push((i, i, 4.0 + rng.value().abs().min(1.0)));
            if x > 0 {
                e.push((i, i - g, -1.0));
            }
            if x + 1 < g {
                e.push((i, i + g, -1.0 / 3.0));
            }
            if y > 0 {
                e.push((i, i - 1, rng.value()));
            }
            if y + 1 < g {
                e.push((i, i + 1, -1.0));
            }
        }
    }
    let a = CooMatrix::new(g * g, g * g, e).unwrap();
    let p = 64;
    let d = Distribution {
        p,
        nz_part: (0..a.nnz())
            .map(|k| (a.row_idx[k] as usize * p / (g * g)) as u32)
            .collect(),
        x_owner: (0..g * g).map(|j| (j * p / (g * g)) as u32).collect(),
        y_owner: (0..g * g).map(|i| (i * p / (g * g)) as u32).collect(),
    };
    let t0 = std::time::Instant::now();
    let files = mondriaan::write(&a, &d, dir.path("g.mtx")).unwrap();
    let tw = t0.elapsed().as_secs_f64();
    let size = std::fs::metadata(&files.matrix).unwrap().len();
    let t0 = std::time::Instant::now();
    let (b, e) = mondriaan::read(dir.path("g.mtx"), p).unwrap();
    let tr = t0.elapsed().as_secs_f64();
    assert_eq!(b.nnz(), a.nnz());
    assert_eq!(e.x_owner, d.x_owner);
    println!(
        "nnz {}: write {tw:.2} s, read {tr:.2} s, matrix file {:.0} MB",
        a.nnz(),
        size as f64 / 1e6
    );
}

#[test]
fn absurd_counts_give_errors_not_panics() {
    let dir = TempDir::new("absurd");
    let max = u64::MAX;
    for (text, line) in [
        (
            format!(
                "%%Extended-MatrixMarket distributed-matrix coordinate real general\n2 2 {max} 1\n1\n"
            ),
            4,
        ),
        (
            format!(
                "%%MatrixMarket distributed-matrix coordinate real general\n2 2 {max} 4294967295\n0\n"
            ),
            4,
        ),
        (format!("{max} 3\n1 1\n"), 3),
    ] {
        let f = dir.file("absurd", &text);
        let r = if text.starts_with("%%") {
            mondriaan::read_matrix(&f).map(|_| ())
        } else {
            mondriaan::read_vector(&f).map(|_| ())
        };
        let e = r.expect_err("accepted");
        assert_eq!(e.line(), Some(line), "{e}");
    }
}

/// Random damage to valid files (bytes replaced, lines dropped or repeated, truncation): the
/// readers return errors or values, never panic, and errors point inside the file.
#[test]
fn corrupted_files_never_panic() {
    let dir = TempDir::new("corrupt");
    let mut rng = SplitMix64::new(11);
    let (a, d) = random_case(&mut rng, 6, 5, 14, 3);
    let files = mondriaan::write(&a, &d, dir.path("c.mtx")).unwrap();
    const BYTES: &[u8] = b" 0123456789-+.e%\n\r\t\xffx";
    let (mut errors, mut accepted) = (0, 0);
    for (path, is_matrix) in [(&files.matrix, true), (&files.v, false)] {
        let good = std::fs::read(path).unwrap();
        for _ in 0..400 {
            let mut bytes = good.clone();
            for _ in 0..1 + rng.below(3) {
                let lines: Vec<usize> = std::iter::once(0)
                    .chain(
                        bytes
                            .iter()
                            .enumerate()
                            .filter(|b| *b.1 == b'\n')
                            .map(|b| b.0 + 1),
                    )
                    .filter(|&i| i < bytes.len())
                    .collect();
                match rng.below(4) {
                    0 if !bytes.is_empty() => {
                        let i = rng.below(bytes.len());
                        bytes[i] = BYTES[rng.below(BYTES.len())];
                    }
                    1 if lines.len() > 1 => {
                        let l = rng.below(lines.len() - 1);
                        bytes.drain(lines[l]..lines[l + 1]);
                    }
                    2 if lines.len() > 1 => {
                        let l = rng.below(lines.len() - 1);
                        let line = bytes[lines[l]..lines[l + 1]].to_vec();
                        bytes.splice(lines[l]..lines[l], line);
                    }
                    _ => bytes.truncate(rng.below(bytes.len() + 1)),
                }
            }
            // A new name each time: rewriting one file is slow on some file systems.
            let f = dir.path(&format!("damaged{}", errors + accepted));
            std::fs::write(&f, &bytes).unwrap();
            let r = if is_matrix {
                mondriaan::read_matrix(&f).map(|_| ())
            } else {
                mondriaan::read_vector(&f).map(|_| ())
            };
            match r {
                Ok(()) => accepted += 1,
                Err(e) => {
                    errors += 1;
                    let nlines = bytes.iter().filter(|&&b| b == b'\n').count() + 1;
                    let line = e.line().expect("a format error");
                    assert!((1..=nlines + 1).contains(&line), "{e}: {nlines} lines");
                }
            }
        }
    }
    // Most damage is detected (some is harmless, e.g. a changed digit in a value).
    assert!(errors > accepted, "{errors} errors, {accepted} accepted");
}
