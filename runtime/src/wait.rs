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
    /// Keep yielding after a yield that took long (another thread ran meanwhile, or the
    /// hypervisor took this virtual CPU away) instead of going to sleep at once. Right when
    /// every process has a core of its own: a slow yield then means this thread was preempted,
    /// not that the awaited process needs this core, and sleeping would make that process pay
    /// a wake-up (milliseconds on a virtual machine whose idle CPUs halt) when it arrives.
    pub yield_through_preemption: bool,
}

impl WaitPolicy {
    /// Spin `spins` pause hints, then yield `yields` times, then sleep.
    pub const fn new(spins: u32, yields: u32) -> Self {
        WaitPolicy {
            spins,
            yields,
            yield_through_preemption: false,
        }
    }

    /// The default for `p` runnable threads on `cores` hardware threads. When every process
    /// has its own core: spin for about 10 µs (the awaited process is running and usually
    /// arrives within a few hundred nanoseconds), then yield up to 2000 times (a millisecond or
    /// two) even if a yield was slow ([`yield_through_preemption`](Self::yield_through_preemption):
    /// the awaited process was probably preempted and comes back soon), then sleep. When
    /// oversubscribed: spin for about 0.5 µs (the awaited process probably needs this core),
    /// yield up to 50 times while yields are brief, then sleep.
    pub fn for_load(p: usize, cores: usize) -> Self {
        if p <= cores {
            WaitPolicy {
                yield_through_preemption: true,
                ..Self::from_budget(std::time::Duration::from_micros(10), 2000)
            }
        } else {
            Self::from_budget(std::time::Duration::from_nanos(500), 50)
        }
    }

    /// The policy of a lazy sync's waits (for records and acknowledgements from a few named
    /// processes) in a run that waits as this one says, `oversubscribed` when it has more
    /// processes than cores. It yields through preemption: on an oversubscribed machine every
    /// yield is slow (another thread runs), and sleeping at the first one makes each sender
    /// pay a wake-up (a system call, and the context switch the yield would have made anyway);
    /// the yield phase stays bounded by [`yields`](Self::yields). And where processes outnumber
    /// cores it hardly spins: the awaited sender most likely needs this core, and a spin only
    /// delays its turn (`mbsp-bench lazy`, docs/benchmarks.md).
    pub(crate) fn for_lazy_waits(self, oversubscribed: bool) -> Self {
        WaitPolicy {
            spins: if oversubscribed {
                self.spins.min(LAZY_SPINS_OVERSUBSCRIBED)
            } else {
                self.spins
            },
            yield_through_preemption: true,
            ..self
        }
    }

    /// Spin for about `spin` (converted to iterations with this machine's measured cost of one
    /// pause hint), then yield `yields` times.
    pub fn from_budget(spin: std::time::Duration, yields: u32) -> Self {
        let spins = (spin.as_nanos() as f64 / pause_ns()).ceil();
        WaitPolicy::new(spins.clamp(1.0, 1e6) as u32, yields)
    }
}

