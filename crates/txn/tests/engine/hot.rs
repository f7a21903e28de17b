//! One hot row, every transaction on it (the Doppel paper's INCR1 at 100%): lock hand-off under the
//! 2PL flavours (waiters pause, then yield, and never write the holder's cache line while it holds
//! the lock) and commit-time waits under OCC must lose no increment, let readers see only whole
//! transactions, and finish.

use std::sync::Barrier;

use phasedb_storage::{ColumnType, Schema, TableSpec};
use phasedb_txn::{
    Adaptive, Config, Database, Occ, Protocol, SwissTm, TableId, TicToc, TwoPlBlocking,
    TwoPlNoWait, TwoPlWaitDie, columns,
};

const THREADS: usize = 2;
const PER_THREAD: i64 = 5_000;

/// A table whose row 0 has `a` in group 0 and `b` in group 1, both 0.
fn hot_row<P: Protocol>() -> (Database<P>, TableId) {
    let mut db = Database::<P>::open(Config::default());
    let schema = Schema::builder()
        .column("a", ColumnType::I64, 0)
        .column("b", ColumnType::I64, 1)
        .build()
        .unwrap();
    let t = db.create_table(TableSpec::new("hot", schema, 16));
    db.load(t, 0, |r| r.set_i64(0, 0)).unwrap();
    (db, t)
}

/// Each thread adds 1 to `a` (a read-modify-write of group 0, as INCR1 does) and then 1 to `b`
/// (group 1) in separate transactions, `PER_THREAD` times; both sums must count every increment.
fn increments_all_land<P: Protocol>() {
    let (db, t) = hot_row::<P>();
    let start = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                let mut w = db.worker();
                start.wait();
                for _ in 0..PER_THREAD {
                    w.execute(0, |tx| tx.add(t, 0, 0, 1).map(|_| ())).unwrap();
                    w.execute(0, |tx| tx.add(t, 0, 1, 1).map(|_| ())).unwrap();
                }
            });
        }
    });
    let (a, b) = db
        .execute(|tx| {
            let row = tx.get(t, 0)?.unwrap();
            Ok((row.i64(0), row.i64(1)))
        })
        .unwrap();
    let want = THREADS as i64 * PER_THREAD;
    assert_eq!((a, b), (want, want), "{}: increments lost", P::NAME);
}

#[test]
fn hot_counter_keeps_every_increment_under_2pl() {
    increments_all_land::<TwoPlBlocking>();
    increments_all_land::<TwoPlNoWait>();
    increments_all_land::<TwoPlWaitDie>();
}

#[test]
fn hot_counter_keeps_every_increment_under_optimistic_protocols() {
    increments_all_land::<Occ>();
    increments_all_land::<TicToc>();
    increments_all_land::<SwissTm>();
    increments_all_land::<Adaptive>();
}

/// One thread increments both columns of the hot row in each transaction (the second increment
/// of the row takes the general read-modify-write path); the other reads both and must always
/// see them equal: a reader waiting on the writer's lock, then sharing it, sees whole
/// transactions only.
fn readers_see_whole_increments<P: Protocol>() {
    let (db, t) = hot_row::<P>();
    let start = Barrier::new(2);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut w = db.worker();
            start.wait();
            for _ in 0..PER_THREAD {
                w.execute(0, |tx| {
                    tx.add(t, 0, 0, 1)?;
                    tx.add(t, 0, 1, 1).map(|_| ())
                })
                .unwrap();
            }
        });
        s.spawn(|| {
            let mut w = db.worker();
            start.wait();
            for _ in 0..PER_THREAD {
                let (a, b) = w
                    .execute(0, |tx| {
                        let row = tx.get_columns(t, 0, columns(&[0, 1]))?.unwrap();
                        Ok((row.i64(0), row.i64(1)))
                    })
                    .unwrap();
                assert_eq!(a, b, "{}: a reader saw half an increment", P::NAME);
            }
        });
    });
    let total = db.execute(|tx| Ok(tx.get(t, 0)?.unwrap().i64(1))).unwrap();
    assert_eq!(total, PER_THREAD, "{}: increments lost", P::NAME);
}

#[test]
fn readers_of_a_hot_row_see_whole_increments_under_2pl() {
    readers_see_whole_increments::<TwoPlBlocking>();
    readers_see_whole_increments::<TwoPlNoWait>();
    readers_see_whole_increments::<TwoPlWaitDie>();
}

#[test]
fn readers_of_a_hot_row_see_whole_increments_under_occ() {
    readers_see_whole_increments::<Occ>();
}
