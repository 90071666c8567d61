//! The barrier of one run: a dissemination barrier that ORs flags along the way, shaped by the
//! machine's packages, whose cache lines also carry small puts.
//!
//! In round `k` process `i` publishes, in its own cache line, the episode number and the OR of
//! the flags it has seen so far, then waits for its round-`k` *source* to publish the same
//! episode in its round-`k` line. After the last round every process has (transitively) heard
//! from every other, so it knows that all have arrived and the OR of all flags. No line is
//! written by more than one process, and each round costs one cache-line transfer on the
//! critical path — against p serialized atomic additions on one line for a central counter.
//!
//! **Sources.** With all processes in one package (one *group*), process `i`'s round-`k` source
//! is `i - 2^k mod p`: ⌈log₂ p⌉ rounds. When the run spans packages, processes are grouped by
//! package: the first ⌈log₂ s⌉ rounds (s = the largest group) disseminate within each group
//! (member `j`'s source is member `j - 2^k mod |g|` of its own group `g`), and the next
//! ⌈log₂ m⌉ rounds (m = the number of groups) cross packages: member `j` of group `g` reads
//! member `j mod |g'|` of group `g' = g - 2^k mod m`. After the group rounds every member of a
//! group knows the same (its group's flags), so each cross round spreads whole groups'
//! knowledge, and only ⌈log₂ m⌉ transfers cross packages on the critical path (a flat
//! dissemination over scattered pids would cross in nearly every round).
//!
//! **Riding puts and messages.** A line read by exactly one other process carries, next to the
//! episode word, up to [`RIDE_WORDS`] words of put and message records for that reader (a
//! one-word put or message takes two: `ride.rs`). A process stages small puts and messages to
//! the reader of its round-`k` line ([`Barrier::rider_rounds`]) instead of writing them to an
//! outbox; the reader copies them out when it sees the episode (before the writer can reuse the
//! line, two episodes later), delivers the puts in the communication phase and reads the
//! messages from its copy during the next superstep. So a superstep whose only communication
//! is a few small puts or messages to barrier partners costs no cache-line transfer beyond the
//! barrier's own where they fit the first of the line's four cache lines, and about one more
//! where they take more. The word also says whether the writer filled its outbox for the
//! reader ([`Ride::outbox`]).
//!
//! Each line holds two episode words and two payloads, used in alternate episodes: a process
//! can only write a round-`k` word again two episodes later, after everybody has finished the
//! episode in between and so has read the earlier value.
//!
//! **Oversubscribed: a tree.** With many more processes than cores most waiters sleep, and
//! what an episode costs is the context switches it needs: a dissemination barrier makes each
//! process wait ⌈log₂ p⌉ times, and each of those waits may put it to sleep and need a switch to
//! wake it, p ⌈log₂ p⌉ in all. [`Barrier::tree`] makes each process wait once: it ORs its flags
//! into a shared word and counts itself in on a shared counter (with only a few processes
//! running at a time, the contention of one counter is no cost); the last to arrive publishes
//! the episode with the OR of all flags and wakes the root of a tree of [`TREE_ARITY`] children
//! per node (position `k`'s parent is position `(k - 1) / TREE_ARITY`; the positions hold the
//! processes in the order of [`tree_order`], which alternates the cores they share); each
//! process waits for its parent's release word, publishes its own with the same value and wakes
//! its children. So an episode costs about one wake-up per process, and the wake-ups are spread
//! over the tree's nodes rather than made one after another by the last arriver. One release
//! word per process suffices: a process writes it for the next episode only after the next
//! episode's arrivals are complete, which includes its children's, who arrive only after
//! reading this episode's. The flags word is emptied by the last arriver of an episode, before
//! its release lets anyone arrive in the next. No puts ride in a tree barrier
//! ([`Barrier::rider_rounds`] says so).
//!
//! **Processes as coroutines: a tree of threads.** Where the processes of each thread take
//! turns on it as coroutines (`coroutines.rs`), nobody sleeps, and what an episode costs is
//! the cache lines that cross between the threads' cores (and the turns a thread takes before
//! the process a release reached runs). A tree over the processes would cross at each of the
//! p arrivals on the one counter and at every edge between cores. [`Barrier::by_thread`]
//! combines each thread's processes first, on lines only that thread touches: they OR their
//! flags into their thread's word and count themselves in on its counter; the thread's last
//! arriver arrives for it on the run's counter, as a tree's process does, waits for the
//! episode's publication and releases its thread's processes with its thread's own release
//! word. So an episode crosses cores once per thread each way, and a thread's processes find
//! their release in their next turn.
//!
//! Waiting is the runtime's one way to wait (`wait.rs`): spin, yield, then sleep on the
//! waiting process's own [`Signal`], which the writer of a line notifies for each reader of the
//! line after it publishes a word (a system call only when that reader sleeps). One signal per
//! process, not one per barrier, because with more processes than cores many of them sleep: a
//! shared signal would wake all p sleepers for every one of the p ⌈log₂ p⌉ words an episode
//! publishes, each wake-up a context switch, so an episode would cost O(p² log p) switches
//! instead of at most one per awaited word. Abort sets a flag and notifies every signal.

use super::ride::{RIDE_WORDS, Ride};
use super::riders::Riders;
use crate::isolated::Isolated;
use crate::shim::{AtomicBool, AtomicU32, AtomicU64, Ordering, Zero, fence};
use crate::tree::Stop;
use crate::wait::{Aborted, Signal, Sleep, WaitPolicy, Waiter};
use crossbeam_utils::CachePadded;

