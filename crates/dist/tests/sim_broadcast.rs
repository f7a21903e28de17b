//! The broadcast substrate under the deterministic simulator: three nodes, several groups
//! multiplexed on them (as P-DUR runs one per logical partition), numbered payloads proposed by
//! every node. After every run each group's members hold the same sequence (total order), every
//! payload at most once, and nothing delivered anywhere is lost — across reordering delays, lost
//! messages, a leader's crash and a member that rejoins by state transfer. A failing run prints
//! its seed (replay one with `PHASEDB_SIM_SEED=<seed>`).

#[path = "broadcast/harness.rs"]
mod harness;

use std::collections::BTreeSet;

use harness::{Load, Replica, payload_id};
use phasedb_dist::broadcast::{
    Broadcast, BroadcastConfig, BroadcastError, GroupId, GroupMsg, RaftBytes, member_id, raft_id,
};
use phasedb_net::Addr;
use phasedb_net::sim::{SimConfig, Simulator};

const MS: u64 = 1_000_000;
const NODES: Addr = 3;

fn seeds(n: u64) -> Vec<u64> {
    match std::env::var("PHASEDB_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("PHASEDB_SIM_SEED is a number")],
        Err(_) => (1..=n).collect(),
    }
}

/// Groups 0..3 span all three nodes; group 3 only nodes 1 and 2.
fn groups() -> Vec<(GroupId, Vec<Addr>)> {
    vec![
        (0, vec![0, 1, 2]),
        (1, vec![0, 1, 2]),
        (2, vec![0, 1, 2]),
        (3, vec![1, 2]),
    ]
}

fn config(seed: u64) -> BroadcastConfig {
    BroadcastConfig {
        tick_ns: 2 * MS,
        election_ticks: 10,
        heartbeat_ticks: 2,
        batch_bytes: 4 << 10,
        proposal_timeout_ns: 200 * MS,
        seed,
        ..BroadcastConfig::default()
    }
}

fn cluster(sim_cfg: SimConfig, cfg: BroadcastConfig, per_tick: usize) -> Simulator<Replica> {
    let mut sim = Simulator::new(sim_cfg);
    let load = Load {
        per_tick,
        window: 0,
        limit: u64::MAX,
        size: 24,
    };
    for n in 0..NODES {
        sim.add(n, Replica::new(n, cfg.clone(), &groups(), load));
    }
    sim
}

/// Stops the load and runs until every group's live members hold equally long sequences with
/// nothing left to propose; panics (with the seed) if they do not within `within` ns.
fn quiesce(sim: &mut Simulator<Replica>, within: u64) {
    for n in sim.addrs() {
        sim.node_mut(n).load.per_tick = 0;
    }
    let seed = sim.seed();
    let deadline = sim.now() + within;
    let settled = sim.run_until_pred(deadline, |s| {
        groups().iter().all(|(g, members)| {
            let up: Vec<&Replica> = members
                .iter()
                .filter(|&&m| s.is_up(m))
                .map(|&m| s.node(m))
                .collect();
            let len = |r: &Replica| r.log.get(g).map_or(0, Vec::len);
            up.iter().all(|r| {
                let m = r.bcast.group(*g).unwrap();
                len(r) == len(up[0]) && m.pending_bytes() == 0 && m.inflight_batches() == 0
            })
        })
    });
    assert!(
        settled,
        "seed {seed}: the groups did not settle (replay: PHASEDB_SIM_SEED={seed})"
    );
}

