//! Mondriaan's files for a distributed matrix and its vector distributions, as read by
//! BSPedupack's `bspmv`.
//!
//! For a prefix such as `out/bcsstk16.mtx` and `p` parts there are three files:
//!
//! * `out/bcsstk16.mtx-P<p>`, the **distributed matrix**:
//!
//!   ```text
//!   %%MatrixMarket distributed-matrix coordinate real general
//!   m n nnz p
//!   Pstart[0]          (= 0)
//!   ...                (p + 1 lines)
//!   Pstart[p]          (= nnz)
//!   i j value          (nnz lines, 1-based indices)
//!   ```
//!
//!   The nonzeros of part `q` (0-based) are lines `Pstart[q] .. Pstart[q + 1]` of the nonzero
//!   list, counted from 0. Parts may be empty (equal consecutive starts).
//! * `out/bcsstk16.mtx-u<p>`, the owners of `u = y` (length `m`), and `out/bcsstk16.mtx-v<p>`,
//!   the owners of `v = x` (length `n`): a line `len p`, then `len` lines `index owner`, both
//!   1-based, indices in order `1, 2, ..., len`.
//!
//! This is what Mondriaan 4 writes with its default `OutputFormat original`
//! (`MMWriteSparseMatrix` and `WriteVectorDistribution`): a banner line on the matrix file,
//! 0-based part starts, no banner on the vector files. BSPedupack 2.0 (`bspinput2triple`,
//! `bspinputvec`) reads exactly this: it skips `%` lines before the size line of the matrix, but
//! reads `len p` as the *first* line of a vector file, so the vector files carry no comment.
//! Mondriaan 4 writes values with `%g` (6 digits); here they are written with Rust's shortest
//! round-trip representation, so they read back bit for bit (NaN reads back as a NaN).
//!
//! The readers also accept what Mondriaan writes with `OutputFormat emm`: the banner
//! `%%Extended-MatrixMarket ...` with 1-based part starts (`Pstart[0] = 1`), and a `%%` banner
//! line on the vector files. They accept `integer` and `pattern` matrices (value 1.0 for the
//! latter), comment lines after the banner, blank lines and `\r\n` line ends. Symmetric or
//! complex distributed matrices are rejected.
//!
//! **Nonzero order.** The matrix file lists the nonzeros grouped by part, so [`write()`] reorders
//! them (stably: in matrix order within a part) and [`read()`] returns them in *file* order, with
//! `nz_part` to match; a round trip therefore gives the same matrix up to a permutation of the
//! nonzeros that puts them in part order.
//!
//! Every malformed input gives a [`MondriaanError`] naming the file and the line (and quoting
//! the input with control characters escaped); nothing here panics on bad input, nor allocates
//! by a count read from a file before the lines are there. Lines hold at most
//! [`MAX_LINE`] bytes (1 MiB): a longer one is an error, so input without
//! line ends costs a bounded amount of memory.
//!
//! **Writing.** [`write()`] writes the three files as one [`whole_file::Set`]: each goes to a
//! temporary file beside it, and only when all three are complete are they renamed into place,
//! together; an error, a full disk or an interrupt leaves the files that were there before as
//! they were. [`write_matrix`] and [`write_vector`] write one file each, also whole.

use super::metrics::Buckets;
use super::{CooMatrix, Distribution};
use crate::text::{self, Line, MAX_LINE};
use crate::whole_file::{self, Set};
use rayon::prelude::*;
use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Write};
use std::path::{Path, PathBuf};

/// The three files of a distribution: `prefix-P<p>`, `prefix-u<p>`, `prefix-v<p>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Files {
    /// The distributed matrix, `prefix-P<p>`.
    pub matrix: PathBuf,
    /// The owners of `u = y` (one per row), `prefix-u<p>`.
    pub u: PathBuf,
    /// The owners of `v = x` (one per column), `prefix-v<p>`.
    pub v: PathBuf,
}

