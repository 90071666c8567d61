//! The BSP parameters (r, g, l) of every level of the machine tree, measured the way the
//! BSPlib paper (§5.1) and BSP over InfiniBand (§4.1) do: what `mbsp params` prints and writes
//! as the JSON file the cost functions read (`MBSP_PARAMS`), and what the Python package's
//! `Machine.measure_params` returns.
//!
//! * **r** (flop/s): two stated local kernels run by every process of the level at once — a
//!   DAXPY `y += a·x` on 2048 doubles (2 flop per element, in cache) and a 48 × 48 dense
//!   matrix product `C += A·B` (2·48³ flop, i-k-j loops the compiler vectorises). `r` is the
//!   dense kernel's rate (the BSPlib paper's r is a compute-bound rate too); both are reported.
//! * **r_stream** (flop/s): the STREAM triad `a = b + s·c` on [`Options::stream_n`] doubles
//!   per array per process (far beyond the caches), every process at once: the rate of a
//!   kernel that streams its data from memory, which a compute-bound r overstates severalfold.
//!   Each pass is timed as a superstep, to the sync after it, and a level's `r_stream` is its
//!   slowest process's median (they share the memory bus unequally, and a superstep lasts as
//!   long as its slowest process); its r's are the processes' mean.
//! * **l** (seconds): the median time of an empty superstep, over many, with its confidence
//!   interval ([`crate::stats::median_interval`]).
//! * **l_reg** (seconds): the median time of a superstep that registers (or deregisters) one
//!   slot — `push_reg`, sync, `pop_reg`, sync, halved: what the registered algorithms pay to
//!   expose a buffer and withdraw it (every process checks every other's requests, then all
//!   wait at a second barrier).
//! * **g** (seconds per 8-byte word): the slope of a least-squares fit of the time of one
//!   superstep against h over full h-relations — every process sends h words and receives h
//!   words, spread evenly over the other processes — for h = 0, 512, ..., 4096, for seven ways
//!   of communicating ([`Prim`]): single-word puts (`put1`), bulk puts (`put`: one put of
//!   h/(p-1) words to each other process), bulk gets (`get`), single-word gets (`get1`: the
//!   per-request cost of buffered gets, [`LevelParams::g_get_msg`]), single-word BSMP sends
//!   (`send1`, drained by the receiver), direct gets (`direct`: MulticoreBSP's `direct_get`,
//!   copied at once, then a sync) and single-word direct gets (`direct1`: one `direct_get`
//!   call per word, the per-request cost of direct gets, [`LevelParams::g_direct_msg`]). What
//!   the gets read, its owner wrote in the superstep before (a sync
//!   earlier), as a program fetches what another process has just computed: read again
//!   unchanged, the lines would already sit in the reader's cache and the copy would be local.
//!   The fit's intercept is reported beside `l`, and its residual (root mean square of the
//!   relative errors) says how well `l + g h` describes the machine.
//! * **g_far**, **g_direct_far** (seconds per word): bulk puts and direct gets far beyond the
//!   caches: the time per word, beyond the empty superstep, of one h-relation whose data (16
//!   bytes per word of h, sent and received) is at least twice what the caches hold for a
//!   process ([`Options::far_words`]; at least [`Options::far_h`], 4 MiB per array),
//!   where every copy moves at the memory's rate: a buffered put copies each word twice
//!   (into the outbox, out of it), a direct get once, which in the caches costs about the
//!   same and beyond them does not. **cache** (bytes, [`level_cache`]): what the caches hold
//!   for one process of the level, its core's L2 and its share of the L3 (1 MiB for an L2
//!   the machine's tree does not give), the size past which a process's data is taken to be
//!   far.
//!
//! Levels ([`Where`]: one nested run inside one object of the level, the other objects idle):
//! the whole machine (one process per core), the packages (one process per package: the top
//! level of a Multi-BSP run), one package, one NUMA node, one core's hardware threads — each
//! only where it differs from the level above and has more than one child — under both
//! affinity policies (`scattered` and `compact` number the same cores differently, which
//! changes who synchronises with whom first).
//!
//! The parameter file ([`Measurement::to_json`]) keeps the whole machine's values (scattered
//! policy) as its top-level keys `r, g, g_direct, g_far, g_direct_far, cache, l, l_reg, fresh`
//! — what `Params::current()` reads —
//! and every measured level in `"levels"`, with the fits and their points, `g_msg` (the
//! one-word puts' slope through the empty superstep: the per-message g,
//! [`LevelParams::g_msg`]) and `r_stream`, and the machine's state during
//! the measurement ([`crate::machine_state`]) under `"machine_state"`.
//!
//! A fit is not a measurement to trust when its residual exceeds [`MAX_RESIDUAL`] or its
//! intercept is negative (a busy machine, or noise larger than the effect): [`Fit::doubts`]
//! says why.

use crate::error::{Classify, Error, ErrorKind, Result};
use crate::machine_state::{MachineState, SetAside, Snapshot};
use crate::preflight::{self, Need};
use crate::state_rounds::{self, Pass};
use crate::stats::{CONFIDENCE, Samples, fit_gl, median_interval, timed};
use mbsp::{Ctx, Level, Policy, Run};
use serde_json::{Value, json};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// How much to measure, and where.
///
/// ```
/// let o = mbsp_tools::params::Options::quick();
/// assert!(o.max_h < mbsp_tools::params::Options::full().max_h);
/// ```
#[derive(Clone, Debug)]
pub struct Options {
    /// Samples per point in all (the median is used), taken in [`rounds`](Self::rounds):
    /// `samples / rounds` per round, rounded up.
    pub samples: usize,
    /// Rounds: every level and policy is measured once per round, the configurations in a
    /// new random order each round, so that a change of the machine's state (a virtual
    /// machine's CPUs moved, another job) reaches all of them alike instead of the one that
    /// was being measured; each figure is then the median over the rounds (the empty
    /// superstep's, over all its samples).
    pub rounds: usize,
    /// The seed of the rounds' orders (`None`: from the clock).
    pub seed: Option<u64>,
    /// Nanoseconds one sample of a point should last (sets the repetitions).
    pub sample_ns: f64,
    /// Largest h of the h-relations, in words.
    pub max_h: usize,
    /// Steps of h from 0 to `max_h`.
    pub h_steps: usize,
    /// Doubles per array of the streaming triad (r_stream), per process.
    pub stream_n: usize,
    /// The h, in words, of the h-relations far beyond the caches (`g_far`, `g_direct_far`:
    /// their time per word), at least; see [`far_past_cache`](Self::far_past_cache).
    pub far_h: usize,
    /// Whether a level's far h-relations are taken past its processes' caches
    /// ([`level_cache`]): `far_h` raised to the power of two at which a process's data (16
    /// bytes per word of h, sent and received) is at least twice its cache (at most
    /// [`MAX_FAR_H`]). A full measurement does; a smoke run does not.
    pub far_past_cache: bool,
    /// Only these levels (names: [`Where::name`]), if given.
    pub levels: Option<Vec<String>>,
    /// A stop flag: once another thread sets it, the measurement ends within one point of one
    /// h-relation sweep (its runs abort at their next sync) with an error of kind
    /// [`Interrupted`](crate::ErrorKind::Interrupted). For callers that must end it on request
    /// (Ctrl-C in the Python package) without leaving its threads running.
    pub stop: Option<Arc<AtomicBool>>,
}

impl Options {
    /// Whether [`stop`](Self::stop) was set.
    fn stopped(&self) -> bool {
        self.stop
            .as_deref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
    }

    /// The full measurement (about 5 s per level and policy).
    pub fn full() -> Options {
        Options {
            samples: 7,
            rounds: 3,
            seed: None,
            sample_ns: 4e6,
            max_h: 4096,
            h_steps: 8,
            stream_n: 1 << 21,
            far_h: 1 << 19,
            far_past_cache: true,
            levels: None,
            stop: None,
        }
    }

    /// A smoke run (well under a second per level; the numbers are not meaningful).
    pub fn quick() -> Options {
        Options {
            samples: 3,
            rounds: 1,
            sample_ns: 1e5,
            max_h: 1024,
            h_steps: 4,
            stream_n: 1 << 14,
            far_h: 1 << 13,
            far_past_cache: false,
            ..Options::full()
        }
    }
}

impl Options {
    /// These options with the rounds' seed chosen (from the clock where none is given), so
    /// that it can be reported and the order repeated.
    pub fn seeded(&self) -> Options {
        let seed = self.seed.unwrap_or_else(|| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            now.map_or(0, |d| d.as_nanos() as u64)
        });
        Options {
            seed: Some(seed),
            ..self.clone()
        }
    }

    /// The options of one round: [`samples`](Self::samples) shared among the rounds.
    fn per_round(&self) -> Options {
        Options {
            samples: self.samples.div_ceil(self.rounds.max(1)).max(1),
            ..self.clone()
        }
    }
}

/// The largest h, in words, of the far h-relations ([`Options::far_past_cache`]): 128 MiB
/// per array, four arrays per process.
pub const MAX_FAR_H: usize = 1 << 24;

impl Options {
    /// The h, in words, of the far h-relations of a level whose processes have `cache`
    /// bytes of cache each ([`Options::far_past_cache`]).
    ///
    /// ```
    /// let o = mbsp_tools::params::Options::full();
    /// // 16.5 MiB of cache: 4 Mi words (64 MiB sent and received), twice the cache or more.
    /// assert_eq!(o.far_words(16.5 * 1048576.0), 4 << 20);
    /// assert_eq!(o.far_words(512.0 * 1024.0), o.far_h);
    /// ```
    pub fn far_words(&self, cache: f64) -> usize {
        if !self.far_past_cache {
            return self.far_h;
        }
        // 16 bytes per word against twice the cache: h >= cache / 8.
        let need = (cache / 8.0).ceil().clamp(1.0, MAX_FAR_H as f64) as usize;
        self.far_h
            .max(need.next_power_of_two())
            .min(MAX_FAR_H.max(self.far_h))
    }
}

