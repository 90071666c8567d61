//! The local multiply's storage: SELL-C-σ (Kreutzer, Hager, Wellein, Fehske, Bishop, SIAM J.
//! Sci. Comput. 36(5), 2014), with C = 4 rows per chunk and rows sorted by length within
//! windows of σ rows (σ chosen per matrix, below).
//!
//! Why not CRS: a CRS row sum is one chain of dependent additions, so a row of k nonzeros
//! costs at least k floating-point add latencies (several cycles each) however fast the memory
//! is; rows of 5–10 nonzeros (meshes, circuits) are bound by that chain and by the branch at
//! each row's end, not by bandwidth. A chunk of four rows stored column by column keeps four
//! independent sums in flight and has one loop bound per chunk. Each row is still summed left
//! to right in its CRS order, so the results are bit-identical to a CRS multiply. Padding is
//! small on the shared matrices (at most 5% with σ as below); docs/benchmarks.md has the
//! measured speed against CRS.
//!
//! **σ.** Sorting rows by length within a window fills the chunks; a wider window fills them
//! better but spreads the rows (and the `x` entries) one chunk touches. σ is the smallest of
//! 128, 512, 2048 and 8192 whose padding is at most 1/16 of the nonzeros (the one with the
//! least padding when none is): 128 on meshes and circuits, wider on matrices with a few long
//! rows among short ones (Maragal_6: 28% padding at σ = 128, under 5% at 2048).
//!
//! **Iso-valued matrices.** When every nonzero of a local matrix has the same (finite) value
//! `v`, as in the pattern matrices of graphs and meshes read from Matrix Market (every value
//! 1), the value is kept once instead of once per entry (SuiteSparse:GraphBLAS's iso-valued
//! matrices): 4 bytes per entry instead of 12, and each product is still `v x_c`, so the sums
//! are CRS's bit for bit. Padding there reads the zero column and adds `v 0`, a zero (so the
//! multiply relies on that column's `x` being 0: the local `x` buffers are made with it 0 and
//! never hand it out). A renamed matrix's padding reads real columns and needs its zeros
//! stored: it puts its chunks without padding first, which keep the one value, and stores
//! values (`v` or 0) for the chunks with padding alone. The multiply is memory bound, so the
//! smaller entries make it faster than the same matrix with values per entry
//! (docs/benchmarks.md has the measurements).
//!
//! Padding entries have the value 0 and read a column that is always zero (the slot after the
//! local `x` buffer's last column), so an infinite or NaN `x` entry reaches only the rows that
//! have it, as in CRS. A matrix over a caller's whole `x` ([`Sell::renamed`]) has no such
//! column: there a padding entry reads the column of its row's last entry, which adds `0 x_c
//! = 0` to a sum that read `x_c` already, the same sum unless `x_c` is infinite (then `0 x_c`
//! is NaN); a NaN sum is summed again without the padding ([`Sell::multiply_whole_chunks`]).

/// Rows per chunk: four independent sums (one AVX2 register of f64, or two SSE2 ones).
const C: usize = 4;
/// The window widths σ tried, narrowest first ([module docs](self)).
const SIGMAS: [usize; 4] = [128, 512, 2048, 8192];

/// Stored entries (padding included) of rows of lengths `len` in chunks of C, sorted by
/// length within windows of `sigma` rows.
fn stored(len: &[usize], sigma: usize) -> usize {
    len.chunks(sigma)
        .map(|w| {
            let mut w = w.to_vec();
            w.sort_unstable_by(|a, b| b.cmp(a));
            // Each chunk is as wide as its first (longest) row.
            w.iter().step_by(C).sum::<usize>() * C
        })
        .sum()
}

/// The window width σ for rows of lengths `len` ([module docs](self)).
fn sigma(len: &[usize]) -> usize {
    let nnz: usize = len.iter().sum();
    let mut best = (usize::MAX, SIGMAS[0]);
    for s in SIGMAS {
        let st = stored(len, s);
        if st - nnz <= nnz / 16 {
            return s;
        }
        best = best.min((st, s));
    }
    best.1
}

