//! `phasedb serve` as a user runs it: served through `phasedb bench ycsb --connect HOST:PORT` and
//! the Python client, stopped by SIGTERM, killed by SIGKILL and restarted on its data directory,
//! and refusing bad flags.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A `phasedb serve` on a free loopback port, and the address it printed.
fn serve(extra: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_phasedb"))
        .args(["serve", "--listen", "127.0.0.1:0", "--threads", "2"])
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start phasedb serve");
    let mut line = String::new();
    BufReader::new(child.stderr.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split_whitespace()
        .find(|w| w.starts_with("127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    (child, addr)
}

/// Sends SIGTERM and returns the exit code.
fn terminate(mut child: Child) -> i32 {
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    child.wait().unwrap().code().unwrap_or(-1)
}

#[test]
fn bench_connect_runs_ycsb_through_the_client_and_serve_stops_on_sigterm() {
    let (child, addr) = serve(&[]);
    let out = Command::new(env!("CARGO_BIN_EXE_phasedb"))
        .args([
            "bench",
            "ycsb",
            "--connect",
            &addr,
            "--rows",
            "2000",
            "--ops",
            "2",
        ])
        .args([
            "--duration",
            "0.3",
            "--warmup",
            "0.1",
            "--threads",
            "2",
            "--json",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(v["mode"], "served");
    assert!(v["committed"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(terminate(child), 0);
}

#[test]
fn serve_refuses_bad_flags_with_status_2() {
    for args in [
        &["serve", "--protocol", "atomic"][..],
        &["serve", "--token-file", "/nonexistent/token"],
        &["serve", "--threads", "0", "--listen", "127.0.0.1:0"],
        &["serve", "--listen", "not-an-address"],
        &["serve", "--data-dir", "/tmp/x", "--protocol", "nocc"],
        &["serve", "--fsync", "none"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_phasedb"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

/// The Python package's tests (`clients/python/tests`), against this build's server, when the
/// machine has python3.
#[test]
fn the_python_client_passes_its_tests_against_a_real_server() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("python3 not found: skipped");
        return;
    }
    let out = Command::new("python3")
        .args(["-m", "unittest", "discover", "-s", "tests"])
        .current_dir(root.join("clients/python"))
        .env("PHASEDB_BIN", env!("CARGO_BIN_EXE_phasedb"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `kv(v u64)`.
fn kv_table(name: &str) -> phasedb_client::TableDef {
    use phasedb_client::{ColumnDef, ColumnKind, TableDef};
    TableDef {
        name: name.into(),
        columns: vec![ColumnDef {
            name: "v".into(),
            kind: ColumnKind::U64,
            group: 0,
        }],
        capacity: 1 << 16,
        ordered: false,
    }
}

fn value_of(c: &mut phasedb_client::Client, table: u32, key: u64) -> Option<u64> {
    let get = phasedb_client::Op::Get {
        table,
        key,
        columns: vec![0],
    };
    match &c.execute(vec![get]).unwrap()[..] {
        [phasedb_client::OpResult::Row(Some(v))] => match v[..] {
            [phasedb_client::Value::U64(x)] => Some(x),
            ref other => panic!("{other:?}"),
        },
        [phasedb_client::OpResult::Row(None)] => None,
        other => panic!("{other:?}"),
    }
}

/// A durable server acknowledges a commit once it is durable: writers pipeline puts until the
/// server is killed with SIGKILL, and the server restarted on the same directory has every
/// acknowledged put, the tables created before (one by a stored procedure's setup, which still
/// runs), and not the table dropped before.
#[test]
fn a_durable_server_killed_with_sigkill_recovers_every_acknowledged_write() {
    use phasedb_client::{Client, Op, Request, Response, Value};
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = common::TempDir::new("serve-durable");
    let data = dir.0.to_str().unwrap().to_string();
    let (child, addr) = serve(&["--data-dir", &data]);
    let mut c = Client::connect(&addr, None).unwrap();
    let kv = c.create_table(kv_table("kv")).unwrap().id;
    c.execute(vec![Op::Put {
        table: kv,
        key: 0,
        values: vec![(0, Value::U64(7))],
    }])
    .unwrap();
    c.create_table(kv_table("gone")).unwrap();
    c.call_procedure(
        "ycsb.setup",
        vec![Value::U64(500), Value::U64(2), Value::U64(8)],
    )
    .unwrap();
    let later = c.create_table(kv_table("later")).unwrap().id;
    c.drop_table("gone").unwrap();
    let stop = AtomicBool::new(false);
    let acked: Vec<Vec<(u32, u64)>> = std::thread::scope(|s| {
        let writers: Vec<_> = (0..4u64)
            .map(|w| {
                let (addr, stop) = (&addr, &stop);
                s.spawn(move || {
                    let mut c = Client::connect(addr, None).unwrap();
                    let mut acked = Vec::new();
                    let mut next = 1 + w * 1_000_000;
                    while !stop.load(Ordering::Relaxed) && acked.len() < 200_000 {
                        let batch: Vec<(u32, u64)> = (0..16)
                            .map(|i| (if i % 2 == 0 { kv } else { later }, next + i))
                            .collect();
                        next += 16;
                        let reqs: Vec<Request> = batch
                            .iter()
                            .map(|&(table, key)| {
                                Request::Execute(vec![Op::Put {
                                    table,
                                    key,
                                    values: vec![(0, Value::U64(key * 3))],
                                }])
                            })
                            .collect();
                        let Ok(resps) = c.pipeline(&reqs) else {
                            break;
                        };
                        for (r, k) in resps.iter().zip(&batch) {
                            assert!(matches!(r, Response::Results(_)), "{r:?}");
                            acked.push(*k);
                        }
                    }
                    acked
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(700));
        let mut child = child;
        child.kill().unwrap();
        child.wait().unwrap();
        stop.store(true, Ordering::Relaxed);
        writers.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let total: usize = acked.iter().map(Vec::len).sum();
    assert!(total > 0, "no write was acknowledged before the kill");
    let (child, addr) = serve(&["--data-dir", &data]);
    let mut c = Client::connect(&addr, None).unwrap();
    assert_eq!(c.describe_table("kv").unwrap().id, kv);
    assert_eq!(c.describe_table("later").unwrap().id, later);
    assert!(c.describe_table("gone").is_err());
    assert_eq!(value_of(&mut c, kv, 0), Some(7));
    for &(table, key) in acked.iter().flatten() {
        assert_eq!(value_of(&mut c, table, key), Some(key * 3), "{table}/{key}");
    }
    // The YCSB procedure's tables came back with their rows, and it runs.
    let args = [0, 1, 1, 0, 2, 1, 3, 0, 5].map(Value::U64).to_vec();
    c.call_procedure("ycsb", args).unwrap();
    eprintln!("{total} acknowledged writes recovered");
    assert_eq!(terminate(child), 0);
}

/// `experiment served-ycsb --quick` (issue 36): one round of embedded, served p64 and served
/// p1024 against a `phasedb serve` child it starts and stops; the served rows carry their ratio to
/// the round's embedded run, and both verdicts are computed from them.
#[test]
fn served_ycsb_experiment_compares_served_with_embedded_in_one_run() {
    let o = common::quick::run_quick("served-ycsb");
    assert_eq!(
        o.column("mode"),
        ["embedded", "served p64", "served p1024"],
        "{:?}",
        o.rows
    );
    assert!(
        o.column("status").iter().all(|s| *s == "ok"),
        "{:?}",
        o.rows
    );
    assert!(o.numbers("throughput").iter().all(|&t| t > 0.0));
    let embedded = o.numbers("throughput")[0];
    for (ratio, tput) in o.column("of_embedded")[1..]
        .iter()
        .zip(&o.numbers("throughput")[1..])
    {
        let r: f64 = ratio.parse().expect("a served row has its ratio");
        assert!(
            (r - tput / embedded).abs() < 1e-3,
            "{ratio} vs {tput}/{embedded}"
        );
    }
    for claim in ["reaches at least 250K txn/s", "at least 0.3x the embedded"] {
        assert!(
            o.stdout
                .lines()
                .any(|l| l.starts_with("Verdict: ") && l.contains(claim)),
            "verdict of `{claim}` missing:\n{}",
            o.stdout
        );
    }
    assert!(
        o.report
            .contains("`phasedb serve --threads 2` child process")
    );
}
