//! What else the machine was doing while a measurement ran: CPU time taken by other
//! processes, time stolen by the hypervisor, and the clock frequency, from Linux's `/proc` and
//! `/sys` — so that a timing table can say when the machine was too busy for its numbers to be
//! trusted, and why.
//!
//! A [`Watch`] takes a [`Snapshot`] when it starts and whenever [`Watch::mark`] is called (once
//! per round of a measurement); [`Watch::state`] turns them into a [`MachineState`]: the mean
//! number of CPUs other processes kept busy, the stolen fraction, the frequency range, the
//! worst round, the range of a cache line's round trip between two CPUs, and a plain verdict
//! ([`MachineState::causes`]).
//!
//! Other processes' CPU time is the machine's busy time (`/proc/stat`: user, nice, system,
//! irq, softirq) less this process's own (`/proc/self/stat`: utime, stime, all its threads,
//! and cutime, cstime: the children it has waited for, such as the processes a benchmark runs
//! its program in), both in clock ticks. Where `/proc` cannot be read (not Linux) the state is unknown and says
//! so; a measurement is then not called quiet.
//!
//! The round trip ([`line_exchange`](crate::line_exchange)) is taken at the start and at every
//! mark. It catches what the counters cannot: on a virtual machine the hypervisor moves the
//! virtual CPUs between physical cores, and a sync between two processes then takes several
//! times longer or shorter with no other process running, no steal and the same clock.
//!
//! So does a fixed loop of local work ([`local_work_us`]), timed at the same moments: a virtual
//! CPU that shares its physical core with a busy neighbour computes at half speed or less, with
//! the same clock, no steal counted and the same line round trip, and every figure of the
//! measurement (local kernels, a run's start, a sync's own instructions) slows with it.

use serde_json::{Value, json};
use std::time::Instant;

/// Other processes' mean CPU use (in CPUs) above which the machine is called busy.
pub const BUSY_CPUS: f64 = 0.1;
/// Stolen fraction of the CPUs' time above which the machine is called busy.
pub const MAX_STEAL: f64 = 0.02;
/// Frequency ratio (highest over lowest seen) above which the clock is called unstable.
pub const MAX_FREQ_RATIO: f64 = 1.05;
/// Shortest watch whose CPU counters are judged: `/proc/stat` counts in clock ticks (a
/// hundredth of a second per CPU), so over a shorter run one stray tick of another process or
/// of steal reads as a large fraction.
pub const MIN_JUDGED_SECONDS: f64 = 0.5;
/// Ratio of the slowest to the fastest cache-line round trip between two CPUs seen at the
/// watch's marks above which the machine is called unsteady: on a steady machine the probe
/// repeats within a third or so, while a move of virtual CPUs changes it several times over.
pub const MAX_LINE_RATIO: f64 = 1.5;
/// Most candidate states (fastest probes) [`Watch::steady_rounds`] tries per kind of probe.
const MAX_ANCHORS: usize = 64;
/// Fewest rounds that [`Watch::steady_rounds`] keeps: what a verdict between two
/// configurations needs (`mbsp affinity`).
pub const MIN_STEADY_ROUNDS: usize = 4;
/// Ratio of the slowest to the fastest time of the fixed loop of local work
/// ([`local_work_us`]) seen at the watch's marks above which the machine is called unsteady:
/// on a steady CPU the loop repeats within a few percent.
pub const MAX_WORK_RATIO: f64 = 1.3;

/// Microseconds a fixed loop of local work takes on the calling thread: the fastest of five
/// runs of 20 000 dependent multiply-adds (each through a compiler barrier, so that the loop
/// is a chain of the same instructions on every machine and build). About 25-60 us each.
pub fn local_work_us() -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        let mut x: u64 = 1;
        for _ in 0..20_000 {
            x = std::hint::black_box(
                x.wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407),
            );
        }
        best = best.min(t.elapsed().as_secs_f64() * 1e6);
    }
    best
}

/// Whether a run whose cache-line round trip between two CPUs lay in `run` (ns, fastest and
/// slowest) saw the machine in another state than a measurement that saw `then` (a parameter
/// file's record, [`mbsp::params::measured_line_ns`]): the two ranges lie apart by more than
/// [`MAX_LINE_RATIO`]. Then the phrase that says so, with both ranges.
///
/// ```
/// use mbsp_tools::machine_state::other_state;
/// assert_eq!(other_state((95.0, 103.0), (90.0, 120.0)), None);
/// let moved = other_state((95.0, 103.0), (387.0, 467.0)).unwrap();
/// assert!(moved.contains("95-103 ns") && moved.contains("387-467 ns"), "{moved}");
/// ```
pub fn other_state(then: (f64, f64), run: (f64, f64)) -> Option<String> {
    let apart = (run.0 / then.1).max(then.0 / run.1);
    (then.1 > 0.0 && run.1 > 0.0 && apart > MAX_LINE_RATIO).then(|| {
        format!(
            "a cache line's round trip between two CPUs took {:.0}-{:.0} ns while they were \
             measured and {:.0}-{:.0} ns in this run (the machine is in another state: on a \
             virtual machine the hypervisor moved its virtual CPUs)",
            then.0, then.1, run.0, run.1
        )
    })
}

