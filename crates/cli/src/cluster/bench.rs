//! `phasedb bench ycsb --cluster N`: starts N node processes on 127.0.0.1 (or uses `--connect FILE`),
//! runs closed-loop clients against them and reports like the single-node bench.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use phasedb_dist::Algorithm;
use phasedb_dist::ramp::bench::faults::{FaultPlan, Faults};
use phasedb_dist::ramp::bench::launch::ProcessCluster;
use phasedb_dist::ramp::bench::workload::YcsbRamp;
use phasedb_dist::ramp::bench::{BenchConfig, BenchReport};
use phasedb_net::ClusterConfig;
use phasedb_net::config::{NetSettings, ServerSettings};

use crate::bench::Common;

/// STAR's name among the algorithms.
pub const STAR: &str = "star";

/// STAR and the baselines of its paper (§8.1.2), which run on STAR's nodes; the last two are not
/// built yet and are refused with a message.
pub const STAR_FAMILY: [&str; 4] = [STAR, "pb-occ", "dist-occ", "dist-s2pl"];

/// Calvin's name (STAR §8.3's comparison); it runs on STAR's cluster files and benchmark pieces.
pub const CALVIN: &str = "calvin";

fn algorithm_names() -> Vec<&'static str> {
    Algorithm::ALL
        .iter()
        .map(|a| a.name())
        .chain(STAR_FAMILY)
        .chain(super::pdur::PDUR_FAMILY)
        .chain([CALVIN])
        .collect()
}

/// Flags of the cluster benchmark.
#[derive(Args, Debug, Clone)]
pub struct ClusterArgs {
    /// Run against a cluster of N `phasedb node` processes started on 127.0.0.1 (ycsb; ycsb or
    /// tpcc under --algorithm star).
    #[arg(long, global = true)]
    pub cluster: Option<usize>,
    /// Run against an already running cluster described by this file instead of starting one, or
    /// (HOST:PORT, ycsb only) against `phasedb serve` through the client (see --pipeline).
    #[arg(long, global = true, conflicts_with = "cluster")]
    pub connect: Option<PathBuf>,
    /// Distributed algorithm.
    #[arg(long, global = true, default_value = "ramp-f", value_parser = clap::builder::PossibleValuesParser::new(algorithm_names()))]
    pub algorithm: String,
    /// Concurrent closed-loop clients.
    #[arg(long, global = true, default_value_t = 64)]
    pub clients: usize,
    /// RAMP-H Bloom filter size in bits.
    #[arg(long, global = true, default_value_t = 256)]
    pub bloom_bits: usize,
    /// RAMP-H Bloom filter hash functions.
    #[arg(long, global = true, default_value_t = 4)]
    pub bloom_hashes: u8,
    /// One-way delay injected into every message, in microseconds.
    #[arg(long, global = true, default_value_t = 0)]
    pub delay_us: u64,
    /// Microseconds an idle event loop (servers and client endpoints) polls before it sleeps.
    #[arg(long, global = true, default_value_t = NetSettings::default().poll_us)]
    pub poll_us: u64,
    /// Milliseconds an overwritten version stays readable before GC.
    #[arg(long, global = true, default_value_t = 5000)]
    pub gc_window_ms: u64,
    /// Milliseconds before a prepared write without COMMIT is finished by CTP.
    #[arg(long, global = true, default_value_t = 1000)]
    pub ctp_timeout_ms: u64,
    /// Share of RAMP writes that skip COMMIT so CTP must finish them (the paper's §5.3).
    #[arg(long, global = true, default_value_t = 0.0)]
    pub skip_commit: f64,
    /// Leave the nodes `--cluster` starts and the client threads to the scheduler, instead of node i
    /// and client thread i on core i.
    #[arg(long, global = true)]
    pub no_pin: bool,
    /// STAR: share of cross-partition transactions the nodes generate, 0 to 1 (default 0.1).
    #[arg(long, global = true)]
    pub cross_partition: Option<f64>,
    /// STAR: milliseconds of one iteration, a partitioned phase and a single-master phase (default
    /// 10; fractions such as 1.5 allowed).
    #[arg(long, global = true)]
    pub iteration_ms: Option<f64>,
    /// STAR: nodes with a full copy of the database, nodes 0..F; node 0 coordinates (default 1).
    #[arg(long, global = true)]
    pub full_replicas: Option<u32>,
    /// STAR: copies of each partition, its primary included (default 2, at most the nodes).
    #[arg(long, global = true)]
    pub replicas: Option<u32>,
    /// STAR: partitions of the data (default: one per node; TPC-C has one per warehouse).
    #[arg(long, global = true)]
    pub partitions: Option<u32>,
    /// STAR: value replication in both phases, instead of operation replication in the
    /// partitioned phase (hybrid replication, STAR §5.2).
    #[arg(long, global = true)]
    pub no_hybrid: bool,
    /// STAR's baselines (pb-occ): asynchronous replication with a 10 ms group commit (default), or
    /// synchronous replication (write locks held until the backup acknowledged).
    #[arg(long, global = true, value_parser = ["async", "sync"])]
    pub replication: Option<String>,
    /// STAR and its baselines: where partitions' primaries go. `spread` (default): round robin
    /// over every node, as the experiments place them, so each node masters a share and
    /// cross-partition transactions cross nodes; `partial`: on the partial replicas only, the full
    /// replicas holding secondaries.
    #[arg(long, global = true, value_parser = ["spread", "partial"])]
    pub placement: Option<String>,
    /// Calvin: the replica groups' sizes in nodes, as STAR §8.3 names them: 1:3, 2:2 or 4 on
    /// four nodes (default: one group of every node).
    #[arg(long, global = true)]
    pub calvin_groups: Option<String>,
    /// Kill this node (SIGKILL, not a request to stop) during the run (with --cluster and --at).
    #[arg(long, global = true)]
    pub kill_node: Option<usize>,
    /// Seconds after the load starts (warm-up included) to kill --kill-node.
    #[arg(long, global = true)]
    pub at: Option<f64>,
    /// Start the killed node again this many seconds after the kill, the same `phasedb node`
    /// on the same cluster file (STAR, and P-DUR/DUR with `--rejoin`: the others have no rejoin).
    #[arg(long, global = true)]
    pub restart_after: Option<f64>,
}

