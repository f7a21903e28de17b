//! STAR (`Star`): the partitioned phase's commit, the serializability of both phases, replication
//! records written on one database and applied on another with the Thomas write rule, the checks
//! of the record decoder, and the epoch moved only by `set_epoch`.
//! Randomised tests name their seed on failure; `PHASEDB_SEED=<seed>` replays it.

use std::collections::BTreeMap;
use std::sync::Barrier;
use std::time::Duration;

use phasedb_check::{Anomaly, History, check_serializable};
use phasedb_storage::{ColumnType, Schema, TableSpec};
use phasedb_txn::tid::{ABSENT, LOCK, epoch_of, tid};
use phasedb_txn::{
    Config, Database, ReplicationError, ReplicationMode, Star, StarMode, TableId, Tx, TxError,
    TxResult, Worker, columns,
};
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};

use crate::api::api_semantics_with;
use crate::common::{Mix, open, random_txn_in, run_on, seeds};

/// The TID word of group `g` of row `key`, if a record is linked.
fn word(db: &Database<Star>, t: TableId, key: u64, g: usize) -> Option<u64> {
    let table = db.table(t);
    let guard = phasedb_storage::pin();
    table
        .get(key, &guard)
        .map(|r| r.meta(table.layout(), g).load())
}

fn epoch_only_by_phase() -> Config {
    Config {
        epoch_interval: Duration::ZERO,
        ..Config::default()
    }
}

#[test]
fn star_api_semantics_hold_in_both_modes() {
    for mode in [StarMode::Partitioned, StarMode::SingleMaster] {
        for fine in [false, true] {
            api_semantics_with::<Star>(fine, |db| db.set_star_mode(mode));
        }
    }
}

#[test]
fn partitioned_commits_install_writes_with_tids_above_what_they_read() {
    let (db, t) = open_with_config(epoch_only_by_phase(), 8);
    db.set_star_mode(StarMode::Partitioned);
    assert_eq!(db.star_mode(), StarMode::Partitioned);
    db.set_epoch(5);
    db.execute(|tx| {
        tx.update(t, 0, |w| w.set_u64(1, 100))?;
        Ok(())
    })
    .unwrap();
    let t1 = word(&db, t, 0, 1).unwrap();
    assert_eq!(t1 & (LOCK | ABSENT), 0);
    assert_eq!(epoch_of(t1), 5, "the TID carries the epoch set");
    assert_eq!(
        word(&db, t, 0, 0),
        Some(0),
        "only the written group is versioned"
    );

    // A fresh worker (last TID 0) reads what the first wrote: its TID must still be above.
    db.execute(|tx| {
        let b = tx.get(t, 0)?.unwrap().u64(1);
        tx.update(t, 1, |w| w.set_u64(0, b + 1))?;
        tx.insert(t, 20, |w| w.set_u64(1, 7))?;
        assert!(tx.delete(t, 3)?);
        Ok(())
    })
    .unwrap();
    let t2 = word(&db, t, 1, 0).unwrap();
    assert!(t2 > t1, "TID {t2:#x} not above the TID read, {t1:#x}");
    assert_eq!(word(&db, t, 20, 0), Some(t2));
    assert_eq!(word(&db, t, 20, 1), Some(t2));
    assert_eq!(word(&db, t, 3, 0), Some(t2 | ABSENT));
    let (b1, b20, gone) = db
        .execute(|tx| {
            Ok((
                tx.get(t, 1)?.unwrap().u64(0),
                tx.get(t, 20)?.unwrap().u64(1),
                tx.get(t, 3)?.is_none(),
            ))
        })
        .unwrap();
    assert_eq!((b1, b20, gone), (101, 7, true));
}

#[test]
fn a_user_abort_in_the_partitioned_phase_writes_and_replicates_nothing() {
    let (db, t) = open_with_config(epoch_only_by_phase(), 8);
    db.set_star_mode(StarMode::Partitioned);
    let mut w = db.worker();
    w.execute(0, |tx| {
        tx.update(t, 2, |w| w.set_u64(0, 9))?;
        Ok(())
    })
    .unwrap();
    let before = db.digest(t, |_| true);
    let r: TxResult<()> = w.execute(0, |tx| {
        tx.update(t, 0, |w| w.set_u64(0, 1234))?;
        tx.insert(t, 50, |_| {})?;
        tx.delete(t, 1)?;
        Err(tx.abort())
    });
    assert_eq!(r, Err(TxError::UserAbort));
    assert_eq!(db.digest(t, |_| true), before);
    assert_eq!(word(&db, t, 50, 0), None, "no record linked for the insert");
    let mut bufs = vec![Vec::new()];
    for mode in [ReplicationMode::Operation, ReplicationMode::Value] {
        assert_eq!(w.write_replication(mode, &mut bufs, |_, _| Some(0)), 0);
    }
    assert!(
        bufs[0].is_empty(),
        "the earlier commit is not shipped again"
    );
}