/// The machine's counters at one moment.
#[derive(Clone, Debug)]
pub struct Snapshot {
    at: Instant,
    /// Ticks over all CPUs: (busy, steal, total) from `/proc/stat`'s `cpu` line.
    cpu: Option<(u64, u64, u64)>,
    /// This process's ticks (utime + stime).
    own: Option<u64>,
    /// The current frequency of each CPU, MHz (cpufreq, else `/proc/cpuinfo`).
    freqs: Vec<f64>,
    /// A cache line's round trip between two CPUs, ns (taken by a [`Watch`] only).
    line_ns: Option<f64>,
    /// The fixed loop of local work, us ([`local_work_us`]; taken by a [`Watch`] only).
    work_us: Option<f64>,
}

/// The `cpu` line of `/proc/stat` as (busy, steal, total) ticks.
fn parse_stat(text: &str) -> Option<(u64, u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice: inside user/nice]
    let at = |i: usize| f.get(i).copied().unwrap_or(0);
    let busy = at(0) + at(1) + at(2) + at(5) + at(6);
    let steal = at(7);
    let total = busy + at(3) + at(4) + steal;
    Some((busy, steal, total))
}

/// utime + stime of a `/proc/<pid>/stat` line (fields 14 and 15, after the command name,
/// which may hold spaces and parentheses: counted from the last `)`).
fn parse_self_stat(text: &str) -> Option<u64> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): utime is field 14, index 11 here; stime, cutime and
    // cstime follow.
    f.get(11..15)?
        .iter()
        .map(|x| x.parse::<u64>().ok())
        .sum::<Option<u64>>()
}

/// The frequencies, MHz: every CPU's cpufreq `scaling_cur_freq`, else `/proc/cpuinfo`'s
/// `cpu MHz` lines (on virtual machines often a constant: then it shows no change).
fn frequencies() -> Vec<f64> {
    let mut out = Vec::new();
    for i in 0.. {
        let f = format!("/sys/devices/system/cpu/cpu{i}/cpufreq/scaling_cur_freq");
        match std::fs::read_to_string(&f) {
            Ok(s) => match s.trim().parse::<f64>() {
                Ok(khz) => out.push(khz / 1000.0),
                Err(_) => break,
            },
            Err(_) => break,
        }
    }
    if out.is_empty()
        && let Ok(text) = std::fs::read_to_string("/proc/cpuinfo")
    {
        out = parse_cpuinfo(&text);
    }
    out
}

/// The `cpu MHz` values of `/proc/cpuinfo`.
fn parse_cpuinfo(text: &str) -> Vec<f64> {
    text.lines()
        .filter(|l| l.starts_with("cpu MHz"))
        .filter_map(|l| l.split(':').nth(1)?.trim().parse().ok())
        .collect()
}

impl Snapshot {
    /// The counters now.
    pub fn now() -> Snapshot {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        Snapshot {
            at: Instant::now(),
            cpu: read("/proc/stat").as_deref().and_then(parse_stat),
            own: read("/proc/self/stat").as_deref().and_then(parse_self_stat),
            freqs: frequencies(),
            line_ns: None,
            work_us: None,
        }
    }

    /// [`now`](Self::now), a cache line's round trip between two CPUs
    /// ([`round_trip_ns`](crate::line_exchange::round_trip_ns): a few milliseconds at most) and
    /// the fixed loop of local work ([`local_work_us`]: a few tenths of a millisecond).
    pub fn probed() -> Snapshot {
        Snapshot::with_probes(crate::line_exchange::round_trip_ns(), Some(local_work_us()))
    }

    /// [`now`](Self::now) with the probes' figures given: a cache line's round trip, ns, and
    /// the loop of local work, us — for a measurement that probes in a way of its own, and
    /// for a test that plays a machine changing state.
    ///
    /// ```
    /// use mbsp_tools::machine_state::{Snapshot, Watch};
    /// let mut w = Watch::starting(Snapshot::with_probes(Some(100.0), Some(22.0)));
    /// w.mark_with(Snapshot::with_probes(Some(400.0), Some(22.0)));
    /// assert_eq!(w.state().line_ns, Some((100.0, 400.0)));
    /// assert!(w.state().changed_state());
    /// ```
    pub fn with_probes(line_ns: Option<f64>, work_us: Option<f64>) -> Snapshot {
        Snapshot {
            line_ns,
            work_us,
            ..Snapshot::now()
        }
    }
}

/// One interval between two snapshots: other processes' CPUs, stolen fraction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    /// Seconds.
    pub seconds: f64,
    /// Mean number of CPUs other processes kept busy.
    pub others_cpus: f64,
    /// Fraction of all CPUs' time stolen by the hypervisor.
    pub steal: f64,
}

/// The counters' ticks from one snapshot to another: the machine's busy, stolen and total
/// ticks over all CPUs, this process's own, and the wall time.
#[derive(Clone, Copy, Debug, Default)]
struct Ticks {
    busy: u64,
    steal: u64,
    total: u64,
    own: u64,
    seconds: f64,
}

impl Ticks {
    /// The ticks from `a` to `b`, if the counters could be read at both.
    fn between(a: &Snapshot, b: &Snapshot) -> Option<Ticks> {
        let ((b0, s0, t0), (b1, s1, t1)) = (a.cpu?, b.cpu?);
        let (o0, o1) = (a.own?, b.own?);
        Some(Ticks {
            busy: b1.saturating_sub(b0),
            steal: s1.saturating_sub(s0),
            total: t1.checked_sub(t0)?,
            own: o1.saturating_sub(o0),
            seconds: b.at.duration_since(a.at).as_secs_f64(),
        })
    }

