//! Failures in the cluster benchmark, on real `phasedb node` processes over loopback: a node the
//! benchmark kills as asked (`--kill-node I --at SECS`, SIGKILL) and one that dies unasked. The
//! benchmark reports which node stopped and when, the requests resent, and throughput per 100 ms
//! so a stall shows; it fails a run in which a node died unasked. P-DUR's benchmark too: a replica
//! killed (and restarted to rejoin) as asked, and one killed from outside.

mod common;

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::TempDir;

fn phasedb() -> Command {
    Command::new(env!("CARGO_BIN_EXE_phasedb"))
}

fn json_of(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: stdout {:?}, stderr {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Mean of the timeline's intervals ending in `[from, to)` seconds.
fn mean_between(v: &serde_json::Value, from: f64, to: f64) -> f64 {
    let t = &v["failures"]["timeline"];
    let ends = t["end_s"].as_array().unwrap();
    let rates: Vec<f64> = t["txn_per_s"]
        .as_array()
        .unwrap()
        .iter()
        .zip(ends)
        .map(|(r, end)| (end.as_f64().unwrap(), r.as_f64().unwrap()))
        .filter(|(end, _)| *end >= from && *end < to)
        .map(|(_, r)| r)
        .collect();
    assert!(!rates.is_empty(), "no interval in [{from}, {to}): {t}");
    rates.iter().sum::<f64>() / rates.len() as f64
}

fn events(v: &serde_json::Value) -> &Vec<serde_json::Value> {
    v["failures"]["events"].as_array().unwrap()
}

#[test]
fn a_ramp_node_killed_as_asked_shows_as_a_stall_with_resent_requests() {
    let started = Instant::now();
    let out = phasedb()
        .args(["bench", "ycsb", "--cluster", "3", "--algorithm", "ramp-f"])
        .args(["--clients", "16", "--rows", "1000", "--no-pin", "--json"])
        .args(["--warmup", "0.2", "--duration", "2.3"])
        .args(["--kill-node", "2", "--at", "1.0"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    assert!(started.elapsed() < Duration::from_secs(60));
    let v = json_of(&out);
    let f = &v["failures"];
    assert_eq!(f["injected"]["node"], 2, "{f}");
    assert_eq!(f["unasked"], 0, "{f}");
    let killed = &events(&v)[0];
    assert_eq!(killed["kind"], "killed", "{f}");
    assert_eq!(killed["node"], 2);
    let at = killed["at_s"].as_f64().unwrap();
    assert!((1.0..1.3).contains(&at), "killed at {at}");
    // Most transactions touch node 2's keys: their clients wait on it and resend, so the
    // intervals after the kill fall far below those before it.
    let before = mean_between(&v, 0.3, 1.0);
    let after = mean_between(&v, at + 0.3, 2.4);
    assert!(before > 0.0, "{f}");
    assert!(after < before * 0.5, "before {before}, after {after}: {f}");
    assert!(
        f["timeline"]["stalled_intervals"].as_u64().unwrap() > 0,
        "{f}"
    );
    assert!(f["retries"]["resent_requests"].as_u64().unwrap() > 0, "{f}");
}

/// A RAMP cluster of `n` nodes the test runs itself, so it can kill one the benchmark did not
/// mean to lose.
fn ramp_nodes(dir: &TempDir, n: usize) -> (std::path::PathBuf, Vec<Child>) {
    std::fs::create_dir_all(&dir.0).unwrap();
    let listeners: Vec<_> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let mut text = String::new();
    for (i, l) in listeners.iter().enumerate() {
        let addr = l.local_addr().unwrap();
        text.push_str(&format!("[[nodes]]\nid = {i}\naddr = \"{addr}\"\n"));
    }
    drop(listeners);
    let path = dir.0.join("cluster.toml");
    std::fs::write(&path, text).unwrap();
    let children = (0..n)
        .map(|i| {
            phasedb()
                .args(["node", "--quiet", "--config"])
                .arg(&path)
                .args(["--id", &i.to_string()])
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    (path, children)
}

#[test]
fn a_ramp_node_dying_unasked_is_named_and_fails_the_run() {
    let dir = TempDir::new("cli-cluster-unasked");
    let (path, mut nodes) = ramp_nodes(&dir, 2);
    let bench = phasedb()
        .args(["bench", "ycsb", "--algorithm", "ramp-f", "--connect"])
        .arg(&path)
        .args(["--clients", "8", "--rows", "500", "--no-pin", "--json"])
        .args(["--warmup", "0.2", "--duration", "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    nodes[1].kill().unwrap();
    nodes[1].wait().unwrap();
    let out = bench.wait_with_output().unwrap();
    for n in &mut nodes {
        let _ = n.kill();
        let _ = n.wait();
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("error: node 1 failed unasked"), "{stderr}");
    let v = json_of(&out);
    let silent = events(&v)
        .iter()
        .find(|e| e["kind"] == "silent" && e["node"] == 1)
        .unwrap_or_else(|| panic!("{}", v["failures"]));
    let detail = silent["detail"].as_str().unwrap();
    assert!(detail.contains("no reply to any client since"), "{detail}");
    assert!(v["failures"]["unasked"].as_u64().unwrap() >= 1);
}

#[test]
fn a_star_partial_replica_killed_mid_run_leaves_live_replicas_equal_and_consistent() {
    let started = Instant::now();
    let out = phasedb()
        .args(["bench", "ycsb", "--cluster", "3", "--algorithm", "star"])
        .args(["--rows", "300", "--no-pin", "--json"])
        .args(["--warmup", "0.2", "--duration", "2.5"])
        .args(["--kill-node", "2", "--at", "0.8"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    assert!(started.elapsed() < Duration::from_secs(60));
    let v = json_of(&out);
    let f = &v["failures"];
    assert_eq!(f["unasked"], 0, "{f}");
    assert_eq!(events(&v)[0]["kind"], "killed", "{f}");
    assert_eq!(events(&v)[0]["node"], 2, "{f}");
    // The live replicas of every partition (node 2's included, re-mastered) hold the same rows
    // and pass the workload's check.
    assert_eq!(v["replicas_agree"], true, "{v}");
    assert_eq!(
        v["consistency"],
        serde_json::json!(["ok", "ok"]),
        "the two live nodes: {v}"
    );
    // STAR fails over: it commits after the kill (the benchmark's query to the killed node
    // waits out its 2 s answer timeout, so the interval after the kill is long).
    let after = mean_between(&v, 1.5, 4.0);
    assert!(after > 0.0, "no commit after the fail-over: {f}");
}

#[test]
fn fault_flags_that_cannot_run_exit_2() {
    for (args, says) in [
        (&["--kill-node", "1"][..], "--kill-node needs --at"),
        (
            &["--at", "1"][..],
            "--at and --restart-after need --kill-node",
        ),
        (
            &["--kill-node", "3", "--at", "1"][..],
            "the cluster has nodes 0..3",
        ),
        (
            &["--kill-node", "1", "--at", "1", "--restart-after", "1"][..],
            "cannot rejoin its cluster",
        ),
    ] {
        let out = phasedb()
            .args(["bench", "ycsb", "--cluster", "3", "--algorithm", "ramp-f"])
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// A short P-DUR micro-benchmark on three replicas, over few items, with `extra` flags.
fn pdur_bench(extra: &[&str]) -> Command {
    let mut cmd = phasedb();
    cmd.args([
        "bench",
        "pdur-micro",
        "--cluster",
        "3",
        "--algorithm",
        "pdur",
    ])
    .args(["--items", "2000", "--clients-per-partition", "4", "--json"])
    .args(["--warmup", "0.2", "--duration", "2.5"])
    .args(extra);
    cmd
}

/// The run's retry counter `name`.
/// Runs the P-DUR bench with `extra`, asserts it succeeded, and returns its JSON report.
fn pdur_bench_ok(extra: &[&str]) -> serde_json::Value {
    let out = pdur_bench(extra).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    json_of(&out)
}

fn retry(v: &serde_json::Value, name: &str) -> u64 {
    v["failures"]["retries"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("no {name}: {}", v["failures"]))
}

#[test]
fn a_pdur_replica_killed_and_restarted_as_asked_rejoins_and_the_replicas_agree() {
    let v = pdur_bench_ok(&["--kill-node", "2", "--at", "1.0", "--restart-after", "0.5"]);
    let f = &v["failures"];
    assert_eq!(f["injected"]["node"], 2, "{f}");
    assert_eq!(f["unasked"], 0, "{f}");
    let kinds: Vec<(&str, u64)> = events(&v)
        .iter()
        .map(|e| (e["kind"].as_str().unwrap(), e["node"].as_u64().unwrap()))
        .collect();
    let killed = kinds.iter().position(|k| *k == ("killed", 2));
    let restarted = kinds.iter().position(|k| *k == ("restarted", 2));
    assert!(
        killed.is_some() && restarted > killed,
        "killed, then restarted: {f}"
    );
    assert!(
        kinds.iter().all(|(_, node)| *node == 2),
        "only node 2 failed: {f}"
    );
    // Its clients saw their connections fail with transactions in flight.
    assert!(retry(&v, "client_connections_lost") > 0, "{f}");
    assert!(retry(&v, "txns_unanswered") > 0, "{f}");
    let rates = f["timeline"]["txn_per_s"].as_array().unwrap();
    assert!(rates.len() >= 10, "a point per 100 ms of load: {f}");
    // The rejoined replica caught up: every replica's digests, its own among them, agree.
    assert_eq!(v["digests_equal"], true, "{v}");
    assert_eq!(
        v["copies_compared"], 6,
        "three replicas x two partitions: {v}"
    );
}

#[test]
fn a_pdur_replica_killed_as_asked_leaves_the_others_committing_and_equal() {
    let v = pdur_bench_ok(&["--kill-node", "2", "--at", "1.0"]);
    let f = &v["failures"];
    assert_eq!(f["unasked"], 0, "{f}");
    assert_eq!(events(&v)[0]["kind"], "killed", "{f}");
    assert_eq!(events(&v)[0]["node"], 2, "{f}");
    assert!(retry(&v, "client_connections_lost") > 0, "{f}");
    // The two live replicas (a majority of every group) go on and end equal.
    assert_eq!(v["digests_equal"], true, "{v}");
    assert_eq!(
        v["copies_compared"], 4,
        "two live replicas x two partitions: {v}"
    );
    assert!(v["committed"].as_u64().unwrap() > 0, "{v}");
}

/// The pid of the `phasedb node --id <id>` child of process `parent`, once it runs.
fn node_pid(parent: u32, id: usize) -> Option<u32> {
    let wanted = format!("--id\0{id}\0");
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // The parent's pid is the second field after the command's parenthesis.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if ppid == Some(parent) && String::from_utf8_lossy(&cmdline).contains(&wanted) {
            return Some(pid);
        }
    }
    None
}

#[test]
fn a_pdur_replica_killed_from_outside_is_named_and_fails_the_run() {
    let bench = pdur_bench(&[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let pid = loop {
        if let Some(pid) = node_pid(bench.id(), 1) {
            break pid;
        }
        assert!(Instant::now() < deadline, "node 1 never started");
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(1000));
    let killed = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = bench.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("error: node 1 failed unasked"), "{stderr}");
    let v = json_of(&out);
    let f = &v["failures"];
    assert!(f["injected"].is_null(), "{f}");
    assert!(f["unasked"].as_u64().unwrap() >= 1, "{f}");
    let named = events(&v)
        .iter()
        .find(|e| e["node"] == 1 && (e["kind"] == "died" || e["kind"] == "silent"))
        .unwrap_or_else(|| panic!("node 1 is not named: {f}"));
    assert!(named["at_s"].as_f64().unwrap() > 0.0, "{f}");
    // The two live replicas still end equal.
    assert_eq!(v["digests_equal"], true, "{v}");
    assert_eq!(v["copies_compared"], 4, "{v}");
}
