//! The committed history of a P-DUR run as the `check` crate reads it: each key is one item, its
//! versions are the partition's `SC` values that wrote it, and a transaction's reads name the
//! versions it read. A write's `prev` (the version it replaced) is the next lower committed
//! version of the item, computed once the run is over, since cross-partition transactions can
//! commit out of version order.
//!
//! A recorder sees what its own replica delivers and decides. A replica restored from a snapshot
//! never delivers the requests the snapshot covers, so its recorder lacks their decisions (a
//! cross-partition transaction may then show as committed at only some of its partitions), and
//! each replica records only its own clients' read-only transactions: the cluster's history is
//! the [`HistoryRecorder::merge`] of every replica's.

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

    /// The merge of `recorders` (every replica's, for the cluster's history); see
    /// [`HistoryRecorder::merge`].
    pub fn merged<'a>(
        recorders: impl IntoIterator<Item = &'a HistoryRecorder>,
    ) -> Result<HistoryRecorder, String> {
        let mut all: Option<HistoryRecorder> = None;
        for r in recorders {
            match &mut all {
                None => {
                    let mut first = HistoryRecorder::new(r.partitions);
                    first.merge(r)?;
                    all = Some(first);
                }
                Some(all) => all.merge(r)?,
            }
        }
        all.ok_or_else(|| "no recorder to merge".to_string())
    }

    /// Adds what `other` (another replica's recorder) saw to this one. Every replica decides a
    /// transaction alike at each partition, so a decision both recorded must match: an error
    /// names the first that does not (the replicas diverged).
    pub fn merge(&mut self, other: &HistoryRecorder) -> Result<(), String> {
        for (id, req) in &other.updates {
            self.updates.entry(*id).or_insert_with(|| req.clone());
        }
        for (id, theirs) in &other.versions {
            let mine = self.versions.entry(*id).or_default();
            for &(p, v) in theirs {
                match mine.iter().find(|m| m.0 == p) {
                    Some(&(_, w)) if w != v => {
                        return Err(format!(
                            "{id:?} committed at version {w} of partition {p} on one replica and \
                             {v} on another"
                        ));
                    }
                    Some(_) => {}
                    None => mine.push((p, v)),
                }
            }
        }
        self.read_only.extend(other.read_only.iter().cloned());
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn cross(seq: u64) -> CertRequest {
        // Keys 0 and 1 fall on partitions 0 and 1 of two.
        CertRequest {
            id: TxnId { origin: 1, seq },
            snapshots: vec![(0, 1), (1, 1)],
            reads: Vec::new(),
            writes: vec![(0, vec![1]), (1, vec![2])],
        }
    }

    fn decided(rec: &mut HistoryRecorder, seq: u64, partition: u16, version: Sc) {
        rec.decided(&Decision {
            txn: TxnId { origin: 1, seq },
            partition,
            outcome: Ok(version),
            reply: partition == 0,
        });
    }

    #[test]
    fn replicas_that_each_saw_one_partition_of_a_transaction_merge_into_its_whole_commit() {
        let (mut a, mut b) = (HistoryRecorder::new(2), HistoryRecorder::new(2));
        a.broadcast(&cross(1));
        decided(&mut a, 1, 0, 5);
        b.broadcast(&cross(1));
        decided(&mut b, 1, 1, 7);
        decided(&mut b, 1, 0, 5);
        let all = HistoryRecorder::merged([&a, &b]).unwrap();
        let h = all.history(|_| true);
        assert_eq!(h.txns.len(), 1);
        let versions: Vec<u64> = h.txns[0].writes.iter().map(|w| w.version).collect();
        assert_eq!(versions, vec![5, 7]);
    }

    #[test]
    fn replicas_that_committed_a_partition_at_different_versions_do_not_merge() {
        let (mut a, mut b) = (HistoryRecorder::new(2), HistoryRecorder::new(2));
        a.broadcast(&cross(1));
        decided(&mut a, 1, 0, 5);
        decided(&mut b, 1, 0, 6);
        let err = HistoryRecorder::merged([&a, &b]).err().expect("diverged");
        assert!(err.contains("version 5 of partition 0"), "{err}");
    }
}
