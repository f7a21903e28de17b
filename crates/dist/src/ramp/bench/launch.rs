//! Starts a cluster of `phasedb node` processes on 127.0.0.1 for the benchmark, and stops it.

use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use phasedb_net::config::{NetSettings, ServerSettings};
use phasedb_net::{ClusterConfig, PdurTable, StarConfig};

use crate::ramp::node::wait_listening;
use crate::ramp::server::ServerStats;

/// Node processes and the configuration file they share; stopped (SIGTERM, then SIGKILL) on drop.
pub struct ProcessCluster {
    /// The cluster they form.
    pub config: ClusterConfig,
    children: Vec<Child>,
    dir: PathBuf,
    /// How each node was started (its program and arguments but the inherited socket), to start
    /// it again after a kill.
    commands: Vec<(PathBuf, Vec<String>)>,
    /// Per node, whether it was killed on purpose ([`ProcessCluster::kill`]) and not restarted.
    killed: Vec<bool>,
}

/// Sockets listening on `n` free ports of 127.0.0.1, for a cluster's nodes to serve on: a port stays
/// taken from the moment it is chosen, where one found free and released could be taken by another
/// process before its node bound it.
pub fn reserve_ports(n: usize) -> std::io::Result<Vec<TcpListener>> {
    (0..n).map(|_| TcpListener::bind("127.0.0.1:0")).collect()
}

/// The addresses of `listeners`.
pub fn addrs_of(listeners: &[TcpListener]) -> std::io::Result<Vec<SocketAddr>> {
    listeners.iter().map(|l| l.local_addr()).collect()
}

/// Ports on 127.0.0.1 that were free a moment ago and where nothing listens now (released at once;
/// for a cluster, [`reserve_ports`] keeps them).
pub fn free_addrs(n: usize) -> std::io::Result<Vec<SocketAddr>> {
    addrs_of(&reserve_ports(n)?)
}

impl ProcessCluster {
    /// Writes a configuration for `n` nodes on free loopback ports and starts `binary node` for each
    /// (node `i` on core `i` modulo the cores when `pin`, see [`crate::host::pin_to_core`]). Each
    /// node inherits the socket reserved for it (`--listen-fd`), so no other process can take its
    /// port; returns once all accept connections.
    pub fn start(
        binary: &Path,
        n: usize,
        server: ServerSettings,
        net: NetSettings,
        pin: bool,
    ) -> Result<ProcessCluster, String> {
        Self::start_with(binary, n, pin, |addrs| {
            ClusterConfig::local(addrs, server, net).map_err(|e| e.to_string())
        })
    }

    /// As [`ProcessCluster::start`], for a STAR cluster: the configuration also holds `star`
    /// (its layout, workload and settings), from which every node learns what to run.
    pub fn start_star(
        binary: &Path,
        n: usize,
        star: StarConfig,
        server: ServerSettings,
        net: NetSettings,
        pin: bool,
    ) -> Result<ProcessCluster, String> {
        star.validate(n as u32).map_err(|e| e.to_string())?;
        Self::start_with(binary, n, pin, |addrs| {
            let mut config = ClusterConfig::local(addrs, server, net).map_err(|e| e.to_string())?;
            config.star = Some(star);
            Ok(config)
        })
    }

    /// As [`ProcessCluster::start`], for P-DUR replicas: the configuration also holds `pdur`, the
    /// workload and settings every replica runs.
    pub fn start_pdur(
        binary: &Path,
        n: usize,
        pdur: PdurTable,
        net: NetSettings,
        pin: bool,
    ) -> Result<ProcessCluster, String> {
        pdur.validate(n as u32).map_err(|e| e.to_string())?;
        Self::start_with(binary, n, pin, |addrs| {
            let mut config = ClusterConfig::local(addrs, ServerSettings::default(), net)
                .map_err(|e| e.to_string())?;
            config.pdur = Some(pdur);
            Ok(config)
        })
    }

