//! `mbsp partition`: split one Matrix Market matrix into `p` parts with the medium-grain
//! partitioner and write Mondriaan's three files (distributed matrix, `u` and `v` vectors).
//!
//! Every argument is checked before the matrix is read (numbers, the input file, that the
//! output prefix can be written), so that a mistake costs one line and no partitioning time.
//! Progress goes to stderr; the results go to stdout, as text or as one JSON object.

use crate::preflight::{self, MatrixSize, Need};
use mbsp_algorithms::sparse::{CooMatrix, metrics, mondriaan, mtx, partition};
use mbsp_algorithms::whole_file;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Options of `mbsp partition`.
///
/// The numbers come in as the user typed them and are parsed by [`run`]: clap's own parse
/// errors span several lines, and the command promises one line for a bad argument.
pub struct Options {
    /// The Matrix Market file (`.mtx` or `.mtx.gz`).
    pub file: PathBuf,
    /// Number of parts, as typed (a positive integer).
    pub p: String,
    /// Allowed load imbalance, as typed (a finite number >= 0).
    pub eps: String,
    /// Seed of the partitioner's random choices, as typed.
    pub seed: String,
    /// Prefix of the output files (`None`: the input path itself).
    pub out: Option<PathBuf>,
    /// Print one JSON object instead of text.
    pub json: bool,
}

/// Parses a number of parts: a positive integer.
pub(crate) fn parse_p(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(format!("-p {s}: need a positive integer number of parts")),
    }
}

/// Parses an imbalance bound: a finite number >= 0 (an infinite bound would let one part take
/// everything, which no partitioner can be measured against).
pub(crate) fn parse_eps(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(e) if e.is_finite() && e >= 0.0 => Ok(e),
        _ => Err(format!(
            "--eps {s}: need a finite number >= 0 (e.g. 0.03 for 3% imbalance)"
        )),
    }
}

/// Parses a seed: an unsigned 64-bit integer.
pub(crate) fn parse_seed(s: &str) -> Result<u64, String> {
    s.trim()
        .parse::<u64>()
        .map_err(|_| format!("--seed {s}: need an integer in 0..=18446744073709551615"))
}

/// The matrix's name: its file name without `.gz` and `.mtx` (`G3_circuit.mtx.gz` →
/// `G3_circuit`), the key of the reference tables.
pub(crate) fn matrix_name(path: &Path) -> String {
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    name.strip_suffix(".mtx").unwrap_or(name).to_string()
}

/// Checks that `file` is an existing regular file we can open, so that a typo is reported
/// plainly rather than as whatever the reader makes of it.
pub(crate) fn check_input(file: &Path) -> Result<(), String> {
    let shown = file.display();
    let meta = std::fs::metadata(file).map_err(|e| format!("{shown}: {e}"))?;
    if meta.is_dir() {
        return Err(format!("{shown} is a directory, not a Matrix Market file"));
    }
    std::fs::File::open(file).map_err(|e| format!("{shown}: cannot open: {e}"))?;
    Ok(())
}

/// The prefix of the output files: `--out` if given (inside it, named after the input file,
/// if it is an existing directory, the natural reading of `--out somedir`), else the input
/// path itself, as Mondriaan does.
fn output_prefix(file: &Path, out: Option<&Path>) -> PathBuf {
    match out {
        Some(dir) if dir.is_dir() => dir.join(file.file_name().unwrap_or(file.as_os_str())),
        Some(prefix) => prefix.to_path_buf(),
        None => file.to_path_buf(),
    }
}

/// Checks that files can be created next to `prefix` by creating and removing a probe file
/// there ([`whole_file::probe`]): finding out only after a long partitioning run would waste it.
fn check_writable(prefix: &Path) -> Result<(), String> {
    let dir = match prefix.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let shown = prefix.display();
    if !dir.is_dir() {
        return Err(format!(
            "output prefix {shown}: directory {} does not exist",
            dir.display()
        ));
    }
    whole_file::probe(dir).map_err(|e| {
        format!(
            "output prefix {shown}: cannot create files in {}: {e}",
            dir.display()
        )
    })
}

/// Refuses a partitioning that cannot fit in memory, from the matrix's header and `p`, before
/// anything is read: the reading (entries as stored and assembled), or the partitioning (the
/// matrix, the partitioner's books per nonzero, row, column and part), whichever needs more.
/// A file that is not a regular file (a pipe) is checked once read ([`fits`]).
pub(crate) fn preflight(file: &Path, p: usize) -> Result<(), String> {
    let Some(size) = MatrixSize::of(file)? else {
        return Ok(());
    };
    let mut read = Need::new();
    size.add_reading(&mut read);
    preflight::larger(read, partitioning(&size, p)).check()
}

/// Refuses partitioning the matrix `a`, already read, into `p` parts if it cannot fit in memory
/// (a pipe's matrix, whose header could not be read ahead).
pub(crate) fn fits(a: &CooMatrix, p: usize) -> Result<(), String> {
    partitioning(&MatrixSize::of_matrix(a), p).check()
}

/// The memory of partitioning a matrix of `size` into `p` parts.
fn partitioning(size: &MatrixSize, p: usize) -> Need {
    let mut part = Need::new();
    size.add_matrix(&mut part);
    size.add_partitioning(p, &mut part);
    part
}

