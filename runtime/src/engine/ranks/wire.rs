//! What travels between ranks, as words: streams (an outbox, get requests, large-put
//! records), errors, registration requests; and MPI's C-int counts.

use crate::arena::Arena;
use crate::error::{Error, ErrorKind};
use crate::outbox::Outbox;
use crate::registry::{ElemType, RegSig, RegTable, SlotState};
use crate::requests::Coll;
use mpi::collective::CommunicatorCollectives;
use mpi::datatype::PartitionMut;
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::{Communicator, SimpleCommunicator};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The parts of a stream from another rank: (encoded outbox, get requests as `[address,
/// length]` word pairs, large-put records as `[address, length, offset in the sender's shared
/// segment or AS_MESSAGE]` triples).
pub(super) fn split_stream(w: &[u64]) -> (&[u64], &[u64], &[u64]) {
    let used = Outbox::decode(w).4;
    let n = w[used] as usize;
    let gets = &w[used + 1..used + 1 + 2 * n];
    let at = used + 1 + 2 * n;
    let nb = w[at] as usize;
    (&w[..used], gets, &w[at + 1..at + 1 + 3 * nb])
}

/// Largest piece of one MPI call (counts are C ints).
pub(super) const PIECE: usize = 1 << 30;

/// The largest count of one MPI call (a C int), unless a test lowered it
/// ([`set_count_limit`]).
static COUNT_LIMIT: AtomicUsize = AtomicUsize::new(i32::MAX as usize);

/// The largest count one MPI call carries (words, bytes or requests: C ints, so 2^31 - 1).
/// Exchanges larger than that travel in pieces, point to point; a lazy stream cannot (module
/// documentation of `lazy`), and one larger is an error naming this limit.
pub(super) fn count_limit() -> usize {
    COUNT_LIMIT.load(Ordering::Relaxed)
}

/// Lower the largest count of one MPI call to `n` (at least 1), for tests of the exchanges
/// that do not fit one call, at sizes a test can afford; `None` restores MPI's own limit.
/// Every rank must set the same limit, between runs.
pub fn set_count_limit(n: Option<usize>) {
    let n = n.map_or(i32::MAX as usize, |n| n.clamp(1, i32::MAX as usize));
    COUNT_LIMIT.store(n, Ordering::Relaxed);
}

/// The largest piece of one point-to-point transfer of bytes.
pub(super) fn piece() -> usize {
    PIECE.min(count_limit())
}

/// `n` as an MPI count.
///
/// # Panics
/// If `n` exceeds [`count_limit`]: every caller checks first, or splits into pieces.
pub(super) fn count(n: usize) -> i32 {
    assert!(
        n <= count_limit(),
        "an MPI count of {n}, above the limit of {} checked by every caller",
        count_limit()
    );
    n as i32
}

/// The displacements of consecutive parts of `counts` (and their total, last).
pub(super) fn offsets(counts: &[usize]) -> Vec<usize> {
    let mut d = Vec::with_capacity(counts.len() + 1);
    let mut acc = 0usize;
    d.push(0);
    for &c in counts {
        acc += c;
        d.push(acc);
    }
    d
}

/// Whether parts of `counts` (to or from each rank) go in one collective call: each count and
/// their total are MPI counts.
pub(super) fn one_call(counts: &[usize]) -> bool {
    let limit = count_limit();
    counts
        .iter()
        .try_fold(0usize, |t, &c| t.checked_add(c))
        .is_some_and(|t| t <= limit)
}

/// A `&'static str` equal to `s`: the element type names of registrations that arrive from
/// other ranks. They are the names of the peer's registered types (`std::any::type_name`), a
/// set fixed by the program, so the table stays as small as that set; a registration's type
/// is `Copy` and compared on every registration sync, which an owned name would not be.
pub(super) fn intern(s: &str) -> &'static str {
    static NAMES: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.iter().find(|n| **n == s) {
        return n;
    }
    let n: &'static str = Box::leak(s.to_string().into_boxed_str());
    names.push(n);
    n
}

pub(super) fn put_str(w: &mut Vec<u64>, s: &str) {
    w.push(s.len() as u64);
    for chunk in s.as_bytes().chunks(8) {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        w.push(u64::from_le_bytes(b));
    }
}

pub(super) fn take_str(w: &[u64], at: &mut usize) -> String {
    let n = w[*at] as usize;
    *at += 1;
    let words = n.div_ceil(8);
    let bytes: Vec<u8> = w[*at..*at + words]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .take(n)
        .collect();
    *at += words;
    String::from_utf8_lossy(&bytes).into_owned()
}

pub(super) const KINDS: [ErrorKind; 5] = [
    ErrorKind::Misuse,
    ErrorKind::Abort,
    ErrorKind::Panic,
    ErrorKind::Aborted,
    ErrorKind::System,
];