/// Some rows of a local matrix in SELL-C-σ.
#[derive(Clone, Debug, Default)]
pub(super) struct Sell {
    /// Chunk `k`'s entries are `col[ptr[k]..ptr[k + 1]]` (and `val`), C per step: entry `j`
    /// of the chunk's row `i` at `ptr[k] + C j + i`.
    ptr: Vec<u32>,
    col: Vec<u32>,
    val: Values,
    /// Row of each chunk slot (`C` per chunk); `u32::MAX` for padding slots.
    row: Vec<u32>,
    /// Entries of each chunk slot's row (0 for padding slots): entry `j` of a slot is padding
    /// from its length on.
    len: Vec<u32>,
    /// The zero column padding entries read ([`Sell::multiply`]); `u32::MAX` after
    /// [`Sell::renamed`], whose padding reads its row's columns.
    pad: u32,
    /// One more than the largest column stored (padding included): the multiplies check once
    /// that `x` is this long, and then read it without a check per entry.
    x_len: usize,
    nnz: usize,
}

/// The values of a [`Sell`]'s entries ([module docs](self)).
#[derive(Clone, Debug)]
enum Values {
    /// One per stored entry, padding included.
    Each(Vec<f64>),
    /// Every nonzero is `v`. The entries of chunks `..chunks` are all `v` (nonzeros, or
    /// padding that reads the zero column); the chunks after them (a renamed matrix's chunks
    /// with padding) store one value per entry, `tail[e - ptr[chunks]]`.
    Iso {
        v: f64,
        chunks: usize,
        tail: Vec<f64>,
    },
}

impl Default for Values {
    fn default() -> Self {
        Values::Each(Vec::new())
    }
}

impl Sell {
    /// Rows `first..first + row_ptr.len() - 1` of a CRS matrix (`row_ptr` relative to `col`
    /// and `val`), with `pad` a column index whose `x` entry is always zero.
    pub(super) fn new(first: u32, row_ptr: &[u32], col: &[u32], val: &[f64], pad: u32) -> Self {
        let rows = row_ptr.len().saturating_sub(1);
        let len = |r: usize| (row_ptr[r + 1] - row_ptr[r]) as usize;
        let lens: Vec<usize> = (0..rows).map(len).collect();
        let mut order: Vec<usize> = (0..rows).collect();
        for w in order.chunks_mut(sigma(&lens)) {
            w.sort_by_key(|&r| std::cmp::Reverse(len(r))); // stable: ties keep their order
        }
        let mut s = Sell {
            ptr: vec![0],
            pad,
            nnz: row_ptr.last().map_or(0, |&e| (e - row_ptr[0]) as usize),
            ..Sell::default()
        };
        let mut vals = Vec::new();
        for chunk in order.chunks(C) {
            let width = chunk.iter().map(|&r| len(r)).max().unwrap_or(0);
            for j in 0..width {
                for i in 0..C {
                    match chunk.get(i) {
                        Some(&r) if j < len(r) => {
                            let k = row_ptr[r] as usize + j;
                            s.col.push(col[k]);
                            vals.push(val[k]);
                        }
                        _ => {
                            s.col.push(pad);
                            vals.push(0.0);
                        }
                    }
                }
            }
            s.ptr.push(s.col.len() as u32);
            for i in 0..C {
                s.row
                    .push(chunk.get(i).map_or(u32::MAX, |&r| first + r as u32));
                s.len.push(chunk.get(i).map_or(0, |&r| len(r) as u32));
            }
        }
        s.x_len = s.col.iter().max().map_or(0, |&c| c as usize + 1);
        let nonzeros = row_ptr.first().map_or(&[][..], |&a| {
            &val[a as usize..row_ptr[row_ptr.len() - 1] as usize]
        });
        s.val = match nonzeros.split_first() {
            Some((&v, rest))
                if v.is_finite() && rest.iter().all(|w| w.to_bits() == v.to_bits()) =>
            {
                Values::Iso {
                    v,
                    chunks: s.chunks(),
                    tail: Vec::new(),
                }
            }
            _ => Values::Each(vals),
        };
        s
    }

    /// Whether every nonzero has one value, kept once ([module docs](self)).
    #[cfg(test)]
    fn is_iso(&self) -> bool {
        matches!(self.val, Values::Iso { .. })
    }

