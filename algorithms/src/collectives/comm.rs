//! [`Comm`]: collectives with a mailbox registered once, for programs that call them often.
//!
//! The level-1 free functions register nothing between calls, so a one-word all-reduce is a
//! superstep of messages. A program that reduces a dot product every iteration wants less: a
//! `Comm` registers, once, a small mailbox on every process (`p` slots of a few words), and its
//! small collectives put straight into the receivers' slots — one superstep, with puts small
//! enough to travel inside the barrier itself, so a one-word all-reduce costs about one empty
//! sync. Data larger than a slot goes through [`Collectives`] as usual.
//!
//! A slot holds two header words and the data. The header carries a call counter, the
//! operation, element size, root and length; a receiver checks every slot it reads, so processes
//! whose calls do not match (or that skipped one) get an error naming both calls. Slots are
//! written only inside syncs (puts are delivered by their receiver), and read right after the
//! collective's sync, so a slot is never overwritten before it is read.

use super::wire::{NO_ROOT, Op};
use super::{Collectives, Parts, check_root};
use bytemuck::Pod;
use mbsp::{Ctx, Reg, Result};

const HEADER_WORDS: usize = 2;

/// A set of collectives with a mailbox registered once, for programs that call them often.
///
/// The level-1 free functions register nothing between calls, so a one-word all-reduce is a
/// superstep of messages. A `Comm` registers, once, a small mailbox on every process (`p` slots
/// of a few words), and its small collectives put straight into the receivers' slots: one
/// superstep whose puts travel inside the barrier. Data larger than a slot goes through
/// [`Collectives`]. Slot headers carry a call counter, so mismatched or skipped calls are
/// reported as errors.
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
}

/// What a slot's header says.
#[derive(Clone, Copy, PartialEq, Eq)]
struct SlotHeader {
    call: u32,
    op: u8,
    elem: u32,
    root: u32,
    len: u32,
}

impl SlotHeader {
    fn encode(&self) -> [u64; HEADER_WORDS] {
        [
            (self.call as u64) << 32 | (self.op as u64) << 24 | self.elem as u64 & 0xFF_FFFF,
            (self.root as u64) << 32 | self.len as u64,
        ]
    }

    fn decode(w: &[u64]) -> SlotHeader {
        SlotHeader {
            call: (w[0] >> 32) as u32,
            op: (w[0] >> 24) as u8,
            elem: (w[0] & 0xFF_FFFF) as u32,
            root: (w[1] >> 32) as u32,
            len: w[1] as u32,
        }
    }

    fn describe(&self) -> String {
        let name = Op::from_code(self.op as u16).map_or("nothing", Op::name);
        let mut s = format!("{name} (collective call {} of this Comm)", self.call);
        if self.root != NO_ROOT {
            s += &format!(" with root {}", self.root);
        }
        s + &format!(" on {} elements of {} bytes", self.len, self.elem)
    }
}

impl Comm {
    /// Register a mailbox of 8 data words per process pair (collective: one superstep).
    pub fn new(ctx: &mut Ctx) -> Result<Comm> {
        Comm::with_capacity(ctx, 8, Collectives::default())
    }

    /// Register a mailbox of `words` data words (8 bytes) per process pair, and use `coll` for
    /// data that does not fit (collective: one superstep).
    pub fn with_capacity(ctx: &mut Ctx, words: usize, coll: Collectives) -> Result<Comm> {
        let slot = HEADER_WORDS + words;
        let mailbox = ctx.push_reg(vec![0u64; slot * ctx.nprocs()])?;
        ctx.sync()?;
        Ok(Comm {
            mailbox,
            capacity: words,
            calls: 0,
            out: vec![0; slot],
            coll,
        })
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
        n * size_of::<T>() <= self.capacity * 8 && n <= u32::MAX as usize
    }

    fn header<T>(&mut self, op: Op, root: Option<usize>, n: usize) -> SlotHeader {
        self.calls = self.calls.wrapping_add(1);
        SlotHeader {
            call: self.calls,
            op: op as u8,
            elem: size_of::<T>() as u32,
            root: root.map_or(NO_ROOT, |r| r as u32),
            len: n as u32,
        }
    }

