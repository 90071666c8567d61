//! Repeated measurements: the median, the spread, and the line fitted to timings.
//!
//! There is one median in the project, the true median ([`median`]): the middle value of an
//! odd count, the mean of the two middle values of an even count.

/// The median of `values`: the middle one of an odd count, the mean of the two middle ones of
/// an even count; NaN when there is none. `values` need not be sorted.
///
/// ```
/// use mbsp_tools::stats::median;
/// assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
/// assert_eq!(median(&[1.0, 2.0, 3.0, 10.0]), 2.5);
/// assert!(median(&[]).is_nan());
/// ```
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Samples of one figure (e.g. nanoseconds per superstep).
///
/// ```
/// use mbsp_tools::stats::Samples;
/// let s = Samples(vec![3.0, 1.0, 2.0]);
/// assert_eq!((s.median(), s.range()), (2.0, (1.0, 3.0)));
/// assert_eq!(s.show(|v| format!("{v:.0}")), "2 [1–3]");
/// ```
#[derive(Clone, Debug)]
pub struct Samples(pub Vec<f64>);

impl Samples {
    /// Collects `n` samples from `f`.
    ///
    /// ```
    /// let mut k = 0.0;
    /// let s = mbsp_tools::stats::Samples::collect(3, || { k += 1.0; k });
    /// assert_eq!(s.0, [1.0, 2.0, 3.0]);
    /// ```
    pub fn collect(n: usize, mut f: impl FnMut() -> f64) -> Samples {
        Samples((0..n).map(|_| f()).collect())
    }

    /// The median ([`median`]).
    pub fn median(&self) -> f64 {
        median(&self.0)
    }

    /// Smallest and largest sample.
    pub fn range(&self) -> (f64, f64) {
        let lo = self.0.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = self.0.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo, hi)
    }

    /// "median [min–max]" with the given formatter.
    pub fn show(&self, fmt: impl Fn(f64) -> String) -> String {
        let (lo, hi) = self.range();
        format!("{} [{}–{}]", fmt(self.median()), fmt(lo), fmt(hi))
    }
}

/// `samples` measurements of the nanoseconds per call of `step`, each over `iters` calls after
/// one warm-up call (which also lines up the processes when `step` is a sync).
///
/// ```
/// let times = mbsp_tools::stats::timed(3, 10, || Ok::<(), ()>(())).unwrap();
/// assert_eq!(times.len(), 3);
/// ```
pub fn timed<E>(
    samples: usize,
    iters: usize,
    mut step: impl FnMut() -> Result<(), E>,
) -> Result<Vec<f64>, E> {
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        step()?;
        let t = std::time::Instant::now();
        for _ in 0..iters {
            step()?;
        }
        out.push(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    Ok(out)
}

/// Nanoseconds, compactly.
///
/// ```
/// use mbsp_tools::stats::ns;
/// assert_eq!(ns(812.4), "812 ns");
/// assert_eq!(ns(12_345.0), "12.3 µs");
/// assert_eq!(ns(250_000.0), "250 µs");
/// ```
pub fn ns(v: f64) -> String {
    if v >= 100_000.0 {
        format!("{:.0} µs", v / 1000.0)
    } else if v >= 10_000.0 {
        format!("{:.1} µs", v / 1000.0)
    } else {
        format!("{v:.0} ns")
    }
}

/// A rate in GB/s, with two decimals.
///
/// ```
/// assert_eq!(mbsp_tools::stats::gbs(12.345), "12.35");
/// ```
pub fn gbs(v: f64) -> String {
    format!("{v:.2}")
}

/// Fits `t = l + g h` to the points: `g` by least squares (as the BSPlib paper does; the large
/// h-relations, where t is large, decide it), then `l` as the intercept that minimises the
/// relative errors for that `g` (weights 1/t², so the small h-relations decide it; a plain fit's
/// intercept is a small difference of large numbers and often negative): (g, l).
///
/// ```
/// let points: Vec<(f64, f64)> = (0..4).map(|h| (h as f64, 5.0 + 2.0 * h as f64)).collect();
/// let (g, l) = mbsp_tools::stats::fit_gl(&points);
/// assert!((g - 2.0).abs() < 1e-12 && (l - 5.0).abs() < 1e-12);
/// ```
pub fn fit_gl(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), &(h, t)| (a + h, b + t));
    let (mx, my) = (sx / n, sy / n);
    let (sxy, sxx) = points.iter().fold((0.0, 0.0), |(a, b), &(h, t)| {
        (a + (h - mx) * (t - my), b + (h - mx) * (h - mx))
    });
    let g = sxy / sxx;
    let (sw, swr) = points.iter().fold((0.0, 0.0), |(a, b), &(h, t)| {
        let w = 1.0 / (t * t);
        (a + w, b + w * (t - g * h))
    });
    (g, swr / sw)
}

