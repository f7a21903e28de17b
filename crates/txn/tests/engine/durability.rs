//! Durable operation (SiloR): logging, group commit, recovery from checkpoint and logs, torn
//! tails, schema checks, checkpoint fallback and the failure path.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use phasedb_txn::{
    Atomic, ColumnType, Config, Database, Doppel, Durability, DurabilityError, Occ, OpKind,
    Protocol, Schema, TableId, TableSpec, TicToc, TxError,
};

pub(crate) const ACCOUNTS: u64 = 64;
pub(crate) const INITIAL: i64 = 1_000;

/// A fresh directory under the system's temporary directory, removed when dropped.
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    pub(crate) fn new(name: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "phasedb-durability-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn config(dir: &Path, loggers: usize, epoch: Duration) -> Config {
    let mut d = Durability::new(dir);
    d.loggers = loggers;
    Config {
        epoch_interval: epoch,
        durability: Some(d),
        ..Config::default()
    }
}

/// Opens a bank database on `config`: accounts with a balance and a note in another group, loaded
/// with `initial` each (the load a recovery replaces).
fn bank(config: Config, initial: i64) -> (Database<Occ>, TableId) {
    bank_of::<Occ>(config, initial)
}

/// [`bank`] under protocol `P`.
fn bank_of<P: Protocol>(config: Config, initial: i64) -> (Database<P>, TableId) {
    let mut db = Database::<P>::open(config);
    let schema = Schema::builder()
        .column("balance", ColumnType::I64, 0)
        .column("note", ColumnType::U64, 1)
        .build()
        .unwrap();
    let t = db.create_table(TableSpec::new("accounts", schema, 128).ordered());
    for a in 0..ACCOUNTS {
        db.load(t, a, |r| r.set_i64(0, initial)).unwrap();
    }
    (db, t)
}

/// Every present row as (key, balance, note).
pub(crate) fn rows<P: Protocol>(db: &Database<P>, t: TableId) -> Vec<(u64, i64, u64)> {
    let mut out = Vec::new();
    db.for_each_row_quiescent(t, |k, r| out.push((k, r.i64(0), r.u64(1))));
    out.sort();
    out
}

/// Transfers between accounts, plus inserts and deletes of keys above the accounts, `n` times on
/// one worker (seeded by `seed`); returns the last commit's epoch.
fn run(db: &Database<Occ>, t: TableId, n: u64, seed: u64) -> u64 {
    let mut w = db.worker();
    let mut x = seed | 1;
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let (from, to) = (x % ACCOUNTS, (x >> 20) % ACCOUNTS);
        let amount = (x >> 40) as i64 % 50;
        w.execute(0, |tx| {
            let a = tx.get(t, from)?.unwrap().i64(0);
            tx.update(t, from, |r| {
                r.set_i64(0, a - amount);
                r.set_u64(1, seed + i);
            })?;
            let b = tx.get(t, to)?.unwrap().i64(0);
            tx.update(t, to, |r| r.set_i64(0, b + amount))?;
            let extra = ACCOUNTS + (x >> 30) % 16;
            if tx.get(t, extra)?.is_some() {
                tx.delete(t, extra)?;
            } else {
                tx.insert(t, extra, |r| r.set_u64(1, i))?;
            }
            Ok(())
        })
        .unwrap();
    }
    w.commit_epoch().expect("the last transaction wrote")
}

pub(crate) fn total(rows: &[(u64, i64, u64)]) -> i64 {
    rows.iter().map(|r| r.1).sum()
}

