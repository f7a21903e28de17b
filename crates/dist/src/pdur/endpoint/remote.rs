//! Closed-loop clients over TCP: one connection runs `inflight` clients at once (one per tag),
//! each executing the workload's transactions at the replica (Algorithm 3 remotely): a round of
//! reads per request, then a commit carrying the writes, the next transaction once the outcome
//! is in.

use std::io::{self, BufReader, BufWriter, Write};
use std::net::{SocketAddr, TcpStream};
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

/// Runs `cfg`'s clients until the window is over and every transaction in flight has its
/// outcome (each reply waited for at most 10 s).
pub fn run(mut cfg: RemoteLoad) -> io::Result<RemoteReport> {
    if cfg.inflight == 0
        || cfg.inflight > MAX_TAGS as usize
        || cfg.generators.len() != cfg.partitions
    {
        return Err(io::Error::other(format!(
            "between 1 and {MAX_TAGS} clients per connection and one generator per partition"
        )));
    }
    let stream = connect(cfg.addr)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut r = BufReader::new(stream.try_clone()?);
    let mut w = BufWriter::new(stream);
    let (mut buf, mut scratch) = (Vec::new(), Vec::new());
    let begin = Instant::now();
    let measure_from = begin + cfg.warmup;
    let measure_to = measure_from + cfg.duration;
    let mut load = LoadStats::default();
    let mut clients: Vec<Client> = (0..cfg.inflight)
        .map(|i| Client {
            home: (i % cfg.partitions) as PartitionId,
            tx: Transaction::begin(TxnId { origin: 0, seq: 0 }, cfg.partitions),
            logic: None,
            asked: Vec::new(),
            started: begin,
        })
        .collect();
    let mut active = 0;
    for (tag, c) in clients.iter_mut().enumerate() {
        start(c, &mut cfg);
        step(tag as u8, c, &mut w, &mut scratch)?;
        active += 1;
    }
    w.flush()?;
    let mut ended_at = None;
    while active > 0 {
        let reply: Reply = wire::read(&mut r, &mut buf).map_err(io::Error::other)?;
        let (tag, outcome) = match reply {
            Reply::Values { tag, values } => {
                let c = clients
                    .get_mut(tag as usize)
                    .ok_or_else(|| io::Error::other("reply for an unknown tag"))?;
                if values.len() != c.asked.len() {
                    return Err(io::Error::other("values do not match the keys asked"));
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
                step(tag, c, &mut w, &mut scratch)?;
                (tag, None)
            }
            Reply::Aborted { tag } => (tag, Some(false)),
            Reply::Outcome { tag, committed } => (tag, Some(committed)),
            Reply::Refused(why) => return Err(io::Error::other(format!("refused: {why}"))),
        };
        if let Some(committed) = outcome {
            let c = clients
                .get_mut(tag as usize)
                .ok_or_else(|| io::Error::other("reply for an unknown tag"))?;
            let kind = c.logic.as_ref().map_or("?", |l| l.kind());
            let now = Instant::now();
            if c.started >= measure_from && now <= measure_to {
                load.count(kind, committed, c.started);
            }
            if now < measure_to {
                start(c, &mut cfg);
                step(tag, c, &mut w, &mut scratch)?;
            } else {
                ended_at.get_or_insert(now);
                active -= 1;
            }
        }
        if r.buffer().is_empty() {
            w.flush()?;
        }
    }
    let end = ended_at.unwrap_or_else(Instant::now).min(measure_to);
    Ok(RemoteReport {
        load,
        measured: end.saturating_duration_since(measure_from),
    })
}

/// Connects, retrying for up to 10 s while the replica starts.
pub fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
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
