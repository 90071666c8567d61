//! What one process sends to one destination in one superstep.
//!
//! Buffered puts and messages are copied into the sender's outbox for that destination, as
//! records in two append-only arenas: a put is `[length << 48 | dst address][data]` (a 16-byte
//! record for one word; puts of [`PAD_FROM`] bytes or more, and addresses beyond 48 bits, use
//! the long form `[LONG << 48 | pad][dst address][length][pad bytes][data]`), a message
//! `[pad << 50 | payload length][tag][pad bytes][payload]`, each part 8-byte aligned. The pad of
//! a put of [`PAD_FROM`] bytes or more places its data where neither copy of it (from the
//! caller's source at the call, to the destination at the sync) reads and writes addresses that
//! agree in their low 12 bits ([`pad_for`]); the pad of a message of as many bytes keeps its
//! payload off its source's; other records have none. A bulk put (thread engine, [`BULK_FROM`]
//! bytes or more: `engine/threads/bulk.rs`) keeps its data in the sender's bulk area for that
//! destination, one per destination rather than one per outbox set, and its record here is
//! `[LONG << 48 | BULK][dst address][length][offset in the bulk area]`.
//! An owned message (`owned.rs`) is a message record whose length word is
//! flagged and whose body is `[index]` into the outbox's handles (the buffer handed over, not
//! copied) or, over MPI ranks, `[element size][align << 32 | name length][name][payload]` (its
//! bytes, copied). In the sync the *receiver* walks
//! the puts and copies them into its own memory (NUMA-local writes, no locks, no per-request
//! allocation, header and data on the same cache lines), and during the next superstep reads the
//! messages in place. Each process keeps two sets of outboxes used by supersteps in turn (three
//! with more processes than cores: [`SLOTS`]), so that a sender can fill the next superstep's
//! outboxes while slow receivers still read the previous ones. Outboxes are cache-line aligned so that a receiver checking the stamp of an outbox that
//! was not written this superstep hits in its cache; the first puts of a superstep (up to 48
//! bytes of records, e.g. three one-word puts) are stored inline in that same cache line, so a
//! small put costs the receiver a single cache-line transfer.

use crate::arena::{Arena, align8};
use crate::pool::Handle;
use bytemuck::Pod;

/// The most sets of outboxes a process has, used by supersteps in turn
/// (`ctx::RunShared::slot`). A set is refilled as many supersteps after it was filled as the run
/// has sets, so a lazy sender may run that many supersteps less one ahead of its receivers'
/// acknowledgements (`engine/threads/lazy.rs`). Runs with more processes than cores use
/// `SLOTS`: a process then runs several supersteps per turn on its core instead of yielding
/// in nearly every one. Other runs use two, which keeps the memory of buffered puts at two
/// supersteps' worth (of puts under 256 KiB: larger ones wait in one area per destination
/// where they can, `engine/threads/bulk.rs`).
pub(crate) const SLOTS: usize = 3;

const WORD: usize = std::mem::size_of::<u64>();

/// The top 16 bits of a short record's header: its length; this value marks a long record.
const LONG: u64 = 0xFFFF;
const SHIFT: u32 = 48;

/// The header of a put record of `len` bytes to `dst`: one word, or three (the long form, its
/// pad still 0: always from [`PAD_FROM`] bytes, which get a pad).
#[inline(always)]
fn header(dst: *mut u8, len: usize) -> ([u64; 3], usize) {
    let d = dst as u64;
    if len < PAD_FROM && d >> SHIFT == 0 {
        ([(len as u64) << SHIFT | d, 0, 0], WORD)
    } else {
        ([LONG << SHIFT, d, len as u64], 3 * WORD)
    }
}

/// Puts of this many bytes or more are large: their receiver copies them with a function of its
/// own ([`Outbox::deliver_puts_with`]), and their outbox says it holds one
/// ([`Outbox::large`]). Below, the copy is too short to split between cores.
pub(crate) const LARGE: usize = 512 << 10;

/// Puts of this many bytes or more get the long header and a pad before their data
/// ([`pad_for`]); below, the pad could cost more memory than the put.
pub(crate) const PAD_FROM: usize = 1024;

/// How far, modulo a page, the data of a long put stays from its source and destination: a copy
/// whose source and destination addresses agree in their low 12 bits, or nearly, has its loads
/// wait for its own earlier stores to the same page offset (4K aliasing). A 4 KiB put whose
/// source and outbox data were a few bytes apart modulo 4096 was copied several times slower
/// than one with them half a page apart (AMD EPYC; docs/benchmarks.md), the more so when the
/// outbox lines must first be taken back from the receiver's cache, as they must in every
/// superstep that refills them.
const FAR: u64 = 512;
pub(crate) const PAGE: u64 = 4096;

