//! Matrix Market reader and writer.
//!
//! # What is read
//!
//! * The coordinate format: banner `%%MatrixMarket matrix coordinate <field> <symmetry>` (the
//!   words are case-insensitive), then a size line `rows cols entries`, then one entry
//!   `row col [value]` per line with 1-based indices.
//! * Fields `real`, `integer`, `pattern` (every value is `1.0`) and `complex` (refused unless
//!   [`ReadOptions::complex`] is [`Complex::RealPart`], which keeps the real part).
//! * Symmetries `general`, `symmetric`, `skew-symmetric` and `hermitian`. The last three are
//!   expanded to the full matrix: an off-diagonal entry `(i, j, v)` also gives `(j, i, v)`, or
//!   `(j, i, -v)` for skew-symmetric (whose diagonal must not be stored); for hermitian the real
//!   part of `conj(v)` is the real part of `v`.
//! * Comment lines (`%`) and blank lines anywhere; `\r\n` line ends; gzip-compressed input
//!   (a path ending in `.gz`, or any input starting with the gzip magic bytes).
//! * Values are exactly what [`str::parse::<f64>`](str::parse) gives for the token.
//! * Lines of at most [`MAX_LINE`] bytes (1 MiB): a longer one is an
//!   error ([`MtxErrorKind::LineTooLong`]), so that input without line ends (`/dev/zero`, a
//!   binary file) costs a bounded amount of memory. Messages quote the input with control
//!   characters escaped ([`text::shown`]).
//! * The dense `array` format and `vector` objects are not read (a clear error says so).
//!
//! # What is returned
//!
//! A [`CooMatrix`] whose entries are **sorted by (row, column)** with **no duplicates**: entries
//! with the same position after the symmetric expansion are summed, in file order. Explicit zeros
//! (and duplicates that sum to zero) are kept as stored entries.
//!
//! # Errors
//!
//! Every problem is an [`MtxError`] naming the file, the line (where there is one) and what is
//! wrong; nothing in the reader panics on bad input. Nothing is allocated by what the size line
//! declares: the entries are stored as they arrive, so a header that promises 4e9 x 4e9 or
//! 10^12 entries costs nothing until the entries are there (the row counts of the assembly are
//! only made for a matrix with at least a quarter as many entries as rows).
//!
//! # Cost
//!
//! Time `O(bytes + nnz + m)`, plus `O(r log r)` for a row of `r` entries that the file does not
//! already list in column order. Blocks of 1 MiB are parsed in parallel on rayon's pool while the
//! calling thread reads (and decompresses) the next ones; the expansion, the counting sort by row
//! and the summing of duplicates then run on the calling thread. Memory: the stored entries
//! (16 bytes each), the expanded output (16 bytes per nonzero), `16 (m + 1)` bytes of row offsets
//! and a few blocks in flight. `G3_circuit.mtx.gz` (18 MB of gzip, 106 MB of text, 7.7 M
//! nonzeros after expansion) reads in about 0.5-0.8 s on two cores, of which decompressing
//! alone takes 0.2-0.4 s.

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

use super::CooMatrix;
use crate::text::{self, Line, MAX_LINE};
use crate::whole_file;

/// What to do with a `complex` file.
///
/// ```
/// use mbsp_algorithms::sparse::mtx::{Complex, ReadOptions};
/// assert_eq!(ReadOptions::default().complex, Complex::Refuse);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Complex {
    /// Fail with [`MtxErrorKind::ComplexRefused`]: a complex matrix silently read as real is
    /// rarely what was meant.
    #[default]
    Refuse,
    /// Keep the real part of each value.
    RealPart,
}

/// Options of [`read_path_with`] and [`read`].
///
/// ```
/// use mbsp_algorithms::sparse::mtx::{self, Complex, ReadOptions};
/// let text = "%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 2.5 -1\n";
/// let opts = ReadOptions { complex: Complex::RealPart };
/// let a = mtx::read(text.as_bytes(), "in-memory", &opts).unwrap();
/// assert_eq!(a.vals, vec![2.5]);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// What to do with a `complex` file; [`Complex::Refuse`] by default.
    pub complex: Complex,
}

/// The `<field>` word of the banner: the type of the stored values.
///
/// ```
/// use mbsp_algorithms::sparse::mtx::Field;
/// assert_eq!(Field::Pattern.to_string(), "pattern");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// Floating-point values.
    Real,
    /// Integer values (read as `f64`).
    Integer,
    /// A real and an imaginary part per entry.
    Complex,
    /// No values: the entry's position only.
    Pattern,
}

impl Field {
    fn name(self) -> &'static str {
        match self {
            Field::Real => "real",
            Field::Integer => "integer",
            Field::Complex => "complex",
            Field::Pattern => "pattern",
        }
    }

    /// The fields of an entry line, for messages.
    fn layout(self) -> &'static str {
        match self {
            Field::Pattern => "row column",
            Field::Real | Field::Integer => "row column value",
            Field::Complex => "row column real imaginary",
        }
    }

    fn width(self) -> usize {
        match self {
            Field::Pattern => 2,
            Field::Real | Field::Integer => 3,
            Field::Complex => 4,
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The `<symmetry>` word of the banner: which part of the matrix the file stores.
///
/// ```
/// use mbsp_algorithms::sparse::mtx::Symmetry;
/// assert_eq!(Symmetry::SkewSymmetric.to_string(), "skew-symmetric");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Symmetry {
    /// Every entry is stored.
    General,
    /// `a_ji = a_ij`; one triangle is stored.
    Symmetric,
    /// `a_ji = -a_ij`; one strict triangle is stored (the diagonal is zero).
    SkewSymmetric,
    /// `a_ji = conj(a_ij)`; one triangle is stored.
    Hermitian,
}

impl Symmetry {
    fn name(self) -> &'static str {
        match self {
            Symmetry::General => "general",
            Symmetry::Symmetric => "symmetric",
            Symmetry::SkewSymmetric => "skew-symmetric",
            Symmetry::Hermitian => "hermitian",
        }
    }
}

