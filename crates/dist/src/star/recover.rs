//! Recovery of a restarted node (STAR §7.2): it comes back empty, copies its partitions from live
//! replicas while it receives the replication stream, and applies both with the Thomas write rule.
//!
//! - **Starting.** Every node says [`StarMsg::Hello`] with its incarnation (a number that differs
//!   from one start of the node to the next) to every other node when it starts, and again every
//!   heartbeat until it has begun a phase. The coordinator of a new cluster begins phase 1 once
//!   every other node has said hello. A node that hears a hello from a node it declared failed,
//!   or from a live node under a new incarnation (it restarted before its silence was noticed:
//!   it is declared failed first), knows the node restarted; the coordinator (or, when the
//!   restarted node is the coordinator, its successor, which takes over) starts its rejoin. A
//!   restarted node never begins a phase by itself: nobody sends it hello, so it waits for the
//!   rejoin.
//! - **Rejoin.** The coordinator picks the phase `P` after its current one and tells every live
//!   node and the restarted node [`StarMsg::Rejoin`] (the layout from `P` on and its view); it
//!   begins `P` only once every live node acknowledged, so every node takes the restarted node
//!   back at its begin of `P`, before it runs anything in `P`: the node holds the partitions of its
//!   configured placement again as their last secondary ([`Layout::rejoin`]), every replication
//!   stream to it starts afresh, and every fence waits for it. While a node recovers, every node
//!   replicates values only (§7.2: "in recovery mode, STAR uses only value replication"), which
//!   the Thomas write rule applies in any order against the copy.
//! - **Copy.** At its begin of `P` the restarted node asks, for each partition it holds, one live
//!   replica that is not itself recovering for a copy ([`StarMsg::CopyRequest`]); sources are
//!   spread over the partition's holders so partitions are copied from several nodes at once. The
//!   source walks the partition's rows a table part at a time between its own transactions and
//!   sends them as numbered [`StarMsg::CopyChunk`]s of about [`CHUNK_BYTES`];
//!   the restarted node installs each with [`phasedb_txn::Database::install_copy`]. Any source
//!   state read after the fence of `P - 1` holds every write of the phases before `P`, and every
//!   write from `P` on also reaches the restarted node in the stream, so copy and stream together
//!   hold every write, and the later version of each column group wins (§7.3, property 2).
//! - **Back in the cycle.** Once every partition's chunks are installed the node tells the
//!   coordinator [`StarMsg::Recovered`]; the coordinator announces it, and each node ends value-only
//!   replication at its next phase begin, after a fence that brought the node's copy up to date.
//!   The node stays a secondary: its partitions stay mastered where fail-over put them, and a
//!   restarted coordinator does not take its role back. Moving primaries back would hand queued
//!   requests from one master to another and, for a coordinator, move the single-master phase
//!   again, for a gain in balance only; the layout stays as fail-over left it.
//!
//! What it assumes: one failure at a time during a recovery. A restarted node that fails again is
//! declared failed like any and may restart again; a source that fails is replaced for the
//! partitions it was copying. What it does not handle: a failure of another node while the copy
//! runs that takes back writes the copy already carried (the restarted node keeps them).

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;
use serde::de::DeserializeOwned;

use phasedb_net::{Addr, Transport};
use phasedb_txn::{PartitionId, Procedures};

use crate::star::layout::Layout;
use crate::star::msg::{Phase, StarMsg};
use crate::star::node::StarNode;
use crate::star::replicate::Outbox;
use crate::star::requests::Queues;
use crate::star::stats::RecoveryStats;

/// A copy chunk is sent once it holds this many bytes.
pub const CHUNK_BYTES: usize = 1 << 20;

/// One partition being copied to a restarted node, on its source.
struct Job {
    to: Addr,
    partition: PartitionId,
    table: u32,
    part: usize,
    seq: u64,
}

/// A partition the restarted node waits for.
struct Incoming {
    source: Addr,
    received: u64,
    /// The number of the last chunk, once it arrived.
    last: Option<u64>,
}

