//! A Calvin node: the sans-I/O [`Node`] that is one member of a replica group and, on node 0,
//! also the sequencer (Thomson et al. 2012, §3–§4; STAR §8.3).
//!
//! - **Sequencer** (node 0): every `batch_ns` (10 ms, as the paper's) it cuts a batch of the
//!   requests of that interval — with the nodes generating their own load, as in STAR's evaluation,
//!   it draws them itself — and sends the batch to every node of every replica group (input
//!   replication: the groups replicate the requests, not their effects). It keeps at most
//!   [`MAX_OUTSTANDING`] non-empty batches unfinished by the slowest node, and sizes batches so
//!   that the slowest group stays busy.
//! - **Scheduler** (every node): takes batches strictly in order and, for each transaction it
//!   takes part in, requests the transaction's whole lock set on its own partitions from the
//!   [`LockManager`] in the global order.
//! - **Remote reads** (Calvin §4.2's local-read and remote-read phases): once a multi-node
//!   transaction holds its locks here, this node reads the rows of its own partitions the
//!   transaction reads and sends their current values ([`StarMsg::CalvinReads`], replication
//!   records from [`Database::read_rows`]) to the transaction's other participants in its group; a
//!   participant runs the transaction once it holds its locks and has heard from all the others.
//! - **Execution**: every participant installs the values it was sent over its copy of the other
//!   partitions ([`Database::install_rows`]), runs the whole stored procedure on its own engine,
//!   and its writes to the partitions it owns are the group's; then it releases its locks.
//!
//! Which rows a participant sends: the read set is known before a transaction runs (Calvin's
//! premise), and the workload names its rows ([`ReadRows`]) where it can — as Calvin's
//! transactions declare them. Where it cannot (TPC-C's Payment by last name finds its customer
//! through an index as it runs, which Calvin's OLLP would look up before sequencing), a
//! participant learns them from a dry run — the procedure run once without its commit
//! ([`phasedb_txn::Worker::set_dry_run`]: nothing locked, inserted or installed) — whose reads of
//! its own partitions are exact: it holds their locks, and under the premise which rows a
//! transaction touches does not depend on the values it reads elsewhere. Every node loads every partition, so that each row a
//! dry run looks up exists (the values of other partitions there are stale until installed); a
//! node's copy of a partition it does not own is only a cache, written by its own runs and
//! replaced by the owner's values before each run that reads them. A row absent on its owner is
//! not sent, so a participant whose copy still holds it would read that copy: no workload here
//! deletes rows that multi-node transactions read. Transactions run inline on the node's
//! event-loop thread, one at a time, between messages (one lock-manager and worker thread per
//! node); clients' requests are refused (nodes generate their own load); no node may fail.

use std::collections::{BTreeMap, VecDeque};

use hdrhistogram::Histogram;
use rustc_hash::FxHashMap;
use serde::Serialize;
use serde::de::DeserializeOwned;
use smallvec::SmallVec;

use phasedb_check::History;
use phasedb_net::{Addr, Node, Transport};
use phasedb_txn::{Config, Database, Occ, PartitionId, Procedures, TableId, TxError, Worker};

use crate::calvin::groups::Groups;
use crate::calvin::locks::{LockManager, TxnId, batch_of, txn_id};
use crate::star::LayoutError;
use crate::star::control::read_rows;
use crate::star::msg::{Answer, Outcome, PartitionDigest, Query, StarMsg};
use crate::star::stats::{
    LatencySnapshot, PhaseTimes, RequestCounts, StarStats, TypeCounts, latency_histogram,
};

/// Non-empty batches the sequencer lets be unfinished by the slowest node before it cuts empty ones.
pub const MAX_OUTSTANDING: u64 = 2;
/// Smallest and largest batch the sequencer draws.
const BATCH_BOUNDS: (f64, f64) = (8.0, 50_000.0);

/// One lock a transaction needs: the partition owning the locked unit, the unit's key (unique
/// across partitions and tables), and whether it is exclusive (a write) rather than shared.
pub type Lock = (PartitionId, u64, bool);

/// A workload's read/write set of a request, known before it runs (Calvin's requirement, §3).
pub type LockSet<W> = fn(&W, &<W as Procedures>::Request, &mut Vec<Lock>);

