//! [`Comm`]: collectives with a mailbox registered once, for programs that call them often.
//!
//! The level-1 free functions register nothing between calls, so a one-word all-reduce is a
//! superstep of messages. A program that reduces a dot product every iteration wants less: a
//! `Comm` registers, once, a small mailbox on every process (`p` slots of a few words), and its
//! small collectives put straight into the receivers' slots — one superstep, with puts small
//! enough to travel inside the barrier itself, so a one-word all-reduce costs about one empty
//! sync (or one lazy sync, below). Data larger than a slot goes through [`Collectives`] as usual.
//!
//! A slot holds three header words and the data. The header carries a call counter, the
//! operation, the element type (size and fingerprint), root and length. Every call puts at least
//! its header to every other process, even where the operation moves no data (a broadcast's
//! root, a reduction's other processes), and every process checks every other process's header
//! before it reads any data: processes whose calls do not match, or that skipped or added one,
//! all get an error naming both calls in that very superstep, never data of another call. Slots
//! are written only inside syncs (puts are delivered by their receiver), and read right after
//! the collective's sync, so a slot is never overwritten before it is read.
//!
//! ## Runs that take turns on their cores
//!
//! In a run of 32 processes or more that outnumber their hardware threads
//! ([`Ctx::oversubscribed`]), or of 8 or more that take turns on them as coroutines
//! ([`Ctx::coroutines`]: a turn costs a switch in user space, so records weigh sooner), a
//! superstep of `p (p - 1)` records costs more than a second superstep, and the small
//! all-reduces (`allreduce` of a slot's worth, `allreduce_value`), scans and all-gathers take
//! two: every other process puts its slot to process 0, which checks every header, folds in
//! pid order and puts each process its result (the whole fold, or its prefix) with its
//! header, or for an all-gather one relay of every piece after its header and their lengths
//! (into room the mailbox has after its slots in such runs); each process checks that header
//! before it reads the result. Small broadcasts and reductions stay one superstep, with
//! `2 (p - 1)` records: every other process puts its header to the root (with its data, for a
//! reduction), and the root its header to every other process (with its data, for a
//! broadcast); the root checks every header, the others the root's. A mismatch is then named
//! by the root (process 0 for an all-reduce) or by a process whose call differs from the
//! root's, and the run ends with it; a process that named another root, or made another of
//! these calls, left its header elsewhere and is reported as one that made no call (the
//! message says so). With lazy syncs each process declares what it receives: the root
//! `p - 1` records, the others one (none in the first superstep of the two-superstep calls).
//!
//! ## Lazy syncs (opt-in: [`Comm::set_lazy`])
//!
//! Since every process puts exactly one record (its header, with or without data) to every
//! other process (in the runs above, what they say), each process knows it receives `p - 1`
//! puts, and can declare them
//! (`Ctx::declare_incoming`): the collective's sync is then lazy, and a process waits only for the arrival
//! of the headers, not for a barrier over all processes. Full syncs stay the default: with a
//! core per process a lazy sync moves more cache lines than the barrier (so runs of two make
//! declared syncs at the barrier, counts checked), and a lazy superstep may carry nothing of
//! the caller's (below); with more processes than cores, waiting only for one's partners pays
//! (docs/benchmarks.md, "Lazy syncs"). BSP cost of a small collective of `w` words:
//! `(p - 1)(3 + w) g` plus a lazy sync (the arrival of `p - 1` puts) instead of `l`.
//!
//! What lazy syncs change for mismatches:
//!
//! * calls of this `Comm` that differ (operation, root, type, length, call counter) still put
//!   `p - 1` headers each, so the counts match and the header check reports them by name;
//! * a process that syncs (or calls anything with a full sync) where the others call a `Comm`
//!   collective is reported by the runtime as a lazy sync meeting a full one (`expect is
//!   collective`) in that superstep, on the processes that notice it;
//! * the collective's superstep may carry nothing of the caller's: a put or message issued
//!   before the call in the same superstep makes a receiver's count differ from the `p - 1` it
//!   declared (the runtime's error then names `expect(p - 1)` and the count received), and a get,
//!   registration or tag-size change before it fails the sync. Sync before the call, or use
//!   full syncs (the default), which deliver such communication as every sync does.

use super::elem;
use super::wire::{NO_ROOT, Op};
use super::{Collectives, Parts, check_root};
use bytemuck::Pod;
use mbsp::{Ctx, Reg, Result};

const HEADER_WORDS: usize = 3;

/// What process 0 of a gathered collective ([`Comm::gathered`]) sends back.
#[derive(Clone, Copy)]
enum Gathered<T> {
    /// Everyone's values folded (an all-reduce).
    All,
    /// Each process the fold through its own value (an inclusive scan).
    Inclusive,
    /// Each process the fold before its own value, process 0 the identity (an exclusive scan).
    Exclusive(T),
}

/// Runs of this many processes or more that take turns on their hardware threads as threads
/// ([`Ctx::oversubscribed`]) all-reduce and scan in two supersteps ([`Comm::gathered`]): there
/// the `p (p - 1)` records of one superstep cost more than a second superstep (with a thread
/// per process, a second round of context switches), and a lazy one-superstep all-reduce waits
/// on every other process (docs/benchmarks.md, "A gathered all-reduce"). Their broadcasts and
/// reductions send headers to and from the root only ([`Comm::send_rooted`]).
const GATHER_FROM: usize = 32;

