//! What mbsp's applications share — the `mbsp` command (mbsp-cli), the benchmarks
//! (mbsp-bench), the MPI tools (mbsp-mpi) and the Python package (mbsp-python) — as typed
//! APIs, without an argument parser, a plotting library or a signal handler.
//!
//! * [`stats`] — the median, samples and their spread, confidence intervals of medians and
//!   of ratios (distribution-free), timings, the fit of `t = l + g h`.
//! * [`preflight`] — requests that cannot fit in memory are refused before any work, with
//!   one line naming the numbers and the limit.
//! * [`params`] — the BSP parameters (r, g, l) of every level of the machine tree, measured.
//! * [`machine`] — a one-line description of this machine, and a machine tree as plain data.
//! * [`machine_state`] — what else the machine did during a measurement (other processes' CPU
//!   time, stolen time, the clock, the cache-line round trip between two CPUs, the speed of a
//!   fixed loop of local work): whether its timings can be trusted.
//! * [`state_rounds`] — measurements in rounds, probed around each, kept from one state of the
//!   machine and taken again where a configuration ran mostly in another.
//! * [`line_exchange`] — how long two CPUs take to hand a cache line back and forth.
//! * [`placement`] — where the processes of a (nested) plan go, as plain data.
//! * [`spmv`], [`fft`], [`sparse`] — the measurements of the SpMV and the FFT that several
//!   commands make, and what the sparse-matrix commands share about their files.
//! * [`run_on`] — whether a program's runs go over threads or over MPI ranks.
//! * [`error`] — the one error type ([`Error`], classed by [`ErrorKind`]).
//! * [`command`] — what the commands share around their work: exit statuses, the one-line
//!   report of an error, the parsers of numeric options, the checks before any command runs,
//!   the message of an interrupt.
//! * [`palette`] — the colours of the plots, as plain data.
//!
//! Output files are written whole by [`mbsp_algorithms::whole_file`].
//!
//! ```
//! use mbsp_tools::stats::{Samples, median};
//! assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
//! assert_eq!(Samples(vec![2.0, 9.0, 1.0]).show(|v| format!("{v}")), "2 [1–9]");
//! ```

pub mod command;
pub mod error;
pub mod fft;
pub mod line_exchange;
pub mod machine;
pub mod machine_state;
pub mod palette;
pub mod params;
pub mod placement;
pub mod preflight;
pub mod run_on;
pub mod sparse;
pub mod spmv;
pub mod state_rounds;
pub mod stats;

pub use error::{Classify, Error, ErrorKind, Result};