#[test]
fn durable_commits_survive_a_restart_and_the_bank_total_holds() {
    let dir = TempDir::new("restart");
    let expected = {
        let (mut db, t) = bank(config(&dir.0, 2, Duration::from_millis(5)), INITIAL);
        let r = db.start_durability().unwrap();
        assert!(r.fresh);
        std::thread::scope(|s| {
            for seed in [1, 2] {
                let db = &db;
                s.spawn(move || {
                    let epoch = run(db, t, 300, seed);
                    db.wait_durable(epoch).unwrap();
                    assert!(db.durable_epoch().unwrap() >= epoch);
                });
            }
        });
        rows(&db, t)
    };
    assert_eq!(total(&expected), ACCOUNTS as i64 * INITIAL);
    // Reopened with other loaded values: recovery replaces them.
    let (mut db, t) = bank(config(&dir.0, 1, Duration::from_millis(5)), 7);
    let r = db.start_durability().unwrap();
    assert!(!r.fresh);
    assert_eq!(r.checkpoint, Some(1));
    assert_eq!(r.checkpoint_rows, ACCOUNTS);
    // Two updates (one if both accounts are the same) and an insert or delete each.
    assert!(r.log_records >= 600 * 2, "{r:?}");
    assert_eq!(rows(&db, t), expected);
    // The recovered database runs on, with TIDs above the recovered ones.
    let epoch = run(&db, t, 50, 3);
    db.wait_durable(epoch).unwrap();
    assert_eq!(total(&rows(&db, t)), ACCOUNTS as i64 * INITIAL);
}

#[test]
fn recovering_twice_gives_the_same_state_and_logs_are_truncated() {
    let dir = TempDir::new("twice");
    let expected = {
        let (mut db, t) = bank(config(&dir.0, 2, Duration::from_millis(5)), INITIAL);
        db.start_durability().unwrap();
        run(&db, t, 200, 5);
        rows(&db, t)
    };
    for round in 0..3 {
        let (mut db, t) = bank(config(&dir.0, 2, Duration::from_millis(5)), 0);
        let r = db.start_durability().unwrap();
        assert_eq!(rows(&db, t), expected, "round {round}: {r:?}");
    }
    // Two checkpoints kept; logs only from the older one's generation on.
    let mut names: Vec<String> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names.iter().filter(|n| n.starts_with("ckpt-")).count(),
        2,
        "{names:?}"
    );
    assert!(
        !names.iter().any(|n| n.starts_with("log-00000001")),
        "{names:?}"
    );
}

#[test]
fn a_torn_log_tail_is_cut_and_recovery_ends_at_the_last_durable_epoch() {
    // Epochs move only by hand (the interval is far longer than the test).
    for cut_in_half in [false, true] {
        let dir = TempDir::new("torn");
        let log = dir.0.join("log-00000001-000-000000.log");
        let (durable_len, at_durable) = {
            let (mut db, t) = bank(config(&dir.0, 1, Duration::from_secs(3600)), INITIAL);
            db.start_durability().unwrap();
            let e = run(&db, t, 100, 11);
            db.set_epoch(e + 1);
            db.wait_durable(e).unwrap();
            let state = rows(&db, t);
            let len = std::fs::metadata(&log).unwrap().len();
            // Not durable before the database closes: its records follow the marker of `e`.
            run(&db, t, 100, 12);
            (len, state)
        };
        let full = std::fs::metadata(&log).unwrap().len();
        assert!(full > durable_len);
        let keep = if cut_in_half {
            durable_len + (full - durable_len) / 2
        } else {
            durable_len
        };
        let f = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
        f.set_len(keep).unwrap();
        drop(f);
        let (mut db, t) = bank(config(&dir.0, 1, Duration::from_secs(3600)), 0);
        let r = db.start_durability().unwrap();
        assert_eq!(rows(&db, t), at_durable, "{r:?}");
        assert_eq!(r.torn_bytes > 0, cut_in_half, "{r:?}");
    }
}

#[test]
fn a_directory_of_another_schema_or_foreign_files_is_refused() {
    let dir = TempDir::new("schema");
    {
        let (mut db, _) = bank(config(&dir.0, 1, Duration::from_millis(5)), INITIAL);
        db.start_durability().unwrap();
    }
    let mut db = Database::<Occ>::open(config(&dir.0, 1, Duration::from_millis(5)));
    let schema = Schema::builder()
        .column("balance", ColumnType::I64, 0)
        .build()
        .unwrap();
    db.create_table(TableSpec::new("accounts", schema, 128).ordered());
    let err = db.start_durability().unwrap_err();
    assert!(matches!(err, DurabilityError::Schema { .. }), "{err}");
    assert!(err.to_string().contains("another schema"), "{err}");

    let foreign = TempDir::new("foreign");
    std::fs::create_dir_all(&foreign.0).unwrap();
    std::fs::write(foreign.0.join("notes.txt"), "mine").unwrap();
    let (mut db, _) = bank(config(&foreign.0, 1, Duration::from_millis(5)), INITIAL);
    let err = db.start_durability().unwrap_err();
    assert!(
        matches!(err, DurabilityError::NotADataDirectory(_)),
        "{err}"
    );
    assert!(foreign.0.join("notes.txt").exists());
}

