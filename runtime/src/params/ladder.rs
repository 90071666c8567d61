//! The time per word of h-relations of bulk puts at several sizes, as `mbsp params` measures
//! them: what one `g` cannot say where the rate depends on the size.
//!
//! Why: on a machine whose cores exchange data through their caches, a small h-relation reads
//! lines the other core has just written (each line crosses between the cores), a larger one
//! finds its data in the shared cache, and one past the caches streams from memory. The three
//! rates can differ several times over (docs/benchmarks.md has a virtual machine's), so one
//! `g` and one `g_far` price the middle sizes at the wrong rate. `mbsp params` times bulk
//! puts on a ladder of sizes up to its far h-relation anyway (it finds the cache's edge
//! there); the ladder prices the sizes between its rungs.

use super::error::ParamsError;

/// The most rungs a [`Ladder`] holds (`mbsp params` measures seven).
pub const LADDER_MAX: usize = 8;

/// The fewest words per process of an h-relation whose rung [`Ladder::of_h_relations`] keeps:
/// from here a superstep's and a put's own costs (tens of nanoseconds) are about a percent of
/// the time its words take, or less.
pub const LADDER_MIN_H: f64 = 16384.0;

/// Seconds per 8-byte word of h-relations of bulk puts, measured at a few sizes of a
/// process's data (bytes sent and received per process, increasing): where
/// [`Params::g_for`](super::Params::g_for) is asked for a size between the first rung and the
/// last, it interpolates between the two rungs around it (linearly in the logarithms of both
/// the size and the time per word). Small and `Copy`, as [`Params`](super::Params) is.
///
/// ```
/// use mbsp::params::Ladder;
/// let l = Ladder::new(&[(1e6, 1e-9), (4e6, 4e-9)]).unwrap();
/// assert_eq!(l.at(1e6), Some(1e-9));
/// // Halfway in log size: the geometric mean of the rungs' times.
/// assert!((l.at(2e6).unwrap() - 2e-9).abs() < 1e-18);
/// assert_eq!((l.at(5e5), l.at(5e6)), (None, None));
/// assert!(Ladder::new(&[(4e6, 1e-9), (1e6, 1e-9)]).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ladder {
    len: usize,
    bytes: [f64; LADDER_MAX],
    per_word: [f64; LADDER_MAX],
}

impl Ladder {
    /// A ladder without rungs: [`Ladder::at`] is `None` everywhere.
    pub const EMPTY: Ladder = Ladder {
        len: 0,
        bytes: [0.0; LADDER_MAX],
        per_word: [0.0; LADDER_MAX],
    };

    /// A ladder of `(bytes per process, seconds per word)` rungs: at most [`LADDER_MAX`],
    /// sizes increasing, every figure positive and finite (a [`ParamsError`] says which is
    /// not).
    pub fn new(rungs: &[(f64, f64)]) -> Result<Ladder, ParamsError> {
        if rungs.len() > LADDER_MAX {
            return Err(ParamsError::invalid(format!(
                "a ladder holds at most {LADDER_MAX} sizes, not {}",
                rungs.len()
            )));
        }
        let mut l = Ladder::EMPTY;
        for (i, &(bytes, per_word)) in rungs.iter().enumerate() {
            let ok = |x: f64| x.is_finite() && x > 0.0;
            if !ok(bytes) || !ok(per_word) {
                return Err(ParamsError::invalid(format!(
                    "ladder rung {i}: ({bytes}, {per_word}) is not a positive size and time"
                )));
            }
            if i > 0 && bytes <= l.bytes[i - 1] {
                return Err(ParamsError::invalid(format!(
                    "ladder rung {i}: {bytes} bytes after {}: sizes must increase",
                    l.bytes[i - 1]
                )));
            }
            l.bytes[i] = bytes;
            l.per_word[i] = per_word;
            l.len = i + 1;
        }
        Ok(l)
    }

    /// A ladder of h-relations as `mbsp params` measures them: `(h, seconds per word)` rungs,
    /// `h` the words each process sends and receives, so its data is `16·h` bytes. Rungs of
    /// fewer than [`LADDER_MIN_H`] words are left out: their time per word holds the
    /// superstep's and the put's own costs, which `l` and `g_msg` price already (a quick
    /// measurement's whole ladder lies there).
    ///
    /// ```
    /// use mbsp::params::Ladder;
    /// let l = Ladder::of_h_relations(&[(4096.0, 3e-9), (65536.0, 1e-9)]).unwrap();
    /// assert_eq!(l.rungs().collect::<Vec<_>>(), [(1048576.0, 1e-9)]);
    /// ```
    pub fn of_h_relations(rungs: &[(f64, f64)]) -> Result<Ladder, ParamsError> {
        let bytes: Vec<(f64, f64)> = rungs
            .iter()
            .filter(|&&(h, _)| h.is_nan() || h >= LADDER_MIN_H)
            .map(|&(h, g)| (16.0 * h, g))
            .collect();
        Ladder::new(&bytes)
    }

    /// The rungs, `(bytes per process, seconds per word)`, sizes increasing.
    pub fn rungs(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        (0..self.len).map(|i| (self.bytes[i], self.per_word[i]))
    }

