//! `mbsp-bench spmv`: sparse matrix–vector multiply `y = A x` with the mbsp SpMV variants
//! against sequential CSR and rayon row-parallel CSR, and against the memory bandwidth of the
//! machine, all measured in the same run.
//!
//! **What is timed.** Per matrix and per p (default 1, 2, 4, ... up to the hardware threads;
//! `--procs`): a *group* of measurements taken close together in time, because this kind of
//! machine switches between fast and slow states and figures timed minutes apart are not
//! comparable. For each mbsp variant of [`Variant::ALL`] the matrix is partitioned and planned
//! (plain and hp share one partition)
//! ([`Prepared::new`], timed apart and reported as `partition_seconds`, never part of a
//! multiply); then [`measure`] times `batches` batches of `per` multiplies of the variant,
//! interleaved batch by batch with as many sequential CSR multiplies ([`Csr::multiply`]) on
//! process 0. Right before and right after each `measure`, rayon row-parallel CSR is timed in
//! batches of `per` multiplies too. Every figure is the median over its batches of the seconds
//! per multiply, after one warm-up multiply.
//!
//! **Rows.** `sequential`: sequential CSR, the median of the `seq` figures of the group's
//! `measure` calls (one thread; `p` is the group's). `rayon`: the CSR rows cut into blocks of
//! balanced nonzeros (4 per thread, 1 at p = 1) and multiplied with `par_iter_mut` over the
//! blocks, each block writing its own slice of `y`, on a rayon `ThreadPool` of p threads built
//! once per p (not the global pool), with the same kernel as sequential CSR
//! ([`Csr::multiply_rows`]). One row per mbsp variant (its [`Variant::name`]).
//!
//! **Speedup** is over sequential CSR of the same group: an mbsp variant's over the `seq` timed
//! interleaved with it in its own `measure` call; rayon's and the sequential row's over the
//! group's sequential figure (with one variant, that is the same number).
//! **Mflop/s** = 2 nnz / seconds per multiply / 10⁶.
//!
//! **Bandwidth model.** Bytes moved per multiply, the same for every row (the useful traffic
//! of CSR, not what a variant moves besides: its communication and index structures are extra
//! work, not extra credit): `nnz (8 + 4)` (values, f64, and column indices, u32) `+ (rows + 1) 8`
//! (row pointers, usize) `+ 8 (rows + cols)` (x read once, y written once; no write-allocate
//! traffic counted, as STREAM does not count it). GB/s = bytes / seconds per multiply / 10⁹.
//! A matrix whose data fit in the caches can exceed the triad figure.
//!
//! **STREAM triad.** `a[i] = b[i] + s c[i]` over three arrays of [`TRIAD_MIB`] MiB of f64 each
//! (much larger than the last-level cache), 24 bytes per element counted; on 1 thread and on p
//! std threads (each its contiguous chunk, first-touched by the same chunking, timed from a
//! common barrier to the slowest thread); the best of several passes at the start of the run
//! and again at its end. A row's `% triad` is its GB/s against the triad on its thread count
//! (1 for `sequential`, p otherwise): SpMV is memory bound and the triad is the practical limit.
//!
//! **Memory bound.** Per matrix, after the table: the bytes one multiply must move (the model
//! above: the matrix in CSR, `x` read once, `y` written once) over the triad on p threads, as a
//! lower bound on the time, and the hp multiply's time at p = 2 against it (target
//! [`BOUND_TARGET`] on the matrices over [`LARGE_NNZ`] nonzeros). A variant that stores fewer
//! bytes than CSR (iso-valued SELL keeps one value for a pattern matrix) can go below 1.
//!
//! **Nested against flat.** Where `hier`'s top level is one package (`hier_shape`: one package,
//! or p not divisible by more), `plain` and `hier` at the same p are measured again in turn,
//! [`TOP1_ROUNDS`] rounds (one with `--quick`); after the table, per matrix, hier's time over
//! plain's (the ratio of the medians of the rounds, and the range of the rounds' ratios)
//! against the target of 1.05: met when the 95% interval of the time ratio over the rounds
//! (`mbsp_tools::stats::at_most`) lies at or below it, MISSED when above, unclear when it
//! holds it (a noisy machine, or too small a difference for six rounds).
//!
//! Every result is checked against sequential CSR with [`max_rel_error`] (error per entry
//! relative to the sum of the magnitudes of its terms); above 1e-12 the run fails after its
//! output. After the table, a summary per target of the issue (met / MISSED / unclear with the
//! numbers, skipped for variants not built yet).

use crate::cli::{self, Counts};
use crate::partition_bench::{balanced_blocks, input_files};
use mbsp_algorithms::sparse::{CooMatrix, mtx};
use mbsp_tools::sparse::matrix_name;
use mbsp_tools::spmv::{Csr, Per, Prepared, Variant, max_rel_error, measure, test_x};
use mbsp_tools::stats::{CONFIDENCE, Comparison, Verdict, at_most, median};
use mbsp_tools::{Error, Result};
use plotters::prelude::*;
use rayon::prelude::*;
use serde_json::{Value, json};
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Size of each of the three arrays of the STREAM triad, in MiB.
pub const TRIAD_MIB: usize = 64;

/// Rounds of `plain` and `hier` in turn for the nested/flat ratio (see the module docs).
/// Six: fewer rounds of each cannot give a 95% interval of their ratio.
pub const TOP1_ROUNDS: usize = 6;

/// The ratio `hier` with a top level of one package may cost over `plain` (issue 41).
const TOP1_TARGET: f64 = 1.05;

/// `hier` with a top level of one package against `plain` at the same p, over rounds in turn.
struct Top1 {
    matrix: String,
    p: usize,
    /// Seconds per multiply of each round: (hier, plain).
    rounds: Vec<(f64, f64)>,
}

impl Top1 {
    /// The median of hier's rounds over the median of plain's.
    fn ratio(&self) -> f64 {
        let (h, f): (Vec<f64>, Vec<f64>) = self.rounds.iter().copied().unzip();
        median(&h) / median(&f)
    }

    /// Against [`TOP1_TARGET`] at [`CONFIDENCE`], from the interval of the time ratio over
    /// the rounds of both ([`at_most`]): unclear where it holds the target.
    fn judged(&self) -> (Comparison, Verdict) {
        let (h, f): (Vec<f64>, Vec<f64>) = self.rounds.iter().copied().unzip();
        at_most(&h, &f, TOP1_TARGET, CONFIDENCE)
    }

    /// The lowest and highest of the rounds' ratios.
    fn range(&self) -> (f64, f64) {
        let r = self.rounds.iter().map(|(h, f)| h / f);
        (
            r.clone().fold(f64::INFINITY, f64::min),
            r.fold(0.0, f64::max),
        )
    }

