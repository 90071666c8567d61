//! `mbsp`: the command-line tool of the mbsp project.
//!
//! * `mbsp bench core` — synchronisation and communication costs of the runtime against
//!   baselines (spinning barrier, `std::sync::Barrier`, memcpy) measured in the same run.

mod core_bench;
mod floor;
mod machine;
mod stats;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "mbsp",
    version,
    about = "mbsp: hierarchical BSP on NUMA machines"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a benchmark.
    Bench {
        #[command(subcommand)]
        which: Bench,
    },
}

#[derive(Subcommand)]
enum Bench {
    /// Empty-sync latency, one-word put + sync, bulk put throughput and an oversubscribed ring,
    /// against a spinning barrier, std::sync::Barrier and memcpy.
    Core {
        /// Samples per figure (the median is printed).
        #[arg(long, default_value_t = 7)]
        samples: usize,
        /// A seconds-long smoke run; the numbers are not meaningful.
        #[arg(long)]
        quick: bool,
    },
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Command::Bench { which } => match which {
            Bench::Core { samples, quick } => {
                let mut o = if quick {
                    core_bench::Options::quick()
                } else {
                    core_bench::Options::full()
                };
                if !quick {
                    o.samples = samples.max(1);
                }
                core_bench::run(&o);
            }
        },
    }
}
