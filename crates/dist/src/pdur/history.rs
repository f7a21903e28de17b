//! The committed history of a P-DUR run as the `check` crate reads it: each key is one item, its
//! versions are the partition's `SC` values that wrote it, and a transaction's reads name the
//! versions it read. A write's `prev` (the version it replaced) is the next lower committed
//! version of the item, computed once the run is over, since cross-partition transactions can
//! commit out of version order.
//!
//! A recorder sees what its own replica delivers and decides, commits and aborts alike. A
//! replica restored from a snapshot never delivers the requests the snapshot covers, so it never
//! takes their decisions either: a cross-partition transaction decided at partition `p` before
//! `p`'s image was taken, whose request the replica then delivers at partition `q`, is decided
//! here only at `q` (`p` answers `q`'s vote from the outcomes it remembers). The recorder would
//! see it committed at `q` alone — half a transaction, which is not what the replicas did. So a
//! restore hands the recorder the restored partition's remembered outcomes, with their versions
//! ([`HistoryRecorder::restored`]), and it learns from them the decisions the image covered.
//! Whatever one replica records is checked against itself and against every other
//! ([`HistoryRecorder::atomicity`], [`HistoryRecorder::merge`]): a transaction decided one way
//! at one partition and another at another, or at one partition differently on two replicas,
//! is a real disagreement, never a gap of the recorder.
//!
//! Still, a restored replica's own history is not a history on its own: transactions its images
//! covered are absent from it whole (it never saw their requests), and its clients read the
//! versions they wrote. Each replica records only its own clients' read-only transactions, too:
//! the cluster's history is the [`HistoryRecorder::merge`] of every replica's.

use rustc_hash::FxHashMap;

use super::partition::Decision;
use super::request::{CertRequest, LOAD_VERSION, PartitionId, ReadItem, Sc, TxnId, partition_of};
use crate::ramp::msg::Key;
use phasedb_check::{ABSENT, History, Item, LOADED, ReadEvent, TxnEvent, WriteEvent, WriteKind};