/// The flag, in a long put record's marker word (whose low bits hold a pad below [`PAGE`]),
/// of a bulk put: its data is in the sender's bulk area at the offset in its fourth word.
const BULK: u64 = 1 << 47;

/// Whether addresses `a` and `b` are less than [`FAR`] apart modulo a page.
fn near(a: u64, b: u64) -> bool {
    !(FAR..=PAGE - FAR).contains(&(a.wrapping_sub(b) % PAGE))
}

/// The pad (a multiple of 8, below [`PAGE`]) that places the data of a long put, which would
/// start at `at`, at least [`FAR`] bytes away, modulo a page, from both its source `src` and its
/// destination `dst`; and, where that allows, at the source's offset within a cache line (a
/// copy between addresses of the same alignment moves whole lines). Some pad below `PAGE`
/// always fits: each address rules out less than a quarter of the page offsets.
pub(crate) fn pad_for(at: u64, src: u64, dst: u64) -> u64 {
    let first = (src & !7).wrapping_sub(at) % 64;
    (0..PAGE / 8)
        .map(|k| (first + 64 * k) % PAGE)
        .chain((0..PAGE / 8).map(|k| 8 * k))
        .find(|&pad| !near(at + pad, src) && !near(dst, at + pad))
        .unwrap_or(0)
}

/// Append a short put record of `src` to `dst` to `words[*len..]` if it fits (and the short
/// form applies); for a put that rides in a barrier line.
#[inline]
pub(crate) fn push_short(words: &mut [u64], len: &mut usize, dst: *mut u8, src: &[u8]) -> bool {
    let n = 1 + align8(src.len()) / WORD;
    let d = dst as u64;
    if *len + n > words.len() || d >> SHIFT != 0 {
        return false;
    }
    words[*len] = (src.len() as u64) << SHIFT | d;
    // SAFETY: `src.len()` bytes fit in the `n - 1` words after the header.
    unsafe {
        copy_bytes(
            src.as_ptr(),
            words[*len + 1..].as_mut_ptr() as *mut u8,
            src.len(),
        )
    };
    *len += n;
    true
}

/// Flags of a message record's length word: an owned message handed over as a buffer (the
/// word after the tag indexes the outbox's handles) ...
pub(crate) const HANDLE: u64 = 1 << 63;
/// ... or an owned message copied as bytes, with its element type (over MPI ranks).
pub(crate) const BYTES: u64 = 1 << 62;
/// Bits 50..62 of a plain message's length word: the pad before its payload (the payload's
/// place is chosen as a long put's data is: [`pad_for`]).
const PAD_SHIFT: u32 = 50;
const PAD_BITS: u64 = 0xFFF << PAD_SHIFT;
/// The payload length in a message record's length word.
const LEN: u64 = (1 << PAD_SHIFT) - 1;

/// What a message record holds besides its tag and payload.
pub(crate) enum Kind<'a> {
    /// An ordinary message (`send`, `hpsend`...).
    Plain,
    /// An owned message handed over as a buffer.
    Handle(&'a Handle),
    /// An owned message copied as bytes: its element type's size and name.
    Bytes { size: usize, name: &'a str },
}

/// A message record read back: see [`Outbox::record`].
pub(crate) struct Record<'a> {
    pub(crate) tag: &'a [u8],
    pub(crate) payload: &'a [u8],
    /// Offset of the next record, or `None` after the last.
    pub(crate) next: Option<usize>,
    pub(crate) kind: Kind<'a>,
}

/// Words of put records stored inline, next to the stamp (stamp + length + inline = 64 bytes).
pub(crate) const INLINE: usize = 6;

/// Copy `len` bytes, without a call into `memcpy` for the sizes of single values.
///
/// # Safety
/// As [`std::ptr::copy_nonoverlapping`]; no alignment is required.
#[inline(always)]
pub(crate) unsafe fn copy_bytes(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: forwarded to the caller; unaligned accesses of the exact length.
    unsafe {
        match len {
            8 => dst
                .cast::<u64>()
                .write_unaligned(src.cast::<u64>().read_unaligned()),
            4 => dst
                .cast::<u32>()
                .write_unaligned(src.cast::<u32>().read_unaligned()),
            16 => dst
                .cast::<u128>()
                .write_unaligned(src.cast::<u128>().read_unaligned()),
            // A few words (a collective's header and value, a small struct): the first and the
            // last 16 or 8 bytes, overlapping where shorter, instead of a call into `memcpy`.
            17..=32 => copy_ends::<u128>(src, dst, len),
            9..=15 => copy_ends::<u64>(src, dst, len),
            _ => crate::stream::copy_any(src, dst, len),
        }
    }
}

