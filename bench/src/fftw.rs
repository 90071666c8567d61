//! FFTW 3 (double precision, with its threads library) as a baseline of `mbsp-bench fft`.
//!
//! Built wherever `libfftw3` and `libfftw3_threads` are installed (Debian: `libfftw3-dev`;
//! `build.rs` sets the cfg `has_fftw`), or on request with the feature `fftw`. The few C
//! functions used are declared here from `fftw3.h` (FFTW 3.3) rather than through a binding
//! crate. The one data type crossing the boundary is `fftw_complex`, C's `double[2]` (real part, then imaginary part), which has the
//! layout of `num_complex::Complex<f64>` (`#[repr(C)]` with `re` then `im`): checked at compile
//! time below.
//!
//! FFTW's planner is not thread-safe: creating and destroying plans, and setting up its threads,
//! must not happen concurrently. Every such call here goes through the one process-wide lock
//! [`PLANNER`], so [`Fft`] is sound whichever thread uses it (the benchmark plans from its main
//! thread only anyway). Executing a plan is thread-safe in FFTW and takes no lock.
#![cfg(has_fftw)]

use mbsp_tools::{Error, Result};

use mbsp_algorithms::fft::Complex;
use std::ffi::{c_int, c_uint, c_void};
use std::marker::{PhantomData, PhantomPinned};
use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard, PoisonError};

type C = Complex<f64>;

/// `fftw_complex`: `double[2]`.
type FftwComplex = [f64; 2];

// `Complex<f64>` is `#[repr(C)] { re: f64, im: f64 }`: the same size and alignment as
// `double[2]`, so an array of one is an array of the other.
const _: () = assert!(std::mem::size_of::<C>() == std::mem::size_of::<FftwComplex>());
const _: () = assert!(std::mem::align_of::<C>() == std::mem::align_of::<FftwComplex>());

/// FFTW's opaque plan, `struct fftw_plan_s` (only ever behind a pointer, `fftw_plan`).
#[repr(C)]
struct FftwPlanS {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// `FFTW_FORWARD` of `fftw3.h`: the sign of the exponent, e^(-2 pi i j k / n).
const FFTW_FORWARD: c_int = -1;
/// `FFTW_MEASURE` of `fftw3.h`: plan by timing candidate algorithms (which overwrites the
/// arrays). (`FFTW_ESTIMATE`, `1 << 6`, would plan by heuristics without touching them.)
const FFTW_MEASURE: c_uint = 0;

// The threads library first: it depends on libfftw3, which a static link wants after it.
#[link(name = "fftw3_threads")]
unsafe extern "C" {
    /// `int fftw_init_threads(void)`: nonzero on success; once, before any other FFTW call.
    fn fftw_init_threads() -> c_int;
    /// `void fftw_plan_with_nthreads(int nthreads)`: threads of the plans created after it.
    fn fftw_plan_with_nthreads(nthreads: c_int);
}

#[link(name = "fftw3")]
unsafe extern "C" {
    /// `fftw_plan fftw_plan_dft_1d(int n, fftw_complex *in, fftw_complex *out, int sign,
    /// unsigned flags)`: null when no plan could be made.
    fn fftw_plan_dft_1d(
        n: c_int,
        input: *mut FftwComplex,
        output: *mut FftwComplex,
        sign: c_int,
        flags: c_uint,
    ) -> *mut FftwPlanS;
    /// `void fftw_execute(const fftw_plan p)`.
    fn fftw_execute(p: *mut FftwPlanS);
    /// `void fftw_destroy_plan(fftw_plan p)`.
    fn fftw_destroy_plan(p: *mut FftwPlanS);
    /// `fftw_complex *fftw_alloc_complex(size_t n)`: aligned for FFTW's SIMD, uninitialised;
    /// null on failure.
    fn fftw_alloc_complex(n: usize) -> *mut FftwComplex;
    /// `void fftw_free(void *p)`.
    fn fftw_free(p: *mut c_void);
}

/// Serialises every call into FFTW's planner (and its thread setup); holds whether
/// `fftw_init_threads` has succeeded.
static PLANNER: Mutex<bool> = Mutex::new(false);

/// Lock the planner, setting up FFTW's threads on first use.
fn planner() -> Result<MutexGuard<'static, bool>> {
    // A panic while the lock was held left FFTW in a consistent state (no FFTW call panics).
    let mut ready = PLANNER.lock().unwrap_or_else(PoisonError::into_inner);
    if !*ready {
        // SAFETY: called under `PLANNER` before any other FFTW call of this module (every path
        // to FFTW goes through here first), and only until it has succeeded once.
        if unsafe { fftw_init_threads() } == 0 {
            return Err(Error::run("fftw_init_threads failed"));
        }
        *ready = true;
    }
    Ok(ready)
}

/// An array of `n` complex values allocated by FFTW (aligned as its SIMD code wants).
struct Buffer {
    ptr: NonNull<C>,
    n: usize,
}

