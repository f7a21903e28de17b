//! Dist-OCC and Dist-S2PL (STAR §8.1.2): partitioned, each transaction run by its *home*, the
//! primary of its first partition; rows of partitions other nodes master are read from their
//! primaries and written there through two-phase commit, every lock NO_WAIT.
//!
//! How a transaction runs on the home's one thread, parked on a virtual worker while it waits:
//!
//! 1. **Remote reads.** The stored procedure runs (the `Tx` API, nothing distributed in it) with
//!    commits stopping *prepared* ([`phasedb_txn::Worker::set_prepare`]). Its home holds only the
//!    partitions it replicates, so the first read of another primary's row finds nothing; the
//!    attempt ends, the rows it read or missed there are fetched ([`StarMsg::Fetch`]; under
//!    Dist-S2PL the primary locks them first, NO_WAIT, and holds them) and kept as records of the
//!    home's database with the primary's TIDs ([`phasedb_txn::Database::cache_rows`]), and the
//!    procedure reruns, now reading them. It reruns until every remote row it touches was fetched
//!    for this transaction: the paper's procedure reads each remote row with a round trip where
//!    it stands; here a round trip serves every remote row one run reaches.
//! 2. **Prepare.** The last run's commit locks its write set on the home (local rows and the
//!    copies of remote ones) and validates its reads, then holds. Dist-OCC then sends each
//!    participant its part ([`StarMsg::Prepare`]: lock the rows written, validate the versions
//!    read) and, with two participants or more, a second validation round ([`StarMsg::Validate`])
//!    once all hold their locks, so that every read is validated while every lock is held (Silo's
//!    order). Dist-S2PL needs no vote: its remote rows are locked since they were read.
//! 3. **Commit.** The home validates its reads again, installs with a TID above every version read
//!    (the remote ones included), replicates the values it wrote to every other holder of their
//!    partitions but the primaries, and sends each participant its writes ([`StarMsg::Decide`]),
//!    which it installs with the same TID. Any NO_WAIT conflict, failed validation or no vote
//!    aborts: the participants release, and the request is rerun later from scratch.
//!
//! Replication as for PB-OCC: **async** — locks released at commit, results at the node's group
//! commit every `group_commit_ns` once its writes are on every replica; **sync** — the home and
//! the participants keep the write locks until the replicas acknowledged the home's flush, then
//! the result is released ([`StarMsg::Release`] frees the participants' locks).
//!
//! Dist-S2PL here locks remote rows as they are read and written, NO_WAIT; the home's own rows
//! are locked at commit and validated, as the engine's Silo commit does (both abort rather than
//! wait on a conflict).

use std::collections::{HashMap, VecDeque};

use hdrhistogram::Histogram;
use serde::Serialize;
use serde::de::DeserializeOwned;

use phasedb_check::History;
use phasedb_net::{Addr, Node, ReplicationSync, Transport};
use phasedb_txn::{Database, PartitionId, Procedures, ReplicationMode, Star, TxError};

use crate::star::baselines::acks::Acks;
use crate::star::baselines::participant::Participant;
use crate::star::baselines::pb_occ::GROUPS_AHEAD;
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

/// A participant's part of a prepare: its node, the rows written there, the groups read there,
/// the key ranges scanned there.
type PreparePart = (
    Addr,
    Vec<(u32, u64)>,
    Vec<(u32, u64, u8, u64)>,
    Vec<(u32, u64, u64)>,
);

/// Which distributed baseline a [`DistNode`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DistProtocol {
    /// Remote reads without locks; lock, validate and commit with two-phase commit.
    Occ,
    /// Remote rows locked (NO_WAIT) as they are read; two-phase commit.
    S2pl,
}

/// Where a transaction in progress stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Fetching,
    Preparing,
    Validating,
}

