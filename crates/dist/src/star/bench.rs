//! The STAR cluster benchmark: the nodes generate their own load, as in the paper's evaluation
//! (§8.1: "we ran experiments without networked clients"), and the benchmark watches them from a
//! client endpoint over TCP.
//!
//! 1. Wait until every node has loaded its partitions and answers ([`Query::Stats`]).
//! 2. Start every node's load ([`Query::Load`]): single-partition transactions on each primary in
//!    partitioned phases, cross-partition ones on the coordinator in single-master phases, in the
//!    `[star]` table's cross-partition share.
//! 3. Warm up, then measure: every node's counters are read every [`BenchSettings::interval`]
//!    (100 ms), which gives throughput per interval (a steady run has no interval far below the
//!    mean), and the window's counters are the difference of the reads at its two ends.
//! 4. Quiesce: stop the load, wait until the phase in which it stopped has ended everywhere (its
//!    replication fence applied every write to every replica), then ask every node for a digest of
//!    each partition it holds and compare the replicas, and run the workload's consistency check
//!    on every node ([`Query::Check`]).

use std::time::{Duration, Instant};

use phasedb_net::{Addr, ClusterConfig};
use phasedb_txn::PartitionId;

use crate::ramp::bench::faults::{Faults, Timeline};
use crate::star::client::{Client, ClientError};
use crate::star::layout::Layout;
use crate::star::msg::{Answer, Query};
use crate::star::sampler::Sampler;
pub use crate::star::sampler::{FallBackSeen, Reincarnation};
use crate::star::stats::{LatencySnapshot, PhaseTimes, StarStats};

/// How a benchmark run goes.
#[derive(Clone, Debug)]
pub struct BenchSettings {
    /// Load before measuring.
    pub warmup: Duration,
    /// The measured window.
    pub duration: Duration,
    /// How often the nodes' counters are read (the throughput intervals).
    pub interval: Duration,
    /// Longest wait for every node to load its data and answer.
    pub ready_timeout: Duration,
    /// Longest wait, once the load stopped, for its phase to end everywhere.
    pub quiesce_timeout: Duration,
    /// Longest wait for a node's answer to a counters query once the load runs; a node that
    /// does not answer within it is taken as stopped, reported, and left out from then on.
    pub answer_timeout: Duration,
}

impl Default for BenchSettings {
    fn default() -> Self {
        BenchSettings {
            warmup: Duration::from_secs(1),
            duration: Duration::from_secs(5),
            interval: Duration::from_millis(100),
            ready_timeout: Duration::from_secs(600),
            quiesce_timeout: Duration::from_secs(30),
            answer_timeout: Duration::from_secs(2),
        }
    }
}

/// Where a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The nodes load their data.
    Loading,
    /// Load runs, not measured yet.
    Warmup,
    /// The measured window.
    Measuring,
    /// Load stopped; waiting for its phase to end, then comparing replicas.
    Quiescing,
}

/// What a run reports as it goes.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Where it is.
    pub stage: Stage,
    /// Time since the load started (zero while loading).
    pub elapsed: Duration,
    /// Committed transactions per second over the last interval.
    pub rate: f64,
}

/// Every replica's digest of each partition, and what disagrees.
#[derive(Clone, Debug, Default)]
pub struct ReplicaCheck {
    /// Per partition, the digest each of its holders reported.
    pub partitions: Vec<(PartitionId, Vec<(Addr, u64)>)>,
    /// Replicas that disagree or partitions a holder did not report, in words.
    pub problems: Vec<String>,
}

impl ReplicaCheck {
    /// Whether every replica of every partition holds the same rows.
    pub fn agree(&self) -> bool {
        self.problems.is_empty()
    }
}

