//! The messages of the collectives: a header naming the call, then the data.
//!
//! Every message a collective sends starts with a [`Header`] describing the sender's call
//! (which operation, root, element type and size, length). Receivers compare it with their own
//! call, so processes that disagree (different operations, roots, lengths or element types) get
//! an error naming both sides instead of wrong data. Messages are sent with a zero tag of whatever tag
//! size is in force, so the caller's tag size is neither needed nor changed.

use super::elem;
use bytemuck::{Pod, Zeroable};
use mbsp::{Ctx, Error, Result};
use smallvec::SmallVec;
use std::borrow::Cow;

/// Marks messages sent by a collective.
const MAGIC: u16 = 0xC011;

/// No root (all-reduce, scan, all-gather, all-to-all).
pub const NO_ROOT: u32 = u32::MAX;
/// Lengths that may differ between processes (gather, scatter, all-to-all-v).
pub const ANY_LEN: u64 = u64::MAX;

/// The collective operations (for [`Collectives::plan`](super::Collectives::plan) and errors).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum Op {
    /// [`broadcast`](super::broadcast)
    Broadcast = 1,
    /// [`reduce`](super::reduce)
    Reduce,
    /// [`allreduce`](super::allreduce)
    AllReduce,
    /// [`scan_inclusive`](super::scan_inclusive)
    ScanInclusive,
    /// [`scan_exclusive`](super::scan_exclusive)
    ScanExclusive,
    /// [`gather`](super::gather)
    Gather,
    /// [`scatter`](super::scatter) and [`scatterv`](super::scatterv)
    Scatter,
    /// [`allgather`](super::allgather)
    AllGather,
    /// [`alltoall`](super::alltoall)
    AllToAll,
    /// [`alltoallv`](super::alltoallv)
    AllToAllV,
}

impl Op {
    /// The operation's name, as errors give it.
    pub fn name(self) -> &'static str {
        match self {
            Op::Broadcast => "broadcast",
            Op::Reduce => "reduce",
            Op::AllReduce => "allreduce",
            Op::ScanInclusive => "scan_inclusive",
            Op::ScanExclusive => "scan_exclusive",
            Op::Gather => "gather",
            Op::Scatter => "scatter",
            Op::AllGather => "allgather",
            Op::AllToAll => "alltoall",
            Op::AllToAllV => "alltoallv",
        }
    }

    pub(crate) fn from_code(c: u16) -> Option<Op> {
        use Op::*;
        [
            Broadcast,
            Reduce,
            AllReduce,
            ScanInclusive,
            ScanExclusive,
            Gather,
            Scatter,
            AllGather,
            AllToAll,
            AllToAllV,
        ]
        .into_iter()
        .find(|o| *o as u16 == c)
    }
}

/// The first bytes of every message of a collective: three words, so that a header with one or
/// two words of data (a reduction or broadcast of one or two words) fits the first cache line
/// of what a barrier line carries to its reader on the thread engine (up to 27 words of data
/// ride in all), and such a superstep costs about a put's. The sender is the message's own
/// [`from`](mbsp::Message::from); the number of elements that follow is the body's length over
/// `elem`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct Header {
    magic: u16,
    op: u8,
    /// Which algorithm the sender chose (0 = messages, 1.. = registered variants).
    pub algo: u8,
    pub root: u32,
    pub elem: u32,
    /// The element type's fingerprint folded to 32 bits (see `elem.rs`).
    pub ty: u32,
    /// The sender's length in elements ([`ANY_LEN`] when lengths may differ).
    pub len: u64,
}

pub const HEADER: usize = std::mem::size_of::<Header>();
const _: () = assert!(
    HEADER == 24,
    "a header and two words of data ride in a barrier's first cache line, and the data after \
     a header stays 8-byte aligned"
);

/// One process's call of a collective, as the headers describe it.
#[derive(Clone, Copy, Debug)]
pub struct Call {
    pub op: Op,
    pub root: u32,
    pub elem: u32,
    /// The element type's fingerprint.
    pub ty: u64,
    pub len: u64,
    pub algo: u8,
}

