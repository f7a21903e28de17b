//! A P-DUR replica that falls behind twice while its own clients wait (the `pdur_kill` hang):
//! the other replicas stop reaching replica 2, whose proposals still reach them, so its clients'
//! transactions are delivered and decided there while replica 2 sees nothing; the groups compact
//! their logs, and when the network heals replica 2 is restored from snapshots that already hold
//! those decisions. It never delivers them, so only the copy its retry proposes again tells it
//! the outcome ([`phasedb_dist::pdur::Answer`]): every client must still get its outcome, the
//! replicas end equal, every replica's recorded history is atomic (the restored one's counting the
//! decisions its snapshots covered) and agrees with the others', and the history stays
//! serializable (the merge of every replica's recorder, and each never-restored replica's own). A
//! failing run prints its seed (replay with `PHASEDB_SIM_SEED=<seed>`). A second test restores
//! the replica from snapshots sent in small chunks, some of them lost.

#[path = "sim_pdur/history.rs"]
mod history;
use history::check_history;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use phasedb_dist::broadcast::{BroadcastConfig, GroupMsg};
use phasedb_dist::pdur::node::{PdurConfig, PdurMsg, PdurNode};
use phasedb_dist::pdur::workload::micro::{MicroConfig, MicroType};
use phasedb_net::Addr;
use phasedb_net::sim::{SimConfig, Simulator};

const MS: u64 = 1_000_000;
const REPLICAS: Addr = 3;
const PARTITIONS: usize = 2;
const BEHIND: Addr = 2;

fn seeds() -> Vec<u64> {
    match std::env::var("PHASEDB_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("PHASEDB_SIM_SEED is a number")],
        Err(_) => vec![1, 2, 3],
    }
}

/// Groups that snapshot every few entries and keep a short log, so a replica cut off for a
/// while falls behind the compacted prefix.
/// Stops the clients and runs until every replica decided everything it waits for and every
/// group's members delivered alike with nothing in flight; false if that takes 10 simulated s.
fn quiesce(sim: &mut Simulator<PdurNode>) -> bool {
    for n in sim.addrs() {
        sim.node_mut(n).set_limit(0);
    }
    let deadline = sim.now() + 10_000 * MS;
    sim.run_until_pred(deadline, |s| {
        (0..REPLICAS).all(|n| s.node(n).undecided() == 0)
            && (0..PARTITIONS as u32).all(|g| {
                (0..REPLICAS).all(|n| {
                    let m = s.node(n).broadcast().group(g).expect("member");
                    m.delivered() == s.node(0).broadcast().group(g).unwrap().delivered()
                        && m.pending_bytes() == 0
                        && m.inflight_batches() == 0
                })
            })
    })
}

fn config(seed: u64) -> PdurConfig {
    PdurConfig {
        replicas: (0..REPLICAS).collect(),
        micro: MicroConfig {
            ty: MicroType::I,
            items: 256,
            partitions: PARTITIONS,
            cross_partition: 0.3,
        },
        clients: 4,
        bcast: BroadcastConfig {
            tick_ns: 2 * MS,
            election_ticks: 10,
            heartbeat_ticks: 2,
            batch_bytes: 4 << 10,
            proposal_timeout_ns: 200 * MS,
            snapshot_entries: 16,
            retained_entries: 4,
            seed,
            ..BroadcastConfig::default()
        },
        retry_ns: 300 * MS,
        rebroadcast_ns: 600 * MS,
        load_until_ns: u64::MAX,
        record_history: true,
        seed,
    }
}

