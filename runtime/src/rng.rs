//! A small deterministic random-number generator, SplitMix64 (Steele, Lea and Flood, "Fast
//! splittable pseudorandom number generators", OOPSLA 2014): 64 bits of state, a full period of
//! 2^64, and output that passes BigCrush.
//!
//! It is here for SPMD programs whose processes must draw the *same* numbers without talking
//! to each other: every process seeds a generator alike and rebuilds another process's input,
//! or a test draws a random program that every process then runs. Results that depend only on
//! the seed, never on timing, make a parallel run repeatable. It is not a cryptographic
//! generator, and not a statistical one for Monte Carlo work of any size (use the `rand`
//! family there).
//!
//! ```
//! use mbsp::rng::SplitMix64;
//! let mut a = SplitMix64::new(42);
//! let mut b = SplitMix64::new(42);
//! let draws: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
//! assert_eq!(draws, (0..4).map(|_| b.next_u64()).collect::<Vec<_>>());
//! assert!(a.below(10) < 10);
//! let x = a.next_f64();
//! assert!((0.0..1.0).contains(&x));
//! ```

/// The increment of SplitMix64's counter: 2^64 divided by the golden ratio, rounded to odd.
pub const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64: a counter advanced by [`GOLDEN`] and hashed by [`SplitMix64::mix`] (module
/// documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose first number is `mix(seed + GOLDEN)`: any seed is fine, 0 included.
    pub const fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// SplitMix64's finaliser: a bijective 64-bit mixing function, useful alone as a hash of
    /// an index (`mix(seed ^ i)` gives every process or item its own stream of seeds).
    ///
    /// ```
    /// use mbsp::rng::SplitMix64;
    /// assert_ne!(SplitMix64::mix(1), SplitMix64::mix(2));
    /// assert_eq!(SplitMix64::mix(0), 0);
    /// ```
    #[inline]
    pub const fn mix(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        Self::mix(self.state)
    }

    /// A number in `0..n`, by the high half of a 64 x 64-bit product (Lemire's method without
    /// its rejection step: each value's probability is off by at most `n / 2^64`).
    ///
    /// # Panics
    /// If `n` is 0 (there is no number in `0..0`).
    #[inline]
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0, "SplitMix64::below(0): the range 0..0 is empty");
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// A number in `[0, 1)` with 53 random bits (every double of that form equally likely).
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Shuffle `v` in place (Fisher-Yates): every order equally likely, up to [`below`]'s bias.
    ///
    /// [`below`]: SplitMix64::below
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference outputs of SplitMix64 for seed 1234567 (from the authors' C code, as
    /// quoted by the xoshiro/xoroshiro authors' test vectors).
    #[test]
    fn matches_the_reference_sequence() {
        let mut r = SplitMix64::new(1234567);
        let want = [
            6457827717110365317u64,
            3203168211198807973,
            9817491932198370423,
            4593380528125082431,
            16408922859458223821,
        ];
        for w in want {
            assert_eq!(r.next_u64(), w);
        }
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = SplitMix64::new(7);
        let mut seen = [0usize; 7];
        for _ in 0..7000 {
            seen[r.below(7)] += 1;
        }
        assert!(seen.iter().all(|&c| c > 800), "{seen:?}");
    }

    #[test]
    fn unit_interval_and_shuffle() {
        let mut r = SplitMix64::new(3);
        for _ in 0..1000 {
            let x = r.next_f64();
            assert!((0.0..1.0).contains(&x));
        }
        let mut v: Vec<u32> = (0..50).collect();
        r.shuffle(&mut v);
        let mut sorted = v.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        assert_ne!(v, sorted);
    }
}