#[test]
fn a_corrupt_checkpoint_falls_back_to_the_previous_one() {
    let dir = TempDir::new("fallback");
    {
        let (mut db, t) = bank(config(&dir.0, 1, Duration::from_millis(5)), INITIAL);
        db.start_durability().unwrap();
        run(&db, t, 100, 21);
    }
    let expected = {
        // Recovers from checkpoint 1 and writes checkpoint 2.
        let (mut db, t) = bank(config(&dir.0, 1, Duration::from_millis(5)), 0);
        db.start_durability().unwrap();
        run(&db, t, 100, 22);
        rows(&db, t)
    };
    let image = dir.0.join("ckpt-00000002").join("p000.img");
    let mut bytes = std::fs::read(&image).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&image, bytes).unwrap();
    let (mut db, t) = bank(config(&dir.0, 1, Duration::from_millis(5)), 0);
    let r = db.start_durability().unwrap();
    assert_eq!(r.checkpoint, Some(1), "{r:?}");
    assert_eq!(r.skipped_checkpoints.len(), 1, "{r:?}");
    assert_eq!(rows(&db, t), expected);
}

/// A log write that fails as a full disk does (the log file's test-only byte budget) stops
/// commits with an error, and nothing is acknowledged durable that is not on disk: every
/// transaction of the durable epoch the database reported before it stopped comes back.
#[test]
fn a_failed_log_write_stops_commits_and_acknowledges_nothing_undurable() {
    let dir = TempDir::new("full");
    let mut cfg = config(&dir.0, 1, Duration::from_millis(2));
    cfg.durability.as_mut().unwrap().disk_limit_bytes = Some(16 << 10);
    let (mut db, t) = bank(cfg, INITIAL);
    db.start_durability().unwrap();
    let mut w = db.worker();
    // Per committed transaction i: its epoch (it wrote note i to account i % ACCOUNTS).
    let mut epochs = Vec::new();
    let mut acknowledged = 0;
    let mut refused = None;
    for i in 0..200_000u64 {
        match w.execute(0, |tx| tx.update(t, i % ACCOUNTS, |r| r.set_u64(1, i))) {
            Ok(_) => epochs.push(w.commit_epoch().unwrap()),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
        acknowledged = db.durable_epoch().unwrap();
        if i % 64 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let err = refused.expect("commits stop once the log cannot be written");
    assert!(matches!(err, TxError::NotDurable(_)), "{err}");
    assert!(err.to_string().contains("No space left"), "{err}");
    // Every later commit is refused too, and waiting for durability fails.
    for i in 0..10 {
        let again = w.execute(0, |tx| tx.update(t, i, |r| r.set_u64(1, 0)));
        assert!(matches!(again, Err(TxError::NotDurable(_))), "{again:?}");
    }
    assert!(matches!(
        db.wait_durable(epochs.last().copied().unwrap_or(1) + 1),
        Err(DurabilityError::Failed(_))
    ));
    let durable = db.durable_epoch().unwrap();
    assert!(
        epochs.iter().any(|&e| e <= durable) && epochs.iter().any(|&e| e > durable),
        "some commits were durable and some not when logging failed ({durable}, {:?}..{:?})",
        epochs.first(),
        epochs.last()
    );
    drop(w);
    db.crash();
    // A restart on a disk with room: exactly the transactions of the durable epochs.
    let (mut db, t) = bank(config(&dir.0, 1, Duration::from_millis(2)), 0);
    let r = db.start_durability().unwrap();
    assert!(r.durable_epoch >= durable.max(acknowledged), "{r:?}");
    let mut notes = vec![0u64; ACCOUNTS as usize];
    for (i, &e) in epochs.iter().enumerate() {
        if e <= r.durable_epoch {
            notes[i % ACCOUNTS as usize] = i as u64;
        }
    }
    let expected: Vec<_> = (0..ACCOUNTS)
        .map(|a| (a, INITIAL, notes[a as usize]))
        .collect();
    assert_eq!(rows(&db, t), expected, "{r:?}");
}

#[test]
fn protocols_that_do_not_log_refuse_durability() {
    let dir = TempDir::new("unsupported");
    let mut db = Database::<Atomic>::open(config(&dir.0, 1, Duration::from_millis(5)));
    let schema = Schema::builder()
        .column("v", ColumnType::U64, 0)
        .build()
        .unwrap();
    db.create_table(TableSpec::new("t", schema, 16));
    let err = db.start_durability().unwrap_err();
    assert!(
        matches!(err, DurabilityError::Unsupported("atomic", _)),
        "{err}"
    );
    assert!(err.to_string().contains("no commit"), "{err}");
}

/// Key of worker `w`'s `i`-th transaction's own row (above the accounts).
pub(crate) fn own_key(w: u64, i: u64) -> u64 {
    1_000_000 * (w + 1) + i
}

/// A transfer a worker committed: (from, to, amount, the commit's epoch).
pub(crate) type Transfer = (u64, u64, i64, u64);

/// How [`transfers`] runs.
pub(crate) struct Transfers {
    pub(crate) workers: u64,
    /// Transfers are between the first `hot` accounts (contended).
    pub(crate) hot: u64,
    /// Each transaction inserts a row of its own and deletes the one `keep` transactions older.
    pub(crate) keep: u64,
    /// Balances change by `Tx::add` (a splittable operation: Doppel's split phases) instead of a
    /// read and an update.
    pub(crate) by_add: bool,
    pub(crate) seed: u64,
    /// Most transfers a worker runs.
    pub(crate) most: u64,
}

/// Runs `spec.workers` threads of transfers (at most `spec.most` each) until `done()`; returns each
/// worker's committed transfers in commit order.
pub(crate) fn transfers<P: Protocol>(
    db: &Database<P>,
    t: TableId,
    spec: &Transfers,
    done: &(dyn Fn() -> bool + Sync),
) -> Vec<Vec<Transfer>> {
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..spec.workers)
            .map(|w| {
                s.spawn(move || {
                    let mut worker = db.worker();
                    let mut history = Vec::new();
                    let mut x = (w + spec.seed) * 0x9E37_79B9_7F4A_7C15;
                    for i in 0..spec.most {
                        if done() {
                            break;
                        }
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let (from, to) = (x % spec.hot, (x >> 20) % spec.hot);
                        let amount = (x >> 40) as i64 % 50;
                        worker
                            .execute(0, |tx| {
                                if spec.by_add {
                                    tx.add(t, from, 0, -amount)?;
                                    tx.add(t, to, 0, amount)?;
                                } else {
                                    let a = tx.get(t, from)?.unwrap().i64(0);
                                    tx.update(t, from, |r| r.set_i64(0, a - amount))?;
                                    let b = tx.get(t, to)?.unwrap().i64(0);
                                    tx.update(t, to, |r| r.set_i64(0, b + amount))?;
                                }
                                tx.insert(t, own_key(w, i), |r| r.set_u64(1, i))?;
                                if i >= spec.keep {
                                    tx.delete(t, own_key(w, i - spec.keep))?;
                                }
                                Ok(())
                            })
                            .unwrap();
                        history.push((from, to, amount, worker.commit_epoch().unwrap()));
                    }
                    history
                })
            })
            .collect();
        workers.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// The rows a serial replay of each worker's transfers of epochs up to `durable` leaves: the
/// balances and each worker's newest `keep` own rows. Each worker's transfers must be in commit
/// order (their epochs never go down), so the durable ones are a prefix.
pub(crate) fn replayed(
    histories: &[Vec<Transfer>],
    durable: u64,
    keep: u64,
) -> Vec<(u64, i64, u64)> {
    let mut balance = vec![INITIAL; ACCOUNTS as usize];
    let mut expected = Vec::new();
    for (w, h) in histories.iter().enumerate() {
        assert!(h.windows(2).all(|p| p[0].3 <= p[1].3), "worker {w}");
        let kept: Vec<_> = h.iter().take_while(|c| c.3 <= durable).collect();
        for &&(from, to, amount, _) in &kept {
            balance[from as usize] -= amount;
            balance[to as usize] += amount;
        }
        let n = kept.len() as u64;
        for i in n.saturating_sub(keep)..n {
            expected.push((own_key(w as u64, i), 0, i));
        }
    }
    expected.extend(balance.iter().enumerate().map(|(a, &b)| (a as u64, b, 0)));
    expected.sort();
    expected
}

#[test]
fn background_checkpoints_during_a_contended_run_then_a_crash_lose_no_durable_commit() {
    let dir = TempDir::new("background");
    let mut cfg = config(&dir.0, 2, Duration::from_millis(5));
    let d = cfg.durability.as_mut().unwrap();
    d.checkpoint_interval = Some(Duration::from_millis(40));
    d.checkpoint_threads = 2;
    let (mut db, t) = bank(cfg, INITIAL);
    db.start_durability().unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let spec = Transfers {
        workers: 2,
        hot: 8,
        keep: 3,
        by_add: false,
        seed: 7,
        most: 200_000,
    };
    let (histories, on_demand) = std::thread::scope(|s| {
        let run = s.spawn(|| transfers(&db, t, &spec, &|| stop.load(Ordering::Relaxed)));
        let mut on_demand = Vec::new();
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(30));
            on_demand.push(db.checkpoint().unwrap());
        }
        stop.store(true, Ordering::Relaxed);
        (run.join().unwrap(), on_demand)
    });
    assert!(histories.iter().all(|h| h.len() > 10), "workers ran");
    let stats = db.checkpoint_stats().unwrap();
    assert!(stats.taken >= 3 && stats.failed == 0, "{stats:?}");
    assert!(
        on_demand.iter().all(|r| r.rows >= ACCOUNTS),
        "{on_demand:?}"
    );
    assert!(on_demand.windows(2).all(|w| w[0].seq < w[1].seq));
    assert!(
        on_demand.iter().skip(1).all(|r| r.removed_files > 0),
        "{on_demand:?}"
    );
    let durable = db.crash().unwrap();

    // Only the two newest checkpoints and the log segments from the older one's start are left.
    let names: Vec<String> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let complete: Vec<&String> = names
        .iter()
        .filter(|n| n.starts_with("ckpt-") && !n.ends_with(".tmp"))
        .collect();
    assert_eq!(complete.len(), 2, "{names:?}");
    let segments: Vec<u64> = names
        .iter()
        .filter_map(|n| n.strip_suffix(".log")?.rsplit('-').next()?.parse().ok())
        .collect();
    assert!(segments.iter().all(|&s| s >= 2), "{names:?}");
    // A torn tail on the newest segment of logger 0.
    let newest = names
        .iter()
        .filter(|n| n.starts_with("log-00000001-000-"))
        .max()
        .unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.0.join(newest))
        .unwrap();
    std::io::Write::write_all(&mut f, &[0xAB; 37]).unwrap();
    drop(f);

    let (mut db, t) = bank(config(&dir.0, 2, Duration::from_millis(5)), 0);
    let r = db.start_durability().unwrap();
    let newest_ckpt = complete
        .iter()
        .filter_map(|n| n[5..].parse::<u64>().ok())
        .max();
    assert_eq!(r.checkpoint, newest_ckpt, "{r:?}");
    assert!(r.checkpoint.unwrap() >= 4, "{r:?}");
    assert!(r.torn_bytes >= 37, "{r:?}");
    assert!(r.durable_epoch >= durable, "{r:?}");

    // The state a serial replay of the transactions of the recovered durable epochs gives.
    assert!(
        histories
            .iter()
            .all(|h| h.first().unwrap().3 <= r.durable_epoch),
        "commits were durable before the crash"
    );
    let expected = replayed(&histories, r.durable_epoch, spec.keep);
    let recovered = rows(&db, t);
    assert_eq!(recovered, expected);
    assert_eq!(total(&recovered), ACCOUNTS as i64 * INITIAL);
    drop(db);
    // Recovery is idempotent: again from the checkpoint it wrote.
    let (mut db, t) = bank(config(&dir.0, 1, Duration::from_millis(5)), 0);
    db.start_durability().unwrap();
    assert_eq!(rows(&db, t), expected);
}

