//! Bulk synchronous message passing: tag size, send, the receive queue.
//!
//! A message sent in superstep `k` is copied once, into the sender's outbox for the receiver;
//! during superstep `k + 1` the receiver reads it there in place (`hpmove` hands out references
//! into that buffer). On the thread engine a small message to a process that reads one of the
//! sender's barrier lines rides in that line instead, and the receiver reads it from its copy
//! of the line (`engine/threads/ride.rs`). Payloads start 8-byte aligned, so
//! [`Message::payload_as`] can view them as `&[f64]`, `&[u64]`... without copying. Owned
//! messages (`owned.rs`) share the queue; their payload is the buffer handed over, aligned for
//! its element type.

use crate::ctx::Ctx;
use crate::error::{Error, ErrorKind, Result};
use crate::flags::{FLAG_COMM, FLAG_OUTBOX, FLAG_TAGS};
use crate::limits::{MAX_MESSAGE, MAX_TAGSIZE};
use crate::outbox::Record;
use crate::queue::Queue;
use crate::requests::HpSend;
use bytemuck::Pod;

/// The number of messages in the queue and the total size of their payloads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueSize {
    /// Messages not yet moved out of the queue.
    pub messages: usize,
    /// Sum of their payload sizes in bytes.
    pub bytes: usize,
}

/// A received message, borrowed from the queue until the next sync.
///
/// Two messages are equal when their sender, tag and payload are. Only the runtime makes
/// messages ([`Ctx::peek`], [`Ctx::hpmove`]): besides its public fields a message remembers
/// which process received it in which superstep, which its errors name.
#[derive(Clone, Copy)]
pub struct Message<'a> {
    /// The pid of the process that sent it (an mbsp extension: BSPlib's queue does not say).
    pub from: usize,
    /// The tag (as many bytes as the tag size of the superstep it was sent in).
    pub tag: &'a [u8],
    /// The payload bytes (8-byte aligned; an owned message's, aligned for its element type).
    pub payload: &'a [u8],
    /// The receiver's path of pids (from the top-level run) and superstep.
    at: (&'a [usize], u64),
}

/// A message's tag read as a `G` (`Message::tag_as`, `OwnedMessage::tag_as`): panics with
/// mbsp's error (operation `tag_as`, the receiver `at`, the sender `from`, both sizes, `G`)
/// when the sizes differ, which a run that the panic ends fails with.
#[track_caller]
pub(crate) fn read_tag<G: Pod>(tag: &[u8], from: usize, at: (&[usize], u64)) -> G {
    match bytemuck::try_pod_read_unaligned(tag) {
        Ok(g) => g,
        Err(_) => crate::error::raise(Error::new(
            ErrorKind::Misuse,
            "tag_as",
            at.0.to_vec(),
            Some(at.1),
            format!(
                "the tag of the message from pid {from} has {} bytes (the tag size of the \
                 superstep it was sent in), but a {} has {}",
                tag.len(),
                std::any::type_name::<G>(),
                size_of::<G>()
            ),
        )),
    }
}

impl PartialEq for Message<'_> {
    fn eq(&self, other: &Self) -> bool {
        (self.from, self.tag, self.payload) == (other.from, other.tag, other.payload)
    }
}

impl Eq for Message<'_> {}

impl std::fmt::Debug for Message<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Message")
            .field("from", &self.from)
            .field("tag", &self.tag)
            .field("payload", &self.payload)
            .finish()
    }
}

/// Element types of `bytes` bytes, as a hint in errors: the largest of 8, 4, 2 and 1 that
/// divides it (`12` -> "3 elements of a 4-byte type (f32, u32, i32)").
fn whole_elements(bytes: usize) -> String {
    let (size, names) = [
        (8, "f64, u64, i64"),
        (4, "f32, u32, i32"),
        (2, "u16, i16"),
        (1, "u8"),
    ]
    .into_iter()
    .find(|(s, _)| bytes % s == 0)
    .expect("1 divides everything");
    format!("{} elements of a {size}-byte type ({names})", bytes / size)
}