    /// Both spans together (rounds that need not be adjacent).
    fn add(self, o: Ticks) -> Ticks {
        Ticks {
            busy: self.busy + o.busy,
            steal: self.steal + o.steal,
            total: self.total + o.total,
            own: self.own + o.own,
            seconds: self.seconds + o.seconds,
        }
    }

    fn interval(self) -> Interval {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        if self.total == 0 {
            return Interval {
                seconds: self.seconds,
                others_cpus: 0.0,
                steal: 0.0,
            };
        }
        // Ticks of wall time per CPU in the span: total ticks over the CPUs counted.
        let wall = self.total as f64 / cpus;
        Interval {
            seconds: self.seconds,
            others_cpus: ((self.busy as f64 - self.own as f64) / wall).max(0.0),
            steal: self.steal as f64 / self.total as f64,
        }
    }
}

/// The interval from `a` to `b`, if the counters could be read at both.
fn between(a: &Snapshot, b: &Snapshot) -> Option<Interval> {
    Ticks::between(a, b).map(Ticks::interval)
}

/// Snapshots taken through a measurement: at the start and at every [`Watch::mark`].
#[derive(Clone, Debug)]
pub struct Watch {
    snaps: Vec<Snapshot>,
}

impl Default for Watch {
    fn default() -> Self {
        Watch::start()
    }
}

impl Watch {
    /// Starts watching (the first snapshot, [`Snapshot::probed`]).
    pub fn start() -> Watch {
        Watch::starting(Snapshot::probed())
    }

    /// Starts watching from the snapshot `first` (see [`Snapshot::with_probes`]).
    pub fn starting(first: Snapshot) -> Watch {
        Watch { snaps: vec![first] }
    }

    /// Ends a round (a snapshot, [`Snapshot::probed`]): call it while the measurement's own
    /// threads are idle.
    pub fn mark(&mut self) {
        self.mark_with(Snapshot::probed());
    }

    /// Ends a round with the snapshot `s`, taken just now.
    pub fn mark_with(&mut self, s: Snapshot) {
        self.snaps.push(s);
    }

    /// The machine's state over the whole watch, with its worst round.
    pub fn state(&self) -> MachineState {
        let all: Vec<usize> = (0..self.rounds()).collect();
        self.state_of(&all)
    }

    /// Rounds marked so far.
    pub fn rounds(&self) -> usize {
        self.snaps.len() - 1
    }

    /// The machine's state over the given rounds alone (round `r` runs from the `r`-th
    /// snapshot to the next; rounds past the last mark are ignored): the counters summed over
    /// them, the probes taken at their ends. With no rounds, the start's probes alone.
    pub fn state_of(&self, rounds: &[usize]) -> MachineState {
        let spans: Vec<(&Snapshot, &Snapshot)> = rounds
            .iter()
            .filter(|&&r| r < self.rounds())
            .map(|&r| (&self.snaps[r], &self.snaps[r + 1]))
            .collect();
        let whole = spans
            .iter()
            .map(|(a, b)| Ticks::between(a, b))
            .reduce(|x, y| Some(x?.add(y?)))
            .flatten()
            .map(Ticks::interval);
        let intervals: Vec<Interval> = spans.iter().filter_map(|(a, b)| between(a, b)).collect();
        // A round shorter than a few clock ticks says nothing: the busiest of the rest.
        let worst = intervals
            .iter()
            .filter(|r| r.seconds >= 0.05)
            .copied()
            .max_by(|a, b| a.others_cpus.total_cmp(&b.others_cpus));
        let ends: Vec<&Snapshot> = if spans.is_empty() {
            vec![&self.snaps[0]]
        } else {
            spans.iter().flat_map(|&(a, b)| [a, b]).collect()
        };
        let freqs: Vec<f64> = ends.iter().flat_map(|s| s.freqs.clone()).collect();
        MachineState {
            whole,
            worst,
            rounds: intervals.len(),
            freq_mhz: range(&freqs),
            line_ns: range(&ends.iter().filter_map(|s| s.line_ns).collect::<Vec<_>>()),
            work_us: range(&ends.iter().filter_map(|s| s.work_us).collect::<Vec<_>>()),
            load: load_average(),
        }
    }

