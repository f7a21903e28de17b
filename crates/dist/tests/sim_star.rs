//! STAR under the deterministic simulator: three nodes (one full replica, two partial, two copies
//! of each partition), random delays that reorder messages, many phase switches, the nodes' own
//! load and requests from client endpoints. After every run the replicas of each partition agree,
//! every node's partitions keep the workload's invariant, the history gathered from all nodes is
//! serializable, and every request got exactly one reply, after its phase ended. A failing run
//! prints its seed (replay one with `PHASEDB_SIM_SEED=<seed>`).

#[path = "sim_star/accounts.rs"]
mod accounts;
#[path = "sim_star/actor.rs"]
mod actor;
#[path = "sim_star/client.rs"]
mod client;

use std::collections::BTreeMap;

use accounts::{Accounts, Transfer};
use actor::Actor;
use client::Client;
use phasedb_check::{History, check_serializable};
use phasedb_dist::star::{
    Answer, Layout, Outcome, Query, StarMsg, StarNode, StarSettings, StarStats, open_database,
};
use phasedb_net::sim::{SimConfig, Simulator};
use phasedb_net::{Addr, CLIENT_ADDR_BASE, Node, StarConfig, Transport};
use phasedb_txn::{Database, Procedures, Star};

const MS: u64 = 1_000_000;
/// The default cluster: one full replica and two partial ones, two copies of each partition.
const NODES: u32 = 3;
const PARTITIONS: u32 = 4;
const ROWS: u64 = 200;

fn seeds(n: u64) -> Vec<u64> {
    match std::env::var("PHASEDB_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("PHASEDB_SIM_SEED is a number")],
        Err(_) => (1..=n).collect(),
    }
}

#[derive(Clone)]
struct Scenario {
    seed: u64,
    cross: f64,
    local_load: bool,
    hybrid: bool,
    /// Client endpoints sending this many transfers each.
    clients: Vec<usize>,
    /// A client endpoint sending exactly these bodies.
    raw: Option<Vec<Vec<u8>>>,
    /// Client endpoints sending these bodies at read committed, each to its node.
    read_committed: Vec<(Addr, Vec<Vec<u8>>)>,
    run_ms: u64,
    layout: Layout,
}

impl Scenario {
    fn new(seed: u64) -> Self {
        Scenario {
            seed,
            cross: 0.0,
            local_load: true,
            hybrid: true,
            clients: Vec::new(),
            raw: None,
            read_committed: Vec::new(),
            run_ms: 200,
            layout: layout(),
        }
    }
}

/// The default cluster's layout, with 5 ms iterations.
fn layout() -> Layout {
    let star = StarConfig {
        iteration_ms: 5.0,
        ..StarConfig::new(PARTITIONS)
    };
    Layout::new(NODES, &star).unwrap()
}

/// Opens every node's database of `layout` (recording histories).
fn databases(workload: &mut Accounts, layout: &Layout) -> Vec<Database<Star>> {
    (0..layout.nodes())
        .map(|n| open_database(workload, layout, n, true).unwrap())
        .collect()
}

struct Run<'w> {
    sim: Simulator<Actor<'w>>,
    clients: Vec<Addr>,
    /// The clients of `Scenario::read_committed`, in its order.
    rc_clients: Vec<Addr>,
    /// The phase the coordinator was in when the load stopped.
    stopped_at: u64,
    nodes: u32,
}

impl<'w> Run<'w> {
    fn node(&self, n: Addr) -> &StarNode<'w, Accounts> {
        self.sim.node(n).star()
    }

    fn stats(&self) -> Vec<StarStats> {
        (0..self.nodes).map(|n| self.node(n).stats()).collect()
    }
}

