//! What the FFT measurements share: their random input, the error against a reference, and
//! rustfft's rate as the BSP `r` of a run.

use crate::stats::Samples;
use mbsp::rng::SplitMix64;
use mbsp::{Result, Run};
use mbsp_algorithms::fft::{Complex, flops, sequential_plan};
use std::collections::BTreeMap;
use std::time::Instant;

type C = Complex<f64>;

/// The seed of the commands' FFT input.
pub const SEED: u64 = mbsp::rng::GOLDEN;

/// `n` pseudo-random complex numbers in [-0.5, 0.5)² ([`SplitMix64`] from `seed`: the same
/// numbers for the same seed, any seed).
///
/// ```
/// let x = mbsp_tools::fft::random(4, 1);
/// assert_eq!(x, mbsp_tools::fft::random(4, 1));
/// assert!(x.iter().all(|c| c.re.abs() <= 0.5 && c.im.abs() <= 0.5));
/// ```
pub fn random(n: usize, seed: u64) -> Vec<C> {
    let mut r = SplitMix64::new(seed);
    (0..n)
        .map(|_| {
            let re = r.next_f64() - 0.5;
            C::new(re, r.next_f64() - 0.5)
        })
        .collect()
}

/// ‖a - b‖₂ / ‖b‖₂.
///
/// ```
/// use mbsp_algorithms::fft::Complex;
/// let b = [Complex::new(3.0, 0.0), Complex::new(0.0, 4.0)];
/// let a = [Complex::new(3.0, 0.0), Complex::new(0.0, 3.5)];
/// assert!((mbsp_tools::fft::rel_error(&a, &b) - 0.1).abs() < 1e-15);
/// ```
pub fn rel_error(a: &[C], b: &[C]) -> f64 {
    let d: f64 = a.iter().zip(b).map(|(x, y)| (x - y).norm_sqr()).sum();
    let r: f64 = b.iter().map(|y| y.norm_sqr()).sum();
    (d / r).sqrt()
}

/// rustfft's rate (flop/s) at length `len` (at least 64: shorter kernels are timed as 64),
/// out of place as the split transform's kernels run, on each of `cores` cores while all of
/// them run it — the BSP `r` of a run of that many
/// processes: from `rates` (keyed by length and cores: a sweep's own measurements), else
/// measured now in a run of `cores` processes placed as a run is by default ([`rate_on`]) and
/// kept in `rates`.
///
/// ```
/// let mut rates = std::collections::BTreeMap::new();
/// let r = mbsp_tools::fft::rate(&mut rates, 256, 1)?;
/// assert!(r > 0.0);
/// assert_eq!(rates[&(256, 1)], r);
/// # Ok::<(), mbsp::Error>(())
/// ```
pub fn rate(rates: &mut BTreeMap<(usize, usize), f64>, len: usize, cores: usize) -> Result<f64> {
    rate_on(rates, len, cores, |run| run)
}

/// [`rate`] measured in a run of `cores` processes that `place` configures (its policy and
/// binding: the placement whose `r` is wanted): each process runs its own transforms, lined
/// up by a sync, and the slowest process's median counts. The processes are pinned where the run puts them: threads left to the scheduler
/// sometimes share a core for a whole measurement and halve the rate.
///
/// ```
/// let mut rates = std::collections::BTreeMap::new();
/// let r = mbsp_tools::fft::rate_on(&mut rates, 128, 2, |run| run.policy(mbsp::Policy::Scattered))?;
/// assert_eq!(rates[&(128, 2)], r);
/// # Ok::<(), mbsp::Error>(())
/// ```
pub fn rate_on(
    rates: &mut BTreeMap<(usize, usize), f64>,
    len: usize,
    cores: usize,
    place: impl FnOnce(Run) -> Run,
) -> Result<f64> {
    let len = len.max(64);
    let key = (len, cores);
    if let Some(&r) = rates.get(&key) {
        return Ok(r);
    }
    let plan = sequential_plan::<f64>(len, false);
    let x = random(len, SEED);
    let medians = place(Run::new(cores)).run(|ctx| {
        // Out of place, as the split transform's kernels run (`split::kernels2`).
        let mut scratch = vec![C::default(); plan.get_outofplace_scratch_len()];
        let (mut y, mut out) = (x.clone(), x.clone());
        // An untimed transform first: the first one pays for touching the scratch, the
        // tables and the caches, and a cold core's clock.
        ctx.sync()?;
        plan.process_outofplace_with_scratch(&mut y, &mut out, &mut scratch);
        let mut times = Vec::with_capacity(RATE_SAMPLES);
        for _ in 0..RATE_SAMPLES {
            y.copy_from_slice(&x);
            ctx.sync()?;
            let t = Instant::now();
            plan.process_outofplace_with_scratch(&mut y, &mut out, &mut scratch);
            times.push(t.elapsed().as_secs_f64());
        }
        Ok(Samples(times).median())
    })?;
    let r = flops(len) / medians.into_iter().fold(0.0, f64::max);
    rates.insert(key, r);
    Ok(r)
}

/// Transforms each process times in [`rate_on`]: enough that a few disturbed ones leave the
/// median alone.
const RATE_SAMPLES: usize = 15;
