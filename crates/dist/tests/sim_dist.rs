//! Dist-OCC and Dist-S2PL (STAR §8.1.2) under the deterministic simulator, with asynchronous
//! replication and group commit and with synchronous replication, on two layouts: three nodes (a
//! full replica and two partial ones, each partition's primary on a partial replica), and the STAR
//! experiments' two nodes (each the primary of one partition and the secondary of the other, so a
//! home holds a copy of the rows it reads and writes remotely); random delays that reorder
//! messages, the nodes' own load with cross-partition transfers. After every run each partition's
//! replicas have equal digests, every node keeps the workload's invariant on what it holds (a bank
//! workload's, and TPC-C's consistency conditions), and the history is serializable. A failing run
//! prints its seed (replay one with `PHASEDB_SIM_SEED=<seed>`).

#[path = "sim_star/accounts.rs"]
mod accounts;

use accounts::Accounts;
use phasedb_check::{History, check_serializable};
use phasedb_dist::star::baselines::{DistNode, DistProtocol};
use phasedb_dist::star::{Layout, StarSettings, StarStats, open_database};
use phasedb_net::sim::{SimConfig, Simulator};
use phasedb_net::{ReplicationSync, StarConfig};
use phasedb_txn::{Database, Procedures, Star};
use phasedb_workloads::tpcc::{ProceduresMix, TpccProcedures, TpccProceduresConfig};
use phasedb_workloads::ycsb::{YcsbProcedures, YcsbProceduresConfig};

/// A workload whose requests travel in messages.
trait Wl: Procedures<Request: serde::Serialize + serde::de::DeserializeOwned> {}
impl<W: Procedures<Request: serde::Serialize + serde::de::DeserializeOwned>> Wl for W {}

const MS: u64 = 1_000_000;
const ROWS: u64 = 40;

fn seeds(n: u64) -> Vec<u64> {
    match std::env::var("PHASEDB_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("PHASEDB_SIM_SEED is a number")],
        Err(_) => (1..=n).collect(),
    }
}

/// Where the partitions live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// One full replica (node 0) and two partial ones; two replicas per partition, primaries on
    /// the partial replicas, which therefore hold only the partitions they master.
    Three,
    /// The STAR experiments' layout: node `p % 2` the primary of partition `p`, the other node its
    /// secondary (node 0 is the full replica; both hold every partition).
    Two,
}

impl Shape {
    fn nodes(self) -> u32 {
        match self {
            Shape::Three => 3,
            Shape::Two => 2,
        }
    }

    /// The partitions of the bank workload.
    fn partitions(self) -> u32 {
        match self {
            Shape::Three => 4,
            Shape::Two => 2,
        }
    }

    fn layout(self, partitions: u32) -> Layout {
        let star = match self {
            Shape::Three => StarConfig::new(partitions),
            Shape::Two => StarConfig {
                full_replicas: 1,
                replicas_per_partition: 2,
                placement: Some((0..partitions).map(|p| vec![p % 2, (p + 1) % 2]).collect()),
                ..StarConfig::new(partitions)
            },
        };
        Layout::new(self.nodes(), &star).unwrap()
    }
}

#[derive(Clone, Copy)]
struct Scenario {
    shape: Shape,
    seed: u64,
    protocol: DistProtocol,
    replication: ReplicationSync,
    cross: f64,
    run_ms: u64,
}

