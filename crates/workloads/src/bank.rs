//! Bank transfers: money moves between accounts and its total never changes. Transfers that would
//! overdraw an account abort by the procedure's own choice; audits scan every account and count a
//! violation if the total they see differs. A serializable protocol never shows one.

use std::sync::atomic::{AtomicU64, Ordering};

use phasedb_storage::{ColumnType, Schema, TableSpec};
use phasedb_txn::{Database, Protocol, TableId, Tx, TxError, TxResult, Worker, columns};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::Workload;

/// Bank settings.
#[derive(Clone, Debug)]
pub struct BankConfig {
    pub accounts: u64,
    pub initial_balance: i64,
    /// Share of transactions that audit the total.
    pub audit_ratio: f64,
    /// Put the balance in its own column group, apart from the owner's name.
    pub fine: bool,
}

impl Default for BankConfig {
    fn default() -> Self {
        BankConfig {
            accounts: 1000,
            initial_balance: 1000,
            audit_ratio: 0.01,
            fine: false,
        }
    }
}

const BALANCE: usize = 0;
const OWNER: usize = 1;

/// The bank workload.
pub struct Bank {
    cfg: BankConfig,
    table: TableId,
    violations: AtomicU64,
}

/// A thread's generator state.
pub struct BankThread {
    rng: SmallRng,
}

impl Bank {
    /// A bank with settings `cfg`.
    pub fn new(cfg: BankConfig) -> Bank {
        Bank {
            cfg,
            table: 0,
            violations: AtomicU64::new(0),
        }
    }

    /// Audits that saw a total other than the initial one.
    pub fn violations(&self) -> u64 {
        self.violations.load(Ordering::Relaxed)
    }

    fn expected_total(&self) -> i64 {
        self.cfg.accounts as i64 * self.cfg.initial_balance
    }

    /// The total of all balances, read in one transaction.
    pub fn total<P: Protocol>(&self, db: &Database<P>) -> i64 {
        db.execute(|tx| audit(tx, self.table))
            .expect("a read-only audit commits")
    }
}

/// Sums every balance with one scan.
fn audit<P: Protocol>(tx: &mut Tx<'_, '_, P>, t: TableId) -> TxResult<i64> {
    let mut sum = 0;
    tx.scan(t, 0, u64::MAX, usize::MAX, columns(&[BALANCE]), |_, row| {
        sum += row.i64(BALANCE);
        true
    })?;
    Ok(sum)
}

impl Workload for Bank {
    type Thread = BankThread;

    fn name(&self) -> &'static str {
        "bank"
    }

    fn txn_types(&self) -> Vec<&'static str> {
        vec!["transfer", "audit"]
    }

    fn setup<P: Protocol>(&mut self, db: &mut Database<P>) {
        let schema = Schema::builder()
            .column("balance", ColumnType::I64, 0)
            .column(
                "owner",
                ColumnType::Bounded(16),
                if self.cfg.fine { 1 } else { 0 },
            )
            .build()
            .expect("the bank schema is valid");
        self.table = db
            .create_table(TableSpec::new("accounts", schema, self.cfg.accounts as usize).ordered());
        for a in 0..self.cfg.accounts {
            db.load(self.table, a, |r| {
                r.set_i64(BALANCE, self.cfg.initial_balance);
                r.set_bytes(OWNER, format!("owner-{a}").as_bytes());
            })
            .expect("account ids are distinct");
        }
    }

    fn recovered<P: Protocol>(&mut self, _db: &Database<P>) -> Result<(), String> {
        Ok(())
    }

    fn rng<'a>(&self, thread: &'a mut BankThread) -> &'a mut SmallRng {
        &mut thread.rng
    }

    fn thread(&self, index: usize, seed: u64) -> BankThread {
        BankThread {
            rng: SmallRng::seed_from_u64(seed.wrapping_add(index as u64 * 7919)),
        }
    }

    fn run_one<P: Protocol>(
        &self,
        th: &mut BankThread,
        worker: &mut Worker<'_, P>,
    ) -> TxResult<()> {
        let t = self.table;
        if th.rng.random_bool(self.cfg.audit_ratio) {
            let sum = worker.execute(1, |tx| audit(tx, t))?;
            if sum != self.expected_total() {
                self.violations.fetch_add(1, Ordering::Relaxed);
            }
            return Ok(());
        }
        let from = th.rng.random_range(0..self.cfg.accounts);
        let mut to = th.rng.random_range(0..self.cfg.accounts - 1);
        if to >= from {
            to += 1;
        }
        let amount = th.rng.random_range(1..=self.cfg.initial_balance / 2);
        let r = worker.execute(0, |tx| {
            let a = tx
                .get_columns(t, from, columns(&[BALANCE]))?
                .ok_or(TxError::Invalid("missing account"))?
                .i64(BALANCE);
            if a < amount {
                return Err(tx.abort());
            }
            let b = tx
                .get_columns(t, to, columns(&[BALANCE]))?
                .ok_or(TxError::Invalid("missing account"))?
                .i64(BALANCE);
            tx.update(t, from, |w| w.set_i64(BALANCE, a - amount))?;
            tx.update(t, to, |w| w.set_i64(BALANCE, b + amount))?;
            Ok(())
        });
        match r {
            Err(TxError::UserAbort) => Ok(()),
            r => r,
        }
    }

    fn check<P: Protocol>(&self, db: &Database<P>) -> Result<(), String> {
        let total = self.total(db);
        if total != self.expected_total() {
            return Err(format!(
                "total balance is {total}, expected {}",
                self.expected_total()
            ));
        }
        match self.violations() {
            0 => Ok(()),
            v => Err(format!(
                "{v} audits saw a total other than {}",
                self.expected_total()
            )),
        }
    }

    fn settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("accounts", self.cfg.accounts.to_string()),
            ("initial_balance", self.cfg.initial_balance.to_string()),
            ("audit_ratio", self.cfg.audit_ratio.to_string()),
            (
                "granularity",
                if self.cfg.fine { "fine" } else { "coarse" }.into(),
            ),
        ]
    }
}