/// Bits 8..13 of a line's word: how many payload words ride with it (not ORed).
const RIDE_SHIFT: u32 = 8;
const RIDE_MASK: u32 = 0x1F << RIDE_SHIFT;
const _: () = assert!(RIDE_WORDS as u32 <= RIDE_MASK >> RIDE_SHIFT);
/// Bit 13 of a line's word: the writer filled its outbox for the line's reader ([`Ride::outbox`];
/// not ORed).
const OUTBOX_MARK: u32 = 1 << 13;
/// The bits of a line's word that are the line's own, not the episode's flags.
const LINE_BITS: u32 = RIDE_MASK | OUTBOX_MARK;
const _: () = assert!(
    LINE_BITS & !crate::flags::ENGINE_BITS == 0,
    "no flag's bits"
);
/// Internal flags: the arrival was (not) the end of the process's SPMD function.
const ENDED: u32 = 1 << 30;
const SYNCED: u32 = 1 << 31;

/// What the processes brought to one barrier episode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// OR of the flags passed to [`Barrier::wait`] by every process.
    pub flags: u32,
    /// Some process arrived with `ending = true`.
    pub some_ended: bool,
    /// Every process arrived with `ending = true`.
    pub all_ended: bool,
}

/// One process's view of a barrier: its pid, how many episodes it has passed, and what its
/// waits have learned (an adaptive spin budget: `wait.rs`).
#[derive(Debug)]
pub struct Member {
    pid: usize,
    episode: u32,
    waiter: Waiter,
    /// The last process this one woke in a dissemination barrier: its next wait is patient
    /// while that process has not run yet (`wait.rs`).
    woken: Option<u32>,
}

impl Member {
    /// What this process's waits have learned, for its waits outside the barrier (lazy syncs):
    /// taken out for one wait and handed back with [`Member::restore_waiter`].
    pub(crate) fn take_waiter(&mut self) -> Waiter {
        std::mem::replace(&mut self.waiter, Waiter::new())
    }

    /// Hand back the waiter of [`Member::take_waiter`].
    pub(crate) fn restore_waiter(&mut self, waiter: Waiter) {
        self.waiter = waiter;
    }

    /// Process `pid`'s membership (each process must use exactly one).
    pub fn new(pid: usize) -> Self {
        Member {
            pid,
            episode: 0,
            waiter: Waiter::new(),
            woken: None,
        }
    }

    /// Process `pid`'s member in the next run on the same barrier, when that run continues
    /// this one's episodes ([`Barrier::reopen`]; after [`Barrier::reset`] the starter makes
    /// every member new).
    pub(crate) fn next_run(&self, pid: usize) -> Self {
        Member {
            episode: self.episode,
            ..Member::new(pid)
        }
    }
}

/// The order of a [`Barrier::tree_in_order`] for processes placed on `cpus` (each process's
/// CPU set): the processes that share a CPU set take turns with those of the other sets, first
/// the first process of every set (in order of first appearance), then the second, and so on.
/// A release then reaches every set within the first positions, so every core the processes
/// share has a woken process to run at once: where the processes of a core are a block of pids
/// (one core's processes woken by another's in pid order), the other core would wait idle for
/// its first release. Processes that share nothing, or all share one set, keep pid order.
pub(crate) fn tree_order(cpus: &[Vec<u32>]) -> Vec<u32> {
    let mut sets: Vec<&[u32]> = Vec::new();
    let mut key: Vec<(usize, usize, u32)> = Vec::with_capacity(cpus.len());
    let mut seen: Vec<usize> = Vec::new();
    for (pid, c) in cpus.iter().enumerate() {
        let set = match sets.iter().position(|s| *s == &c[..]) {
            Some(i) => i,
            None => {
                sets.push(c);
                seen.push(0);
                sets.len() - 1
            }
        };
        key.push((seen[set], set, pid as u32));
        seen[set] += 1;
    }
    key.sort_unstable();
    key.into_iter().map(|(_, _, pid)| pid).collect()
}

/// Children per node of a [`Barrier::tree`].
pub const TREE_ARITY: usize = 8;

/// One process's release word in a tree barrier: the episode and the OR of all flags, for
/// its children.
struct Node {
    release: CachePadded<AtomicU64>,
}

/// One thread's processes in a [`Barrier::by_thread`]: where they arrive, and their release.
/// Only the thread's own processes touch it (they run one at a time).
struct Thread {
    /// Arrivals of the thread's processes since the barrier was made (or reset).
    count: AtomicU64,
    /// The OR of the flags of the thread's processes that have arrived in this episode.
    flags: AtomicU32,
    /// The episode and the OR of all flags, once the thread's last arriver has seen it.
    release: AtomicU64,
    /// The thread's last arriver of the episode, which waits for the run's publication (whose
    /// signal the publisher notifies).
    last: AtomicU32,
}

/// Where the processes of a tree barrier arrive.
struct Arrival {
    /// Arrivals since the barrier was made (or reset): an episode is complete when it reaches a
    /// multiple of p.
    count: AtomicU64,
    /// The OR of the flags of the processes that have arrived in this episode.
    flags: AtomicU32,
    /// The episode and the OR of its flags, once complete (for process 0, the tree's root).
    all: AtomicU64,
}

impl Arrival {
    fn new() -> Self {
        Arrival {
            count: AtomicU64::new(0),
            flags: AtomicU32::new(0),
            all: AtomicU64::new(0),
        }
    }
}

/// One process's lines of one round, by parity.
struct Line {
    half: [Half; 2],
}

/// The episode word and the payload riding with it: a reader that sees the word finds the
/// first words of the payload in the line it just fetched, and the rest in the three lines
/// after it, which it fetches only when they hold some (`ride.rs`, [`RIDE_WORDS`]).
#[repr(C, align(256))]
struct Half {
    word: AtomicU64,
    ride: [AtomicU64; RIDE_WORDS],
}
const _: () = assert!(
    size_of::<Half>() == 256,
    "four cache lines, the word's first"
);

