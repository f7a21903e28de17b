//! `pdur-cross`: the P-DUR paper's §VI-D (Figure 6) — type I transactions on one P-DUR replica of
//! 2 partitions with a growing share of cross-partition transactions (each touching both
//! partitions), beside DUR (one partition, where no transaction is cross-partition).

use phasedb_dist::pdur::model::pdur_scaling;

use super::super::claims::{Claim, Verdict, ratio, times};
use super::super::plot::RightPanel;
use super::super::sweep::Row;
use super::super::{Artifacts, Settings};
use super::report::{Finish, replicas_agree, throughput};
use super::run::{self, Point, items};
use crate::cluster::pdur::{PdurAlgorithm, PdurWorkload};

const PAPER: &str = "P-DUR's throughput falls as the share of cross-partition transactions \
grows: their partitions exchange votes and each terminates them, so with all transactions \
cross-partition P-DUR behaves like DUR (equation 7); DUR, which has no cross-partition \
transactions to coordinate, wins at high shares and with small transactions (§VI-D, Figure 6).";

/// At 100% cross-partition P-DUR must commit at most this share of its 0.1% figure.
pub const FALL_MAX: f64 = 0.9;

fn shares(s: &Settings) -> &'static [f64] {
    if s.quick {
        &[0.1, 100.0]
    } else {
        &[0.1, 1.0, 10.0, 50.0, 100.0]
    }
}

fn points(s: &Settings) -> Vec<Point> {
    let w = PdurWorkload::Micro {
        ty: "I".into(),
        items: items(s),
    };
    let mut out: Vec<Point> = shares(s)
        .iter()
        .map(|&pct| {
            Point::new(
                s,
                PdurAlgorithm::Pdur,
                w.clone(),
                1,
                2,
                pct / 100.0,
                pct,
                &[],
            )
        })
        .collect();
    // DUR has one partition: the share does not apply; its line spans the sweep's ends.
    let ends = [shares(s)[0], *shares(s).last().expect("shares")];
    for x in ends {
        let mut p = Point::new(s, PdurAlgorithm::Dur, w.clone(), 1, 1, 0.0, x, &[]);
        p.params.push(("at_pct".into(), x.to_string()));
        out.push(p);
    }
    out
}

fn pdur_at(rows: &[Row], pct: f64) -> Option<f64> {
    throughput(
        rows,
        &[("algorithm", "pdur"), ("cross_pct", &format!("{pct}"))],
    )
}

