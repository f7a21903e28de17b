//! The client endpoint's server side: an acceptor, one session per connection and a dispatcher
//! that routes decisions to sessions.
//!
//! A session executes its client's transactions as Algorithm 3 does, on the client's behalf:
//! reads go to the partition's worker at the transaction's snapshot there (the first read of a
//! partition takes the snapshot), a commit terminates — read-only transactions here, updates by
//! atomic broadcast to their partitions, answered when the first partition decides.
//!
//! Transaction identifiers: each tag of a connection is a client of its own (origin = replica,
//! session and tag), running one transaction at a time with growing sequence numbers, which is
//! what the partitions' duplicate detection assumes. Session numbers are never reused while the
//! replica runs.
//!
//! A client that disappears leaves nothing behind: its open transactions are aborted and their
//! snapshots released as soon as the reads in flight for them come back; the outcomes of its
//! updates already broadcast are decided like any other and dropped.

use std::io::{BufReader, BufWriter, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::wire::{self, FrameError, MAX_TAGS, Reply, Request};
use crate::pdur::client::{Finish, SnapshotSource, Transaction};
use crate::pdur::partition::{Answer, ReadError, ReadReply};
use crate::pdur::request::{MAX_OPS, MAX_VALUE, PartitionId, Sc, TxnId, partition_of};
use crate::pdur::threaded::{External, ExternalSink, LOCAL_ORIGIN, ReplicaHandle};
use crate::ramp::msg::Key;

/// Sessions a replica serves over its life (the session's bits of an origin).
pub const MAX_SESSIONS: u32 = 1 << 17;

/// Connections open at once; more are refused.
pub const MAX_OPEN: usize = 256;

const TAG_BITS: u32 = 6;
const SESSION_MASK: u32 = MAX_SESSIONS - 1;

fn origin(replica: u8, session: u32, tag: u8) -> u32 {
    (u32::from(replica) << 23) | (session << TAG_BITS) | u32::from(tag)
}

/// Counters of an endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Sessions open now (a closed connection's session ends once its reads in flight return).
    pub open: usize,
    /// Sessions ever opened.
    pub sessions: u64,
    /// Connections closed for breaking the protocol.
    pub refused: u64,
}

#[derive(Default)]
struct Counters {
    open: AtomicUsize,
    sessions: AtomicU64,
    refused: AtomicU64,
}

type Registry = Mutex<FxHashMap<u32, Sender<Event>>>;

/// A replica's client endpoint.
pub struct Endpoint {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    threads: Vec<JoinHandle<()>>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
}

