//! Transforms of a whole vector held by the caller: [`fft`], [`ifft`] (flat, plans cached) and
//! [`fft_multi`] (Multi-BSP). Each starts a run (none for one process), hands the vector out
//! cyclically and writes the result back in place.
//!
//! Cost: that of the transform ([`BspFft`], [`MultiFft`]) plus the start of a run and one
//! registration superstep; planning (`O(n)` twiddles and the kernels) only on the first call
//! of a shape while it stays in the plan cache.

use super::multi::MultiFft;
use super::num::{Complex, Float};
use super::plan::{BspFft, Direction, Exchange, Tables, check_shape};
use crate::dist::Cyclic;
use mbsp::Result;
use rustfft::Fft;
use std::any::{Any, TypeId};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};

/// The most shapes (element type, length, process count) whose plans [`fft`] keeps.
pub const PLAN_CACHE_ENTRIES: usize = 8;

/// The largest sum of the lengths of the transforms whose plans [`fft`] keeps (the plans take
/// about two complex numbers per entry of the transform, and the inverse as many again when it
/// is used).
pub const PLAN_CACHE_LEN: usize = 1 << 22;

/// Transform `data` (natural order) in place with `p` processes: forward, unscaled.
///
/// The vector is handed out cyclically (each process reads its entries straight from `data`),
/// transformed by [`BspFft`], and written back in place. With `p = 1` no run is started.
///
/// The plans (sequential kernels and twiddle tables) are cached by element type, length and
/// process count, so repeated calls of one shape plan once; each call still starts a run and
/// registers the pack buffers (one superstep more than the transform). The cache keeps the
/// [`PLAN_CACHE_ENTRIES`] shapes used last, of lengths adding up to at most
/// [`PLAN_CACHE_LEN`]; longer transforms are planned per call. A program that transforms many
/// vectors inside one run keeps a [`BspFft`] instead: it plans and registers once.
///
/// ```
/// use mbsp_algorithms::fft::{fft, ifft, Complex};
/// let mut x: Vec<Complex<f64>> = (0..16).map(|i| Complex::new(i as f64, 0.0)).collect();
/// let orig = x.clone();
/// fft(&mut x, 2)?;
/// assert!((x[0].re - 120.0).abs() < 1e-12);   // the sum of 0..16
/// ifft(&mut x, 4)?;
/// assert!(x.iter().zip(&orig).all(|(a, b)| (a - b).norm() < 1e-12));
/// # Ok::<(), mbsp::Error>(())
/// ```
pub fn fft<T: Float>(data: &mut [Complex<T>], p: usize) -> Result<()> {
    whole(data, p, Direction::Forward)
}

/// The inverse of [`fft`], scaled by `1/n`.
pub fn ifft<T: Float>(data: &mut [Complex<T>], p: usize) -> Result<()> {
    whole(data, p, Direction::Inverse)
}

pub(crate) fn whole<T: Float>(data: &mut [Complex<T>], p: usize, dir: Direction) -> Result<()> {
    let n = data.len();
    if !valid_shape(n, p) {
        // The run reports the bad process count or shape, as every transform does.
        return mbsp::run(p, |ctx| check_shape(ctx, n, p)).map(drop);
    }
    if p == 1 {
        let seq = cached(n, 1, || Sequential::<T>::new(n));
        seq.process(data, dir);
        return Ok(());
    }
    let slots = cached(n, p, || {
        Slots::<T>((0..p).map(|_| OnceLock::new()).collect())
    });
    let parts = Cyclic::new(data, p);
    mbsp::run(p, |ctx| {
        let me = ctx.pid();
        let tables = slots.0[me]
            .get_or_init(|| Arc::new(Tables::new(n, p, me, false)))
            .clone();
        let mut plan = BspFft::with_tables(ctx, tables, Exchange::default())?;
        let Some(mut mine) = parts.take(me) else {
            return Err(ctx.misuse_error("fft", "cyclic part taken twice"));
        };
        let mut local: Vec<Complex<T>> = (0..mine.len()).map(|i| mine.get(i)).collect();
        plan.transform(ctx, &mut local, dir)?;
        for (i, v) in local.into_iter().enumerate() {
            mine.set(i, v);
        }
        plan.free(ctx)
    })
    .map(drop)
}