impl fmt::Display for Symmetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The banner and size line of a coordinate Matrix Market file.
///
/// ```
/// use mbsp_algorithms::sparse::mtx::{self, Field, Symmetry};
/// let path = std::env::temp_dir().join(format!("mtx-header-doc-{}.mtx", std::process::id()));
/// std::fs::write(&path, "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n2 1\n3 2\n")
///     .unwrap();
/// let h = mtx::read_header(&path).unwrap();
/// assert_eq!((h.field, h.symmetry), (Field::Pattern, Symmetry::Symmetric));
/// assert_eq!((h.rows, h.cols, h.entries), (3, 3, 2));
/// std::fs::remove_file(&path).unwrap();
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Type of the values.
    pub field: Field,
    /// Which part of the matrix is stored.
    pub symmetry: Symmetry,
    /// Number of rows `m`.
    pub rows: usize,
    /// Number of columns `n`.
    pub cols: usize,
    /// Number of entry lines the size line declares (before any symmetric expansion).
    pub entries: usize,
}

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
    /// The file is `complex` and [`ReadOptions::complex`] is [`Complex::Refuse`].
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
        /// The start of the line, as [`text::shown`] shows it.
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
                "the line is longer than {limit} bytes, the most a line may hold (it starts                  '{start}'): not a Matrix Market file, or a damaged one"
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
    fn new(file: &str, line: Option<usize>, kind: MtxErrorKind) -> Self {
        MtxError {
            file: file.to_string(),
            line,
            kind,
        }
    }

    /// The file name (the path, or the `name` given to [`read`]).
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

/// Reads a Matrix Market file with the default options (complex files are refused).
///
/// A path ending in `.gz`, or a file starting with the gzip magic bytes, is decompressed on the
/// fly. The entries come back sorted by (row, column), duplicates summed.
///
/// ```
/// use mbsp_algorithms::sparse::mtx;
/// let path = std::env::temp_dir().join(format!("mtx-read-path-doc-{}.mtx", std::process::id()));
/// std::fs::write(&path, "%%MatrixMarket matrix coordinate real symmetric\n2 2 2\n1 1 4\n2 1 -1\n")
///     .unwrap();
/// let a = mtx::read_path(&path).unwrap();
/// // Sorted by (row, column); the off-diagonal entry is mirrored.
/// assert_eq!((a.row_idx, a.col_idx), (vec![0, 0, 1], vec![0, 1, 0]));
/// assert_eq!(a.vals, vec![4.0, -1.0, -1.0]);
/// std::fs::remove_file(&path).unwrap();
/// ```
pub fn read_path(path: impl AsRef<Path>) -> Result<CooMatrix, MtxError> {
    read_path_with(path, &ReadOptions::default())
}

/// Reads a Matrix Market file with the given options; see [`read_path`].
///
/// ```
/// use mbsp_algorithms::sparse::mtx::{self, Complex, ReadOptions};
/// let path = std::env::temp_dir().join(format!("mtx-read-with-doc-{}.mtx", std::process::id()));
/// std::fs::write(&path, "%%MatrixMarket matrix coordinate complex hermitian\n2 2 1\n2 1 3 4\n")
///     .unwrap();
/// assert!(mtx::read_path(&path).is_err()); // complex is refused by default
/// let a = mtx::read_path_with(&path, &ReadOptions { complex: Complex::RealPart }).unwrap();
/// assert_eq!((a.row_idx, a.col_idx, a.vals), (vec![0, 1], vec![1, 0], vec![3.0, 3.0]));
/// std::fs::remove_file(&path).unwrap();
/// ```
pub fn read_path_with(path: impl AsRef<Path>, opts: &ReadOptions) -> Result<CooMatrix, MtxError> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let file = File::open(path).map_err(|e| MtxError::new(&name, None, MtxErrorKind::Io(e)))?;
    read_impl(
        BufReader::with_capacity(1 << 16, file),
        &name,
        opts,
        has_gz_extension(path),
    )
}

/// Reads a Matrix Market matrix from `reader`; `name` stands for the file in error messages.
///
/// Input starting with the gzip magic bytes is decompressed. The entries come back sorted by
/// (row, column), duplicates summed.
///
/// ```
/// use mbsp_algorithms::sparse::mtx::{self, ReadOptions};
/// let text = "%%MatrixMarket matrix coordinate integer general\n% a comment\n2 3 3\n\
///             2 3 7\n1 2 -1\n2 3 1\n";
/// let a = mtx::read(text.as_bytes(), "in-memory", &ReadOptions::default()).unwrap();
/// assert_eq!((a.rows, a.cols), (2, 3));
/// assert_eq!((a.row_idx, a.col_idx, a.vals), (vec![0, 1], vec![1, 2], vec![-1.0, 8.0]));
/// ```
pub fn read<R: BufRead>(reader: R, name: &str, opts: &ReadOptions) -> Result<CooMatrix, MtxError> {
    read_impl(reader, name, opts, false)
}

