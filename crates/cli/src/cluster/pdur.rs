//! `phasedb bench pdur-micro|twitter --algorithm pdur|dur|embedded-store`: the P-DUR paper's
//! benchmarks (Pacheco et al., §VI). P-DUR and DUR start `--cluster N` replicas as `phasedb node`
//! processes on 127.0.0.1 with a `[pdur]` table (DUR: one partition, one broadcast group over all
//! replicas); each replica runs its own closed-loop clients (`--clients-per-partition` per
//! partition, as STAR's nodes generate their load), counts them over the measured window and
//! writes its counters when stopped; the benchmark sums them and compares every replica's
//! per-partition digests. `embedded-store` is the standalone transactional store the paper
//! compares with (Berkeley DB behind an RPC server there): phasedb's own embedded engine (OCC) in
//! this process, running the same micro-benchmark transactions on `--threads` threads.
//!
//! Failures: with the clients in this process (the default) the benchmark counts commits as they
//! come and prints throughput per [`INTERVAL`]; `--kill-node N --at SECS [--restart-after SECS]`
//! SIGKILLs replica N during the run and starts it again with `--rejoin` (it restores from a live
//! replica's image and replays). A replica that ends or stops answering unasked is named, with
//! when, and fails the run; the digests are compared over the live replicas (a rejoined one
//! included).
//!
//! Defaults scaled to a 2-core machine: 420,000 items (the paper's 4.2M / 10), 42,000 users (420K
//! / 10), 2 partitions.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Args;
use phasedb_dist::pdur::endpoint::remote::{self, ConnectionEvent, RemoteLoad};
use phasedb_dist::pdur::serve::{ServeReport, Workload};
use phasedb_dist::pdur::threaded::LoadStats;
use phasedb_dist::ramp::bench::faults::{EventKind, FaultPlan, Faults, Timeline};
use phasedb_dist::ramp::bench::launch::{ProcessCluster, free_addrs};
use phasedb_net::PdurTable;
use phasedb_net::config::NetSettings;
use phasedb_txn::{Config, Occ};
use phasedb_workloads::pdur_micro::{PdurMicro, PdurMicroConfig};
use phasedb_workloads::{BenchOptions, run_bench};

use super::bench::ClusterArgs;
use super::failures::FailureReport;
use crate::bench::Common;

/// The timeline's interval: committed transactions are sampled this often.
pub const INTERVAL: Duration = Duration::from_millis(100);

/// The algorithms of the P-DUR benchmarks.
pub const PDUR_FAMILY: [&str; 3] = ["pdur", "dur", "embedded-store"];

/// The paper's items (4.2M) scaled down 10x.
pub const DEFAULT_ITEMS: u64 = 420_000;
/// The paper's users (420K) scaled down 10x.
pub const DEFAULT_USERS: u64 = 42_000;
/// Partitions of a P-DUR replica unless `--partitions` says otherwise: the cores.
pub const DEFAULT_PARTITIONS: u32 = 2;

/// `phasedb bench pdur-micro` flags.
#[derive(Args, Debug, Clone)]
pub struct PdurMicroArgs {
    /// Transaction type: I (2 reads, 2 writes), II (32 r, 2 w) or III (16 r, 16 w).
    #[arg(long = "type", default_value = "I", value_parser = ["I", "II", "III"])]
    pub ty: String,
    /// Items, 4-byte keys and values (the paper's 4.2M scaled down 10x).
    #[arg(long, default_value_t = DEFAULT_ITEMS)]
    pub items: u64,
    /// Closed-loop clients of each replica per partition.
    #[arg(long, default_value_t = 8)]
    pub clients_per_partition: u32,
    /// Generate the load inside each replica process (as STAR's evaluation does) instead of
    /// running the clients in this process, over TCP to each replica's client endpoint.
    #[arg(long)]
    pub local_clients: bool,
}

/// `phasedb bench twitter` flags.
#[derive(Args, Debug, Clone)]
pub struct TwitterArgs {
    /// Users (the paper's 420K scaled down 10x).
    #[arg(long, default_value_t = DEFAULT_USERS)]
    pub users: u64,
    /// Closed-loop clients of each replica per partition.
    #[arg(long, default_value_t = 8)]
    pub clients_per_partition: u32,
    /// Generate the load inside each replica process (as STAR's evaluation does) instead of
    /// running the clients in this process, over TCP to each replica's client endpoint.
    #[arg(long)]
    pub local_clients: bool,
}

