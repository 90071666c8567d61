//! Randomised BSP sample sort (BSPlib paper §5.3), with bulk synchronous message passing.
//!
//! The paper's algorithm: choose `p - 1` splitter keys from a sample of the input, send every
//! key to the process of its bucket (BSMP: irregular communication), and let every process sort
//! its bucket. This module keeps that structure and the BSMP exchange, and orders the steps so
//! that no pass over the data is spent on partitioning, and each part is built in the memory
//! that held the process's input (memory not touched before costs a page fault per page):
//!
//! 1. **Superstep 0.** Every process sorts its `n_q` local items (`sort_unstable_by`), takes
//!    `s_q` *regular* samples from them — the last item of each of `s_q` equal chunks, so each
//!    sample stands for the `≈ n_q / s_q` items of its chunk — and sends them to every other
//!    process. `s_q = min(n_q, clamp(n_q / 4p, 32, 1024))`: the paper's oversampling ratio
//!    `r`, bounded so that the samples never cost more than a quarter of the data.
//! 2. **Superstep 1.** Every process merges the same sample set and picks the same `p - 1`
//!    splitters: the samples whose estimated rank (the items the samples up to them stand for)
//!    is nearest to `N/p, 2N/p, ...`. Because its data is sorted, each bucket is a contiguous
//!    range found by one binary search per splitter; bucket `j` is sent to process `j` as
//!    **one** message. Its own bucket stays where it is.
//! 3. **Superstep 2.** Every process merges the `p` sorted runs it has — its own bucket and
//!    the messages, read in place — into its part of the output, in the memory that held its
//!    input (two-way merges; `⌈log₂(p - 1)⌉` passes first merge the messages among themselves
//!    when `p > 2`). The merge runs in place, from the back, after moving the own bucket to the
//!    front (or from the front, with the bucket at the back), which is safe because the next
//!    write never lands on an own item not yet read.
//!
//! Keys are ordered by `(key, source process, position in the source's sorted data)`, which is
//! unique, so duplicates are split like any other keys: an input of `N` equal keys ends with
//! `≈ N/p` on each process. Splitting is deterministic (regular rather than random sampling,
//! as in Shi and Schaeffer's PSRS): the paper's "balanced with high probability" becomes a bound
//! for every input — a part holds at most `N/p + 4 Σ_q ⌈n_q / s_q⌉` items, i.e. within
//! `4N/1024 ≈ 0.4 %` of `N` of the mean when the inputs are large, and far closer in practice.
//!
//! **BSP cost** (`p > 1`; `n = max n_q` items per process before and `m` after, `m ≤ N/p +
//! 4N/s`; `s` samples per process; `g` per item and `l` per superstep):
//!
//! | superstep | local work | h-relation (items) |
//! |---|---|---|
//! | 0: sort, sample | `O(n log n)` comparisons | `(p - 1) s` |
//! | 1: splitters, cut | `O(ps log p + p log n)` | `max(n, m)` (one message per destination) |
//! | 2: merge | `O(m log p)` | — |
//!
//! i.e. `T = O((N/p) log N + ps log p) + g·(max(n, m) + ps) + 2l`. [`par_sort`] writes the part
//! straight into the caller's slice and adds one superstep that moves only the imbalance:
//! `h ≤ |m - N/p|`, one more `l`. With `p = 1` nothing is communicated and no superstep is
//! spent.
//!
//! **BSPlib level-1 rules.** [`sample_sort`] is collective; it syncs twice. It sets the tag size
//! it needs and gives the caller's back (the size in force when it was called is in force when
//! it returns; a change the caller requested in the same superstep, not in force yet, is
//! overridden), moves every message it sent out of the queue, and registers nothing. It must
//! not be called with messages of the caller's own in flight (sent in the same superstep, before
//! the call): they would arrive among the sort's samples, and are reported as malformed.

use mbsp::Ctx;
use std::borrow::Cow;
use std::cmp::Ordering;

/// Element types sample sort can order: a total order (floats by `f64::total_cmp`: -0.0 < +0.0,
/// NaN last by sign bit rules).
///
/// Implemented for every primitive integer type, `f32` and `f64`. A user type implements it by
/// choosing the key; items whose keys compare `Equal` may end in any order.
///
/// ```
/// use mbsp_algorithms::sort::{SortKey, par_sort};
/// use std::cmp::Ordering;
///
/// #[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
/// #[repr(C)]
/// struct Particle {
///     cell: u32,
///     mass: f32,
/// }
///
/// impl SortKey for Particle {
///     fn key_cmp(&self, other: &Self) -> Ordering {
///         self.cell.cmp(&other.cell)
///     }
/// }
///
/// let mut ps: Vec<Particle> = (0..1000u32)
///     .map(|i| Particle { cell: (i * 7919) % 100, mass: i as f32 })
///     .collect();
/// par_sort(&mut ps, 3)?;
/// assert!(ps.windows(2).all(|w| w[0].cell <= w[1].cell));
/// assert_eq!((-0.0f64).key_cmp(&0.0), Ordering::Less); // floats: the total order
/// assert_eq!(f64::NAN.key_cmp(&f64::INFINITY), Ordering::Greater);
/// # Ok::<(), mbsp::Error>(())
/// ```
pub trait SortKey: bytemuck::Pod + Send + Sync {
    /// The total order of the sort.
    ///
    /// ```
    /// use mbsp_algorithms::sort::SortKey;
    /// use std::cmp::Ordering;
    /// assert_eq!(3u64.key_cmp(&7), Ordering::Less);
    /// assert_eq!((-0.0f64).key_cmp(&0.0), Ordering::Less); // unlike `-0.0 == 0.0`
    /// assert_eq!((-f64::NAN).key_cmp(&f64::NEG_INFINITY), Ordering::Less);
    /// ```
    fn key_cmp(&self, other: &Self) -> Ordering;
}

