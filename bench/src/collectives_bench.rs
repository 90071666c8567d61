//! `mbsp-bench collectives`: every collective of `mbsp_algorithms::collectives` for one word
//! and for large data at p = 1, 2, 4, next to its BSP-predicted time (parameters l, g and
//! g_direct measured in the same run) and next to the same operation written by hand with put +
//! sync, as a user would (registered buffers set up once, outside the timing); then sample sort
//! against the sequential and rayon sorts. The one-word broadcast and all-reduce also run through
//! a `Comm`, with full syncs (the default) and with lazy syncs. Then the crossovers: at p = 2,
//! broadcast, reduce, all-reduce and scan of a few sizes with each algorithm forced, beside
//! the algorithm the plan picks with the parameters in force and its time over the fastest.

use crate::core_bench::{Bulk, mbsp_bulk, mbsp_sync, memcpy};
use crate::stats::{Samples, ns, timed};
use mbsp::{Ctx, Reg};
use mbsp_algorithms::collectives::{Algorithm, Collective, Collectives, Comm};
use mbsp_algorithms::cost::Params;
#[allow(unused_imports)]
use mbsp_tools::{Classify, Error, Result};
use serde_json::{Value, json};
use std::io::Write;

/// Options of `mbsp-bench collectives`.
#[derive(Clone, Debug)]
pub struct Options {
    /// Samples per figure (the median is reported).
    pub samples: usize,
    /// Process counts.
    pub procs: Vec<usize>,
    /// Bytes of the large case (per process for broadcast, reductions and scan; in total for
    /// gather, scatter, all-gather and all-to-all).
    pub large: usize,
    /// Elements of the sort benchmark.
    pub sort_n: usize,
    /// Print JSON instead of the tables.
    pub json: bool,
    /// Write the table as CSV to this file.
    pub csv: Option<String>,
    /// Words per process of the crossover table's sizes.
    pub crossover_words: Vec<usize>,
}

const OPS: [Collective; 8] = [
    Collective::Broadcast,
    Collective::Reduce,
    Collective::AllReduce,
    Collective::ScanInclusive,
    Collective::Gather,
    Collective::Scatter,
    Collective::AllGather,
    Collective::AllToAll,
];

/// The per-process length the cost functions take: the whole buffer for broadcast, reductions
/// and scan; a process's piece for the others.
fn per_process(op: Collective, words: usize, p: usize) -> usize {
    match op {
        Collective::Gather | Collective::Scatter | Collective::AllGather | Collective::AllToAll => {
            (words / p).max(1)
        }
        _ => words,
    }
}

/// Buffers of one benchmark process: its data and, for the hand-written version, a registered
/// receive area of `p` pieces.
struct Bufs {
    data: Vec<u64>,
    recv: Reg<u64>,
    k: usize,
}

fn setup(ctx: &mut Ctx, op: Collective, words: usize) -> mbsp::Result<Bufs> {
    let p = ctx.nprocs();
    let k = per_process(op, words, p);
    let (data_len, recv_len) = match op {
        Collective::Broadcast => (words, words),
        Collective::Reduce | Collective::AllReduce | Collective::ScanInclusive => {
            (words, p * words)
        }
        Collective::Scatter => (if ctx.pid() == 0 { p * k } else { 0 }, k),
        Collective::AllToAll => (p * k, p * k),
        _ => (k, p * k),
    };
    let data = (0..data_len as u64).map(|i| i ^ ctx.pid() as u64).collect();
    let recv = ctx.push_reg(vec![0u64; recv_len])?;
    ctx.sync()?;
    Ok(Bufs { data, recv, k })
}

