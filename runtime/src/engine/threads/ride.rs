//! [`Ride`]: the records that travel in one barrier line to its one reader (`barrier.rs`,
//! "Riding puts"): small puts, and small messages.
//!
//! A put record has the outboxes' short form, `[length << 48 | dst address][data]`; a message
//! record is `[MSG << 48 | tag length << 16 | payload length][tag][payload]`, each part 8-byte
//! aligned. A put's length is below `outbox::PAD_FROM` (short records only), so `MSG` never
//! starts a put record.
//!
//! **The queue's order.** The queue holds each sender's messages in the order it sent them
//! (`owned.rs`). So once a message to a destination goes to the outbox (the line is full, or
//! it is an owned message), the ride takes no more messages until the next sync
//! ([`Ride::close`]): a sender's riding messages to a destination were all sent before its
//! outbox messages to it, and the receiver reads them first (`sync.rs`, `deliver`). A lazy
//! sync, which has no barrier to carry them, puts them ahead of the outbox's messages
//! (`Outbox::messages_first`). Puts have no such order to keep and go on riding. (`send`,
//! `send_parts` and `hpsend` ride alike: an `hpsend`'s payload is copied at the call then, the
//! same bytes as at the sync.)

use crate::arena::align8;
use crate::outbox::{copy_bytes, push_short};

/// Words of records a barrier line carries for its reader: with the episode word, four cache
/// lines (`barrier.rs`, `Half`). The reader finds the first seven words in the line it polls;
/// the next line comes with it (the core's adjacent-line prefetch) and the other two in
/// parallel, so a put of up to 30 words rides for about one more transfer, where the outbox's
/// lines would cost three or four one after another (the outbox's header, its records, the data).
pub const RIDE_WORDS: usize = 31;

/// Bytes of payload a message can have and still ride (with no tag, behind its record's header
/// word): `Ctx::send_parts` gathers parts up to this size before it offers them to a ride.
pub(crate) const RIDE_PAYLOAD: usize = (RIDE_WORDS - 1) * WORD;

const WORD: usize = std::mem::size_of::<u64>();
const SHIFT: u32 = 48;
/// The top 16 bits of a message record's header.
const MSG: u64 = 0xFFFE;
/// The tag's and the payload's lengths in a message header.
const LEN_BITS: u32 = 16;
const LEN_MASK: u64 = (1 << LEN_BITS) - 1;

/// The records riding in (or copied out of) one barrier line: `len` words of `words`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ride {
    /// The records.
    pub words: [u64; RIDE_WORDS],
    /// Words in use.
    pub len: usize,
    /// The writer filled its outbox for the line's reader in this superstep: the reader takes
    /// it at the sync. Carried by the line's word, so that a full sync's writer does not mark
    /// the reader's inbox (`inbox.rs`), a cache line the reader would then fetch back.
    pub outbox: bool,
    /// Messages to this line's reader go to the outbox for the rest of the superstep.
    closed: bool,
    /// Words of the message records sent to this line's reader in this superstep, riding or
    /// not: more than the line holds, and the next superstep starts closed ([`clear`]).
    ///
    /// [`clear`]: Self::clear
    wanted: usize,
}

/// One record of a ride.
pub(crate) enum Rec<'a> {
    /// A put: its words (header and data), in the outboxes' short form.
    Put(&'a [u64]),
    /// A message: its tag and payload.
    Msg(&'a [u8], &'a [u8]),
}

impl Ride {
    /// Append a put of `src` to `dst` if it fits; false if not.
    #[inline]
    pub(crate) fn put(&mut self, dst: *mut u8, src: &[u8]) -> bool {
        push_short(&mut self.words, &mut self.len, dst, src)
    }

    /// Append a message of `tag` and `payload` if the ride is open to messages and the record
    /// fits; false if not (the message goes to the outbox: the caller closes the ride).
    #[inline]
    pub(crate) fn send(&mut self, tag: &[u8], payload: &[u8]) -> bool {
        let (t, n) = (align8(tag.len()) / WORD, align8(payload.len()) / WORD);
        // A payload has at most `MAX_MESSAGE` bytes, a tag `MAX_TAGSIZE`: no overflow.
        self.wanted = self.wanted.saturating_add(1 + t + n);
        // Lengths that do not fit in the line cannot overflow the sum below: checked first.
        if self.closed || t >= RIDE_WORDS || n >= RIDE_WORDS || self.len + 1 + t + n > RIDE_WORDS {
            return false;
        }
        let at = self.len;
        self.words[at] = MSG << SHIFT | (tag.len() as u64) << LEN_BITS | payload.len() as u64;
        let bytes = bytemuck::cast_slice_mut::<u64, u8>(&mut self.words);
        let tag_at = (at + 1) * WORD;
        bytes[tag_at..tag_at + tag.len()].copy_from_slice(tag);
        let body = (at + 1 + t) * WORD;
        // SAFETY: `payload.len()` bytes fit in the `n` words at `body` (checked above).
        unsafe { copy_bytes(payload.as_ptr(), bytes[body..].as_mut_ptr(), payload.len()) };
        self.len = at + 1 + t + n;
        true
    }

