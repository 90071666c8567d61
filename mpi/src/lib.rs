//! The BSP engine over MPI ranks: one BSP process per rank of `MPI_COMM_WORLD`, with BSPlib's
//! registration, buffered `put`/`get`, bulk synchronous message passing, `time` and abort, on
//! an existing MPI (MPICH from Debian's packages, through the rsmpi crate).
//!
//! This is the engine core of the MPI top level (issue 13): a standalone context, [`MpiCtx`],
//! with the thread runtime's names and semantics ([`mbsp::Ctx`], DESIGN.md §3). Putting it
//! behind [`mbsp::Ctx`] itself, so one program runs over threads or ranks, and the
//! high-performance variants as MPI-3 one-sided operations, come next.
//!
//! ```text
//! mpiexec -n 2 target/release/mbsp-mpi-selftest
//! ```
//!
//! ## One superstep's sync
//!
//! Registrations are checked and their sizes exchanged when they take effect (an all-gather
//! of each rank's size), so every rank knows every rank's registered sizes and `put`/`get` are
//! bounds-checked where they are called, as in the thread runtime. A `put` copies its source
//! into the outgoing stream of its destination at once; a `get` queues a request. `sync` is:
//!
//! 1. all-to-all of one header per pair: the sender's state (syncing, ended, failed), the bytes
//!    it sends to that rank, and whether it sends anything at all or asked for gets;
//! 2. if any rank ended or failed: everybody stops (the failing rank's message travels in
//!    step 3, so every rank reports the same cause); if nobody sends anything: done;
//! 3. all-to-all-v of the record streams (puts, get requests, messages);
//! 4. if any rank asked for gets: each rank reads the requested data from its memory *before*
//!    applying any put (DESIGN.md §3: a get never sees a put of the same superstep), then an
//!    all-to-all of reply sizes and an all-to-all-v of the replies;
//! 5. puts are applied in order of source rank and issue, get replies written to their local
//!    destinations, messages queued, pending registrations and tag size take effect.
//!
//! An empty superstep costs one all-to-all of 24 bytes per pair.

use mpi::collective::CommunicatorCollectives;
use mpi::datatype::{Partition, PartitionMut};
use mpi::topology::{Communicator, SimpleCommunicator};
use std::marker::PhantomData;
use std::time::Instant;

pub mod bench;
mod records;

pub use mbsp::{ErrorKind, QueueSize};
use records::{Reader, Record};

/// What went wrong, where: the operation, the rank, the superstep and the values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The kind of failure (the thread runtime's kinds).
    pub kind: ErrorKind,
    /// The primitive that failed (`"put"`, `"sync"`, ...).
    pub op: &'static str,
    /// The rank it failed on.
    pub pid: usize,
    /// The superstep it failed in.
    pub superstep: u64,
    /// What happened, with the values.
    pub message: String,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?} in {} on rank {}, superstep {}: {}",
            self.kind, self.op, self.pid, self.superstep, self.message
        )
    }
}

impl std::error::Error for Error {}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// A registered area of `T` on every rank (sizes may differ per rank), made by
/// [`MpiCtx::push_reg`]; usable from the sync after the push until the sync after its pop.
#[derive(Debug)]
pub struct Reg<T> {
    id: usize,
    _t: PhantomData<T>,
}

const SYNCING: u64 = 0;
const ENDED: u64 = 1;
const FAILED: u64 = 2;

/// One area: its bytes here, every rank's size, and whether it is usable yet.
struct Area {
    mem: Vec<u64>,
    bytes: usize,
    sizes: Vec<usize>,
    live: bool,
}

/// A get waiting for its reply: where the data goes here.
struct PendingGet {
    reg: usize,
    offset: usize,
    len: usize,
}

