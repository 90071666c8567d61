//! How long two CPUs take to hand one cache line back and forth: the floor of every sync and
//! every small message between two processes, and a figure that can change under a running
//! measurement without any other sign.
//!
//! On a virtual machine the hypervisor decides which physical cores the virtual CPUs run on,
//! and it moves them: two virtual CPUs may share one physical core's caches for a while (a line
//! changes hands in tens of nanoseconds) and then sit on separate cores or sockets (hundreds).
//! Nothing in `/proc` shows it — no load, no steal, the same clock — yet every sync time moves
//! with it. [`round_trip_ns`] measures the round trip between two threads in a fraction of a
//! millisecond, so that a [`Watch`](crate::machine_state::Watch) can take it at every round
//! and say when it changed.
//!
//! The two threads are bound to the same two CPUs at every probe ([`probe_pair`]: two cores of
//! one package), so that on a machine of several packages the probe does not read the
//! scheduler's choice of a near or a far pair as a change of the machine.

use mbsp_topology::{Binder, Machine};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Round trips per batch: long enough that the clock's cost is negligible, short enough that
/// a batch rarely contains a preemption.
const TRIPS: u64 = 256;
/// Batches per probe; the fastest is the probe's result (a batch that was preempted or that
/// waited for the partner to be scheduled is slower, never faster).
const BATCHES: u64 = 8;
/// The probe gives up after this long once both threads run (a machine so busy that the
/// partner thread does not keep running has a cause of its own in the watch: other processes'
/// CPU time).
const DEADLINE: Duration = Duration::from_millis(20);
/// How long the two threads may take to start on their CPUs: on a virtual machine an idle
/// virtual CPU that a thread is bound to may take milliseconds to be scheduled again.
const STARTUP: Duration = Duration::from_millis(100);
/// In `pong` until the partner runs on its CPU.
const NOT_READY: u64 = u64::MAX;

/// One word on a cache line of its own (two lines, against adjacent-line prefetching).
#[repr(align(128))]
struct Line(AtomicU64);

/// The OS CPUs the probe's two threads run on: the first PU of each of the first two cores of
/// the first package with two cores that `allowed` (the CPUs this process may use; `None`:
/// all) leaves; else any two allowed PUs (two hyperthreads of one core); `None` when fewer
/// than two are allowed.
///
/// ```
/// use mbsp_tools::line_exchange::probe_pair;
/// let m = mbsp_topology::Machine::synthetic("package:2 core:2 pu:2").unwrap().machine;
/// assert_eq!(probe_pair(&m, None), Some([0, 2])); // two cores of package 0
/// assert_eq!(probe_pair(&m, Some(&[3, 5, 6])), Some([5, 6])); // package 1's two cores
/// assert_eq!(probe_pair(&m, Some(&[0, 1])), Some([0, 1])); // one core's two PUs
/// assert_eq!(probe_pair(&m, Some(&[4])), None);
/// ```
pub fn probe_pair(m: &Machine, allowed: Option<&[u32]>) -> Option<[u32; 2]> {
    let ok = |os: u32| allowed.is_none_or(|a| a.contains(&os));
    // The first allowed PU of every core, by package.
    let mut firsts: Vec<(usize, u32)> = Vec::new();
    for core in m.cores() {
        if let Some(os) = core
            .pus
            .iter()
            .map(|&u| m.pus()[u].os_index)
            .find(|&os| ok(os))
        {
            firsts.push((core.package, os));
        }
    }
    for (i, &(package, a)) in firsts.iter().enumerate() {
        if let Some(&(_, b)) = firsts[i + 1..].iter().find(|(q, _)| *q == package) {
            return Some([a, b]);
        }
    }
    let mut any = m.pus().iter().map(|u| u.os_index).filter(|&os| ok(os));
    Some([any.next()?, any.next()?])
}

/// The binder and the pair of the probe's threads on this machine, found once; `None`:
/// unbound (binding off by `MBSP_AFFINITY=none`, a machine that is not this one, or no pair).
fn bound_pair() -> Option<&'static (Binder, [u32; 2])> {
    static PAIR: OnceLock<Option<(Binder, [u32; 2])>> = OnceLock::new();
    PAIR.get_or_init(|| {
        if std::env::var("MBSP_AFFINITY").is_ok_and(|v| v.trim() == "none") {
            return None;
        }
        let loaded = Machine::current().ok()?;
        let binder = Binder::new(&loaded);
        if !binder.applies() {
            return None;
        }
        let allowed = binder.thread_cpus();
        let pair = probe_pair(&loaded.machine, allowed.as_deref())?;
        Some((binder, pair))
    })
    .as_ref()
}

