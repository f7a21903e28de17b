//! PB-OCC (STAR §8.1.2) under the deterministic simulator, with asynchronous replication and group
//! commit and with synchronous replication: a primary and a backup (two full replicas), random
//! delays that reorder messages, the primary's own load and requests from client endpoints. After
//! every run the backup's digest equals the primary's, both keep the workload's invariant (a bank
//! workload's, and TPC-C's consistency conditions), the history is serializable, and every request
//! got exactly one reply. A failing run prints its seed (replay one with `PHASEDB_SIM_SEED=<seed>`).

#[path = "sim_star/accounts.rs"]
mod accounts;
#[path = "sim_star/client.rs"]
mod client;

use accounts::Accounts;
use client::Client;
use phasedb_check::{History, check_serializable};
use phasedb_dist::star::baselines::PbOccNode;
use phasedb_dist::star::{Layout, Outcome, StarMsg, StarSettings, StarStats, open_database};
use phasedb_net::sim::{SimConfig, Simulator};
use phasedb_net::{Addr, CLIENT_ADDR_BASE, Node, ReplicationSync, StarConfig, Transport};
use phasedb_txn::{Database, Procedures, Star};
use phasedb_workloads::tpcc::{ProceduresMix, TpccProcedures, TpccProceduresConfig};

/// A workload whose requests travel in messages.
trait Wl: Procedures<Request: serde::Serialize + serde::de::DeserializeOwned> {}
impl<W: Procedures<Request: serde::Serialize + serde::de::DeserializeOwned>> Wl for W {}

const MS: u64 = 1_000_000;
const PARTITIONS: u32 = 4;
const ROWS: u64 = 200;

fn seeds(n: u64) -> Vec<u64> {
    match std::env::var("PHASEDB_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("PHASEDB_SIM_SEED is a number")],
        Err(_) => (1..=n).collect(),
    }
}

/// The paper's PB-OCC setting: two nodes, each a full replica; node 0 is the primary.
fn layout(partitions: u32) -> Layout {
    let star = StarConfig {
        full_replicas: 2,
        replicas_per_partition: 2,
        ..StarConfig::new(partitions)
    };
    Layout::new(2, &star).unwrap()
}

/// A simulated process: a PB-OCC node or a client endpoint.
enum Actor<'w, W: Wl> {
    Node(Box<PbOccNode<'w, W>>),
    Client(Box<Client<'w>>),
}

impl<'w, W: Wl> Actor<'w, W> {
    fn node(&self) -> &PbOccNode<'w, W> {
        match self {
            Actor::Node(n) => n,
            Actor::Client(_) => panic!("not a node"),
        }
    }

    fn node_mut(&mut self) -> &mut PbOccNode<'w, W> {
        match self {
            Actor::Node(n) => n,
            Actor::Client(_) => panic!("not a node"),
        }
    }

    fn client(&self) -> &Client<'w> {
        match self {
            Actor::Client(c) => c,
            Actor::Node(_) => panic!("not a client"),
        }
    }
}

impl<W: Wl> Node for Actor<'_, W> {
    type Msg = StarMsg;

    fn on_start<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        match self {
            Actor::Node(n) => n.on_start(net),
            Actor::Client(c) => c.on_start(net),
        }
    }

    fn on_message<T: Transport<StarMsg>>(&mut self, net: &mut T, from: Addr, msg: StarMsg) {
        match self {
            Actor::Node(n) => n.on_message(net, from, msg),
            Actor::Client(c) => c.on_message(net, from, msg),
        }
    }

    fn on_tick<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        match self {
            Actor::Node(n) => n.on_tick(net),
            Actor::Client(c) => c.on_tick(net),
        }
    }
}

#[derive(Clone)]
struct Scenario {
    seed: u64,
    replication: ReplicationSync,
    cross: f64,
    local_load: bool,
    /// Client endpoints sending this many transfers each.
    clients: Vec<usize>,
    run_ms: u64,
}

