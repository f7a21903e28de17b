//! Value-observed list-append histories: phasedb's checker ([`ListAppendHistory::check`]) and the
//! adya crate, fed the history's own Elle EDN, give the same verdict on each hand-made case, and
//! the JSON form reads back unchanged.

use adya::{Opts, Report, Valid, Workload};
use phasedb_check::list_append::{ListAppendHistory, Mop, Outcome, Txn, Violation};
use phasedb_check::{Anomaly, LOAD_WORKER, OBSERVER_WORKER};

fn adya(h: &ListAppendHistory) -> Report {
    let parsed = adya::History::from_edn(&h.to_elle_edn()).expect("adya parses the EDN");
    let opts = Opts {
        models: vec!["serializable".into()],
        ..Opts::default()
    };
    adya::check(&parsed, Workload::ListAppend, &opts)
}

fn append(key: u64, value: u64) -> Mop {
    Mop::Append { key, value }
}

fn read(key: u64, list: &[u64]) -> Mop {
    Mop::Read {
        key,
        list: Some(list.to_vec()),
    }
}

fn ok(process: u32, mops: Vec<Mop>) -> Txn {
    Txn {
        process,
        outcome: Outcome::Ok,
        mops,
    }
}

fn history(loaded: &[(u64, &[u64])], txns: Vec<Txn>) -> ListAppendHistory {
    ListAppendHistory {
        loaded: loaded.iter().map(|(k, l)| (*k, l.to_vec())).collect(),
        txns,
    }
}

/// Both checkers accept `h`.
fn accepted(h: &ListAppendHistory) {
    if let Err(v) = h.check() {
        panic!("phasedb: {v}");
    }
    let r = adya(h);
    assert_eq!(r.valid, Valid::True, "adya: {:?}", r.anomaly_types);
}

/// Both checkers reject `h`; returns phasedb's reason and adya's anomaly names.
fn rejected(h: &ListAppendHistory) -> (Violation, Vec<String>) {
    let ours = h.check().expect_err("phasedb accepts the history");
    let r = adya(h);
    assert_eq!(
        r.valid,
        Valid::False,
        "adya: {:?} (phasedb: {ours})",
        r.anomaly_types
    );
    (ours, r.anomaly_types)
}

#[test]
fn a_serial_history_with_loaded_and_absent_keys_is_accepted() {
    let h = history(
        &[(1, &[10])],
        vec![
            ok(0, vec![read(1, &[10]), append(1, 1), read(2, &[])]),
            ok(
                1,
                vec![read(2, &[]), append(2, 2), append(2, 3), read(2, &[2, 3])],
            ),
            ok(0, vec![read(1, &[10, 1]), read(2, &[2, 3]), append(1, 4)]),
            Txn {
                process: 1,
                outcome: Outcome::Fail,
                mops: vec![
                    append(1, 5),
                    Mop::Read { key: 2, list: None },
                    Mop::Add {
                        counter: 0,
                        delta: 1,
                    },
                ],
            },
            ok(1, vec![read(1, &[10, 1, 4])]),
        ],
    );
    accepted(&h);
    let back: ListAppendHistory =
        serde_json::from_str(&h.to_json()).expect("the JSON form reads back");
    assert_eq!(back, h);
    let edn = h.to_elle_edn();
    let first = edn.lines().next().expect("the loader");
    assert_eq!(
        first,
        format!(
            "{{:type :invoke, :f :txn, :value [[:append 1 10]], :process {LOAD_WORKER}, :index 0}}"
        )
    );
    assert!(edn.contains(":type :fail, :f :txn, :value [[:append 1 5] [:r 2 nil]]"));
}

#[test]
fn write_skew_is_rejected() {
    let h = history(
        &[],
        vec![
            ok(0, vec![read(1, &[]), read(2, &[]), append(1, 1)]),
            ok(1, vec![read(1, &[]), read(2, &[]), append(2, 2)]),
            ok(2, vec![read(1, &[1]), read(2, &[2])]),
        ],
    );
    let (ours, theirs) = rejected(&h);
    assert!(
        matches!(ours, Violation::Anomaly(Anomaly::Cycle(_))),
        "{ours}"
    );
    assert!(theirs.iter().any(|t| t == "G2-item"), "{theirs:?}");
}

