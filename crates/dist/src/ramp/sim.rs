//! Actors for simulator tests: server nodes and client endpoints that run a random workload and
//! record the history, so tests can check Read Atomic isolation under delays, drops and crashes.

use crate::ramp::bench::workload::{TxnGen, Workload, YcsbRamp};
use crate::ramp::client::pool::ClientPool;
use crate::ramp::client::{ClientSettings, Router};
use crate::ramp::history::Recorder;
use crate::ramp::msg::{Msg, TxnSpec};
use crate::ramp::node::ServerNode;
use crate::ramp::server::PartitionServer;
use phasedb_net::config::ServerSettings;
use phasedb_net::{Addr, CLIENT_ADDR_BASE, Node, Transport};

/// A client endpoint that issues a fixed number of random transactions per client, closed-loop.
pub struct SimClient {
    pool: ClientPool,
    gens: Vec<TxnGen>,
    running: Vec<Option<TxnSpec>>,
    left: Vec<usize>,
    /// Every finished (or, after a crash, in-doubt) transaction.
    pub recorder: Recorder,
    /// Transactions finished.
    pub finished: u64,
    /// Read restarts seen (versions collected under the reader).
    pub restarts: u64,
    /// Read sets that needed a second round.
    pub second_rounds: u64,
    crashed: bool,
}

impl SimClient {
    /// `clients` clients with ids from `first_id`, each running `txns` transactions of `shape`.
    pub fn new(
        clients: usize,
        first_id: u32,
        txns: usize,
        settings: ClientSettings,
        router: &Router,
        shape: YcsbRamp,
        seed: u64,
    ) -> Self {
        let workload = Workload::new(shape);
        SimClient {
            pool: ClientPool::new(clients, first_id, settings, router),
            gens: (0..clients)
                .map(|c| workload.generator(seed, first_id as u64 + c as u64))
                .collect(),
            running: vec![None; clients],
            left: vec![txns; clients],
            recorder: Recorder::new(),
            finished: 0,
            restarts: 0,
            second_rounds: 0,
            crashed: false,
        }
    }

    /// True when every client has run all its transactions (or the endpoint crashed).
    pub fn done(&self) -> bool {
        self.crashed
            || (self.left.iter().all(|&l| l == 0) && self.running.iter().all(Option::is_none))
    }

    fn start_next<T: Transport<Msg>>(&mut self, net: &mut T, slot: usize) {
        if self.left[slot] == 0 {
            return;
        }
        self.left[slot] -= 1;
        let (_, spec) = self.gens[slot].next_txn();
        self.running[slot] = Some(spec.clone());
        self.pool.start(net, slot as u32, spec);
    }
}

impl Node for SimClient {
    type Msg = Msg;

    fn on_start<T: Transport<Msg>>(&mut self, net: &mut T) {
        if self.crashed {
            return;
        }
        for slot in 0..self.pool.len() {
            if self.running[slot].is_none() {
                self.start_next(net, slot);
            }
        }
    }

    fn on_message<T: Transport<Msg>>(&mut self, net: &mut T, from: Addr, msg: Msg) {
        if let Some((slot, outcome)) = self.pool.on_reply(net, from, msg) {
            let spec = self.running[slot as usize]
                .take()
                .expect("a running transaction");
            self.recorder.record(&spec, &outcome);
            self.finished += 1;
            self.restarts += outcome.restarts as u64;
            self.second_rounds += (outcome.read_rounds >= 2) as u64;
            self.start_next(net, slot as usize);
        }
    }

    fn on_tick<T: Transport<Msg>>(&mut self, net: &mut T) {
        self.pool.on_tick(net);
    }

    /// A crashed client never comes back; its unfinished writes become in-doubt.
    fn on_crash(&mut self) {
        self.crashed = true;
        for slot in 0..self.pool.len() {
            let ts = self.pool.client(slot as u32).abandon();
            if let (Some(spec), Some(ts)) = (self.running[slot].take(), ts) {
                self.recorder.record_in_doubt(&spec, ts);
            }
            self.left[slot] = 0;
        }
    }
}

/// A simulated process: a server node or a client endpoint.
pub enum Actor {
    /// A cluster member.
    Server(Box<ServerNode>),
    /// A client endpoint.
    Client(Box<SimClient>),
}

impl Actor {
    /// A server for node `me` of an `n`-node cluster with one partition per node.
    pub fn server(me: Addr, n: u32, settings: ServerSettings) -> Actor {
        Actor::Server(Box::new(ServerNode::new(me, settings, Router::uniform(n))))
    }

    /// The partition server, if this is a server.
    pub fn as_server(&self) -> Option<&PartitionServer> {
        match self {
            Actor::Server(s) => Some(s.server()),
            Actor::Client(_) => None,
        }
    }

    /// The client endpoint, if this is one.
    pub fn as_client(&self) -> Option<&SimClient> {
        match self {
            Actor::Client(c) => Some(c),
            Actor::Server(_) => None,
        }
    }

    /// The client endpoint, mutably.
    pub fn as_client_mut(&mut self) -> Option<&mut SimClient> {
        match self {
            Actor::Client(c) => Some(c),
            Actor::Server(_) => None,
        }
    }
}

/// The address of simulated client endpoint `i`.
pub fn client_addr(i: u32) -> Addr {
    CLIENT_ADDR_BASE + i
}

impl Node for Actor {
    type Msg = Msg;

    fn on_start<T: Transport<Msg>>(&mut self, net: &mut T) {
        match self {
            Actor::Server(s) => s.on_start(net),
            Actor::Client(c) => c.on_start(net),
        }
    }

    fn on_message<T: Transport<Msg>>(&mut self, net: &mut T, from: Addr, msg: Msg) {
        match self {
            Actor::Server(s) => s.on_message(net, from, msg),
            Actor::Client(c) => c.on_message(net, from, msg),
        }
    }

    fn on_tick<T: Transport<Msg>>(&mut self, net: &mut T) {
        match self {
            Actor::Server(s) => s.on_tick(net),
            Actor::Client(c) => c.on_tick(net),
        }
    }

    fn on_crash(&mut self) {
        match self {
            Actor::Server(s) => s.on_crash(),
            Actor::Client(c) => c.on_crash(),
        }
    }
}