    /// The rounds taken in one state of the machine, when the watch as a whole saw it change
    /// (a cache line's round trip or the loop of local work moving by more than
    /// [`MAX_LINE_RATIO`] or [`MAX_WORK_RATIO`]): the largest set of rounds whose probes, at
    /// both ends of each, lie within those ratios of each other (ties: the faster state), if
    /// it holds at least [`MIN_STEADY_ROUNDS`] and at least half of the rounds, and not all.
    /// `None` otherwise: the watch was steady, or it found no state held for most of it.
    ///
    /// Why: on a virtual machine the hypervisor moves the virtual CPUs between states within
    /// seconds, and a sync or a put costs several times more in one than in the other. Where a
    /// measurement runs every configuration in every round, in random order, the rounds (or, if
    /// it marks after every run, the runs) of one state compare the configurations as fairly
    /// as all of them do, without the other state's figures widening every interval; the
    /// choice is made on the probes, never on the figures. A state can still change and change
    /// back between two probes: the shorter the rounds, the less of that.
    pub fn steady_rounds(&self) -> Option<Vec<usize>> {
        let n = self.rounds();
        if !self.state().changed_state() {
            return None;
        }
        let ends = |r: usize, f: fn(&Snapshot) -> Option<f64>| {
            range(
                &[&self.snaps[r], &self.snaps[r + 1]]
                    .map(f)
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>(),
            )
        };
        let line: Vec<Option<(f64, f64)>> = (0..n).map(|r| ends(r, |s| s.line_ns)).collect();
        let work: Vec<Option<(f64, f64)>> = (0..n).map(|r| ends(r, |s| s.work_us)).collect();
        // A probe kind that some round lacks (never measured, or failed), or that stayed within
        // its ratio throughout, is not judged. The candidate states of one that moved start at
        // the rounds' fastest probes: at most MAX_ANCHORS of them, spread over their order, so
        // that a measurement of many spans costs a few million comparisons, not n³ (any anchor
        // gives a set within the ratio; a nearby one, nearly the largest).
        let anchors = |v: &[Option<(f64, f64)>], ratio: f64| -> Vec<Option<f64>> {
            let mut lows: Vec<f64> = v.iter().filter_map(|x| x.map(|(lo, _)| lo)).collect();
            let (lo, hi) = range(
                &v.iter()
                    .filter_map(|x| x.map(|(_, hi)| hi))
                    .chain(lows.iter().copied())
                    .collect::<Vec<_>>(),
            )
            .unwrap_or((0.0, 0.0));
            if lows.len() < v.len() || lo <= 0.0 || hi / lo <= ratio {
                return vec![None];
            }
            lows.sort_by(f64::total_cmp);
            lows.dedup();
            let step = lows.len().div_ceil(MAX_ANCHORS);
            lows.iter().step_by(step).map(|&a| Some(a)).collect()
        };
        let within = |x: Option<(f64, f64)>, anchor: Option<f64>, ratio: f64| match (x, anchor) {
            (_, None) => true,
            (Some((lo, hi)), Some(a)) => lo >= a && hi <= a * ratio,
            (None, Some(_)) => false,
        };
        let mut best: Option<(Vec<usize>, f64, f64)> = None;
        for a in anchors(&line, MAX_LINE_RATIO) {
            for b in anchors(&work, MAX_WORK_RATIO) {
                let group: Vec<usize> = (0..n)
                    .filter(|&r| within(line[r], a, MAX_LINE_RATIO))
                    .filter(|&r| within(work[r], b, MAX_WORK_RATIO))
                    .collect();
                let key = (a.unwrap_or(0.0), b.unwrap_or(0.0));
                let better = match &best {
                    None => true,
                    Some((g, la, lb)) => {
                        group.len() > g.len()
                            || (group.len() == g.len() && (key.0, key.1) < (*la, *lb))
                    }
                };
                if better {
                    best = Some((group, key.0, key.1));
                }
            }
        }
        let (group, _, _) = best?;
        (group.len() >= MIN_STEADY_ROUNDS && 2 * group.len() >= n && group.len() < n)
            .then_some(group)
    }
}

impl Watch {
    /// [`steady_rounds`](Self::steady_rounds) for a measurement whose spans belong to groups
    /// (`group[k]`: the configuration span `k` measured): the spans of one state, if every
    /// group keeps at least half of its spans there; `None` otherwise (a configuration
    /// measured mostly in the other state would rest on too little).
    pub fn steady_spans(&self, group: &[usize]) -> Option<Vec<usize>> {
        let kept = self.steady_rounds()?;
        let groups = group.iter().copied().max().map_or(0, |g| g + 1);
        let (mut all, mut held) = (vec![0usize; groups], vec![0usize; groups]);
        for &g in group {
            all[g] += 1;
        }
        for &k in &kept {
            held[*group.get(k)?] += 1;
        }
        (0..groups).all(|g| 2 * held[g] >= all[g]).then_some(kept)
    }
}

/// The configurations (of `n`; `group[k]`: the one the watch's span `k` measured) that have
/// fewer than half of their spans among the `kept` ones: measured mostly in another state.
///
/// ```
/// use mbsp_tools::machine_state::short_of_state;
/// // Configuration 1 was measured in spans 1, 3 and 5, and only span 5 was kept.
/// assert_eq!(short_of_state(2, &[0, 1, 0, 1, 0, 1], &[0, 2, 4, 5]), [1]);
/// ```
pub fn short_of_state(n: usize, group: &[usize], kept: &[usize]) -> Vec<usize> {
    (0..n)
        .filter(|&i| {
            let all = group.iter().filter(|&&g| g == i).count();
            let held = kept.iter().filter(|&&k| group.get(k) == Some(&i)).count();
            2 * held < all
        })
        .collect()
}

/// Measurements set aside because the machine was in another state around them
/// ([`Watch::steady_spans`]): how many were kept, of how many, and the state over all of them.
#[derive(Clone, Debug, PartialEq)]
pub struct SetAside {
    /// Measurements kept.
    pub kept: usize,
    /// Measurements made.
    pub of: usize,
    /// The machine's state over all of them.
    pub whole: MachineState,
}