/// [`GATHER_FROM`] for runs whose processes take turns as coroutines ([`Ctx::coroutines`]):
/// a turn is a switch in user space, so the records of one superstep outweigh a second
/// superstep from fewer processes on (at 4 processes on 2 cores neither way wins clearly;
/// docs/benchmarks.md, "A gathered all-reduce").
const GATHER_FROM_COROUTINES: usize = 8;

/// Whether this run's small all-reduces and scans go in two supersteps and its small
/// broadcasts and reductions send headers to and from the root only (the same answer on every
/// process: it depends on the run only).
fn gathers(ctx: &Ctx) -> bool {
    let from = if ctx.coroutines() {
        GATHER_FROM_COROUTINES
    } else {
        GATHER_FROM
    };
    ctx.nprocs() >= from && ctx.oversubscribed()
}

/// A set of collectives with a mailbox registered once, for programs that call them often.
///
/// The level-1 free functions register nothing between calls, so a one-word all-reduce is a
/// superstep of messages. A `Comm` registers, once, a small mailbox on every process (`p` slots
/// of a few words), and its small collectives put straight into the receivers' slots: one
/// superstep (ending with a lazy sync, in which each process waits only for the `p - 1` headers
/// it receives, if [`set_lazy`](Self::set_lazy) asks for it; two supersteps for an all-reduce
/// or a scan in a run of 32 or more processes that outnumber their cores (8 or more as
/// coroutines), where broadcasts and
/// reductions send their headers to and from the root only: see the module documentation).
/// Data larger than a slot goes through [`Collectives`]. Slot headers carry a call counter and
/// the element type, and every process checks every other's before using data (in the runs
/// above, the root every other's and the others the root's), so mismatched, skipped or extra
/// calls are reported as errors. (Calls pair up in order, as syncs do: a call skipped in a loop of
/// calls of the same shape cannot be told from one with other data, and is reported when one
/// process ends having made more calls than another.)
///
/// ```
/// use mbsp_algorithms::collectives::Comm;
/// let sums = mbsp::run(3, |ctx| {
///     let mut comm = Comm::new(ctx)?;           // one superstep: registers the mailbox
///     let mut total = 0.0;
///     for i in 0..100 {
///         total += comm.allreduce_value(ctx, (ctx.pid() * i) as f64, |a, b| a + b)?;
///     }
///     comm.free(ctx)?;                          // deregistered at the next sync
///     ctx.sync()?;
///     Ok(total)
/// })?;
/// assert_eq!(sums[0], 3.0 * 4950.0);
/// # Ok::<(), mbsp::Error>(())
/// ```
pub struct Comm {
    mailbox: Reg<u64>,
    /// Data words per slot.
    capacity: usize,
    calls: u32,
    out: Vec<u64>,
    coll: Collectives,
    /// End each collective's superstep with a lazy sync (declared counts).
    lazy: bool,
    /// The element type of the last call and its fingerprint: a loop of calls on one type
    /// hashes its `TypeId` once.
    last_ty: Option<(std::any::TypeId, u64)>,
    /// Process 0's relay of a gathered all-gather ([`relay_words`]), kept from call to call.
    relay: Vec<u64>,
}

/// Words after the slots of a mailbox in a run that [`gathers`], of `p` processes and slots of
/// `capacity` data words: process 0's relay of a small all-gather, its header, every piece's
/// length and every piece (each a whole number of words, at most `capacity`). `None` on
/// overflow.
fn relay_words(p: usize, capacity: usize) -> Option<usize> {
    p.checked_mul(capacity)?
        .checked_add(p)?
        .checked_add(HEADER_WORDS)
}

/// Append `bytes` to `words`, the last word zero-padded.
fn push_bytes(words: &mut Vec<u64>, bytes: &[u8]) {
    let chunks = bytes.chunks_exact(8);
    let rest = chunks.remainder();
    words.extend(chunks.map(|c| u64::from_ne_bytes(c.try_into().expect("chunks of 8 bytes"))));
    if !rest.is_empty() {
        let mut b = [0u8; 8];
        b[..rest.len()].copy_from_slice(rest);
        words.push(u64::from_ne_bytes(b));
    }
}

/// What a slot's header says.
#[derive(Clone, Copy, PartialEq, Eq)]
struct SlotHeader {
    call: u32,
    op: u8,
    elem: u32,
    root: u32,
    len: u32,
    /// The element type's fingerprint.
    ty: u64,
}

impl SlotHeader {
    fn encode(&self) -> [u64; HEADER_WORDS] {
        [
            (self.call as u64) << 32 | (self.op as u64) << 24 | self.elem as u64 & 0xFF_FFFF,
            (self.root as u64) << 32 | self.len as u64,
            self.ty,
        ]
    }

    fn decode(w: &[u64]) -> SlotHeader {
        SlotHeader {
            call: (w[0] >> 32) as u32,
            op: (w[0] >> 24) as u8,
            elem: (w[0] & 0xFF_FFFF) as u32,
            root: (w[1] >> 32) as u32,
            len: w[1] as u32,
            ty: w[2],
        }
    }

