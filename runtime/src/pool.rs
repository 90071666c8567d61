//! The buffers of owned messages (`owned.rs`): the [`Handle`] an outbox keeps for a buffer
//! handed over, until its receiver takes it or it is freed, and each process's [`Pool`] of
//! buffers for reuse. Below the outboxes and the context, which hold them.

use bytemuck::Pod;
use std::any::{Any, TypeId};
use std::collections::TryReserveError;
use std::sync::atomic::{AtomicPtr, Ordering};

/// What an owned message's receiver must know of its element type: to check it, to name it,
/// and to free a buffer of it.
#[derive(Clone, Copy)]
pub(crate) struct Elem {
    pub(crate) id: TypeId,
    pub(crate) size: usize,
    pub(crate) name: fn() -> &'static str,
    /// Rebuild the `Vec` from (pointer, length, capacity) and drop it.
    free: unsafe fn(*mut u8, usize, usize),
}

impl Elem {
    pub(crate) fn of<T: Pod>() -> Elem {
        Elem {
            id: TypeId::of::<T>(),
            size: size_of::<T>(),
            name: std::any::type_name::<T>,
            free: free_vec::<T>,
        }
    }
}

/// # Safety
/// `(ptr, len, cap)` are the parts of a `Vec<T>` that nothing else owns.
unsafe fn free_vec<T>(ptr: *mut u8, len: usize, cap: usize) {
    // SAFETY: forwarded to the caller.
    drop(unsafe { Vec::from_raw_parts(ptr.cast::<T>(), len, cap) });
}

/// The buffer of an owned message in an outbox: the parts of a `Vec` whose owner let go of it,
/// until a receiver takes them or they are freed (module docs). Empty (a null pointer: a `Vec`
/// never has one) once taken or freed.
pub(crate) struct Handle {
    ptr: AtomicPtr<u8>,
    pub(crate) len: usize,
    pub(crate) cap: usize,
    pub(crate) elem: Elem,
}

impl Handle {
    /// The handle of `v`'s buffer, which the caller gives up (`v` must not be dropped: the
    /// handle frees it, or a receiver takes it).
    pub(crate) fn of<T: Pod>(v: &mut std::mem::ManuallyDrop<Vec<T>>) -> Handle {
        Handle {
            ptr: AtomicPtr::new(v.as_mut_ptr().cast()),
            len: v.len(),
            cap: v.capacity(),
            elem: Elem::of::<T>(),
        }
    }

    /// Take the buffer: its pointer, unless it was taken or freed already.
    pub(crate) fn take(&self) -> Option<*mut u8> {
        let p = self.ptr.swap(std::ptr::null_mut(), Ordering::Relaxed);
        (!p.is_null()).then_some(p)
    }

    /// Free the buffer unless someone took it.
    pub(crate) fn free(&self) {
        if let Some(p) = self.take() {
            // SAFETY: the parts of the `Vec` given to `send_owned`, which nobody else owns now
            // that this handle is empty.
            unsafe { (self.elem.free)(p, self.len, self.cap) };
        }
    }

    /// The buffer's first `bytes` bytes (its payload length).
    ///
    /// # Panics
    /// If the buffer was taken: the queue never reads a message it has moved out.
    pub(crate) fn bytes(&self, bytes: usize) -> &[u8] {
        let p = self.ptr.load(Ordering::Relaxed);
        assert!(
            !p.is_null(),
            "mbsp: an owned message read after it was moved out"
        );
        debug_assert_eq!(bytes, self.len * self.elem.size);
        // SAFETY: the initialised elements of the `Vec`, which stays allocated and unchanged
        // until the handle is taken (by the queue, which then never reads it again) or freed
        // (after the receiver's borrows of the queue end: at its sync, or later).
        unsafe { std::slice::from_raw_parts(p, bytes) }
    }
}

/// A process's pool of buffers, a stack of `Vec<T>` per element type `T`.
#[derive(Default)]
pub(crate) struct Pool {
    stacks: Vec<(TypeId, Box<dyn Stack>)>,
}

/// One element type's stack of buffers, its type erased.
trait Stack: Any {
    /// Free the buffers, keeping the stack's room.
    fn free_buffers(&mut self);
    fn as_any(&mut self) -> &mut dyn Any;
}

impl<T: Pod> Stack for Vec<Vec<T>> {
    fn free_buffers(&mut self) {
        self.clear();
    }

    fn as_any(&mut self) -> &mut dyn Any {
        self
    }
}

impl Pool {
    fn stack<T: Pod>(&mut self) -> &mut Vec<Vec<T>> {
        let id = TypeId::of::<T>();
        let i = match self.stacks.iter().position(|(t, _)| *t == id) {
            Some(i) => i,
            None => {
                self.stacks.push((id, Box::new(Vec::<Vec<T>>::new())));
                self.stacks.len() - 1
            }
        };
        self.stacks[i]
            .1
            .as_any()
            .downcast_mut()
            .expect("the pool's stack of its type")
    }

    /// An empty `Vec<T>` with room for `n` elements: the pooled one of least capacity that
    /// has it, else a new one (none for `n = 0`).
    pub(crate) fn take<T: Pod>(
        &mut self,
        n: usize,
    ) -> std::result::Result<Vec<T>, TryReserveError> {
        if n == 0 {
            return Ok(Vec::new()); // no pooled buffer is needed
        }
        let stack = self.stack::<T>();
        let best = stack
            .iter()
            .enumerate()
            .filter(|(_, v)| v.capacity() >= n)
            .min_by_key(|(_, v)| v.capacity())
            .map(|(i, _)| i);
        match best {
            Some(i) => Ok(stack.swap_remove(i)),
            None => {
                let mut v = Vec::new();
                v.try_reserve_exact(n)?;
                Ok(v)
            }
        }
    }

    /// Free every pooled buffer (a run has ended: its buffers were for later buffers of that
    /// run), keeping the stacks of each element type for the next run on the same state.
    pub(crate) fn free_buffers(&mut self) {
        for (_, stack) in &mut self.stacks {
            stack.free_buffers();
        }
    }

    /// Keep `v` (emptied) for a later [`take`](Pool::take), unless `limit` buffers of its type
    /// are kept already.
    pub(crate) fn give<T: Pod>(&mut self, mut v: Vec<T>, limit: usize) {
        if v.capacity() == 0 {
            return;
        }
        let stack = self.stack::<T>();
        if stack.len() < limit && stack.try_reserve(1).is_ok() {
            v.clear();
            stack.push(v);
        }
    }
}
