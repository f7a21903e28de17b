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

/// Runs `run(millis)`, twice as long each time (at most [`RUNS`] runs), until every one of `types`
/// transaction types committed: on a loaded machine a short run may not reach the rare types. Every
/// run must keep the workload's conditions.
pub fn long_enough(
    mut run: impl FnMut(u64) -> BenchResult,
    millis: u64,
    types: usize,
    ctx: &str,
) -> BenchResult {
    for attempt in 0..RUNS {
        let ms = millis << attempt;
        let r = run(ms);
        assert_eq!(
            r.check,
            Ok(()),
            "{ctx}: consistency check of the {ms} ms run"
        );
        let committed = |ty: usize| r.stats.types.get(ty).map_or(0, |s| s.committed);
        if (0..types).all(|ty| committed(ty) > 0) || attempt + 1 == RUNS {
            return r;
        }
        let counts: Vec<u64> = (0..types).map(committed).collect();
        eprintln!("{ctx}: a {ms} ms run committed {counts:?} per type; running longer");
    }
    unreachable!("the last run returns")
}

/// Runs [`long_enough`] makes.
pub const RUNS: u32 = 4;

/// The run kept the workload's conditions, and every type of `types` committed and none failed; only
/// type `may_roll_back` aborted by the procedure's choice.
pub fn every_type_commits(r: &BenchResult, ctx: &str, types: &[&str], may_roll_back: usize) {
    assert_eq!(r.check, Ok(()), "{ctx}: consistency check");
    assert_eq!(r.txn_types, types.to_vec(), "{ctx}");
    for (ty, name) in types.iter().enumerate() {
        let Some(s) = r.stats.types.get(ty) else {
            panic!("{ctx}: no {name} ran");
        };
        assert!(s.committed > 0, "{ctx}: no {name} committed");
        assert_eq!(s.failures, 0, "{ctx}: {name} failed");
        if ty != may_roll_back {
            assert_eq!(s.user_aborts, 0, "{ctx}: {name} aborted by choice");
        }
    }
}
