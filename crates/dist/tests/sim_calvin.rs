//! Calvin under the deterministic simulator: TPC-C's NewOrder and Payment, half of them
//! cross-partition, drawn by the sequencer in 10 ms batches, with random delays that reorder
//! messages (batches, remote-read notices, completions). After every run each partition's copy is
//! the same in every replica group and equal to a serial run of the sequencer's global order on a
//! fresh database (determinism), every node keeps TPC-C's consistency conditions on the partitions
//! it owns, and the history of the one-node group is serializable. A failing run prints its seed
//! (replay one with `PHASEDB_SIM_SEED=<seed>`).

use phasedb_check::check_serializable;
use phasedb_dist::calvin::{CalvinNode, CalvinSettings, Groups, Lock, open_database};
use phasedb_txn::{Database, Occ, PartitionId, Procedures, TableId};
use phasedb_workloads::tpcc::{ProceduresMix, TpccProcedures, TpccProceduresConfig, TpccRequest};

#[path = "calvin/harness.rs"]
mod harness;

use harness::{Sets, run_calvin};

const WAREHOUSES: u32 = 2;

fn seeds(n: u64) -> Vec<u64> {
    match std::env::var("PHASEDB_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("PHASEDB_SIM_SEED is a number")],
        Err(_) => (1..=n).collect(),
    }
}

fn tpcc_locks(w: &TpccProcedures, req: &TpccRequest, out: &mut Vec<Lock>) {
    w.lock_set(req, out)
}

fn tpcc_reads(w: &TpccProcedures, req: &TpccRequest, out: &mut Vec<(TableId, u64)>) -> bool {
    w.read_rows(req, out)
}

fn workload() -> TpccProcedures {
    TpccProcedures::new(TpccProceduresConfig {
        warehouses: WAREHOUSES,
        mix: ProceduresMix::NewOrderPayment,
        fine: false,
    })
}

/// Runs `groups` for `run_ms` of load and until every node ran every batch; returns each node's
/// partition digests, the global order and node 0's history.
fn run_groups(seed: u64, sizes: &[u32], w: &TpccProcedures, dbs: &[Database<Occ>]) -> Outcome {
    let groups = Groups::new(sizes, WAREHOUSES).unwrap();
    let sets = Sets {
        locks: tpcc_locks,
        reads: tpcc_reads,
    };
    let mut sim = run_calvin(seed, &groups, 0.5, 80, dbs, w, sets);
    let mut digests = vec![None; WAREHOUSES as usize];
    for n in 0..groups.nodes() {
        let node = sim.node(n);
        node.check()
            .unwrap_or_else(|e| panic!("seed {seed}: {sizes:?} node {n}: {e}"));
        for d in node.digests() {
            let first = *digests[d.partition as usize].get_or_insert(d.digest);
            assert_eq!(
                first, d.digest,
                "seed {seed}: {sizes:?}: replica groups differ on partition {} (replay: PHASEDB_SIM_SEED={seed})",
                d.partition
            );
        }
    }
    let committed: Vec<u64> = (0..groups.groups())
        .map(|g| {
            groups
                .members(g)
                .map(|n| sim.node(n).stats().committed())
                .sum()
        })
        .collect();
    assert!(
        committed.iter().all(|&c| c == committed[0]),
        "{committed:?}"
    );
    let history = sim.node_mut(0).take_history();
    let messages = sim.stats().sent;
    Outcome {
        digests: digests
            .into_iter()
            .map(|d| d.expect("every partition has an owner"))
            .collect(),
        order: sim.node(0).order().to_vec(),
        committed: committed[0],
        messages,
        history_len: history.len(),
        serializable: check_serializable(&history)
            .map(|_| ())
            .map_err(|a| format!("{a:?}")),
    }
}

struct Outcome {
    digests: Vec<u64>,
    order: Vec<Vec<u8>>,
    committed: u64,
    messages: u64,
    history_len: usize,
    serializable: Result<(), String>,
}

/// The digests of a fresh database after running `order` one transaction at a time.
fn serial_digests(order: &[Vec<u8>]) -> Vec<u64> {
    let mut w = workload();
    let db = open_database(&mut w, false);
    let mut worker = db.worker();
    for body in order {
        let req: TpccRequest = postcard::from_bytes(body).unwrap();
        let _ = w.run(&req, &mut worker);
    }
    drop(worker);
    let one = Groups::new(&[1], WAREHOUSES).unwrap();
    let node = CalvinNode::new(
        0,
        one,
        CalvinSettings::default(),
        &db,
        &w,
        tpcc_locks,
        tpcc_reads,
    )
    .unwrap();
    let mut d: Vec<(PartitionId, u64)> = node
        .digests()
        .iter()
        .map(|d| (d.partition, d.digest))
        .collect();
    d.sort();
    d.into_iter().map(|d| d.1).collect()
}

#[test]
fn every_replica_group_ends_as_a_serial_run_of_the_global_order() {
    for seed in seeds(2) {
        for sizes in [&[1, 1][..], &[2][..]] {
            let mut w = workload();
            let dbs: Vec<Database<Occ>> = (0..sizes.iter().sum::<u32>())
                .map(|n| open_database(&mut w, n == 0))
                .collect();
            let out = run_groups(seed, sizes, &w, &dbs);
            assert!(
                out.order.len() > 200,
                "seed {seed}: only {} ordered",
                out.order.len()
            );
            assert!(
                out.committed > 100,
                "seed {seed}: {} committed",
                out.committed
            );
            assert_eq!(
                out.digests,
                serial_digests(&out.order),
                "seed {seed}: {sizes:?} differs from the serial run of its order (replay: PHASEDB_SIM_SEED={seed})"
            );
            if let Err(a) = &out.serializable {
                panic!("seed {seed}: {sizes:?}: node 0's history is not serializable: {a}");
            }
            assert!(
                out.history_len as u64 >= out.committed.min(1),
                "a history was recorded"
            );
        }
    }
}

/// The same seed orders the same number of requests, commits as many and sends as many messages
/// (digests are not compared: TPC-C's inputs carry the wall-clock date they were drawn at).
#[test]
fn a_seed_replays_the_same_run() {
    let trace = || {
        let mut w = workload();
        let dbs: Vec<Database<Occ>> = (0..2).map(|_| open_database(&mut w, false)).collect();
        let out = run_groups(5, &[2], &w, &dbs);
        (out.order.len(), out.committed, out.messages)
    };
    assert_eq!(trace(), trace());
}