/// One call of the library collective (through `comm` when given).
fn library(
    ctx: &mut Ctx,
    c: &Collectives,
    comm: Option<&mut Comm>,
    op: Collective,
    b: &mut Bufs,
) -> mbsp::Result<()> {
    let sum = |a: u64, b: u64| a.wrapping_add(b);
    if let Some(comm) = comm {
        return match op {
            Collective::Broadcast => comm.broadcast(ctx, 0, &mut b.data),
            Collective::Reduce => comm.reduce(ctx, 0, &mut b.data, sum),
            Collective::AllReduce => comm.allreduce(ctx, &mut b.data, sum),
            Collective::ScanInclusive => comm.scan_inclusive(ctx, &mut b.data, sum),
            _ => unreachable!("not through a Comm"),
        };
    }
    match op {
        Collective::Broadcast => c.broadcast(ctx, 0, &mut b.data),
        Collective::Reduce => c.reduce(ctx, 0, &mut b.data, sum),
        Collective::AllReduce => c.allreduce(ctx, &mut b.data, sum),
        Collective::ScanInclusive => c.scan_inclusive(ctx, &mut b.data, sum),
        // Large results go back to the pool, as the collectives' docs advise for loops of
        // large ones, and the next call takes its result from there; small ones are freed
        // (the allocator serves them faster than the pool).
        Collective::Gather => {
            let got = c.gather(ctx, 0, &b.data)?;
            got.into_iter().for_each(|r| give_back(ctx, r.into_vec()));
            Ok(())
        }
        Collective::Scatter => {
            let got = c.scatter(ctx, 0, &b.data)?;
            give_back(ctx, got);
            Ok(())
        }
        Collective::AllGather => {
            let got = c.allgather(ctx, &b.data)?;
            give_back(ctx, got.into_vec());
            Ok(())
        }
        Collective::AllToAll => {
            let got = c.alltoall(ctx, &b.data)?;
            give_back(ctx, got);
            Ok(())
        }
        _ => unreachable!("not benchmarked"),
    }
}

/// A result back to the pool if it is large (from 64 KiB, where the collectives take their
/// results from the pool).
fn give_back(ctx: &Ctx, v: Vec<u64>) {
    if v.len() >= 8 << 10 {
        ctx.recycle(v);
    }
}

/// The same operation written with put + sync into a buffer registered beforehand, then the
/// local combination a user would write.
fn by_hand(ctx: &mut Ctx, op: Collective, b: &mut Bufs) -> mbsp::Result<()> {
    let (me, p, k) = (ctx.pid(), ctx.nprocs(), b.k);
    let n = b.data.len();
    match op {
        Collective::Broadcast => {
            if me == 0 {
                for q in 1..p {
                    ctx.put(q, &b.data, &b.recv, 0)?;
                }
            }
        }
        Collective::Reduce => {
            if me != 0 {
                ctx.put(0, &b.data, &b.recv, me * n)?;
            }
        }
        Collective::AllReduce => {
            for q in (0..p).filter(|&q| q != me) {
                ctx.put(q, &b.data, &b.recv, me * n)?;
            }
        }
        Collective::ScanInclusive => {
            for q in me + 1..p {
                ctx.put(q, &b.data, &b.recv, me * n)?;
            }
        }
        Collective::Gather => {
            if me != 0 {
                ctx.put(0, &b.data, &b.recv, me * k)?;
            }
        }
        Collective::Scatter => {
            if me == 0 {
                for q in 1..p {
                    ctx.put(q, &b.data[q * k..(q + 1) * k], &b.recv, 0)?;
                }
            }
        }
        Collective::AllGather => {
            for q in (0..p).filter(|&q| q != me) {
                ctx.put(q, &b.data, &b.recv, me * k)?;
            }
        }
        Collective::AllToAll => {
            for q in (0..p).filter(|&q| q != me) {
                ctx.put(q, &b.data[q * k..(q + 1) * k], &b.recv, me * k)?;
            }
        }
        _ => unreachable!("not benchmarked"),
    }
    ctx.sync()?;
    // The local part of reductions and scans: fold the received pieces into the data.
    let fold_upto = match op {
        Collective::Reduce if me == 0 => p,
        Collective::AllReduce => p,
        Collective::ScanInclusive => me,
        _ => 0,
    };
    if fold_upto > 0 {
        let recv = ctx.local(&b.recv)?;
        for q in (0..fold_upto).filter(|&q| q != me) {
            for (a, &x) in b.data.iter_mut().zip(&recv[q * n..(q + 1) * n]) {
                *a = a.wrapping_add(x);
            }
        }
    }
    Ok(())
}

