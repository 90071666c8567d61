//! The report of a profile against the BSP cost model: per superstep, region, level and
//! process, measured beside predicted (its text form is in `text.rs`, its JSON in `json.rs`).

/// One superstep of a [`Report`].
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Its number.
    pub superstep: usize,
    /// Its region ([`Profile::superstep_region`](super::Profile::superstep_region)), as an index into [`Report::regions`].
    pub region: Option<usize>,
    /// The largest computation time, seconds.
    pub w: f64,
    /// Largest computation time over the mean.
    pub imbalance: f64,
    /// Words of the h-relation the sync carries.
    pub h: u64,
    /// Words copied at once during the computation (their time is in `w`).
    pub h_immediate: u64,
    /// The processes' mean wait for the others in the sync ([`Superstep::wait`](super::Superstep::wait)), seconds.
    pub mean_wait: f64,
    /// `w + h·g + m·(g_msg − g) + l`, seconds; where processes took turns on shared hardware
    /// threads ([`Report::turns`]), with the largest group's words, requests and computation
    /// summed over its hardware threads
    /// ([`Profile`](super::Profile)'s module documentation).
    pub predicted: f64,
    /// The largest computation + sync time of any process, seconds.
    pub measured: f64,
    /// Whether the sync that ended it was lazy ([`Superstep::lazy`](super::Superstep::lazy)).
    pub lazy: bool,
}

/// Totals over a set of supersteps: a region's, a level's, or a whole run's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Totals {
    /// The region's full name (`outer/inner`), `(outside regions)`, or the level's name.
    pub name: String,
    /// Nesting depth: of a region (1 = outside any other; 0 for "(outside regions)"), or of a
    /// run (0 = the top-level run).
    pub depth: usize,
    /// Supersteps.
    pub supersteps: usize,
    /// Sum of the supersteps' w, seconds.
    pub w: f64,
    /// Sum of the supersteps' h, words.
    pub h: u64,
    /// Sum of the supersteps' mean wait, seconds.
    pub wait: f64,
    /// Sum of the measured times, seconds.
    pub measured: f64,
    /// Sum of the predicted times, seconds.
    pub predicted: f64,
    /// How many of the supersteps ended with a lazy sync ([`Row::lazy`]).
    pub lazy: usize,
}

impl Totals {
    pub(super) fn add(&mut self, r: &Row) {
        self.supersteps += 1;
        self.w += r.w;
        self.h += r.h;
        self.wait += r.mean_wait;
        self.measured += r.measured;
        self.predicted += r.predicted;
        self.lazy += usize::from(r.lazy);
    }

    pub(super) fn merge(&mut self, o: &Totals) {
        self.supersteps += o.supersteps;
        self.w += o.w;
        self.h += o.h;
        self.wait += o.wait;
        self.measured += o.measured;
        self.predicted += o.predicted;
        self.lazy += o.lazy;
    }
}

/// One process's totals over a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcTotals {
    /// The process.
    pub pid: usize,
    /// Seconds computing.
    pub compute: f64,
    /// Seconds in syncs.
    pub sync: f64,
    /// The part of [`sync`](Self::sync) spent waiting for the others ([`Superstep::wait`](super::Superstep::wait)).
    pub wait: f64,
    /// Words sent ([`ProcStep::words_sent`](super::ProcStep::words_sent), summed).
    pub words_sent: u64,
    /// Words received.
    pub words_received: u64,
    /// Where it ran ([`Profile::places`](super::Profile::places)).
    pub place: String,
}

