//! `star-calvin`: the STAR paper's §8.3 (Figure 10) — STAR against Calvin on TPC-C NewOrder as the
//! share of cross-partition transactions grows, on four nodes. Calvin runs in the paper's three
//! configurations: Calvin-1:3 (a group of one node and a group of three), Calvin-2:2 and Calvin-4
//! (one group of four nodes, no replication). Each point starts its own cluster of `phasedb node`
//! processes; STAR's nodes run with the STAR benchmark, Calvin's with Calvin's
//! (`phasedb_dist::calvin::bench`), both ending with the replicas compared and TPC-C checked.

use std::time::Duration;

use phasedb_dist::calvin::bench as calvin_bench;
use phasedb_dist::ramp::bench::launch::ProcessCluster;
use phasedb_dist::star::bench::{self as star_bench, BenchReport, BenchSettings};
use phasedb_net::config::{NetSettings, ServerSettings};
use phasedb_net::{StarAlgorithm, StarConfig};
use phasedb_workloads::tpcc::{ProceduresMix, TpccProceduresConfig};
use phasedb_workloads::ycsb::YcsbProceduresConfig;

use super::super::claims::{Claim, over, ratio_claim};
use super::super::cluster_rounds::{ClusterPoint, run_rounds, schedule_line};
use super::super::plot::{PlotSpec, RightPanel};
use super::super::report::Report;
use super::super::settings::load_average;
use super::super::sweep::{Metrics, Row};
use super::super::{Artifacts, Settings};
use super::report::{find, replicas_agree};
use crate::cluster::star_workload::StarWorkload;

const PAPER: &str = "NewOrder from TPC-C with a varying share of cross-partition transactions, \
on 4 nodes (Figure 10): STAR is 9x faster than Calvin-4 with no cross-partition transactions and \
5.3x faster when all are cross-partition; Calvin is less sensitive to the share, but its \
single-threaded lock manager is its bottleneck (§8.3).";

/// Nodes of every cluster (the paper's 4 machines; here processes sharing the machine's cores).
const NODES: u32 = 4;
/// Partitions: one TPC-C warehouse per node.
const PARTITIONS: u32 = NODES;
/// STAR's iteration (the paper's default).
const ITERATION_MS: f64 = 10.0;
/// The targets: STAR over Calvin's best configuration at 0% and at 100%.
const TARGET_AT_0: f64 = 3.0;
const TARGET_AT_100: f64 = 2.0;

/// The systems compared: STAR, and Calvin's replica-group splits.
const SYSTEMS: [(&str, Option<&[u32]>); 4] = [
    ("star", None),
    ("calvin-1:3", Some(&[1, 3])),
    ("calvin-2:2", Some(&[2, 2])),
    ("calvin-4", Some(&[4])),
];

fn shares(s: &Settings) -> Vec<f64> {
    if s.quick {
        vec![0.0, 100.0]
    } else {
        vec![0.0, 25.0, 50.0, 100.0]
    }
}

/// NewOrder as in the paper; `--quick` runs YCSB on tiny data, so its test loads no warehouses.
fn workload(s: &Settings) -> StarWorkload {
    if s.quick {
        StarWorkload::Ycsb(YcsbProceduresConfig {
            rows_per_partition: 1_000,
            ..YcsbProceduresConfig::star(PARTITIONS)
        })
    } else {
        StarWorkload::Tpcc(TpccProceduresConfig {
            warehouses: PARTITIONS,
            mix: ProceduresMix::NewOrder,
            fine: false,
        })
    }
}

/// One point: a system at a cross-partition share.
#[derive(Clone, Debug)]
struct Point {
    system: &'static str,
    groups: Option<&'static [u32]>,
    cross_pct: f64,
    workload: StarWorkload,
}

/// STAR's placement: node 0 is the full replica (and coordinator) and masters partition 0; node p
/// masters partition p and node 0 holds its copy, so every node masters one warehouse.
fn placement() -> Vec<Vec<u32>> {
    (0..PARTITIONS)
        .map(|p| if p == 0 { vec![0, 1] } else { vec![p, 0] })
        .collect()
}

fn star_table(s: &Settings, p: &Point) -> StarConfig {
    let mut t = StarConfig {
        full_replicas: 1,
        replicas_per_partition: 2,
        iteration_ms: ITERATION_MS,
        cross_partition: p.cross_pct / 100.0,
        workload: Some(p.workload.name().into()),
        workload_args: p.workload.args(),
        seed: s.seed,
        ..StarConfig::new(PARTITIONS)
    };
    match p.groups {
        None => t.placement = Some(placement()),
        Some(g) => {
            t.algorithm = StarAlgorithm::Calvin;
            t.calvin_groups = Some(g.to_vec());
        }
    }
    t
}