impl Endpoint {
    /// Serves clients on `listener` against the replica behind `handle`, whose decisions for
    /// outside clients arrive on `decisions` ([`crate::pdur::threaded::ThreadedReplica::take_decisions`]).
    pub fn start(
        listener: TcpListener,
        handle: ReplicaHandle,
        decisions: Receiver<Answer>,
    ) -> std::io::Result<Endpoint> {
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let registry: Arc<Registry> = Arc::default();
        let streams: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let dispatcher = {
            let (stop, registry, replica) = (stop.clone(), registry.clone(), handle.replica());
            std::thread::Builder::new()
                .name("pdur-decisions".into())
                .spawn(move || dispatch(decisions, &registry, replica, &stop))?
        };
        let acceptor = {
            let (stop, counters, streams) = (stop.clone(), counters.clone(), streams.clone());
            std::thread::Builder::new()
                .name("pdur-endpoint".into())
                .spawn(move || accept(listener, handle, &registry, &counters, &streams, &stop))?
        };
        Ok(Endpoint {
            addr,
            stop,
            counters,
            threads: vec![dispatcher, acceptor],
            streams,
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The endpoint's counters.
    pub fn stats(&self) -> EndpointStats {
        EndpointStats {
            open: self.counters.open.load(Ordering::Acquire),
            sessions: self.counters.sessions.load(Ordering::Relaxed),
            refused: self.counters.refused.load(Ordering::Relaxed),
        }
    }

    /// Stops accepting, closes every connection and waits for the endpoint's threads (sessions
    /// end on their own once their reads in flight return).
    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        for s in self.streams.lock().expect("not poisoned").iter() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        for t in self.threads {
            let _ = t.join();
        }
    }
}

fn dispatch(decisions: Receiver<Answer>, registry: &Registry, replica: u8, stop: &AtomicBool) {
    while !stop.load(Ordering::Acquire) {
        let d = match decisions.recv_timeout(Duration::from_millis(20)) {
            Ok(d) => d,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let o = d.txn.origin;
        if o & LOCAL_ORIGIN != 0 || (o >> 23) as u8 != replica {
            continue;
        }
        let session = (o >> TAG_BITS) & SESSION_MASK;
        if let Some(s) = registry.lock().expect("not poisoned").get(&session) {
            let _ = s.send(Event::Decided {
                tag: (o & ((1 << TAG_BITS) - 1)) as u8,
                seq: d.txn.seq,
                committed: d.committed,
            });
        }
    }
}

fn accept(
    listener: TcpListener,
    handle: ReplicaHandle,
    registry: &Arc<Registry>,
    counters: &Arc<Counters>,
    streams: &Mutex<Vec<TcpStream>>,
    stop: &AtomicBool,
) {
    let mut next = 0u32;
    while !stop.load(Ordering::Acquire) {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            Err(_) => continue,
        };
        if next >= MAX_SESSIONS || counters.open.load(Ordering::Acquire) >= MAX_OPEN {
            drop(stream);
            continue;
        }
        let session = next;
        next += 1;
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_nodelay(true);
        let (Ok(read_half), Ok(kept)) = (stream.try_clone(), stream.try_clone()) else {
            continue;
        };
        let (tx, rx) = channel();
        registry
            .lock()
            .expect("not poisoned")
            .insert(session, tx.clone());
        {
            let mut all = streams.lock().expect("not poisoned");
            all.retain(|s| s.peer_addr().is_ok());
            all.push(kept);
        }
        counters.open.fetch_add(1, Ordering::AcqRel);
        counters.sessions.fetch_add(1, Ordering::Relaxed);
        let reader_tx = tx.clone();
        let spawned = std::thread::Builder::new()
            .name("pdur-client-read".into())
            .spawn(move || read_frames(read_half, &reader_tx));
        if spawned.is_err() {
            registry.lock().expect("not poisoned").remove(&session);
            counters.open.fetch_sub(1, Ordering::AcqRel);
            continue;
        }
        let sink_tx = Mutex::new(tx);
        let sink: ExternalSink = Arc::new(move |e| {
            let _ = sink_tx.lock().expect("not poisoned").send(Event::Answer(e));
        });
        let mut s = Session {
            base: origin(handle.replica(), session, 0),
            handle: handle.clone(),
            sink,
            slots: (0..MAX_TAGS)
                .map(|_| Slot {
                    seq: handle.first_seq(),
                    phase: Phase::Idle,
                })
                .collect(),
            out: BufWriter::new(stream),
            scratch: Vec::new(),
            closing: false,
            refused: false,
        };
        let (registry, counters) = (registry.clone(), counters.clone());
        let _ = std::thread::Builder::new()
            .name("pdur-session".into())
            .spawn(move || {
                s.run(rx);
                registry.lock().expect("not poisoned").remove(&session);
                if s.refused {
                    counters.refused.fetch_add(1, Ordering::Relaxed);
                }
                counters.open.fetch_sub(1, Ordering::AcqRel);
            });
    }
}

fn read_frames(stream: TcpStream, to: &Sender<Event>) {
    let mut r = BufReader::new(stream);
    let mut buf = Vec::new();
    loop {
        match wire::read::<Request>(&mut r, &mut buf) {
            Ok(req) => {
                if to.send(Event::Frame(req)).is_err() {
                    return;
                }
            }
            Err(FrameError::Io(_)) => break,
            Err(e) => {
                let _ = to.send(Event::Bad(e.to_string()));
                break;
            }
        }
    }
    let _ = to.send(Event::Closed);
}

/// What a session handles, in order.
enum Event {
    Frame(Request),
    Bad(String),
    Closed,
    Answer(External),
    Decided { tag: u8, seq: u64, committed: bool },
}

#[derive(Default)]
struct Slot {
    seq: u64,
    phase: Phase,
}

#[derive(Default)]
enum Phase {
    #[default]
    Idle,
    /// Open; `waiting` partitions still to answer the reads of `asked`.
    Reading {
        tx: Transaction,
        asked: Vec<Key>,
        waiting: usize,
        failed: bool,
    },
    /// A read-only commit waiting for `waiting` partitions' checks.
    Validating {
        tx: Transaction,
        waiting: usize,
        ok: bool,
    },
    /// Broadcast; waiting for the decision of this sequence number.
    Committing,
}

struct Session {
    base: u32,
    handle: ReplicaHandle,
    sink: ExternalSink,
    slots: Vec<Slot>,
    out: BufWriter<TcpStream>,
    scratch: Vec<u8>,
    /// The connection is gone (or refused): finish what is in flight, answer nothing.
    closing: bool,
    /// The connection was closed for breaking the protocol.
    refused: bool,
}

/// The partitions as a session's transactions see them: snapshots of partitions only written
/// are the published stable ones (not held, so not released).
struct Src<'a> {
    handle: &'a ReplicaHandle,
    unacquired: SmallVec<[PartitionId; 4]>,
}

impl SnapshotSource for Src<'_> {
    fn partitions(&self) -> usize {
        self.handle.partitions()
    }
    fn read(&mut self, _: PartitionId, _: Key, _: Option<Sc>) -> Result<ReadReply, ReadError> {
        Err(ReadError::WrongPartition)
    }
    fn take_snapshot(&mut self, p: PartitionId) -> Sc {
        self.unacquired.push(p);
        self.handle.stable(p)
    }
    fn release(&mut self, p: PartitionId, st: Sc) {
        if !self.unacquired.contains(&p) {
            self.handle.release(p, st);
        }
    }
    fn reads_current(&mut self, _: PartitionId, _: &[Key], _: Sc) -> bool {
        false
    }
}