/// The confidence asked of intervals and verdicts unless the caller says otherwise.
pub const CONFIDENCE: f64 = 0.95;

/// A confidence interval of a median from the order statistics of the samples:
/// distribution-free (nothing is assumed of the shape of the timings' distribution, which on a
/// shared machine is skewed and often bimodal).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MedianInterval {
    /// The median of the samples.
    pub median: f64,
    /// Lower end.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
    /// The probability that the interval holds the true median: at least the level asked for,
    /// unless there were too few samples (then the widest interval, `[min, max]`, and its
    /// smaller confidence: see [`MedianInterval::short`]).
    pub level: f64,
    /// Whether the level asked for could not be reached with this many samples.
    pub short: bool,
}

impl MedianInterval {
    /// The interval's half-width relative to the median: `(hi - lo) / 2 / median`.
    pub fn relative_width(&self) -> f64 {
        (self.hi - self.lo) / 2.0 / self.median
    }
}

/// `P(X <= k)` for `X ~ Binomial(n, 1/2)`.
fn binomial_half_cdf(n: usize, k: usize) -> f64 {
    // Terms C(n, i) / 2^n, built up in floating point (n is a count of runs: small).
    let mut term = 0.5f64.powi(n as i32);
    let mut sum = 0.0;
    for i in 0..=k.min(n) {
        sum += term;
        term = term * (n - i) as f64 / (i + 1) as f64;
    }
    sum.min(1.0)
}

/// The confidence interval of the median of `values` at `level` (e.g. [`CONFIDENCE`]): the
/// `k`-th smallest and `k`-th largest samples for the largest `k` whose interval still holds
/// the median with probability `level`: `1 - 2 P(Binomial(n, 1/2) < k)`. With too few samples
/// for `level` (fewer than 6 for 95%) it is `[min, max]` at the confidence that has, marked
/// `short`. `None` without samples.
///
/// ```
/// use mbsp_tools::stats::median_interval;
/// let v: Vec<f64> = (1..=9).map(f64::from).collect();
/// let ci = median_interval(&v, 0.95).unwrap();
/// // 9 samples: the 2nd and 8th smallest hold the median with probability 96.1%.
/// assert_eq!((ci.median, ci.lo, ci.hi), (5.0, 2.0, 8.0));
/// assert!((ci.level - 0.9609).abs() < 1e-4 && !ci.short);
/// let few = median_interval(&[1.0, 2.0, 3.0], 0.95).unwrap();
/// assert_eq!((few.lo, few.hi, few.short), (1.0, 3.0, true));
/// ```
pub fn median_interval(values: &[f64], level: f64) -> Option<MedianInterval> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return None;
    }
    let cover = |k: usize| 1.0 - 2.0 * binomial_half_cdf(n, k - 1);
    // The largest k (1-based, k <= n/2 rounded up) that still covers `level`.
    let mut k = 1;
    while k < n.div_ceil(2) && cover(k + 1) >= level {
        k += 1;
    }
    Some(MedianInterval {
        median: median(&v),
        lo: v[k - 1],
        hi: v[n - k],
        level: cover(k),
        short: cover(k) < level,
    })
}

/// How two configurations' timings compare ([`compare`]): the ratio of A's typical time to
/// B's, with its confidence interval, and whether they differ at that confidence.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Comparison {
    /// A's time over B's: the Hodges–Lehmann estimate (the median of the ratios of every pair
    /// of an A sample and a B sample); below 1: A is faster.
    pub ratio: f64,
    /// Lower end of the ratio's interval.
    pub lo: f64,
    /// Upper end of the ratio's interval.
    pub hi: f64,
    /// The interval's confidence (at least the level asked for, unless there were too few
    /// samples: then [`Comparison::differ`] is `None`).
    pub level: f64,
    /// `Some(true)` when the interval excludes 1 (they differ at that confidence),
    /// `Some(false)` when it holds 1, `None` when there are too few samples to tell at the level
    /// asked for.
    pub differ: Option<bool>,
}

