//! The recording: what each process of a profiled run notes per superstep (its
//! [`Recorder`], in its context), and what the run's processes hand in at their end
//! ([`Sink`]), assembled into a [`Profile`].

use super::{ProcStep, Profile, RegionName, Superstep};
use std::sync::{Mutex, OnceLock};

/// What one process sent to and read from one other process in one superstep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Peer {
    /// Bytes, words and messages put or sent to it.
    pub(crate) out_bytes: u64,
    pub(crate) out_words: u64,
    pub(crate) out_msgs: u64,
    /// Buffered puts and messages to it (requests the sync carries).
    pub(crate) out_reqs: u64,
    /// Bytes and words read from it (gets).
    pub(crate) in_bytes: u64,
    pub(crate) in_words: u64,
    /// Buffered gets from it.
    pub(crate) in_reqs: u64,
    /// The words of those that were copied at once (hpput; hpget and direct_get).
    pub(crate) imm_out_words: u64,
    pub(crate) imm_in_words: u64,
}

impl Peer {
    /// Its counts in a fixed order (the log's and the ranks' wire order).
    pub(crate) fn counts(&self) -> [u64; 9] {
        [
            self.out_bytes,
            self.out_words,
            self.out_msgs,
            self.out_reqs,
            self.in_bytes,
            self.in_words,
            self.in_reqs,
            self.imm_out_words,
            self.imm_in_words,
        ]
    }

    /// The inverse of [`Peer::counts`].
    pub(crate) fn from_counts(c: [u64; 9]) -> Peer {
        Peer {
            out_bytes: c[0],
            out_words: c[1],
            out_msgs: c[2],
            out_reqs: c[3],
            in_bytes: c[4],
            in_words: c[5],
            in_reqs: c[6],
            imm_out_words: c[7],
            imm_in_words: c[8],
        }
    }
}

/// The peers of a process's closed supersteps, in order: each a peer's pid and its counts as
/// LEB128 varints (7 bits a byte, the high bit set on all bytes but a number's last).
///
/// Counts of one superstep are mostly small and mostly zero: a put of a few words to one
/// peer takes 10 bytes here, against 80 as a `(usize, Peer)`, and the log grows into fresh
/// pages, each a fault the profile would count as the program's time.
#[derive(Clone, Debug, Default)]
pub(crate) struct PeerLog {
    bytes: Vec<u8>,
}

impl PeerLog {
    pub(crate) fn push(&mut self, q: usize, c: &Peer) {
        // Ten numbers of at most ten bytes each.
        let mut buf = [0u8; 100];
        let mut n = 0;
        for mut x in std::iter::once(q as u64).chain(c.counts()) {
            while x >= 0x80 {
                buf[n] = (x as u8) | 0x80;
                x >>= 7;
                n += 1;
            }
            buf[n] = x as u8;
            n += 1;
        }
        self.bytes.extend_from_slice(&buf[..n]);
    }

    /// The entries from byte `at` on.
    pub(crate) fn read_from(&self, at: usize) -> PeerReader<'_> {
        PeerReader {
            bytes: &self.bytes,
            at,
        }
    }
}

/// Entries of a [`PeerLog`] read in order; [`PeerReader::at`] says where the next starts.
pub(crate) struct PeerReader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl PeerReader<'_> {
    pub(crate) fn at(&self) -> usize {
        self.at
    }

    /// The next varint; 0 past the end (a log only [`PeerLog::push`] wrote has none cut off).
    fn number(&mut self) -> u64 {
        let mut x = 0u64;
        let mut shift = 0;
        while let Some(&b) = self.bytes.get(self.at) {
            self.at += 1;
            if shift < 64 {
                x |= u64::from(b & 0x7f) << shift;
            }
            shift += 7;
            if b < 0x80 {
                break;
            }
        }
        x
    }
}

impl Iterator for PeerReader<'_> {
    type Item = (usize, Peer);

    fn next(&mut self) -> Option<(usize, Peer)> {
        if self.at >= self.bytes.len() {
            return None;
        }
        let q = self.number() as usize;
        let mut c = [0u64; 9];
        for x in &mut c {
            *x = self.number();
        }
        Some((q, Peer::from_counts(c)))
    }
}

