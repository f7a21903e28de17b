//! P-DUR and DUR replicas fed per-partition delivery orders: determinism across interleavings,
//! serializability of contended randomized runs, §V's cross-ordering anomaly, refused requests
//! and version GC. A failing randomized test prints its seed.

use std::collections::BTreeMap;

use phasedb_check::check_serializable;
use phasedb_dist::pdur::history::HistoryRecorder;
use phasedb_dist::pdur::workload::micro::{MicroConfig, MicroGen, MicroType};
use phasedb_dist::pdur::workload::twitter::{TwitterConfig, TwitterGen};
use phasedb_dist::pdur::workload::{Logic, execute};
use phasedb_dist::pdur::{
    CertRequest, Finish, ImageError, Partition, PartitionId, ReadItem, Replica, RequestError,
    SnapshotSource, Transaction, TxnId,
};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

/// Prints the seed if the test panics while it is alive.
struct SeedGuard(u64);

impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("failing seed: {} (PHASEDB_SIM_SEED={})", self.0, self.0);
        }
    }
}

fn seeds(default: &[u64]) -> Vec<u64> {
    match std::env::var("PHASEDB_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("PHASEDB_SIM_SEED is a number")],
        Err(_) => default.to_vec(),
    }
}

#[derive(Clone, Copy, Debug)]
enum Load {
    Micro(MicroType, u64, f64),
    Twitter(u64),
}

enum Gen {
    Micro(MicroGen),
    Twitter(TwitterGen),
}

impl Gen {
    fn next(&mut self, home: PartitionId) -> Box<dyn Logic> {
        match self {
            Gen::Micro(g) => Box::new(g.next(home)),
            Gen::Twitter(g) => Box::new(g.next(home)),
        }
    }
}

fn build(load: Load, partitions: usize, seed: u64) -> (Replica, Gen) {
    let mut r = Replica::new(partitions);
    let generator = match load {
        Load::Micro(ty, items, cross) => {
            let cfg = MicroConfig {
                ty,
                items,
                partitions,
                cross_partition: cross,
            };
            cfg.load(|k, v| r.load(k, v));
            Gen::Micro(MicroGen::new(cfg, seed))
        }
        Load::Twitter(users) => {
            let cfg = TwitterConfig::new(users, partitions);
            cfg.load(seed, |k, v| r.load(k, v));
            Gen::Twitter(TwitterGen::new(cfg, seed))
        }
    };
    (r, generator)
}

/// Independent atomic broadcasts, one per partition: a request broadcast to several partitions
/// waits in each one's in-flight set, and each partition orders its in-flight requests at random,
/// so two partitions may deliver two transactions in opposite orders.
struct Broadcasts {
    in_flight: Vec<Vec<Vec<u8>>>,
    logs: Vec<Vec<Vec<u8>>>,
}

impl Broadcasts {
    fn new(partitions: usize) -> Broadcasts {
        Broadcasts {
            in_flight: vec![Vec::new(); partitions],
            logs: vec![Vec::new(); partitions],
        }
    }

    fn broadcast(&mut self, req: &CertRequest) {
        let bytes = req.encode();
        for p in req.partitions() {
            self.in_flight[p as usize].push(bytes.clone());
        }
    }

    /// Orders one in-flight request of a random partition; false if none is in flight.
    fn order_one(&mut self, rng: &mut SmallRng) -> bool {
        let busy: Vec<usize> = (0..self.in_flight.len())
            .filter(|&p| !self.in_flight[p].is_empty())
            .collect();
        if busy.is_empty() {
            return false;
        }
        let p = busy[rng.random_range(0..busy.len())];
        let i = rng.random_range(0..self.in_flight[p].len());
        let m = self.in_flight[p].swap_remove(i);
        self.logs[p].push(m);
        true
    }
}

/// Outcome per transaction and partition: `Some(version)` if committed there.
type Outcomes = BTreeMap<(TxnId, PartitionId), Option<u64>>;

struct Run {
    digests: Vec<u64>,
    outcomes: Outcomes,
    logs: Vec<Vec<Vec<u8>>>,
    recorder: HistoryRecorder,
    committed: usize,
    aborted: usize,
}

/// Closed-loop clients run `txns` transactions against one replica whose partitions consume the
/// broadcasts as they are ordered, interleaved at random with the vote exchange.
fn run(load: Load, partitions: usize, clients: usize, txns: usize, seed: u64) -> Run {
    run_with(load, partitions, clients, txns, seed, |r| r)
}

