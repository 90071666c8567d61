//! Profiling (mcbsp-profiling.h). mbsp has no profiling mode: superstep descriptions are
//! accepted and ignored.

use std::ffi::c_char;

/// Name the current superstep in profiles (MulticoreBSP's profile mode); ignored by mbsp.
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_profiling_set_description(_name: *const c_char) {}