/// Every live member of each group holds the same sequence, with no gap, no duplicate and only
/// payloads that were proposed in that group; returns the total delivered.
fn check_total_order(sim: &Simulator<Replica>) -> u64 {
    let seed = sim.seed();
    let mut total = 0;
    for n in sim.addrs() {
        let r = sim.node(n);
        assert!(
            r.violations.is_empty(),
            "seed {seed}: {:?} (replay: PHASEDB_SIM_SEED={seed})",
            r.violations
        );
    }
    for (g, members) in groups() {
        let up: Vec<Addr> = members.into_iter().filter(|&m| sim.is_up(m)).collect();
        let first = sim.node(up[0]).log.get(&g).cloned().unwrap_or_default();
        for &m in &up[1..] {
            let other = sim.node(m).log.get(&g).cloned().unwrap_or_default();
            assert!(
                other == first,
                "seed {seed}: group {g}: node {m} delivered {} payloads, node {} {}, or in another order (replay: PHASEDB_SIM_SEED={seed})",
                other.len(),
                up[0],
                first.len()
            );
        }
        let mut seen = BTreeSet::new();
        for p in &first {
            let id = payload_id(p).expect("a payload of the test");
            assert_eq!(
                id.1, g,
                "seed {seed}: payload of group {} in group {g}",
                id.1
            );
            assert!(
                id.2 < sim.node(id.0).proposed[&g],
                "seed {seed}: payload {id:?} was never proposed"
            );
            assert!(
                seen.insert(id),
                "seed {seed}: {id:?} delivered twice in group {g}"
            );
        }
        total += first.len() as u64;
    }
    total
}

#[test]
fn every_member_of_a_group_delivers_the_same_sequence_under_reordering_delays() {
    for seed in seeds(4) {
        // Bursts of 8 payloads per ms per node and group: two batches go at once, the rest wait
        // for one of them to be delivered.
        let mut sim = cluster(SimConfig::new(seed), config(seed), 8);
        sim.run_until(300 * MS);
        quiesce(&mut sim, 2_000 * MS);
        let total = check_total_order(&sim);
        // Three groups of three proposers and one of two, for 300 ms.
        assert!(total > 15_000, "seed {seed}: only {total} delivered");
        let stats = sim.node(0).bcast.stats();
        assert!(
            stats.proposed_batches < stats.proposed_payloads / 2,
            "seed {seed}: proposals were not batched: {stats:?}"
        );
    }
}

#[test]
fn nothing_delivered_before_a_leaders_crash_is_lost_after_failover() {
    for seed in seeds(4) {
        let mut sim = cluster(SimConfig::new(seed), config(seed), 1);
        sim.run_until(150 * MS);
        let leader = sim.node(0).bcast.leader(0).expect("group 0 has a leader");
        // Everything delivered anywhere before the crash (each node's sequence is a prefix of the
        // longest, by total order).
        let acked: Vec<_> = groups()
            .iter()
            .map(|(g, members)| {
                members
                    .iter()
                    .map(|&m| sim.node(m).log.get(g).cloned().unwrap_or_default())
                    .max_by_key(Vec::len)
                    .unwrap()
            })
            .collect();
        sim.crash(leader);
        sim.run_until(400 * MS);
        let survivor = (0..NODES).find(|&n| n != leader).unwrap();
        let new_leader = sim.node(survivor).bcast.leader(0);
        assert!(
            new_leader.is_some_and(|l| l != leader),
            "seed {seed}: group 0 led by {new_leader:?} after its leader {leader} crashed"
        );
        for (i, (g, members)) in groups().iter().enumerate() {
            for &m in members.iter().filter(|&&m| m != leader) {
                let log = sim.node(m).log.get(g).cloned().unwrap_or_default();
                assert!(
                    log.len() > acked[i].len() && log[..acked[i].len()] == acked[i][..],
                    "seed {seed}: group {g}: node {m} holds {} payloads, not extending the {} delivered before the crash (replay: PHASEDB_SIM_SEED={seed})",
                    log.len(),
                    acked[i].len()
                );
            }
        }
        sim.restart(leader);
        sim.run_until(500 * MS);
        quiesce(&mut sim, 2_000 * MS);
        check_total_order(&sim);
        let rejoined = sim.node(leader);
        for g in rejoined.bcast.groups() {
            assert!(
                rejoined.log[&g].len() >= acked[g as usize].len(),
                "seed {seed}: the restarted node lost group {g}'s payloads"
            );
        }
    }
}

