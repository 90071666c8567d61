//! A slice written (and read) by several threads at disjoint places: the nested processes of a Multi-BSP
//! level writing into their parent's arrays (the FFT's packs and outputs, the hierarchical
//! SpMV's results). The disjointness is promised once per write by the caller.

/// A slice written by several threads at disjoint places: the raw pointer and length, with
/// the disjointness promised at each write.
pub(crate) struct Shared<'a, T> {
    ptr: *mut T,
    len: usize,
    _borrow: std::marker::PhantomData<&'a mut [T]>,
}

// SAFETY: the wrapper only hands out writes whose callers promise disjointness; sending or
// sharing it is like sharing disjoint `&mut` parts of the slice (`T: Send`).
unsafe impl<T: Send> Send for Shared<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Shared<'_, T> {}

impl<'a, T> Shared<'a, T> {
    pub(crate) fn new(s: &'a mut [T]) -> Self {
        Shared {
            ptr: s.as_mut_ptr(),
            len: s.len(),
            _borrow: std::marker::PhantomData,
        }
    }

    /// Where the slice is (an identity: never dereferenced through this).
    pub(crate) fn addr(&self) -> usize {
        self.ptr as usize
    }

    /// Write entry `i`.
    ///
    /// # Safety
    /// No other thread reads or writes entry `i` meanwhile.
    pub(crate) unsafe fn write(&self, i: usize, v: T) {
        assert!(i < self.len, "Shared::write: {i} >= {}", self.len);
        // SAFETY: in bounds; exclusive by the caller's promise.
        unsafe { self.ptr.add(i).write(v) }
    }

    /// Write entry `i` without a bounds check, for the hottest loops.
    ///
    /// # Safety
    /// `i` is below the slice's length, and no other thread reads or writes entry `i`
    /// meanwhile.
    pub(crate) unsafe fn write_unchecked(&self, i: usize, v: T) {
        debug_assert!(i < self.len, "Shared::write_unchecked: {i} >= {}", self.len);
        // SAFETY: in bounds and exclusive by the caller's promise.
        unsafe { self.ptr.add(i).write(v) }
    }

    /// Read entry `i`.
    ///
    /// # Safety
    /// No other thread writes entry `i` meanwhile.
    pub(crate) unsafe fn read(&self, i: usize) -> T
    where
        T: Copy,
    {
        assert!(i < self.len, "Shared::read: {i} >= {}", self.len);
        // SAFETY: in bounds; not written meanwhile by the caller's promise.
        unsafe { self.ptr.add(i).read() }
    }

    /// Entries `r`, to read.
    ///
    /// # Safety
    /// No thread writes entries `r` while the slice lives.
    pub(crate) unsafe fn slice(&self, r: std::ops::Range<usize>) -> &[T]
    where
        // Several threads may hold the same entries to read.
        T: Sync,
    {
        assert!(r.start <= r.end && r.end <= self.len);
        // SAFETY: in bounds; not written meanwhile by the caller's promise.
        unsafe { std::slice::from_raw_parts(self.ptr.add(r.start), r.len()) }
    }

    /// Entries `r`, to write.
    ///
    /// # Safety
    /// No other thread touches entries `r` while the slice lives.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn slice_mut(&self, r: std::ops::Range<usize>) -> &mut [T] {
        assert!(r.start <= r.end && r.end <= self.len);
        // SAFETY: in bounds; exclusive by the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(r.start), r.len()) }
    }
}
