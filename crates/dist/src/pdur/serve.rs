//! A P-DUR replica as a cluster member over TCP (`phasedb node` with a `[pdur]` table): the
//! [`ThreadedReplica`] — one worker thread per logical partition (§IV-B) — behind one atomic
//! broadcast group per partition over every replica (§V, the prototype's independent broadcasts).
//! DUR is the same replica with one partition, hence one group over all replicas (Algorithms 1–2).
//!
//! [`ReplicaNode`] is the glue the TCP runtime drives: it owns the broadcast ([`Broadcast`],
//! raft-rs groups), hands each group's deliveries in order to [`ThreadedReplica::deliver`], and
//! proposes the updates the workers' clients hand it ([`ServeMsg::Propose`], injected by the
//! workers into the event loop). The replica's own closed-loop clients generate the load, as the
//! paper's clients do against their replica (Algorithm 3); a run goes through the stages of
//! [`Stage`]: wait for every group's leader, warm up, measure, drain.
//!
//! Clients over TCP reach the replica through its client endpoint ([`Endpoint`], at the table's
//! `client_addrs[id]`); `local_clients = false` turns the replica's own load off. The endpoint's
//! port is bound at start, its sessions served once the node has caught up
//! ([`ReplicaNode::on_ready`]): a rejoining node's restores then come before any of its
//! sessions' transactions, which no snapshot can cover.
//!
//! State transfer: whenever a group's snapshot is due, the node asks every worker for its
//! partition's image at the position of its group it has been handed ([`ThreadedReplica::request_image`])
//! and offers each group its image as the group's snapshot; the groups compact their logs behind
//! it. A node restarted without storage (`phasedb node --rejoin`, [`ServeOptions::incarnation`])
//! rejoins every group under a new raft id; the leaders send it their snapshot, which it hands the
//! worker ([`ThreadedReplica::restore`]), and then the log after it. Its clients number their
//! transactions from the incarnation on, above anything its earlier life broadcast.
//!
//! A proposal lost with a failed leader (raft-rs forwards a follower's proposal to the leader
//! and forgets it) is proposed again: the node keeps each of its proposals until every group it
//! names has delivered it, and proposes it again to the groups that have not after
//! [`REPROPOSE_NS`]. A partition that delivered it before ignores the copy (duplicate detection
//! by the client's sequence number), so proposing again is always safe.
//!
//! A cross-partition request whose client's replica crashed after proposing it to only some of
//! its groups (or while leading a group that had not replicated it) is delivered by those groups
//! only, and their partitions would wait for the other partitions' votes forever (termination
//! assumes every partition it names delivers it). Every node notes such requests as their groups
//! deliver them; one still partial after the cluster file's `[pdur] rebroadcast_ms` (by default
//! [`PARTIAL_NS`]; [`ReplicaNode::rebroadcast_after`]) is proposed to each missing group by that
//! group's leader. A partition that has moved past the request's client votes abort for it, so the
//! outcome is the same on every replica.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use super::endpoint::Endpoint;
use super::partition::Partition;
use super::partition_of;
use super::request::{PAYLOAD_TAG, PartitionId, TxnId, first_seq};
use super::threaded::{LoadStats, LocalLoad, Stopped, ThreadedReplica, total_load};
use super::workload::Generator;
use super::workload::micro::{MicroConfig, MicroGen, MicroType};
use super::workload::twitter::{TwitterConfig, TwitterGen};
use crate::broadcast::{Broadcast, BroadcastConfig, Delivery, GroupId, GroupMsg};
use phasedb_net::tcp::TcpOptions;
use phasedb_net::{Addr, ClusterConfig, Node, PdurTable, Transport};

/// How long a proposal may stay undelivered before it is proposed again (several election
/// timeouts: a new leader is normally in place by then).
pub const REPROPOSE_NS: u64 = 600_000_000;

/// Which groups a node leads, for tests that crash a leader.
#[derive(Debug, Default)]
pub struct Probe {
    /// Bit `g` set while this node leads group `g` (groups below 64).
    pub leads: std::sync::atomic::AtomicU64,
}

/// One of this node's proposals, kept until every group it names delivered it.
struct Proposal {
    payload: Vec<u8>,
    missing: smallvec::SmallVec<[GroupId; 4]>,
    at: u64,
}

