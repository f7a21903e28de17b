//! `star-failover`: STAR under a node's crash (§7) — throughput per 100 ms through a partial
//! replica's crash and a coordinator's crash, each on its own cluster of three `phasedb node`
//! processes running STAR, the node killed with SIGKILL mid-run by the benchmark
//! (`phasedb bench --kill-node`'s [`Faults`]). STAR re-masters the failed node's partitions onto a
//! full replica at once (§7.2), so throughput should be back near its level within a second.
//! A third cluster restarts the killed partial replica: its new process copies its partitions
//! from the live nodes while receiving the replication stream and rejoins (§7.3); the rows show
//! throughput through it, and the report says how long the rejoin took.

use std::time::Duration;

use phasedb_dist::ramp::bench::faults::{EventKind, FaultPlan, Faults};
use phasedb_dist::ramp::bench::launch::ProcessCluster;
use phasedb_dist::star::bench::{self, BenchReport, BenchSettings, Stage};
use phasedb_net::config::{NetSettings, ServerSettings};
use phasedb_net::{StarAlgorithm, StarConfig};
use phasedb_workloads::ycsb::YcsbProceduresConfig;

use super::super::claims::{Claim, Verdict};
use super::super::plot::RightPanel;
use super::super::sweep::{Metrics, Row};
use super::super::{Artifacts, Settings};
use super::report::{Finish, replicas_agree};
use crate::cluster::star_workload::StarWorkload;

const PAPER: &str = "STAR re-masters the primary records of a failed node over active nodes \
instantaneously: if a node with partial replication fails, its primary records are re-mastered \
to a node with full replication, so the system keeps serving clients \"without taking any down \
time\"; if the coordinator crashes, the next node with a full copy becomes the coordinator; a \
restarted node copies its partitions from the live nodes while receiving the replication stream, \
then rejoins (§7.2, §7.3). The issue's target: after a partial replica's crash, throughput back \
to at least 0.8x its level before the crash within 1 s.";

/// Nodes of each cluster.
const NODES: u32 = 3;
/// Share of its level before the crash that throughput must be back to.
const BACK_TO: f64 = 0.8;
/// Within this long after the crash, s.
const WITHIN_S: f64 = 1.0;
/// Heartbeats and the failure timeout of the clusters (§7.1 leaves them open): detection is the
/// floor of any fail-over's stall.
const HEARTBEAT_MS: f64 = 20.0;
const FAILURE_TIMEOUT_MS: f64 = 200.0;

/// One crash to measure.
#[derive(Clone, Copy, Debug)]
struct Scenario {
    /// Its series name.
    name: &'static str,
    /// Full replicas, nodes `0..full` (node 0 coordinates).
    full: u32,
    /// The node killed.
    node: usize,
    /// What the node is.
    role: &'static str,
    /// Seconds after the kill at which the node's process is started again.
    restart_after: Option<f64>,
}

const PARTIAL: Scenario = Scenario {
    name: "partial-replica crash",
    full: 1,
    node: 2,
    role: "a partial replica (node 2, primary of partition 1, which node 0 also holds)",
    restart_after: None,
};
const COORDINATOR: Scenario = Scenario {
    name: "coordinator crash",
    full: 2,
    node: 0,
    role: "the coordinator (node 0, a full replica; node 1, the other full replica, takes over)",
    restart_after: None,
};
const RESTART: Scenario = Scenario {
    name: "partial-replica restart",
    full: 1,
    node: 2,
    role: "a partial replica (node 2), started again 0.5 s after its crash",
    restart_after: Some(0.5),
};
/// A restarted node must be back in the cycle within this long of its restart, s (the issue's
/// target is 10 s for 1M YCSB rows; these clusters hold fewer).
const REJOIN_WITHIN_S: f64 = 10.0;

/// Before and after the crash, the window the rows show, s.
fn window(s: &Settings, sc: &Scenario) -> (f64, f64) {
    let (before, after) = if s.quick { (0.5, 1.5) } else { (1.0, 3.0) };
    (before, after + sc.restart_after.unwrap_or(0.0))
}

fn table(s: &Settings, sc: &Scenario) -> StarConfig {
    let rows_per_partition = if s.quick { 1_000 } else { 50_000 };
    let workload = StarWorkload::Ycsb(YcsbProceduresConfig {
        rows_per_partition,
        ..YcsbProceduresConfig::star(NODES)
    });
    StarConfig {
        algorithm: StarAlgorithm::Star,
        full_replicas: sc.full,
        // Every partition on each full replica and on its primary, a partial replica.
        replicas_per_partition: sc.full + 1,
        iteration_ms: 10.0,
        cross_partition: 0.1,
        heartbeat_ms: HEARTBEAT_MS,
        failure_timeout_ms: FAILURE_TIMEOUT_MS,
        workload: Some(workload.name().into()),
        workload_args: workload.args(),
        seed: s.seed,
        ..StarConfig::new(NODES)
    }
}