/// The message of a measurement ended by [`Options::stop`].
pub const STOPPED: &str = "the measurement was stopped (Options::stop was set)";

/// The ways of communicating whose g is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prim {
    /// Single-word buffered puts.
    Put1,
    /// One bulk buffered put per other process.
    Put,
    /// One bulk buffered get per other process.
    Get,
    /// Single-word buffered gets.
    Get1,
    /// Single-word BSMP messages (tag size 0), moved out by the receiver.
    Send1,
    /// One bulk `direct_get` per other process, then a sync.
    Direct,
    /// Single-word `direct_get`s, then a sync.
    Direct1,
}

impl Prim {
    /// All of them, in table order.
    pub const ALL: [Prim; 7] = [
        Prim::Put1,
        Prim::Put,
        Prim::Get,
        Prim::Get1,
        Prim::Send1,
        Prim::Direct,
        Prim::Direct1,
    ];

    /// Short name (table column, JSON key suffix).
    pub fn name(self) -> &'static str {
        match self {
            Prim::Put1 => "put1",
            Prim::Put => "put",
            Prim::Get => "get",
            Prim::Get1 => "get1",
            Prim::Send1 => "send1",
            Prim::Direct => "direct",
            Prim::Direct1 => "direct1",
        }
    }
}

/// A level of the machine tree that can be measured.
///
/// ```
/// use mbsp_tools::params::Where;
/// let m = mbsp::Machine::synthetic("package:2 core:4 pu:1").unwrap().machine;
/// let levels: Vec<(&str, usize)> = Where::of(&m).into_iter().map(|(w, p)| (w.name(), p)).collect();
/// assert_eq!(levels, [("machine", 8), ("packages", 2), ("package", 4)]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Where {
    /// One process per core of the machine.
    Machine,
    /// One process per package (the top level of a Multi-BSP run: every superstep crosses
    /// the packages' link).
    Packages,
    /// One process per core of package 0.
    Package,
    /// One process per core of NUMA node 0.
    Numa,
    /// One process per hardware thread of core 0.
    Core,
}

impl Where {
    /// All of them, outermost first.
    pub const ALL: [Where; 5] = [
        Where::Machine,
        Where::Packages,
        Where::Package,
        Where::Numa,
        Where::Core,
    ];

    /// The name used in tables, JSON and `--levels`.
    pub fn name(self) -> &'static str {
        match self {
            Where::Machine => "machine",
            Where::Packages => "packages",
            Where::Package => "package",
            Where::Numa => "numa",
            Where::Core => "core",
        }
    }

    /// The levels of `m` worth measuring (more than one child, and different from the level
    /// above — but for `package`, a nested run, measured on a machine of one package too), with
    /// their process counts.
    pub fn of(m: &mbsp::Machine) -> Vec<(Where, usize)> {
        let mut out = vec![(Where::Machine, m.cores().len())];
        let pkg = m.packages().first().map_or(0, |p| p.cores.len());
        if m.packages().len() > 1 && pkg > 1 {
            out.push((Where::Packages, m.packages().len()));
        }
        // A package's cores as a nested run: on a machine of one package the same cores as
        // the machine level, but a nested run's syncs (a Multi-BSP run's lower level) cost
        // what a top-level run's do not.
        if pkg > 1 {
            out.push((Where::Package, pkg));
        }
        let numa0 = m.numas().first().map_or(0, |n| n.cores.len());
        if m.numas().len() > m.packages().len() && numa0 > 1 {
            out.push((Where::Numa, numa0));
        }
        let pus0 = m.cores().first().map_or(0, |c| c.pus.len());
        if pus0 > 1 {
            out.push((Where::Core, pus0));
        }
        out
    }

    /// Run `f` as the processes of this level under `policy`: a top-level run for the machine,
    /// else a nested run inside the first object of the level (the others idle). Returns the
    /// results of the measured run's processes.
    fn run<R, F>(self, policy: &Policy, f: F) -> mbsp::Result<Vec<R>>
    where
        R: Send,
        F: Fn(&mut Ctx) -> mbsp::Result<R> + Sync,
    {
        let (outer, inner) = match self {
            Where::Machine => return Run::per(Level::Core).policy(policy.clone()).run(f),
            Where::Packages => return Run::per(Level::Package).policy(policy.clone()).run(f),
            Where::Package => (Level::Package, Level::Core),
            Where::Numa => (Level::Numa, Level::Core),
            Where::Core => (Level::Core, Level::Pu),
        };
        let mut all = Run::per(outer).policy(policy.clone()).run(|ctx| {
            if ctx.pid() == 0 {
                ctx.run_with(Run::per(inner).policy(policy.clone()), &f)
                    .map(Some)
            } else {
                Ok(None)
            }
        })?;
        Ok(all.swap_remove(0).expect("process 0 measured"))
    }
}

/// A fit of `t = l + g h` to measured points.
///
/// ```
/// use mbsp_tools::params::Fit;
/// // A superstep of h words: 2 µs + 1 ns per word, exactly.
/// let f = Fit::of((1..5).map(|i| (512.0 * i as f64, 2e-6 + 1e-9 * 512.0 * i as f64)).collect());
/// assert!((f.g - 1e-9).abs() < 1e-15 && f.trusted());
/// ```
#[derive(Clone, Debug)]
pub struct Fit {
    /// Seconds per word.
    pub g: f64,
    /// Intercept, seconds.
    pub l: f64,
    /// Root mean square of the relative errors of the fit at the points.
    pub residual: f64,
    /// (h, seconds per superstep) as measured.
    pub points: Vec<(f64, f64)>,
}

impl Fit {
    /// The fit over the points with h > 0 (when there are two or more): the empty superstep
    /// is the level's `l`, measured on its own, and a superstep that communicates at all
    /// costs a step more (a second barrier for gets, the delivery pass for puts), so the
    /// line's intercept — reported beside `l` — is a communicating superstep's latency.
    pub fn of(points: Vec<(f64, f64)>) -> Fit {
        let nonzero: Vec<(f64, f64)> = points.iter().copied().filter(|p| p.0 > 0.0).collect();
        let fitted = if nonzero.len() >= 2 {
            &nonzero
        } else {
            &points
        };
        let (g, l) = fit_gl(fitted);
        // Time cannot fall as h grows: a negative slope is noise (an oversubscribed or busy
        // machine); the best non-negative fit is then flat, at the weighted mean.
        let (g, l) = if g >= 0.0 {
            (g, l)
        } else {
            let (sw, swt) = fitted.iter().fold((0.0, 0.0), |(a, b), &(_, t)| {
                (a + 1.0 / (t * t), b + 1.0 / t)
            });
            (0.0, swt / sw)
        };
        let ms = fitted
            .iter()
            .map(|&(h, t)| ((l + g * h - t) / t).powi(2))
            .sum::<f64>()
            / fitted.len() as f64;
        Fit {
            g,
            l,
            residual: ms.sqrt(),
            points,
        }
    }
}

/// The largest residual (root mean square of the relative errors) of a fit whose values are
/// trusted: beyond it, `l + g h` does not describe what was measured.
pub const MAX_RESIDUAL: f64 = 0.25;

impl Fit {
    /// Why this fit's values are not to be trusted, if they are not: a residual above
    /// [`MAX_RESIDUAL`], a negative intercept (a superstep cannot take negative time).
    pub fn doubts(&self) -> Vec<String> {
        let mut why = Vec::new();
        if self.residual.is_nan() || self.residual > MAX_RESIDUAL {
            why.push(format!(
                "residual {:.1}% (above {:.0}%)",
                100.0 * self.residual,
                100.0 * MAX_RESIDUAL
            ));
        }
        if self.l < 0.0 {
            why.push(format!("negative intercept {:.1} µs", self.l * 1e6));
        }
        why
    }

    /// Whether the fit is to be trusted ([`Fit::doubts`] is empty).
    pub fn trusted(&self) -> bool {
        self.doubts().is_empty()
    }
}

/// The parameters of one level under one policy.
#[derive(Clone, Debug)]
pub struct LevelParams {
    /// Which level.
    pub level: Where,
    /// `"scattered"` or `"compact"`.
    pub policy: &'static str,
    /// Processes.
    pub p: usize,
    /// DAXPY rate, flop/s (mean over the processes, all running at once).
    pub r_daxpy: f64,
    /// Dense-kernel rate, flop/s: the level's r.
    pub r_dense: f64,
    /// Streaming triad rate, flop/s (2 flops per element, all processes at once; the mean
    /// over the processes).
    pub r_stream: f64,
    /// Empty superstep, seconds (median).
    pub l: f64,
    /// The confidence interval of `l` ([`crate::stats::CONFIDENCE`]): (low, high, level).
    pub l_interval: (f64, f64, f64),
    /// A superstep that registers or deregisters, seconds (median).
    pub l_reg: f64,
    /// Bulk puts far beyond the caches, seconds per word (the slowest process's).
    pub g_far: f64,
    /// Direct gets far beyond the caches, seconds per word (the slowest process's).
    pub g_direct_far: f64,
    /// The cache one process of the level has, bytes: where its data leaves the cache,
    /// measured ([`leaves_cache`]), for the process with the least; the machine's tree's
    /// figure ([`cache_tree`](Self::cache_tree)) where the measurement saw no edge.
    pub cache: f64,
    /// What the machine's tree says one process of the level has: its L2 and its share of
    /// the L3 ([`level_cache`]). On a virtual machine the L3 is shared with cores the tree
    /// does not show.
    pub cache_tree: f64,
    /// The bulk puts `cache` was measured on, of the process with the least: (h in words,
    /// seconds per word beyond the empty superstep), h halving from the far one.
    pub ladder: Vec<(f64, f64)>,
    /// The largest h of the far h-relations, words ([`Options::far_words`]).
    pub far_h: usize,
    /// One fit per primitive, in [`Prim::ALL`] order.
    pub fits: Vec<(Prim, Fit)>,
}

