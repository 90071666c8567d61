//! The requests a process makes in a superstep that wait for its sync: buffered gets,
//! hpsends whose payload is copied then, and the collective requests (registration changes, a
//! new tag size) every process publishes for the others to check. Data only, below the
//! context and the engines that carry the requests out.

use crate::registry::{KEPT_ROOM, Keep, RegSig};

/// The collective requests of one superstep, published for validation at the sync.
#[derive(Clone, Default)]
pub(crate) struct Coll {
    /// 1 + the superstep they belong to (0 = none yet).
    pub(crate) stamp: u64,
    pub(crate) regs: Vec<RegSig>,
    /// The candidate slots of each NULL pop, in order.
    pub(crate) wild: Vec<Vec<u32>>,
    pub(crate) tagsize: Option<usize>,
}

impl Coll {
    /// Mark the requests unpublished for a new run on the same state (the owner, entering
    /// it), keeping the lists' room when they are small: a nested run that registers would
    /// otherwise allocate them again at its first registering sync. Requests never published
    /// are left untouched (their line is not written).
    pub(crate) fn unpublish(&mut self) {
        if self.stamp == 0 {
            return;
        }
        if self.regs.capacity() > KEPT_ROOM || self.wild.capacity() > KEPT_ROOM {
            *self = Coll::default();
            return;
        }
        self.stamp = 0;
        self.regs.clear();
        self.wild.clear();
        self.tagsize = None;
    }
}

/// A buffered get: read `len` bytes at `src` into the get buffer, later write them to `dst`.
pub(crate) struct GetOp {
    /// The process read from: the rank to ask, for the rank engine. The thread engine reads
    /// `src` directly and never needs it (so, in a build without MPI, nothing reads it).
    #[allow(dead_code)]
    pub(crate) from: u32,
    pub(crate) src: *const u8,
    pub(crate) dst: *mut u8,
    pub(crate) len: usize,
    pub(crate) buf_off: usize,
    /// The get-source bits of this process's registered slots that overlap the destination:
    /// if no get of the superstep reads any of them, the data is copied straight to the
    /// destination, without the get buffer.
    pub(crate) dst_bits: u32,
    /// Copied straight (between the barriers) rather than through the buffer.
    pub(crate) direct: bool,
    /// Keeps a typed destination alive until the write.
    pub(crate) _keep: Option<Keep>,
}

/// An hpsend whose payload is copied at the sync, into the record reserved for it (with its
/// tag) in the outbox for `pid` when `hpsend` was called.
pub(crate) struct HpSend {
    pub(crate) pid: usize,
    /// Where the payload goes in that outbox's message records.
    pub(crate) at: usize,
    pub(crate) payload: *const u8,
    pub(crate) len: usize,
}
