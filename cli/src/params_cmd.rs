//! `mbsp params`: the BSP parameters (r, g, l) of every level of the machine tree
//! ([`mbsp_tools::params`] measures them), printed as a table like the BSPlib paper's Table 1,
//! written as the JSON file the cost functions read (`MBSP_PARAMS`) and plotted.
//!
//! `--save` writes the file where every command and the profiler find it without
//! `MBSP_PARAMS` ([`mbsp::params::saved_path`]).
//!
//! A fit is not a measurement to trust when its residual exceeds [`MAX_RESIDUAL`] or its
//! intercept is negative (a busy machine, or noise larger than the effect): the table marks
//! such values with `?` instead of presenting them plainly, a warning says why, and `--save`
//! refuses a file whose top-level values come from such fits.

use mbsp_tools::params::{self, LevelParams, MAX_RESIDUAL, Measurement, Prim};
use mbsp_tools::{Error, Result};
use std::path::{Path, PathBuf};

/// Options of `mbsp params`.
#[derive(Clone, Debug)]
pub struct Options {
    /// What to measure.
    pub measure: params::Options,
    /// Write the JSON parameter file here.
    pub json: Option<PathBuf>,
    /// Plot time against h with the fitted lines (SVG) here.
    pub plot: Option<PathBuf>,
    /// Store the parameters as this machine's ([`mbsp::params::saved_path`]).
    pub save: bool,
}

/// The command line of `mbsp params`.
#[derive(Clone, Debug, clap::Args)]
pub struct Args {
    /// Write the parameters as JSON to FILE (then: MBSP_PARAMS=FILE).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Plot time per superstep against h with the fitted lines (SVG) to FILE.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Store the parameters as this machine's, where every command and the profiler find them
    /// without MBSP_PARAMS: $XDG_CONFIG_HOME/mbsp/params.json, or ~/.config/mbsp/params.json.
    #[arg(long)]
    pub save: bool,
    /// Only these levels, comma-separated: machine (a process per core), packages (a process
    /// per package), package (the cores of one), numa, core (its hardware threads).
    #[arg(long, value_delimiter = ',', value_name = "LEVEL,...")]
    pub levels: Option<Vec<String>>,
    /// Samples per point in all (the median is used), shared among the rounds.
    #[arg(long, default_value = "7", value_parser = crate::cli::at_least("--samples", 1))]
    pub samples: usize,
    /// Rounds: every level and policy is measured once per round, in a new random order each
    /// round, so that a change of the machine's state meets all of them alike; each figure
    /// is the median over the rounds (default: 3; 1 with --quick).
    #[arg(long, value_parser = crate::cli::at_least("--rounds", 1))]
    pub rounds: Option<usize>,
    /// The seed of the rounds' random orders (default: from the clock; the output says which,
    /// to repeat an order).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Largest h of the h-relations, in 8-byte words.
    #[arg(long, default_value = "4096", value_parser = crate::cli::at_least("--max-h", 8))]
    pub max_h: usize,
    /// A smoke run (h up to 1024, short samples); the numbers are not meaningful.
    #[arg(long)]
    pub quick: bool,
}

impl Args {
    /// The options these arguments ask for (`--quick` sets the sizes of a smoke run).
    pub fn options(self) -> Options {
        let mut measure = if self.quick {
            params::Options::quick()
        } else {
            params::Options {
                samples: self.samples,
                max_h: self.max_h,
                ..params::Options::full()
            }
        };
        measure.rounds = self.rounds.unwrap_or(measure.rounds);
        measure.seed = self.seed;
        measure.levels = self.levels;
        Options {
            measure,
            json: self.json,
            plot: self.plot,
            save: self.save,
        }
    }
}

