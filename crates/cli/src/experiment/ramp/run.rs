//! Runs the points of a RAMP experiment on real clusters: each point starts `phasedb node` processes
//! on 127.0.0.1, runs the cluster benchmark against them, stops them and reads their final counters.
//! With several runs, the points run in rounds ([`run_rounds`]).

use std::time::Duration;

use phasedb_dist::Algorithm;
use phasedb_dist::ramp::bench::launch::ProcessCluster;
use phasedb_dist::ramp::bench::workload::YcsbRamp;
use phasedb_dist::ramp::bench::{BenchConfig, BenchReport};
use phasedb_dist::ramp::server::ServerStats;
use phasedb_net::config::{NetSettings, ServerSettings};

use super::super::Settings;
use super::super::cluster_rounds::{ClusterPoint, run_rounds};
use super::super::sweep::{Metrics, Row};

/// One point of a RAMP experiment, not yet run.
#[derive(Clone, Debug)]
pub struct Point {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// `phasedb node` processes.
    pub servers: usize,
    /// Closed-loop clients.
    pub clients: usize,
    /// The YCSB shape.
    pub workload: YcsbRamp,
    /// Share of writes whose COMMIT is dropped (left to cooperative termination).
    pub skip_commit: f64,
    /// The parameters that vary between points, after the algorithm, in CSV order.
    pub params: Vec<(String, String)>,
    /// The plot line it belongs to.
    pub series: String,
    /// Its x coordinate.
    pub x: f64,
}

/// What one run of a point measured.
pub struct Run {
    report: BenchReport,
    nodes: Vec<Result<ServerStats, String>>,
}

/// CTP timeout of the experiments' servers, short so dropped COMMITs finish within a point.
pub const CTP_TIMEOUT_MS: u64 = 200;
/// Time a point waits after its clients stop, so CTP can finish writes whose COMMIT was dropped.
const CTP_SETTLE: Duration = Duration::from_millis(8 * CTP_TIMEOUT_MS);

fn run_once(s: &Settings, p: &Point) -> Result<Run, String> {
    let binary = crate::this_program().map_err(|e| format!("cannot find phasedb: {e}"))?;
    let server = ServerSettings {
        ctp_timeout_ms: CTP_TIMEOUT_MS,
        ..ServerSettings::default()
    };
    let cluster = ProcessCluster::start(&binary, p.servers, server, NetSettings::default(), true)?;
    let bench = BenchConfig {
        algorithm: p.algorithm,
        clients: p.clients,
        threads: phasedb_dist::ramp::bench::default_threads(p.clients),
        warmup: s.warmup,
        duration: s.duration,
        seed: s.seed,
        workload: p.workload.clone(),
        bloom_bits: phasedb_dist::ramp::bloom::DEFAULT_BITS,
        bloom_hashes: phasedb_dist::ramp::bloom::DEFAULT_HASHES,
        verify: false,
        skip_commit: p.skip_commit,
        pin: true,
    };
    let report = phasedb_dist::ramp::bench::run(&cluster.config, &bench, |_, _| {});
    if p.skip_commit > 0.0 {
        std::thread::sleep(CTP_SETTLE);
    }
    let nodes = cluster.stop_with_stats(Duration::from_secs(5));
    for (id, n) in nodes.iter().enumerate() {
        if let Err(e) = n {
            eprintln!("        node {id} reported no counters: {e}");
        }
    }
    Ok(Run {
        report: report?,
        nodes,
    })
}

fn metrics(r: &BenchReport) -> Metrics {
    let t = r.stats.total();
    let attempts = t.committed + t.aborted;
    Metrics {
        throughput: r.throughput(),
        abort_rate: if attempts == 0 {
            0.0
        } else {
            t.aborted as f64 / attempts as f64
        },
        p50_us: t.latency_us(0.5),
        p99_us: t.latency_us(0.99),
        p999_us: t.latency_us(0.999),
        committed: t.committed,
    }
}

