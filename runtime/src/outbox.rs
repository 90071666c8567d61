//! What one process sends to one destination in one superstep.
//!
//! Buffered puts and messages are copied into the sender's outbox for that destination; in the
//! sync the *receiver* copies the puts into its own memory (NUMA-local writes, no locks, no
//! per-request allocation) and reads the messages in place during the next superstep. Each
//! process keeps two sets of outboxes, one per superstep parity, so that a sender can fill the
//! next superstep's outboxes while slow receivers still read the previous ones.

use crate::arena::{Arena, align8};

/// A buffered put: `len` bytes at `data[off..]` go to `dst`.
#[derive(Clone, Copy)]
pub(crate) struct PutOp {
    pub(crate) dst: *mut u8,
    pub(crate) off: usize,
    pub(crate) len: usize,
}

/// A message: tag at `data[off..off + tagsize]`, payload at `data[off + align8(tagsize)..]`.
#[derive(Clone, Copy)]
pub(crate) struct MsgOp {
    pub(crate) off: usize,
    pub(crate) len: usize,
}

#[derive(Default)]
pub(crate) struct Outbox {
    /// 1 + the superstep this outbox was last written in (0 = never).
    pub(crate) stamp: u64,
    pub(crate) puts: Vec<PutOp>,
    pub(crate) msgs: Vec<MsgOp>,
    pub(crate) msg_bytes: usize,
    pub(crate) data: Arena,
}

impl Outbox {
    pub(crate) fn clear(&mut self) {
        self.puts.clear();
        self.msgs.clear();
        self.msg_bytes = 0;
        self.data.clear();
    }

    #[inline]
    pub(crate) fn put(&mut self, dst: *mut u8, src: &[u8]) {
        let off = self.data.push(src);
        self.puts.push(PutOp {
            dst,
            off,
            len: src.len(),
        });
    }

    /// Queue a message whose tag has `tag.len()` bytes (the superstep's tag size).
    ///
    /// # Safety
    /// `payload` must be valid for reading `len` bytes.
    #[inline]
    pub(crate) unsafe fn send(&mut self, tag: &[u8], payload: *const u8, len: usize) {
        let off = self.data.reserve(align8(tag.len()) + len);
        let base = self.data.base_mut();
        // SAFETY: `reserve` made room for the aligned tag and the payload.
        unsafe {
            std::ptr::copy_nonoverlapping(tag.as_ptr(), base.add(off), tag.len());
            std::ptr::copy_nonoverlapping(payload, base.add(off + align8(tag.len())), len);
        }
        self.msgs.push(MsgOp { off, len });
        self.msg_bytes += len;
    }

    /// Copy every put into its destination.
    ///
    /// # Safety
    /// Every destination must be valid for writing and not aliased by a live reference; the
    /// sync protocol guarantees this for destinations owned by the calling receiver.
    pub(crate) unsafe fn deliver_puts(&self) {
        let base = self.data.base();
        for op in &self.puts {
            // SAFETY: caller guarantees the destination; the source lies in our arena.
            unsafe { std::ptr::copy_nonoverlapping(base.add(op.off), op.dst, op.len) };
        }
    }

    /// Tag and payload of message `i` for tag size `tagsize`.
    #[inline]
    pub(crate) fn message(&self, i: usize, tagsize: usize) -> (&[u8], &[u8]) {
        let m = self.msgs[i];
        (
            self.data.bytes(m.off, tagsize),
            self.data.bytes(m.off + align8(tagsize), m.len),
        )
    }
}
