//! The micro-benchmark (§VI-A, Table I): types I (2 reads, 2 writes), II (32 r, 2 w) and III
//! (16 r, 16 w) over 4-byte keys and values, 4.2M items by default; a `cross_partition` share of
//! transactions touches two partitions (half the keys in each), the rest only the client's home
//! partition.

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::Logic;
use crate::pdur::client::Transaction;
use crate::pdur::request::PartitionId;
use crate::ramp::msg::{Key, Value};

/// The paper's item count.
pub const PAPER_ITEMS: u64 = 4_200_000;

/// A transaction type of Table I.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MicroType {
    /// 2 reads, 2 writes.
    I,
    /// 32 reads, 2 writes.
    II,
    /// 16 reads, 16 writes.
    III,
}

impl MicroType {
    /// Reads and writes of one transaction.
    pub fn ops(self) -> (usize, usize) {
        match self {
            MicroType::I => (2, 2),
            MicroType::II => (32, 2),
            MicroType::III => (16, 16),
        }
    }

    /// Parses `I`, `II` or `III`.
    pub fn parse(s: &str) -> Option<MicroType> {
        match s {
            "I" | "i" | "1" => Some(MicroType::I),
            "II" | "ii" | "2" => Some(MicroType::II),
            "III" | "iii" | "3" => Some(MicroType::III),
            _ => None,
        }
    }
}

/// The micro-benchmark's settings.
#[derive(Clone, Copy, Debug)]
pub struct MicroConfig {
    /// Transaction type.
    pub ty: MicroType,
    /// Items in the database (keys `0..items`).
    pub items: u64,
    /// Partitions of the replica.
    pub partitions: usize,
    /// Share of transactions that touch two partitions (0 to 1).
    pub cross_partition: f64,
}

impl MicroConfig {
    /// Loads every item with a 4-byte value.
    pub fn load(&self, mut put: impl FnMut(Key, Value)) {
        for k in 0..self.items {
            put(k, (k as u32).to_le_bytes().to_vec());
        }
    }

    fn items_in(&self, p: PartitionId) -> u64 {
        let n = self.partitions as u64;
        self.items / n + u64::from((p as u64) < self.items % n)
    }
}

/// Draws micro-benchmark transactions for clients whose home is one partition.
pub struct MicroGen {
    cfg: MicroConfig,
    rng: SmallRng,
    seq: u32,
}

impl MicroGen {
    /// A generator seeded with `seed`.
    pub fn new(cfg: MicroConfig, seed: u64) -> MicroGen {
        let (r, w) = cfg.ty.ops();
        assert!(
            cfg.partitions >= 1 && cfg.items / cfg.partitions as u64 >= 2 * (r + w) as u64,
            "too few items per partition for distinct keys"
        );
        MicroGen {
            cfg,
            rng: SmallRng::seed_from_u64(seed),
            seq: 0,
        }
    }

    /// The next transaction of a client at partition `home`.
    pub fn next(&mut self, home: PartitionId) -> MicroTxn {
        let (r, w) = self.cfg.ty.ops();
        let other = if self.cfg.partitions > 1 && self.rng.random_bool(self.cfg.cross_partition) {
            let o = self.rng.random_range(0..self.cfg.partitions as u16 - 1);
            Some(if o >= home { o + 1 } else { o })
        } else {
            None
        };
        // Every key distinct; those of a cross-partition transaction alternate between its two
        // partitions, in its reads and in its writes.
        let mut keys: Vec<Key> = Vec::with_capacity(r + w);
        for i in (0..r).chain(0..w) {
            let p = match other {
                Some(o) if i % 2 == 1 => o,
                _ => home,
            };
            loop {
                let k = self.rng.random_range(0..self.cfg.items_in(p)) * self.cfg.partitions as u64
                    + p as u64;
                if !keys.contains(&k) {
                    keys.push(k);
                    break;
                }
            }
        }
        let writes = keys.split_off(r);
        self.seq = self.seq.wrapping_add(1);
        MicroTxn {
            reads: keys,
            writes,
            value: self.seq,
            done: false,
        }
    }
}

/// One micro-benchmark transaction: its reads in one round, then blind writes of a fresh value.
#[derive(Clone, Debug)]
pub struct MicroTxn {
    /// Keys read.
    pub reads: Vec<Key>,
    /// Keys written (distinct from those read).
    pub writes: Vec<Key>,
    value: u32,
    done: bool,
}

impl Logic for MicroTxn {
    fn next_reads(&mut self, _tx: &Transaction, out: &mut Vec<Key>) {
        if !std::mem::replace(&mut self.done, true) {
            out.extend_from_slice(&self.reads);
        }
    }

    fn write(&mut self, tx: &mut Transaction) {
        for &k in &self.writes {
            tx.write(k, self.value.to_le_bytes().to_vec());
        }
    }

    fn kind(&self) -> &'static str {
        "micro"
    }
}
