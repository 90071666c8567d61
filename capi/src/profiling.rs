//! Profiling (mcbsp-profiling.h): named regions of the superstep profile (`MBSP_PROFILE`), an
//! mbsp extension, and MulticoreBSP's superstep descriptions (accepted and ignored: regions
//! say more, and nest).

use crate::state::{die, with_ctx};
use std::ffi::{CStr, c_char};

/// Name the current superstep in profiles (MulticoreBSP's profile mode); ignored by mbsp (use
/// [`mbsp_region_begin`]).
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_profiling_set_description(_name: *const c_char) {}

/// Begin the region `name` of the profile in this process (`Ctx::region_begin`): supersteps
/// whose sync begins before the matching [`mbsp_region_end`] are counted for it. Regions nest.
/// Without profiling it only counts the open regions.
///
/// # Safety
/// `name` must be NULL (a misuse, reported) or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mbsp_region_begin(name: *const c_char) {
    if name.is_null() {
        die("mbsp: mbsp_region_begin: the region's name is NULL");
    }
    // SAFETY: the caller's promise: a NUL-terminated string, read here only.
    let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
    with_ctx("mbsp_region_begin", |c| {
        c.region_begin(&name);
        Ok(())
    })
}

/// End the innermost region begun by [`mbsp_region_begin`] in this process (`Ctx::region_end`;
/// with none open, a misuse: the program stops with the error).
#[unsafe(no_mangle)]
pub extern "C" fn mbsp_region_end() {
    with_ctx("mbsp_region_end", |c| c.region_end())
}
