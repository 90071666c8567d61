//! Requests that cannot fit in memory are refused before any work, with one line naming the
//! numbers and the limit and exit status 2: no allocator abort (134), no capacity panic (101),
//! no output file. Requests that fit are not refused (the other test files run them).

use crate::common;

use std::process::Command;

/// Runs `mbsp args` and checks the refusal: status 2, one line, the memory needed and where
/// the limit comes from; returns the line.
fn refused(args: &[&str], needles: &[&str]) -> String {
    let (code, out, err) = common::mbsp(args);
    assert_eq!(code, 2, "{args:?}: {err}");
    assert!(out.is_empty(), "{args:?}: {out}");
    let line = err.trim_end();
    assert_eq!(line.lines().count(), 1, "{args:?}: {err}");
    for needle in ["needs at least", "of memory", "available ("]
        .iter()
        .chain(needles)
    {
        assert!(line.contains(needle), "{args:?}: no {needle} in {line}");
    }
    line.to_string()
}

#[test]
fn an_fft_too_long_for_the_machine_is_refused() {
    // 2^40 complex numbers are 17.6 TB an array; the command holds five.
    let line = refused(
        &["fft", "--n", "1099511627776"],
        &["--n 1099511627776", "88.0 TB"],
    );
    assert!(line.starts_with("mbsp fft: "), "{line}");
    // 2^63: a capacity panic before.
    refused(&["fft", "--n", "9223372036854775808"], &["738 EB"]);
    refused(
        &["fft", "--n", "1024", "--reps", "1000000000000000000"],
        &["--reps"],
    );
}

#[test]
fn a_billion_parts_or_processes_are_refused() {
    let dir = common::scratch("preflight_cli", "parts");
    let m = common::matrix("rajat01.mtx");
    let out = dir.join("out");
    refused(
        &[
            "partition",
            m.to_str().unwrap(),
            "-p",
            "1000000000",
            "--out",
            out.to_str().unwrap(),
        ],
        &["-p 1000000000 parts"],
    );
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "files written");
    refused(
        &["spmv", m.to_str().unwrap(), "-p", "1000000000"],
        &["-p 1000000000 processes"],
    );
}

#[test]
fn a_header_promising_a_huge_matrix_is_refused_or_disbelieved() {
    let dir = common::scratch("preflight_cli", "header");
    let huge = dir.join("huge.mtx");
    std::fs::write(
        &huge,
        "%%MatrixMarket matrix coordinate real general\n4000000000 4000000000 1\n1 1 1.0\n",
    )
    .unwrap();
    let huge = huge.to_str().unwrap();
    refused(
        &["partition", huge, "-p", "2"],
        &["4000000000 rows and 4000000000 columns"],
    );
    refused(&["spmv", huge, "-p", "2"], &["4000000000 rows"]);
    // A header promising 10^12 entries in a file of three lines is not a memory problem but
    // a short file: the reader says so (the file's size bounds the entries it can hold).
    let lying = dir.join("lying.mtx");
    std::fs::write(
        &lying,
        "%%MatrixMarket matrix coordinate real general\n10 10 1000000000000\n1 1 1.0\n",
    )
    .unwrap();
    let (code, _, err) = common::mbsp(&["partition", lying.to_str().unwrap(), "-p", "2"]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("the file ends after 1 entry, but the size line declares 1000000000000"),
        "{err}"
    );
}

#[test]
fn the_limit_of_ulimit_v_is_named() {
    // 2^28 complex numbers x 5 arrays = 21.5 GB against an address space of 2 GB.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 2000000 && exec {} fft --n 268435456",
            env!("CARGO_BIN_EXE_mbsp")
        ))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("21.5 GB"), "{err}");
    assert!(err.contains("RLIMIT_AS (ulimit -v) of 2.0 GB"), "{err}");
}

/// A matrix from a pipe (`<(zcat m.mtx.gz)`) cannot be read twice: it is checked once read,
/// and a small one is partitioned as before.
#[test]
fn a_matrix_from_a_pipe_is_checked_once_read() {
    let dir = common::scratch("preflight_cli", "pipe");
    let m = common::matrix("rajat01.mtx");
    let huge = dir.join("huge.mtx");
    std::fs::write(
        &huge,
        "%%MatrixMarket matrix coordinate real general\n4000000000 4000000000 1\n1 1 1.0\n",
    )
    .unwrap();
    let run = |input: &std::path::Path, out: &str| {
        Command::new("bash")
            .arg("-c")
            .arg(format!(
                "exec {} partition <(cat {}) -p 2 --out {}",
                env!("CARGO_BIN_EXE_mbsp"),
                input.display(),
                dir.join(out).display()
            ))
            .output()
            .unwrap()
    };
    let ok = run(&m, "small");
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(dir.join("small-P2").is_file());
    let big = run(&huge, "huge");
    let err = String::from_utf8_lossy(&big.stderr);
    assert_eq!(big.status.code(), Some(2), "{err}");
    assert!(
        err.contains("4000000000 rows and 4000000000 columns"),
        "{err}"
    );
}
