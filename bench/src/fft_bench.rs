//! `mbsp bench fft`: Gflop/s of the BSP FFT against sequential rustfft, in the same run.
//!
//! For each n, every variant transforms the same random vector (forward, unscaled) `samples`
//! times after a warm-up; the median time gives Gflop/s = 5 n log₂ n / t. Planning (rustfft
//! plans, twiddle tables, registering the pack buffers) is timed apart. Each variant's result
//! is compared with sequential rustfft's (relative 2-norm error).

use crate::stats::Samples;
use mbsp_algorithms::cost::Params;
use mbsp_algorithms::fft::{BspFft, Complex, FftCost, MultiFft, flops, hierarchy};
use serde_json::{Value, json};
use std::io::Write;
use std::time::Instant;

type C = Complex<f64>;

/// Options of `mbsp bench fft`.
#[derive(Clone, Debug)]
pub struct Options {
    /// log₂ of the smallest and largest n.
    pub min_log: u32,
    /// log₂ of the largest n.
    pub max_log: u32,
    /// Process counts of the flat BSP FFT.
    pub procs: Vec<usize>,
    /// Timed transforms per figure (the median is reported).
    pub samples: usize,
    /// Print JSON instead of the table.
    pub json: bool,
    /// Write the rows as CSV.
    pub csv: Option<String>,
    /// Write a plot of Gflop/s against n (SVG) to this file.
    pub plot: Option<String>,
}

struct Row {
    n: usize,
    variant: String,
    p: usize,
    seconds: f64,
    plan_seconds: f64,
    rel_error: f64,
}

impl Row {
    fn gflops(&self) -> f64 {
        flops(self.n) / self.seconds / 1e9
    }
}

fn random(n: usize) -> Vec<C> {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    };
    (0..n).map(|_| C::new(next(), next())).collect()
}

fn rel_error(a: &[C], b: &[C]) -> f64 {
    let d: f64 = a.iter().zip(b).map(|(x, y)| (x - y).norm_sqr()).sum();
    let r: f64 = b.iter().map(|y| y.norm_sqr()).sum();
    (d / r).sqrt()
}

/// Sequential rustfft, planned once, in place with its scratch, and the BSP FFT on one
/// process, interleaved sample by sample in one run (same thread, same binding): seconds per
/// transform of each, the planning seconds of each, and rustfft's result.
fn rustfft_and_p1(x: &[C], samples: usize) -> ((Samples, f64), (Samples, f64), Vec<C>) {
    let n = x.len();
    mbsp::run(1, |ctx| {
        let t = Instant::now();
        let plan = rustfft::FftPlanner::new().plan_fft_forward(n);
        let mut scratch = vec![C::default(); plan.get_inplace_scratch_len()];
        let seq_planning = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut bsp = BspFft::<f64>::new(ctx, n)?;
        let bsp_planning = t.elapsed().as_secs_f64();
        let mut y = x.to_vec();
        plan.process_with_scratch(&mut y, &mut scratch);
        let want = y.clone();
        bsp.forward(ctx, &mut y)?;
        let (mut seq, mut one) = (Vec::new(), Vec::new());
        for _ in 0..samples {
            y.copy_from_slice(x);
            let t = Instant::now();
            plan.process_with_scratch(&mut y, &mut scratch);
            seq.push(t.elapsed().as_secs_f64());
            std::hint::black_box(&y);
            y.copy_from_slice(x);
            let t = Instant::now();
            bsp.forward(ctx, &mut y)?;
            one.push(t.elapsed().as_secs_f64());
        }
        bsp.free(ctx)?;
        Ok((
            (Samples(seq), seq_planning),
            (Samples(one), bsp_planning),
            want,
        ))
    })
    .expect("benchmark run")
    .pop()
    .expect("one process")
}

/// The BSP FFT on `p` top-level processes, flat (`below` empty) or Multi-BSP with nested runs
/// of the fan-outs `below`: seconds per transform (each sample starts after a sync; the
/// slowest process's time), planning seconds, and the result gathered from the cyclic
/// distribution.
fn bsp(x: &[C], p: usize, below: &[usize], samples: usize) -> (Samples, f64, Vec<C>) {
    let n = x.len();
    let r = mbsp::run(p, |ctx| {
        let (me, p) = (ctx.pid(), ctx.nprocs());
        let mine: Vec<C> = (me..n).step_by(p).map(|i| x[i]).collect();
        ctx.sync()?;
        let t = Instant::now();
        let mut plan = MultiFft::<f64>::new(ctx, n, below)?;
        let planning = t.elapsed().as_secs_f64();
        let mut local = mine.clone();
        plan.forward(ctx, &mut local)?;
        let result = local.clone();
        let mut times = Vec::with_capacity(samples);
        for _ in 0..samples {
            local.copy_from_slice(&mine);
            ctx.sync()?;
            let t = Instant::now();
            plan.forward(ctx, &mut local)?;
            times.push(t.elapsed().as_secs_f64());
        }
        plan.free(ctx)?;
        Ok((times, planning, result))
    })
    .expect("benchmark run");
    let mut y = vec![C::default(); n];
    for (me, (_, _, local)) in r.iter().enumerate() {
        for (i, v) in local.iter().enumerate() {
            y[me + p * i] = *v;
        }
    }
    let times = (0..samples)
        .map(|i| r.iter().map(|(t, _, _)| t[i]).fold(0.0, f64::max))
        .collect();
    (Samples(times), r[0].1, y)
}

