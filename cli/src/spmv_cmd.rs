//! `mbsp spmv`: one matrix, partitioned and multiplied many times by the 2D BSP SpMV, checked
//! against a sequential CSR multiply, with Mflop/s and the speedup over sequential CSR
//! ([`mbsp_tools::spmv`] measures it).

use crate::cli;
use mbsp_algorithms::sparse::{CooMatrix, mondriaan, mtx};
use mbsp_tools::spmv::{
    Csr, DEFAULT_REPS, DEFAULT_SECONDS, Per, Plan, Prepared, Variant, hier_prediction_in_force,
    measure, shared_prediction, test_x,
};
use mbsp_tools::{Error, Result, preflight, run_on};
use serde_json::json;
use std::path::PathBuf;

/// Options of `mbsp spmv`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// The Matrix Market file.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Processes [default: 2; under `mpiexec` with the `mpi` feature, the ranks, at most as
    /// many].
    #[arg(short = 'p', long = "procs", value_name = "P",
          allow_hyphen_values = true, value_parser = cli::at_least("-p", 1))]
    pub p: Option<usize>,
    /// Variant: plain (gets and puts, two supersteps), hp (direct_get and hpsend, one
    /// superstep) or hier (packages of the machine, each a nested run over its cores).
    #[arg(long, value_name = "V", default_value = "plain")]
    pub variant: VariantArg,
    /// Multiplies timed (the median of 9 batches of `reps / 9` is reported) [default: 500, or
    /// fewer when a multiply takes so long that 500 would take more than about 2 seconds].
    #[arg(long)]
    pub reps: Option<usize>,
    /// Use the partition in Mondriaan's files PREFIX-P4, PREFIX-u4, PREFIX-v4 (for -p 4; as
    /// written by `mbsp partition --out PREFIX` or Mondriaan) instead of partitioning; plain
    /// and hp only.
    #[arg(long, value_name = "PREFIX")]
    pub partition: Option<PathBuf>,
    /// Print one JSON object (matrix, p, variant, mflops, speedup, max_rel_error,
    /// partition_seconds, ...).
    #[arg(long)]
    pub json: bool,
}

/// The BSP variants, as `--variant` names them ([`Variant`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum VariantArg {
    /// Gets and puts, two supersteps per multiply.
    Plain,
    /// `direct_get` and `hpsend`, one superstep per multiply ending with a full sync (the
    /// default fan-out of `HpSpmv`).
    Hp,
    /// Puts from the owners and `hpsend`, two lazy supersteps per multiply (declared counts).
    HpPuts,
    /// Packages (plain) with a nested run over each package's cores.
    Hier,
    /// Whole vectors the processes share (`SharedSpmv`: `x` read in place, each process
    /// summing whole rows of `y`, whole cache lines of it, in place; no messages), as Python's
    /// `plan @ x`; threads only.
    Shared,
}

impl From<VariantArg> for Variant {
    fn from(v: VariantArg) -> Variant {
        match v {
            VariantArg::Plain => Variant::Plain,
            VariantArg::Hp => Variant::Hp,
            VariantArg::HpPuts => Variant::HpPuts,
            VariantArg::Hier => Variant::Hier,
            VariantArg::Shared => Variant::Shared,
        }
    }
}

/// `Ok` if `a` and `b` have the same shape and nonzero pattern (in any order).
fn same_matrix(a: &CooMatrix, b: &CooMatrix) -> Result<(), String> {
    if (a.rows, a.cols, a.nnz()) != (b.rows, b.cols, b.nnz()) {
        return Err(format!(
            "it is {} x {} with {} nonzeros, the matrix is {} x {} with {}",
            b.rows,
            b.cols,
            b.nnz(),
            a.rows,
            a.cols,
            a.nnz()
        ));
    }
    let pattern = |m: &CooMatrix| {
        let mut v: Vec<(u32, u32)> = m
            .row_idx
            .iter()
            .copied()
            .zip(m.col_idx.iter().copied())
            .collect();
        v.sort_unstable();
        v
    };
    match pattern(a).iter().zip(&pattern(b)).find(|(x, y)| x != y) {
        Some((x, y)) => Err(format!(
            "the nonzero patterns differ (the matrix has ({}, {}) where the partition has ({}, {}), 1-based)",
            x.0 + 1,
            x.1 + 1,
            y.0 + 1,
            y.1 + 1
        )),
        None => Ok(()),
    }
}

/// Progress on stderr, from the process that prints ([`run_on::is_root`]).
fn progress(line: std::fmt::Arguments) {
    if run_on::is_root() {
        eprintln!("{line}");
    }
}

