//! The `mbsp` command as a user runs it, as a process: one module per command (`affinity_cli`,
//! `demo_cli`, `fft_cli`, `params_cli`, `partition_cli`, `spmv_cli`, `topo_cli`), bad input
//! (`cli_errors`), requests too large for the memory (`preflight_cli`), interrupted output
//! (`interrupted_output`) and, with the feature `mpi`, runs under `mpiexec` (`over_ranks`).
//!
//! One test binary rather than one per file: every test binary is compiled and linked on its
//! own.

mod common;

mod affinity_cli;
mod cli_errors;
mod demo_cli;
mod fft_cli;
mod interrupted_output;
mod over_ranks;
mod params_cli;
mod partition_cli;
mod preflight_cli;
mod spmv_cli;
mod topo_cli;
