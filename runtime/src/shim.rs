//! Atomics and waiting primitives, switchable to `loom`'s models.
//!
//! The barrier, the superstep handshake, the waiting code and the worker teams (and their
//! threads) are written against these names so that
//! `RUSTFLAGS="--cfg loom" cargo test -p mbsp --test loom` can model-check them.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};
#[cfg(loom)]
pub(crate) use loom::thread::{Builder as ThreadBuilder, JoinHandle};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};
#[cfg(not(loom))]
pub(crate) use std::thread::{Builder as ThreadBuilder, JoinHandle};

/// Resetting a run's shared state for the next run on the same state (exclusive access: no
/// process of either run is running).
pub(crate) trait Zero {
    /// Store zero (`false`), Relaxed, unless the atomic already holds it. A line of another
    /// process's state that is only read stays shared by both cores, where a store would
    /// take it from that process's cache and make it come back at its first touch in the
    /// next run: one line crossing between cores each way for every word reset. (The next
    /// run's processes see either value through the release that starts them.)
    fn zero(&self);
}

macro_rules! zero_for {
    ($($t:ty: $z:expr),*) => {$(
        impl Zero for $t {
            #[inline]
            fn zero(&self) {
                if self.load(Ordering::Relaxed) != $z {
                    self.store($z, Ordering::Relaxed);
                }
            }
        }
    )*};
}

zero_for!(AtomicBool: false, AtomicU32: 0, AtomicU64: 0, AtomicUsize: 0);

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
    if crate::coroutines::active() {
        // The thread's other processes come first (`coroutines.rs`).
        crate::coroutines::switch();
    } else {
        std::thread::yield_now();
    }
}

/// A futex word: threads sleep while it holds a value they saw, and are woken after it
/// changes.
///
/// Under loom a mutex and a condition variable stand in for the kernel's futex queue (the check
/// of the word and the sleep are atomic with respect to wakers, as in the kernel), so a thread
/// that sleeps past the last wake-up stays asleep and loom reports the deadlock; otherwise it is
/// `atomic-wait`'s futex.
pub(crate) struct Futex {
    word: AtomicU32,
    #[cfg(loom)]
    queue: loom::sync::Mutex<()>,
    #[cfg(loom)]
    woken: loom::sync::Condvar,
}

impl Futex {
    pub(crate) fn new() -> Self {
        Futex {
            word: AtomicU32::new(0),
            #[cfg(loom)]
            queue: loom::sync::Mutex::new(()),
            #[cfg(loom)]
            woken: loom::sync::Condvar::new(),
        }
    }

    /// The word (Acquire: pairs with [`bump`](Self::bump)).
    #[inline]
    pub(crate) fn load(&self) -> u32 {
        self.word.load(Ordering::Acquire)
    }

    /// Change the word (Release: what the bumping thread wrote before is visible to a thread
    /// that loads the new value).
    #[inline]
    pub(crate) fn bump(&self) {
        self.word.fetch_add(1, Ordering::Release);
    }

    /// Sleep until woken, unless the word no longer holds `seen`. Spurious returns are allowed.
    #[inline]
    pub(crate) fn wait(&self, seen: u32) {
        #[cfg(loom)]
        {
            let queue = self.queue.lock().unwrap();
            if self.word.load(Ordering::Relaxed) == seen {
                drop(self.woken.wait(queue).unwrap());
            }
        }
        #[cfg(not(loom))]
        atomic_wait::wait(&self.word, seen);
    }

    /// Wake every thread sleeping in [`wait`](Self::wait) (call after [`bump`](Self::bump)).
    #[inline]
    pub(crate) fn wake_all(&self) {
        #[cfg(loom)]
        {
            drop(self.queue.lock().unwrap());
            self.woken.notify_all();
        }
        #[cfg(not(loom))]
        atomic_wait::wake_all(&self.word);
    }
}

/// Interior mutability for state that processes share under the superstep protocol.
///
/// With the feature `loom` this is loom's `UnsafeCell`, so the model checker sees every access and
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