fn run<'w>(s: &Scenario, workload: &'w Accounts, dbs: &'w [Database<Star>]) -> Run<'w> {
    let mut sim = Simulator::new(SimConfig {
        min_delay: 20_000,
        max_delay: 400_000,
        tick: MS / 2,
        ..SimConfig::new(s.seed)
    });
    let settings = StarSettings {
        hybrid_replication: s.hybrid,
        cross_partition: s.cross,
        local_load: s.local_load,
        slice_txns: 8,
        seed: s.seed,
        ..StarSettings::default()
    };
    let nodes = s.layout.nodes();
    for n in 0..nodes {
        let node = StarNode::new(
            n,
            s.layout.clone(),
            settings.clone(),
            &dbs[n as usize],
            workload,
        );
        sim.add(n, Actor::Star(Box::new(node.unwrap())));
    }
    let mut clients = Vec::new();
    for (i, &n) in s.clients.iter().enumerate() {
        let addr = CLIENT_ADDR_BASE + i as u32;
        let mut c = Client::transfers(workload, s.seed * 100 + i as u64, s.cross, n);
        c.nodes = nodes;
        sim.add(addr, Actor::Client(Box::new(c)));
        clients.push(addr);
    }
    if let Some(bodies) = &s.raw {
        let addr = CLIENT_ADDR_BASE + 99;
        let mut c = Client::sending(workload, s.seed, bodies.clone());
        c.nodes = nodes;
        sim.add(addr, Actor::Client(Box::new(c)));
        clients.push(addr);
    }
    let mut rc_clients = Vec::new();
    for (i, (to, bodies)) in s.read_committed.iter().enumerate() {
        let addr = CLIENT_ADDR_BASE + 50 + i as u32;
        let mut c = Client::sending(workload, s.seed + i as u64, bodies.clone());
        c.target = Some(*to);
        c.read_committed = true;
        c.window = 1;
        sim.add(addr, Actor::Client(Box::new(c)));
        rc_clients.push(addr);
    }
    sim.run_until(s.run_ms * MS);
    for n in 0..nodes {
        sim.node_mut(n).star_mut().set_local_load(false);
    }
    let stopped_at = sim.node(0).star().phase();
    let deadline = sim.now() + 10_000 * MS;
    let quiet = sim.run_until_pred(deadline, |sim| {
        clients
            .iter()
            .chain(&rc_clients)
            .all(|&c| sim.node(c).client().done())
            && (0..nodes).all(|n| {
                let node = sim.node(n).star();
                node.is_idle() && node.phase() >= stopped_at + 2
            })
    });
    assert!(
        quiet,
        "seed {}: the cluster did not quiesce (replay: PHASEDB_SIM_SEED={})",
        s.seed, s.seed
    );
    Run {
        sim,
        clients,
        rc_clients,
        stopped_at,
        nodes,
    }
}

/// Every replica of each partition has the same digest; every node keeps the invariant of the
/// partitions it holds; the history of all nodes is serializable and holds every committed
/// transaction; no replication batch was refused. Returns the history.
fn check_cluster(
    s: &Scenario,
    r: &mut Run,
    workload: &Accounts,
    dbs: &[Database<Star>],
) -> History {
    let layout = &s.layout;
    let mut digests: BTreeMap<u32, Vec<(Addr, u64)>> = BTreeMap::new();
    for n in 0..layout.nodes() {
        for d in r.node(n).digests() {
            digests.entry(d.partition).or_default().push((n, d.digest));
        }
        workload
            .check(&dbs[n as usize], &layout.held(n))
            .unwrap_or_else(|e| panic!("seed {}: node {n}: {e}", s.seed));
    }
    for p in 0..layout.partitions() {
        let on = &digests[&p];
        assert_eq!(on.len(), layout.replicas(p).len());
        assert!(
            on.iter().all(|d| d.1 == on[0].1),
            "seed {}: replicas of partition {p} differ: {on:?} (replay: PHASEDB_SIM_SEED={})",
            s.seed,
            s.seed
        );
    }
    let stats = r.stats();
    for st in &stats {
        assert_eq!(
            st.replication.refused, 0,
            "seed {}: a batch was refused",
            s.seed
        );
    }
    let committed: u64 = stats.iter().map(StarStats::committed).sum();
    let all: Vec<u32> = (0..layout.partitions()).collect();
    assert_eq!(
        workload.counted(&dbs[0], &all),
        committed as i64,
        "seed {}: the full replica's vaults lost transfers",
        s.seed
    );
    let history = History::merge(
        (0..layout.nodes())
            .map(|n| r.sim.node_mut(n).star_mut().take_history())
            .collect(),
    );
    assert_eq!(history.len() as u64, committed, "seed {}", s.seed);
    if let Err(a) = check_serializable(&history) {
        panic!(
            "seed {}: not serializable: {a} (replay: PHASEDB_SIM_SEED={})",
            s.seed, s.seed
        );
    }
    history
}