/// One run of a scenario: its report and failure events.
fn run_once(s: &Settings, sc: &Scenario) -> Result<(BenchReport, Faults), String> {
    let binary = crate::this_program().map_err(|e| format!("cannot find phasedb: {e}"))?;
    let mut cluster = ProcessCluster::start_star(
        &binary,
        NODES as usize,
        table(s, sc),
        ServerSettings::default(),
        NetSettings::default(),
        true,
    )?;
    let config = cluster.config.clone();
    let (before, after) = window(s, sc);
    let warmup = s.warmup.min(Duration::from_secs(1));
    let plan = FaultPlan {
        node: sc.node,
        at: warmup + Duration::from_secs_f64(before),
        restart_after: sc.restart_after.map(Duration::from_secs_f64),
    };
    let settings = BenchSettings {
        warmup,
        duration: Duration::from_secs_f64(before + after),
        // How long the killed node's counters query goes unanswered before it counts as silent
        // (the intervals do not wait for it).
        answer_timeout: Duration::from_millis(300),
        ..BenchSettings::default()
    };
    let mut faults = Faults::new(Some(plan));
    let report = bench::run(&config, &settings, |p| {
        if p.stage != Stage::Loading {
            faults.tick(Some(&mut cluster), p.elapsed);
        }
        Ok(())
    });
    cluster.stop(Duration::from_secs(10));
    let mut report = report?;
    for e in std::mem::take(&mut report.silences.events) {
        faults.note(e);
    }
    Ok((report, faults))
}

/// When the kill happened, s since the load started.
fn killed_at(faults: &Faults) -> Option<f64> {
    faults
        .events
        .iter()
        .find(|e| e.kind == EventKind::Killed)
        .map(|e| e.at.as_secs_f64())
}

/// Seconds from the restart to the restarted node back in the cycle with its partitions copied.
fn rejoin_s(r: &BenchReport, faults: &Faults) -> Option<f64> {
    let restarted = faults
        .events
        .iter()
        .find(|e| e.kind == EventKind::Restarted)?
        .at;
    let back = r.reincarnations.first()?.recovered?;
    Some(back.saturating_sub(restarted).as_secs_f64())
}

fn consistency(r: &BenchReport, faults: &Faults, sc: &Scenario) -> String {
    let mut problems: Vec<String> = r.replicas.problems.clone();
    if sc.restart_after.is_some() && rejoin_s(r, faults).is_none() {
        problems.push(format!(
            "node {} did not rejoin after its restart: {:?}",
            sc.node, r.reincarnations
        ));
    }
    problems.extend(r.checks.iter().filter_map(|c| c.as_ref().err()).cloned());
    problems.extend(
        faults
            .unasked()
            .iter()
            .map(|e| format!("node {}: {:?}", e.node, e.kind)),
    );
    if problems.is_empty() {
        "ok".into()
    } else {
        problems.join("; ")
    }
}

/// The rows of a scenario: one per interval, x = seconds from the crash to the interval's end.
fn rows_of(s: &Settings, sc: &Scenario, run: Result<(BenchReport, Faults), String>) -> Vec<Row> {
    let copies = run.as_ref().map_or(0, |(r, _)| {
        r.replicas
            .partitions
            .iter()
            .map(|(_, c)| c.len())
            .sum::<usize>()
    });
    let rejoin = run.as_ref().ok().and_then(|(r, f)| rejoin_s(r, f));
    let params = |x: f64| {
        vec![
            ("scenario".to_string(), sc.name.to_string()),
            ("killed_node".to_string(), sc.node.to_string()),
            ("full_replicas".to_string(), sc.full.to_string()),
            ("t_s".to_string(), format!("{x:.2}")),
            ("nodes".to_string(), NODES.to_string()),
            ("seed".to_string(), s.seed.to_string()),
            ("copies_compared".to_string(), copies.to_string()),
            (
                "rejoin_s".to_string(),
                rejoin.map_or(String::new(), |t| format!("{t:.3}")),
            ),
        ]
    };
    let failed = |why: String| Row {
        params: params(0.0),
        series: sc.name.into(),
        x: 0.0,
        metrics: Metrics::default(),
        rounds: Vec::new(),
        check: "not run".into(),
        applicable: Err(why),
    };
    let (report, faults) = match run {
        Ok(r) => r,
        Err(e) => return vec![failed(e)],
    };
    let Some(kill) = killed_at(&faults) else {
        return vec![failed(format!(
            "the node was not killed: {:?}",
            faults.lines()
        ))];
    };
    let check = consistency(&report, &faults, sc);
    let (before, after) = window(s, sc);
    report
        .timeline
        .points
        .iter()
        .map(|&(end, rate)| (end - kill, rate))
        .filter(|&(x, _)| x > -before - 1e-9 && x <= after + 1e-9)
        .map(|(x, rate)| Row {
            params: params(x),
            series: sc.name.into(),
            x,
            metrics: Metrics {
                throughput: rate,
                committed: (rate * report.timeline.interval_s).round() as u64,
                ..Metrics::default()
            },
            rounds: vec![rate],
            check: check.clone(),
            applicable: if check == "ok" {
                Ok(())
            } else {
                Err(check.clone())
            },
        })
        .collect()
}

