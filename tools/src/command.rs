//! What the project's commands (`mbsp`, `mbsp-bench`) share around their work, without their
//! argument parser: the exit statuses, the one-line report of an error, the typed parsers of
//! their numeric options, the checks before any command runs ([`preamble`]) and the message of
//! an interrupt.
//!
//! Every command reports a failure as one line on stderr (`mbsp fft: ...`, control characters
//! escaped) and exits with the status of its class ([`status`]), the same in every
//! subcommand:
//!
//! | status | class ([`ErrorKind`]) | examples |
//! |---|---|---|
//! | 0 | success | |
//! | 1 | [`Run`](ErrorKind::Run): a run failed after it started | a BSP run's error, a result that fails its check |
//! | 2 | [`Usage`](ErrorKind::Usage): the request cannot be carried out as asked | a bad option or value (the argument parser's errors too), options that do not go together, a request that cannot fit in memory, an unusable `MBSP_PARAMS` file |
//! | 3 | [`Io`](ErrorKind::Io): an input or output file | a matrix or topology file that cannot be read or is malformed, an output file that cannot be written (a full disk) |
//! | 130 | [`Interrupted`](ErrorKind::Interrupted) | SIGINT (Ctrl-C), SIGTERM, SIGHUP |
//!
//! A panic (a bug) exits with 101, as Rust programs do.

use crate::error::{Error, ErrorKind, Result};
use mbsp_algorithms::text::escaped;
use mbsp_algorithms::whole_file::Abandoned;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The exit status of a command that fails with an error of `kind` (the module's table).
///
/// ```
/// use mbsp_tools::{ErrorKind, command::status};
/// assert_eq!(status(ErrorKind::Usage), 2);
/// assert_eq!(status(ErrorKind::Interrupted), 130);
/// ```
pub fn status(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::Run => 1,
        ErrorKind::Usage => 2,
        ErrorKind::Io => 3,
        ErrorKind::Interrupted => 130,
    }
}

/// The exit statuses, for the `--help` text of the commands (the module's table, shorter).
pub const EXIT_STATUS_HELP: &str = "\
Exit status, the same for every command (errors are one line on stderr):
  0    success
  1    a run failed: a BSP run's error, a result that fails its check
  2    bad arguments: a bad option or value, options that do not go together, a request
       that cannot fit in memory, an unusable MBSP_PARAMS file
  3    an input or output file: cannot be read, is malformed, cannot be written
  130  interrupted (SIGINT, SIGTERM, SIGHUP); output files are left whole or not at all";

/// The line that reports `e` for `command`: `command: message`, control characters escaped (a
/// message may quote a path or input, and raw control bytes must not reach the terminal),
/// ending in a newline.
///
/// ```
/// let e = mbsp_tools::Error::usage("bad \u{1b}[2J value");
/// assert_eq!(mbsp_tools::command::line(&e, "mbsp fft"), "mbsp fft: bad \\u{1b}[2J value\n");
/// ```
pub fn line(e: &Error, command: &str) -> String {
    format!("{command}: {}\n", escaped(&e.to_string()))
}

/// Prints the [`line()`] of `e` on stderr (over MPI ranks, on rank 0 alone: every rank meets the
/// same error; [`crate::run_on::is_root`]) and returns the exit status of its class.
pub fn report(e: &Error, command: &str) -> ExitCode {
    if crate::run_on::is_root() {
        // One write of the whole line: stderr is unbuffered and `eprintln!` writes the pieces
        // of its format one by one, so the lines of processes that share a pipe (ranks under
        // mpiexec) could interleave mid-line.
        let _ = std::io::stderr()
            .lock()
            .write_all(line(e, command).as_bytes());
    }
    ExitCode::from(status(e.kind()))
}

