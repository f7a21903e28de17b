//! `pdur-baseline`: the P-DUR paper's §VI-C (Figures 3–5) — the micro-benchmark's types I (2 reads,
//! 2 writes), II (32 r, 2 w) and III (16 r, 16 w) with single-partition transactions: P-DUR scaled
//! up by partitions in one replica, DUR scaled out by replicas, and the standalone embedded store
//! by threads; x is what each adds: partitions, replicas, threads (cores).

use super::super::claims::{Claim, Verdict, ratio, times};
use super::super::plot::RightPanel;
use super::super::sweep::Row;
use super::super::{Artifacts, Settings};
use super::report::{Finish, figure, gammas, model_lines, replicas_agree, throughput};
use super::run::{self, Point, items};
use crate::cluster::pdur::{PdurAlgorithm, PdurWorkload};

const PAPER: &str = "With single-partition transactions P-DUR scales almost linearly with the \
number of partitions of a replica (scaling efficiency of 83–98% per doubling, up to 8 \
partitions), while DUR's throughput flattens as replicas are added, every replica certifying and \
applying every transaction (§III-B, equation 4); the standalone embedded store (Berkeley DB) \
peaks at a few threads (§VI-C, Figures 3–5).";

/// P-DUR's 2 partitions over its 1 on type I must reach this (the target; the paper's
/// 83–98% efficiency per doubling is 1.66–1.96x).
pub const SCALE_UP_MIN: f64 = 1.7;
/// P-DUR with 2 partitions over DUR with 2 replicas on type I must reach this.
pub const OVER_DUR_MIN: f64 = 1.5;

/// The transaction types of a run (only I with `--quick`).
fn types(s: &Settings) -> &'static [&'static str] {
    if s.quick { &["I"] } else { &["I", "II", "III"] }
}

fn points(s: &Settings) -> Vec<Point> {
    let mut out = Vec::new();
    for &ty in types(s) {
        let w = PdurWorkload::Micro {
            ty: ty.into(),
            items: items(s),
        };
        let extra = [("type", ty.to_string())];
        for n in [1u32, 2] {
            out.push(Point::new(
                s,
                PdurAlgorithm::Pdur,
                w.clone(),
                1,
                n,
                0.0,
                n as f64,
                &extra,
            ));
        }
        for n in [1usize, 2] {
            out.push(Point::new(
                s,
                PdurAlgorithm::Dur,
                w.clone(),
                n,
                1,
                0.0,
                n as f64,
                &extra,
            ));
        }
        for n in [1usize, 2] {
            let p = Point::new(
                s,
                PdurAlgorithm::Embedded,
                w.clone(),
                n,
                1,
                0.0,
                n as f64,
                &extra,
            );
            out.push(p);
        }
    }
    out
}

fn at<'a>(algorithm: &'a str, ty: &'a str, key: &'a str, n: &'a str) -> [(&'a str, &'a str); 3] {
    [("algorithm", algorithm), ("type", ty), (key, n)]
}

fn pdur(rows: &[Row], ty: &str, p: &str) -> Option<f64> {
    throughput(rows, &at("pdur", ty, "partitions", p))
}

fn dur(rows: &[Row], ty: &str, n: &str) -> Option<f64> {
    throughput(rows, &at("dur", ty, "replicas", n))
}

fn ratio_verdict(r: Option<f64>, ok: impl Fn(f64) -> bool) -> Verdict {
    match r {
        Some(r) => Verdict::from_bool(ok(r)),
        None => Verdict::NotChecked("a point did not count".into()),
    }
}

/// "P-DUR scales almost linearly with partitions": type I, 2 partitions over 1.
fn scales_up(rows: &[Row]) -> Claim {
    let per_type: Vec<String> = ["I", "II", "III"]
        .iter()
        .filter_map(|ty| {
            let r = ratio(pdur(rows, ty, "2")?, pdur(rows, ty, "1")?)?;
            Some(format!("type {ty}: {}", times(Some(r))))
        })
        .collect();
    let r = pdur(rows, "I", "2")
        .zip(pdur(rows, "I", "1"))
        .and_then(|(a, b)| ratio(a, b));
    Claim {
        statement: format!(
            "P-DUR scales up: one replica with 2 partitions commits at least {SCALE_UP_MIN}x what \
             it commits with 1 on type I"
        ),
        paper: "§VI-C: scaling efficiency of 83–98% per doubling of partitions (1.66–1.96x)."
            .into(),
        measured: if per_type.is_empty() {
            "no pair of points counted".into()
        } else {
            format!("2 partitions over 1: {}", per_type.join("; "))
        },
        verdict: ratio_verdict(r, |r| r >= SCALE_UP_MIN),
    }
}

