//! The P-DUR paper's micro-benchmark (Pacheco et al., §VI-A, Table I) on the embedded engine: the
//! standalone transactional store the paper compares P-DUR with (it ran Berkeley DB behind an RPC
//! server). Types I (2 reads, 2 writes), II (32 r, 2 w) and III (16 r, 16 w) over 4-byte keys and
//! values, every key of a transaction distinct and chosen uniformly; one table, no partitions.

use phasedb_storage::{ColumnType, Schema, TableSpec};
use phasedb_txn::{Database, Protocol, TableId, TxResult, Worker};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::Workload;

/// The micro-benchmark's settings.
#[derive(Clone, Copy, Debug)]
pub struct PdurMicroConfig {
    /// Reads per transaction.
    pub reads: usize,
    /// Writes per transaction (of keys not read).
    pub writes: usize,
    /// Items (keys `0..items`).
    pub items: u64,
}

/// The workload.
pub struct PdurMicro {
    cfg: PdurMicroConfig,
    name: &'static str,
    table: TableId,
}

/// A thread's generator state.
pub struct PdurMicroThread {
    rng: SmallRng,
    keys: Vec<u64>,
    seq: u32,
}

const VALUE: usize = 0;

impl PdurMicro {
    /// The workload of `cfg`, reported as transaction type `name` ("I", "II", "III").
    pub fn new(cfg: PdurMicroConfig, name: &'static str) -> Result<PdurMicro, String> {
        if cfg.items < 2 * (cfg.reads + cfg.writes) as u64 || cfg.items > 1 << 32 {
            return Err(format!(
                "{} items: need at least {} and at most 2^32",
                cfg.items,
                2 * (cfg.reads + cfg.writes)
            ));
        }
        Ok(PdurMicro {
            cfg,
            name,
            table: 0,
        })
    }
}

impl Workload for PdurMicro {
    type Thread = PdurMicroThread;

    fn name(&self) -> &'static str {
        "pdur-micro"
    }

    fn txn_types(&self) -> Vec<&'static str> {
        vec![self.name]
    }

    fn setup<P: Protocol>(&mut self, db: &mut Database<P>) {
        let schema = Schema::builder()
            .column("value", ColumnType::Fixed(4), 0)
            .build()
            .expect("the item schema is valid");
        self.table = db.create_table(TableSpec::new("items", schema, self.cfg.items as usize));
        for k in 0..self.cfg.items {
            db.load(self.table, k, |r| {
                r.set_bytes(VALUE, &(k as u32).to_le_bytes())
            })
            .expect("keys are distinct");
        }
    }

    fn thread(&self, index: usize, seed: u64) -> PdurMicroThread {
        PdurMicroThread {
            rng: SmallRng::seed_from_u64(seed ^ (index as u64 + 1).wrapping_mul(0x9e37_79b9)),
            keys: Vec::with_capacity(self.cfg.reads + self.cfg.writes),
            seq: 0,
        }
    }

    fn rng<'a>(&self, thread: &'a mut PdurMicroThread) -> &'a mut SmallRng {
        &mut thread.rng
    }

    fn run_one<P: Protocol>(
        &self,
        th: &mut PdurMicroThread,
        worker: &mut Worker<'_, P>,
    ) -> TxResult<()> {
        th.keys.clear();
        while th.keys.len() < self.cfg.reads + self.cfg.writes {
            let k = th.rng.random_range(0..self.cfg.items);
            if !th.keys.contains(&k) {
                th.keys.push(k);
            }
        }
        th.seq = th.seq.wrapping_add(1);
        let value = th.seq.to_le_bytes();
        let (t, r) = (self.table, self.cfg.reads);
        let keys = &th.keys;
        worker.execute(0, |tx| {
            for &k in &keys[..r] {
                tx.get(t, k)?;
            }
            for &k in &keys[r..] {
                tx.update(t, k, |w| w.set_bytes(VALUE, &value))?;
            }
            Ok(())
        })
    }

    fn settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("reads", self.cfg.reads.to_string()),
            ("writes", self.cfg.writes.to_string()),
            ("items", self.cfg.items.to_string()),
        ]
    }
}
