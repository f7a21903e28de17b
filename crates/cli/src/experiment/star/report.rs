//! The report of a STAR experiment: lookups of a point's figures, the claim that every replica
//! agreed, the setup lines both experiments share, the table of every point and the assembly of
//! the artifacts.

use super::super::claims::{Claim, Verdict};
use super::super::cluster_rounds::schedule_line;
use super::super::plot::{Dashes, PlotSpec, RightPanel};
use super::super::report::Report;
use super::super::sweep::Row;
use super::super::{Artifacts, Settings};
use super::run::{FULL_REPLICAS, NODES, PARTITIONS, REPLICAS};

/// The row that counted and whose parameters match `at` (every pair).
pub fn find<'r>(rows: &'r [Row], at: &[(&str, &str)]) -> Option<&'r Row> {
    rows.iter()
        .find(|r| r.ok() && at.iter().all(|(k, v)| r.param(k) == Some(*v)))
}

/// A numeric figure (CSV column) of the point matching `at`, if it counted.
pub fn figure(rows: &[Row], at: &[(&str, &str)], key: &str) -> Option<f64> {
    find(rows, at)?.param(key)?.parse().ok()
}

/// "Every replica agrees": after every run of every point, each partition's copies had the same
/// digest and every node passed the workload's consistency check.
pub fn replicas_agree(rows: &[Row]) -> Claim {
    let bad: Vec<String> = rows
        .iter()
        .filter(|r| r.check != "ok" && r.check != "not run")
        .map(|r| {
            let at: Vec<String> = r
                .params
                .iter()
                .take(3)
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            format!("{}: {}", at.join(" "), r.check)
        })
        .collect();
    let checked: Vec<&Row> = rows.iter().filter(|r| r.check != "not run").collect();
    let copies: u64 = checked
        .iter()
        .filter_map(|r| r.param("copies_compared")?.parse::<u64>().ok())
        .sum();
    Claim {
        statement: "every replica agrees: after each point every partition's copies hold the same \
                    rows and every node passes the workload's consistency check"
            .into(),
        paper: "§4.4: STAR is serializable, and the replication fence ends each phase only once \
                every write of the phase reached every replica (§4.3)."
            .into(),
        measured: if bad.is_empty() {
            format!(
                "{} points, {copies} partition copies compared (in the reported run of each), \
                 every run of every point agreed and passed the check",
                checked.len()
            )
        } else {
            bad.join("; ")
        },
        verdict: if checked.is_empty() {
            Verdict::NotChecked("no point ran".into())
        } else {
            Verdict::from_bool(bad.is_empty())
        },
    }
}

/// The setup lines both STAR reports end with.
pub fn common_setup(s: &Settings) -> Vec<String> {
    vec![
        format!(
            "every point starts its own cluster of {NODES} `phasedb node` processes on 127.0.0.1 \
             (paper: 4 machines): {FULL_REPLICAS} full replica (node 0, also the coordinator) and \
             {} partial replica (node 1); {PARTITIONS} partitions with {REPLICAS} replicas each (as \
             in the paper), each node mastering one of them as in the paper's Figure 2 (with \
             {NODES} nodes and {REPLICAS} replicas the partial replica holds every partition too); \
             a node runs its transactions on one thread (paper: 12 worker threads per node), node i \
             pinned to core i",
            NODES - FULL_REPLICAS
        ),
        "the nodes generate their own load (no networked clients), as in the paper's evaluation \
         (§8.1); the benchmark reads every node's counters over TCP every 100 ms, and after the \
         load stops compares every partition's replicas and runs the workload's check on every node"
            .into(),
        format!("hardware: {}", s.machine()),
        schedule_line(s),
        "a point's warm-up lasts at least 3 iteration times and its measured window at least 40 \
         (3 with --quick): commits are released when their phase ends, so a window should span \
         many such bursts"
            .into(),
        "loopback has no network latency: a fence costs the round trips' CPU and the wait for \
         replicas to apply the phase's writes, not a wire's delay"
            .into(),
    ]
}

