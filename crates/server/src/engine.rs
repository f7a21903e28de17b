//! The engine side of the server: a database of one protocol, run by engine threads that each own
//! a `Worker` and the connections assigned to them.
//!
//! Thread per core: each engine thread runs a single-threaded async runtime of its own, and the
//! connections [`Engine::host`]ed on it read, run and write there. A connection hands a whole batch
//! (every request it read at once) to its thread's message loop and awaits the encoded responses;
//! both sides run on the one thread, so the hand-off is a task switch, with no other thread to
//! wake and no cache line moved between cores. A batch runs to its end before the thread reads
//! another socket, as in a single-threaded server.
//!
//! Table changes need the database exclusively (`Database::create_table` takes `&mut`). The engine
//! threads hold the state's read lock between batches; a change sends each of them a pause, takes
//! the write lock once they all let go, applies itself, and releases them. Batches sent meanwhile
//! wait in the threads' queues.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Condvar, Mutex as StdMutex};

use parking_lot::{Mutex, RwLock};
use phasedb_proto::wire::{self, append_execute};
use phasedb_proto::{
    AbortCause, ErrorKind, Request, Response, StatsReply, decode_request, encode_response,
};
use phasedb_txn::{
    Config, Database, Durability, Footprint, Protocol, RECORDS_AHEAD, Recovery, SLOTS_AHEAD, Stats,
    TxError, Worker,
};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::catalog::Catalog;
use crate::durable::{DataDir, Parts};
use crate::exec::cause;
use crate::interactive::{Log, TYPE_EXECUTE, TYPE_STATEMENT};
use crate::oneshot;
use crate::procedures::{self, Generators, Installed};
use crate::schema;

/// A connection's interactive transactions, carried with its batches.
#[derive(Default)]
pub struct Session {
    next_txn: u64,
    txns: HashMap<u64, Log>,
}

/// The most interactive transactions one connection may keep open.
pub const MAX_OPEN_TXNS: usize = 1024;

/// A request of a [`Job`].
pub enum Item {
    /// A decoded request with its id.
    Request(u64, Request),
    /// A one-shot `Execute` request's payload, checked by the connection, at this range of the
    /// job's `raw` bytes: run from those bytes without decoding it into owned messages
    /// ([`crate::oneshot`]).
    Execute(std::ops::Range<usize>),
}

/// A batch of requests from one connection, and where to send its encoded responses.
pub struct Job {
    pub requests: Vec<Item>,
    /// The payloads the [`Item::Execute`]s point into.
    pub raw: Vec<u8>,
    /// Where the responses go, after what it holds.
    pub out: Vec<u8>,
    pub session: Box<Session>,
    pub reply: tokio::sync::oneshot::Sender<Answer>,
}

/// An engine thread's answer to a [`Job`]: its buffers back, the responses appended to `out`
/// (or, for a durable server's commits, `held`).
pub struct Answer {
    pub out: Vec<u8>,
    pub raw: Vec<u8>,
    pub requests: Vec<Item>,
    pub session: Box<Session>,
    pub held: Option<Held>,
    /// A one-shot did not decode: it was answered `Malformed` (id 0, after the responses before
    /// it) and nothing after it ran.
    pub malformed: bool,
}

/// A durable server's responses to a batch, held until its newest commit is durable: the
/// connection's writer waits for that (off the engine thread, which goes on with other batches,
/// and off the connection's reader, which goes on with its later requests), then encodes them
/// with [`release`].
pub struct Held {
    /// The epoch of the batch's newest commit.
    pub epoch: u64,
    /// The batch's encoded responses, in order.
    pub bytes: Vec<u8>,
    /// The id and byte range (in `bytes`) of each response that reports a commit that wrote.
    pub wrote: Vec<(u64, std::ops::Range<usize>)>,
}

/// A connection to serve on an engine thread: called there, inside that thread's runtime, it gives
/// the connection's future (which registers the socket with that runtime).
pub type Hosted = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

enum Msg {
    Job(Job),
    Host(Hosted),
    Pause(Arc<Gate>),
    Snapshot(Sender<Stats>),
    Stop,
}

