//! Communicable memory (BSPk): owned messages, handed from process to process without a copy,
//! and the per-process pool their buffers are recycled through.
//!
//! In BSPk a program computes in library-allocated memory that is itself the message, so sending
//! copies nothing. In Rust that is ownership: [`Ctx::send_owned`] gives a `Vec<T>` (of a
//! `bytemuck::Pod` element type) to another process, whose [`Ctx::move_owned`] gets the same
//! `Vec<T>` back after the sync; [`Ctx::buffer`] and [`Ctx::recycle`] keep the buffers in a
//! per-process pool, so a loop of supersteps that sends, receives and recycles allocates nothing
//! once the pool holds what one superstep needs.
//!
//! ## How a buffer travels
//!
//! An owned message is a message record in the sender's outbox for the receiver (`outbox.rs`),
//! like any other message, whose body is not the payload but the index of a [`Handle`] beside
//! the records: the buffer's address, length, capacity and element type. `send_owned` forgets the
//! `Vec` (no copy); the receiver's queue walks the record in place, as it walks the others; its
//! `move_owned::<T>` checks the element type (another type is a misuse naming both), empties the
//! handle and rebuilds the `Vec<T>` from its parts — one address space, one global allocator.
//! Whoever empties a handle owns its buffer, so every buffer is freed exactly once:
//!
//! * moved out by the receiver: the receiver's `Vec`, freed or recycled by its code;
//! * still in the queue (or only read through the byte views) when the receiver's next sync
//!   starts: freed by the receiver there (messages live for one superstep);
//! * never received (the run failed first, or the receiver never synced again): freed by the
//!   sender's outbox, when the sender writes it again, when the run state is kept for the next
//!   run of a team, or when it is dropped.
//!
//! The handle is an atomic pointer only so that taking it through the shared outbox is a
//! defined write; the superstep protocol already orders the receiver's accesses (during the
//! superstep after the send, and at the start of its next sync) before the sender's (after that
//! sync's first barrier, or the receiver's acknowledgement after a lazy sync), so no two ever
//! race. [`Ctx::move_owned`] takes `&mut self`, so no view of the queue (a `peek`ed payload)
//! outlives the buffer it hands over.
//!
//! Over MPI ranks (the rank engine) a buffer cannot leave its address space: `send_owned` copies
//! its bytes into the outbox (with the element type's size and name, for the receiver's check)
//! and recycles the `Vec` into the sender's pool at once; the message travels as bytes, and
//! `move_owned` copies them into a `Vec` from the receiver's pool. Runs nested in a rank are
//! thread runs and hand buffers over.
//!
//! ## Mixing with ordinary messages
//!
//! Owned messages are messages: they sit in the one queue with the others, count as one record
//! each in a lazy superstep's declared count ([`expect`](Ctx::declare_incoming)), count in
//! [`qsize`](Ctx::qsize) (their payload bytes: length × element size) and in a profile as
//! messages whose payload is copied at once (its words in the `h imm.` column, not in `h`: the
//! receiver reads the payload where it lies, and that time is in its computation, as a direct
//! get's is; the tag is queued and counts in `h`), and the byte accessors ([`peek`](Ctx::peek),
//! [`get_tag`](Ctx::get_tag), [`move_message`](Ctx::move_message), [`hpmove`](Ctx::hpmove), the
//! C ABI's `bsp_move`/`bsp_hpmove`) see their payload bytes (an owned message's payload is its
//! buffer, aligned for its element type rather than to 8 bytes). Moving an ordinary message
//! with `move_owned::<T>` copies its payload into a `Vec<T>` from the pool (its length must be
//! a multiple of `size_of::<T>()`).
//!
//! The queue's order: each sender's messages in the order it sent them (ordinary, `hpsend` and
//! owned messages alike), senders in pid order — on both engines. BSPlib leaves the order
//! unspecified; mbsp keeps this one.
//!
//! ## The pool
//!
//! One per process and run, per element type: `buffer::<T>(n)` hands out the smallest pooled
//! `Vec<T>` whose capacity is at least `n` (empty), or allocates one; `recycle` keeps a `Vec`
//! for later (at most `max(64, 2 p)` per element type; beyond that it is freed). A steady state
//! needs each process to get back about as many buffers as it sends (exchanges, rings,
//! all-to-all): a process that only sends allocates what it sends, one that only receives frees
//! what exceeds its pool.

