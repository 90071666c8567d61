//! Writing a Matrix Market file.

use super::has_gz_extension;
use crate::sparse::CooMatrix;
use crate::whole_file;
use std::io::{self, BufWriter, Write};
use std::path::Path;

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
/// Values are printed with Rust's shortest round-trip formatting, so [`read`](super::read()) gives back the
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