/// One process's record of one superstep: its times and how many entries it added to the
/// recorder's `peers` (one growing log for all supersteps: no allocation per step; a step's
/// peers follow those of the steps before it).
///
/// Kept small because a profiled run writes one per process per superstep into memory it has
/// never touched: each fresh page costs a fault, a cost the profile would otherwise measure as
/// the program's. Single precision keeps seven digits of a time, more than a clock read's
/// jitter at any superstep length.
#[derive(Clone, Debug)]
pub(crate) struct Step {
    /// Seconds of computation, and of the sync that ended it.
    pub(crate) compute: f32,
    pub(crate) sync: f32,
    /// How many peers it communicated with: distinct other processes, fewer than p, and p is
    /// below 2^32 on any machine (`limits::procs_in`).
    pub(crate) peers: u32,
    /// The region innermost-open when the computation ended (index into `Recorder::regions`),
    /// or [`NO_REGION`].
    pub(crate) region: u32,
    /// The records this process declared it receives (`Ctx::declare_incoming`) when the sync
    /// that ended the superstep was a lazy one.
    pub(crate) declared: Option<u64>,
}

// A profiled run writes one per process per superstep: keep it at half a line.
const _: () = assert!(std::mem::size_of::<Step>() == 32);

/// [`Step::region`] when no region was open.
pub(crate) const NO_REGION: u32 = u32::MAX;

impl Step {
    /// The region innermost-open when the computation ended.
    pub(crate) fn region(&self) -> Option<u32> {
        (self.region != NO_REGION).then_some(self.region)
    }
}

/// The clock of profiled runs: the time-stamp counter where it ticks at a constant rate (two
/// reads per superstep cost a fraction of `clock_gettime`'s, which the profile would measure
/// as the program's), else the monotonic clock. Calibrated once per program, at the first
/// profiled run's start.
fn clock() -> &'static quanta::Clock {
    static CLOCK: OnceLock<quanta::Clock> = OnceLock::new();
    CLOCK.get_or_init(quanta::Clock::new)
}

/// The recorder in a profiled process's context.
#[derive(Debug)]
pub(crate) struct Recorder {
    pub(crate) pid: usize,
    pub(crate) p: usize,
    clock: quanta::Clock,
    /// Raw clock readings: the end of the last sync (the computation's start), the start of
    /// the sync under way.
    last: u64,
    sync_start: Option<u64>,
    /// This superstep's counts per peer (reused), and the peers touched (maybe repeated).
    pub(crate) cur: Vec<Peer>,
    pub(crate) touched: Vec<usize>,
    /// The peers of all closed supersteps, in order.
    pub(crate) peers: PeerLog,
    pub(crate) steps: Vec<Step>,
    /// Profiles of the nested runs this process started.
    pub(crate) nested: Vec<Profile>,
    /// The regions this process opened: (parent, name), each (parent, name) once.
    pub(crate) regions: Vec<(Option<u32>, String)>,
    /// The regions open now, innermost last.
    pub(crate) open: Vec<u32>,
    /// Where the process ran (its placement; over ranks, with its node).
    pub(crate) place: String,
    /// The OS indices of the PUs its domain holds (the hardware threads it took turns on with
    /// the processes of the same domain).
    pub(crate) pus: Vec<u32>,
    /// Whether processes sharing a hardware thread took turns on it as coroutines.
    pub(crate) coroutines: bool,
}

impl Recorder {
    pub(crate) fn new(pid: usize, p: usize) -> Recorder {
        let clock = clock().clone();
        Recorder {
            pid,
            p,
            last: clock.raw(),
            clock,
            sync_start: None,
            cur: vec![Peer::default(); p],
            touched: Vec::new(),
            peers: PeerLog::default(),
            steps: Vec::new(),
            nested: Vec::new(),
            regions: Vec::new(),
            open: Vec::new(),
            place: String::new(),
            pus: Vec::new(),
            coroutines: false,
        }
    }

    /// Region `name` opens inside the innermost open one.
    pub(crate) fn region_begin(&mut self, name: &str) {
        let parent = self.open.last().copied();
        let id = match self
            .regions
            .iter()
            .position(|(p, n)| *p == parent && n == name)
        {
            Some(i) => i as u32,
            None => {
                self.regions.push((parent, name.to_string()));
                (self.regions.len() - 1) as u32
            }
        };
        self.open.push(id);
    }

    /// The innermost open region closes.
    pub(crate) fn region_end(&mut self) {
        self.open.pop();
    }