impl Files {
    /// The file names Mondriaan uses for `prefix` and `p` parts: the suffixes `-P<p>`,
    /// `-u<p>`, `-v<p>` appended to the prefix as it is (`a/b.mtx` gives `a/b.mtx-P4`, ...).
    pub fn new(prefix: impl AsRef<Path>, p: usize) -> Files {
        let with = |suffix: String| {
            let mut s = OsString::from(prefix.as_ref().as_os_str());
            s.push(suffix);
            PathBuf::from(s)
        };
        Files {
            matrix: with(format!("-P{p}")),
            u: with(format!("-u{p}")),
            v: with(format!("-v{p}")),
        }
    }
}

/// A Mondriaan file that cannot be read.
#[derive(Debug)]
pub enum MondriaanError {
    /// The file could not be opened or read.
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// The file's content does not follow the format.
    Format {
        /// The file.
        path: PathBuf,
        /// 1-based line number of the offending line (one past the last line when the file ends
        /// too early).
        line: usize,
        /// What is wrong.
        message: String,
    },
}

impl MondriaanError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            MondriaanError::Io { path, .. } | MondriaanError::Format { path, .. } => path,
        }
    }

    /// The line the error is about (`None` for I/O errors).
    pub fn line(&self) -> Option<usize> {
        match self {
            MondriaanError::Io { .. } => None,
            MondriaanError::Format { line, .. } => Some(*line),
        }
    }
}

impl fmt::Display for MondriaanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MondriaanError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            MondriaanError::Format {
                path,
                line,
                message,
            } => write!(f, "{}:{line}: {message}", path.display()),
        }
    }
}

impl std::error::Error for MondriaanError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MondriaanError::Io { source, .. } => Some(source),
            MondriaanError::Format { .. } => None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Writing

/// Writes the three files of the distribution `d` of `a` (see the [module documentation](self))
/// and returns their paths. The directory of `prefix` must exist.
///
/// The three appear together or not at all: each is written to a temporary file beside it, and
/// they are renamed into place together once all three are complete ([`whole_file::Set`]). On
/// any error (or an interrupt, see [`whole_file::abandon`]) the files that were at these paths
/// before are left as they were, and no temporary file remains.
///
/// Fails with [`io::ErrorKind::InvalidInput`] if `d` does not fit `a` (lengths, parts or owners
/// `>= p`, `p == 0`); I/O errors name the file.
///
/// ```
/// use mbsp_algorithms::sparse::{CooMatrix, Distribution, mondriaan};
/// let a = CooMatrix::new(2, 2, vec![(0, 0, 1.5), (1, 1, -2.0), (0, 1, 0.25)]).unwrap();
/// let d = Distribution { p: 2, nz_part: vec![1, 0, 1], x_owner: vec![1, 0], y_owner: vec![1, 0] };
/// let dir = std::env::temp_dir().join(format!("mondriaan-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let files = mondriaan::write(&a, &d, dir.join("small.mtx")).unwrap();
/// assert_eq!(
///     std::fs::read_to_string(&files.matrix).unwrap(),
///     "%%MatrixMarket distributed-matrix coordinate real general\n\
///      2 2 3 2\n0\n1\n3\n2 2 -2\n1 1 1.5\n1 2 0.25\n"
/// );
/// assert_eq!(std::fs::read_to_string(&files.v).unwrap(), "2 2\n1 2\n2 1\n");
/// // Read back: the nonzeros come in file order (part 0 first).
/// let (b, e) = mondriaan::read(dir.join("small.mtx"), 2).unwrap();
/// assert_eq!(b.vals, vec![-2.0, 1.5, 0.25]);
/// assert_eq!(e.nz_part, vec![0, 1, 1]);
/// assert_eq!((e.x_owner, e.y_owner), (d.x_owner, d.y_owner));
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn write(a: &CooMatrix, d: &Distribution, prefix: impl AsRef<Path>) -> io::Result<Files> {
    // Check everything before writing anything, so a bad call leaves no partial set of files.
    check_matrix(a, &d.nz_part, d.p)?;
    check_vector(&d.y_owner, d.p, Some(a.rows), "y_owner")?;
    check_vector(&d.x_owner, d.p, Some(a.cols), "x_owner")?;
    let files = Files::new(prefix, d.p);
    let mut set = Set::new();
    set.add(&files.matrix, |w| matrix_body(a, &d.nz_part, d.p, w))?;
    set.add(&files.u, |w| vector_body(&d.y_owner, d.p, w))?;
    set.add(&files.v, |w| vector_body(&d.x_owner, d.p, w))?;
    set.commit()?;
    Ok(files)
}

