//! `mbsp-bench partition`: communication volume of our partitioner against Mondriaan 4.2.1 and
//! two simple baselines measured in the same run.
//!
//! For each matrix and p: the volume, imbalance, max_h and time of
//! [`partition`](mbsp_algorithms::sparse::partition::partition); the volume Mondriaan 4.2.1
//! reached on the same matrix and p on this machine ([`REFERENCE`], medium-grain, eps = 0.03)
//! and the ratio ours / Mondriaan; and the volumes of a 1D row-block split ([`row_blocks`]) and
//! a 2D checkerboard ([`checkerboard`]), which need no partitioner at all: a partitioner that
//! does not beat them clearly is not worth its time. The summary gives the geometric mean and
//! the worst of the ratios and the number of cases over the imbalance bound.

use mbsp_algorithms::sparse::{CooMatrix, metrics, mtx, partition};
use mbsp_tools::sparse::{IMBALANCE_SLACK, check_input, matrix_name};
#[allow(unused_imports)]
use mbsp_tools::{Classify, Error, Result};
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Options of `mbsp-bench partition`.
#[derive(Clone, Debug)]
pub struct Options {
    /// The matrices (empty: every matrix of the shared data directory).
    pub files: Vec<PathBuf>,
    /// Numbers of parts (`None`: 2, 4, 8, 16, 64, or 2, 4 with `quick`).
    pub procs: Option<Vec<usize>>,
    /// Seed of the partitioner.
    pub seed: u64,
    /// Allowed imbalance.
    pub eps: f64,
    /// The partitioner's quality setting ([`partition::Options::quality`]).
    pub quality: bool,
    /// Write the rows as CSV to this file.
    pub csv: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    pub json: bool,
    /// Smoke run: only the small matrices (unless files are given) and p = 2, 4 (unless
    /// `procs` is given).
    pub quick: bool,
}

/// Mondriaan 4.2.1's communication volume (medium-grain, eps = 0.03, measured on this machine)
/// by matrix name (file stem) and p.
pub const REFERENCE: &[(&str, usize, u64)] = &[
    ("rajat01", 4, 182),
    ("bcsstk16", 4, 685),
    ("wiki-Vote", 4, 2464),
    ("bayer10", 4, 167),
    ("luxembourg_osm", 4, 133),
    ("wing", 4, 2902),
    ("delaunay_n16", 4, 858),
    ("copter2", 4, 3357),
    ("Maragal_6", 4, 4219),
    ("mdual", 4, 8645),
    ("G3_circuit", 4, 6206),
    ("rajat01", 64, 1347),
    ("wiki-Vote", 64, 17090),
    ("luxembourg_osm", 64, 1028),
    ("wing", 64, 13968),
    ("delaunay_n16", 64, 6352),
    ("copter2", 64, 21648),
    ("Maragal_6", 64, 25266),
    ("mdual", 64, 39098),
    ("G3_circuit", 64, 43121),
];

/// The eps of the [`REFERENCE`] runs: with another `--eps` the comparison is not like for like.
const REFERENCE_EPS: f64 = 0.03;

/// The matrices of `--quick`: small enough for a CI smoke run.
const QUICK: [&str; 3] = ["rajat01", "bayer10", "wiki-Vote"];

/// Mondriaan's volume for `name` and `p`, where measured.
pub fn reference(name: &str, p: usize) -> Option<u64> {
    REFERENCE
        .iter()
        .find(|&&(n, q, _)| n == name && q == p)
        .map(|&(_, _, v)| v)
}