    /// Whether the ladder has no rungs.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Seconds per word at `bytes` of data per process: a rung's own figure, or between two
    /// rungs the log-log interpolation of theirs; `None` outside the rungs (and for an empty
    /// ladder), where the single rates apply.
    pub fn at(&self, bytes: f64) -> Option<f64> {
        let n = self.len;
        if n == 0 || !(bytes >= self.bytes[0] && bytes <= self.bytes[n - 1]) {
            return None;
        }
        // The first rung at or above `bytes` (one exists: `bytes` is at most the last).
        let hi = (0..n).find(|&i| self.bytes[i] >= bytes)?;
        if hi == 0 || self.bytes[hi] == bytes {
            return Some(self.per_word[hi]);
        }
        let lo = hi - 1;
        let t = (bytes / self.bytes[lo]).ln() / (self.bytes[hi] / self.bytes[lo]).ln();
        let (a, b) = (self.per_word[lo].ln(), self.per_word[hi].ln());
        Some((a + t * (b - a)).exp())
    }

    /// How far past the caches data of `bytes` per process lies, as the ladder measured it:
    /// where its rate at `bytes` lies between its fastest rung's (0: the data stays in a
    /// cache) and its last rung's (1: it streams from memory), clamped to that range; 0 at or
    /// below the fastest rung, 1 past the last. `None` for an empty ladder, below its first
    /// rung, or a ladder whose last rung is its fastest (it shows no edge).
    ///
    /// Why not one edge: between the caches and memory the rate rises over a range of sizes
    /// (a shared cache holds part of the data, other programs hold the rest), and a halfway
    /// point found on a few noisy rungs jumps across that range from one measurement to the
    /// next; the share follows the measured curve instead.
    ///
    /// ```
    /// use mbsp::params::Ladder;
    /// let l = Ladder::new(&[(1e6, 2e-9), (2e6, 1e-9), (4e6, 2e-9), (8e6, 3e-9)]).unwrap();
    /// assert_eq!(l.far_share(1.5e6), Some(0.0)); // below the fastest rung: in a cache
    /// assert!((l.far_share(4e6).unwrap() - 0.5).abs() < 1e-12);
    /// assert_eq!((l.far_share(8e6), l.far_share(1e9)), (Some(1.0), Some(1.0)));
    /// assert_eq!(l.far_share(5e5), None);
    /// ```
    pub fn far_share(&self, bytes: f64) -> Option<f64> {
        let n = self.len;
        if n == 0 || bytes.is_nan() || bytes < self.bytes[0] {
            return None;
        }
        let fastest = (0..n).min_by(|&i, &j| self.per_word[i].total_cmp(&self.per_word[j]))?;
        if fastest == n - 1 {
            return None;
        }
        if bytes > self.bytes[n - 1] {
            return Some(1.0);
        }
        if bytes <= self.bytes[fastest] {
            return Some(0.0);
        }
        let (near, far) = (self.per_word[fastest], self.per_word[n - 1]);
        let at = self.at(bytes)?;
        Some(((at - near) / (far - near)).clamp(0.0, 1.0))
    }
}

impl Default for Ladder {
    fn default() -> Self {
        Ladder::EMPTY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ladder_interpolates_between_its_rungs_only() {
        let l = Ladder::new(&[(1e6, 1e-9), (2e6, 0.5e-9), (8e6, 2e-9)]).unwrap();
        assert_eq!(l.rungs().count(), 3);
        assert_eq!(l.at(2e6), Some(0.5e-9));
        assert_eq!(l.at(8e6), Some(2e-9));
        // Halfway between 2 and 8 MB in log size: sqrt(0.5 * 2) ns.
        assert!((l.at(4e6).unwrap() - 1e-9).abs() < 1e-18);
        // A rate between its neighbours' everywhere between them.
        for k in 1..100 {
            let b = 1e6 + k as f64 * 7e4;
            let g = l.at(b).unwrap();
            assert!((0.5e-9..=2e-9).contains(&g), "{b}: {g}");
        }
        assert_eq!(l.at(0.99e6), None);
        assert_eq!(l.at(f64::NAN), None);
        assert_eq!(Ladder::EMPTY.at(1e6), None);
        assert!(Ladder::EMPTY.is_empty() && !l.is_empty());
    }

    #[test]
    fn the_far_share_follows_the_rungs_from_the_fastest_to_the_last() {
        // Slow small puts (lines crossing between cores), fastest at 4 MB, memory from 16 MB.
        let l =
            Ladder::new(&[(1e6, 0.9e-9), (4e6, 0.4e-9), (16e6, 1.4e-9), (64e6, 2.4e-9)]).unwrap();
        assert_eq!(l.far_share(2e6), Some(0.0));
        assert!((l.far_share(16e6).unwrap() - 0.5).abs() < 1e-12);
        let mut last = 0.0;
        for k in 0..=100 {
            let s = l.far_share(4e6 * 16f64.powf(k as f64 / 100.0)).unwrap();
            assert!(s >= last && s <= 1.0, "{k}: {s} after {last}");
            last = s;
        }
        assert_eq!(last, 1.0);
        // A rung slower than the last (noise) is as far as the last.
        let bumpy = Ladder::new(&[(1e6, 0.5e-9), (2e6, 3e-9), (4e6, 2e-9)]).unwrap();
        assert_eq!(bumpy.far_share(2e6), Some(1.0));
        // No edge: the last rung is the fastest.
        let flat = Ladder::new(&[(1e6, 2e-9), (2e6, 1e-9)]).unwrap();
        assert_eq!(flat.far_share(1.5e6), None);
        assert_eq!(Ladder::EMPTY.far_share(1e6), None);
        assert_eq!(l.far_share(f64::NAN), None);
    }

    #[test]
    fn a_bad_ladder_says_which_rung() {
        let e = |r: &[(f64, f64)]| Ladder::new(r).unwrap_err().to_string();
        assert!(e(&[(1e6, 1e-9), (1e6, 2e-9)]).contains("rung 1"));
        assert!(e(&[(1e6, -1e-9)]).contains("rung 0"));
        assert!(e(&[(1.0, 1e-9); 9]).contains("at most 8"));
    }
}