/// "P-DUR beats DUR with the same cores": type I, 2 partitions over 2 DUR replicas.
fn beats_dur(rows: &[Row]) -> Claim {
    let r = pdur(rows, "I", "2")
        .zip(dur(rows, "I", "2"))
        .and_then(|(a, b)| ratio(a, b));
    Claim {
        statement: format!(
            "P-DUR with 2 partitions commits at least {OVER_DUR_MIN}x what DUR commits with 2 \
             replicas on type I"
        ),
        paper: "§VI-C, equation 6: with single-partition transactions p partitions improve on \
                DUR's limit by p times."
            .into(),
        measured: format!("P-DUR 2 partitions over DUR 2 replicas: {}", times(r)),
        verdict: ratio_verdict(r, |r| r >= OVER_DUR_MIN),
    }
}

/// "DUR flattens": a second DUR replica gains less than a second P-DUR partition, on every type.
fn dur_flattens(rows: &[Row]) -> Claim {
    let mut lines = Vec::new();
    let mut all = Vec::new();
    for ty in ["I", "II", "III"] {
        let d = dur(rows, ty, "2")
            .zip(dur(rows, ty, "1"))
            .and_then(|(a, b)| ratio(a, b));
        let p = pdur(rows, ty, "2")
            .zip(pdur(rows, ty, "1"))
            .and_then(|(a, b)| ratio(a, b));
        if let (Some(d), Some(p)) = (d, p) {
            lines.push(format!("type {ty}: DUR {d:.2}x, P-DUR {p:.2}x"));
            all.push(d < p);
        }
    }
    Claim {
        statement: "DUR flattens: a second DUR replica adds less throughput than a second P-DUR \
                    partition, on every type measured"
            .into(),
        paper: "§III-B: DUR's scaling is bounded by (γe + γt)/γt (equation 4), every replica \
                terminating every update transaction."
            .into(),
        measured: if lines.is_empty() {
            "no type with all four points".into()
        } else {
            format!("second replica / second partition: {}", lines.join("; "))
        },
        verdict: if all.is_empty() {
            Verdict::NotChecked("no type with all four points".into())
        } else {
            Verdict::from_bool(all.iter().all(|&b| b))
        },
    }
}

/// The embedded store's peak at a few threads cannot show on 2 cores; its ratio is reported.
fn embedded_store(rows: &[Row]) -> Claim {
    let r = throughput(rows, &at("embedded-store", "I", "replicas", "2"))
        .zip(throughput(
            rows,
            &at("embedded-store", "I", "replicas", "1"),
        ))
        .and_then(|(a, b)| ratio(a, b));
    let vs = throughput(rows, &at("embedded-store", "I", "replicas", "2"))
        .zip(pdur(rows, "I", "2"))
        .and_then(|(a, b)| ratio(a, b));
    Claim {
        statement: "the standalone embedded store peaks at a few threads".into(),
        paper: "§VI-C: Berkeley DB's throughput peaks at a few threads and then falls (lock \
                contention in the store)."
            .into(),
        measured: format!(
            "phasedb's embedded engine (OCC), type I: 2 threads over 1 {}, and {} P-DUR's 2 \
             partitions (no network, no replication)",
            times(r),
            times(vs)
        ),
        verdict: Verdict::NotChecked(
            "2 cores: a peak at a few of 8 threads cannot show, and the embedded engine is not \
             Berkeley DB"
                .into(),
        ),
    }
}

