//! PB-OCC (STAR §8.1.2): a primary runs every transaction with Silo's OCC and replicates the values
//! it writes to a backup, which applies them with the Thomas write rule. The primary is the
//! layout's coordinator (node 0, a full replica); every other holder of a partition receives its
//! writes (with two full replicas, the paper's setting, node 1 is the backup of everything).
//!
//! - **Asynchronous replication and group commit** (§8.1.3): a transaction's locks go at commit;
//!   its value records leave with the slice's batch; every `group_commit_ns` (10 ms) the primary
//!   closes a group — flushes, moves the engine's epoch on — and releases the group's results
//!   once the receivers acknowledged every batch sent up to then ([`crate::star::baselines::acks`]).
//! - **Synchronous replication**: a commit installs its writes but keeps its write locks
//!   ([`phasedb_txn::Worker::set_hold_locks`]); the transaction stays in flight on its virtual
//!   worker until the batch that carried its records is acknowledged, then its locks and result
//!   are released. Meanwhile the node runs other transactions on its other virtual workers; one
//!   that meets a held lock aborts (NO_WAIT) and is rerun in a later slice.
//!
//! Groups also serve synchronous runs: they number the results, move the epoch, and tell the
//! backup (with [`StarMsg::Begin`]) that every write before them is applied, which a benchmark
//! waits for before it compares replicas.

use std::collections::VecDeque;

use hdrhistogram::Histogram;
use serde::Serialize;
use serde::de::DeserializeOwned;

use phasedb_check::History;
use phasedb_net::{Addr, Node, ReplicationSync, Transport};
use phasedb_txn::{Database, Procedures, ReplicationMode, Star, TxError};

use crate::star::baselines::acks::Acks;
use crate::star::baselines::workers::VirtualWorkers;
use crate::star::control::{check_replica, read_rows};
use crate::star::layout::{Layout, LayoutError};
use crate::star::msg::{Answer, Outcome, PartitionDigest, PhaseKind, Query, StarMsg};
use crate::star::node::{StarSettings, decode_request, node_history, partition_digests};
use crate::star::replicate::{Inbox, Outbox};
use crate::star::requests::{Held, MAX_QUEUED, Origin, Pending, answer};
use crate::star::stats::{
    LatencySnapshot, PhaseTimes, ReplicationCounts, RequestCounts, StarStats, TypeCounts,
    latency_histogram,
};

/// Closed groups the primary may have waiting for their acknowledgements before it stops
/// starting transactions: a backup that applies more slowly than the primary commits would
/// otherwise fall ever further behind, and results (released only once the backup has the writes)
/// wait ever longer.
pub const GROUPS_AHEAD: usize = 2;

/// A committed transaction of synchronous replication, holding its write locks on its worker until
/// the flush that carried its records is acknowledged.
struct InFlight {
    worker: usize,
    held: Held,
    flush: u64,
    group: u64,
}

/// One PB-OCC node: the primary, or a replica that applies the primary's writes. See the module doc.
pub struct PbOccNode<'db, W: Procedures> {
    me: Addr,
    layout: Layout,
    settings: StarSettings,
    db: &'db Database<Star>,
    workload: &'db W,
    primary: Addr,
    workers: VirtualWorkers<'db>,
    generator: W::Gen,
    /// State of the choice of home partitions for the node's own load.
    rng: u64,
    /// Requests waiting to run (on the primary).
    queue: VecDeque<Pending<W::Request>>,
    /// Requests that met a held lock, rerun at the next slice.
    retry: VecDeque<Pending<W::Request>>,
    in_flight: VecDeque<InFlight>,
    /// Results waiting for their group commit (asynchronous replication), with their group.
    held: VecDeque<(u64, Held)>,
    /// Closed groups waiting for their flush to complete: group and flush numbers.
    closing: VecDeque<(u64, u64)>,
    /// The open group on the primary (0 before the first); elsewhere, the group the primary last
    /// said began.
    group: u64,
    group_start: u64,
    outbox: Outbox,
    inbox: Inbox,
    acks: Acks,
    types: Vec<TypeCounts>,
    latency: Histogram<u64>,
    replication: ReplicationCounts,
    requests: RequestCounts,
    times: PhaseTimes,
}

