//! Engine histories judged twice: by phasedb's own serializability checker and by the adya crate (an
//! independent Rust take on Jepsen's Elle), fed through phasedb's Elle EDN exports.
//!
//! The main verdict is adya's list-append check, which recovers each item's version order from the
//! reads; a read-only observer transaction that reads the newest version of every item is added so
//! that the whole order is visible (it writes nothing, so it cannot create or break a cycle). The
//! rw-register export hides most of the version order, so adya may only say "unknown" there; it must
//! never call a serializable history invalid.
//!
//! The workloads have no scans: Elle's models have no predicates. A failure names the seed;
//! `PHASEDB_SEED=<seed>` replays it.

use std::sync::Barrier;

use crate::common::{Mix, open, run, seeds};

use adya::{Opts, Report, Valid, Workload};
use phasedb_check::{
    ABSENT, Anomaly, History, LOADED, check_serializable, to_elle_edn, to_elle_list_append_edn,
    with_observer,
};
use phasedb_txn::{NoCc, Occ, columns};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

fn serializable() -> Opts {
    Opts {
        models: vec!["serializable".into()],
        ..Opts::default()
    }
}

/// adya's list-append verdict on `h` plus an observer.
fn adya_list_append(h: &History) -> Report {
    let edn = to_elle_list_append_edn(&with_observer(h));
    let parsed = adya::History::from_edn(&edn).expect("adya parses the list-append export");
    adya::check(&parsed, Workload::ListAppend, &serializable())
}

/// adya's rw-register verdict on `h` (it knows only that `nil` precedes every written value).
fn adya_register(h: &History) -> Report {
    let parsed =
        adya::History::from_edn(&to_elle_edn(h)).expect("adya parses the rw-register export");
    adya::check(&parsed, Workload::RwRegister, &serializable())
}

// ---------------------------------------------------------------------------------------------------
// OCC: a mixed contended workload must be serializable for both checkers.

const MIXED: Mix = Mix {
    keys: 8,
    scans: false,
    yield_ratio: 0.05,
    adds: 0.0,
};

fn occ_agrees_with_adya(fine: bool) {
    for seed in seeds(&[1, 2]) {
        // On a loaded machine the four threads can run one after another and never meet: run
        // again (a bounded number of times) until they do.
        let (h, conflicts) = (0..5)
            .map(|_| run::<Occ>(seed, 4, 400, fine, MIXED))
            .find(|(_, conflicts)| *conflicts > 0)
            .unwrap_or_else(|| run::<Occ>(seed, 4, 400, fine, MIXED));
        let ctx = format!("occ, fine = {fine}, seed {seed}");
        eprintln!("{ctx}: {} committed, {conflicts} conflicts", h.len());
        assert!(conflicts > 0, "{ctx}: no conflict, so no contention");
        assert!(
            h.len() > 1200,
            "{ctx}: only {} transactions committed",
            h.len()
        );
        assert!(
            h.txns.iter().any(|t| !t.writes.is_empty()),
            "{ctx}: nothing was written"
        );
        if let Err(a) = check_serializable(&h) {
            panic!("{ctx}: phasedb's checker finds {a}");
        }
        let la = adya_list_append(&h);
        assert_eq!(
            la.valid,
            Valid::True,
            "{ctx}: adya list-append finds {:?}",
            la.anomaly_types
        );
        let reg = adya_register(&h);
        assert_ne!(
            reg.valid,
            Valid::False,
            "{ctx}: adya rw-register finds {:?}",
            reg.anomaly_types
        );
    }
}

#[test]
fn occ_is_serializable_for_adya_coarse() {
    occ_agrees_with_adya(false);
}

#[test]
fn occ_is_serializable_for_adya_fine() {
    occ_agrees_with_adya(true);
}

// ---------------------------------------------------------------------------------------------------
// NoCc: counters incremented without concurrency control lose updates; both checkers must agree on
// every history, anomalous or not.

/// One run of increments: `threads` workers each commit `txns` transactions incrementing one or two
/// distinct counters of `keys`.
struct Increments {
    threads: usize,
    keys: u64,
    txns: usize,
}