impl<'a> Message<'a> {
    /// A misuse error of `op` on this message, naming the process that received it and the
    /// superstep.
    fn error(&self, op: &'static str, message: String) -> Error {
        Error::new(
            ErrorKind::Misuse,
            op,
            self.at.0.to_vec(),
            Some(self.at.1),
            message,
        )
    }

    /// The tag read as a `G` (its size must equal the tag size).
    ///
    /// # Panics
    /// If `size_of::<G>()` differs from the tag length; the message names the process, the
    /// superstep, both sizes and `G`, and a run that this panic ends fails with that error
    /// (kind [`Misuse`](ErrorKind::Misuse), operation `tag_as`).
    #[track_caller]
    pub fn tag_as<G: Pod>(&self) -> G {
        read_tag(self.tag, self.from, self.at)
    }

    /// The payload viewed as a slice of `T`, without copying.
    ///
    /// # Panics
    /// If the payload length is not a multiple of `size_of::<T>()`, or `T` needs more than
    /// 8-byte alignment (or, for an owned message, more than its element type's). The message
    /// says so as [`try_payload_as`](Message::try_payload_as)'s error does, naming the process,
    /// the superstep, the sender, `T` and both lengths, and a run that this panic ends fails
    /// with that error (kind [`Misuse`](ErrorKind::Misuse), operation `payload_as`).
    #[track_caller]
    pub fn payload_as<T: Pod>(&self) -> &'a [T] {
        match self.try_payload_as() {
            Ok(v) => v,
            Err(e) => crate::error::raise(e),
        }
    }

    /// The payload viewed as a slice of `T`, without copying; an error of kind
    /// [`Misuse`](ErrorKind::Misuse) if it cannot be (see [`payload_as`](Message::payload_as)).
    /// The error is a value: the run fails with it only if the process returns it.
    ///
    /// ```
    /// mbsp::run(2, |ctx| {
    ///     ctx.send_pod(1 - ctx.pid(), &(), &[1.0f32, 2.0, 3.0])?;
    ///     ctx.sync()?;
    ///     let m = ctx.hpmove()?.unwrap();
    ///     let e = m.try_payload_as::<f64>().unwrap_err();
    ///     assert_eq!(
    ///         e.to_string(),
    ///         format!(
    ///             "payload_as (pid {}, superstep 1): the payload of the message from pid {} has \
    ///              12 bytes, not a whole number of f64 (8 bytes each); 12 bytes are 3 elements \
    ///              of a 4-byte type (f32, u32, i32)",
    ///             ctx.pid(),
    ///             1 - ctx.pid()
    ///         )
    ///     );
    ///     assert_eq!(m.try_payload_as::<f32>()?, &[1.0, 2.0, 3.0]);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn try_payload_as<T: Pod>(&self) -> Result<&'a [T]> {
        bytemuck::try_cast_slice(self.payload).map_err(|_| {
            let (len, size, name) = (
                self.payload.len(),
                size_of::<T>(),
                std::any::type_name::<T>(),
            );
            let what = if size == 0 {
                format!("cannot be viewed as {name}, a type of no bytes")
            } else if len % size != 0 {
                format!(
                    "has {len} bytes, not a whole number of {name} ({size} bytes each); {len} \
                     bytes are {}",
                    whole_elements(len)
                )
            } else {
                format!(
                    "({len} bytes) starts {} bytes past a multiple of {}, the alignment a \
                     {name} needs (payloads are 8-byte aligned: copy it out with \
                     bytemuck::pod_collect_to_vec)",
                    self.payload.as_ptr() as usize % align_of::<T>(),
                    align_of::<T>()
                )
            };
            self.error(
                "payload_as",
                format!("the payload of the message from pid {} {what}", self.from),
            )
        })
    }
}