/// A transaction in progress on its home: parked on its virtual worker while replies come.
struct Txn<R> {
    worker: usize,
    pending: Pending<R>,
    ty: usize,
    cross: bool,
    stage: Stage,
    /// Rows fetched for it (table, key).
    fetched: Vec<(u32, u64)>,
    /// Key ranges fetched for it (table, low, high): its remote scans.
    scanned: Vec<(u32, u64, u64)>,
    /// The remote scans of the fetch in progress, by owner: the home's cached copy of each
    /// range is cleared as the owner's rows come (when the home holds no replica of it).
    asked: Vec<(Addr, (u32, u64, u64))>,
    /// Participants that may hold something for it (locks, a prepare).
    contacted: Vec<Addr>,
    /// Replies still awaited.
    waiting: usize,
    /// A reply said no (a conflict, a failed validation).
    failed: bool,
    /// The highest TID the participants' votes reported for the rows they locked.
    floor: u64,
}

/// A committed transaction of synchronous replication, holding its locks until its flush is
/// acknowledged.
struct InFlight {
    worker: usize,
    txn: u64,
    participants: Vec<Addr>,
    held: Held,
    flush: u64,
    group: u64,
}

/// One node of Dist-OCC or Dist-S2PL. See the module doc.
pub struct DistNode<'db, W: Procedures> {
    me: Addr,
    protocol: DistProtocol,
    layout: Layout,
    settings: StarSettings,
    db: &'db Database<Star>,
    workload: &'db W,
    mastered: Vec<PartitionId>,
    workers: VirtualWorkers<'db>,
    generator: W::Gen,
    rng: u64,
    queue: VecDeque<Pending<W::Request>>,
    retry: VecDeque<Pending<W::Request>>,
    txns: HashMap<u64, Txn<W::Request>>,
    next_txn: u64,
    participant: Participant,
    in_flight: VecDeque<InFlight>,
    held: VecDeque<(u64, Held)>,
    closing: VecDeque<(u64, u64)>,
    /// The open group (0 before the first).
    group: u64,
    /// The number of the first group (1; a STAR node falling back continues its phase numbers).
    first_group: u64,
    group_start: u64,
    /// The last group whose writes are on every replica.
    complete_group: u64,
    outbox: Outbox,
    /// Per participant, the replication records of a committing transaction's writes there.
    decide_bufs: Vec<Vec<u8>>,
    inbox: Inbox,
    acks: Acks,
    types: Vec<TypeCounts>,
    latency: Histogram<u64>,
    replication: ReplicationCounts,
    requests: RequestCounts,
    times: PhaseTimes,
}

