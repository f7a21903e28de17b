//! `served-ycsb`: YCSB workload A's operations (one key per transaction, half reads, half
//! read-then-rewrite, zipfian 0.99) run embedded and through `phasedb serve` and the Rust client,
//! alternating in one run, with the server and the client sharing the machine's cores: issue 36's
//! targets of at least 250K served transactions per second and 0.3x the embedded throughput.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

use phasedb_txn::Config;
use phasedb_workloads::BenchOptions;
use phasedb_workloads::ycsb::{Variant, Ycsb, YcsbConfig};

use super::super::claims::{Claim, Verdict, median, times};
use super::super::plot::{PlotSpec, RightPanel};
use super::super::report::Report;
use super::super::sweep::{Metrics, Row};
use super::super::{Artifacts, Settings};
use crate::bench::{ProtocolName, run_named};
use crate::remote_bench;

const CLAIMED: &str = "Issue 36: YCSB workload A through the Rust client with pipelining reaches at \
least 250K operations/s with the server and the client sharing the two cores, and at least 0.3x the \
embedded engine's one-shot throughput on the same operations.";

/// Worker threads embedded; engine threads and client connections served.
const THREADS: usize = 2;

/// The pipeline depths measured; the verdicts use the deepest.
const PIPELINES: [usize; 2] = [64, 1024];

/// The least served throughput the issue asks, transactions per second.
const SERVED_FLOOR: f64 = 250_000.0;

/// The least served/embedded ratio the issue asks.
const RATIO_FLOOR: f64 = 0.3;

/// Workload A's operations in the `star` variant both paths run.
fn workload(quick: bool) -> YcsbConfig {
    let mut c = YcsbConfig::defaults(Variant::Star);
    c.ops = 1;
    c.read_ratio = 0.5;
    c.theta = 0.99;
    if quick {
        c.rows = 10_000;
    }
    c
}

/// A `phasedb serve` child process on a loopback port the system picks; stopped when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start(threads: usize) -> Result<Server, String> {
        let program = crate::this_program().map_err(|e| format!("cannot find phasedb: {e}"))?;
        let mut child = Command::new(program)
            .args(["serve", "--listen", "127.0.0.1:0", "--threads"])
            .arg(threads.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start phasedb serve: {e}"))?;
        let mut lines = BufReader::new(child.stderr.take().expect("stderr is piped")).lines();
        // The server names its address first ("phasedb serving P on ADDR with ..."), or exits.
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        let addr = first
            .split(" on ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|a| a.parse().ok());
        let Some(addr) = addr else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("phasedb serve did not start: {first:?}"));
        };
        std::thread::spawn(move || lines.for_each(drop));
        Ok(Server { child, addr })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How a run reached the engine.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Embedded,
    Served(usize),
}

impl Mode {
    fn label(self) -> String {
        match self {
            Mode::Embedded => "embedded".into(),
            Mode::Served(p) => format!("served p{p}"),
        }
    }
}

/// One run's figures.
struct Run {
    mode: Mode,
    round: usize,
    metrics: Metrics,
    /// Throughput over the round's embedded run's.
    of_embedded: Option<f64>,
    check: Result<(), String>,
}

impl Run {
    fn row(&self) -> Row {
        let label = self.mode.label();
        let pipeline = match self.mode {
            Mode::Embedded => String::new(),
            Mode::Served(p) => p.to_string(),
        };
        Row {
            params: vec![
                ("setting".into(), label.clone()),
                ("mode".into(), label.clone()),
                ("pipeline".into(), pipeline),
                ("round".into(), self.round.to_string()),
                (
                    "of_embedded".into(),
                    self.of_embedded
                        .map_or(String::new(), |r| format!("{r:.3}")),
                ),
            ],
            series: label,
            x: self.round as f64,
            metrics: self.metrics.clone(),
            rounds: vec![self.metrics.throughput],
            check: match &self.check {
                Ok(()) => "ok".into(),
                Err(e) => e.clone(),
            },
            applicable: self.check.clone(),
        }
    }
}