impl Ctx {
    /// Set the tag size (in bytes) of messages sent from the next superstep on; returns the tag
    /// size in force now. Collective: every process must call it in the same superstep with the
    /// same value (the last call of a superstep counts). The initial tag size is 0; the largest
    /// is [`MAX_TAGSIZE`] (1 MiB), beyond which this is a misuse.
    ///
    /// ```
    /// mbsp::run(2, |ctx| {
    ///     assert_eq!(ctx.set_tagsize(4)?, 0);
    ///     ctx.sync()?;
    ///     assert_eq!(ctx.tagsize(), 4);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn set_tagsize(&self, bytes: usize) -> Result<usize> {
        self.live("set_tagsize")?;
        if bytes > MAX_TAGSIZE {
            return Err(self.misuse(
                "set_tagsize",
                format!(
                    "a tag size of {bytes} bytes exceeds the largest, {MAX_TAGSIZE} bytes \
                     (mbsp::MAX_TAGSIZE)"
                ),
            ));
        }
        self.st.borrow_mut().new_tagsize = Some(bytes);
        self.flag(FLAG_TAGS);
        Ok(self.tagsize.get())
    }

    /// The tag size of messages sent in this superstep.
    pub fn tagsize(&self) -> usize {
        self.tagsize.get()
    }

    /// Check a send of `tag` and `len` payload bytes to `pid`.
    #[inline]
    pub(crate) fn check_send(
        &self,
        op: &'static str,
        pid: usize,
        tag: &[u8],
        len: usize,
    ) -> Result<()> {
        self.live(op)?;
        self.check_pid(op, pid)?;
        let t = self.tagsize.get();
        if tag.len() != t {
            return Err(self.misuse(
                op,
                format!(
                    "the tag has {} bytes, but the tag size in this superstep is {t} bytes",
                    tag.len()
                ),
            ));
        }
        if len > MAX_MESSAGE {
            return Err(self.misuse(
                op,
                format!(
                    "a payload of {len} bytes exceeds the largest message, {MAX_MESSAGE} bytes \
                     (mbsp::MAX_MESSAGE)"
                ),
            ));
        }
        Ok(())
    }

    /// The error of a send whose record could not be allocated.
    #[cold]
    #[inline(never)]
    pub(crate) fn no_room_for_message(
        &self,
        op: &'static str,
        pid: usize,
        tag: usize,
        len: usize,
    ) -> Error {
        self.out_of_memory(
            op,
            format!(
                "to pid {pid}: could not allocate room for a message of {len} payload bytes \
                 (and a {tag}-byte tag) in this superstep's outbox"
            ),
        )
    }

    /// Send a message to `pid`: it arrives in `pid`'s queue after the next sync. `tag` must have
    /// exactly [`tagsize`](Ctx::tagsize) bytes; tag and payload are copied now. The payload has
    /// at most [`MAX_MESSAGE`] bytes (a misuse beyond); a message the
    /// machine cannot find the memory for ends the run with an error of kind
    /// [`System`](crate::ErrorKind::System).
    ///
    /// ```
    /// // Everyone sends its pid to process 0, tagged with the pid squared.
    /// let got = mbsp::run(3, |ctx| {
    ///     ctx.set_tagsize(4)?;
    ///     ctx.sync()?;
    ///     let me = ctx.pid() as u32;
    ///     ctx.send(0, &(me * me).to_ne_bytes(), &me.to_ne_bytes())?;
    ///     ctx.sync()?;
    ///     let mut got = Vec::new();
    ///     while let Some(m) = ctx.hpmove()? {
    ///         got.push((m.tag_as::<u32>(), m.payload_as::<u32>()[0]));
    ///     }
    ///     got.sort();
    ///     Ok(got)
    /// }).unwrap();
    /// assert_eq!(got[0], vec![(0, 0), (1, 1), (4, 2)]);
    /// assert!(got[1].is_empty());
    /// ```
    #[inline]
    pub fn send(&self, pid: usize, tag: &[u8], payload: &[u8]) -> Result<()> {
        self.check_send("send", pid, tag, payload.len())?;
        if self.ride(pid, tag, payload) {
            return Ok(());
        }
        // SAFETY: `payload` is a valid slice.
        let sent = self.with_outbox(pid, |ob| unsafe {
            ob.send(tag, payload.as_ptr(), payload.len())
        });
        if sent.is_none() {
            return Err(self.no_room_for_message("send", pid, tag.len(), payload.len()));
        }
        self.note_out(pid, tag.len() + payload.len(), true, false);
        self.flag(FLAG_COMM | FLAG_OUTBOX);
        Ok(())
    }

    /// Whether the engine carried a message (checked) itself (a small one riding in a barrier
    /// line: `engine/threads/ride.rs`); if not, it goes to the outbox.
    #[inline]
    fn ride(&self, pid: usize, tag: &[u8], payload: &[u8]) -> bool {
        let carried = self.engine_send(pid, tag, payload);
        if carried {
            self.note_out(pid, tag.len() + payload.len(), true, false);
            self.flag(FLAG_COMM);
        }
        carried
    }

    /// [`send`](Ctx::send) of one message whose payload is the concatenation of `parts`, copied
    /// once, straight into the outbox (e.g. a header and a large body without assembling them
    /// first).
    ///
    /// ```
    /// mbsp::run(2, |ctx| {
    ///     let body = vec![7u8; 1000];
    ///     ctx.send_parts(1 - ctx.pid(), &[], &[b"head", &body])?;
    ///     ctx.sync()?;
    ///     let m = ctx.hpmove()?.unwrap();
    ///     assert_eq!((&m.payload[..4], m.payload.len()), (&b"head"[..], 1004));
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn send_parts(&self, pid: usize, tag: &[u8], parts: &[&[u8]]) -> Result<()> {
        let len = parts
            .iter()
            .try_fold(0usize, |a, p| a.checked_add(p.len()))
            .unwrap_or(usize::MAX);
        self.check_send("send", pid, tag, len)?;
        // A payload that could ride is gathered first (the engine takes one slice).
        const SMALL: usize = crate::engine::CARRIED_PAYLOAD;
        if len <= SMALL {
            let mut buf = [0u8; SMALL];
            let mut at = 0;
            for part in parts {
                buf[at..at + part.len()].copy_from_slice(part);
                at += part.len();
            }
            if self.ride(pid, tag, &buf[..len]) {
                return Ok(());
            }
        } else {
            self.engine_to_outbox(pid);
        }
        if self
            .with_outbox(pid, |ob| ob.send_parts(tag, parts, len))
            .is_none()
        {
            return Err(self.no_room_for_message("send", pid, tag.len(), len));
        }
        self.note_out(pid, tag.len() + len, true, false);
        self.flag(FLAG_COMM | FLAG_OUTBOX);
        Ok(())
    }

    /// [`send`](Ctx::send) with a typed tag and payload.
    ///
    /// ```
    /// mbsp::run(2, |ctx| {
    ///     ctx.set_tagsize(std::mem::size_of::<u32>())?;
    ///     ctx.sync()?;
    ///     ctx.send_pod(1 - ctx.pid(), &42u32, &[1.5f64, 2.5])?;
    ///     ctx.sync()?;
    ///     let m = ctx.hpmove()?.unwrap();
    ///     assert_eq!((m.tag_as::<u32>(), m.payload_as::<f64>()), (42, &[1.5, 2.5][..]));
    ///     Ok(())
    /// }).unwrap();
    /// ```
    #[inline]
    pub fn send_pod<G: Pod, T: Pod>(&self, pid: usize, tag: &G, payload: &[T]) -> Result<()> {
        self.send(pid, bytemuck::bytes_of(tag), bytemuck::cast_slice(payload))
    }

    /// High-performance send: the payload is not copied now but at the sync (the tag is copied
    /// now; a payload of a few words that rides in a barrier line is copied now too, the same
    /// bytes, since it does not change before the sync). The message arrives like a
    /// [`send`](Ctx::send)'s.
    ///
    /// # Safety
    /// `payload` must stay allocated and unchanged until this process's next sync.
    ///
    /// ```
    /// mbsp::run(2, |ctx| {
    ///     let data = vec![ctx.pid() as u8; 1024];
    ///     // SAFETY: `data` is neither changed nor freed before the sync.
    ///     unsafe { ctx.hpsend(1 - ctx.pid(), &[], &data)? };
    ///     ctx.sync()?;
    ///     assert_eq!(ctx.hpmove()?.unwrap().payload[0] as usize, 1 - ctx.pid());
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub unsafe fn hpsend(&self, pid: usize, tag: &[u8], payload: &[u8]) -> Result<()> {
        let len = payload.len();
        self.check_send("hpsend", pid, tag, len)?;
        // A small one rides as a `send` does: copied now rather than at the sync, the same
        // bytes (the payload stays unchanged until then: the caller's promise).
        if self.ride(pid, tag, payload) {
            return Ok(());
        }
        // The record (with the tag) is reserved now, so that the sync only copies the payload
        // and cannot run out of memory.
        let Some(at) = self.with_outbox(pid, |ob| ob.reserve_message(tag, len, payload.as_ptr()))
        else {
            return Err(self.no_room_for_message("hpsend", pid, tag.len(), len));
        };
        self.note_out(pid, tag.len() + len, true, false);
        self.st.borrow_mut().hpsends.push(HpSend {
            pid,
            at,
            payload: payload.as_ptr(),
            len,
        });
        self.flag(FLAG_COMM | FLAG_OUTBOX);
        Ok(())
    }

    /// Messages and payload bytes left in the queue (those sent to this process in the previous
    /// superstep and not yet moved out).
    ///
    /// ```
    /// let sizes = mbsp::run(3, |ctx| {
    ///     ctx.send(0, &[], &[1, 2, 3])?; // everyone sends 3 bytes to pid 0
    ///     ctx.sync()?;
    ///     ctx.qsize()
    /// }).unwrap();
    /// assert_eq!((sizes[0].messages, sizes[0].bytes), (3, 9));
    /// assert_eq!(sizes[1], mbsp::QueueSize::default());
    /// ```
    pub fn qsize(&self) -> Result<QueueSize> {
        self.live("qsize")?;
        let st = self.st.borrow();
        Ok(QueueSize {
            messages: st.queue.left,
            bytes: st.queue.left_bytes,
        })
    }

    /// The first message of the queue, removed from it if `take`.
    #[inline]
    fn next_message(&self, op: &'static str, take: bool) -> Result<Option<Message<'_>>> {
        self.live(op)?;
        Ok(self.queued_message(take))
    }

    /// [`next_message`](Self::next_message) without the check that the run goes on: for a
    /// checkpoint completing after another process failed (the senders do not touch these
    /// outboxes again without a sync, which a failed run never completes).
    #[inline]
    pub(crate) fn queued_message(&self, take: bool) -> Option<Message<'_>> {
        let mut st = self.st.borrow_mut();
        let q = &mut st.queue;
        if q.left == 0 {
            return None;
        }
        let from = q.srcs[q.cur_src].pid as usize;
        // SAFETY: the queue is read during the superstep after the one the messages were sent
        // in; their sender does not touch these outboxes before it passes barrier 1 of our next
        // sync, which needs `&mut self` and so ends every borrow handed out here; nor does
        // anything but that sync write our copy of the barrier lines. The run state (and the
        // outbox) outlives `self`.
        let ((tp, tl), (pp, pl), next) = unsafe {
            self.front_record(q, |r| {
                (
                    (r.tag.as_ptr(), r.tag.len()),
                    (r.payload.as_ptr(), r.payload.len()),
                    r.next,
                )
            })
        };
        if take {
            q.advance(next, pl);
        }
        // SAFETY: as above: the bytes stay valid and unchanged while `self` is borrowed.
        let (tag, payload) = unsafe {
            (
                std::slice::from_raw_parts(tp, tl),
                std::slice::from_raw_parts(pp, pl),
            )
        };
        Some(Message {
            from,
            tag,
            payload,
            at: (&self.path, self.superstep()),
        })
    }

    /// Hand the record at the front of the queue `q` (not empty) to `f`: from its sender's
    /// outbox, or from this process's copy of the barrier line it rode in.
    ///
    /// # Safety
    /// `q` is this process's queue of the current superstep, whose senders leave the outboxes
    /// it names alone until this process passes barrier 1 of its next sync.
    #[inline]
    pub(crate) unsafe fn front_record<R>(&self, q: &Queue, f: impl FnOnce(Record<'_>) -> R) -> R {
        let src = q.srcs[q.cur_src];
        if let Some(round) = src.rode {
            return f(self.rode_record(round, q.cur_off));
        }
        // SAFETY: the caller's promise.
        unsafe {
            self.run.proc(src.pid as usize).outboxes(q.slot, |outs| {
                let ob = outs[self.pid]
                    .as_deref()
                    .expect("queued sender has an outbox");
                f(ob.record(q.cur_off, q.tagsize))
            })
        }
    }

    /// Look at the first message without removing it; `None` if the queue is empty.
    ///
    /// ```
    /// mbsp::run(1, |ctx| {
    ///     ctx.send(0, &[], b"x")?;
    ///     ctx.sync()?;
    ///     assert_eq!(ctx.peek()?.unwrap().payload, b"x");
    ///     assert_eq!(ctx.peek()?.unwrap().from, 0); // sent by pid 0
    ///     assert_eq!(ctx.qsize()?.messages, 1);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn peek(&self) -> Result<Option<Message<'_>>> {
        self.next_message("peek", false)
    }

    /// BSPlib's `bsp_get_tag`: the payload length and the tag of the first message, or `None`
    /// if the queue is empty. Does not remove the message.
    ///
    /// ```
    /// mbsp::run(2, |ctx| {
    ///     ctx.set_tagsize(2)?;
    ///     ctx.sync()?;
    ///     ctx.send(1 - ctx.pid(), &[7, 8], b"hello")?;
    ///     ctx.sync()?;
    ///     assert_eq!(ctx.get_tag()?, Some((5, &[7u8, 8][..]))); // payload length, tag
    ///     assert_eq!(ctx.qsize()?.messages, 1, "get_tag does not remove the message");
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn get_tag(&self) -> Result<Option<(usize, &[u8])>> {
        Ok(self
            .next_message("get_tag", false)?
            .map(|m| (m.payload.len(), m.tag)))
    }

    /// BSPlib's `bsp_move`: copy the first message's payload into `buf` (truncated to
    /// `buf.len()`; an empty `buf` just drops the message), remove it from the queue, and return
    /// its full payload length; `None` if the queue is empty.
    ///
    /// ```
    /// mbsp::run(2, |ctx| {
    ///     ctx.send(1 - ctx.pid(), &[], b"payload")?;
    ///     ctx.sync()?;
    ///     let mut buf = [0u8; 3];
    ///     assert_eq!(ctx.move_message(&mut buf)?, Some(7)); // full length returned...
    ///     assert_eq!(&buf, b"pay");                           // ...but truncated to the buffer
    ///     assert_eq!(ctx.move_message(&mut buf)?, None);      // queue now empty
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn move_message(&self, buf: &mut [u8]) -> Result<Option<usize>> {
        let Some(m) = self.next_message("move", true)? else {
            return Ok(None);
        };
        let n = m.payload.len().min(buf.len());
        // SAFETY: `n` bytes are in bounds of both.
        unsafe { crate::outbox::copy_bytes(m.payload.as_ptr(), buf.as_mut_ptr(), n) };
        Ok(Some(m.payload.len()))
    }

    /// BSPlib's `bsp_hpmove`: remove the first message from the queue and lend its tag and
    /// payload in place until the next sync; `None` if the queue is empty.
    ///
    /// ```
    /// let total = mbsp::run(4, |ctx| {
    ///     ctx.send_pod(0, &(), &[ctx.pid() as u64; 2])?;
    ///     ctx.sync()?;
    ///     let mut total = 0;
    ///     while let Some(m) = ctx.hpmove()? {
    ///         total += m.payload_as::<u64>().iter().sum::<u64>(); // read in place, no copy
    ///     }
    ///     Ok(total)
    /// }).unwrap();
    /// assert_eq!(total[0], 2 * (0 + 1 + 2 + 3));
    /// ```
    pub fn hpmove(&self) -> Result<Option<Message<'_>>> {
        self.next_message("hpmove", true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message of `payload` received by the process at `path` in superstep 3.
    fn message<'a>(path: &'a [usize], tag: &'a [u8], payload: &'a [u8]) -> Message<'a> {
        Message {
            from: 5,
            tag,
            payload,
            at: (path, 3),
        }
    }

    #[test]
    fn payloads_that_do_not_hold_the_type_asked_for() {
        let words = [0u128; 4];
        let bytes: &[u8] = bytemuck::cast_slice(&words);
        let path = [1, 2];
        // 16-byte aligned, 32 bytes: fine as u128, f64, u8.
        let m = message(&path, &[], &bytes[..32]);
        assert_eq!(m.try_payload_as::<u128>().unwrap().len(), 2);
        assert_eq!(m.payload_as::<f64>().len(), 4);
        // 8 bytes past a 16-byte boundary: not a u128 slice, whatever its length.
        let e = message(&path, &[], &bytes[8..40])
            .try_payload_as::<u128>()
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "payload_as (pid 1/2, superstep 3): the payload of the message from pid 5 (32 bytes) \
             starts 8 bytes past a multiple of 16, the alignment a u128 needs (payloads are \
             8-byte aligned: copy it out with bytemuck::pod_collect_to_vec)"
        );
        // Lengths: the hint names the widest element size that divides the payload.
        for (len, hint) in [
            (6, "3 elements of a 2-byte type (u16, i16)"),
            (7, "7 elements of a 1-byte type (u8)"),
            (20, "5 elements of a 4-byte type (f32, u32, i32)"),
        ] {
            let e = message(&path, &[], &bytes[..len])
                .try_payload_as::<f64>()
                .unwrap_err();
            assert_eq!((e.kind(), e.op()), (ErrorKind::Misuse, "payload_as"));
            assert_eq!((e.path(), e.superstep()), (&path[..], Some(3)));
            assert_eq!(
                e.message(),
                format!(
                    "the payload of the message from pid 5 has {len} bytes, not a whole number \
                     of f64 (8 bytes each); {len} bytes are {hint}"
                )
            );
        }
        let e = message(&path, &[], &bytes[..8])
            .try_payload_as::<()>()
            .unwrap_err();
        assert!(
            e.message()
                .contains("cannot be viewed as (), a type of no bytes"),
            "{e}"
        );
    }

    /// The panics of `payload_as` and `tag_as` carry the error's text, and leave the error for
    /// the process's end to report (`error::raised`).
    #[test]
    fn the_panics_carry_the_error() {
        let path = [0];
        let bytes = [0u8; 12];
        let m = message(&path, &bytes[..2], &bytes[..]);
        let text = |r: std::thread::Result<()>| {
            let payload = r.expect_err("it panics");
            crate::process::panic_message(&*payload)
        };
        let t = text(std::panic::catch_unwind(|| {
            m.payload_as::<u64>();
        }));
        assert!(
            t.starts_with(
                "payload_as (pid 0, superstep 3): the payload of the message from \
                           pid 5 has 12 bytes, not a whole number of u64"
            ),
            "{t}"
        );
        let e = crate::error::raised(&t, true).expect("the error is kept");
        assert_eq!(e.to_string(), t);
        assert!(crate::error::raised(&t, true).is_none(), "taken once");
        let t = text(std::panic::catch_unwind(|| {
            m.tag_as::<u32>();
        }));
        assert_eq!(
            t,
            "tag_as (pid 0, superstep 3): the tag of the message from pid 5 has 2 bytes (the \
             tag size of the superstep it was sent in), but a u32 has 4"
        );
        assert!(crate::error::raised("another panic", true).is_none());
        assert_eq!(m.tag_as::<u16>(), 0);
    }
}
