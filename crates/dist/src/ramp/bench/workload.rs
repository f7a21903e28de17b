//! The RAMP paper's YCSB workload: read-only and write-only transactions of a few distinct items
//! chosen by a scrambled zipfian (or uniformly), with small values.

use phasedb_keys::Zipf;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use rustc_hash::FxHashSet;

use crate::ramp::msg::{Key, TxnSpec};

/// The workload's shape.
#[derive(Clone, Debug, PartialEq)]
pub struct YcsbRamp {
    /// Items in the database.
    pub items: u64,
    /// Items per transaction.
    pub ops: usize,
    /// Share of read-only transactions (the rest write only).
    pub read_ratio: f64,
    /// Zipfian skew (0 = uniform; YCSB uses 0.99).
    pub theta: f64,
    /// Bytes per written value.
    pub value_size: usize,
    /// Share of transactions that read their items and then write them (pre-declared read set).
    pub read_write_ratio: f64,
}

impl Default for YcsbRamp {
    /// The paper's defaults scaled down: 1M items, 4 operations, 95% reads, zipf 0.99, 1-byte values.
    fn default() -> Self {
        YcsbRamp {
            items: 1_000_000,
            ops: 4,
            read_ratio: 0.95,
            theta: 0.99,
            value_size: 1,
            read_write_ratio: 0.0,
        }
    }
}

impl YcsbRamp {
    /// Refuses shapes that cannot run.
    pub fn validate(&self) -> Result<(), String> {
        if self.items == 0 || self.items > 1 << 40 {
            return Err("items must be between 1 and 2^40".into());
        }
        if self.ops == 0 || self.ops > 1024 {
            return Err("operations per transaction must be between 1 and 1024".into());
        }
        if self.ops as u64 > self.items {
            return Err(format!(
                "{} operations need at least as many items, not {}",
                self.ops, self.items
            ));
        }
        if !(0.0..=1.0).contains(&self.read_ratio) || !(0.0..=1.0).contains(&self.read_write_ratio)
        {
            return Err("read and read-write ratios must be between 0 and 1".into());
        }
        Zipf::check_skew("theta", self.theta)?;
        if self.value_size > 1 << 20 {
            return Err("values are at most 1 MiB".into());
        }
        Ok(())
    }
}

/// Spreads zipfian ranks over the key space, so that hot items fall in different partitions.
fn scramble(rank: u64, n: u64) -> u64 {
    let mut z = rank.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z ^= z >> 29;
    z = z.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z ^= z >> 32;
    z % n
}

/// Generates one client's transactions.
#[derive(Clone, Debug)]
pub struct TxnGen {
    shape: YcsbRamp,
    zipf: Option<std::sync::Arc<Zipf>>,
    rng: SmallRng,
    /// The keys drawn so far for a long transaction (see [`SCAN_DISTINCT`]), kept between calls.
    drawn: FxHashSet<Key>,
}

/// Transactions up to this long check that their keys are distinct by scanning them; longer ones
/// use a set (a scan made 128-item transactions cost quadratic time to generate).
const SCAN_DISTINCT: usize = 16;

/// Shared, precomputed state of a workload (the zipfian constants), built once per run.
#[derive(Clone, Debug)]
pub struct Workload {
    shape: YcsbRamp,
    zipf: Option<std::sync::Arc<Zipf>>,
}

impl Workload {
    /// Precomputes the distribution of `shape` (O(items) for a zipfian).
    pub fn new(shape: YcsbRamp) -> Workload {
        let zipf =
            (shape.theta > 0.0).then(|| std::sync::Arc::new(Zipf::new(shape.items, shape.theta)));
        Workload { shape, zipf }
    }

    /// A generator for one client, seeded from the run's seed and the client's index.
    pub fn generator(&self, seed: u64, client: u64) -> TxnGen {
        TxnGen {
            shape: self.shape.clone(),
            zipf: self.zipf.clone(),
            rng: SmallRng::seed_from_u64(seed ^ client.wrapping_mul(0x2545_f491_4f6c_dd1d)),
            drawn: FxHashSet::default(),
        }
    }
}

/// The kinds of transaction the workload issues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnKind {
    /// Reads only.
    Read,
    /// Writes only.
    Write,
    /// Reads its items, then writes them.
    ReadWrite,
}

