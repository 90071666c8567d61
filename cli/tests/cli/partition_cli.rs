//! `mbsp partition` as a user runs it: JSON shape, the Mondriaan files, bad arguments.

use crate::common;

use serde_json::Value;
use std::path::{Path, PathBuf};

fn shared_matrix(name: &str) -> PathBuf {
    common::matrix(name)
}

/// A 5 x 6 general matrix with 12 nonzeros, two of them in row 3.
const SMALL: &str = "%%MatrixMarket matrix coordinate real general
% a comment line
5 6 12
1 1 1.0
1 4 2.0
2 2 3.0
2 6 -1.5
3 1 4.0
3 3 5.0
3 5 6.0
4 2 7.0
4 4 8.0
5 3 9.0
5 5 1e1
5 6 11
";

/// The first line of `path` that is not a comment.
fn header(path: &str) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .find(|l| !l.starts_with('%'))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Runs `mbsp partition ... --json` and checks what every run must have.
fn partition_json(args: &[&str], m: usize, n: usize, nnz: usize, p: usize) -> Value {
    let (code, out, err) = common::mbsp(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    let j: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("JSON: {e}: {out}"));
    for key in [
        "volume",
        "imbalance",
        "max_h",
        "seconds",
        "p",
        "nnz",
        "m",
        "n",
        "files",
    ] {
        assert!(j.get(key).is_some(), "{args:?}: no {key} in {out}");
    }
    assert_eq!(j["nnz"], nnz);
    assert_eq!(j["p"], p);
    assert_eq!((j["m"].clone(), j["n"].clone()), (m.into(), n.into()));
    assert!(j["imbalance"].as_f64().unwrap() >= 0.0);
    for f in ["matrix", "u", "v"] {
        let path = j["files"][f].as_str().expect("file path");
        assert!(Path::new(path).is_file(), "{path} not written");
    }
    // Mondriaan's distributed-matrix file: after the banner, "m n nnz p".
    let matrix_file = j["files"]["matrix"].as_str().unwrap();
    assert_eq!(header(matrix_file), format!("{m} {n} {nnz} {p}"));
    // The progress went to stderr, not into the JSON.
    assert!(err.contains("partitioning"), "{err}");
    j
}

#[test]
fn small_matrix_files_next_to_the_input() {
    let dir = common::scratch("partition_cli", "small");
    let file = dir.join("small.mtx");
    std::fs::write(&file, SMALL).unwrap();
    let f = file.to_str().unwrap();
    let j = partition_json(&["partition", f, "-p", "3", "--json"], 5, 6, 12, 3);
    // The default prefix is the input path itself.
    assert_eq!(j["files"]["matrix"], format!("{f}-P3"));
    assert_eq!(j["files"]["u"], format!("{f}-u3"));
    assert_eq!(j["files"]["v"], format!("{f}-v3"));
    // p = 1 and p > rows are fine too.
    partition_json(&["partition", f, "-p", "1", "--json"], 5, 6, 12, 1);
    partition_json(&["partition", f, "-p", "7", "--json"], 5, 6, 12, 7);
}

#[test]
fn rajat01_with_an_output_prefix() {
    let dir = common::scratch("partition_cli", "rajat01");
    let prefix = dir.join("out");
    let (m, f) = (shared_matrix("rajat01.mtx"), prefix.to_str().unwrap());
    let j = partition_json(
        &[
            "partition",
            m.to_str().unwrap(),
            "-p",
            "4",
            "--out",
            f,
            "--json",
        ],
        6833,
        6833,
        43250,
        4,
    );
    assert_eq!(j["files"]["matrix"], format!("{f}-P4"));
    assert!(j["volume"].as_u64().is_some());
}

#[test]
fn text_output_names_everything() {
    let dir = common::scratch("partition_cli", "text");
    let file = dir.join("small.mtx");
    std::fs::write(&file, SMALL).unwrap();
    let (code, out, err) = common::mbsp(&["partition", file.to_str().unwrap(), "-p", "2"]);
    assert_eq!(code, 0, "{err}");
    for word in [
        "small",
        "nnz = 12",
        "volume",
        "imbalance",
        "max_h",
        "small.mtx-P2",
    ] {
        assert!(out.contains(word), "no {word} in {out}");
    }
}

