//! BSMP: bsp_set_tagsize, bsp_send, bsp_hpsend, bsp_qsize, bsp_get_tag, bsp_move, bsp_hpmove.

use crate::drma::bytes;
use crate::state::with_ctx;
use std::ffi::{c_uint, c_void};

/// Set the tag size from the next superstep on; `*size` becomes the current tag size.
///
/// # Safety
/// `size` must point to a `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bsp_set_tagsize(size: *mut usize) {
    let old = with_ctx("bsp_set_tagsize", |c| {
        if size.is_null() {
            return Err(c.misuse_error(
                "set_tagsize",
                "the size pointer is NULL (it must point to the new tag size)",
            ));
        }
        // SAFETY: the caller's promise.
        c.set_tagsize(unsafe { *size })
    });
    // SAFETY: as above.
    unsafe { *size = old };
}

/// Check a payload size against the largest message before its bytes are viewed.
fn check_payload(c: &mbsp_rt::Ctx, op: &'static str, size: usize) -> mbsp_rt::Result<()> {
    if size > mbsp_rt::MAX_MESSAGE {
        return Err(c.misuse_error(
            op,
            format!(
                "a payload of {size} bytes exceeds the largest message, {} bytes",
                mbsp_rt::MAX_MESSAGE
            ),
        ));
    }
    Ok(())
}

/// Send `tag` (tag-size bytes) and `size` bytes of `payload` to `pid`.
///
/// # Safety
/// `tag` and `payload` must be readable for the tag size and `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bsp_send(
    pid: c_uint,
    tag: *const c_void,
    payload: *const c_void,
    size: usize,
) {
    with_ctx("bsp_send", |c| {
        // SAFETY: the caller's promise.
        let t = unsafe { bytes(c, "send", "the tag", tag, c.tagsize())? };
        check_payload(c, "send", size)?;
        // SAFETY: as above.
        let p = unsafe { bytes(c, "send", "the payload", payload, size)? };
        c.send(pid as usize, t, p)
    })
}

/// Send without buffering the payload now (it is read at the sync).
///
/// # Safety
/// As `bsp_send`; the payload must not change until the sync.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bsp_hpsend(
    pid: c_uint,
    tag: *const c_void,
    payload: *const c_void,
    size: usize,
) {
    with_ctx("bsp_hpsend", |c| {
        // SAFETY: the caller's promise.
        unsafe {
            let t = bytes(c, "hpsend", "the tag", tag, c.tagsize())?;
            check_payload(c, "hpsend", size)?;
            let p = bytes(c, "hpsend", "the payload", payload, size)?;
            c.hpsend(pid as usize, t, p)
        }
    })
}

/// Messages in the queue and, if `accumulated_size` is not NULL, their payload bytes.
///
/// # Safety
/// `packets` must be writable; `accumulated_size` null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bsp_qsize(packets: *mut c_uint, accumulated_size: *mut usize) {
    let q = with_ctx("bsp_qsize", |c| {
        if packets.is_null() {
            return Err(c.misuse_error("qsize", "the packets pointer is NULL"));
        }
        let q = c.qsize()?;
        if c_uint::try_from(q.messages).is_err() {
            return Err(c.misuse_error(
                "qsize",
                format!(
                    "the queue holds {} messages, more than an unsigned int can count",
                    q.messages
                ),
            ));
        }
        Ok(q)
    });
    // SAFETY: the caller's promise.
    unsafe {
        *packets = q.messages as c_uint;
        if !accumulated_size.is_null() {
            *accumulated_size = q.bytes;
        }
    }
}

/// The first message's payload size in `*status` (SIZE_MAX if the queue is empty) and its tag
/// in `tag`.
///
/// # Safety
/// `status` writable; `tag` writable for the tag size of the previous superstep.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bsp_get_tag(status: *mut usize, tag: *mut c_void) {
    with_ctx("bsp_get_tag", |c| {
        if status.is_null() {
            return Err(c.misuse_error("get_tag", "the status pointer is NULL"));
        }
        match c.get_tag()? {
            // SAFETY: the caller's promise.
            Some((len, t)) => unsafe {
                if !t.is_empty() {
                    if tag.is_null() {
                        return Err(c.misuse_error(
                            "get_tag",
                            format!("the tag buffer is NULL but the tag has {} bytes", t.len()),
                        ));
                    }
                    std::ptr::copy_nonoverlapping(t.as_ptr(), tag as *mut u8, t.len());
                }
                *status = len;
            },
            // SAFETY: as above.
            None => unsafe { *status = usize::MAX },
        }
        Ok(())
    })
}

/// Copy the first message's payload (at most `max_copy_size` bytes) into `payload` and remove
/// it from the queue.
///
/// # Safety
/// `payload` writable for `max_copy_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bsp_move(payload: *mut c_void, max_copy_size: usize) {
    with_ctx("bsp_move", |c| {
        // Only the bytes that will be copied are viewed: max_copy_size may be any bound
        // (SIZE_MAX: "whatever the message has").
        let n = match c.get_tag()? {
            Some((len, _)) => len.min(max_copy_size),
            None => 0,
        };
        let buf: &mut [u8] = if n == 0 {
            &mut []
        } else if payload.is_null() {
            return Err(c.misuse_error(
                "move",
                format!("the payload buffer is NULL but max_copy_size is {max_copy_size}"),
            ));
        } else {
            // SAFETY: the caller's promise (`n` <= max_copy_size), and `n` is the length of a
            // payload in memory, so the area can exist.
            unsafe { std::slice::from_raw_parts_mut(payload as *mut u8, n) }
        };
        match c.move_message(buf)? {
            Some(_) => Ok(()),
            None => Err(c.misuse_error("move", "the message queue is empty")),
        }
    })
}

/// Remove the first message and point `*tag` and `*payload` at it in place (valid until the
/// next sync); returns the payload size, or SIZE_MAX if the queue is empty.
///
/// # Safety
/// `tag` and `payload` must be writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bsp_hpmove(tag: *mut *mut c_void, payload: *mut *mut c_void) -> usize {
    with_ctx("bsp_hpmove", |c| {
        if tag.is_null() || payload.is_null() {
            let which = if tag.is_null() { "tag" } else { "payload" };
            return Err(c.misuse_error(
                "hpmove",
                format!("the {which} pointer (where to store the message's address) is NULL"),
            ));
        }
        Ok(match c.hpmove()? {
            // SAFETY: the caller's promise.
            Some(m) => unsafe {
                *tag = m.tag.as_ptr() as *mut c_void;
                *payload = m.payload.as_ptr() as *mut c_void;
                m.payload.len()
            },
            None => usize::MAX,
        })
    })
}
