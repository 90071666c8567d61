//! What `mbsp` and `mbsp-bench` share around their commands: parsing the command line with
//! every error in one line ([`parse`]), the checks before any command runs ([`preamble`]), the
//! typed value parsers of their numeric options, and the exit statuses in `--help`.

use crate::error::{Error, Result};
use clap::Parser;
use std::ffi::OsString;
use std::process::ExitCode;

/// The exit statuses, for the `--help` text of both commands ([`crate::error`] has the table).
pub const EXIT_STATUS_HELP: &str = "\
Exit status, the same for every command (errors are one line on stderr):
  0    success
  1    a run failed: a BSP run's error, a result that fails its check
  2    bad arguments: a bad option or value, options that do not go together, a request
       that cannot fit in memory, an unusable MBSP_PARAMS file
  3    an input or output file: cannot be read, is malformed, cannot be written
  130  interrupted (SIGINT, SIGTERM, SIGHUP); output files are left whole or not at all";

/// Parses the program's arguments into `P`. `--help` and `--version` print and give
/// `Err(ExitCode::SUCCESS)`; any other error is printed as one line, `program subcommand:
/// message`, and gives `Err` with the usage status (2).
pub fn parse<P: Parser>(program: &str) -> std::result::Result<P, ExitCode> {
    let args: Vec<OsString> = std::env::args_os().collect();
    P::try_parse_from(&args).map_err(|e| {
        if !e.use_stderr() {
            // Help and version: clap prints them to stdout (over MPI ranks, rank 0 alone).
            if crate::run_on::is_root() {
                let _ = e.print();
            }
            return ExitCode::SUCCESS;
        }
        let command = P::command();
        let sub = args.iter().skip(1).find_map(|a| {
            let a = a.to_str()?;
            command
                .get_subcommands()
                .find(|c| c.get_name() == a)
                .map(|c| c.get_name().to_string())
        });
        let prefix = match sub {
            Some(s) => format!("{program} {s}"),
            None => program.to_string(),
        };
        Error::usage(one_line(&e)).report(&prefix)
    })
}

/// A clap error as one line: a value parser's own message (it names the option and the value),
/// else clap's text without its `error:` label, usage and hint lines.
fn one_line(e: &clap::Error) -> String {
    if e.kind() == clap::error::ErrorKind::ValueValidation
        && let Some(source) = std::error::Error::source(e)
    {
        return source.to_string();
    }
    let text = e.render().to_string();
    let parts: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information")
        })
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .collect();
    let mut line = String::new();
    for part in parts {
        if !line.is_empty() {
            line.push_str(if line.ends_with(':') { " " } else { "; " });
        }
        line.push_str(part);
    }
    line
}

/// Checks made before any command runs: a parameter file named by `MBSP_PARAMS`, or else the
/// one `mbsp params --save` stored ([`mbsp_algorithms::cost::saved_path`]), that cannot be used
/// is an error of the command line (usage, exit status 2), not a warning: the predictions
/// printed would silently come from the defaults. It is read whole, but no more than
/// [`PARAMS_FILE_LIMIT`] bytes of it.
pub fn preamble() -> Result<()> {
    let (path, named) = match std::env::var_os(mbsp_algorithms::cost::PARAMS_ENV) {
        Some(path) if !path.is_empty() => (std::path::PathBuf::from(path), true),
        _ => match mbsp_algorithms::cost::saved_path().filter(|p| p.is_file()) {
            Some(saved) => (saved, false),
            None => return Ok(()),
        },
    };
    let checked = read_bounded(&path, PARAMS_FILE_LIMIT).and_then(|text| {
        mbsp_algorithms::cost::Params::from_json(&text)
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    checked.map_err(|e| {
        if named {
            Error::usage(format!(
                "{}={}: {e} (write one with `mbsp params --json FILE`)",
                mbsp_algorithms::cost::PARAMS_ENV,
                path.display()
            ))
        } else {
            Error::usage(format!(
                "{}: {e} (this machine's saved BSP parameters: write them again with `mbsp \
                 params --save`, or remove the file)",
                path.display()
            ))
        }
    })
}

/// The most bytes a parameter file may hold: the files `mbsp params --json` writes are a few
/// kilobytes; anything this large is not one (and `/dev/zero` must not be read to the end).
pub const PARAMS_FILE_LIMIT: u64 = 16 << 20;

/// The text of `path`, if it holds at most `limit` bytes of UTF-8.
fn read_bounded(path: &std::path::Path, limit: u64) -> std::result::Result<String, String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(limit + 1).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            "the file is larger than {limit} bytes, too large for a parameter file"
        ));
    }
    String::from_utf8(bytes).map_err(|_| "the file is not UTF-8 text".to_string())
}