/// Writes the distributed matrix file: `a` with nonzero `k` in part `nz_part[k]` of `p`, the
/// nonzeros grouped by part (stably). The file is written whole or not at all
/// ([`whole_file::write`]).
pub fn write_matrix(
    a: &CooMatrix,
    nz_part: &[u32],
    p: usize,
    path: impl AsRef<Path>,
) -> io::Result<()> {
    check_matrix(a, nz_part, p)?;
    whole_file::write(path, |w| matrix_body(a, nz_part, p, w))
}

/// The text of the distributed matrix file (see [`write_matrix`]), checked before.
fn matrix_body(a: &CooMatrix, nz_part: &[u32], p: usize, w: &mut impl Write) -> io::Result<()> {
    let by_part = Buckets::new(nz_part, p);
    writeln!(
        w,
        "%%MatrixMarket distributed-matrix coordinate real general"
    )?;
    writeln!(w, "{} {} {} {p}", a.rows, a.cols, a.nnz())?;
    let mut line = Vec::with_capacity(64);
    for &s in &by_part.start {
        line.clear();
        push_uint(&mut line, s as u64);
        line.push(b'\n');
        w.write_all(&line)?;
    }
    // Formatting the values is most of the work: chunks are formatted in parallel and
    // written in order, a bounded batch at a time (the output does not depend on the
    // threads, and memory stays at a few tens of MB however large the matrix).
    const CHUNK: usize = 1 << 15;
    for batch in by_part.order.chunks(CHUNK * 32) {
        let texts: Vec<Vec<u8>> = batch
            .par_chunks(CHUNK)
            .map(|chunk| {
                let mut out = Vec::with_capacity(chunk.len() * 24);
                for &k in chunk {
                    let k = k as usize;
                    push_uint(&mut out, a.row_idx[k] as u64 + 1);
                    out.push(b' ');
                    push_uint(&mut out, a.col_idx[k] as u64 + 1);
                    out.push(b' ');
                    push_f64(&mut out, a.vals[k]);
                    out.push(b'\n');
                }
                out
            })
            .collect();
        for t in &texts {
            w.write_all(t)?;
        }
    }
    Ok(())
}

/// Writes a vector distribution file: `owners.len() p`, then `index owner` per entry, 1-based.
/// The file is written whole or not at all ([`whole_file::write`]).
pub fn write_vector(owners: &[u32], p: usize, path: impl AsRef<Path>) -> io::Result<()> {
    check_vector(owners, p, None, "owners")?;
    whole_file::write(path, |w| vector_body(owners, p, w))
}