    /// The value of entry `e` of chunk `k` (0 for padding where values are stored per entry).
    fn value(&self, k: usize, e: usize) -> f64 {
        match &self.val {
            Values::Each(val) => val[e],
            Values::Iso { v, chunks, .. } if k < *chunks => *v,
            Values::Iso { chunks, tail, .. } => tail[e - self.ptr[*chunks] as usize],
        }
    }

    /// Stored nonzeros (padding not counted).
    pub(super) fn nnz(&self) -> usize {
        self.nnz
    }

    /// Stored entries, padding included.
    #[cfg(test)]
    fn stored(&self) -> usize {
        self.col.len()
    }

    /// Whether entry `e` (of chunk `k`) is a nonzero rather than padding.
    fn real(&self, k: usize, e: usize) -> bool {
        let at = e - self.ptr[k] as usize;
        (at / C) < self.len[k * C + at % C] as usize
    }

    /// The nonzeros as (row, column, value), padding left out.
    pub(super) fn entries(&self) -> impl Iterator<Item = (u32, u32, f64)> + '_ {
        self.ptr.windows(2).enumerate().flat_map(move |(k, w)| {
            (w[0] as usize..w[1] as usize)
                .filter(move |&e| self.real(k, e))
                .map(move |e| (self.row[k * C + e % C], self.col[e], self.value(k, e)))
        })
    }

    /// The same rows with column `c` renamed `map[c]` and row `r` renamed `rows[r]`, for
    /// [`multiply_whole_chunks`](Self::multiply_whole_chunks) (a local matrix turned into one over the
    /// global columns that hands out the positions its caller writes, see `shared.rs`): each
    /// padding entry reads the column of its row's last entry, or of the chunk's first entry in
    /// a slot without a row. An iso-valued matrix puts its chunks without padding first and
    /// stores values (`v` or 0) for the chunks with padding alone ([`Values::Iso`]).
    pub(super) fn renamed(&self, map: &[u32], rows: &[u32]) -> Sell {
        let iso = match self.val {
            Values::Iso { v, .. } => Some(v),
            Values::Each(_) => None,
        };
        let padded = |k: usize| {
            let width = (self.ptr[k + 1] - self.ptr[k]) as usize / C;
            self.len[k * C..k * C + C]
                .iter()
                .any(|&l| l as usize != width)
        };
        let order: Vec<usize> = match iso {
            Some(_) => (0..self.chunks())
                .filter(|&k| !padded(k))
                .chain((0..self.chunks()).filter(|&k| padded(k)))
                .collect(),
            None => (0..self.chunks()).collect(),
        };
        // (Chunks that keep the one value: the first `plain` of `order`.)
        let plain = match iso {
            Some(_) => order.iter().take_while(|&&k| !padded(k)).count(),
            None => 0,
        };
        let mut out = Sell {
            ptr: vec![0],
            pad: u32::MAX,
            nnz: self.nnz,
            ..Sell::default()
        };
        let mut tail = Vec::new();
        for (at, &k) in order.iter().enumerate() {
            let (a, b) = (self.ptr[k] as usize, self.ptr[k + 1] as usize);
            let first = out.col.len();
            for e in a..b {
                out.col.push(if self.real(k, e) {
                    map[self.col[e] as usize]
                } else {
                    let lane = (e - a) % C;
                    match self.len[k * C + lane] as usize {
                        0 => out.col[first],
                        n => out.col[first + C * (n - 1) + lane],
                    }
                });
                if let Some(v) = iso
                    && at >= plain
                {
                    tail.push(if self.real(k, e) { v } else { 0.0 });
                }
            }
            out.ptr.push(out.col.len() as u32);
            for i in k * C..k * C + C {
                let r = self.row[i];
                out.row
                    .push(if r == u32::MAX { r } else { rows[r as usize] });
                out.len.push(self.len[i]);
            }
        }
        out.x_len = out.col.iter().max().map_or(0, |&c| c as usize + 1);
        out.val = match iso {
            Some(v) => Values::Iso {
                v,
                chunks: plain,
                tail,
            },
            None => self.val.clone(),
        };
        out
    }

    /// The sums of the four rows of the chunk whose entries are `entries`, each left to right
    /// (padding included: with values per entry it adds `0 x_c`; iso-valued, only in a matrix
    /// whose padding reads the zero column, `v 0` with `v` finite: zeros, which leave a sum
    /// unchanged, as no sum here is ever -0).
    #[inline(always)]
    fn chunk_sums(&self, k: usize, entries: std::ops::Range<usize>, x: &[f64]) -> [f64; C] {
        debug_assert!(x.len() >= self.x_len);
        // SAFETY: (each `get_unchecked` below) every stored column is below `x_len` (set where
        // `col` is made), and the multiplies, the only callers, check `x.len() >= x_len` first.
        let at = |c: u32| unsafe { *x.get_unchecked(c as usize) };
        let cols = &self.col[entries.clone()];
        let mut acc = [0.0f64; C];
        let mut each = |val: &[f64]| {
            for (c, v) in cols.chunks_exact(C).zip(val.chunks_exact(C)) {
                for i in 0..C {
                    acc[i] += v[i] * at(c[i]);
                }
            }
        };
        match &self.val {
            Values::Each(val) => each(&val[entries]),
            Values::Iso { v, chunks, .. } if k < *chunks => {
                for c in cols.chunks_exact(C) {
                    for i in 0..C {
                        acc[i] += v * at(c[i]);
                    }
                }
            }
            Values::Iso { chunks, tail, .. } => {
                let o = self.ptr[*chunks] as usize;
                each(&tail[entries.start - o..entries.end - o]);
            }
        }
        acc
    }

    /// Hands each row's sum `Σ_j a_rj x_j` (summed in CRS order) to `out(row, sum)`. `x` must
    /// have an entry for every column and be zero at the padding column.
    #[inline(always)]
    pub(super) fn multiply(&self, x: &[f64], mut out: impl FnMut(usize, f64)) {
        debug_assert_eq!(x.get(self.pad as usize), Some(&0.0));
        self.check_x(x);
        for (k, (w, rows)) in self
            .ptr
            .windows(2)
            .zip(self.row.chunks_exact(C))
            .enumerate()
        {
            let acc = self.chunk_sums(k, w[0] as usize..w[1] as usize, x);
            for (&r, s) in rows.iter().zip(acc) {
                if r != u32::MAX {
                    out(r as usize, s);
                }
            }
        }
    }

    /// [`multiply_whole_chunks`](Self::multiply_whole_chunks) of every chunk.
    #[cfg(test)]
    fn multiply_whole(&self, x: &[f64], out: impl FnMut(usize, f64)) {
        self.multiply_whole_chunks(x, 0..self.chunks(), out);
    }

    /// Chunks (groups of C rows) stored.
    pub(super) fn chunks(&self) -> usize {
        self.ptr.len() - 1
    }

    /// [`multiply`](Self::multiply) of the rows of chunks `ks`, for a matrix made by
    /// [`renamed`](Self::renamed): `x` has an entry for every column and no zero column; a
    /// NaN sum is summed again without the padding (module docs), so every sum is that of
    /// CRS, bit for bit.
    #[inline(always)]
    pub(super) fn multiply_whole_chunks(
        &self,
        x: &[f64],
        ks: std::ops::Range<usize>,
        mut out: impl FnMut(usize, f64),
    ) {
        self.check_x(x);
        for (k, (w, rows)) in self.ptr[ks.start..=ks.end]
            .windows(2)
            .zip(self.row[ks.start * C..ks.end * C].chunks_exact(C))
            .enumerate()
        {
            let k = ks.start + k;
            let acc = self.chunk_sums(k, w[0] as usize..w[1] as usize, x);
            for (i, (&r, s)) in rows.iter().zip(acc).enumerate() {
                if r != u32::MAX {
                    out(
                        r as usize,
                        if s.is_nan() { self.row_sum(k, i, x) } else { s },
                    );
                }
            }
        }
    }

    /// Refuses an `x` shorter than the columns stored (the callers' buffers and vectors are
    /// made to the plan's sizes: this is the one check that lets the kernel read unchecked).
    #[inline(always)]
    fn check_x(&self, x: &[f64]) {
        assert!(
            x.len() >= self.x_len,
            "spmv: x of {} entries for a local matrix of {} columns",
            x.len(),
            self.x_len
        );
    }

    /// The sum of lane `i` of chunk `k` over its nonzeros alone, in CRS order.
    #[cold]
    fn row_sum(&self, k: usize, i: usize, x: &[f64]) -> f64 {
        let a = self.ptr[k] as usize;
        (0..self.len[k * C + i] as usize)
            .map(|j| a + C * j + i)
            .fold(0.0, |s, e| s + self.value(k, e) * x[self.col[e] as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CRS of a deterministic pseudo-random matrix with rows of 0..max_len nonzeros.
    fn crs(rows: usize, cols: usize, max_len: usize, seed: u64) -> (Vec<u32>, Vec<u32>, Vec<f64>) {
        let mut rng = mbsp::rng::SplitMix64::new(seed);
        let mut next = move || rng.next_u64();
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
    fn renamed_matrices_sum_as_crs_with_infinities_too() {
        let (ptr, col, val) = crs(300, 40, 9, 5);
        let sell = Sell::new(0, &ptr, &col, &val, 40);
        // Local column c is global column 2c + 1 of an x of 81 entries: no zero slot.
        let map: Vec<u32> = (0..40).map(|c| 2 * c + 1).collect();
        let rows: Vec<u32> = (0..300).collect();
        let global = sell.renamed(&map, &rows);
        let mut xg: Vec<f64> = (0..81).map(|j| (j as f64 * 0.11).cos() + 2.0).collect();
        for inf in [false, true] {
            if inf {
                // Infinite entries: their rows give +-inf (or NaN with both signs), as CRS.
                xg[2 * 7 + 1] = f64::INFINITY;
                xg[2 * 30 + 1] = f64::NEG_INFINITY;
            }
            let mut xl: Vec<f64> = map.iter().map(|&j| xg[j as usize]).collect();
            xl.push(0.0);
            let want = crs_multiply(&ptr, &col, &val, &xl);
            let mut got = vec![0.5; 300];
            global.multiply_whole(&xg, |r, s| got[r] = s);
            for r in 0..300 {
                assert_eq!(got[r].to_bits(), want[r].to_bits(), "row {r} ({inf})");
            }
            assert!(!inf || want.iter().any(|v| v.is_infinite()));
        }
        let mut e: Vec<(u32, u32, u64)> = global
            .entries()
            .map(|(r, c, v)| (r, c, v.to_bits()))
            .collect();
        e.sort_unstable();
        assert_eq!(e.len(), val.len());
        assert!(e.iter().all(|&(_, c, _)| c % 2 == 1));
    }

    #[test]
    fn a_few_long_rows_widen_the_window() {
        // One row in 64 is long: windows of 128 rows hold two, each padding a chunk of short
        // rows to its length.
        let lens: Vec<usize> = (0..8192)
            .map(|r| if r % 64 == 0 { 40 } else { 2 })
            .collect();
        let nnz: usize = lens.iter().sum();
        assert!(stored(&lens, 128) - nnz > nnz / 16);
        let s = sigma(&lens);
        assert!(s > 128 && stored(&lens, s) - nnz <= nnz / 16, "sigma {s}");
        // The matrix stores what `stored` counts, and multiplies as CRS.
        let (mut ptr, mut col, mut val) = (vec![0u32], Vec::new(), Vec::new());
        for (r, &l) in lens.iter().enumerate() {
            for j in 0..l {
                col.push(((r * 7 + j * 13) % 500) as u32);
                val.push((r % 11) as f64 - 0.5 * j as f64);
            }
            ptr.push(col.len() as u32);
        }
        let sell = Sell::new(0, &ptr, &col, &val, 500);
        assert_eq!(sell.stored(), stored(&lens, s));
        let mut x: Vec<f64> = (0..500).map(|j| (j as f64 * 0.3).cos()).collect();
        x.push(0.0);
        let want = crs_multiply(&ptr, &col, &val, &x);
        let mut got = vec![f64::NAN; lens.len()];
        sell.multiply(&x, |r, v| got[r] = v);
        assert!(
            got.iter()
                .zip(&want)
                .all(|(g, w)| g.to_bits() == w.to_bits())
        );
        // Rows of equal length, or none: the narrowest window.
        assert_eq!(sigma(&[5; 1000]), 128);
        assert_eq!(sigma(&[]), 128);
    }

    #[test]
    fn one_value_is_kept_once_and_sums_as_crs() {
        let (ptr, col, val) = crs(500, 60, 12, 6);
        for v in [1.0, -2.5] {
            let iso: Vec<f64> = val.iter().map(|_| v).collect();
            let sell = Sell::new(3, &ptr, &col, &iso, 60);
            assert!(sell.is_iso());
            assert!(sell.stored() > iso.len(), "the test wants padding");
            let mut x: Vec<f64> = (0..60).map(|j| (j as f64 * 0.7).sin()).collect();
            x[11] = f64::INFINITY;
            x[23] = f64::NEG_INFINITY;
            x.push(0.0);
            let want = crs_multiply(&ptr, &col, &iso, &x);
            assert!(want.iter().any(|s| s.is_infinite()) && want.iter().any(|s| s.is_nan()));
            let mut got = vec![0.5; 500];
            sell.multiply(&x, |r, s| got[r - 3] = s);
            let bits = |v: &[f64]| v.iter().map(|s| s.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want));
            // Renamed (values stored for the chunks with padding): the same sums from a caller's
            // x, whole and in ranges of chunks on both sides of the first chunk with padding.
            let map: Vec<u32> = (0..60).rev().collect();
            // (Row r of the matrix is row r + 3 of the Sell: renamed 502 - (r + 3).)
            let rows: Vec<u32> = (0..503).map(|r| 502u32.saturating_sub(r)).collect();
            let global = sell.renamed(&map, &rows);
            // Chunks without padding keep the one value, those with padding store theirs.
            match &global.val {
                Values::Iso { chunks, tail, .. } => {
                    assert!(*chunks > 0 && *chunks < global.chunks());
                    assert_eq!(tail.len(), global.stored() - global.ptr[*chunks] as usize);
                }
                Values::Each(_) => panic!("renamed: values per entry"),
            }
            let mut g: Vec<(u32, u32, u64)> = global
                .entries()
                .map(|(r, c, w)| (499 - r, 59 - c, w.to_bits()))
                .collect();
            g.sort_unstable();
            let xg: Vec<f64> = (0..60).map(|j| x[59 - j]).collect();
            let mut got = vec![0.5; 500];
            global.multiply_whole(&xg, |r, s| got[499 - r] = s);
            assert_eq!(bits(&got), bits(&want));
            let Values::Iso { chunks: m, .. } = global.val else {
                unreachable!()
            };
            let mut got = vec![0.5; 500];
            let n = global.chunks();
            for ks in [0..m / 2, m / 2..m + 1, m + 1..n - 1, n - 1..n] {
                global.multiply_whole_chunks(&xg, ks, |r, s| got[499 - r] = s);
            }
            assert_eq!(bits(&got), bits(&want));
            let mut e: Vec<(u32, u32, u64)> = sell
                .entries()
                .map(|(r, c, w)| (r, c, w.to_bits()))
                .collect();
            e.sort_unstable();
            let e: Vec<_> = e.into_iter().map(|(r, c, w)| (r - 3, c, w)).collect();
            assert_eq!(e, g);
            assert_eq!(e.len(), iso.len());
            assert!(e.iter().all(|&(_, _, w)| w == v.to_bits()));
        }
        // One value off, -0 beside 0, or an infinite value: values per entry.
        let mut one_off: Vec<f64> = val.iter().map(|_| 1.0).collect();
        one_off[77] = 1.0 + f64::EPSILON;
        let zeros: Vec<f64> = (0..val.len())
            .map(|k| if k == 5 { -0.0 } else { 0.0 })
            .collect();
        let inf: Vec<f64> = val.iter().map(|_| f64::INFINITY).collect();
        for vals in [one_off, zeros, inf] {
            assert!(!Sell::new(0, &ptr, &col, &vals, 60).is_iso());
        }
        // Rows of a larger matrix: the value test looks at these rows' nonzeros alone.
        let mut two = vec![1.0; val.len()];
        let half = ptr[250] as usize;
        two[..half].fill(3.0);
        assert!(Sell::new(250, &ptr[250..], &col, &two, 60).is_iso());
        assert!(!Sell::new(0, &ptr, &col, &two, 60).is_iso());
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