impl Session {
    fn run(&mut self, rx: Receiver<Event>) {
        loop {
            let Ok(first) = rx.recv() else { return };
            self.handle_event(first);
            while let Ok(e) = rx.try_recv() {
                self.handle_event(e);
            }
            if !self.closing && self.out.flush().is_err() {
                self.close();
            }
            if self.closing && self.slots.iter().all(|s| matches!(s.phase, Phase::Idle)) {
                return;
            }
        }
    }

    fn src(&self) -> Src<'_> {
        Src {
            handle: &self.handle,
            unacquired: SmallVec::new(),
        }
    }

    fn reply(&mut self, r: &Reply) {
        if !self.closing && wire::write(&mut self.out, r, &mut self.scratch).is_err() {
            self.close();
        }
    }

    fn refuse(&mut self, why: String) {
        self.reply(&Reply::Refused(why));
        let _ = self.out.flush();
        let _ = self.out.get_ref().shutdown(std::net::Shutdown::Both);
        self.close();
        self.refused = true;
    }

    /// The client is gone: aborts every open transaction not waiting for a partition.
    fn close(&mut self) {
        self.closing = true;
        for i in 0..self.slots.len() {
            match std::mem::take(&mut self.slots[i].phase) {
                Phase::Reading { tx, waiting: 0, .. } => tx.abort(&mut self.src()),
                Phase::Committing => {}
                other => self.slots[i].phase = other,
            }
        }
    }

    fn handle_event(&mut self, e: Event) {
        match e {
            Event::Frame(_) if self.closing => {}
            Event::Frame(Request::Read { tag, keys }) => self.on_read(tag, keys),
            Event::Frame(Request::Commit { tag, writes }) => self.on_commit(tag, writes),
            Event::Frame(Request::Abort { tag }) => self.on_abort(tag),
            Event::Bad(why) => self.refuse(why),
            Event::Closed => self.close(),
            Event::Answer(External::Read {
                tag,
                partition,
                answers,
            }) => self.on_answers(tag as u8, partition, answers),
            Event::Answer(External::Validated { tag, ok }) => self.on_validated(tag as u8, ok),
            Event::Decided {
                tag,
                seq,
                committed,
            } => {
                let slot = &mut self.slots[tag as usize];
                if slot.seq == seq && matches!(slot.phase, Phase::Committing) {
                    slot.phase = Phase::Idle;
                    self.reply(&Reply::Outcome { tag, committed });
                }
            }
        }
    }

    /// The slot's open transaction between requests, or a new one if it is idle.
    fn open(&mut self, tag: u8) -> Result<Transaction, String> {
        if tag >= MAX_TAGS {
            return Err(format!("tag {tag} is not below {MAX_TAGS}"));
        }
        let slot = &mut self.slots[tag as usize];
        match std::mem::take(&mut slot.phase) {
            Phase::Idle => {
                slot.seq += 1;
                let id = TxnId {
                    origin: self.base | u32::from(tag),
                    seq: slot.seq,
                };
                Ok(Transaction::begin(id, self.handle.partitions()))
            }
            Phase::Reading { tx, waiting: 0, .. } => Ok(tx),
            other => {
                slot.phase = other;
                Err(format!("transaction {tag} is busy"))
            }
        }
    }

    fn on_read(&mut self, tag: u8, keys: Vec<Key>) {
        if keys.len() > MAX_OPS {
            return self.refuse(format!("more than {MAX_OPS} keys"));
        }
        let tx = match self.open(tag) {
            Ok(tx) => tx,
            Err(why) => return self.refuse(why),
        };
        let n = self.handle.partitions();
        let mut by_part: SmallVec<[(PartitionId, SmallVec<[Key; 4]>); 2]> = SmallVec::new();
        for &k in &keys {
            if tx.knows(k) {
                continue;
            }
            let p = partition_of(k, n);
            match by_part.iter_mut().find(|r| r.0 == p) {
                Some(r) if !r.1.contains(&k) => r.1.push(k),
                Some(_) => {}
                None => by_part.push((p, smallvec::smallvec![k])),
            }
        }
        for (p, ks) in &by_part {
            self.handle
                .read_to(*p, ks, tx.snapshot(*p), u32::from(tag), &self.sink);
        }
        self.slots[tag as usize].phase = Phase::Reading {
            tx,
            asked: keys,
            waiting: by_part.len(),
            failed: false,
        };
        if by_part.is_empty() {
            self.answer_reads(tag);
        }
    }

    fn on_answers(
        &mut self,
        tag: u8,
        partition: PartitionId,
        answers: Vec<(Key, Result<ReadReply, ReadError>)>,
    ) {
        let Some(Slot {
            phase:
                Phase::Reading {
                    tx,
                    waiting,
                    failed,
                    ..
                },
            ..
        }) = self.slots.get_mut(tag as usize)
        else {
            return;
        };
        for (k, a) in answers {
            match a {
                Ok(r) => tx.record_read(partition, k, r),
                Err(_) => *failed = true,
            }
        }
        *waiting = waiting.saturating_sub(1);
        if *waiting == 0 {
            self.answer_reads(tag);
        }
    }

    /// Every partition asked has answered: the values, or an abort if a read failed.
    fn answer_reads(&mut self, tag: u8) {
        let slot = &mut self.slots[tag as usize];
        let Phase::Reading {
            tx, asked, failed, ..
        } = std::mem::take(&mut slot.phase)
        else {
            return;
        };
        if failed || self.closing {
            tx.abort(&mut self.src());
            self.reply(&Reply::Aborted { tag });
            return;
        }
        let values = asked.iter().map(|k| tx.value_of(*k).cloned()).collect();
        slot.phase = Phase::Reading {
            tx,
            asked: Vec::new(),
            waiting: 0,
            failed: false,
        };
        self.reply(&Reply::Values { tag, values });
    }

    fn on_commit(&mut self, tag: u8, writes: Vec<(Key, crate::ramp::msg::Value)>) {
        if writes.len() > MAX_OPS || writes.iter().any(|w| w.1.len() > MAX_VALUE) {
            return self.refuse("write set too large".into());
        }
        let mut tx = match self.open(tag) {
            Ok(tx) => tx,
            Err(why) => return self.refuse(why),
        };
        for (k, v) in writes {
            tx.write(k, v);
        }
        if tx.is_read_only() {
            let checks = tx.read_only_checks();
            if checks.is_empty() {
                let _ = tx.finish_read_only(true, &mut self.src());
                return self.reply(&Reply::Outcome {
                    tag,
                    committed: true,
                });
            }
            let waiting = checks.len();
            for (p, keys, st) in checks {
                self.handle
                    .validate_to(p, keys, st, u32::from(tag), &self.sink);
            }
            self.slots[tag as usize].phase = Phase::Validating {
                tx,
                waiting,
                ok: true,
            };
            return;
        }
        let Finish::Update(req) = tx.finish_update(&mut self.src()) else {
            unreachable!("an update transaction")
        };
        if req.validate(self.handle.partitions()).is_err() {
            return self.reply(&Reply::Outcome {
                tag,
                committed: false,
            });
        }
        let parts: SmallVec<[PartitionId; 4]> = req.partitions().collect();
        self.slots[tag as usize].phase = Phase::Committing;
        self.handle.broadcast(&parts, req.encode());
    }

    fn on_validated(&mut self, tag: u8, ok: bool) {
        let slot = &mut self.slots[tag as usize];
        let Phase::Validating {
            tx,
            waiting,
            ok: so_far,
        } = std::mem::take(&mut slot.phase)
        else {
            return;
        };
        if waiting > 1 {
            slot.phase = Phase::Validating {
                tx,
                waiting: waiting - 1,
                ok: so_far && ok,
            };
            return;
        }
        let _ = tx.finish_read_only(so_far && ok, &mut self.src());
        self.reply(&Reply::Outcome {
            tag,
            committed: so_far && ok,
        });
    }

    fn on_abort(&mut self, tag: u8) {
        if tag >= MAX_TAGS {
            return self.refuse(format!("tag {tag} is not below {MAX_TAGS}"));
        }
        match std::mem::take(&mut self.slots[tag as usize].phase) {
            Phase::Idle => {}
            Phase::Reading { tx, waiting: 0, .. } => tx.abort(&mut self.src()),
            other => {
                self.slots[tag as usize].phase = other;
                self.refuse(format!("transaction {tag} is busy"));
            }
        }
    }
}
