//! List-append under every protocol: the engine's history (phasedb's checker, and adya on its
//! list-append export) and the history of the values the transactions read (phasedb's list-append
//! checker, and adya on its Elle EDN) agree: serializable under every serializable protocol,
//! Doppel's split phases included, and not under no-CC. A failure names the seed;
//! `PHASEDB_SEED=<seed>` replays it.

use std::time::Duration;

use adya::{Opts, Valid, Workload as AdyaWorkload};
use phasedb_check::{
    History, ListAppendHistory, check_serializable, flatten, to_elle_edn, to_elle_list_append_edn,
    with_observer,
};
use phasedb_txn::{
    Adaptive, Config, Doppel, NoCc, Occ, Protocol, SwissTm, TicToc, TwoPlBlocking, TwoPlNoWait,
    TwoPlWaitDie,
};
use phasedb_workloads::append::{Append, AppendConfig};
use phasedb_workloads::{BenchOptions, BenchResult, Workload, run_bench};

use crate::common::seed_or;

/// A recorded run of `cfg` on `threads` workers for `millis` ms; Doppel's phases are short and its
/// counters split after few conflicts, so a short run goes through many split phases.
fn run<P: Protocol>(
    cfg: AppendConfig,
    threads: usize,
    millis: u64,
    seed: u64,
) -> (BenchResult, ListAppendHistory) {
    let mut config = Config {
        record_history: true,
        phase_length: Duration::from_millis(2),
        ..Config::default()
    };
    config.split.min_conflicts = 2;
    let opts = BenchOptions {
        threads,
        warmup: Duration::ZERO,
        duration: Duration::from_millis(millis),
        seed,
        durable_results: false,
        durable_progress: false,
        config,
    };
    let mut w = Append::new(cfg);
    let r = run_bench::<P, _>(&mut w, &opts, |_, _| {});
    let observed = w
        .take_observed()
        .expect("a recording run keeps what it read");
    (r, observed)
}

fn serializable() -> Opts {
    Opts {
        models: vec!["serializable".into()],
        ..Opts::default()
    }
}

/// adya's verdict on the values read.
fn adya_values(h: &ListAppendHistory) -> adya::Report {
    let parsed = adya::History::from_edn(&h.to_elle_edn()).expect("adya parses the EDN");
    adya::check(&parsed, AdyaWorkload::ListAppend, &serializable())
}

/// adya's verdict on the engine's history, exported as list-append with a final observer.
fn adya_engine(h: &History) -> adya::Report {
    let edn = to_elle_list_append_edn(&with_observer(h));
    let parsed = adya::History::from_edn(&edn).expect("adya parses the engine export");
    adya::check(&parsed, AdyaWorkload::ListAppend, &serializable())
}

fn contended() -> AppendConfig {
    AppendConfig {
        keys: 6,
        ops: 3,
        read_ratio: 0.4,
        adds: 0.0,
        absent_keys: 2,
        capacity: 8,
    }
}

/// Runs of `P` made before one shows contention (on a loaded machine a short run may see none).
const ATTEMPTS: u64 = 8;

/// Length of the first run; each further attempt runs twice as long, up to [`LONGEST_RUN_MILLIS`],
/// so that a machine loaded enough for blocking locks to time out (a holder descheduled past the
/// deadlock timeout) still gives a run with enough commits, while an unloaded run's history stays
/// small enough to check in a moment.
const FIRST_RUN_MILLIS: u64 = 30;

/// Longest run an attempt makes.
const LONGEST_RUN_MILLIS: u64 = 240;

/// phasedb's checker and adya find contended runs of `P` serializable, both on the values read and
/// on the engine's history.
fn every_checker_agrees<P: Protocol>() {
    contended_run::<P>(contended(), |ctx, h| {
        let engine = adya_engine(h);
        assert_eq!(
            engine.valid,
            Valid::True,
            "{ctx}: adya on the engine's history: {:?}",
            engine.anomaly_types
        );
        true
    });
}

