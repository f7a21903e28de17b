//! Closed-loop clients over TCP: one connection runs `inflight` clients at once (one per tag),
//! each executing the workload's transactions at the replica (Algorithm 3 remotely): a round of
//! reads per request, then a commit carrying the writes, the next transaction once the outcome
//! is in. A load that watches its connection ([`RemoteLoad::watch`]) outlives the replica's
//! failure: it reports the connection lost, gives up the transactions in flight and connects
//! again until its window is over.

use std::io::{self, BufReader, BufWriter, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::wire::{self, MAX_TAGS, Reply, Request};
use crate::pdur::client::Transaction;
use crate::pdur::partition::ReadReply;
use crate::pdur::request::{PartitionId, TxnId, partition_of};
use crate::pdur::threaded::LoadStats;
use crate::pdur::workload::{Generator, Logic};
use crate::ramp::msg::Key;

/// A remote load's settings.
pub struct RemoteLoad {
    /// The replica's client endpoint.
    pub addr: SocketAddr,
    /// The replica's partitions.
    pub partitions: usize,
    /// One generator per partition; client `i`'s home is partition `i % partitions`.
    pub generators: Vec<Box<dyn Generator + Send>>,
    /// Clients on the connection (at most [`MAX_TAGS`]).
    pub inflight: usize,
    /// Load before counting.
    pub warmup: Duration,
    /// Load counted.
    pub duration: Duration,
    /// Counts every commit as its outcome arrives, warm-up included (throughput over time).
    pub progress: Option<Arc<AtomicU64>>,
    /// Told when the connection fails and when a new one answers; with a watch a failed
    /// connection is opened again until the window is over, without one it ends the load.
    pub watch: Option<Box<dyn FnMut(ConnectionEvent) + Send>>,
}

/// How long a client waits for a reply before it counts the connection lost.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// What a watched remote load met.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnectionEvent {
    /// The connection failed (closed, or no reply within [`REPLY_TIMEOUT`]); the transactions
    /// in flight on it were given up unanswered.
    Lost {
        /// When the failure was seen.
        at: Instant,
        /// The error.
        why: String,
        /// Transactions in flight on it.
        unanswered: usize,
    },
    /// A connection opened after a loss answered its first request.
    Answering {
        /// When the reply came.
        at: Instant,
    },
}

/// What a remote load measured.
pub struct RemoteReport {
    /// Counters over the measured window.
    pub load: LoadStats,
    /// The measured window's length.
    pub measured: Duration,
}

struct Client {
    home: PartitionId,
    tx: Transaction,
    logic: Option<Box<dyn Logic>>,
    asked: Vec<Key>,
    started: Instant,
}

/// The window of a load, fixed when it starts.
struct Window {
    begin: Instant,
    measure_from: Instant,
    measure_to: Instant,
}