/// An error for another rank: kind, op, path, superstep, message.
pub(super) fn encode_error(e: &Error, w: &mut Vec<u64>) {
    w.push(KINDS.iter().position(|k| *k == e.kind()).unwrap_or(0) as u64);
    put_str(w, e.op());
    w.push(e.path().len() as u64);
    w.extend(e.path().iter().map(|&p| p as u64));
    w.push(e.superstep().map_or(u64::MAX, |s| s));
    put_str(w, e.message());
}

pub(super) fn decode_error(w: &[u64]) -> Error {
    let mut at = 0;
    let kind = KINDS[(w[0] as usize).min(KINDS.len() - 1)];
    at += 1;
    let op = take_str(w, &mut at);
    let n = w[at] as usize;
    at += 1;
    let path = w[at..at + n].iter().map(|&p| p as usize).collect();
    at += n;
    let step = (w[at] != u64::MAX).then_some(w[at]);
    at += 1;
    let message = take_str(w, &mut at);
    Error::new(kind, op, path, step, message)
}

/// A rank's registration and tag-size requests, and the areas of its pushes.
pub(super) fn encode_coll(c: &Coll, areas: &[(u64, u64)], w: &mut Vec<u64>) {
    w.push(c.tagsize.map_or(0, |t| t as u64 + 1));
    w.push(c.regs.len() as u64);
    for r in &c.regs {
        w.push(r.push as u64);
        w.push(r.slot as u64);
        put_str(w, r.ty.name);
    }
    w.push(c.wild.len() as u64);
    for cands in &c.wild {
        w.push(cands.len() as u64);
        w.extend(cands.iter().map(|&s| s as u64));
    }
    for &(ptr, len) in areas {
        w.push(ptr);
        w.push(len);
    }
}

pub(super) fn decode_coll(w: &[u64], stamp: u64) -> (Coll, Vec<(u64, u64)>) {
    let mut at = 2;
    let tagsize = (w[0] > 0).then(|| (w[0] - 1) as usize);
    let mut regs = Vec::new();
    for _ in 0..w[1] {
        let push = w[at] != 0;
        let slot = w[at + 1] as u32;
        at += 2;
        let name = intern(&take_str(w, &mut at));
        regs.push(RegSig {
            push,
            slot,
            ty: ElemType { id: None, name },
        });
    }
    let nw = w[at] as usize;
    at += 1;
    let mut wild = Vec::new();
    for _ in 0..nw {
        let n = w[at] as usize;
        wild.push(w[at + 1..at + 1 + n].iter().map(|&s| s as u32).collect());
        at += 1 + n;
    }
    let areas = w[at..].chunks_exact(2).map(|a| (a[0], a[1])).collect();
    (
        Coll {
            stamp,
            regs,
            wild,
            tagsize,
        },
        areas,
    )
}

impl Outbox {
    /// Append this outbox to `out`, for a receiver on another rank: six words
    /// (words of inline put records, of put records, of messages; message count, payload
    /// bytes and put count), then the three areas. Every part stays 8-byte aligned.
    pub(super) fn encode(&self, out: &mut Vec<u64>) {
        // Owned messages to another rank are copied into the records (`owned.rs`): a handle
        // means nothing in another address space.
        debug_assert!(
            self.owned.is_empty(),
            "a handle in an outbox for another rank"
        );
        let inline = &self.inline[..self.inline_len / 8];
        let (puts, msgs) = (self.puts.words(), self.msgs.words());
        out.extend_from_slice(&[
            inline.len() as u64,
            puts.len() as u64,
            msgs.len() as u64,
            self.msg_count as u64,
            self.msg_bytes as u64,
            self.put_count as u64,
        ]);
        out.extend_from_slice(inline);
        out.extend_from_slice(puts);
        out.extend_from_slice(msgs);
    }

    /// Split an [`encode`](Self::encode)d outbox: (put records, message records, message
    /// count, message payload bytes, words used).
    pub(super) fn decode(w: &[u64]) -> (&[u64], &[u64], usize, usize, usize) {
        let (a, b, c) = (w[0] as usize, w[1] as usize, w[2] as usize);
        let puts = &w[6..6 + a + b];
        let msgs = &w[6 + a + b..6 + a + b + c];
        (puts, msgs, w[3] as usize, w[4] as usize, 6 + a + b + c)
    }

    /// The records (puts and messages) of an [`encode`](Self::encode)d outbox.
    pub(super) fn encoded_records(w: &[u64]) -> u64 {
        w[3] + w[5]
    }

    /// Make this outbox hold exactly the given encoded messages and no puts (the mirror, on
    /// this rank, of what a sender on another rank sent here), stamped `stamp`.
    pub(super) fn set_messages(&mut self, stamp: u64, msgs: &[u64], count: usize, bytes: usize) {
        self.clear();
        self.msgs.extend_words(msgs);
        self.msg_count = count;
        self.msg_bytes = bytes;
        self.stamp = stamp;
    }
}