macro_rules! ord_keys {
    ($($t:ty),*) => {$(
        impl SortKey for $t {
            #[inline]
            fn key_cmp(&self, other: &Self) -> Ordering {
                self.cmp(other)
            }
        }
    )*};
}
ord_keys!(
    u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize
);

impl SortKey for f32 {
    #[inline]
    fn key_cmp(&self, other: &Self) -> Ordering {
        self.total_cmp(other)
    }
}

impl SortKey for f64 {
    #[inline]
    fn key_cmp(&self, other: &Self) -> Ordering {
        self.total_cmp(other)
    }
}

/// The operation named in errors.
const OP: &str = "sample_sort";

/// First words of the sort's messages, so that foreign ones are recognised.
const SAMPLES: u64 = 0x5353_4f52_5453_0001; // "SSORTS" + 1: samples (header in the payload)
const BUCKET: u64 = 0x5353_4f52_5453_0002; // a bucket (header in the tag)
const REBALANCE: u64 = 0x5353_4f52_5453_0003; // par_sort: a piece of a part (header in the tag)

/// Words of the sample header: `[SAMPLES, source pid, n_q, s_q]`.
const SAMPLE_HEADER: usize = 4;
/// The tag of buckets and rebalancing pieces: `[kind, source pid, global or local start]`.
type Tag = [u64; 3];
const TAG_BYTES: usize = std::mem::size_of::<Tag>();

const MIN_SAMPLES: usize = 32;
const MAX_SAMPLES: usize = 1024;

/// How many regular samples a process with `n` items takes among `p` processes.
fn sample_count(n: usize, p: usize) -> usize {
    n.min((n / (4 * p)).clamp(MIN_SAMPLES, MAX_SAMPLES))
}

/// The end of chunk `k` of `n` items cut into `s` chunks (chunk `k` is `end(k-1)..end(k)`);
/// its sample is the item at `end(k) - 1`.
fn chunk_end(n: usize, s: usize, k: usize) -> usize {
    ((k as u128 + 1) * n as u128 / s as u128) as usize
}

/// A sample: a key, where it comes from (which makes every sample distinct) and how many items
/// of its source it stands for.
struct Sample<T> {
    key: T,
    src: usize,
    pos: usize,
    weight: usize,
}

impl<T: SortKey> Sample<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key
            .key_cmp(&other.key)
            .then(self.src.cmp(&other.src))
            .then(self.pos.cmp(&other.pos))
    }
}

/// Sort the local items of every process of a run into one globally sorted sequence: returns
/// this process's part; concatenating the parts in pid order gives the sorted input.
///
/// Collective: every process of the run calls it, with its own items (any number, possibly
/// none). The parts are balanced: each holds about `N/p` items, also when keys repeat (see the
/// [module documentation](self) for the bound and the BSP cost). With `p = 1` it sorts locally
/// and does not sync.
///
/// ```
/// use mbsp_algorithms::sort::sample_sort;
/// let parts = mbsp::run(3, |ctx| {
///     // Process q holds q, q + 3, q + 6, ... in reverse order.
///     let mine: Vec<u32> = (0..100).rev().filter(|x| x % 3 == ctx.pid() as u32).collect();
///     sample_sort(ctx, mine)
/// })?;
/// let all: Vec<u32> = parts.concat();
/// assert_eq!(all, (0..100).collect::<Vec<u32>>());
/// assert!(parts.iter().all(|part| part.len() >= 20)); // balanced
/// # Ok::<(), mbsp::Error>(())
/// ```
///
/// # Errors
/// Whatever the runtime's primitives return (e.g. the run failed elsewhere); and a misuse
/// error naming `sample_sort` if a received message is not one of the sort's — which happens
/// when the caller sent messages in the superstep it called `sample_sort` in.
pub fn sample_sort<T: SortKey>(ctx: &mut Ctx, mut local: Vec<T>) -> mbsp::Result<Vec<T>> {
    local.sort_unstable_by(T::key_cmp);
    if ctx.nprocs() == 1 || std::mem::size_of::<T>() == 0 {
        // Zero-sized items are all equal: any split of them is sorted.
        return Ok(local);
    }
    let split = split_and_send(ctx, &local, true)?;
    let me = ctx.pid();
    let (own, r) = (split.cuts[me], split.cuts[me + 1] - split.cuts[me]);
    let (runs, _) = receive_buckets::<T>(ctx, &split)?;
    let others = merge_runs(&runs);
    // The part is built in `local`'s memory (already touched, unlike a new allocation): from
    // the front if our bucket is at the end (the last process's) and the part fits, else
    // from the back with our bucket moved to the front.
    let m = r + others.len();
    if own > 0 && own + r == local.len() && m <= local.len() {
        merge_front(&mut [], &mut local, 0, r, &others);
        local.truncate(m);
    } else {
        local.copy_within(own..own + r, 0);
        local.resize(m, T::zeroed());
        merge_back(&mut local, r, 0, &others, &mut []);
    }
    Ok(local)
}

