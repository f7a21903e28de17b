//! The Doppel paper's increment micro-benchmarks. INCR1: each transaction increments one key; a given
//! share of them all increment the same hot key, the rest a uniformly chosen other key. INCRZ: each
//! transaction increments one key chosen with a zipfian distribution of skew alpha.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use phasedb_keys::Zipf;
use phasedb_storage::{ColumnType, Schema, TableSpec};
use phasedb_txn::{Database, MAX_WORKERS, Protocol, TableId, TxResult, Worker};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::Workload;

/// How keys are chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KeyChoice {
    /// INCR1: this share of transactions hits key 0, the others a uniform key among the rest.
    Hot(f64),
    /// INCRZ: zipfian with this skew (rank 0 hottest).
    Zipf(f64),
    /// INCR1 with a hot key that changes identity every `every`: this share of transactions hits the
    /// current hot key.
    Moving {
        hot: f64,
        every: std::time::Duration,
    },
}

/// Increment workload settings.
#[derive(Clone, Debug)]
pub struct IncrConfig {
    pub keys: u64,
    pub choice: KeyChoice,
}

impl IncrConfig {
    /// Checks the settings, with a message fit for a command-line user.
    pub fn validate(&self) -> Result<(), String> {
        if self.keys < 2 {
            return Err("--keys must be at least 2".into());
        }
        match self.choice {
            KeyChoice::Hot(h) | KeyChoice::Moving { hot: h, .. } if !(0.0..=1.0).contains(&h) => {
                Err("--hot must be between 0 and 1".into())
            }
            KeyChoice::Moving { every, .. } if every.is_zero() => {
                Err("the hot key must stay hot for some time".into())
            }
            KeyChoice::Zipf(a) => Zipf::check_skew("--alpha", a),
            _ => Ok(()),
        }
    }
}

/// The increment workload.
pub struct Incr {
    cfg: IncrConfig,
    table: TableId,
    zipf: Option<Zipf>,
    /// Committed increments per thread, to check the sum of the counters afterwards.
    done: Vec<CachePadded<AtomicU64>>,
    /// When the tables were loaded: the origin of the moving hot key's schedule.
    loaded: std::sync::OnceLock<std::time::Instant>,
}

/// A thread's generator state.
pub struct IncrThread {
    rng: SmallRng,
    index: usize,
}

const VALUE: usize = 0;

impl Incr {
    /// A workload with settings `cfg` (validated by the caller).
    pub fn new(cfg: IncrConfig) -> Incr {
        let zipf = match cfg.choice {
            KeyChoice::Zipf(a) if a > 0.0 => Some(Zipf::new(cfg.keys, a)),
            _ => None,
        };
        Incr {
            cfg,
            table: 0,
            zipf,
            done: (0..MAX_WORKERS).map(|_| CachePadded::default()).collect(),
            loaded: std::sync::OnceLock::new(),
        }
    }

    fn key(&self, rng: &mut SmallRng) -> u64 {
        match (self.cfg.choice, &self.zipf) {
            (KeyChoice::Hot(h), _) => {
                if rng.random_bool(h) {
                    0
                } else {
                    rng.random_range(1..self.cfg.keys)
                }
            }
            (KeyChoice::Moving { hot, every }, _) => {
                let hot_key = self.hot_key(every);
                if rng.random_bool(hot) {
                    hot_key
                } else {
                    (hot_key + rng.random_range(1..self.cfg.keys)) % self.cfg.keys
                }
            }
            (_, Some(z)) => z.sample(rng),
            _ => rng.random_range(0..self.cfg.keys),
        }
    }
}

impl Incr {
    /// The hot key of the current period: a different pseudo-random key every `every`. (A replayed
    /// transaction may pick the period's key, not the one it first had: increments never stash.)
    pub fn hot_key(&self, every: std::time::Duration) -> u64 {
        let since = self
            .loaded
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos();
        let period = (since / every.as_nanos().max(1)) as u64;
        period.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17) % self.cfg.keys
    }
}

impl Workload for Incr {
    type Thread = IncrThread;

    fn name(&self) -> &'static str {
        match self.cfg.choice {
            KeyChoice::Hot(_) | KeyChoice::Moving { .. } => "incr1",
            KeyChoice::Zipf(_) => "incrz",
        }
    }

    fn txn_types(&self) -> Vec<&'static str> {
        vec!["incr"]
    }

    fn setup<P: Protocol>(&mut self, db: &mut Database<P>) {
        let schema = Schema::builder()
            .column("value", ColumnType::I64, 0)
            .column("key", ColumnType::Fixed(16), 0)
            .build()
            .expect("the counter schema is valid");
        self.table = db.create_table(TableSpec::new("counters", schema, self.cfg.keys as usize));
        for k in 0..self.cfg.keys {
            db.load(self.table, k, |r| r.set_bytes(1, &k.to_le_bytes()))
                .expect("keys are distinct");
        }
        let _ = self.loaded.set(std::time::Instant::now());
    }

    fn rng<'a>(&self, thread: &'a mut IncrThread) -> &'a mut SmallRng {
        &mut thread.rng
    }

    fn thread(&self, index: usize, seed: u64) -> IncrThread {
        IncrThread {
            rng: SmallRng::seed_from_u64(seed ^ (index as u64 + 1).wrapping_mul(0x9e37_79b9)),
            index,
        }
    }

    fn run_one<P: Protocol>(
        &self,
        th: &mut IncrThread,
        worker: &mut Worker<'_, P>,
    ) -> TxResult<()> {
        let key = self.key(&mut th.rng);
        let t = self.table;
        worker.execute(0, |tx| tx.add(t, key, VALUE, 1).map(|_| ()))?;
        let done = &self.done[th.index % MAX_WORKERS];
        done.store(done.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        Ok(())
    }

    fn check<P: Protocol>(&self, db: &Database<P>) -> Result<(), String> {
        let expected: u64 = self.done.iter().map(|d| d.load(Ordering::Relaxed)).sum();
        let mut sum = 0i64;
        db.for_each_row_quiescent(self.table, |_, row| sum += row.i64(VALUE));
        if sum as u64 != expected {
            return Err(format!(
                "counters sum to {sum}, but {expected} increments committed"
            ));
        }
        Ok(())
    }

    fn settings(&self) -> Vec<(&'static str, String)> {
        let mut s = vec![("keys", self.cfg.keys.to_string())];
        match self.cfg.choice {
            KeyChoice::Hot(h) => s.push(("hot", h.to_string())),
            KeyChoice::Moving { hot, every } => {
                s.push(("hot", hot.to_string()));
                s.push(("hot_key_moves_every_s", every.as_secs_f64().to_string()));
            }
            KeyChoice::Zipf(a) => s.push(("alpha", a.to_string())),
        }
        s
    }
}
