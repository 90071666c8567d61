//! The recording: what each process of a profiled run notes per superstep (its
//! [`Recorder`], in its context), and what the run's processes hand in at their end
//! ([`Sink`]), assembled into a [`Profile`].

use super::{ProcStep, Profile, RegionName, Superstep};
use std::sync::Mutex;
use std::time::Instant;

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

/// One process's record of one superstep: the range of the recorder's `peers` that holds the
/// peers it communicated with (one growing list for all supersteps: no allocation per step).
#[derive(Clone, Debug)]
pub(crate) struct Step {
    pub(crate) compute: f64,
    pub(crate) sync: f64,
    pub(crate) peers: std::ops::Range<usize>,
    /// The region innermost-open when the computation ended (index into `Recorder::regions`).
    pub(crate) region: Option<u32>,
    /// The records this process declared it receives (`Ctx::declare_incoming`) when the sync
    /// that ended the superstep was a lazy one.
    pub(crate) declared: Option<u64>,
}

/// The recorder in a profiled process's context.
#[derive(Debug)]
pub(crate) struct Recorder {
    pub(crate) pid: usize,
    pub(crate) p: usize,
    pub(crate) last: Instant,
    pub(crate) sync_start: Option<Instant>,
    /// This superstep's counts per peer (reused), and the peers touched (maybe repeated).
    pub(crate) cur: Vec<Peer>,
    pub(crate) touched: Vec<usize>,
    /// The peers of all closed supersteps, in order.
    pub(crate) peers: Vec<(usize, Peer)>,
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
        Recorder {
            pid,
            p,
            last: Instant::now(),
            sync_start: None,
            cur: vec![Peer::default(); p],
            touched: Vec::new(),
            peers: Vec::new(),
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
        self.sync_start = Some(Instant::now());
    }

    /// The sync is over (successfully or not): close the superstep (`declared`: the count
    /// this process declared, when the sync was lazy).
    pub(crate) fn sync_ends(&mut self, declared: Option<u64>) {
        let now = Instant::now();
        let start = self.sync_start.take().unwrap_or(now);
        let region = self.open.last().copied();
        let first = self.peers.len();
        for q in self.touched.drain(..) {
            // A peer touched twice (counts that stayed zero) is taken once.
            let c = std::mem::take(&mut self.cur[q]);
            if c != Peer::default() {
                self.peers.push((q, c));
            }
        }
        self.steps.push(Step {
            compute: start.duration_since(self.last).as_secs_f64(),
            sync: now.duration_since(start).as_secs_f64(),
            peers: first..self.peers.len(),
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
        for i in 0..steps {
            let mut procs = vec![ProcStep::default(); p];
            for (r, map) in recs.iter().zip(&maps) {
                let Some(s) = r.steps.get(i) else { continue };
                let me = &mut procs[r.pid];
                me.compute = s.compute;
                me.sync = s.sync;
                me.region = s.region.map(|q| map[q as usize]);
                me.declared = s.declared;
                for (_, c) in &r.peers[s.peers.clone()] {
                    me.add(c, true);
                }
            }
            // The other side of each request.
            for r in &recs {
                let Some(s) = r.steps.get(i) else { continue };
                for (q, c) in &r.peers[s.peers.clone()] {
                    procs[*q].add(c, false);
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
