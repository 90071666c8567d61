//! Runs kept between multiplies and transforms.
//!
//! Starting a run, registering a multiply's buffers and allocating them cost tens of
//! microseconds per call and more for large vectors (fresh pages), a large part of a multiply
//! of a matrix of a few hundred thousand nonzeros on two cores (and three quarters of the time
//! of an FFT of 2^18 points called through a run of its own, `perf`: waking threads, page
//! faults, copies). So each Python thread keeps a run of `p` processes alive between its calls
//! with `p` processes, and each run keeps what it served last ([`Held`]: an SpMV plan's
//! multiply, [`Attached`], or an FFT of one length; registered, allocated). The calling thread
//! is process 0 of that run ([`Run::begin`]: the other processes are threads that wait in a
//! sync between calls); each multiply is then
//!
//! 1. process 0 writes the command (the plan, where `x` and `y` are: for an hp plan one
//!    [`SharedVectors`] it made of them, in its frame) into the run's [`Mailbox`] and syncs;
//!    the other processes, waiting in that sync, read it;
//! 2. if the run holds another plan's multiply, every process frees it and attaches this
//!    plan's (one superstep);
//! 3. every process runs [`Attached::multiply`], which ends with a sync after which no process
//!    reads `x` or writes `y`: only then does process 0 return to Python, so the pointers of
//!    the command stay valid for as long as any process uses them (a panic of process 0
//!    aborts and joins the run before it unwinds out of a frame the others read).
//!
//! A transform is the same with [`serve_fft`]: each process reads its cyclic part of the
//! caller's array, transforms it with the BSP FFT, syncs, fills its block of the array from
//! every process's part ([`FftParts`]), syncs.
//!
//! One run per thread and process count, not per plan: the waiting processes of a run spin for
//! a while before they sleep, and a second run's spinning processes would take the cores from
//! the run at work (alternating two plans, each in a run of its own, makes a small multiply
//! several times slower when the processes have a core each). A run (its [`Spmd`] holds process 0's context, which
//! must stay on the thread that began the run) lives in a thread-local list of at most
//! [`MAX_LIVE`] runs: the least recently used one ends when a new one would exceed the list,
//! and all of them when the thread ends (their destructor frees the plan held, tells the others
//! to stop, syncs and joins them: no thread is left waiting). A run that failed is ended at
//! once and its first error returned; the next multiply starts a new one.
//!
//! A plan is held by at most one run ([`PlanCore::holder`]; the hp multiply's direct reads
//! need the plan's guard, which one run claims at a time). A plan dropped on the thread that
//! holds it is let go at once ([`release`]); dropped elsewhere, at the holding thread's next
//! multiply or end. A multiply from a thread other than the holder's runs in a run of its own
//! with the plain multiply (no claim).
//!
//! Kept runs are not bound to cores (`Run::bind(false)`): binding would pin the Python thread
//! to process 0's core for as long as the run lives, and every thread it starts afterwards
//! (numpy's BLAS threads, say) would inherit the pin.

use crate::spmv::{Attached, Io, PlanCore, RowsOut};
use mbsp::{Ctx, Run, Spmd};
use mbsp_algorithms::fft::{BspFft, Complex, Direction};
use mbsp_algorithms::sparse::spmv::SharedVectors;
use std::cell::{RefCell, UnsafeCell};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// The most runs a thread keeps.
pub const MAX_LIVE: usize = 4;

/// What process 0 asks of the other processes at the next sync.
#[derive(Clone)]
enum Command {
    /// Multiply with `plan` on the caller's arrays.
    Multiply { plan: Arc<PlanCore>, io: IoPtr },
    /// Transform `data` (`n` entries, the caller's array) in place with the BSP FFT, forward
    /// or `inverse`.
    Fft {
        parts: Arc<FftParts>,
        data: *mut Complex<f64>,
        n: usize,
        inverse: bool,
    },
    /// Free the plan held (then sync).
    Release,
    /// Free the plan held and return: the run ends.
    Stop,
}

