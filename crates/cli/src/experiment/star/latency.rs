//! `star-latency`: the STAR paper's §8.2.3 (Figure 9) — commit latency at the 50th and 99th
//! percentiles on YCSB with 10%, 50% and 90% cross-partition transactions. STAR releases a result
//! only when the phase its transaction committed in has ended, so its latency is set by the
//! iteration time, as a group commit's is by its interval.

use phasedb_workloads::ycsb::YcsbProceduresConfig;

use super::super::claims::{Claim, Verdict};
use super::super::plot::RightPanel;
use super::super::sweep::Row;
use super::super::{Artifacts, Settings};
use super::report::{Finish, replicas_agree};
use super::run::{self, PARTITIONS, Point};
use crate::cluster::star_workload::StarWorkload;

const PAPER: &str = "On YCSB with 10%, 50% and 90% cross-partition transactions (Figure 9), the \
iteration time determines STAR's latency, as the group-commit frequency does for PB-OCC, \
Dist-OCC and Dist-S2PL with asynchronous replication: STAR's 50th and 99th percentile latencies \
are similar to theirs. With synchronous replication PB-OCC's median is under 0.05 ms, and \
Dist-OCC's and Dist-S2PL's grow with the cross-partition share (more remote reads, multi-round \
commits) (§8.2.3).";

/// Iteration time of every point, ms: the paper's default, and the group-commit interval of the
/// asynchronous baselines (§8.1.2).
const ITERATION_MS: f64 = 10.0;
/// STAR's median latency should be at most this many iterations.
const P50_ITERATIONS: f64 = 2.0;
/// STAR's 99th percentile latency should be at most this many iterations.
const P99_ITERATIONS: f64 = 5.0;

/// Cross-partition shares of the sweep, percent (the paper's).
const SHARES: [u32; 3] = [10, 50, 90];

fn workload(s: &Settings) -> StarWorkload {
    StarWorkload::Ycsb(YcsbProceduresConfig {
        rows_per_partition: if s.quick { 1_000 } else { 200_000 },
        ..YcsbProceduresConfig::star(PARTITIONS)
    })
}

fn points(s: &Settings) -> Vec<Point> {
    let w = workload(s);
    SHARES
        .iter()
        .map(|&pct| Point {
            params: vec![
                ("algorithm".into(), "star".into()),
                ("cross_pct".into(), pct.to_string()),
                ("workload".into(), "ycsb".into()),
                ("iteration_ms".into(), ITERATION_MS.to_string()),
            ],
            series: "star".into(),
            x: pct as f64,
            workload: w.clone(),
            iteration_ms: ITERATION_MS,
            hybrid: true,
            cross_partition: pct as f64 / 100.0,
            delay_us: 0,
        })
        .collect()
}

/// Adds `p50_ms` and `p99_ms` to every row that counted (the plot's right panel).
fn add_latency(rows: &mut [Row]) {
    for r in rows.iter_mut().filter(|r| r.ok()) {
        let (p50, p99) = (r.metrics.p50_us / 1e3, r.metrics.p99_us / 1e3);
        r.params.push(("p50_ms".into(), format!("{p50:.2}")));
        r.params.push(("p99_ms".into(), format!("{p99:.2}")));
    }
}

