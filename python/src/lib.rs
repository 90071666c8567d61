//! `mbsp._native`: the compiled half of the Python package `mbsp` (python/mbsp/ is the other
//! half: the classes users see, the conversions from scipy.sparse, the docstrings of the
//! package's functions).
//!
//! Everything here takes plain arrays (numpy, contiguous, of one dtype, which the Python half
//! makes sure of), checks every size and index with overflow-free arithmetic before use, and
//! runs the work with the GIL released. Failures become Python exceptions (module `errors`):
//! `ValueError` for bad input, `MemoryError` for requests refused before any work because they
//! cannot fit in memory, `OSError` for files, `mbsp.BspError` for a run that failed.
//!
//! Long work (the partitioner, measuring BSP parameters, CG) runs on a thread of its own while
//! the calling thread waits with the GIL released and looks at Python's signals every 50 ms
//! (`wait::interruptible`): Ctrl-C raises `KeyboardInterrupt` at once.

use pyo3::prelude::*;

mod errors;
mod fft;
mod live;
mod machine;
mod sparse;
mod spmv;
mod wait;

/// The module `mbsp._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("BspError", m.py().get_type::<errors::BspError>())?;
    // The threads of rayon's global pool (the Matrix Market reader, the partitioner) are
    // named for what they are. Started by its first use instead, the pool's threads would take
    // the name of the thread that used it: `python3`, or `mbsp-partition`, which then reads in
    // `top` as a partition still running after it has stopped. Built here, at import, it
    // starts its threads (one per hardware thread) now; they sleep until used. (The extension
    // has its own copy of rayon: no other library's pool is touched.)
    let _ = rayon::ThreadPoolBuilder::new()
        .thread_name(|i| format!("mbsp-rayon-{i}"))
        .build_global();
    machine::register(m)?;
    sparse::register(m)?;
    spmv::register(m)?;
    fft::register(m)?;
    Ok(())
}