impl ClusterArgs {
    /// The failure to inject, or why the flags cannot run; `restarts`: whether the algorithm
    /// lets a killed node rejoin.
    pub fn fault_plan(&self, nodes: usize, restarts: bool) -> Result<Option<FaultPlan>, String> {
        if self.restart_after.is_some() && !restarts {
            return Err(format!(
                "--restart-after: a restarted {} node cannot rejoin its cluster (only star's, pdur's and dur's can)",
                self.algorithm
            ));
        }
        FaultPlan::from_flags(
            self.kill_node,
            self.at,
            self.restart_after,
            nodes,
            self.connect.is_none() && self.cluster.is_some(),
        )
    }

    /// Whether the run is STAR's or one of its baselines' (on STAR's nodes).
    pub fn is_star(&self) -> bool {
        STAR_FAMILY.contains(&self.algorithm.as_str()) || self.algorithm == CALVIN
    }

    /// The first STAR-only flag given, if any (for runs of other algorithms, which refuse it).
    pub fn star_flag(&self) -> Option<&'static str> {
        [
            (self.cross_partition.is_some(), "--cross-partition"),
            (self.iteration_ms.is_some(), "--iteration-ms"),
            (self.full_replicas.is_some(), "--full-replicas"),
            (self.replicas.is_some(), "--replicas"),
            (self.partitions.is_some(), "--partitions"),
            (self.no_hybrid, "--no-hybrid"),
            (self.replication.is_some(), "--replication"),
            (self.calvin_groups.is_some(), "--calvin-groups"),
            (self.placement.is_some(), "--placement"),
        ]
        .into_iter()
        .find_map(|(given, name)| given.then_some(name))
    }
}

/// The YCSB flags of `phasedb bench ycsb` that the cluster benchmark honours.
pub struct Shape {
    /// `--rows`: items.
    pub rows: Option<u64>,
    /// `--ops`: items per transaction.
    pub ops: Option<usize>,
    /// `--read-ratio`: share of read-only transactions.
    pub read_ratio: Option<f64>,
    /// `--theta`: zipfian skew.
    pub theta: Option<f64>,
    /// `--column-size`: bytes per value.
    pub value_size: Option<usize>,
}

fn fail(msg: impl std::fmt::Display) -> i32 {
    eprintln!("error: {msg}");
    2
}