/// Sort `data` in place with a run of `p` processes (`p >= 1`): afterwards `data` equals what
/// `data.sort_unstable_by(T::key_cmp)` gives.
///
/// Each process sorts its block of `data` (the block distribution of
/// [`dist`](crate::dist), handed out without a copy) and the processes exchange buckets as in
/// [`sample_sort`]; each merges its part of the sorted sequence straight into its block where
/// the two overlap, and one more superstep moves the small rest (the imbalance) so that block
/// `i` ends with exactly [`block_range`](crate::dist::block_range)`(n, p, i)` of the sorted
/// sequence. With `p = 1` it sorts on the calling thread without starting a run.
///
/// ```
/// let mut v: Vec<f64> = (0..10_000).map(|i| ((i * 7919) % 10_007) as f64 - 5000.0).collect();
/// v.push(f64::NAN);
/// v.push(-0.0);
/// mbsp_algorithms::sort::par_sort(&mut v, 4)?;
/// assert!(v.windows(2).all(|w| w[0].total_cmp(&w[1]).is_le()));
/// assert!(v.last().unwrap().is_nan());
/// # Ok::<(), mbsp::Error>(())
/// ```
///
/// # Errors
/// The runtime's error if the run cannot start (e.g. `p == 0`) or fails.
pub fn par_sort<T: SortKey>(data: &mut [T], p: usize) -> mbsp::Result<()> {
    if p == 0 {
        // The runtime's own error for a run of no processes.
        return mbsp::run(0, |_| Ok(())).map(drop);
    }
    if p == 1 || std::mem::size_of::<T>() == 0 {
        data.sort_unstable_by(T::key_cmp);
        return Ok(());
    }
    let n = data.len();
    let blocks = crate::dist::Blocks::new(data, p);
    mbsp::run(p, |ctx| {
        let Some(block) = blocks.take(ctx.pid()) else {
            return Err(ctx.misuse_error("par_sort", "this process's block was already taken"));
        };
        block.sort_unstable_by(T::key_cmp);
        let split = split_and_send(ctx, block, false)?;
        if split.total != n {
            return Err(ctx.misuse_error(
                "par_sort",
                format!("the processes hold {} items, not n = {n}", split.total),
            ));
        }
        let me = ctx.pid();
        let mine = crate::dist::block_range(n, p, me);
        let own = split.cuts[me]..split.cuts[me + 1];
        let pieces = {
            let (runs, offset) = receive_buckets::<T>(ctx, &split)?;
            let others = merge_runs(&runs);
            place_part(block, mine.clone(), own, &others, offset)
        };
        rebalance(ctx, block, mine, n, pieces)
    })?;
    Ok(())
}

/// How the items were cut into buckets.
struct Split {
    /// Bucket `j` of this process's sorted data (sent to process `j`) is `cuts[j]..cuts[j + 1]`.
    cuts: Vec<usize>,
    /// Items of all processes together.
    total: usize,
}

/// Supersteps 0 (from the sampling on) and 1 of the sort, for `p > 1`: `sorted` is this
/// process's sorted data; returns after the sync that delivers the buckets. The tag size in
/// force on entry is set again for the superstep after if `restore`, else the sort's tag size
/// stays (for [`rebalance`]).
fn split_and_send<T: SortKey>(ctx: &mut Ctx, sorted: &[T], restore: bool) -> mbsp::Result<Split> {
    let (p, me) = (ctx.nprocs(), ctx.pid());
    let size = std::mem::size_of::<T>();
    let n = sorted.len();

    // Superstep 0: the sort's tag size from superstep 1 on; samples to everyone (with the
    // caller's tag size, whose tags carry nothing).
    let caller_tagsize = ctx.set_tagsize(TAG_BYTES)?;
    let s = sample_count(n, p);
    let mut payload = Vec::with_capacity(SAMPLE_HEADER * 8 + s * size);
    payload.extend_from_slice(bytemuck::bytes_of(&[
        SAMPLES, me as u64, n as u64, s as u64,
    ]));
    for k in 0..s {
        payload.extend_from_slice(bytemuck::bytes_of(&sorted[chunk_end(n, s, k) - 1]));
    }
    let empty_tag = vec![0u8; ctx.tagsize()];
    for q in (0..p).filter(|&q| q != me) {
        ctx.send(q, &empty_tag, &payload)?;
    }
    drop(payload);
    ctx.sync()?;

    // Superstep 1: everyone's samples, the splitters, one bucket to each process.
    let mut samples = Vec::new();
    let mut counts = vec![None; p];
    counts[me] = Some((n, s));
    let own = (0..s).map(|k| sorted[chunk_end(n, s, k) - 1]);
    add_samples(&mut samples, me, n, s, own);
    let mut received = 0;
    while let Some(m) = ctx.hpmove()? {
        received += 1;
        let (src, nq, sq, keys) = parse_samples::<T>(ctx, m.payload, p, &counts)?;
        counts[src] = Some((nq, sq));
        add_samples(&mut samples, src, nq, sq, keys.into_iter());
    }
    if received != p - 1 {
        return Err(ctx.misuse_error(
            OP,
            format!(
                "expected one sample message from each of the other {} processes, but received \
                 {received} (were messages sent in the superstep sample_sort was called in?)",
                p - 1
            ),
        ));
    }
    // Stable: the samples arrive as p sorted runs, which the stable sort merges.
    samples.sort_by(Sample::cmp);
    let total: usize = counts.iter().flatten().map(|&(nq, _)| nq).sum();
    let chosen = splitters(&samples, &counts, total, p);
    let cuts = cuts(sorted, me, &samples, &chosen, p);
    for q in (0..p).filter(|&q| q != me) {
        let tag: Tag = [BUCKET, me as u64, cuts[q] as u64];
        let bucket = &sorted[cuts[q]..cuts[q + 1]];
        ctx.send(q, bytemuck::bytes_of(&tag), bytemuck::cast_slice(bucket))?;
    }
    drop(samples);
    if restore {
        ctx.set_tagsize(caller_tagsize)?;
    }
    ctx.sync()?;
    Ok(Split { cuts, total })
}

