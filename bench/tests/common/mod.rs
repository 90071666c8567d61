//! Helpers shared by the command-line tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// A directory of the shared test data (`topologies`, `matrices`, ...): under `$MBSP_DATA_DIR`,
/// else `../shared/data` beside the repository, else the workplace's copy (CI clones the
/// repository elsewhere).
pub fn shared(sub: &str) -> PathBuf {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    [
        std::env::var_os("MBSP_DATA_DIR").map(PathBuf::from),
        Some(repo.join("../shared/data")),
        Some(PathBuf::from("/work/shared/data")),
    ]
    .into_iter()
    .flatten()
    .map(|d| d.join(sub))
    .find(|d| d.is_dir())
    .unwrap_or_else(|| panic!("shared test data ({sub}) not found: set MBSP_DATA_DIR"))
}

/// A shared matrix file.
pub fn matrix(name: &str) -> PathBuf {
    let f = shared("matrices").join(name);
    assert!(f.is_file(), "shared data missing: {}", f.display());
    f
}
