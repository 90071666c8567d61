//! BSP parameters and the cost functions that choose between algorithms.
//!
//! A superstep in which the largest number of 8-byte words any process sends or receives is `h`
//! costs `l + h·g` seconds; the algorithms here compare such sums to pick, for example, a
//! one-superstep broadcast (`h = (p-1)·n`) or a two-phase one (`h ≈ 2n`, two more supersteps).
//!
//! Two values of `g` matter on shared memory: buffered communication (puts, messages) copies each
//! word twice — into an outbox and out of it — while a direct get copies it once, straight from
//! the source. A superstep that changes registrations costs a second barrier.
//!
//! The parameters come from [`Params::current`]: the file named by `MBSP_PARAMS` (JSON, e.g.
//! `{"l": 1.2e-6, "g": 1.6e-9, "g_direct": 0.8e-9, "fresh": 3.2e-9, "r": 1e9}`; keys may be
//! omitted), else
//! [`Params::DEFAULT`], measured on a 2-core AMD EPYC virtual machine with `mbsp bench core`.

use std::sync::OnceLock;

/// The environment variable naming a JSON file of BSP parameters.
pub const PARAMS_ENV: &str = "MBSP_PARAMS";

/// BSP machine parameters, in seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    /// Computation rate in flop/s.
    pub r: f64,
    /// Seconds per 8-byte word of a full h-relation of bulk puts or messages.
    pub g: f64,
    /// Seconds per 8-byte word copied by direct gets (one copy, reader-driven).
    pub g_direct: f64,
    /// Seconds per superstep (an empty sync).
    pub l: f64,
    /// Seconds per 8-byte word of freshly allocated memory written for the first time (page
    /// faults and zeroing: scratch space of some algorithms).
    pub fresh: f64,
}

impl Params {
    /// Parameters measured on the development machine (2-core AMD EPYC VM, `mbsp bench core`,
    /// p = 2): empty sync 0.05–1 µs (the machine switches between a fast and a slow state),
    /// bulk puts ≈ 5 GB/s, direct gets ≈ 10 GB/s, first touch of fresh memory ≈ 1.6 µs per
    /// 4 KiB page.
    pub const DEFAULT: Params = Params {
        r: 1.0e9,
        g: 1.6e-9,
        g_direct: 0.8e-9,
        l: 1.0e-6,
        fresh: 3.2e-9,
    };

    /// The parameters in force: read once from the file named by `MBSP_PARAMS`, or
    /// [`Params::DEFAULT`]. A file that cannot be read or parsed is reported once on stderr and
    /// the defaults are used.
    ///
    /// ```
    /// let p = mbsp_algorithms::cost::Params::current();
    /// assert!(p.l > 0.0 && p.g > 0.0);
    /// ```
    pub fn current() -> &'static Params {
        static CURRENT: OnceLock<Params> = OnceLock::new();
        CURRENT.get_or_init(|| match std::env::var_os(PARAMS_ENV) {
            None => Params::DEFAULT,
            Some(path) => {
                let read = std::fs::read_to_string(&path)
                    .map_err(|e| e.to_string())
                    .and_then(|text| Params::from_json(&text));
                read.unwrap_or_else(|e| {
                    eprintln!(
                        "mbsp: {PARAMS_ENV}={}: {e}; using the default BSP parameters",
                        path.to_string_lossy()
                    );
                    Params::DEFAULT
                })
            }
        })
    }

    /// Parse a JSON object with any of the keys `r`, `g`, `g_direct`, `l`, `fresh` (numbers,
    /// seconds or flop/s); missing keys keep their [`Params::DEFAULT`] values.
    ///
    /// ```
    /// let p = mbsp_algorithms::cost::Params::from_json(r#"{"l": 2e-6, "g": 3e-9}"#).unwrap();
    /// assert_eq!((p.l, p.g), (2e-6, 3e-9));
    /// ```
    pub fn from_json(text: &str) -> Result<Params, String> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let obj = v.as_object().ok_or("expected a JSON object")?;
        let mut p = Params::DEFAULT;
        for (key, slot) in [
            ("r", &mut p.r),
            ("g", &mut p.g),
            ("g_direct", &mut p.g_direct),
            ("l", &mut p.l),
            ("fresh", &mut p.fresh),
        ] {
            if let Some(x) = obj.get(key) {
                let x = x
                    .as_f64()
                    .filter(|x| x.is_finite() && *x > 0.0)
                    .ok_or_else(|| format!("\"{key}\" must be a positive number, not {x}"))?;
                *slot = x;
            }
        }
        Ok(p)
    }

    /// Predicted seconds of `supersteps` supersteps moving, in all, `h` words through the
    /// process that communicates most, buffered (`direct = false`) or by direct gets.
    ///
    /// ```
    /// use mbsp_algorithms::cost::Params;
    /// let p = Params { g: 2e-9, l: 1e-6, ..Params::DEFAULT };
    /// assert!((p.time(2, 1000.0, false) - 4e-6).abs() < 1e-15);
    /// ```
    pub fn time(&self, supersteps: usize, h: f64, direct: bool) -> f64 {
        supersteps as f64 * self.l + h * if direct { self.g_direct } else { self.g }
    }
}

/// Words (8 bytes, rounded up) taken by `n` elements of `elem` bytes.
pub fn words(n: usize, elem: usize) -> f64 {
    (n * elem).div_ceil(8) as f64
}
