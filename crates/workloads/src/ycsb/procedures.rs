//! YCSB in STAR's shape (§8.1.1) split into partitions, for partitioned deployments: one table of
//! `partitions × rows_per_partition` rows, partition-major (partition `p` holds keys
//! `p * rows_per_partition ..(p + 1) * rows_per_partition`), and transactions of [`OPS`] distinct
//! uniform keys, each read or (with probability `1 - read_ratio`) read and rewritten whole. A
//! cross-partition transaction takes half its keys from its home partition and half from one other.
//! It runs the same procedure as [`super::Ycsb`]'s `star` variant.

use phasedb_storage::TableSpec;
use phasedb_txn::{
    Database, PartitionId, Procedures, Protocol, TableId, Touched, TxResult, Worker,
};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use super::{load_rows, star, table_schema};

/// Operations per transaction (STAR: 4).
pub const OPS: usize = 4;

/// Distinct values a write can rewrite a row with: a write's value is `column_size` bytes at one of
/// these offsets of the workload's value bytes (as [`super::Ycsb`] draws its values).
const VALUE_OFFSETS: usize = 4096;

/// Settings of partitioned YCSB.
#[derive(Clone, Debug, PartialEq)]
pub struct YcsbProceduresConfig {
    /// Number of partitions.
    pub partitions: u32,
    /// Rows per partition (STAR: 200K).
    pub rows_per_partition: u64,
    /// Fields per row (STAR: 10).
    pub columns: usize,
    /// Bytes per field (STAR: 10).
    pub column_size: usize,
    /// Share of operations that only read (STAR: 0.9).
    pub read_ratio: f64,
    /// Fine-grained metadata: even and odd fields in two column groups.
    pub fine: bool,
}

impl YcsbProceduresConfig {
    /// STAR's settings (§8.1.1) over `partitions` partitions.
    pub fn star(partitions: u32) -> YcsbProceduresConfig {
        YcsbProceduresConfig {
            partitions,
            rows_per_partition: 200_000,
            columns: 10,
            column_size: 10,
            read_ratio: 0.9,
            fine: false,
        }
    }

    /// Checks the settings, with a message fit for a user.
    pub fn validate(&self) -> Result<(), String> {
        if self.partitions == 0 {
            return Err("YCSB needs at least 1 partition".into());
        }
        if self.rows_per_partition < OPS as u64 {
            return Err(format!(
                "YCSB needs at least {OPS} rows per partition (the keys of a transaction are distinct)"
            ));
        }
        if self
            .rows_per_partition
            .checked_mul(self.partitions as u64)
            .is_none()
        {
            return Err("YCSB's partitions × rows per partition overflow 64-bit keys".into());
        }
        if self.columns == 0 || self.columns > 64 {
            return Err("YCSB's columns must be between 1 and 64".into());
        }
        if self.column_size == 0 || self.column_size > 4096 {
            return Err("YCSB's column size must be between 1 and 4096 bytes".into());
        }
        if !(0.0..=1.0).contains(&self.read_ratio) {
            return Err("YCSB's read ratio must be between 0 and 1".into());
        }
        Ok(())
    }
}

/// One operation: read row `key`, and with `write` rewrite all its fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct YcsbOp {
    pub key: u64,
    pub write: bool,
}

/// A YCSB transaction: its operations, the first on its home partition, and the value its writes
/// store (an offset into the value bytes every node derives alike, taken modulo 4096).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct YcsbRequest {
    pub ops: [YcsbOp; OPS],
    pub value: u16,
}

/// A generator's state: its random numbers.
pub struct YcsbGen {
    rng: SmallRng,
}

/// Partitioned YCSB's stored procedures.
pub struct YcsbProcedures {
    cfg: YcsbProceduresConfig,
    table: TableId,
    /// The bytes writes take their values from, the same on every node.
    values: Vec<u8>,
}

impl YcsbProcedures {
    /// The workload with settings `cfg` (validated by the caller).
    pub fn new(cfg: YcsbProceduresConfig) -> YcsbProcedures {
        let mut values = vec![0u8; VALUE_OFFSETS + cfg.column_size];
        SmallRng::seed_from_u64(0x7a1e).fill(&mut values[..]);
        YcsbProcedures {
            cfg,
            table: 0,
            values,
        }
    }

    /// The settings.
    pub fn config(&self) -> &YcsbProceduresConfig {
        &self.cfg
    }

    /// The table's id (valid after `create_tables`).
    pub fn table(&self) -> TableId {
        self.table
    }

    /// The partition of row `key`.
    pub fn partition_of_key(&self, key: u64) -> PartitionId {
        (key / self.cfg.rows_per_partition) as PartitionId
    }

    /// The bytes every field of a row holds once a request with `value` rewrote it.
    pub fn written(&self, value: u16) -> &[u8] {
        let at = value as usize % VALUE_OFFSETS;
        &self.values[at..at + self.cfg.column_size]
    }

