//! STAR from the command line: `phasedb bench ycsb|tpcc --cluster 2 --algorithm star` on real node
//! processes, `phasedb node` with a `[star]` table, and a client's request over TCP.

mod common;

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::TempDir;
use common::star::{spawn_node, star_cluster};
use phasedb_dist::star::client::{Client, ClientError};
use phasedb_dist::star::{Answer, Outcome, PhaseKind, Query};
use phasedb_net::ClusterConfig;
use phasedb_txn::Procedures;
use phasedb_workloads::ycsb::{YcsbProcedures, YcsbProceduresConfig};

fn phasedb() -> Command {
    Command::new(env!("CARGO_BIN_EXE_phasedb"))
}

/// `phasedb bench <args> --json` on a cluster it starts: the JSON object, after checking the run
/// succeeded.
fn bench_json(args: &[&str]) -> serde_json::Value {
    let out = phasedb()
        .arg("bench")
        .args(args)
        .args(["--duration", "1", "--warmup", "0.2", "--json", "--no-pin"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_star_ycsb_cluster_commits_with_agreeing_replicas() {
    let v = bench_json(&[
        "ycsb",
        "--cluster",
        "2",
        "--algorithm",
        "star",
        "--rows",
        "300",
    ]);
    assert_eq!(v["protocol"], "star");
    assert_eq!(v["config"]["nodes"], 2);
    assert_eq!(v["config"]["partitions"], 2);
    assert_eq!(v["config"]["workload"]["rows_per_partition"], 300);
    assert!(v["throughput"].as_f64().unwrap() > 0.0, "{v}");
    assert!(
        v["per_type"]["ycsb"]["committed"].as_u64().unwrap() > 0,
        "{v}"
    );
    assert!(
        v["per_type"]["ycsb"]["committed_cross"].as_u64().unwrap() > 0,
        "10% cross-partition by default: {v}"
    );
    assert!(
        v["replication"]["bytes_per_txn"].as_f64().unwrap() > 0.0,
        "{v}"
    );
    assert!(!v["intervals"]["throughput"].as_array().unwrap().is_empty());
    assert!(v["load"].as_str().unwrap().contains("no networked clients"));
    assert_eq!(v["replicas_agree"], true, "{v}");
    assert_eq!(v["consistency"], serde_json::json!(["ok", "ok"]), "{v}");
}

#[test]
fn a_star_tpcc_cluster_stays_consistent_on_every_replica() {
    let v = bench_json(&[
        "tpcc",
        "--cluster",
        "2",
        "--algorithm",
        "star",
        "--warehouses",
        "2",
    ]);
    assert_eq!(v["workload"], "tpcc");
    assert_eq!(v["config"]["workload"]["mix"], "no-p");
    for ty in ["new-order", "payment"] {
        assert!(v["per_type"][ty]["committed"].as_u64().unwrap() > 0, "{v}");
    }
    assert_eq!(v["replicas_agree"], true, "{v}");
    assert_eq!(v["consistency"], serde_json::json!(["ok", "ok"]), "{v}");
}

#[test]
fn a_pb_occ_sync_ycsb_cluster_commits_with_a_backup_equal_to_its_primary() {
    let v = bench_json(&[
        "ycsb",
        "--cluster",
        "2",
        "--algorithm",
        "pb-occ",
        "--replication",
        "sync",
        "--rows",
        "300",
    ]);
    assert_eq!(v["protocol"], "pb-occ");
    assert_eq!(v["config"]["replication"], "sync");
    assert_eq!(v["config"]["full_replicas"], 2);
    assert!(
        v["replication_mode"]
            .as_str()
            .unwrap()
            .contains("synchronous")
    );
    let ycsb = &v["per_type"]["ycsb"];
    assert!(ycsb["committed"].as_u64().unwrap() > 0, "{v}");
    assert!(ycsb["committed_cross"].as_u64().unwrap() > 0, "{v}");
    assert!(v["latency_us"]["p50"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["replication"]["bytes_per_txn"].as_f64().unwrap() > 0.0);
    assert_eq!(v["replicas_agree"], true, "{v}");
    assert_eq!(v["consistency"], serde_json::json!(["ok", "ok"]), "{v}");
}

/// Dist-OCC and Dist-S2PL on 3 nodes (1 full, 2 partial replicas): cross-partition
/// transactions commit through remote reads and two-phase commit, and every partition's replicas
/// agree afterwards, under asynchronous and synchronous replication.
#[test]
fn dist_occ_and_dist_s2pl_ycsb_clusters_commit_cross_partition_with_agreeing_replicas() {
    for (algorithm, replication) in [("dist-occ", "async"), ("dist-s2pl", "sync")] {
        let v = bench_json(&[
            "ycsb",
            "--cluster",
            "3",
            "--algorithm",
            algorithm,
            "--replication",
            replication,
            "--cross-partition",
            "0.2",
            "--rows",
            "300",
        ]);
        assert_eq!(v["protocol"], algorithm);
        assert_eq!(v["config"]["replication"], replication);
        let ycsb = &v["per_type"]["ycsb"];
        assert!(ycsb["committed"].as_u64().unwrap() > 0, "{v}");
        assert!(ycsb["committed_cross"].as_u64().unwrap() > 0, "{v}");
        assert_eq!(v["replicas_agree"], true, "{v}");
    }
}

#[test]
fn baseline_flags_that_do_not_fit_exit_2() {
    let ycsb = |algorithm: &'static str, extra: &[&'static str]| {
        let mut a = vec!["ycsb", "--cluster", "2", "--algorithm", algorithm];
        a.extend(extra);
        a
    };
    refused(
        &ycsb("star", &["--replication", "sync"]),
        "--replication applies to STAR's baselines",
    );
    refused(
        &ycsb("dist-occ", &["--no-hybrid"]),
        "--no-hybrid applies to --algorithm star only",
    );
    refused(
        &ycsb("pb-occ", &["--iteration-ms", "5"]),
        "--iteration-ms applies to --algorithm star only",
    );
    refused(
        &["ycsb", "--cluster", "3", "--algorithm", "pb-occ"],
        "runs on 2 nodes",
    );
    refused(
        &ycsb("ramp-f", &["--replication", "async"]),
        "--replication applies to STAR's baselines",
    );
    refused(
        &ycsb("pb-occ", &["--replication", "eventually"]),
        "eventually",
    );
}

/// `phasedb bench <args>` fails with status 2 and an error naming `why`.
fn refused(args: &[&str], why: &str) {
    let out = phasedb().arg("bench").args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(why), "{args:?}: {err}");
}

#[test]
fn bad_star_flags_and_impossible_placements_exit_2() {
    let star = ["--cluster", "2", "--algorithm", "star"];
    let with = |extra: &[&'static str], w: &'static str| {
        let mut a = vec![w];
        a.extend(star);
        a.extend(extra);
        a
    };
    refused(
        &with(&["--cross-partition", "1.5"], "ycsb"),
        "between 0 and 1",
    );
    refused(
        &with(&["--full-replicas", "3"], "ycsb"),
        "full_replicas = 3 but the cluster has 2",
    );
    refused(
        &with(&["--replicas", "1"], "ycsb"),
        "partial replicas without data",
    );
    refused(
        &with(&["--partitions", "0"], "ycsb"),
        "partitions must be 1..=65536",
    );
    refused(&with(&["--theta", "0.9"], "ycsb"), "uniformly");
    refused(&with(&["--ops", "16"], "ycsb"), "4 operations");
    refused(
        &[
            "ycsb",
            "--cluster",
            "2",
            "--algorithm",
            "calvin",
            "--verify",
        ],
        "--verify is not built for --algorithm calvin",
    );
    refused(
        &with(&["--mix", "standard"], "tpcc"),
        "NewOrder and Payment",
    );
    refused(
        &with(&["--warehouses", "2", "--partitions", "3"], "tpcc"),
        "one partition per warehouse",
    );
    refused(
        &with(&["--remote-item-ratio", "0.1"], "tpcc"),
        "--cross-partition",
    );
    refused(
        &["bank", "--cluster", "2", "--algorithm", "star"],
        "ycsb and tpcc workloads only",
    );
    refused(
        &[
            "ycsb",
            "--cluster",
            "2",
            "--algorithm",
            "ramp-f",
            "--cross-partition",
            "0.1",
        ],
        "--cross-partition applies to --algorithm star only",
    );
    refused(&["tpcc", "--mix", "payment"], "STAR cluster only");
}

#[test]
fn a_star_node_refuses_a_table_without_a_usable_workload() {
    let dir = TempDir::new("cli-star-bad-table");
    for (star, why) in [
        ("partitions = 2\n", "names no workload"),
        (
            "partitions = 2\nworkload = \"ycsb\"\nworkload_args = [\"--rowz\", \"5\"]\n",
            "[star] workload_args: unexpected argument '--rowz'",
        ),
        (
            "partitions = 2\nworkload = \"tpcc\"\nworkload_args = [\"--warehouses\", \"3\"]\n",
            "one partition per warehouse",
        ),
        (
            "partitions = 2\nworkload = \"ycsb\"\nreplicas_per_partition = 1\n",
            "partial replicas without data",
        ),
    ] {
        let (path, _) = star_cluster(&dir, 2, star);
        let out = phasedb()
            .args(["node", "--config"])
            .arg(&path)
            .args(["--id", "0"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{star}: {err}");
        assert!(err.contains(why), "{star}: {err}");
    }
}

/// Node processes stopped with SIGTERM when dropped.
struct Nodes(Vec<Child>);

impl Nodes {
    /// Sends SIGTERM to every node and waits for each to exit; true if all exited cleanly.
    fn stop(&mut self) -> bool {
        for c in &self.0 {
            Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status()
                .unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut clean = true;
        for c in &mut self.0 {
            let status = loop {
                if let Some(s) = c.try_wait().unwrap() {
                    break Some(s);
                }
                if Instant::now() > deadline {
                    let _ = c.kill();
                    let _ = c.wait();
                    break None;
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            clean &= status.is_some_and(|s| s.success());
        }
        self.0.clear();
        clean
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn a_client_request_over_tcp_is_answered_after_its_phase() {
    let dir = TempDir::new("cli-star-client");
    let rows = 100;
    let (path, cfg) = star_cluster(
        &dir,
        2,
        &format!("partitions = 2\nworkload = \"ycsb\"\nworkload_args = [\"--rows\", \"{rows}\"]\n"),
    );
    let mut nodes = Nodes((0..2).map(|id| spawn_node(&path, &dir, id)).collect());
    let client = connect_retrying(&cfg);
    // The same requests the nodes' own load draws.
    let workload = YcsbProcedures::new(YcsbProceduresConfig {
        rows_per_partition: rows,
        ..YcsbProceduresConfig::star(2)
    });
    let mut g = workload.generator(7, 42);
    let single = workload.generate(&mut g, 0, 0.0);
    let cross = workload.generate(&mut g, 1, 1.0);
    assert!(!workload.touched(&single).is_cross() && workload.touched(&cross).is_cross());
    // Node 0 (the coordinator, a full replica) masters nothing: it forwards the single-partition
    // request to node 1; node 1 forwards the cross-partition one to node 0.
    for (node, request, kind) in [
        (0, &single, PhaseKind::Partitioned),
        (1, &cross, PhaseKind::SingleMaster),
        (1, &single, PhaseKind::Partitioned),
    ] {
        match client.request(node, request) {
            Ok(Outcome::Committed { phase }) => assert_eq!(PhaseKind::of(phase), kind),
            other => panic!("request via node {node}: {other:?}"),
        }
    }
    match client.send_request(1, vec![0xff; 3]).unwrap().wait() {
        Err(ClientError::Refused(why)) => assert!(why.contains("malformed request"), "{why}"),
        other => panic!("garbage was not refused: {other:?}"),
    }
    assert!(matches!(
        client.request(5, &single),
        Err(ClientError::Invalid(why)) if why.contains("no node 5")
    ));
    let received: u64 = client
        .query_all(Query::Stats)
        .into_iter()
        .map(|a| match a {
            Ok(Answer::Stats(s)) => s.requests.received,
            other => panic!("{other:?}"),
        })
        .sum();
    assert_eq!(received, 4);
    // Read-only at read committed on node 0, a secondary of both partitions: run there at once,
    // in whatever phase; a request that writes is refused.
    let mut read = cross.clone();
    read.ops.iter_mut().for_each(|op| op.write = false);
    let mut write = read.clone();
    write.ops[0].write = true;
    assert!(workload.read_only(&read) && workload.touched(&read).is_cross());
    let at = Instant::now();
    for _ in 0..20 {
        match client.read_committed(0, &read) {
            Ok(Outcome::Committed { .. }) => {}
            other => panic!("read committed on node 0: {other:?}"),
        }
    }
    assert!(
        at.elapsed() < Duration::from_secs(5),
        "20 reads took {:?}",
        at.elapsed()
    );
    match client.read_committed(0, &write) {
        Err(ClientError::Refused(why)) => assert!(why.contains("only read-only"), "{why}"),
        other => panic!("a write ran at read committed: {other:?}"),
    }
    match client.query(0, Query::Stats) {
        Ok(Answer::Stats(s)) => assert_eq!(s.requests.read_committed, 20),
        other => panic!("{other:?}"),
    }
    // The benchmark runs on the same nodes through their cluster file, and every replica still
    // agrees after the client's writes and the nodes' own load.
    let out = phasedb()
        .args(["bench", "ycsb", "--algorithm", "star", "--connect"])
        .arg(&path)
        .args(["--duration", "0.5", "--warmup", "0.1", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["config"]["started_nodes"], false);
    assert!(v["committed"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["replicas_agree"], true, "{v}");
    drop(client);
    assert!(nodes.stop(), "a node did not stop cleanly");
    let stats = std::fs::read_to_string(dir.0.join("node-1.stats")).unwrap();
    assert!(stats.lines().any(|l| l == "requests.received 3"), "{stats}");
}

/// A client of `cfg`, connected once every node listens (a node loads its data first).
fn connect_retrying(cfg: &ClusterConfig) -> Client {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match Client::connect(cfg) {
            Ok(c) => return c,
            Err(e) if Instant::now() > deadline => panic!("the nodes never listened: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}