/// Runs the increments; returns the history, the number of increments committed and the sum of the
/// counters at the end.
fn run_increments(seed: u64, cfg: &Increments) -> (History, u64, u64) {
    let (db, t) = open::<NoCc>(false, cfg.keys, 1);
    let start = Barrier::new(cfg.threads);
    let increments: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.threads)
            .map(|i| {
                let (db, start) = (&db, &start);
                s.spawn(move || {
                    let mut rng =
                        SmallRng::seed_from_u64(seed.wrapping_mul(1000).wrapping_add(i as u64));
                    let mut w = db.worker();
                    start.wait();
                    let mut done = 0;
                    for _ in 0..cfg.txns {
                        let a = rng.random_range(0..cfg.keys);
                        let b = (cfg.keys > 1 && rng.random_bool(0.5))
                            .then(|| (a + rng.random_range(1..cfg.keys)) % cfg.keys);
                        // Sometimes give the core away between a read and its write, which is where
                        // a concurrent increment gets lost.
                        let pause = rng.random_bool(0.1);
                        let n = w
                            .execute(0, |tx| {
                                let mut n = 0;
                                for k in std::iter::once(a).chain(b) {
                                    let v = tx
                                        .get_columns(t, k, columns(&[0]))?
                                        .expect("counters exist")
                                        .u64(0);
                                    if pause {
                                        std::thread::yield_now();
                                    }
                                    assert!(
                                        tx.update(t, k, |w| w.set_u64(0, v + 1))?,
                                        "counter {k} exists"
                                    );
                                    n += 1;
                                }
                                Ok(n)
                            })
                            .unwrap_or_else(|e| panic!("seed {seed}: increment failed: {e}"));
                        done += n;
                    }
                    done
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker panicked"))
            .sum()
    });
    let history = db.take_history();
    let initial: u64 = (0..cfg.keys).sum();
    let total = db
        .execute(|tx| {
            let mut sum = 0;
            for k in 0..cfg.keys {
                sum += tx.get(t, k)?.expect("counters exist").u64(0);
            }
            Ok(sum)
        })
        .unwrap();
    (history, increments, total - initial)
}

#[test]
fn nocc_verdicts_agree_with_adya() {
    let runs = [
        // Heavy contention: lost updates are all but certain.
        Increments {
            threads: 4,
            keys: 3,
            txns: 400,
        },
        Increments {
            threads: 4,
            keys: 4,
            txns: 400,
        },
        // One thread: serial, so valid for both.
        Increments {
            threads: 1,
            keys: 3,
            txns: 400,
        },
        // Light contention: either verdict, as long as both checkers give it.
        Increments {
            threads: 2,
            keys: 64,
            txns: 100,
        },
    ];
    let mut anomalous = 0;
    let mut valid = 0;
    for seed in seeds(&[21, 22, 23]) {
        for cfg in &runs {
            let ctx = format!(
                "nocc, {} threads on {} keys, seed {seed}",
                cfg.threads, cfg.keys
            );
            let (h, increments, counted) = run_increments(seed, cfg);
            assert_eq!(
                h.len(),
                cfg.threads * cfg.txns,
                "{ctx}: every increment commits"
            );
            let ours = check_serializable(&h);
            eprintln!(
                "{ctx}: {increments} increments, {counted} counted, phasedb: {:?}",
                ours.as_ref().err().map(|e| e.to_string())
            );
            let theirs = adya_list_append(&h);
            assert_ne!(
                theirs.valid,
                Valid::Unknown,
                "{ctx}: adya cannot decide: {:?}",
                theirs.anomaly_types
            );
            assert_eq!(
                ours.is_ok(),
                theirs.valid == Valid::True,
                "{ctx}: phasedb says {:?}, adya says {:?}",
                ours.as_ref().map(|_| ()).map_err(|e| e.to_string()),
                theirs.anomaly_types
            );
            // A serializable history of increments loses none.
            if ours.is_ok() {
                assert_eq!(
                    counted, increments,
                    "{ctx}: a history judged serializable lost increments"
                );
                valid += 1;
            } else {
                anomalous += 1;
            }
            if cfg.threads == 1 {
                assert!(
                    ours.is_ok(),
                    "{ctx}: a serial history is anomalous: {}",
                    ours.unwrap_err()
                );
            }
        }
    }
    assert!(anomalous > 0, "no nocc history was anomalous");
    assert!(valid > 0, "no nocc history was serializable");
}

// ---------------------------------------------------------------------------------------------------
// Loaded rows and keys that never existed are told apart, so a miss of a loaded row is checkable.

#[test]
fn loaded_rows_and_absent_keys_record_distinct_versions() {
    let (db, t) = open::<Occ>(false, 2, 2);
    db.execute(|tx| {
        assert!(
            tx.get_columns(t, 0, columns(&[0]))?.is_some(),
            "key 0 is loaded"
        );
        assert!(
            tx.get_columns(t, 1, columns(&[0]))?.is_none(),
            "key 1 is not"
        );
        tx.update(t, 0, |w| w.set_u64(0, 7))?;
        Ok(())
    })
    .unwrap();
    let h = db.take_history();
    let txn = &h.txns[0];
    let version_of = |key| {
        txn.reads
            .iter()
            .find(|r| r.item.key == key)
            .unwrap()
            .version
    };
    assert_eq!(version_of(0), LOADED);
    assert_eq!(version_of(1), ABSENT);
    assert_eq!(txn.writes[0].prev, LOADED);
    check_serializable(&h).expect("serializable");
    // Had the read of the loaded row missed, the checker would say so.
    let mut missed = h.clone();
    missed.txns[0]
        .reads
        .iter_mut()
        .find(|r| r.item.key == 0)
        .unwrap()
        .version = ABSENT;
    assert!(matches!(
        check_serializable(&missed),
        Err(Anomaly::LoadedRowMissed { .. })
    ));
}
