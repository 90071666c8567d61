//! Assembling the entries read: symmetric expansion, sorting by (row, column), summing of
//! duplicates.

use super::blocks::Block;
use crate::sparse::CooMatrix;

/// Expands the symmetric part, sorts by (row, column) and sums duplicates.
///
/// A counting sort by row (stable, so entries keep file order: entry k's own position before
/// its mirror, both before entry k + 1's), then a stable sort by column within each row that is
/// not already in order, then the duplicates of each row are summed left to right. The result
/// equals a stable sort of the expanded entries by (row, column), and the sums are in file order
/// whatever the thread timing was.
pub(super) fn assemble(
    rows: usize,
    cols: usize,
    blocks: Vec<Block>,
    mirror: bool,
    skew: bool,
) -> CooMatrix {
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
