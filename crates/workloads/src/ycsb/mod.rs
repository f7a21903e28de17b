//! YCSB in the three shapes the seeds use: STAR's and DBx1000's (each operation reads a row or
//! reads and rewrites it), the timestamp-granularity paper's (each operation reads or writes one
//! column of a zipfian key) and RAMP's (read-only and write-only transactions); and STAR's shape
//! split into partitions for partitioned deployments ([`YcsbProcedures`]).

mod procedures;

pub use procedures::{OPS, YcsbGen, YcsbOp, YcsbProcedures, YcsbProceduresConfig, YcsbRequest};

use std::ops::Range;

use phasedb_keys::Zipf;
use phasedb_storage::{ColumnType, Schema, TableSpec};
use phasedb_txn::{Database, Protocol, TableId, Tx, TxResult, Worker, columns};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::Workload;

/// Which of the seeds' YCSB shapes to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// STAR / DBx1000: each operation reads a whole row, or reads it and rewrites every column.
    Star,
    /// Timestamp granularity paper: each operation reads or writes one column.
    Granularity,
    /// RAMP: read-only or write-only transactions; the read ratio picks between them.
    Ramp,
}

impl Variant {
    /// Parses the command-line name.
    pub fn parse(s: &str) -> Option<Variant> {
        match s {
            "star" | "a" => Some(Variant::Star),
            "granularity" | "b" => Some(Variant::Granularity),
            "ramp" | "c" => Some(Variant::Ramp),
            _ => None,
        }
    }

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Star => "star",
            Variant::Granularity => "granularity",
            Variant::Ramp => "ramp",
        }
    }
}

/// YCSB settings.
#[derive(Clone, Debug)]
pub struct YcsbConfig {
    pub variant: Variant,
    pub rows: u64,
    pub columns: usize,
    pub column_size: usize,
    pub ops: usize,
    /// Share of read operations (Star, Granularity) or of read-only transactions (Ramp).
    pub read_ratio: f64,
    /// Zipfian skew of key choice; 0 is uniform.
    pub theta: f64,
    /// Fine-grained metadata: even and odd columns in two column groups.
    pub fine: bool,
}

impl YcsbConfig {
    /// The seeds' defaults for `variant`, scaled to one machine.
    pub fn defaults(variant: Variant) -> YcsbConfig {
        match variant {
            Variant::Star => YcsbConfig {
                variant,
                rows: 200_000,
                columns: 10,
                column_size: 10,
                ops: 4,
                read_ratio: 0.9,
                theta: 0.0,
                fine: false,
            },
            Variant::Granularity => YcsbConfig {
                variant,
                rows: 1_000_000,
                columns: 10,
                column_size: 10,
                ops: 16,
                read_ratio: 0.5,
                theta: 0.9,
                fine: false,
            },
            Variant::Ramp => YcsbConfig {
                variant,
                rows: 1_000_000,
                columns: 1,
                column_size: 1,
                ops: 4,
                read_ratio: 0.95,
                theta: 0.99,
                fine: false,
            },
        }
    }

    /// Checks the settings, with a message fit for a command-line user.
    pub fn validate(&self) -> Result<(), String> {
        if self.rows == 0 {
            return Err("--rows must be at least 1".into());
        }
        if self.columns == 0 || self.columns > 64 {
            return Err("--columns must be between 1 and 64".into());
        }
        if self.column_size == 0 || self.column_size > 4096 {
            return Err("--column-size must be between 1 and 4096 bytes".into());
        }
        if self.ops == 0 || self.ops as u64 > self.rows {
            return Err(format!(
                "--ops must be between 1 and --rows ({})",
                self.rows
            ));
        }
        if !(0.0..=1.0).contains(&self.read_ratio) {
            return Err("--read-ratio must be between 0 and 1".into());
        }
        Zipf::check_skew("--theta", self.theta)
    }
}

/// The YCSB workload.
pub struct Ycsb {
    cfg: YcsbConfig,
    table: TableId,
    zipf: Option<Zipf>,
    /// The table's column groups are chosen by the engine ([`Ycsb::auto_groups`]).
    auto: bool,
}

