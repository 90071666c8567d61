//! `mbsp fft`: one BSP FFT of random data, checked against sequential rustfft.

use mbsp_algorithms::fft::{
    Complex, Direction, FftCost, MultiFft, Variant, flops, hierarchy, kernel_len, sequential_plan,
};
use mbsp_tools::fft::{SEED, random, rate, rel_error};
use mbsp_tools::params::policy_in_force;
use mbsp_tools::stats::median;
use mbsp_tools::{Classify, Error, Result, preflight, run_on};
use serde_json::json;
use std::time::Instant;

type C = Complex<f64>;

/// Options of `mbsp fft`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// Transform length (a power of two).
    #[arg(long, value_name = "N")]
    pub n: usize,
    /// Processes of the flat variant (a power of two; default: the largest power of two <= the
    /// hardware threads; under `mpiexec` with the `mpi` feature, the ranks, at most as many).
    #[arg(short = 'p', long = "procs", value_name = "P")]
    pub p: Option<usize>,
    /// The Multi-BSP variant over the machine tree (MBSP_TOPOLOGY is honoured).
    #[arg(long)]
    pub nested: bool,
    /// The inverse transform (scaled by 1/n).
    #[arg(long)]
    pub inverse: bool,
    /// Print one JSON object (n, p, variant, seconds, gflops, rel_error, choice, ...).
    #[arg(long)]
    pub json: bool,
    /// Timed transforms after a warm-up (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
}

/// One measured transform and the cost model's view of it.
pub struct Outcome {
    /// Processes in all.
    pub p: usize,
    /// Fan-outs of the run (one entry: flat).
    pub levels: Vec<usize>,
    /// The machine tree's fan-outs.
    pub tree: Vec<usize>,
    /// `"flat"` or `"nested"`: what ran.
    pub variant: &'static str,
    /// Median seconds of a transform.
    pub secs: f64,
    /// Seconds of planning.
    pub planning: f64,
    /// Median seconds of sequential rustfft on the same data.
    pub seq: f64,
    /// Relative error (2-norm) against sequential rustfft.
    pub rel_error: f64,
    /// The cost model's choice and predictions (r = rustfft's measured rate).
    pub choice: mbsp_algorithms::fft::Choice,
}

