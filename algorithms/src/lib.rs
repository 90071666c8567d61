//! # mbsp-algorithms — BSP algorithms on the mbsp runtime
//!
//! Built on the public [`mbsp`] API only. Each module states the BSP cost of what it provides,
//! in the usual terms: `p` processes, `h` the largest number of words a process sends or
//! receives in a superstep, `g` the cost per word and `l` the cost of a superstep.
//!
//! * [`dist`] — block and cyclic distributions; handing caller data to the processes of a run.
//! * [`collectives`] — the BSPlib paper's level-1 operations: broadcast, reduce, all-reduce,
//!   scan, gather, scatter, all-gather, all-to-all.
//! * [`timer`] — a synchronised region timer (the slowest process's time).
//! * [`cost`] — BSP parameters and the cost functions that choose between algorithms.
//! * [`sort`] — randomised sample sort with BSMP.
//! * [`fft`] — parallel complex FFT, cyclic distribution in and out.
//! * [`sparse`] — Matrix Market input, the medium-grain sparse matrix partitioner, Mondriaan files.
//! * [`text`] — bounded line reads of input files; input quoted in messages without raw control
//!   characters.
//! * [`whole_file`] — output files written whole or not at all (a temporary file and a rename;
//!   sets of files committed together), also when the program is interrupted.

pub mod collectives;
pub mod cost;
pub mod dist;
pub mod fft;
mod shared;
pub mod sort;
pub mod sparse;
pub mod text;
pub mod timer;
pub mod whole_file;