/// A flag-combining dissemination barrier for a fixed number of processes.
pub struct Barrier {
    p: usize,
    rounds: usize,
    /// Process `i`'s round-`k` source at `i * rounds + k`.
    sources: Isolated<u32>,
    /// Round `k` of process `i` at `i * rounds + k`.
    lines: Box<[CachePadded<Line>]>,
    /// The readers of line `l` (process `i`'s round `k` at `l = i * rounds + k`) at
    /// `readers[reader_at[l]..reader_at[l + 1]]`: whose signals its writer notifies.
    readers: Isolated<u32>,
    reader_at: Isolated<u32>,
    /// Process `i` sleeps on `signals[i]`.
    signals: Box<[CachePadded<Signal>]>,
    /// A tree barrier's words, by process (empty for a dissemination barrier and a
    /// [`Barrier::by_thread`]).
    nodes: Box<[Node]>,
    /// A tree barrier's arrivals (in a [`Barrier::by_thread`], the threads').
    arrival: CachePadded<Arrival>,
    /// A [`Barrier::by_thread`]'s threads (empty otherwise); the processes of thread `t` are
    /// `order[member_at[t]..member_at[t + 1]]`, and process `i`'s thread is `thread_of[i]`.
    threads: Box<[CachePadded<Thread>]>,
    member_at: Isolated<u32>,
    thread_of: Isolated<u32>,
    /// A tree barrier's order: the process at each position of the tree (position `k`'s
    /// parent is position `(k - 1) / TREE_ARITY`), and each process's position.
    order: Isolated<u32>,
    position: Isolated<u32>,
    /// Every wait's stop condition.
    aborted: CachePadded<AtomicBool>,
    policy: WaitPolicy,
}

/// ⌈log₂ n⌉ (0 for n ≤ 1).
fn log2_ceil(n: usize) -> usize {
    n.next_power_of_two().trailing_zeros() as usize
}

impl Barrier {
    /// A barrier for `p ≥ 1` processes in one group.
    pub fn new(p: usize, policy: WaitPolicy) -> Self {
        Self::grouped(&vec![0; p], policy)
    }

    /// A barrier for `group.len() ≥ 1` processes, process `i` in group `group[i]` (e.g. its
    /// package): processes combine within their group first (see the module documentation).
    pub fn grouped(group: &[usize], policy: WaitPolicy) -> Self {
        let p = group.len();
        assert!(p >= 1, "barrier of 0 processes");
        // Groups in order of first appearance; members in pid order.
        let mut ids: Vec<usize> = Vec::new();
        let mut members: Vec<Vec<usize>> = Vec::new();
        for (pid, &g) in group.iter().enumerate() {
            match ids.iter().position(|&x| x == g) {
                Some(at) => members[at].push(pid),
                None => {
                    ids.push(g);
                    members.push(vec![pid]);
                }
            }
        }
        let largest = members.iter().map(Vec::len).max().unwrap_or(1);
        let (inner, outer) = (log2_ceil(largest), log2_ceil(members.len()));
        let rounds = inner + outer;
        let mut sources = vec![0u32; p * rounds];
        for (g, m) in members.iter().enumerate() {
            for (j, &pid) in m.iter().enumerate() {
                for k in 0..inner {
                    let back = (1usize << k) % m.len();
                    sources[pid * rounds + k] = m[(j + m.len() - back) % m.len()] as u32;
                }
                for k in 0..outer {
                    let n = members.len();
                    let src = &members[(g + n - (1usize << k) % n) % n];
                    sources[pid * rounds + inner + k] = src[j % src.len()] as u32;
                }
            }
        }
        let line = || {
            CachePadded::new(Line {
                half: std::array::from_fn(|_| Half {
                    word: AtomicU64::new(0),
                    ride: std::array::from_fn(|_| AtomicU64::new(0)),
                }),
            })
        };
        let mut readers_of = vec![Vec::new(); p * rounds];
        for q in 0..p {
            for k in 0..rounds {
                readers_of[sources[q * rounds + k] as usize * rounds + k].push(q as u32);
            }
        }
        let mut reader_at = Vec::with_capacity(p * rounds + 1);
        reader_at.push(0u32);
        for r in &readers_of {
            reader_at.push(reader_at[reader_at.len() - 1] + r.len() as u32);
        }
        Barrier {
            p,
            rounds,
            sources: Isolated::from_slice(&sources),
            lines: (0..p * rounds).map(|_| line()).collect(),
            readers: Isolated::from_slice(&readers_of.concat()),
            reader_at: Isolated::from_slice(&reader_at),
            signals: (0..p).map(|_| CachePadded::new(Signal::new())).collect(),
            nodes: Box::new([]),
            arrival: CachePadded::new(Arrival::new()),
            threads: Box::new([]),
            member_at: Isolated::default(),
            thread_of: Isolated::default(),
            order: Isolated::default(),
            position: Isolated::default(),
            aborted: CachePadded::new(AtomicBool::new(false)),
            policy,
        }
    }

    /// A tree barrier for `p ≥ 1` processes: for many more processes than cores (see the module
    /// documentation). No puts ride in it.
    pub fn tree(p: usize, policy: WaitPolicy) -> Self {
        Self::tree_in_order((0..p as u32).collect(), policy)
    }