/// A parser of an integer of at least `min` for the option `flag`; its error names both
/// (`-p 0: need an integer >= 1`).
///
/// ```
/// let parse = mbsp_cli::cli::at_least("-p", 1);
/// assert_eq!(parse("4").unwrap(), 4);
/// assert_eq!(parse("0").unwrap_err().to_string(), "-p 0: need an integer >= 1");
/// assert!(parse("two").unwrap_err().to_string().starts_with("-p two: "));
/// ```
pub fn at_least(
    flag: &'static str,
    min: usize,
) -> impl Fn(&str) -> Result<usize> + Clone + Send + Sync + 'static {
    move |s| match s.trim().parse::<usize>() {
        Ok(v) if v >= min => Ok(v),
        _ => Err(Error::usage(format!(
            "{flag} {s}: need an integer >= {min}"
        ))),
    }
}

/// A parser of a finite number >= 0 for the option `flag` (an imbalance bound: an infinite one
/// would let one part take everything).
///
/// ```
/// let parse = mbsp_cli::cli::non_negative("--eps");
/// assert_eq!(parse("0.03").unwrap(), 0.03);
/// assert!(parse("-1").unwrap_err().to_string().starts_with("--eps -1: "));
/// assert!(parse("inf").is_err());
/// ```
pub fn non_negative(
    flag: &'static str,
) -> impl Fn(&str) -> Result<f64> + Clone + Send + Sync + 'static {
    move |s| match s.trim().parse::<f64>() {
        Ok(e) if e.is_finite() && e >= 0.0 => Ok(e),
        _ => Err(Error::usage(format!(
            "{flag} {s}: need a finite number >= 0 (e.g. 0.03 for 3% imbalance)"
        ))),
    }
}

/// A parser of a seed (an unsigned 64-bit integer) for the option `flag`.
///
/// ```
/// let parse = mbsp_cli::cli::seed("--seed");
/// assert_eq!(parse("7").unwrap(), 7);
/// assert!(parse("-1").unwrap_err().to_string().starts_with("--seed -1: "));
/// ```
pub fn seed(flag: &'static str) -> impl Fn(&str) -> Result<u64> + Clone + Send + Sync + 'static {
    move |s| {
        s.trim().parse::<u64>().map_err(|_| {
            Error::usage(format!(
                "{flag} {s}: need an integer in 0..=18446744073709551615"
            ))
        })
    }
}

/// Positive integers separated by commas (`--procs 2,4,8`), parsed as one value so that an
/// error quotes the list as typed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counts(pub Vec<usize>);

/// A parser of [`Counts`] for the option `flag`.
///
/// ```
/// use mbsp_cli::cli::{Counts, counts};
/// let parse = counts("--procs");
/// assert_eq!(parse("2, 4,8").unwrap(), Counts(vec![2, 4, 8]));
/// assert_eq!(
///     parse("2,0").unwrap_err().to_string(),
///     "--procs 2,0: need positive integers separated by commas, e.g. 2,4,8"
/// );
/// ```
pub fn counts(
    flag: &'static str,
) -> impl Fn(&str) -> Result<Counts> + Clone + Send + Sync + 'static {
    move |s| {
        let v: Option<Vec<usize>> = s
            .split(',')
            .map(|x| x.trim().parse::<usize>().ok().filter(|&p| p > 0))
            .collect();
        v.map(Counts).ok_or_else(|| {
            Error::usage(format!(
                "{flag} {s}: need positive integers separated by commas, e.g. 2,4,8"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_checked() {
        let p = at_least("-p", 1);
        assert_eq!(p("4").unwrap(), 4);
        for bad in ["0", "-1", "two", ""] {
            assert!(p(bad).is_err(), "{bad}");
        }
        let eps = non_negative("--eps");
        assert_eq!(eps("0").unwrap(), 0.0);
        for bad in ["-1", "abc", "nan", "inf", ""] {
            let e = eps(bad).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Usage);
            assert!(e.to_string().starts_with(&format!("--eps {bad}: ")), "{e}");
        }
        assert!(seed("--seed")("x").is_err());
        let procs = counts("--procs");
        assert_eq!(procs("2,4, 8").unwrap(), Counts(vec![2, 4, 8]));
        for bad in ["2,0", "2,,4", "x", ""] {
            assert!(procs(bad).is_err(), "{bad}");
        }
    }
}