fn model(rows: &[Row]) -> Vec<String> {
    let cpu = |n: &str| figure(rows, &at("dur", "I", "replicas", n), "cpu_us_per_txn");
    let g = cpu("1").zip(cpu("2")).and_then(|(a, b)| gammas(a, b, 2.0));
    let base = pdur(rows, "I", "1");
    model_lines(
        g,
        &[
            (
                "type I, P-DUR 1 replica x 2 partitions over 1 x 1".into(),
                1.0,
                2.0,
                0.0,
                pdur(rows, "I", "2")
                    .zip(base)
                    .and_then(|(a, b)| ratio(a, b)),
            ),
            (
                "type I, DUR 2 replicas over 1".into(),
                2.0,
                1.0,
                0.0,
                dur(rows, "I", "2")
                    .zip(dur(rows, "I", "1"))
                    .and_then(|(a, b)| ratio(a, b)),
            ),
        ],
    )
}

/// Runs the experiment.
pub fn run(s: &Settings) -> Result<Artifacts, String> {
    let rows = run::run(s, &points(s));
    let claims = vec![
        scales_up(&rows),
        beats_dur(&rows),
        dur_flattens(&rows),
        embedded_store(&rows),
        replicas_agree(&rows),
    ];
    Ok(Finish {
        title: "pdur-baseline: P-DUR partitions vs DUR replicas vs an embedded store",
        x_label: "cores: P-DUR partitions, DUR replicas, embedded-store threads",
        setup: vec![format!(
            "micro-benchmark types {} over {} items with 4-byte keys and values, every \
             transaction single-partition; P-DUR: one replica with 1 and 2 partitions; DUR: 1 \
             and 2 replicas; the embedded store: 1 and 2 threads",
            types(s).join(", "),
            items(s)
        )],
        paper: PAPER,
        claims,
        model: model(&rows),
        varying: &["algorithm", "type", "replicas", "partitions"],
        latencies: types(s),
        right: RightPanel::Param {
            param: "cpu_us_per_txn",
            caption: "Worker CPU per transaction",
            y_label: "CPU µs per committed txn",
        },
    }
    .artifacts(s, rows))
}

#[cfg(test)]
mod tests {
    use super::super::report::fake;
    use super::*;

    fn rows(pdur2: f64, dur2: f64) -> Vec<Row> {
        let mut out = Vec::new();
        for (alg, key, n, t) in [
            ("pdur", "partitions", "1", 100.0),
            ("pdur", "partitions", "2", pdur2),
            ("dur", "replicas", "1", 100.0),
            ("dur", "replicas", "2", dur2),
            ("embedded-store", "replicas", "1", 1000.0),
            ("embedded-store", "replicas", "2", 1900.0),
        ] {
            let mut r = fake::row(&[("algorithm", alg), ("type", "I"), (key, n)], 1.0, t);
            if alg == "dur" {
                let cpu = if n == "1" { "10" } else { "14" };
                r.params.push(("cpu_us_per_txn".into(), cpu.into()));
            }
            out.push(r);
        }
        out
    }

    #[test]
    fn verdicts_follow_the_measured_ratios() {
        let good = rows(190.0, 110.0);
        assert_eq!(scales_up(&good).verdict, Verdict::Holds);
        assert_eq!(beats_dur(&good).verdict, Verdict::Holds);
        assert_eq!(dur_flattens(&good).verdict, Verdict::Holds);
        assert!(matches!(
            embedded_store(&good).verdict,
            Verdict::NotChecked(_)
        ));
        assert!(embedded_store(&good).measured.contains("1.90x"));
        let bad = rows(120.0, 130.0);
        assert_eq!(scales_up(&bad).verdict, Verdict::DoesNotHold);
        assert_eq!(beats_dur(&bad).verdict, Verdict::DoesNotHold);
        assert_eq!(dur_flattens(&bad).verdict, Verdict::DoesNotHold);
        let missing: Vec<Row> = good.into_iter().skip(1).collect();
        assert!(matches!(
            scales_up(&missing).verdict,
            Verdict::NotChecked(_)
        ));
        let m = model(&rows(190.0, 110.0));
        assert!(m[0].contains("γe = 6.00 µs, γt = 4.00 µs"), "{m:?}");
        assert!(
            m[1].contains("model (equation 5) 2.00x, measured 1.90x"),
            "{m:?}"
        );
    }
}