impl Arena {
    /// The words in use.
    pub(super) fn words(&self) -> &[u64] {
        &self.words[..self.len / 8]
    }

    /// Append whole words.
    pub(super) fn extend_words(&mut self, w: &[u64]) {
        let off = self.reserve(w.len() * 8) / 8;
        self.words[off..off + w.len()].copy_from_slice(w);
    }
}

impl RegTable {
    /// Call `f` with the address and length of every registered, non-empty area.
    pub(super) fn active_areas(&self, mut f: impl FnMut(*mut u8, usize)) {
        for &s in &self.order {
            let e = &self.entries[s as usize];
            if e.state == SlotState::Active && e.len > 0 {
                f(e.ptr, e.len);
            }
        }
    }
}

/// All-gather of variable-length word vectors over `comm`: each rank's part. Every rank
/// learns every part's length first, so all choose alike between one collective call and
/// pieces sent point to point (when the parts do not fit one call's counts).
pub(super) fn all_gather_words(comm: &SimpleCommunicator, mine: &[u64]) -> Vec<Vec<u64>> {
    let p = comm.size() as usize;
    let n = mine.len() as u64;
    let mut lens = vec![0u64; p];
    comm.all_gather_into(&n, &mut lens[..]);
    let lens: Vec<usize> = lens.iter().map(|&l| l as usize).collect();
    let displ = offsets(&lens);
    let mut all = vec![0u64; displ[p]];
    if one_call(&lens) {
        let counts: Vec<i32> = lens.iter().map(|&l| count(l)).collect();
        let at: Vec<i32> = displ[..p].iter().map(|&d| count(d)).collect();
        let mut r = PartitionMut::new(&mut all[..], &counts[..], &at[..]);
        comm.all_gather_varcount_into(mine, &mut r);
    } else {
        let me = comm.rank() as usize;
        all[displ[me]..displ[me + 1]].copy_from_slice(mine);
        let base = all.as_mut_ptr() as u64;
        let recvs: Vec<(usize, u64, u64)> = (0..p)
            .filter(|&k| k != me)
            .map(|k| (k, base + 8 * displ[k] as u64, 8 * lens[k] as u64))
            .collect();
        let sends: Vec<(usize, u64, u64)> = (0..p)
            .filter(|&k| k != me)
            .map(|k| (k, mine.as_ptr() as u64, 8 * mine.len() as u64))
            .collect();
        // SAFETY: each receive area is this rank's part of `all` for rank k, written only by
        // that receive; the send area is `mine`, unchanged until the transfers complete.
        unsafe { transfer(comm, &recvs, &sends, GATHER_TAG) };
    }
    (0..p)
        .map(|k| all[displ[k]..displ[k + 1]].to_vec())
        .collect()
}

/// MPI tag of the pieces of an all-gather too large for one call.
const GATHER_TAG: i32 = 0x6d64;

/// Point-to-point transfers: `(rank, address, length)` to receive and to send, matched in
/// order between each pair of ranks, in pieces of at most [`piece`] bytes; returns when all
/// are complete.
///
/// # Safety
/// Receive areas valid for writing and not otherwise accessed until the return; send areas
/// valid for reading and unchanged until the return.
pub(super) unsafe fn transfer(
    comm: &SimpleCommunicator,
    recvs: &[(usize, u64, u64)],
    sends: &[(usize, u64, u64)],
    tag: i32,
) {
    let mut reqs: Vec<ffi::MPI_Request> = Vec::new();
    let comm = comm.as_raw();
    for (list, recv) in [(recvs, true), (sends, false)] {
        for &(k, addr, len) in list {
            let mut done = 0;
            while done < len {
                let n = count((len - done).min(piece() as u64) as usize);
                // SAFETY: a plain handle, written by the call.
                let mut req: ffi::MPI_Request = unsafe { std::mem::zeroed() };
                let at = addr + done;
                // SAFETY: the caller's promises on the areas.
                unsafe {
                    if recv {
                        ffi::MPI_Irecv(
                            at as *mut _,
                            n,
                            ffi::RSMPI_UINT8_T,
                            k as i32,
                            tag,
                            comm,
                            &mut req,
                        );
                    } else {
                        ffi::MPI_Isend(
                            at as *const _,
                            n,
                            ffi::RSMPI_UINT8_T,
                            k as i32,
                            tag,
                            comm,
                            &mut req,
                        );
                    }
                }
                reqs.push(req);
                done += n as u64;
            }
        }
    }
    // SAFETY: the requests were just posted; their buffers live until they complete.
    unsafe {
        ffi::MPI_Waitall(
            reqs.len() as i32,
            reqs.as_mut_ptr(),
            ffi::RSMPI_STATUSES_IGNORE,
        )
    };
}