    /// Appends the rows (table, key) of `req`'s operations, every row it reads among them, and
    /// returns true: they are all named in the request.
    pub fn read_rows(&self, req: &YcsbRequest, out: &mut Vec<(TableId, u64)>) -> bool {
        out.extend(req.ops.iter().map(|o| (self.table, o.key)));
        true
    }

    /// The keys of partition `p`.
    pub fn keys(&self, p: PartitionId) -> std::ops::Range<u64> {
        let r = self.cfg.rows_per_partition;
        p as u64 * r..(p as u64 + 1) * r
    }
}

impl Procedures for YcsbProcedures {
    type Request = YcsbRequest;
    type Gen = YcsbGen;

    fn name(&self) -> &'static str {
        "ycsb"
    }

    fn partitions(&self) -> u32 {
        self.cfg.partitions
    }

    fn txn_types(&self) -> Vec<&'static str> {
        vec!["ycsb"]
    }

    fn create_tables<P: Protocol>(&mut self, db: &mut Database<P>) {
        let schema = table_schema(self.cfg.columns, self.cfg.column_size, self.cfg.fine);
        let rows = self.cfg.rows_per_partition * self.cfg.partitions as u64;
        self.table = db.create_table(TableSpec::new("usertable", schema, rows as usize));
    }

    fn load_partition<P: Protocol>(&self, db: &Database<P>, p: PartitionId) {
        let mut rng = SmallRng::seed_from_u64(0x7c5b ^ (p as u64).wrapping_mul(0x9e37_79b9));
        let shape = (self.cfg.columns, self.cfg.column_size);
        load_rows(db, self.table, shape, self.keys(p), &mut rng);
    }

    fn partition_of(&self, _table: TableId, key: u64) -> Option<PartitionId> {
        Some(self.partition_of_key(key))
    }

    fn generator(&self, index: usize, seed: u64) -> YcsbGen {
        YcsbGen {
            rng: SmallRng::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        }
    }

    fn generate(&self, g: &mut YcsbGen, home: PartitionId, cross: f64) -> YcsbRequest {
        let parts = self.cfg.partitions;
        let other = (parts > 1 && g.rng.random::<f64>() < cross).then(|| {
            let p = g.rng.random_range(0..parts - 1);
            if p >= home { p + 1 } else { p }
        });
        let mut ops = [YcsbOp::default(); OPS];
        for i in 0..OPS {
            let part = match other {
                Some(o) if i >= OPS / 2 => o,
                _ => home,
            };
            let keys = self.keys(part);
            let key = loop {
                let key = g.rng.random_range(keys.clone());
                if !ops[..i].iter().any(|o| o.key == key) {
                    break key;
                }
            };
            let write = !g.rng.random_bool(self.cfg.read_ratio);
            ops[i] = YcsbOp { key, write };
        }
        YcsbRequest {
            ops,
            value: g.rng.random_range(0..VALUE_OFFSETS as u16),
        }
    }

    fn touched(&self, req: &YcsbRequest) -> Touched {
        let mut t = Touched::home(self.partition_of_key(req.ops[0].key));
        for op in &req.ops[1..] {
            t.add(self.partition_of_key(op.key));
        }
        t
    }

    fn txn_type(&self, _req: &YcsbRequest) -> usize {
        0
    }

    fn read_only(&self, req: &YcsbRequest) -> bool {
        req.ops.iter().all(|o| !o.write)
    }

    fn run<P: Protocol>(&self, req: &YcsbRequest, worker: &mut Worker<'_, P>) -> TxResult<()> {
        let value = self.written(req.value);
        let (t, columns) = (self.table, self.cfg.columns);
        let ops = req.ops.iter().map(|o| (o.key, o.write));
        worker.execute(0, |tx| star(tx, t, columns, ops.clone(), value))
    }

    /// Each held partition has all its rows, and no row lies past the last partition.
    fn check<P: Protocol>(&self, db: &Database<P>, held: &[PartitionId]) -> Result<(), String> {
        let mut rows = vec![0u64; self.cfg.partitions as usize];
        let mut stray = None;
        db.for_each_row_quiescent(self.table, |key, _| {
            match rows.get_mut(self.partition_of_key(key) as usize) {
                Some(n) => *n += 1,
                None => stray = Some(key),
            }
        });
        if let Some(key) = stray {
            return Err(format!(
                "usertable has row {key}, past the last of {} partitions",
                self.cfg.partitions
            ));
        }
        for &p in held {
            let n = rows.get(p as usize).copied().unwrap_or(0);
            if n != self.cfg.rows_per_partition {
                return Err(format!(
                    "partition {p} of usertable has {n} rows, expected {}",
                    self.cfg.rows_per_partition
                ));
            }
        }
        Ok(())
    }
}
