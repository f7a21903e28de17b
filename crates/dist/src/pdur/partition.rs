//! One logical partition of a replica (§IV): its multi-version store, snapshot counter `SC`, and the
//! deterministic termination of the transactions its broadcast delivers (Algorithm 4).
//!
//! The store is the RAMP server's multi-version store ([`crate::ramp::server::store::Store`]) with `SC`
//! as its timestamps, rather than the storage layer's tables: a partition is owned by one thread
//! (the paper's process per partition), so the single-threaded store fits as it is, and it already
//! keeps every committed version of an item in version order, the prepared versions of transactions
//! still undecided apart, and collects overwritten versions by a clock — here `SC`, so GC drops
//! exactly what no snapshot in use can read. The storage layer's tables hold one version per
//! record for concurrent engines; multiple versions would have been a third store on top of them.
//!
//! A partition is a state machine: [`Partition::deliver`] takes the next request of its broadcast,
//! [`Partition::on_vote`] another partition's vote; both report through [`Effects`]. Fed the same
//! deliveries and votes it reaches the same state whatever the timing.

mod image;

use std::collections::VecDeque;

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::certify::{AbortReason, Vote, certify};
use super::request::{CertRequest, LOAD_VERSION, PartitionId, Sc, TxnId, partition_of};
use super::snapshots::{DecidedPrefix, SnapshotsInUse};

use crate::ramp::msg::{Key, Value};
use crate::ramp::server::store::{Gone, Store};
pub use image::ImageError;

/// A vote one partition sends another for a cross-partition transaction (Algorithm 4 line 11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VoteMsg {
    /// The transaction.
    pub txn: TxnId,
    /// The voting partition.
    pub from: PartitionId,
    /// The partition it goes to.
    pub to: PartitionId,
    /// True for commit.
    pub commit: bool,
    /// Whether the receiver answers it with its own vote.
    pub kind: VoteKind,
}

/// Why a vote was sent, which decides whether its receiver answers it.
///
/// In a replica that never restarts a partition, every vote is cast once, when its sender
/// delivers the transaction, and reaches a partition that has not decided it yet. A partition
/// restored from another replica's snapshot ([`Partition::from_image`]) can break that: its
/// state may be from before or after the other partitions' (snapshots of different groups are
/// taken at different points), so a partition may wait for a vote that the other partition cast
/// before its own snapshot and will never cast again. So a restored partition *recalls* the
/// transactions it waits for (its own vote again, asking for theirs), and a partition that
/// already decided a transaction answers a vote for it from its memory of recent outcomes
/// ([`OUTCOMES_KEPT`]): its vote was commit if the outcome was commit; an abort outcome answers
/// abort, which decides the same outcome at the asker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoteKind {
    /// Cast when the sender delivered the transaction (answered only by a partition that
    /// decided it already: the sender re-delivered it after a restore).
    Cast,
    /// Sent again by a restored partition: answered by a receiver waiting for the transaction
    /// too, and by one that decided it.
    Recall,
    /// An answer to a cast or recalled vote; never answered.
    Answer,
}

/// Cross-partition outcomes a partition remembers to answer votes of restored partitions
/// ([`VoteKind`]): a rejoining replica's partitions must have snapshots within this many
/// cross-partition decisions of each other (the node takes them together).
pub const OUTCOMES_KEPT: usize = 1 << 16;

/// A transaction's outcome at one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The transaction.
    pub txn: TxnId,
    /// The partition that decided.
    pub partition: PartitionId,
    /// `Ok(version)` — committed, its writes here carry `version` — or why it aborted.
    pub outcome: Result<Sc, AbortReason>,
    /// True at the transaction's first partition, which answers the client (the others decide
    /// the same).
    pub reply: bool,
}

/// What handling one event produced: votes to send and decisions taken.
#[derive(Debug, Default)]
pub struct Effects {
    /// Votes for the other partitions of cross-partition transactions.
    pub votes: Vec<VoteMsg>,
    /// Transactions decided.
    pub decisions: Vec<Decision>,
    /// Outcomes told again ([`Answer`]).
    pub answers: Vec<Answer>,
}

