//! What goes wrong reading a Matrix Market file: [`MtxError`] (the file, the line and the
//! problem) and its [`MtxErrorKind`].

use super::header::Field;
use super::shown;
use crate::text::MAX_LINE;
use std::fmt;
use std::io;

/// Rows or columns, in [`MtxErrorKind`].
///
/// ```
/// use mbsp_algorithms::sparse::mtx::{self, Axis, MtxErrorKind, ReadOptions};
/// let text = "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 0\n";
/// let e = mtx::read(text.as_bytes(), "p.mtx", &ReadOptions::default()).unwrap_err();
/// assert!(matches!(
///     e.kind(),
///     MtxErrorKind::IndexOutOfRange { axis: Axis::Column, index: 0, bound: 2 }
/// ));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    /// The first index of an entry.
    Row,
    /// The second index of an entry.
    Column,
}

impl fmt::Display for Axis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Axis::Row => "row",
            Axis::Column => "column",
        })
    }
}

/// What went wrong, in an [`MtxError`].
///
/// ```
/// use mbsp_algorithms::sparse::mtx::{self, MtxErrorKind, ReadOptions};
/// let text = "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n";
/// let e = mtx::read(text.as_bytes(), "dense.mtx", &ReadOptions::default()).unwrap_err();
/// assert!(matches!(e.kind(), MtxErrorKind::Unsupported(_)));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum MtxErrorKind {
    /// Opening or reading the file failed.
    Io(io::Error),
    /// The gzip data is corrupt or ends early.
    Gzip(io::Error),
    /// The first line is not a valid Matrix Market banner.
    Banner(String),
    /// A valid Matrix Market file of a kind this reader does not read (dense `array`, `vector`).
    Unsupported(String),
    /// The file is `complex` and [`ReadOptions::complex`](super::ReadOptions::complex) is
    /// [`Complex::Refuse`](super::Complex::Refuse).
    ComplexRefused,
    /// The size line is missing or malformed, or inconsistent with the banner.
    SizeLine(String),
    /// The matrix has more rows or columns than `u32` indices can address.
    TooLarge {
        /// Declared rows.
        rows: u64,
        /// Declared columns.
        cols: u64,
    },
    /// An entry line has the wrong number of fields.
    FieldCount {
        /// Fields an entry of this field type has.
        expected: usize,
        /// Fields on the line.
        found: usize,
        /// The field type of the file.
        field: Field,
    },
    /// An index that is not a non-negative integer (or does not fit in 64 bits).
    BadIndex {
        /// Which index.
        axis: Axis,
        /// The token found.
        token: String,
    },
    /// An index outside `1..=bound`.
    IndexOutOfRange {
        /// Which index.
        axis: Axis,
        /// The 1-based index found.
        index: u64,
        /// Number of rows or columns of the matrix.
        bound: usize,
    },
    /// A value that is not a number of the file's field type.
    BadValue {
        /// The token found.
        token: String,
        /// The field type of the file.
        field: Field,
    },
    /// A diagonal entry in a skew-symmetric file (whose diagonal is zero and not stored).
    SkewDiagonal {
        /// The 1-based index `i` of the entry `(i, i)`.
        index: u64,
    },
    /// The file ends before the declared number of entries.
    TooFewEntries {
        /// Entries the size line declares.
        declared: usize,
        /// Entries the file has.
        found: usize,
    },
    /// The file has more entries than declared; the error's line is the first extra one.
    TooManyEntries {
        /// Entries the size line declares.
        declared: usize,
    },
    /// A line longer than [`MAX_LINE`] bytes: not a Matrix Market file
    /// (or a damaged one).
    LineTooLong {
        /// The most bytes a line may hold.
        limit: usize,
        /// The start of the line, as [`text::shown`](crate::text::shown) shows it.
        start: String,
    },
}

