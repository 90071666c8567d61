//! Measurements taken in rounds with the machine probed around each, kept from one state of
//! the machine: what `mbsp affinity` (one run of a configuration per measurement) and `mbsp
//! params` (one configuration's measurement of about a second) share.
//!
//! The flow of [`measure`]:
//!
//! 1. **Rounds.** Every configuration is measured once per round, in that round's order. The
//!    machine is probed ([`Snapshot`]) before the first measurement and after every one, so
//!    that each measurement is one span of a [`Watch`], between two probes.
//! 2. **Again.** Where the probes saw the machine change state and one state held around
//!    most measurements ([`Watch::steady_rounds`]), the configurations measured mostly in
//!    another state ([`short_of_state`]) are measured once more, pass after pass, until none
//!    is short or [`Options::again`] passes are done. Where no state held that long, every
//!    configuration is measured once more first when [`Options::again_all`] says so (once).
//! 3. **Keep.** Unless [`Options::all`], the spans of one state are kept if every
//!    configuration keeps at least half of its measurements there ([`Watch::steady_spans`]);
//!    otherwise every span is.
//!
//! The choice is made on the probes alone, never on the figures measured: a configuration
//! that is slow is not set aside for being slow.
//!
//! ```
//! use mbsp_tools::machine_state::Snapshot;
//! use mbsp_tools::state_rounds::{Options, measure};
//! // Two configurations, three rounds; the machine steady throughout.
//! let orders = [vec![0, 1], vec![1, 0], vec![0, 1]];
//! let mut probe = || Snapshot::with_probes(Some(100.0), Some(22.0));
//! let mut times = vec![Vec::new(); 2];
//! let o = Options { again: 3, again_all: false, all: false };
//! let out = measure(2, &orders, o, &mut probe, &mut |i, _pass| {
//!     times[i].push(1.0);
//!     Ok::<(), std::convert::Infallible>(())
//! })?;
//! assert_eq!(out.spans.len(), 6);
//! assert_eq!(out.kept, None, "nothing set aside");
//! assert_eq!(out.kept_of(2), [vec![0, 1, 2], vec![0, 1, 2]]);
//! # Ok::<(), std::convert::Infallible>(())
//! ```

use crate::machine_state::{MachineState, SetAside, Snapshot, Watch, short_of_state};

/// Where a measurement stands in the flow ([`measure`]): for progress lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// A measurement of the rounds.
    Round {
        /// The round, from 0.
        round: usize,
        /// Rounds in all.
        rounds: usize,
        /// The measurement's place in the round, from 0.
        index: usize,
        /// Measurements in the round.
        len: usize,
    },
    /// A measurement again, of a configuration measured mostly in another state.
    Again {
        /// The pass, from 1.
        pass: usize,
        /// Passes at most.
        passes: usize,
        /// The measurement's place in the pass, from 0.
        index: usize,
        /// Measurements in the pass: the configurations short of the state.
        len: usize,
    },
}

/// How far [`measure`] goes to keep measurements of one state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Passes at most in which the configurations measured mostly in another state are
    /// measured once more each (0: none).
    pub again: usize,
    /// Where no state held around half of the measurements after the rounds, measure every
    /// configuration once more first (in the first pass, if `again` allows one).
    pub again_all: bool,
    /// Keep every measurement (`--all-rounds`): no passes again, nothing set aside.
    pub all: bool,
}

/// What [`measure`] took and kept.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Per span of the watch, in the order measured: the configuration, and which of its
    /// measurements it was (from 0).
    pub spans: Vec<(usize, usize)>,
    /// The spans kept, in order, where some were set aside; `None`: every span kept.
    pub kept: Option<Vec<usize>>,
    /// The machine's state around the spans kept.
    pub state: MachineState,
    /// The machine's state over every span.
    pub whole: MachineState,
}

impl Outcome {
    /// How many were kept of how many, with the state over all of them; `None` where every
    /// measurement was kept.
    pub fn set_aside(&self) -> Option<SetAside> {
        self.kept.as_ref().map(|kept| SetAside {
            kept: kept.len(),
            of: self.spans.len(),
            whole: self.whole.clone(),
        })
    }

