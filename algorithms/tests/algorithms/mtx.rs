//! The Matrix Market reader and writer: every shared matrix against the data README's table;
//! small handwritten files for each field and symmetry, expansion, duplicates, pattern, complex,
//! 1x1, empty and rectangular matrices; the fast number parser against `str::parse`; one test
//! per kind of malformed input, checking the file, the line and the problem in the message;
//! write -> read round trips (plain and gzip). An ignored test times the largest matrix.

use crate::common;

use common::mix;

use mbsp_algorithms::sparse::CooMatrix;
use mbsp_algorithms::sparse::mtx::{
    self, Axis, Complex, Field, MtxError, MtxErrorKind, ReadOptions, Symmetry,
};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh path in the temp dir, unique per process and call; removed when dropped.
struct TempPath(PathBuf);

impl TempPath {
    fn new(suffix: &str) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let name = format!("mbsp-mtx-test-{}-{n}{suffix}", std::process::id());
        TempPath(std::env::temp_dir().join(name))
    }

    fn with(suffix: &str, bytes: &[u8]) -> Self {
        let t = TempPath::new(suffix);
        std::fs::write(&t.0, bytes).unwrap();
        t
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn parse(text: &str) -> Result<CooMatrix, MtxError> {
    mtx::read(text.as_bytes(), "test.mtx", &ReadOptions::default())
}

fn parse_real_part(text: &str) -> Result<CooMatrix, MtxError> {
    let opts = ReadOptions {
        complex: Complex::RealPart,
    };
    mtx::read(text.as_bytes(), "test.mtx", &opts)
}

/// (row, col, value) triplets, 0-based, in the matrix's order.
fn triplets(a: &CooMatrix) -> Vec<(u32, u32, f64)> {
    (0..a.nnz())
        .map(|k| (a.row_idx[k], a.col_idx[k], a.vals[k]))
        .collect()
}

/// Checks the sorted-no-duplicates promise and the index bounds.
fn assert_canonical(a: &CooMatrix) {
    a.validate().unwrap();
    for k in 1..a.nnz() {
        let prev = (a.row_idx[k - 1], a.col_idx[k - 1]);
        let cur = (a.row_idx[k], a.col_idx[k]);
        assert!(
            prev < cur,
            "entries {} and {k} out of order: {prev:?} {cur:?}",
            k - 1
        );
    }
}

/// The error of `text`, checking its message names the file and the line and contains every
/// word of `what`.
fn expect_err(text: &str, line: usize, what: &[&str]) -> MtxError {
    let e = parse(text).unwrap_err();
    check_msg(&e, "test.mtx", Some(line), what);
    e
}

fn check_msg(e: &MtxError, file: &str, line: Option<usize>, what: &[&str]) {
    let msg = e.to_string();
    assert_eq!(e.file(), file, "{msg}");
    assert_eq!(e.line(), line, "{msg}");
    assert!(msg.starts_with(file), "{msg}");
    if let Some(l) = line {
        assert!(
            msg.contains(&format!("line {l}:")),
            "message lacks 'line {l}': {msg}"
        );
    }
    for w in what {
        assert!(msg.contains(w), "message lacks '{w}': {msg}");
    }
}

// ---------------------------------------------------------------------------------------------
// The shared matrices.

#[test]
fn shared_matrices_match_the_readme_table() {
    let dir = &common::matrices_dir();
    assert!(dir.is_dir(), "{} does not exist", dir.display());
    // From shared/data/README.md: file, rows, cols, nnz of the full matrix.
    let table: [(&str, usize, usize, usize); 11] = [
        ("G3_circuit.mtx.gz", 1_585_478, 1_585_478, 7_660_826),
        ("mdual.mtx", 258_569, 258_569, 1_026_264),
        ("copter2.mtx", 55_476, 55_476, 704_476),
        ("Maragal_6.mtx.gz", 21_255, 10_152, 537_694),
        ("delaunay_n16.mtx", 65_536, 65_536, 393_150),
        ("bcsstk16.mtx", 4_884, 4_884, 290_378),
        ("wing.mtx", 62_032, 62_032, 243_088),
        ("luxembourg_osm.mtx", 114_599, 114_599, 239_332),
        ("wiki-Vote.mtx", 8_297, 8_297, 103_689),
        ("bayer10.mtx", 13_436, 13_436, 94_926),
        ("rajat01.mtx", 6_833, 6_833, 43_250),
    ];
    // Every matrix in the directory is in the table.
    let mut listed: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".mtx") || n.ends_with(".mtx.gz"))
        .collect();
    listed.sort();
    let mut known: Vec<String> = table.iter().map(|t| t.0.to_string()).collect();
    known.sort();
    assert_eq!(listed, known);

    for (file, rows, cols, nnz) in table {
        let path = dir.join(file);
        let a = mtx::read_path(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((a.rows, a.cols, a.nnz()), (rows, cols, nnz), "{file}");
        assert_canonical(&a);
        let h = mtx::read_header(&path).unwrap();
        assert_eq!((h.rows, h.cols), (rows, cols), "{file}");
        if h.symmetry == Symmetry::General {
            assert_eq!(h.entries, nnz, "{file}");
        }
        if h.field == Field::Pattern {
            assert!(a.vals.iter().all(|&v| v == 1.0), "{file}");
        }
    }
}

