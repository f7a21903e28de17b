//! STAR under node failures in the deterministic simulator (§7.1, §7.2): a partial replica is
//! crashed (fail-stop) in a partitioned phase, in a single-master phase or during a replication
//! fence, for many seeds. The coordinator must notice it through missed heartbeats, the live
//! replicas must take back what it replicated in the interrupted phase, its partitions must be
//! re-mastered on the full replica, and the phases must go on. After each run: the replicas of
//! each partition that are alive agree; every node keeps the workload's invariant (TPC-C's
//! consistency conditions for TPC-C); every acknowledged transaction is on the full replica and
//! nothing the failed node ran in the interrupted phase is; the history is serializable. A failing
//! run prints its seed (replay one with `PHASEDB_SIM_SEED=<seed>`; sweep more with
//! `PHASEDB_SIM_SEEDS=<count>`).

#[path = "sim_star/accounts.rs"]
mod accounts;
#[path = "sim_star/crash.rs"]
mod crash;

use std::collections::BTreeMap;

use accounts::Accounts;
use crash::{When, start_and_crash};
use phasedb_check::{History, check_serializable};
use phasedb_dist::star::{Layout, StarNode, StarSettings, open_database};
use phasedb_net::sim::Simulator;
use phasedb_net::{Addr, StarConfig};
use phasedb_txn::{Database, Procedures, Star};
use phasedb_workloads::tpcc::{ProceduresMix, TpccProcedures, TpccProceduresConfig};
use serde::Serialize;
use serde::de::DeserializeOwned;

const MS: u64 = 1_000_000;
const PARTITIONS: u32 = 4;

/// The seeds a test runs: `n` by default; `PHASEDB_SIM_SEED=<seed>` replays one, and
/// `PHASEDB_SIM_SEEDS=<count>` sweeps seeds `1..=count` (issue 35's hundred crashes:
/// `PHASEDB_SIM_SEEDS=34 cargo test --release -p phasedb-dist --test sim_star_failover`).
fn seeds(n: u64) -> Vec<u64> {
    if let Ok(s) = std::env::var("PHASEDB_SIM_SEED") {
        return vec![s.parse().expect("PHASEDB_SIM_SEED is a number")];
    }
    let count = std::env::var("PHASEDB_SIM_SEEDS")
        .map(|s| s.parse().expect("PHASEDB_SIM_SEEDS is a number"))
        .unwrap_or(n);
    (1..=count).collect()
}

/// `nodes` nodes, `full` full replicas, `replicas` copies of each of `partitions`, 5 ms
/// iterations.
fn layout(nodes: u32, full: u32, replicas: u32, partitions: u32) -> Layout {
    let star = StarConfig {
        iteration_ms: 5.0,
        full_replicas: full,
        replicas_per_partition: replicas,
        ..StarConfig::new(partitions)
    };
    Layout::new(nodes, &star).unwrap()
}

struct Crashed<'w, W>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    sim: Simulator<StarNode<'w, W>>,
    victim: Addr,
    /// The live full replica that coordinates after the failure.
    full: Addr,
    /// The phase the failure interrupted.
    phase: u64,
}