fn embedded(s: &Settings, cfg: &YcsbConfig, round: usize) -> Run {
    let opts = BenchOptions {
        threads: THREADS,
        warmup: s.warmup,
        duration: s.duration,
        seed: s.seed,
        durable_results: false,
        durable_progress: false,
        config: Config::default(),
    };
    let r = run_named(ProtocolName::Occ, &mut Ycsb::new(cfg.clone()), &opts);
    Run {
        mode: Mode::Embedded,
        round,
        metrics: Metrics::of(&r),
        of_embedded: None,
        check: r.check,
    }
}

fn served(s: &Settings, cfg: &YcsbConfig, addr: SocketAddr, pipeline: usize, round: usize) -> Run {
    let m = remote_bench::measure(
        addr, cfg, THREADS, pipeline, s.warmup, s.duration, s.seed, None,
    );
    match m {
        Ok(m) => Run {
            mode: Mode::Served(pipeline),
            round,
            metrics: Metrics {
                throughput: m.throughput(s.duration),
                abort_rate: m.abort_rate(),
                committed: m.committed(),
                ..Metrics::default()
            },
            of_embedded: None,
            check: Ok(()),
        },
        Err((_, e)) => Run {
            mode: Mode::Served(pipeline),
            round,
            metrics: Metrics::default(),
            of_embedded: None,
            check: Err(e),
        },
    }
}

fn listed(v: &[f64], f: impl Fn(f64) -> String) -> String {
    v.iter().map(|&x| f(x)).collect::<Vec<_>>().join(", ")
}

fn of_mode(runs: &[Run], mode: Mode, f: impl Fn(&Run) -> Option<f64>) -> Vec<f64> {
    runs.iter()
        .filter(|r| r.mode == mode && r.check.is_ok())
        .filter_map(f)
        .collect()
}

