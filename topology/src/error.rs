//! The errors of loading machine trees ([`TopologyError`]), of making plans ([`PlanError`]) and
//! of asking where memory lives ([`LocationError`]).
//!
//! Each error's `Display` is one self-contained line (it includes the underlying error's text),
//! and [`std::error::Error::source`] returns the underlying error when there is one (hwloc's
//! error as a [`HwlocError`], an I/O error), so callers can both print the line and walk or
//! downcast the chain.
//!
//! The hwloc binding's error types stay inside this crate (the binding is a pre-release crate,
//! pinned to one version): what they say is kept in [`HwlocError`], this crate's own type.

use crate::tree::{Source, ranges};
use hwlocality::errors::{HybridError, RawHwlocError};
use hwlocality::path::PathError;
use hwlocality::topology::builder::{FileInputError, StringInputError};
use std::error::Error;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// What hwloc reported when it refused to load or detect a topology, or to say where memory
/// lives: what went wrong ([`HwlocError::kind`]) and hwloc's own message (its `Display`).
///
/// ```
/// use mbsp_topology::{HwlocErrorKind, Machine, TopologyError};
/// let e = Machine::synthetic("core:2\0").unwrap_err();
/// let TopologyError::Synthetic { source, .. } = &e else { panic!("{e}") };
/// assert_eq!(source.kind(), HwlocErrorKind::ContainsNul);
/// assert_eq!(source.to_string(), "topology data string can't contain the NUL char");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HwlocError {
    kind: HwlocErrorKind,
    message: String,
}

/// What kind of problem hwloc reported, in a [`HwlocError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HwlocErrorKind {
    /// A topology description string or a file path contains a NUL character, which hwloc
    /// cannot take.
    ContainsNul,
    /// A file path is not valid Unicode, which hwloc cannot take.
    NotUnicode,
    /// hwloc rejected its input as invalid: a synthetic description, or an XML file (its path
    /// or its contents).
    Invalid,
    /// An hwloc entry point failed (detecting or building a topology, querying memory).
    Call {
        /// The entry point, e.g. `hwloc_topology_load`.
        api: &'static str,
        /// The `errno` value it set, if it set one.
        errno: Option<i32>,
    },
    /// Another problem (a memory query hwloc refused before calling the system); the message
    /// says which.
    Other,
}

impl HwlocError {
    /// What went wrong.
    pub fn kind(&self) -> HwlocErrorKind {
        self.kind
    }

    fn new(kind: HwlocErrorKind, message: impl fmt::Display) -> Self {
        HwlocError {
            kind,
            message: message.to_string(),
        }
    }

    /// A topology description string hwloc did not take.
    pub(crate) fn from_input(e: StringInputError) -> Self {
        let kind = match e {
            StringInputError::ContainsNul => HwlocErrorKind::ContainsNul,
            StringInputError::Invalid => HwlocErrorKind::Invalid,
        };
        HwlocError::new(kind, e)
    }

    /// A topology file hwloc did not take.
    pub(crate) fn from_file(e: FileInputError) -> Self {
        let kind = match &e {
            FileInputError::BadRustPath(PathError::ContainsNul) => HwlocErrorKind::ContainsNul,
            FileInputError::BadRustPath(PathError::NotUnicode) => HwlocErrorKind::NotUnicode,
            FileInputError::Invalid(_) => HwlocErrorKind::Invalid,
        };
        HwlocError::new(kind, e)
    }

    /// A failed hwloc entry point.
    pub(crate) fn from_raw(e: RawHwlocError) -> Self {
        let kind = HwlocErrorKind::Call {
            api: e.api,
            errno: e.errno.map(|n| n.0),
        };
        HwlocError::new(kind, e)
    }

    /// An error of an hwloc call that also checks its arguments on the Rust side.
    pub(crate) fn from_hybrid<E: Error>(e: HybridError<E>) -> Self {
        match e {
            HybridError::Hwloc(raw) => HwlocError::from_raw(raw),
            HybridError::Rust(e) => HwlocError::new(HwlocErrorKind::Other, e),
        }
    }
}

impl fmt::Display for HwlocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Error for HwlocError {}