/// A transaction's outcome told again at its first partition, for a copy of its request
/// delivered after the partition was restored from a snapshot that already held its decision:
/// the replica never sees that decision taken, and its client (or the session that proposed it
/// again) still waits. It changes nothing and is not part of the history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The transaction.
    pub txn: TxnId,
    /// True if it committed.
    pub committed: bool,
}

impl From<&Decision> for Answer {
    fn from(d: &Decision) -> Answer {
        Answer {
            txn: d.txn,
            committed: d.outcome.is_ok(),
        }
    }
}

/// A snapshot read's answer (Algorithm 4 line 6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadReply {
    /// The value, `None` if the key had no version in the snapshot.
    pub value: Option<Value>,
    /// The version read (0 if none).
    pub version: Sc,
    /// The snapshot read at.
    pub snapshot: Sc,
}

/// Why a read could not be served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The snapshot is above this partition's stable snapshot.
    #[error("snapshot {0} not created yet")]
    FutureSnapshot(Sc),
    /// The version the snapshot sees was collected; the transaction must restart.
    #[error("snapshot {0} is collected")]
    Collected(Sc),
    /// The key belongs to another partition.
    #[error("key of another partition")]
    WrongPartition,
}

/// Counters of a partition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartitionStats {
    /// Transactions committed here.
    pub committed: u64,
    /// Voted abort here by Algorithm 4's test.
    pub stale_reads: u64,
    /// Voted abort here by the stronger test.
    pub concurrent_conflicts: u64,
    /// Voted abort here on a snapshot not created yet.
    pub future_snapshots: u64,
    /// Voted commit here, aborted by another partition's vote.
    pub aborted_elsewhere: u64,
    /// Deliveries ignored as duplicates.
    pub duplicates: u64,
    /// Votes of restored partitions answered from the memory of outcomes.
    pub answered: u64,
    /// Votes for a transaction decided here too long ago to answer (a restored partition
    /// waits for them: its replica's snapshots were too far apart).
    pub unanswered: u64,
    /// Outcomes told again for a copy of a request decided here before ([`Answer`]).
    pub answered_again: u64,
}

/// A cross-partition transaction delivered here and waiting for the other partitions' votes.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Waiting {
    /// Its version here if it voted commit (its writes are prepared at it).
    version: Option<Sc>,
    /// Its keys written here.
    writes: SmallVec<[Key; 4]>,
    /// The other partitions it names.
    others: SmallVec<[PartitionId; 4]>,
    /// The partitions whose vote is still missing.
    missing: SmallVec<[PartitionId; 4]>,
    /// False once any vote (its own included) is abort.
    commit: bool,
    /// The first vote to abort, if any.
    reason: Option<AbortReason>,
    /// True at the transaction's first partition.
    reply: bool,
}

impl Waiting {
    /// Counts the first vote of partition `from`; later ones (from a duplicate delivery there)
    /// and votes from partitions the transaction does not name are ignored.
    fn count(&mut self, from: PartitionId, commit: bool) {
        let Some(i) = self.missing.iter().position(|&q| q == from) else {
            return;
        };
        self.missing.swap_remove(i);
        if !commit && self.commit {
            self.commit = false;
            self.reason = Some(AbortReason::OtherPartition);
        }
    }
}

/// A client's last transaction delivered at a partition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Last {
    seq: u64,
    /// `Some(committed)` once decided here.
    outcome: Option<bool>,
}

