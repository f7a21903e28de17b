use rand::RngExt;

/// Zipfian integers in `0..n` with skew `theta` (0 = uniform; YCSB uses 0.99), by the rejection-free
/// method of Gray et al. ("Quickly generating billion-record synthetic databases") that YCSB and
/// DBx1000 use. Rank 0 is the most popular; the constants are computed once in O(n).
#[derive(Clone, Debug)]
pub struct Zipf {
    n: u64,
    zetan: f64,
    tail: Tail,
    /// `1 + 0.5^theta`: below it (scaled by `zetan`) the rank is 1.
    rank1: f64,
}

/// How a draw past rank 1 becomes a rank.
#[derive(Clone, Copy, Debug)]
enum Tail {
    /// Gray et al.'s `n * (eta * u - eta + 1) ^ (1 / (1 - theta))`.
    Power { eta: f64, exponent: f64 },
    /// Its limit at `theta = 1` (the harmonic case, where the exponent has no value):
    /// `n * exp(k * (u - 1))`.
    Harmonic { k: f64 },
}

fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

/// Largest skew (exclusive) a workload accepts: past it nearly every draw is rank 0, and
/// `0.5^theta` and the tail's exponent lose their precision.
const MAX_SKEW: f64 = 10.0;

impl Zipf {
    /// Checks a skew given by command-line option `option`, with a message fit for its user.
    pub fn check_skew(option: &str, theta: f64) -> Result<(), String> {
        if (0.0..MAX_SKEW).contains(&theta) {
            Ok(())
        } else {
            Err(format!("{option} must be in [0, {MAX_SKEW})"))
        }
    }

    /// A generator over `0..n` (n ≥ 1) with skew `theta` ≥ 0.
    pub fn new(n: u64, theta: f64) -> Zipf {
        assert!(n >= 1, "a zipfian needs at least one item");
        let zetan = zeta(n, theta);
        let zeta2 = zeta(2.min(n), theta);
        let spread = 1.0 - zeta2 / zetan;
        let tail = if (theta - 1.0).abs() < 1e-9 {
            Tail::Harmonic {
                k: (n as f64 / 2.0).ln() / spread,
            }
        } else {
            Tail::Power {
                eta: (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / spread,
                exponent: 1.0 / (1.0 - theta),
            }
        };
        Zipf {
            n,
            zetan,
            tail,
            rank1: 1.0 + 0.5f64.powf(theta),
        }
    }

    /// The next rank.
    #[inline]
    pub fn sample(&self, rng: &mut impl RngExt) -> u64 {
        let u: f64 = rng.random();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < self.rank1 {
            return 1.min(self.n - 1);
        }
        let scale = match self.tail {
            Tail::Power { eta, exponent } => (eta * u - eta + 1.0).powf(exponent),
            Tail::Harmonic { k } => (k * (u - 1.0)).exp(),
        };
        ((self.n as f64 * scale) as u64).min(self.n - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    #[test]
    fn a_skew_is_checked_against_the_range_every_workload_accepts() {
        for ok in [0.0, 0.99, 1.0, 9.99] {
            assert_eq!(Zipf::check_skew("--alpha", ok), Ok(()));
        }
        for bad in [-0.1, MAX_SKEW, 10.5, f64::NAN, f64::INFINITY] {
            assert_eq!(
                Zipf::check_skew("--theta", bad),
                Err("--theta must be in [0, 10)".into()),
                "{bad}"
            );
        }
    }

    #[test]
    fn skew_concentrates_on_low_ranks() {
        let mut rng = SmallRng::seed_from_u64(1);
        let z = Zipf::new(1000, 0.99);
        let mut counts = vec![0u32; 1000];
        for _ in 0..100_000 {
            counts[z.sample(&mut rng) as usize] += 1;
        }
        assert!(counts[0] > counts[10] && counts[10] > counts[500]);
        assert!(
            counts[0] as f64 / 100_000.0 > 0.1,
            "rank 0 share {}",
            counts[0]
        );
        let u = Zipf::new(1000, 0.0);
        let mut low = 0;
        for _ in 0..100_000 {
            low += (u.sample(&mut rng) < 500) as u32;
        }
        assert!((45_000..55_000).contains(&low), "uniform halves: {low}");
    }

    #[test]
    fn skew_one_draws_the_harmonic_distribution_and_sits_between_its_neighbours() {
        let n = 10_000u64;
        let draws = 400_000;
        let share_below = |theta: f64, limit: u64| {
            let z = Zipf::new(n, theta);
            let mut rng = SmallRng::seed_from_u64(7);
            (0..draws).filter(|_| z.sample(&mut rng) < limit).count() as f64 / draws as f64
        };
        let harmonic = |m: u64| (1..=m).map(|i| 1.0 / i as f64).sum::<f64>();
        // Rank 0 is drawn with probability 1 / H(n), and ranks below m about H(m) / H(n).
        let top = share_below(1.0, 1);
        assert!(
            (top - 1.0 / harmonic(n)).abs() < 0.005,
            "rank 0 share {top}"
        );
        for m in [10, 100, 1000] {
            let got = share_below(1.0, m);
            let want = harmonic(m) / harmonic(n);
            assert!(
                (got - want).abs() < 0.02,
                "ranks below {m}: {got} against {want}"
            );
            let (lower, higher) = (share_below(0.98, m), share_below(1.02, m));
            assert!(
                lower < got && got < higher,
                "{lower} < {got} < {higher} at {m}"
            );
        }
    }
}