/// Every client request got exactly one reply; a committed or aborted one only after the fence of
/// the phase it ran in completed on the coordinator.
fn check_replies(s: &Scenario, r: &Run) -> Vec<Outcome> {
    let ends = r.node(0).phase_ends().to_vec();
    let mut outcomes = Vec::new();
    for &c in &r.clients {
        let client = r.sim.node(c).client();
        let mut seen = vec![0u32; client.total()];
        for (rid, at, outcome) in &client.replies {
            seen[*rid as usize] += 1;
            if let Outcome::Committed { phase } | Outcome::Aborted { phase } = outcome {
                let ended = ends[*phase as usize - 1];
                assert!(
                    *at > ended,
                    "seed {}: request {rid} of client {c} was answered at {at} ns, before its phase {phase} ended at {ended} ns",
                    s.seed
                );
            }
            outcomes.push(outcome.clone());
        }
        assert!(
            seen.iter().all(|&n| n == 1),
            "seed {}: client {c} got replies {seen:?} per request",
            s.seed
        );
    }
    outcomes
}

#[test]
fn replicas_converge_and_histories_serialize_under_local_load_at_every_cross_share() {
    for cross in [0.0, 0.2, 1.0] {
        for seed in seeds(5) {
            let s = Scenario {
                cross,
                ..Scenario::new(seed)
            };
            let mut w = Accounts::new(PARTITIONS, ROWS);
            let dbs = databases(&mut w, &layout());
            let mut r = run(&s, &w, &dbs);
            check_cluster(&s, &mut r, &w, &dbs);
            let stats = r.stats();
            let mut all = stats[0].clone();
            for st in &stats[1..] {
                all.merge(st);
            }
            let (single, cross_committed) = (all.types[0].committed, all.types[1].committed);
            let phases = r.node(0).phase();
            assert!(
                phases > 40,
                "seed {seed}: only {phases} phases in 200 ms of 5 ms iterations"
            );
            assert!(r.stopped_at > 20);
            match cross {
                0.0 => assert_eq!(cross_committed, 0, "seed {seed}"),
                1.0 => assert_eq!(single, 0, "seed {seed}"),
                _ => {
                    let generated = (single + cross_committed + all.aborted()) as f64;
                    let share = all.requests.generated as f64 / generated;
                    assert_eq!(share, 1.0, "every transaction was generated by the nodes");
                    let cross_ran = (cross_committed + all.types[1].aborted) as f64;
                    assert!(
                        (cross_ran / generated - cross).abs() < 0.02,
                        "seed {seed}: cross-partition share {} instead of {cross}",
                        cross_ran / generated
                    );
                }
            }
            assert!(
                single + cross_committed > 500,
                "seed {seed}: only {} committed",
                single + cross_committed
            );
            assert!(all.aborted() > 0, "seed {seed}: no transfer overdrew");
        }
    }
}

#[test]
fn other_layouts_converge_with_the_coordinator_mastering_partitions_or_extra_copies() {
    let star = |nodes: u32, full: u32, replicas: u32, partitions: u32, placement| {
        let cfg = StarConfig {
            full_replicas: full,
            replicas_per_partition: replicas,
            iteration_ms: 5.0,
            placement,
            ..StarConfig::new(partitions)
        };
        Layout::new(nodes, &cfg).unwrap()
    };
    let layouts = [
        // Three copies: the full replica and two partial ones.
        star(4, 1, 3, 6, None),
        // Only full replicas: the coordinator masters half the partitions.
        star(2, 2, 2, 4, None),
        // The full replica masters two partitions, as in the paper's Figure 2.
        star(
            3,
            1,
            2,
            4,
            Some(vec![vec![0, 1], vec![1, 0], vec![2, 0], vec![0, 2]]),
        ),
    ];
    for layout in layouts {
        for seed in seeds(2) {
            let s = Scenario {
                cross: 0.2,
                clients: vec![60],
                run_ms: 80,
                layout: layout.clone(),
                ..Scenario::new(seed)
            };
            let mut w = Accounts::new(layout.partitions(), ROWS);
            let dbs = databases(&mut w, &layout);
            let mut r = run(&s, &w, &dbs);
            let history = check_cluster(&s, &mut r, &w, &dbs);
            assert!(
                history.len() > 200,
                "seed {seed}: {} committed",
                history.len()
            );
            let outcomes = check_replies(&s, &r);
            assert!(
                outcomes.iter().all(|o| !matches!(o, Outcome::Error(_))),
                "seed {seed}: {outcomes:?}"
            );
        }
    }
}