fn dur_mean(rows: &[Row]) -> Option<f64> {
    let v: Vec<f64> = rows
        .iter()
        .filter(|r| r.ok() && r.param("algorithm") == Some("dur"))
        .map(|r| r.metrics.throughput)
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// "Throughput falls with the cross-partition share": the highest share's over the lowest's.
fn falls(rows: &[Row], lo: f64, hi: f64) -> Claim {
    let r = pdur_at(rows, hi)
        .zip(pdur_at(rows, lo))
        .and_then(|(a, b)| ratio(a, b));
    let measured: Vec<String> = rows
        .iter()
        .filter(|r| r.ok() && r.param("algorithm") == Some("pdur"))
        .map(|r| {
            format!(
                "{}%: {:.0}",
                r.param("cross_pct").unwrap_or("?"),
                r.metrics.throughput
            )
        })
        .collect();
    Claim {
        statement: format!(
            "P-DUR's throughput falls with the cross-partition share: at {hi}% at most \
             {FALL_MAX}x its throughput at {lo}%"
        ),
        paper: "§VI-D, Figure 6: throughput decreases as cross-partition transactions increase."
            .into(),
        measured: format!(
            "txn/s by share: {}; {hi}% over {lo}%: {}",
            measured.join(", "),
            times(r)
        ),
        verdict: match r {
            Some(r) => Verdict::from_bool(r <= FALL_MAX),
            None => Verdict::NotChecked("an end of the sweep did not count".into()),
        },
    }
}

/// "DUR wins at a high share": DUR's throughput against P-DUR's at 100%.
fn dur_wins(rows: &[Row], hi: f64) -> Claim {
    let r = dur_mean(rows)
        .zip(pdur_at(rows, hi))
        .and_then(|(a, b)| ratio(a, b));
    Claim {
        statement: format!(
            "DUR commits at least as much as P-DUR with {hi}% cross-partition transactions"
        ),
        paper: "§VI-D: with many cross-partition transactions DUR outperforms P-DUR (the cost of \
                coordinating partitions without the benefit of parallelism)."
            .into(),
        measured: format!("DUR (one replica) over P-DUR at {hi}%: {}", times(r)),
        verdict: match r {
            Some(r) => Verdict::from_bool(r >= 1.0),
            None => Verdict::NotChecked("a point did not count".into()),
        },
    }
}

fn model(rows: &[Row], s: &Settings) -> Vec<String> {
    let base = dur_mean(rows);
    let mut out = vec![
        "one replica (n = 1): equation 5 is 2/(1 + g) for 2 partitions whatever γe and γt, \
         relative to one replica of one partition (DUR's point)"
            .to_string(),
    ];
    for &pct in shares(s) {
        let g = pct / 100.0;
        let m = pdur_scaling(1.0, 2.0, g, 1.0, 1.0);
        let measured = pdur_at(rows, pct).zip(base).and_then(|(a, b)| ratio(a, b));
        out.push(format!(
            "{pct}% cross-partition: model {m:.2}x, measured {}",
            times(measured)
        ));
    }
    out
}

/// Runs the experiment.
pub fn run(s: &Settings) -> Result<Artifacts, String> {
    let rows = run::run(s, &points(s));
    let (lo, hi) = (shares(s)[0], *shares(s).last().expect("shares"));
    let claims = vec![
        falls(&rows, lo, hi),
        dur_wins(&rows, hi),
        replicas_agree(&rows),
    ];
    Ok(Finish {
        title: "pdur-cross: P-DUR against the share of cross-partition transactions",
        x_label: "cross-partition transactions (%)",
        setup: vec![format!(
            "micro-benchmark type I over {} items; P-DUR: one replica of 2 partitions, \
             cross-partition transactions touching both (half their keys in each); shares (%): \
             {}; DUR: one replica, run at the sweep's two ends (the share does not apply)",
            items(s),
            shares(s)
                .iter()
                .map(f64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )],
        paper: PAPER,
        claims,
        model: model(&rows, s),
        varying: &["algorithm", "cross_pct", "partitions"],
        latencies: &["I"],
        right: RightPanel::AbortRate,
    }
    .artifacts(s, rows))
}

#[cfg(test)]
mod tests {
    use super::super::report::fake;
    use super::*;

    fn rows(at_100: f64, dur: f64) -> Vec<Row> {
        vec![
            fake::row(&[("algorithm", "pdur"), ("cross_pct", "0.1")], 0.1, 200.0),
            fake::row(
                &[("algorithm", "pdur"), ("cross_pct", "100")],
                100.0,
                at_100,
            ),
            fake::row(&[("algorithm", "dur"), ("cross_pct", "0")], 0.1, dur),
            fake::row(&[("algorithm", "dur"), ("cross_pct", "0")], 100.0, dur),
        ]
    }

    #[test]
    fn verdicts_follow_the_measured_points() {
        let r = rows(90.0, 120.0);
        assert_eq!(falls(&r, 0.1, 100.0).verdict, Verdict::Holds);
        assert_eq!(dur_wins(&r, 100.0).verdict, Verdict::Holds);
        let r = rows(195.0, 120.0);
        assert_eq!(falls(&r, 0.1, 100.0).verdict, Verdict::DoesNotHold);
        assert_eq!(dur_wins(&r, 100.0).verdict, Verdict::DoesNotHold);
        assert!(matches!(
            falls(&r[..1], 0.1, 100.0).verdict,
            Verdict::NotChecked(_)
        ));
    }
}