/// Copy `len` bytes as the first and the last `size_of::<W>()` (which overlap unless `len` is
/// twice that): both loads before both stores.
///
/// # Safety
/// As [`copy_bytes`], and `size_of::<W>() <= len <= 2 * size_of::<W>()`.
#[inline(always)]
unsafe fn copy_ends<W: Copy>(src: *const u8, dst: *mut u8, len: usize) {
    let w = size_of::<W>();
    debug_assert!(w <= len && len <= 2 * w);
    // SAFETY: both words lie inside the `len` bytes at `src` and at `dst` (the caller's bounds).
    unsafe {
        let (a, b) = (
            src.cast::<W>().read_unaligned(),
            src.add(len - w).cast::<W>().read_unaligned(),
        );
        dst.cast::<W>().write_unaligned(a);
        dst.add(len - w).cast::<W>().write_unaligned(b);
    }
}

#[derive(Default)]
#[repr(C)]
pub(crate) struct Outbox {
    /// 1 + the superstep this outbox was last written in (0 = never).
    pub(crate) stamp: u64,
    /// Bytes of put records in `inline`.
    pub(crate) inline_len: usize,
    pub(crate) inline: [u64; INLINE],
    pub(crate) puts: Arena,
    pub(crate) msgs: Arena,
    pub(crate) msg_count: usize,
    pub(crate) msg_bytes: usize,
    /// The buffers of owned messages handed over in this outbox, by index (see `owned.rs`).
    pub(crate) owned: Vec<Handle>,
    /// Put records written (a lazy receiver counts puts and messages).
    pub(crate) put_count: usize,
    /// The address of the sender's bulk area for this destination if a bulk record is among
    /// the puts, else 0 (`engine/threads/bulk.rs`): the area's place after the superstep's
    /// last bulk put, where the area stays until the receiver has delivered them.
    pub(crate) bulk: usize,
    /// A put of [`LARGE`] bytes or more is among the puts (its receiver may share the copy
    /// with this sender: `engine/threads/share.rs`).
    pub(crate) large: bool,
}

impl Outbox {
    pub(crate) fn clear(&mut self) {
        self.inline_len = 0;
        self.puts.clear();
        self.msgs.clear();
        self.msg_count = 0;
        self.msg_bytes = 0;
        self.put_count = 0;
        self.bulk = 0;
        self.large = false;
        if !self.owned.is_empty() {
            self.free_owned();
            self.owned.clear();
        }
    }

    /// Free the buffers of owned messages that no receiver moved out (each exactly once: a
    /// handle is emptied by whoever takes or frees its buffer).
    pub(crate) fn free_owned(&self) {
        for h in &self.owned {
            h.free();
        }
    }

    /// The put records of this outbox, if it holds nothing else and they all fit in its first
    /// cache line (then a lane can carry them: `engine/threads/lane.rs`).
    #[inline]
    pub(crate) fn inline_only(&self) -> Option<&[u64]> {
        (self.msg_count == 0 && self.puts.len() == 0)
            .then(|| &self.inline[..self.inline_len / WORD])
    }

    /// The put and message records in this outbox (what a lazy receiver counts).
    #[inline]
    pub(crate) fn records(&self) -> u64 {
        (self.put_count + self.msg_count) as u64
    }

    /// Queue the put records of `words` (the format of [`push_short`], as a barrier line
    /// carries them) as puts of this outbox; `None` as for [`put`](Outbox::put).
    pub(crate) fn put_records(&mut self, words: &[u64]) -> Option<()> {
        let mut at = 0;
        while at < words.len() {
            let w = words[at];
            let (dst, len) = ((w & ((1 << SHIFT) - 1)) as *mut u8, (w >> SHIFT) as usize);
            let data = &words[at + 1..at + 1 + align8(len) / WORD];
            // SAFETY: the record's data words hold `len` bytes.
            let src = unsafe { std::slice::from_raw_parts(data.as_ptr() as *const u8, len) };
            self.put(dst, src)?;
            at += 1 + data.len();
        }
        Some(())
    }