#[test]
fn client_requests_get_exactly_one_reply_after_their_phase_ends() {
    for seed in seeds(5) {
        let s = Scenario {
            cross: 0.2,
            local_load: false,
            clients: vec![150, 150],
            run_ms: 20,
            ..Scenario::new(seed)
        };
        let mut w = Accounts::new(PARTITIONS, ROWS);
        let dbs = databases(&mut w, &layout());
        let mut r = run(&s, &w, &dbs);
        let history = check_cluster(&s, &mut r, &w, &dbs);
        let outcomes = check_replies(&s, &r);
        assert_eq!(outcomes.len(), 300);
        assert!(
            outcomes.iter().all(|o| !matches!(o, Outcome::Error(_))),
            "seed {seed}: {outcomes:?}"
        );
        let committed = outcomes
            .iter()
            .filter(|o| matches!(o, Outcome::Committed { .. }))
            .count();
        assert_eq!(committed, history.len(), "seed {seed}");
        let stats = r.stats();
        let forwarded: u64 = stats.iter().map(|s| s.requests.forwarded).sum();
        assert!(forwarded > 0, "seed {seed}: no request needed forwarding");
        assert!(
            stats[0].types[1].committed > 0,
            "seed {seed}: no cross-partition commit"
        );
    }
}

#[test]
fn malformed_and_unknown_partition_requests_get_an_error_and_change_nothing() {
    let mut w = Accounts::new(PARTITIONS, ROWS);
    let dbs = databases(&mut w, &layout());
    let before: Vec<_> = (0..NODES)
        .map(|n| {
            let node = StarNode::new(n, layout(), StarSettings::default(), &dbs[n as usize], &w);
            node.unwrap().digests()
        })
        .collect();
    let unknown = Transfer {
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
        raw: Some(bodies),
        run_ms: 20,
        ..Scenario::new(7)
    };
    let mut r = run(&s, &w, &dbs);
    let outcomes = check_replies(&s, &r);
    assert_eq!(outcomes.len(), 4);
    let texts: Vec<String> = outcomes
        .iter()
        .map(|o| match o {
            Outcome::Error(e) => e.clone(),
            other => panic!("a bad request was answered {other:?}"),
        })
        .collect();
    let joined = texts.join(" | ");
    assert!(joined.contains("malformed request"), "{joined}");
    assert!(joined.contains("partition 9, but there are 4"), "{joined}");
    assert!(joined.contains("exceeds"), "{joined}");
    for n in 0..NODES {
        assert_eq!(r.node(n).digests(), before[n as usize], "node {n} changed");
        assert_eq!(r.node(n).stats().committed(), 0);
    }
    assert!(check_cluster(&s, &mut r, &w, &dbs).is_empty());
}

#[test]
fn read_only_requests_run_at_read_committed_on_any_replica_and_are_answered_at_once() {
    // Node 1 holds partitions 0 and 2 (it masters them), node 2 partitions 1 and 3, node 0 all.
    let w = Accounts::new(PARTITIONS, ROWS);
    let body = |from: (u32, u64), to: (u32, u64), amount: i64| {
        let t = Transfer {
            from: w.account(from.0, from.1),
            to: w.account(to.0, to.1),
            amount,
        };
        postcard::to_stdvec(&t).unwrap()
    };
    let to_node_1 = vec![
        body((0, 1), (0, 2), 0),
        body((0, 3), (2, 4), 0),
        body((1, 1), (1, 2), 0),
        body((0, 5), (0, 6), 7),
        vec![0xff; 3],
    ];
    let to_node_0: Vec<Vec<u8>> = (0..40)
        .map(|i| {
            body(
                (i % PARTITIONS, i as u64),
                ((i + 1) % PARTITIONS, i as u64),
                0,
            )
        })
        .collect();
    for seed in seeds(3) {
        let s = Scenario {
            cross: 0.2,
            clients: vec![20],
            read_committed: vec![(1, to_node_1.clone()), (0, to_node_0.clone())],
            ..Scenario::new(seed)
        };
        let mut w = Accounts::new(PARTITIONS, ROWS);
        let dbs = databases(&mut w, &layout());
        let mut r = run(&s, &w, &dbs);
        // The serializable history holds the ordinary transactions only.
        check_cluster(&s, &mut r, &w, &dbs);
        check_replies(&s, &r);
        let outcomes = |i: usize| {
            let c = r.sim.node(r.rc_clients[i]).client();
            let mut replies = c.replies.clone();
            replies.sort_by_key(|reply| reply.0);
            for (rid, at, outcome) in &replies {
                if let Outcome::Committed { .. } = outcome {
                    let waited = at - c.sent[*rid as usize];
                    assert!(
                        waited <= 2 * 400_000 + MS / 2,
                        "seed {seed}: read {rid} waited {waited} ns, as if for its phase to end"
                    );
                }
            }
            replies.into_iter().map(|reply| reply.2).collect::<Vec<_>>()
        };
        let one = outcomes(0);
        assert!(matches!(one[0], Outcome::Committed { .. }), "{one:?}");
        assert!(matches!(one[1], Outcome::Committed { .. }), "{one:?}");
        assert!(
            matches!(&one[2], Outcome::Error(e) if e.contains("holds no copy of partition 1")),
            "{one:?}"
        );
        assert!(
            matches!(&one[3], Outcome::Error(e) if e.contains("only read-only requests")),
            "{one:?}"
        );
        assert!(
            matches!(&one[4], Outcome::Error(e) if e.contains("malformed")),
            "{one:?}"
        );
        let zero = outcomes(1);
        assert_eq!(zero.len(), 40);
        assert!(
            zero.iter().all(|o| matches!(o, Outcome::Committed { .. })),
            "seed {seed}: an audit saw a negative balance or failed: {zero:?}"
        );
        let phases: std::collections::BTreeSet<u64> = zero
            .iter()
            .filter_map(|o| match o {
                Outcome::Committed { phase } => Some(*phase),
                _ => None,
            })
            .collect();
        assert!(
            phases.len() > 1,
            "seed {seed}: the reads ran in phases {phases:?}"
        );
        let stats = r.stats();
        assert_eq!(stats[0].requests.read_committed, 40);
        assert_eq!(stats[1].requests.read_committed, 2);
        assert_eq!(stats[2].requests.read_committed, 0);
    }
}