#[test]
fn single_master_star_is_serializable_under_contention() {
    const MIX: Mix = Mix {
        keys: 12,
        scans: true,
        yield_ratio: 0.0,
        adds: 0.1,
    };
    for fine in [false, true] {
        for seed in seeds(&[1, 2, 3]) {
            let (db, t) = open::<Star>(fine, MIX.keys, 2);
            db.set_star_mode(StarMode::SingleMaster);
            let (h, conflicts) = run_on(&db, t, seed, 4, 1500, MIX);
            assert!(h.len() > 4000, "seed {seed}: only {} committed", h.len());
            assert_serializable(&h, seed, fine);
            eprintln!("seed {seed}, fine {fine}: {conflicts} conflicts");
        }
    }
}

#[test]
fn partitioned_star_is_serializable_with_one_thread_per_key_range() {
    const MIX: Mix = Mix {
        keys: 12,
        scans: true,
        yield_ratio: 0.02,
        adds: 0.1,
    };
    const THREADS: usize = 4;
    for fine in [false, true] {
        for seed in seeds(&[1, 2, 3]) {
            let (db, t) = open::<Star>(fine, MIX.keys * THREADS as u64, 2);
            db.set_star_mode(StarMode::Partitioned);
            let start = Barrier::new(THREADS);
            let conflicts: u64 = std::thread::scope(|s| {
                let handles: Vec<_> = (0..THREADS)
                    .map(|p| {
                        let (db, start) = (&db, &start);
                        s.spawn(move || {
                            let mut rng = SmallRng::seed_from_u64(seed * 1000 + p as u64);
                            let mut w = db.worker();
                            start.wait();
                            for _ in 0..1500 {
                                let mut txn_rng = rng.clone();
                                let r = w.execute(0, |tx| {
                                    txn_rng = rng.clone();
                                    random_txn_in(tx, t, MIX, p as u64 * MIX.keys, &mut txn_rng)
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
                handles.into_iter().map(|h| h.join().unwrap()).sum()
            });
            assert_eq!(
                conflicts, 0,
                "seed {seed}: a partition's only thread conflicted"
            );
            let h = db.take_history();
            assert!(h.len() > 4000, "seed {seed}: only {} committed", h.len());
            assert_serializable(&h, seed, fine);
        }
    }
}

fn assert_serializable(h: &History, seed: u64, fine: bool) {
    if let Err(a) = check_serializable(h) {
        if let Anomaly::Cycle(c) = &a {
            for id in c.txns() {
                let t = h.txns.iter().find(|t| t.id == id).expect("cycle members");
                eprintln!("T{id}: reads {:?} writes {:?}", t.reads, t.writes);
            }
        }
        panic!("star not serializable with seed {seed} (fine = {fine}): {a}");
    }
}

/// A database like `common::open`'s (table `kv`, columns `a` and `b` in two groups), keys
/// `0..keys` all loaded, under `config`.
fn open_with_config(config: Config, keys: u64) -> (Database<Star>, TableId) {
    crate::common::open_with::<Star>(config, true, keys, 1)
}

// ---------------------------------------------------------------------------------------------
// Replication: records written on database A, applied on database B.

/// Keys of the replicated table; rows `0..KEYS` step 2 are loaded on both databases.
const KEYS: u64 = 24;

/// Columns of the replicated table `kv`: three column groups, of several types.
const A: usize = 0; // U64, group 0
const NAME: usize = 1; // Bounded(12), group 0
const B: usize = 2; // I64, group 1
const PAD: usize = 3; // Fixed(5), group 2
const C: usize = 4; // U64, group 2

/// A database with the replicated table `kv` and a table `local` no other node holds.
fn replica_db(config: Config) -> (Database<Star>, TableId, TableId) {
    let mut db = Database::<Star>::open(config);
    let schema = Schema::builder()
        .column("a", ColumnType::U64, 0)
        .column("name", ColumnType::Bounded(12), 0)
        .column("b", ColumnType::I64, 1)
        .column("pad", ColumnType::Fixed(5), 2)
        .column("c", ColumnType::U64, 2)
        .build()
        .unwrap();
    let kv = db.create_table(TableSpec::new("kv", schema, 64));
    let local_schema = Schema::builder()
        .column("x", ColumnType::U64, 0)
        .build()
        .unwrap();
    let local = db.create_table(TableSpec::new("local", local_schema, 16));
    for k in (0..KEYS).step_by(2) {
        db.load(kv, k, |r| {
            r.set_u64(A, k);
            r.set_bytes(NAME, b"loaded");
            r.set_i64(B, -(k as i64));
            r.set_bytes(PAD, b"pad");
            r.set_u64(C, 1);
        })
        .unwrap();
    }
    (db, kv, local)
}

/// Sets a random nonempty subset of the columns to random values.
fn set_random_columns(w: &mut phasedb_txn::RowWriter<'_>, rng: &mut SmallRng) {
    let cols = rng.random_range(1..32u32);
    if cols & 1 != 0 {
        w.set_u64(A, rng.random_range(0..1000));
    }
    if cols & 2 != 0 {
        let n = rng.random_range(0..12);
        w.set_bytes(NAME, &b"abcdefghijkl"[..n]);
    }
    if cols & 4 != 0 {
        w.set_i64(B, rng.random_range(-50..50));
    }
    if cols & 8 != 0 {
        w.set_bytes(PAD, &rng.random::<[u8; 5]>());
    }
    if cols & 16 != 0 {
        w.set_u64(C, rng.random_range(0..1000));
    }
}

/// One to three random writes on keys `base..base + KEYS`: updates of some columns,
/// read-modify-writes, inserts, deletes, a write of the unreplicated table, and rarely a user abort.
fn replicated_txn(
    tx: &mut Tx<'_, '_, Star>,
    (kv, local): (TableId, TableId),
    base: u64,
    rng: &mut SmallRng,
) -> TxResult<()> {
    for _ in 0..rng.random_range(1..4) {
        let key = base + rng.random_range(0..KEYS);
        match rng.random_range(0..20) {
            0..8 => {
                tx.update(kv, key, |w| set_random_columns(w, rng))?;
            }
            8..11 => {
                if let Some(b) = tx.get_columns(kv, key, columns(&[B]))?.map(|r| r.i64(B)) {
                    tx.update(kv, key, |w| w.set_i64(B, b + 1))?;
                }
            }
            11..15 => match tx.insert(kv, key, |w| set_random_columns(w, rng)) {
                Err(TxError::DuplicateKey { .. }) => {}
                r => r?,
            },
            15..18 => {
                tx.delete(kv, key)?;
            }
            18 => tx
                .insert(local, rng.random(), |w| w.set_u64(0, 1))
                .or_else(|e| {
                    matches!(e, TxError::DuplicateKey { .. })
                        .then_some(())
                        .ok_or(e)
                })?,
            _ => return Err(tx.abort()),
        }
    }
    Ok(())
}

/// Runs `txns` random transactions on worker `w` over keys from `base`, shipping the records of
/// each commit: `bufs` (one per destination, `kv` rows routed by key) are taken as batches after
/// each transaction, or, when `flush_every` > 1, every that many transactions.
#[allow(clippy::too_many_arguments)]
fn run_and_ship(
    w: &mut Worker<'_, Star>,
    tables: (TableId, TableId),
    mode: ReplicationMode,
    base: u64,
    txns: usize,
    flush_every: usize,
    rng: &mut SmallRng,
    batches: &mut Vec<Vec<u8>>,
) -> usize {
    let mut bufs = vec![Vec::new(); 3];
    let mut shipped = 0;
    for i in 0..txns {
        let mut txn_rng = rng.clone();
        let r = w.execute(0, |tx| {
            txn_rng = rng.clone();
            replicated_txn(tx, tables, base, &mut txn_rng)
        });
        *rng = txn_rng;
        assert!(matches!(r, Ok(()) | Err(TxError::UserAbort)), "{r:?}");
        shipped += w.write_replication(mode, &mut bufs, |t, key| {
            (t == tables.0).then_some(key as usize % 3)
        });
        if (i + 1) % flush_every == 0 || i + 1 == txns {
            batches.extend(
                bufs.iter_mut()
                    .filter(|b| !b.is_empty())
                    .map(std::mem::take),
            );
        }
    }
    shipped
}

/// The rows of `t` whose group 0 is present, as their stored bytes.
fn rows(db: &Database<Star>, t: TableId) -> BTreeMap<u64, Vec<u64>> {
    let mut rows = BTreeMap::new();
    db.for_each_row_quiescent(t, |k, row| {
        rows.insert(k, row.words().to_vec());
    });
    rows
}

fn assert_replicas_agree(a: &Database<Star>, b: &Database<Star>, kv: TableId, context: &str) {
    assert_eq!(rows(a, kv), rows(b, kv), "{context}: rows differ");
    assert_eq!(
        a.digest(kv, |_| true),
        b.digest(kv, |_| true),
        "{context}: digests differ"
    );
}

#[test]
fn value_replication_applied_in_any_order_converges_to_the_primary() {
    const THREADS: usize = 2;
    for seed in seeds(&[1, 2, 3, 4]) {
        let (a, kv, local) = replica_db(Config::default());
        let (b, _, _) = replica_db(Config::default());
        a.set_star_mode(StarMode::SingleMaster);
        let start = Barrier::new(THREADS);
        let (mut batches, shipped) = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|i| {
                    let (a, start) = (&a, &start);
                    s.spawn(move || {
                        let mut rng = SmallRng::seed_from_u64(seed * 100 + i as u64);
                        let mut w = a.worker();
                        let mut batches = Vec::new();
                        start.wait();
                        let n = run_and_ship(
                            &mut w,
                            (kv, local),
                            ReplicationMode::Value,
                            0,
                            600,
                            1,
                            &mut rng,
                            &mut batches,
                        );
                        (batches, n)
                    })
                })
                .collect();
            let mut all = (Vec::new(), 0);
            for h in handles {
                let (batches, n) = h.join().unwrap();
                all.0.extend(batches);
                all.1 += n;
            }
            all
        });
        batches.shuffle(&mut SmallRng::seed_from_u64(seed));
        // Two threads apply the shuffled batches at once.
        let (first, second) = batches.split_at(batches.len() / 2);
        let applied: usize = std::thread::scope(|s| {
            let handles: Vec<_> = [first, second]
                .into_iter()
                .map(|part| {
                    let b = &b;
                    s.spawn(move || {
                        part.iter()
                            .map(|batch| b.apply_replication(batch).unwrap().records)
                            .sum::<usize>()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(
            applied, shipped,
            "seed {seed}: every record shipped applied"
        );
        assert_replicas_agree(&a, &b, kv, &format!("seed {seed}"));
        assert!(
            !rows(&a, local).is_empty(),
            "seed {seed}: nothing local written"
        );
        assert!(
            rows(&b, local).is_empty(),
            "seed {seed}: an unrouted row replicated"
        );
    }
}

#[test]
fn operation_replication_applied_in_order_per_partition_converges_to_the_primary() {
    const PARTITIONS: usize = 2;
    for seed in seeds(&[1, 2, 3, 4]) {
        let (a, kv, local) = replica_db(epoch_only_by_phase());
        let (b, _, _) = replica_db(epoch_only_by_phase());
        a.set_star_mode(StarMode::Partitioned);
        a.set_epoch(3);
        let start = Barrier::new(PARTITIONS);
        // Partition p's rows are keys p * KEYS.. (only partition 0's are loaded).
        let streams: Vec<(Vec<Vec<u8>>, usize)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..PARTITIONS)
                .map(|p| {
                    let (a, start) = (&a, &start);
                    s.spawn(move || {
                        let mut rng = SmallRng::seed_from_u64(seed * 100 + p as u64);
                        let mut w = a.worker();
                        let mut batches = Vec::new();
                        start.wait();
                        let n = run_and_ship(
                            &mut w,
                            (kv, local),
                            ReplicationMode::Operation,
                            p as u64 * KEYS,
                            600,
                            1 + p * 4,
                            &mut rng,
                            &mut batches,
                        );
                        (batches, n)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        // Each partition's stream is applied in order, both at once.
        let applied: usize = std::thread::scope(|s| {
            let handles: Vec<_> = streams
                .iter()
                .map(|(batches, _)| {
                    let b = &b;
                    s.spawn(move || {
                        batches
                            .iter()
                            .map(|batch| b.apply_replication(batch).unwrap().records)
                            .sum::<usize>()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        let shipped: usize = streams.iter().map(|s| s.1).sum();
        assert_eq!(
            applied, shipped,
            "seed {seed}: every record shipped applied"
        );
        assert_replicas_agree(&a, &b, kv, &format!("seed {seed}"));
    }
}

#[test]
fn a_partition_master_runs_while_another_partitions_records_are_applied() {
    for seed in seeds(&[1, 2]) {
        // A masters partition 1 (keys KEYS..2 * KEYS); B masters partition 0 and backs up 1.
        let (a, kv, local) = replica_db(epoch_only_by_phase());
        let (b, _, _) = replica_db(epoch_only_by_phase());
        for db in [&a, &b] {
            db.set_star_mode(StarMode::Partitioned);
            db.set_epoch(2);
        }
        let mut stream = Vec::new();
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut w = a.worker();
        let shipped = run_and_ship(
            &mut w,
            (kv, local),
            ReplicationMode::Operation,
            KEYS,
            600,
            3,
            &mut rng,
            &mut stream,
        );
        drop(w);
        let partition_1 = |k: u64| (KEYS..2 * KEYS).contains(&k);
        let applied: usize = std::thread::scope(|s| {
            let (b, stream) = (&b, &stream);
            let master = s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed + 1);
                let mut w = b.worker();
                let mut ignored = Vec::new();
                run_and_ship(
                    &mut w,
                    (kv, local),
                    ReplicationMode::Operation,
                    0,
                    600,
                    1,
                    &mut rng,
                    &mut ignored,
                )
            });
            let applier = s.spawn(move || {
                stream
                    .iter()
                    .map(|batch| b.apply_replication(batch).unwrap().records)
                    .sum()
            });
            assert!(master.join().unwrap() > 0);
            applier.join().unwrap()
        });
        assert_eq!(applied, shipped, "seed {seed}");
        assert_eq!(
            a.digest(kv, partition_1),
            b.digest(kv, partition_1),
            "seed {seed}: partition 1 differs"
        );
        assert_ne!(
            a.digest(kv, |k| k < KEYS),
            b.digest(kv, |k| k < KEYS),
            "seed {seed}: partition 0 ran only on B"
        );
    }
}

#[test]
fn optimistic_readers_never_see_a_group_half_applied() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    // Rows of one wide group: a version number and 4 KiB all holding it, so that installing one
    // takes long enough for a reader to copy it half-written, were the group not locked meanwhile.
    const ROWS: u64 = 4;
    let open = || {
        let mut db = Database::<Star>::open(Config::default());
        let schema = Schema::builder()
            .column("v", ColumnType::U64, 0)
            .column("blob", ColumnType::Fixed(4096), 0)
            .build()
            .unwrap();
        let t = db.create_table(TableSpec::new("wide", schema, 8));
        for k in 0..ROWS {
            db.load(t, k, |r| r.set_bytes(1, &[0; 4096])).unwrap();
        }
        (db, t)
    };
    let ((a, t), (b, _)) = (open(), open());
    let mut w = a.worker();
    let batches: Vec<Vec<u8>> = (1..20_000u64)
        .map(|v| {
            commit_and_ship(&mut w, ReplicationMode::Value, |tx| {
                tx.update(t, v % ROWS, |w| {
                    w.set_u64(0, v);
                    w.set_bytes(1, &[v as u8; 4096]);
                })?;
                Ok(())
            })
        })
        .collect();
    b.set_star_mode(StarMode::SingleMaster);
    let (done, passes) = (AtomicBool::new(false), AtomicU64::new(0));
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut w = b.worker();
            while !done.load(Ordering::Acquire) {
                for key in 0..ROWS {
                    w.execute(0, |tx| {
                        let row = tx.get(t, key)?.unwrap();
                        let v = row.u64(0) as u8;
                        assert!(row.bytes(1).iter().all(|&x| x == v), "row {key} torn");
                        Ok(())
                    })
                    .unwrap();
                }
                passes.fetch_add(1, Ordering::Release);
            }
        });
        // Applies while the reader runs (it has made a pass), so the two overlap.
        while passes.load(Ordering::Acquire) == 0 {
            std::thread::yield_now();
        }
        for batch in &batches {
            b.apply_replication(batch).unwrap();
        }
        done.store(true, Ordering::Release);
    });
    assert_eq!(a.digest(t, |_| true), b.digest(t, |_| true));
}

/// A group locked past `star::HELD_LOCK_SPINS` backoff rounds (a prepared transaction of the applying thread's own
/// node holds it) is not applied under the lock: the batch comes back `blocked`, and applying it
/// again once the lock is gone lands it.
#[test]
fn applying_gives_back_a_batch_whose_group_stays_locked() {
    let (a, kv, _) = replica_db(Config::default());
    let (b, _, _) = replica_db(Config::default());
    let mut w = a.worker();
    let batch = commit_and_ship(&mut w, ReplicationMode::Value, |tx| {
        tx.update(kv, 6, |w| w.set_u64(C, 60))?;
        Ok(())
    });
    let read_c = || {
        let guard = phasedb_storage::pin();
        let table = b.table(kv);
        let rec = table.get(6, &guard).unwrap();
        let c = table.schema().column(C);
        rec.word(table.layout(), c.offset / 8)
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let (before, guard) = (read_c(), phasedb_storage::pin());
    let table = b.table(kv);
    let rec = table.get(6, &guard).unwrap();
    let meta = rec.meta(table.layout(), 2);
    let word = meta.load();
    assert!(
        meta.try_lock(word),
        "the test holds group 2 like a committer"
    );
    let held = b.apply_replication(&batch).unwrap();
    assert_eq!((held.blocked, held.applied_groups), (1, 0), "{held:?}");
    assert_eq!(read_c(), before, "applied under a held lock");
    meta.publish(word);
    let again = b.apply_replication(&batch).unwrap();
    assert_eq!((again.blocked, again.applied_groups), (0, 1), "{again:?}");
    assert_ne!(read_c(), before);
    assert_replicas_agree(&a, &b, kv, "after the lock was released");
}

/// Commits `f` on `w` and returns the records it ships in `mode` as one batch.
fn commit_and_ship(
    w: &mut Worker<'_, Star>,
    mode: ReplicationMode,
    f: impl FnMut(&mut Tx<'_, '_, Star>) -> TxResult<()>,
) -> Vec<u8> {
    w.execute(0, f).unwrap();
    let mut bufs = vec![Vec::new()];
    w.write_replication(mode, &mut bufs, |_, _| Some(0));
    bufs.pop().unwrap()
}

#[test]
fn operation_records_carry_the_written_columns_and_value_records_their_whole_groups() {
    let (a, kv, _) = replica_db(epoch_only_by_phase());
    let (b, _, _) = replica_db(epoch_only_by_phase());
    // B's copy of row 4 differs in the column beside C in C's group, in an earlier epoch.
    a.set_epoch(2);
    b.execute(|tx| {
        tx.update(kv, 4, |w| w.set_bytes(PAD, b"other"))?;
        Ok(())
    })
    .unwrap();
    let mut w = a.worker();
    let update_c = |tx: &mut Tx<'_, '_, Star>| {
        tx.update(kv, 4, |w| w.set_u64(C, 77))?;
        Ok(())
    };
    let op = commit_and_ship(&mut w, ReplicationMode::Operation, update_c);
    let read = |db: &Database<Star>| {
        db.execute(|tx| {
            let r = tx.get(kv, 4)?.unwrap();
            Ok((r.bytes(PAD).to_vec(), r.u64(C)))
        })
        .unwrap()
    };
    let applied = b.apply_replication(&op).unwrap();
    assert_eq!((applied.records, applied.applied_groups), (1, 1));
    assert_eq!(read(&b), (b"other".to_vec(), 77), "only C travelled");
    let value = commit_and_ship(&mut w, ReplicationMode::Value, |tx| {
        tx.update(kv, 4, |w| w.set_u64(C, 78))?;
        Ok(())
    });
    assert!(value.len() > op.len());
    b.apply_replication(&value).unwrap();
    assert_eq!(
        read(&b),
        (b"pad\0\0".to_vec(), 78),
        "C's whole group travelled"
    );
}

#[test]
fn a_late_older_write_is_refused_after_a_delete_and_an_absent_row_is_inserted() {
    let (a, kv, _) = replica_db(Config::default());
    let (b, _, _) = replica_db(Config::default());
    let (c, _, _) = replica_db(Config::default());
    let mut w = a.worker();
    let value = ReplicationMode::Value;
    let insert = commit_and_ship(&mut w, value, |tx| {
        tx.insert(kv, 101, |w| {
            w.set_u64(A, 5);
            w.set_u64(C, 6);
        })
    });
    let update = commit_and_ship(&mut w, value, |tx| {
        tx.update(kv, 101, |w| w.set_u64(C, 7))?;
        Ok(())
    });
    let delete = commit_and_ship(&mut w, value, |tx| {
        tx.delete(kv, 101)?;
        Ok(())
    });
    let deleted = b.apply_replication(&delete).unwrap();
    assert_eq!((deleted.records, deleted.applied_groups), (1, 3));
    let late = b.apply_replication(&insert).unwrap();
    assert_eq!((late.applied_groups, late.skipped_groups), (0, 3));
    let late = b.apply_replication(&update).unwrap();
    assert_eq!((late.applied_groups, late.skipped_groups), (0, 1));
    assert_replicas_agree(&a, &b, kv, "after the delete");

    // On a replica that has seen nothing else, the update alone inserts the row, its other
    // columns zero; the insert, older, then fills in the groups the update did not carry.
    c.apply_replication(&update).unwrap();
    let row = |db: &Database<Star>| {
        db.execute(|tx| Ok(tx.get(kv, 101)?.map(|r| (r.u64(A), r.u64(C)))))
            .unwrap()
    };
    assert_eq!(row(&c), Some((0, 7)));
    let filled = c.apply_replication(&insert).unwrap();
    assert_eq!((filled.applied_groups, filled.skipped_groups), (2, 1));
    assert_eq!(row(&c), Some((5, 7)));

    // A re-insert is newer than the delete everywhere.
    let again = commit_and_ship(&mut w, value, |tx| tx.insert(kv, 101, |w| w.set_u64(A, 9)));
    b.apply_replication(&again).unwrap();
    assert_replicas_agree(&a, &b, kv, "after the re-insert");
    assert_eq!(row(&b), Some((9, 0)));
}

#[test]
fn a_replicated_row_reads_as_its_writers_version_and_applying_records_no_history() {
    let recording = Config {
        record_history: true,
        ..Config::default()
    };
    let (a, kv, _) = replica_db(recording.clone());
    let (b, _, _) = replica_db(recording);
    let mut w = a.worker();
    let batch = commit_and_ship(&mut w, ReplicationMode::Value, |tx| {
        tx.update(kv, 2, |w| w.set_i64(B, 40))?;
        Ok(())
    });
    drop(w);
    let written = a.take_history().txns[0].writes[0].clone();
    b.apply_replication(&batch).unwrap();
    assert!(
        b.take_history().txns.is_empty(),
        "applying is not a transaction"
    );
    b.execute(|tx| {
        let v = tx.get_columns(kv, 2, columns(&[B]))?.unwrap().i64(B);
        tx.update(kv, 2, |w| w.set_i64(B, v + 1))?;
        Ok(())
    })
    .unwrap();
    let event = b.take_history().txns.pop().unwrap();
    assert_eq!(event.reads[0].item, written.item);
    assert_eq!(event.reads[0].version, written.version);
    assert_eq!(event.writes[0].prev, written.version);
    assert!(event.writes[0].version > written.version);
}

// ---------------------------------------------------------------------------------------------
// The decoder refuses bad batches whole.

/// A valid batch of three records (an insert, an update of one column, a delete) from A.
fn valid_batch(mode: ReplicationMode) -> (Database<Star>, TableId, Vec<u8>) {
    let (a, kv, _) = replica_db(Config::default());
    let mut w = a.worker();
    w.execute(0, |tx| {
        tx.insert(kv, 1, |w| {
            w.set_u64(A, 3);
            w.set_bytes(NAME, b"x");
        })?;
        tx.update(kv, 2, |w| w.set_u64(C, 1 << 40))?;
        tx.delete(kv, 4)?;
        Ok(())
    })
    .unwrap();
    let mut bufs = vec![Vec::new()];
    assert_eq!(w.write_replication(mode, &mut bufs, |_, _| Some(0)), 3);
    drop(w);
    (a, kv, bufs.pop().unwrap())
}

/// Applies `bytes` to a fresh replica; if refused, checks nothing changed.
fn apply_to_fresh(bytes: &[u8]) -> Result<phasedb_txn::Applied, ReplicationError> {
    let (b, kv, local) = replica_db(Config::default());
    let before = (b.digest(kv, |_| true), b.digest(local, |_| true));
    let r = b.apply_replication(bytes);
    if r.is_err() {
        let after = (b.digest(kv, |_| true), b.digest(local, |_| true));
        assert_eq!(before, after, "a refused batch changed the replica: {r:?}");
        assert_eq!(
            b.table(kv).len(),
            (KEYS / 2) as usize,
            "a refused batch linked a record"
        );
    }
    r
}

#[test]
fn every_truncation_of_a_valid_batch_is_refused_and_changes_nothing() {
    for mode in [ReplicationMode::Operation, ReplicationMode::Value] {
        let (_, _, batch) = valid_batch(mode);
        assert_eq!(apply_to_fresh(&batch).unwrap().records, 3);
        assert_eq!(apply_to_fresh(&[]).unwrap().records, 0);
        for len in 1..batch.len() {
            let r = apply_to_fresh(&batch[..len]);
            assert!(
                matches!(r, Err(ReplicationError::Truncated { .. })),
                "{mode:?}: prefix of {len} bytes: {r:?}"
            );
        }
        // Two buffers shipped together are one valid batch.
        let twice = [batch.clone(), batch.clone()].concat();
        assert_eq!(apply_to_fresh(&twice).unwrap().records, 6);
    }
}

#[test]
fn malformed_records_are_refused_with_what_is_wrong() {
    // Header: magic and a count of one record; then kind, table, key, TID, mask, bytes.
    let record = |body: &[u8]| [&[0xA5, 1, 0, 0, 0][..], body].concat();
    type Expected = fn(&ReplicationError) -> bool;
    let cases: Vec<(Vec<u8>, Expected)> = vec![
        (vec![0x00], |e| {
            matches!(e, ReplicationError::BadHeader { at: 0, found: 0 })
        }),
        (record(&[7, 0, 1, 1]), |e| {
            matches!(e, ReplicationError::BadKind { kind: 7, .. })
        }),
        (record(&[1, 9, 1, 1]), |e| {
            matches!(e, ReplicationError::UnknownTable { table: 9, .. })
        }),
        (
            record(&[
                1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1,
            ]),
            |e| matches!(e, ReplicationError::VarintOverflow { field: "key", .. }),
        ),
        (record(&[1, 0, 1, 0]), |e| {
            matches!(e, ReplicationError::BadTid { tid: 0, .. })
        }),
        (record(&[0, 0, 1, 1, 0x40]), |e| {
            matches!(e, ReplicationError::BadColumns { columns: 0x40, .. })
        }),
        (record(&[0, 0, 1, 1, 0]), |e| {
            matches!(e, ReplicationError::BadColumns { columns: 0, .. })
        }),
        (record(&[0, 1, 1, 1, 1, 1, 2, 3]), |e| {
            matches!(e, ReplicationError::Truncated { at: 5 })
        }),
        (record(&[1, 0, 1, 1, 1]), |e| {
            matches!(e, ReplicationError::BadHeader { at: 9, found: 1 })
        }),
    ];
    for (bytes, expected) in cases {
        let e = apply_to_fresh(&bytes).unwrap_err();
        assert!(expected(&e), "{bytes:x?}: {e:?}");
        assert!(!e.to_string().is_empty());
    }
    let huge = vec![0u8; phasedb_txn::star::MAX_BATCH_BYTES + 1];
    assert!(matches!(
        apply_to_fresh(&huge),
        Err(ReplicationError::Oversized { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Arbitrary bytes never panic the decoder; a refused batch changes nothing.
    #[test]
    fn arbitrary_bytes_never_panic_and_a_refused_batch_changes_nothing(
        bytes in prop::collection::vec(any::<u8>(), 0..64),
        framed: bool,
    ) {
        let bytes = if framed {
            // Behind a well-formed header, so the records themselves are arbitrary.
            [&[0xA5, (bytes.len() % 4) as u8, 0, 0, 0][..], &bytes].concat()
        } else {
            bytes
        };
        let _ = apply_to_fresh(&bytes);
    }

    /// A valid batch with one byte changed either still decodes or is refused whole.
    #[test]
    fn a_corrupted_batch_is_applied_or_refused_whole(at in any::<prop::sample::Index>(), byte: u8) {
        let (_, _, mut batch) = valid_batch(ReplicationMode::Value);
        let i = at.index(batch.len());
        batch[i] = byte;
        let _ = apply_to_fresh(&batch);
    }
}

// ---------------------------------------------------------------------------------------------

#[test]
fn with_epoch_interval_zero_the_epoch_moves_only_through_set_epoch() {
    let (db, t) = open_with_config(epoch_only_by_phase(), 4);
    assert_eq!(db.epoch(), 1);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(db.epoch(), 1, "no epoch thread runs");
    let commit = |v: u64| {
        db.execute(|tx| {
            tx.update(t, 0, |w| w.set_u64(0, v))?;
            Ok(())
        })
        .unwrap();
        tid(word(&db, t, 0, 0).unwrap())
    };
    db.set_epoch(7);
    assert_eq!(epoch_of(commit(1)), 7);
    db.set_epoch(3);
    assert_eq!(db.epoch(), 7, "a smaller epoch is ignored");
    assert_eq!(epoch_of(commit(2)), 7);
    db.set_epoch(8);
    let later = commit(3);
    assert_eq!(epoch_of(later), 8);
    db.set_star_mode(StarMode::Partitioned);
    db.set_epoch(9);
    assert!(commit(4) > later);
    assert_eq!(epoch_of(tid(word(&db, t, 0, 0).unwrap())), 9);
}
