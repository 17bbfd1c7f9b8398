//! Key populations: which key in `0..size` an operation touches.
//!
//! `seq` is a pure function of the operation index (so a seq write run of
//! `size` operations touches every key exactly once, whatever the
//! concurrency); `uniform` and `gaussian` draw from the worker's RNG.
//! Gaussian keys have their mean in the middle of the range and a standard
//! deviation of a sixth of it (so +-3 sigma spans the range), clamped into
//! range; the normal deviate comes from the Box–Muller transform.

use rand::Rng;

use crate::args::PopulationKind;

/// A key generator over `0..size`.
#[derive(Debug, Clone, Copy)]
pub struct Population {
    kind: PopulationKind,
    size: u64,
}

impl Population {
    /// `size` must be at least 1 (checked by `Config`).
    pub fn new(kind: PopulationKind, size: u64) -> Population {
        assert!(size > 0, "empty population");
        Population { kind, size }
    }

    /// The key of operation `index`.
    pub fn key(&self, index: u64, rng: &mut impl Rng) -> u64 {
        let key = match self.kind {
            PopulationKind::Seq => index % self.size,
            PopulationKind::Uniform => rng.gen_range(0..self.size),
            PopulationKind::Gaussian => self.gaussian(rng),
        };
        debug_assert!(key < self.size);
        key
    }

    fn gaussian(&self, rng: &mut impl Rng) -> u64 {
        let size = self.size as f64;
        let x = size / 2.0 + standard_normal(rng) * size / 6.0;
        // The float-to-int cast saturates (NaN -> 0), and the clamp keeps the
        // tails inside the range.
        (x.floor().max(0.0) as u64).min(self.size - 1)
    }
}

/// One N(0, 1) sample (Box–Muller; the second sample of the pair is dropped,
/// which costs one extra `ln`/`sqrt` per key and keeps the generator stateless).
fn standard_normal(rng: &mut impl Rng) -> f64 {
    // u1 in (0, 1] so ln(u1) is finite.
    let u1 = 1.0 - rng.gen::<f64>();
    let u2 = rng.gen::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn seq_counts_up_and_wraps() {
        let pop = Population::new(PopulationKind::Seq, 5);
        let mut rng = StdRng::seed_from_u64(1);
        let keys: Vec<u64> = (0..12).map(|i| pop.key(i, &mut rng)).collect();
        assert_eq!(keys, [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]);
    }

    #[test]
    fn uniform_covers_the_range() {
        let pop = Population::new(PopulationKind::Uniform, 10);
        let mut rng = StdRng::seed_from_u64(2);
        let mut seen = [0u32; 10];
        for i in 0..10_000 {
            seen[pop.key(i, &mut rng) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
    }

    #[test]
    fn gaussian_is_centred_with_a_sixth_of_the_range_as_stdev() {
        let size = 60_000u64;
        let pop = Population::new(PopulationKind::Gaussian, size);
        let mut rng = StdRng::seed_from_u64(3);
        let n = 200_000;
        let keys: Vec<f64> = (0..n).map(|i| pop.key(i, &mut rng) as f64).collect();
        let mean = keys.iter().sum::<f64>() / n as f64;
        let var = keys.iter().map(|k| (k - mean).powi(2)).sum::<f64>() / n as f64;
        assert!((mean - 30_000.0).abs() < 100.0, "mean {mean}");
        // Clamping the 0.27% beyond 3 sigma shrinks the spread a little.
        assert!((var.sqrt() - 10_000.0).abs() < 200.0, "stdev {}", var.sqrt());
        let within_1_sigma = keys.iter().filter(|&&k| (20_000.0..40_000.0).contains(&k)).count();
        let share = within_1_sigma as f64 / n as f64;
        assert!((share - 0.6827).abs() < 0.01, "share within 1 sigma {share}");
    }

    #[test]
    fn gaussian_stays_in_range_even_when_tiny() {
        for size in [1, 2, 3, 7] {
            let pop = Population::new(PopulationKind::Gaussian, size);
            let mut rng = StdRng::seed_from_u64(size);
            assert!((0..10_000).all(|i| pop.key(i, &mut rng) < size));
        }
    }
}
