//! `mbsp-bench owned`: communicable memory (owned messages), against a memcpy measured in the
//! same run.
//!
//! * Hand-off: two processes hand a 16 MiB `Vec<u8>` back and forth, one superstep per hand-off
//!   (`move_owned` of the one received, `send_owned` of it to the other, `sync`): the time per
//!   superstep next to one memcpy of 16 MiB (the copy an ordinary message would need at least),
//!   an ordinary `send` of the same 16 MiB + sync + `hpmove`, and the empty sync.
//! * Steady state: supersteps in which each of two processes takes a buffer from its pool,
//!   fills it, hands it to the other with an ordinary one-word message beside it, then moves
//!   out what it received and recycles it: the allocations per superstep (counted by this
//!   program's allocator, per process thread) and the resident size of the program before and
//!   after.

use crate::alloc_count::allocations;
use crate::stats::{Samples, ns, timed};
use mbsp_tools::{Error, Result};
use serde_json::json;
use std::time::Duration;

/// Options of `mbsp-bench owned`.
#[derive(Clone, Debug)]
pub struct Options {
    /// Samples per figure (the median is reported).
    pub samples: usize,
    /// Time budget of one sample.
    pub sample_time: Duration,
    /// Bytes of the handed-off buffer.
    pub bytes: usize,
    /// Supersteps of the steady-state loop (after its warm-up).
    pub steps: usize,
    /// Print JSON instead of text.
    pub json: bool,
    /// Also write the figures as CSV to this file.
    pub csv: Option<std::path::PathBuf>,
}

impl Options {
    /// The full benchmark (a few seconds).
    pub fn full() -> Self {
        Options {
            samples: 7,
            sample_time: Duration::from_millis(100),
            bytes: 16 << 20,
            steps: 100_000,
            json: false,
            csv: None,
        }
    }

    /// A smoke-test sized run (numbers are not meaningful).
    pub fn quick() -> Self {
        Options {
            samples: 3,
            sample_time: Duration::from_millis(5),
            bytes: 1 << 20,
            steps: 1_000,
            json: false,
            csv: None,
        }
    }
}

/// How a superstep of the hand-off benchmark moves the buffer.
#[derive(Clone, Copy, PartialEq)]
enum Way {
    /// `send_owned` and `move_owned`: no copy.
    Owned,
    /// `send` (one copy into the outbox) and `hpmove` (read in place).
    Send,
    /// Nothing: the empty sync.
    Empty,
}

/// Nanoseconds per superstep of two processes that each hand the other a buffer of `bytes`.
fn handoff(way: Way, bytes: usize, iters: usize, samples: usize) -> Vec<f64> {
    mbsp::run(2, |ctx| {
        let other = 1 - ctx.pid();
        let mut mine = vec![ctx.pid() as u8 + 1; bytes];
        match way {
            Way::Owned => {
                // The first hand-off, so that every superstep has a buffer to pass on.
                ctx.send_owned(other, &[], std::mem::take(&mut mine))?;
                let times = timed(samples, iters, || {
                    ctx.sync()?;
                    let got = ctx.move_owned::<u8>()?.expect("a buffer").payload;
                    ctx.send_owned(other, &[], got)
                })?;
                ctx.sync()?;
                let last = ctx.move_owned::<u8>()?.expect("a buffer").payload;
                assert_eq!(last.len(), bytes, "the buffer came through whole");
                Ok(times)
            }
            Way::Send => timed(samples, iters, || {
                ctx.send(other, &[], &mine)?;
                ctx.sync()?;
                let m = ctx.hpmove()?.expect("a message");
                assert_eq!(m.payload.len(), bytes);
                Ok(())
            }),
            Way::Empty => timed(samples, iters, || ctx.sync()),
        }
    })
    .expect("benchmark run")
    .swap_remove(0)
}

/// Pick an iteration count that makes one sample last about `budget`, then sample.
fn figure(o: &Options, measure: impl Fn(usize, usize) -> Vec<f64>) -> Samples {
    let probe = measure(4, 1)[0].max(1.0);
    let iters = ((o.sample_time.as_nanos() as f64 / probe) as usize).clamp(4, 10_000_000);
    Samples(measure(iters, o.samples))
}

/// What the steady-state loop measured.
struct Steady {
    steps: usize,
    /// Allocations of both processes' threads during the measured supersteps.
    allocations: u64,
    /// Resident bytes of the program after the warm-up and at the end.
    rss_before: Option<u64>,
    rss_after: Option<u64>,
}

/// Elements (`f64`) of each buffer of the steady-state loop.
const STEADY_LEN: usize = 1024;

/// The steady-state loop: `warm` supersteps, then `steps` counted ones.
fn steady(warm: usize, steps: usize) -> Steady {
    let per_proc = mbsp::run(2, |ctx| {
        let (me, other) = (ctx.pid(), 1 - ctx.pid());
        let (mut counted, mut rss_before) = (0, None);
        for step in 0..warm + steps {
            if step == warm {
                ctx.sync()?; // both warmed up before either reads the resident size
                rss_before = resident_bytes();
                counted = allocations();
            }
            let mut v = ctx.buffer::<f64>(STEADY_LEN)?;
            v.resize(STEADY_LEN, (me + step) as f64);
            ctx.send_owned(other, &[], v)?;
            ctx.send_pod(other, &(), &[step as u64])?;
            ctx.sync()?;
            let got = ctx.move_owned::<f64>()?.expect("a buffer").payload;
            assert_eq!(got[STEADY_LEN - 1], (other + step) as f64);
            ctx.recycle(got);
            assert_eq!(
                ctx.hpmove()?.expect("a word").payload_as::<u64>()[0],
                step as u64
            );
        }
        let allocated = allocations() - counted;
        ctx.sync()?;
        Ok((allocated, rss_before, resident_bytes()))
    })
    .expect("benchmark run");
    Steady {
        steps,
        allocations: per_proc.iter().map(|r| r.0).sum(),
        rss_before: per_proc[0].1,
        rss_after: per_proc[0].2,
    }
}