/// The rows (table, key) a request reads, when the workload can name them before it runs: it
/// appends them and returns true, or returns false (a dry run then finds them, see the module doc).
pub type ReadRows<W> = fn(&W, &<W as Procedures>::Request, &mut Vec<(TableId, u64)>) -> bool;

/// For a workload that cannot name the rows its requests read: a dry run finds them every time.
pub fn dry_run_reads<W: Procedures>(_: &W, _: &W::Request, _: &mut Vec<(TableId, u64)>) -> bool {
    false
}

/// The coarsest read/write set any workload has: an exclusive lock on each partition touched.
pub fn partition_locks<W: Procedures>(w: &W, req: &W::Request, out: &mut Vec<Lock>) {
    for &p in w.touched(req).as_slice() {
        out.push((p, p as u64, true));
    }
}

/// How a Calvin node runs, beyond its groups.
#[derive(Clone, Debug, PartialEq)]
pub struct CalvinSettings {
    /// Share of cross-partition requests the sequencer draws.
    pub cross_partition: f64,
    /// Whether the sequencer draws load (a benchmark turns it on and off).
    pub local_load: bool,
    /// Seed of the sequencer's generator.
    pub seed: u64,
    /// The sequencer's batch period (ns of the transport's clock; 10 ms in the paper).
    pub batch_ns: u64,
    /// Most transactions a node runs before it handles messages again.
    pub slice_txns: u32,
    /// Whether the sequencer keeps every request it ordered (tests replay them).
    pub keep_order: bool,
}

impl Default for CalvinSettings {
    fn default() -> Self {
        CalvinSettings {
            cross_partition: 0.0,
            local_load: false,
            seed: 1,
            batch_ns: 10_000_000,
            slice_txns: 64,
            keep_order: false,
        }
    }
}

/// Opens a Calvin node's database: Silo's OCC (transactions run one at a time under the lock
/// manager, so it never aborts one), every table, every partition loaded (see the module doc).
pub fn open_database<W: Procedures>(workload: &mut W, record_history: bool) -> Database<Occ> {
    let mut db = Database::<Occ>::open(Config {
        record_history,
        epoch_interval: std::time::Duration::ZERO,
        ..Config::default()
    });
    workload.create_tables(&mut db);
    for p in 0..workload.partitions() {
        workload.load_partition(&db, p);
    }
    workload.load_shared(&db);
    db
}

struct Txn<R> {
    req: R,
    keys: SmallVec<[u64; 24]>,
    granted: bool,
    reads_needed: u32,
    /// The values the other participants sent (replication records), installed before the run.
    reads: Vec<Vec<u8>>,
    /// Other participants in this group, told once the locks are held.
    others: SmallVec<[Addr; 4]>,
    home: bool,
    cross: bool,
    since: u64,
}

/// The sequencer's state (node 0 only).
struct Sequencer<G> {
    generator: G,
    rng: u64,
    next_batch: u64,
    last_cut: Option<u64>,
    size: f64,
    /// Per node, the last batch it finished (every one before it too).
    done: Vec<u64>,
    /// The last non-empty batch.
    last_loaded: u64,
    order: Vec<Vec<u8>>,
}

/// One Calvin node. See the module doc.
pub struct CalvinNode<'db, W: Procedures> {
    me: Addr,
    groups: Groups,
    group: usize,
    settings: CalvinSettings,
    db: &'db Database<Occ>,
    workload: &'db W,
    lock_set: LockSet<W>,
    read_rows: ReadRows<W>,
    worker: Worker<'db, Occ>,
    owned: Vec<bool>,
    sequencer: Option<Sequencer<W::Gen>>,
    /// Batches received ahead of their turn.
    early: BTreeMap<u64, Vec<u8>>,
    /// The last batch scheduled.
    scheduled: u64,
    /// The last batch finished here.
    finished: u64,
    /// Per scheduled batch, its transactions here not yet run.
    left: BTreeMap<u64, u32>,
    txns: FxHashMap<TxnId, Txn<W::Request>>,
    early_reads: FxHashMap<TxnId, Vec<Vec<u8>>>,
    locks: LockManager,
    ready: VecDeque<TxnId>,
    lock_buf: Vec<Lock>,
    key_buf: Vec<(u64, bool)>,
    granted_buf: Vec<TxnId>,
    rows_buf: Vec<(u32, u64)>,
    types: Vec<TypeCounts>,
    latency: Histogram<u64>,
    requests: RequestCounts,
}

