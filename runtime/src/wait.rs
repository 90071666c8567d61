//! Waiting: how every thread of the runtime waits for a condition that another thread makes
//! true — a barrier partner's episode word, a worker's next job, the end of a launch, another
//! process's completed syncs.
//!
//! A wait spins (the awaited thread is usually running and arrives within microseconds), then
//! yields (a thread sharing this core may be the one awaited), then sleeps: on a [`Signal`] that
//! the thread making the condition true notifies, or in short naps when nobody notifies (another
//! MPI rank's counter, a rarely awaited one). [`WaitPolicy`] says how long each phase lasts;
//! a [`Waiter`] keeps what one thread learned from its earlier waits.
//!
//! ## The sleep handshake
//!
//! A notifier must not pay a system call per notification, so it wakes only when someone
//! announced that it sleeps; the danger is the store-buffering race between "I am going to
//! sleep" and "does anyone sleep?":
//!
//! ```text
//! waiter                                     notifier
//!   sleepers += 1                   (A)        make the condition true   (C)
//!   fence(SeqCst)                   (W)        fence(SeqCst)             (N)
//!   seen = word (Acquire)                      sleepers != 0 ?           (D)
//!   condition? -> leave                          word += 1 (Release); wake all
//!   futex_wait(word, seen)
//! ```
//!
//! The two SeqCst fences are ordered one way or the other. If W comes first, D reads A's
//! increment (or a later value of the counter, which includes it: the counter changes only by
//! read-modify-writes, and we take ours back only after leaving), so the notifier bumps the word
//! and wakes: a `seen` from before the bump makes the futex wait return at once or be woken;
//! a `seen` from the bump on synchronises with it (Release/Acquire), so C is visible and the
//! waiter leaves. If N comes first, the condition check after W reads C (or later). Either way
//! a waiter never sleeps past a notification. Without the fences each side could read the other's
//! old value (a store may sit in a store buffer while the same thread loads): the notifier sees
//! no sleeper and the waiter sees no condition, and the waiter sleeps forever. SeqCst loads and
//! stores alone do not settle it when the condition check is an Acquire load (it is not in the
//! SeqCst order), which is why the fences carry the argument; loom checks it with them
//! (`runtime/tests/loom.rs`: loom models `fence(SeqCst)` exactly, and the futex as a condition
//! variable, so a lost wake-up is a deadlock it reports).
//!
//! The condition must stay true once made true until the waiter has seen it (an episode word
//! is rewritten only two episodes later, a job is taken only by the worker that waits for it).

use crate::shim::{AtomicU32, Futex, Ordering, fence, spin_hint, yield_now};

/// How long a waiting thread spins and yields before it sleeps.
///
/// ```
/// let quick = mbsp::WaitPolicy::new(100, 2); // spin 100 pauses, yield twice, then sleep
/// assert_eq!((quick.spins, quick.yields), (100, 2));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaitPolicy {
    /// Busy-wait iterations (each one a CPU pause hint) before yielding.
    pub spins: u32,
    /// `sched_yield` calls before sleeping on a futex.
    pub yields: u32,
}

impl WaitPolicy {
    /// Spin `spins` pause hints, then yield `yields` times, then sleep.
    pub const fn new(spins: u32, yields: u32) -> Self {
        WaitPolicy { spins, yields }
    }

    /// The default for `p` runnable threads on `cores` hardware threads: spin for about 10 µs
    /// when every process has its own core (the awaited process is running and usually arrives
    /// within a few hundred nanoseconds), about 0.5 µs when oversubscribed (the awaited process
    /// probably needs this core); then yield up to 100 (resp. 50) times; then sleep.
    pub fn for_load(p: usize, cores: usize) -> Self {
        if p <= cores {
            Self::from_budget(std::time::Duration::from_micros(10), 100)
        } else {
            Self::from_budget(std::time::Duration::from_nanos(500), 50)
        }
    }

    /// Spin for about `spin` (converted to iterations with this machine's measured cost of one
    /// pause hint), then yield `yields` times.
    pub fn from_budget(spin: std::time::Duration, yields: u32) -> Self {
        let spins = (spin.as_nanos() as f64 / pause_ns()).ceil();
        WaitPolicy {
            spins: spins.clamp(1.0, 1e6) as u32,
            yields,
        }
    }
}

/// The cost of one `spin_loop` hint on this machine, measured once (a pause takes 1 ns on some
/// x86 cores and 30+ ns on others, so iteration counts must be calibrated).
fn pause_ns() -> f64 {
    static COST: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *COST.get_or_init(|| {
        let n = 4000;
        let t = std::time::Instant::now();
        for _ in 0..n {
            std::hint::spin_loop();
        }
        (t.elapsed().as_nanos() as f64 / n as f64).max(0.5)
    })
}

