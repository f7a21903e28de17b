//! A sweep: runs its points one after another, in rounds when a point runs more than once (so
//! points compared in a report ran side by side), each run in a process of its own unless told
//! otherwise, shows progress on stderr and collects one row per point.

use std::collections::HashMap;
use std::time::Instant;

use phasedb_txn::TypeStats;
use phasedb_workloads::{BenchOptions, BenchResult, Workload};

use super::point_process::{self, Outcome};
use crate::bench::{ProtocolName, run_named};

/// A finished benchmark run and the workload's settings.
pub struct Measured {
    /// What the run measured.
    pub result: BenchResult,
    /// The workload's settings (rows, skew, granularity...) and any other figures of the run.
    pub settings: Vec<(String, String)>,
}

/// Runs `workload` on `protocol` and keeps its settings beside the result.
pub fn measure<W: Workload>(
    protocol: ProtocolName,
    mut workload: W,
    opts: &BenchOptions,
) -> Measured {
    let result = run_named(protocol, &mut workload, opts);
    Measured {
        result,
        settings: workload
            .settings()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    }
}

/// The numbers of one point.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metrics {
    /// Committed transactions per second.
    pub throughput: f64,
    /// Conflicting attempts over all attempts.
    pub abort_rate: f64,
    /// Median latency of committed transactions, µs.
    pub p50_us: f64,
    /// 99th percentile latency, µs.
    pub p99_us: f64,
    /// 99.9th percentile latency, µs.
    pub p999_us: f64,
    /// Committed transactions in the measured window.
    pub committed: u64,
}

fn micros(s: &TypeStats, q: f64) -> f64 {
    if s.latency_ns.is_empty() {
        0.0
    } else {
        s.latency_ns.value_at_quantile(q) as f64 / 1000.0
    }
}

impl Metrics {
    /// The metrics of a benchmark result.
    pub fn of(r: &BenchResult) -> Metrics {
        let t = r.stats.total();
        Metrics {
            throughput: r.throughput(),
            abort_rate: t.abort_rate(),
            p50_us: micros(&t, 0.5),
            p99_us: micros(&t, 0.99),
            p999_us: micros(&t, 0.999),
            committed: t.committed,
        }
    }
}

/// One point of a sweep, not yet run.
pub struct Point<'a> {
    /// The parameters that vary between points (protocol, granularity, threads...), in CSV order.
    pub params: Vec<(String, String)>,
    /// Parameters every point shares (duration, seed...), written after `params`.
    pub constants: Vec<(String, String)>,
    /// The plot line it belongs to.
    pub series: String,
    /// Its x coordinate.
    pub x: f64,
    /// Points of one group share applicability: once one is found not applicable, the rest are
    /// skipped.
    pub group: String,
    /// A reference point (no-CC): a failed consistency check does not make it inapplicable.
    pub reference: bool,
    /// Runs the point.
    pub run: Box<dyn Fn() -> Measured + 'a>,
}

/// One measured (or skipped) point.
#[derive(Clone, Debug)]
pub struct Row {
    /// The point's parameters followed by the workload's settings.
    pub params: Vec<(String, String)>,
    /// The plot line it belongs to.
    pub series: String,
    /// Its x coordinate.
    pub x: f64,
    /// What it measured (zeros if skipped).
    pub metrics: Metrics,
    /// The throughput of each of its runs, in round order (`metrics` is the median run's).
    pub rounds: Vec<f64>,
    /// The workload's consistency check: "ok" or what failed.
    pub check: String,
    /// Whether the protocol could run the workload; the reason if not.
    pub applicable: Result<(), String>,
}

impl Row {
    /// This point's throughput over `other`'s, round by round: how a ratio of the medians would
    /// have come out had any one round decided it (points of one round ran side by side).
    pub fn round_ratios(&self, other: &Row) -> Vec<f64> {
        self.rounds
            .iter()
            .zip(&other.rounds)
            .filter(|&(_, &b)| b != 0.0)
            .map(|(a, b)| a / b)
            .collect()
    }

    /// The value of parameter `key`.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the point ran and counts.
    pub fn ok(&self) -> bool {
        self.applicable.is_ok()
    }
}

/// Where a sweep runs its points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Each run of a point in a fresh process of its own (the default), so no point inherits the
    /// heap, page tables or caches of the points before it, as a `phasedb bench` run does not.
    OwnProcess,
    /// Every run in this process, one after another (`--in-process`).
    InProcess,
    /// This is a point process: it runs point N once, prints its outcome and exits (`--point N`,
    /// which the sweep passes to its children).
    Point(usize),
}

/// Whether a run counts: no transaction failed with an error and, unless `reference`, the
/// workload's consistency check passed.
fn judge(o: &Outcome, reference: bool) -> Result<(), String> {
    let (failures, m) = (o.failures, &o.metrics);
    if failures > 0 {
        return Err(format!(
            "{failures} transactions failed with an error (the protocol cannot run this workload)"
        ));
    }
    if let Err(e) = &o.check
        && !reference
    {
        return Err(format!("consistency check failed: {e}"));
    }
    if m.committed == 0 {
        return Err("no transaction committed".into());
    }
    Ok(())
}

fn describe(params: &[(String, String)]) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn eta(started: Instant, done: usize, total: usize) -> String {
    if done == 0 {
        return String::new();
    }
    let per = started.elapsed().as_secs_f64() / done as f64;
    let left = (per * (total - done) as f64).round() as u64;
    format!(", about {}m{:02}s left", left / 60, left % 60)
}

