//! `durability`: SiloR's value logging with epoch group commit on this machine (issue 34): the
//! throughput logging costs on YCSB and TPC-C NewOrder+Payment, the commit-to-durable latency,
//! the log replay rate per core and the time a large YCSB database takes to recover.

use std::path::{Path, PathBuf};
use std::time::Duration;

use phasedb_txn::{Config, Database, Durability, FsyncPolicy, Occ, Recovery};
use phasedb_workloads::tpcc::{Tpcc, TpccConfig, TpccMix};
use phasedb_workloads::ycsb::{Variant, Ycsb, YcsbConfig};
use phasedb_workloads::{BenchOptions, BenchResult, Workload};

use super::super::claims::{Claim, Verdict, median, times};
use super::super::plot::{Dashes, PlotSpec, RightPanel};
use super::super::report::Report;
use super::super::sweep::{Metrics, Row};
use super::super::{Artifacts, Settings};
use crate::bench::{ProtocolName, run_named};

const PAPER: &str = "SiloR (§6): value logging with epoch group commit costs about 10% of \
throughput on 32 cores (YCSB and TPC-C), commit-to-durable latency stays within a few epochs, and \
recovery replays logs in parallel at disk speed. Issue 34's targets on this machine: logging costs \
at most 10% of throughput on YCSB and TPC-C NewOrder+Payment at 2 threads, durable p99 under 2 \
epochs, at least 1M log records replayed per second per core, a 10M-row YCSB database recovered \
in under 20 s.";

/// The thread count of the targets.
const THREADS: usize = 2;

/// Rows of the recovered YCSB database (target (d)).
const RECOVERY_ROWS: u64 = 10_000_000;

/// Rows of the recovered YCSB database with `--quick`.
const QUICK_RECOVERY_ROWS: u64 = 20_000;

/// The two workloads whose logging cost is measured.
#[derive(Clone, Copy, PartialEq)]
enum Load {
    Ycsb,
    Tpcc,
}

impl Load {
    const ALL: [Load; 2] = [Load::Ycsb, Load::Tpcc];

    fn name(self) -> &'static str {
        match self {
            Load::Ycsb => "ycsb",
            Load::Tpcc => "tpcc no-p",
        }
    }

    /// Runs it once with `durability` (none: logging off).
    fn run(self, s: &Settings, threads: usize, durability: Option<Durability>) -> BenchResult {
        let durable_results = durability.is_some();
        let opts = BenchOptions {
            threads,
            warmup: s.warmup,
            duration: window(s),
            seed: s.seed,
            durable_results,
            durable_progress: false,
            config: Config {
                durability,
                ..Config::default()
            },
        };
        match self {
            Load::Ycsb => run_named(ProtocolName::Occ, &mut Ycsb::new(ycsb(s.quick)), &opts),
            Load::Tpcc => run_named(ProtocolName::Occ, &mut Tpcc::new(tpcc()), &opts),
        }
    }
}

/// The measured window of a run: with `--quick` at least half a second, so transactions become
/// durable (a few epochs of 40 ms on a loaded machine) inside it.
fn window(s: &Settings) -> Duration {
    if s.quick {
        s.duration.max(QUICK_WINDOW)
    } else {
        s.duration
    }
}

/// Rounds without `--quick` (at least): a loaded machine's rounds differ by up to a quarter (0.72x
/// to 0.86x, 0.85x to 1.10x in one run), so the verdict takes the median of five.
const ROUNDS: usize = 5;

/// The shortest measured window with `--quick`.
const QUICK_WINDOW: Duration = Duration::from_millis(500);

/// YCSB as `phasedb bench ycsb` runs it (STAR's shape: 4 operations, 90% reads).
fn ycsb(quick: bool) -> YcsbConfig {
    let mut c = YcsbConfig::defaults(Variant::Star);
    if quick {
        c.rows = 10_000;
    }
    c
}

fn tpcc() -> TpccConfig {
    TpccConfig {
        mix: TpccMix::NewOrderPayment,
        ..TpccConfig::default()
    }
}