/// Splits indices `0..counts.len()` into `parts` contiguous blocks of about `total / parts`
/// nonzeros each (`counts[i]`: the nonzeros of index `i`): block `k` starts at the index where
/// the running count of the nonzeros before it reaches `k * total / parts`. Returns the block
/// of each index. A block holds at most `total / parts` plus the largest count; blocks may be
/// empty when there are fewer indices than parts.
pub fn balanced_blocks(counts: &[u32], parts: usize) -> Vec<u32> {
    assert!(parts > 0, "balanced_blocks: no parts");
    let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
    let mut before = 0u64;
    counts
        .iter()
        .map(|&c| {
            // u128: nonzeros before × parts can pass 2^64 for huge inputs, and it is cheap.
            let b = if total == 0 {
                0
            } else {
                (u128::from(before) * parts as u128 / u128::from(total)) as usize
            };
            before += u64::from(c);
            b.min(parts - 1) as u32
        })
        .collect()
}

/// The 1D row-block baseline: rows split into `p` contiguous blocks of balanced nonzeros
/// ([`balanced_blocks`]), every nonzero in its row's block. Only columns communicate.
pub fn row_blocks(a: &CooMatrix, p: usize) -> Vec<u32> {
    let block = balanced_blocks(&a.row_counts(), p);
    a.row_idx.iter().map(|&i| block[i as usize]).collect()
}

/// The grid `pr × pc = p` of the checkerboard: `pr` the divisor of `p` closest to `√p`
/// (the smaller one on a tie), so that rows and columns are cut about equally often.
pub fn grid(p: usize) -> (usize, usize) {
    assert!(p > 0, "grid: p = 0");
    let root = (p as f64).sqrt();
    let pr = (1..=p)
        .filter(|&d| p.is_multiple_of(d))
        .min_by(|&x, &y| (x as f64 - root).abs().total_cmp(&(y as f64 - root).abs()))
        .unwrap_or(1);
    (pr, p / pr)
}

/// The 2D checkerboard baseline: rows split into `pr` contiguous blocks of balanced nonzeros,
/// columns into `pc` ([`grid`]); nonzero `a_ij` goes to part `rowblock(i) * pc + colblock(j)`.
/// Each row then meets at most `pc` parts and each column at most `pr`; the nonzero balance is
/// not guaranteed (that is the partitioner's job).
pub fn checkerboard(a: &CooMatrix, p: usize) -> Vec<u32> {
    let (pr, pc) = grid(p);
    let rb = balanced_blocks(&a.row_counts(), pr);
    let cb = balanced_blocks(&a.col_counts(), pc);
    a.row_idx
        .iter()
        .zip(&a.col_idx)
        .map(|(&i, &j)| rb[i as usize] * pc as u32 + cb[j as usize])
        .collect()
}

/// Finds the shared matrices: under `$MBSP_DATA_DIR` (its `matrices` directory, or the
/// directory itself if it holds the matrices) if set, else `../shared/data/matrices` beside the
/// repository this program was built from.
pub fn data_dir() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("MBSP_DATA_DIR") {
        let d = PathBuf::from(d);
        for c in [d.join("matrices"), d.clone()] {
            if c.is_dir() {
                return Ok(c);
            }
        }
        return Err(Error::usage(format!(
            "MBSP_DATA_DIR = {} is not a directory of matrices (nor holds matrices/)",
            d.display()
        )));
    }
    let beside = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/matrices");
    match beside.canonicalize() {
        Ok(dir) if dir.is_dir() => Ok(dir),
        _ => Err(Error::usage(format!(
            "the shared matrices are not at {} (beside the repository): set MBSP_DATA_DIR or \
             name the files",
            beside.display()
        ))),
    }
}

/// The Matrix Market files (`.mtx`, `.mtx.gz`) of `dir`, smallest first (so the first results
/// come quickly), by name on equal sizes.
fn matrices_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| Error::io(dir.display().to_string()).with_source(e))?;
    let mut files: Vec<(u64, PathBuf)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let n = p.to_string_lossy();
            p.is_file() && (n.ends_with(".mtx") || n.ends_with(".mtx.gz"))
        })
        .map(|p| (std::fs::metadata(&p).map_or(0, |m| m.len()), p))
        .collect();
    files.sort();
    Ok(files.into_iter().map(|(_, p)| p).collect())
}