    /// Close the ride to messages for the rest of the superstep (a message to its reader went
    /// to the outbox); the messages riding in it stay.
    #[inline]
    pub(crate) fn close(&mut self) {
        self.closed = true;
    }

    /// Empty the ride at the sync. It opens to messages again unless this superstep sent its
    /// reader more messages than the line holds: a superstep that repeats that pattern would
    /// ride a few and send the rest through the outbox, which costs more than sending all
    /// through it (the outbox's lines cross anyway, and the receiver reads two places).
    #[inline]
    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.outbox = false;
        self.closed = self.wanted > RIDE_WORDS;
        self.wanted = 0;
    }

    /// Empty the ride and open it to messages (a new run, a failed sync).
    #[inline]
    pub(crate) fn reset(&mut self) {
        *self = Ride::default();
    }

    /// The number of records (puts and messages).
    pub(crate) fn records(&self) -> u64 {
        let mut n = 0;
        self.each(|_| n += 1);
        n
    }

    /// Copy every put into its destination and drop it from the ride, which keeps only its
    /// messages, in order, for [`message`](Self::message); returns their count and payload
    /// bytes.
    ///
    /// # Safety
    /// Every put's destination must be valid for writing and not aliased by a live reference:
    /// the sync guarantees it for the receiver's own registered memory.
    #[inline]
    pub(crate) unsafe fn deliver_puts(&mut self) -> (usize, usize) {
        // A plain loop rather than `each`: this runs in every sync with riding puts.
        let (mut count, mut bytes, mut at, mut kept) = (0, 0, 0, 0);
        while at < self.len {
            let w = self.words[at];
            if w >> SHIFT != MSG {
                let len = (w >> SHIFT) as usize;
                let dst = (w & ((1 << SHIFT) - 1)) as *mut u8;
                // SAFETY: the record's data words (inside `words`) hold `len` bytes; the
                // destination is the caller's promise.
                unsafe { copy_bytes(self.words[at + 1..].as_ptr() as *const u8, dst, len) };
                at += 1 + align8(len) / WORD;
            } else {
                let (t, n) = (
                    ((w >> LEN_BITS) & LEN_MASK) as usize,
                    (w & LEN_MASK) as usize,
                );
                let end = at + 1 + (align8(t) + align8(n)) / WORD;
                self.words.copy_within(at..end, kept);
                kept += end - at;
                count += 1;
                bytes += n;
                at = end;
            }
        }
        self.len = kept;
        (count, bytes)
    }

    /// The message record at word `off` of a ride whose puts were delivered
    /// ([`deliver_puts`](Self::deliver_puts)): its tag, its payload, and the word of the next
    /// message, if there is one.
    #[inline]
    pub(crate) fn message(&self, off: usize) -> (&[u8], &[u8], Option<usize>) {
        let (rec, end) = self.record(off);
        let Rec::Msg(tag, payload) = rec else {
            unreachable!("a delivered ride holds messages only");
        };
        (tag, payload, (end < self.len).then_some(end))
    }

    /// Every record, in order.
    pub(crate) fn each<'a>(&'a self, mut f: impl FnMut(Rec<'a>)) {
        let mut at = 0;
        while at < self.len {
            let (rec, end) = self.record(at);
            f(rec);
            at = end;
        }
    }

    /// The record at word `at` and the word after it.
    #[inline]
    fn record(&self, at: usize) -> (Rec<'_>, usize) {
        let w = self.words[at];
        if w >> SHIFT != MSG {
            let end = at + 1 + align8((w >> SHIFT) as usize) / WORD;
            return (Rec::Put(&self.words[at..end]), end);
        }
        let (t, n) = (
            ((w >> LEN_BITS) & LEN_MASK) as usize,
            (w & LEN_MASK) as usize,
        );
        let bytes = bytemuck::cast_slice::<u64, u8>(&self.words);
        let tag_at = (at + 1) * WORD;
        let body = tag_at + align8(t);
        let end = (body + align8(n)) / WORD;
        (
            Rec::Msg(&bytes[tag_at..tag_at + t], &bytes[body..body + n]),
            end,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Puts and messages side by side: a full line refuses; delivery writes the puts and keeps
    /// the messages, which come back as sent, in order; a closed ride takes puts, not
    /// messages, until it is cleared.
    #[test]
    fn puts_and_messages_share_a_line() {
        let mut dst = [0u8; 16];
        let mut r = Ride::default();
        assert!(r.put(dst.as_mut_ptr(), &[1, 2, 3]));
        assert!(r.send(&[9], &[4, 5, 6, 7, 8]));
        assert!(r.send(&[], &[]));
        // Two words for the put, three for the tagged message, one for the empty one, and one
        // message that fills the rest of the line.
        let fill = vec![0xEE; (RIDE_WORDS - 7) * WORD];
        assert!(
            !r.send(&[], &[0xEE; RIDE_WORDS * WORD]),
            "larger than the line"
        );
        assert!(r.send(&[], &fill));
        assert_eq!((r.len, r.records()), (RIDE_WORDS, 4));
        assert!(!r.send(&[], &[]), "the line is full");
        let sent = r;

        // SAFETY: the one put's destination is `dst`, not otherwise referenced.
        assert_eq!(unsafe { r.deliver_puts() }, (3, 5 + fill.len()));
        assert_eq!(dst[..4], [1, 2, 3, 0]);
        assert_eq!(
            (r.len, r.records()),
            (RIDE_WORDS - 2, 3),
            "the messages are kept"
        );
        let first = r.message(0);
        assert_eq!((first.0, first.1), (&[9u8][..], &[4u8, 5, 6, 7, 8][..]));
        let second = r.message(first.2.expect("another"));
        assert_eq!((second.0, second.1), (&[][..], &[][..]));
        let third = r.message(second.2.expect("a third"));
        assert_eq!(third, (&[][..], &fill[..], None));

        let mut r = sent;
        r.close();
        assert_eq!(
            (r.len, r.records()),
            (RIDE_WORDS, 4),
            "closing keeps what rides"
        );
        r.clear();
        assert!(r.put(dst.as_mut_ptr(), &[7]));
        r.close();
        assert!(!r.send(&[], &[1]), "a closed ride takes no messages");
        assert!(r.put(dst.as_mut_ptr(), &[7]), "but puts");
        r.clear();
        assert!(r.send(&[], &[1]));
    }

    /// A superstep that sent the reader more message words than the line holds closes the
    /// next superstep's ride to messages; one that sent few opens it again; puts ride always.
    #[test]
    fn a_crowded_superstep_closes_the_next() {
        let mut dst = [0u8; 8];
        let mut r = Ride::default();
        // Messages of two words each, one word more than the line holds.
        for _ in 0..RIDE_WORDS / 2 + 1 {
            r.send(&[], &[1]);
        }
        r.clear();
        assert!(
            !r.send(&[], &[1]),
            "closed after more message words than the line holds"
        );
        assert!(r.put(dst.as_mut_ptr(), &[2]));
        r.clear();
        assert!(r.send(&[], &[1]), "open after 2");
        for _ in 1..RIDE_WORDS / 2 {
            r.send(&[], &[1]);
        }
        if RIDE_WORDS % 2 == 1 {
            r.send(&[], &[]);
        }
        assert_eq!(r.len, RIDE_WORDS);
        r.clear();
        assert!(r.send(&[], &[1]), "open after a full line");
        r.send(&[], &[0; RIDE_WORDS * WORD]);
        r.reset();
        assert!(r.send(&[], &[1]), "open after a reset");
    }

    /// Tags and payloads of every length that fits, behind a put of every size that leaves
    /// room.
    #[test]
    fn every_size_that_fits_comes_back() {
        // Every short length, and those around a full line.
        let lengths = || (0..=40).chain(RIDE_PAYLOAD - 9..=RIDE_PAYLOAD + 1);
        for lead in 0..RIDE_WORDS {
            for t in lengths() {
                for n in lengths() {
                    let mut r = Ride::default();
                    let mut dst = [0u8; RIDE_WORDS * WORD];
                    let put = vec![3u8; 8 * lead.saturating_sub(1)];
                    if lead > 0 {
                        assert!(r.put(dst.as_mut_ptr(), &put));
                    }
                    let tag: Vec<u8> = (0..t).map(|i| i as u8 ^ 0x55).collect();
                    let payload: Vec<u8> = (0..n).map(|i| i as u8 ^ 0xAA).collect();
                    let fits = lead + 1 + align8(t) / 8 + align8(n) / 8 <= RIDE_WORDS;
                    let at = format!("lead {lead}, tag {t}, {n} bytes");
                    assert_eq!(r.send(&tag, &payload), fits, "{at}");
                    let (mut puts, mut msgs) = (0, 0);
                    r.each(|rec| match rec {
                        Rec::Put(_) => puts += 1,
                        Rec::Msg(..) => msgs += 1,
                    });
                    assert_eq!((puts, msgs), (usize::from(lead > 0), usize::from(fits)));
                    // SAFETY: the put's destination is `dst`, not otherwise referenced.
                    let got = unsafe { r.deliver_puts() };
                    assert_eq!(got, (msgs, if fits { n } else { 0 }), "{at}");
                    if fits {
                        assert_eq!(r.message(0), (&tag[..], &payload[..], None), "{at}");
                    }
                    assert!(dst[..put.len()].iter().all(|&b| b == 3), "{at}");
                }
            }
        }
    }
}
