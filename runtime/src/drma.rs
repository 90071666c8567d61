//! Direct remote memory access: registration, put, get and their high-performance variants.
//!
//! Two forms of every primitive:
//! * typed, over [`Reg<T>`] handles with element offsets (and `_bytes` variants with byte
//!   offsets) — safe, except the hp primitives and `direct_get`, which can race by design;
//! * raw, naming registered areas by their local address as BSPlib does (`*_raw`), for the C ABI
//!   and other foreign callers. Registering raw memory is `unsafe`; after that, naming it is not.

use crate::ctx::Ctx;
use crate::error::Result;
use crate::flags::{FLAG_COMM, FLAG_GETS, FLAG_OUTBOX, FLAG_REGS, source_bit};
use crate::reg::{Reg, RegId, Registration, Storage};
use crate::registry::{ElemType, Entry, Keep, RegOp, SlotState};
use crate::requests::GetOp;
use bytemuck::Pod;
use std::mem::size_of;
use std::ops::{Bound, Range, RangeBounds};
use std::sync::Arc;

impl Ctx {
    // ----- registration -----

    /// Register `data` as this process's memory in a new registration slot; the slot becomes
    /// usable by every process after the next [`sync`](Ctx::sync).
    ///
    /// All processes must push (and pop) registrations in the same order; the sizes may differ
    /// per process. The runtime takes ownership of `data` (see [`Reg::into_vec`] to get it back).
    ///
    /// ```
    /// // Every process registers a buffer of p slots; each writes its pid into slot `pid` of
    /// // everyone's buffer.
    /// let all = mbsp::run(3, |ctx| {
    ///     let p = ctx.nprocs();
    ///     let buf = ctx.push_reg(vec![0u32; p])?;
    ///     ctx.sync()?;
    ///     for q in 0..p {
    ///         ctx.put(q, &[ctx.pid() as u32 * 10], &buf, ctx.pid())?;
    ///     }
    ///     ctx.sync()?;
    ///     Ok(ctx.local(&buf)?.to_vec())
    /// }).unwrap();
    /// assert!(all.iter().all(|b| b == &[0, 10, 20]));
    /// ```
    pub fn push_reg<T: Pod + Send>(&self, data: Vec<T>) -> Result<Reg<T>> {
        self.live("push_reg")?;
        let mem = Arc::new(Storage::new_from(data));
        let (ptr, bytes) = (mem.ptr_u8(), mem.len() * size_of::<T>());
        self.place_memory(ptr, bytes);
        let keep: Keep = mem.clone();
        let ty = ElemType::of::<T>();
        let (slot, generation) = self.push_slot(ptr, bytes, false, ty, Some(keep));
        Ok(Reg {
            id: RegId::new(slot, generation, self.run_id, self.pid, self.step),
            mem: Some(mem),
        })
    }

    /// Bind registered memory to this process's NUMA node when the process is bound to a single
    /// node (pages not yet touched are then allocated there); small areas stay where first
    /// touch puts them.
    fn place_memory(&self, ptr: *mut u8, len: usize) {
        let layout = &self.run.layout;
        if layout.bind && len >= 4096 && self.domain().numas(self.machine()).len() == 1 {
            // SAFETY: the storage was just created and is not aliased.
            let area = unsafe { std::slice::from_raw_parts(ptr, len) };
            let _ = layout.binder.bind_memory(area, self.domain());
        }
    }

    /// The NUMA nodes (OS indices) holding this process's memory of `reg`, as the operating
    /// system reports them. Registered memory lives on the node of the process that registered
    /// it: it is bound there when the process is bound to one node, and otherwise first touched
    /// there (all buffered communication into it is written by its owner).
    ///
    /// ```
    /// let nodes = mbsp::run(1, |ctx| {
    ///     let x = ctx.push_reg(vec![0u8; 1 << 16])?;
    ///     ctx.memory_nodes(&x)
    /// });
    /// // On a real machine: the process's node(s); on a loaded one, an error saying why.
    /// if let Ok(n) = nodes { assert!(!n[0].is_empty()); }
    /// ```
    pub fn memory_nodes<T: Pod>(&self, reg: &Reg<T>) -> Result<Vec<u32>> {
        let area: &[T] = self.local(reg)?;
        self.run
            .layout
            .binder
            .memory_nodes(bytemuck::cast_slice(area))
            .map_err(|e| self.error(crate::ErrorKind::System, "memory_nodes", e.to_string()))
    }