    /// Keeps, of each configuration's figures (`got[i]`: one per measurement of configuration
    /// `i`, in the order taken), those of the measurements kept.
    ///
    /// ```
    /// # use mbsp_tools::machine_state::Snapshot;
    /// # use mbsp_tools::state_rounds::{Options, Outcome};
    /// # use mbsp_tools::machine_state::Watch;
    /// # let s = Watch::starting(Snapshot::with_probes(None, None)).state();
    /// // Configuration 0 measured in spans 0 and 3, configuration 1 in 1 and 2; 1 set aside.
    /// let out = Outcome {
    ///     spans: vec![(0, 0), (1, 0), (1, 1), (0, 1)],
    ///     kept: Some(vec![0, 2, 3]),
    ///     state: s.clone(),
    ///     whole: s,
    /// };
    /// let mut got = vec![vec!["a0", "a1"], vec!["b0", "b1"]];
    /// out.keep(&mut got);
    /// assert_eq!(got, [vec!["a0", "a1"], vec!["b1"]]);
    /// ```
    pub fn keep<T>(&self, got: &mut [Vec<T>]) {
        let kept = self.kept_of(got.len());
        for (g, kept) in got.iter_mut().zip(kept) {
            let mut all: Vec<Option<T>> = std::mem::take(g).into_iter().map(Some).collect();
            g.extend(kept.iter().filter_map(|&r| all.get_mut(r)?.take()));
        }
    }

    /// Per configuration (of `n`), which of its measurements were kept, in the order taken.
    pub fn kept_of(&self, n: usize) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new(); n];
        let mut keep = |k: usize| {
            let (config, index) = self.spans[k];
            out[config].push(index);
        };
        match &self.kept {
            Some(kept) => kept.iter().for_each(|&k| keep(k)),
            None => (0..self.spans.len()).for_each(keep),
        }
        out
    }
}

/// Measures `n` configurations in rounds (`orders`: each round's configurations, numbers below
/// `n`, in order; a configuration may be left out of every round) with `measure(config,
/// pass)`, probing the machine with `probe` before the first measurement and after every one
/// (call it while the measurement's own threads are idle: [`Snapshot::probed`] spins two
/// threads), then measures again and keeps as `o` says (the module's flow). The first error
/// of `measure` ends it.
pub fn measure<E>(
    n: usize,
    orders: &[Vec<usize>],
    o: Options,
    probe: &mut dyn FnMut() -> Snapshot,
    measure: &mut dyn FnMut(usize, Pass) -> Result<(), E>,
) -> Result<Outcome, E> {
    let mut t = Taken {
        watch: Watch::starting(probe()),
        spans: Vec::new(),
        count: vec![0; n],
    };
    let mut take = |t: &mut Taken, i: usize, pass: Pass| -> Result<(), E> {
        measure(i, pass)?;
        t.watch.mark_with(probe());
        t.spans.push((i, t.count[i]));
        t.count[i] += 1;
        Ok(())
    };
    for (round, order) in orders.iter().enumerate() {
        for (index, &i) in order.iter().enumerate() {
            let pass = Pass::Round {
                round,
                rounds: orders.len(),
                index,
                len: order.len(),
            };
            take(&mut t, i, pass)?;
        }
    }
    let passes = if o.all { 0 } else { o.again };
    for pass in 1..=passes {
        let group = t.group();
        let short = match t.watch.steady_rounds() {
            Some(kept) => short_of_state(n, &group, &kept),
            None if o.again_all && pass == 1 && t.watch.state().changed_state() => {
                let mut all = group;
                all.sort_unstable();
                all.dedup();
                all
            }
            None => break,
        };
        if short.is_empty() {
            break;
        }
        for (index, &i) in short.iter().enumerate() {
            let pass = Pass::Again {
                pass,
                passes,
                index,
                len: short.len(),
            };
            take(&mut t, i, pass)?;
        }
    }
    let whole = t.watch.state();
    let kept = if o.all {
        None
    } else {
        t.watch.steady_spans(&t.group())
    };
    let state = match &kept {
        Some(kept) => t.watch.state_of(kept),
        None => whole.clone(),
    };
    let spans = t.spans;
    Ok(Outcome {
        spans,
        kept,
        state,
        whole,
    })
}

