//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// Run `f` on its own thread and fail the test if it has not finished after `secs` seconds.
/// A hang detector (a hung run would otherwise stall CI), not a timing assertion: the limits
/// are orders of magnitude above the expected run time.
pub fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        let r = f();
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(()) => h.join().expect("test body panicked"),
        Err(mpsc::RecvTimeoutError::Disconnected) => match h.join() {
            Ok(v) => v,
            Err(e) => std::panic::resume_unwind(e),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("hung: not finished after {secs} s"),
    }
}

pub use mbsp::rng::SplitMix64;

/// A deterministic hash of `x` (the first word of SplitMix64 seeded with `x`), so every process
/// can rebuild every other process's input and compute the expected result itself.
pub fn mix(x: u64) -> u64 {
    SplitMix64::new(x).next_u64()
}

/// A directory of the shared test data (`matrices`, `fft`, ...): under `$MBSP_DATA_DIR`, else
/// under `../shared/data` beside the repository. Missing data fails the test, saying where it
/// was looked for.
pub fn shared(sub: &str) -> std::path::PathBuf {
    let repo = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let candidates: Vec<std::path::PathBuf> = [
        std::env::var_os("MBSP_DATA_DIR").map(std::path::PathBuf::from),
        Some(repo.join("../shared/data")),
    ]
    .into_iter()
    .flatten()
    .map(|d| d.join(sub))
    .collect();
    let found = candidates.iter().find(|d| d.is_dir()).cloned();
    found.unwrap_or_else(|| {
        panic!("shared test data ({sub}) not found (looked in {candidates:?}): set MBSP_DATA_DIR")
    })
}

/// The shared matrices.
pub fn matrices_dir() -> std::path::PathBuf {
    shared("matrices")
}

/// Whether the tests run under scripts/memcheck (`MBSP_TEST_MEMCHECK`): do less there.
pub fn memcheck() -> bool {
    std::env::var_os("MBSP_TEST_MEMCHECK").is_some()
}

/// Busy threads for the lifetime of the value: the other processes then lose their CPU at
/// random moments, which widens the window in which they are mid-copy.
pub struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    pub fn new() -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        // No load under memcheck, which runs one thread at a time anyway.
        let n = if memcheck() {
            0
        } else {
            std::thread::available_parallelism().map_or(2, |n| n.get())
        };
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut busy = SplitMix64::new(0);
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::black_box(busy.next_u64());
                    }
                })
            })
            .collect();
        Load { stop, threads }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
