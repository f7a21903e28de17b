//! Runs the points of a STAR experiment on real clusters: each point starts `phasedb node` processes
//! on 127.0.0.1 with a `[star]` table, lets the nodes generate their own load and measures them with
//! the STAR cluster benchmark (`phasedb_dist::star::bench`, the one `phasedb bench --algorithm star`
//! runs), which ends by comparing every partition's replicas and running the workload's check on
//! every node. With several runs the points run in rounds ([`run_rounds`]), as the RAMP experiments'
//! do.

use std::time::Duration;

use phasedb_dist::ramp::bench::launch::ProcessCluster;
use phasedb_dist::star::bench::{self, BenchReport, BenchSettings};
use phasedb_dist::star::spread_placement;
use phasedb_net::config::{NetSettings, ServerSettings};
use phasedb_net::{StarAlgorithm, StarConfig};

use super::super::cluster_rounds::{ClusterPoint, run_rounds};
use super::super::settings::{Settings, load_average};
use super::super::sweep::{Metrics, Row};
use super::contenders::Contender;
use crate::cluster::star_workload::StarWorkload;

/// `phasedb node` processes of every point (the paper used 4 machines; this machine has 2 cores).
pub const NODES: u32 = 2;
/// Nodes holding every partition: node 0, also the coordinator (§3).
pub const FULL_REPLICAS: u32 = 1;
/// Copies of each partition, its primary included (§8.1.3).
pub const REPLICAS: u32 = 2;
/// Partitions of the data: one per node, which masters it (TPC-C: one warehouse each).
pub const PARTITIONS: u32 = NODES;

/// Fewest iterations a measured window spans: commits are released when their phase ends (§4),
/// so a window of n iterations counts n ± 1 bursts of them; at 40 the burst cut at either end moves
/// the throughput by at most about 2.5%.
const MIN_ITERATIONS: f64 = 40.0;
/// Fewest iterations of warm-up.
const MIN_WARMUP_ITERATIONS: f64 = 3.0;

/// One point of a STAR experiment, not yet run.
#[derive(Clone, Debug)]
pub struct Point {
    /// The algorithm the nodes run and how it replicates.
    pub contender: Contender,
    /// What the nodes run.
    pub workload: StarWorkload,
    /// One partitioned phase plus one single-master phase, in ms (§4.3); the baselines' group
    /// commit interval too (§8.1.3: 10 ms, as STAR's iteration).
    pub iteration_ms: f64,
    /// Hybrid replication (operations in the partitioned phase, §5.2) or values throughout.
    pub hybrid: bool,
    /// Share of cross-partition transactions the nodes generate (0 to 1).
    pub cross_partition: f64,
    /// One-way delay the nodes add to every message they send, µs (`[net] delay_us`; 0 = none).
    pub delay_us: u64,
    /// The parameters that vary between points, in CSV order.
    pub params: Vec<(String, String)>,
    /// The plot line it belongs to.
    pub series: String,
    /// Its x coordinate.
    pub x: f64,
}

/// The workload's name in rows and series: the TPC-C mix ("new-order", "payment") or "ycsb".
pub fn workload_label(w: &StarWorkload) -> &'static str {
    match w {
        StarWorkload::Ycsb(_) => "ycsb",
        StarWorkload::Tpcc(c) => c.mix.name(),
    }
}

/// Each partition's primary and secondary: partition p is mastered by node p and copied on the
/// other, so every node masters a different portion of the data, as in the paper's Figure 2 and
/// §8.1.3, and the full replica (node 0) also runs its partition's single-partition transactions.
fn placement() -> Vec<Vec<u32>> {
    spread_placement(NODES, FULL_REPLICAS, REPLICAS, PARTITIONS)
        .expect("the experiments' cluster has room for every copy")
}

/// Full replicas of a point's cluster: PB-OCC's backup holds everything, as its primary does
/// (§8.1.2); the others have [`FULL_REPLICAS`].
fn full_replicas(c: Contender) -> u32 {
    if c.algorithm == StarAlgorithm::PbOcc {
        NODES
    } else {
        FULL_REPLICAS
    }
}