/// Runs `s` over the nodes' databases `dbs`, stops the load, runs until every node is idle past
/// the group in which it stopped; checks the replicas and the history and returns the counters
/// summed over the nodes.
fn run<W: Wl>(s: &Scenario, workload: &W, dbs: &[Database<Star>]) -> (History, StarStats) {
    let mut sim = Simulator::new(SimConfig {
        min_delay: 20_000,
        max_delay: 400_000,
        tick: MS / 2,
        ..SimConfig::new(s.seed)
    });
    let settings = StarSettings {
        cross_partition: s.cross,
        local_load: true,
        slice_txns: 8,
        seed: s.seed,
        replication: s.replication,
        virtual_workers: 4,
        group_commit_ns: 2 * MS,
        ..StarSettings::default()
    };
    let layout = s.shape.layout(workload.partitions());
    let nodes = s.shape.nodes();
    for n in 0..nodes {
        let node = DistNode::new(
            n,
            s.protocol,
            layout.clone(),
            settings.clone(),
            &dbs[n as usize],
            workload,
        );
        sim.add(n, node.unwrap());
    }
    sim.run_until(s.run_ms * MS);
    for n in 0..nodes {
        sim.node_mut(n).set_local_load(false);
    }
    let stopped: Vec<u64> = (0..nodes).map(|n| sim.node(n).completed_group()).collect();
    let quiet = sim.run_until_pred(sim.now() + 10_000 * MS, |sim| {
        (0..nodes)
            .all(|n| sim.node(n).is_idle() && sim.node(n).completed_group() > stopped[n as usize])
    });
    assert!(
        quiet,
        "{:?} seed {}: the cluster did not quiesce (replay: PHASEDB_SIM_SEED={})",
        s.shape, s.seed, s.seed
    );
    // Every partition's replicas agree.
    for p in 0..workload.partitions() {
        let digests: Vec<_> = layout
            .replicas(p)
            .iter()
            .map(|&n| {
                sim.node(n)
                    .digests()
                    .into_iter()
                    .find(|d| d.partition == p)
                    .unwrap()
            })
            .collect();
        assert!(
            digests.windows(2).all(|d| d[0] == d[1]),
            "{:?} {:?} {:?} seed {}: partition {p}'s replicas differ: {digests:?} (replay: PHASEDB_SIM_SEED={})",
            s.shape,
            s.protocol,
            s.replication,
            s.seed,
            s.seed
        );
    }
    // Taken before the consistency checks, whose own transactions the databases keep.
    let history = dbs[0]
        .config()
        .record_history
        .then(|| History::merge((0..nodes).map(|n| sim.node_mut(n).take_history()).collect()));
    for (n, db) in dbs.iter().enumerate() {
        let held = layout.held(n as u32);
        workload
            .check(db, &held)
            .unwrap_or_else(|e| panic!("seed {}: node {n}: {e}", s.seed));
    }
    let mut stats = sim.node(0).stats();
    for n in 1..nodes {
        let other = sim.node(n).stats();
        for t in &mut stats.types {
            let o = other.types.iter().find(|o| o.name == t.name).unwrap();
            t.committed += o.committed;
            t.committed_cross += o.committed_cross;
            t.aborted += o.aborted;
        }
        stats.requests.retried += other.requests.retried;
        stats.requests.errors += other.requests.errors;
    }
    if s.shape == Shape::Three {
        assert_eq!(sim.node(0).stats().committed(), 0, "node 0 masters nothing");
    }
    for n in 0..nodes {
        assert_eq!(
            sim.node(n).stats().replication.refused,
            0,
            "seed {}",
            s.seed
        );
    }
    let Some(history) = history else {
        return (History::default(), stats);
    };
    for db in dbs {
        db.take_history();
    }
    assert_eq!(history.len() as u64, stats.committed(), "seed {}", s.seed);
    if let Err(a) = check_serializable(&history) {
        panic!(
            "seed {}: not serializable: {a} (replay: PHASEDB_SIM_SEED={})",
            s.seed, s.seed
        );
    }
    (history, stats)
}

fn accounts_run(s: &Scenario) -> (History, StarStats) {
    let partitions = s.shape.partitions();
    let mut w = Accounts::new(partitions, ROWS);
    let l = s.shape.layout(partitions);
    let dbs: Vec<Database<Star>> = (0..s.shape.nodes())
        .map(|n| open_database(&mut w, &l, n, true).unwrap())
        .collect();
    let (history, stats) = run(s, &w, &dbs);
    let all: Vec<u32> = (0..partitions).collect();
    assert_eq!(
        w.counted(&dbs[0], &all),
        stats.committed() as i64,
        "seed {}: the full replica lost transfers",
        s.seed
    );
    (history, stats)
}