/// A wait gave up because its stop condition (the run was aborted, the team shuts down) turned
/// true.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aborted;

/// What waiters sleep on: a futex word, bumped (and woken) by notifiers only while someone
/// sleeps (module documentation).
pub(crate) struct Signal {
    futex: Futex,
    sleepers: AtomicU32,
}

impl Signal {
    pub(crate) fn new() -> Self {
        Signal {
            futex: Futex::new(),
            sleepers: AtomicU32::new(0),
        }
    }

    /// Wake whoever sleeps on this signal: call right after the store that makes a waiter's
    /// condition (or stop condition) true. Returns whether someone was asleep (or about to be).
    #[inline]
    pub(crate) fn notify(&self) -> bool {
        // N of the handshake: orders the caller's store before the sleepers check.
        fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::Relaxed) == 0 {
            return false;
        }
        self.futex.bump();
        self.futex.wake_all();
        true
    }

    /// Sleep until `ready` or `stop` (the last phase of a wait).
    #[cold]
    fn sleep<T>(
        &self,
        mut ready: impl FnMut() -> Option<T>,
        stop: impl Fn() -> bool,
    ) -> Result<T, Aborted> {
        self.sleepers.fetch_add(1, Ordering::Relaxed);
        // W of the handshake: orders the announcement before every check below.
        fence(Ordering::SeqCst);
        let r = loop {
            let seen = self.futex.load();
            if let Some(v) = ready() {
                break Ok(v);
            }
            if stop() {
                break Err(Aborted);
            }
            self.futex.wait(seen);
        };
        self.sleepers.fetch_sub(1, Ordering::Relaxed);
        r
    }
}

/// Where a wait sleeps once it has spun and yielded.
#[derive(Clone, Copy)]
pub(crate) enum Sleep<'a> {
    /// On a signal that the thread making the condition true notifies.
    On(&'a Signal),
    /// In naps of 20 µs (nobody notifies: the condition is another rank's counter, or one
    /// awaited only on failure paths).
    Naps,
    /// On a signal, counted while asleep in a shared counter that the threads making the stop
    /// condition true read ([`Signal::sleep_counted`]).
    Counted(&'a Signal, &'a AtomicU32),
}

/// How long a wait that follows a notification which woke someone keeps spinning and yielding
/// before it sleeps: longer than a woken thread takes to run again (tens of microseconds, more
/// when its core was idle), so that two processes do not keep waking each other up (below).
#[cfg(not(feature = "loom"))]
const WAKE_PATIENCE: std::time::Duration = std::time::Duration::from_micros(500);

/// The smallest adaptive spin budget.
const MIN_SPINS: u32 = 8;

/// One thread's waiting state: its adaptive spin budget, and whether its next wait is for a
/// thread it has just woken.
///
/// The budget adapts: a wait that ends while spinning lets it grow back towards the policy's
/// maximum; a wait that had to yield or sleep halves it. So a thread whose partners are
/// descheduled (oversubscription, a noisy machine) soon stops burning its time slice on
/// spinning, and returns to spinning once partners arrive promptly again.
///
/// A thread that has just woken a sleeper ([`Waiter::woke`]) is patient in its next wait: after
/// its spins it keeps yielding, as long as yields are brief (nobody else wants the core), until
/// [`WAKE_PATIENCE`] has passed, before it sleeps. Without that, two processes syncing back to
/// back after a long wait can stay in a slow mode: the one that slept is woken by the other,
/// which then waits for it in the next superstep for longer than its spin and yield budget (a
/// wake-up takes tens of microseconds) and goes to sleep itself, to be woken by the first, and
/// so on, every superstep costing a wake-up (issue 25 saw 30-160 µs per sync for whole passes
/// of 1000 syncs; `runtime/examples/sync_after_sleep.rs` with a short policy shows it).
#[derive(Debug)]
pub(crate) struct Waiter {
    spins: u32,
    patient: bool,
}

impl Waiter {
    /// A waiter with the full spin budget.
    pub(crate) const fn new() -> Self {
        Waiter {
            spins: u32::MAX,
            patient: false,
        }
    }

    /// Record a notification that woke someone (the next wait is probably for it).
    #[inline]
    pub(crate) fn woke(&mut self) {
        self.patient = true;
    }

    /// Wait as `policy` says until `ready` returns a value; give up with [`Aborted`] once
    /// `stop` is true (checked from the yield phase on). `ready` must load what it checks with
    /// (at least) Acquire ordering; the notifier of `sleep` must notify after making `ready` or
    /// `stop` true.
    #[inline]
    pub(crate) fn wait<T>(
        &mut self,
        policy: WaitPolicy,
        sleep: Sleep<'_>,
        mut ready: impl FnMut() -> Option<T>,
        stop: impl Fn() -> bool,
    ) -> Result<T, Aborted> {
        let spins = self.spins.min(policy.spins);
        for _ in 0..spins {
            if let Some(v) = ready() {
                self.spins = (spins + spins / 8 + 1).min(policy.spins);
                self.patient = false;
                return Ok(v);
            }
            spin_hint();
        }
        self.spins = (spins / 2).max(MIN_SPINS.min(policy.spins));
        self.slow(policy, sleep, ready, stop)
    }