/// The table, like the BSPlib paper's Table 1: r in Mflop/s, l and g in µs / ns and in flop
/// units (time × r).
pub fn table(levels: &[LevelParams]) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{:<8} {:<9} {:>3} {:>9} {:>9} {:>9} {:>8} {:>15} {:>7} {:>8} {:>9}",
        "level",
        "policy",
        "p",
        "r Mflop/s",
        "(daxpy)",
        "(stream)",
        "l µs",
        "l interval",
        "l flop",
        "l' µs",
        "l reg µs"
    ));
    for prim in Prim::ALL {
        s.push_str(&format!(" {:>17}", format!("g {} ns|flop", prim.name())));
    }
    s.push_str(&format!(
        " {:>11} {:>14} {:>10}",
        "g far ns", "g dir. far ns", "cache MiB"
    ));
    s.push_str(&format!(" {:>9}\n", "fit err"));
    for l in levels {
        let put = l.fit(Prim::Put);
        // A negative intercept is not a latency: shown as such, not as a number.
        let l_comm = if put.l < 0.0 {
            "<0 ?".to_string()
        } else if put.trusted() {
            format!("{:.3}", put.l * 1e6)
        } else {
            format!("{:.3}?", put.l * 1e6)
        };
        s.push_str(&format!(
            "{:<8} {:<9} {:>3} {:>9.0} {:>9.0} {:>9.0} {:>8.3} {:>15} {:>7.0} {:>8} {:>9.3}",
            l.level.name(),
            l.policy,
            l.p,
            l.r_dense / 1e6,
            l.r_daxpy / 1e6,
            l.r_stream / 1e6,
            l.l * 1e6,
            format!("{:.3}-{:.3}", l.l_interval.0 * 1e6, l.l_interval.1 * 1e6),
            l.l * l.r_dense,
            l_comm,
            l.l_reg * 1e6
        ));
        for prim in Prim::ALL {
            let f = l.fit(prim);
            let mark = if f.trusted() { "" } else { "?" };
            // put1's, get1's and direct1's columns are the g_msg, g_get_msg and g_direct_msg
            // the file holds (put1 fitted through the empty superstep; the others at least
            // their bulk g).
            let g = match prim {
                Prim::Put1 => l.g_msg(),
                Prim::Get1 => l.g_get_msg(),
                Prim::Direct1 => l.g_direct_msg(),
                _ => f.g,
            };
            s.push_str(&format!(
                " {:>17}",
                format!("{:.2} | {:.1}{mark}", g * 1e9, g * l.r_dense)
            ));
        }
        // `*`: no edge showed on the ladder; the machine tree's figure stands.
        let tree = if l.cache == l.cache_tree { "*" } else { "" };
        s.push_str(&format!(
            " {:>11.2} {:>14.2} {:>10}",
            l.g_far * 1e9,
            l.g_direct_far * 1e9,
            format!("{:.1}{tree}", l.cache / 1048576.0)
        ));
        let worst = l.fits.iter().map(|(_, f)| f.residual).fold(0.0, f64::max);
        let mark = if worst > MAX_RESIDUAL { "?" } else { "" };
        s.push_str(&format!(" {:>8.1}%{mark}\n", 100.0 * worst));
    }
    let doubts: Vec<String> = levels.iter().flat_map(LevelParams::doubts).collect();
    if !doubts.is_empty() {
        s.push_str(&format!(
            "\nwarning: values marked ? come from fits not to be trusted (residual above {:.0}% \
             or a negative intercept: a busy machine, or noise larger than the effect); measure \
             again on a quiet machine, or with more --samples:\n",
            100.0 * MAX_RESIDUAL
        ));
        for d in doubts {
            s.push_str(&format!("  {d}\n"));
        }
    }
    s
}

/// Each level's far h and the tree's cache per process: "machine: h = 4194304, the tree's
/// cache 16.5 MiB; ...".
fn far_ranges(levels: &[LevelParams]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for l in levels {
        let s = format!(
            "{}: h = {}, the tree's cache {:.1} MiB",
            l.level.name(),
            l.far_h,
            l.cache_tree / 1048576.0,
        );
        if !seen.contains(&s) {
            seen.push(s);
        }
    }
    seen.join("; ")
}

