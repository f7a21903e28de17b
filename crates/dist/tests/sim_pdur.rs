//! P-DUR end to end under the deterministic simulator: three replica nodes, each with a
//! broadcast group per partition and its own clients running the micro-benchmark (type I, with
//! cross-partition transactions), over a network that delays and reorders messages. After the
//! load stops and the cluster quiesces, every replica holds the same state per partition, the
//! committed history is serializable, and — across a leader's crash — no decision taken anywhere
//! is lost or changed; a replica that crashes and comes back (with its stale broadcast storage,
//! or empty under a new raft id) catches up by the groups' snapshots and logs and ends equal to
//! the others. A failing run prints its seed (replay one with `PHASEDB_SIM_SEED=<seed>`).

use std::collections::{HashMap, HashSet};

#[path = "sim_pdur/history.rs"]
mod history;
use history::check_history;

use phasedb_dist::broadcast::BroadcastConfig;
use phasedb_dist::pdur::node::{PdurConfig, PdurMsg, PdurNode};
use phasedb_dist::pdur::workload::micro::{MicroConfig, MicroType};
use phasedb_net::Addr;
use phasedb_net::sim::{SimConfig, Simulator};

const MS: u64 = 1_000_000;
const REPLICAS: Addr = 3;
const PARTITIONS: usize = 2;

