//! Registration slots.
//!
//! BSPlib's registration sequence is a stack of slots shared by all processes, each slot holding
//! one (address, size) per process. Because every process pushes and pops in the same order, a
//! slot can be named by an index that every process computes identically: pushes take the most
//! recently freed index (or a new one), pops free it at the sync. Each process owns a table of
//! its own entries, indexed by slot; a put to pid `r` through slot `s` reads `r`'s entry `s`.
//! A generation number per index tells a stale handle from a reused slot.
//!
//! A process's table is written only by its owner, inside the sync, between the first barrier
//! and a second barrier that every sync with registration changes has; other processes read it
//! only in computation phases. So plain memory suffices.

use std::any::TypeId;
use std::sync::Arc;

/// Keeps the memory of a registered area alive while any process may still reach it.
pub(crate) type Keep = Arc<dyn Send + Sync>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlotState {
    Free,
    /// Registered with an address and a size (possibly 0).
    Active,
    /// Registered as "nothing here" (a null registration).
    Empty,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
    pub(crate) generation: u32,
    pub(crate) state: SlotState,
}

const FREE: Entry = Entry {
    ptr: std::ptr::null_mut(),
    len: 0,
    generation: 0,
    state: SlotState::Free,
};

/// The element type of a registration: processes must register the same type in a slot
/// (their sizes may differ). Raw (byte) registrations have no type.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ElemType {
    pub(crate) id: Option<TypeId>,
    pub(crate) name: &'static str,
}

impl ElemType {
    /// The element type `T` of a typed registration.
    pub(crate) fn of<T: 'static>() -> Self {
        ElemType {
            id: Some(TypeId::of::<T>()),
            name: std::any::type_name::<T>(),
        }
    }

    /// A raw registration (bytes named by address).
    pub(crate) const RAW: ElemType = ElemType {
        id: None,
        name: "raw bytes",
    };
}

/// A registration change requested in the current superstep, applied at the next sync.
pub(crate) enum RegOp {
    Push {
        slot: u32,
        generation: u32,
        ptr: *mut u8,
        len: usize,
        empty: bool,
        ty: ElemType,
        keep: Option<Keep>,
    },
    Pop {
        slot: u32,
    },
    /// A pop of the null address: it pops the registration the other processes pop, which must
    /// be one of these null registrations (newest first). Resolved at the sync.
    PopNull {
        cands: Vec<u32>,
    },
}

/// The slot of a [`RegOp::PopNull`] in its signature.
pub(crate) const WILD: u32 = u32::MAX;

/// What processes must agree on about one registration call.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RegSig {
    pub(crate) push: bool,
    pub(crate) slot: u32,
    pub(crate) ty: ElemType,
}

impl PartialEq for RegSig {
    fn eq(&self, o: &Self) -> bool {
        self.push == o.push
            && self.slot == o.slot
            && (!self.push || (self.ty.id == o.ty.id && self.ty.name == o.ty.name))
    }
}

impl RegOp {
    /// The part that must agree between processes.
    pub(crate) fn signature(&self) -> RegSig {
        match self {
            RegOp::Push { slot, ty, .. } => RegSig {
                push: true,
                slot: *slot,
                ty: *ty,
            },
            RegOp::Pop { slot } => RegSig {
                push: false,
                slot: *slot,
                ty: ElemType::RAW,
            },
            RegOp::PopNull { .. } => RegSig {
                push: false,
                slot: WILD,
                ty: ElemType::RAW,
            },
        }
    }
}

