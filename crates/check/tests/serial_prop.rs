//! Property tests: histories of serial executions pass; a stale read in a
//! read-modify-write is always caught.

mod common;

use common::{Op, Rng, prev_map, shuffle, simulate};
use phasedb_check::{History, check_serializable};
use proptest::prelude::*;

fn op(keys: u64) -> impl Strategy<Value = Op> {
    (0..keys, 0u8..10).prop_map(|(k, kind)| match kind {
        0..=3 => Op::Read(k),
        4..=5 => Op::Write(k),
        6..=8 => Op::Rmw(k),
        _ => Op::Delete(k),
    })
}

/// A serial history of 1-40 transactions over 3-8 keys, in random order.
fn serial_history() -> impl Strategy<Value = History> {
    (3u64..=8)
        .prop_flat_map(|keys| {
            (
                prop::collection::vec(prop::collection::vec(op(keys), 1..6), 1..40),
                any::<u64>(),
            )
        })
        .prop_map(|(txns, seed)| {
            let mut h = simulate(&txns);
            shuffle(&mut h, &mut Rng(seed));
            h
        })
}

/// Positions `(txn, read)` of reads whose transaction also overwrote the
/// version read, and that did not read the initial version.
fn rmw_reads(h: &History) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (t, txn) in h.txns.iter().enumerate() {
        for (i, read) in txn.reads.iter().enumerate() {
            let overwrites = txn
                .writes
                .iter()
                .any(|w| w.item == read.item && w.prev == read.version);
            if overwrites && read.version != 0 {
                out.push((t, i));
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn serial_histories_are_serializable(h in serial_history()) {
        let stats = check_serializable(&h);
        prop_assert!(stats.is_ok(), "{:?}", stats);
        prop_assert_eq!(stats.unwrap().transactions, h.len());
    }

    /// Replacing the read of a read-modify-write by an older version of the
    /// item means its transaction ignored a committed update it then
    /// overwrote: rw to that update's writer, ww chain back to itself.
    #[test]
    fn stale_read_in_read_modify_write_is_caught(h in serial_history(), pick in any::<prop::sample::Index>(), back in 1usize..4) {
        let candidates = rmw_reads(&h);
        prop_assume!(!candidates.is_empty());
        let (t, i) = candidates[pick.index(candidates.len())];
        let prev = prev_map(&h);
        let mut h = h;
        let read = &mut h.txns[t].reads[i];
        for _ in 0..back {
            if read.version == 0 {
                break;
            }
            read.version = prev[&(read.item, read.version)];
        }
        prop_assert!(check_serializable(&h).is_err());
    }
}