#[test]
fn total_order_holds_when_messages_are_lost_delayed_and_reordered() {
    for seed in seeds(4) {
        let net = SimConfig {
            drop_rate: 0.05,
            min_delay: 20_000,
            max_delay: 4 * MS,
            ..SimConfig::new(seed)
        };
        let mut sim = cluster(net, config(seed), 1);
        sim.run_until(400 * MS);
        quiesce(&mut sim, 3_000 * MS);
        let total = check_total_order(&sim);
        let dropped = sim.stats().dropped;
        assert!(dropped > 100, "seed {seed}: only {dropped} messages lost");
        assert!(total > 1_500, "seed {seed}: only {total} delivered");
    }
}

#[test]
fn a_crashed_member_rejoins_by_snapshot_once_the_log_moved_past_it() {
    for seed in seeds(4) {
        let cfg = BroadcastConfig {
            snapshot_entries: 20,
            retained_entries: 5,
            ..config(seed)
        };
        let mut sim = cluster(SimConfig::new(seed), cfg, 1);
        for n in sim.addrs() {
            sim.node_mut(n).snapshots = true;
        }
        sim.run_until(100 * MS);
        // Node 1 restarts from its own storage at once; node 2 stays down while the others
        // compact their logs far past it.
        sim.crash(1);
        sim.restart(1);
        sim.crash(2);
        sim.run_until(400 * MS);
        let first = sim.node(0).bcast.group(0).unwrap().first_log_index();
        let behind = sim.node(2).bcast.group(0).unwrap().snapshot_index();
        assert!(
            first > behind + 1,
            "seed {seed}: the log was not compacted past the crashed member ({first} vs {behind})"
        );
        sim.restart(2);
        sim.run_until(500 * MS);
        quiesce(&mut sim, 2_000 * MS);
        check_total_order(&sim);
        let installed = sim.node(2).bcast.stats().snapshots_installed;
        assert!(
            installed >= 3,
            "seed {seed}: node 2 installed {installed} snapshots"
        );
        assert!(
            sim.node(1).restores >= 1,
            "seed {seed}: node 1 restored nothing"
        );
        assert!(
            sim.node(2).log[&0].len() > 200,
            "seed {seed}: node 2 holds {} payloads",
            sim.node(2).log[&0].len()
        );
    }
}

#[test]
fn a_member_that_lost_its_storage_rejoins_under_a_new_id_and_counts_in_the_majority() {
    for seed in seeds(4) {
        let cfg = BroadcastConfig {
            snapshot_entries: 20,
            retained_entries: 5,
            ..config(seed)
        };
        let mut sim = cluster(SimConfig::new(seed), cfg, 1);
        for n in sim.addrs() {
            sim.node_mut(n).snapshots = true;
        }
        // Node 0 (in groups 0-2, which have three members) loses everything when it crashes.
        sim.node_mut(0).amnesia = true;
        sim.run_until(100 * MS);
        sim.crash(0);
        sim.run_until(300 * MS);
        sim.restart(0);
        sim.run_until(600 * MS);
        let three: Vec<GroupId> = vec![0, 1, 2];
        for &g in &three {
            let m = sim.node(0).bcast.group(g).unwrap();
            assert!(!m.is_joining(), "seed {seed}: node 0 still joins group {g}");
            let voters = sim.node(1).bcast.group(g).unwrap().voters();
            assert_eq!(
                voters,
                vec![raft_id(1), raft_id(2), member_id(0, 1)],
                "seed {seed}: group {g} (replay: PHASEDB_SIM_SEED={seed})"
            );
        }
        assert!(
            sim.node(0).restores >= 3,
            "seed {seed}: node 0 restored {}",
            sim.node(0).restores
        );
        // Node 2 goes down: groups 0-2 now need node 0's new id for a majority.
        let before: Vec<usize> = three
            .iter()
            .map(|g| sim.node(1).log.get(g).map_or(0, Vec::len))
            .collect();
        sim.crash(2);
        sim.run_until(900 * MS);
        for (i, g) in three.iter().enumerate() {
            let now = sim.node(1).log.get(g).map_or(0, Vec::len);
            assert!(
                now > before[i] + 50,
                "seed {seed}: group {g} delivered {} payloads after node 2 crashed (replay: PHASEDB_SIM_SEED={seed})",
                now - before[i]
            );
        }
        sim.restart(2);
        sim.run_until(1_000 * MS);
        quiesce(&mut sim, 2_000 * MS);
        check_total_order(&sim);
    }
}