use crate::ctx::Ctx;
use crate::error::{ErrorKind, Result};
use crate::flags::{FLAG_COMM, FLAG_OUTBOX};
use crate::outbox::Kind;
use bytemuck::Pod;
use std::any::TypeId;

/// A message moved out of the queue as an owned buffer ([`Ctx::move_owned`]).
#[derive(Debug)]
pub struct OwnedMessage<'a, T> {
    /// The pid of the process that sent it (an mbsp extension: BSPlib's queue does not say).
    pub from: usize,
    /// The tag (as many bytes as the tag size of the superstep it was sent in), borrowed from
    /// the queue until the next sync.
    pub tag: &'a [u8],
    /// The payload, owned.
    pub payload: Vec<T>,
    /// The receiver's path of pids (from the top-level run) and superstep, for errors.
    at: (&'a [usize], u64),
}

impl<T: PartialEq> PartialEq for OwnedMessage<'_, T> {
    /// Equal when sender, tag and payload are (where it was received is not compared).
    fn eq(&self, other: &Self) -> bool {
        (self.from, self.tag, &self.payload) == (other.from, other.tag, &other.payload)
    }
}

impl<T: Eq> Eq for OwnedMessage<'_, T> {}

impl<T> OwnedMessage<'_, T> {
    /// The tag read as a `G` (its size must equal the tag size).
    ///
    /// # Panics
    /// If `size_of::<G>()` differs from the tag length; the message names the process, the
    /// superstep, both sizes and `G`, as [`Message::tag_as`](crate::Message::tag_as)'s does, and
    /// a run that this panic ends fails with that error (kind [`Misuse`](ErrorKind::Misuse),
    /// operation `tag_as`).
    ///
    /// ```
    /// mbsp::run(2, |ctx| {
    ///     ctx.set_tagsize(4)?;
    ///     ctx.sync()?;
    ///     ctx.send_owned(1 - ctx.pid(), &7u32.to_ne_bytes(), vec![0u16; 3])?;
    ///     ctx.sync()?;
    ///     let m = ctx.move_owned::<u16>()?.unwrap();
    ///     assert_eq!((m.tag_as::<u32>(), m.payload.len()), (7, 3));
    ///     assert_eq!(m.from, 1 - ctx.pid()); // the sender
    ///     Ok(())
    /// }).unwrap();
    /// ```
    #[track_caller]
    pub fn tag_as<G: Pod>(&self) -> G {
        crate::bsmp::read_tag(self.tag, self.from, self.at)
    }
}

/// What `move_owned` found at the front of the queue.
enum Front {
    /// A buffer handed over: (pointer, length, capacity).
    Taken(*mut u8, usize, usize),
    /// Bytes to copy: (address, length).
    Copy(*const u8, usize),
    /// The message holds elements of another type (its name).
    OtherType(String),
    /// An ordinary message whose length is not a multiple of the element size.
    Ragged(usize),
}