/// Which benchmark.
#[derive(Clone, Debug)]
pub enum PdurWorkload {
    /// The micro-benchmark: type ("I", "II", "III") and items.
    Micro {
        /// "I", "II" or "III".
        ty: String,
        /// Items.
        items: u64,
    },
    /// The Twitter-like workload over this many users.
    Twitter {
        /// Users.
        users: u64,
    },
}

/// The algorithm of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PdurAlgorithm {
    /// P-DUR: `partitions` per replica, a broadcast group each.
    Pdur,
    /// DUR: one partition, one group over all replicas.
    Dur,
    /// The embedded engine on `threads` threads.
    Embedded,
}

impl PdurAlgorithm {
    /// Parses a `--algorithm` name.
    pub fn parse(s: &str) -> Option<PdurAlgorithm> {
        match s {
            "pdur" | "p-dur" => Some(PdurAlgorithm::Pdur),
            "dur" => Some(PdurAlgorithm::Dur),
            "embedded-store" => Some(PdurAlgorithm::Embedded),
            _ => None,
        }
    }

    /// The name `--algorithm` takes.
    pub fn name(self) -> &'static str {
        match self {
            PdurAlgorithm::Pdur => "pdur",
            PdurAlgorithm::Dur => "dur",
            PdurAlgorithm::Embedded => "embedded-store",
        }
    }
}

/// One run.
#[derive(Clone, Debug)]
pub struct PdurSpec {
    /// The algorithm.
    pub algorithm: PdurAlgorithm,
    /// The benchmark.
    pub workload: PdurWorkload,
    /// Replicas (P-DUR, DUR) or threads (embedded store).
    pub replicas: usize,
    /// Partitions per replica (1 for DUR and the embedded store).
    pub partitions: u32,
    /// Micro: share of transactions on 2 partitions; Twitter: share of follows on 2 partitions.
    pub cross_partition: f64,
    /// Closed-loop clients per partition and replica.
    pub clients_per_partition: u32,
    /// True: each replica runs its clients; false: they run here, over TCP.
    pub local_clients: bool,
    /// Warm-up.
    pub warmup: Duration,
    /// Measured window.
    pub duration: Duration,
    /// Seed.
    pub seed: u64,
    /// Transport settings of the replicas.
    pub net: NetSettings,
    /// The replica to kill during the run, if any (P-DUR and DUR, clients in this process).
    pub faults: Option<FaultPlan>,
}

/// One transaction type's figures.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KindFigures {
    /// The type ("I", "timeline", ...).
    pub name: String,
    /// Committed in the measured window.
    pub committed: u64,
    /// Aborted in the measured window.
    pub aborted: u64,
    /// Latency percentiles of committed transactions, µs (the highest over the replicas).
    pub p50_us: f64,
    /// 90th percentile, as the paper reports.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
}

/// What a run measured.
#[derive(Clone, Debug, Default)]
pub struct PdurResult {
    /// Per transaction type.
    pub kinds: Vec<KindFigures>,
    /// Committed transactions per second, summed over the replicas.
    pub throughput: f64,
    /// Longest measured window over the replicas, s.
    pub measured_s: f64,
    /// `Some(true)` when every replica had the same digest for every partition (P-DUR, DUR).
    pub digests_equal: Option<bool>,
    /// Partitions whose digests were compared, over all replicas.
    pub copies_compared: usize,
    /// Worker CPU seconds per committed transaction, µs (what a loaded machine distorts least).
    pub cpu_us_per_txn: f64,
    /// The failures injected and met (P-DUR, DUR).
    pub faults: Faults,
    /// Committed transactions per [`INTERVAL`] from the start of the load, counted by the
    /// clients in this process (empty with `--local-clients`).
    pub timeline: Timeline,
    /// Counters of requests that failed or were retried, by name.
    pub retries: Vec<(&'static str, u64)>,
}

impl PdurResult {
    /// Committed transactions of every type.
    pub fn committed(&self) -> u64 {
        self.kinds.iter().map(|k| k.committed).sum()
    }