struct Row {
    op: Collective,
    /// Through a `Comm` (mailbox registered once) rather than the level-1 functions.
    comm: bool,
    /// The `Comm`'s collectives end with lazy syncs (declared counts) rather than full ones.
    lazy: bool,
    p: usize,
    bytes: usize,
    algorithm: Algorithm,
    ours: Samples,
    predicted: f64,
    hand: Samples,
    /// Empty syncs timed in the same run, interleaved with the samples (small data only).
    sync: Option<Samples>,
}

/// Nanoseconds per call, `samples` times, of the library collective and of the hand-written one.
fn measure(
    p: usize,
    op: Collective,
    words: usize,
    c: &Collectives,
    use_comm: bool,
    lazy: bool,
    samples: usize,
) -> (Samples, Samples, Option<Samples>) {
    let iters = if words <= 1024 { 2000 } else { 3 };
    let r = mbsp::run(p, |ctx| {
        let mut b = setup(ctx, op, words)?;
        let mut comm = if use_comm {
            let mut comm = Comm::new(ctx)?;
            comm.set_lazy(lazy);
            Some(comm)
        } else {
            None
        };
        // Samples interleaved, so that a change of the machine's state hits all three alike.
        let (mut ours, mut hand, mut sync) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..samples {
            ours.extend(timed(1, iters, || {
                library(ctx, c, comm.as_mut(), op, &mut b)
            })?);
            hand.extend(timed(1, iters, || by_hand(ctx, op, &mut b))?);
            if words <= 1024 {
                sync.extend(timed(1, iters, || ctx.sync())?);
            }
        }
        let sync = (!sync.is_empty()).then_some(Samples(sync));
        Ok((Samples(ours), Samples(hand), sync))
    })
    .expect("benchmark run");
    r.into_iter().next().expect("pid 0")
}

/// l, l_reg, g and g_direct at `p`, measured now (seconds).
fn params(p: usize, samples: usize, bytes: usize) -> Params {
    let l = Samples(mbsp_sync(p, 20_000, samples)).median() * 1e-9;
    let l_reg = Samples(registering_sync(p, 2_000, samples)).median() * 1e-9;
    let bytes = bytes.min(16 << 20);
    let word = |gbs: f64| 8.0 / (gbs * 1e9);
    let g = word(Samples(mbsp_bulk(p, bytes, 3, samples, Bulk::Put)).median());
    let g_direct = word(Samples(mbsp_bulk(p, bytes, 3, samples, Bulk::Get)).median());
    // First touch of fresh memory: allocate and fill, per word.
    let words = bytes / 8;
    let fresh = Samples::collect(samples, || {
        let t = std::time::Instant::now();
        let mut v: Vec<u64> = Vec::with_capacity(words);
        v.resize(words, 1);
        std::hint::black_box(&v);
        t.elapsed().as_secs_f64() / words as f64
    })
    .median();
    // Measured at the size of the large case: in the caches or beyond them as it is.
    Params {
        g,
        g_direct,
        g_far: g,
        g_direct_far: g_direct,
        l,
        l_reg,
        fresh,
        ..Params::DEFAULT
    }
}

/// Nanoseconds per superstep that registers or deregisters one slot (push_reg, sync, pop_reg,
/// sync: half of one iteration), per sample.
fn registering_sync(p: usize, iters: usize, samples: usize) -> Vec<f64> {
    let per_pair = mbsp::run(p, |ctx| {
        timed(samples, iters, || {
            let r = ctx.push_reg_empty::<u64>()?;
            ctx.sync()?;
            ctx.pop_reg(&r)?;
            ctx.sync()
        })
    })
    .expect("benchmark run")
    .swap_remove(0);
    per_pair.into_iter().map(|ns| ns / 2.0).collect()
}

fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}

