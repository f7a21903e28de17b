//! Randomised, contended workloads (few keys, several threads, reads, read-modify-writes, blind writes,
//! inserts, deletes, scans and user aborts) recorded and judged by the serializability checker.
//! A failure names the seed; `PHASEDB_SEED=<seed>` replays that seed.

use phasedb_check::{Anomaly, History, check_serializable};
use phasedb_storage::{ColumnType, Schema, TableSpec};
use phasedb_txn::{Config, Database, NoCc, Occ, Protocol, TableId, Tx, TxError, TxResult, columns};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

const KEYS: u64 = 12;

fn seeds(default: &[u64]) -> Vec<u64> {
    match std::env::var("PHASEDB_SEED") {
        Ok(s) => vec![s.parse().expect("PHASEDB_SEED is a number")],
        Err(_) => default.to_vec(),
    }
}

fn open<P: Protocol>(fine: bool) -> (Database<P>, TableId) {
    let mut db = Database::<P>::open(Config {
        record_history: true,
        ..Config::default()
    });
    let schema = Schema::builder()
        .column("a", ColumnType::U64, 0)
        .column("b", ColumnType::U64, if fine { 1 } else { 0 })
        .build()
        .unwrap();
    let t = db.create_table(TableSpec::new("kv", schema, KEYS as usize).ordered());
    for k in (0..KEYS).step_by(2) {
        db.load(t, k, |r| r.set_u64(0, k)).unwrap();
    }
    (db, t)
}

fn random_txn<P: Protocol>(tx: &mut Tx<'_, '_, P>, t: TableId, rng: &mut SmallRng) -> TxResult<()> {
    let ops = rng.random_range(1..6);
    for _ in 0..ops {
        let key = rng.random_range(0..KEYS);
        let col = rng.random_range(0..2usize);
        match rng.random_range(0..100) {
            0..30 => {
                tx.get_columns(t, key, columns(&[col]))?;
            }
            30..55 => {
                let v = tx.get_columns(t, key, columns(&[col]))?.map(|r| r.u64(col));
                if let Some(v) = v {
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
                let lo = rng.random_range(0..KEYS);
                let hi = lo + rng.random_range(0..5);
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

fn run<P: Protocol>(seed: u64, threads: usize, txns: usize, fine: bool) -> History {
    let (db, t) = open::<P>(fine);
    std::thread::scope(|s| {
        for i in 0..threads {
            let db = &db;
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed.wrapping_mul(1000) + i as u64);
                let mut w = db.worker();
                for _ in 0..txns {
                    let mut txn_rng = rng.clone();
                    let r = w.execute(0, |tx| {
                        txn_rng = rng.clone();
                        random_txn(tx, t, &mut txn_rng)
                    });
                    rng = txn_rng;
                    assert!(
                        matches!(r, Ok(()) | Err(TxError::UserAbort)),
                        "seed {seed}: unexpected {r:?}"
                    );
                }
            });
        }
    });
    db.take_history()
}

fn assert_serializable<P: Protocol>(fine: bool) {
    for seed in seeds(&[1, 2, 3, 4, 5, 6]) {
        let h = run::<P>(seed, 4, 1500, fine);
        assert!(
            h.len() > 4000,
            "seed {seed}: only {} transactions committed",
            h.len()
        );
        if let Err(a) = check_serializable(&h) {
            if let Anomaly::Cycle(c) = &a {
                for id in c.txns() {
                    let t = h
                        .txns
                        .iter()
                        .find(|t| t.id == id)
                        .expect("cycle members are in the history");
                    eprintln!("T{id}: reads {:?} writes {:?}", t.reads, t.writes);
                }
            }
            panic!(
                "{} not serializable with seed {seed} (fine = {fine}): {a}",
                P::NAME
            );
        }
    }
}

#[test]
fn occ_is_serializable_coarse() {
    assert_serializable::<Occ>(false);
}

#[test]
fn occ_is_serializable_fine() {
    assert_serializable::<Occ>(true);
}

#[test]
fn checker_catches_nocc_under_contention() {
    let mut caught = 0;
    let seeds = seeds(&[11, 12, 13, 14]);
    for &seed in &seeds {
        let h = run::<NoCc>(seed, 4, 5000, false);
        match check_serializable(&h) {
            Err(Anomaly::Cycle(_) | Anomaly::WriteFork { .. }) => caught += 1,
            Err(other) => panic!("seed {seed}: unexpected anomaly kind {other}"),
            Ok(_) => {}
        }
    }
    assert!(
        caught > 0,
        "no anomaly found in nocc histories for seeds {seeds:?}"
    );
}