/// How a scenario's throughput went through its crash, from its rows.
#[derive(Debug, PartialEq)]
struct Recovery {
    /// Mean throughput of the intervals before the crash.
    before: f64,
    /// The lowest interval after it.
    lowest: f64,
    /// Seconds from the crash to the end of the first interval, after the lowest, back at
    /// [`BACK_TO`] of `before` (0 if throughput never fell below it); `None` if it never was.
    back_after_s: Option<f64>,
}

fn recovery(rows: &[Row], series: &str) -> Option<Recovery> {
    let line: Vec<(f64, f64)> = rows
        .iter()
        .filter(|r| r.series == series && r.ok())
        .map(|r| (r.x, r.metrics.throughput))
        .collect();
    let pre: Vec<f64> = line.iter().filter(|p| p.0 <= 0.0).map(|p| p.1).collect();
    let post: Vec<(f64, f64)> = line.iter().copied().filter(|p| p.0 > 0.0).collect();
    if pre.is_empty() || post.is_empty() {
        return None;
    }
    let before = pre.iter().sum::<f64>() / pre.len() as f64;
    let (low_at, lowest) = post
        .iter()
        .copied()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .expect("post is not empty");
    let floor = BACK_TO * before;
    let back_after_s = if lowest >= floor {
        Some(0.0)
    } else {
        post.iter()
            .find(|p| p.0 > low_at && p.1 >= floor)
            .map(|p| p.0)
    };
    Some(Recovery {
        before,
        lowest,
        back_after_s,
    })
}

fn recovery_claim(rows: &[Row], sc: &Scenario, paper: &str) -> Claim {
    let statement = format!(
        "after the crash of {}, throughput is back to at least {BACK_TO}x its level before the \
         crash within {WITHIN_S} s",
        sc.role
    );
    let Some(r) = recovery(rows, sc.name) else {
        let why = rows
            .iter()
            .find(|r| r.series == sc.name)
            .and_then(|r| r.applicable.clone().err())
            .unwrap_or_else(|| "no interval measured".into());
        return Claim {
            statement,
            paper: paper.into(),
            measured: format!("not measured: {why}"),
            verdict: Verdict::NotChecked(why),
        };
    };
    let measured = format!(
        "{:.0} txn/s before the crash, lowest 100 ms interval after it {:.0} txn/s ({:.2}x); {}",
        r.before,
        r.lowest,
        r.lowest / r.before.max(1e-9),
        match r.back_after_s {
            Some(0.0) => format!("never below {BACK_TO}x"),
            Some(t) => format!("back to {BACK_TO}x {t:.2} s after the crash"),
            None => format!("not back to {BACK_TO}x in the window"),
        }
    );
    Claim {
        statement,
        paper: paper.into(),
        measured,
        verdict: Verdict::from_bool(r.back_after_s.is_some_and(|t| t <= WITHIN_S)),
    }
}

/// The restart's claim: the node rejoins within [`REJOIN_WITHIN_S`] of its restart, with every
/// replica agreeing after the run (both read from the restart's rows).
fn rejoin_claim(rows: &[Row]) -> Claim {
    let statement = format!(
        "a restarted partial replica is back in the cycle, its partitions copied, within {REJOIN_WITHIN_S} s of its restart, and its replicas agree with the live ones"
    );
    let paper = "§7.3: each live node sends a portion of its database to the restarted node, which also receives the replication stream; then the phases alternate again."
        .to_string();
    let mine: Vec<&Row> = rows.iter().filter(|r| r.series == RESTART.name).collect();
    let rejoin = mine.iter().find_map(|r| {
        r.params
            .iter()
            .find(|(k, _)| k == "rejoin_s")
            .and_then(|(_, v)| v.parse::<f64>().ok())
    });
    let Some(first) = mine.first() else {
        return Claim {
            statement,
            paper,
            measured: "not measured: no row".into(),
            verdict: Verdict::NotChecked("no row".into()),
        };
    };
    if let Err(why) = &first.applicable {
        return Claim {
            statement,
            paper,
            measured: format!("not measured: {why}"),
            verdict: Verdict::NotChecked(why.clone()),
        };
    }
    match rejoin {
        Some(t) => Claim {
            statement,
            paper,
            measured: format!(
                "back in the cycle {t:.3} s after its restart; replicas agree ({})",
                first.check
            ),
            verdict: Verdict::from_bool(t <= REJOIN_WITHIN_S && first.ok()),
        },
        None => Claim {
            statement,
            paper,
            measured: "the restarted node never rejoined in the window".into(),
            verdict: Verdict::DoesNotHold,
        },
    }
}