/// What a run measured.
#[derive(Clone, Debug)]
pub struct BenchReport {
    /// Nodes in the cluster.
    pub nodes: u32,
    /// Length of the measured window.
    pub measured: Duration,
    /// The window's counters, every node's added up ([`StarStats::merge`]).
    pub window: StarStats,
    /// The coordinator's phase times over the window (one clock for the whole cluster's phases).
    pub coordinator: PhaseTimes,
    /// Committed transactions per second in each interval of the window.
    pub intervals: Vec<f64>,
    /// The replicas' digests after quiescing.
    pub replicas: ReplicaCheck,
    /// Each node's consistency check after quiescing (a node that stopped answering has none).
    pub checks: Vec<Result<(), String>>,
    /// Committed transactions per second in each interval from the start of the load (warm-up
    /// included; a stopped node counts with what it had committed when last heard), so a stall
    /// shows.
    pub timeline: Timeline,
    /// Nodes that stopped answering the benchmark, and when.
    pub silences: Faults,
    /// Per node, whether it answered to the end.
    pub live: Vec<bool>,
    /// Nodes whose restarted process answered, and how they recovered.
    pub reincarnations: Vec<Reincarnation>,
    /// Whether the cluster fell back to Dist-OCC because no full replica was left (§7.2), and
    /// since when.
    pub fall_back: Option<FallBackSeen>,
    /// Transactions the nodes acknowledged from the start of the load to the end of the quiesce
    /// (warm-up included; a stopped node's as it said last): what a recorded history must hold
    /// at least.
    pub acknowledged: u64,
}

impl BenchReport {
    fn secs(&self) -> f64 {
        self.measured.as_secs_f64().max(1e-9)
    }

    /// Committed transactions in the window.
    pub fn committed(&self) -> u64 {
        self.window.committed()
    }

    /// Committed transactions per second.
    pub fn throughput(&self) -> f64 {
        self.committed() as f64 / self.secs()
    }

    /// Transactions their procedure aborted, over all that finished.
    pub fn abort_rate(&self) -> f64 {
        let (c, a) = (self.committed(), self.window.aborted());
        if c + a == 0 {
            0.0
        } else {
            a as f64 / (c + a) as f64
        }
    }

    /// Share of the committed transactions that were cross-partition (ran in single-master phases).
    pub fn cross_share(&self) -> f64 {
        let cross: u64 = self.window.types.iter().map(|t| t.committed_cross).sum();
        cross as f64 / self.committed().max(1) as f64
    }

    /// Commit latency at quantile `q` (generation to release at the end of its phase), in µs.
    pub fn latency_us(&self, q: f64) -> f64 {
        let h = self.window.latency.histogram();
        if h.is_empty() {
            0.0
        } else {
            h.value_at_quantile(q) as f64 / 1_000.0
        }
    }

    /// Share of wall time the coordinator spent in `ns` (one of its phase times).
    pub fn share(&self, ns: u64) -> f64 {
        ns as f64 / 1e9 / self.secs()
    }

    /// Phases begun per second.
    pub fn phases_per_s(&self) -> f64 {
        self.coordinator.phases as f64 / self.secs()
    }

    /// Replication records written per committed transaction (each once, whatever its copies).
    pub fn records_per_commit(&self) -> f64 {
        self.window.replication.records as f64 / self.committed().max(1) as f64
    }

    /// Replication bytes written per committed transaction (each record once, §5.2's measure).
    pub fn bytes_per_commit(&self) -> f64 {
        self.window.replicated_bytes_per_commit()
    }

    /// Replication bytes sent per committed transaction, every copy counted.
    pub fn bytes_sent_per_commit(&self) -> f64 {
        self.window.replication.bytes_sent as f64 / self.committed().max(1) as f64
    }

    /// Dist-OCC/Dist-S2PL rounds of messages to other nodes per committed transaction.
    pub fn remote_rounds_per_commit(&self) -> f64 {
        self.window.requests.remote_rounds as f64 / self.committed().max(1) as f64
    }

    /// The slowest interval's throughput.
    pub fn min_interval(&self) -> f64 {
        self.intervals.iter().copied().fold(f64::NAN, f64::min)
    }

    /// Intervals below half the window's mean throughput (the steadiness measure).
    pub fn intervals_below_half_mean(&self) -> usize {
        let half = self.throughput() / 2.0;
        self.intervals.iter().filter(|&&r| r < half).count()
    }