    /// Queue a put of `src` to `dst`; `None` if the memory for it cannot be allocated
    /// (nothing is queued then).
    #[inline]
    pub(crate) fn put(&mut self, dst: *mut u8, src: &[u8]) -> Option<()> {
        let (mut head, hlen) = header(dst, src.len());
        // A slice has at most isize::MAX bytes: the record size cannot overflow.
        let rec = hlen + align8(src.len());
        let (at, pad) = if self.inline_len + rec <= INLINE * WORD {
            self.inline_len += rec;
            // SAFETY: in bounds of `inline` (checked above).
            let at = unsafe { (self.inline.as_mut_ptr() as *mut u8).add(self.inline_len - rec) };
            (at, 0)
        } else if src.len() < PAD_FROM {
            let off = self.puts.try_reserve(rec)?;
            // SAFETY: `try_reserve` made room for the record.
            (unsafe { self.puts.base_mut().add(off) }, 0)
        } else {
            let (from, to) = (src.as_ptr() as u64, dst as u64);
            let (off, pad) =
                self.puts
                    .try_reserve_placed(hlen, src.len(), PAGE as usize, |at| {
                        pad_for(at, from, to)
                    })?;
            head[0] |= pad as u64;
            // SAFETY: `try_reserve_placed` made room for the record and its pad.
            (unsafe { self.puts.base_mut().add(off) }, pad)
        };
        // SAFETY: `at` has room for the header, the pad and the data and is 8-aligned.
        unsafe {
            let h = at as *mut u64;
            h.write(head[0]);
            if hlen > WORD {
                h.add(1).write(head[1]);
                h.add(2).write(head[2]);
            }
            copy_bytes(src.as_ptr(), at.add(hlen + pad), src.len());
        }
        self.put_count += 1;
        self.large |= src.len() >= LARGE;
        Some(())
    }

    /// Queue a bulk put of `len` bytes to `dst` whose data is at `off` in the sender's bulk
    /// area for this destination, now at `area`; `None` if the record's memory cannot be
    /// allocated (nothing is queued then). Always in the arena, never inline: a lane carries
    /// only inline records, without the area.
    pub(crate) fn put_bulk(
        &mut self,
        dst: *mut u8,
        len: usize,
        area: *const u8,
        off: usize,
    ) -> Option<()> {
        let at = self.puts.try_reserve(4 * WORD)?;
        // SAFETY: `try_reserve` made room for the four words, 8-aligned.
        unsafe {
            let h = self.puts.base_mut().add(at) as *mut u64;
            h.write(LONG << SHIFT | BULK);
            h.add(1).write(dst as u64);
            h.add(2).write(len as u64);
            h.add(3).write(off as u64);
        }
        self.bulk = area as usize;
        self.put_count += 1;
        self.large |= len >= LARGE;
        Some(())
    }

    /// Reserve the record of a message with `tag` (the superstep's tag size) and a payload of
    /// `len` bytes, write its length and tag, count it, and return the offset where its payload
    /// goes; `None` if the record's size overflows or its memory cannot be allocated (nothing
    /// changes then). The caller writes the payload with [`fill`](Outbox::fill) before the
    /// receiver can read it (in its sync, before barrier 1, at the latest). `src` is where the
    /// payload will be copied from: a payload of [`PAD_FROM`] bytes or more gets a pad that
    /// keeps it off `src`'s page offset ([`pad_for`]).
    #[inline]
    pub(crate) fn reserve_message(
        &mut self,
        tag: &[u8],
        len: usize,
        src: *const u8,
    ) -> Option<usize> {
        self.reserve_placed(tag, len, 0, len, (len >= PAD_FROM).then_some(src))
    }

    /// [`reserve_message`](Outbox::reserve_message) of a record of kind `kind` (0, [`HANDLE`]
    /// or [`BYTES`]) for a payload of `len` bytes (at most `LEN`), whose body after the tag
    /// has `body` bytes; returns the offset of the body. Its pad is 0.
    #[inline]
    pub(crate) fn reserve_record(
        &mut self,
        tag: &[u8],
        len: usize,
        kind: u64,
        body: usize,
    ) -> Option<usize> {
        self.reserve_placed(tag, len, kind, body, None)
    }

