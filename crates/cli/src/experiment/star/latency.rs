//! `star-latency`: the STAR paper's §8.2.3 (Figure 9) — commit latency at the 50th and 99th
//! percentiles on YCSB with 10%, 50% and 90% cross-partition transactions, for STAR and its
//! baselines ([`contenders`]) with asynchronous and synchronous replication. STAR releases a result
//! only when the phase its transaction committed in has ended, so its latency is set by the
//! iteration time, as a group commit's is by its interval.

use phasedb_workloads::ycsb::YcsbProceduresConfig;

use super::super::claims::{Claim, Verdict, ratio, ratio_claim};
use super::super::plot::{Dashes, RightPanel};
use super::super::sweep::Row;
use super::super::{Artifacts, Settings};
use super::contenders::contenders;
use super::report::{Finish, replicas_agree};
use super::run::{self, PARTITIONS, Point};
use super::versus::{
    DISTRIBUTED, PB_OCC, STAR, baselines, baselines_setup, distributed, not_measured, row_of,
};
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
/// STAR's latency over an asynchronous baseline's within this factor either way is "similar".
const SIMILAR: f64 = 2.0;
/// PB-OCC's median latency with synchronous replication should be at most this share of STAR's
/// (the paper: under 0.05 ms against about an iteration).
const SYNC_PB_OCC_SHARE: f64 = 0.1;

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
    let mut out = Vec::new();
    for c in contenders(s) {
        for &pct in &SHARES {
            out.push(Point {
                contender: *c,
                params: vec![
                    ("algorithm".into(), c.algorithm_name().into()),
                    ("replication".into(), c.replication_name().into()),
                    ("cross_pct".into(), pct.to_string()),
                    ("workload".into(), "ycsb".into()),
                    ("iteration_ms".into(), ITERATION_MS.to_string()),
                ],
                series: c.label(),
                x: pct as f64,
                workload: w.clone(),
                iteration_ms: ITERATION_MS,
                hybrid: false,
                cross_partition: pct as f64 / 100.0,
                delay_us: 0,
            });
        }
    }
    out
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
        .filter(|r| r.ok() && r.param("algorithm") == Some(STAR))
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

/// The latency at quantile `q` (0.5 or 0.99), µs, of `algorithm` replicating as `replication`
/// at `pct`.
fn latency_of(rows: &[Row], algorithm: &str, replication: &str, pct: u32, q: f64) -> Option<f64> {
    let r = row_of(
        rows,
        algorithm,
        replication,
        &[("cross_pct", &pct.to_string())],
    )?;
    Some(if q < 0.9 {
        r.metrics.p50_us
    } else {
        r.metrics.p99_us
    })
}

/// STAR's latency at quantile `q` over that of `algorithm` replicating as `replication`, at `pct`.
fn star_latency_over(
    rows: &[Row],
    algorithm: &str,
    replication: &str,
    pct: u32,
    q: f64,
) -> Option<f64> {
    ratio(
        latency_of(rows, STAR, "async", pct, q)?,
        latency_of(rows, algorithm, replication, pct, q)?,
    )
}

/// "STAR has a similar latency to the asynchronous baselines": at every share its p50 and p99
/// within [`SIMILAR`]x of each asynchronous baseline's either way.
fn like_the_asynchronous_baselines(rows: &[Row]) -> Claim {
    let statement = format!(
        "STAR's p50 and p99 latencies are similar to those of PB-OCC, Dist-OCC and Dist-S2PL \
         with asynchronous replication and a {ITERATION_MS} ms group commit: within {SIMILAR}x \
         of each either way, at every share"
    );
    let paper = "§8.2.3: STAR has a similar latency at the 50th and 99th percentiles to the \
                 other approaches with asynchronous replication, whose latency depends on the \
                 frequency of the group commit as STAR's on the iteration time.";
    let present = baselines(rows, "async");
    if present.is_empty() {
        return Claim {
            statement,
            paper: paper.into(),
            measured: "STAR only: no baseline with asynchronous replication measured".into(),
            verdict: Verdict::NotChecked("no asynchronous baseline measured".into()),
        };
    }
    let mut ratios = Vec::new();
    for b in &present {
        for &pct in &SHARES {
            for (name, q) in [("p50", 0.5), ("p99", 0.99)] {
                ratios.push((
                    format!("{name} vs {b} at {pct}%"),
                    star_latency_over(rows, b, "async", pct, q),
                ));
            }
        }
    }
    let mut c = ratio_claim(
        &statement,
        paper,
        "STAR's latency over each",
        &ratios,
        1.0 / SIMILAR..=SIMILAR,
    );
    let mut wanted = vec![PB_OCC];
    wanted.extend(DISTRIBUTED);
    c.measured.push_str(&not_measured(&present, &wanted));
    c
}