/// Run the benchmark; print tables (or JSON) on stdout and progress on stderr: the
/// measurements (every collective at every p), the targets at p = 2, the CSV file, then the
/// JSON or the tables with the sample sort and the targets.
pub fn run(o: &Options) -> Result<()> {
    if let Some(path) = &o.csv {
        crate::spmv_bench::check_output("--csv", std::path::Path::new(path))?;
    }
    let samples = o.samples.max(1);
    let (rows, levels) = measure_all(o, samples);
    let memcpy_gbs = Samples(memcpy(1, o.large, 3, samples)).median();
    let targets = Targets::of(&rows, memcpy_gbs);
    let cross = crossovers(&o.crossover_words, samples);
    if let Some(path) = &o.csv {
        write_csv(path, &rows).map_err(|e| Error::io("--csv").with_source(e))?;
    }
    if o.json {
        let sort = sample_sort(o, samples);
        let j = json!({
            "machine": crate::machine::describe(),
            "samples": samples,
            "params": levels.iter().map(|(p, prm)| json!({
                "p": p, "l_s": prm.l, "g_s_per_word": prm.g, "g_direct_s_per_word": prm.g_direct,
                "fresh_s_per_word": prm.fresh,
            })).collect::<Vec<_>>(),
            "memcpy_gbs": memcpy_gbs,
            "rows": rows.iter().map(|r| json!({
                "op": r.op.name(), "comm": r.comm, "lazy": r.lazy, "p": r.p, "bytes": r.bytes,
                "algorithm": format!("{:?}", r.algorithm),
                "ns": r.ours.median(), "predicted_ns": r.predicted, "put_sync_ns": r.hand.median(),
                "empty_sync_ns": r.sync.as_ref().map(Samples::median),
            })).collect::<Vec<_>>(),
            "targets": {
                "allreduce_one_word_over_empty_sync_p2": targets.allreduce,
                "allreduce_one_word_full_syncs_over_empty_sync_p2": targets.allreduce_full,
                "allreduce_one_word_level1_over_empty_sync_p2": targets.allreduce_level1,
                "put_sync_one_word_over_empty_sync_p2": targets.hand,
                "broadcast_large_share_of_memcpy_p2": targets.broadcast_share,
            },
            "sort": sort,
            "crossover": {
                "p": 2,
                "params": mbsp::params::source().to_string(),
                "rows": cross.iter().map(|c| json!({
                    "op": c.op.name(), "words": c.words,
                    "ns": c.times.iter().map(|(a, t)| (format!("{a:?}"), json!(t)))
                        .collect::<serde_json::Map<_, _>>(),
                    "planned": format!("{:?}", c.planned),
                    "planned_over_fastest": c.planned_over_fastest(),
                })).collect::<Vec<_>>(),
            },
        });
        println!("{j:#}");
        return Ok(());
    }
    print_tables(&rows, &levels, samples);
    print_crossovers(&cross);
    let sort = sample_sort(o, samples);
    print_targets(o, &targets, memcpy_gbs, &sort);
    Ok(())
}

/// Measuring: the BSP parameters at each p, then every collective for one word and for the
/// large size (the one-word broadcast and all-reduce also through a `Comm`, with lazy and with
/// full syncs). The rows, and the parameters per p.
fn measure_all(o: &Options, samples: usize) -> (Vec<Row>, Vec<(usize, Params)>) {
    let mut rows = Vec::new();
    let mut levels = Vec::new();
    for &p in &o.procs {
        eprintln!("collectives: measuring l, g, g_direct at p = {p}");
        let prm = params(p, samples, o.large);
        levels.push((p, prm));
        let c = Collectives::default().params(prm);
        for words in [1, o.large / 8] {
            let through_comm = [Collective::Broadcast, Collective::AllReduce];
            let cases = OPS.iter().map(|&op| (op, false, false)).chain(
                through_comm
                    .iter()
                    .filter(|_| words == 1)
                    .flat_map(|&op| [(op, true, true), (op, true, false)]),
            );
            for (op, comm, lazy) in cases {
                let via = via(comm, lazy);
                eprintln!(
                    "collectives: {}{via} p = {p}, {}",
                    op.name(),
                    size(words * 8)
                );
                let n = per_process(op, words, p);
                let (algorithm, predicted) = if comm {
                    // One superstep of puts into the mailbox.
                    (Algorithm::Messages, prm.l + (p - 1) as f64 * prm.g)
                } else {
                    c.plan(op, p, n, 8)
                };
                let (ours, hand, sync) = measure(p, op, words, &c, comm, lazy, samples);
                rows.push(Row {
                    op,
                    comm,
                    lazy,
                    p,
                    bytes: words * 8,
                    algorithm,
                    ours,
                    predicted: predicted * 1e9,
                    hand,
                    sync,
                });
            }
        }
    }
    (rows, levels)
}