    /// Take part in a registration without offering memory (BSPlib's `bsp_push_reg(NULL, 0)`):
    /// this process will never be the target or source of communication in this slot, but can
    /// still put to and get from the other processes' memory in it.
    ///
    /// ```
    /// // Only pid 0 receives; the others take part in the registration without memory.
    /// let got = mbsp::run(3, |ctx| {
    ///     let inbox = if ctx.pid() == 0 {
    ///         ctx.push_reg(vec![0u32; 3])?
    ///     } else {
    ///         ctx.push_reg_empty::<u32>()?
    ///     };
    ///     ctx.sync()?;
    ///     ctx.put(0, &[ctx.pid() as u32 + 1], &inbox, ctx.pid())?;
    ///     ctx.sync()?;
    ///     Ok(ctx.local(&inbox)?.to_vec())
    /// }).unwrap();
    /// assert_eq!(got[0], vec![1, 2, 3]);
    /// assert!(got[1].is_empty());
    /// ```
    pub fn push_reg_empty<T: Pod + Send>(&self) -> Result<Reg<T>> {
        self.live("push_reg")?;
        let ty = ElemType::of::<T>();
        let (slot, generation) = self.push_slot(std::ptr::null_mut(), 0, true, ty, None);
        Ok(Reg {
            id: RegId::new(slot, generation, self.run_id, self.pid, self.step),
            mem: None,
        })
    }

    fn push_slot(
        &self,
        ptr: *mut u8,
        len: usize,
        empty: bool,
        ty: ElemType,
        keep: Option<Keep>,
    ) -> (u32, u32) {
        let mut st = self.st.borrow_mut();
        let slot = st.slots.alloc();
        // SAFETY: our own table, read outside a sync.
        let generation = unsafe { self.me().entry(slot) }.generation.wrapping_add(1);
        st.reg_ops.push(RegOp::Push {
            slot,
            generation,
            ptr,
            len,
            empty,
            ty,
            keep,
        });
        self.flag(FLAG_REGS);
        (slot, generation)
    }

    /// Remove a registration at the next sync. Communication through it remains allowed in the
    /// current superstep. Processes must pop in the same order.
    ///
    /// ```
    /// let e = mbsp::run(2, |ctx| {
    ///     let x = ctx.push_reg(vec![0u8; 4])?;
    ///     ctx.sync()?;
    ///     ctx.pop_reg(&x)?;
    ///     ctx.put(1 - ctx.pid(), &[1u8], &x, 0)?; // still allowed in the superstep of the pop
    ///     ctx.sync()?;
    ///     assert_eq!(ctx.registrations(), 0);
    ///     ctx.put(1 - ctx.pid(), &[1u8], &x, 0) // gone after the sync: a misuse, the run ends
    /// }).unwrap_err();
    /// assert_eq!((e.op(), e.superstep()), ("put", Some(2)));
    /// ```
    pub fn pop_reg(&self, reg: impl Registration) -> Result<()> {
        self.live("pop_reg")?;
        let reg = reg.reg_id();
        if reg.run != self.run_id {
            return Err(self.misuse("pop_reg", other_run()));
        }
        let pending_push = self
            .pending_push(|slot, generation, _| slot == reg.slot && generation == reg.generation);
        // SAFETY: our own table, read outside a sync.
        let e = unsafe { self.me().entry(reg.slot) };
        let registered = e.state != SlotState::Free && e.generation == reg.generation;
        if pending_push.is_none() && !registered {
            return Err(self.misuse(
                "pop_reg",
                format!(
                    "the registration (slot {}) is not registered: it was already popped",
                    reg.slot
                ),
            ));
        }
        self.pop_slot("pop_reg", reg.slot)
    }

    fn pop_slot(&self, op: &'static str, slot: u32) -> Result<()> {
        let mut st = self.st.borrow_mut();
        if st
            .reg_ops
            .iter()
            .any(|o| matches!(o, RegOp::Pop { slot: s } if *s == slot))
        {
            drop(st);
            return Err(self.misuse(
                op,
                format!(
                    "the registration in slot {slot} is already being popped in this superstep"
                ),
            ));
        }
        st.reg_ops.push(RegOp::Pop { slot });
        self.flag(FLAG_REGS);
        Ok(())
    }

    /// The newest pending push (this superstep) matching `f(slot, generation, ptr)` and not popped yet.
    fn pending_push(&self, f: impl Fn(u32, u32, *mut u8) -> bool) -> Option<u32> {
        let st = self.st.borrow();
        let popped = |s: u32| {
            st.reg_ops
                .iter()
                .any(|o| matches!(o, RegOp::Pop { slot } if *slot == s))
        };
        st.reg_ops.iter().rev().find_map(|o| match o {
            RegOp::Push {
                slot,
                generation,
                ptr,
                ..
            } if f(*slot, *generation, *ptr) && !popped(*slot) => Some(*slot),
            _ => None,
        })
    }

    /// Check that `reg` may name a slot for communication now; return (slot, generation).
    #[inline]
    fn usable<T>(&self, op: &'static str, reg: &RegId<T>) -> Result<(u32, u32)> {
        if reg.run != self.run_id {
            return Err(self.misuse(op, other_run()));
        }
        if reg.pushed_in >= self.step {
            return Err(self.misuse(
                op,
                format!(
                    "the registration pushed in superstep {} becomes valid only after the next sync",
                    reg.pushed_in
                ),
            ));
        }
        // SAFETY: our own table, read outside a sync.
        let e = unsafe { self.me().entry(reg.slot) };
        if e.state == SlotState::Free || e.generation != reg.generation {
            return Err(self.misuse(
                op,
                format!(
                    "the registration (slot {}) was popped in an earlier superstep",
                    reg.slot
                ),
            ));
        }
        Ok((reg.slot, reg.generation))
    }

