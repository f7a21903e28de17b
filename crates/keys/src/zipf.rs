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
    /// The tail's ranks by draw, for skips of its `powf`: the draws from `rank1 / zetan` up to 1
    /// cut into [`BUCKETS`] equal buckets, each holding the rank every draw in it maps to, or
    /// [`MIXED`] when its draws map to more than one rank. Empty unless enough buckets hold one
    /// rank ([`MIN_WHOLE`]): at alpha 1.4 over 1M items, ranks 2 to about 220 span whole buckets
    /// (80% of them), and 44% of all draws skip the formula.
    buckets: Box<[u16]>,
    /// The first draw of the first bucket, and buckets per unit of draw.
    bucket_from: f64,
    bucket_scale: f64,
}

/// Buckets of [`Zipf::buckets`]: 8 KiB, so the table stays in a core's first-level cache.
const BUCKETS: usize = 4096;

/// A bucket whose draws map to more than one rank.
const MIXED: u16 = u16::MAX;

/// Least share of buckets that must hold one rank for the table to be used. A draw in a mixed
/// bucket pays the look-up, often a mispredicted branch, and the formula: over 1M items the table
/// made draws about 12% slower at skew 0.99 (29% of buckets whole), and about a third faster at
/// 1.3, 1.4 and 1.8 (72%, 80%, 93%).
const MIN_WHOLE: f64 = 0.7;

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
        let mut z = Zipf {
            n,
            zetan,
            tail,
            rank1: 1.0 + 0.5f64.powf(theta),
            buckets: Box::default(),
            bucket_from: 0.0,
            bucket_scale: 0.0,
        };
        z.fill_buckets();
        z
    }

    /// Fills [`Zipf::buckets`]. A bucket holds a rank only if the draws a little past both its ends
    /// map to it too, so a draw that rounding puts in a neighbouring bucket gets the rank the tail's
    /// formula gives it.
    fn fill_buckets(&mut self) {
        let from = self.rank1 / self.zetan;
        if from >= 1.0 {
            return;
        }
        let width = (1.0 - from) / BUCKETS as f64;
        let margin = width * 1e-6;
        self.bucket_from = from;
        self.bucket_scale = 1.0 / width;
        let buckets: Box<[u16]> = (0..BUCKETS)
            .map(|b| {
                let lo = from + b as f64 * width;
                let first = self.tail_rank(lo - margin);
                let last = self.tail_rank(lo + width + margin);
                if first == last && first < MIXED as u64 {
                    first as u16
                } else {
                    MIXED
                }
            })
            .collect();
        let whole = buckets.iter().filter(|&&r| r != MIXED).count();
        if whole as f64 >= MIN_WHOLE * BUCKETS as f64 {
            self.buckets = buckets;
        }
    }

    /// Gray et al.'s rank for draw `u` past rank 1.
    #[inline]
    fn tail_rank(&self, u: f64) -> u64 {
        let scale = match self.tail {
            Tail::Power { eta, exponent } => (eta * u - eta + 1.0).powf(exponent),
            Tail::Harmonic { k } => (k * (u - 1.0)).exp(),
        };
        ((self.n as f64 * scale) as u64).min(self.n - 1)
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
        if !self.buckets.is_empty() {
            let b = ((u - self.bucket_from) * self.bucket_scale) as usize;
            if let Some(&r) = self.buckets.get(b)
                && r != MIXED
            {
                return r as u64;
            }
        }
        self.tail_rank(u)
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

    #[test]
    fn the_rank_table_gives_every_draw_the_rank_of_the_formula() {
        for (n, theta) in [
            (1_000_000, 1.4),
            (1_000_000, 0.99),
            (10_000, 1.0),
            (200, 0.5),
            (3, 2.0),
            (1_000_000, 0.0),
            (5_000, 0.0),
            (100_000, 9.0),
        ] {
            let z = Zipf::new(n, theta);
            let direct = |u: f64| {
                let uz = u * z.zetan;
                if uz < 1.0 {
                    0
                } else if uz < z.rank1 {
                    1.min(n - 1)
                } else {
                    z.tail_rank(u)
                }
            };
            let mut rng = SmallRng::seed_from_u64(n ^ theta.to_bits());
            let mut tabled = 0u64;
            for i in 0..2_000_000u64 {
                let u: f64 = rng.clone().random();
                assert_eq!(
                    z.sample(&mut rng),
                    direct(u),
                    "n {n} theta {theta} draw {i}: {u}"
                );
                let bucket = ((u - z.bucket_from) * z.bucket_scale) as usize;
                tabled += (u * z.zetan >= z.rank1
                    && z.buckets.get(bucket).is_some_and(|&r| r != MIXED))
                    as u64;
            }
            // The draws the generator can make at and next to every bucket's edges, where rounding
            // could pick a neighbouring bucket.
            let width = 1.0 / z.bucket_scale;
            for b in 0..=z.buckets.len() {
                let edge = ((z.bucket_from + b as f64 * width) * GRID) as u64;
                for k in edge.saturating_sub(1)..=edge + 1 {
                    let u = k as f64 / GRID;
                    if u < 1.0 {
                        let got = z.sample(&mut Fixed(k));
                        assert_eq!(got, direct(u), "n {n} theta {theta} edge draw {u}");
                    }
                }
            }
            match (n, theta) {
                (1_000_000, 1.4) => {
                    assert!(
                        tabled > 700_000,
                        "only {tabled} of 2M draws were in the table"
                    )
                }
                (1_000_000, 0.99) => assert!(z.buckets.is_empty(), "too few whole buckets"),
                _ => {}
            }
        }
    }

    /// The grid of the generator's `f64` draws: `random::<f64>()` is the high 53 bits of a `u64`
    /// times 2^-53.
    const GRID: f64 = (1u64 << 53) as f64;

    /// A generator whose every `f64` draw is `self.0 / GRID`.
    struct Fixed(u64);

    impl rand::TryRng for Fixed {
        type Error = std::convert::Infallible;
        fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
            Ok((self.try_next_u64()? >> 32) as u32)
        }
        fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
            Ok(self.0 << 11)
        }
        fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
            dst.fill(0);
            Ok(())
        }
    }
}