/// Superstep 2: the buckets the other processes sent (in place where aligned, else copied)
/// and the global index where this process's part starts (every process's items before it).
fn receive_buckets<'c, T: SortKey>(
    ctx: &'c Ctx,
    split: &Split,
) -> mbsp::Result<(Vec<Cow<'c, [T]>>, usize)> {
    let (p, me) = (ctx.nprocs(), ctx.pid());
    let mut runs = Vec::with_capacity(p - 1);
    let mut seen = vec![false; p];
    seen[me] = true;
    let mut offset = split.cuts[me];
    while let Some(m) = ctx.hpmove()? {
        let [_, src, start] = read_tag(ctx, m.tag, BUCKET, "bucket", p)?;
        if std::mem::replace(&mut seen[src], true) {
            return Err(ctx.misuse_error(OP, format!("a second bucket arrived from pid {src}")));
        }
        offset += start;
        runs.push(items_of(ctx, m.payload, "bucket", src)?);
    }
    if let Some(q) = seen.iter().position(|&s| !s) {
        return Err(ctx.misuse_error(OP, format!("no bucket arrived from pid {q}")));
    }
    Ok((runs, offset))
}

/// Read a sample message: `(source, n_q, s_q, keys)`.
fn parse_samples<T: SortKey>(
    ctx: &Ctx,
    payload: &[u8],
    p: usize,
    counts: &[Option<(usize, usize)>],
) -> mbsp::Result<(usize, usize, usize, Vec<T>)> {
    let head = SAMPLE_HEADER * 8;
    if payload.len() < head {
        return Err(ctx.misuse_error(
            OP,
            format!(
                "a message of {} bytes is not a sample message (those have a {head}-byte \
                 header; was it sent in the superstep sample_sort was called in?)",
                payload.len()
            ),
        ));
    }
    let [kind, src, nq, sq]: [u64; SAMPLE_HEADER] = bytemuck::pod_read_unaligned(&payload[..head]);
    if kind != SAMPLES {
        return Err(ctx.misuse_error(
            OP,
            format!(
                "a message of {} bytes starting with {kind:#x} is not a sample message \
                 (was it sent in the superstep sample_sort was called in?)",
                payload.len()
            ),
        ));
    }
    let (src, nq, sq) = (src as usize, nq as usize, sq as usize);
    let size = std::mem::size_of::<T>();
    let keys = &payload[head..];
    if src >= p || counts[src].is_some() {
        return Err(ctx.misuse_error(
            OP,
            format!(
                "a sample message names source pid {src}: not another process of the {p}, or \
                 one that sent its samples already"
            ),
        ));
    }
    if sq > nq || (nq > 0 && sq == 0) || keys.len() != sq.saturating_mul(size) {
        return Err(ctx.misuse_error(
            OP,
            format!(
                "the sample message of pid {src} is malformed: {sq} samples of {nq} items, \
                 {} bytes of keys for items of {size} bytes",
                keys.len()
            ),
        ));
    }
    Ok((src, nq, sq, copy_items(keys)))
}

/// Add the `s` samples of process `src` (which has `n` items) to `out`.
fn add_samples<T: SortKey>(
    out: &mut Vec<Sample<T>>,
    src: usize,
    n: usize,
    s: usize,
    keys: impl Iterator<Item = T>,
) {
    let mut prev = 0;
    for (k, key) in keys.enumerate() {
        let end = chunk_end(n, s, k);
        out.push(Sample {
            key,
            src,
            pos: end - 1,
            weight: end - prev,
        });
        prev = end;
    }
}

/// The indices in `samples` (sorted) of the `p - 1` splitters (none if there are no
/// samples); bucket `j` is everything above splitter `j - 1` and up to splitter `j`.
///
/// The rank of a sample (items of all processes up to it) is estimated as the weight of the
/// samples up to it, plus half a chunk of every other process (the part of the chunk that
/// straddles it); splitter `j` is the sample whose estimate is nearest to `j N / p`. Integer
/// arithmetic, doubled to keep the halves: every process computes the same splitters.
fn splitters<T>(
    samples: &[Sample<T>],
    counts: &[Option<(usize, usize)>],
    total: usize,
    p: usize,
) -> Vec<usize> {
    if samples.is_empty() {
        return Vec::new();
    }
    let chunk = |q: usize| match counts[q] {
        Some((nq, sq)) if sq > 0 => (nq / sq) as u128,
        _ => 0,
    };
    let chunks: u128 = (0..p).map(chunk).sum();
    let mut cum = 0u128;
    // Twice the estimated rank of each sample, times p (compared with 2 j N).
    let est: Vec<u128> = samples
        .iter()
        .map(|smp| {
            cum += smp.weight as u128;
            (2 * cum + chunks - chunk(smp.src)) * p as u128
        })
        .collect();
    let last = est.len() - 1;
    let mut out: Vec<usize> = Vec::with_capacity(p - 1);
    let mut i = 0;
    for j in 1..p {
        let target = 2 * j as u128 * total as u128;
        let lo = out.last().copied().unwrap_or(0);
        i = i.max(lo);
        while i < last && est[i] < target {
            i += 1;
        }
        // The first sample at or above the target, or the one before if that is nearer.
        let below = i > lo && est[i - 1] < target;
        let pick = if below && target - est[i - 1] < est[i].abs_diff(target) {
            i - 1
        } else {
            i
        };
        out.push(pick);
    }
    out
}