/// One operation of a generated transaction.
#[derive(Clone, Copy)]
struct Op {
    key: u64,
    write: bool,
    column: usize,
}

/// A thread's generator state: its random numbers, the current transaction and write values.
pub struct YcsbThread {
    rng: SmallRng,
    ops: Vec<Op>,
    values: Vec<u8>,
}

impl Ycsb {
    /// A workload with settings `cfg` (validated by the caller).
    pub fn new(cfg: YcsbConfig) -> Ycsb {
        let zipf = (cfg.theta > 0.0).then(|| Zipf::new(cfg.rows, cfg.theta));
        Ycsb {
            cfg,
            table: 0,
            zipf,
            auto: false,
        }
    }

    /// Declares the table's column groups automatic (`--granularity auto`): they start as
    /// configured (coarse unless `fine`) and the engine changes them while it runs.
    pub fn auto_groups(mut self) -> Ycsb {
        self.auto = true;
        self
    }

    /// The schema of the YCSB table.
    pub fn schema(&self) -> Schema {
        table_schema(self.cfg.columns, self.cfg.column_size, self.cfg.fine)
    }

    #[inline]
    fn key(&self, rng: &mut SmallRng) -> u64 {
        match &self.zipf {
            Some(z) => z.sample(rng),
            None => rng.random_range(0..self.cfg.rows),
        }
    }

    fn generate(&self, th: &mut YcsbThread) -> usize {
        th.ops.clear();
        let read_only =
            self.cfg.variant == Variant::Ramp && th.rng.random_bool(self.cfg.read_ratio);
        while th.ops.len() < self.cfg.ops {
            let key = self.key(&mut th.rng);
            if self.cfg.variant != Variant::Granularity && th.ops.iter().any(|o| o.key == key) {
                continue;
            }
            let write = match self.cfg.variant {
                Variant::Ramp => !read_only,
                _ => !th.rng.random_bool(self.cfg.read_ratio),
            };
            let column = th.rng.random_range(0..self.cfg.columns);
            th.ops.push(Op { key, write, column });
        }
        match self.cfg.variant {
            Variant::Ramp if !read_only => 1,
            _ => 0,
        }
    }
}

impl Workload for Ycsb {
    type Thread = YcsbThread;