#[test]
fn a_replica_behind_twice_still_answers_its_clients_whose_transactions_a_snapshot_covers() {
    for seed in seeds() {
        let mut sim = Simulator::new(SimConfig::new(seed));
        for n in 0..REPLICAS {
            sim.add(n, PdurNode::new(n, config(seed)).expect("valid config"));
        }
        sim.run_until(300 * MS);
        let mut waiting_while_behind = Vec::new();
        for round in 0..2u64 {
            let start = sim.now();
            sim.set_drop_filter(Some(Box::new(|from, to, _| to == BEHIND && from != BEHIND)));
            sim.run_until(start + 400 * MS);
            waiting_while_behind.push(sim.node(BEHIND).undecided());
            sim.set_drop_filter(None);
            sim.run_until(start + 1_000 * MS);
            assert!(
                round > 0 || sim.node(BEHIND).stats().restores >= PARTITIONS as u64,
                "seed {seed}: replica {BEHIND} was not restored after falling behind once: {:?} (replay: PHASEDB_SIM_SEED={seed})",
                sim.node(BEHIND).stats()
            );
        }
        let settled = quiesce(&mut sim);
        let behind = sim.node(BEHIND).stats();
        assert!(
            settled,
            "seed {seed}: replica {BEHIND}'s clients still wait for {} transactions: {behind:?} (replay: PHASEDB_SIM_SEED={seed})",
            sim.node(BEHIND).undecided()
        );
        assert!(
            waiting_while_behind.iter().all(|&w| w > 0),
            "seed {seed}: replica {BEHIND}'s clients were not waiting while it fell behind: {waiting_while_behind:?}"
        );
        assert!(
            behind.restores >= 2 * PARTITIONS as u64,
            "seed {seed}: replica {BEHIND} fell behind fewer than twice: {behind:?} (replay: PHASEDB_SIM_SEED={seed})"
        );
        assert!(
            behind.answered_again > 0,
            "seed {seed}: no snapshot covered a waiting client's transaction: {behind:?} (replay: PHASEDB_SIM_SEED={seed})"
        );
        for n in sim.addrs() {
            assert_eq!(
                sim.node(n).replica().digests(),
                sim.node(0).replica().digests(),
                "seed {seed}: replica {n} differs (replay: PHASEDB_SIM_SEED={seed})"
            );
            for p in 0..PARTITIONS as u16 {
                assert_eq!(
                    sim.node(n).replica().partition(p).undecided(),
                    0,
                    "seed {seed}: replica {n} partition {p} waits for votes (replay: PHASEDB_SIM_SEED={seed})"
                );
            }
        }
        // Every replica's recorded history atomic and agreeing with the others', the cluster's
        // (every replica's recorder merged) serializable, and each never-restored replica's own.
        check_history(&sim, &sim.addrs());
        eprintln!(
            "seed {seed}: replica {BEHIND} waited on {waiting_while_behind:?} transactions while behind; {behind:?}"
        );
    }
}

/// Snapshots sent in chunks of 256 bytes (a partition's image of 128 items is several KiB, so
/// each transfer is many chunks), under the simulator's reordering, with every third chunk lost
/// the first time it is sent: the replica cut off installs each partition's snapshot only once
/// every chunk arrived (raft sends the snapshot again while the follower still rejects appends),
/// ends equal to the others and the history stays serializable.
#[test]
fn a_replica_behind_is_restored_from_chunked_snapshots_despite_lost_chunks() {
    for seed in seeds() {
        let mut cfg = config(seed);
        cfg.bcast.snapshot_chunk_bytes = 256;
        let mut sim = Simulator::new(SimConfig::new(seed));
        for n in 0..REPLICAS {
            sim.add(n, PdurNode::new(n, cfg.clone()).expect("valid config"));
        }
        sim.run_until(300 * MS);
        sim.set_drop_filter(Some(Box::new(|from, to, _| to == BEHIND && from != BEHIND)));
        sim.run_until(700 * MS);
        let lost = Arc::new(AtomicU64::new(0));
        let counted = lost.clone();
        let mut seen = HashSet::new();
        sim.set_drop_filter(Some(Box::new(move |_, to, m: &PdurMsg| {
            let PdurMsg::Bcast(GroupMsg::Chunk(c)) = m else {
                return false;
            };
            let first = seen.insert((to, c.group, c.checksum, c.seq));
            let drop = first && c.seq % 3 == 1;
            if drop {
                counted.fetch_add(1, Ordering::Relaxed);
            }
            drop
        })));
        sim.run_until(1_700 * MS);
        let settled = quiesce(&mut sim);
        assert!(
            settled,
            "seed {seed}: did not quiesce (replay: PHASEDB_SIM_SEED={seed})"
        );
        let b = sim.node(BEHIND).broadcast().stats();
        let sent: u64 = sim
            .addrs()
            .iter()
            .map(|&n| sim.node(n).broadcast().stats().snapshot_chunks_sent)
            .sum();
        let lost = lost.load(Ordering::Relaxed);
        assert!(
            b.snapshots_assembled >= PARTITIONS as u64
                && b.snapshots_installed >= PARTITIONS as u64,
            "seed {seed}: replica {BEHIND} installed no chunked snapshot of each partition: {b:?} (replay: PHASEDB_SIM_SEED={seed})"
        );
        assert!(
            sent > 2 * b.snapshots_assembled && lost > 0,
            "seed {seed}: snapshots were not split into several chunks or none was lost: {sent} sent, {lost} lost, {b:?}"
        );
        assert_eq!(b.snapshot_chunks_refused, 0, "seed {seed}: {b:?}");
        for n in sim.addrs() {
            assert_eq!(
                sim.node(n).replica().digests(),
                sim.node(0).replica().digests(),
                "seed {seed}: replica {n} differs (replay: PHASEDB_SIM_SEED={seed})"
            );
            assert_eq!(sim.node(n).stats().refused_restores, 0, "seed {seed}");
        }
        check_history(&sim, &sim.addrs());
        eprintln!("seed {seed}: {sent} chunks sent, {lost} lost; replica {BEHIND}: {b:?}");
    }
}
