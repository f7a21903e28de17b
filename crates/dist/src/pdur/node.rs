//! [`PdurNode`]: a P-DUR replica as a cluster node (Pacheco et al., §IV–V), sans-I/O so the same
//! state machine runs over TCP and under the deterministic simulator.
//!
//! The node holds one deterministic [`Replica`] of `P` partitions and one atomic broadcast group
//! per partition over every replica ([`Broadcast`]; DUR is `P = 1`). Its own clients run
//! Algorithm 3 against the local replica; an update transaction's [`CertRequest`] is proposed to
//! the group of every partition it touched, and each group's deliveries are handed to
//! [`Replica::deliver`] in order, the cross-partition votes exchanged inside the replica. A
//! client waits for its transaction's decision at its first partition; a request not decided
//! within [`PdurConfig::retry_ns`] (its proposal died with a leader) is proposed again to all its
//! partitions, and another replica's cross-partition request undecided here for
//! [`PdurConfig::rebroadcast_ns`] (its client's replica may have died between its proposals) is
//! broadcast again by this one — a partition that delivered it before ignores the copy and repeats an abort vote
//! only where none was counted, so re-broadcast is always safe.
//!
//! State transfer (snapshot plus log): whenever a group's snapshot is due the node offers every
//! group the image of its partition ([`Partition::image`]) at the group's delivered position, all
//! at the same point, and the groups compact their logs behind them. A replica that restarts —
//! with its broadcast storage ([`Node::on_crash`]) or empty, rejoining under a new raft id
//! ([`PdurNode::rejoining`]) — gets each group's snapshot from its leader when its log is behind
//! the compacted prefix ([`Delivery::Restore`]), rebuilds the partition from it
//! ([`Replica::restore`]) and then applies the log after it. A restarted replica's clients number
//! their transactions from its incarnation on, above anything its earlier life broadcast.

use std::collections::VecDeque;

use bytes::Bytes;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::client::{Finish, Transaction};
use super::history::HistoryRecorder;
use super::partition::{Answer, Decision, Partition};
use super::replica::Replica;
use super::request::{CertRequest, PartitionId, TxnId, first_seq, partition_of};
use super::workload::micro::{MicroConfig, MicroGen};
use super::workload::{Generator, execute};
use crate::broadcast::{Broadcast, BroadcastConfig, Delivery, GroupId, GroupMsg};
use phasedb_net::{Addr, Node, Transport};

/// Clients per node at most: a client's [`TxnId::origin`] is `node * MAX_CLIENTS + i`.
pub const MAX_CLIENTS: usize = 1024;

/// What P-DUR nodes exchange.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PdurMsg {
    /// A message of one partition's broadcast group.
    Bcast(GroupMsg),
}

/// How a P-DUR node runs.
#[derive(Clone, Debug)]
pub struct PdurConfig {
    /// Every replica of the cluster (each a member of every partition's group).
    pub replicas: Vec<Addr>,
    /// The micro-benchmark the node's clients run (its `partitions` is the replica's `P`).
    pub micro: MicroConfig,
    /// Clients of this node, each running one transaction at a time (at most [`MAX_CLIENTS`]).
    pub clients: usize,
    /// The broadcast's settings.
    pub bcast: BroadcastConfig,
    /// An update transaction not decided after this long (ns) is proposed again.
    pub retry_ns: u64,
    /// A cross-partition request of another replica's client delivered here and not decided
    /// after this long (ns, above 0) is broadcast again to all its partitions
    /// ([`PdurNode`]'s partial broadcasts; the cluster file's `[pdur] rebroadcast_ms` sets the
    /// same delay for `phasedb node`). Twice `retry_ns` lets a live client's replica retry first.
    pub rebroadcast_ns: u64,
    /// Clients start transactions only while the transport's clock is below this (ns; `u64::MAX`:
    /// always), so a timed run over TCP ends with the cluster quiescing.
    pub load_until_ns: u64,
    /// Keep the committed history (for the `check` crate); costs a copy of every request.
    pub record_history: bool,
    /// Seed of the clients' transaction choice (mixed with the node's address).
    pub seed: u64,
}