/// The transaction of a payload, read from its first bytes (`None` if it is not a request).
fn payload_txn(payload: &[u8]) -> Option<TxnId> {
    match payload.split_first() {
        Some((&PAYLOAD_TAG, body)) => postcard::take_from_bytes::<TxnId>(body).ok().map(|r| r.0),
        _ => None,
    }
}

/// The transaction of a payload and the partitions its snapshot vector names, read from its
/// first bytes without decoding the rest (`None` if they are not a request's, or name more than
/// `partitions` partitions).
fn payload_header(payload: &[u8], partitions: usize) -> Option<(TxnId, Groups)> {
    let (&PAYLOAD_TAG, body) = payload.split_first()? else {
        return None;
    };
    let (id, rest) = postcard::take_from_bytes::<TxnId>(body).ok()?;
    let (n, mut rest) = postcard::take_from_bytes::<u64>(rest).ok()?;
    if n > partitions as u64 {
        return None;
    }
    let mut groups = Groups::new();
    for _ in 0..n {
        let ((p, _), r) = postcard::take_from_bytes::<(PartitionId, u64)>(rest).ok()?;
        groups.push(p as GroupId);
        rest = r;
    }
    Some((id, groups))
}

/// Groups of one transaction.
type Groups = smallvec::SmallVec<[GroupId; 4]>;

/// A cross-partition request delivered by some of the groups it names and not yet by the
/// others: if its client's replica crashed between its proposals (or while leading a group that
/// had not replicated it), the partitions that delivered it would wait for the others' votes
/// forever. The node proposes it to the missing groups after [`ReplicaNode::rebroadcast_after`]
/// ([`ReplicaNode::finish_partial`]).
struct Partial {
    payload: bytes::Bytes,
    missing: Groups,
    at: u64,
}

/// How long a cross-partition request may stay delivered by only some of its groups before a
/// survivor proposes it to the others, unless set otherwise ([`ReplicaNode::rebroadcast_after`],
/// `[pdur] rebroadcast_ms`, whose default is this): twice [`REPROPOSE_NS`], so the client's own
/// replica, if alive, proposes it again first.
pub const PARTIAL_NS: u64 = 2 * REPROPOSE_NS;

/// What replicas exchange, and what the workers hand their node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ServeMsg {
    /// A message of one partition's broadcast group.
    Bcast(GroupMsg),
    /// A local client's update for the broadcasts of these partitions (only from the node itself).
    Propose(Vec<PartitionId>, Vec<u8>),
}

/// The workload a `[pdur]` table names.
#[derive(Clone, Copy, Debug)]
pub enum Workload {
    /// The micro-benchmark.
    Micro(MicroConfig),
    /// The Twitter-like social network.
    Twitter(TwitterConfig),
}

impl Workload {
    /// The workload of `table`.
    pub fn from_table(table: &PdurTable) -> Result<Workload, String> {
        let partitions = table.partitions as usize;
        match table.workload.as_str() {
            "micro" => {
                let ty = MicroType::parse(&table.micro_type)
                    .ok_or_else(|| format!("unknown micro type {:?}", table.micro_type))?;
                let cfg = MicroConfig {
                    ty,
                    items: table.items,
                    partitions,
                    cross_partition: table.cross_partition,
                };
                let (r, w) = ty.ops();
                if table.items / partitions as u64 <= 2 * (r + w) as u64 {
                    return Err(format!(
                        "{} items are too few for {partitions} partitions of type {} transactions",
                        table.items, table.micro_type
                    ));
                }
                Ok(Workload::Micro(cfg))
            }
            "twitter" => {
                if table.users < 2 * partitions as u64 {
                    return Err(format!(
                        "{} users are too few for {partitions} partitions",
                        table.users
                    ));
                }
                Ok(Workload::Twitter(TwitterConfig {
                    follow_cross: table.follow_cross,
                    ..TwitterConfig::new(table.users, partitions)
                }))
            }
            other => Err(format!("unknown workload {other:?}")),
        }
    }

    fn partitions(&self) -> usize {
        match self {
            Workload::Micro(c) => c.partitions,
            Workload::Twitter(c) => c.partitions,
        }
    }

    /// Loads partition `p`'s items (the same on every replica: the data's seed is `seed`).
    pub fn fill(&self, seed: u64, p: PartitionId, put: &mut dyn FnMut(u64, Vec<u8>)) {
        let n = self.partitions();
        let mut mine = |k: u64, v: Vec<u8>| {
            if partition_of(k, n) == p {
                put(k, v)
            }
        };
        match self {
            Workload::Micro(c) => c.load(&mut mine),
            Workload::Twitter(c) => c.load(seed, &mut mine),
        }
    }

