//! Dist-OCC and Dist-S2PL (STAR §8.1.2) under the deterministic simulator, with asynchronous
//! replication and group commit and with synchronous replication: three nodes (a full replica and
//! two partial ones, each partition's primary on a partial replica), random delays that reorder
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

/// A workload whose requests travel in messages.
trait Wl: Procedures<Request: serde::Serialize + serde::de::DeserializeOwned> {}
impl<W: Procedures<Request: serde::Serialize + serde::de::DeserializeOwned>> Wl for W {}

const MS: u64 = 1_000_000;
const NODES: u32 = 3;
const PARTITIONS: u32 = 4;
const ROWS: u64 = 40;

fn seeds(n: u64) -> Vec<u64> {
    match std::env::var("PHASEDB_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("PHASEDB_SIM_SEED is a number")],
        Err(_) => (1..=n).collect(),
    }
}

/// One full replica (node 0) and two partial ones; two replicas per partition, primaries on the
/// partial replicas, which therefore hold only the partitions they master.
fn layout(partitions: u32) -> Layout {
    Layout::new(NODES, &StarConfig::new(partitions)).unwrap()
}

#[derive(Clone, Copy)]
struct Scenario {
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
    let layout = layout(workload.partitions());
    for n in 0..NODES {
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
    for n in 0..NODES {
        sim.node_mut(n).set_local_load(false);
    }
    let stopped: Vec<u64> = (0..NODES).map(|n| sim.node(n).completed_group()).collect();
    let quiet = sim.run_until_pred(sim.now() + 10_000 * MS, |sim| {
        (0..NODES)
            .all(|n| sim.node(n).is_idle() && sim.node(n).completed_group() > stopped[n as usize])
    });
    assert!(
        quiet,
        "seed {}: the cluster did not quiesce (replay: PHASEDB_SIM_SEED={})",
        s.seed, s.seed
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
            "seed {}: partition {p}'s replicas differ: {digests:?} (replay: PHASEDB_SIM_SEED={})",
            s.seed,
            s.seed
        );
    }
    for (n, db) in dbs.iter().enumerate() {
        let held = layout.held(n as u32);
        workload
            .check(db, &held)
            .unwrap_or_else(|e| panic!("seed {}: node {n}: {e}", s.seed));
    }
    let mut stats = sim.node(1).stats();
    for t in &mut stats.types {
        let other = &sim.node(2).stats().types;
        let o = other.iter().find(|o| o.name == t.name).unwrap();
        t.committed += o.committed;
        t.committed_cross += o.committed_cross;
        t.aborted += o.aborted;
    }
    stats.requests.retried += sim.node(2).stats().requests.retried;
    assert_eq!(sim.node(0).stats().committed(), 0, "node 0 masters nothing");
    for n in 0..NODES {
        assert_eq!(
            sim.node(n).stats().replication.refused,
            0,
            "seed {}",
            s.seed
        );
    }
    if !dbs[0].config().record_history {
        return (History::default(), stats);
    }
    let history = History::merge((0..NODES).map(|n| sim.node_mut(n).take_history()).collect());
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
    let mut w = Accounts::new(PARTITIONS, ROWS);
    let l = layout(PARTITIONS);
    let dbs: Vec<Database<Star>> = (0..NODES)
        .map(|n| open_database(&mut w, &l, n, true).unwrap())
        .collect();
    let (history, stats) = run(s, &w, &dbs);
    let all: Vec<u32> = (0..PARTITIONS).collect();
    assert_eq!(
        w.counted(&dbs[0], &all),
        stats.committed() as i64,
        "seed {}: the full replica lost transfers",
        s.seed
    );
    (history, stats)
}

fn converges_and_serializes(protocol: DistProtocol, replication: ReplicationSync) {
    for seed in seeds(4) {
        let s = Scenario {
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
        let mut w = Accounts::new(PARTITIONS, 2);
        let l = layout(PARTITIONS);
        let dbs: Vec<Database<Star>> = (0..NODES)
            .map(|n| open_database(&mut w, &l, n, true).unwrap())
            .collect();
        let s = Scenario {
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
        let l = layout(2);
        let dbs: Vec<Database<Star>> = (0..NODES)
            .map(|n| open_database(&mut w, &l, n, false).unwrap())
            .collect();
        for replication in [ReplicationSync::Async, ReplicationSync::Sync] {
            let s = Scenario {
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
