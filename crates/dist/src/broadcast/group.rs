//! One member of one broadcast group: a raft-rs `RawNode` driven sans-I/O, with batching of
//! proposals and numbering of delivered payloads; snapshots and restarts are in `group/recovery.rs`,
//! raft ids and readmission under a new id in `group/membership.rs`.
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

use std::collections::{BTreeMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};

use bytes::Bytes;
use raft::eraftpb::{ConfState, Entry, EntryType, Message, MessageType};
use raft::{RawNode, SnapshotStatus, StateRole};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use slog::{Discard, Logger, o};

use phasedb_net::{Addr, is_client_addr};

use crate::broadcast::batch::{self, BatchBuilder, BatchId};
use crate::broadcast::chunks::{Assembly, SnapshotChunk, split};
use crate::broadcast::config::BroadcastConfig;
use crate::broadcast::error::BroadcastError;
use crate::broadcast::storage::{GroupStorage, SnapshotBody};
use crate::broadcast::wire::{GroupMsg, RaftBytes};
use crate::broadcast::{Delivery, GroupId};

mod membership;
mod recovery;

pub use membership::{addr_of, member_id, raft_id};

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
    /// Messages on which raft panicked (the member restarted from its storage).
    pub raft_panics: u64,
    /// Chunks of snapshot messages sent (`chunks.rs`).
    pub snapshot_chunks_sent: u64,
    /// Chunks of snapshot messages received and kept.
    pub snapshot_chunks_received: u64,
    /// Chunked snapshot messages received whole and stepped.
    pub snapshots_assembled: u64,
    /// Chunks refused: an impossible header, or the last of a whole that failed its checksum.
    pub snapshot_chunks_refused: u64,
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
    /// Per sender, the chunks of a snapshot message gathered so far.
    assemblies: BTreeMap<Addr, Option<Assembly>>,
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
    /// membership change, raft §6), then catches up by snapshot and log like any follower behind,
    /// or by the whole log while the group has taken no snapshot.
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
        // The configuration the group started with, as every member holds it at index 0: a
        // joiner fed the log from its start (no snapshot taken yet) learns every membership
        // change since, its own admission among them, by replaying it. Its new id is not among
        // these voters, so it cannot campaign before it is admitted.
        let voters: Vec<u64> = members.iter().map(|&a| raft_id(a)).collect();
        let mut group = Group::build(id, me, members, cfg, member_id(me, incarnation), voters)?;
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
            assemblies: BTreeMap::new(),
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
            self.step_raft(msg, deliveries)
        };
        if checked.is_err() {
            self.stats.refused_messages += 1;
        }
        self.drive(out, deliveries);
        checked
    }

    /// Steps raft, which trusts a decodable message from a member and panics on some impossible
    /// ones (a commit index beyond the log it holds, say). A panic leaves raft's memory in an
    /// unknown state, so the member restarts from its storage, as after a crash, and the message
    /// is refused.
    fn step_raft(
        &mut self,
        msg: Message,
        deliveries: &mut VecDeque<Delivery>,
    ) -> Result<(), BroadcastError> {
        let raw = &mut self.raw;
        match catch_unwind(AssertUnwindSafe(|| raw.step(msg))) {
            Ok(r) => r.map_err(|e| raft_error(self.id, e)),
            Err(_) => {
                self.stats.raft_panics += 1;
                self.restart(deliveries)?;
                Err(BroadcastError::Raft {
                    group: self.id,
                    reason: "raft panicked on the message; the member restarted from its storage"
                        .into(),
                })
            }
        }
    }

    /// Gathers a chunk of a snapshot message from `from` ([`crate::broadcast::chunks`]); once
    /// the message is whole and matches its checksum it is stepped like any other. A chunk from
    /// a non-member, an impossible one, or a whole that fails its checksum or is not a snapshot
    /// is refused and nothing changes (the gathered chunks are dropped).
    pub fn step_chunk(
        &mut self,
        from: Addr,
        chunk: &SnapshotChunk,
        out: &mut Vec<(Addr, GroupMsg)>,
        deliveries: &mut VecDeque<Delivery>,
    ) -> Result<(), BroadcastError> {
        let refused = |reason: String| BroadcastError::Decode {
            group: chunk.group,
            from,
            reason,
        };
        if !self.members.contains(&from) {
            self.stats.refused_messages += 1;
            return Err(BroadcastError::Misaddressed {
                group: self.id,
                from,
                reason: "sender is not a member of the group",
            });
        }
        let slot = self.assemblies.entry(from).or_default();
        match Assembly::add(slot, chunk) {
            Ok(None) => {
                self.stats.snapshot_chunks_received += 1;
                Ok(())
            }
            Ok(Some(whole)) => {
                self.stats.snapshot_chunks_received += 1;
                let msg = match RaftBytes(whole).decode() {
                    Ok(m) if m.get_msg_type() == MessageType::MsgSnapshot => m,
                    Ok(_) => {
                        self.stats.snapshot_chunks_refused += 1;
                        return Err(refused("chunked message is not a snapshot".into()));
                    }
                    Err(e) => {
                        self.stats.snapshot_chunks_refused += 1;
                        return Err(refused(e.to_string()));
                    }
                };
                self.stats.snapshots_assembled += 1;
                self.step(from, msg, out, deliveries)
            }
            Err(e) => {
                self.stats.snapshot_chunks_refused += 1;
                Err(refused(e.to_string()))
            }
        }
    }

    fn send(&mut self, msgs: Vec<Message>, out: &mut Vec<(Addr, GroupMsg)>) {
        for m in msgs {
            let to = m.to;
            let snapshot = m.get_msg_type() == MessageType::MsgSnapshot;
            let whole = GroupMsg::encode(self.id, &m);
            match whole {
                GroupMsg::Raft { raft, .. }
                    if snapshot && raft.0.len() > self.cfg.snapshot_chunk_bytes =>
                {
                    for c in split(self.id, &raft.0, self.cfg.snapshot_chunk_bytes) {
                        self.stats.snapshot_chunks_sent += 1;
                        out.push((addr_of(to), GroupMsg::Chunk(c)));
                    }
                }
                whole => out.push((addr_of(to), whole)),
            }
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