/// Runs the experiment.
pub fn run(s: &Settings) -> Result<Artifacts, String> {
    let mut rows = Vec::new();
    for sc in [PARTIAL, COORDINATOR, RESTART] {
        eprintln!("  {}: killing node {} mid-run", sc.name, sc.node);
        let run = run_once(s, &sc);
        if let Ok((_, f)) = &run {
            for line in f.lines() {
                eprintln!("    {line}");
            }
        }
        rows.extend(rows_of(s, &sc, run));
    }
    let claims = vec![
        recovery_claim(
            &rows,
            &PARTIAL,
            "§7.2: the failed partial replica's primary records are re-mastered to a full \
             replica instantaneously, with no down time (the issue's target: 0.8x within 1 s).",
        ),
        recovery_claim(
            &rows,
            &COORDINATOR,
            "§7.2: if the coordinator crashes, the next available node with a full copy of the \
             database becomes the coordinator.",
        ),
        rejoin_claim(&rows),
        replicas_agree(&rows),
    ];
    let (before, after) = window(s, &PARTIAL);
    Ok(Finish {
        title: "star-failover: throughput per 100 ms through a node's crash",
        x_label: "time from the crash (s)",
        setup: vec![
            format!(
                "{NODES} `phasedb node` processes running STAR on YCSB in STAR's shape, one \
                 partition per node, each on every full replica and on its primary (a partial \
                 replica; primaries round robin over the partial replicas), 10% \
                 cross-partition, a 10 ms iteration; heartbeats every {HEARTBEAT_MS} ms and a {FAILURE_TIMEOUT_MS} ms failure timeout"
            ),
            format!(
                "the benchmark kills the node with SIGKILL {before} s into the measured window \
                 and reads every live node's counters every 100 ms until {after} s after the \
                 crash; a stopped node counts with what it had committed"
            ),
            format!("{}: {}", PARTIAL.name, PARTIAL.role),
            format!("{}: {}", COORDINATOR.name, COORDINATOR.role),
            format!(
                "{}: {}; its rows run {} s longer",
                RESTART.name,
                RESTART.role,
                RESTART.restart_after.unwrap_or(0.0)
            ),
            "after the run the live replicas of every partition are compared and every live \
             node runs the workload's check"
                .into(),
        ],
        paper: PAPER,
        claims,
        varying: &["scenario", "t_s"],
        columns: &[],
        color_by: "scenario",
        dashed: None,
        right: RightPanel::Param {
            param: "t_s",
            caption: "Interval end",
            y_label: "time from the crash (s)",
        },
    }
    .artifacts(s, rows))
}

#[cfg(test)]
mod tests {
    use super::super::report::fake;
    use super::*;

    fn line(points: &[(f64, f64)]) -> Vec<Row> {
        fake::series(&[("scenario", PARTIAL.name)], "t_s", points)
            .into_iter()
            .map(|mut r| {
                r.series = PARTIAL.name.into();
                r
            })
            .collect()
    }

    #[test]
    fn recovery_is_read_from_the_intervals() {
        let quick = line(&[
            (-0.1, 100.0),
            (0.0, 100.0),
            (0.1, 10.0),
            (0.3, 85.0),
            (0.4, 90.0),
        ]);
        let r = recovery(&quick, PARTIAL.name).unwrap();
        assert_eq!(r.before, 100.0);
        assert_eq!(r.lowest, 10.0);
        assert_eq!(r.back_after_s, Some(0.3));
        assert_eq!(recovery_claim(&quick, &PARTIAL, "").verdict, Verdict::Holds);
        let slow = line(&[(0.0, 100.0), (0.1, 0.0), (1.5, 90.0)]);
        assert_eq!(
            recovery_claim(&slow, &PARTIAL, "").verdict,
            Verdict::DoesNotHold
        );
        let never = line(&[(0.0, 100.0), (0.1, 0.0), (0.5, 50.0)]);
        assert_eq!(recovery(&never, PARTIAL.name).unwrap().back_after_s, None);
        assert_eq!(
            recovery_claim(&never, &PARTIAL, "").verdict,
            Verdict::DoesNotHold
        );
        let steady = line(&[(0.0, 100.0), (0.1, 95.0)]);
        assert_eq!(
            recovery(&steady, PARTIAL.name).unwrap().back_after_s,
            Some(0.0)
        );
        assert!(matches!(
            recovery_claim(&[], &PARTIAL, "").verdict,
            Verdict::NotChecked(_)
        ));
    }
}
