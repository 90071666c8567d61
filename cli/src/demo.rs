//! `mbsp demo` (also `mbsp` with no arguments): the project in one minute on the machine at
//! hand — its tree, where a nested run's processes go under both policies, the measured BSP
//! parameters, and the flagship algorithms (FFT, SpMV) verified, timed against their sequential
//! baselines and against the BSP prediction made from those parameters.

use crate::{fft_cmd, params_cmd, topo};
use mbsp::{Level, Policy};
use mbsp_algorithms::cost::Params;
use mbsp_algorithms::fft::FftCost;
use mbsp_algorithms::sparse::CooMatrix;
use mbsp_tools::params::{self, LevelParams, Where};
use mbsp_tools::placement::Count;
use mbsp_tools::spmv::{Csr, Per, Plan, Prepared, Variant, measure, plan_seconds_per_nz, test_x};
use mbsp_tools::{Classify, Error, Result, run_on};
use std::time::Instant;

/// Options of the demo.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct Options {
    /// A smoke run in seconds (small problems; the numbers are not meaningful).
    #[arg(long)]
    pub quick: bool,
}

fn section(title: &str) {
    println!("\n== {title} ==");
}

/// Progress on stderr, with the seconds since the start.
fn progress(start: Instant, what: &str) {
    eprintln!("[{:5.1} s] {what}", start.elapsed().as_secs_f64());
}

/// The cost-function parameters of a measured level (bulk puts for `g`, direct gets for
/// `g_direct`, one-word direct gets and gets for `g_direct_msg` and `g_get_msg`, first touch from `fresh`).
fn params_of(l: &LevelParams, fresh: f64) -> Params {
    use params::Prim;
    Params {
        r: l.r_dense,
        r_stream: l.r_stream,
        g: l.fit(Prim::Put).g,
        g_msg: l.g_msg(),
        g_get_msg: l.g_get_msg(),
        g_direct: l.fit(Prim::Direct).g,
        g_direct_msg: l.g_direct_msg(),
        l: l.l,
        l_reg: l.l_reg,
        g_far: l.g_far,
        g_direct_far: l.g_direct_far,
        cache: l.cache,
        g_ladder: l.g_ladder(),
        fresh,
        ..Params::DEFAULT
    }
}

