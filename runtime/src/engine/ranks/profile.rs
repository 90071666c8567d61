//! The profile of a run over ranks: every rank's superstep records (and the profiles of the
//! nested runs it started) gathered to every rank, then assembled as for a thread run.

use super::wire::all_gather_words;
use crate::profile::record::{NO_REGION, Peer, Recorder, Sink, Step};
use crate::profile::{ProcStep, Profile, RegionName, Superstep};
use mpi::topology::SimpleCommunicator;

/// Collective over `comm` (the run's ranks): the profile of the run of `p` processes whose
/// records this rank's `sink` holds (its own process's).
pub(super) fn gather(comm: &SimpleCommunicator, sink: &Sink, p: usize) -> Profile {
    let mine = std::mem::take(&mut *sink.records.lock().unwrap_or_else(|e| e.into_inner()));
    let mut w = Vec::new();
    w.push(mine.len() as u64);
    for r in &mine {
        encode_recorder(r, &mut w);
    }
    let all = Sink::default();
    for words in all_gather_words(comm, &w) {
        let mut at = 1;
        for _ in 0..words[0] {
            all.hand_in(decode_recorder(&words, &mut at));
        }
    }
    all.take(p, Vec::new())
}

fn f64_word(x: f64) -> u64 {
    x.to_bits()
}

/// An optional index as a word (`u64::MAX`: none).
fn opt_word(x: Option<usize>) -> u64 {
    x.map_or(u64::MAX, |x| x as u64)
}

fn word_opt(w: u64) -> Option<usize> {
    (w != u64::MAX).then_some(w as usize)
}

/// A declared count ([`ProcStep::declared`]) as two words: whether there is one, and it.
fn declared_words(d: Option<u64>) -> [u64; 2] {
    [u64::from(d.is_some()), d.unwrap_or(0)]
}

fn words_declared(present: u64, count: u64) -> Option<u64> {
    (present != 0).then_some(count)
}

/// A string as its length in bytes, then its bytes packed 8 to a word.
fn encode_str(text: &str, w: &mut Vec<u64>) {
    w.push(text.len() as u64);
    for chunk in text.as_bytes().chunks(8) {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        w.push(u64::from_le_bytes(b));
    }
}

fn decode_str(w: &[u64], at: &mut usize) -> String {
    let len = w[*at] as usize;
    *at += 1;
    let words = len.div_ceil(8);
    let bytes: Vec<u8> = w[*at..*at + words]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .take(len)
        .collect();
    *at += words;
    // Region names come from `&str`s: valid UTF-8.
    String::from_utf8_lossy(&bytes).into_owned()
}

fn encode_recorder(r: &Recorder, w: &mut Vec<u64>) {
    w.push(r.regions.len() as u64);
    for (parent, name) in &r.regions {
        w.push(opt_word(parent.map(|x| x as usize)));
        encode_str(name, w);
    }
    encode_str(&r.place, w);
    w.extend_from_slice(&[r.pid as u64, r.p as u64, r.steps.len() as u64]);
    let mut log = r.peers.read_from(0);
    for s in &r.steps {
        w.extend_from_slice(&[
            f64_word(f64::from(s.compute)),
            f64_word(f64::from(s.sync)),
            opt_word(s.region().map(|x| x as usize)),
        ]);
        w.extend_from_slice(&declared_words(s.declared));
        w.push(u64::from(s.peers));
        for (q, c) in log.by_ref().take(s.peers as usize) {
            w.push(q as u64);
            w.extend_from_slice(&c.counts());
        }
    }
    w.push(r.nested.len() as u64);
    for n in &r.nested {
        encode_profile(n, w);
    }
}