impl<'db, W> CalvinNode<'db, W>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    /// Node `me` of `groups` over its database (from [`open_database`]), `workload`, the
    /// workload's read/write sets `lock_set` and the rows its requests read, `read_rows`.
    pub fn new(
        me: Addr,
        groups: Groups,
        settings: CalvinSettings,
        db: &'db Database<Occ>,
        workload: &'db W,
        lock_set: LockSet<W>,
        read_rows: ReadRows<W>,
    ) -> Result<Self, LayoutError> {
        if me >= groups.nodes() {
            return Err(LayoutError(format!(
                "node {me} is not in a cluster of {} nodes",
                groups.nodes()
            )));
        }
        if workload.partitions() != groups.partitions() {
            return Err(LayoutError(format!(
                "the workload {} has {} partitions, Calvin's groups {}",
                workload.name(),
                workload.partitions(),
                groups.partitions()
            )));
        }
        if !(0.0..=1.0).contains(&settings.cross_partition) || settings.batch_ns == 0 {
            return Err(LayoutError(
                "cross_partition must be between 0 and 1 and the batch period positive".into(),
            ));
        }
        let mut owned = vec![false; groups.partitions() as usize];
        for p in groups.owned(me) {
            owned[p as usize] = true;
        }
        let sequencer = (me == groups.sequencer()).then(|| Sequencer {
            generator: workload.generator(0, settings.seed),
            rng: (settings.seed ^ 0x9e37_79b9_7f4a_7c15) | 1,
            next_batch: 1,
            last_cut: None,
            size: 64.0,
            done: vec![0; groups.nodes() as usize],
            last_loaded: 0,
            order: Vec::new(),
        });
        Ok(CalvinNode {
            me,
            group: groups.group_of(me),
            groups,
            settings,
            db,
            workload,
            lock_set,
            read_rows,
            worker: db.worker(),
            owned,
            sequencer,
            early: BTreeMap::new(),
            scheduled: 0,
            finished: 0,
            left: BTreeMap::new(),
            txns: FxHashMap::default(),
            early_reads: FxHashMap::default(),
            locks: LockManager::default(),
            ready: VecDeque::new(),
            lock_buf: Vec::new(),
            key_buf: Vec::new(),
            granted_buf: Vec::new(),
            rows_buf: Vec::new(),
            types: workload
                .txn_types()
                .into_iter()
                .map(|name| TypeCounts {
                    name: name.to_string(),
                    ..TypeCounts::default()
                })
                .collect(),
            latency: latency_histogram(),
            requests: RequestCounts::default(),
        })
    }

    /// Starts or stops the sequencer's load.
    pub fn set_local_load(&mut self, on: bool) {
        self.settings.local_load = on;
    }

    /// The last batch every transaction of which (that this node takes part in) has run.
    pub fn finished(&self) -> u64 {
        self.finished
    }

    /// On the sequencer with `keep_order`, every request ordered so far (postcard bodies), in the
    /// global order; empty elsewhere.
    pub fn order(&self) -> &[Vec<u8>] {
        self.sequencer
            .as_ref()
            .map(|s| s.order.as_slice())
            .unwrap_or_default()
    }

    /// True when every batch received has run and nothing waits.
    pub fn is_idle(&self) -> bool {
        self.txns.is_empty() && self.early.is_empty() && self.finished == self.scheduled
    }

    /// Every counter (`phase` is the last batch finished here).
    pub fn stats(&self) -> StarStats {
        StarStats {
            recovery: Default::default(),
            idle: self.is_idle(),
            node: self.me,
            phase: self.finished,
            types: self.types.clone(),
            latency: LatencySnapshot::of(&self.latency),
            times: PhaseTimes {
                phases: self.scheduled,
                ..PhaseTimes::default()
            },
            requests: RequestCounts {
                queued: self.txns.len() as u64,
                ..self.requests
            },
            ..StarStats::default()
        }
    }

    /// A digest of each partition this node owns in its group (every table's digest over the
    /// partition's rows); equal across groups once they ran the same batches.
    pub fn digests(&self) -> Vec<PartitionDigest> {
        let tables = self.db.tables().len() as u32;
        self.groups
            .owned(self.me)
            .into_iter()
            .map(|p| {
                let mut h = 0xcbf2_9ce4_8422_2325u64;
                for t in 0..tables {
                    let d = self
                        .db
                        .digest(t, |key| self.workload.partition_of(t, key) == Some(p));
                    h = (h ^ d).wrapping_mul(0x100_0000_01b3).rotate_left(29);
                }
                PartitionDigest {
                    partition: p,
                    digest: h,
                }
            })
            .collect()
    }

    /// The committed transactions recorded since the last call (when the database records), each
    /// cut to the rows of the partitions this node owns and of shared tables: its copy of other
    /// partitions is a cache, whose installed rows carry versions their owner wrote.
    pub fn take_history(&mut self) -> History {
        let mut h = History::merge(vec![self.worker.take_history(), self.db.take_history()]);
        let (workload, owned) = (self.workload, &self.owned);
        let mine = |table: u32, key: u64| {
            workload
                .partition_of(table, key)
                .is_none_or(|p| owned.get(p as usize) == Some(&true))
        };
        for t in &mut h.txns {
            t.id = ((self.me as u64 + 1) << 52) | (t.id & ((1 << 52) - 1));
            t.reads.retain(|r| mine(r.item.table, r.item.key));
            t.writes.retain(|w| mine(w.item.table, w.item.key));
        }
        h.txns
            .retain(|t| !(t.reads.is_empty() && t.writes.is_empty()));
        h
    }

    /// The workload's consistency check on the partitions this node owns.
    pub fn check(&self) -> Result<(), String> {
        self.workload.check(self.db, &self.groups.owned(self.me))
    }

    /// The sequencer cuts a batch when its period has passed.
    fn sequence<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        let now = net.now();
        let nodes = self.groups.nodes();
        let partitions = self.groups.partitions() as u64;
        let load = self.settings.local_load;
        let cross = self.settings.cross_partition;
        let keep = self.settings.keep_order;
        let workload = self.workload;
        let Some(s) = &mut self.sequencer else {
            return;
        };
        if s.last_cut
            .is_some_and(|at| now < at + self.settings.batch_ns)
        {
            return;
        }
        // Cuts keep a 10 ms grid while a slice delays one by less than a period.
        s.last_cut = Some(match s.last_cut {
            Some(at) if now < at + 2 * self.settings.batch_ns => at + self.settings.batch_ns,
            _ => now,
        });
        let batch = s.next_batch;
        s.next_batch += 1;
        let slowest = s.done.iter().copied().min().unwrap_or(0);
        let behind = s.last_loaded.saturating_sub(slowest);
        let mut reqs = Vec::new();
        if load && behind < MAX_OUTSTANDING {
            if behind == 0 {
                s.size = (s.size * 1.5).min(BATCH_BOUNDS.1);
            }
            for _ in 0..s.size as usize {
                s.rng ^= s.rng << 13;
                s.rng ^= s.rng >> 7;
                s.rng ^= s.rng << 17;
                let home = (s.rng % partitions) as PartitionId;
                reqs.push(workload.generate(&mut s.generator, home, cross));
            }
            s.last_loaded = batch;
        } else if load {
            s.size = (s.size / 1.25).max(BATCH_BOUNDS.0);
        }
        if keep {
            for r in &reqs {
                s.order
                    .push(postcard::to_stdvec(r).expect("requests encode"));
            }
        }
        self.requests.generated += reqs.len() as u64;
        let bytes = postcard::to_stdvec(&reqs).expect("requests encode");
        for n in (0..nodes).filter(|&n| n != self.me) {
            net.send_copy(
                n,
                &StarMsg::CalvinBatch {
                    batch,
                    bytes: bytes.clone(),
                },
            );
        }
        self.on_batch(net, batch, bytes);
    }

    /// Batch `batch` arrived: schedule it and every batch after it that waited.
    fn on_batch<T: Transport<StarMsg>>(&mut self, net: &mut T, batch: u64, bytes: Vec<u8>) {
        if batch <= self.scheduled {
            return;
        }
        self.early.insert(batch, bytes);
        while let Some(bytes) = self.early.remove(&(self.scheduled + 1)) {
            self.scheduled += 1;
            let reqs: Vec<W::Request> = match postcard::from_bytes(&bytes) {
                Ok(r) => r,
                Err(_) => {
                    // Only the sequencer sends batches, encoded by the same code: a batch that does
                    // not decode is counted and skipped by every node alike.
                    self.requests.errors += 1;
                    Vec::new()
                }
            };
            let now = net.now();
            let batch = self.scheduled;
            self.left.insert(batch, 0);
            for (i, req) in reqs.into_iter().enumerate() {
                self.schedule(net, txn_id(batch, i as u32), req, now);
            }
            self.finish_batches(net);
        }
    }

    /// Requests the locks of one transaction of the batch being scheduled, if this node takes
    /// part in it.
    fn schedule<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        id: TxnId,
        req: W::Request,
        now: u64,
    ) {
        let touched = self.workload.touched(&req);
        let mut participants: SmallVec<[Addr; 4]> = SmallVec::new();
        for &p in touched.as_slice() {
            let n = self.groups.owner(self.group, p);
            if !participants.contains(&n) {
                participants.push(n);
            }
        }
        if !participants.contains(&self.me) {
            return;
        }
        self.lock_buf.clear();
        (self.lock_set)(self.workload, &req, &mut self.lock_buf);
        self.key_buf.clear();
        for &(p, key, write) in &self.lock_buf {
            if self.owned.get(p as usize) == Some(&true) {
                self.key_buf.push((key, write));
            }
        }
        self.key_buf.sort_unstable();
        self.key_buf.dedup_by(|b, a| {
            if a.0 == b.0 {
                a.1 |= b.1;
                true
            } else {
                false
            }
        });
        let granted = self.locks.acquire(id, &self.key_buf);
        let others: SmallVec<[Addr; 4]> = participants
            .iter()
            .copied()
            .filter(|&n| n != self.me)
            .collect();
        let txn = Txn {
            home: participants[0] == self.me,
            cross: touched.is_cross(),
            keys: self.key_buf.iter().map(|k| k.0).collect(),
            granted: false,
            reads_needed: others.len() as u32,
            reads: self.early_reads.remove(&id).unwrap_or_default(),
            others,
            req,
            since: now,
        };
        self.txns.insert(id, txn);
        *self.left.get_mut(&batch_of(id)).expect("scheduled batch") += 1;
        if granted {
            self.on_granted(net, id);
        }
    }

    /// `id` holds its locks here: the other participants get the values of the rows of this
    /// node's partitions it reads; it runs once it heard from them all.
    fn on_granted<T: Transport<StarMsg>>(&mut self, net: &mut T, id: TxnId) {
        let txn = self
            .txns
            .get_mut(&id)
            .expect("granted transactions are known");
        txn.granted = true;
        if !txn.others.is_empty() {
            let reads = StarMsg::CalvinReads {
                batch: batch_of(id),
                index: id as u32,
                rows: self.local_reads(id),
            };
            for &n in &self.txns[&id].others {
                net.send_copy(n, &reads);
            }
        }
        let txn = &self.txns[&id];
        if txn.reads.len() as u32 >= txn.reads_needed {
            self.ready.push_back(id);
        }
    }

    /// The current values of the rows of this node's partitions that transaction `id` reads, as
    /// replication records: those the workload names, or else those a dry run of it read here
    /// (see the module doc).
    fn local_reads(&mut self, id: TxnId) -> Vec<u8> {
        let req = &self.txns[&id].req;
        self.rows_buf.clear();
        if !(self.read_rows)(self.workload, req, &mut self.rows_buf) {
            // No wait: a conflict (none can arise with one thread) ends the dry run, not retries it.
            self.worker.set_dry_run(true);
            self.worker.set_no_wait(true);
            let _ = self.workload.run(req, &mut self.worker);
            self.worker.set_dry_run(false);
            self.worker.set_no_wait(false);
            self.rows_buf.clear();
            self.rows_buf
                .extend(self.worker.prepared_reads().map(|(t, key, _, _)| (t, key)));
        }
        let (workload, owned) = (self.workload, &self.owned);
        self.rows_buf.retain(|&(t, key)| {
            workload
                .partition_of(t, key)
                .is_some_and(|p| owned.get(p as usize) == Some(&true))
        });
        self.rows_buf.sort_unstable();
        self.rows_buf.dedup();
        let mut rows = Vec::new();
        if self
            .db
            .read_rows(self.rows_buf.iter().copied(), None, &mut rows)
            .is_err()
        {
            // Nothing runs here while a transaction waits for values, so no group is locked.
            self.requests.errors += 1;
        }
        rows
    }

    fn on_reads(&mut self, batch: u64, index: u32, rows: Vec<u8>) {
        let id = txn_id(batch, index);
        match self.txns.get_mut(&id) {
            Some(txn) => {
                txn.reads.push(rows);
                if txn.granted && txn.reads.len() as u32 == txn.reads_needed {
                    self.ready.push_back(id);
                }
            }
            None if batch > self.scheduled => self.early_reads.entry(id).or_default().push(rows),
            None => {}
        }
    }

    /// Runs ready transactions, at most a slice of them.
    fn run_ready<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        for _ in 0..self.settings.slice_txns {
            let Some(id) = self.ready.pop_front() else {
                break;
            };
            let txn = self.txns.remove(&id).expect("ready transactions are known");
            for rows in &txn.reads {
                if self.db.install_rows(rows).is_err() {
                    self.requests.errors += 1;
                }
            }
            let ty = self.workload.txn_type(&txn.req);
            let result = self.workload.run(&txn.req, &mut self.worker);
            if txn.home
                && let Some(t) = self.types.get_mut(ty)
            {
                match result {
                    Ok(()) => {
                        t.committed += 1;
                        t.committed_cross += u64::from(txn.cross);
                        let _ = self
                            .latency
                            .record(net.now().saturating_sub(txn.since).max(1));
                    }
                    Err(TxError::UserAbort) => t.aborted += 1,
                    Err(_) => t.failed += 1,
                }
            }
            self.granted_buf.clear();
            self.locks.release(id, &txn.keys, &mut self.granted_buf);
            let granted = std::mem::take(&mut self.granted_buf);
            for &g in &granted {
                self.on_granted(net, g);
            }
            self.granted_buf = granted;
            *self.left.get_mut(&batch_of(id)).expect("scheduled batch") -= 1;
        }
        self.finish_batches(net);
    }

    /// Tells the sequencer of every batch now finished here, in order.
    fn finish_batches<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        while let Some((&batch, &0)) = self.left.first_key_value() {
            self.left.remove(&batch);
            self.finished = batch;
            let seq = self.groups.sequencer();
            if self.me == seq {
                self.on_done(self.me, batch);
            } else {
                net.send(seq, StarMsg::CalvinDone { batch });
            }
        }
    }

    fn on_done(&mut self, from: Addr, batch: u64) {
        if let Some(s) = &mut self.sequencer
            && let Some(d) = s.done.get_mut(from as usize)
        {
            *d = (*d).max(batch);
        }
    }

    fn answer(&mut self, query: Query) -> Answer {
        match query {
            Query::Stats => Answer::Stats(Box::new(self.stats())),
            Query::Digests => Answer::Digests(self.digests()),
            Query::History => Answer::History(self.take_history()),
            Query::Load(on) => {
                self.set_local_load(on);
                Answer::Stats(Box::new(self.stats()))
            }
            Query::Check => Answer::Check(self.check()),
            Query::Rows {
                table,
                first,
                count,
            } => Answer::Rows(read_rows(self.db, table, first, count)),
        }
    }
}

