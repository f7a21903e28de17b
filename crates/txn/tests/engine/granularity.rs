//! Automatic column groups: regroupings forced while randomised, contended transactions run keep
//! the history serializable; the planner splits a table whose readers and writers use different
//! columns, and leaves an uncontended one coarse.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::{Mix, open, open_with, random_txn, seeds};
use phasedb_check::check_serializable;
use phasedb_storage::{ColumnType, Schema, TableSpec};
use phasedb_txn::{
    Config, Database, Doppel, GranularityConfig, Occ, OpKind, Protocol, RegroupError, TicToc,
    TxError, columns,
};
use rand::SeedableRng;
use rand::rngs::SmallRng;

const MIX: Mix = Mix {
    keys: 12,
    scans: true,
    yield_ratio: 0.0,
    adds: 0.1,
};

/// Runs randomised contended transactions of `P` on a database opened with `config` (prepared by
/// `prepare`) while another thread forces regroupings, `pause` apart; every history is
/// serializable. Returns the histories.
fn serializable_across_forced_regroupings<P: Protocol>(
    config: Config,
    pause: Duration,
    prepare: impl Fn(&Database<P>, phasedb_txn::TableId),
) -> Vec<phasedb_check::History> {
    const REGROUPINGS: usize = 12;
    let mut histories = Vec::new();
    for seed in seeds(&[1, 2, 3]) {
        let (mut db, t) = open_with::<P>(config.clone(), false, MIX.keys, 2);
        db.set_auto_groups(t).unwrap();
        prepare(&db, t);
        db.pause_granularity(true);
        let regroupings = AtomicUsize::new(0);
        let deadline = Instant::now() + Duration::from_secs(20);
        let committed: usize = std::thread::scope(|s| {
            s.spawn(|| {
                let mut i = 0usize;
                while regroupings.load(Ordering::Relaxed) < REGROUPINGS && Instant::now() < deadline
                {
                    i += 1;
                    let groups: &[usize] = if i % 2 == 1 { &[0, 1] } else { &[0, 0] };
                    if db.regroup(t, groups).unwrap() {
                        regroupings.fetch_add(1, Ordering::Relaxed);
                    }
                    std::thread::sleep(pause);
                }
            });
            let workers: Vec<_> = (0..3u64)
                .map(|i| {
                    let (db, regroupings) = (&db, &regroupings);
                    s.spawn(move || {
                        let mut rng = SmallRng::seed_from_u64(seed * 1000 + i);
                        let mut w = db.worker();
                        let mut n = 0;
                        while (n < 1000 || regroupings.load(Ordering::Relaxed) < REGROUPINGS)
                            && Instant::now() < deadline
                        {
                            let mut txn_rng = rng.clone();
                            let r = w.execute(0, |tx| {
                                txn_rng = rng.clone();
                                random_txn(tx, t, MIX, &mut txn_rng)
                            });
                            rng = txn_rng;
                            assert!(matches!(r, Ok(()) | Err(TxError::UserAbort)), "{r:?}");
                            n += 1;
                        }
                        n
                    })
                })
                .collect();
            workers.into_iter().map(|h| h.join().unwrap()).sum()
        });
        db.settle();
        let h = db.take_history();
        if let Err(a) = check_serializable(&h) {
            panic!(
                "{} not serializable across regroupings, seed {seed}: {a}",
                P::NAME
            );
        }
        let n = regroupings.load(Ordering::Relaxed);
        assert_eq!(n, REGROUPINGS, "seed {seed}: regroupings within 20 s");
        assert!(committed >= 3000, "seed {seed}: {committed} transactions");
        assert!(
            h.txns.iter().filter(|t| t.worker > 1000).count() >= 1,
            "regroupings recorded"
        );
        histories.push(h);
    }
    histories
}

const MS: Duration = Duration::from_millis(1);

fn recording() -> Config {
    Config {
        record_history: true,
        ..Config::default()
    }
}

#[test]
fn occ_stays_serializable_across_forced_regroupings() {
    serializable_across_forced_regroupings::<Occ>(recording(), MS, |_, _| {});
}

#[test]
fn tictoc_stays_serializable_across_forced_regroupings() {
    serializable_across_forced_regroupings::<TicToc>(recording(), MS, |_, _| {});
}

/// Doppel's joined phases validate by group too: regroupings forced between short split phases
/// (a regrouping first settles the database into a joined phase) keep its histories, split
/// operations and merges included, serializable.
#[test]
fn doppel_stays_serializable_across_forced_regroupings() {
    let mut config = Config {
        phase_length: Duration::from_micros(300),
        ..recording()
    };
    config.split.min_conflicts = 2;
    // Each regrouping ends the split phase under way: far enough apart for split phases between.
    // On a loaded machine the workers may get no split phase in between: pause longer and rerun
    // (every run's histories are checked).
    let (mut split_ops, mut merges) = (0, 0);
    for attempt in 0..4u32 {
        let pause = Duration::from_millis(10 << attempt);
        let histories =
            serializable_across_forced_regroupings::<Doppel>(config.clone(), pause, |db, t| {
                db.split(t, 0, 0, OpKind::Add);
            });
        split_ops = (histories.iter().flat_map(|h| &h.txns))
            .map(|t| t.split_ops.len())
            .sum();
        merges = (histories.iter().flat_map(|h| &h.txns))
            .map(|t| t.merges.len())
            .sum();
        if split_ops > 0 && merges > 0 {
            break;
        }
    }
    assert!(
        split_ops > 0 && merges > 0,
        "split phases ran between the regroupings: {split_ops} split operations, {merges} merges"
    );
}

