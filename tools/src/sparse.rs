//! What the sparse-matrix commands share about their input files and results: a matrix's
//! name ([`matrix_name`]), the check of an input file before it is read ([`check_input`]),
//! and the rounding slack of an imbalance ([`IMBALANCE_SLACK`]).

use crate::error::{Error, Result};
use std::path::Path;

/// The matrix's name: its file name without `.gz` and `.mtx` (`G3_circuit.mtx.gz` →
/// `G3_circuit`), the key of the reference tables.
///
/// ```
/// use mbsp_tools::sparse::matrix_name;
/// use std::path::Path;
/// assert_eq!(matrix_name(Path::new("a/b/G3_circuit.mtx.gz")), "G3_circuit");
/// assert_eq!(matrix_name(Path::new("x/plain")), "plain");
/// ```
pub fn matrix_name(path: &Path) -> String {
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    name.strip_suffix(".mtx").unwrap_or(name).to_string()
}

/// Checks that `file` is an existing regular file we can open, so that a typo is reported
/// plainly (an input/output error naming the file) rather than as whatever the reader makes
/// of it.
///
/// ```
/// let e = mbsp_tools::sparse::check_input(std::path::Path::new("/no/such.mtx")).unwrap_err();
/// assert!(e.to_string().starts_with("/no/such.mtx: "), "{e}");
/// assert!(mbsp_tools::sparse::check_input(&std::env::temp_dir()).is_err());
/// ```
pub fn check_input(file: &Path) -> Result<()> {
    let shown = file.display();
    let meta = std::fs::metadata(file).map_err(|e| Error::io(shown.to_string()).with_source(e))?;
    if meta.is_dir() {
        return Err(Error::io(format!(
            "{shown} is a directory, not a Matrix Market file"
        )));
    }
    std::fs::File::open(file)
        .map_err(|e| Error::io(format!("{shown}: cannot open")).with_source(e))?;
    Ok(())
}

/// Rounding slack when comparing an imbalance with eps: `imbalance` is computed as
/// `max * p / nnz - 1` in floating point, which can exceed eps by an ulp when the largest part
/// has exactly `(1 + eps) nnz / p` nonzeros.
pub const IMBALANCE_SLACK: f64 = 1e-12;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_drop_gz_and_mtx() {
        assert_eq!(
            matrix_name(Path::new("a/b/G3_circuit.mtx.gz")),
            "G3_circuit"
        );
        assert_eq!(matrix_name(Path::new("bcsstk16.mtx")), "bcsstk16");
        assert_eq!(matrix_name(Path::new("x/plain")), "plain");
    }
}