#[test]
fn shared_symmetric_matrices_are_symmetric() {
    for file in ["bcsstk16.mtx", "wing.mtx"] {
        let a = mtx::read_path(common::matrices_dir().join(file)).unwrap();
        let mut t: Vec<(u32, u32, u64)> = (0..a.nnz())
            .map(|k| (a.col_idx[k], a.row_idx[k], a.vals[k].to_bits()))
            .collect();
        t.sort_unstable();
        let s: Vec<(u32, u32, u64)> = (0..a.nnz())
            .map(|k| (a.row_idx[k], a.col_idx[k], a.vals[k].to_bits()))
            .collect();
        assert_eq!(s, t, "{file}");
    }
}

#[test]
fn shared_values_equal_str_parse() {
    // bayer10 has values such as ".01" and 16-digit mantissas (past the fast path).
    let path = common::matrices_dir().join("bayer10.mtx");
    let text = std::fs::read_to_string(&path).unwrap();
    let a = mtx::read_path(&path).unwrap();
    let mut expect: Vec<(u32, u32, f64)> = text
        .lines()
        .filter(|l| !l.starts_with('%'))
        .skip(1)
        .map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            let i: u32 = t[0].parse().unwrap();
            let j: u32 = t[1].parse().unwrap();
            (i - 1, j - 1, t[2].parse::<f64>().unwrap())
        })
        .collect();
    expect.sort_by_key(|e| (e.0, e.1));
    let got = triplets(&a);
    assert_eq!(got.len(), expect.len());
    for (g, e) in got.iter().zip(&expect) {
        assert_eq!((g.0, g.1, g.2.to_bits()), (e.0, e.1, e.2.to_bits()));
    }
}

// ---------------------------------------------------------------------------------------------
// Small handwritten files.

#[test]
fn real_general() {
    let a = parse(
        "%%MatrixMarket matrix coordinate real general\n\
         % comment\n\
         \n\
         3 3 4\n\
         3 1 -1.5\n\
         1 2 2e3\n\
         \n\
         % a comment among the entries\n\
         1 1 .25\n\
         2 3 7\n",
    )
    .unwrap();
    assert_eq!((a.rows, a.cols), (3, 3));
    assert_eq!(
        triplets(&a),
        vec![(0, 0, 0.25), (0, 1, 2000.0), (1, 2, 7.0), (2, 0, -1.5)]
    );
}

#[test]
fn banner_words_are_case_insensitive_and_crlf_is_accepted() {
    let a = parse(
        "%%MatrixMarket MATRIX Coordinate Real SYMMETRIC\r\n\
         2 2 2\r\n\
         1 1 1.0\r\n\
         2 1 3.0 \r\n",
    )
    .unwrap();
    assert_eq!(triplets(&a), vec![(0, 0, 1.0), (0, 1, 3.0), (1, 0, 3.0)]);
}

#[test]
fn no_newline_at_end_and_odd_spacing() {
    let a =
        parse("%%MatrixMarket matrix coordinate real general\n  2   2\t2  \n 1\t1   5\n2  2\t\t6")
            .unwrap();
    assert_eq!(triplets(&a), vec![(0, 0, 5.0), (1, 1, 6.0)]);
}

#[test]
fn integer_field() {
    let a = parse(
        "%%MatrixMarket matrix coordinate integer general\n2 2 3\n1 1 -3\n2 2 +4\n\
         1 2 123456789012345678901\n",
    )
    .unwrap();
    assert_eq!(
        triplets(&a),
        vec![(0, 0, -3.0), (0, 1, 123456789012345678901.0), (1, 1, 4.0)]
    );
}

