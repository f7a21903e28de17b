//! A test application over the broadcast substrate: a node whose "database" is, per group, the
//! sequence of payloads delivered, which proposes numbered payloads and offers its sequence as
//! its snapshot. Shared by the simulator tests, the TCP test and the throughput example.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use phasedb_dist::broadcast::{
    Broadcast, BroadcastConfig, Delivery, GroupId, GroupMsg, SnapshotSource,
};
use phasedb_net::{Addr, Node, Transport};

/// A payload naming its proposer, group and number, padded to `size` bytes.
pub fn payload(proposer: Addr, group: GroupId, n: u64, size: usize) -> Vec<u8> {
    let mut p = Vec::with_capacity(size.max(16));
    p.extend_from_slice(&proposer.to_le_bytes());
    p.extend_from_slice(&group.to_le_bytes());
    p.extend_from_slice(&n.to_le_bytes());
    p.resize(size.max(16), 0xab);
    p
}

/// The proposer, group and number of a payload made by [`payload`].
pub fn payload_id(p: &[u8]) -> Option<(Addr, GroupId, u64)> {
    if p.len() < 16 {
        return None;
    }
    let a = Addr::from_le_bytes(p[0..4].try_into().ok()?);
    let g = GroupId::from_le_bytes(p[4..8].try_into().ok()?);
    let n = u64::from_le_bytes(p[8..16].try_into().ok()?);
    Some((a, g, n))
}

fn encode_state(seq: &[Bytes]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in seq {
        out.extend_from_slice(&(p.len() as u32).to_le_bytes());
        out.extend_from_slice(p);
    }
    out
}

fn decode_state(data: &Bytes) -> Option<Vec<Bytes>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < data.len() {
        let len = u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?) as usize;
        at += 4;
        out.push(data.slice(at..at.checked_add(len).filter(|&e| e <= data.len())?));
        at += len;
    }
    Some(out)
}

/// Delivered-payload counters shared with the thread that watches a TCP run.
#[derive(Default)]
pub struct Progress {
    /// Payloads delivered per node (all groups).
    pub delivered: Vec<AtomicU64>,
    /// A node is done when every node delivered this many.
    pub target: u64,
}

impl Progress {
    /// Counters for `nodes` nodes.
    pub fn new(nodes: usize, target: u64) -> Arc<Progress> {
        Arc::new(Progress {
            delivered: (0..nodes).map(|_| AtomicU64::new(0)).collect(),
            target,
        })
    }
}

/// How a replica generates its load.
#[derive(Clone, Copy, Debug)]
pub struct Load {
    /// Payloads proposed per group at each tick (open loop).
    pub per_tick: usize,
    /// Own payloads proposed and not yet delivered, per group, kept up to this (closed loop; 0:
    /// off).
    pub window: u64,
    /// Most payloads proposed per group.
    pub limit: u64,
    /// Bytes per payload.
    pub size: usize,
}

/// A node of the test application.
pub struct Replica {
    /// The broadcast substrate.
    pub bcast: Broadcast,
    /// This node.
    pub me: Addr,
    /// The application's state: per group, the payloads delivered in order.
    pub log: BTreeMap<GroupId, Vec<Bytes>>,
    /// Payloads this node proposed, per group (kept across crashes so numbers stay unique).
    pub proposed: BTreeMap<GroupId, u64>,
    /// Own payloads delivered per group in this incarnation's state.
    pub own_delivered: BTreeMap<GroupId, u64>,
    /// The load.
    pub load: Load,
    /// Offer snapshots when the broadcast says one is due.
    pub snapshots: bool,
    /// Restores applied.
    pub restores: u64,
    /// Messages the broadcast refused.
    pub refused: u64,
    /// Broken promises seen while applying deliveries (gaps, bad restores).
    pub violations: Vec<String>,
    /// Shared counters (TCP runs).
    pub progress: Option<Arc<Progress>>,
    /// A crash loses the broadcast's storage too: the node rejoins every group under a new
    /// incarnation.
    pub amnesia: bool,
    /// Incarnations so far.
    pub incarnation: u32,
    cfg: BroadcastConfig,
    groups: Vec<(GroupId, Vec<Addr>)>,
}

