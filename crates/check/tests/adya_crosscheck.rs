//! Cross-checks against the adya crate (an independent Rust take on Jepsen's
//! Elle). Histories are fed to adya through this crate's own Elle EDN
//! export, parsed by `adya::History::from_edn`, and checked against
//! adya's `serializable` model (not `strict-serializable`: the export
//! orders transactions by worker, which is not a real-time order).
//!
//! The list-append form carries the exact version order only when some
//! read observes the whole chain, so `phasedb_check::with_observer` adds a read-only
//! transaction that reads the newest version of every item. It writes
//! nothing, so it gains only incoming edges and cannot create or break a
//! cycle.
//!
//! What adya cannot express: duplicate transaction ids (its transactions
//! are operations, identified by position) and a version that is never
//! written but read without any aborted writer in the history (it has no
//! "read of garbage" check; G1a needs a `:fail` op that wrote the value,
//! which the test adds by hand).

mod common;

use adya::{Opts, Report, Valid, Workload};
use common::cases::{lost_update, read_skew, three_cycle, write_skew};
use common::{Rng, prev_map, random_ops, shuffle, simulate, txn};
use phasedb_check::{
    History, check_serializable, elle_key, to_elle_edn, to_elle_list_append_edn, with_observer,
};
use proptest::prelude::*;

fn serializable() -> Opts {
    Opts {
        models: vec!["serializable".into()],
        ..Opts::default()
    }
}

/// adya's verdict on the list-append export of `h` plus an observer.
fn adya_list_append(h: &History) -> Report {
    adya_list_append_edn(&to_elle_list_append_edn(&with_observer(h)))
}

fn adya_list_append_edn(edn: &str) -> Report {
    let parsed = adya::History::from_edn(edn).expect("adya parses our EDN");
    adya::check(&parsed, Workload::ListAppend, &serializable())
}

/// adya's verdict on the rw-register export of `h` (it then knows only
/// that the initial `nil` precedes every written value).
fn adya_register(h: &History) -> Report {
    let parsed = adya::History::from_edn(&to_elle_edn(h)).expect("adya parses our EDN");
    adya::check(&parsed, Workload::RwRegister, &serializable())
}

fn has(report: &Report, kind: &str) -> bool {
    report.anomaly_types.iter().any(|t| t == kind)
}

#[test]
fn valid_serial_histories_agree() {
    for seed in 0..20 {
        let mut rng = Rng(seed);
        let mut h = simulate(&random_ops(&mut rng, 200, 6));
        shuffle(&mut h, &mut rng);
        assert!(check_serializable(&h).is_ok());
        let la = adya_list_append(&h);
        assert_eq!(la.valid, Valid::True, "seed {seed}: {:?}", la.anomaly_types);
        let reg = adya_register(&h);
        assert_ne!(
            reg.valid,
            Valid::False,
            "seed {seed}: {:?}",
            reg.anomaly_types
        );
    }
}

#[test]
fn write_skew_is_g2_for_both() {
    let h = write_skew();
    assert!(
        check_serializable(&h)
            .unwrap_err()
            .to_string()
            .contains("[G2]")
    );
    for report in [adya_list_append(&h), adya_register(&h)] {
        assert_eq!(report.valid, Valid::False);
        assert!(has(&report, "G2-item"), "{:?}", report.anomaly_types);
    }
}

#[test]
fn read_skew_is_g_single_for_both() {
    let h = read_skew();
    assert!(
        check_serializable(&h)
            .unwrap_err()
            .to_string()
            .contains("[G-single]")
    );
    for report in [adya_list_append(&h), adya_register(&h)] {
        assert_eq!(report.valid, Valid::False);
        assert!(has(&report, "G-single-item"), "{:?}", report.anomaly_types);
    }
}

#[test]
fn three_transaction_cycle_is_g_single_for_both() {
    let h = three_cycle();
    assert!(
        check_serializable(&h)
            .unwrap_err()
            .to_string()
            .contains("[G-single]")
    );
    let report = adya_list_append(&h);
    assert_eq!(report.valid, Valid::False);
    assert!(has(&report, "G-single-item"), "{:?}", report.anomaly_types);
}

#[test]
fn lost_update_agrees() {
    let h = lost_update();
    assert!(check_serializable(&h).is_err());
    for report in [adya_list_append(&h), adya_register(&h)] {
        assert_eq!(report.valid, Valid::False);
        assert!(has(&report, "lost-update"), "{:?}", report.anomaly_types);
    }
}

#[test]
fn aborted_read_agrees() {
    // T2 read version 7 of x, which only an aborted transaction wrote. Our
    // history holds committed transactions only; for adya, the aborted
    // writer is added as a `:fail` op.
    let h = History::from_iter([
        txn(1, vec![], vec![common::w(0, 1, 0)]),
        txn(2, vec![common::r(0, 7)], vec![]),
    ]);
    assert!(check_serializable(&h).is_err());
    let k = elle_key(common::item(0));
    let mut edn = to_elle_list_append_edn(&with_observer(&h));
    edn.push_str(&format!(
        "{{:type :invoke, :f :txn, :value [[:append {k} 7]], :process 99, :index 1000}}\n\
         {{:type :fail, :f :txn, :value [[:append {k} 7]], :process 99, :index 1001}}\n"
    ));
    let report = adya_list_append_edn(&edn);
    assert_eq!(report.valid, Valid::False);
    assert!(has(&report, "G1a"), "{:?}", report.anomaly_types);
}

fn op(keys: u64) -> impl Strategy<Value = common::Op> {
    (0..keys, 0u8..10).prop_map(|(k, kind)| match kind {
        0..=3 => common::Op::Read(k),
        4..=5 => common::Op::Write(k),
        6..=8 => common::Op::Rmw(k),
        _ => common::Op::Delete(k),
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Serial histories with one read made stale (any read, not only in a
    /// read-modify-write): whatever the outcome, both checkers agree.
    #[test]
    fn stale_reads_get_the_same_verdict(
        txns in (3u64..=8).prop_flat_map(|keys| prop::collection::vec(prop::collection::vec(op(keys), 1..6), 2..30)),
        pick in any::<prop::sample::Index>(),
        seed in any::<u64>(),
    ) {
        let mut h = simulate(&txns);
        let prev = prev_map(&h);
        let reads: Vec<(usize, usize)> = h.txns.iter().enumerate()
            .flat_map(|(t, txn)| (0..txn.reads.len()).map(move |i| (t, i)))
            .filter(|&(t, i)| h.txns[t].reads[i].version != 0)
            .collect();
        prop_assume!(!reads.is_empty());
        let (t, i) = reads[pick.index(reads.len())];
        let read = &mut h.txns[t].reads[i];
        read.version = prev[&(read.item, read.version)];
        shuffle(&mut h, &mut Rng(seed));
        let ours = check_serializable(&h);
        let theirs = adya_list_append(&h);
        prop_assert_eq!(ours.is_ok(), theirs.valid == Valid::True,
            "ours {:?}, adya {:?}", ours.map_err(|e| e.to_string()), theirs.anomaly_types);
    }
}