#[test]
fn symmetric_expansion() {
    let a = parse(
        "%%MatrixMarket matrix coordinate real symmetric\n3 3 4\n\
         1 1 1\n2 1 2\n3 1 3\n3 3 9\n",
    )
    .unwrap();
    assert_eq!(
        triplets(&a),
        vec![
            (0, 0, 1.0),
            (0, 1, 2.0),
            (0, 2, 3.0),
            (1, 0, 2.0),
            (2, 0, 3.0),
            (2, 2, 9.0)
        ]
    );
}

#[test]
fn skew_symmetric_expansion() {
    let a = parse("%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 2\n3 2 -5\n")
        .unwrap();
    assert_eq!(
        triplets(&a),
        vec![(0, 1, -2.0), (1, 0, 2.0), (1, 2, 5.0), (2, 1, -5.0)]
    );
}

#[test]
fn hermitian_expansion_keeps_the_real_part() {
    let a = parse_real_part(
        "%%MatrixMarket matrix coordinate complex hermitian\n2 2 3\n1 1 4 0\n2 1 1.5 -2\n\
         2 2 5 0\n",
    )
    .unwrap();
    assert_eq!(
        triplets(&a),
        vec![(0, 0, 4.0), (0, 1, 1.5), (1, 0, 1.5), (1, 1, 5.0)]
    );
    // A real hermitian matrix is symmetric.
    let b = parse("%%MatrixMarket matrix coordinate real hermitian\n2 2 1\n2 1 7\n").unwrap();
    assert_eq!(triplets(&b), vec![(0, 1, 7.0), (1, 0, 7.0)]);
}

#[test]
fn pattern_general_and_symmetric() {
    let a = parse("%%MatrixMarket matrix coordinate pattern general\n2 3 2\n2 3\n1 1\n").unwrap();
    assert_eq!((a.rows, a.cols), (2, 3));
    assert_eq!(triplets(&a), vec![(0, 0, 1.0), (1, 2, 1.0)]);
    let b = parse("%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n3 1\n2 2\n").unwrap();
    assert_eq!(triplets(&b), vec![(0, 2, 1.0), (1, 1, 1.0), (2, 0, 1.0)]);
}

#[test]
fn complex_is_refused_by_default_and_real_part_read_on_request() {
    let text = "%%MatrixMarket matrix coordinate complex general\n2 2 2\n1 2 1.5 2.5\n\
                2 1 -1 0\n";
    let e = expect_err(text, 1, &["complex", "Complex::RealPart"]);
    assert!(matches!(e.kind(), MtxErrorKind::ComplexRefused));
    let a = parse_real_part(text).unwrap();
    assert_eq!(triplets(&a), vec![(0, 1, 1.5), (1, 0, -1.0)]);
}

#[test]
fn duplicates_are_summed_in_file_order() {
    let a = parse(
        "%%MatrixMarket matrix coordinate real general\n2 2 5\n\
         2 2 1\n1 1 1e16\n2 2 2\n1 1 1\n1 1 -1e16\n",
    )
    .unwrap();
    // File order: (1e16 + 1) + -1e16 = 0 in f64 (1e16 + 1 rounds to 1e16).
    assert_eq!(triplets(&a), vec![(0, 0, 0.0), (1, 1, 3.0)]);
    // Duplicates created by the expansion: (1,2) stored as is and mirrored from (2,1).
    let b = parse("%%MatrixMarket matrix coordinate pattern symmetric\n2 2 3\n2 1\n1 2\n2 1\n")
        .unwrap();
    assert_eq!(triplets(&b), vec![(0, 1, 3.0), (1, 0, 3.0)]);
}

#[test]
fn unsorted_rows_come_back_sorted() {
    // Many entries in reverse order, with duplicates, to exercise the in-row sort.
    let n = 50u64;
    let mut text = format!(
        "%%MatrixMarket matrix coordinate integer general\n{n} {n} {}\n",
        2 * n * n
    );
    for rep in 0..2 {
        for i in (1..=n).rev() {
            for j in (1..=n).rev() {
                text += &format!("{i} {j} {}\n", i * 1000 + j + rep);
            }
        }
    }
    let a = parse(&text).unwrap();
    assert_canonical(&a);
    assert_eq!(a.nnz(), (n * n) as usize);
    for (i, j, v) in triplets(&a) {
        let (i, j) = (u64::from(i) + 1, u64::from(j) + 1);
        assert_eq!(v, (2 * (i * 1000 + j) + 1) as f64);
    }
}