/// Counters of one node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PdurStats {
    /// This node's update transactions committed.
    pub committed: u64,
    /// This node's update transactions aborted by certification.
    pub aborted: u64,
    /// This node's read-only transactions committed.
    pub read_only: u64,
    /// Transactions given up at execution (a read of a collected snapshot, a read-only check).
    pub failed: u64,
    /// Requests proposed again after [`PdurConfig::retry_ns`].
    pub retries: u64,
    /// Other replicas' cross-partition requests broadcast again after they stayed undecided.
    pub rebroadcasts: u64,
    /// Proposals the broadcast refused (too much gathered); retried later.
    pub refused_proposals: u64,
    /// Payloads delivered (all partitions).
    pub delivered: u64,
    /// Delivered payloads the replica refused (every replica refuses the same bytes).
    pub refused_payloads: u64,
    /// Restores refused (an image that does not decode): the group stops being applied here.
    pub refused_restores: u64,
    /// Partitions restored from a snapshot's image or reset to the loaded state.
    pub restores: u64,
    /// Snapshots offered to the groups (one per group at each point).
    pub snapshots: u64,
    /// This node's transactions whose outcome came told again ([`super::partition::Answer`]): a
    /// restore covered their decision and a retry's copy was delivered after it.
    pub answered_again: u64,
    /// Messages the broadcast refused.
    pub refused_messages: u64,
}

/// A client's update transaction waiting for its decision.
struct Pending {
    slot: usize,
    payload: Vec<u8>,
    partitions: Vec<PartitionId>,
    proposed_at: u64,
}

/// One P-DUR replica node with its own clients.
pub struct PdurNode {
    me: Addr,
    cfg: PdurConfig,
    replica: Replica,
    bcast: Broadcast,
    txns: MicroGen,
    /// Per client slot: its next sequence number and whether it is waiting for a decision.
    seqs: Vec<u64>,
    busy: Vec<bool>,
    pending: FxHashMap<TxnId, Pending>,
    /// Groups whose deliveries are no longer applied (a refused restore).
    stopped: Vec<bool>,
    /// Lives of this node (0 first): its clients' sequence numbers start at [`first_seq`].
    incarnation: u32,
    /// Transactions started so far; new ones stop at `limit`.
    started: u64,
    limit: u64,
    history: Option<HistoryRecorder>,
    decided: Vec<Decision>,
    stats: PdurStats,
    retry_queue: VecDeque<TxnId>,
    /// Cross-partition requests delivered here and not yet decided, with their payload and when
    /// they were last broadcast: if their client's replica crashed after a partial broadcast, a
    /// survivor finishes it.
    undecided: FxHashMap<TxnId, (Bytes, u64)>,
}

impl PdurNode {
    /// Node `me` (one of `cfg.replicas`), its replica loaded with the micro-benchmark's items.
    pub fn new(me: Addr, cfg: PdurConfig) -> Result<PdurNode, String> {
        PdurNode::start(me, cfg, 0)
    }

    /// Node `me` restarted without any storage (a process that died) in its `incarnation`-th
    /// life (above 0, above every earlier one): it rejoins every group under a new raft id and
    /// catches up by state transfer and log.
    pub fn rejoining(me: Addr, cfg: PdurConfig, incarnation: u32) -> Result<PdurNode, String> {
        if incarnation == 0 {
            return Err("a rejoining node needs an incarnation above 0".into());
        }
        PdurNode::start(me, cfg, incarnation)
    }

    fn start(me: Addr, cfg: PdurConfig, incarnation: u32) -> Result<PdurNode, String> {
        let p = cfg.micro.partitions;
        if cfg.clients > MAX_CLIENTS {
            return Err(format!("at most {MAX_CLIENTS} clients per node"));
        }
        if !cfg.replicas.contains(&me) {
            return Err(format!(
                "node {me} is not among the replicas {:?}",
                cfg.replicas
            ));
        }
        if p == 0 || p > PartitionId::MAX as usize {
            return Err("1 to 65535 partitions".into());
        }
        if cfg.rebroadcast_ns == 0 {
            return Err("rebroadcast_ns must be positive".into());
        }
        let mut bcast = Broadcast::new(me, cfg.bcast.clone()).map_err(|e| e.to_string())?;
        for g in 0..p {
            let added = if incarnation == 0 {
                bcast.add_group(g as GroupId, &cfg.replicas)
            } else {
                bcast.join_group(g as GroupId, &cfg.replicas, incarnation)
            };
            added.map_err(|e| e.to_string())?;
        }
        let mut replica = Replica::new(p);
        cfg.micro.load(|k, v| replica.load(k, v));
        let txns = MicroGen::new(cfg.micro, cfg.seed ^ (u64::from(me) << 32));
        Ok(PdurNode {
            me,
            replica,
            bcast,
            txns,
            seqs: vec![first_seq(incarnation); cfg.clients],
            busy: vec![false; cfg.clients],
            pending: FxHashMap::default(),
            stopped: vec![false; p],
            incarnation,
            started: 0,
            limit: u64::MAX,
            history: cfg.record_history.then(|| HistoryRecorder::new(p)),
            decided: Vec::new(),
            stats: PdurStats::default(),
            retry_queue: VecDeque::new(),
            undecided: FxHashMap::default(),
            cfg,
        })
    }

    /// This node's address.
    pub fn me(&self) -> Addr {
        self.me
    }