/// Where paused engine threads wait for a table change to finish.
#[derive(Default)]
struct Gate {
    open: StdMutex<bool>,
    cv: Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        while !*open {
            open = self.cv.wait(open).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn release(&self) {
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_all();
    }
}

/// What the engine threads share, under one lock.
struct State<P: Protocol> {
    db: Database<P>,
    catalog: Catalog,
    installed: Installed,
    /// The data directory, when the server is durable.
    data: Option<DataDir>,
}

/// The engine as the connections see it, whatever its protocol.
pub trait Engine: Send + Sync {
    /// Hands `job` to engine thread `shard % threads`.
    fn submit(&self, shard: usize, job: Job);
    /// Serves a connection on engine thread `shard % threads` (its batches then go to that same
    /// thread). Dropped unrun if the engine stopped.
    fn host(&self, shard: usize, conn: Hosted);
    /// Runs a request that changes or lists tables, or a setup procedure (blocking).
    fn control(&self, req: &Request) -> Response;
    /// The engine's counters (blocking: asks every thread).
    fn stats(&self) -> StatsReply;
    /// The protocol's name.
    fn protocol(&self) -> &'static str;
    /// Engine threads.
    fn threads(&self) -> usize;
    /// Stops the threads after the batches already queued (blocking).
    fn stop(&self);
    /// What the data directory recovered at start, when the server is durable.
    fn recovery(&self) -> Option<Recovery>;
    /// The durable epoch as it moves, when the server is durable.
    fn durable(&self) -> Option<tokio::sync::watch::Receiver<DurableEpoch>>;
}

/// What a durable server's watcher publishes: every commit of `epoch` or before is durable;
/// `failure`, if logging failed (later commits may never be).
#[derive(Clone, Debug, Default)]
pub struct DurableEpoch {
    pub epoch: u64,
    pub failure: Option<String>,
}

impl DurableEpoch {
    /// Whether held responses of `epoch` may be released: durable, or never to be (`failure`).
    pub fn settles(&self, epoch: u64) -> bool {
        self.epoch >= epoch || self.failure.is_some()
    }
}

/// Whether `req` goes through [`Engine::control`] rather than an engine thread's batch.
pub fn is_control(req: &Request) -> bool {
    match req {
        Request::CreateTable(_)
        | Request::ListTables
        | Request::DescribeTable(_)
        | Request::DropTable(_) => true,
        Request::Call { name, .. } => procedures::is_setup(name) || procedures::is_check(name),
        _ => false,
    }
}

/// An engine of protocol `P`.
pub struct EngineOf<P: Protocol> {
    state: Arc<RwLock<State<P>>>,
    senders: Vec<UnboundedSender<Msg>>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// One table change at a time.
    change: Mutex<()>,
    recovery: Option<Recovery>,
    /// The durable epoch, published by the watcher thread (durable servers only).
    durable: Option<tokio::sync::watch::Receiver<DurableEpoch>>,
    watcher: Mutex<Option<std::thread::JoinHandle<()>>>,
    stopping: Arc<AtomicBool>,
}

/// How many times a conflicting transaction is retried before the client hears of it.
pub const MAX_RETRIES: u32 = 1000;

impl<P: Protocol> EngineOf<P> {
    /// A database of protocol `P` and `threads` engine threads: empty, or the one recovered from
    /// `durability`'s directory (see [`crate::durable`]).
    pub fn start(
        threads: usize,
        durability: Option<&Durability>,
    ) -> Result<Arc<EngineOf<P>>, String> {
        let config = Config {
            max_retries: Some(MAX_RETRIES),
            ..Config::default()
        };
        let (parts, data, recovery) = match durability {
            None => (
                Parts {
                    db: Database::<P>::open(config),
                    catalog: Catalog::default(),
                    installed: Installed::default(),
                },
                None,
                None,
            ),
            Some(d) => {
                let (data, parts, recovery) = DataDir::open::<P>(d, config)?;
                (parts, Some(data), Some(recovery))
            }
        };
        let durable_mode = data.is_some();
        let state = Arc::new(RwLock::new(State {
            db: parts.db,
            catalog: parts.catalog,
            installed: parts.installed,
            data,
        }));
        let stopping = Arc::new(AtomicBool::new(false));
        let (durable, watcher) = if durable_mode {
            let (tx, rx) = tokio::sync::watch::channel(DurableEpoch::default());
            let (state, stopping) = (state.clone(), stopping.clone());
            let handle = std::thread::Builder::new()
                .name("durable-watch".into())
                .spawn(move || watch_durable(&state, &tx, &stopping))
                .expect("spawn the durability watcher");
            (Some(rx), Some(handle))
        } else {
            (None, None)
        };
        let mut senders = Vec::new();
        let mut handles = Vec::new();
        for i in 0..threads.max(1) {
            let (tx, rx) = unbounded_channel();
            senders.push(tx);
            let state = state.clone();
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start engine thread {i}'s runtime: {e}"))?;
            handles.push(
                std::thread::Builder::new()
                    .name(format!("engine-{i}"))
                    .spawn(move || {
                        engine_thread(i, &state, &runtime, rx);
                        // Its connections are done (or the server gave up waiting): drop them.
                        runtime.shutdown_timeout(std::time::Duration::from_millis(100));
                    })
                    .expect("spawn an engine thread"),
            );
        }
        Ok(Arc::new(EngineOf {
            state,
            senders,
            threads: Mutex::new(handles),
            change: Mutex::new(()),
            recovery,
            durable,
            watcher: Mutex::new(watcher),
            stopping,
        }))
    }

