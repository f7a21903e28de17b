//! STAR's fall-back to Dist-OCC when no full replica is left (§7.2), in the deterministic
//! simulator: one full replica (node 0, the coordinator) and partial replicas that hold every
//! partition twice. The full replica is crashed (fail-stop) in a partitioned phase, in a
//! single-master phase or during a replication fence, for several seeds each. The lowest live
//! node must notice, announce the failure, end the interrupted phase and switch every live node
//! to Dist-OCC, which goes on committing single- and cross-partition transactions. After each
//! run: every live node says it fell back, and since which phase; the replicas of each partition
//! agree and keep the workload's invariant (TPC-C's consistency conditions for TPC-C); every
//! acknowledged transaction is on every live replica and nothing the failed node ran in the
//! interrupted phase is; the history, STAR's phases and Dist-OCC's groups together, is
//! serializable. With a partition left with no live copy, the cluster stops and names it. A
//! failing run prints its seed (replay one with `PHASEDB_SIM_SEED=<seed>`).

#[path = "sim_star/accounts.rs"]
mod accounts;
#[path = "sim_star/actor.rs"]
mod actor;
#[path = "sim_star/client.rs"]
#[allow(dead_code)] // shared with sim_star, which sends given bodies too
mod client;
#[path = "sim_star/crash.rs"]
mod crash;

use accounts::Accounts;
use actor::Actor;
use client::Client;
use crash::{When, start_and_crash};
use phasedb_check::{History, check_serializable};
use phasedb_dist::star::{Layout, Outcome, StarNode, StarSettings, open_database};
use phasedb_net::sim::{SimConfig, Simulator};
use phasedb_net::{Addr, CLIENT_ADDR_BASE, ReplicationSync, StarConfig};
use phasedb_txn::{Database, Procedures, Star};
use phasedb_workloads::tpcc::{ProceduresMix, TpccProcedures, TpccProceduresConfig};
use serde::Serialize;
use serde::de::DeserializeOwned;

const MS: u64 = 1_000_000;
const PARTITIONS: u32 = 4;
/// The full replica, the coordinator: the node crashed.
const FULL: Addr = 0;

fn seeds(n: u64) -> Vec<u64> {
    match std::env::var("PHASEDB_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("PHASEDB_SIM_SEED is a number")],
        Err(_) => (1..=n).collect(),
    }
}

/// `nodes` nodes, one full replica, `replicas` copies of each of `partitions` (so `replicas - 1`
/// on partial replicas), 5 ms iterations.
fn layout(nodes: u32, replicas: u32, partitions: u32) -> Layout {
    let star = StarConfig {
        iteration_ms: 5.0,
        full_replicas: 1,
        replicas_per_partition: replicas,
        ..StarConfig::new(partitions)
    };
    Layout::new(nodes, &star).unwrap()
}

fn settings(seed: u64, cross: f64, replication: ReplicationSync) -> StarSettings {
    StarSettings {
        cross_partition: cross,
        local_load: true,
        slice_txns: 8,
        seed,
        replication,
        virtual_workers: 4,
        group_commit_ns: 2 * MS,
        heartbeat_ns: 2 * MS,
        failure_timeout_ns: 20 * MS,
        ..StarSettings::default()
    }
}

struct FellBack<'w, W>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    sim: Simulator<StarNode<'w, W>>,
    live: Vec<Addr>,
    /// The phase the full replica's failure interrupted.
    phase: u64,
}

/// Committed transactions on `nodes`, and of those the cross-partition ones.
fn committed<W>(sim: &Simulator<StarNode<'_, W>>, nodes: &[Addr]) -> (u64, u64)
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    nodes.iter().fold((0, 0), |(all, cross), &n| {
        let s = sim.node(n).stats();
        let c: u64 = s.types.iter().map(|t| t.committed_cross).sum();
        (all + s.committed(), cross + c)
    })
}