    /// The replica.
    pub fn replica(&self) -> &Replica {
        &self.replica
    }

    /// The broadcast groups.
    pub fn broadcast(&self) -> &Broadcast {
        &self.bcast
    }

    /// The counters.
    pub fn stats(&self) -> PdurStats {
        self.stats
    }

    /// The committed history recorded so far (with [`PdurConfig::record_history`]).
    pub fn history(&self) -> Option<&HistoryRecorder> {
        self.history.as_ref()
    }

    /// Every decision of this replica's partitions, in the order taken (with
    /// [`PdurConfig::record_history`]).
    pub fn decisions(&self) -> &[Decision] {
        &self.decided
    }

    /// Stops starting transactions once `limit` were started (0: stop now); those under way finish.
    pub fn set_limit(&mut self, limit: u64) {
        self.limit = limit;
    }

    /// Update transactions of this node waiting for their decision.
    pub fn undecided(&self) -> usize {
        self.pending.len()
    }

    /// Starts a transaction in every idle client while under the limit.
    fn run_clients(&mut self, now: u64) {
        let p = self.cfg.micro.partitions;
        for slot in 0..self.cfg.clients {
            if self.busy[slot] || self.started >= self.limit || now >= self.cfg.load_until_ns {
                continue;
            }
            self.started += 1;
            self.seqs[slot] += 1;
            let id = TxnId {
                origin: self.me * MAX_CLIENTS as u32 + slot as u32,
                seq: self.seqs[slot],
            };
            let mut logic = self.txns.next_txn((slot % p) as PartitionId);
            let tx = Transaction::begin(id, p);
            match execute(tx, logic.as_mut(), &mut self.replica) {
                Err(_) => self.stats.failed += 1,
                Ok(Finish::ReadOnly { committed, reads }) => {
                    if committed {
                        self.stats.read_only += 1;
                        if let Some(h) = &mut self.history {
                            h.read_only(id, reads);
                        }
                    } else {
                        self.stats.failed += 1;
                    }
                }
                Ok(Finish::Update(req)) => {
                    let pending = Pending {
                        slot,
                        payload: req.encode(),
                        partitions: req.partitions().collect(),
                        proposed_at: now,
                    };
                    self.busy[slot] = true;
                    self.propose(&pending);
                    self.pending.insert(id, pending);
                }
            }
        }
    }

    fn propose(&mut self, pending: &Pending) {
        for &q in &pending.partitions {
            if self.bcast.propose(q as GroupId, &pending.payload).is_err() {
                self.stats.refused_proposals += 1;
            }
        }
    }

    /// Proposes again every request undecided for longer than the retry timeout.
    fn retry(&mut self, now: u64) {
        self.retry_queue.extend(
            self.pending
                .iter()
                .filter(|(_, w)| now.saturating_sub(w.proposed_at) >= self.cfg.retry_ns)
                .map(|(id, _)| *id),
        );
        while let Some(id) = self.retry_queue.pop_front() {
            let Some(mut w) = self.pending.remove(&id) else {
                continue;
            };
            w.proposed_at = now;
            self.stats.retries += 1;
            self.propose(&w);
            self.pending.insert(id, w);
        }
    }

    /// Broadcasts again, to all its partitions, a cross-partition request of another replica's
    /// client delivered here but undecided for [`PdurConfig::rebroadcast_ns`]: its client's
    /// replica may have crashed after broadcasting it to only some partitions, which would wait
    /// for the others' votes forever (termination assumes every partition named delivers it).
    fn finish_partial(&mut self, now: u64) {
        let late = self.cfg.rebroadcast_ns;
        for (id, (payload, at)) in self.undecided.iter_mut() {
            if self.pending.contains_key(id) || now.saturating_sub(*at) < late {
                continue;
            }
            *at = now;
            self.stats.rebroadcasts += 1;
            let Ok(req) = CertRequest::decode(payload, self.replica.partitions()) else {
                continue;
            };
            for q in req.partitions() {
                if self.bcast.propose(q as GroupId, payload).is_err() {
                    self.stats.refused_proposals += 1;
                }
            }
        }
    }