/// Counters the reports use beyond the standard metrics, as CSV columns.
fn extra(run: &Run) -> Vec<(String, String)> {
    let read = &run.report.stats.read;
    let write = &run.report.stats.write;
    let two_round = if read.committed == 0 {
        0.0
    } else {
        read.two_round_reads as f64 / read.committed as f64
    };
    let reported: Vec<&ServerStats> = run.nodes.iter().flatten().collect();
    let sum = |f: fn(&ServerStats) -> u64| reported.iter().map(|n| f(n)).sum::<u64>();
    vec![
        ("write_txns".into(), write.committed.to_string()),
        ("two_round_share".into(), format!("{two_round:.4}")),
        ("restarts".into(), read.restarts.to_string()),
        ("nodes_reporting".into(), reported.len().to_string()),
        (
            "pending_after".into(),
            sum(|n| n.pending as u64).to_string(),
        ),
        ("ctp_commits".into(), sum(|n| n.ctp_commits).to_string()),
        ("ctp_aborts".into(), sum(|n| n.ctp_aborts).to_string()),
        ("fast_commits".into(), sum(|n| n.fast_commits).to_string()),
    ]
}

fn constants(s: &Settings, p: &Point) -> Vec<(String, String)> {
    let w = &p.workload;
    [
        ("servers", p.servers.to_string()),
        ("clients", p.clients.to_string()),
        ("items", w.items.to_string()),
        ("ops", w.ops.to_string()),
        ("read_ratio", w.read_ratio.to_string()),
        ("theta", w.theta.to_string()),
        ("value_size", w.value_size.to_string()),
        ("skip_commit", p.skip_commit.to_string()),
        ("warmup_s", s.warmup.as_secs_f64().to_string()),
        ("duration_s", s.duration.as_secs_f64().to_string()),
        ("seed", s.seed.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

fn describe(p: &Point) -> String {
    let mut parts = vec![format!("algorithm={}", p.algorithm.name())];
    parts.extend(p.params.iter().map(|(k, v)| format!("{k}={v}")));
    parts.join(" ")
}

impl ClusterPoint for Point {
    type Run = Run;
    fn describe(&self) -> String {
        describe(self)
    }
    fn run_once(&self, s: &Settings) -> Result<Run, String> {
        run_once(s, self)
    }
    fn summary(r: &Run) -> String {
        let m = metrics(&r.report);
        format!(
            "{:.0} txn/s, p50 {:.0} µs, p99 {:.0} µs",
            m.throughput, m.p50_us, m.p99_us
        )
    }
}

/// Runs every point `s.runs` times (round by round, [`run_rounds`]) and returns one row per point,
/// holding the run of median throughput; a point whose run fails is marked not applicable.
pub fn run(s: &Settings, points: &[Point]) -> Vec<Row> {
    points
        .iter()
        .zip(run_rounds(s, points))
        .map(|(p, mut r)| row(s, p, &mut r.runs, r.failure))
        .collect()
}

fn row(s: &Settings, p: &Point, runs: &mut Vec<Run>, failure: Option<String>) -> Row {
    let mut params = vec![("algorithm".to_string(), p.algorithm.name().to_string())];
    params.extend(p.params.iter().cloned());
    params.extend(constants(s, p));
    let rounds = runs.iter().map(|r| r.report.throughput()).collect();
    runs.sort_by(|a, b| a.report.throughput().total_cmp(&b.report.throughput()));
    let median = (!runs.is_empty()).then(|| runs.swap_remove(runs.len() / 2));
    let (metrics, applicable) = match (&median, failure) {
        (_, Some(e)) => (Metrics::default(), Err(e)),
        (None, None) => (Metrics::default(), Err("not run".to_string())),
        (Some(r), None) => {
            let m = metrics(&r.report);
            let ok = if m.committed == 0 {
                Err("no transaction committed".to_string())
            } else {
                Ok(())
            };
            (m, ok)
        }
    };
    if let Some(r) = &median {
        params.extend(extra(r));
    }
    Row {
        params,
        series: p.series.clone(),
        x: p.x,
        metrics,
        rounds,
        check: "not verified".into(),
        applicable,
    }
}