/// Reads only the banner and size line of a Matrix Market file (cheap, also for `.gz`).
///
/// Unlike [`read_path`], a complex file is not an error here.
///
/// ```
/// use mbsp_algorithms::sparse::mtx::{self, Field, Symmetry};
/// let path = std::env::temp_dir().join(format!("mtx-read-header-doc-{}.mtx", std::process::id()));
/// let text = "%%MatrixMarket matrix coordinate complex hermitian\n% c\n5 5 9\n";
/// std::fs::write(&path, text).unwrap();
/// let h = mtx::read_header(&path).unwrap(); // only two lines are read: no error about entries
/// assert_eq!((h.field, h.symmetry, h.entries), (Field::Complex, Symmetry::Hermitian, 9));
/// std::fs::remove_file(&path).unwrap();
/// ```
pub fn read_header(path: impl AsRef<Path>) -> Result<Header, MtxError> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let file = File::open(path).map_err(|e| MtxError::new(&name, None, MtxErrorKind::Io(e)))?;
    let mut r = BufReader::new(file);
    let gz = has_gz_extension(path) || starts_with_gzip(&mut r, &name)?;
    let h = if gz {
        parse_header(
            &mut BufReader::new(flate2::bufread::MultiGzDecoder::new(r)),
            &name,
            true,
            false,
        )?
    } else {
        parse_header(&mut r, &name, false, false)?
    };
    Ok(h.header)
}

/// Writes `a` to a file in Matrix Market format; see [`write()`]. A path ending in `.gz` is
/// gzip-compressed. The file is written whole or not at all ([`whole_file::write`]: an error
/// or an interrupt leaves what was at `path` before as it was).
///
/// ```
/// use mbsp_algorithms::sparse::{CooMatrix, mtx};
/// let a = CooMatrix::new(2, 2, vec![(0, 1, 0.1), (1, 0, -3e-300)]).unwrap();
/// let path = std::env::temp_dir().join(format!("mtx-write-doc-{}.mtx.gz", std::process::id()));
/// mtx::write_path(&a, &path).unwrap();
/// assert_eq!(mtx::read_path(&path).unwrap(), a);
/// std::fs::remove_file(&path).unwrap();
/// ```
pub fn write_path(a: &CooMatrix, path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref();
    whole_file::write(path, |file| {
        if has_gz_extension(path) {
            let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
            write(a, &mut gz)?;
            gz.finish()?;
            Ok(())
        } else {
            write(a, file)
        }
    })
}

/// Writes `a` as `%%MatrixMarket matrix coordinate real general`, entries in `a`'s order.
///
/// Values are printed with Rust's shortest round-trip formatting, so [`read`] gives back the
/// same values (infinities included; a NaN reads back as a NaN). The output is buffered
/// internally. Fails with [`io::ErrorKind::InvalidInput`] if `a` is inconsistent
/// ([`CooMatrix::validate`]). Reading the file back gives `a` sorted by (row, column) with
/// duplicates summed.
///
/// ```
/// use mbsp_algorithms::sparse::{CooMatrix, mtx};
/// let a = CooMatrix::new(2, 3, vec![(0, 2, 1.5), (1, 0, -2.0)]).unwrap();
/// let mut out = Vec::new();
/// mtx::write(&a, &mut out).unwrap();
/// assert_eq!(
///     String::from_utf8(out).unwrap(),
///     "%%MatrixMarket matrix coordinate real general\n2 3 2\n1 3 1.5\n2 1 -2.0\n"
/// );
/// ```
pub fn write<W: Write>(a: &CooMatrix, w: W) -> io::Result<()> {
    a.validate()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut w = BufWriter::with_capacity(1 << 16, w);
    writeln!(w, "%%MatrixMarket matrix coordinate real general")?;
    writeln!(w, "{} {} {}", a.rows, a.cols, a.nnz())?;
    for ((&i, &j), &v) in a.row_idx.iter().zip(&a.col_idx).zip(&a.vals) {
        // `{:?}` is the shortest string that parses back to the same f64, and switches to
        // exponent notation for very large or small magnitudes (`{}` would print 1e300 with
        // 300 digits).
        writeln!(w, "{} {} {:?}", i as u64 + 1, j as u64 + 1, v)?;
    }
    w.flush()
}

// ---------------------------------------------------------------------------------------------
// Reading.

/// Size of the blocks the body is cut into: large enough that spawning a task per block costs
/// nothing, small enough that both cores get work early and few blocks wait in memory.
const BLOCK: usize = 1 << 20;
// A line longer than a block can only begin in the carried-over tail (see `read_blocks`).
const _: () = assert!(BLOCK <= MAX_LINE);

fn has_gz_extension(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"))
}

/// Whether the buffered input starts with the gzip magic bytes `1f 8b` (without consuming them).
fn starts_with_gzip<R: BufRead>(r: &mut R, name: &str) -> Result<bool, MtxError> {
    let head = r
        .fill_buf()
        .map_err(|e| MtxError::new(name, None, MtxErrorKind::Io(e)))?;
    Ok(head.starts_with(&[0x1f, 0x8b]))
}

/// An I/O error while reading decompressed data: decoder errors are reported as gzip problems.
fn read_error(gz: bool, e: io::Error) -> MtxErrorKind {
    match e.kind() {
        io::ErrorKind::InvalidData | io::ErrorKind::InvalidInput | io::ErrorKind::UnexpectedEof
            if gz =>
        {
            MtxErrorKind::Gzip(e)
        }
        _ => MtxErrorKind::Io(e),
    }
}

fn read_impl<R: BufRead>(
    mut r: R,
    name: &str,
    opts: &ReadOptions,
    gz_by_name: bool,
) -> Result<CooMatrix, MtxError> {
    if gz_by_name || starts_with_gzip(&mut r, name)? {
        // MultiGzDecoder: concatenated gzip members are one valid gzip file (as `gzip -d` has
        // it). It is not buffered, and the header is read line by line, hence the BufReader.
        let dec = flate2::bufread::MultiGzDecoder::new(r);
        read_decoded(BufReader::with_capacity(1 << 16, dec), name, opts, true)
    } else {
        read_decoded(r, name, opts, false)
    }
}