impl Scenario {
    fn new(seed: u64, replication: ReplicationSync) -> Self {
        Scenario {
            seed,
            replication,
            cross: 0.2,
            local_load: true,
            clients: Vec::new(),
            run_ms: 60,
        }
    }
}

struct Run<'w, W: Wl> {
    sim: Simulator<Actor<'w, W>>,
    clients: Vec<Addr>,
}

impl<'w, W: Wl> Run<'w, W> {
    fn node(&self, n: Addr) -> &PbOccNode<'w, W> {
        self.sim.node(n).node()
    }
}

/// Runs `s` over two nodes' databases `dbs`, then stops the load and runs until every request was
/// answered and both nodes are idle, past the group in which the load stopped.
fn run<'w, W>(
    s: &Scenario,
    workload: &'w W,
    accounts: &'w Accounts,
    dbs: &'w [Database<Star>],
) -> Run<'w, W>
where
    W: Wl,
{
    let mut sim = Simulator::new(SimConfig {
        min_delay: 20_000,
        max_delay: 400_000,
        tick: MS / 2,
        ..SimConfig::new(s.seed)
    });
    let settings = StarSettings {
        cross_partition: s.cross,
        local_load: s.local_load,
        slice_txns: 8,
        seed: s.seed,
        replication: s.replication,
        virtual_workers: 4,
        group_commit_ns: 2 * MS,
        ..StarSettings::default()
    };
    let layout = layout(workload.partitions());
    for n in 0..2 {
        let node = PbOccNode::new(
            n,
            layout.clone(),
            settings.clone(),
            &dbs[n as usize],
            workload,
        );
        sim.add(n, Actor::Node(Box::new(node.unwrap())));
    }
    let mut clients = Vec::new();
    for (i, &n) in s.clients.iter().enumerate() {
        let addr = CLIENT_ADDR_BASE + i as u32;
        let mut c = Client::transfers(accounts, s.seed * 100 + i as u64, s.cross, n);
        c.nodes = 2;
        sim.add(addr, Actor::Client(Box::new(c)));
        clients.push(addr);
    }
    sim.run_until(s.run_ms * MS);
    for n in 0..2 {
        sim.node_mut(n).node_mut().set_local_load(false);
    }
    let stopped_at = sim.node(0).node().group();
    let deadline = sim.now() + 10_000 * MS;
    let quiet = sim.run_until_pred(deadline, |sim| {
        clients.iter().all(|&c| sim.node(c).client().done())
            && (0..2).all(|n| {
                let node = sim.node(n).node();
                node.is_idle() && node.group() > stopped_at
            })
    });
    assert!(
        quiet,
        "seed {}: the cluster did not quiesce (replay: PHASEDB_SIM_SEED={})",
        s.seed, s.seed
    );
    Run { sim, clients }
}

/// The backup's digest equals the primary's, both pass the workload's check, no batch was
/// refused, and the history of both nodes is serializable and holds every commit. Returns the
/// history and the primary's counters.
fn check_replicas<W>(
    s: &Scenario,
    r: &mut Run<W>,
    workload: &W,
    dbs: &[Database<Star>],
) -> (History, StarStats)
where
    W: Wl,
{
    let (primary, backup) = (r.node(0).digests(), r.node(1).digests());
    assert_eq!(primary.len(), workload.partitions() as usize);
    assert_eq!(
        primary, backup,
        "seed {}: the backup differs from the primary (replay: PHASEDB_SIM_SEED={})",
        s.seed, s.seed
    );
    let all: Vec<u32> = (0..workload.partitions()).collect();
    for (n, db) in dbs.iter().enumerate() {
        workload
            .check(db, &all)
            .unwrap_or_else(|e| panic!("seed {}: node {n}: {e}", s.seed));
    }
    let stats = r.node(0).stats();
    assert_eq!(r.node(1).stats().replication.refused, 0, "seed {}", s.seed);
    assert_eq!(r.node(1).stats().committed(), 0, "the backup runs nothing");
    if !dbs[0].config().record_history {
        return (History::default(), stats);
    }
    let history = History::merge(
        (0..2)
            .map(|n| r.sim.node_mut(n).node_mut().take_history())
            .collect(),
    );
    assert_eq!(history.len() as u64, stats.committed(), "seed {}", s.seed);
    if let Err(a) = check_serializable(&history) {
        panic!(
            "seed {}: not serializable: {a} (replay: PHASEDB_SIM_SEED={})",
            s.seed, s.seed
        );
    }
    (history, stats)
}