/// Ways to arrange `n` A's and `m` B's with each Mann–Whitney count `u` (the number of (A, B)
/// pairs in which the A is larger), for `u` in `0..=n*m`, as probabilities.
fn mann_whitney_pmf(n: usize, m: usize) -> Vec<f64> {
    // f[i][j][u] over i A's and j B's: the largest element is an A (it beats all j B's) or a
    // B. Kept as probabilities (each arrangement equally likely), one row of j at a time.
    let mut prev: Vec<Vec<f64>> = vec![vec![1.0]; m + 1]; // i = 0: u = 0 for every j
    for i in 1..=n {
        let mut cur: Vec<Vec<f64>> = vec![vec![1.0]; m + 1]; // j = 0: u = 0
        for j in 1..=m {
            let size = i * j + 1;
            let mut f = vec![0.0; size];
            let (pa, pb) = (i as f64 / (i + j) as f64, j as f64 / (i + j) as f64);
            for (u, slot) in f.iter_mut().enumerate() {
                let from_a = u.checked_sub(j).and_then(|w| prev[j].get(w)).copied();
                let from_b = cur[j - 1].get(u).copied();
                *slot = pa * from_a.unwrap_or(0.0) + pb * from_b.unwrap_or(0.0);
            }
            cur[j] = f;
        }
        prev = cur;
    }
    prev.swap_remove(m)
}

/// Pairs up to which [`compare`] uses the exact Mann–Whitney distribution (its cost grows as
/// the square of the pairs); beyond, the normal approximation, which is accurate there.
pub const EXACT_PAIRS: usize = 2_500;

/// Samples per side that [`compare`] works with (see there).
pub const MAX_SIDE: usize = 2_000;

/// `values`, or `MAX_SIDE` evenly spaced order statistics of them when there are more.
fn summarised(values: &[f64]) -> std::borrow::Cow<'_, [f64]> {
    if values.len() <= MAX_SIDE {
        return values.into();
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let last = (v.len() - 1) as f64;
    let step = last / (MAX_SIDE - 1) as f64;
    let picked: Vec<f64> = (0..MAX_SIDE)
        .map(|i| v[(i as f64 * step).round() as usize])
        .collect();
    picked.into()
}

/// The standard normal distribution function, through the complementary error function
/// (the Chebyshev fit of Numerical Recipes' `erfcc`: relative error below 1.2e-7).
fn normal_cdf(z: f64) -> f64 {
    const C: [f64; 10] = [
        -1.265_512_23,
        1.000_023_68,
        0.374_091_96,
        0.096_784_18,
        -0.186_288_06,
        0.278_868_07,
        -1.135_203_98,
        1.488_515_87,
        -0.822_152_23,
        0.170_872_77,
    ];
    let x = -z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * x.abs());
    let poly = C.iter().rev().fold(0.0, |acc, c| acc * t + c);
    let erfc = t * (-x * x + poly).exp();
    0.5 * if x >= 0.0 { erfc } else { 2.0 - erfc }
}

