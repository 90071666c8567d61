//! Sparse matrices from numpy arrays, Matrix Market and Mondriaan's files, and the partitioner.
//!
//! A matrix crosses the boundary as `(rows, cols, row, col, vals)`: int64 row and column
//! indices and float64 values of one length (the Python half makes them from any
//! scipy.sparse matrix, `tocoo()`, in the matrix's own nonzero order). [`coo`] checks every
//! index before a [`CooMatrix`] is made of them.

use crate::errors;
use mbsp_algorithms::sparse::partition::{self, Options, Partitioned};
use mbsp_algorithms::sparse::{CooMatrix, Distribution, metrics, mondriaan, mtx};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

/// The arrays of a matrix as Python gets them: rows, columns, and int64 row indices, int64
/// column indices, float64 values.
pub type CooArrays<'py> = (
    usize,
    usize,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<f64>>,
);

/// A contiguous view of an array, or a `ValueError` naming the operation and the argument.
pub fn slice<'a, T: numpy::Element>(
    a: &'a PyReadonlyArray1<'_, T>,
    op: &str,
    name: &str,
) -> PyResult<&'a [T]> {
    a.as_slice()
        .map_err(|_| errors::value(format!("{op}: {name} must be a contiguous array")))
}

/// The matrix of the arrays, every index checked (`op` names the operation in errors).
pub fn coo(
    op: &str,
    rows: usize,
    cols: usize,
    row: &[i64],
    col: &[i64],
    vals: &[f64],
) -> PyResult<CooMatrix> {
    if rows > u32::MAX as usize || cols > u32::MAX as usize {
        return Err(errors::value(format!(
            "{op}: a {rows} x {cols} matrix is too large (at most {} rows and columns)",
            u32::MAX
        )));
    }
    if row.len() != col.len() || row.len() != vals.len() {
        return Err(errors::value(format!(
            "{op}: row, col and data differ in length ({}, {}, {})",
            row.len(),
            col.len(),
            vals.len()
        )));
    }
    let index = |k: usize, i: i64, j: i64| -> PyResult<(u32, u32)> {
        match (u32::try_from(i), u32::try_from(j)) {
            (Ok(iu), Ok(ju)) if (iu as usize) < rows && (ju as usize) < cols => Ok((iu, ju)),
            _ => Err(errors::value(format!(
                "{op}: nonzero {k} at ({i}, {j}) lies outside the {rows} x {cols} matrix"
            ))),
        }
    };
    let mut row_idx = Vec::with_capacity(row.len());
    let mut col_idx = Vec::with_capacity(col.len());
    for (k, (&i, &j)) in row.iter().zip(col).enumerate() {
        let (i, j) = index(k, i, j)?;
        row_idx.push(i);
        col_idx.push(j);
    }
    Ok(CooMatrix {
        rows,
        cols,
        row_idx,
        col_idx,
        vals: vals.to_vec(),
    })
}

/// A matrix as the package passes it: the tuple `(rows, cols, row, col, data)` that
/// [`read_mtx`] returns (`_Coo` in the stubs).
#[derive(FromPyObject)]
pub struct CooArgs<'py>(
    usize,
    usize,
    PyReadonlyArray1<'py, i64>,
    PyReadonlyArray1<'py, i64>,
    PyReadonlyArray1<'py, f64>,
);

impl CooArgs<'_> {
    /// The matrix (contiguous arrays, every index checked; `op` names the operation).
    pub fn matrix(&self, op: &str) -> PyResult<CooMatrix> {
        let CooArgs(rows, cols, row, col, vals) = self;
        coo(
            op,
            *rows,
            *cols,
            slice(row, op, "row")?,
            slice(col, op, "col")?,
            slice(vals, op, "data")?,
        )
    }
}

/// A distribution as the package passes it: the tuple `(p, parts, x_owner, y_owner)`
/// (`_Dist` in the stubs).
#[derive(FromPyObject)]
pub struct DistArgs<'py>(
    usize,
    PyReadonlyArray1<'py, u32>,
    PyReadonlyArray1<'py, u32>,
    PyReadonlyArray1<'py, u32>,
);

impl DistArgs<'_> {
    /// The distribution, checked against `a` (see [`distribution`]).
    pub fn distribution(&self, op: &str, a: &CooMatrix) -> PyResult<Distribution> {
        let DistArgs(p, parts, x_owner, y_owner) = self;
        distribution(
            op,
            a,
            *p,
            slice(parts, op, "parts")?,
            slice(x_owner, op, "x_owner")?,
            slice(y_owner, op, "y_owner")?,
        )
    }
}

