//! [`Isolated`]: a slice on cache lines that no other heap block shares.
//!
//! A small heap block shares its cache line with whatever the allocator put beside it. When
//! one core reads the block in every superstep while another core writes its neighbour in
//! every superstep, each read is a cache-line transfer, although nothing in the block ever
//! changes (a one-byte table lookup in `put` was seen to cost more than the rest of the call
//! that way). Which blocks end up neighbours depends on the order of earlier allocations, so
//! the cost comes and goes between builds and runs of the same code (`mbsp-bench layouts`
//! finds it). The small tables the
//! processes of a run read in every sync, and the small buffers a process writes in every sync,
//! are kept in `Isolated` slices: a margin of unused elements at both ends keeps every other
//! heap block more than a cache-line pair away.

use std::ops::{Deref, DerefMut};

/// Bytes kept free at each end: two cache lines (the adjacent-line prefetcher pairs them).
const MARGIN: usize = 128;

/// A boxed slice of `len` elements with [`MARGIN`] bytes of unused elements before and after
/// it (module documentation). Empty slices allocate nothing.
pub(crate) struct Isolated<T> {
    /// The margins and the slice; `pad + len <= buf.len()` always.
    buf: Box<[T]>,
    /// Elements of margin before the slice.
    pad: usize,
    len: usize,
}

impl<T: Copy + Default> Isolated<T> {
    /// `len` copies of `value`.
    pub(crate) fn new(len: usize, value: T) -> Self {
        if len == 0 {
            return Self::default();
        }
        let pad = MARGIN.div_ceil(size_of::<T>().max(1));
        let mut buf = vec![T::default(); len + 2 * pad].into_boxed_slice();
        buf[pad..pad + len].fill(value);
        Isolated { buf, pad, len }
    }

    /// The elements of `items`.
    pub(crate) fn from_slice(items: &[T]) -> Self {
        let mut s = Self::new(items.len(), T::default());
        s.copy_from_slice(items);
        s
    }
}

impl<T> Default for Isolated<T> {
    fn default() -> Self {
        Isolated {
            buf: Box::default(),
            pad: 0,
            len: 0,
        }
    }
}

// The slice is read in every sync: it is made from the pointer without the two bounds checks
// of `&buf[pad..pad + len]`.
impl<T> Deref for Isolated<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: `pad + len <= buf.len()` (`new` makes it so and nothing changes the three),
        // so the range lies in the allocation; it borrows `self`.
        unsafe { std::slice::from_raw_parts(self.buf.as_ptr().add(self.pad), self.len) }
    }
}

impl<T> DerefMut for Isolated<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, borrowing `self` mutably.
        unsafe { std::slice::from_raw_parts_mut(self.buf.as_mut_ptr().add(self.pad), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slice holds what it was made with, and at least `MARGIN` bytes of the allocation
    /// lie before and after it.
    #[test]
    fn the_slice_keeps_its_margins() {
        for len in [1, 2, 3, 17, 1000] {
            let mut s = Isolated::new(len, 7u32);
            assert_eq!(s.len(), len);
            assert!(s.iter().all(|&x| x == 7));
            s[len - 1] = 9;
            let (start, end) = (s.buf.as_ptr() as usize, s.buf.as_ptr_range().end as usize);
            let (first, last) = (s.as_ptr() as usize, s.as_ptr_range().end as usize);
            assert!(first - start >= MARGIN && end - last >= MARGIN, "len {len}");
            let t = Isolated::from_slice(&s);
            assert_eq!(&*t, &*s);
            assert_eq!(t[len - 1], 9);
        }
        let e: Isolated<u64> = Isolated::new(0, 1);
        assert!(e.is_empty() && e.buf.is_empty());
    }
}
