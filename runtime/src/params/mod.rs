//! BSP machine parameters (r, g, l, ...): what `mbsp params` measures, what the profiler's
//! report and the algorithms' cost functions predict with.
//!
//! They come from [`Params::current`], which looks, in this order, for
//!
//! 1. the file named by `MBSP_PARAMS` (JSON, e.g.
//!    `{"l": 1.2e-6, "l_reg": 2.4e-6, "g": 1.6e-9, "g_direct": 0.8e-9, "g_msg": 25e-9,
//!    "g_get_msg": 45e-9, "g_direct_msg": 14e-9, "g_far": 2.4e-9, "g_direct_far": 1.2e-9,
//!    "cache": 1048576, "fresh": 3.2e-9, "r": 1e9, "r_stream": 1e9, "turn": 5e-6,
//!    "turn_coroutine": 1.5e-7, "turn_comm": 8e-7, "turn_comm_coroutine": 1.5e-7}`; keys may
//!    be omitted —
//!    files written before a key existed are read with that key's default (`l_reg`: twice the
//!    file's `l`; `g_far`, `g_direct_far`, `g_direct_msg` and `g_get_msg`: its `g`,
//!    `g_direct`, `g_direct` and `g_msg`) — and `mbsp params --json FILE` writes one);
//! 2. this machine's saved parameters, [`saved_path`]: `$XDG_CONFIG_HOME/mbsp/params.json`, or
//!    `~/.config/mbsp/params.json` when `XDG_CONFIG_HOME` is unset (`mbsp params --save` writes
//!    it), if that file exists;
//! 3. else [`Params::DEFAULT`], measured on a 2-core AMD EPYC virtual machine — not this one,
//!    so predictions from them can be far off.
//!
//! [`source`] says which one is in force. A file written by `mbsp params` also holds every
//! measured level of the machine tree under `"levels"`: [`Params::for_level`] picks one.
//! [`judge_prediction`] words how far a prediction is from a measurement, and says what to do
//! when it misses by more than half.

mod error;
mod ladder;

pub use error::ParamsError;
pub use ladder::{LADDER_MAX, LADDER_MIN_H, Ladder};

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The environment variable naming a JSON file of BSP parameters.
pub const PARAMS_ENV: &str = "MBSP_PARAMS";

/// BSP machine parameters, in seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    /// Computation rate in flop/s of a compute-bound kernel (data in cache).
    pub r: f64,
    /// Computation rate in flop/s of a kernel that streams its data from memory (the STREAM
    /// triad `a = b + s·c` on arrays far larger than the caches, every process of the level at
    /// once): what a memory-bound kernel runs at.
    pub r_stream: f64,
    /// Seconds per 8-byte word of a full h-relation of bulk puts or messages.
    pub g: f64,
    /// Seconds per message of a full h-relation of one-word puts: the per-message g, which an
    /// h-relation of many small requests pays instead of [`g`](Params::g) per word (each
    /// request is queued, matched and copied on its own). [`Params::time_of`] charges
    /// `g_msg - g` per request on top of `g` per word.
    pub g_msg: f64,
    /// Seconds per request of a full h-relation of one-word buffered gets: the per-request g
    /// of gets (each a record that its owner's data answers in the sync: read into the get
    /// buffer, then written), which a fetch of many short runs by `get` pays instead of
    /// [`g`](Params::g) per word. [`Params::time_with_gets`] charges `g_get_msg - g` per get on
    /// top of `g` per word.
    pub g_get_msg: f64,
    /// Seconds per 8-byte word copied by direct gets (one copy, reader-driven) of data that
    /// its owner wrote in the superstep before, as a program fetches what another process has
    /// just computed: the lines come from the owner's cache.
    pub g_direct: f64,
    /// Seconds per request of a superstep of one-word direct gets (each `direct_get` its own
    /// call: checks, the owner's sync count, a copy): the per-request g of direct gets, which
    /// a fetch of many short runs pays instead of [`g_direct`](Params::g_direct) per word.
    /// [`Params::direct_gets`] charges `g_direct_msg - g_direct` per request on top of
    /// `g_direct` per word.
    pub g_direct_msg: f64,
    /// Seconds per 8-byte word of a full h-relation of bulk puts whose data lies far beyond
    /// the caches (`mbsp params` measures it with twice [`cache`](Params::cache) or more per
    /// process): [`g`](Params::g) for data past [`cache`](Params::cache).
    pub g_far: f64,
    /// Seconds per 8-byte word of direct gets far beyond the caches:
    /// [`g_direct`](Params::g_direct) for data past [`cache`](Params::cache).
    pub g_direct_far: f64,
    /// Bytes a process's data may take and still be served from its caches: `mbsp params`
    /// measures where bulk puts' time per word crosses halfway from the in-cache rate to the
    /// far one (the machine's tree gives its L2 and its share of the L3 where no edge shows).
    /// [`Params::g_for`] and [`Params::g_direct_for`] switch to the far rates past it.
    pub cache: f64,
    /// Seconds per 8-byte word of h-relations of bulk puts at the sizes `mbsp params` measured
    /// them on its way to [`g_far`](Params::g_far) (its `cache_ladder`): between its first and
    /// last rung, [`Params::g_for`] takes the ladder's rate instead of `g` or `g_far`. Empty
    /// (the defaults, files of older versions): the two rates alone.
    pub g_ladder: Ladder,
    /// Seconds per superstep (an empty sync).
    pub l: f64,
    /// Seconds per superstep that registers or deregisters memory (a sync that checks every
    /// process's registrations and waits at a second barrier before anyone may use them):
    /// what the registered algorithms pay to expose a buffer and to withdraw it.
    pub l_reg: f64,
    /// Seconds per 8-byte word of freshly allocated memory written for the first time (page
    /// faults and zeroing: scratch space of some algorithms).
    pub fresh: f64,
    /// Seconds a superstep costs for each process beyond the first that takes turns on a
    /// hardware thread, when the processes are threads the kernel switches between (a run
    /// with more processes than hardware threads): the slope of the empty superstep's time
    /// over the processes per hardware thread (`mbsp params` measures it at 1, 4 and 16 per
    /// hardware thread). [`Params::turns_time`].
    pub turn: f64,
    /// [`turn`](Params::turn) for processes that take turns as coroutines
    /// ([`Run::coroutines`](crate::Run::coroutines)).
    pub turn_coroutine: f64,
    /// Seconds a superstep in which processes communicate costs for each process beyond the
    /// first on a hardware thread, on top of [`turn`](Params::turn) and of its requests' own
    /// g: the part of a communicating sync each process makes for itself (telling its
    /// destinations, taking its senders' records, emptying its outboxes), one process after
    /// another. `mbsp params` measures it as the slope of a superstep of one-word puts to the
    /// next process over the processes per hardware thread, less the empty superstep's slope
    /// and [`g_msg`](Params::g_msg). [`Params::turns_time`].
    pub turn_comm: f64,
    /// [`turn_comm`](Params::turn_comm) for processes that take turns as coroutines.
    pub turn_comm_coroutine: f64,
}

impl Params {
    /// Parameters of a small current machine (measured on a 2-core AMD EPYC VM with
    /// `mbsp-bench core`, p = 2): empty sync up to 1 µs, bulk puts ≈ 5 GB/s, direct gets
    /// ≈ 10 GB/s, first touch of fresh memory ≈ 1.6 µs per 4 KiB page; a one-word put ≈ 25 ns,
    /// a one-word get ≈ 45 ns, a one-word direct get ≈ 14 ns and a streaming triad ≈ 1 Gflop/s
    /// on an Intel Xeon VM of the same size; a registering superstep taken as two barriers,
    /// the same g far beyond the caches as in them, a cache of 1 MiB per process). Predictions
    /// for another machine should use its own (`mbsp params --save`, or `mbsp params --json
    /// FILE` then `MBSP_PARAMS=FILE`). Processes beyond one per hardware thread add 5 µs each
    /// to an empty superstep as threads and 0.15 µs as coroutines, and 0.8 µs and 0.15 µs more
    /// to one that communicates (the AMD VM, up to 16 per hardware thread).
    pub const DEFAULT: Params = Params {
        r: 1.0e9,
        r_stream: 1.0e9,
        g: 1.6e-9,
        g_msg: 25e-9,
        g_get_msg: 45e-9,
        g_direct: 0.8e-9,
        g_direct_msg: 14e-9,
        g_far: 1.6e-9,
        g_direct_far: 0.8e-9,
        cache: 1048576.0,
        g_ladder: Ladder::EMPTY,
        l: 1.0e-6,
        l_reg: 2.0e-6,
        fresh: 3.2e-9,
        turn: 5.0e-6,
        turn_coroutine: 0.15e-6,
        turn_comm: 0.8e-6,
        turn_comm_coroutine: 0.15e-6,
    };