fn run_with(
    load: Load,
    partitions: usize,
    clients: usize,
    txns: usize,
    seed: u64,
    configure: impl Fn(Replica) -> Replica,
) -> Run {
    let (replica, mut generator) = build(load, partitions, seed);
    let mut replica = configure(replica);
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5eed);
    let mut bc = Broadcasts::new(partitions);
    let mut fed = vec![0usize; partitions];
    let mut waiting: Vec<Option<TxnId>> = vec![None; clients];
    let mut seq = vec![0u64; clients];
    let mut recorder = HistoryRecorder::new(partitions);
    let mut outcomes = Outcomes::new();
    let (mut started, mut committed, mut aborted) = (0, 0, 0);
    loop {
        let idle: Vec<usize> = (0..clients).filter(|&c| waiting[c].is_none()).collect();
        let choice = rng.random_range(0..4u32);
        if choice == 0 && started < txns && !idle.is_empty() {
            let c = idle[rng.random_range(0..idle.len())];
            seq[c] += 1;
            let id = TxnId {
                origin: c as u32,
                seq: seq[c],
            };
            started += 1;
            let home = (c % partitions) as PartitionId;
            let mut logic = generator.next(home);
            let tx = Transaction::begin(id, partitions);
            match execute(tx, &mut *logic, &mut replica).expect("no GC under a snapshot in use") {
                Finish::ReadOnly {
                    committed: ok,
                    reads,
                } => {
                    if ok {
                        committed += 1;
                        recorder.read_only(id, reads);
                    } else {
                        aborted += 1;
                    }
                }
                Finish::Update(req) => {
                    recorder.broadcast(&req);
                    bc.broadcast(&req);
                    waiting[c] = Some(id);
                }
            }
        } else if choice == 1 {
            bc.order_one(&mut rng);
        } else if choice == 2 {
            let ready: Vec<usize> = (0..partitions)
                .filter(|&p| fed[p] < bc.logs[p].len())
                .collect();
            if !ready.is_empty() {
                let p = ready[rng.random_range(0..ready.len())];
                replica
                    .deliver(p as PartitionId, &bc.logs[p][fed[p]])
                    .expect("well-formed");
                fed[p] += 1;
            }
        } else if replica.queued_votes() > 0 {
            let i = rng.random_range(0..replica.queued_votes());
            replica.step_vote_at(i);
        }
        for d in replica.take_decisions() {
            recorder.decided(&d);
            outcomes.insert((d.txn, d.partition), d.outcome.ok());
            if d.reply {
                let c = d.txn.origin as usize;
                assert_eq!(waiting[c], Some(d.txn), "one reply per transaction");
                waiting[c] = None;
                match d.outcome {
                    Ok(_) => committed += 1,
                    Err(_) => aborted += 1,
                }
            }
        }
        let quiet = started == txns
            && waiting.iter().all(Option::is_none)
            && bc.in_flight.iter().all(Vec::is_empty)
            && (0..partitions).all(|p| fed[p] == bc.logs[p].len())
            && replica.queued_votes() == 0;
        if quiet {
            break;
        }
    }
    assert!(
        (0..partitions).all(|p| replica.partition(p as PartitionId).undecided() == 0),
        "every transaction decided"
    );
    assert!(
        (0..partitions).all(|p| replica.partition(p as PartitionId).snapshots_in_use() == 0),
        "every snapshot released"
    );
    Run {
        digests: replica.digests(),
        outcomes,
        logs: bc.logs,
        recorder,
        committed,
        aborted,
    }
}

/// Feeds a fresh replica the same per-partition logs, interleaving partitions and votes at random.
fn replay(
    load: Load,
    partitions: usize,
    seed: u64,
    logs: &[Vec<Vec<u8>>],
    order: u64,
) -> (Vec<u64>, Outcomes) {
    let (mut replica, _) = build(load, partitions, seed);
    let mut rng = SmallRng::seed_from_u64(order);
    let mut fed = vec![0usize; partitions];
    let mut outcomes = Outcomes::new();
    loop {
        let ready: Vec<usize> = (0..partitions)
            .filter(|&p| fed[p] < logs[p].len())
            .collect();
        let votes = replica.queued_votes();
        if ready.is_empty() && votes == 0 {
            break;
        }
        if votes > 0 && (ready.is_empty() || rng.random_bool(0.3)) {
            replica.step_vote_at(rng.random_range(0..votes));
        } else {
            // Sometimes one partition runs far ahead of the others.
            let p = ready[rng.random_range(0..ready.len())];
            for _ in 0..rng.random_range(1..=8usize) {
                if fed[p] == logs[p].len() {
                    break;
                }
                replica
                    .deliver(p as PartitionId, &logs[p][fed[p]])
                    .expect("well-formed");
                fed[p] += 1;
            }
        }
        for d in replica.take_decisions() {
            outcomes.insert((d.txn, d.partition), d.outcome.ok());
        }
    }
    (replica.digests(), outcomes)
}