    /// One generator per partition, seeded from `seed`.
    pub fn generators(&self, seed: u64) -> Vec<Box<dyn Generator + Send>> {
        (0..self.partitions())
            .map(|p| {
                let s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ p as u64;
                match *self {
                    Workload::Micro(c) => {
                        Box::new(MicroGen::new(c, s)) as Box<dyn Generator + Send>
                    }
                    Workload::Twitter(c) => Box::new(TwitterGen::new(c, s)),
                }
            })
            .collect()
    }
}

/// Where a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Waiting for every group to have a leader.
    Electing,
    /// Clients running, not counted, until this time (ns).
    Warmup(u64),
    /// Clients counted from the first time to the second (ns).
    Measure(u64, u64),
    /// Clients stopped; waiting for the replica to be quiet (consecutive quiet ticks).
    Drain(u32),
    /// Load done.
    Done,
}

/// Counters of the node's broadcast side.
#[derive(Clone, Copy, Debug, Default)]
pub struct NodeCounters {
    /// Payloads delivered (all groups).
    pub delivered: u64,
    /// Payloads proposed.
    pub proposed: u64,
    /// Proposals the broadcast refused at first (too much gathered) and retried.
    pub deferred: u64,
    /// Messages the broadcast refused.
    pub refused_messages: u64,
    /// Snapshots' images refused (they do not decode): the group stops being applied here.
    pub refused_restores: u64,
    /// Partitions restored from a snapshot's image.
    pub restores: u64,
    /// Images offered to the groups as their snapshot.
    pub snapshots: u64,
    /// Proposals proposed again after [`REPROPOSE_NS`] undelivered.
    pub reproposed: u64,
    /// Other replicas' cross-partition requests proposed to the groups that had not delivered
    /// them after [`ReplicaNode::rebroadcast_after`] ([`ReplicaNode::finish_partial`]).
    pub rebroadcasts: u64,
    /// At the stop: this node's proposals not yet delivered by every group they name.
    pub undelivered: u64,
    /// At the stop: local clients inside a transaction plus transactions waiting for votes
    /// (non-zero: the replica did not drain).
    pub busy: u64,
}

/// A partition's image from its worker: the partition, the payloads it reflects, the bytes.
type Image = (PartitionId, u64, Vec<u8>);

/// The replica with its broadcast, as the TCP runtime drives it.
pub struct ReplicaNode {
    me: Addr,
    bcast: Broadcast,
    replica: ThreadedReplica,
    stage: Stage,
    warmup_ns: u64,
    duration_ns: u64,
    measured_ns: u64,
    deferred: std::collections::VecDeque<(GroupId, Vec<u8>)>,
    counters: NodeCounters,
    on_done: Option<Box<dyn FnOnce() + Send>>,
    pending: rustc_hash::FxHashMap<TxnId, Proposal>,
    now: u64,
    probe: Option<std::sync::Arc<Probe>>,
    images: (
        std::sync::mpsc::Sender<Image>,
        std::sync::mpsc::Receiver<Image>,
    ),
    /// Images asked of the workers and not yet offered.
    images_due: usize,
    /// Groups whose deliveries are no longer applied (a refused image).
    stopped: Vec<bool>,
    /// Cross-partition requests delivered by some of their groups only.
    partial: rustc_hash::FxHashMap<TxnId, Partial>,
    /// How long one may stay so before the node proposes it to the others (ns).
    partial_ns: u64,
    /// Called once the node has caught up ([`ReplicaNode::on_ready`]).
    on_ready: Option<Box<dyn FnOnce() + Send>>,
}

