//! Runs kept between multiplies.
//!
//! Starting a run, registering a multiply's buffers and allocating them cost tens of
//! microseconds per call and more for large vectors (fresh pages), a large part of a multiply
//! of a matrix of a few hundred thousand nonzeros on two cores. So each Python thread keeps a
//! run of `p` processes alive between its multiplies with plans of `p` processes, and each run
//! keeps the multiply of the plan it served last ([`Attached`]: registered, allocated). The
//! calling thread is process 0 of that run ([`Run::begin`]: the other processes are threads
//! that wait in a sync between calls); each multiply is then
//!
//! 1. process 0 writes the command (the plan, where `x` and `y` are) into the run's
//!    [`Mailbox`] and syncs; the other processes, waiting in that sync, read it;
//! 2. if the run holds another plan's multiply, every process frees it and attaches this
//!    plan's (one superstep);
//! 3. every process runs [`Attached::multiply`], which ends with a sync after which no process
//!    reads `x` or writes `y`: only then does process 0 return to Python, so the pointers of
//!    the command stay valid for as long as any process uses them.
//!
//! One run per thread and process count, not per plan: the waiting processes of a run spin for
//! a while before they sleep, and a second run's spinning processes would take the cores from
//! the run at work (measured: alternating two plans on two cores made a small multiply 3 to 10
//! times slower with a run per plan). A run (its [`Spmd`] holds process 0's context, which
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

use crate::spmv::{Attached, PlanCore, RowsOut};
use mbsp::{Ctx, Run, Spmd};
use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// The most runs a thread keeps.
pub const MAX_LIVE: usize = 4;

/// What process 0 asks of the other processes at the next sync.
#[derive(Clone)]
enum Command {
    /// Multiply with `plan`: `x` (`x_len` entries) and `y` (`y_len`), the caller's arrays.
    Multiply {
        plan: Arc<PlanCore>,
        x: *const f64,
        x_len: usize,
        y: *mut f64,
        y_len: usize,
    },
    /// Free the plan held (then sync).
    Release,
    /// Free the plan held and return: the run ends.
    Stop,
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

/// Frees the plan held by this process of a run, if any; the plan, whose holder process 0
/// clears once every process has freed it, after the next sync ([`PlanCore::holder`] must not
/// say "free" while another process of the run still holds the plan's claim).
fn let_go(ctx: &mut Ctx, held: &mut Option<Attached>) -> mbsp::Result<Option<Arc<PlanCore>>> {
    match held.take() {
        Some(a) => {
            let core = a.core().clone();
            a.free(ctx)?;
            Ok(Some(core))
        }
        None => Ok(None),
    }
}

/// A command's multiply, by one process: attaches `plan` if the run holds another, then
/// multiplies (see the module docs).
fn serve(
    ctx: &mut Ctx,
    held: &mut Option<Attached>,
    plan: &Arc<PlanCore>,
    x: &[f64],
    out: &RowsOut,
) -> mbsp::Result<()> {
    if !held.as_ref().is_some_and(|a| a.is_of(plan)) {
        let old = let_go(ctx, held)?;
        // Ends with a sync: every process has freed the old plan by now.
        *held = Some(PlanCore::attach(plan, ctx, false)?);
        if let Some(old) = old
            && ctx.pid() == 0
        {
            hold(&old, None);
        }
    }
    held.as_mut().expect("attached above").multiply(ctx, x, out)
}

/// A run of `p` processes kept on this thread.
struct Live {
    p: usize,
    used: u64,
    mailbox: Arc<Mailbox>,
    /// Process 0's multiply of the plan the run holds.
    held: Option<Attached>,
    spmd: Option<Spmd<'static>>,
}

impl Live {
    /// Starts a run of `p` processes: processes 1.. wait for commands.
    fn start(p: usize, used: u64) -> mbsp::Result<Self> {
        let mailbox = Arc::new(Mailbox(Mutex::new(Command::Stop)));
        let mb = mailbox.clone();
        let spmd = Run::new(p).bind(false).begin(move |ctx| {
            let mut held = None;
            loop {
                ctx.sync()?;
                match mb.get() {
                    Command::Stop => return let_go(ctx, &mut held).map(drop),
                    Command::Release => {
                        let_go(ctx, &mut held)?;
                        ctx.sync()?;
                    }
                    Command::Multiply {
                        plan,
                        x,
                        x_len,
                        y,
                        y_len,
                    } => {
                        // SAFETY: process 0 keeps `x` and `y` borrowed until the step's last
                        // sync (module docs); each process writes its own block of `y`.
                        let (x, out) = unsafe {
                            (
                                std::slice::from_raw_parts(x, x_len),
                                RowsOut::new(std::slice::from_raw_parts_mut(y, y_len)),
                            )
                        };
                        serve(ctx, &mut held, &plan, x, &out)?;
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

    /// One multiply, as process 0.
    fn multiply(&mut self, core: &Arc<PlanCore>, x: &[f64], y: &mut [f64]) -> mbsp::Result<()> {
        self.mailbox.set(Command::Multiply {
            plan: core.clone(),
            x: x.as_ptr(),
            x_len: x.len(),
            y: y.as_mut_ptr(),
            y_len: y.len(),
        });
        let out = RowsOut::new(y);
        let mut held = self.held.take();
        let r = (|| {
            self.ctx().sync()?;
            serve(self.ctx(), &mut held, core, x, &out)
        })();
        if held.as_ref().is_some_and(|a| a.is_of(core)) {
            hold(core, Some(std::thread::current().id()));
        }
        self.held = held;
        // Between calls the mailbox holds no plan (the others dropped their clones).
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
        let core = held.as_ref().map(|a| a.core().clone());
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
            a.multiply(ctx, x, &out)?;
            a.free(ctx)?;
            ctx.sync()
        })
        .map(drop);
    }
    let p = core.run_procs();
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
                .is_some_and(|a| a.core().dropped.load(Ordering::Relaxed));
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
        let r = runs[k].multiply(core, x, y);
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
            .position(|r| r.held.as_ref().is_some_and(|a| a.is_of(core)))
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
