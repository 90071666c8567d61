//! `mbsp partition`: split one Matrix Market matrix into `p` parts with the medium-grain
//! partitioner and write Mondriaan's three files (distributed matrix, `u` and `v` vectors).
//!
//! Every argument is checked before the matrix is read (numbers, the input file, that the
//! output prefix can be written), so that a mistake costs one line and no partitioning time.
//! Progress goes to stderr; the results go to stdout, as text or as one JSON object.

use crate::cli;
use mbsp_algorithms::sparse::{metrics, mondriaan, mtx, partition};
use mbsp_algorithms::whole_file;
use mbsp_tools::preflight;
use mbsp_tools::sparse::{IMBALANCE_SLACK, check_input, matrix_name};
use mbsp_tools::{Error, Result};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Options of `mbsp partition`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// The Matrix Market file (`.mtx` or `.mtx.gz`).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Number of parts (a positive integer).
    #[arg(short = 'p', long = "procs", value_name = "P", allow_hyphen_values = true,
          value_parser = cli::at_least("-p", 1))]
    pub p: usize,
    /// Allowed load imbalance: every part gets at most (1 + eps) nnz / p nonzeros.
    #[arg(long, value_name = "E", default_value = "0.03", allow_hyphen_values = true,
          value_parser = cli::non_negative("--eps"))]
    pub eps: f64,
    /// Seed of the partitioner's random choices.
    #[arg(long, value_name = "S", default_value = "1", allow_hyphen_values = true,
          value_parser = cli::seed("--seed"))]
    pub seed: u64,
    /// Spend more time for a lower volume: max-flow refinement in every split and, with
    /// p >= 5, k-way refinement of all parts at once (about 5% less volume for 1.7x the time
    /// on the shared matrices; meshes, road networks and large p gain most).
    #[arg(long)]
    pub quality: bool,
    /// Prefix of the output files (default: the input path; a directory: the input's name
    /// inside it).
    #[arg(long, value_name = "PREFIX")]
    pub out: Option<PathBuf>,
    /// Print one JSON object (volume, imbalance, max_h, seconds, p, nnz, m, n, files, ...).
    #[arg(long)]
    pub json: bool,
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
fn check_writable(prefix: &Path) -> Result<()> {
    let dir = match prefix.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let shown = prefix.display();
    if !dir.is_dir() {
        return Err(Error::io(format!(
            "output prefix {shown}: directory {} does not exist",
            dir.display()
        )));
    }
    whole_file::probe(dir).map_err(|e| {
        Error::io(format!(
            "output prefix {shown}: cannot create files in {}",
            dir.display()
        ))
        .with_source(e)
    })
}

/// Shows a path of the writer's result, whatever type it returns them as.
fn shown(p: impl AsRef<Path>) -> String {
    p.as_ref().display().to_string()
}

/// Runs `mbsp partition`.
pub fn run(o: &Options) -> Result<()> {
    let (p, eps, seed) = (o.p, o.eps, o.seed);
    check_input(&o.file)?;
    let prefix = output_prefix(&o.file, o.out.as_deref());
    check_writable(&prefix)?;
    preflight::partition_file(&o.file, p)?;
    let name = matrix_name(&o.file);

    // Reading is reported when done, not announced: the error of a malformed file must be the
    // only line on stderr.
    let t = Instant::now();
    let a = mtx::read_path(&o.file).map_err(|e| Error::io("").with_source(e))?;
    preflight::partition_matrix(&a, p)?;
    let read_seconds = t.elapsed().as_secs_f64();
    eprintln!(
        "partition: read {name}: {} x {}, {} nonzeros in {read_seconds:.3} s",
        a.rows,
        a.cols,
        a.nnz()
    );

    let mode = if o.quality { ", quality" } else { "" };
    eprintln!("partition: partitioning into {p} parts (eps {eps}, seed {seed}{mode})...");
    let opts = partition::Options {
        eps,
        seed,
        threads: 0,
        quality: o.quality,
        cancel: None,
    };
    let r = partition::partition(&a, p, &opts).map_err(|e| Error::usage(e.to_string()))?;
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
        Error::io(format!(
            "cannot write the Mondriaan files {}-P{p}, -u{p}, -v{p}",
            prefix.display()
        ))
        .with_source(e)
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
            "quality": o.quality,
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

#[cfg(test)]
mod tests {
    use super::*;

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