/// The text of a vector distribution file (see [`write_vector`]), checked before.
fn vector_body(owners: &[u32], p: usize, w: &mut impl Write) -> io::Result<()> {
    writeln!(w, "{} {p}", owners.len())?;
    let mut line = Vec::with_capacity(32);
    for (i, &o) in owners.iter().enumerate() {
        line.clear();
        push_uint(&mut line, i as u64 + 1);
        line.push(b' ');
        push_uint(&mut line, o as u64 + 1);
        line.push(b'\n');
        w.write_all(&line)?;
    }
    Ok(())
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

fn check_matrix(a: &CooMatrix, nz_part: &[u32], p: usize) -> io::Result<()> {
    a.validate()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    if p == 0 || p > u32::MAX as usize {
        return Err(invalid(format!("p = {p}: need 1 <= p <= {}", u32::MAX)));
    }
    if nz_part.len() != a.nnz() {
        return Err(invalid(format!(
            "{} nonzero parts for {} nonzeros",
            nz_part.len(),
            a.nnz()
        )));
    }
    if let Some(k) = nz_part.iter().position(|&s| s as usize >= p) {
        return Err(invalid(format!(
            "nonzero {k} is in part {} but p = {p}",
            nz_part[k]
        )));
    }
    Ok(())
}

fn check_vector(owners: &[u32], p: usize, len: Option<usize>, what: &str) -> io::Result<()> {
    if p == 0 || p > u32::MAX as usize {
        return Err(invalid(format!("p = {p}: need 1 <= p <= {}", u32::MAX)));
    }
    if let Some(len) = len.filter(|&l| l != owners.len()) {
        return Err(invalid(format!(
            "{what} has {} entries, expected {len}",
            owners.len()
        )));
    }
    if let Some(i) = owners.iter().position(|&o| o as usize >= p) {
        return Err(invalid(format!("{what}[{i}] = {} but p = {p}", owners[i])));
    }
    Ok(())
}

/// Appends the decimal digits of `x` (the matrix files hold millions of integers; this avoids
/// the formatting machinery for them).
fn push_uint(out: &mut Vec<u8>, mut x: u64) {
    let mut digits = [0u8; 20];
    let mut n = 0;
    loop {
        digits[n] = b'0' + (x % 10) as u8;
        n += 1;
        x /= 10;
        if x == 0 {
            break;
        }
    }
    out.extend(digits[..n].iter().rev());
}

/// Appends `v` in a form that C's `strtod`/`%lf` and Rust's `parse` both read back to the same
/// bits: the shortest round-trip digits, plain for ordinary magnitudes (`1`, `0.25`) and in
/// exponent form outside `[1e-5, 1e16)` (`1e-300`), where the plain form would be hundreds of
/// digits long.
fn push_f64(out: &mut Vec<u8>, v: f64) {
    use std::io::Write as _;
    let m = v.abs();
    // Writing into a Vec cannot fail.
    let _ = if v.is_finite() && m != 0.0 && !(1e-5..1e16).contains(&m) {
        write!(out, "{v:e}")
    } else {
        write!(out, "{v}")
    };
}

// ---------------------------------------------------------------------------------------------
// Reading

/// Reads the three files `prefix-P<p>`, `prefix-u<p>`, `prefix-v<p>`.
///
/// The matrix comes back with its nonzeros in file order (grouped by part), and
/// `Distribution::nz_part` in the same order; `y_owner` is read from the `u` file, `x_owner`
/// from the `v` file. Each file must be for `p` parts, and the vectors must have one entry per
/// row (`u`) and per column (`v`).
pub fn read(
    prefix: impl AsRef<Path>,
    p: usize,
) -> Result<(CooMatrix, Distribution), MondriaanError> {
    let files = Files::new(prefix, p);
    let m = read_matrix_at(&files.matrix)?;
    if m.p != p {
        return Err(format_err(
            &files.matrix,
            m.size_line,
            format!("the matrix is distributed over p = {}, expected {p}", m.p),
        ));
    }
    let mut owners = [
        (&files.u, m.a.rows, "rows"),
        (&files.v, m.a.cols, "columns"),
    ]
    .into_iter()
    .map(|(path, len, what)| {
        let v = read_vector_at(path)?;
        if v.p != p {
            return Err(format_err(
                path,
                v.size_line,
                format!("the vector is distributed over p = {}, expected {p}", v.p),
            ));
        }
        if v.owners.len() != len {
            return Err(format_err(
                path,
                v.size_line,
                format!(
                    "the vector has length {}, but the matrix has {len} {what}",
                    v.owners.len()
                ),
            ));
        }
        Ok(v.owners)
    });
    let y_owner = owners.next().expect("two vectors")?;
    let x_owner = owners.next().expect("two vectors")?;
    Ok((
        m.a,
        Distribution {
            p,
            nz_part: m.nz_part,
            x_owner,
            y_owner,
        },
    ))
}

/// Reads a distributed matrix file: the matrix with its nonzeros in file order, the 0-based part
/// of each nonzero, and the number of parts `p`.
pub fn read_matrix(path: impl AsRef<Path>) -> Result<(CooMatrix, Vec<u32>, usize), MondriaanError> {
    let m = read_matrix_at(path.as_ref())?;
    Ok((m.a, m.nz_part, m.p))
}

/// Reads a vector distribution file: the 0-based owner of each entry, and `p`.
pub fn read_vector(path: impl AsRef<Path>) -> Result<(Vec<u32>, usize), MondriaanError> {
    let v = read_vector_at(path.as_ref())?;
    Ok((v.owners, v.p))
}

fn format_err(path: &Path, line: usize, message: String) -> MondriaanError {
    MondriaanError::Format {
        path: path.to_path_buf(),
        line,
        message,
    }
}

/// Upper limit on what is reserved ahead from a count in a file header: a corrupt count must
/// not become a huge allocation; larger inputs grow as their lines arrive.
const RESERVE_LIMIT: usize = 1 << 22;

/// A file read line by line, with line numbers and errors that name it.
struct Lines<'p> {
    path: &'p Path,
    reader: BufReader<File>,
    buf: Vec<u8>,
    /// Number of the line last returned (1-based; 0 before the first).
    line: usize,
}

