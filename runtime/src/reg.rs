//! Typed registered memory: [`Reg<T>`] and the local views of it.

use crate::ctx::Ctx;
use crate::error::Result;
use bytemuck::Pod;
use std::marker::PhantomData;
use std::sync::Arc;

/// Memory owned by the runtime on behalf of one process. Freed when the last of the user's
/// handle, the registration table and pending requests lets go.
pub(crate) struct Storage<T> {
    ptr: *mut T,
    len: usize,
}

// SAFETY: the storage is plain memory; who may touch it when is governed by the sync protocol
// and the borrow rules of `Ctx::local`/`Ctx::local_mut`.
unsafe impl<T: Send> Send for Storage<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Storage<T> {}

impl<T> Storage<T> {
    pub(crate) fn new_from(data: Vec<T>) -> Self {
        let b = data.into_boxed_slice();
        let len = b.len();
        Storage {
            ptr: Box::into_raw(b) as *mut T,
            len,
        }
    }
}

impl<T> Storage<T> {
    pub(crate) fn ptr_u8(&self) -> *mut u8 {
        self.ptr as *mut u8
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl<T> Drop for Storage<T> {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` came from `Box::into_raw` of a boxed slice of this length.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.len)) });
    }
}

/// The name of a registration slot: what [`Ctx::put`], [`Ctx::get`] and the other primitives
/// need to address any process's memory in that slot.
///
/// Unlike [`Reg`], a `RegId` is `Copy` and owns no memory, so it can be used while a mutable
/// local view of the registration is alive — the halo-exchange pattern:
///
/// ```
/// // Each process sends the first element of its array to the end of its left neighbour's.
/// let out = mbsp::run(3, |ctx| {
///     let (p, s) = (ctx.nprocs(), ctx.pid());
///     let mut u = ctx.push_reg(vec![0u32; 4])?;
///     let id = u.id();
///     ctx.sync()?;
///     let view = ctx.local_mut(&mut u)?;
///     view[0] = s as u32 + 1; // compute in place...
///     ctx.put((s + p - 1) % p, &view[..1], id, 3)?; // ...and put from the live view
///     ctx.sync()?;
///     Ok(ctx.local(&u)?[3])
/// }).unwrap();
/// assert_eq!(out, vec![2, 3, 1]);
/// ```
pub struct RegId<T> {
    pub(crate) slot: u32,
    pub(crate) generation: u32,
    pub(crate) run: u64,
    pub(crate) owner: usize,
    pub(crate) pushed_in: u64,
    _elem: PhantomData<fn() -> T>,
}

impl<T> RegId<T> {
    pub(crate) fn new(slot: u32, generation: u32, run: u64, owner: usize, pushed_in: u64) -> Self {
        RegId {
            slot,
            generation,
            run,
            owner,
            pushed_in,
            _elem: PhantomData,
        }
    }
}

impl<T> Clone for RegId<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for RegId<T> {}

impl<T> std::fmt::Debug for RegId<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegId")
            .field("slot", &self.slot)
            .field("owner", &self.owner)
            .field("pushed_in_superstep", &self.pushed_in)
            .finish()
    }
}

mod sealed {
    pub trait Sealed {}
}

/// Something that names a registration slot: a [`Reg`], a [`RegId`], or a reference to one.
/// The communication primitives take any of them.
pub trait Registration: sealed::Sealed {
    /// The element type of the registration.
    type Elem;
    /// The slot's name.
    fn reg_id(&self) -> RegId<Self::Elem>;
}

impl<T> sealed::Sealed for RegId<T> {}
impl<T> Registration for RegId<T> {
    type Elem = T;
    #[inline]
    fn reg_id(&self) -> RegId<T> {
        *self
    }
}

impl<T> sealed::Sealed for Reg<T> {}
impl<T> Registration for Reg<T> {
    type Elem = T;
    #[inline]
    fn reg_id(&self) -> RegId<T> {
        self.id
    }
}

impl<R: Registration + ?Sized> sealed::Sealed for &R {}
impl<R: Registration + ?Sized> Registration for &R {
    type Elem = R::Elem;
    #[inline]
    fn reg_id(&self) -> RegId<R::Elem> {
        (**self).reg_id()
    }
}

/// A registration of a process-local array of `T`, made with [`Ctx::push_reg`].
///
/// The handle names the registration slot (for puts and gets into or out of *any* process's
/// memory registered in the same slot) and owns this process's memory in it. Read and write the
/// local part with [`Ctx::local`] and [`Ctx::local_mut`]; those views cannot live across a
/// [`Ctx::sync`], which is when other processes' communication lands. [`Reg::id`] gives the
/// slot's name alone, usable while a local view is alive.
///
/// `T` is any plain-old-data type ([`bytemuck::Pod`]): integers, floats, arrays and
/// `#[repr(C)]` structs of them. All processes must register the same element type in a slot.
pub struct Reg<T> {
    pub(crate) id: RegId<T>,
    pub(crate) mem: Option<Arc<Storage<T>>>,
}

impl<T> Reg<T> {
    /// Number of elements this process registered (0 for an empty registration).
    pub fn len(&self) -> usize {
        self.mem.as_ref().map_or(0, |m| m.len)
    }

    /// Whether this process registered no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether this is a null registration ([`Ctx::push_reg_empty`]): this process receives
    /// nothing in this slot.
    pub fn is_null(&self) -> bool {
        self.mem.is_none()
    }