/// Compares two configurations' timings `a` and `b` (seconds, positive): the ratio of their
/// typical times with a distribution-free confidence interval at `level` — the Hodges–Lehmann
/// estimate and the Mann–Whitney interval of the difference of the logarithms (Lehmann,
/// *Nonparametrics*, 1975, §2.6), i.e. of the ratio — and whether they differ. Runs of both
/// should have been interleaved, so that a change of the machine's state falls on both.
///
/// ```
/// use mbsp_tools::stats::compare;
/// let a = [1.00, 1.02, 0.99, 1.01, 1.03, 0.98, 1.00];
/// let b = [1.50, 1.49, 1.52, 1.55, 1.48, 1.51, 1.50];
/// let c = compare(&a, &b, 0.95);
/// assert_eq!(c.differ, Some(true));
/// assert!(c.ratio < 0.7 && c.hi < 1.0);
/// let same = compare(&a, &[1.01, 0.99, 1.02, 1.00, 0.98, 1.03, 1.00], 0.95);
/// assert_eq!(same.differ, Some(false));
/// assert_eq!(compare(&a[..2], &b[..2], 0.95).differ, None);
/// ```
///
/// Cost: the `n·m` pairwise ratios, sorted; the exact Mann–Whitney distribution up to
/// [`EXACT_PAIRS`] pairs, its normal approximation beyond. A side of more than [`MAX_SIDE`]
/// samples is first summarised by that many evenly spaced order statistics (the interval is
/// then that of `MAX_SIDE` samples: wider, never narrower), so that any sample counts a caller
/// gives take bounded time and memory.
pub fn compare(a: &[f64], b: &[f64], level: f64) -> Comparison {
    let (a, b) = (summarised(a), summarised(b));
    let (n, m) = (a.len(), b.len());
    let mut d: Vec<f64> = a
        .iter()
        .flat_map(|x| b.iter().map(move |y| x.ln() - y.ln()))
        .collect();
    d.sort_by(f64::total_cmp);
    let ratio = median(&d).exp();
    if n == 0 || m == 0 {
        return Comparison {
            ratio,
            lo: f64::NAN,
            hi: f64::NAN,
            level: 0.0,
            differ: None,
        };
    }
    // The interval [d_(k), d_(nm+1-k)] holds the true shift with probability 1 - 2 P(U < k).
    // `cdf(u)` = P(U <= u), called for u = 0, 1, ... in turn: exactly, or (many pairs) by the
    // normal approximation with a continuity correction.
    let pairs = n * m;
    let pmf = (pairs <= EXACT_PAIRS).then(|| mann_whitney_pmf(n, m));
    let mean = pairs as f64 / 2.0;
    let sd = (pairs as f64 * (n + m + 1) as f64 / 12.0).sqrt();
    let mut sum = 0.0;
    let mut cdf = |u: usize| match &pmf {
        Some(f) => {
            sum += f[u];
            sum
        }
        None => normal_cdf((u as f64 + 0.5 - mean) / sd),
    };
    let mut below = 0.0; // P(U < k)
    let mut k = 0;
    let mut next = cdf(0); // P(U <= k)
    while k < pairs.div_ceil(2) && 1.0 - 2.0 * next >= level {
        below = next;
        k += 1;
        next = cdf(k);
    }
    if k == 0 {
        // Too few samples: even [min, max] of the differences holds the shift with less
        // than `level`.
        let (lo, hi) = (d[0].exp(), d[d.len() - 1].exp());
        return Comparison {
            ratio,
            lo,
            hi,
            level: 1.0 - 2.0 * next,
            differ: None,
        };
    }
    let (lo, hi) = (d[k - 1].exp(), d[d.len() - k].exp());
    Comparison {
        ratio,
        lo,
        hi,
        level: 1.0 - 2.0 * below,
        differ: Some(lo > 1.0 || hi < 1.0),
    }
}

/// Where a measured time ratio stands against a target ([`at_most`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The whole confidence interval of the ratio is at or below the target.
    Met,
    /// The whole interval is above the target.
    Missed,
    /// The interval holds the target (the machine's noise, or a difference too small for
    /// these samples), or there were too few samples to tell.
    Unclear,
}

impl Verdict {
    /// `met`, `MISSED` or `unclear`.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::Missed => "MISSED",
            Verdict::Unclear => "unclear",
        }
    }
}

/// Whether the time of A is at most `target` times the time of B, from interleaved samples of
/// both (seconds): the ratio and its interval at `level` as [`compare`] makes them, and the
/// verdict that interval allows. A target on a rate (A at least `x` times B's Gflop/s) is
/// `at_most(a, b, 1.0 / x, ..)` on the times. Medians alone say "met" or "missed" on a coin's
/// toss when the target lies inside the noise; this says `Unclear` there.
///
/// ```
/// use mbsp_tools::stats::{Verdict, at_most};
/// let flat = [1.00, 1.02, 0.99, 1.01, 1.03, 0.98, 1.00];
/// let nested = [1.01, 1.03, 1.00, 1.02, 1.04, 0.99, 1.01]; // about 1% slower
/// assert_eq!(at_most(&nested, &flat, 1.05, 0.95).1, Verdict::Met);
/// let slow = [1.20, 1.22, 1.19, 1.21, 1.23, 1.18, 1.20];
/// assert_eq!(at_most(&slow, &flat, 1.05, 0.95).1, Verdict::Missed);
/// let noisy = [0.7, 1.5, 0.9, 1.4, 1.0, 1.3, 0.8];
/// let (c, v) = at_most(&noisy, &flat, 1.05, 0.95);
/// assert_eq!(v, Verdict::Unclear);
/// assert!(c.lo < 1.05 && c.hi > 1.05);
/// assert_eq!(at_most(&slow[..2], &flat[..2], 1.05, 0.95).1, Verdict::Unclear);
/// ```
pub fn at_most(a: &[f64], b: &[f64], target: f64, level: f64) -> (Comparison, Verdict) {
    let c = compare(a, b, level);
    let v = match c.differ {
        None => Verdict::Unclear,
        Some(_) if c.hi <= target => Verdict::Met,
        Some(_) if c.lo > target => Verdict::Missed,
        Some(_) => Verdict::Unclear,
    };
    (c, v)
}

