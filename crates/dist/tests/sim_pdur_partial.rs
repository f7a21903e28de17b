//! The threaded replica node of `phasedb node` ([`ReplicaNode`]) under the simulator's network
//! and clock (its partitions' workers are real threads): a cross-partition request that reached
//! only some of the groups it names — its client's replica died between its proposals, or while
//! leading a group that had not replicated it yet, which is how `pdur_kill`'s survivors hung —
//! is proposed to the missing groups and decided, so the partitions that delivered it do not
//! wait for votes forever. A failing run prints its seed (replay with `PHASEDB_SIM_SEED=<seed>`).

use std::time::{Duration, Instant};

use phasedb_dist::pdur::serve::{
    PARTIAL_NS, ReplicaNode, ServeMsg, broadcast_config, start_replica,
};
use phasedb_dist::pdur::{CertRequest, TxnId, partition_of};
use phasedb_net::PdurTable;
use phasedb_net::sim::{SimConfig, Simulator};

const MS: u64 = 1_000_000;

fn seeds(n: u64) -> Vec<u64> {
    match std::env::var("PHASEDB_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("PHASEDB_SIM_SEED is a number")],
        Err(_) => (1..=n).collect(),
    }
}

/// A write-only request of a client of another replica (origin 7) over partitions 0 and 1.
fn cross_request(seq: u64) -> CertRequest {
    let key_of = |p: u16| (10_000u64..).find(|&k| partition_of(k, 2) == p).unwrap();
    CertRequest {
        id: TxnId { origin: 7, seq },
        snapshots: vec![(0, 1), (1, 1)],
        reads: vec![],
        writes: vec![(key_of(0), vec![1; 4]), (key_of(1), vec![2; 4])],
    }
}

/// One replica node of a one-node cluster (`table`'s partitions, no load) under the simulator
/// after its groups elected their leader, with the receiver of its decisions.
fn node(
    table: &PdurTable,
    seed: u64,
) -> (
    Simulator<ReplicaNode>,
    std::sync::mpsc::Receiver<phasedb_dist::pdur::Answer>,
) {
    let (tx, _proposals) = tokio::sync::mpsc::unbounded_channel();
    let mut replica = start_replica(table, 0, tx, false, 0).expect("a replica");
    let decisions = replica.take_decisions();
    let node = ReplicaNode::new(
        0,
        &[0],
        broadcast_config(table),
        replica,
        Duration::ZERO,
        Duration::from_secs(60),
        None,
    )
    .expect("a node")
    .rebroadcast_after(table.rebroadcast_ms * MS)
    .expect("a positive delay");
    let mut sim = Simulator::new(SimConfig::new(seed));
    sim.add(0, node);
    step(&mut sim, 400 * MS);
    (sim, decisions)
}

/// Steps `sim` until a decision comes out of `decisions` (at most 20 s of real time: the
/// certification runs on the replica's own threads).
fn decision(
    sim: &mut Simulator<ReplicaNode>,
    decisions: &std::sync::mpsc::Receiver<phasedb_dist::pdur::Answer>,
    seed: u64,
) -> phasedb_dist::pdur::Answer {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(d) = decisions.try_recv() {
            return d;
        }
        assert!(
            Instant::now() < deadline,
            "seed {seed}: the request was never decided ({} busy; replay: PHASEDB_SIM_SEED={seed})",
            sim.node(0).busy()
        );
        let next = sim.now() + 10 * MS;
        step(sim, next);
    }
}

/// Runs the simulator to `until`, a millisecond at a time, giving the workers' threads time.
fn step(sim: &mut Simulator<ReplicaNode>, until: u64) {
    while sim.now() < until {
        let next = sim.now() + MS;
        sim.run_until(next);
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// Proposes `req` to partition 0's group only, as a replica that died before the other would.
fn propose_to_partition_0(sim: &mut Simulator<ReplicaNode>, req: &CertRequest) {
    sim.with_node(0, |_, send| {
        send(0, ServeMsg::Propose(vec![0], req.encode()))
    });
}

fn table(rebroadcast_ms: u64) -> PdurTable {
    PdurTable {
        items: 256,
        local_clients: false,
        tick_us: 1_000,
        rebroadcast_ms,
        ..PdurTable::new(2)
    }
}

#[test]
fn the_cluster_files_default_rebroadcast_delay_is_the_nodes() {
    assert_eq!(PdurTable::new(2).rebroadcast_ms * MS, PARTIAL_NS);
}

#[test]
fn a_request_delivered_by_only_one_of_its_groups_is_finished() {
    for seed in seeds(2) {
        let (mut sim, decisions) = node(&table(PdurTable::new(2).rebroadcast_ms), seed);
        let req = cross_request(1);
        propose_to_partition_0(&mut sim, &req);
        step(&mut sim, 500 * MS);
        assert_eq!(
            sim.node(0).partial(),
            1,
            "seed {seed}: the request is not noted as partial"
        );
        let decided = decision(&mut sim, &decisions, seed);
        assert_eq!(decided.txn, req.id);
        assert!(
            decided.committed,
            "seed {seed}: a conflict-free request aborted: {decided:?}"
        );
        assert!(
            sim.now() >= PARTIAL_NS,
            "seed {seed}: finished before the node's grace period"
        );
        assert_eq!(sim.node(0).partial(), 0, "seed {seed}");
        assert_eq!(sim.node(0).counters().rebroadcasts, 1, "seed {seed}");
    }
}

#[test]
fn a_shorter_rebroadcast_delay_finishes_a_partial_request_sooner() {
    for seed in seeds(2) {
        let (mut short, decisions) = node(&table(100), seed);
        let (mut default, _) = node(&table(PdurTable::new(2).rebroadcast_ms), seed);
        let req = cross_request(1);
        propose_to_partition_0(&mut short, &req);
        propose_to_partition_0(&mut default, &req);
        // Delivered by partition 0's group by 450 ms; by 800 ms the 100 ms delay has passed and
        // the default 1200 ms has not (simulated time: the node's own clock).
        for sim in [&mut short, &mut default] {
            step(sim, 450 * MS);
            assert_eq!(
                sim.node(0).partial(),
                1,
                "seed {seed}: not noted as partial"
            );
            step(sim, 800 * MS);
        }
        assert_eq!(
            (
                short.node(0).counters().rebroadcasts,
                default.node(0).counters().rebroadcasts
            ),
            (1, 0),
            "seed {seed}: by 800 ms only the node with the 100 ms delay proposed the request to partition 1 (replay: PHASEDB_SIM_SEED={seed})"
        );
        let decided = decision(&mut short, &decisions, seed);
        assert_eq!(decided.txn, req.id);
        assert!(decided.committed, "seed {seed}: {decided:?}");
        assert_eq!(short.node(0).partial(), 0, "seed {seed}");
    }
}
