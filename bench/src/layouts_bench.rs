//! `mbsp-bench layouts`: how much the heap's layout moves a superstep of two processes.
//!
//! A small heap block that one core reads in every superstep costs a cache-line transfer per
//! read when another core writes its neighbour in every superstep (false sharing). Which blocks
//! end up neighbours depends on the allocations made before, so such a cost comes and goes with
//! unrelated changes to a program, and a benchmark run once cannot tell it from a change of the
//! machine's speed. This benchmark runs the same program in a fresh process per *layout* `k`,
//! which allocates `k` small blocks (8 to 56 bytes) before anything else and keeps them: every
//! later block of the runtime lands elsewhere. Each process times, in rounds (its figures in
//! turn, in rotating order), the empty sync, a one-word put + sync, a one-word message (send,
//! sync, move) and `Comm`'s one-word all-reduce at p = 2, and each figure is taken as its ratio
//! to the empty sync of the same round (the machine's state then cancels out). A layout whose
//! ratio is more than [`SUSPECT`] times the median over the layouts is a false-sharing suspect.

use crate::stats::Samples;
use mbsp_algorithms::collectives::Comm;
use mbsp_tools::{Error, Result};
use serde_json::{Value, json};
use std::time::Instant;

/// A layout is suspect when a figure's ratio to the empty sync exceeds this many times the
/// figure's median ratio over all layouts.
pub const SUSPECT: f64 = 1.5;

/// The most layouts a run takes (`--layouts`).
pub const MAX_LAYOUTS: usize = 4096;

/// The figures, in the order of the table: the empty sync first (the others' reference).
pub const FIGURES: [&str; 4] = [
    "empty sync",
    "put + sync",
    "send + sync + move",
    "Comm all-reduce",
];

/// Options of `mbsp-bench layouts`.
#[derive(Clone, Debug)]
pub struct Options {
    /// Heap layouts (processes): `k = 0 .. layouts`.
    pub layouts: usize,
    /// Rounds per process.
    pub rounds: usize,
    /// Supersteps per figure and round.
    pub steps: usize,
    /// Print JSON instead of text.
    pub json: bool,
    /// Also write the figures as CSV to this file.
    pub csv: Option<std::path::PathBuf>,
}

/// Allocate layout `k`'s blocks (kept by the caller until the measurement ends).
fn blocks(k: usize) -> Vec<Box<[u8]>> {
    (0..k)
        .map(|i| vec![0u8; 8 + (i % 7) * 8].into_boxed_slice())
        .collect()
}

/// The child process of layout `k`: prints one JSON line, per figure the ns per superstep of
/// each round (process 0's clock, each figure's supersteps started by a sync).
pub fn child(k: usize, rounds: usize, steps: usize) -> Result<()> {
    let kept = blocks(k);
    let times = mbsp::run(2, |ctx| {
        let mut comm = Comm::new(ctx)?;
        let x = ctx.push_reg(vec![0u64; 2])?;
        ctx.sync()?;
        let other = 1 - ctx.pid();
        let mut t = vec![Vec::with_capacity(rounds + 1); FIGURES.len()];
        // A first round to warm up (outboxes grown, the runtime's waits adapted), not kept.
        for r in 0..=rounds {
            for j in 0..FIGURES.len() {
                let f = (j + r) % FIGURES.len();
                ctx.sync()?;
                let start = Instant::now();
                for i in 0..steps as u64 {
                    match f {
                        0 => ctx.sync()?,
                        1 => {
                            ctx.put(other, &[i], &x, 0)?;
                            ctx.sync()?;
                        }
                        2 => {
                            ctx.send(other, &[], &i.to_ne_bytes())?;
                            ctx.sync()?;
                            let mut b = [0u8; 8];
                            while ctx.move_message(&mut b)?.is_some() {}
                        }
                        _ => {
                            std::hint::black_box(comm.allreduce_value(ctx, i, u64::max)?);
                        }
                    }
                }
                t[f].push(start.elapsed().as_nanos() as f64 / steps as f64);
            }
        }
        comm.free(ctx)?;
        ctx.pop_reg(&x)?;
        for f in t.iter_mut() {
            f.remove(0);
        }
        Ok(t)
    })
    .map_err(|e| Error::run(format!("mbsp-bench layouts: {e}")))?;
    drop(kept);
    let t = times.into_iter().next().unwrap_or_default();
    println!("{}", json!({ "layout": k, "ns": t }));
    Ok(())
}

