//! [`Broadcast`]: every group member of one node, multiplexed by group id, with one queue of
//! outgoing messages and one queue of deliveries for the node to drain.

use std::collections::VecDeque;
use std::collections::btree_map::{BTreeMap, Entry};

use bytes::Bytes;
use phasedb_net::{Addr, Transport};

use crate::broadcast::config::BroadcastConfig;
use crate::broadcast::error::BroadcastError;
use crate::broadcast::group::{Group, GroupStats};
use crate::broadcast::wire::GroupMsg;
use crate::broadcast::{Delivery, GroupId, SnapshotSource};

/// The broadcast groups one node belongs to (P-DUR: one per logical partition), driven sans-I/O:
/// the node feeds it proposals, messages and clock ticks, then sends [`Broadcast::drain_outgoing`]
/// and applies [`Broadcast::drain_deliveries`].
pub struct Broadcast {
    me: Addr,
    cfg: BroadcastConfig,
    groups: BTreeMap<GroupId, Group>,
    outgoing: Vec<(Addr, GroupMsg)>,
    deliveries: VecDeque<Delivery>,
}

impl Broadcast {
    /// The broadcast of node `me`, with no group yet.
    pub fn new(me: Addr, cfg: BroadcastConfig) -> Result<Broadcast, BroadcastError> {
        cfg.validate()?;
        Ok(Broadcast {
            me,
            cfg,
            groups: BTreeMap::new(),
            outgoing: Vec::new(),
            deliveries: VecDeque::new(),
        })
    }

    /// This node's address.
    pub fn me(&self) -> Addr {
        self.me
    }

    /// Joins group `group`, whose members are `members` (the same list on every member, this
    /// node among them).
    pub fn add_group(&mut self, group: GroupId, members: &[Addr]) -> Result<(), BroadcastError> {
        match self.groups.entry(group) {
            Entry::Occupied(_) => Err(BroadcastError::DuplicateGroup(group)),
            Entry::Vacant(v) => {
                v.insert(Group::new(group, self.me, members, self.cfg.clone())?);
                Ok(())
            }
        }
    }

    /// Joins group `group` after this node restarted without its storage (a process that died):
    /// the member asks the leader to admit it under raft id `member_id(me, incarnation)` in place of
    /// its old one, then catches up by snapshot and log; its deliveries start over with a
    /// `Restore` or from the first payload. `incarnation` (above 0) must differ from every earlier
    /// one of this node, e.g. a restart count or the start time in seconds.
    pub fn join_group(
        &mut self,
        group: GroupId,
        members: &[Addr],
        incarnation: u32,
    ) -> Result<(), BroadcastError> {
        match self.groups.entry(group) {
            Entry::Occupied(_) => Err(BroadcastError::DuplicateGroup(group)),
            Entry::Vacant(v) => {
                v.insert(Group::joining(
                    group,
                    self.me,
                    members,
                    self.cfg.clone(),
                    incarnation,
                )?);
                Ok(())
            }
        }
    }

    /// The member of `group`.
    pub fn group(&self, group: GroupId) -> Option<&Group> {
        self.groups.get(&group)
    }

    fn member(&mut self, group: GroupId) -> Result<&mut Group, BroadcastError> {
        self.groups
            .get_mut(&group)
            .ok_or(BroadcastError::UnknownGroup(group))
    }

