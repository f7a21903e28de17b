//! Doppel: randomised contended histories with split-phase operations are serializable, and the
//! phase mechanics hold: stashing, transactions mixing split and reconciled records, a hot key that
//! changes identity, and phase changes while a transaction is running.
//! A failure names the seed; `PHASEDB_SEED=<seed>` replays it.

use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common::{Mix, open_with, run_on, seeds};
use phasedb_check::check_serializable;
use phasedb_storage::{ColumnType, Schema, TableSpec};
use phasedb_txn::{
    Config, Database, Doppel, Footprint, OpKind, PhaseStats, SplitOp, SplitPolicy, TableId,
    TxError, Worker, columns,
};

const MIX: Mix = Mix {
    keys: 12,
    scans: true,
    yield_ratio: 0.0,
    adds: 0.5,
};

fn config(phase_us: u64, record: bool) -> Config {
    Config {
        record_history: record,
        phase_length: Duration::from_micros(phase_us),
        ..Config::default()
    }
}

#[test]
fn doppel_histories_are_serializable() {
    for fine in [false, true] {
        for seed in seeds(&[1, 2, 3, 4]) {
            // Whether a split phase meets the labelled key depends on the scheduler (a worker that is
            // descheduled holds up the phase change, and the mix may have deleted key 0 when a split
            // phase starts), so a run that split nothing is repeated on a fresh database.
            let mut attempts = Vec::new();
            for attempt in 0..8 {
                let mut cfg = config(300, true);
                cfg.split.min_conflicts = 2;
                let (db, t) = open_with::<Doppel>(cfg, fine, MIX.keys, 2);
                // Key 0 is split by label; others when their conflicts say so.
                db.split(t, 0, 0, OpKind::Add);
                let run_seed = seed + 1000 * attempt;
                let (h, _) = run_on(&db, t, run_seed, 4, 4000, MIX);
                let stats = db.phase_stats();
                assert!(
                    h.len() > 5000,
                    "seed {run_seed}: only {} transactions committed",
                    h.len()
                );
                if let Err(a) = check_serializable(&h) {
                    panic!("doppel not serializable with seed {run_seed} (fine = {fine}): {a}");
                }
                let split_ops: usize = h.txns.iter().map(|t| t.split_ops.len()).sum();
                if stats.split_phases > 0 && split_ops > 0 {
                    break;
                }
                attempts.push(format!("{stats:?}, {split_ops} split operations"));
            }
            assert!(
                attempts.len() < 8,
                "seed {seed}: nothing was split in any attempt: {attempts:#?}"
            );
        }
    }
}

/// One table `c` of counters: column 0 an integer, column 1 another integer in its own group.
fn counters(config: Config, keys: u64) -> (Database<Doppel>, TableId) {
    let mut db = Database::<Doppel>::open(config);
    let schema = Schema::builder()
        .column("n", ColumnType::I64, 0)
        .column("other", ColumnType::I64, 1)
        .build()
        .unwrap();
    let t = db.create_table(TableSpec::new("c", schema, keys as usize));
    for k in 0..keys {
        db.load(t, k, |_| {}).unwrap();
    }
    (db, t)
}

/// `counters` with `keys` rows under phases of `phase_us` µs, split after `min_conflicts`
/// conflicts, with `policy` changing the rest of the split policy.
fn split_counters(
    phase_us: u64,
    min_conflicts: u64,
    keys: u64,
    policy: impl FnOnce(&mut SplitPolicy),
) -> (Database<Doppel>, TableId) {
    let mut cfg = config(phase_us, false);
    cfg.split.min_conflicts = min_conflicts;
    policy(&mut cfg.split);
    counters(cfg, keys)
}

/// Runs increments on `w` until a split phase is on with `key` split.
fn until_split(w: &mut Worker<'_, Doppel>, t: TableId, key: u64) {
    let start = Instant::now();
    loop {
        w.execute(0, |tx| tx.add(t, key, 0, 1).map(|_| ())).unwrap();
        let db = w.database();
        let split = db.phase_stats().split.iter().any(|l| l.key == key);
        if split && !w.may_resume_stashed() {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "key {key} was never split"
        );
    }
}