    /// A [`tree`](Self::tree) barrier whose positions hold the processes `order` (a
    /// permutation of the pids): [`tree_order`] makes one that starts a release on every core
    /// the processes share.
    pub fn tree_in_order(order: Vec<u32>, policy: WaitPolicy) -> Self {
        let p = order.len();
        assert!(p >= 1, "barrier of 0 processes");
        let mut position = vec![u32::MAX; p];
        for (k, &pid) in order.iter().enumerate() {
            position[pid as usize] = k as u32;
        }
        assert!(
            position.iter().all(|&k| k != u32::MAX),
            "a tree order is a permutation of the pids"
        );
        Barrier {
            p,
            rounds: 0,
            sources: Isolated::default(),
            lines: Box::new([]),
            readers: Isolated::default(),
            reader_at: Isolated::new(1, 0),
            signals: (0..p).map(|_| CachePadded::new(Signal::new())).collect(),
            nodes: (0..p)
                .map(|_| Node {
                    release: CachePadded::new(AtomicU64::new(0)),
                })
                .collect(),
            arrival: CachePadded::new(Arrival::new()),
            threads: Box::new([]),
            member_at: Isolated::default(),
            thread_of: Isolated::default(),
            order: Isolated::from_slice(&order),
            position: Isolated::from_slice(&position),
            aborted: CachePadded::new(AtomicBool::new(false)),
            policy,
        }
    }

    /// A tree barrier for processes that take turns on threads as coroutines, `threads[t]`
    /// the pids of thread `t` (a partition of `0..p`, none empty): see the module
    /// documentation. No puts ride in it.
    pub fn by_thread(threads: &[Vec<usize>], policy: WaitPolicy) -> Self {
        let order: Vec<u32> = threads.iter().flatten().map(|&pid| pid as u32).collect();
        assert!(
            threads.iter().all(|t| !t.is_empty()),
            "a thread of no processes"
        );
        let mut b = Self::tree_in_order(order, policy);
        let mut thread_of = vec![0u32; b.p];
        let mut member_at = vec![0u32];
        for (t, pids) in threads.iter().enumerate() {
            for &pid in pids {
                thread_of[pid] = t as u32;
            }
            member_at.push(member_at[t] + pids.len() as u32);
        }
        b.threads = threads
            .iter()
            .map(|_| {
                CachePadded::new(Thread {
                    count: AtomicU64::new(0),
                    flags: AtomicU32::new(0),
                    release: AtomicU64::new(0),
                    last: AtomicU32::new(0),
                })
            })
            .collect();
        b.member_at = Isolated::from_slice(&member_at);
        b.thread_of = Isolated::from_slice(&thread_of);
        // The threads release their processes: no release word per process.
        b.nodes = Box::new([]);
        b
    }

    /// Whether this is a [`by_thread`](Self::by_thread) barrier.
    pub fn is_by_thread(&self) -> bool {
        !self.threads.is_empty()
    }

    /// Whether this is the [`by_thread`](Self::by_thread) barrier of `threads`.
    pub(crate) fn is_by_thread_of(&self, threads: &[Vec<usize>]) -> bool {
        self.threads.len() == threads.len()
            && threads.iter().enumerate().all(|(t, pids)| {
                let at = self.member_at[t] as usize..self.member_at[t + 1] as usize;
                self.order[at]
                    .iter()
                    .map(|&pid| pid as usize)
                    .eq(pids.iter().copied())
            })
    }

    /// A tree barrier's order ([`tree_in_order`](Self::tree_in_order)); empty for a
    /// dissemination barrier; a [`by_thread`](Self::by_thread) barrier's threads' pids one
    /// after another.
    pub(crate) fn order(&self) -> &[u32] {
        &self.order
    }

    /// Whether this is a [`tree`](Self::tree) barrier.
    pub fn is_tree(&self) -> bool {
        !self.nodes.is_empty() || self.is_by_thread()
    }

    /// The number of rounds of an episode.
    pub fn rounds(&self) -> usize {
        self.rounds
    }

    /// Process `pid`'s source in each round.
    pub fn sources(&self, pid: usize) -> &[u32] {
        &self.sources[pid * self.rounds..(pid + 1) * self.rounds]
    }

    /// For every process: by destination pid, the round whose line (of that process) the
    /// destination alone reads — puts to it can ride there — or `NO_RIDE`.
    pub fn rider_rounds(&self) -> Riders {
        let r = self.rounds;
        let mut out = Riders::none(self.p);
        for pid in 0..self.p {
            for k in (0..r).rev() {
                if let &[reader] = self.readers_of(pid * r + k) {
                    if reader as usize != pid {
                        out.set(pid, reader as usize, k as u8); // the earliest round wins
                    }
                }
            }
        }
        out
    }

    /// The processes that read line `line`.
    #[inline]
    fn readers_of(&self, line: usize) -> &[u32] {
        &self.readers[self.reader_at[line] as usize..self.reader_at[line + 1] as usize]
    }

    /// Arrive with `flags` (bits 0..8 and 11..30), wait for all processes, and return what they
    /// brought.
    pub fn wait(&self, me: &mut Member, flags: u32, ending: bool) -> Result<Outcome, Aborted> {
        self.wait_riding(me, flags, ending, &[], &mut [], || ())
    }