impl SetAside {
    /// One line for the end of a table: `{what}: the figures are of the 300 of 360 {what}
    /// taken in one state of the machine ...; the other 60 were set aside ({keep}) — over all
    /// {what}: the causes`.
    pub fn line(&self, what: &str, keep: &str) -> String {
        format!(
            "{what}: the figures are of the {} of {} {what} taken in one state of the machine \
             (by its probes before and after each); the other {} were set aside ({keep}) — over \
             all {what}: {}",
            self.kept,
            self.of,
            self.of - self.kept,
            self.whole.causes().join("; "),
        )
    }

    /// `{"kept": n, "set_aside": n, "machine_state_all": {...}}`.
    pub fn json(&self) -> Value {
        json!({
            "kept": self.kept,
            "set_aside": self.of - self.kept,
            "machine_state_all": self.whole.json(),
        })
    }
}

/// The lowest and highest of `v`, if it has any.
fn range(v: &[f64]) -> Option<(f64, f64)> {
    (!v.is_empty()).then(|| {
        (
            v.iter().copied().fold(f64::INFINITY, f64::min),
            v.iter().copied().fold(0.0, f64::max),
        )
    })
}

/// The 1-minute load average (`/proc/loadavg`), if readable.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// What the machine did during a measurement ([`Watch::state`]).
#[derive(Clone, Debug, PartialEq)]
pub struct MachineState {
    /// Over the whole measurement (`None`: the counters could not be read).
    pub whole: Option<Interval>,
    /// The round in which other processes took the most CPU.
    pub worst: Option<Interval>,
    /// Rounds watched.
    pub rounds: usize,
    /// Lowest and highest CPU frequency seen, MHz (`None`: not readable here).
    pub freq_mhz: Option<(f64, f64)>,
    /// Fastest and slowest cache-line round trip between two CPUs seen at the marks, ns
    /// (`None`: fewer than two CPUs, or never measured).
    pub line_ns: Option<(f64, f64)>,
    /// Fastest and slowest time of the fixed loop of local work seen at the marks, us
    /// ([`local_work_us`]; `None`: never measured).
    pub work_us: Option<(f64, f64)>,
    /// The 1-minute load average at the end (it counts this measurement's own threads).
    pub load: Option<f64>,
}

impl MachineState {
    /// Why the measurement is not to be trusted, one plain cause each with its figure: empty
    /// on a quiet machine.
    ///
    /// ```
    /// use mbsp_tools::machine_state::{Interval, MachineState};
    /// let busy = Interval { seconds: 10.0, others_cpus: 0.9, steal: 0.0 };
    /// let s = MachineState {
    ///     whole: Some(busy), worst: Some(busy), rounds: 5, freq_mhz: None, line_ns: None,
    ///     work_us: None, load: None,
    /// };
    /// assert_eq!(s.causes(), ["other processes kept 0.90 CPUs busy on average"]);
    /// // Quiet by the counters, but the CPUs' distance changed between rounds:
    /// let idle = Interval { others_cpus: 0.0, ..busy };
    /// let moved = MachineState { whole: Some(idle), worst: Some(idle), line_ns: Some((34.0, 230.0)), ..s };
    /// assert!(moved.causes()[0].starts_with("a cache line's round trip between two CPUs took 34-230 ns"));
    /// // Or the CPUs' speed did:
    /// let slowed = MachineState { whole: Some(idle), worst: Some(idle), work_us: Some((24.0, 55.0)), ..s };
    /// assert!(slowed.causes()[0].starts_with("a fixed loop of local work took 24-55 us"));
    /// ```
    pub fn causes(&self) -> Vec<String> {
        let mut why = Vec::new();
        let Some(w) = self.whole else {
            return vec!["the machine's CPU counters (/proc/stat) could not be read".into()];
        };
        if w.seconds < MIN_JUDGED_SECONDS {
            // Too few ticks to tell other processes or steal from a stray tick.
        } else if w.others_cpus > BUSY_CPUS {
            why.push(format!(
                "other processes kept {:.2} CPUs busy on average",
                w.others_cpus
            ));
        } else if let Some(r) = self
            .worst
            .filter(|r| r.others_cpus > 2.0 * BUSY_CPUS.max(0.25))
        {
            why.push(format!(
                "other processes kept {:.2} CPUs busy for {:.1} s of it",
                r.others_cpus, r.seconds
            ));
        }
        if w.steal > MAX_STEAL && w.seconds >= MIN_JUDGED_SECONDS {
            why.push(format!(
                "the hypervisor stole {:.1}% of the CPUs' time",
                100.0 * w.steal
            ));
        }
        if let Some((lo, hi)) = self.freq_mhz
            && lo > 0.0
            && hi / lo > MAX_FREQ_RATIO
        {
            why.push(format!("the clock varied from {lo:.0} to {hi:.0} MHz"));
        }
        why.extend(self.line_cause());
        why.extend(self.work_cause());
        why
    }

    /// The cause "the CPUs' distance changed" ([`MAX_LINE_RATIO`]), if seen.
    fn line_cause(&self) -> Option<String> {
        let (lo, hi) = self.line_ns?;
        (lo > 0.0 && hi / lo > MAX_LINE_RATIO).then(|| {
            format!(
                "a cache line's round trip between two CPUs took {lo:.0}-{hi:.0} ns across the \
                 rounds (the CPUs' distance changed: on a virtual machine the hypervisor moved \
                 its virtual CPUs); syncs and communication vary with it, streaming kernels less"
            )
        })
    }

