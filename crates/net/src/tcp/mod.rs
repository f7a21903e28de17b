//! The TCP runtime: drives one [`Node`] over real sockets.
//!
//! One event loop owns the node. Connection tasks decode frames and hand whole batches to it; every
//! message the node sends while handling those batches is encoded straight into a per-peer buffer, and
//! each buffer leaves as one frame when the loop has nothing more to process. So many clients share a
//! connection and small messages travel together. Out of input, the loop polls a little longer before
//! it sleeps, as waking a sleeping core is slow on virtual machines. A node that reports itself
//! [`Node::busy`] is neither polled for nor put to sleep: the loop takes in what has arrived and calls
//! its tick again. An optional delay holds each frame back before it
//! is written, which emulates network latency on one machine.

mod conn;

use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use rustc_hash::FxHashMap;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::net::TcpListener;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::time::{Instant, MissedTickBehavior};

use crate::wire::{begin_frame, finish_frame, frame_payload_len, push_message};
use crate::{Addr, Node, Transport};
use conn::{Event, Outgoing};

/// A frame is closed and a new one started once its payload passes this many bytes.
const FRAME_TARGET: usize = 256 << 10;

/// How to run a node over TCP.
pub struct TcpOptions<M> {
    /// This node's address.
    pub me: Addr,
    /// Where to accept connections (servers); `None` for client endpoints.
    pub listen: Option<SocketAddr>,
    /// A socket already listening, accepted on instead of binding `listen`: a port reserved by
    /// whoever started the node (or inherited from it) stays taken until the node serves on it.
    pub listener: Option<std::net::TcpListener>,
    /// Addresses of the servers this node may dial.
    pub peers: Vec<(Addr, SocketAddr)>,
    /// One-way delay added to every outgoing frame.
    pub delay: Duration,
    /// Period of [`Node::on_tick`].
    pub tick: Duration,
    /// How long to keep retrying a server that refuses connections.
    pub dial_timeout: Duration,
    /// Messages from outside the cluster, delivered to the node as if it had sent them to itself.
    pub inject: Option<UnboundedReceiver<M>>,
    /// How long the loop, out of input, keeps polling for more before it sleeps.
    pub poll: Duration,
}

impl<M> TcpOptions<M> {
    /// Options for node `me` with no listener, no delay, no polling, 5 ms ticks and a 10 s dial timeout.
    pub fn new(me: Addr, peers: Vec<(Addr, SocketAddr)>) -> Self {
        Self {
            me,
            listen: None,
            listener: None,
            peers,
            delay: Duration::ZERO,
            tick: Duration::from_millis(5),
            dial_timeout: Duration::from_secs(10),
            inject: None,
            poll: Duration::ZERO,
        }
    }
}

struct PeerBuf {
    buf: Vec<u8>,
    frame: Option<usize>,
}

struct Route {
    conn: u64,
    tx: UnboundedSender<Outgoing>,
}

/// The [`Transport`] a node sees under the TCP runtime.
struct TcpNet<M> {
    me: Addr,
    start: Instant,
    delay: Duration,
    dial_timeout: Duration,
    peers: FxHashMap<Addr, SocketAddr>,
    bufs: FxHashMap<Addr, PeerBuf>,
    dirty: Vec<Addr>,
    local: VecDeque<M>,
    routes: FxHashMap<Addr, Route>,
    next_conn: u64,
    events: UnboundedSender<Event<M>>,
    encode_errors: u64,
}

impl<M: Serialize> Transport<M> for TcpNet<M> {
    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn send(&mut self, to: Addr, msg: M) {
        if to == self.me {
            self.local.push_back(msg);
            return;
        }
        self.encode(to, &msg);
    }

    fn send_copy(&mut self, to: Addr, msg: &M)
    where
        M: Clone,
    {
        if to == self.me {
            self.local.push_back(msg.clone());
            return;
        }
        self.encode(to, msg);
    }
}