    /// The parameters in force: read once from the file named by `MBSP_PARAMS`, else from
    /// this machine's saved parameters ([`saved_path`]), else [`Params::DEFAULT`]. A file that cannot be read or parsed is reported once on stderr and
    /// the defaults are used.
    ///
    /// ```
    /// let p = mbsp::params::Params::current();
    /// assert!(p.l > 0.0 && p.g > 0.0);
    /// ```
    ///
    /// Where they come from: [`source`] (the lookup order is in the [module docs](self)).
    pub fn current() -> &'static Params {
        &loaded().0.top
    }

    /// The parameters of one level of the machine tree from the parameter file in force (`level` as
    /// `mbsp params` names them: `machine`, `packages`, `package`, `numa`, `core`), preferring
    /// an entry measured with `p` processes, else any entry of that level, else
    /// [`Params::current`].
    ///
    /// ```
    /// let p = mbsp::params::Params::for_level("package", 8);
    /// assert!(p.g > 0.0);
    /// ```
    pub fn for_level(level: &str, p: usize) -> Params {
        Params::for_placement(level, p, "")
    }

    /// [`Params::for_level`], preferring among the entries of `level` with `p` processes the
    /// one measured under `policy` (`scattered`, `compact`: policies number the cores
    /// differently, which changes who synchronises with whom), then any policy's.
    ///
    /// ```
    /// let p = mbsp::params::Params::for_placement("machine", 2, "compact");
    /// assert!(p.l > 0.0);
    /// ```
    pub fn for_placement(level: &str, p: usize, policy: &str) -> Params {
        pick(&loaded().0.levels, level, p, policy).unwrap_or(*Params::current())
    }

    /// Parse a JSON object with any of the keys `r`, `r_stream`, `g`, `g_msg`, `g_get_msg`,
    /// `g_direct`, `g_direct_msg`, `g_far`, `g_direct_far`, `cache`, `l`, `l_reg`, `fresh`,
    /// `turn`, `turn_coroutine`, `turn_comm`, `turn_comm_coroutine` (numbers, seconds, bytes or
    /// flop/s); missing keys keep their
    /// [`Params::DEFAULT`] values,
    /// but a missing `l_reg` is twice the object's `l` and a missing `g_far`, `g_direct_far`,
    /// `g_direct_msg` or `g_get_msg` its `g`, `g_direct`, `g_direct` or `g_msg` (a
    /// file of an older `mbsp params` without `g_msg` has its one-word-put fit, `g_put1`, which
    /// is read as `g_msg`).
    ///
    /// ```
    /// let p = mbsp::params::Params::from_json(r#"{"l": 2e-6, "g": 3e-9}"#).unwrap();
    /// assert_eq!((p.l, p.g, p.l_reg), (2e-6, 3e-9, 4e-6));
    /// ```
    ///
    /// A text that is not JSON, or a value out of range, is a [`ParamsError`]:
    ///
    /// ```
    /// let e = mbsp::params::Params::from_json(r#"{"l": -1}"#).unwrap_err();
    /// assert_eq!(e.to_string(), "\"l\" must be a positive number, not -1");
    /// assert!(mbsp::params::Params::from_json("l = 1").is_err());
    /// ```
    pub fn from_json(text: &str) -> Result<Params, ParamsError> {
        parse_file(text).map(|f| f.top)
    }

    /// Parse the keys of `obj` over [`Params::DEFAULT`].
    fn from_object(
        obj: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Params, ParamsError> {
        let mut p = Params::DEFAULT;
        // r divides and l is never free; a g may be 0 (`mbsp params` reports a fit whose slope
        // came out negative, noise below its resolution, as a flat line).
        let g_msg_key = if obj.contains_key("g_msg") {
            "g_msg"
        } else {
            "g_put1"
        };
        for (key, slot, zero_ok) in [
            ("r", &mut p.r, false),
            ("r_stream", &mut p.r_stream, false),
            ("g", &mut p.g, true),
            (g_msg_key, &mut p.g_msg, true),
            ("g_get_msg", &mut p.g_get_msg, true),
            ("g_direct", &mut p.g_direct, true),
            ("g_direct_msg", &mut p.g_direct_msg, true),
            ("g_far", &mut p.g_far, true),
            ("g_direct_far", &mut p.g_direct_far, true),
            ("cache", &mut p.cache, true),
            ("l", &mut p.l, false),
            ("l_reg", &mut p.l_reg, false),
            ("fresh", &mut p.fresh, true),
            ("turn", &mut p.turn, true),
            ("turn_coroutine", &mut p.turn_coroutine, true),
            ("turn_comm", &mut p.turn_comm, true),
            ("turn_comm_coroutine", &mut p.turn_comm_coroutine, true),
        ] {
            if let Some(x) = obj.get(key) {
                let what = if zero_ok { "non-negative" } else { "positive" };
                let x = x
                    .as_f64()
                    .filter(|x| x.is_finite() && (*x > 0.0 || (zero_ok && *x == 0.0)))
                    .ok_or_else(|| {
                        ParamsError::invalid(format!("\"{key}\" must be a {what} number, not {x}"))
                    })?;
                *slot = x;
            }
        }
        // Files of an older `mbsp params`: a registering superstep as two barriers, and no
        // distinction between data in and beyond the caches.
        if !obj.contains_key("l_reg") {
            p.l_reg = 2.0 * p.l;
        }
        if !obj.contains_key("g_far") {
            p.g_far = p.g;
        }
        if !obj.contains_key("g_direct_far") {
            p.g_direct_far = p.g_direct;
        }
        // Before the one-word direct gets were measured: a request costs what its word costs.
        if !obj.contains_key("g_direct_msg") {
            p.g_direct_msg = p.g_direct;
        }
        // Before the one-word gets were measured: a get request costs a put request's.
        if !obj.contains_key("g_get_msg") {
            p.g_get_msg = p.g_msg;
        }
        if let Some(v) = obj.get(LADDER_KEY) {
            p.g_ladder = ladder_of(v)?;
        }
        Ok(p)
    }

    /// Predicted seconds of `supersteps` supersteps moving, in all, `h` words through the
    /// process that communicates most, buffered (`direct = false`) or by direct gets.
    ///
    /// ```
    /// use mbsp::params::Params;
    /// let p = Params { g: 2e-9, l: 1e-6, ..Params::DEFAULT };
    /// assert!((p.time(2, 1000.0, false) - 4e-6).abs() < 1e-15);
    /// ```
    pub fn time(&self, supersteps: usize, h: f64, direct: bool) -> f64 {
        self.time_reg(supersteps, 0, h, direct)
    }

    /// [`Params::time`] of `supersteps` plain supersteps and `registering` ones that register
    /// or deregister ([`Params::l_reg`] each).
    ///
    /// ```
    /// use mbsp::params::Params;
    /// let p = Params { g_direct: 1e-9, l: 1e-6, l_reg: 5e-6, ..Params::DEFAULT };
    /// assert!((p.time_reg(1, 2, 1000.0, true) - 12e-6).abs() < 1e-15);
    /// ```
    pub fn time_reg(&self, supersteps: usize, registering: usize, h: f64, direct: bool) -> f64 {
        let l = supersteps as f64 * self.l + registering as f64 * self.l_reg;
        l + h * if direct { self.g_direct } else { self.g }
    }

    /// Seconds per word of bulk puts or messages for a process whose data of the superstep
    /// (what it sends, receives and combines) takes `bytes`: the [`g_ladder`](Params::g_ladder)'s
    /// rate between its rungs, else [`g`](Params::g) up to [`cache`](Params::cache) and
    /// [`g_far`](Params::g_far) past it.
    ///
    /// ```
    /// use mbsp::params::{Ladder, Params};
    /// let p = Params { g: 1e-9, g_far: 3e-9, cache: 1e6, ..Params::DEFAULT };
    /// assert_eq!((p.g_for(1e5), p.g_for(1e7)), (1e-9, 3e-9));
    /// // Measured on a ladder from 2 to 8 MB: its rates there.
    /// let g_ladder = Ladder::new(&[(2e6, 0.5e-9), (8e6, 3e-9)]).unwrap();
    /// let p = Params { g_ladder, ..p };
    /// assert_eq!((p.g_for(1e5), p.g_for(2e6), p.g_for(1e7)), (1e-9, 0.5e-9, 3e-9));
    /// ```
    pub fn g_for(&self, bytes: f64) -> f64 {
        if let Some(g) = self.g_ladder.at(bytes) {
            return g;
        }
        if bytes > self.cache {
            self.g_far
        } else {
            self.g
        }
    }

    /// How far past the caches data of `bytes` per process lies, from 0 (it stays in a
    /// cache) to 1 (it streams from memory): the [`g_ladder`](Params::g_ladder)'s
    /// [`far_share`](Ladder::far_share) where the ladder reaches `bytes`, else 0 up to
    /// [`cache`](Params::cache) and 1 past it.
    ///
    /// ```
    /// use mbsp::params::{Ladder, Params};
    /// let p = Params { cache: 1e6, ..Params::DEFAULT };
    /// assert_eq!((p.far_share(1e5), p.far_share(1e7)), (0.0, 1.0));
    /// let g_ladder = Ladder::new(&[(2e6, 1e-9), (8e6, 2e-9), (32e6, 3e-9)]).unwrap();
    /// let p = Params { g_ladder, ..p };
    /// assert_eq!((p.far_share(1e5), p.far_share(1e9)), (0.0, 1.0));
    /// assert!((p.far_share(8e6) - 0.5).abs() < 1e-12); // halfway from 1 to 3 ns per word
    /// ```
    pub fn far_share(&self, bytes: f64) -> f64 {
        match self.g_ladder.far_share(bytes) {
            Some(share) => share,
            None if bytes > self.cache => 1.0,
            None => 0.0,
        }
    }

    /// Seconds per word of direct gets of data that takes `bytes` per process: between
    /// [`g_direct`](Params::g_direct) and [`g_direct_far`](Params::g_direct_far) by
    /// [`Params::far_share`] (direct gets have no ladder of their own; where the data lies is
    /// the same for both kinds of transfer).
    ///
    /// ```
    /// use mbsp::params::{Ladder, Params};
    /// let p = Params { g_direct: 1e-9, g_direct_far: 3e-9, cache: 1e6, ..Params::DEFAULT };
    /// assert_eq!((p.g_direct_for(1e5), p.g_direct_for(1e7)), (1e-9, 3e-9));
    /// let g_ladder = Ladder::new(&[(2e6, 1e-9), (8e6, 2e-9), (32e6, 3e-9)]).unwrap();
    /// assert!((Params { g_ladder, ..p }.g_direct_for(8e6) - 2e-9).abs() < 1e-20);
    /// ```
    pub fn g_direct_for(&self, bytes: f64) -> f64 {
        let share = self.far_share(bytes);
        (1.0 - share) * self.g_direct + share * self.g_direct_far
    }

    /// These parameters for a superstep whose data takes `bytes` per process: `g` and
    /// `g_direct` are [`Params::g_for`] and [`Params::g_direct_for`] of `bytes`.
    ///
    /// ```
    /// use mbsp::params::Params;
    /// let p = Params { g: 1e-9, g_far: 3e-9, cache: 1e6, ..Params::DEFAULT };
    /// assert_eq!(p.for_data(1e7).g, 3e-9);
    /// assert_eq!(p.for_data(1e5), p);
    /// ```
    pub fn for_data(&self, bytes: f64) -> Params {
        Params {
            g: self.g_for(bytes),
            g_direct: self.g_direct_for(bytes),
            ..*self
        }
    }

    /// Predicted seconds of `supersteps` supersteps moving, through the process that
    /// communicates most, `h` words in `messages` buffered requests (puts, gets or sends):
    /// `supersteps·l + h·g + messages·(g_msg − g)` — each request costs what a one-word
    /// request costs beyond its word. An h-relation of `h` one-word puts costs `l + h·g_msg`;
    /// of a few bulk puts, about `l + h·g`.
    ///
    /// ```
    /// use mbsp::params::Params;
    /// let p = Params { g: 1e-9, g_msg: 25e-9, l: 1e-6, ..Params::DEFAULT };
    /// // 1000 one-word puts, then the same 1000 words in one put.
    /// assert!((p.time_of(1, 1000.0, 1000.0) - (1e-6 + 1000.0 * 25e-9)).abs() < 1e-15);
    /// assert!((p.time_of(1, 1000.0, 1.0) - (1e-6 + 1000.0 * 1e-9 + 24e-9)).abs() < 1e-15);
    /// ```
    pub fn time_of(&self, supersteps: usize, h: f64, messages: f64) -> f64 {
        supersteps as f64 * self.l + h * self.g + messages * (self.g_msg - self.g).max(0.0)
    }

    /// What the turns of a superstep cost in which up to `turns` processes take turns on a
    /// hardware thread, as coroutines or as threads, and in which processes communicate or
    /// not: for each process beyond the first (nothing for one),
    /// [`turn_coroutine`](Params::turn_coroutine) or [`turn`](Params::turn), and where the
    /// superstep communicates also [`turn_comm_coroutine`](Params::turn_comm_coroutine) or
    /// [`turn_comm`](Params::turn_comm).
    ///
    /// ```
    /// use mbsp::params::Params;
    /// let p = Params {
    ///     turn: 4e-6, turn_coroutine: 1e-7, turn_comm: 1e-6, turn_comm_coroutine: 2e-7,
    ///     ..Params::DEFAULT
    /// };
    /// assert_eq!(p.turns_time(1, false, true), 0.0);
    /// assert!((p.turns_time(8, false, false) - 28e-6).abs() < 1e-15);
    /// assert!((p.turns_time(8, true, false) - 7e-7).abs() < 1e-15);
    /// assert!((p.turns_time(8, false, true) - 35e-6).abs() < 1e-15);
    /// assert!((p.turns_time(8, true, true) - 21e-7).abs() < 1e-15);
    /// ```
    pub fn turns_time(&self, turns: usize, coroutines: bool, communicates: bool) -> f64 {
        let (turn, comm) = if coroutines {
            (self.turn_coroutine, self.turn_comm_coroutine)
        } else {
            (self.turn, self.turn_comm)
        };
        let each = if communicates { turn + comm } else { turn };
        turns.saturating_sub(1) as f64 * each
    }

    /// [`Params::time_of`] of `supersteps` supersteps moving `h` words in `messages` puts or
    /// sends and `gets` buffered gets: each get costs `g_get_msg − g` beyond its word.
    ///
    /// ```
    /// use mbsp::params::Params;
    /// let p = Params { g: 1e-9, g_msg: 20e-9, g_get_msg: 30e-9, l: 1e-6, ..Params::DEFAULT };
    /// // 100 one-word gets and one put of 100 words.
    /// let t = p.time_with_gets(1, 200.0, 1.0, 100.0);
    /// assert!((t - (1e-6 + 200e-9 + 19e-9 + 100.0 * 29e-9)).abs() < 1e-15);
    /// ```
    pub fn time_with_gets(&self, supersteps: usize, h: f64, messages: f64, gets: f64) -> f64 {
        self.time_of(supersteps, h, messages) + gets * (self.g_get_msg - self.g).max(0.0)
    }

    /// Predicted seconds of `h` words fetched by `requests` direct gets through the process
    /// that fetches most (no sync): `h·g_direct + requests·(g_direct_msg − g_direct)` — each
    /// `direct_get` call costs what a one-word one costs beyond its word.
    ///
    /// ```
    /// use mbsp::params::Params;
    /// let p = Params { g_direct: 1e-9, g_direct_msg: 12e-9, ..Params::DEFAULT };
    /// // 1000 words in 1000 one-word gets, then in one get.
    /// assert!((p.direct_gets(1000.0, 1000.0) - 1000.0 * 12e-9).abs() < 1e-15);
    /// assert!((p.direct_gets(1000.0, 1.0) - (1000.0 * 1e-9 + 11e-9)).abs() < 1e-15);
    /// ```
    pub fn direct_gets(&self, h: f64, requests: f64) -> f64 {
        h * self.g_direct + requests * (self.g_direct_msg - self.g_direct).max(0.0)
    }
}