impl<'db, W> DistNode<'db, W>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    /// Node `me` of `layout` running `protocol` over its database `db` (from
    /// [`crate::star::open_database`]).
    pub fn new(
        me: Addr,
        protocol: DistProtocol,
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
        let mastered = layout.mastered(me);
        let n = if mastered.is_empty() {
            0
        } else {
            settings.virtual_workers.max(1) as usize
        };
        let sync = settings.replication == ReplicationSync::Sync;
        let mut workers = VirtualWorkers::new(db, n, sync);
        for i in 0..n {
            workers.get(i).set_prepare(true);
        }
        Ok(DistNode {
            me,
            protocol,
            mastered,
            workers,
            generator: workload.generator(me as usize, settings.seed),
            rng: (settings.seed ^ 0x9e37_79b9_7f4a_7c15 ^ ((me as u64 + 1) << 32)) | 1,
            queue: VecDeque::new(),
            retry: VecDeque::new(),
            txns: HashMap::new(),
            next_txn: 0,
            participant: Participant::default(),
            in_flight: VecDeque::new(),
            held: VecDeque::new(),
            closing: VecDeque::new(),
            group: 0,
            first_group: 1,
            group_start: 0,
            complete_group: 0,
            outbox: Outbox::without_primaries(me, &layout),
            decide_bufs: vec![Vec::new(); layout.nodes() as usize],
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

    /// Numbers the groups from `group` on (before the first opens): a STAR node that falls back
    /// to Dist-OCC (§7.2) goes on from its last phase, so epochs and TIDs keep growing.
    pub(crate) fn start_at(&mut self, group: u64) {
        self.first_group = group.max(1);
        self.complete_group = self.first_group - 1;
    }

    /// Takes `p`, a request this node is the home of, into its queue (a STAR node's queued
    /// requests when it falls back).
    pub(crate) fn adopt(&mut self, p: Pending<W::Request>) {
        self.queue.push_back(p);
    }

    /// The histories the virtual workers recorded since the last call.
    pub(crate) fn take_worker_histories(&mut self) -> Vec<History> {
        self.workers.take_histories()
    }

    /// The last group whose writes are on every replica (what a quiesce waits past).
    pub fn completed_group(&self) -> u64 {
        self.complete_group
    }

    /// Starts or stops the node's own load (on nodes that master partitions).
    pub fn set_local_load(&mut self, on: bool) {
        self.settings.local_load = on;
    }

    /// True when nothing is left to do here: no request waits, no transaction is in progress or
    /// in flight, no result is held, no remote transaction holds anything here, no replication is
    /// unsent, unacknowledged or held back.
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty()
            && self.retry.is_empty()
            && self.txns.is_empty()
            && self.in_flight.is_empty()
            && self.held.is_empty()
            && self.closing.is_empty()
            && self.participant.is_idle()
            && self.outbox.is_empty()
            && self.acks.all_complete()
            && !self.inbox.has_held()
    }

    /// Every counter (`phase` is the last complete group, plus one).
    pub fn stats(&self) -> StarStats {
        StarStats {
            recovery: Default::default(),
            fall_back: None,
            idle: self.is_idle(),
            node: self.me,
            phase: self.complete_group + 1,
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

    /// A digest of each partition this node holds.
    pub fn digests(&self) -> Vec<PartitionDigest> {
        partition_digests(self.db, self.workload, &self.layout, self.me)
    }

    /// The committed transactions recorded since the last call (each once, on its home).
    pub fn take_history(&mut self) -> History {
        node_history(self.me, self.db, self.workers.take_histories())
    }

    fn sync(&self) -> bool {
        self.settings.replication == ReplicationSync::Sync
    }

    /// The primary of the partition row `key` of table `t` belongs to, if another node.
    fn remote_owner(&self, t: u32, key: u64) -> Option<Addr> {
        remote_owner(&self.layout, self.workload, self.me, t, key)
    }

    /// Opens the first group, and closes the open one when it is due.
    fn drive_groups<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        let now = net.now();
        if self.group == 0 {
            self.open_group(now, self.first_group);
        } else if now.saturating_sub(self.group_start) >= self.settings.group_commit_ns {
            self.outbox.flush(net, self.group, &mut self.replication);
            let flush = self.acks.on_flush(&self.outbox);
            self.closing.push_back((self.group, flush));
            self.times.phases += 1;
            self.times.partitioned_ns += now.saturating_sub(self.group_start);
            self.open_group(now, self.group + 1);
            self.settle(net);
        }
    }

    fn open_group(&mut self, now: u64, group: u64) {
        self.group = group;
        self.group_start = now;
        self.db.set_epoch(group);
    }

    /// Releases what the acknowledgements allow: synchronous transactions whose flush completed
    /// (locks here and at the participants, then results), and closed groups (held results).
    fn settle<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        while let Some(f) = self.in_flight.front() {
            if !self.acks.is_complete(f.flush) {
                break;
            }
            let f = self.in_flight.pop_front().expect("front exists");
            self.workers.put(f.worker);
            for &p in &f.participants {
                net.send(p, StarMsg::Release { txn: f.txn });
            }
            f.held
                .release(net, f.group, &mut self.types, &mut self.latency);
        }
        while let Some(&(group, flush)) = self.closing.front() {
            if !self.acks.is_complete(flush) {
                break;
            }
            self.closing.pop_front();
            self.complete_group = group;
            while self.held.front().is_some_and(|(g, _)| *g <= group) {
                let (g, held) = self.held.pop_front().expect("front exists");
                held.release(net, g, &mut self.types, &mut self.latency);
            }
        }
    }

    fn has_work(&self) -> bool {
        !self.mastered.is_empty()
            && self.group > 0
            && self.workers.any_free()
            && self.closing.len() < GROUPS_AHEAD
            && (!self.queue.is_empty() || !self.retry.is_empty() || self.settings.local_load)
    }

    /// Starts transactions on the free virtual workers, then sends the replication buffers.
    fn run_slice<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        if !self.has_work() {
            return;
        }
        while let Some(p) = self.retry.pop_back() {
            self.queue.push_front(p);
        }
        let start = net.now();
        let mut budget = self.settings.slice_txns;
        while budget > 0 {
            let Some(i) = self.workers.take() else {
                break;
            };
            let Some(p) = self.next_request(net.now()) else {
                self.workers.put(i);
                break;
            };
            let ty = self.workload.txn_type(&p.req);
            let cross = self.workload.touched(&p.req).is_cross();
            let id = self.next_txn;
            self.next_txn += 1;
            let txn = Txn {
                worker: i,
                pending: p,
                ty,
                cross,
                stage: Stage::Fetching,
                fetched: Vec::new(),
                scanned: Vec::new(),
                asked: Vec::new(),
                contacted: Vec::new(),
                waiting: 0,
                failed: false,
                floor: 0,
            };
            self.attempt(net, id, txn);
            budget -= 1;
            if net.now().saturating_sub(start) >= self.settings.slice_ns {
                break;
            }
        }
        self.outbox.flush(net, self.group, &mut self.replication);
        self.acks.on_flush(&self.outbox);
        self.settle(net);
    }

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
        let home = self.mastered[(self.rng % self.mastered.len() as u64) as usize];
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

    /// Runs the procedure of `txn` once on its worker and moves it on: to fetching the remote rows
    /// it reached, to its prepare, or to its end.
    fn attempt<T: Transport<StarMsg>>(&mut self, net: &mut T, id: u64, txn: Txn<W::Request>) {
        let worker = self.workers.get(txn.worker);
        let result = self.workload.run(&txn.pending.req, worker);
        // The remote rows this run read, wrote or missed, and the remote ranges it scanned, that
        // were not fetched for it.
        let mut missing: Vec<(Addr, (u32, u64))> = Vec::new();
        let mut ranges: Vec<(Addr, (u32, u64, u64))> = Vec::new();
        let mut bad = None;
        {
            let (layout, workload, me) = (&self.layout, self.workload, self.me);
            let owner_of = |t, k| remote_owner(layout, workload, me, t, k);
            let w = self.workers.get(txn.worker);
            let rows = w
                .last_misses()
                .chain(w.prepared_reads().map(|(t, k, _, _)| (t, k)))
                .chain(w.prepared_writes().map(|(t, k, _)| (t, k)));
            for (t, k) in rows {
                if let Some(owner) = owner_of(t, k)
                    && !txn.fetched.contains(&(t, k))
                    && !txn
                        .scanned
                        .iter()
                        .any(|&(st, lo, hi)| st == t && (lo..=hi).contains(&k))
                    && !missing.iter().any(|&(_, r)| r == (t, k))
                {
                    missing.push((owner, (t, k)));
                }
            }
            for (t, lo, hi) in w.last_scans() {
                let spans = workload.partition_of(t, lo) != workload.partition_of(t, hi);
                match (owner_of(t, lo), owner_of(t, hi)) {
                    (None, None) => {}
                    (Some(owner), _) if !spans => {
                        if !txn.scanned.contains(&(t, lo, hi)) {
                            ranges.push((owner, (t, lo, hi)));
                        }
                    }
                    _ => bad = Some("a scan across partitions another node masters"),
                }
            }
            // A range's fetch brings its rows.
            missing.retain(|&(_, (t, k))| {
                !ranges
                    .iter()
                    .any(|&(_, (st, lo, hi))| st == t && (lo..=hi).contains(&k))
            });
            if result.is_ok()
                && w.prepared_writes()
                    .any(|(t, k, update)| !update && owner_of(t, k).is_some())
            {
                bad = Some("an insert or delete in a partition another node masters");
            }
        }
        if let Some(what) = bad {
            let text = format!("{:?} cannot run {what}", self.protocol);
            return self.fail(net, txn, text);
        }
        if (!missing.is_empty() || !ranges.is_empty())
            && !matches!(result, Err(TxError::Conflict(_)))
        {
            return self.fetch(net, id, txn, missing, ranges);
        }
        match result {
            Ok(()) => {
                // A remote scan is checked for phantoms at prepare, under Dist-S2PL too (its row
                // locks do not keep rows out of a range).
                if self.protocol == DistProtocol::Occ || !txn.scanned.is_empty() {
                    self.prepare(net, id, txn);
                } else {
                    self.commit(net, id, txn);
                }
            }
            Err(TxError::Conflict(_)) => self.abort(net, id, txn),
            Err(TxError::UserAbort) => {
                self.release_participants(net, id, &txn);
                self.workers.put(txn.worker);
                let held = Held {
                    origin: txn.pending.origin,
                    ty: txn.ty,
                    committed: false,
                    cross: txn.cross,
                    since: txn.pending.since,
                };
                self.finish(net, held);
            }
            Err(e) => {
                self.release_participants(net, id, &txn);
                self.fail(net, txn, format!("the transaction failed: {e}"));
            }
        }
    }

    /// Fetches `rows` and the rows of the key ranges `ranges` from their primaries and parks
    /// `txn` until every reply came.
    fn fetch<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        id: u64,
        mut txn: Txn<W::Request>,
        mut rows: Vec<(Addr, (u32, u64))>,
        mut ranges: Vec<(Addr, (u32, u64, u64))>,
    ) {
        let worker = self.workers.get(txn.worker);
        if worker.is_prepared() {
            worker.abort_prepared();
        }
        rows.sort_unstable();
        ranges.sort_unstable();
        let lock = self.protocol == DistProtocol::S2pl;
        txn.stage = Stage::Fetching;
        txn.waiting = 0;
        let mut owners: Vec<Addr> = rows.iter().map(|r| r.0).collect();
        owners.extend(ranges.iter().map(|r| r.0));
        owners.sort_unstable();
        owners.dedup();
        for owner in owners {
            let keys: Vec<(u32, u64)> = rows
                .iter()
                .filter(|r| r.0 == owner)
                .map(|&(_, r)| r)
                .collect();
            let scans: Vec<(u32, u64, u64)> = ranges
                .iter()
                .filter(|r| r.0 == owner)
                .map(|&(_, r)| r)
                .collect();
            txn.fetched.extend_from_slice(&keys);
            txn.scanned.extend_from_slice(&scans);
            if lock && !txn.contacted.contains(&owner) {
                txn.contacted.push(owner);
            }
            txn.waiting += 1;
            self.requests.remote_rounds += 1;
            net.send(
                owner,
                StarMsg::Fetch {
                    txn: id,
                    lock,
                    keys,
                    scans,
                },
            );
        }
        txn.asked = ranges;
        self.txns.insert(id, txn);
    }

    /// Dist-OCC's prepare: each participant locks the rows written there and validates the
    /// versions read there.
    fn prepare<T: Transport<StarMsg>>(&mut self, net: &mut T, id: u64, mut txn: Txn<W::Request>) {
        let mut parts: Vec<PreparePart> = Vec::new();
        let w = self.workers.get(txn.worker);
        let writes: Vec<(u32, u64)> = w.prepared_writes().map(|(t, k, _)| (t, k)).collect();
        let reads: Vec<(u32, u64, u8, u64)> = w.prepared_reads().collect();
        let scans: Vec<(u32, u64, u64)> = w.last_scans().collect();
        let part = |parts: &mut Vec<PreparePart>, owner: Addr| match parts
            .iter()
            .position(|p| p.0 == owner)
        {
            Some(i) => i,
            None => {
                parts.push((owner, Vec::new(), Vec::new(), Vec::new()));
                parts.len() - 1
            }
        };
        for (t, k) in writes {
            if let Some(owner) = self.remote_owner(t, k) {
                let i = part(&mut parts, owner);
                parts[i].1.push((t, k));
            }
        }
        for r in reads {
            if let Some(owner) = self.remote_owner(r.0, r.1) {
                let i = part(&mut parts, owner);
                parts[i].2.push(r);
            }
        }
        for r in scans {
            if let Some(owner) = self.remote_owner(r.0, r.1) {
                let i = part(&mut parts, owner);
                parts[i].3.push(r);
            }
        }
        if parts.is_empty() {
            return self.commit(net, id, txn);
        }
        txn.stage = Stage::Preparing;
        txn.waiting = parts.len();
        for (owner, writes, reads, scans) in parts {
            if !txn.contacted.contains(&owner) {
                txn.contacted.push(owner);
            }
            self.requests.remote_rounds += 1;
            net.send(
                owner,
                StarMsg::Prepare {
                    txn: id,
                    writes,
                    reads,
                    scans,
                },
            );
        }
        self.txns.insert(id, txn);
    }

    /// The decision: validates the home's reads again and commits everywhere, or aborts.
    fn commit<T: Transport<StarMsg>>(&mut self, net: &mut T, id: u64, txn: Txn<W::Request>) {
        let w = self.workers.get(txn.worker);
        if !w.validate_prepared() {
            return self.abort(net, id, txn);
        }
        w.finish_prepared_above(txn.floor);
        self.outbox.write(
            w,
            self.workload,
            ReplicationMode::Value,
            PhaseKind::Partitioned,
            &mut self.replication,
        );
        let hold = w.holds_locks();
        if !txn.contacted.is_empty() {
            let contacted = &txn.contacted;
            let (layout, workload, me) = (&self.layout, self.workload, self.me);
            for b in &mut self.decide_bufs {
                b.clear();
            }
            w.write_replication(ReplicationMode::Value, &mut self.decide_bufs, |t, k| {
                let owner = layout.primary(workload.partition_of(t, k)?);
                (owner != me && contacted.contains(&owner)).then_some(owner as usize)
            });
            for &p in contacted {
                let bytes = std::mem::take(&mut self.decide_bufs[p as usize]);
                net.send(
                    p,
                    StarMsg::Decide {
                        txn: id,
                        commit: true,
                        hold,
                        bytes,
                    },
                );
            }
        }
        self.outbox
            .flush_full(net, self.group, &mut self.replication);
        let held = Held {
            origin: txn.pending.origin,
            ty: txn.ty,
            committed: true,
            cross: txn.cross,
            since: txn.pending.since,
        };
        if hold {
            self.in_flight.push_back(InFlight {
                worker: txn.worker,
                txn: id,
                participants: txn.contacted,
                held,
                flush: self.acks.next_flush(),
                group: self.group,
            });
            return;
        }
        self.workers.put(txn.worker);
        if self.sync() && !txn.contacted.is_empty() {
            // Read-only here but written elsewhere: the participants hold until released.
            for &p in &txn.contacted {
                net.send(p, StarMsg::Release { txn: id });
            }
        }
        self.finish(net, held);
    }

    /// Releases a result now (synchronous replication, nothing to wait for) or at the group commit.
    fn finish<T: Transport<StarMsg>>(&mut self, net: &mut T, held: Held) {
        if self.sync() {
            held.release(net, self.group, &mut self.types, &mut self.latency);
        } else {
            self.held.push_back((self.group, held));
        }
    }

    fn release_participants<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        id: u64,
        txn: &Txn<W::Request>,
    ) {
        for &p in &txn.contacted {
            net.send(
                p,
                StarMsg::Decide {
                    txn: id,
                    commit: false,
                    hold: false,
                    bytes: Vec::new(),
                },
            );
        }
    }

    /// A NO_WAIT conflict, a failed validation or a no vote: the participants release what they
    /// hold, and the request is rerun later, from scratch.
    fn abort<T: Transport<StarMsg>>(&mut self, net: &mut T, id: u64, txn: Txn<W::Request>) {
        self.release_participants(net, id, &txn);
        self.workers.put(txn.worker);
        self.requests.retried += 1;
        self.retry.push_back(txn.pending);
    }

    fn fail<T: Transport<StarMsg>>(&mut self, net: &mut T, txn: Txn<W::Request>, text: String) {
        self.workers.put(txn.worker);
        if let Some(t) = self.types.get_mut(txn.ty) {
            t.failed += 1;
        }
        self.requests.errors += 1;
        answer(net, txn.pending.origin, Outcome::error(text));
    }

    /// A reply to one of this node's transactions.
    fn on_reply<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        from: Addr,
        id: u64,
        ok: bool,
        rows: &[u8],
        floor: u64,
    ) {
        let Some(txn) = self.txns.get_mut(&id) else {
            return;
        };
        txn.floor = txn.floor.max(floor);
        if ok && txn.stage == Stage::Fetching {
            // The owner's rows of each range replace the cached ones; a replica held here is
            // kept by replication instead.
            for &(_, (t, lo, hi)) in txn.asked.iter().filter(|a| a.0 == from) {
                let held = self
                    .workload
                    .partition_of(t, lo)
                    .is_some_and(|p| self.layout.holds(self.me, p));
                if !held {
                    self.db.forget_range(t, lo, hi);
                }
            }
        }
        if !ok || (!rows.is_empty() && self.db.cache_rows(rows).is_err()) {
            txn.failed = true;
        }
        txn.waiting -= 1;
        if txn.waiting > 0 {
            return;
        }
        let txn = self.txns.remove(&id).expect("present");
        if txn.failed {
            return self.abort(net, id, txn);
        }
        match txn.stage {
            Stage::Fetching => self.attempt(net, id, txn),
            Stage::Preparing if txn.contacted.len() > 1 => {
                let mut txn = txn;
                txn.stage = Stage::Validating;
                txn.waiting = txn.contacted.len();
                for &p in &txn.contacted {
                    net.send(p, StarMsg::Validate { txn: id });
                }
                self.txns.insert(id, txn);
            }
            Stage::Preparing | Stage::Validating => self.commit(net, id, txn),
        }
    }

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
        let home = self.layout.primary(touched.first());
        if home != self.me {
            return match origin {
                Origin::Client { addr, rid } => {
                    self.requests.forwarded += 1;
                    net.send(
                        home,
                        StarMsg::Forward {
                            client: addr,
                            rid,
                            body,
                        },
                    );
                }
                _ => {
                    let text = format!("node {} is not the request's home (node {home})", self.me);
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

    pub(crate) fn answer_query(&mut self, query: Query) -> Answer {
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

/// The primary of the partition row `key` of table `t` belongs to, if not `me`.
fn remote_owner<W: Procedures>(
    layout: &Layout,
    workload: &W,
    me: Addr,
    t: u32,
    key: u64,
) -> Option<Addr> {
    let owner = layout.primary(workload.partition_of(t, key)?);
    (owner != me).then_some(owner)
}

impl<'db, W> Node for DistNode<'db, W>
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
            StarMsg::Acked { through } if from_node => {
                self.acks.on_ack(from, through);
                self.settle(net);
            }
            StarMsg::Rows { txn, ok, bytes } if from_node => {
                self.on_reply(net, from, txn, ok, &bytes, 0)
            }
            StarMsg::Vote { txn, yes, floor } if from_node => {
                self.on_reply(net, from, txn, yes, &[], floor)
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
            msg if from_node => {
                self.participant.on_message(net, self.db, from, &msg);
            }
            _ => {}
        }
        self.drive_groups(net);
        self.run_slice(net);
    }

    fn on_tick<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        // A batch that met a lock of this node's prepared transactions waits here for it to go.
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