    /// [`wait`](Self::wait), with `out[k]` riding in this process's round-`k` line (for the
    /// line's one reader), and what rides in the lines this process reads copied to `inbox[k]`
    /// (`out` and `inbox` may be shorter than the number of rounds).
    ///
    /// `arrived` runs once this process has arrived, after a `fence(SeqCst)` that follows its
    /// arrival and every store the caller made before the call, and before it waits: the
    /// caller's side (N) of other sleep handshakes (`wait.rs`) shares the barrier's fence. It
    /// runs only where there are other processes (at p = 1 nobody can sleep).
    pub fn wait_riding(
        &self,
        me: &mut Member,
        flags: u32,
        ending: bool,
        out: &[Ride],
        inbox: &mut [Ride],
        arrived: impl FnOnce(),
    ) -> Result<Outcome, Aborted> {
        debug_assert!(flags & (LINE_BITS | ENDED | SYNCED) == 0);
        if self.is_aborted() {
            return Err(Aborted);
        }
        me.episode = me.episode.wrapping_add(1);
        let (e, parity) = (me.episode, (me.episode & 1) as usize);
        let mut acc = flags | if ending { ENDED } else { SYNCED };
        let mut arrived = Some(arrived);
        if self.is_tree() {
            debug_assert!(
                out.iter().all(|r| r.len == 0 && !r.outbox),
                "no puts ride in a tree barrier"
            );
            if self.p > 1 {
                // The tree's arrival is a read-modify-write, not a fence of the handshake.
                fence(Ordering::SeqCst);
                if let Some(f) = arrived.take() {
                    f();
                }
            }
            acc = self.wait_tree(me, e, acc)?;
        }
        for k in 0..self.rounds {
            let mine = &self.lines[me.pid * self.rounds + k];
            let mut ride = 0;
            if let Some(r) = out.get(k) {
                for (w, v) in mine.half[parity].ride.iter().zip(&r.words[..r.len]) {
                    w.store(*v, Ordering::Relaxed);
                }
                ride = (r.len as u32) << RIDE_SHIFT | if r.outbox { OUTBOX_MARK } else { 0 };
            }
            let word = ((e as u64) << 32) | (acc | ride) as u64;
            // Release: the payload above travels with the word. Then the sleep handshake's
            // notification (`wait.rs`): its fence (N), shared with the caller's handshakes in
            // the first round; a reader asleep on its signal is woken.
            mine.half[parity].word.store(word, Ordering::Release);
            fence(Ordering::SeqCst);
            if let Some(f) = arrived.take() {
                f();
            }
            for &r in self.readers_of(me.pid * self.rounds + k) {
                if self.signals[r as usize].notify_fenced() {
                    me.waiter.woke();
                    me.woken = Some(r);
                }
            }
            let from = self.sources[me.pid * self.rounds + k] as usize;
            let line = &self.lines[from * self.rounds + k];
            // No round of this episode ends before every process has arrived, so a reader we
            // woke delays us until it runs, whoever our source is.
            let woken = me.woken;
            let got =
                self.await_episode(&line.half[parity].word, e, me.pid, &mut me.waiter, || {
                    woken.is_some_and(|r| self.signals[r as usize].sleeping())
                })? as u32;
            let n = ((got & RIDE_MASK) >> RIDE_SHIFT) as usize;
            // Set even when nothing rode: the reader keeps what rode last time (its queue reads
            // the messages there) until this episode.
            if let Some(slot) = inbox.get_mut(k) {
                for (v, w) in slot.words.iter_mut().zip(&line.half[parity].ride[..n]) {
                    *v = w.load(Ordering::Relaxed);
                }
                slot.len = n;
                slot.outbox = got & OUTBOX_MARK != 0;
            }
            acc |= got & !LINE_BITS;
        }
        Ok(Outcome {
            flags: acc & !(LINE_BITS | ENDED | SYNCED),
            some_ended: acc & ENDED != 0,
            all_ended: acc & SYNCED == 0,
        })
    }

    /// An episode `e` of a tree barrier, arriving with `acc`; returns the OR of every
    /// process's (module documentation).
    fn wait_tree(&self, me: &mut Member, e: u32, acc: u32) -> Result<u32, Aborted> {
        if self.is_by_thread() {
            return self.wait_by_thread(me, e, acc);
        }
        let count = &self.arrival.count;
        let all = &self.arrival.all;
        self.arrival.flags.fetch_or(acc, Ordering::Relaxed);
        // AcqRel: the increments form one release sequence, so the last arriver's increment
        // reads after (and synchronizes with) every other's, and sees their flags.
        if (count.fetch_add(1, Ordering::AcqRel) + 1) % self.p as u64 == 0 {
            // Nobody ORs the next episode's flags before the release of this one.
            let flags = self.arrival.flags.swap(0, Ordering::Relaxed);
            all.store(((e as u64) << 32) | flags as u64, Ordering::Release);
            if self.signals[self.order[0] as usize].notify() {
                me.waiter.woke();
            }
        }
        // With many more processes than cores, woken processes wait for a core as a rule, and
        // a process that yields until they run only delays them: the tree's waits do not watch
        // them (their patience is the fixed one).
        let at = self.position[me.pid] as usize;
        let released = if at == 0 {
            self.await_episode(all, e, me.pid, &mut me.waiter, || false)?
        } else {
            let parent = self.order[(at - 1) / TREE_ARITY] as usize;
            let parent = &self.nodes[parent].release;
            self.await_episode(parent, e, me.pid, &mut me.waiter, || false)?
        };
        // Release: what this process saw travels down its subtree. Then the sleep handshake's
        // notifications (`wait.rs`).
        self.nodes[me.pid]
            .release
            .store(released, Ordering::Release);
        let first = at * TREE_ARITY + 1;
        for &child in &self.order[first.min(self.p)..(first + TREE_ARITY).min(self.p)] {
            if self.signals[child as usize].notify() {
                me.waiter.woke();
            }
        }
        Ok(released as u32)
    }