    /// Runs `f` on the state with every engine thread paused.
    fn exclusive<R>(&self, f: impl FnOnce(&mut State<P>) -> R) -> R {
        let _one = self.change.lock();
        let gate = Arc::new(Gate::default());
        for s in &self.senders {
            let _ = s.send(Msg::Pause(gate.clone()));
        }
        let out = f(&mut self.state.write());
        gate.release();
        out
    }
}

/// Publishes the durable epoch each time it moves (one thread per durable server, so a thousand
/// connections waiting for durability cost no thread each). It holds the state's read lock for
/// at most an epoch and a group commit at a time, so a table change waits that long at most.
fn watch_durable<P: Protocol>(
    state: &RwLock<State<P>>,
    tx: &tokio::sync::watch::Sender<DurableEpoch>,
    stopping: &AtomicBool,
) {
    while !stopping.load(Ordering::Acquire) {
        let (epoch, failure) = {
            let st = state.read();
            let now = st.db.durable_epoch().unwrap_or(0);
            match st.db.wait_durable(now + 1) {
                Ok(()) => (st.db.durable_epoch().unwrap_or(now + 1), None),
                Err(e) => (now, Some(e.to_string())),
            }
        };
        let failed = failure.is_some();
        tx.send_if_modified(|d| {
            let changed = epoch > d.epoch || failure != d.failure;
            d.epoch = d.epoch.max(epoch);
            d.failure = failure;
            changed
        });
        if failed {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// An engine thread: its message loop runs batches on its `Worker` while its runtime serves the
/// connections hosted here. A pause leaves the runtime (its connections wait, their sockets
/// unread) and lets go of the database until the table change is done.
fn engine_thread<P: Protocol>(
    index: usize,
    state: &RwLock<State<P>>,
    runtime: &tokio::runtime::Runtime,
    mut rx: UnboundedReceiver<Msg>,
) {
    let mut gens = Generators::new(index);
    let mut scratch = Scratch::default();
    let mut kept = Stats::default();
    loop {
        let st = state.read();
        let mut worker = st.db.worker();
        let next = runtime.block_on(async {
            while let Some(msg) = rx.recv().await {
                match msg {
                    Msg::Job(job) => run_job(&st, &mut worker, &mut gens, &mut scratch, job),
                    Msg::Host(conn) => drop(tokio::spawn(conn())),
                    Msg::Snapshot(to) => {
                        let mut s = kept.clone();
                        s.merge(worker.stats());
                        let _ = to.send(s);
                    }
                    Msg::Pause(gate) => return Some(gate),
                    Msg::Stop => return None,
                }
            }
            None
        });
        kept.merge(worker.stats());
        drop(worker);
        drop(st);
        match next {
            Some(gate) => gate.wait(),
            None => return,
        }
    }
}

fn aborted(cause: AbortCause, message: impl Into<String>) -> Response {
    Response::Aborted {
        cause,
        message: message.into(),
    }
}

fn error(kind: ErrorKind, message: impl Into<String>) -> Response {
    Response::Error {
        kind,
        message: message.into(),
    }
}

/// How the engine thread runs one item of a job, found in the job's first pass.
enum Step {
    /// A one-shot, its operations at this range of the job's views.
    OneShot(u64, std::ops::Range<usize>),
    /// A request to run decoded (a one-shot payload that is another request is decoded here).
    Decoded,
    /// A one-shot that did not decode: answered `Malformed`, and nothing after it runs.
    Malformed(String),
}

/// Runs a job's items in order. A first pass reads every one-shot's operations and notes the rows
/// they name, so each transaction starts by prefetching the rows of those queued
/// [`RECORDS_AHEAD`] and [`SLOTS_AHEAD`] behind it ([`Worker::prefetch_ahead`]): a pipelining
/// client's batch runs with its rows arriving in the cache ahead of it.
fn run_job<P: Protocol>(
    st: &State<P>,
    worker: &mut Worker<'_, P>,
    gens: &mut Generators,
    scratch: &mut Scratch,
    job: Job,
) {
    let Job {
        mut requests,
        raw,
        mut out,
        mut session,
        reply,
    } = job;
    let out = &mut out;
    let mut views = Vec::new();
    let Scratch { steps, ahead } = scratch;
    steps.clear();
    ahead.clear();
    for item in &requests {
        let mut rows = Footprint::default();
        let step = match item {
            Item::Request(..) => Step::Decoded,
            Item::Execute(range) => {
                let from = views.len();
                match append_execute(&raw[range.clone()], &mut views) {
                    Ok(Some(id)) => {
                        for op in &views[from..] {
                            if let Some((t, key)) = wire::row_of(op)
                                && st.catalog.get(t).is_ok()
                            {
                                rows.add(t, key);
                            }
                        }
                        Step::OneShot(id, from..views.len())
                    }
                    Ok(None) => Step::Decoded,
                    Err(e) => Step::Malformed(e.to_string()),
                }
            }
        };
        let last = matches!(step, Step::Malformed(_));
        steps.push(step);
        ahead.push(rows);
        if last {
            break;
        }
    }
    // Durable mode: the batch's responses are held until its newest commit is durable.
    let start = out.len();
    let mut wrote = Vec::new();
    let mut newest = None;
    let mut malformed = false;
    for (i, (item, step)) in requests.drain(..).zip(steps.drain(..)).enumerate() {
        worker.prefetch_ahead(ahead.get(i + RECORDS_AHEAD), ahead.get(i + SLOTS_AHEAD));
        let at = out.len();
        let (id, committed) = match (step, item) {
            (Step::OneShot(id, ops), _) => (
                id,
                oneshot::execute(worker, &st.catalog, id, &views[ops], out),
            ),
            (Step::Malformed(e), _) => {
                encode_response(out, 0, &error(ErrorKind::Malformed, e));
                malformed = true;
                break;
            }
            (Step::Decoded, Item::Request(id, req)) => (
                id,
                run_request(st, worker, gens, &mut session, id, req, out),
            ),
            (Step::Decoded, Item::Execute(range)) => match decode_request(&raw[range]) {
                Ok((id, req)) => (
                    id,
                    run_request(st, worker, gens, &mut session, id, req, out),
                ),
                Err(e) => {
                    encode_response(out, 0, &error(ErrorKind::Malformed, e.to_string()));
                    malformed = true;
                    break;
                }
            },
        };
        if st.data.is_some()
            && committed
            && let Some(epoch) = worker.commit_epoch()
        {
            newest = newest.max(Some(epoch));
            wrote.push((id, at - start..out.len() - start));
        }
    }
    worker.prefetch_ahead(None, None);
    let held = newest.map(|epoch| Held {
        epoch,
        bytes: out.split_off(start),
        wrote,
    });
    drop(views);
    let _ = reply.send(Answer {
        out: std::mem::take(out),
        raw,
        requests,
        session,
        held,
        malformed,
    });
}

/// An engine thread's buffers for [`run_job`], reused from job to job.
#[derive(Default)]
struct Scratch {
    steps: Vec<Step>,
    /// Per item, the rows its one-shot names.
    ahead: Vec<Footprint>,
}

/// Runs a decoded engine request and appends its response to `out`; true if it committed a
/// transaction (a commit, a stored procedure).
fn run_request<P: Protocol>(
    st: &State<P>,
    worker: &mut Worker<'_, P>,
    gens: &mut Generators,
    session: &mut Session,
    id: u64,
    req: Request,
    out: &mut Vec<u8>,
) -> bool {
    let resp = match req {
        Request::Begin => {
            if session.txns.len() >= MAX_OPEN_TXNS {
                error(
                    ErrorKind::NoSuchTransaction,
                    format!("at most {MAX_OPEN_TXNS} open transactions per connection"),
                )
            } else {
                session.next_txn += 1;
                let txn = session.next_txn;
                session.txns.insert(txn, Log::default());
                Response::Begun { txn }
            }
        }
        Request::Statement { txn, op } => match session.txns.get_mut(&txn) {
            None => error(
                ErrorKind::NoSuchTransaction,
                format!("no transaction {txn}"),
            ),
            Some(log) => match log.statement(worker, &st.catalog, op) {
                Ok(r) => Response::Result(r),
                Err(a) => {
                    session.txns.remove(&txn);
                    aborted(a.cause, a.message)
                }
            },
        },
        Request::Commit { txn } => match session.txns.remove(&txn) {
            None => error(
                ErrorKind::NoSuchTransaction,
                format!("no transaction {txn}"),
            ),
            Some(log) => match log.commit(worker, &st.catalog) {
                Ok(()) => Response::Committed,
                Err(a) => aborted(a.cause, a.message),
            },
        },
        Request::Rollback { txn } => match session.txns.remove(&txn) {
            None => error(
                ErrorKind::NoSuchTransaction,
                format!("no transaction {txn}"),
            ),
            Some(_) => Response::Done,
        },
        Request::Call { name, args } => {
            match procedures::call(&name, &args, &st.installed, gens, worker) {
                Err(m) => error(ErrorKind::BadCall, m),
                Ok(Ok(values)) => Response::Values(values),
                Ok(Err(e)) => aborted(cause(&e), e.to_string()),
            }
        }
        other => error(
            ErrorKind::Malformed,
            format!("{other:?} is not an engine request"),
        ),
    };
    encode_response(out, id, &resp);
    matches!(resp, Response::Committed | Response::Values(_))
}

/// Encodes a durable server's held responses once their epoch is durable (SiloR: a commit is
/// acknowledged only when durable), or, if logging failed (`failure`), answers every commit of
/// the batch `Aborted { NotDurable }`: it may not survive a crash.
pub fn release(held: Held, failure: Option<String>, out: &mut Vec<u8>) {
    let Some(e) = failure else {
        out.extend_from_slice(&held.bytes);
        return;
    };
    let mut copied = 0;
    for (id, range) in held.wrote {
        out.extend_from_slice(&held.bytes[copied..range.start]);
        encode_response(
            out,
            id,
            &aborted(
                AbortCause::NotDurable,
                format!("committed in memory but not made durable: {e}"),
            ),
        );
        copied = range.end;
    }
    out.extend_from_slice(&held.bytes[copied..]);
}

impl<P: Protocol> Engine for EngineOf<P> {
    fn submit(&self, shard: usize, job: Job) {
        let s = &self.senders[shard % self.senders.len()];
        if let Err(tokio::sync::mpsc::error::SendError(Msg::Job(job))) = s.send(Msg::Job(job)) {
            // The engine stopped: refuse the batch (nothing of it ran).
            let mut out = job.out;
            for item in &job.requests {
                let id = match item {
                    Item::Request(id, _) => *id,
                    Item::Execute(range) => wire::peek(&job.raw[range.clone()]).map_or(0, |p| p.0),
                };
                encode_response(
                    &mut out,
                    id,
                    &error(ErrorKind::ShuttingDown, "the server is shutting down"),
                );
            }
            let _ = job.reply.send(Answer {
                out,
                raw: job.raw,
                requests: job.requests,
                session: job.session,
                held: None,
                malformed: false,
            });
        }
    }

    fn host(&self, shard: usize, conn: Hosted) {
        let _ = self.senders[shard % self.senders.len()].send(Msg::Host(conn));
    }

    fn control(&self, req: &Request) -> Response {
        match req {
            Request::ListTables => Response::Tables(self.state.read().catalog.list()),
            Request::DescribeTable(name) => match self.state.read().catalog.find(name) {
                Some(info) => Response::Table(info),
                None => error(ErrorKind::NoSuchTable, format!("no table {name}")),
            },
            Request::Call { name, args } if procedures::is_check(name) => {
                // Paused engine threads run no transaction: the database is quiescent.
                self.exclusive(|st| match procedures::check(args, &st.db, &st.installed) {
                    Ok(values) => Response::Values(values),
                    Err(m) => error(ErrorKind::BadCall, m),
                })
            }
            req if schema::is_change(req) => {
                let (resp, dropped) = self.exclusive(|st| {
                    let State {
                        db,
                        catalog,
                        installed,
                        data,
                    } = st;
                    let dropped = match req {
                        Request::DropTable(name) => catalog.find(name).map(|t| t.id),
                        _ => None,
                    };
                    let resp = match data {
                        Some(data) => data.change(db, catalog, installed, req),
                        None => schema::apply(req, db, catalog, installed, true),
                    };
                    (resp, dropped)
                });
                if let (Response::Done, Some(id)) = (&resp, dropped) {
                    self.delete_rows(id);
                }
                resp
            }
            other => error(
                ErrorKind::Malformed,
                format!("{other:?} is not a control request"),
            ),
        }
    }

    fn stats(&self) -> StatsReply {
        let mut all = Stats::default();
        for s in &self.senders {
            let (tx, rx) = channel();
            if s.send(Msg::Snapshot(tx)).is_ok()
                && let Ok(stats) = rx.recv()
            {
                all.merge(&stats);
            }
        }
        // Every type: the workloads' procedures count under their own type indexes (TPC-C's
        // Payment under 1, which is also the statements'). Statement transactions never commit
        // and abort on purpose, so their user aborts are left out.
        let mut total = phasedb_txn::TypeStats::default();
        for t in &all.types {
            total.merge(t);
        }
        let statements = all.types.get(TYPE_STATEMENT).map_or(0, |t| t.user_aborts);
        total.user_aborts = total.user_aborts.saturating_sub(statements);
        let h = &total.latency_ns;
        let us = |q: f64| {
            if h.is_empty() {
                0.0
            } else {
                h.value_at_quantile(q) as f64 / 1000.0
            }
        };
        StatsReply {
            committed: total.committed,
            conflicts: total.conflicts,
            aborted: total.user_aborts + total.failures,
            latency_p50_us: us(0.5),
            latency_p99_us: us(0.99),
            latency_p999_us: us(0.999),
            connections: 0,
            uptime_s: 0.0,
        }
    }

    fn protocol(&self) -> &'static str {
        P::NAME
    }

    fn threads(&self) -> usize {
        self.senders.len()
    }

    fn recovery(&self) -> Option<Recovery> {
        self.recovery.clone()
    }

    fn durable(&self) -> Option<tokio::sync::watch::Receiver<DurableEpoch>> {
        self.durable.clone()
    }

    fn stop(&self) {
        for s in &self.senders {
            let _ = s.send(Msg::Stop);
        }
        for h in self.threads.lock().drain(..) {
            let _ = h.join();
        }
        self.stopping.store(true, Ordering::Release);
        if let Some(h) = self.watcher.lock().take() {
            let _ = h.join();
        }
    }
}

impl<P: Protocol> EngineOf<P> {
    /// Deletes every row of dropped table `id` in transactions of a thousand rows, so the engine
    /// frees them as it frees any deleted row.
    fn delete_rows(&self, id: u32) {
        let st = self.state.read();
        let mut worker = st.db.worker();
        let mut keys = Vec::new();
        let guard = phasedb_storage::pin();
        st.db.table(id).for_each(&guard, |k, _| keys.push(k));
        drop(guard);
        for chunk in keys.chunks(1000) {
            let _ = worker.execute(TYPE_EXECUTE, |tx| {
                for &k in chunk {
                    tx.delete(id, k)?;
                }
                Ok::<_, TxError>(())
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use phasedb_proto::{FrameReader, decode_response};

    use super::*;

    fn responses(bytes: &[u8]) -> Vec<(u64, Response)> {
        let mut r = FrameReader::new(1 << 20);
        r.extend(bytes);
        let mut out = Vec::new();
        while let Ok(Some(p)) = r.next_frame() {
            out.push(decode_response(p).unwrap());
        }
        out
    }

    /// A batch of a read, a write and a failed call: released as encoded once durable; when
    /// logging failed, only the write's answer becomes `NotDurable`, with its id, in its place.
    #[test]
    fn release_turns_only_the_held_writes_into_not_durable() {
        let mut bytes = Vec::new();
        encode_response(&mut bytes, 1, &Response::Done);
        let at = bytes.len();
        encode_response(&mut bytes, 2, &Response::Committed);
        let wrote = vec![(2, at..bytes.len())];
        encode_response(
            &mut bytes,
            3,
            &error(ErrorKind::BadCall, "no such procedure"),
        );
        let held = || Held {
            epoch: 5,
            bytes: bytes.clone(),
            wrote: wrote.clone(),
        };

        let mut out = vec![9];
        release(held(), None, &mut out);
        assert_eq!((out[0], &out[1..]), (9, &bytes[..]));

        let mut out = Vec::new();
        release(held(), Some("disk full".into()), &mut out);
        let got = responses(&out);
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], (1, Response::Done));
        assert!(
            matches!(&got[1], (2, Response::Aborted { cause: AbortCause::NotDurable, message })
                if message.contains("disk full")),
            "{:?}",
            got[1]
        );
        assert_eq!(got[2], responses(&bytes)[2]);
    }
}