/// Runs `layout` under the nodes' own load, crashes `victim` at a moment of kind `when`, runs on,
/// stops the load and waits until the live nodes are idle.
fn crash_run<'w, W>(
    seed: u64,
    layout: &Layout,
    w: &'w W,
    dbs: &'w [Database<Star>],
    victim: Addr,
    when: When,
    cross: f64,
) -> Crashed<'w, W>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    let settings = StarSettings {
        cross_partition: cross,
        local_load: true,
        slice_txns: 8,
        seed,
        heartbeat_ns: 2 * MS,
        failure_timeout_ns: 20 * MS,
        ..StarSettings::default()
    };
    let mut sim = start_and_crash(seed, layout, &settings, w, dbs, victim, when);
    sim.run_until(sim.now() + 150 * MS);
    let live: Vec<Addr> = (0..layout.nodes()).filter(|&n| n != victim).collect();
    for &n in &live {
        sim.node_mut(n).set_local_load(false);
    }
    let full = (victim == 0) as Addr;
    let stopped_at = sim.node(full).phase();
    let quiet = sim.run_until_pred(sim.now() + 10_000 * MS, |sim| {
        live.iter().all(|&n| {
            let node = sim.node(n);
            node.is_idle() && node.phase() >= stopped_at + 2
        })
    });
    assert!(
        quiet,
        "seed {seed}: the live nodes did not quiesce after node {victim} failed in {when:?} (replay: PHASEDB_SIM_SEED={seed})"
    );
    let failures = sim.node(full).failures().to_vec();
    assert_eq!(
        failures.len(),
        1,
        "seed {seed}: the coordinator declared {failures:?} failed, not node {victim}"
    );
    assert_eq!(failures[0].0, victim, "seed {seed}");
    let phase = failures[0].1;
    assert!(
        stopped_at >= phase + 10,
        "seed {seed}: only {} phases ran after node {victim} failed in phase {phase}",
        stopped_at.saturating_sub(phase)
    );
    for &n in &live {
        assert_eq!(
            sim.node(n).failures(),
            &failures[..],
            "seed {seed}: node {n}"
        );
        assert!(sim.node(n).lost().is_none(), "seed {seed}");
        assert_eq!(sim.node(n).layout().coordinator(), full, "seed {seed}");
    }
    Crashed {
        sim,
        victim,
        full,
        phase,
    }
}

/// Live replicas of each partition agree, and each live node keeps the workload's invariant on
/// the partitions it holds now; the failed node's partitions are mastered by a live node.
fn check_replicas<W>(seed: u64, c: &Crashed<'_, W>, w: &W, dbs: &[Database<Star>])
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    let layout = c.sim.node(c.full).layout().clone();
    let mut digests: BTreeMap<u32, Vec<(Addr, u64)>> = BTreeMap::new();
    for n in (0..layout.nodes()).filter(|&n| n != c.victim) {
        assert_eq!(c.sim.node(n).layout(), &layout, "seed {seed}: node {n}");
        for d in c.sim.node(n).digests() {
            digests.entry(d.partition).or_default().push((n, d.digest));
        }
        w.check(&dbs[n as usize], &layout.held(n))
            .unwrap_or_else(|e| panic!("seed {seed}: node {n}: {e} (PHASEDB_SIM_SEED={seed})"));
    }
    for p in 0..layout.partitions() {
        assert_ne!(layout.primary(p), c.victim, "seed {seed}");
        let on = &digests[&p];
        assert_eq!(on.len(), layout.replicas(p).len(), "seed {seed}");
        assert!(
            on.iter().all(|d| d.1 == on[0].1),
            "seed {seed}: live replicas of partition {p} differ after node {} failed: {on:?} (replay: PHASEDB_SIM_SEED={seed})",
            c.victim
        );
    }
}

/// The epoch (phase) of a version.
fn phase_of(version: u64) -> u64 {
    (version & ((1 << 60) - 1)) >> 32
}