/// One measured level of a parameter file.
#[derive(Clone, Debug, PartialEq)]
struct LevelEntry {
    /// `machine`, `packages`, `package`, `numa`, `core`.
    level: String,
    /// Processes measured.
    p: usize,
    /// `scattered`, `compact` (empty when the file does not say).
    policy: String,
    params: Params,
}

/// The entry of `level` measured with `p` processes under `policy`, else with `p` processes,
/// else any of `level`.
fn pick(levels: &[LevelEntry], level: &str, p: usize, policy: &str) -> Option<Params> {
    let of_level = || levels.iter().filter(|e| e.level == level);
    of_level()
        .find(|e| e.p == p && e.policy == policy)
        .or_else(|| of_level().find(|e| e.p == p))
        .or_else(|| of_level().next())
        .map(|e| e.params)
}

/// A parameter file: the whole machine's values and the measured levels. Every level must be
/// valid (a file with one bad entry is refused whole: predictions from half a file mislead).
fn parse_file(text: &str) -> Result<ParsedFile, ParamsError> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(ParamsError::Json)?;
    let obj = v
        .as_object()
        .ok_or_else(|| ParamsError::invalid("expected a JSON object"))?;
    let top = Params::from_object(obj)?;
    let mut levels = Vec::new();
    if let Some(list) = obj.get("levels") {
        let list = list
            .as_array()
            .ok_or_else(|| ParamsError::invalid("\"levels\" must be an array"))?;
        for (i, entry) in list.iter().enumerate() {
            let e = entry
                .as_object()
                .ok_or_else(|| ParamsError::invalid(format!("levels[{i}] is not an object")))?;
            let name = e.get("level").and_then(|n| n.as_str()).ok_or_else(|| {
                ParamsError::invalid(format!("levels[{i}] has no \"level\" name"))
            })?;
            let p = e.get("p").and_then(|p| p.as_u64()).unwrap_or(0) as usize;
            let policy = e.get("policy").and_then(|p| p.as_str()).unwrap_or("");
            // A level's missing keys default to the whole machine's.
            let mut params = Params::from_object(e).map_err(|m| match m {
                ParamsError::Invalid(m) => ParamsError::Invalid(format!("levels[{i}]: {m}")),
                other => other,
            })?;
            for (keys, slot, whole) in [
                (&["r"][..], &mut params.r, top.r),
                (&["r_stream"], &mut params.r_stream, top.r_stream),
                (&["g"], &mut params.g, top.g),
                (&["g_msg", "g_put1"], &mut params.g_msg, top.g_msg),
                (&["g_direct"], &mut params.g_direct, top.g_direct),
                (&["l"], &mut params.l, top.l),
                (&["fresh"], &mut params.fresh, top.fresh),
                (&["turn"], &mut params.turn, top.turn),
                (
                    &["turn_coroutine"],
                    &mut params.turn_coroutine,
                    top.turn_coroutine,
                ),
                (&["turn_comm"], &mut params.turn_comm, top.turn_comm),
                (
                    &["turn_comm_coroutine"],
                    &mut params.turn_comm_coroutine,
                    top.turn_comm_coroutine,
                ),
                (&["cache"], &mut params.cache, top.cache),
            ] {
                if !keys.iter().any(|k| e.contains_key(*k)) {
                    *slot = whole;
                }
            }
            if !e.contains_key(LADDER_KEY) {
                params.g_ladder = top.g_ladder;
            }
            // Without its own `l_reg`, `g_far`, `g_direct_far`, `g_direct_msg` or `g_get_msg`,
            // a level takes the whole machine's if the file gives one, else what its own `l`,
            // `g`, `g_direct` or `g_msg` imply.
            for (key, slot, whole, own) in [
                ("l_reg", &mut params.l_reg, top.l_reg, 2.0 * params.l),
                ("g_far", &mut params.g_far, top.g_far, params.g),
                (
                    "g_direct_far",
                    &mut params.g_direct_far,
                    top.g_direct_far,
                    params.g_direct,
                ),
                (
                    "g_direct_msg",
                    &mut params.g_direct_msg,
                    top.g_direct_msg,
                    params.g_direct,
                ),
                (
                    "g_get_msg",
                    &mut params.g_get_msg,
                    top.g_get_msg,
                    params.g_msg,
                ),
            ] {
                if !e.contains_key(key) {
                    *slot = if obj.contains_key(key) { whole } else { own };
                }
            }
            levels.push(LevelEntry {
                level: name.to_string(),
                p,
                policy: policy.to_string(),
                params,
            });
        }
    }
    // A key is absent when neither the top level nor any level gives it (g_msg under its old
    // name counts).
    let given = |key: &str| {
        let in_obj = |o: &serde_json::Map<String, serde_json::Value>| {
            o.contains_key(key) || (key == "g_msg" && o.contains_key("g_put1"))
        };
        in_obj(obj)
            || obj
                .get("levels")
                .and_then(|l| l.as_array())
                .is_some_and(|l| l.iter().filter_map(|e| e.as_object()).any(in_obj))
    };
    let absent = KEYS.iter().copied().filter(|k| !given(k)).collect();
    Ok(ParsedFile {
        top,
        levels,
        absent,
        unsteady: unsteady_in(obj),
        line_ns: line_ns_in(obj),
        cpu: cpu_in(obj),
    })
}

