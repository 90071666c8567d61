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

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Round trips per batch: long enough that the clock's cost is negligible, short enough that
/// a batch rarely contains a preemption.
const TRIPS: u64 = 256;
/// Batches per probe; the fastest is the probe's result (a batch that was preempted or that
/// waited for the partner to be scheduled is slower, never faster).
const BATCHES: u64 = 8;
/// The probe gives up after this long (a machine so busy that the partner thread does not run
/// has a cause of its own in the watch: other processes' CPU time).
const DEADLINE: Duration = Duration::from_millis(20);

/// One word on a cache line of its own (two lines, against adjacent-line prefetching).
#[repr(align(128))]
struct Line(AtomicU64);

/// Nanoseconds for one round trip of a cache line between two threads (one writes a number,
/// the other answers with the same number in its own line, the first waits for it): the
/// fastest mean over a few short batches. `None` when this process may use fewer than two CPUs,
/// or when the two threads did not complete the probe within 20 ms (they are not running
/// at the same time).
///
/// The threads are not bound: the scheduler puts two spinning threads on two idle CPUs, which
/// is where the processes of a run go. Call it when the measurement's own threads are idle
/// (between its rounds).
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
    let (ping, pong) = (Line(AtomicU64::new(0)), Line(AtomicU64::new(0)));
    // u64::MAX in `ping` tells the partner to stop.
    const STOP: u64 = u64::MAX;
    let start = Instant::now();
    let late = || start.elapsed() > DEADLINE;
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut seen = 0;
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
        let mut best = f64::INFINITY;
        let mut n = 0u64;
        'probe: for _ in 0..BATCHES {
            let t = Instant::now();
            for _ in 0..TRIPS {
                n += 1;
                ping.0.store(n, Ordering::Release);
                let mut spins = 0u32;
                while pong.0.load(Ordering::Acquire) != n {
                    std::hint::spin_loop();
                    spins = spins.wrapping_add(1);
                    if spins.is_multiple_of(1024) && late() {
                        best = f64::INFINITY;
                        break 'probe;
                    }
                }
            }
            best = best.min(t.elapsed().as_secs_f64() * 1e9 / TRIPS as f64);
            if late() {
                break;
            }
        }
        ping.0.store(STOP, Ordering::Release);
        best.is_finite().then_some(best)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