impl fmt::Display for MtxErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MtxErrorKind::Io(e) => write!(f, "I/O error: {e}"),
            MtxErrorKind::Gzip(e) => write!(f, "the gzip data is corrupt or truncated: {e}"),
            MtxErrorKind::Banner(s) | MtxErrorKind::Unsupported(s) => f.write_str(s),
            MtxErrorKind::ComplexRefused => f.write_str(
                "the matrix is complex; to read its real part, pass \
                 ReadOptions { complex: Complex::RealPart }",
            ),
            MtxErrorKind::SizeLine(s) => write!(f, "bad size line: {s}"),
            MtxErrorKind::TooLarge { rows, cols } => write!(
                f,
                "the matrix is {rows} x {cols}, too large for u32 indices \
                 (at most {} rows and columns)",
                u32::MAX
            ),
            MtxErrorKind::FieldCount {
                expected,
                found,
                field,
            } => write!(
                f,
                "expected {expected} fields ({}) in a {field} matrix, found {found}",
                field.layout()
            ),
            MtxErrorKind::BadIndex { axis, token } => {
                write!(f, "{axis} index '{token}' is not a positive integer")
            }
            MtxErrorKind::IndexOutOfRange { axis, index, bound } => write!(
                f,
                "{axis} index {index} is out of range: indices are 1-based and the matrix has \
                 {bound} {axis}s"
            ),
            MtxErrorKind::BadValue { token, field } => match field {
                Field::Integer => write!(f, "value '{token}' is not an integer"),
                _ => write!(f, "value '{token}' is not a number"),
            },
            MtxErrorKind::SkewDiagonal { index } => write!(
                f,
                "diagonal entry ({index}, {index}) in a skew-symmetric matrix, whose diagonal is \
                 zero and must not be stored"
            ),
            MtxErrorKind::TooFewEntries { declared, found } => write!(
                f,
                "the file ends after {found} {}, but the size line declares {declared}",
                if *found == 1 { "entry" } else { "entries" }
            ),
            MtxErrorKind::TooManyEntries { declared } => {
                write!(f, "more entries than the {declared} the size line declares")
            }
            MtxErrorKind::LineTooLong { limit, start } => write!(
                f,
                "the line is longer than {limit} bytes, the most a line may hold (it starts \
                 '{start}'): not a Matrix Market file, or a damaged one"
            ),
        }
    }
}

/// A Matrix Market file that could not be read: the file, the line and what was wrong.
///
/// Displays as `FILE: line N: PROBLEM` (or `FILE: PROBLEM` when no line applies).
///
/// ```
/// use mbsp_algorithms::sparse::mtx::{self, ReadOptions};
/// let text = "%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1.0\n";
/// let e = mtx::read(text.as_bytes(), "a.mtx", &ReadOptions::default()).unwrap_err();
/// assert_eq!((e.file(), e.line()), ("a.mtx", Some(3)));
/// assert!(matches!(e.kind(), mtx::MtxErrorKind::IndexOutOfRange { .. }));
/// assert_eq!(
///     e.to_string(),
///     "a.mtx: line 3: row index 3 is out of range: indices are 1-based and the matrix has 2 rows"
/// );
/// ```
#[derive(Debug)]
pub struct MtxError {
    file: String,
    line: Option<usize>,
    kind: MtxErrorKind,
}

impl MtxError {
    pub(super) fn new(file: &str, line: Option<usize>, kind: MtxErrorKind) -> Self {
        MtxError {
            file: file.to_string(),
            line,
            kind,
        }
    }

    /// The file name (the path, or the `name` given to [`read`](super::read())).
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The 1-based line the problem is on, if it is on one.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// What went wrong.
    pub fn kind(&self) -> &MtxErrorKind {
        &self.kind
    }
}

impl fmt::Display for MtxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}: line {l}: {}", self.file, self.kind),
            None => write!(f, "{}: {}", self.file, self.kind),
        }
    }
}

impl std::error::Error for MtxError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            MtxErrorKind::Io(e) | MtxErrorKind::Gzip(e) => Some(e),
            _ => None,
        }
    }
}

/// An I/O error while reading decompressed data: decoder errors are reported as gzip problems.
pub(super) fn read_error(gz: bool, e: io::Error) -> MtxErrorKind {
    match e.kind() {
        io::ErrorKind::InvalidData | io::ErrorKind::InvalidInput | io::ErrorKind::UnexpectedEof
            if gz =>
        {
            MtxErrorKind::Gzip(e)
        }
        _ => MtxErrorKind::Io(e),
    }
}

/// A line longer than [`MAX_LINE`] bytes, starting with `start`.
pub(super) fn long_line(start: &[u8]) -> MtxErrorKind {
    MtxErrorKind::LineTooLong {
        limit: MAX_LINE,
        start: shown(start),
    }
}
