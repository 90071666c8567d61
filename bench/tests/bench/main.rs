//! `mbsp-bench` as a user runs it, as a process: `spmv` (`spmv_bench_cli`) and the other
//! commands (`bench_cli`). One test binary rather than one per file: every test binary is
//! compiled and linked on its own.

mod common;

mod bench_cli;
mod spmv_bench_cli;