    /// The yield and sleep phases of [`wait`](Self::wait).
    #[inline(never)]
    fn slow<T>(
        &mut self,
        policy: WaitPolicy,
        sleep: Sleep<'_>,
        mut ready: impl FnMut() -> Option<T>,
        stop: impl Fn() -> bool,
    ) -> Result<T, Aborted> {
        let patience = Patience::new(std::mem::take(&mut self.patient));
        let mut yields = 0u32;
        loop {
            if let Some(v) = ready() {
                return Ok(v);
            }
            if stop() {
                return Err(Aborted);
            }
            if yields >= policy.yields && !patience.lasts() {
                break;
            }
            if !yield_briefly() {
                break;
            }
            yields = yields.saturating_add(1);
        }
        match sleep {
            Sleep::On(signal) => signal.sleep(ready, stop),
            Sleep::Counted(signal, count) => signal.sleep_counted(count, ready, stop),
            Sleep::Naps => loop {
                if let Some(v) = ready() {
                    return Ok(v);
                }
                if stop() {
                    return Err(Aborted);
                }
                nap();
            },
        }
    }
}

/// Wait once, with the policy's full spin budget (see [`Waiter::wait`]).
#[inline]
pub(crate) fn wait_until<T>(
    policy: WaitPolicy,
    sleep: Sleep<'_>,
    ready: impl FnMut() -> Option<T>,
    stop: impl Fn() -> bool,
) -> Result<T, Aborted> {
    Waiter::new().wait(policy, sleep, ready, stop)
}

/// The deadline of a patient wait's yield phase (none under loom, which has no clock: there the
/// policy's yields alone bound it).
struct Patience {
    #[cfg(not(feature = "loom"))]
    until: Option<std::time::Instant>,
}

impl Patience {
    fn new(patient: bool) -> Self {
        #[cfg(feature = "loom")]
        {
            let _ = patient;
            Patience {}
        }
        #[cfg(not(feature = "loom"))]
        Patience {
            until: patient.then(|| std::time::Instant::now() + WAKE_PATIENCE),
        }
    }

    fn lasts(&self) -> bool {
        #[cfg(feature = "loom")]
        {
            false
        }
        #[cfg(not(feature = "loom"))]
        self.until.is_some_and(|t| std::time::Instant::now() < t)
    }
}

/// Yield the core; false if that took long enough (≥ 20 µs) that another thread must have run
/// a time slice — then the machine is busy with other work, and sleeping until woken is cheaper
/// than yielding again (each further yield may cost a whole slice of a competing thread).
#[inline]
fn yield_briefly() -> bool {
    #[cfg(feature = "loom")]
    {
        yield_now();
        true
    }
    #[cfg(not(feature = "loom"))]
    {
        let t = std::time::Instant::now();
        yield_now();
        t.elapsed() < std::time::Duration::from_micros(20)
    }
}

/// Sleep a little where nobody will wake us.
fn nap() {
    #[cfg(feature = "loom")]
    yield_now();
    #[cfg(not(feature = "loom"))]
    std::thread::sleep(std::time::Duration::from_micros(20));
}

impl Signal {
    /// The second half of [`notify`](Self::notify), for a caller that made several waiters'
    /// conditions true and then issued one `fence(SeqCst)` (N of the handshake) for all of them.
    /// Returns whether someone was asleep (or about to be).
    #[inline]
    pub(crate) fn wake_if_sleeping(&self) -> bool {
        if self.sleepers.load(Ordering::Relaxed) == 0 {
            return false;
        }
        self.futex.bump();
        self.futex.wake_all();
        true
    }

    /// [`sleep`](Self::sleep), counted in `count` as well while asleep: a thread that makes the
    /// stop condition true for waiters it does not know (all sleeping on their own signals)
    /// runs the notifier's side of the handshake on `count` (its store, `fence(SeqCst)`, a
    /// load of `count`) and wakes every signal with sleepers only if the count is not zero.
    #[cold]
    fn sleep_counted<T>(
        &self,
        count: &AtomicU32,
        ready: impl FnMut() -> Option<T>,
        stop: impl Fn() -> bool,
    ) -> Result<T, Aborted> {
        // A of the handshake for `count` (W is the fence in `sleep`).
        count.fetch_add(1, Ordering::Relaxed);
        let r = self.sleep(ready, stop);
        count.fetch_sub(1, Ordering::Relaxed);
        r
    }
}