    /// Aborted transactions of every type.
    pub fn aborted(&self) -> u64 {
        self.kinds.iter().map(|k| k.aborted).sum()
    }

    /// Aborted over decided.
    pub fn abort_rate(&self) -> f64 {
        let all = self.committed() + self.aborted();
        if all == 0 {
            0.0
        } else {
            self.aborted() as f64 / all as f64
        }
    }
}

fn micro_type(ty: &str) -> Result<(usize, usize, &'static str), String> {
    match ty {
        "I" => Ok((2, 2, "I")),
        "II" => Ok((32, 2, "II")),
        "III" => Ok((16, 16, "III")),
        other => Err(format!("--type must be I, II or III, not {other}")),
    }
}

impl PdurSpec {
    /// The `[pdur]` table of the replicas.
    pub fn table(&self) -> PdurTable {
        let mut t = PdurTable {
            clients_per_partition: self.clients_per_partition,
            local_clients: self.local_clients,
            warmup_ms: self.warmup.as_millis() as u64,
            duration_ms: (self.duration.as_millis() as u64).max(1),
            seed: self.seed,
            ..PdurTable::new(self.partitions)
        };
        match &self.workload {
            PdurWorkload::Micro { ty, items } => {
                t.micro_type = ty.clone();
                t.items = *items;
                t.cross_partition = self.cross_partition;
            }
            PdurWorkload::Twitter { users } => {
                t.workload = "twitter".into();
                t.users = *users;
                t.follow_cross = self.cross_partition;
            }
        }
        t
    }
}

/// Parses a node's `name value` counters.
fn parse_counters(text: &str) -> Result<BTreeMap<String, u64>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (k, v) = l
                .split_once(' ')
                .ok_or_else(|| format!("malformed counter line {l:?}"))?;
            let v = v
                .trim()
                .parse::<u64>()
                .map_err(|e| format!("counter {k}: {e}"))?;
            Ok((k.to_string(), v))
        })
        .collect()
}

/// Sums the replicas' counters into the run's figures; compares the digests only of the replicas
/// `live` marks (one killed or dead has only its clients' counters).
pub fn combine(nodes: &[BTreeMap<String, u64>], live: &[bool], partitions: u32) -> PdurResult {
    let mut kinds: BTreeMap<String, KindFigures> = BTreeMap::new();
    let mut throughput = 0.0;
    let mut measured: f64 = 0.0;
    let mut cpu_ns = 0u64;
    for n in nodes {
        let secs = n.get("measured_ns").copied().unwrap_or(0) as f64 / 1e9;
        measured = measured.max(secs);
        if secs > 0.0 {
            throughput += n.get("committed").copied().unwrap_or(0) as f64 / secs;
        }
        cpu_ns += (0..partitions)
            .map(|p| n.get(&format!("cpu_ns.{p}")).copied().unwrap_or(0))
            .sum::<u64>();
        for (key, v) in n {
            let Some(rest) = key.strip_prefix("kind.") else {
                continue;
            };
            let Some((kind, field)) = rest.rsplit_once('.') else {
                continue;
            };
            let k = kinds
                .entry(kind.to_string())
                .or_insert_with(|| KindFigures {
                    name: kind.to_string(),
                    ..KindFigures::default()
                });
            let us = *v as f64 / 1e3;
            match field {
                "committed" => k.committed += v,
                "aborted" => k.aborted += v,
                "p50_ns" => k.p50_us = k.p50_us.max(us),
                "p90_ns" => k.p90_us = k.p90_us.max(us),
                "p99_ns" => k.p99_us = k.p99_us.max(us),
                _ => {}
            }
        }
    }
    let digests: Vec<Vec<Option<u64>>> = nodes
        .iter()
        .zip(live)
        .filter(|(_, live)| **live)
        .map(|(n, _)| {
            (0..partitions)
                .map(|p| n.get(&format!("digest.{p}")).copied())
                .collect()
        })
        .collect();
    let digests_equal = (!digests.is_empty()).then(|| {
        digests
            .iter()
            .all(|d| d.iter().all(Option::is_some) && *d == digests[0])
    });
    let mut r = PdurResult {
        kinds: kinds.into_values().collect(),
        throughput,
        measured_s: measured,
        digests_equal,
        copies_compared: digests.len() * partitions as usize,
        cpu_us_per_txn: 0.0,
        ..PdurResult::default()
    };
    r.cpu_us_per_txn = cpu_ns as f64 / 1e3 / r.committed().max(1) as f64;
    r
}

