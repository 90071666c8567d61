//! An append-only byte buffer with 8-byte aligned entries, reused from superstep to superstep.
//!
//! Backed by `Vec<u64>` so that every entry starts 8-byte aligned (message payloads can then be
//! viewed as `&[f64]`, `&[u64]`... in place). The backing vector only grows, so after the first
//! supersteps no allocation or page fault happens on the put/send paths.

/// Round `n` up to a multiple of 8.
#[inline]
pub(crate) const fn align8(n: usize) -> usize {
    (n + 7) & !7
}

#[derive(Default)]
pub(crate) struct Arena {
    pub(crate) words: Vec<u64>,
    pub(crate) len: usize,
}

impl Arena {
    /// Reserve `n` bytes at an 8-aligned offset and return the offset.
    ///
    /// # Panics
    /// If the arena cannot grow (callers reserve what callers asked for with
    /// [`try_reserve`](Arena::try_reserve) or [`try_room`](Arena::try_room) first).
    #[inline]
    pub(crate) fn reserve(&mut self, n: usize) -> usize {
        match self.try_reserve(n) {
            Some(off) => off,
            None => Self::no_room(n),
        }
    }

    #[cold]
    #[inline(never)]
    fn no_room(n: usize) -> ! {
        panic!("mbsp: could not allocate {n} bytes of an internal buffer")
    }

    /// [`reserve`](Arena::reserve), or `None` if the arena would exceed the largest allocation
    /// or the memory for it cannot be allocated (nothing changes then).
    #[inline]
    pub(crate) fn try_reserve(&mut self, n: usize) -> Option<usize> {
        let off = self.len;
        let end = off.checked_add(n.checked_add(7)? & !7)?;
        if end > self.words.len() * 8 {
            self.extend_to(end)?;
        }
        self.len = end;
        Some(off)
    }

    /// Reserve an entry of `head` bytes (a multiple of 8) and then `len` bytes placed after a
    /// pad of its own: `place` gets the address the `len` bytes would have without a pad and
    /// returns the pad (a multiple of 8, below `max_pad`). The arena grows first, with room for
    /// the largest pad, so the address `place` sees is where the bytes are written; what the
    /// pad leaves unused is given back. Returns the entry's offset and the pad; `None` as for
    /// [`try_reserve`](Arena::try_reserve).
    pub(crate) fn try_reserve_placed(
        &mut self,
        head: usize,
        len: usize,
        max_pad: usize,
        place: impl FnOnce(u64) -> u64,
    ) -> Option<(usize, usize)> {
        debug_assert!(head % 8 == 0 && max_pad % 8 == 0);
        let off = self.try_reserve(head.checked_add(max_pad)?.checked_add(len)?)?;
        let pad = place(self.base() as u64 + (off + head) as u64) as usize;
        debug_assert!(pad < max_pad && pad % 8 == 0, "a pad of {pad} bytes");
        self.len = off + head + pad + align8(len);
        Some((off, pad))
    }

    /// Make sure that `n` more bytes (in entries of any sizes, each rounded up to 8) can be
    /// reserved without allocating; `None` if the memory cannot be allocated. The memory is
    /// only allocated here, not touched: it is zeroed as entries come to use it.
    pub(crate) fn try_room(&mut self, n: usize) -> Option<()> {
        let need = self.len.checked_add(n)?.div_ceil(8);
        if need > self.words.capacity() {
            self.allocate(need)?;
        }
        Some(())
    }

    /// Make the first `end` bytes usable (zeroed, so that every word of an entry is
    /// initialised, padding included), doubling the zeroed part, within what is allocated.
    #[cold]
    fn extend_to(&mut self, end: usize) -> Option<()> {
        let need = end.div_ceil(8);
        if need > self.words.capacity() {
            self.allocate(need)?;
        }
        let want = need.max(self.words.len() * 2).max(64);
        self.words.resize(want.min(self.words.capacity()), 0);
        Some(())
    }

    /// Allocate room for at least `need` words: twice the present room when memory allows,
    /// else exactly `need`.
    #[cold]
    fn allocate(&mut self, need: usize) -> Option<()> {
        let have = self.words.len();
        let want = need.max(self.words.capacity() * 2).max(64);
        if self.words.try_reserve_exact(want - have).is_err() {
            self.words.try_reserve_exact(need - have).ok()?;
        }
        Some(())
    }

    /// Copy `n` bytes from `src` into the arena and return their offset.
    ///
    /// # Safety
    /// `src` must be valid for reading `n` bytes.
    #[inline]
    pub(crate) unsafe fn push_raw(&mut self, src: *const u8, n: usize) -> usize {
        let off = self.reserve(n);
        // SAFETY: caller guarantees `src`; `reserve` guarantees the destination.
        unsafe { std::ptr::copy_nonoverlapping(src, self.base_mut().add(off), n) };
        off
    }

    #[inline]
    pub(crate) fn base(&self) -> *const u8 {
        self.words.as_ptr() as *const u8
    }

    #[inline]
    pub(crate) fn base_mut(&mut self) -> *mut u8 {
        self.words.as_mut_ptr() as *mut u8
    }

    /// The bytes at `off .. off + n`.
    #[inline]
    pub(crate) fn bytes(&self, off: usize, n: usize) -> &[u8] {
        assert!(
            off.checked_add(n).is_some_and(|end| end <= self.len),
            "arena read out of bounds"
        );
        // SAFETY: bounds checked above; the words are initialised.
        unsafe { std::slice::from_raw_parts(self.base().add(off), n) }
    }

    /// Bytes in use (always a multiple of 8).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_aligned_and_survive_growth() {
        let mut a = Arena::default();
        let mut offs = Vec::new();
        for i in 0..1000usize {
            let data: Vec<u8> = (0..i % 37).map(|j| (i * 31 + j) as u8).collect();
            // SAFETY: `data` is a valid slice.
            let off = unsafe { a.push_raw(data.as_ptr(), data.len()) };
            assert_eq!(off % 8, 0);
            offs.push((off, data));
        }
        for (off, data) in &offs {
            assert_eq!(a.bytes(*off, data.len()), &data[..]);
        }
        a.clear();
        // SAFETY: as above.
        assert_eq!(unsafe { a.push_raw([1u8, 2, 3].as_ptr(), 3) }, 0);
    }

    /// Sizes that overflow, or that no machine can allocate, are refused without a change.
    #[test]
    fn impossible_sizes_are_refused() {
        let mut a = Arena::default();
        assert_eq!(a.try_reserve(24), Some(0));
        for n in [usize::MAX, usize::MAX - 7, isize::MAX as usize, 1 << 62] {
            assert_eq!(a.try_reserve(n), None, "{n}");
            assert_eq!(a.try_room(n), None, "{n}");
            assert_eq!(a.len(), 24);
        }
        assert_eq!(a.try_reserve(8), Some(24));
    }

    /// Room made with `try_room` is used without allocating again.
    #[test]
    fn room_is_kept_for_later_entries() {
        let mut a = Arena::default();
        a.try_room(1 << 20).unwrap();
        let base = a.base();
        for _ in 0..1000 {
            a.try_reserve(1000).unwrap();
        }
        assert_eq!(a.base(), base, "no reallocation within the room");
    }
}
