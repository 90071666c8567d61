//! Large deliveries shared with the senders that wait for them.
//!
//! ## Why
//!
//! Buffered puts are delivered by their receiver (`sync.rs`): it copies every record of every
//! sender into its own memory, while a sender with nothing to receive waits for the next
//! barrier. Where one process receives large puts from the others (all to one, a gather of
//! blocks), that copy is the superstep's critical path, and the cores of the senders idle
//! through it. So a receiver copies a put of [`LARGE`](crate::outbox::LARGE) bytes or more
//! through its [`Desk`]: it lays the copy out there in chunks of [`CHUNK`] bytes and takes
//! chunks itself, and a sender that put that much to it this superstep, done with its own
//! deliveries, takes chunks too until the receiver says its deliveries are complete.
//!
//! ## Who touches what when
//!
//! * A process's desk is written by its owner (the receiver): a job (source, destination,
//!   length) before it opens it, and the mark of the full sync whose deliveries it completed.
//!   Its claim word and its count of chunks helped are changed by the owner and its helpers.
//! * A job's memory, the destination (the receiver's own, which it does not touch while the
//!   job is open) and the source (a record's data that its sender leaves alone until the
//!   receiver has finished the sync or acknowledged it), stays valid while the job is open:
//!   until the owner has seen every chunk copied. Helpers touch it only through chunks they
//!   claimed, and count each one after copying it.
//! * The receiver copies its records one after another, each job closed before the next
//!   record: later puts to the same place still land last, as without helpers.
//!
//! ## The claim protocol
//!
//! The claim word holds the job's number above [`INDEX_BITS`] bits and the next chunk to take
//! below. The owner writes the job's source and destination, then its length (Release),
//! zeroes the count of chunks helped, and then stores the claim word of the new job with
//! Release. A helper loads the claim word (Acquire), the length (Acquire) and the rest, and
//! claims chunk `c` by a compare-exchange from `(job, c)` to `(job, c + 1)`; after copying it,
//! it adds one to the count (Release). The owner takes chunks by `fetch_add` (its last one
//! overshoots the job's chunks by one), waits until the count (Acquire) holds every chunk it
//! did not take itself, and closes the job: its claim word's index all ones, more than any
//! job's chunks (a new desk holds job 0, closed).
//!
//! A helper's claim that succeeds is of the job whose fields it read. If it read a later
//! job's length, the close of this job (stored before that length) happened before its
//! compare-exchange, which therefore fails: no value after the close in the claim word's order
//! is `(job, c)`. If it read this job's length and `c` is below its chunks, the job was open
//! and the chunk unclaimed: the fields of a later job are written only after the owner has
//! seen this helper's chunk counted, which the helper does after reading them, so its reads
//! cannot see them, and its Acquire load of the claim word saw the job's own store (or a later
//! claim of the same release sequence), made after the fields. A helper whose claim fails read
//! fields it does not use. The count is exact (each chunk claimed once), so the owner's count
//! reaches the total only after every helper's copy, and those copies happen before whatever
//! the owner does next (its deliveries' Release of its count of completed syncs, for the
//! others).
//!
//! Helpers wait for work only where the run has a core for every process (elsewhere a helper's
//! wait would take the receiver's core), and help only receivers in their own package (across
//! packages their writes would be remote, where the receiver's are local).

use crate::shim::{AtomicBool, AtomicU64, AtomicUsize, Ordering, spin_hint, yield_now};
use crate::wait::{Sleep, WaitPolicy};

/// The bytes of one chunk a receiver or a helper claims. Large enough that claiming one (a
/// compare-exchange on a line both sides write) costs little beside its copy, small enough
/// that a few megabytes split into many.
pub(crate) const CHUNK: usize = 64 << 10;

/// Spins of the owner's wait for its helpers' last chunks between yields of its core.
const OWNER_SPINS: u32 = 1 << 12;

/// Bits of the claim word that hold the next chunk; the rest numbers the job.
const INDEX_BITS: u32 = 24;
const INDEX: u64 = (1 << INDEX_BITS) - 1;

/// A copy: the addresses of its source and destination and its length, in bytes (in the
/// models: indices into cells).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Job {
    pub(crate) src: usize,
    pub(crate) dst: usize,
    pub(crate) len: usize,
}

/// Where a receiver lays out a large copy for its helpers (module documentation).
pub(crate) struct Desk {
    /// The job's number above [`INDEX_BITS`], the next chunk to take below.
    claim: AtomicU64,
    /// Chunks of the open job copied by helpers.
    helped: AtomicU64,
    src: AtomicUsize,
    dst: AtomicUsize,
    len: AtomicUsize,
    /// The mark of the last full sync whose deliveries the owner has completed.
    delivered: AtomicU64,
    /// The owner has opened a job since it last marked its deliveries complete (touched by the
    /// owner alone; on the line it writes anyway).
    opened: AtomicBool,
}

