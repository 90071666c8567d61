//! The shape a tool asks a program to run with: [`SHAPE_ENV`].
//!
//! `mbsp affinity` runs an external program under every placement it compares; the policy
//! reaches the program through `MBSP_AFFINITY` (which every run reads), the shape — how many
//! processes the top-level run has, and how many each of them nests — through `MBSP_SHAPE`,
//! which a program that lets itself be shaped reads with [`shape_from_env`] (C:
//! `mbsp_shape_level`).

use crate::error::{Error, ErrorKind, Result};

/// The environment variable giving the process counts a program is asked to run with,
/// outermost first, separated by `x`: `4` (a flat run of 4), `2x4` (2 processes, each running
/// a nested run of 4). Set by `mbsp affinity` for the program it runs; read by
/// [`shape_from_env`].
pub const SHAPE_ENV: &str = "MBSP_SHAPE";

/// The process counts per level that [`SHAPE_ENV`] asks for, outermost first; `None` when it
/// is unset or empty. A value that is not positive counts separated by `x` is a misuse error
/// naming the variable and its value.
///
/// ```
/// // A program that runs flat on 2 processes unless told otherwise, and nests when asked.
/// let shape = mbsp::shape_from_env()?.unwrap_or(vec![2]);
/// let sums = mbsp::run(shape[0], |ctx| match shape.get(1) {
///     Some(&q) => Ok(ctx.run(q, |inner| Ok(inner.pid()))?.iter().sum::<usize>()),
///     None => Ok(0),
/// })?;
/// assert_eq!(sums.len(), shape[0]);
/// # Ok::<(), mbsp::Error>(())
/// ```
pub fn shape_from_env() -> Result<Option<Vec<usize>>> {
    match std::env::var(SHAPE_ENV) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => Err(bad(&v.to_string_lossy())),
        Ok(v) => parse_shape(&v),
    }
}

/// [`shape_from_env`] of the value `v`.
fn parse_shape(v: &str) -> Result<Option<Vec<usize>>> {
    let t = v.trim();
    if t.is_empty() {
        return Ok(None);
    }
    t.split(['x', 'X'])
        .map(|c| c.trim().parse::<usize>().ok().filter(|&n| n > 0))
        .collect::<Option<Vec<usize>>>()
        .map(Some)
        .ok_or_else(|| bad(v))
}

fn bad(v: &str) -> Error {
    Error::outside(
        ErrorKind::Misuse,
        "shape_from_env",
        format!(
            "{SHAPE_ENV}=\"{v}\" is not a shape: use positive process counts per level, \
             outermost first, separated by x (e.g. 4, or 2x4)"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_and_bad_ones_say_why() {
        assert_eq!(parse_shape("4").unwrap(), Some(vec![4]));
        assert_eq!(parse_shape(" 2x4 ").unwrap(), Some(vec![2, 4]));
        assert_eq!(parse_shape("2X2x2").unwrap(), Some(vec![2, 2, 2]));
        assert_eq!(parse_shape("").unwrap(), None);
        for v in ["0", "2x", "x4", "two", "2x-1"] {
            let e = parse_shape(v).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Misuse);
            assert!(
                e.to_string().contains(&format!("MBSP_SHAPE=\"{v}\"")),
                "{e}"
            );
        }
    }
}
