//! Helpers shared by the integration tests, and the harness that runs the semantic test files
//! on either engine (`engine.rs`).
#![allow(dead_code)]

mod engine;
#[allow(unused_imports)]
pub use engine::*;

use std::sync::mpsc;
use std::time::Duration;

/// Run `f` on its own thread and fail the test if it has not finished after `secs` seconds.
/// This is a hang detector (a hung run would otherwise stall CI), not a timing assertion:
/// the limits are orders of magnitude above the expected run time.
pub fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    // Named after the test, as libtest names its thread (the harness's notes name the test).
    let name = std::thread::current().name().map(str::to_string);
    let mut b = std::thread::Builder::new();
    if let Some(n) = name {
        b = b.name(n);
    }
    let h = b
        .spawn(move || {
            let r = f();
            let _ = tx.send(());
            r
        })
        .expect("a thread for the test body");
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(()) => h.join().expect("test body panicked"),
        Err(mpsc::RecvTimeoutError::Disconnected) => match h.join() {
            Ok(v) => v,
            Err(e) => std::panic::resume_unwind(e),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("hung: not finished after {secs} s"),
    }
}

/// Expect `r` to be an error of `kind` from `op` naming `pid` (its last path element), in
/// `superstep` (`""`/`None` = any), whose message contains every string of `needles`.
/// Takes an `mbsp::Result` or the harness's ([`run`]).
pub fn expect_err<T: std::fmt::Debug, E: Into<Failure>>(
    r: Result<T, E>,
    kind: mbsp::ErrorKind,
    op: &str,
    pid: Option<usize>,
    superstep: Option<u64>,
    needles: &[&str],
) -> Failure {
    let e: Failure = r.expect_err("expected the run to fail").into();
    assert_eq!(e.kind(), kind, "kind of {e}");
    if !op.is_empty() {
        assert_eq!(e.op(), op, "op of {e}");
    }
    if pid.is_some() {
        assert_eq!(e.pid(), pid, "pid of {e}");
    }
    if superstep.is_some() {
        assert_eq!(e.superstep(), superstep, "superstep of {e}");
    }
    let text = e.to_string();
    for n in needles {
        assert!(text.contains(n), "{text:?} should mention {n:?}");
    }
    e
}

/// The test harness's name of the test `name` defined in the module `module` (the caller's
/// `module_path!()`): the module's path without the test binary's crate, then the function, as
/// `--exact` wants it when a test runs a test of its own binary again in a child process.
pub fn test_name(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_binary, path)) => format!("{path}::{name}"),
        None => name.to_string(),
    }
}

/// A directory of the shared test data (`topologies`, `matrices`, ...), which lives beside the
/// repository, not in it: under `$MBSP_DATA_DIR` (.ci/run sets it), else `../shared/data`
/// next to the repository. A missing directory fails the test, naming both places.
pub fn data_dir(sub: &str) -> std::path::PathBuf {
    let repo = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let from_env = std::env::var_os("MBSP_DATA_DIR").map(std::path::PathBuf::from);
    let beside = repo.join("../shared/data");
    from_env
        .iter()
        .chain([&beside])
        .map(|d| d.join(sub))
        .find(|d| d.is_dir())
        .unwrap_or_else(|| {
            panic!(
                "the shared test data ({sub}) is in neither $MBSP_DATA_DIR ({}) nor {}: set \
                 MBSP_DATA_DIR to the directory that holds it",
                from_env
                    .as_ref()
                    .map_or("unset".into(), |d| d.display().to_string()),
                beside.display()
            )
        })
}