impl LevelParams {
    /// One line per fit that is not to be trusted, naming the level, policy and primitive.
    pub fn doubts(&self) -> Vec<String> {
        self.fits
            .iter()
            .filter(|(_, f)| !f.trusted())
            .map(|(prim, f)| {
                format!(
                    "{} level, {}: the {} fit ({})",
                    self.level.name(),
                    self.policy,
                    prim.name(),
                    f.doubts().join(", ")
                )
            })
            .collect()
    }

    /// The fit of `prim`.
    pub fn fit(&self, prim: Prim) -> &Fit {
        &self
            .fits
            .iter()
            .find(|(q, _)| *q == prim)
            .expect("all measured")
            .1
    }

    /// The latency of a superstep that communicates at all: the bulk-put fit's intercept.
    pub fn l_comm(&self) -> f64 {
        self.fit(Prim::Put).l
    }

    /// The level's g, seconds per word: the bulk-put fit's slope, positive as the cost
    /// functions require (a flat fit is noise, and becomes tiny).
    pub fn g(&self) -> f64 {
        self.fit(Prim::Put).g.max(1e-12)
    }

    /// The level's per-message g: seconds per one-word put in a full h-relation of them,
    /// the least-squares slope of the `put1` points through the empty superstep's time
    /// `(0, l)` (positive, as [`LevelParams::g`]). The free fit's slope leaves a large
    /// intercept (the cost per put falls as h grows) that BSP's `l + h·g_msg` has no place
    /// for: that line predicted the largest h-relation measured 20% short, and
    /// `mbsp affinity`'s one-word h-relation as much.
    ///
    /// ```
    /// use mbsp_tools::params::{Fit, LevelParams, Prim, Where};
    /// let pts = vec![(0.0, 1e-7), (1000.0, 2.01e-5), (2000.0, 4.01e-5)];
    /// let fit = Fit { g: 1e-8, l: 5e-6, residual: 0.0, points: pts };
    /// let level = LevelParams {
    ///     level: Where::Machine, policy: "compact", p: 2, r_daxpy: 1e9, r_dense: 1e9,
    ///     r_stream: 1e9, l: 1e-7, l_interval: (1e-7, 1e-7, 0.95), l_reg: 2e-7, g_far: 1e-9,
    ///     g_direct_far: 1e-9, cache: 1e6, cache_tree: 1e6,
    ///     ladder: vec![], far_h: 1 << 20, fits: vec![(Prim::Put1, fit)],
    /// };
    /// assert!((level.g_msg() - 2e-8).abs() < 1e-15);
    /// ```
    pub fn g_msg(&self) -> f64 {
        let fit = self.fit(Prim::Put1);
        let (num, den) = fit
            .points
            .iter()
            .filter(|&&(h, _)| h > 0.0)
            .fold((0.0, 0.0), |(n, d), &(h, t)| {
                (n + h * (t - self.l), d + h * h)
            });
        let through_l = if den > 0.0 { num / den } else { fit.g };
        through_l.max(1e-12)
    }

    /// The level's per-request g of buffered gets: seconds per one-word `get` in a superstep
    /// of them, the `get1` fit's slope, at least [`LevelParams::g`]. A get is a request
    /// that its owner's data answers in the sync (a record, a read into the get buffer, a
    /// write), which costs more than a one-word put's record ([`LevelParams::g_msg`]).
    pub fn g_get_msg(&self) -> f64 {
        self.fit(Prim::Get1).g.max(self.g())
    }

    /// The level's g of direct gets, seconds per word (positive, as [`LevelParams::g`]).
    pub fn g_direct(&self) -> f64 {
        self.fit(Prim::Direct).g.max(1e-12)
    }

    /// The level's per-request g of direct gets: seconds per one-word `direct_get` in a
    /// superstep of them, the `direct1` fit's slope, at least [`LevelParams::g_direct`] (a
    /// request moves its word). Each call checks its arguments and the owner's sync count
    /// before it copies, which a fetch of many short runs pays per run.
    pub fn g_direct_msg(&self) -> f64 {
        self.fit(Prim::Direct1).g.max(self.g_direct())
    }

    /// The ladder as a parameter file holds it (`cache_ladder`: `[h, seconds per word]` pairs,
    /// which [`mbsp::params::Params::g_ladder`] reads).
    pub fn ladder_json(&self) -> Value {
        self.ladder.iter().map(|&(h, g)| json!([h, g])).collect()
    }

    /// The ladder as [`mbsp::params::Params::g_ladder`] holds it (empty where it is not one:
    /// more rungs than it holds, or a figure that is not positive).
    pub fn g_ladder(&self) -> mbsp::params::Ladder {
        mbsp::params::Ladder::of_h_relations(&self.ladder).unwrap_or_default()
    }

    /// The level as the parameter file holds it in `"levels"`, with the keys `Params` reads
    /// (`g` = bulk puts, `g_direct`), `fresh` (seconds per word of first touch) among them.
    pub fn to_json(&self, fresh: f64) -> Value {
        let fits: serde_json::Map<String, Value> = self
            .fits
            .iter()
            .map(|(prim, f)| {
                (
                    prim.name().to_string(),
                    json!({
                        "g": f.g, "l": f.l, "residual": f.residual, "points": f.points,
                        "trusted": f.trusted(), "doubts": f.doubts(),
                    }),
                )
            })
            .collect();
        let mut v = json!({
            "level": self.level.name(),
            "policy": self.policy,
            "p": self.p,
            "r": self.r_dense,
            "r_daxpy": self.r_daxpy,
            "r_dense": self.r_dense,
            "r_stream": self.r_stream,
            "l": self.l,
            "l_interval": {"low": self.l_interval.0, "high": self.l_interval.1,
                           "confidence": self.l_interval.2},
            "l_comm": self.l_comm(),
            "l_reg": self.l_reg,
            "g_far": self.g_far,
            "g_direct_far": self.g_direct_far,
            "cache": self.cache,
            "cache_tree": self.cache_tree,
            "cache_ladder": self.ladder_json(),
            "far_h": self.far_h,
            "g": self.g(),
            "g_direct": self.g_direct(),
            "g_direct_msg": self.g_direct_msg(),
            "g_get_msg": self.g_get_msg(),
            "g_msg": self.g_msg(),
            "fresh": fresh,
            "fits": fits,
        });
        for prim in Prim::ALL {
            v[format!("g_{}", prim.name())] = self.fit(prim).g.into();
        }
        v
    }
}

/// Flop/s of the DAXPY kernel over `reps` passes.
fn daxpy_rate(reps: usize) -> f64 {
    let n = 2048;
    let x: Vec<f64> = (0..n).map(|i| i as f64 * 1e-3).collect();
    let mut y = vec![1.0f64; n];
    let a = black_box(1.000_001);
    let t = Instant::now();
    for _ in 0..reps {
        for (y, x) in y.iter_mut().zip(black_box(&x)) {
            *y += a * x;
        }
        black_box(&mut y);
    }
    (2 * n * reps) as f64 / t.elapsed().as_secs_f64()
}

/// Flop/s of the dense kernel (48 × 48 product, i-k-j loops) over `reps` products.
fn dense_rate(reps: usize) -> f64 {
    const N: usize = 48;
    let a: Vec<f64> = (0..N * N).map(|i| (i % 7) as f64 * 0.1).collect();
    let b: Vec<f64> = (0..N * N).map(|i| (i % 5) as f64 * 0.2).collect();
    let mut c = vec![0.0f64; N * N];
    let t = Instant::now();
    for _ in 0..reps {
        let (a, b) = (black_box(&a), black_box(&b));
        for i in 0..N {
            let crow = &mut c[i * N..(i + 1) * N];
            for k in 0..N {
                let aik = a[i * N + k];
                for (c, b) in crow.iter_mut().zip(&b[k * N..(k + 1) * N]) {
                    *c += aik * b;
                }
            }
        }
        black_box(&mut c);
    }
    (2 * N * N * N * reps) as f64 / t.elapsed().as_secs_f64()
}

/// Flop/s of the STREAM triad `a = b + s·c` on arrays of `n` doubles (2 flops per element),
/// the median of `samples` passes after one untimed pass (first touch).
/// Untimed passes of the triad before its samples ([`triad_rate`]).
const TRIAD_WARMUP: usize = 3;

fn triad_rate(ctx: &mut Ctx, n: usize, samples: usize) -> mbsp::Result<f64> {
    let (mut a, b, c) = (vec![0.0f64; n], vec![1.0f64; n], vec![2.0f64; n]);
    let s = black_box(3.0);
    // Every pass is a superstep of all processes (a sync before and after): passes left to
    // drift apart overlap only in part, and a process that streams alone for a while gets the
    // whole memory bus and a rate that a superstep of all of them never sees. Each pass is
    // timed to the sync after it, so that it lasts as long as the slowest process's, as a
    // superstep does (a sync's latency is a ten-thousandth of a pass).
    let mut pass = |ctx: &mut Ctx| -> mbsp::Result<f64> {
        ctx.sync()?;
        let t = Instant::now();
        for ((a, b), c) in a.iter_mut().zip(black_box(&b)).zip(black_box(&c)) {
            *a = b + s * c;
        }
        black_box(&mut a);
        ctx.sync()?;
        Ok((2 * n) as f64 / t.elapsed().as_secs_f64())
    };
    // Untimed passes first: the first ones over freshly allocated arrays run slower (the
    // first level measured got the lowest rate of all, by up to 40%).
    for _ in 0..TRIAD_WARMUP {
        pass(ctx)?;
    }
    let mut rates = Vec::with_capacity(samples);
    for _ in 0..samples {
        rates.push(pass(ctx)?);
    }
    Ok(Samples(rates).median())
}

/// Seconds per word of writing freshly allocated memory for the first time (64 MiB).
pub fn fresh_per_word() -> f64 {
    let words = 8 << 20;
    let t = Instant::now();
    let v = vec![1u64; words];
    black_box(&v);
    t.elapsed().as_secs_f64() / words as f64
}