impl Default for Desk {
    fn default() -> Self {
        Desk {
            // Job 0, closed.
            claim: AtomicU64::new(INDEX),
            helped: AtomicU64::new(0),
            src: AtomicUsize::new(0),
            dst: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            delivered: AtomicU64::new(0),
            opened: AtomicBool::new(false),
        }
    }
}

impl Job {
    /// Copy the job's `n` bytes from offset `off`, streamed past the caches if the whole job is
    /// long enough (`stream.rs`: a chunk's copy is the job's, wherever it runs).
    ///
    /// # Safety
    /// `src` and `dst` are valid for reading and writing the `len` bytes of the job, which do
    /// not overlap and which nobody else touches meanwhile; `off + n <= len`.
    #[inline]
    unsafe fn copy(self, off: usize, n: usize) {
        debug_assert!(off + n <= self.len);
        // SAFETY: the caller's promise.
        unsafe {
            crate::stream::copy_part(
                (self.src as *const u8).add(off),
                (self.dst as *mut u8).add(off),
                n,
                self.len,
            )
        }
    }
}

impl Desk {
    /// Copy `len` bytes from `src` to `dst`, sharing the chunks with whoever helps.
    ///
    /// # Safety
    /// The caller owns this desk (no other thread opens jobs on it); `src` is valid for reading
    /// and `dst` for writing `len` bytes, they do not overlap, and neither is written by anyone
    /// else until this returns.
    pub(crate) unsafe fn copy(&self, src: *const u8, dst: *mut u8, len: usize) {
        let job = Job {
            src: src as usize,
            dst: dst as usize,
            len,
        };
        // SAFETY: the caller's promise, for every chunk of the job.
        self.share(job, CHUNK, |j, off, n| unsafe { j.copy(off, n) });
    }

    /// Run `job` in chunks of `chunk` bytes, each copied by `copy(job, offset, bytes)` here or
    /// by a helper; return once every chunk is copied (module documentation). The caller owns
    /// the desk.
    pub(crate) fn share(&self, job: Job, chunk: usize, copy: impl Fn(Job, usize, usize)) {
        if !self.opened.load(Ordering::Relaxed) {
            self.opened.store(true, Ordering::Relaxed);
        }
        // The index must hold the owner's overshoot past the last chunk, below the close.
        let chunks = job.len.div_ceil(chunk) as u64;
        if chunks <= 1 || chunks >= INDEX {
            if job.len > 0 {
                copy(job, 0, job.len);
            }
            return;
        }
        // Only the owner changes the job number: its own last store or claim holds it.
        let number = (self.claim.load(Ordering::Relaxed) >> INDEX_BITS).wrapping_add(1);
        self.src.store(job.src, Ordering::Relaxed);
        self.dst.store(job.dst, Ordering::Relaxed);
        self.len.store(job.len, Ordering::Release);
        self.helped.store(0, Ordering::Relaxed);
        self.claim.store(number << INDEX_BITS, Ordering::Release);
        let mut mine = 0;
        loop {
            let c = self.claim.fetch_add(1, Ordering::Relaxed) & INDEX;
            if c >= chunks {
                break;
            }
            let off = c as usize * chunk;
            copy(job, off, chunk.min(job.len - off));
            mine += 1;
        }
        // Helpers copy the chunks they claimed without waiting for anything: this wait is as
        // long as one chunk's copy, unless a helper lost its core (other load on the machine),
        // when the owner gives its own up now and then.
        let mut spins = 0u32;
        while self.helped.load(Ordering::Acquire) != chunks - mine {
            spins = spins.wrapping_add(1);
            if spins % OWNER_SPINS == 0 {
                yield_now();
            } else {
                spin_hint();
            }
        }
        self.claim
            .store(number << INDEX_BITS | INDEX, Ordering::Relaxed);
    }

    /// Claim and copy one chunk of the open job, if one is left: `Some(true)` after copying it,
    /// `Some(false)` if another took the chunk first (try again), `None` if nothing is left.
    fn help_once(&self, chunk: usize, copy: &impl Fn(Job, usize, usize)) -> Option<bool> {
        let w = self.claim.load(Ordering::Acquire);
        let len = self.len.load(Ordering::Acquire);
        let job = Job {
            src: self.src.load(Ordering::Relaxed),
            dst: self.dst.load(Ordering::Relaxed),
            len,
        };
        let c = w & INDEX;
        if c >= job.len.div_ceil(chunk) as u64 {
            return None;
        }
        if self
            .claim
            .compare_exchange(w, w + 1, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return Some(false);
        }
        // The claim holds: `job` is the open job's (module documentation).
        let off = c as usize * chunk;
        copy(job, off, chunk.min(job.len - off));
        self.helped.fetch_add(1, Ordering::Release);
        Some(true)
    }