    /// The case in words, with `c`, its [`judged`](Self::judged) interval.
    fn detail(&self, c: &Comparison) -> String {
        let (lo, hi) = self.range();
        let (h, f): (Vec<f64>, Vec<f64>) = self.rounds.iter().copied().unzip();
        format!(
            "{} p = {}: hier (1 x {}) {:.1} µs / plain {:.1} µs = {:.3}, {:.0}% interval \
             {:.3}-{:.3} (rounds {lo:.3}-{hi:.3}, {} rounds)",
            self.matrix,
            self.p,
            self.p,
            median(&h) * 1e6,
            median(&f) * 1e6,
            self.ratio(),
            100.0 * c.level,
            c.lo,
            c.hi,
            self.rounds.len()
        )
    }
}

/// The largest relative error accepted (as `mbsp spmv`).
const TOLERANCE: f64 = 1e-12;

/// Options of `mbsp-bench spmv`.
#[derive(Clone, Debug)]
pub struct Options {
    /// The matrices (empty: every matrix of the shared data directory, smallest first).
    pub files: Vec<PathBuf>,
    /// Process counts (`None`: 1, 2, 4, ... up to the hardware threads, and their number;
    /// 1, 2 with `quick`).
    pub procs: Option<Vec<usize>>,
    /// Multiplies timed per measurement, in 9 batches (`None`: per batch
    /// clamp(4·10⁷ / nnz, 5, 2000), or a few with `quick`).
    pub reps: Option<usize>,
    /// Write the rows as CSV to this file.
    pub csv: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    pub json: bool,
    /// Write a bar chart of the speedups at the largest p (SVG) to this file.
    pub plot: Option<PathBuf>,
    /// Smoke run: only the small matrices (unless files are given), p = 1, 2 (unless `procs`
    /// is given), few multiplies and triad passes.
    pub quick: bool,
}

/// The command line of `mbsp-bench spmv`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Matrix Market files (default: every matrix in MBSP_DATA_DIR/matrices, or in
    /// ../shared/data/matrices beside the repository).
    #[arg(value_name = "FILES")]
    files: Vec<PathBuf>,
    /// Process counts, comma-separated (default 1, 2, 4, ... up to the hardware threads;
    /// 1,2 with --quick).
    #[arg(long, value_name = "P,P,...", allow_hyphen_values = true,
          value_parser = cli::counts("--procs"))]
    procs: Option<Counts>,
    /// Multiplies timed per measurement, in 9 batches (default: per batch
    /// clamp(4e7 / nnz, 5, 2000)).
    #[arg(long, value_name = "N", allow_hyphen_values = true,
          value_parser = cli::at_least("--reps", 1))]
    reps: Option<usize>,
    /// Also write the rows as CSV (matrix, variant, p, mflops, speedup, gbs, triad_gbs,
    /// rel_error, partition_seconds, nnz, seconds) to FILE.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Print the results as one JSON object (rows, triad figures, targets) instead of a table.
    #[arg(long)]
    json: bool,
    /// Also plot the speedups at the largest p as grouped bars (SVG) to FILE.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// A smoke run of seconds: only rajat01, bayer10 and wiki-Vote (unless files are given),
    /// p = 1, 2 (unless --procs is given), few multiplies; the numbers are not meaningful.
    #[arg(long)]
    quick: bool,
}

impl Args {
    /// The options these arguments ask for.
    pub fn options(self) -> Options {
        Options {
            files: self.files,
            procs: self.procs.map(|c| c.0),
            reps: self.reps,
            csv: self.csv,
            json: self.json,
            plot: self.plot,
            quick: self.quick,
        }
    }
}

/// The default process counts: 1, 2, then powers of two up to `cores`, and `cores` itself.
fn default_procs(cores: usize) -> Vec<usize> {
    let mut v = vec![1, 2];
    let mut p = 4;
    while p <= cores {
        v.push(p);
        p *= 2;
    }
    if !v.contains(&cores) {
        v.push(cores);
    }
    v
}

/// Batches and multiplies per batch of one measurement of a matrix with `nnz` nonzeros.
fn batching(nnz: usize, reps: Option<usize>, quick: bool) -> (usize, usize) {
    let batches = if quick { 3 } else { 9 };
    let per = match reps {
        Some(r) => (r / batches).max(1),
        // About 5·10⁷ flops per batch: 0.2–0.4 s per measurement of 9 batches on one core
        // at 1–2 Gflop/s (the default run of the shared matrices stays within a few minutes).
        None if !quick => (2.5e7 / nnz.max(1) as f64).clamp(5.0, 2000.0) as usize,
        None => (1e6 / nnz.max(1) as f64).clamp(2.0, 20.0) as usize,
    };
    (batches, per)
}

/// Bytes moved by one multiply, by the model of the module doc.
fn bytes_per_multiply(rows: usize, cols: usize, nnz: usize) -> f64 {
    (nnz * (8 + 4) + (rows + 1) * 8 + 8 * (rows + cols)) as f64
}

// ---------------------------------------------------------------------------------------------
// STREAM triad

/// The three arrays of the triad, allocated once for the run.
struct Triad {
    a: Vec<f64>,
    b: Vec<f64>,
    c: Vec<f64>,
}

impl Triad {
    /// Arrays of `mib` MiB each, first-touched in `threads` contiguous chunks.
    fn new(mib: usize, threads: usize) -> Self {
        let len = (mib << 20) / 8;
        let (mut a, mut b, mut c) = (vec![0.0; len], vec![0.0; len], vec![0.0; len]);
        let chunk = len.div_ceil(threads.max(1)).max(1);
        std::thread::scope(|s| {
            for (k, ((a, b), c)) in a
                .chunks_mut(chunk)
                .zip(b.chunks_mut(chunk))
                .zip(c.chunks_mut(chunk))
                .enumerate()
            {
                s.spawn(move || {
                    for (i, ((a, b), c)) in a.iter_mut().zip(b).zip(c).enumerate() {
                        let j = (k * chunk + i) as f64;
                        *a = 0.0;
                        *b = 1.0 + j * 1e-9;
                        *c = 2.0 - j * 1e-9;
                    }
                });
            }
        });
        Triad { a, b, c }
    }