    /// The address of `len` bytes at byte `off` of `pid`'s memory in `slot`, bounds-checked.
    #[inline]
    fn remote(
        &self,
        op: &'static str,
        dir: &'static str,
        pid: usize,
        (slot, generation): (u32, u32),
        off: usize,
        len: usize,
    ) -> Result<*mut u8> {
        self.check_pid(op, pid)?;
        // SAFETY: tables are read outside syncs only.
        let e = unsafe { self.run.proc(pid).entry(slot) };
        if e.state != SlotState::Active || e.generation != generation {
            return Err(self.misuse(
                op,
                if e.state == SlotState::Empty && e.generation == generation {
                    format!(
                        "{dir} pid {pid}: pid {pid} registered no memory in this slot (slot {slot}, \
                         a null registration)"
                    )
                } else {
                    format!(
                        "{dir} pid {pid}: pid {pid} has nothing registered in slot {slot} \
                         (registration orders differ?)"
                    )
                },
            ));
        }
        match off.checked_add(len) {
            // SAFETY: in bounds of the registered area.
            Some(end) if end <= e.len => Ok(unsafe { e.ptr.add(off) }),
            _ => Err(self.misuse(
                op,
                format!(
                    "{dir} pid {pid}: offset {off} + {len} bytes exceeds the {} bytes pid {pid} \
                     registered",
                    e.len
                ),
            )),
        }
    }

    #[inline]
    fn byte_offset<T>(&self, op: &'static str, offset: usize) -> Result<usize> {
        offset.checked_mul(size_of::<T>()).ok_or_else(|| {
            self.misuse(
                op,
                format!("element offset {offset} overflows when converted to bytes"),
            )
        })
    }

    /// Check that this process's registration `reg` has room for `len` bytes at byte `off`;
    /// return their address and what keeps the memory alive.
    fn local_dst<T>(
        &self,
        op: &'static str,
        reg: &RegId<T>,
        off: usize,
        len: usize,
    ) -> Result<(*mut u8, Option<Keep>)> {
        if reg.run != self.run_id || reg.owner != self.pid {
            return Err(self.misuse(
                op,
                format!(
                    "the destination must be this process's own memory, but it belongs to pid {} \
                     of {} run",
                    reg.owner,
                    if reg.run == self.run_id {
                        "this"
                    } else {
                        "another"
                    }
                ),
            ));
        }
        let (slot, _) = self.usable(op, reg)?;
        // SAFETY: our own table, read outside a sync.
        let (e, keep): (Entry, _) = unsafe { self.me().table(|t| (*t.entry(slot), t.keep(slot))) };
        match off.checked_add(len) {
            // SAFETY: in bounds of our own registered area (null only when its length is 0).
            Some(end) if end <= e.len => Ok((unsafe { e.ptr.add(off) }, keep)),
            _ => Err(self.misuse(
                op,
                format!(
                    "destination offset {off} + {len} bytes exceeds the {} bytes of the local \
                     destination",
                    e.len
                ),
            )),
        }
    }