    /// Whether a chunk of the open job is left to claim (a hint: it may be gone at once).
    fn open(&self, chunk: usize) -> bool {
        let c = self.claim.load(Ordering::Relaxed) & INDEX;
        c < self.len.load(Ordering::Relaxed).div_ceil(chunk) as u64
    }

    /// The owner has completed the deliveries of the full sync marked `mark`: helpers, who
    /// wait only for receivers of their large puts, learn it if a job was opened since the
    /// last mark (every large put is delivered through one).
    #[inline]
    pub(crate) fn delivered(&self, mark: u64) {
        if self.opened.load(Ordering::Relaxed) {
            self.opened.store(false, Ordering::Relaxed);
            self.delivered.store(mark, Ordering::Release);
        }
    }

    /// Help the owner with its jobs until it has completed the deliveries of the full sync
    /// marked `mark`, or `stop()` (the run failed, or the owner has completed that sync);
    /// between jobs, wait as `policy` says.
    ///
    /// # Safety
    /// Every job opened on this desk is a copy from the memory to the memory it names, valid as
    /// [`copy`](Self::copy) requires, and the caller is not its owner.
    pub(crate) unsafe fn help(&self, mark: u64, policy: WaitPolicy, stop: impl Fn() -> bool) {
        // SAFETY: the caller's promise, for every chunk claimed.
        let copy = |j: Job, off: usize, n: usize| unsafe { j.copy(off, n) };
        self.help_with(mark, CHUNK, &copy, |ready| {
            crate::wait::wait_until(policy, Sleep::Naps, ready, &stop).is_ok()
        });
    }

    /// [`help`](Self::help) with chunks of `chunk` bytes copied by `copy`, and `wait(ready)`
    /// waiting until `ready` holds (false: stop).
    pub(crate) fn help_with(
        &self,
        mark: u64,
        chunk: usize,
        copy: &impl Fn(Job, usize, usize),
        mut wait: impl FnMut(&mut dyn FnMut() -> Option<()>) -> bool,
    ) {
        loop {
            while self.help_once(chunk, copy).is_some() {}
            if self.delivered.load(Ordering::Acquire) == mark {
                return;
            }
            let mut ready = || {
                (self.open(chunk) || self.delivered.load(Ordering::Relaxed) == mark).then_some(())
            };
            if !wait(&mut ready) {
                return;
            }
        }
    }
}

/// The claim protocol alone, on loom's threads (inside `loom::model`): the owner runs `jobs`
/// (each a destination offset, a length and the byte it writes) in chunks of one cell into
/// `cells` cells, checking each job's cells after it, while `helpers` threads help until the
/// owner marks its deliveries done. Returns the cells at the end.
#[cfg(loom)]
pub(crate) fn model(cells: usize, jobs: &[(usize, usize, u8)], helpers: usize) -> Vec<u8> {
    use loom::cell::UnsafeCell;
    use std::sync::Arc;
    struct Cells(Vec<UnsafeCell<u8>>);
    // SAFETY: loom checks every access to the cells.
    unsafe impl Sync for Cells {}
    let desk = Arc::new(Desk::default());
    let cells = Arc::new(Cells((0..cells).map(|_| UnsafeCell::new(0)).collect()));
    // A job's "source" is the byte it writes.
    let copy = {
        let cells = cells.clone();
        move |j: Job, off: usize, n: usize| {
            for k in j.dst + off..j.dst + off + n {
                // SAFETY: loom reports any access that races with this one.
                cells.0[k].with_mut(|c| unsafe { *c = j.src as u8 });
            }
        }
    };
    let handles: Vec<_> = (0..helpers)
        .map(|_| {
            let (desk, copy) = (desk.clone(), copy.clone());
            loom::thread::spawn(move || {
                desk.help_with(1, 1, &copy, |ready| {
                    while ready().is_none() {
                        loom::thread::yield_now();
                    }
                    true
                })
            })
        })
        .collect();
    for &(dst, len, byte) in jobs {
        let job = Job {
            src: byte as usize,
            dst,
            len,
        };
        desk.share(job, 1, &copy);
        for k in dst..dst + len {
            // SAFETY: as above.
            let got = cells.0[k].with(|c| unsafe { *c });
            assert_eq!(got, byte, "cell {k} after the job writing {byte}");
        }
    }
    desk.delivered(1);
    for h in handles {
        h.join().expect("helper");
    }
    // SAFETY: every thread has been joined.
    cells.0.iter().map(|c| c.with(|c| unsafe { *c })).collect()
}
