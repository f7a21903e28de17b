//! The sweep the two timestamp-granularity experiments share (threads × protocol × granularity)
//! and lookups into its rows.

use phasedb_txn::Config;
use phasedb_workloads::{BenchOptions, Workload};

use super::super::Settings;
use super::super::claims::ratio;
use super::super::protocols::REFERENCE;
use super::super::sweep::{self, Metrics, Point, Row, measure};

/// Conflicting attempts after which a transaction is abandoned: no protocol that makes progress
/// comes near it, and it turns a livelock (no-CC retrying a key it corrupted) into a failed point
/// rather than a hung sweep.
pub const MAX_RETRIES: u32 = 10_000;

/// The granularities, coarse first: (name, fine, auto). `auto` starts coarse and lets the engine
/// choose the groups while it runs (issue 39).
pub const GRANULARITIES: [(&str, bool, bool); 3] = [
    ("coarse", false, false),
    ("fine", true, false),
    ("auto", false, true),
];

/// Protocols that run in phases, where automatic groups are not available.
const NO_AUTO: [&str; 1] = ["doppel"];

/// Runs `make(fine, auto)` on every protocol at every thread count of `s`, coarse, fine then auto
/// for each protocol, so the runs a ratio compares are adjacent.
pub fn sweep<W: Workload>(s: &Settings, make: impl Fn(bool, bool) -> W) -> Vec<Row> {
    let make = &make;
    let constants = vec![
        (
            "duration_s".to_string(),
            s.duration.as_secs_f64().to_string(),
        ),
        ("warmup_s".to_string(), s.warmup.as_secs_f64().to_string()),
        ("seed".to_string(), s.seed.to_string()),
        ("runs".to_string(), s.runs.to_string()),
        ("max_retries".to_string(), MAX_RETRIES.to_string()),
    ];
    let mut points = Vec::new();
    for &threads in &s.threads {
        for p in s.protocols.iter().cloned() {
            for (gran, fine, auto) in GRANULARITIES {
                if auto && NO_AUTO.contains(&p.name.as_str()) {
                    continue;
                }
                let opts = BenchOptions {
                    threads,
                    warmup: s.warmup,
                    duration: s.duration,
                    seed: s.seed,
                    durable_results: false,
                    durable_progress: false,
                    config: Config {
                        max_retries: Some(MAX_RETRIES),
                        ..Config::default()
                    },
                };
                let params = vec![
                    ("protocol".to_string(), p.name.clone()),
                    ("granularity".to_string(), gran.to_string()),
                    ("threads".to_string(), threads.to_string()),
                ];
                let id = p.id;
                points.push(Point {
                    params,
                    constants: constants.clone(),
                    series: format!("{} {gran}", p.name),
                    x: threads as f64,
                    group: p.name.clone(),
                    reference: p.is_reference(),
                    run: Box::new(move || measure(id, make(fine, auto), &opts)),
                });
            }
        }
    }
    sweep::run(s.name, points, s.runs, s.placement)
}

/// Lookups into the rows of a granularity sweep.
pub struct Grid<'a> {
    rows: &'a [Row],
}

impl<'a> Grid<'a> {
    /// A view of `rows`.
    pub fn new(rows: &'a [Row]) -> Grid<'a> {
        Grid { rows }
    }

    /// The metrics of `protocol` at `threads` with fine or coarse timestamps, if that point counts.
    pub fn get(&self, protocol: &str, fine: bool, threads: usize) -> Option<&'a Metrics> {
        self.get_named(protocol, if fine { "fine" } else { "coarse" }, threads)
    }

    /// The metrics of `protocol` at `threads` with granularity `gran` (coarse, fine or auto).
    pub fn get_named(&self, protocol: &str, gran: &str, threads: usize) -> Option<&'a Metrics> {
        let t = threads.to_string();
        self.rows
            .iter()
            .find(|r| {
                r.ok()
                    && r.param("protocol") == Some(protocol)
                    && r.param("granularity") == Some(gran)
                    && r.param("threads") == Some(t.as_str())
            })
            .map(|r| &r.metrics)
    }

    /// Serializable protocols (no-CC left out) with both granularities measured at `threads`.
    pub fn serializable_at(&self, threads: usize) -> Vec<&'a str> {
        let mut out: Vec<&str> = Vec::new();
        for r in self.rows {
            let Some(p) = r.param("protocol") else {
                continue;
            };
            if p != REFERENCE
                && !out.contains(&p)
                && self.get(p, false, threads).is_some()
                && self.get(p, true, threads).is_some()
            {
                out.push(p);
            }
        }
        out
    }

    /// Fine over coarse throughput of `protocol` at `threads`.
    pub fn gain(&self, protocol: &str, threads: usize) -> Option<f64> {
        let (c, f) = (
            self.get(protocol, false, threads)?,
            self.get(protocol, true, threads)?,
        );
        ratio(f.throughput, c.throughput)
    }

    /// Protocols that did not count, with the first reason.
    pub fn not_applicable(&self) -> Vec<(&'a str, &'a str)> {
        let mut out: Vec<(&str, &str)> = Vec::new();
        for r in self.rows {
            if let (Some(p), Err(e)) = (r.param("protocol"), &r.applicable)
                && !out.iter().any(|(q, _)| *q == p)
            {
                out.push((p, e.as_str()));
            }
        }
        out
    }
}