/// Runs `layout` under the nodes' own load, crashes the full replica at a moment of kind `when`,
/// checks that every live node falls back and commits on, then stops the load and waits until
/// the live nodes are idle.
fn fall_back_run<'w, W>(
    seed: u64,
    layout: &Layout,
    w: &'w W,
    dbs: &'w [Database<Star>],
    when: When,
    cross: f64,
    replication: ReplicationSync,
) -> FellBack<'w, W>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    let settings = settings(seed, cross, replication);
    let mut sim = start_and_crash(seed, layout, &settings, w, dbs, FULL, when);
    let live: Vec<Addr> = (0..layout.nodes()).filter(|&n| n != FULL).collect();
    let switched = sim.run_until_pred(sim.now() + 500 * MS, |sim| {
        live.iter().all(|&n| sim.node(n).in_fall_back())
    });
    let lost: Vec<_> = live.iter().map(|&n| sim.node(n).lost()).collect();
    assert!(
        switched,
        "seed {seed}: the live nodes did not fall back after node {FULL} failed in {when:?}: {lost:?} (replay: PHASEDB_SIM_SEED={seed})"
    );
    let at_switch = committed(&sim, &live);
    sim.run_until(sim.now() + 60 * MS);
    let later = committed(&sim, &live);
    assert!(
        later.0 > at_switch.0,
        "seed {seed}: nothing committed under the fall-back ({at_switch:?}, then {later:?})"
    );
    if cross > 0.0 {
        assert!(
            later.1 > at_switch.1,
            "seed {seed}: no cross-partition transaction committed under the fall-back"
        );
    }
    for &n in &live {
        sim.node_mut(n).set_local_load(false);
    }
    let stopped: Vec<u64> = live.iter().map(|&n| sim.node(n).stats().phase).collect();
    let quiet = sim.run_until_pred(sim.now() + 10_000 * MS, |sim| {
        live.iter().zip(&stopped).all(|(&n, &p)| {
            let s = sim.node(n).stats();
            s.idle && s.phase >= p + 2
        })
    });
    assert!(
        quiet,
        "seed {seed}: the live nodes did not quiesce under the fall-back (replay: PHASEDB_SIM_SEED={seed})"
    );
    let failures = sim.node(live[0]).failures().to_vec();
    assert_eq!(failures.len(), 1, "seed {seed}: {failures:?}");
    assert_eq!(failures[0].0, FULL, "seed {seed}");
    let phase = failures[0].1;
    for &n in &live {
        let node = sim.node(n);
        assert_eq!(node.failures(), &failures[..], "seed {seed}: node {n}");
        assert!(node.lost().is_none(), "seed {seed}: node {n}");
        assert_eq!(
            node.layout().coordinator(),
            live[0],
            "seed {seed}: node {n}"
        );
        let f = node
            .stats()
            .fall_back
            .unwrap_or_else(|| panic!("seed {seed}: node {n}'s counters do not say it fell back"));
        assert_eq!(f.view, 1, "seed {seed}: node {n}");
        assert!(
            f.phase > phase,
            "seed {seed}: node {n} fell back at phase {} before the interrupted phase {phase} ended",
            f.phase
        );
    }
    FellBack { sim, live, phase }
}

/// Live replicas of each partition agree, each live node keeps the workload's invariant on what
/// it holds, and no partition is mastered on the failed node; every partition has its two live
/// copies.
fn check_replicas<W>(seed: u64, r: &FellBack<'_, W>, w: &W, dbs: &[Database<Star>])
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    let layout = r.sim.node(r.live[0]).layout().clone();
    for &n in &r.live {
        assert_eq!(r.sim.node(n).layout(), &layout, "seed {seed}: node {n}");
        w.check(&dbs[n as usize], &layout.held(n))
            .unwrap_or_else(|e| panic!("seed {seed}: node {n}: {e} (PHASEDB_SIM_SEED={seed})"));
    }
    for p in 0..layout.partitions() {
        assert_ne!(layout.primary(p), FULL, "seed {seed}");
        let on: Vec<(Addr, u64)> = layout
            .replicas(p)
            .iter()
            .map(|&n| {
                let d = r.sim.node(n).digests();
                (n, d.iter().find(|d| d.partition == p).unwrap().digest)
            })
            .collect();
        assert!(on.len() >= 2, "seed {seed}: partition {p} on {on:?}");
        assert!(
            on.iter().all(|d| d.1 == on[0].1),
            "seed {seed}: the replicas of partition {p} differ under the fall-back: {on:?} (replay: PHASEDB_SIM_SEED={seed})"
        );
    }
}

/// The epoch (phase, or Dist-OCC group) of a version.
fn phase_of(version: u64) -> u64 {
    (version & ((1 << 60) - 1)) >> 32
}

