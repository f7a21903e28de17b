//! The B+-tree against `BTreeMap` as a model (proptest, with nodes small enough that a few dozen
//! keys split and unlink them), on the key patterns of TPC-C's tables, and under concurrent writers
//! and scanners.

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::btree::BTree;
use crate::btree::version::VersionLock;

#[derive(Debug, Clone)]
enum Op {
    Insert(u64),
    Remove(u64),
    /// Remove with a value the key does not map to: must change nothing.
    RemoveStale(u64),
    Get(u64),
    Scan(u64, u64, usize),
}

/// Key `i` of a space of `n`: spread out, with both ends of the key range.
fn key(i: u64, n: u64) -> u64 {
    match i {
        0 => 0,
        i if i + 1 == n => u64::MAX,
        i => i * 7 + 3,
    }
}

fn ops(n: u64) -> impl Strategy<Value = Vec<Op>> {
    let k = (0..n).prop_map(move |i| key(i, n));
    let op = prop_oneof![
        5 => k.clone().prop_map(Op::Insert),
        4 => k.clone().prop_map(Op::Remove),
        1 => k.clone().prop_map(Op::RemoveStale),
        1 => k.clone().prop_map(Op::Get),
        2 => (k.clone(), k, 0..n as usize).prop_map(|(a, b, limit)| Op::Scan(a.min(b), a.max(b), limit)),
    ];
    prop::collection::vec(op, 0..400)
}

fn scan<const L: usize, const N: usize>(
    t: &BTree<L, N>,
    lo: u64,
    hi: u64,
    limit: usize,
) -> Vec<(u64, usize)> {
    let guard = crossbeam_epoch::pin();
    let mut out = Vec::new();
    t.scan(lo, hi, &guard, |k, v| {
        out.push((k, v));
        out.len() < limit
    });
    out
}

/// Runs `ops` on a tree and on the model, comparing every answer, then the whole contents; then
/// empties the tree and checks it holds nothing and still takes inserts.
fn agrees_with_model<const L: usize, const N: usize>(ops: &[Op]) {
    let t = BTree::<L, N>::default();
    let mut model = BTreeMap::new();
    let guard = crossbeam_epoch::pin();
    for (i, op) in ops.iter().enumerate() {
        let value = i + 1;
        match *op {
            Op::Insert(k) => {
                t.prefetch(k, &guard);
                let fresh = !model.contains_key(&k);
                assert_eq!(t.insert(k, value, &guard), fresh, "insert {k}");
                model.entry(k).or_insert(value);
            }
            Op::Remove(k) => {
                let current = model.get(&k).copied();
                assert_eq!(
                    t.remove(k, current.unwrap_or(0), &guard),
                    current.is_some(),
                    "remove {k}"
                );
                model.remove(&k);
            }
            Op::RemoveStale(k) => assert!(!t.remove(k, 0, &guard), "remove {k} with a stale value"),
            Op::Get(k) => assert_eq!(t.get(k, &guard), model.get(&k).copied(), "get {k}"),
            Op::Scan(lo, hi, limit) => {
                let want: Vec<_> = model
                    .range(lo..=hi)
                    .map(|(&k, &v)| (k, v))
                    .take(limit.max(1))
                    .collect();
                assert_eq!(
                    scan(&t, lo, hi, limit.max(1)),
                    want,
                    "scan {lo}..={hi} limit {limit}"
                );
            }
        }
    }
    let all: Vec<_> = model.iter().map(|(&k, &v)| (k, v)).collect();
    assert_eq!(scan(&t, 0, u64::MAX, usize::MAX), all);
    for (&k, &v) in &model {
        assert!(t.remove(k, v, &guard));
    }
    assert!(scan(&t, 0, u64::MAX, usize::MAX).is_empty());
    assert_eq!(t.get(3, &guard), None);
    assert!(t.insert(3, 30, &guard));
    assert_eq!(scan(&t, 0, u64::MAX, usize::MAX), vec![(3, 30)]);
}

proptest! {
    #[test]
    fn smallest_nodes_agree_with_a_btreemap(ops in ops(60)) {
        agrees_with_model::<2, 3>(&ops);
    }

    #[test]
    fn small_nodes_agree_with_a_btreemap(ops in ops(200)) {
        agrees_with_model::<4, 4>(&ops);
    }

    #[test]
    fn index_sized_nodes_agree_with_a_btreemap(ops in ops(2000)) {
        agrees_with_model::<32, 64>(&ops);
    }
}

/// Bytes of the nodes of a tree of `entries` keys if every node were full.
fn packed_bytes<const L: usize, const N: usize>(entries: usize) -> usize {
    let leaves = entries.div_ceil(L);
    leaves * BTree::<L, N>::LEAF_BYTES + leaves.div_ceil(N - 1) * BTree::<L, N>::INNER_BYTES
}

#[test]
fn ascending_inserts_fill_their_leaves() {
    let t = BTree::<32, 64>::default();
    let guard = crossbeam_epoch::pin();
    for k in 0..100_000u64 {
        assert!(t.insert(k, k as usize, &guard));
    }
    let used = t.memory_bytes(&guard);
    assert!(
        used < packed_bytes::<32, 64>(100_000) * 11 / 10,
        "{used} bytes, packed would be {}",
        packed_bytes::<32, 64>(100_000)
    );
    assert_eq!(scan(&t, 0, u64::MAX, usize::MAX).len(), 100_000);
}