    /// GB/s of the best of `passes` triads on `threads` threads (24 bytes per element).
    fn best_gbs(&mut self, threads: usize, passes: usize) -> f64 {
        let len = self.a.len();
        let chunk = len.div_ceil(threads).max(1);
        let scalar = std::hint::black_box(3.0);
        let mut best = f64::INFINITY;
        for _ in 0..passes {
            let barrier = std::sync::Barrier::new(threads);
            let barrier = &barrier;
            let seconds = std::thread::scope(|s| {
                let handles: Vec<_> = self
                    .a
                    .chunks_mut(chunk)
                    .zip(self.b.chunks(chunk))
                    .zip(self.c.chunks(chunk))
                    .map(|((a, b), c)| {
                        s.spawn(move || {
                            barrier.wait();
                            let t = Instant::now();
                            for ((a, b), c) in a.iter_mut().zip(b).zip(c) {
                                *a = b + scalar * c;
                            }
                            std::hint::black_box(&a);
                            t.elapsed().as_secs_f64()
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("triad thread"))
                    .fold(0.0, f64::max)
            });
            best = best.min(seconds);
        }
        (24 * len) as f64 / best / 1e9
    }
}

/// Best triad GB/s per thread count, over every measurement of the run.
#[derive(Default)]
struct TriadFigures(Vec<(usize, f64)>);

impl TriadFigures {
    fn record(&mut self, threads: usize, gbs: f64) {
        match self.0.iter_mut().find(|(t, _)| *t == threads) {
            Some((_, best)) => *best = best.max(gbs),
            None => self.0.push((threads, gbs)),
        }
    }

    fn get(&self, threads: usize) -> f64 {
        self.0
            .iter()
            .find(|(t, _)| *t == threads)
            .map_or(f64::NAN, |&(_, g)| g)
    }

    /// Measures the triad on every thread count.
    fn measure(&mut self, triad: &mut Triad, counts: &[usize], passes: usize) {
        for &t in counts {
            let gbs = triad.best_gbs(t, passes);
            self.record(t, gbs);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// rayon row-parallel CSR

/// The rows cut into `parts` contiguous blocks of balanced nonzeros (empty blocks dropped).
fn row_ranges(csr: &Csr, parts: usize) -> Vec<Range<usize>> {
    let counts: Vec<u32> = csr.ptr.windows(2).map(|w| (w[1] - w[0]) as u32).collect();
    let block = balanced_blocks(&counts, parts);
    let mut ranges: Vec<Range<usize>> = Vec::with_capacity(parts);
    let mut start = 0;
    for i in 1..=block.len() {
        if i == block.len() || block[i] != block[i - 1] {
            ranges.push(start..i);
            start = i;
        }
    }
    ranges
}

/// `y` cut into the slices of `ranges` (which cover it in order), each with its rows.
fn split_rows<'y>(
    mut y: &'y mut [f64],
    ranges: &[Range<usize>],
) -> Vec<(Range<usize>, &'y mut [f64])> {
    let mut parts = Vec::with_capacity(ranges.len());
    for r in ranges {
        let (head, tail) = y.split_at_mut(r.len());
        parts.push((r.clone(), head));
        y = tail;
    }
    parts
}

/// One rayon multiply: each block of rows computes its slice of `y`, in parallel.
fn rayon_multiply(csr: &Csr, x: &[f64], parts: &mut [(Range<usize>, &mut [f64])]) {
    parts
        .par_iter_mut()
        .for_each(|(rows, y)| csr.multiply_rows(rows.clone(), x, y));
}

/// Seconds per multiply of `batches` batches of `per` rayon multiplies in `pool`.
fn time_rayon(
    pool: &rayon::ThreadPool,
    csr: &Csr,
    x: &[f64],
    parts: &mut [(Range<usize>, &mut [f64])],
    batches: usize,
    per: usize,
) -> Vec<f64> {
    pool.install(|| {
        (0..batches)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..per {
                    rayon_multiply(csr, x, parts);
                }
                t.elapsed().as_secs_f64() / per as f64
            })
            .collect()
    })
}

// ---------------------------------------------------------------------------------------------
// Rows

/// One row of the table: a variant of one matrix in one (matrix, p) group.
struct Row {
    matrix: String,
    nnz: usize,
    rows: usize,
    cols: usize,
    variant: String,
    p: usize,
    /// Threads it ran on: 1 for sequential, p otherwise (the triad it is compared with).
    threads: usize,
    /// Seconds per multiply (median of the batches).
    seconds: f64,
    /// Over sequential CSR of the same group.
    speedup: f64,
    /// Bytes per multiply (the model).
    bytes: f64,
    rel_error: f64,
    /// mbsp variants: partitioning and planning seconds, volume and max_h of the partition.
    partition: Option<(f64, u64, u64)>,
    /// The mbsp variants: the BSP-predicted seconds per multiply (`SpmvPlan::predict`, with the
    /// local kernel's rate measured per plan and g, l from `MBSP_PARAMS`; hier:
    /// `mbsp_tools::spmv::hier_prediction`).
    predicted: Option<f64>,
}

impl Row {
    fn mflops(&self) -> f64 {
        2.0 * self.nnz as f64 / self.seconds / 1e6
    }

    fn gbs(&self) -> f64 {
        self.bytes / self.seconds / 1e9
    }

    /// The memory bound of one multiply on this row's threads: its bytes (the model) at the
    /// STREAM triad's rate on as many threads, a lower bound on the time of any multiply that
    /// moves CSR's bytes.
    fn bound_seconds(&self, triad: &TriadFigures) -> f64 {
        self.bytes / (triad.get(self.threads) * 1e9)
    }
}

/// Checks that a file can be written at `path` (its directory exists), before a long run.
pub(crate) fn check_output(flag: &str, path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if path.is_dir() {
        return Err(Error::io(format!(
            "{flag} {}: is a directory",
            path.display()
        )));
    }
    if !dir.is_dir() {
        return Err(Error::io(format!(
            "{flag} {}: directory {} does not exist",
            path.display(),
            dir.display()
        )));
    }
    Ok(())
}

/// Runs the benchmark: the STREAM triad at the start, every matrix measured at every p
/// ([`measure_matrix`]), the triad again at the end, then the CSV file, the plot, the targets
/// and the JSON or the table; a result that differs from sequential CSR fails the run after
/// its output.
pub fn run(o: &Options) -> Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let procs = match &o.procs {
        Some(p) => p.clone(),
        None if o.quick => vec![1, 2],
        None => default_procs(cores),
    };
    let files = input_files(&o.files, o.quick)?;
    if let Some(path) = &o.csv {
        check_output("--csv", path)?;
    }
    if let Some(path) = &o.plot {
        check_output("--plot", path)?;
    }
    // Every matrix at the largest p (and its threads) must fit before anything is measured.
    let most = procs.iter().copied().max().unwrap_or(1);
    for f in &files {
        crate::preflight::spmv_file(f, most)?;
    }
    let pools = rayon_pools(&procs)?;

    let mut threads: Vec<usize> = std::iter::once(1).chain(procs.iter().copied()).collect();
    threads.sort_unstable();
    threads.dedup();
    let passes = if o.quick { 2 } else { 8 };
    eprintln!("spmv: STREAM triad, 3 x {TRIAD_MIB} MiB, best of {passes} on {threads:?} thread(s)");
    let mut triad = Triad::new(TRIAD_MIB, *threads.last().unwrap_or(&1));
    let mut figures = TriadFigures::default();
    figures.measure(&mut triad, &threads, passes);
    let triad_start: Vec<(usize, f64)> = figures.0.clone();

    let mut rows: Vec<Row> = Vec::new();
    let mut top1: Vec<Top1> = Vec::new();
    for f in &files {
        measure_matrix(o, f, most, &procs, &pools, &figures, (&mut rows, &mut top1))?;
    }

    eprintln!("spmv: STREAM triad again at the end of the run");
    figures.measure(&mut triad, &threads, passes);
    drop(triad);
    if let Some(path) = &o.csv {
        write_csv(path, &rows, &figures).map_err(|e| Error::io("--csv").with_source(e))?;
    }
    if let Some(path) = &o.plot {
        plot(path, &rows).map_err(|e| e.context("--plot"))?;
    }
    let mut targets = targets(&rows, &figures);
    targets.extend(top1.iter().map(|t| {
        let (c, v) = t.judged();
        Target {
            target: format!("hier with a top level of one package <= {TOP1_TARGET:.2}x plain"),
            verdict: Some(v),
            detail: t.detail(&c),
        }
    }));
    let (batch_counts, _) = batching(1, o.reps, o.quick);
    if o.json {
        print_json(
            &rows,
            &figures,
            &triad_start,
            &targets,
            batch_counts,
            passes,
        );
    } else {
        print_table(&rows, &figures, &targets, batch_counts, passes);
    }
    if let Some(bad) = rows
        .iter()
        .find(|r| r.rel_error.is_nan() || r.rel_error > TOLERANCE)
    {
        return Err(Error::run(format!(
            "{} p = {} {}: result differs from sequential CSR: relative error {:e} > {TOLERANCE:e}",
            bad.matrix, bad.p, bad.variant, bad.rel_error
        )));
    }
    Ok(())
}

/// A rayon pool of `p` threads for each `p` of `procs` (not the global pool).
fn rayon_pools(procs: &[usize]) -> Result<Vec<rayon::ThreadPool>> {
    procs
        .iter()
        .map(|&p| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(p)
                .thread_name(|i| format!("spmv-rayon-{i}"))
                .build()
                .map_err(|e| Error::run(format!("rayon pool of {p} threads")).with_source(e))
        })
        .collect()
}

/// One matrix of the run, read, with what every group of its measurements shares.
struct Input {
    name: String,
    a: CooMatrix,
    csr: Csr,
    x: Vec<f64>,
    /// Sequential CSR's `A x`, the reference of rayon's result.
    want: Vec<f64>,
    /// Bytes per multiply (the model of the module documentation).
    bytes: f64,
    batches: usize,
    per: usize,
}

impl Input {
    /// A row of this matrix, with no error, partition or prediction yet.
    fn row(&self, variant: &str, p: usize, seconds: f64, speedup: f64) -> Row {
        Row {
            matrix: self.name.clone(),
            nnz: self.a.nnz(),
            rows: self.a.rows,
            cols: self.a.cols,
            variant: variant.into(),
            p,
            threads: p,
            seconds,
            speedup,
            bytes: self.bytes,
            rel_error: 0.0,
            partition: None,
            predicted: None,
        }
    }
}

/// Reads the matrix of `f` (refused if it cannot fit at the largest p, `most`) and measures it
/// at each p of `procs` ([`measure_group`]); the rows are added to `rows`, and the CSV file is
/// rewritten after every group: an interrupted run keeps the groups it finished.
fn measure_matrix(
    o: &Options,
    f: &Path,
    most: usize,
    procs: &[usize],
    pools: &[rayon::ThreadPool],
    figures: &TriadFigures,
    (rows, top1): (&mut Vec<Row>, &mut Vec<Top1>),
) -> Result<()> {
    let name = matrix_name(f);
    let t = Instant::now();
    let a = mtx::read_path(f).map_err(|e| Error::io("").with_source(e))?;
    crate::preflight::spmv_matrix(&a, most)?;
    let (nnz, bytes) = (a.nnz(), bytes_per_multiply(a.rows, a.cols, a.nnz()));
    let (batches, per) = batching(nnz, o.reps, o.quick);
    eprintln!(
        "spmv: {name}: {} x {}, {nnz} nonzeros, read in {:.2} s; {batches} batches of {per} \
         multiplies per measurement",
        a.rows,
        a.cols,
        t.elapsed().as_secs_f64()
    );
    let csr = Csr::new(&a);
    let x = test_x(a.cols);
    let mut want = vec![0.0; a.rows];
    csr.multiply(&x, &mut want);
    let input = Input {
        name,
        a,
        csr,
        x,
        want,
        bytes,
        batches,
        per,
    };
    for (&p, pool) in procs.iter().zip(pools) {
        let rounds = if o.quick { 1 } else { TOP1_ROUNDS };
        let mut group = measure_group(&input, p, pool, (rounds, top1))?;
        rows.append(&mut group);
        if let Some(path) = &o.csv {
            write_csv(path, rows, figures).map_err(|e| Error::io("--csv").with_source(e))?;
        }
    }
    Ok(())
}

/// One group of measurements taken close together: every mbsp variant at `p` ([`measure`],
/// interleaved with sequential CSR), with rayon's CSR timed right before and after each; the
/// rows `sequential`, `rayon` and one per variant.
fn measure_group(
    input: &Input,
    p: usize,
    pool: &rayon::ThreadPool,
    (rounds, top1): (usize, &mut Vec<Top1>),
) -> Result<Vec<Row>> {
    let Input {
        name,
        a,
        csr,
        x,
        want,
        batches,
        per,
        ..
    } = input;
    let (batches, per) = (*batches, *per);
    let ranges = row_ranges(csr, if p == 1 { 1 } else { 4 * p });
    let mut y_rayon = vec![0.0; a.rows];
    let mut parts = split_rows(&mut y_rayon, &ranges);
    pool.install(|| rayon_multiply(csr, x, &mut parts)); // warm-up
    let (mut rayon_times, mut seqs) = (Vec::new(), Vec::new());
    let mut group: Vec<Row> = Vec::new();
    // plain and hp run on the same partition; hier partitions for itself.
    let mut flat: Option<Prepared> = None;
    let mut hier: Option<Prepared> = None;
    for &v in Variant::ALL.iter() {
        let mut fresh: Option<Prepared> = None;
        let prep = match &flat {
            Some(f) if v != Variant::Hier => f,
            _ => {
                eprintln!("spmv: {name} p = {p}: partitioning for {}", v.name());
                &*fresh.insert(
                    Prepared::new(a, p, v).map_err(|e| e.context(format!("{name}, p = {p}")))?,
                )
            }
        };
        eprintln!(
            "spmv: {name} p = {p}: {} and sequential CSR (interleaved), rayon before \
             and after",
            v.name()
        );
        let before = batches.div_ceil(2);
        rayon_times.extend(time_rayon(pool, csr, x, &mut parts, before, per));
        let m = measure(a, csr, x, prep, v, batches, Per::Exactly(per))
            .map_err(|e| e.context(format!("{name}, p = {p}, {}", v.name())))?;
        let m = mbsp_tools::run_on::on_root(m, "the SpMV")?;
        rayon_times.extend(time_rayon(pool, csr, x, &mut parts, batches - before, per));
        seqs.push(m.seq);
        let mut r = input.row(v.name(), p, m.bsp, m.ratio);
        r.rel_error = m.max_rel_error;
        r.partition = Some((prep.partition_seconds, prep.volume, prep.max_h));
        if let (mbsp_tools::spmv::Plan::Flat(plan), Variant::Shared) = (&prep.plan, v) {
            let params = mbsp_algorithms::cost::Params::current();
            r.predicted = Some(mbsp_tools::run_on::on_root(
                mbsp_tools::spmv::shared_prediction(plan, params)?,
                "the shared SpMV's local rate",
            )?);
        } else if let mbsp_tools::spmv::Plan::Flat(plan) = &prep.plan {
            let params = mbsp_algorithms::cost::Params::current();
            // The local phase timed in the same batches as the multiplies (`measure`).
            let per_nz = match m.seconds_per_nz(plan) {
                Some(t) => t,
                None => mbsp_tools::run_on::on_root(
                    mbsp_tools::spmv::plan_seconds_per_nz(plan)?,
                    "the SpMV's local rate",
                )?,
            };
            r.predicted = Some(if v == Variant::HpPuts {
                plan.predict_puts(params, per_nz)
            } else {
                plan.predict(params, per_nz, v.predicts_hp())
            });
        } else if let mbsp_tools::spmv::Plan::Hier(plan) = &prep.plan {
            r.predicted = mbsp_tools::spmv::hier_prediction_in_force(plan, p)?;
        }
        group.push(r);
        if v == Variant::Plain {
            flat = fresh;
        } else if v == Variant::Hier {
            hier = fresh;
        }
    }
    drop(parts);
    if let (Some(flat), Some(hier)) = (&flat, &hier)
        && p > 1
        && hier.shape.0 == 1
    {
        top1.push(plain_and_hier(input, p, (flat, hier), rounds)?);
    }
    let seq = median(&seqs);
    let t_rayon = median(&rayon_times);
    let mut sequential = input.row("sequential", p, seq, 1.0);
    sequential.threads = 1;
    let mut rayon = input.row("rayon", p, t_rayon, seq / t_rayon);
    let all_rows: Vec<u32> = (0..a.rows as u32).collect();
    rayon.rel_error = max_rel_error(a, x, want, &[(&all_rows, &y_rayon)]);
    eprintln!(
        "spmv: {name} p = {p}: sequential {:.0}, rayon {:.0}{} Mflop/s",
        sequential.mflops(),
        rayon.mflops(),
        group
            .iter()
            .map(|r| format!(", {} {:.0}", r.variant, r.mflops()))
            .collect::<String>()
    );
    Ok([sequential, rayon].into_iter().chain(group).collect())
}

/// `plain` and `hier` (top level of one package) at `p` in turn, `rounds` rounds.
fn plain_and_hier(
    input: &Input,
    p: usize,
    (flat, hier): (&Prepared, &Prepared),
    rounds: usize,
) -> Result<Top1> {
    let Input {
        name,
        a,
        csr,
        x,
        batches,
        per,
        ..
    } = input;
    let mut out = Top1 {
        matrix: name.clone(),
        p,
        rounds: Vec::new(),
    };
    for round in 0..rounds {
        eprintln!(
            "spmv: {name} p = {p}: plain and hier in turn, round {}/{rounds}",
            round + 1
        );
        let time = |prep: &Prepared, v: Variant| -> Result<f64> {
            let m = measure(a, csr, x, prep, v, *batches, Per::Exactly(*per))
                .map_err(|e| e.context(format!("{name}, p = {p}, {}", v.name())))?;
            Ok(mbsp_tools::run_on::on_root(m, "the SpMV")?.bsp)
        };
        let f = time(flat, Variant::Plain)?;
        let h = time(hier, Variant::Hier)?;
        out.rounds.push((h, f));
        crate::watch::mark();
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Targets

/// The outcome of one target of the issue.
struct Target {
    target: String,
    /// `None`: not evaluated (variant or case absent).
    verdict: Option<Verdict>,
    detail: String,
}

/// The verdict of a target judged on medians (met or missed).
fn judged(met: bool) -> Verdict {
    if met { Verdict::Met } else { Verdict::Missed }
}

/// Matrices above this many nonzeros count for the p = 2 speedup target.
const LARGE_NNZ: usize = 200_000;

/// How far over its memory bound the hp multiply at p = 2 may be on the matrices over
/// [`LARGE_NNZ`] nonzeros (issue 42).
const BOUND_TARGET: f64 = 1.5;

fn has_variant(name: &str) -> bool {
    Variant::ALL.iter().any(|v| v.name() == name)
}

fn find<'r>(rows: &'r [Row], matrix: &str, variant: &str, p: usize) -> Option<&'r Row> {
    rows.iter()
        .find(|r| r.matrix == matrix && r.variant == variant && r.p == p)
}

/// The matrices of the run, in order.
fn matrices(rows: &[Row]) -> Vec<&str> {
    let mut m: Vec<&str> = Vec::new();
    for r in rows {
        if !m.contains(&r.matrix.as_str()) {
            m.push(&r.matrix);
        }
    }
    m
}

/// The targets of the issue, for the variants that exist: "2D hp at p = 2 >= 1.7x sequential
/// CSR on matrices with > 200 000 nonzeros; ahead of rayon 1D on most; hp faster than plain;
/// p = 1 within 5% of sequential; bandwidth within 2x of triad" (and hp-puts against hp).
fn targets(rows: &[Row], triad: &TriadFigures) -> Vec<Target> {
    let mut out = Vec::new();
    hp_on_large_matrices(rows, &mut out);
    hp_against_the_bound(rows, triad, &mut out);
    hp_against_plain(rows, &mut out);
    hp_puts_against_hp(rows, &mut out);
    for v in Variant::ALL.iter().map(|v| v.name()) {
        each_variant(rows, triad, v, &mut out);
    }
    out
}

/// A target not evaluated, and why.
fn skipped(target: String, why: String) -> Target {
    Target {
        target,
        verdict: None,
        detail: why,
    }
}

/// hp at p = 2 on the matrices of more than [`LARGE_NNZ`] nonzeros: its speedup, and against
/// rayon.
fn hp_on_large_matrices(rows: &[Row], out: &mut Vec<Target>) {
    let large: Vec<&str> = matrices(rows)
        .into_iter()
        .filter(|m| rows.iter().any(|r| r.matrix == *m && r.nnz > LARGE_NNZ))
        .collect();
    let t1 = format!("hp at p = 2 >= 1.7x sequential CSR on matrices > {LARGE_NNZ} nnz");
    let t2 = "hp at p = 2 ahead of rayon 1D on most of them".to_string();
    let cases: Vec<(&Row, Option<&Row>)> = large
        .iter()
        .filter_map(|m| Some((find(rows, m, "hp", 2)?, find(rows, m, "rayon", 2))))
        .collect();
    let why = if !has_variant("hp") {
        Some("skipped: no hp variant yet")
    } else if cases.is_empty() {
        Some("skipped: no matrix > 200000 nnz at p = 2 in this run")
    } else {
        None
    };
    if let Some(why) = why {
        out.push(skipped(t1, why.into()));
        out.push(skipped(t2, why.into()));
    } else {
        let n = cases.len();
        let good = cases.iter().filter(|(r, _)| r.speedup >= 1.7).count();
        let worst = cases
            .iter()
            .map(|(r, _)| r)
            .min_by(|a, b| a.speedup.total_cmp(&b.speedup))
            .expect("cases");
        out.push(Target {
            target: t1,
            verdict: Some(judged(good == n)),
            detail: format!(
                "{good} of {n}; lowest {:.2}x ({})",
                worst.speedup, worst.matrix
            ),
        });
        // Mflop/s of hp over rayon's, where rayon ran.
        let ratios: Vec<(f64, &str)> = cases
            .iter()
            .filter_map(|(r, q)| Some(((*q)?.seconds / r.seconds, r.matrix.as_str())))
            .collect();
        let ahead = ratios.iter().filter(|(x, _)| *x > 1.0).count();
        let worst = ratios.iter().min_by(|a, b| a.0.total_cmp(&b.0));
        out.push(Target {
            target: t2,
            verdict: Some(judged(2 * ahead > ratios.len())),
            detail: format!(
                "ahead on {ahead} of {}; hp / rayon Mflop/s: geometric mean {:.2}{}",
                ratios.len(),
                geomean(ratios.iter().map(|x| x.0)),
                worst.map_or(String::new(), |(x, m)| format!(", lowest {x:.2} ({m})")),
            ),
        });
    }
}

/// hp at p = 2 against its memory bound, on the matrices over [`LARGE_NNZ`] nonzeros.
fn hp_against_the_bound(rows: &[Row], triad: &TriadFigures, out: &mut Vec<Target>) {
    let target = format!(
        "hp at p = 2 within {BOUND_TARGET}x of the memory bound on matrices > {LARGE_NNZ} nnz"
    );
    let cases: Vec<(f64, &Row)> = rows
        .iter()
        .filter(|r| r.variant == "hp" && r.p == 2 && r.nnz > LARGE_NNZ)
        .map(|r| (r.seconds / r.bound_seconds(triad), r))
        .collect();
    match cases.iter().max_by(|a, b| a.0.total_cmp(&b.0)) {
        None => out.push(skipped(
            target,
            "skipped: no hp row at p = 2 on a matrix > 200000 nnz in this run".into(),
        )),
        Some((worst, w)) => {
            let good = cases.iter().filter(|(x, _)| *x <= BOUND_TARGET).count();
            out.push(Target {
                target,
                verdict: Some(judged(good == cases.len())),
                detail: format!(
                    "{good} of {}; time / bound: geometric mean {:.2}, highest {worst:.2} ({})",
                    cases.len(),
                    geomean(cases.iter().map(|c| c.0)),
                    w.matrix
                ),
            });
        }
    }
}

/// Per matrix: the bytes of one multiply, the memory bound on 1 and p threads, and the hp
/// multiply's time against it at each p (the table's last section).
fn print_bounds(rows: &[Row], triad: &TriadFigures) {
    println!(
        "
memory bound per multiply: bytes (the model) / STREAM triad on p threads, a lower \
         bound on the time of a multiply that moves CSR's bytes; hp's time over it"
    );
    println!(
        "  {:<15} {:>9} {:>9} {:>3} {:>11} {:>11} {:>9}",
        "matrix", "nnz", "MB", "p", "bound", "hp", "hp/bound"
    );
    for m in matrices(rows) {
        for r in rows.iter().filter(|r| r.matrix == m && r.variant == "hp") {
            let bound = r.bound_seconds(triad);
            println!(
                "  {:<15} {:>9} {:>9.2} {:>3} {:>8.1} µs {:>8.1} µs {:>9.2}",
                r.matrix,
                r.nnz,
                r.bytes / 1e6,
                r.p,
                bound * 1e6,
                r.seconds * 1e6,
                r.seconds / bound
            );
        }
    }
}

/// hp against plain, every matrix at every p > 1.
fn hp_against_plain(rows: &[Row], out: &mut Vec<Target>) {
    let t3 = "hp faster than plain (on most matrices, p > 1)".to_string();
    if has_variant("hp") && has_variant("plain") {
        let ratios: Vec<f64> = rows
            .iter()
            .filter(|r| r.variant == "hp" && r.p > 1)
            .filter_map(|h| Some(find(rows, &h.matrix, "plain", h.p)?.seconds / h.seconds))
            .collect();
        let faster = ratios.iter().filter(|&&x| x > 1.0).count();
        out.push(Target {
            target: t3,
            verdict: (!ratios.is_empty()).then(|| judged(2 * faster > ratios.len())),
            detail: format!(
                "faster in {faster} of {} cases; hp / plain Mflop/s: geometric mean {:.2}",
                ratios.len(),
                geomean(ratios.iter().copied())
            ),
        });
    } else {
        out.push(skipped(t3, "skipped: needs both hp and plain".into()));
    }
}

/// hp-puts (puts, lazy syncs) against hp (direct gets, a full sync) in the same run: no
/// slower at p = 2 on every matrix, >= 1.3x faster at p = 4 and 8 on the matrices under
/// [`LARGE_NNZ`] nonzeros.
fn hp_puts_against_hp(rows: &[Row], out: &mut Vec<Target>) {
    if has_variant("hp") && has_variant("hp-puts") {
        let over = |pick: &dyn Fn(&Row) -> bool| -> Vec<(f64, &Row)> {
            rows.iter()
                .filter(|r| r.variant == "hp-puts" && pick(r))
                .filter_map(|h| Some((find(rows, &h.matrix, "hp", h.p)?.seconds / h.seconds, h)))
                .collect()
        };
        let cases = [
            (
                "hp-puts (lazy syncs) no slower than hp at p = 2 (every matrix)".to_string(),
                over(&|r: &Row| r.p == 2),
                1.0,
            ),
            (
                format!(
                    "hp-puts (lazy syncs) >= 1.3x hp at p = 4 and 8 on matrices < {LARGE_NNZ} nnz"
                ),
                over(&|r: &Row| (r.p == 4 || r.p == 8) && r.nnz < LARGE_NNZ),
                1.3,
            ),
        ];
        for (target, ratios, want) in cases {
            match ratios.iter().min_by(|a, b| a.0.total_cmp(&b.0)) {
                Some((x, worst)) => {
                    let good = ratios.iter().filter(|(x, _)| *x >= want).count();
                    out.push(Target {
                        target,
                        verdict: Some(judged(good == ratios.len())),
                        detail: format!(
                            "{good} of {}; hp / hp-puts seconds: geometric mean {:.2}, lowest \
                             {x:.2} ({}, p = {})",
                            ratios.len(),
                            geomean(ratios.iter().map(|r| r.0)),
                            worst.matrix,
                            worst.p
                        ),
                    });
                }
                None => out.push(skipped(target, "skipped: no such case in this run".into())),
            }
        }
    }
}

/// The targets of variant `v`: at p = 1 within 5% of sequential CSR, and its bandwidth within
/// 2x of the triad on as many threads.
fn each_variant(rows: &[Row], triad: &TriadFigures, v: &str, out: &mut Vec<Target>) {
    // p = 1 within 5% of sequential CSR.
    let one: Vec<&Row> = rows.iter().filter(|r| r.variant == v && r.p == 1).collect();
    let target = format!("{v} at p = 1 within 5% of sequential CSR");
    match one.iter().min_by(|a, b| a.speedup.total_cmp(&b.speedup)) {
        Some(worst) => {
            let good = one.iter().filter(|r| r.speedup >= 0.95).count();
            out.push(Target {
                target,
                verdict: Some(judged(good == one.len())),
                detail: format!(
                    "{good} of {}; lowest {:.2}x ({})",
                    one.len(),
                    worst.speedup,
                    worst.matrix
                ),
            });
        }
        None => out.push(skipped(target, "skipped: p = 1 not in this run".into())),
    }
    // Bandwidth within 2x of the triad on as many threads.
    let all: Vec<(f64, &Row)> = rows
        .iter()
        .filter(|r| r.variant == v)
        .map(|r| (r.gbs() / triad.get(r.threads), r))
        .collect();
    let target = format!("{v} bandwidth within 2x of the triad (every matrix and p)");
    match all.iter().min_by(|a, b| a.0.total_cmp(&b.0)) {
        Some((x, worst)) => {
            let good = all.iter().filter(|(x, _)| *x >= 0.5).count();
            out.push(Target {
                target,
                verdict: Some(judged(good == all.len())),
                detail: format!(
                    "{good} of {}; lowest {:.0}% of triad ({}, p = {}: {:.2} of {:.2} GB/s)",
                    all.len(),
                    100.0 * x,
                    worst.matrix,
                    worst.p,
                    worst.gbs(),
                    triad.get(worst.threads)
                ),
            });
        }
        None => out.push(skipped(target, "skipped: no rows".into())),
    }
}

fn geomean(xs: impl Iterator<Item = f64>) -> f64 {
    let (mut sum, mut n) = (0.0, 0usize);
    for x in xs {
        sum += x.ln();
        n += 1;
    }
    if n == 0 {
        f64::NAN
    } else {
        (sum / n as f64).exp()
    }
}

// ---------------------------------------------------------------------------------------------
// Output

fn status(t: &Target) -> &'static str {
    t.verdict.map_or("-", Verdict::word)
}