/// A table of one column group of three columns: updates that write some of them log only those
/// (partial images), which recovery must replay in TID order per row.
const KEYS: u64 = 64;

fn triples(config: Config) -> (Database<Occ>, TableId) {
    let mut db = Database::<Occ>::open(config);
    let schema = Schema::builder()
        .column("a", ColumnType::U64, 0)
        .column("b", ColumnType::U64, 0)
        .column("c", ColumnType::U64, 0)
        .build()
        .unwrap();
    let t = db.create_table(TableSpec::new("triples", schema, 2 * KEYS as usize));
    for k in 0..KEYS / 2 {
        db.load(t, k, |r| {
            r.set_u64(0, 1);
            r.set_u64(1, 2);
            r.set_u64(2, 3);
        })
        .unwrap();
    }
    (db, t)
}

fn triple_rows(db: &Database<Occ>, t: TableId) -> Vec<(u64, u64, u64, u64)> {
    let mut out = Vec::new();
    db.for_each_row_quiescent(t, |k, r| out.push((k, r.u64(0), r.u64(1), r.u64(2))));
    out.sort();
    out
}

#[test]
fn updates_of_some_columns_of_a_group_recover_every_column_newest() {
    let dir = TempDir::new("partial");
    let expected = {
        let (mut db, t) = triples(config(&dir.0, 2, Duration::from_millis(2)));
        db.start_durability().unwrap();
        std::thread::scope(|s| {
            for seed in [3u64, 5] {
                let db = &db;
                s.spawn(move || {
                    let mut w = db.worker();
                    let mut x = seed * 0x9E37_79B9_7F4A_7C15;
                    for i in 0..3_000u64 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let key = x % KEYS;
                        // Some subset of the three columns, sometimes all of them.
                        let cols = (x >> 8) % 7 + 1;
                        let v = (seed << 32) | i;
                        w.execute(0, |tx| {
                            if tx.get(t, key)?.is_none() {
                                return tx.insert(t, key, |r| r.set_u64(0, v));
                            }
                            if x % 97 == 0 {
                                return tx.delete(t, key).map(|_| ());
                            }
                            tx.update(t, key, |r| {
                                for c in 0..3 {
                                    if cols & (1 << c) != 0 {
                                        r.set_u64(c, v + c as u64);
                                    }
                                }
                            })
                            .map(|_| ())
                        })
                        .unwrap();
                        if i == 1_000 && seed == 3 {
                            db.checkpoint().unwrap();
                        }
                    }
                    db.wait_durable(w.commit_epoch().unwrap()).unwrap();
                });
            }
        });
        // Worker `b` (the second slot: logger 1's file) writes column c of every row, then
        // worker `a` (logger 0's file, replayed first) column a: each c is older than the row's
        // newest record and must still come back.
        let (mut a, mut b) = (db.worker(), db.worker());
        for (w, col) in [(&mut b, 2), (&mut a, 0)] {
            for key in 0..KEYS {
                w.execute(0, |tx| {
                    if tx.get(t, key)?.is_some() {
                        tx.update(t, key, |r| r.set_u64(col, 1_000 + key))?;
                    }
                    Ok(())
                })
                .unwrap();
            }
        }
        a.wait_durable().unwrap();
        b.wait_durable().unwrap();
        triple_rows(&db, t)
    };
    // From the logs, then from the checkpoint that recovery wrote.
    for (round, loggers) in [1, 2].into_iter().enumerate() {
        let (mut db, t) = triples(config(&dir.0, loggers, Duration::from_millis(2)));
        let r = db.start_durability().unwrap();
        assert!(round > 0 || r.log_records > 1_000, "{r:?}");
        assert_eq!(triple_rows(&db, t), expected, "{r:?}");
    }
}