impl<'db, W> PbOccNode<'db, W>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    /// Node `me` of `layout` over its database `db` (from [`crate::star::open_database`]).
    pub fn new(
        me: Addr,
        layout: Layout,
        settings: StarSettings,
        db: &'db Database<Star>,
        workload: &'db W,
    ) -> Result<Self, LayoutError> {
        if workload.partitions() != layout.partitions() || me >= layout.nodes() {
            return Err(LayoutError(format!(
                "node {me} and the workload's {} partitions do not fit a layout of {} nodes and {} partitions",
                workload.partitions(),
                layout.nodes(),
                layout.partitions()
            )));
        }
        if !(0.0..=1.0).contains(&settings.cross_partition) {
            return Err(LayoutError(format!(
                "cross_partition must be between 0 and 1, not {}",
                settings.cross_partition
            )));
        }
        let primary = layout.coordinator();
        let workers = if me == primary {
            settings.virtual_workers.max(1) as usize
        } else {
            0
        };
        let sync = settings.replication == ReplicationSync::Sync;
        Ok(PbOccNode {
            me,
            primary,
            workers: VirtualWorkers::new(db, workers, sync),
            generator: workload.generator(me as usize, settings.seed),
            rng: (settings.seed ^ 0x9e37_79b9_7f4a_7c15) | 1,
            queue: VecDeque::new(),
            retry: VecDeque::new(),
            in_flight: VecDeque::new(),
            held: VecDeque::new(),
            closing: VecDeque::new(),
            group: 0,
            group_start: 0,
            outbox: Outbox::new(me, &layout),
            inbox: Inbox::new(layout.nodes()),
            acks: Acks::new(layout.nodes()),
            types: workload
                .txn_types()
                .into_iter()
                .map(|name| TypeCounts {
                    name: name.to_string(),
                    ..TypeCounts::default()
                })
                .collect(),
            latency: latency_histogram(),
            replication: ReplicationCounts::default(),
            requests: RequestCounts::default(),
            times: PhaseTimes::default(),
            layout,
            settings,
            db,
            workload,
        })
    }

    /// The group the node is in (the primary's open group; elsewhere the last one begun).
    pub fn group(&self) -> u64 {
        self.group
    }

    /// Starts or stops the node's own load (only the primary generates).
    pub fn set_local_load(&mut self, on: bool) {
        self.settings.local_load = on;
    }

    /// True when nothing is left to do here: no request waits, no transaction is in flight, no
    /// result is held, no replication is unsent, unacknowledged or held back.
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty()
            && self.retry.is_empty()
            && self.in_flight.is_empty()
            && self.held.is_empty()
            && self.closing.is_empty()
            && self.outbox.is_empty()
            && self.acks.all_complete()
            && !self.inbox.has_held()
    }

    /// Every counter (`phase` is the group).
    pub fn stats(&self) -> StarStats {
        StarStats {
            recovery: Default::default(),
            fall_back: None,
            idle: self.is_idle(),
            node: self.me,
            phase: self.group,
            types: self.types.clone(),
            latency: LatencySnapshot::of(&self.latency),
            times: self.times,
            replication: self.replication,
            requests: RequestCounts {
                queued: (self.queue.len() + self.retry.len()) as u64,
                ..self.requests
            },
        }
    }

    /// A digest of each partition this node holds (equal on every replica once quiet).
    pub fn digests(&self) -> Vec<PartitionDigest> {
        partition_digests(self.db, self.workload, &self.layout, self.me)
    }

    /// The committed transactions recorded since the last call, ids unique across nodes.
    pub fn take_history(&mut self) -> History {
        node_history(self.me, self.db, self.workers.take_histories())
    }

    fn is_primary(&self) -> bool {
        self.me == self.primary
    }

    fn sync(&self) -> bool {
        self.settings.replication == ReplicationSync::Sync
    }

    /// On the primary: opens the first group, and closes the open one when it is due.
    fn drive_groups<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        if !self.is_primary() {
            return;
        }
        let now = net.now();
        if self.group == 0 {
            self.open_group(now, 1);
        } else if now.saturating_sub(self.group_start) >= self.settings.group_commit_ns {
            self.outbox.flush(net, self.group, &mut self.replication);
            let flush = self.acks.on_flush(&self.outbox);
            self.closing.push_back((self.group, flush));
            self.times.phases += 1;
            self.times.single_master_ns += now.saturating_sub(self.group_start);
            self.open_group(now, self.group + 1);
            self.settle(net);
        }
    }

    fn open_group(&mut self, now: u64, group: u64) {
        self.group = group;
        self.group_start = now;
        self.db.set_epoch(group);
    }

    /// On the primary: releases what the acknowledgements received allow — transactions in flight
    /// whose flush completed (their locks, then their results), and closed groups whose flush
    /// completed (their held results; the other nodes hear that the next group began).
    fn settle<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        while let Some(f) = self.in_flight.front() {
            if !self.acks.is_complete(f.flush) {
                break;
            }
            let f = self.in_flight.pop_front().expect("front exists");
            self.workers.put(f.worker);
            f.held
                .release(net, f.group, &mut self.types, &mut self.latency);
        }
        while let Some(&(group, flush)) = self.closing.front() {
            if !self.acks.is_complete(flush) {
                break;
            }
            self.closing.pop_front();
            while self.held.front().is_some_and(|(g, _)| *g <= group) {
                let (g, held) = self.held.pop_front().expect("front exists");
                held.release(net, g, &mut self.types, &mut self.latency);
            }
            for n in (0..self.layout.nodes()).filter(|&n| n != self.me) {
                net.send(
                    n,
                    StarMsg::Begin {
                        phase: group + 1,
                        length_ns: 0,
                    },
                );
            }
        }
    }

    /// Whether the primary has a transaction to start now: a request or its own load, a free
    /// virtual worker, and at most [`GROUPS_AHEAD`] closed groups not yet on the backup.
    fn has_work(&self) -> bool {
        self.is_primary()
            && self.group > 0
            && self.workers.any_free()
            && self.closing.len() < GROUPS_AHEAD
            && (!self.queue.is_empty() || !self.retry.is_empty() || self.settings.local_load)
    }

    /// Runs a slice of transactions on the free virtual workers, then sends the replication
    /// buffers and notes the flush (what this slice's transactions in flight wait for).
    fn run_slice<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        if !self.has_work() {
            return;
        }
        // Requests that met a held lock go first: a slice starts after messages, so locks may
        // have been released since.
        while let Some(p) = self.retry.pop_back() {
            self.queue.push_front(p);
        }
        let start = net.now();
        let mut budget = self.settings.slice_txns;
        let mut retries = 0;
        while budget > 0 {
            let Some(i) = self.workers.take() else {
                break;
            };
            let Some(p) = self.next_request(net.now()) else {
                self.workers.put(i);
                break;
            };
            if self.run(net, i, p) {
                retries += 1;
            }
            budget -= 1;
            if net.now().saturating_sub(start) >= self.settings.slice_ns || retries >= 8 {
                break;
            }
        }
        self.outbox.flush(net, self.group, &mut self.replication);
        self.acks.on_flush(&self.outbox);
        self.settle(net);
    }

    /// The next request: a waiting one, else one of the node's load.
    fn next_request(&mut self, now: u64) -> Option<Pending<W::Request>> {
        if let Some(p) = self.queue.pop_front() {
            return Some(p);
        }
        if !self.settings.local_load {
            return None;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let home = (self.rng % self.layout.partitions() as u64) as u32;
        let req = self
            .workload
            .generate(&mut self.generator, home, self.settings.cross_partition);
        self.requests.generated += 1;
        Some(Pending {
            origin: Origin::Local,
            req,
            since: now,
        })
    }

    /// Runs `pending` on virtual worker `i`; returns true if it met a lock and waits for a rerun.
    fn run<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        i: usize,
        pending: Pending<W::Request>,
    ) -> bool {
        let ty = self.workload.txn_type(&pending.req);
        let cross = self.workload.touched(&pending.req).is_cross();
        let worker = self.workers.get(i);
        let result = self.workload.run(&pending.req, worker);
        let committed = match result {
            Ok(()) => {
                self.outbox.write(
                    worker,
                    self.workload,
                    ReplicationMode::Value,
                    PhaseKind::SingleMaster,
                    &mut self.replication,
                );
                self.outbox
                    .flush_full(net, self.group, &mut self.replication);
                true
            }
            Err(TxError::UserAbort) => false,
            Err(TxError::Conflict(_)) => {
                self.workers.put(i);
                self.retry.push_back(pending);
                return true;
            }
            Err(e) => {
                self.workers.put(i);
                if let Some(t) = self.types.get_mut(ty) {
                    t.failed += 1;
                }
                self.requests.errors += 1;
                answer(
                    net,
                    pending.origin,
                    Outcome::error(format!("the transaction failed: {e}")),
                );
                return false;
            }
        };
        let held = Held {
            origin: pending.origin,
            ty,
            committed,
            cross,
            since: pending.since,
        };
        if self.workers.get(i).holds_locks() {
            self.in_flight.push_back(InFlight {
                worker: i,
                held,
                flush: self.acks.next_flush(),
                group: self.group,
            });
            return false;
        }
        self.workers.put(i);
        if self.sync() {
            // Nothing written (read-only, or aborted by its procedure): nothing to wait for.
            held.release(net, self.group, &mut self.types, &mut self.latency);
        } else {
            self.held.push_back((self.group, held));
        }
        false
    }

    /// Takes a request from a client (`origin` a client) or a forwarding node: queued on the
    /// primary, forwarded to it elsewhere.
    fn on_request<T: Transport<StarMsg>>(&mut self, net: &mut T, origin: Origin, body: Vec<u8>) {
        let (req, touched) = match decode_request(self.workload, &body) {
            Ok(decoded) => decoded,
            Err(text) => return self.reply_error(net, origin, text),
        };
        let parts = touched.as_slice();
        if parts.is_empty() {
            return self.reply_error(net, origin, "the request touches no partition".into());
        }
        if let Some(p) = parts.iter().find(|&&p| p >= self.layout.partitions()) {
            let text = format!(
                "the request touches partition {p}, but there are {} partitions",
                self.layout.partitions()
            );
            return self.reply_error(net, origin, text);
        }
        if !self.is_primary() {
            return match origin {
                Origin::Client { addr, rid } => {
                    self.requests.forwarded += 1;
                    net.send(
                        self.primary,
                        StarMsg::Forward {
                            client: addr,
                            rid,
                            body,
                        },
                    );
                }
                _ => {
                    let text = format!(
                        "node {} is not the primary (node {})",
                        self.me, self.primary
                    );
                    self.reply_error(net, origin, text)
                }
            };
        }
        if self.queue.len() + self.retry.len() >= MAX_QUEUED {
            let text = format!("node {} has {MAX_QUEUED} requests waiting", self.me);
            return self.reply_error(net, origin, text);
        }
        self.queue.push_back(Pending {
            origin,
            req,
            since: net.now(),
        });
    }

    fn reply_error<T: Transport<StarMsg>>(&mut self, net: &mut T, origin: Origin, text: String) {
        self.requests.errors += 1;
        answer(net, origin, Outcome::error(text));
    }

    fn answer_query(&mut self, query: Query) -> Answer {
        match query {
            Query::Stats => Answer::Stats(Box::new(self.stats())),
            Query::Digests => Answer::Digests(self.digests()),
            Query::History => Answer::History(self.take_history()),
            Query::Load(on) => {
                self.set_local_load(on);
                Answer::Stats(Box::new(self.stats()))
            }
            Query::Check => {
                Answer::Check(check_replica(self.db, self.workload, &self.layout, self.me))
            }
            Query::Rows {
                table,
                first,
                count,
            } => Answer::Rows(read_rows(self.db, table, first, count)),
        }
    }
}