/// Runs the cluster benchmark; returns the process exit code.
pub fn run(args: &ClusterArgs, c: &Common, shape: Shape) -> i32 {
    let algorithm =
        Algorithm::parse(&args.algorithm).expect("clap checked the algorithm, and star runs apart");
    let defaults = YcsbRamp::default();
    let workload = YcsbRamp {
        items: shape.rows.unwrap_or(defaults.items),
        ops: shape.ops.unwrap_or(defaults.ops),
        read_ratio: shape.read_ratio.unwrap_or(defaults.read_ratio),
        theta: shape.theta.unwrap_or(defaults.theta),
        value_size: shape.value_size.unwrap_or(defaults.value_size),
        read_write_ratio: 0.0,
    };
    for (name, v) in [("--duration", c.duration), ("--warmup", c.warmup)] {
        if !v.is_finite() || !(0.0..=86_400.0).contains(&v) {
            return fail(format!(
                "{name} must be a number of seconds between 0 and 86400"
            ));
        }
    }
    if !(0.0..=1.0).contains(&args.skip_commit) {
        return fail("--skip-commit must be between 0 and 1");
    }
    let bench = BenchConfig {
        algorithm,
        clients: args.clients,
        threads: c
            .threads
            .unwrap_or_else(|| phasedb_dist::ramp::bench::default_threads(args.clients)),
        warmup: Duration::from_secs_f64(c.warmup),
        duration: Duration::from_secs_f64(c.duration),
        seed: c.seed,
        workload,
        bloom_bits: args.bloom_bits,
        bloom_hashes: args.bloom_hashes,
        verify: c.verify,
        skip_commit: args.skip_commit,
        pin: !args.no_pin,
    };
    if let Err(e) = bench.validate() {
        return fail(e);
    }
    let server = ServerSettings {
        gc_window_ms: args.gc_window_ms,
        ctp_timeout_ms: args.ctp_timeout_ms,
        ..ServerSettings::default()
    };
    let net = NetSettings {
        delay_us: args.delay_us,
        poll_us: args.poll_us,
    };
    let nodes = args.cluster.unwrap_or(0);
    let plan = match args.fault_plan(nodes, false) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let (config, mut processes) = match (&args.connect, args.cluster) {
        (Some(path), _) => match ClusterConfig::load(path) {
            Ok(cfg) => (cfg, None),
            Err(e) => return fail(e),
        },
        (None, Some(n)) => {
            let binary = match crate::this_program() {
                Ok(b) => b,
                Err(e) => return fail(format!("cannot find the phasedb binary: {e}")),
            };
            match ProcessCluster::start(&binary, n, server, net, !args.no_pin) {
                Ok(p) => (p.config.clone(), Some(p)),
                Err(e) => return fail(e),
            }
        }
        (None, None) => return fail("--cluster N or --connect FILE is required"),
    };
    let mut faults = Faults::new(plan);
    let report = with_progress(&config, &bench, |elapsed| {
        faults.tick(processes.as_mut(), elapsed)
    });
    let clean = processes.map(|p| {
        let killed = p.killed();
        (
            p.config.nodes.len() - killed,
            p.stop(Duration::from_secs(5)),
        )
    });
    let mut report = match report {
        Ok(r) => r,
        Err(e) => {
            for line in faults.lines() {
                eprintln!("  {line}");
            }
            return fail(e);
        }
    };
    for e in std::mem::take(&mut report.silences.events) {
        faults.note(e);
    }
    let failures = super::failures::FailureReport {
        faults: &faults,
        timeline: &report.timeline,
        retries: vec![("resent_requests", report.resends)],
    };
    if c.json {
        let mut out = super::report::json(&report, &bench, &config);
        out["failures"] = failures.json();
        println!("{out}");
    } else {
        print!("{}", super::report::table(&report, &bench, &config));
        print!("{}", failures.table());
    }
    if let Some((n, clean)) = clean
        && clean < n
    {
        eprintln!(
            "warning: {} of {n} nodes did not shut down cleanly",
            n - clean
        );
    }
    let failed = failures.fails();
    match &report.verified {
        Some(Err(_)) => 1,
        _ => failed as i32,
    }
}

fn with_progress(
    config: &ClusterConfig,
    bench: &BenchConfig,
    mut on_tick: impl FnMut(Duration),
) -> Result<BenchReport, String> {
    let total_ms = (bench.warmup + bench.duration).as_millis() as u64;
    let bar = ProgressBar::new(total_ms.max(1));
    bar.set_style(
        ProgressStyle::with_template("{spinner} {prefix} [{bar:30}] {elapsed}/{duration} {msg}")
            .expect("valid progress template")
            .progress_chars("=> "),
    );
    bar.set_prefix(format!(
        "ycsb on {} with {} nodes",
        bench.algorithm.name(),
        config.nodes.len()
    ));
    let mut last = (Duration::ZERO, 0u64);
    let warmup = bench.warmup;
    let result = phasedb_dist::ramp::bench::run(config, bench, |elapsed, finished| {
        on_tick(elapsed);
        bar.set_position(elapsed.as_millis() as u64);
        let rate = (finished - last.1) as f64 / (elapsed - last.0).as_secs_f64().max(1e-9);
        let phase = if elapsed < warmup {
            "warm-up"
        } else {
            "measuring"
        };
        bar.set_message(format!("{phase}, {rate:.0} txn/s"));
        last = (elapsed, finished);
    });
    bar.finish_and_clear();
    result
}