/// What processes that take turns on the hardware threads add to a superstep: seconds per
/// process beyond the first on a hardware thread, as threads the kernel switches between and
/// as coroutines ([`mbsp::params::Params::turn`], [`mbsp::params::Params::turn_coroutine`]),
/// and what they add more where the superstep communicates
/// ([`mbsp::params::Params::turn_comm`], [`mbsp::params::Params::turn_comm_coroutine`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Turns {
    /// The empty superstep's slope for threads, seconds.
    pub threads: f64,
    /// The empty superstep's slope for coroutines, seconds.
    pub coroutines: f64,
    /// For threads: the slope of a superstep in which every process puts one word to the next,
    /// less the empty superstep's slope and the one-word put's own cost (`g_msg`), at least 0.
    pub threads_comm: f64,
    /// [`threads_comm`](Self::threads_comm) for coroutines.
    pub coroutines_comm: f64,
    /// The points they were fitted through.
    pub points: Vec<TurnPoint>,
}

/// The supersteps of one run size in [`turn_costs`]: median seconds each.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TurnPoint {
    /// Processes per hardware thread.
    pub k: usize,
    /// The empty superstep on threads.
    pub threads: f64,
    /// The empty superstep as coroutines.
    pub coroutines: f64,
    /// The superstep of one-word puts to the next process on threads.
    pub threads_put: f64,
    /// The same as coroutines.
    pub coroutines_put: f64,
}

/// [`turn_costs`], or `None` with a warning on stderr when its runs cannot be made (a limit
/// on threads, say: the levels' parameters are worth keeping without them); a stop asked for
/// is still an error.
pub fn turns_or_warn(o: &Options, g_msg: f64) -> Result<Option<Turns>> {
    match turn_costs(o, g_msg) {
        Ok(t) => Ok(Some(t)),
        Err(e) if o.stopped() => Err(e),
        Err(e) => {
            eprintln!(
                "mbsp params: warning: the turns were not measured ({e}); the file leaves turn, \
                 turn_coroutine, turn_comm and turn_comm_coroutine out (predictions use their \
                 defaults)"
            );
            Ok(None)
        }
    }
}

/// The most processes [`turn_costs`] starts.
const TURN_MAX_P: usize = 1024;

/// Measures [`Turns`]: the empty superstep and one in which every process puts one word to the
/// next, in runs with 1, 4 and 16 processes per hardware thread of this machine (up to 1024
/// processes), on threads and as coroutines, the median of `o.samples` samples each (the two
/// supersteps' samples alternate in one run); each slope is the least-squares line through
/// its points (at least 0), and the communicating superstep's is given beyond the empty one's
/// and `g_msg` (the per-message g measured with a process per hardware thread, which the
/// profiler charges for each put on its own). Runs are interleaved, threads and coroutines in
/// turn, so that a change of the machine's state reaches both.
pub fn turn_costs(o: &Options, g_msg: f64) -> Result<Turns> {
    let hw = mbsp::nprocs().max(1);
    let ks: Vec<usize> = [1usize, 4, 16]
        .into_iter()
        .filter(|&k| k == 1 || k.saturating_mul(hw) <= TURN_MAX_P)
        .collect();
    // (empty, with puts) medians of a run of `p`.
    let point = |p: usize, coroutines: bool| -> Result<(f64, f64)> {
        // About a millisecond of syncs per sample on threads at 16 per hardware thread.
        let syncs = (200 / (p / hw).max(1)).max(10);
        let r = Run::new(p)
            .coroutines(coroutines)
            .run(|ctx| {
                let (me, p) = (ctx.pid(), ctx.nprocs());
                let word = ctx.push_reg(vec![0u64; 1])?;
                ctx.sync()?;
                for _ in 0..10 {
                    ctx.sync()?;
                }
                let n = o.samples.max(1);
                let (mut empty, mut puts) = (Vec::with_capacity(n), Vec::with_capacity(n));
                for _ in 0..n {
                    let t = Instant::now();
                    for _ in 0..syncs {
                        ctx.sync()?;
                    }
                    empty.push(t.elapsed().as_secs_f64() / syncs as f64);
                    let t = Instant::now();
                    for i in 0..syncs {
                        ctx.put((me + 1) % p, &[i as u64], &word, 0)?;
                        ctx.sync()?;
                    }
                    puts.push(t.elapsed().as_secs_f64() / syncs as f64);
                }
                Ok((Samples(empty).median(), Samples(puts).median()))
            })
            .map_err(|e| Error::run(format!("mbsp params: the turns' run of {p}: {e}")))?;
        Ok(r[0])
    };
    let mut points = Vec::with_capacity(ks.len());
    for &k in &ks {
        if o.stopped() {
            return Err(Error::run("mbsp params: stopped"));
        }
        eprintln!("mbsp params: measuring turns, {k} per hardware thread ...");
        let (threads, threads_put) = point(k * hw, false)?;
        let (coroutines, coroutines_put) = point(k * hw, true)?;
        points.push(TurnPoint {
            k,
            threads,
            coroutines,
            threads_put,
            coroutines_put,
        });
    }
    let slope = |y: &dyn Fn(&TurnPoint) -> f64| {
        let n = points.len() as f64;
        let kx = points.iter().map(|q| q.k as f64).sum::<f64>() / n;
        let ky = points.iter().map(y).sum::<f64>() / n;
        let (mut sxy, mut sxx) = (0.0, 0.0);
        for q in &points {
            sxy += (q.k as f64 - kx) * (y(q) - ky);
            sxx += (q.k as f64 - kx).powi(2);
        }
        if sxx > 0.0 { (sxy / sxx).max(0.0) } else { 0.0 }
    };
    let (threads, coroutines) = (slope(&|q| q.threads), slope(&|q| q.coroutines));
    Ok(Turns {
        threads,
        coroutines,
        threads_comm: (slope(&|q| q.threads_put) - threads - g_msg).max(0.0),
        coroutines_comm: (slope(&|q| q.coroutines_put) - coroutines - g_msg).max(0.0),
        points,
    })
}

/// What every process of a level measures; process 0's times are the level's.
#[derive(Clone)]
struct Measured {
    r_daxpy: f64,
    r_dense: f64,
    r_stream: f64,
    l: f64,
    l_interval: (f64, f64, f64),
    /// The empty superstep's samples, seconds (rounds pool them).
    l_samples: Vec<f64>,
    l_reg: f64,
    points: Vec<(Prim, Vec<(f64, f64)>)>,
    g_far: f64,
    g_direct_far: f64,
    /// The cache this process has, bytes: measured ([`leaves_cache`]), else the tree's.
    cache: f64,
    /// The bulk puts it was measured on: (h, seconds per word).
    ladder: Vec<(f64, f64)>,
}

impl Measured {
    /// One process's measurements in several rounds as one: every figure the median over the
    /// rounds (each point of each line, each rung of the ladder), the empty superstep's over
    /// all its samples, and where the data leaves the cache found again on the merged ladder
    /// (`tree`: the tree's figure where no edge shows). One round is returned as it is.
    fn merge(mut rounds: Vec<Measured>, tree: f64) -> Measured {
        if rounds.len() <= 1 {
            return rounds.pop().expect("at least one round");
        }
        let med = |f: &dyn Fn(&Measured) -> f64| {
            crate::stats::median(&rounds.iter().map(f).collect::<Vec<_>>())
        };
        // The same sizes in every round: the median of each point's times.
        let line = |get: &dyn Fn(&Measured) -> &[(f64, f64)]| -> Vec<(f64, f64)> {
            let first = get(&rounds[0]);
            (0..first.len())
                .map(|j| (first[j].0, med(&|m: &Measured| get(m)[j].1)))
                .collect()
        };
        let points = rounds[0]
            .points
            .iter()
            .enumerate()
            .map(|(i, (prim, _))| (*prim, line(&|m: &Measured| &m.points[i].1)))
            .collect();
        let ladder = line(&|m: &Measured| &m.ladder);
        let l_samples: Vec<f64> = rounds.iter().flat_map(|m| m.l_samples.clone()).collect();
        let ci = median_interval(&l_samples, CONFIDENCE).expect("at least one sample");
        Measured {
            r_daxpy: med(&|m| m.r_daxpy),
            r_dense: med(&|m| m.r_dense),
            r_stream: med(&|m| m.r_stream),
            l: ci.median,
            l_interval: (ci.lo, ci.hi, ci.level),
            l_reg: med(&|m| m.l_reg),
            g_far: med(&|m| m.g_far),
            g_direct_far: med(&|m| m.g_direct_far),
            cache: leaves_cache(&ladder).unwrap_or(tree),
            points,
            ladder,
            l_samples,
        }
    }
}

/// Sizes of bulk h-relations, halving from the far one, on which `mbsp params` finds where a
/// process's data leaves the cache ([`leaves_cache`]).
const LADDER: u32 = 7;

/// Untimed supersteps before each sample of the ladder (and of the far direct gets): the
/// rungs are interleaved, and a rung measured right after a larger one otherwise pays for
/// bringing its data back into the caches, which a program repeating one size does not.
const LADDER_WARM: usize = 3;