impl<M: Serialize> TcpNet<M> {
    /// Appends `msg` to the frame being built for `to`.
    fn encode(&mut self, to: Addr, msg: &M) {
        let pb = self.bufs.entry(to).or_insert_with(|| PeerBuf {
            buf: Vec::with_capacity(4096),
            frame: None,
        });
        if pb.buf.is_empty() {
            self.dirty.push(to);
        }
        let start = *pb.frame.get_or_insert_with(|| begin_frame(&mut pb.buf));
        if push_message(&mut pb.buf, msg).is_err() {
            self.encode_errors += 1;
            return;
        }
        if frame_payload_len(&pb.buf, start) >= FRAME_TARGET {
            finish_frame(&mut pb.buf, start);
            pb.frame = None;
        }
    }
}

impl<M: Serialize + DeserializeOwned + Send + 'static> TcpNet<M> {
    fn flush(&mut self) {
        let due = (!self.delay.is_zero()).then(|| Instant::now() + self.delay);
        for to in std::mem::take(&mut self.dirty) {
            let Some(pb) = self.bufs.get_mut(&to) else {
                continue;
            };
            if let Some(start) = pb.frame.take() {
                finish_frame(&mut pb.buf, start);
            }
            let bytes = std::mem::replace(&mut pb.buf, Vec::with_capacity(4096));
            if !self.routes.contains_key(&to) && !self.dial(to) {
                continue;
            }
            let route = &self.routes[&to];
            if route.tx.send(Outgoing { due, bytes }).is_err() {
                self.routes.remove(&to);
            }
        }
    }

    fn dial(&mut self, to: Addr) -> bool {
        let Some(&addr) = self.peers.get(&to) else {
            return false;
        };
        let (tx, rx) = unbounded_channel();
        let conn = self.next_conn;
        self.next_conn += 1;
        self.routes.insert(to, Route { conn, tx });
        tokio::spawn(conn::dial(
            self.me,
            to,
            addr,
            conn,
            self.dial_timeout,
            rx,
            self.events.clone(),
        ));
        true
    }
}