/// The range of the 1-minute load average at the end of the reported runs: how much other
/// processes competed with the nodes for the cores.
fn load_range(rows: &[Row]) -> Option<String> {
    let loads: Vec<f64> = rows
        .iter()
        .filter_map(|r| r.param("load_1min")?.parse().ok())
        .collect();
    let lo = loads.iter().copied().reduce(f64::min)?;
    let hi = loads.iter().copied().reduce(f64::max)?;
    Some(format!(
        "1-minute load average at the end of the reported runs: {lo:.2} to {hi:.2} on {} cores \
         (column \"load\"; the {NODES} busy nodes account for about {NODES}, the rest is other \
         processes competing with them)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    ))
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(String::new, |v| format!("{:.1}%", v * 100.0))
}

/// Adds the table of every point: its varying parameters, throughput, latency, replication
/// bytes, phases and the coordinator's time in fences.
fn measured_table(r: &mut Report, rows: &[Row], varying: &[&str], extra: &[(&str, &str)]) {
    let mut header = varying.to_vec();
    header.extend(["txn/s"]);
    header.extend(extra.iter().map(|(h, _)| *h));
    header.extend([
        "bytes/txn",
        "p50 ms",
        "p99 ms",
        "phases/s",
        "fences",
        "cross (measured)",
        "load",
        "status",
    ]);
    let lines: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let p = |k: &str| row.param(k).unwrap_or("").to_string();
            let f = |k: &str| row.param(k).and_then(|v| v.parse::<f64>().ok());
            let m = &row.metrics;
            let mut line: Vec<String> = varying.iter().map(|k| p(k)).collect();
            line.push(format!("{:.0}", m.throughput));
            line.extend(extra.iter().map(|(_, k)| p(k)));
            line.extend([
                p("bytes_per_txn"),
                format!("{:.1}", m.p50_us / 1e3),
                format!("{:.1}", m.p99_us / 1e3),
                p("phases_per_s"),
                pct(f("fence_share")),
                pct(f("cross_share")),
                p("load_1min"),
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

/// The parts of a STAR report that differ between the experiments.
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
    /// Parameters that vary between points, shown first in the table.
    pub varying: &'a [&'a str],
    /// Further columns of the table after the throughput: (header, parameter).
    pub columns: &'a [(&'a str, &'a str)],
    /// The parameter that picks a plot line's colour.
    pub color_by: &'static str,
    /// Which plot lines are dashed, if any.
    pub dashed: Option<Dashes>,
    /// The plot's right-hand panel.
    pub right: RightPanel,
}

impl Finish<'_> {
    /// The artifacts of the experiment.
    pub fn artifacts(self, s: &Settings, rows: Vec<Row>) -> Artifacts {
        let mut r = Report::new(self.title);
        let mut setup = self.setup;
        setup.extend(common_setup(s));
        setup.extend(load_range(&rows));
        r.heading("Setup").bullets(&setup);
        r.heading("What the paper claims").para(self.paper);
        r.heading("Verdicts");
        for (i, c) in self.claims.iter().enumerate() {
            r.claim(i + 1, c);
        }
        r.heading("Every point");
        measured_table(&mut r, &rows, self.varying, self.columns);
        r.para(&format!(
            "Data: `{0}.csv`; plot: `{0}.svg`. Latency is from a transaction's generation to its \
             release at the end of its phase; \"fences\" is the coordinator's share of wall time \
             between a phase's end and the next phase's begin.",
            s.name
        ));
        Artifacts {
            verdicts: self.claims.iter().map(Claim::verdict_line).collect(),
            rows,
            plot: PlotSpec {
                title: self.title.into(),
                x_label: self.x_label.into(),
                color_by: self.color_by,
                reference: None,
                dashed: self.dashed,
                right: self.right,
            },
            report: r.finish(),
        }
    }
}

/// Rows made up for the claims' tests.
#[cfg(test)]
pub mod fake {
    use super::super::super::sweep::{Metrics, Row};

    /// A row that counted, with these parameters and throughput.
    pub fn row(params: &[(&str, &str)], x: f64, throughput: f64) -> Row {
        Row {
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            series: String::new(),
            x,
            metrics: Metrics {
                throughput,
                committed: 1,
                ..Metrics::default()
            },
            rounds: vec![throughput],
            check: "ok".into(),
            applicable: Ok(()),
        }
    }

    /// Rows at `fixed`, one per `(x, throughput)` point, with `x_key` set to `x`.
    pub fn series(fixed: &[(&str, &str)], x_key: &str, points: &[(f64, f64)]) -> Vec<Row> {
        points
            .iter()
            .map(|&(x, t)| {
                let x_value = x.to_string();
                let mut at = fixed.to_vec();
                at.push((x_key, &x_value));
                row(&at, x, t)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::claims::Verdict;
    use super::*;

    #[test]
    fn a_point_whose_replicas_disagree_fails_the_agreement_claim() {
        let mut rows = vec![
            fake::row(&[("workload", "ycsb"), ("copies_compared", "4")], 1.0, 10.0),
            fake::row(&[("workload", "ycsb"), ("copies_compared", "4")], 2.0, 10.0),
        ];
        let c = replicas_agree(&rows);
        assert_eq!(c.verdict, Verdict::Holds);
        assert!(
            c.measured.contains("2 points, 8 partition copies"),
            "{}",
            c.measured
        );
        rows[1].check = "replicas disagree: partition 1".into();
        rows[1].applicable = Err(rows[1].check.clone());
        let c = replicas_agree(&rows);
        assert_eq!(c.verdict, Verdict::DoesNotHold);
        assert!(c.measured.contains("partition 1"), "{}", c.measured);
    }
}
