//! The report of a P-DUR experiment: lookups of a point's figures, the claim that every replica
//! agreed, the analytical model of §IV-D with γe and γt measured, the setup lines the experiments
//! share, the table of every point and the assembly of the artifacts.

use phasedb_dist::pdur::model::{dur_scaling, pdur_scaling};

use super::super::claims::{Claim, Verdict};
use super::super::cluster_rounds::schedule_line;
use super::super::plot::{PlotSpec, RightPanel};
use super::super::report::Report;
use super::super::sweep::Row;
use super::super::{Artifacts, Settings};
use super::run::CLIENTS_PER_PARTITION;

/// The row that counted and whose parameters match `at` (every pair).
pub fn find<'r>(rows: &'r [Row], at: &[(&str, &str)]) -> Option<&'r Row> {
    rows.iter()
        .find(|r| r.ok() && at.iter().all(|(k, v)| r.param(k) == Some(*v)))
}

/// The throughput of the point matching `at`, if it counted.
pub fn throughput(rows: &[Row], at: &[(&str, &str)]) -> Option<f64> {
    find(rows, at).map(|r| r.metrics.throughput)
}

/// A numeric figure (CSV column) of the point matching `at`, if it counted.
pub fn figure(rows: &[Row], at: &[(&str, &str)], key: &str) -> Option<f64> {
    find(rows, at)?.param(key)?.parse().ok()
}

/// "Every replica agrees": after every run of every replicated point each partition had the same
/// digest on every replica.
pub fn replicas_agree(rows: &[Row]) -> Claim {
    let replicated: Vec<&Row> = rows
        .iter()
        .filter(|r| r.check != "not run" && r.param("algorithm") != Some("embedded-store"))
        .collect();
    let bad: Vec<String> = replicated
        .iter()
        .filter(|r| r.check != "ok")
        .map(|r| {
            let at: Vec<String> = r
                .params
                .iter()
                .take(4)
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            format!("{}: {}", at.join(" "), r.check)
        })
        .collect();
    let copies: u64 = replicated
        .iter()
        .filter_map(|r| r.param("copies_compared")?.parse::<u64>().ok())
        .sum();
    Claim {
        statement: "every replica agrees: after each point every partition's digest is the same \
                    on every replica"
            .into(),
        paper: "§IV-C: every replica delivers each partition's transactions in the same order and \
                certifies them deterministically, so replicas apply the same transactions in the \
                same per-partition order."
            .into(),
        measured: if bad.is_empty() {
            format!(
                "{} replicated points, {copies} partition copies compared (in the reported run \
                 of each), every run agreed",
                replicated.len()
            )
        } else {
            bad.join("; ")
        },
        verdict: if replicated.is_empty() {
            Verdict::NotChecked("no replicated point ran".into())
        } else {
            Verdict::from_bool(bad.is_empty())
        },
    }
}

/// γe and γt (µs of worker CPU per transaction) from DUR's single-partition runs on 1 and `n`
/// replicas: all of DUR's worker CPU per committed transaction is `γe + γt` on one replica and
/// `γe + n γt` on `n` (each transaction executes on one replica and terminates on all, §III-B).
pub fn gammas(cpu_1: f64, cpu_n: f64, n: f64) -> Option<(f64, f64)> {
    if n <= 1.0 || cpu_1 <= 0.0 {
        return None;
    }
    let gamma_t = ((cpu_n - cpu_1) / (n - 1.0)).max(0.0);
    let gamma_e = (cpu_1 - gamma_t).max(0.0);
    Some((gamma_e, gamma_t))
}

/// The model's speed-ups beside the measured ones: `(label, n, p, g, measured)` each, relative to
/// one replica of one partition.
pub fn model_lines(
    gamma: Option<(f64, f64)>,
    points: &[(String, f64, f64, f64, Option<f64>)],
) -> Vec<String> {
    let Some((e, t)) = gamma else {
        return vec!["the model needs DUR's runs on 1 and 2 replicas to measure γe and γt".into()];
    };
    let mut out = vec![format!(
        "γe = {e:.2} µs, γt = {t:.2} µs of worker CPU per transaction, measured from DUR's \
         single-partition runs on 1 and 2 replicas (CPU per committed transaction is γe + γt on \
         one replica, γe + 2γt over two)"
    )];
    for (label, n, p, g, measured) in points {
        let model = if *p <= 1.0 {
            dur_scaling(*n, e, t)
        } else {
            pdur_scaling(*n, *p, *g, e, t)
        };
        out.push(format!(
            "{label}: model (equation {}) {model:.2}x, measured {}",
            if *p <= 1.0 { 3 } else { 5 },
            measured.map_or("n/a".into(), |m| format!("{m:.2}x"))
        ));
    }
    out
}

