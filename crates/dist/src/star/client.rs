//! A blocking client of a STAR cluster: sends a workload's requests and queries to a node over TCP
//! and waits for the answer.
//!
//! A request may go to any node: one that does not run it forwards it to the partition's primary
//! (single-partition) or the coordinator (cross-partition), where it waits for a phase of its kind.
//! Its reply comes once that phase has ended everywhere, after the replication fence (§4.3, §7.1),
//! so a call takes up to about an iteration (10 ms by default) even on an idle cluster.
//!
//! ```no_run
//! # use phasedb_dist::star::client::Client;
//! # #[derive(serde::Serialize)] struct Request { key: u64 }
//! # let cfg = phasedb_net::ClusterConfig::load(std::path::Path::new("cluster.toml")).unwrap();
//! let client = Client::connect(&cfg).unwrap();
//! let outcome = client.request(0, &Request { key: 7 }).unwrap(); // committed or aborted, after its phase
//! # drop(outcome);
//! ```
//!
//! The client is one endpoint (a network thread with its own connections); calls from many threads
//! share it, each waiting for its own answer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use crate::star::msg::{Answer, MAX_REQUEST_BYTES, Outcome, Query, StarMsg};
use phasedb_net::tcp::{TcpOptions, run_blocking};
use phasedb_net::{Addr, CLIENT_ADDR_BASE, ClusterConfig, Node, Transport};

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A node could not be reached when connecting.
    #[error("cannot reach node {node} at {addr}: {source}")]
    Unreachable {
        /// The node.
        node: Addr,
        /// Its address.
        addr: std::net::SocketAddr,
        /// The connection error.
        source: std::io::Error,
    },
    /// The call was refused before it was sent (no such node, a request too large to send).
    #[error("invalid call: {0}")]
    Invalid(String),
    /// The cluster answered the request with an error: it did not run, and wrote nothing.
    #[error("the request was refused: {0}")]
    Refused(String),
    /// No answer within the timeout.
    #[error("no answer from node {node} within {timeout:?}")]
    Timeout {
        /// The node asked.
        node: Addr,
        /// How long the client waited.
        timeout: Duration,
    },
    /// The client's network thread stopped.
    #[error("the client is closed")]
    Closed,
}

/// What came back for one request id.
enum Arrived {
    Reply(Outcome),
    Answer(Answer),
}

/// Calls waiting for their answer: request id to (destination node, where the answer goes).
type Registry = Mutex<HashMap<u64, (Addr, Sender<Arrived>)>>;

/// The endpoint node behind a [`Client`]: sends what the client injects to the node its registry
/// names, and hands replies and answers back.
struct Endpoint {
    me: Addr,
    registry: Arc<Registry>,
}

impl Endpoint {
    fn deliver(&self, rid: u64, arrived: Arrived) {
        let entry = self.registry.lock().expect("registry lock").remove(&rid);
        if let Some((_, tx)) = entry {
            let _ = tx.send(arrived);
        }
    }
}

impl Node for Endpoint {
    type Msg = StarMsg;

    fn on_message<T: Transport<StarMsg>>(&mut self, net: &mut T, from: Addr, msg: StarMsg) {
        match msg {
            StarMsg::Request { rid, .. }
            | StarMsg::ReadCommitted { rid, .. }
            | StarMsg::Query { rid, .. }
                if from == self.me =>
            {
                let to = self
                    .registry
                    .lock()
                    .expect("registry lock")
                    .get(&rid)
                    .map(|w| w.0);
                // A call that already timed out is not sent.
                if let Some(to) = to {
                    net.send(to, msg);
                }
            }
            StarMsg::Reply { rid, outcome } => self.deliver(rid, Arrived::Reply(outcome)),
            StarMsg::Answer { rid, answer } => self.deliver(rid, Arrived::Answer(answer)),
            _ => {}
        }
    }

    fn on_tick<T: Transport<StarMsg>>(&mut self, _net: &mut T) {}
}

