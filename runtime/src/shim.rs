//! Atomics and waiting primitives, switchable to `loom`'s models.
//!
//! The barrier and the superstep handshake are written against these names so that
//! `RUSTFLAGS="--cfg loom" cargo test -p mbsp --test loom --release` can model-check them.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

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
