//! A STAR cluster file on free loopback ports, for the tests that start `phasedb node` processes.

// Each test crate compiles this module; not every one uses it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use phasedb_net::ClusterConfig;

use super::TempDir;

/// Writes `cluster.toml` in `dir`: `nodes` nodes on ports free when looked at, and the `[star]`
/// table's lines `star`; returns its path and the parsed file.
pub fn star_cluster(dir: &TempDir, nodes: u32, star: &str) -> (PathBuf, ClusterConfig) {
    std::fs::create_dir_all(&dir.0).unwrap();
    let mut text = String::new();
    for id in 0..nodes {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        text += &format!("[[nodes]]\nid = {id}\naddr = \"127.0.0.1:{port}\"\n");
    }
    text += "[star]\n";
    text += star;
    let path = dir.0.join("cluster.toml");
    std::fs::write(&path, &text).unwrap();
    let cfg = ClusterConfig::from_toml(&text).unwrap();
    (path, cfg)
}

/// Starts node `id` of the cluster file at `path` as a `phasedb node` process, writing its
/// statistics to `node-<id>.stats` in `dir` when it stops.
pub fn spawn_node(path: &Path, dir: &TempDir, id: u32) -> Child {
    Command::new(env!("CARGO_BIN_EXE_phasedb"))
        .args(["node", "--quiet", "--config"])
        .arg(path)
        .args(["--id", &id.to_string(), "--stats"])
        .arg(dir.0.join(format!("node-{id}.stats")))
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}
