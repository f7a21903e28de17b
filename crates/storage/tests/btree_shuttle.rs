//! The ordered index's B+-tree under shuttle: the same source, compiled against shuttle's atomics,
//! whose every load, store and compare-and-swap is a point where shuttle may switch threads. Random
//! schedules of two writers and a scanner over nodes of two entries, so that nearly every insert
//! splits and nearly every removal unlinks, check that no interleaving loses an entry, shows a scan
//! one twice or out of order, or leaves a node locked.
//!
//! Shuttle runs every atomic operation as sequentially consistent, so this checks the protocol's
//! interleavings, not its memory orderings.

use std::sync::Arc;

/// What the tree imports from the crate's `sync` module, here from shuttle.
mod sync {
    pub(crate) use shuttle::sync::atomic::{
        AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
    };
    pub(crate) use shuttle::thread::yield_now;
}

/// Cache prefetches change nothing shuttle could observe.
mod prefetch {
    pub(crate) fn line(_: *const u8) {}
}

#[path = "../src/btree/mod.rs"]
#[allow(dead_code)]
mod btree;

use btree::BTree;
use crossbeam_epoch::Collector;

type Tree = BTree<2, 3>;

/// Anchors: present throughout, never removed.
const ANCHORS: [u64; 5] = [0, 3, 6, 9, 12];

fn value(k: u64) -> usize {
    (k * 10 + 1) as usize
}

fn scan_all(t: &Tree, guard: &crossbeam_epoch::Guard) -> Vec<(u64, usize)> {
    let mut out = Vec::new();
    t.scan(0, u64::MAX, guard, |k, v| {
        out.push((k, v));
        true
    });
    out
}

/// A writer inserts `keys` in order, then removes all but the last, checking each step is seen.
fn writer(t: &Tree, collector: &Collector, keys: &[u64]) {
    let handle = collector.register();
    for &k in keys {
        let guard = handle.pin();
        t.prefetch(k, &guard);
        assert!(t.insert(k, value(k), &guard), "insert {k}");
        assert_eq!(t.get(k, &guard), Some(value(k)));
    }
    for &k in &keys[..keys.len() - 1] {
        let guard = handle.pin();
        assert!(t.remove(k, value(k), &guard), "remove {k}");
        assert_eq!(t.get(k, &guard), None);
    }
}

fn two_writers_and_a_scanner() {
    let t = Arc::new(Tree::default());
    let collector = Collector::new();
    {
        let handle = collector.register();
        let guard = handle.pin();
        for k in ANCHORS {
            assert!(t.insert(k, value(k), &guard));
        }
    }
    let writers: Vec<_> = [vec![1, 4, 7, 10], vec![11, 8, 5, 2]]
        .into_iter()
        .map(|keys| {
            let (t, collector) = (t.clone(), collector.clone());
            shuttle::thread::spawn(move || writer(&t, &collector, &keys))
        })
        .collect();
    let handle = collector.register();
    for _ in 0..2 {
        let guard = handle.pin();
        let seen = scan_all(&t, &guard);
        assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "{seen:?}");
        assert!(seen.iter().all(|&(k, v)| v == value(k)), "{seen:?}");
        for k in ANCHORS {
            assert!(
                seen.iter().any(|&(s, _)| s == k),
                "anchor {k} missing from {seen:?}"
            );
        }
    }
    for w in writers {
        w.join().expect("writer");
    }
    let guard = handle.pin();
    let mut want: Vec<u64> = ANCHORS.iter().copied().chain([10, 2]).collect();
    want.sort_unstable();
    let got: Vec<u64> = scan_all(&t, &guard).into_iter().map(|(k, _)| k).collect();
    assert_eq!(got, want);
    // Every node was unlocked: each remaining key can still be removed and inserted.
    for k in want {
        assert!(t.remove(k, value(k), &guard));
        assert!(t.insert(k, value(k), &guard));
    }
}

#[test]
fn random_schedules_lose_nothing_and_scan_in_order() {
    shuttle::check_random(two_writers_and_a_scanner, 3000);
}

#[test]
fn pct_schedules_lose_nothing_and_scan_in_order() {
    shuttle::check_pct(two_writers_and_a_scanner, 3000, 3);
}