/// Where a multiply's vectors are ([`Io`] as pointers, to cross to the other processes).
#[derive(Clone, Copy)]
enum IoPtr {
    /// `x` (`x_len` entries) and `y` (`y_len`).
    Parts {
        x: *const f64,
        x_len: usize,
        y: *mut f64,
        y_len: usize,
    },
    /// The shared vectors process 0 made of them (their lifetime erased: valid until the
    /// command's last sync).
    Shared(*const SharedVectors<'static>),
}

/// The command of the current call, written by process 0 before the sync that starts it and
/// read by the others after it.
struct Mailbox(Mutex<Command>);

// SAFETY: the pointers of a command are used only between the sync that starts a call and the
// sync that ends it, while process 0 (the caller, which holds the borrows they come from)
// waits inside the call (see the module docs).
unsafe impl Send for Mailbox {}
// SAFETY: as above; the command itself is read and written under the mutex.
unsafe impl Sync for Mailbox {}

impl Mailbox {
    fn set(&self, c: Command) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = c;
    }

    fn get(&self) -> Command {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Sets or clears the holder of `core`.
fn hold(core: &PlanCore, holder: Option<std::thread::ThreadId>) {
    *core.holder.lock().unwrap_or_else(|e| e.into_inner()) = holder;
}

/// What a process of a kept run holds between calls: the multiply of one SpMV plan, or the
/// transform of one length.
pub enum Held {
    /// An SpMV plan's multiply.
    Spmv(Attached),
    /// A BSP FFT of `n` points, and the processes' parts of the vector.
    Fft {
        n: usize,
        fft: BspFft<f64>,
        parts: Arc<FftParts>,
    },
}

/// The processes' parts of a vector being transformed, shared by the processes of a kept run.
///
/// Protocol (one run uses it, one command at a time): each process reads its cyclic entries of
/// the caller's array into its own part and transforms it (the BSP FFT's own supersteps), then
/// syncs; then each process fills one contiguous block of the caller's array from every
/// process's part, then syncs. So a part is written by its process alone while nobody reads it,
/// and read by all while nobody writes it. (Writing back the cyclic entries each process owns
/// had the two processes write every cache line of the array, a third of the time of a
/// transform of 2^18 points: `perf`.)
pub struct FftParts {
    parts: Vec<UnsafeCell<Vec<Complex<f64>>>>,
}

// SAFETY: the parts are written and read only as the protocol of the type's docs allows.
unsafe impl Sync for FftParts {}
// SAFETY: as above; the parts own plain numbers.
unsafe impl Send for FftParts {}

impl FftParts {
    fn new(n: usize, p: usize) -> Self {
        FftParts {
            parts: (0..p)
                .map(|_| UnsafeCell::new(vec![Complex::new(0.0, 0.0); n / p]))
                .collect(),
        }
    }
}

impl Held {
    fn is_plan(&self, core: &Arc<PlanCore>) -> bool {
        matches!(self, Held::Spmv(a) if a.is_of(core))
    }

    fn plan(&self) -> Option<&Arc<PlanCore>> {
        match self {
            Held::Spmv(a) => Some(a.core()),
            Held::Fft { .. } => None,
        }
    }
}

/// Frees what this process of a run holds, if anything; the SpMV plan, whose holder process 0
/// clears once every process has freed it, after the next sync ([`PlanCore::holder`] must not
/// say "free" while another process of the run still holds the plan's claim).
fn let_go(ctx: &mut Ctx, held: &mut Option<Held>) -> mbsp::Result<Option<Arc<PlanCore>>> {
    match held.take() {
        Some(Held::Spmv(a)) => {
            let core = a.core().clone();
            a.free(ctx)?;
            Ok(Some(core))
        }
        Some(Held::Fft { fft, .. }) => fft.free(ctx).map(|()| None),
        None => Ok(None),
    }
}

/// Replaces what the run holds by `make`'s (collective: `make` ends with a sync, after which
/// every process has freed the old one, so process 0 may say its plan is free).
fn switch(
    ctx: &mut Ctx,
    held: &mut Option<Held>,
    make: impl FnOnce(&mut Ctx) -> mbsp::Result<Held>,
) -> mbsp::Result<()> {
    let old = let_go(ctx, held)?;
    *held = Some(make(ctx)?);
    if let Some(old) = old
        && ctx.pid() == 0
    {
        hold(&old, None);
    }
    Ok(())
}

/// A command's multiply, by one process: attaches `plan` if the run holds something else, then
/// multiplies (see the module docs).
fn serve(
    ctx: &mut Ctx,
    held: &mut Option<Held>,
    plan: &Arc<PlanCore>,
    io: &Io<'_>,
) -> mbsp::Result<()> {
    if !held.as_ref().is_some_and(|h| h.is_plan(plan)) {
        switch(ctx, held, |ctx| {
            PlanCore::attach(plan, ctx, false).map(Held::Spmv)
        })?;
    }
    match held {
        Some(Held::Spmv(a)) => a.multiply(ctx, io),
        _ => unreachable!("attached above"),
    }
}

/// A command's transform, by one process: plans the BSP FFT of `n` points if the run holds
/// something else (one superstep), reads its cyclic part of `data` (entries `s, s + p, ...`),
/// transforms it, syncs, fills its block of `data` from every process's part ([`FftParts`]),
/// syncs. Process 0 returns only after the last sync.
///
/// # Safety
/// `data` points to `n` entries that the caller (process 0) keeps borrowed until this
/// command's last sync, and nobody else touches them meanwhile; every process of the run
/// passes the same `parts`, of `n / p` entries per process.
unsafe fn serve_fft(
    ctx: &mut Ctx,
    held: &mut Option<Held>,
    parts: &Arc<FftParts>,
    data: *mut Complex<f64>,
    n: usize,
    inverse: bool,
) -> mbsp::Result<()> {
    if !matches!(held, Some(Held::Fft { parts: q, .. }) if Arc::ptr_eq(q, parts)) {
        switch(ctx, held, |ctx| {
            let fft = BspFft::new(ctx, n)?;
            Ok(Held::Fft {
                n,
                fft,
                parts: parts.clone(),
            })
        })?;
    }
    let Some(Held::Fft { fft, .. }) = held else {
        unreachable!("planned above")
    };
    let (s, p) = (ctx.pid(), ctx.nprocs());
    // SAFETY: this process's part, written only by it before the sync below (the protocol).
    let local = unsafe { &mut *parts.parts[s].get() };
    assert!(
        local.len() * p == n && s < p,
        "a cyclic part of {n} over {p}"
    );
    for (i, v) in local.iter_mut().enumerate() {
        // SAFETY: `s + i p < n` (asserted); entries are only read until the sync below.
        *v = unsafe { *data.add(s + i * p) };
    }
    let dir = if inverse {
        Direction::Inverse
    } else {
        Direction::Forward
    };
    fft.transform(ctx, local, dir)?;
    ctx.sync()?;
    let m = n / p;
    let (lo, hi) = (s * m, (s + 1) * m);
    // SAFETY: the parts are only read now, until the sync below (the protocol).
    let all: Vec<&[Complex<f64>]> = parts
        .parts
        .iter()
        .map(|c| unsafe { (*c.get()).as_slice() })
        .collect();
    for j in lo..hi {
        // SAFETY: entry `j < n` of `data` is in this process's block, which no other process
        // writes.
        unsafe { *data.add(j) = all[j % p][j / p] };
    }
    ctx.sync()
}

/// A run of `p` processes kept on this thread.
struct Live {
    p: usize,
    used: u64,
    mailbox: Arc<Mailbox>,
    /// What process 0 holds (an SpMV plan's multiply, an FFT).
    held: Option<Held>,
    spmd: Option<Spmd<'static>>,
}

/// How long the processes of a kept run spin before they yield, when each has a core: the
/// gap between two calls of a Python loop (`for ...: plan @ x`) is a few microseconds of
/// interpreter, longer than the runtime's default spin once a wait has shrunk it (to an eighth
/// of 10 µs after waits that had to yield: `mbsp::WaitPolicy`), and a run whose waits end in
/// yields stays slow: with the short spin, a loop of multiplies started after an idle pause can
/// stay well below its back-to-back speed for most of the loop; with this one it is back to
/// that speed after its first calls. The CPU time is no more than the yields' that follow (up
/// to 2000 of them) anyway.
const KEPT_SPIN: std::time::Duration = std::time::Duration::from_micros(200);

/// The wait policy of a kept run of `p` processes: the runtime's for this load, with
/// [`KEPT_SPIN`] when every process has a hardware thread of its own (an oversubscribed run
/// keeps the short spin: the awaited process may need this core).
fn kept_policy(p: usize) -> mbsp::WaitPolicy {
    let hw = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut policy = mbsp::WaitPolicy::for_load(p, hw);
    if p <= hw {
        policy.spins = policy
            .spins
            .max(mbsp::WaitPolicy::from_budget(KEPT_SPIN, 0).spins);
    }
    policy
}

impl Live {
    /// Starts a run of `p` processes: processes 1.. wait for commands.
    fn start(p: usize, used: u64) -> mbsp::Result<Self> {
        let mailbox = Arc::new(Mailbox(Mutex::new(Command::Stop)));
        let mb = mailbox.clone();
        let policy = kept_policy(p);
        let spmd = Run::new(p)
            .bind(false)
            .wait_policy(policy)
            .begin(move |ctx| {
                let mut held = None;
                loop {
                    ctx.sync()?;
                    match mb.get() {
                        Command::Stop => return let_go(ctx, &mut held).map(drop),
                        Command::Fft {
                            parts,
                            data,
                            n,
                            inverse,
                        } => {
                            // SAFETY: process 0 keeps the array borrowed until the last sync of
                            // the command (module docs) and sends every process the same parts.
                            unsafe { serve_fft(ctx, &mut held, &parts, data, n, inverse)? };
                        }
                        Command::Release => {
                            let_go(ctx, &mut held)?;
                            ctx.sync()?;
                        }
                        Command::Multiply {
                            plan,
                            io: IoPtr::Parts { x, x_len, y, y_len },
                        } => {
                            // SAFETY: process 0 keeps `x` and `y` borrowed until the step's last
                            // sync (module docs); each process writes its own block of `y`.
                            let (x, out) = unsafe {
                                (
                                    std::slice::from_raw_parts(x, x_len),
                                    RowsOut::new(std::slice::from_raw_parts_mut(y, y_len)),
                                )
                            };
                            serve(ctx, &mut held, &plan, &Io::Parts { x, out: &out })?;
                        }
                        Command::Multiply {
                            plan,
                            io: IoPtr::Shared(v),
                        } => {
                            // SAFETY: process 0 keeps the vectors (and the arrays they borrow)
                            // alive until the step's last sync (module docs), and shares them
                            // only (`SharedVectors` is made to be shared by a run's processes).
                            let v = unsafe { &*v };
                            serve(ctx, &mut held, &plan, &Io::Shared(v))?;
                        }
                    }
                }
            })?;
        Ok(Live {
            p,
            used,
            mailbox,
            held: None,
            spmd: Some(spmd),
        })
    }

    fn ctx(&mut self) -> &mut Ctx {
        self.spmd
            .as_mut()
            .expect("a kept run has its context")
            .ctx()
    }

    /// One multiply, as process 0: on the caller's whole vectors for an hp plan (one
    /// [`SharedVectors`], which this frame owns until the last sync), else through the parts.
    fn multiply(&mut self, core: &Arc<PlanCore>, x: &[f64], y: &mut [f64]) -> mbsp::Result<()> {
        if let Some(plan) = core.shared_plan() {
            let v = SharedVectors::new(plan, x, y)
                .map_err(|e| self.ctx().misuse_error("SpmvPlan.multiply", e.to_string()))?;
            let ptr = std::ptr::from_ref(&v).cast::<SharedVectors<'static>>();
            // The others read `v` in this frame: a panic must not unwind out of it before
            // they have stopped (the run is aborted and joined first).
            return match catch_unwind(AssertUnwindSafe(|| {
                self.step(core, IoPtr::Shared(ptr), &Io::Shared(&v))
            })) {
                Ok(r) => r,
                Err(panic) => {
                    // Dropped without its end, a run is aborted and its threads joined.
                    drop(self.spmd.take());
                    resume_unwind(panic)
                }
            };
        }
        let ptr = IoPtr::Parts {
            x: x.as_ptr(),
            x_len: x.len(),
            y: y.as_mut_ptr(),
            y_len: y.len(),
        };
        let out = RowsOut::new(y);
        self.step(core, ptr, &Io::Parts { x, out: &out })
    }

    /// The step of a multiply, as process 0: the command (`ptr`, what `io` is to the others),
    /// the sync that starts it, the multiply; `io` outlives the step's last sync.
    fn step(&mut self, core: &Arc<PlanCore>, ptr: IoPtr, io: &Io<'_>) -> mbsp::Result<()> {
        self.mailbox.set(Command::Multiply {
            plan: core.clone(),
            io: ptr,
        });
        let mut held = self.held.take();
        let r = (|| {
            self.ctx().sync()?;
            serve(self.ctx(), &mut held, core, io)
        })();
        if held.as_ref().is_some_and(|h| h.is_plan(core)) {
            hold(core, Some(std::thread::current().id()));
        }
        self.held = held;
        // Between calls the mailbox holds no plan (the others dropped their clones).
        self.mailbox.set(Command::Stop);
        r
    }

    /// One transform, as process 0.
    fn fft(&mut self, data: &mut [Complex<f64>], inverse: bool) -> mbsp::Result<()> {
        let (ptr, n) = (data.as_mut_ptr(), data.len());
        let parts = match &self.held {
            Some(Held::Fft { n: m, parts, .. }) if *m == n => parts.clone(),
            _ => Arc::new(FftParts::new(n, self.p)),
        };
        self.mailbox.set(Command::Fft {
            parts: parts.clone(),
            data: ptr,
            n,
            inverse,
        });
        let mut held = self.held.take();
        let r = (|| {
            self.ctx().sync()?;
            // SAFETY: `data` stays borrowed until this returns, after the command's last sync;
            // every process gets `parts` through the mailbox.
            unsafe { serve_fft(self.ctx(), &mut held, &parts, ptr, n, inverse) }
        })();
        self.held = held;
        self.mailbox.set(Command::Stop);
        r
    }

    /// Frees the plan the run holds (one superstep).
    fn release(&mut self) -> mbsp::Result<()> {
        if self.held.is_none() {
            return Ok(());
        }
        self.mailbox.set(Command::Release);
        let mut held = self.held.take();
        self.ctx().sync()?;
        let old = let_go(self.ctx(), &mut held)?;
        self.ctx().sync()?;
        if let Some(old) = old {
            hold(&old, None);
        }
        Ok(())
    }

    /// Ends the run: the others stop at the next sync; the run's first error, if any.
    fn end(&mut self) -> mbsp::Result<()> {
        let Some(mut spmd) = self.spmd.take() else {
            return Ok(());
        };
        self.mailbox.set(Command::Stop);
        let mut held = self.held.take();
        let core = held.as_ref().and_then(|h| h.plan().cloned());
        let stopped = spmd
            .ctx()
            .sync()
            .and_then(|()| let_go(spmd.ctx(), &mut held).map(drop));
        // Dropped (if the run failed first), the multiply gives its claim back too.
        drop(held);
        let ended = spmd.end();
        // Every process has ended (and freed or dropped its multiply): the plan is free.
        if let Some(core) = core {
            hold(&core, None);
        }
        ended.and(stopped)
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        // A failed run's error was returned by the multiply that met it.
        let _ = self.end();
    }
}

thread_local! {
    /// This thread's kept runs, and a clock of their use.
    static LIVE: RefCell<(Vec<Live>, u64)> = const { RefCell::new((Vec::new(), 0)) };
}

/// `y = A x` with the plan `core`: on the run of its process count that this thread keeps,
/// started if needed (see the module docs).
pub fn multiply(core: &Arc<PlanCore>, x: &[f64], y: &mut [f64]) -> mbsp::Result<()> {
    let me = std::thread::current().id();
    let holder = *core.holder.lock().unwrap_or_else(|e| e.into_inner());
    if holder.is_some_and(|h| h != me) {
        // Another thread's run holds the plan: a run of this call's own, plain multiply.
        let out = RowsOut::new(y);
        return mbsp::run(core.run_procs(), |ctx| {
            let mut a = PlanCore::attach(core, ctx, true)?;
            a.multiply(ctx, &Io::Parts { x, out: &out })?;
            a.free(ctx)?;
            ctx.sync()
        })
        .map(drop);
    }
    with_run(core.run_procs(), |live| live.multiply(core, x, y))
}

/// `data = fft(data)` (or the inverse, scaled by `1/n`) over `p` processes: on the run of `p`
/// processes that this thread keeps, started if needed, which keeps the plan of the last length
/// it transformed.
pub fn fft(data: &mut [Complex<f64>], p: usize, inverse: bool) -> mbsp::Result<()> {
    with_run(p, |live| live.fft(data, inverse))
}

/// Runs `f` on this thread's kept run of `p` processes (started if needed; see the module
/// docs), after letting go of the plans dropped elsewhere; a run `f` fails on is ended.
fn with_run(p: usize, f: impl FnOnce(&mut Live) -> mbsp::Result<()>) -> mbsp::Result<()> {
    LIVE.with(|cell| {
        let mut guard = cell.borrow_mut();
        let (runs, clock) = &mut *guard;
        *clock += 1;
        // Plans dropped on other threads are let go here.
        let mut k = 0;
        while k < runs.len() {
            let gone = runs[k]
                .held
                .as_ref()
                .and_then(Held::plan)
                .is_some_and(|c| c.dropped.load(Ordering::Relaxed));
            if gone && runs[k].release().is_err() {
                runs.swap_remove(k);
                continue;
            }
            k += 1;
        }
        let k = match runs.iter().position(|r| r.p == p) {
            Some(k) => k,
            None => {
                if runs.len() >= MAX_LIVE {
                    let oldest = (0..runs.len()).min_by_key(|&i| runs[i].used).unwrap_or(0);
                    runs.swap_remove(oldest);
                }
                runs.push(Live::start(p, *clock)?);
                runs.len() - 1
            }
        };
        runs[k].used = *clock;
        // A panic of process 0 (a broken invariant) must not leave this frame while the others
        // may still read `x` or write `y`: the run is ended (every process stopped and joined)
        // first, then the panic goes on.
        let r = match catch_unwind(AssertUnwindSafe(|| f(&mut runs[k]))) {
            Ok(r) => r,
            Err(panic) => {
                let mut dead = runs.swap_remove(k);
                // Dropped without its end, a run is aborted and its threads joined.
                drop(dead.spmd.take());
                drop(dead);
                resume_unwind(panic);
            }
        };
        if r.is_err() {
            // The run failed: end it, and report its first error (that of the process
            // that failed, rather than what process 0 met because of it).
            let mut dead = runs.swap_remove(k);
            return dead.end().and(r);
        }
        r
    })
}

/// Lets go of `core` if a run of this thread holds it (its Python object is gone).
pub fn release(core: &Arc<PlanCore>) {
    // The thread's runs may be gone already (the thread is ending).
    let _ = LIVE.try_with(|cell| {
        let Ok(mut guard) = cell.try_borrow_mut() else {
            return;
        };
        let runs = &mut guard.0;
        if let Some(k) = runs
            .iter()
            .position(|r| r.held.as_ref().is_some_and(|h| h.is_plan(core)))
            && runs[k].release().is_err()
        {
            runs.swap_remove(k);
        }
    });
}

/// Runs this thread keeps.
pub fn kept() -> usize {
    LIVE.with(|cell| cell.borrow().0.len())
}
