//! A blocking client library: routes each item to its partition and talks to the cluster over TCP.
//!
//! ```no_run
//! # use phasedb_dist::ramp::library::{Client, ClientOptions};
//! # use phasedb_dist::Algorithm;
//! # let cfg = phasedb_net::ClusterConfig::load(std::path::Path::new("cluster.toml")).unwrap();
//! let client = Client::connect(&cfg, ClientOptions::new(Algorithm::RampFast)).unwrap();
//! client.put_all(vec![(1, b"a".to_vec()), (2, b"b".to_vec())]).unwrap();
//! let values = client.get_all(&[1, 2]).unwrap(); // both writes or neither
//! # drop(values);
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use crate::ramp::client::pool::ClientPool;
use crate::ramp::client::{ClientSettings, Router};
use crate::ramp::msg::{Algorithm, Key, Msg, Outcome, ReadValue, Ts, TxnSpec, Value};
use phasedb_net::tcp::{TcpOptions, run_blocking};
use phasedb_net::{Addr, CLIENT_ADDR_BASE, ClusterConfig, Node, Transport};

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A server could not be reached when connecting.
    #[error("cannot reach node {node} at {addr}: {source}")]
    Unreachable {
        /// The node.
        node: Addr,
        /// Its address.
        addr: std::net::SocketAddr,
        /// The connection error.
        source: std::io::Error,
    },
    /// The transaction was refused before running.
    #[error("invalid transaction: {0}")]
    Invalid(String),
    /// No answer within the timeout.
    #[error("no answer from the cluster within {0:?}")]
    Timeout(Duration),
    /// A participant refused the write (cooperative termination had aborted its timestamp).
    #[error("the write was aborted by cooperative termination; nothing of it is visible")]
    Aborted,
    /// The client's network thread stopped.
    #[error("the client is closed: {0}")]
    Closed(String),
}

/// How a [`Client`] behaves.
#[derive(Clone, Copy, Debug)]
pub struct ClientOptions {
    /// The algorithm of every transaction.
    pub algorithm: Algorithm,
    /// Client id (unique in the cluster; it makes write timestamps unique). Random when None.
    pub client_id: Option<u32>,
    /// Transactions this client may run at once (one per thread calling it).
    pub concurrency: usize,
    /// How long to wait for a transaction.
    pub timeout: Duration,
}

impl ClientOptions {
    /// Defaults: a random id, 64 concurrent transactions, a 10 s timeout.
    pub fn new(algorithm: Algorithm) -> Self {
        ClientOptions {
            algorithm,
            client_id: None,
            concurrency: 64,
            timeout: Duration::from_secs(10),
        }
    }
}

type Reply = std::sync::mpsc::Sender<Result<Outcome, String>>;

#[derive(Default)]
struct Registry {
    waiting: HashMap<u64, (Option<Addr>, Reply)>,
}

/// The endpoint node behind a [`Client`].
struct LibraryEndpoint {
    pool: ClientPool,
    registry: Arc<Mutex<Registry>>,
    running: Vec<Option<u64>>,
    queue: VecDeque<(u64, TxnSpec)>,
}

impl LibraryEndpoint {
    fn reply(&self, rid: u64, result: Result<Outcome, String>) {
        let entry = self
            .registry
            .lock()
            .expect("registry lock")
            .waiting
            .remove(&rid);
        if let Some((_, tx)) = entry {
            let _ = tx.send(result);
        }
    }

    fn start<T: Transport<Msg>>(&mut self, net: &mut T, rid: u64, txn: TxnSpec) {
        match self.pool.idle_slot() {
            Some(slot) => {
                self.running[slot as usize] = Some(rid);
                self.pool.start(net, slot, txn);
            }
            None => self.queue.push_back((rid, txn)),
        }
    }
}

impl Node for LibraryEndpoint {
    type Msg = Msg;

    fn on_message<T: Transport<Msg>>(&mut self, net: &mut T, from: Addr, msg: Msg) {
        match msg {
            Msg::Run {
                rid,
                algorithm,
                txn,
            } => {
                let via = self
                    .registry
                    .lock()
                    .expect("registry lock")
                    .waiting
                    .get(&rid)
                    .and_then(|w| w.0);
                match via {
                    Some(server) => net.send(
                        server,
                        Msg::Run {
                            rid,
                            algorithm,
                            txn,
                        },
                    ),
                    None => self.start(net, rid, txn),
                }
            }
            Msg::RunReply { rid, outcome } => self.reply(rid, outcome),
            m => {
                if let Some((slot, outcome)) = self.pool.on_reply(net, from, m) {
                    if let Some(rid) = self.running[slot as usize].take() {
                        self.reply(rid, Ok(outcome));
                    }
                    if let Some((rid, txn)) = self.queue.pop_front() {
                        self.start(net, rid, txn);
                    }
                }
            }
        }
    }

    fn on_tick<T: Transport<Msg>>(&mut self, net: &mut T) {
        self.pool.on_tick(net);
    }
}