/// A topology could not be loaded.
///
/// `source()` is hwloc's error (a [`HwlocError`]) or the [`std::io::Error`] of an unreadable
/// XML file.
///
/// ```
/// use mbsp_topology::{Machine, TopologyError};
/// let e = Machine::from_spec("synthetic:package:2 banana:3").unwrap_err();
/// assert!(matches!(&e, TopologyError::Synthetic { description, .. } if description == "package:2 banana:3"));
/// assert!(std::error::Error::source(&e).is_some(), "hwloc's own error");
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum TopologyError {
    /// hwloc could not detect the machine this program runs on.
    Detect {
        /// hwloc's error.
        source: HwlocError,
    },
    /// hwloc rejected a synthetic description.
    Synthetic {
        /// The description, e.g. `package:2 banana:3`.
        description: String,
        /// hwloc's error.
        source: HwlocError,
    },
    /// An XML file could not be opened (it does not exist, is not a regular file, or cannot be
    /// read).
    XmlFile {
        /// The file.
        path: PathBuf,
        /// Why it could not be opened.
        source: Arc<std::io::Error>,
    },
    /// hwloc rejected an XML file.
    Xml {
        /// The file.
        path: PathBuf,
        /// hwloc's error.
        source: HwlocError,
    },
    /// An [`ENV`](crate::ENV)-style specification (`MBSP_TOPOLOGY`) is neither
    /// `synthetic:...`, `xml:...` nor a path ending in `.xml`.
    EnvSpec {
        /// The variable the specification is written for (`MBSP_TOPOLOGY`).
        var: &'static str,
        /// The specification.
        value: String,
    },
    /// The topology loaded but has no PUs (hardware threads).
    NoPus {
        /// Where the topology came from.
        origin: Source,
    },
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopologyError::Detect { source } => {
                write!(f, "cannot detect this machine's topology: {source}")
            }
            TopologyError::Synthetic {
                description,
                source,
            } => write!(
                f,
                "invalid synthetic topology \"{description}\": {source} (expected e.g. \
                 \"package:2 numa:2 core:8 pu:2\")"
            ),
            TopologyError::XmlFile { path, source } => {
                write!(f, "cannot load topology from XML file {}: ", path.display())?;
                if source.kind() == std::io::ErrorKind::NotFound {
                    f.write_str("no such file")
                } else {
                    write!(f, "{source}")
                }
            }
            TopologyError::Xml { path, source } => write!(
                f,
                "cannot load topology from XML file {}: {source}",
                path.display()
            ),
            TopologyError::EnvSpec { var, value } => write!(
                f,
                "{var}=\"{value}\" is not understood: use synthetic:<description>, xml:<path> or \
                 a path ending in .xml"
            ),
            TopologyError::NoPus { origin } => write!(f, "the topology ({origin}) has no PUs"),
        }
    }
}

impl Error for TopologyError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            TopologyError::Detect { source }
            | TopologyError::Synthetic { source, .. }
            | TopologyError::Xml { source, .. } => Some(source),
            TopologyError::XmlFile { source, .. } => Some(&**source),
            TopologyError::EnvSpec { .. } | TopologyError::NoPus { .. } => None,
        }
    }
}