/// Accounts: the history (the failed node's without the interrupted phase) is serializable, holds
/// every acknowledged transaction, and the full replica's vaults count exactly its transactions.
fn check_history(seed: u64, c: &mut Crashed<'_, Accounts>, w: &Accounts, dbs: &[Database<Star>]) {
    let nodes = c.sim.node(c.full).layout().nodes();
    let acknowledged: u64 = (0..nodes).map(|n| c.sim.node(n).stats().committed()).sum();
    let mut parts = Vec::new();
    for n in 0..nodes {
        let mut h = c.sim.node_mut(n).take_history();
        if n == c.victim {
            let phase = c.phase;
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
    let all: Vec<u32> = (0..PARTITIONS).collect();
    let counted = w.counted(&dbs[c.full as usize], &all);
    assert_eq!(
        counted,
        history.len() as i64,
        "seed {seed}: the full replica counts {counted} transfers, the history {} (PHASEDB_SIM_SEED={seed})",
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

/// Runs `runs` seeds, crashing a partial replica; returns the rows the live nodes put back.
fn accounts_under(when: When, nodes: u32, replicas: u32, cross: f64, runs: u64) -> u64 {
    let victim = |seed: u64| 1 + (seed as u32 % (nodes - 1));
    crashes(
        when,
        layout(nodes, 1, replicas, PARTITIONS),
        victim,
        cross,
        runs,
    )
}

/// Runs `runs` seeds on `l`, crashing `victim(seed)`; returns the rows the live nodes put back.
fn crashes(when: When, l: Layout, victim: impl Fn(u64) -> Addr, cross: f64, runs: u64) -> u64 {
    let nodes = l.nodes();
    let mut taken_back = 0;
    for seed in seeds(runs) {
        let mut w = Accounts::new(PARTITIONS, 50);
        let dbs: Vec<Database<Star>> = (0..nodes)
            .map(|n| open_database(&mut w, &l, n, true).unwrap())
            .collect();
        let victim = victim(seed);
        let mut c = crash_run(seed, &l, &w, &dbs, victim, when, cross);
        check_replicas(seed, &c, &w, &dbs);
        check_history(seed, &mut c, &w, &dbs);
        taken_back += (0..nodes)
            .filter(|&n| n != victim)
            .map(|n| c.sim.node(n).taken_back())
            .sum::<u64>();
    }
    taken_back
}

#[test]
fn a_partial_replica_crashed_in_a_partitioned_phase_is_failed_over() {
    let taken_back = accounts_under(When::Partitioned, 3, 2, 0.2, 12);
    assert!(taken_back > 0, "no crash interrupted a replication stream");
}

#[test]
fn a_partial_replica_crashed_in_a_single_master_phase_is_failed_over() {
    accounts_under(When::SingleMaster, 3, 2, 0.5, 12);
}

#[test]
fn a_partial_replica_crashed_during_a_replication_fence_is_failed_over() {
    accounts_under(When::Fence, 3, 2, 0.2, 12);
}

#[test]
fn with_three_copies_the_surviving_secondaries_take_back_the_same_writes() {
    let taken_back: u64 = [When::Partitioned, When::Fence]
        .into_iter()
        .map(|when| accounts_under(when, 4, 3, 0.1, 8))
        .sum();
    assert!(taken_back > 0, "no crash interrupted a replication stream");
}

#[test]
fn tpcc_keeps_its_consistency_conditions_through_a_partial_replica_crash() {
    for seed in seeds(2) {
        let mut w = TpccProcedures::new(TpccProceduresConfig {
            warehouses: 2,
            mix: ProceduresMix::NewOrderPayment,
            fine: false,
        });
        let l = layout(3, 1, 2, 2);
        let dbs: Vec<Database<Star>> = (0..3)
            .map(|n| open_database(&mut w, &l, n, false).unwrap())
            .collect();
        let when = [When::Partitioned, When::Fence][seed as usize % 2];
        let c = crash_run(seed, &l, &w, &dbs, 1 + seed as u32 % 2, when, 0.1);
        check_replicas(seed, &c, &w, &dbs);
    }
}

#[test]
fn a_crashed_coordinator_is_replaced_by_the_next_full_replica() {
    let l = layout(4, 2, 3, PARTITIONS);
    let taken_back: u64 = [When::Partitioned, When::SingleMaster, When::Fence]
        .into_iter()
        .map(|when| crashes(when, l.clone(), |_| 0, 0.3, 6))
        .sum();
    assert!(
        taken_back > 0,
        "no crash interrupted the coordinator's stream"
    );
}
