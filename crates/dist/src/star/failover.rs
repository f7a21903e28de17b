//! Failure detection and fail-over (STAR §7.1, §7.2): heartbeats, the coordinator's declaration
//! of a failed node, taking back what the failed node replicated in the unfinished phase, and
//! re-mastering its partitions.
//!
//! - **Detection.** Fail-stop, no network partitions (the paper's assumption). Every node sends
//!   [`StarMsg::Heartbeat`] every `heartbeat_ns` (non-coordinators to the coordinator, the
//!   coordinator to every node); any message counts as a sign of life. The coordinator declares a
//!   node failed once it has heard nothing from it for `failure_timeout_ns` (a node it never heard
//!   from is not timed: a cluster starts its nodes one by one).
//! - **Announcing.** The coordinator tells every live node [`StarMsg::Failed`] with the phase the
//!   failure interrupted and a view number (failures so far). From then on every node ignores the
//!   failed node's messages.
//! - **The interrupted phase.** Results are only released at a phase's end (§7.1), so nothing the
//!   failed node ran in the phase was acknowledged. Each live node puts back the rows the failed
//!   node's batches of that phase changed (their before-images, kept by the inbox per sender and
//!   phase, each group as it was before the sender's first write of it in the phase) and
//!   drops its batches not applied yet: the records keep their version from before the phase. The
//!   paper discards the whole phase; here only the failed node's share of it is discarded, since
//!   what live nodes wrote in it reaches every live replica at its fence as usual (in a
//!   partitioned phase partitions are disjoint; in a single-master phase only the coordinator
//!   writes). The transactions the failed node ran are lost with their clients' connections, which
//!   retry elsewhere; a live node that forwarded a client's request there answers it with an
//!   error saying its outcome is unknown (`requests::Forwarding`), so no client of a live node
//!   waits out its timeout.
//! - **Fence.** A node's fence stops waiting for the failed node; a node that already ended it
//!   ends it again after taking back. The coordinator counts only end fences that carry its
//!   current view, so the next phase begins only once every live node took back.
//! - **Re-mastering.** [`Layout::fail`](crate::star::Layout::fail) moves each of the failed node's
//!   partitions to a live full replica (or a surviving secondary); the new primary takes them up
//!   at the next phase's begin, when every live replica has taken back, so none of its new writes
//!   is undone. Requests route to it at once (they wait in its queue).
//!
//! - **Coordinator.** The coordinator's successor (the next live full replica) watches it; when it
//!   falls silent the successor becomes coordinator, announces the failure itself, and drives the
//!   phase in progress to its fence (nodes obey phase control from the successor too, as its
//!   announcement may arrive after its first start fence). With no other full replica alive, the
//!   *fall-back leader* (the lowest live node, which every survivor computes alike) takes over the
//!   same way, ends the interrupted phase with its fence and switches the cluster to Dist-OCC
//!   over the partial replicas (§7.2, see `fallback`). If a partition has no live copy left, every
//!   node stops and says which ([`StarNode::lost`]).
//!
//! A restarted node's recovery is in `recover`.

use std::collections::VecDeque;

use serde::Serialize;
use serde::de::DeserializeOwned;

use phasedb_net::{Addr, Transport};
use phasedb_txn::{PartitionId, Procedures};

use crate::star::msg::{Phase, StarMsg};
use crate::star::node::{Master, StarNode};
use crate::star::phase::Coordinator;

/// What a node knows of the others' liveness.
pub(crate) struct Liveness {
    heartbeat_ns: u64,
    timeout_ns: u64,
    /// Per node, when it was last heard from (`None`: never).
    last_heard: Vec<Option<u64>>,
    last_beat: Option<u64>,
    /// When this node last looked for silent nodes.
    last_watch: Option<u64>,
    /// Failures announced so far.
    pub(crate) view: u64,
    /// Each failed node with the phase its failure interrupted, in order.
    pub(crate) failures: Vec<(Addr, Phase)>,
    /// Partitions this node masters from the next phase on.
    pub(crate) adopt: Vec<PartitionId>,
    /// Rows put back after failures.
    pub(crate) taken_back: u64,
    /// Why the cluster cannot go on (a partition without live copy), if so.
    pub(crate) lost: Option<String>,
}

