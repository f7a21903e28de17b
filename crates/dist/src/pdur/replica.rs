//! A P-DUR replica driven from one thread: its partitions, fed per partition by the delivered
//! sequences of their broadcasts, with the votes of cross-partition transactions exchanged
//! in-process through a queue. Deterministic: tests choose the interleaving of deliveries and
//! votes, and the threaded replica ([`crate::pdur::threaded`]) runs the same partitions.
//!
//! DUR (Algorithms 1–2) is this replica with one partition.

use std::collections::VecDeque;

use super::client::SnapshotSource;
use super::partition::{Answer, Decision, Effects, Partition, ReadError, ReadReply, VoteMsg};
use super::request::{CertRequest, PartitionId, RequestError, Sc, partition_of};
use crate::ramp::msg::{Key, Value};

/// A replica of `P` logical partitions.
pub struct Replica {
    parts: Vec<Partition>,
    votes: VecDeque<VoteMsg>,
    decisions: Vec<Decision>,
    answers: Vec<Answer>,
    fx: Effects,
}

impl Replica {
    /// An empty replica of `partitions` partitions (1 for DUR).
    pub fn new(partitions: usize) -> Replica {
        assert!(
            (1..=PartitionId::MAX as usize).contains(&partitions),
            "1 to 65535 partitions"
        );
        Replica {
            parts: (0..partitions)
                .map(|p| Partition::new(p as PartitionId, partitions))
                .collect(),
            votes: VecDeque::new(),
            decisions: Vec::new(),
            answers: Vec::new(),
            fx: Effects::default(),
        }
    }

    /// The same replica with §V's stronger test off (to show the anomaly it prevents).
    pub fn without_stronger_test(self) -> Replica {
        Replica {
            parts: self
                .parts
                .into_iter()
                .map(Partition::without_stronger_test)
                .collect(),
            ..self
        }
    }

    /// The number of partitions.
    pub fn partitions(&self) -> usize {
        self.parts.len()
    }

    /// Partition `p`.
    pub fn partition(&self, p: PartitionId) -> &Partition {
        &self.parts[p as usize]
    }

    /// Partition `p`, mutably.
    pub fn partition_mut(&mut self, p: PartitionId) -> &mut Partition {
        &mut self.parts[p as usize]
    }

    /// Loads an item before any transaction.
    pub fn load(&mut self, key: Key, value: Value) {
        let p = partition_of(key, self.parts.len());
        self.parts[p as usize].load(key, value);
    }

    /// `deliver(partition, payload)`: the next payload partition `p`'s atomic broadcast
    /// delivered, an encoded [`CertRequest`]. A payload that does not decode, breaks a rule or
    /// does not name `p` is refused with the reason and changes nothing (every replica refuses
    /// the same bytes). Votes it produces for other partitions are queued
    /// ([`Replica::step_vote`]).
    pub fn deliver(&mut self, p: PartitionId, payload: &[u8]) -> Result<(), RequestError> {
        let req = CertRequest::decode(payload, self.parts.len())?;
        self.deliver_request(p, req)
    }

    /// [`Replica::deliver`] of a request already decoded (it is validated again).
    pub fn deliver_request(
        &mut self,
        p: PartitionId,
        req: CertRequest,
    ) -> Result<(), RequestError> {
        req.validate(self.parts.len())?;
        if p as usize >= self.parts.len() || req.snapshot(p).is_none() {
            return Err(RequestError::WrongPartition(p));
        }
        self.parts[p as usize].deliver(req, &mut self.fx);
        self.absorb();
        Ok(())
    }

    /// Replaces partition `p` with `part` (a state transfer, [`Partition::from_image`]). The
    /// restored partition recalls the transactions it waits for and the others recall theirs
    /// that name it ([`super::partition::VoteKind`]): votes cast before the snapshots of the
    /// two partitions were taken are not cast again.
    pub fn restore(&mut self, p: PartitionId, part: Partition) {
        self.parts[p as usize] = part;
        for q in 0..self.parts.len() {
            let to = (q != p as usize).then_some(p);
            self.parts[q].recall(to, &mut self.fx);
        }
        self.absorb();
    }

    /// Votes sent and not yet received.
    pub fn queued_votes(&self) -> usize {
        self.votes.len()
    }

    /// Hands the `i`-th queued vote to its partition; false if there is none.
    pub fn step_vote_at(&mut self, i: usize) -> bool {
        let Some(v) = self.votes.remove(i) else {
            return false;
        };
        self.parts[v.to as usize].on_vote(v, &mut self.fx);
        self.absorb();
        true
    }

    /// Hands the oldest queued vote to its partition; false if there is none.
    pub fn step_vote(&mut self) -> bool {
        self.step_vote_at(0)
    }

    /// Exchanges votes until none is queued.
    pub fn settle(&mut self) {
        while self.step_vote() {}
    }

    fn absorb(&mut self) {
        self.votes.extend(self.fx.votes.drain(..));
        self.decisions.append(&mut self.fx.decisions);
        self.answers.append(&mut self.fx.answers);
    }

    /// The decisions taken since the last call (one per partition a transaction touched).
    pub fn take_decisions(&mut self) -> Vec<Decision> {
        std::mem::take(&mut self.decisions)
    }

    /// The outcomes told again since the last call ([`Answer`]).
    pub fn take_answers(&mut self) -> Vec<Answer> {
        std::mem::take(&mut self.answers)
    }

    /// Each partition's digest ([`Partition::digest`]).
    pub fn digests(&self) -> Vec<u64> {
        self.parts.iter().map(Partition::digest).collect()
    }
}

impl SnapshotSource for Replica {
    fn partitions(&self) -> usize {
        self.parts.len()
    }

    fn read(&mut self, p: PartitionId, key: Key, st: Option<Sc>) -> Result<ReadReply, ReadError> {
        self.parts[p as usize].read(key, st)
    }

    fn take_snapshot(&mut self, p: PartitionId) -> Sc {
        self.parts[p as usize].take_snapshot()
    }

    fn release(&mut self, p: PartitionId, st: Sc) {
        self.parts[p as usize].release(st);
    }

    fn reads_current(&mut self, p: PartitionId, keys: &[Key], st: Sc) -> bool {
        self.parts[p as usize].reads_current(keys.iter().copied(), st)
    }
}