/// One logical partition.
pub struct Partition {
    id: PartitionId,
    partitions: usize,
    strong: bool,
    store: Store,
    sc: Sc,
    decided: DecidedPrefix,
    in_use: SnapshotsInUse,
    waiting: FxHashMap<TxnId, Waiting>,
    /// Votes that arrived before this partition delivered their transaction.
    early: FxHashMap<TxnId, SmallVec<[(PartitionId, bool); 2]>>,
    /// Per client, the highest sequence number delivered here (duplicates are ignored) and
    /// that transaction's outcome once decided.
    last_seq: FxHashMap<u32, Last>,
    /// Recent cross-partition outcomes here (`Some(version)`: committed at it; `None`:
    /// aborted), oldest first in `outcome_order`.
    outcomes: FxHashMap<TxnId, Option<Sc>>,
    outcome_order: VecDeque<TxnId>,
    deliveries: u64,
    stats: PartitionStats,
}

/// Deliveries between two version collections.
const GC_EVERY: u64 = 1024;

impl Partition {
    /// Partition `id` of `partitions`, empty, with the stronger certification test.
    pub fn new(id: PartitionId, partitions: usize) -> Partition {
        Partition {
            id,
            partitions,
            strong: true,
            store: Store::new(0),
            sc: LOAD_VERSION,
            decided: DecidedPrefix::default(),
            in_use: SnapshotsInUse::default(),
            waiting: FxHashMap::default(),
            early: FxHashMap::default(),
            last_seq: FxHashMap::default(),
            outcomes: FxHashMap::default(),
            outcome_order: VecDeque::new(),
            deliveries: 0,
            stats: PartitionStats::default(),
        }
    }

    /// Turns the stronger test of §V off: Algorithm 4's test alone, which independent broadcasts
    /// make unsafe. Only for showing the anomaly it prevents.
    pub fn without_stronger_test(mut self) -> Partition {
        self.strong = false;
        self
    }

    /// This partition's id.
    pub fn id(&self) -> PartitionId {
        self.id
    }

    /// Loads `key` with `value` at [`LOAD_VERSION`] before any transaction.
    pub fn load(&mut self, key: Key, value: Value) {
        debug_assert_eq!(partition_of(key, self.partitions), self.id);
        self.store.put(key, LOAD_VERSION, value, LOAD_VERSION);
    }

    /// The snapshot counter `SC`.
    pub fn sc(&self) -> Sc {
        self.sc
    }

    /// The newest snapshot a transaction may read: every version up to it is decided.
    pub fn stable(&self) -> Sc {
        self.decided.stable(self.sc)
    }

    /// Counters.
    pub fn stats(&self) -> PartitionStats {
        self.stats
    }

    /// Cross-partition transactions waiting for votes here.
    pub fn undecided(&self) -> usize {
        self.waiting.len()
    }