impl ReplicaNode {
    /// Replica `me` of `replicas`: its partitions' groups, its threaded replica (already
    /// loaded), and the run's warm-up and measured durations. `on_done` runs once the load is
    /// over and the replica quiet.
    pub fn new(
        me: Addr,
        replicas: &[Addr],
        bcast_cfg: BroadcastConfig,
        replica: ThreadedReplica,
        warmup: Duration,
        duration: Duration,
        on_done: Option<Box<dyn FnOnce() + Send>>,
    ) -> Result<ReplicaNode, String> {
        let mut bcast = Broadcast::new(me, bcast_cfg).map_err(|e| e.to_string())?;
        for g in 0..replica.partitions() {
            bcast
                .add_group(g as GroupId, replicas)
                .map_err(|e| e.to_string())?;
        }
        replica.set_measuring(false);
        let partitions = replica.partitions();
        Ok(ReplicaNode {
            me,
            bcast,
            replica,
            stage: Stage::Electing,
            warmup_ns: warmup.as_nanos() as u64,
            duration_ns: duration.as_nanos() as u64,
            measured_ns: 0,
            deferred: Default::default(),
            counters: NodeCounters::default(),
            on_done,
            pending: Default::default(),
            now: 0,
            probe: None,
            images: std::sync::mpsc::channel(),
            images_due: 0,
            stopped: vec![false; partitions],
            partial: Default::default(),
            partial_ns: PARTIAL_NS,
            on_ready: None,
        })
    }

    /// The same node restarted without storage in its `incarnation`-th life (above 0, above
    /// every earlier one): it rejoins every group under a new raft id and catches up by the
    /// leaders' snapshots and logs; its load starts once it is a member of every group again.
    pub fn rejoining(
        mut self,
        replicas: &[Addr],
        bcast_cfg: BroadcastConfig,
        incarnation: u32,
    ) -> Result<ReplicaNode, String> {
        let mut bcast = Broadcast::new(self.me, bcast_cfg).map_err(|e| e.to_string())?;
        for g in 0..self.replica.partitions() {
            bcast
                .join_group(g as GroupId, replicas, incarnation)
                .map_err(|e| e.to_string())?;
        }
        self.bcast = bcast;
        Ok(self)
    }

    /// Offers the groups the images their workers sent, and asks for new ones when a group's
    /// snapshot is due and none are on their way.
    fn snapshots(&mut self) {
        while let Ok((p, index, image)) = self.images.1.try_recv() {
            self.images_due = self.images_due.saturating_sub(1);
            if self
                .bcast
                .offer_snapshot(p as GroupId, index, image)
                .is_ok()
            {
                self.counters.snapshots += 1;
            }
        }
        if self.images_due > 0 || self.bcast.snapshots_due().next().is_none() {
            return;
        }
        for g in 0..self.replica.partitions() as GroupId {
            if let Some(index) = self.bcast.delivered(g) {
                self.replica
                    .request_image(g as PartitionId, index, &self.images.0);
                self.images_due += 1;
            }
        }
    }

    /// Rebuilds partition `group` from a snapshot's image; an empty state (a group with no
    /// snapshot yet) leaves the loaded partition as it is.
    fn restore(&mut self, group: GroupId, state: &[u8]) {
        let (g, parts) = (group as usize, self.replica.partitions());
        if g >= parts || state.is_empty() {
            return;
        }
        match Partition::from_image(group as PartitionId, parts, state) {
            Ok(part) => {
                self.stopped[g] = false;
                self.counters.restores += 1;
                self.replica.restore(group as PartitionId, part);
            }
            Err(_) => {
                self.stopped[g] = true;
                self.counters.refused_restores += 1;
            }
        }
    }

    /// Runs `f` once the node has caught up: it is a voting member of every group (a rejoining
    /// node is one only once it has applied its groups' snapshots and logs up to its own
    /// admission) and every group has a leader. What serves outside clients starts there, so no
    /// transaction of theirs is proposed before the restores, which would cover it: its outcome
    /// would never be delivered here.
    pub fn on_ready(mut self, f: Box<dyn FnOnce() + Send>) -> ReplicaNode {
        self.on_ready = Some(f);
        self
    }

    /// Proposes a cross-partition request delivered by only some of its groups to the others
    /// once it stayed so for `ns` (above 0; [`PARTIAL_NS`] unless set).
    pub fn rebroadcast_after(mut self, ns: u64) -> Result<ReplicaNode, String> {
        if ns == 0 {
            return Err("the rebroadcast delay must be positive".into());
        }
        self.partial_ns = ns;
        Ok(self)
    }

    /// Publishes which groups this node leads into `probe` on every tick.
    pub fn with_probe(mut self, probe: std::sync::Arc<Probe>) -> ReplicaNode {
        self.probe = Some(probe);
        self
    }

    /// This node's proposals not yet delivered by every group they name.
    pub fn undelivered(&self) -> usize {
        self.pending.len()
    }

