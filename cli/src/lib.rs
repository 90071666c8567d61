//! The commands of the `mbsp` tool, as a library its binary and the benchmarks (`mbsp-bench`)
//! share.
//!
//! * [`demo`] — `mbsp demo` (or `mbsp` alone): the machine, placements, BSP parameters, and
//!   the FFT and SpMV checked, timed and predicted, in under a minute.
//! * [`topo`] — `mbsp topo`: the machine tree and the placement of a (possibly nested) plan.
//! * [`params_cmd`] — `mbsp params`: the BSP parameters (r, g, l) of every level of the tree.
//! * [`fft_cmd`] — `mbsp fft`: one BSP FFT of random data, checked, timed, with the cost
//!   model's choice.
//! * [`spmv_cmd`] — `mbsp spmv`: one sparse matrix multiplied with the 2D BSP SpMV.
//! * [`partition_cmd`] — `mbsp partition`: a sparse matrix split over p processes, Mondriaan's
//!   files written.
//!
//! The helpers every command uses: [`error`] (the one error type and the exit statuses),
//! [`preflight`] (requests that cannot fit in memory are refused before any work),
//! [`whole_file`] (output files are written whole, an interrupt leaves none half-written),
//! [`stats`] (medians and fits of timings), [`machine`] (the one-line description of this
//! machine).
//!
//! Each command's options are one struct with clap's derive (`Options` or `Args`), so that
//! `mbsp` and `mbsp-bench` parse the same options the same way.
//!
//! This crate does not depend on MPI: its cargo feature `mpi` (off by default) builds the
//! runtime over MPI ranks.

pub mod cli;
pub mod demo;
pub mod error;
pub mod fft_cmd;
pub mod machine;
pub mod params_cmd;
pub mod partition_cmd;
pub mod preflight;
pub mod run_on;
pub mod spmv_cmd;
pub mod stats;
pub mod topo;
pub mod whole_file;

pub use error::{Error, ErrorKind, Result};
