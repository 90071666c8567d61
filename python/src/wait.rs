//! Long work that Ctrl-C interrupts.
//!
//! The work runs on a thread of its own and owns everything it touches (nothing borrowed from
//! Python objects), so the calling thread may return to Python while it still runs. The calling
//! thread waits with the GIL released, 50 ms at a time, and between waits asks Python whether a
//! signal arrived (`check_signals`, which runs the handlers: Ctrl-C's raises
//! `KeyboardInterrupt`). On an exception:
//!
//! * with a stop flag, the flag is raised and the thread waited for (work that looks at the
//!   flag, CG between iterations, ends within one step), then the exception is returned;
//! * without one (the partitioner has no point to stop at), the exception is returned at once
//!   and the thread finishes on its own, its result dropped.
//!
//! A panic of the work is caught on its thread and becomes `mbsp.BspError`.

use crate::errors::BspError;
use pyo3::prelude::*;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::Duration;

/// How long the caller waits with the GIL released before it looks at Python's signals again.
const POLL: Duration = Duration::from_millis(50);

/// Runs `job` on a new thread named `mbsp-{what}` and waits for its result, interruptibly (see
/// the module docs). `stop`, when given, is raised on an interrupt and the job waited for.
pub fn interruptible<T, F>(
    py: Python<'_>,
    what: &str,
    stop: Option<Arc<AtomicBool>>,
    job: F,
) -> PyResult<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, mut rx) = channel();
    std::thread::Builder::new()
        .name(format!("mbsp-{what}"))
        .spawn(move || {
            let out = catch_unwind(AssertUnwindSafe(job));
            // The receiver is gone when the caller was interrupted without a stop flag.
            let _ = tx.send(out);
        })
        .map_err(|e| BspError::new_err(format!("{what}: cannot start a thread: {e}")))?;
    let mut interrupted: Option<PyErr> = None;
    loop {
        // The receiver is not `Sync`: it goes into the GIL-free wait and comes back.
        let (got, back) = py.detach(move || (rx.recv_timeout(POLL), rx));
        rx = back;
        match got {
            Ok(Ok(v)) => return interrupted.map_or(Ok(v), Err),
            Ok(Err(panic)) => {
                let text = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("(no message)");
                return Err(BspError::new_err(format!("{what} panicked: {text}")));
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(BspError::new_err(format!(
                    "{what}: its thread ended without a result"
                )));
            }
            Err(RecvTimeoutError::Timeout) => {
                if interrupted.is_some() {
                    continue;
                }
                if let Err(e) = py.check_signals() {
                    match &stop {
                        Some(flag) => {
                            flag.store(true, Ordering::Relaxed);
                            interrupted = Some(e);
                        }
                        None => return Err(e),
                    }
                }
            }
        }
    }
}