#[test]
fn a_directory_of_another_format_version_is_refused() {
    let dir = TempDir::new("version");
    {
        let (mut db, _) = bank(config(&dir.0, 1, Duration::from_millis(5)), INITIAL);
        db.start_durability().unwrap();
    }
    let manifest = dir.0.join("MANIFEST");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let older = text.replacen("format 4\n", "format 3\n", 1);
    assert_ne!(older, text, "the manifest names its format version");
    std::fs::write(&manifest, older).unwrap();
    let (mut db, _) = bank(config(&dir.0, 1, Duration::from_millis(5)), INITIAL);
    let err = db.start_durability().unwrap_err();
    assert!(matches!(err, DurabilityError::Version { .. }), "{err}");
    assert!(err.to_string().contains("format version 3"), "{err}");
}

/// Marks records split before a run (Doppel).
type Split<'a, P> = &'a dyn Fn(&Database<P>, TableId);

/// Two workers transfer between a few hot accounts (and insert and delete rows of their own)
/// under protocol `P` until the database crashes; recovery must give exactly the transactions of
/// the durable epochs (a serial replay of them), the total intact. With `split`, balances change
/// by splittable additions and half the hot accounts are split (Doppel).
/// `ran` checks the run before the crash.
fn crash_and_recover<P: Protocol>(split: Option<Split<'_, P>>, ran: &dyn Fn(&Database<P>)) {
    let dir = TempDir::new(P::NAME);
    let open = |initial: i64| bank_of::<P>(config(&dir.0, 2, Duration::from_millis(3)), initial);
    let (mut db, t) = open(INITIAL);
    db.start_durability().unwrap();
    if let Some(split) = split {
        split(&db, t);
    }
    let spec = Transfers {
        workers: 2,
        hot: 6,
        keep: 2,
        by_add: split.is_some(),
        seed: 11,
        most: 200_000,
    };
    let deadline = std::time::Instant::now() + Duration::from_millis(150);
    let histories = transfers(&db, t, &spec, &|| std::time::Instant::now() >= deadline);
    assert!(
        histories.iter().all(|h| h.len() > 10),
        "{}: workers ran",
        P::NAME
    );
    ran(&db);
    let before = db.durable_epoch().unwrap();
    let crashed = db.crash().unwrap();
    assert!(crashed >= before);

    let (mut db, t) = open(0);
    let r = db.start_durability().unwrap();
    assert!(r.durable_epoch >= crashed, "{}: {r:?}", P::NAME);
    let recovered = rows(&db, t);
    let expected = replayed(&histories, r.durable_epoch, spec.keep);
    assert_eq!(recovered, expected, "{}: {r:?}", P::NAME);
    assert_eq!(total(&recovered), ACCOUNTS as i64 * INITIAL, "{}", P::NAME);
    // The recovered database commits on.
    let mut w = db.worker();
    w.execute(0, |tx| tx.update(t, 0, |r| r.set_u64(1, 9)).map(|_| ()))
        .unwrap();
    w.wait_durable().unwrap();
}

