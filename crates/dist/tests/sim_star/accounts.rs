//! A tiny bank as a partitioned workload, for STAR's tests: accounts grouped by partition, and
//! transfers within a partition or across two. Each partition also has a vault row that holds the
//! net amount moved into the partition by cross-partition transfers, so every partition on every
//! replica has its own invariant: its balances minus its vault equal what it started with. The
//! vault also counts the transfers out of its partition, so every transaction writes its home
//! partition's vault: a hot row, where a lost update shows at once. Transfers that would overdraw
//! abort by the procedure's own choice. A transfer of 0 is a read-only audit of its two accounts.

use phasedb_storage::{ColumnType, Schema, TableSpec};
use phasedb_txn::{
    Database, PartitionId, Procedures, Protocol, TableId, Touched, TxResult, Worker,
};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

/// The balance (the vault's net inflow on a vault row).
const BALANCE: usize = 0;
/// A wide column in the balance's column group that transfers never write: value replication
/// carries it, operation replication does not.
const MEMO: usize = 1;
/// On a vault row: the transfers committed out of its partition.
const COUNT: usize = 2;

/// Accounts per partition, their starting balance and the partitions.
#[derive(Clone, Debug)]
pub struct Accounts {
    pub partitions: u32,
    pub rows: u64,
    pub initial: i64,
    table: TableId,
}

/// Moves `amount` from account `from` to account `to` (keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfer {
    pub from: u64,
    pub to: u64,
    pub amount: i64,
}

impl Accounts {
    pub fn new(partitions: u32, rows: u64) -> Accounts {
        Accounts {
            partitions,
            rows,
            initial: 100,
            table: 0,
        }
    }

    /// Keys of a partition are `p * stride ..`; the last one is its vault.
    fn stride(&self) -> u64 {
        self.rows + 1
    }

    pub fn account(&self, p: PartitionId, i: u64) -> u64 {
        p as u64 * self.stride() + i
    }

    fn vault(&self, p: PartitionId) -> u64 {
        self.account(p, self.rows)
    }

    fn part(&self, key: u64) -> PartitionId {
        (key / self.stride()).min(u32::MAX as u64) as u32
    }

    /// The transfers the vaults of `held` counted, in `db`.
    pub fn counted<P: Protocol>(&self, db: &Database<P>, held: &[PartitionId]) -> i64 {
        let mut n = 0;
        db.for_each_row_quiescent(self.table, |key, row| {
            let p = self.part(key);
            if key == self.vault(p) && held.contains(&p) {
                n += row.i64(COUNT);
            }
        });
        n
    }
}

impl Procedures for Accounts {
    type Request = Transfer;
    type Gen = SmallRng;

