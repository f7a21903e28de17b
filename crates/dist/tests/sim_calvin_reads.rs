//! Calvin's remote reads carry values: a workload whose writes to one partition depend on a row of
//! another that other transactions keep changing. Each request moves half of one account's
//! balance to another account, often of another partition, so the node owning the destination
//! must read the source's current balance, which only the source's owner has. Under the
//! simulator, with delays that reorder every message, each replica group must end equal to a
//! serial run of the sequencer's global order and keep the total of all balances. A failing run
//! prints its seed (replay one with `PHASEDB_SIM_SEED=<seed>`).

use phasedb_dist::calvin::{Groups, Lock, ReadRows, dry_run_reads, open_database};
use phasedb_storage::{ColumnType, Schema, TableSpec};
use phasedb_txn::{
    Database, Occ, PartitionId, Procedures, Protocol, TableId, Touched, TxError, TxResult, Worker,
    columns,
};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

#[path = "calvin/harness.rs"]
mod harness;

use harness::{Sets, run_calvin};

const PARTITIONS: u32 = 2;
/// Few accounts, so that nearly every transfer reads a balance an earlier one changed.
const ACCOUNTS_PER_PARTITION: u64 = 6;
const INITIAL: i64 = 1 << 20;
const BALANCE: usize = 0;

fn seeds(n: u64) -> Vec<u64> {
    match std::env::var("PHASEDB_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("PHASEDB_SIM_SEED is a number")],
        Err(_) => (1..=n).collect(),
    }
}

/// Transfers of half a balance (see the module doc).
struct Halves {
    table: TableId,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Transfer {
    from: u64,
    to: u64,
}

fn partition(key: u64) -> PartitionId {
    (key / ACCOUNTS_PER_PARTITION) as PartitionId
}

fn halves_locks(_: &Halves, req: &Transfer, out: &mut Vec<Lock>) {
    out.push((partition(req.from), req.from, true));
    out.push((partition(req.to), req.to, true));
}

fn halves_reads(w: &Halves, req: &Transfer, out: &mut Vec<(TableId, u64)>) -> bool {
    out.push((w.table, req.from));
    out.push((w.table, req.to));
    true
}

impl Procedures for Halves {
    type Request = Transfer;
    type Gen = SmallRng;

    fn name(&self) -> &'static str {
        "halves"
    }

    fn partitions(&self) -> u32 {
        PARTITIONS
    }

    fn txn_types(&self) -> Vec<&'static str> {
        vec!["transfer"]
    }

    fn create_tables<P: Protocol>(&mut self, db: &mut Database<P>) {
        let schema = Schema::builder()
            .column("balance", ColumnType::I64, 0)
            .build()
            .expect("the schema is valid");
        let rows = (ACCOUNTS_PER_PARTITION * PARTITIONS as u64) as usize;
        self.table = db.create_table(TableSpec::new("accounts", schema, rows));
    }

    fn load_partition<P: Protocol>(&self, db: &Database<P>, p: PartitionId) {
        let first = p as u64 * ACCOUNTS_PER_PARTITION;
        for key in first..first + ACCOUNTS_PER_PARTITION {
            db.load(self.table, key, |r| r.set_i64(BALANCE, INITIAL))
                .expect("keys are distinct");
        }
    }

    fn partition_of(&self, _: TableId, key: u64) -> Option<PartitionId> {
        Some(partition(key))
    }

    fn generator(&self, index: usize, seed: u64) -> SmallRng {
        SmallRng::seed_from_u64(seed ^ index as u64)
    }

    fn generate(&self, rng: &mut SmallRng, home: PartitionId, cross: f64) -> Transfer {
        let first = home as u64 * ACCOUNTS_PER_PARTITION;
        let from = first + rng.random_range(0..ACCOUNTS_PER_PARTITION);
        let to_part = if rng.random_bool(cross) {
            (home + 1) % PARTITIONS
        } else {
            home
        };
        let to = loop {
            let to = to_part as u64 * ACCOUNTS_PER_PARTITION
                + rng.random_range(0..ACCOUNTS_PER_PARTITION);
            if to != from {
                break to;
            }
        };
        Transfer { from, to }
    }

    fn touched(&self, req: &Transfer) -> Touched {
        let mut t = Touched::home(partition(req.from));
        t.add(partition(req.to));
        t
    }

    fn txn_type(&self, _: &Transfer) -> usize {
        0
    }

    fn run<P: Protocol>(&self, req: &Transfer, worker: &mut Worker<'_, P>) -> TxResult<()> {
        let (t, cols) = (self.table, columns(&[BALANCE]));
        worker.execute(0, |tx| {
            let a = tx
                .get_columns(t, req.from, cols)?
                .ok_or(TxError::Invalid("missing account"))?
                .i64(BALANCE);
            let b = tx
                .get_columns(t, req.to, cols)?
                .ok_or(TxError::Invalid("missing account"))?
                .i64(BALANCE);
            tx.update(t, req.from, |w| w.set_i64(BALANCE, a - a / 2))?;
            tx.update(t, req.to, |w| w.set_i64(BALANCE, b + a / 2))?;
            Ok(())
        })
    }
}

