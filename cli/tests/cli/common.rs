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

/// Runs `mbsp` with `args`: (exit status, stdout, stderr).
pub fn mbsp(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mbsp"))
        .args(args)
        .output()
        .expect("start mbsp");
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