    fn describe(&self) -> String {
        let name = Op::from_code(self.op as u16).map_or("nothing", Op::name);
        let mut s = format!("{name} (collective call {} of this Comm)", self.call);
        if self.root != NO_ROOT {
            s += &format!(" with root {}", self.root);
        }
        s + &format!(
            " on {} elements of {}",
            self.len,
            elem::describe(self.ty, self.elem)
        )
    }
}

impl Comm {
    /// The largest slot [`with_capacity`](Self::with_capacity) accepts, in data words (1 MiB):
    /// a `Comm` is for small collectives; larger data goes through [`Collectives`].
    pub const MAX_SLOT_WORDS: usize = 1 << 17;

    /// Register a mailbox of 8 data words per process pair (collective: one superstep).
    pub fn new(ctx: &mut Ctx) -> Result<Comm> {
        Comm::with_capacity(ctx, 8, Collectives::default())
    }

    /// Register a mailbox of `words` data words (8 bytes) per process pair, and use `coll` for
    /// data that does not fit (collective: one superstep). In runs that take turns on their
    /// cores (module documentation) the mailbox has room for `p (words + 1) + 3` more words,
    /// where process 0 relays small all-gathers. `words` is at most
    /// [`MAX_SLOT_WORDS`](Self::MAX_SLOT_WORDS); a mailbox that cannot be allocated is an error.
    pub fn with_capacity(ctx: &mut Ctx, words: usize, coll: Collectives) -> Result<Comm> {
        let p = ctx.nprocs();
        let slots = (words <= Self::MAX_SLOT_WORDS)
            .then(|| (HEADER_WORDS + words).checked_mul(p))
            .flatten();
        // Where small all-gathers relay through process 0, its relay lands after the slots.
        let total = match gathers(ctx) {
            true => slots.and_then(|s| s.checked_add(relay_words(p, words)?)),
            false => slots,
        };
        let mut mem = Vec::new();
        let Some(total) = total.filter(|&t| mem.try_reserve_exact(t).is_ok()) else {
            return Err(ctx.misuse_error(
                "Comm::with_capacity",
                format!(
                    "a mailbox of {words} words per slot for {p} processes cannot be allocated \
                     (at most {} words per slot)",
                    Self::MAX_SLOT_WORDS
                ),
            ));
        };
        mem.resize(total, 0u64);
        let slot = HEADER_WORDS + words;
        let mailbox = ctx.push_reg(mem)?;
        ctx.sync()?;
        Ok(Comm {
            mailbox,
            capacity: words,
            calls: 0,
            out: vec![0; slot],
            coll,
            lazy: false,
            last_ty: None,
            relay: Vec::new(),
        })
    }

