//! Affinity and thread-count settings (mcbsp-affinity.h): environment variables, the
//! `MCBSP_DEFAULT_*` globals, and the C setters, which override both.
//!
//! `MBSP_AFFINITY` = compact | scattered | none | manual:<cpus>;<cpus>;...  (the runtime's)
//! `MBSP_MAX_THREADS` = the most processes a run may have (bsp_begin(P) starts min(P, max),
//!   as BSPlib allows) and what bsp_nprocs() returns outside a run.
//!
//! mbsp reads the machine's cores and hardware threads from hwloc, so the machine description
//! of MulticoreBSP (available cores, threads per core, unused threads per core, thread
//! numbering, reserved cores) is accepted, stored and returned by the getters, but does not
//! change placement.

use crate::state::die;
use mbsp_rt::Policy;
use std::ffi::{c_uint, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

/// `enum mcbsp_affinity_mode`: MulticoreBSP's values, plus mbsp's "do not bind".
pub(crate) const SCATTER: u32 = 0;
pub(crate) const COMPACT: u32 = 1;
pub(crate) const MANUAL: u32 = 2;
pub(crate) const NONE: u32 = 3;

/// `enum mcbsp_thread_numbering`.
const CONSECUTIVE: u32 = 0;
const WRAPPED: u32 = 1;

/// The affinity mode used when neither `mcbsp_set_affinity_mode` nor `MBSP_AFFINITY` chose one
/// (MulticoreBSP's global of that name; SCATTER unless the program changes it).
#[unsafe(no_mangle)]
pub static MCBSP_DEFAULT_AFFINITY: AtomicU32 = AtomicU32::new(SCATTER);

/// What `mcbsp_get_threads_per_core` returns unless set (MulticoreBSP's global; 1).
#[unsafe(no_mangle)]
pub static MCBSP_DEFAULT_THREADS_PER_CORE: AtomicUsize = AtomicUsize::new(1);

/// What `mcbsp_get_thread_numbering` returns unless set (MulticoreBSP's global; CONSECUTIVE).
#[unsafe(no_mangle)]
pub static MCBSP_DEFAULT_THREAD_NUMBERING: AtomicU32 = AtomicU32::new(CONSECUTIVE);

#[derive(Clone, Default)]
struct Settings {
    mode: Option<u32>,
    pinning: Option<Vec<usize>>,
    max_threads: Option<usize>,
    available_cores: Option<usize>,
    threads_per_core: Option<usize>,
    unused_threads_per_core: Option<usize>,
    thread_numbering: Option<u32>,
    reserved_cores: Option<Vec<usize>>,
}

static SETTINGS: Mutex<Settings> = Mutex::new(Settings {
    mode: None,
    pinning: None,
    max_threads: None,
    available_cores: None,
    threads_per_core: None,
    unused_threads_per_core: None,
    thread_numbering: None,
    reserved_cores: None,
});

fn get() -> Settings {
    SETTINGS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

fn set(f: impl FnOnce(&mut Settings)) {
    f(&mut SETTINGS.lock().unwrap_or_else(|e| e.into_inner()));
}

/// The maximum number of threads (C setting, else `MBSP_MAX_THREADS`, else hardware threads).
pub(crate) fn max_threads() -> Option<usize> {
    get().max_threads.or_else(|| {
        let v = std::env::var("MBSP_MAX_THREADS").ok()?;
        match v.trim().parse::<usize>() {
            Ok(n) if n >= 1 => Some(n),
            _ => die(&format!(
                "mbsp: MBSP_MAX_THREADS=\"{v}\" is not a positive number"
            )),
        }
    })
}

/// The mode `MCBSP_DEFAULT_AFFINITY` holds (a program may have stored anything there).
fn default_mode() -> u32 {
    let m = MCBSP_DEFAULT_AFFINITY.load(Ordering::Relaxed);
    if m > NONE {
        die(&format!(
            "mbsp: MCBSP_DEFAULT_AFFINITY is {m}, which is not an affinity mode"
        ));
    }
    m
}

/// Policy and binding for a top-level run of `p` processes: C settings, else `MBSP_AFFINITY`
/// (None = the runtime's default, which reads it), else `MCBSP_DEFAULT_AFFINITY`.
pub(crate) fn for_run(p: usize) -> Option<(Policy, bool)> {
    let s = get();
    let mode = match s.mode {
        Some(m) => m,
        None if std::env::var_os(mbsp_rt::AFFINITY_ENV).is_some() => return None,
        None => match default_mode() {
            SCATTER => return None, // the runtime's own default
            m => m,
        },
    };
    match mode {
        COMPACT => Some((Policy::Compact, true)),
        SCATTER => Some((Policy::Scattered, true)),
        NONE => Some((Policy::Scattered, false)),
        _ => {
            let pins = s.pinning.unwrap_or_default();
            if pins.len() < p {
                die(&format!(
                    "mbsp: bsp_begin: manual affinity: mcbsp_set_pinning gave {} CPUs for {p} processes",
                    pins.len()
                ));
            }
            let cpu = |c: usize| {
                u32::try_from(c).unwrap_or_else(|_| {
                    die(&format!(
                        "mbsp: bsp_begin: manual affinity: CPU {c} given to mcbsp_set_pinning does not exist"
                    ))
                })
            };
            Some((
                Policy::Manual(pins[..p].iter().map(|&c| vec![cpu(c)]).collect()),
                true,
            ))
        }
    }
}

/// Choose how runs started from now on place their processes (`enum mcbsp_affinity_mode`:
/// 0 scatter, 1 compact, 2 manual (see `mcbsp_set_pinning`), 3 none = not bound).
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_set_affinity_mode(mode: c_uint) {
    if mode > NONE {
        die(&format!(
            "mbsp: mcbsp_set_affinity_mode: unknown mode {mode}"
        ));
    }
    set(|s| s.mode = Some(mode));
}

/// The affinity mode set with `mcbsp_set_affinity_mode`, else from `MBSP_AFFINITY` (forced or
/// not: `force:compact` is compact), else `MCBSP_DEFAULT_AFFINITY`. (Under a forced
/// `MBSP_AFFINITY` runs follow the environment whatever the program set.)
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_get_affinity_mode() -> c_uint {
    if let Some(m) = get().mode {
        return m;
    }
    let env = std::env::var(mbsp_rt::AFFINITY_ENV);
    match env
        .as_deref()
        .map(|v| v.trim().strip_prefix("force:").unwrap_or(v.trim()).trim())
    {
        Ok("compact") => COMPACT,
        Ok("none") | Ok("unbound") => NONE,
        Ok(v) if v.starts_with("manual:") => MANUAL,
        Ok(_) => SCATTER,
        Err(_) => default_mode(),
    }
}

/// `length` values at `p` (none if `p` is null or `length` is 0), for `op`: a length no array
/// can have, or one whose copy cannot be allocated, ends the program with one line.
///
/// # Safety
/// `p` must be null or point to `length` readable `size_t` values.
unsafe fn array(op: &str, p: *const usize, length: usize) -> Vec<usize> {
    if p.is_null() || length == 0 {
        return Vec::new();
    }
    let fits = length
        .checked_mul(size_of::<usize>())
        .and_then(|bytes| (p as usize).checked_add(bytes))
        .is_some_and(|_| length <= isize::MAX as usize / size_of::<usize>());
    if !fits {
        die(&format!(
            "mbsp: {op}: a length of {length} values is more than any array can hold"
        ));
    }
    let mut v = Vec::new();
    if v.try_reserve_exact(length).is_err() {
        die(&format!(
            "mbsp: {op}: could not allocate a copy of {length} values"
        ));
    }
    // SAFETY: the caller's promise; the area can exist (checked above).
    v.extend_from_slice(unsafe { std::slice::from_raw_parts(p, length) });
    v
}

unsafe extern "C" {
    fn malloc(size: usize) -> *mut c_void;
}

/// A `malloc`ed copy of `v` padded with `SIZE_MAX` to `len` entries (the caller frees it).
fn c_copy(op: &str, v: &[usize], len: usize) -> *mut usize {
    let len = len.max(v.len()).max(1);
    let Some(bytes) = len.checked_mul(size_of::<usize>()) else {
        die(&format!(
            "mbsp: {op}: {len} values are more than any array can hold"
        ));
    };
    // SAFETY: plain allocation; checked for null below.
    let p = unsafe { malloc(bytes) }.cast::<usize>();
    if p.is_null() {
        die(&format!(
            "mbsp: {op}: out of memory for a copy of {len} values"
        ));
    }
    for i in 0..len {
        // SAFETY: `p` holds `len` values.
        unsafe { p.add(i).write(v.get(i).copied().unwrap_or(usize::MAX)) };
    }
    p
}

/// Manual affinity: process `i` of a top-level run is placed on CPU `cpus[i]` (OS index).
/// As in MulticoreBSP, this also selects MANUAL mode.
///
/// # Safety
/// `cpus` must point to `length` readable `size_t` values (or be null with `length` 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcbsp_set_pinning(cpus: *const usize, length: usize) {
    // SAFETY: the caller's promise.
    let v = unsafe { array("mcbsp_set_pinning", cpus, length) };
    set(|s| {
        s.pinning = Some(v);
        s.mode = Some(MANUAL);
    });
}

/// A `malloc`ed copy of the pinning set with `mcbsp_set_pinning`, of
/// max(`mcbsp_get_maximum_threads()`, the number given) entries (`SIZE_MAX` past the CPUs
/// given), or NULL if none was set.
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_get_pinning() -> *mut usize {
    match get().pinning {
        Some(v) => c_copy("mcbsp_get_pinning", &v, mcbsp_get_maximum_threads()),
        None => std::ptr::null_mut(),
    }
}

/// Limit runs to at most `max` processes (0 removes the limit).
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_set_maximum_threads(max: usize) {
    set(|s| s.max_threads = (max > 0).then_some(max));
}

/// The limit set with `mcbsp_set_maximum_threads` or `MBSP_MAX_THREADS`, else the number of
/// hardware threads.
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_get_maximum_threads() -> usize {
    max_threads().unwrap_or_else(mbsp_rt::nprocs)
}

/// Record the number of cores (stored and returned; mbsp reads the machine from hwloc).
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_set_available_cores(num_cores: usize) {
    set(|s| s.available_cores = Some(num_cores));
}

/// The number set with `mcbsp_set_available_cores`, else the hardware threads divided by
/// `mcbsp_get_threads_per_core()` (MulticoreBSP's default).
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_get_available_cores() -> usize {
    get()
        .available_cores
        .unwrap_or_else(|| (mbsp_rt::nprocs() / mcbsp_get_threads_per_core().max(1)).max(1))
}

/// Record the hardware threads per core (stored and returned; not used for placement).
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_set_threads_per_core(threads_per_core: usize) {
    set(|s| s.threads_per_core = Some(threads_per_core));
}

/// The number set with `mcbsp_set_threads_per_core`, else `MCBSP_DEFAULT_THREADS_PER_CORE`.
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_get_threads_per_core() -> usize {
    get()
        .threads_per_core
        .unwrap_or_else(|| MCBSP_DEFAULT_THREADS_PER_CORE.load(Ordering::Relaxed))
}

/// Record the threads per core not to use (stored and returned; not used for placement).
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_set_unused_threads_per_core(unused_threads_per_core: usize) {
    set(|s| s.unused_threads_per_core = Some(unused_threads_per_core));
}

/// The number set with `mcbsp_set_unused_threads_per_core`, else 0.
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_get_unused_threads_per_core() -> usize {
    get().unused_threads_per_core.unwrap_or(0)
}

/// Record the hardware thread numbering (`enum mcbsp_thread_numbering`: 0 consecutive,
/// 1 wrapped; stored and returned, not used for placement).
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_set_thread_numbering(numbering: c_uint) {
    if numbering != CONSECUTIVE && numbering != WRAPPED {
        die(&format!(
            "mbsp: mcbsp_set_thread_numbering: unknown numbering {numbering}"
        ));
    }
    set(|s| s.thread_numbering = Some(numbering));
}

/// The numbering set with `mcbsp_set_thread_numbering`, else
/// `MCBSP_DEFAULT_THREAD_NUMBERING`.
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_get_thread_numbering() -> c_uint {
    get()
        .thread_numbering
        .unwrap_or_else(|| MCBSP_DEFAULT_THREAD_NUMBERING.load(Ordering::Relaxed))
}

/// Record the cores that runs must not use (stored and returned; not used for placement).
///
/// # Safety
/// `reserved` must point to `length` readable `size_t` values (or be null with `length` 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcbsp_set_reserved_cores(reserved: *const usize, length: usize) {
    // SAFETY: the caller's promise.
    let v = unsafe { array("mcbsp_set_reserved_cores", reserved, length) };
    set(|s| s.reserved_cores = (!v.is_empty()).then_some(v));
}

/// The number of cores set with `mcbsp_set_reserved_cores` (0 if none).
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_get_reserved_cores_number() -> usize {
    get().reserved_cores.map_or(0, |v| v.len())
}

/// A `malloc`ed copy of the cores set with `mcbsp_set_reserved_cores`, or NULL if none.
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_get_reserved_cores() -> *mut usize {
    match get().reserved_cores {
        Some(v) => c_copy("mcbsp_get_reserved_cores", &v, v.len()),
        None => std::ptr::null_mut(),
    }
}