    /// Starts `n` nodes on the configuration `make` builds for their reserved addresses.
    fn start_with(
        binary: &Path,
        n: usize,
        pin: bool,
        make: impl FnOnce(&[SocketAddr]) -> Result<ClusterConfig, String>,
    ) -> Result<ProcessCluster, String> {
        if n == 0 || n > 64 {
            return Err("--cluster must be between 1 and 64 nodes".into());
        }
        let reserved = reserve_ports(n).map_err(|e| format!("no free port on 127.0.0.1: {e}"))?;
        let addrs = addrs_of(&reserved).map_err(|e| format!("no free port on 127.0.0.1: {e}"))?;
        let config = make(&addrs)?;
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
            commands: Vec::new(),
            killed: vec![false; n],
        };
        for (id, socket) in reserved.iter().enumerate() {
            let fd = socket.as_raw_fd();
            let mut args = vec![
                "node".to_string(),
                "--config".to_string(),
                path.display().to_string(),
                "--id".to_string(),
                id.to_string(),
                "--stats".to_string(),
                cluster.stats_path(id).display().to_string(),
                "--quiet".to_string(),
            ];
            if pin {
                args.extend(["--cpu".to_string(), id.to_string()]);
            }
            let mut command = node_command(binary, &args);
            command.arg("--listen-fd").arg(fd.to_string());
            cluster.commands.push((binary.to_path_buf(), args));
            // SAFETY: runs in the forked child before exec and only calls fcntl(2), which is
            // async-signal-safe: the node's socket, and no other, outlives the exec.
            unsafe {
                command.pre_exec(move || {
                    if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let child = command
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
            cluster.children.push(child);
        }
        // The nodes hold their sockets now; once ours are closed, a node that has exited refuses.
        drop(reserved);
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

    /// Kills node `id` with SIGKILL (it is not asked to stop) and reaps it; from then on
    /// [`ProcessCluster::exited`] does not report it, as its death was asked for.
    pub fn kill(&mut self, id: usize) -> Result<(), String> {
        let child = self
            .children
            .get_mut(id)
            .ok_or_else(|| format!("there is no node {id}"))?;
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("node {id} had already exited ({status})"));
        }
        child
            .kill()
            .map_err(|e| format!("cannot kill node {id}: {e}"))?;
        let _ = child.wait();
        self.killed[id] = true;
        Ok(())
    }

    /// Starts node `id` again, killed before, as it was first started (same program, cluster file,
    /// id and counters file); it binds its address from the cluster file itself. A P-DUR replica
    /// lost its state with its process: it is started with `--rejoin`, to catch up from the live
    /// replicas.
    pub fn restart(&mut self, id: usize) -> Result<(), String> {
        if !self.killed.get(id).copied().unwrap_or(false) {
            return Err(format!(
                "node {id} was not killed, so it cannot be restarted"
            ));
        }
        let (binary, args) = &self.commands[id];
        let mut command = node_command(binary, args);
        if self.config.pdur.is_some() {
            command.arg("--rejoin");
        }
        let child = command
            .spawn()
            .map_err(|e| format!("cannot restart node {id}: {e}"))?;
        self.children[id] = child;
        self.killed[id] = false;
        Ok(())
    }

    /// Nodes killed on purpose and not restarted.
    pub fn killed(&self) -> usize {
        self.killed.iter().filter(|&&k| k).count()
    }

    /// The first node that is no longer running, and how it ended: a node that loads its data
    /// before it serves may fail after [`ProcessCluster::start`] returned. Nodes killed on
    /// purpose are left out.
    pub fn exited(&mut self) -> Option<String> {
        self.exited_nodes().into_iter().next().map(|(_, why)| why)
    }

    /// Every node no longer running but those killed on purpose, with how each ended.
    pub fn exited_nodes(&mut self) -> Vec<(usize, String)> {
        let killed = &self.killed;
        self.children
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| !killed[*i])
            .filter_map(|(i, c)| match c.try_wait() {
                Ok(Some(status)) => Some((i, format!("node {i} exited ({status})"))),
                Ok(None) => None,
                Err(e) => Some((i, format!("cannot wait for node {i}: {e}"))),
            })
            .collect()
    }