/// The arrays of `a` for Python.
pub fn arrays<'py>(py: Python<'py>, a: CooMatrix) -> CooArrays<'py> {
    let widen = |v: Vec<u32>| v.into_iter().map(i64::from).collect::<Vec<i64>>();
    (
        a.rows,
        a.cols,
        PyArray1::from_vec(py, widen(a.row_idx)),
        PyArray1::from_vec(py, widen(a.col_idx)),
        PyArray1::from_vec(py, a.vals),
    )
}

/// Reads a Matrix Market file (`.gz` too), nonzeros in file order (a symmetric matrix's mirror
/// entries follow their originals), as `mbsp partition` reads it.
#[pyfunction]
fn read_mtx<'py>(py: Python<'py>, path: &str) -> PyResult<CooArrays<'py>> {
    errors::preflight(mbsp_tools::preflight::partition_file(path.as_ref(), 1))?;
    let p = path.to_string();
    let a = py
        .detach(move || mtx::read_path(&p))
        .map_err(|e| errors::io(path, e))?;
    Ok(arrays(py, a))
}

/// Writes a Matrix Market file (whole or not at all; `.gz` compresses).
#[pyfunction]
fn write_mtx(path: &str, a: CooArgs<'_>) -> PyResult<()> {
    const OP: &str = "write_mtx";
    let a = a.matrix(OP)?;
    mtx::write_path(&a, path).map_err(|e| errors::io(path, e))
}

/// A partition as Python gets it: the part of each nonzero, the owners of x (columns) and y
/// (rows), volume, imbalance, max h, seconds.
pub type PartitionTuple<'py> = (
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
    u64,
    f64,
    u64,
    f64,
);

fn partition_tuple(py: Python<'_>, r: Partitioned) -> PartitionTuple<'_> {
    (
        PyArray1::from_vec(py, r.dist.nz_part),
        PyArray1::from_vec(py, r.dist.x_owner),
        PyArray1::from_vec(py, r.dist.y_owner),
        r.volume,
        r.imbalance,
        r.max_h,
        r.seconds,
    )
}

/// The partitioner's options, checked.
pub fn options(op: &str, eps: f64, seed: u64, threads: usize) -> PyResult<Options> {
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(errors::value(format!(
            "{op}: eps = {eps} must be a finite number >= 0"
        )));
    }
    Ok(Options {
        eps,
        seed,
        threads,
        quality: false,
        cancel: None,
    })
}

/// `o` with a fresh stop flag, and the flag: for [`crate::wait::interruptible`], which sets it
/// on Ctrl-C and waits for the partitioner to stop (within one refinement pass).
pub fn cancellable(mut o: Options) -> (Options, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    o.cancel = Some(stop.clone());
    (o, stop)
}

/// Partitions `a` into `p` parts on a thread of its own, interruptibly; `square`: x and y
/// owners equal ([`partition::partition_square`]).
fn run_partition(
    py: Python<'_>,
    a: std::sync::Arc<CooMatrix>,
    p: usize,
    o: Options,
    square: bool,
) -> PyResult<Partitioned> {
    errors::preflight(mbsp_tools::preflight::partition_matrix(&a, p))?;
    let (o, stop) = cancellable(o);
    crate::wait::interruptible(py, "partition", stop, move || {
        if square {
            partition::partition_square(&a, p, &o)
        } else {
            partition::partition(&a, p, &o)
        }
    })?
    .map_err(errors::value)
}

/// Partitions the nonzeros of the matrix of the arrays into `p` parts.
#[pyfunction]
#[pyo3(signature = (a, p, eps, seed, square, threads=0, quality=false))]
#[allow(clippy::too_many_arguments)] // the Python function's keyword arguments
fn partition_coo<'py>(
    py: Python<'py>,
    a: CooArgs<'py>,
    p: usize,
    eps: f64,
    seed: u64,
    square: bool,
    threads: usize,
    quality: bool,
) -> PyResult<PartitionTuple<'py>> {
    const OP: &str = "partition";
    let o = Options {
        quality,
        ..options(OP, eps, seed, threads)?
    };
    let a = a.matrix(OP)?;
    let r = run_partition(py, std::sync::Arc::new(a), p, o, square)?;
    Ok(partition_tuple(py, r))
}

