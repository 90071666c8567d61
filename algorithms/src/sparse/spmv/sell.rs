//! The local multiply's storage: SELL-C-σ (Kreutzer, Hager, Wellein, Fehske, Bishop, SIAM J.
//! Sci. Comput. 36(5), 2014), with C = 4 rows per chunk and rows sorted by length within
//! windows of σ = 128 rows.
//!
//! Why not CRS: a CRS row sum is one chain of dependent additions, so a row of k nonzeros
//! costs at least k floating-point add latencies (4 cycles each here) however fast the memory
//! is; rows of 5–10 nonzeros (meshes, circuits) are bound by that chain and by the branch at
//! each row's end, not by bandwidth. A chunk of four rows stored column by column keeps four
//! independent sums in flight and has one loop bound per chunk. Each row is still summed left
//! to right in its CRS order, so the results are bit-identical to a CRS multiply. Padding is
//! small on the shared matrices (at most about a quarter of the nonzeros); docs/benchmarks.md
//! has the measured speed against CRS.
//!
//! Padding entries have the value 0 and read a column that is always zero (the slot after the
//! local `x` buffer's last column), so an infinite or NaN `x` entry reaches only the rows that
//! have it, as in CRS.

/// Rows per chunk: four independent sums (one AVX2 register of f64, or two SSE2 ones).
const C: usize = 4;
/// Rows sorted by length together: wide enough that chunks are nearly full, narrow enough that
/// the rows a chunk touches stay close in the matrix's order (so `x` keeps its locality).
const SIGMA: usize = 128;

/// Some rows of a local matrix in SELL-C-σ.
#[derive(Clone, Debug, Default)]
pub(super) struct Sell {
    /// Chunk `k`'s entries are `col[ptr[k]..ptr[k + 1]]` (and `val`), C per step: entry `j`
    /// of the chunk's row `i` at `ptr[k] + C j + i`.
    ptr: Vec<u32>,
    col: Vec<u32>,
    val: Vec<f64>,
    /// Row of each chunk slot (`C` per chunk); `u32::MAX` for padding slots.
    row: Vec<u32>,
    /// The zero column padding entries read.
    pad: u32,
    nnz: usize,
}

impl Sell {
    /// Rows `first..first + row_ptr.len() - 1` of a CRS matrix (`row_ptr` relative to `col`
    /// and `val`), with `pad` a column index whose `x` entry is always zero.
    pub(super) fn new(first: u32, row_ptr: &[u32], col: &[u32], val: &[f64], pad: u32) -> Self {
        let rows = row_ptr.len().saturating_sub(1);
        let len = |r: usize| (row_ptr[r + 1] - row_ptr[r]) as usize;
        let mut order: Vec<usize> = (0..rows).collect();
        for w in order.chunks_mut(SIGMA) {
            w.sort_by_key(|&r| std::cmp::Reverse(len(r))); // stable: ties keep their order
        }
        let mut s = Sell {
            ptr: vec![0],
            pad,
            nnz: row_ptr.last().map_or(0, |&e| (e - row_ptr[0]) as usize),
            ..Sell::default()
        };
        for chunk in order.chunks(C) {
            let width = chunk.iter().map(|&r| len(r)).max().unwrap_or(0);
            for j in 0..width {
                for i in 0..C {
                    match chunk.get(i) {
                        Some(&r) if j < len(r) => {
                            let k = row_ptr[r] as usize + j;
                            s.col.push(col[k]);
                            s.val.push(val[k]);
                        }
                        _ => {
                            s.col.push(pad);
                            s.val.push(0.0);
                        }
                    }
                }
            }
            s.ptr.push(s.col.len() as u32);
            for i in 0..C {
                s.row
                    .push(chunk.get(i).map_or(u32::MAX, |&r| first + r as u32));
            }
        }
        s
    }

    /// Stored nonzeros (padding not counted).
    pub(super) fn nnz(&self) -> usize {
        self.nnz
    }

    /// Stored entries, padding included.
    #[cfg(test)]
    fn stored(&self) -> usize {
        self.val.len()
    }