impl<'p> Lines<'p> {
    fn open(path: &'p Path) -> Result<Self, MondriaanError> {
        let file = File::open(path).map_err(|source| MondriaanError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Lines {
            path,
            reader: BufReader::with_capacity(1 << 20, file),
            buf: Vec::new(),
            line: 0,
        })
    }

    fn err(&self, line: usize, message: String) -> MondriaanError {
        format_err(self.path, line, message)
    }

    /// Reads the next line into the buffer, without its line end; `false` at the end of the
    /// file. A line longer than [`MAX_LINE`] bytes is an error.
    fn advance(&mut self) -> Result<bool, MondriaanError> {
        let read =
            text::read_line(&mut self.reader, &mut self.buf, MAX_LINE).map_err(|source| {
                MondriaanError::Io {
                    path: self.path.to_path_buf(),
                    source,
                }
            })?;
        if read == Line::End {
            return Ok(false);
        }
        self.line += 1;
        if read == Line::TooLong {
            let start = text::shown(&self.buf, 60);
            return Err(self.err(
                self.line,
                format!(
                    "the line is longer than {MAX_LINE} bytes, the most a line may hold (it \
                     starts `{start}`): not a Mondriaan file, or a damaged one"
                ),
            ));
        }
        while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
            self.buf.pop();
        }
        if std::str::from_utf8(&self.buf).is_err() {
            return Err(self.err(self.line, "the line is not valid UTF-8 text".into()));
        }
        Ok(true)
    }

    /// The line last read, trimmed.
    fn current(&self) -> &str {
        // `advance` checked it is UTF-8.
        std::str::from_utf8(&self.buf).unwrap_or("").trim()
    }

    /// Reads up to the next line that is not blank (and, with `skip_comments`, does not start
    /// with `%`); returns its number and text. `what` names the expected line in the
    /// end-of-file error.
    fn next_data(
        &mut self,
        skip_comments: bool,
        what: impl Fn() -> String,
    ) -> Result<(usize, &str), MondriaanError> {
        loop {
            if !self.advance()? {
                let line = self.line + 1;
                return Err(self.err(line, format!("the file ends where {} was expected", what())));
            }
            let t = self.current();
            if !(t.is_empty() || (skip_comments && t.starts_with('%'))) {
                return Ok((self.line, self.current()));
            }
        }
    }

    /// After the last expected line: only blank lines and `%` comments may follow.
    fn expect_end(&mut self, what: &str) -> Result<(), MondriaanError> {
        while self.advance()? {
            let t = self.current();
            if !t.is_empty() && !t.starts_with('%') {
                return Err(self.err(self.line, format!("unexpected line after {what}")));
            }
        }
        Ok(())
    }
}

/// Splits `s` into exactly `N` whitespace-separated fields, or says how many it has.
fn fields<const N: usize>(s: &str) -> Result<[&str; N], usize> {
    let mut out = [""; N];
    let mut it = s.split_ascii_whitespace();
    for (k, slot) in out.iter_mut().enumerate() {
        *slot = it.next().ok_or(k)?;
    }
    match it.count() {
        0 => Ok(out),
        extra => Err(N + extra),
    }
}

