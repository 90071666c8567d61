//! Bulk puts: the data of a large buffered put is kept once per destination, not once per
//! outbox set.
//!
//! ## Why
//!
//! A buffered put is copied twice: into the sender's outbox at the call, and out of it into the
//! destination in the receiver's sync. The outboxes come in sets used by supersteps in turn
//! (`outbox::SLOTS`), so that a sender can fill the next superstep's outboxes while receivers
//! still read the previous ones. For puts of megabytes that doubles the memory both copies
//! walk through, and they run out of the caches sooner: a copy alternating between two
//! destination buffers of a few MiB is markedly slower than one into the same buffer every time
//! (docs/benchmarks.md, "Bulk puts"), and where they stream from memory, a second set of
//! outboxes is memory faulted in once more. So a put of [`BULK_FROM`] bytes or more writes its
//! data into one area per destination ([`Bulk`]), reused every superstep, and only a four-word
//! record into the outbox (`Outbox::put_bulk`), which carries the area's address to the
//! receiver.
//!
//! ## Who touches what when
//!
//! * The sender's [`Bulk`] for destination `j` (its arena and stamp) is touched only by the
//!   sender: in its supersteps, and by `RunState::reuse` with exclusive access.
//! * Its bytes are read by `j` only in the sync that delivers the outbox records pointing into
//!   them (the sync that ends the superstep `stamp - 1` that wrote them), through the address
//!   and offsets in those records; `j` stores its count of completed syncs (`done::Done`,
//!   Release) after that sync's deliveries.
//! * The sender writes the area in a later superstep only once `j`'s count has reached the
//!   stamp (Acquire): then `j` has stopped reading it, and no record points into it any more
//!   (a record is delivered in the sync of its superstep or never). Until then a large put
//!   to `j` goes into the outbox as a small one does, except right after a full sync: `j` is
//!   then past the sync's barriers, delivering, and the sender waits for it (`Ctx::bulk_put`)
//!   rather than write a colder outbox. The area's safety rests on the check alone.
//! * Within one superstep the sender alone touches the area: `j` reads the records of
//!   superstep `s` only after the sender has finished `s` (barrier 1 of the sync, or its
//!   announcement in a lazy one). The area may grow, and so move, within the superstep:
//!   records hold offsets, and the outbox holds the area's address after the superstep's last
//!   bulk put.
//!
//! The check costs one load of `j`'s count per bulk put.

use crate::arena::Arena;
use crate::done::Done;
use crate::outbox::{PAGE, copy_bytes, pad_for};
use crate::shim::SharedCell;

/// Puts of at least `BULK_FROM` bytes are bulk puts; below, the outbox sets' memory stays in
/// the caches. There is no upper bound: puts of 128 MiB, which no cache holds, once went to
/// the outboxes, where each one's second superstep faulted in a second set of outboxes, and
/// where one process received from all, senders waited for its delivery before refilling the
/// area; since receivers share large copies with their senders (`share.rs`), the area is
/// faster in every 128 MiB cell of `collectives.c` (docs/benchmarks.md, "Bulk puts of any
/// size").
pub(crate) const BULK_FROM: usize = 256 << 10;

/// One sender's bulk area for one destination (module documentation).
#[derive(Default)]
pub(crate) struct Bulk {
    arena: Arena,
    /// 1 + the superstep that wrote the area last (0: never, or not in this run).
    stamp: u64,
}

/// A sender's bulk areas, by destination, made when first used.
pub(crate) struct BulkAreas(Box<[SharedCell<Option<Box<Bulk>>>]>);

// SAFETY: the cells are accessed as the module documentation states: written by their owner
// alone, and their bytes read by a destination only while the owner leaves them alone.
unsafe impl Sync for BulkAreas {}

impl BulkAreas {
    /// Areas for `p` destinations, none made yet.
    pub(crate) fn new(p: usize) -> Self {
        BulkAreas((0..p).map(|_| SharedCell::new(None)).collect())
    }

    /// The count of completed syncs `pid` must reach before the area for `pid` may be written
    /// in superstep `step`: that of the superstep that wrote it last, unless that is `step`
    /// (0 where nothing is written yet).
    ///
    /// # Safety
    /// The caller is the process owning these areas.
    pub(crate) unsafe fn free_after(&self, pid: usize, step: u64) -> u64 {
        // SAFETY: only the owner touches the `Bulk` (module documentation).
        let last = unsafe { self.0[pid].read(|b| b.as_ref().map_or(0, |b| b.stamp)) };
        if last == step + 1 { 0 } else { last }
    }

    /// Copy `src`, a put to `dst` in superstep `step` (the caller's, which owns these areas)
    /// to process `pid`, into the area for `pid`, if the area is free: `pid` has completed
    /// (`pid_done`, its count of completed syncs, from the run's `base`) the sync that
    /// delivers the area's last data.
    /// Returns where the data is (the area's address now, and the offset), or `None`, having
    /// copied nothing, if the area is not free or the memory cannot be allocated.
    ///
    /// # Safety
    /// The caller is the process owning these areas, in superstep `step`.
    pub(crate) unsafe fn put(
        &self,
        pid: usize,
        pid_done: &Done,
        base: u64,
        step: u64,
        dst: *mut u8,
        src: &[u8],
    ) -> Option<(*const u8, usize)> {
        let (cell, stamp) = (&self.0[pid], step + 1);
        // SAFETY: the caller owns the areas.
        if pid_done.since(base) < unsafe { self.free_after(pid, step) } {
            return None;
        }
        // SAFETY: `pid` has delivered every record into the area (its count reached the stamp
        // of the superstep that wrote it last), or that superstep is this one, whose records
        // `pid` does not read yet: the owner alone touches the area now.
        unsafe {
            cell.write(|b| {
                let b = b.get_or_insert_with(Box::default);
                if b.stamp != stamp {
                    b.arena.clear();
                    b.stamp = stamp;
                }
                let (from, to) = (src.as_ptr() as u64, dst as u64);
                let (off, pad) = b
                    .arena
                    .try_reserve_placed(0, src.len(), PAGE as usize, |at| pad_for(at, from, to))?;
                // SAFETY: the reservation holds the pad and `src.len()` bytes after it.
                copy_bytes(src.as_ptr(), b.arena.base_mut().add(off + pad), src.len());
                Some((b.arena.base(), off + pad))
            })
        }
    }

    /// Forget what the areas hold (exclusive access: a new run starts at superstep 0).
    pub(crate) fn reset(&mut self) {
        for cell in self.0.iter_mut() {
            cell.with_mut(|b| {
                if let Some(b) = b {
                    b.stamp = 0;
                    b.arena.clear();
                }
            });
        }
    }
}