/// Whether `n` and `p` are a shape the transform takes (powers of two, `1 <= p <= n`), as
/// [`check_shape`] decides in a run.
fn valid_shape(n: usize, p: usize) -> bool {
    n.is_power_of_two() && p.is_power_of_two() && p <= n
}

/// The tables of a transform over `p` processes, one per process, each made by its process the
/// first time (in parallel, inside the run).
struct Slots<T: Float>(Vec<OnceLock<Arc<Tables<T>>>>);

/// The kernels of a sequential transform; the inverse made at its first use.
struct Sequential<T: Float> {
    forward: Arc<dyn Fft<T>>,
    inverse: OnceLock<Arc<dyn Fft<T>>>,
}

impl<T: Float> Sequential<T> {
    fn new(n: usize) -> Self {
        Sequential {
            forward: T::rustfft_plan(n, false),
            inverse: OnceLock::new(),
        }
    }

    fn process(&self, data: &mut [Complex<T>], dir: Direction) {
        match dir {
            Direction::Forward => self.forward.process(data),
            Direction::Inverse => {
                let n = data.len();
                self.inverse
                    .get_or_init(|| T::rustfft_plan(n, true))
                    .process(data);
                let s = T::from_f64(1.0 / n as f64).expect("a float");
                data.iter_mut().for_each(|x| *x = x.scale(s));
            }
        }
    }
}

/// One cached plan: `V` (whose type is part of the key, so a downcast cannot fail) for length
/// `n` over `p` processes.
struct Entry {
    key: (TypeId, usize, usize),
    plans: Arc<dyn Any + Send + Sync>,
}

/// The cached plans, least recently used first.
static CACHE: Mutex<VecDeque<Entry>> = Mutex::new(VecDeque::new());

/// The plans `V` of length `n` over `p` processes: from the cache, or made by `make` (and kept
/// unless `n` exceeds [`PLAN_CACHE_LEN`]). Runs of the same shape at the same time share one
/// `V`; what a `V` makes later it makes once, through its `OnceLock`s.
fn cached<V: Any + Send + Sync>(n: usize, p: usize, make: impl FnOnce() -> V) -> Arc<V> {
    let key = (TypeId::of::<V>(), n, p);
    // A panic elsewhere while the lock was held cannot leave the queue inconsistent (every
    // change is one push or pop), so a poisoned lock is used as it is.
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(at) = cache.iter().position(|e| e.key == key) {
        let entry = cache.remove(at).expect("a found entry");
        let plans = entry.plans.clone();
        cache.push_back(entry);
        return plans.downcast::<V>().expect("the key names the type");
    }
    let plans = Arc::new(make());
    if n <= PLAN_CACHE_LEN {
        cache.push_back(Entry {
            key,
            plans: plans.clone(),
        });
        let mut total: usize = cache.iter().map(|e| e.key.1).sum();
        while cache.len() > PLAN_CACHE_ENTRIES || total > PLAN_CACHE_LEN {
            let old = cache.pop_front().expect("a non-empty cache");
            total -= old.key.1;
        }
    }
    plans
}

/// The number of shapes in the plan cache (for tests).
#[cfg(test)]
fn cached_shapes() -> Vec<(usize, usize)> {
    let cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache.iter().map(|e| (e.key.1, e.key.2)).collect()
}

