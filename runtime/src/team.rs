//! Persistent worker teams: the threads of processes 1.. of a run, kept parked between runs.
//!
//! A thread that starts a run (the caller of [`crate::run`](fn@crate::run), or a process starting a nested
//! run) keeps its *team* in a thread-local pool when the run ends: the worker threads, each
//! still bound where its last process was placed, and the run's shared state (barrier,
//! outboxes, registration tables, arenas) for reuse by the next run of the same size. Starting
//! a run with a warm team costs a wake-up per worker instead of a thread creation, and no
//! binding system call when the placement is unchanged.
//!
//! ## Handing a process to a worker
//!
//! ```text
//! starter                                   worker (waiting in Mailbox::next)
//!   write Job into mailbox;
//!   state = POSTED (Release); notify ──────▶ sees POSTED (Acquire): spin, yield, then sleep
//!   run process 0 itself                     takes the job; state = IDLE
//!                                            runs process `pid` (Launch::run_one)
//!                                            result written; remaining -= 1 (AcqRel)
//!   wait until remaining == 0 (Acquire) ◀──── the last one notifies the team's signal
//!   read the results; the team goes back to the pool
//!
//! shutdown: state = EXIT (Release); notify ─▶ sees EXIT: the thread ends; joined
//! ```
//!
//! Every wait here is the runtime's one waiting type (`wait.rs`), whose sleep handshake makes
//! "store, then notify" enough; loom checks the hand-off (`runtime/tests/loom.rs`).
//!
//! A job points into the starter's stack frame (the [`Launch`]); the starter never leaves that
//! frame (not even by unwinding: [`Launch`]'s guard waits) before every worker has counted
//! itself out, and a worker touches nothing of the launch after doing so (the signal it
//! notifies is shared, not the launch's own).
//!
//! Idle workers spin for a few microseconds (a run started right after the previous one finds
//! them awake), then sleep on their mailbox's signal: an idle team costs no CPU. The pool
//! is dropped when its thread ends (for the program's main thread: at exit), which stops and
//! joins the workers (and, through their own thread-locals, their nested teams);
//! [`release_threads`] does it on demand.

use crate::ctx::{Ctx, RunShared};
use crate::error::{Error, ErrorKind, Result};
use crate::shim::{AtomicU32, AtomicUsize, JoinHandle, Ordering, SharedCell, ThreadBuilder};
use crate::wait::{Signal, Sleep, WaitPolicy, wait_until};
use crossbeam_utils::CachePadded;
use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

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

/// A process for a worker to run: `run(data, pid, done)`, `done` being the team's signal the
/// last worker out notifies; then wait for the next job as `idle` says.
#[derive(Clone, Copy)]
struct Job {
    run: unsafe fn(*const (), usize, &Signal),
    data: *const (),
    pid: usize,
    idle: WaitPolicy,
}

/// Where a worker waits for its next job. On cache lines of its own (and away from its
/// `Arc`'s counts): the worker spins on it, and a neighbour that another core writes would
/// take the line from it (false sharing: the runs' costs then depend on where the heap put it).
#[repr(align(128))]
struct Mailbox {
    /// The team's signal where starters wait for the last worker of a launch (`Team::done`).
    done: Arc<CachePadded<Signal>>,
    /// `IDLE`, `POSTED` or `EXIT`.
    state: AtomicU32,
    /// Where the idle worker sleeps; notified after every change of `state` to non-`IDLE`.
    signal: Signal,
    /// Written by the starter before `state = POSTED`, read by the worker after seeing it.
    job: SharedCell<Option<Job>>,
}

// SAFETY: `job` is handed over by the `state` protocol (Release/Acquire), and a job's data is
// kept alive by its starter until the worker has finished with it (module documentation).
unsafe impl Sync for Mailbox {}
// SAFETY: as above.
unsafe impl Send for Mailbox {}

impl Mailbox {
    fn new(done: Arc<CachePadded<Signal>>) -> Self {
        Mailbox {
            done,
            state: AtomicU32::new(IDLE),
            signal: Signal::new(),
            job: SharedCell::new(None),
        }
    }

    fn post(&self, job: Job) {
        // SAFETY: the worker is idle (it counted itself out of the previous run, or is new) and
        // reads `job` only after seeing POSTED below.
        unsafe { self.job.write(|j| *j = Some(job)) };
        // Release: the job travels with POSTED.
        self.state.store(POSTED, Ordering::Release);
        self.signal.notify();
    }

    /// Stop the worker (it ends once it sees EXIT).
    fn shut(&self) {
        self.state.store(EXIT, Ordering::Release);
        self.signal.notify();
    }