impl<'db, W> Node for PbOccNode<'db, W>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    type Msg = StarMsg;

    fn on_message<T: Transport<StarMsg>>(&mut self, net: &mut T, from: Addr, msg: StarMsg) {
        let from_node = from < self.layout.nodes();
        match msg {
            StarMsg::Replicate { seq, bytes, .. } if from_node => {
                self.inbox
                    .receive(self.db, from, seq, bytes, &mut self.replication);
                let through = self.inbox.applied_through(from);
                net.send(from, StarMsg::Acked { through });
            }
            StarMsg::Acked { through } if from_node && self.is_primary() => {
                self.acks.on_ack(from, through);
                self.settle(net);
            }
            StarMsg::Begin { phase, .. }
                if from == self.primary && !self.is_primary() && phase > self.group =>
            {
                self.group = phase;
                self.db.set_epoch(phase);
            }
            StarMsg::Request { rid, body } | StarMsg::ReadCommitted { rid, body } => {
                self.requests.received += 1;
                self.on_request(net, Origin::Client { addr: from, rid }, body);
            }
            StarMsg::Forward { client, rid, body } if from_node => self.on_request(
                net,
                Origin::Via {
                    via: from,
                    client,
                    rid,
                },
                body,
            ),
            StarMsg::Forwarded {
                client,
                rid,
                outcome,
            } if from_node => net.send(client, StarMsg::Reply { rid, outcome }),
            StarMsg::Query { rid, query } => {
                let answer = self.answer_query(query);
                net.send(from, StarMsg::Answer { rid, answer });
            }
            _ => {}
        }
        self.drive_groups(net);
        self.run_slice(net);
    }

    fn on_tick<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        self.inbox
            .retry_blocked(self.db, &mut self.replication, |from, through| {
                net.send(from, StarMsg::Acked { through })
            });
        self.drive_groups(net);
        self.run_slice(net);
        self.drive_groups(net);
    }

    fn busy(&self) -> bool {
        self.has_work()
    }
}
