//! Data distributions: which indices a process owns, and handing caller-owned data to the
//! processes of a run without copying it.
//!
//! * [`block_range`] / [`block_owner`]: the block distribution of `n` items over `p`
//!   processes — contiguous ranges whose lengths differ by at most one, the longer ones first.
//! * [`cyclic_indices`] / [`cyclic_len`]: the cyclic distribution — item `i` belongs to process
//!   `i mod p`.
//! * [`Blocks`]: splits a caller's `&mut [T]` into the `p` block ranges and lets each process
//!   of a run take its own block as `&mut [T]` for the length of the run (no lock, no copy).
//!   [`run_on_blocks`] starts a run doing exactly that.
//! * [`Cyclic`]: the same for the cyclic distribution (strided parts).
//! * [`concat()`]: collects the per-process results of a run into one vector.
//! * [`Halo1d`]: ghost cells of a 1D block distribution, exchanged with the neighbours by a
//!   lazy sync (each process waits for its neighbours only); see its module for the cost.
//! * [`Halo2d`]: the same for a 2D block distribution over a `pr x pc` process grid (sides and
//!   corners, periodic or not).
//!
//! The others communicate nothing: they cost nothing in the BSP model.

mod halo;
mod halo2d;
pub use halo::Halo1d;
pub use halo2d::Halo2d;

use std::cell::UnsafeCell;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

/// The indices of `0..n` that process `pid` of `p` owns in the block distribution: contiguous,
/// in pid order, the first `n mod p` blocks one longer than the others.
///
/// ```
/// use mbsp_algorithms::dist::block_range;
/// assert_eq!(block_range(10, 3, 0), 0..4);
/// assert_eq!(block_range(10, 3, 1), 4..7);
/// assert_eq!(block_range(10, 3, 2), 7..10);
/// assert_eq!(block_range(2, 4, 3), 2..2); // more processes than items: empty blocks last
/// ```
///
/// # Panics
/// If `p == 0` or `pid >= p`.
pub fn block_range(n: usize, p: usize, pid: usize) -> Range<usize> {
    assert!(pid < p, "block_range: pid {pid} is not below p = {p}");
    let (q, r) = (n / p, n % p);
    let start = pid * q + pid.min(r);
    start..start + q + usize::from(pid < r)
}

/// The process owning index `i` of `0..n` in the block distribution over `p` processes
/// (the inverse of [`block_range`]).
///
/// ```
/// use mbsp_algorithms::dist::{block_owner, block_range};
/// for i in 0..10 {
///     assert!(block_range(10, 3, block_owner(10, 3, i)).contains(&i));
/// }
/// ```
///
/// # Panics
/// If `p == 0` or `i >= n`.
pub fn block_owner(n: usize, p: usize, i: usize) -> usize {
    assert!(i < n, "block_owner: index {i} is not below n = {n}");
    assert!(p > 0, "block_owner: p = 0");
    let (q, r) = (n / p, n % p);
    let long = r * (q + 1); // indices covered by the r longer blocks
    if i < long {
        i / (q + 1)
    } else {
        r + (i - long) / q
    }
}

/// The indices of `0..n` that process `pid` of `p` owns in the cyclic distribution:
/// `pid, pid + p, pid + 2p, ...`.
///
/// ```
/// use mbsp_algorithms::dist::cyclic_indices;
/// assert_eq!(cyclic_indices(10, 3, 1).collect::<Vec<_>>(), vec![1, 4, 7]);
/// ```
///
/// # Panics
/// If `p == 0` or `pid >= p`.
pub fn cyclic_indices(n: usize, p: usize, pid: usize) -> std::iter::StepBy<Range<usize>> {
    assert!(pid < p, "cyclic_indices: pid {pid} is not below p = {p}");
    (pid.min(n)..n).step_by(p)
}

/// How many indices of `0..n` process `pid` of `p` owns in the cyclic distribution.
///
/// ```
/// assert_eq!(mbsp_algorithms::dist::cyclic_len(10, 3, 0), 4);
/// ```
///
/// # Panics
/// If `p == 0` or `pid >= p`.
pub fn cyclic_len(n: usize, p: usize, pid: usize) -> usize {
    assert!(pid < p, "cyclic_len: pid {pid} is not below p = {p}");
    n / p + usize::from(pid < n % p)
}

