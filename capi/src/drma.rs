//! DRMA: bsp_push_reg, bsp_pop_reg, bsp_put, bsp_get, bsp_hpput, bsp_hpget, bsp_direct_get.

use crate::state::with_ctx;
use std::ffi::{c_uint, c_void};

/// `len` bytes at `p` as a slice (empty when `len` is 0, whatever `p` is); a NULL `p` with
/// `len > 0`, or an area no object can have (more than `isize::MAX` bytes, or running past the
/// end of the address space: a size that wrapped around, say), is reported as misuse of `op`
/// (naming `what`) before any slice is made.
///
/// # Safety
/// When `len > 0` and `p` is not null, `p` must be valid for reading `len` bytes for the
/// returned lifetime.
pub(crate) unsafe fn bytes<'a>(
    c: &mbsp_rt::Ctx,
    op: &'static str,
    what: &str,
    p: *const c_void,
    len: usize,
) -> mbsp_rt::Result<&'a [u8]> {
    if len == 0 {
        Ok(&[])
    } else if p.is_null() {
        Err(c.misuse_error(
            op,
            format!("{what} is NULL but {len} bytes were to be read from it"),
        ))
    } else if len > isize::MAX as usize || (p as usize).checked_add(len).is_none() {
        Err(c.misuse_error(
            op,
            format!(
                "{what} ({len} bytes at {p:p}) is larger than any object can be: at most \
                 isize::MAX = {} bytes, ending inside the address space",
                isize::MAX
            ),
        ))
    } else {
        // SAFETY: the caller's promise.
        Ok(unsafe { std::slice::from_raw_parts(p as *const u8, len) })
    }
}

/// Register `size` bytes at `ident` (NULL: take part without memory) from the next superstep.
///
/// # Safety
/// The memory must stay allocated until the registration is popped and a sync has passed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bsp_push_reg(ident: *const c_void, size: usize) {
    // SAFETY: the caller's promise.
    with_ctx("bsp_push_reg", |c| unsafe {
        c.push_reg_raw(ident as *mut u8, size)
    })
}

/// Remove the newest registration of `ident` at the next sync.
#[unsafe(no_mangle)]
pub extern "C" fn bsp_pop_reg(ident: *const c_void) {
    with_ctx("bsp_pop_reg", |c| c.pop_reg_raw(ident as *const u8))
}

/// Buffered put: `size` bytes from `src` into `pid`'s area registered as `dst`, at `offset`.
///
/// # Safety
/// `src` must be readable for `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bsp_put(
    pid: c_uint,
    src: *const c_void,
    dst: *const c_void,
    offset: usize,
    size: usize,
) {
    with_ctx("bsp_put", |c| {
        // SAFETY: the caller's promise.
        let data = unsafe { bytes(c, "put", "the source", src, size)? };
        c.put_raw(pid as usize, data, dst as *const u8, offset)
    })
}

/// Unbuffered put (performed at once).
///
/// # Safety
/// As `bsp_put`; the destination must not be touched by anything else in the superstep.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bsp_hpput(
    pid: c_uint,
    src: *const c_void,
    dst: *const c_void,
    offset: usize,
    size: usize,
) {
    // SAFETY: the caller's promise.
    with_ctx("bsp_hpput", |c| unsafe {
        bytes(c, "hpput", "the source", src, size)?;
        c.hpput_raw(
            pid as usize,
            src as *const u8,
            dst as *const u8,
            offset,
            size,
        )
    })
}

/// Buffered get: `size` bytes from `pid`'s area registered as `src`, at `offset`, into `dst`
/// at the next sync.
///
/// # Safety
/// `dst` must be writable for `size` bytes until the end of the next sync.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bsp_get(
    pid: c_uint,
    src: *const c_void,
    offset: usize,
    dst: *mut c_void,
    size: usize,
) {
    // SAFETY: the caller's promise.
    with_ctx("bsp_get", |c| unsafe {
        bytes(c, "get", "the destination", dst, size)?;
        c.get_raw(pid as usize, src as *const u8, offset, dst as *mut u8, size)
    })
}

/// Unbuffered get (performed at once).
///
/// # Safety
/// As `bsp_get`; the source must not change during the superstep.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bsp_hpget(
    pid: c_uint,
    src: *const c_void,
    offset: usize,
    dst: *mut c_void,
    size: usize,
) {
    // SAFETY: the caller's promise.
    with_ctx("bsp_hpget", |c| unsafe {
        bytes(c, "hpget", "the destination", dst, size)?;
        c.hpget_raw(pid as usize, src as *const u8, offset, dst as *mut u8, size)
    })
}

/// Blocking immediate get (MulticoreBSP).
///
/// # Safety
/// As `bsp_hpget`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bsp_direct_get(
    pid: c_uint,
    src: *const c_void,
    offset: usize,
    dst: *mut c_void,
    size: usize,
) {
    // SAFETY: the caller's promise.
    with_ctx("bsp_direct_get", |c| unsafe {
        bytes(c, "direct_get", "the destination", dst, size)?;
        c.direct_get_raw(pid as usize, src as *const u8, offset, dst as *mut u8, size)
    })
}