/// The matrices of a benchmark run: `files`, or (none given) every matrix of the shared data
/// directory, only the small ones with `quick`; each checked readable before the first
/// (possibly long) case runs.
pub(crate) fn input_files(files: &[PathBuf], quick: bool) -> Result<Vec<PathBuf>> {
    let files = if files.is_empty() {
        let dir = data_dir()?;
        let mut all = matrices_in(&dir)?;
        if quick {
            all.retain(|f| QUICK.contains(&matrix_name(f).as_str()));
        }
        if all.is_empty() {
            return Err(Error::usage(format!(
                "no{} matrices in {}",
                if quick {
                    " quick (rajat01, bayer10, wiki-Vote)"
                } else {
                    ""
                },
                dir.display()
            )));
        }
        all
    } else {
        files.to_vec()
    };
    for f in &files {
        check_input(f)?;
    }
    Ok(files)
}

/// One case: a matrix partitioned into `p` parts.
struct Row {
    matrix: String,
    p: usize,
    nnz: usize,
    volume: u64,
    reference: Option<u64>,
    row1d: u64,
    checker2d: u64,
    row1d_imbalance: f64,
    checker2d_imbalance: f64,
    imbalance: f64,
    max_h: u64,
    seconds: f64,
    read_seconds: f64,
}

impl Row {
    /// Ours / Mondriaan, where Mondriaan's volume is known.
    fn ratio(&self) -> Option<f64> {
        self.reference.map(|r| self.volume as f64 / r as f64)
    }
}

/// The summary over all rows.
struct Summary {
    /// Cases with a reference volume.
    with_reference: usize,
    /// Geometric mean of ours / Mondriaan over them.
    geomean: Option<f64>,
    /// The largest ratio and its case (matrix, p).
    worst: Option<(f64, String, usize)>,
    /// Cases whose imbalance exceeds eps.
    violations: usize,
}

fn summarize(rows: &[Row], eps: f64) -> Summary {
    let ratios: Vec<(f64, &Row)> = rows.iter().filter_map(|r| Some((r.ratio()?, r))).collect();
    let geomean = (!ratios.is_empty())
        .then(|| (ratios.iter().map(|(x, _)| x.ln()).sum::<f64>() / ratios.len() as f64).exp());
    let worst = ratios
        .iter()
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(x, r)| (*x, r.matrix.clone(), r.p));
    Summary {
        with_reference: ratios.len(),
        geomean,
        worst,
        violations: rows
            .iter()
            .filter(|r| r.imbalance > eps + IMBALANCE_SLACK)
            .count(),
    }
}