    /// Whether every node passed its consistency check.
    pub fn consistent(&self) -> bool {
        self.checks.iter().all(Result::is_ok)
    }
}

/// `end - start` of one node's counters (`queued` is the end's: a level, not a count).
pub fn since(end: &StarStats, start: &StarStats) -> StarStats {
    let mut d = end.clone();
    for (t, s) in d.types.iter_mut().zip(&start.types) {
        t.committed = t.committed.saturating_sub(s.committed);
        t.committed_cross = t.committed_cross.saturating_sub(s.committed_cross);
        t.aborted = t.aborted.saturating_sub(s.aborted);
        t.failed = t.failed.saturating_sub(s.failed);
    }
    let mut h = end.latency.histogram();
    if h.subtract(start.latency.histogram()).is_ok() {
        d.latency = LatencySnapshot::of(&h);
    }
    let (a, b) = (&mut d.times, &start.times);
    a.phases = a.phases.saturating_sub(b.phases);
    a.partitioned_ns = a.partitioned_ns.saturating_sub(b.partitioned_ns);
    a.single_master_ns = a.single_master_ns.saturating_sub(b.single_master_ns);
    a.fence_ns = a.fence_ns.saturating_sub(b.fence_ns);
    let (a, b) = (&mut d.replication, &start.replication);
    a.records = a.records.saturating_sub(b.records);
    a.bytes_partitioned = a.bytes_partitioned.saturating_sub(b.bytes_partitioned);
    a.bytes_single_master = a.bytes_single_master.saturating_sub(b.bytes_single_master);
    a.batches_sent = a.batches_sent.saturating_sub(b.batches_sent);
    a.bytes_sent = a.bytes_sent.saturating_sub(b.bytes_sent);
    a.batches_applied = a.batches_applied.saturating_sub(b.batches_applied);
    a.records_applied = a.records_applied.saturating_sub(b.records_applied);
    a.refused = a.refused.saturating_sub(b.refused);
    let (a, b) = (&mut d.requests, &start.requests);
    a.received = a.received.saturating_sub(b.received);
    a.forwarded = a.forwarded.saturating_sub(b.forwarded);
    a.errors = a.errors.saturating_sub(b.errors);
    a.orphaned = a.orphaned.saturating_sub(b.orphaned);
    a.generated = a.generated.saturating_sub(b.generated);
    a.discarded = a.discarded.saturating_sub(b.discarded);
    a.read_committed = a.read_committed.saturating_sub(b.read_committed);
    a.remote_rounds = a.remote_rounds.saturating_sub(b.remote_rounds);
    a.retried = a.retried.saturating_sub(b.retried);
    d
}

/// Compares the digests `answers[n]` that node `n` gave of the partitions it holds.
pub fn compare_replicas(layout: &Layout, answers: &[Vec<(PartitionId, u64)>]) -> ReplicaCheck {
    let answers: Vec<Option<&[(PartitionId, u64)]>> =
        answers.iter().map(|a| Some(a.as_slice())).collect();
    compare_live_replicas(layout, &answers)
}

/// As [`compare_replicas`], with the nodes that stopped (`None`) left out: every partition
/// must still have a live replica, and its live replicas must agree.
pub fn compare_live_replicas(
    layout: &Layout,
    answers: &[Option<&[(PartitionId, u64)]>],
) -> ReplicaCheck {
    let mut check = ReplicaCheck::default();
    for p in 0..layout.partitions() {
        let mut seen = Vec::new();
        let holders = layout.replicas(p);
        let live = |n: u32| !matches!(answers.get(n as usize), Some(None));
        if !holders.iter().any(|&n| live(n)) {
            check
                .problems
                .push(format!("partition {p} has no live replica left"));
        }
        for &n in holders.iter().filter(|&&n| live(n)) {
            match answers
                .get(n as usize)
                .copied()
                .flatten()
                .and_then(|a| a.iter().find(|d| d.0 == p))
            {
                Some(&(_, digest)) => seen.push((n, digest)),
                None => check.problems.push(format!(
                    "node {n} holds partition {p} but gave no digest of it"
                )),
            }
        }
        if let Some(&(first, digest)) = seen.first()
            && let Some(&(other, d)) = seen.iter().find(|s| s.1 != digest)
        {
            check.problems.push(format!(
                "partition {p}: node {first} has digest {digest:016x}, node {other} {d:016x}"
            ));
        }
        check.partitions.push((p, seen));
    }
    check
}