fn print_table(
    rows: &[Row],
    triad: &TriadFigures,
    targets: &[Target],
    batches: usize,
    passes: usize,
) {
    println!("mbsp-bench spmv: {}", crate::machine::describe());
    println!(
        "y = A x, f64; Mflop/s = 2 nnz / median seconds per multiply over {batches} batches; \
         speedup over sequential CSR timed in the same group (mbsp: interleaved with it); \
         partitioning timed apart"
    );
    println!(
        "GB/s = bytes per multiply / time, bytes = 12 nnz + 8 (rows + 1) + 8 (rows + cols); \
         % triad: of the STREAM triad on as many threads (1 for sequential)"
    );
    println!(
        "STREAM triad (a = b + s c, 3 x {TRIAD_MIB} MiB, 24 bytes per element, best of {passes} \
         at the start and at the end): {}",
        triad
            .0
            .iter()
            .map(|(t, g)| format!("{t} thread{} {g:.2} GB/s", if *t == 1 { "" } else { "s" }))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "\n  {:<15} {:>9} {:<10} {:>3} {:>9} {:>8} {:>7} {:>7} {:>10} {:>8} {:>9}",
        "matrix",
        "nnz",
        "variant",
        "p",
        "Mflop/s",
        "speedup",
        "GB/s",
        "%triad",
        "partition",
        "rel.err",
        "pred/time"
    );
    let mut last: Option<(&str, usize)> = None;
    for r in rows {
        if last.is_some_and(|(m, _)| m != r.matrix) {
            println!();
        }
        last = Some((&r.matrix, r.p));
        println!(
            "  {:<15} {:>9} {:<10} {:>3} {:>9.0} {:>8.2} {:>7.2} {:>6.0}% {:>10} {:>8.1e} {:>9}",
            r.matrix,
            r.nnz,
            r.variant,
            r.p,
            r.mflops(),
            r.speedup,
            r.gbs(),
            100.0 * r.gbs() / triad.get(r.threads),
            r.partition
                .map_or("-".into(), |(s, _, _)| format!("{s:.3} s")),
            r.rel_error,
            r.predicted
                .map_or(String::new(), |t| format!("{:.2}", t / r.seconds))
        );
    }
    // Predictions of multiplies that take more than 10 µs (below that, one superstep's
    // latency and the timer dominate).
    for p in 1..=rows.iter().map(|r| r.p).max().unwrap_or(0) {
        let e: Vec<f64> = rows
            .iter()
            .filter(|r| r.p == p && r.seconds > 10e-6)
            .filter_map(|r| r.predicted.map(|t| ((t - r.seconds) / r.seconds).abs()))
            .collect();
        if e.is_empty() {
            continue;
        }
        println!(
            "\nBSP prediction (every mbsp variant) at p = {p}, multiplies > 10 µs: |predicted - \
             measured| / \
             measured median {:.0}%, max {:.0}%, within 20% in {} of {}",
            100.0 * median(&e),
            100.0 * e.iter().copied().fold(0.0, f64::max),
            e.iter().filter(|&&x| x <= 0.2).count(),
            e.len()
        );
    }
    if rows.iter().any(|r| r.variant == "hp") {
        print_bounds(rows, triad);
    }
    println!("\ntargets (from the issue):");
    for t in targets {
        println!("  [{:<7}] {}: {}", status(t), t.target, t.detail);
    }
}