impl Call {
    pub fn new<T: 'static>(op: Op, root: Option<usize>, len: Option<usize>) -> Call {
        Call {
            op,
            root: root.map_or(NO_ROOT, |r| r as u32),
            elem: std::mem::size_of::<T>() as u32,
            ty: elem::fingerprint::<T>(),
            len: len.map_or(ANY_LEN, |n| n as u64),
            algo: 0,
        }
    }

    pub fn header(&self) -> Header {
        Header {
            magic: MAGIC,
            op: self.op as u8,
            algo: self.algo,
            root: self.root,
            elem: self.elem,
            ty: elem::fold(self.ty),
            len: self.len,
        }
    }

    fn describe(op: Option<Op>, root: u32, len: u64, ty: &str) -> String {
        let mut s = op.map_or("an unknown collective", Op::name).to_string();
        if root != NO_ROOT {
            s += &format!(" with root {root}");
        }
        if len != ANY_LEN {
            s += &format!(" on {len} elements");
        }
        s + &format!(" of {ty}")
    }

    /// An error unless `h` (received from pid `from`) describes the same call.
    pub fn check(&self, ctx: &Ctx, from: usize, h: &Header) -> Result<()> {
        if h.magic != MAGIC {
            return Err(foreign_message(ctx, self, ""));
        }
        let same = h.op == self.op as u8
            && h.root == self.root
            && h.elem == self.elem
            && h.ty == elem::fold(self.ty)
            && h.len == self.len
            && h.algo == self.algo;
        if same {
            return Ok(());
        }
        let theirs = elem::describe_folded(h.ty, h.elem);
        let mine = elem::describe(self.ty, self.elem);
        Err(ctx.misuse_error(
            self.op.name(),
            format!(
                "processes disagree: pid {from} called {}, pid {} called {}",
                Call::describe(Op::from_code(h.op.into()), h.root, h.len, &theirs),
                ctx.pid(),
                Call::describe(Some(self.op), self.root, self.len, &mine),
            ),
        ))
    }

    /// Send `data` to `pid` behind this call's header (one copy: into the outbox, or into the
    /// barrier line when header and data are small enough to ride); `tag` is a zero tag of the
    /// current size.
    pub fn send<T: Pod>(&self, ctx: &Ctx, pid: usize, data: &[T], tag: &[u8]) -> Result<()> {
        let h = self.header();
        ctx.send_parts(
            pid,
            tag,
            &[bytemuck::bytes_of(&h), bytemuck::cast_slice(data)],
        )
    }

    /// Send every other process a message of this call: `data(q)` behind the header where
    /// there is some for `q`, the header alone where not. So every process learns every other
    /// process's call in the superstep, and a mismatch is reported with both calls by whichever
    /// process notices it. The messages carry a zero tag of the current size.
    pub fn send_all<'d, T: Pod>(
        &self,
        ctx: &Ctx,
        data: impl Fn(usize) -> Option<&'d [T]>,
    ) -> Result<()> {
        let (me, p) = (ctx.pid(), ctx.nprocs());
        let tag = zero_tag(ctx);
        for q in (0..p).filter(|&q| q != me) {
            self.send(ctx, q, data(q).unwrap_or(&[]), &tag)?;
        }
        Ok(())
    }

    /// Error for a process that expected a message from `from` and got none: `from` called no
    /// collective in this superstep, or one whose messages go elsewhere (a tree, where each
    /// process hears from one other per superstep).
    pub fn missing(&self, ctx: &Ctx, from: usize) -> Error {
        let me = ctx.pid();
        ctx.misuse_error(
            self.op.name(),
            format!(
                "processes disagree: pid {from} sent pid {me} no message in this superstep, so \
                 it called no collective here (it synced, or called something else) or one that \
                 exchanges along a tree (another algorithm, or another root); pid {me} called {}",
                Call::describe(
                    Some(self.op),
                    self.root,
                    self.len,
                    &elem::describe(self.ty, self.elem)
                )
            ),
        )
    }
}

/// A zero tag of the tag size in force: borrowed for the tag sizes programs use, so that a
/// collective called while the caller's tag size is set allocates nothing for it.
pub fn zero_tag(ctx: &Ctx) -> Cow<'static, [u8]> {
    static ZEROS: [u8; 64] = [0; 64];
    match ZEROS.get(..ctx.tagsize()) {
        Some(zeros) => Cow::Borrowed(zeros),
        None => Cow::Owned(vec![0; ctx.tagsize()]),
    }
}

/// The messages this process received in a collective's superstep, checked against `call` and
/// indexed by sender: `data[q]` is the data bytes pid `q` sent (at most one message per
/// sender). Borrows the queue until the next sync.
pub struct Inbox<'a> {
    /// Inline up to this many processes: a small collective allocates nothing.
    pub data: SmallVec<[Option<&'a [u8]>; 8]>,
}