    /// Close the regions opened after the first `depth` ones.
    pub(crate) fn close_to(&mut self, depth: usize) {
        self.open.truncate(depth);
    }

    /// A put or message of `bytes` to `to` (`immediate`: copied now, not by the sync).
    #[inline]
    pub(crate) fn out(&mut self, to: usize, bytes: usize, message: bool, immediate: bool) {
        if to != self.pid && to < self.p {
            let words = bytes.div_ceil(8) as u64;
            let c = self.peer(to);
            c.out_bytes += bytes as u64;
            c.out_words += words;
            c.out_msgs += u64::from(message);
            if immediate {
                c.imm_out_words += words;
            } else {
                c.out_reqs += 1;
            }
        }
    }

    /// An owned message to `to`: its tag is queued as a message's is, its payload never
    /// copied (the receiver reads it where the sender wrote it, in its computation), so the
    /// payload's words count as immediate ones, out of the sync's `h`.
    #[inline]
    pub(crate) fn out_owned(&mut self, to: usize, tag: usize, payload: usize) {
        self.out(to, tag + payload, true, false);
        if to != self.pid && to < self.p {
            let all = (tag + payload).div_ceil(8) as u64;
            self.peer(to).imm_out_words += all - tag.div_ceil(8) as u64;
        }
    }

    /// A get of `bytes` from `from` (`immediate`: copied now, not by the sync).
    #[inline]
    pub(crate) fn get(&mut self, from: usize, bytes: usize, immediate: bool) {
        if from != self.pid && from < self.p {
            let words = bytes.div_ceil(8) as u64;
            let c = self.peer(from);
            c.in_bytes += bytes as u64;
            c.in_words += words;
            if immediate {
                c.imm_in_words += words;
            } else {
                c.in_reqs += 1;
            }
        }
    }

    /// The counts of peer `q`, remembered as touched when they were zero.
    #[inline]
    fn peer(&mut self, q: usize) -> &mut Peer {
        if self.cur[q] == Peer::default() {
            self.touched.push(q);
        }
        &mut self.cur[q]
    }

    /// The sync starts: the superstep's computation ends.
    pub(crate) fn sync_begins(&mut self) {
        self.sync_start = Some(self.clock.raw());
    }

    /// The sync is over (successfully or not): close the superstep (`declared`: the count
    /// this process declared, when the sync was lazy).
    pub(crate) fn sync_ends(&mut self, declared: Option<u64>) {
        let now = self.clock.raw();
        let start = self.sync_start.take().unwrap_or(now);
        let region = self.open.last().copied().unwrap_or(NO_REGION);
        let mut count = 0u32;
        for q in self.touched.drain(..) {
            // A peer touched twice (counts that stayed zero) is taken once.
            let c = std::mem::take(&mut self.cur[q]);
            if c != Peer::default() {
                self.peers.push(q, &c);
                count += 1;
            }
        }
        let seconds = |from, to| self.clock.delta_as_nanos(from, to) as f32 * 1e-9;
        self.steps.push(Step {
            compute: seconds(self.last, start),
            sync: seconds(start, now),
            peers: count,
            region,
            declared,
        });
        self.last = now;
    }

    /// A nested run this process started has ended (in its current superstep).
    pub(crate) fn add_nested(&mut self, mut profile: Profile) {
        profile.started_in = Some(self.steps.len());
        self.nested.push(profile);
    }
}

/// What a run's processes hand in at their end, assembled into a [`Profile`].
#[derive(Debug, Default)]
pub(crate) struct Sink {
    pub(crate) records: Mutex<Vec<Recorder>>,
}

impl Sink {
    pub(crate) fn hand_in(&self, r: Recorder) {
        if let Ok(mut v) = self.records.lock() {
            v.push(r);
        }
    }

