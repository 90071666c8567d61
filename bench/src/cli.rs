//! The command line of `mbsp-bench`, parsed as `mbsp` parses its own: every error in one line
//! ([`parse`]), the typed value parsers of the numeric options from
//! [`mbsp_tools::command`].

use clap::Parser;
use mbsp_tools::Error;
use std::ffi::OsString;
use std::process::ExitCode;

pub use mbsp_tools::command::{Counts, EXIT_STATUS_HELP, at_least, counts, non_negative, seed};

/// Parses the program's arguments into `P`. `--help` and `--version` print and give
/// `Err(ExitCode::SUCCESS)`; any other error is printed as one line, `program subcommand:
/// message`, and gives `Err` with the usage status (2).
pub fn parse<P: Parser>(program: &str) -> Result<P, ExitCode> {
    let args: Vec<OsString> = std::env::args_os().collect();
    P::try_parse_from(&args).map_err(|e| {
        if !e.use_stderr() {
            // Help and version: clap prints them to stdout.
            let _ = e.print();
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
        // A value parser's own message names the option and the value; clap's text otherwise.
        let message = match std::error::Error::source(&e) {
            Some(source) if e.kind() == clap::error::ErrorKind::ValueValidation => {
                source.to_string()
            }
            _ => mbsp_tools::command::one_line(&e.render().to_string()),
        };
        mbsp_tools::command::report(&Error::usage(message), &prefix)
    })
}