/// "1.23 ms" / "45.6 µs".
fn time(s: f64) -> String {
    if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

/// Predicted against measured, as a signed percentage of the measured time.
fn off_by(predicted: f64, measured: f64) -> String {
    format!("{:+.0}%", 100.0 * (predicted - measured) / measured)
}

/// Run the demo; `Err` is a one-line message. Its sections: the machine tree and nested
/// placements, the BSP parameters measured now, the FFT, the SpMV.
pub fn run(o: &Options) -> Result<()> {
    let start = Instant::now();
    let loaded = mbsp::Machine::current().or_run()?;
    let m = &loaded.machine;
    println!(
        "mbsp demo: hierarchical BSP on {}",
        mbsp_tools::machine::describe()
    );
    tree_and_placements(m)?;
    let params = parameters(m, o.quick, start)?;
    fft(m, &params, o.quick, start)?;
    spmv(&params.machine, o.quick, start)?;
    println!(
        "\nall results verified against the sequential baselines; {:.1} s in all. Next: \
         `mbsp --help`, `mbsp params --json params.json`, `mbsp-bench fft`, `mbsp-bench spmv`.",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The cost-function parameters the predictions use: the whole machine's, and those of the
/// levels of a nested FFT (the packages, one package; the machine's where the tree has none).
struct Measured {
    machine: Params,
    top: Params,
    inner: Params,
}

/// Section: the machine tree, and where the processes of a nested run and of a flat run of
/// half the cores go under both policies.
fn tree_and_placements(m: &mbsp::Machine) -> Result<()> {
    section("The machine tree (hwloc; MBSP_TOPOLOGY overrides)");
    print!("{m}");

    section("A nested run: one process per package, inside each one per core");
    for policy in [Policy::Scattered, Policy::Compact] {
        println!("policy {policy}:");
        topo::print_nested(
            m,
            &[Count::Per(Level::Package), Count::Per(Level::Core)],
            &policy,
        )?;
    }
    let p_all = m.cores().len();
    let half = (p_all / 2).max(1);
    println!("a flat run of {half} (half the cores):");
    for policy in [Policy::Scattered, Policy::Compact] {
        println!("policy {policy}:");
        topo::print_nested(m, &[Count::N(half)], &policy)?;
    }
    Ok(())
}

/// Section: r, l and g of every level of the tree (scattered), measured now and printed as
/// `mbsp params` prints them.
fn parameters(m: &mbsp::Machine, quick: bool, start: Instant) -> Result<Measured> {
    section("BSP parameters, measured now (mbsp params has the full set)");
    progress(start, "measuring r, l and g on every level of the tree");
    let o = if quick {
        params::Options::quick()
    } else {
        params::Options::full()
    };
    let fresh = params::fresh_per_word();
    let mut levels = Vec::new();
    for (level, _) in Where::of(m) {
        levels.push(params::measure_level(
            level,
            &Policy::Scattered,
            "scattered",
            &o,
        )?);
    }
    print!("{}", params_cmd::table(&levels));
    let machine = params_of(&levels[0], fresh);
    let at = |w: Where| {
        levels
            .iter()
            .find(|l| l.level == w)
            .map_or(machine, |l| params_of(l, fresh))
    };
    let (top, inner) = (at(Where::Packages), at(Where::Package));
    println!(
        "(g in ns per 8-byte word | in flops; a superstep of an h-relation costs l + g h; \
         these values feed the predictions below)"
    );
    Ok(Measured {
        machine,
        top,
        inner,
    })
}

/// Section: the BSP FFT, flat (and nested when the tree has levels), against sequential
/// rustfft and the cost model's predictions.
fn fft(m: &mbsp::Machine, params: &Measured, quick: bool, start: Instant) -> Result<()> {
    let Measured {
        machine,
        top,
        inner,
    } = *params;
    section(
        "FFT: complex f64, BSP (one superstep: packs handed over as owned messages) against sequential rustfft",
    );
    let n = if quick { 1 << 14 } else { 1 << 20 };
    let p_fft = 1usize << mbsp::nprocs().max(1).ilog2();
    let cost = FftCost {
        flat: machine,
        top,
        inner,
        ..FftCost::uniform(machine)
    };
    let mut variants = vec![false];
    if mbsp_algorithms::fft::hierarchy(m, &m.whole()).len() > 1 {
        variants.push(true);
    }
    for nested in variants {
        progress(
            start,
            &format!("FFT n = {n}, {}", if nested { "nested" } else { "flat" }),
        );
        let r = fft_cmd::measure(
            &fft_cmd::Options {
                n,
                p: (!nested).then_some(p_fft),
                nested,
                inverse: false,
                json: false,
                reps: if quick { 3 } else { 9 },
            },
            Some(&cost),
        )?;
        let r = run_on::on_root(r, "the FFT")?;
        let gflops = |s: f64| mbsp_algorithms::fft::flops(n) / s / 1e9;
        let predicted = if nested {
            r.choice.nested
        } else {
            r.choice.flat
        };
        println!(
            "n = 2^{} {} p = {} {:?}: {} ({:.1} Gflop/s), sequential rustfft {} ({:.1} Gflop/s): \
             speedup {:.2}; relative error {:.0e}; BSP prediction {} ({})",
            n.trailing_zeros(),
            r.variant,
            r.p,
            r.levels,
            time(r.secs),
            gflops(r.secs),
            time(r.seq),
            gflops(r.seq),
            r.seq / r.secs,
            r.rel_error,
            time(predicted),
            off_by(predicted, r.secs)
        );
        if !nested {
            println!(
                "cost model's choice for this machine ({:?}): {:?}",
                r.tree, r.choice.variant
            );
        }
    }

    Ok(())
}

/// Section: the 2D SpMV on a grid Laplacian, plain and hp, against sequential CSR and the
/// BSP prediction from the `machine` parameters.
fn spmv(machine: &Params, quick: bool, start: Instant) -> Result<()> {
    section("SpMV: y = Ax on a 2D partition, against sequential CSR");
    let k = if quick { 60 } else { 300 };
    let a = CooMatrix::laplacian_2d(k, 0.1).map_err(|e| Error::run(e.to_string()))?;
    progress(
        start,
        &format!(
            "partitioning a {0}x{0} grid Laplacian ({1} nonzeros)",
            k * k,
            a.nnz()
        ),
    );
    let p = mbsp::nprocs().max(1);
    let prep = Prepared::new(&a, p, Variant::Plain)?;
    println!(
        "matrix: 2D Laplacian on a {k}x{k} grid, {} rows, {} nonzeros; partitioned for p = {p} \
         in {:.2} s: communication volume {} words, largest h {}",
        a.rows,
        a.nnz(),
        prep.partition_seconds,
        prep.volume,
        prep.max_h
    );
    let x = test_x(a.cols);
    let csr = Csr::new(&a);
    let (batches, per) = if quick { (3, 5) } else { (9, 40) };
    for variant in [Variant::Plain, Variant::Hp] {
        progress(start, &format!("SpMV {}", variant.name()));
        let r = run_on::on_root(
            measure(&a, &csr, &x, &prep, variant, batches, Per::Exactly(per))?,
            "the SpMV",
        )?;
        let Plan::Flat(plan) = &prep.plan else {
            unreachable!("flat plan")
        };
        // The local phase timed in the same batches as the multiplies (`measure`).
        let per_nz = match r.seconds_per_nz(plan) {
            Some(t) => t,
            None => run_on::on_root(plan_seconds_per_nz(plan)?, "the SpMV's local rate")?,
        };
        let predicted = plan.predict(machine, per_nz, variant == Variant::Hp);
        let mflops = |s: f64| 2.0 * a.nnz() as f64 / s / 1e6;
        println!(
            "{:<5} p = {p}: {} per multiply ({:.0} Mflop/s), sequential CSR {} ({:.0} Mflop/s): \
             speedup {:.2}; max relative error {:.0e}; BSP prediction {} ({})",
            variant.name(),
            time(r.bsp),
            mflops(r.bsp),
            time(r.seq),
            mflops(r.seq),
            r.ratio,
            r.max_rel_error,
            time(predicted),
            off_by(predicted, r.bsp)
        );
        if r.max_rel_error > 1e-12 {
            return Err(Error::run(format!(
                "SpMV {} differs from sequential CSR (max relative error {:e})",
                variant.name(),
                r.max_rel_error
            )));
        }
    }

    Ok(())
}