    /// Proposes again, to the groups that have not delivered them, the proposals older than
    /// [`REPROPOSE_NS`].
    fn repropose(&mut self) {
        let now = self.now;
        let mut again: Vec<(GroupId, Vec<u8>)> = Vec::new();
        for p in self.pending.values_mut() {
            if now.saturating_sub(p.at) >= REPROPOSE_NS {
                p.at = now;
                self.counters.reproposed += 1;
                again.extend(p.missing.iter().map(|&g| (g, p.payload.clone())));
            }
        }
        for (g, payload) in again {
            self.propose(g, payload);
        }
    }

    /// Notes that `group` delivered cross-partition request `id`, which names `groups`.
    fn note_partial(
        &mut self,
        id: TxnId,
        group: GroupId,
        groups: &[GroupId],
        payload: &bytes::Bytes,
    ) {
        use std::collections::hash_map::Entry;
        match self.partial.entry(id) {
            Entry::Occupied(mut e) => {
                e.get_mut().missing.retain(|g| *g != group);
                if e.get().missing.is_empty() {
                    e.remove();
                }
            }
            Entry::Vacant(e) => {
                let missing: Groups = groups.iter().copied().filter(|&g| g != group).collect();
                if !missing.is_empty() {
                    e.insert(Partial {
                        payload: payload.clone(),
                        missing,
                        at: self.now,
                    });
                }
            }
        }
    }

    /// Proposes a cross-partition request delivered by only some of its groups for
    /// [`ReplicaNode::rebroadcast_after`] to each missing group this node leads (a leader of each proposes it, so
    /// one copy is normally delivered; a partition that delivered it before ignores a copy).
    /// The node's own requests are left to [`ReplicaNode::repropose`].
    fn finish_partial(&mut self) {
        let now = self.now;
        let mut again: Vec<(GroupId, Vec<u8>)> = Vec::new();
        for (id, p) in self.partial.iter_mut() {
            if now.saturating_sub(p.at) < self.partial_ns || self.pending.contains_key(id) {
                continue;
            }
            p.at = now;
            for &g in &p.missing {
                if self.bcast.leader(g) == Some(self.me) {
                    self.counters.rebroadcasts += 1;
                    again.push((g, p.payload.to_vec()));
                }
            }
        }
        for (g, payload) in again {
            self.propose(g, payload);
        }
    }

    /// Cross-partition requests delivered by some of the groups they name and not (yet) by the
    /// others.
    pub fn partial(&self) -> usize {
        self.partial.len()
    }

    /// Local clients inside a transaction plus transactions waiting for votes, over the workers.
    pub fn busy(&self) -> u64 {
        self.replica.busy()
    }

    /// Where the run is.
    pub fn stage(&self) -> Stage {
        self.stage
    }

    /// The node's broadcast counters.
    pub fn counters(&self) -> NodeCounters {
        self.counters
    }

    /// Stops the replica once it is quiet (waiting at most `within`) and reports the run.
    pub fn finish(self, within: Duration) -> ServeReport {
        let deadline = std::time::Instant::now() + within;
        while self.replica.busy() > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        let mut counters = self.counters;
        counters.undelivered = self.pending.len() as u64;
        counters.busy = self.replica.busy();
        let stopped = self.replica.stop();
        ServeReport {
            node: self.me,
            load: total_load(&stopped),
            digests: stopped.iter().map(|s| s.partition.digest()).collect(),
            cpu_ns: stopped.iter().map(|s| s.cpu_ns).collect(),
            measured_ns: self.measured_ns,
            counters,
            stopped,
        }
    }

    fn propose(&mut self, g: GroupId, payload: Vec<u8>) {
        if self.bcast.propose(g, &payload).is_ok() {
            self.counters.proposed += 1;
        } else {
            self.counters.deferred += 1;
            self.deferred.push_back((g, payload));
        }
    }

    fn apply<T: Transport<ServeMsg>>(&mut self, net: &mut T) {
        while let Some(d) = self.bcast.next_delivery() {
            match d {
                Delivery::Entry { group, payload, .. } => {
                    if self.stopped.get(group as usize).is_none_or(|&s| s) {
                        continue;
                    }
                    self.counters.delivered += 1;
                    if let Some((id, groups)) = payload_header(&payload, self.replica.partitions())
                    {
                        if let Some(p) = self.pending.get_mut(&id) {
                            p.missing.retain(|g| *g != group);
                            if p.missing.is_empty() {
                                self.pending.remove(&id);
                            }
                        }
                        if groups.len() > 1 {
                            self.note_partial(id, group, &groups, &payload);
                        }
                    }
                    self.replica.deliver(group as PartitionId, payload.to_vec());
                }
                Delivery::Restore { group, state, .. } => self.restore(group, &state),
            }
        }
        self.bcast.send_all(net, ServeMsg::Bcast);
    }

