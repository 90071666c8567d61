//! The BSP FFT on numpy arrays, in place on the output array, with the GIL released: over
//! `p > 1` processes on the run this thread keeps (`crate::live`: the plan of the last length
//! stays planned and registered, its buffers allocated), sequentially (rustfft, plans cached by
//! length) for `p = 1`.

use crate::errors;
use mbsp_algorithms::fft::{self, Complex};
use mbsp_tools::preflight::{self, Need};
use numpy::{PyReadonlyArray1, PyReadwriteArray1};
use pyo3::prelude::*;

/// Checks a transform of `n` points over `p` processes: powers of two, `1 <= p <= n`; and that
/// its tables fit in memory.
fn check(op: &str, n: usize, p: usize) -> PyResult<()> {
    if n == 0 || !n.is_power_of_two() {
        return Err(errors::value(format!(
            "{op}: length {n} is not a power of two (the BSP FFT takes lengths 2^k, k >= 0)"
        )));
    }
    if p == 0 || !p.is_power_of_two() || p > n {
        return Err(errors::value(format!(
            "{op}: p = {p} must be a power of two between 1 and the length {n}"
        )));
    }
    let mut need = Need::new();
    // The plan's twiddles and kernels (about two complex numbers per entry, the inverse as
    // many again), and each process's part and pack buffers (two more).
    need.add(
        4 * n as u128,
        preflight::COMPLEX,
        format!("the plan of {n} points"),
    );
    need.add(p as u128, preflight::PER_PROCESS, format!("{p} processes"));
    errors::preflight(need.check())
}

/// `out = fft(x)` (or its inverse, scaled by 1/n) with `p` processes; `x` and `out` contiguous
/// complex128 of one length (`out` may be `x`: in place).
#[pyfunction]
fn fft_into(
    py: Python<'_>,
    x: Option<PyReadonlyArray1<'_, Complex<f64>>>,
    mut out: PyReadwriteArray1<'_, Complex<f64>>,
    p: usize,
    inverse: bool,
) -> PyResult<()> {
    let op = if inverse { "ifft" } else { "fft" };
    let data = out
        .as_slice_mut()
        .map_err(|_| errors::value(format!("{op}: out must be a contiguous array")))?;
    if let Some(x) = &x {
        let xs = crate::sparse::slice(x, op, "x")?;
        if xs.len() != data.len() {
            return Err(errors::value(format!(
                "{op}: out has {} entries, x has {}",
                data.len(),
                xs.len()
            )));
        }
        data.copy_from_slice(xs);
    }
    check(op, data.len(), p)?;
    py.detach(|| match (p, inverse) {
        (1, false) => fft::fft(data, 1),
        (1, true) => fft::ifft(data, 1),
        _ => crate::live::fft(data, p, inverse),
    })
    .map_err(errors::run)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fft_into, m)?)?;
    Ok(())
}