/// Runs `cfg`'s clients until the window is over and every transaction in flight has its
/// outcome (each reply waited for at most [`REPLY_TIMEOUT`]); with [`RemoteLoad::watch`] a
/// failed connection is reported and opened again (its transactions in flight given up) until
/// the window is over.
pub fn run(mut cfg: RemoteLoad) -> io::Result<RemoteReport> {
    if cfg.inflight == 0
        || cfg.inflight > MAX_TAGS as usize
        || cfg.generators.len() != cfg.partitions
    {
        return Err(io::Error::other(format!(
            "between 1 and {MAX_TAGS} clients per connection and one generator per partition"
        )));
    }
    let begin = Instant::now();
    let window = Window {
        begin,
        measure_from: begin + cfg.warmup,
        measure_to: begin + cfg.warmup + cfg.duration,
    };
    let mut load = LoadStats::default();
    let mut ended_at = None;
    let mut lost = false;
    loop {
        let patience = if lost {
            window.measure_to.saturating_duration_since(Instant::now())
        } else {
            Duration::from_secs(10)
        };
        let session = connect_within(cfg.addr, patience)
            .map_err(SessionError::Connect)
            .and_then(|s| session(&mut cfg, s, &window, &mut load, &mut ended_at, lost));
        let (e, unanswered) = match session {
            Ok(()) => break,
            // No connection before the window closed: nothing more to run.
            Err(SessionError::Connect(_)) if lost => break,
            Err(SessionError::Connect(e)) => (e, 0),
            Err(SessionError::Failed(e, n)) => (e, n),
        };
        let Some(watch) = cfg.watch.as_mut() else {
            return Err(e);
        };
        watch(ConnectionEvent::Lost {
            at: Instant::now(),
            why: e.to_string(),
            unanswered,
        });
        lost = true;
        if Instant::now() >= window.measure_to {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let end = ended_at.unwrap_or_else(Instant::now).min(window.measure_to);
    Ok(RemoteReport {
        load,
        measured: end.saturating_duration_since(window.measure_from),
    })
}

/// Why a session ended early.
enum SessionError {
    /// No connection.
    Connect(io::Error),
    /// The connection failed with this many transactions in flight.
    Failed(io::Error, usize),
}

/// Connects, retrying for up to `patience` while the replica starts; sets the reply timeout.
fn connect_within(addr: SocketAddr, patience: Duration) -> io::Result<TcpStream> {
    let deadline = Instant::now() + patience;
    let stream = loop {
        match TcpStream::connect(addr) {
            Ok(s) => break s,
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(REPLY_TIMEOUT))?;
    Ok(stream)
}

/// Runs every client on one connection until the window is over and the transactions in flight
/// have their outcome; `after_loss`: the first reply is reported as [`ConnectionEvent::Answering`].
fn session(
    cfg: &mut RemoteLoad,
    stream: TcpStream,
    window: &Window,
    load: &mut LoadStats,
    ended_at: &mut Option<Instant>,
    mut after_loss: bool,
) -> Result<(), SessionError> {
    let mut active = 0;
    let failed = |active: usize| move |e: io::Error| SessionError::Failed(e, active);
    let mut r = BufReader::new(stream.try_clone().map_err(failed(0))?);
    let mut w = BufWriter::new(stream);
    let (mut buf, mut scratch) = (Vec::new(), Vec::new());
    let mut clients: Vec<Client> = (0..cfg.inflight)
        .map(|i| Client {
            home: (i % cfg.partitions) as PartitionId,
            tx: Transaction::begin(TxnId { origin: 0, seq: 0 }, cfg.partitions),
            logic: None,
            asked: Vec::new(),
            started: window.begin,
        })
        .collect();
    for (tag, c) in clients.iter_mut().enumerate() {
        start(c, cfg);
        step(tag as u8, c, &mut w, &mut scratch).map_err(failed(active))?;
        active += 1;
    }
    w.flush().map_err(failed(active))?;
    while active > 0 {
        let reply: Reply = wire::read(&mut r, &mut buf)
            .map_err(io::Error::other)
            .map_err(failed(active))?;
        if after_loss {
            after_loss = false;
            if let Some(watch) = cfg.watch.as_mut() {
                watch(ConnectionEvent::Answering { at: Instant::now() });
            }
        }
        let (tag, outcome) = match reply {
            Reply::Values { tag, values } => {
                let c = clients
                    .get_mut(tag as usize)
                    .ok_or_else(|| io::Error::other("reply for an unknown tag"))
                    .map_err(failed(active))?;
                if values.len() != c.asked.len() {
                    return Err(failed(active)(io::Error::other(
                        "values do not match the keys asked",
                    )));
                }
                for (&k, v) in c.asked.iter().zip(values) {
                    let p = partition_of(k, cfg.partitions);
                    c.tx.record_read(
                        p,
                        k,
                        ReadReply {
                            value: v,
                            version: 0,
                            snapshot: 0,
                        },
                    );
                }
                step(tag, c, &mut w, &mut scratch).map_err(failed(active))?;
                (tag, None)
            }
            Reply::Aborted { tag } => (tag, Some(false)),
            Reply::Outcome { tag, committed } => (tag, Some(committed)),
            Reply::Refused(why) => {
                return Err(failed(active)(io::Error::other(format!("refused: {why}"))));
            }
        };
        if let Some(committed) = outcome {
            let c = clients
                .get_mut(tag as usize)
                .ok_or_else(|| io::Error::other("reply for an unknown tag"))
                .map_err(failed(active))?;
            let kind = c.logic.as_ref().map_or("?", |l| l.kind());
            let now = Instant::now();
            if committed && let Some(p) = &cfg.progress {
                p.fetch_add(1, Ordering::Relaxed);
            }
            if c.started >= window.measure_from && now <= window.measure_to {
                load.count(kind, committed, c.started);
            }
            if now < window.measure_to {
                start(c, cfg);
                step(tag, c, &mut w, &mut scratch).map_err(failed(active))?;
            } else {
                ended_at.get_or_insert(now);
                active -= 1;
            }
        }
        if r.buffer().is_empty() {
            w.flush().map_err(failed(active))?;
        }
    }
    Ok(())
}

/// Connects, retrying for up to 10 s while the replica starts.
pub fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    connect_within(addr, Duration::from_secs(10))
}

fn start(c: &mut Client, cfg: &mut RemoteLoad) {
    c.logic = Some(cfg.generators[c.home as usize].next_txn(c.home));
    c.tx = Transaction::begin(TxnId { origin: 0, seq: 0 }, cfg.partitions);
    c.started = Instant::now();
}

/// Sends the client's next request: its next round of reads, or its commit.
fn step(tag: u8, c: &mut Client, w: &mut impl Write, scratch: &mut Vec<u8>) -> io::Result<()> {
    let logic = c.logic.as_mut().expect("a transaction is running");
    loop {
        c.asked.clear();
        logic.next_reads(&c.tx, &mut c.asked);
        if c.asked.is_empty() {
            break;
        }
        let tx = &c.tx;
        c.asked.retain(|k| !tx.knows(*k));
        c.asked.sort_unstable();
        c.asked.dedup();
        if !c.asked.is_empty() {
            let req = Request::Read {
                tag,
                keys: c.asked.clone(),
            };
            return wire::write(w, &req, scratch);
        }
    }
    logic.write(&mut c.tx);
    let req = Request::Commit {
        tag,
        writes: c.tx.writes().to_vec(),
    };
    wire::write(w, &req, scratch)
}