    /// The profile of the run of `p` processes started by the process at `path`.
    pub(crate) fn take(&self, p: usize, path: Vec<usize>) -> Profile {
        let mut recs = self
            .records
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default();
        recs.sort_by_key(|r| r.pid);
        // One region table for the run: every process's (parent, name) pairs merged.
        let mut regions: Vec<RegionName> = Vec::new();
        let maps: Vec<Vec<usize>> = recs
            .iter()
            .map(|r| {
                let mut map: Vec<usize> = Vec::with_capacity(r.regions.len());
                for (parent, name) in &r.regions {
                    // A process's parents come before their children.
                    let parent = parent.map(|q| map[q as usize]);
                    let id = regions
                        .iter()
                        .position(|g| g.parent == parent && g.name == *name)
                        .unwrap_or_else(|| {
                            regions.push(RegionName {
                                name: name.clone(),
                                parent,
                            });
                            regions.len() - 1
                        });
                    map.push(id);
                }
                map
            })
            .collect();
        let steps = recs.iter().map(|r| r.steps.len()).max().unwrap_or(0);
        let mut supersteps = Vec::with_capacity(steps);
        // Where each process's peers of superstep `i` start in its log.
        let mut first = vec![0usize; recs.len()];
        let mut mine: Vec<(usize, Peer)> = Vec::new();
        for i in 0..steps {
            let mut procs = vec![ProcStep::default(); p];
            mine.clear();
            for ((r, map), first) in recs.iter().zip(&maps).zip(&mut first) {
                let Some(s) = r.steps.get(i) else { continue };
                let me = &mut procs[r.pid];
                me.compute = f64::from(s.compute);
                me.sync = f64::from(s.sync);
                me.region = s.region().map(|q| map[q as usize]);
                me.declared = s.declared;
                let mut log = r.peers.read_from(*first);
                for (q, c) in log.by_ref().take(s.peers as usize) {
                    me.add(&c, true);
                    mine.push((q, c));
                }
                *first = log.at();
            }
            // The other side of each request.
            for (q, c) in &mine {
                if let Some(them) = procs.get_mut(*q) {
                    them.add(c, false);
                }
            }
            supersteps.push(Superstep { procs });
        }
        let mut places = vec![String::new(); p];
        let mut pus = vec![Vec::new(); p];
        for r in &recs {
            if let Some(place) = places.get_mut(r.pid) {
                place.clone_from(&r.place);
                pus[r.pid].clone_from(&r.pus);
            }
        }
        let coroutines = recs.iter().any(|r| r.coroutines);
        let mut nested: Vec<Profile> = Vec::new();
        for r in recs {
            nested.extend(r.nested);
        }
        Profile {
            p,
            path,
            started_in: None,
            supersteps,
            regions,
            nested,
            places,
            pus,
            coroutines,
        }
    }
}

impl ProcStep {
    /// Counts `c`, the requests of one process to one peer, on the side of the process that
    /// made them (`requester`) or on the peer's.
    pub(super) fn add(&mut self, c: &Peer, requester: bool) {
        // (bytes, words, immediate words) leaving and reaching the requester.
        let out = (c.out_bytes, c.out_words, c.imm_out_words, c.out_reqs);
        let inn = (c.in_bytes, c.in_words, c.imm_in_words, c.in_reqs);
        let (sent, received) = if requester { (out, inn) } else { (inn, out) };
        self.bytes_sent += sent.0;
        self.words_sent += sent.1;
        self.immediate_words_sent += sent.2;
        self.requests_sent += sent.3;
        self.bytes_received += received.0;
        self.words_received += received.1;
        self.immediate_words_received += received.2;
        self.requests_received += received.3;
        if requester {
            self.messages_sent += c.out_msgs;
        } else {
            self.messages_received += c.out_msgs;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn number() -> impl Strategy<Value = u64> {
        // Mostly the small counts of real supersteps, and the edges of every varint length.
        prop_oneof![
            0u64..300,
            any::<u64>(),
            (0u32..64).prop_map(|b| 1u64 << b),
            Just(u64::MAX)
        ]
    }

    proptest! {
        /// The log gives back every entry pushed, in order, from any entry's start on.
        #[test]
        fn peer_log_round_trips(entries in prop::collection::vec(
            (0usize..100_000, prop::array::uniform9(number())), 0..40), from in 0usize..40) {
            let mut log = PeerLog::default();
            let mut starts = Vec::new();
            for (q, c) in &entries {
                starts.push(log.bytes.len());
                log.push(*q, &Peer::from_counts(*c));
            }
            let back: Vec<(usize, [u64; 9])> =
                log.read_from(0).map(|(q, c)| (q, c.counts())).collect();
            prop_assert_eq!(&back, &entries);
            if from < entries.len() {
                let mut r = log.read_from(starts[from]);
                let (q, c) = r.next().unwrap();
                prop_assert_eq!((q, c.counts()), entries[from]);
                prop_assert_eq!(r.at(), starts.get(from + 1).copied().unwrap_or(log.bytes.len()));
            }
        }
    }
}
