//! Repeated measurements: median and spread.

/// Samples of one figure (e.g. nanoseconds per superstep).
#[derive(Clone, Debug)]
pub struct Samples(pub Vec<f64>);

impl Samples {
    /// Collect `n` samples from `f`.
    pub fn collect(n: usize, mut f: impl FnMut() -> f64) -> Samples {
        Samples((0..n).map(|_| f()).collect())
    }

    /// The median.
    pub fn median(&self) -> f64 {
        let mut v = self.0.clone();
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

/// Format nanoseconds compactly.
pub fn ns(v: f64) -> String {
    if v >= 100_000.0 {
        format!("{:.0} µs", v / 1000.0)
    } else if v >= 10_000.0 {
        format!("{:.1} µs", v / 1000.0)
    } else {
        format!("{v:.0} ns")
    }
}

/// Format a rate in GB/s.
pub fn gbs(v: f64) -> String {
    format!("{v:.2}")
}

/// Fit `t = l + g h` to the points: `g` by least squares (as the BSPlib paper does; the large
/// h-relations, where t is large, decide it), then `l` as the intercept that minimises the
/// relative errors for that `g` (weights 1/t², so the small h-relations decide it; a plain fit's
/// intercept is a small difference of large numbers and often negative): (g, l).
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
    }
}