/// Describe a sequence of registration calls for an error message.
pub(crate) fn describe(ops: &[RegSig]) -> String {
    if ops.is_empty() {
        return "no push_reg/pop_reg".into();
    }
    let parts: Vec<String> = ops
        .iter()
        .map(|s| {
            if s.push {
                format!("push_reg of {} (slot {})", s.ty.name, s.slot)
            } else if s.slot == WILD {
                "pop_reg of NULL".to_string()
            } else {
                format!("pop_reg (slot {})", s.slot)
            }
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// The most entries a run state's lists keep room for from one run to the next (the tables,
/// [`RegTable::clear`]; the request lists, `Coll::unpublish`; each process's lists of changes,
/// free slots, gets and message senders, `ctx::Lists`): a nested run in a loop that registers
/// and communicates allocates nothing once warm, and a run that registered thousands of areas
/// leaves no large lists behind.
pub(crate) const KEPT_ROOM: usize = 64;

/// One process's registration entries. Each entry has a cache line of its own: every put to
/// this process reads one, and a heap neighbour written by the owner (an outbox arena growing
/// during the superstep, say) would otherwise make every such read a cache miss.
#[derive(Default)]
pub(crate) struct RegTable {
    pub(crate) entries: Vec<crossbeam_utils::CachePadded<Entry>>,
    keep: Vec<Option<Keep>>,
    /// The element type's name of each slot's registration (checkpoints save it).
    types: Vec<&'static str>,
    /// Registered slots in push order (newest last), for lookups by address.
    pub(crate) order: Vec<u32>,
}

impl RegTable {
    /// Forget every registration (a run that has ended). An empty table is left untouched: it
    /// is another process's, and a line written here would cross to that process's core when
    /// it next enters a run (`shim::Zero`). A table of up to [`KEPT_ROOM`] slots keeps its
    /// vectors for the next run on this state: a nested run in a loop that registers would
    /// otherwise free them here (from the starter's thread, memory the process's thread
    /// allocated) and allocate them again at its first `push_reg`.
    pub(crate) fn clear(&mut self) {
        if self.entries.capacity() > KEPT_ROOM {
            *self = RegTable::default();
            return;
        }
        if !self.entries.is_empty() {
            self.entries.clear();
        }
        if !self.keep.is_empty() {
            self.keep.clear();
        }
        if !self.types.is_empty() {
            self.types.clear();
        }
        if !self.order.is_empty() {
            self.order.clear();
        }
    }

    #[inline]
    pub(crate) fn entry(&self, slot: u32) -> &Entry {
        self.entries.get(slot as usize).map_or(&FREE, |e| e)
    }

    /// The newest registered slot whose address is `addr`, skipping slots for which `skip`
    /// holds (e.g. those already being popped). Null registrations match only if
    /// `include_null` (they can be popped, but never name a communication target).
    pub(crate) fn find_addr(
        &self,
        addr: *const u8,
        include_null: bool,
        skip: impl Fn(u32) -> bool,
    ) -> Option<u32> {
        self.order.iter().rev().copied().find(|&s| {
            let e = &self.entries[s as usize];
            std::ptr::eq(e.ptr, addr) && (include_null || e.state == SlotState::Active) && !skip(s)
        })
    }

    /// The registered slots whose areas overlap `len` bytes at `addr`.
    pub(crate) fn overlapping(
        &self,
        addr: *const u8,
        len: usize,
    ) -> impl Iterator<Item = u32> + '_ {
        let (a, b) = (addr as usize, addr as usize + len);
        self.order.iter().copied().filter(move |&s| {
            let e = &self.entries[s as usize];
            let (x, y) = (e.ptr as usize, e.ptr as usize + e.len);
            e.state == SlotState::Active && x < b && a < y
        })
    }

    /// The null registrations, newest first.
    pub(crate) fn null_slots(&self) -> impl Iterator<Item = u32> + '_ {
        self.order
            .iter()
            .rev()
            .copied()
            .filter(|&s| self.entries[s as usize].state == SlotState::Empty)
    }

    /// What keeps the memory registered in `slot` alive (typed registrations only).
    pub(crate) fn keep(&self, slot: u32) -> Option<Keep> {
        self.keep.get(slot as usize).and_then(Clone::clone)
    }

    /// The element type's name of the registration in `slot`.
    pub(crate) fn type_name(&self, slot: u32) -> &'static str {
        self.types.get(slot as usize).copied().unwrap_or("")
    }

    /// Number of registered slots.
    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    /// Apply one requested change. Popped memory goes to `graveyard`, to be dropped once no
    /// process can reach it any more.
    pub(crate) fn apply(&mut self, op: RegOp, graveyard: &mut Vec<Keep>) {
        match op {
            RegOp::Push {
                slot,
                generation,
                ptr,
                len,
                empty,
                keep,
                ty,
                ..
            } => {
                let s = slot as usize;
                if self.entries.len() <= s {
                    self.entries.resize(s + 1, FREE.into());
                    self.keep.resize_with(s + 1, || None);
                    self.types.resize(s + 1, "");
                }
                self.types[s] = ty.name;
                *self.entries[s] = Entry {
                    ptr,
                    len,
                    generation,
                    state: if empty {
                        SlotState::Empty
                    } else {
                        SlotState::Active
                    },
                };
                self.keep[s] = keep;
                self.order.push(slot);
            }
            RegOp::PopNull { .. } => unreachable!("a NULL pop is resolved at the sync"),
            RegOp::Pop { slot } => {
                let s = slot as usize;
                self.entries[s].state = SlotState::Free;
                self.entries[s].ptr = std::ptr::null_mut();
                if let Some(k) = self.keep[s].take() {
                    graveyard.push(k);
                }
                if let Some(pos) = self.order.iter().rposition(|&o| o == slot) {
                    self.order.remove(pos);
                }
            }
        }
    }
}