fn converges_and_serializes(protocol: DistProtocol, replication: ReplicationSync) {
    for (shape, seed) in [Shape::Three, Shape::Two]
        .into_iter()
        .flat_map(|shape| seeds(3).into_iter().map(move |seed| (shape, seed)))
    {
        let s = Scenario {
            shape,
            seed,
            protocol,
            replication,
            cross: 0.3,
            run_ms: 60,
        };
        let (history, stats) = accounts_run(&s);
        assert!(
            history.len() > 100,
            "seed {seed}: only {} committed",
            history.len()
        );
        let cross: u64 = stats.types.iter().map(|t| t.committed_cross).sum();
        assert!(cross > 20, "seed {seed}: {cross} cross-partition commits");
    }
}

#[test]
fn dist_occ_async_replicas_agree_and_history_serializes() {
    converges_and_serializes(DistProtocol::Occ, ReplicationSync::Async);
}

#[test]
fn dist_occ_sync_replicas_agree_and_history_serializes() {
    converges_and_serializes(DistProtocol::Occ, ReplicationSync::Sync);
}

#[test]
fn dist_s2pl_async_replicas_agree_and_history_serializes() {
    converges_and_serializes(DistProtocol::S2pl, ReplicationSync::Async);
}

#[test]
fn dist_s2pl_sync_replicas_agree_and_history_serializes() {
    converges_and_serializes(DistProtocol::S2pl, ReplicationSync::Sync);
}

/// Every transfer crossing partitions of a two-account bank, all nodes at once: NO_WAIT conflicts
/// abort and are rerun (nothing waits for a lock, so nothing deadlocks), and every request still
/// commits or aborts.
#[test]
fn no_wait_conflicts_abort_and_rerun_instead_of_deadlocking() {
    for protocol in [DistProtocol::Occ, DistProtocol::S2pl] {
        let shape = Shape::Three;
        let mut w = Accounts::new(shape.partitions(), 2);
        let l = shape.layout(shape.partitions());
        let dbs: Vec<Database<Star>> = (0..shape.nodes())
            .map(|n| open_database(&mut w, &l, n, true).unwrap())
            .collect();
        let s = Scenario {
            shape,
            seed: 5,
            protocol,
            replication: ReplicationSync::Sync,
            cross: 1.0,
            run_ms: 40,
        };
        let (history, stats) = run(&s, &w, &dbs);
        assert!(
            stats.requests.retried > 10,
            "{protocol:?}: {} reruns",
            stats.requests.retried
        );
        assert!(
            history.len() > 20 && stats.types.iter().map(|t| t.committed_cross).sum::<u64>() > 20,
            "{protocol:?}: {stats:?}"
        );
    }
}

#[test]
fn dist_tpcc_keeps_its_consistency_conditions_on_every_replica() {
    for protocol in [DistProtocol::Occ, DistProtocol::S2pl] {
        let mut w = TpccProcedures::new(TpccProceduresConfig {
            warehouses: 2,
            mix: ProceduresMix::NewOrderPayment,
            fine: false,
        });
        let l = Shape::Three.layout(2);
        let dbs: Vec<Database<Star>> = (0..Shape::Three.nodes())
            .map(|n| open_database(&mut w, &l, n, false).unwrap())
            .collect();
        for replication in [ReplicationSync::Async, ReplicationSync::Sync] {
            let s = Scenario {
                shape: Shape::Three,
                seed: 1,
                protocol,
                replication,
                cross: 0.0,
                run_ms: 30,
            };
            let (_, stats) = run(&s, &w, &dbs);
            assert!(
                stats.committed() > 50,
                "{protocol:?} {replication:?}: {} committed",
                stats.committed()
            );
        }
    }
}