/// Run `mbsp params`: measure, print, write the files.
pub fn run(o: &Options) -> Result<()> {
    let m = &o.measure.seeded();
    crate::affinity::refuse_forced("mbsp params")?;
    // Where --save will write, known before minutes of measuring.
    let save_to = o.save.then(save_path).transpose()?;
    let chosen = params::chosen_levels(m)?;
    params::check_memory(m, &chosen)?;
    println!("mbsp params: {}", mbsp_tools::machine::describe());
    println!(
        "h-relations h = 0 ... {} words in {} steps, {} samples per point (median); r from a \
         48x48 dense product (DAXPY of 2048 beside it, and a STREAM triad of {} doubles per \
         array), all processes at once; {}\n",
        m.max_h,
        m.h_steps,
        m.samples.div_ceil(m.rounds.max(1)) * m.rounds.max(1),
        m.stream_n,
        rounds_phrase(m)
    );
    let fresh = params::fresh_per_word();
    let levels = params::measure_levels(&chosen, m)?;
    let mut measured = Measurement::new(levels.levels, fresh).in_rounds(m);
    let turns = params::turns_or_warn(m, measured.g_msg())?;
    let state = levels.state;
    measured = measured.watched(state.clone());
    measured.turns = turns.clone();
    measured.set_aside = levels.set_aside;
    print!("{}", table(&measured.levels));
    println!(
        "\nl = empty superstep (median, and its {:.0}% confidence interval); g = seconds per \
         8-byte word of a full h-relation (slope of a least-squares fit of time against h > 0; \
         g put1 is the per-message g, g_msg, fitted through the empty superstep's time; g \
         get1 and g direct1 the per-request g of gets and of direct gets, g_get_msg and \
         g_direct_msg; gets read what their owner \
         wrote a superstep before); l' = the bulk-put fit's intercept (a superstep that communicates at all); \
         l reg = a superstep that registers or deregisters; g far, g dir. far = bulk puts and \
         direct gets of h words per process (time per word), past what the caches hold for a \
         process by the machine's tree (its L2 and its share of the L3); cache = where a \
         process's data (sent and received) leaves its caches, measured where bulk puts' time \
         per word crosses halfway to g far (* = no edge showed: the tree's figure) ({}); flop units = time x r; fit err = worst RMS relative \
         residual of the seven fits; first touch of fresh memory: {:.2} ns per word",
        100.0 * mbsp_tools::stats::CONFIDENCE,
        far_ranges(&measured.levels),
        fresh * 1e9
    );
    print!("{}", ladder_lines(&measured.levels));
    if let Some(turns) = &turns {
        println!("{}", turns_line(turns));
    }
    match &measured.set_aside {
        Some(set_aside) => println!(
            "{}\n{}",
            set_aside.line("measurements", "they would mix two states"),
            state.line_during("the measurements kept")
        ),
        None => println!("{}", state.line()),
    }
    if let Some(path) = &o.json {
        write_json(path, &measured).map_err(|e| Error::io("--json").with_source(e))?;
        eprintln!(
            "mbsp params: wrote {} (use it: MBSP_PARAMS={}; --save makes them this machine's)",
            path.display(),
            path.display()
        );
    }
    if let Some(path) = &o.plot {
        plot(path, &measured.levels).map_err(|e| e.context("--plot"))?;
        eprintln!("mbsp params: plotted {}", path.display());
    }
    if let Some(path) = save_to {
        if !state.quiet() {
            eprintln!(
                "mbsp params: warning: saving parameters measured on a busy or unsteady machine ({}): every \
                 prediction will use them; run `mbsp params --save` again when it is quiet",
                state.causes().join("; ")
            );
        }
        save(&path, &measured)?;
    }
    Ok(())
}

/// What processes taking turns on the hardware threads add to a superstep, and the points
/// behind it.
/// How the configurations were ordered: "one round", or "3 rounds, each level and policy once
/// per round in a random order (seed 42; --seed repeats it)".
fn rounds_phrase(m: &params::Options) -> String {
    match (m.rounds.max(1), m.seed) {
        (1, _) => "one round".into(),
        (r, Some(seed)) => format!(
            "{r} rounds, each level and policy once per round in a random order (seed {seed}; \
             --seed repeats it)"
        ),
        (r, None) => format!("{r} rounds, each level and policy once per round"),
    }
}

