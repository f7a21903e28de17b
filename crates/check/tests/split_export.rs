//! Doppel's split-phase operations and merges, and loaded rows, through the exports: a cycle that
//! runs through a split operation (or a miss of a loaded row) stays detectable by phasedb's
//! checker on the history, by the same checker on [`flatten`]'s plain form, and by the adya crate
//! on the list-append EDN written from it; serializable split histories stay serializable for all
//! three (and for adya on the rw-register EDN).

mod common;

use adya::{Opts, Report, Valid, Workload};
use common::{item, r, txn, w};
use phasedb_check::{
    Anomaly, EdgeKind, History, LOADED, MERGE_WORKER, MergeEvent, OBSERVER_WORKER, SplitOpEvent,
    TxnEvent, check_serializable, flatten, to_elle_edn, to_elle_list_append_edn, with_observer,
};

const X: u64 = 0;
const Y: u64 = 1;

fn serializable() -> Opts {
    Opts {
        models: vec!["serializable".into()],
        ..Opts::default()
    }
}

fn adya_list_append(h: &History) -> Report {
    let edn = to_elle_list_append_edn(&with_observer(h));
    let parsed = adya::History::from_edn(&edn).expect("adya parses the list-append export");
    adya::check(&parsed, Workload::ListAppend, &serializable())
}

fn adya_register(h: &History) -> Report {
    let parsed = adya::History::from_edn(&to_elle_edn(h)).expect("adya parses the register export");
    adya::check(&parsed, Workload::RwRegister, &serializable())
}

/// `t` with a split-phase operation on item `key` in `phase`.
fn with_op(mut t: TxnEvent, key: u64, phase: u64) -> TxnEvent {
    t.split_ops.push(SplitOpEvent {
        item: item(key),
        phase,
    });
    t
}

/// The merge of `key`'s slices of `phase`: reads `prev`, installs `version`.
fn merge(id: u64, key: u64, phase: u64, prev: u64, version: u64) -> TxnEvent {
    let mut t = txn(id, vec![r(key, prev)], vec![w(key, version, prev)]);
    t.worker = MERGE_WORKER;
    t.merges.push(MergeEvent {
        item: item(key),
        phase,
    });
    t
}

/// Every checker finds `h` not serializable.
fn all_reject(h: &History) {
    let ours = check_serializable(h);
    assert!(ours.is_err(), "phasedb's checker passes the history");
    let flat = check_serializable(&flatten(h));
    assert!(
        flat.is_err(),
        "phasedb's checker passes the flattened history"
    );
    let la = adya_list_append(h);
    assert_eq!(
        la.valid,
        Valid::False,
        "adya list-append: {:?}",
        la.anomaly_types
    );
    // The rw-register export shows adya only that nil precedes every write, too little to order
    // versions here; it is held only to never reject a serializable history (`all_accept`).
}

/// Every checker finds `h` serializable (adya's rw-register check may not know).
fn all_accept(h: &History) {
    if let Err(a) = check_serializable(h) {
        panic!("phasedb's checker: {a}");
    }
    if let Err(a) = check_serializable(&flatten(h)) {
        panic!("phasedb's checker on the flattened history: {a}");
    }
    let la = adya_list_append(h);
    assert_eq!(
        la.valid,
        Valid::True,
        "adya list-append: {:?}",
        la.anomaly_types
    );
    let reg = adya_register(h);
    assert_ne!(
        reg.valid,
        Valid::False,
        "adya rw-register: {:?}",
        reg.anomaly_types
    );
}

/// T1 adds to the loaded counter x in split phase 1 and reads y; T2 reads x as merged (with T1's
/// add) and writes the y that T1 read. T1 -split-> merge -wr-> T2 -wr-> T1: a G1c cycle that runs
/// through the split operation. Without the operation the rest is serializable.
fn cycle_through_split_op() -> History {
    History::from_iter([
        with_op(txn(1, vec![r(Y, 3)], vec![]), X, 1),
        txn(2, vec![r(X, 5)], vec![w(Y, 3, LOADED)]),
        merge(100, X, 1, LOADED, 5),
    ])
}