/// Per-file facts every block parser needs.
struct Ctx {
    field: Field,
    skew: bool,
    rows: u64,
    cols: u64,
}

/// The header plus the number of lines it took (banner, comments, size line).
struct ParsedHeader {
    header: Header,
    lines: usize,
}

fn read_decoded<R: BufRead>(
    mut r: R,
    name: &str,
    opts: &ReadOptions,
    gz: bool,
) -> Result<CooMatrix, MtxError> {
    let ph = parse_header(&mut r, name, gz, opts.complex == Complex::Refuse)?;
    let h = ph.header;
    let ctx = Ctx {
        field: h.field,
        skew: h.symmetry == Symmetry::SkewSymmetric,
        rows: h.rows as u64,
        cols: h.cols as u64,
    };
    let (mut blocks, stopped) = read_blocks(&mut r, &ctx, h.entries);

    // Walk the blocks in file order so that the reported error is the first one in the file,
    // whichever block a thread happened to finish first. A read failure comes after every
    // block read, then the check that no entry is missing.
    let mut line = ph.lines; // lines before the current block
    let mut found = 0usize;
    for b in &mut blocks {
        if found + b.entries.len() > h.entries {
            let k = h.entries - found; // index in this block of the first entry too many
            let l = line + b.line_of_entry(k) + 1;
            let kind = MtxErrorKind::TooManyEntries {
                declared: h.entries,
            };
            return Err(MtxError::new(name, Some(l), kind));
        }
        found += b.entries.len();
        if let Some((l, kind)) = b.error.take() {
            return Err(MtxError::new(name, Some(line + l + 1), kind));
        }
        line += b.lines;
    }
    match stopped {
        Some(Stopped::Io(e)) => {
            return Err(MtxError::new(name, Some(line + 1), read_error(gz, e)));
        }
        Some(Stopped::LongLine(start)) => {
            return Err(MtxError::new(name, Some(line + 1), long_line(&start)));
        }
        None => {}
    }
    if found < h.entries {
        let kind = MtxErrorKind::TooFewEntries {
            declared: h.entries,
            found,
        };
        return Err(MtxError::new(name, Some(line), kind));
    }
    let mirror = h.symmetry != Symmetry::General;
    Ok(assemble(h.rows, h.cols, blocks, mirror, ctx.skew))
}

/// Text of a line or token for a message: without the line end, control characters and bytes
/// that are not UTF-8 escaped, at most 60 characters.
fn shown(bytes: &[u8]) -> String {
    text::shown(bytes, 60)
}

/// Reads one header line into `buf` (bounded by [`MAX_LINE`]); `Ok(false)` at the end of the
/// input. `line` is the line's 1-based number, for the errors.
fn header_line<R: BufRead>(
    r: &mut R,
    buf: &mut Vec<u8>,
    name: &str,
    line: usize,
    gz: bool,
) -> Result<bool, MtxError> {
    match text::read_line(r, buf, MAX_LINE) {
        Ok(Line::Read) => Ok(true),
        Ok(Line::End) => Ok(false),
        Ok(Line::TooLong) => Err(MtxError::new(name, Some(line), long_line(buf))),
        Err(e) => Err(MtxError::new(name, Some(line), read_error(gz, e))),
    }
}

fn long_line(start: &[u8]) -> MtxErrorKind {
    MtxErrorKind::LineTooLong {
        limit: MAX_LINE,
        start: shown(start),
    }
}