    /// An episode `e` of a [`by_thread`](Self::by_thread) barrier, arriving with `acc`;
    /// returns the OR of every process's (module documentation). The orderings are the tree's:
    /// each counter's increments form one release sequence, so a thread's last arriver sees
    /// its thread's flags and the run's last arriver every thread's; nobody ORs flags of the
    /// next episode into a word before the release of this one, which follows its emptying.
    fn wait_by_thread(&self, me: &mut Member, e: u32, acc: u32) -> Result<u32, Aborted> {
        let t = self.thread_of[me.pid] as usize;
        let (thread, members) = (&self.threads[t], self.member_at[t]..self.member_at[t + 1]);
        thread.flags.fetch_or(acc, Ordering::Relaxed);
        let size = u64::from(members.end - members.start);
        if (thread.count.fetch_add(1, Ordering::AcqRel) + 1) % size != 0 {
            let released =
                self.await_episode(&thread.release, e, me.pid, &mut me.waiter, || false)?;
            return Ok(released as u32);
        }
        // The thread's last arriver: it arrives for the thread.
        let flags = thread.flags.swap(0, Ordering::Relaxed);
        thread.last.store(me.pid as u32, Ordering::Relaxed);
        self.arrival.flags.fetch_or(flags, Ordering::Relaxed);
        let n = self.threads.len() as u64;
        if (self.arrival.count.fetch_add(1, Ordering::AcqRel) + 1) % n == 0 {
            let flags = self.arrival.flags.swap(0, Ordering::Relaxed);
            self.arrival
                .all
                .store(((e as u64) << 32) | flags as u64, Ordering::Release);
            // Each thread's last arriver stored its pid before its increment, which ours read
            // after; none stores the next episode's before this one's publication.
            for other in self.threads.iter() {
                let last = other.last.load(Ordering::Relaxed) as usize;
                if self.signals[last].notify() {
                    me.waiter.woke();
                }
            }
        }
        let released =
            self.await_episode(&self.arrival.all, e, me.pid, &mut me.waiter, || false)?;
        // Release: the episode's flags travel to the thread's processes. Then the sleep
        // handshake's notifications (`wait.rs`; processes as coroutines never sleep, but the
        // barrier keeps the handshake wherever it runs).
        thread.release.store(released, Ordering::Release);
        for &pid in &self.order[members.start as usize..members.end as usize] {
            if pid as usize != me.pid && self.signals[pid as usize].notify() {
                me.waiter.woke();
            }
        }
        Ok(released as u32)
    }

    /// Wait (as process `pid`) until `word` holds episode `e`; return it. `waking`: whether a
    /// process this one woke has not run yet (`Waiter::wait`).
    #[inline]
    fn await_episode(
        &self,
        word: &AtomicU64,
        e: u32,
        pid: usize,
        waiter: &mut Waiter,
        waking: impl Fn() -> bool,
    ) -> Result<u64, Aborted> {
        waiter.wait(
            self.policy,
            Sleep::On(&self.signals[pid]),
            || {
                let w = word.load(Ordering::Acquire);
                ((w >> 32) as u32 == e).then_some(w)
            },
            || self.is_aborted(),
            waking,
        )
    }

    /// Make the barrier as new for a new run. No process may be using it (the run that used
    /// it has ended); the stores are published to the new run's processes by the hand-over of
    /// their jobs.
    pub(crate) fn reset(&self) {
        // Only what changed is written (`shim::Zero`).
        for line in self.lines.iter() {
            for h in line.half.iter() {
                h.word.zero();
            }
        }
        for node in self.nodes.iter() {
            node.release.zero();
        }
        self.arrival.count.zero();
        self.arrival.flags.zero();
        self.arrival.all.zero();
        for thread in self.threads.iter() {
            thread.count.zero();
            thread.flags.zero();
            thread.release.zero();
        }
        self.aborted.zero();
    }

    /// Ready the barrier for a run whose processes continue the episodes of the last, which
    /// ended well ([`Member::next_run`]): every line holds an episode of that run which every
    /// process has passed (a word is awaited by equality with a later episode), and a tree's
    /// arrival count is a multiple of p with its flags emptied by the last arriver. Only an
    /// abort (the hierarchy failed after the run ended) is forgotten. Nothing else is written:
    /// the lines are the processes', and each written here would cross to the starter's core
    /// and back.
    pub(crate) fn reopen(&self) {
        self.aborted.zero();
    }

    /// Make every current and future [`wait`](Self::wait) return [`Aborted`].
    pub fn abort(&self) {
        // Release: a process released by the abort finds the run's error recorded (the tree
        // records it before aborting its barriers).
        self.aborted.store(true, Ordering::Release);
        for signal in self.signals.iter() {
            signal.notify();
        }
    }

    /// Whether [`abort`](Self::abort) was called.
    #[inline]
    pub fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::Acquire)
    }

    /// The waiting policy.
    pub fn policy(&self) -> WaitPolicy {
        self.policy
    }

    /// The signal process `pid` sleeps on: its waits outside the barrier (lazy syncs) sleep
    /// on it too, so that [`abort`](Self::abort) wakes them.
    pub(crate) fn signal(&self, pid: usize) -> &Signal {
        &self.signals[pid]
    }
}