#[test]
fn operation_replication_sends_fewer_bytes_than_value_replication_for_narrow_writes() {
    let bytes_per_commit = |hybrid: bool| {
        let s = Scenario {
            hybrid,
            run_ms: 60,
            ..Scenario::new(11)
        };
        let mut w = Accounts::new(PARTITIONS, ROWS);
        let dbs = databases(&mut w, &layout());
        let mut r = run(&s, &w, &dbs);
        check_cluster(&s, &mut r, &w, &dbs);
        let mut all = StarStats::default();
        for st in r.stats() {
            all.merge(&st);
        }
        assert_eq!(all.replication.bytes_single_master, 0);
        all.replicated_bytes_per_commit()
    };
    let operation = bytes_per_commit(true);
    let value = bytes_per_commit(false);
    assert!(
        operation * 2.0 < value,
        "operation replication {operation:.1} bytes per commit, value replication {value:.1}"
    );
}

#[test]
fn a_node_answers_queries_for_stats_digests_and_history() {
    let mut w = Accounts::new(PARTITIONS, ROWS);
    let dbs = databases(&mut w, &layout());
    let s = Scenario {
        cross: 0.2,
        run_ms: 30,
        ..Scenario::new(5)
    };
    let mut r = run(&s, &w, &dbs);
    let expected = r.node(1).stats();
    let digests = r.node(1).digests();
    let mut answers = Vec::new();
    for (rid, query) in [Query::Stats, Query::Digests, Query::History]
        .into_iter()
        .enumerate()
    {
        let mut net = Capture(Vec::new());
        let msg = StarMsg::Query {
            rid: rid as u64,
            query,
        };
        r.sim
            .node_mut(1)
            .on_message(&mut net, CLIENT_ADDR_BASE, msg);
        answers.extend(net.0);
    }
    let [stats, digest_answer, history] = answers.try_into().unwrap();
    assert!(
        matches!(&stats, (_, StarMsg::Answer { answer: Answer::Stats(st), .. }) if **st == expected)
    );
    assert!(
        matches!(&digest_answer, (_, StarMsg::Answer { answer: Answer::Digests(d), .. }) if *d == digests)
    );
    let StarMsg::Answer {
        answer: Answer::History(h),
        ..
    } = &history.1
    else {
        panic!("{history:?}")
    };
    assert!(!h.is_empty(), "node 1 committed and recorded transactions");
    assert!(
        r.sim.node_mut(1).star_mut().take_history().is_empty(),
        "the query took the history"
    );
}

#[test]
fn a_seed_replays_the_same_run() {
    let trace = || {
        let mut w = Accounts::new(PARTITIONS, ROWS);
        let dbs = databases(&mut w, &layout());
        let s = Scenario {
            cross: 0.2,
            clients: vec![40],
            run_ms: 40,
            ..Scenario::new(3)
        };
        let r = run(&s, &w, &dbs);
        (r.sim.trace_hash(), r.stats())
    };
    assert_eq!(trace(), trace());
}

/// A transport that keeps what a node sends.
struct Capture(Vec<(Addr, StarMsg)>);

impl Transport<StarMsg> for Capture {
    fn now(&self) -> u64 {
        0
    }
    fn send(&mut self, to: Addr, msg: StarMsg) {
        self.0.push((to, msg));
    }
}
