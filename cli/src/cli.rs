//! The command line of `mbsp`: parsing it with every error in one line ([`parse`]), and the
//! typed value parsers of its numeric options (from [`mbsp_tools::command`], shared with
//! `mbsp-bench`).

use clap::Parser;
use mbsp_tools::Error;
use std::ffi::OsString;
use std::process::ExitCode;

pub use mbsp_tools::command::{EXIT_STATUS_HELP, at_least, non_negative, seed};

/// Parses the program's arguments into `P`. `--help` and `--version` print and give
/// `Err(ExitCode::SUCCESS)`; any other error is printed as one line, `program subcommand:
/// message`, and gives `Err` with the usage status (2).
pub fn parse<P: Parser>(program: &str) -> std::result::Result<P, ExitCode> {
    let args: Vec<OsString> = std::env::args_os().collect();
    P::try_parse_from(&args).map_err(|e| {
        if !e.use_stderr() {
            // Help and version: clap prints them to stdout (over MPI ranks, rank 0 alone).
            if mbsp_tools::run_on::is_root() {
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
        mbsp_tools::command::report(&Error::usage(one_line(&e)), &prefix)
    })
}

/// A clap error as one line: a value parser's own message (it names the option and the value),
/// else clap's text as [`mbsp_tools::command::one_line`] shortens it.
fn one_line(e: &clap::Error) -> String {
    if e.kind() == clap::error::ErrorKind::ValueValidation
        && let Some(source) = std::error::Error::source(e)
    {
        return source.to_string();
    }
    mbsp_tools::command::one_line(&e.render().to_string())
}