fn windows(s: &Settings) -> (Duration, Duration) {
    let iteration = Duration::from_secs_f64(ITERATION_MS / 1e3);
    let least = if s.quick { 3.0 } else { 40.0 };
    (
        s.warmup.max(iteration * 3),
        s.duration.max(iteration.mul_f64(least)),
    )
}

struct Run {
    report: BenchReport,
    load: Option<f64>,
}

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

impl ClusterPoint for Point {
    type Run = Run;

    fn describe(&self) -> String {
        format!("system={} cross_pct={}", self.system, self.cross_pct)
    }

    fn run_once(&self, s: &Settings) -> Result<Run, String> {
        let binary = crate::this_program().map_err(|e| format!("cannot find phasedb: {e}"))?;
        let mut cluster = ProcessCluster::start_star(
            &binary,
            NODES as usize,
            star_table(s, self),
            ServerSettings::default(),
            NetSettings::default(),
            true,
        )?;
        let config = cluster.config.clone();
        let (warmup, duration) = windows(s);
        let settings = BenchSettings {
            warmup,
            duration,
            ..BenchSettings::default()
        };
        let watch = |_: &star_bench::Progress| cluster.exited().map_or(Ok(()), Err);
        let report = if self.groups.is_some() {
            calvin_bench::run(&config, &settings, watch)
        } else {
            star_bench::run(&config, &settings, watch)
        };
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

    fn summary(run: &Run) -> String {
        format!(
            "{:.0} txn/s, consistency {}, load {}",
            run.report.throughput(),
            consistency(&run.report),
            run.load.map_or("?".into(), |l| format!("{l:.2}"))
        )
    }
}

/// The row of a point: the run of median throughput, if every run was consistent.
fn row(s: &Settings, p: &Point, mut runs: Vec<Run>, failure: Option<String>) -> Row {
    let (warmup, duration) = windows(s);
    let mut params: Vec<(String, String)> = vec![
        ("system".into(), p.system.into()),
        ("cross_pct".into(), p.cross_pct.to_string()),
        ("nodes".into(), NODES.to_string()),
        ("partitions".into(), PARTITIONS.to_string()),
        ("warmup_s".into(), warmup.as_secs_f64().to_string()),
        ("duration_s".into(), duration.as_secs_f64().to_string()),
        ("seed".into(), s.seed.to_string()),
    ];
    let rounds = runs.iter().map(|r| r.report.throughput()).collect();
    let inconsistent = runs
        .iter()
        .map(|r| consistency(&r.report))
        .find(|c| c != "ok");
    runs.sort_by(|a, b| a.report.throughput().total_cmp(&b.report.throughput()));
    let median = (!runs.is_empty()).then(|| runs.swap_remove(runs.len() / 2));
    let mut metrics = Metrics::default();
    let applicable = match (&median, failure, &inconsistent) {
        (_, Some(e), _) => Err(e),
        (None, None, _) => Err("not run".to_string()),
        (Some(_), None, Some(c)) => Err(c.clone()),
        (Some(r), None, None) => {
            let b = &r.report;
            metrics = Metrics {
                throughput: b.throughput(),
                abort_rate: b.abort_rate(),
                p50_us: b.latency_us(0.5),
                p99_us: b.latency_us(0.99),
                p999_us: b.latency_us(0.999),
                committed: b.committed(),
            };
            if b.committed() == 0 {
                Err("no transaction committed".to_string())
            } else {
                Ok(())
            }
        }
    };
    if let Some(r) = &median {
        params.push((
            "cross_share".into(),
            format!("{:.4}", r.report.cross_share()),
        ));
        params.push(("per_s".into(), format!("{:.1}", r.report.phases_per_s())));
        let copies: usize = r.report.replicas.partitions.iter().map(|p| p.1.len()).sum();
        params.push(("copies_compared".into(), copies.to_string()));
        params.push((
            "load_1min".into(),
            r.load.map_or(String::new(), |l| format!("{l:.2}")),
        ));
    }
    Row {
        params,
        series: p.system.into(),
        x: p.cross_pct,
        metrics,
        rounds,
        check: match (&inconsistent, &median) {
            (Some(c), _) => c.clone(),
            (None, Some(_)) => "ok".into(),
            (None, None) => "not run".into(),
        },
        applicable,
    }
}

fn throughput(rows: &[Row], system: &str, pct: f64) -> Option<f64> {
    find(rows, &[("system", system), ("cross_pct", &pct.to_string())]).map(|r| r.metrics.throughput)
}

/// Adds `star_over` to every Calvin row: STAR's throughput at its share over the row's.
fn add_speedup(rows: &mut [Row]) {
    let star: Vec<(f64, f64)> = rows
        .iter()
        .filter(|r| r.ok() && r.param("system") == Some("star"))
        .map(|r| (r.x, r.metrics.throughput))
        .collect();
    for r in rows.iter_mut().filter(|r| r.ok()) {
        if let Some(&(_, t)) = star.iter().find(|(x, _)| *x == r.x)
            && r.metrics.throughput > 0.0
        {
            let v = t / r.metrics.throughput;
            r.params.push(("star_over".into(), format!("{v:.2}")));
        }
    }
}

/// STAR over Calvin's best configuration at `pct`, with Calvin-4's ratio beside it.
fn speedup_claim(rows: &[Row], pct: f64, target: f64, paper_ratio: f64) -> Claim {
    let star = throughput(rows, "star", pct);
    let calvins: Vec<(String, Option<f64>)> = SYSTEMS[1..]
        .iter()
        .map(|(name, _)| (name.to_string(), throughput(rows, name, pct)))
        .collect();
    let best = calvins
        .iter()
        .filter_map(|(n, t)| Some((n.clone(), (*t)?)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let mut ratios = vec![(
        format!(
            "over the best ({})",
            best.as_ref().map_or("none ran", |b| b.0.as_str())
        ),
        over(star, best.map(|b| b.1)),
    )];
    ratios.extend(
        calvins
            .iter()
            .filter(|(_, t)| t.is_some())
            .map(|(n, t)| (format!("over {n}"), over(star, *t))),
    );
    ratio_claim(
        &format!(
            "at {pct}% cross-partition STAR is at least {target}x Calvin's best configuration \
             (the issue's target)"
        ),
        &format!(
            "§8.3, Figure 10: at {pct}% cross-partition transactions STAR is {paper_ratio}x \
             faster than Calvin-4."
        ),
        &format!("STAR's NewOrder throughput at {pct}% / Calvin's"),
        &ratios,
        target..=f64::MAX,
    )
}

/// Runs the experiment.
pub fn run(s: &Settings) -> Result<Artifacts, String> {
    let w = workload(s);
    if let StarWorkload::Ycsb(c) = &w {
        c.validate()?;
    }
    let points: Vec<Point> = shares(s)
        .into_iter()
        .flat_map(|pct| {
            let w = w.clone();
            SYSTEMS.iter().map(move |&(system, groups)| Point {
                system,
                groups,
                cross_pct: pct,
                workload: w.clone(),
            })
        })
        .collect();
    let mut rows: Vec<Row> = points
        .iter()
        .zip(run_rounds(s, &points))
        .map(|(p, r)| row(s, p, r.runs, r.failure))
        .collect();
    add_speedup(&mut rows);
    let claims = vec![
        speedup_claim(&rows, 0.0, TARGET_AT_0, 9.0),
        speedup_claim(&rows, 100.0, TARGET_AT_100, 5.3),
        replicas_agree(&rows),
    ];
    Ok(artifacts(s, &w, rows, claims))
}

fn artifacts(s: &Settings, w: &StarWorkload, rows: Vec<Row>, claims: Vec<Claim>) -> Artifacts {
    let title = "star-calvin: STAR against Calvin's replica-group configurations";
    let described = match w {
        StarWorkload::Tpcc(c) => format!(
            "TPC-C NewOrder ({} warehouses, one per partition and node); a cross-partition \
             NewOrder has a remote supply warehouse",
            c.warehouses
        ),
        StarWorkload::Ycsb(c) => format!(
            "YCSB in STAR's shape on {} rows per partition (--quick; the paper's workload is \
             TPC-C NewOrder; Calvin locks whole partitions for YCSB)",
            c.rows_per_partition
        ),
    };
    let mut r = Report::new(title);
    let setup = vec![
        described,
        format!(
            "every point starts its own cluster of {NODES} `phasedb node` processes on 127.0.0.1 \
             (paper: 4 machines, 24 workers each), node i pinned to core i mod cores; the nodes \
             generate their own load"
        ),
        format!(
            "STAR: node 0 a full replica and the coordinator, each node mastering one warehouse, \
             2 copies of each partition, hybrid replication, {ITERATION_MS} ms iterations"
        ),
        "Calvin: replica groups of 1+3, 2+2 and 4 nodes (the paper's Calvin-1:3, -2:2, -4), \
         partitions round robin within a group, node 0 the sequencer cutting a batch every 10 ms; \
         each node has one lock-manager thread that also runs the transactions (scaled from the \
         paper's 1 lock manager + 23 workers per node to this machine's cores); record locks from \
         NewOrder's read/write set; throughput is the slowest group's"
            .into(),
        format!("hardware: {}", s.machine()),
        schedule_line(s),
    ];
    r.heading("Setup").bullets(&setup);
    r.heading("What the paper claims").para(PAPER);
    r.heading("Verdicts");
    for (i, c) in claims.iter().enumerate() {
        r.claim(i + 1, c);
    }
    r.heading("Every point");
    let header = [
        "system",
        "cross %",
        "txn/s",
        "STAR over",
        "p50 ms",
        "p99 ms",
        "phases or batches/s",
        "cross (measured)",
        "load",
        "status",
    ];
    let lines: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let p = |k: &str| row.param(k).unwrap_or("").to_string();
            vec![
                p("system"),
                p("cross_pct"),
                format!("{:.0}", row.metrics.throughput),
                p("star_over"),
                format!("{:.1}", row.metrics.p50_us / 1e3),
                format!("{:.1}", row.metrics.p99_us / 1e3),
                p("per_s"),
                p("cross_share"),
                p("load_1min"),
                match &row.applicable {
                    Ok(()) => "ok".into(),
                    Err(e) => format!("n/a: {e}"),
                },
            ]
        })
        .collect();
    r.table(&header, &lines);
    r.para(&format!(
        "Data: `{0}.csv`; plot: `{0}.svg`. Latency: STAR's from generation to the release at its \
         phase's end; Calvin's from the batch's arrival at the home node to the run there.",
        s.name
    ));
    Artifacts {
        verdicts: claims.iter().map(Claim::verdict_line).collect(),
        rows,
        plot: PlotSpec {
            title: title.into(),
            x_label: "cross-partition transactions (%)".into(),
            color_by: "system",
            reference: None,
            dashed: None,
            right: RightPanel::Param {
                param: "star_over",
                caption: "STAR's speedup",
                y_label: "STAR's throughput / the system's",
            },
        },
        report: r.finish(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::claims::Verdict;
    use super::super::report::fake;
    use super::*;

    fn at(system: &str, pct: f64, t: f64) -> Row {
        fake::row(
            &[("system", system), ("cross_pct", &pct.to_string())],
            pct,
            t,
        )
    }

    #[test]
    fn the_claims_follow_the_papers_figures() {
        let paper = vec![
            at("star", 0.0, 900.0),
            at("calvin-4", 0.0, 100.0),
            at("calvin-2:2", 0.0, 80.0),
            at("star", 100.0, 530.0),
            at("calvin-4", 100.0, 100.0),
        ];
        assert_eq!(speedup_claim(&paper, 0.0, 3.0, 9.0).verdict, Verdict::Holds);
        assert_eq!(
            speedup_claim(&paper, 100.0, 2.0, 5.3).verdict,
            Verdict::Holds
        );
        let close = vec![at("star", 0.0, 200.0), at("calvin-1:3", 0.0, 100.0)];
        assert_eq!(
            speedup_claim(&close, 0.0, 3.0, 9.0).verdict,
            Verdict::DoesNotHold
        );
        assert!(matches!(
            speedup_claim(&close, 100.0, 2.0, 5.3).verdict,
            Verdict::NotChecked(_)
        ));
    }

    #[test]
    fn every_calvin_point_gets_stars_speedup_at_its_share() {
        let mut rows = vec![
            at("star", 0.0, 300.0),
            at("calvin-4", 0.0, 100.0),
            at("calvin-4", 100.0, 50.0),
        ];
        add_speedup(&mut rows);
        assert_eq!(rows[1].param("star_over"), Some("3.00"));
        assert_eq!(rows[2].param("star_over"), None, "no STAR row at 100%");
    }

    #[test]
    fn star_masters_one_warehouse_per_node() {
        let star = StarConfig {
            placement: Some(placement()),
            ..StarConfig::new(PARTITIONS)
        };
        let layout = phasedb_dist::star::Layout::new(NODES, &star).unwrap();
        for n in 0..NODES {
            assert_eq!(layout.mastered(n), vec![n]);
        }
    }
}