fn assert_replicas_agree(load: Load, partitions: usize, seed: u64) {
    let _guard = SeedGuard(seed);
    let r = run(load, partitions, 12, 600, seed);
    assert!(r.committed > 0, "something committed");
    for order in 1..=3 {
        let (digests, outcomes) = replay(load, partitions, seed, &r.logs, seed * 31 + order);
        assert_eq!(
            digests, r.digests,
            "{load:?}, P={partitions}: digests per partition"
        );
        assert_eq!(outcomes, r.outcomes, "{load:?}, P={partitions}: outcomes");
    }
}

#[test]
fn replicas_fed_the_same_partition_orders_in_any_interleaving_reach_equal_digests() {
    for seed in seeds(&[1, 2, 3]) {
        assert_replicas_agree(Load::Micro(MicroType::I, 256, 0.5), 4, seed);
        assert_replicas_agree(Load::Micro(MicroType::III, 2048, 0.3), 2, seed);
        assert_replicas_agree(Load::Twitter(64), 3, seed);
        assert_replicas_agree(Load::Micro(MicroType::II, 1024, 0.0), 1, seed);
    }
}

fn assert_serializable(load: Load, partitions: usize, seed: u64) -> (usize, usize) {
    let _guard = SeedGuard(seed);
    let r = run(load, partitions, 16, 1500, seed);
    let h = r.recorder.history(|_| true);
    if let Err(a) = check_serializable(&h) {
        panic!("{load:?}, P={partitions}, seed {seed}: not serializable: {a}");
    }
    (r.committed, r.aborted)
}

#[test]
fn contended_randomized_runs_commit_a_serializable_history() {
    for seed in seeds(&[11, 12, 13]) {
        let (c, a) = assert_serializable(Load::Micro(MicroType::I, 128, 0.5), 2, seed);
        assert!(c > 100 && a > 0, "contended: {c} committed, {a} aborted");
        assert_serializable(Load::Micro(MicroType::III, 512, 0.3), 4, seed);
        assert_serializable(Load::Micro(MicroType::I, 128, 1.0), 3, seed);
        let (c, a) = assert_serializable(Load::Twitter(32), 2, seed);
        assert!(c > 100 && a > 0, "contended: {c} committed, {a} aborted");
        assert_serializable(Load::Micro(MicroType::I, 64, 0.0), 1, seed);
    }
}

#[test]
fn without_the_stronger_test_crossed_deliveries_make_randomized_runs_non_serializable() {
    let mut broken = 0;
    for seed in seeds(&[21, 22, 23, 24]) {
        let r = run_with(
            Load::Micro(MicroType::I, 128, 1.0),
            2,
            16,
            1500,
            seed,
            |r| r.without_stronger_test(),
        );
        broken += usize::from(check_serializable(&r.recorder.history(|_| true)).is_err());
    }
    assert!(
        broken > 0,
        "the checker sees the anomaly the stronger test prevents"
    );
}