/// Before any snapshot is taken, a joiner catches up from the log's first entry: it learns the
/// group's membership changes, its own admission among them, from the log it replays.
#[test]
fn a_member_that_lost_its_storage_before_any_snapshot_rejoins_from_the_whole_log() {
    for seed in seeds(4) {
        let cfg = BroadcastConfig {
            snapshot_entries: 1_000_000,
            ..config(seed)
        };
        let mut sim = cluster(SimConfig::new(seed), cfg, 1);
        sim.node_mut(0).amnesia = true;
        sim.run_until(100 * MS);
        sim.crash(0);
        sim.run_until(200 * MS);
        sim.restart(0);
        sim.run_until(600 * MS);
        for g in [0, 1, 2] {
            let m = sim.node(0).bcast.group(g).unwrap();
            assert!(
                !m.is_joining(),
                "seed {seed}: node 0 still joins group {g} (replay: PHASEDB_SIM_SEED={seed})"
            );
            assert_eq!(m.snapshot_index(), 0, "no snapshot was needed");
            assert_eq!(
                sim.node(1).bcast.group(g).unwrap().voters(),
                vec![raft_id(1), raft_id(2), member_id(0, 1)],
                "seed {seed}: group {g} (replay: PHASEDB_SIM_SEED={seed})"
            );
        }
        quiesce(&mut sim, 2_000 * MS);
        check_total_order(&sim);
        for g in [0, 1, 2] {
            assert_eq!(
                sim.node(0).log.get(&g).map_or(0, Vec::len),
                sim.node(1).log.get(&g).map_or(0, Vec::len),
                "seed {seed}: node 0 replayed all of group {g}"
            );
        }
    }
}

#[test]
fn malformed_and_misaddressed_messages_are_refused_and_change_nothing() {
    let mut sim = cluster(SimConfig::new(9), config(9), 1);
    sim.run_until(100 * MS);
    let before = |s: &Simulator<Replica>| {
        let b = &s.node(1).bcast;
        (b.delivered(0), b.group(0).unwrap().term(), b.leader(0))
    };
    let was = before(&sim);
    let good = {
        // A genuine raft message (a heartbeat node 0 could send) with the wrong envelope.
        let mut m = raft::eraftpb::Message::default();
        m.set_msg_type(raft::eraftpb::MessageType::MsgHeartbeat);
        m.from = raft_id(0);
        m.to = raft_id(1);
        m.term = 1_000;
        m
    };
    let cases: Vec<(Addr, GroupMsg)> = vec![
        (
            0,
            GroupMsg::Raft {
                group: 0,
                raft: RaftBytes(vec![0xff; 7]),
            },
        ),
        (
            0,
            GroupMsg::Raft {
                group: 0,
                raft: RaftBytes(vec![0x0a, 0x80]),
            },
        ),
        (
            0,
            GroupMsg::Raft {
                group: 42,
                raft: RaftBytes(Vec::new()),
            },
        ),
        // Node 0 asks to join under node 2's id.
        (
            0,
            GroupMsg::Join {
                group: 0,
                id: member_id(2, 1),
            },
        ),
        // Claims to come from node 0 over node 2's connection.
        (2, GroupMsg::encode(0, &good)),
        // Node 0 is not a member of group 3.
        (
            0,
            GroupMsg::encode(3, &{
                let mut m = good.clone();
                m.to = raft_id(1);
                m
            }),
        ),
    ];
    for (from, msg) in cases {
        let r = sim.with_node(1, |n, _| n.bcast.step(from, &msg));
        assert!(r.is_err(), "{msg:?} from {from} was accepted");
    }
    assert!(matches!(
        sim.with_node(1, |n, _| n.bcast.propose(9, b"x")),
        Err(BroadcastError::UnknownGroup(9))
    ));
    let delivered = was.0.unwrap();
    assert!(matches!(
        sim.with_node(1, |n, _| n.bcast.offer_snapshot(
            0,
            delivered + 1,
            Vec::new()
        )),
        Err(BroadcastError::SnapshotAhead { .. })
    ));
    assert_eq!(before(&sim), was);
    sim.run_until(200 * MS);
    quiesce(&mut sim, 2_000 * MS);
    check_total_order(&sim);
}