fn claims(runs: &[Run], rounds: usize) -> [Claim; 2] {
    let deepest = Mode::Served(PIPELINES[PIPELINES.len() - 1]);
    let kt = |x: f64| format!("{:.0}K", x / 1e3);
    let rx = |x: f64| format!("{x:.3}x");
    let failed = runs.iter().find_map(|r| r.check.as_ref().err());
    let judge = |v: &[f64], floor: f64| match failed {
        Some(e) => Verdict::NotChecked(format!("a run failed: {e}")),
        None if v.len() < rounds => Verdict::NotChecked("a round measured nothing".into()),
        None => Verdict::from_bool(median(v.to_vec()).is_some_and(|m| m >= floor)),
    };
    let tput = |m| of_mode(runs, m, |r| Some(r.metrics.throughput));
    let ratio = |m| of_mode(runs, m, |r| r.of_embedded);
    let per_depth = |f: &dyn Fn(Mode) -> Vec<f64>, show: &dyn Fn(f64) -> String| {
        PIPELINES
            .iter()
            .map(|&p| {
                let v = f(Mode::Served(p));
                format!(
                    "--pipeline {p}: median {} (rounds {})",
                    median(v.clone()).map_or("n/a".into(), show),
                    listed(&v, show)
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    [
        Claim {
            statement: format!(
                "served YCSB A through the Rust client reaches at least 250K txn/s \
                 ({THREADS} connections, the server's {THREADS} engine threads and the client \
                 sharing the cores; judged at --pipeline {})",
                PIPELINES[PIPELINES.len() - 1]
            ),
            paper: "issue 36: at least 250K operations/s".into(),
            measured: per_depth(&tput, &kt),
            verdict: judge(&tput(deepest), SERVED_FLOOR),
        },
        Claim {
            statement: format!(
                "served YCSB A keeps at least 0.3x the embedded engine's throughput on the same \
                 operations (ratio per round; judged at --pipeline {})",
                PIPELINES[PIPELINES.len() - 1]
            ),
            paper: "issue 36: at least 0.3x the embedded one-shot throughput".into(),
            measured: format!(
                "{}; embedded median {}",
                per_depth(&ratio, &rx),
                median(tput(Mode::Embedded)).map_or("n/a".into(), kt)
            ),
            verdict: judge(&ratio(deepest), RATIO_FLOOR),
        },
    ]
}

/// Runs the experiment.
pub fn run(s: &Settings) -> Result<Artifacts, String> {
    let cfg = workload(s.quick);
    let rounds = if s.quick { 1 } else { s.runs.max(3) };
    let server = Server::start(THREADS)?;
    eprintln!("{}: phasedb serve on {}", s.name, server.addr);
    let mut runs = Vec::new();
    for round in 1..=rounds {
        let mut modes: Vec<Mode> = std::iter::once(Mode::Embedded)
            .chain(PIPELINES.iter().map(|&p| Mode::Served(p)))
            .collect();
        // Alternate the order, so no mode always runs first after the machine rested.
        if round % 2 == 0 {
            modes.reverse();
        }
        let mut this = Vec::new();
        for mode in modes {
            eprintln!("{}: {} (round {round} of {rounds})", s.name, mode.label());
            this.push(match mode {
                Mode::Embedded => embedded(s, &cfg, round),
                Mode::Served(p) => served(s, &cfg, server.addr, p, round),
            });
        }
        let base = this
            .iter()
            .find(|r| r.mode == Mode::Embedded && r.check.is_ok())
            .map(|r| r.metrics.throughput)
            .filter(|&t| t > 0.0);
        for r in &mut this {
            if let (Mode::Served(_), Some(b), Ok(())) = (r.mode, base, &r.check) {
                r.of_embedded = Some(r.metrics.throughput / b);
            }
        }
        runs.extend(this);
    }
    drop(server);
    let claims = claims(&runs, rounds);
    let title = "served-ycsb: YCSB A through phasedb serve against the embedded engine";
    let mut report = Report::new(title);
    report.heading("Setup").bullets(&[
        format!(
            "YCSB in STAR's row shape ({} rows of {} columns of {} B), one key per transaction, \
             50% reads of the whole row and 50% read-then-rewrite, zipfian theta 0.99, OCC",
            cfg.rows, cfg.columns, cfg.column_size
        ),
        format!(
            "embedded: {THREADS} worker threads in this process; served: one `phasedb serve \
             --threads {THREADS}` child process on 127.0.0.1 and {THREADS} client connections \
             from this process, each keeping --pipeline one-shot transactions in flight \
             ({}), the server and the client sharing the machine's cores",
            listed(&PIPELINES.map(|p| p as f64), |p| format!("{p:.0}"))
        ),
        format!(
            "{rounds} round(s), each running every mode (order alternating by round); each run \
             {:.2} s after {:.2} s of warm-up, seed {}, on {}",
            s.duration.as_secs_f64(),
            s.warmup.as_secs_f64(),
            s.seed,
            s.machine()
        ),
    ]);
    report.heading("What is claimed").para(CLAIMED);
    report.heading("Runs").table(
        &["mode", "round", "txn/s", "abort %", "of embedded"],
        &runs
            .iter()
            .map(|r| {
                vec![
                    r.mode.label(),
                    r.round.to_string(),
                    format!("{:.0}", r.metrics.throughput),
                    format!("{:.2}", r.metrics.abort_rate * 100.0),
                    r.of_embedded.map_or("-".into(), |x| times(Some(x))),
                ]
            })
            .collect::<Vec<_>>(),
    );
    report.heading("Verdicts");
    for (i, c) in claims.iter().enumerate() {
        report.claim(i + 1, c);
    }
    report.para(&format!(
        "Data: `{0}.csv` (one row per run); plot: `{0}.svg`.",
        s.name
    ));
    Ok(Artifacts {
        verdicts: claims.iter().map(Claim::verdict_line).collect(),
        rows: runs.iter().map(Run::row).collect(),
        plot: PlotSpec {
            title: title.into(),
            x_label: "round".into(),
            color_by: "mode",
            reference: None,
            dashed: None,
            right: RightPanel::Param {
                param: "of_embedded",
                caption: "Served over embedded",
                y_label: "ratio",
            },
        },
        report: report.finish(),
    })
}