    /// The cause "the CPUs' speed changed" ([`MAX_WORK_RATIO`]), if seen.
    fn work_cause(&self) -> Option<String> {
        let (lo, hi) = self.work_us?;
        (lo > 0.0 && hi / lo > MAX_WORK_RATIO).then(|| {
            format!(
                "a fixed loop of local work took {lo:.0}-{hi:.0} us across the rounds (the CPUs' \
                 speed changed: on a virtual machine a virtual CPU may share its core with a busy \
                 neighbour); every figure varies with it"
            )
        })
    }

    /// Whether the machine changed state during the watch: a cache line's round trip or the
    /// loop of local work moved by more than [`MAX_LINE_RATIO`] or [`MAX_WORK_RATIO`] (not
    /// other processes, steal or the clock).
    pub fn changed_state(&self) -> bool {
        self.line_cause().is_some() || self.work_cause().is_some()
    }

    /// Whether nothing was seen that makes the measurement untrustworthy.
    pub fn quiet(&self) -> bool {
        self.causes().is_empty()
    }

    /// One line for the end of a table: `machine state during the runs: quiet (...)`, or
    /// `BUSY` (or `UNSTEADY` where the only causes are the CPUs' distance or speed) with the
    /// causes.
    pub fn line(&self) -> String {
        self.line_during("the runs")
    }

    /// [`line`](Self::line), saying what the state is of: `machine state during {what}: ...`.
    pub fn line_during(&self, during: &str) -> String {
        let range = |(lo, hi): (f64, f64), unit: &str| {
            if hi - lo < 0.5 {
                format!("{hi:.0} {unit}")
            } else {
                format!("{lo:.0}-{hi:.0} {unit}")
            }
        };
        let clock = self
            .freq_mhz
            .map_or("not readable".into(), |f| range(f, "MHz"));
        let line = self
            .line_ns
            .map_or("not measured".into(), |l| range(l, "ns"));
        let work = self
            .work_us
            .map_or("not measured".into(), |w| range(w, "us"));
        let what = match self.whole {
            Some(w) if w.seconds < MIN_JUDGED_SECONDS => format!(
                "{:.2} s: too short for the CPU counters, clock {clock}, line round trip {line}, \
                 local work {work}",
                w.seconds
            ),
            Some(w) => format!(
                "other processes {:.2} CPUs, steal {:.1}%, clock {clock}, line round trip {line}, \
                 local work {work}",
                w.others_cpus,
                100.0 * w.steal
            ),
            None => "counters not readable".into(),
        };
        let causes = self.causes();
        if causes.is_empty() {
            format!("machine state during {during}: quiet ({what})")
        } else if causes.len()
            == usize::from(self.line_cause().is_some()) + usize::from(self.work_cause().is_some())
        {
            format!(
                "machine state during {during}: UNSTEADY, not to be trusted: {} ({what}); \
                 measure again, and compare only figures taken in the same rounds",
                causes.join("; ")
            )
        } else {
            format!(
                "machine state during {during}: BUSY, not to be trusted: {} ({what}); measure \
                 again when nothing else runs",
                causes.join("; ")
            )
        }
    }

