//! The Doppel paper's experiments: increments on hot keys (INCR1, INCRZ), LIKE, phase length and
//! RUBiS. They share how points run (the protocol compared with Doppel, one thread count, Doppel's
//! phase length), what a row records besides throughput (per-type latency, records split) and how
//! the report is put together.

pub mod incr1;
pub mod incr1_moving;
pub mod incr1_scaling;
pub mod incrz;
pub mod like;
pub mod like_latency;
pub mod phase_length;
pub mod rubis;

use std::time::Duration;

use phasedb_txn::Config;
use phasedb_workloads::{BenchOptions, Workload};

use super::claims::Claim;
use super::plot::{PlotSpec, RightPanel};
use super::protocols::{self, Protocol};
use super::report::Report;
use super::sweep::{self, Measured, Point, Row};
use super::{Artifacts, Settings};
use crate::bench::run_named;

/// A transaction is abandoned after this many conflicting attempts (the hot-key workloads make
/// 2PL and OCC retry a lot; this bounds a point's time without changing its throughput).
pub const MAX_RETRIES: u32 = 10_000;

/// The protocols of a Doppel experiment: those named with `--protocols`, or `default`.
pub fn protocols(s: &Settings, default: &[&str]) -> Vec<Protocol> {
    if s.protocols.len() != protocols::all().len() {
        return s.protocols.clone();
    }
    protocols::all()
        .into_iter()
        .filter(|p| default.contains(&p.name.as_str()))
        .collect()
}

/// Run options for `threads` workers and a Doppel phase of `phase`.
pub fn options(s: &Settings, threads: usize, phase: Duration) -> BenchOptions {
    BenchOptions {
        threads,
        warmup: s.warmup,
        duration: s.duration,
        seed: s.seed,
        durable_results: false,
        durable_progress: false,
        config: Config {
            max_retries: Some(MAX_RETRIES),
            phase_length: phase,
            ..Config::default()
        },
    }
}

/// The default phase length (the paper's 20 ms).
pub const PHASE: Duration = Duration::from_millis(20);

/// How near a verdict's ratio may lie to its threshold, either way, before the report warns it can flip.
pub const FLIP_MARGIN: f64 = 0.15;

/// A note for a claim comparing Doppel with a baseline: when a measured ratio lies within
/// [`FLIP_MARGIN`] of the threshold the verdict compares it with, the verdict can flip from one run
/// to the next, or because a baseline got faster (issue 38 made the 2PL and OCC hand-off on a hot
/// record cheaper); the report says so instead of presenting a coin toss as a finding.
pub fn flip_note(ratios: &[Option<f64>], threshold: f64) -> String {
    let near: Vec<String> = ratios
        .iter()
        .flatten()
        .filter(|&&r| (r / threshold - 1.0).abs() <= FLIP_MARGIN)
        .map(|r| format!("{r:.2}x"))
        .collect();
    if near.is_empty() {
        return String::new();
    }
    format!(
        " ({} within {:.0}% of the {threshold}x threshold: this verdict can flip from run to run, \
         and flipped before when the baselines' hot-record hand-off got faster)",
        near.join(", "),
        FLIP_MARGIN * 100.0
    )
}

fn micros(t: &phasedb_txn::TypeStats, q: f64) -> String {
    let h = &t.latency_ns;
    if h.is_empty() {
        "0".into()
    } else {
        format!("{:.1}", h.value_at_quantile(q) as f64 / 1000.0)
    }
}

/// Runs `workload` on `p` and records, besides the workload's settings, each transaction type's
/// p50/p99 latency and Doppel's split records and stashed transactions.
pub fn measure<W: Workload>(p: &Protocol, mut workload: W, opts: &BenchOptions) -> Measured {
    let result = run_named(p.id, &mut workload, opts);
    let mut settings: Vec<(String, String)> = workload
        .settings()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    for (i, name) in result.txn_types.iter().enumerate() {
        if let Some(t) = result.stats.types.get(i) {
            settings.push((format!("{name}_p50_us"), micros(t, 0.5)));
            settings.push((format!("{name}_p99_us"), micros(t, 0.99)));
        }
    }
    for (k, v) in &result.protocol_report {
        match *k {
            "most records split at once" => settings.push(("split_records".into(), v.clone())),
            "transactions stashed" => settings.push(("stashed".into(), v.clone())),
            _ => {}
        }
    }
    Measured { result, settings }
}

/// A point of a Doppel sweep: protocol `p` as the series at `x`, with `params` describing it.
pub fn point<'a>(
    p: &Protocol,
    x: f64,
    params: Vec<(&str, String)>,
    run: impl Fn() -> Measured + 'a,
) -> Point<'a> {
    let mut all = vec![("protocol".to_string(), p.name.clone())];
    all.extend(params.into_iter().map(|(k, v)| (k.to_string(), v)));
    Point {
        params: all,
        constants: Vec::new(),
        series: p.name.clone(),
        x,
        group: p.name.clone(),
        reference: p.is_reference(),
        run: Box::new(run),
    }
}