/// What a node knows of starts, rejoins and copies.
pub(crate) struct Recovery {
    incarnation: u64,
    /// Per node, the incarnation it last said hello with.
    incarnations: Vec<Option<u64>>,
    /// When this node last said hello.
    last_hello: Option<u64>,
    /// On the coordinator: rejoins in progress, with the phase they take effect in and, per
    /// node, whether it acknowledged. Elsewhere: rejoins to apply at a phase's begin.
    rejoins: Vec<(Addr, Phase, Vec<bool>)>,
    /// On the coordinator: the phase whose begin waits for acknowledgements.
    held_begin: Option<Phase>,
    /// Restarted nodes announced recovered, taken in at the next begin.
    recovered: Vec<Addr>,
    /// Per node, the view of the last rejoin it was told of: an announcement of a failure it
    /// had before (with a view not above) is stale.
    rejoined_at: Vec<u64>,
    /// On a restarted node: the rejoin it was told of (its phase and view).
    joining: Option<(Phase, u64)>,
    /// On a restarted node: partitions still being copied.
    incoming: BTreeMap<PartitionId, Incoming>,
    /// On a source: partitions being copied out.
    jobs: VecDeque<Job>,
    buf: Vec<u8>,
    pub(crate) stats: RecoveryStats,
}

impl Recovery {
    /// A node started as incarnation `incarnation` in a cluster of `nodes` nodes.
    pub(crate) fn new(nodes: u32, incarnation: u64) -> Recovery {
        Recovery {
            incarnation,
            incarnations: vec![None; nodes as usize],
            last_hello: None,
            rejoins: Vec::new(),
            rejoined_at: vec![0; nodes as usize],
            held_begin: None,
            recovered: Vec::new(),
            joining: None,
            incoming: BTreeMap::new(),
            jobs: VecDeque::new(),
            buf: Vec::new(),
            stats: RecoveryStats::default(),
        }
    }

    /// Whether a source has copies to send.
    pub(crate) fn copying_out(&self) -> bool {
        !self.jobs.is_empty()
    }

    /// Whether node `n` said hello (under any incarnation).
    fn said_hello(&self, n: Addr) -> bool {
        self.incarnations[n as usize].is_some()
    }
}