fn outcome_of(arrived: Arrived) -> Result<Outcome, ClientError> {
    match arrived {
        Arrived::Reply(Outcome::Error(text)) => Err(ClientError::Refused(text)),
        Arrived::Reply(outcome) => Ok(outcome),
        Arrived::Answer(_) => Err(ClientError::Refused(
            "a query's answer came back for a request".into(),
        )),
    }
}

fn answer_of(arrived: Arrived) -> Result<Answer, ClientError> {
    match arrived {
        Arrived::Answer(answer) => Ok(answer),
        Arrived::Reply(Outcome::Error(text)) => Err(ClientError::Refused(text)),
        Arrived::Reply(_) => Err(ClientError::Refused(
            "a request's outcome came back for a query".into(),
        )),
    }
}

/// A call sent and not yet answered: [`Ticket::wait`] for it. Sending many calls before waiting
/// for any lets them run at once (a benchmark asks every node for its counters this way).
#[must_use = "a ticket does nothing unless waited for"]
pub struct Ticket<'c, T> {
    client: &'c Client,
    rid: u64,
    node: Addr,
    rx: Receiver<Arrived>,
    convert: fn(Arrived) -> Result<T, ClientError>,
}

impl<T> Ticket<'_, T> {
    /// The node the call went to.
    pub fn node(&self) -> Addr {
        self.node
    }

    /// Waits for the answer, up to the client's timeout.
    pub fn wait(self) -> Result<T, ClientError> {
        self.poll(self.client.timeout)
            .unwrap_or(Err(ClientError::Timeout {
                node: self.node,
                timeout: self.client.timeout,
            }))
    }

    /// Waits up to `wait` for the answer: `None` if it has not come yet (the ticket stays valid).
    pub fn poll(&self, wait: Duration) -> Option<Result<T, ClientError>> {
        match self.rx.recv_timeout(wait) {
            Ok(a) => Some((self.convert)(a)),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => None,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Some(Err(ClientError::Closed)),
        }
    }
}

impl<T> Drop for Ticket<'_, T> {
    /// An answer that comes after this is dropped by the endpoint.
    fn drop(&mut self) {
        self.client
            .registry
            .lock()
            .expect("registry lock")
            .remove(&self.rid);
    }
}

/// A connection to a STAR cluster; cheap to share between threads.
pub struct Client {
    inject: UnboundedSender<StarMsg>,
    registry: Arc<Registry>,
    next_rid: AtomicU64,
    timeout: Duration,
    nodes: u32,
    stop: Option<tokio::sync::watch::Sender<bool>>,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

/// Client endpoints of this process take addresses `CLIENT_ADDR_BASE + 3·2^18 + (pid, count)`: apart
/// from the RAMP benchmark's and library's, and from each other's.
fn endpoint_addr() -> Addr {
    static COUNT: AtomicU32 = AtomicU32::new(0);
    let n = COUNT.fetch_add(1, Ordering::Relaxed) & 0xff;
    CLIENT_ADDR_BASE + (3 << 18) + (((std::process::id() & 0x3ff) << 8) | n)
}

impl Client {
    /// Checks that every node of `cfg` accepts connections, then starts the client's network
    /// thread. Calls wait 10 s for their answer ([`Client::with_timeout`]).
    pub fn connect(cfg: &ClusterConfig) -> Result<Client, ClientError> {
        for n in &cfg.nodes {
            std::net::TcpStream::connect_timeout(&n.addr, Duration::from_secs(2)).map_err(
                |source| ClientError::Unreachable {
                    node: n.id,
                    addr: n.addr,
                    source,
                },
            )?;
        }
        let registry = Arc::new(Registry::default());
        let me = endpoint_addr();
        let mut node = Endpoint {
            me,
            registry: registry.clone(),
        };
        let (inject, rx) = unbounded_channel();
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let mut opts = TcpOptions::new(me, cfg.peer_addrs());
        opts.inject = Some(rx);
        opts.delay = cfg.delay();
        // The endpoint waits on its sockets without polling: it must not take a core from the
        // nodes it measures.
        opts.poll = Duration::ZERO;
        opts.tick = Duration::from_millis(50);
        let thread = std::thread::spawn(move || run_blocking(&mut node, opts, stop_rx));
        Ok(Client {
            inject,
            registry,
            next_rid: AtomicU64::new(1),
            timeout: Duration::from_secs(10),
            nodes: cfg.nodes.len() as u32,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The same client, waiting `timeout` for each answer.
    pub fn with_timeout(mut self, timeout: Duration) -> Client {
        self.timeout = timeout;
        self
    }

    /// How long a call waits for its answer.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    fn send<T>(
        &self,
        node: Addr,
        msg: impl FnOnce(u64) -> StarMsg,
        convert: fn(Arrived) -> Result<T, ClientError>,
    ) -> Result<Ticket<'_, T>, ClientError> {
        if node >= self.nodes {
            return Err(ClientError::Invalid(format!(
                "there is no node {node} (the cluster has nodes 0..{})",
                self.nodes
            )));
        }
        let rid = self.next_rid.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = channel();
        self.registry
            .lock()
            .expect("registry lock")
            .insert(rid, (node, tx));
        if self.inject.send(msg(rid)).is_err() {
            self.registry.lock().expect("registry lock").remove(&rid);
            return Err(ClientError::Closed);
        }
        Ok(Ticket {
            client: self,
            rid,
            node,
            rx,
            convert,
        })
    }

    /// Sends a request already encoded as its workload's request (postcard) to `node`.
    pub fn send_request(
        &self,
        node: Addr,
        body: Vec<u8>,
    ) -> Result<Ticket<'_, Outcome>, ClientError> {
        if body.len() > MAX_REQUEST_BYTES {
            return Err(ClientError::Invalid(format!(
                "a request of {} bytes exceeds {MAX_REQUEST_BYTES}",
                body.len()
            )));
        }
        self.send(node, |rid| StarMsg::Request { rid, body }, outcome_of)
    }

