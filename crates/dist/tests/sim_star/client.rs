//! A simulated client endpoint for STAR's and the baselines' simulator tests: sends transfers (or
//! given bodies) to random nodes, a few at a time, and records every reply with its arrival time.

use phasedb_dist::star::{Outcome, StarMsg};
use phasedb_net::{Addr, Node, Transport};
use phasedb_txn::Procedures;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::accounts::Accounts;

/// A client endpoint: sends its requests to random nodes, a few at a time, and records replies.
pub struct Client<'w> {
    pub workload: &'w Accounts,
    pub rng: SmallRng,
    pub cross: f64,
    /// Requests to send: bodies (already encoded, possibly malformed).
    pub planned: Vec<Vec<u8>>,
    pub next: usize,
    pub window: usize,
    /// Every reply: request id, arrival time, outcome.
    pub replies: Vec<(u64, u64, Outcome)>,
    /// Generate this many transfers when `planned` is empty.
    pub transfers: usize,
    /// Nodes to send to (`0..nodes`).
    pub nodes: u32,
    /// Send every request to this node instead.
    pub target: Option<Addr>,
    /// Ask for read committed ([`StarMsg::ReadCommitted`]) instead of [`StarMsg::Request`].
    pub read_committed: bool,
    /// When each request was sent, by request id.
    pub sent: Vec<u64>,
}

impl<'w> Client<'w> {
    pub fn transfers(workload: &'w Accounts, seed: u64, cross: f64, n: usize) -> Self {
        Client {
            workload,
            rng: SmallRng::seed_from_u64(seed),
            cross,
            planned: Vec::new(),
            next: 0,
            window: 4,
            replies: Vec::new(),
            transfers: n,
            nodes: 1,
            target: None,
            read_committed: false,
            sent: Vec::new(),
        }
    }

    pub fn sending(workload: &'w Accounts, seed: u64, bodies: Vec<Vec<u8>>) -> Self {
        Client {
            transfers: 0,
            planned: bodies,
            ..Client::transfers(workload, seed, 0.0, 0)
        }
    }

    pub fn total(&self) -> usize {
        self.planned.len().max(self.transfers)
    }

    pub fn done(&self) -> bool {
        self.replies.len() >= self.total()
    }

    fn send_next<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        if self.next >= self.total() {
            return;
        }
        let rid = self.next as u64;
        self.next += 1;
        let body = if self.planned.is_empty() {
            let mut g = self.workload.generator(0, self.rng.random());
            let home = self.rng.random_range(0..self.workload.partitions);
            let req = self.workload.generate(&mut g, home, self.cross);
            postcard::to_stdvec(&req).unwrap()
        } else {
            self.planned[rid as usize].clone()
        };
        let to = match self.target {
            Some(to) => to,
            None => self.rng.random_range(0..self.nodes),
        };
        self.sent.push(net.now());
        let msg = if self.read_committed {
            StarMsg::ReadCommitted { rid, body }
        } else {
            StarMsg::Request { rid, body }
        };
        net.send(to, msg);
    }
}

impl Node for Client<'_> {
    type Msg = StarMsg;

    fn on_start<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        for _ in 0..self.window {
            self.send_next(net);
        }
    }

    fn on_message<T: Transport<StarMsg>>(&mut self, net: &mut T, _: Addr, msg: StarMsg) {
        if let StarMsg::Reply { rid, outcome } = msg {
            self.replies.push((rid, net.now(), outcome));
            self.send_next(net);
        }
    }

    fn on_tick<T: Transport<StarMsg>>(&mut self, _: &mut T) {}
}