    /// Moves the run on by the transport's clock.
    fn advance(&mut self, now: u64) {
        self.stage = match self.stage {
            Stage::Electing => {
                let groups = self.replica.partitions() as GroupId;
                let ready = |g| {
                    self.bcast.leader(g).is_some()
                        && self.bcast.group(g).is_some_and(|m| !m.is_joining())
                };
                if (0..groups).all(ready) {
                    if let Some(f) = self.on_ready.take() {
                        f();
                    }
                    self.replica.set_load(true);
                    Stage::Warmup(now + self.warmup_ns)
                } else {
                    Stage::Electing
                }
            }
            Stage::Warmup(until) if now >= until => {
                self.replica.set_measuring(true);
                Stage::Measure(now, now + self.duration_ns)
            }
            Stage::Measure(from, until) if now >= until => {
                self.replica.set_measuring(false);
                self.replica.set_load(false);
                self.measured_ns = now - from;
                Stage::Drain(0)
            }
            Stage::Drain(quiet) => {
                if self.replica.busy() > 0 {
                    Stage::Drain(0)
                } else if quiet >= 3 {
                    if let Some(f) = self.on_done.take() {
                        f();
                    }
                    Stage::Done
                } else {
                    Stage::Drain(quiet + 1)
                }
            }
            s => s,
        };
    }
}

impl Node for ReplicaNode {
    type Msg = ServeMsg;

    fn on_message<T: Transport<ServeMsg>>(&mut self, net: &mut T, from: Addr, msg: ServeMsg) {
        match msg {
            ServeMsg::Bcast(m) => {
                if self.bcast.step(from, &m).is_err() {
                    self.counters.refused_messages += 1;
                }
            }
            ServeMsg::Propose(parts, payload) => {
                if from != self.me {
                    self.counters.refused_messages += 1;
                } else if let Some((&last, rest)) = parts.split_last() {
                    if let Some(id) = payload_txn(&payload) {
                        let proposal = Proposal {
                            payload: payload.clone(),
                            missing: parts.iter().map(|&p| p as GroupId).collect(),
                            at: self.now,
                        };
                        self.pending.insert(id, proposal);
                    }
                    for &p in rest {
                        self.propose(p as GroupId, payload.clone());
                    }
                    self.propose(last as GroupId, payload);
                }
            }
        }
        self.apply(net);
    }

    fn on_tick<T: Transport<ServeMsg>>(&mut self, net: &mut T) {
        let now = net.now();
        self.now = now;
        self.bcast.tick(now);
        self.repropose();
        self.finish_partial();
        if let Some(probe) = &self.probe {
            let groups = self.replica.partitions().min(64) as GroupId;
            let leads = (0..groups)
                .filter(|&g| self.bcast.leader(g) == Some(self.me))
                .fold(0u64, |m, g| m | 1 << g);
            probe
                .leads
                .store(leads, std::sync::atomic::Ordering::Release);
        }
        for _ in 0..self.deferred.len() {
            let Some((g, payload)) = self.deferred.pop_front() else {
                break;
            };
            self.propose(g, payload);
        }
        self.advance(now);
        self.apply(net);
        self.snapshots();
    }
}

/// What one replica's run measured.
pub struct ServeReport {
    /// The replica.
    pub node: Addr,
    /// Its clients' counters over the measured window.
    pub load: LoadStats,
    /// Per partition, the digest of its committed state.
    pub digests: Vec<u64>,
    /// Per partition, CPU time of its worker thread (ns).
    pub cpu_ns: Vec<u64>,
    /// Length of the measured window (ns; 0 if the run stopped before it ended).
    pub measured_ns: u64,
    /// The broadcast side's counters.
    pub counters: NodeCounters,
    /// The partitions as their workers handed them back (with the recorded logs when asked).
    pub stopped: Vec<Stopped>,
}