/// Nanoseconds for one round trip of a cache line between two threads (one writes a number,
/// the other answers with the same number in its own line, the first waits for it): the
/// fastest mean over a few short batches. `None` when this process may use fewer than two CPUs,
/// when the partner did not start within 100 ms, or when the two threads did not complete one
/// batch within 20 ms of it (they are not running at the same time).
///
/// The two threads are bound to [`probe_pair`]'s CPUs where bindings apply here (both threads
/// are the probe's own: the caller's binding is left alone). Call it when the measurement's own
/// threads are idle (between its rounds).
///
/// ```
/// if let Some(ns) = mbsp_tools::line_exchange::round_trip_ns() {
///     assert!(ns > 0.0 && ns < 1e6, "{ns}");
/// }
/// ```
pub fn round_trip_ns() -> Option<f64> {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return None;
    }
    let (ping, pong) = (Line(AtomicU64::new(0)), Line(AtomicU64::new(NOT_READY)));
    // u64::MAX in `ping` tells the partner to stop.
    const STOP: u64 = u64::MAX;
    let bind = |k: usize| {
        if let Some((binder, pair)) = bound_pair() {
            binder.bind_thread_cpus(&[pair[k]]);
        }
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            bind(1);
            let mut seen = 0;
            pong.0.store(seen, Ordering::Release);
            loop {
                let v = ping.0.load(Ordering::Acquire);
                if v == STOP {
                    return;
                }
                if v != seen {
                    seen = v;
                    pong.0.store(v, Ordering::Release);
                } else {
                    std::hint::spin_loop();
                }
            }
        });
        // This side runs on a thread of its own too, so the caller keeps its binding.
        let ping_side = s.spawn(|| {
            bind(0);
            let start = Instant::now();
            while pong.0.load(Ordering::Acquire) == NOT_READY {
                if start.elapsed() > STARTUP {
                    return f64::INFINITY;
                }
                std::thread::yield_now();
            }
            let start = Instant::now();
            ping_loop(&ping, &pong, &|| start.elapsed() > DEADLINE)
        });
        let best = ping_side.join().unwrap_or(f64::INFINITY);
        ping.0.store(STOP, Ordering::Release);
        best.is_finite().then_some(best)
    })
}

/// The pinging side of [`round_trip_ns`]: the fastest completed batch's mean round trip, ns;
/// infinity when `late` turned true before any batch completed.
fn ping_loop(ping: &Line, pong: &Line, late: &dyn Fn() -> bool) -> f64 {
    let mut best = f64::INFINITY;
    let mut n = 0u64;
    for _ in 0..BATCHES {
        let t = Instant::now();
        for _ in 0..TRIPS {
            n += 1;
            ping.0.store(n, Ordering::Release);
            let mut spins = 0u32;
            while pong.0.load(Ordering::Acquire) != n {
                std::hint::spin_loop();
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(1024) && late() {
                    // The partner stopped running: this batch says nothing.
                    return best;
                }
            }
        }
        best = best.min(t.elapsed().as_secs_f64() * 1e9 / TRIPS as f64);
        if late() {
            break;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_leaves_the_callers_binding_alone() {
        let Ok(loaded) = Machine::current() else {
            return; // no machine tree here: nothing is bound either
        };
        let binder = Binder::new(&loaded);
        let before = binder.thread_cpus();
        let _ = round_trip_ns();
        assert_eq!(binder.thread_cpus(), before);
    }

    #[test]
    fn a_probe_is_a_plausible_latency() {
        // `None` is an honest answer on one CPU or when the test harness keeps both busy.
        for _ in 0..3 {
            if let Some(ns) = round_trip_ns() {
                // Between a few nanoseconds (two hyperthreads of one core) and the order of a
                // context switch (the partner shared the probing thread's CPU).
                assert!(ns > 1.0 && ns < 1e5, "{ns} ns");
            }
        }
    }
}
