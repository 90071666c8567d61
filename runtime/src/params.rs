//! BSP machine parameters (r, g, l, ...): what `mbsp params` measures, what the profiler's
//! report and the algorithms' cost functions predict with.
//!
//! They come from [`Params::current`]: the file named by `MBSP_PARAMS` (JSON, e.g.
//! `{"l": 1.2e-6, "g": 1.6e-9, "g_direct": 0.8e-9, "fresh": 3.2e-9, "r": 1e9}`; keys may be
//! omitted; `mbsp params --json FILE` writes one), else [`Params::DEFAULT`], measured on a
//! 2-core AMD EPYC virtual machine. A file written by `mbsp params` also holds every measured
//! level of the machine tree under `"levels"`: [`Params::for_level`] picks one.

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
    /// Parameters of a small current machine (measured on a 2-core AMD EPYC VM with
    /// `mbsp-bench core`, p = 2): empty sync up to 1 µs, bulk puts ≈ 5 GB/s, direct gets
    /// ≈ 10 GB/s, first touch of fresh memory ≈ 1.6 µs per 4 KiB page. Predictions for another
    /// machine should use its own (`mbsp params --json FILE`, then `MBSP_PARAMS=FILE`).
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
    /// let p = mbsp::params::Params::current();
    /// assert!(p.l > 0.0 && p.g > 0.0);
    /// ```
    pub fn current() -> &'static Params {
        &loaded().0
    }

    /// The parameters of one level of the machine tree from the `MBSP_PARAMS` file (`level` as
    /// `mbsp params` names them: `machine`, `packages`, `package`, `numa`, `core`), preferring
    /// an entry measured with `p` processes, else any entry of that level, else
    /// [`Params::current`].
    ///
    /// ```
    /// let p = mbsp::params::Params::for_level("package", 8);
    /// assert!(p.g > 0.0);
    /// ```
    pub fn for_level(level: &str, p: usize) -> Params {
        let levels = &loaded().1;
        let of_level = || levels.iter().filter(|(name, _, _)| name == level);
        of_level()
            .find(|(_, q, _)| *q == p)
            .or_else(|| of_level().next())
            .map_or(*Params::current(), |(_, _, params)| *params)
    }

    /// Parse a JSON object with any of the keys `r`, `g`, `g_direct`, `l`, `fresh` (numbers,
    /// seconds or flop/s); missing keys keep their [`Params::DEFAULT`] values.
    ///
    /// ```
    /// let p = mbsp::params::Params::from_json(r#"{"l": 2e-6, "g": 3e-9}"#).unwrap();
    /// assert_eq!((p.l, p.g), (2e-6, 3e-9));
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
        parse_file(text).map(|(top, _)| top)
    }

    /// Parse the keys of `obj` over [`Params::DEFAULT`].
    fn from_object(
        obj: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Params, ParamsError> {
        let mut p = Params::DEFAULT;
        // r divides and l is never free; a g may be 0 (`mbsp params` reports a fit whose slope
        // came out negative, noise below its resolution, as a flat line).
        for (key, slot, zero_ok) in [
            ("r", &mut p.r, false),
            ("g", &mut p.g, true),
            ("g_direct", &mut p.g_direct, true),
            ("l", &mut p.l, false),
            ("fresh", &mut p.fresh, true),
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
        supersteps as f64 * self.l + h * if direct { self.g_direct } else { self.g }
    }
}

/// Why a text of BSP parameters could not be used ([`Params::from_json`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum ParamsError {
    /// The text is not JSON; the parser's error is the [`source`](std::error::Error::source).
    Json(serde_json::Error),
    /// The JSON does not have the expected shape or a value is out of range (the message says
    /// which key, and which entry of `"levels"`).
    Invalid(String),
}

impl ParamsError {
    fn invalid(message: impl Into<String>) -> Self {
        ParamsError::Invalid(message.into())
    }
}

impl std::fmt::Display for ParamsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParamsError::Json(e) => write!(f, "not JSON: {e}"),
            ParamsError::Invalid(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ParamsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ParamsError::Json(e) => Some(e),
            ParamsError::Invalid(_) => None,
        }
    }
}

/// One measured level of a parameter file: (level name, processes, parameters).
type LevelEntry = (String, usize, Params);

/// A parameter file: the whole machine's values and the measured levels. Every level must be
/// valid (a file with one bad entry is refused whole: predictions from half a file mislead).
fn parse_file(text: &str) -> Result<(Params, Vec<LevelEntry>), ParamsError> {
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
            // A level's missing keys default to the whole machine's.
            let mut params = Params::from_object(e).map_err(|m| match m {
                ParamsError::Invalid(m) => ParamsError::Invalid(format!("levels[{i}]: {m}")),
                other => other,
            })?;
            for (key, slot, whole) in [
                ("r", &mut params.r, top.r),
                ("g", &mut params.g, top.g),
                ("g_direct", &mut params.g_direct, top.g_direct),
                ("l", &mut params.l, top.l),
                ("fresh", &mut params.fresh, top.fresh),
            ] {
                if !e.contains_key(key) {
                    *slot = whole;
                }
            }
            levels.push((name.to_string(), p, params));
        }
    }
    Ok((top, levels))
}

/// The parameter file, read once: a file that cannot be used is reported once on stderr and
/// the defaults are used.
fn loaded() -> &'static (Params, Vec<LevelEntry>) {
    static LOADED: OnceLock<(Params, Vec<LevelEntry>)> = OnceLock::new();
    LOADED.get_or_init(|| match std::env::var_os(PARAMS_ENV) {
        None => (Params::DEFAULT, Vec::new()),
        Some(path) => {
            let read = std::fs::read_to_string(&path)
                .map_err(|e| e.to_string())
                .and_then(|text| parse_file(&text).map_err(|e| e.to_string()));
            read.unwrap_or_else(|e| {
                eprintln!(
                    "mbsp: {PARAMS_ENV}={}: {e}; using the default BSP parameters",
                    path.to_string_lossy()
                );
                (Params::DEFAULT, Vec::new())
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_read_and_default_to_the_whole_machine() {
        let (top, levels) = parse_file(
            r#"{"g": 2e-9, "l": 1e-6, "levels": [
                {"level": "machine", "p": 4, "g": 3e-9},
                {"level": "package", "p": 2, "l": 5e-7}]}"#,
        )
        .unwrap();
        assert_eq!((top.g, top.l), (2e-9, 1e-6));
        assert_eq!(levels.len(), 2);
        assert_eq!((levels[0].1, levels[0].2.g, levels[0].2.l), (4, 3e-9, 1e-6));
        assert_eq!(
            (levels[1].0.as_str(), levels[1].2.g, levels[1].2.l),
            ("package", 2e-9, 5e-7)
        );
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
        let (top, _) = parse_file(r#"{"g": 0, "g_direct": 0}"#).unwrap();
        assert_eq!((top.g, top.g_direct), (0.0, 0.0));
    }
}