    /// [`reserve_record`](Outbox::reserve_record), the body after a pad that keeps it off the
    /// page offset of `src` ([`pad_for`]) if `src` is given.
    fn reserve_placed(
        &mut self,
        tag: &[u8],
        len: usize,
        kind: u64,
        body: usize,
        src: Option<*const u8>,
    ) -> Option<usize> {
        if len as u64 > LEN {
            return None;
        }
        let head = WORD.checked_add(align8(tag.len()))?;
        let (off, pad) = match src {
            Some(src) => {
                let at = src as u64;
                self.msgs
                    .try_reserve_placed(head, body, PAGE as usize, |to| pad_for(to, at, at))?
            }
            None => (self.msgs.try_reserve(head.checked_add(body)?)?, 0),
        };
        let base = self.msgs.base_mut();
        // SAFETY: the arena made room for the length word, the aligned tag and the pad.
        unsafe {
            (base.add(off) as *mut u64).write(len as u64 | kind | (pad as u64) << PAD_SHIFT);
            if !tag.is_empty() {
                copy_bytes(tag.as_ptr(), base.add(off + WORD), tag.len());
            }
        }
        self.msg_count += 1;
        self.msg_bytes += len;
        Some(off + head + pad)
    }

    /// Write `len` payload bytes at `off`, a payload offset from
    /// [`reserve_message`](Outbox::reserve_message) for `len` bytes.
    ///
    /// # Safety
    /// `payload` must be valid for reading `len` bytes; `off` and `len` as above.
    #[inline]
    pub(crate) unsafe fn fill(&mut self, off: usize, payload: *const u8, len: usize) {
        // SAFETY: the reservation made room for `len` bytes at `off`; `payload` is the
        // caller's promise.
        unsafe { copy_bytes(payload, self.msgs.base_mut().add(off), len) }
    }

    /// Queue a message whose tag has `tag.len()` bytes (the superstep's tag size); `None` if
    /// its memory cannot be allocated (nothing is queued then).
    ///
    /// # Safety
    /// `payload` must be valid for reading `len` bytes.
    #[inline]
    pub(crate) unsafe fn send(&mut self, tag: &[u8], payload: *const u8, len: usize) -> Option<()> {
        let at = self.reserve_message(tag, len, payload)?;
        // SAFETY: reserved for `len` bytes just now; `payload` is the caller's promise.
        unsafe { self.fill(at, payload, len) };
        Some(())
    }

    /// Append a message of `len` bytes whose payload is the concatenation of `parts` (whose
    /// lengths add up to `len`); `None` as for [`send`](Outbox::send).
    pub(crate) fn send_parts(&mut self, tag: &[u8], parts: &[&[u8]], len: usize) -> Option<()> {
        let first = parts.first().map_or(std::ptr::null(), |p| p.as_ptr());
        let mut at = self.reserve_message(tag, len, first)?;
        for part in parts {
            // SAFETY: the parts add up to the `len` bytes reserved.
            unsafe { self.fill(at, part.as_ptr(), part.len()) };
            at += part.len();
        }
        Some(())
    }

    /// Let `f` append messages, and put them ahead of the messages already here (a lazy
    /// sync's riding messages, sent before these: `engine/threads/ride.rs`); `None` if memory
    /// could not be found. The earlier records move as bytes: nothing in a record depends on
    /// where it lies (a pad is counted from its record, an owned message names its handle by
    /// index), and no `hpsend` reservation is pending (a sync flushes them first).
    pub(crate) fn messages_first(
        &mut self,
        f: impl FnOnce(&mut Outbox) -> Option<()>,
    ) -> Option<()> {
        if self.msg_count == 0 {
            return f(self);
        }
        let n = self.msgs.len();
        let mut earlier = Vec::new();
        earlier.try_reserve_exact(n).ok()?;
        earlier.extend_from_slice(self.msgs.bytes(0, n));
        let (count, bytes) = (self.msg_count, self.msg_bytes);
        self.msgs.clear();
        (self.msg_count, self.msg_bytes) = (0, 0);
        let first = f(self);
        self.msgs.try_room(n)?;
        // SAFETY: `earlier` holds `n` bytes.
        unsafe { self.msgs.push_raw(earlier.as_ptr(), n) };
        self.msg_count += count;
        self.msg_bytes += bytes;
        first
    }