/// The CPU model a file records: its `cpu`, else (files of older versions) what its
/// `machine` line gives before the first comma (`"AMD EPYC, 2 hardware threads, Linux ..."`).
fn cpu_in(obj: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
    if let Some(cpu) = obj.get("cpu").and_then(|c| c.as_str()) {
        return Some(cpu.to_string());
    }
    let machine = obj.get("machine")?.as_str()?;
    let (cpu, rest) = machine.split_once(", ")?;
    rest.contains("hardware threads").then(|| cpu.to_string())
}

/// This machine's CPU model, as Linux names it (`model name` in `/proc/cpuinfo`); `None`
/// where it does not say.
///
/// ```
/// if let Some(cpu) = mbsp::params::cpu_model() {
///     assert!(!cpu.is_empty());
/// }
/// ```
pub fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("model name"))?;
    let model = line.split_once(':')?.1.trim();
    (!model.is_empty()).then(|| model.to_string())
}

/// The CPU model the parameter file in force was measured on, when it is not this machine's
/// ([`cpu_model`]): its predictions are another machine's. `None` when it is this machine's
/// model, or the file (or this machine) does not say, or no file is in force.
///
/// ```
/// if let Some(other) = mbsp::params::measured_elsewhere() {
///     println!("the BSP parameters in force were measured on another machine: {other}");
/// }
/// ```
pub fn measured_elsewhere() -> Option<&'static str> {
    static HERE: OnceLock<Option<String>> = OnceLock::new();
    let theirs = loaded().0.cpu.as_deref()?;
    let here = HERE.get_or_init(cpu_model).as_deref()?;
    (theirs != here).then_some(theirs)
}

/// Why the file's own record of the machine's state (`"machine_state"`, which `mbsp params`
/// writes) says it was busy or unsteady while it was measured: its first cause, or a phrase
/// when it gives none; `None` for a quiet machine or a file without the record.
fn unsteady_in(obj: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
    let state = obj.get("machine_state")?.as_object()?;
    if state.get("quiet")?.as_bool()? {
        return None;
    }
    let first = state
        .get("causes")
        .and_then(|c| c.as_array())
        .and_then(|c| c.first())
        .and_then(|c| c.as_str());
    Some(
        first
            .unwrap_or("the machine was busy or unsteady")
            .to_string(),
    )
}

/// The key of a level's [`Ladder`] in a parameter file: `[h, seconds per word]` pairs, `h`
/// the words each process sends (and receives), as `mbsp params` writes them.
const LADDER_KEY: &str = "cache_ladder";