/// Every balance of the partitions `node` owns.
fn balances(db: &Database<Occ>, w: &Halves, owned: &[PartitionId]) -> Vec<(u64, i64)> {
    let mut out = Vec::new();
    db.for_each_row_quiescent(w.table, |key, row| {
        if owned.contains(&partition(key)) {
            out.push((key, row.i64(BALANCE)));
        }
    });
    out
}

/// The balances after a serial run of `order` on a fresh database.
fn serial(order: &[Vec<u8>]) -> Vec<(u64, i64)> {
    let mut w = Halves { table: 0 };
    let db = open_database(&mut w, false);
    let mut worker = db.worker();
    for body in order {
        let req: Transfer = postcard::from_bytes(body).unwrap();
        w.run(&req, &mut worker).unwrap();
    }
    drop(worker);
    let mut b = balances(&db, &w, &(0..PARTITIONS).collect::<Vec<_>>());
    b.sort_unstable();
    b
}

/// With the rows named by the workload, and found by dry runs.
#[test]
fn a_participant_runs_on_the_values_the_owners_sent() {
    let named: ReadRows<Halves> = halves_reads;
    for (seed, reads) in seeds(3)
        .into_iter()
        .flat_map(|s| [(s, named), (s, dry_run_reads)])
    {
        for sizes in [&[2][..], &[1, 1][..], &[1, 2][..]] {
            let mut w = Halves { table: 0 };
            let nodes: u32 = sizes.iter().sum();
            let dbs: Vec<Database<Occ>> =
                (0..nodes).map(|_| open_database(&mut w, false)).collect();
            let groups = Groups::new(sizes, PARTITIONS).unwrap();
            let sets = Sets {
                locks: halves_locks,
                reads,
            };
            let sim = run_calvin(seed, &groups, 0.8, 100, &dbs, &w, sets);
            let order = sim.node(0).order().to_vec();
            assert!(
                order.len() > 100,
                "seed {seed}: only {} ordered",
                order.len()
            );
            let expected = serial(&order);
            for g in 0..groups.groups() {
                let mut got: Vec<(u64, i64)> = groups
                    .members(g)
                    .flat_map(|n| balances(&dbs[n as usize], &w, &groups.owned(n)))
                    .collect();
                got.sort_unstable();
                assert_eq!(
                    got, expected,
                    "seed {seed}: {sizes:?}: group {g} differs from the serial run of its order (replay: PHASEDB_SIM_SEED={seed})"
                );
                let total: i64 = got.iter().map(|b| b.1).sum();
                assert_eq!(
                    total,
                    INITIAL * (ACCOUNTS_PER_PARTITION * PARTITIONS as u64) as i64,
                    "seed {seed}: {sizes:?}: group {g} lost or made money"
                );
            }
            for n in 0..nodes {
                assert_eq!(
                    sim.node(n).stats().requests.errors,
                    0,
                    "seed {seed}: node {n} counted errors"
                );
            }
        }
    }
}
