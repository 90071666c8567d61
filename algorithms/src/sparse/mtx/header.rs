//! The header of a Matrix Market file: its banner (`%%MatrixMarket matrix coordinate <field>
//! <symmetry>`), then comment and blank lines, then its size line (`rows cols entries`).

use super::error::{MtxError, MtxErrorKind, long_line, read_error};
use super::shown;
use crate::text::{self, Line, MAX_LINE};
use std::fmt;
use std::io::BufRead;

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
    pub(super) fn layout(self) -> &'static str {
        match self {
            Field::Pattern => "row column",
            Field::Real | Field::Integer => "row column value",
            Field::Complex => "row column real imaginary",
        }
    }

    pub(super) fn width(self) -> usize {
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

/// The header plus the number of lines it took (banner, comments, size line).
pub(super) struct ParsedHeader {
    pub(super) header: Header,
    pub(super) lines: usize,
}

/// The banner the reader expects, for messages.
const EXPECTED_BANNER: &str = "'%%MatrixMarket matrix coordinate <field> <symmetry>'";

/// Reads the banner and the size line, skipping comment and blank lines.
/// With `refuse_complex`, a complex banner is an error.
pub(super) fn parse_header<R: BufRead>(
    r: &mut R,
    name: &str,
    gz: bool,
    refuse_complex: bool,
) -> Result<ParsedHeader, MtxError> {
    let err = |line: usize, kind| MtxError::new(name, Some(line), kind);
    let mut buf = Vec::new();
    // The banner: line 1.
    let read = text::read_line(r, &mut buf, MAX_LINE).map_err(|e| err(1, read_error(gz, e)))?;
    let (field, symmetry) = parse_banner(&buf, read).map_err(|kind| err(1, kind))?;
    if field == Field::Complex && refuse_complex {
        return Err(err(1, MtxErrorKind::ComplexRefused));
    }
    // The size line.
    let line = read_size_line(r, &mut buf, name, gz)?;
    let (rows, cols, entries) =
        parse_size_line(buf.trim_ascii_start(), symmetry).map_err(|kind| err(line, kind))?;
    let header = Header {
        field,
        symmetry,
        rows,
        cols,
        entries,
    };
    Ok(ParsedHeader {
        header,
        lines: line,
    })
}

/// The field and symmetry of the banner `line` (as read: `read` says whether it was there at
/// all, and whole), or what is wrong with it.
fn parse_banner(line: &[u8], read: Line) -> Result<(Field, Symmetry), MtxErrorKind> {
    if read == Line::End {
        let msg = format!("the file is empty; expected the banner {EXPECTED_BANNER}");
        return Err(MtxErrorKind::Banner(msg));
    }
    let banner = String::from_utf8_lossy(line).to_ascii_lowercase();
    let words: Vec<&str> = banner.split_ascii_whitespace().collect();
    if words.first() != Some(&"%%matrixmarket") {
        let msg = format!(
            "not a Matrix Market file: the first line must be the banner {EXPECTED_BANNER}, \
             found '{}'",
            shown(line)
        );
        return Err(MtxErrorKind::Banner(msg));
    }
    // A first line that does not even start like a banner is "not a Matrix Market file" (above),
    // however long it is; one that does but goes on and on is a long line.
    if read == Line::TooLong {
        return Err(long_line(line));
    }
    if words.len() != 5 {
        let msg = format!(
            "the banner must be {EXPECTED_BANNER} (5 words), found '{}' ({} words)",
            shown(line),
            words.len()
        );
        return Err(MtxErrorKind::Banner(msg));
    }
    if words[1] != "matrix" {
        let msg = format!(
            "Matrix Market object '{}' is not supported, only 'matrix'",
            shown(words[1].as_bytes())
        );
        return Err(MtxErrorKind::Unsupported(msg));
    }
    banner_format(words[2])?;
    let field = banner_field(words[3])?;
    let symmetry = banner_symmetry(words[4])?;
    // The format only defines pattern matrices as general or symmetric: a negated or conjugated
    // "1" has no meaning. (A real hermitian matrix is just symmetric and is accepted.)
    if field == Field::Pattern && matches!(symmetry, Symmetry::SkewSymmetric | Symmetry::Hermitian)
    {
        let msg = format!("a pattern matrix cannot be {symmetry}: only general or symmetric");
        return Err(MtxErrorKind::Banner(msg));
    }
    Ok((field, symmetry))
}

/// The banner's format word: only `coordinate` is read.
fn banner_format(word: &str) -> Result<(), MtxErrorKind> {
    match word {
        "coordinate" => Ok(()),
        "array" => {
            let msg = "dense array format is not supported, only the coordinate format";
            Err(MtxErrorKind::Unsupported(msg.to_string()))
        }
        w => {
            let w = shown(w.as_bytes());
            let msg = format!("unknown format '{w}' in the banner: expected coordinate or array");
            Err(MtxErrorKind::Banner(msg))
        }
    }
}

/// The banner's field word.
fn banner_field(word: &str) -> Result<Field, MtxErrorKind> {
    match word {
        "real" => Ok(Field::Real),
        "integer" => Ok(Field::Integer),
        "complex" => Ok(Field::Complex),
        "pattern" => Ok(Field::Pattern),
        w => {
            let w = shown(w.as_bytes());
            let msg = format!(
                "unknown field '{w}' in the banner: expected real, integer, complex or pattern"
            );
            Err(MtxErrorKind::Banner(msg))
        }
    }
}

/// The banner's symmetry word.
fn banner_symmetry(word: &str) -> Result<Symmetry, MtxErrorKind> {
    match word {
        "general" => Ok(Symmetry::General),
        "symmetric" => Ok(Symmetry::Symmetric),
        "skew-symmetric" => Ok(Symmetry::SkewSymmetric),
        "hermitian" => Ok(Symmetry::Hermitian),
        w => {
            let w = shown(w.as_bytes());
            let msg = format!(
                "unknown symmetry '{w}' in the banner: expected general, symmetric, \
                 skew-symmetric or hermitian"
            );
            Err(MtxErrorKind::Banner(msg))
        }
    }
}

/// Reads up to the size line (after the banner, skipping comment and blank lines) into `buf`;
/// returns its 1-based line number.
fn read_size_line<R: BufRead>(
    r: &mut R,
    buf: &mut Vec<u8>,
    name: &str,
    gz: bool,
) -> Result<usize, MtxError> {
    let mut line = 1;
    loop {
        if !header_line(r, buf, name, line + 1, gz)? {
            let msg = "the file ends before the size line 'rows columns entries'".to_string();
            return Err(MtxError::new(name, Some(line), MtxErrorKind::SizeLine(msg)));
        }
        line += 1;
        let t = buf.trim_ascii_start();
        if !t.is_empty() && t[0] != b'%' {
            return Ok(line);
        }
    }
}

/// The matrix's rows, columns and entries from its size line, or what is wrong with it.
fn parse_size_line(size: &[u8], symmetry: Symmetry) -> Result<(usize, usize, usize), MtxErrorKind> {
    let bad = || {
        MtxErrorKind::SizeLine(format!(
            "expected three non-negative integers 'rows columns entries', found '{}'",
            shown(size)
        ))
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
        return Err(MtxErrorKind::TooLarge { rows, cols });
    }
    if symmetry != Symmetry::General && rows != cols {
        let msg = format!("a {symmetry} matrix must be square, but it is {rows} x {cols}");
        return Err(MtxErrorKind::SizeLine(msg));
    }
    let entries = usize::try_from(entries).map_err(|_| bad())?;
    Ok((rows as usize, cols as usize, entries))
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