/// The `[star]` table of a point's cluster.
pub fn star_table(s: &Settings, p: &Point) -> StarConfig {
    StarConfig {
        algorithm: p.contender.algorithm,
        replication: p.contender.replication,
        group_commit_ms: p.iteration_ms,
        full_replicas: full_replicas(p.contender),
        replicas_per_partition: REPLICAS,
        iteration_ms: p.iteration_ms,
        hybrid_replication: p.hybrid,
        cross_partition: p.cross_partition,
        placement: Some(placement()),
        workload: Some(p.workload.name().into()),
        workload_args: p.workload.args(),
        seed: s.seed,
        ..StarConfig::new(PARTITIONS)
    }
}

/// Warm-up and measured window of a point: the settings', stretched to span enough iterations
/// (only a few with `--quick`, whose numbers are not meant to be read).
pub fn windows(s: &Settings, iteration_ms: f64) -> (Duration, Duration) {
    let iteration = Duration::from_secs_f64(iteration_ms / 1e3);
    let least = if s.quick { 3.0 } else { MIN_ITERATIONS };
    (
        s.warmup.max(iteration.mul_f64(MIN_WARMUP_ITERATIONS)),
        s.duration.max(iteration.mul_f64(least)),
    )
}

/// What one run of a point measured, and how busy the machine was when it ended.
pub struct Run {
    report: BenchReport,
    /// The 1-minute load average right after the run: other processes competing for the cores
    /// (Linux only).
    load: Option<f64>,
}

fn run_once(s: &Settings, p: &Point) -> Result<Run, String> {
    let binary = crate::this_program().map_err(|e| format!("cannot find phasedb: {e}"))?;
    let mut cluster = ProcessCluster::start_star(
        &binary,
        NODES as usize,
        star_table(s, p),
        ServerSettings::default(),
        NetSettings {
            delay_us: p.delay_us,
            ..NetSettings::default()
        },
        true,
    )?;
    let config = cluster.config.clone();
    let (warmup, duration) = windows(s, p.iteration_ms);
    let settings = BenchSettings {
        warmup,
        duration,
        ..BenchSettings::default()
    };
    let report = bench::run(&config, &settings, |_| cluster.exited().map_or(Ok(()), Err));
    let load = load_average();
    let clean = cluster.stop(Duration::from_secs(10));
    if clean < NODES as usize {
        eprintln!(
            "        {} of {NODES} nodes did not shut down cleanly",
            NODES as usize - clean
        );
    }
    Ok(Run {
        report: report?,
        load,
    })
}

fn metrics(r: &BenchReport) -> Metrics {
    Metrics {
        throughput: r.throughput(),
        abort_rate: r.abort_rate(),
        p50_us: r.latency_us(0.5),
        p99_us: r.latency_us(0.99),
        p999_us: r.latency_us(0.999),
        committed: r.committed(),
    }
}

/// "ok" when every partition's replicas agree and every node passed the workload's check after
/// the load stopped, else what went wrong.
fn consistency(r: &BenchReport) -> String {
    let mut problems: Vec<String> = r
        .replicas
        .problems
        .iter()
        .map(|p| format!("replicas disagree: {p}"))
        .collect();
    problems.extend(
        r.checks
            .iter()
            .filter_map(|c| c.as_ref().err())
            .map(|e| format!("check failed: {e}")),
    );
    if problems.is_empty() {
        "ok".into()
    } else {
        problems.join("; ")
    }
}