/// Accounts: the history (the failed node's without the interrupted phase) is serializable and
/// holds every acknowledged transaction, and every live replica of every partition counts
/// exactly the history's transfers of that partition.
fn check_history(seed: u64, r: &mut FellBack<'_, Accounts>, w: &Accounts, dbs: &[Database<Star>]) {
    let layout = r.sim.node(r.live[0]).layout().clone();
    let acknowledged: u64 = (0..layout.nodes())
        .map(|n| r.sim.node(n).stats().committed())
        .sum();
    let mut parts = Vec::new();
    for n in 0..layout.nodes() {
        let mut h = r.sim.node_mut(n).take_history();
        if n == FULL {
            let phase = r.phase;
            h.txns.retain(|t| {
                t.writes
                    .iter()
                    .map(|e| e.version)
                    .chain(t.reads.iter().map(|e| e.version))
                    .all(|v| phase_of(v) < phase)
            });
        }
        parts.push(h);
    }
    let history = History::merge(parts);
    let mut counted = 0;
    for p in 0..layout.partitions() {
        let on: Vec<(Addr, i64)> = layout
            .replicas(p)
            .iter()
            .map(|&n| (n, w.counted(&dbs[n as usize], &[p])))
            .collect();
        assert!(
            on.iter().all(|c| c.1 == on[0].1),
            "seed {seed}: the replicas of partition {p} count different transfers: {on:?}"
        );
        counted += on[0].1;
    }
    assert_eq!(
        counted,
        history.len() as i64,
        "seed {seed}: the live replicas count {counted} transfers, the history {} (PHASEDB_SIM_SEED={seed})",
        history.len()
    );
    assert!(
        history.len() as u64 >= acknowledged,
        "seed {seed}: {acknowledged} acknowledged, {} present",
        history.len()
    );
    if let Err(a) = check_serializable(&history) {
        panic!("seed {seed}: not serializable: {a} (replay: PHASEDB_SIM_SEED={seed})");
    }
}

/// Four nodes, the full replica and three partial ones, each partition on two of them.
fn accounts_under(when: When, cross: f64, replication: ReplicationSync, runs: u64) {
    let l = layout(4, 3, PARTITIONS);
    for seed in seeds(runs) {
        let mut w = Accounts::new(PARTITIONS, 50);
        let dbs: Vec<Database<Star>> = (0..l.nodes())
            .map(|n| open_database(&mut w, &l, n, true).unwrap())
            .collect();
        let mut r = fall_back_run(seed, &l, &w, &dbs, when, cross, replication);
        check_replicas(seed, &r, &w, &dbs);
        check_history(seed, &mut r, &w, &dbs);
    }
}

#[test]
fn the_full_replica_crashed_in_a_partitioned_phase_falls_back_to_dist_occ() {
    accounts_under(When::Partitioned, 0.2, ReplicationSync::Async, 4);
}

#[test]
fn the_full_replica_crashed_in_a_single_master_phase_falls_back_to_dist_occ() {
    accounts_under(When::SingleMaster, 0.5, ReplicationSync::Async, 4);
}

#[test]
fn the_full_replica_crashed_during_a_replication_fence_falls_back_to_dist_occ() {
    accounts_under(When::Fence, 0.2, ReplicationSync::Async, 4);
}

#[test]
fn the_fall_back_keeps_synchronous_replication_when_the_cluster_had_it() {
    for when in [When::Partitioned, When::SingleMaster, When::Fence] {
        accounts_under(when, 0.3, ReplicationSync::Sync, 1);
    }
}

#[test]
fn tpcc_keeps_its_consistency_conditions_through_the_fall_back() {
    // Two seeds (loading TPC-C three times per seed is most of the time): a crash in a
    // single-master phase, then during a fence.
    for seed in seeds(2) {
        let mut w = TpccProcedures::new(TpccProceduresConfig {
            warehouses: 2,
            mix: ProceduresMix::NewOrderPayment,
            fine: false,
        });
        let l = layout(3, 3, 2);
        let dbs: Vec<Database<Star>> = (0..3)
            .map(|n| open_database(&mut w, &l, n, false).unwrap())
            .collect();
        let when = [When::Partitioned, When::SingleMaster, When::Fence][seed as usize % 3];
        let r = fall_back_run(seed, &l, &w, &dbs, when, 0.1, ReplicationSync::Async);
        check_replicas(seed, &r, &w, &dbs);
    }
}

