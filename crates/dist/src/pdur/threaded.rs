//! The replica as the paper runs it (§IV-B, §V): one worker thread per logical partition, each
//! owning its [`Partition`]; votes of cross-partition transactions, reads of another partition's
//! items and outcomes travel between the threads as messages through channels, never through
//! shared data. A partition's deliveries are the messages its inbox receives, in order.
//!
//! Optionally each worker also runs closed-loop clients of its own (the replica's own load, as
//! STAR's evaluation generates load inside the nodes): they execute on their home partition's
//! thread (Algorithm 3), read other partitions by message, and broadcast an update by sending its
//! payload to the inbox of every partition it touches — each inbox a total order, independent
//! of the others, like the prototype's broadcast per partition. Clients elsewhere use
//! [`ThreadedReplica::deliver`] for what their broadcast delivered and get outcomes from
//! [`ThreadedReplica::decisions`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::client::{Finish, SnapshotSource, Transaction};
use super::history::HistoryRecorder;
use super::partition::{Answer, Decision, Effects, Partition, ReadError, ReadReply};
use super::request::{CertRequest, PartitionId, ReadItem, Sc, TxnId, partition_of};
use super::workload::{Generator, Logic};
use crate::ramp::msg::{Key, Value};

/// Client origins from here up belong to a replica's own clients: bit 31, the replica's number in
/// bits 23–30, the home partition in bits 16–22, the client's index in bits 0–15. Clients
/// elsewhere use lower origins.
pub const LOCAL_ORIGIN: u32 = 1 << 31;

/// Most partitions a replica with its own clients may have (the home partition's bits).
pub const MAX_LOCAL_PARTITIONS: usize = 128;

fn local_origin(replica: u8, home: PartitionId, i: usize) -> u32 {
    LOCAL_ORIGIN | (u32::from(replica) << 23) | (u32::from(home) << 16) | i as u32
}

fn origin_home(origin: u32) -> PartitionId {
    ((origin >> 16) & 0x7F) as PartitionId
}

fn origin_replica(origin: u32) -> u8 {
    ((origin >> 23) & 0xFF) as u8
}

/// Where the replica's own clients hand an update's payload when the replica is one of several:
/// to the atomic broadcast of every partition it touches (`(partitions, payload)`), which delivers
/// it back through [`ThreadedReplica::deliver`] on every replica.
pub type Broadcaster = Arc<dyn Fn(&[PartitionId], Vec<u8>) + Send + Sync>;

/// A read's answer per key.
pub type ReadAnswers = Vec<(Key, Result<ReadReply, ReadError>)>;

/// An answer for a client outside the worker threads (a client endpoint's session), tagged with
/// the client's transaction.
#[derive(Debug)]
pub enum External {
    /// The answers to [`ReplicaHandle::read_to`] at `partition`.
    Read {
        /// The client's transaction.
        tag: u32,
        /// The partition that answered.
        partition: PartitionId,
        /// Per key, the value read or why not.
        answers: ReadAnswers,
    },
    /// The answer to [`ReplicaHandle::validate_to`].
    Validated {
        /// The client's transaction.
        tag: u32,
        /// True if the reads there are still current.
        ok: bool,
    },
}

/// Where a worker sends an [`External`] answer.
pub type ExternalSink = Arc<dyn Fn(External) + Send + Sync>;

/// What the worker threads exchange.
enum Msg {
    /// The next payload of this partition's broadcast.
    Deliver(Vec<u8>),
    /// A vote for a cross-partition transaction.
    Vote(super::partition::VoteMsg),
    /// A local client's reads of this partition.
    Read {
        client: u32,
        keys: SmallVec<[Key; 4]>,
        st: Option<Sc>,
    },
    /// The answers to a [`Msg::Read`], for the client's home worker.
    ReadDone {
        client: u32,
        partition: PartitionId,
        answers: ReadAnswers,
    },
    /// A read-only client's check that its reads here are still current.
    Validate { client: u32, keys: Vec<Key>, st: Sc },
    /// The answer to a [`Msg::Validate`].
    Validated { client: u32, ok: bool },
    /// A snapshot of this partition is no longer in use.
    Release(Sc),
    /// A local client's transaction was decided at its first partition.
    Outcome {
        client: u32,
        seq: u64,
        committed: bool,
    },
    /// A read from outside the worker threads.
    ExternalRead {
        keys: SmallVec<[Key; 4]>,
        st: Option<Sc>,
        tag: u32,
        reply: ExternalSink,
    },
    /// A read-only check from outside the worker threads.
    ExternalValidate {
        keys: Vec<Key>,
        st: Sc,
        tag: u32,
        reply: ExternalSink,
    },
    /// Reply with the partition's image, which reflects the `index` payloads delivered so far.
    Image {
        index: u64,
        reply: Sender<(PartitionId, u64, Vec<u8>)>,
    },
    /// Replace the partition with one restored from a snapshot's image.
    Restore(Box<Partition>),
    /// Partition `p` was restored: recall the transactions waiting here that name it.
    Recall(PartitionId),
    /// Stop and hand the partition back.
    Stop,
}