/// Runs the benchmark; `Err` is a one-line message for exit status 2.
pub fn run(o: &Options) -> Result<()> {
    let procs = match &o.procs {
        Some(p) => p.clone(),
        None if o.quick => vec![2, 4],
        None => vec![2, 4, 8, 16, 64],
    };
    let files = input_files(&o.files, o.quick)?;
    // Every matrix at the largest p must fit before hours of partitioning begin.
    let most = procs.iter().copied().max().unwrap_or(1);
    for f in &files {
        crate::preflight::partition_file(f, most)?;
    }
    if (o.eps - REFERENCE_EPS).abs() > 1e-12 {
        eprintln!(
            "partition: note: the Mondriaan volumes were measured with eps = {REFERENCE_EPS}, \
             this run uses eps = {}",
            o.eps
        );
    }
    let opts = partition::Options {
        eps: o.eps,
        seed: o.seed,
        threads: 0,
        quality: o.quality,
        cancel: None,
    };
    let mut rows: Vec<Row> = Vec::new();
    for f in &files {
        let name = matrix_name(f);
        let t = Instant::now();
        let a = mtx::read_path(f).map_err(|e| Error::io("").with_source(e))?;
        crate::preflight::partition_matrix(&a, most)?;
        let read_seconds = t.elapsed().as_secs_f64();
        eprintln!(
            "partition: {name}: {} x {}, {} nonzeros, read in {read_seconds:.2} s",
            a.rows,
            a.cols,
            a.nnz()
        );
        for &p in &procs {
            let r = partition::partition(&a, p, &opts)
                .map_err(|e| Error::usage(format!("{name}, p = {p}: {e}")))?;
            let row1d = row_blocks(&a, p);
            let checker2d = checkerboard(&a, p);
            let row = Row {
                matrix: name.clone(),
                p,
                nnz: a.nnz(),
                volume: r.volume,
                reference: reference(&name, p),
                row1d: metrics::volume(&a, &row1d, p),
                checker2d: metrics::volume(&a, &checker2d, p),
                row1d_imbalance: metrics::imbalance(&row1d, p),
                checker2d_imbalance: metrics::imbalance(&checker2d, p),
                imbalance: r.imbalance,
                max_h: r.max_h,
                seconds: r.seconds,
                read_seconds,
            };
            eprintln!(
                "partition: {name} p = {p}: {:.3} s, volume {}{}",
                r.seconds,
                r.volume,
                row.reference
                    .map_or(String::new(), |m| format!(" (Mondriaan {m})"))
            );
            rows.push(row);
            // Rewritten after every case: an interrupted run keeps the cases it finished.
            if let Some(path) = &o.csv {
                write_csv(path, &rows).map_err(|e| Error::io("--csv").with_source(e))?;
            }
        }
    }
    let s = summarize(&rows, o.eps);
    if o.json {
        print_json(o, &rows, &s);
    } else {
        print_table(o, &rows, &s);
    }
    Ok(())
}

fn print_json(o: &Options, rows: &[Row], s: &Summary) {
    let j = json!({
        "machine": crate::machine::describe(),
        "eps": o.eps,
        "seed": o.seed,
        "quality": o.quality,
        "reference": "Mondriaan 4.2.1, medium-grain, eps = 0.03",
        "rows": rows.iter().map(|r| json!({
            "matrix": r.matrix, "p": r.p, "nnz": r.nnz, "volume": r.volume,
            "reference": r.reference, "ratio": r.ratio(),
            "row1d_volume": r.row1d, "checker2d_volume": r.checker2d,
            "row1d_imbalance": r.row1d_imbalance, "checker2d_imbalance": r.checker2d_imbalance,
            "imbalance": r.imbalance, "max_h": r.max_h, "seconds": r.seconds,
            "read_seconds": r.read_seconds,
        })).collect::<Vec<Value>>(),
        "summary": {
            "cases": rows.len(),
            "cases_with_reference": s.with_reference,
            "geomean_ratio": s.geomean,
            "worst_ratio": s.worst.as_ref().map(|w| w.0),
            "worst_case": s.worst.as_ref().map(|w| json!({ "matrix": w.1, "p": w.2 })),
            "imbalance_violations": s.violations,
        },
    });
    println!("{j:#}");
}

