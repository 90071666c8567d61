//! The one error type of the `mbsp` and `mbsp-bench` commands, and their exit statuses.
//!
//! Every command reports a failure as one line on stderr (`mbsp fft: ...`, control characters
//! escaped) and exits with the status of its class, the same in every subcommand:
//!
//! | status | class ([`ErrorKind`]) | examples |
//! |---|---|---|
//! | 0 | success | |
//! | 1 | [`Run`](ErrorKind::Run): a run failed after it started | a BSP run's error, a result that fails its check |
//! | 2 | [`Usage`](ErrorKind::Usage): the request cannot be carried out as asked | a bad option or value (clap's errors too), options that do not go together, a request that cannot fit in memory, an unusable `MBSP_PARAMS` file |
//! | 3 | [`Io`](ErrorKind::Io): an input or output file | a matrix or topology file that cannot be read or is malformed, an output file that cannot be written (a full disk) |
//! | 130 | [`Interrupted`](ErrorKind::Interrupted) | SIGINT (Ctrl-C), SIGTERM, SIGHUP |
//!
//! A panic (a bug) exits with 101, as Rust programs do.

use std::fmt;
use std::io::Write;
use std::process::ExitCode;

/// The class of a failure; each has one exit status ([`ErrorKind::status`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A run failed after it started: a BSP run's error, a result that fails its check.
    /// Exit status 1.
    Run,
    /// The request cannot be carried out as asked: a bad option or value, options that do not
    /// go together, a request that cannot fit in memory, an unusable `MBSP_PARAMS` file. Exit
    /// status 2 (that of clap's own argument errors).
    Usage,
    /// An input file cannot be read or is malformed, or an output file cannot be written.
    /// Exit status 3.
    Io,
    /// Stopped by SIGINT, SIGTERM or SIGHUP (the signal handler exits with this status).
    /// Exit status 130.
    Interrupted,
}

impl ErrorKind {
    /// The exit status of this class of failure.
    ///
    /// ```
    /// use mbsp_cli::ErrorKind;
    /// assert_eq!(ErrorKind::Usage.status(), 2);
    /// assert_eq!(ErrorKind::Interrupted.status(), 130);
    /// ```
    pub fn status(self) -> u8 {
        match self {
            ErrorKind::Run => 1,
            ErrorKind::Usage => 2,
            ErrorKind::Io => 3,
            ErrorKind::Interrupted => 130,
        }
    }
}

/// A failure of a command: its class, a message for the user, and the error that caused it
/// when there is one ([`std::error::Error::source`]).
///
/// `Display` is the message followed by the cause's text (`message: cause`), one line for the
/// user.
///
/// ```
/// use mbsp_cli::{Error, ErrorKind};
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

/// The result of the commands' fallible functions.
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

    /// A request that cannot be carried out as asked (exit status 2).
    pub fn usage(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Usage, message)
    }

    /// An input or output file's failure (exit status 3); `message` names the file.
    pub fn io(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Io, message)
    }

    /// A run that failed after it started (exit status 1).
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
    pub fn context(mut self, context: impl fmt::Display) -> Error {
        self.message = if self.message.is_empty() {
            context.to_string()
        } else {
            format!("{context}: {}", self.message)
        };
        self
    }

    /// Prints `command: error` as one line on stderr (over MPI ranks, on rank 0 alone: every rank
    /// meets the same error; control characters escaped: a message
    /// may quote a path or input, and raw control bytes must not reach the terminal) and
    /// returns the exit status of its class.
    pub fn report(&self, command: &str) -> ExitCode {
        // Over MPI ranks every rank meets the same error; rank 0 alone prints it.
        if crate::run_on::is_root() {
            // One write of the whole line: stderr is unbuffered and `eprintln!` writes the
            // pieces of its format one by one, so the lines of processes that share a pipe
            // (ranks under mpiexec) could interleave mid-line.
            let line = format!(
                "{command}: {}\n",
                mbsp_algorithms::text::escaped(&self.to_string())
            );
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
        ExitCode::from(self.kind.status())
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

/// A failed BSP run is a run failure (exit status 1), caused by the runtime's error.
impl From<mbsp::Error> for Error {
    fn from(e: mbsp::Error) -> Error {
        Error::run("").with_source(e)
    }
}

/// Extension of results whose error is only text (or any `Display`): give it a class.
///
/// Errors of the algorithms crate are converted through their `Display`, so that this code
/// compiles whether they are strings or typed errors.
pub trait Classify<T> {
    /// The error, as an [`Error`] of `kind`.
    fn or_kind(self, kind: ErrorKind) -> Result<T>;
    /// The error, as a usage error (exit status 2).
    fn or_usage(self) -> Result<T>
    where
        Self: Sized,
    {
        self.or_kind(ErrorKind::Usage)
    }
    /// The error, as an input/output error (exit status 3).
    fn or_io(self) -> Result<T>
    where
        Self: Sized,
    {
        self.or_kind(ErrorKind::Io)
    }
    /// The error, as a run failure (exit status 1).
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
    fn statuses_are_distinct_per_class() {
        let all = [
            ErrorKind::Run,
            ErrorKind::Usage,
            ErrorKind::Io,
            ErrorKind::Interrupted,
        ];
        let mut statuses: Vec<u8> = all.iter().map(|k| k.status()).collect();
        statuses.sort();
        statuses.dedup();
        assert_eq!(statuses, [1, 2, 3, 130]);
    }

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