fn value(db: &Database<Doppel>, t: TableId, key: u64, col: usize) -> i64 {
    let mut v = None;
    db.for_each_row_quiescent(t, |k, row| {
        if k == key {
            v = Some(row.i64(col));
        }
    });
    v.expect("the row exists")
}

#[test]
fn a_read_of_split_data_is_stashed_and_runs_in_the_next_joined_phase() {
    let (db, t) = counters(config(20_000, false), 4);
    db.split(t, 0, 0, OpKind::Add);
    let mut w = db.worker();
    until_split(&mut w, t, 0);
    // In stash mode the read comes back at once as stashed...
    w.set_stash_mode(true);
    let r = w.execute(0, |tx| Ok(tx.get(t, 0)?.map(|r| r.i64(0))));
    assert_eq!(r, Err(TxError::Stashed));
    assert_eq!(w.stats().total().stashed, 1);
    // ...and another operation than the selected one too, and a blind write (found at commit);
    // but a reconciled record is fine.
    assert_eq!(
        w.execute(0, |tx| tx.max(t, 0, 0, 5).map(|_| ())),
        Err(TxError::Stashed)
    );
    assert_eq!(
        w.execute(0, |tx| tx.update(t, 0, |r| r.set_i64(0, -1)).map(|_| ())),
        Err(TxError::Stashed)
    );
    w.execute(0, |tx| tx.update(t, 1, |r| r.set_i64(0, 7)).map(|_| ()))
        .unwrap();
    // Without stash mode the worker waits for the joined phase and sees every increment.
    w.set_stash_mode(false);
    let before = Instant::now();
    let seen = w
        .execute(0, |tx| Ok(tx.get(t, 0)?.expect("row").i64(0)))
        .unwrap();
    assert!(w.may_resume_stashed());
    assert!(before.elapsed() < Duration::from_secs(5));
    // Every committed transaction but the update of row 1 and this read incremented row 0.
    let incremented = w.stats().total().committed as i64 - 2;
    assert_eq!(seen, incremented);
    assert_eq!(value(&db, t, 1, 0), 7);
}

/// A stashed attempt leaves the rows it hinted and read before the split read, in order; prefetching
/// them (and rows that do not exist) ahead of a later attempt changes nothing it sees.
#[test]
fn a_stashed_transaction_leaves_its_footprint_for_its_rerun() {
    let (db, t) = counters(config(20_000, false), 4);
    db.split(t, 0, 0, OpKind::Add);
    let mut w = db.worker();
    until_split(&mut w, t, 0);
    w.set_stash_mode(true);
    let r = w.execute(0, |tx| {
        tx.prefetch_index(t, [3, 2].into_iter());
        tx.get(t, 1)?;
        Ok(tx.get(t, 0)?.map(|r| r.i64(0)))
    });
    assert_eq!(r, Err(TxError::Stashed));
    let footprint = w.stashed_footprint();
    assert_eq!(
        footprint.rows().collect::<Vec<_>>(),
        vec![(t, 3), (t, 2), (t, 1)]
    );
    let mut absent = Footprint::default();
    absent.add(t, 99);
    w.prefetch_ahead(Some(&footprint), Some(&absent));
    w.execute(0, |tx| tx.update(t, 3, |r| r.set_i64(0, 11)).map(|_| ()))
        .unwrap();
    w.prefetch_ahead(Some(&absent), None);
    let seen = w
        .execute(0, |tx| Ok(tx.get(t, 3)?.map(|r| r.i64(0))))
        .unwrap();
    assert_eq!(seen, Some(11));
    // A committed attempt's hints are not taken for a stash's.
    assert_eq!(w.stashed_footprint(), footprint);
}

