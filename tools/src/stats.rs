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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_range() {
        let s = Samples(vec![3.0, 1.0, 2.0]);
        assert_eq!(s.median(), 2.0);
        assert_eq!(s.range(), (1.0, 3.0));
        assert_eq!(Samples(vec![1.0, 2.0, 3.0, 10.0]).median(), 2.5);
        assert_eq!(median(&[7.0]), 7.0);
        assert_eq!(median(&[4.0, 2.0]), 3.0);
    }
}