impl TxnGen {
    fn key(&mut self) -> Key {
        let n = self.shape.items;
        match &self.zipf {
            Some(z) => scramble(z.sample(&mut self.rng), n),
            None => self.rng.random_range(0..n),
        }
    }

    /// The next transaction and its kind.
    pub fn next_txn(&mut self) -> (TxnKind, TxnSpec) {
        let ops = self.shape.ops;
        let mut keys: Vec<Key> = Vec::with_capacity(ops);
        self.drawn.clear();
        while keys.len() < ops {
            let k = self.key();
            let fresh = if ops <= SCAN_DISTINCT {
                !keys.contains(&k)
            } else {
                self.drawn.insert(k)
            };
            if fresh {
                keys.push(k);
            }
        }
        let x: f64 = self.rng.random();
        let kind = if x < self.shape.read_write_ratio {
            TxnKind::ReadWrite
        } else if self.rng.random::<f64>() < self.shape.read_ratio {
            TxnKind::Read
        } else {
            TxnKind::Write
        };
        let fill: u8 = self.rng.random();
        let value = vec![fill; self.shape.value_size];
        let spec = match kind {
            TxnKind::Read => TxnSpec {
                reads: keys,
                writes: Vec::new(),
            },
            TxnKind::Write => TxnSpec {
                reads: Vec::new(),
                writes: keys.into_iter().map(|k| (k, value.clone())).collect(),
            },
            TxnKind::ReadWrite => TxnSpec {
                writes: keys.iter().map(|&k| (k, value.clone())).collect(),
                reads: keys,
            },
        };
        (kind, spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_transactions_draw_the_keys_a_scan_would_keep() {
        let w = Workload::new(YcsbRamp {
            items: 300,
            ops: 128,
            ..YcsbRamp::default()
        });
        let mut g = w.generator(3, 2);
        for _ in 0..50 {
            let mut scan = g.clone();
            let mut want: Vec<Key> = Vec::new();
            while want.len() < 128 {
                let k = scan.key();
                if !want.contains(&k) {
                    want.push(k);
                }
            }
            let (_, t) = g.next_txn();
            let got: Vec<Key> = t
                .reads
                .iter()
                .copied()
                .chain(t.writes.iter().map(|w| w.0))
                .collect();
            assert_eq!(got, want, "same keys in the same order");
        }
    }

    #[test]
    fn a_harmonic_skew_draws_the_hottest_item_one_time_in_h_of_n() {
        let n = 1000;
        let shape = YcsbRamp {
            items: n,
            theta: 1.0,
            ..YcsbRamp::default()
        };
        shape.validate().unwrap();
        let mut g = Workload::new(shape).generator(3, 0);
        let draws = 100_000;
        let hottest = (0..draws).filter(|_| g.key() == scramble(0, n)).count();
        let h: f64 = (1..=n).map(|i| 1.0 / i as f64).sum();
        let share = hottest as f64 / draws as f64;
        assert!(
            (share - 1.0 / h).abs() < 0.01,
            "{share} against {}",
            1.0 / h
        );
    }

    #[test]
    fn transactions_have_distinct_keys_and_follow_the_read_ratio() {
        let w = Workload::new(YcsbRamp {
            items: 1000,
            ..YcsbRamp::default()
        });
        let mut g = w.generator(7, 1);
        let mut reads = 0;
        for _ in 0..2000 {
            let (kind, t) = g.next_txn();
            let mut keys: Vec<Key> = t
                .reads
                .iter()
                .copied()
                .chain(t.writes.iter().map(|w| w.0))
                .collect();
            assert_eq!(keys.len(), 4);
            keys.sort_unstable();
            keys.dedup();
            assert_eq!(keys.len(), 4);
            assert!(keys.iter().all(|&k| k < 1000));
            reads += (kind == TxnKind::Read) as u32;
        }
        assert!((1800..1980).contains(&reads), "{reads} of 2000 read-only");
        let harmonic = YcsbRamp {
            theta: 1.0,
            ..YcsbRamp::default()
        };
        assert_eq!(harmonic.validate(), Ok(()));
        assert!(
            YcsbRamp {
                theta: 10.5,
                ..YcsbRamp::default()
            }
            .validate()
            .is_err()
        );
        assert!(
            YcsbRamp {
                ops: 5,
                items: 4,
                ..YcsbRamp::default()
            }
            .validate()
            .is_err()
        );
    }
}
