//! Shared helpers for the integration tests: terse history builders and a
//! serial-execution simulator whose histories are serializable by
//! construction.
#![allow(dead_code)]

pub mod cases;

use phasedb_check::{History, Item, ReadEvent, TxnEvent, Version, WriteEvent, WriteKind};
use std::collections::HashMap;

/// Item `key` of table 0.
pub fn item(key: u64) -> Item {
    Item::new(0, key)
}

/// A read of `version` of item `key`.
pub fn r(key: u64, version: Version) -> ReadEvent {
    ReadEvent {
        item: item(key),
        version,
    }
}

/// An update of item `key` installing `version` over `prev`.
pub fn w(key: u64, version: Version, prev: Version) -> WriteEvent {
    WriteEvent {
        item: item(key),
        version,
        prev,
        kind: WriteKind::Update,
    }
}

/// A transaction on worker `id % 4`.
pub fn txn(id: u64, reads: Vec<ReadEvent>, writes: Vec<WriteEvent>) -> TxnEvent {
    TxnEvent {
        id,
        worker: (id % 4) as u32,
        reads,
        writes,
        split_ops: Vec::new(),
        merges: Vec::new(),
    }
}

/// One operation of a simulated transaction.
#[derive(Clone, Copy, Debug)]
pub enum Op {
    /// Read the item.
    Read(u64),
    /// Blindly overwrite the item.
    Write(u64),
    /// Read the item, then overwrite it.
    Rmw(u64),
    /// Delete the item (install a tombstone).
    Delete(u64),
}

/// Runs `txns` one after another on a single-version store and records the
/// history, in serial order. Versions come from one increasing counter;
/// a transaction's reads of items it already wrote are not recorded, and
/// repeated writes of an item inside one transaction install one version.
pub fn simulate(txns: &[Vec<Op>]) -> History {
    let mut latest: HashMap<u64, Version> = HashMap::new();
    let mut next_version: Version = 1;
    let mut history = History::new();
    for (i, ops) in txns.iter().enumerate() {
        let mut event = txn(i as u64 + 1, Vec::new(), Vec::new());
        let mut written: HashMap<u64, WriteKind> = HashMap::new();
        let mut read: Vec<u64> = Vec::new();
        for op in ops {
            let (key, reads, kind) = match *op {
                Op::Read(k) => (k, true, None),
                Op::Write(k) => (k, false, Some(WriteKind::Update)),
                Op::Rmw(k) => (k, true, Some(WriteKind::Update)),
                Op::Delete(k) => (k, false, Some(WriteKind::Delete)),
            };
            if reads && !written.contains_key(&key) && !read.contains(&key) {
                read.push(key);
                event
                    .reads
                    .push(r(key, latest.get(&key).copied().unwrap_or(0)));
            }
            if let Some(kind) = kind {
                written.insert(key, kind);
            }
        }
        let mut keys: Vec<u64> = written.keys().copied().collect();
        keys.sort_unstable();
        for key in keys {
            let prev = latest.get(&key).copied().unwrap_or(0);
            let mut write = w(key, next_version, prev);
            write.kind = written[&key];
            event.writes.push(write);
            latest.insert(key, next_version);
            next_version += 1;
        }
        history.push(event);
    }
    history
}

/// A small deterministic generator (SplitMix64) for tests that need no
/// shrinking.
pub struct Rng(pub u64);

impl Rng {
    /// The next pseudo-random 64-bit value.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `count` random transactions of 1-6 operations over `keys` keys.
pub fn random_ops(rng: &mut Rng, count: usize, keys: u64) -> Vec<Vec<Op>> {
    (0..count)
        .map(|_| {
            (0..1 + rng.below(6))
                .map(|_| {
                    let k = rng.below(keys);
                    match rng.below(10) {
                        0..=3 => Op::Read(k),
                        4..=5 => Op::Write(k),
                        6..=8 => Op::Rmw(k),
                        _ => Op::Delete(k),
                    }
                })
                .collect()
        })
        .collect()
}

/// Reorders the transactions of `h` (histories come in any order).
pub fn shuffle(h: &mut History, rng: &mut Rng) {
    for i in (1..h.txns.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        h.txns.swap(i, j);
    }
}

/// For each item, the version each version replaced.
pub fn prev_map(h: &History) -> HashMap<(Item, Version), Version> {
    h.txns
        .iter()
        .flat_map(|t| &t.writes)
        .map(|w| ((w.item, w.version), w.prev))
        .collect()
}