/// A speed ratio and its interval ([`speedup_at_least`]): how many times as fast A is as B.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Speedup {
    /// B's time over A's (the reciprocal of [`Comparison::ratio`]).
    pub ratio: f64,
    /// Lower end of its interval.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
    /// The interval's confidence.
    pub level: f64,
}

/// Whether A (times `a`) is at least `x` times as fast as B (times `b`): [`at_most`] on the
/// times with the target `1 / x`, its ratio and interval turned into speed ratios.
///
/// ```
/// use mbsp_tools::stats::{Verdict, speedup_at_least};
/// let base = [1.00, 1.02, 0.99, 1.01, 1.03, 0.98, 1.00];
/// let fast: Vec<f64> = base.iter().map(|t| t / 1.5).collect();
/// let (s, v) = speedup_at_least(&fast, &base, 1.2, 0.95);
/// assert_eq!(v, Verdict::Met);
/// assert!(1.2 <= s.lo && s.lo <= s.ratio && s.ratio <= s.hi);
/// assert_eq!(speedup_at_least(&base, &fast, 1.2, 0.95).1, Verdict::Missed);
/// ```
pub fn speedup_at_least(a: &[f64], b: &[f64], x: f64, level: f64) -> (Speedup, Verdict) {
    let (c, v) = at_most(a, b, 1.0 / x, level);
    let s = Speedup {
        ratio: 1.0 / c.ratio,
        lo: 1.0 / c.hi,
        hi: 1.0 / c.lo,
        level: c.level,
    };
    (s, v)
}