/// Two cross-partition transactions in write-skew: t1 reads `a` (partition 0) and writes `b`
/// (partition 1), t2 reads `b` and writes `a`, both from the loaded snapshot. Partition 0 delivers
/// t1 then t2, partition 1 t2 then t1 (§V). Algorithm 4's test passes both everywhere — each
/// partition sees the later one read nothing the earlier one wrote there — and the two form a
/// cycle. The stronger test aborts, at each partition, the one delivered second there (it writes
/// what a concurrent transaction read): t2 at partition 0, t1 at partition 1, so neither commits.
fn crossed_write_skew(replica: Replica) -> (Replica, HistoryRecorder, Vec<bool>) {
    let mut r = replica;
    let (a, b) = (0u64, 1u64);
    r.load(a, vec![0]);
    r.load(b, vec![0]);
    let mut rec = HistoryRecorder::new(2);
    let txn = |origin, read: u64, write: u64, r: &mut Replica| {
        let mut tx = Transaction::begin(TxnId { origin, seq: 1 }, 2);
        tx.read(read, r).expect("loaded");
        tx.write(write, vec![origin as u8]);
        match tx.finish(r) {
            Finish::Update(req) => req,
            other => panic!("{other:?}"),
        }
    };
    let t1 = txn(1, a, b, &mut r);
    let t2 = txn(2, b, a, &mut r);
    rec.broadcast(&t1);
    rec.broadcast(&t2);
    r.deliver(0, &t1.encode()).unwrap();
    r.deliver(0, &t2.encode()).unwrap();
    r.deliver(1, &t2.encode()).unwrap();
    r.deliver(1, &t1.encode()).unwrap();
    r.settle();
    let mut committed = vec![false; 3];
    for d in r.take_decisions() {
        rec.decided(&d);
        if d.reply {
            committed[d.txn.origin as usize] = d.outcome.is_ok();
        }
    }
    (r, rec, committed)
}

#[test]
fn the_cross_ordering_anomaly_of_section_v_commits_under_algorithm_4_alone_and_the_stronger_test_aborts_it()
 {
    let (_, rec, committed) = crossed_write_skew(Replica::new(2).without_stronger_test());
    assert_eq!(
        committed[1..],
        [true, true],
        "Algorithm 4 alone commits both"
    );
    assert!(
        check_serializable(&rec.history(|_| true)).is_err(),
        "and the history has a cycle"
    );
    let (r, rec, committed) = crossed_write_skew(Replica::new(2));
    assert_eq!(
        committed[1..],
        [false, false],
        "the stronger test aborts both"
    );
    for p in 0..2 {
        assert_eq!(r.partition(p).stats().concurrent_conflicts, 1);
        assert_eq!(r.partition(p).stats().aborted_elsewhere, 1);
    }
    check_serializable(&rec.history(|_| true)).expect("serializable");
}

#[test]
fn malformed_certification_requests_are_refused_without_state_change() {
    let (mut r, mut generator) = build(Load::Micro(MicroType::I, 256, 0.5), 2, 5);
    let mut good = Vec::new();
    for seq in 1..=4 {
        let mut logic = generator.next(0);
        let tx = Transaction::begin(TxnId { origin: 0, seq }, 2);
        if let Finish::Update(req) = execute(tx, &mut *logic, &mut r).unwrap() {
            good.push(req);
        }
    }
    let base = good[0].clone();
    let before = (r.digests(), r.partition(0).sc(), r.partition(1).sc());
    let bytes = base.encode();
    let mut bad: Vec<(Vec<u8>, PartitionId)> = Vec::new();
    for n in 0..bytes.len() {
        bad.push((bytes[..n].to_vec(), base.snapshots[0].0));
    }
    let mut padded = bytes.clone();
    padded.extend_from_slice(&[1, 2, 3]);
    bad.push((padded, base.snapshots[0].0));
    let mut wrong_tag = bytes.clone();
    wrong_tag[0] ^= 1;
    bad.push((wrong_tag, base.snapshots[0].0));
    let mut spoiled = base.clone();
    spoiled.writes.push(spoiled.writes[0].clone());
    bad.push((spoiled.encode(), base.snapshots[0].0));
    let mut spoiled = base.clone();
    spoiled.snapshots.push((7, 1));
    bad.push((spoiled.encode(), base.snapshots[0].0));
    let mut spoiled = base.clone();
    spoiled.reads.push(ReadItem {
        key: 100,
        version: 1_000_000,
    });
    bad.push((spoiled.encode(), base.snapshots[0].0));
    for (payload, p) in &bad {
        assert!(r.deliver(*p, payload).is_err(), "{payload:?}");
    }
    // A well-formed request delivered on a partition it does not name.
    let single = good
        .iter()
        .find(|g| !g.is_cross_partition())
        .expect("a single-partition request");
    let other = 1 - single.snapshots[0].0;
    assert_eq!(
        r.deliver(other, &single.encode()),
        Err(RequestError::WrongPartition(other))
    );
    assert_eq!(
        r.deliver(9, &single.encode()),
        Err(RequestError::WrongPartition(9))
    );
    assert_eq!(
        before,
        (r.digests(), r.partition(0).sc(), r.partition(1).sc())
    );
    assert!(r.take_decisions().is_empty() && r.queued_votes() == 0);
    // A snapshot from the future is well-formed but cannot be certified: an abort vote, nothing
    // written.
    let mut future = single.clone();
    future.snapshots[0].1 = 1_000;
    for read in &mut future.reads {
        read.version = 1;
    }
    let p = future.snapshots[0].0;
    r.deliver(p, &future.encode()).unwrap();
    let d = r.take_decisions();
    assert_eq!(d.len(), 1);
    assert!(d[0].outcome.is_err());
    assert_eq!(
        before,
        (r.digests(), r.partition(0).sc(), r.partition(1).sc())
    );
    // The replica still certifies good requests afterwards.
    let mut later = single.clone();
    later.id.seq = 99;
    r.deliver(p, &later.encode()).unwrap();
    assert!(r.take_decisions()[0].outcome.is_ok());
}