/// Shows a path of the writer's result, whatever type it returns them as.
fn shown(p: impl AsRef<Path>) -> String {
    p.as_ref().display().to_string()
}

/// Runs `mbsp partition`; `Err` is a one-line message for exit status 2.
pub fn run(o: &Options) -> Result<(), String> {
    let p = parse_p(&o.p)?;
    let eps = parse_eps(&o.eps)?;
    let seed = parse_seed(&o.seed)?;
    check_input(&o.file)?;
    let prefix = output_prefix(&o.file, o.out.as_deref());
    check_writable(&prefix)?;
    preflight(&o.file, p)?;
    let name = matrix_name(&o.file);

    // Reading is reported when done, not announced: a malformed file is a bad argument, and
    // its error must be the only line on stderr.
    let t = Instant::now();
    let a = mtx::read_path(&o.file).map_err(|e| e.to_string())?;
    fits(&a, p)?;
    let read_seconds = t.elapsed().as_secs_f64();
    eprintln!(
        "partition: read {name}: {} x {}, {} nonzeros in {read_seconds:.3} s",
        a.rows,
        a.cols,
        a.nnz()
    );

    eprintln!("partition: partitioning into {p} parts (eps {eps}, seed {seed})...");
    let opts = partition::Options {
        eps,
        seed,
        threads: 0,
    };
    let r = partition::partition(&a, p, &opts).map_err(|e| e.to_string())?;
    // The split of max_h into its two phases: cheap next to partitioning, and it tells whether
    // the fan-out or the fan-in dominates.
    let traffic = metrics::traffic(&a, &r.dist);

    eprintln!(
        "partition: writing {}-P{p}, -u{p}, -v{p}...",
        prefix.display()
    );
    // The three files appear together or not at all; the error says which failed and that
    // (or, in the rarest case, how far) the files already there were left unchanged.
    let files = mondriaan::write(&a, &r.dist, &prefix).map_err(|e| {
        format!(
            "cannot write the Mondriaan files {}-P{p}, -u{p}, -v{p}: {e}",
            prefix.display()
        )
    })?;
    let (fm, fu, fv) = (shown(&files.matrix), shown(&files.u), shown(&files.v));

    if o.json {
        let j = json!({
            "matrix": name,
            "file": o.file.display().to_string(),
            "m": a.rows,
            "n": a.cols,
            "nnz": a.nnz(),
            "p": p,
            "eps": eps,
            "seed": seed,
            "volume": r.volume,
            "imbalance": r.imbalance,
            "max_h": r.max_h,
            "fanout_h": traffic.fanout_h(),
            "fanin_h": traffic.fanin_h(),
            "seconds": r.seconds,
            "read_seconds": read_seconds,
            "files": { "matrix": fm, "u": fu, "v": fv },
        });
        println!("{j:#}");
    } else {
        println!(
            "matrix {name}: m = {}, n = {}, nnz = {} (read in {read_seconds:.3} s)",
            a.rows,
            a.cols,
            a.nnz()
        );
        println!(
            "p = {p}, eps = {eps}, seed = {seed}: volume {}, imbalance {:.4}, max_h {} \
             (fan-out {} + fan-in {}), partitioned in {:.3} s",
            r.volume,
            r.imbalance,
            r.max_h,
            traffic.fanout_h(),
            traffic.fanin_h(),
            r.seconds
        );
        println!("files: {fm} {fu} {fv}");
    }
    if r.imbalance > eps + IMBALANCE_SLACK {
        eprintln!(
            "partition: warning: imbalance {:.4} exceeds eps {eps}",
            r.imbalance
        );
    }
    Ok(())
}

/// Rounding slack when comparing an imbalance with eps: `imbalance` is computed as
/// `max * p / nnz - 1` in floating point, which can exceed eps by an ulp when the largest part
/// has exactly `(1 + eps) nnz / p` nonzeros.
pub(crate) const IMBALANCE_SLACK: f64 = 1e-12;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_drop_gz_and_mtx() {
        assert_eq!(
            matrix_name(Path::new("a/b/G3_circuit.mtx.gz")),
            "G3_circuit"
        );
        assert_eq!(matrix_name(Path::new("bcsstk16.mtx")), "bcsstk16");
        assert_eq!(matrix_name(Path::new("x/plain")), "plain");
    }

    #[test]
    fn numbers_are_checked() {
        assert_eq!(parse_p("4"), Ok(4));
        assert!(parse_p("0").is_err());
        assert!(parse_p("-1").is_err());
        assert_eq!(parse_eps("0.03"), Ok(0.03));
        assert_eq!(parse_eps("0"), Ok(0.0));
        for bad in ["-1", "abc", "nan", "inf", ""] {
            assert!(parse_eps(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_seed("7"), Ok(7));
        assert!(parse_seed("x").is_err());
    }

    #[test]
    fn the_prefix_defaults_to_the_input() {
        let f = Path::new("/data/m.mtx");
        assert_eq!(output_prefix(f, None), f);
        assert_eq!(
            output_prefix(f, Some(Path::new("/no/such/dir/out"))),
            Path::new("/no/such/dir/out")
        );
        let dir = std::env::temp_dir();
        assert_eq!(output_prefix(f, Some(&dir)), dir.join("m.mtx"));
    }
}