/// Requests that failed or were retried, as the clients saw them.
#[derive(Default)]
struct Retries {
    /// Client connections that failed (closed, or no reply in time).
    lost: u64,
    /// Transactions in flight on them, given up without an outcome.
    unanswered: u64,
    /// Connections opened again after a loss that answered.
    reconnected: u64,
}

/// Per replica, whether it is out of the run now: killed (and not restarted) or ended unasked.
fn out_of_run(faults: &Faults, cluster: &mut ProcessCluster, replicas: usize) -> Vec<bool> {
    let mut out = vec![false; replicas];
    for e in &faults.events {
        match e.kind {
            EventKind::Killed => out[e.node] = true,
            EventKind::Restarted => out[e.node] = false,
            _ => {}
        }
    }
    for (i, _) in cluster.exited_nodes() {
        out[i] = true;
    }
    out
}

/// Runs P-DUR or DUR replicas as `phasedb node` processes and combines their counters, watching
/// for failures (and injecting the plan's) while the load runs.
fn measure_cluster(spec: &PdurSpec) -> Result<PdurResult, String> {
    let binary =
        crate::this_program().map_err(|e| format!("cannot find the phasedb binary: {e}"))?;
    let mut table = spec.table();
    if !spec.local_clients {
        table.client_addrs = free_addrs(spec.replicas)
            .map_err(|e| format!("cannot find ports for the client endpoints: {e}"))?;
    }
    table
        .validate(spec.replicas as u32)
        .map_err(|e| e.to_string())?;
    let partitions = table.partitions;
    // Not pinned: a replica's partitions are threads that need every core.
    let mut cluster =
        ProcessCluster::start_pdur(&binary, spec.replicas, table.clone(), spec.net, false)?;
    let progress = Arc::new(AtomicU64::new(0));
    let (events_tx, events) = mpsc::channel();
    let begin = Instant::now();
    let clients = if spec.local_clients {
        Vec::new()
    } else {
        remote_clients(spec, &table, &progress, &events_tx)?
    };
    drop(events_tx);
    let done: Vec<_> = (0..spec.replicas)
        .map(|i| super::pdur_node::done_path(&cluster.stats_path(i)))
        .collect();
    let mut faults = Faults::new(spec.faults);
    let mut retries = Retries::default();
    let load_end = spec.warmup + spec.duration;
    let mut samples = vec![(Duration::ZERO, 0)];
    let mut next_sample = INTERVAL;
    let deadline = begin + load_end + Duration::from_secs(180);
    loop {
        let now = begin.elapsed();
        let seen = faults.events.len();
        faults.tick(Some(&mut cluster), now);
        for e in &faults.events[seen..] {
            if e.kind == EventKind::Restarted {
                // Only the new life's marker says the rejoined replica is over its load.
                let _ = std::fs::remove_file(&done[e.node]);
            }
        }
        while let Ok((node, e)) = events.try_recv() {
            match e {
                ConnectionEvent::Lost {
                    at,
                    why,
                    unanswered,
                } => {
                    retries.lost += 1;
                    retries.unanswered += unanswered as u64;
                    faults.silent(
                        at.saturating_duration_since(begin),
                        node,
                        format!(
                            "a client's connection failed ({why}), {unanswered} transactions unanswered"
                        ),
                    );
                }
                ConnectionEvent::Answering { at } => {
                    retries.reconnected += 1;
                    faults.answering(at.saturating_duration_since(begin), node);
                }
            }
        }
        if !spec.local_clients && now >= next_sample && next_sample <= load_end {
            samples.push((now, progress.load(Ordering::Relaxed)));
            while next_sample <= now {
                next_sample += INTERVAL;
            }
        }
        let out = out_of_run(&faults, &mut cluster, spec.replicas);
        let waiting = (0..spec.replicas).any(|i| !out[i] && !done[i].exists());
        if !waiting && clients.iter().all(|(_, h)| h.is_finished()) {
            break;
        }
        if Instant::now() > deadline {
            cluster.stop(Duration::from_secs(2));
            for line in faults.lines() {
                eprintln!("  {line}");
            }
            return Err("the replicas did not finish their load in time".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let remote: Vec<Result<(LoadStats, Duration), String>> = clients
        .into_iter()
        .map(|(i, h)| {
            h.join()
                .map_err(|_| format!("a client of replica {i} panicked"))
                .and_then(|r| r.map_err(|e| format!("a client of replica {i}: {e}")))
        })
        .collect();
    // Followers learn the last commits with the next heartbeats.
    std::thread::sleep(Duration::from_millis(300));
    let out = out_of_run(&faults, &mut cluster, spec.replicas);
    let texts = cluster.stop_with_texts(Duration::from_secs(10));
    let mut nodes = texts
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            if out[i] {
                // Killed or dead: no counters, only what its clients counted.
                return Ok(BTreeMap::new());
            }
            t.map_err(|e| format!("node {i}: {e}"))
                .and_then(|t| parse_counters(&t))
        })
        .collect::<Result<Vec<_>, String>>()?;
    if !spec.local_clients {
        let per_replica = connections(spec);
        for (i, n) in nodes.iter_mut().enumerate() {
            let mut load = LoadStats::default();
            let mut measured = Duration::ZERO;
            for r in &remote[i * per_replica..(i + 1) * per_replica] {
                let (l, m) = r.clone()?;
                load.merge(&l);
                measured = measured.max(m);
            }
            n.retain(|k, _| !k.starts_with("kind."));
            let text = ServeReport::load_text(&load, measured.as_nanos() as u64);
            n.extend(parse_counters(&text)?);
        }
    }
    let live: Vec<bool> = out.iter().map(|o| !o).collect();
    let mut r = combine(&nodes, &live, partitions);
    if let PdurWorkload::Micro { ty, .. } = &spec.workload {
        // The replicas count every micro-benchmark transaction as "micro".
        for k in r.kinds.iter_mut().filter(|k| k.name == "micro") {
            k.name = ty.clone();
        }
    }
    r.timeline = if spec.local_clients {
        Timeline {
            interval_s: INTERVAL.as_secs_f64(),
            points: Vec::new(),
        }
    } else {
        Timeline::from_samples(INTERVAL, &samples)
    };
    r.retries = vec![
        ("client_connections_lost", retries.lost),
        ("txns_unanswered", retries.unanswered),
        ("reconnects", retries.reconnected),
    ];
    r.faults = faults;
    Ok(r)
}

/// Connections the clients of one replica use: up to 32 clients each.
fn connections(spec: &PdurSpec) -> usize {
    (spec.clients_per_partition as usize * spec.partitions as usize).div_ceil(32)
}

type ClientThread = std::thread::JoinHandle<Result<(LoadStats, Duration), String>>;

/// Starts the clients over TCP, `connections(spec)` threads per replica, replica by replica.
/// Each commit is counted in `progress` as it comes; a client's failed connections are sent on
/// `events` with its replica's id, and it connects again until the window is over.
fn remote_clients(
    spec: &PdurSpec,
    table: &PdurTable,
    progress: &Arc<AtomicU64>,
    events: &mpsc::Sender<(usize, ConnectionEvent)>,
) -> Result<Vec<(usize, ClientThread)>, String> {
    let workload = Workload::from_table(table)?;
    let per_replica = connections(spec);
    let clients = spec.clients_per_partition as usize * spec.partitions as usize;
    let mut out = Vec::new();
    for (i, &addr) in table.client_addrs.iter().enumerate() {
        for c in 0..per_replica {
            let inflight = clients / per_replica + usize::from(c < clients % per_replica);
            let load = RemoteLoad {
                addr,
                partitions: spec.partitions as usize,
                generators: workload
                    .generators(spec.seed ^ ((i as u64) << 32) ^ ((c as u64) << 40)),
                inflight,
                warmup: spec.warmup,
                duration: spec.duration,
                progress: Some(progress.clone()),
                watch: Some({
                    let events = events.clone();
                    Box::new(move |e| {
                        let _ = events.send((i, e));
                    })
                }),
            };
            let h = std::thread::Builder::new()
                .name(format!("pdur-client-{i}-{c}"))
                .spawn(move || {
                    remote::run(load)
                        .map(|r| (r.load, r.measured))
                        .map_err(|e| e.to_string())
                })
                .map_err(|e| format!("cannot start a client thread: {e}"))?;
            out.push((i, h));
        }
    }
    Ok(out)
}

/// Runs the micro-benchmark on the embedded engine with `spec.replicas` threads.
fn measure_embedded(spec: &PdurSpec) -> Result<PdurResult, String> {
    let PdurWorkload::Micro { ty, items } = &spec.workload else {
        return Err("--algorithm embedded-store runs pdur-micro only".into());
    };
    let (reads, writes, name) = micro_type(ty)?;
    let mut w = PdurMicro::new(
        PdurMicroConfig {
            reads,
            writes,
            items: *items,
        },
        name,
    )?;
    let opts = BenchOptions {
        threads: spec.replicas,
        warmup: spec.warmup,
        duration: spec.duration,
        seed: spec.seed,
        durable_results: false,
        durable_progress: false,
        config: Config::default(),
    };
    let r = run_bench::<Occ, _>(&mut w, &opts, |_, _| {});
    r.check.clone()?;
    let t = r.stats.total();
    let q = |q: f64| {
        if t.latency_ns.is_empty() {
            0.0
        } else {
            t.latency_ns.value_at_quantile(q) as f64 / 1e3
        }
    };
    let kinds = vec![KindFigures {
        name: name.to_string(),
        committed: t.committed,
        aborted: t.conflicts,
        p50_us: q(0.5),
        p90_us: q(0.9),
        p99_us: q(0.99),
    }];
    Ok(PdurResult {
        kinds,
        throughput: r.throughput(),
        measured_s: r.measured.as_secs_f64(),
        digests_equal: None,
        copies_compared: 0,
        cpu_us_per_txn: r.worker_cpu.as_secs_f64() * 1e6 / t.committed.max(1) as f64,
        ..PdurResult::default()
    })
}

/// Runs `spec`; the result holds the failures it injected and met.
pub fn measure_with_failures(spec: &PdurSpec) -> Result<PdurResult, String> {
    match spec.algorithm {
        PdurAlgorithm::Embedded => measure_embedded(spec),
        _ => measure_cluster(spec),
    }
}

/// Runs `spec`; a replica that ended or stopped answering unasked fails it.
pub fn measure(spec: &PdurSpec) -> Result<PdurResult, String> {
    let r = measure_with_failures(spec)?;
    if let Some(e) = r.faults.unasked().first() {
        return Err(format!(
            "replica {} failed unasked at {:.3} s: {:?}",
            e.node,
            e.at.as_secs_f64(),
            e.kind
        ));
    }
    Ok(r)
}

fn fail(msg: impl std::fmt::Display) -> i32 {
    eprintln!("error: {msg}");
    2
}

/// The run the command line asks for, or why it cannot run.
fn spec(
    args: &ClusterArgs,
    c: &Common,
    workload: PdurWorkload,
    clients_per_partition: u32,
    local_clients: bool,
) -> Result<PdurSpec, String> {
    let algorithm = PdurAlgorithm::parse(&args.algorithm).ok_or_else(|| {
        format!(
            "pdur-micro and twitter run with --algorithm pdur, dur or embedded-store, not {}",
            args.algorithm
        )
    })?;
    for (name, v) in [("--duration", c.duration), ("--warmup", c.warmup)] {
        if !v.is_finite() || !(0.0..=86_400.0).contains(&v) {
            return Err(format!(
                "{name} must be a number of seconds between 0 and 86400"
            ));
        }
    }
    if c.duration <= 0.0 {
        return Err("--duration must be positive".into());
    }
    for (given, flag) in [
        (args.iteration_ms.is_some(), "--iteration-ms"),
        (args.full_replicas.is_some(), "--full-replicas"),
        (
            args.replicas.is_some(),
            "--replicas (the replicas are --cluster N)",
        ),
        (args.no_hybrid, "--no-hybrid"),
        (args.replication.is_some(), "--replication"),
        (args.connect.is_some(), "--connect"),
    ] {
        if given {
            return Err(format!("{flag} does not apply to the P-DUR benchmarks"));
        }
    }
    let partitions = match (algorithm, args.partitions) {
        (PdurAlgorithm::Pdur, p) => p.unwrap_or(DEFAULT_PARTITIONS),
        (_, None | Some(1)) => 1,
        (a, Some(_)) => {
            return Err(format!(
                "--algorithm {} has one partition; --partitions is P-DUR's",
                a.name()
            ));
        }
    };
    let replicas = match algorithm {
        PdurAlgorithm::Embedded => {
            if args.cluster.is_some() {
                return Err("--algorithm embedded-store runs in this process: give --threads, not --cluster".into());
            }
            c.threads
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        }
        _ => args
            .cluster
            .ok_or("--cluster N (the replicas) is required for P-DUR and DUR")?,
    };
    if replicas == 0 || replicas > 64 {
        return Err("between 1 and 64 replicas or threads".into());
    }
    let cross_partition = match &workload {
        PdurWorkload::Micro { .. } => args.cross_partition.unwrap_or(0.0),
        PdurWorkload::Twitter { .. } => args
            .cross_partition
            .unwrap_or(phasedb_dist::pdur::workload::twitter::FOLLOW_CROSS),
    };
    if !(0.0..=1.0).contains(&cross_partition) {
        return Err("--cross-partition must be between 0 and 1".into());
    }
    let faults = args.fault_plan(replicas, true)?;
    if faults.is_some() && local_clients {
        return Err(
            "--kill-node with --local-clients: the replicas count their commits only at \
                    the end, so no timeline would show the failure; drop --local-clients"
                .into(),
        );
    }
    let spec = PdurSpec {
        algorithm,
        workload,
        replicas,
        partitions,
        cross_partition,
        clients_per_partition,
        local_clients,
        warmup: Duration::from_secs_f64(c.warmup),
        duration: Duration::from_secs_f64(c.duration),
        seed: c.seed,
        net: NetSettings {
            delay_us: args.delay_us,
            poll_us: args.poll_us,
        },
        faults,
    };
    Ok(spec)
}

/// Runs `phasedb bench pdur-micro|twitter`; returns the process exit code.
pub fn run(
    args: &ClusterArgs,
    c: &Common,
    workload: PdurWorkload,
    clients: u32,
    local_clients: bool,
) -> i32 {
    let spec = match spec(args, c, workload, clients, local_clients) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let result = match measure_with_failures(&spec) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let cluster = spec.algorithm != PdurAlgorithm::Embedded;
    let failures = FailureReport {
        faults: &result.faults,
        timeline: &result.timeline,
        retries: result.retries.clone(),
    };
    if c.json {
        let mut out = json(&spec, &result);
        if cluster {
            out["failures"] = failures.json();
        }
        println!("{out}");
    } else {
        print!("{}", table(&spec, &result));
        if cluster {
            print!("{}", failures.table());
            if spec.local_clients {
                println!(
                    "  (none: with --local-clients the replicas count their commits only at the end)"
                );
            }
        }
    }
    let mut code = 0;
    if result.digests_equal == Some(false) {
        eprintln!("error: live replicas disagree: partition digests differ");
        code = 1;
    }
    if cluster && failures.fails() {
        code = 1;
    }
    code
}

fn describe(spec: &PdurSpec) -> String {
    let w = match &spec.workload {
        PdurWorkload::Micro { ty, items } => format!("pdur-micro type {ty} over {items} items"),
        PdurWorkload::Twitter { users } => format!("twitter over {users} users"),
    };
    let who = match spec.algorithm {
        PdurAlgorithm::Pdur => format!(
            "P-DUR, {} replica(s) x {} partitions",
            spec.replicas, spec.partitions
        ),
        PdurAlgorithm::Dur => format!("DUR, {} replica(s)", spec.replicas),
        PdurAlgorithm::Embedded => format!("embedded store (OCC), {} threads", spec.replicas),
    };
    format!(
        "{w} on {who}, {:.1}% cross-partition, {} clients per partition",
        spec.cross_partition * 100.0,
        if spec.algorithm == PdurAlgorithm::Embedded {
            "1 closed-loop".to_string()
        } else {
            spec.clients_per_partition.to_string()
        }
    )
}

/// The result as the usual table.
pub fn table(spec: &PdurSpec, r: &PdurResult) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "{}", describe(spec));
    let _ = writeln!(
        out,
        "measured {:.2} s: {:.0} committed txn/s, {} committed, {} aborted ({:.2}%), {:.1} worker CPU µs/txn",
        r.measured_s,
        r.throughput,
        r.committed(),
        r.aborted(),
        r.abort_rate() * 100.0,
        r.cpu_us_per_txn
    );
    let _ = writeln!(
        out,
        "{:<10} {:>12} {:>10} {:>9} {:>9} {:>9}",
        "type", "committed", "aborted", "p50 ms", "p90 ms", "p99 ms"
    );
    for k in &r.kinds {
        let _ = writeln!(
            out,
            "{:<10} {:>12} {:>10} {:>9.3} {:>9.3} {:>9.3}",
            k.name,
            k.committed,
            k.aborted,
            k.p50_us / 1e3,
            k.p90_us / 1e3,
            k.p99_us / 1e3
        );
    }
    match r.digests_equal {
        Some(true) => {
            let _ = writeln!(
                out,
                "replicas agree: every partition's digest equal on every live replica ({} copies)",
                r.copies_compared
            );
        }
        Some(false) => {
            let _ = writeln!(out, "REPLICAS DISAGREE: partition digests differ");
        }
        None => {}
    }
    out
}