fn accounts_run(s: &Scenario) -> (History, StarStats, Vec<Outcome>) {
    let mut w = Accounts::new(PARTITIONS, ROWS);
    let l = layout(PARTITIONS);
    let dbs: Vec<Database<Star>> = (0..2)
        .map(|n| open_database(&mut w, &l, n, true).unwrap())
        .collect();
    let mut r = run(s, &w, &w, &dbs);
    let (history, stats) = check_replicas(s, &mut r, &w, &dbs);
    assert_eq!(
        w.counted(&dbs[0], &(0..PARTITIONS).collect::<Vec<_>>()),
        stats.committed() as i64,
        "seed {}: the vaults lost transfers",
        s.seed
    );
    let mut outcomes = Vec::new();
    for &c in &r.clients {
        let client = r.sim.node(c).client();
        let mut seen = vec![0u32; client.total()];
        for (rid, _, outcome) in &client.replies {
            seen[*rid as usize] += 1;
            outcomes.push(outcome.clone());
        }
        assert!(
            seen.iter().all(|&n| n == 1),
            "seed {}: client {c} got replies {seen:?} per request",
            s.seed
        );
    }
    (history, stats, outcomes)
}

fn converges_and_serializes(replication: ReplicationSync) {
    for seed in seeds(4) {
        let s = Scenario::new(seed, replication);
        let (history, stats, _) = accounts_run(&s);
        assert!(
            history.len() > 300,
            "seed {seed}: only {} committed",
            history.len()
        );
        assert!(stats.aborted() > 0, "seed {seed}: no transfer overdrew");
        let cross: u64 = stats.types.iter().map(|t| t.committed_cross).sum();
        assert!(cross > 0, "seed {seed}: no cross-partition commit");
        assert!(
            stats.times.phases > 10,
            "seed {seed}: {} group commits",
            stats.times.phases
        );
    }
}

#[test]
fn pb_occ_async_backup_equals_primary_and_history_serializes() {
    converges_and_serializes(ReplicationSync::Async);
}

#[test]
fn pb_occ_sync_backup_equals_primary_and_history_serializes() {
    converges_and_serializes(ReplicationSync::Sync);
}

#[test]
fn pb_occ_client_requests_get_exactly_one_reply_in_both_modes() {
    for replication in [ReplicationSync::Async, ReplicationSync::Sync] {
        for seed in seeds(3) {
            let s = Scenario {
                local_load: false,
                clients: vec![100, 100],
                run_ms: 20,
                ..Scenario::new(seed, replication)
            };
            let (history, stats, outcomes) = accounts_run(&s);
            assert_eq!(outcomes.len(), 200);
            assert!(
                outcomes.iter().all(|o| !matches!(o, Outcome::Error(_))),
                "seed {seed}: {outcomes:?}"
            );
            let committed = outcomes
                .iter()
                .filter(|o| matches!(o, Outcome::Committed { .. }))
                .count();
            assert_eq!(committed, history.len(), "seed {seed}");
            assert!(stats.requests.received > 0 && stats.requests.generated == 0);
        }
    }
}