    /// The cross-partition transactions waiting here and the partitions whose vote they lack: a
    /// broadcast layer that suspects a partial broadcast re-broadcasts them there.
    pub fn waiting_for_votes(&self) -> impl Iterator<Item = (TxnId, &[PartitionId])> + '_ {
        self.waiting.iter().map(|(id, w)| (*id, &w.missing[..]))
    }

    /// Snapshots handed out and not released yet.
    pub fn snapshots_in_use(&self) -> usize {
        self.in_use.len()
    }

    /// Versions held by the store (GC keeps this bounded).
    pub fn versions(&self) -> usize {
        self.store.stats().versions
    }

    /// Snapshot read (Algorithm 4 lines 3–6): the most recent version of `key` at most `st`; with
    /// no snapshot yet, the stable one, which stays in use until [`Partition::release`].
    pub fn read(&mut self, key: Key, st: Option<Sc>) -> Result<ReadReply, ReadError> {
        if partition_of(key, self.partitions) != self.id {
            return Err(ReadError::WrongPartition);
        }
        let st = match st {
            Some(st) if st > self.stable() => return Err(ReadError::FutureSnapshot(st)),
            Some(st) => st,
            None => {
                let st = self.stable();
                self.in_use.acquire(st);
                st
            }
        };
        match self.store.at_or_below(key, st) {
            Ok(found) => Ok(ReadReply {
                value: found.map(|(_, v)| v.clone()),
                version: found.map_or(0, |(ts, _)| ts),
                snapshot: st,
            }),
            Err(Gone) => Err(ReadError::Collected(st)),
        }
    }

    /// Takes the stable snapshot for a transaction that writes here without reading (it stays in
    /// use until [`Partition::release`]).
    pub fn take_snapshot(&mut self) -> Sc {
        let st = self.stable();
        self.in_use.acquire(st);
        st
    }

    /// A transaction is done with snapshot `st` here.
    pub fn release(&mut self, st: Sc) {
        self.in_use.release(st);
    }

    /// Whether a read-only transaction's reads here, at snapshot `st`, are still the newest
    /// versions counting every transaction that voted commit here: what lets a cross-partition
    /// read-only transaction commit without broadcast ([`crate::pdur::client`]).
    pub fn reads_current(&self, keys: impl IntoIterator<Item = Key>, st: Sc) -> bool {
        keys.into_iter().all(|k| self.store.marks(k).0 <= st)
    }

    /// Delivers the next request of this partition's broadcast (Algorithm 4 line 7). The request
    /// must name this partition (the caller checks, see [`crate::pdur::Replica::deliver`]).
    pub fn deliver(&mut self, req: CertRequest, fx: &mut Effects) {
        debug_assert!(req.snapshot(self.id).is_some());
        let seen = self.last_seq.entry(req.id.origin).or_default();
        if req.id.seq <= seen.seq {
            // Delivered here before, or stale: its client moved on, so this partition will never
            // certify it. Either way nothing changes here; a cross-partition one gets an abort
            // vote, so partitions that delivered it and wait for this one's vote can decide (a
            // partition counts only the first vote of each other partition, so a true duplicate
            // changes nothing there). Re-broadcasting a request to the partitions that have not
            // voted is therefore always safe: what a lost or partial broadcast needs. A
            // transaction decided here votes its outcome instead: a partition restored from an
            // earlier snapshot may still wait for this one's vote.
            self.stats.duplicates += 1;
            if req.id.seq == seen.seq
                && req.snapshots[0].0 == self.id
                && let Some(committed) = seen.outcome
            {
                self.stats.answered_again += 1;
                fx.answers.push(Answer {
                    txn: req.id,
                    committed,
                });
            }
            if req.is_cross_partition() && !self.waiting.contains_key(&req.id) {
                let commit = matches!(self.outcomes.get(&req.id), Some(Some(_)));
                for to in req.partitions().filter(|&q| q != self.id) {
                    fx.votes.push(VoteMsg {
                        txn: req.id,
                        from: self.id,
                        to,
                        commit,
                        kind: VoteKind::Cast,
                    });
                }
            }
            return;
        }
        *seen = Last {
            seq: req.id.seq,
            outcome: None,
        };
        self.deliveries += 1;
        if self.deliveries.is_multiple_of(GC_EVERY) {
            self.collect();
        }
        let vote = certify(
            &self.store,
            &req,
            self.id,
            self.partitions,
            self.sc,
            self.strong,
        );
        match vote {
            Vote::Abort(AbortReason::StaleRead) => self.stats.stale_reads += 1,
            Vote::Abort(AbortReason::ConcurrentConflict) => self.stats.concurrent_conflicts += 1,
            Vote::Abort(AbortReason::FutureSnapshot) => self.stats.future_snapshots += 1,
            _ => {}
        }
        let reply = req.snapshots[0].0 == self.id;
        if !req.is_cross_partition() {
            let outcome = match vote {
                Vote::Commit => {
                    let v = self.next_version(&req);
                    for (key, value) in req.writes {
                        self.store.install_newest(key, v, value, v);
                    }
                    self.stats.committed += 1;
                    Ok(v)
                }
                Vote::Abort(r) => Err(r),
            };
            self.note_outcome(req.id, outcome.is_ok());
            fx.decisions.push(Decision {
                txn: req.id,
                partition: self.id,
                outcome,
                reply,
            });
            return;
        }
        // Cross-partition: vote, prepare, and wait for the others (Algorithm 4 lines 9–14).
        let commit = vote == Vote::Commit;
        for to in req.partitions().filter(|&q| q != self.id) {
            fx.votes.push(VoteMsg {
                txn: req.id,
                from: self.id,
                to,
                commit,
                kind: VoteKind::Cast,
            });
        }
        let version = commit.then(|| self.next_version(&req));
        let others: SmallVec<[PartitionId; 4]> =
            req.partitions().filter(|&q| q != self.id).collect();
        let mut writes = SmallVec::new();
        for (key, value) in req.writes {
            if partition_of(key, self.partitions) == self.id {
                writes.push(key);
                if let Some(v) = version {
                    self.store
                        .prepare(key, v, value, crate::ramp::msg::Meta::None, 0);
                }
            }
        }
        if let Some(v) = version {
            self.decided.hold(v);
        }
        let mut w = Waiting {
            version,
            writes,
            missing: others.clone(),
            others,
            commit,
            reason: match vote {
                Vote::Abort(r) => Some(r),
                Vote::Commit => None,
            },
            reply,
        };
        for (from, c) in self.early.remove(&req.id).unwrap_or_default() {
            w.count(from, c);
        }
        if w.missing.is_empty() {
            self.finish(req.id, w, fx);
        } else {
            self.waiting.insert(req.id, w);
        }
    }

    /// Another partition's vote (Algorithm 4 line 12). A vote for a transaction not delivered here
    /// yet waits for it.
    pub fn on_vote(&mut self, vote: VoteMsg, fx: &mut Effects) {
        debug_assert_eq!(vote.to, self.id);
        let Some(w) = self.waiting.get_mut(&vote.txn) else {
            if self
                .last_seq
                .get(&vote.txn.origin)
                .is_some_and(|l| l.seq >= vote.txn.seq)
            {
                // Delivered here before (and decided, or refused as stale): the sender votes
                // again after a restore and may wait for this partition's vote.
                self.answer_decided(vote, fx);
            } else {
                self.early
                    .entry(vote.txn)
                    .or_default()
                    .push((vote.from, vote.commit));
            }
            return;
        };
        if vote.kind == VoteKind::Recall {
            fx.votes.push(VoteMsg {
                txn: vote.txn,
                from: self.id,
                to: vote.from,
                commit: w.version.is_some(),
                kind: VoteKind::Answer,
            });
        }
        w.count(vote.from, vote.commit);
        if w.missing.is_empty() {
            let w = self.waiting.remove(&vote.txn).expect("just found");
            self.finish(vote.txn, w, fx);
        }
    }

    /// Votes again, asking for an answer ([`VoteKind::Recall`]), for every transaction waiting
    /// here: to all its other partitions, or only to `to`. What a partition restored from a
    /// snapshot does, and what the others do towards it.
    pub fn recall(&self, to: Option<PartitionId>, fx: &mut Effects) {
        for (&txn, w) in &self.waiting {
            for &q in w.others.iter().filter(|&&q| to.is_none_or(|t| t == q)) {
                fx.votes.push(VoteMsg {
                    txn,
                    from: self.id,
                    to: q,
                    commit: w.version.is_some(),
                    kind: VoteKind::Recall,
                });
            }
        }
    }

    /// Answers a vote for a transaction this partition no longer waits for, from its memory of
    /// outcomes ([`VoteKind`]).
    fn answer_decided(&mut self, vote: VoteMsg, fx: &mut Effects) {
        if vote.kind == VoteKind::Answer {
            return;
        }
        match self.outcomes.get(&vote.txn) {
            Some(&outcome) => {
                self.stats.answered += 1;
                fx.votes.push(VoteMsg {
                    txn: vote.txn,
                    from: self.id,
                    to: vote.from,
                    commit: outcome.is_some(),
                    kind: VoteKind::Answer,
                });
            }
            None => self.stats.unanswered += 1,
        }
    }

    fn note_outcome(&mut self, txn: TxnId, committed: bool) {
        if let Some(l) = self.last_seq.get_mut(&txn.origin)
            && l.seq == txn.seq
        {
            l.outcome = Some(committed);
        }
    }

    /// The outcome here of `txn` if it is its client's last transaction delivered here and is
    /// decided (`Some(true)`: committed): what a copy of that request delivered again is
    /// answered with ([`Answer`]).
    pub fn outcome_of(&self, txn: TxnId) -> Option<bool> {
        self.last_seq
            .get(&txn.origin)
            .filter(|l| l.seq == txn.seq)
            .and_then(|l| l.outcome)
    }

    /// The cross-partition outcomes this partition remembers ([`OUTCOMES_KEPT`] at most),
    /// oldest first: `Some(version)` committed here at `version`, `None` aborted. A partition
    /// restored from an image remembers the image's, so a history recorder learns from them
    /// the decisions the image covered ([`crate::pdur::history::HistoryRecorder::restored`]).
    pub fn recent_outcomes(&self) -> impl Iterator<Item = (TxnId, Option<Sc>)> + '_ {
        self.outcome_order
            .iter()
            .filter_map(|t| self.outcomes.get(t).map(|&o| (*t, o)))
    }

    /// Remembers a cross-partition outcome for [`Partition::answer_decided`].
    fn remember(&mut self, txn: TxnId, outcome: Option<Sc>) {
        if self.outcomes.insert(txn, outcome).is_none() {
            self.outcome_order.push_back(txn);
        }
        while self.outcome_order.len() > OUTCOMES_KEPT {
            if let Some(old) = self.outcome_order.pop_front() {
                self.outcomes.remove(&old);
            }
        }
    }

    /// Applies or discards a cross-partition transaction's writes once every vote is in
    /// (Algorithm 4 lines 13–16).
    fn finish(&mut self, txn: TxnId, w: Waiting, fx: &mut Effects) {
        let outcome = match (w.version, w.commit) {
            (Some(v), true) => {
                for &key in &w.writes {
                    self.store.commit(key, v, 0, self.sc);
                }
                self.stats.committed += 1;
                Ok(v)
            }
            (version, _) => {
                if let Some(v) = version {
                    self.stats.aborted_elsewhere += 1;
                    for &key in &w.writes {
                        self.store.discard(key, v);
                    }
                }
                Err(w.reason.unwrap_or(AbortReason::OtherPartition))
            }
        };
        if let Some(v) = w.version {
            self.decided.release(v);
        }
        self.remember(txn, outcome.ok());
        self.note_outcome(txn, outcome.is_ok());
        fx.decisions.push(Decision {
            txn,
            partition: self.id,
            outcome,
            reply: w.reply,
        });
    }

    /// `SC ← SC + 1` for a transaction that passed certification (Algorithm 4 line 23), marking
    /// what it read here for the stronger test of later transactions.
    fn next_version(&mut self, req: &CertRequest) -> Sc {
        self.sc += 1;
        let v = self.sc;
        if self.partitions > 1 {
            for r in &req.reads {
                if partition_of(r.key, self.partitions) == self.id {
                    self.store.mark_read(r.key, v);
                }
            }
        }
        v
    }

    /// Drops versions below the oldest snapshot in use (or the stable one, if none is).
    pub fn collect(&mut self) {
        let stable = self.stable();
        let oldest = self.in_use.oldest().map_or(stable, |o| o.min(stable));
        self.store.collect(oldest);
    }

    /// A digest of the partition's committed state: every item's newest version and value,
    /// combined so that the order items were written in does not matter. Replicas fed the same
    /// deliveries have equal digests once no transaction waits for votes.
    pub fn digest(&self) -> u64 {
        let mut sum = 0u64;
        self.store.for_each_latest(|key, ts, value| {
            let mut h = mix(key ^ mix(ts));
            for chunk in value.chunks(8) {
                let mut word = [0u8; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                h = mix(h ^ u64::from_le_bytes(word));
            }
            sum = sum.wrapping_add(mix(h ^ value.len() as u64));
        });
        sum ^ mix(self.sc)
    }
}

/// A 64-bit finaliser (splitmix64's).
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}