/// A profile against the BSP cost model: per superstep, per region and per process the
/// measured and the predicted time (text with `Display` or [`Report::text`], JSON with
/// [`Report::to_json`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Processes.
    pub p: usize,
    /// Where the run was started (empty: top level).
    pub path: Vec<usize>,
    /// The superstep of the enclosing run in which this nested run ran
    /// ([`Profile::started_in`](super::Profile::started_in)).
    pub started_in: Option<usize>,
    /// The most processes that took turns on one hardware thread
    /// ([`Profile::turns`](super::Profile::turns)); 1 where each had its own. Above 1 every
    /// superstep's prediction holds what the turns cost ([`Params::turns_time`]).
    ///
    /// [`Params::turns_time`]: crate::params::Params::turns_time
    pub turns: usize,
    /// Whether those turns were taken by coroutines ([`Profile::coroutines`](super::Profile::coroutines)).
    pub coroutines: bool,
    /// The seconds each process beyond the first on a hardware thread added to a superstep's
    /// prediction ([`Params::turn`] or [`Params::turn_coroutine`]; unused where
    /// [`turns`](Self::turns) is 1).
    ///
    /// [`Params::turn`]: crate::params::Params::turn
    /// [`Params::turn_coroutine`]: crate::params::Params::turn_coroutine
    pub turn: f64,
    /// The seconds each process beyond the first on a hardware thread added, beyond
    /// [`turn`](Self::turn), to the prediction of a superstep that communicates
    /// ([`Params::turn_comm`] or [`Params::turn_comm_coroutine`]).
    ///
    /// [`Params::turn_comm`]: crate::params::Params::turn_comm
    /// [`Params::turn_comm_coroutine`]: crate::params::Params::turn_comm_coroutine
    pub turn_comm: f64,
    /// The `g` used, seconds per word.
    pub g: f64,
    /// The `l` used, seconds.
    pub l: f64,
    /// One per superstep.
    pub rows: Vec<Row>,
    /// One per region, each after its parent, sub-regions' supersteps included; then the
    /// supersteps outside any region (when there are regions and such supersteps).
    pub regions: Vec<Totals>,
    /// One per process.
    pub processes: Vec<ProcTotals>,
    /// The nested runs' reports.
    pub nested: Vec<Report>,
}

impl Report {
    /// Total measured and predicted seconds.
    pub fn totals(&self) -> (f64, f64) {
        self.rows
            .iter()
            .fold((0.0, 0.0), |(m, p), r| (m + r.measured, p + r.predicted))
    }

    /// Totals of this run's supersteps.
    pub fn run_totals(&self) -> Totals {
        let mut t = Totals {
            name: "run".into(),
            ..Totals::default()
        };
        for r in &self.rows {
            t.add(r);
        }
        t
    }

    /// The runs of each level of nesting: this run alone (level 0), the runs nested in it
    /// (level 1), those nested in them (level 2), and so on, each level in the order of a walk
    /// down the tree of runs.
    ///
    /// ```
    /// let (_, profile) = mbsp::Run::new(2).run_profiled(|ctx| {
    ///     ctx.run(2, |inner| inner.sync())?;
    ///     ctx.sync()
    /// })?;
    /// let report = profile.report(&mbsp::params::Params::DEFAULT);
    /// let levels = report.runs_by_level();
    /// assert_eq!(levels.iter().map(Vec::len).collect::<Vec<_>>(), [1, 2]);
    /// assert_eq!(levels[1][1].path, [1]); // started by process 1
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn runs_by_level(&self) -> Vec<Vec<&Report>> {
        fn walk<'a>(r: &'a Report, depth: usize, levels: &mut Vec<Vec<&'a Report>>) {
            if levels.len() <= depth {
                levels.push(Vec::new());
            }
            levels[depth].push(r);
            for n in &r.nested {
                walk(n, depth + 1, levels);
            }
        }
        let mut levels = Vec::new();
        walk(self, 0, &mut levels);
        levels
    }

    /// Totals per level of run nesting: this run (depth 0), then all runs nested in it
    /// (depth 1), in those (depth 2), and so on; `name` says how many runs each level has.
    ///
    /// ```
    /// let (_, profile) = mbsp::Run::new(2).run_profiled(|ctx| {
    ///     ctx.run(2, |inner| inner.sync())?;
    ///     ctx.sync()
    /// })?;
    /// let levels = profile.report(&mbsp::params::Params::DEFAULT).levels();
    /// assert_eq!(levels.len(), 2);
    /// assert_eq!(levels[1].name, "2 runs nested 1 deep");
    /// assert_eq!(levels[1].supersteps, 4); // two supersteps in each of two nested runs
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn levels(&self) -> Vec<Totals> {
        self.runs_by_level()
            .iter()
            .enumerate()
            .map(|(depth, runs)| {
                let mut t = Totals::default();
                for r in runs {
                    t.merge(&r.run_totals());
                }
                t.depth = depth;
                t.name = match (depth, runs.len()) {
                    (0, _) => "this run".into(),
                    (d, 1) => format!("1 run nested {d} deep"),
                    (d, n) => format!("{n} runs nested {d} deep"),
                };
                t
            })
            .collect()
    }

    /// The full name of region `i` ([`Row::region`]).
    pub(super) fn region_name(&self, i: usize) -> String {
        self.regions
            .get(i)
            .map_or_else(String::new, |t| t.name.clone())
    }
}