struct State<'a>(&'a BTreeMap<GroupId, Vec<Bytes>>);

impl SnapshotSource for State<'_> {
    fn snapshot(&mut self, group: GroupId) -> (u64, Vec<u8>) {
        let seq = self.0.get(&group).map(Vec::as_slice).unwrap_or_default();
        (seq.len() as u64, encode_state(seq))
    }
}

impl Replica {
    /// Node `me` in `groups` (id and members).
    pub fn new(
        me: Addr,
        cfg: BroadcastConfig,
        groups: &[(GroupId, Vec<Addr>)],
        load: Load,
    ) -> Self {
        let mut bcast = Broadcast::new(me, cfg.clone()).expect("valid settings");
        for (g, members) in groups {
            if members.contains(&me) {
                bcast.add_group(*g, members).expect("valid group");
            }
        }
        Replica {
            bcast,
            me,
            log: BTreeMap::new(),
            proposed: BTreeMap::new(),
            own_delivered: BTreeMap::new(),
            load,
            snapshots: false,
            restores: 0,
            refused: 0,
            violations: Vec::new(),
            progress: None,
            amnesia: false,
            incarnation: 0,
            cfg,
            groups: groups.to_vec(),
        }
    }

    /// Payloads delivered over all groups.
    pub fn delivered(&self) -> u64 {
        self.log.values().map(|l| l.len() as u64).sum()
    }

    fn generate(&mut self) {
        let groups: Vec<GroupId> = self.bcast.groups().collect();
        for g in groups {
            let proposed = self.proposed.entry(g).or_default();
            let mut n = self.load.per_tick as u64;
            if self.load.window > 0 {
                let own = self.own_delivered.get(&g).copied().unwrap_or(0);
                n = n.max(
                    self.load
                        .window
                        .saturating_sub(proposed.saturating_sub(own)),
                );
            }
            let n = n.min(self.load.limit.saturating_sub(*proposed));
            for _ in 0..n {
                let p = payload(self.me, g, *proposed, self.load.size);
                if self.bcast.propose(g, &p).is_err() {
                    break;
                }
                *proposed += 1;
            }
        }
    }

    fn apply(&mut self) {
        while let Some(d) = self.bcast.next_delivery() {
            match d {
                Delivery::Entry {
                    group,
                    index,
                    payload,
                } => {
                    let log = self.log.entry(group).or_default();
                    if index != log.len() as u64 + 1 {
                        self.violations.push(format!(
                            "node {}: group {group} delivered index {index} after {}",
                            self.me,
                            log.len()
                        ));
                    }
                    if payload_id(&payload).is_some_and(|(a, _, _)| a == self.me) {
                        *self.own_delivered.entry(group).or_default() += 1;
                    }
                    log.push(payload);
                }
                Delivery::Restore {
                    group,
                    index,
                    state,
                } => {
                    self.restores += 1;
                    match decode_state(&state) {
                        Some(seq) if seq.len() as u64 == index => {
                            let own = seq
                                .iter()
                                .filter(|p| payload_id(p).is_some_and(|(a, _, _)| a == self.me))
                                .count() as u64;
                            self.own_delivered.insert(group, own);
                            self.log.insert(group, seq);
                        }
                        _ => self.violations.push(format!(
                            "node {}: group {group} restored a bad state at {index}",
                            self.me
                        )),
                    }
                }
            }
        }
        if let Some(p) = &self.progress {
            p.delivered[self.me as usize].store(self.delivered(), Ordering::Relaxed);
        }
    }