    /// Copy every put into its destination, each put of [`LARGE`] bytes or more by
    /// `large(src, dst, len)` (which a thread receiver shares with its helpers:
    /// `engine/threads/share.rs`; others pass [`copy_bytes`]).
    ///
    /// # Safety
    /// Every destination must be valid for writing and not aliased by a live reference; the
    /// sync protocol guarantees this for destinations owned by the calling receiver. `large`
    /// copies what it is given.
    pub(crate) unsafe fn deliver_puts_with(&self, large: impl Fn(*const u8, *mut u8, usize)) {
        // SAFETY: forwarded to the caller; inline records are never bulk records, nor large.
        unsafe {
            Self::deliver(self.inline.as_ptr() as *const u8, self.inline_len);
            Self::deliver_from(
                self.puts.base(),
                self.puts.len(),
                self.bulk as *const u8,
                large,
            );
        }
    }

    /// # Safety
    /// `base .. base + end` holds put records, none of them a bulk record; their destinations
    /// are valid (see above).
    #[inline]
    pub(crate) unsafe fn deliver(base: *const u8, end: usize) {
        // SAFETY: forwarded to the caller.
        unsafe {
            Self::deliver_from(base, end, std::ptr::null(), |src, dst, len| {
                copy_bytes(src, dst, len)
            })
        }
    }

    /// # Safety
    /// As [`deliver`](Outbox::deliver), and `bulk` is the sender's bulk area holding the data
    /// of the bulk records among them (`engine/threads/bulk.rs`), if there are any; `large`
    /// copies what it is given.
    unsafe fn deliver_from(
        base: *const u8,
        end: usize,
        bulk: *const u8,
        large: impl Fn(*const u8, *mut u8, usize),
    ) {
        let mut off = 0;
        while off < end {
            // SAFETY: records written by `put` and `put_bulk`; the destination is the caller's
            // promise, and so is the bulk area of a bulk record.
            unsafe {
                let h = base.add(off) as *const u64;
                let w = h.read();
                let (dst, len, src, next) = if w >> SHIFT != LONG {
                    let len = (w >> SHIFT) as usize;
                    let data = off + WORD;
                    (
                        (w & ((1 << SHIFT) - 1)) as *mut u8,
                        len,
                        base.add(data),
                        data + align8(len),
                    )
                } else if w & BULK != 0 {
                    debug_assert!(!bulk.is_null(), "a bulk record without its area");
                    (
                        h.add(1).read() as *mut u8,
                        h.add(2).read() as usize,
                        bulk.add(h.add(3).read() as usize),
                        off + 4 * WORD,
                    )
                } else {
                    // The pad is part of the header's extent: the data follows it.
                    let pad = (w & ((1 << SHIFT) - 1)) as usize;
                    let len = h.add(2).read() as usize;
                    let data = off + 3 * WORD + pad;
                    (
                        h.add(1).read() as *mut u8,
                        len,
                        base.add(data),
                        data + align8(len),
                    )
                };
                if len >= LARGE {
                    large(src, dst, len);
                } else {
                    copy_bytes(src, dst, len);
                }
                off = next;
            }
        }
    }

    /// The word at byte offset `off` of the message records.
    #[inline]
    fn msg_word(&self, off: usize) -> u64 {
        let w = self.msgs.bytes(off, WORD);
        u64::from_ne_bytes(w.try_into().expect("a word"))
    }

    /// The message record at byte offset `off`, for tag size `tagsize`: its tag, its payload
    /// (an owned message's buffer for a handle), the offset of the next record and its kind.
    #[inline]
    pub(crate) fn record(&self, off: usize, tagsize: usize) -> Record<'_> {
        // `off` is the start of a record (the queue walks records in order).
        let w = self.msg_word(off);
        let len = (w & LEN) as usize;
        let tag_at = off + WORD;
        let body = tag_at + align8(tagsize);
        let (payload, end, kind) = if w & (HANDLE | BYTES) == 0 {
            let at = body + ((w & PAD_BITS) >> PAD_SHIFT) as usize;
            (self.msgs.bytes(at, len), at + align8(len), Kind::Plain)
        } else if w & HANDLE != 0 {
            let h = &self.owned[self.msg_word(body) as usize];
            (h.bytes(len), body + WORD, Kind::Handle(h))
        } else {
            let size = self.msg_word(body) as usize;
            let name_len = (self.msg_word(body + WORD) & 0xFFFF_FFFF) as usize;
            let name = std::str::from_utf8(self.msgs.bytes(body + 2 * WORD, name_len))
                .unwrap_or("(an element type whose name is not UTF-8)");
            let payload_at = body + 2 * WORD + align8(name_len);
            (
                self.msgs.bytes(payload_at, len),
                payload_at + align8(len),
                Kind::Bytes { size, name },
            )
        };
        Record {
            tag: self.msgs.bytes(tag_at, tagsize),
            payload,
            next: (end < self.msgs.len()).then_some(end),
            kind,
        }
    }
}

