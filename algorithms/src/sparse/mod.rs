//! Sparse matrices: Matrix Market input, the medium-grain partitioner, Mondriaan's file formats.
//!
//! * [`CooMatrix`] — a sparse matrix as coordinate triplets (0-based), what the reader returns and
//!   what the partitioner splits.
//! * [`mtx`] — the Matrix Market reader (coordinate; real, integer, complex, pattern; general,
//!   symmetric, skew-symmetric, hermitian; gzip).
//! * [`partition`] — splitting the nonzeros into `p` parts with minimal communication volume
//!   (recursive bipartitioning, medium-grain model, multilevel hypergraph bipartitioner).
//! * [`vector`] — distributing the vectors `x` and `y` so that the h-relations are small.
//! * [`mondriaan`] — writing and reading the distributed matrix and vector files of Mondriaan.
//! * [`metrics`] — communication volume, load imbalance and h-relations of a distribution.
//! * [`spmv`] — the distributed multiply `y = Ax` on such a distribution: plain BSP (two
//!   supersteps), high-performance (`direct_get` + `hpsend`, one superstep) and hierarchical
//!   (packages, then a nested run over each package's cores).
//!
//! The communication cost model is that of the 2D SpMV `y = Ax` (BSPlib paper §5.4, the
//! Mondriaan papers): a column `j` whose nonzeros lie in `λ_j` parts costs `λ_j - 1` words in the
//! fan-out of `x_j`, a row `i` in `λ_i` parts costs `λ_i - 1` words in the fan-in of `y_i`.

pub mod metrics;
pub mod mondriaan;
pub mod mtx;
pub mod partition;
pub mod spmv;
pub mod vector;

pub use metrics::Distribution;

use std::fmt;

/// A sparse `rows × cols` matrix as coordinate triplets, 0-based, in no particular order.
///
/// Indices are `u32` (matrices up to 2³² - 1 rows and columns): half the memory traffic of
/// `usize` in the partitioner's inner loops.
///
/// ```
/// use mbsp_algorithms::sparse::CooMatrix;
/// let a = CooMatrix::new(2, 3, vec![(0, 0, 1.0), (1, 2, -2.0)]).unwrap();
/// assert_eq!((a.rows, a.cols, a.nnz()), (2, 3, 2));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct CooMatrix {
    /// Number of rows `m`.
    pub rows: usize,
    /// Number of columns `n`.
    pub cols: usize,
    /// Row index of each nonzero.
    pub row_idx: Vec<u32>,
    /// Column index of each nonzero.
    pub col_idx: Vec<u32>,
    /// Value of each nonzero.
    pub vals: Vec<f64>,
}

/// A matrix whose shape or indices are inconsistent ([`CooMatrix::new`],
/// [`CooMatrix::validate`]).
///
/// ```
/// use mbsp_algorithms::sparse::{CooMatrix, ShapeError};
/// let e = CooMatrix::new(2, 2, vec![(0, 0, 1.0), (2, 1, 1.0)]).unwrap_err();
/// assert_eq!(e, ShapeError::Outside { nonzero: 1, row: 2, col: 1, rows: 2, cols: 2 });
/// assert_eq!(e.to_string(), "nonzero 1 at (2, 1) lies outside the 2 x 2 matrix");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShapeError {
    /// More rows or columns than `u32` indices address.
    TooLarge {
        /// Rows asked for.
        rows: usize,
        /// Columns asked for.
        cols: usize,
    },
    /// A nonzero outside the matrix.
    Outside {
        /// Position of the nonzero in the input (or the arrays).
        nonzero: usize,
        /// Its row index (0-based).
        row: usize,
        /// Its column index (0-based).
        col: usize,
        /// Rows of the matrix.
        rows: usize,
        /// Columns of the matrix.
        cols: usize,
    },
    /// The row, column and value arrays differ in length.
    Lengths {
        /// Length of `row_idx`.
        rows: usize,
        /// Length of `col_idx`.
        cols: usize,
        /// Length of `vals`.
        vals: usize,
    },
    /// A square matrix was needed.
    NotSquare {
        /// Rows of the matrix.
        rows: usize,
        /// Columns of the matrix.
        cols: usize,
    },
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ShapeError::TooLarge { rows, cols } => write!(
                f,
                "matrix {rows} x {cols} is too large: at most {} rows and columns",
                u32::MAX
            ),
            ShapeError::Outside {
                nonzero,
                row,
                col,
                rows,
                cols,
            } => write!(
                f,
                "nonzero {nonzero} at ({row}, {col}) lies outside the {rows} x {cols} matrix"
            ),
            ShapeError::Lengths { rows, cols, vals } => write!(
                f,
                "row, column and value arrays have different lengths ({rows}, {cols}, {vals})"
            ),
            ShapeError::NotSquare { rows, cols } => {
                write!(f, "the matrix is {rows} x {cols}, not square")
            }
        }
    }
}