#[test]
fn a_sliding_window_leaves_no_trail_of_empty_nodes() {
    // New orders: inserted at the top of a district's run, delivered from the bottom, in ten runs.
    let t = BTree::<32, 64>::default();
    let runs = 10u64;
    let window = 900u64;
    let run_key = |run: u64, i: u64| (run << 32) | i;
    let mut guard = crossbeam_epoch::pin();
    for i in 0..100_000u64 {
        for run in 0..runs {
            assert!(t.insert(run_key(run, i), i as usize, &guard));
            if i >= window {
                assert!(t.remove(run_key(run, i - window), (i - window) as usize, &guard));
            }
        }
        if i % 10_000 == 0 {
            guard.repin();
        }
    }
    let live = (runs * window) as usize;
    let used = t.memory_bytes(&guard);
    assert!(
        used < packed_bytes::<32, 64>(live) * 3,
        "{used} bytes for {live} keys"
    );
    let first = scan(&t, 0, u64::MAX, 1);
    assert_eq!(
        first,
        vec![(run_key(0, 100_000 - window), (100_000 - window) as usize)]
    );
}

#[test]
fn scans_stop_where_told_and_take_the_ends_of_the_key_range() {
    let t = BTree::<4, 4>::default();
    let guard = crossbeam_epoch::pin();
    for k in [0, 1, u64::MAX - 1, u64::MAX] {
        assert!(t.insert(k, k as usize, &guard));
    }
    assert_eq!(
        scan(&t, u64::MAX, u64::MAX, 10),
        vec![(u64::MAX, usize::MAX)]
    );
    assert_eq!(scan(&t, 0, 0, 10), vec![(0, 0)]);
    assert_eq!(scan(&t, 2, u64::MAX - 2, 10), vec![]);
    assert_eq!(scan(&t, 5, 4, 10), vec![]);
    assert_eq!(scan(&t, 0, u64::MAX, 2), vec![(0, 0), (1, 1)]);
}

/// Concurrent writers and scanners on small nodes, so splits and unlinks race with everything. Keys
/// divisible by three are anchors, inserted first and never removed; each writer owns one other
/// residue, which it inserts, checks and removes in rounds. Scanners check that every scan is in
/// ascending order, within its range, holds every anchor of the range and only values that belong
/// to their keys. At the end the tree holds exactly the anchors and each writer's last round.
#[test]
fn concurrent_writers_and_scanners_keep_every_anchor_and_order() {
    const KEYS: u64 = 3000;
    const ROUNDS: u64 = 12;
    let t = BTree::<4, 4>::default();
    let value = |k: u64| (k * 2 + 1) as usize;
    {
        let guard = crossbeam_epoch::pin();
        for k in (0..KEYS).step_by(3) {
            assert!(t.insert(k, value(k), &guard));
        }
    }
    let writers_done = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for residue in 1..=2u64 {
            let (t, done) = (&t, &writers_done);
            s.spawn(move || {
                let mine: Vec<u64> = (0..KEYS).filter(|k| k % 3 == residue).collect();
                for round in 0..ROUNDS {
                    let guard = crossbeam_epoch::pin();
                    // Each round walks the keys in another order: ascending, descending or strided.
                    let order: Vec<u64> = match round % 3 {
                        0 => mine.clone(),
                        1 => mine.iter().rev().copied().collect(),
                        _ => (0..7)
                            .flat_map(|o| mine.iter().skip(o).step_by(7).copied())
                            .collect(),
                    };
                    for &k in &order {
                        assert!(t.insert(k, value(k), &guard), "insert {k}");
                        assert_eq!(t.get(k, &guard), Some(value(k)));
                    }
                    if round + 1 == ROUNDS {
                        break;
                    }
                    for &k in order.iter().filter(|&&k| (k / 3 + round) % 4 != 0) {
                        assert!(t.remove(k, value(k), &guard), "remove {k}");
                        assert_eq!(t.get(k, &guard), None);
                    }
                    for &k in order.iter().filter(|&&k| (k / 3 + round) % 4 == 0) {
                        assert!(t.remove(k, value(k), &guard), "remove {k}");
                    }
                }
                done.fetch_add(1, std::sync::atomic::Ordering::Release);
            });
        }
        let (t, done) = (&t, &writers_done);
        s.spawn(move || {
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            let mut scans = 0;
            while done.load(std::sync::atomic::Ordering::Acquire) < 2 || scans < 100 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let (a, b) = (x % KEYS, (x >> 32) % KEYS);
                let (lo, hi) = (a.min(b), a.max(b));
                let got = scan(t, lo, hi, usize::MAX);
                assert!(
                    got.windows(2).all(|w| w[0].0 < w[1].0),
                    "scan {lo}..={hi} out of order"
                );
                assert!(
                    got.iter()
                        .all(|&(k, v)| (lo..=hi).contains(&k) && v == value(k))
                );
                let anchors = got.iter().filter(|&&(k, _)| k % 3 == 0).count() as u64;
                assert_eq!(
                    anchors,
                    hi / 3 + 1 - lo.div_ceil(3),
                    "anchors of {lo}..={hi}"
                );
                scans += 1;
            }
        });
    });
    let all = scan(&t, 0, u64::MAX, usize::MAX);
    let want: Vec<_> = (0..KEYS).map(|k| (k, value(k))).collect();
    assert_eq!(all, want);
}

#[test]
fn versions_change_on_every_write_and_obsolete_nodes_restart() {
    let lock = VersionLock::new();
    let v = lock.read().unwrap();
    assert!(lock.check(v).is_ok());
    lock.upgrade(v).unwrap();
    assert!(lock.read().is_err(), "locked");
    assert!(lock.check(v).is_err());
    assert!(lock.upgrade(v).is_err(), "a second writer does not wait");
    lock.unlock(v);
    let w = lock.read().unwrap();
    assert_ne!(v, w);
    assert!(lock.upgrade(v).is_err(), "stale version");
    lock.upgrade(w).unwrap();
    lock.unlock_obsolete(w);
    assert!(lock.read().is_err());
    assert!(lock.check(w).is_err());
}