    /// The state as JSON: the figures, `quiet`, and `causes`.
    pub fn json(&self) -> Value {
        let iv = |i: &Option<Interval>| {
            i.map(|i| json!({"seconds": i.seconds, "others_cpus": i.others_cpus, "steal": i.steal}))
        };
        json!({
            "quiet": self.quiet(),
            "causes": self.causes(),
            "whole": iv(&self.whole),
            "worst_round": iv(&self.worst),
            "rounds": self.rounds,
            "frequency_mhz": self.freq_mhz.map(|(lo, hi)| json!({"min": lo, "max": hi})),
            "line_round_trip_ns": self.line_ns.map(|(lo, hi)| json!({"min": lo, "max": hi})),
            "local_work_us": self.work_us.map(|(lo, hi)| json!({"min": lo, "max": hi})),
            "load_average": self.load,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(secs: f64, cpu: (u64, u64, u64), own: u64) -> Snapshot {
        Snapshot {
            at: Instant::now() + std::time::Duration::from_secs_f64(secs),
            cpu: Some(cpu),
            own: Some(own),
            freqs: vec![2000.0],
            line_ns: None,
            work_us: None,
        }
    }

    #[test]
    fn proc_files_are_parsed() {
        let stat = "cpu  100 10 20 500 5 1 2 7 0 0\ncpu0 50 5 10 250 2 0 1 3 0 0\n";
        assert_eq!(parse_stat(stat), Some((133, 7, 645)));
        let me = "4242 (my (odd) prog) R 1 2 3 4 5 6 7 8 9 10 123 45 0 0 20 0";
        assert_eq!(parse_self_stat(me), Some(168));
        // Children waited for count as this process's own.
        let parent = "4242 (bench) S 1 2 3 4 5 6 7 8 9 10 123 45 30 2 20 0";
        assert_eq!(parse_self_stat(parent), Some(200));
        assert_eq!(
            parse_cpuinfo("cpu MHz\t\t: 2999.998\nflags\t: x\n"),
            [2999.998]
        );
        assert_eq!(parse_stat("intr 1 2"), None);
    }

    #[test]
    fn other_processes_cpu_time_is_busy_time_less_ours() {
        // 2 CPUs (or however many this machine has: `between` divides by them), 100 ticks of
        // wall time each.
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
        let a = snap(0.0, (0, 0, 0), 0);
        // Every CPU busy the whole time, we used half of it: the others the other half.
        let b = snap(1.0, (100 * cpus, 0, 100 * cpus), 50 * cpus);
        let i = between(&a, &b).unwrap();
        assert!((i.others_cpus - cpus as f64 / 2.0).abs() < 1e-9, "{i:?}");
        let mut w = Watch { snaps: vec![a, b] };
        assert!(!w.state().quiet());
        // Only our own time: quiet.
        let c = snap(2.0, (150 * cpus, 0, 200 * cpus), 150 * cpus);
        w.snaps.remove(1);
        w.snaps.push(c);
        let s = w.state();
        assert!(s.whole.unwrap().others_cpus < 1e-9 && s.quiet(), "{s:?}");
        // Steal is a cause of its own.
        let d = snap(3.0, (150 * cpus, 20 * cpus, 200 * cpus), 150 * cpus);
        let s = Watch {
            snaps: vec![snap(0.0, (0, 0, 0), 0), d],
        }
        .state();
        assert_eq!(s.causes(), ["the hypervisor stole 10.0% of the CPUs' time"]);
        assert!(s.line().contains("BUSY"), "{}", s.line());
    }

    /// A watch whose snapshot `i` probed `line[i]` ns and `work[i]` us, one second apart,
    /// with idle counters.
    fn probed_watch(line: &[f64], work: &[f64]) -> Watch {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
        Watch {
            snaps: (0..line.len())
                .map(|i| Snapshot {
                    line_ns: Some(line[i]),
                    work_us: Some(work[i]),
                    ..snap(i as f64, (0, 0, 100 * cpus * i as u64), 0)
                })
                .collect(),
        }
    }

    #[test]
    fn the_rounds_of_one_state_are_found_by_their_probes() {
        // Nine rounds; the line round trip far (400 ns) at the ends of rounds 2, 3 and 4.
        let line = [
            100.0, 105.0, 98.0, 400.0, 410.0, 102.0, 99.0, 101.0, 103.0, 100.0,
        ];
        let w = probed_watch(&line, &[22.0; 10]);
        assert_eq!(w.rounds(), 9);
        assert!(!w.state().quiet());
        let kept = w.steady_rounds().unwrap();
        assert_eq!(kept, [0, 1, 5, 6, 7, 8]);
        let s = w.state_of(&kept);
        assert!(s.quiet(), "{:?}", s.causes());
        assert_eq!((s.rounds, s.line_ns), (6, Some((98.0, 105.0))));
        // All rounds: the whole watch's state, counters included.
        let whole = w.state();
        assert_eq!((whole.rounds, whole.line_ns), (9, Some((98.0, 410.0))));
        // (Each snapshot is stamped from its own `Instant::now()`: microseconds apart.)
        assert!((whole.whole.unwrap().seconds - 9.0).abs() < 0.05);
        assert!((s.whole.unwrap().seconds - 6.0).abs() < 0.05);
        // The slower state, if it holds most rounds, is the one kept (the figures are of it).
        let far = [
            400.0, 410.0, 405.0, 100.0, 420.0, 400.0, 415.0, 402.0, 100.0, 101.0,
        ];
        assert_eq!(
            probed_watch(&far, &[22.0; 10]).steady_rounds().unwrap(),
            [0, 1, 4, 5, 6]
        );
        // The loop of local work is judged the same way.
        let mut work = [22.0; 10];
        work[4] = 60.0;
        assert_eq!(
            probed_watch(&[100.0; 10], &work).steady_rounds().unwrap(),
            [0, 1, 2, 5, 6, 7, 8]
        );
        // Steady: nothing to choose. No state held for half the rounds: nothing either.
        assert_eq!(
            probed_watch(&[100.0; 10], &[22.0; 10]).steady_rounds(),
            None
        );
        assert!(
            !probed_watch(&[100.0; 10], &[22.0; 10])
                .state()
                .changed_state()
        );
        assert!(w.state().changed_state());
        let flipping = [
            100.0, 400.0, 100.0, 400.0, 100.0, 100.0, 400.0, 100.0, 400.0, 100.0,
        ];
        assert_eq!(probed_watch(&flipping, &[22.0; 10]).steady_rounds(), None);
        // Groups: each must keep at least half of its spans (rounds 2, 3, 4 set aside).
        let w = probed_watch(&line, &[22.0; 10]);
        assert_eq!(
            w.steady_spans(&[0, 1, 0, 1, 0, 1, 0, 1, 0]).unwrap().len(),
            6
        );
        assert_eq!(w.steady_spans(&[0, 0, 1, 1, 1, 2, 2, 2, 2]), None);
        // Many spans, both probes moving: the near state's spans are found among 2000.
        let line: Vec<f64> = (0..2001)
            .map(|i| {
                if i % 8 == 7 {
                    400.0
                } else {
                    100.0 + (i % 7) as f64
                }
            })
            .collect();
        let work: Vec<f64> = (0..2001)
            .map(|i| if i % 20 == 19 { 60.0 } else { 22.0 })
            .collect();
        let kept = probed_watch(&line, &work).steady_rounds().unwrap();
        let near = |i: usize| line[i] < 200.0 && work[i] < 30.0;
        assert!(kept.iter().all(|&r| near(r) && near(r + 1)));
        assert_eq!(
            kept.len(),
            (0..2000).filter(|&r| near(r) && near(r + 1)).count()
        );
        // Too few rounds for a verdict.
        assert_eq!(
            probed_watch(&[100.0, 100.0, 100.0, 400.0], &[22.0; 4]).steady_rounds(),
            None
        );
    }

    #[test]
    fn a_changed_line_round_trip_is_a_cause_of_its_own() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
        let probe = |secs: f64, ns: f64| Snapshot {
            line_ns: Some(ns),
            ..snap(secs, (0, 0, 100 * cpus * (1 + secs as u64)), 0)
        };
        // Steady within the ratio: quiet, and the range is shown.
        let steady = Watch {
            snaps: vec![probe(0.0, 200.0), probe(1.0, 240.0), probe(2.0, 290.0)],
        }
        .state();
        assert_eq!(steady.line_ns, Some((200.0, 290.0)));
        assert!(steady.quiet(), "{:?}", steady.causes());
        assert!(
            steady.line().contains("line round trip 200-290 ns"),
            "{}",
            steady.line()
        );
        // One round in another state: unsteady, said with both figures.
        let moved = Watch {
            snaps: vec![probe(0.0, 220.0), probe(1.0, 34.0), probe(2.0, 230.0)],
        }
        .state();
        let why = moved.causes();
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(why[0].contains("took 34-230 ns"), "{why:?}");
        assert!(moved.line().contains("UNSTEADY"), "{}", moved.line());
        assert_eq!(moved.json()["line_round_trip_ns"]["min"], 34.0);
        // With another cause the machine is called busy, both causes named.
        let mut busy = moved.clone();
        busy.whole = Some(Interval {
            seconds: 2.0,
            others_cpus: 0.9,
            steal: 0.0,
        });
        assert_eq!(busy.causes().len(), 2);
        assert!(busy.line().contains("BUSY"), "{}", busy.line());
        // Never measured (one CPU): no cause, and the line says so.
        let none = Watch {
            snaps: vec![snap(0.0, (0, 0, 0), 0), snap(1.0, (0, 0, 100 * cpus), 0)],
        }
        .state();
        assert_eq!(none.line_ns, None);
        assert!(
            none.line().contains("line round trip not measured"),
            "{}",
            none.line()
        );
    }

    #[test]
    fn a_changed_speed_of_local_work_is_a_cause_of_its_own() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
        let probe = |secs: f64, us: f64| Snapshot {
            line_ns: Some(210.0),
            work_us: Some(us),
            ..snap(secs, (0, 0, 100 * cpus * (1 + secs as u64)), 0)
        };
        // Within the ratio: quiet, the range shown.
        let steady = Watch {
            snaps: vec![probe(0.0, 24.0), probe(1.0, 25.5), probe(2.0, 29.0)],
        }
        .state();
        assert_eq!(steady.work_us, Some((24.0, 29.0)));
        assert!(steady.quiet(), "{:?}", steady.causes());
        assert!(
            steady.line().contains("local work 24-29 us"),
            "{}",
            steady.line()
        );
        // Half speed for a round, the line round trip unchanged: unsteady, with both figures.
        let slowed = Watch {
            snaps: vec![probe(0.0, 24.0), probe(1.0, 55.0), probe(2.0, 25.0)],
        }
        .state();
        let why = slowed.causes();
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(why[0].contains("took 24-55 us"), "{why:?}");
        assert!(slowed.line().contains("UNSTEADY"), "{}", slowed.line());
        assert_eq!(slowed.json()["local_work_us"]["max"], 55.0);
        // Both the line and the speed moved: still unsteady (not busy), both causes named.
        let both = MachineState {
            line_ns: Some((34.0, 230.0)),
            ..slowed.clone()
        };
        assert_eq!(both.causes().len(), 2);
        assert!(both.line().contains("UNSTEADY"), "{}", both.line());
        // The probe itself: positive and finite.
        let us = local_work_us();
        assert!(us > 0.0 && us.is_finite(), "{us}");
    }

    #[test]
    fn a_watch_too_short_for_the_tick_counters_is_not_judged_by_them() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
        // A fifth of a second: a few stray ticks of steal and of other processes per CPU.
        let short = Watch {
            snaps: vec![
                snap(0.0, (0, 0, 0), 0),
                snap(0.2, (3 * cpus, cpus, 20 * cpus), 0),
            ],
        }
        .state();
        let w = short.whole.unwrap();
        assert!(w.steal > MAX_STEAL && w.others_cpus > BUSY_CPUS, "{w:?}");
        assert!(short.quiet(), "{:?}", short.causes());
        assert!(
            short.line().contains("too short for the CPU counters"),
            "{}",
            short.line()
        );
        // The same fractions over two seconds are causes.
        let long = Watch {
            snaps: vec![
                snap(0.0, (0, 0, 0), 0),
                snap(2.0, (30 * cpus, 10 * cpus, 200 * cpus), 0),
            ],
        }
        .state();
        assert_eq!(long.causes().len(), 2, "{:?}", long.causes());
    }

    #[test]
    fn this_machine_can_be_watched() {
        let mut w = Watch::start();
        w.mark();
        let s = w.state();
        assert_eq!(s.rounds, 1);
        // Linux CI: the counters are readable.
        if cfg!(target_os = "linux") {
            assert!(s.whole.is_some());
        }
        assert!(s.json()["causes"].is_array());
    }
}