/// Figures of a run beyond the standard metrics, as CSV columns.
fn extra(run: &Run) -> Vec<(String, String)> {
    let r = &run.report;
    let c = &r.coordinator;
    let copies: usize = r.replicas.partitions.iter().map(|(_, s)| s.len()).sum();
    [
        ("measured_s", format!("{:.3}", r.measured.as_secs_f64())),
        ("bytes_per_txn", format!("{:.1}", r.bytes_per_commit())),
        (
            "bytes_sent_per_txn",
            format!("{:.1}", r.bytes_sent_per_commit()),
        ),
        ("records_per_txn", format!("{:.3}", r.records_per_commit())),
        ("cross_share", format!("{:.4}", r.cross_share())),
        ("phases_per_s", format!("{:.1}", r.phases_per_s())),
        (
            "partitioned_share",
            format!("{:.4}", r.share(c.partitioned_ns)),
        ),
        (
            "single_master_share",
            format!("{:.4}", r.share(c.single_master_ns)),
        ),
        ("fence_share", format!("{:.4}", r.share(c.fence_ns))),
        ("min_interval", format!("{:.0}", r.min_interval())),
        ("copies_compared", copies.to_string()),
        ("nodes_checked", r.checks.len().to_string()),
        (
            "load_1min",
            run.load.map_or(String::new(), |l| format!("{l:.2}")),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

fn constants(s: &Settings, p: &Point) -> Vec<(String, String)> {
    let (warmup, duration) = windows(s, p.iteration_ms);
    let mut out: Vec<(String, String)> = [
        ("nodes", NODES.to_string()),
        ("full_replicas", full_replicas(p.contender).to_string()),
        ("replicas_per_partition", REPLICAS.to_string()),
        ("partitions", PARTITIONS.to_string()),
        ("warmup_s", warmup.as_secs_f64().to_string()),
        ("duration_s", duration.as_secs_f64().to_string()),
        ("seed", s.seed.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    if let StarWorkload::Ycsb(c) = &p.workload {
        out.push((
            "rows_per_partition".into(),
            c.rows_per_partition.to_string(),
        ));
    }
    out
}

fn describe(p: &Point) -> String {
    p.params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

impl ClusterPoint for Point {
    type Run = Run;
    fn describe(&self) -> String {
        describe(self)
    }
    fn run_once(&self, s: &Settings) -> Result<Run, String> {
        run_once(s, self)
    }
    fn summary(run: &Run) -> String {
        let r = &run.report;
        format!(
            "{:.0} txn/s, {:.0} replication bytes/txn, {:.1} phases/s, consistency {}, load {}",
            r.throughput(),
            r.bytes_per_commit(),
            r.phases_per_s(),
            consistency(r),
            run.load.map_or("?".into(), |l| format!("{l:.2}")),
        )
    }
}

/// Runs every point `s.runs` times (round by round, [`run_rounds`]) and returns one row per point,
/// holding the run of median throughput; a point whose run fails, or whose replicas disagree or
/// fail the workload's check, does not count.
pub fn run(s: &Settings, points: &[Point]) -> Vec<Row> {
    points
        .iter()
        .zip(run_rounds(s, points))
        .map(|(p, mut r)| row(s, p, &mut r.runs, r.failure))
        .collect()
}

fn row(s: &Settings, p: &Point, runs: &mut Vec<Run>, failure: Option<String>) -> Row {
    let mut params = p.params.clone();
    params.extend(constants(s, p));
    let rounds = runs.iter().map(|r| r.report.throughput()).collect();
    // Every run must be consistent, not only the one reported.
    let inconsistent = runs
        .iter()
        .map(|r| consistency(&r.report))
        .find(|c| c != "ok");
    runs.sort_by(|a, b| a.report.throughput().total_cmp(&b.report.throughput()));
    let median = (!runs.is_empty()).then(|| runs.swap_remove(runs.len() / 2));
    let check = match (&inconsistent, &median) {
        (Some(c), _) => c.clone(),
        (None, Some(_)) => "ok".to_string(),
        (None, None) => "not run".to_string(),
    };
    let (metrics, applicable) = match (&median, failure) {
        (_, Some(e)) => (Metrics::default(), Err(e)),
        (None, None) => (Metrics::default(), Err("not run".to_string())),
        (Some(r), None) => {
            let m = metrics(&r.report);
            let ok = if let Some(c) = inconsistent {
                Err(c)
            } else if m.committed == 0 {
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
        check,
        applicable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_node_masters_one_partition_and_copies_the_other() {
        assert_eq!(placement(), vec![vec![0, 1], vec![1, 0]]);
        let star = StarConfig {
            full_replicas: FULL_REPLICAS,
            replicas_per_partition: REPLICAS,
            placement: Some(placement()),
            ..StarConfig::new(PARTITIONS)
        };
        let layout = phasedb_dist::star::Layout::new(NODES, &star).unwrap();
        assert_eq!(layout.mastered(0), vec![0]);
        assert_eq!(layout.mastered(1), vec![1]);
        assert!(layout.is_full(0) && !layout.is_full(1));
    }
}
