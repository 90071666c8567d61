//! Runs kept between multiplies.
//!
//! Starting a run costs tens of microseconds per call (a fifth of a multiply of a matrix of
//! 300 000 nonzeros on two cores), so each Python thread keeps a run of `p` processes alive
//! between its multiplies with plans of `p` processes, whichever plan. The calling thread is
//! process 0 of that run ([`Run::begin`]: the other processes are threads that wait in a sync
//! between calls); each multiply is then
//!
//! 1. process 0 writes the command (the plan, where `x` and `y` are) into the run's
//!    [`Mailbox`] and syncs; the other processes, waiting in that sync, read it;
//! 2. every process runs [`PlanCore::step`], which ends with a sync after which no process
//!    reads `x` or writes `y`: only then does process 0 return to Python, so the pointers of
//!    the command stay valid for as long as any process uses them.
//!
//! One run per thread and process count, not per plan: the waiting processes of a run spin for
//! a while before they sleep, and a second run's spinning processes would take the cores from
//! the run at work (measured: alternating two plans on two cores made a small multiply 3 to 10
//! times slower with a run per plan). A run (its [`Spmd`] holds process 0's context, which
//! must stay on the thread that began the run) lives in a thread-local list of at most
//! [`MAX_LIVE`] runs: the least recently used one ends when a new one would exceed the list,
//! and all of them when the thread ends (their destructor tells the others to stop, syncs and
//! joins them: no thread is left waiting). A run that failed is ended at once and its first
//! error returned; the next multiply starts a new one. Between calls a run holds no plan.
//!
//! Kept runs are not bound to cores (`Run::bind(false)`): binding would pin the Python thread
//! to process 0's core for as long as the plan lives, and every thread it starts afterwards
//! (numpy's BLAS threads, say) would inherit the pin. A plan of one process runs inline.

use crate::spmv::{PlanCore, RowsOut};
use mbsp::{Run, Spmd};
use std::cell::RefCell;
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
    /// Return: the run ends.
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

/// A run of `p` processes kept on this thread.
struct Live {
    p: usize,
    used: u64,
    mailbox: Arc<Mailbox>,
    spmd: Option<Spmd<'static>>,
}

impl Live {
    /// Starts a run of `p` processes: processes 1.. wait for commands.
    fn start(p: usize, used: u64) -> mbsp::Result<Self> {
        let mailbox = Arc::new(Mailbox(Mutex::new(Command::Stop)));
        let mb = mailbox.clone();
        let spmd = Run::new(p)
            .bind(false)
            .begin(move |ctx| {
                loop {
                    ctx.sync()?;
                    match mb.get() {
                        Command::Stop => return Ok(()),
                        Command::Multiply {
                            plan,
                            x,
                            x_len,
                            y,
                            y_len,
                        } => {
                            // SAFETY: process 0 keeps `x` and `y` borrowed until the step's
                            // last sync (module docs); `y` rows are written by their owners
                            // only (`RowsOut`).
                            let (x, out) = unsafe {
                                (
                                    std::slice::from_raw_parts(x, x_len),
                                    RowsOut::new(std::slice::from_raw_parts_mut(y, y_len)),
                                )
                            };
                            plan.step(ctx, x, &out)?;
                        }
                    }
                }
            })?;
        Ok(Live {
            p,
            used,
            mailbox,
            spmd: Some(spmd),
        })
    }

    /// One multiply, as process 0.
    fn multiply(&mut self, core: &Arc<PlanCore>, x: &[f64], y: &mut [f64]) -> mbsp::Result<()> {
        let spmd = self.spmd.as_mut().expect("a kept run has its context");
        self.mailbox.set(Command::Multiply {
            plan: core.clone(),
            x: x.as_ptr(),
            x_len: x.len(),
            y: y.as_mut_ptr(),
            y_len: y.len(),
        });
        let out = RowsOut::new(y);
        let ctx = spmd.ctx();
        ctx.sync()?;
        let r = core.step(ctx, x, &out);
        // Between calls the run holds no plan (the others dropped their clones after the step).
        self.mailbox.set(Command::Stop);
        r
    }

    /// Ends the run: the others stop at the next sync; the run's first error, if any.
    fn end(&mut self) -> mbsp::Result<()> {
        let Some(mut spmd) = self.spmd.take() else {
            return Ok(());
        };
        self.mailbox.set(Command::Stop);
        let stopped = spmd.ctx().sync();
        let ended = spmd.end();
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
/// started if needed.
pub fn multiply(core: &Arc<PlanCore>, x: &[f64], y: &mut [f64]) -> mbsp::Result<()> {
    let p = core.run_procs();
    if p == 1 {
        let out = RowsOut::new(y);
        return mbsp::run(1, |ctx| core.step(ctx, x, &out)).map(drop);
    }
    LIVE.with(|cell| {
        let mut guard = cell.borrow_mut();
        let (runs, clock) = &mut *guard;
        *clock += 1;
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

/// Runs this thread keeps.
pub fn kept() -> usize {
    LIVE.with(|cell| cell.borrow().0.len())
}