fn seeds(n: u64) -> Vec<u64> {
    match std::env::var("PHASEDB_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("PHASEDB_SIM_SEED is a number")],
        Err(_) => (1..=n).collect(),
    }
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

fn cluster(seed: u64) -> Simulator<PdurNode> {
    cluster_of(config(seed))
}

fn cluster_of(cfg: PdurConfig) -> Simulator<PdurNode> {
    let mut sim = Simulator::new(SimConfig::new(cfg.seed));
    for n in 0..REPLICAS {
        sim.add(n, PdurNode::new(n, cfg.clone()).expect("valid config"));
    }
    sim
}

/// Stops the clients and runs until every live replica decided its transactions and delivered
/// as much as the others in every group, with nothing left to propose.
fn quiesce(sim: &mut Simulator<PdurNode>) {
    for n in sim.addrs() {
        sim.node_mut(n).set_limit(0);
    }
    let seed = sim.seed();
    let deadline = sim.now() + 10_000 * MS;
    let settled = sim.run_until_pred(deadline, |s| {
        let up: Vec<&PdurNode> = s
            .addrs()
            .into_iter()
            .filter(|&n| s.is_up(n))
            .map(|n| s.node(n))
            .collect();
        up.iter().all(|r| r.undecided() == 0)
            && (0..PARTITIONS as u32).all(|g| {
                up.iter().all(|r| {
                    let m = r.broadcast().group(g).expect("member");
                    m.delivered() == up[0].broadcast().group(g).unwrap().delivered()
                        && m.pending_bytes() == 0
                        && m.inflight_batches() == 0
                })
            })
    });
    if !settled {
        for n in sim.addrs().into_iter().filter(|&n| sim.is_up(n)) {
            let r = sim.node(n);
            let groups: Vec<_> = (0..PARTITIONS as u32)
                .map(|g| {
                    let m = r.broadcast().group(g).unwrap();
                    (
                        m.delivered(),
                        m.pending_bytes(),
                        m.inflight_batches(),
                        m.is_joining(),
                        m.leader(),
                        r.replica().partition(g as u16).undecided(),
                    )
                })
                .collect();
            eprintln!(
                "node {n}: {} undecided, groups (delivered, pending, inflight, joining, leader, waiting) {groups:?}, {:?}",
                r.undecided(),
                r.stats()
            );
        }
    }
    assert!(
        settled,
        "seed {seed}: the cluster did not quiesce (replay: PHASEDB_SIM_SEED={seed})"
    );
}

/// A replica's decisions: transaction, partition and the version it committed at (none: aborted).
fn decisions(r: &PdurNode) -> HashSet<(u32, u64, u16, Option<u64>)> {
    r.decisions()
        .iter()
        .map(|d| (d.txn.origin, d.txn.seq, d.partition, d.outcome.ok()))
        .collect()
}

/// The decisions of replicas `pair`, which agree: the same wherever both decided a transaction at
/// a partition, and one lacks some of the other's only if a snapshot restored it (a member that
/// fell behind the compacted log, survivor or not, never takes the decisions its snapshot
/// covered). Returns their union.
fn survivors_agree(
    sim: &Simulator<PdurNode>,
    pair: [Addr; 2],
) -> HashSet<(u32, u64, u16, Option<u64>)> {
    let seed = sim.seed();
    let [a, b] = pair.map(|n| decisions(sim.node(n)));
    let by_key =
        |d: &HashSet<(u32, u64, u16, Option<u64>)>| -> HashMap<(u32, u64, u16), Option<u64>> {
            d.iter().map(|&(o, s, p, v)| ((o, s, p), v)).collect()
        };
    let (ka, kb) = (by_key(&a), by_key(&b));
    for (k, v) in &ka {
        if let Some(w) = kb.get(k) {
            assert_eq!(
                v, w,
                "seed {seed}: replicas {pair:?} decided {k:?} differently (replay: PHASEDB_SIM_SEED={seed})"
            );
        }
    }
    for (n, mine, theirs) in [(pair[0], &ka, &kb), (pair[1], &kb, &ka)] {
        let lacks = theirs.keys().filter(|k| !mine.contains_key(k)).count();
        assert!(
            lacks == 0 || sim.node(n).stats().restores > 0,
            "seed {seed}: replica {n} lacks {lacks} decisions of the other survivor and was never restored (replay: PHASEDB_SIM_SEED={seed})"
        );
    }
    a.union(&b).copied().collect()
}

/// Every live replica has the same digests and decisions and no transaction waiting for votes;
/// every replica's recorded history (a crashed one's too) is atomic and agrees with the others',
/// and the history is serializable ([`check_history`]); returns the transactions committed
/// cluster-wide.
fn check(sim: &Simulator<PdurNode>) -> u64 {
    let seed = sim.seed();
    let up: Vec<Addr> = sim.addrs().into_iter().filter(|&n| sim.is_up(n)).collect();
    let first = sim.node(up[0]);
    let decided = decisions(first);
    for &n in &up[1..] {
        let r = sim.node(n);
        assert_eq!(
            r.replica().digests(),
            first.replica().digests(),
            "seed {seed}: replica {n} differs from replica {} (replay: PHASEDB_SIM_SEED={seed})",
            up[0]
        );
        assert!(
            decisions(r) == decided,
            "seed {seed}: replica {n} decided differently (replay: PHASEDB_SIM_SEED={seed})"
        );
    }
    for &n in &up {
        for p in 0..PARTITIONS as u16 {
            assert_eq!(
                sim.node(n).replica().partition(p).undecided(),
                0,
                "seed {seed}: replica {n} partition {p} still waits for votes (replay: PHASEDB_SIM_SEED={seed})"
            );
        }
    }
    for n in sim.addrs() {
        let s = sim.node(n).stats();
        let answers = sim.node(n).replica().partition(0).stats().unanswered
            + sim.node(n).replica().partition(1).stats().unanswered;
        assert_eq!(answers, 0, "seed {seed}: node {n}: votes left unanswered");
        assert_eq!(
            (s.refused_payloads, s.refused_restores, s.refused_messages),
            (0, 0, 0),
            "seed {seed}: node {n}: {s:?}"
        );
    }
    check_history(sim, &sim.addrs());
    sim.addrs()
        .iter()
        .map(|&n| sim.node(n).stats().committed)
        .sum()
}

#[test]
fn replicas_converge_and_commit_a_serializable_history_under_reordering() {
    for seed in seeds(3) {
        eprintln!("seed {seed}");
        let mut sim = cluster(seed);
        sim.run_until(1_500 * MS);
        quiesce(&mut sim);
        let committed = check(&sim);
        assert!(committed > 0, "seed {seed}: nothing committed");
        let mut parts = std::collections::HashMap::new();
        for d in sim.node(0).decisions().iter().filter(|d| d.outcome.is_ok()) {
            *parts.entry(d.txn).or_insert(0) += 1;
        }
        let cross = parts.values().filter(|&&n| n > 1).count();
        let stats: Vec<_> = sim.addrs().iter().map(|&n| sim.node(n).stats()).collect();
        eprintln!("seed {seed}: {committed} committed, {cross} cross-partition; {stats:?}");
        assert!(
            cross > 0,
            "seed {seed}: no cross-partition transaction committed"
        );
    }
}

#[test]
fn a_leader_crash_mid_run_loses_no_decided_transaction() {
    for seed in seeds(2) {
        eprintln!("seed {seed}");
        let mut sim = cluster(seed);
        sim.run_until(700 * MS);
        let leader = sim
            .node(0)
            .broadcast()
            .leader(0)
            .unwrap_or_else(|| panic!("seed {seed}: group 0 has a leader"));
        let before: Vec<u64> = sim
            .addrs()
            .iter()
            .map(|&n| sim.node(n).stats().committed)
            .collect();
        sim.crash(leader);
        sim.run_until(2_000 * MS);
        quiesce(&mut sim);
        let lost = decisions(sim.node(leader));
        let committed = check(&sim);
        for n in sim.addrs().into_iter().filter(|&n| n != leader) {
            let r = sim.node(n);
            let kept = decisions(r);
            let missing = lost.difference(&kept).count();
            assert_eq!(
                missing, 0,
                "seed {seed}: replica {n} lacks {missing} decisions the crashed leader {leader} took (replay: PHASEDB_SIM_SEED={seed})"
            );
            assert!(
                r.stats().committed > before[n as usize],
                "seed {seed}: replica {n} committed nothing after the crash"
            );
        }
        let retries: u64 = sim
            .addrs()
            .iter()
            .map(|&n| sim.node(n).stats().retries)
            .sum();
        eprintln!("seed {seed}: leader {leader} crashed; {committed} committed, {retries} retried");
    }
}

#[test]
fn a_partial_broadcast_of_a_crashed_replica_is_finished_by_the_survivors() {
    for seed in seeds(2) {
        eprintln!("seed {seed}");
        let mut sim = cluster(seed);
        sim.run_until(300 * MS);
        // Replica 2's messages of partition 1's group are lost, so its cross-partition requests
        // reach partition 0 only; then it crashes.
        sim.set_drop_filter(Some(Box::new(|from, _, m: &PdurMsg| {
            from == 2 && matches!(m, PdurMsg::Bcast(g) if g.group() == 1)
        })));
        sim.run_until(600 * MS);
        sim.crash(2);
        sim.set_drop_filter(None);
        sim.run_until(1_500 * MS);
        quiesce(&mut sim);
        check(&sim);
        let rescued: u64 = [0, 1]
            .iter()
            .map(|&n| sim.node(n).stats().rebroadcasts)
            .sum();
        assert!(
            rescued > 0,
            "seed {seed}: the survivors broadcast nothing again"
        );
    }
}

/// A configuration whose groups snapshot every few entries and keep a short log, so a replica
/// that is down for a while falls behind the compacted prefix and needs a state transfer.
fn compacting(seed: u64) -> PdurConfig {
    let mut cfg = config(seed);
    cfg.bcast.snapshot_entries = 16;
    cfg.bcast.retained_entries = 4;
    cfg
}

/// Runs a cluster, crashes replica 2, runs on without it, brings it back with `revive`, runs on
/// with its clients and quiesces; then checks that it caught up by state transfer: every
/// replica's digests equal, the survivors' decisions in agreement ([`survivors_agree`]: a survivor
/// that fell behind the compacted log is restored too) and the revived replica's a subset of
/// theirs (its snapshot covers the earlier ones), every decision the crashed replica took before
/// the crash (its clients' acknowledged commits among them) kept by the survivors, and the
/// history serializable.
fn crash_and_rejoin(seed: u64, revive: impl FnOnce(&mut Simulator<PdurNode>, PdurConfig)) {
    const DOWN: Addr = 2;
    let cfg = compacting(seed);
    let mut sim = cluster_of(cfg.clone());
    sim.run_until(500 * MS);
    sim.crash(DOWN);
    let before = decisions(sim.node(DOWN));
    let acked = sim.node(DOWN).stats().committed;
    sim.run_until(1_500 * MS);
    revive(&mut sim, cfg);
    let committed_before = sim.node(DOWN).stats().committed;
    let installed_before = sim.node(DOWN).broadcast().stats().snapshots_installed;
    sim.run_until(2_500 * MS);
    quiesce(&mut sim);
    let back = sim.node(DOWN);
    let installed = back.broadcast().stats().snapshots_installed - installed_before;
    assert!(
        installed >= PARTITIONS as u64,
        "seed {seed}: replica {DOWN} installed {installed} snapshots (replay: PHASEDB_SIM_SEED={seed})"
    );
    assert!(
        back.stats().committed > committed_before,
        "seed {seed}: replica {DOWN}'s clients committed nothing after it came back"
    );
    let survivors = survivors_agree(&sim, [0, 1]);
    let lost = before.difference(&survivors).count();
    assert_eq!(
        lost,
        0,
        "seed {seed}: {lost} of {} decisions of replica {DOWN} ({acked} acknowledged commits) are gone (replay: PHASEDB_SIM_SEED={seed})",
        before.len()
    );
    let strays = decisions(back).difference(&survivors).count();
    assert_eq!(
        strays, 0,
        "seed {seed}: replica {DOWN} decided {strays} transactions otherwise (replay: PHASEDB_SIM_SEED={seed})"
    );
    for n in sim.addrs() {
        assert_eq!(
            sim.node(n).replica().digests(),
            sim.node(0).replica().digests(),
            "seed {seed}: replica {n} differs after the rejoin (replay: PHASEDB_SIM_SEED={seed})"
        );
        for p in 0..PARTITIONS as u16 {
            let part = sim.node(n).replica().partition(p);
            assert_eq!(
                (part.undecided(), part.stats().unanswered),
                (0, 0),
                "seed {seed}: replica {n} partition {p} (replay: PHASEDB_SIM_SEED={seed})"
            );
        }
        let s = sim.node(n).stats();
        assert_eq!(
            (s.refused_payloads, s.refused_restores),
            (0, 0),
            "seed {seed}: node {n}: {s:?}"
        );
    }
    check_history(&sim, &sim.addrs());
    let answered: u64 = sim
        .addrs()
        .iter()
        .flat_map(|&n| (0..PARTITIONS as u16).map(move |p| (n, p)))
        .map(|(n, p)| sim.node(n).replica().partition(p).stats().answered)
        .sum();
    eprintln!(
        "seed {seed}: replica {DOWN} back with {installed} snapshots installed, {answered} votes answered from outcomes; {:?}",
        sim.node(DOWN).stats()
    );
}

#[test]
fn a_replica_restarted_empty_rejoins_by_snapshot_and_log() {
    for seed in seeds(3) {
        eprintln!("seed {seed}");
        crash_and_rejoin(seed, |sim, cfg| {
            *sim.node_mut(2) = PdurNode::rejoining(2, cfg, 1).expect("valid config");
            sim.restart(2);
        });
    }
}

#[test]
fn a_replica_restarted_with_its_stale_log_catches_up_by_snapshot_and_log() {
    for seed in seeds(3) {
        eprintln!("seed {seed}");
        crash_and_rejoin(seed, |sim, _| sim.restart(2));
    }
}

#[test]
fn a_node_without_a_rebroadcast_delay_is_refused() {
    let cfg = PdurConfig {
        rebroadcast_ns: 0,
        ..config(1)
    };
    let e = PdurNode::new(0, cfg).err().expect("refused");
    assert!(e.contains("rebroadcast_ns"), "{e}");
}