/// The [`Ladder`] of a file's `cache_ladder` ([`Ladder::of_h_relations`]).
fn ladder_of(v: &serde_json::Value) -> Result<Ladder, ParamsError> {
    let bad = || {
        ParamsError::invalid(format!(
            "\"{LADDER_KEY}\" must be an array of [h, seconds per word] pairs, not {v}"
        ))
    };
    let rungs = v
        .as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|pair| match pair.as_array().map(|a| a.as_slice()) {
            Some([h, g]) => Ok((h.as_f64().ok_or_else(bad)?, g.as_f64().ok_or_else(bad)?)),
            _ => Err(bad()),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ladder::of_h_relations(&rungs)
        .map_err(|e| ParamsError::invalid(format!("\"{LADDER_KEY}\": {e}")))
}

/// The keys of a parameter file.
const KEYS: [&str; 18] = [
    "r",
    "r_stream",
    "g",
    "g_msg",
    "g_get_msg",
    "g_direct",
    "g_direct_msg",
    "g_far",
    "g_direct_far",
    "cache",
    LADDER_KEY,
    "l",
    "l_reg",
    "fresh",
    "turn",
    "turn_coroutine",
    "turn_comm",
    "turn_comm_coroutine",
];

/// A parameter file: the whole machine's values, the measured levels, and the keys it does not
/// give.
#[derive(Clone, Debug)]
struct ParsedFile {
    top: Params,
    levels: Vec<LevelEntry>,
    absent: Vec<&'static str>,
    /// The file's record says the machine was busy or unsteady when it was measured: why.
    unsteady: Option<String>,
    /// The fastest and slowest cache line's round trip between two CPUs the file's record saw
    /// while it was measured, seconds.
    line_ns: Option<(f64, f64)>,
    /// The CPU model the file was measured on, as it records it (`cpu`, or the first part of
    /// `machine` in files of older versions).
    cpu: Option<String>,
}

impl ParsedFile {
    /// No file: the defaults, every key absent.
    fn defaults() -> ParsedFile {
        ParsedFile {
            top: Params::DEFAULT,
            levels: Vec::new(),
            absent: KEYS.to_vec(),
            unsteady: None,
            line_ns: None,
            cpu: None,
        }
    }
}

/// The keys (`r`, `r_stream`, `g`, `g_msg`, `g_get_msg`, `g_direct`, `g_direct_msg`, `g_far`,
/// `g_direct_far`, `cache`, `l`, `l_reg`, `fresh`, `turn`, `turn_coroutine`, `turn_comm`,
/// `turn_comm_coroutine`) that the parameters in force do not give — neither at the top of the file nor for any level — so that
/// [`Params::DEFAULT`]'s values stand in for them: all of them when no file is in force. A
/// prediction that uses one of them is not this machine's.
///
/// ```
/// let absent = mbsp::params::defaulted();
/// if *mbsp::params::source() == mbsp::params::ParamsSource::Default {
///     assert!(absent.contains(&"g_msg"));
/// }
/// ```
pub fn defaulted() -> &'static [&'static str] {
    &loaded().0.absent
}

/// Why the parameter file in force was measured on a machine that was not quiet, as its own
/// record (`"machine_state"`, written by `mbsp params`) says: the first cause it gives; `None`
/// when it was quiet, or says nothing, or no file is in force. Predictions made with such
/// parameters carry the machine's state of that moment; the prediction lines say so.
///
/// ```
/// if let Some(why) = mbsp::params::measured_unsteady() {
///     println!("the BSP parameters were measured on a busy or unsteady machine: {why}");
/// }
/// ```
pub fn measured_unsteady() -> Option<&'static str> {
    loaded().0.unsteady.as_deref()
}

/// The fastest and slowest round trip of a cache line between two CPUs, in nanoseconds, that
/// the parameter file in force records for its measurement (`mbsp params` probes it between
/// rounds: `machine_state.line_round_trip_ns`); `None` when no file is in force or it does
/// not say. On a virtual machine the round trip moves several times over when the
/// hypervisor moves the virtual CPUs, and syncs and communication move with it: a run that
/// sees another round trip than the file's runs on another machine, in effect.
///
/// ```
/// if let Some((lo, hi)) = mbsp::params::measured_line_ns() {
///     assert!(lo <= hi);
/// }
/// ```
pub fn measured_line_ns() -> Option<(f64, f64)> {
    loaded().0.line_ns
}

/// `machine_state.line_round_trip_ns` of a file: `{"min": ns, "max": ns}`, both positive.
fn line_ns_in(obj: &serde_json::Map<String, serde_json::Value>) -> Option<(f64, f64)> {
    let line = obj.get("machine_state")?.get("line_round_trip_ns")?;
    let (lo, hi) = (line.get("min")?.as_f64()?, line.get("max")?.as_f64()?);
    (lo > 0.0 && hi >= lo && hi.is_finite()).then_some((lo, hi))
}

/// Where the parameters in force come from ([`source`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParamsSource {
    /// The file named by `MBSP_PARAMS`.
    Env(PathBuf),
    /// This machine's saved parameters ([`saved_path`], written by `mbsp params --save`).
    Saved(PathBuf),
    /// [`Params::DEFAULT`]: no file (or a file that could not be used, reported on stderr).
    Default,
}

impl std::fmt::Display for ParamsSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParamsSource::Env(p) => write!(f, "{PARAMS_ENV}={}", p.display()),
            ParamsSource::Saved(p) => write!(f, "this machine's, {}", p.display()),
            ParamsSource::Default => f.write_str("the defaults, not measured on this machine"),
        }
    }
}

/// The file name of the saved parameters under the configuration directory.
pub const SAVED_FILE: &str = "mbsp/params.json";

/// Where `mbsp params --save` stores this machine's parameters and where [`Params::current`]
/// looks when `MBSP_PARAMS` is not set: `$XDG_CONFIG_HOME/mbsp/params.json`, or
/// `$HOME/.config/mbsp/params.json` when `XDG_CONFIG_HOME` is unset, empty or relative (the
/// XDG base directory rules); `None` when neither variable gives a directory.
///
/// ```
/// if let Some(path) = mbsp::params::saved_path() {
///     assert!(path.ends_with("mbsp/params.json"));
/// }
/// ```
pub fn saved_path() -> Option<PathBuf> {
    saved_path_in(
        std::env::var_os("XDG_CONFIG_HOME"),
        std::env::var_os("HOME"),
    )
}

/// [`saved_path`] from the values of `XDG_CONFIG_HOME` and `HOME`.
fn saved_path_in(xdg: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    let absolute = |v: Option<OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    absolute(xdg)
        .or_else(|| absolute(home).map(|h| h.join(".config")))
        .map(|dir| dir.join(SAVED_FILE))
}

/// The lookup order of [`Params::current`] from the values of `MBSP_PARAMS`, `XDG_CONFIG_HOME`
/// and `HOME`: the variable if set (even to a missing file: that is an error to report, not a
/// reason to fall back), else the saved file if it exists, else the defaults.
fn locate(env: Option<OsString>, xdg: Option<OsString>, home: Option<OsString>) -> ParamsSource {
    if let Some(path) = env.filter(|v| !v.is_empty()) {
        return ParamsSource::Env(path.into());
    }
    match saved_path_in(xdg, home) {
        Some(path) if path.is_file() => ParamsSource::Saved(path),
        _ => ParamsSource::Default,
    }
}

/// Where the parameters in force ([`Params::current`]) come from.
///
/// ```
/// let from = mbsp::params::source();
/// println!("BSP parameters: {from}");
/// ```
pub fn source() -> &'static ParamsSource {
    &loaded().1
}

/// How far `predicted` is from `measured` (seconds), as a signed percentage — `+12%` — and,
/// when it misses by more than 50% either way, a warning that says so and what to do: measure
/// this machine with `mbsp params --save` (if the parameters in force are not this machine's
/// saved ones), or measure again on a quiet machine. The commands' and the profiler's
/// prediction lines use it.
///
/// ```
/// use mbsp::params::judge_prediction;
/// assert_eq!(judge_prediction(1.0, 1.12), "+12%");
/// let bad = judge_prediction(1.0, 0.11);
/// assert!(bad.starts_with("-89%: off by more than 50%"), "{bad}");
/// assert!(bad.contains("mbsp params --save"));
/// ```
pub fn judge_prediction(measured: f64, predicted: f64) -> String {
    judge_with(
        measured,
        predicted,
        source(),
        Doubt::in_force(None).as_ref(),
    )
}