    /// Whether this `Comm`'s small collectives end with a lazy sync (`true`: each process
    /// declares the `p - 1` headers it receives, and the superstep may carry nothing else of
    /// the caller's; see the module documentation of `Comm`) or with a full sync (`false`, the
    /// default: the superstep may then carry the caller's own puts, messages and gets,
    /// delivered as by any sync). Every process must make the same choice: a full sync meeting
    /// a lazy one is an error of the run.
    ///
    /// ```
    /// use mbsp_algorithms::collectives::Comm;
    /// let got = mbsp::run(2, |ctx| {
    ///     let mut comm = Comm::new(ctx)?;
    ///     let x = ctx.push_reg(vec![0u32; 1])?;
    ///     ctx.sync()?;
    ///     ctx.put(1 - ctx.pid(), &[7u32], &x, 0)?; // delivered by the collective's full sync
    ///     let sum = comm.allreduce_value(ctx, 1u32, |a, b| a + b)?;
    ///     comm.set_lazy(true); // the next calls' supersteps carry only their own puts
    ///     let max = comm.allreduce_value(ctx, ctx.pid() as u32, u32::max)?;
    ///     Ok((sum, ctx.local(&x)?[0], max))
    /// })?;
    /// assert_eq!(got, vec![(2, 7, 1); 2]);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn set_lazy(&mut self, lazy: bool) {
        self.lazy = lazy;
    }

    /// Whether the small collectives end with a lazy sync ([`set_lazy`](Self::set_lazy)).
    pub fn is_lazy(&self) -> bool {
        self.lazy
    }

    /// Deregister the mailbox (takes effect at the next sync, like every `pop_reg`).
    pub fn free(self, ctx: &mut Ctx) -> Result<()> {
        ctx.pop_reg(&self.mailbox)
    }

    /// The collectives used for data larger than a slot.
    pub fn collectives(&self) -> &Collectives {
        &self.coll
    }

    fn fits<T>(&self, n: usize) -> bool {
        n.checked_mul(size_of::<T>())
            .is_some_and(|b| b <= self.capacity * 8)
            && n <= u32::MAX as usize
    }

    fn header<T: 'static>(&mut self, op: Op, root: Option<usize>, n: usize) -> SlotHeader {
        self.calls = self.calls.wrapping_add(1);
        SlotHeader {
            call: self.calls,
            op: op as u8,
            elem: size_of::<T>() as u32,
            root: root.map_or(NO_ROOT, |r| r as u32),
            len: n as u32,
            ty: self.fingerprint::<T>(),
        }
    }

    /// `T`'s fingerprint ([`elem::fingerprint`]), remembered for the next call.
    fn fingerprint<T: 'static>(&mut self) -> u64 {
        let id = std::any::TypeId::of::<T>();
        match self.last_ty {
            Some((t, tag)) if t == id => tag,
            _ => {
                let tag = elem::fingerprint::<T>();
                self.last_ty = Some((id, tag));
                tag
            }
        }
    }

    /// Put `h` into the slot of this process at every other process, followed by `data` where
    /// `wants(q)`, and sync; [`checked`](Self::checked) then checks the headers, so that no
    /// data is read unless every process made the same call.
    #[inline]
    fn send<T: Pod>(
        &mut self,
        ctx: &mut Ctx,
        h: &SlotHeader,
        data: &[T],
        wants: impl Fn(usize) -> bool,
    ) -> Result<()> {
        let words = self.fill(h, data);
        self.put_slot(ctx, &self.out[..words], wants)
    }

    /// A small all-reduce or scan (`kind`) in two supersteps, for runs whose supersteps cost
    /// their processes' turns more than their records ([`gathers`]): every other process puts
    /// its slot to process 0, which checks every header, folds in pid order, and puts each
    /// other process its result (the whole fold, or the prefix through or before it) with its
    /// header; each process checks process 0's header before it reads its result. `2 (p - 1)`
    /// records instead of `p (p - 1)`.
    fn gathered<T: Pod, F: Fn(T, T) -> T>(
        &mut self,
        ctx: &mut Ctx,
        h: &SlotHeader,
        buf: &mut [T],
        op: &F,
        kind: Gathered<T>,
    ) -> Result<()> {
        let (me, p) = (ctx.pid(), ctx.nprocs());
        let words = self.fill(h, buf);
        let (at, stride) = (0, HEADER_WORDS + self.capacity);
        // Superstep 1: to process 0 (which receives p - 1 records, the others none).
        if me != 0 {
            ctx.put(0, &self.out[..words], &self.mailbox, me * stride)?;
        }
        if self.lazy {
            ctx.declare_incoming(if me == 0 { p - 1 } else { 0 })?;
        }
        ctx.sync()?;
        if me == 0 {
            self.checked(ctx, h, false)?;
            match kind {
                Gathered::All => {
                    let mb = ctx.local(&self.mailbox)?;
                    self.fold(mb, 0, buf, 0..p, op);
                    let words = self.fill(h, buf);
                    for q in 1..p {
                        ctx.put(q, &self.out[..words], &self.mailbox, at)?;
                    }
                }
                Gathered::Inclusive | Gathered::Exclusive(_) => {
                    // The prefix in pid order, in `out` after the header (which holds process
                    // 0's own value now): sent before (exclusive) or after (inclusive) each
                    // process's value joins it. `buf` keeps process 0's own value.
                    let mb = ctx.local(&self.mailbox)?;
                    let mb: &[u8] = bytemuck::cast_slice(mb);
                    let sz = size_of::<T>();
                    let inclusive = matches!(kind, Gathered::Inclusive);
                    for q in 1..p {
                        if !inclusive {
                            ctx.put(q, &self.out[..words], &self.mailbox, at)?;
                        }
                        let acc: &mut [u8] =
                            bytemuck::cast_slice_mut(&mut self.out[HEADER_WORDS..]);
                        let from = (q * stride + HEADER_WORDS) * 8;
                        for i in 0..buf.len() {
                            let (a, v) = (i * sz..(i + 1) * sz, from + i * sz);
                            let x = op(
                                bytemuck::pod_read_unaligned(&acc[a.clone()]),
                                bytemuck::pod_read_unaligned(&mb[v..v + sz]),
                            );
                            acc[a].copy_from_slice(bytemuck::bytes_of(&x));
                        }
                        if inclusive {
                            ctx.put(q, &self.out[..words], &self.mailbox, at)?;
                        }
                    }
                    if let Gathered::Exclusive(identity) = kind {
                        buf.fill(identity);
                    }
                }
            }
        }
        // Superstep 2: back from process 0 (one record to each other process).
        if self.lazy {
            ctx.declare_incoming(if me == 0 { 0 } else { 1 })?;
        }
        ctx.sync()?;
        if me != 0 {
            let mb = self.checked_from(ctx, h, 0)?;
            let (data, _) = self.slot(mb, 0);
            bytemuck::cast_slice_mut::<T, u8>(buf).copy_from_slice(data);
        }
        Ok(())
    }

    /// A rooted collective's superstep in a run that [`gathers`]: every other process puts its
    /// header to `root` (with `data` unless `from_root`), and `root` puts its header to every
    /// other process (with `data` if `from_root`), and sync: `2 (p - 1)` records instead of
    /// every header to every process ([`checked_rooted`](Self::checked_rooted) then checks).
    fn send_rooted<T: Pod>(
        &mut self,
        ctx: &mut Ctx,
        h: &SlotHeader,
        data: &[T],
        root: usize,
        from_root: bool,
    ) -> Result<()> {
        let (me, p) = (ctx.pid(), ctx.nprocs());
        let words = self.fill(h, data);
        let stride = HEADER_WORDS + self.capacity;
        // The data goes one way only; the other way carries the header alone.
        let sends_data = (me == root) == from_root;
        let w = if sends_data { words } else { HEADER_WORDS };
        if me == root {
            for q in (0..p).filter(|&q| q != root) {
                ctx.put(q, &self.out[..w], &self.mailbox, root * stride)?;
            }
        } else {
            ctx.put(root, &self.out[..w], &self.mailbox, me * stride)?;
        }
        if self.lazy {
            ctx.declare_incoming(if me == root { p - 1 } else { 1 })?;
        }
        ctx.sync()
    }

    /// The mailbox after [`send_rooted`](Self::send_rooted), once `root` has checked every
    /// other process's header and every other process `root`'s.
    fn checked_rooted<'a>(
        &'a self,
        ctx: &'a Ctx,
        h: &SlotHeader,
        root: usize,
    ) -> Result<&'a [u64]> {
        if ctx.pid() == root {
            self.checked(ctx, h, false)
        } else {
            self.checked_from(ctx, h, root)
        }
    }

    /// The mailbox, once `from`'s header is checked against `h`.
    fn checked_from<'a>(&'a self, ctx: &'a Ctx, h: &SlotHeader, from: usize) -> Result<&'a [u64]> {
        let mb = ctx.local(&self.mailbox)?;
        let s = from * (HEADER_WORDS + self.capacity);
        if SlotHeader::decode(&mb[s..s + HEADER_WORDS]) != *h {
            self.check(ctx, mb, h, from, false)?;
        }
        Ok(mb)
    }

    /// Write `h` and `data` into `out`; returns the words written.
    #[inline]
    fn fill<T: Pod>(&mut self, h: &SlotHeader, data: &[T]) -> usize {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let words = HEADER_WORDS + bytes.len().div_ceil(8);
        self.out[..HEADER_WORDS].copy_from_slice(&h.encode());
        // Word by word: a small collective's few words cost less so than the calls of a
        // general copy and fill.
        let chunks = bytes.chunks_exact(8);
        let rest = chunks.remainder();
        for (w, c) in self.out[HEADER_WORDS..].iter_mut().zip(chunks) {
            *w = u64::from_ne_bytes(c.try_into().expect("chunks of 8 bytes"));
        }
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            self.out[words - 1] = u64::from_ne_bytes(b);
        }
        words
    }

    /// Put `slot` (a header and its data) into this process's slot at every other process,
    /// the data only where `wants(q)`, and sync.
    #[inline]
    fn put_slot(&self, ctx: &mut Ctx, slot: &[u64], wants: impl Fn(usize) -> bool) -> Result<()> {
        let (me, p) = (ctx.pid(), ctx.nprocs());
        let at = me * (HEADER_WORDS + self.capacity);
        for q in (0..p).filter(|&q| q != me) {
            let w = if wants(q) { slot.len() } else { HEADER_WORDS };
            ctx.put(q, &slot[..w], &self.mailbox, at)?;
        }
        if self.lazy {
            // One header put from every other process, whatever the operation.
            ctx.declare_incoming(p - 1)?;
        }
        ctx.sync()
    }

    /// The mailbox after [`send`](Self::send), once every other process's header is checked
    /// against `h` (lengths too unless `any_len`).
    #[inline]
    fn checked<'a>(&'a self, ctx: &'a Ctx, h: &SlotHeader, any_len: bool) -> Result<&'a [u64]> {
        let mb = ctx.local(&self.mailbox)?;
        let head = h.encode();
        // The encoded headers are compared word by word (the encoding is one to one); `check`
        // decodes them only to report a difference. Word 1 holds the root and the length.
        let len_mask = if any_len { !0xFFFF_FFFF } else { !0 };
        let same =
            |w: &[u64]| w[0] == head[0] && (w[1] ^ head[1]) & len_mask == 0 && w[2] == head[2];
        let me = ctx.pid();
        for q in (0..ctx.nprocs()).filter(|&q| q != me) {
            let s = q * (HEADER_WORDS + self.capacity);
            if !same(&mb[s..s + HEADER_WORDS]) {
                self.check(ctx, mb, h, q, any_len)?;
            }
        }
        Ok(mb)
    }

    /// An error unless `from`'s slot holds the header of the same call as `mine` (`len` is
    /// compared unless `any_len`).
    fn check(
        &self,
        ctx: &Ctx,
        mailbox: &[u64],
        mine: &SlotHeader,
        from: usize,
        any_len: bool,
    ) -> Result<()> {
        let s = from * (HEADER_WORDS + self.capacity);
        self.check_words(ctx, &mailbox[s..s + HEADER_WORDS], mine, from, any_len)
    }

    /// [`check`](Self::check) of `from`'s header in `words` (wherever it lies).
    fn check_words(
        &self,
        ctx: &Ctx,
        words: &[u64],
        mine: &SlotHeader,
        from: usize,
        any_len: bool,
    ) -> Result<()> {
        let h = SlotHeader::decode(words);
        let same = h.call == mine.call
            && h.op == mine.op
            && h.elem == mine.elem
            && h.ty == mine.ty
            && h.root == mine.root
            && (any_len || h.len == mine.len);
        if same {
            return Ok(());
        }
        let name = Op::from_code(mine.op as u16).map_or("collective", Op::name);
        let me = ctx.pid();
        // Where headers go to the root only, a process that named another root, or made an
        // all-reduce where this one made a rooted call, left no header here.
        let rooted = if gathers(ctx) {
            " (in a run of 32 or more processes on fewer cores, or 8 or more as coroutines, \
             broadcasts and reductions send their headers to their root only, all-reduces and scans to pid 0: a process that \
             named another root or called another of them is seen here as one that made no \
             call)"
        } else {
            ""
        };
        let message = if h.call == 0 {
            format!(
                "processes disagree: pid {from} made no call of this Comm when pid {me} called \
                 {}{rooted}",
                mine.describe()
            )
        } else if h.call != mine.call {
            // The slot still holds pid `from`'s last call: it skipped this one, or this process
            // made one more than it.
            format!(
                "processes disagree on the number of calls of this Comm: pid {from} made {} \
                 (the last: {}) when pid {me} made {} (this one: {}); a call was skipped or \
                 added on one side{rooted}",
                h.call,
                h.describe(),
                mine.call,
                mine.describe()
            )
        } else {
            format!(
                "processes disagree: pid {from} called {}, pid {me} called {}",
                h.describe(),
                mine.describe()
            )
        };
        Err(ctx.misuse_error(name, message))
    }

    /// The data of `from`'s slot (whose header [`checked`](Self::checked) checked) and its length.
    fn slot<'a>(&self, mailbox: &'a [u64], from: usize) -> (&'a [u8], usize) {
        let s = from * (HEADER_WORDS + self.capacity);
        let h = SlotHeader::decode(&mailbox[s..s + HEADER_WORDS]);
        let len = h.len as usize;
        let data = bytemuck::cast_slice::<u64, u8>(
            &mailbox[s + HEADER_WORDS..s + HEADER_WORDS + self.capacity],
        );
        (&data[..len * h.elem as usize], len)
    }

    /// [`Collectives::broadcast`]; one superstep when `buf` fits a slot.
    ///
    /// ```
    /// use mbsp_algorithms::collectives::Comm;
    /// let got = mbsp::run(3, |ctx| {
    ///     let mut comm = Comm::new(ctx)?;
    ///     let mut x = [ctx.pid() as f32 * 1.5];
    ///     comm.broadcast(ctx, 2, &mut x)?;
    ///     Ok(x[0])
    /// })?;
    /// assert_eq!(got, vec![3.0; 3]);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn broadcast<T: Pod>(&mut self, ctx: &mut Ctx, root: usize, buf: &mut [T]) -> Result<()> {
        if !self.fits::<T>(buf.len()) {
            return self.coll.broadcast(ctx, root, buf);
        }
        check_root(ctx, Op::Broadcast, root)?;
        let me = ctx.pid();
        let h = self.header::<T>(Op::Broadcast, Some(root), buf.len());
        let mb = if gathers(ctx) {
            self.send_rooted(ctx, &h, buf, root, true)?;
            self.checked_rooted(ctx, &h, root)?
        } else {
            self.send(ctx, &h, buf, |_| me == root)?;
            self.checked(ctx, &h, false)?
        };
        if me != root {
            let (data, _) = self.slot(mb, root);
            bytemuck::cast_slice_mut::<T, u8>(buf).copy_from_slice(data);
        }
        Ok(())
    }

    /// [`Collectives::reduce`]; one superstep when `buf` fits a slot.
    pub fn reduce<T: Pod, F: Fn(T, T) -> T>(
        &mut self,
        ctx: &mut Ctx,
        root: usize,
        buf: &mut [T],
        op: F,
    ) -> Result<()> {
        if !self.fits::<T>(buf.len()) {
            return self.coll.reduce(ctx, root, buf, op);
        }
        check_root(ctx, Op::Reduce, root)?;
        let me = ctx.pid();
        let h = self.header::<T>(Op::Reduce, Some(root), buf.len());
        let mb = if gathers(ctx) {
            self.send_rooted(ctx, &h, buf, root, false)?;
            self.checked_rooted(ctx, &h, root)?
        } else {
            self.send(ctx, &h, buf, |q| q == root)?;
            self.checked(ctx, &h, false)?
        };
        if me == root {
            self.fold(mb, me, buf, 0..ctx.nprocs(), &op);
        }
        Ok(())
    }

    /// [`Collectives::allreduce`]; one superstep when `buf` fits a slot.
    pub fn allreduce<T: Pod, F: Fn(T, T) -> T>(
        &mut self,
        ctx: &mut Ctx,
        buf: &mut [T],
        op: F,
    ) -> Result<()> {
        if !self.fits::<T>(buf.len()) {
            return self.coll.allreduce(ctx, buf, op);
        }
        let p = ctx.nprocs();
        let h = self.header::<T>(Op::AllReduce, None, buf.len());
        if gathers(ctx) {
            return self.gathered(ctx, &h, buf, &op, Gathered::All);
        }
        self.send(ctx, &h, buf, |_| true)?;
        let mb = self.checked(ctx, &h, false)?;
        self.fold(mb, ctx.pid(), buf, 0..p, &op);
        Ok(())
    }

    /// All-reduce of one value; one superstep.
    pub fn allreduce_value<T: Pod, F: Fn(T, T) -> T>(
        &mut self,
        ctx: &mut Ctx,
        x: T,
        op: F,
    ) -> Result<T> {
        let sz = size_of::<T>();
        if sz > 8 || !self.fits::<T>(1) {
            let mut b = [x];
            self.allreduce(ctx, &mut b, op)?;
            return Ok(b[0]);
        }
        // A value of one word (a dot product, a norm, a residual: an iterative solver's every
        // iteration): its slot is made on the stack and the others' values read where they
        // lie, the protocol of `allreduce` with less around it.
        let h = self.header::<T>(Op::AllReduce, None, 1);
        if gathers(ctx) {
            let mut b = [x];
            self.gathered(ctx, &h, &mut b, &op, Gathered::All)?;
            return Ok(b[0]);
        }
        let mut word = [0u8; 8];
        word[..sz].copy_from_slice(bytemuck::bytes_of(&x));
        let head = h.encode();
        let slot = [head[0], head[1], head[2], u64::from_ne_bytes(word)];
        self.put_slot(ctx, &slot, |_| true)?;
        let mb = self.checked(ctx, &h, false)?;
        let (me, stride) = (ctx.pid(), HEADER_WORDS + self.capacity);
        let value = |q: usize| {
            if q == me {
                x
            } else {
                bytemuck::pod_read_unaligned(&mb[q * stride + HEADER_WORDS].to_ne_bytes()[..sz])
            }
        };
        Ok((1..ctx.nprocs()).fold(value(0), |acc, q| op(acc, value(q))))
    }

    /// [`Collectives::scan_inclusive`]; one superstep when `buf` fits a slot.
    pub fn scan_inclusive<T: Pod, F: Fn(T, T) -> T>(
        &mut self,
        ctx: &mut Ctx,
        buf: &mut [T],
        op: F,
    ) -> Result<()> {
        if !self.fits::<T>(buf.len()) {
            return self.coll.scan_inclusive(ctx, buf, op);
        }
        let me = ctx.pid();
        let h = self.header::<T>(Op::ScanInclusive, None, buf.len());
        if gathers(ctx) {
            return self.gathered(ctx, &h, buf, &op, Gathered::Inclusive);
        }
        self.send(ctx, &h, buf, |q| q > me)?;
        let mb = self.checked(ctx, &h, false)?;
        self.fold(mb, me, buf, 0..me + 1, &op);
        Ok(())
    }

    /// [`Collectives::scan_exclusive`]; one superstep when `buf` fits a slot.
    pub fn scan_exclusive<T: Pod, F: Fn(T, T) -> T>(
        &mut self,
        ctx: &mut Ctx,
        buf: &mut [T],
        identity: T,
        op: F,
    ) -> Result<()> {
        if !self.fits::<T>(buf.len()) {
            return self.coll.scan_exclusive(ctx, buf, identity, op);
        }
        let me = ctx.pid();
        let h = self.header::<T>(Op::ScanExclusive, None, buf.len());
        if gathers(ctx) {
            return self.gathered(ctx, &h, buf, &op, Gathered::Exclusive(identity));
        }
        self.send(ctx, &h, buf, |q| q > me)?;
        let mb = self.checked(ctx, &h, false)?;
        if me == 0 {
            buf.fill(identity);
            return Ok(());
        }
        self.fold(mb, me, buf, 0..me, &op);
        Ok(())
    }

    /// [`Collectives::allgather`]; one superstep when every piece fits a slot (two, relayed by
    /// process 0, in runs that take turns on their cores: see the module documentation). The
    /// decision is made from `max_len`, an upper bound of every process's length that all processes agree
    /// on (a longer piece is an error).
    ///
    /// ```
    /// use mbsp_algorithms::collectives::Comm;
    /// let got = mbsp::run(2, |ctx| {
    ///     let mut comm = Comm::new(ctx)?;
    ///     let mine = vec![ctx.pid() as u16; ctx.pid() + 1];
    ///     Ok(comm.allgather(ctx, &mine, 2)?.into_vec())
    /// })?;
    /// assert_eq!(got[0], vec![0, 1, 1]);
    /// # Ok::<(), mbsp::Error>(())
    /// ```
    pub fn allgather<T: Pod>(
        &mut self,
        ctx: &mut Ctx,
        local: &[T],
        max_len: usize,
    ) -> Result<Parts<T>> {
        if !self.fits::<T>(max_len) {
            return self.coll.allgather(ctx, local);
        }
        let (me, p) = (ctx.pid(), ctx.nprocs());
        if local.len() > max_len {
            return Err(ctx.misuse_error(
                Op::AllGather.name(),
                format!(
                    "{} elements exceed the max_len {max_len} given",
                    local.len()
                ),
            ));
        }
        let h = self.header::<T>(Op::AllGather, None, local.len());
        if gathers(ctx) {
            return self.allgather_gathered(ctx, &h, local);
        }
        self.send(ctx, &h, local, |_| true)?;
        let mb = self.checked(ctx, &h, true)?;
        let mut pieces = Vec::with_capacity(p);
        for q in 0..p {
            pieces.push(if q == me {
                super::Source::Local(local)
            } else {
                super::Source::Bytes(self.slot(mb, q).0)
            });
        }
        Parts::concat(ctx, &pieces)
    }

    /// A small all-gather in a run that [`gathers`], in two supersteps: every other process
    /// puts its slot to process 0, which checks every header and puts every other process one
    /// relay after its slots ([`relay_words`]: its header, every piece's length, the pieces);
    /// each checks process 0's header in it before reading. `2 (p - 1)` records instead of
    /// `p (p - 1)`. The pieces' lengths are those their senders checked against `max_len`.
    fn allgather_gathered<T: Pod>(
        &mut self,
        ctx: &mut Ctx,
        h: &SlotHeader,
        local: &[T],
    ) -> Result<Parts<T>> {
        let (me, p) = (ctx.pid(), ctx.nprocs());
        let stride = HEADER_WORDS + self.capacity;
        let relay_at = p * stride;
        let words = self.fill(h, local);
        // Superstep 1: to process 0 (which receives p - 1 records, the others none).
        if me != 0 {
            ctx.put(0, &self.out[..words], &self.mailbox, me * stride)?;
        }
        if self.lazy {
            ctx.declare_incoming(if me == 0 { p - 1 } else { 0 })?;
        }
        ctx.sync()?;
        let mut gathered = None;
        if me == 0 {
            let mut relay = std::mem::take(&mut self.relay);
            let mb = self.checked(ctx, h, true)?;
            relay.clear();
            relay.extend_from_slice(&h.encode());
            let piece = |q: usize| -> (&[u8], usize) {
                match q {
                    0 => (bytemuck::cast_slice(local), local.len()),
                    _ => self.slot(mb, q),
                }
            };
            relay.extend((0..p).map(|q| piece(q).1 as u64));
            for q in 0..p {
                push_bytes(&mut relay, piece(q).0);
            }
            for q in 1..p {
                ctx.put(q, &relay, &self.mailbox, relay_at)?;
            }
            let pieces: Vec<_> = (0..p)
                .map(|q| match q {
                    0 => super::Source::Local(local),
                    _ => super::Source::Bytes(piece(q).0),
                })
                .collect();
            // Nobody puts to process 0 in the next superstep: its slots stay as they are.
            gathered = Some(Parts::concat(ctx, &pieces));
            self.relay = relay;
        }
        // Superstep 2: the relay (one record to each other process).
        if self.lazy {
            ctx.declare_incoming(if me == 0 { 0 } else { 1 })?;
        }
        ctx.sync()?;
        if let Some(parts) = gathered {
            return parts;
        }
        let mb = ctx.local(&self.mailbox)?;
        let relay = &mb[relay_at..];
        let head = h.encode();
        let mask = !0xFFFF_FFFF; // word 1's length: process 0's own
        if relay[0] != head[0] || (relay[1] ^ head[1]) & mask != 0 || relay[2] != head[2] {
            self.check_words(ctx, &relay[..HEADER_WORDS], h, 0, true)?;
        }
        let lens = &relay[HEADER_WORDS..HEADER_WORDS + p];
        let data: &[u8] = bytemuck::cast_slice(&relay[HEADER_WORDS + p..]);
        let mut at = 0;
        let mut pieces = Vec::with_capacity(p);
        for (q, &len) in lens.iter().enumerate() {
            // Each at most a slot's worth (its sender checked it against `max_len`).
            let bytes = len as usize * size_of::<T>();
            pieces.push(match q == me {
                true => super::Source::Local(local),
                false => super::Source::Bytes(&data[at..at + bytes]),
            });
            at += bytes.div_ceil(8) * 8;
        }
        Parts::concat(ctx, &pieces)
    }

    /// Fold the slots of `from` in `mb` (the mailbox, headers checked by
    /// [`checked`](Self::checked); process `me`'s own data from `buf`) in pid order into `buf`,
    /// element by element (at most a slot's worth), so no accumulator is needed.
    #[inline]
    fn fold<T: Pod, F: Fn(T, T) -> T>(
        &self,
        mb: &[u64],
        me: usize,
        buf: &mut [T],
        from: std::ops::Range<usize>,
        op: &F,
    ) {
        let Some(first) = from.clone().next() else {
            return;
        };
        let sz = size_of::<T>();
        let stride = HEADER_WORDS + self.capacity;
        let bytes: &[u8] = bytemuck::cast_slice(mb);
        let elem = |q: usize, i: usize, own: T| -> T {
            if q == me {
                own
            } else {
                let at = (q * stride + HEADER_WORDS) * 8 + i * sz;
                bytemuck::pod_read_unaligned(&bytes[at..at + sz])
            }
        };
        for (i, b) in buf.iter_mut().enumerate() {
            let own = *b;
            let mut acc = elem(first, i, own);
            for q in from.clone().skip(1) {
                acc = op(acc, elem(q, i, own));
            }
            *b = acc;
        }
    }
}