async fn accept_loop<M: DeserializeOwned + Send + 'static>(
    listener: TcpListener,
    events: UnboundedSender<Event<M>>,
) {
    let mut conn = 1u64 << 40;
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                conn += 1;
                tokio::spawn(conn::accept(stream, conn, events.clone()));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

async fn next_injected<M>(inject: &mut Option<UnboundedReceiver<M>>) -> Option<M> {
    match inject {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The socket a node accepts on: the one it was given, else one bound to its `listen` address;
/// none for a client endpoint.
async fn listener<M>(opts: &mut TcpOptions<M>) -> std::io::Result<Option<TcpListener>> {
    if let Some(l) = opts.listener.take() {
        l.set_nonblocking(true)?;
        return Ok(Some(TcpListener::from_std(l)?));
    }
    match opts.listen {
        Some(addr) => Ok(Some(TcpListener::bind(addr).await?)),
        None => Ok(None),
    }
}

/// Runs `node` until `shutdown` completes or the node reports [`Node::is_done`].
///
/// Must be called inside a tokio runtime; a current-thread runtime keeps the whole node on one core.
pub async fn run<N>(
    node: &mut N,
    mut opts: TcpOptions<N::Msg>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()>
where
    N: Node,
    N::Msg: Serialize + DeserializeOwned + Send + 'static,
{
    let (events_tx, mut events) = unbounded_channel();
    if let Some(listener) = listener(&mut opts).await? {
        tokio::spawn(accept_loop(listener, events_tx.clone()));
    }
    let mut net = TcpNet {
        me: opts.me,
        start: Instant::now(),
        delay: opts.delay,
        dial_timeout: opts.dial_timeout,
        peers: opts.peers.iter().copied().collect(),
        bufs: FxHashMap::default(),
        dirty: Vec::new(),
        local: VecDeque::new(),
        routes: FxHashMap::default(),
        next_conn: 0,
        events: events_tx,
        encode_errors: 0,
    };
    let mut tick = tokio::time::interval(opts.tick.max(Duration::from_micros(100)));
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut inject = opts.inject.take();
    tokio::pin!(shutdown);
    node.on_start(&mut net);
    loop {
        drain_local(node, &mut net);
        net.flush();
        if node.is_done() {
            break;
        }
        if node.busy() {
            // The node has work of its own: take in what has arrived, then give it its next slice.
            tokio::task::yield_now().await;
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                _ = std::future::ready(()) => {}
            }
            for _ in 0..4096 {
                match events.try_recv() {
                    Ok(ev) => handle(node, &mut net, ev),
                    Err(_) => break,
                }
            }
            if let Some(rx) = inject.as_mut() {
                while let Ok(msg) = rx.try_recv() {
                    node.on_message(&mut net, opts.me, msg);
                }
            }
            node.on_tick(&mut net);
            continue;
        }
        poll(&events, inject.as_ref(), opts.poll).await;
        tokio::select! {
            biased;
            _ = &mut shutdown => break,
            ev = events.recv() => {
                let Some(ev) = ev else { break };
                handle(node, &mut net, ev);
                for _ in 0..4096 {
                    match events.try_recv() {
                        Ok(ev) => handle(node, &mut net, ev),
                        Err(_) => break,
                    }
                }
            }
            msg = next_injected(&mut inject) => match msg {
                Some(msg) => node.on_message(&mut net, opts.me, msg),
                None => inject = None,
            },
            _ = tick.tick() => node.on_tick(&mut net),
        }
    }
    if net.encode_errors > 0 {
        eprintln!(
            "phasedb-net: {} messages could not be encoded and were dropped",
            net.encode_errors
        );
    }
    Ok(())
}

/// Waits up to `budget` for input (from peers or injected) without sleeping: each round lets the
/// runtime poll the sockets (the connection tasks then queue what arrived) and offers the core to any
/// other runnable thread.
async fn poll<M>(
    events: &UnboundedReceiver<Event<M>>,
    inject: Option<&UnboundedReceiver<M>>,
    budget: Duration,
) {
    let idle = || events.is_empty() && inject.is_none_or(|rx| rx.is_empty());
    if budget.is_zero() || !idle() {
        return;
    }
    let until = std::time::Instant::now() + budget;
    while idle() && std::time::Instant::now() < until {
        tokio::task::yield_now().await;
        if idle() {
            std::thread::yield_now();
        }
    }
}

fn drain_local<N: Node>(node: &mut N, net: &mut TcpNet<N::Msg>)
where
    N::Msg: Serialize,
{
    while let Some(msg) = net.local.pop_front() {
        let me = net.me;
        node.on_message(net, me, msg);
    }
}

fn handle<N: Node>(node: &mut N, net: &mut TcpNet<N::Msg>, ev: Event<N::Msg>)
where
    N::Msg: Serialize,
{
    match ev {
        Event::Msgs { from, msgs } => {
            for msg in msgs {
                node.on_message(net, from, msg);
            }
        }
        Event::Connected { peer, conn, tx } => {
            net.routes.insert(peer, Route { conn, tx });
        }
        Event::Closed { peer, conn, error } => {
            if net.routes.get(&peer).is_some_and(|r| r.conn == conn) {
                net.routes.remove(&peer);
            }
            if let Some(e) = error {
                eprintln!("phasedb-net: {e}");
            }
        }
    }
}

/// Runs `node` on a new current-thread runtime until `shutdown` fires or the node is done.
pub fn run_blocking<N>(
    node: &mut N,
    opts: TcpOptions<N::Msg>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> std::io::Result<()>
where
    N: Node,
    N::Msg: Serialize + DeserializeOwned + Send + 'static,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(run(node, opts, wait_for(shutdown)))
}

/// Completes when the watch value becomes true or its sender is dropped.
pub async fn wait_for(mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}