/// The figures of the targets at p = 2 (`None` where the row was not measured).
struct Targets {
    /// One-word all-reduce through a `Comm` with lazy syncs, over the empty sync.
    allreduce: Option<f64>,
    /// The same with full syncs.
    allreduce_full: Option<f64>,
    /// The level-1 all-reduce of one word, over the empty sync.
    allreduce_level1: Option<f64>,
    /// The hand-written one-word all-reduce (put + sync), over the empty sync.
    hand: Option<f64>,
    /// The large broadcast's rate as a share of memcpy's.
    broadcast_share: Option<f64>,
}

impl Targets {
    /// The targets' figures from the measured `rows` and memcpy's rate.
    fn of(rows: &[Row], memcpy_gbs: f64) -> Targets {
        let find = |op: Collective, small: bool, comm: bool, lazy: bool| {
            rows.iter().find(|r| {
                r.op == op
                    && r.p == 2
                    && (r.bytes == 8) == small
                    && r.comm == comm
                    && r.lazy == lazy
            })
        };
        // Ratios to the empty sync measured in the same run as the row.
        let over_sync = |r: Option<&Row>, hand: bool| {
            r.and_then(|r| {
                let s = r.sync.as_ref()?.median();
                Some(
                    if hand {
                        r.hand.median()
                    } else {
                        r.ours.median()
                    } / s,
                )
            })
        };
        Targets {
            allreduce: over_sync(find(Collective::AllReduce, true, true, true), false),
            allreduce_full: over_sync(find(Collective::AllReduce, true, true, false), false),
            allreduce_level1: over_sync(find(Collective::AllReduce, true, false, false), false),
            hand: over_sync(find(Collective::AllReduce, true, true, true), true),
            broadcast_share: find(Collective::Broadcast, false, false, false)
                .map(|r| r.bytes as f64 / r.ours.median() / memcpy_gbs),
        }
    }
}

/// The sample sort benchmark, if `--sort-n` is not 0 (its table printed unless JSON).
fn sample_sort(o: &Options, samples: usize) -> Value {
    if o.sort_n > 0 {
        eprintln!("collectives: sample sort of {} u64", o.sort_n);
        crate::sort_bench::run(o.sort_n, &[2], samples, !o.json)
    } else {
        Value::Null
    }
}

/// The tables: the parameters per p, then one row per collective, size and p.
fn print_tables(rows: &[Row], levels: &[(usize, Params)], samples: usize) {
    println!("mbsp-bench collectives: {}", crate::machine::describe());
    println!(
        "{samples} samples per figure; shown: median [min–max]; predicted = BSP cost with l, g, \
         g_direct measured in this run; put+sync = the same operation written by hand; \
         mbsp/sync = against empty syncs timed in the same run, interleaved"
    );
    for (p, prm) in levels {
        println!(
            "  p = {p}: l = {}, g = {:.2} ns/word (puts), g_direct = {:.2} ns/word (direct gets), \
             fresh memory {:.2} ns/word",
            ns(prm.l * 1e9),
            prm.g * 1e9,
            prm.g_direct * 1e9,
            prm.fresh * 1e9
        );
    }
    println!(
        "\n  {:<22} {:>2} {:>7} {:<9} {:<30} {:>11} {:>9} {:<30} {:>10} {:>10}",
        "operation",
        "p",
        "size",
        "algorithm",
        "mbsp",
        "predicted",
        "meas/pred",
        "put+sync by hand",
        "hand/mbsp",
        "mbsp/sync"
    );
    for r in rows {
        println!(
            "  {:<22} {:>2} {:>7} {:<9} {:<30} {:>11} {:>9.2} {:<30} {:>10.2} {:>10}",
            format!("{}{}", r.op.name(), via(r.comm, r.lazy)),
            r.p,
            size(r.bytes),
            format!("{:?}", r.algorithm),
            r.ours.show(ns),
            ns(r.predicted),
            r.ours.median() / r.predicted,
            r.hand.show(ns),
            r.hand.median() / r.ours.median(),
            r.sync.as_ref().map_or(String::new(), |s| format!(
                "{:.2}",
                r.ours.median() / s.median()
            )),
        );
    }
}

