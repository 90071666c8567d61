//! What one process sends to one destination in one superstep.
//!
//! Buffered puts and messages are copied into the sender's outbox for that destination, as
//! records in two append-only arenas: a put is `[dst address][length][data]`, a message
//! `[payload length][tag][payload]`, each part 8-byte aligned. In the sync the *receiver* walks
//! the puts and copies them into its own memory (NUMA-local writes, no locks, no per-request
//! allocation, header and data on the same cache lines), and during the next superstep reads the
//! messages in place. Each process keeps two sets of outboxes, one per superstep parity, so that
//! a sender can fill the next superstep's outboxes while slow receivers still read the previous
//! ones. Outboxes are cache-line aligned so that a receiver checking the stamp of an outbox that
//! was not written this superstep hits in its cache; the first puts of a superstep (up to 48
//! bytes of records, e.g. two one-word puts) are stored inline in that same cache line, so a
//! small put costs the receiver a single cache-line transfer.

use crate::arena::{Arena, align8};

const WORD: usize = std::mem::size_of::<u64>();

/// Words of put records stored inline, next to the stamp (stamp + length + inline = 64 bytes).
const INLINE: usize = 6;

#[derive(Default)]
#[repr(C)]
pub(crate) struct Outbox {
    /// 1 + the superstep this outbox was last written in (0 = never).
    pub(crate) stamp: u64,
    /// Bytes of put records in `inline`.
    inline_len: usize,
    inline: [u64; INLINE],
    puts: Arena,
    msgs: Arena,
    pub(crate) msg_count: usize,
    pub(crate) msg_bytes: usize,
}

impl Outbox {
    pub(crate) fn clear(&mut self) {
        self.inline_len = 0;
        self.puts.clear();
        self.msgs.clear();
        self.msg_count = 0;
        self.msg_bytes = 0;
    }

    /// Queue a put of `src` to `dst`.
    #[inline]
    pub(crate) fn put(&mut self, dst: *mut u8, src: &[u8]) {
        let rec = 2 * WORD + align8(src.len());
        let at = if self.inline_len + rec <= INLINE * WORD {
            self.inline_len += rec;
            // SAFETY: in bounds of `inline` (checked above).
            unsafe { (self.inline.as_mut_ptr() as *mut u8).add(self.inline_len - rec) }
        } else {
            let off = self.puts.reserve(rec);
            // SAFETY: `reserve` made room for the record.
            unsafe { self.puts.base_mut().add(off) }
        };
        // SAFETY: `at` has room for the header and the data and is 8-aligned.
        unsafe {
            let h = at as *mut usize;
            h.write(dst as usize);
            h.add(1).write(src.len());
            std::ptr::copy_nonoverlapping(src.as_ptr(), at.add(2 * WORD), src.len());
        }
    }

    /// Queue a message whose tag has `tag.len()` bytes (the superstep's tag size).
    ///
    /// # Safety
    /// `payload` must be valid for reading `len` bytes.
    #[inline]
    pub(crate) unsafe fn send(&mut self, tag: &[u8], payload: *const u8, len: usize) {
        let off = self.msgs.reserve(WORD + align8(tag.len()) + len);
        let base = self.msgs.base_mut();
        // SAFETY: `reserve` made room for the length, the aligned tag and the payload.
        unsafe {
            (base.add(off) as *mut usize).write(len);
            std::ptr::copy_nonoverlapping(tag.as_ptr(), base.add(off + WORD), tag.len());
            std::ptr::copy_nonoverlapping(payload, base.add(off + WORD + align8(tag.len())), len);
        }
        self.msg_count += 1;
        self.msg_bytes += len;
    }

    /// Copy every put into its destination.
    ///
    /// # Safety
    /// Every destination must be valid for writing and not aliased by a live reference; the
    /// sync protocol guarantees this for destinations owned by the calling receiver.
    pub(crate) unsafe fn deliver_puts(&self) {
        // SAFETY: forwarded to the caller.
        unsafe {
            Self::deliver(self.inline.as_ptr() as *const u8, self.inline_len);
            Self::deliver(self.puts.base(), self.puts.len());
        }
    }

    /// # Safety
    /// `base .. base + end` holds put records; their destinations are valid (see above).
    unsafe fn deliver(base: *const u8, end: usize) {
        let mut off = 0;
        while off < end {
            // SAFETY: records written by `put`; the destination is the caller's promise.
            unsafe {
                let h = base.add(off) as *const usize;
                let (dst, len) = (h.read() as *mut u8, h.add(1).read());
                std::ptr::copy_nonoverlapping(base.add(off + 2 * WORD), dst, len);
                off += 2 * WORD + align8(len);
            }
        }
    }

    /// The message at byte offset `off` of the message records, for tag size `tagsize`:
    /// (tag, payload, offset of the next message or `None` after the last).
    #[inline]
    pub(crate) fn message(&self, off: usize, tagsize: usize) -> (&[u8], &[u8], Option<usize>) {
        // SAFETY: `off` is the start of a record written by `send` (the queue walks records in
        // order), so the length word is initialised and aligned.
        let len = unsafe { (self.msgs.base().add(off) as *const usize).read() };
        let tag_at = off + WORD;
        let payload_at = tag_at + align8(tagsize);
        let next = payload_at + align8(len);
        (
            self.msgs.bytes(tag_at, tagsize),
            self.msgs.bytes(payload_at, len),
            (next < self.msgs.len()).then_some(next),
        )
    }
}
