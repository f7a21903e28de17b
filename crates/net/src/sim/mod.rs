//! A deterministic network simulator that drives the same [`Node`]s as the TCP runtime.
//!
//! Time is virtual (nanoseconds). Each message gets a delay drawn from a seeded generator, so messages
//! overtake each other; a message may be dropped at random, by a test's filter, or because a network
//! partition separates its ends; nodes crash (losing volatile state through [`Node::on_crash`]) and
//! restart. Every choice comes from one seed, so a run replays exactly from it — tests print the seed
//! of a failing run.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Addr, Node, Transport};

/// The network's behaviour.
#[derive(Clone, Copy, Debug)]
pub struct SimConfig {
    /// Seed of every random choice.
    pub seed: u64,
    /// Smallest one-way delay (ns).
    pub min_delay: u64,
    /// Largest one-way delay (ns); delays are uniform in between, which reorders messages.
    pub max_delay: u64,
    /// Probability that any one message is lost.
    pub drop_rate: f64,
    /// Period of ticks (ns).
    pub tick: u64,
    /// Encode and decode every message with the wire format, as TCP would.
    pub roundtrip: bool,
}

impl SimConfig {
    /// 50–500 µs delays, no drops, 1 ms ticks, wire round trips on.
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            min_delay: 50_000,
            max_delay: 500_000,
            drop_rate: 0.0,
            tick: 1_000_000,
            roundtrip: true,
        }
    }
}

/// Counters of what the network did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Messages handed to a live node.
    pub delivered: u64,
    /// Messages lost (random drops, filters, partitions, dead targets).
    pub dropped: u64,
    /// Messages sent.
    pub sent: u64,
}

enum Ev<M> {
    Deliver { from: Addr, to: Addr, msg: M },
    Tick { addr: Addr, epoch: u64 },
}

struct Scheduled<M> {
    time: u64,
    seq: u64,
    ev: Ev<M>,
}

