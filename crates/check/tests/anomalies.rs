//! Hand-made histories with known verdicts.

mod common;

use common::cases::{lost_update, read_skew, three_cycle, write_skew};
use common::{r, txn, w};
use phasedb_check::{Anomaly, EdgeKind, History, Item, check_serializable};

fn history(txns: Vec<phasedb_check::TxnEvent>) -> History {
    txns.into_iter().collect()
}

fn cycle_of(h: &History) -> phasedb_check::Cycle {
    match check_serializable(h) {
        Err(Anomaly::Cycle(c)) => c,
        other => panic!("expected a cycle, got {other:?}"),
    }
}

#[test]
fn write_skew_is_a_cycle_of_two_anti_dependencies() {
    let c = cycle_of(&write_skew());
    assert_eq!(c.edges.len(), 2);
    assert_eq!(c.count(EdgeKind::Rw), 2);
    assert_eq!(c.adya_class(), "G2");
    let mut txns = c.txns();
    txns.sort();
    assert_eq!(txns, [1, 2]);
    let items: Vec<u64> = c.edges.iter().map(|e| e.item.key).collect();
    assert!(items.contains(&0) && items.contains(&1));
    let text = Anomaly::Cycle(c).to_string();
    assert!(
        text.starts_with("cycle of 2 transactions: T"),
        "unexpected report: {text}"
    );
    assert!(text.contains("-rw(item 0/0)->") && text.contains("-rw(item 0/1)->"));
}

#[test]
fn lost_update_is_a_write_fork() {
    let err = check_serializable(&lost_update()).unwrap_err();
    assert_eq!(
        err,
        Anomaly::WriteFork {
            item: Item::new(0, 0),
            prev: 0,
            txns: (1, 2),
            versions: (1, 2),
        }
    );
    assert!(err.to_string().contains("lost update"));
}

#[test]
fn read_of_unwritten_version_is_g1a() {
    let h = history(vec![
        txn(1, vec![], vec![w(0, 1, 0)]),
        txn(2, vec![r(0, 7)], vec![]),
    ]);
    assert_eq!(
        check_serializable(&h).unwrap_err(),
        Anomaly::ReadOfUnwrittenVersion {
            txn: 2,
            item: Item::new(0, 0),
            version: 7,
        }
    );
}

#[test]
fn duplicates_are_reported() {
    let h = history(vec![
        txn(1, vec![], vec![w(0, 1, 0)]),
        txn(1, vec![], vec![w(1, 2, 0)]),
    ]);
    assert_eq!(
        check_serializable(&h).unwrap_err(),
        Anomaly::DuplicateTxnId { id: 1 }
    );
    let h = history(vec![
        txn(1, vec![], vec![w(0, 1, 0)]),
        txn(2, vec![], vec![w(0, 1, 5)]),
    ]);
    assert!(matches!(
        check_serializable(&h),
        Err(Anomaly::DuplicateVersion {
            version: 1,
            txns: (1, 2),
            ..
        })
    ));
    let h = history(vec![txn(1, vec![], vec![w(0, 0, 0)])]);
    assert!(matches!(
        check_serializable(&h),
        Err(Anomaly::ZeroVersionWrite { txn: 1, .. })
    ));
}

#[test]
fn read_skew_is_g_single() {
    let c = cycle_of(&read_skew());
    assert_eq!(c.adya_class(), "G-single");
    assert_eq!(c.count(EdgeKind::Wr), 1);
    assert_eq!(c.count(EdgeKind::Rw), 1);
}

#[test]
fn long_cycle_mixes_all_edge_kinds() {
    let c = cycle_of(&three_cycle());
    assert_eq!(c.edges.len(), 3);
    assert_eq!(c.count(EdgeKind::Ww), 1);
    assert_eq!(c.count(EdgeKind::Wr), 1);
    assert_eq!(c.count(EdgeKind::Rw), 1);
    for pair in c.edges.windows(2) {
        assert_eq!(pair[0].to, pair[1].from);
    }
    assert_eq!(c.edges.last().unwrap().to, c.edges[0].from);
}

#[test]
fn read_modify_write_after_a_newer_version_is_caught() {
    // T2 read x1 but replaced x2: it missed T3's update.
    let h = history(vec![
        txn(1, vec![], vec![w(0, 1, 0)]),
        txn(3, vec![r(0, 1)], vec![w(0, 2, 1)]),
        txn(2, vec![r(0, 1)], vec![w(0, 3, 2)]),
    ]);
    let c = cycle_of(&h);
    let mut txns = c.txns();
    txns.sort();
    assert_eq!(txns, [2, 3]);
}

#[test]
fn shortest_cycle_is_preferred() {
    // A 2-cycle (T5, T6) next to a 4-cycle through T1..T4.
    let mut txns = vec![
        txn(1, vec![], vec![w(10, 1, 0)]),
        txn(2, vec![r(10, 1)], vec![w(11, 2, 0)]),
        txn(3, vec![r(11, 2)], vec![w(12, 3, 0)]),
        txn(4, vec![r(12, 3), r(13, 0)], vec![]),
        txn(7, vec![], vec![w(13, 9, 0)]),
    ];
    txns[0].reads.push(r(13, 9));
    txns.push(txn(5, vec![r(0, 0), r(1, 0)], vec![w(0, 5, 0)]));
    txns.push(txn(6, vec![r(0, 0), r(1, 0)], vec![w(1, 6, 0)]));
    let c = cycle_of(&history(txns));
    assert_eq!(c.edges.len(), 2, "{c}");
}

#[test]
fn serial_histories_pass_with_stats() {
    let h = history(vec![
        txn(2, vec![r(0, 1)], vec![w(0, 2, 1)]),
        txn(1, vec![r(0, 0)], vec![w(0, 1, 0)]),
        txn(3, vec![r(0, 2), r(1, 0)], vec![]),
        txn(4, vec![], vec![w(1, 4, 0)]),
    ]);
    let stats = check_serializable(&h).unwrap();
    assert_eq!(stats.transactions, 4);
    assert_eq!(stats.ww_edges, 1);
    assert_eq!(stats.wr_edges, 2);
    assert_eq!(stats.rw_edges, 1);
    assert!(check_serializable(&History::new()).is_ok());
}

#[test]
fn history_round_trips_through_json() {
    let h = three_cycle();
    assert_eq!(History::from_json(&h.to_json()).unwrap(), h);
    let merged = History::merge(vec![write_skew(), read_skew()]);
    assert_eq!(merged.len(), 4);
}