/// The bucket boundaries in this process's sorted data: bucket `j` is `cuts[j]..cuts[j + 1]`,
/// `j < p`. An item is in a bucket up to splitter `j` if its `(key, me, position)` is at most
/// the splitter's `(key, source, position)`.
fn cuts<T: SortKey>(
    sorted: &[T],
    me: usize,
    samples: &[Sample<T>],
    splitters: &[usize],
    p: usize,
) -> Vec<usize> {
    let n = sorted.len();
    let mut cuts = Vec::with_capacity(p + 1);
    cuts.push(0);
    for &i in splitters {
        let s = &samples[i];
        let lo = *cuts.last().expect("starts with 0");
        let rest = &sorted[lo..];
        let cut = match me.cmp(&s.src) {
            // Our items equal to the key come before the splitter...
            Ordering::Less => lo + rest.partition_point(|x| x.key_cmp(&s.key).is_le()),
            // ...or after it...
            Ordering::Greater => lo + rest.partition_point(|x| x.key_cmp(&s.key).is_lt()),
            // ...or it is ours, and the items up to it come first.
            Ordering::Equal => (s.pos + 1).clamp(lo, n),
        };
        cuts.push(cut);
    }
    cuts.resize(p + 1, n);
    cuts
}

/// Read and check the tag of a bucket or rebalancing message: `[kind, source, start]`.
fn read_tag(ctx: &Ctx, tag: &[u8], kind: u64, what: &str, p: usize) -> mbsp::Result<[usize; 3]> {
    if tag.len() != TAG_BYTES {
        return Err(ctx.misuse_error(
            OP,
            format!(
                "a message with a {}-byte tag is not a {what} message (those have \
                 {TAG_BYTES}-byte tags)",
                tag.len()
            ),
        ));
    }
    let [k, src, start]: Tag = bytemuck::pod_read_unaligned(tag);
    if k != kind || src >= p as u64 || start > usize::MAX as u64 {
        return Err(ctx.misuse_error(
            OP,
            format!(
                "a message tagged [{k:#x}, {src}, {start}] is not a {what} message from one of \
                 the {p} processes"
            ),
        ));
    }
    Ok([k as usize, src as usize, start as usize])
}

/// The items of a payload: viewed in place when aligned, else copied.
fn items_of<'a, T: SortKey>(
    ctx: &Ctx,
    payload: &'a [u8],
    what: &str,
    src: usize,
) -> mbsp::Result<Cow<'a, [T]>> {
    let size = std::mem::size_of::<T>();
    if !payload.len().is_multiple_of(size) {
        return Err(ctx.misuse_error(
            OP,
            format!(
                "the {what} from pid {src} has {} bytes, not a whole number of {size}-byte items",
                payload.len()
            ),
        ));
    }
    Ok(match bytemuck::try_cast_slice(payload) {
        Ok(items) => Cow::Borrowed(items),
        Err(_) => Cow::Owned(copy_items(payload)),
    })
}

/// `n` zero items (for the primitive types an untouched zeroed allocation).
fn zeroed<T: SortKey>(n: usize) -> Vec<T> {
    vec![T::zeroed(); n]
}

/// The items whose bytes are `bytes` (a whole number of them, at any alignment), copied.
fn copy_items<T: SortKey>(bytes: &[u8]) -> Vec<T> {
    let mut out = zeroed::<T>(bytes.len() / std::mem::size_of::<T>());
    bytemuck::cast_slice_mut::<T, u8>(&mut out).copy_from_slice(bytes);
    out
}

/// Merge sorted runs into one: pairs of runs at a time, `⌈log2 runs⌉` passes. One run is
/// returned as it is (a message read in place).
fn merge_runs<'a, T: SortKey>(runs: &'a [Cow<'a, [T]>]) -> Cow<'a, [T]> {
    let runs: Vec<&[T]> = runs
        .iter()
        .map(|r| &**r)
        .filter(|r| !r.is_empty())
        .collect();
    match runs[..] {
        [] => return Cow::Borrowed(&[]),
        [one] => return Cow::Borrowed(one),
        _ => {}
    }
    let total = runs.iter().map(|r| r.len()).sum();
    let mut cur = zeroed::<T>(total);
    // First pass: from the runs into `cur`, two at a time; `ends` are the new runs' ends.
    let mut ends = Vec::with_capacity(runs.len().div_ceil(2));
    let mut at = 0;
    for pair in runs.chunks(2) {
        let len = pair.iter().map(|r| r.len()).sum::<usize>();
        match *pair {
            [a, b] => merge2(a, b, &mut cur[at..at + len]),
            [a] => cur[at..at + len].copy_from_slice(a),
            _ => unreachable!("chunks of 2"),
        }
        at += len;
        ends.push(at);
    }
    let mut spare = if ends.len() > 1 {
        zeroed::<T>(total)
    } else {
        Vec::new()
    };
    while ends.len() > 1 {
        let mut next = Vec::with_capacity(ends.len().div_ceil(2));
        let mut start = 0;
        for pair in ends.chunks(2) {
            match *pair {
                [mid, end] => {
                    let (a, b) = cur[start..end].split_at(mid - start);
                    merge2(a, b, &mut spare[start..end]);
                    start = end;
                }
                [end] => {
                    spare[start..end].copy_from_slice(&cur[start..end]);
                    start = end;
                }
                _ => unreachable!("chunks of 2"),
            }
            next.push(start);
        }
        std::mem::swap(&mut cur, &mut spare);
        ends = next;
    }
    Cow::Owned(cur)
}

/// Merge sorted `a` and `b` into `out` (`a.len() + b.len()` items).
fn merge2<T: SortKey>(a: &[T], b: &[T], out: &mut [T]) {
    debug_assert_eq!(a.len() + b.len(), out.len());
    let (mut i, mut j, mut k) = (0, 0, 0);
    if a.len() > 1 && b.len() > 1 {
        // The next item of both runs is loaded before the comparison decides which one is
        // needed: the loop's dependency chain is then a compare and two selects (no load).
        let (mut x, mut y) = (a[0], b[0]);
        while i + 1 < a.len() && j + 1 < b.len() {
            let (nx, ny) = (a[i + 1], b[j + 1]);
            let take_b = y.key_cmp(&x).is_lt();
            out[k] = if take_b { y } else { x };
            k += 1;
            j += usize::from(take_b);
            i += usize::from(!take_b);
            x = if take_b { x } else { nx };
            y = if take_b { ny } else { y };
        }
    }
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        let take_b = y.key_cmp(&x).is_lt();
        out[k] = if take_b { y } else { x };
        j += usize::from(take_b);
        i += usize::from(!take_b);
        k += 1;
    }
    let (ra, rb) = (&a[i..], &b[j..]);
    out[k..k + ra.len()].copy_from_slice(ra);
    out[k + ra.len()..].copy_from_slice(rb);
}