/// Runs `mbsp spmv`.
pub fn run(o: &Options) -> Result<()> {
    let variant = Variant::from(o.variant);
    if variant == Variant::Hier {
        run_on::threads_only(
            "--variant hier",
            "its top level is the machine's packages; use plain or hp over ranks",
        )?;
    }
    if variant == Variant::Shared {
        run_on::threads_only(
            "--variant shared",
            "its processes share x and y in memory; use plain or hp over ranks",
        )?;
    }
    let p = run_on::procs(o.p, 2)?;
    let batches = 9;
    let per = match o.reps {
        Some(reps) => Per::Exactly((reps / batches).max(1)),
        None => Per::AtMost(DEFAULT_REPS / batches),
    };
    let name = o
        .file
        .file_name()
        .map_or("?".into(), |n| n.to_string_lossy().into_owned());
    preflight::spmv_file(&o.file, p)?;
    let mut a = mtx::read_path(&o.file).map_err(|e| Error::io("").with_source(e))?;
    preflight::spmv_matrix(&a, p)?;
    let prep = if let Some(prefix) = &o.partition {
        if variant == Variant::Hier {
            return Err(Error::usage(
                "--partition: the hier variant partitions each level itself; use --variant \
                 plain or hp with a partition file",
            ));
        }
        let (b, d) = mondriaan::read(prefix, p).map_err(|e| Error::io("").with_source(e))?;
        same_matrix(&a, &b).map_err(|e| {
            Error::usage(format!(
                "--partition {}: the partition is for another matrix than {name}: {e}",
                prefix.display()
            ))
        })?;
        progress(format_args!(
            "spmv: {name}: {} x {}, {} nonzeros; partition read from {}-P{}",
            b.rows,
            b.cols,
            b.nnz(),
            prefix.display(),
            p
        ));
        a = b; // the same matrix, in the order of the partition file
        Prepared::from_distribution(&a, d)?
    } else {
        progress(format_args!(
            "spmv: {name}: {} x {}, {} nonzeros; partitioning for p = {p}",
            a.rows,
            a.cols,
            a.nnz(),
        ));
        Prepared::new(&a, p, variant)?
    };
    let x = test_x(a.cols);
    let each = match per {
        Per::Exactly(n) => format!("{n}"),
        Per::AtMost(n) => format!(
            "up to {n} (fewer if that would take over {DEFAULT_SECONDS} s; --reps to insist)"
        ),
    };
    progress(format_args!(
        "spmv: sequential CSR and BSP 2D {} at p = {p}, interleaved: {batches} batches of {each} \
         multiplies each",
        variant.name(),
    ));
    let csr = Csr::new(&a);
    // What the machine did while the multiplies ran (this rank's machine over ranks).
    let mut watch = mbsp_tools::machine_state::Watch::start();
    let m = measure(&a, &csr, &x, &prep, variant, batches, per)?;
    watch.mark();
    let state = watch.state();
    // The plain and hp multiplies' local rate is timed in the batches themselves
    // (`Measured::seconds_per_nz`); the shared and hierarchical predictions time their local
    // phases here.
    let shared_predicted = match &prep.plan {
        Plan::Flat(plan) if variant == Variant::Shared => {
            shared_prediction(plan, &mbsp_tools::params::flat(plan.p()))?
        }
        Plan::Flat(_) | Plan::Hier(_) => None,
    };
    let hier_predicted = match &prep.plan {
        Plan::Hier(plan) => hier_prediction_in_force(plan, p)?,
        Plan::Flat(_) => None,
    };
    // Over ranks, the others are done: rank 0 has the results.
    let Some(m) = m else {
        return Ok(());
    };
    let (t_bsp, t_seq, max_rel_error) = (m.bsp, m.seq, m.max_rel_error);
    let per_nz = match &prep.plan {
        Plan::Flat(plan) if variant != Variant::Shared => m.seconds_per_nz(plan),
        Plan::Flat(_) | Plan::Hier(_) => None,
    };
    let partition_seconds = prep.partition_seconds;
    let flops = 2.0 * a.nnz() as f64;
    let mflops = flops / t_bsp / 1e6;
    let speedup = m.ratio;
    let predicted = match (&prep.plan, per_nz) {
        (Plan::Flat(plan), Some(per_nz)) => {
            let params = mbsp_tools::params::flat(plan.p());
            Some(if variant == Variant::HpPuts {
                plan.predict_puts(&params, per_nz)
            } else {
                plan.predict(&params, per_nz, variant.predicts_hp())
            })
        }
        _ => hier_predicted.or(shared_predicted),
    };
    if o.json {
        let v = json!({
            "matrix": name, "p": p, "variant": variant.name(), "mflops": mflops,
            "speedup": speedup, "max_rel_error": max_rel_error,
            "partition_seconds": partition_seconds, "sequential_mflops": flops / t_seq / 1e6,
            "volume": prep.volume, "max_h": prep.max_h, "nnz": a.nnz(), "m": a.rows, "n": a.cols,
            "packages": prep.shape.0, "cores_per_package": prep.shape.1,
            "seconds": t_bsp, "predicted_seconds": predicted,
            "machine_state": state.json(),
        });
        println!("{v}");
    } else {
        let shape = if variant == Variant::Hier {
            format!(" ({} packages x {} cores)", prep.shape.0, prep.shape.1)
        } else {
            String::new()
        };
        println!(
            "{name}: {} x {}, nnz {}, p = {}{shape}, {}: {mflops:.0} Mflop/s ({:.1} µs per multiply), \
             sequential CSR {:.0} Mflop/s, speedup {speedup:.2}; max relative error {max_rel_error:.1e}; \
             partition: volume {}, max h {}, {partition_seconds:.2} s{}",
            a.rows,
            a.cols,
            a.nnz(),
            p,
            variant.name(),
            t_bsp * 1e6,
            flops / t_seq / 1e6,
            prep.volume,
            prep.max_h,
            predicted.map_or(String::new(), |t| format!(
                "; BSP prediction {:.1} µs ({})",
                t * 1e6,
                mbsp_algorithms::cost::judge_prediction(t_bsp, t)
            ))
        );
        println!("{}", state.line());
    }
    if max_rel_error > 1e-12 {
        return Err(Error::run(format!(
            "result differs from sequential CSR: max relative error {max_rel_error:e}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn every_variant_has_its_command_line_name() {
        for v in VariantArg::value_variants() {
            let name = v.to_possible_value().unwrap().get_name().to_string();
            assert_eq!(Variant::from(*v).name(), name);
        }
        assert_eq!(VariantArg::value_variants().len(), Variant::ALL.len());
    }
}