impl Ctx {
    /// Send `payload` to `pid` as an owned message: it arrives in `pid`'s queue after the next
    /// sync, where [`move_owned`](Ctx::move_owned) returns the same buffer — nothing is copied
    /// (over MPI ranks the bytes travel, and arrive in a buffer of the receiver's pool; see
    /// [communicable memory](crate#communicable-memory)). `tag` must have exactly
    /// [`tagsize`](Ctx::tagsize) bytes and is copied now; the payload's size has the limit of
    /// any message ([`MAX_MESSAGE`](crate::MAX_MESSAGE)).
    ///
    /// The message sits in the queue among the others in the order it was sent; it counts as
    /// one message of `payload.len() * size_of::<T>()` bytes in [`qsize`](Ctx::qsize) and in
    /// a profile (and as one record for [`expect`](Ctx::declare_incoming)), and the byte accessors ([`hpmove`](Ctx::hpmove), [`move_message`](Ctx::move_message),
    /// [`peek`](Ctx::peek)) see those bytes. One not moved out with `move_owned` before the
    /// receiver's next sync is freed then (one never received, when the run state goes). A
    /// zero-sized `T` does not compile.
    ///
    /// ```
    /// // A ring: each process hands a buffer to the next, without copying it.
    /// let got = mbsp::run(3, |ctx| {
    ///     let (me, p) = (ctx.pid(), ctx.nprocs());
    ///     let mut v = ctx.buffer::<u64>(1000)?;
    ///     v.extend((0..1000).map(|i| i * me as u64));
    ///     ctx.send_owned((me + 1) % p, &[], v)?;
    ///     ctx.sync()?;
    ///     let got = ctx.move_owned::<u64>()?.expect("one message").payload;
    ///     let last = got[999];
    ///     ctx.recycle(got); // for the next buffer()
    ///     Ok(last)
    /// }).unwrap();
    /// assert_eq!(got, vec![2 * 999, 0, 999]);
    /// ```
    pub fn send_owned<T: Pod>(&self, pid: usize, tag: &[u8], payload: Vec<T>) -> Result<()> {
        const { assert!(size_of::<T>() > 0, "owned messages of a zero-sized type") };
        let bytes = std::mem::size_of_val(&payload[..]);
        self.check_send("send_owned", pid, tag, bytes)?;
        self.engine_to_outbox(pid);
        let sent = self.engine_send_owned(pid, tag, payload);
        if sent.is_none() {
            return Err(self.no_room_for_message("send_owned", pid, tag.len(), bytes));
        }
        self.note_owned(pid, tag.len(), bytes);
        self.flag(FLAG_COMM | FLAG_OUTBOX);
        Ok(())
    }