/// Whether the typical value of `values` (a time, say) is at most `target`: the median's
/// interval at `level` ([`median_interval`]) and the verdict it allows, as [`at_most`] judges a
/// ratio. Unclear where the interval holds the target or the samples are too few for `level`.
///
/// ```
/// use mbsp_tools::stats::{Verdict, median_at_most};
/// let v = [2.1, 2.0, 2.2, 1.9, 2.0, 2.1, 2.0];
/// assert_eq!(median_at_most(&v, 2.5, 0.95).1, Verdict::Met);
/// assert_eq!(median_at_most(&v, 1.5, 0.95).1, Verdict::Missed);
/// assert_eq!(median_at_most(&v, 2.05, 0.95).1, Verdict::Unclear);
/// assert_eq!(median_at_most(&v[..3], 2.5, 0.95).1, Verdict::Unclear); // too few for 95%
/// ```
pub fn median_at_most(
    values: &[f64],
    target: f64,
    level: f64,
) -> (Option<MedianInterval>, Verdict) {
    let ci = median_interval(values, level);
    let v = match ci {
        Some(c) if !c.short && c.hi <= target => Verdict::Met,
        Some(c) if !c.short && c.lo > target => Verdict::Missed,
        _ => Verdict::Unclear,
    };
    (ci, v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_normal_distribution_function() {
        for (z, want) in [
            (0.0, 0.5),
            (1.959_964, 0.975),
            (-1.959_964, 0.025),
            (-3.0, 0.001_35),
        ] {
            assert!(
                (normal_cdf(z) - want).abs() < 1e-5,
                "z = {z}: {}",
                normal_cdf(z)
            );
        }
    }

    /// Where `compare` switches to the normal approximation (past `EXACT_PAIRS`), it agrees
    /// with the exact Mann–Whitney distribution in the tails the intervals are cut from.
    #[test]
    fn the_normal_approximation_agrees_with_the_exact_distribution_past_the_switch() {
        let (n, m) = (60, 60);
        assert!(n * m > EXACT_PAIRS);
        let pmf = mann_whitney_pmf(n, m);
        let (mean, sd) = (
            (n * m) as f64 / 2.0,
            ((n * m * (n + m + 1)) as f64 / 12.0).sqrt(),
        );
        let mut exact = 0.0;
        for (u, p) in pmf.iter().enumerate().take(n * m / 2) {
            exact += p;
            if (0.001..0.05).contains(&exact) {
                let approx = normal_cdf((u as f64 + 0.5 - mean) / sd);
                assert!(
                    (approx - exact).abs() < 0.002,
                    "u = {u}: {approx} against {exact}"
                );
            }
        }
    }

    /// Many samples take bounded time (summarised sides, the normal approximation) and still
    /// tell a shift from none.
    #[test]
    fn many_samples_are_compared_without_blowing_up() {
        let a: Vec<f64> = (0..20_000)
            .map(|i| 1.0 + (i % 97) as f64 / 1000.0)
            .collect();
        let b: Vec<f64> = a.iter().map(|x| x * 1.3).collect();
        let c = compare(&a, &b, 0.95);
        assert_eq!(c.differ, Some(true));
        assert!(c.hi < 1.0 && (c.ratio - 1.0 / 1.3).abs() < 0.01, "{c:?}");
        let same = compare(&a, &a[..5_000], 0.95);
        assert_eq!(same.differ, Some(false), "{same:?}");
        assert_eq!(summarised(&a).len(), MAX_SIDE);
    }

    #[test]
    fn median_and_range() {
        let s = Samples(vec![3.0, 1.0, 2.0]);
        assert_eq!(s.median(), 2.0);
        assert_eq!(s.range(), (1.0, 3.0));
        assert_eq!(Samples(vec![1.0, 2.0, 3.0, 10.0]).median(), 2.5);
        assert_eq!(median(&[7.0]), 7.0);
        assert_eq!(median(&[4.0, 2.0]), 3.0);
    }

    #[test]
    fn the_mann_whitney_distribution_is_exact() {
        // Two of each: the 6 arrangements give U = 0, 1, 2, 2, 3, 4.
        let f = mann_whitney_pmf(2, 2);
        let want = [1.0, 1.0, 2.0, 1.0, 1.0].map(|c| c / 6.0);
        assert!(
            f.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12),
            "{f:?}"
        );
        // Sums to one, symmetric, for unequal sizes too.
        let f = mann_whitney_pmf(3, 5);
        assert_eq!(f.len(), 16);
        assert!((f.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(
            f.iter()
                .zip(f.iter().rev())
                .all(|(a, b)| (a - b).abs() < 1e-12)
        );
        // C(10, 5) = 252 arrangements of 5 and 5; U = 0 and U = 1 once each, U = 2 twice.
        let f = mann_whitney_pmf(5, 5);
        assert!((f[0] * 252.0 - 1.0).abs() < 1e-9 && (f[2] * 252.0 - 2.0).abs() < 1e-9);
    }

    #[test]
    fn intervals_hold_their_level_on_random_samples() {
        // Coverage checked by simulation: skewed samples (exponential), known median ln 2.
        let mut rng = mbsp::rng::SplitMix64::new(7);
        let mut hits = 0;
        let trials = 2000;
        for _ in 0..trials {
            let v: Vec<f64> = (0..9).map(|_| -(1.0 - rng.next_f64()).ln()).collect();
            let ci = median_interval(&v, 0.95).unwrap();
            hits += usize::from(ci.lo <= std::f64::consts::LN_2 && std::f64::consts::LN_2 <= ci.hi);
        }
        let rate = hits as f64 / trials as f64;
        assert!(rate > 0.93, "coverage {rate}");
        // Two configurations of one distribution are said to differ in about 5% of trials,
        // and a 20% shift is found almost always with 9 runs each at this spread.
        let (mut false_alarms, mut found) = (0, 0);
        for _ in 0..trials {
            let a: Vec<f64> = (0..9).map(|_| 1.0 + 0.05 * rng.next_f64()).collect();
            let b: Vec<f64> = (0..9).map(|_| 1.0 + 0.05 * rng.next_f64()).collect();
            let c: Vec<f64> = b.iter().map(|x| 1.2 * x).collect();
            false_alarms += usize::from(compare(&a, &b, 0.95).differ == Some(true));
            found += usize::from(compare(&a, &c, 0.95).differ == Some(true));
        }
        assert!(
            (false_alarms as f64) < 0.08 * trials as f64,
            "{false_alarms}"
        );
        assert_eq!(found, trials);
    }
}
