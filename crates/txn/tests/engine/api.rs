//! The `Tx` API's semantics on one worker: reads, own writes, inserts, deletes, scans and aborts.

use phasedb_storage::{ColumnType, Schema, TableSpec};
use phasedb_txn::{
    Adaptive, Config, Database, NoCc, Occ, Protocol, SwissTm, TableId, TicToc, TwoPlBlocking,
    TwoPlNoWait, TwoPlWaitDie, TxError, columns,
};

fn setup<P: Protocol>(fine: bool) -> (Database<P>, TableId) {
    let mut db = Database::<P>::open(Config::default());
    let schema = Schema::builder()
        .column("a", ColumnType::U64, 0)
        .column("name", ColumnType::Bounded(12), if fine { 1 } else { 0 })
        .column("b", ColumnType::I64, if fine { 1 } else { 0 })
        .build()
        .unwrap();
    let t = db.create_table(TableSpec::new("t", schema, 64).ordered());
    for k in (0..10).map(|i| i * 10) {
        db.load(t, k, |r| {
            r.set_u64(0, k);
            r.set_bytes(1, b"row");
            r.set_i64(2, -(k as i64));
        })
        .unwrap();
    }
    (db, t)
}

fn keys_in<P: Protocol>(db: &Database<P>, t: TableId, lo: u64, hi: u64) -> Vec<u64> {
    db.execute(|tx| {
        let mut keys = Vec::new();
        tx.scan(t, lo, hi, usize::MAX, columns(&[0]), |k, _| {
            keys.push(k);
            true
        })?;
        Ok(keys)
    })
    .unwrap()
}

fn api_semantics<P: Protocol>(fine: bool) {
    api_semantics_with::<P>(fine, |_| {});
}

/// The API's semantics on a database that `prepare` sets up first (a protocol's mode).
pub(crate) fn api_semantics_with<P: Protocol>(fine: bool, prepare: impl Fn(&Database<P>)) {
    let (db, t) = setup::<P>(fine);
    prepare(&db);
    // Reads see the transaction's own writes; other transactions see them after commit.
    db.execute(|tx| {
        assert!(tx.update(t, 10, |w| w.set_i64(2, 99))?);
        let row = tx.get(t, 10)?.unwrap();
        assert_eq!(
            (row.u64(0), row.bytes(1), row.i64(2)),
            (10, &b"row"[..], 99)
        );
        assert!(!tx.update(t, 11, |w| w.set_i64(2, 1))?);
        tx.insert(t, 15, |w| {
            w.set_u64(0, 15);
            w.set_bytes(1, b"fifteen");
        })?;
        assert_eq!(tx.get(t, 15)?.unwrap().bytes(1), b"fifteen");
        assert_eq!(
            tx.insert(t, 20, |_| {}),
            Err(TxError::DuplicateKey { table: t, key: 20 })
        );
        assert!(tx.delete(t, 30)?);
        assert!(tx.get(t, 30)?.is_none());
        assert!(!tx.delete(t, 30)?);
        let mut seen = vec![];
        tx.scan(t, 0, 40, 10, columns(&[0, 2]), |k, row| {
            seen.push((k, row.i64(2)));
            true
        })?;
        assert_eq!(seen, vec![(0, 0), (10, 99), (15, 0), (20, -20), (40, -40)]);
        Ok(())
    })
    .unwrap();
    assert_eq!(keys_in(&db, t, 0, 45), vec![0, 10, 15, 20, 40]);
    let row = db
        .execute(|tx| Ok(tx.get(t, 10)?.map(|r| (r.u64(0), r.i64(2)))))
        .unwrap();
    assert_eq!(row, Some((10, 99)));

    // Limits and early stops.
    let first_two = db
        .execute(|tx| {
            let mut keys = vec![];
            let n = tx.scan(t, 5, 100, 2, columns(&[0]), |k, _| {
                keys.push(k);
                true
            })?;
            Ok((n, keys))
        })
        .unwrap();
    assert_eq!(first_two, (2, vec![10, 15]));

    // A user abort and a panic write nothing.
    let r: Result<(), _> = db.execute(|tx| {
        tx.update(t, 0, |w| w.set_i64(2, 1234))?;
        tx.insert(t, 1, |_| {})?;
        Err(tx.abort())
    });
    assert_eq!(r, Err(TxError::UserAbort));
    let r: Result<(), _> = db.execute(|tx| {
        tx.delete(t, 0)?;
        panic!("procedure bug");
    });
    assert!(matches!(r, Err(TxError::Panicked(ref m)) if m == "procedure bug"));
    assert_eq!(
        db.execute(|tx| Ok(tx.get(t, 0)?.map(|r| r.i64(2))))
            .unwrap(),
        Some(0)
    );
    assert_eq!(keys_in(&db, t, 0, 9), vec![0]);

    // Delete then re-insert in one transaction, insert then delete, and re-insert of a deleted key.
    db.execute(|tx| {
        assert!(tx.delete(t, 40)?);
        tx.insert(t, 40, |w| w.set_u64(0, 41))?;
        tx.insert(t, 41, |_| {})?;
        assert!(tx.delete(t, 41)?);
        assert!(tx.get(t, 41)?.is_none());
        Ok(())
    })
    .unwrap();
    assert_eq!(
        db.execute(|tx| Ok(tx.get(t, 40)?.unwrap().u64(0))).unwrap(),
        41
    );
    assert!(db.execute(|tx| Ok(tx.get(t, 41)?.is_none())).unwrap());
    db.execute(|tx| {
        tx.insert(t, 30, |w| w.set_u64(0, 300))?;
        Ok(())
    })
    .unwrap();
    assert_eq!(
        db.execute(|tx| Ok(tx.get(t, 30)?.unwrap().u64(0))).unwrap(),
        300
    );
    assert_eq!(keys_in(&db, t, 25, 45), vec![30, 40]);

    // Scans on a table without an ordered index are refused.
    let mut db2 = Database::<P>::open(Config::default());
    let schema = Schema::builder()
        .column("a", ColumnType::U64, 0)
        .build()
        .unwrap();
    let h = db2.create_table(TableSpec::new("h", schema, 4));
    let r = db2.execute(|tx| tx.scan(h, 0, 10, 1, 1, |_, _| true));
    assert!(matches!(r, Err(TxError::Invalid(_))));
}

