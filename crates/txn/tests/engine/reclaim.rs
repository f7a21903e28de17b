//! Deleted records leave the indexes once no transaction that ran during the delete is left, so a
//! table that churns keeps a bounded size; records deleted while a reader runs stay visible to it.

use std::time::{Duration, Instant};

use phasedb_storage::{ColumnType, Schema, TableSpec};
use phasedb_txn::{Config, Database, Occ, TxError};

fn churn_db() -> (Database<Occ>, u32) {
    let mut db = Database::<Occ>::open(Config {
        epoch_interval: Duration::from_millis(2),
        ..Config::default()
    });
    let schema = Schema::builder()
        .column("v", ColumnType::U64, 0)
        .build()
        .unwrap();
    let t = db.create_table(TableSpec::new("churn", schema, 16).ordered());
    (db, t)
}

#[test]
fn churned_keys_are_unlinked_after_the_grace_period() {
    let (db, t) = churn_db();
    let mut w = db.worker();
    for round in 0..200u64 {
        for k in 0..50u64 {
            w.execute(0, |tx| tx.insert(t, round * 1000 + k, |r| r.set_u64(0, k)))
                .unwrap();
        }
        for k in 0..50u64 {
            assert!(w.execute(0, |tx| tx.delete(t, round * 1000 + k)).unwrap());
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while !db.table(t).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
        w.execute(0, |tx| Ok(tx.get(t, 0)?.is_some())).unwrap();
    }
    assert_eq!(
        db.table(t).len(),
        0,
        "10000 deleted records should all be unlinked"
    );
}

#[test]
fn tombstones_outlive_a_running_reader_and_orphans_are_adopted() {
    let (db, t) = churn_db();
    db.execute(|tx| tx.insert(t, 7, |r| r.set_u64(0, 1)))
        .unwrap();
    let mut reader = db.worker();
    let mut first = true;
    // The reader scans, then (only on its first attempt) another worker inserts and deletes a key in
    // the range and its tombstone must still be linked when the reader validates: the reader retries.
    let seen = reader
        .execute(0, |tx| {
            let n = tx.scan(t, 0, 100, usize::MAX, 1, |_, _| true)?;
            if first {
                first = false;
                let mut other = db.worker();
                other
                    .execute(0, |tx| tx.insert(t, 50, |r| r.set_u64(0, 2)))
                    .unwrap();
                other.execute(0, |tx| tx.delete(t, 50)).unwrap();
                std::thread::sleep(Duration::from_millis(20));
                other.execute(0, |tx| Ok(tx.get(t, 7)?.is_some())).unwrap();
                assert!(
                    db.table(t).get(50, &phasedb_storage::pin()).is_some(),
                    "tombstone kept for the reader"
                );
                drop(other);
            }
            tx.update(t, 7, |r| r.set_u64(0, n as u64))?;
            Ok(n)
        })
        .unwrap();
    assert_eq!(seen, 1);
    assert_eq!(
        reader.stats().total().conflict_kinds[3],
        1,
        "the insert-then-delete was seen as a phantom"
    );
    drop(reader);
    // The dropped worker's tombstone is adopted by the next worker that reclaims.
    let mut w = db.worker();
    let deadline = Instant::now() + Duration::from_secs(5);
    while db.table(t).len() > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
        w.execute(0, |tx| tx.delete(t, 999)).unwrap();
    }
    assert_eq!(db.table(t).len(), 1);
    assert_eq!(
        db.execute(|tx| tx.insert(t, 7, |_| {})),
        Err(TxError::DuplicateKey { table: t, key: 7 })
    );
}