fn print_table(o: &Options, rows: &[Row], s: &Summary) {
    // Baselines do not balance the nonzeros (a 2D checkerboard of a banded matrix leaves the
    // off-diagonal blocks nearly empty): mark the volumes bought with imbalance.
    let flag = |volume: u64, imbalance: f64| {
        format!(
            "{volume}{}",
            if imbalance > o.eps + IMBALANCE_SLACK {
                "*"
            } else {
                " "
            }
        )
    };
    println!("mbsp-bench partition: {}", crate::machine::describe());
    println!(
        "communication volume of y = Ax (sum of lambda - 1 over rows and columns), eps = {}, \
         seed = {}{}; mondriaan: 4.2.1, medium-grain, eps = 0.03; row1d and checker2d: \
         baselines measured in this run",
        o.eps,
        o.seed,
        if o.quality { ", quality setting" } else { "" }
    );
    println!(
        "\n  {:<16} {:>3} {:>9} {:>8} {:>9} {:>7} {:>8} {:>9} {:>9} {:>7} {:>9}",
        "matrix",
        "p",
        "nnz",
        "ours",
        "mondriaan",
        "ratio",
        "row1d",
        "checker2d",
        "imbalance",
        "max_h",
        "seconds"
    );
    for r in rows {
        println!(
            "  {:<16} {:>3} {:>9} {:>8} {:>9} {:>7} {:>8} {:>9} {:>9.4} {:>7} {:>9.3}",
            r.matrix,
            r.p,
            r.nnz,
            r.volume,
            r.reference.map_or("-".into(), |v| v.to_string()),
            r.ratio().map_or("-".into(), |x| format!("{x:.3}")),
            flag(r.row1d, r.row1d_imbalance),
            flag(r.checker2d, r.checker2d_imbalance),
            r.imbalance,
            r.max_h,
            r.seconds
        );
    }
    println!("  (* a baseline over the imbalance bound: its volume is not a like-for-like figure)");
    println!();
    match (s.geomean, &s.worst) {
        (Some(g), Some((w, m, p))) => println!(
            "ours / mondriaan over {} cases with a reference: geometric mean {g:.3}, worst \
             {w:.3} ({m}, p = {p})",
            s.with_reference
        ),
        _ => println!("ours / mondriaan: no case of this run has a reference volume"),
    }
    println!(
        "imbalance > eps = {}: {} of {} cases",
        o.eps,
        s.violations,
        rows.len()
    );
}