#[test]
fn two_phase_locking_recovers_the_durable_transactions() {
    crash_and_recover::<phasedb_txn::TwoPlNoWait>(None, &|_| {});
    crash_and_recover::<phasedb_txn::TwoPlWaitDie>(None, &|_| {});
    crash_and_recover::<phasedb_txn::TwoPlBlocking>(None, &|_| {});
}

#[test]
fn swisstm_recovers_the_durable_transactions() {
    crash_and_recover::<phasedb_txn::SwissTm>(None, &|_| {});
}

#[test]
fn adaptive_recovers_the_durable_transactions() {
    crash_and_recover::<phasedb_txn::Adaptive>(None, &|_| {});
}

#[test]
fn occ_recovers_the_durable_transactions() {
    crash_and_recover::<Occ>(None, &|_| {});
}

#[test]
fn tictoc_recovers_the_durable_transactions() {
    crash_and_recover::<TicToc>(None, &|_| {});
}

#[test]
fn doppel_recovers_the_durable_transactions() {
    crash_and_recover::<Doppel>(None, &|_| {});
}

/// Split phases under durable operation: a transaction's slice operations reach the log only
/// with the reconciliation's values, so recovery must keep or drop each transaction whole (the
/// total holds, and the kept ones are exactly the durable epochs').
#[test]
fn doppel_split_phases_recover_whole_transactions() {
    let split = |db: &Database<Doppel>, t: TableId| {
        for key in 0..3 {
            db.split(t, key, 0, OpKind::Add);
        }
    };
    let ran = |db: &Database<Doppel>| {
        let stats = db.phase_stats();
        eprintln!("{stats:?}, durable epoch {:?}", db.durable_epoch());
        assert!(stats.split_phases >= 2, "{stats:?}");
        assert!(stats.slice_ops > 0, "{stats:?}");
    };
    crash_and_recover::<Doppel>(Some(&split), &ran);
}