/// Runs `points` in rounds — every point once per round, `runs` rounds — and keeps each point's run
/// of median throughput, printing progress for experiment `name`; returns one row per point.
///
/// Rounds rather than back-to-back repeats: when the machine's speed drifts (other processes, a
/// noisy neighbour), every point sees the drift alike, so the points a report compares stay
/// comparable. A point whose protocol cannot run the workload is reported with that failing run and
/// skips its later rounds; so do the points of its group that had not started yet.
///
/// In a point process (`Placement::Point`) it runs that one point, prints its outcome and ends
/// the process; so an experiment runs at most one sweep, whose point N the child finds by index.
pub fn run(name: &str, points: Vec<Point<'_>>, runs: usize, placement: Placement) -> Vec<Row> {
    if let Placement::Point(i) = placement {
        let Some(p) = points.get(i) else {
            eprintln!("error: --point {i}: {name} has {} points", points.len());
            std::process::exit(2);
        };
        println!("{}", Outcome::of(&(p.run)()).line());
        std::process::exit(0);
    }
    let runs = runs.max(1);
    let total = points.len() * runs;
    let started = Instant::now();
    let mut skipped: HashMap<String, String> = HashMap::new();
    let mut done: Vec<Vec<Outcome>> = points.iter().map(|_| Vec::new()).collect();
    let mut failed: Vec<Option<(Outcome, String)>> = points.iter().map(|_| None).collect();
    let mut step = 0;
    for round in 0..runs {
        for (i, p) in points.iter().enumerate() {
            step += 1;
            let what = describe(&p.params);
            let of = if runs > 1 {
                format!(" (run {} of {runs})", round + 1)
            } else {
                String::new()
            };
            if failed[i].is_some() || (round == 0 && skipped.contains_key(&p.group)) {
                continue;
            }
            if round > 0 && done[i].is_empty() {
                continue;
            }
            eprintln!("[{step}/{total}] {name}: {what}{of}");
            let outcome = match placement {
                Placement::InProcess => Ok(Outcome::of(&(p.run)())),
                _ => point_process::run(i),
            };
            let judged = match outcome {
                Ok(o) => match judge(&o, p.reference) {
                    Ok(()) => Ok(o),
                    Err(e) => Err((o, e)),
                },
                Err(e) => Err((Outcome::missing(&e), e)),
            };
            match judged {
                Ok(o) => {
                    eprintln!(
                        "        {:.0} txn/s, {:.2}% aborts, p99 {:.0} µs{}",
                        o.metrics.throughput,
                        o.metrics.abort_rate * 100.0,
                        o.metrics.p99_us,
                        eta(started, step, total)
                    );
                    done[i].push(o);
                }
                Err((o, e)) => {
                    eprintln!("        not applicable: {e}");
                    skipped.entry(p.group.clone()).or_insert_with(|| e.clone());
                    failed[i] = Some((o, e));
                }
            }
        }
    }
    let mut rows = Vec::with_capacity(points.len());
    for ((p, mut runs_done), failure) in points.into_iter().zip(done).zip(failed) {
        let mut params = p.params.clone();
        params.extend(p.constants.iter().cloned());
        let mut rounds = Vec::new();
        let (outcome, applicable) = match failure {
            Some((o, e)) => (o, Err(e)),
            None if runs_done.is_empty() => {
                let reason = skipped.get(&p.group).cloned().unwrap_or_default();
                rows.push(Row {
                    params,
                    series: p.series,
                    x: p.x,
                    metrics: Metrics::default(),
                    rounds: Vec::new(),
                    check: "not run".into(),
                    applicable: Err(format!("skipped: {reason}")),
                });
                continue;
            }
            None => {
                rounds = runs_done.iter().map(|o| o.metrics.throughput).collect();
                runs_done.sort_by(|a, b| a.metrics.throughput.total_cmp(&b.metrics.throughput));
                if runs_done.len() > 1 {
                    let each: Vec<String> = runs_done
                        .iter()
                        .map(|o| format!("{:.0}", o.metrics.throughput))
                        .collect();
                    eprintln!(
                        "{name}: {}: median of {} txn/s",
                        describe(&p.params),
                        each.join(", ")
                    );
                }
                (runs_done.swap_remove(runs_done.len() / 2), Ok(()))
            }
        };
        for (k, v) in outcome.settings {
            if !params.iter().any(|(pk, _)| *pk == k) {
                params.push((k, v));
            }
        }
        rows.push(Row {
            params,
            series: p.series,
            x: p.x,
            metrics: outcome.metrics,
            rounds,
            check: match &outcome.check {
                Ok(()) => "ok".into(),
                Err(e) => e.clone(),
            },
            applicable,
        });
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(rounds: &[f64]) -> Row {
        Row {
            params: Vec::new(),
            series: "s".into(),
            x: 0.0,
            metrics: Metrics::default(),
            rounds: rounds.to_vec(),
            check: "ok".into(),
            applicable: Ok(()),
        }
    }

    #[test]
    fn round_ratios_pair_the_runs_of_each_round() {
        let a = row(&[10.0, 12.0, 9.0]);
        let b = row(&[5.0, 12.0, 0.0]);
        assert_eq!(a.round_ratios(&b), vec![2.0, 1.0]);
        assert_eq!(a.round_ratios(&row(&[])), Vec::<f64>::new());
    }
}
