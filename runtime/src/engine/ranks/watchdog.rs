//! A rank that waits in a sync longer than [`TIMEOUT_ENV`] says ends itself (the MPI launcher
//! then ends the others).

use std::sync::OnceLock;
use std::sync::atomic::Ordering;

/// The environment variable bounding how long a rank waits in a sync for the others, in
/// seconds (default 3600; 0: forever). It must exceed the longest superstep of the program:
/// a rank computing longer than this before its next sync is taken for dead. A rank that dies is normally reported by the MPI
/// launcher, which ends the others; this bounds the wait when it does not.
pub const TIMEOUT_ENV: &str = "MBSP_MPI_TIMEOUT";

/// How long a rank waits in a sync for the others ([`TIMEOUT_ENV`]).
pub(super) fn timeout() -> Option<std::time::Duration> {
    static T: OnceLock<Option<std::time::Duration>> = OnceLock::new();
    *T.get_or_init(|| {
        let secs = std::env::var(TIMEOUT_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(3600.0);
        (secs > 0.0).then(|| std::time::Duration::from_secs_f64(secs))
    })
}

/// A thread that ends this rank if it waits in a sync's header exchange longer than
/// [`timeout`]: the MPI launcher then ends the others (MPICH's does on any non-zero exit). The
/// waiting rank only stores two words on entry and one on exit, so the empty sync costs no more
/// than without it; the thread sleeps between checks.
pub(super) struct Watchdog {
    /// Milliseconds since `base` at which the current wait began, plus 1 (0: not waiting).
    since: std::sync::atomic::AtomicU64,
    /// pid << 40 | superstep of the current wait (for the message).
    at: std::sync::atomic::AtomicU64,
    base: std::time::Instant,
}

impl Watchdog {
    pub(super) fn enter(&'static self, pid: usize, step: u64) -> &'static Watchdog {
        let now = self.base.elapsed().as_millis() as u64 + 1;
        self.at.store(
            (pid as u64) << 40 | (step & ((1 << 40) - 1)),
            Ordering::Relaxed,
        );
        self.since.store(now, Ordering::Release);
        self
    }

    pub(super) fn leave(&self) {
        self.since.store(0, Ordering::Release);
    }

    pub(super) fn watch(&self, limit: std::time::Duration) {
        let period = (limit / 10).clamp(
            std::time::Duration::from_millis(10),
            std::time::Duration::from_secs(1),
        );
        loop {
            std::thread::sleep(period);
            let since = self.since.load(Ordering::Acquire);
            if since == 0 {
                continue;
            }
            let now = self.base.elapsed().as_millis() as u64 + 1;
            if now.saturating_sub(since) <= limit.as_millis() as u64 {
                continue;
            }
            let at = self.at.load(Ordering::Relaxed);
            let line = format!(
                "mbsp: sync (pid {}, superstep {}): no word from the other ranks for {:.0} s (one \
                 may have died or stopped syncing); ending this rank ({TIMEOUT_ENV}=seconds \
                 changes the limit, 0 waits forever)\n",
                at >> 40,
                at & ((1 << 40) - 1),
                limit.as_secs_f64()
            );
            use std::io::Write;
            let _ = std::io::stderr().write_all(line.as_bytes());
            // SAFETY: ends the process at once, without running exit handlers (MPI_Finalize
            // would wait for the ranks we gave up on).
            unsafe { _exit(1) };
        }
    }
}

unsafe extern "C" {
    pub(super) fn _exit(status: std::ffi::c_int) -> !;
}

/// The watchdog, started on first use, when a timeout applies.
pub(super) fn watchdog() -> Option<&'static Watchdog> {
    static W: OnceLock<Option<&'static Watchdog>> = OnceLock::new();
    *W.get_or_init(|| {
        let limit = timeout()?;
        let w: &'static Watchdog = Box::leak(Box::new(Watchdog {
            since: std::sync::atomic::AtomicU64::new(0),
            at: std::sync::atomic::AtomicU64::new(0),
            base: std::time::Instant::now(),
        }));
        std::thread::Builder::new()
            .name("mbsp-mpi-watchdog".into())
            .spawn(move || w.watch(limit))
            .ok()?;
        Some(w)
    })
}