    /// Runs `request` (a value of the cluster workload's `Procedures::Request`) through `node`:
    /// [`Outcome::Committed`] or [`Outcome::Aborted`] (by its procedure), once its phase ended
    /// everywhere; [`ClientError::Refused`] if the cluster could not run it.
    pub fn request<R: Serialize>(&self, node: Addr, request: &R) -> Result<Outcome, ClientError> {
        let body = postcard::to_allocvec(request)
            .map_err(|e| ClientError::Invalid(format!("cannot encode the request: {e}")))?;
        self.send_request(node, body)?.wait()
    }

    /// Runs the read-only `request` on `node`'s own copies at read committed
    /// ([`StarMsg::ReadCommitted`]): answered at once, without waiting for a phase to end;
    /// [`ClientError::Refused`] if it writes or `node` does not hold what it reads.
    pub fn read_committed<R: Serialize>(
        &self,
        node: Addr,
        request: &R,
    ) -> Result<Outcome, ClientError> {
        let body = postcard::to_allocvec(request)
            .map_err(|e| ClientError::Invalid(format!("cannot encode the request: {e}")))?;
        if body.len() > MAX_REQUEST_BYTES {
            return Err(ClientError::Invalid(format!(
                "a request of {} bytes exceeds {MAX_REQUEST_BYTES}",
                body.len()
            )));
        }
        self.send(node, |rid| StarMsg::ReadCommitted { rid, body }, outcome_of)?
            .wait()
    }

    /// Sends `query` to `node`.
    pub fn send_query(&self, node: Addr, query: Query) -> Result<Ticket<'_, Answer>, ClientError> {
        self.send(node, |rid| StarMsg::Query { rid, query }, answer_of)
    }

    /// Asks `node` `query` and waits for the answer.
    pub fn query(&self, node: Addr, query: Query) -> Result<Answer, ClientError> {
        self.send_query(node, query)?.wait()
    }

    /// Asks every node `query` at once; the answers in node order.
    pub fn query_all(&self, query: Query) -> Vec<Result<Answer, ClientError>> {
        let tickets: Vec<_> = (0..self.nodes).map(|n| self.send_query(n, query)).collect();
        tickets.into_iter().map(|t| t?.wait()).collect()
    }

    /// Nodes in the cluster.
    pub fn nodes(&self) -> u32 {
        self.nodes
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
