//! Cost functions that choose between algorithms, on the BSP parameters of
//! [`mbsp::params`] (re-exported here).
//!
//! A superstep in which the largest number of 8-byte words any process sends or receives is `h`
//! costs `l + h·g` seconds; the algorithms here compare such sums to pick, for example, a
//! one-superstep broadcast (`h = (p-1)·n`) or a two-phase one (`h ≈ 2n`, two more supersteps).
//!
//! Two values of `g` matter on shared memory: buffered communication (puts, messages) copies each
//! word twice — into an outbox and out of it — while a direct get copies it once, straight from
//! the source. A superstep that changes registrations costs a second barrier.

pub use mbsp::params::{
    PARAMS_ENV, Params, ParamsError, ParamsSource, judge_prediction, saved_path,
};

/// Words (8 bytes, rounded up) taken by `n` elements of `elem` bytes.
pub fn words(n: usize, elem: usize) -> f64 {
    (n * elem).div_ceil(8) as f64
}
