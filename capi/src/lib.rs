//! # libmbsp — the C ABI of mbsp
//!
//! `cargo build --release -p mbsp-capi` builds `target/release/libmbsp.so` and `libmbsp.a`;
//! `capi/include/bsp.h` (or `mcbsp.h`) declares the MulticoreBSP for C interface, and with
//! `-DMCBSP_COMPATIBILITY_MODE` the original BSPlib one. Existing BSPlib / MulticoreBSP programs
//! compile and run unchanged:
//!
//! ```sh
//! cc prog.c -Icapi/include -Ltarget/release -Wl,-rpath,$PWD/target/release -lmbsp
//! ```
//!
//! Processes are threads (globals are shared, as in MulticoreBSP). `bsp_init(spmd, argc, argv)`
//! then `spmd()`, whose first statement is `bsp_begin(P)`: the caller becomes pid 0 and `P - 1`
//! threads run `spmd`; or `bsp_begin`/`bsp_end` bracketing `main`. An SPMD section may start a
//! nested run the same way. Every misuse and `bsp_abort` print one line naming the primitive,
//! the process, the superstep and the values, and the program exits with status 1.

mod affinity;
mod aliases;
mod bench;
mod bsmp;
mod compat;
mod drma;
mod profiling;
mod ranks;
mod resiliency;
mod shape;
mod spmd;
mod state;