/// Runs `P` on `cfg` with successive seeds until a run has conflicts, enough commits and
/// `enough(ctx, history)` holds; every run must be serializable for phasedb's checker (on the
/// engine's history and on the values read) and for adya (on the values read).
fn contended_run<P: Protocol>(cfg: AppendConfig, mut enough: impl FnMut(&str, &History) -> bool) {
    let first = seed_or(7);
    for (attempt, seed) in (first..first + ATTEMPTS).enumerate() {
        let millis = (FIRST_RUN_MILLIS << attempt).min(LONGEST_RUN_MILLIS);
        let (r, observed) = run::<P>(cfg.clone(), 4, millis, seed);
        let ctx = format!("{} with seed {seed} for {millis} ms", P::NAME);
        let total = r.stats.total();
        eprintln!(
            "{ctx}: {} committed, {} conflicts, {} failed by choice, {} recorded",
            total.committed,
            total.conflicts,
            total.user_aborts,
            r.history.len()
        );
        assert_eq!(r.check, Ok(()), "{ctx}: consistency check");
        if let Err(a) = check_serializable(&r.history) {
            panic!("{ctx}: phasedb's checker on the engine's history: {a}");
        }
        if let Err(v) = observed.check() {
            panic!("{ctx}: phasedb's checker on the values read: {v}");
        }
        let values = adya_values(&observed);
        assert_eq!(
            values.valid,
            Valid::True,
            "{ctx}: adya on the values read: {:?}",
            values.anomaly_types
        );
        let contended = total.conflicts > 0 && total.committed > 500;
        if enough(&ctx, &r.history) && contended {
            return;
        }
    }
    panic!(
        "{}: no run of {ATTEMPTS} had conflicts and what the test needs",
        P::NAME
    );
}

#[test]
fn occ_append_histories_agree() {
    every_checker_agrees::<Occ>();
}

#[test]
fn two_phase_locking_append_histories_agree() {
    every_checker_agrees::<TwoPlNoWait>();
    every_checker_agrees::<TwoPlWaitDie>();
    every_checker_agrees::<TwoPlBlocking>();
}

#[test]
fn tictoc_append_histories_agree() {
    every_checker_agrees::<TicToc>();
}

#[test]
fn swisstm_append_histories_agree() {
    every_checker_agrees::<SwissTm>();
}

#[test]
fn adaptive_append_histories_agree() {
    every_checker_agrees::<Adaptive>();
}

/// Doppel with splittable counter adds: the split phases' operations and merges are in the engine's
/// history, which phasedb's checker finds serializable as recorded and as flattened for the
/// exports. adya judges the values read; on the engine's history it gets the rw-register export,
/// since counters' long version chains make the list-append one (which repeats a chain in every
/// read) grow with their square.
#[test]
fn doppel_append_histories_with_split_counters_agree() {
    let cfg = AppendConfig {
        read_ratio: 0.1,
        adds: 0.6,
        ..contended()
    };
    // Whether counters split in a short run depends on the scheduler.
    contended_run::<Doppel>(cfg, |ctx, h| {
        let split_ops: usize = h.txns.iter().map(|t| t.split_ops.len()).sum();
        let merges: usize = h.txns.iter().map(|t| t.merges.len()).sum();
        eprintln!("{ctx}: {split_ops} split operations, {merges} merges");
        if let Err(a) = check_serializable(&flatten(h)) {
            panic!("{ctx}: phasedb's checker on the flattened history: {a}");
        }
        let parsed = adya::History::from_edn(&to_elle_edn(h)).expect("adya parses the export");
        let reg = adya::check(&parsed, AdyaWorkload::RwRegister, &serializable());
        assert_ne!(
            reg.valid,
            Valid::False,
            "{ctx}: adya rw-register: {:?}",
            reg.anomaly_types
        );
        split_ops > 0 && merges > 0
    });
}

#[test]
fn nocc_append_histories_are_rejected_by_every_checker() {
    // A run on a loaded machine may interleave too little to lose anything: the next seed then.
    let first = seed_or(7);
    for seed in first..first + ATTEMPTS {
        let (r, observed) = run::<NoCc>(contended(), 4, 30, seed);
        let ctx = format!("nocc with seed {seed}");
        let engine = check_serializable(&r.history);
        let values = observed.check();
        eprintln!(
            "{ctx}: consistency {:?}; engine: {:?}; values: {:?}",
            r.check,
            engine.as_ref().map_err(ToString::to_string),
            values.as_ref().map_err(ToString::to_string),
        );
        if engine.is_ok() || values.is_ok() {
            continue;
        }
        let theirs = adya_values(&observed);
        assert_eq!(
            theirs.valid,
            Valid::False,
            "{ctx}: adya passes the values read: {:?}",
            theirs.anomaly_types
        );
        return;
    }
    panic!("no nocc run of {ATTEMPTS} was rejected by phasedb's checkers");
}
