//! The randomised, contended workload that the history tests share: few keys, several threads,
//! reads, read-modify-writes, blind writes, inserts, deletes, optional scans and user aborts.

#![allow(dead_code)]

use std::sync::Barrier;

use phasedb_check::History;
use phasedb_storage::{ColumnType, Schema, TableSpec};
use phasedb_txn::{Config, Database, Protocol, SplitOp, TableId, Tx, TxError, TxResult, columns};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

/// The seeds to run: `PHASEDB_SEED=<seed>` replays one, otherwise `default`.
pub fn seeds(default: &[u64]) -> Vec<u64> {
    match std::env::var("PHASEDB_SEED") {
        Ok(s) => vec![s.parse().expect("PHASEDB_SEED is a number")],
        Err(_) => default.to_vec(),
    }
}

/// A recording database with one ordered table `kv` of two u64 columns (in two column groups when
/// `fine`), keys `0..keys` loaded every `load_every`.
pub fn open<P: Protocol>(fine: bool, keys: u64, load_every: usize) -> (Database<P>, TableId) {
    open_with(
        Config {
            record_history: true,
            ..Config::default()
        },
        fine,
        keys,
        load_every,
    )
}

/// As [`open`], with the configuration `config`.
pub fn open_with<P: Protocol>(
    config: Config,
    fine: bool,
    keys: u64,
    load_every: usize,
) -> (Database<P>, TableId) {
    let mut db = Database::<P>::open(config);
    let schema = Schema::builder()
        .column("a", ColumnType::U64, 0)
        .column("b", ColumnType::U64, if fine { 1 } else { 0 })
        .build()
        .unwrap();
    let t = db.create_table(TableSpec::new("kv", schema, keys as usize).ordered());
    for k in (0..keys).step_by(load_every) {
        db.load(t, k, |r| r.set_u64(0, k)).unwrap();
    }
    (db, t)
}

/// The shape of the random transactions.
#[derive(Clone, Copy, Debug)]
pub struct Mix {
    pub keys: u64,
    /// Include range scans (Elle's models have no predicates, so its tests leave them out).
    pub scans: bool,
    /// Chance, per operation, of giving the core away so transactions interleave even on two cores.
    pub yield_ratio: f64,
    /// Share of operations that are splittable increments of column `a` (`Tx::add` or, as often,
    /// `Tx::commute`).
    pub adds: f64,
}

/// One to five random operations, and rarely a user abort.
pub fn random_txn<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    t: TableId,
    mix: Mix,
    rng: &mut SmallRng,
) -> TxResult<()> {
    random_txn_in(tx, t, mix, 0, rng)
}

/// [`random_txn`] on the keys `base..base + mix.keys` only (scans included): transactions of
/// different ranges touch disjoint rows, as in a partitioned deployment.
pub fn random_txn_in<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    t: TableId,
    mix: Mix,
    base: u64,
    rng: &mut SmallRng,
) -> TxResult<()> {
    for _ in 0..rng.random_range(1..6) {
        if rng.random_bool(mix.yield_ratio) {
            std::thread::yield_now();
        }
        let key = base + rng.random_range(0..mix.keys);
        if rng.random_bool(mix.adds) {
            // Keys are skewed towards the range's start so some become hot enough to split.
            let hot = base + (key - base).min(rng.random_range(0..3));
            if rng.random_bool(0.5) {
                tx.add(t, hot, 0, 1)?;
            } else {
                tx.commute(t, hot, 0, SplitOp::Add(1))?;
            }
            continue;
        }
        let col = rng.random_range(0..2usize);
        let mut op = rng.random_range(0..100);
        if !mix.scans && (85..98).contains(&op) {
            op = 0;
        }
        match op {
            0..30 => {
                tx.get_columns(t, key, columns(&[col]))?;
            }
            30..55 => {
                if let Some(v) = tx.get_columns(t, key, columns(&[col]))?.map(|r| r.u64(col)) {
                    tx.update(t, key, |w| w.set_u64(col, v + 1))?;
                }
            }
            55..65 => {
                let v = rng.random_range(0..1000);
                tx.update(t, key, |w| w.set_u64(col, v))?;
            }
            65..75 => match tx.insert(t, key, |w| w.set_u64(0, key)) {
                Err(TxError::DuplicateKey { .. }) => {}
                r => r?,
            },
            75..85 => {
                tx.delete(t, key)?;
            }
            85..98 => {
                let lo = base + rng.random_range(0..mix.keys);
                let hi = (lo + rng.random_range(0..5)).min(base + mix.keys - 1);
                let limit = rng.random_range(1..5);
                let mut sum = 0;
                tx.scan(t, lo, hi, limit, columns(&[col]), |_, row| {
                    sum += row.u64(col);
                    true
                })?;
                if rng.random_bool(0.5) {
                    tx.update(t, key, |w| w.set_u64(col, sum))?;
                }
            }
            _ => return Err(tx.abort()),
        }
    }
    Ok(())
}

/// Runs `threads` workers of `txns` random transactions each; returns the history and the number of
/// conflicting attempts.
pub fn run<P: Protocol>(
    seed: u64,
    threads: usize,
    txns: usize,
    fine: bool,
    mix: Mix,
) -> (History, u64) {
    let (db, t) = open::<P>(fine, mix.keys, 2);
    run_on(&db, t, seed, threads, txns, mix)
}

/// As [`run`], on a database already opened with [`open_with`].
pub fn run_on<P: Protocol>(
    db: &Database<P>,
    t: TableId,
    seed: u64,
    threads: usize,
    txns: usize,
    mix: Mix,
) -> (History, u64) {
    let start = Barrier::new(threads);
    let conflicts = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let start = &start;
                s.spawn(move || {
                    let mut rng =
                        SmallRng::seed_from_u64(seed.wrapping_mul(1000).wrapping_add(i as u64));
                    let mut w = db.worker();
                    start.wait();
                    for _ in 0..txns {
                        // Every attempt of one transaction replays the same operations.
                        let mut txn_rng = rng.clone();
                        let r = w.execute(0, |tx| {
                            txn_rng = rng.clone();
                            random_txn(tx, t, mix, &mut txn_rng)
                        });
                        rng = txn_rng;
                        assert!(
                            matches!(r, Ok(()) | Err(TxError::UserAbort)),
                            "seed {seed}: unexpected {r:?}"
                        );
                    }
                    w.stats().total().conflicts
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker panicked"))
            .sum()
    });
    db.settle();
    (db.take_history(), conflicts)
}
