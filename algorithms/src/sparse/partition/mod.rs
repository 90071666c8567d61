//! Partitioner (being written: the API is fixed, the body is a placeholder until the multilevel
//! bipartitioner lands).

use super::{CooMatrix, Distribution};
use std::fmt;

/// Settings of [`partition`].
#[derive(Clone, Debug)]
pub struct Options {
    /// Allowed load imbalance: every part gets at most `(1 + eps) nnz / p` nonzeros.
    pub eps: f64,
    /// Seed of the random choices; the same seed gives the same partition.
    pub seed: u64,
    /// Threads to use (0: all available).
    pub threads: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            eps: 0.03,
            seed: 1,
            threads: 0,
        }
    }
}

/// A matrix that cannot be partitioned as asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionError(pub String);

impl fmt::Display for PartitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PartitionError {}

/// The result of [`partition`]: the distribution and its quality.
#[derive(Clone, Debug)]
pub struct Partitioned {
    /// Nonzero parts and vector owners.
    pub dist: Distribution,
    /// Communication volume (sum of `λ - 1` over rows and columns).
    pub volume: u64,
    /// Load imbalance `max nnz(s) / (nnz / p) - 1`.
    pub imbalance: f64,
    /// `h` of the fan-out plus `h` of the fan-in.
    pub max_h: u64,
    /// Wall-clock seconds for the whole partitioning (nonzeros and vectors).
    pub seconds: f64,
}

/// Partitions the nonzeros of `a` into `p` parts and distributes the vectors.
pub fn partition(a: &CooMatrix, p: usize, opts: &Options) -> Result<Partitioned, PartitionError> {
    let t = std::time::Instant::now();
    let nz_part = partition_nonzeros(a, p, opts)?;
    let dist = super::vector::distribute(a, nz_part, p);
    let volume = super::metrics::volume(a, &dist.nz_part, p);
    let imbalance = super::metrics::imbalance(&dist.nz_part, p);
    let max_h = super::metrics::traffic(a, &dist).max_h();
    Ok(Partitioned {
        dist,
        volume,
        imbalance,
        max_h,
        seconds: t.elapsed().as_secs_f64(),
    })
}

/// Partitions the nonzeros of `a` into `p` parts: the part of each nonzero.
pub fn partition_nonzeros(
    a: &CooMatrix,
    p: usize,
    opts: &Options,
) -> Result<Vec<u32>, PartitionError> {
    if p == 0 {
        return Err(PartitionError(
            "partition: p = 0; need at least one part".into(),
        ));
    }
    let _ = opts;
    // PLACEHOLDER (replaced by the multilevel partitioner in this same change): blocks of nonzeros.
    let n = a.nnz();
    Ok((0..n).map(|k| (k * p / n.max(1)) as u32).collect())
}