impl<M> PartialEq for Scheduled<M> {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}
impl<M> Eq for Scheduled<M> {}
impl<M> PartialOrd for Scheduled<M> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<M> Ord for Scheduled<M> {
    fn cmp(&self, other: &Self) -> Ordering {
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}

struct Slot<N> {
    node: N,
    up: bool,
    epoch: u64,
}

/// The [`Transport`] a node sees inside the simulator: sends are collected, then scheduled.
struct SimNet<M> {
    now: u64,
    out: Vec<(Addr, M)>,
}

impl<M> Transport<M> for SimNet<M> {
    fn now(&self) -> u64 {
        self.now
    }
    fn send(&mut self, to: Addr, msg: M) {
        self.out.push((to, msg));
    }
}

/// Decides whether a message is lost: `(from, to, msg) -> drop?`.
pub type DropFilter<M> = Box<dyn FnMut(Addr, Addr, &M) -> bool>;

/// The simulator: nodes, an event queue in virtual time and a seeded generator.
pub struct Simulator<N: Node> {
    cfg: SimConfig,
    now: u64,
    seq: u64,
    rng: SmallRng,
    queue: BinaryHeap<Scheduled<N::Msg>>,
    nodes: BTreeMap<Addr, Slot<N>>,
    cut: BTreeSet<(Addr, Addr)>,
    filter: Option<DropFilter<N::Msg>>,
    stats: SimStats,
    trace: u64,
}

impl<N> Simulator<N>
where
    N: Node,
    N::Msg: Serialize + DeserializeOwned,
{
    /// An empty network.
    pub fn new(cfg: SimConfig) -> Self {
        Self {
            cfg,
            now: 0,
            seq: 0,
            rng: SmallRng::seed_from_u64(cfg.seed),
            queue: BinaryHeap::new(),
            nodes: BTreeMap::new(),
            cut: BTreeSet::new(),
            filter: None,
            stats: SimStats::default(),
            trace: 0xcbf2_9ce4_8422_2325,
        }
    }

    /// The seed this run replays from.
    pub fn seed(&self) -> u64 {
        self.cfg.seed
    }

    /// Virtual time now (ns).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// What the network did so far.
    pub fn stats(&self) -> SimStats {
        self.stats
    }

    /// A hash of every event processed so far; equal seeds give equal traces.
    pub fn trace_hash(&self) -> u64 {
        self.trace
    }

    /// Adds a node at `addr` and starts it.
    pub fn add(&mut self, addr: Addr, node: N) {
        self.nodes.insert(
            addr,
            Slot {
                node,
                up: true,
                epoch: 0,
            },
        );
        self.start(addr);
    }

    fn start(&mut self, addr: Addr) {
        let now = self.now;
        let mut net = SimNet {
            now,
            out: Vec::new(),
        };
        let slot = self.nodes.get_mut(&addr).expect("node exists");
        slot.node.on_start(&mut net);
        let epoch = slot.epoch;
        self.dispatch(addr, net.out);
        let phase = self.rng.random_range(0..self.cfg.tick.max(1));
        self.schedule(now + phase, Ev::Tick { addr, epoch });
    }

    /// Crashes `addr`: it loses volatile state, and messages to it are lost until it restarts.
    pub fn crash(&mut self, addr: Addr) {
        if let Some(slot) = self.nodes.get_mut(&addr) {
            slot.up = false;
            slot.epoch += 1;
            slot.node.on_crash();
        }
    }

    /// Restarts a crashed node.
    pub fn restart(&mut self, addr: Addr) {
        if let Some(slot) = self.nodes.get_mut(&addr)
            && !slot.up
        {
            slot.up = true;
            self.start(addr);
        }
    }

    /// Restarts crashed node `addr` as `node`: a new process in its place, which keeps nothing of
    /// the old one (e.g. a node whose database comes back empty).
    pub fn restart_as(&mut self, addr: Addr, node: N) {
        if let Some(slot) = self.nodes.get_mut(&addr)
            && !slot.up
        {
            slot.node = node;
            slot.up = true;
            self.start(addr);
        }
    }

    /// Cuts the network between every node of `a` and every node of `b`, both ways.
    pub fn partition(&mut self, a: &[Addr], b: &[Addr]) {
        for &x in a {
            for &y in b {
                self.cut.insert((x, y));
                self.cut.insert((y, x));
            }
        }
    }

    /// Removes every partition.
    pub fn heal(&mut self) {
        self.cut.clear();
    }

    /// Installs a filter that may drop chosen messages (e.g. COMMITs).
    pub fn set_drop_filter(&mut self, filter: Option<DropFilter<N::Msg>>) {
        self.filter = filter;
    }

    /// The node at `addr`.
    pub fn node(&self, addr: Addr) -> &N {
        &self.nodes[&addr].node
    }

    /// The node at `addr`, mutably (e.g. to hand a client its next transaction).
    pub fn node_mut(&mut self, addr: Addr) -> &mut N {
        &mut self.nodes.get_mut(&addr).expect("node exists").node
    }

    /// Addresses of all nodes.
    pub fn addrs(&self) -> Vec<Addr> {
        self.nodes.keys().copied().collect()
    }

    /// True when `addr` is up.
    pub fn is_up(&self, addr: Addr) -> bool {
        self.nodes.get(&addr).is_some_and(|s| s.up)
    }

    /// Runs `f` on node `addr` with a transport, as if it were handling an event now.
    pub fn with_node<R>(
        &mut self,
        addr: Addr,
        f: impl FnOnce(&mut N, &mut dyn FnMut(Addr, N::Msg)) -> R,
    ) -> R {
        let mut out = Vec::new();
        let slot = self.nodes.get_mut(&addr).expect("node exists");
        let r = f(&mut slot.node, &mut |to, m| out.push((to, m)));
        self.dispatch(addr, out);
        r
    }

    fn schedule(&mut self, time: u64, ev: Ev<N::Msg>) {
        self.seq += 1;
        self.queue.push(Scheduled {
            time,
            seq: self.seq,
            ev,
        });
    }

    fn dispatch(&mut self, from: Addr, out: Vec<(Addr, N::Msg)>) {
        for (to, msg) in out {
            self.stats.sent += 1;
            let lost = self.cut.contains(&(from, to))
                || (self.cfg.drop_rate > 0.0 && self.rng.random::<f64>() < self.cfg.drop_rate)
                || self.filter.as_mut().is_some_and(|f| f(from, to, &msg));
            if lost {
                self.stats.dropped += 1;
                continue;
            }
            let delay = if to == from {
                0
            } else {
                self.rng
                    .random_range(self.cfg.min_delay..=self.cfg.max_delay.max(self.cfg.min_delay))
            };
            let msg = if self.cfg.roundtrip {
                let bytes = postcard::to_stdvec(&msg).expect("a message always encodes");
                postcard::from_bytes(&bytes).expect("a message decodes from its own encoding")
            } else {
                msg
            };
            self.schedule(self.now + delay, Ev::Deliver { from, to, msg });
        }
    }

    /// Processes the next event; false when none is left.
    pub fn step(&mut self) -> bool {
        let Some(Scheduled { time, seq, ev }) = self.queue.pop() else {
            return false;
        };
        self.now = self.now.max(time);
        self.trace = (self.trace ^ time ^ seq.rotate_left(32)).wrapping_mul(0x100_0000_01b3);
        match ev {
            Ev::Deliver { from, to, msg } => {
                let Some(slot) = self.nodes.get_mut(&to) else {
                    self.stats.dropped += 1;
                    return true;
                };
                if !slot.up {
                    self.stats.dropped += 1;
                    return true;
                }
                self.stats.delivered += 1;
                let mut net = SimNet {
                    now: self.now,
                    out: Vec::new(),
                };
                slot.node.on_message(&mut net, from, msg);
                self.dispatch(to, net.out);
            }
            Ev::Tick { addr, epoch } => {
                let Some(slot) = self.nodes.get_mut(&addr) else {
                    return true;
                };
                if !slot.up || slot.epoch != epoch {
                    return true;
                }
                let mut net = SimNet {
                    now: self.now,
                    out: Vec::new(),
                };
                slot.node.on_tick(&mut net);
                self.dispatch(addr, net.out);
                let next = self.now + self.cfg.tick;
                self.schedule(next, Ev::Tick { addr, epoch });
            }
        }
        true
    }

    /// Runs until virtual time `until` (ns) or until no event is left.
    pub fn run_until(&mut self, until: u64) {
        while self.queue.peek().is_some_and(|s| s.time <= until) {
            self.step();
        }
        self.now = self.now.max(until);
    }

    /// Runs until `done` holds for the simulator or virtual time passes `deadline`; returns `done`.
    pub fn run_until_pred(&mut self, deadline: u64, mut done: impl FnMut(&Self) -> bool) -> bool {
        loop {
            if done(self) {
                return true;
            }
            if self.queue.peek().is_none_or(|s| s.time > deadline) {
                self.now = self.now.max(deadline);
                return done(self);
            }
            self.step();
        }
    }
}