/// One size of one operation at p = 2: each of its algorithms forced, and the plan's choice.
struct Crossover {
    op: Collective,
    words: usize,
    /// Median nanoseconds per call of each algorithm.
    times: Vec<(Algorithm, f64)>,
    /// What `Collectives::plan` picks with the parameters in force.
    planned: Algorithm,
}

impl Crossover {
    /// The planned algorithm's time over the fastest one's.
    fn planned_over_fastest(&self) -> f64 {
        let of = |a: Algorithm| {
            self.times
                .iter()
                .find(|t| t.0 == a)
                .map_or(f64::NAN, |t| t.1)
        };
        let fastest = self.times.iter().map(|t| t.1).fold(f64::INFINITY, f64::min);
        of(self.planned) / fastest
    }
}

/// The crossover table: broadcast, reduce, all-reduce and inclusive scan of u64 sums at p = 2
/// for each of `sizes` (words per process), each algorithm forced, its buffer written by its
/// owner before every call (as a program's data would be).
fn crossovers(sizes: &[usize], samples: usize) -> Vec<Crossover> {
    let ops = [
        Collective::Broadcast,
        Collective::Reduce,
        Collective::AllReduce,
        Collective::ScanInclusive,
    ];
    let mut out = Vec::new();
    for op in ops {
        for &words in sizes {
            eprintln!(
                "mbsp-bench collectives: crossover, {} of {words} words",
                op.name()
            );
            let algorithms: &[Algorithm] = match op {
                Collective::Broadcast => {
                    &[Algorithm::Messages, Algorithm::Direct, Algorithm::TwoPhase]
                }
                _ => &[Algorithm::Messages, Algorithm::TwoPhase],
            };
            let times = algorithms
                .iter()
                .map(|&a| (a, Samples(forced(op, a, words, samples)).median()))
                .collect();
            let planned = Collectives::default().plan(op, 2, words, 8).0;
            out.push(Crossover {
                op,
                words,
                times,
                planned,
            });
        }
    }
    out
}

/// Nanoseconds per call of `op` by `algorithm` on `words` u64s per process at p = 2, per
/// sample (pid 0's).
fn forced(op: Collective, algorithm: Algorithm, words: usize, samples: usize) -> Vec<f64> {
    let c = Collectives::default().algorithm(algorithm);
    let iters = (1_000_000 / (words + 200)).clamp(2, 5000);
    mbsp::run(2, |ctx| {
        let mut b: Vec<u64> = (0..words as u64).collect();
        timed(samples, iters, || {
            // Every cache line of the data written by its owner (one word of eight: the rest
            // of the call is what is timed).
            for x in b.iter_mut().step_by(8) {
                *x = x.wrapping_add(1);
            }
            match op {
                Collective::Broadcast => c.broadcast(ctx, 0, &mut b),
                Collective::Reduce => c.reduce(ctx, 0, &mut b, u64::wrapping_add),
                Collective::AllReduce => c.allreduce(ctx, &mut b, u64::wrapping_add),
                _ => c.scan_inclusive(ctx, &mut b, u64::wrapping_add),
            }
        })
    })
    .expect("benchmark run")
    .swap_remove(0)
}

