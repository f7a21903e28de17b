//! `ramp-clients`: the RAMP paper's Figure 2 — YCSB zipf, 95% read-only transactions of 4 items,
//! every algorithm, x = concurrent clients.

use phasedb_dist::Algorithm;
use phasedb_dist::ramp::bench::workload::YcsbRamp;

use super::super::claims::Claim;
use super::super::sweep::Row;
use super::super::{Artifacts, Settings};
use super::report::{BASELINE, Finish, over, peak, ratio_claim};
use super::run::{self, Point};

const PAPER: &str = "On 5 servers with YCSB (zipfian access to 10M items, transactions of 4 \
operations, 95% read-only and 5% write-only, 1-byte values), RAMP-F and RAMP-H pay about 2% \
of NWNR's throughput at peak (10,000 clients), RAMP-S peaks at almost 60% of NWNR, and the \
lock-based baselines and E-PCI fall far below: LWNR reaches 28.6% of NWNR and LWLR 1.6% (Figure 2).";

/// Servers of every point (the paper used 5 on separate machines; this machine has 2 cores).
pub const SERVERS: usize = 2;

const LOCKS: [Algorithm; 3] = [Algorithm::Lwnr, Algorithm::Lwsr, Algorithm::Lwlr];
const RAMPS: [Algorithm; 3] = [
    Algorithm::RampFast,
    Algorithm::RampHybrid,
    Algorithm::RampSmall,
];

fn workload(s: &Settings) -> YcsbRamp {
    YcsbRamp {
        items: if s.quick { 10_000 } else { 1_000_000 },
        ..YcsbRamp::default()
    }
}

fn client_counts(s: &Settings) -> Vec<usize> {
    if s.quick {
        vec![8, 32]
    } else {
        vec![8, 64, 256, 512, 1024]
    }
}

fn points(s: &Settings) -> Vec<Point> {
    let mut out = Vec::new();
    for clients in client_counts(s) {
        for &algorithm in &s.algorithms {
            out.push(Point {
                algorithm,
                servers: SERVERS,
                clients,
                workload: workload(s),
                skip_commit: 0.0,
                params: Vec::new(),
                series: algorithm.name().into(),
                x: clients as f64,
            });
        }
    }
    out
}

fn vs_nwnr(rows: &[Row], algs: &[Algorithm]) -> Vec<(String, Option<f64>)> {
    let base = peak(rows, BASELINE);
    algs.iter()
        .map(|a| (a.name().to_string(), over(peak(rows, a.name()), base)))
        .collect()
}

fn claims(rows: &[Row]) -> Vec<Claim> {
    let lwlr = peak(rows, Algorithm::Lwlr.name());
    let best_other = LOCKS
        .iter()
        .chain([&Algorithm::Epci])
        .filter_map(|a| peak(rows, a.name()).map(|t| (a.name(), t)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    vec![
        ratio_claim(
            "RAMP-F and RAMP-H reach at least 0.9x NWNR's peak throughput",
            "Figure 2: at peak throughput RAMP-F and RAMP-H pay about 2% of NWNR's throughput.",
            "peak throughput / NWNR's peak",
            &vs_nwnr(rows, &[Algorithm::RampFast, Algorithm::RampHybrid]),
            0.9..=f64::MAX,
        ),
        ratio_claim(
            "RAMP-S, paying a second read round always, reaches at least 0.5x NWNR's peak",
            "Figure 2: RAMP-S peaks at almost 60% of NWNR's throughput.",
            "peak throughput / NWNR's peak",
            &vs_nwnr(rows, &[Algorithm::RampSmall]),
            0.5..=f64::MAX,
        ),
        ratio_claim(
            "every RAMP algorithm reaches at least 2x LWLR's peak throughput",
            "Figure 2: LWLR attains only 1.6% of NWNR's throughput.",
            "peak throughput / LWLR's peak",
            &RAMPS
                .iter()
                .map(|a| (a.name().to_string(), over(peak(rows, a.name()), lwlr)))
                .collect::<Vec<_>>(),
            2.0..=f64::MAX,
        ),
        ratio_claim(
            "RAMP-F and RAMP-H outperform every lock-based baseline and E-PCI",
            "§5.2: RAMP-F and RAMP-H always outperform the lock-based and E-PCI techniques.",
            &format!(
                "peak throughput / the best of LWNR, LWSR, LWLR and E-PCI ({})",
                best_other.map_or("none measured", |b| b.0)
            ),
            &[Algorithm::RampFast, Algorithm::RampHybrid]
                .iter()
                .map(|a| {
                    let r = over(peak(rows, a.name()), best_other.map(|b| b.1));
                    (a.name().to_string(), r)
                })
                .collect::<Vec<_>>(),
            1.0..=f64::MAX,
        ),
        no_stall(rows),
    ]
}

/// "No lock baseline deadlocks": every lock-baseline point committed transactions in its window.
fn no_stall(rows: &[Row]) -> Claim {
    let lock_rows: Vec<&Row> = rows
        .iter()
        .filter(|r| LOCKS.iter().any(|a| r.param("algorithm") == Some(a.name())))
        .collect();
    let stalled: Vec<String> = lock_rows
        .iter()
        .filter(|r| !r.ok())
        .map(|r| {
            format!(
                "{} at {} clients",
                r.param("algorithm").unwrap_or("?"),
                r.param("clients").unwrap_or("?")
            )
        })
        .collect();
    let committed: u64 = lock_rows.iter().map(|r| r.metrics.committed).sum();
    Claim {
        statement: "no lock-based baseline deadlocks: every point commits transactions".into(),
        paper: "§5.1: the lock-based baselines request locks so that they cannot deadlock.".into(),
        measured: if stalled.is_empty() {
            format!(
                "{} lock-baseline points, {committed} transactions committed, none stalled",
                lock_rows.len()
            )
        } else {
            format!("stalled: {}", stalled.join(", "))
        },
        verdict: if lock_rows.is_empty() {
            super::super::claims::Verdict::NotChecked("no lock baseline measured".into())
        } else {
            super::super::claims::Verdict::from_bool(stalled.is_empty())
        },
    }
}

/// Runs the experiment.
pub fn run(s: &Settings) -> Result<Artifacts, String> {
    let w = workload(s);
    w.validate()?;
    let rows = run::run(s, &points(s));
    let counts: Vec<String> = client_counts(s).iter().map(usize::to_string).collect();
    Ok(Finish {
        title: "ramp-clients: throughput and latency against concurrent clients",
        x_label: "concurrent clients",
        setup: vec![
            format!(
                "{SERVERS} servers (paper: 5), YCSB: {} items (paper: 10M), zipfian theta {}, {} \
                 items per transaction, {:.0}% read-only, {}-byte values",
                w.items,
                w.theta,
                w.ops,
                w.read_ratio * 100.0,
                w.value_size
            ),
            format!(
                "clients: {} (paper: up to 10,000 on separate machines); algorithms: {}",
                counts.join(", "),
                if s.algorithms.len() == Algorithm::ALL.len() {
                    "every one".to_string()
                } else {
                    s.algorithms
                        .iter()
                        .map(|a| a.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
            "verdicts compare each algorithm's peak throughput over the client counts".into(),
        ],
        paper: PAPER,
        claims: claims(&rows),
        varying: &["clients"],
    }
    .artifacts(s, rows))
}