/// Each level's ladder of bulk puts, one line each: the time per word at each size of a
/// process's data, which predictions take between the first rung and the last
/// (`Params::g_ladder`).
fn ladder_lines(levels: &[LevelParams]) -> String {
    let mut out = String::new();
    for l in levels {
        let ladder = l.g_ladder();
        if ladder.is_empty() {
            continue;
        }
        let rungs: Vec<String> = ladder
            .rungs()
            .map(|(bytes, g)| format!("{} {:.2}", mib(bytes), g * 1e9))
            .collect();
        out.push_str(&format!(
            "ladder, {} level, {}: ns per word of bulk puts by data per process (sent and \
             received; predictions take these rates between the first size and the last): {}\n",
            l.level.name(),
            l.policy,
            rungs.join(", ")
        ));
    }
    out
}

/// Bytes as `512 KiB`, `2 MiB`.
fn mib(bytes: f64) -> String {
    if bytes >= 1048576.0 {
        format!("{} MiB", bytes / 1048576.0)
    } else {
        format!("{} KiB", bytes / 1024.0)
    }
}

fn turns_line(t: &params::Turns) -> String {
    let us = |x: f64| x * 1e6;
    let points: Vec<String> = t
        .points
        .iter()
        .map(|q| {
            format!(
                "{}: {:.2} / {:.2}, puts {:.2} / {:.2} µs",
                q.k,
                us(q.threads),
                us(q.coroutines),
                us(q.threads_put),
                us(q.coroutines_put)
            )
        })
        .collect();
    format!(
        "turns: each process beyond the first on a hardware thread adds {:.3} µs to a superstep \
         as threads (turn), {:.3} µs as coroutines (turn_coroutine), and {:.3} / {:.3} µs more \
         where the superstep communicates (turn_comm, turn_comm_coroutine: beyond a one-word \
         put's g_msg): the slopes of the empty superstep and of one-word puts to the next \
         process over processes per hardware thread (threads / coroutines, {})",
        us(t.threads),
        us(t.coroutines),
        us(t.threads_comm),
        us(t.coroutines_comm),
        points.join("; ")
    )
}

/// Writes the parameter file of `measured` to `path`, whole.
fn write_json(path: &Path, measured: &Measurement) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(&measured.to_json()).expect("JSON");
    crate::whole_file::write(path, |f| {
        use std::io::Write;
        writeln!(f, "{text}")
    })
}

/// Where `--save` writes: [`mbsp::params::saved_path`].
fn save_path() -> Result<PathBuf> {
    mbsp::params::saved_path().ok_or_else(|| {
        Error::usage(
            "--save: neither XDG_CONFIG_HOME nor HOME names a directory to save the parameters \
             in (write them with --json FILE and use MBSP_PARAMS=FILE)",
        )
    })
}

/// `--save`: the parameter file to `path`, unless the fits its top-level values come from are
/// not to be trusted (every command would predict from them).
fn save(path: &Path, measured: &Measurement) -> Result<()> {
    if let Some(top) = measured.top_level() {
        let doubts: Vec<String> = [Prim::Put, Prim::Direct]
            .into_iter()
            .filter(|&p| !top.fit(p).trusted())
            .map(|p| format!("the {} fit: {}", p.name(), top.fit(p).doubts().join(", ")))
            .collect();
        if !doubts.is_empty() {
            return Err(Error::run(format!(
                "--save: not saved: the {} level's g comes from fits not to be trusted ({}); \
                 measure again on a quiet machine, or with more --samples",
                top.level.name(),
                doubts.join("; ")
            )));
        }
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| {
            Error::io(format!("--save: cannot create {}", dir.display())).with_source(e)
        })?;
    }
    write_json(path, measured)
        .map_err(|e| Error::io(format!("--save: {}", path.display())).with_source(e))?;
    eprintln!(
        "mbsp params: saved {} (every command and the profiler use it unless MBSP_PARAMS is set)",
        path.display()
    );
    Ok(())
}

