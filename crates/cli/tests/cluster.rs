//! The cluster commands end to end: `phasedb node` and `phasedb bench ycsb --cluster N`.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::TempDir;

fn phasedb() -> Command {
    Command::new(env!("CARGO_BIN_EXE_phasedb"))
}

/// Writes `text` to file `name` in `dir` (created if need be).
fn temp_file(dir: &TempDir, name: &str, text: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(&dir.0).unwrap();
    let path = dir.0.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn a_bad_cluster_file_is_refused_before_the_node_starts() {
    let dir = TempDir::new("cli-cluster-bad");
    let path = temp_file(
        &dir,
        "dup.toml",
        "[[nodes]]\nid = 0\naddr = \"127.0.0.1:7001\"\n[[nodes]]\nid = 1\naddr = \"127.0.0.1:7001\"\n",
    );
    let out = phasedb()
        .args(["node", "--config"])
        .arg(&path)
        .args(["--id", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("used by another node"), "{err}");

    let ok = temp_file(
        &dir,
        "one.toml",
        &format!("[[nodes]]\nid = 0\naddr = \"127.0.0.1:{}\"\n", free_port()),
    );
    let out = phasedb()
        .args(["node", "--config"])
        .arg(&ok)
        .args(["--id", "4"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("node 4 is not in"));

    let out = phasedb()
        .args(["node", "--config", "/nonexistent.toml", "--id", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read /nonexistent.toml"));
}

#[test]
fn a_data_dir_is_refused_before_the_node_starts_naming_the_algorithm() {
    let dir = TempDir::new("cli-cluster-data-dir");
    let data = dir.0.join("data-{node}");
    let text = format!(
        "data_dir = {:?}\n[[nodes]]\nid = 0\naddr = \"127.0.0.1:{}\"\n[[nodes]]\nid = 1\n\
         addr = \"127.0.0.1:{}\"\n[star]\npartitions = 2\nalgorithm = \"calvin\"\n",
        data.display().to_string(),
        free_port(),
        free_port()
    );
    let path = temp_file(&dir, "calvin.toml", &text);
    let out = phasedb()
        .args(["node", "--config"])
        .arg(&path)
        .args(["--id", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("data_dir is not supported") && err.contains("calvin:"),
        "{err}"
    );
    assert!(
        !dir.0.join("data-0").exists(),
        "nothing was started or created"
    );
}

#[test]
fn a_listen_fd_that_is_not_a_listening_socket_is_refused() {
    let dir = TempDir::new("cli-cluster-listen-fd");
    let path = temp_file(
        &dir,
        "one.toml",
        &format!("[[nodes]]\nid = 0\naddr = \"127.0.0.1:{}\"\n", free_port()),
    );
    for (fd, why) in [
        ("999", "file descriptor 999 is not open"),
        ("0", "file descriptor 0 is not a socket"),
    ] {
        let out = phasedb()
            .args(["node", "--config"])
            .arg(&path)
            .args(["--id", "0", "--listen-fd", fd])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("error: --listen-fd: {why}")), "{err}");
    }
}

#[test]
fn a_node_serves_until_sigterm_and_then_exits_cleanly() {
    let port = free_port();
    let dir = TempDir::new("cli-cluster-serve");
    let path = temp_file(
        &dir,
        "serve.toml",
        &format!("[[nodes]]\nid = 0\naddr = \"127.0.0.1:{port}\"\n"),
    );
    let mut child = phasedb()
        .args(["node", "--config"])
        .arg(&path)
        .args(["--id", "0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err() {
        assert!(Instant::now() < deadline, "the node never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the node ignored SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{status}: {err}");
    assert!(err.contains("stopped cleanly"), "{err}");
}

#[test]
fn the_cluster_bench_starts_nodes_and_reports_json() {
    let out = phasedb()
        .args([
            "bench",
            "ycsb",
            "--cluster",
            "2",
            "--algorithm",
            "ramp-h",
            "--clients",
            "16",
            "--duration",
            "1",
            "--warmup",
            "0.2",
            "--rows",
            "500",
            "--verify",
            "--json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["protocol"], "ramp-h");
    assert_eq!(v["config"]["servers"], 2);
    assert!(v["throughput"].as_f64().unwrap() > 100.0, "{v}");
    assert!(v["per_type"]["write"]["committed"].as_u64().unwrap() > 0);
    assert_eq!(v["read_atomic"]["verdict"], "ok");
}

#[test]
fn cluster_bench_flags_are_checked() {
    let out = phasedb()
        .args(["bench", "ycsb", "--cluster", "2", "--clients", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--clients"));
    let out = phasedb()
        .args(["bench", "ycsb", "--cluster", "2", "--algorithm", "paxos"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("ramp-f"));
    let out = phasedb()
        .args(["bench", "bank", "--cluster", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ycsb workload only"));
    let out = phasedb()
        .args(["bench", "ycsb", "--cluster", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("between 1 and 64"));
}