impl<'db, W> Node for CalvinNode<'db, W>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    type Msg = StarMsg;

    fn on_message<T: Transport<StarMsg>>(&mut self, net: &mut T, from: Addr, msg: StarMsg) {
        let from_node = from < self.groups.nodes();
        match msg {
            StarMsg::CalvinBatch { batch, bytes } if from == self.groups.sequencer() => {
                self.on_batch(net, batch, bytes)
            }
            StarMsg::CalvinReads { batch, index, rows } if from_node => {
                self.on_reads(batch, index, rows)
            }
            StarMsg::CalvinDone { batch } if from_node => self.on_done(from, batch),
            StarMsg::Request { rid, .. } | StarMsg::ReadCommitted { rid, .. } => {
                self.requests.received += 1;
                self.requests.errors += 1;
                let outcome = Outcome::error(
                    "Calvin nodes run the load their sequencer draws; they take no client requests",
                );
                net.send(from, StarMsg::Reply { rid, outcome });
            }
            StarMsg::Query { rid, query } => {
                let answer = self.answer(query);
                net.send(from, StarMsg::Answer { rid, answer });
            }
            _ => {}
        }
    }

    fn on_tick<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        self.sequence(net);
        self.run_ready(net);
    }

    fn busy(&self) -> bool {
        !self.ready.is_empty()
    }
}
