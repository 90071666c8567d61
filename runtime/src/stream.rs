//! Copies larger than the caches, stored past them.
//!
//! A copy through the cache reads each destination line before it writes it (the write
//! allocates the line), and the line goes back to memory later: the destination crosses the
//! memory bus twice and the source once. Streaming stores (x86's non-temporal stores) write
//! whole lines straight to memory: one crossing each. They pay only where the destination
//! would not have stayed in the cache anyway; below that, a process that reads the data next
//! (the receiver of a put, the caller of a get) finds it in the shared cache and the cached copy
//! wins. So only copies of at least [`STREAM_FROM`] bytes stream: with their source, twice that
//! is more than the last-level cache of the machines this library targets holds for one
//! process. docs/benchmarks.md has the crossovers measured.
//!
//! Streaming stores are weakly ordered: another thread may see a later ordinary store before
//! them. [`copy`] ends with a store fence, so that the release store that publishes a copy (a
//! count, a flag, a barrier's arrival) is seen after every byte of it, as after a cached copy.

/// The length in bytes from which the runtime's copies (and [`append_all`]) store past the
/// caches: a copy of at least this much, with its source, is more than the last-level cache
/// holds for one process.
pub const STREAM_FROM: usize = 64 << 20;

/// Append `pieces` to `out` in order, as `extend_from_slice` of each would, with the stores
/// past the caches (x86-64's streaming stores) when the pieces total at least [`STREAM_FROM`]
/// bytes; elsewhere, and on other targets, plain copies. For results assembled from pieces of
/// that size (a gather's, an all-gather's): each byte then crosses the memory bus once instead
/// of twice, where a cached copy would only have evicted the rest of the cache.
///
/// ```
/// let (a, b) = (vec![1u32, 2], vec![3u32]);
/// let mut out = vec![0u32];
/// mbsp::copies::append_all(&mut out, &[&a, &b]);
/// assert_eq!(out, [0, 1, 2, 3]);
/// ```
pub fn append_all<T: bytemuck::Pod>(out: &mut Vec<T>, pieces: &[&[T]]) {
    // Pieces may repeat a slice, so their total need not fit: `reserve` then panics as
    // `extend_from_slice` would.
    let total = pieces
        .iter()
        .try_fold(0usize, |a, p| a.checked_add(p.len()))
        .unwrap_or(usize::MAX);
    out.reserve(total);
    let whole = total.saturating_mul(size_of::<T>());
    for piece in pieces {
        let at = out.len();
        // SAFETY: `reserve` made room for every piece after the first `at` elements; a piece
        // is initialized memory of `size_of_val(piece)` bytes that cannot overlap `out`'s spare
        // capacity (nothing can borrow it while `out` is borrowed mutably); any bytes are a
        // valid `T` (Pod).
        unsafe {
            let dst = out.as_mut_ptr().add(at).cast::<u8>();
            copy_part(piece.as_ptr().cast(), dst, size_of_val(*piece), whole);
            out.set_len(at + piece.len());
        }
    }
}

/// Copy `len` bytes, streaming the stores if `whole`, the length of the copy this one is part
/// of, is at least [`STREAM_FROM`].
///
/// # Safety
/// As [`std::ptr::copy_nonoverlapping`]; no alignment is required.
#[inline]
pub(crate) unsafe fn copy_part(src: *const u8, dst: *mut u8, len: usize, whole: usize) {
    // SAFETY: forwarded to the caller.
    unsafe {
        if whole >= STREAM_FROM {
            copy(src, dst, len)
        } else {
            std::ptr::copy_nonoverlapping(src, dst, len)
        }
    }
}

/// Copy `len` bytes, streaming the stores if `len` is at least [`STREAM_FROM`].
///
/// # Safety
/// As [`std::ptr::copy_nonoverlapping`]; no alignment is required.
#[inline]
pub(crate) unsafe fn copy_any(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: forwarded to the caller.
    unsafe { copy_part(src, dst, len, len) }
}

/// Copy `len` bytes that may overlap (as [`std::ptr::copy`]), streaming the stores if `len` is
/// at least [`STREAM_FROM`] and the two ranges do not overlap.
///
/// # Safety
/// As [`std::ptr::copy`]; no alignment is required.
#[inline]
pub(crate) unsafe fn copy_may_overlap(src: *const u8, dst: *mut u8, len: usize) {
    let (s, d) = (src as usize, dst as usize);
    // SAFETY: forwarded to the caller; streamed only where the ranges are apart.
    unsafe {
        if len >= STREAM_FROM && (s.abs_diff(d) >= len) {
            copy(src, dst, len)
        } else {
            std::ptr::copy(src, dst, len)
        }
    }
}