/// Plan, run and check the transform of `o`, with the cost model's parameters `params` (`None`:
/// every level's own from the parameter file in force, [`mbsp_tools::params::fft_cost`]).
/// `None` on the MPI ranks that do not print ([`run_on`]): they took part in the run, rank 0
/// has the outcome.
pub fn measure(o: &Options, params: Option<&FftCost>) -> Result<Option<Outcome>> {
    let n = o.n;
    if !n.is_power_of_two() {
        return Err(Error::usage(format!("--n {n} is not a power of two")));
    }
    let loaded = mbsp::Machine::current().or_run()?;
    let tree = hierarchy(&loaded.machine, &loaded.machine.whole());
    let pow2_threads = 1usize << mbsp::nprocs().max(1).ilog2();
    let levels: Vec<usize> = if o.nested {
        run_on::threads_only(
            "--nested",
            "its levels are the machine tree's; over ranks the flat variant runs, one process per rank",
        )?;
        let total: usize = tree.iter().product::<usize>().max(1);
        if let Some(p) = o.p.filter(|&p| p != total) {
            return Err(Error::usage(format!(
                "-p {p} with --nested: the machine tree {tree:?} gives {total} processes (leave -p out)"
            )));
        }
        tree.clone()
    } else {
        let p = run_on::procs(o.p, pow2_threads)?;
        if !p.is_power_of_two() {
            return Err(Error::usage(match o.p {
                Some(_) => format!("-p {p} is not a power of two"),
                None => format!(
                    "{p} MPI ranks: the FFT needs a power of two processes (give -p, at most {p})"
                ),
            }));
        }
        vec![p]
    };
    let p: usize = levels.iter().product::<usize>().max(1);
    if p > n {
        return Err(Error::usage(format!("{p} processes exceed n = {n}")));
    }
    preflight::fft(n, p, o.reps)?;
    let dir = if o.inverse {
        Direction::Inverse
    } else {
        Direction::Forward
    };
    let reps = o.reps.max(1);
    let x = random(n, SEED);
    // Sequential reference and its time (the kernel's rate, for the cost model): on the
    // process that prints only (over ranks, the others would disturb its timing).
    let reference = run_on::is_root().then(|| {
        eprintln!("fft: n = {n}, {p} processes, levels {levels:?}: planning");
        let mut want = x.clone();
        let kernel = sequential_plan::<f64>(n, dir == Direction::Inverse);
        let mut warm = x.clone();
        kernel.process(&mut warm); // first touch, twiddles in cache
        let seq = median(
            &(0..reps)
                .map(|_| {
                    warm.copy_from_slice(&x);
                    let t = Instant::now();
                    kernel.process(&mut warm);
                    t.elapsed().as_secs_f64()
                })
                .collect::<Vec<_>>(),
        );
        kernel.process(&mut want);
        if dir == Direction::Inverse {
            want.iter_mut().for_each(|v| *v /= n as f64);
        }
        (want, seq)
    });
    let (top, below) = levels.split_first().map_or((1, &[][..]), |(t, b)| (*t, b));
    let r = run_on::gathered(top, |ctx| {
        let (me, pt) = (ctx.pid(), ctx.nprocs());
        let mine: Vec<C> = (me..n).step_by(pt).map(|i| x[i]).collect();
        let t = Instant::now();
        let mut plan = MultiFft::<f64>::nested(ctx, n, below)?;
        let planning = t.elapsed().as_secs_f64();
        let mut local = mine.clone();
        plan.transform(ctx, &mut local, dir)?; // warm-up
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps {
            local.copy_from_slice(&mine);
            ctx.sync()?;
            let t = Instant::now();
            plan.transform(ctx, &mut local, dir)?;
            times.push(t.elapsed().as_secs_f64());
        }
        let secs = median(&times);
        plan.free(ctx)?;
        Ok((local, vec![secs, planning]))
    })?;
    // Over ranks, the others are done: rank 0 has every process's part.
    let (Some(r), Some((want, seq))) = (r, reference) else {
        return Ok(None);
    };
    let mut y = vec![C::default(); n];
    for (me, (local, _)) in r.iter().enumerate() {
        for (i, v) in local.iter().enumerate() {
            y[me + top * i] = *v;
        }
    }
    let secs = r.iter().map(|x| x.1[0]).fold(0.0, f64::max);
    let planning = r[0].1[1];
    let rel_error = rel_error(&y, &want);
    // r: rustfft's rate at the length of the kernels a flat transform over all processes runs,
    // on each core while all of them run it.
    let mut rates = std::collections::BTreeMap::from([((n, 1), flops(n) / seq)]);
    let cores = tree.iter().product();
    let r = rate(&mut rates, kernel_len(n, cores), cores)?;
    let mut cost = params
        .copied()
        .unwrap_or_else(|| mbsp_tools::params::fft_cost(&tree, &policy_in_force()));
    for prm in [&mut cost.flat, &mut cost.top, &mut cost.inner] {
        prm.r = r;
    }
    let choice = cost.choose(n, &tree);
    let variant = if o.nested && levels.len() > 1 {
        "nested"
    } else {
        "flat"
    };
    if rel_error > 1e-10 {
        return Err(Error::run(format!(
            "relative error {rel_error:e} is too large"
        )));
    }
    Ok(Some(Outcome {
        p,
        levels,
        tree,
        variant,
        secs,
        planning,
        seq,
        rel_error,
        choice,
    }))
}

/// Runs `mbsp fft`: measures ([`measure`]) and prints.
pub fn run(o: &Options) -> Result<()> {
    let mut watch = mbsp_tools::machine_state::Watch::start();
    let Some(out) = measure(o, None)? else {
        return Ok(());
    };
    watch.mark();
    let state = watch.state();
    let Outcome {
        p,
        levels,
        tree,
        variant,
        secs,
        planning,
        seq,
        rel_error,
        choice,
    } = out;
    let n = o.n;
    let gflops = flops(n) / secs / 1e9;
    let chosen = match choice.variant {
        Variant::Flat => "flat",
        Variant::Nested => "nested",
    };
    if o.json {
        let j = json!({
            "n": n, "p": p, "variant": variant, "levels": levels, "inverse": o.inverse, "reps": o.reps,
            "seconds": secs, "gflops": gflops, "rel_error": rel_error,
            "planning_seconds": planning, "sequential_seconds": seq,
            "choice": chosen, "predicted_flat_seconds": choice.flat,
            "predicted_nested_seconds": if choice.nested.is_finite() { Some(choice.nested) } else { None },
            "machine_state": state.json(),
        });
        println!("{j:#}");
    } else {
        println!(
            "fft n = {n} ({}), p = {p} ({variant}, levels {levels:?}): {:.3} ms, {gflops:.2} Gflop/s, \
             relative error {rel_error:.1e} against sequential rustfft ({:.3} ms); planning {:.1} ms",
            if o.inverse { "inverse" } else { "forward" },
            secs * 1e3,
            seq * 1e3,
            planning * 1e3
        );
        // The prediction of the variant that ran, against its measured time.
        let ran = if variant == "flat" {
            choice.flat
        } else {
            choice.nested
        };
        println!(
            "cost model on this machine's tree {tree:?}: flat {:.3} ms, nested {} -> {chosen}; \
             {variant} predicted {}",
            choice.flat * 1e3,
            if choice.nested.is_finite() {
                format!("{:.3} ms", choice.nested * 1e3)
            } else {
                "n/a (one level)".into()
            },
            mbsp_algorithms::cost::judge_prediction(secs, ran)
        );
        println!("{}", state.line());
    }
    Ok(())
}