/// Reads the banner and the size line, skipping comment and blank lines.
/// With `refuse_complex`, a complex banner is an error.
fn parse_header<R: BufRead>(
    r: &mut R,
    name: &str,
    gz: bool,
    refuse_complex: bool,
) -> Result<ParsedHeader, MtxError> {
    let err = |line: usize, kind| MtxError::new(name, Some(line), kind);
    let mut buf = Vec::new();
    let expected = "'%%MatrixMarket matrix coordinate <field> <symmetry>'";
    let read = match text::read_line(r, &mut buf, MAX_LINE) {
        Ok(l) => l,
        Err(e) => return Err(err(1, read_error(gz, e))),
    };
    if read == Line::End {
        let msg = format!("the file is empty; expected the banner {expected}");
        return Err(err(1, MtxErrorKind::Banner(msg)));
    }
    let banner = String::from_utf8_lossy(&buf).to_ascii_lowercase();
    let words: Vec<&str> = banner.split_ascii_whitespace().collect();
    if words.first() != Some(&"%%matrixmarket") {
        let msg = format!(
            "not a Matrix Market file: the first line must be the banner {expected}, found '{}'",
            shown(&buf)
        );
        return Err(err(1, MtxErrorKind::Banner(msg)));
    }
    // A first line that does not even start like a banner is "not a Matrix Market file" (above),
    // however long it is; one that does but goes on and on is a long line.
    if read == Line::TooLong {
        return Err(err(1, long_line(&buf)));
    }
    if words.len() != 5 {
        let msg = format!(
            "the banner must be {expected} (5 words), found '{}' ({} words)",
            shown(&buf),
            words.len()
        );
        return Err(err(1, MtxErrorKind::Banner(msg)));
    }
    if words[1] != "matrix" {
        let msg = format!(
            "Matrix Market object '{}' is not supported, only 'matrix'",
            shown(words[1].as_bytes())
        );
        return Err(err(1, MtxErrorKind::Unsupported(msg)));
    }
    match words[2] {
        "coordinate" => {}
        "array" => {
            let msg = "dense array format is not supported, only the coordinate format";
            return Err(err(1, MtxErrorKind::Unsupported(msg.to_string())));
        }
        w => {
            let w = shown(w.as_bytes());
            let msg = format!("unknown format '{w}' in the banner: expected coordinate or array");
            return Err(err(1, MtxErrorKind::Banner(msg)));
        }
    }
    let field = match words[3] {
        "real" => Field::Real,
        "integer" => Field::Integer,
        "complex" => Field::Complex,
        "pattern" => Field::Pattern,
        w => {
            let w = shown(w.as_bytes());
            let msg = format!(
                "unknown field '{w}' in the banner: expected real, integer, complex or pattern"
            );
            return Err(err(1, MtxErrorKind::Banner(msg)));
        }
    };
    let symmetry = match words[4] {
        "general" => Symmetry::General,
        "symmetric" => Symmetry::Symmetric,
        "skew-symmetric" => Symmetry::SkewSymmetric,
        "hermitian" => Symmetry::Hermitian,
        w => {
            let w = shown(w.as_bytes());
            let msg = format!(
                "unknown symmetry '{w}' in the banner: expected general, symmetric, \
                 skew-symmetric or hermitian"
            );
            return Err(err(1, MtxErrorKind::Banner(msg)));
        }
    };
    // The format only defines pattern matrices as general or symmetric: a negated or conjugated
    // "1" has no meaning. (A real hermitian matrix is just symmetric and is accepted.)
    if field == Field::Pattern && matches!(symmetry, Symmetry::SkewSymmetric | Symmetry::Hermitian)
    {
        let msg = format!("a pattern matrix cannot be {symmetry}: only general or symmetric");
        return Err(err(1, MtxErrorKind::Banner(msg)));
    }
    if field == Field::Complex && refuse_complex {
        return Err(err(1, MtxErrorKind::ComplexRefused));
    }

    let mut line = 1;
    let size = loop {
        if !header_line(r, &mut buf, name, line + 1, gz)? {
            let msg = "the file ends before the size line 'rows columns entries'".to_string();
            return Err(err(line.max(1), MtxErrorKind::SizeLine(msg)));
        }
        line += 1;
        let t = buf.trim_ascii_start();
        if !t.is_empty() && t[0] != b'%' {
            break t;
        }
    };
    let bad = || {
        let msg = format!(
            "expected three non-negative integers 'rows columns entries', found '{}'",
            shown(size)
        );
        err(line, MtxErrorKind::SizeLine(msg))
    };
    let nums: Vec<u64> = size
        .split(|c| c.is_ascii_whitespace())
        .filter(|t| !t.is_empty())
        .map(|t| {
            std::str::from_utf8(t)
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
        })
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    let &[rows, cols, entries] = nums.as_slice() else {
        return Err(bad());
    };
    if rows > u64::from(u32::MAX) || cols > u64::from(u32::MAX) {
        return Err(err(line, MtxErrorKind::TooLarge { rows, cols }));
    }
    if symmetry != Symmetry::General && rows != cols {
        let msg = format!("a {symmetry} matrix must be square, but it is {rows} x {cols}");
        return Err(err(line, MtxErrorKind::SizeLine(msg)));
    }
    let entries = usize::try_from(entries).map_err(|_| bad())?;
    let header = Header {
        field,
        symmetry,
        rows: rows as usize,
        cols: cols as usize,
        entries,
    };
    Ok(ParsedHeader {
        header,
        lines: line,
    })
}

/// The entries of one block of lines, 0-based, before symmetric expansion.
struct Block {
    entries: Vec<(u32, u32, f64)>,
    /// Lines parsed (all of the block's lines unless `error` is set).
    lines: usize,
    /// Block-local 0-based indices of the comment and blank lines, to find an entry's line.
    skipped: Vec<usize>,
    /// The first bad line (block-local, 0-based) and what is wrong with it.
    error: Option<(usize, MtxErrorKind)>,
}

impl Block {
    /// Block-local 0-based line of entry `k` of the block.
    fn line_of_entry(&self, k: usize) -> usize {
        let mut line = k;
        for &s in &self.skipped {
            if s <= line {
                line += 1;
            } else {
                break;
            }
        }
        line
    }
}