/// The result as one JSON object.
pub fn json(spec: &PdurSpec, r: &PdurResult) -> serde_json::Value {
    let kinds: Vec<serde_json::Value> = r
        .kinds
        .iter()
        .map(|k| {
            serde_json::json!({
                "type": k.name,
                "committed": k.committed,
                "aborted": k.aborted,
                "p50_ms": k.p50_us / 1e3,
                "p90_ms": k.p90_us / 1e3,
                "p99_ms": k.p99_us / 1e3,
            })
        })
        .collect();
    serde_json::json!({
        "workload": match &spec.workload {
            PdurWorkload::Micro { .. } => "pdur-micro",
            PdurWorkload::Twitter { .. } => "twitter",
        },
        "algorithm": spec.algorithm.name(),
        "replicas": spec.replicas,
        "partitions": spec.partitions,
        "cross_partition": spec.cross_partition,
        "clients_per_partition": spec.clients_per_partition,
        "measured_s": r.measured_s,
        "throughput": r.throughput,
        "committed": r.committed(),
        "aborted": r.aborted(),
        "abort_rate": r.abort_rate(),
        "cpu_us_per_txn": r.cpu_us_per_txn,
        "digests_equal": r.digests_equal,
        "types": kinds,
        "copies_compared": r.copies_compared,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(text: &str) -> BTreeMap<String, u64> {
        parse_counters(text).expect("counters")
    }

    #[test]
    fn replicas_counters_combine_and_a_differing_digest_is_seen() {
        let a = node(
            "node 0\nmeasured_ns 2000000000\ncommitted 200\naborted 2\nkind.I.committed 200\n\
             kind.I.aborted 2\nkind.I.p90_ns 3000000\ndigest.0 7\ndigest.1 9\ncpu_ns.0 100000\n",
        );
        let b = node(
            "node 1\nmeasured_ns 1000000000\ncommitted 100\naborted 0\nkind.I.committed 100\n\
             kind.I.aborted 0\nkind.I.p90_ns 5000000\ndigest.0 7\ndigest.1 9\ncpu_ns.1 200000\n",
        );
        let r = combine(&[a.clone(), b.clone()], &[true, true], 2);
        assert_eq!(r.committed(), 300);
        assert_eq!(r.aborted(), 2);
        assert!((r.throughput - 200.0).abs() < 1e-9, "{}", r.throughput);
        assert_eq!(r.kinds[0].p90_us, 5000.0);
        assert_eq!(r.digests_equal, Some(true));
        assert_eq!(r.copies_compared, 4);
        assert!((r.cpu_us_per_txn - 1.0).abs() < 1e-9);
        let mut c = b;
        c.insert("digest.1".into(), 10);
        assert_eq!(
            combine(&[a.clone(), c.clone()], &[true, true], 2).digests_equal,
            Some(false)
        );
        // A replica out of the run (killed) counts its clients' commits, not its digests.
        let out = combine(&[a, c], &[true, false], 2);
        assert_eq!(out.digests_equal, Some(true));
        assert_eq!(out.copies_compared, 2);
        assert_eq!(out.committed(), 300);
        assert!(parse_counters("committed x").is_err());
    }
}