/// The YCSB database that is logged into and recovered: half writes, so the log fills fast.
fn recovery_ycsb(rows: u64) -> YcsbConfig {
    let mut c = YcsbConfig::defaults(Variant::Star);
    c.rows = rows;
    c.read_ratio = 0.5;
    c
}

/// A data directory `name` under the output directory, emptied.
fn fresh_dir(s: &Settings, name: &str) -> Result<PathBuf, String> {
    let dir = s.out.join(name);
    remove(&dir)?;
    Ok(dir)
}

fn remove(dir: &Path) -> Result<(), String> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot remove {}: {e}", dir.display())),
    }
}

/// One logging-cost run's figures.
struct CostRun {
    load: Load,
    logging: bool,
    round: usize,
    /// Committed transactions per second (durable or not).
    throughput: f64,
    /// Committed transactions per worker CPU-second.
    per_cpu: f64,
    /// Commit-to-durable p99 in epochs (logging runs).
    p99_epochs: Option<f64>,
    log_bytes_per_txn: Option<f64>,
    check: Result<(), String>,
    metrics: Metrics,
}

fn cost_run(load: Load, logging: bool, round: usize, r: &BenchResult) -> CostRun {
    let committed = r.stats.total().committed;
    let secs = r.measured.as_secs_f64().max(1e-9);
    let p99_epochs = r.durable.as_ref().and_then(|d| {
        let epoch = d.epoch_interval.as_nanos() as f64;
        (!d.latency_ns.is_empty() && epoch > 0.0)
            .then(|| d.latency_ns.value_at_quantile(0.99) as f64 / epoch)
    });
    let mut metrics = Metrics::of(r);
    metrics.throughput = committed as f64 / secs;
    CostRun {
        load,
        logging,
        round,
        throughput: committed as f64 / secs,
        per_cpu: committed as f64 / r.worker_cpu.as_secs_f64().max(1e-9),
        p99_epochs,
        log_bytes_per_txn: r
            .log_bytes
            .filter(|_| committed > 0)
            .map(|b| b as f64 / committed as f64),
        check: r.check.clone(),
        metrics,
    }
}

impl CostRun {
    fn row(&self) -> Row {
        let logging = if self.logging { "group" } else { "off" };
        let series = format!("{} {logging}", self.load.name());
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.3}"));
        Row {
            params: vec![
                ("setting".into(), series.clone()),
                ("workload".into(), self.load.name().into()),
                ("logging".into(), logging.into()),
                ("round".into(), self.round.to_string()),
                ("txn_per_cpu_s".into(), format!("{:.0}", self.per_cpu)),
                ("log_bytes_per_txn".into(), opt(self.log_bytes_per_txn)),
                ("durable_p99_epochs".into(), opt(self.p99_epochs)),
            ],
            series,
            x: self.round as f64,
            metrics: self.metrics.clone(),
            rounds: vec![self.throughput],
            check: match &self.check {
                Ok(()) => "ok".into(),
                Err(e) => e.clone(),
            },
            applicable: self.check.clone(),
        }
    }
}

/// Per round, the logging run's throughput over the run without (of `load`), by `f`.
fn round_ratios(runs: &[CostRun], load: Load, f: fn(&CostRun) -> f64) -> Vec<f64> {
    let find = |logging: bool, round: usize| {
        runs.iter()
            .find(|r| r.load == load && r.logging == logging && r.round == round && r.check.is_ok())
    };
    let rounds = runs.iter().map(|r| r.round).max().unwrap_or(0);
    (1..=rounds)
        .filter_map(|k| Some((find(true, k)?, find(false, k)?)))
        .filter(|(_, off)| f(off) > 0.0)
        .map(|(on, off)| f(on) / f(off))
        .collect()
}