    /// The byte range of `range` (in elements of `T`) within `pid`'s area in `slot`; an open
    /// end means the end of what `pid` registered.
    fn byte_range<T>(
        &self,
        op: &'static str,
        pid: usize,
        slot: u32,
        range: impl RangeBounds<usize>,
    ) -> Result<Range<usize>> {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.saturating_add(1),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => {
                self.check_pid(op, pid)?;
                // SAFETY: tables are read outside syncs only.
                unsafe { self.run.proc(pid).entry(slot) }.len / size_of::<T>().max(1)
            }
        };
        if start > end {
            return Err(self.misuse(op, format!("the source range {start}..{end} is reversed")));
        }
        let (s, e) = (
            self.byte_offset::<T>(op, start)?,
            self.byte_offset::<T>(op, end)?,
        );
        Ok(s..e)
    }

    // ----- put -----

    /// Copy `src` into `pid`'s memory registered in `dst`, starting at element `offset`, at the
    /// next sync. `src` is copied now (buffered on source and destination); if several puts
    /// write the same place in one superstep, one of them wins. `dst` is a [`Reg`], a
    /// [`RegId`] or a reference to one.
    ///
    /// ```
    /// // The BSPlib paper's `reverse`: process i ends up with the value of process p-1-i.
    /// let out = mbsp::run(4, |ctx| {
    ///     let x = ctx.push_reg(vec![ctx.pid() as i32])?;
    ///     ctx.sync()?;
    ///     let target = ctx.nprocs() - 1 - ctx.pid();
    ///     ctx.put(target, ctx.local(&x)?, &x, 0)?;
    ///     ctx.sync()?;
    ///     Ok(ctx.local(&x)?[0])
    /// }).unwrap();
    /// assert_eq!(out, vec![3, 2, 1, 0]);
    /// ```
    #[inline]
    pub fn put<T: Pod>(
        &self,
        pid: usize,
        src: &[T],
        dst: impl Registration<Elem = T>,
        offset: usize,
    ) -> Result<()> {
        let off = self.byte_offset::<T>("put", offset)?;
        self.put_bytes(pid, bytemuck::cast_slice(src), dst, off)
    }

    /// [`put`](Ctx::put) with a byte source and a byte offset.
    ///
    /// ```
    /// // Write the bytes of a u16 into the middle of a u32 array.
    /// let v = mbsp::run(2, |ctx| {
    ///     let x = ctx.push_reg(vec![0u32; 2])?;
    ///     ctx.sync()?;
    ///     ctx.put_bytes(1 - ctx.pid(), &0xABCDu16.to_le_bytes(), &x, 4)?;
    ///     ctx.sync()?;
    ///     Ok(ctx.local(&x)?[1])
    /// }).unwrap();
    /// assert_eq!(v, vec![0xABCD, 0xABCD]);
    /// ```
    #[inline]
    pub fn put_bytes(
        &self,
        pid: usize,
        src: &[u8],
        dst: impl Registration,
        byte_offset: usize,
    ) -> Result<()> {
        let id = dst.reg_id();
        match self.fast_remote(pid, &id, byte_offset, src.len()) {
            Some(d) => self.put_at(pid, d, src),
            None => self.put_checked(pid, src, &id, byte_offset),
        }
    }

    /// Queue a checked put: carried by the engine when it can (a small put riding in the
    /// thread engine's barrier, a large one between ranks), else in the outbox. Fails only if
    /// the memory for it cannot be allocated.
    #[inline]
    fn put_at(&self, pid: usize, dst: *mut u8, src: &[u8]) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        if let Some(carried) = self.engine_put(pid, dst, src) {
            carried?;
            self.note_out(pid, src.len(), false, false);
            self.flag(FLAG_COMM);
            return Ok(());
        }
        if self.with_outbox(pid, |ob| ob.put(dst, src)).is_none() {
            return Err(self.no_room_for_put(pid, src.len()));
        }
        self.note_out(pid, src.len(), false, false);
        self.flag(FLAG_COMM | FLAG_OUTBOX);
        Ok(())
    }

    /// The error of a put whose copy could not be allocated.
    #[cold]
    #[inline(never)]
    pub(crate) fn no_room_for_put(&self, pid: usize, len: usize) -> crate::Error {
        self.out_of_memory(
            "put",
            format!(
                "to pid {pid}: could not allocate room for a copy of {len} bytes in this \
                 superstep's outbox"
            ),
        )
    }

    /// Check that `len` bytes at `ptr` (named `what` in the message) are an area an object can
    /// have: at most `isize::MAX` bytes, not running past the end of the address space.
    fn check_area(&self, op: &'static str, what: &str, ptr: *const u8, len: usize) -> Result<()> {
        if len > isize::MAX as usize || (ptr as usize).checked_add(len).is_none() {
            return Err(self.misuse(
                op,
                format!(
                    "{what} ({len} bytes at {ptr:p}) is larger than any object can be: at most \
                     isize::MAX = {} bytes, ending inside the address space",
                    isize::MAX
                ),
            ));
        }
        Ok(())
    }

    /// [`put_bytes`](Ctx::put_bytes) with every check spelled out, for the error message.
    #[cold]
    #[inline(never)]
    fn put_checked<T>(&self, pid: usize, src: &[u8], id: &RegId<T>, off: usize) -> Result<()> {
        self.live("put")?;
        let slot = self.usable("put", id)?;
        self.put_slot(pid, src, slot, off)
    }

    /// The address of `len` bytes at byte `off` of `pid`'s memory named by `id`, if everything
    /// is in order (the run is live, `id` belongs to it and is in effect, `pid` exists and
    /// registered the same slot with room for them); `None` sends the caller to the checks that
    /// say what is wrong. One look at `pid`'s table suffices: registrations change on every
    /// process at the same sync, so an entry of the same generation is the same registration.
    #[inline]
    fn fast_remote<T>(&self, pid: usize, id: &RegId<T>, off: usize, len: usize) -> Option<*mut u8> {
        if id.run != self.run_id || id.pushed_in >= self.step {
            return None;
        }
        self.fast_remote_slot(pid, (id.slot, id.generation), off, len)
    }

    /// [`fast_remote`](Ctx::fast_remote) for a slot known to be in effect.
    #[inline]
    fn fast_remote_slot(
        &self,
        pid: usize,
        (slot, generation): (u32, u32),
        off: usize,
        len: usize,
    ) -> Option<*mut u8> {
        if self.run.tree.is_aborted() || self.end_outcome.is_some() {
            return None;
        }
        let proc = self.run.procs.get(pid)?;
        // SAFETY: tables are read outside syncs only.
        let e = unsafe { proc.entry(slot) };
        if e.state != SlotState::Active || e.generation != generation {
            return None;
        }
        let end = off.checked_add(len)?;
        // SAFETY: in bounds of the registered area.
        (end <= e.len).then(|| unsafe { e.ptr.add(off) })
    }

    #[inline]
    fn put_slot(&self, pid: usize, src: &[u8], slot: (u32, u32), off: usize) -> Result<()> {
        let dst = self.remote("put", "to", pid, slot, off, src.len())?;
        self.put_at(pid, dst, src)
    }

    /// High-performance put: copy `src` into `pid`'s memory in `dst` at element `offset`
    /// without buffering. mbsp performs the copy immediately (after `pid` has finished the
    /// previous sync); the data is guaranteed visible to `pid` after the next sync.
    ///
    /// # Safety
    /// For the rest of the superstep, nothing else (no local code of `pid`, no other
    /// communication) may read or write the destination range, as BSPlib requires of
    /// `bsp_hpput`; otherwise the copy races with that access.
    ///
    /// ```
    /// let out = mbsp::run(2, |ctx| {
    ///     let x = ctx.push_reg(vec![0u8; 4])?;
    ///     ctx.sync()?;
    ///     let other = 1 - ctx.pid();
    ///     // SAFETY: nobody touches `x` in this superstep except this one hpput per process.
    ///     unsafe { ctx.hpput(other, &[ctx.pid() as u8 + 1; 4], &x, 0)? };
    ///     ctx.sync()?;
    ///     Ok(ctx.local(&x)?.to_vec())
    /// }).unwrap();
    /// assert_eq!(out, vec![vec![2; 4], vec![1; 4]]);
    /// ```
    pub unsafe fn hpput<T: Pod>(
        &self,
        pid: usize,
        src: &[T],
        dst: impl Registration<Elem = T>,
        offset: usize,
    ) -> Result<()> {
        self.live("hpput")?;
        let off = self.byte_offset::<T>("hpput", offset)?;
        let slot = self.usable("hpput", &dst.reg_id())?;
        let bytes: &[u8] = bytemuck::cast_slice(src);
        // SAFETY: forwarded to the caller.
        unsafe { self.hpput_slot(pid, bytes.as_ptr(), bytes.len(), slot, off) }
    }

    unsafe fn hpput_slot(
        &self,
        pid: usize,
        src: *const u8,
        len: usize,
        slot: (u32, u32),
        off: usize,
    ) -> Result<()> {
        let dst = self.remote("hpput", "to", pid, slot, off, len)?;
        self.immediate_allowed("hpput")?;
        self.note_out(pid, len, false, true);
        // SAFETY: forwarded to the caller; `dst` checked (against the mirror, over ranks) just
        // now.
        unsafe { self.engine_hpput(pid, src, dst, len) }
    }

    // ----- get -----

    /// Copy the elements `range` of `pid`'s memory in `src` into this process's own memory in
    /// `dst`, starting at element `offset`, at the next sync — the arguments in the order of
    /// [`put`](Ctx::put): process, source, destination, offset. The source is read as it stands
    /// when `pid` enters the sync, before any put of the superstep lands. `range` may be open
    /// (`..`, `2..`): an open end is the end of what `pid` registered. `dst` must be registered
    /// by this process.
    ///
    /// ```
    /// // Everyone reads its right neighbour's value.
    /// let out = mbsp::run(3, |ctx| {
    ///     let x = ctx.push_reg(vec![ctx.pid() as u64 * 100])?;
    ///     let y = ctx.push_reg(vec![0u64])?;
    ///     ctx.sync()?;
    ///     let right = (ctx.pid() + 1) % ctx.nprocs();
    ///     ctx.get(right, &x, 0..1, &y, 0)?;
    ///     ctx.sync()?;
    ///     Ok(ctx.local(&y)?[0])
    /// }).unwrap();
    /// assert_eq!(out, vec![100, 200, 0]);
    /// ```
    pub fn get<T: Pod>(
        &self,
        pid: usize,
        src: impl Registration<Elem = T>,
        range: impl RangeBounds<usize>,
        dst: impl Registration<Elem = T>,
        offset: usize,
    ) -> Result<()> {
        self.live("get")?;
        let src = src.reg_id();
        let (slot, _) = self.usable("get", &src)?;
        let bytes = self.byte_range::<T>("get", pid, slot, range)?;
        let doff = self.byte_offset::<T>("get", offset)?;
        self.get_slot(pid, &src, bytes, &dst.reg_id(), doff)
    }

    /// [`get`](Ctx::get) with a byte range and a byte offset.
    ///
    /// ```
    /// let v = mbsp::run(2, |ctx| {
    ///     let x = ctx.push_reg(vec![ctx.pid() as u8 + 1; 8])?;
    ///     let y = ctx.push_reg(vec![0u16; 2])?;
    ///     ctx.sync()?;
    ///     ctx.get_bytes(1 - ctx.pid(), &x, 2..5, &y, 1)?; // 3 bytes into byte 1 of y
    ///     ctx.sync()?;
    ///     Ok(ctx.local(&y)?.to_vec())
    /// }).unwrap();
    /// assert_eq!(v[0], vec![0x0200, 0x0202]);
    /// ```
    pub fn get_bytes(
        &self,
        pid: usize,
        src: impl Registration,
        byte_range: impl RangeBounds<usize>,
        dst: impl Registration,
        byte_offset: usize,
    ) -> Result<()> {
        self.live("get")?;
        let src = src.reg_id();
        let (slot, _) = self.usable("get", &src)?;
        let bytes = self.byte_range::<u8>("get", pid, slot, byte_range)?;
        self.get_slot(pid, &src, bytes, &dst.reg_id(), byte_offset)
    }

    fn get_slot<T, U>(
        &self,
        pid: usize,
        src: &RegId<T>,
        bytes: Range<usize>,
        dst: &RegId<U>,
        doff: usize,
    ) -> Result<()> {
        let slot = self.usable("get", src)?;
        let n = bytes.end - bytes.start;
        let s = self.remote("get", "from", pid, slot, bytes.start, n)?;
        let (d, keep) = self.local_dst("get", dst, doff, n)?;
        if n > 0 {
            self.queue_get(pid, slot.0, s, d, n, keep)?;
        }
        self.note_get(pid, n, false);
        Ok(())
    }

    /// Queue a checked get reading registration slot `slot` (of its owner). Fails only if the
    /// get buffer cannot be given room for it (reserved now, so that the sync cannot run out).
    fn queue_get(
        &self,
        from: usize,
        slot: u32,
        src: *const u8,
        dst: *mut u8,
        len: usize,
        keep: Option<Keep>,
    ) -> Result<()> {
        // SAFETY: our own table, read outside a sync.
        let dst_bits = unsafe {
            self.me()
                .table(|t| t.overlapping(dst, len).fold(0, |b, s| b | source_bit(s)))
        };
        let queued = {
            let mut st = self.st.borrow_mut();
            let st = &mut *st;
            if st.gets.is_empty() {
                st.get_room = 0; // the gets of an earlier superstep are done
            }
            let room = (len.checked_add(7).map(|n| n & !7))
                .and_then(|n| st.get_room.checked_add(n))
                .and_then(|r| st.getbuf.try_room(r).map(|()| r));
            if let Some(r) = room {
                st.get_room = r;
                st.gets.push(GetOp {
                    from: from as u32,
                    src,
                    dst,
                    len,
                    buf_off: 0,
                    dst_bits,
                    direct: false,
                    _keep: keep,
                });
            }
            room.is_some()
        };
        if !queued {
            return Err(self.out_of_memory(
                "get",
                format!(
                    "from pid {from}: could not allocate room to buffer {len} more bytes of this \
                     superstep's gets"
                ),
            ));
        }
        self.flag(FLAG_GETS | source_bit(slot));
        Ok(())
    }

    /// High-performance get: copy `dst.len()` elements from `pid`'s memory in `src` (at element
    /// `offset`) into `dst` without buffering. mbsp performs it immediately (after `pid` has
    /// finished the previous sync), so it behaves as [`direct_get`](Ctx::direct_get).
    ///
    /// # Safety
    /// The source range must not be written by anyone (its owner or any communication) during
    /// the current superstep.
    ///
    /// ```
    /// let v = mbsp::run(2, |ctx| {
    ///     let x = ctx.push_reg(vec![ctx.pid() as i32 * 7; 2])?;
    ///     ctx.sync()?;
    ///     let mut mine = [0i32; 2];
    ///     // SAFETY: no process writes `x` in this superstep.
    ///     unsafe { ctx.hpget(1 - ctx.pid(), &x, 0, &mut mine)? };
    ///     ctx.sync()?;
    ///     Ok(mine[1])
    /// }).unwrap();
    /// assert_eq!(v, vec![7, 0]);
    /// ```
    pub unsafe fn hpget<T: Pod>(
        &self,
        pid: usize,
        src: impl Registration<Elem = T>,
        offset: usize,
        dst: &mut [T],
    ) -> Result<()> {
        // SAFETY: forwarded to the caller.
        unsafe { self.immediate_get("hpget", pid, src.reg_id(), offset, dst) }
    }

    /// Copy `dst.len()` elements from `pid`'s registered memory in `src` (at element `offset`)
    /// into `dst` now, blocking until done (MulticoreBSP's `bsp_direct_get`). Sees everything
    /// that landed in `pid`'s memory at earlier syncs.
    ///
    /// # Safety
    /// The source range must not be written by anyone (its owner or any communication) during
    /// the current superstep.
    ///
    /// ```
    /// let out = mbsp::run(2, |ctx| {
    ///     let x = ctx.push_reg(vec![ctx.pid() as f32 + 0.5; 2])?;
    ///     ctx.sync()?;
    ///     let mut mine = [0.0f32; 2];
    ///     // SAFETY: no process writes `x` in this superstep.
    ///     unsafe { ctx.direct_get(1 - ctx.pid(), &x, 0, &mut mine)? };
    ///     Ok(mine[0])
    /// }).unwrap();
    /// assert_eq!(out, vec![1.5, 0.5]);
    /// ```
    pub unsafe fn direct_get<T: Pod>(
        &self,
        pid: usize,
        src: impl Registration<Elem = T>,
        offset: usize,
        dst: &mut [T],
    ) -> Result<()> {
        // SAFETY: forwarded to the caller.
        unsafe { self.immediate_get("direct_get", pid, src.reg_id(), offset, dst) }
    }

    unsafe fn immediate_get<T: Pod>(
        &self,
        op: &'static str,
        pid: usize,
        src: RegId<T>,
        offset: usize,
        dst: &mut [T],
    ) -> Result<()> {
        self.live(op)?;
        let off = self.byte_offset::<T>(op, offset)?;
        let slot = self.usable(op, &src)?;
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(dst);
        // SAFETY: forwarded to the caller.
        unsafe { self.immediate_get_slot(op, pid, slot, off, bytes.as_mut_ptr(), bytes.len()) }
    }

    unsafe fn immediate_get_slot(
        &self,
        op: &'static str,
        pid: usize,
        slot: (u32, u32),
        off: usize,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        let s = self.remote(op, "from", pid, slot, off, len)?;
        self.immediate_allowed(op)?;
        self.note_get(pid, len, true);
        // SAFETY: forwarded to the caller; `s` checked (against the mirror, over ranks) just
        // now.
        unsafe { self.engine_get_now(op, pid, s, dst, len) }
    }

    // ----- raw forms: areas named by their local address, as in BSPlib -----

    /// Register `len` bytes at `ptr` (BSPlib's `bsp_push_reg`); a null `ptr` is a null
    /// registration. Puts and gets then name this area by `ptr`; the newest registration of an
    /// address shadows older ones.
    ///
    /// # Safety
    /// Until the registration is popped and a sync has passed (or the run ends), the memory must
    /// stay allocated, and no reference to it may be held across a sync; it may be written by
    /// other processes' communication during syncs.
    pub unsafe fn push_reg_raw(&self, ptr: *mut u8, len: usize) -> Result<()> {
        self.live("push_reg")?;
        if !ptr.is_null() {
            self.check_area("push_reg", "the area", ptr, len)?;
        }
        self.push_slot(
            ptr,
            if ptr.is_null() { 0 } else { len },
            ptr.is_null(),
            ElemType::RAW,
            None,
        );
        Ok(())
    }

    /// Pop the newest registration of address `ptr` at the next sync (BSPlib's `bsp_pop_reg`).
    pub fn pop_reg_raw(&self, ptr: *const u8) -> Result<()> {
        self.live("pop_reg")?;
        if ptr.is_null() {
            return self.pop_null();
        }
        let slot = self
            .pending_push(|_, _, p| std::ptr::eq(p, ptr))
            .or_else(|| {
                let st = self.st.borrow();
                let popping = |s: u32| {
                    st.reg_ops
                        .iter()
                        .any(|o| matches!(o, RegOp::Pop { slot } if *slot == s))
                };
                // SAFETY: our own table, read outside a sync.
                unsafe { self.me().table(|t| t.find_addr(ptr, true, popping)) }
            });
        match slot {
            Some(s) => self.pop_slot("pop_reg", s),
            None => Err(self.misuse("pop_reg", format!("address {ptr:p} is not registered"))),
        }
    }

    /// BSPlib's `bsp_pop_reg(NULL)`: pop the registration the other processes pop in the same
    /// position, which must be one of this process's null registrations (as other BSPlib
    /// implementations accept). Resolved at the sync.
    fn pop_null(&self) -> Result<()> {
        let mut st = self.st.borrow_mut();
        let popping: Vec<u32> = st
            .reg_ops
            .iter()
            .filter_map(|o| match o {
                RegOp::Pop { slot } => Some(*slot),
                _ => None,
            })
            .collect();
        let mut cands: Vec<u32> = st
            .reg_ops
            .iter()
            .rev()
            .filter_map(|o| match o {
                RegOp::Push {
                    slot, empty: true, ..
                } => Some(*slot),
                _ => None,
            })
            .collect();
        // SAFETY: our own table, read outside a sync.
        unsafe { self.me().table(|t| cands.extend(t.null_slots())) };
        cands.retain(|s| !popping.contains(s));
        if cands.is_empty() {
            drop(st);
            return Err(self.misuse(
                "pop_reg",
                "address NULL is not registered (no null registration to pop)".into(),
            ));
        }
        st.reg_ops.push(RegOp::PopNull { cands });
        self.flag(FLAG_REGS);
        Ok(())
    }

    /// Resolve a registered local address to its newest slot.
    fn named(&self, op: &'static str, ptr: *const u8) -> Result<(u32, u32)> {
        // SAFETY: our own table, read outside a sync.
        let found = unsafe {
            self.me().table(|t| {
                t.find_addr(ptr, false, |_| false)
                    .map(|s| (s, t.entry(s).generation))
            })
        };
        if let Some(found) = found {
            self.named_cache.set(Some((ptr, found.0, found.1)));
            return Ok(found);
        }
        let pending = self.pending_push(|_, _, p| std::ptr::eq(p, ptr)).is_some();
        Err(self.misuse(
            op,
            if pending {
                format!("address {ptr:p} was registered in this superstep and becomes valid only after the next sync")
            } else {
                format!("address {ptr:p} is not registered")
            },
        ))
    }

    /// Buffered put of `src` into `pid`'s area registered under the local address `dst`, at
    /// byte `offset` (BSPlib's `bsp_put`).
    ///
    /// ```
    /// // BSPlib style: registered memory named by its address.
    /// let out = mbsp::run(2, |ctx| {
    ///     let mut buf = Box::new([0u8; 4]);
    ///     let addr = buf.as_mut_ptr();
    ///     // SAFETY: `buf` outlives the registration (popped and synced below) and no reference to it
    ///     // is held across a sync.
    ///     unsafe { ctx.push_reg_raw(addr, 4)? };
    ///     ctx.sync()?;
    ///     ctx.put_raw(1 - ctx.pid(), &[9, 9], addr, 1)?;
    ///     ctx.sync()?;
    ///     ctx.pop_reg_raw(addr)?;
    ///     ctx.sync()?;
    ///     Ok(*buf)
    /// }).unwrap();
    /// assert_eq!(out, vec![[0, 9, 9, 0]; 2]);
    /// ```
    #[inline]
    pub fn put_raw(&self, pid: usize, src: &[u8], dst: *const u8, offset: usize) -> Result<()> {
        if let Some(slot) = self.named_cached(dst) {
            if let Some(d) = self.fast_remote_slot(pid, slot, offset, src.len()) {
                return self.put_at(pid, d, src);
            }
        }
        self.live("put")?;
        let slot = self.named("put", dst)?;
        self.put_slot(pid, src, slot, offset)
    }

    /// The slot last resolved for the address `ptr` by [`named`](Ctx::named), if the
    /// registration tables have not changed since (the common case of a program that
    /// communicates through the same area many times in a row).
    #[inline]
    fn named_cached(&self, ptr: *const u8) -> Option<(u32, u32)> {
        match self.named_cache.get() {
            Some((p, slot, generation)) if std::ptr::eq(p, ptr) => Some((slot, generation)),
            _ => None,
        }
    }

    /// Buffered get of `len` bytes from `pid`'s area registered under the local address `src`,
    /// at byte `offset`, into `dst` at the next sync (BSPlib's `bsp_get`).
    ///
    /// # Safety
    /// `dst` must be valid for writing `len` bytes until the end of the next sync, and no
    /// reference to it may be held across that sync.
    pub unsafe fn get_raw(
        &self,
        pid: usize,
        src: *const u8,
        offset: usize,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        self.live("get")?;
        self.check_area("get", "the destination", dst, len)?;
        let slot = self.named("get", src)?;
        let s = self.remote("get", "from", pid, slot, offset, len)?;
        if len > 0 {
            self.queue_get(pid, slot.0, s, dst, len, None)?;
        }
        self.note_get(pid, len, false);
        Ok(())
    }

    /// Unbuffered put of `len` bytes at `src` (BSPlib's `bsp_hpput`), performed immediately.
    ///
    /// # Safety
    /// `src` must be valid for reading `len` bytes, and the destination range must not be
    /// accessed by anything else during the superstep.
    pub unsafe fn hpput_raw(
        &self,
        pid: usize,
        src: *const u8,
        dst: *const u8,
        offset: usize,
        len: usize,
    ) -> Result<()> {
        self.live("hpput")?;
        let slot = self.named("hpput", dst)?;
        // SAFETY: forwarded to the caller.
        unsafe { self.hpput_slot(pid, src, len, slot, offset) }
    }

    /// Unbuffered get (BSPlib's `bsp_hpget`), performed immediately.
    ///
    /// # Safety
    /// `dst` must be valid for writing `len` bytes; the source range must not be written by
    /// anyone during the superstep.
    pub unsafe fn hpget_raw(
        &self,
        pid: usize,
        src: *const u8,
        offset: usize,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        self.live("hpget")?;
        let slot = self.named("hpget", src)?;
        // SAFETY: forwarded to the caller.
        unsafe { self.immediate_get_slot("hpget", pid, slot, offset, dst, len) }
    }

    /// Blocking immediate get (MulticoreBSP's `bsp_direct_get`).
    ///
    /// # Safety
    /// As [`hpget_raw`](Ctx::hpget_raw).
    pub unsafe fn direct_get_raw(
        &self,
        pid: usize,
        src: *const u8,
        offset: usize,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        self.live("direct_get")?;
        let slot = self.named("direct_get", src)?;
        // SAFETY: forwarded to the caller.
        unsafe { self.immediate_get_slot("direct_get", pid, slot, offset, dst, len) }
    }

    /// Number of registrations in effect for this process (pushed and synced, not yet popped).
    ///
    /// ```
    /// mbsp::run(1, |ctx| {
    ///     let _a = ctx.push_reg(vec![0u8; 1])?;
    ///     assert_eq!(ctx.registrations(), 0, "not before the sync");
    ///     ctx.sync()?;
    ///     assert_eq!(ctx.registrations(), 1);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn registrations(&self) -> usize {
        // SAFETY: our own table, read outside a sync.
        unsafe { self.me().table(|t| t.len()) }
    }
}

fn other_run() -> String {
    "the registration belongs to another run (a parent run's registrations are not visible \
     inside a nested run, and registrations end with their run)"
        .into()
}
