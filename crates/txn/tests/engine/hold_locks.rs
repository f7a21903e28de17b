//! Commits that keep their write locks (`Worker::set_hold_locks`, for synchronous replication) and
//! NO_WAIT workers (`Worker::set_no_wait`): a held write can be neither read nor overwritten until
//! `release_locks`, a commit that fails validation holds nothing, value replication reads a held
//! write, and a dropped worker releases what it holds.

use phasedb_txn::tid::{ABSENT, LOCK, TidWord, tid};
use phasedb_txn::{
    Config, Database, Occ, Protocol, ReplicationMode, Star, TableId, TxError, TxResult, Worker,
};

use crate::common::open_with;

const KEYS: u64 = 8;

fn open<P: Protocol>() -> (Database<P>, TableId) {
    open_with::<P>(Config::default(), true, KEYS, 1)
}

fn word<P: Protocol<Meta = TidWord>>(
    db: &Database<P>,
    t: TableId,
    key: u64,
    g: usize,
) -> Option<u64> {
    let table = db.table(t);
    let guard = phasedb_storage::pin();
    table
        .get(key, &guard)
        .map(|r| r.meta(table.layout(), g).load())
}

fn read<P: Protocol>(w: &mut Worker<'_, P>, t: TableId, key: u64) -> TxResult<Option<u64>> {
    w.execute(0, |tx| Ok(tx.get(t, key)?.map(|r| r.u64(0))))
}

fn write<P: Protocol>(w: &mut Worker<'_, P>, t: TableId, key: u64, v: u64) -> TxResult<()> {
    w.execute(0, |tx| {
        tx.update(t, key, |r| r.set_u64(0, v))?;
        Ok(())
    })
}

fn held_writes_conflict_until_released<P: Protocol<Meta = TidWord>>() {
    let (db, t) = open::<P>();
    let mut holder = db.worker();
    holder.set_hold_locks(true);
    holder.set_no_wait(true);
    let mut other = db.worker();
    other.set_no_wait(true);

    holder
        .execute(0, |tx| {
            tx.update(t, 0, |r| r.set_u64(0, 70))?;
            tx.insert(t, 100, |r| r.set_u64(0, 1))?;
            assert!(tx.delete(t, 3)?);
            Ok(())
        })
        .unwrap();
    assert!(holder.holds_locks());
    let w0 = word(&db, t, 0, 0).unwrap();
    assert_ne!(w0 & LOCK, 0, "the updated group stays locked");
    assert_eq!(
        word(&db, t, 0, 1).unwrap() & LOCK,
        0,
        "a group not written is free"
    );
    assert_ne!(word(&db, t, 3, 0).unwrap() & (LOCK | ABSENT), 0);

    for key in [0, 3, 100] {
        assert!(
            matches!(read(&mut other, t, key), Err(TxError::Conflict(_))),
            "a held write of key {key} was read"
        );
    }
    assert!(matches!(
        write(&mut other, t, 0, 5),
        Err(TxError::Conflict(_))
    ));
    assert_eq!(
        read(&mut other, t, 1).unwrap(),
        Some(1),
        "other rows are free"
    );

    holder.release_locks();
    assert!(!holder.holds_locks());
    assert_eq!(
        word(&db, t, 0, 0),
        Some(tid(w0)),
        "released with the TID installed"
    );
    assert_eq!(read(&mut other, t, 0).unwrap(), Some(70));
    assert_eq!(read(&mut other, t, 100).unwrap(), Some(1));
    assert_eq!(read(&mut other, t, 3).unwrap(), None);
    write(&mut other, t, 0, 5).unwrap();
    assert_eq!(read(&mut holder, t, 0).unwrap(), Some(5));
}

#[test]
fn a_held_write_cannot_be_read_or_overwritten_until_released_under_occ() {
    held_writes_conflict_until_released::<Occ>();
}

#[test]
fn a_held_write_cannot_be_read_or_overwritten_until_released_under_stars_single_master_rule() {
    held_writes_conflict_until_released::<Star>();
}

#[test]
fn a_commit_that_fails_validation_releases_its_locks() {
    let (db, t) = open::<Star>();
    let mut holder = db.worker();
    holder.set_hold_locks(true);
    holder.set_no_wait(true);
    let mut other = db.worker();
    let mut first = true;
    let r = holder.execute(0, |tx| {
        let v = tx.get(t, 1)?.unwrap().u64(0);
        tx.update(t, 0, |r| r.set_u64(0, v + 1))?;
        if std::mem::take(&mut first) {
            // Overwrites what the holder read before it commits.
            write(&mut other, t, 1, 40).unwrap();
        }
        Ok(())
    });
    assert!(matches!(r, Err(TxError::Conflict(_))), "{r:?}");
    assert!(!first, "NO_WAIT returned the conflict instead of retrying");
    assert!(!holder.holds_locks());
    assert_eq!(word(&db, t, 0, 0).unwrap() & LOCK, 0);
    write(&mut other, t, 0, 9).unwrap();
    // The next attempt commits and holds.
    write(&mut holder, t, 2, 41).unwrap();
    assert!(holder.holds_locks());
    holder.release_locks();
}

#[test]
fn value_replication_reads_a_held_write_and_the_replica_matches_after_release() {
    let (primary, t) = open::<Star>();
    let (backup, _) = open::<Star>();
    let mut holder = primary.worker();
    holder.set_hold_locks(true);
    let mut bufs = vec![Vec::new()];
    holder
        .execute(0, |tx| {
            tx.update(t, 4, |r| r.set_u64(0, 44))?;
            tx.insert(t, 50, |r| r.set_u64(1, 5))?;
            Ok(())
        })
        .unwrap();
    let records = holder.write_replication(ReplicationMode::Value, &mut bufs, |_, _| Some(0));
    assert_eq!(records, 2);
    backup.apply_replication(&bufs[0]).unwrap();
    holder.release_locks();
    assert_eq!(primary.digest(t, |_| true), backup.digest(t, |_| true));
}

#[test]
fn dropping_a_worker_releases_the_locks_it_holds() {
    let (db, t) = open::<Occ>();
    {
        let mut holder = db.worker();
        holder.set_hold_locks(true);
        write(&mut holder, t, 6, 66).unwrap();
        assert!(holder.holds_locks());
    }
    let mut other = db.worker();
    other.set_no_wait(true);
    assert_eq!(read(&mut other, t, 6).unwrap(), Some(66));
}
