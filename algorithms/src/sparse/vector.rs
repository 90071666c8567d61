//! Vector distribution (being written).

use super::{CooMatrix, Distribution};

/// Owners for `x` and `y` given the nonzero parts (placeholder: first part seen).
pub fn distribute(a: &CooMatrix, nz_part: Vec<u32>, p: usize) -> Distribution {
    let mut x_owner = vec![0u32; a.cols];
    let mut y_owner = vec![0u32; a.rows];
    for k in 0..a.nnz() {
        x_owner[a.col_idx[k] as usize] = nz_part[k];
        y_owner[a.row_idx[k] as usize] = nz_part[k];
    }
    Distribution {
        p,
        nz_part,
        x_owner,
        y_owner,
    }
}
