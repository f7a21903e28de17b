//! STAR's committed history under a real crash (§7.1, issue 35): `phasedb bench tpcc --cluster 3
//! --algorithm star --verify` on three `phasedb node` processes generating their own contended
//! TPC-C load (NewOrder and Payment on three warehouses, a fifth of the transactions
//! cross-partition), with one node killed mid-run with SIGKILL — a partial replica, or the
//! coordinator. Every node appends its committed history to a file as it goes; the benchmark
//! merges the files (the killed node's without the phase its failure interrupted) and checks it.
//! Asserted from the JSON report: the merged history is serializable and holds at least every
//! transaction the nodes acknowledged, the failure it applied is the kill, the live replicas'
//! digests agree, and TPC-C's consistency conditions hold on every live node.

use std::process::{Command, Output};
use std::sync::Mutex;

use serde_json::Value;

/// Each case starts three node processes: they run one at a time on a small machine.
static SERIAL: Mutex<()> = Mutex::new(());

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: stdout {:?}, stderr {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Runs the benchmark with `layout` flags, killing `victim` a second into the load; returns its
/// JSON report once the run passed.
fn killed_run(victim: u32, layout: &[&str]) -> Value {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let out = Command::new(env!("CARGO_BIN_EXE_phasedb"))
        .args(["bench", "tpcc", "--cluster", "3", "--algorithm", "star"])
        .args([
            "--warehouses",
            "3",
            "--mix",
            "no-p",
            "--cross-partition",
            "0.2",
        ])
        .args(layout)
        .args(["--no-pin", "--json", "--verify"])
        .args(["--warmup", "0.3", "--duration", "3"])
        .args(["--kill-node", &victim.to_string(), "--at", "1.0"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    json_of(&out)
}

/// What every case asserts of a run in which `victim` was killed.
fn check(v: &Value, victim: u32) {
    let f = &v["failures"];
    assert_eq!(f["unasked"], 0, "{f}");
    assert_eq!(f["events"][0]["kind"], "killed", "{f}");
    assert_eq!(f["events"][0]["node"], victim, "{f}");

    let h = &v["history"];
    assert_eq!(h["serializable"], true, "{h}");
    assert_eq!(h["passed"], true, "{h}");
    let transactions = h["transactions"].as_u64().unwrap();
    let acknowledged = h["acknowledged"].as_u64().unwrap();
    assert!(acknowledged > 0, "nothing was acknowledged: {h}");
    assert!(
        transactions >= acknowledged,
        "{acknowledged} acknowledged, {transactions} in the history: {h}"
    );
    // The one failure the survivors announced is the kill, and the reader applied it.
    let failures = h["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{h}");
    assert_eq!(failures[0]["node"], victim, "{h}");
    assert!(failures[0]["phase"].as_u64().unwrap() > 0, "{h}");

    // The cluster went on: transactions committed once the failure timeout (1 s) had passed.
    let at = f["events"][0]["at_s"].as_f64().unwrap();
    let t = &f["timeline"];
    let after: f64 = t["end_s"]
        .as_array()
        .unwrap()
        .iter()
        .zip(t["txn_per_s"].as_array().unwrap())
        .filter(|(end, _)| end.as_f64().unwrap() > at + 1.2)
        .map(|(_, rate)| rate.as_f64().unwrap())
        .sum();
    assert!(after > 0.0, "no commit after the fail-over: {t}");
    assert_eq!(v["replicas_agree"], true, "{}", v["replica_problems"]);
    assert_eq!(
        v["consistency"],
        serde_json::json!(["ok", "ok"]),
        "TPC-C's conditions on the two live nodes"
    );
}

/// Node 2, a partial replica and the primary of warehouse 2 (one full replica, two copies of
/// each warehouse): its warehouse is re-mastered on node 0.
#[test]
fn a_partial_replica_killed_mid_run_leaves_a_serializable_history_with_every_acknowledged_txn() {
    let v = killed_run(2, &[]);
    check(&v, 2);
}

/// Node 0, the coordinator (two full replicas, three copies of each warehouse): node 1 takes over
/// and announces the failure.
#[test]
fn a_coordinator_killed_mid_run_leaves_a_serializable_history_with_every_acknowledged_txn() {
    let v = killed_run(0, &["--full-replicas", "2", "--replicas", "3"]);
    check(&v, 0);
}