/// A token of the input for a message: control characters escaped, at most 60 characters.
fn quoted(s: &str) -> String {
    text::shown(s.as_bytes(), 60)
}

fn parse_uint(s: &str, what: &str) -> Result<u64, String> {
    s.parse::<u64>()
        .map_err(|_| format!("{what} `{}` is not a nonnegative integer", quoted(s)))
}

struct MatrixFile {
    a: CooMatrix,
    nz_part: Vec<u32>,
    p: usize,
    size_line: usize,
}

#[derive(Clone, Copy, PartialEq)]
enum Field {
    Real,
    Pattern,
}

/// The size line `m n nnz p` of a Mondriaan matrix file, checked.
struct SizeLine {
    /// Its 1-based line number.
    line: usize,
    m: u64,
    n: u64,
    nnz: usize,
    p: usize,
}

/// Reads a Mondriaan matrix file (the matrix with the part of each nonzero) in its phases: the
/// optional banner, the size line, the `p + 1` part starts, the nonzeros.
fn read_matrix_at(path: &Path) -> Result<MatrixFile, MondriaanError> {
    let mut lines = Lines::open(path)?;
    let (field, pstart_base) = read_matrix_banner(&mut lines)?;
    let size = read_size_line(&mut lines)?;
    let pstart = read_part_starts(&mut lines, &size, pstart_base)?;
    let (a, nz_part) = read_nonzeros(&mut lines, &size, field, &pstart)?;
    Ok(MatrixFile {
        a,
        nz_part,
        p: size.p,
        size_line: size.line,
    })
}

/// Phase *banner* (optional, as for Mondriaan and BSPedupack): the first line that is not blank,
/// if it starts with `%%`. Returns the field and the base of the part starts (0 without a
/// banner); the line read stays current for [`read_size_line`].
fn read_matrix_banner(lines: &mut Lines) -> Result<(Field, u64), MondriaanError> {
    loop {
        if !lines.advance()? {
            let line = lines.line + 1;
            return Err(lines.err(line, "the file is empty: no size line `m n nnz p`".into()));
        }
        let t = lines.current();
        if t.is_empty() {
            continue;
        }
        if t.starts_with("%%") {
            return parse_matrix_banner(t).map_err(|m| lines.err(lines.line, m));
        }
        return Ok((Field::Real, 0));
    }
}

/// Phase *size line* `m n nnz p`: the line just read if it was not a banner or comment, else the
/// next data line.
fn read_size_line(lines: &mut Lines) -> Result<SizeLine, MondriaanError> {
    let path = lines.path;
    let (line, size) = if lines.current().starts_with('%') {
        lines.next_data(true, || "the size line `m n nnz p`".into())?
    } else {
        (lines.line, lines.current())
    };
    let [m, n, nnz, p] = fields::<4>(size).map_err(|k| {
        format_err(
            path,
            line,
            format!("the size line must be `m n nnz p` (4 numbers), found {k} fields"),
        )
    })?;
    let err = |m: String| format_err(path, line, m);
    let m = parse_uint(m, "m").map_err(err)?;
    let n = parse_uint(n, "n").map_err(err)?;
    let nnz = parse_uint(nnz, "nnz").map_err(err)?;
    let p = parse_uint(p, "p").map_err(err)?;
    if m > u32::MAX as u64 || n > u32::MAX as u64 {
        return Err(err(format!(
            "matrix {m} x {n} is too large: at most {} rows and columns",
            u32::MAX
        )));
    }
    if p == 0 || p > u32::MAX as u64 {
        return Err(err(format!("p = {p}: need 1 <= p <= {}", u32::MAX)));
    }
    let nnz = usize::try_from(nnz).map_err(|_| err(format!("nnz = {nnz} is too large")))?;
    Ok(SizeLine {
        line,
        m,
        n,
        nnz,
        p: p as usize,
    })
}