/// This program's resident set size in bytes (Linux; `None` elsewhere).
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kib << 10)
}

fn mib(b: Option<u64>) -> String {
    b.map_or("?".into(), |b| {
        format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
    })
}

/// Run the benchmark and print its figures.
pub fn run(o: &Options) -> Result<()> {
    if let Some(path) = &o.csv {
        crate::spmv_bench::check_output("--csv", path)?;
    }
    if !o.json {
        println!("mbsp-bench owned: {}", crate::machine::describe());
        println!(
            "{} samples per figure; shown: median [min–max]; ratios of medians measured in this \
             run\n",
            o.samples
        );
    }
    let bytes = o.bytes;
    let copy = figure(o, |iters, samples| {
        crate::core_bench::memcpy(1, bytes, iters, samples)
            .into_iter()
            .map(|gbs| bytes as f64 / gbs)
            .collect()
    });
    let owned = figure(o, |i, s| handoff(Way::Owned, bytes, i, s));
    let send = figure(o, |i, s| handoff(Way::Send, bytes, i, s));
    let empty = figure(o, |i, s| handoff(Way::Empty, bytes, i, s));
    let ratio = owned.median() / copy.median();
    let warm = (o.steps / 100).max(10);
    let st = steady(warm, o.steps);
    let per_step = st.allocations as f64 / st.steps as f64;
    if let Some(path) = &o.csv {
        write_csv(
            path,
            &[
                ("handoff", &owned),
                ("memcpy", &copy),
                ("send_sync_hpmove", &send),
                ("empty_sync", &empty),
            ],
            &st,
        )
        .map_err(|e| Error::io("--csv").with_source(e))?;
    }
    if o.json {
        let j = json!({
            "machine": crate::machine::describe(),
            "samples": o.samples,
            "bytes": bytes,
            "handoff_ns": owned.median(),
            "handoff_ns_min": owned.range().0,
            "handoff_ns_max": owned.range().1,
            "memcpy_ns": copy.median(),
            "handoff_over_memcpy": ratio,
            "send_sync_ns": send.median(),
            "empty_sync_ns": empty.median(),
            "steady": {
                "supersteps": st.steps,
                "buffer_bytes": STEADY_LEN * 8,
                "allocations": st.allocations,
                "allocations_per_superstep": per_step,
                "resident_bytes_before": st.rss_before,
                "resident_bytes_after": st.rss_after,
            },
        });
        println!("{j:#}");
        return Ok(());
    }
    println!(
        "hand-off of a {} MiB buffer between 2 processes (time per superstep):",
        bytes >> 20
    );
    println!(
        "  {:<44} {}",
        "owned: move_owned + send_owned + sync",
        owned.show(ns)
    );
    println!(
        "  {:<44} {}",
        "memcpy of the buffer (1 thread)",
        copy.show(ns)
    );
    println!(
        "  {:<44} {}",
        "ordinary: send + sync + hpmove",
        send.show(ns)
    );
    println!("  {:<44} {}", "empty sync", empty.show(ns));
    if bytes == 16 << 20 {
        println!(
            "  owned / memcpy {ratio:.4}; target <= 0.05: {}",
            crate::core_bench::verdict(ratio <= 0.05)
        );
    } else {
        println!("  owned / memcpy {ratio:.4} (the target, <= 0.05, is for 16 MiB)");
    }
    println!(
        "\nsteady state: {} supersteps after {warm} of warm-up, 2 processes each handing over a \
         {} KiB buffer from its pool and a one-word message, recycling what they receive",
        st.steps,
        (STEADY_LEN * 8) >> 10
    );
    println!(
        "  allocations: {} ({per_step:.4} per superstep); resident size {} after the warm-up, {} \
         at the end",
        st.allocations,
        mib(st.rss_before),
        mib(st.rss_after)
    );
    println!(
        "  target: no allocation per superstep: {}",
        crate::core_bench::verdict(st.allocations == 0)
    );
    Ok(())
}

/// The figures as CSV: the hand-off table (ns per superstep: median, min, max) and the steady
/// state (allocations, resident bytes before and after), one line per figure.
fn write_csv(
    path: &std::path::Path,
    handoff: &[(&str, &Samples)],
    st: &Steady,
) -> std::io::Result<()> {
    use std::io::Write;
    crate::whole_file::write(path, |f| {
        writeln!(f, "figure,unit,median,min,max")?;
        for (name, x) in handoff {
            let (lo, hi) = x.range();
            writeln!(f, "{name},ns,{},{lo},{hi}", x.median())?;
        }
        // A value once, in all three columns (empty where the platform does not tell).
        let one = |f: &mut dyn Write, name: &str, unit: &str, v: Option<u64>| {
            let v = v.map(|v| v.to_string()).unwrap_or_default();
            writeln!(f, "{name},{unit},{v},{v},{v}")
        };
        one(f, "steady_supersteps", "count", Some(st.steps as u64))?;
        one(f, "steady_allocations", "count", Some(st.allocations))?;
        one(f, "steady_resident_before", "bytes", st.rss_before)?;
        one(f, "steady_resident_after", "bytes", st.rss_after)?;
        Ok(())
    })
}
