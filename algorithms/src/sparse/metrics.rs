//! Communication volume, load imbalance and h-relations of a distributed sparse matrix.
//!
//! Everything here is computed from scratch from the nonzero parts (and vector owners), in
//! O(nnz + m + n + p) time, independently of how the partitioner kept its own books: the tests
//! compare the two.

use super::CooMatrix;

/// A sparse matrix split over `p` processes: the part of every nonzero and the owners of the
/// vector entries of `y = Ax` (`y_owner[i]` for row `i`) and `x` (`x_owner[j]` for column `j`).
/// Parts and owners are 0-based here (Mondriaan's files are 1-based).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Distribution {
    /// Number of parts (processes).
    pub p: usize,
    /// Part of each nonzero, in the matrix's nonzero order.
    pub nz_part: Vec<u32>,
    /// Owner of `x_j` for each column `j`.
    pub x_owner: Vec<u32>,
    /// Owner of `y_i` for each row `i`.
    pub y_owner: Vec<u32>,
}

/// Nonzero indices grouped by a key (row or column): a counting sort, `start[k]..start[k + 1]`
/// indexes `order` for key `k`.
pub(crate) struct Buckets {
    pub start: Vec<usize>,
    pub order: Vec<u32>,
}

impl Buckets {
    pub(crate) fn new(keys: &[u32], nkeys: usize) -> Self {
        let mut start = vec![0usize; nkeys + 1];
        for &k in keys {
            start[k as usize + 1] += 1;
        }
        for k in 0..nkeys {
            start[k + 1] += start[k];
        }
        let mut fill = start.clone();
        let mut order = vec![0u32; keys.len()];
        for (t, &k) in keys.iter().enumerate() {
            order[fill[k as usize]] = t as u32;
            fill[k as usize] += 1;
        }
        Buckets { start, order }
    }

    pub(crate) fn get(&self, k: usize) -> &[u32] {
        &self.order[self.start[k]..self.start[k + 1]]
    }
}

/// Calls `f(line, part)` once for every line (row or column, by `keys`) and every distinct
/// part among its nonzeros.
fn line_parts(keys: &[u32], nkeys: usize, part: &[u32], p: usize, mut f: impl FnMut(usize, usize)) {
    let b = Buckets::new(keys, nkeys);
    let mut seen = vec![u32::MAX; p];
    for l in 0..nkeys {
        for &t in b.get(l) {
            let s = part[t as usize] as usize;
            if seen[s] != l as u32 {
                seen[s] = l as u32;
                f(l, s);
            }
        }
    }
}

/// For each key (row or column), the number of distinct parts among its nonzeros (`λ`).
fn lambdas(keys: &[u32], nkeys: usize, part: &[u32], p: usize) -> Vec<u32> {
    let mut l = vec![0u32; nkeys];
    line_parts(keys, nkeys, part, p, |k, _| l[k] += 1);
    l
}

/// `λ_i` for every row: the number of parts holding a nonzero of row `i`.
pub fn row_lambdas(a: &CooMatrix, part: &[u32], p: usize) -> Vec<u32> {
    lambdas(&a.row_idx, a.rows, part, p)
}

/// `λ_j` for every column.
pub fn col_lambdas(a: &CooMatrix, part: &[u32], p: usize) -> Vec<u32> {
    lambdas(&a.col_idx, a.cols, part, p)
}

/// Communication volume of `y = Ax` for the nonzero parts `part`: the sum over rows and columns
/// of `λ - 1` (empty rows and columns count 0). This is the volume with the best vector
/// distribution, where each vector entry is owned by a part that holds its row or column.
///
/// ```
/// use mbsp_algorithms::sparse::{CooMatrix, metrics::volume};
/// // [[1 1] [0 1]]: nonzeros (0,0) and (1,1) in part 0, (0,1) in part 1.
/// let a = CooMatrix::new(2, 2, vec![(0, 0, 1.0), (0, 1, 1.0), (1, 1, 1.0)]).unwrap();
/// // row 0 is in two parts, column 1 is in two parts.
/// assert_eq!(volume(&a, &[0, 1, 0], 2), 2);
/// ```
pub fn volume(a: &CooMatrix, part: &[u32], p: usize) -> u64 {
    let sum = |l: Vec<u32>| l.iter().map(|&x| x.saturating_sub(1) as u64).sum::<u64>();
    sum(row_lambdas(a, part, p)) + sum(col_lambdas(a, part, p))
}

/// Number of nonzeros in each part.
pub fn part_sizes(part: &[u32], p: usize) -> Vec<usize> {
    let mut s = vec![0usize; p];
    for &x in part {
        s[x as usize] += 1;
    }
    s
}

/// Load imbalance `max_s nnz(s) / (nnz / p) - 1` (0 for a perfect split; 0 for an empty matrix).
pub fn imbalance(part: &[u32], p: usize) -> f64 {
    if part.is_empty() {
        return 0.0;
    }
    let max = part_sizes(part, p).into_iter().max().unwrap_or(0);
    max as f64 * p as f64 / part.len() as f64 - 1.0
}

/// Words each process sends and receives in the two communication phases of `y = Ax`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Traffic {
    /// Words sent by each process in the fan-out of `x`.
    pub fanout_sent: Vec<u64>,
    /// Words received by each process in the fan-out.
    pub fanout_recv: Vec<u64>,
    /// Words (partial sums) sent by each process in the fan-in of `y`.
    pub fanin_sent: Vec<u64>,
    /// Words received by each process in the fan-in.
    pub fanin_recv: Vec<u64>,
}

impl Traffic {
    /// h of the fan-out: the largest number of words a process sends or receives.
    pub fn fanout_h(&self) -> u64 {
        h(&self.fanout_sent, &self.fanout_recv)
    }
    /// h of the fan-in.
    pub fn fanin_h(&self) -> u64 {
        h(&self.fanin_sent, &self.fanin_recv)
    }
    /// `fanout_h + fanin_h`: the communication cost of one multiply in units of `g`.
    pub fn max_h(&self) -> u64 {
        self.fanout_h() + self.fanin_h()
    }
    /// Total words moved (both phases).
    pub fn volume(&self) -> u64 {
        self.fanout_sent.iter().sum::<u64>() + self.fanin_sent.iter().sum::<u64>()
    }
}

fn h(sent: &[u64], recv: &[u64]) -> u64 {
    sent.iter().chain(recv).copied().max().unwrap_or(0)
}

/// The words each process sends and receives for the distribution `d` of `a`: `x_j` goes from
/// its owner to every other part holding a nonzero of column `j`; each part holding a nonzero of
/// row `i`, other than `y_i`'s owner, sends the owner one partial sum.
pub fn traffic(a: &CooMatrix, d: &Distribution) -> Traffic {
    let p = d.p;
    let mut t = Traffic {
        fanout_sent: vec![0; p],
        fanout_recv: vec![0; p],
        fanin_sent: vec![0; p],
        fanin_recv: vec![0; p],
    };
    line_parts(&a.col_idx, a.cols, &d.nz_part, p, |j, s| {
        let owner = d.x_owner[j] as usize;
        if s != owner {
            t.fanout_sent[owner] += 1;
            t.fanout_recv[s] += 1;
        }
    });
    line_parts(&a.row_idx, a.rows, &d.nz_part, p, |i, s| {
        let owner = d.y_owner[i] as usize;
        if s != owner {
            t.fanin_sent[s] += 1;
            t.fanin_recv[owner] += 1;
        }
    });
    t
}
