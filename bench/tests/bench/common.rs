//! Helpers shared by the command-line tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// A directory of the shared test data (`topologies`, `matrices`, ...): under `$MBSP_DATA_DIR`
/// if set (CI sets it), else under `../shared/data` beside the repository.
pub fn shared(sub: &str) -> PathBuf {
    let data = match std::env::var_os("MBSP_DATA_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"),
    };
    let d = data.join(sub);
    assert!(
        d.is_dir(),
        "shared test data ({sub}) not found at {}: set MBSP_DATA_DIR",
        d.display()
    );
    d
}

/// A shared matrix file.
pub fn matrix(name: &str) -> PathBuf {
    let f = shared("matrices").join(name);
    assert!(f.is_file(), "shared data missing: {}", f.display());
    f
}

/// Runs `mbsp-bench` with `args`: (exit status, stdout, stderr).
pub fn bench(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mbsp-bench"))
        .args(args)
        .output()
        .expect("start mbsp-bench");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A fresh directory of its own for each test (they run in parallel): `suite/test` under
/// cargo's scratch directory for integration tests.
pub fn scratch(suite: &str, test: &str) -> std::path::PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(suite)
        .join(test);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create scratch directory");
    d
}

/// Runs `mbsp-bench SUBCOMMAND --quick --json --csv FILE ARGS...` in a scratch directory of its
/// own, checks that it succeeded, and returns (its JSON output, the CSV file's text, that
/// scratch directory).
pub fn quick_json_csv(subcommand: &str, args: &[&str]) -> (serde_json::Value, String, PathBuf) {
    let dir = scratch("bench_cli", subcommand);
    let csv = dir.join(format!("{subcommand}.csv"));
    let mut all = vec![
        subcommand,
        "--quick",
        "--json",
        "--csv",
        csv.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let (code, out, err) = bench(&all);
    assert_eq!(code, 0, "mbsp-bench {all:?}: {err}");
    let json = serde_json::from_str(&out).unwrap_or_else(|e| panic!("JSON: {e}: {out}"));
    let text = std::fs::read_to_string(&csv).expect("CSV written");
    (json, text, dir)
}