/// Why the parameters in force may not be this machine's as it is now, as their file's own
/// record says: a prediction made with them that misses blames them before the model.
///
/// ```
/// use mbsp::params::Doubt;
/// let d = Doubt::Unsteady("the vCPUs moved".into());
/// assert!(d.to_string().starts_with("the BSP parameters were measured on a busy or unsteady"));
/// assert!(d.to_string().contains("(the vCPUs moved)"));
/// if let Some(doubt) = Doubt::in_force(None) {
///     println!("{doubt}");
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Doubt {
    /// Measured on another CPU model: the file's ([`measured_elsewhere`]).
    Elsewhere(String),
    /// Measured in another state of this machine than the caller's run saw (how: the caller's
    /// finding, e.g. `mbsp_tools::machine_state::other_state` on [`measured_line_ns`]).
    OtherState(String),
    /// Measured on a busy or unsteady machine: the file's cause ([`measured_unsteady`]).
    Unsteady(String),
}

impl Doubt {
    /// The strongest doubt on the parameters in force: another CPU model, else another state
    /// of this machine (`other_state`, the caller's finding; `None` for a caller that did not
    /// watch its own run), else a busy or unsteady machine while they were measured; `None`
    /// when their file says nothing against them (or no file is in force).
    pub fn in_force(other_state: Option<String>) -> Option<Doubt> {
        if let Some(cpu) = measured_elsewhere() {
            return Some(Doubt::Elsewhere(cpu.to_string()));
        }
        if let Some(how) = other_state {
            return Some(Doubt::OtherState(how));
        }
        measured_unsteady().map(|why| Doubt::Unsteady(why.to_string()))
    }

    /// The sentence that says it and what to do, naming where the parameters come from when
    /// `from` is given.
    pub fn explain(&self, from: Option<&ParamsSource>) -> String {
        let params = match from {
            Some(from) => format!("the BSP parameters ({from})"),
            None => "the BSP parameters".to_string(),
        };
        match self {
            Doubt::Elsewhere(cpu) => format!(
                "{params} were measured on another machine ({cpu}): predictions are that \
                 machine's; measure this one's (`mbsp params --save`)"
            ),
            Doubt::OtherState(how) => format!(
                "{params} were measured in another state of this machine ({how}): predictions \
                 are of that state; measure them again now (`mbsp params --save`)"
            ),
            Doubt::Unsteady(why) => format!(
                "{params} were measured on a busy or unsteady machine ({why}): predictions \
                 carry that moment's state; measure them again on a quiet machine (`mbsp \
                 params --save`)"
            ),
        }
    }
}

impl std::fmt::Display for Doubt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.explain(None))
    }
}

/// [`judge_prediction`] with the parameters from `from`, and what the file says against them.
fn judge_with(measured: f64, predicted: f64, from: &ParamsSource, doubt: Option<&Doubt>) -> String {
    if measured.is_nan() || measured <= 0.0 || !predicted.is_finite() {
        return "no measured time to compare with".into();
    }
    let off = (predicted - measured) / measured;
    let pct = format!("{:+.0}%", 100.0 * off);
    if off.abs() <= 0.5 {
        return pct;
    }
    let advice = match (from, doubt) {
        (ParamsSource::Env(_) | ParamsSource::Saved(_), Some(doubt)) => doubt.explain(Some(from)),
        (ParamsSource::Saved(_), None) => {
            "re-measure with `mbsp params --save` on a quiet machine, or the program's costs \
             are not the model's (look at the profile: MBSP_PROFILE=1)"
                .to_string()
        }
        (other, _) => format!(
            "the BSP parameters are {other}: measure this machine's with `mbsp params --save`"
        ),
    };
    format!("{pct}: off by more than 50%; {advice}")
}

/// The parameter file, read once: a file that cannot be used is reported once on stderr and
/// the defaults are used.
fn loaded() -> &'static (ParsedFile, ParamsSource) {
    static LOADED: OnceLock<(ParsedFile, ParamsSource)> = OnceLock::new();
    LOADED.get_or_init(|| {
        let from = locate(
            std::env::var_os(PARAMS_ENV),
            std::env::var_os("XDG_CONFIG_HOME"),
            std::env::var_os("HOME"),
        );
        let path = match &from {
            ParamsSource::Env(p) | ParamsSource::Saved(p) => p.clone(),
            ParamsSource::Default => return (ParsedFile::defaults(), from),
        };
        match read_file(&path) {
            Ok(file) => (file, from),
            Err(e) => {
                let name = match &from {
                    ParamsSource::Env(_) => format!("{PARAMS_ENV}={}", path.display()),
                    _ => path.display().to_string(),
                };
                eprintln!("mbsp: {name}: {e}; using the default BSP parameters");
                (ParsedFile::defaults(), ParamsSource::Default)
            }
        }
    })
}