    /// Asks every node to shut down (SIGTERM) and waits up to `grace`; kills the rest.
    /// Returns how many exited cleanly (a node killed on purpose did not).
    pub fn stop(mut self, grace: Duration) -> usize {
        self.shutdown(grace)
    }

    /// Stops the nodes like [`ProcessCluster::stop`]; returns each node's final counters, or why
    /// it has none (it did not exit cleanly, or its counters file is missing or malformed).
    pub fn stop_with_stats(mut self, grace: Duration) -> Vec<Result<ServerStats, String>> {
        let exits = self.signal_and_wait(grace);
        let stats = exits
            .into_iter()
            .enumerate()
            .map(|(id, exit)| {
                exit?;
                let path = self.stats_path(id);
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("no counters in {}: {e}", path.display()))?;
                ServerStats::from_text(&text)
                    .map_err(|e| format!("malformed counters in {}: {e}", path.display()))
            })
            .collect();
        self.release();
        stats
    }

    /// Stops the nodes like [`ProcessCluster::stop`]; returns the text of each node's counters
    /// file, or why it has none.
    pub fn stop_with_texts(mut self, grace: Duration) -> Vec<Result<String, String>> {
        let exits = self.signal_and_wait(grace);
        let texts = exits
            .into_iter()
            .enumerate()
            .map(|(id, exit)| {
                exit?;
                let path = self.stats_path(id);
                std::fs::read_to_string(&path)
                    .map_err(|e| format!("no counters in {}: {e}", path.display()))
            })
            .collect();
        self.release();
        texts
    }

    /// Where node `id` writes its counters (`--stats`); a P-DUR node also writes this path with
    /// `.done` appended once its load is over.
    pub fn stats_path(&self, id: usize) -> PathBuf {
        self.dir.join(format!("node-{id}.stats"))
    }

    fn shutdown(&mut self, grace: Duration) -> usize {
        let clean = self
            .signal_and_wait(grace)
            .iter()
            .filter(|e| e.is_ok())
            .count();
        self.release();
        clean
    }

    /// Forgets the (reaped) children and removes the configuration directory.
    fn release(&mut self) {
        self.children.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    /// SIGTERM to every node still running, then waits up to `grace` and kills the rest; returns,
    /// for each node, whether it exited cleanly and if not how it ended.
    fn signal_and_wait(&mut self, grace: Duration) -> Vec<Result<(), String>> {
        for c in &mut self.children {
            // A child already reaped may have had its pid given to another process.
            if matches!(c.try_wait(), Ok(None)) {
                // SAFETY: kill(2) on a child we spawned and have not reaped; no memory is touched.
                unsafe {
                    libc::kill(c.id() as libc::pid_t, libc::SIGTERM);
                }
            }
        }
        let deadline = std::time::Instant::now() + grace;
        let mut exits = Vec::with_capacity(self.children.len());
        for (c, &killed) in self.children.iter_mut().zip(&self.killed) {
            if killed {
                exits.push(Err("it was killed on purpose (SIGKILL)".to_string()));
                continue;
            }
            exits.push(loop {
                match c.try_wait() {
                    Ok(Some(status)) if status.success() => break Ok(()),
                    Ok(Some(status)) => break Err(format!("it exited with {status}")),
                    Ok(None) if std::time::Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    Ok(None) => {
                        let _ = c.kill();
                        let _ = c.wait();
                        break Err(format!(
                            "it did not exit within {grace:?} of SIGTERM and was killed"
                        ));
                    }
                    Err(e) => {
                        let _ = c.kill();
                        let _ = c.wait();
                        break Err(format!("cannot wait for it: {e}"));
                    }
                }
            });
        }
        exits
    }
}