/// This rank's BSP process: what `f` of [`run`] gets.
pub struct MpiCtx {
    world: SimpleCommunicator,
    pid: usize,
    p: usize,
    start: Instant,
    step: u64,
    areas: Vec<Option<Area>>,
    pushed: Vec<usize>,
    popped: Vec<usize>,
    out: Vec<Vec<u8>>,
    gets: Vec<Vec<PendingGet>>,
    tagsize: usize,
    new_tagsize: Option<usize>,
    queue: Vec<(Vec<u8>, Vec<u8>)>,
    next_message: usize,
    /// Set once every rank knows the run is over (a failure or a mismatched end was seen in
    /// an exchange): no further exchange may start, the others have left.
    over: bool,
    /// The exchange's buffers, kept from sync to sync: fresh megabytes every sync cost more in
    /// page faults than the copies themselves (measured: 1 MiB puts at 16% of MPI_Put's
    /// bandwidth with fresh buffers).
    bufs: Buffers,
}

#[derive(Default)]
struct Buffers {
    send: Vec<u8>,
    recv: Vec<u8>,
    replies: Vec<Vec<u8>>,
    reply_send: Vec<u8>,
    reply_recv: Vec<u8>,
}

/// Runs `f` as this rank's BSP process over every rank of `MPI_COMM_WORLD` (start the
/// program with `mpiexec -n P`; started plainly it is one process). MPI is initialised here
/// and finalised when `run` returns, so call it once per program.
///
/// Every rank returns the same verdict: `Ok` with its own value when all ranks' `f` returned
/// `Ok`, or the first failure (its error, with the failing rank's message) on every rank. A
/// panic in `f` counts as a failure.
///
/// ```
/// // Started plainly, the program is one rank; under `mpiexec -n P`, P ranks.
/// let r = mbsp_mpi::run(|ctx| {
///     let reg = ctx.push_reg(vec![0u64; 1])?;
///     ctx.sync()?; // the registration takes effect
///     let next = (ctx.pid() + 1) % ctx.nprocs();
///     ctx.put(next, &[7u64], &reg, 0)?;
///     ctx.sync()?; // the put arrives
///     Ok(ctx.local(&reg)?[0])
/// })
/// .unwrap();
/// assert_eq!(r, 7);
/// ```
pub fn run<R>(f: impl FnOnce(&mut MpiCtx) -> Result<R>) -> Result<R> {
    let universe = mpi::initialize().ok_or_else(|| Error {
        kind: ErrorKind::Misuse,
        op: "run",
        pid: 0,
        superstep: 0,
        message: "MPI is already initialised in this program (one mbsp-mpi run per program)".into(),
    })?;
    let mut ctx = MpiCtx::new(universe.world());
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut ctx)));
    let result = match outcome {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            Err(ctx.error(ErrorKind::Panic, "spmd", msg))
        }
    };
    match result {
        Err(e) if ctx.over => Err(e),
        Ok(_) if ctx.over => Err(ctx.error(
            ErrorKind::Misuse,
            "end",
            "the run returned Ok after a sync that reported the run over",
        )),
        // The run's end on this rank: one last exchange, so every rank learns how the others
        // ended.
        Ok(v) => ctx.exchange(ENDED, "").map(|()| v),
        Err(e) => {
            let text = e.to_string();
            // Tell the others; their own verdict is theirs to report, ours is our error.
            let _ = ctx.exchange(FAILED, &text);
            Err(e)
        }
    }
}

impl MpiCtx {
    fn new(world: SimpleCommunicator) -> Self {
        let (pid, p) = (world.rank() as usize, world.size() as usize);
        MpiCtx {
            world,
            pid,
            p,
            start: Instant::now(),
            step: 0,
            areas: Vec::new(),
            pushed: Vec::new(),
            popped: Vec::new(),
            out: vec![Vec::new(); p],
            gets: (0..p).map(|_| Vec::new()).collect(),
            tagsize: 0,
            new_tagsize: None,
            queue: Vec::new(),
            next_message: 0,
            over: false,
            bufs: Buffers {
                replies: vec![Vec::new(); p],
                ..Buffers::default()
            },
        }
    }

    /// This process's number (its rank).
    pub fn pid(&self) -> usize {
        self.pid
    }

    /// The number of processes (ranks).
    pub fn nprocs(&self) -> usize {
        self.p
    }

    /// The current superstep (0 before the first sync).
    pub fn superstep(&self) -> u64 {
        self.step
    }

