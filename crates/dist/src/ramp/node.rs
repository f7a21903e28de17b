//! A cluster member: a partition server that also runs transactions for clients that ask it to
//! (servers as proxies, as in the paper's prototype), and how to run one over TCP.

use std::collections::VecDeque;
use std::future::Future;

use crate::ramp::client::{ClientSettings, Router, TxnClient};
use crate::ramp::msg::{Algorithm, Msg, TxnSpec};
use crate::ramp::server::{PartitionServer, ServerStats};
use crate::ramp::ts::PROXY_CLIENT_BASE;
use phasedb_net::tcp::{TcpOptions, run};
use phasedb_net::{Addr, ClusterConfig, Node, Transport};

/// Proxied transactions a node runs at once; more wait in a queue.
pub const MAX_PROXIED: usize = 4096;

struct Proxied {
    client: TxnClient,
    asker: Option<(Addr, u64)>,
}

/// A server node: the partition server plus proxy clients.
pub struct ServerNode {
    server: PartitionServer,
    router: Router,
    proxies: Vec<Proxied>,
    queue: VecDeque<(Addr, u64, Algorithm, TxnSpec)>,
}

impl ServerNode {
    /// Node `me` of the cluster routed by `router`.
    pub fn new(me: Addr, settings: phasedb_net::config::ServerSettings, router: Router) -> Self {
        ServerNode {
            server: PartitionServer::new(me, settings),
            router,
            proxies: Vec::new(),
            queue: VecDeque::new(),
        }
    }

    /// The partition server.
    pub fn server(&self) -> &PartitionServer {
        &self.server
    }

    fn run_proxied<T: Transport<Msg>>(
        &mut self,
        net: &mut T,
        from: Addr,
        rid: u64,
        algorithm: Algorithm,
        txn: TxnSpec,
    ) {
        if let Err(e) = crate::ramp::txn_check::validate(&txn) {
            net.send(
                from,
                Msg::RunReply {
                    rid,
                    outcome: Err(e),
                },
            );
            return;
        }
        let free = self.proxies.iter().position(|p| p.asker.is_none());
        let slot = match free {
            Some(s) => s,
            None if self.proxies.len() < MAX_PROXIED => {
                let slot = self.proxies.len();
                let id = PROXY_CLIENT_BASE + self.server.me * MAX_PROXIED as u32 + slot as u32;
                let client = TxnClient::new(
                    slot as u32,
                    id,
                    ClientSettings::new(algorithm),
                    self.router.clone(),
                );
                self.proxies.push(Proxied {
                    client,
                    asker: None,
                });
                slot
            }
            None => {
                self.queue.push_back((from, rid, algorithm, txn));
                return;
            }
        };
        let p = &mut self.proxies[slot];
        p.client.reconfigure(ClientSettings::new(algorithm));
        p.client.observe_clock(self.server.clock());
        p.asker = Some((from, rid));
        p.client.start(net, txn);
    }
}

impl Node for ServerNode {
    type Msg = Msg;

    fn on_message<T: Transport<Msg>>(&mut self, net: &mut T, from: Addr, msg: Msg) {
        match msg {
            Msg::Run {
                rid,
                algorithm,
                txn,
            } => self.run_proxied(net, from, rid, algorithm, txn),
            m if m.reply_rid().is_some() => {
                let slot = TxnClient::slot_of(m.reply_rid().expect("a reply")) as usize;
                let Some(p) = self.proxies.get_mut(slot) else {
                    return;
                };
                if let Some(outcome) = p.client.on_reply(net, from, m)
                    && let Some((asker, rid)) = p.asker.take()
                {
                    net.send(
                        asker,
                        Msg::RunReply {
                            rid,
                            outcome: Ok(outcome),
                        },
                    );
                    if let Some((f, r, a, t)) = self.queue.pop_front() {
                        self.run_proxied(net, f, r, a, t);
                    }
                }
            }
            m => self.server.handle(net, from, m),
        }
    }

