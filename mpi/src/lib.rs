//! mbsp over MPI ranks: the checks and the benchmark of the runtime's MPI top level.
//!
//! The engine itself is in the runtime (`mbsp`, feature `mpi`, [`mbsp::ranks`]): a program
//! built with that feature asks for ranks ([`mbsp::ranks::World::init`]) and starts runs over
//! them ([`mbsp::ranks::World::run`]), one process per rank, through the same [`mbsp::Ctx`];
//! nested runs inside a rank are thread runs over the rank's machine. This crate turns the
//! feature on and holds:
//!
//! * `mbsp-mpi-selftest`, the semantic checks, random programs against a sequential model,
//!   the hybrid (ranks x threads) check and the failure modes, run by `tests/ranks.rs` under
//!   `mpiexec -n 1, 2, 3`;
//! * [`mod@bench`], mbsp against plain MPI on the same ranks (`mpiexec -n 2 mbsp-bench mpi`).
//!
//! ```text
//! mpiexec -n 2 target/release/mbsp-mpi-selftest
//! ```
//!
//! ```no_run
//! // Under `mpiexec -n p`: one process per rank.
//! let world = mbsp::ranks::World::init()?;
//! let p = world.size();
//! let mine = world.run(mbsp::Run::new(p), |ctx| {
//!     let x = ctx.push_reg(vec![0u64; ctx.nprocs()])?;
//!     ctx.sync()?;
//!     for to in 0..ctx.nprocs() {
//!         ctx.put(to, &[ctx.pid() as u64 + 1], &x, ctx.pid())?;
//!     }
//!     ctx.sync()?;
//!     Ok(ctx.local(&x)?.iter().sum::<u64>())
//! })?;
//! // Each rank holds its own process's result.
//! assert_eq!(mine.value, Some((p * (p + 1) / 2) as u64));
//! # Ok::<(), mbsp::Error>(())
//! ```

pub mod bench;
