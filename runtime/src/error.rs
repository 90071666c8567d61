//! The one error type of the runtime.
//!
//! Every failure of a run ends up as an [`Error`]: misuse of a primitive, an explicit
//! [`Ctx::abort`](crate::Ctx::abort), a panic inside a process, or a run that could not start.
//! The error names the primitive, the process (with its path through nested runs), the superstep
//! and the values involved, so that the message alone says what went wrong.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// What kind of failure an [`Error`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A primitive was used against the rules of BSPlib (bad pid, unregistered area, bounds,
    /// registrations or tag sizes that differ between processes, mismatched `sync`/end...).
    Misuse,
    /// A process called [`Ctx::abort`](crate::Ctx::abort).
    Abort,
    /// A process panicked; the message is the panic payload.
    Panic,
    /// This process stopped because another process (possibly in another run of the same
    /// hierarchy) failed first. `run` never returns this kind when it knows the root cause.
    Aborted,
    /// The operating system refused a resource the run needs (for example a thread).
    System,
}

#[derive(Clone, Debug)]
struct Inner {
    kind: ErrorKind,
    /// Borrowed for the runtime's own operations; owned for an error that arrived from another
    /// MPI rank (its name was decoded from the wire).
    op: Cow<'static, str>,
    path: Vec<usize>,
    superstep: Option<u64>,
    message: String,
    /// The typed error this one was made from (a topology, plan or affinity error), if any.
    source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

/// The error of a failed run or primitive.
///
/// `Display` gives one line such as
/// `put (pid 3, superstep 5): offset 96 + 16 bytes exceeds the 100 bytes pid 7 registered`.
/// For processes of nested runs the pid is written as a path from the top-level run, e.g.
/// `pid 1/3` is process 3 of the run started by process 1.
///
/// When the failure comes from a typed error of another layer — a machine that could not be
/// loaded ([`topology::TopologyError`](crate::topology::TopologyError)), a plan that could not
/// be made ([`topology::PlanError`](crate::topology::PlanError)), or an `MBSP_AFFINITY` that
/// could not be parsed ([`AffinityError`](crate::AffinityError)) — the message is that error's
/// text and [`std::error::Error::source`] returns the typed error itself, for `downcast_ref`.
///
/// The error is one pointer wide, so `Result<(), Error>` stays cheap on hot paths.
#[derive(Clone)]
pub struct Error(Box<Inner>);

/// Shorthand for `std::result::Result<T, mbsp::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn new(
        kind: ErrorKind,
        op: impl Into<Cow<'static, str>>,
        path: Vec<usize>,
        superstep: Option<u64>,
        message: impl Into<String>,
    ) -> Self {
        Error(Box::new(Inner {
            kind,
            op: op.into(),
            path,
            superstep,
            message: message.into(),
            source: None,
        }))
    }

    /// This error with `source` as its [`std::error::Error::source`].
    pub(crate) fn with_source(
        mut self,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        self.0.source = Some(Arc::new(source));
        self
    }

    /// An error not tied to a process (e.g. a run asked for 0 processes).
    pub(crate) fn outside(kind: ErrorKind, op: &'static str, message: impl Into<String>) -> Self {
        Self::new(kind, op, Vec::new(), None, message)
    }

    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// The primitive or phase that failed, e.g. `"put"`, `"sync"`, `"run"`.
    pub fn op(&self) -> &str {
        &self.0.op
    }

    /// The pid of the failing process in its own run, if a process failed.
    pub fn pid(&self) -> Option<usize> {
        self.0.path.last().copied()
    }

    /// The pids from the top-level run down to the failing process (empty when no process
    /// failed). `[1, 3]` is process 3 of the nested run started by top-level process 1.
    pub fn path(&self) -> &[usize] {
        &self.0.path
    }

    /// The superstep (counted from 0 in the failing process's run) in which the failure happened.
    pub fn superstep(&self) -> Option<u64> {
        self.0.superstep
    }

    /// The explanation, without the operation/pid/superstep prefix.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    pub(crate) fn is_secondary(&self) -> bool {
        self.0.kind == ErrorKind::Aborted
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.0;
        f.write_str(&i.op)?;
        if !i.path.is_empty() || i.superstep.is_some() {
            f.write_str(" (")?;
            if !i.path.is_empty() {
                f.write_str("pid ")?;
                for (n, p) in i.path.iter().enumerate() {
                    if n > 0 {
                        f.write_str("/")?;
                    }
                    write!(f, "{p}")?;
                }
            }
            if let Some(s) = i.superstep {
                if !i.path.is_empty() {
                    f.write_str(", ")?;
                }
                write!(f, "superstep {s}")?;
            }
            f.write_str(")")?;
        }
        match i.kind {
            ErrorKind::Abort => write!(f, ": aborted: {}", i.message),
            ErrorKind::Panic => write!(f, ": panicked: {}", i.message),
            _ => write!(f, ": {}", i.message),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Error({:?}: {self})", self.0.kind)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0
            .source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

thread_local! {
    /// The error a primitive last panicked with ([`raise`]), so that the process's outcome is
    /// that error rather than a panic of "spmd" quoting it.
    static RAISED: std::cell::RefCell<Option<Error>> = const { std::cell::RefCell::new(None) };
}

/// Panic with `e`'s text (for a primitive that returns no `Result`, such as
/// [`Message::payload_as`](crate::Message::payload_as)), at the caller's location. If the
/// panic ends the process, the run fails with `e` itself ([`raised`]).
#[cold]
#[track_caller]
pub(crate) fn raise(e: Error) -> ! {
    let text = e.to_string();
    RAISED.with(|r| *r.borrow_mut() = Some(e));
    panic!("{text}")
}

/// The error [`raise`] last panicked with on this thread, if `message` (a panic's payload) is
/// its text; taken out when `take`.
pub(crate) fn raised(message: &str, take: bool) -> Option<Error> {
    RAISED.with(|r| {
        let mut slot = r.borrow_mut();
        if slot.as_ref().is_none_or(|e| e.to_string() != message) {
            return None;
        }
        if take { slot.take() } else { slot.clone() }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_op_pid_superstep() {
        let e = Error::new(
            ErrorKind::Misuse,
            "put",
            vec![3],
            Some(5),
            "offset 96 + 16 bytes exceeds the 100 bytes pid 7 registered",
        );
        assert_eq!(
            e.to_string(),
            "put (pid 3, superstep 5): offset 96 + 16 bytes exceeds the 100 bytes pid 7 registered"
        );
        assert_eq!(e.pid(), Some(3));
        let nested = Error::new(ErrorKind::Abort, "abort", vec![1, 2], Some(0), "boom");
        assert_eq!(
            nested.to_string(),
            "abort (pid 1/2, superstep 0): aborted: boom"
        );
        let outside = Error::outside(ErrorKind::Misuse, "run", "p = 0");
        assert_eq!(outside.to_string(), "run: p = 0");
        assert_eq!(std::mem::size_of::<Error>(), std::mem::size_of::<usize>());
    }

    #[test]
    fn source_is_kept_through_clones() {
        use std::error::Error as _;
        let plain = Error::outside(ErrorKind::Misuse, "run", "p = 0");
        assert!(plain.source().is_none());
        let cause = mbsp_topology::PlanError::ManualEmpty { pid: 1 };
        let e = Error::outside(ErrorKind::Misuse, "run", cause.to_string()).with_source(cause);
        assert_eq!(e.to_string(), "run: manual CPU set for pid 1 is empty");
        let copy = e.clone();
        let s = copy.source().expect("source kept by clone");
        assert_eq!(
            s.downcast_ref::<mbsp_topology::PlanError>(),
            Some(&mbsp_topology::PlanError::ManualEmpty { pid: 1 })
        );
        assert_eq!(std::mem::size_of::<Error>(), std::mem::size_of::<usize>());
    }
}
