//! Helpers the workload tests share: the seed, a short closed-loop run, and the check of a recorded
//! history.

#![allow(dead_code)]

use std::time::Duration;

use phasedb_txn::{Config, Protocol};
use phasedb_workloads::{BenchOptions, BenchResult, Workload, run_bench};

/// `PHASEDB_SEED=<seed>` replays one seed; otherwise `default`.
pub fn seed_or(default: u64) -> u64 {
    match std::env::var("PHASEDB_SEED") {
        Ok(s) => s.parse().expect("PHASEDB_SEED is a number"),
        Err(_) => default,
    }
}

/// Runs `workload` on `threads` workers for `millis` ms after a 50 ms warm-up, or, when recording the
/// history, from the start so that the history holds every transaction.
pub fn run<P: Protocol, W: Workload>(
    workload: &mut W,
    threads: usize,
    millis: u64,
    record: bool,
    seed: u64,
) -> BenchResult {
    let opts = BenchOptions {
        threads,
        warmup: Duration::from_millis(if record { 0 } else { 50 }),
        duration: Duration::from_millis(millis),
        seed,
        durable_results: false,
        durable_progress: false,
        config: Config {
            record_history: record,
            ..Config::default()
        },
    };
    run_bench::<P, _>(workload, &opts, |_, _| {})
}

/// A recorded run kept the workload's conditions, recorded more than 100 transactions, and its
/// history is serializable.
pub fn assert_recorded_serializable(r: &BenchResult, ctx: &str) {
    assert_eq!(r.check, Ok(()), "{ctx}");
    assert!(
        r.history.len() > 100,
        "{ctx}: {} transactions",
        r.history.len()
    );
    if let Err(a) = phasedb_check::check_serializable(&r.history) {
        panic!("{ctx}: {a}");
    }
    eprintln!("{ctx}: {} transactions serializable", r.history.len());
}

/// The run kept the workload's conditions, and every type of `types` committed and none failed; only
/// type `may_roll_back` aborted by the procedure's choice.
pub fn every_type_commits(r: &BenchResult, ctx: &str, types: &[&str], may_roll_back: usize) {
    assert_eq!(r.check, Ok(()), "{ctx}: consistency check");
    assert_eq!(r.txn_types, types.to_vec(), "{ctx}");
    for (ty, name) in types.iter().enumerate() {
        let s = &r.stats.types[ty];
        assert!(s.committed > 0, "{ctx}: no {name} committed");
        assert_eq!(s.failures, 0, "{ctx}: {name} failed");
        if ty != may_roll_back {
            assert_eq!(s.user_aborts, 0, "{ctx}: {name} aborted by choice");
        }
    }
}