/// A parameter file read and parsed.
fn read_file(path: &Path) -> Result<ParsedFile, String> {
    std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|text| parse_file(&text).map_err(|e| e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_read_and_default_to_the_whole_machine() {
        let ParsedFile { top, levels, .. } = parse_file(
            r#"{"g": 2e-9, "l": 1e-6, "levels": [
                {"level": "machine", "p": 4, "g": 3e-9},
                {"level": "package", "p": 2, "l": 5e-7}]}"#,
        )
        .unwrap();
        assert_eq!((top.g, top.l), (2e-9, 1e-6));
        assert_eq!(levels.len(), 2);
        assert_eq!(
            (levels[0].p, levels[0].params.g, levels[0].params.l),
            (4, 3e-9, 1e-6)
        );
        assert_eq!(
            (
                levels[1].level.as_str(),
                levels[1].params.g,
                levels[1].params.l
            ),
            ("package", 2e-9, 5e-7)
        );
    }

    #[test]
    fn a_direct_get_request_costs_its_word_in_files_that_do_not_say() {
        // An older file: no g_direct_msg anywhere; one level with a g_direct of its own.
        let ParsedFile { top, levels, .. } = parse_file(
            r#"{"g_direct": 2e-9, "levels": [
                {"level": "machine", "p": 2},
                {"level": "package", "p": 2, "g_direct": 3e-9}]}"#,
        )
        .unwrap();
        assert_eq!(top.g_direct_msg, 2e-9);
        assert_eq!(levels[0].params.g_direct_msg, 2e-9);
        assert_eq!(levels[1].params.g_direct_msg, 3e-9, "its own g_direct");
        assert_eq!(top.direct_gets(100.0, 100.0), 100.0 * 2e-9);
        // A file that gives it: its levels without one take the machine's.
        let ParsedFile { top, levels, .. } = parse_file(
            r#"{"g_direct": 2e-9, "g_direct_msg": 14e-9, "levels": [
                {"level": "machine", "p": 2},
                {"level": "package", "p": 2, "g_direct_msg": 9e-9}]}"#,
        )
        .unwrap();
        assert_eq!(top.g_direct_msg, 14e-9);
        assert_eq!(levels[0].params.g_direct_msg, 14e-9);
        assert_eq!(levels[1].params.g_direct_msg, 9e-9);
        assert!(Params::from_json(r#"{"g_direct_msg": -1}"#).is_err());
    }

    #[test]
    fn a_get_request_costs_a_put_request_in_files_that_do_not_say() {
        let ParsedFile { top, levels, .. } = parse_file(
            r#"{"g_msg": 20e-9, "levels": [
                {"level": "machine", "p": 2},
                {"level": "package", "p": 2, "g_msg": 18e-9}]}"#,
        )
        .unwrap();
        assert_eq!(top.g_get_msg, 20e-9);
        assert_eq!(levels[0].params.g_get_msg, 20e-9);
        assert_eq!(levels[1].params.g_get_msg, 18e-9, "its own g_msg");
        let ParsedFile { top, levels, .. } = parse_file(
            r#"{"g_msg": 20e-9, "g_get_msg": 31e-9, "levels": [{"level": "machine", "p": 2}]}"#,
        )
        .unwrap();
        assert_eq!((top.g_get_msg, levels[0].params.g_get_msg), (31e-9, 31e-9));
    }

    #[test]
    fn the_turns_are_read_and_files_without_them_keep_the_defaults() {
        let p = Params::from_json(
            r#"{"turn": 4e-6, "turn_coroutine": 1e-7, "turn_comm": 2e-6,
                "turn_comm_coroutine": 3e-7}"#,
        )
        .unwrap();
        assert_eq!(
            (p.turn, p.turn_coroutine, p.turn_comm, p.turn_comm_coroutine),
            (4e-6, 1e-7, 2e-6, 3e-7)
        );
        let old = Params::from_json(r#"{"l": 2e-6}"#).unwrap();
        let d = Params::DEFAULT;
        assert_eq!(
            (
                old.turn,
                old.turn_coroutine,
                old.turn_comm,
                old.turn_comm_coroutine
            ),
            (d.turn, d.turn_coroutine, d.turn_comm, d.turn_comm_coroutine)
        );
        // A level without them takes the file's.
        let f = parse_file(
            r#"{"turn": 3e-6, "turn_comm": 5e-7, "levels": [{"level": "machine", "p": 2}]}"#,
        )
        .unwrap();
        assert_eq!(
            (f.levels[0].params.turn, f.levels[0].params.turn_comm),
            (3e-6, 5e-7)
        );
        assert!(!f.absent.contains(&"turn") && f.absent.contains(&"turn_coroutine"));
        assert!(!f.absent.contains(&"turn_comm") && f.absent.contains(&"turn_comm_coroutine"));
        let e = Params::from_json(r#"{"turn": -1}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "\"turn\" must be a non-negative number, not -1"
        );
    }

    #[test]
    fn older_files_are_read_and_the_per_message_g_found_where_it_was() {
        // Before g_msg and r_stream: the top level has neither; levels have the one-word-put
        // fit as g_put1.
        let ParsedFile { top, levels, .. } = parse_file(
            r#"{"r": 2e9, "g": 1e-9, "l": 2e-7, "levels": [
                {"level": "machine", "p": 2, "policy": "scattered", "g_put1": 24e-9},
                {"level": "machine", "p": 2, "policy": "compact", "g_put1": 26e-9, "g_msg": 30e-9}]}"#,
        )
        .unwrap();
        assert_eq!(
            (top.g_msg, top.r_stream),
            (Params::DEFAULT.g_msg, Params::DEFAULT.r_stream)
        );
        assert_eq!(levels[0].params.g_msg, 24e-9);
        assert_eq!(levels[1].params.g_msg, 30e-9, "g_msg wins over g_put1");
        assert_eq!(
            levels[0].params.r, 2e9,
            "a level's missing r is the machine's"
        );
        // Picking: policy first, then any entry of that p, then any of that level.
        assert_eq!(pick(&levels, "machine", 2, "compact").unwrap().g_msg, 30e-9);
        assert_eq!(pick(&levels, "machine", 2, "").unwrap().g_msg, 24e-9);
        assert_eq!(pick(&levels, "machine", 8, "compact").unwrap().g_msg, 24e-9);
        assert_eq!(pick(&levels, "numa", 2, "compact"), None);
        let absent = parse_file(r#"{"g": 1e-9, "levels": [{"level": "machine", "g_put1": 2e-8}]}"#)
            .unwrap()
            .absent;
        assert_eq!(
            absent,
            [
                "r",
                "r_stream",
                "g_get_msg",
                "g_direct",
                "g_direct_msg",
                "g_far",
                "g_direct_far",
                "cache",
                "cache_ladder",
                "l",
                "l_reg",
                "fresh",
                "turn",
                "turn_coroutine",
                "turn_comm",
                "turn_comm_coroutine"
            ]
        );
    }

    #[test]
    fn a_registering_superstep_is_two_barriers_unless_measured() {
        // No `l_reg` anywhere: twice each entry's own l.
        let f = parse_file(
            r#"{"l": 2e-7, "levels": [{"level": "machine", "p": 2},
                                      {"level": "package", "p": 2, "l": 3e-7}]}"#,
        )
        .unwrap();
        assert_eq!(f.top.l_reg, 4e-7);
        assert_eq!(f.levels[0].params.l_reg, 4e-7);
        assert_eq!(f.levels[1].params.l_reg, 6e-7);
        // Measured at the top: levels without their own take it; a level's own wins.
        let f = parse_file(
            r#"{"l": 2e-7, "l_reg": 1e-6, "levels": [{"level": "machine", "p": 2},
                                      {"level": "package", "p": 2, "l_reg": 9e-7}]}"#,
        )
        .unwrap();
        assert_eq!(f.top.l_reg, 1e-6);
        assert_eq!(f.levels[0].params.l_reg, 1e-6);
        assert_eq!(f.levels[1].params.l_reg, 9e-7);
        assert_eq!(Params::DEFAULT.l_reg, 2.0 * Params::DEFAULT.l);
    }

    #[test]
    fn far_rates_are_the_near_ones_unless_measured() {
        let f = parse_file(
            r#"{"g": 1e-9, "g_direct": 2e-9, "levels": [
                {"level": "machine", "p": 2, "g": 3e-9},
                {"level": "package", "p": 2, "g_far": 7e-9}]}"#,
        )
        .unwrap();
        assert_eq!((f.top.g_far, f.top.g_direct_far), (1e-9, 2e-9));
        let (m, k) = (f.levels[0].params, f.levels[1].params);
        assert_eq!((m.g_far, m.g_direct_far), (3e-9, 2e-9));
        assert_eq!((k.g_far, k.g_direct_far), (7e-9, 2e-9));
        let f = parse_file(
            r#"{"g": 1e-9, "g_far": 4e-9, "cache": 65536, "levels": [
                {"level": "machine", "p": 2, "g": 3e-9}]}"#,
        )
        .unwrap();
        let m = f.levels[0].params;
        assert_eq!((m.g_far, m.cache), (4e-9, 65536.0));
        assert_eq!((m.g_for(65536.0), m.g_for(65537.0)), (3e-9, 4e-9));
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        for (text, why) in [
            ("[1]", "expected a JSON object"),
            (r#"{"g": -1}"#, "\"g\" must be a non-negative number"),
            (r#"{"r": 0}"#, "\"r\" must be a positive number"),
            (r#"{"l": "fast"}"#, "\"l\" must be a positive number"),
            (r#"{"levels": 3}"#, "\"levels\" must be an array"),
            (
                r#"{"levels": [{"p": 2}]}"#,
                "levels[0] has no \"level\" name",
            ),
            (
                r#"{"levels": [{"level": "numa", "g": -2}]}"#,
                "levels[0]: \"g\"",
            ),
            ("{", "EOF"),
        ] {
            let e = parse_file(text).unwrap_err();
            assert!(e.to_string().contains(why), "{text}: {e}");
        }
        // A flat fit (g = 0) is a measurement, not an error.
        let top = parse_file(r#"{"g": 0, "g_direct": 0}"#).unwrap().top;
        assert_eq!((top.g, top.g_direct), (0.0, 0.0));
    }

    /// A fresh directory under the system's temporary one.
    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mbsp-params-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn the_lookup_order_is_env_then_xdg_then_home_then_defaults() {
        let xdg = temp_dir("xdg");
        let home = temp_dir("home");
        let os = |p: &Path| Some(OsString::from(p));
        // Nothing saved yet: the defaults.
        assert_eq!(locate(None, os(&xdg), os(&home)), ParamsSource::Default);
        // Saved under HOME only: found when XDG_CONFIG_HOME is unset, empty or relative.
        let in_home = home.join(".config").join(SAVED_FILE);
        std::fs::create_dir_all(in_home.parent().unwrap()).unwrap();
        std::fs::write(&in_home, r#"{"l": 3e-6}"#).unwrap();
        for x in [
            None,
            Some(OsString::new()),
            Some(OsString::from("relative/dir")),
        ] {
            assert_eq!(
                locate(None, x, os(&home)),
                ParamsSource::Saved(in_home.clone())
            );
        }
        // XDG_CONFIG_HOME names the directory: HOME is not looked at, even when XDG's file
        // is missing.
        assert_eq!(locate(None, os(&xdg), os(&home)), ParamsSource::Default);
        let in_xdg = xdg.join(SAVED_FILE);
        std::fs::create_dir_all(in_xdg.parent().unwrap()).unwrap();
        std::fs::write(&in_xdg, r#"{"l": 4e-6}"#).unwrap();
        assert_eq!(
            locate(None, os(&xdg), os(&home)),
            ParamsSource::Saved(in_xdg.clone())
        );
        assert_eq!(read_file(&in_xdg).unwrap().top.l, 4e-6);
        // MBSP_PARAMS overrides both (an empty value is unset).
        let env = xdg.join("mine.json");
        assert_eq!(
            locate(os(&env), os(&xdg), os(&home)),
            ParamsSource::Env(env.clone())
        );
        assert_eq!(
            locate(Some(OsString::new()), os(&xdg), os(&home)),
            ParamsSource::Saved(in_xdg)
        );
        // No directory at all.
        assert_eq!(saved_path_in(None, None), None);
        let _ = std::fs::remove_dir_all(&xdg);
        let _ = std::fs::remove_dir_all(&home);
    }

    #[test]
    fn a_files_ladder_prices_the_sizes_it_measured() {
        // The top level's ladder: h = 65536 words each way is 1 MiB of data per process.
        let text = r#"{"g": 1e-9, "g_far": 2e-9, "cache": 1e7,
            "cache_ladder": [[65536, 0.8e-9], [262144, 0.4e-9], [1048576, 1.6e-9]],
            "levels": [{"level": "package", "p": 2},
                       {"level": "core", "p": 2, "cache_ladder": [[65536, 3e-9]]}]}"#;
        let f = parse_file(text).unwrap();
        let p = f.top;
        assert_eq!(p.g_for(1048576.0), 0.8e-9);
        assert_eq!(p.g_for(4194304.0), 0.4e-9);
        // Between rungs: between their rates; past the last and below the first, g_far and g.
        let mid = p.g_for(8e6);
        assert!(0.4e-9 < mid && mid < 1.6e-9, "{mid}");
        assert_eq!((p.g_for(2e7), p.g_for(1e5)), (2e-9, 1e-9));
        assert_eq!(p.for_data(4194304.0).g, 0.4e-9);
        // A level without its own ladder takes the whole machine's; one with its own keeps it.
        assert_eq!(f.levels[0].params.g_ladder, p.g_ladder);
        assert_eq!(f.levels[1].params.g_for(1048576.0), 3e-9);
        assert!(!f.absent.contains(&"cache_ladder"));
        // Older files: no ladder, the two rates alone.
        let old = parse_file(r#"{"g": 1e-9, "g_far": 2e-9, "cache": 1e6}"#).unwrap();
        assert!(old.top.g_ladder.is_empty() && old.absent.contains(&"cache_ladder"));
        assert_eq!(old.top.g_for(4194304.0), 2e-9);
        // A malformed ladder is an error that names the key (and the level).
        for (bad, says) in [
            (
                r#"{"cache_ladder": 3}"#,
                "\"cache_ladder\" must be an array of [h, seconds",
            ),
            (r#"{"cache_ladder": [[1, 2, 3]]}"#, "pairs"),
            (
                r#"{"cache_ladder": [[131072, 1e-9], [65536, 1e-9]]}"#,
                "sizes must increase",
            ),
            (
                r#"{"levels": [{"level": "core", "cache_ladder": [[65536, -1]]}]}"#,
                "levels[0]: \"cache_ladder\": ladder rung 0",
            ),
        ] {
            let Err(e) = parse_file(bad) else {
                panic!("{bad} was read")
            };
            let e = e.to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_file_says_the_line_round_trip_it_was_measured_with() {
        let line = |text: &str| parse_file(text).unwrap().line_ns;
        assert_eq!(line(r#"{"l": 1e-7}"#), None);
        let state = r#"{"machine_state": {"quiet": true,
            "line_round_trip_ns": {"min": 95.5, "max": 103.0}}}"#;
        assert_eq!(line(state), Some((95.5, 103.0)));
        let bad = r#"{"machine_state": {"line_round_trip_ns": {"min": 0, "max": 3}}}"#;
        assert_eq!(line(bad), None);
    }

    #[test]
    fn a_file_names_the_cpu_it_was_measured_on() {
        let cpu = |text: &str| parse_file(text).unwrap().cpu;
        assert_eq!(cpu(r#"{"l": 1e-7}"#), None);
        assert_eq!(
            cpu(r#"{"cpu": "AMD EPYC 7B13", "machine": "x, 2 hardware threads"}"#).as_deref(),
            Some("AMD EPYC 7B13")
        );
        // Older files: the machine line's first part.
        let old = r#"{"machine": "Intel(R) Xeon(R) CPU @ 2.20GHz, 2 hardware threads, Linux 6"}"#;
        assert_eq!(cpu(old).as_deref(), Some("Intel(R) Xeon(R) CPU @ 2.20GHz"));
        assert_eq!(cpu(r#"{"machine": "a laptop"}"#), None);
    }

    #[test]
    fn a_file_measured_on_an_unsteady_machine_says_why() {
        let file = |state: &str| parse_file(&format!(r#"{{"l": 1e-7{state}}}"#)).unwrap();
        assert_eq!(file("").unsteady, None);
        let quiet = r#", "machine_state": {"quiet": true, "causes": []}"#;
        assert_eq!(file(quiet).unsteady, None);
        let moved = r#", "machine_state": {"quiet": false, "causes": ["moved", "busy"]}"#;
        assert_eq!(file(moved).unsteady.as_deref(), Some("moved"));
        let bare = r#", "machine_state": {"quiet": false}"#;
        assert_eq!(
            file(bare).unsteady.as_deref(),
            Some("the machine was busy or unsteady")
        );
    }

    #[test]
    fn predictions_off_by_more_than_half_say_so() {
        let saved = ParamsSource::Saved("/x/mbsp/params.json".into());
        assert_eq!(judge_with(2.0, 2.5, &ParamsSource::Default, None), "+25%");
        assert_eq!(judge_with(2.0, 1.0, &ParamsSource::Default, None), "-50%");
        let low = judge_with(1.0, 0.11, &ParamsSource::Default, None);
        assert_eq!(
            low,
            "-89%: off by more than 50%; the BSP parameters are the defaults, not measured on \
             this machine: measure this machine's with `mbsp params --save`"
        );
        let high = judge_with(1.0, 1.6, &ParamsSource::Env("p.json".into()), None);
        assert!(
            high.starts_with(
                "+60%: off by more than 50%; the BSP parameters are MBSP_PARAMS=p.json"
            ),
            "{high}"
        );
        let again = judge_with(1.0, 3.0, &saved, None);
        assert!(
            again.starts_with("+200%: off by more than 50%; re-measure with `mbsp params --save`")
        );
        assert_eq!(
            judge_with(0.0, 1.0, &saved, None),
            "no measured time to compare with"
        );
        // A file measured on an unsteady machine: the advice names that, and the cause.
        let unsteady = judge_with(
            1.0,
            3.0,
            &saved,
            Some(&Doubt::Unsteady("the CPUs' distance changed".into())),
        );
        assert!(
            unsteady.starts_with("+200%: off by more than 50%; the BSP parameters (this machine's"),
            "{unsteady}"
        );
        assert!(unsteady.contains("busy or unsteady machine (the CPUs' distance changed)"));
        assert_eq!(
            judge_with(1.0, 1.2, &saved, Some(&Doubt::Unsteady("x".into()))),
            "+20%"
        );
        // Another CPU's parameters: the advice says whose.
        let elsewhere = judge_with(
            1.0,
            0.3,
            &saved,
            Some(&Doubt::Elsewhere("Intel Xeon".into())),
        );
        assert!(
            elsewhere.contains("were measured on another machine (Intel Xeon)"),
            "{elsewhere}"
        );
        // The defaults were never measured: their advice stands.
        let defaults = judge_with(
            1.0,
            3.0,
            &ParamsSource::Default,
            Some(&Doubt::Unsteady("x".into())),
        );
        assert!(defaults.contains("defaults"), "{defaults}");
    }
}