/// "The iteration time determines STAR's latency": at every share the median is within
/// [`P50_ITERATIONS`] iterations and the 99th percentile within [`P99_ITERATIONS`].
fn set_by_the_iteration(rows: &[Row]) -> Claim {
    let star: Vec<&Row> = rows
        .iter()
        .filter(|r| r.ok() && r.param("algorithm") == Some("star"))
        .collect();
    let (p50_max, p99_max) = (P50_ITERATIONS * ITERATION_MS, P99_ITERATIONS * ITERATION_MS);
    let measured = star
        .iter()
        .map(|r| {
            format!(
                "{}% cross: p50 {:.1} ms, p99 {:.1} ms",
                r.param("cross_pct").unwrap_or("?"),
                r.metrics.p50_us / 1e3,
                r.metrics.p99_us / 1e3
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let verdict = if star.len() < SHARES.len() {
        Verdict::NotChecked(format!(
            "{} of {} shares measured",
            star.len(),
            SHARES.len()
        ))
    } else {
        Verdict::from_bool(
            star.iter()
                .all(|r| r.metrics.p50_us / 1e3 <= p50_max && r.metrics.p99_us / 1e3 <= p99_max),
        )
    };
    Claim {
        statement: format!(
            "STAR's latency is set by its {ITERATION_MS} ms iteration, as a group commit's by its \
             interval: at every share the median is at most {p50_max} ms and the 99th percentile \
             at most {p99_max} ms"
        ),
        paper: "§8.2.3: the iteration time determines the latency of transactions in STAR (a \
                result is released when its phase ends, §4.3)."
            .into(),
        measured: if measured.is_empty() {
            "no point counted".into()
        } else {
            measured
        },
        verdict,
    }
}

/// The comparison with the baselines, which needs them.
fn like_the_asynchronous_baselines() -> Claim {
    Claim {
        statement: "STAR's p50 and p99 latencies are similar to those of PB-OCC, Dist-OCC and \
                    Dist-S2PL with asynchronous replication and a 10 ms group commit"
            .into(),
        paper: "§8.2.3: STAR has a similar latency at the 50th and 99th percentiles to the other \
                approaches with asynchronous replication."
            .into(),
        measured: "STAR only: the PB-OCC, Dist-OCC and Dist-S2PL baselines are not built into \
                   this experiment yet"
            .into(),
        verdict: Verdict::NotChecked("the baselines are not built yet".into()),
    }
}

/// Runs the experiment.
pub fn run(s: &Settings) -> Result<Artifacts, String> {
    let w = workload(s);
    let StarWorkload::Ycsb(c) = &w else {
        unreachable!("star-latency runs YCSB")
    };
    c.validate()?;
    let rows_per_partition = c.rows_per_partition;
    let mut rows = run::run(s, &points(s));
    add_latency(&mut rows);
    let claims = vec![
        set_by_the_iteration(&rows),
        like_the_asynchronous_baselines(),
        replicas_agree(&rows),
    ];
    Ok(Finish {
        title: "star-latency: commit latency against the cross-partition share",
        x_label: "cross-partition transactions (%)",
        setup: vec![format!(
            "YCSB in STAR's shape ({rows_per_partition} rows per partition), hybrid replication, \
             a {ITERATION_MS} ms iteration; cross-partition shares (%): {}; latency runs from a \
             transaction's generation on its node to the release of its result at the end of \
             its phase",
            SHARES
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )],
        paper: PAPER,
        claims,
        varying: &["algorithm", "cross_pct"],
        columns: &[],
        color_by: "algorithm",
        right: RightPanel::Param {
            param: "p99_ms",
            caption: "99th percentile latency",
            y_label: "p99 latency (ms)",
        },
    }
    .artifacts(s, rows))
}

#[cfg(test)]
mod tests {
    use super::super::super::claims::Verdict;
    use super::super::report::fake;
    use super::*;

    fn sweep(latencies_ms: &[(u32, f64, f64)]) -> Vec<Row> {
        latencies_ms
            .iter()
            .map(|&(pct, p50, p99)| {
                let at = [("algorithm", "star"), ("cross_pct", &pct.to_string())];
                let mut r = fake::row(&at, pct as f64, 100.0);
                r.metrics.p50_us = p50 * 1e3;
                r.metrics.p99_us = p99 * 1e3;
                r
            })
            .collect()
    }

    #[test]
    fn latency_within_a_few_iterations_holds_and_beyond_does_not() {
        let ok = sweep(&[(10, 8.0, 19.0), (50, 9.0, 22.0), (90, 12.0, 30.0)]);
        assert_eq!(set_by_the_iteration(&ok).verdict, Verdict::Holds);
        let slow = sweep(&[(10, 8.0, 19.0), (50, 25.0, 40.0), (90, 12.0, 30.0)]);
        assert_eq!(set_by_the_iteration(&slow).verdict, Verdict::DoesNotHold);
        let missing = sweep(&[(10, 8.0, 19.0)]);
        assert!(matches!(
            set_by_the_iteration(&missing).verdict,
            Verdict::NotChecked(_)
        ));
        let mut rows = ok;
        add_latency(&mut rows);
        assert_eq!(rows[0].param("p99_ms"), Some("19.00"));
    }
}