/// Reads the body in blocks cut at line ends and parses them on rayon's pool while this thread
/// goes on reading (and decompressing). Returns the parsed blocks in file order and the error
/// that stopped the reading, if one did (the complete lines read before it are parsed).
///
/// The blocks are parsed independently and put back in file order, so the result does not
/// depend on thread timing. Reading stops early once a block has an error or more entries
/// than declared have been seen: the first error in the file then lies in a block already read.
fn read_blocks<R: Read>(r: &mut R, ctx: &Ctx, declared: usize) -> (Vec<Block>, Option<Stopped>) {
    let stop = AtomicBool::new(false);
    let seen = AtomicUsize::new(0);
    let in_flight = AtomicUsize::new(0);
    // With this many blocks waiting, this thread parses the next block itself: it bounds the
    // memory held in blocks when reading is faster than parsing (an uncompressed file).
    let limit = 2 * rayon::current_num_threads() + 2;
    let (tx, rx) = mpsc::channel::<(usize, Block)>();
    let mut failure: Option<Stopped> = None;

    let parse = |i: usize, buf: Vec<u8>, tx: &mpsc::Sender<(usize, Block)>| {
        let b = parse_block(&buf, ctx);
        drop(buf);
        let total = seen.fetch_add(b.entries.len(), Ordering::Relaxed) + b.entries.len();
        if b.error.is_some() || total > declared {
            stop.store(true, Ordering::Relaxed);
        }
        // The receiver lives until after the scope, so sending cannot fail.
        let _ = tx.send((i, b));
    };
    rayon::in_place_scope(|s| {
        let mut carry: Vec<u8> = Vec::new();
        let mut index = 0;
        while !stop.load(Ordering::Relaxed) {
            let mut buf = Vec::with_capacity(carry.len() + BLOCK);
            buf.append(&mut carry);
            let eof = match fill(r, &mut buf, BLOCK) {
                Ok(eof) => eof,
                Err(e) => {
                    // Parse the complete lines before the failure (a truncated .gz yields
                    // valid text up to the cut), so that the error names the first line
                    // that could not be read.
                    failure = Some(Stopped::Io(e));
                    let whole = buf.iter().rposition(|&c| c == b'\n').map_or(0, |k| k + 1);
                    buf.truncate(whole);
                    if !buf.is_empty() {
                        parse(index, buf, &tx);
                    }
                    break;
                }
            };
            // A line longer than MAX_LINE ends the reading, with the complete lines before it
            // parsed (the long line is the one after them). Only a line that began in `carry`
            // can be longer: a block alone holds at most BLOCK = MAX_LINE bytes.
            let first_end = buf.iter().position(|&c| c == b'\n');
            let long = match first_end {
                Some(k) => k > MAX_LINE,
                None => buf.len() > MAX_LINE,
            };
            if long {
                buf.truncate(64);
                failure = Some(Stopped::LongLine(buf));
                break;
            }
            if !eof {
                match buf.iter().rposition(|&c| c == b'\n') {
                    Some(k) => carry = buf.split_off(k + 1),
                    None => {
                        // One line longer than a block (but not than MAX_LINE): read on until
                        // it ends.
                        carry = buf;
                        continue;
                    }
                }
            }
            if buf.is_empty() {
                break; // eof (a non-eof block always holds a newline)
            }
            let i = index;
            index += 1;
            if eof || in_flight.load(Ordering::Relaxed) >= limit {
                parse(i, buf, &tx);
            } else {
                in_flight.fetch_add(1, Ordering::Relaxed);
                let tx = tx.clone();
                let (parse, in_flight) = (&parse, &in_flight);
                s.spawn(move |_| {
                    parse(i, buf, &tx);
                    in_flight.fetch_sub(1, Ordering::Relaxed);
                });
            }
            if eof {
                break;
            }
        }
    });
    drop(tx);
    let mut blocks: Vec<(usize, Block)> = rx.into_iter().collect();
    blocks.sort_unstable_by_key(|b| b.0);
    (blocks.into_iter().map(|b| b.1).collect(), failure)
}

/// Why [`read_blocks`] stopped before the end of the input.
enum Stopped {
    /// Reading failed.
    Io(io::Error),
    /// A line is longer than [`MAX_LINE`]; its first bytes.
    LongLine(Vec<u8>),
}

/// Appends up to `want` bytes from `r` to `buf`; `Ok(true)` when the input has ended.
fn fill<R: Read>(r: &mut R, buf: &mut Vec<u8>, want: usize) -> io::Result<bool> {
    let mut got = buf.len();
    let end = got + want;
    buf.resize(end, 0);
    while got < end {
        match r.read(&mut buf[got..end]) {
            Ok(0) => {
                buf.truncate(got);
                return Ok(true);
            }
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                buf.truncate(got);
                return Err(e);
            }
        }
    }
    Ok(false)
}

