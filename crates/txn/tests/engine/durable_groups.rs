//! Automatic column groups under durable operation: tables change their groups between and after
//! checkpoints while transfers run, and a crash loses no durable commit. Recovery lays each table
//! out in the groups its checkpoint was written in, and replays logs written in other groups by
//! their columns.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use phasedb_txn::{
    ColumnType, Config, Database, Doppel, Occ, Protocol, Schema, TableId, TableSpec,
};

use crate::durability::{
    ACCOUNTS, INITIAL, TempDir, Transfers, config, replayed, rows, total, transfers,
};

/// The bank of the durability tests (a balance and a note per account), declared without column
/// groups: automatic.
fn auto_bank<P: Protocol>(config: Config, initial: i64) -> (Database<P>, TableId) {
    let mut db = Database::<P>::open(config);
    let schema = Schema::builder()
        .auto_column("balance", ColumnType::I64)
        .auto_column("note", ColumnType::U64)
        .build()
        .unwrap();
    let t = db.create_table(TableSpec::new("accounts", schema, 128).ordered());
    assert!(db.auto_groups(t), "{}: automatic groups", P::NAME);
    // Only the regroupings the test forces.
    db.pause_granularity(true);
    for a in 0..ACCOUNTS {
        db.load(t, a, |r| r.set_i64(0, initial)).unwrap();
    }
    (db, t)
}

/// Column names of each group of `group_of` (balance is column 0, note column 1).
fn named(group_of: [usize; 2]) -> Vec<Vec<String>> {
    let mut groups = vec![Vec::new(); group_of.iter().max().unwrap() + 1];
    for (c, name) in ["balance", "note"].into_iter().enumerate() {
        groups[group_of[c]].push(name.to_string());
    }
    groups
}

/// Transfers on two workers while the table is regrouped back and forth and checkpointed, the
/// last checkpoint in groups `checkpointed`, then regrouped to `after` for the logs that follow;
/// then a crash. Recovery gives the state a serial replay of the durable transfers gives, in the
/// checkpoint's groups, and again from the checkpoint it wrote.
fn regroupings_and_checkpoints_then_a_crash<P: Protocol>(
    by_add: bool,
    checkpointed: [usize; 2],
    after: [usize; 2],
) {
    let dir = TempDir::new(&format!("groups-{}", P::NAME));
    let open = |initial| auto_bank::<P>(config(&dir.0, 2, Duration::from_millis(3)), initial);
    let (mut db, t) = open(INITIAL);
    db.start_durability().unwrap();
    let spec = Transfers {
        workers: 2,
        hot: 6,
        keep: 2,
        by_add,
        seed: 5,
        most: 10_000_000,
    };
    let stop = AtomicBool::new(false);
    let layouts = [[0, 1], [0, 0], [1, 0], checkpointed];
    let histories = std::thread::scope(|s| {
        let run = s.spawn(|| transfers(&db, t, &spec, &|| stop.load(Ordering::Relaxed)));
        for (i, groups) in layouts.iter().enumerate() {
            std::thread::sleep(Duration::from_millis(15));
            db.regroup(t, groups).unwrap();
            if i % 2 == 1 {
                db.checkpoint().unwrap();
            }
        }
        assert_eq!(db.groups_of(t), named(checkpointed));
        db.checkpoint().unwrap();
        db.regroup(t, &after).unwrap();
        std::thread::sleep(Duration::from_millis(30));
        stop.store(true, Ordering::Relaxed);
        run.join().unwrap()
    });
    assert!(
        histories.iter().all(|h| h.len() > 10),
        "{}: workers ran",
        P::NAME
    );
    assert!(db.table(t).regroupings() >= 4, "{}", P::NAME);
    let crashed = db.crash().unwrap();

    let (mut db, t) = open(0);
    let r = db.start_durability().unwrap();
    assert!(r.durable_epoch >= crashed, "{}: {r:?}", P::NAME);
    assert!(
        r.log_records > 0,
        "{}: logs after the checkpoint: {r:?}",
        P::NAME
    );
    assert_eq!(db.groups_of(t), named(checkpointed), "{}", P::NAME);
    let expected = replayed(&histories, r.durable_epoch, spec.keep);
    let recovered = rows(&db, t);
    assert_eq!(recovered, expected, "{}: {r:?}", P::NAME);
    assert_eq!(total(&recovered), ACCOUNTS as i64 * INITIAL, "{}", P::NAME);
    // The recovered database regroups and commits on, and recovers the same again.
    db.regroup(t, &after).unwrap();
    let mut w = db.worker();
    w.execute(0, |tx| tx.update(t, 0, |r| r.set_u64(1, 9)).map(|_| ()))
        .unwrap();
    w.wait_durable().unwrap();
    drop(w);
    drop(db);
    let (mut db, t) = open(0);
    db.start_durability().unwrap();
    let mut again = expected;
    again[0].2 = 9;
    assert_eq!(rows(&db, t), again, "{}", P::NAME);
}

/// A checkpoint in one group, then logs in two: balance-only updates replay over it by column.
#[test]
fn occ_merged_checkpoint_then_split_logs() {
    regroupings_and_checkpoints_then_a_crash::<Occ>(false, [0, 0], [1, 0]);
}

/// A checkpoint in two groups, then logs in one.
#[test]
fn occ_split_checkpoint_then_merged_logs() {
    regroupings_and_checkpoints_then_a_crash::<Occ>(false, [0, 1], [0, 0]);
}

/// Doppel with balances changed by splittable adds: each regrouping settles the split phase.
#[test]
fn doppel_split_checkpoint_then_merged_logs() {
    regroupings_and_checkpoints_then_a_crash::<Doppel>(true, [0, 1], [0, 0]);
}