#[test]
fn one_by_one_empty_and_rectangular() {
    let a = parse("%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 42\n").unwrap();
    assert_eq!((a.rows, a.cols, triplets(&a)), (1, 1, vec![(0, 0, 42.0)]));

    let e = parse("%%MatrixMarket matrix coordinate real general\n4 5 0\n").unwrap();
    assert_eq!((e.rows, e.cols, e.nnz()), (4, 5, 0));
    let z = parse("%%MatrixMarket matrix coordinate real symmetric\n0 0 0").unwrap();
    assert_eq!((z.rows, z.cols, z.nnz()), (0, 0, 0));

    let r = parse("%%MatrixMarket matrix coordinate real general\n2 5 3\n2 5 1\n1 4 2\n2 1 3\n")
        .unwrap();
    assert_eq!((r.rows, r.cols), (2, 5));
    assert_eq!(triplets(&r), vec![(0, 3, 2.0), (1, 0, 3.0), (1, 4, 1.0)]);
    let tall = parse("%%MatrixMarket matrix coordinate pattern general\n5 1 1\n5 1\n").unwrap();
    assert_eq!(
        (tall.rows, tall.cols, triplets(&tall)),
        (5, 1, vec![(4, 0, 1.0)])
    );
}

#[test]
fn huge_row_count_with_few_entries() {
    // Far more rows than entries takes the sort-based assembly path; same result.
    let a = parse(
        "%%MatrixMarket matrix coordinate real symmetric\n4000000000 4000000000 3\n\
         3999999999 1 1\n2 2 2\n3999999999 1 0.5\n",
    )
    .unwrap();
    assert_eq!(
        triplets(&a),
        vec![(0, 3999999998, 1.5), (1, 1, 2.0), (3999999998, 0, 1.5)]
    );
}