/// The `q` quantile of `v` (sorted in place), 0 when empty.
pub fn quantile(v: &mut [u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[((v.len() - 1) as f64 * q).round() as usize]
}

impl ServeReport {
    /// The report as `name value` lines (the node's `--stats` file).
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut out = format!("node {}\n", self.node);
        out.push_str(&Self::load_text(&self.load, self.measured_ns));
        let mut line = |name: &str, v: u64| {
            let _ = writeln!(out, "{name} {v}");
        };
        for (p, d) in self.digests.iter().enumerate() {
            line(&format!("digest.{p}"), *d);
        }
        for (p, c) in self.cpu_ns.iter().enumerate() {
            line(&format!("cpu_ns.{p}"), *c);
        }
        let c = &self.counters;
        line("delivered", c.delivered);
        line("proposed", c.proposed);
        line("deferred", c.deferred);
        line("refused_messages", c.refused_messages);
        line("refused_restores", c.refused_restores);
        line("restores", c.restores);
        line("snapshots", c.snapshots);
        line("reproposed", c.reproposed);
        line("rebroadcasts", c.rebroadcasts);
        line("undelivered", c.undelivered);
        line("busy", c.busy);
        let again = self
            .stopped
            .iter()
            .map(|s| s.partition.stats().answered_again);
        line("answered_again", again.sum());
        out
    }

    /// Clients' counters as `name value` lines: the measured window, committed and aborted
    /// transactions, and per type the counts and latency percentiles.
    pub fn load_text(load: &LoadStats, measured_ns: u64) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let mut line = |name: &str, v: u64| {
            let _ = writeln!(out, "{name} {v}");
        };
        line("measured_ns", measured_ns);
        line("committed", load.committed());
        line("aborted", load.aborted());
        let mut kinds: Vec<_> = load.by_kind.iter().collect();
        kinds.sort();
        for (kind, (c, a)) in kinds {
            line(&format!("kind.{kind}.committed"), *c);
            line(&format!("kind.{kind}.aborted"), *a);
            let mut lat = load.kind_latencies.get(kind).cloned().unwrap_or_default();
            for (name, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)] {
                line(&format!("kind.{kind}.{name}_ns"), quantile(&mut lat, q));
            }
        }
        out
    }
}

/// The replica of node `id` of the cluster `cfg` (which has a `[pdur]` table), loaded, with its
/// proposals going to `propose`; `record` keeps what a `check` history needs.
pub fn start_replica(
    table: &PdurTable,
    id: Addr,
    propose: UnboundedSender<ServeMsg>,
    record: bool,
    first_seq: u64,
) -> Result<ThreadedReplica, String> {
    let workload = Workload::from_table(table)?;
    let data_seed = table.seed;
    let broadcast: super::threaded::Broadcaster = std::sync::Arc::new(move |parts, payload| {
        let _ = propose.send(ServeMsg::Propose(parts.to_vec(), payload));
    });
    Ok(ThreadedReplica::start(
        workload.partitions(),
        move |p, put| workload.fill(data_seed, p, put),
        Some(LocalLoad {
            clients_per_partition: if table.local_clients {
                table.clients_per_partition as usize
            } else {
                0
            },
            generators: workload.generators(table.seed ^ (u64::from(id) << 32)),
            replica: u8::try_from(id).map_err(|_| "at most 255 replicas".to_string())?,
            broadcast: Some(broadcast),
            first_seq,
        }),
        record,
    ))
}

/// The broadcast settings of a `[pdur]` table.
pub fn broadcast_config(table: &PdurTable) -> BroadcastConfig {
    let tick_ns = table.tick_us * 1_000;
    BroadcastConfig {
        tick_ns,
        // Elections after 100–200 ms whatever the tick, heartbeats every 2 ticks.
        election_ticks: (100_000_000 / tick_ns).max(4) as usize,
        heartbeat_ticks: 2,
        batch_bytes: table.batch_bytes as usize,
        snapshot_entries: table.snapshot_entries,
        retained_entries: (table.snapshot_entries / 10).max(1),
        snapshot_chunk_bytes: table.snapshot_chunk_bytes as usize,
        seed: table.seed,
        ..BroadcastConfig::default()
    }
}

/// How [`serve`] runs a node besides its cluster file.
#[derive(Default)]
pub struct ServeOptions {
    /// Keep what a `check` history needs ([`ServeReport::stopped`]).
    pub record: bool,
    /// Called once the load is over and the replica quiet.
    pub on_done: Option<Box<dyn FnOnce() + Send>>,
    /// Where to publish which groups the node leads (tests that crash a leader).
    pub probe: Option<std::sync::Arc<Probe>>,
    /// 0 for a node starting with the cluster; above 0 (and above every earlier one) for a node
    /// restarted without storage, which rejoins the running cluster ([`ReplicaNode::rejoining`]).
    pub incarnation: u32,
}