/// The slot indices a process hands out; identical on every process that makes the same calls.
#[derive(Default)]
pub(crate) struct SlotAlloc {
    free: Vec<u32>,
    next: u32,
}

impl SlotAlloc {
    pub(crate) fn alloc(&mut self) -> u32 {
        self.free.pop().unwrap_or_else(|| {
            self.next += 1;
            self.next - 1
        })
    }

    pub(crate) fn release(&mut self, slot: u32) {
        self.free.push(slot);
    }

    /// Every slot free again (a new run), the free list's room kept up to [`KEPT_ROOM`].
    pub(crate) fn reset(&mut self) {
        if self.free.capacity() > KEPT_ROOM {
            self.free = Vec::new();
        }
        self.free.clear();
        self.next = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(slot: u32, generation: u32, addr: usize, len: usize) -> RegOp {
        RegOp::Push {
            slot,
            generation,
            ptr: addr as *mut u8,
            len,
            empty: false,
            ty: ElemType::RAW,
            keep: None,
        }
    }

    #[test]
    fn newest_registration_of_an_address_shadows_older_ones() {
        let mut t = RegTable::default();
        let mut g = Vec::new();
        t.apply(push(0, 1, 0x1000, 8), &mut g);
        t.apply(push(1, 1, 0x2000, 8), &mut g);
        t.apply(push(2, 1, 0x1000, 4), &mut g);
        assert_eq!(t.find_addr(0x1000 as *const u8, false, |_| false), Some(2));
        assert_eq!(t.find_addr(0x1000 as *const u8, false, |s| s == 2), Some(0));
        t.apply(RegOp::Pop { slot: 2 }, &mut g);
        assert_eq!(t.find_addr(0x1000 as *const u8, false, |_| false), Some(0));
        assert_eq!(t.entry(2).state, SlotState::Free);
        assert_eq!(t.entry(99).state, SlotState::Free);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn slot_allocation_reuses_freed_indices_deterministically() {
        let mut a = SlotAlloc::default();
        assert_eq!((a.alloc(), a.alloc(), a.alloc()), (0, 1, 2));
        a.release(1);
        a.release(0);
        assert_eq!((a.alloc(), a.alloc(), a.alloc()), (0, 1, 3));
    }
}