/// TPC-C Payment with remote customers, 60% of them named by last name: a scan of the remote
/// warehouse's last-name index, fetched from its primary (on the three-node layout the home holds
/// no copy of it; on the two-node one it holds a replica) and checked for phantoms at prepare, by
/// both protocols with both replications. No request fails (before remote scans, each such
/// Payment failed with an error), the consistency conditions hold and the history is
/// serializable.
#[test]
fn dist_tpcc_payment_scans_remote_customers_by_last_name() {
    for shape in [Shape::Three, Shape::Two] {
        for protocol in [DistProtocol::Occ, DistProtocol::S2pl] {
            let mut w = TpccProcedures::new(TpccProceduresConfig {
                warehouses: 2,
                mix: ProceduresMix::Payment,
                fine: false,
            });
            let l = shape.layout(2);
            for replication in [ReplicationSync::Async, ReplicationSync::Sync] {
                // Fresh databases: the history checked must hold every writer of what is read.
                let dbs: Vec<Database<Star>> = (0..shape.nodes())
                    .map(|n| open_database(&mut w, &l, n, true).unwrap())
                    .collect();
                let s = Scenario {
                    shape,
                    seed: 1,
                    protocol,
                    replication,
                    cross: 0.5,
                    run_ms: 30,
                };
                let (history, stats) = run(&s, &w, &dbs);
                let across: u64 = stats.types.iter().map(|t| t.committed_cross).sum();
                assert!(
                    across > 20 && !history.is_empty(),
                    "{shape:?} {protocol:?} {replication:?}: {across} remote Payments"
                );
                assert_eq!(
                    stats.requests.errors, 0,
                    "{shape:?} {protocol:?} {replication:?}: requests failed"
                );
            }
        }
    }
}

/// Every protocol and replication over fresh databases of `workload` on the experiments' 2-node
/// layout, `runs` seeds each, cross-partition share `cross`: the replicas agree (checked in
/// [`run`]) and enough commits.
fn two_nodes_agree<W: Wl>(mut workload: W, cross: f64, min_committed: u64, runs: u64) {
    let shape = Shape::Two;
    let l = shape.layout(workload.partitions());
    for protocol in [DistProtocol::Occ, DistProtocol::S2pl] {
        for replication in [ReplicationSync::Async, ReplicationSync::Sync] {
            for seed in seeds(runs) {
                let dbs: Vec<Database<Star>> = (0..shape.nodes())
                    .map(|n| open_database(&mut workload, &l, n, false).unwrap())
                    .collect();
                let s = Scenario {
                    shape,
                    seed,
                    protocol,
                    replication,
                    cross,
                    run_ms: 40,
                };
                let (_, stats) = run(&s, &workload, &dbs);
                let cross_commits: u64 = stats.types.iter().map(|t| t.committed_cross).sum();
                assert!(
                    stats.committed() > min_committed && cross_commits > 0,
                    "{protocol:?} {replication:?} seed {seed}: {} committed, {cross_commits} across",
                    stats.committed()
                );
            }
        }
    }
}

/// YCSB in STAR's shape over few rows (so that cross-partition transactions conflict with the
/// primaries' own), on the layout where each home holds a copy of its remote rows.
#[test]
fn two_node_ycsb_replicas_agree() {
    let w = YcsbProcedures::new(YcsbProceduresConfig {
        rows_per_partition: 50,
        read_ratio: 0.5,
        ..YcsbProceduresConfig::star(2)
    });
    two_nodes_agree(w, 0.3, 100, 3);
}

/// TPC-C NewOrder with remote supply warehouses on the experiments' 2-node layout.
#[test]
fn two_node_tpcc_replicas_agree() {
    let w = TpccProcedures::new(TpccProceduresConfig {
        warehouses: 2,
        mix: ProceduresMix::NewOrder,
        fine: false,
    });
    two_nodes_agree(w, 0.3, 50, 1);
}