/// A plan could not be made (or a [`Level`](crate::Level) name was not understood).
///
/// ```
/// use mbsp_topology::{Machine, PlanError, Policy, plan};
/// let m = Machine::synthetic("package:2 core:2 pu:2").unwrap().machine;
/// let e = plan(&m, &m.whole(), 2, &Policy::Manual(vec![vec![0], vec![9]])).unwrap_err();
/// assert!(matches!(e, PlanError::ManualNoSuchCpu { pid: 1, cpu: 9, .. }));
/// assert_eq!(
///     e.to_string(),
///     "manual CPU set for pid 1 names CPU 9, which does not exist (this machine has CPUs 0-7)"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PlanError {
    /// A plan for `p = 0` processes was asked for.
    ZeroProcesses,
    /// The domain to place processes in has no PUs.
    EmptyDomain,
    /// A manual policy gives a number of CPU sets different from the number of processes.
    ManualCount {
        /// CPU sets given.
        sets: usize,
        /// Processes to place.
        procs: usize,
    },
    /// A manual CPU set is empty.
    ManualEmpty {
        /// The process whose set it is.
        pid: usize,
    },
    /// A manual CPU set names a CPU the machine does not have.
    ManualNoSuchCpu {
        /// The process whose set it is.
        pid: usize,
        /// The CPU (OS index).
        cpu: u32,
        /// The CPUs (OS indices) the machine has.
        available: Vec<u32>,
    },
    /// A manual CPU set names a CPU outside the domain being placed.
    ManualOutside {
        /// The process whose set it is.
        pid: usize,
        /// The CPU (OS index).
        cpu: u32,
        /// The CPUs (OS indices) of the domain.
        domain: Vec<u32>,
    },
    /// A level name is none of package, numa, core, pu (or their aliases).
    UnknownLevel {
        /// The name.
        name: String,
    },
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::ZeroProcesses => f.write_str("a plan needs at least 1 process, but p = 0"),
            PlanError::EmptyDomain => f.write_str("cannot place processes in an empty set of PUs"),
            PlanError::ManualCount { sets, procs } => write!(
                f,
                "manual affinity gives {sets} CPU sets for {procs} processes"
            ),
            PlanError::ManualEmpty { pid } => write!(f, "manual CPU set for pid {pid} is empty"),
            PlanError::ManualNoSuchCpu {
                pid,
                cpu,
                available,
            } => write!(
                f,
                "manual CPU set for pid {pid} names CPU {cpu}, which does not exist (this \
                 machine has CPUs {})",
                ranges(available.iter().copied())
            ),
            PlanError::ManualOutside { pid, cpu, domain } => write!(
                f,
                "manual CPU set for pid {pid} names CPU {cpu}, outside the CPUs being placed ({})",
                ranges(domain.iter().copied())
            ),
            PlanError::UnknownLevel { name } => {
                write!(f, "unknown level \"{name}\": use package, numa, core or pu")
            }
        }
    }
}

impl Error for PlanError {}

/// Where the pages of a memory area live could not be found out
/// ([`Binder::memory_nodes`](crate::Binder::memory_nodes)).
///
/// ```
/// use mbsp_topology::{Binder, LocationError, Machine};
/// let loaded = Machine::synthetic("package:2 core:2 pu:1").unwrap();
/// let e = Binder::new(&loaded).memory_nodes(&[1, 2, 3]).unwrap_err();
/// assert!(matches!(e, LocationError::NotThisMachine { .. }));
/// assert!(e.to_string().contains("not this machine"), "{e}");
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum LocationError {
    /// The machine tree was loaded (synthetic or XML), not detected: it describes no memory this
    /// process can ask the OS about.
    NotThisMachine {
        /// Where the machine tree came from.
        origin: Source,
    },
    /// The OS (through hwloc) refused the query.
    Query {
        /// hwloc's error.
        source: HwlocError,
    },
}

impl fmt::Display for LocationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LocationError::NotThisMachine { origin } => write!(
                f,
                "memory location unknown: the machine tree is not this machine ({origin})"
            ),
            LocationError::Query { source } => {
                write!(f, "cannot query the memory location: {source}")
            }
        }
    }
}