/// An operation on a split group is applied to the slice even when the transaction already wrote
/// another group of the same row (RUBiS's StoreBid when only some of an item's columns are split):
/// only the written group is locked at commit, so nothing is stashed.
#[test]
fn writing_another_group_of_a_split_row_does_not_stash_its_operation() {
    let (db, t) = counters(config(20_000, false), 4);
    db.split(t, 0, 0, OpKind::Add);
    let mut w = db.worker();
    until_split(&mut w, t, 0);
    w.set_stash_mode(true);
    let before = w.stats().total().stashed;
    w.execute(0, |tx| {
        tx.add(t, 0, 1, 2)?;
        tx.add(t, 0, 0, 1).map(|_| ())
    })
    .unwrap();
    assert_eq!(w.stats().total().stashed, before);
    w.set_stash_mode(false);
    let increments = w.stats().total().committed as i64;
    let seen = w
        .execute(0, |tx| {
            let r = tx.get(t, 0)?.expect("row");
            Ok((r.i64(0), r.i64(1)))
        })
        .unwrap();
    assert_eq!(seen, (increments, 2));
}

#[test]
fn a_transaction_mixing_split_and_reconciled_records_commits_both() {
    let (db, t) = counters(config(5000, true), 4);
    db.split(t, 0, 0, OpKind::Add);
    let threads = 2;
    let per_thread = 20_000;
    std::thread::scope(|s| {
        for i in 0..threads {
            let db = &db;
            s.spawn(move || {
                let mut w = db.worker();
                for _ in 0..per_thread {
                    w.execute(0, |tx| {
                        tx.add(t, 0, 0, 1)?;
                        // A reconciled record, read and written under OCC in the same transaction.
                        let v = tx.get_columns(t, 1 + i, columns(&[0]))?.unwrap().i64(0);
                        tx.update(t, 1 + i, |r| r.set_i64(0, v + 1))?;
                        // Another column group of the split record is not split.
                        tx.add(t, 0, 1, 2).map(|_| ())
                    })
                    .unwrap();
                }
            });
        }
    });
    db.settle();
    let stats = db.phase_stats();
    assert!(stats.split_phases > 0 && stats.slice_ops > 0, "{stats:?}");
    let total = (threads * per_thread) as i64;
    assert_eq!(value(&db, t, 0, 0), total);
    assert_eq!(value(&db, t, 0, 1), 2 * total);
    assert_eq!(value(&db, t, 1, 0), per_thread as i64);
    assert_eq!(value(&db, t, 2, 0), per_thread as i64);
    check_serializable(&db.take_history()).expect("serializable");
}

