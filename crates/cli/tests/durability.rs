//! Crash tests of durable operation: a real `phasedb bench ... --data-dir` process is killed with
//! SIGKILL at a random moment, restarted on the same directory, and what it reported durable
//! before the kill must be there, with the workload's consistency conditions holding.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::TempDir;

fn phasedb() -> Command {
    Command::new(env!("CARGO_BIN_EXE_phasedb"))
}

/// `name=count` pairs after the first `skip` words of `line`.
fn counts(line: &str, skip: usize) -> HashMap<String, u64> {
    line.split_whitespace()
        .skip(skip)
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// What one process printed: the tables it recovered (records per table) and the transactions
/// it last reported durable (per type).
struct Printed {
    recovered: HashMap<String, u64>,
    durable: HashMap<String, u64>,
}

/// Runs `phasedb bench <args> --durable-results --durable-progress` and kills it with SIGKILL
/// `after` its first durable report.
fn run_and_kill(args: &[&str], after: Duration) -> Printed {
    let mut child = phasedb()
        .arg("bench")
        .args(args)
        .args(["--durable-results", "--durable-progress", "--warmup", "0"])
        .args(["--duration", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut recovered = None;
    let mut durable = HashMap::new();
    let mut first = None;
    loop {
        let wait = match first {
            None => Duration::from_secs(120),
            Some(at) => after.saturating_sub(std::time::Instant::now() - at),
        };
        match rx.recv_timeout(wait) {
            Ok(line) if line.starts_with("recovered ") => recovered = Some(counts(&line, 3)),
            Ok(line) if line.starts_with("durable ") => {
                durable = counts(&line, 2);
                first.get_or_insert_with(std::time::Instant::now);
            }
            Ok(line) => panic!("unexpected output: {line}"),
            Err(mpsc::RecvTimeoutError::Timeout) if first.is_some() => break,
            Err(e) => panic!("no durable report from phasedb: {e:?}"),
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // What it printed before it died was reported; what is still in the pipe was too.
    for line in rx.iter() {
        if line.starts_with("durable ") {
            durable = counts(&line, 2);
        }
    }
    reader.join().unwrap();
    Printed {
        recovered: recovered.expect("the process reported what it recovered"),
        durable,
    }
}

/// A short complete run on the recovered directory: its JSON, after checking it succeeded (the
/// workload's consistency check included).
fn run_to_end(args: &[&str]) -> serde_json::Value {
    let out = phasedb()
        .arg("bench")
        .args(args)
        .args(["--warmup", "0", "--duration", "0.2", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["check"], "ok", "{json}");
    json
}

fn seed() -> u64 {
    let s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("kill moments seeded with {s}");
    s
}

fn kill_after(x: &mut u64) -> Duration {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    Duration::from_millis(100 + *x % 500)
}

#[test]
fn tpcc_killed_mid_run_keeps_every_transaction_reported_durable_and_stays_consistent() {
    let dir = TempDir::new("durability-tpcc");
    let d = dir.0.to_str().unwrap();
    let args = [
        "tpcc",
        "--warehouses",
        "1",
        "--threads",
        "2",
        "--data-dir",
        d,
        "--loggers",
        "2",
    ];
    let mut x = seed() | 1;
    let printed = run_and_kill(&args, kill_after(&mut x));
    let (loaded_history, loaded_orders) =
        (printed.recovered["history"], printed.recovered["orders"]);
    assert!(printed.durable["payment"] > 0 && printed.durable["new-order"] > 0);
    // The restart recovers, runs and checks TPC-C's consistency conditions.
    let json = run_to_end(&args);
    let rec = &json["durability"]["recovery"];
    assert_eq!(rec["fresh"], false, "{json}");
    let history = rec["table_records"]["history"].as_u64().unwrap();
    let orders = rec["table_records"]["orders"].as_u64().unwrap();
    // Every Payment inserts a history row and every NewOrder an order (neither is deleted).
    assert!(
        history >= loaded_history + printed.durable["payment"],
        "{history} history rows recovered, {loaded_history} loaded and {} payments reported durable",
        printed.durable["payment"]
    );
    assert!(
        orders >= loaded_orders + printed.durable["new-order"],
        "{orders} orders recovered, {loaded_orders} loaded and {} new orders reported durable",
        printed.durable["new-order"]
    );
}

#[test]
fn bank_killed_mid_run_three_times_keeps_its_total() {
    bank_killed(&[], 3);
}

#[test]
fn bank_under_locking_protocols_killed_mid_run_keeps_its_total() {
    for protocol in ["2pl-waitdie", "2pl-nowait", "2pl", "swisstm", "adaptive"] {
        bank_killed(&["--protocol", protocol], 1);
    }
}

#[test]
fn bank_under_tictoc_and_doppel_killed_mid_run_keeps_its_total() {
    for protocol in ["tictoc", "doppel"] {
        bank_killed(&["--protocol", protocol], 1);
    }
}

/// Kills a durable bank run (with `extra` flags) `rounds` times, each time restarting it on the
/// same directory and checking the total.
fn bank_killed(extra: &[&str], rounds: usize) {
    let name = format!("durability-bank{}", extra.get(1).map_or("", |p| p));
    let dir = TempDir::new(&name);
    let d = dir.0.to_str().unwrap();
    let mut args = vec![
        "bank",
        "--accounts",
        "1000",
        "--threads",
        "2",
        "--data-dir",
        d,
        "--loggers",
        "2",
        // Kills land during background checkpoints too.
        "--checkpoint-interval",
        "0.1",
    ];
    args.extend_from_slice(extra);
    let mut x = seed() | 1;
    for round in 0..rounds {
        let printed = run_and_kill(&args, kill_after(&mut x));
        assert_eq!(
            printed.recovered["accounts"], 1000,
            "round {round} {extra:?}"
        );
        // The restart recovers, runs on and checks the total (and then the next round recovers
        // from the state this run left, written by its clean close).
        let json = run_to_end(&args);
        assert_eq!(json["durability"]["recovery"]["fresh"], false, "{extra:?}");
        assert_eq!(json["durability"]["checkpoints"]["failed"], 0, "{json}");
        assert_eq!(
            json["protocol"],
            extra.get(1).copied().unwrap_or("occ"),
            "{json}"
        );
    }
    if rounds < 3 {
        return;
    }
    // Log truncation: the two newest checkpoints are kept, older ones are deleted.
    let complete = std::fs::read_dir(&dir.0)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter(|n| n.starts_with("ckpt-") && !n.ends_with(".tmp"))
        .count();
    assert_eq!(complete, 2);
}