/// Transform a whole vector with the Multi-BSP FFT over the fan-outs `levels` (outermost first;
/// e.g. [`hierarchy`](super::hierarchy) of the machine): a top-level run of `levels[0]` processes with nested runs
/// below. With no levels (or all 1) the transform is sequential. Plans on every call (unlike
/// [`fft`]); a program that transforms repeatedly keeps a [`MultiFft`] in its own run.
///
/// ```
/// use mbsp_algorithms::fft::{fft_multi, Complex, Direction};
/// let mut x: Vec<Complex<f32>> = (0..1024).map(|j| Complex::new(j as f32, 0.0)).collect();
/// fft_multi(&mut x, &[2, 2], Direction::Forward)?;
/// assert!((x[0].re - 523_776.0).abs() < 1.0); // the sum 0 + ... + 1023
/// # Ok::<(), mbsp::Error>(())
/// ```
pub fn fft_multi<T: Float>(
    data: &mut [Complex<T>],
    levels: &[usize],
    dir: Direction,
) -> Result<()> {
    let levels: Vec<usize> = levels.iter().copied().filter(|&c| c > 1).collect();
    let Some((&top, below)) = levels.split_first() else {
        return whole(data, 1, dir);
    };
    let n = data.len();
    let parts = Cyclic::new(data, top);
    mbsp::run(top, |ctx| {
        let mut plan = MultiFft::<T>::new(ctx, n, below)?;
        let Some(mut mine) = parts.take(ctx.pid()) else {
            return Err(ctx.misuse_error("fft", "cyclic part taken twice"));
        };
        let mut local: Vec<Complex<T>> = (0..mine.len()).map(|i| mine.get(i)).collect();
        plan.transform(ctx, &mut local, dir)?;
        for (i, v) in local.into_iter().enumerate() {
            mine.set(i, v);
        }
        plan.free(ctx)
    })
    .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signal(n: usize) -> Vec<Complex<f64>> {
        (0..n)
            .map(|j| Complex::new((j % 7) as f64, (j % 3) as f64))
            .collect()
    }

    /// The cache keeps what it may, evicts the least recently used, and a cached plan gives
    /// the result of a fresh one. (One test: the cache is shared by the whole test binary.)
    #[test]
    fn plan_cache_reuses_and_bounds() {
        let n = 1 << 10;
        let mut want = signal(n);
        Sequential::<f64>::new(n).process(&mut want, Direction::Forward);
        for _ in 0..2 {
            for p in [1, 2, 4] {
                let mut x = signal(n);
                fft(&mut x, p).unwrap();
                let err = x
                    .iter()
                    .zip(&want)
                    .map(|(a, b)| (a - b).norm())
                    .fold(0.0, f64::max);
                assert!(err < 1e-9, "p = {p}: error {err}");
                ifft(&mut x, p).unwrap();
                let back = x
                    .iter()
                    .zip(signal(n))
                    .map(|(a, b)| (a - b).norm())
                    .fold(0.0, f64::max);
                assert!(back < 1e-12, "p = {p}: round trip error {back}");
            }
        }
        let shapes = cached_shapes();
        for p in [1, 2, 4] {
            assert_eq!(
                shapes.iter().filter(|&&s| s == (n, p)).count(),
                1,
                "{shapes:?}"
            );
        }
        // Many other shapes: at most PLAN_CACHE_ENTRIES stay, the last ones used.
        for k in 1..=PLAN_CACHE_ENTRIES + 2 {
            let mut x = signal(1 << k);
            fft(&mut x, 1).unwrap();
        }
        let shapes = cached_shapes();
        assert!(shapes.len() <= PLAN_CACHE_ENTRIES, "{shapes:?}");
        assert_eq!(shapes.last(), Some(&(1 << (PLAN_CACHE_ENTRIES + 2), 1)));
        assert!(!shapes.contains(&(n, 4)), "{shapes:?}");
        // Bad shapes are refused by the run, and not cached.
        let mut bad = signal(12);
        let e = fft(&mut bad, 2).unwrap_err();
        assert!(
            e.to_string().contains("n = 12 is not a power of two"),
            "{e}"
        );
        assert!(!cached_shapes().iter().any(|s| s.0 == 12));
    }
}
