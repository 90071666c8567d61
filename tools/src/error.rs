//! The one error type of the shared code and of the commands built on it.
//!
//! An [`Error`] is a class ([`ErrorKind`]), a message for the user and, when there is one, the
//! error that caused it. The class says what went wrong in terms a caller can act on — the
//! request, a file, the run — and each caller maps it to its own terms: the commands to their
//! exit statuses ([`crate::command::status`]), the Python package to exception types.

use std::fmt;

/// The class of a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A run failed after it started: a BSP run's error, a result that fails its check.
    Run,
    /// The request cannot be carried out as asked: a bad option or value, options that do not
    /// go together, a request that cannot fit in memory, an unusable `MBSP_PARAMS` file.
    Usage,
    /// An input file cannot be read or is malformed, or an output file cannot be written.
    Io,
    /// Stopped on request: a stop flag was set, or SIGINT, SIGTERM or SIGHUP arrived.
    Interrupted,
}

/// A failure: its class, a message for the user, and the error that caused it when there is
/// one ([`std::error::Error::source`]).
///
/// `Display` is the message followed by the cause's text (`message: cause`), one line for the
/// user.
///
/// ```
/// use mbsp_tools::{Error, ErrorKind};
/// let io = std::io::Error::new(std::io::ErrorKind::StorageFull, "no space left on device");
/// let e = Error::io("out.csv").with_source(io);
/// assert_eq!(e.kind(), ErrorKind::Io);
/// assert_eq!(e.to_string(), "out.csv: no space left on device");
/// assert!(std::error::Error::source(&e).is_some());
/// assert_eq!(Error::usage("-p must be at least 1").to_string(), "-p must be at least 1");
/// ```
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

/// The result of the fallible functions of this crate and of the commands.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// A request that cannot be carried out as asked.
    pub fn usage(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Usage, message)
    }

    /// An input or output file's failure; `message` names the file.
    pub fn io(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Io, message)
    }

    /// A run that failed after it started.
    pub fn run(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Run, message)
    }

    /// The same error, caused by `source`: its text follows the message, and
    /// [`std::error::Error::source`] returns it.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Error {
        self.source = Some(Box::new(source));
        self
    }

    /// The class of the failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message, without the cause's text.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The same error with `context` before its message (`context: message`).
    ///
    /// ```
    /// let e = mbsp_tools::Error::run("").context("the FFT");
    /// assert_eq!(e.to_string(), "the FFT");
    /// ```
    pub fn context(mut self, context: impl fmt::Display) -> Error {
        self.message = if self.message.is_empty() {
            context.to_string()
        } else {
            format!("{context}: {}", self.message)
        };
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(s) = &self.source {
            if self.message.is_empty() {
                write!(f, "{s}")?;
            } else {
                write!(f, ": {s}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn std::error::Error + 'static))
    }
}

/// A failed BSP run is a run failure, caused by the runtime's error.
impl From<mbsp::Error> for Error {
    fn from(e: mbsp::Error) -> Error {
        Error::run("").with_source(e)
    }
}

/// Extension of results whose error is only text (or any `Display`): give it a class.
///
/// Errors of the algorithms crate are converted through their `Display`, so that this code
/// compiles whether they are strings or typed errors.
///
/// ```
/// use mbsp_tools::{Classify, ErrorKind};
/// let bad: Result<(), String> = Err("bad".into());
/// let e = bad.or_usage().unwrap_err();
/// assert_eq!((e.kind(), e.to_string()), (ErrorKind::Usage, "bad".to_string()));
/// ```
pub trait Classify<T> {
    /// The error, as an [`Error`] of `kind`.
    fn or_kind(self, kind: ErrorKind) -> Result<T>;
    /// The error, as a usage error.
    fn or_usage(self) -> Result<T>
    where
        Self: Sized,
    {
        self.or_kind(ErrorKind::Usage)
    }
    /// The error, as an input/output error.
    fn or_io(self) -> Result<T>
    where
        Self: Sized,
    {
        self.or_kind(ErrorKind::Io)
    }
    /// The error, as a run failure.
    fn or_run(self) -> Result<T>
    where
        Self: Sized,
    {
        self.or_kind(ErrorKind::Run)
    }
}

impl<T, E: fmt::Display> Classify<T> for std::result::Result<T, E> {
    fn or_kind(self, kind: ErrorKind) -> Result<T> {
        self.map_err(|e| Error::new(kind, e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_and_source_make_one_line() {
        let e = Error::io("cannot write").with_source(std::io::Error::other("disk full"));
        let e = e.context("out.csv");
        assert_eq!(e.to_string(), "out.csv: cannot write: disk full");
        assert_eq!(e.message(), "out.csv: cannot write");
        let run: Error = Error::run("").context("the FFT");
        assert_eq!(run.to_string(), "the FFT");
        let text: std::result::Result<(), String> = Err("bad".into());
        let e = text.or_usage().unwrap_err();
        assert_eq!((e.kind(), e.to_string()), (ErrorKind::Usage, "bad".into()));
        assert!(std::error::Error::source(&e).is_none());
    }
}