    /// Put `data` behind `h` into the slot of this process at every pid of `to`, then sync.
    fn post<T: Pod>(
        &mut self,
        ctx: &mut Ctx,
        h: &SlotHeader,
        data: &[T],
        to: impl Iterator<Item = usize>,
    ) -> Result<()> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let words = HEADER_WORDS + bytes.len().div_ceil(8);
        self.out[..HEADER_WORDS].copy_from_slice(&h.encode());
        self.out[HEADER_WORDS..words].fill(0);
        bytemuck::cast_slice_mut::<u64, u8>(&mut self.out[HEADER_WORDS..words])[..bytes.len()]
            .copy_from_slice(bytes);
        let at = ctx.pid() * (HEADER_WORDS + self.capacity);
        for q in to {
            ctx.put(q, &self.out[..words], &self.mailbox, at)?;
        }
        ctx.sync()
    }

    /// The data of `from`'s slot, after checking its header against ours (`len` is compared
    /// unless `any_len`).
    fn slot<'a>(
        &self,
        ctx: &Ctx,
        mailbox: &'a [u64],
        mine: &SlotHeader,
        from: usize,
        any_len: bool,
    ) -> Result<(&'a [u8], usize)> {
        let s = from * (HEADER_WORDS + self.capacity);
        let h = SlotHeader::decode(&mailbox[s..s + HEADER_WORDS]);
        let same = h.call == mine.call
            && h.op == mine.op
            && h.elem == mine.elem
            && h.root == mine.root
            && (any_len || h.len == mine.len);
        if !same {
            let name = Op::from_code(mine.op as u16).map_or("collective", Op::name);
            let theirs = if h.call == mine.call || h.call != 0 {
                format!("pid {from} called {}", h.describe())
            } else {
                format!("pid {from} sent nothing")
            };
            return Err(ctx.misuse_error(
                name,
                format!(
                    "processes disagree: {theirs}, pid {} called {}",
                    ctx.pid(),
                    mine.describe()
                ),
            ));
        }
        let len = h.len as usize;
        let data = bytemuck::cast_slice::<u64, u8>(
            &mailbox[s + HEADER_WORDS..s + HEADER_WORDS + self.capacity],
        );
        Ok((&data[..len * h.elem as usize], len))
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
        let (me, p) = (ctx.pid(), ctx.nprocs());
        let h = self.header::<T>(Op::Broadcast, Some(root), buf.len());
        let to = (0..p).filter(|&q| me == root && q != me);
        self.post(ctx, &h, buf, to)?;
        if me != root {
            let mb = ctx.local(&self.mailbox)?;
            let (data, _) = self.slot(ctx, mb, &h, root, false)?;
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
        self.post(ctx, &h, buf, std::iter::once(root).filter(|&r| r != me))?;
        if me == root {
            self.fold(ctx, &h, buf, 0..ctx.nprocs(), &op)?;
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
        let (me, p) = (ctx.pid(), ctx.nprocs());
        let h = self.header::<T>(Op::AllReduce, None, buf.len());
        self.post(ctx, &h, buf, (0..p).filter(|&q| q != me))?;
        self.fold(ctx, &h, buf, 0..p, &op)
    }

    /// All-reduce of one value; one superstep.
    pub fn allreduce_value<T: Pod, F: Fn(T, T) -> T>(
        &mut self,
        ctx: &mut Ctx,
        x: T,
        op: F,
    ) -> Result<T> {
        let mut b = [x];
        self.allreduce(ctx, &mut b, op)?;
        Ok(b[0])
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
        let (me, p) = (ctx.pid(), ctx.nprocs());
        let h = self.header::<T>(Op::ScanInclusive, None, buf.len());
        self.post(ctx, &h, buf, me + 1..p)?;
        self.fold(ctx, &h, buf, 0..me + 1, &op)
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
        let (me, p) = (ctx.pid(), ctx.nprocs());
        let h = self.header::<T>(Op::ScanExclusive, None, buf.len());
        self.post(ctx, &h, buf, me + 1..p)?;
        if me == 0 {
            buf.fill(identity);
            return Ok(());
        }
        self.fold(ctx, &h, buf, 0..me, &op)
    }

    /// [`Collectives::allgather`]; one superstep when every piece fits a slot. The decision is
    /// made from `max_len`, an upper bound of every process's length that all processes agree
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
        self.post(ctx, &h, local, (0..p).filter(|&q| q != me))?;
        let mb = ctx.local(&self.mailbox)?;
        let mut pieces = Vec::with_capacity(p);
        for q in 0..p {
            pieces.push(if q == me {
                super::Source::Local(local)
            } else {
                super::Source::Bytes(self.slot(ctx, mb, &h, q, true)?.0)
            });
        }
        Ok(Parts::concat(&pieces))
    }

    /// Fold the slots of `from` (own data from `buf`) in pid order into `buf`, element by
    /// element (at most a slot's worth), so no accumulator is needed.
    fn fold<T: Pod, F: Fn(T, T) -> T>(
        &self,
        ctx: &Ctx,
        h: &SlotHeader,
        buf: &mut [T],
        from: std::ops::Range<usize>,
        op: &F,
    ) -> Result<()> {
        let me = ctx.pid();
        let mb = ctx.local(&self.mailbox)?;
        // Check every slot first; then read them without further checks.
        for q in from.clone().filter(|&q| q != me) {
            self.slot(ctx, mb, h, q, false)?;
        }
        let Some(first) = from.clone().next() else {
            return Ok(());
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
        Ok(())
    }
}