/// What [`measure`] has taken so far: the watch, its spans, and how many measurements each
/// configuration has.
struct Taken {
    watch: Watch,
    spans: Vec<(usize, usize)>,
    count: Vec<usize>,
}

impl Taken {
    /// The configuration of each span.
    fn group(&self) -> Vec<usize> {
        self.spans.iter().map(|&(i, _)| i).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::convert::Infallible;

    const NEAR: f64 = 100.0;
    const FAR: f64 = 400.0;

    /// Measures `n` configurations in `rounds` rounds of the orders `0..n` rotated by the
    /// round, the probe after a measurement far where `far(config, round)` (`None` in the
    /// passes again: near); returns the outcome and the probes (the first before anything).
    fn play(
        n: usize,
        rounds: usize,
        o: Options,
        far: &dyn Fn(usize, Option<usize>) -> bool,
    ) -> (Outcome, Vec<f64>, Vec<(usize, Pass)>) {
        let orders: Vec<Vec<usize>> = (0..rounds)
            .map(|r| (0..n).map(|i| (i + r) % n).collect())
            .collect();
        let last: RefCell<Option<(usize, Pass)>> = RefCell::new(None);
        let probes = RefCell::new(Vec::new());
        let log = RefCell::new(Vec::new());
        let mut probe = || {
            let line = match *last.borrow() {
                Some((i, Pass::Round { round, .. })) if far(i, Some(round)) => FAR,
                Some((i, Pass::Again { .. })) if far(i, None) => FAR,
                _ => NEAR,
            };
            probes.borrow_mut().push(line);
            Snapshot::with_probes(Some(line), Some(22.0))
        };
        let out = measure(n, &orders, o, &mut probe, &mut |i, pass| {
            *last.borrow_mut() = Some((i, pass));
            log.borrow_mut().push((i, pass));
            Ok::<(), Infallible>(())
        })
        .unwrap();
        (out, probes.into_inner(), log.into_inner())
    }

    const KEEP: Options = Options {
        again: 4,
        again_all: false,
        all: false,
    };

    #[test]
    fn configurations_measured_in_another_state_are_measured_again_and_kept_from_one() {
        // Configuration 2's measurements leave the machine far in the first three of four
        // rounds: its spans and the spans just after them are of another state.
        let (out, probes, log) = play(4, 4, KEEP, &|i, round| {
            i == 2 && round.is_some_and(|r| r < 3)
        });
        let kept = out
            .kept
            .clone()
            .unwrap_or_else(|| panic!("{probes:?} {log:?}"));
        // Every span kept has near probes at both of its ends; every span with near probes
        // at both ends is kept (one state: the near one held most).
        for k in 0..out.spans.len() {
            let near = probes[k] == NEAR && probes[k + 1] == NEAR;
            assert_eq!(kept.contains(&k), near, "span {k}: {probes:?}");
        }
        // Configuration 2 (and 3, whose spans followed its far probes) was measured again,
        // pass after pass, until half of its measurements were of the near state.
        let again: Vec<usize> = log
            .iter()
            .filter(|(_, p)| matches!(p, Pass::Again { .. }))
            .map(|&(i, _)| i)
            .collect();
        assert!(again.iter().filter(|&&i| i == 2).count() >= 2, "{log:?}");
        let per = out.kept_of(4);
        for (i, runs) in per.iter().enumerate() {
            let all = out.spans.iter().filter(|s| s.0 == i).count();
            assert!(
                2 * runs.len() >= all,
                "configuration {i}: {runs:?} of {all}"
            );
        }
        assert!(per[2].iter().all(|&r| r == 3 || r >= 4), "{:?}", per[2]);
        let aside = out.set_aside().unwrap();
        assert_eq!((aside.kept, aside.of), (kept.len(), out.spans.len()));
        assert_eq!(aside.whole.line_ns, Some((NEAR, FAR)));
        assert_eq!(out.state.line_ns, Some((NEAR, NEAR)));
    }

    #[test]
    fn a_configuration_that_moves_the_machine_itself_is_measured_again_a_bounded_number_of_times() {
        // Every measurement of configuration 2, again ones included, leaves the machine far.
        let (out, _, log) = play(4, 4, KEEP, &|i, _| i == 2);
        let again = log.iter().filter(|(_, p)| matches!(p, Pass::Again { .. }));
        assert!(again.count() <= 2 * KEEP.again, "{log:?}");
        assert_eq!(out.spans.len(), log.len());
        if let Some(kept) = &out.kept {
            assert!(kept.iter().all(|&k| out.spans[k].0 != 2), "{kept:?}");
        }
    }

    #[test]
    fn a_steady_machine_keeps_everything_and_measures_nothing_again() {
        let (out, probes, log) = play(3, 5, KEEP, &|_, _| false);
        assert_eq!(out.kept, None);
        assert!(out.set_aside().is_none());
        assert_eq!(log.len(), 15);
        assert_eq!(probes.len(), 16);
        assert_eq!(out.kept_of(3), vec![vec![0, 1, 2, 3, 4]; 3]);
    }

    #[test]
    fn all_rounds_keeps_everything_however_the_machine_moved() {
        let all = Options { all: true, ..KEEP };
        let (out, _, log) = play(4, 4, all, &|i, round| {
            i == 2 && round.is_some_and(|r| r < 3)
        });
        assert_eq!(log.len(), 16, "nothing measured again");
        assert_eq!(out.kept, None);
        assert_eq!(out.state, out.whole);
        assert_eq!(out.whole.line_ns, Some((NEAR, FAR)));
    }

    #[test]
    fn where_no_state_held_every_configuration_is_measured_once_more_if_asked() {
        // Far after every other measurement: the spans alternate ends, none steady.
        let flip = |i: usize, round: Option<usize>| round.is_some() && i % 2 == 1;
        let (_, _, log) = play(2, 4, KEEP, &flip);
        assert_eq!(log.len(), 8, "without again_all, nothing more");
        let o = Options {
            again_all: true,
            ..KEEP
        };
        let (out, _, log) = play(2, 4, o, &flip);
        let again: Vec<usize> = log[8..].iter().map(|&(i, _)| i).collect();
        assert!(again.starts_with(&[0, 1]), "{log:?}");
        assert!(matches!(
            log[8].1,
            Pass::Again {
                pass: 1,
                index: 0,
                len: 2,
                ..
            }
        ));
        assert_eq!(out.spans.len(), log.len());
    }

    #[test]
    fn the_first_error_ends_the_measurement() {
        let mut probe = || Snapshot::with_probes(Some(NEAR), Some(22.0));
        let mut n = 0;
        let r = measure(
            2,
            &[vec![0, 1], vec![1, 0]],
            KEEP,
            &mut probe,
            &mut |_, _| {
                n += 1;
                if n == 3 { Err("third") } else { Ok(()) }
            },
        );
        assert_eq!(r.unwrap_err(), "third");
        assert_eq!(n, 3);
    }

    #[test]
    fn configurations_left_out_of_the_rounds_are_never_measured() {
        let orders = [vec![0, 2], vec![2, 0]];
        let mut probe = || Snapshot::with_probes(Some(NEAR), Some(22.0));
        let mut seen = Vec::new();
        let out = measure(3, &orders, KEEP, &mut probe, &mut |i, _| {
            seen.push(i);
            Ok::<(), Infallible>(())
        })
        .unwrap();
        assert_eq!(seen, [0, 2, 2, 0]);
        assert_eq!(out.kept_of(3), [vec![0, 1], vec![], vec![0, 1]]);
    }
}