    fn pump<T: Transport<GroupMsg>>(&mut self, net: &mut T) {
        self.apply();
        if self.snapshots {
            self.bcast
                .take_snapshots(&mut State(&self.log))
                .expect("a snapshot of delivered payloads is accepted");
        }
        self.bcast.send_all(net, |m| m);
    }
}

impl Node for Replica {
    type Msg = GroupMsg;

    fn on_start<T: Transport<GroupMsg>>(&mut self, net: &mut T) {
        self.bcast.tick(net.now());
        self.pump(net);
    }

    fn on_message<T: Transport<GroupMsg>>(&mut self, net: &mut T, from: Addr, msg: GroupMsg) {
        if self.bcast.step(from, &msg).is_err() {
            self.refused += 1;
        }
        self.pump(net);
    }

    fn on_tick<T: Transport<GroupMsg>>(&mut self, net: &mut T) {
        self.generate();
        self.bcast.tick(net.now());
        self.pump(net);
    }

    fn on_crash(&mut self) {
        self.log.clear();
        self.own_delivered.clear();
        if self.amnesia {
            self.incarnation += 1;
            self.bcast = Broadcast::new(self.me, self.cfg.clone()).expect("valid settings");
            for (g, members) in &self.groups {
                if members.contains(&self.me) {
                    self.bcast
                        .join_group(*g, members, self.incarnation)
                        .expect("valid group");
                }
            }
        } else {
            self.bcast
                .restart()
                .expect("a member restarts from its storage");
        }
    }

    fn is_done(&self) -> bool {
        self.progress.as_ref().is_some_and(|p| {
            p.delivered
                .iter()
                .all(|d| d.load(Ordering::Relaxed) >= p.target)
        })
    }

    fn busy(&self) -> bool {
        self.load.window > 0
            && self.bcast.groups().any(|g| {
                let proposed = self.proposed.get(&g).copied().unwrap_or(0);
                let own = self.own_delivered.get(&g).copied().unwrap_or(0);
                proposed < self.load.limit && proposed.saturating_sub(own) < self.load.window
            })
    }
}

/// Runs `nodes` replicas over TCP on 127.0.0.1, each on its own thread and current-thread
/// runtime, until `stop` (polled every 5 ms with the counters and the time since start) says so
/// or every node reports itself done; returns the replicas.
pub fn run_tcp(
    nodes: u32,
    groups: &[(GroupId, Vec<Addr>)],
    cfg: &BroadcastConfig,
    load: Load,
    target: u64,
    mut stop: impl FnMut(&Progress, std::time::Duration) -> bool,
) -> Vec<Replica> {
    use phasedb_net::tcp::{TcpOptions, run_blocking};
    use std::time::{Duration, Instant};

    let listeners: Vec<std::net::TcpListener> = (0..nodes)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port"))
        .collect();
    let peers: Vec<(Addr, std::net::SocketAddr)> = listeners
        .iter()
        .enumerate()
        .map(|(i, l)| (i as Addr, l.local_addr().expect("bound")))
        .collect();
    let progress = Progress::new(nodes as usize, target);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let handles: Vec<_> = listeners
        .into_iter()
        .enumerate()
        .map(|(i, listener)| {
            let me = i as Addr;
            let mut replica = Replica::new(me, cfg.clone(), groups, load);
            replica.progress = Some(progress.clone());
            let mut opts = TcpOptions::new(me, peers.clone());
            opts.listener = Some(listener);
            opts.tick = Duration::from_millis(1);
            opts.poll = Duration::from_micros(50);
            let rx = stop_rx.clone();
            std::thread::spawn(move || {
                run_blocking(&mut replica, opts, rx).expect("the node runs");
                replica
            })
        })
        .collect();
    let start = Instant::now();
    while !handles.iter().all(|h| h.is_finished()) && !stop(&progress, start.elapsed()) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = stop_tx.send(true);
    handles
        .into_iter()
        .map(|h| h.join().expect("a node thread"))
        .collect()
}
