//! `pdur-twitter`: the P-DUR paper's §VI-F (Figure 8) — the Twitter-like social network (50%
//! timeline: read-only and cross-partition; 40% post; 10% follow, cross-partition with probability
//! 0.5) on one P-DUR replica of 1 and 2 partitions, with the latency of each operation.

use super::super::claims::{Claim, Verdict, ratio, times};
use super::super::plot::RightPanel;
use super::super::sweep::Row;
use super::super::{Artifacts, Settings};
use super::report::{Finish, figure, replicas_agree, throughput};
use super::run::{self, Point, users};
use crate::cluster::pdur::{PdurAlgorithm, PdurWorkload};
use phasedb_dist::pdur::workload::twitter::FOLLOW_CROSS;

const PAPER: &str = "On the Twitter-like workload P-DUR's throughput grows with the number of \
partitions, and the latency of each operation type is reported at the 90th percentile: \
timelines are read-only and commit at the replica without atomic broadcast, posts and follows \
are broadcast and certified (§VI-F, Figure 8).";

/// P-DUR with 2 partitions over 1 must reach this.
pub const SCALE_MIN: f64 = 1.5;

const OPS: [&str; 3] = ["timeline", "post", "follow"];

fn points(s: &Settings) -> Vec<Point> {
    let w = PdurWorkload::Twitter { users: users(s) };
    [1u32, 2]
        .iter()
        .map(|&p| {
            Point::new(
                s,
                PdurAlgorithm::Pdur,
                w.clone(),
                1,
                p,
                FOLLOW_CROSS,
                p as f64,
                &[],
            )
        })
        .collect()
}

fn at(p: &str) -> [(&str, &str); 2] {
    [("algorithm", "pdur"), ("partitions", p)]
}

/// "P-DUR scales with partitions" on the Twitter-like mix.
fn scales(rows: &[Row]) -> Claim {
    let r = throughput(rows, &at("2"))
        .zip(throughput(rows, &at("1")))
        .and_then(|(a, b)| ratio(a, b));
    Claim {
        statement: format!(
            "P-DUR scales with partitions on the Twitter-like mix: 2 partitions commit at least \
             {SCALE_MIN}x what 1 does"
        ),
        paper: "§VI-F, Figure 8: throughput grows with the partitions.".into(),
        measured: format!("2 partitions over 1: {}", times(r)),
        verdict: match r {
            Some(r) => Verdict::from_bool(r >= SCALE_MIN),
            None => Verdict::NotChecked("a point did not count".into()),
        },
    }
}

/// "Read-only timelines are the fastest": at every point their 90th percentile latency is below
/// the posts' and the follows'.
fn timelines_fastest(rows: &[Row]) -> Claim {
    let mut lines = Vec::new();
    let mut ok = Vec::new();
    for p in ["1", "2"] {
        let lat: Vec<Option<f64>> = OPS
            .iter()
            .map(|op| figure(rows, &at(p), &format!("p90_ms_{op}")))
            .collect();
        if let [Some(t), Some(post), Some(follow)] = lat[..] {
            lines.push(format!(
                "{p} partition(s): timeline {t:.2} ms, post {post:.2} ms, follow {follow:.2} ms"
            ));
            ok.push(t < post && t < follow);
        }
    }
    Claim {
        statement: "read-only timelines, committed without broadcast, have a lower 90th \
                    percentile latency than posts and follows at every point"
            .into(),
        paper: "§VI-F, Figure 8 (latency per operation, 90th percentile); Algorithm 3: \
                read-only transactions commit locally."
            .into(),
        measured: if lines.is_empty() {
            "no point with all three operations".into()
        } else {
            format!("90th percentiles: {}", lines.join("; "))
        },
        verdict: if ok.is_empty() {
            Verdict::NotChecked("no point with all three operations".into())
        } else {
            Verdict::from_bool(ok.iter().all(|&b| b))
        },
    }
}

/// Runs the experiment.
pub fn run(s: &Settings) -> Result<Artifacts, String> {
    let rows = run::run(s, &points(s));
    let claims = vec![
        scales(&rows),
        timelines_fastest(&rows),
        replicas_agree(&rows),
    ];
    Ok(Finish {
        title: "pdur-twitter: the Twitter-like workload on P-DUR",
        x_label: "partitions of the replica",
        setup: vec![format!(
            "Twitter-like network of {} users (producers, consumers and recent posts in the \
             user's partition); 50% timeline, 40% post (10–50 characters), 10% follow, \
             cross-partition with probability {FOLLOW_CROSS}; P-DUR: one replica of 1 and 2 \
             partitions",
            users(s)
        )],
        paper: PAPER,
        claims,
        model: Vec::new(),
        varying: &["algorithm", "partitions"],
        latencies: &OPS,
        right: RightPanel::Param {
            param: "p90_ms_post",
            caption: "Post latency (90th percentile)",
            y_label: "p90 ms",
        },
    }
    .artifacts(s, rows))
}

#[cfg(test)]
mod tests {
    use super::super::report::fake;
    use super::*;

    fn row(p: &str, t: f64, lat: [&str; 3]) -> Row {
        let mut r = fake::row(&[("algorithm", "pdur"), ("partitions", p)], 1.0, t);
        for (op, l) in OPS.iter().zip(lat) {
            r.params.push((format!("p90_ms_{op}"), l.into()));
        }
        r
    }

    #[test]
    fn verdicts_follow_the_measured_points() {
        let good = vec![
            row("1", 100.0, ["0.1", "1", "2"]),
            row("2", 170.0, ["0.2", "1", "2"]),
        ];
        assert_eq!(scales(&good).verdict, Verdict::Holds);
        assert_eq!(timelines_fastest(&good).verdict, Verdict::Holds);
        let bad = vec![
            row("1", 100.0, ["0.1", "1", "2"]),
            row("2", 120.0, ["3", "1", "2"]),
        ];
        assert_eq!(scales(&bad).verdict, Verdict::DoesNotHold);
        assert_eq!(timelines_fastest(&bad).verdict, Verdict::DoesNotHold);
        assert!(matches!(scales(&good[..1]).verdict, Verdict::NotChecked(_)));
    }
}