fn print_json(
    rows: &[Row],
    triad: &TriadFigures,
    triad_start: &[(usize, f64)],
    targets: &[Target],
    batches: usize,
    passes: usize,
) {
    let j = json!({
        "machine": crate::machine::describe(),
        "batches": batches,
        "bytes_model": "12 nnz + 8 (rows + 1) + 8 (rows + cols) per multiply",
        "triad": {
            "array_mib": TRIAD_MIB,
            "bytes_per_element": 24,
            "passes": passes,
            "best_gbs": triad.0.iter().map(|(t, g)| json!({"threads": t, "gbs": g})).collect::<Vec<Value>>(),
            "start_gbs": triad_start.iter().map(|(t, g)| json!({"threads": t, "gbs": g})).collect::<Vec<Value>>(),
        },
        "rows": rows.iter().map(|r| json!({
            "matrix": r.matrix, "nnz": r.nnz, "m": r.rows, "n": r.cols, "variant": r.variant,
            "p": r.p, "threads": r.threads, "seconds": r.seconds, "mflops": r.mflops(),
            "speedup": r.speedup, "gbs": r.gbs(), "triad_gbs": triad.get(r.threads),
            "rel_error": r.rel_error,
            "partition_seconds": r.partition.map(|x| x.0),
            "volume": r.partition.map(|x| x.1),
            "max_h": r.partition.map(|x| x.2),
            "predicted_seconds": r.predicted,
            "bound_seconds": r.bound_seconds(triad),
        })).collect::<Vec<Value>>(),
        "targets": targets.iter().map(|t| json!({
            "target": t.target, "detail": t.detail,
            "met": t.verdict.and_then(|v| match v {
                Verdict::Met => Some(true),
                Verdict::Missed => Some(false),
                Verdict::Unclear => None,
            }),
            "verdict": t.verdict.map(Verdict::word),
        })).collect::<Vec<Value>>(),
    });
    println!("{j:#}");
}