impl Stop for Barrier {
    fn stop(&self) {
        self.abort();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::riders::NO_RIDE;
    use super::*;
    use crate::flags::FLAG_GETS;

    const SLEEPY: WaitPolicy = WaitPolicy::new(0, 0);

    fn policies() -> [WaitPolicy; 2] {
        [WaitPolicy::for_load(1, 64), SLEEPY]
    }

    /// Every process arrives `rounds` times; in round r, pid q raises bit q iff r % (q+1) == 0.
    fn flags_round_trip(p: usize, rounds: u32, policy: WaitPolicy) {
        flags_round_trip_on(&vec![0; p], rounds, policy);
    }

    /// [`flags_round_trip`] with processes in groups (packages).
    fn flags_round_trip_on(groups: &[usize], rounds: u32, policy: WaitPolicy) {
        flags_round_trip_through(&Barrier::grouped(groups, policy), rounds);
    }

    /// [`flags_round_trip`] through barrier `b`.
    fn flags_round_trip_through(b: &Barrier, rounds: u32) {
        let p = b.p;
        std::thread::scope(|s| {
            for pid in 0..p {
                s.spawn(move || {
                    let mut me = Member::new(pid);
                    for round in 0..rounds {
                        let bit = |q: usize| {
                            if round % (q as u32 + 1) == 0 {
                                1 << (q % 8)
                            } else {
                                0
                            }
                        };
                        let out = b.wait(&mut me, bit(pid), false).unwrap();
                        let want = (0..p).fold(0, |acc, q| acc | bit(q));
                        assert_eq!(out.flags, want, "p {p} round {round}");
                        assert!(!out.some_ended && !out.all_ended);
                    }
                    let out = b.wait(&mut me, 0, pid % 2 == 0).unwrap();
                    assert!(out.some_ended);
                    assert_eq!(out.all_ended, p == 1);
                    let out = b.wait(&mut me, 0, true).unwrap();
                    assert!(out.some_ended && out.all_ended);
                });
            }
        });
    }

    #[test]
    fn combines_flags_and_ends_for_many_sizes() {
        for policy in policies() {
            for p in [1, 2, 3, 4, 5, 7, 8, 13] {
                flags_round_trip(p, 300, policy);
            }
        }
    }

    #[test]
    fn tree_barriers_combine_flags_and_end_for_many_sizes() {
        for policy in policies() {
            for p in [1, 2, 3, 5, 8, 9, 10, 17, 40] {
                let b = Barrier::tree(p, policy);
                assert!(b.is_tree() && b.rounds() == 0);
                flags_round_trip_through(&b, 200);
                // Reset for a new run: episodes start again from the first.
                b.reset();
                flags_round_trip_through(&b, 20);
            }
        }
    }

    /// Threads of one process, of several, uneven and interleaved pids; every process a
    /// thread of its own here, so that a wrong count or release would hang or fail.
    #[test]
    fn by_thread_barriers_combine_flags_and_end() {
        let partitions: [&[&[usize]]; 6] = [
            &[&[0]],
            &[&[0], &[1]],
            &[&[0, 1, 2, 3, 4]],
            &[&[0, 2, 4], &[1, 3]],
            &[&[3], &[0, 1], &[2, 4, 5, 6]],
            &[
                &[0, 3, 6, 9, 12, 15],
                &[1, 4, 7, 10, 13],
                &[2, 5, 8, 11, 14],
            ],
        ];
        for policy in policies() {
            for threads in partitions {
                let threads: Vec<Vec<usize>> = threads.iter().map(|t| t.to_vec()).collect();
                let b = Barrier::by_thread(&threads, policy);
                assert!(b.is_tree() && b.is_by_thread() && b.is_by_thread_of(&threads));
                let (p, riders) = (b.p, b.rider_rounds());
                for (pid, d) in (0..p).flat_map(|pid| (0..p).map(move |d| (pid, d))) {
                    assert_eq!(riders.round(pid, d), NO_RIDE, "no puts ride");
                }
                flags_round_trip_through(&b, 200);
                b.reset();
                flags_round_trip_through(&b, 20);
            }
        }
        let b = Barrier::by_thread(&[vec![0, 2], vec![1, 3]], WaitPolicy::new(0, 0));
        assert!(!b.is_by_thread_of(&[vec![0, 2, 1, 3]]));
        assert!(!b.is_by_thread_of(&[vec![0, 2, 1], vec![3]]));
        assert!(!Barrier::tree(4, WaitPolicy::new(0, 0)).is_by_thread());
    }

    #[test]
    fn no_puts_ride_in_a_tree_barrier() {
        let riders = Barrier::tree(9, WaitPolicy::for_load(9, 1)).rider_rounds();
        for (pid, d) in (0..9).flat_map(|pid| (0..9).map(move |d| (pid, d))) {
            assert_eq!(riders.round(pid, d), NO_RIDE);
        }
    }

    #[test]
    fn grouped_barriers_combine_flags() {
        let shapes: [&[usize]; 8] = [
            &[0, 1],
            &[0, 1, 0, 1],
            &[0, 0, 0, 1, 1],
            &[0, 1, 2, 0, 1, 2, 0],
            &[0, 0, 1, 1, 2, 2, 3, 3],
            &[3, 1, 3, 1, 2],
            &[0, 0, 0, 0, 0, 0, 0, 1],
            &[5, 4, 3, 2, 1],
        ];
        for groups in shapes {
            for policy in policies() {
                flags_round_trip_on(groups, 100, policy);
            }
        }
    }

    /// Group rounds first, then ⌈log₂ #groups⌉ rounds that read from another group.
    #[test]
    fn grouped_barriers_cross_packages_in_the_last_rounds_only() {
        let cases: [(&[usize], usize, usize); 5] = [
            (&[0, 1, 0, 1, 0, 1, 0, 1], 2, 1),
            (&[0, 1, 2, 3, 0, 1, 2, 3], 1, 2),
            (&[0; 8], 3, 0),
            (&[0, 0, 0, 1, 1], 2, 1),
            (&[0, 1, 2], 0, 2),
        ];
        for (groups, inner, outer) in cases {
            let b = Barrier::grouped(groups, WaitPolicy::for_load(1, 1));
            assert_eq!(b.rounds(), inner + outer, "{groups:?}");
            for pid in 0..groups.len() {
                let cross: Vec<usize> = (0..b.rounds())
                    .filter(|&k| groups[b.sources(pid)[k] as usize] != groups[pid])
                    .collect();
                assert_eq!(
                    cross,
                    (inner..inner + outer).collect::<Vec<_>>(),
                    "{groups:?}"
                );
            }
        }
    }

    /// Every process sends a word in each line that one other process alone reads; each reader
    /// gets exactly those words, episode after episode (both parities), and the outbox mark of
    /// the episodes that set it (`Ride::outbox`) without it showing in the flags.
    #[test]
    fn puts_ride_to_the_one_reader_of_a_line() {
        // Some pairs mark their outbox in some episodes, in both parities.
        let marked =
            |from: usize, to: usize, episode: u64| (from + 2 * to) as u64 % 3 == episode % 3;
        let shapes: [&[usize]; 5] = [&[0, 0], &[0; 5], &[0, 1, 0, 1], &[0, 0, 0, 1, 1], &[0; 8]];
        for groups in shapes {
            let b = Barrier::grouped(groups, WaitPolicy::for_load(1, 64));
            let riders = b.rider_rounds();
            let p = groups.len();
            if p == 2 {
                assert_eq!((riders.round(0, 1), riders.round(1, 0)), (0, 0));
            }
            if groups.iter().all(|&g| g == 0) && p.is_power_of_two() {
                // Flat dissemination: i's round-k line is read by i + 2^k alone.
                for k in 0..b.rounds() {
                    assert_eq!(riders.round(0, 1 << k), k as u8);
                }
            }
            std::thread::scope(|s| {
                for pid in 0..p {
                    let (b, riders) = (&b, &riders);
                    s.spawn(move || {
                        let mut me = Member::new(pid);
                        for episode in 0..50u64 {
                            let mut out = vec![Ride::default(); b.rounds()];
                            for d in 0..p {
                                if riders.round(pid, d) != NO_RIDE {
                                    let r = &mut out[riders.round(pid, d) as usize];
                                    r.words[r.len] = (pid * 100 + d) as u64 + episode * 10_000;
                                    r.len += 1;
                                    r.outbox = marked(pid, d, episode);
                                }
                            }
                            let mut inbox = vec![Ride::default(); b.rounds()];
                            let got = b
                                .wait_riding(&mut me, 1, false, &out, &mut inbox, || ())
                                .unwrap();
                            assert_eq!(got.flags, 1, "{groups:?}: the lines' own bits stay");
                            for (k, got) in inbox.iter().enumerate() {
                                let src = b.sources(pid)[k] as usize;
                                if riders.round(src, pid) == k as u8 {
                                    let want = (src * 100 + pid) as u64 + episode * 10_000;
                                    assert_eq!(&got.words[..got.len], &[want], "{groups:?}");
                                    assert_eq!(got.outbox, marked(src, pid, episode));
                                } else {
                                    assert_eq!(got.len, 0, "{groups:?} round {k}");
                                    assert!(!got.outbox, "{groups:?} round {k}");
                                }
                            }
                        }
                    });
                }
            });
        }
    }

    /// Processes sharing CPU sets take turns in the tree's order; pid order where nothing is
    /// shared or everything is.
    #[test]
    fn tree_orders_alternate_the_shared_sets() {
        let sets = |v: &[u32]| v.iter().map(|&c| vec![c]).collect::<Vec<_>>();
        assert_eq!(
            tree_order(&sets(&[0, 0, 0, 1, 1, 1])),
            vec![0, 3, 1, 4, 2, 5]
        );
        assert_eq!(tree_order(&sets(&[0, 1, 0, 1, 0])), vec![0, 1, 2, 3, 4]);
        assert_eq!(tree_order(&sets(&[0, 0, 0, 1, 1])), vec![0, 3, 1, 4, 2]);
        assert_eq!(tree_order(&sets(&[5, 6, 7])), vec![0, 1, 2]);
        assert_eq!(tree_order(&vec![vec![0, 1]; 4]), vec![0, 1, 2, 3]);
        assert_eq!(tree_order(&sets(&[1, 1, 0, 0])), vec![0, 2, 1, 3]);
    }

    /// A tree in another order than pids combines flags and ends like the plain one.
    #[test]
    fn tree_barriers_in_any_order_combine_flags() {
        let p = 40;
        let order: Vec<u32> = (0..p as u32).map(|k| (k * 7 + 3) % p as u32).collect();
        for policy in policies() {
            flags_round_trip_through(&Barrier::tree_in_order(order.clone(), policy), 20);
        }
    }

    #[test]
    #[should_panic(expected = "permutation")]
    fn a_tree_order_must_name_every_pid() {
        let _ = Barrier::tree_in_order(vec![0, 0, 2], WaitPolicy::new(1, 1));
    }

    #[test]
    fn a_hundred_processes() {
        let policy = WaitPolicy::for_load(100, mbsp_cores());
        flags_round_trip(100, 20, policy);
        flags_round_trip_through(&Barrier::tree(100, policy), 20);
    }

    fn mbsp_cores() -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }

    #[test]
    fn abort_wakes_sleeping_waiters() {
        abort_wakes_sleepers_of(Barrier::new(3, SLEEPY));
        abort_wakes_sleepers_of(Barrier::tree(3, SLEEPY));
    }

    fn abort_wakes_sleepers_of(b: Barrier) {
        std::thread::scope(|s| {
            let h: Vec<_> = (0..2)
                .map(|pid| {
                    let b = &b;
                    s.spawn(move || b.wait(&mut Member::new(pid), 0, false))
                })
                .collect();
            std::thread::sleep(std::time::Duration::from_millis(50));
            b.abort();
            for h in h {
                assert_eq!(h.join().unwrap(), Err(Aborted));
            }
        });
        assert_eq!(b.wait(&mut Member::new(2), 0, false), Err(Aborted));
        assert!(b.is_aborted());
    }

    #[test]
    fn single_process_barrier_returns_immediately() {
        let b = Barrier::new(1, WaitPolicy::for_load(1, 1));
        let mut me = Member::new(0);
        for _ in 0..10 {
            assert_eq!(b.wait(&mut me, FLAG_GETS, false).unwrap().flags, FLAG_GETS);
        }
        assert!(b.wait(&mut me, 0, true).unwrap().all_ended);
    }
}