#[test]
fn overwritten_versions_are_collected_below_the_oldest_snapshot_in_use() {
    let mut r = Replica::new(1);
    r.load(7, vec![0]);
    // A reader takes the loaded snapshot and keeps it.
    let mut reader = Transaction::begin(TxnId { origin: 99, seq: 1 }, 1);
    assert_eq!(reader.read(7, &mut r).unwrap(), Some(vec![0]));
    for seq in 1..=3000u64 {
        let mut tx = Transaction::begin(TxnId { origin: 1, seq }, 1);
        tx.write(7, seq.to_le_bytes().to_vec());
        let Finish::Update(req) = tx.finish(&mut r) else {
            panic!("an update")
        };
        r.deliver(0, &req.encode()).unwrap();
    }
    r.partition_mut(0).collect();
    assert!(
        r.partition(0).versions() > 3000,
        "the reader's snapshot keeps them"
    );
    let mut again = Transaction::begin(TxnId { origin: 98, seq: 1 }, 1);
    let st = reader.snapshot(0);
    assert_eq!(
        r.read(0, 7, st).unwrap().value,
        Some(vec![0]),
        "the old snapshot still reads its version"
    );
    reader.abort(&mut r);
    r.partition_mut(0).collect();
    assert_eq!(r.partition(0).versions(), 1, "only the newest is left");
    assert_eq!(
        again.read(7, &mut r).unwrap(),
        Some(3000u64.to_le_bytes().to_vec())
    );
    again.abort(&mut r);
}

