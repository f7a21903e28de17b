//! The report of a RAMP experiment: throughput lookups and ratio claims, the table of every point,
//! the plot's styles and the assembly of the artifacts.

use super::super::claims::{Claim, ratio, times};
pub use super::super::claims::{over, ratio_claim};
use super::super::cluster_rounds::schedule_line;
use super::super::plot::{PlotSpec, RightPanel};
use super::super::report::Report;
use super::super::sweep::Row;
use super::super::{Artifacts, Settings};

/// The baseline every ratio is taken against.
pub const BASELINE: &str = "nwnr";

/// Throughput of `algorithm` at the point whose parameters match `at` (every pair), if it counted.
pub fn tput(rows: &[Row], algorithm: &str, at: &[(&str, String)]) -> Option<f64> {
    rows.iter()
        .find(|r| {
            r.ok()
                && r.param("algorithm") == Some(algorithm)
                && at.iter().all(|(k, v)| r.param(k) == Some(v.as_str()))
        })
        .map(|r| r.metrics.throughput)
}

/// The highest throughput `algorithm` reached at any point that counted.
pub fn peak(rows: &[Row], algorithm: &str) -> Option<f64> {
    rows.iter()
        .filter(|r| r.ok() && r.param("algorithm") == Some(algorithm))
        .map(|r| r.metrics.throughput)
        .max_by(f64::total_cmp)
}

fn pct(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

/// Adds the table of every point: its varying parameters, throughput, ratio to NWNR at the same
/// point, latency and the share of two-round reads.
fn measured_table(r: &mut Report, rows: &[Row], varying: &[&str]) {
    let has_base = rows.iter().any(|r| r.param("algorithm") == Some(BASELINE));
    let mut header = varying.to_vec();
    header.extend(["algorithm", "txn/s"]);
    if has_base {
        header.push("vs nwnr");
    }
    header.extend([
        "p50 µs",
        "p99 µs",
        "p999 µs",
        "2-round reads",
        "aborts",
        "status",
    ]);
    let lines: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let p = |k: &str| row.param(k).unwrap_or("").to_string();
            let m = &row.metrics;
            let mut line: Vec<String> = varying.iter().map(|k| p(k)).collect();
            line.extend([p("algorithm"), format!("{:.0}", m.throughput)]);
            if has_base {
                let at: Vec<(&str, String)> = varying.iter().map(|k| (*k, p(k))).collect();
                let base = tput(rows, BASELINE, &at);
                line.push(if row.ok() {
                    times(base.and_then(|b| ratio(m.throughput, b)))
                } else {
                    "n/a".into()
                });
            }
            line.extend([
                format!("{:.0}", m.p50_us),
                format!("{:.0}", m.p99_us),
                format!("{:.0}", m.p999_us),
                row.param("two_round_share")
                    .and_then(|v| v.parse::<f64>().ok())
                    .map_or_else(String::new, pct),
                pct(m.abort_rate),
                match &row.applicable {
                    Ok(()) => "ok".into(),
                    Err(e) => format!("n/a: {e}"),
                },
            ]);
            line
        })
        .collect();
    r.table(&header, &lines);
}

/// The setup lines every RAMP report starts with.
pub fn common_setup(s: &Settings) -> Vec<String> {
    vec![
        format!(
            "every point starts its own cluster of `phasedb node` processes on 127.0.0.1 (one core's \
             event loop each, node i pinned to core i, with huge pages off) and runs closed-loop \
             clients from {} benchmark endpoint thread(s) (one per core, at most one per client, \
             thread i pinned to core i); {}",
            phasedb_dist::ramp::bench::default_threads(usize::MAX),
            s.machine()
        ),
        schedule_line(s),
        "loopback has no network latency, so a round trip costs CPU rather than waiting: ratios \
         reflect messages and bytes processed per transaction"
            .into(),
    ]
}

/// The parts of a RAMP report that differ between the experiments.
pub struct Finish<'a> {
    /// Title of the report and the plot.
    pub title: &'a str,
    /// Name of the plot's x axis.
    pub x_label: &'a str,
    /// Setup lines (before the common ones).
    pub setup: Vec<String>,
    /// The paper's claims in a paragraph.
    pub paper: &'a str,
    /// The claims with their verdicts.
    pub claims: Vec<Claim>,
    /// Parameters that vary between points besides the algorithm, shown first in the table.
    pub varying: &'a [&'a str],
}

impl Finish<'_> {
    /// The artifacts of the experiment.
    pub fn artifacts(self, s: &Settings, rows: Vec<Row>) -> Artifacts {
        let mut r = Report::new(self.title);
        let mut setup = self.setup;
        setup.extend(common_setup(s));
        r.heading("Setup").bullets(&setup);
        r.heading("What the paper claims").para(self.paper);
        r.heading("Verdicts");
        for (i, c) in self.claims.iter().enumerate() {
            r.claim(i + 1, c);
        }
        r.heading("Every point");
        measured_table(&mut r, &rows, self.varying);
        r.para(&format!(
            "Data: `{0}.csv`; plot: `{0}.svg` (throughput and abort rate; {BASELINE}, where measured, in grey).",
            s.name
        ));
        Artifacts {
            verdicts: self.claims.iter().map(Claim::verdict_line).collect(),
            rows,
            plot: PlotSpec {
                title: self.title.into(),
                x_label: self.x_label.into(),
                color_by: "algorithm",
                reference: Some(BASELINE),
                dashed: None,
                right: RightPanel::AbortRate,
            },
            report: r.finish(),
        }
    }
}
