//! The algorithms' tests: collectives and their mismatches, lending, the FFT, sample sort, the
//! sparse-matrix reader, partitioner, vector distribution, Mondriaan files and SpMV (one module
//! per former test file).
//!
//! One test binary for these files rather than one each: every test binary is compiled and
//! linked on its own, with the shared helpers and the generic code of the algorithms (the FFT's
//! above all) again. Tests that need a process of their own keep their binaries: fft_threads.rs
//! counts the process's threads, hostile_input.rs installs a counting global allocator.

#[path = "../common/mod.rs"]
mod common;

mod checkpoint_cg;
mod collectives;
mod fft;
mod lazy_then_direct_get;
mod lending;
mod mismatch;
mod mondriaan;
mod mtx;
mod partition;
mod sort;
mod spmv;
mod vector;
