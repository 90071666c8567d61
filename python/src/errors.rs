//! Errors as Python exceptions: each keeps the runtime's or the command's one-line message.

use pyo3::create_exception;
use pyo3::exceptions::{PyMemoryError, PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

create_exception!(
    mbsp,
    BspError,
    PyRuntimeError,
    "A BSP run failed: a process returned an error, panicked, or misused the runtime. The \
     message names the operation, the process and the superstep."
);

/// A run's error: `mbsp.BspError` with the runtime's message.
pub fn run(e: mbsp::Error) -> PyErr {
    BspError::new_err(e.to_string())
}

/// Bad input: `ValueError` with the message.
pub fn value(message: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(message.to_string())
}

/// An error of the shared library (mbsp-tools): usage -> `ValueError`, files -> `OSError`, a
/// run -> `mbsp.BspError`.
pub fn tools(e: mbsp_tools::Error) -> PyErr {
    use mbsp_tools::ErrorKind;
    let text = e.to_string();
    match e.kind() {
        ErrorKind::Usage => PyValueError::new_err(text),
        ErrorKind::Io => PyOSError::new_err(text),
        _ => BspError::new_err(text),
    }
}

/// The outcome of a preflight check (a request that cannot fit in memory is refused before any
/// work): its refusal is a `MemoryError`; a file it cannot read is an `OSError`.
pub fn preflight(r: mbsp_tools::Result<()>) -> PyResult<()> {
    r.map_err(|e| match e.kind() {
        mbsp_tools::ErrorKind::Usage => PyMemoryError::new_err(e.to_string()),
        _ => tools(e),
    })
}

/// A file that cannot be read or written: `OSError` naming the file.
pub fn io(path: &str, e: impl std::fmt::Display) -> PyErr {
    PyOSError::new_err(format!("{path}: {e}"))
}
