//! One member of one broadcast group: a raft-rs `RawNode` driven sans-I/O, with batching of
//! proposals, numbering of delivered payloads, snapshots and recovery.
//!
//! Atomic broadcast is a replicated log (P-DUR §V: "independent instances of atomic broadcast",
//! one per logical partition; the paper's prototype used Paxos, this is raft): a payload is
//! delivered when the entry holding it commits, and every member delivers the same payloads in the
//! same order, each numbered by its position in the group's sequence (1, 2, ...). Entries hold
//! batches ([`crate::broadcast::batch`]), so the numbering is per payload, not per raft index.
//!
//! Proposals at a follower are forwarded to the leader by raft itself (`MsgPropose`); with no
//! leader known they wait in the batch until one is elected. Raft does not retry a proposal lost
//! with a failed leader: delivery is the only acknowledgement, and the application re-proposes
//! what it has not seen delivered (P-DUR by transaction id, ignoring duplicates).

use std::collections::VecDeque;

use bytes::Bytes;
use raft::eraftpb::{
    ConfChange, ConfChangeSingle, ConfChangeTransition, ConfChangeType, ConfChangeV2, ConfState,
    Entry, EntryType, Message, MessageType, Snapshot,
};
use raft::{RawNode, SnapshotStatus, StateRole, Storage};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use slog::{Discard, Logger, o};

use phasedb_net::{Addr, is_client_addr};

use crate::broadcast::batch::{self, BatchBuilder, BatchId};
use crate::broadcast::config::BroadcastConfig;
use crate::broadcast::error::BroadcastError;
use crate::broadcast::storage::{GroupStorage, SnapshotBody};
use crate::broadcast::wire::GroupMsg;
use crate::broadcast::{Delivery, GroupId};

/// The raft id of the node at `addr` when the group starts (raft reserves 0).
pub fn raft_id(addr: Addr) -> u64 {
    member_id(addr, 0)
}

/// The raft id of the node at `addr` in its `incarnation`: a node that lost its storage rejoins
/// under a new id ([`Group::joining`]), never under one a quorum may remember votes or entries of.
pub fn member_id(addr: Addr, incarnation: u32) -> u64 {
    (u64::from(incarnation) << 32) | (u64::from(addr) + 1)
}

/// The node whose raft id is `id`, whatever its incarnation.
pub fn addr_of(id: u64) -> Addr {
    (id & 0xffff_ffff).saturating_sub(1) as Addr
}

/// Counters of one member.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Batches handed to raft.
    pub proposed_batches: u64,
    /// Payloads handed to raft in those batches.
    pub proposed_payloads: u64,
    /// Batches raft refused at once (no leader any more).
    pub dropped_batches: u64,
    /// Batches not delivered within the proposal timeout (presumed lost with a leader).
    pub expired_batches: u64,
    /// Payloads delivered.
    pub delivered: u64,
    /// Committed entries that were not batches (skipped by every member alike).
    pub undecodable_entries: u64,
    /// Snapshots this member recorded from its application.
    pub snapshots_taken: u64,
    /// Snapshots installed from a leader.
    pub snapshots_installed: u64,
    /// Incoming messages refused (undecodable, misaddressed, or refused by raft).
    pub refused_messages: u64,
    /// Membership changes applied (a member rejoining under a new id takes two).
    pub configuration_changes: u64,
}

