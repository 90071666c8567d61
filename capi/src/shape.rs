//! The shape a tool asks the program to run with (`MBSP_SHAPE`, set by `mbsp affinity`).

use crate::state::die;
use std::ffi::{c_int, c_uint};

/// The number of processes `MBSP_SHAPE` asks for at `level` (0: the top-level run, 1: the runs
/// its processes nest, ...), or 0 when the variable is unset or has no such level. A value
/// that is not a shape ends the program with one line naming it.
#[unsafe(no_mangle)]
pub extern "C" fn mbsp_shape_level(level: c_int) -> c_uint {
    match mbsp_rt::shape_from_env() {
        Ok(shape) => usize::try_from(level)
            .ok()
            .and_then(|l| shape?.get(l).copied())
            .map_or(0, |n| c_uint::try_from(n).unwrap_or(c_uint::MAX)),
        Err(e) => die(&format!("mbsp: mbsp_shape_level: {}", e.message())),
    }
}