/// Parses the entry lines of one block (whole lines; the last may lack its `\n`).
///
/// Each line first goes through a byte-level fast path for the usual layout (`i j value` with
/// single spaces or tabs, plain decimal numbers); anything else, including every malformed
/// line, goes through the token-based slow path, which accepts everything valid and says
/// exactly what is wrong with the rest.
fn parse_block(buf: &[u8], ctx: &Ctx) -> Block {
    // ~22 bytes per line in typical files: reserving for that avoids most regrowth.
    let mut b = Block {
        entries: Vec::with_capacity(buf.len() / 16),
        lines: 0,
        skipped: Vec::new(),
        error: None,
    };
    let mut p = 0;
    while p < buf.len() {
        let (entry, next) = match fast_line(buf, p, ctx.field) {
            Some((i, j, v, next)) => (Ok(Some((i, j, v))), next),
            None => {
                let end = buf[p..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(buf.len(), |k| p + k);
                (slow_line(&buf[p..end], ctx.field), end + 1)
            }
        };
        let checked = entry.and_then(|e| match e {
            Some((i, j, v)) => check_entry(i, j, ctx).map(|(i, j)| Some((i, j, v))),
            None => Ok(None),
        });
        match checked {
            Ok(Some(e)) => b.entries.push(e),
            Ok(None) => b.skipped.push(b.lines),
            Err(kind) => {
                b.error = Some((b.lines, kind));
                return b;
            }
        }
        b.lines += 1;
        p = next;
    }
    b
}

/// Range checks of a 1-based entry; returns the 0-based indices.
#[inline]
fn check_entry(i: u64, j: u64, ctx: &Ctx) -> Result<(u32, u32), MtxErrorKind> {
    if i == 0 || i > ctx.rows {
        return Err(MtxErrorKind::IndexOutOfRange {
            axis: Axis::Row,
            index: i,
            bound: ctx.rows as usize,
        });
    }
    if j == 0 || j > ctx.cols {
        return Err(MtxErrorKind::IndexOutOfRange {
            axis: Axis::Column,
            index: j,
            bound: ctx.cols as usize,
        });
    }
    if ctx.skew && i == j {
        return Err(MtxErrorKind::SkewDiagonal { index: i });
    }
    // In range 1..=u32::MAX, so the 0-based index fits in u32.
    Ok(((i - 1) as u32, (j - 1) as u32))
}

/// Fast path for one entry line starting at `p`: `Some((i, j, value, start of next line))`, or
/// `None` to hand the line to [`slow_line`]. Never accepts a line the slow path would reject,
/// and gives the same values.
#[inline(always)]
fn fast_line(b: &[u8], p: usize, field: Field) -> Option<(u64, u64, f64, usize)> {
    let (i, p) = fast_uint(b, p)?;
    let p = fast_sep(b, p)?;
    let (j, p) = fast_uint(b, p)?;
    let (v, p) = match field {
        Field::Pattern => (1.0, p),
        Field::Real => fast_f64(b, fast_sep(b, p)?)?,
        Field::Integer => fast_int(b, fast_sep(b, p)?)?,
        Field::Complex => {
            let (re, p) = fast_f64(b, fast_sep(b, p)?)?;
            let (_im, p) = fast_f64(b, fast_sep(b, p)?)?;
            (re, p)
        }
    };
    // Trailing blanks, then the line end.
    let mut p = p;
    while p < b.len() && matches!(b[p], b' ' | b'\t' | b'\r') {
        p += 1;
    }
    match b.get(p) {
        None => Some((i, j, v, p)),
        Some(b'\n') => Some((i, j, v, p + 1)),
        Some(_) => None,
    }
}

/// One or more spaces or tabs.
#[inline(always)]
fn fast_sep(b: &[u8], mut p: usize) -> Option<usize> {
    let start = p;
    while p < b.len() && matches!(b[p], b' ' | b'\t') {
        p += 1;
    }
    (p > start).then_some(p)
}

/// The decimal digits from `p` on, accumulated into `w` (wrapping: callers reject more than 19
/// digits, which is when it could wrap); returns `w` and the end of the digits.
#[inline(always)]
fn digits(b: &[u8], mut p: usize, mut w: u64) -> (u64, usize) {
    while let Some(&c) = b.get(p) {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        w = w.wrapping_mul(10).wrapping_add(u64::from(d));
        p += 1;
    }
    (w, p)
}

/// 1 to 19 decimal digits (19 always fit in a u64).
#[inline(always)]
fn fast_uint(b: &[u8], p: usize) -> Option<(u64, usize)> {
    let (x, q) = digits(b, p, 0);
    (1..=19).contains(&(q - p)).then_some((x, q))
}

/// An optionally signed integer of up to 19 digits, as the nearest f64 (what `parse::<f64>`
/// gives, since both round to nearest, ties to even).
#[inline(always)]
fn fast_int(b: &[u8], p: usize) -> Option<(f64, usize)> {
    let (neg, p) = sign(b, p);
    let (x, q) = fast_uint(b, p)?;
    let v = x as f64;
    Some((if neg { -v } else { v }, q))
}

#[inline(always)]
fn sign(b: &[u8], p: usize) -> (bool, usize) {
    match b.get(p) {
        Some(b'-') => (true, p + 1),
        Some(b'+') => (false, p + 1),
        _ => (false, p),
    }
}

/// Exact powers of ten: every one up to 10^22 is representable in an f64.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// Decimal floats `[+-]digits[.digits][(e|E)[+-]digits]` whose digits form an integer
/// `w <= 2^53` and whose decimal exponent `e` is in `-22..=22`: then `w` and `10^|e|` are exact
/// f64s and one IEEE multiplication or division rounds the exact value `w * 10^e` correctly
/// (Clinger's fast path), which is what `str::parse` returns. Anything else (long mantissas,
/// large exponents, `inf`, `nan`, malformed tokens) returns `None`.
#[inline(always)]
fn fast_f64(b: &[u8], p: usize) -> Option<(f64, usize)> {
    let (neg, p0) = sign(b, p);
    let (w, p1) = digits(b, p0, 0);
    let (w, mut p, frac) = if b.get(p1) == Some(&b'.') {
        let (w, p2) = digits(b, p1 + 1, w);
        (w, p2, p2 - p1 - 1)
    } else {
        (w, p1, 0)
    };
    // Leading zeros count too: rare, and they only send the token to `str::parse`.
    let n = p1 - p0 + frac;
    if n == 0 || n > 19 {
        return None;
    }
    let mut e = -(frac as i32);
    if matches!(b.get(p), Some(b'e' | b'E')) {
        let (eneg, q) = sign(b, p + 1);
        let (x, q2) = digits(b, q, 0);
        if !(1..=4).contains(&(q2 - q)) {
            return None;
        }
        e += if eneg { -(x as i32) } else { x as i32 };
        p = q2;
    }
    let v = if w == 0 {
        0.0
    } else if w > 1 << 53 {
        return None;
    } else if (0..=22).contains(&e) {
        w as f64 * POW10[e as usize]
    } else if (-22..0).contains(&e) {
        w as f64 / POW10[(-e) as usize]
    } else {
        return None;
    };
    Some((if neg { -v } else { v }, p))
}

/// The general line parser: `Ok(None)` for a blank or comment line, the 1-based entry, or
/// exactly what is wrong.
fn slow_line(line: &[u8], field: Field) -> Result<Option<(u64, u64, f64)>, MtxErrorKind> {
    let toks: Vec<&[u8]> = line
        .split(|c| c.is_ascii_whitespace())
        .filter(|t| !t.is_empty())
        .collect();
    if toks.is_empty() || toks[0].starts_with(b"%") {
        return Ok(None);
    }
    if toks.len() != field.width() {
        return Err(MtxErrorKind::FieldCount {
            expected: field.width(),
            found: toks.len(),
            field,
        });
    }
    let index = |t: &[u8], axis| {
        std::str::from_utf8(t)
            .ok()
            .filter(|s| s.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| MtxErrorKind::BadIndex {
                axis,
                token: shown(t),
            })
    };
    let i = index(toks[0], Axis::Row)?;
    let j = index(toks[1], Axis::Column)?;
    let value = |t: &[u8]| {
        let s = std::str::from_utf8(t).ok();
        let s = if field == Field::Integer {
            // Integer values: an optional sign and digits only.
            s.filter(|s| {
                let d = s.strip_prefix(['-', '+']).unwrap_or(s);
                !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit())
            })
        } else {
            s
        };
        s.and_then(|s| s.parse::<f64>().ok())
            .ok_or_else(|| MtxErrorKind::BadValue {
                token: shown(t),
                field,
            })
    };
    let v = match field {
        Field::Pattern => 1.0,
        Field::Real | Field::Integer => value(toks[2])?,
        Field::Complex => {
            value(toks[3])?; // the imaginary part must be a number too
            value(toks[2])?
        }
    };
    Ok(Some((i, j, v)))
}