/// Writes the rows as CSV to a temporary file beside `path`, then renames it over `path`, so
/// that `path` always holds a whole table (renaming within a directory is atomic).
fn write_csv(path: &Path, rows: &[Row]) -> std::io::Result<()> {
    crate::whole_file::write(path, |f| {
        writeln!(
            f,
            "matrix,p,nnz,volume,reference,ratio,row1d_volume,checker2d_volume,imbalance,max_h,seconds"
        )?;
        for r in rows {
            writeln!(
                f,
                "{},{},{},{},{},{},{},{},{:.6},{},{:.6}",
                r.matrix,
                r.p,
                r.nnz,
                r.volume,
                r.reference.map_or(String::new(), |v| v.to_string()),
                r.ratio().map_or(String::new(), |x| format!("{x:.4}")),
                r.row1d,
                r.checker2d,
                r.imbalance,
                r.max_h,
                r.seconds
            )?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pseudo-random `m × n` matrix with about `per_row` nonzeros per row and a few dense
    /// rows, so that balanced splitting is not trivial.
    fn matrix(m: usize, n: usize, per_row: usize, seed: u64) -> CooMatrix {
        let mut r = mbsp::rng::SplitMix64::new(seed);
        let mut e = Vec::new();
        for i in 0..m {
            let k = if i % 17 == 0 { 5 * per_row } else { per_row };
            for _ in 0..k {
                e.push((i, r.below(n), 1.0));
            }
        }
        CooMatrix::new(m, n, e).unwrap()
    }

    #[test]
    fn grid_choice() {
        assert_eq!(grid(1), (1, 1));
        assert_eq!(grid(2), (1, 2));
        assert_eq!(grid(4), (2, 2));
        assert_eq!(grid(6), (2, 3));
        assert_eq!(grid(7), (1, 7));
        assert_eq!(grid(64), (8, 8));
        assert_eq!(grid(8), (2, 4));
        assert_eq!(grid(12), (3, 4));
        for p in 1..200 {
            let (pr, pc) = grid(p);
            assert_eq!(pr * pc, p);
        }
    }

    #[test]
    fn blocks_are_contiguous_and_balanced() {
        let counts: Vec<u32> = (0..1000).map(|i| 1 + (i * 7919 % 13) as u32).collect();
        let total: u32 = counts.iter().sum();
        let max = *counts.iter().max().unwrap();
        for parts in [1, 2, 3, 7, 64] {
            let b = balanced_blocks(&counts, parts);
            assert!(b.windows(2).all(|w| w[0] <= w[1]), "not contiguous");
            assert_eq!(b[0], 0);
            assert_eq!(*b.last().unwrap() as usize, parts - 1);
            let mut size = vec![0u32; parts];
            for (i, &k) in b.iter().enumerate() {
                size[k as usize] += counts[i];
            }
            let ideal = total / parts as u32;
            for s in size {
                assert!(s + max > ideal && s <= ideal + max + 1, "{s} vs {ideal}");
            }
        }
    }

    #[test]
    fn blocks_of_nothing() {
        assert_eq!(balanced_blocks(&[], 4), Vec::<u32>::new());
        assert_eq!(balanced_blocks(&[0, 0, 0], 4), vec![0, 0, 0]);
        // Fewer indices than parts: every index still gets a block < parts.
        assert!(balanced_blocks(&[5, 5], 8).iter().all(|&b| b < 8));
    }

    #[test]
    fn row_blocks_keep_rows_whole() {
        let a = matrix(500, 300, 6, 42);
        for p in [1, 2, 4, 7, 16] {
            let part = row_blocks(&a, p);
            assert_eq!(part.len(), a.nnz());
            assert!(part.iter().all(|&s| (s as usize) < p));
            // Rows never cut: the whole volume is in the columns.
            assert!(metrics::row_lambdas(&a, &part, p).iter().all(|&l| l <= 1));
            // Balanced up to one dense row (30 nonzeros) over nnz / p.
            let sizes = metrics::part_sizes(&part, p);
            let ideal = a.nnz() / p;
            assert!(sizes.iter().all(|&s| s <= ideal + 31), "{sizes:?}");
        }
        assert_eq!(metrics::volume(&a, &row_blocks(&a, 1), 1), 0);
    }

    #[test]
    fn checkerboard_cuts_rows_and_columns_at_most_grid_times() {
        let a = matrix(400, 400, 8, 7);
        for p in [1, 2, 4, 6, 7, 64] {
            let (pr, pc) = grid(p);
            let part = checkerboard(&a, p);
            assert_eq!(part.len(), a.nnz());
            assert!(part.iter().all(|&s| (s as usize) < p));
            assert!(
                metrics::row_lambdas(&a, &part, p)
                    .iter()
                    .all(|&l| l as usize <= pc)
            );
            assert!(
                metrics::col_lambdas(&a, &part, p)
                    .iter()
                    .all(|&l| l as usize <= pr)
            );
            // Every part gets something on a matrix this spread out.
            if p <= 16 {
                assert!(metrics::part_sizes(&part, p).iter().all(|&s| s > 0));
            }
        }
    }

    #[test]
    fn references_by_name_and_p() {
        assert_eq!(reference("rajat01", 4), Some(182));
        assert_eq!(reference("G3_circuit", 64), Some(43121));
        assert_eq!(reference("bcsstk16", 64), None);
        assert_eq!(reference("rajat01", 8), None);
    }

    #[test]
    fn summary_of_ratios() {
        let row = |matrix: &str, p, volume, imbalance| Row {
            matrix: matrix.into(),
            p,
            nnz: 100,
            volume,
            reference: reference(matrix, p),
            row1d: 0,
            checker2d: 0,
            row1d_imbalance: 0.0,
            checker2d_imbalance: 0.0,
            imbalance,
            max_h: 0,
            seconds: 0.0,
            read_seconds: 0.0,
        };
        // 2 × (182/182 = 1) and 364/182 = 2: geometric mean 2^(1/2) over the two with a
        // reference; the p = 8 row has none.
        let rows = [
            row("rajat01", 4, 182, 0.03),
            row("rajat01", 64, 2694, 0.05),
            row("rajat01", 8, 1, 0.0),
        ];
        let s = summarize(&rows, 0.03);
        assert_eq!(s.with_reference, 2);
        assert!((s.geomean.unwrap() - 2f64.sqrt()).abs() < 1e-12);
        let (w, m, p) = s.worst.unwrap();
        assert_eq!((w, m.as_str(), p), (2.0, "rajat01", 64));
        assert_eq!(s.violations, 1);
    }
}