#[test]
fn bad_groupings_are_refused() {
    let (mut db, t) = open::<Occ>(false, 4, 1);
    assert_eq!(db.set_auto_groups(t + 1), Err(RegroupError::NoTable(t + 1)));
    db.set_auto_groups(t).unwrap();
    assert!(matches!(db.regroup(t, &[0]), Err(RegroupError::Schema(_))));
    assert_eq!(db.regroup(t, &[0, 0]), Ok(false));
    assert_eq!(db.regroup(t, &[1, 0]), Ok(true));
    assert_eq!(
        db.groups_of(t),
        vec![vec!["b".to_string()], vec!["a".to_string()]]
    );
    let a = db
        .execute(|tx| Ok(tx.get(t, 2)?.map(|r| r.u64(0))))
        .unwrap();
    assert_eq!(a, Some(2), "rows survive a regrouping");
}

/// A table of eight columns: readers read columns 0..4 of hot rows, writers rewrite column 7.
fn split_workload(db: &Database<Occ>, t: phasedb_txn::TableId, until: Instant) {
    std::thread::scope(|s| {
        for i in 0..2u64 {
            s.spawn(move || {
                let mut w = db.worker();
                let mut n = 0u64;
                while Instant::now() < until
                    && !db.group_changes().iter().any(|c| c.groups.len() > 1)
                {
                    n += 1;
                    let key = n % 4;
                    if (n + i).is_multiple_of(2) {
                        w.execute(0, |tx| {
                            for k in 0..4 {
                                tx.get_columns(t, (key + k) % 4, columns(&[0, 1, 2, 3]))?;
                            }
                            std::thread::yield_now();
                            Ok(())
                        })
                        .unwrap();
                    } else {
                        w.execute(1, |tx| {
                            tx.update(t, key, |r| r.set_u64(7, n))?;
                            Ok(())
                        })
                        .unwrap();
                    }
                }
            });
        }
    });
}

/// A table of eight columns: declared without groups (automatic, the default) or all in one
/// declared group.
fn wide(auto: bool) -> (Database<Occ>, phasedb_txn::TableId) {
    let mut db = Database::<Occ>::open(Config {
        epoch_interval: Duration::from_millis(10),
        ..Config::default()
    });
    let mut b = Schema::builder();
    for c in 0..8 {
        b = match auto {
            true => b.auto_column(&format!("c{c}"), ColumnType::U64),
            false => b.column(&format!("c{c}"), ColumnType::U64, 0),
        };
    }
    let t = db.create_table(TableSpec::new("wide", b.build().unwrap(), 16));
    assert_eq!(db.auto_groups(t), auto);
    for k in 0..4 {
        db.load(t, k, |r| r.set_u64(0, k)).unwrap();
    }
    db.set_granularity_config(GranularityConfig {
        plan_every_epochs: 1,
        min_interval: Duration::from_millis(20),
        ..GranularityConfig::default()
    });
    (db, t)
}

#[test]
fn the_planner_splits_readers_from_writers_of_other_columns() {
    let (db, t) = wide(true);
    split_workload(&db, t, Instant::now() + Duration::from_secs(20));
    let changes = db.group_changes();
    assert!(!changes.is_empty(), "no regrouping within 20 s");
    let groups = db.groups_of(t);
    let of = |c: &str| {
        groups
            .iter()
            .position(|g| g.iter().any(|x| x == c))
            .unwrap()
    };
    assert_ne!(of("c0"), of("c7"), "{groups:?}");
    assert!(
        (1..4).all(|c| of(&format!("c{c}")) == of("c0")),
        "{groups:?}"
    );
}

#[test]
fn a_table_with_declared_groups_is_never_regrouped() {
    let (db, t) = wide(false);
    split_workload(&db, t, Instant::now() + Duration::from_millis(500));
    assert!(db.group_changes().is_empty(), "{:?}", db.group_changes());
    assert_eq!(db.groups_of(t).len(), 1);
}

/// A table declared without groups gets automatic groups under every protocol, Doppel's phases
/// and durable operation included.
#[test]
fn a_table_declared_without_groups_is_automatic_under_phases_and_durability() {
    let schema = Schema::builder()
        .auto_column("a", ColumnType::U64)
        .auto_column("b", ColumnType::U64)
        .build()
        .unwrap();
    let mut doppel = Database::<Doppel>::open(Config::default());
    let t = doppel.create_table(TableSpec::new("t", schema.clone(), 4));
    assert!(doppel.auto_groups(t));
    assert_eq!(doppel.regroup(t, &[0, 1]), Ok(true));
    assert_eq!(doppel.groups_of(t).len(), 2);
    let dir = std::env::temp_dir().join(format!("phasedb-auto-durable-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut durable = Database::<Occ>::open(Config {
        durability: Some(phasedb_txn::Durability::new(&dir)),
        ..Config::default()
    });
    let t = durable.create_table(TableSpec::new("t", schema, 4));
    assert!(durable.auto_groups(t));
    durable.start_durability().unwrap();
    assert_eq!(durable.regroup(t, &[1, 0]), Ok(true));
    drop(durable);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_uncontended_table_is_not_split() {
    let (db, t) = wide(true);
    let w = &mut db.worker();
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(300) {
        for k in 0..4 {
            w.execute(0, |tx| {
                tx.get_columns(t, k, columns(&[0, 1, 2, 3]))?;
                tx.update(t, k, |r| r.set_u64(7, 1))?;
                Ok(())
            })
            .unwrap();
        }
    }
    assert!(db.group_changes().is_empty(), "{:?}", db.group_changes());
    assert_eq!(db.groups_of(t).len(), 1);
}