/// The replica's own load.
#[derive(Default)]
pub struct LocalLoad {
    /// Closed-loop clients per partition.
    pub clients_per_partition: usize,
    /// One generator per partition.
    pub generators: Vec<Box<dyn Generator + Send>>,
    /// This replica's number among the replicas, in its clients' origins: a decision taken for
    /// another replica's client (every replica decides every transaction) is not this one's.
    pub replica: u8,
    /// `None`: an update's payload goes straight to the inbox of each partition it touches (a
    /// lone replica); otherwise to this broadcast.
    pub broadcast: Option<Broadcaster>,
    /// The clients' first sequence number: a replica restarted empty numbers its transactions
    /// above everything its earlier life broadcast.
    pub first_seq: u64,
}

/// Counters of one worker's local clients.
#[derive(Clone, Debug, Default)]
pub struct LoadStats {
    /// Committed and aborted transactions per transaction type.
    pub by_kind: FxHashMap<&'static str, (u64, u64)>,
    /// Latencies of committed transactions, in ns.
    pub latencies: Vec<u64>,
    /// Latencies of committed transactions per transaction type, in ns.
    pub kind_latencies: FxHashMap<&'static str, Vec<u64>>,
}

impl LoadStats {
    /// Committed transactions of every type.
    pub fn committed(&self) -> u64 {
        self.by_kind.values().map(|c| c.0).sum()
    }

    /// Aborted transactions of every type.
    pub fn aborted(&self) -> u64 {
        self.by_kind.values().map(|c| c.1).sum()
    }

    /// Counts one transaction of type `kind` that began at `started`.
    pub fn count(&mut self, kind: &'static str, committed: bool, started: Instant) {
        let c = self.by_kind.entry(kind).or_default();
        if committed {
            c.0 += 1;
            let ns = started.elapsed().as_nanos() as u64;
            if self.latencies.len() < 1 << 20 {
                self.latencies.push(ns);
            }
            let per_kind = self.kind_latencies.entry(kind).or_default();
            if per_kind.len() < 1 << 18 {
                per_kind.push(ns);
            }
        } else {
            c.1 += 1;
        }
    }

    /// Adds `other`'s counters.
    pub fn merge(&mut self, other: &LoadStats) {
        for (k, v) in &other.by_kind {
            let c = self.by_kind.entry(k).or_default();
            c.0 += v.0;
            c.1 += v.1;
        }
        self.latencies.extend_from_slice(&other.latencies);
        for (k, v) in &other.kind_latencies {
            self.kind_latencies
                .entry(k)
                .or_default()
                .extend_from_slice(v);
        }
    }
}

/// What a worker hands back when it stops.
pub struct Stopped {
    /// The partition, with its store and counters.
    pub partition: Partition,
    /// Its local clients' counters.
    pub load: LoadStats,
    /// When recording: every payload delivered here, in order.
    pub log: Vec<Vec<u8>>,
    /// When recording: every decision taken here.
    pub decisions: Vec<Decision>,
    /// When recording: the read-only transactions its clients committed.
    pub read_only: Vec<(TxnId, Vec<ReadItem>)>,
    /// CPU time the worker thread used, in ns (what a loaded machine does not distort).
    pub cpu_ns: u64,
}

/// CPU time of the calling thread, in ns.
fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write; the clock id is a constant the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    if rc != 0 {
        return 0;
    }
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Builds each [`Stopped`] partition's part of a `check` history.
pub fn record_history(stopped: &[Stopped]) -> HistoryRecorder {
    let partitions = stopped.len();
    let mut rec = HistoryRecorder::new(partitions);
    for s in stopped {
        for payload in &s.log {
            if let Ok(req) = CertRequest::decode(payload, partitions) {
                rec.broadcast(&req);
            }
        }
        for d in &s.decisions {
            rec.decided(d);
        }
        for (id, reads) in &s.read_only {
            rec.read_only(*id, reads.clone());
        }
    }
    rec
}