    fn name(&self) -> &'static str {
        "ycsb"
    }

    fn txn_types(&self) -> Vec<&'static str> {
        match self.cfg.variant {
            Variant::Ramp => vec!["read-only", "write-only"],
            _ => vec!["ycsb"],
        }
    }

    fn setup<P: Protocol>(&mut self, db: &mut Database<P>) {
        self.table = db.create_table(TableSpec::new(
            "usertable",
            self.schema(),
            self.cfg.rows as usize,
        ));
        let mut rng = SmallRng::seed_from_u64(0x7c5b);
        let shape = (self.cfg.columns, self.cfg.column_size);
        load_rows(db, self.table, shape, 0..self.cfg.rows, &mut rng);
        if self.auto {
            db.set_auto_groups(self.table)
                .unwrap_or_else(|e| panic!("--granularity auto: {e}"));
        }
    }

    fn rng<'a>(&self, thread: &'a mut YcsbThread) -> &'a mut SmallRng {
        &mut thread.rng
    }

    fn recovered<P: Protocol>(&mut self, _db: &Database<P>) -> Result<(), String> {
        Ok(())
    }

    fn thread(&self, index: usize, seed: u64) -> YcsbThread {
        let mut rng =
            SmallRng::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut values = vec![0u8; 4096 + self.cfg.column_size];
        rng.fill(&mut values[..]);
        YcsbThread {
            rng,
            ops: Vec::with_capacity(self.cfg.ops),
            values,
        }
    }

    fn run_one<P: Protocol>(
        &self,
        th: &mut YcsbThread,
        worker: &mut Worker<'_, P>,
    ) -> TxResult<()> {
        let ty = self.generate(th);
        let (t, cfg) = (self.table, &self.cfg);
        let offset = th.rng.random_range(0..4096);
        let value = &th.values[offset..offset + cfg.column_size];
        let ops = &th.ops;
        worker.execute(ty, |tx| match cfg.variant {
            Variant::Star => star(
                tx,
                t,
                cfg.columns,
                ops.iter().map(|o| (o.key, o.write)),
                value,
            ),
            Variant::Granularity => {
                tx.prefetch(t, ops.iter().map(|o| o.key));
                for op in ops {
                    if op.write {
                        tx.update(t, op.key, |w| w.set_bytes(op.column, value))?;
                    } else {
                        tx.get_columns(t, op.key, columns(&[op.column]))?;
                    }
                }
                Ok(())
            }
            Variant::Ramp => {
                tx.prefetch(t, ops.iter().map(|o| o.key));
                for op in ops {
                    if op.write {
                        tx.update(t, op.key, |w| {
                            for c in 0..cfg.columns {
                                w.set_bytes(c, value);
                            }
                        })?;
                    } else {
                        tx.get(t, op.key)?;
                    }
                }
                Ok(())
            }
        })
    }

    fn check<P: Protocol>(&self, db: &Database<P>) -> Result<(), String> {
        let n = db.table(self.table).len() as u64;
        if n != self.cfg.rows {
            return Err(format!(
                "usertable has {n} rows, expected {}",
                self.cfg.rows
            ));
        }
        Ok(())
    }

    fn settings(&self) -> Vec<(&'static str, String)> {
        let c = &self.cfg;
        vec![
            ("variant", c.variant.name().into()),
            ("rows", c.rows.to_string()),
            ("columns", c.columns.to_string()),
            ("column_size", c.column_size.to_string()),
            ("ops", c.ops.to_string()),
            ("read_ratio", c.read_ratio.to_string()),
            ("theta", c.theta.to_string()),
            (
                "granularity",
                crate::tpcc::granularity(self.auto, c.fine).into(),
            ),
        ]
    }
}

/// The YCSB table's schema: `columns` fixed-size fields of `column_size` bytes, in one column group,
/// or (`fine`) even and odd fields in two.
fn table_schema(columns: usize, column_size: usize, fine: bool) -> Schema {
    let mut b = Schema::builder();
    for c in 0..columns {
        let group = if fine && columns > 1 { c % 2 } else { 0 };
        b = b.column(
            &format!("field{c}"),
            ColumnType::Fixed(column_size as u16),
            group,
        );
    }
    b.build().expect("the YCSB schema is valid")
}

/// Loads the rows of `keys` into `table`, each of its `columns` fields `column_size` random bytes
/// from `rng`.
fn load_rows<P: Protocol>(
    db: &Database<P>,
    table: TableId,
    (columns, column_size): (usize, usize),
    keys: Range<u64>,
    rng: &mut SmallRng,
) {
    let schema = db.table(table).schema().clone();
    let mut row = vec![0u64; schema.row_words()];
    let mut bytes = vec![0u8; column_size];
    for key in keys {
        let mut w = phasedb_storage::RowBuf::new(&schema, &mut row);
        for c in 0..columns {
            rng.fill(&mut bytes[..]);
            w.set_bytes(c, &bytes);
        }
        db.load_image(table, key, &row)
            .expect("YCSB keys are distinct");
    }
}

/// STAR's (and DBx1000's) YCSB transaction (STAR §8.1.1): each operation `(key, write)` reads its
/// whole row, and a write then rewrites every one of its `columns` fields with `value`.
#[inline]
fn star<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    t: TableId,
    columns: usize,
    ops: impl Iterator<Item = (u64, bool)> + Clone,
    value: &[u8],
) -> TxResult<()> {
    tx.prefetch(t, ops.clone().map(|(key, _)| key));
    for (key, write) in ops {
        let row = tx.get(t, key)?;
        debug_assert!(row.is_some(), "YCSB rows are never deleted");
        if write {
            tx.update(t, key, |w| {
                for c in 0..columns {
                    w.set_bytes(c, value);
                }
            })?;
        }
    }
    Ok(())
}
