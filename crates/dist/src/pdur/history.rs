//! The committed history of a P-DUR run as the `check` crate reads it: each key is one item, its
//! versions are the partition's `SC` values that wrote it, and a transaction's reads name the
//! versions it read. A write's `prev` (the version it replaced) is the next lower committed
//! version of the item, computed once the run is over, since cross-partition transactions can
//! commit out of version order.

use rustc_hash::FxHashMap;

use super::partition::Decision;
use super::request::{CertRequest, LOAD_VERSION, ReadItem, Sc, TxnId, partition_of};
use crate::ramp::msg::Key;
use phasedb_check::{ABSENT, History, Item, LOADED, ReadEvent, TxnEvent, WriteEvent, WriteKind};

/// Collects committed transactions and builds their [`History`].
#[derive(Default)]
pub struct HistoryRecorder {
    partitions: usize,
    updates: FxHashMap<TxnId, CertRequest>,
    versions: FxHashMap<TxnId, Vec<(u16, Sc)>>,
    read_only: Vec<(TxnId, Vec<ReadItem>)>,
}

impl HistoryRecorder {
    /// A recorder for a replica of `partitions` partitions.
    pub fn new(partitions: usize) -> HistoryRecorder {
        HistoryRecorder {
            partitions,
            ..HistoryRecorder::default()
        }
    }

    /// An update transaction broadcast (committed or not).
    pub fn broadcast(&mut self, req: &CertRequest) {
        self.updates.insert(req.id, req.clone());
    }

    /// A decision of some partition.
    pub fn decided(&mut self, d: &Decision) {
        if let Ok(v) = d.outcome {
            self.versions
                .entry(d.txn)
                .or_default()
                .push((d.partition, v));
        }
    }

    /// A read-only transaction that committed with these reads.
    pub fn read_only(&mut self, id: TxnId, reads: Vec<ReadItem>) {
        self.read_only.push((id, reads));
    }

    /// The history of committed transactions; `loaded(key)` tells which keys were loaded. Panics
    /// if a transaction committed at some but not all of its partitions (atomicity broken).
    pub fn history(&self, loaded: impl Fn(Key) -> bool) -> History {
        let initial = |k: Key| if loaded(k) { LOADED } else { ABSENT };
        let version = |v: Sc| match v {
            0 => ABSENT,
            LOAD_VERSION => LOADED,
            v => v,
        };
        let mut txns: Vec<TxnEvent> = Vec::new();
        let mut chains: FxHashMap<Key, Vec<Sc>> = FxHashMap::default();
        let mut ids: Vec<&TxnId> = self.versions.keys().collect();
        ids.sort();
        for id in ids {
            let versions = &self.versions[id];
            let req = &self.updates[id];
            assert_eq!(
                versions.len(),
                req.snapshots.len(),
                "{id:?} committed at {versions:?} of {:?}",
                req.snapshots
            );
            let at = |k: Key| {
                let p = partition_of(k, self.partitions);
                versions
                    .iter()
                    .find(|v| v.0 == p)
                    .expect("committed there")
                    .1
            };
            for (k, _) in &req.writes {
                chains.entry(*k).or_default().push(at(*k));
            }
            txns.push(TxnEvent {
                id: txns.len() as u64,
                worker: id.origin,
                reads: reads(&req.reads, version),
                writes: req
                    .writes
                    .iter()
                    .map(|(k, _)| WriteEvent {
                        item: Item::new(0, *k),
                        version: at(*k),
                        prev: 0,
                        kind: WriteKind::Update,
                    })
                    .collect(),
                split_ops: Vec::new(),
                merges: Vec::new(),
            });
        }
        for chain in chains.values_mut() {
            chain.sort_unstable();
        }
        for t in &mut txns {
            for w in &mut t.writes {
                let chain = &chains[&w.item.key];
                let i = chain.binary_search(&w.version).expect("in its chain");
                w.prev = if i == 0 {
                    initial(w.item.key)
                } else {
                    chain[i - 1]
                };
                if w.prev == ABSENT {
                    w.kind = WriteKind::Insert;
                }
            }
        }
        for (id, r) in &self.read_only {
            txns.push(TxnEvent {
                id: txns.len() as u64,
                worker: id.origin,
                reads: reads(r, version),
                writes: Vec::new(),
                split_ops: Vec::new(),
                merges: Vec::new(),
            });
        }
        History { txns }
    }
}

fn reads(r: &[ReadItem], version: impl Fn(Sc) -> u64) -> Vec<ReadEvent> {
    r.iter()
        .map(|r| ReadEvent {
            item: Item::new(0, r.key),
            version: version(r.version),
        })
        .collect()
}