    /// Seconds since this process's run started.
    pub fn time(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    fn error(&self, kind: ErrorKind, op: &'static str, message: impl Into<String>) -> Error {
        Error {
            kind,
            op,
            pid: self.pid,
            superstep: self.step,
            message: message.into(),
        }
    }

    /// The error value that aborts the run: return it from `f` (every rank then stops at its
    /// next sync with this message).
    pub fn abort(&self, message: impl Into<String>) -> Error {
        self.error(ErrorKind::Abort, "abort", message)
    }

    /// Registers `data` (this rank's size; other ranks may register other sizes); usable by
    /// every rank from the next sync. Every rank must push (and pop) in the same order.
    pub fn push_reg<T: bytemuck::Pod>(&mut self, data: Vec<T>) -> Result<Reg<T>> {
        if align_of::<T>() > 8 {
            return Err(self.error(
                ErrorKind::Misuse,
                "push_reg",
                format!(
                    "element alignment {} above 8 is not supported",
                    align_of::<T>()
                ),
            ));
        }
        let bytes = std::mem::size_of_val(data.as_slice());
        let mut mem = vec![0u64; bytes.div_ceil(8)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut mem)[..bytes]
            .copy_from_slice(bytemuck::cast_slice(&data));
        self.areas.push(Some(Area {
            mem,
            bytes,
            sizes: Vec::new(),
            live: false,
        }));
        let id = self.areas.len() - 1;
        self.pushed.push(id);
        Ok(Reg {
            id,
            _t: PhantomData,
        })
    }

    /// Deregisters `reg` at the next sync (collective, like the push).
    pub fn pop_reg<T>(&mut self, reg: Reg<T>) -> Result<()> {
        self.area("pop_reg", reg.id)?;
        self.popped.push(reg.id);
        Ok(())
    }

    fn area(&self, op: &'static str, id: usize) -> Result<&Area> {
        match self.areas.get(id) {
            Some(Some(a)) if a.live => Ok(a),
            Some(Some(_)) => Err(self.error(
                ErrorKind::Misuse,
                op,
                format!("registration {id} is used before the sync that makes it valid"),
            )),
            _ => Err(self.error(
                ErrorKind::Misuse,
                op,
                format!("registration {id} was popped"),
            )),
        }
    }

    /// This rank's registered data.
    pub fn local<'a, T: bytemuck::Pod>(&'a self, reg: &Reg<T>) -> Result<&'a [T]> {
        let a = self.area_any("local", reg.id)?;
        Ok(bytemuck::cast_slice(
            &bytemuck::cast_slice::<u64, u8>(&a.mem)[..a.bytes],
        ))
    }

    /// This rank's registered data, to change (between syncs).
    pub fn local_mut<'a, T: bytemuck::Pod>(&'a mut self, reg: &Reg<T>) -> Result<&'a mut [T]> {
        self.area_any("local_mut", reg.id)?;
        let a = self.areas[reg.id].as_mut().expect("checked");
        Ok(bytemuck::cast_slice_mut(
            &mut bytemuck::cast_slice_mut::<u64, u8>(&mut a.mem)[..a.bytes],
        ))
    }

    fn area_any(&self, op: &'static str, id: usize) -> Result<&Area> {
        match self.areas.get(id) {
            Some(Some(a)) => Ok(a),
            _ => Err(self.error(
                ErrorKind::Misuse,
                op,
                format!("registration {id} was popped"),
            )),
        }
    }

    fn check_pid(&self, op: &'static str, pid: usize) -> Result<()> {
        if pid < self.p {
            return Ok(());
        }
        Err(self.error(
            ErrorKind::Misuse,
            op,
            format!("pid {pid} is not below nprocs = {}", self.p),
        ))
    }

    /// Buffered put: `src` is copied now and written to `reg` on rank `pid` at element
    /// `offset` at the next sync.
    pub fn put<T: bytemuck::Pod>(
        &mut self,
        pid: usize,
        src: &[T],
        reg: &Reg<T>,
        offset: usize,
    ) -> Result<()> {
        self.check_pid("put", pid)?;
        let (at, len) = (offset * size_of::<T>(), size_of_val(src));
        let size = self.area("put", reg.id)?.sizes[pid];
        if at + len > size {
            return Err(self.error(
                ErrorKind::Misuse,
                "put",
                format!(
                    "{} elements at offset {offset} into registration {} of rank {pid}, which \
                     holds {} elements",
                    src.len(),
                    reg.id,
                    size / size_of::<T>().max(1)
                ),
            ));
        }
        Record::Put {
            reg: reg.id,
            at,
            bytes: bytemuck::cast_slice(src),
        }
        .write(&mut self.out[pid]);
        Ok(())
    }

    /// Buffered get: elements `range` of `src` on rank `pid`, as they stand when that rank
    /// enters the next sync, are written to `dst` here at element `offset` at that sync.
    pub fn get<T: bytemuck::Pod>(
        &mut self,
        pid: usize,
        src: &Reg<T>,
        range: std::ops::Range<usize>,
        dst: &Reg<T>,
        offset: usize,
    ) -> Result<()> {
        self.check_pid("get", pid)?;
        let w = size_of::<T>();
        let size = self.area("get", src.id)?.sizes[pid];
        if range.start > range.end || range.end * w > size {
            return Err(self.error(
                ErrorKind::Misuse,
                "get",
                format!(
                    "elements {range:?} of registration {} on rank {pid}, which holds {}",
                    src.id,
                    size / w.max(1)
                ),
            ));
        }
        let here = self.area("get", dst.id)?.bytes;
        let len = range.len() * w;
        if offset * w + len > here {
            return Err(self.error(
                ErrorKind::Misuse,
                "get",
                format!(
                    "{} elements at offset {offset} into registration {} here, which holds {}",
                    range.len(),
                    dst.id,
                    here / w.max(1)
                ),
            ));
        }
        Record::Get {
            reg: src.id,
            at: range.start * w,
            len,
        }
        .write(&mut self.out[pid]);
        self.gets[pid].push(PendingGet {
            reg: dst.id,
            offset: offset * w,
            len,
        });
        Ok(())
    }

    /// Sets the tag size (bytes) from the next sync; collective. Returns the current one.
    pub fn set_tagsize(&mut self, bytes: usize) -> usize {
        self.new_tagsize = Some(bytes);
        self.tagsize
    }

    /// The tag size in effect.
    pub fn tagsize(&self) -> usize {
        self.tagsize
    }

    /// Sends a message (tag of the current tag size, any payload) to rank `pid`; it is in
    /// that rank's queue after the next sync.
    pub fn send(&mut self, pid: usize, tag: &[u8], payload: &[u8]) -> Result<()> {
        self.check_pid("send", pid)?;
        if tag.len() != self.tagsize {
            return Err(self.error(
                ErrorKind::Misuse,
                "send",
                format!(
                    "a tag of {} bytes; the tag size is {}",
                    tag.len(),
                    self.tagsize
                ),
            ));
        }
        Record::Send { tag, payload }.write(&mut self.out[pid]);
        Ok(())
    }

    /// Messages left in the queue and their payload bytes.
    pub fn qsize(&self) -> QueueSize {
        let rest = &self.queue[self.next_message..];
        QueueSize {
            messages: rest.len(),
            bytes: rest.iter().map(|m| m.1.len()).sum(),
        }
    }

    /// The next message: its tag and payload (`None` when the queue is empty).
    pub fn move_message(&mut self) -> Option<(Vec<u8>, Vec<u8>)> {
        let m = self.queue.get_mut(self.next_message)?;
        self.next_message += 1;
        Some((std::mem::take(&mut m.0), std::mem::take(&mut m.1)))
    }

    /// Ends the superstep (module docs: the protocol).
    pub fn sync(&mut self) -> Result<()> {
        self.exchange(SYNCING, "")
    }

    fn exchange(&mut self, state: u64, message: &str) -> Result<()> {
        let mut bufs = std::mem::take(&mut self.bufs);
        let r = self.exchange_with(state, message, &mut bufs);
        self.bufs = bufs;
        r
    }

    fn exchange_with(&mut self, state: u64, message: &str, bufs: &mut Buffers) -> Result<()> {
        if self.over {
            return Err(self.error(
                ErrorKind::Aborted,
                "sync",
                "the run is over (an earlier sync reported a failure)",
            ));
        }
        let p = self.p;
        if state != SYNCING {
            self.gets.iter_mut().for_each(Vec::clear);
            self.pushed.clear();
            self.popped.clear();
        }
        if state == FAILED {
            for o in &mut self.out {
                o.clear();
                o.extend_from_slice(message.as_bytes());
            }
        } else if state == ENDED {
            self.out.iter_mut().for_each(Vec::clear);
        }
        // (1) Headers.
        let any_get = self.gets.iter().any(|g| !g.is_empty());
        let sends = self.out.iter().any(|o| !o.is_empty());
        let regs = !self.pushed.is_empty() || !self.popped.is_empty();
        let flags = sends as u64 | (any_get as u64) << 1 | (regs as u64) << 2;
        let header: Vec<u64> = self
            .out
            .iter()
            .flat_map(|o| [state, o.len() as u64, flags])
            .collect();
        let mut got = vec![0u64; 3 * p];
        self.world.all_to_all_into(&header[..], &mut got[..]);
        let states: Vec<u64> = got.chunks_exact(3).map(|h| h[0]).collect();
        let anyone_sends = got.chunks_exact(3).any(|h| h[2] & 1 != 0);
        let anyone_gets = got.chunks_exact(3).any(|h| h[2] & 2 != 0);
        let anyone_registers = got.chunks_exact(3).any(|h| h[2] & 4 != 0);
        // (3) Record streams (also the failure messages).
        let rdispl = if anyone_sends {
            let counts: Vec<i32> = got.chunks_exact(3).map(|h| h[1] as i32).collect();
            bufs.send.clear();
            for o in &self.out {
                bufs.send.extend_from_slice(o);
            }
            let send_counts: Vec<i32> = self.out.iter().map(|o| o.len() as i32).collect();
            self.all_to_all_v(&bufs.send, &send_counts, &counts, &mut bufs.recv)
        } else {
            bufs.recv.clear();
            vec![0; p + 1]
        };
        let recv = &bufs.recv;
        // (2) Verdict: every rank sees the same states, so all stop here together.
        self.over = state != SYNCING || states.iter().any(|&s| s != SYNCING);
        if let Some(k) = states.iter().position(|&s| s == FAILED) {
            let text = String::from_utf8_lossy(&recv[rdispl[k]..rdispl[k + 1]]).into_owned();
            return Err(self.error(
                ErrorKind::Aborted,
                "sync",
                format!("rank {k} failed: {text}"),
            ));
        }
        if states.iter().any(|&s| s != state) {
            let (ended, synced): (Vec<usize>, Vec<usize>) =
                (0..p).partition(|&k| states[k] == ENDED);
            return Err(self.error(
                ErrorKind::Misuse,
                if state == ENDED { "end" } else { "sync" },
                format!(
                    "ranks {ended:?} ended their run while ranks {synced:?} called sync (every \
                     rank must call sync the same number of times)"
                ),
            ));
        }
        if state == ENDED {
            return Ok(());
        }
        // (4) Gets: read before any put is applied.
        let replies = &mut bufs.replies;
        replies.iter_mut().for_each(Vec::clear);
        let mut puts: Vec<(usize, usize, std::ops::Range<usize>)> = Vec::new();
        let mut messages = Vec::new();
        for src in 0..p {
            let stream = &recv[rdispl[src]..rdispl[src + 1]];
            for rec in Reader(stream) {
                match rec {
                    Record::Put { reg, at, bytes } => {
                        let start = bytes.as_ptr() as usize - recv.as_ptr() as usize;
                        puts.push((reg, at, start..start + bytes.len()));
                    }
                    Record::Get { reg, at, len } => {
                        let a = self.areas[reg].as_ref().expect("checked by the requester");
                        let mem = bytemuck::cast_slice::<u64, u8>(&a.mem);
                        replies[src].extend_from_slice(&mem[at..at + len]);
                    }
                    Record::Send { tag, payload } => {
                        messages.push((tag.to_vec(), payload.to_vec()))
                    }
                }
            }
        }
        let reply_bytes = if anyone_gets {
            let counts: Vec<u64> = replies.iter().map(|r| r.len() as u64).collect();
            let mut back = vec![0u64; p];
            self.world.all_to_all_into(&counts[..], &mut back[..]);
            bufs.reply_send.clear();
            for r in replies.iter() {
                bufs.reply_send.extend_from_slice(r);
            }
            let send_counts: Vec<i32> = counts.iter().map(|&c| c as i32).collect();
            let recv_counts: Vec<i32> = back.iter().map(|&c| c as i32).collect();
            Some(self.all_to_all_v(
                &bufs.reply_send,
                &send_counts,
                &recv_counts,
                &mut bufs.reply_recv,
            ))
        } else {
            None
        };
        // (5) Apply.
        for (reg, at, range) in puts {
            let a = self.areas[reg].as_mut().expect("checked by the sender");
            bytemuck::cast_slice_mut::<u64, u8>(&mut a.mem)[at..at + range.len()]
                .copy_from_slice(&recv[range]);
        }
        if let Some(displ) = reply_bytes {
            let data = &bufs.reply_recv;
            for (gets, &start) in self.gets.iter_mut().zip(&displ) {
                let mut at = start;
                for g in std::mem::take(gets) {
                    let a = self.areas[g.reg].as_mut().expect("checked at get");
                    bytemuck::cast_slice_mut::<u64, u8>(&mut a.mem)[g.offset..g.offset + g.len]
                        .copy_from_slice(&data[at..at + g.len]);
                    at += g.len;
                }
            }
        }
        self.queue = messages;
        self.next_message = 0;
        self.out.iter_mut().for_each(Vec::clear);
        if anyone_registers {
            self.registrations()?;
        }
        if let Some(t) = self.new_tagsize.take() {
            self.tagsize = t;
        }
        self.step += 1;
        Ok(())
    }

    /// Pending pushes and pops take effect: sizes gathered from every rank, the same number of
    /// pushes checked on every rank.
    fn registrations(&mut self) -> Result<()> {
        let p = self.p;
        let mine = [self.pushed.len() as u64, self.popped.len() as u64];
        let mut all = vec![0u64; 2 * p];
        self.world.all_gather_into(&mine[..], &mut all[..]);
        if all.chunks_exact(2).any(|c| c != mine) {
            let counts: Vec<(u64, u64)> = all.chunks_exact(2).map(|c| (c[0], c[1])).collect();
            return Err(self.error(
                ErrorKind::Misuse,
                "sync",
                format!(
                    "registrations differ between ranks in this superstep: (pushes, pops) per \
                     rank {counts:?}"
                ),
            ));
        }
        let sizes: Vec<u64> = self
            .pushed
            .iter()
            .map(|&id| self.areas[id].as_ref().map_or(0, |a| a.bytes as u64))
            .collect();
        let mut every = vec![0u64; sizes.len() * p];
        self.world.all_gather_into(&sizes[..], &mut every[..]);
        for (k, &id) in self.pushed.iter().enumerate() {
            let a = self.areas[id].as_mut().expect("just pushed");
            a.sizes = (0..p)
                .map(|r| every[r * sizes.len() + k] as usize)
                .collect();
            a.live = true;
        }
        self.pushed.clear();
        for id in std::mem::take(&mut self.popped) {
            self.areas[id] = None;
        }
        Ok(())
    }

    /// All-to-all-v of the bytes `flat` (`send_counts` to each rank, in rank order) with
    /// `recv_counts` from each rank into `recv`: the offsets of each rank's part in `recv`
    /// (`p + 1` of them).
    fn all_to_all_v(
        &self,
        flat: &[u8],
        send_counts: &[i32],
        recv_counts: &[i32],
        recv: &mut Vec<u8>,
    ) -> Vec<usize> {
        let displ = |c: &[i32]| -> Vec<i32> {
            c.iter()
                .scan(0i32, |acc, &x| {
                    let d = *acc;
                    *acc += x;
                    Some(d)
                })
                .collect()
        };
        let (sd, rd) = (displ(send_counts), displ(recv_counts));
        let total: usize = recv_counts.iter().map(|&c| c as usize).sum();
        recv.clear();
        recv.resize(total, 0);
        {
            let s = Partition::new(flat, send_counts, &sd[..]);
            let mut r = PartitionMut::new(&mut recv[..], recv_counts, &rd[..]);
            self.world.all_to_all_varcount_into(&s, &mut r);
        }
        let mut offsets: Vec<usize> = rd.iter().map(|&d| d as usize).collect();
        offsets.push(total);
        offsets
    }
}