#[test]
fn a_hot_key_that_changes_identity_is_split_in_turn() {
    let mut cfg = config(5000, false);
    cfg.split.min_conflicts = 4;
    let (db, t) = counters(cfg, 16);
    let hot = std::sync::atomic::AtomicU64::new(3);
    let stop = AtomicBool::new(false);
    let threads = 2;
    let done: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (db, hot, stop) = (&db, &hot, &stop);
                s.spawn(move || {
                    let mut w = db.worker();
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let key = hot.load(Ordering::Relaxed);
                        w.execute(0, |tx| tx.add(t, key, 0, 1).map(|_| ())).unwrap();
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let wait_split = |key: u64| {
            let start = Instant::now();
            while !db.phase_stats().split.iter().any(|l| l.key == key) {
                assert!(
                    start.elapsed() < Duration::from_secs(20),
                    "key {key} was never split: {:?}",
                    db.phase_stats()
                );
                std::thread::sleep(Duration::from_millis(2));
            }
        };
        wait_split(3);
        hot.store(11, Ordering::Relaxed);
        wait_split(11);
        let start = Instant::now();
        while db.phase_stats().split.iter().any(|l| l.key == 3) {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "key 3 stayed split after it cooled down"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        stop.store(true, Ordering::Relaxed);
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let total: u64 = done.iter().sum();
    assert_eq!((value(&db, t, 3, 0) + value(&db, t, 11, 0)) as u64, total);
}

/// Transactions that read a hot row and add to it by a commutative update would all be stashed were
/// it split (as TPC-C's Payment reads a District's name and adds to its year-to-date total), so their
/// conflicts do not split it (read-modify-write adds do: see the hot key test above).
#[test]
fn conflicts_of_transactions_that_also_read_the_record_do_not_split_it() {
    let mut cfg = config(2000, false);
    cfg.split.min_conflicts = 2;
    let (db, t) = counters(cfg, 4);
    let start = Barrier::new(2);
    let seen = std::sync::atomic::AtomicU64::new(0);
    let committed: i64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (db, start, seen) = (&db, &start, &seen);
                s.spawn(move || {
                    let mut w = db.worker();
                    start.wait();
                    let began = Instant::now();
                    let mut n = 0;
                    // Until both threads together have seen enough conflicts to split the row
                    // many times over. The count bound is far past what the time bound allows:
                    // on a loaded machine a thread may run alone for its whole time slice, and a
                    // bound it reaches there would end the test before the threads overlapped.
                    while seen.load(Ordering::Relaxed) < 16
                        && n < 500_000_000
                        && began.elapsed() < Duration::from_secs(10)
                    {
                        let before = w.stats().total().conflicts;
                        w.execute(0, |tx| {
                            let v = tx.get_columns(t, 0, columns(&[0]))?.unwrap().i64(0);
                            std::hint::black_box(v);
                            tx.commute(t, 0, 0, SplitOp::Add(1)).map(|_| ())
                        })
                        .unwrap();
                        seen.fetch_add(w.stats().total().conflicts - before, Ordering::Relaxed);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let conflicts = seen.into_inner();
    let stats = db.phase_stats();
    assert_eq!(value(&db, t, 0, 0), committed);
    assert!(
        conflicts >= 8,
        "the row was not contended: {conflicts} conflicts"
    );
    assert_eq!(
        stats.ever_split, 0,
        "{conflicts} conflicts split it: {stats:?}"
    );
}

/// Runs two threads on row 0 of `counters`, each adding to it in one transaction of 20 and reading it
/// (then 8 other rows, so the read stays open a while) in the others, until the row is split, or
/// the coordinator has made `decisions` split decisions and the threads retried `retries` attempts,
/// or 10 s passed. Returns the attempts retried.
fn read_mostly_load(db: &Database<Doppel>, t: TableId, decisions: u64, retries: u64) -> u64 {
    let start = Barrier::new(2);
    let retried = std::sync::atomic::AtomicU64::new(0);
    let go_on = || {
        let s = db.phase_stats();
        s.ever_split == 0
            && (s.split_phases + s.skipped_splits < decisions
                || retried.load(Ordering::Relaxed) < retries)
    };
    std::thread::scope(|s| {
        for id in 0..2u64 {
            let (start, retried, go_on) = (&start, &retried, &go_on);
            s.spawn(move || {
                let mut w = db.worker();
                start.wait();
                let began = Instant::now();
                let mut n = 0u64;
                while (!n.is_multiple_of(1024) || go_on())
                    && began.elapsed() < Duration::from_secs(10)
                {
                    let like = (n + id * 10).is_multiple_of(20);
                    let mut attempts = 0;
                    w.execute(0, |tx| {
                        attempts += 1;
                        if like {
                            return tx.add(t, 0, 0, 1).map(|_| ());
                        }
                        let mut sum = tx.get_columns(t, 0, columns(&[0]))?.unwrap().i64(0);
                        for k in 1..9 {
                            sum += tx.get_columns(t, k, columns(&[0]))?.unwrap().i64(0);
                        }
                        std::hint::black_box(sum);
                        Ok(())
                    })
                    .unwrap();
                    retried.fetch_add(attempts - 1, Ordering::Relaxed);
                    n += 1;
                }
            });
        }
    });
    retried.into_inner()
}

/// A row read far more often than it is added to (LIKE's popular pages at 10% writes) owes its
/// conflicts mostly to readers, whom a split would stash: it stays reconciled. Counting the
/// operation's share among those conflicts is what decides: without it the same load splits the row.
#[test]
fn a_row_whose_conflicts_are_mostly_readers_is_not_split() {
    let open = |share: f64| split_counters(100_000, 16, 16, |p| p.min_conflict_share = share);
    let (db, t) = open(0.0);
    let conflicts = read_mostly_load(&db, t, u64::MAX, u64::MAX);
    let stats = db.phase_stats();
    assert!(
        stats.ever_split > 0,
        "without the share, {conflicts} conflicts did not split the row: {stats:?}"
    );
    let (db, t) = open(SplitPolicy::default().min_conflict_share);
    let conflicts = read_mostly_load(&db, t, 10, 2000);
    let stats = db.phase_stats();
    assert!(
        conflicts >= 500,
        "the row was not contended: {conflicts} conflicts"
    );
    assert_eq!(
        stats.ever_split, 0,
        "{conflicts} conflicts, mostly of readers, split it: {stats:?}"
    );
}

/// Runs two threads on row 0 of `counters`, each adding to it and reading it in turn (a read of the
/// split row comes back stashed and is dropped), until the coordinator has made `decisions` split
/// decisions after the row was first split, or 10 s passed. Returns the split phases among those
/// decisions, and the decisions made.
fn half_read_load(db: &Database<Doppel>, t: TableId, decisions: u64) -> (u64, u64) {
    let decided = |s: &PhaseStats| s.split_phases + s.skipped_splits;
    let first = std::sync::Mutex::new(None::<PhaseStats>);
    let go_on = || {
        let s = db.phase_stats();
        let mut first = first.lock().unwrap();
        match &*first {
            Some(f) => decided(&s) < decided(f) + decisions,
            None => {
                if s.split.iter().any(|l| l.key == 0) {
                    *first = Some(s);
                }
                true
            }
        }
    };
    let start = Barrier::new(2);
    std::thread::scope(|s| {
        for _ in 0..2 {
            let (start, go_on) = (&start, &go_on);
            s.spawn(move || {
                let mut w = db.worker();
                w.set_stash_mode(true);
                start.wait();
                let began = Instant::now();
                let mut n = 0u64;
                while (!n.is_multiple_of(256) || go_on())
                    && began.elapsed() < Duration::from_secs(10)
                {
                    let r = w.execute(0, |tx| {
                        if n.is_multiple_of(2) {
                            return tx.add(t, 0, 0, 1).map(|_| ());
                        }
                        std::hint::black_box(tx.get_columns(t, 0, columns(&[0]))?);
                        Ok(())
                    });
                    assert!(matches!(r, Ok(()) | Err(TxError::Stashed)), "{r:?}");
                    n += 1;
                }
            });
        }
    });
    let first = first
        .into_inner()
        .unwrap()
        .expect("the row was never split");
    let end = db.phase_stats();
    (
        end.split_phases - first.split_phases,
        decided(&end) - decided(&first),
    )
}

/// A split row read as often as it is added to (LIKE's popular pages at half writes) stashes about
/// one reader per operation on a slice, which at 2 workers is about even: it stays split, where a
/// threshold above half would let it go and keep it reconciled for ever longer cooldowns.
#[test]
fn a_split_row_read_as_often_as_added_to_stays_split() {
    let run = |stay: f64| {
        let (db, t) = split_counters(20_000, 4, 4, |p| p.min_stay_share = stay);
        let (split, decisions) = half_read_load(&db, t, 60);
        let stats = db.phase_stats();
        assert!(
            decisions >= 60,
            "only {decisions} decisions in 10 s: {stats:?}"
        );
        (split, decisions, stats)
    };
    let (split, decisions, stats) = run(SplitPolicy::default().min_stay_share);
    assert!(
        split * 2 >= decisions,
        "the row was split in {split} of {decisions} decisions: {stats:?}"
    );
    assert!(stats.stashed > 0 && stats.slice_ops > 0, "{stats:?}");
    let (split, decisions, stats) = run(0.6);
    assert!(
        split * 4 < decisions,
        "with a stay share of 0.6 the row was split in {split} of {decisions} decisions: {stats:?}"
    );
}

#[test]
fn phase_changes_wait_for_running_transactions() {
    let (db, t) = counters(config(1000, true), 4);
    db.split(t, 0, 0, OpKind::Add);
    let inside = Barrier::new(2);
    let long_done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (db, inside, long_done) = (&db, &inside, &long_done);
        s.spawn(move || {
            let mut w = db.worker();
            until_split(&mut w, t, 0);
            let phase = db.phase_stats().split_phases;
            let mut first = true;
            w.execute(0, |tx| {
                tx.add(t, 0, 0, 1000)?;
                let v = tx.get_columns(t, 2, columns(&[0]))?.unwrap().i64(0);
                if first {
                    first = false;
                    inside.wait();
                    // Other workers' boundaries come and go; the phase must not change under us.
                    std::thread::sleep(Duration::from_millis(30));
                    assert_eq!(db.phase_stats().split_phases, phase);
                }
                tx.update(t, 2, |r| r.set_i64(0, v + 1)).map(|_| ())
            })
            .unwrap();
            long_done.store(true, Ordering::Relaxed);
        });
        s.spawn(move || {
            let mut w = db.worker();
            inside.wait();
            let mut n = 0;
            while !long_done.load(Ordering::Relaxed) || n < 1000 {
                w.execute(0, |tx| tx.add(t, 0, 0, 1).map(|_| ())).unwrap();
                n += 1;
            }
        });
    });
    db.settle();
    let h = db.take_history();
    check_serializable(&h).expect("serializable");
    assert_eq!(value(&db, t, 2, 0), 1);
    assert!(value(&db, t, 0, 0) >= 1000 + 1000);
}

/// Two workers in stash mode, as the benchmark driver runs them: reads of a split counter are
/// stashed and rerun once the worker may; increments go to slices. Phases are short, so changes
/// often come while a worker still holds stashed reads, including a worker that acknowledged a
/// reconciliation phase and finds the next split phase already published. Every stashed read runs
/// in the joined phase that follows, and no phase change has to give up waiting for one.
#[test]
fn stashed_transactions_run_in_the_next_joined_phase_under_short_phases() {
    let (db, t) = counters(config(500, false), 4);
    db.split(t, 0, 0, OpKind::Add);
    let rounds = 300_000u64;
    let stashed_total = std::sync::atomic::AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for i in 0..2u64 {
            let (db, stashed_total) = (&db, &stashed_total);
            s.spawn(move || {
                let mut w = db.worker();
                w.set_stash_mode(true);
                let mut pending = 0u64;
                let mut n = 0u64;
                while n < rounds || pending > 0 {
                    let resumed = pending > 0 && w.may_resume_stashed();
                    // Past its rounds, a worker that waits to rerun stashed reads reads a
                    // reconciled row meanwhile.
                    let waiting = !resumed && n >= rounds;
                    let key = if waiting { 1 } else { 0 };
                    let r = if resumed || waiting || (n + i).is_multiple_of(3) {
                        w.execute(0, |tx| Ok(tx.get(t, key)?.map(|r| r.i64(0))).map(|_| ()))
                    } else {
                        w.execute(0, |tx| tx.add(t, 0, 0, 1).map(|_| ()))
                    };
                    match r {
                        Ok(()) if resumed => pending -= 1,
                        Ok(()) if waiting => {}
                        Ok(()) => n += 1,
                        Err(TxError::Stashed) => {
                            assert!(!resumed, "a resumed read was stashed again");
                            stashed_total.fetch_add(1, Ordering::Relaxed);
                            pending += 1;
                            n += 1;
                        }
                        Err(e) => panic!("worker {i}: {e}"),
                    }
                    w.set_stash_pending(pending > 0);
                    assert!(
                        start.elapsed() < Duration::from_secs(60),
                        "worker {i} did not finish"
                    );
                }
            });
        }
    });
    db.settle();
    let stats = db.phase_stats();
    assert!(
        stashed_total.load(Ordering::Relaxed) > 0 && stats.split_phases > 10,
        "too little happened to test anything: {stats:?}"
    );
    assert_eq!(
        stats.overdue, 0,
        "a phase change gave up waiting for a worker holding stashed reads: {stats:?}"
    );
    let adds: u64 = (0..2u64)
        .map(|i| (0..rounds).filter(|n| !(n + i).is_multiple_of(3)).count() as u64)
        .sum();
    assert_eq!(value(&db, t, 0, 0), adds as i64);
}

/// A worker with nothing stashed goes on committing while another reruns its stashed transactions
/// in a joined phase, instead of starting the due split phase and waiting at its barrier for them.
/// The holder here pauses 60 ms before its rerun (a long queue of stashed work); the phase change
/// is due 0.2 ms into the joined phase.
#[test]
fn a_due_phase_change_waits_for_reruns_of_stashed_transactions_without_stopping_others() {
    let (db, t) = counters(config(1000, false), 4);
    db.split(t, 0, 0, OpKind::Add);
    let commits = std::sync::atomic::AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let seen = std::thread::scope(|s| {
        let (db, commits, done) = (&db, &commits, &done);
        s.spawn(move || {
            let mut w = db.worker();
            let start = Instant::now();
            while !done.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(30) {
                w.execute(0, |tx| tx.add(t, 1, 0, 1).map(|_| ())).unwrap();
                commits.fetch_add(1, Ordering::Relaxed);
            }
        });
        let holder = s.spawn(move || {
            // Ends the other worker's loop however this one ends.
            struct Done<'a>(&'a AtomicBool);
            impl Drop for Done<'_> {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::Relaxed);
                }
            }
            let _done = Done(done);
            let mut w = db.worker();
            w.set_stash_mode(true);
            let read = |w: &mut Worker<'_, Doppel>| {
                w.execute(0, |tx| Ok(tx.get(t, 0)?.map(|r| r.i64(0))).map(|_| ()))
            };
            // The worker says it holds stashed work before it stashes the read, so no change can
            // be published between the stash and the flag. The split phase may end between
            // `until_split` and the read (phases are 1 ms): then the read commits, and it tries again.
            let start = Instant::now();
            loop {
                until_split(&mut w, t, 0);
                w.set_stash_pending(true);
                match read(&mut w) {
                    Err(TxError::Stashed) => break,
                    r => r.unwrap(),
                }
                w.set_stash_pending(false);
                assert!(
                    start.elapsed() < Duration::from_secs(10),
                    "no read was stashed"
                );
            }
            let start = Instant::now();
            while !w.may_resume_stashed() {
                w.execute(0, |tx| tx.add(t, 2, 0, 1).map(|_| ())).unwrap();
                assert!(start.elapsed() < Duration::from_secs(10), "no joined phase");
            }
            std::thread::sleep(Duration::from_millis(10));
            let from = commits.load(Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(40));
            let during = commits.load(Ordering::Relaxed) - from;
            std::thread::sleep(Duration::from_millis(10));
            read(&mut w).expect("the stashed read runs in the joined phase");
            w.set_stash_pending(false);
            for _ in 0..1000 {
                w.execute(0, |tx| tx.add(t, 2, 0, 1).map(|_| ())).unwrap();
            }
            during
        });
        holder.join().unwrap()
    });
    db.settle();
    assert!(
        seen > 0,
        "the other worker committed nothing while the holder had stashed reads to rerun: {:?}",
        db.phase_stats()
    );
    assert_eq!(db.phase_stats().overdue, 0, "{:?}", db.phase_stats());
    assert_eq!(value(&db, t, 1, 0) as u64, commits.load(Ordering::Relaxed));
}