    /// Applies every delivery in order, then the votes and decisions they produced.
    fn apply_deliveries(&mut self, now: u64) {
        while let Some(d) = self.bcast.next_delivery() {
            match d {
                Delivery::Entry { group, payload, .. } => {
                    let g = group as usize;
                    if g >= self.stopped.len() || self.stopped[g] {
                        continue;
                    }
                    self.stats.delivered += 1;
                    let p = group as PartitionId;
                    let req = match CertRequest::decode(&payload, self.replica.partitions()) {
                        Ok(r) => r,
                        Err(_) => {
                            self.stats.refused_payloads += 1;
                            continue;
                        }
                    };
                    if let Some(h) = &mut self.history {
                        h.broadcast(&req);
                    }
                    let (id, cross) = (req.id, req.is_cross_partition());
                    if self.replica.deliver_request(p, req).is_err() {
                        self.stats.refused_payloads += 1;
                        continue;
                    }
                    self.replica.settle();
                    // Only a request left waiting for votes (not a duplicate, not decided at
                    // once) may need finishing.
                    if cross
                        && self
                            .replica
                            .partition(p)
                            .waiting_for_votes()
                            .any(|(t, _)| t == id)
                    {
                        self.undecided.entry(id).or_insert((payload, now));
                    }
                }
                Delivery::Restore { group, state, .. } => self.restore(group, &state),
            }
        }
        for d in self.replica.take_decisions() {
            self.undecided.remove(&d.txn);
            if let Some(h) = &mut self.history {
                h.decided(&d);
                self.decided.push(d);
            }
            if !d.reply {
                continue;
            }
            self.end_wait(Answer::from(&d));
        }
        for a in self.replica.take_answers() {
            if self.pending.contains_key(&a.txn) {
                self.stats.answered_again += 1;
            }
            self.end_wait(a);
        }
    }

    /// Ends the wait of this node's client for transaction `a.txn`, if it still waits.
    fn end_wait(&mut self, a: Answer) {
        if let Some(w) = self.pending.remove(&a.txn) {
            self.busy[w.slot] = false;
            match a.committed {
                true => self.stats.committed += 1,
                false => self.stats.aborted += 1,
            }
        }
    }

    /// Rebuilds partition `group` from a snapshot's image, or (an empty state: the group has no
    /// snapshot yet) as loaded; a refused image stops the group here.
    fn restore(&mut self, group: GroupId, state: &[u8]) {
        let (g, parts) = (group as usize, self.replica.partitions());
        if g >= parts {
            return;
        }
        let p = group as PartitionId;
        let part = if state.is_empty() {
            let mut part = Partition::new(p, parts);
            self.cfg.micro.load(|k, v| {
                if partition_of(k, parts) == p {
                    part.load(k, v);
                }
            });
            Ok(part)
        } else {
            Partition::from_image(p, parts, state)
        };
        match part {
            Ok(part) => {
                self.stopped[g] = false;
                self.stats.restores += 1;
                if let Some(h) = &mut self.history {
                    h.restored(p, part.recent_outcomes());
                }
                self.replica.restore(p, part);
                self.replica.settle();
            }
            Err(_) => {
                self.stopped[g] = true;
                self.stats.refused_restores += 1;
            }
        }
    }

    /// Offers every group its partition's image at once when any group's snapshot is due, so a
    /// rejoining replica's partitions come from nearby points.
    fn offer_snapshots(&mut self) {
        if self.bcast.snapshots_due().next().is_none() {
            return;
        }
        for g in 0..self.replica.partitions() as GroupId {
            let Some(index) = self.bcast.delivered(g) else {
                continue;
            };
            let image = self.replica.partition(g as PartitionId).image();
            if self.bcast.offer_snapshot(g, index, image).is_ok() {
                self.stats.snapshots += 1;
            }
        }
    }

    fn flush<T: Transport<PdurMsg>>(&mut self, net: &mut T) {
        self.apply_deliveries(net.now());
        self.bcast.send_all(net, PdurMsg::Bcast);
    }
}

impl Node for PdurNode {
    type Msg = PdurMsg;

    fn on_message<T: Transport<PdurMsg>>(&mut self, net: &mut T, from: Addr, msg: PdurMsg) {
        match msg {
            PdurMsg::Bcast(m) => {
                if self.bcast.step(from, &m).is_err() {
                    self.stats.refused_messages += 1;
                }
            }
        }
        self.flush(net);
    }

    fn on_tick<T: Transport<PdurMsg>>(&mut self, net: &mut T) {
        let now = net.now();
        self.bcast.tick(now);
        self.flush(net);
        self.retry(now);
        self.finish_partial(now);
        self.run_clients(now);
        self.flush(net);
        self.offer_snapshots();
    }

    /// The node loses everything but its broadcast storage: its clients start over in a new
    /// incarnation, and its partitions are rebuilt from the groups' snapshots and logs.
    fn on_crash(&mut self) {
        self.incarnation += 1;
        let base = first_seq(self.incarnation);
        self.seqs.iter_mut().for_each(|s| *s = base);
        self.busy.iter_mut().for_each(|b| *b = false);
        self.pending.clear();
        self.retry_queue.clear();
        self.undecided.clear();
        if self.bcast.restart().is_err() {
            self.stopped.iter_mut().for_each(|s| *s = true);
        }
    }
}