/// The crossover table.
fn print_crossovers(cross: &[Crossover]) {
    println!(
        "\ncrossovers at p = 2 (u64 sums, each algorithm forced; every line of the buffer \
         written by its owner before each call; planned = Collectives::plan with the parameters \
         in force: {})",
        mbsp::params::source()
    );
    println!(
        "  {:<15} {:>8} {:>12} {:>12} {:>12} {:<9} {:>16}",
        "operation", "words", "Messages", "TwoPhase", "Direct", "planned", "planned/fastest"
    );
    for c in cross {
        let of = |a: Algorithm| {
            c.times
                .iter()
                .find(|t| t.0 == a)
                .map_or(String::new(), |t| ns(t.1))
        };
        println!(
            "  {:<15} {:>8} {:>12} {:>12} {:>12} {:<9} {:>16.2}",
            c.op.name(),
            c.words,
            of(Algorithm::Messages),
            of(Algorithm::TwoPhase),
            of(Algorithm::Direct),
            format!("{:?}", c.planned),
            c.planned_over_fastest()
        );
    }
}

/// The targets at p = 2, each with its verdict (the sort's from its JSON figures).
fn print_targets(o: &Options, t: &Targets, memcpy_gbs: f64, sort: &Value) {
    println!("\ntargets at p = 2");
    // Issue 42 item 3: the `Comm` one-word all-reduce (full syncs, its default) at p = 2 at
    // most this many empty syncs. (Issue 25's 1.0 for the lazy form ended blocked: at p = 2 a
    // sync is one cache line each way, and the exchange alone costs more.)
    const COMM_TARGET: f64 = 1.3;
    if let Some(x) = t.allreduce_full {
        println!(
            "  all-reduce of one word (Comm) / empty sync: {x:.2} (target <= {COMM_TARGET}: {}); \
             with lazy syncs: {:.2}; one-word put + sync by hand / empty sync: {:.2}; level-1 \
             allreduce / empty sync: {:.2}",
            verdict(x <= COMM_TARGET),
            t.allreduce.unwrap_or(f64::NAN),
            t.hand.unwrap_or(f64::NAN),
            t.allreduce_level1.unwrap_or(f64::NAN),
        );
    }
    if let Some(x) = t.broadcast_share {
        println!(
            "  broadcast of {}: {:.2} GB/s = {:.0}% of memcpy ({memcpy_gbs:.2} GB/s) (target >= 40%: {})",
            size(o.large),
            x * memcpy_gbs,
            100.0 * x,
            verdict(x >= 0.4)
        );
    }
    if let Some(row) = sort["rows"].as_array().and_then(|r| r.first()) {
        let (speedup, vs_rayon) = (
            row["speedup_over_sequential"].as_f64().unwrap_or(f64::NAN),
            row["par_sort_over_rayon"].as_f64().unwrap_or(f64::NAN),
        );
        println!(
            "  sample sort of {} u64: {speedup:.2}x sequential sort_unstable (target >= 1.6: {}), \
             {vs_rayon:.2} of rayon's par_sort_unstable time (target <= 1: {})",
            o.sort_n,
            verdict(speedup >= 1.6),
            verdict(vs_rayon <= 1.0)
        );
    }
}

/// How a row's collective ran, as the table names it.
fn via(comm: bool, lazy: bool) -> &'static str {
    match (comm, lazy) {
        (false, _) => "",
        (true, true) => " (Comm)",
        (true, false) => " (Comm, full)",
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

fn write_csv(path: &str, rows: &[Row]) -> std::io::Result<()> {
    crate::whole_file::write(std::path::Path::new(path), |f| {
        writeln!(
            f,
            "op,comm,lazy,p,bytes,algorithm,ns,predicted_ns,put_sync_ns,empty_sync_ns"
        )?;
        for r in rows {
            writeln!(
                f,
                "{},{},{},{},{},{:?},{:.1},{:.1},{:.1},{}",
                r.op.name(),
                r.comm,
                r.lazy,
                r.p,
                r.bytes,
                r.algorithm,
                r.ours.median(),
                r.predicted,
                r.hand.median(),
                r.sync
                    .as_ref()
                    .map_or(String::new(), |s| format!("{:.1}", s.median()))
            )?;
        }
        Ok(())
    })
}
