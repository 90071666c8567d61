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
//! * Lines of at most [`MAX_LINE`](text::MAX_LINE) bytes (1 MiB): a longer one is an
//!   error ([`MtxErrorKind::LineTooLong`]), so that input without line ends (`/dev/zero`, a
//!   binary file) costs a bounded amount of memory. Messages quote the input with control
//!   characters escaped ([`text::shown`]).
//! * The dense `array` format and `vector` objects are not read (a clear error says so).
//!
//! # What is returned
//!
//! A [`CooMatrix`](super::CooMatrix) whose entries are **sorted by (row, column)** with **no duplicates**: entries
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
//! and a few blocks in flight. Decompressing a `.gz` file is sequential, and often a large
//! share of the reading time (docs/benchmarks.md has measurements).
//!
//! # Modules
//!
//! The reader's phases each have their module: `header` (banner and size line), `blocks`
//! (the body read in blocks, parsed in parallel), `parse` (the entry lines of a block),
//! `assemble` (expansion, sorting, summing of duplicates); `reader` drives them, `writer`
//! writes, and `error` holds what goes wrong.

mod assemble;
mod blocks;
mod error;
mod header;
mod parse;
mod reader;
mod writer;

pub use error::{Axis, MtxError, MtxErrorKind};
pub use header::{Field, Header, Symmetry};
pub use reader::{Complex, ReadOptions, read, read_header, read_path, read_path_with};
pub use writer::{write, write_path};

use crate::text;
use std::path::Path;

/// Whether a path names a gzip file (`.gz`, any case): read and written compressed.
fn has_gz_extension(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"))
}

/// Text of a line or token for a message: without the line end, control characters and bytes
/// that are not UTF-8 escaped, at most 60 characters.
fn shown(bytes: &[u8]) -> String {
    text::shown(bytes, 60)
}