    /// The nonzeros as (row, column, value), padding left out.
    pub(super) fn entries(&self) -> impl Iterator<Item = (u32, u32, f64)> + '_ {
        self.ptr.windows(2).enumerate().flat_map(move |(k, w)| {
            (w[0] as usize..w[1] as usize)
                .filter(move |&e| self.col[e] != self.pad)
                .map(move |e| (self.row[k * C + e % C], self.col[e], self.val[e]))
        })
    }

    /// Hands each row's sum `Σ_j a_rj x_j` (summed in CRS order) to `out(row, sum)`. `x` must
    /// have an entry for every column and be zero at the padding column.
    #[inline(always)]
    pub(super) fn multiply(&self, x: &[f64], mut out: impl FnMut(usize, f64)) {
        debug_assert_eq!(x.get(self.pad as usize), Some(&0.0));
        for (w, rows) in self.ptr.windows(2).zip(self.row.chunks_exact(C)) {
            let (a, b) = (w[0] as usize, w[1] as usize);
            let mut acc = [0.0f64; C];
            for (c, v) in self.col[a..b]
                .chunks_exact(C)
                .zip(self.val[a..b].chunks_exact(C))
            {
                for i in 0..C {
                    acc[i] += v[i] * x[c[i] as usize];
                }
            }
            for (&r, s) in rows.iter().zip(acc) {
                if r != u32::MAX {
                    out(r as usize, s);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CRS of a deterministic pseudo-random matrix with rows of 0..max_len nonzeros.
    fn crs(rows: usize, cols: usize, max_len: usize, seed: u64) -> (Vec<u32>, Vec<u32>, Vec<f64>) {
        let mut s = seed;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let (mut ptr, mut col, mut val) = (vec![0u32], Vec::new(), Vec::new());
        for _ in 0..rows {
            let len = next() as usize % (max_len + 1);
            let mut c: Vec<u32> = (0..len).map(|_| (next() % cols as u64) as u32).collect();
            c.sort_unstable();
            c.dedup();
            for &j in &c {
                col.push(j);
                val.push((next() % 1000) as f64 / 7.0 - 50.0);
            }
            ptr.push(col.len() as u32);
        }
        (ptr, col, val)
    }

    fn crs_multiply(ptr: &[u32], col: &[u32], val: &[f64], x: &[f64]) -> Vec<f64> {
        ptr.windows(2)
            .map(|w| {
                let mut s = 0.0;
                for k in w[0] as usize..w[1] as usize {
                    s += val[k] * x[col[k] as usize];
                }
                s
            })
            .collect()
    }

    #[test]
    fn bit_identical_to_crs_and_entries_round_trip() {
        for (rows, cols, max_len, seed) in
            [(0, 3, 2, 1), (1, 1, 1, 2), (7, 5, 3, 3), (1000, 300, 40, 4)]
        {
            let (ptr, col, val) = crs(rows, cols, max_len, seed);
            let sell = Sell::new(10, &ptr, &col, &val, cols as u32);
            assert_eq!(sell.nnz(), val.len());
            assert!(sell.stored() >= val.len());
            let mut x: Vec<f64> = (0..cols).map(|j| (j as f64 * 0.37).sin()).collect();
            x.push(0.0);
            let want = crs_multiply(&ptr, &col, &val, &x);
            let mut got = vec![f64::NAN; rows];
            sell.multiply(&x, |r, s| got[r - 10] = s);
            // Rows without nonzeros get 0 as well (summed over nothing).
            for (r, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g.to_bits(), w.to_bits(), "row {r}");
            }
            let mut e: Vec<(u32, u32, u64)> = sell
                .entries()
                .map(|(r, c, v)| (r - 10, c, v.to_bits()))
                .collect();
            e.sort_unstable();
            let mut f: Vec<(u32, u32, u64)> = Vec::new();
            for r in 0..rows {
                for k in ptr[r] as usize..ptr[r + 1] as usize {
                    f.push((r as u32, col[k], val[k].to_bits()));
                }
            }
            assert_eq!(e, f);
        }
    }

    #[test]
    fn infinity_reaches_only_its_rows() {
        // Rows of different lengths share chunks, so the short ones are padded.
        let ptr = [0u32, 3, 4, 5, 6];
        let col = [0u32, 1, 2, 1, 2, 0];
        let val = [1.0, 1.0, 1.0, 2.0, 3.0, 4.0];
        let sell = Sell::new(0, &ptr, &col, &val, 3);
        let x = [f64::INFINITY, 1.0, 1.0, 0.0];
        let mut got = [0.0; 4];
        sell.multiply(&x, |r, s| got[r] = s);
        assert_eq!(got, [f64::INFINITY, 2.0, 3.0, f64::INFINITY]);
    }
}
