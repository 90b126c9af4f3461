//! The Knuth (Fisher–Yates) shuffle over an injected source of randomness,
//! and a small seeded generator, so a recorded seed replays a decision.

/// Uniform choices; implemented by [`SplitMix64`] here and by any RNG the
/// platform injects.
pub trait RandomSource {
    /// A uniformly distributed integer in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize;
}

/// Steele, Lea and Flood's SplitMix64: tiny, fast, well distributed, and
/// the same on every platform (wasm included), so a stored seed always
/// replays the same shuffle.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl RandomSource for SplitMix64 {
    fn below(&mut self, n: usize) -> usize {
        assert!(n > 0, "below(0)");
        // Rejection sampling: without it the low values would be slightly
        // favoured whenever n does not divide 2^64.
        let n = n as u64;
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let x = self.next_u64();
            if x < zone {
                return (x % n) as usize;
            }
        }
    }
}

/// Shuffles `items` in place: for i from the last index down to 1, swap
/// item i with a uniformly chosen item in 0..=i. Every permutation is
/// equally likely when the source is uniform.
pub fn fisher_yates<T>(items: &mut [T], rng: &mut impl RandomSource) {
    for i in (1..items.len()).rev() {
        let j = rng.below(i + 1);
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn the_same_seed_gives_the_same_order() {
        let mut a: Vec<u32> = (0..10).collect();
        let mut b = a.clone();
        fisher_yates(&mut a, &mut SplitMix64::new(42));
        fisher_yates(&mut b, &mut SplitMix64::new(42));
        assert_eq!(a, b);
        let mut c: Vec<u32> = (0..10).collect();
        fisher_yates(&mut c, &mut SplitMix64::new(43));
        assert_ne!(a, c, "another seed, another order");
    }

    /// A scripted source: checks the algorithm's index sequence exactly.
    struct Script(Vec<usize>, Vec<usize>);
    impl RandomSource for Script {
        fn below(&mut self, n: usize) -> usize {
            self.1.push(n);
            self.0.remove(0)
        }
    }

    #[test]
    fn draws_from_shrinking_ranges_and_swaps() {
        let mut items = ['a', 'b', 'c', 'd'];
        let mut rng = Script(vec![0, 2, 1], vec![]);
        fisher_yates(&mut items, &mut rng);
        assert_eq!(rng.1, vec![4, 3, 2], "i = 3, 2, 1 draw below i + 1");
        // i=3 swaps with 0: d b c a; i=2 swaps with 2: d b c a; i=1 with 1.
        assert_eq!(items, ['d', 'b', 'c', 'a']);
    }

    /// Every permutation of 4 items appears, each about 1/24 of the time:
    /// a chi-square bound (23 degrees of freedom; 49.7 is the 0.1% point).
    #[test]
    fn all_permutations_are_equally_likely() {
        let trials = 48_000;
        let mut counts: HashMap<Vec<u8>, u32> = HashMap::new();
        let mut rng = SplitMix64::new(7);
        for _ in 0..trials {
            let mut v = vec![0u8, 1, 2, 3];
            fisher_yates(&mut v, &mut rng);
            *counts.entry(v).or_default() += 1;
        }
        assert_eq!(counts.len(), 24);
        let expected = trials as f64 / 24.0;
        let chi2: f64 = counts.values().map(|&c| (c as f64 - expected).powi(2) / expected).sum();
        assert!(chi2 < 49.7, "chi-square {chi2:.1} over 23 degrees of freedom");
    }

    proptest! {
        #[test]
        fn a_shuffle_is_a_permutation(items in prop::collection::vec(any::<u16>(), 0..40), seed in any::<u64>()) {
            let mut shuffled = items.clone();
            fisher_yates(&mut shuffled, &mut SplitMix64::new(seed));
            let (mut a, mut b) = (items, shuffled);
            a.sort();
            b.sort();
            prop_assert_eq!(a, b);
        }

        #[test]
        fn below_stays_in_range(n in 1usize..1000, seed in any::<u64>()) {
            prop_assert!(SplitMix64::new(seed).below(n) < n);
        }
    }
}
