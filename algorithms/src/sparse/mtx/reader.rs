//! Reading a Matrix Market file: its options, the entry points, gzip detection, and the
//! driver of the reader's phases (header, blocks, assembly).

use super::assemble::assemble;
use super::blocks::{Block, Stopped, read_blocks};
use super::error::{MtxError, MtxErrorKind, long_line, read_error};
use super::has_gz_extension;
use super::header::{Header, ParsedHeader, Symmetry, parse_header};
use super::parse::Facts;
use crate::sparse::CooMatrix;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

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

/// Whether the buffered input starts with the gzip magic bytes `1f 8b` (without consuming them).
fn starts_with_gzip<R: BufRead>(r: &mut R, name: &str) -> Result<bool, MtxError> {
    let head = r
        .fill_buf()
        .map_err(|e| MtxError::new(name, None, MtxErrorKind::Io(e)))?;
    Ok(head.starts_with(&[0x1f, 0x8b]))
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

/// Reads a decompressed Matrix Market file: its header, then its body in blocks, checked in
/// file order, then assembled.
fn read_decoded<R: BufRead>(
    mut r: R,
    name: &str,
    opts: &ReadOptions,
    gz: bool,
) -> Result<CooMatrix, MtxError> {
    let ph = parse_header(&mut r, name, gz, opts.complex == Complex::Refuse)?;
    let h = ph.header;
    let facts = Facts {
        field: h.field,
        skew: h.symmetry == Symmetry::SkewSymmetric,
        rows: h.rows as u64,
        cols: h.cols as u64,
    };
    let (mut blocks, stopped) = read_blocks(&mut r, &facts, h.entries);
    check_blocks(&mut blocks, stopped, &ph, name, gz)?;
    let mirror = h.symmetry != Symmetry::General;
    Ok(assemble(h.rows, h.cols, blocks, mirror, facts.skew))
}

/// The first error of the body, if it has one.
///
/// Walks the blocks in file order so that the reported error is the first one in the file,
/// whichever block a thread happened to finish first. A read failure (`stopped`) comes after
/// every block read, then the check that no entry is missing.
fn check_blocks(
    blocks: &mut [Block],
    stopped: Option<Stopped>,
    ph: &ParsedHeader,
    name: &str,
    gz: bool,
) -> Result<(), MtxError> {
    let declared = ph.header.entries;
    let mut line = ph.lines; // lines before the current block
    let mut found = 0usize;
    for b in blocks {
        if found + b.entries.len() > declared {
            let k = declared - found; // index in this block of the first entry too many
            let l = line + b.line_of_entry(k) + 1;
            let kind = MtxErrorKind::TooManyEntries { declared };
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
    if found < declared {
        let kind = MtxErrorKind::TooFewEntries { declared, found };
        return Err(MtxError::new(name, Some(line), kind));
    }
    Ok(())
}