impl Drop for Outbox {
    /// Owned messages still in the outbox when the run state goes (a run that failed, or whose
    /// last messages nobody moved out) are freed here.
    fn drop(&mut self) {
        self.free_owned();
    }
}

/// Owned messages (`owned.rs`): a buffer handed over, or its bytes copied over ranks.
impl Outbox {
    /// Queue `v` as an owned message with `tag`, handed over; `Err(v)` back if the memory for
    /// its record cannot be allocated (nothing is queued then).
    pub(crate) fn hand_over<T: Pod>(
        &mut self,
        tag: &[u8],
        v: Vec<T>,
    ) -> std::result::Result<(), Vec<T>> {
        if self.owned.try_reserve(1).is_err() {
            return Err(v);
        }
        let bytes = std::mem::size_of_val(&v[..]);
        let Some(at) = self.reserve_record(tag, bytes, HANDLE, 8) else {
            return Err(v);
        };
        let index = self.owned.len() as u64;
        // SAFETY: the record reserved a word at `at` for the index.
        unsafe { (self.msgs.base_mut().add(at) as *mut u64).write(index) };
        let mut v = std::mem::ManuallyDrop::new(v);
        self.owned.push(Handle::of(&mut v));
        Ok(())
    }

    /// Queue a copy of `v` as an owned message with `tag` (over ranks); `None` if the memory
    /// for it cannot be allocated (nothing is queued then).
    #[allow(dead_code, reason = "the rank engine's (a build with MPI)")]
    pub(crate) fn copy_owned<T: Pod>(&mut self, tag: &[u8], v: &[T]) -> Option<()> {
        let payload: &[u8] = bytemuck::cast_slice(v);
        let name = std::any::type_name::<T>();
        let head = 16 + crate::arena::align8(name.len());
        let at =
            self.reserve_record(tag, payload.len(), BYTES, head.checked_add(payload.len())?)?;
        let base = self.msgs.base_mut();
        // SAFETY: the record reserved `head` bytes for the element type and the payload after
        // them, 8-byte aligned.
        unsafe {
            (base.add(at) as *mut u64).write(size_of::<T>() as u64);
            (base.add(at + 8) as *mut u64).write(name.len() as u64);
            std::ptr::copy_nonoverlapping(name.as_ptr(), base.add(at + 16), name.len());
            std::ptr::copy_nonoverlapping(payload.as_ptr(), base.add(at + head), payload.len());
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    /// `copy_bytes` writes exactly the `len` bytes at the destination, whatever the length
    /// and the offsets modulo 16 (its short forms overlap their two halves).
    #[test]
    fn copy_bytes_copies_exactly_the_bytes_asked() {
        let src: Vec<u8> = (0..128u32).map(|i| (i * 7 + 1) as u8).collect();
        for len in 0..=70 {
            for (from, to) in [(0, 0), (1, 3), (5, 16), (15, 9), (8, 1)] {
                let mut dst = vec![0u8; 128];
                // SAFETY: both ranges lie inside their buffers, which do not overlap.
                unsafe { super::copy_bytes(src.as_ptr().add(from), dst.as_mut_ptr().add(to), len) };
                for (i, &b) in dst.iter().enumerate() {
                    let want = if (to..to + len).contains(&i) {
                        src[from + i - to]
                    } else {
                        0
                    };
                    assert_eq!(b, want, "len {len}, from {from}, to {to}, byte {i}");
                }
            }
        }
    }

    use super::*;

    /// Short and long put records, inline and in the arena, land where they were aimed.
    #[test]
    fn put_records_of_every_form_are_delivered() {
        let sizes = [8, 1, 3, 16, 4, 65_534, 65_535, 65_536, 70_001, 0, 24];
        let total: usize = sizes.iter().sum();
        let mut dst = vec![0u8; total];
        let mut ob = Outbox::default();
        let mut at = 0;
        let mut want = vec![0u8; total];
        for (i, &n) in sizes.iter().enumerate() {
            let src: Vec<u8> = (0..n).map(|j| (i * 31 + j) as u8 | 1).collect();
            want[at..at + n].copy_from_slice(&src);
            // SAFETY: in bounds of `dst`.
            ob.put(unsafe { dst.as_mut_ptr().add(at) }, &src).unwrap();
            at += n;
        }
        // SAFETY: every destination is in `dst`, which nothing else references.
        unsafe { ob.deliver_puts_with(|s, d, n| copy_bytes(s, d, n)) };
        assert!(dst == want, "delivered bytes differ");
    }

    /// The pad keeps a long put's data away from its source and destination modulo a page,
    /// whatever their offsets, and stays below a page.
    #[test]
    fn the_pad_keeps_the_data_off_the_page_offsets_of_source_and_destination() {
        for at in (0..PAGE).step_by(8).map(|a| 0x10_0000 + a) {
            for (src, dst) in [(at, at), (at + 3, at + 24), (at - 24, at + 2048), (7, 4093)] {
                let pad = pad_for(at, src, dst);
                assert!(pad < PAGE && pad % 8 == 0, "pad {pad}");
                assert!(
                    !near(at + pad, src) && !near(dst, at + pad),
                    "{at} {src} {dst}: {pad}"
                );
            }
        }
        // Where it can, the data starts at the source's offset in its cache line.
        let pad = pad_for(0x10_0018, 0x20_0800, 0x30_0000);
        assert_eq!((0x10_0018 + pad) % 64, 0x20_0800 % 64);
    }

    /// Messages of every size around [`PAD_FROM`], from sources at many page offsets and with
    /// tags, read back whole and in order: a padded payload's pad is skipped, its place keeps
    /// off its source's page offset when it is copied, and the payload stays 8-byte aligned.
    #[test]
    fn padded_messages_read_back_whole() {
        let tag = [7u8, 1, 2];
        let src: Vec<u8> = (0..2 * PAGE as usize + 2 * PAD_FROM)
            .map(|j| (j * 13 + 5) as u8)
            .collect();
        let mut ob = Outbox::default();
        let mut sent = Vec::new();
        for k in 0..60 {
            let len = PAD_FROM - 3 + (k * 37) % (PAD_FROM + 50);
            let from = (k * 328 + 1) % PAGE as usize;
            let payload = &src[from..from + len];
            // SAFETY: `payload` is valid for `len` bytes.
            unsafe { ob.send(&tag, payload.as_ptr(), len) }.unwrap();
            sent.push(payload);
            // Where the copy went (a later growth of the arena moves it, after the copy).
            let mut last = ob.record(0, tag.len());
            while let Some(next) = last.next {
                last = ob.record(next, tag.len());
            }
            if len >= PAD_FROM {
                assert!(!near(last.payload.as_ptr() as u64, payload.as_ptr() as u64));
            }
        }
        let mut off = Some(0);
        for want in &sent {
            let r = ob.record(off.expect("another record"), tag.len());
            assert_eq!(r.tag, tag);
            assert!(r.payload == *want, "payload of {} bytes", want.len());
            assert_eq!(r.payload.as_ptr() as usize % 8, 0);
            off = r.next;
        }
        assert_eq!(off, None);
        assert_eq!(ob.msg_count, sent.len());
        assert_eq!(ob.msg_bytes, sent.iter().map(|p| p.len()).sum::<usize>());
    }

    /// Long puts from sources at every offset of a page, into destinations at every offset,
    /// with the arena growing between them, come out whole: the pads are skipped.
    #[test]
    fn padded_puts_are_delivered_whole_at_every_offset() {
        let n = PAD_FROM + 13;
        let src: Vec<u8> = (0..PAGE as usize + n).map(|j| (j * 7 + 1) as u8).collect();
        let mut dst = vec![0u8; 40 * (n + 8 + 200)];
        let mut ob = Outbox::default();
        let mut want = vec![0u8; dst.len()];
        let mut at = 0;
        for k in 0..40 {
            let from = (k * 104 + 3) % PAGE as usize;
            want[at..at + n].copy_from_slice(&src[from..from + n]);
            // SAFETY: in bounds of `dst`.
            ob.put(unsafe { dst.as_mut_ptr().add(at) }, &src[from..from + n])
                .unwrap();
            // One-byte puts between them: short records after padded ones.
            // SAFETY: in bounds of `dst`.
            ob.put(unsafe { dst.as_mut_ptr().add(at + n) }, &[k as u8 | 1])
                .unwrap();
            want[at + n] = k as u8 | 1;
            at += n + 8 + (k * 61) % 200;
        }
        // SAFETY: every destination is in `dst`, which nothing else references.
        unsafe { ob.deliver_puts_with(|s, d, n| copy_bytes(s, d, n)) };
        assert!(dst == want, "delivered bytes differ");
        assert_eq!(ob.put_count, 80);
    }
}