/// Where a process's data leaves the cache, in bytes, from bulk puts of growing h (words) and
/// their time per word: where the time per word first crosses halfway from the smallest
/// size's to the largest's (interpolated in log h), at 16 bytes per word (sent and received).
/// `None` when the largest costs less than 1.25 times the smallest per word: no cache edge
/// to see (or noise larger than it).
///
/// ```
/// use mbsp_tools::params::leaves_cache;
/// // 1 ns per word up to 2^18 words, 3 ns from 2^19: the edge halfway between, in log h.
/// let pts: Vec<(f64, f64)> =
///     (16..22).map(|k| ((1u64 << k) as f64, if k < 19 { 1e-9 } else { 3e-9 })).collect();
/// let edge = leaves_cache(&pts).unwrap();
/// assert!((edge - 16.0 * 2f64.powf(18.5)).abs() < 1.0);
/// assert_eq!(leaves_cache(&[(1.0, 1e-9), (2.0, 1.1e-9)]), None);
/// ```
pub fn leaves_cache(points: &[(f64, f64)]) -> Option<f64> {
    let (near, far) = (points.first()?.1, points.last()?.1);
    if far < 1.25 * near {
        return None;
    }
    let mid = (near + far) / 2.0;
    let i = points.iter().position(|&(_, w)| w > mid)?;
    let ((h0, w0), (h1, w1)) = (points[i - 1], points[i]);
    let frac = ((mid - w0) / (w1 - w0)).clamp(0.0, 1.0);
    Some(16.0 * (h0.ln() + frac * (h1.ln() - h0.ln())).exp())
}

/// Repetitions of one sample of a superstep of `h` words (the same on every process).
fn iters_for(o: &Options, h: usize) -> usize {
    ((o.sample_ns / (3000.0 + 40.0 * h as f64)) as usize).clamp(2, 100_000)
}

/// Median seconds per superstep in which this process communicates `h` words by `prim`, for
/// each `h` of `hs`. The samples are taken in rounds over all of `hs` (alternating direction),
/// not one `h` after another, so that a change of the machine's state (this kind of machine
/// switches between a fast and a slow one) spreads over every point instead of bending the
/// line.
///
/// Each sample runs `warm` untimed supersteps of its `h` first (at least one): where the sizes
/// span the caches, the superstep after a larger one finds the caches holding that one's data,
/// and a single untimed superstep does not bring its own back.
fn supersteps(
    ctx: &mut Ctx,
    o: &Options,
    prim: Prim,
    hs: &[usize],
    warm: usize,
) -> mbsp::Result<Vec<f64>> {
    let (me, p) = (ctx.pid(), ctx.nprocs());
    let others = (p - 1).max(1);
    let partner = |j: usize| (me + 1 + j) % p;
    let cap = hs.iter().copied().max().unwrap_or(0) + others;
    let mut src = ctx.push_reg(vec![1.0f64; cap])?;
    let dst = ctx.push_reg(vec![0.0f64; cap])?;
    ctx.sync()?;
    let words = vec![2.0f64; cap];
    let mut got = vec![0.0f64; cap];
    let mut buf = [0u8; 8];
    let mut samples = vec![Vec::with_capacity(o.samples); hs.len()];
    for round in 0..o.samples {
        for i in 0..hs.len() {
            if o.stopped() {
                // Every process reads the flag; the first to see it ends the run for all.
                return Err(ctx.abort(STOPPED));
            }
            let i = if round % 2 == 0 { i } else { hs.len() - 1 - i };
            let h = hs[i];
            // Words to or from each other process (the last may take fewer).
            let chunk = h.div_ceil(others);
            let mut stamp = 0.0f64;
            let mut step = || {
                if matches!(prim, Prim::Get | Prim::Get1 | Prim::Direct | Prim::Direct1) {
                    // Written by its owner a superstep before the others read it.
                    stamp += 1.0;
                    ctx.local_mut(&mut src)?[..h.min(cap)].fill(stamp);
                    ctx.sync()?;
                }
                match prim {
                    Prim::Put1 => {
                        for k in 0..h {
                            ctx.put(partner(k % others), &words[k..k + 1], &dst, k)?;
                        }
                    }
                    Prim::Put | Prim::Get | Prim::Direct => {
                        for j in 0..others {
                            let len = chunk.min(h.saturating_sub(j * chunk));
                            if len == 0 {
                                break;
                            }
                            let at = j * chunk;
                            match prim {
                                Prim::Put => ctx.put(partner(j), &words[..len], &dst, at)?,
                                Prim::Get => ctx.get(partner(j), &src, at..at + len, &dst, at)?,
                                // SAFETY: `src` is written by its owner only in the superstep
                                // before (the sync above separates them), and `got` is this
                                // process's own memory.
                                _ => unsafe {
                                    ctx.direct_get(partner(j), &src, at, &mut got[at..at + len])?
                                },
                            }
                        }
                    }
                    Prim::Get1 => {
                        for k in 0..h {
                            ctx.get(partner(k % others), &src, k..k + 1, &dst, k)?;
                        }
                    }
                    Prim::Direct1 => {
                        // Word k from partner k mod others, at k: every call its own request.
                        for (k, w) in got[..h].iter_mut().enumerate() {
                            // SAFETY: as the bulk direct gets above.
                            unsafe {
                                ctx.direct_get(
                                    partner(k % others),
                                    &src,
                                    k,
                                    std::slice::from_mut(w),
                                )?
                            };
                        }
                    }
                    Prim::Send1 => {
                        for (k, w) in words[..h].iter().enumerate() {
                            ctx.send(partner(k % others), &[], &w.to_ne_bytes())?;
                        }
                    }
                }
                ctx.sync()?;
                if prim == Prim::Send1 {
                    while ctx.move_message(&mut buf)?.is_some() {}
                }
                Ok(())
            };
            // `timed` runs one untimed superstep itself.
            for _ in 1..warm {
                step()?;
            }
            let ns = timed(1, iters_for(o, h), &mut step)?;
            samples[i].push(ns[0]);
        }
    }
    black_box(&got);
    ctx.pop_reg(&dst)?;
    ctx.pop_reg(&src)?;
    ctx.sync()?;
    Ok(samples
        .into_iter()
        .map(|s| Samples(s).median() * 1e-9)
        .collect())
}

/// The measurements of one process of a level.
fn measure_process(ctx: &mut Ctx, o: &Options, cache: f64) -> mbsp::Result<Measured> {
    // r: every process runs the kernels at once, lined up by a sync; the median of samples.
    let kernel_samples = o.samples.max(3);
    let reps = ((o.sample_ns / 2e3) as usize).max(4);
    // One untimed pass of each kernel first: the first level measured used to get a lower r
    // than the same placement measured later (a cold core's clock, cold caches).
    black_box((daxpy_rate(reps), dense_rate(reps / 50 + 1)));
    ctx.sync()?;
    let r_daxpy = Samples::collect(kernel_samples, || daxpy_rate(reps)).median();
    ctx.sync()?;
    let r_dense = Samples::collect(kernel_samples, || dense_rate(reps / 50 + 1)).median();
    ctx.sync()?;
    let r_stream = triad_rate(ctx, o.stream_n, kernel_samples.max(9))?;
    if o.stopped() {
        return Err(ctx.abort(STOPPED));
    }
    ctx.sync()?;
    let ls = timed(o.samples, iters_for(o, 0) * 4, || ctx.sync())?;
    let ci = median_interval(&ls, CONFIDENCE).expect("at least one sample");
    let (l, l_interval) = (ci.median * 1e-9, (ci.lo * 1e-9, ci.hi * 1e-9, ci.level));
    let l_samples: Vec<f64> = ls.iter().map(|t| t * 1e-9).collect();
    ctx.sync()?;
    let regs = timed(o.samples, iters_for(o, 0), || {
        let r = ctx.push_reg_empty::<f64>()?;
        ctx.sync()?;
        ctx.pop_reg(&r)?;
        ctx.sync()
    })?;
    let l_reg = Samples(regs).median() * 1e-9 / 2.0;
    let hs: Vec<usize> = (0..=o.h_steps).map(|i| i * o.max_h / o.h_steps).collect();
    let mut points = Vec::new();
    for prim in Prim::ALL {
        let times = supersteps(ctx, o, prim, &hs, 1)?;
        let pts = hs.iter().zip(times).map(|(&h, t)| (h as f64, t)).collect();
        points.push((prim, pts));
    }
    // Far: the time per word of one h-relation past the cache, beyond the empty superstep.
    // Not a slope between two sizes: the copies change method with size (past
    // `stream::STREAM_FROM` they stream past the caches), and a slope across the change
    // prices neither.
    // Bulk puts on a ladder of sizes up to it also find where the data leaves the cache.
    let far = o.far_words(cache).max(1);
    let ladder: Vec<usize> = (0..LADDER).rev().map(|i| (far >> i).max(1)).collect();
    let per_word = |t: f64, h: usize| ((t - l) / h as f64).max(1e-12);
    let puts: Vec<(f64, f64)> = ladder
        .iter()
        .zip(supersteps(ctx, o, Prim::Put, &ladder, LADDER_WARM)?)
        .map(|(&h, t)| (h as f64, per_word(t, h)))
        .collect();
    let g_far = puts.last().expect("a ladder").1;
    let g_direct_far = per_word(
        supersteps(ctx, o, Prim::Direct, &[far], LADDER_WARM)?[0],
        far,
    );
    Ok(Measured {
        r_daxpy,
        r_dense,
        r_stream,
        l,
        l_interval,
        l_samples,
        l_reg,
        points,
        g_far,
        g_direct_far,
        cache: leaves_cache(&puts).unwrap_or(cache),
        ladder: puts,
    })
}

/// Measures one level under one policy (`policy_name` names it in the result and in errors),
/// in `o.rounds` rounds one after another ([`measure_levels`] interleaves the rounds of
/// several).
pub fn measure_level(
    level: Where,
    policy: &Policy,
    policy_name: &'static str,
    o: &Options,
) -> Result<LevelParams> {
    let cache = level_cache(&mbsp::Machine::current().or_run()?.machine, level);
    let per = o.per_round();
    let rounds = (0..o.rounds.max(1))
        .map(|_| measure_round(level, policy, policy_name, &per, cache))
        .collect::<Result<Vec<_>>>()?;
    Ok(combine(level, policy_name, rounds, o, cache))
}

/// One round of one level under one policy: every process's measurements (`o`: one round's
/// options, [`Options::per_round`]).
fn measure_round(
    level: Where,
    policy: &Policy,
    policy_name: &'static str,
    o: &Options,
    cache: f64,
) -> Result<Vec<Measured>> {
    level
        .run(policy, |ctx| measure_process(ctx, o, cache))
        .map_err(|e| Error::from(e).context(format!("{} level, {policy_name}", level.name())))
}