impl Error for LocationError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            LocationError::NotThisMachine { .. } => None,
            LocationError::Query { source } => Some(source),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn chain(e: &dyn Error) -> Vec<String> {
        let mut out = vec![e.to_string()];
        let mut cur = e.source();
        while let Some(s) = cur {
            out.push(s.to_string());
            cur = s.source();
        }
        out
    }

    #[test]
    fn topology_error_messages_and_sources() {
        let raw = RawHwlocError {
            api: "hwloc_topology_load",
            errno: None,
        };
        let e = TopologyError::Detect {
            source: HwlocError::from_raw(raw),
        };
        assert_eq!(
            e.to_string(),
            format!("cannot detect this machine's topology: {raw}")
        );
        let s = e.source().expect("hwloc's error");
        assert_eq!(
            s.downcast_ref::<HwlocError>().map(HwlocError::kind),
            Some(HwlocErrorKind::Call {
                api: "hwloc_topology_load",
                errno: None
            })
        );

        let e = TopologyError::Synthetic {
            description: "core:x".into(),
            source: HwlocError::from_input(StringInputError::Invalid),
        };
        assert_eq!(
            e.to_string(),
            "invalid synthetic topology \"core:x\": hwloc rejected the topology data string as \
             invalid (expected e.g. \"package:2 numa:2 core:8 pu:2\")"
        );
        assert_eq!(
            e.source()
                .unwrap()
                .downcast_ref::<HwlocError>()
                .unwrap()
                .kind(),
            HwlocErrorKind::Invalid
        );
        let e = HwlocError::from_input(StringInputError::ContainsNul);
        assert_eq!(
            (e.kind(), e.to_string()),
            (
                HwlocErrorKind::ContainsNul,
                StringInputError::ContainsNul.to_string()
            )
        );

        let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
        let e = TopologyError::XmlFile {
            path: "/no/m.xml".into(),
            source: Arc::new(missing),
        };
        assert_eq!(
            e.to_string(),
            "cannot load topology from XML file /no/m.xml: no such file"
        );
        let io = e.source().unwrap().downcast_ref::<std::io::Error>();
        assert_eq!(
            io.map(std::io::Error::kind),
            Some(std::io::ErrorKind::NotFound)
        );
        let e = TopologyError::XmlFile {
            path: "/etc".into(),
            source: Arc::new(std::io::Error::other("not a regular file")),
        };
        assert_eq!(
            e.to_string(),
            "cannot load topology from XML file /etc: not a regular file"
        );

        let e = TopologyError::Xml {
            path: "m.xml".into(),
            source: HwlocError::from_file(FileInputError::Invalid(Path::new("m.xml").into())),
        };
        assert_eq!(
            chain(&e),
            [
                "cannot load topology from XML file m.xml: hwloc rejected topology input file \
                 m.xml as invalid",
                "hwloc rejected topology input file m.xml as invalid"
            ]
        );
        assert!(e.source().unwrap().is::<HwlocError>());
        for (path, kind) in [
            (PathError::ContainsNul, HwlocErrorKind::ContainsNul),
            (PathError::NotUnicode, HwlocErrorKind::NotUnicode),
        ] {
            let message = path.to_string();
            let e = HwlocError::from_file(FileInputError::BadRustPath(path));
            assert_eq!((e.kind(), e.to_string()), (kind, message));
        }

        let e = TopologyError::EnvSpec {
            var: crate::ENV,
            value: "nonsense".into(),
        };
        assert_eq!(
            e.to_string(),
            "MBSP_TOPOLOGY=\"nonsense\" is not understood: use synthetic:<description>, \
             xml:<path> or a path ending in .xml"
        );
        assert!(e.source().is_none());

        let e = TopologyError::NoPus {
            origin: Source::Synthetic("x".into()),
        };
        assert_eq!(e.to_string(), "the topology (synthetic \"x\") has no PUs");
        assert!(e.source().is_none());
    }

    #[test]
    fn plan_error_messages() {
        let cases = [
            (
                PlanError::ZeroProcesses,
                "a plan needs at least 1 process, but p = 0",
            ),
            (
                PlanError::EmptyDomain,
                "cannot place processes in an empty set of PUs",
            ),
            (
                PlanError::ManualCount { sets: 1, procs: 3 },
                "manual affinity gives 1 CPU sets for 3 processes",
            ),
            (
                PlanError::ManualEmpty { pid: 2 },
                "manual CPU set for pid 2 is empty",
            ),
            (
                PlanError::ManualNoSuchCpu {
                    pid: 1,
                    cpu: 9,
                    available: (0..8).collect(),
                },
                "manual CPU set for pid 1 names CPU 9, which does not exist (this machine has \
                 CPUs 0-7)",
            ),
            (
                PlanError::ManualOutside {
                    pid: 0,
                    cpu: 5,
                    domain: vec![0, 1, 2, 3],
                },
                "manual CPU set for pid 0 names CPU 5, outside the CPUs being placed (0-3)",
            ),
            (
                PlanError::UnknownLevel {
                    name: "rack".into(),
                },
                "unknown level \"rack\": use package, numa, core or pu",
            ),
        ];
        for (e, msg) in cases {
            assert_eq!(e.to_string(), msg);
            assert!(e.source().is_none());
        }
    }
}