impl std::error::Error for ShapeError {}

impl CooMatrix {
    /// The 2D Poisson matrix: the 5-point Laplacian on a `k × k` grid, shifted by `shift` on
    /// the diagonal (symmetric positive definite for `shift >= 0`; 5 nonzeros per interior
    /// row). Row `i·k + j` is grid point `(i, j)`. A grid of more than `u32::MAX` points is an
    /// error.
    ///
    /// ```
    /// let a = mbsp_algorithms::sparse::CooMatrix::laplacian_2d(3, 0.5).unwrap();
    /// // 9 diagonal entries, 12 grid edges twice.
    /// assert_eq!((a.rows, a.cols, a.nnz()), (9, 9, 9 + 24));
    /// let centre: f64 = (0..a.nnz()).filter(|&n| a.row_idx[n] == 4).map(|n| a.vals[n]).sum();
    /// assert_eq!(centre, 0.5); // 4.5 on the diagonal, four -1s
    /// assert!(mbsp_algorithms::sparse::CooMatrix::laplacian_2d(1 << 20, 0.0).is_err());
    /// ```
    pub fn laplacian_2d(k: usize, shift: f64) -> Result<Self, ShapeError> {
        let n =
            k.checked_mul(k)
                .filter(|&n| n <= u32::MAX as usize)
                .ok_or(ShapeError::TooLarge {
                    rows: k.saturating_mul(k),
                    cols: k.saturating_mul(k),
                })?;
        let mut e = Vec::with_capacity(5 * n);
        for i in 0..k {
            for j in 0..k {
                let r = i * k + j;
                e.push((r, r, 4.0 + shift));
                if i > 0 {
                    e.push((r, r - k, -1.0));
                }
                if i + 1 < k {
                    e.push((r, r + k, -1.0));
                }
                if j > 0 {
                    e.push((r, r - 1, -1.0));
                }
                if j + 1 < k {
                    e.push((r, r + 1, -1.0));
                }
            }
        }
        CooMatrix::new(n, n, e)
    }

    /// A matrix from `(row, col, value)` triplets (0-based); checks every index.
    pub fn new(
        rows: usize,
        cols: usize,
        entries: impl IntoIterator<Item = (usize, usize, f64)>,
    ) -> Result<Self, ShapeError> {
        if rows > u32::MAX as usize || cols > u32::MAX as usize {
            return Err(ShapeError::TooLarge { rows, cols });
        }
        let mut a = CooMatrix::empty(rows, cols);
        for (k, (i, j, v)) in entries.into_iter().enumerate() {
            if i >= rows || j >= cols {
                return Err(ShapeError::Outside {
                    nonzero: k,
                    row: i,
                    col: j,
                    rows,
                    cols,
                });
            }
            a.row_idx.push(i as u32);
            a.col_idx.push(j as u32);
            a.vals.push(v);
        }
        Ok(a)
    }

    /// A `rows × cols` matrix without nonzeros (sizes not checked: callers do).
    pub(crate) fn empty(rows: usize, cols: usize) -> Self {
        CooMatrix {
            rows,
            cols,
            row_idx: Vec::new(),
            col_idx: Vec::new(),
            vals: Vec::new(),
        }
    }

    /// Number of stored nonzeros.
    pub fn nnz(&self) -> usize {
        self.vals.len()
    }

    /// Checks that the three arrays have one length and every index is inside the matrix.
    pub fn validate(&self) -> Result<(), ShapeError> {
        let k = self.vals.len();
        if self.row_idx.len() != k || self.col_idx.len() != k {
            return Err(ShapeError::Lengths {
                rows: self.row_idx.len(),
                cols: self.col_idx.len(),
                vals: k,
            });
        }
        if let Some(t) = (0..k).find(|&t| {
            self.row_idx[t] as usize >= self.rows || self.col_idx[t] as usize >= self.cols
        }) {
            return Err(ShapeError::Outside {
                nonzero: t,
                row: self.row_idx[t] as usize,
                col: self.col_idx[t] as usize,
                rows: self.rows,
                cols: self.cols,
            });
        }
        Ok(())
    }

    /// Number of nonzeros in each row.
    pub fn row_counts(&self) -> Vec<u32> {
        let mut c = vec![0u32; self.rows];
        for &i in &self.row_idx {
            c[i as usize] += 1;
        }
        c
    }

    /// Number of nonzeros in each column.
    pub fn col_counts(&self) -> Vec<u32> {
        let mut c = vec![0u32; self.cols];
        for &j in &self.col_idx {
            c[j as usize] += 1;
        }
        c
    }
}