    /// The name of the registration slot, without the memory (see [`RegId`]).
    pub fn id(&self) -> RegId<T> {
        self.id
    }

    /// Take the memory back once nothing else can reach it: after the registration was popped
    /// and that pop took effect at a sync, or after the run ended. Otherwise the handle is
    /// returned unchanged.
    ///
    /// ```
    /// let v = mbsp::run(2, |ctx| {
    ///     let x = ctx.push_reg(vec![ctx.pid() as u32; 3])?;
    ///     ctx.sync()?;
    ///     ctx.pop_reg(&x)?;
    ///     ctx.sync()?;
    ///     Ok(x.into_vec().ok().expect("popped and synced"))
    /// }).unwrap();
    /// assert_eq!(v, vec![vec![0, 0, 0], vec![1, 1, 1]]);
    /// ```
    pub fn into_vec(self) -> Result<Vec<T>, Reg<T>> {
        let Some(mem) = self.mem else {
            return Ok(Vec::new());
        };
        match Arc::try_unwrap(mem) {
            Ok(storage) => {
                let storage = std::mem::ManuallyDrop::new(storage);
                // SAFETY: we own the storage; rebuild the box it came from without dropping it
                // twice (ManuallyDrop).
                let b = unsafe {
                    Box::from_raw(std::ptr::slice_from_raw_parts_mut(storage.ptr, storage.len))
                };
                Ok(b.into_vec())
            }
            Err(mem) => Err(Reg {
                mem: Some(mem),
                ..self
            }),
        }
    }
}

impl<T> std::fmt::Debug for Reg<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reg")
            .field("slot", &self.id.slot)
            .field("owner", &self.id.owner)
            .field("len", &self.len())
            .field("pushed_in_superstep", &self.id.pushed_in)
            .finish()
    }
}

impl Ctx {
    fn check_local<T>(&self, op: &'static str, reg: &Reg<T>) -> Result<()> {
        // After this process's end (`Ctx::end`) its memory is its own again: nobody writes it
        // any more (remote writes land in its own syncs).
        if self.run.tree.is_aborted() {
            return Err(self.stopped(op));
        }
        let id = &reg.id;
        if id.run != self.run_id || id.owner != self.pid {
            return Err(self.misuse(
                op,
                format!(
                    "this registration's memory belongs to pid {} of {} run; a process can only \
                     access its own registered memory locally",
                    id.owner,
                    if id.run == self.run_id {
                        "this"
                    } else {
                        "another"
                    }
                ),
            ));
        }
        Ok(())
    }

    /// This process's registered elements, for reading.
    ///
    /// The view borrows `self`, so it ends before the next [`sync`](Ctx::sync). Fails (and
    /// ends the run) if `reg` belongs to another process or run, and fails once the run has
    /// failed.
    ///
    /// ```
    /// mbsp::run(2, |ctx| {
    ///     let x = ctx.push_reg(vec![ctx.pid() as f64; 4])?;
    ///     assert_eq!(ctx.local(&x)?, &[ctx.pid() as f64; 4]);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    #[inline]
    pub fn local<'a, T: Pod>(&'a self, reg: &'a Reg<T>) -> Result<&'a [T]> {
        self.check_local("local", reg)?;
        Ok(match &reg.mem {
            // SAFETY: the owner's view; remote writes happen only inside `sync(&mut self)`
            // (or through unsafe hp primitives whose callers promise not to touch it), and a
            // failed sync returns only when no other process touches this memory any more.
            Some(m) => unsafe { std::slice::from_raw_parts(m.ptr, m.len) },
            None => &[],
        })
    }

    /// This process's registered elements, for reading and writing (see [`Ctx::local`]).
    ///
    /// # Performance
    ///
    /// The handle is checked once, here; the result is a plain `&mut [T]` holding no guard or
    /// borrow flag, so a loop over it written inline in the SPMD closure compiles to the same
    /// code as in a function of slices (see "Loops inside the SPMD closure" in
    /// docs/semantics.md). Take the view once per superstep, outside the loop:
    ///
    /// ```
    /// fn step(u: &[f64], next: &mut [f64]) {
    ///     for i in 1..u.len() - 1 {
    ///         next[i] = u[i] + 0.25 * (u[i - 1] - 2.0 * u[i] + u[i + 1]);
    ///     }
    /// }
    /// mbsp::run(1, |ctx| {
    ///     let mut u = ctx.push_reg(vec![0.0, 4.0, 0.0])?;
    ///     ctx.sync()?;
    ///     let mut next = vec![0.0; 3];
    ///     step(ctx.local_mut(&mut u)?, &mut next);
    ///     assert_eq!(next[1], 2.0);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    ///
    /// ```
    /// mbsp::run(2, |ctx| {
    ///     let mut x = ctx.push_reg(vec![0u64; 4])?;
    ///     ctx.local_mut(&mut x)?[1] = 7;
    ///     assert_eq!(ctx.local(&x)?, &[0, 7, 0, 0]);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub fn local_mut<'a, T: Pod>(&'a self, reg: &'a mut Reg<T>) -> Result<&'a mut [T]> {
        self.check_local("local_mut", reg)?;
        Ok(match &reg.mem {
            // SAFETY: as in `local`; `&mut Reg` makes this the only view through the handle, and
            // handles are not `Clone`.
            Some(m) => unsafe { std::slice::from_raw_parts_mut(m.ptr, m.len) },
            None => &mut [],
        })
    }
}
