//! Affinity and thread-count settings: environment variables, overridden by C calls.
//!
//! `MBSP_AFFINITY` = compact | scattered | none | manual:<cpus>;<cpus>;...  (the runtime's)
//! `MBSP_MAX_THREADS` = the most processes a run may have (bsp_begin(P) starts min(P, max),
//!   as BSPlib allows) and what bsp_nprocs() returns outside a run.

use crate::state::die;
use mbsp_rt::Policy;
use std::sync::Mutex;

/// `mcbsp_affinity_mode_t`.
pub(crate) const COMPACT: u32 = 0;
pub(crate) const SCATTER: u32 = 1;
pub(crate) const MANUAL: u32 = 2;
pub(crate) const NONE: u32 = 3;

#[derive(Clone, Default)]
struct Settings {
    mode: Option<u32>,
    pinning: Option<Vec<u32>>,
    max_threads: Option<usize>,
}

static SETTINGS: Mutex<Settings> = Mutex::new(Settings {
    mode: None,
    pinning: None,
    max_threads: None,
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

/// Policy and binding for a top-level run of `p` processes: C settings, else `MBSP_AFFINITY`
/// (None = the runtime's default).
pub(crate) fn for_run(p: usize) -> Option<(Policy, bool)> {
    let s = get();
    match s.mode? {
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
            Some((
                Policy::Manual(pins[..p].iter().map(|&c| vec![c]).collect()),
                true,
            ))
        }
    }
}

/// Choose how runs started from now on place their processes (`mcbsp_affinity_mode_t`:
/// 0 compact, 1 scattered, 2 manual (see `mcbsp_set_pinning`), 3 none = not bound).
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_set_affinity_mode(mode: u32) {
    if mode > NONE {
        die(&format!(
            "mbsp: mcbsp_set_affinity_mode: unknown mode {mode}"
        ));
    }
    set(|s| s.mode = Some(mode));
}

/// The affinity mode set with `mcbsp_set_affinity_mode`, or from `MBSP_AFFINITY` (default
/// scattered).
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_get_affinity_mode() -> u32 {
    if let Some(m) = get().mode {
        return m;
    }
    match std::env::var("MBSP_AFFINITY").as_deref().map(str::trim) {
        Ok("compact") => COMPACT,
        Ok("none") | Ok("unbound") => NONE,
        Ok(v) if v.starts_with("manual:") => MANUAL,
        _ => SCATTER,
    }
}

/// For manual affinity: process `i` of a top-level run is placed on CPU `cpus[i]` (OS index).
///
/// # Safety
/// `cpus` must point to `length` readable `size_t` values (or be null with `length` 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcbsp_set_pinning(cpus: *const usize, length: usize) {
    let v: Vec<u32> = if length == 0 {
        Vec::new()
    } else {
        // SAFETY: the caller's promise.
        unsafe { std::slice::from_raw_parts(cpus, length) }
            .iter()
            .map(|&c| c as u32)
            .collect()
    };
    set(|s| s.pinning = Some(v));
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