/// The spin budget of a lazy wait in an oversubscribed run ([`WaitPolicy::for_lazy_waits`]):
/// one look before yielding.
const LAZY_SPINS_OVERSUBSCRIBED: u32 = 1;

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
        self.notify_fenced()
    }

    /// [`notify`](Self::notify) for a caller that has issued the handshake's fence (N) itself,
    /// after every store that makes a waiter's condition true: several notifications (and
    /// other handshakes' checks) share one fence.
    #[inline]
    pub(crate) fn notify_fenced(&self) -> bool {
        if self.sleepers.load(Ordering::Relaxed) == 0 {
            return false;
        }
        self.futex.bump();
        self.futex.wake_all();
        true
    }

    /// Whether someone sleeps on this signal, or was woken and has not run since: a sleeper
    /// counts itself out only once it runs again. A hint (Relaxed): it orders nothing.
    #[inline]
    pub(crate) fn sleeping(&self) -> bool {
        self.sleepers.load(Ordering::Relaxed) != 0
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
/// before it sleeps, once the woken thread is running again: a little longer than a thread that
/// has just been scheduled takes to reach its next sync.
#[cfg(not(loom))]
const WAKE_PATIENCE: std::time::Duration = std::time::Duration::from_micros(500);

/// How long such a wait keeps yielding at most while a thread it woke has not run yet. A woken
/// thread whose core was idle may take milliseconds to run on a virtual machine (the hypervisor
/// must schedule the halted virtual CPU again); a waiter that slept meanwhile would need such a
/// wake-up itself (below).
#[cfg(not(loom))]
const WAKE_PATIENCE_CAP: std::time::Duration = std::time::Duration::from_millis(20);

/// The smallest adaptive spin budget, in iterations.
const MIN_SPINS: u32 = 8;

/// The smallest adaptive spin budget as a fraction of the policy's: a partner that is running
/// arrives within about a microsecond (a cache-line transfer and the rest of its sync), so a
/// budget learned from descheduled partners must not fall below that, or every sync of a run of
/// short supersteps would pay a yield.
const MIN_SPINS_DIVISOR: u32 = 8;

/// One thread's waiting state: its adaptive spin budget, and whether its next wait is for a
/// thread it has just woken.
///
/// The budget adapts: a wait that had to yield or sleep halves it (down to about a microsecond
/// of spinning, [`MIN_SPINS_DIVISOR`]), and a wait that ends while spinning doubles it back
/// towards the policy's maximum. So a thread whose partners are descheduled (oversubscription,
/// a noisy machine) soon stops burning its time slice on spinning, and what it learned lasts only
/// as many waits as it took to learn once partners arrive promptly again.
///
/// A thread that has just woken a sleeper ([`Waiter::woke`]) is patient in its next wait: after
/// its spins it keeps yielding while a thread it woke has not run yet (up to
/// [`WAKE_PATIENCE_CAP`]), and then, as long as yields are brief (nobody else wants the core),
/// until [`WAKE_PATIENCE`] has passed, before it sleeps. Without that, two processes syncing back to back after a long
/// wait can stay in a slow mode: the one that slept is woken by the other, which then waits for
/// it in the next superstep for longer than its patience (a wake-up can take hundreds of
/// microseconds on a virtual machine) and goes to sleep itself, to be woken by the first, and so
/// on, every superstep costing a wake-up, for whole passes of syncs
/// (`runtime/examples/sync_after_sleep.rs` shows how a pass recovers; docs/benchmarks.md has
/// the figures).
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
    /// `stop` true. `waking` says whether a thread this one woke (since its last wait) has not
    /// run yet: a patient wait keeps yielding while it is true (see [`Waiter`]).
    #[inline]
    pub(crate) fn wait<T>(
        &mut self,
        policy: WaitPolicy,
        sleep: Sleep<'_>,
        mut ready: impl FnMut() -> Option<T>,
        stop: impl Fn() -> bool,
        waking: impl Fn() -> bool,
    ) -> Result<T, Aborted> {
        let spins = self.spins.min(policy.spins);
        for _ in 0..spins {
            if let Some(v) = ready() {
                self.spins = spins.saturating_mul(2).min(policy.spins);
                self.patient = false;
                return Ok(v);
            }
            spin_hint();
        }
        self.spins = (spins / 2).max(min_spins(policy));
        self.slow(policy, sleep, ready, stop, waking)
    }

    /// The yield and sleep phases of [`wait`](Self::wait).
    #[inline(never)]
    fn slow<T>(
        &mut self,
        policy: WaitPolicy,
        sleep: Sleep<'_>,
        mut ready: impl FnMut() -> Option<T>,
        stop: impl Fn() -> bool,
        waking: impl Fn() -> bool,
    ) -> Result<T, Aborted> {
        if crate::coroutines::active() {
            // A process coroutine: the thread belongs to the other processes of its core, so
            // give it to them instead of spinning, yielding or sleeping (`coroutines.rs`).
            self.patient = false;
            return loop {
                if let Some(v) = ready() {
                    break Ok(v);
                }
                if stop() {
                    break Err(Aborted);
                }
                crate::coroutines::switch();
            };
        }
        let patience = Patience::new(std::mem::take(&mut self.patient));
        let mut yields = 0u32;
        loop {
            if let Some(v) = ready() {
                return Ok(v);
            }
            if stop() {
                return Err(Aborted);
            }
            let keep = patience.keep(&waking);
            if yields >= policy.yields && keep == Keep::No {
                break;
            }
            if policy.yield_through_preemption || keep == Keep::Yielding {
                // A slow yield would not end the phase: no need to time it.
                yield_now();
            } else if !yield_briefly() {
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

    /// The current spin budget (for tests).
    #[cfg(all(test, not(loom)))]
    fn budget(&self, policy: WaitPolicy) -> u32 {
        self.spins.min(policy.spins)
    }
}

/// The smallest spin budget a [`Waiter`] learns under `policy`.
fn min_spins(policy: WaitPolicy) -> u32 {
    (policy.spins / MIN_SPINS_DIVISOR)
        .max(MIN_SPINS)
        .min(policy.spins)
}

/// Wait once, with the policy's full spin budget (see [`Waiter::wait`]).
#[inline]
pub(crate) fn wait_until<T>(
    policy: WaitPolicy,
    sleep: Sleep<'_>,
    ready: impl FnMut() -> Option<T>,
    stop: impl Fn() -> bool,
) -> Result<T, Aborted> {
    Waiter::new().wait(policy, sleep, ready, stop, || false)
}

/// When a patient wait's yield phase began (none under loom, which has no clock: there the
/// policy's yields alone bound it).
struct Patience {
    #[cfg(not(loom))]
    since: Option<std::time::Instant>,
}

impl Patience {
    fn new(patient: bool) -> Self {
        #[cfg(loom)]
        {
            let _ = patient;
            Patience {}
        }
        #[cfg(not(loom))]
        Patience {
            since: patient.then(std::time::Instant::now),
        }
    }

    /// Whether the wait should keep yielding; `waking` as in [`Waiter::wait`].
    fn keep(&self, waking: impl Fn() -> bool) -> Keep {
        #[cfg(loom)]
        {
            let _ = waking;
            Keep::No
        }
        #[cfg(not(loom))]
        self.since
            .map_or(Keep::No, |t| patience_keeps(t.elapsed(), waking))
    }
}

/// What a patient wait does after its policy's yields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
// Under loom (no clock) a wait is never patient.
#[cfg_attr(loom, allow(dead_code))]
enum Keep {
    /// Sleep.
    No,
    /// Yield while yields are brief (nobody else wants the core), then sleep.
    WhileBrief,
    /// Yield even if other threads run meanwhile: a thread this one woke has not run yet, and
    /// sleeping would make its arrival wait for a wake-up of this one in turn. On a busy
    /// machine a woken thread may wait milliseconds for a core, and each such wake-up would
    /// cost that again.
    Yielding,
}

/// What a patient wait that has yielded for `elapsed` does: it keeps yielding for
/// [`WAKE_PATIENCE`], and whatever the machine does while a thread it woke has not run yet,
/// for up to [`WAKE_PATIENCE_CAP`].
#[cfg(not(loom))]
fn patience_keeps(elapsed: std::time::Duration, waking: impl FnOnce() -> bool) -> Keep {
    if elapsed < WAKE_PATIENCE_CAP && waking() {
        Keep::Yielding
    } else if elapsed < WAKE_PATIENCE {
        Keep::WhileBrief
    } else {
        Keep::No
    }
}

/// Yield the core; false if that took long enough (≥ 20 µs) that another thread must have run
/// a time slice — then the machine is busy with other work, and sleeping until woken is cheaper
/// than yielding again (each further yield may cost a whole slice of a competing thread).
#[inline]
fn yield_briefly() -> bool {
    #[cfg(loom)]
    {
        yield_now();
        true
    }
    #[cfg(not(loom))]
    {
        let t = std::time::Instant::now();
        yield_now();
        t.elapsed() < std::time::Duration::from_micros(20)
    }
}

/// Sleep a little where nobody will wake us.
fn nap() {
    #[cfg(loom)]
    yield_now();
    #[cfg(not(loom))]
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::time::Duration;

    /// A wait whose condition turns true at the `after`-th check (1: at once).
    fn wait_checks(w: &mut Waiter, policy: WaitPolicy, after: u32) {
        let checks = Cell::new(0);
        let ready = || {
            checks.set(checks.get() + 1);
            (checks.get() >= after).then_some(())
        };
        w.wait(policy, Sleep::Naps, ready, || false, || false)
            .unwrap();
    }

    /// Waits that outlast the spin budget shrink it, but not below an eighth of the policy's;
    /// prompt waits then restore it within three waits, not tens.
    #[test]
    fn a_learned_short_budget_lasts_only_a_few_prompt_waits() {
        let policy = WaitPolicy::new(400, 0);
        let mut w = Waiter::new();
        assert_eq!(w.budget(policy), 400);
        for _ in 0..20 {
            // Ready at the first check of the slow phase: no yield, no sleep.
            let budget = w.budget(policy);
            wait_checks(&mut w, policy, budget + 1);
        }
        assert_eq!(w.budget(policy), 50);
        let mut prompt = 0;
        while w.budget(policy) < 400 {
            wait_checks(&mut w, policy, 1);
            prompt += 1;
        }
        assert_eq!(prompt, 3);
    }

    /// A policy with fewer spins than the smallest budget keeps its own.
    #[test]
    fn a_short_policy_is_its_own_floor() {
        let policy = WaitPolicy::new(5, 0);
        let mut w = Waiter::new();
        wait_checks(&mut w, policy, 10);
        assert_eq!(w.budget(policy), 5);
        assert_eq!(min_spins(WaitPolicy::new(0, 0)), 0);
        assert_eq!(min_spins(WaitPolicy::new(60, 0)), MIN_SPINS);
        assert_eq!(min_spins(WaitPolicy::new(1000, 0)), 125);
    }

    /// A patient wait yields (while yields are brief) for `WAKE_PATIENCE`, and whatever the
    /// machine does while the woken thread has not run, for up to `WAKE_PATIENCE_CAP`.
    #[test]
    fn patience_lasts_while_the_woken_thread_has_not_run() {
        let short = WAKE_PATIENCE / 2;
        let long = WAKE_PATIENCE + (WAKE_PATIENCE_CAP - WAKE_PATIENCE) / 2;
        assert_eq!(patience_keeps(short, || false), Keep::WhileBrief);
        assert_eq!(patience_keeps(short, || true), Keep::Yielding);
        assert_eq!(patience_keeps(long, || false), Keep::No);
        assert_eq!(patience_keeps(long, || true), Keep::Yielding);
        assert_eq!(patience_keeps(WAKE_PATIENCE_CAP, || true), Keep::No);
        let later = WAKE_PATIENCE_CAP + Duration::from_secs(1);
        assert_eq!(patience_keeps(later, || true), Keep::No);
    }

    /// The patience is consumed by the wait after the wake-up, and a prompt wait clears it.
    #[test]
    fn patience_is_for_the_next_slow_wait_only() {
        let policy = WaitPolicy::new(4, 0);
        let mut w = Waiter::new();
        w.woke();
        wait_checks(&mut w, policy, 1);
        assert!(!w.patient);
        w.woke();
        wait_checks(&mut w, policy, 10);
        assert!(!w.patient);
    }
}