/// The setup lines every P-DUR report ends with.
pub fn common_setup(s: &Settings) -> Vec<String> {
    vec![
        format!(
            "P-DUR and DUR: every point starts its own `phasedb node` processes on 127.0.0.1, one \
             per replica, each holding the whole database in P logical partitions (one worker \
             thread each) with one raft-rs atomic broadcast group per partition over all \
             replicas (DUR: P = 1, one group); not pinned, as a replica's partition threads need \
             every core; each replica runs {CLIENTS_PER_PARTITION} closed-loop clients per \
             partition inside its process (the paper's clients ran on other machines; here they \
             would take the cores the partitions need) and counts them over the measured window"
        ),
        "the embedded store is the standalone transactional store the paper compares with (it \
         used Berkeley DB behind an RPC server): phasedb's own embedded engine (OCC) in the \
         experiment's process, each thread a closed-loop client running the same micro-benchmark \
         transactions, no network"
            .into(),
        "scaled to a 2-core machine: 420,000 items (the paper's 4.2M / 10; 2,000 with --quick), \
         42,000 users (420K / 10; 500 with --quick), at most 2 partitions, threads or replicas \
         that execute (the paper: 8 cores per replica, up to 8 partitions); replicas beyond 2 \
         share the same 2 cores"
            .into(),
        format!("hardware: {}", s.machine()),
        schedule_line(s),
    ]
}

fn load_range(rows: &[Row]) -> Option<String> {
    let loads: Vec<f64> = rows
        .iter()
        .filter_map(|r| r.param("load_1min")?.parse().ok())
        .collect();
    let lo = loads.iter().copied().reduce(f64::min)?;
    let hi = loads.iter().copied().reduce(f64::max)?;
    Some(format!(
        "1-minute load average at the end of the reported runs: {lo:.2} to {hi:.2} on {} cores \
         (other processes competing with the runs: figures are from a loaded machine; compare \
         ratios within one run)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    ))
}

fn measured_table(r: &mut Report, rows: &[Row], varying: &[&str], latencies: &[&str]) {
    let mut header = varying.to_vec();
    header.extend(["txn/s", "aborted", "CPU µs/txn"]);
    let lat_headers: Vec<String> = latencies.iter().map(|k| format!("p90 ms {k}")).collect();
    header.extend(lat_headers.iter().map(String::as_str));
    header.extend(["load", "status"]);
    let lines: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let p = |k: &str| row.param(k).unwrap_or("").to_string();
            let m = &row.metrics;
            let mut line: Vec<String> = varying.iter().map(|k| p(k)).collect();
            line.push(format!("{:.0}", m.throughput));
            line.push(format!("{:.2}%", m.abort_rate * 100.0));
            line.push(p("cpu_us_per_txn"));
            line.extend(latencies.iter().map(|k| p(&format!("p90_ms_{k}"))));
            line.push(p("load_1min"));
            line.push(match &row.applicable {
                Ok(()) => "ok".into(),
                Err(e) => format!("n/a: {e}"),
            });
            line
        })
        .collect();
    r.table(&header, &lines);
}

/// The parts of a P-DUR report that differ between the experiments.
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
    /// The analytical model beside the measured points (may be empty).
    pub model: Vec<String>,
    /// Parameters that vary between points, shown first in the table.
    pub varying: &'a [&'a str],
    /// Transaction types whose 90th percentile latency the table shows.
    pub latencies: &'a [&'a str],
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
        if !self.model.is_empty() {
            r.heading("The scaling model (§IV-D)").bullets(&self.model);
        }
        r.heading("Every point");
        measured_table(&mut r, &rows, self.varying, self.latencies);
        r.para(&format!(
            "Data: `{0}.csv`; plot: `{0}.svg`. Throughput is committed transactions per second \
             summed over the replicas; latency runs from a transaction's start at its client to \
             its outcome (the highest 90th percentile over the replicas); CPU µs/txn is the \
             worker threads' CPU time per committed transaction over all replicas.",
            s.name
        ));
        Artifacts {
            verdicts: self.claims.iter().map(Claim::verdict_line).collect(),
            rows,
            plot: PlotSpec {
                title: self.title.into(),
                x_label: self.x_label.into(),
                color_by: "algorithm",
                reference: None,
                dashed: None,
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gammas_come_from_durs_cpu_per_transaction_on_one_and_two_replicas() {
        let (e, t) = gammas(10.0, 14.0, 2.0).expect("two runs");
        assert!((e - 6.0).abs() < 1e-9 && (t - 4.0).abs() < 1e-9, "{e} {t}");
        assert!(gammas(10.0, 14.0, 1.0).is_none());
        let lines = model_lines(
            Some((e, t)),
            &[("P-DUR 2 partitions".into(), 1.0, 2.0, 0.0, Some(1.8))],
        );
        assert!(
            lines[1].contains("model (equation 5) 2.00x, measured 1.80x"),
            "{lines:?}"
        );
        let lines = model_lines(
            Some((e, t)),
            &[("DUR 2 replicas".into(), 2.0, 1.0, 0.0, None)],
        );
        // 2 (6 + 4) / (6 + 8) = 1.43.
        assert!(
            lines[1].contains("model (equation 3) 1.43x, measured n/a"),
            "{lines:?}"
        );
    }

    #[test]
    fn a_point_whose_replicas_disagree_fails_the_agreement_claim() {
        let mut rows = vec![
            fake::row(
                &[("algorithm", "pdur"), ("copies_compared", "2")],
                1.0,
                10.0,
            ),
            fake::row(&[("algorithm", "embedded-store")], 1.0, 10.0),
        ];
        let c = replicas_agree(&rows);
        assert_eq!(c.verdict, Verdict::Holds);
        assert!(
            c.measured
                .contains("1 replicated points, 2 partition copies"),
            "{}",
            c.measured
        );
        rows[0].check = "replicas disagree: partition digests differ".into();
        assert_eq!(replicas_agree(&rows).verdict, Verdict::DoesNotHold);
    }
}