/// A clean close of a Doppel database in a split phase reconciles and logs the slices first.
#[test]
fn doppel_split_phase_values_survive_a_clean_close() {
    let dir = TempDir::new("doppel-close");
    let open = |initial: i64| {
        let mut cfg = config(&dir.0, 1, Duration::from_millis(2));
        cfg.phase_length = Duration::from_millis(50);
        bank_of::<Doppel>(cfg, initial)
    };
    let (mut db, t) = open(INITIAL);
    db.start_durability().unwrap();
    db.split(t, 0, 0, OpKind::Add);
    let mut w = db.worker();
    let mut adds = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while db.phase_stats().split_phases == 0 || adds < 100 {
        assert!(std::time::Instant::now() < deadline, "no split phase");
        w.execute(0, |tx| tx.add(t, 0, 0, 1).map(|_| ())).unwrap();
        adds += 1;
    }
    w.wait_durable().unwrap();
    drop(w);
    drop(db);
    let (mut db, t) = open(0);
    db.start_durability().unwrap();
    assert_eq!(rows(&db, t)[0], (0, INITIAL + adds, 0));
}

/// Workers left idle in a split phase hold the durable epoch back until the phase ends, so a
/// periodic checkpoint begun then waits for them: that wait is not a failure, however long it
/// lasts (here five times the wait limit), and the checkpoint completes once a worker ends the
/// phase.
#[test]
fn a_periodic_checkpoint_waits_out_an_idle_split_phase_without_failing() {
    let dir = TempDir::new("doppel-idle-split");
    let mut cfg = config(&dir.0, 1, Duration::from_millis(2));
    cfg.phase_length = Duration::from_millis(20);
    let d = cfg.durability.as_mut().unwrap();
    d.checkpoint_interval = Some(Duration::from_millis(10));
    d.checkpoint_wait_limit = Duration::from_millis(60);
    let (mut db, t) = bank_of::<Doppel>(cfg, INITIAL);
    db.start_durability().unwrap();
    db.split(t, 0, 0, OpKind::Add);
    let mut w = db.worker();
    let add = |w: &mut phasedb_txn::Worker<'_, Doppel>| {
        w.execute(0, |tx| tx.add(t, 0, 0, 1).map(|_| ())).unwrap();
    };
    // Run until the worker started a split phase (between two transactions) and ran one in it:
    // it then stops inside the phase, which nobody ends while it is idle.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while db.phase_stats().split_phases == 0 {
        assert!(std::time::Instant::now() < deadline, "no split phase");
        add(&mut w);
    }
    let taken = db.checkpoint_stats().unwrap().taken;
    std::thread::sleep(Duration::from_millis(300));
    let idle = db.checkpoint_stats().unwrap();
    assert_eq!(idle.failed, 0, "{idle:?}");
    assert!(
        idle.taken <= taken + 1,
        "the split phase held no checkpoint back: {idle:?}"
    );
    // The next transactions end the phase (its change is due); the waiting checkpoint completes.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while db.checkpoint_stats().unwrap().taken <= idle.taken {
        assert!(
            std::time::Instant::now() < deadline,
            "no checkpoint after the phase ended"
        );
        add(&mut w);
        std::thread::sleep(Duration::from_millis(1));
    }
    let after = db.checkpoint_stats().unwrap();
    assert_eq!(after.failed, 0, "{after:?}");
}
