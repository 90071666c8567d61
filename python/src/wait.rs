//! Long work that Ctrl-C interrupts.
//!
//! The work runs on a thread of its own and owns everything it touches (nothing borrowed from
//! Python objects), so the calling thread may return to Python while it still runs. The calling
//! thread waits with the GIL released, 50 ms at a time, and between waits asks Python whether a
//! signal arrived (`check_signals`, which runs the handlers: Ctrl-C's raises
//! `KeyboardInterrupt`). On an exception the job's stop flag is raised and the thread waited
//! for — every job looks at its flag and ends within one step: CG between iterations, the
//! partitioner between refinement passes, parameter measurements between the points of a
//! sweep — then the exception is returned. When a call returns, its thread has ended.
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
/// the module docs): on an interrupt `stop` is raised and the job waited for.
pub fn interruptible<T, F>(py: Python<'_>, what: &str, stop: Arc<AtomicBool>, job: F) -> PyResult<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, mut rx) = channel();
    let worker = std::thread::Builder::new()
        .name(format!("mbsp-{what}"))
        .spawn(move || {
            let out = catch_unwind(AssertUnwindSafe(job));
            // (The receiver outlives the thread: the caller joins it.)
            let _ = tx.send(out);
        })
        .map_err(|e| BspError::new_err(format!("{what}: cannot start a thread: {e}")))?;
    let mut interrupted: Option<PyErr> = None;
    loop {
        // The receiver is not `Sync`: it goes into the GIL-free wait and comes back.
        let (got, back) = py.detach(move || (rx.recv_timeout(POLL), rx));
        rx = back;
        let answer = match got {
            Ok(result_or_panic) => Some(result_or_panic),
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => {
                if interrupted.is_none()
                    && let Err(e) = py.check_signals()
                {
                    stop.store(true, Ordering::Relaxed);
                    interrupted = Some(e);
                }
                continue;
            }
        };
        // The thread has answered (or died): it ends in a moment, and once it is joined no
        // thread of this call is left.
        let _ = py.detach(move || worker.join());
        return finish(what, answer, interrupted);
    }
}

/// The outcome of [`interruptible`] once its thread has answered (`None`: it ended without
/// an answer): the interrupt it had, if any, else the result, or the panic as `mbsp.BspError`.
fn finish<T>(
    what: &str,
    answer: Option<std::thread::Result<T>>,
    interrupted: Option<PyErr>,
) -> PyResult<T> {
    match answer {
        Some(Ok(v)) => interrupted.map_or(Ok(v), Err),
        Some(Err(panic)) => {
            let text = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            Err(BspError::new_err(format!("{what} panicked: {text}")))
        }
        None => Err(BspError::new_err(format!(
            "{what}: its thread ended without a result"
        ))),
    }
}