impl<'a> Inbox<'a> {
    /// Move every message out of the queue, checking each against `call`.
    #[inline]
    pub fn take(ctx: &'a Ctx, call: &Call) -> Result<Inbox<'a>> {
        let mut data: SmallVec<[Option<&'a [u8]>; 8]> = SmallVec::from_elem(None, ctx.nprocs());
        while let Some(m) = ctx.hpmove()? {
            if m.payload.len() < HEADER {
                return Err(call_error_short(ctx, call, m.payload.len()));
            }
            let h: Header = bytemuck::pod_read_unaligned(&m.payload[..HEADER]);
            let from = m.from;
            call.check(ctx, from, &h)?;
            let body = &m.payload[HEADER..];
            if data[from].is_some() {
                return Err(ctx.misuse_error(
                    call.op.name(),
                    format!("a second message from pid {from} in one superstep"),
                ));
            }
            // Zero-sized elements come with no bytes.
            let whole = body
                .len()
                .checked_rem(call.elem as usize)
                .unwrap_or(body.len())
                == 0;
            if !whole {
                return Err(ctx.misuse_error(
                    call.op.name(),
                    format!(
                        "message from pid {from} holds {} bytes of data, not a whole number of \
                         {}-byte elements",
                        body.len(),
                        call.elem
                    ),
                ));
            }
            data[from] = Some(body);
        }
        Ok(Inbox { data })
    }

    /// [`take`](Self::take), then an error unless every other process sent a message (as
    /// [`Call::send_all`] sends them): a process that made no matching call is named after
    /// every header has been checked, so that a process that made another call is reported
    /// with both calls.
    #[inline]
    pub fn take_all(ctx: &'a Ctx, call: &Call) -> Result<Inbox<'a>> {
        let inbox = Inbox::take(ctx, call)?;
        let me = ctx.pid();
        match (0..inbox.data.len()).find(|&q| q != me && inbox.data[q].is_none()) {
            Some(q) => Err(call.missing(ctx, q)),
            None => Ok(inbox),
        }
    }

    /// The data from `from`, or an error if it sent nothing.
    pub fn from(&self, ctx: &Ctx, call: &Call, from: usize) -> Result<&'a [u8]> {
        self.data[from].ok_or_else(|| call.missing(ctx, from))
    }

    /// An error if any process other than those `allowed` sent something.
    pub fn only_from(&self, ctx: &Ctx, call: &Call, allowed: impl Fn(usize) -> bool) -> Result<()> {
        match (0..self.data.len()).find(|&q| self.data[q].is_some() && !allowed(q)) {
            None => Ok(()),
            Some(q) => Err(ctx.misuse_error(
                call.op.name(),
                format!(
                    "pid {} received data from pid {q}, which should not send here (processes \
                     disagree on the root)",
                    ctx.pid()
                ),
            )),
        }
    }
}

fn call_error_short(ctx: &Ctx, call: &Call, len: usize) -> Error {
    foreign_message(ctx, call, &format!(" ({len} bytes)"))
}

/// The error for a message in a collective's superstep that the collective did not send.
fn foreign_message(ctx: &Ctx, call: &Call, what: &str) -> Error {
    ctx.misuse_error(
        call.op.name(),
        format!(
            "a message not sent by this collective{what} arrived in its superstep (messages sent \
             before calling a collective are delivered by its sync: send them after it, or sync \
             first)"
        ),
    )
}

/// Copy message bytes into typed elements (the bytes may not be aligned for `T`).
pub fn copy_into<T: Pod>(dst: &mut [T], bytes: &[u8]) {
    bytemuck::cast_slice_mut::<T, u8>(dst).copy_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process sends `body` behind a header of an all-reduce on one `u64`; the other takes
    /// its inbox for the same call.
    fn take_after(body: &'static [u8]) -> Result<Vec<Option<Vec<u8>>>> {
        let got = mbsp::run(2, move |ctx| {
            let call = Call::new::<u64>(Op::AllReduce, None, Some(1));
            if ctx.pid() == 0 {
                let h = call.header();
                ctx.send_parts(1, &[], &[bytemuck::bytes_of(&h), body])?;
            }
            ctx.sync()?;
            if ctx.pid() == 0 {
                return Ok(vec![]);
            }
            let inbox = Inbox::take(ctx, &call)?;
            Ok(inbox.data.iter().map(|d| d.map(<[u8]>::to_vec)).collect())
        })?;
        Ok(got[1].clone())
    }

    #[test]
    fn the_body_is_what_follows_the_header() {
        let got = take_after(&[7, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!(
            got[0].as_deref(),
            Some(&[7, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0][..])
        );
        assert_eq!(got[1], None);
        assert_eq!(take_after(&[]).unwrap()[0].as_deref(), Some(&[][..]));
    }

    #[test]
    fn zero_tags_of_every_size() {
        mbsp::run(2, |ctx| {
            for size in [0, 1, 12, 64, 65, 1000] {
                ctx.set_tagsize(size)?;
                ctx.sync()?;
                let tag = zero_tag(ctx);
                assert_eq!(tag.len(), size);
                assert!(tag.iter().all(|&b| b == 0));
                // The collective's messages go under it, and the caller's size stays.
                let sum = crate::collectives::allreduce_value(ctx, 1u32, |a, b| a + b)?;
                assert_eq!((sum, ctx.tagsize()), (2, size));
            }
            Ok(())
        })
        .unwrap();
    }

    #[test]
    fn a_body_of_part_of_an_element_is_refused() {
        let e = take_after(&[1, 2, 3]).unwrap_err().to_string();
        assert!(
            e.contains("allreduce")
                && e.contains(
                    "message from pid 0 holds 3 bytes of data, not a whole number of \
                               8-byte elements"
                ),
            "{e}"
        );
    }
}
