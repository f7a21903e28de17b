//! The increment micro-benchmarks under every protocol: every committed increment is counted once,
//! on a hot key and on a zipfian spread; the atomic baseline runs them and refuses anything else.

use std::time::Duration;

use phasedb_txn::{
    Adaptive, Atomic, Config, Database, Occ, Protocol, SwissTm, TicToc, TwoPlBlocking, TwoPlNoWait,
    TwoPlWaitDie, TxError,
};
use phasedb_workloads::incr::{Incr, IncrConfig, KeyChoice};
use phasedb_workloads::{BenchOptions, Workload, run_bench};

fn counts_every_increment<P: Protocol>(choice: KeyChoice) {
    let mut w = Incr::new(IncrConfig { keys: 1000, choice });
    let opts = BenchOptions {
        threads: 4,
        warmup: Duration::ZERO,
        duration: Duration::from_millis(150),
        seed: 3,
        durable_results: false,
        durable_progress: false,
        config: Config::default(),
    };
    let r = run_bench::<P, _>(&mut w, &opts, |_, _| {});
    assert_eq!(r.check, Ok(()), "{} with {choice:?}", P::NAME);
    assert!(
        r.stats.total().committed > 1000,
        "{}: too few increments",
        P::NAME
    );
}

fn all(choice: KeyChoice) {
    counts_every_increment::<Occ>(choice);
    counts_every_increment::<TwoPlNoWait>(choice);
    counts_every_increment::<TwoPlWaitDie>(choice);
    counts_every_increment::<TwoPlBlocking>(choice);
    counts_every_increment::<TicToc>(choice);
    counts_every_increment::<SwissTm>(choice);
    counts_every_increment::<Adaptive>(choice);
    counts_every_increment::<Atomic>(choice);
}

#[test]
fn hot_key_increments_are_all_counted() {
    all(KeyChoice::Hot(1.0));
    all(KeyChoice::Hot(0.1));
}

#[test]
fn zipfian_increments_are_all_counted() {
    all(KeyChoice::Zipf(1.4));
}

#[test]
fn atomic_refuses_reads_and_ordinary_writes() {
    let mut w = Incr::new(IncrConfig {
        keys: 10,
        choice: KeyChoice::Hot(0.0),
    });
    let mut db = Database::<Atomic>::open(Config::default());
    w.setup(&mut db);
    let t = 0;
    assert!(db.execute(|tx| tx.add(t, 3, 0, 5)).unwrap());
    assert!(
        !db.execute(|tx| tx.add(t, 99, 0, 5)).unwrap(),
        "a missing key is reported"
    );
    assert!(matches!(
        db.execute(|tx| tx.get(t, 3).map(|r| r.is_some())),
        Err(TxError::Invalid(_))
    ));
    assert!(matches!(
        db.execute(|tx| tx.update(t, 3, |w| w.set_i64(0, 1))),
        Err(TxError::Invalid(_))
    ));
    assert!(
        matches!(
            db.execute(|tx| tx.add(t, 3, 1, 1)),
            Err(TxError::Invalid(_))
        ),
        "not an integer column"
    );
    let mut total = 0;
    db.for_each_row_quiescent(t, |_, row| total += row.i64(0));
    assert_eq!(total, 5);
}

#[test]
fn splittable_operations_read_modify_write_elsewhere() {
    let mut w = Incr::new(IncrConfig {
        keys: 10,
        choice: KeyChoice::Hot(0.0),
    });
    let mut db = Database::<Occ>::open(Config::default());
    w.setup(&mut db);
    let t = 0;
    db.execute(|tx| {
        tx.add(t, 1, 0, 10)?;
        tx.max(t, 1, 0, 7)?;
        tx.mult(t, 1, 0, 3)?;
        tx.min(t, 1, 0, 25)?;
        assert_eq!(
            tx.get(t, 1)?.unwrap().i64(0),
            25,
            "reads see the transaction's own operations"
        );
        Ok(())
    })
    .unwrap();
    assert_eq!(
        db.execute(|tx| Ok(tx.get(t, 1)?.unwrap().i64(0))).unwrap(),
        25
    );
}