// ---------------------------------------------------------------------------------------------
// Assembly.

/// Expands the symmetric part, sorts by (row, column) and sums duplicates.
///
/// A counting sort by row (stable, so entries keep file order: entry k's own position before
/// its mirror, both before entry k + 1's), then a stable sort by column within each row that is
/// not already in order, then the duplicates of each row are summed left to right. The result
/// equals a stable sort of the expanded entries by (row, column), and the sums are in file order
/// whatever the thread timing was.
fn assemble(rows: usize, cols: usize, blocks: Vec<Block>, mirror: bool, skew: bool) -> CooMatrix {
    let expanded = |i: u32, j: u32| if mirror && i != j { 2 } else { 1 };
    let total: usize = blocks
        .iter()
        .flat_map(|b| &b.entries)
        .map(|&(i, j, _)| expanded(i, j))
        .sum();
    // Row counts cost O(m) memory: for a (legal) file declaring far more rows than it has
    // entries, sort instead.
    if rows > 4 * total + 1024 {
        return assemble_by_sort(rows, cols, blocks, mirror, skew, total);
    }
    let mut start = vec![0usize; rows + 1];
    for b in &blocks {
        for &(i, j, _) in &b.entries {
            start[i as usize + 1] += 1;
            if mirror && i != j {
                start[j as usize + 1] += 1;
            }
        }
    }
    for r in 0..rows {
        start[r + 1] += start[r];
    }
    let mut col = vec![0u32; total];
    let mut val = vec![0f64; total];
    let mut next = start.clone();
    let neg = if skew { -1.0 } else { 1.0 };
    for b in blocks {
        for (i, j, v) in b.entries {
            let k = &mut next[i as usize];
            col[*k] = j;
            val[*k] = v;
            *k += 1;
            if mirror && i != j {
                let k = &mut next[j as usize];
                col[*k] = i;
                val[*k] = neg * v;
                *k += 1;
            }
        }
    }
    drop(next);

    // Compact in place: row r's merged entries go to `w..`, never past its own start.
    let mut row_idx = Vec::with_capacity(total);
    let mut w = 0;
    let mut seg: Vec<(u32, f64)> = Vec::new();
    for r in 0..rows {
        let (a, z) = (start[r], start[r + 1]);
        if col[a..z].windows(2).all(|p| p[0] < p[1]) {
            // Usual case: the file lists the row in column order; no duplicates. Nothing to
            // move either while no earlier row has shrunk.
            if w != a {
                col.copy_within(a..z, w);
                val.copy_within(a..z, w);
            }
            w += z - a;
        } else {
            seg.clear();
            seg.extend(col[a..z].iter().copied().zip(val[a..z].iter().copied()));
            seg.sort_by_key(|e| e.0); // stable: duplicates stay in file order
            let w0 = w;
            for &(c, v) in &seg {
                if w > w0 && col[w - 1] == c {
                    val[w - 1] += v;
                } else {
                    col[w] = c;
                    val[w] = v;
                    w += 1;
                }
            }
        }
        let len = w - row_idx.len();
        row_idx.extend(std::iter::repeat_n(r as u32, len));
    }
    col.truncate(w);
    val.truncate(w);
    col.shrink_to_fit();
    val.shrink_to_fit();
    row_idx.shrink_to_fit();
    CooMatrix {
        rows,
        cols,
        row_idx,
        col_idx: col,
        vals: val,
    }
}

/// [`assemble`] for very sparse row ranges: a stable sort of the expanded entries.
fn assemble_by_sort(
    rows: usize,
    cols: usize,
    blocks: Vec<Block>,
    mirror: bool,
    skew: bool,
    total: usize,
) -> CooMatrix {
    let neg = if skew { -1.0 } else { 1.0 };
    let mut all: Vec<(u64, f64)> = Vec::with_capacity(total);
    for b in blocks {
        for (i, j, v) in b.entries {
            all.push(((u64::from(i) << 32) | u64::from(j), v));
            if mirror && i != j {
                all.push(((u64::from(j) << 32) | u64::from(i), neg * v));
            }
        }
    }
    all.sort_by_key(|e| e.0); // stable: duplicates are summed in file order
    let mut a = CooMatrix::empty(rows, cols);
    let mut last = None;
    for (key, v) in all {
        if last == Some(key)
            && let Some(sum) = a.vals.last_mut()
        {
            *sum += v;
        } else {
            a.row_idx.push((key >> 32) as u32);
            a.col_idx.push(key as u32);
            a.vals.push(v);
            last = Some(key);
        }
    }
    a
}