/// The parameters of a level from its processes' measurements in every round (`rounds[r][i]`:
/// process `i` in round `r`; `cache`: what the tree says its processes' caches hold).
fn combine(
    level: Where,
    policy_name: &'static str,
    rounds: Vec<Vec<Measured>>,
    o: &Options,
    cache: f64,
) -> LevelParams {
    let p = rounds.first().map_or(0, Vec::len);
    let mut each: Vec<Vec<Measured>> = (0..p).map(|_| Vec::new()).collect();
    for round in rounds {
        assert_eq!(
            round.len(),
            p,
            "a level runs as many processes in every round"
        );
        for (i, m) in round.into_iter().enumerate() {
            each[i].push(m);
        }
    }
    let all: Vec<Measured> = each
        .into_iter()
        .map(|r| Measured::merge(r, cache))
        .collect();
    let mean = |f: fn(&Measured) -> f64| all.iter().map(f).sum::<f64>() / p as f64;
    let (r_daxpy, r_dense) = (mean(|m| m.r_daxpy), mean(|m| m.r_dense));
    // The slowest process's streaming rate: processes that share the memory bus do not get
    // equal shares of it, and a superstep of equal streaming work lasts as long as the one
    // with the smallest (the kernels in cache run at about the same rate everywhere).
    let r_stream = all.iter().map(|m| m.r_stream).fold(f64::INFINITY, f64::min);
    let slowest = |f: fn(&Measured) -> f64| all.iter().map(f).fold(0.0, f64::max);
    let (g_far, g_direct_far) = (slowest(|m| m.g_far), slowest(|m| m.g_direct_far));
    // The process whose data leaves its cache first.
    let least = all
        .iter()
        .min_by(|a, b| a.cache.total_cmp(&b.cache))
        .expect("a run has a process");
    let (measured_cache, ladder) = (least.cache, least.ladder.clone());
    let first = all.into_iter().next().expect("a run has a process");
    LevelParams {
        level,
        policy: policy_name,
        p,
        r_daxpy,
        r_dense,
        r_stream,
        l: first.l,
        l_interval: first.l_interval,
        l_reg: first.l_reg,
        g_far,
        g_direct_far,
        cache: measured_cache,
        cache_tree: cache,
        ladder,
        far_h: o.far_words(cache),
        fits: first
            .points
            .into_iter()
            .map(|(prim, pts)| (prim, Fit::of(pts)))
            .collect(),
    }
}

/// The parameters measured on this machine: every level asked for, under both policies.
#[derive(Clone, Debug)]
pub struct Measurement {
    /// The machine they were measured on ([`crate::machine::describe`]).
    pub machine: String,
    /// Seconds per word of writing fresh memory for the first time ([`fresh_per_word`]).
    pub fresh: f64,
    /// The levels, each under the scattered and the compact policy, in measuring order.
    pub levels: Vec<LevelParams>,
    /// What else the machine did meanwhile (`None`: not watched).
    pub state: Option<MachineState>,
    /// What processes taking turns on the hardware threads add to a superstep (`None`: not
    /// measured).
    pub turns: Option<Turns>,
    /// The rounds the levels were measured in ([`Options::rounds`]) and the seed of their
    /// orders (`None`: not known).
    pub rounds: (usize, Option<u64>),
    /// The measurements set aside, taken in another state of the machine than the ones the
    /// levels hold (`None`: none).
    pub set_aside: Option<SetAside>,
}

impl Measurement {
    /// The measurement of `levels` on this machine.
    pub fn new(levels: Vec<LevelParams>, fresh: f64) -> Measurement {
        Measurement {
            machine: crate::machine::describe(),
            fresh,
            levels,
            state: None,
            turns: None,
            rounds: (1, None),
            set_aside: None,
        }
    }

    /// The measurement with the rounds and seed of `o` ([`Options::seeded`]).
    pub fn in_rounds(mut self, o: &Options) -> Measurement {
        self.rounds = (o.rounds.max(1), o.seed);
        self
    }

    /// The measurement with the machine's state during it.
    pub fn watched(mut self, state: MachineState) -> Measurement {
        self.state = Some(state);
        self
    }

    /// The top level's per-message g ([`LevelParams::g_msg`]), or the default's where no level
    /// was measured: what [`turn_costs`] takes a put's own cost to be.
    pub fn g_msg(&self) -> f64 {
        self.top_level()
            .map_or(mbsp::params::Params::DEFAULT.g_msg, LevelParams::g_msg)
    }

    /// The level whose values are the parameter file's top-level keys: the whole machine,
    /// scattered (else the first level measured).
    pub fn top_level(&self) -> Option<&LevelParams> {
        self.levels
            .iter()
            .find(|l| l.level == Where::Machine && l.policy == "scattered")
            .or(self.levels.first())
    }

    /// The whole parameter file: `machine`, `cpu` (the CPU model, which
    /// [`mbsp::params::measured_elsewhere`] compares), `fresh`, `rounds` and `seed`, `levels`
    /// ([`LevelParams::to_json`]), the
    /// top level's `r`, `l`, `g`, `g_direct` ([`Measurement::top_level`]), and `turn`,
    /// `turn_coroutine`, `turn_comm`, `turn_comm_coroutine` when measured
    /// ([`Measurement::turns`]).
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "machine": self.machine,
            "cpu": mbsp::params::cpu_model(),
            "fresh": self.fresh,
            "rounds": self.rounds.0,
            "seed": self.rounds.1,
            "levels": self.levels.iter().map(|l| l.to_json(self.fresh)).collect::<Vec<_>>(),
        });
        if let Some(t) = self.top_level() {
            v["r"] = t.r_dense.into();
            v["r_stream"] = t.r_stream.into();
            v["l"] = t.l.into();
            v["l_reg"] = t.l_reg.into();
            v["g_far"] = t.g_far.into();
            v["g_direct_far"] = t.g_direct_far.into();
            v["cache"] = t.cache.into();
            v["cache_ladder"] = t.ladder_json();
            v["g"] = t.g().into();
            v["g_msg"] = t.g_msg().into();
            v["g_direct"] = t.g_direct().into();
            v["g_direct_msg"] = t.g_direct_msg().into();
            v["g_get_msg"] = t.g_get_msg().into();
        }
        if let Some(t) = &self.turns {
            v["turn"] = t.threads.into();
            v["turn_coroutine"] = t.coroutines.into();
            v["turn_comm"] = t.threads_comm.into();
            v["turn_comm_coroutine"] = t.coroutines_comm.into();
        }
        if let Some(s) = &self.state {
            v["machine_state"] = s.json();
        }
        if let Some(a) = &self.set_aside {
            v["measurements_set_aside"] = a.json();
        }
        v
    }
}

/// Bytes of cache one process of `level` has to itself on `m`: its core's L2 and L3, each
/// divided among the level's processes that use it (one process per core of the level, per
/// hardware thread of core 0 for `core`, on the first core of each package for `packages`),
/// for the process with the least; 1 MiB for an L2 the tree does not give. Past it, a
/// process's data of a superstep is far ([`mbsp::params::Params::cache`]): an L3 shared by
/// few cores holds many times a core's L2, and data there moves at the cache's rate.
///
/// ```
/// use mbsp_tools::params::{Where, level_cache};
/// // No caches in a synthetic tree: the L2 is taken to be 1 MiB, shared by a core's PUs.
/// let m = mbsp::Machine::synthetic("package:1 core:2 pu:2").unwrap().machine;
/// assert_eq!(level_cache(&m, Where::Machine), 1048576.0);
/// assert_eq!(level_cache(&m, Where::Core), 524288.0);
/// ```
pub fn level_cache(m: &mbsp::Machine, level: Where) -> f64 {
    let each = |cores: Option<&Vec<usize>>| -> Vec<(usize, usize)> {
        cores.map_or(vec![], |c| c.iter().map(|&c| (c, 1)).collect())
    };
    // The level's cores, and how many of its processes each runs.
    let cores: Vec<(usize, usize)> = match level {
        Where::Machine => (0..m.cores().len()).map(|c| (c, 1)).collect(),
        Where::Packages => m
            .packages()
            .iter()
            .filter_map(|p| Some((*p.cores.first()?, 1)))
            .collect(),
        Where::Package => each(m.packages().first().map(|p| &p.cores)),
        Where::Numa => each(m.numas().first().map(|n| &n.cores)),
        Where::Core => m.cores().first().map_or(vec![], |c| vec![(0, c.pus.len())]),
    };
    let size = |i: usize| m.caches().get(i).map_or(0, |c| c.size) as f64;
    // The level's processes under cache `i`.
    let users = |i: usize, of: fn(&mbsp::topology::Core) -> Option<usize>| -> f64 {
        cores
            .iter()
            .filter(|&&(c, _)| of(&m.cores()[c]) == Some(i))
            .map(|&(_, n)| n as f64)
            .sum()
    };
    cores
        .iter()
        .map(|&(c, n)| {
            let core = &m.cores()[c];
            let l2 = match core.l2.filter(|&i| size(i) > 0.0) {
                Some(i) => size(i) / users(i, |c| c.l2),
                None => (1u64 << 20) as f64 / n as f64,
            };
            let l3 = core.l3.map_or(0.0, |i| size(i) / users(i, |c| c.l3));
            l2 + l3
        })
        .reduce(f64::min)
        .unwrap_or((1u64 << 20) as f64)
}