/// Phase *part starts*: `p + 1` lines, nondecreasing, from `base` to `nnz + base`; returned
/// 0-based.
fn read_part_starts(
    lines: &mut Lines,
    size: &SizeLine,
    base: u64,
) -> Result<Vec<u64>, MondriaanError> {
    let (path, nnz, p) = (lines.path, size.nnz, size.p);
    let mut pstart: Vec<u64> = Vec::with_capacity((p + 1).min(RESERVE_LIMIT));
    for q in 0..=p {
        let (ln, s) = lines.next_data(false, || format!("part start {} of {}", q + 1, p + 1))?;
        let v = match fields::<1>(s) {
            Ok([f]) => parse_uint(f, "part start"),
            Err(k) => Err(format!("expected one part start, found {k} fields")),
        }
        .map_err(|m| format_err(path, ln, m))?;
        // Checked as written (the messages quote the file); `prev` is the previous start as
        // written, so both sides of each comparison use the same base.
        let last = (nnz as u64).saturating_add(base);
        let prev = pstart.last().map(|&s| s + base);
        let message = if q == 0 && v != base {
            Some(format!("the first part start is {v}, expected {base}"))
        } else if let Some(prev) = prev.filter(|&prev| v < prev) {
            Some(format!(
                "part start {v} is smaller than the previous one, {prev}"
            ))
        } else if q == p && v != last {
            Some(format!(
                "the last part start is {v}, expected nnz{} = {last}",
                if base == 1 { " + 1" } else { "" },
            ))
        } else if v > last {
            Some(format!("part start {v} is beyond the {nnz} nonzeros"))
        } else {
            None
        };
        if let Some(message) = message {
            return Err(format_err(path, ln, message));
        }
        // v >= base here: the first start equals it and the others do not decrease.
        pstart.push(v - base);
    }
    Ok(pstart)
}

/// Phase *nonzeros*: `i j value` (or `i j` for a pattern matrix), each with its part (from the
/// part starts), then nothing but blank lines and comments.
fn read_nonzeros(
    lines: &mut Lines,
    size: &SizeLine,
    field: Field,
    pstart: &[u64],
) -> Result<(CooMatrix, Vec<u32>), MondriaanError> {
    let (path, nnz) = (lines.path, size.nnz);
    let cap = nnz.min(RESERVE_LIMIT);
    let (mut row_idx, mut col_idx) = (Vec::with_capacity(cap), Vec::with_capacity(cap));
    let mut vals = Vec::with_capacity(cap);
    let mut nz_part = Vec::with_capacity(cap);
    let mut q = 0usize;
    for k in 0..nnz {
        // Part of nonzero k: the q with pstart[q] <= k < pstart[q + 1] (skipping empty parts).
        while pstart[q + 1] <= k as u64 {
            q += 1;
        }
        let (ln, s) = lines.next_data(false, || format!("nonzero {} of {nnz}", k + 1))?;
        let (i, j, v) =
            parse_entry(s, field, size.m, size.n).map_err(|m| format_err(path, ln, m))?;
        row_idx.push(i);
        col_idx.push(j);
        vals.push(v);
        nz_part.push(q as u32);
    }
    lines.expect_end(&format!("the {nnz} nonzeros"))?;
    let a = CooMatrix {
        rows: size.m as usize,
        cols: size.n as usize,
        row_idx,
        col_idx,
        vals,
    };
    Ok((a, nz_part))
}