#[test]
fn values_equal_str_parse() {
    // Tokens at and past the edges of the fast path (19 significant digits, 2^53, 10^±22),
    // signs, zeros, leading zeros, exponent forms and what only the slow path reads.
    let mut tokens: Vec<String> = [
        "0",
        "-0",
        "+0",
        "0.0",
        "-0.0",
        "0e0",
        "0e-400",
        "1",
        "-1",
        "+1.5",
        "1.",
        ".5",
        "-.5",
        "+.5",
        "00012.5000",
        "0.000001",
        "1e22",
        "1e23",
        "1e-22",
        "1e-23",
        "9007199254740992",
        "9007199254740993",
        "9007199254740991",
        "900719925474099.3",
        "1234567890123456789",
        "12345678901234567890",
        "0.1",
        "0.2",
        "0.3",
        "2.2250738585072014e-308",
        "4.9406564584124654e-324",
        "1.7976931348623157e308",
        "1e308",
        "1e309",
        "1E5",
        "1e+5",
        "1e-5",
        "1.5e-0",
        "123.456e-7",
        "-1.797693134862315708145e308",
        "inf",
        "-inf",
        "NaN",
        "infinity",
        "2.54843",
        "-0.548426",
        "3.14159265358979323846264338327950288",
        "0.30000000000000004",
        "1e0000",
        "1e-0022",
        "5e-324",
        "17976931348623157e292",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // Random short decimals, the kind real files hold.
    let mut x = 1u64;
    for _ in 0..20_000 {
        x = mix(x);
        let digits = 1 + (x % 19) as usize;
        let mant = mix(x) % 10u64.pow(digits as u32);
        let point = (x >> 20) as usize % (digits + 1);
        let mut s = format!("{mant:0digits$}");
        s.insert(digits - point, '.');
        if x & (1 << 40) != 0 {
            s.insert(0, '-');
        }
        if x & (1 << 41) != 0 {
            s += &format!("e{}", ((x >> 42) % 61) as i64 - 30);
        }
        tokens.push(s);
    }
    let n = tokens.len();
    let mut text = format!("%%MatrixMarket matrix coordinate real general\n{n} 1 {n}\n");
    for (k, t) in tokens.iter().enumerate() {
        text += &format!("{} 1 {t}\n", k + 1);
    }
    let a = parse(&text).unwrap();
    assert_eq!(a.nnz(), n);
    for (k, t) in tokens.iter().enumerate() {
        let want = t.parse::<f64>().unwrap();
        assert_eq!(
            a.vals[k].to_bits(),
            want.to_bits(),
            "token {t}: got {:?}, str::parse gives {want:?}",
            a.vals[k]
        );
    }
}

#[test]
fn gzip_input_by_name_and_by_magic() {
    let text = b"%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1.5\n2 2 2.5\n";
    let gz = gzip(text);
    let by_name = TempPath::with(".mtx.gz", &gz);
    let by_magic = TempPath::with(".mtx", &gz);
    let plain = mtx::read(&text[..], "x", &ReadOptions::default()).unwrap();
    assert_eq!(mtx::read_path(&by_name.0).unwrap(), plain);
    assert_eq!(mtx::read_path(&by_magic.0).unwrap(), plain);
    assert_eq!(
        mtx::read(&gz[..], "x", &ReadOptions::default()).unwrap(),
        plain
    );
    // Concatenated gzip members are one gzip file.
    let mut two = gzip(&text[..60]);
    two.extend(gzip(&text[60..]));
    assert_eq!(
        mtx::read(&two[..], "x", &ReadOptions::default()).unwrap(),
        plain
    );
}

#[test]
fn large_input_spanning_many_blocks_is_deterministic() {
    // Several MiB with comments, duplicates and a symmetric expansion: the blocks are parsed
    // in parallel, the result must not depend on which finished first.
    let n = 3000u64;
    let entries = 300_000u64;
    let mut text = format!("%%MatrixMarket matrix coordinate real symmetric\n{n} {n} {entries}\n");
    let mut x = 7;
    for k in 0..entries {
        x = mix(x);
        let i = 1 + x % n;
        let j = 1 + (x >> 32) % i;
        text += &format!("{i} {j} {}.{:03}\n", x % 1000, k % 1000);
        if k % 50_000 == 0 {
            text += "% a comment line\n\n";
        }
    }
    let a = parse(&text).unwrap();
    assert_canonical(&a);
    for _ in 0..3 {
        assert_eq!(parse(&text).unwrap(), a);
    }
    // Line numbers stay right across blocks: break the last entry.
    let cut = text.trim_end().rfind('\n').unwrap();
    let bad = format!("{}\n1 1 x\n", &text[..cut]);
    let lines = bad.lines().count();
    expect_err(&bad, lines, &["value 'x' is not a number"]);
}

// ---------------------------------------------------------------------------------------------
// Malformed inputs.

#[test]
fn bad_banner() {
    expect_err(
        "1 1 1\n1 1 1\n",
        1,
        &["not a Matrix Market file", "'1 1 1'"],
    );
    expect_err("", 1, &["empty"]);
    expect_err(
        "%%MatrixMarket matrix coordinate real\n1 1 0\n",
        1,
        &["banner", "4 words"],
    );
    expect_err(
        "%%MatrixMarket matrix coordinate double general\n1 1 0\n",
        1,
        &["unknown field 'double'"],
    );
    expect_err(
        "%%MatrixMarket matrix coordinate real lower\n1 1 0\n",
        1,
        &["unknown symmetry 'lower'"],
    );
    expect_err(
        "%%MatrixMarket matrix coordinate pattern skew-symmetric\n1 1 0\n",
        1,
        &["pattern", "skew-symmetric"],
    );
    let e = expect_err(
        "%%MatrixMarket matrix sparse real general\n1 1 0\n",
        1,
        &["unknown format 'sparse'"],
    );
    assert!(matches!(e.kind(), MtxErrorKind::Banner(_)));
}

#[test]
fn unsupported_format() {
    let e = expect_err(
        "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n",
        1,
        &["dense array format is not supported"],
    );
    assert!(matches!(e.kind(), MtxErrorKind::Unsupported(_)));
    expect_err(
        "%%MatrixMarket vector coordinate real general\n2 1\n1 1\n",
        1,
        &["'vector' is not supported"],
    );
}

#[test]
fn bad_size_line() {
    let b = "%%MatrixMarket matrix coordinate real general\n% c\n";
    expect_err(&format!("{b}3 3\n"), 3, &["bad size line", "'3 3'"]);
    expect_err(&format!("{b}3 3 2 1\n"), 3, &["bad size line"]);
    expect_err(&format!("{b}3 x 2\n"), 3, &["bad size line", "'3 x 2'"]);
    expect_err(&format!("{b}3 -3 2\n"), 3, &["bad size line"]);
    expect_err(
        &format!("{b}\n% only comments\n"),
        4,
        &["ends before the size line"],
    );
    expect_err(
        &format!("{b}4294967296 2 0\n"),
        3,
        &["4294967296 x 2", "too large for u32 indices"],
    );
    expect_err(
        "%%MatrixMarket matrix coordinate real symmetric\n3 4 0\n",
        2,
        &["symmetric matrix must be square", "3 x 4"],
    );
    // u32::MAX rows are allowed (0-based indices up to u32::MAX - 1).
    let a = parse(&format!("{b}4294967295 1 1\n4294967295 1 1\n")).unwrap();
    assert_eq!(triplets(&a), vec![(u32::MAX - 1, 0, 1.0)]);
}

#[test]
fn index_zero() {
    let b = "%%MatrixMarket matrix coordinate real general\n3 4 2\n1 1 1\n";
    let e = expect_err(
        &format!("{b}0 2 1\n"),
        4,
        &["row index 0 is out of range", "1-based", "3 rows"],
    );
    assert!(matches!(
        e.kind(),
        MtxErrorKind::IndexOutOfRange {
            axis: Axis::Row,
            index: 0,
            bound: 3
        }
    ));
    expect_err(
        &format!("{b}2 0 1\n"),
        4,
        &["column index 0 is out of range", "4 columns"],
    );
}

#[test]
fn index_too_large() {
    let b = "%%MatrixMarket matrix coordinate pattern general\n3 4 2\n1 1\n";
    expect_err(
        &format!("{b}4 1\n"),
        4,
        &["row index 4 is out of range", "3 rows"],
    );
    expect_err(
        &format!("{b}3 5\n"),
        4,
        &["column index 5 is out of range", "4 columns"],
    );
    expect_err(
        &format!("{b}99999999999999999999999 1\n"),
        4,
        &["row index '99999999999999999999999' is not a positive integer"],
    );
    expect_err(&format!("{b}1 -2\n"), 4, &["column index '-2'"]);
}

#[test]
fn too_few_entries() {
    let e = expect_err(
        "%%MatrixMarket matrix coordinate real general\n3 3 3\n1 1 1\n2 2 2\n% end\n",
        5,
        &["ends after 2 entries", "declares 3"],
    );
    assert!(matches!(
        e.kind(),
        MtxErrorKind::TooFewEntries {
            declared: 3,
            found: 2
        }
    ));
    expect_err(
        "%%MatrixMarket matrix coordinate real general\n3 3 1\n",
        2,
        &["ends after 0 entries", "declares 1"],
    );
}

#[test]
fn too_many_entries() {
    let e = expect_err(
        "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n% c\n\n2 2 2\n3 3 3\n\
         1 2 4\n",
        7,
        &["more entries than the 2"],
    );
    assert!(matches!(
        e.kind(),
        MtxErrorKind::TooManyEntries { declared: 2 }
    ));
    expect_err(
        "%%MatrixMarket matrix coordinate real general\n3 3 0\n1 1 1\n",
        3,
        &["more entries than the 0"],
    );
}

#[test]
fn non_numeric_value() {
    let b = "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n";
    let e = expect_err(
        &format!("{b}2 2 abc\n"),
        4,
        &["value 'abc' is not a number"],
    );
    assert!(matches!(e.kind(), MtxErrorKind::BadValue { .. }));
    expect_err(&format!("{b}2 2 1.5.2\n"), 4, &["'1.5.2'"]);
    expect_err(&format!("{b}2 2 1e\n"), 4, &["'1e'"]);
    expect_err(
        &format!("{b}x 2 1\n"),
        4,
        &["row index 'x' is not a positive integer"],
    );
    expect_err(
        "%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 1.5\n",
        3,
        &["value '1.5' is not an integer"],
    );
    let e = parse_real_part("%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1.5 i\n")
        .unwrap_err();
    check_msg(&e, "test.mtx", Some(3), &["value 'i' is not a number"]);
}

#[test]
fn missing_value_and_wrong_field_count() {
    let b = "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n";
    let e = expect_err(
        &format!("{b}2 2\n"),
        4,
        &["expected 3 fields (row column value) in a real matrix, found 2"],
    );
    assert!(matches!(
        e.kind(),
        MtxErrorKind::FieldCount {
            expected: 3,
            found: 2,
            field: Field::Real
        }
    ));
    expect_err(
        &format!("{b}2 2 1 1\n"),
        4,
        &["expected 3 fields", "found 4"],
    );
    expect_err(
        "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1 1\n",
        3,
        &["expected 2 fields (row column) in a pattern matrix, found 3"],
    );
    parse_real_part("%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1\n")
        .map(|_| ())
        .map_err(|e| check_msg(&e, "test.mtx", Some(3), &["expected 4 fields", "found 3"]))
        .unwrap_err();
}

#[test]
fn skew_diagonal() {
    let e = expect_err(
        "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 1\n2 2 1\n",
        4,
        &["diagonal entry (2, 2)", "skew-symmetric"],
    );
    assert!(matches!(e.kind(), MtxErrorKind::SkewDiagonal { index: 2 }));
}

#[test]
fn first_error_in_the_file_is_reported() {
    // Two bad lines: the earlier one is reported, also when they are in different blocks.
    let mut text = String::from("%%MatrixMarket matrix coordinate real general\n10 10 200000\n");
    for k in 0..200_000 {
        text += &format!("{} {} 1.0\n", 1 + k % 10, 1 + k / 10 % 10);
    }
    let lines: Vec<&str> = text.lines().collect();
    let mut bad: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
    bad[150_000] = "1 11 1.0".into();
    bad[10_000] = "1 1 y".into();
    let joined = bad.join("\n");
    expect_err(&joined, 10_001, &["value 'y'"]);
    bad[10_000] = "1 1 1.0".into();
    expect_err(&bad.join("\n"), 150_001, &["column index 11"]);
}

#[test]
fn truncated_gz() {
    let mut text =
        String::from("%%MatrixMarket matrix coordinate real general\n1000 1000 100000\n");
    let mut x = 3;
    for _ in 0..100_000 {
        x = mix(x);
        text += &format!(
            "{} {} {}\n",
            1 + x % 1000,
            1 + (x >> 20) % 1000,
            (x >> 40) as f64 / 7.0
        );
    }
    let gz = gzip(text.as_bytes());
    let whole = TempPath::with(".mtx.gz", &gz);
    assert_eq!(
        mtx::read_path(&whole.0).unwrap().nnz(),
        100_000 - duplicates(&text)
    );
    for cut in [gz.len() / 2, gz.len() - 4, 30] {
        let t = TempPath::with(".mtx.gz", &gz[..cut]);
        let e = mtx::read_path(&t.0).unwrap_err();
        let name = t.0.display().to_string();
        check_msg(&e, &name, e.line(), &["gzip data is corrupt or truncated"]);
        assert!(matches!(e.kind(), MtxErrorKind::Gzip(_)), "{e}");
        // The complete lines before the cut are read: the error is at the first line that
        // could not be, which lies in the part of the text the cut gzip still holds.
        let line = e.line().unwrap();
        let text_lines = text.lines().count();
        match cut {
            30 => assert_eq!(line, 1, "{e}"),
            c if c == gz.len() / 2 => {
                assert!(line > text_lines / 4 && line < text_lines, "{e}")
            }
            _ => assert!(line > text_lines * 9 / 10 && line <= text_lines + 1, "{e}"),
        }
        assert!(std::error::Error::source(&e).is_some());
    }
    // Corrupt bytes in the middle.
    let mut bad = gz.clone();
    let mid = bad.len() / 2;
    for b in &mut bad[mid..mid + 64] {
        *b ^= 0x5a;
    }
    let t = TempPath::with(".mtx.gz", &bad);
    let e = mtx::read_path(&t.0).unwrap_err();
    assert!(
        matches!(e.kind(), MtxErrorKind::Gzip(_)) || e.line().is_some(),
        "{e}"
    );
    assert!(e.to_string().starts_with(&t.0.display().to_string()), "{e}");
    // A .gz name on a file that is not gzip.
    let t = TempPath::with(".mtx.gz", text.as_bytes());
    let e = mtx::read_path(&t.0).unwrap_err();
    check_msg(
        &e,
        &t.0.display().to_string(),
        Some(1),
        &["gzip data is corrupt or truncated"],
    );
}

/// Number of entry lines of a general file that repeat an earlier position.
fn duplicates(text: &str) -> usize {
    let mut seen = std::collections::HashSet::new();
    text.lines()
        .skip(2)
        .filter(|l| {
            let t: Vec<&str> = l.split_whitespace().take(2).collect();
            !seen.insert((t[0].to_string(), t[1].to_string()))
        })
        .count()
}

#[test]
fn nonexistent_file() {
    let t = TempPath::new(".mtx");
    let e = mtx::read_path(&t.0).unwrap_err();
    let name = t.0.display().to_string();
    check_msg(&e, &name, None, &["I/O error"]);
    assert!(matches!(e.kind(), MtxErrorKind::Io(io) if io.kind() == std::io::ErrorKind::NotFound));
    assert!(mtx::read_header(&t.0).is_err());
}

// ---------------------------------------------------------------------------------------------
// Writing.

#[test]
fn write_read_round_trip() {
    let entries = vec![
        (2, 1, 1.0),
        (0, 0, -0.0),
        (1, 3, 0.1),
        (2, 1, 2.0), // duplicate: read back summed
        (0, 3, 1e300),
        (1, 0, -5e-324), // the smallest subnormal
        (2, 2, f64::INFINITY),
        (0, 1, 123_456.789_012_345_67),
        (1, 1, f64::MIN_POSITIVE),
    ];
    let a = CooMatrix::new(3, 4, entries.clone()).unwrap();
    let mut sorted = entries.clone();
    sorted.sort_by_key(|e| (e.0, e.1));
    sorted.dedup_by(|b, a| {
        if (a.0, a.1) == (b.0, b.1) {
            a.2 += b.2;
            true
        } else {
            false
        }
    });
    let expect = CooMatrix::new(3, 4, sorted).unwrap();
    for suffix in [".mtx", ".mtx.gz"] {
        let t = TempPath::new(suffix);
        mtx::write_path(&a, &t.0).unwrap();
        let b = mtx::read_path(&t.0).unwrap();
        assert_eq!(b.rows, 3);
        assert_eq!(
            triplets(&b)
                .iter()
                .map(|e| (e.0, e.1, e.2.to_bits()))
                .collect::<Vec<_>>(),
            triplets(&expect)
                .iter()
                .map(|e| (e.0, e.1, e.2.to_bits()))
                .collect::<Vec<_>>(),
            "{suffix}"
        );
    }
    // NaN survives too (compared by bits).
    let n = CooMatrix::new(1, 1, vec![(0, 0, f64::NAN)]).unwrap();
    let mut out = Vec::new();
    mtx::write(&n, &mut out).unwrap();
    let back = mtx::read(&out[..], "nan", &ReadOptions::default()).unwrap();
    assert!(back.vals[0].is_nan());
}

#[test]
fn write_read_round_trip_of_a_shared_matrix() {
    let a = mtx::read_path(common::matrices_dir().join("bcsstk16.mtx")).unwrap();
    let mut out = Vec::new();
    mtx::write(&a, &mut out).unwrap();
    let b = mtx::read(&out[..], "copy", &ReadOptions::default()).unwrap();
    assert_eq!(a, b);
    // Empty matrix.
    let e = CooMatrix::new(0, 7, vec![]).unwrap();
    let mut out = Vec::new();
    mtx::write(&e, &mut out).unwrap();
    assert_eq!(
        mtx::read(&out[..], "e", &ReadOptions::default()).unwrap(),
        e
    );
}

#[test]
fn write_rejects_an_inconsistent_matrix() {
    let mut a = CooMatrix::new(2, 2, vec![(0, 0, 1.0)]).unwrap();
    a.row_idx[0] = 5;
    let e = mtx::write(&a, Vec::new()).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
}

// ---------------------------------------------------------------------------------------------
// Timing (release build): cargo test --release -p mbsp-algorithms --test algorithms mtx:: --
// --ignored --nocapture

#[test]
#[ignore = "timing; run in release"]
fn time_g3_circuit() {
    let path = common::matrices_dir().join("G3_circuit.mtx.gz");
    // The floor: decompressing alone, on one thread.
    let t = std::time::Instant::now();
    let file = std::io::BufReader::new(std::fs::File::open(&path).unwrap());
    let mut text = Vec::new();
    flate2::bufread::MultiGzDecoder::new(file)
        .read_to_end(&mut text)
        .unwrap();
    println!(
        "decompressing alone ({} bytes): {:.3} s",
        text.len(),
        t.elapsed().as_secs_f64()
    );
    // Parsing and assembling alone, from memory.
    for run in 0..3 {
        let t = std::time::Instant::now();
        let a = mtx::read(&text[..], "G3", &ReadOptions::default()).unwrap();
        let s = t.elapsed().as_secs_f64();
        assert_eq!(a.nnz(), 7_660_826);
        println!("G3_circuit from memory run {run}: {s:.3} s");
    }
    for run in 0..3 {
        let t = std::time::Instant::now();
        let a = mtx::read_path(&path).unwrap();
        let s = t.elapsed().as_secs_f64();
        assert_eq!(a.nnz(), 7_660_826);
        println!("G3_circuit.mtx.gz run {run}: {s:.3} s");
    }
}