/// Copy `len` bytes with streaming stores where the target has them (then a store fence), or
/// as [`std::ptr::copy_nonoverlapping`] where it has not.
///
/// # Safety
/// As [`std::ptr::copy_nonoverlapping`]; no alignment is required.
#[inline(never)]
unsafe fn copy(src: *const u8, dst: *mut u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: forwarded to the caller.
    unsafe {
        x86::copy(src, dst, len)
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: forwarded to the caller.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, len)
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    // SSE2 is part of every x86-64 processor: no feature detection needed.
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};

    /// A cache line: streaming stores combine into whole lines, so the streamed part starts
    /// at a line boundary of the destination.
    const LINE: usize = 64;

    /// # Safety
    /// As [`std::ptr::copy_nonoverlapping`]; no alignment is required.
    pub(super) unsafe fn copy(src: *const u8, dst: *mut u8, len: usize) {
        let head = dst.align_offset(LINE).min(len);
        let lines = (len - head) / LINE;
        // SAFETY: every access below lies in the `len` bytes at `src` and at `dst` (the head,
        // `lines` whole lines after it, and the rest); the streamed stores' addresses are
        // 16-aligned (line-aligned plus multiples of 16); loads need no alignment.
        unsafe {
            std::ptr::copy_nonoverlapping(src, dst, head);
            for i in 0..lines {
                let at = head + i * LINE;
                let s = src.add(at) as *const __m128i;
                let d = dst.add(at) as *mut __m128i;
                let (a, b) = (_mm_loadu_si128(s), _mm_loadu_si128(s.add(1)));
                let (c, e) = (_mm_loadu_si128(s.add(2)), _mm_loadu_si128(s.add(3)));
                _mm_stream_si128(d, a);
                _mm_stream_si128(d.add(1), b);
                _mm_stream_si128(d.add(2), c);
                _mm_stream_si128(d.add(3), e);
            }
            let done = head + lines * LINE;
            std::ptr::copy_nonoverlapping(src.add(done), dst.add(done), len - done);
            // The streamed stores are weakly ordered: fence them before whatever publishes.
            _mm_sfence();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A streamed copy writes exactly the bytes asked, at every alignment of both ends and
    /// every length around the line size, and nothing around them.
    #[test]
    fn a_streamed_copy_writes_exactly_the_bytes_asked() {
        let src: Vec<u8> = (0..2048u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in [0, 1, 15, 16, 63, 64, 65, 127, 128, 129, 200, 511, 1000] {
            for from in [0, 1, 8, 17, 63] {
                for to in [0, 1, 16, 33, 64] {
                    let mut dst = vec![0xAAu8; 2048];
                    // SAFETY: both ranges are in bounds of distinct vectors.
                    unsafe { copy(src.as_ptr().add(from), dst.as_mut_ptr().add(to), len) };
                    let mut want = vec![0xAAu8; 2048];
                    want[to..to + len].copy_from_slice(&src[from..from + len]);
                    assert_eq!(dst, want, "len {len}, from {from}, to {to}");
                }
            }
        }
    }

    /// Appended pieces arrive whole and in order, streamed (pieces of odd lengths, one of them
    /// starting off its type's alignment in bytes) or not (a few elements).
    #[test]
    fn appended_pieces_arrive_whole_and_in_order() {
        let n = STREAM_FROM / 8 + 1001;
        let a: Vec<u64> = (0..n as u64).map(|i| i.wrapping_mul(0x9E37_79B9)).collect();
        let b: Vec<u64> = (0..1001).map(|i| !i).collect();
        let mut out = vec![7u64; 3];
        append_all(&mut out, &[&b[1..], &a, &[], &b[..5]]);
        assert_eq!(out.len(), 3 + 1000 + n + 5);
        assert_eq!(out[..3], [7; 3]);
        assert!(out[3..1003] == b[1..], "the first piece");
        assert!(out[1003..1003 + n] == a[..], "the long piece");
        assert!(out[1003 + n..] == b[..5], "the last piece");
        let mut bytes = vec![1u8];
        append_all(&mut bytes, &[&[2, 3], &[], &[4]]);
        assert_eq!(bytes, [1, 2, 3, 4]);
    }

    /// Ranges long enough to stream but overlapping are moved as `memmove` moves them, and
    /// ranges apart are copied whole.
    #[test]
    fn long_copies_that_overlap_are_moved() {
        let len = STREAM_FROM + 100;
        let pattern = |i: usize| (i % 251) as u8;
        let mut v: Vec<u8> = (0..len + 3).map(pattern).collect();
        // SAFETY: both ranges are in bounds of `v`.
        unsafe { copy_may_overlap(v.as_ptr(), v.as_mut_ptr().add(3), len) };
        assert!((0..3).all(|i| v[i] == pattern(i)));
        assert!(
            (0..len).all(|i| v[i + 3] == pattern(i)),
            "an overlapping move lost bytes"
        );
        let mut w = vec![0u8; len + 1];
        // SAFETY: distinct vectors, both long enough.
        unsafe { copy_may_overlap(v.as_ptr(), w.as_mut_ptr().add(1), len) };
        assert_eq!(w[0], 0);
        assert!(w[1..] == v[..len], "a streamed copy lost bytes");
    }
}