/// A stable snapshot published by its partition's worker for the others (on a line of its own).
#[repr(align(64))]
#[derive(Default)]
struct Published(AtomicU64);

/// State every worker shares.
struct Shared {
    inboxes: Vec<Sender<Msg>>,
    stable: Vec<Published>,
    load_on: AtomicBool,
    /// Per worker: local clients inside a transaction plus transactions waiting for votes.
    busy: Vec<Published>,
    decisions: Mutex<Sender<Answer>>,
    /// Whether local clients' transactions are counted (off during warm-up).
    measuring: AtomicBool,
    replica: u8,
    broadcast: Option<Broadcaster>,
    first_seq: u64,
}

/// A P-DUR replica of worker threads (DUR with one).
pub struct ThreadedReplica {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<Stopped>>,
    decisions: Receiver<Answer>,
    partitions: usize,
}

impl ThreadedReplica {
    /// Starts one worker per partition, loading each with `load(p, put)` first. `local` adds the
    /// replica's own clients (started by [`ThreadedReplica::set_load`]); `record` keeps what
    /// [`record_history`] and replays need.
    pub fn start(
        partitions: usize,
        load: impl Fn(PartitionId, &mut dyn FnMut(Key, Value)) + Sync,
        local: Option<LocalLoad>,
        record: bool,
    ) -> ThreadedReplica {
        let mut receivers = Vec::new();
        let mut inboxes = Vec::new();
        for _ in 0..partitions {
            let (tx, rx) = channel();
            inboxes.push(tx);
            receivers.push(rx);
        }
        let (clients, mut generators, replica, broadcast, first_seq) = match local {
            Some(l) => (
                l.clients_per_partition,
                l.generators.into_iter().map(Some).collect(),
                l.replica,
                l.broadcast,
                l.first_seq,
            ),
            None => (0, Vec::new(), 0, None, 0),
        };
        assert!(
            clients == 0 || partitions <= MAX_LOCAL_PARTITIONS,
            "a replica with its own clients has at most {MAX_LOCAL_PARTITIONS} partitions"
        );
        let (dtx, drx) = channel();
        let shared = Arc::new(Shared {
            inboxes,
            stable: (0..partitions).map(|_| Published::default()).collect(),
            load_on: AtomicBool::new(false),
            busy: (0..partitions).map(|_| Published::default()).collect(),
            decisions: Mutex::new(dtx),
            measuring: AtomicBool::new(true),
            replica,
            broadcast,
            first_seq,
        });
        generators.resize_with(partitions, || None);
        // Load in parallel, one partition per thread, then hand each to its worker.
        let parts: Vec<Partition> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..partitions)
                .map(|p| {
                    let load = &load;
                    s.spawn(move || {
                        let mut part = Partition::new(p as PartitionId, partitions);
                        load(p as PartitionId, &mut |k, v| part.load(k, v));
                        part
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("loader"))
                .collect()
        });
        for (p, part) in parts.iter().enumerate() {
            shared.stable[p].0.store(part.stable(), Ordering::Release);
        }
        let workers = parts
            .into_iter()
            .zip(receivers)
            .zip(generators)
            .enumerate()
            .map(|(p, ((part, inbox), generator))| {
                let decisions = shared.decisions.lock().expect("not poisoned").clone();
                let shared = shared.clone();
                let clients = if generator.is_some() { clients } else { 0 };
                std::thread::Builder::new()
                    .name(format!("pdur-partition-{p}"))
                    .spawn(move || {
                        let mut w = Worker {
                            me: p as PartitionId,
                            partitions,
                            part,
                            inbox,
                            shared,
                            decisions,
                            clients: (0..clients)
                                .map(|i| Client {
                                    origin: local_origin(replica, p as PartitionId, i),
                                    seq: first_seq,
                                    state: State::Idle,
                                })
                                .collect(),
                            generator,
                            fx: Effects::default(),
                            stats: LoadStats::default(),
                            record,
                            log: Vec::new(),
                            recorded: Vec::new(),
                            read_only: Vec::new(),
                            published: 0,
                        };
                        w.run()
                    })
                    .expect("spawn a worker")
            })
            .collect();
        ThreadedReplica {
            shared,
            workers,
            decisions: drx,
            partitions,
        }
    }

    /// The number of partitions.
    pub fn partitions(&self) -> usize {
        self.partitions
    }