impl Liveness {
    /// Nothing heard yet in a cluster of `nodes` nodes.
    pub(crate) fn new(nodes: u32, heartbeat_ns: u64, timeout_ns: u64) -> Liveness {
        Liveness {
            heartbeat_ns: heartbeat_ns.max(1),
            timeout_ns,
            last_heard: vec![None; nodes as usize],
            last_beat: None,
            last_watch: None,
            view: 0,
            failures: Vec::new(),
            adopt: Vec::new(),
            taken_back: 0,
            lost: None,
        }
    }

    /// Node `from` was heard from at `now`.
    pub(crate) fn heard(&mut self, from: Addr, now: u64) {
        if let Some(t) = self.last_heard.get_mut(from as usize) {
            *t = Some(now);
        }
    }

    /// Called as this node looks for silent nodes at `now`: if it was itself stalled for half the
    /// timeout (a long query, a descheduled process), it cannot tell who was silent, so every
    /// node's silence is timed afresh from now.
    fn look(&mut self, now: u64) {
        if self
            .last_watch
            .is_some_and(|t| now.saturating_sub(t) > self.timeout_ns / 2)
        {
            for t in self.last_heard.iter_mut().filter(|t| t.is_some()) {
                *t = Some(now);
            }
        }
        self.last_watch = Some(now);
    }

    /// Restarted node `node` is a member again: its silence is timed from `now`.
    pub(crate) fn rejoin(&mut self, node: Addr, now: u64) {
        if let Some(t) = self.last_heard.get_mut(node as usize) {
            *t = Some(now);
        }
    }

    fn silent_since(&self, node: Addr, now: u64) -> bool {
        self.last_heard[node as usize].is_some_and(|t| now.saturating_sub(t) > self.timeout_ns)
    }
}