/// A caller's slice split into the `p` blocks of the block distribution, each of which one
/// process of a run may take, mutably, for the length of the borrow — no lock and no copy.
///
/// ```
/// use mbsp_algorithms::dist::Blocks;
/// let mut data: Vec<u64> = (0..10).collect();
/// let blocks = Blocks::new(&mut data, 3);
/// mbsp::run(3, |ctx| {
///     let mine = blocks.take(ctx.pid()).expect("each pid takes its block once");
///     for x in mine.iter_mut() {
///         *x *= 10;
///     }
///     Ok(())
/// })?;
/// drop(blocks);
/// assert_eq!(data[9], 90);
/// # Ok::<(), mbsp::Error>(())
/// ```
pub struct Blocks<'a, T> {
    n: usize,
    slots: Vec<Slot<'a, T>>,
}

struct Slot<'a, T> {
    taken: AtomicBool,
    block: UnsafeCell<Option<&'a mut [T]>>,
}

// SAFETY: a slot's block is moved out exactly once, by whoever wins the `taken` swap; no two
// threads ever touch the same `UnsafeCell`, and the `&mut [T]` handed out can be sent to another
// thread when `T: Send` (as for `&mut [T]` itself).
unsafe impl<T: Send> Sync for Blocks<'_, T> {}

impl<'a, T> Blocks<'a, T> {
    /// Split `data` into the `p` blocks of [`block_range`]`(data.len(), p, ·)`.
    ///
    /// # Panics
    /// If `p == 0`.
    pub fn new(data: &'a mut [T], p: usize) -> Self {
        assert!(p > 0, "Blocks::new: p = 0");
        let n = data.len();
        let mut rest = data;
        let slots = (0..p)
            .map(|pid| {
                let len = block_range(n, p, pid).len();
                let (block, tail) = std::mem::take(&mut rest).split_at_mut(len);
                rest = tail;
                Slot {
                    taken: AtomicBool::new(false),
                    block: UnsafeCell::new(Some(block)),
                }
            })
            .collect();
        Blocks { n, slots }
    }

    /// The number of blocks (processes).
    pub fn parts(&self) -> usize {
        self.slots.len()
    }

    /// The global index range of block `pid`.
    pub fn range(&self, pid: usize) -> Range<usize> {
        block_range(self.n, self.slots.len(), pid)
    }

    /// Take block `pid` for the rest of the borrow; `None` if it was taken already or
    /// `pid` is out of range.
    pub fn take(&self, pid: usize) -> Option<&'a mut [T]> {
        let slot = self.slots.get(pid)?;
        if slot.taken.swap(true, Ordering::AcqRel) {
            return None;
        }
        // SAFETY: the swap above returned `false` to this caller only, so no other thread
        // reads or writes this cell, now or later.
        unsafe { (*slot.block.get()).take() }
    }
}

/// A caller's slice split into the `p` parts of the cyclic distribution (part `s` holds
/// `data[s], data[s + p], ...`), each of which one process of a run may take for the length of
/// the borrow: strided access to caller-owned data with no lock and no copy.
///
/// ```
/// use mbsp_algorithms::dist::Cyclic;
/// let mut data: Vec<u32> = (0..10).collect();
/// let parts = Cyclic::new(&mut data, 3);
/// mbsp::run(3, |ctx| {
///     let mut mine = parts.take(ctx.pid()).expect("each pid takes its part once");
///     for i in 0..mine.len() {
///         let v = mine.get(i);
///         mine.set(i, v * 100); // entry pid + 3 i
///     }
///     Ok(())
/// })?;
/// drop(parts);
/// assert_eq!(data[7], 700);
/// # Ok::<(), mbsp::Error>(())
/// ```
pub struct Cyclic<'a, T> {
    base: *mut T,
    n: usize,
    taken: Vec<AtomicBool>,
    _borrow: std::marker::PhantomData<&'a mut [T]>,
}

// SAFETY: parts are disjoint (part `s` touches only indices `≡ s mod p`) and each is handed out
// once (the `taken` swap), so sharing the splitter between threads only ever gives each thread
// exclusive access to its own entries, as sending `&mut` parts of `[T]` would (`T: Send`).
unsafe impl<T: Send> Sync for Cyclic<'_, T> {}

/// One process's part of a [`Cyclic`] split: entry `i` is `data[pid + p·i]`.
pub struct CyclicPart<'a, T> {
    base: *mut T,
    pid: usize,
    p: usize,
    len: usize,
    _borrow: std::marker::PhantomData<&'a mut [T]>,
}

// SAFETY: a part is the exclusive owner of its entries (see `Cyclic`).
unsafe impl<T: Send> Send for CyclicPart<'_, T> {}

impl<'a, T: Copy> Cyclic<'a, T> {
    /// Split `data` cyclically into `p` parts.
    ///
    /// # Panics
    /// If `p == 0`.
    pub fn new(data: &'a mut [T], p: usize) -> Self {
        assert!(p > 0, "Cyclic::new: p = 0");
        Cyclic {
            base: data.as_mut_ptr(),
            n: data.len(),
            taken: (0..p).map(|_| AtomicBool::new(false)).collect(),
            _borrow: std::marker::PhantomData,
        }
    }

