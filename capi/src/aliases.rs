//! MulticoreBSP's `mcbsp_*` names of the primitives, with its signatures (`size_t` sizes,
//! `unsigned int` pids) in both modes of bsp.h. `mcbsp_init`, `mcbsp_begin` and `mcbsp_end` are
//! in spmd.rs; `mcbsp_abort` and `mcbsp_vabort` are inline in bsp.h.

use crate::{bsmp, drma, spmd};
use std::ffi::{c_uint, c_void};

/// `bsp_nprocs`.
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_nprocs() -> c_uint {
    spmd::bsp_nprocs()
}

/// `bsp_pid`.
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_pid() -> c_uint {
    spmd::bsp_pid()
}

/// `bsp_time`.
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_time() -> f64 {
    spmd::bsp_time()
}

/// `bsp_sync`.
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_sync() {
    spmd::bsp_sync()
}

/// `bsp_push_reg`.
///
/// # Safety
/// As `bsp_push_reg`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcbsp_push_reg(ident: *const c_void, size: usize) {
    // SAFETY: forwarded.
    unsafe { drma::bsp_push_reg(ident, size) }
}

/// `bsp_pop_reg`.
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_pop_reg(ident: *const c_void) {
    drma::bsp_pop_reg(ident)
}

macro_rules! put_get {
    ($(#[$doc:meta])* $name:ident => $target:path, ($($arg:ident: $ty:ty),*)) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As the `bsp_` primitive.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) {
            // SAFETY: forwarded.
            unsafe { $target($($arg),*) }
        }
    };
}

put_get!(
    /// `bsp_put`.
    mcbsp_put => drma::bsp_put,
    (pid: c_uint, src: *const c_void, dst: *const c_void, offset: usize, size: usize)
);
put_get!(
    /// `bsp_hpput`.
    mcbsp_hpput => drma::bsp_hpput,
    (pid: c_uint, src: *const c_void, dst: *const c_void, offset: usize, size: usize)
);
put_get!(
    /// `bsp_get`.
    mcbsp_get => drma::bsp_get,
    (pid: c_uint, src: *const c_void, offset: usize, dst: *mut c_void, size: usize)
);
put_get!(
    /// `bsp_hpget`.
    mcbsp_hpget => drma::bsp_hpget,
    (pid: c_uint, src: *const c_void, offset: usize, dst: *mut c_void, size: usize)
);
put_get!(
    /// `bsp_direct_get`.
    mcbsp_direct_get => drma::bsp_direct_get,
    (pid: c_uint, src: *const c_void, offset: usize, dst: *mut c_void, size: usize)
);
put_get!(
    /// `bsp_set_tagsize`.
    mcbsp_set_tagsize => bsmp::bsp_set_tagsize,
    (size: *mut usize)
);
put_get!(
    /// `bsp_send`.
    mcbsp_send => bsmp::bsp_send,
    (pid: c_uint, tag: *const c_void, payload: *const c_void, size: usize)
);
put_get!(
    /// `bsp_hpsend`.
    mcbsp_hpsend => bsmp::bsp_hpsend,
    (pid: c_uint, tag: *const c_void, payload: *const c_void, size: usize)
);
put_get!(
    /// `bsp_qsize`.
    mcbsp_qsize => bsmp::bsp_qsize,
    (packets: *mut c_uint, accumulated_size: *mut usize)
);
put_get!(
    /// `bsp_get_tag`.
    mcbsp_get_tag => bsmp::bsp_get_tag,
    (status: *mut usize, tag: *mut c_void)
);
put_get!(
    /// `bsp_move`.
    mcbsp_move => bsmp::bsp_move,
    (payload: *mut c_void, max_copy_size: usize)
);

/// `bsp_hpmove`.
///
/// # Safety
/// As `bsp_hpmove`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcbsp_hpmove(tag: *mut *mut c_void, payload: *mut *mut c_void) -> usize {
    // SAFETY: forwarded.
    unsafe { bsmp::bsp_hpmove(tag, payload) }
}
