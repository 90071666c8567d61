//! Where a command's BSP runs go: threads of this process, or the ranks of an MPI launch.
//!
//! With this crate's cargo feature `mpi` on (the `mbsp` command's feature `mpi` turns it on)
//! and the program started by an MPI launcher (`mbsp::ranks::launched_by_mpi`, which
//! `MBSP_MPI=0/1` overrides), a program that calls [`init`] first thing runs the measurements
//! of this crate that go through [`gathered`] over the launcher's ranks, one process per rank:
//! every rank takes part, rank 0 alone prints (results, progress, errors). Otherwise — the
//! feature off, no launcher, or [`init`] never called (the benchmarks, the Python package) —
//! runs are thread runs and every helper here says "root".
//!
//! A run over ranks returns only the calling rank's result, so [`gathered`] collects every
//! process's part at pid 0 inside the run (a gather, one superstep per part): the caller then
//! sees the same per-process results over threads and over ranks, on the one process that
//! prints them.

use crate::error::{Error, Result};
use mbsp::Ctx;
use mbsp::bytemuck::Pod;

/// What one process of a [`gathered`] run returns: its data (a piece of a result vector) and
/// its numbers (times).
pub type Part<T> = (Vec<T>, Vec<f64>);

#[cfg(feature = "mpi")]
static WORLD: std::sync::OnceLock<&'static mbsp::ranks::World> = std::sync::OnceLock::new();

/// The world of this program's ranks, if [`init`] put it over ranks.
#[cfg(feature = "mpi")]
fn world() -> Option<&'static mbsp::ranks::World> {
    WORLD.get().copied()
}

/// Puts this program's runs over MPI ranks when it was started by an MPI launcher and the
/// feature `mpi` is on (MPI initialised here); without the feature, or without a launcher,
/// does nothing. Called once, first thing in a program's `main`; fails (a run error) when MPI cannot be
/// initialised.
///
/// ```
/// mbsp_tools::run_on::init()?;
/// // Not started by `mpiexec` (or the feature off): threads, and this process prints.
/// if mbsp_tools::run_on::ranks().is_none() {
///     assert!(mbsp_tools::run_on::is_root());
/// }
/// # Ok::<(), mbsp_tools::Error>(())
/// ```
pub fn init() -> Result<()> {
    #[cfg(feature = "mpi")]
    if mbsp::ranks::launched_by_mpi() && WORLD.get().is_none() {
        let world = mbsp::ranks::World::init()
            .map_err(|e| Error::run("initialising MPI").with_source(e))?;
        let _ = WORLD.set(world);
    }
    Ok(())
}

/// The number of MPI ranks the runs go over, or `None` for thread runs.
///
/// ```
/// // Without `init` under a launcher: threads.
/// assert_eq!(mbsp_tools::run_on::ranks(), None);
/// ```
pub fn ranks() -> Option<usize> {
    #[cfg(feature = "mpi")]
    if let Some(w) = world() {
        return Some(w.size());
    }
    None
}

/// Whether this process prints: always over threads, rank 0 alone over ranks.
///
/// ```
/// assert!(mbsp_tools::run_on::is_root());
/// ```
pub fn is_root() -> bool {
    #[cfg(feature = "mpi")]
    if let Some(w) = world() {
        return w.rank() == 0;
    }
    true
}

/// The process count of a command's run from its option `-p` (`asked`): over ranks, `asked` if
/// it is at most the number of ranks (a usage error naming both otherwise), else the number of
/// ranks; over threads, `asked`, else `default`.
///
/// ```
/// assert_eq!(mbsp_tools::run_on::procs(Some(3), 2)?, 3);
/// assert_eq!(mbsp_tools::run_on::procs(None, 2)?, 2);
/// # Ok::<(), mbsp_tools::Error>(())
/// ```
pub fn procs(asked: Option<usize>, default: usize) -> Result<usize> {
    match (ranks(), asked) {
        (Some(r), Some(p)) if p > r => Err(Error::usage(format!(
            "-p {p} exceeds the {r} MPI ranks of this launch (one process per rank)"
        ))),
        (Some(r), None) => Ok(r),
        (_, p) => Ok(p.unwrap_or(default)),
    }
}

/// Refuses `what` over MPI ranks with a usage error (`what` names the option, e.g.
/// `--nested`, and `why` says what to do instead); `Ok` over threads.
///
/// ```
/// mbsp_tools::run_on::threads_only("--nested", "use the flat variant")?;
/// # Ok::<(), mbsp_tools::Error>(())
/// ```
pub fn threads_only(what: &str, why: &str) -> Result<()> {
    match ranks() {
        Some(r) => Err(Error::usage(format!(
            "{what} does not run over MPI ranks ({r} here): {why}"
        ))),
        None => Ok(()),
    }
}

/// Runs `f` on `p` processes — threads, or the first `p` ranks ([`init`]) — and returns every
/// process's [`Part`] in pid order on the process that prints ([`is_root`]); `None` on the
/// other ranks (which took part, or had no process when `p` is below the number of ranks).
/// Over ranks the parts travel to pid 0 by two gathers at the end of the run.
///
/// ```
/// let parts = mbsp_tools::run_on::gathered(2, |ctx| Ok((vec![ctx.pid() as u32], vec![0.5])))?;
/// assert_eq!(parts, Some(vec![(vec![0], vec![0.5]), (vec![1], vec![0.5])]));
/// # Ok::<(), mbsp::Error>(())
/// ```
pub fn gathered<T, F>(p: usize, f: F) -> mbsp::Result<Option<Vec<Part<T>>>>
where
    T: Pod + Send,
    F: Fn(&mut Ctx) -> mbsp::Result<Part<T>> + Sync,
{
    #[cfg(feature = "mpi")]
    if let Some(w) = world() {
        use mbsp_algorithms::collectives::Collectives;
        let mine = w.run(mbsp::Run::new(p), |ctx| {
            let (data, numbers) = f(ctx)?;
            let c = Collectives::default();
            let data = c.gather(ctx, 0, &data)?;
            let numbers = c.gather(ctx, 0, &numbers)?;
            Ok(data.zip(numbers).map(|(d, n)| {
                (0..ctx.nprocs())
                    .map(|q| (d.part(q).to_vec(), n.part(q).to_vec()))
                    .collect()
            }))
        })?;
        return Ok(mine.value.flatten());
    }
    mbsp::run(p, f).map(Some)
}

/// `v`, which is `Some` on the process that prints; `None` (a rank other than 0 of a run over
/// ranks) is a run error naming `what`. For callers that need the result on every process
/// they run on (the demo and the benchmarks run on threads, where it is always `Some`).
///
/// ```
/// assert_eq!(mbsp_tools::run_on::on_root(Some(3), "the FFT")?, 3);
/// assert!(mbsp_tools::run_on::on_root::<u8>(None, "the FFT").is_err());
/// # Ok::<(), mbsp_tools::Error>(())
/// ```
pub fn on_root<T>(v: Option<T>, what: &str) -> Result<T> {
    v.ok_or_else(|| Error::run(format!("{what}: the result is on MPI rank 0, not here")))
}
