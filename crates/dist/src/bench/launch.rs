//! Starts a cluster of `phasedb node` processes on 127.0.0.1 for the benchmark, and stops it.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use phasedb_net::ClusterConfig;
use phasedb_net::config::{NetSettings, ServerSettings};

use crate::node::wait_listening;
use crate::server::ServerStats;

/// Node processes and the configuration file they share; stopped (SIGTERM, then SIGKILL) on drop.
pub struct ProcessCluster {
    /// The cluster they form.
    pub config: ClusterConfig,
    children: Vec<Child>,
    dir: PathBuf,
}

/// Free ports on 127.0.0.1, found by binding port 0 (they are released before the nodes bind them).
pub fn free_addrs(n: usize) -> std::io::Result<Vec<SocketAddr>> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()?;
    listeners.iter().map(|l| l.local_addr()).collect()
}

impl ProcessCluster {
    /// Writes a configuration for `n` nodes on free loopback ports and starts `binary node` for each
    /// (node `i` on core `i` modulo the cores when `pin`, see [`crate::host::pin_to_core`]);
    /// returns once all listen.
    pub fn start(
        binary: &Path,
        n: usize,
        server: ServerSettings,
        net: NetSettings,
        pin: bool,
    ) -> Result<ProcessCluster, String> {
        if n == 0 || n > 64 {
            return Err("--cluster must be between 1 and 64 nodes".into());
        }
        let addrs = free_addrs(n).map_err(|e| format!("no free port on 127.0.0.1: {e}"))?;
        let config = ClusterConfig::local(&addrs, server, net).map_err(|e| e.to_string())?;
        let dir = std::env::temp_dir().join(format!(
            "phasedb-cluster-{}-{}",
            std::process::id(),
            addrs[0].port()
        ));
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let path = dir.join("cluster.toml");
        std::fs::write(&path, config.to_toml())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        let mut cluster = ProcessCluster {
            config,
            children: Vec::new(),
            dir,
        };
        for id in 0..n {
            let mut command = Command::new(binary);
            command
                .arg("node")
                .arg("--config")
                .arg(&path)
                .arg("--id")
                .arg(id.to_string())
                .arg("--stats")
                .arg(cluster.stats_path(id))
                .arg("--quiet")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit());
            if pin {
                command.arg("--cpu").arg(id.to_string());
            }
            let child = command
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
            cluster.children.push(child);
        }
        for (i, node) in cluster.config.nodes.iter().enumerate() {
            if let Err(e) = wait_listening(node.addr, Duration::from_secs(15)) {
                let exited = cluster.children[i].try_wait().ok().flatten();
                return Err(match exited {
                    Some(status) => format!("node {i} exited at start ({status})"),
                    None => format!("node {i} did not start listening: {e}"),
                });
            }
        }
        Ok(cluster)
    }

    /// Asks every node to shut down (SIGTERM) and waits up to `grace`; kills the rest.
    /// Returns how many exited cleanly.
    pub fn stop(mut self, grace: Duration) -> usize {
        self.shutdown(grace)
    }

    /// Stops the nodes like [`ProcessCluster::stop`]; returns each node's final counters, `None`
    /// for a node that did not exit cleanly.
    pub fn stop_with_stats(mut self, grace: Duration) -> Vec<Option<ServerStats>> {
        self.signal_and_wait(grace);
        let stats = (0..self.config.nodes.len())
            .map(|id| {
                let text = std::fs::read_to_string(self.stats_path(id)).ok()?;
                ServerStats::from_text(&text).ok()
            })
            .collect();
        self.release();
        stats
    }

    fn stats_path(&self, id: usize) -> PathBuf {
        self.dir.join(format!("node-{id}.stats"))
    }

    fn shutdown(&mut self, grace: Duration) -> usize {
        let clean = self.signal_and_wait(grace);
        self.release();
        clean
    }

    /// Forgets the (reaped) children and removes the configuration directory.
    fn release(&mut self) {
        self.children.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    /// SIGTERM to every node still running, then waits up to `grace` and kills the rest; returns
    /// how many exited cleanly.
    fn signal_and_wait(&mut self, grace: Duration) -> usize {
        for c in &self.children {
            // SAFETY: kill(2) on a child we spawned and have not reaped; no memory is touched.
            unsafe {
                libc::kill(c.id() as libc::pid_t, libc::SIGTERM);
            }
        }
        let deadline = std::time::Instant::now() + grace;
        let mut clean = 0;
        for c in &mut self.children {
            loop {
                match c.try_wait() {
                    Ok(Some(status)) => {
                        clean += status.success() as usize;
                        break;
                    }
                    Ok(None) if std::time::Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    _ => {
                        let _ = c.kill();
                        let _ = c.wait();
                        break;
                    }
                }
            }
        }
        clean
    }
}

impl Drop for ProcessCluster {
    fn drop(&mut self) {
        if !self.children.is_empty() {
            self.shutdown(Duration::from_secs(3));
        }
    }
}