/// One node's member of one broadcast group.
pub struct Group {
    id: GroupId,
    me: Addr,
    /// This member's raft id.
    my_id: u64,
    /// True until this member, restarted without storage, is a voter of the group again.
    joining: bool,
    /// When to ask again to join.
    join_due: u64,
    members: Vec<Addr>,
    cfg: BroadcastConfig,
    logger: Logger,
    raw: RawNode<GroupStorage>,
    /// Incarnations of this member (restarts), which keep batch numbers unique across crashes.
    incarnation: u64,
    now: u64,
    next_tick: Option<u64>,
    batch: BatchBuilder,
    batch_number: u64,
    /// This member's batches proposed and not yet delivered: number and when proposed.
    inflight: VecDeque<(u64, u64)>,
    /// Raft index of the last entry applied.
    applied: u64,
    /// Number the next delivered payload gets.
    next_seq: u64,
    /// Payloads numbered up to here are in a restored state and are not delivered again.
    skip_to: u64,
    /// Applied entries since the last snapshot: raft index and the number of its last payload.
    boundaries: VecDeque<(u64, u64)>,
    /// The group's configuration from each raft index on, since the last snapshot's.
    confs: VecDeque<(u64, ConfState)>,
    /// The configuration the member started with (before any entry).
    initial_conf: ConfState,
    scratch: Vec<Bytes>,
    stats: GroupStats,
    /// Draws election timeouts (see [`Group::pin_election_timeout`]).
    rng: SmallRng,
    /// Raft's term, role, leader, vote and election timeout when last looked at.
    observed: (u64, StateRole, u64, u64, usize),
}

fn raft_config(cfg: &BroadcastConfig, id: u64, applied: u64) -> raft::Config {
    raft::Config {
        id,
        election_tick: cfg.election_ticks,
        heartbeat_tick: cfg.heartbeat_ticks,
        applied,
        max_size_per_msg: cfg.max_message_bytes,
        max_inflight_msgs: 256,
        check_quorum: true,
        pre_vote: true,
        ..Default::default()
    }
}