impl<'db, W> StarNode<'db, W>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    /// On each tick: sends a heartbeat when one is due and, on the coordinator, declares failed
    /// every node silent past the timeout.
    pub(crate) fn watch<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        self.say_hello(net);
        let now = net.now();
        let coordinator = self.layout.coordinator();
        let due = self
            .liveness
            .last_beat
            .is_none_or(|t| now.saturating_sub(t) >= self.liveness.heartbeat_ns);
        if due {
            self.liveness.last_beat = Some(now);
            for n in self.live_others() {
                if self.me == coordinator || n == coordinator {
                    net.send(n, StarMsg::Heartbeat);
                }
            }
        }
        if self.phase == 0 {
            // Not a member yet (starting, or restarted and waiting to rejoin): nobody is timed.
            return;
        }
        self.liveness.look(now);
        if self.me != coordinator {
            if self.liveness.lost.is_none() && self.liveness.silent_since(coordinator, now) {
                match self.heir() {
                    Some(s) if s == self.me => self.take_over(net, coordinator),
                    Some(_) => {}
                    None => {
                        self.liveness.lost = Some(format!(
                            "node {coordinator}, the coordinator, failed and no live node can \
                             take over from it, so the cluster stops"
                        ))
                    }
                }
            }
            return;
        }
        let silent: Vec<Addr> = self
            .live_others()
            .filter(|&n| self.liveness.silent_since(n, now))
            .collect();
        for node in silent {
            self.declare_failed(net, node);
        }
    }

    /// The full replica that takes over if the coordinator fails: the next live one (§7.2).
    pub(crate) fn successor(&self) -> Option<Addr> {
        let c = self.layout.coordinator();
        (0..self.layout.full_replicas())
            .find(|&n| n != c && !self.layout.is_failed(n) && !self.layout.is_recovering(n))
    }

    /// Who takes over if the coordinator fails: its successor, or with no other full replica
    /// alive the fall-back leader, which switches the cluster to Dist-OCC (§7.2, `fallback`).
    pub(crate) fn heir(&self) -> Option<Addr> {
        self.successor()
            .or_else(|| self.layout.fall_back_leader(self.layout.coordinator()))
    }

    /// Whether phase control from `from` is obeyed: from the coordinator, or from its heir
    /// (which sends it only once it took over; its announcement may come later).
    pub(crate) fn controls(&self, from: Addr) -> bool {
        from == self.layout.coordinator() || Some(from) == self.heir()
    }

    /// This node, the coordinator's successor, becomes coordinator (§7.2: "the next available
    /// node with a full copy of the database becomes the coordinator node") and announces the
    /// old one failed; the phase in progress goes on under it.
    pub(crate) fn take_over<T: Transport<StarMsg>>(&mut self, net: &mut T, old: Addr) {
        let mut c = Coordinator::new(
            self.layout.nodes(),
            self.layout.iteration().as_nanos() as u64,
            self.settings
                .local_load
                .then_some(self.settings.cross_partition),
            self.db.config().record_history,
        );
        for &n in self.layout.failed() {
            c.on_failure(n);
        }
        c.on_begin(self.phase);
        self.coordinator = Some(c);
        // Nodes sent their heartbeats to the old coordinator: time them from now on.
        let now = net.now();
        for t in self.liveness.last_heard.iter_mut().filter(|t| t.is_some()) {
            *t = Some(now);
        }
        self.sm_worker = Some(self.db.worker());
        self.declare_failed(net, old);
    }

    /// Every other node not declared failed.
    fn live_others(&self) -> impl Iterator<Item = Addr> + use<'_, 'db, W> {
        (0..self.layout.nodes()).filter(|&n| n != self.me && !self.layout.is_failed(n))
    }

    /// On the coordinator: `node` failed in the current phase; tells every live node, then acts.
    pub(crate) fn declare_failed<T: Transport<StarMsg>>(&mut self, net: &mut T, node: Addr) {
        let view = self.liveness.view + 1;
        let phase = self.phase;
        for n in self.live_others().filter(|&n| n != node) {
            net.send(n, StarMsg::Failed { node, phase, view });
        }
        self.on_failed(net, node, phase, view);
    }

    /// Node `node` failed in phase `phase` (announced as failure number `view`): takes back its
    /// batches of that phase, re-masters its partitions, and goes on with the fence without it.
    pub(crate) fn on_failed<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        node: Addr,
        phase: Phase,
        view: u64,
    ) {
        if self.stale_failure(node, view) {
            return;
        }
        self.liveness.view = self.liveness.view.max(view);
        if node == self.me || self.layout.is_failed(node) {
            return;
        }
        self.liveness.failures.push((node, phase));
        match self.layout.fail(node) {
            Ok(moved) => {
                let me = self.me;
                self.liveness
                    .adopt
                    .extend(moved.iter().filter(|m| m.1 == me).map(|m| m.0));
            }
            Err(e) => self.liveness.lost = Some(e.to_string()),
        }
        self.liveness.taken_back += self.inbox.take_back(self.db, node, phase) as u64;
        self.requests.orphaned += self.forwarding.orphan(net, node);
        self.outbox.regroup(
            net,
            self.me,
            &self.layout,
            self.phase,
            &mut self.replication,
        );
        self.fence.on_failure(node);
        if let Some(c) = &mut self.coordinator {
            c.on_failure(node);
        }
        self.recovery_on_failure(net, node);
        self.try_end_fence(net);
    }

    /// At a phase's begin: masters the partitions re-mastered here.
    pub(crate) fn adopt_partitions(&mut self) {
        for partition in std::mem::take(&mut self.liveness.adopt) {
            if self.mastered.contains(&partition) {
                continue;
            }
            self.masters.push(Master {
                partition,
                worker: self.db.worker(),
            });
            self.mastered.push(partition);
            self.queues.single.push(VecDeque::new());
        }
    }

    /// The failures announced so far.
    pub fn view(&self) -> u64 {
        self.liveness.view
    }

    /// Each failed node with the phase its failure interrupted, in the order announced.
    pub fn failures(&self) -> &[(Addr, Phase)] {
        &self.liveness.failures
    }

    /// Whether the node is in a replication fence (it does not execute).
    pub fn in_fence(&self) -> bool {
        self.fence.started()
    }

    /// Rows this node put back after failures (§7.2).
    pub fn taken_back(&self) -> u64 {
        self.liveness.taken_back
    }

    /// Why the cluster cannot go on after its failures (a partition without a live copy), if so.
    pub fn lost(&self) -> Option<&str> {
        self.liveness.lost.as_deref()
    }
}
