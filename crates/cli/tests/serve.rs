//! `phasedb serve` as a user runs it: served through `phasedb bench ycsb --connect HOST:PORT` and
//! the Python client, stopped by SIGTERM, and refusing bad flags.

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