#[test]
fn a_cycle_through_a_split_operation_survives_the_export() {
    let h = cycle_through_split_op();
    let Err(Anomaly::Cycle(c)) = check_serializable(&h) else {
        panic!("expected a cycle, got {:?}", check_serializable(&h));
    };
    assert_eq!(c.count(EdgeKind::Split), 1, "{c}");
    assert_eq!(c.adya_class(), "G1c", "{c}");
    // adya names it G-single-item: in the plain form an operation reads the phase start and its
    // merge overwrites that, one anti-dependency.
    all_reject(&h);
    // The cycle needs the split operation: dropped (as the exports used to), all is serializable.
    let mut without = h.clone();
    without.txns[0].split_ops.clear();
    all_accept(&without);
}

#[test]
fn a_read_of_the_version_before_a_split_phase_orders_before_its_operations() {
    // T2 read x before phase 1's operations (version 4), yet read the y that T1 wrote in that
    // phase alongside its add to x: T2 -> phase start -> T1 -wr-> T2, a G-single.
    let h = History::from_iter([
        txn(3, vec![], vec![w(X, 4, LOADED)]),
        with_op(txn(1, vec![], vec![w(Y, 7, LOADED)]), X, 1),
        txn(2, vec![r(X, 4), r(Y, 7)], vec![]),
        merge(100, X, 1, 4, 5),
    ]);
    all_reject(&h);
    // Read after the merge instead, it is serializable.
    let mut fixed = h.clone();
    fixed.txns[2].reads[0].version = 5;
    all_accept(&fixed);
}

#[test]
fn split_operations_of_one_phase_commute_in_the_export() {
    // T1 and T2 add to x and y in the same split phase, merged in opposite orders of their ids; T3
    // reads both merged values. No order among the operations is invented, so nothing cycles.
    let h = History::from_iter([
        with_op(with_op(txn(1, vec![], vec![]), X, 1), Y, 1),
        with_op(with_op(txn(2, vec![], vec![]), Y, 1), X, 1),
        merge(100, X, 1, LOADED, 5),
        merge(101, Y, 1, LOADED, 6),
        txn(3, vec![r(X, 5), r(Y, 6)], vec![]),
        with_op(txn(4, vec![r(Y, 6)], vec![]), X, 2),
        merge(102, X, 2, 5, 9),
    ]);
    all_accept(&h);
}

#[test]
fn an_unmerged_split_operation_is_reported_by_every_checker() {
    let h = History::from_iter([
        with_op(txn(1, vec![], vec![]), X, 1),
        with_op(txn(2, vec![], vec![]), X, 2),
        merge(100, X, 1, LOADED, 5),
    ]);
    assert!(matches!(
        check_serializable(&h),
        Err(Anomaly::UnmergedSplitOp { phase: 2, .. })
    ));
    all_reject(&h);
}

#[test]
fn a_miss_of_a_loaded_row_is_reported() {
    // T2 found loaded x absent while reading loaded y: the loader precedes it (wr on y) and
    // follows it (rw on x).
    let h = History::from_iter([
        txn(1, vec![r(X, LOADED)], vec![w(Y, 2, LOADED)]),
        txn(2, vec![r(X, 0), r(Y, LOADED)], vec![]),
    ]);
    assert!(matches!(
        check_serializable(&h),
        Err(Anomaly::LoadedRowMissed {
            txn: 2,
            witness: 1,
            ..
        })
    ));
    all_reject(&h);
    let mut fixed = h.clone();
    fixed.txns[1].reads[0].version = LOADED;
    all_accept(&fixed);
}

#[test]
fn the_observer_never_shares_a_worker_with_merges() {
    let h = with_observer(&cycle_through_split_op());
    let observer = h.txns.last().expect("the observer");
    assert_eq!(observer.worker, OBSERVER_WORKER);
    assert!(observer.writes.is_empty());
    let others: Vec<u32> = h.txns[..h.len() - 1].iter().map(|t| t.worker).collect();
    assert!(others.contains(&MERGE_WORKER));
    assert!(!others.contains(&OBSERVER_WORKER));
    // It reads the head of every item: x as merged, y as T2 wrote it.
    let mut heads: Vec<(u64, u64)> = observer
        .reads
        .iter()
        .map(|r| (r.item.key, r.version))
        .collect();
    heads.sort_unstable();
    assert_eq!(heads, vec![(X, 5), (Y, 3)]);
}