    /// Remove the first message from the queue and return its payload as an owned `Vec<T>`
    /// (and its tag, lent until the next sync); `None` if the queue is empty.
    ///
    /// An owned message ([`send_owned`](Ctx::send_owned)) of `Vec<T>` comes back as the very
    /// buffer sent, without a copy (over MPI ranks, as a copy in a buffer of this process's
    /// pool); one of another element type is a misuse naming both types. An ordinary message
    /// is copied into a `Vec<T>` from this process's pool ([`buffer`](Ctx::buffer)); its
    /// length must be a multiple of `size_of::<T>()`.
    ///
    /// It takes `&mut self`, unlike the other queue accessors, so that no view of the queue
    /// ([`peek`](Ctx::peek)'s payload) survives the hand-over of the buffer it shows.
    ///
    /// ```
    /// mbsp::run(2, |ctx| {
    ///     let other = 1 - ctx.pid();
    ///     ctx.send_owned(other, &[], vec![1.5f64, 2.5])?; // handed over
    ///     ctx.send_pod(other, &(), &[3.5f64])?;           // copied, as always
    ///     ctx.sync()?;
    ///     assert_eq!(ctx.qsize()?.messages, 2);
    ///     assert_eq!(ctx.move_owned::<f64>()?.unwrap().payload, vec![1.5, 2.5]);
    ///     assert_eq!(ctx.move_owned::<f64>()?.unwrap().payload, vec![3.5]);
    ///     assert!(ctx.move_owned::<f64>()?.is_none());
    ///     Ok(())
    /// }).unwrap();
    /// ```
    ///
    /// A payload seen with `peek` cannot outlive the move of its buffer:
    ///
    /// ```compile_fail,E0502
    /// mbsp::run(1, |ctx| {
    ///     ctx.send_owned(0, &[], vec![1u8])?;
    ///     ctx.sync()?;
    ///     let seen = ctx.peek()?.unwrap();
    ///     let v = ctx.move_owned::<u8>()?.unwrap().payload; // error: `ctx` is borrowed by `seen`
    ///     drop(v);
    ///     assert_eq!(seen.payload, [1]);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn move_owned<T: Pod>(&mut self) -> Result<Option<OwnedMessage<'_, T>>> {
        const { assert!(size_of::<T>() > 0, "owned messages of a zero-sized type") };
        const OP: &str = "move_owned";
        self.live(OP)?;
        let mut st = self.st.borrow_mut();
        let q = &mut st.queue;
        if q.left == 0 {
            return Ok(None);
        }
        let from = q.srcs[q.cur_src].pid as usize;
        let want = TypeId::of::<T>();
        let size = size_of::<T>();
        // SAFETY: as in `next_message`: the sender leaves this outbox alone until this process
        // has passed barrier 1 of its next sync (which needs `&mut self`, so the tag returned
        // stays valid), and the run state outlives `self`. No view of this message's payload
        // is alive (we hold `&mut self`): taking its buffer invalidates none.
        let (tag, len, next, front) = unsafe {
            self.front_record(q, |r| {
                let len = r.payload.len();
                let front = match r.kind {
                    Kind::Handle(h) if h.elem.id == want => match h.take() {
                        Some(p) => Front::Taken(p, h.len, h.cap),
                        None => unreachable!("the queue reads each message once"),
                    },
                    Kind::Handle(h) => Front::OtherType((h.elem.name)().to_string()),
                    Kind::Bytes { size: s, name }
                        if s != size || name != std::any::type_name::<T>() =>
                    {
                        Front::OtherType(name.to_string())
                    }
                    Kind::Bytes { .. } => Front::Copy(r.payload.as_ptr(), len),
                    Kind::Plain if len % size != 0 => Front::Ragged(len),
                    Kind::Plain => Front::Copy(r.payload.as_ptr(), len),
                };
                ((r.tag.as_ptr(), r.tag.len()), len, r.next, front)
            })
        };
        let payload = match front {
            // SAFETY: the parts of a `Vec<T>` (its element type checked above) that the sender
            // gave up and that this process now owns (it emptied the handle).
            Front::Taken(p, n, cap) => unsafe { Vec::from_raw_parts(p.cast::<T>(), n, cap) },
            Front::Copy(src, bytes) => {
                let n = bytes / size;
                let mut v = match st.pool.take::<T>(n) {
                    Ok(v) => v,
                    Err(_) => {
                        drop(st);
                        return Err(self.fail_with(self.error(
                            ErrorKind::System,
                            OP,
                            format!(
                                "could not allocate a buffer of {n} elements of {} for the \
                                 message from pid {from}",
                                std::any::type_name::<T>()
                            ),
                        )));
                    }
                };
                // SAFETY: `v` has room for `n` elements, `bytes` = `n * size` bytes; `src` holds
                // that many bytes (the payload, alive as above); `T` is Pod, so any bytes are
                // a valid `T`.
                unsafe {
                    std::ptr::copy_nonoverlapping(src, v.as_mut_ptr().cast::<u8>(), bytes);
                    v.set_len(n);
                }
                v
            }
            Front::OtherType(sent) => {
                drop(st);
                return Err(self.misuse(
                    OP,
                    format!(
                        "the next message, from pid {from}, is an owned Vec<{sent}>, not a \
                         Vec<{}> (move it as Vec<{sent}>, or read its bytes with hpmove)",
                        std::any::type_name::<T>()
                    ),
                ));
            }
            Front::Ragged(bytes) => {
                drop(st);
                return Err(self.misuse(
                    OP,
                    format!(
                        "the next message, from pid {from}, has {bytes} payload bytes, not a \
                         whole number of {} ({size} bytes each)",
                        std::any::type_name::<T>()
                    ),
                ));
            }
        };
        let q = &mut st.queue;
        if matches!(front, Front::Taken(..)) {
            q.owned -= 1;
        }
        q.advance(next, len);
        // SAFETY: the tag stays valid and unchanged while `self` is borrowed (as above).
        let tag = unsafe { std::slice::from_raw_parts(tag.0, tag.1) };
        drop(st);
        let this: &Self = self;
        Ok(Some(OwnedMessage {
            from,
            tag,
            payload,
            at: (&this.path, this.step),
        }))
    }

    /// An empty `Vec<T>` with room for at least `capacity` elements, from this process's pool
    /// when it holds one (the smallest that fits), else newly allocated. Fill it and send it
    /// with [`send_owned`](Ctx::send_owned), or give it back with [`recycle`](Ctx::recycle).
    ///
    /// A capacity of more than `isize::MAX` bytes is a misuse; one the machine cannot allocate
    /// ends the run with an error of kind [`System`](crate::ErrorKind::System).
    ///
    /// ```
    /// mbsp::run(1, |ctx| {
    ///     let v = ctx.buffer::<u32>(100)?;
    ///     let at = v.as_ptr();
    ///     ctx.recycle(v);
    ///     let again = ctx.buffer::<u32>(50)?; // the same buffer, from the pool
    ///     assert!(again.is_empty() && again.capacity() >= 100 && again.as_ptr() == at);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn buffer<T: Pod>(&self, capacity: usize) -> Result<Vec<T>> {
        self.live("buffer")?;
        let what = || {
            format!(
                "{capacity} elements of {} ({} bytes each)",
                std::any::type_name::<T>(),
                size_of::<T>()
            )
        };
        if capacity
            .checked_mul(size_of::<T>())
            .is_none_or(|b| b > isize::MAX as usize)
        {
            return Err(self.misuse(
                "buffer",
                format!("{} exceed the largest allocation, isize::MAX bytes", what()),
            ));
        }
        let got = self.st.borrow_mut().pool.take::<T>(capacity);
        got.map_err(|_| {
            self.fail_with(self.error(
                ErrorKind::System,
                "buffer",
                format!("could not allocate {}", what()),
            ))
        })
    }

    /// Keep `v` in this process's pool for a later [`buffer`](Ctx::buffer) (emptied); at most
    /// `max(64, 2 nprocs)` buffers per element type are kept, more are freed.
    ///
    /// ```
    /// mbsp::run(2, |ctx| {
    ///     for _ in 0..10 {
    ///         let mut v = ctx.buffer::<f32>(4)?; // no allocation after the first superstep
    ///         v.push(ctx.pid() as f32);
    ///         ctx.send_owned(1 - ctx.pid(), &[], v)?;
    ///         ctx.sync()?;
    ///         let got = ctx.move_owned::<f32>()?.unwrap().payload;
    ///         assert_eq!(got, vec![(1 - ctx.pid()) as f32]);
    ///         ctx.recycle(got);
    ///     }
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn recycle<T: Pod>(&self, v: Vec<T>) {
        let limit = (2 * self.run.p).max(64);
        self.st.borrow_mut().pool.give(v, limit);
    }

    /// Free every buffer this process's pool holds: those [`recycle`](Ctx::recycle) kept, and
    /// those the collectives of `mbsp-algorithms` gave back (their large scratch and results).
    /// The pool otherwise keeps them until the run ends; a program that is done with large
    /// collectives and needs the memory for something else frees it here.
    ///
    /// ```
    /// mbsp::run(1, |ctx| {
    ///     ctx.recycle(vec![0u8; 1 << 20]);
    ///     ctx.clear_pool();
    ///     assert_eq!(ctx.buffer::<u8>(1)?.capacity(), 1); // a new one: the pool was empty
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn clear_pool(&self) {
        self.st.borrow_mut().pool = Default::default();
    }
}