/// "With synchronous replication PB-OCC's median latency is under 0.05 ms": at most
/// [`SYNC_PB_OCC_SHARE`] of STAR's at every share.
fn sync_pb_occ_answers_at_once(rows: &[Row]) -> Claim {
    let ratios: Vec<(String, Option<f64>)> = SHARES
        .iter()
        .map(|&pct| {
            (
                format!("{pct}%"),
                latency_of(rows, PB_OCC, "sync", pct, 0.5)
                    .zip(latency_of(rows, STAR, "async", pct, 0.5))
                    .and_then(|(pb, star)| ratio(pb, star)),
            )
        })
        .collect();
    let mut c = ratio_claim(
        &format!(
            "with synchronous replication PB-OCC's median latency is a small fraction of STAR's: \
             at most {SYNC_PB_OCC_SHARE}x at every share"
        ),
        "§8.2.3: with synchronous replication PB. OCC's latency at the 50th percentile is always \
         less than 0.05 ms, STAR's being set by its 10 ms iteration.",
        "PB-OCC (sync) p50 over STAR's",
        &ratios,
        0.0..=SYNC_PB_OCC_SHARE,
    );
    if !baselines(rows, "sync").iter().any(|b| b == PB_OCC) {
        c.verdict = Verdict::NotChecked("PB-OCC with synchronous replication not measured".into());
    }
    c
}