/// One layout's figures: per figure the ns per superstep of each round.
struct Layout {
    k: usize,
    ns: Vec<Vec<f64>>,
}

impl Layout {
    /// Figure `f`'s ratio to the empty sync: the median over the rounds of the ratio within a
    /// round.
    fn ratio(&self, f: usize) -> f64 {
        let r: Vec<f64> = self.ns[f]
            .iter()
            .zip(&self.ns[0])
            .map(|(a, e)| a / e)
            .collect();
        Samples(r).median()
    }

    fn median_ns(&self, f: usize) -> f64 {
        Samples(self.ns[f].clone()).median()
    }
}

/// Run layout `k` in a fresh process of this program.
fn run_child(o: &Options, k: usize) -> Result<Layout> {
    let exe = std::env::current_exe().map_err(|e| Error::io("this program").with_source(e))?;
    let out = std::process::Command::new(exe)
        .args(["layouts", "--child", &k.to_string()])
        .args(["--rounds", &o.rounds.to_string()])
        .args(["--steps", &o.steps.to_string()])
        .output()
        .map_err(|e| Error::io("a layout's process").with_source(e))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let bad = |why: &str| {
        Error::run(format!(
            "mbsp-bench layouts: layout {k}'s process {why}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    };
    if !out.status.success() {
        return Err(bad("failed"));
    }
    let v: Value = serde_json::from_str(text.trim()).map_err(|_| bad("printed no figures"))?;
    let ns: Vec<Vec<f64>> =
        serde_json::from_value(v["ns"].clone()).map_err(|_| bad("printed no figures"))?;
    if ns.len() != FIGURES.len() || ns.iter().any(|r| r.len() != o.rounds) {
        return Err(bad("printed the wrong number of figures"));
    }
    Ok(Layout { k, ns })
}

/// Per figure (after the empty sync): the median ratio over the layouts, the worst layout
/// and its ratio, and the suspect layouts (among those judged).
struct Summary {
    median: f64,
    worst: (usize, f64),
    suspects: Vec<usize>,
}

/// The layouts whose empty sync took more than [`SUSPECT`] times, or less than 1/[`SUSPECT`]
/// of, the median over all layouts: the machine was in another state then (on a virtual
/// machine a cache line's transfer changes several times over for minutes), in which every
/// ratio to the empty sync differs, so they are not judged.
fn other_state(layouts: &[Layout]) -> Vec<usize> {
    let median = Samples(layouts.iter().map(|l| l.median_ns(0)).collect()).median();
    layouts
        .iter()
        .filter(|l| {
            let e = l.median_ns(0);
            e > SUSPECT * median || e * SUSPECT < median
        })
        .map(|l| l.k)
        .collect()
}

fn summarize(layouts: &[Layout], f: usize, unjudged: &[usize]) -> Summary {
    let ratios: Vec<(usize, f64)> = layouts
        .iter()
        .filter(|l| !unjudged.contains(&l.k))
        .map(|l| (l.k, l.ratio(f)))
        .collect();
    let median = Samples(ratios.iter().map(|r| r.1).collect()).median();
    let worst = ratios
        .iter()
        .copied()
        .fold((0, f64::MIN), |w, r| if r.1 > w.1 { r } else { w });
    let suspects = ratios
        .iter()
        .filter(|r| r.1 > SUSPECT * median)
        .map(|r| r.0)
        .collect();
    Summary {
        median,
        worst,
        suspects,
    }
}

/// Run the benchmark: a process per layout, then the table (or JSON) and the CSV file.
pub fn run(o: &Options) -> Result<()> {
    if let Some(path) = &o.csv {
        crate::spmv_bench::check_output("--csv", path)?;
    }
    let mut layouts = Vec::with_capacity(o.layouts);
    for k in 0..o.layouts {
        eprintln!("layouts: layout {} of {}", k + 1, o.layouts);
        layouts.push(run_child(o, k)?);
        crate::watch::mark();
    }
    let unjudged = other_state(&layouts);
    let summaries: Vec<Summary> = (1..FIGURES.len())
        .map(|f| summarize(&layouts, f, &unjudged))
        .collect();
    if let Some(path) = &o.csv {
        write_csv(path, &layouts).map_err(|e| Error::io("--csv").with_source(e))?;
    }
    if o.json {
        let rows: Vec<Value> = layouts
            .iter()
            .map(|l| {
                json!({
                    "layout": l.k,
                    "judged": !unjudged.contains(&l.k),
                    "empty_sync_ns": l.median_ns(0),
                    "ratios": (1..FIGURES.len())
                        .map(|f| (FIGURES[f].to_string(), json!(l.ratio(f))))
                        .collect::<serde_json::Map<_, _>>(),
                })
            })
            .collect();
        let sums: serde_json::Map<String, Value> = summaries
            .iter()
            .enumerate()
            .map(|(i, s)| {
                (
                    FIGURES[i + 1].to_string(),
                    json!({
                        "median_ratio": s.median,
                        "worst_layout": s.worst.0,
                        "worst_ratio": s.worst.1,
                        "suspects": s.suspects,
                    }),
                )
            })
            .collect();
        let j = json!({
            "machine": crate::machine::describe(),
            "rounds": o.rounds,
            "steps": o.steps,
            "suspect_factor": SUSPECT,
            "not_judged": unjudged,
            "layouts": rows,
            "summary": sums,
        });
        println!("{j:#}");
        return Ok(());
    }
    println!("mbsp-bench layouts: {}", crate::machine::describe());
    println!(
        "p = 2, a process per heap layout k (k small blocks allocated first); per figure its \
         time over the empty sync's in the same round, the median of {} rounds of {} supersteps",
        o.rounds, o.steps
    );
    print!("\n  {:>6}  {:>10}", "layout", "empty sync");
    for name in &FIGURES[1..] {
        print!("  {name:>18}");
    }
    println!();
    for l in &layouts {
        let state = if unjudged.contains(&l.k) { "~" } else { " " };
        print!("  {:>6}  {:>7.0} ns{state}", l.k, l.median_ns(0));
        for f in 1..FIGURES.len() {
            let r = l.ratio(f);
            let mark = if summaries[f - 1].suspects.contains(&l.k) {
                " !"
            } else {
                "  "
            };
            print!("  {:>15.3}x{mark}", r);
        }
        println!();
    }
    println!();
    if !unjudged.is_empty() {
        println!(
            "  ~ not judged: the empty sync took over {SUSPECT}x, or under 1/{SUSPECT} of, its \
             median over the layouts (the machine was in another state): layouts {unjudged:?}"
        );
    }
    for (i, s) in summaries.iter().enumerate() {
        println!(
            "  {:<20} median {:.3}x the empty sync, worst {:.3}x (layout {}); {}",
            FIGURES[i + 1],
            s.median,
            s.worst.1,
            s.worst.0,
            if s.suspects.is_empty() {
                format!("no layout above {SUSPECT}x the median")
            } else {
                format!(
                    "layouts {:?} above {SUSPECT}x the median (!): a small block shares a cache \
                     line with one another core writes",
                    s.suspects
                )
            }
        );
    }
    Ok(())
}

/// The figures as CSV: one line per layout and figure (ns per superstep, median over the
/// rounds; the ratio to the empty sync).
fn write_csv(path: &std::path::Path, layouts: &[Layout]) -> std::io::Result<()> {
    use std::io::Write;
    crate::whole_file::write(path, |f| {
        writeln!(f, "layout,figure,ns,ratio")?;
        for l in layouts {
            for (i, name) in FIGURES.iter().enumerate() {
                let ratio = if i == 0 { 1.0 } else { l.ratio(i) };
                writeln!(f, "{},{name},{},{ratio}", l.k, l.median_ns(i))?;
            }
        }
        Ok(())
    })
}