#[test]
fn occ_api_coarse() {
    api_semantics::<Occ>(false);
}

#[test]
fn occ_api_fine() {
    api_semantics::<Occ>(true);
}

#[test]
fn nocc_api() {
    api_semantics::<NoCc>(false);
}

#[test]
fn two_phase_locking_api() {
    for fine in [false, true] {
        api_semantics::<TwoPlNoWait>(fine);
        api_semantics::<TwoPlWaitDie>(fine);
        api_semantics::<TwoPlBlocking>(fine);
    }
}

#[test]
fn swisstm_api() {
    api_semantics::<SwissTm>(false);
    api_semantics::<SwissTm>(true);
}

#[test]
fn adaptive_api() {
    api_semantics::<Adaptive>(false);
    api_semantics::<Adaptive>(true);
}

#[test]
fn tictoc_api() {
    api_semantics::<TicToc>(false);
    api_semantics::<TicToc>(true);
}

#[test]
fn fine_grained_writes_bump_only_their_groups() {
    let (db, t) = setup::<Occ>(true);
    let mut w = db.worker();
    // Reader of column a (group 0) is not invalidated by a writer of column b (group 1).
    let reader_commits = w
        .execute(0, |tx| {
            let a = tx.get_columns(t, 10, columns(&[0]))?.unwrap().u64(0);
            db.execute(|other| other.update(t, 10, |w| w.set_i64(2, 7)))
                .unwrap();
            Ok(a)
        })
        .unwrap();
    assert_eq!(reader_commits, 10);
    assert_eq!(w.stats().total().conflicts, 0);
    // A reader of column b is invalidated by the same concurrent writer, and retried.
    let mut first = true;
    let b = w
        .execute(0, |tx| {
            let b = tx.get_columns(t, 10, columns(&[2]))?.unwrap().i64(2);
            if first {
                first = false;
                db.execute(|other| other.update(t, 10, |w| w.set_i64(2, 8)))
                    .unwrap();
            }
            tx.update(t, 20, |w| w.set_i64(2, b))?;
            Ok(b)
        })
        .unwrap();
    assert_eq!(b, 8);
    assert_eq!(w.stats().total().conflicts, 1);
}

#[test]
fn phantom_insert_into_a_scanned_range_aborts_the_scanner() {
    let (db, t) = setup::<Occ>(false);
    let mut w = db.worker();
    let mut first = true;
    let count = w
        .execute(0, |tx| {
            let n = tx.scan(t, 0, 50, usize::MAX, columns(&[0]), |_, _| true)?;
            if first {
                first = false;
                db.execute(|other| other.insert(t, 25, |_| {})).unwrap();
            }
            tx.update(t, 0, |w| w.set_i64(2, n as i64))?;
            Ok(n)
        })
        .unwrap();
    assert_eq!(count, 7);
    assert_eq!(
        w.stats().total().conflict_kinds[3],
        1,
        "one phantom conflict"
    );
}

#[test]
fn missing_key_read_is_protected() {
    let (db, t) = setup::<Occ>(false);
    let mut w = db.worker();
    let mut first = true;
    let found = w
        .execute(0, |tx| {
            let found = tx.get(t, 5)?.is_some();
            if first {
                first = false;
                db.execute(|other| other.insert(t, 5, |_| {})).unwrap();
            }
            tx.update(t, 0, |w| w.set_i64(2, found as i64))?;
            Ok(found)
        })
        .unwrap();
    assert!(found);
    assert_eq!(w.stats().total().conflicts, 1);
}