/// Write `items` at position `at` of the concatenation `first ++ second`.
fn put<T: SortKey>(first: &mut [T], second: &mut [T], at: usize, items: &[T]) {
    let n1 = first.len();
    let split = n1.saturating_sub(at).min(items.len());
    let (lo, hi) = items.split_at(split);
    if !lo.is_empty() {
        first[at..at + lo.len()].copy_from_slice(lo);
    }
    if !hi.is_empty() {
        let t = at + split - n1;
        second[t..t + hi.len()].copy_from_slice(hi);
    }
}

/// Merge the sorted run `buf[..r]` with the sorted `others` into `buf ++ tail` from position
/// `start` on (`tail` holds what does not fit in `buf`), writing from the back.
///
/// In place: the next write goes to position `start + i + j - 1` (with `i` own and `j` other
/// items left), never below the own item `i - 1` it could overwrite.
fn merge_back<T: SortKey>(buf: &mut [T], r: usize, start: usize, others: &[T], tail: &mut [T]) {
    let blen = buf.len();
    debug_assert_eq!((start + r + others.len()).saturating_sub(blen), tail.len());
    let (mut i, mut j) = (r, others.len());
    let mut w = start + i + j; // one past the next write
    while w > blen && i > 0 && j > 0 {
        let (x, y) = (buf[i - 1], others[j - 1]);
        let take_x = y.key_cmp(&x).is_lt();
        tail[w - 1 - blen] = if take_x { x } else { y };
        i -= usize::from(take_x);
        j -= usize::from(!take_x);
        w -= 1;
    }
    if i > 1 && j > 1 {
        // As in `merge2`, the next candidates are loaded ahead. They are below the write:
        // `w - 1 >= i + j - 1 > i - 2`.
        let (mut x, mut y) = (buf[i - 1], others[j - 1]);
        while i > 1 && j > 1 {
            let (nx, ny) = (buf[i - 2], others[j - 2]);
            let take_x = y.key_cmp(&x).is_lt();
            buf[w - 1] = if take_x { x } else { y };
            w -= 1;
            i -= usize::from(take_x);
            j -= usize::from(!take_x);
            x = if take_x { nx } else { x };
            y = if take_x { y } else { ny };
        }
    }
    while i > 0 && j > 0 {
        let (x, y) = (buf[i - 1], others[j - 1]);
        let take_x = y.key_cmp(&x).is_lt();
        buf[w - 1] = if take_x { x } else { y };
        i -= usize::from(take_x);
        j -= usize::from(!take_x);
        w -= 1;
    }
    if j > 0 {
        put(buf, tail, start, &others[..j]);
    } else if i > 0 && start > 0 {
        // Our remaining items `buf[..i]` move up by `start`: first those that leave `buf`.
        let stay = blen.saturating_sub(start).min(i);
        let t = (start + stay).saturating_sub(blen);
        tail[t..t + i - stay].copy_from_slice(&buf[stay..i]);
        if stay > 0 {
            buf.copy_within(..stay, start);
        }
    }
}

/// The mirror of [`merge_back`]: merge the sorted run at the end of `buf` (its last `r`
/// items) with the sorted `others` into `head ++ buf` from position `start` on, writing from
/// the front (`start + r + others.len() <= head.len() + buf.len()`).
///
/// In place: with `i` own and `j` other items taken, the next write goes to position
/// `start + i + j`, never above the own item `i` (at `head.len() + buf.len() - r + i`) it could
/// overwrite.
fn merge_front<T: SortKey>(head: &mut [T], buf: &mut [T], start: usize, r: usize, others: &[T]) {
    let (h, blen) = (head.len(), buf.len());
    debug_assert!(start + r + others.len() <= h + blen && r <= blen);
    let base = blen - r; // own item t is buf[base + t]
    let (mut i, mut j, mut w) = (0, 0, start);
    while w < h && i < r && j < others.len() {
        let (x, y) = (buf[base + i], others[j]);
        let take_y = y.key_cmp(&x).is_lt();
        head[w] = if take_y { y } else { x };
        j += usize::from(take_y);
        i += usize::from(!take_y);
        w += 1;
    }
    if w >= h && i + 1 < r && j + 1 < others.len() {
        // As in `merge2`, the next candidates are loaded ahead. They are above the write:
        // `w - h <= base + i < base + i + 1`.
        let (mut x, mut y) = (buf[base + i], others[j]);
        while i + 1 < r && j + 1 < others.len() {
            let (nx, ny) = (buf[base + i + 1], others[j + 1]);
            let take_y = y.key_cmp(&x).is_lt();
            buf[w - h] = if take_y { y } else { x };
            w += 1;
            j += usize::from(take_y);
            i += usize::from(!take_y);
            x = if take_y { x } else { nx };
            y = if take_y { ny } else { y };
        }
    }
    while i < r && j < others.len() {
        let (x, y) = (buf[base + i], others[j]);
        let take_y = y.key_cmp(&x).is_lt();
        buf[w - h] = if take_y { y } else { x };
        j += usize::from(take_y);
        i += usize::from(!take_y);
        w += 1;
    }
    if j < others.len() {
        put(head, buf, w, &others[j..]);
    } else if i < r {
        // Our remaining items move down to `w`: first those that go to `head`.
        let to_head = h.saturating_sub(w).min(r - i);
        let from = base + i;
        if to_head > 0 {
            head[w..w + to_head].copy_from_slice(&buf[from..from + to_head]);
        }
        if from + to_head < blen {
            // `head` is full now (`w + to_head == h`): the rest goes to the front of `buf`.
            buf.copy_within(from + to_head.., w + to_head - h);
        }
    }
}

