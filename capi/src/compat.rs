//! The original BSPlib signatures (int sizes, -1 for "empty"), selected in bsp.h by
//! `MCBSP_COMPATIBILITY_MODE`, which renames e.g. `bsp_put` to `mcbsp_compat_put`.

use crate::state::with_ctx;
use std::ffi::{c_int, c_void};

/// A size from a BSPlib-era caller: negative values are misuse.
fn size(op: &'static str, what: &str, v: c_int) -> usize {
    if v < 0 {
        with_ctx(op, |c| -> mbsp_rt::Result<()> {
            Err(c.misuse_error(op, format!("{what} is {v}, but must not be negative")))
        });
    }
    v as usize
}

/// A count or size for a BSPlib-era caller: one that does not fit an int is misuse of `op`
/// (the original interface cannot report it).
fn report(op: &'static str, what: &str, v: usize) -> c_int {
    match c_int::try_from(v) {
        Ok(v) => v,
        Err(_) => with_ctx(op, |c| {
            Err(c.misuse_error(
                op,
                format!(
                    "{what} is {v}, more than an int can hold (BSPlib compatibility mode; the \
                     MulticoreBSP interface reports it as a size_t)"
                ),
            ))
        }),
    }
}

/// BSPlib `bsp_push_reg(const void *, int)`.
///
/// # Safety
/// As `bsp_push_reg`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcbsp_compat_push_reg(ident: *const c_void, n: c_int) {
    let n = size("push_reg", "the size", n);
    // SAFETY: forwarded.
    unsafe { crate::drma::bsp_push_reg(ident, n) }
}

macro_rules! put_like {
    ($name:ident, $op:literal, $target:path) => {
        /// BSPlib signature with `int` pid, offset and size.
        ///
        /// # Safety
        /// As the MulticoreBSP primitive.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            pid: c_int,
            src: *const c_void,
            dst: *const c_void,
            offset: c_int,
            n: c_int,
        ) {
            let (pid, offset, n) = (
                size($op, "the pid", pid),
                size($op, "the offset", offset),
                size($op, "the size", n),
            );
            // SAFETY: forwarded.
            unsafe { $target(pid as u32, src, dst, offset, n) }
        }
    };
}
put_like!(mcbsp_compat_put, "put", crate::drma::bsp_put);
put_like!(mcbsp_compat_hpput, "hpput", crate::drma::bsp_hpput);

macro_rules! get_like {
    ($name:ident, $op:literal, $target:path) => {
        /// BSPlib signature with `int` pid, offset and size.
        ///
        /// # Safety
        /// As the MulticoreBSP primitive.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            pid: c_int,
            src: *const c_void,
            offset: c_int,
            dst: *mut c_void,
            n: c_int,
        ) {
            let (pid, offset, n) = (
                size($op, "the pid", pid),
                size($op, "the offset", offset),
                size($op, "the size", n),
            );
            // SAFETY: forwarded.
            unsafe { $target(pid as u32, src, offset, dst, n) }
        }
    };
}
get_like!(mcbsp_compat_get, "get", crate::drma::bsp_get);
get_like!(mcbsp_compat_hpget, "hpget", crate::drma::bsp_hpget);
get_like!(
    mcbsp_compat_direct_get,
    "direct_get",
    crate::drma::bsp_direct_get
);

/// BSPlib `bsp_set_tagsize(int *)`.
///
/// # Safety
/// `tag_nbytes` must point to an int.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcbsp_compat_set_tagsize(tag_nbytes: *mut c_int) {
    if tag_nbytes.is_null() {
        // SAFETY: reports the NULL pointer as a misuse and ends the program.
        unsafe { crate::bsmp::bsp_set_tagsize(std::ptr::null_mut()) };
    }
    // SAFETY: the caller's promise.
    let mut s = size("set_tagsize", "the tag size", unsafe { *tag_nbytes });
    // SAFETY: forwarded.
    unsafe {
        crate::bsmp::bsp_set_tagsize(&mut s);
        *tag_nbytes = s as c_int;
    }
}

macro_rules! send_like {
    ($name:ident, $op:literal, $target:path) => {
        /// BSPlib signature with `int` pid and size.
        ///
        /// # Safety
        /// As the MulticoreBSP primitive.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            pid: c_int,
            tag: *const c_void,
            payload: *const c_void,
            n: c_int,
        ) {
            let (pid, n) = (size($op, "the pid", pid), size($op, "the payload size", n));
            // SAFETY: forwarded.
            unsafe { $target(pid as u32, tag, payload, n) }
        }
    };
}
send_like!(mcbsp_compat_send, "send", crate::bsmp::bsp_send);
send_like!(mcbsp_compat_hpsend, "hpsend", crate::bsmp::bsp_hpsend);

/// BSPlib `bsp_qsize(int *, int *)`.
///
/// # Safety
/// `nmessages` writable; `accum_nbytes` null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcbsp_compat_qsize(nmessages: *mut c_int, accum_nbytes: *mut c_int) {
    let (mut m, mut b) = (0u32, 0usize);
    // SAFETY: forwarded; then the caller's promise.
    unsafe {
        let m_ptr = if nmessages.is_null() {
            std::ptr::null_mut() // reported as a misuse
        } else {
            &mut m
        };
        crate::bsmp::bsp_qsize(m_ptr, &mut b);
        *nmessages = report("qsize", "the number of messages", m as usize);
        if !accum_nbytes.is_null() {
            *accum_nbytes = report("qsize", "the total payload size", b);
        }
    }
}

/// BSPlib `bsp_get_tag(int *status, void *tag)`: status -1 when the queue is empty.
///
/// # Safety
/// As `bsp_get_tag`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcbsp_compat_get_tag(status: *mut c_int, tag: *mut c_void) {
    let mut s = 0usize;
    // SAFETY: forwarded; then the caller's promise.
    unsafe {
        let s_ptr = if status.is_null() {
            std::ptr::null_mut() // reported as a misuse
        } else {
            &mut s
        };
        crate::bsmp::bsp_get_tag(s_ptr, tag);
        *status = if s == usize::MAX {
            -1
        } else {
            report("get_tag", "the payload size", s)
        };
    }
}

/// BSPlib `bsp_move(void *, int)`.
///
/// # Safety
/// As `bsp_move`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcbsp_compat_move(payload: *mut c_void, reception_nbytes: c_int) {
    let n = size("move", "the reception size", reception_nbytes);
    // SAFETY: forwarded.
    unsafe { crate::bsmp::bsp_move(payload, n) }
}

/// BSPlib `int bsp_hpmove(void **, void **)`: -1 when the queue is empty.
///
/// # Safety
/// As `bsp_hpmove`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcbsp_compat_hpmove(
    tag: *mut *mut c_void,
    payload: *mut *mut c_void,
) -> c_int {
    // SAFETY: forwarded.
    match unsafe { crate::bsmp::bsp_hpmove(tag, payload) } {
        usize::MAX => -1,
        n => report("hpmove", "the payload size", n),
    }
}

/// BSPlib `int bsp_nprocs(void)`.
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_compat_nprocs() -> c_int {
    crate::spmd::bsp_nprocs() as c_int
}

/// BSPlib `int bsp_pid(void)`.
#[unsafe(no_mangle)]
pub extern "C" fn mcbsp_compat_pid() -> c_int {
    crate::spmd::bsp_pid() as c_int
}
