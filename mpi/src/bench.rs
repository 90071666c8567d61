//! Side-by-side figures of mbsp over ranks and of plain MPI on the same ranks, in the same run
//! (what `mbsp-bench mpi` prints): each mbsp figure is timed in batches interleaved with the
//! batches of its MPI counterpart, and the medians are compared.
//!
//! | figure | mbsp | plain MPI |
//! |---|---|---|
//! | empty superstep | `sync` | `MPI_Barrier` |
//! | one-word put | `put` + `sync` | `MPI_Put` + `MPI_Win_flush` + `MPI_Barrier` |
//! | one-word expect | `put` + `expect(1)` + `sync` (a lazy sync: no header all-to-all) | the same |
//! | bulk put | `put` of `bulk` bytes + `sync` | `MPI_Put` + flush + barrier |
//! | bulk get | `get` of `bulk` bytes + `sync` | `MPI_Get` + flush + barrier |
//! | bulk hpput | `hpput` of `bulk` bytes + `sync` | `MPI_Put` + flush + barrier |
//!
//! Every rank puts to / gets from the next rank. The MPI side uses one window over a buffer of
//! `bulk` bytes, in a passive-target epoch (`MPI_Win_lock_all`) for the whole measurement.

use mbsp::{Ctx, Result};
use mbsp_tools::stats::median;
use mpi::collective::CommunicatorCollectives;
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::SimpleCommunicator;

/// One figure: seconds per operation of mbsp and of plain MPI (medians over the batches).
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// What is timed (first column of the table).
    pub name: String,
    /// Bytes moved per rank per operation (0 for the empty superstep).
    pub bytes: usize,
    /// mbsp's seconds per operation.
    pub mbsp: f64,
    /// Plain MPI's seconds per operation.
    pub mpi: f64,
}

/// How much to measure.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Operations per batch for the small figures (the bulk ones use a tenth of it, at least 2).
    pub reps: usize,
    /// Batches per figure (the median is reported).
    pub batches: usize,
    /// Bytes of the bulk put and get.
    pub bulk: usize,
}

/// An MPI window over `mem`, locked for passive-target access by every rank; freed on drop.
struct Window {
    win: ffi::MPI_Win,
}

impl Window {
    /// Collective over `ctx`'s ranks.
    ///
    /// # Safety
    /// `mem` must outlive the window and must not be accessed by this process while remote
    /// operations on it may be in flight (the callers only read it after a barrier).
    unsafe fn new(world: &SimpleCommunicator, mem: &mut [u64]) -> Self {
        // SAFETY: MPI_Win is a plain handle; it is written by MPI_Win_create.
        let mut win: ffi::MPI_Win = unsafe { std::mem::zeroed() };
        // SAFETY: `mem` is valid for its length (the caller keeps it alive); collective call.
        unsafe {
            ffi::MPI_Win_create(
                mem.as_mut_ptr().cast(),
                std::mem::size_of_val(mem) as ffi::MPI_Aint,
                8,
                ffi::RSMPI_INFO_NULL,
                world.as_raw(),
                &mut win,
            );
            ffi::MPI_Win_lock_all(0, win);
        }
        Window { win }
    }

    /// `MPI_Put` (or `MPI_Get` when `get`) of `words` u64 between `local` and rank `peer`'s
    /// window at displacement 0, then `MPI_Win_flush`.
    fn transfer(&self, local: &mut [u64], peer: usize, get: bool) {
        let n = local.len() as i32;
        // SAFETY: `local` is valid for `n` words during the call, which completes the
        // operation (flush) before returning; the target range is within every rank's window
        // (all are `bulk` bytes).
        unsafe {
            if get {
                ffi::MPI_Get(
                    local.as_mut_ptr().cast(),
                    n,
                    ffi::RSMPI_UINT64_T,
                    peer as i32,
                    0,
                    n,
                    ffi::RSMPI_UINT64_T,
                    self.win,
                );
            } else {
                ffi::MPI_Put(
                    local.as_ptr().cast(),
                    n,
                    ffi::RSMPI_UINT64_T,
                    peer as i32,
                    0,
                    n,
                    ffi::RSMPI_UINT64_T,
                    self.win,
                );
            }
            ffi::MPI_Win_flush(peer as i32, self.win);
        }
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: every operation was flushed; collective like the creation (all ranks drop
        // their window at the same point of `measure`).
        unsafe {
            ffi::MPI_Win_unlock_all(self.win);
            ffi::MPI_Win_free(&mut self.win);
        }
    }
}

/// Measures the figures of the module table on every rank (collective); every rank returns
/// its own timings, rank 0's are the ones to print.
pub fn measure(ctx: &mut Ctx, o: &Options) -> Result<Vec<Figure>> {
    let (me, p) = (ctx.pid(), ctx.nprocs());
    let next = (me + 1) % p;
    let words = (o.bulk / 8).max(1);
    let small = ctx.push_reg(vec![0u64; 1])?;
    let big = ctx.push_reg(vec![0u64; words])?;
    let dst = ctx.push_reg(vec![0u64; words])?;
    ctx.sync()?;
    let mut target = vec![0u64; words];
    let world = SimpleCommunicator::world();
    // SAFETY: `target` lives until the end of this function, after the window is dropped,
    // and is not touched here.
    let win = unsafe { Window::new(&world, &mut target) };
    let mut src = vec![me as u64; words];
    let bulk_reps = (o.reps / 10).max(2);
    let mut figures = Vec::new();
    for (name, bytes) in [
        ("empty superstep", 0),
        ("one-word put", 8),
        ("one-word expect", 8),
        ("bulk put", words * 8),
        ("bulk get", words * 8),
        ("bulk hpput", words * 8),
    ] {
        let reps = if bytes > 8 { bulk_reps } else { o.reps };
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..o.batches.max(1) {
            ctx.sync()?;
            let t = ctx.time();
            for i in 0..reps {
                match name {
                    "one-word put" => ctx.put(next, &[i as u64], &small, 0)?,
                    "one-word expect" => {
                        ctx.put(next, &[i as u64], &small, 0)?;
                        ctx.declare_incoming(1)?;
                    }
                    "bulk put" => ctx.put(next, &src, &big, 0)?,
                    "bulk get" => ctx.get(next, &big, 0..words, &dst, 0)?,
                    // SAFETY: `src` is not written until the sync; nobody else writes `big`.
                    "bulk hpput" => unsafe { ctx.hpput(next, &src, &big, 0)? },
                    _ => {}
                }
                ctx.sync()?;
            }
            ours.push((ctx.time() - t) / reps as f64);
            world.barrier();
            let t = ctx.time();
            for _ in 0..reps {
                match name {
                    "one-word put" | "one-word expect" => win.transfer(&mut src[..1], next, false),
                    "bulk put" => win.transfer(&mut src, next, false),
                    "bulk get" => win.transfer(&mut src, next, true),
                    "bulk hpput" => win.transfer(&mut src, next, false),
                    _ => {}
                }
                world.barrier();
            }
            theirs.push((ctx.time() - t) / reps as f64);
        }
        figures.push(Figure {
            name: name.to_string(),
            bytes,
            mbsp: median(&ours),
            mpi: median(&theirs),
        });
    }
    drop(win);
    ctx.pop_reg(small)?;
    ctx.pop_reg(big)?;
    // Keep the destination's contents observable (the gets must not be optimised away).
    std::hint::black_box(ctx.local(&dst)?);
    ctx.pop_reg(dst)?;
    ctx.sync()?;
    Ok(figures)
}