fn stats_of(answer: Result<Answer, ClientError>, node: Addr) -> Result<StarStats, String> {
    match answer {
        Ok(Answer::Stats(s)) => Ok(*s),
        Ok(other) => Err(format!(
            "node {node} answered {other:?} to a counters query"
        )),
        Err(e) => Err(format!("node {node}: {e}")),
    }
}

/// Every node's counters, read at once.
fn read_all(client: &Client, query: Query) -> Result<Vec<StarStats>, String> {
    client
        .query_all(query)
        .into_iter()
        .zip(0..)
        .map(|(a, n)| stats_of(a, n))
        .collect()
}

/// The counters of every node still live (`None` for the others), each waited for up to
/// `timeout`; a node that does not answer is marked stopped in `live` and noted in `faults`.
fn read_live(
    client: &Client,
    query: Query,
    live: &mut [bool],
    timeout: Duration,
    faults: &mut Faults,
    now: Duration,
) -> Vec<Option<StarStats>> {
    let tickets: Vec<_> = (0..client.nodes())
        .map(|n| live[n as usize].then(|| client.send_query(n, query)))
        .collect();
    let deadline = Instant::now() + timeout;
    tickets
        .into_iter()
        .zip(0..)
        .map(|(ticket, n)| {
            let answer = match ticket? {
                Ok(t) => t
                    .poll(deadline.saturating_duration_since(Instant::now()))
                    .unwrap_or(Err(ClientError::Timeout { node: n, timeout })),
                Err(e) => Err(e),
            };
            match stats_of(answer, n) {
                Ok(s) => Some(s),
                Err(e) => {
                    live[n as usize] = false;
                    faults.silent(now, n as usize, e);
                    None
                }
            }
        })
        .collect()
}

/// Waits until every node answers (they answer once their data is loaded).
fn wait_ready(
    client: &Client,
    settings: &BenchSettings,
    watch: &mut dyn FnMut(&Progress) -> Result<(), String>,
) -> Result<(), String> {
    let deadline = Instant::now() + settings.ready_timeout;
    let loading = Progress {
        stage: Stage::Loading,
        elapsed: Duration::ZERO,
        rate: 0.0,
    };
    for node in 0..client.nodes() {
        let ticket = client
            .send_query(node, Query::Stats)
            .map_err(|e| e.to_string())?;
        loop {
            watch(&loading)?;
            match ticket.poll(Duration::from_millis(100)) {
                Some(answer) => {
                    stats_of(answer, node)?;
                    break;
                }
                None if Instant::now() >= deadline => {
                    return Err(format!(
                        "node {node} did not answer within {:?} of the start (still loading?)",
                        settings.ready_timeout
                    ));
                }
                None => {}
            }
        }
    }
    Ok(())
}