/// Runs the points.
pub fn sweep(s: &Settings, points: Vec<Point<'_>>) -> Vec<Row> {
    sweep::run(s.name, points, s.runs, s.placement)
}

/// The rows of protocol `protocol` that ran, by x.
pub fn series<'r>(rows: &'r [Row], protocol: &str) -> Vec<&'r Row> {
    let mut v: Vec<&Row> = rows
        .iter()
        .filter(|r| r.ok() && r.param("protocol") == Some(protocol))
        .collect();
    v.sort_by(|a, b| a.x.total_cmp(&b.x));
    v
}

/// The row of `protocol` at `x`, if it ran.
pub fn at<'r>(rows: &'r [Row], protocol: &str, x: f64) -> Option<&'r Row> {
    series(rows, protocol)
        .into_iter()
        .find(|r| (r.x - x).abs() < 1e-9)
}

/// A parameter of a row as a number.
pub fn num(row: &Row, key: &str) -> Option<f64> {
    row.param(key)?.parse().ok()
}

/// The setup lines every Doppel sweep's report shares.
pub fn common_setup(s: &Settings, threads: usize) -> Vec<String> {
    run_setup(s, threads, &s.sweep_runs())
}

/// The setup lines of a Doppel report whose points ran as `runs` says.
fn run_setup(s: &Settings, threads: usize, runs: &str) -> Vec<String> {
    vec![
        format!("{threads} worker threads on {}", s.machine()),
        s.point_line(runs),
        format!(
            "a transaction is abandoned after {MAX_RETRIES} conflicting attempts; points run one \
             after another, so compared points ran side by side"
        ),
    ]
}

/// What a Doppel report holds.
pub struct Finish<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub setup: Vec<String>,
    pub paper: &'a str,
    pub claims: Vec<Claim>,
    /// Extra columns of the table of points: (header, row parameter).
    pub columns: &'a [(&'a str, &'a str)],
    /// Whether the report lists every point (long time series leave that to the CSV).
    pub table: bool,
}

impl Finish<'_> {
    /// The artifacts: the report (setup, paper, claims, table of points) and the plot.
    pub fn artifacts(self, s: &Settings, rows: Vec<Row>) -> Artifacts {
        let mut r = Report::new(self.title);
        r.heading("Setup").bullets(&self.setup);
        r.heading("What the paper found").para(self.paper);
        r.heading("Claims");
        for (i, c) in self.claims.iter().enumerate() {
            r.claim(i + 1, c);
        }
        if self.table {
            self.table(&mut r, &rows);
        }
        r.para(&format!("Data: `{0}.csv`; plot: `{0}.svg`.", s.name));
        Artifacts {
            verdicts: self.claims.iter().map(Claim::verdict_line).collect(),
            plot: PlotSpec {
                title: self.title.to_string(),
                x_label: self.x_label.to_string(),
                color_by: "protocol",
                reference: None,
                dashed: None,
                right: RightPanel::AbortRate,
            },
            rows,
            report: r.finish(),
        }
    }

    fn table(&self, r: &mut Report, rows: &[Row]) {
        r.heading("Measured");
        let mut header = vec![self.x_label, "protocol", "txn/s", "abort rate", "p99 µs"];
        header.extend(self.columns.iter().map(|(h, _)| *h));
        header.push("status");
        let lines: Vec<Vec<String>> = rows
            .iter()
            .map(|row| {
                let m = &row.metrics;
                let mut line = vec![
                    format!("{}", row.x),
                    row.param("protocol").unwrap_or("").to_string(),
                    format!("{:.0}", m.throughput),
                    format!("{:.2}%", m.abort_rate * 100.0),
                    format!("{:.1}", m.p99_us),
                ];
                line.extend(
                    self.columns
                        .iter()
                        .map(|(_, k)| row.param(k).unwrap_or("").to_string()),
                );
                line.push(match &row.applicable {
                    Ok(()) => "ok".into(),
                    Err(e) => format!("n/a: {e}"),
                });
                line
            })
            .collect();
        r.table(&header, &lines);
    }
}

#[cfg(test)]
mod tests {
    use super::flip_note;

    #[test]
    fn a_ratio_near_its_threshold_is_flagged_as_able_to_flip() {
        assert!(flip_note(&[Some(1.6)], 1.5).contains("can flip"));
        assert!(flip_note(&[Some(1.3)], 1.5).contains("1.30x"));
        assert!(flip_note(&[Some(3.0), None], 1.5).is_empty());
        assert!(flip_note(&[None], 1.0).is_empty());
        assert!(flip_note(&[Some(2.0), Some(0.9)], 1.0).contains("0.90x"));
    }
}