/// Where a process's part of the sorted sequence goes, besides its own block.
struct Pieces<T> {
    /// Items for lower blocks: global index of the first, and the items.
    head: (usize, Vec<T>),
    /// Items for higher blocks: global index of the first, and the items.
    tail: (usize, Vec<T>),
    /// How many items of its own block the process wrote.
    filled: usize,
}

/// Merge this process's part (its own bucket, still in `block`, and the `others`) straight
/// into `block` where the part overlaps the block, and into head and tail pieces where it
/// does not. In place when the part starts inside the block (merging from the back, the own
/// bucket moved to the front) or ends inside it (from the front, the bucket moved to the
/// back); through a new vector only when it sticks out on both sides or misses the block.
fn place_part<T: SortKey>(
    block: &mut [T],
    mine: std::ops::Range<usize>,
    own: std::ops::Range<usize>,
    others: &[T],
    offset: usize,
) -> Pieces<T> {
    let (a, b, len) = (mine.start, mine.end, block.len());
    let r = own.len();
    let m = r + others.len();
    let end = offset + m;
    let fresh = |block: &[T]| {
        let mut v = zeroed::<T>(m);
        merge2(&block[own.clone()], others, &mut v);
        v
    };
    let none = || (0, Vec::new());
    if end <= a || offset >= b {
        // No overlap: the whole part goes elsewhere.
        let v = (offset, fresh(block));
        return if end <= a {
            Pieces {
                head: v,
                tail: none(),
                filled: 0,
            }
        } else {
            Pieces {
                head: none(),
                tail: v,
                filled: 0,
            }
        };
    }
    // Both ways may do: then the one that does not move the bucket (process 0's bucket is
    // at the front of its block already, the last process's at the back).
    let (back, front) = (offset >= a, end <= b);
    if back && !(front && own.start > 0 && own.end == len) {
        block.copy_within(own, 0);
        let start = offset - a;
        let mut tail = zeroed::<T>((start + m).saturating_sub(len));
        merge_back(block, r, start, others, &mut tail);
        Pieces {
            filled: m - tail.len(),
            head: none(),
            tail: (b, tail),
        }
    } else if front {
        block.copy_within(own, len - r);
        let mut head = zeroed::<T>(a.saturating_sub(offset));
        merge_front(&mut head, block, offset.saturating_sub(a), r, others);
        Pieces {
            filled: m - head.len(),
            head: (offset, head),
            tail: none(),
        }
    } else {
        // The part covers the block and more on both sides.
        let mut v = fresh(block);
        let h = a - offset;
        let tail = v.split_off(h + len);
        block.copy_from_slice(&v[h..]);
        v.truncate(h);
        Pieces {
            head: (offset, v),
            tail: (b, tail),
            filled: len,
        }
    }
}