#[test]
fn pb_occ_tpcc_keeps_its_consistency_conditions_on_primary_and_backup() {
    let mut w = TpccProcedures::new(TpccProceduresConfig {
        warehouses: 2,
        mix: ProceduresMix::NewOrderPayment,
        fine: false,
    });
    let l = layout(2);
    let dbs: Vec<Database<Star>> = (0..2)
        .map(|n| open_database(&mut w, &l, n, false).unwrap())
        .collect();
    let accounts = Accounts::new(2, 1);
    // Synchronous replication runs on what the asynchronous run left, after its quiesce.
    for replication in [ReplicationSync::Async, ReplicationSync::Sync] {
        let s = Scenario {
            run_ms: 30,
            ..Scenario::new(1, replication)
        };
        let mut r = run(&s, &w, &accounts, &dbs);
        let (_, stats) = check_replicas(&s, &mut r, &w, &dbs);
        assert!(
            stats.committed() > 100,
            "{replication:?}: {} committed",
            stats.committed()
        );
    }
}

#[test]
fn pb_occ_a_seed_replays_the_same_run() {
    let trace = || {
        let s = Scenario {
            clients: vec![40],
            run_ms: 30,
            ..Scenario::new(3, ReplicationSync::Sync)
        };
        let mut w = Accounts::new(PARTITIONS, ROWS);
        let l = layout(PARTITIONS);
        let dbs: Vec<Database<Star>> = (0..2)
            .map(|n| open_database(&mut w, &l, n, true).unwrap())
            .collect();
        let r = run(&s, &w, &w, &dbs);
        (r.sim.trace_hash(), r.node(0).stats())
    };
    assert_eq!(trace(), trace());
}

#[test]
fn pb_occ_malformed_and_unknown_partition_requests_get_an_error_and_change_nothing() {
    let mut w = Accounts::new(PARTITIONS, ROWS);
    let l = layout(PARTITIONS);
    let dbs: Vec<Database<Star>> = (0..2)
        .map(|n| open_database(&mut w, &l, n, true).unwrap())
        .collect();
    let before: Vec<u64> = dbs.iter().map(|db| db.digest(0, |_| true)).collect();
    let unknown = accounts::Transfer {
        from: w.account(PARTITIONS + 5, 0),
        to: w.account(0, 1),
        amount: 1,
    };
    let bodies = vec![
        vec![0xff, 0xff, 0xff],
        postcard::to_stdvec(&unknown).unwrap(),
        vec![0; phasedb_dist::star::msg::MAX_REQUEST_BYTES + 1],
        Vec::new(),
    ];
    let s = Scenario {
        local_load: false,
        run_ms: 10,
        ..Scenario::new(7, ReplicationSync::Sync)
    };
    let mut sim = Simulator::new(SimConfig {
        tick: MS / 2,
        ..SimConfig::new(s.seed)
    });
    let settings = StarSettings {
        replication: s.replication,
        ..StarSettings::default()
    };
    for n in 0..2 {
        let node = PbOccNode::new(n, l.clone(), settings.clone(), &dbs[n as usize], &w);
        sim.add(n, Actor::Node(Box::new(node.unwrap())));
    }
    let mut c = Client::sending(&w, s.seed, bodies);
    c.nodes = 2;
    sim.add(CLIENT_ADDR_BASE, Actor::Client(Box::new(c)));
    sim.run_until(s.run_ms * MS);
    let client = sim.node(CLIENT_ADDR_BASE).client();
    assert_eq!(client.replies.len(), 4);
    let texts: Vec<String> = client
        .replies
        .iter()
        .map(|(_, _, o)| match o {
            Outcome::Error(e) => e.clone(),
            other => panic!("a bad request was answered {other:?}"),
        })
        .collect();
    let joined = texts.join(" | ");
    assert!(joined.contains("malformed request"), "{joined}");
    assert!(joined.contains("partition 9, but there are 4"), "{joined}");
    assert!(joined.contains("exceeds"), "{joined}");
    for n in 0..2 {
        assert_eq!(dbs[n].digest(0, |_| true), before[n], "node {n} changed");
        assert_eq!(sim.node(n as Addr).node().stats().committed(), 0);
    }
}