/// Runs the benchmark on the STAR cluster `cfg`, whose nodes serve already (and generate no load
/// yet). `watch` sees the progress about every interval; an error it returns (a node process
/// exited, say) ends the run with that error.
pub fn run(
    cfg: &ClusterConfig,
    settings: &BenchSettings,
    mut watch: impl FnMut(&Progress) -> Result<(), String>,
) -> Result<BenchReport, String> {
    if settings.duration.is_zero() || settings.interval.is_zero() {
        return Err("the measured window and the interval must be positive".into());
    }
    let layout = Layout::from_cluster(cfg).map_err(|e| e.to_string())?;
    let client = Client::connect(cfg).map_err(|e| e.to_string())?;
    wait_ready(&client, settings, &mut watch)?;

    let started = read_all(&client, Query::Load(true))?;
    let load_start = Instant::now();
    let mut silences = Faults::new(None);
    let timeout = settings.answer_timeout;
    let mut nodes = Sampler::new(&client, started, timeout);
    let mut samples = vec![(Duration::ZERO, nodes.committed())];
    let mut last = (load_start, nodes.committed());
    // One sample: every node's counters, waiting at most an interval for them so a dead node
    // does not stall the run (its silence shows after the answer timeout); the window's two ends
    // wait for fresh counters.
    let mut sample = |stage: Stage,
                      fresh: bool,
                      watch: &mut dyn FnMut(&Progress) -> Result<(), String>,
                      nodes: &mut Sampler,
                      silences: &mut Faults| {
        let now = load_start.elapsed();
        nodes.read(settings.interval, fresh, silences, now);
        if !nodes.live.iter().any(|&l| l) {
            return Err("every node stopped answering".to_string());
        }
        let at = Instant::now();
        let committed = nodes.committed();
        let rate = (committed - last.1.min(committed)) as f64
            / at.duration_since(last.0).as_secs_f64().max(1e-9);
        last = (at, committed);
        samples.push((now, committed));
        watch(&Progress {
            stage,
            elapsed: load_start.elapsed(),
            rate,
        })?;
        Ok::<_, String>((at, rate))
    };
    let mut next = load_start;
    while load_start.elapsed() < settings.warmup {
        next += settings.interval;
        std::thread::sleep(
            next.min(load_start + settings.warmup)
                .saturating_duration_since(Instant::now()),
        );
        sample(Stage::Warmup, false, &mut watch, &mut nodes, &mut silences)?;
    }
    let (first_at, _) = sample(
        Stage::Measuring,
        true,
        &mut watch,
        &mut nodes,
        &mut silences,
    )?;
    nodes.open_window();
    let mut intervals = Vec::new();
    let mut next = first_at;
    let last_at = loop {
        next += settings.interval;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        let last = next.duration_since(first_at) >= settings.duration;
        let (at, rate) = sample(
            Stage::Measuring,
            last,
            &mut watch,
            &mut nodes,
            &mut silences,
        )?;
        intervals.push(rate);
        if last {
            break at;
        }
    };
    let per_node = nodes.window();
    let mut live = nodes.live.clone();
    let measured = last_at.duration_since(first_at);
    let timeline = Timeline::from_samples(settings.interval, &samples);

    let now = || load_start.elapsed();
    let stopped = read_live(
        &client,
        Query::Load(false),
        &mut live,
        timeout,
        &mut silences,
        now(),
    );
    let last_phase = stopped.iter().flatten().map(|s| s.phase).max().unwrap_or(0);
    let deadline = Instant::now() + settings.quiesce_timeout;
    let settled = loop {
        let stats = read_live(
            &client,
            Query::Stats,
            &mut live,
            timeout,
            &mut silences,
            now(),
        );
        let now = now();
        for (n, s) in stats.iter().enumerate() {
            if let Some(s) = s {
                nodes.heard(n, s, now);
            }
        }
        if stats
            .iter()
            .flatten()
            .all(|s| s.phase > last_phase && s.idle)
            && nodes.restarted_recovered(&live)
        {
            break stats;
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "phase {last_phase}, in which the load stopped, did not end everywhere (or a node still had work in flight, or a restarted node had not recovered) within {:?}",
                settings.quiesce_timeout
            ));
        }
        watch(&Progress {
            stage: Stage::Quiescing,
            elapsed: load_start.elapsed(),
            rate: 0.0,
        })?;
        std::thread::sleep(Duration::from_millis(5));
    };
    let acknowledged = nodes.acknowledged(&settled);
    let ask_live = |query: Query, live: &[bool]| -> Vec<Option<Result<Answer, ClientError>>> {
        let tickets: Vec<_> = (0..client.nodes())
            .map(|n| live[n as usize].then(|| client.send_query(n, query)))
            .collect();
        tickets
            .into_iter()
            .map(|t| t.map(|t| t.and_then(|t| t.wait())))
            .collect()
    };
    let digests = ask_live(Query::Digests, &live)
        .into_iter()
        .zip(0..)
        .map(|(a, n)| match a {
            None => Ok(None),
            Some(Ok(Answer::Digests(d))) => {
                Ok(Some(d.iter().map(|d| (d.partition, d.digest)).collect()))
            }
            Some(Ok(other)) => Err(format!("node {n} answered {other:?} to a digests query")),
            Some(Err(e)) => Err(format!("node {n}: {e}")),
        })
        .collect::<Result<Vec<Option<Vec<_>>>, String>>()?;
    let views: Vec<Option<&[(PartitionId, u64)]>> = digests.iter().map(|d| d.as_deref()).collect();
    let replicas = compare_live_replicas(&layout, &views);
    let checks = ask_live(Query::Check, &live)
        .into_iter()
        .zip(0..)
        .filter_map(|(a, n)| {
            Some(match a? {
                Ok(Answer::Check(verdict)) => verdict,
                Ok(other) => Err(format!("node {n} answered {other:?} to a check")),
                Err(e) => Err(format!("node {n}: {e}")),
            })
        })
        .collect();

    let mut window = StarStats::default();
    for w in &per_node {
        window.merge(w);
    }
    // The phases' clock: the first coordinator still live (a successor took over a failed one),
    // or with no full replica left (the fall-back to Dist-OCC) the first live node.
    let clock = (0..layout.nodes() as usize)
        .find(|&n| live[n] && layout.is_full(n as u32))
        .or_else(|| (0..layout.nodes() as usize).find(|&n| live[n]))
        .unwrap_or(layout.coordinator() as usize);
    let coordinator = per_node[clock].times;
    Ok(BenchReport {
        nodes: layout.nodes(),
        measured,
        window,
        coordinator,
        intervals,
        replicas,
        checks,
        timeline,
        silences,
        live,
        reincarnations: nodes.reincarnations,
        fall_back: nodes.fall_back,
        acknowledged,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::star::stats::{TypeCounts, latency_histogram};
    use phasedb_net::StarConfig;

    fn counts(committed: u64, latencies: &[u64]) -> StarStats {
        let mut h = latency_histogram();
        for &l in latencies {
            h.record(l).unwrap();
        }
        StarStats {
            types: vec![TypeCounts {
                name: "t".into(),
                committed,
                committed_cross: committed / 10,
                ..TypeCounts::default()
            }],
            latency: LatencySnapshot::of(&h),
            ..StarStats::default()
        }
    }

    #[test]
    fn a_window_holds_only_what_happened_in_it() {
        let start = counts(100, &[1_000, 1_000]);
        let end = counts(300, &[1_000, 1_000, 9_000_000]);
        let d = since(&end, &start);
        assert_eq!(d.committed(), 200);
        assert_eq!(d.types[0].committed_cross, 20);
        let h = d.latency.histogram();
        assert_eq!(h.len(), 1, "only the latency recorded in the window");
        assert!(h.min() > 8_000_000);
    }

    #[test]
    fn replicas_that_differ_or_are_missing_are_named() {
        let layout = Layout::new(2, &StarConfig::new(2)).unwrap();
        let same = compare_replicas(&layout, &[vec![(0, 7), (1, 8)], vec![(0, 7), (1, 8)]]);
        assert!(same.agree(), "{:?}", same.problems);
        assert_eq!(same.partitions[1].1, vec![(1, 8), (0, 8)]);
        let differ = compare_replicas(&layout, &[vec![(0, 7), (1, 8)], vec![(0, 7), (1, 9)]]);
        assert_eq!(differ.problems.len(), 1);
        assert!(
            differ.problems[0].starts_with("partition 1: node 1"),
            "{:?}",
            differ.problems
        );
        let missing = compare_replicas(&layout, &[vec![(0, 7)], vec![(0, 7), (1, 8)]]);
        assert_eq!(
            missing.problems,
            vec!["node 0 holds partition 1 but gave no digest of it".to_string()]
        );
    }
}