#[test]
fn a_lost_append_is_rejected() {
    // Both read the empty list and appended; the final read shows both, one after the other.
    let h = history(
        &[],
        vec![
            ok(0, vec![read(1, &[]), append(1, 1)]),
            ok(1, vec![read(1, &[]), append(1, 2)]),
            ok(2, vec![read(1, &[1, 2])]),
        ],
    );
    rejected(&h);
}

#[test]
fn a_miss_of_a_loaded_key_is_rejected() {
    // T1 found loaded key 1 empty, yet read key 2 as loaded and appended to key 1 after the load.
    let h = history(
        &[(1, &[10]), (2, &[20])],
        vec![
            ok(0, vec![read(1, &[]), read(2, &[20]), append(1, 1)]),
            ok(1, vec![read(1, &[10, 1])]),
        ],
    );
    let (ours, _) = rejected(&h);
    assert!(
        matches!(
            ours,
            Violation::Anomaly(Anomaly::LoadedRowMissed { txn: 0, .. })
        ),
        "{ours}"
    );
}

#[test]
fn an_aborted_read_is_rejected() {
    let h = history(
        &[],
        vec![
            Txn {
                process: 0,
                outcome: Outcome::Fail,
                mops: vec![append(1, 1)],
            },
            ok(1, vec![read(1, &[1])]),
        ],
    );
    let (ours, theirs) = rejected(&h);
    assert!(
        matches!(ours, Violation::AbortedRead { writer: 0, .. }),
        "{ours}"
    );
    assert!(theirs.iter().any(|t| t == "G1a"), "{theirs:?}");
}

#[test]
fn an_intermediate_read_is_rejected() {
    let h = history(
        &[],
        vec![
            ok(0, vec![append(1, 1), append(1, 2)]),
            ok(1, vec![read(1, &[1])]),
            ok(2, vec![read(1, &[1, 2])]),
        ],
    );
    let (ours, theirs) = rejected(&h);
    assert!(
        matches!(ours, Violation::IntermediateRead { writer: 0, .. }),
        "{ours}"
    );
    assert!(theirs.iter().any(|t| t == "G1b"), "{theirs:?}");
}

#[test]
fn incompatible_orders_are_rejected() {
    let h = history(
        &[],
        vec![
            ok(0, vec![append(1, 1)]),
            ok(1, vec![append(1, 2)]),
            ok(2, vec![read(1, &[1, 2])]),
            ok(3, vec![read(1, &[2, 1])]),
        ],
    );
    let (ours, _) = rejected(&h);
    assert!(
        matches!(ours, Violation::IncompatibleOrder { key: 1, .. }),
        "{ours}"
    );
}

#[test]
fn a_read_that_misses_its_own_append_is_rejected() {
    let h = history(&[], vec![ok(0, vec![append(1, 1), read(1, &[])])]);
    let (ours, _) = rejected(&h);
    assert!(
        matches!(ours, Violation::Internal { txn: 0, key: 1 }),
        "{ours}"
    );
}

#[test]
fn an_append_missing_from_the_final_read_is_lost() {
    // Without the final read, the unobserved append could still come after everything seen.
    let mut h = history(
        &[],
        vec![
            ok(0, vec![read(1, &[]), append(1, 1)]),
            ok(1, vec![append(1, 2)]),
            ok(2, vec![read(1, &[1])]),
        ],
    );
    accepted(&h);
    h.txns.push(ok(OBSERVER_WORKER, vec![read(1, &[1])]));
    let ours = h.check().expect_err("phasedb accepts a lost append");
    assert!(
        matches!(
            ours,
            Violation::LostAppend {
                txn: 1,
                key: 1,
                value: 2
            }
        ),
        "{ours}"
    );
}