/// An argument parser's error text (several lines: a label, the message, usage, a hint) as one
/// line: the lines without the `error: ` label, the `Usage:` and `For more information` lines,
/// joined by `; ` (or a space after a colon).
///
/// ```
/// let text = "error: unexpected argument '--x' found\n\n  tip: to pass '--x' as a value, use \
///             '-- --x'\n\nUsage: mbsp fft [OPTIONS] --n <N>\n\nFor more information, try '--help'.\n";
/// assert_eq!(
///     mbsp_tools::command::one_line(text),
///     "unexpected argument '--x' found; tip: to pass '--x' as a value, use '-- --x'"
/// );
/// ```
pub fn one_line(text: &str) -> String {
    let parts = text
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information")
        })
        .map(|l| l.strip_prefix("error: ").unwrap_or(l));
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
/// is a usage error, not a warning: the predictions printed would silently come from the
/// defaults. It is read whole, but no more than [`PARAMS_FILE_LIMIT`] bytes of it.
pub fn preamble() -> Result<()> {
    let (path, named) = match std::env::var_os(mbsp_algorithms::cost::PARAMS_ENV) {
        Some(path) if !path.is_empty() => (PathBuf::from(path), true),
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
fn read_bounded(path: &Path, limit: u64) -> std::result::Result<String, String> {
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
/// let parse = mbsp_tools::command::at_least("-p", 1);
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
/// let parse = mbsp_tools::command::non_negative("--eps");
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
/// let parse = mbsp_tools::command::seed("--seed");
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
/// use mbsp_tools::command::{Counts, counts};
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

/// Paths for a message, comma-separated (control characters escaped).
fn list(paths: &[PathBuf]) -> String {
    let shown: Vec<String> = paths
        .iter()
        .map(|p| escaped(&p.display().to_string()))
        .collect();
    shown.join(", ")
}

/// The message of an interrupt, once every output file was dealt with
/// ([`mbsp_algorithms::whole_file::abandon`]): what was discarded, what had been written, and
/// that nothing else was changed.
///
/// ```
/// use mbsp_algorithms::whole_file::Abandoned;
/// assert_eq!(
///     mbsp_tools::command::interrupted(&Abandoned::default()),
///     "interrupted; no output file was changed"
/// );
/// ```
pub fn interrupted(a: &Abandoned) -> String {
    let mut msg = String::from("interrupted");
    if !a.discarded.is_empty() {
        let verb = if a.discarded.len() == 1 {
            "was"
        } else {
            "were"
        };
        msg.push_str(&format!(
            "; the unfinished {} {verb} discarded",
            list(&a.discarded)
        ));
    }
    if a.written.is_empty() {
        msg.push_str("; no output file was changed");
    } else {
        msg.push_str(&format!(
            "; written whole before: {}; no other output file was changed",
            list(&a.written)
        ));
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_distinct_per_class() {
        let all = [
            ErrorKind::Run,
            ErrorKind::Usage,
            ErrorKind::Io,
            ErrorKind::Interrupted,
        ];
        let mut statuses: Vec<u8> = all.iter().map(|&k| status(k)).collect();
        statuses.sort();
        statuses.dedup();
        assert_eq!(statuses, [1, 2, 3, 130]);
    }

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
            assert_eq!(e.kind(), ErrorKind::Usage);
            assert!(e.to_string().starts_with(&format!("--eps {bad}: ")), "{e}");
        }
        assert!(seed("--seed")("x").is_err());
        let procs = counts("--procs");
        assert_eq!(procs("2,4, 8").unwrap(), Counts(vec![2, 4, 8]));
        for bad in ["2,0", "2,,4", "x", ""] {
            assert!(procs(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_interrupt_message_says_what_happened() {
        let a = Abandoned {
            discarded: vec!["out/m-P4".into(), "out/m-u4".into()],
            written: vec!["t.csv".into()],
        };
        assert_eq!(
            interrupted(&a),
            "interrupted; the unfinished out/m-P4, out/m-u4 were discarded; written whole \
             before: t.csv; no other output file was changed"
        );
        assert_eq!(
            interrupted(&Abandoned::default()),
            "interrupted; no output file was changed"
        );
        let a = Abandoned {
            discarded: vec!["a\u{1b}[2J.svg".into()],
            written: vec![],
        };
        assert_eq!(
            interrupted(&a),
            "interrupted; the unfinished a\\u{1b}[2J.svg was discarded; no output file was \
             changed"
        );
    }
}
