//! Atomics and waiting primitives, switchable to `loom`'s models.
//!
//! The barrier and the superstep handshake are written against these names so that
//! `RUSTFLAGS="--cfg loom" cargo test -p mbsp --test loom --release` can model-check them.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// One step of a busy wait.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// Give the core to another thread.
#[inline]
pub(crate) fn yield_now() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}

/// Sleep until `word` may no longer hold `expected` (futex wait). Spurious returns are allowed.
#[inline]
pub(crate) fn wait_while(word: &AtomicU32, expected: u32) {
    #[cfg(loom)]
    {
        let _ = (word, expected);
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    atomic_wait::wait(word, expected);
}

/// Wake every thread sleeping in [`wait_while`] on `word`.
#[inline]
pub(crate) fn wake_all(word: &AtomicU32) {
    #[cfg(loom)]
    let _ = word;
    #[cfg(not(loom))]
    atomic_wait::wake_all(word);
}

/// Interior mutability for state that processes share under the superstep protocol.
///
/// Under `--cfg loom` this is loom's `UnsafeCell`, so the model checker sees every access and
/// reports any pair that the barrier does not order; otherwise it is `std::cell::UnsafeCell`
/// at no cost. Access goes through closures so that loom can track the span of each access.
pub(crate) struct SharedCell<T> {
    #[cfg(loom)]
    inner: loom::cell::UnsafeCell<T>,
    #[cfg(not(loom))]
    inner: std::cell::UnsafeCell<T>,
}

impl<T> SharedCell<T> {
    pub(crate) fn new(value: T) -> Self {
        SharedCell {
            #[cfg(loom)]
            inner: loom::cell::UnsafeCell::new(value),
            #[cfg(not(loom))]
            inner: std::cell::UnsafeCell::new(value),
        }
    }

    /// Read the value.
    ///
    /// # Safety
    /// No write of the value may happen during the call (the owner of the cell states when).
    #[inline]
    pub(crate) unsafe fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        #[cfg(loom)]
        {
            // SAFETY: forwarded to the caller.
            self.inner.with(|p| f(unsafe { &*p }))
        }
        #[cfg(not(loom))]
        {
            // SAFETY: forwarded to the caller.
            f(unsafe { &*self.inner.get() })
        }
    }

    /// Write the value.
    ///
    /// # Safety
    /// No other access to the value may happen during the call.
    #[inline]
    pub(crate) unsafe fn write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        #[cfg(loom)]
        {
            // SAFETY: forwarded to the caller.
            self.inner.with_mut(|p| f(unsafe { &mut *p }))
        }
        #[cfg(not(loom))]
        {
            // SAFETY: forwarded to the caller.
            f(unsafe { &mut *self.inner.get() })
        }
    }

    /// Exclusive access (no other process can reach the cell).
    #[inline]
    pub(crate) fn with_mut<R>(&mut self, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: `&mut self` excludes every other access.
        unsafe { self.write(f) }
    }
}