/// Serves node `id` of `cfg` until `shutdown` completes: loads the replica, runs its load through
/// the stages of [`Stage`] (calling `on_done` when it is over), and returns what it measured.
pub async fn serve(
    cfg: &ClusterConfig,
    id: Addr,
    listener: Option<std::net::TcpListener>,
    shutdown: impl Future<Output = ()>,
    opts: ServeOptions,
) -> Result<ServeReport, String> {
    let table = cfg
        .pdur
        .as_ref()
        .ok_or("the cluster file has no [pdur] table")?;
    let me = cfg
        .node(id)
        .ok_or_else(|| format!("node {id} is not in the cluster"))?
        .addr;
    let (tx, rx) = unbounded_channel();
    let ServeOptions {
        record,
        on_done,
        probe,
        incarnation,
    } = opts;
    let mut replica = start_replica(table, id, tx, record, first_seq(incarnation))?;
    // The client endpoint's port is taken now (clients may connect and wait), its sessions served
    // once the node has caught up.
    let endpoint: std::sync::Arc<std::sync::Mutex<Option<Result<Endpoint, String>>>> =
        Default::default();
    let start_endpoint: Option<Box<dyn FnOnce() + Send>> = match table.client_addrs.get(id as usize)
    {
        Some(&addr) => {
            let l = std::net::TcpListener::bind(addr)
                .map_err(|e| format!("cannot serve clients on {addr}: {e}"))?;
            let (handle, decisions) = (replica.handle(), replica.take_decisions());
            let slot = endpoint.clone();
            Some(Box::new(move || {
                let started = Endpoint::start(l, handle, decisions)
                    .map_err(|e| format!("cannot serve clients on {addr}: {e}"));
                *slot.lock().expect("not poisoned") = Some(started);
            }))
        }
        None => None,
    };
    let replicas: Vec<Addr> = cfg.nodes.iter().map(|n| n.id).collect();
    let mut node = ReplicaNode::new(
        id,
        &replicas,
        broadcast_config(table),
        replica,
        Duration::from_millis(table.warmup_ms),
        Duration::from_millis(table.duration_ms),
        on_done,
    )?
    .rebroadcast_after(table.rebroadcast_ms.saturating_mul(1_000_000))?;
    if incarnation > 0 {
        node = node.rejoining(&replicas, broadcast_config(table), incarnation)?;
    }
    if let Some(probe) = probe {
        node = node.with_probe(probe);
    }
    if let Some(f) = start_endpoint {
        node = node.on_ready(f);
    }
    let peers: Vec<(Addr, SocketAddr)> = cfg.nodes.iter().map(|n| (n.id, n.addr)).collect();
    let mut opts = TcpOptions::new(id, peers);
    match listener {
        Some(l) => opts.listener = Some(l),
        None => opts.listen = Some(me),
    }
    opts.tick = Duration::from_micros(table.tick_us);
    opts.poll = Duration::from_micros(cfg.net.poll_us);
    opts.delay = Duration::from_micros(cfg.net.delay_us);
    opts.inject = Some(rx);
    let served = phasedb_net::tcp::run(&mut node, opts, shutdown).await;
    let endpoint = match endpoint.lock().expect("not poisoned").take() {
        Some(Ok(e)) => {
            e.stop();
            Ok(())
        }
        Some(Err(e)) => Err(e),
        None => Ok(()),
    };
    served.map_err(|e| format!("cannot serve on {me}: {e}"))?;
    endpoint?;
    Ok(node.finish(Duration::from_secs(2)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables_snapshot_settings_reach_the_broadcast_and_pass_its_checks() {
        let table = PdurTable {
            snapshot_entries: 500,
            snapshot_chunk_bytes: 64 << 10,
            ..PdurTable::new(2)
        };
        let b = broadcast_config(&table);
        assert_eq!(
            (b.snapshot_entries, b.snapshot_chunk_bytes),
            (500, 64 << 10)
        );
        assert!(b.validate().is_ok());
        let largest = PdurTable {
            snapshot_chunk_bytes: phasedb_net::wire::MAX_FRAME as u64 / 2,
            ..PdurTable::new(2)
        };
        assert!(
            largest.validate(3).is_ok() && broadcast_config(&largest).validate().is_ok(),
            "what the table accepts, the broadcast accepts"
        );
    }
}
