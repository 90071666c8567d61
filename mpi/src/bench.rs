//! Side-by-side figures of mbsp over ranks and of plain MPI on the same ranks, in the same run
//! (what `mbsp-bench mpi` prints): each mbsp figure is timed in batches interleaved with the
//! batches of its MPI counterpart, and the medians are compared.
//!
//! | figure | mbsp | plain MPI |
//! |---|---|---|
//! | empty superstep | `sync` | `MPI_Barrier` |
//! | one-word put | `put` + `sync` | `MPI_Put` + `MPI_Win_flush` + `MPI_Barrier` |
//! | one-word expect | `put` + `declare_incoming(1)` + `sync` (a lazy sync: no header all-to-all) | the same |
//! | bulk put | `put` of `bulk` bytes + `sync` | `MPI_Put` + flush + barrier |
//! | bulk get | `get` of `bulk` bytes + `sync` | `MPI_Get` + flush + barrier |
//! | bulk hpput | `hpput` of `bulk` bytes + `sync` | `MPI_Put` + flush + barrier |
//!
//! Every rank puts to / gets from the next rank. The MPI side uses one window over a buffer of
//! `bulk` bytes, in a passive-target epoch (`MPI_Win_lock_all`) for the whole measurement.
//!
//! And the hybrid figures ([`hybrid`]: ranks on top, thread runs nested in each): a program of
//! random one-word puts, gets and sends with a nested run of 2 every few supersteps against the
//! same program without nested runs, and a nested run's start inside a rank against its start
//! in a thread run on the rank's share of the node.

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

/// How much of the hybrid figures to measure ([`hybrid`]).
#[derive(Clone, Copy, Debug)]
pub struct HybridOptions {
    /// Supersteps of the random-communication program.
    pub supersteps: usize,
    /// A nested run every this many supersteps.
    pub every: usize,
    /// Rounds of each side (with and without nested runs; nested starts in the rank and on
    /// threads), alternating; the medians are reported.
    pub rounds: usize,
    /// Nested runs timed per round of the start figures.
    pub starts: usize,
}

/// The hybrid figures (ranks on top, thread runs nested in each), seconds, medians over the
/// rounds; every rank measures, rank 0's are the ones to print.
#[derive(Clone, Debug, PartialEq)]
pub struct Hybrid {
    /// The random-communication program with a nested run of 2 every `every` supersteps.
    pub with_nested: f64,
    /// The same program without nested runs.
    pub without: f64,
    /// One nested run of 2 (started, one sync, ended) inside a rank.
    pub start_in_rank: f64,
    /// The same nested run inside a thread run placed on the rank's share.
    pub start_on_threads: f64,
    /// The rank's share of its node (OS CPU numbers), where both were measured.
    pub share: Vec<u32>,
}

/// `supersteps` of random one-word puts, gets and sends between the ranks (every rank draws
/// the same destinations from the same seed), with a nested run of 2 processes every `every`
/// supersteps when `every` is given.
fn random_program(ctx: &mut Ctx, supersteps: usize, every: Option<usize>) -> Result<()> {
    let (me, p) = (ctx.pid(), ctx.nprocs());
    let x = ctx.push_reg(vec![me as u64; 4])?;
    let y = ctx.push_reg(vec![0u64; 4])?;
    ctx.sync()?;
    let mut rng = mbsp::rng::SplitMix64::new(0x6d62_7370);
    for step in 0..supersteps {
        let (to, from) = (rng.below(p), rng.below(p));
        let slot = (step + me) % 4;
        ctx.put(to, &[step as u64], &y, slot)?;
        ctx.get(from, &x, slot..slot + 1, &y, (slot + 1) % 4)?;
        ctx.send_pod((to + 1) % p, &(), &[me as u64, step as u64])?;
        if every.is_some_and(|e| step % e == e - 1) {
            ctx.run(2, |n| n.sync())?;
        }
        ctx.sync()?;
        while ctx.move_message(&mut [])?.is_some() {}
    }
    ctx.pop_reg(y)?;
    ctx.pop_reg(x)?;
    ctx.sync()
}

/// The hybrid figures (collective over the ranks of `ctx`'s run): the random program with and
/// without nested runs in alternating rounds, and a nested run's start inside the rank against
/// its start inside a thread run placed on the same share of the node (so that both have the
/// same cores), also alternating.
pub fn hybrid(ctx: &mut Ctx, o: &HybridOptions) -> Result<Hybrid> {
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for _ in 0..o.rounds.max(1) {
        for nested in [true, false] {
            ctx.sync()?;
            let t = ctx.time();
            random_program(ctx, o.supersteps, nested.then_some(o.every))?;
            let s = ctx.time() - t;
            if nested {
                with.push(s)
            } else {
                without.push(s)
            }
        }
    }
    let share = ctx.domain().pu_os(ctx.machine());
    let starts = o.starts.max(1);
    let time_starts = |c: &mut Ctx| -> Result<f64> {
        let t = c.time();
        for _ in 0..starts {
            c.run(2, |n| n.sync())?;
        }
        Ok((c.time() - t) / starts as f64)
    };
    let (mut in_rank, mut on_threads) = (Vec::new(), Vec::new());
    let on_share = mbsp::Run::new(1).policy(mbsp::Policy::Manual(vec![share.clone()]));
    for _ in 0..o.rounds.max(1) {
        ctx.sync()?;
        in_rank.push(time_starts(ctx)?);
        let threads = on_share.clone().run(|c| time_starts(c))?;
        on_threads.push(threads[0]);
    }
    ctx.sync()?;
    Ok(Hybrid {
        with_nested: median(&with),
        without: median(&without),
        start_in_rank: median(&in_rank),
        start_on_threads: median(&on_threads),
        share,
    })
}