/// Reads a Matrix Market file and partitions it as `mbsp partition` does: the matrix's arrays
/// and the partition.
#[pyfunction]
#[pyo3(signature = (path, p, eps, seed, square, threads=0, quality=false))]
#[allow(clippy::too_many_arguments)] // the Python function's keyword arguments
fn partition_path<'py>(
    py: Python<'py>,
    path: &str,
    p: usize,
    eps: f64,
    seed: u64,
    square: bool,
    threads: usize,
    quality: bool,
) -> PyResult<(CooArrays<'py>, PartitionTuple<'py>)> {
    let o = Options {
        quality,
        ..options("partition", eps, seed, threads)?
    };
    errors::preflight(mbsp_tools::preflight::partition_file(path.as_ref(), p))?;
    let owned = path.to_string();
    let a = py
        .detach(move || mtx::read_path(&owned))
        .map_err(|e| errors::io(path, e))?;
    let a = std::sync::Arc::new(a);
    let r = run_partition(py, a.clone(), p, o, square)?;
    let a = std::sync::Arc::try_unwrap(a).unwrap_or_else(|a| (*a).clone());
    Ok((arrays(py, a), partition_tuple(py, r)))
}

/// The distribution of the arrays, checked against the matrix's shape (`op` names the
/// operation in errors).
pub fn distribution(
    op: &str,
    a: &CooMatrix,
    p: usize,
    nz_part: &[u32],
    x_owner: &[u32],
    y_owner: &[u32],
) -> PyResult<Distribution> {
    if p == 0 || p > u32::MAX as usize {
        return Err(errors::value(format!(
            "{op}: p = {p} must be in 1..={}",
            u32::MAX
        )));
    }
    for (name, v, len) in [
        ("parts", nz_part, a.nnz()),
        ("x_owner", x_owner, a.cols),
        ("y_owner", y_owner, a.rows),
    ] {
        if v.len() != len {
            return Err(errors::value(format!(
                "{op}: {name} has {} entries, the matrix needs {len}",
                v.len()
            )));
        }
        if let Some((k, &s)) = v.iter().enumerate().find(|(_, s)| **s as usize >= p) {
            return Err(errors::value(format!(
                "{op}: {name}[{k}] = {s} is not a part of p = {p}"
            )));
        }
    }
    Ok(Distribution {
        p,
        nz_part: nz_part.to_vec(),
        x_owner: x_owner.to_vec(),
        y_owner: y_owner.to_vec(),
    })
}

/// Volume, imbalance and max h of a distribution (computed from scratch).
#[pyfunction]
fn measure_partition(a: CooArgs<'_>, d: DistArgs<'_>) -> PyResult<(u64, f64, u64)> {
    const OP: &str = "Partition";
    let a = a.matrix(OP)?;
    let d = d.distribution(OP, &a)?;
    let t = metrics::traffic(&a, &d);
    Ok((t.volume(), metrics::imbalance(&d.nz_part, d.p), t.max_h()))
}

/// Writes Mondriaan's three files `prefix-P<p>`, `-u<p>`, `-v<p>` (all or none); their paths.
#[pyfunction]
fn write_mondriaan(
    prefix: &str,
    a: CooArgs<'_>,
    d: DistArgs<'_>,
) -> PyResult<(String, String, String)> {
    const OP: &str = "write_mondriaan";
    let a = a.matrix(OP)?;
    let d = d.distribution(OP, &a)?;
    let f = mondriaan::write(&a, &d, prefix).map_err(|e| errors::io(prefix, e))?;
    let s = |p: std::path::PathBuf| p.display().to_string();
    Ok((s(f.matrix), s(f.u), s(f.v)))
}

/// Reads Mondriaan's three files for `p` parts: the matrix (nonzeros in file order) and the
/// part of each nonzero, x owners (`-v`), y owners (`-u`).
#[allow(clippy::type_complexity)] // the arrays of a matrix and of its distribution
#[pyfunction]
fn read_mondriaan<'py>(
    py: Python<'py>,
    prefix: &str,
    p: usize,
) -> PyResult<(
    CooArrays<'py>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
)> {
    let (a, d) = mondriaan::read(prefix, p).map_err(|e| errors::io(prefix, e))?;
    Ok((
        arrays(py, a),
        PyArray1::from_vec(py, d.nz_part),
        PyArray1::from_vec(py, d.x_owner),
        PyArray1::from_vec(py, d.y_owner),
    ))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(read_mtx, m)?)?;
    m.add_function(wrap_pyfunction!(write_mtx, m)?)?;
    m.add_function(wrap_pyfunction!(partition_coo, m)?)?;
    m.add_function(wrap_pyfunction!(partition_path, m)?)?;
    m.add_function(wrap_pyfunction!(measure_partition, m)?)?;
    m.add_function(wrap_pyfunction!(write_mondriaan, m)?)?;
    m.add_function(wrap_pyfunction!(read_mondriaan, m)?)?;
    Ok(())
}