/// Run the benchmark.
pub fn run(o: &Options) -> Result<(), String> {
    let mut rows: Vec<Row> = Vec::new();
    let loaded = mbsp::Machine::current().map_err(|e| e.to_string())?;
    let levels = hierarchy(&loaded.machine, &loaded.machine.whole());
    let cost = FftCost::uniform(*Params::current());
    eprintln!("fft: machine tree fan-outs (Multi-BSP levels): {levels:?}");
    let mut choices = Vec::new();
    for lg in o.min_log..=o.max_log {
        let n = 1usize << lg;
        let samples = if n >= 1 << 22 {
            o.samples.min(5)
        } else {
            o.samples
        };
        eprintln!("fft: n = 2^{lg}: sequential rustfft and mbsp p = 1 (interleaved)");
        let x = random(n);
        let ((t, plan), (t1, plan1), want) = rustfft_and_p1(&x, samples);
        rows.push(Row {
            n,
            variant: "rustfft".into(),
            p: 1,
            seconds: t.median(),
            plan_seconds: plan,
            rel_error: 0.0,
        });
        for &p in o.procs.iter().filter(|&&p| p <= n) {
            let (t, plan, err) = if p == 1 {
                (t1.clone(), plan1, 0.0)
            } else {
                eprintln!("fft: n = 2^{lg}: mbsp flat, p = {p}");
                let (t, plan, y) = bsp(&x, p, &[], samples);
                (t, plan, rel_error(&y, &want))
            };
            rows.push(Row {
                n,
                variant: "mbsp-flat".into(),
                p,
                seconds: t.median(),
                plan_seconds: plan,
                rel_error: err,
            });
        }
        let total: usize = levels.iter().product();
        if !levels.is_empty() && total <= n {
            eprintln!("fft: n = 2^{lg}: mbsp Multi-BSP, levels {levels:?}");
            let (t, plan, y) = bsp(&x, levels[0], &levels[1..], samples);
            rows.push(Row {
                n,
                variant: "mbsp-multi".into(),
                p: total,
                seconds: t.median(),
                plan_seconds: plan,
                rel_error: rel_error(&y, &want),
            });
            // The kernel's rate measured just now (rustfft on this n) as r of the cost model.
            let r = flops(n) / t.median();
            let mut c = cost;
            for prm in [&mut c.flat, &mut c.top, &mut c.inner] {
                prm.r = r;
            }
            choices.push((n, c.choose(n, &levels)));
        }
    }
    if let Some(path) = &o.csv {
        write_csv(path, &rows).map_err(|e| format!("--csv {path}: {e}"))?;
    }
    let base = |n: usize| {
        rows.iter()
            .find(|r| r.n == n && r.variant == "rustfft")
            .map_or(f64::NAN, Row::gflops)
    };
    if o.json {
        let j = json!({
            "machine": crate::machine::describe(),
            "samples": o.samples,
            "levels": levels,
            "choices": choices.iter().map(|(n, c)| json!({
                "n": n, "variant": format!("{:?}", c.variant),
                "flat_predicted_s": c.flat, "nested_predicted_s": c.nested,
            })).collect::<Vec<Value>>(),
            "rows": rows.iter().map(|r| json!({
                "n": r.n, "variant": r.variant, "p": r.p, "seconds": r.seconds,
                "gflops": r.gflops(), "ratio_to_rustfft": r.gflops() / base(r.n),
                "plan_seconds": r.plan_seconds, "rel_error": r.rel_error,
            })).collect::<Vec<Value>>(),
        });
        println!("{j:#}");
        return Ok(());
    }
    if let Some(path) = &o.plot {
        plot(path, &rows).map_err(|e| format!("--plot {path}: {e}"))?;
    }
    println!("mbsp bench fft: {}", crate::machine::describe());
    println!(
        "complex f64, forward; Gflop/s = 5 n log2 n / median time of {} transforms; ratio to \
         sequential rustfft measured in the same run; planning timed apart",
        o.samples
    );
    println!(
        "\n  {:>9} {:<10} {:>2} {:>12} {:>8} {:>9} {:>12} {:>9}",
        "n", "variant", "p", "time", "Gflop/s", "/rustfft", "planning", "rel.err"
    );
    for r in &rows {
        println!(
            "  {:>9} {:<10} {:>2} {:>12} {:>8.2} {:>9.2} {:>12} {:>9.1e}",
            format!("2^{}", r.n.trailing_zeros()),
            r.variant,
            r.p,
            crate::stats::ns(r.seconds * 1e9),
            r.gflops(),
            r.gflops() / base(r.n),
            crate::stats::ns(r.plan_seconds * 1e9),
            r.rel_error
        );
    }
    println!(
        "\nMulti-BSP levels of this machine (fan-outs of the tree): {levels:?}; cost model \
         (r = rustfft's rate at that n, measured above; g and l: MBSP_PARAMS or the defaults) \
         per n: predicted flat / nested, choice"
    );
    for (n, c) in &choices {
        println!(
            "  2^{:<3} flat {:>12}  nested {:>12}  -> {:?}",
            n.trailing_zeros(),
            crate::stats::ns(c.flat * 1e9),
            if c.nested.is_finite() {
                crate::stats::ns(c.nested * 1e9)
            } else {
                "(one level)".into()
            },
            c.variant
        );
    }
    Ok(())
}

/// Plot Gflop/s against n, one line per variant and p (SVG).
fn plot(path: &str, rows: &[Row]) -> Result<(), String> {
    let _ = (path, rows);
    Err("plots are not implemented yet".into())
}

fn write_csv(path: &str, rows: &[Row]) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(f, "n,variant,p,gflops,rel_error")?;
    for r in rows {
        writeln!(
            f,
            "{},{},{},{:.4},{:.3e}",
            r.n,
            r.variant,
            r.p,
            r.gflops(),
            r.rel_error
        )?;
    }
    f.flush()
}