/// Checks a matrix banner line; returns the field and the base of the part starts (0 for
/// Mondriaan's original format, 1 for its Extended Matrix Market format).
fn parse_matrix_banner(t: &str) -> Result<(Field, u64), String> {
    let w: Vec<String> = t.split_ascii_whitespace().map(str::to_lowercase).collect();
    let base = match w[0].as_str() {
        "%%matrixmarket" => 0,
        "%%extended-matrixmarket" => 1,
        other => return Err(format!("unknown banner `{}`", quoted(other))),
    };
    if w.len() < 5 || w.len() > 6 {
        return Err(
            "the banner must read `%%MatrixMarket distributed-matrix coordinate <field> general`"
                .into(),
        );
    }
    if w[1] != "distributed-matrix" && w[1] != "distributedmatrix" {
        return Err(format!(
            "object `{}`: expected `distributed-matrix` (a matrix with its parts)",
            quoted(&w[1])
        ));
    }
    if w[2] != "coordinate" {
        return Err(format!("format `{}`: expected `coordinate`", quoted(&w[2])));
    }
    let field = match w[3].as_str() {
        "real" | "integer" => Field::Real,
        "pattern" => Field::Pattern,
        other => {
            return Err(format!(
                "field `{}` is not supported: expected real, integer or pattern",
                quoted(other)
            ));
        }
    };
    if w[4] != "general" {
        return Err(format!(
            "symmetry `{}` is not supported: only general distributed matrices",
            quoted(&w[4])
        ));
    }
    // Mondriaan's extended format appends the index view; local indices mean something else.
    if let Some(view) = w.get(5).filter(|v| *v != "original" && *v != "global") {
        return Err(format!(
            "view `{}` is not supported: expected original or global indices",
            quoted(view)
        ));
    }
    Ok((field, base))
}

fn parse_entry(s: &str, field: Field, m: u64, n: u64) -> Result<(u32, u32, f64), String> {
    let (i, j, v) = match field {
        Field::Pattern => {
            let [i, j] = fields::<2>(s).map_err(|k| format!("expected `i j`, found {k} fields"))?;
            (i, j, 1.0)
        }
        Field::Real => {
            let [i, j, v] =
                fields::<3>(s).map_err(|k| format!("expected `i j value`, found {k} fields"))?;
            let v = v
                .parse::<f64>()
                .map_err(|_| format!("value `{}` is not a number", quoted(v)))?;
            (i, j, v)
        }
    };
    let i = parse_uint(i, "row index")?;
    let j = parse_uint(j, "column index")?;
    if i == 0 || i > m {
        return Err(format!("row index {i} is outside 1..={m}"));
    }
    if j == 0 || j > n {
        return Err(format!("column index {j} is outside 1..={n}"));
    }
    Ok(((i - 1) as u32, (j - 1) as u32, v))
}

struct VectorFile {
    owners: Vec<u32>,
    p: usize,
    size_line: usize,
}

fn read_vector_at(path: &Path) -> Result<VectorFile, MondriaanError> {
    let mut lines = Lines::open(path)?;
    // Optional `%` lines (a banner from Mondriaan's extended format, comments); BSPedupack
    // itself does not skip them, which is why `write_vector` writes none.
    let (size_line, size) = lines.next_data(true, || "the size line `n p`".into())?;
    let [n, p] = fields::<2>(size).map_err(|k| {
        format_err(
            path,
            size_line,
            format!("the size line must be `n p` (2 numbers), found {k} fields"),
        )
    })?;
    let err = |m: String| format_err(path, size_line, m);
    let n = parse_uint(n, "n").map_err(err)?;
    let p = parse_uint(p, "p").map_err(err)?;
    if p == 0 || p > u32::MAX as u64 {
        return Err(err(format!("p = {p}: need 1 <= p <= {}", u32::MAX)));
    }
    let n = usize::try_from(n).map_err(|_| err(format!("length {n} is too large")))?;

    let mut owners = Vec::with_capacity(n.min(RESERVE_LIMIT));
    for i in 1..=n as u64 {
        let (ln, s) = lines.next_data(false, || format!("entry {i} of {n}"))?;
        let owner = (|| {
            let [idx, o] =
                fields::<2>(s).map_err(|k| format!("expected `index owner`, found {k} fields"))?;
            let idx = parse_uint(idx, "index")?;
            let o = parse_uint(o, "owner")?;
            // BSPedupack's bspinputvec requires the indices in order 1, 2, ..., n.
            if idx != i {
                return Err(format!(
                    "index {idx}, expected {i} (indices in order 1..={n})"
                ));
            }
            if o == 0 || o > p {
                return Err(format!("owner {o} is outside 1..={p}"));
            }
            Ok((o - 1) as u32)
        })()
        .map_err(|m| format_err(path, ln, m))?;
        owners.push(owner);
    }
    lines.expect_end(&format!("the {n} entries"))?;
    Ok(VectorFile {
        owners,
        p: p as usize,
        size_line,
    })
}
