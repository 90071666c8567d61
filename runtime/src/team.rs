//! Persistent worker teams: the threads of processes 1.. of a run, kept parked between runs.
//!
//! A thread that starts a run (the caller of [`crate::run`], or a process starting a nested
//! run) keeps its *team* in a thread-local pool when the run ends: the worker threads, each
//! still bound where its last process was placed, and the run's shared state (barrier,
//! outboxes, registration tables, arenas) for reuse by the next run of the same size. Starting
//! a run with a warm team costs a wake-up per worker instead of a thread creation, and no
//! binding system call when the placement is unchanged.
//!
//! ## Handing a process to a worker
//!
//! ```text
//! starter                                   worker (parked in Mailbox::next)
//!   write Job into mailbox; state = POSTED ──▶ sees POSTED (spin, then futex)
//!   run process 0 itself                     runs process `pid` (Launch::run_one)
//!                                            state = IDLE; remaining -= 1 (Release)
//!   wait until remaining == 0 (Acquire) ◀──── the last one unparks the starter
//!   the team goes back to the pool
//! ```
//!
//! A job points into the starter's stack frame (the [`Launch`]); the starter never leaves that
//! frame (not even by unwinding: [`Launch`]'s guard waits) before every worker has counted
//! itself out, and a worker touches nothing of the launch after doing so.
//!
//! Idle workers spin for a few microseconds (a run started right after the previous one finds
//! them awake), then sleep on their mailbox's futex word: an idle team costs no CPU. The pool
//! is dropped when its thread ends (for the program's main thread: at exit), which stops and
//! joins the workers (and, through their own thread-locals, their nested teams);
//! [`release_threads`] does it on demand.

use crate::ctx::{Ctx, RunShared};
use crate::error::{Error, ErrorKind, Result};
use crate::shim::SharedCell;
use crate::wait::WaitPolicy;
use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::thread::{JoinHandle, Thread};

/// The environment variable that turns thread reuse off (`MBSP_TEAMS=off`): every run then
/// starts and joins its own threads, as [`crate::Run::reuse_threads`]`(false)` does.
pub const TEAMS_ENV: &str = "MBSP_TEAMS";

/// Whether runs reuse parked threads by default (`MBSP_TEAMS`, read once).
pub(crate) fn reuse_by_default() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        !matches!(
            std::env::var(TEAMS_ENV).as_deref().map(str::trim),
            Ok("off" | "0" | "no" | "false")
        )
    })
}

/// Idle teams a thread keeps (a thread rarely starts runs of more than one shape).
const POOL: usize = 4;

thread_local! {
    static TEAMS: RefCell<Vec<Team>> = const { RefCell::new(Vec::new()) };
}

/// Stop and join the worker threads the calling thread keeps for its runs (and their own
/// nested teams). They are started again by the next run. Threads kept by other threads are
/// not affected; every thread's teams are also released when it ends.
///
/// ```
/// mbsp::run(2, |_| Ok(())).unwrap(); // leaves one parked worker
/// mbsp::release_threads();           // joined now
/// ```
pub fn release_threads() {
    let teams = TEAMS.with(|t| std::mem::take(&mut *t.borrow_mut()));
    drop(teams);
}

const IDLE: u32 = 0;
const POSTED: u32 = 1;
const EXIT: u32 = 2;

/// A process for a worker to run: `run(data, pid)`; then wait for the next job as `idle` says.
#[derive(Clone, Copy)]
struct Job {
    run: unsafe fn(*const (), usize),
    data: *const (),
    pid: usize,
    idle: WaitPolicy,
}

/// Where a worker waits for its next job.
struct Mailbox {
    /// `IDLE`, `POSTED` or `EXIT`; the futex word sleepers wait on.
    state: AtomicU32,
    /// The worker is asleep (or about to be) on `state`.
    sleeping: AtomicU32,
    /// Written by the starter before `state = POSTED`, read by the worker after seeing it.
    job: SharedCell<Option<Job>>,
}

// SAFETY: `job` is handed over by the `state` protocol (Release/Acquire), and a job's data is
// kept alive by its starter until the worker has finished with it (module documentation).
unsafe impl Sync for Mailbox {}
// SAFETY: as above.
unsafe impl Send for Mailbox {}

impl Mailbox {
    fn post(&self, job: Job) {
        // SAFETY: the worker is idle (it counted itself out of the previous run, or is new) and
        // reads `job` only after seeing POSTED below.
        unsafe { self.job.write(|j| *j = Some(job)) };
        self.state.store(POSTED, Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) != 0 {
            atomic_wait::wake_one(&self.state);
        }
    }

