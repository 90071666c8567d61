//! `mbsp spmv`: one matrix, partitioned and multiplied many times by the 2D BSP SpMV, checked
//! against a sequential CSR multiply, with Mflop/s and the speedup over sequential CSR.

use mbsp_algorithms::sparse::partition::{Options as PartitionOptions, partition};
use mbsp_algorithms::sparse::spmv::{Spmv, SpmvPlan};
use mbsp_algorithms::sparse::{CooMatrix, mtx};
use mbsp_algorithms::timer::RegionTimer;
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;

/// Options of `mbsp spmv`.
pub struct Options {
    /// The Matrix Market file.
    pub file: PathBuf,
    /// Processes.
    pub p: usize,
    /// `plain` (the others are not written yet).
    pub variant: String,
    /// Multiplies timed (the median of 5 batches of `reps / 5` is reported).
    pub reps: usize,
    /// Print one JSON object.
    pub json: bool,
}

/// Compressed rows, the sequential baseline.
struct Csr {
    ptr: Vec<usize>,
    col: Vec<u32>,
    val: Vec<f64>,
}

impl Csr {
    fn new(a: &CooMatrix) -> Self {
        let mut ptr = vec![0usize; a.rows + 1];
        for &i in &a.row_idx {
            ptr[i as usize + 1] += 1;
        }
        for i in 0..a.rows {
            ptr[i + 1] += ptr[i];
        }
        let mut fill = ptr.clone();
        let (mut col, mut val) = (vec![0u32; a.nnz()], vec![0.0; a.nnz()]);
        for k in 0..a.nnz() {
            let i = a.row_idx[k] as usize;
            col[fill[i]] = a.col_idx[k];
            val[fill[i]] = a.vals[k];
            fill[i] += 1;
        }
        Csr { ptr, col, val }
    }

    fn multiply(&self, x: &[f64], y: &mut [f64]) {
        for (i, yi) in y.iter_mut().enumerate() {
            let mut s = 0.0;
            for k in self.ptr[i]..self.ptr[i + 1] {
                s += self.val[k] * x[self.col[k] as usize];
            }
            *yi = s;
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Run it; `Err` is a one-line message for exit status 2.
pub fn run(o: &Options) -> Result<(), String> {
    if o.p == 0 {
        return Err("-p 0: need at least one process".into());
    }
    if o.variant != "plain" {
        return Err(format!(
            "--variant {}: only `plain` exists so far (hp and hier are not written yet)",
            o.variant
        ));
    }
    let batches = 5;
    let per = (o.reps / batches).max(1);
    let name = o
        .file
        .file_name()
        .map_or("?".into(), |n| n.to_string_lossy().into_owned());
    let a = mtx::read_path(&o.file).map_err(|e| e.to_string())?;
    eprintln!(
        "spmv: {name}: {} x {}, {} nonzeros; partitioning for p = {}",
        a.rows,
        a.cols,
        a.nnz(),
        o.p
    );
    let t = Instant::now();
    let r = partition(&a, o.p, &PartitionOptions::default()).map_err(|e| e.to_string())?;
    let partition_seconds = t.elapsed().as_secs_f64();
    let plan = SpmvPlan::new(&a, &r.dist)?;
    let x: Vec<f64> = (0..a.cols)
        .map(|j| ((j * 2_654_435_761) % 1000) as f64 / 1000.0 - 0.5)
        .collect();

    eprintln!(
        "spmv: sequential CSR and BSP 2D {} at p = {}, interleaved: {batches} batches of {per} \
         multiplies each",
        o.variant, o.p
    );
    let csr = Csr::new(&a);
    let mut ys = vec![0.0; a.rows];
    csr.multiply(&x, &mut ys);
    // The baseline's batches run on process 0 between the BSP batches (the other processes
    // wait in a sync), so both see the same machine state: this machine switches between a
    // fast and a slow state, and figures timed minutes apart are not comparable.
    let out = mbsp::run(o.p, |ctx| {
        let local = &plan.procs[ctx.pid()];
        let mut spmv = Spmv::new(ctx, local)?;
        for (v, &j) in spmv.x_mut(ctx)?.iter_mut().zip(&local.x_owned) {
            *v = x[j as usize];
        }
        let mut y = vec![0.0; local.y_owned.len()];
        let mut y_seq = vec![0.0; if ctx.pid() == 0 { a.rows } else { 0 }];
        spmv.multiply(ctx, &mut y)?; // warm-up
        let (mut times, mut seq) = (Vec::new(), Vec::new());
        for _ in 0..batches {
            if ctx.pid() == 0 {
                let t = Instant::now();
                for _ in 0..per {
                    csr.multiply(&x, &mut y_seq);
                }
                seq.push(t.elapsed().as_secs_f64() / per as f64);
            }
            let timer = RegionTimer::start(ctx)?;
            for _ in 0..per {
                spmv.multiply(ctx, &mut y)?;
            }
            times.push(timer.stop(ctx)? / per as f64);
        }
        let t_seq = if seq.is_empty() { 0.0 } else { median(seq) };
        Ok((y, median(times), t_seq))
    })
    .map_err(|e| e.to_string())?;
    let t_seq = out[0].2;
    let t_bsp = out[0].1;
    // Error per entry, relative to the sum of the magnitudes of its terms (the scale of the
    // rounding error of any summation order).
    let mut scale = vec![0.0f64; a.rows];
    for k in 0..a.nnz() {
        scale[a.row_idx[k] as usize] += (a.vals[k] * x[a.col_idx[k] as usize]).abs();
    }
    let mut max_rel_error = 0.0f64;
    for (s, (y, _, _)) in out.iter().enumerate() {
        for (q, &i) in plan.procs[s].y_owned.iter().enumerate() {
            let i = i as usize;
            if scale[i] > 0.0 {
                max_rel_error = max_rel_error.max((y[q] - ys[i]).abs() / scale[i]);
            } else if y[q] != 0.0 {
                max_rel_error = f64::INFINITY;
            }
        }
    }
    let flops = 2.0 * a.nnz() as f64;
    let mflops = flops / t_bsp / 1e6;
    let speedup = t_seq / t_bsp;
    if o.json {
        let v = json!({
            "matrix": name, "p": o.p, "variant": o.variant, "mflops": mflops, "speedup": speedup,
            "max_rel_error": max_rel_error, "partition_seconds": partition_seconds,
            "sequential_mflops": flops / t_seq / 1e6, "volume": r.volume, "max_h": r.max_h,
            "nnz": a.nnz(), "m": a.rows, "n": a.cols,
        });
        println!("{v}");
    } else {
        println!(
            "{name}: {} x {}, nnz {}, p = {}, {}: {mflops:.0} Mflop/s ({:.1} µs per multiply), \
             sequential CSR {:.0} Mflop/s, speedup {speedup:.2}; max relative error {max_rel_error:.1e}; \
             partition: volume {}, max h {}, {partition_seconds:.2} s",
            a.rows,
            a.cols,
            a.nnz(),
            o.p,
            o.variant,
            t_bsp * 1e6,
            flops / t_seq / 1e6,
            r.volume,
            r.max_h
        );
    }
    if max_rel_error > 1e-12 {
        return Err(format!(
            "result differs from sequential CSR: max relative error {max_rel_error:e}"
        ));
    }
    Ok(())
}
