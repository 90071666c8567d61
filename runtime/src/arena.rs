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
    words: Vec<u64>,
    len: usize,
}

impl Arena {
    /// Reserve `n` bytes at an 8-aligned offset and return the offset.
    #[inline]
    pub(crate) fn reserve(&mut self, n: usize) -> usize {
        let off = self.len;
        let end = off + align8(n);
        if end > self.words.len() * 8 {
            self.grow(end);
        }
        self.len = end;
        off
    }

    #[cold]
    fn grow(&mut self, end: usize) {
        let want = (end / 8).max(self.words.len() * 2).max(64);
        self.words.resize(want, 0);
    }

    /// Append `bytes` and return their offset.
    #[inline]
    pub(crate) fn push(&mut self, bytes: &[u8]) -> usize {
        let off = self.reserve(bytes.len());
        // SAFETY: `reserve` made `off .. off + bytes.len()` lie inside `words`.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base_mut().add(off), bytes.len())
        };
        off
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
        assert!(off + n <= self.len, "arena read out of bounds");
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

    /// The words in use.
    #[cfg(feature = "mpi")]
    pub(crate) fn words(&self) -> &[u64] {
        &self.words[..self.len / 8]
    }

    /// Append whole words.
    #[cfg(feature = "mpi")]
    pub(crate) fn extend_words(&mut self, w: &[u64]) {
        let off = self.reserve(w.len() * 8) / 8;
        self.words[off..off + w.len()].copy_from_slice(w);
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
            let off = a.push(&data);
            assert_eq!(off % 8, 0);
            offs.push((off, data));
        }
        for (off, data) in &offs {
            assert_eq!(a.bytes(*off, data.len()), &data[..]);
        }
        a.clear();
        assert_eq!(a.push(&[1, 2, 3]), 0);
    }
}