/// par_sort's last superstep: send the head and tail pieces to the processes whose blocks
/// they fall in, and fill the rest of this process's block (`mine` of the `n` items) from
/// theirs.
fn rebalance<T: SortKey>(
    ctx: &mut Ctx,
    block: &mut [T],
    mine: std::ops::Range<usize>,
    n: usize,
    pieces: Pieces<T>,
) -> mbsp::Result<()> {
    let (p, me) = (ctx.nprocs(), ctx.pid());
    let mut filled = pieces.filled;
    for (start, items) in [&pieces.head, &pieces.tail] {
        let range = *start..start + items.len();
        for q in (0..p).filter(|&q| q != me) {
            let theirs = crate::dist::block_range(n, p, q);
            let (lo, hi) = (range.start.max(theirs.start), range.end.min(theirs.end));
            if lo < hi {
                let tag: Tag = [REBALANCE, me as u64, lo as u64];
                let piece = &items[lo - range.start..hi - range.start];
                ctx.send(q, bytemuck::bytes_of(&tag), bytemuck::cast_slice(piece))?;
            }
        }
    }
    drop(pieces);
    ctx.sync()?;
    let size = std::mem::size_of::<T>();
    while let Some(m) = ctx.hpmove()? {
        let [_, src, start] = read_tag(ctx, m.tag, REBALANCE, "rebalancing", p)?;
        let len = m.payload.len() / size;
        if !m.payload.len().is_multiple_of(size) || start < mine.start || start + len > mine.end {
            return Err(ctx.misuse_error(
                "par_sort",
                format!(
                    "pid {src} sent {} bytes for global index {start} on, which is not a run \
                     of {size}-byte items inside this process's block {mine:?}",
                    m.payload.len()
                ),
            ));
        }
        let dst = &mut block[start - mine.start..start - mine.start + len];
        bytemuck::cast_slice_mut::<T, u8>(dst).copy_from_slice(m.payload);
        filled += len;
    }
    if filled != mine.len() {
        return Err(ctx.misuse_error(
            "par_sort",
            format!(
                "{filled} items of this process's block {mine:?} were written, not {}",
                mine.len()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mbsp::rng::SplitMix64;

    #[test]
    fn place_part_writes_every_layout_of_part_and_block() {
        let mut rng = SplitMix64::new(7);
        for len in 0..6usize {
            for r in 0..=len {
                for own_at in 0..=len - r {
                    for n_others in 0..6usize {
                        for a in 0..7usize {
                            for offset in 0..14usize {
                                let mut own: Vec<u32> =
                                    (0..r).map(|_| (rng.next_u64() % 5) as u32).collect();
                                own.sort_unstable();
                                let mut others: Vec<u32> =
                                    (0..n_others).map(|_| (rng.next_u64() % 5) as u32).collect();
                                others.sort_unstable();
                                let mut want = own.clone();
                                want.extend_from_slice(&others);
                                want.sort_unstable();
                                let mut block = vec![99u32; len];
                                block[own_at..own_at + r].copy_from_slice(&own);
                                let mine = a..a + len;
                                let pieces = place_part(
                                    &mut block,
                                    mine.clone(),
                                    own_at..own_at + r,
                                    &others,
                                    offset,
                                );
                                let ctx = format!(
                                    "len {len} own {own_at}+{r} others {n_others} block at {a} part at {offset}"
                                );
                                let mut seen = 0;
                                for (g, &x) in want.iter().enumerate().map(|(k, x)| (offset + k, x))
                                {
                                    let got = if mine.contains(&g) {
                                        seen += 1;
                                        block[g - a]
                                    } else if g < a {
                                        let (s, v) = &pieces.head;
                                        v[g - s]
                                    } else {
                                        let (s, v) = &pieces.tail;
                                        v[g - s]
                                    };
                                    assert_eq!(got, x, "{ctx}: global {g}");
                                }
                                assert_eq!(pieces.filled, seen, "{ctx}");
                                let (h, t) = (pieces.head.1.len(), pieces.tail.1.len());
                                assert_eq!(h + t + seen, want.len(), "{ctx}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn place_part_on_larger_random_layouts() {
        let mut rng = SplitMix64::new(11);
        for round in 0..2000 {
            let len = (rng.next_u64() % 300) as usize;
            let r = (rng.next_u64() % (len as u64 + 1)) as usize;
            let own_at = (rng.next_u64() % ((len - r) as u64 + 1)) as usize;
            let n_others = (rng.next_u64() % 300) as usize;
            let a = (rng.next_u64() % 400) as usize;
            let offset = (rng.next_u64() % 800) as usize;
            let distinct = 1 + rng.next_u64() % 1000;
            let mut gen_run = |k: usize| {
                let mut v: Vec<u64> = (0..k).map(|_| rng.next_u64() % distinct).collect();
                v.sort_unstable();
                v
            };
            let (own, others) = (gen_run(r), gen_run(n_others));
            let mut want = [own.clone(), others.clone()].concat();
            want.sort_unstable();
            let mut block = vec![u64::MAX; len];
            block[own_at..own_at + r].copy_from_slice(&own);
            let mine = a..a + len;
            let pieces = place_part(
                &mut block,
                mine.clone(),
                own_at..own_at + r,
                &others,
                offset,
            );
            let mut filled = 0;
            for (k, &x) in want.iter().enumerate() {
                let g = offset + k;
                let got = if mine.contains(&g) {
                    filled += 1;
                    block[g - a]
                } else if g < a {
                    pieces.head.1[g - pieces.head.0]
                } else {
                    pieces.tail.1[g - pieces.tail.0]
                };
                assert_eq!(got, x, "round {round}: global {g}");
            }
            assert_eq!(pieces.filled, filled, "round {round}");
        }
    }

    #[test]
    fn merge_runs_merges_any_number_of_runs() {
        let mut rng = SplitMix64::new(3);
        for k in 0..9 {
            let runs: Vec<Cow<[u64]>> = (0..k)
                .map(|i| {
                    let mut v: Vec<u64> = (0..(i * 7) % 5).map(|_| rng.next_u64() % 10).collect();
                    v.sort_unstable();
                    Cow::Owned(v)
                })
                .collect();
            let mut want: Vec<u64> = runs.iter().flat_map(|r| r.iter().copied()).collect();
            want.sort_unstable();
            assert_eq!(&*merge_runs(&runs), &want[..], "{k} runs");
        }
    }

    #[test]
    fn splitters_of_unequal_processes_are_weighted() {
        // Process 0 has 1000 items 0..1000, process 1 has 10 items 1000..1010: the splitter
        // of p = 2 must fall near rank 505, inside process 0's data.
        let mut samples = Vec::new();
        let (n0, n1) = (1000, 10);
        let (s0, s1) = (sample_count(n0, 2), sample_count(n1, 2));
        add_samples(
            &mut samples,
            0,
            n0,
            s0,
            (0..s0).map(|k| (chunk_end(n0, s0, k) - 1) as u64),
        );
        add_samples(
            &mut samples,
            1,
            n1,
            s1,
            (0..s1).map(|k| 1000 + (chunk_end(n1, s1, k) - 1) as u64),
        );
        samples.sort_by(Sample::cmp);
        let counts = [Some((n0, s0)), Some((n1, s1))];
        let chosen = splitters(&samples, &counts, n0 + n1, 2);
        let key = samples[chosen[0]].key;
        assert!((480..530).contains(&key), "splitter key {key}");
    }
}