/// "Dist-OCC's and Dist-S2PL's latency grows with the share" with synchronous replication: the
/// median at the largest share above that at the smallest.
fn sync_distributed_grow(rows: &[Row]) -> Claim {
    let (lo, hi) = (SHARES[0], SHARES[SHARES.len() - 1]);
    let statement = format!(
        "with synchronous replication Dist-OCC's and Dist-S2PL's median latency grows with the \
         share of cross-partition transactions: higher at {hi}% than at {lo}%"
    );
    let paper = "§8.2.3: Dist. OCC and Dist. S2PL have a higher latency at both percentiles as \
                 the ratio of cross-partition transactions grows: more remote reads, and commit \
                 protocols of several round trips.";
    let present = distributed(rows, "sync");
    if present.is_empty() {
        return Claim {
            statement,
            paper: paper.into(),
            measured: format!(
                "no Dist-OCC or Dist-S2PL rows{}",
                not_measured(&[], &DISTRIBUTED)
            ),
            verdict: Verdict::NotChecked("Dist-OCC and Dist-S2PL not measured".into()),
        };
    }
    let ratios: Vec<(String, Option<f64>)> = present
        .iter()
        .map(|d| {
            let p50 = |pct: u32| {
                row_of(rows, d, "sync", &[("cross_pct", &pct.to_string())])
                    .map(|r| r.metrics.p50_us)
            };
            let r = match (p50(hi), p50(lo)) {
                (Some(a), Some(b)) => ratio(a, b),
                _ => None,
            };
            (d.clone(), r)
        })
        .collect();
    let mut c = ratio_claim(
        &statement,
        paper,
        &format!("median latency at {hi}% over at {lo}%"),
        &ratios,
        1.0 + f64::EPSILON..=f64::MAX,
    );
    c.measured.push_str(&not_measured(&present, &DISTRIBUTED));
    c
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
        like_the_asynchronous_baselines(&rows),
        sync_pb_occ_answers_at_once(&rows),
        sync_distributed_grow(&rows),
        replicas_agree(&rows),
    ];
    let mut setup = vec![format!(
        "YCSB in STAR's shape ({rows_per_partition} rows per partition), a {ITERATION_MS} ms \
         iteration for STAR and a {ITERATION_MS} ms group commit for the asynchronous \
         baselines; cross-partition shares (%): {}; latency runs from a transaction's \
         generation on its node to the release of its result (STAR: at the end of its phase; \
         async: at the group commit after it; sync: once the replicas acknowledged it)",
        SHARES
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    )];
    setup.extend(baselines_setup(&rows));
    Ok(Finish {
        title: "star-latency: commit latency against the cross-partition share",
        x_label: "cross-partition transactions (%)",
        setup,
        paper: PAPER,
        claims,
        varying: &["algorithm", "replication", "cross_pct"],
        columns: &[],
        color_by: "algorithm",
        dashed: Some(Dashes {
            param: "replication",
            value: "sync",
            solid_label: "async (STAR: its fences)",
        }),
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
        line("star", "async", latencies_ms)
    }

    /// Rows of one contender, one per `(share, p50 ms, p99 ms)`.
    fn line(algorithm: &str, replication: &str, latencies_ms: &[(u32, f64, f64)]) -> Vec<Row> {
        latencies_ms
            .iter()
            .map(|&(pct, p50, p99)| {
                let pct_s = pct.to_string();
                let at = [
                    ("algorithm", algorithm),
                    ("replication", replication),
                    ("cross_pct", pct_s.as_str()),
                ];
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

    /// The paper's Figure 9 in outline: STAR about an iteration, the asynchronous baselines about
    /// a group commit, PB-OCC with synchronous replication well under a millisecond.
    fn paper(with_distributed: bool) -> Vec<Row> {
        let mut rows = sweep(&[(10, 9.0, 19.0), (50, 10.0, 21.0), (90, 11.0, 24.0)]);
        rows.extend(line(
            "pb-occ",
            "async",
            &[(10, 8.0, 15.0), (50, 8.0, 15.0), (90, 8.0, 16.0)],
        ));
        rows.extend(line(
            "pb-occ",
            "sync",
            &[(10, 0.0, 0.5), (50, 0.04, 0.5), (90, 0.05, 0.6)],
        ));
        if with_distributed {
            for d in DISTRIBUTED {
                rows.extend(line(
                    d,
                    "async",
                    &[(10, 9.0, 18.0), (50, 10.0, 20.0), (90, 12.0, 25.0)],
                ));
                rows.extend(line(
                    d,
                    "sync",
                    &[(10, 0.2, 2.0), (50, 0.8, 5.0), (90, 1.5, 9.0)],
                ));
            }
        }
        rows
    }

    #[test]
    fn the_baselines_claims_follow_the_rows_present() {
        let full = paper(true);
        for c in [
            like_the_asynchronous_baselines(&full),
            sync_pb_occ_answers_at_once(&full),
            sync_distributed_grow(&full),
        ] {
            assert_eq!(c.verdict, Verdict::Holds, "{}: {}", c.statement, c.measured);
        }
        let pb_only = paper(false);
        let c = like_the_asynchronous_baselines(&pb_only);
        assert_eq!(c.verdict, Verdict::Holds, "{}", c.measured);
        assert!(c.measured.contains("dist-occ, dist-s2pl"), "{}", c.measured);
        assert_eq!(
            sync_pb_occ_answers_at_once(&pb_only).verdict,
            Verdict::Holds
        );
        assert!(matches!(
            sync_distributed_grow(&pb_only).verdict,
            Verdict::NotChecked(_)
        ));
        let star_only = sweep(&[(10, 9.0, 19.0), (50, 10.0, 21.0), (90, 11.0, 24.0)]);
        for c in [
            like_the_asynchronous_baselines(&star_only),
            sync_pb_occ_answers_at_once(&star_only),
        ] {
            assert!(matches!(c.verdict, Verdict::NotChecked(_)), "{c:?}");
        }
    }

    #[test]
    fn latencies_unlike_the_papers_fail_the_baselines_claims() {
        let mut rows = paper(true);
        for r in rows
            .iter_mut()
            .filter(|r| r.param("replication") == Some("sync"))
        {
            // Synchronous replication as slow as a group commit, and flat.
            r.metrics.p50_us = 8e3;
        }
        for r in rows.iter_mut().filter(|r| {
            r.param("algorithm") == Some("dist-occ") && r.param("replication") == Some("async")
        }) {
            r.metrics.p99_us = 100e3;
        }
        for c in [
            like_the_asynchronous_baselines(&rows),
            sync_pb_occ_answers_at_once(&rows),
            sync_distributed_grow(&rows),
        ] {
            assert_eq!(
                c.verdict,
                Verdict::DoesNotHold,
                "{}: {}",
                c.statement,
                c.measured
            );
        }
    }
}
