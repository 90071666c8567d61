//! `mbsp`: the command-line tool of the mbsp project (the benchmarks are `mbsp-bench`).
//!
//! * `mbsp demo` (or `mbsp` alone) — the machine, placements, BSP parameters, and the FFT and
//!   SpMV checked, timed and predicted, in under a minute.
//! * `mbsp topo` — the machine tree and the placement of a (possibly nested) plan.
//! * `mbsp params` — the BSP parameters (r, g, l) of every level of the machine tree.
//! * `mbsp fft` — one BSP FFT of random data, checked, timed, with the cost model's choice.
//! * `mbsp spmv` — one sparse matrix multiplied with the 2D BSP SpMV, checked and timed.
//! * `mbsp partition` — a sparse matrix split over p processes, Mondriaan's files written.
//! * `mbsp affinity` — kernels under several placements and nesting shapes, compared.
//!
//! Exit statuses, the same in every subcommand: [`mbsp_tools::command`].
//!
//! The code the commands share with the benchmarks and the Python package (statistics, the
//! memory preflight, parameter measurement, placements, the SpMV and FFT measurements) is in
//! the library mbsp-tools; this crate holds the command line, what is printed, written and
//! plotted, and the signal handler.
//!
//! Built with the feature `mpi` and started by an MPI launcher, `fft` and `spmv` run over the
//! launcher's ranks ([`mbsp_tools::run_on`]); `topo` and `partition` run on rank 0 (the other
//! ranks exit at once with status 0); `demo` and `params`, which measure this machine's
//! threads, are refused. Rank 0 alone prints, errors included; every rank exits with the
//! command's status.

mod affinity;
mod cli;
mod demo;
mod fft_cmd;
mod params_cmd;
mod partition_cmd;
mod spmv_cmd;
mod topo;
mod whole_file;

use clap::{Parser, Subcommand};
use mbsp_tools::command::report;
use mbsp_tools::{Error, run_on};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "mbsp",
    version,
    about = "mbsp: hierarchical BSP on NUMA machines (benchmarks: mbsp-bench)",
    after_help = cli::EXIT_STATUS_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// The project in a minute (also what `mbsp` without arguments runs): the machine tree,
    /// nested placements under both policies, the measured BSP parameters, and the FFT and SpMV
    /// verified and timed against sequential baselines and their BSP predictions.
    Demo(demo::Options),
    /// Print the machine tree and, with -p, the placement of a plan.
    Topo(topo::Args),
    /// One BSP FFT of random data: time, Gflop/s, error against sequential rustfft, and the
    /// cost model's flat/nested choice.
    Fft(fft_cmd::Options),
    /// Multiply by one sparse matrix with the 2D BSP SpMV (partitioned first), check the result
    /// against sequential CSR, print Mflop/s and the speedup.
    Spmv(spmv_cmd::Options),
    /// Partition a sparse matrix (Matrix Market, .mtx or .mtx.gz) into p parts with minimal
    /// communication volume and write Mondriaan's files PREFIX-P4, PREFIX-u4 and PREFIX-v4 for
    /// p = 4.
    Partition(partition_cmd::Options),
    /// Measure the BSP parameters (r, g, l) of every level of the machine tree under both
    /// affinity policies: a table like the BSPlib paper's Table 1, the JSON file the cost
    /// functions read (MBSP_PARAMS) and a plot of time against h with the fitted lines.
    Params(params_cmd::Args),
    /// Run kernels (stream triad, empty sync, h-relations, FFT, SpMV) and optionally a program
    /// under several placement policies and nesting shapes, repeated: medians, ranges and BSP
    /// predictions side by side. On an XML or synthetic machine: the plans side by side.
    Affinity(affinity::Options),
}

fn main() -> ExitCode {
    if let Err(e) = run_on::init() {
        return report(&e, "mbsp");
    }
    let cli = match cli::parse::<Cli>("mbsp") {
        Ok(c) => c,
        Err(status) => return status,
    };
    let command = cli
        .command
        .unwrap_or(Command::Demo(demo::Options::default()));
    let name = match &command {
        Command::Demo(_) => "mbsp demo",
        Command::Topo(_) => "mbsp topo",
        Command::Fft(_) => "mbsp fft",
        Command::Spmv(_) => "mbsp spmv",
        Command::Partition(_) => "mbsp partition",
        Command::Params(_) => "mbsp params",
        Command::Affinity(_) => "mbsp affinity",
    };
    if let Err(e) = mbsp_tools::command::preamble() {
        return report(&e, "mbsp");
    }
    if let Some(ranks) = run_on::ranks() {
        match command {
            Command::Demo(_) | Command::Params(_) | Command::Affinity(_) => {
                let e = Error::usage(format!(
                    "measures this machine's threads and does not run over MPI ranks ({ranks} \
                     here): start it without mpiexec"
                ));
                return report(&e, name);
            }
            Command::Topo(_) | Command::Partition(_) if !run_on::is_root() => {
                return ExitCode::SUCCESS;
            }
            _ => {}
        }
    }
    whole_file::on_interrupt();
    let result = match command {
        Command::Demo(o) => demo::run(&o),
        Command::Topo(a) => a.options().and_then(topo::run),
        Command::Fft(o) => fft_cmd::run(&o),
        Command::Spmv(o) => spmv_cmd::run(&o),
        Command::Partition(o) => partition_cmd::run(&o),
        Command::Params(a) => params_cmd::run(&a.options()),
        Command::Affinity(o) => affinity::run(&o),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => report(&e, name),
    }
}