/// Collects decided transactions and builds the [`History`] of the committed ones.
#[derive(Default)]
pub struct HistoryRecorder {
    partitions: usize,
    updates: FxHashMap<TxnId, CertRequest>,
    /// Per transaction, its outcome at each partition that decided it: `Some(version)`
    /// committed, `None` aborted.
    outcomes: FxHashMap<TxnId, Vec<(PartitionId, Option<Sc>)>>,
    read_only: Vec<(TxnId, Vec<ReadItem>)>,
    /// Partitions restored from an image.
    restores: u64,
    /// The first decision recorded twice with two outcomes.
    conflict: Option<String>,
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
        self.note(d.txn, d.partition, d.outcome.ok());
    }

    /// Partition `p` was restored from an image that remembers `outcomes` (its
    /// [`crate::pdur::Partition::recent_outcomes`]): the decisions the image covered, which this replica will
    /// not take itself. Those it took before must match.
    pub fn restored(
        &mut self,
        p: PartitionId,
        outcomes: impl IntoIterator<Item = (TxnId, Option<Sc>)>,
    ) {
        self.restores += 1;
        for (txn, outcome) in outcomes {
            self.note(txn, p, outcome);
        }
    }

    /// Partitions restored from an image so far.
    pub fn restores(&self) -> u64 {
        self.restores
    }

    /// Records `txn`'s outcome at `p`, or the conflict with the one recorded before.
    fn note(&mut self, txn: TxnId, p: PartitionId, outcome: Option<Sc>) {
        let mine = self.outcomes.entry(txn).or_default();
        match mine.iter().find(|m| m.0 == p) {
            None => mine.push((p, outcome)),
            Some(&(_, o)) if o == outcome => {}
            Some(&(_, o)) => {
                self.conflict.get_or_insert_with(|| {
                    format!(
                        "{txn:?} decided {} and {} at partition {p}",
                        shown(o),
                        shown(outcome)
                    )
                });
            }
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
    /// transaction alike at each partition, so a decision both recorded must match, commit or
    /// abort, and at the same version: an error names the first that does not (the replicas
    /// diverged), or the first conflict either recorder found in itself.
    pub fn merge(&mut self, other: &HistoryRecorder) -> Result<(), String> {
        if let Some(c) = self.conflict.as_ref().or(other.conflict.as_ref()) {
            return Err(c.clone());
        }
        for (id, req) in &other.updates {
            self.updates.entry(*id).or_insert_with(|| req.clone());
        }
        for (id, theirs) in &other.outcomes {
            let mine = self.outcomes.entry(*id).or_default();
            for &(p, v) in theirs {
                match mine.iter().find(|m| m.0 == p) {
                    Some(&(_, w)) if w != v => {
                        return Err(format!(
                            "{id:?} decided {} at partition {p} on one replica and {} on another",
                            shown(w),
                            shown(v)
                        ));
                    }
                    Some(_) => {}
                    None => mine.push((p, v)),
                }
            }
        }
        self.restores += other.restores;
        self.read_only.extend(other.read_only.iter().cloned());
        Ok(())
    }

    /// Whether what this recorder saw is atomic: no decision recorded twice with two outcomes,
    /// no transaction committed at one partition and aborted at another, and every transaction
    /// committed somewhere whose request it saw committed at all its partitions (a restore
    /// tells the recorder the decisions its image covered, so a replica that never broke
    /// atomicity shows none half committed once its transactions are decided). The error names
    /// the first that breaks a rule. Transactions still waiting for votes (a run stopped before
    /// it quiesced) show as half committed too.
    pub fn atomicity(&self) -> Result<(), String> {
        if let Some(c) = &self.conflict {
            return Err(c.clone());
        }
        let mut ids: Vec<&TxnId> = self.outcomes.keys().collect();
        ids.sort();
        for id in ids {
            let outcomes = &self.outcomes[id];
            let committed = outcomes.iter().filter(|o| o.1.is_some()).count();
            if committed == 0 {
                continue;
            }
            if committed < outcomes.len() {
                return Err(format!(
                    "{id:?} committed at some partitions and aborted at others: {outcomes:?}"
                ));
            }
            if let Some(req) = self.updates.get(id)
                && committed != req.snapshots.len()
            {
                return Err(format!(
                    "{id:?} committed at {outcomes:?} only, of {:?}",
                    req.snapshots
                ));
            }
        }
        Ok(())
    }

    /// A read-only transaction that committed with these reads.
    pub fn read_only(&mut self, id: TxnId, reads: Vec<ReadItem>) {
        self.read_only.push((id, reads));
    }

    /// The history of committed transactions whose request this recorder saw; `loaded(key)`
    /// tells which keys were loaded. Panics with [`HistoryRecorder::atomicity`]'s error if what
    /// it saw is not atomic.
    pub fn history(&self, loaded: impl Fn(Key) -> bool) -> History {
        if let Err(e) = self.atomicity() {
            panic!("not atomic: {e}");
        }
        let initial = |k: Key| if loaded(k) { LOADED } else { ABSENT };
        let version = |v: Sc| match v {
            0 => ABSENT,
            LOAD_VERSION => LOADED,
            v => v,
        };
        let mut txns: Vec<TxnEvent> = Vec::new();
        let mut chains: FxHashMap<Key, Vec<Sc>> = FxHashMap::default();
        let mut ids: Vec<&TxnId> = self
            .outcomes
            .iter()
            .filter(|(id, o)| self.updates.contains_key(id) && o.iter().all(|o| o.1.is_some()))
            .map(|(id, _)| id)
            .collect();
        ids.sort();
        for id in ids {
            let outcomes = &self.outcomes[id];
            let req = &self.updates[id];
            let at = |k: Key| {
                let p = partition_of(k, self.partitions);
                outcomes
                    .iter()
                    .find_map(|o| (o.0 == p).then_some(o.1).flatten())
                    .expect("committed at every partition it names")
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

/// An outcome for an error message.
fn shown(o: Option<Sc>) -> String {
    match o {
        Some(v) => format!("committed at version {v}"),
        None => "aborted".into(),
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
        assert!(
            err.contains("committed at version 5 at partition 0"),
            "{err}"
        );
    }

    #[test]
    fn replicas_that_committed_and_aborted_a_partition_do_not_merge() {
        let (mut a, mut b) = (HistoryRecorder::new(2), HistoryRecorder::new(2));
        decided(&mut a, 1, 1, 5);
        b.decided(&Decision {
            txn: TxnId { origin: 1, seq: 1 },
            partition: 1,
            outcome: Err(crate::pdur::AbortReason::StaleRead),
            reply: false,
        });
        let err = HistoryRecorder::merged([&a, &b]).err().expect("diverged");
        assert!(err.contains("aborted on another"), "{err}");
    }

    #[test]
    fn a_restore_tells_the_decision_its_image_covered_so_no_transaction_shows_half_committed() {
        let mut r = HistoryRecorder::new(2);
        r.broadcast(&cross(1));
        decided(&mut r, 1, 1, 7);
        assert!(r.atomicity().unwrap_err().contains("only"), "half seen");
        r.restored(0, [(TxnId { origin: 1, seq: 1 }, Some(5))]);
        r.atomicity()
            .expect("whole once the image told partition 0's decision");
        assert_eq!(r.history(|_| true).txns.len(), 1);
        assert_eq!(r.restores(), 1);
    }

    #[test]
    fn a_restore_that_contradicts_a_decision_taken_before_is_a_conflict() {
        let mut r = HistoryRecorder::new(2);
        r.broadcast(&cross(1));
        decided(&mut r, 1, 0, 5);
        decided(&mut r, 1, 1, 7);
        r.restored(0, [(TxnId { origin: 1, seq: 1 }, None)]);
        let err = r.atomicity().unwrap_err();
        assert!(err.contains("committed at version 5 and aborted"), "{err}");
    }

    #[test]
    fn a_transaction_committed_at_one_partition_and_aborted_at_another_is_not_atomic() {
        let mut r = HistoryRecorder::new(2);
        r.broadcast(&cross(1));
        decided(&mut r, 1, 0, 5);
        r.decided(&Decision {
            txn: TxnId { origin: 1, seq: 1 },
            partition: 1,
            outcome: Err(crate::pdur::AbortReason::OtherPartition),
            reply: false,
        });
        let err = r.atomicity().unwrap_err();
        assert!(err.contains("aborted at others"), "{err}");
    }

    #[test]
    fn decisions_a_restore_covered_of_requests_never_seen_stay_out_of_the_history() {
        let mut r = HistoryRecorder::new(2);
        r.restored(0, [(TxnId { origin: 1, seq: 1 }, Some(5))]);
        r.atomicity().expect("nothing half seen");
        assert!(r.history(|_| true).txns.is_empty());
    }
}