impl Buffer {
    /// `n` zeros. Call with the planner set up (FFTW wants `fftw_init_threads` first).
    fn zeros(n: usize) -> Result<Buffer> {
        // SAFETY: fftw_alloc_complex is malloc with FFTW's alignment; any thread may call it.
        let raw = unsafe { fftw_alloc_complex(n) };
        let ptr = NonNull::new(raw.cast::<C>())
            .ok_or_else(|| Error::run(format!("fftw_alloc_complex({n}) failed")))?;
        // SAFETY: `ptr` points to a fresh allocation of `n` complex values (16 n bytes, aligned
        // for `C` as the assertions above show); all-zero bits are the f64 value 0.0.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, n) };
        Ok(Buffer { ptr, n })
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from fftw_alloc_complex and is freed once, here; the plan using it
        // is destroyed before (field order of `Fft`).
        unsafe { fftw_free(self.ptr.as_ptr().cast::<c_void>()) };
    }
}

/// A planned in-place forward FFT of length n (unscaled), with its array.
///
/// Fill the array with [`Fft::data_mut`] after planning (planning with `FFTW_MEASURE` overwrites
/// it), transform it with [`Fft::execute`], read it with [`Fft::data`].
pub struct Fft {
    // Dropped first: the plan is destroyed before its array is freed.
    plan: NonNull<FftwPlanS>,
    buf: Buffer,
}

impl Fft {
    /// Plan a forward transform of length `n` on `threads` threads with `FFTW_MEASURE` (which
    /// can take from milliseconds to seconds: time it apart). The array then holds arbitrary
    /// values.
    pub fn forward(n: usize, threads: usize) -> Result<Fft> {
        let len = c_int::try_from(n)
            .ok()
            .filter(|&len| len > 0)
            .ok_or_else(|| Error::usage(format!("FFTW: bad length {n}")))?;
        let nthreads = c_int::try_from(threads.max(1))
            .map_err(|_| Error::usage(format!("FFTW: too many threads ({threads})")))?;
        let _lock = planner()?;
        let buf = Buffer::zeros(n)?;
        // SAFETY: under `PLANNER` (the planner is not thread-safe), after fftw_init_threads.
        unsafe { fftw_plan_with_nthreads(nthreads) };
        let data = buf.ptr.as_ptr().cast::<FftwComplex>();
        // SAFETY: under `PLANNER`; `data` points to `n` initialised complex values that only
        // `buf` refers to (no reference to them is alive); in place (`in == out`), which FFTW
        // allows; FFTW_MEASURE writes arbitrary (valid f64) values into them.
        let raw = unsafe { fftw_plan_dft_1d(len, data, data, FFTW_FORWARD, FFTW_MEASURE) };
        let plan =
            NonNull::new(raw).ok_or_else(|| Error::run(format!("FFTW: no plan for n = {n}")))?;
        Ok(Fft { plan, buf })
    }

    /// The array (length n).
    pub fn data(&self) -> &[C] {
        // SAFETY: `buf` holds `n` initialised values for as long as `self`; FFTW writes them
        // only in `forward` (before `self` exists) and `execute` (which takes `&mut self`).
        unsafe { std::slice::from_raw_parts(self.buf.ptr.as_ptr(), self.buf.n) }
    }

    /// The array (length n), to fill with the input.
    pub fn data_mut(&mut self) -> &mut [C] {
        // SAFETY: as in `data`, and `&mut self` makes this the only reference to them.
        unsafe { std::slice::from_raw_parts_mut(self.buf.ptr.as_ptr(), self.buf.n) }
    }

    /// Transform the array in place.
    pub fn execute(&mut self) {
        // SAFETY: `plan` is a live plan (destroyed only in `drop`) for the array of `buf`,
        // which is still allocated; `&mut self` means no slice of it is alive while FFTW reads
        // and writes it. fftw_execute is thread-safe and needs no lock.
        unsafe { fftw_execute(self.plan.as_ptr()) };
    }
}

impl Drop for Fft {
    fn drop(&mut self) {
        // Never panics: a poisoned lock is taken over, and initialisation has succeeded (`self`
        // exists), so `planner` returns the guard.
        if let Ok(_lock) = planner() {
            // SAFETY: under `PLANNER` (destroying a plan touches the planner's data); `plan`
            // came from fftw_plan_dft_1d and is destroyed once, here.
            unsafe { fftw_destroy_plan(self.plan.as_ptr()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FFTW's forward transform of a small vector on 1 and 2 threads against the definition.
    #[test]
    fn matches_the_dft() {
        let n = 16;
        let x: Vec<C> = (0..n)
            .map(|j| C::new(j as f64 * 0.25 - 1.0, (j * j % 7) as f64))
            .collect();
        let want: Vec<C> = (0..n)
            .map(|k| {
                (0..n)
                    .map(|j| {
                        let a = -2.0 * std::f64::consts::PI * (j * k % n) as f64 / n as f64;
                        x[j] * C::new(a.cos(), a.sin())
                    })
                    .sum()
            })
            .collect();
        for threads in [1, 2] {
            let mut f = Fft::forward(n, threads).expect("plan");
            f.data_mut().copy_from_slice(&x);
            f.execute();
            for (a, b) in f.data().iter().zip(&want) {
                assert!((a - b).norm() < 1e-9, "{a} against {b}");
            }
        }
    }
}