    /// The next job, or `None` when the team is shutting down. Spin and yield as `idle` says
    /// (a run started right after the last one finds the worker awake), then sleep.
    fn next(&self, idle: WaitPolicy) -> Option<Job> {
        let state = wait_until(
            idle,
            Sleep::On(&self.signal),
            || match self.state.load(Ordering::Acquire) {
                IDLE => None,
                s => Some(s),
            },
            || false,
        )
        .ok()?;
        if state == EXIT {
            return None;
        }
        // SAFETY: the starter wrote the job before storing POSTED (Release), which we loaded
        // (Acquire); it writes the next job only after we have counted ourselves out of this
        // one (`Launch::count_out`, after the IDLE below).
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
        self.mail.shut();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// How a worker waits for its next job after a run whose processes wait as `run` says: as long
/// as they spin (about 10 µs when every process has its own core), but at most a few yields
/// when the run was oversubscribed (then the worker's core is wanted by another thread).
fn idle_policy(run: WaitPolicy) -> WaitPolicy {
    WaitPolicy::new(run.spins, run.yields.min(4))
}

fn worker_main(mail: Arc<Mailbox>) {
    // Before the first job: sleep at once.
    let mut idle = WaitPolicy::new(0, 0);
    while let Some(job) = mail.next(idle) {
        idle = job.idle;
        // SAFETY: the starter keeps the job's data alive until we count ourselves out, which
        // `run` does last (module documentation).
        unsafe { (job.run)(job.data, job.pid, &mail.done) };
    }
}

/// The worker threads of one starting thread, and the state of its last run.
pub(crate) struct Team {
    workers: Vec<Worker>,
    stack: Option<usize>,
    /// The shared state of the last run, reusable by a run of the same size.
    pub(crate) last: Option<Arc<RunShared>>,
    /// Every process of the last run ended it well: a run on `last` counts on from its sync
    /// counts and barrier episodes (`RunState::reuse`).
    pub(crate) last_ended_well: bool,
    /// Where a starter waits for the last worker of its launch to count itself out. One per
    /// team, made once and held by every worker's mailbox: a worker notifies it without
    /// touching a reference count (a count the starter also changes would cross between the
    /// two cores on every run), and may do so after the launch has gone (a stray notification
    /// wakes a later launch's starter, who then checks its own condition).
    done: Arc<CachePadded<Signal>>,
}

impl Team {
    /// A team without workers, for threads of `stack` bytes (default if `None`).
    fn empty(stack: Option<usize>) -> Team {
        Team {
            workers: Vec::new(),
            stack,
            last: None,
            last_ended_well: false,
            done: Arc::new(CachePadded::new(Signal::new())),
        }
    }

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
            .unwrap_or_else(|| Team::empty(stack))
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
    /// what the run registered is released now. `ended_well`: every process's result was a
    /// value (so all completed the same syncs).
    pub(crate) fn keep(&mut self, mut shared: Arc<RunShared>, ended_well: bool) {
        if let Some(s) = Arc::get_mut(&mut shared) {
            s.release();
            self.last = Some(shared);
            self.last_ended_well = ended_well;
        }
    }

    /// Make sure there are `n` workers; on failure return how many there are and the error.
    fn grow(&mut self, n: usize) -> std::result::Result<(), (usize, std::io::Error)> {
        while self.workers.len() < n {
            let mail = Arc::new(Mailbox::new(self.done.clone()));
            let mut b =
                ThreadBuilder::new().name(format!("mbsp-worker-{}", self.workers.len() + 1));
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

/// Work for a team's workers and the calling thread: `work(i)` for `i` in `0..n`, `0` on the
/// calling thread and `i` on worker `i - 1` (a run with coroutines: one group of processes
/// each, `run.rs`). In the caller's frame, like a [`Launch`], which it follows: the caller never
/// leaves the frame (its drop waits) before every worker has counted itself out.
struct Fan<'w> {
    work: &'w (dyn Fn(usize) + Sync),
    remaining: AtomicUsize,
    done: Arc<CachePadded<Signal>>,
    wait: WaitPolicy,
}

impl Fan<'_> {
    /// A worker's job: `work(i)`, then count itself out.
    ///
    /// # Safety
    /// `data` is a live `Fan` (its caller waits for every worker before it goes away).
    unsafe fn run_one(data: *const (), i: usize, done: &Signal) {
        // SAFETY: the caller's promise.
        let me = unsafe { &*(data as *const Fan<'_>) };
        // `work` catches what it runs; a panic here would be the runtime's, and must not skip
        // the count (the caller would wait forever).
        let _ = catch_unwind(AssertUnwindSafe(|| (me.work)(i)));
        me.count_out(done);
    }

    fn count_out(&self, done: &Signal) {
        // AcqRel: what the work wrote travels to the caller.
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            done.notify();
        }
    }

    fn wait(&self) {
        let _ = wait_until(
            self.wait,
            Sleep::On(&self.done),
            || (self.remaining.load(Ordering::Acquire) == 0).then_some(()),
            || false,
        );
    }
}

impl Drop for Fan<'_> {
    /// Never let the fan (and the work it lends) go away while a worker runs.
    fn drop(&mut self) {
        self.wait();
    }
}

impl Team {
    /// Run `work(0)` on the calling thread and `work(i)`, `i` in `1..n`, on the team's workers
    /// (started if missing), and return once all have returned. Workers wait for their next
    /// job as `idle` says, the caller for the workers as `wait` says. Where a worker cannot be
    /// started, `missing(i, error)` is called instead of `work(i)` for it and every later one.
    pub(crate) fn fan_out(
        &mut self,
        n: usize,
        idle: WaitPolicy,
        wait: WaitPolicy,
        work: &(dyn Fn(usize) + Sync),
        missing: impl Fn(usize, &std::io::Error),
    ) {
        let want = n.saturating_sub(1);
        let have = match self.grow(want) {
            Ok(()) => want,
            Err((have, e)) => {
                for i in have + 1..n {
                    missing(i, &e);
                }
                have
            }
        };
        let fan = Fan {
            work,
            remaining: AtomicUsize::new(have),
            done: self.done.clone(),
            wait,
        };
        for (w, worker) in self.workers[..have].iter().enumerate() {
            worker.mail.post(Job {
                run: Fan::run_one,
                data: &fan as *const Fan<'_> as *const (),
                pid: w + 1,
                idle,
            });
        }
        work(0);
        // `fan`'s drop waits for the workers.
    }
}

/// An SPMD function, as workers see it.
pub(crate) type SpmdFn<'f, R> = dyn Fn(&mut Ctx) -> Result<R> + Sync + 'f;

/// How a worker runs process `pid` of a run with an SPMD function.
///
/// Its arguments: the run's state, the run's number (`RunShared::id`, from the launch's line
/// rather than the state's), the pid and the function.
pub(crate) type ProcessFn<R> =
    for<'a> fn(&Arc<RunShared>, u64, usize, &'a SpmdFn<'a, R>) -> Result<R>;

/// One run handed to a team: what its workers need, in the starter's frame.
///
/// On one cache line of its own (for a result that fits), written by the starter before it
/// posts the jobs: a worker reads it once when it starts, and writes it once when it ends
/// (its result, then `remaining`) — in a run of two, the one line that crosses to the worker's
/// core and back besides the job and the barrier's.
#[repr(C, align(128))]
pub(crate) struct Launch<R> {
    pub(crate) shared: Arc<RunShared>,
    /// The run's number (`RunShared::id`), copied here for the workers.
    id: u64,
    /// The SPMD function; lifetime-erased, valid until every worker has counted itself out.
    f: *const SpmdFn<'static, R>,
    /// Workers run `process` through this (it knows how to bind and make the context).
    process: ProcessFn<R>,
    remaining: AtomicUsize,
    /// The result of process 1, written once by its worker before it counts itself out.
    first: SharedCell<Option<Result<R>>>,
    /// The results of processes 2.., the same way (nothing allocated for a run of two).
    rest: Box<[SharedCell<Option<Result<R>>>]>,
    /// Where the starter sleeps until the last worker has counted itself out: the team's
    /// ([`Team::done`]), which outlives the launch.
    done: Arc<CachePadded<Signal>>,
}

impl<R> Launch<R> {
    /// A launch of `shared`'s processes 1.. running `f`, on `team`'s workers.
    ///
    /// # Safety
    /// `f` must stay valid until [`Launch::wait`] has returned (the launch must not be leaked
    /// or forgotten while workers run).
    pub(crate) unsafe fn new<'f>(
        shared: Arc<RunShared>,
        f: &'f SpmdFn<'f, R>,
        process: ProcessFn<R>,
        team: &Team,
    ) -> Self {
        let p = shared.p;
        let f: *const SpmdFn<'f, R> = f;
        Launch {
            id: *shared.id,
            shared,
            // SAFETY: only the lifetime changes; validity is the caller's promise.
            f: unsafe { std::mem::transmute::<*const SpmdFn<'f, R>, *const SpmdFn<'static, R>>(f) },
            process,
            remaining: AtomicUsize::new(p - 1),
            first: SharedCell::new(None),
            rest: (2..p).map(|_| SharedCell::new(None)).collect(),
            done: team.done.clone(),
        }
    }

    /// The result slot of process `pid` (1..p).
    fn slot(&self, pid: usize) -> &SharedCell<Option<Result<R>>> {
        match pid {
            1 => &self.first,
            _ => &self.rest[pid - 2],
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
                crate::process::spawn_failed(&self.shared, have + 1, e);
                for _ in have..want {
                    self.count_out(&self.done);
                }
                have
            }
        };
        let idle = idle_policy(self.shared.policy);
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
    unsafe fn run_one(data: *const (), pid: usize, done: &Signal) {
        // SAFETY: the caller's promise.
        let me = unsafe { &*(data as *const Self) };
        // SAFETY: `f` is valid until `wait` returns, which needs our count below.
        let f = unsafe { &*me.f };
        // The launch's state, kept by it until we count ourselves out (no reference counted
        // here: see `ctx::RunRef`).
        let r = catch_unwind(AssertUnwindSafe(|| (me.process)(&me.shared, me.id, pid, f)))
            .unwrap_or_else(|_| {
                Err(Error::outside(
                    ErrorKind::Panic,
                    "run",
                    "a process thread panicked outside its SPMD function",
                ))
            });
        // SAFETY: slot `pid` is written by this worker only, and read by the starter after
        // `remaining` reaches 0.
        unsafe { me.slot(pid).write(|slot| *slot = Some(r)) };
        me.count_out(done);
    }

    /// One process is done with the launch; the last one wakes the starter through `done`,
    /// the team's signal, which the caller holds: the launch may be gone right after the
    /// decrement.
    fn count_out(&self, done: &Signal) {
        // AcqRel: the result written before travels to the starter (and the last worker's
        // decrement carries every earlier worker's, through the read-modify-write chain).
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            done.notify();
        }
    }

    /// Wait until every worker has counted itself out. Spins and yields as the run's
    /// processes do (yielding lets a worker that shares this core finish), then sleeps until
    /// the last worker notifies.
    pub(crate) fn wait(&self) {
        let _ = wait_until(
            self.shared.policy,
            Sleep::On(&self.done),
            || (self.remaining.load(Ordering::Acquire) == 0).then_some(()),
            || false,
        );
    }

    /// The results of processes 1.. (call after [`Launch::wait`]).
    pub(crate) fn take_results(&self) -> impl Iterator<Item = Result<R>> + '_ {
        let first = (self.shared.p > 1).then_some(&self.first);
        first.into_iter().chain(self.rest.iter()).map(|slot| {
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

/// The starter's side of [`Run::launch`](crate::Run) for the loom model of the hand-off
/// (`internals::model_team`): one launch per run state on one team, each worker's process
/// returning `pid * 1000 + ` the run's id without running an SPMD function, then the team
/// dropped (its workers stopped and joined).
#[cfg(loom)]
pub(crate) fn model_launches(runs: Vec<Arc<RunShared>>) -> Vec<(u64, Vec<Result<u64>>)> {
    fn process(shared: &Arc<RunShared>, _: u64, pid: usize, _: &SpmdFn<'_, u64>) -> Result<u64> {
        Ok(pid as u64 * 1000 + *shared.id)
    }
    let f = |_: &mut Ctx| Ok(0);
    let mut team = Team::empty(None);
    let out = runs
        .into_iter()
        .map(|shared| {
            let id = *shared.id;
            // SAFETY: `f` outlives the launch, which waits for its workers when dropped.
            let launch = unsafe { Launch::new(shared, &f, process, &team) };
            launch.dispatch(&mut team);
            launch.wait();
            (id, launch.take_results().collect())
        })
        .collect();
    drop(team);
    out
}

/// The fan-out of work to a team (`internals::model_fan_out`): `rounds` fan-outs of `n` on one
/// team whose workers start parked, `work(i)` writing `round * 100 + i` into cell `i` (a plain
/// cell: loom reports a read of it not ordered after the write), then the team dropped.
/// Returns each round's cells as the caller read them after `fan_out` returned.
#[cfg(loom)]
pub(crate) fn model_fan_out(n: usize, rounds: usize) -> Vec<Vec<u64>> {
    struct Cells(Vec<SharedCell<u64>>);
    // SAFETY: cell `i` is written by `work(i)` only, and read by the caller after `fan_out`
    // returned (every worker counted out, AcqRel/Acquire): what the model checks.
    unsafe impl Sync for Cells {}
    impl Cells {
        fn set(&self, i: usize, v: u64) {
            // SAFETY: as for `Cells`.
            unsafe { self.0[i].write(|c| *c = v) };
        }
    }
    let mut team = Team::empty(None);
    let policy = WaitPolicy::new(1, 1);
    let out = (0..rounds as u64)
        .map(|round| {
            let cells = Cells((0..n).map(|_| SharedCell::new(0)).collect());
            let work = |i: usize| cells.set(i, round * 100 + i as u64);
            team.fan_out(n, policy, policy, &work, |_, _| {
                unreachable!("loom threads start")
            });
            // SAFETY: as for `Cells`.
            cells.0.iter().map(|c| unsafe { c.read(|v| *v) }).collect()
        })
        .collect();
    drop(team);
    out
}