    /// `deliver(partition, payload)`: the next payload partition `p`'s broadcast delivered (the
    /// bytes of [`CertRequest::encode`]). Calls for one partition must come in delivery order
    /// (from one thread, or ordered by the caller). A payload that is not a valid request naming
    /// `p` is counted and dropped by the worker without any state change.
    pub fn deliver(&self, p: PartitionId, payload: Vec<u8>) {
        let _ = self.shared.inboxes[p as usize].send(Msg::Deliver(payload));
    }

    /// Asks partition `p`'s worker for its image once it has handled the `index` payloads
    /// delivered so far; the answer `(p, index, image)` goes to `reply`.
    pub fn request_image(
        &self,
        p: PartitionId,
        index: u64,
        reply: &Sender<(PartitionId, u64, Vec<u8>)>,
    ) {
        let _ = self.shared.inboxes[p as usize].send(Msg::Image {
            index,
            reply: reply.clone(),
        });
    }

    /// Replaces partition `p` with `part`, restored from a snapshot's image: its worker takes it
    /// in place of its own and recalls the transactions it waits for, and the other workers
    /// recall theirs that name `p` ([`super::partition::VoteKind`]). The payloads delivered
    /// after the snapshot follow with [`ThreadedReplica::deliver`].
    pub fn restore(&self, p: PartitionId, part: Partition) {
        let _ = self.shared.inboxes[p as usize].send(Msg::Restore(Box::new(part)));
        for (q, inbox) in self.shared.inboxes.iter().enumerate() {
            if q != p as usize {
                let _ = inbox.send(Msg::Recall(p));
            }
        }
    }

    /// Decisions at each transaction's first partition for clients outside the replica.
    pub fn decisions(&self) -> &Receiver<Answer> {
        &self.decisions
    }

    /// Takes the receiver of [`ThreadedReplica::decisions`] (for a client endpoint's
    /// dispatcher), leaving one that receives nothing.
    pub fn take_decisions(&mut self) -> Receiver<Answer> {
        std::mem::replace(&mut self.decisions, channel().1)
    }

    /// A handle on the workers for clients outside them.
    pub fn handle(&self) -> ReplicaHandle {
        ReplicaHandle {
            shared: self.shared.clone(),
        }
    }

    /// Reads `keys` of partition `p` at `st` (or its stable snapshot, then kept in use until
    /// [`ThreadedReplica::release`]), from outside the workers; blocks for the answer.
    pub fn read(&self, p: PartitionId, keys: Vec<Key>, st: Option<Sc>) -> ReadAnswers {
        let (tx, rx) = channel();
        let tx = Mutex::new(tx);
        let sink: ExternalSink = Arc::new(move |e| {
            if let External::Read { answers, .. } = e {
                let _ = tx.lock().expect("not poisoned").send(answers);
            }
        });
        self.handle().read_to(p, &keys, st, 0, &sink);
        rx.recv().unwrap_or_default()
    }

    /// A snapshot of partition `p` is no longer in use.
    pub fn release(&self, p: PartitionId, st: Sc) {
        let _ = self.shared.inboxes[p as usize].send(Msg::Release(st));
    }

    /// Turns the local clients on or off (off: each finishes its transaction in progress).
    pub fn set_load(&self, on: bool) {
        self.shared.load_on.store(on, Ordering::Release);
        if on {
            for inbox in &self.shared.inboxes {
                let _ = inbox.send(Msg::Release(0));
            }
        }
    }

    /// Counts the local clients' transactions from now on (`true`, the default) or not (warm-up).
    pub fn set_measuring(&self, on: bool) {
        self.shared.measuring.store(on, Ordering::Release);
    }

    /// Local clients inside a transaction plus transactions waiting for votes, over the workers
    /// (as last published; 0 once the replica is quiet).
    pub fn busy(&self) -> u64 {
        self.shared
            .busy
            .iter()
            .map(|b| b.0.load(Ordering::Acquire))
            .sum()
    }

    /// Waits until no local client is inside a transaction and no transaction waits for votes.
    pub fn quiesce(&self) {
        let mut quiet_polls = 0;
        while quiet_polls < 3 {
            std::thread::sleep(Duration::from_millis(2));
            let busy: u64 = self
                .shared
                .busy
                .iter()
                .map(|b| b.0.load(Ordering::Acquire))
                .sum();
            quiet_polls = if busy == 0 { quiet_polls + 1 } else { 0 };
        }
    }

    /// Stops the workers (after [`ThreadedReplica::quiesce`] for a consistent end) and returns
    /// each partition.
    pub fn stop(self) -> Vec<Stopped> {
        for inbox in &self.shared.inboxes {
            let _ = inbox.send(Msg::Stop);
        }
        self.workers
            .into_iter()
            .map(|w| w.join().expect("a worker panicked"))
            .collect()
    }
}