#[test]
fn a_message_raft_cannot_accept_restarts_the_member_from_its_storage() {
    for seed in seeds(2) {
        let mut sim = cluster(SimConfig::new(seed), config(seed), 1);
        sim.run_until(100 * MS);
        let leader = sim.node(0).bcast.leader(0).expect("group 0 has a leader");
        let follower = (0..NODES).find(|&n| n != leader).unwrap();
        // A heartbeat from the leader, in its term, committing far beyond the follower's log:
        // raft-rs panics on it.
        let mut m = raft::eraftpb::Message::default();
        m.set_msg_type(raft::eraftpb::MessageType::MsgHeartbeat);
        m.from = raft_id(leader);
        m.to = raft_id(follower);
        m.term = sim.node(follower).bcast.group(0).unwrap().term();
        m.commit = 1 << 40;
        let r = sim.with_node(follower, |n, _| {
            n.bcast.step(leader, &GroupMsg::encode(0, &m))
        });
        assert!(
            r.is_err(),
            "seed {seed}: an impossible commit index was accepted"
        );
        let stats = sim.node(follower).bcast.group(0).unwrap().stats();
        assert_eq!(stats.raft_panics, 1, "seed {seed}");
        sim.run_until(300 * MS);
        quiesce(&mut sim, 2_000 * MS);
        check_total_order(&sim);
        assert!(
            sim.node(follower).restores >= 1,
            "seed {seed}: no restore after the restart"
        );
    }
}

#[test]
fn impossible_settings_and_member_lists_are_refused() {
    let bad = BroadcastConfig {
        heartbeat_ticks: 10,
        ..BroadcastConfig::default()
    };
    assert!(matches!(
        Broadcast::new(0, bad),
        Err(BroadcastError::Config(_))
    ));
    let mut b = Broadcast::new(0, BroadcastConfig::default()).unwrap();
    for members in [
        &[1, 2][..],
        &[0, 0, 1],
        &[],
        &[0, phasedb_net::CLIENT_ADDR_BASE],
    ] {
        assert!(
            matches!(b.add_group(0, members), Err(BroadcastError::Members(0, _))),
            "{members:?} accepted"
        );
    }
    b.add_group(0, &[0, 1, 2]).unwrap();
    assert!(matches!(
        b.add_group(0, &[0, 1, 2]),
        Err(BroadcastError::DuplicateGroup(0))
    ));
}

#[test]
fn a_seed_replays_the_same_run() {
    let run = |seed| {
        let net = SimConfig {
            drop_rate: 0.02,
            ..SimConfig::new(seed)
        };
        let mut sim = cluster(net, config(seed), 1);
        sim.run_until(80 * MS);
        let leader = sim.node(0).bcast.leader(1).unwrap_or(0);
        sim.crash(leader);
        sim.run_until(250 * MS);
        (
            sim.trace_hash(),
            sim.node(if leader == 0 { 1 } else { 0 }).log.clone(),
        )
    };
    assert_eq!(run(5), run(5));
}