    fn name(&self) -> &'static str {
        "accounts"
    }

    fn partitions(&self) -> u32 {
        self.partitions
    }

    fn txn_types(&self) -> Vec<&'static str> {
        vec!["transfer", "cross_transfer"]
    }

    fn create_tables<P: Protocol>(&mut self, db: &mut Database<P>) {
        let schema = Schema::builder()
            .column("balance", ColumnType::I64, 0)
            .column("memo", ColumnType::Fixed(64), 0)
            .column("count", ColumnType::I64, 0)
            .build()
            .expect("a valid schema");
        let capacity = (self.stride() * self.partitions as u64) as usize;
        self.table = db.create_table(TableSpec::new("accounts", schema, capacity));
    }

    fn load_partition<P: Protocol>(&self, db: &Database<P>, p: PartitionId) {
        for i in 0..=self.rows {
            let balance = if i == self.rows { 0 } else { self.initial };
            db.load(self.table, self.account(p, i), |row| {
                row.set_i64(BALANCE, balance);
                row.set_bytes(MEMO, format!("account {i} of partition {p}").as_bytes());
            })
            .expect("keys are distinct");
        }
    }

    fn partition_of(&self, _table: TableId, key: u64) -> Option<PartitionId> {
        Some(self.part(key))
    }

    fn generator(&self, index: usize, seed: u64) -> SmallRng {
        SmallRng::seed_from_u64(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ index as u64)
    }

    fn generate(&self, rng: &mut SmallRng, home: PartitionId, cross: f64) -> Transfer {
        let from = self.account(home, rng.random_range(0..self.rows));
        let to = if self.partitions > 1 && rng.random::<f64>() < cross {
            let other = rng.random_range(0..self.partitions - 1);
            let other = if other >= home { other + 1 } else { other };
            self.account(other, rng.random_range(0..self.rows))
        } else {
            let i = rng.random_range(0..self.rows - 1);
            let i = if self.account(home, i) >= from {
                i + 1
            } else {
                i
            };
            self.account(home, i)
        };
        Transfer {
            from,
            to,
            amount: rng.random_range(1..=self.initial * 3 / 5),
        }
    }

    fn touched(&self, req: &Transfer) -> Touched {
        let mut t = Touched::home(self.part(req.from));
        t.add(self.part(req.to));
        t
    }

    fn txn_type(&self, req: &Transfer) -> usize {
        self.touched(req).is_cross() as usize
    }

    /// A transfer of nothing is an audit: it reads both balances and writes nothing.
    fn read_only(&self, req: &Transfer) -> bool {
        req.amount == 0
    }

    fn run<P: Protocol>(&self, req: &Transfer, worker: &mut Worker<'_, P>) -> TxResult<()> {
        let (t, r) = (self.table, *req);
        if r.amount == 0 {
            // Committed balances are never negative: an audit that saw one aborts.
            return worker.execute(self.txn_type(req), |tx| {
                for key in [r.from, r.to] {
                    match tx.get(t, key)?.map(|row| row.i64(BALANCE)) {
                        Some(b) if b >= 0 => {}
                        _ => return Err(tx.abort()),
                    }
                }
                Ok(())
            });
        }
        let (pf, pt) = (self.part(r.from), self.part(r.to));
        let (vault_from, vault_to) = (self.vault(pf), self.vault(pt));
        worker.execute(self.txn_type(req), |tx| {
            let Some(from) = tx.get(t, r.from)?.map(|row| row.i64(BALANCE)) else {
                return Err(tx.abort());
            };
            if from < r.amount {
                return Err(tx.abort());
            }
            let Some(to) = tx.get(t, r.to)?.map(|row| row.i64(BALANCE)) else {
                return Err(tx.abort());
            };
            tx.update(t, r.from, |row| row.set_i64(BALANCE, from - r.amount))?;
            tx.update(t, r.to, |row| row.set_i64(BALANCE, to + r.amount))?;
            tx.add(t, vault_from, COUNT, 1)?;
            if pf != pt {
                tx.add(t, vault_from, BALANCE, -r.amount)?;
                tx.add(t, vault_to, BALANCE, r.amount)?;
            }
            Ok(())
        })
    }

    /// Every held partition's balances minus its vault equal its starting total, and no balance
    /// is negative.
    fn check<P: Protocol>(&self, db: &Database<P>, held: &[PartitionId]) -> Result<(), String> {
        let mut sums = vec![0i64; self.partitions as usize];
        let mut rows = vec![0u64; self.partitions as usize];
        let mut negative = None;
        db.for_each_row_quiescent(self.table, |key, row| {
            let p = self.part(key) as usize;
            let b = row.i64(BALANCE);
            if key == self.vault(p as u32) {
                sums[p] -= b;
            } else {
                sums[p] += b;
                if b < 0 {
                    negative = Some(key);
                }
            }
            rows[p] += 1;
        });
        if let Some(key) = negative {
            return Err(format!("account {key} is overdrawn"));
        }
        for &p in held {
            let want = self.rows as i64 * self.initial;
            if rows[p as usize] != self.rows + 1 || sums[p as usize] != want {
                return Err(format!(
                    "partition {p}: {} rows, balances less vault {} (expected {} rows, {want})",
                    rows[p as usize],
                    sums[p as usize],
                    self.rows + 1
                ));
            }
        }
        Ok(())
    }
}