/// Refuses a measurement of the `chosen` levels (with their process counts) that cannot fit
/// in memory: on each process of the largest level, four arrays of `max_h` words or of the
/// level's far h ([`Options::far_words`]: what is sent and received, by put and by get) and
/// the triad's three arrays, and the samples of every point.
pub fn check_memory(o: &Options, chosen: &[(Where, usize)]) -> Result<()> {
    let machine = mbsp::Machine::current().or_run()?.machine;
    let p = chosen.iter().map(|c| c.1).max().unwrap_or(1);
    // The level whose arrays take the most.
    let (arrays, words) = chosen
        .iter()
        .map(|&(w, p)| {
            let words = o.max_h.max(o.far_words(level_cache(&machine, w)));
            ((p as u128).saturating_mul(4 * words as u128), words)
        })
        .max()
        .unwrap_or((4 * o.max_h as u128, o.max_h));
    let mut need = Need::new();
    need.add(
        arrays,
        8,
        format!(
            "4 arrays of {words} words (--max-h, and the h-relations beyond the caches) on \
             each process"
        ),
    );
    need.add(
        (p as u128).saturating_mul(3 * o.stream_n as u128),
        8,
        format!(
            "the streaming triad: 3 arrays of {} doubles on each of {p} processes",
            o.stream_n
        ),
    );
    need.add(
        (o.samples as u128).saturating_mul(o.h_steps as u128 + 1),
        8,
        format!("--samples {} of {} points", o.samples, o.h_steps + 1),
    );
    need.add(p as u128, preflight::PER_PROCESS, format!("{p} processes"));
    need.check()
}

/// The levels of this machine that `o` asks for ([`Where::of`], filtered by `o.levels`), with
/// their process counts; an unknown level name, or none that exists here, is a usage error.
pub fn chosen_levels(o: &Options) -> Result<Vec<(Where, usize)>> {
    let loaded = mbsp::Machine::current().or_run()?;
    let all = Where::of(&loaded.machine);
    let known = |n: &String| Where::ALL.iter().any(|w| w.name() == n);
    if let Some(bad) = o.levels.iter().flatten().find(|n| !known(n)) {
        return Err(Error::usage(format!(
            "unknown level '{bad}' (levels: machine, packages, package, numa, core)"
        )));
    }
    let chosen: Vec<(Where, usize)> = all
        .iter()
        .copied()
        .filter(|(w, _)| {
            o.levels
                .as_ref()
                .is_none_or(|n| n.iter().any(|n| n == w.name()))
        })
        .collect();
    if chosen.is_empty() {
        let have: Vec<&str> = all.iter().map(|(w, _)| w.name()).collect();
        return Err(Error::usage(format!(
            "none of the levels asked for exists on this machine (it has: {}; a level that \
             would repeat the one above it, or has one child, is not measured)",
            have.join(", ")
        )));
    }
    Ok(chosen)
}

/// Measures the levels `o` asks for ([`chosen_levels`]), each under the scattered and the
/// compact policy, after checking that the measurement fits in memory ([`check_memory`]),
/// with progress on stderr.
pub fn measure(o: &Options) -> Result<Measurement> {
    let chosen = chosen_levels(o)?;
    check_memory(o, &chosen)?;
    let fresh = fresh_per_word();
    let o = &o.seeded();
    let levels = measure_levels(&chosen, o)?;
    let mut measured = Measurement::new(levels.levels, fresh).in_rounds(o);
    measured.turns = turns_or_warn(o, measured.g_msg())?;
    measured.set_aside = levels.set_aside;
    Ok(measured.watched(levels.state))
}

/// The levels [`measure_levels`] measured, and the machine's state around them.
#[derive(Clone, Debug)]
pub struct Levels {
    /// Each level under the scattered and the compact policy.
    pub levels: Vec<LevelParams>,
    /// The machine's state around the measurements the levels hold.
    pub state: MachineState,
    /// The measurements set aside, if any: taken in another state of the machine.
    pub set_aside: Option<SetAside>,
}