    /// Take part `pid`; `None` if it was taken already or `pid` is out of range.
    pub fn take(&self, pid: usize) -> Option<CyclicPart<'a, T>> {
        let flag = self.taken.get(pid)?;
        if flag.swap(true, Ordering::AcqRel) {
            return None;
        }
        let p = self.taken.len();
        Some(CyclicPart {
            base: self.base,
            pid,
            p,
            len: cyclic_len(self.n, p, pid),
            _borrow: std::marker::PhantomData,
        })
    }
}

impl<T: Copy> CyclicPart<'_, T> {
    /// The number of entries of this part.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether this part is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entry `i` (global index `pid + p·i`).
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn get(&self, i: usize) -> T {
        assert!(i < self.len, "CyclicPart::get: {i} >= {}", self.len);
        // SAFETY: `pid + p i < n`, an index of this part, which no other part touches.
        unsafe { *self.base.add(self.pid + self.p * i) }
    }

    /// Set entry `i` (global index `pid + p·i`).
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn set(&mut self, i: usize, v: T) {
        assert!(i < self.len, "CyclicPart::set: {i} >= {}", self.len);
        // SAFETY: as in `get`; `&mut self` makes the write exclusive within this part.
        unsafe { *self.base.add(self.pid + self.p * i) = v }
    }
}

/// Run `f` on `p` processes, each given its own block of `data` (the block distribution) as
/// `&mut [T]`, and return the per-process results, as [`mbsp::run`] does.
///
/// ```
/// let mut data = vec![1.0f64; 1000];
/// let sums = mbsp_algorithms::dist::run_on_blocks(4, &mut data, |_ctx, block| {
///     block.iter_mut().for_each(|x| *x *= 2.0);
///     Ok(block.iter().sum::<f64>())
/// })?;
/// assert_eq!(sums.iter().sum::<f64>(), 2000.0);
/// assert!(data.iter().all(|&x| x == 2.0));
/// # Ok::<(), mbsp::Error>(())
/// ```
pub fn run_on_blocks<T, R, F>(p: usize, data: &mut [T], f: F) -> mbsp::Result<Vec<R>>
where
    T: Send,
    R: Send,
    F: Fn(&mut mbsp::Ctx, &mut [T]) -> mbsp::Result<R> + Sync,
{
    let blocks = Blocks::new(data, p);
    mbsp::run(p, |ctx| {
        let Some(block) = blocks.take(ctx.pid()) else {
            return Err(ctx.misuse_error(
                "run_on_blocks",
                format!("block {} was already taken", ctx.pid()),
            ));
        };
        f(ctx, block)
    })
}

/// Concatenate per-process blocks (e.g. the results of a run) into one vector, in pid order.
///
/// ```
/// let parts = mbsp::run(3, |ctx| Ok(vec![ctx.pid(); 2]))?;
/// assert_eq!(mbsp_algorithms::dist::concat(parts), vec![0, 0, 1, 1, 2, 2]);
/// # Ok::<(), mbsp::Error>(())
/// ```
pub fn concat<T>(parts: Vec<Vec<T>>) -> Vec<T> {
    let mut parts = parts.into_iter();
    let Some(mut out) = parts.next() else {
        return Vec::new();
    };
    for part in parts {
        out.extend(part);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_ranges_tile_and_owner_inverts() {
        for n in 0..40 {
            for p in 1..10 {
                let mut next = 0;
                for pid in 0..p {
                    let r = block_range(n, p, pid);
                    assert_eq!(r.start, next);
                    assert!(r.len() == n / p || r.len() == n / p + 1);
                    for i in r.clone() {
                        assert_eq!(block_owner(n, p, i), pid, "n {n} p {p} i {i}");
                    }
                    next = r.end;
                }
                assert_eq!(next, n);
                let cyc: usize = (0..p).map(|pid| cyclic_len(n, p, pid)).sum();
                assert_eq!(cyc, n);
                for pid in 0..p {
                    assert_eq!(cyclic_indices(n, p, pid).count(), cyclic_len(n, p, pid));
                    assert!(cyclic_indices(n, p, pid).all(|i| i % p == pid));
                }
            }
        }
    }

    #[test]
    fn blocks_are_taken_once() {
        let mut v = vec![0u8; 5];
        let b = Blocks::new(&mut v, 2);
        assert_eq!(b.range(1), 3..5);
        assert_eq!(b.take(0).map(|s| s.len()), Some(3));
        assert!(b.take(0).is_none());
        assert!(b.take(2).is_none());
    }
}