    fn on_tick<T: Transport<Msg>>(&mut self, net: &mut T) {
        self.server.tick(net);
        for p in &mut self.proxies {
            p.client.on_tick(net);
        }
    }

    fn on_crash(&mut self) {
        self.server.on_crash();
        self.proxies.clear();
        self.queue.clear();
    }
}

/// Serves node `id` of `cfg` over TCP until `shutdown` completes; returns the server's final counters.
/// `listener`, if given, is a socket already listening on the node's address (reserved by whoever
/// started the node, so no other process could take the port meanwhile); otherwise the node binds
/// the address itself. Must run inside a tokio runtime.
pub async fn serve(
    cfg: &ClusterConfig,
    id: Addr,
    listener: Option<std::net::TcpListener>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<ServerStats> {
    let me = cfg.node(id).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("node {id} is not in the cluster file"),
        )
    })?;
    if let Some(l) = &listener {
        let at = l.local_addr()?;
        if at != me.addr {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "the listening socket is at {at}, but the cluster file puts node {id} at {}",
                    me.addr
                ),
            ));
        }
    }
    let mut node = ServerNode::new(id, cfg.server, Router::new(cfg));
    let mut opts = TcpOptions::new(id, cfg.peer_addrs());
    opts.listen = Some(me.addr);
    opts.listener = listener;
    opts.delay = cfg.delay();
    opts.poll = cfg.poll();
    opts.tick = std::time::Duration::from_millis(cfg.server.tick_ms);
    run(&mut node, opts, shutdown).await?;
    Ok(node.server.stats())
}

/// Runs every node of `cfg` in this process, one thread each, until the returned handle is dropped
/// or stopped (tests and in-process benchmarks).
pub struct LocalCluster {
    stop: tokio::sync::watch::Sender<bool>,
    threads: Vec<std::thread::JoinHandle<std::io::Result<ServerStats>>>,
}

impl LocalCluster {
    /// Starts the nodes, each binding its address first (an address in use is an error at once).
    pub fn start(cfg: &ClusterConfig) -> std::io::Result<LocalCluster> {
        let listeners = cfg
            .nodes
            .iter()
            .map(|n| {
                std::net::TcpListener::bind(n.addr).map_err(|e| {
                    std::io::Error::new(
                        e.kind(),
                        format!("node {} cannot bind {}: {e}", n.id, n.addr),
                    )
                })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        LocalCluster::start_on(cfg, listeners)
    }

    /// Starts the nodes on sockets already listening at their addresses, one per node in the
    /// cluster file's order (see [`crate::ramp::bench::launch::reserve_ports`]).
    pub fn start_on(
        cfg: &ClusterConfig,
        listeners: Vec<std::net::TcpListener>,
    ) -> std::io::Result<LocalCluster> {
        if listeners.len() != cfg.nodes.len() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "{} listening sockets for {} nodes",
                    listeners.len(),
                    cfg.nodes.len()
                ),
            ));
        }
        let (stop, rx) = tokio::sync::watch::channel(false);
        let mut threads = Vec::new();
        for (n, listener) in cfg.nodes.iter().zip(listeners) {
            let cfg = cfg.clone();
            let id = n.id;
            let rx = rx.clone();
            threads.push(std::thread::spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?
                    .block_on(serve(
                        &cfg,
                        id,
                        Some(listener),
                        phasedb_net::tcp::wait_for(rx),
                    ))
            }));
        }
        Ok(LocalCluster { stop, threads })
    }

    /// Stops every node and returns their final counters.
    pub fn stop(mut self) -> Vec<std::io::Result<ServerStats>> {
        let _ = self.stop.send(true);
        self.threads
            .drain(..)
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("node thread panicked")))
            })
            .collect()
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Waits until something accepts TCP connections at `addr`.
pub fn wait_listening(
    addr: std::net::SocketAddr,
    timeout: std::time::Duration,
) -> std::io::Result<()> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        match std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_millis(200)) {
            Ok(_) => return Ok(()),
            Err(e) if std::time::Instant::now() >= deadline => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("nothing listens at {addr}: {e}"),
                ));
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
}