fn shown(v: &[f64]) -> String {
    v.iter()
        .map(|r| format!("{r:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn cost_claim(runs: &[CostRun], load: Load) -> Claim {
    let wall = round_ratios(runs, load, |r| r.throughput);
    let cpu = round_ratios(runs, load, |r| r.per_cpu);
    let bytes = median(
        runs.iter()
            .filter(|r| r.load == load)
            .filter_map(|r| r.log_bytes_per_txn)
            .collect(),
    );
    // Both must hold: wall-clock throughput counts the loggers' CPU, but on a loaded machine it
    // swings with what other processes take; per worker CPU-second does not swing, but leaves the
    // loggers out.
    let m = median(wall.clone())
        .zip(median(cpu.clone()))
        .map(|(w, c)| w.min(c));
    Claim {
        statement: format!(
            "{}: logging with group commit keeps at least 0.90x of the throughput without logging \
             ({THREADS} threads; committed per second and per worker CPU-second)",
            load.name()
        ),
        paper: "about 10% lower throughput with logging (SiloR, 32 cores)".into(),
        measured: format!(
            "committed txn/s with logging over without: median {} (rounds {}); per worker \
             CPU-second: median {} (rounds {}); the verdict takes the smaller median; {} log \
             bytes per transaction",
            times(median(wall.clone())),
            shown(&wall),
            times(median(cpu.clone())),
            shown(&cpu),
            bytes.map_or("n/a".into(), |b| format!("{b:.0}"))
        ),
        verdict: match m {
            Some(m) => Verdict::from_bool(m >= 0.90),
            None => Verdict::NotChecked("a run failed its check or committed nothing".into()),
        },
    }
}

fn latency_claim(runs: &[CostRun]) -> Claim {
    let per_load: Vec<(Load, Option<f64>)> = Load::ALL
        .iter()
        .map(|&l| {
            let v = runs
                .iter()
                .filter(|r| r.load == l && r.check.is_ok())
                .filter_map(|r| r.p99_epochs)
                .collect();
            (l, median(v))
        })
        .collect();
    let measured = per_load
        .iter()
        .map(|(l, p)| {
            format!(
                "{} {}",
                l.name(),
                p.map_or("n/a".into(), |p| format!("{p:.2} epochs"))
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let verdict = if per_load.iter().any(|(_, p)| p.is_none()) {
        Verdict::NotChecked("a logging run measured no durable latency".into())
    } else {
        Verdict::from_bool(per_load.iter().all(|(_, p)| p.is_some_and(|p| p < 2.0)))
    };
    Claim {
        statement: "commit-to-durable latency p99 under 2 epochs (group fsync)".into(),
        paper: "SiloR: durability latency grows with the epoch (40 ms) and the fsync; a few epochs"
            .into(),
        measured: format!("median over rounds of each run's p99: {measured}"),
        verdict,
    }
}

/// What the recovery part measured.
struct Recovered {
    rows: u64,
    /// Transactions committed into the log before recovery.
    committed: u64,
    recovery: Recovery,
    check: Result<(), String>,
}

impl Recovered {
    fn per_core(&self) -> Option<f64> {
        let r = &self.recovery;
        (r.replay_seconds > 0.0 && r.log_records > 0)
            .then(|| r.log_records as f64 / r.replay_seconds / r.replay_threads.max(1) as f64)
    }

    fn row(&self) -> Row {
        let r = &self.recovery;
        Row {
            params: vec![
                ("setting".into(), "ycsb recovery".into()),
                ("workload".into(), "ycsb recovery".into()),
                ("logging".into(), "group".into()),
                ("round".into(), "1".into()),
                ("rows".into(), self.rows.to_string()),
                ("logged_txns".into(), self.committed.to_string()),
                ("checkpoint_rows".into(), r.checkpoint_rows.to_string()),
                ("log_records".into(), r.log_records.to_string()),
                ("replay_seconds".into(), format!("{:.3}", r.replay_seconds)),
                ("replay_threads".into(), r.replay_threads.to_string()),
                (
                    "records_per_s_per_core".into(),
                    self.per_core().map_or(String::new(), |v| format!("{v:.0}")),
                ),
                ("recovery_seconds".into(), format!("{:.3}", r.seconds)),
            ],
            series: "ycsb recovery".into(),
            x: 1.0,
            metrics: Metrics {
                throughput: self.per_core().unwrap_or(0.0),
                ..Metrics::default()
            },
            rounds: Vec::new(),
            check: match &self.check {
                Ok(()) => "ok".into(),
                Err(e) => e.clone(),
            },
            applicable: self.check.clone(),
        }
    }
}

/// Logs a YCSB run of `rows` rows into a new directory, then recovers it in a new database.
fn recover(s: &Settings, threads: usize, rows: u64) -> Result<Recovered, String> {
    let dir = fresh_dir(s, "data-recovery")?;
    let mut durability = Durability::new(&dir);
    durability.loggers = THREADS;
    durability.fsync = FsyncPolicy::Group;
    let config = Config {
        durability: Some(durability),
        ..Config::default()
    };
    let opts = BenchOptions {
        threads,
        warmup: Duration::ZERO,
        duration: window(s),
        seed: s.seed,
        durable_results: false,
        durable_progress: false,
        config: config.clone(),
    };
    eprintln!(
        "{}: ycsb, {rows} rows, logging into {}",
        s.name,
        dir.display()
    );
    let logged = run_named(
        ProtocolName::Occ,
        &mut Ycsb::new(recovery_ycsb(rows)),
        &opts,
    );
    logged
        .check
        .map_err(|e| format!("the logged YCSB run failed: {e}"))?;
    let committed = logged.stats.total().committed;
    eprintln!("{}: ycsb, recovering {}", s.name, dir.display());
    let mut workload = Ycsb::new(recovery_ycsb(rows));
    let mut db = Database::<Occ>::open(config);
    workload.setup(&mut db);
    let recovery = db
        .start_durability()
        .map_err(|e| format!("recovery of {} failed: {e}", dir.display()))?;
    if recovery.fresh {
        return Err(format!("{} held no database to recover", dir.display()));
    }
    let check = workload.recovered(&db).and_then(|()| workload.check(&db));
    drop(db);
    remove(&dir)?;
    Ok(Recovered {
        rows,
        committed,
        recovery,
        check,
    })
}

fn replay_claim(r: &Result<Recovered, String>) -> Claim {
    let (measured, verdict) = match r {
        Ok(r) => {
            let rec = &r.recovery;
            (
                format!(
                    "{} log records of {} logged transactions replayed in {:.3} s on {} threads: \
                     {} records/s per core",
                    rec.log_records,
                    r.committed,
                    rec.replay_seconds,
                    rec.replay_threads,
                    r.per_core().map_or("n/a".into(), |v| format!("{v:.0}"))
                ),
                match r.per_core() {
                    Some(v) if r.check.is_ok() => Verdict::from_bool(v >= 1e6),
                    Some(_) => {
                        Verdict::NotChecked("the recovered database failed its check".into())
                    }
                    None => Verdict::NotChecked("no log record was replayed".into()),
                },
            )
        }
        Err(e) => (e.clone(), Verdict::NotChecked(e.clone())),
    };
    Claim {
        statement: "recovery replays at least 1M logged records per second per core".into(),
        paper: "SiloR replays logs in parallel, one thread per log file, at disk speed".into(),
        measured,
        verdict,
    }
}

fn recovery_claim(r: &Result<Recovered, String>, quick: bool) -> Claim {
    let (measured, verdict) = match r {
        Ok(r) => {
            let rec = &r.recovery;
            (
                format!(
                    "{} rows: {:.2} s in all (load the checkpoint of {} rows, replay {} records \
                     in {:.2} s, write the new checkpoint)",
                    r.rows, rec.seconds, rec.checkpoint_rows, rec.log_records, rec.replay_seconds
                ),
                if quick {
                    Verdict::NotChecked(format!(
                        "--quick recovers {} rows, not {RECOVERY_ROWS}",
                        r.rows
                    ))
                } else if r.check.is_err() {
                    Verdict::NotChecked("the recovered database failed its check".into())
                } else {
                    Verdict::from_bool(rec.seconds < 20.0)
                },
            )
        }
        Err(e) => (e.clone(), Verdict::NotChecked(e.clone())),
    };
    Claim {
        statement: format!("a {RECOVERY_ROWS}-row YCSB database recovers in under 20 s"),
        paper: "SiloR recovers a 43 GB TPC-C database in about 100 s on 32 cores".into(),
        measured,
        verdict,
    }
}

/// Runs the experiment.
pub fn run(s: &Settings) -> Result<Artifacts, String> {
    let threads = if s.threads.contains(&THREADS) {
        THREADS
    } else {
        s.threads_max()
    };
    let rounds = if s.quick { 1 } else { s.runs.max(ROUNDS) };
    let mut runs = Vec::new();
    for round in 1..=rounds {
        for load in Load::ALL {
            // Odd rounds run without logging first, even rounds with: a machine that gets busier
            // or quieter during a round does not favour one side in every round.
            for logging in [round % 2 == 0, round % 2 == 1] {
                eprintln!(
                    "{}: {} logging {} (round {round} of {rounds})",
                    s.name,
                    load.name(),
                    if logging { "group" } else { "off" }
                );
                let dir = fresh_dir(s, "data")?;
                let r = load.run(s, threads, logging.then(|| Durability::new(&dir)));
                remove(&dir)?;
                runs.push(cost_run(load, logging, round, &r));
            }
        }
    }
    let rows_recovered = if s.quick {
        QUICK_RECOVERY_ROWS
    } else {
        RECOVERY_ROWS
    };
    let recovered = recover(s, threads, rows_recovered);
    let claims = [
        cost_claim(&runs, Load::Ycsb),
        cost_claim(&runs, Load::Tpcc),
        latency_claim(&runs),
        replay_claim(&recovered),
        recovery_claim(&recovered, s.quick),
    ];
    let mut rows: Vec<Row> = runs.iter().map(CostRun::row).collect();
    if let Ok(r) = &recovered {
        rows.push(r.row());
    }
    let title = "durability: SiloR logging cost and recovery speed";
    let mut report = Report::new(title);
    report.heading("Setup").bullets(&[
        format!(
            "OCC, {threads} worker threads; YCSB: STAR's shape ({} rows, 4 operations, 90% \
             reads); TPC-C: 1 warehouse, 50% NewOrder 50% Payment",
            ycsb(s.quick).rows
        ),
        format!(
            "logging: one logger, group fsync, into a directory under {} (a real disk, not \
             tmpfs, is what the targets mean); durable results counted, commit-to-durable \
             latency measured",
            s.out.display()
        ),
        format!(
            "{rounds} round(s), each running every workload without and with logging (odd rounds without first, even rounds with first); \
             each run {:.2} s after {:.2} s of warm-up, seed {}, on {}",
            window(s).as_secs_f64(),
            s.warmup.as_secs_f64(),
            s.seed,
            s.machine()
        ),
        format!(
            "recovery: YCSB with {rows_recovered} rows at 50% reads, {THREADS} loggers, logged \
             for {:.2} s, then recovered by a new database in this process",
            window(s).as_secs_f64()
        ),
    ]);
    report.heading("What is claimed").para(PAPER);
    report.heading("Runs").table(
        &[
            "workload",
            "logging",
            "round",
            "txn/s",
            "txn per worker CPU-s",
            "log bytes/txn",
            "durable p99 (epochs)",
        ],
        &runs
            .iter()
            .map(|r| {
                let opt = |v: Option<f64>, p: usize| v.map_or("-".into(), |v| format!("{v:.p$}"));
                vec![
                    r.load.name().into(),
                    if r.logging { "group" } else { "off" }.into(),
                    r.round.to_string(),
                    format!("{:.0}", r.throughput),
                    format!("{:.0}", r.per_cpu),
                    opt(r.log_bytes_per_txn, 0),
                    opt(r.p99_epochs, 2),
                ]
            })
            .collect::<Vec<_>>(),
    );
    report.heading("Verdicts");
    for (i, c) in claims.iter().enumerate() {
        report.claim(i + 1, c);
    }
    report.para(&format!(
        "Data: `{0}.csv` (one row per run, and one for the recovery); plot: `{0}.svg`.",
        s.name
    ));
    Ok(Artifacts {
        verdicts: claims.iter().map(Claim::verdict_line).collect(),
        rows,
        plot: PlotSpec {
            title: title.into(),
            x_label: "round".into(),
            color_by: "workload",
            reference: None,
            dashed: Some(Dashes {
                param: "logging",
                value: "off",
                solid_label: "group commit",
            }),
            right: RightPanel::Param {
                param: "durable_p99_epochs",
                caption: "Commit-to-durable p99",
                y_label: "epochs",
            },
        },
        report: report.finish(),
    })
}
