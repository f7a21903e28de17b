//! Runs the points of a P-DUR experiment: each starts its own replicas (or the embedded store)
//! through the P-DUR benchmark (`crate::cluster::pdur::measure`, what `phasedb bench pdur-micro`
//! runs), which ends by comparing every replica's per-partition digests. With several runs the
//! points run in rounds ([`run_rounds`]), as the other cluster experiments' do.

use std::time::Duration;

use phasedb_net::config::NetSettings;

use super::super::cluster_rounds::{ClusterPoint, run_rounds};
use super::super::settings::{Settings, load_average};
use super::super::sweep::{Metrics, Row};
use crate::cluster::pdur::{PdurAlgorithm, PdurResult, PdurSpec, PdurWorkload, measure};

/// Closed-loop clients per partition of every replica (enough to keep a partition's thread busy
/// while others wait for the broadcast).
pub const CLIENTS_PER_PARTITION: u32 = 8;

/// Items of the micro-benchmark: the paper's 4.2M scaled down 10x (2,000 with `--quick`).
pub fn items(s: &Settings) -> u64 {
    if s.quick {
        2_000
    } else {
        crate::cluster::pdur::DEFAULT_ITEMS
    }
}

/// Users of the Twitter-like workload: the paper's 420K scaled down 10x (500 with `--quick`).
pub fn users(s: &Settings) -> u64 {
    if s.quick {
        500
    } else {
        crate::cluster::pdur::DEFAULT_USERS
    }
}

/// One point, not yet run.
#[derive(Clone, Debug)]
pub struct Point {
    /// The run.
    pub spec: PdurSpec,
    /// The parameters that vary between points, in CSV order.
    pub params: Vec<(String, String)>,
    /// The plot line.
    pub series: String,
    /// The x coordinate.
    pub x: f64,
}

impl Point {
    /// A point of `algorithm` on `workload` with `replicas` replicas (threads for the embedded
    /// store) of `partitions` partitions, `cross` cross-partition; the series is the algorithm's
    /// name followed by `series_suffix`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        s: &Settings,
        algorithm: PdurAlgorithm,
        workload: PdurWorkload,
        replicas: usize,
        partitions: u32,
        cross: f64,
        x: f64,
        extra: &[(&str, String)],
    ) -> Point {
        let mut params = vec![
            ("algorithm".to_string(), algorithm.name().to_string()),
            ("replicas".to_string(), replicas.to_string()),
            ("partitions".to_string(), partitions.to_string()),
            ("cross_pct".to_string(), format!("{}", cross * 100.0)),
        ];
        params.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
        let series = std::iter::once(algorithm.name().to_string())
            .chain(extra.iter().map(|(_, v)| v.clone()))
            .collect::<Vec<_>>()
            .join(" ");
        Point {
            spec: PdurSpec {
                algorithm,
                workload,
                replicas,
                partitions,
                cross_partition: cross,
                clients_per_partition: CLIENTS_PER_PARTITION,
                local_clients: true,
                warmup: s.warmup,
                duration: s.duration.max(Duration::from_millis(200)),
                seed: s.seed,
                net: NetSettings::default(),
                faults: None,
            },
            params,
            series,
            x,
        }
    }
}

/// What one run measured, and the machine's load when it ended.
pub struct Run {
    result: PdurResult,
    load: Option<f64>,
}

fn consistency(r: &PdurResult) -> String {
    match r.digests_equal {
        Some(false) => "replicas disagree: partition digests differ".into(),
        _ => "ok".into(),
    }
}

impl ClusterPoint for Point {
    type Run = Run;
    fn describe(&self) -> String {
        self.params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
    fn run_once(&self, _s: &Settings) -> Result<Run, String> {
        let result = measure(&self.spec)?;
        Ok(Run {
            result,
            load: load_average(),
        })
    }
    fn summary(run: &Run) -> String {
        let r = &run.result;
        format!(
            "{:.0} txn/s, {:.2}% aborted, {:.1} CPU µs/txn, consistency {}, load {}",
            r.throughput,
            r.abort_rate() * 100.0,
            r.cpu_us_per_txn,
            consistency(r),
            run.load.map_or("?".into(), |l| format!("{l:.2}"))
        )
    }
}

fn extra(run: &Run) -> Vec<(String, String)> {
    let r = &run.result;
    let mut out = vec![
        ("measured_s".to_string(), format!("{:.3}", r.measured_s)),
        (
            "cpu_us_per_txn".to_string(),
            format!("{:.2}", r.cpu_us_per_txn),
        ),
        ("copies_compared".to_string(), r.copies_compared.to_string()),
        (
            "load_1min".to_string(),
            run.load.map_or(String::new(), |l| format!("{l:.2}")),
        ),
    ];
    for k in &r.kinds {
        out.push((
            format!("p90_ms_{}", k.name),
            format!("{:.3}", k.p90_us / 1e3),
        ));
        out.push((format!("committed_{}", k.name), k.committed.to_string()));
    }
    out
}

fn metrics(r: &PdurResult) -> Metrics {
    // Latency of the type with the most commits (the micro-benchmark has one).
    let main = r.kinds.iter().max_by_key(|k| k.committed);
    Metrics {
        throughput: r.throughput,
        abort_rate: r.abort_rate(),
        p50_us: main.map_or(0.0, |k| k.p50_us),
        p99_us: main.map_or(0.0, |k| k.p99_us),
        p999_us: 0.0,
        committed: r.committed(),
    }
}

/// Runs every point `s.runs` times and returns one row per point holding the run of median
/// throughput; a point whose run fails or whose replicas disagree does not count.
pub fn run(s: &Settings, points: &[Point]) -> Vec<Row> {
    points
        .iter()
        .zip(run_rounds(s, points))
        .map(|(p, mut r)| row(p, &mut r.runs, r.failure))
        .collect()
}

fn row(p: &Point, runs: &mut Vec<Run>, failure: Option<String>) -> Row {
    let mut params = p.params.clone();
    params.push((
        "clients_per_partition".into(),
        CLIENTS_PER_PARTITION.to_string(),
    ));
    let rounds = runs.iter().map(|r| r.result.throughput).collect();
    let inconsistent = runs
        .iter()
        .map(|r| consistency(&r.result))
        .find(|c| c != "ok");
    runs.sort_by(|a, b| a.result.throughput.total_cmp(&b.result.throughput));
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
            let m = metrics(&r.result);
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
