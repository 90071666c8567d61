//! This program's allocator: the system's, counting the allocations each thread makes (for the
//! steady-state figure of `mbsp-bench owned`). The count is a thread-local integer, so every
//! other benchmark pays one increment per allocation and no shared cache line.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static MADE: Cell<u64> = const { Cell::new(0) };
}

/// Allocations (and reallocations) the calling thread has made so far.
pub fn allocations() -> u64 {
    MADE.with(Cell::get)
}

fn count() {
    // Not during the thread's teardown, when its locals are gone (nothing is counted then).
    let _ = MADE.try_with(|n| n.set(n.get() + 1));
}

struct Counting;

// SAFETY: every call is forwarded to the system allocator with its arguments; the count
// allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;
