//! mbsp over MPI ranks: the checks and the benchmark of the runtime's MPI top level.
//!
//! The engine itself is in the runtime (`mbsp`, feature `mpi`, module `ranks.rs`): a program
//! built with that feature and started under `mpiexec` runs the processes of its top-level
//! runs as MPI ranks, one per rank, through the same [`mbsp::Ctx`]; nested runs inside a rank
//! are thread runs over the rank's machine. This crate turns the feature on and holds:
//!
//! * `mbsp-mpi-selftest`, the semantic checks, random programs against a sequential model,
//!   the hybrid (ranks x threads) check and the failure modes, run by `tests/ranks.rs` under
//!   `mpiexec -n 1, 2, 3`;
//! * [`mod@bench`], mbsp against plain MPI on the same ranks (`mpiexec -n 2 mbsp bench mpi`).
//!
//! ```text
//! mpiexec -n 2 target/release/mbsp-mpi-selftest
//! ```
//!
//! ```
//! // The same program runs over threads (started plainly) or ranks (under mpiexec).
//! let p = mbsp::mpi_ranks().map_or(2, |(_, ranks)| ranks);
//! let sums = mbsp::run(p, |ctx| {
//!     let x = ctx.push_reg(vec![0u64; ctx.nprocs()])?;
//!     ctx.sync()?;
//!     for to in 0..ctx.nprocs() {
//!         ctx.put(to, &[ctx.pid() as u64 + 1], &x, ctx.pid())?;
//!     }
//!     ctx.sync()?;
//!     Ok(ctx.local(&x)?.iter().sum::<u64>())
//! })
//! .unwrap();
//! // Over ranks, each rank gets its own process's result only.
//! assert!(sums.iter().all(|&s| s == (p * (p + 1) / 2) as u64));
//! ```

pub mod bench;