/// The seed of a member's election timeouts: the configured seed mixed with group and member.
fn cfg_seed_mix(cfg: &BroadcastConfig, group: GroupId, me: Addr) -> u64 {
    (cfg.seed ^ (u64::from(group) << 32) ^ u64::from(me)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

fn raft_error(group: GroupId, e: raft::Error) -> BroadcastError {
    BroadcastError::Raft {
        group,
        reason: e.to_string(),
    }
}

impl Group {
    /// Member `me` of group `id` whose members are `members` (the same list on every member),
    /// as the group starts: every member's raft id is [`raft_id`] of its address.
    pub fn new(
        id: GroupId,
        me: Addr,
        members: &[Addr],
        cfg: BroadcastConfig,
    ) -> Result<Group, BroadcastError> {
        let voters: Vec<u64> = members.iter().map(|&a| raft_id(a)).collect();
        let mut group = Group::build(id, me, members, cfg, raft_id(me), voters)?;
        if group.cfg.campaign_on_start && group.members[0] == me {
            let _ = group.raw.campaign();
            group.pin_election_timeout();
        }
        Ok(group)
    }

    /// Member `me` of group `id` restarting without storage (a process that died): it asks the
    /// leader to replace its old raft id with [`member_id`]`(me, incarnation)` (a joint-consensus
    /// membership change, raft §6), then catches up by snapshot and log like any follower behind.
    /// `incarnation` must differ from every earlier one of this node (e.g. its restart count or
    /// the time it started).
    pub fn joining(
        id: GroupId,
        me: Addr,
        members: &[Addr],
        cfg: BroadcastConfig,
        incarnation: u32,
    ) -> Result<Group, BroadcastError> {
        if incarnation == 0 {
            return Err(BroadcastError::Members(
                id,
                "a rejoining member needs an incarnation above 0",
            ));
        }
        let mut group = Group::build(id, me, members, cfg, member_id(me, incarnation), Vec::new())?;
        group.joining = true;
        Ok(group)
    }

    fn build(
        id: GroupId,
        me: Addr,
        members: &[Addr],
        cfg: BroadcastConfig,
        my_id: u64,
        voters: Vec<u64>,
    ) -> Result<Group, BroadcastError> {
        cfg.validate()?;
        let mut sorted = members.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != members.len() {
            return Err(BroadcastError::Members(id, "duplicate member"));
        }
        if !sorted.contains(&me) {
            return Err(BroadcastError::Members(id, "this node is not a member"));
        }
        if sorted.iter().any(|&a| is_client_addr(a) || a == Addr::MAX) {
            return Err(BroadcastError::Members(
                id,
                "a client address cannot be a member",
            ));
        }
        let logger = Logger::root(Discard, o!());
        let seed = cfg_seed_mix(&cfg, id, me) ^ my_id;
        let storage = GroupStorage::new(voters);
        let conf = storage.conf_state();
        let raw = RawNode::new(&raft_config(&cfg, my_id, 0), storage, &logger)
            .map_err(|e| raft_error(id, e))?;
        let mut group = Group {
            id,
            me,
            my_id,
            joining: false,
            join_due: 0,
            members: sorted,
            cfg,
            logger,
            raw,
            incarnation: 0,
            now: 0,
            next_tick: None,
            batch: BatchBuilder::default(),
            batch_number: 0,
            inflight: VecDeque::new(),
            applied: 0,
            next_seq: 1,
            skip_to: 0,
            boundaries: VecDeque::new(),
            confs: VecDeque::from([(0, conf.clone())]),
            initial_conf: conf,
            scratch: Vec::new(),
            stats: GroupStats::default(),
            rng: SmallRng::seed_from_u64(seed),
            observed: (u64::MAX, StateRole::Follower, 0, 0, 0),
        };
        group.pin_election_timeout();
        Ok(group)
    }

    /// The group's id.
    pub fn id(&self) -> GroupId {
        self.id
    }

    /// The group's members, sorted.
    pub fn members(&self) -> &[Addr] {
        &self.members
    }

    /// The leader this member knows of, if any: where proposals go.
    pub fn leader(&self) -> Option<Addr> {
        let id = self.raw.raft.leader_id;
        (id != 0).then(|| addr_of(id))
    }

    /// Raft ids of the group's voters as this member knows them (both halves of a joint
    /// configuration).
    pub fn voters(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.raw.raft.prs().conf().voters().ids().iter().collect();
        v.sort_unstable();
        v
    }

    /// True while this member leads the group.
    pub fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    /// The raft term this member is in.
    pub fn term(&self) -> u64 {
        self.raw.raft.term
    }

    /// The number of the last payload delivered (0 before the first).
    pub fn delivered(&self) -> u64 {
        (self.next_seq - 1).max(self.skip_to)
    }

    /// Counters.
    pub fn stats(&self) -> GroupStats {
        self.stats
    }

    /// Payload bytes gathered and not yet proposed.
    pub fn pending_bytes(&self) -> usize {
        self.batch.bytes()
    }

    /// Batches of this member proposed and not yet delivered.
    pub fn inflight_batches(&self) -> usize {
        self.inflight.len()
    }

    /// The raft index of the latest snapshot (0 before the first).
    pub fn snapshot_index(&self) -> u64 {
        self.raw.store().snapshot_ref().get_metadata().index
    }

    /// The first raft index still in the log (earlier ones are only in the snapshot).
    pub fn first_log_index(&self) -> u64 {
        self.raw.store().truncated() + 1
    }

    /// True when enough entries were applied since the last snapshot that the application should
    /// offer its state ([`Group::offer_snapshot`]).
    pub fn snapshot_due(&self) -> bool {
        self.applied.saturating_sub(self.snapshot_index()) >= self.cfg.snapshot_entries
    }

    /// Gathers `payload` into the next batch; proposes the batch at once if few of this member's
    /// batches are in flight or the batch is full.
    pub fn propose(
        &mut self,
        payload: &[u8],
        out: &mut Vec<(Addr, GroupMsg)>,
        deliveries: &mut VecDeque<Delivery>,
    ) -> Result<(), BroadcastError> {
        let pending = self.batch.bytes();
        if pending + payload.len() + 4 > self.cfg.max_pending_bytes {
            return Err(BroadcastError::Backlog {
                group: self.id,
                pending,
                limit: self.cfg.max_pending_bytes,
            });
        }
        self.batch.push(payload);
        if self.batch.bytes() >= self.cfg.batch_bytes
            || self.inflight.len() < self.cfg.max_inflight_batches
        {
            self.flush();
        }
        self.drive(out, deliveries);
        Ok(())
    }

    /// Proposes whatever is gathered now, whatever is in flight.
    pub fn flush_now(
        &mut self,
        out: &mut Vec<(Addr, GroupMsg)>,
        deliveries: &mut VecDeque<Delivery>,
    ) {
        self.flush();
        self.drive(out, deliveries);
    }

    fn can_propose(&self) -> bool {
        match self.raw.raft.state {
            StateRole::Leader => true,
            StateRole::Follower => self.raw.raft.leader_id != 0,
            _ => false,
        }
    }

    fn flush(&mut self) {
        if self.batch.is_empty() || !self.can_propose() {
            return;
        }
        let number = (self.incarnation << 40) | self.batch_number;
        self.batch_number += 1;
        let payloads = self.batch.len() as u64;
        let data = self.batch.finish(BatchId {
            proposer: self.my_id,
            number,
        });
        match self.raw.propose(Vec::new(), data) {
            Ok(()) => {
                self.stats.proposed_batches += 1;
                self.stats.proposed_payloads += payloads;
                self.inflight.push_back((number, self.now));
            }
            Err(_) => self.stats.dropped_batches += 1,
        }
    }

    /// Advances raft's logical clock to `now` (ns), expires lost batches and proposes what is
    /// gathered.
    pub fn tick(
        &mut self,
        now: u64,
        out: &mut Vec<(Addr, GroupMsg)>,
        deliveries: &mut VecDeque<Delivery>,
    ) {
        self.now = now;
        let tick = self.cfg.tick_ns;
        let next = *self.next_tick.get_or_insert(now + tick);
        if now >= next {
            let due = (now - next) / tick + 1;
            // A member that was starved for long catches up by a bounded number of ticks.
            for _ in 0..due.min(2 * self.cfg.election_ticks as u64) {
                self.raw.tick();
                self.pin_election_timeout();
            }
            self.next_tick = Some(next + due * tick);
        }
        while let Some(&(_, at)) = self.inflight.front() {
            if now.saturating_sub(at) < self.cfg.proposal_timeout_ns {
                break;
            }
            self.inflight.pop_front();
            self.stats.expired_batches += 1;
        }
        self.flush();
        self.ask_to_join(now, out);
        self.drive(out, deliveries);
    }

    /// While this member is not a voter under its raft id, asks every other member (only the
    /// leader acts) once per election timeout to let it in.
    fn ask_to_join(&mut self, now: u64, out: &mut Vec<(Addr, GroupMsg)>) {
        if !self.joining {
            return;
        }
        if self.raw.raft.prs().conf().voters().contains(self.my_id) {
            self.joining = false;
            return;
        }
        if now < self.join_due {
            return;
        }
        self.join_due = now + self.cfg.tick_ns * self.cfg.election_ticks as u64;
        for &m in self.members.iter().filter(|&&m| m != self.me) {
            out.push((
                m,
                GroupMsg::Join {
                    group: self.id,
                    id: self.my_id,
                },
            ));
        }
    }

    /// True while this member, restarted without storage, waits to be a voter again.
    pub fn is_joining(&self) -> bool {
        self.joining
    }

    /// At the leader: replaces the raft id(s) of `from` in the configuration with `id`, the id
    /// `from` restarted under without its storage. Its old id can no longer vote, so a quorum
    /// never counts a vote or an acknowledgement that `from` forgot. Ignored by followers, while
    /// another change is under way (the joiner asks again) and once `id` is a voter.
    pub fn join(
        &mut self,
        from: Addr,
        id: u64,
        out: &mut Vec<(Addr, GroupMsg)>,
        deliveries: &mut VecDeque<Delivery>,
    ) -> Result<(), BroadcastError> {
        if addr_of(id) != from || !self.members.contains(&from) || from == self.me {
            self.stats.refused_messages += 1;
            return Err(BroadcastError::Misaddressed {
                group: self.id,
                from,
                reason: "join for an id of another node",
            });
        }
        let voters: Vec<u64> = self.raw.raft.prs().conf().voters().ids().iter().collect();
        if !self.is_leader() || voters.contains(&id) || self.raw.raft.has_pending_conf() {
            return Ok(());
        }
        let mut changes: Vec<ConfChangeSingle> = voters
            .iter()
            .filter(|&&v| addr_of(v) == from)
            .map(|&v| {
                let mut c = ConfChangeSingle::default();
                c.set_change_type(ConfChangeType::RemoveNode);
                c.node_id = v;
                c
            })
            .collect();
        let mut add = ConfChangeSingle::default();
        add.set_change_type(ConfChangeType::AddNode);
        add.node_id = id;
        changes.push(add);
        let mut cc = ConfChangeV2::default();
        cc.set_transition(ConfChangeTransition::Auto);
        cc.set_changes(changes.into());
        let proposed = self
            .raw
            .propose_conf_change(Vec::new(), cc)
            .map_err(|e| raft_error(self.id, e));
        self.drive(out, deliveries);
        proposed
    }

    /// The configuration in force at raft index `index` (at least the last snapshot's).
    fn conf_at(&self, index: u64) -> ConfState {
        self.confs
            .iter()
            .rev()
            .find(|(i, _)| *i <= index)
            .or(self.confs.front())
            .map(|(_, c)| c.clone())
            .unwrap_or_default()
    }

    /// Applies a committed membership change (raft-rs turns a joint one into two entries).
    fn apply_conf_change(&mut self, e: &Entry) {
        use protobuf::Message as _;
        let applied = match e.get_entry_type() {
            EntryType::EntryConfChangeV2 => ConfChangeV2::parse_from_bytes(&e.data)
                .ok()
                .and_then(|cc| self.raw.apply_conf_change(&cc).ok()),
            _ => ConfChange::parse_from_bytes(&e.data)
                .ok()
                .and_then(|cc| self.raw.apply_conf_change(&cc).ok()),
        };
        match applied {
            Some(cs) => {
                self.raw.mut_store().set_conf_state(cs.clone());
                self.confs.push_back((e.index, cs));
                self.stats.configuration_changes += 1;
            }
            None => self.stats.undecodable_entries += 1,
        }
    }

    /// Hands raft a message that arrived from `from`.
    pub fn step(
        &mut self,
        from: Addr,
        msg: Message,
        out: &mut Vec<(Addr, GroupMsg)>,
        deliveries: &mut VecDeque<Delivery>,
    ) -> Result<(), BroadcastError> {
        let refuse = |reason| BroadcastError::Misaddressed {
            group: self.id,
            from,
            reason,
        };
        let checked = if addr_of(msg.from) != from {
            Err(refuse("raft sender differs from the connection's"))
        } else if msg.to != self.my_id {
            Err(refuse("addressed to another member"))
        } else if !self.members.contains(&from) {
            Err(refuse("sender is not a member of the group"))
        } else if msg.get_msg_type() == MessageType::MsgSnapshot
            && SnapshotBody::decode(&msg.get_snapshot().data).is_none()
        {
            Err(refuse("snapshot data is malformed"))
        } else {
            self.raw.step(msg).map_err(|e| raft_error(self.id, e))
        };
        if checked.is_err() {
            self.stats.refused_messages += 1;
        }
        self.drive(out, deliveries);
        checked
    }

    /// Records the application's state of this group, which reflects every payload up to number
    /// `index`, as the group's snapshot, and compacts the log behind it. Returns false when the
    /// snapshot would not be newer than the one held (nothing changes).
    pub fn offer_snapshot(&mut self, index: u64, state: Bytes) -> Result<bool, BroadcastError> {
        let delivered = self.delivered();
        if index > delivered {
            return Err(BroadcastError::SnapshotAhead {
                group: self.id,
                index,
                delivered,
            });
        }
        let Some(&(entry, log_seq)) = self.boundaries.iter().rev().find(|(_, s)| *s <= index)
        else {
            return Ok(false);
        };
        if entry <= self.snapshot_index() {
            return Ok(false);
        }
        let term = self
            .raw
            .store()
            .term(entry)
            .map_err(|e| raft_error(self.id, e))?;
        let body = SnapshotBody {
            log_seq,
            app_seq: index.max(log_seq),
            state,
        };
        let mut snap = Snapshot {
            data: Bytes::from(body.encode()),
            ..Default::default()
        };
        let meta = snap.mut_metadata();
        meta.index = entry;
        meta.term = term;
        meta.set_conf_state(self.conf_at(entry));
        let retained = self.cfg.retained_entries;
        self.raw
            .mut_store()
            .record(snap, retained)
            .map_err(|e| raft_error(self.id, e))?;
        while self.boundaries.front().is_some_and(|&(i, _)| i <= entry) {
            self.boundaries.pop_front();
        }
        while self.confs.len() > 1 && self.confs[1].0 <= entry {
            self.confs.pop_front();
        }
        self.stats.snapshots_taken += 1;
        Ok(true)
    }

    /// The member crashed: everything but its storage (the durable log, hard state and snapshot)
    /// is forgotten, and it restarts from that storage. Its application starts over too: it is
    /// handed the snapshot (a [`Delivery::Restore`], if there is one) and then the entries after
    /// it, numbered as before.
    pub fn restart(&mut self, deliveries: &mut VecDeque<Delivery>) -> Result<(), BroadcastError> {
        let mut store = self.raw.store().clone();
        let snap = store.snapshot_ref().clone();
        let applied = snap.get_metadata().index;
        // Raft restores its configuration from storage and then replays the entries after the
        // snapshot, membership changes among them: start from the configuration at the snapshot.
        let conf = if applied > 0 {
            snap.get_metadata().get_conf_state().clone()
        } else {
            self.initial_conf.clone()
        };
        store.set_conf_state(conf.clone());
        self.raw = RawNode::new(
            &raft_config(&self.cfg, self.my_id, applied),
            store,
            &self.logger,
        )
        .map_err(|e| raft_error(self.id, e))?;
        self.confs = VecDeque::from([(applied, conf)]);
        self.join_due = 0;
        self.incarnation += 1;
        self.observed.0 = u64::MAX;
        self.pin_election_timeout();
        self.next_tick = None;
        self.batch = BatchBuilder::default();
        self.batch_number = 0;
        self.inflight.clear();
        self.boundaries.clear();
        self.applied = applied;
        self.next_seq = 1;
        self.skip_to = 0;
        if applied > 0 {
            self.restore(&snap, deliveries);
        }
        Ok(())
    }

    /// Hands the application a snapshot's state and numbers the entries after it.
    fn restore(&mut self, snap: &Snapshot, deliveries: &mut VecDeque<Delivery>) {
        let body = SnapshotBody::decode(&snap.data).unwrap_or(SnapshotBody {
            log_seq: 0,
            app_seq: 0,
            state: Bytes::new(),
        });
        self.applied = snap.get_metadata().index;
        // Entries after the snapshot's are numbered from its entry's last payload on; those the
        // state already reflects (up to `app_seq`) are skipped.
        self.next_seq = body.log_seq + 1;
        self.skip_to = body.app_seq;
        self.boundaries.clear();
        self.confs = VecDeque::from([(self.applied, snap.get_metadata().get_conf_state().clone())]);
        deliveries.push_back(Delivery::Restore {
            group: self.id,
            index: body.app_seq,
            state: body.state,
        });
    }

    fn send(&mut self, msgs: Vec<Message>, out: &mut Vec<(Addr, GroupMsg)>) {
        for m in msgs {
            let to = m.to;
            let snapshot = m.get_msg_type() == MessageType::MsgSnapshot;
            out.push((addr_of(to), GroupMsg::encode(self.id, &m)));
            if snapshot {
                // The snapshot is on its way; if it is lost, the follower's next rejection of an
                // append makes the leader send it again.
                self.raw.report_snapshot(to, SnapshotStatus::Finish);
            }
        }
    }

    fn apply(&mut self, entries: Vec<Entry>, deliveries: &mut VecDeque<Delivery>) {
        for e in entries {
            if e.index <= self.applied {
                continue;
            }
            self.applied = e.index;
            if e.get_entry_type() != EntryType::EntryNormal {
                self.apply_conf_change(&e);
            } else if !e.data.is_empty() {
                match batch::decode(&e.data, &mut self.scratch) {
                    Ok(id) => {
                        for payload in self.scratch.drain(..) {
                            let index = self.next_seq;
                            self.next_seq += 1;
                            if index > self.skip_to {
                                self.stats.delivered += 1;
                                deliveries.push_back(Delivery::Entry {
                                    group: self.id,
                                    index,
                                    payload,
                                });
                            }
                        }
                        if id.proposer == self.my_id {
                            self.inflight.retain(|&(n, _)| n != id.number);
                        }
                    }
                    Err(_) => self.stats.undecodable_entries += 1,
                }
            }
            self.boundaries.push_back((e.index, self.next_seq - 1));
        }
    }

    /// Replaces raft's election timeout with one drawn from this member's seeded generator
    /// whenever raft may have drawn one (it does so from the thread's generator on every change
    /// of term, role or leader), so runs under the simulator replay exactly from their seed.
    fn pin_election_timeout(&mut self) {
        let r = &self.raw.raft;
        let now = (
            r.term,
            r.state,
            r.leader_id,
            r.vote,
            r.randomized_election_timeout(),
        );
        if now != self.observed {
            let ticks = self.cfg.election_ticks;
            let timeout = self.rng.random_range(ticks..2 * ticks);
            self.raw.raft.set_randomized_election_timeout(timeout);
            self.observed = (now.0, now.1, now.2, now.3, timeout);
        }
    }

    /// Handles every ready raft has: sends, persists, installs snapshots and delivers.
    fn drive(&mut self, out: &mut Vec<(Addr, GroupMsg)>, deliveries: &mut VecDeque<Delivery>) {
        self.pin_election_timeout();
        while self.raw.has_ready() {
            let mut rd = self.raw.ready();
            self.send(rd.take_messages(), out);
            if !rd.snapshot().is_empty() {
                let snap = rd.snapshot().clone();
                if self.raw.mut_store().install(snap.clone()).is_ok() {
                    self.stats.snapshots_installed += 1;
                    self.restore(&snap, deliveries);
                }
            }
            let committed = rd.take_committed_entries();
            self.apply(committed, deliveries);
            if !rd.entries().is_empty() {
                // Raft hands only entries after the persisted prefix; appending them cannot fail.
                let _ = self.raw.mut_store().append(rd.entries());
            }
            if let Some(hs) = rd.hs() {
                self.raw.mut_store().set_hard_state(hs.clone());
            }
            self.send(rd.take_persisted_messages(), out);
            let mut light = self.raw.advance(rd);
            if let Some(commit) = light.commit_index() {
                self.raw.mut_store().set_commit(commit);
            }
            self.send(light.take_messages(), out);
            let committed = light.take_committed_entries();
            self.apply(committed, deliveries);
            self.raw.advance_apply();
            if !self.batch.is_empty() && self.inflight.len() < self.cfg.max_inflight_batches {
                self.flush();
            }
            self.pin_election_timeout();
        }
    }
}
