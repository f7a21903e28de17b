//! `phase-length`: Doppel on three LIKE variants as the phase length varies: read latency and
//! throughput.

use std::time::Duration;

use phasedb_workloads::like::Like;

use super::super::claims::{Claim, Verdict, ratio, times};
use super::super::sweep::{Point, Row};
use super::super::{Artifacts, Settings};
use super::like::config;
use super::{Finish, common_setup, measure, num, options, protocols, sweep};

const PAPER: &str = "On LIKE with uniform pages, skewed pages (alpha 1.4, 50% writes) and skewed \
write-heavy pages (10% reads; 20 keys split), the phase length directly sets the latency of \
transactions that read split data and must be stashed; throughput drops when phases are shorter \
than about 5 ms, as phase changes cost more than they save (Figure 13).";

/// The variants: name, alpha, write share.
const VARIANTS: [(&str, f64, f64); 3] = [
    ("uniform", 0.0, 0.5),
    ("skewed", 1.4, 0.5),
    ("skewed write-heavy", 1.4, 0.9),
];

fn series<'r>(rows: &'r [Row], variant: &str) -> Vec<&'r Row> {
    let mut v: Vec<&Row> = rows
        .iter()
        .filter(|r| r.ok() && r.series == variant)
        .collect();
    v.sort_by(|a, b| a.x.total_cmp(&b.x));
    v
}

/// Runs the experiment.
pub fn run(s: &Settings) -> Result<Artifacts, String> {
    let lengths: &[u64] = if s.quick {
        &[5, 20]
    } else {
        &[1, 2, 5, 10, 20, 50, 100]
    };
    let threads = s.threads_max();
    let Some(doppel) = protocols(s, &["doppel"])
        .into_iter()
        .find(|p| p.name == "doppel")
    else {
        return Err("phase-length measures doppel: include it in --protocols".into());
    };
    let mut points = Vec::new();
    for (name, alpha, writes) in VARIANTS {
        for &ms in lengths {
            let cfg = config(s, alpha, writes);
            cfg.validate()?;
            let opts = options(s, threads, Duration::from_millis(ms));
            let p = doppel.clone();
            points.push(Point {
                params: vec![
                    ("protocol".into(), name.into()),
                    ("phase_ms".into(), ms.to_string()),
                ],
                constants: Vec::new(),
                series: name.into(),
                x: ms as f64,
                group: name.into(),
                reference: false,
                run: Box::new(move || measure(&p, Like::new(cfg.clone()), &opts)),
            });
        }
    }
    let rows = sweep(s, points);
    let skewed = series(&rows, "skewed");
    let latency = skewed
        .first()
        .zip(skewed.last())
        .and_then(|(a, b)| Some((a.x, num(a, "read_p99_us")?, b.x, num(b, "read_p99_us")?)));
    let heavy = series(&rows, "skewed write-heavy");
    let shortest = heavy.first().map(|r| (r.x, r.metrics.throughput));
    let at20 = heavy
        .iter()
        .find(|r| r.x == 20.0)
        .map(|r| r.metrics.throughput);
    let claims = vec![
        Claim {
            statement: "read p99 latency grows with the phase length (skewed LIKE)".into(),
            paper: "the phase length directly determines the latency of stashed reads".into(),
            measured: latency.map_or("n/a".into(), |(a, la, b, lb)| {
                format!(
                    "read p99 {:.1} ms at {a} ms phases, {:.1} ms at {b} ms",
                    la / 1000.0,
                    lb / 1000.0
                )
            }),
            verdict: latency.map_or(
                Verdict::NotChecked("too few phase lengths ran".into()),
                |(_, la, _, lb)| Verdict::from_bool(lb > la),
            ),
        },
        Claim {
            statement: "very short phases cost throughput (skewed write-heavy LIKE, shortest \
                        phase vs 20 ms)"
                .into(),
            paper: "throughput drops below ~5 ms phases".into(),
            measured: match (shortest, at20) {
                (Some((ms, t)), Some(t20)) => format!(
                    "{t:.0} txn/s at {ms} ms, {t20:.0} at 20 ms ({})",
                    times(ratio(t, t20))
                ),
                _ => "n/a".into(),
            },
            verdict: match (shortest, at20) {
                (Some((ms, t)), Some(t20)) if ms < 20.0 => Verdict::from_bool(t < t20),
                _ => Verdict::NotChecked("needs a phase shorter than 20 ms and 20 ms".into()),
            },
        },
    ];
    let c = config(s, 1.4, 0.5);
    let mut setup = vec![format!(
        "doppel on LIKE ({} users, {} pages): uniform pages at 50% writes, zipf 1.4 at 50% writes, \
         zipf 1.4 at 90% writes; x = phase length in ms",
        c.users, c.pages
    )];
    setup.extend(common_setup(s, threads));
    Ok(Finish {
        title: "phase-length: Doppel's phase length",
        x_label: "phase length (ms)",
        setup,
        paper: PAPER,
        claims,
        columns: &[
            ("read p99 µs", "read_p99_us"),
            ("write p99 µs", "write_p99_us"),
            ("pages split", "split_records"),
            ("stashed", "stashed"),
        ],
        table: true,
    }
    .artifacts(s, rows))
}