/// The command that starts a node with `args` (its output discarded but its errors).
fn node_command(binary: &Path, args: &[String]) -> Command {
    let mut command = Command::new(binary);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cluster whose "nodes" are shell scripts, to see how each way of ending is reported.
    fn scripted(scripts: &[&str]) -> ProcessCluster {
        let addrs = free_addrs(scripts.len()).expect("free ports");
        let config =
            ClusterConfig::local(&addrs, ServerSettings::default(), NetSettings::default())
                .expect("a local cluster");
        let dir = std::env::temp_dir().join(format!(
            "phasedb-launch-test-{}-{}",
            std::process::id(),
            addrs[0].port()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let children = scripts
            .iter()
            .map(|s| {
                Command::new("sh")
                    .args(["-c", s])
                    .current_dir(&dir)
                    .stdin(Stdio::null())
                    .spawn()
                    .expect("sh")
            })
            .collect();
        let commands = scripts
            .iter()
            .map(|s| (PathBuf::from("sh"), vec!["-c".to_string(), s.to_string()]))
            .collect();
        ProcessCluster {
            config,
            killed: vec![false; scripts.len()],
            children,
            dir,
            commands,
        }
    }

    #[test]
    fn a_node_without_counters_says_why() {
        let mut cluster = scripted(&[
            "exit 0",
            "exit 3",
            "trap '' TERM; : > ready; exec sleep 30",
            "exit 0",
            "exit 0",
        ]);
        let counters = ServerStats {
            ctp_commits: 7,
            ..ServerStats::default()
        };
        std::fs::write(cluster.stats_path(0), counters.to_text()).expect("write counters");
        std::fs::write(cluster.stats_path(4), "not counters").expect("write counters");
        // SIGTERM must find the scripts ended, or (the third) ignoring it.
        for i in [0, 1, 3, 4] {
            cluster.children[i].wait().expect("script ends");
        }
        while !cluster.dir.join("ready").exists() {
            std::thread::sleep(Duration::from_millis(5));
        }
        let started = std::time::Instant::now();
        let stats = cluster.stop_with_stats(Duration::from_millis(300));
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(stats[0].as_ref().map(|s| s.ctp_commits), Ok(7));
        let why: Vec<&str> = stats[1..]
            .iter()
            .map(|s| s.as_ref().expect_err("no counters").as_str())
            .collect();
        assert!(why[0].contains("exited with exit status: 3"), "{why:?}");
        assert!(
            why[1].contains("did not exit within 300ms of SIGTERM and was killed"),
            "{why:?}"
        );
        assert!(why[2].starts_with("no counters in "), "{why:?}");
        assert!(why[3].starts_with("malformed counters in "), "{why:?}");
    }

    #[test]
    fn a_killed_node_is_not_reported_and_comes_back_on_restart() {
        let mut cluster = scripted(&["exec sleep 30", "exec sleep 30"]);
        assert_eq!(cluster.exited(), None);
        cluster.kill(1).expect("kill node 1");
        assert_eq!(cluster.killed(), 1);
        assert_eq!(cluster.exited(), None, "an asked death is not reported");
        assert!(
            cluster.kill(1).is_err(),
            "a dead node cannot be killed again"
        );
        assert!(
            cluster.restart(0).is_err(),
            "a live node cannot be restarted"
        );
        cluster.restart(1).expect("restart node 1");
        assert_eq!(cluster.killed(), 0);
        assert_eq!(cluster.exited(), None);
        // The restarted node is watched again: its unasked death is reported.
        // SAFETY: kill(2) on a child we spawned and have not reaped.
        unsafe {
            libc::kill(cluster.children[1].id() as libc::pid_t, libc::SIGKILL);
        }
        let started = std::time::Instant::now();
        let why = loop {
            if let Some(e) = cluster.exited_nodes().pop() {
                break e;
            }
            assert!(started.elapsed() < Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(5));
        };
        assert_eq!(why.0, 1);
        assert!(why.1.contains("signal: 9"), "{why:?}");
        let exits = cluster.stop_with_texts(Duration::from_millis(500));
        assert_eq!(exits.len(), 2);
    }
}