    /// Ids of the groups this node belongs to.
    pub fn groups(&self) -> impl Iterator<Item = GroupId> + '_ {
        self.groups.keys().copied()
    }

    /// Broadcasts `payload` in `group`: it is batched with other proposals of this node and, once
    /// its entry commits, delivered by every member of the group in the same position. At a
    /// follower the batch is forwarded to the leader; with no leader known it waits for one.
    pub fn propose(&mut self, group: GroupId, payload: &[u8]) -> Result<(), BroadcastError> {
        let g = self
            .groups
            .get_mut(&group)
            .ok_or(BroadcastError::UnknownGroup(group))?;
        g.propose(payload, &mut self.outgoing, &mut self.deliveries)
    }

    /// Proposes every group's gathered payloads now instead of waiting for a tick or for a batch
    /// in flight to be delivered.
    pub fn flush(&mut self) {
        for g in self.groups.values_mut() {
            g.flush_now(&mut self.outgoing, &mut self.deliveries);
        }
    }

    /// Handles a message from node `from`; a message that does not decode or does not belong is
    /// refused with an error and changes nothing.
    pub fn step(&mut self, from: Addr, msg: &GroupMsg) -> Result<(), BroadcastError> {
        let group = msg.group();
        let g = self
            .groups
            .get_mut(&group)
            .ok_or(BroadcastError::UnknownGroup(group))?;
        match msg {
            GroupMsg::Raft { raft, .. } => {
                let raft = raft.decode().map_err(|e| BroadcastError::Decode {
                    group,
                    from,
                    reason: e.to_string(),
                })?;
                g.step(from, raft, &mut self.outgoing, &mut self.deliveries)
            }
            GroupMsg::Join { id, .. } => {
                g.join(from, *id, &mut self.outgoing, &mut self.deliveries)
            }
            GroupMsg::Chunk(c) => g.step_chunk(from, c, &mut self.outgoing, &mut self.deliveries),
        }
    }

    /// Advances every group's clock to `now` (ns of the transport's clock): elections,
    /// heartbeats, expiry of lost batches, and proposal of what was gathered.
    pub fn tick(&mut self, now: u64) {
        for g in self.groups.values_mut() {
            g.tick(now, &mut self.outgoing, &mut self.deliveries);
        }
    }

    /// Messages to send, with their destination, oldest first.
    pub fn drain_outgoing(&mut self) -> std::vec::Drain<'_, (Addr, GroupMsg)> {
        self.outgoing.drain(..)
    }

    /// Sends every outgoing message through `net`, wrapped into the node's message type.
    pub fn send_all<M, T: Transport<M>>(&mut self, net: &mut T, wrap: impl Fn(GroupMsg) -> M) {
        for (to, msg) in self.outgoing.drain(..) {
            net.send(to, wrap(msg));
        }
    }

    /// Deliveries in order: per group, payloads in the group's total order, each exactly once per
    /// incarnation of this node, and a state to restore before the payloads that follow it.
    pub fn drain_deliveries(&mut self) -> std::collections::vec_deque::Drain<'_, Delivery> {
        self.deliveries.drain(..)
    }

    /// The next delivery, if any.
    pub fn next_delivery(&mut self) -> Option<Delivery> {
        self.deliveries.pop_front()
    }

    /// The leader of `group` as this node knows it: where its proposals go.
    pub fn leader(&self, group: GroupId) -> Option<Addr> {
        self.groups.get(&group).and_then(Group::leader)
    }

    /// Number of the last payload of `group` delivered here (0 before the first).
    pub fn delivered(&self, group: GroupId) -> Option<u64> {
        self.groups.get(&group).map(Group::delivered)
    }

    /// Groups whose application state should be snapshotted ([`Broadcast::offer_snapshot`]).
    pub fn snapshots_due(&self) -> impl Iterator<Item = GroupId> + '_ {
        self.groups
            .iter()
            .filter(|(_, g)| g.snapshot_due())
            .map(|(&id, _)| id)
    }

    /// Records the application's state of `group`, reflecting every payload up to `index`, as
    /// the group's snapshot; the log behind it is compacted, and members too far behind receive
    /// it (state transfer). Returns false when it is not newer than the snapshot held.
    pub fn offer_snapshot(
        &mut self,
        group: GroupId,
        index: u64,
        state: Vec<u8>,
    ) -> Result<bool, BroadcastError> {
        self.member(group)?
            .offer_snapshot(index, Bytes::from(state))
    }

    /// Asks `app` for the state of every group whose snapshot is due and records it.
    pub fn take_snapshots(&mut self, app: &mut impl SnapshotSource) -> Result<(), BroadcastError> {
        let due: Vec<GroupId> = self.snapshots_due().collect();
        for group in due {
            let (index, state) = app.snapshot(group);
            self.offer_snapshot(group, index, state)?;
        }
        Ok(())
    }

    /// The node crashed and restarts: each member keeps only its storage (hard state, log,
    /// snapshot) and rebuilds raft from it; gathered proposals, messages not yet sent and
    /// deliveries not yet drained are lost. The application restarts empty: the deliveries start
    /// over with each group's snapshot ([`Delivery::Restore`], an empty state at index 0 when there
    /// is none) and the entries after it.
    pub fn restart(&mut self) -> Result<(), BroadcastError> {
        self.outgoing.clear();
        self.deliveries.clear();
        for g in self.groups.values_mut() {
            g.restart(&mut self.deliveries)?;
        }
        Ok(())
    }

    /// Counters of every group, summed.
    pub fn stats(&self) -> GroupStats {
        let mut t = GroupStats::default();
        for g in self.groups.values() {
            let s = g.stats();
            t.proposed_batches += s.proposed_batches;
            t.proposed_payloads += s.proposed_payloads;
            t.dropped_batches += s.dropped_batches;
            t.expired_batches += s.expired_batches;
            t.delivered += s.delivered;
            t.undecodable_entries += s.undecodable_entries;
            t.snapshots_taken += s.snapshots_taken;
            t.snapshots_installed += s.snapshots_installed;
            t.refused_messages += s.refused_messages;
            t.configuration_changes += s.configuration_changes;
            t.raft_panics += s.raft_panics;
            t.snapshot_chunks_sent += s.snapshot_chunks_sent;
            t.snapshot_chunks_received += s.snapshot_chunks_received;
            t.snapshots_assembled += s.snapshots_assembled;
            t.snapshot_chunks_refused += s.snapshot_chunks_refused;
        }
        t
    }
}