/// The workers as clients outside them reach them (cheap to clone; messages, no shared data).
#[derive(Clone)]
pub struct ReplicaHandle {
    shared: Arc<Shared>,
}

impl ReplicaHandle {
    /// The number of partitions.
    pub fn partitions(&self) -> usize {
        self.shared.inboxes.len()
    }

    /// This replica's number among the replicas.
    pub fn replica(&self) -> u8 {
        self.shared.replica
    }

    /// The first sequence number of this replica's clients ([`LocalLoad::first_seq`]).
    pub fn first_seq(&self) -> u64 {
        self.shared.first_seq
    }

    /// Partition `p`'s stable snapshot as its worker last published it.
    pub fn stable(&self, p: PartitionId) -> Sc {
        self.shared.stable[p as usize].0.load(Ordering::Acquire)
    }

    /// Reads `keys` of partition `p` at `st` (or at the stable snapshot, then kept in use until
    /// [`ReplicaHandle::release`]); the answer goes to `reply` tagged `tag`.
    pub fn read_to(
        &self,
        p: PartitionId,
        keys: &[Key],
        st: Option<Sc>,
        tag: u32,
        reply: &ExternalSink,
    ) {
        let _ = self.shared.inboxes[p as usize].send(Msg::ExternalRead {
            keys: SmallVec::from_slice(keys),
            st,
            tag,
            reply: reply.clone(),
        });
    }

    /// Asks partition `p` whether `keys` read at `st` are still current (a read-only
    /// transaction's check across partitions); the answer goes to `reply` tagged `tag`.
    pub fn validate_to(
        &self,
        p: PartitionId,
        keys: Vec<Key>,
        st: Sc,
        tag: u32,
        reply: &ExternalSink,
    ) {
        let _ = self.shared.inboxes[p as usize].send(Msg::ExternalValidate {
            keys,
            st,
            tag,
            reply: reply.clone(),
        });
    }

    /// A snapshot of partition `p` is no longer in use.
    pub fn release(&self, p: PartitionId, st: Sc) {
        let _ = self.shared.inboxes[p as usize].send(Msg::Release(st));
    }

    /// Terminates an update: its payload to the atomic broadcast of each partition in `parts`
    /// (straight to their inboxes for a lone replica without one).
    pub fn broadcast(&self, parts: &[PartitionId], payload: Vec<u8>) {
        match &self.shared.broadcast {
            Some(b) => b(parts, payload),
            None => {
                if let Some((&last, rest)) = parts.split_last() {
                    for &p in rest {
                        let _ = self.shared.inboxes[p as usize].send(Msg::Deliver(payload.clone()));
                    }
                    let _ = self.shared.inboxes[last as usize].send(Msg::Deliver(payload));
                }
            }
        }
    }
}

/// Merges the local clients' counters of every partition.
pub fn total_load(stopped: &[Stopped]) -> LoadStats {
    let mut total = LoadStats::default();
    for s in stopped {
        total.merge(&s.load);
    }
    total
}

enum State {
    Idle,
    Reading {
        tx: Transaction,
        logic: Box<dyn Logic>,
        waiting: usize,
        failed: bool,
        started: Instant,
    },
    Validating {
        tx: Transaction,
        kind: &'static str,
        waiting: usize,
        ok: bool,
        started: Instant,
    },
    Waiting {
        kind: &'static str,
        started: Instant,
    },
}

struct Client {
    origin: u32,
    seq: u64,
    state: State,
}

struct Worker {
    me: PartitionId,
    partitions: usize,
    part: Partition,
    inbox: Receiver<Msg>,
    shared: Arc<Shared>,
    decisions: Sender<Answer>,
    clients: Vec<Client>,
    generator: Option<Box<dyn Generator + Send>>,
    fx: Effects,
    stats: LoadStats,
    record: bool,
    log: Vec<Vec<u8>>,
    recorded: Vec<Decision>,
    read_only: Vec<(TxnId, Vec<ReadItem>)>,
    published: Sc,
}

/// The home worker's view of the partitions for [`Transaction`]'s calls: its own partition
/// directly, the others through their published stable snapshot and messages.
struct Local<'a> {
    me: PartitionId,
    part: &'a mut Partition,
    shared: &'a Shared,
    /// Partitions whose snapshot was taken from the published value, not acquired there.
    unacquired: SmallVec<[PartitionId; 4]>,
}