#[test]
fn a_partition_left_with_no_live_copy_stops_the_cluster_and_is_named() {
    let seed = seeds(1)[0];
    // Three nodes, two copies of each partition: the full replica and one partial replica.
    let l = layout(3, 2, PARTITIONS);
    let mut w = Accounts::new(PARTITIONS, 50);
    let dbs: Vec<Database<Star>> = (0..3)
        .map(|n| open_database(&mut w, &l, n, false).unwrap())
        .collect();
    let mut sim = Simulator::new(SimConfig {
        tick: MS / 2,
        ..SimConfig::new(seed)
    });
    for n in 0..3 {
        let s = settings(seed, 0.2, ReplicationSync::Async);
        let node = StarNode::new(n, l.clone(), s, &dbs[n as usize], &w);
        sim.add(n, node.unwrap());
    }
    sim.run_until(30 * MS);
    // Node 1's partitions fail over to the full replica, their last live copy.
    let lost_copies = l.mastered(1);
    sim.crash(1);
    let failed_over = sim.run_until_pred(sim.now() + 500 * MS, |sim| {
        [0, 2].iter().all(|&n| sim.node(n).failures().len() == 1)
    });
    assert!(
        failed_over,
        "seed {seed}: node 1's failure was not announced"
    );
    sim.run_until(sim.now() + 20 * MS);
    sim.crash(FULL);
    sim.run_until(sim.now() + 100 * MS);
    let lost = sim
        .node(2)
        .lost()
        .unwrap_or_else(|| panic!("seed {seed}: node 2 goes on"))
        .to_string();
    let named = format!("partition {} has no live copy", lost_copies[0]);
    assert!(lost.contains(&named), "seed {seed}: {lost}");
    assert!(!sim.node(2).in_fall_back(), "seed {seed}");
    let phase = sim.node(2).phase();
    let committed = sim.node(2).stats().committed();
    sim.run_until(sim.now() + 20 * MS);
    assert_eq!(
        sim.node(2).phase(),
        phase,
        "seed {seed}: node 2 still switches phases"
    );
    assert_eq!(
        sim.node(2).stats().committed(),
        committed,
        "seed {seed}: node 2 still commits"
    );
}

#[test]
fn requests_from_clients_are_served_under_the_fall_back() {
    for seed in seeds(2) {
        let l = layout(4, 3, PARTITIONS);
        let mut w = Accounts::new(PARTITIONS, 50);
        let dbs: Vec<Database<Star>> = (0..l.nodes())
            .map(|n| open_database(&mut w, &l, n, true).unwrap())
            .collect();
        let mut sim = Simulator::new(SimConfig {
            min_delay: 20_000,
            max_delay: 400_000,
            tick: MS / 2,
            ..SimConfig::new(seed)
        });
        let s = StarSettings {
            local_load: false,
            ..settings(seed, 0.0, ReplicationSync::Async)
        };
        for n in 0..l.nodes() {
            let node = StarNode::new(n, l.clone(), s.clone(), &dbs[n as usize], &w).unwrap();
            sim.add(n, Actor::Star(Box::new(node)));
        }
        sim.run_until(30 * MS);
        sim.crash(FULL);
        let live: Vec<Addr> = (1..l.nodes()).collect();
        let switched = sim.run_until_pred(sim.now() + 500 * MS, |sim| {
            live.iter().all(|&n| sim.node(n).star().in_fall_back())
        });
        assert!(switched, "seed {seed}: the live nodes did not fall back");
        // Every live node gets requests, for its partitions and others', half of them
        // cross-partition.
        let clients: Vec<Addr> = live
            .iter()
            .map(|&n| {
                let addr = CLIENT_ADDR_BASE + n;
                let mut c = Client::transfers(&w, seed * 100 + n as u64, 0.5, 60);
                c.target = Some(n);
                sim.add(addr, Actor::Client(Box::new(c)));
                addr
            })
            .collect();
        let done = sim.run_until_pred(sim.now() + 5_000 * MS, |sim| {
            clients.iter().all(|&c| sim.node(c).client().done())
        });
        assert!(
            done,
            "seed {seed}: requests went unanswered under the fall-back (replay: PHASEDB_SIM_SEED={seed})"
        );
        let first = sim.node(1).star().stats().fall_back.unwrap().phase;
        let mut committed = 0;
        for &c in &clients {
            let client = sim.node(c).client();
            assert_eq!(client.replies.len(), client.total(), "seed {seed}");
            for (rid, _, outcome) in &client.replies {
                match outcome {
                    Outcome::Committed { phase } => {
                        assert!(
                            *phase >= first,
                            "seed {seed}: request {rid} in phase {phase}"
                        );
                        committed += 1;
                    }
                    Outcome::Aborted { .. } => {}
                    other => panic!("seed {seed}: request {rid} got {other:?}"),
                }
            }
        }
        assert!(committed > 0, "seed {seed}: no request committed");
        for &n in &live {
            let node = sim.node(n).star();
            assert!(
                node.stats().requests.forwarded > 0,
                "seed {seed}: node {n} forwarded nothing"
            );
        }
        let history = History::merge(
            (0..l.nodes())
                .map(|n| sim.node_mut(n).star_mut().take_history())
                .collect(),
        );
        assert!(history.len() >= committed, "seed {seed}");
        if let Err(a) = check_serializable(&history) {
            panic!("seed {seed}: not serializable: {a} (replay: PHASEDB_SIM_SEED={seed})");
        }
    }
}