/// A connection to a cluster; cheap to share between threads.
pub struct Client {
    inject: UnboundedSender<Msg>,
    registry: Arc<Mutex<Registry>>,
    next_rid: AtomicU64,
    options: ClientOptions,
    stop: Option<tokio::sync::watch::Sender<bool>>,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
    servers: usize,
}

impl Client {
    /// Checks that every server answers, then starts the client's network thread.
    pub fn connect(cfg: &ClusterConfig, options: ClientOptions) -> Result<Client, ClientError> {
        if options.concurrency == 0 || options.concurrency > 1 << 14 {
            return Err(ClientError::Invalid(
                "concurrency must be between 1 and 16384".into(),
            ));
        }
        for n in &cfg.nodes {
            std::net::TcpStream::connect_timeout(&n.addr, Duration::from_secs(2)).map_err(
                |source| ClientError::Unreachable {
                    node: n.id,
                    addr: n.addr,
                    source,
                },
            )?;
        }
        let id = options
            .client_id
            .unwrap_or_else(|| rand::random::<u32>() % (crate::ramp::ts::PROXY_CLIENT_BASE >> 4))
            << 4;
        let settings = ClientSettings::new(options.algorithm);
        let router = Router::new(cfg);
        let pool = ClientPool::new(options.concurrency, id, settings, &router);
        let registry = Arc::new(Mutex::new(Registry::default()));
        let node = LibraryEndpoint {
            running: vec![None; pool.len()],
            pool,
            registry: registry.clone(),
            queue: VecDeque::new(),
        };
        let (inject, rx) = unbounded_channel();
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let me = CLIENT_ADDR_BASE + (1 << 19) + (id >> 4) % (1 << 18);
        let mut opts = TcpOptions::new(me, cfg.peer_addrs());
        opts.inject = Some(rx);
        opts.delay = cfg.delay();
        opts.poll = cfg.poll();
        let thread = std::thread::spawn(move || {
            let mut node = node;
            run_blocking(&mut node, opts, stop_rx)
        });
        Ok(Client {
            inject,
            registry,
            next_rid: AtomicU64::new(1),
            options,
            stop: Some(stop),
            thread: Some(thread),
            servers: cfg.nodes.len(),
        })
    }

    fn submit(&self, via: Option<Addr>, txn: TxnSpec) -> Result<Outcome, ClientError> {
        crate::ramp::txn_check::validate(&txn).map_err(ClientError::Invalid)?;
        if let Some(v) = via
            && v as usize >= self.servers
        {
            return Err(ClientError::Invalid(format!("there is no node {v}")));
        }
        let rid = self.next_rid.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = std::sync::mpsc::channel();
        self.registry
            .lock()
            .expect("registry lock")
            .waiting
            .insert(rid, (via, tx));
        let msg = Msg::Run {
            rid,
            algorithm: self.options.algorithm,
            txn,
        };
        self.inject
            .send(msg)
            .map_err(|_| ClientError::Closed("network thread stopped".into()))?;
        let result = rx.recv_timeout(self.options.timeout);
        self.registry
            .lock()
            .expect("registry lock")
            .waiting
            .remove(&rid);
        match result {
            Ok(Ok(o)) if !o.committed => Err(ClientError::Aborted),
            Ok(Ok(o)) => Ok(o),
            Ok(Err(e)) => Err(ClientError::Invalid(e)),
            Err(_) => Err(ClientError::Timeout(self.options.timeout)),
        }
    }

    /// Runs a transaction: its reads as one GET_ALL, then its writes as one PUT_ALL.
    pub fn run(&self, txn: TxnSpec) -> Result<Outcome, ClientError> {
        self.submit(None, txn)
    }

    /// Asks server `node` to run the transaction on this client's behalf.
    pub fn run_via(&self, node: Addr, txn: TxnSpec) -> Result<Outcome, ClientError> {
        self.submit(Some(node), txn)
    }

    /// Reads `keys` atomically (Read Atomic under RAMP, LWLR and E-PCI).
    pub fn get_all(&self, keys: &[Key]) -> Result<Vec<ReadValue>, ClientError> {
        let txn = TxnSpec {
            reads: keys.to_vec(),
            writes: Vec::new(),
        };
        Ok(self.run(txn)?.reads)
    }

    /// Writes every item atomically; returns the write's timestamp.
    pub fn put_all(&self, writes: Vec<(Key, Value)>) -> Result<Ts, ClientError> {
        let txn = TxnSpec {
            reads: Vec::new(),
            writes,
        };
        Ok(self.run(txn)?.ts.unwrap_or(0))
    }

    /// A read-write transaction with a pre-declared read set (§4.5): reads `reads` atomically, then
    /// writes what `compute` returns from the values read.
    pub fn read_write(
        &self,
        reads: &[Key],
        compute: impl FnOnce(&[ReadValue]) -> Vec<(Key, Value)>,
    ) -> Result<(Vec<ReadValue>, Ts), ClientError> {
        let values = self.get_all(reads)?;
        let writes = compute(&values);
        let ts = if writes.is_empty() {
            0
        } else {
            self.put_all(writes)?
        };
        Ok((values, ts))
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
