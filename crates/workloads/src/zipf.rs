use rand::RngExt;

/// Zipfian integers in `0..n` with skew `theta` (0 = uniform; YCSB uses 0.99), by the rejection-free
/// method of Gray et al. ("Quickly generating billion-record synthetic databases") that YCSB and
/// DBx1000 use. Rank 0 is the most popular; the constants are computed once in O(n).
#[derive(Clone, Debug)]
pub struct Zipf {
    n: u64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    /// `1 + 0.5^theta`: below it (scaled by `zetan`) the rank is 1.
    rank1: f64,
}

fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

impl Zipf {
    /// A generator over `0..n` (n ≥ 1) with skew `theta` in `0..1` or above 1 (not exactly 1).
    pub fn new(n: u64, theta: f64) -> Zipf {
        assert!(n >= 1, "a zipfian needs at least one item");
        let zetan = zeta(n, theta);
        let zeta2 = zeta(2.min(n), theta);
        let alpha = 1.0 / (1.0 - theta);
        let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipf {
            n,
            alpha,
            zetan,
            eta,
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
        let v = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        v.min(self.n - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

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
}