/// Time per superstep against h, one panel per level and policy: measured points and fitted
/// lines per primitive (SVG, written whole).
fn plot(path: &Path, levels: &[LevelParams]) -> Result<()> {
    use plotters::prelude::*;
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let panel_h = 380u32;
    let size = (1000u32, panel_h * levels.len() as u32);
    crate::whole_file::svg(path, size, |root| {
        root.fill(&WHITE).map_err(|e| err(&e))?;
        for (area, l) in root.split_evenly((levels.len(), 1)).iter().zip(levels) {
            let max_h = l
                .fits
                .iter()
                .flat_map(|(_, f)| f.points.iter().map(|p| p.0))
                .fold(1.0, f64::max);
            let max_t = l
                .fits
                .iter()
                .flat_map(|(_, f)| f.points.iter().map(|p| p.1 * 1e6))
                .fold(0.0, f64::max)
                * 1.1;
            let title = format!(
                "{} level, {}, p = {}: time per superstep vs h",
                l.level.name(),
                l.policy,
                l.p
            );
            let (plot_area, legend_area) = area.split_horizontally(1000 - 200);
            let mut chart = ChartBuilder::on(&plot_area)
                .caption(title, ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(60)
                .build_cartesian_2d(0.0..max_h, 0.0..max_t.max(1e-3))
                .map_err(|e| err(&e))?;
            chart
                .configure_mesh()
                .x_desc("h (8-byte words per process)")
                .y_desc("µs per superstep")
                .draw()
                .map_err(|e| err(&e))?;
            for (i, (prim, f)) in l.fits.iter().enumerate() {
                let color = crate::whole_file::color(i);
                chart
                    .draw_series(
                        f.points
                            .iter()
                            .map(|&(h, t)| Circle::new((h, t * 1e6), 3, color.filled())),
                    )
                    .map_err(|e| err(&e))?;
                chart
                    .draw_series(LineSeries::new(
                        [0.0, max_h].map(|h| (h, (f.l + f.g * h) * 1e6)),
                        color.stroke_width(2),
                    ))
                    .map_err(|e| err(&e))?;
                let label = format!("{}: g = {:.2} ns/word", prim.name(), f.g * 1e9);
                legend_area
                    .draw(&Text::new(
                        label,
                        (8, 40 + 22 * i as i32),
                        ("sans-serif", 14).into_font().color(&color),
                    ))
                    .map_err(|e| err(&e))?;
            }
        }
        root.present().map_err(|e| err(&e))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mbsp_tools::params::{Fit, Where};

    #[test]
    fn untrusted_values_are_marked_in_the_table() {
        let line = |l: f64, g: f64| -> Vec<(f64, f64)> {
            (1..5)
                .map(|i| (i as f64 * 512.0, l + g * i as f64 * 512.0))
                .collect()
        };
        // A line through negative time at h = 0 (what a busy machine can produce).
        let neg = Fit::of(line(-48.3e-6, 1e-7));
        let level = LevelParams {
            level: Where::Machine,
            policy: "scattered",
            p: 2,
            r_daxpy: 1e9,
            r_dense: 1e9,
            r_stream: 1e9,
            l: 1e-6,
            l_interval: (0.9e-6, 1.1e-6, 0.96),
            l_reg: 2e-6,
            g_far: 2e-9,
            g_direct_far: 2e-9,
            cache: 1e6,
            cache_tree: 1e6,
            ladder: vec![],
            far_h: 1 << 20,
            fits: Prim::ALL
                .iter()
                .map(|&p| {
                    (
                        p,
                        if p == Prim::Put {
                            neg.clone()
                        } else {
                            Fit::of(line(1e-6, 2e-9))
                        },
                    )
                })
                .collect(),
        };
        let t = table(std::slice::from_ref(&level));
        assert!(t.contains("<0 ?"), "{t}");
        let row = t.lines().nth(1).unwrap();
        assert!(
            !row.contains("-48.3"),
            "the intercept is not printed as a number in the table: {t}"
        );
        assert!(
            t.contains("warning: values marked ? come from fits not to be trusted"),
            "{t}"
        );
        assert!(
            t.contains("machine level, scattered: the put fit (negative intercept -48.3 µs)"),
            "{t}"
        );
        // The ladder's line: the rungs predictions use, not those below LADDER_MIN_H; none
        // for a level without such rungs.
        assert_eq!(ladder_lines(std::slice::from_ref(&level)), "");
        let level = LevelParams {
            ladder: vec![(2048.0, 2e-9), (65536.0, 0.85e-9), (131072.0, 0.4e-9)],
            ..level
        };
        let lines = ladder_lines(std::slice::from_ref(&level));
        assert!(
            lines.starts_with("ladder, machine level, scattered: ")
                && lines.ends_with(": 1 MiB 0.85, 2 MiB 0.40\n"),
            "{lines}"
        );
    }
}
