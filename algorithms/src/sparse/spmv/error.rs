//! [`SpmvError`]: why a multiply could not be planned, or a distributed vector not assembled.

use crate::sparse::ShapeError;
use crate::sparse::partition::PartitionError;
use std::fmt;

/// Why [`SpmvPlan::new`](super::SpmvPlan::new), a [`HierPlan`](super::HierPlan) constructor or
/// [`SpmvPlan::collect_y`](super::SpmvPlan::collect_y) failed.
///
/// `Display` gives one line, with the text of the cause when there is one (for example
/// `package 1: spmv plan: part 7 is not below p = 2`); [`source`](std::error::Error::source)
/// gives the typed cause.
///
/// ```
/// use mbsp_algorithms::sparse::{CooMatrix, Distribution, spmv::{SpmvError, SpmvPlan}};
/// let a = CooMatrix::new(2, 2, vec![(0, 0, 1.0), (1, 1, 1.0)]).unwrap();
/// let d = Distribution { p: 2, nz_part: vec![0, 5], x_owner: vec![0, 1], y_owner: vec![0, 1] };
/// let e = SpmvPlan::new(&a, &d).unwrap_err();
/// assert!(matches!(e, SpmvError::PartTooLarge { part: 5, p: 2 }));
/// assert_eq!(e.to_string(), "spmv plan: part 5 is not below p = 2");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum SpmvError {
    /// The matrix is inconsistent.
    Matrix(ShapeError),
    /// The distribution has `p = 0`.
    NoProcesses,
    /// The distribution's arrays do not fit the matrix.
    OtherMatrix {
        /// Length of `nz_part`.
        nz_parts: usize,
        /// Length of `x_owner`.
        x_owners: usize,
        /// Length of `y_owner`.
        y_owners: usize,
        /// Rows of the matrix.
        rows: usize,
        /// Columns of the matrix.
        cols: usize,
        /// Nonzeros of the matrix.
        nnz: usize,
    },
    /// A nonzero part or vector owner that is not a process of the distribution.
    PartTooLarge {
        /// The part found.
        part: u32,
        /// Processes of the distribution.
        p: usize,
    },
    /// A hierarchical plan got a number of inner distributions other than its packages.
    InnerCount {
        /// Inner distributions given.
        inner: usize,
        /// Packages of the top distribution.
        packages: usize,
    },
    /// The plan of one package's part over its cores failed.
    Package {
        /// The package (process of the top level).
        package: usize,
        /// Why.
        source: Box<SpmvError>,
    },
    /// Partitioning failed.
    Partition(PartitionError),
    /// [`SpmvPlan::collect_y`](super::SpmvPlan::collect_y) got a number of parts other than
    /// the plan's processes.
    Parts {
        /// Parts given.
        given: usize,
        /// Processes of the plan.
        p: usize,
    },
    /// A process's part of a distributed vector has the wrong length.
    PartLength {
        /// The process.
        pid: usize,
        /// Entries given.
        len: usize,
        /// Entries the process owns.
        owned: usize,
    },
    /// [`SharedVectors::new`](super::SharedVectors::new) got an `x` or `y` whose length is not
    /// the matrix's columns or rows.
    VectorLength {
        /// `"x"` or `"y"`.
        which: &'static str,
        /// Entries given.
        len: usize,
        /// Entries the matrix needs (columns for `x`, rows for `y`).
        needed: usize,
    },
}

impl fmt::Display for SpmvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpmvError::Matrix(e) => write!(f, "spmv plan: {e}"),
            SpmvError::NoProcesses => f.write_str("spmv plan: the distribution has p = 0"),
            SpmvError::OtherMatrix {
                nz_parts,
                x_owners,
                y_owners,
                rows,
                cols,
                nnz,
            } => write!(
                f,
                "spmv plan: the distribution is for another matrix ({nz_parts} nonzero parts, \
                 {x_owners} x owners, {y_owners} y owners; the matrix is {rows} x {cols} with \
                 {nnz} nonzeros)"
            ),
            SpmvError::PartTooLarge { part, p } => {
                write!(f, "spmv plan: part {part} is not below p = {p}")
            }
            SpmvError::InnerCount { inner, packages } => write!(
                f,
                "spmv hier plan: {inner} inner distributions for {packages} packages"
            ),
            SpmvError::Package { package, source } => write!(f, "package {package}: {source}"),
            SpmvError::Partition(e) => write!(f, "{e}"),
            SpmvError::Parts { given, p } => write!(
                f,
                "spmv collect: {given} parts for a plan of {p} processes (one per process, in \
                 pid order)"
            ),
            SpmvError::PartLength { pid, len, owned } => write!(
                f,
                "spmv collect: the part of process {pid} has {len} entries; it owns {owned}"
            ),
            SpmvError::VectorLength { which, len, needed } => write!(
                f,
                "spmv shared vectors: {which} has {len} entries; the matrix needs {needed}"
            ),
        }
    }
}

impl std::error::Error for SpmvError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SpmvError::Matrix(e) => Some(e),
            SpmvError::Package { source, .. } => Some(source.as_ref()),
            SpmvError::Partition(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ShapeError> for SpmvError {
    fn from(e: ShapeError) -> Self {
        SpmvError::Matrix(e)
    }
}

impl From<PartitionError> for SpmvError {
    fn from(e: PartitionError) -> Self {
        SpmvError::Partition(e)
    }
}

/// For callers whose errors are text (command-line tools): the error's message.
impl From<SpmvError> for String {
    fn from(e: SpmvError) -> Self {
        e.to_string()
    }
}