fn update(r: &mut Replica, origin: u32, seq: u64, read: u64, write: u64) -> CertRequest {
    let mut tx = Transaction::begin(TxnId { origin, seq }, 2);
    tx.read(read, r).expect("loaded");
    tx.write(write, vec![seq as u8]);
    match tx.finish(r) {
        Finish::Update(req) => req,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_partial_broadcast_is_finished_by_broadcasting_again_and_a_stale_one_is_voted_down() {
    let mut r = Replica::new(2);
    for k in 0..4u64 {
        r.load(k, vec![0]);
    }
    // The client reached partition 0's broadcast only, then went silent.
    let t = update(&mut r, 5, 1, 0, 1);
    r.deliver(0, &t.encode()).unwrap();
    r.settle();
    let waiting: Vec<_> = r.partition(0).waiting_for_votes().collect();
    assert_eq!(waiting, [(t.id, &[1][..])]);
    let stable = r.partition(0).stable();
    assert!(
        stable < r.partition(0).sc(),
        "the undecided version holds the snapshot back"
    );
    // Someone broadcasts it again to partition 1, and partition 0 delivers it a second time.
    r.deliver(1, &t.encode()).unwrap();
    r.deliver(0, &t.encode()).unwrap();
    r.settle();
    let d = r.take_decisions();
    assert!(d.iter().all(|d| d.outcome.is_ok()) && d.len() == 2, "{d:?}");
    assert_eq!(r.partition(0).stable(), r.partition(0).sc());
    // This client moved on (its next transaction ran on partition 1) before its first reached
    // partition 1: the late copy is stale there, voted down, and partition 0 decides.
    let t1 = update(&mut r, 6, 1, 2, 1);
    r.deliver(0, &t1.encode()).unwrap();
    let t2 = update(&mut r, 6, 2, 3, 3);
    r.deliver(1, &t2.encode()).unwrap();
    r.deliver(1, &t1.encode()).unwrap();
    r.settle();
    let d: Vec<_> = r
        .take_decisions()
        .into_iter()
        .map(|d| (d.txn, d.partition, d.outcome.is_ok()))
        .collect();
    assert_eq!(d, [(t2.id, 1, true), (t1.id, 0, false)]);
    assert_eq!(r.partition(0).undecided(), 0);
    assert_eq!(r.partition(0).stable(), r.partition(0).sc());
}

/// Runs one transaction from the loaded snapshot: reads `reads`, writes `writes`.
fn from_snapshot(r: &mut Replica, origin: u32, reads: &[u64], writes: &[u64]) -> CertRequest {
    let mut tx = Transaction::begin(TxnId { origin, seq: 1 }, 2);
    for &k in reads {
        tx.read(k, r).expect("loaded");
    }
    for &k in writes {
        tx.write(k, vec![origin as u8]);
    }
    match tx.finish(r) {
        Finish::Update(req) => req,
        other => panic!("{other:?}"),
    }
}

/// The reason the stronger test looks at every concurrent transaction, not only cross-partition
/// ones: t1 (reads x at partition 0, writes w at 1) and t2 (reads z at 1, writes y at 0) share no
/// key, so the paper's pairwise test passes them; but partition 0 delivers t1, s, t2 with s
/// overwriting x and reading y, and partition 1 delivers t2, s', t1 with s' overwriting z and
/// reading w: t1 → s → t2 → s' → t1.
#[test]
fn a_single_partition_transaction_between_crossed_ones_cannot_close_a_cycle() {
    let (x, y, z, w) = (0u64, 2, 1, 3);
    let run = |replica: Replica| {
        let mut r = replica;
        for k in 0..4 {
            r.load(k, vec![0]);
        }
        let t1 = from_snapshot(&mut r, 1, &[x], &[w]);
        let t2 = from_snapshot(&mut r, 2, &[z], &[y]);
        let s = from_snapshot(&mut r, 3, &[y], &[x]);
        let s2 = from_snapshot(&mut r, 4, &[w], &[z]);
        let share = |a: &CertRequest, b: &CertRequest| {
            let reads = |t: &CertRequest| t.reads.iter().map(|r| r.key).collect::<Vec<_>>();
            let writes = |t: &CertRequest| t.writes.iter().map(|w| w.0).collect::<Vec<_>>();
            reads(a).iter().any(|k| writes(b).contains(k))
                || reads(b).iter().any(|k| writes(a).contains(k))
                || writes(a).iter().any(|k| writes(b).contains(k))
        };
        assert!(!share(&t1, &t2), "the crossed pair does not conflict");
        let mut rec = HistoryRecorder::new(2);
        for t in [&t1, &t2, &s, &s2] {
            rec.broadcast(t);
        }
        for t in [&t1, &s, &t2] {
            r.deliver(0, &t.encode()).unwrap();
        }
        for t in [&t2, &s2, &t1] {
            r.deliver(1, &t.encode()).unwrap();
        }
        r.settle();
        let mut committed = BTreeMap::new();
        for d in r.take_decisions() {
            rec.decided(&d);
            if d.reply {
                committed.insert(d.txn.origin, d.outcome.is_ok());
            }
        }
        (
            committed,
            check_serializable(&rec.history(|_| true)).is_ok(),
        )
    };
    let (committed, serializable) = run(Replica::new(2).without_stronger_test());
    assert!(
        committed.values().all(|&c| c),
        "Algorithm 4 alone commits all four"
    );
    assert!(!serializable, "and they form a cycle");
    let (committed, serializable) = run(Replica::new(2));
    assert_eq!(
        committed.into_iter().collect::<Vec<_>>(),
        [(1, false), (2, false), (3, true), (4, true)],
        "the crossed transactions wrote what a concurrent one read"
    );
    assert!(serializable);
}

/// Feeds `replica` the rest of `logs` from positions `fed` on, interleaved at random with the
/// vote exchange, calling `at` before every step with the positions reached.
fn feed(
    replica: &mut Replica,
    logs: &[Vec<Vec<u8>>],
    fed: &mut [usize],
    rng: &mut SmallRng,
    mut at: impl FnMut(&Replica, &[usize]),
) {
    loop {
        at(replica, fed);
        let ready: Vec<usize> = (0..logs.len())
            .filter(|&p| fed[p] < logs[p].len())
            .collect();
        let votes = replica.queued_votes();
        if ready.is_empty() && votes == 0 {
            return;
        }
        if votes > 0 && (ready.is_empty() || rng.random_bool(0.3)) {
            replica.step_vote_at(rng.random_range(0..votes));
        } else {
            let p = ready[rng.random_range(0..ready.len())];
            replica
                .deliver(p as PartitionId, &logs[p][fed[p]])
                .expect("well-formed");
            fed[p] += 1;
        }
    }
}

#[test]
fn a_replica_restored_from_partition_images_of_different_points_converges() {
    let partitions = 3;
    let load = Load::Micro(MicroType::I, 900, 0.5);
    for seed in seeds(&[1, 2, 3, 4, 5, 6, 7, 8]) {
        let _guard = SeedGuard(seed);
        let done = run(load, partitions, 9, 500, seed);
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x1a6e);
        // Each partition's image is taken at a point of its own, votes possibly in flight.
        let points: Vec<usize> = done
            .logs
            .iter()
            .map(|l| rng.random_range(0..=l.len()))
            .collect();
        let mut images: Vec<Option<Vec<u8>>> = vec![None; partitions];
        let (mut a, _) = build(load, partitions, seed);
        let mut fed = vec![0; partitions];
        feed(&mut a, &done.logs, &mut fed, &mut rng, |r, fed| {
            for p in 0..partitions {
                if images[p].is_none() && fed[p] == points[p] {
                    images[p] = Some(r.partition(p as PartitionId).image());
                }
            }
        });
        assert_eq!(a.digests(), done.digests, "a replay differs");
        let waiting: usize = images
            .iter()
            .enumerate()
            .map(|(p, i)| {
                Partition::from_image(p as PartitionId, partitions, i.as_ref().unwrap())
                    .unwrap()
                    .undecided()
            })
            .sum();
        // Restored one partition after the other, the others' states as they are then.
        let mut b = Replica::new(partitions);
        let mut fed = points.clone();
        for (p, img) in images.iter().enumerate() {
            let img = img.as_ref().expect("every image taken");
            let part = Partition::from_image(p as PartitionId, partitions, img).expect("decodes");
            b.restore(p as PartitionId, part);
            for _ in 0..rng.random_range(0..4usize) {
                let votes = b.queued_votes();
                if votes > 0 {
                    b.step_vote_at(rng.random_range(0..votes));
                }
            }
        }
        feed(&mut b, &done.logs, &mut fed, &mut rng, |_, _| {});
        assert_eq!(
            b.digests(),
            done.digests,
            "seed {seed}: restored from images at {points:?} ({waiting} waiting in them)"
        );
        for p in 0..partitions as PartitionId {
            let s = b.partition(p).stats();
            assert_eq!(
                (b.partition(p).undecided(), s.unanswered),
                (0, 0),
                "seed {seed}: partition {p}"
            );
        }
    }
}

#[test]
fn bad_partition_images_are_refused_without_panicking() {
    let (mut r, mut generator) = build(Load::Micro(MicroType::I, 300, 0.5), 2, 3);
    for i in 0..40 {
        let id = TxnId {
            origin: 1,
            seq: i + 1,
        };
        let mut logic = generator.next(0);
        if let Ok(Finish::Update(req)) = execute(Transaction::begin(id, 2), &mut *logic, &mut r) {
            for p in req.partitions() {
                r.deliver(p, &req.encode()).expect("well-formed");
            }
            r.settle();
        }
    }
    let image = r.partition(0).image();
    let back = Partition::from_image(0, 2, &image).expect("its own image");
    assert_eq!(back.digest(), r.partition(0).digest());
    assert!(matches!(
        Partition::from_image(1, 2, &image),
        Err(ImageError::Mismatch { .. })
    ));
    assert!(matches!(
        Partition::from_image(0, 3, &image),
        Err(ImageError::Mismatch { .. })
    ));
    for cut in 0..image.len() {
        assert!(
            Partition::from_image(0, 2, &image[..cut]).is_err(),
            "a cut at {cut} decoded"
        );
    }
    let mut rng = SmallRng::seed_from_u64(9);
    for _ in 0..500 {
        let mut bad = image.clone();
        let at = rng.random_range(0..bad.len());
        bad[at] = rng.random();
        let _ = Partition::from_image(0, 2, &bad);
    }
}