impl SnapshotSource for Local<'_> {
    fn partitions(&self) -> usize {
        self.shared.inboxes.len()
    }

    fn read(&mut self, p: PartitionId, key: Key, st: Option<Sc>) -> Result<ReadReply, ReadError> {
        if p != self.me {
            return Err(ReadError::WrongPartition);
        }
        self.part.read(key, st)
    }

    fn take_snapshot(&mut self, p: PartitionId) -> Sc {
        if p == self.me {
            self.part.take_snapshot()
        } else {
            self.unacquired.push(p);
            self.shared.stable[p as usize].0.load(Ordering::Acquire)
        }
    }

    fn release(&mut self, p: PartitionId, st: Sc) {
        if p == self.me {
            self.part.release(st);
        } else if !self.unacquired.contains(&p) {
            let _ = self.shared.inboxes[p as usize].send(Msg::Release(st));
        }
    }

    fn reads_current(&mut self, p: PartitionId, keys: &[Key], st: Sc) -> bool {
        debug_assert_eq!(p, self.me);
        self.part.reads_current(keys.iter().copied(), st)
    }
}

impl Worker {
    fn run(&mut self) -> Stopped {
        loop {
            let load_on = self.shared.load_on.load(Ordering::Acquire);
            let mut handled = 0;
            while handled < 256 {
                let msg = match self.inbox.try_recv() {
                    Ok(m) => m,
                    Err(_) => break,
                };
                handled += 1;
                if let Msg::Stop = msg {
                    return self.stopped();
                }
                self.handle(msg);
            }
            let mut started = 0;
            if load_on {
                for c in 0..self.clients.len() {
                    if matches!(self.clients[c].state, State::Idle) {
                        self.start(c);
                        started += 1;
                    }
                }
            }
            self.publish();
            if handled == 0 && started == 0 {
                match self.inbox.recv_timeout(Duration::from_millis(1)) {
                    Ok(Msg::Stop) => return self.stopped(),
                    Ok(m) => self.handle(m),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return self.stopped(),
                }
            }
        }
    }

    fn stopped(&mut self) -> Stopped {
        let part = std::mem::replace(&mut self.part, Partition::new(self.me, self.partitions));
        Stopped {
            partition: part,
            load: std::mem::take(&mut self.stats),
            log: std::mem::take(&mut self.log),
            decisions: std::mem::take(&mut self.recorded),
            read_only: std::mem::take(&mut self.read_only),
            cpu_ns: thread_cpu_ns(),
        }
    }

    /// Publishes the stable snapshot and how busy this worker is.
    fn publish(&mut self) {
        let stable = self.part.stable();
        if stable != self.published {
            self.published = stable;
            self.shared.stable[self.me as usize]
                .0
                .store(stable, Ordering::Release);
        }
        let busy = self
            .clients
            .iter()
            .filter(|c| !matches!(c.state, State::Idle))
            .count()
            + self.part.undecided();
        self.shared.busy[self.me as usize]
            .0
            .store(busy as u64, Ordering::Release);
    }

    fn send(&self, p: PartitionId, msg: Msg) {
        let _ = self.shared.inboxes[p as usize].send(msg);
    }

    fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Deliver(payload) => {
                match CertRequest::decode(&payload, self.partitions) {
                    Ok(req) if req.snapshot(self.me).is_some() => {
                        self.part.deliver(req, &mut self.fx);
                        if self.record {
                            self.log.push(payload);
                        }
                    }
                    _ => {}
                }
                self.effects();
            }
            Msg::Vote(v) => {
                self.part.on_vote(v, &mut self.fx);
                self.effects();
            }
            Msg::Read { client, keys, st } => {
                let answers = self.read_at_one_snapshot(&keys, st);
                let home = origin_home(client);
                self.send(
                    home,
                    Msg::ReadDone {
                        client,
                        partition: self.me,
                        answers,
                    },
                );
            }
            Msg::ReadDone {
                client,
                partition,
                answers,
            } => self.on_read_done(client, partition, answers),
            Msg::Validate { client, keys, st } => {
                let ok = self.part.reads_current(keys, st);
                let home = origin_home(client);
                self.send(home, Msg::Validated { client, ok });
            }
            Msg::Validated { client, ok } => self.on_validated(client, ok),
            Msg::Release(st) => {
                if st != 0 {
                    self.part.release(st);
                }
            }
            Msg::Outcome {
                client,
                seq,
                committed,
            } => self.on_outcome(client, seq, committed),
            Msg::ExternalRead {
                keys,
                st,
                tag,
                reply,
            } => reply(External::Read {
                tag,
                partition: self.me,
                answers: self.read_at_one_snapshot(&keys, st),
            }),
            Msg::ExternalValidate {
                keys,
                st,
                tag,
                reply,
            } => reply(External::Validated {
                tag,
                ok: self.part.reads_current(keys, st),
            }),
            Msg::Image { index, reply } => {
                let _ = reply.send((self.me, index, self.part.image()));
            }
            Msg::Restore(part) => {
                self.part = *part;
                self.part.recall(None, &mut self.fx);
                self.effects();
            }
            Msg::Recall(p) => {
                self.part.recall(Some(p), &mut self.fx);
                self.effects();
            }
            Msg::Stop => unreachable!("handled by the loop"),
        }
    }

    /// Reads `keys` here at `st`, or at one snapshot the first read takes (and keeps in use
    /// once, for one release).
    fn read_at_one_snapshot(&mut self, keys: &[Key], mut st: Option<Sc>) -> ReadAnswers {
        keys.iter()
            .map(|&k| {
                let r = self.part.read(k, st);
                if let Ok(r) = &r {
                    st = Some(r.snapshot);
                }
                (k, r)
            })
            .collect()
    }

    /// Sends the votes and routes the decisions that handling a message produced.
    fn effects(&mut self) {
        for v in self.fx.votes.drain(..) {
            let _ = self.shared.inboxes[v.to as usize].send(Msg::Vote(v));
        }
        let decisions: SmallVec<[Decision; 2]> = self.fx.decisions.drain(..).collect();
        for d in decisions {
            if self.record {
                self.recorded.push(d);
            }
            if d.reply {
                self.answer(Answer::from(&d));
            }
        }
        let answers: SmallVec<[Answer; 2]> = self.fx.answers.drain(..).collect();
        for a in answers {
            self.answer(a);
        }
    }

    /// Tells a transaction's outcome to its client: one outside the workers through
    /// [`ThreadedReplica::decisions`], a local one of this replica at its home worker.
    fn answer(&mut self, a: Answer) {
        let client = a.txn.origin;
        if client & LOCAL_ORIGIN == 0 {
            let _ = self.decisions.send(a);
            return;
        }
        if origin_replica(client) != self.shared.replica {
            return;
        }
        let home = origin_home(client);
        if home == self.me {
            self.on_outcome(client, a.txn.seq, a.committed);
        } else {
            self.send(
                home,
                Msg::Outcome {
                    client,
                    seq: a.txn.seq,
                    committed: a.committed,
                },
            );
        }
    }

    /// Counts a local client's transaction, unless the replica is warming up.
    fn count(&mut self, kind: &'static str, committed: bool, started: Instant) {
        if self.shared.measuring.load(Ordering::Relaxed) {
            self.stats.count(kind, committed, started);
        }
    }

    fn client_index(&self, origin: u32) -> usize {
        (origin & 0xFFFF) as usize
    }

    fn start(&mut self, c: usize) {
        let Some(generator) = self.generator.as_mut() else {
            return;
        };
        let logic = generator.next_txn(self.me);
        let client = &mut self.clients[c];
        client.seq += 1;
        let tx = Transaction::begin(
            TxnId {
                origin: client.origin,
                seq: client.seq,
            },
            self.partitions,
        );
        self.advance(c, tx, logic, Instant::now());
    }

    fn local(&mut self) -> Local<'_> {
        Local {
            me: self.me,
            part: &mut self.part,
            shared: &self.shared,
            unacquired: SmallVec::new(),
        }
    }

    /// Runs a client's reads round by round: its own partition's at once, the others' by message
    /// (then the client waits); after the last round, terminates.
    fn advance(
        &mut self,
        c: usize,
        mut tx: Transaction,
        mut logic: Box<dyn Logic>,
        started: Instant,
    ) {
        let mut keys = Vec::new();
        loop {
            keys.clear();
            logic.next_reads(&tx, &mut keys);
            if keys.is_empty() {
                return self.terminate(c, tx, logic, started);
            }
            let mut remote: SmallVec<[(PartitionId, SmallVec<[Key; 4]>); 2]> = SmallVec::new();
            for &k in &keys {
                if tx.knows(k) {
                    continue;
                }
                let p = partition_of(k, self.partitions);
                if p == self.me {
                    let mut local = self.local();
                    if tx.read(k, &mut local).is_err() {
                        tx.abort(&mut self.local());
                        self.count(logic.kind(), false, started);
                        return;
                    }
                } else {
                    match remote.iter_mut().find(|r| r.0 == p) {
                        Some(r) if !r.1.contains(&k) => r.1.push(k),
                        Some(_) => {}
                        None => remote.push((p, smallvec::smallvec![k])),
                    }
                }
            }
            if !remote.is_empty() {
                let origin = self.clients[c].origin;
                let waiting = remote.len();
                for (p, keys) in remote {
                    let st = tx.snapshot(p);
                    self.send(
                        p,
                        Msg::Read {
                            client: origin,
                            keys,
                            st,
                        },
                    );
                }
                self.clients[c].state = State::Reading {
                    tx,
                    logic,
                    waiting,
                    failed: false,
                    started,
                };
                return;
            }
        }
    }

    fn on_read_done(&mut self, client: u32, partition: PartitionId, answers: ReadAnswers) {
        let c = self.client_index(client);
        let State::Reading {
            mut tx,
            logic,
            waiting,
            mut failed,
            started,
        } = std::mem::replace(&mut self.clients[c].state, State::Idle)
        else {
            return;
        };
        for (k, a) in answers {
            match a {
                Ok(r) => tx.record_read(partition, k, r),
                Err(_) => failed = true,
            }
        }
        if waiting > 1 {
            self.clients[c].state = State::Reading {
                tx,
                logic,
                waiting: waiting - 1,
                failed,
                started,
            };
        } else if failed {
            tx.abort(&mut self.local());
            self.count(logic.kind(), false, started);
        } else {
            self.advance(c, tx, logic, started);
        }
    }

    /// Algorithm 3's commit: a read-only transaction checks its reads (across partitions) and
    /// ends here; an update is broadcast to its partitions' inboxes.
    fn terminate(
        &mut self,
        c: usize,
        mut tx: Transaction,
        mut logic: Box<dyn Logic>,
        started: Instant,
    ) {
        logic.write(&mut tx);
        let kind = logic.kind();
        if tx.is_read_only() {
            let checks = tx.read_only_checks();
            let mut ok = true;
            let mut waiting = 0;
            let origin = self.clients[c].origin;
            for (p, keys, st) in checks {
                if p == self.me {
                    ok &= self.part.reads_current(keys, st);
                } else {
                    waiting += 1;
                    self.send(
                        p,
                        Msg::Validate {
                            client: origin,
                            keys,
                            st,
                        },
                    );
                }
            }
            if waiting == 0 {
                self.end_read_only(c, tx, kind, ok, started);
            } else {
                self.clients[c].state = State::Validating {
                    tx,
                    kind,
                    waiting,
                    ok,
                    started,
                };
            }
            return;
        }
        let Finish::Update(req) = tx.finish_update(&mut self.local()) else {
            unreachable!("an update transaction")
        };
        let payload = req.encode();
        match &self.shared.broadcast {
            Some(b) => {
                let parts: SmallVec<[PartitionId; 4]> = req.partitions().collect();
                b(&parts, payload);
            }
            None => {
                for p in req.partitions() {
                    self.send(p, Msg::Deliver(payload.clone()));
                }
            }
        }
        self.clients[c].state = State::Waiting { kind, started };
    }

    fn on_validated(&mut self, client: u32, ok: bool) {
        let c = self.client_index(client);
        let State::Validating {
            tx,
            kind,
            waiting,
            ok: so_far,
            started,
        } = std::mem::replace(&mut self.clients[c].state, State::Idle)
        else {
            return;
        };
        if waiting > 1 {
            self.clients[c].state = State::Validating {
                tx,
                kind,
                waiting: waiting - 1,
                ok: so_far && ok,
                started,
            };
        } else {
            self.end_read_only(c, tx, kind, so_far && ok, started);
        }
    }

    fn end_read_only(
        &mut self,
        c: usize,
        tx: Transaction,
        kind: &'static str,
        ok: bool,
        started: Instant,
    ) {
        let id = tx.id();
        let Finish::ReadOnly { committed, reads } = tx.finish_read_only(ok, &mut self.local())
        else {
            unreachable!("read-only")
        };
        if committed && self.record {
            self.read_only.push((id, reads));
        }
        self.count(kind, committed, started);
        self.clients[c].state = State::Idle;
    }

    /// Ends local client `client`'s wait if it waits for transaction `seq` (an outcome told
    /// again for an earlier one is ignored).
    fn on_outcome(&mut self, client: u32, seq: u64, committed: bool) {
        let c = self.client_index(client);
        if self.clients[c].seq != seq {
            return;
        }
        if let State::Waiting { kind, started } =
            std::mem::replace(&mut self.clients[c].state, State::Idle)
        {
            self.count(kind, committed, started);
        }
    }
}