fn decode_recorder(w: &[u64], at: &mut usize) -> Recorder {
    let mut regions = Vec::new();
    let count = w[*at];
    *at += 1;
    for _ in 0..count {
        let parent = word_opt(w[*at]).map(|x| x as u32);
        *at += 1;
        regions.push((parent, decode_str(w, at)));
    }
    let place = decode_str(w, at);
    let mut next = || {
        *at += 1;
        w[*at - 1]
    };
    let (pid, p, steps) = (next() as usize, next() as usize, next());
    let mut r = Recorder::new(pid, p);
    r.regions = regions;
    r.place = place;
    for _ in 0..steps {
        let (compute, sync) = (f64::from_bits(next()), f64::from_bits(next()));
        let region = word_opt(next()).map(|x| x as u32);
        let declared = words_declared(next(), next());
        let count = next();
        for _ in 0..count {
            let q = next() as usize;
            let c = Peer::from_counts(std::array::from_fn(|_| next()));
            r.peers.push(q, &c);
        }
        r.steps.push(Step {
            compute: compute as f32,
            sync: sync as f32,
            peers: count as u32,
            region: region.unwrap_or(NO_REGION),
            declared,
        });
    }
    let nested = w[*at];
    *at += 1;
    for _ in 0..nested {
        r.nested.push(decode_profile(w, at));
    }
    r
}

fn encode_profile(pr: &Profile, w: &mut Vec<u64>) {
    w.push(pr.regions.len() as u64);
    for g in &pr.regions {
        w.push(opt_word(g.parent));
        encode_str(&g.name, w);
    }
    w.push(pr.places.len() as u64);
    for place in &pr.places {
        encode_str(place, w);
    }
    w.push(pr.p as u64);
    w.push(pr.path.len() as u64);
    w.extend(pr.path.iter().map(|&x| x as u64));
    w.push(opt_word(pr.started_in));
    w.push(pr.supersteps.len() as u64);
    for s in &pr.supersteps {
        w.push(s.procs.len() as u64);
        for c in &s.procs {
            w.extend_from_slice(&[
                f64_word(c.compute),
                f64_word(c.sync),
                c.bytes_sent,
                c.bytes_received,
                c.words_sent,
                c.words_received,
                c.messages_sent,
                c.messages_received,
                c.immediate_words_sent,
                c.immediate_words_received,
                c.requests_sent,
                c.requests_received,
                opt_word(c.region),
            ]);
            w.extend_from_slice(&declared_words(c.declared));
        }
    }
    w.push(pr.nested.len() as u64);
    for n in &pr.nested {
        encode_profile(n, w);
    }
}

fn decode_profile(w: &[u64], at: &mut usize) -> Profile {
    let mut regions = Vec::new();
    let count = w[*at];
    *at += 1;
    for _ in 0..count {
        let parent = word_opt(w[*at]);
        *at += 1;
        let name = decode_str(w, at);
        regions.push(RegionName { name, parent });
    }
    let count = w[*at] as usize;
    *at += 1;
    let places = (0..count).map(|_| decode_str(w, at)).collect();
    let mut next = || {
        *at += 1;
        w[*at - 1]
    };
    let p = next() as usize;
    let path = (0..next()).map(|_| next() as usize).collect();
    let started_in = word_opt(next());
    let mut supersteps = Vec::new();
    for _ in 0..next() {
        let procs = (0..next())
            .map(|_| ProcStep {
                compute: f64::from_bits(next()),
                sync: f64::from_bits(next()),
                bytes_sent: next(),
                bytes_received: next(),
                words_sent: next(),
                words_received: next(),
                messages_sent: next(),
                messages_received: next(),
                immediate_words_sent: next(),
                immediate_words_received: next(),
                requests_sent: next(),
                requests_received: next(),
                region: word_opt(next()),
                declared: words_declared(next(), next()),
            })
            .collect();
        supersteps.push(Superstep { procs });
    }
    let nested_count = w[*at];
    *at += 1;
    let nested = (0..nested_count).map(|_| decode_profile(w, at)).collect();
    Profile {
        p,
        path,
        started_in,
        supersteps,
        regions,
        nested,
        places,
        pus: Vec::new(),
        coroutines: false,
    }
}