    /// The next job, or `None` when the team is shutting down. Spin and yield as `idle` says
    /// (a run started right after the last one finds the worker awake), then sleep.
    fn next(&self, idle: &WaitPolicy) -> Option<Job> {
        let mut state = self.state.load(Ordering::Acquire);
        let mut i = 0;
        while state == IDLE && i < idle.spins {
            std::hint::spin_loop();
            state = self.state.load(Ordering::Acquire);
            i += 1;
        }
        let mut i = 0;
        while state == IDLE && i < idle.yields {
            std::thread::yield_now();
            state = self.state.load(Ordering::Acquire);
            i += 1;
        }
        if state == IDLE {
            self.sleeping.store(1, Ordering::SeqCst);
            loop {
                state = self.state.load(Ordering::SeqCst);
                if state != IDLE {
                    break;
                }
                atomic_wait::wait(&self.state, IDLE);
            }
            self.sleeping.store(0, Ordering::Relaxed);
        }
        if state == EXIT {
            return None;
        }
        // SAFETY: POSTED was stored after the job (SeqCst store, Acquire/SeqCst load above).
        let job = unsafe { self.job.write(Option::take) };
        self.state.store(IDLE, Ordering::Relaxed);
        job
    }
}

/// A parked worker thread.
struct Worker {
    mail: Arc<Mailbox>,
    handle: Option<JoinHandle<()>>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.mail.state.store(EXIT, Ordering::SeqCst);
        atomic_wait::wake_one(&self.mail.state);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// How a worker waits for its next job after a run whose processes wait as `run` says: as long
/// as they spin (about 10 µs when every process has its own core), but at most a few yields
/// when the run was oversubscribed (then the worker's core is wanted by another thread).
fn idle_policy(run: WaitPolicy) -> WaitPolicy {
    WaitPolicy {
        spins: run.spins,
        yields: run.yields.min(4),
    }
}

fn worker_main(mail: Arc<Mailbox>) {
    // Before the first job: sleep at once.
    let mut idle = WaitPolicy {
        spins: 0,
        yields: 0,
    };
    while let Some(job) = mail.next(&idle) {
        idle = job.idle;
        // SAFETY: the starter keeps the job's data alive until we count ourselves out, which
        // `run` does last (module documentation).
        unsafe { (job.run)(job.data, job.pid) };
    }
}

/// The worker threads of one starting thread, and the state of its last run.
pub(crate) struct Team {
    workers: Vec<Worker>,
    stack: Option<usize>,
    /// The shared state of the last run, reusable by a run of the same size.
    pub(crate) last: Option<Arc<RunShared>>,
}

impl Team {
    /// A team from the calling thread's pool (one with this stack size), or a new empty one.
    pub(crate) fn take(stack: Option<usize>) -> Team {
        TEAMS
            .try_with(|t| {
                let mut t = t.borrow_mut();
                let at = t.iter().rposition(|team| team.stack == stack)?;
                Some(t.remove(at))
            })
            .ok()
            .flatten()
            .unwrap_or(Team {
                workers: Vec::new(),
                stack,
                last: None,
            })
    }

    /// Put the team back into the calling thread's pool.
    pub(crate) fn give_back(self) {
        let overflow = TEAMS.try_with(|t| {
            let mut t = t.borrow_mut();
            t.push(self);
            (t.len() > POOL).then(|| t.remove(0))
        });
        // Dropped outside the borrow: joining workers may run their threads' destructors.
        drop(overflow);
    }

    /// Keep the state of a run that has ended for the next run, if nothing else holds it;
    /// what the run registered is released now.
    pub(crate) fn keep(&mut self, mut shared: Arc<RunShared>) {
        if let Some(s) = Arc::get_mut(&mut shared) {
            s.release();
            self.last = Some(shared);
        }
    }