#[test]
fn bad_arguments_exit_2_and_bad_files_3_with_one_line() {
    let dir = common::scratch("partition_cli", "bad");
    let good = dir.join("good.mtx");
    std::fs::write(&good, SMALL).unwrap();
    let bad = dir.join("bad.mtx");
    std::fs::write(
        &bad,
        "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.0\n2 x 2.0\n",
    )
    .unwrap();
    let (good, bad) = (good.to_str().unwrap(), bad.to_str().unwrap());
    let missing = dir.join("no-such.mtx");
    let missing = missing.to_str().unwrap();
    // Bad arguments: status 2; an input file that cannot be read or is malformed, or an output
    // that cannot be written: status 3.
    let cases: [(&[&str], &[&str], i32); 7] = [
        (&["partition", good, "-p", "0"], &["-p 0"], 2),
        (&["partition", good, "-p", "two"], &["-p two"], 2),
        (
            &["partition", good, "-p", "2", "--eps", "-1"],
            &["--eps -1"],
            2,
        ),
        (
            &["partition", good, "-p", "2", "--eps", "abc"],
            &["--eps abc"],
            2,
        ),
        (&["partition", missing, "-p", "2"], &["no-such.mtx"], 3),
        // The reader's message names the file and the bad line (line 4).
        (&["partition", bad, "-p", "2"], &["bad.mtx", "line 4"], 3),
        (
            &["partition", good, "-p", "2", "--out", "/no/such/dir/x"],
            &["/no/such/dir"],
            3,
        ),
    ];
    for (args, needles, status) in cases {
        let (code, out, err) = common::mbsp(args);
        assert_eq!(code, status, "{args:?}: {out} {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("mbsp partition: "), "{args:?}: {err}");
        for needle in needles {
            assert!(err.contains(needle), "{args:?}: no {needle} in {err}");
        }
        assert!(out.is_empty(), "{args:?}: {out}");
    }
    // Nothing was left behind by the failed runs.
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "good.mtx" && n != "bad.mtx")
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Input that is not text (`/dev/zero`, control bytes, in the content or in the file name) is
/// one line on stderr, with every control character escaped, after a bounded read.
#[test]
fn hostile_input_is_one_clean_line() {
    let dir = common::scratch("partition_cli", "hostile");
    let ctrl = dir.join("a\u{1b}[2Jb.mtx");
    std::fs::write(&ctrl, b"hello\x01\x1b[31mred\n").unwrap();
    let ctrl = ctrl.to_str().unwrap();
    for (args, needles) in [
        (
            ["partition", "/dev/zero", "-p", "2"],
            [r"not a Matrix Market file", r"\u{0}\u{0}"],
        ),
        (
            ["partition", ctrl, "-p", "2"],
            [r"a\u{1b}[2Jb.mtx", r"hello\u{1}\u{1b}[31mred"],
        ),
    ] {
        // A malformed input file: status 3.
        let (code, out, err) = common::mbsp(&args);
        assert_eq!(code, 3, "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(
            !err.trim_end().chars().any(char::is_control),
            "{args:?}: raw control characters in {err:?}"
        );
        for needle in needles {
            assert!(err.contains(needle), "{args:?}: no {needle} in {err}");
        }
        assert!(out.is_empty());
    }
}

#[test]
fn quality_setting_is_reported_and_never_worse() {
    // A 30 x 30 grid's 5-point Laplacian, as a Matrix Market file.
    let k: usize = 30;
    let mut lines = Vec::new();
    for x in 0..k {
        for y in 0..k {
            let i = x * k + y;
            lines.push(format!("{} {} 4", i + 1, i + 1));
            for (nx, ny) in [
                (x.wrapping_sub(1), y),
                (x + 1, y),
                (x, y.wrapping_sub(1)),
                (x, y + 1),
            ] {
                if nx < k && ny < k {
                    lines.push(format!("{} {} -1", i + 1, nx * k + ny + 1));
                }
            }
        }
    }
    let dir = common::scratch("partition_cli", "quality");
    let file = dir.join("grid.mtx");
    let text = format!(
        "%%MatrixMarket matrix coordinate real general\n{n} {n} {}\n{}\n",
        lines.len(),
        lines.join("\n"),
        n = k * k
    );
    std::fs::write(&file, text).unwrap();
    let f = file.to_str().unwrap();
    let nnz = lines.len();
    let fast = partition_json(&["partition", f, "-p", "4", "--json"], k * k, k * k, nnz, 4);
    let good = partition_json(
        &["partition", f, "-p", "4", "--quality", "--json"],
        k * k,
        k * k,
        nnz,
        4,
    );
    assert_eq!(fast["quality"], false);
    assert_eq!(good["quality"], true);
    assert!(good["imbalance"].as_f64().unwrap() <= 0.03);
    assert!(
        good["volume"].as_u64() <= fast["volume"].as_u64(),
        "{good} vs {fast}"
    );
}