/// Measures each of the `chosen` levels under the scattered and the compact policy in
/// `o.rounds` rounds, each round every configuration once in an order drawn from `o.seed`
/// (the clock's when `None`), with progress on stderr (`mbsp params: round 1/3: the machine
/// level, p = 2, scattered ...`), probing the machine before and after each; the levels in
/// `chosen`'s order, scattered before compact. Where the probes show that the machine changed
/// state but held one around at least half of every configuration's measurements
/// ([`state_rounds::measure`]), each level is combined from those alone.
pub fn measure_levels(chosen: &[(Where, usize)], o: &Options) -> Result<Levels> {
    let o = o.seeded();
    let machine = mbsp::Machine::current().or_run()?.machine;
    let configs: Vec<(Where, usize, Policy, &'static str)> = chosen
        .iter()
        .flat_map(|&(level, p)| {
            [
                (level, p, Policy::Scattered, "scattered"),
                (level, p, Policy::Compact, "compact"),
            ]
        })
        .collect();
    let rounds = o.rounds.max(1);
    let per = o.per_round();
    let mut got: Vec<Vec<Vec<Measured>>> = configs.iter().map(|_| Vec::new()).collect();
    let measure = |i: usize, pass: Pass| -> Result<Vec<Measured>> {
        let (level, p, policy, name) = &configs[i];
        if o.stopped() {
            return Err(Error::new(ErrorKind::Interrupted, STOPPED));
        }
        let of = match pass {
            Pass::Round { round, rounds, .. } if rounds > 1 => {
                format!("round {}/{rounds}: ", round + 1)
            }
            Pass::Round { .. } => String::new(),
            Pass::Again { pass, passes, .. } => {
                format!("again ({pass}/{passes}: the machine was in another state): ")
            }
        };
        eprintln!(
            "mbsp params: {of}measuring the {} level, p = {p}, {name} ...",
            level.name()
        );
        let t = Instant::now();
        let cache = level_cache(&machine, *level);
        let measured = measure_round(*level, policy, name, &per, cache).map_err(|e| {
            if o.stopped() {
                Error::new(ErrorKind::Interrupted, STOPPED)
            } else {
                e
            }
        })?;
        eprintln!("mbsp params:   done in {:.1} s", t.elapsed().as_secs_f64());
        Ok(measured)
    };
    // Where the machine changed state and a configuration was measured mostly in the other
    // one, it is measured again (at most `rounds` more times each), so that every level can
    // be combined from measurements of one state; where no state held around half of them,
    // every configuration is measured once more first (once).
    let orders = round_orders(configs.len(), rounds, o.seed.unwrap_or(0));
    let again = state_rounds::Options {
        again: if rounds > 1 { rounds } else { 0 },
        again_all: true,
        all: false,
    };
    let out = state_rounds::measure::<Error>(
        configs.len(),
        &orders,
        again,
        &mut Snapshot::probed,
        &mut |i, pass| {
            got[i].push(measure(i, pass)?);
            Ok(())
        },
    )?;
    let set_aside = out.set_aside();
    if let Some(aside) = &set_aside {
        out.keep(&mut got);
        eprintln!(
            "mbsp params: the machine changed state during the rounds; keeping the {} of {} \
             measurements taken in one state: {}",
            aside.kept,
            aside.of,
            out.state.line_during("those measurements")
        );
    }
    let state = out.state;
    let levels = configs
        .iter()
        .zip(got)
        .map(|((level, _, _, name), rounds)| {
            combine(*level, name, rounds, &o, level_cache(&machine, *level))
        })
        .collect();
    Ok(Levels {
        levels,
        state,
        set_aside,
    })
}

/// The order in which each of `rounds` rounds measures `n` configurations: one round in the
/// given order, several each in an order shuffled from `seed` (the same seed, the same
/// orders).
///
/// ```
/// use mbsp_tools::params::round_orders;
/// assert_eq!(round_orders(3, 1, 7), vec![vec![0, 1, 2]]);
/// let orders = round_orders(4, 3, 7);
/// assert_eq!(orders, round_orders(4, 3, 7));
/// for mut o in orders {
///     o.sort();
///     assert_eq!(o, vec![0, 1, 2, 3]);
/// }
/// ```
pub fn round_orders(n: usize, rounds: usize, seed: u64) -> Vec<Vec<usize>> {
    let mut rng = mbsp::rng::SplitMix64::new(seed);
    (0..rounds.max(1))
        .map(|_| {
            let mut order: Vec<usize> = (0..n).collect();
            if rounds > 1 {
                rng.shuffle(&mut order);
            }
            order
        })
        .collect()
}

/// The name `mbsp params` gives the placement policy runs use by default: `MBSP_AFFINITY`'s
/// (`compact`, `scattered`, `none`, `manual:...`; a `force:` prefix dropped), else
/// `scattered` — to pick the parameters measured under it ([`mbsp::params::Params::for_placement`]).
///
/// ```
/// let name = mbsp_tools::params::policy_in_force();
/// assert!(!name.is_empty());
/// ```
pub fn policy_in_force() -> String {
    let v = std::env::var(mbsp::AFFINITY_ENV).unwrap_or_default();
    let v = v.trim();
    let v = v.strip_prefix("force:").unwrap_or(v).trim();
    if v.is_empty() {
        "scattered".into()
    } else {
        v.to_string()
    }
}

/// The parameters of a flat run of `p` processes over the machine under the policy in force
/// ([`policy_in_force`]): the `machine` level's, measured with `p` processes if it was.
pub fn flat(p: usize) -> mbsp::params::Params {
    mbsp::params::Params::for_placement("machine", p, &policy_in_force())
}

/// The FFT's cost model for the fan-outs `fans` (outermost first) with every level's own
/// parameters: the whole machine for the flat variant, the packages for the nested variant's
/// top level and one package below it, each as measured with that many processes under
/// `policy` (e.g. [`policy_in_force`]) where the parameter file has them.
pub fn fft_cost(fans: &[usize], policy: &str) -> mbsp_algorithms::fft::FftCost {
    let p: usize = fans.iter().product::<usize>().max(1);
    let at = |level: &str, q: usize| mbsp::params::Params::for_placement(level, q, policy);
    mbsp_algorithms::fft::FftCost {
        flat: at("machine", p),
        top: at("packages", fans.first().copied().unwrap_or(1)),
        inner: at("package", fans.last().copied().unwrap_or(1)),
        ..mbsp_algorithms::fft::FftCost::uniform(at("machine", p))
    }
}

/// Seconds to start and end a nested run of `q` processes from a process of a top-level run
/// of one (the median of 5 samples of 100 runs): what every multiply of the hierarchical SpMV
/// (and every transform of a nested FFT) pays once per level.
///
/// ```
/// let t = mbsp_tools::params::nested_run_seconds(2).unwrap();
/// assert!(t > 0.0);
/// ```
pub fn nested_run_seconds(q: usize) -> Result<f64> {
    let times = Run::new(1).run(|ctx| {
        let mut samples = Vec::with_capacity(5);
        ctx.run(q, |_| Ok(()))?; // warm-up: the nested run's threads
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..100 {
                ctx.run(q, |_| Ok(()))?;
            }
            samples.push(t.elapsed().as_secs_f64() / 100.0);
        }
        Ok(crate::stats::median(&samples))
    })?;
    Ok(times[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process's measurements in one round: every time `t` (the points' and the ladder's
    /// scaled by their size), the empty superstep's samples `ls`.
    fn round(t: f64, ls: &[f64], ladder: &[f64]) -> Measured {
        Measured {
            r_daxpy: t,
            r_dense: t,
            r_stream: t,
            l: ls[0],
            l_interval: (ls[0], ls[0], 0.5),
            l_samples: ls.to_vec(),
            l_reg: t,
            points: vec![(Prim::Put1, vec![(0.0, t), (8.0, 8.0 * t)])],
            g_far: *ladder.last().unwrap(),
            g_direct_far: t,
            cache: 1.0,
            ladder: ladder
                .iter()
                .enumerate()
                .map(|(k, &w)| ((1u64 << (16 + k)) as f64, w))
                .collect(),
        }
    }

    #[test]
    fn rounds_merge_into_medians_and_pool_the_empty_supersteps() {
        let flat = [1e-9; 4];
        let edge = [1e-9, 1e-9, 3e-9, 3e-9];
        let merged = Measured::merge(
            vec![
                round(1.0, &[5.0, 6.0], &flat),
                round(9.0, &[7.0, 8.0], &edge),
                round(2.0, &[1.0, 9.0], &edge),
            ],
            64.0,
        );
        // Each figure the median of the rounds', not their mean (9 is one slow round).
        assert_eq!(merged.r_dense, 2.0);
        assert_eq!(merged.l_reg, 2.0);
        assert_eq!(merged.points[0].0, Prim::Put1);
        assert_eq!(merged.points[0].1, vec![(0.0, 2.0), (8.0, 16.0)]);
        // The empty superstep's samples pooled: six of them, median 6.5.
        assert_eq!(merged.l_samples.len(), 6);
        assert_eq!(merged.l, 6.5);
        assert!(merged.l_interval.0 <= 6.5 && 6.5 <= merged.l_interval.1);
        // Two rounds of three show an edge: the merged ladder does, between its second and
        // third rung; the far rate is the merged ladder's last.
        assert_eq!(merged.ladder[2].1, 3e-9);
        assert_eq!(merged.g_far, 3e-9);
        assert!(merged.cache > 16.0 * 131072.0 && merged.cache < 16.0 * 262144.0);
        // Where the merged ladder shows no edge, the tree's figure stands.
        let none = Measured::merge(vec![round(1.0, &[1.0], &flat); 3], 64.0);
        assert_eq!(none.cache, 64.0);
        // One round is kept as it is.
        let one = Measured::merge(vec![round(4.0, &[3.0], &edge)], 64.0);
        assert_eq!((one.l, one.cache), (3.0, 1.0));
    }

    #[test]
    fn a_stop_flag_ends_the_measurement_with_an_interrupted_error() {
        // Set before the call: no level is measured. Set while a run measures: its processes
        // abort at the next point of a sweep, and the error is the stop's, not the abort's.
        let stop = Arc::new(AtomicBool::new(true));
        let o = Options {
            stop: Some(stop.clone()),
            ..Options::quick()
        };
        let e = measure(&o).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Interrupted);
        assert_eq!(e.message(), STOPPED);
        stop.store(false, Ordering::Relaxed);
        let setter = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(20));
                stop.store(true, Ordering::Relaxed);
            })
        };
        let full = Options {
            stop: Some(stop),
            ..Options::full()
        };
        let e = measure_levels(&[(Where::Machine, 2)], &full).unwrap_err();
        setter.join().unwrap();
        assert_eq!(e.kind(), ErrorKind::Interrupted, "{}", e.message());
    }

    #[test]
    fn fit_recovers_a_line_and_its_residual_is_zero() {
        let pts: Vec<(f64, f64)> = (0..5)
            .map(|i| (i as f64 * 100.0, 1e-6 + 2e-9 * i as f64 * 100.0))
            .collect();
        let f = Fit::of(pts);
        assert!(
            (f.g - 2e-9).abs() < 1e-15 && (f.l - 1e-6).abs() < 1e-12,
            "{f:?}"
        );
        assert!(f.residual < 1e-9);
    }

    #[test]
    fn bad_fits_are_flagged_not_trusted() {
        let line = |l: f64, g: f64| -> Vec<(f64, f64)> {
            (1..5)
                .map(|i| (i as f64 * 512.0, l + g * i as f64 * 512.0))
                .collect()
        };
        assert!(Fit::of(line(1e-6, 2e-9)).trusted());
        // A line through negative time at h = 0 (what a busy machine can produce).
        let neg = Fit::of(line(-48.3e-6, 1e-7));
        assert!(neg.l < 0.0);
        assert_eq!(neg.doubts(), ["negative intercept -48.3 µs"]);
        // Points far off any line.
        let noisy = Fit::of(vec![
            (512.0, 1e-6),
            (1024.0, 40e-6),
            (1536.0, 1e-6),
            (2048.0, 60e-6),
        ]);
        let why = noisy.doubts();
        assert!(why.iter().any(|w| w.starts_with("residual ")), "{why:?}");
        let level = LevelParams {
            level: Where::Machine,
            policy: "scattered",
            p: 2,
            r_daxpy: 1e9,
            r_dense: 1e9,
            r_stream: 1e9,
            l: 1e-6,
            l_interval: (0.9e-6, 1.1e-6, 0.96),
            l_reg: 2e-6,
            g_far: 2e-9,
            g_direct_far: 2e-9,
            cache: 1e6,
            cache_tree: 1e6,
            ladder: vec![],
            far_h: 1 << 20,
            fits: Prim::ALL
                .iter()
                .map(|&p| {
                    (
                        p,
                        if p == Prim::Put {
                            neg.clone()
                        } else {
                            Fit::of(line(1e-6, 2e-9))
                        },
                    )
                })
                .collect(),
        };
        assert_eq!(
            level.doubts(),
            ["machine level, scattered: the put fit (negative intercept -48.3 µs)"]
        );
        let m = Measurement::new(vec![level], 1e-9);
        let v = m.to_json();
        assert_eq!(v["levels"][0]["fits"]["put"]["trusted"], false);
        assert_eq!(v["levels"][0]["fresh"], 1e-9);
        assert_eq!(v["g"], v["levels"][0]["g"]);
        assert!(v.get("turn").is_none(), "turns not measured: no keys");
    }

    /// The turns are measured at 1, 4 and 16 processes per hardware thread (as many as fit
    /// under the cap), threads and coroutines, and written to the file.
    #[test]
    fn turns_are_measured_per_hardware_thread_and_written() {
        let t = turn_costs(&Options::quick(), 25e-9).unwrap();
        let hw = mbsp::nprocs();
        let ks: Vec<usize> = t.points.iter().map(|q| q.k).collect();
        let want: Vec<usize> = [1, 4, 16]
            .into_iter()
            .filter(|&k| k == 1 || k * hw <= TURN_MAX_P)
            .collect();
        assert_eq!(ks, want);
        for q in &t.points {
            let times = [q.threads, q.coroutines, q.threads_put, q.coroutines_put];
            assert!(times.iter().all(|&x| x > 0.0 && x.is_finite()), "{t:?}");
        }
        let slopes = [t.threads, t.coroutines, t.threads_comm, t.coroutines_comm];
        assert!(slopes.iter().all(|&x| x >= 0.0 && x.is_finite()), "{t:?}");
        let mut m = Measurement::new(Vec::new(), 1e-9);
        m.turns = Some(t.clone());
        let v = m.to_json();
        assert_eq!(v["turn"].as_f64(), Some(t.threads));
        assert_eq!(v["turn_coroutine"].as_f64(), Some(t.coroutines));
        assert_eq!(v["turn_comm"].as_f64(), Some(t.threads_comm));
        assert_eq!(v["turn_comm_coroutine"].as_f64(), Some(t.coroutines_comm));
        let read = mbsp::params::Params::from_json(&v.to_string()).unwrap();
        // serde_json's shortest float text may miss the last bit.
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs();
        assert!(close(read.turn, t.threads) && close(read.turn_coroutine, t.coroutines));
        assert!(close(read.turn_comm, t.threads_comm), "{read:?}, {t:?}");
        assert!(
            close(read.turn_comm_coroutine, t.coroutines_comm),
            "{read:?}, {t:?}"
        );
    }

    #[test]
    fn levels_follow_the_tree() {
        let m = |d: &str| mbsp::Machine::synthetic(d).unwrap().machine;
        let names = |d: &str| {
            Where::of(&m(d))
                .into_iter()
                .map(|(w, p)| format!("{}:{p}", w.name()))
                .collect::<Vec<_>>()
        };
        assert_eq!(names("package:1 core:2 pu:1"), ["machine:2", "package:2"]);
        assert_eq!(names("package:1 core:1 pu:2"), ["machine:1", "core:2"]);
        assert_eq!(
            names("package:2 numa:2 core:4 pu:2"),
            ["machine:16", "packages:2", "package:8", "numa:4", "core:2"]
        );
        assert_eq!(
            names("package:4 core:2 pu:1"),
            ["machine:8", "packages:4", "package:2"]
        );
    }
}