/// Writes the rows as CSV to a temporary file beside `path`, then renames it over `path`, so
/// that `path` always holds a whole table.
fn write_csv(path: &Path, rows: &[Row], triad: &TriadFigures) -> std::io::Result<()> {
    crate::whole_file::write(path, |f| {
        writeln!(
            f,
            "matrix,variant,p,mflops,speedup,gbs,triad_gbs,rel_error,partition_seconds,nnz,seconds,\
             bound_seconds"
        )?;
        for r in rows {
            writeln!(
                f,
                "{},{},{},{:.2},{:.4},{:.3},{:.3},{:.3e},{},{},{:.6e},{:.6e}",
                r.matrix,
                r.variant,
                r.p,
                r.mflops(),
                r.speedup,
                r.gbs(),
                triad.get(r.threads),
                r.rel_error,
                r.partition
                    .map_or(String::new(), |(s, _, _)| format!("{s:.4}")),
                r.nnz,
                r.seconds,
                r.bound_seconds(triad)
            )?;
        }
        Ok(())
    })
}

/// Grouped bars: the speedup over sequential CSR of rayon and each mbsp variant at the largest
/// p, one group per matrix, with the sequential level (1) as a line.
fn plot(path: &Path, rows: &[Row]) -> Result<()> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let p = rows.iter().map(|r| r.p).max().unwrap_or(1);
    let bars: Vec<&Row> = rows
        .iter()
        .filter(|r| r.p == p && r.variant != "sequential")
        .collect();
    let names = matrices(rows);
    let mut variants: Vec<&str> = Vec::new();
    for r in &bars {
        if !variants.contains(&r.variant.as_str()) {
            variants.push(&r.variant);
        }
    }
    let top = bars
        .iter()
        .map(|r| r.speedup)
        .filter(|s| s.is_finite())
        .fold(1.0, f64::max)
        * 1.15;
    let n = names.len().max(1);
    let width = (120 * n as u32 + 300).max(900);
    crate::whole_file::svg(std::path::Path::new(path), (width, 560), |root| {
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let body = root
            .titled(
                &format!("SpMV speedup over sequential CSR at p = {p} (same run)"),
                ("sans-serif", 22),
            )
            .map_err(|e| err(&e))?;
        let (plot_area, legend_area) = body.split_horizontally(width - 200);
        let mut chart = ChartBuilder::on(&plot_area)
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5..n as f64 - 0.5, 0.0..top)
            .map_err(|e| err(&e))?;
        let label = |v: &f64| {
            let k = v.round();
            if (v - k).abs() < 1e-6 && k >= 0.0 {
                names
                    .get(k as usize)
                    .map_or(String::new(), |s| s.to_string())
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&label)
            .y_desc("speedup over sequential CSR")
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 15))
            .draw()
            .map_err(|e| err(&e))?;
        let w = 0.8 / variants.len().max(1) as f64;
        for (j, v) in variants.iter().enumerate() {
            let color = crate::whole_file::color(j);
            chart
                .draw_series(bars.iter().filter(|r| r.variant == *v).filter_map(|r| {
                    let k = names.iter().position(|m| *m == r.matrix)? as f64;
                    let x0 = k - 0.4 + j as f64 * w;
                    Some(Rectangle::new(
                        [(x0 + 0.05 * w, 0.0), (x0 + 0.95 * w, r.speedup)],
                        color.filled(),
                    ))
                }))
                .map_err(|e| err(&e))?;
            let y = 40 + 24 * j as i32;
            legend_area
                .draw(&Rectangle::new([(8, y - 7), (36, y + 7)], color.filled()))
                .map_err(|e| err(&e))?;
            legend_area
                .draw(&Text::new(
                    format!("{v} p={p}"),
                    (46, y - 8),
                    ("sans-serif", 15).into_font(),
                ))
                .map_err(|e| err(&e))?;
        }
        chart
            .draw_series(LineSeries::new(
                [(-0.5, 1.0), (n as f64 - 0.5, 1.0)],
                BLACK.stroke_width(1),
            ))
            .map_err(|e| err(&e))?;
        let y = 40 + 24 * variants.len() as i32;
        legend_area
            .draw(&PathElement::new(
                vec![(8, y), (36, y)],
                BLACK.stroke_width(1),
            ))
            .map_err(|e| err(&e))?;
        legend_area
            .draw(&Text::new(
                "sequential CSR = 1",
                (46, y - 8),
                ("sans-serif", 15).into_font(),
            ))
            .map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mbsp_algorithms::sparse::CooMatrix;

    #[test]
    fn default_process_counts() {
        assert_eq!(default_procs(1), [1, 2]);
        assert_eq!(default_procs(2), [1, 2]);
        assert_eq!(default_procs(4), [1, 2, 4]);
        assert_eq!(default_procs(6), [1, 2, 4, 6]);
        assert_eq!(default_procs(16), [1, 2, 4, 8, 16]);
    }

    #[test]
    fn batches_from_nnz() {
        assert_eq!(batching(1_000_000_000, None, false), (9, 5));
        assert_eq!(batching(10, None, false), (9, 2000));
        assert_eq!(batching(1_000_000, None, false), (9, 25));
        assert_eq!(batching(1_000_000, Some(90), false), (9, 10));
        assert_eq!(batching(1_000_000, Some(2), false), (9, 1));
        assert_eq!(batching(10, None, true), (3, 20));
    }

    #[test]
    fn rayon_blocks_cover_the_rows_and_match_sequential() {
        // Rows of 1 to 12 nonzeros, and some empty ones.
        let mut e = Vec::new();
        for i in 0..500usize {
            for k in 0..(i * 7 % 13) {
                e.push((i, (i * 31 + k * 17) % 300, 1.0 + (i + k) as f64 * 0.01));
            }
        }
        let a = CooMatrix::new(500, 300, e).unwrap();
        let csr = Csr::new(&a);
        let x = test_x(300);
        let mut want = vec![0.0; 500];
        csr.multiply(&x, &mut want);
        for parts in [1, 2, 3, 8, 1000] {
            let ranges = row_ranges(&csr, parts);
            assert!(ranges.len() <= parts);
            assert_eq!(ranges.first().unwrap().start, 0);
            assert_eq!(ranges.last().unwrap().end, 500);
            assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
            let mut y = vec![f64::NAN; 500];
            let mut split = split_rows(&mut y, &ranges);
            rayon_multiply(&csr, &x, &mut split);
            drop(split);
            assert_eq!(y, want, "{parts} blocks");
        }
    }

    #[test]
    fn triad_figures_keep_the_best() {
        let mut t = TriadFigures::default();
        t.record(1, 5.0);
        t.record(2, 8.0);
        t.record(1, 4.0);
        t.record(1, 6.0);
        assert_eq!(t.get(1), 6.0);
        assert_eq!(t.get(2), 8.0);
        assert!(t.get(4).is_nan());
    }

    #[test]
    fn triad_runs_on_small_arrays() {
        let mut t = Triad::new(1, 2);
        for threads in [1, 2, 3] {
            let g = t.best_gbs(threads, 2);
            assert!(g.is_finite() && g > 0.0);
        }
        assert!(t.a.iter().all(|&a| a > 6.0 && a < 8.0));
    }

    #[test]
    fn bytes_model() {
        // 10 nonzeros, 4 x 3: 120 + 40 + 56.
        assert_eq!(bytes_per_multiply(4, 3, 10), 216.0);
    }
}