    /// Make sure there are `n` workers; on failure return how many there are and the error.
    fn grow(&mut self, n: usize) -> std::result::Result<(), (usize, std::io::Error)> {
        while self.workers.len() < n {
            let mail = Arc::new(Mailbox {
                state: AtomicU32::new(IDLE),
                sleeping: AtomicU32::new(0),
                job: SharedCell::new(None),
            });
            let mut b =
                std::thread::Builder::new().name(format!("mbsp-worker-{}", self.workers.len() + 1));
            if let Some(s) = self.stack {
                b = b.stack_size(s);
            }
            let m = mail.clone();
            match b.spawn(move || worker_main(m)) {
                Ok(h) => self.workers.push(Worker {
                    mail,
                    handle: Some(h),
                }),
                Err(e) => return Err((self.workers.len(), e)),
            }
        }
        Ok(())
    }
}

/// An SPMD function, as workers see it.
pub(crate) type SpmdFn<'f, R> = dyn Fn(&mut Ctx) -> Result<R> + Sync + 'f;

/// How a worker runs process `pid` of a run with an SPMD function.
pub(crate) type ProcessFn<R> = for<'a> fn(Arc<RunShared>, usize, &'a SpmdFn<'a, R>) -> Result<R>;

/// One run handed to a team: what its workers need, in the starter's frame.
pub(crate) struct Launch<R> {
    pub(crate) shared: Arc<RunShared>,
    /// The SPMD function; lifetime-erased, valid until every worker has counted itself out.
    f: *const SpmdFn<'static, R>,
    /// Results of processes 1.., each written once by its worker before it counts itself out.
    results: Box<[SharedCell<Option<Result<R>>>]>,
    remaining: AtomicUsize,
    /// The starting thread, woken by the last worker to finish.
    owner: Thread,
    /// Workers run `process` through this (it knows how to bind and make the context).
    process: ProcessFn<R>,
}

impl<R> Launch<R> {
    /// A launch of `shared`'s processes 1.. running `f`.
    ///
    /// # Safety
    /// `f` must stay valid until [`Launch::wait`] has returned (the launch must not be leaked
    /// or forgotten while workers run).
    pub(crate) unsafe fn new<'f>(
        shared: Arc<RunShared>,
        f: &'f SpmdFn<'f, R>,
        process: ProcessFn<R>,
    ) -> Self {
        let p = shared.p;
        let f: *const SpmdFn<'f, R> = f;
        Launch {
            shared,
            // SAFETY: only the lifetime changes; validity is the caller's promise.
            f: unsafe { std::mem::transmute::<*const SpmdFn<'f, R>, *const SpmdFn<'static, R>>(f) },
            results: (1..p).map(|_| SharedCell::new(None)).collect(),
            remaining: AtomicUsize::new(p - 1),
            owner: std::thread::current(),
            process,
        }
    }

    /// Hand processes 1.. to `team`'s workers (started if missing). If a thread cannot be
    /// started, the run fails and the processes without a thread count as ended.
    pub(crate) fn dispatch(&self, team: &mut Team)
    where
        R: Send,
    {
        let want = self.shared.p - 1;
        let have = match team.grow(want) {
            Ok(()) => want,
            Err((have, e)) => {
                crate::run::spawn_failed(&self.shared, have + 1, e);
                for _ in have..want {
                    self.count_out();
                }
                have
            }
        };
        let idle = idle_policy(self.shared.barrier.policy());
        for (i, w) in team.workers[..have].iter().enumerate() {
            w.mail.post(Job {
                run: Self::run_one,
                data: self as *const Self as *const (),
                pid: i + 1,
                idle,
            });
        }
    }

    /// A worker's job: run process `pid`, store its result, count itself out.
    ///
    /// # Safety
    /// `data` is a live `Launch<R>` (see [`Launch::new`]).
    unsafe fn run_one(data: *const (), pid: usize) {
        // SAFETY: the caller's promise.
        let me = unsafe { &*(data as *const Self) };
        // SAFETY: `f` is valid until `wait` returns, which needs our count below.
        let f = unsafe { &*me.f };
        let r = catch_unwind(AssertUnwindSafe(|| (me.process)(me.shared.clone(), pid, f)))
            .unwrap_or_else(|_| {
                Err(Error::outside(
                    ErrorKind::Panic,
                    "run",
                    "a process thread panicked outside its SPMD function",
                ))
            });
        // SAFETY: slot `pid - 1` is written by this worker only, and read by the starter after
        // `remaining` reaches 0.
        unsafe { me.results[pid - 1].write(|slot| *slot = Some(r)) };
        me.count_out();
    }

    /// One process is done with the launch; the last one wakes the starter. The launch may be
    /// gone right after the decrement, so the starter's handle is taken before it.
    fn count_out(&self) {
        let owner = self.owner.clone();
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            owner.unpark();
        }
    }

    /// Wait until every worker has counted itself out.
    /// Spins and yields as the run's processes do (yielding lets a worker that shares this
    /// core finish), then parks until the last worker unparks it.
    pub(crate) fn wait(&self) {
        let policy = self.shared.barrier.policy();
        let mut i = 0u32;
        while self.remaining.load(Ordering::Acquire) != 0 {
            if i < policy.spins {
                std::hint::spin_loop();
            } else if i - policy.spins < policy.yields {
                std::thread::yield_now();
            } else {
                std::thread::park_timeout(std::time::Duration::from_millis(1));
            }
            i = i.saturating_add(1);
        }
    }

    /// The results of processes 1.. (call after [`Launch::wait`]).
    pub(crate) fn take_results(&self) -> impl Iterator<Item = Result<R>> + '_ {
        self.results.iter().map(|slot| {
            // SAFETY: every worker has counted itself out (`wait`), so nobody writes the slots.
            unsafe { slot.write(Option::take) }.unwrap_or_else(|| {
                Err(Error::outside(
                    ErrorKind::System,
                    "run",
                    "the process could not be started",
                ))
            })
        })
    }
}

impl<R> Drop for Launch<R> {
    /// Never let the launch (and the function it lends) go away while a worker runs.
    fn drop(&mut self) {
        self.wait();
    }
}