impl<'db, W> StarNode<'db, W>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    /// Says hello to every other node: at start, then every heartbeat until a phase began.
    pub(crate) fn say_hello<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        let now = net.now();
        if self.phase > 0
            || self
                .recovery
                .last_hello
                .is_some_and(|t| now.saturating_sub(t) < self.settings.heartbeat_ns)
        {
            return;
        }
        self.recovery.last_hello = Some(now);
        let incarnation = self.recovery.incarnation;
        for n in (0..self.layout.nodes()).filter(|&n| n != self.me) {
            net.send(n, StarMsg::Hello { incarnation });
        }
    }

    /// On the coordinator of a new cluster: whether every other node said hello (phase 1 may
    /// begin). A restarted node hears no hello and so never begins a phase by itself.
    pub(crate) fn all_said_hello(&self) -> bool {
        (0..self.layout.nodes()).all(|n| n == self.me || self.recovery.said_hello(n))
    }

    /// Node `from` said hello as `incarnation`.
    pub(crate) fn on_hello<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        from: Addr,
        incarnation: u64,
    ) {
        let known = self.recovery.incarnations[from as usize].replace(incarnation);
        let restarted = self.phase > 0
            && (self.layout.is_failed(from) || known.is_some_and(|k| k != incarnation));
        if !restarted {
            return;
        }
        let coordinator = self.layout.coordinator();
        if from == coordinator && self.successor() == Some(self.me) {
            self.take_over(net, from);
        } else if self.me != coordinator {
            return;
        }
        if !self.layout.is_failed(from) {
            self.declare_failed(net, from);
        }
        self.start_rejoin(net, from);
    }

    /// On the coordinator: restarted node `node` rejoins from the next phase; tells every live
    /// node and `node` (again, if it said hello again before that phase began).
    fn start_rejoin<T: Transport<StarMsg>>(&mut self, net: &mut T, node: Addr) {
        if self.liveness.lost.is_some() {
            return;
        }
        let phase = self.phase + 1;
        let nodes = self.layout.nodes() as usize;
        if !self.recovery.rejoins.iter().any(|r| r.0 == node) {
            let mut acked = vec![false; nodes];
            acked[self.me as usize] = true;
            for &n in self.layout.failed() {
                acked[n as usize] = true;
            }
            self.recovery.rejoins.push((node, phase, acked));
        }
        let Some((_, phase, acked)) = self.recovery.rejoins.iter().find(|r| r.0 == node) else {
            return;
        };
        let (phase, acked) = (*phase, acked.clone());
        let mut layout = self.layout.clone();
        for r in &self.recovery.rejoins {
            layout.rejoin(r.0);
        }
        let msg = StarMsg::Rejoin {
            node,
            phase,
            view: self.liveness.view,
            layout: Box::new(layout),
        };
        for n in (0..nodes as Addr).filter(|&n| n != self.me && (n == node || !acked[n as usize])) {
            net.send_copy(n, &msg);
        }
    }

    /// Restarted node `node` rejoins in `phase` with `layout` (from the coordinator).
    pub(crate) fn on_rejoin<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        node: Addr,
        phase: Phase,
        view: u64,
        layout: Layout,
    ) {
        if node == self.me {
            if self.phase > 0 {
                return;
            }
            if self.recovery.joining.is_none() {
                self.recovery.stats.started_ns = net.now().max(1);
            }
            self.recovery.joining = Some((phase, view));
            self.become_secondary(layout);
            return;
        }
        if self.phase >= phase || node >= self.layout.nodes() {
            return;
        }
        if !self.layout.is_failed(node) {
            // Its failure's announcement is still on the way: it would come after the rejoin.
            self.on_failed(net, node, phase - 1, view);
        }
        let at = &mut self.recovery.rejoined_at[node as usize];
        *at = (*at).max(view);
        if !self.recovery.rejoins.iter().any(|r| r.0 == node) {
            self.recovery.rejoins.push((node, phase, Vec::new()));
        }
        net.send(self.layout.coordinator(), StarMsg::RejoinAck { node });
    }

    /// On the restarted node: takes the cluster's `layout`, under which it masters nothing and
    /// coordinates nothing (partitions stay where fail-over put them).
    fn become_secondary(&mut self, layout: Layout) {
        if layout.coordinator() != self.me {
            self.coordinator = None;
            self.sm_worker = None;
        }
        self.masters
            .retain(|m| layout.primary(m.partition) == self.me);
        self.mastered = self.masters.iter().map(|m| m.partition).collect();
        if self.queues.queued() == 0 {
            self.queues = Queues::new(self.masters.len());
        }
        self.outbox = Outbox::new(self.me, &layout);
        let held = layout.held(self.me);
        let workload = self.workload;
        for t in 0..self.db.tables().len() as u32 {
            self.db.forget_rows(t, |key| {
                workload
                    .partition_of(t, key)
                    .is_some_and(|p| held.contains(&p))
            });
        }
        self.layout = layout;
    }

    /// Whether this node may begin `phase`: any once it is a member; at first only phase 1 (a
    /// new cluster's), or for a restarted node the phase it rejoins in.
    pub(crate) fn may_enter(&self, phase: Phase) -> bool {
        match self.recovery.joining {
            _ if self.phase > 0 => true,
            Some((p, _)) => phase >= p,
            None => phase == 1 && self.recovery.stats.started_ns == 0,
        }
    }

    /// Whether the announcement that `node` failed, as failure number `view`, predates its rejoin.
    pub(crate) fn stale_failure(&self, node: Addr, view: u64) -> bool {
        self.recovery
            .rejoined_at
            .get(node as usize)
            .is_some_and(|&at| view <= at)
    }

    /// On the coordinator: node `from` will take `node` back at the rejoin's phase.
    pub(crate) fn on_rejoin_ack<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        from: Addr,
        node: Addr,
    ) {
        if let Some(r) = self.recovery.rejoins.iter_mut().find(|r| r.0 == node)
            && let Some(a) = r.2.get_mut(from as usize)
        {
            *a = true;
        }
        if let Some(phase) = self.recovery.held_begin
            && self.rejoins_acked()
        {
            self.recovery.held_begin = None;
            self.begin_everywhere(net, phase);
        }
    }

    /// On the coordinator: whether every live node acknowledged every rejoin in progress.
    fn rejoins_acked(&self) -> bool {
        self.recovery.rejoins.iter().all(|r| {
            r.2.iter()
                .enumerate()
                .all(|(n, &a)| a || self.layout.is_failed(n as Addr) || n as Addr == r.0)
        })
    }

    /// On the coordinator, when every node ended the fence before `phase`: whether `phase` may
    /// begin now; if not, it begins once the rejoins in progress are acknowledged.
    pub(crate) fn may_begin(&mut self, phase: Phase) -> bool {
        if self.rejoins_acked() {
            return true;
        }
        self.recovery.held_begin = Some(phase);
        false
    }

    /// At the begin of `phase`: takes back the restarted nodes that rejoin in it, and ends
    /// recovery mode for those announced recovered. On the restarted node, asks for its copies.
    pub(crate) fn rejoin_at_begin<T: Transport<StarMsg>>(&mut self, net: &mut T, phase: Phase) {
        let mut joined = Vec::new();
        self.recovery.rejoins.retain(|r| {
            let due = r.1 <= phase;
            if due {
                joined.push(r.0);
            }
            !due
        });
        for node in joined {
            if node == self.me || !self.layout.is_failed(node) {
                continue;
            }
            self.layout.rejoin(node);
            self.outbox.rejoin(
                net,
                self.me,
                node,
                &self.layout,
                self.phase,
                &mut self.replication,
            );
            self.inbox.rejoin(node);
            self.fence.on_rejoin(node);
            self.liveness.rejoin(node, net.now());
            if let Some(c) = &mut self.coordinator {
                c.on_rejoin(node);
            }
        }
        for node in std::mem::take(&mut self.recovery.recovered) {
            self.layout.recovered(node);
        }
        if let Some((p, view)) = self.recovery.joining
            && p <= phase
        {
            self.recovery.joining = None;
            self.recovery.stats.rejoined_phase = phase;
            self.inbox.purge_before(phase);
            self.liveness.view = self.liveness.view.max(view);
            self.liveness.rejoin(self.layout.coordinator(), net.now());
            for &n in self.layout.failed() {
                self.fence.on_failure(n);
            }
            for p in self.layout.held(self.me) {
                self.request_copy(net, p, None);
            }
            self.finish_if_copied(net);
        }
    }

    /// On the restarted node: asks a live replica of `p` for its copy, avoiding `not`.
    fn request_copy<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        p: PartitionId,
        not: Option<Addr>,
    ) {
        let sources: Vec<Addr> = self
            .layout
            .replicas(p)
            .iter()
            .copied()
            .filter(|&n| n != self.me && Some(n) != not && !self.layout.is_recovering(n))
            .collect();
        if sources.is_empty() {
            self.liveness.lost = Some(format!(
                "node {} cannot recover partition {p}: no live replica holds all of it",
                self.me
            ));
            return;
        }
        let source = sources[p as usize % sources.len()];
        self.recovery.incoming.insert(
            p,
            Incoming {
                source,
                received: 0,
                last: None,
            },
        );
        net.send(source, StarMsg::CopyRequest { partition: p });
    }

    /// On a source: restarted node `to` asks for partition `p`.
    pub(crate) fn on_copy_request(&mut self, to: Addr, p: PartitionId) {
        if p >= self.layout.partitions() || !self.layout.replicas(p).contains(&self.me) {
            return;
        }
        self.recovery
            .jobs
            .retain(|j| j.to != to || j.partition != p);
        self.recovery.jobs.push_back(Job {
            to,
            partition: p,
            table: 0,
            part: 0,
            seq: 0,
        });
    }

    /// On a source: sends at most one chunk of the first copy in progress (called between slices
    /// of transactions, so copies share the node's thread with its work).
    pub(crate) fn copy_out<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        // Jobs to a node that fails again are dropped when its failure is announced; one asked
        // for before this node took the restarted node back is served.
        let Some(mut job) = self.recovery.jobs.pop_front() else {
            return;
        };
        let tables = self.db.tables().len() as u32;
        let workload = self.workload;
        let buf = &mut self.recovery.buf;
        buf.clear();
        while job.table < tables && buf.len() < CHUNK_BYTES {
            let t = job.table;
            let p = job.partition;
            self.db.copy_part(
                t,
                job.part,
                |key| workload.partition_of(t, key) == Some(p),
                buf,
            );
            job.part += 1;
            if job.part >= self.db.copy_parts(t) {
                job.table += 1;
                job.part = 0;
            }
        }
        job.seq += 1;
        let last = job.table >= tables;
        self.replication.bytes_sent += buf.len() as u64;
        let msg = StarMsg::CopyChunk {
            partition: job.partition,
            seq: job.seq,
            last,
            bytes: std::mem::take(buf),
        };
        net.send_copy(job.to, &msg);
        if let StarMsg::CopyChunk { mut bytes, .. } = msg {
            bytes.clear();
            self.recovery.buf = bytes;
        }
        if !last {
            // Round robin over the copies in progress: partitions move on side by side.
            self.recovery.jobs.push_back(job);
        }
    }

    /// On the restarted node: chunk `seq` of partition `p` from `from`.
    pub(crate) fn on_copy_chunk<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        from: Addr,
        p: PartitionId,
        seq: u64,
        last: bool,
        bytes: &[u8],
    ) {
        let Some(inc) = self.recovery.incoming.get_mut(&p) else {
            return;
        };
        if inc.source != from {
            return;
        }
        match self.db.install_copy(bytes) {
            Ok(n) => self.recovery.stats.rows += n as u64,
            Err(_) => self.replication.refused += 1,
        }
        self.recovery.stats.bytes += bytes.len() as u64;
        inc.received += 1;
        if last {
            inc.last = Some(seq);
        }
        if inc.last == Some(inc.received) {
            self.recovery.incoming.remove(&p);
            self.recovery.stats.partitions += 1;
            self.finish_if_copied(net);
        }
    }

    /// On the restarted node: once every partition is copied, tells the coordinator.
    fn finish_if_copied<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        if !self.recovery.incoming.is_empty() || self.recovery.stats.copied_ns != 0 {
            return;
        }
        self.recovery.stats.copied_ns = net.now().max(1);
        let coordinator = self.layout.coordinator();
        net.send(coordinator, StarMsg::Recovered { node: self.me });
    }

    /// Node `node` is announced recovered (by the coordinator), or tells the coordinator so.
    pub(crate) fn on_recovered<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        from: Addr,
        node: Addr,
    ) {
        if !self.layout.is_recovering(node) || self.recovery.recovered.contains(&node) {
            return;
        }
        if self.me == self.layout.coordinator() && from == node {
            for n in (0..self.layout.nodes()).filter(|&n| n != self.me) {
                if !self.layout.is_failed(n) {
                    net.send(n, StarMsg::Recovered { node });
                }
            }
        } else if from != self.layout.coordinator() {
            return;
        }
        self.recovery.recovered.push(node);
    }

    /// Node `node` failed: copies to it stop; on a restarted node, partitions it was copying
    /// are asked of another replica.
    pub(crate) fn recovery_on_failure<T: Transport<StarMsg>>(&mut self, net: &mut T, node: Addr) {
        // The fence is collected again after a failure; the begin it held is decided then.
        self.recovery.held_begin = None;
        self.recovery.jobs.retain(|j| j.to != node);
        self.recovery.rejoins.retain(|r| r.0 != node);
        self.recovery.recovered.retain(|&n| n != node);
        let again: Vec<PartitionId> = self
            .recovery
            .incoming
            .iter()
            .filter(|(_, inc)| inc.source == node)
            .map(|(&p, _)| p)
            .collect();
        for p in again {
            self.request_copy(net, p, Some(node));
        }
    }

    /// Whether this node restarted and has not copied all its partitions yet.
    pub fn recovering(&self) -> bool {
        self.recovery.joining.is_some() || !self.recovery.incoming.is_empty()
    }

    /// Counters of this node's recovery (zero if it never rejoined).
    pub fn recovery_stats(&self) -> RecoveryStats {
        self.recovery.stats
    }
}
