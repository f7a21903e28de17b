//! The cluster file: nodes, their addresses, the placement of hash partitions and server settings.
//!
//! ```toml
//! partitions = 4                 # hash partitions (default: one per node)
//! [[nodes]]
//! id = 0
//! addr = "127.0.0.1:7100"
//! partitions = [0, 2]            # optional; all nodes list them or none do (then round robin)
//! [[nodes]]
//! id = 1
//! addr = "127.0.0.1:7101"
//! partitions = [1, 3]
//! [server]
//! gc_window_ms = 5000            # overwritten versions live this long
//! ctp_timeout_ms = 1000          # a prepared write waits this long for COMMIT before CTP runs
//! lock_lease_ms = 5000          # a lock baseline's lock is taken back after this long
//! tick_ms = 5
//! [net]
//! delay_us = 0                   # injected one-way delay per message
//! poll_us = 50                   # an idle event loop polls this long before it sleeps
//! [star]                         # optional: the nodes run STAR (phasedb-dist's star module)
//! partitions = 8                 # STAR's own partitions (the workload's), apart from RAMP's above
//! full_replicas = 1              # nodes 0..full_replicas hold every partition; node 0 coordinates
//! replicas_per_partition = 2     # copies of each partition, its primary included
//! workers = 1                    # worker threads per node (recorded; nodes run inline for now)
//! iteration_ms = 10              # one partitioned phase and one single-master phase
//! hybrid_replication = true      # operation replication in the partitioned phase
//! cross_partition = 0.1          # share of cross-partition transactions the nodes generate
//! placement = [[1, 0], [2, 0]]   # optional: per partition, its primary then its secondaries
//! workload = "ycsb"              # what the nodes run: "ycsb" or "tpcc" (phasedb node needs it)
//! workload_args = ["--rows", "200000"]   # the workload's flags, as phasedb bench takes them
//! seed = 1                       # seed of the nodes' own load generators
//! ```
//!
//! [`ClusterConfig::from_toml`] refuses inconsistent files with a [`ConfigError`] that names the
//! problem, so a node never starts on a bad configuration.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{Addr, CLIENT_ADDR_BASE};

/// Why a cluster file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown or mistyped fields.
    #[error("invalid cluster file: {0}")]
    Syntax(String),
    /// The file parses but describes an impossible cluster.
    #[error("inconsistent cluster file: {0}")]
    Invalid(String),
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    partitions: Option<u32>,
    #[serde(default)]
    nodes: Vec<RawNode>,
    #[serde(default)]
    server: ServerSettings,
    #[serde(default)]
    net: NetSettings,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    star: Option<StarConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pdur: Option<crate::PdurTable>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data_dir: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
struct RawNode {
    id: u32,
    addr: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    partitions: Option<Vec<u32>>,
}

/// Settings of partition servers.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSettings {
    /// Milliseconds an overwritten version stays readable by second-round GETs before GC.
    pub gc_window_ms: u64,
    /// Milliseconds a prepared write waits for its COMMIT before the cooperative termination protocol.
    pub ctp_timeout_ms: u64,
    /// Milliseconds a lock of the lock baselines may be held before it is taken back (its holder
    /// is presumed crashed; released owners are remembered this long to ignore late requests).
    pub lock_lease_ms: u64,
    /// Milliseconds between ticks (timeouts, GC).
    pub tick_ms: u64,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            gc_window_ms: 5_000,
            ctp_timeout_ms: 1_000,
            lock_lease_ms: 5_000,
            tick_ms: 5,
        }
    }
}

/// Settings of the TCP transport.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct NetSettings {
    /// Microseconds of one-way delay injected into every message (0 = none).
    pub delay_us: u64,
    /// Microseconds an event loop that ran out of input keeps polling for more before it sleeps
    /// (0 = sleep at once). Waking a sleeping core costs tens of microseconds on a virtual
    /// machine, and under load that wait left a tenth of the cores idle.
    pub poll_us: u64,
}

impl Default for NetSettings {
    fn default() -> Self {
        Self {
            delay_us: 0,
            poll_us: 50,
        }
    }
}

/// The protocol a `[star]` cluster runs: STAR, or one of the baselines the paper runs in the same
/// framework (§8.1.2) on the same nodes, engine, transport and workloads.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum StarAlgorithm {
    /// STAR: phase switching over asymmetric replication.
    #[default]
    Star,
    /// PB-OCC: a primary (node 0) runs every transaction with Silo's OCC and replicates the
    /// values it writes to the other holders (its backup).
    PbOcc,
    /// Dist-OCC: each partition's primary runs its transactions; remote reads, then lock, validate
    /// and commit with two-phase commit, NO_WAIT.
    DistOcc,
    /// Dist-S2PL: like Dist-OCC, with remote rows locked (NO_WAIT) as they are read.
    DistS2pl,
    /// Calvin (STAR §8.3): a sequencer orders 10 ms batches that every replica group runs
    /// deterministically under a lock manager; `calvin_groups` splits the nodes into groups.
    Calvin,
}

impl StarAlgorithm {
    /// The name on the command line and in cluster files.
    pub fn name(self) -> &'static str {
        match self {
            StarAlgorithm::Star => "star",
            StarAlgorithm::PbOcc => "pb-occ",
            StarAlgorithm::DistOcc => "dist-occ",
            StarAlgorithm::DistS2pl => "dist-s2pl",
            StarAlgorithm::Calvin => "calvin",
        }
    }
}

/// How the baselines replicate (STAR §8.1.3); STAR itself replicates asynchronously and releases
/// results at its replication fences.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ReplicationSync {
    /// Writes replicate asynchronously; results are released at a group commit every
    /// `group_commit_ms`, once every write before it is on every replica.
    #[default]
    Async,
    /// A transaction keeps its write locks until the replicas acknowledged its writes; its result
    /// is released then.
    Sync,
}

impl ReplicationSync {
    /// The name on the command line and in cluster files.
    pub fn name(self) -> &'static str {
        match self {
            ReplicationSync::Async => "async",
            ReplicationSync::Sync => "sync",
        }
    }
}

/// The `[star]` table: a STAR deployment (Lu et al., VLDB 2019) over the cluster's nodes. This file
/// checks each field's range and that placement names existing nodes; the rules of a STAR layout
/// (who holds what, where primaries go) are checked by `phasedb_dist::star::Layout`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StarConfig {
    /// Partitions of the workload's data.
    pub partitions: u32,
    /// Nodes `0..full_replicas` hold a full copy of the database (§3); node 0 is the coordinator.
    #[serde(default = "StarConfig::default_full_replicas")]
    pub full_replicas: u32,
    /// Copies of each partition, its primary included.
    #[serde(default = "StarConfig::default_replicas")]
    pub replicas_per_partition: u32,
    /// Worker threads per node (recorded; the nodes run their transactions inline for now).
    #[serde(default = "StarConfig::default_workers")]
    pub workers: u32,
    /// Milliseconds of one iteration: a partitioned phase and a single-master phase (§4.3);
    /// fractions are allowed, as §8.4 sweeps iterations from 1.5 ms.
    #[serde(default = "StarConfig::default_iteration_ms")]
    pub iteration_ms: f64,
    /// Operation replication in the partitioned phase, value replication in the single-master
    /// phase (§5.2); false replicates values in both.
    #[serde(default = "StarConfig::default_hybrid")]
    pub hybrid_replication: bool,
    /// Share of cross-partition transactions among those the nodes generate (0 to 1).
    #[serde(default)]
    pub cross_partition: f64,
    /// Explicit placement: for each partition, its primary node then its secondaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Vec<Vec<u32>>>,
    /// The workload every node runs (`phasedb node` knows "ycsb" and "tpcc"); the file is the one
    /// place the nodes learn it from, so they all load and run the same data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// The workload's flags, as `phasedb bench <workload>` takes them (e.g. `["--rows", "1000"]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workload_args: Vec<String>,
    /// Seed of the load generators of the nodes (node `i` seeds its own from it and `i`).
    #[serde(default = "StarConfig::default_seed")]
    pub seed: u64,
    /// The protocol: "star" (default) or a baseline ("pb-occ").
    #[serde(default)]
    pub algorithm: StarAlgorithm,
    /// Baselines only: "async" (default) or "sync" replication.
    #[serde(default)]
    pub replication: ReplicationSync,
    /// Baselines only: transactions a node keeps in flight, each on a worker of its own, while
    /// they wait for messages (synchronous replication's acknowledgements).
    #[serde(default = "StarConfig::default_virtual_workers")]
    pub virtual_workers: u32,
    /// Baselines only: milliseconds between group commits of asynchronous replication (§8.1.3).
    #[serde(default = "StarConfig::default_group_commit_ms")]
    pub group_commit_ms: f64,
    /// Calvin only: the replica groups' sizes in nodes, in node order (STAR §8.3's Calvin-1:3 is
    /// `[1, 3]`, Calvin-2:2 `[2, 2]`, Calvin-4 `[4]`); they add up to the cluster's nodes. Default:
    /// one group of every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calvin_groups: Option<Vec<u32>>,
    /// STAR: milliseconds between a node's heartbeats (§7.1 failure detection).
    #[serde(default = "StarConfig::default_heartbeat_ms")]
    pub heartbeat_ms: f64,
    /// STAR: a node heard from for this many milliseconds is declared failed (fail-stop, §7.1).
    #[serde(default = "StarConfig::default_failure_timeout_ms")]
    pub failure_timeout_ms: f64,
    /// STAR and its baselines: where each node appends its committed history as it goes (JSON
    /// lines, `phasedb_dist::star::history_log`), `{node}` standing for the node's id; none by
    /// default (recording costs memory and I/O). A STAR node writes a phase's transactions when
    /// the phase's replication fence starts, so a node killed later left them behind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<String>,
}

impl StarConfig {
    fn default_full_replicas() -> u32 {
        1
    }
    fn default_replicas() -> u32 {
        2
    }
    fn default_workers() -> u32 {
        1
    }
    fn default_iteration_ms() -> f64 {
        10.0
    }
    fn default_hybrid() -> bool {
        true
    }
    fn default_seed() -> u64 {
        1
    }
    fn default_virtual_workers() -> u32 {
        16
    }
    fn default_group_commit_ms() -> f64 {
        10.0
    }
    fn default_heartbeat_ms() -> f64 {
        50.0
    }
    fn default_failure_timeout_ms() -> f64 {
        1000.0
    }

    /// Settings for `partitions` partitions with every other field at its default.
    pub fn new(partitions: u32) -> StarConfig {
        StarConfig {
            partitions,
            full_replicas: Self::default_full_replicas(),
            replicas_per_partition: Self::default_replicas(),
            workers: Self::default_workers(),
            iteration_ms: Self::default_iteration_ms(),
            hybrid_replication: Self::default_hybrid(),
            cross_partition: 0.0,
            placement: None,
            workload: None,
            workload_args: Vec::new(),
            seed: Self::default_seed(),
            algorithm: StarAlgorithm::Star,
            replication: ReplicationSync::Async,
            virtual_workers: Self::default_virtual_workers(),
            group_commit_ms: Self::default_group_commit_ms(),
            calvin_groups: None,
            heartbeat_ms: Self::default_heartbeat_ms(),
            failure_timeout_ms: Self::default_failure_timeout_ms(),
            history: None,
        }
    }

    /// The file node `id` appends its history to, if the table has a `history`.
    pub fn history_of(&self, id: Addr) -> Option<std::path::PathBuf> {
        self.history
            .as_ref()
            .map(|h| h.replace(NODE_PLACEHOLDER, &id.to_string()).into())
    }

    /// The iteration time.
    pub fn iteration(&self) -> Duration {
        Duration::from_secs_f64(self.iteration_ms / 1e3)
    }

    /// Checks each field's range against a cluster of `nodes` nodes (loading a cluster file does).
    pub fn validate(&self, nodes: u32) -> Result<(), ConfigError> {
        if !(self.heartbeat_ms > 0.0 && self.failure_timeout_ms > self.heartbeat_ms) {
            return Err(invalid(format!(
                "[star] heartbeat_ms ({}) must be above 0 and below failure_timeout_ms ({})",
                self.heartbeat_ms, self.failure_timeout_ms
            )));
        }
        if self.partitions == 0 || self.partitions > 1 << 16 {
            return Err(invalid(format!(
                "[star] partitions must be 1..=65536, not {}",
                self.partitions
            )));
        }
        if self.full_replicas == 0 {
            return Err(invalid(
                "[star] full_replicas must be at least 1: the single-master phase runs on a node with a full copy",
            ));
        }
        if self.full_replicas > nodes {
            return Err(invalid(format!(
                "[star] full_replicas = {} but the cluster has {nodes} nodes",
                self.full_replicas
            )));
        }
        if self.replicas_per_partition == 0 || self.replicas_per_partition > nodes {
            return Err(invalid(format!(
                "[star] replicas_per_partition must be 1..={nodes} (the number of nodes), not {}",
                self.replicas_per_partition
            )));
        }
        if self.workers == 0 || self.workers > 1024 {
            return Err(invalid(format!(
                "[star] workers must be 1..=1024, not {}",
                self.workers
            )));
        }
        if !(0.1..=60_000.0).contains(&self.iteration_ms) {
            return Err(invalid(format!(
                "[star] iteration_ms must be 0.1..=60000, not {}",
                self.iteration_ms
            )));
        }
        if self.virtual_workers == 0 || self.virtual_workers > 1024 {
            return Err(invalid(format!(
                "[star] virtual_workers must be 1..=1024, not {}",
                self.virtual_workers
            )));
        }
        if !(0.1..=60_000.0).contains(&self.group_commit_ms) {
            return Err(invalid(format!(
                "[star] group_commit_ms must be 0.1..=60000, not {}",
                self.group_commit_ms
            )));
        }
        if self.algorithm == StarAlgorithm::Star && self.replication == ReplicationSync::Sync {
            return Err(invalid(
                "[star] replication = \"sync\" is for the baselines: STAR replicates asynchronously and releases results at its replication fences",
            ));
        }
        if let Some(groups) = &self.calvin_groups {
            if self.algorithm != StarAlgorithm::Calvin {
                return Err(invalid(
                    "[star] calvin_groups applies to algorithm = \"calvin\"",
                ));
            }
            if groups.contains(&0) || groups.iter().map(|&g| g as u64).sum::<u64>() != nodes as u64
            {
                return Err(invalid(format!(
                    "[star] calvin_groups {groups:?} must be positive sizes adding up to the {nodes} nodes"
                )));
            }
        }
        if let Some(history) = &self.history {
            if history.trim().is_empty() {
                return Err(invalid("[star] history is empty"));
            }
            if nodes > 1 && !history.contains(NODE_PLACEHOLDER) {
                return Err(invalid(format!(
                    "[star] history {history:?} must contain {NODE_PLACEHOLDER} with more than one \
                     node: two nodes must never append to one file"
                )));
            }
            if self.algorithm == StarAlgorithm::Calvin {
                return Err(invalid(
                    "[star] history is recorded by STAR's nodes and its baselines', not Calvin's",
                ));
            }
        }
        if !(0.0..=1.0).contains(&self.cross_partition) {
            return Err(invalid(format!(
                "[star] cross_partition must be between 0 and 1, not {}",
                self.cross_partition
            )));
        }
        if let Some(placement) = &self.placement {
            if placement.len() != self.partitions as usize {
                return Err(invalid(format!(
                    "[star] placement lists {} partitions, but partitions = {}",
                    placement.len(),
                    self.partitions
                )));
            }
            for (p, nodes_of) in placement.iter().enumerate() {
                if let Some(&n) = nodes_of.iter().find(|&&n| n >= nodes) {
                    return Err(invalid(format!(
                        "[star] placement of partition {p} names node {n}, but node ids are 0..{}",
                        nodes - 1
                    )));
                }
            }
        }
        Ok(())
    }
}

/// One cluster member.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeConfig {
    /// The node's id, also its [`Addr`].
    pub id: Addr,
    /// Where it listens.
    pub addr: SocketAddr,
    /// The hash partitions it serves.
    pub partitions: Vec<u32>,
}

/// A validated cluster description.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    /// The members, indexed by id.
    pub nodes: Vec<NodeConfig>,
    /// Number of hash partitions.
    pub partitions: u32,
    /// The node serving each partition.
    pub placement: Vec<Addr>,
    /// Partition server settings.
    pub server: ServerSettings,
    /// Transport settings.
    pub net: NetSettings,
    /// The STAR deployment, if the file has a `[star]` table.
    pub star: Option<StarConfig>,
    /// The P-DUR deployment, if the file has a `[pdur]` table (`crate::pdur_config`).
    pub pdur: Option<crate::PdurTable>,
    /// Where each node logs and checkpoints (issue 34), `{node}` standing for the node's id; only
    /// for an algorithm whose nodes commit through the engine's logged commit path (see
    /// [`durability_refusal`]).
    pub data_dir: Option<String>,
}

/// The placeholder of a node's id in `data_dir`.
pub const NODE_PLACEHOLDER: &str = "{node}";

/// Why the nodes of a cluster with this layout cannot log to a `data_dir`, naming the algorithm;
/// `None` if they can. A node is durable only through the engine's logged commit path (SiloR
/// logging, `phasedb_txn::Durability`): a node whose commits bypass it would log nothing, or
/// recover a state its cluster cannot take back, so the file is refused before anything starts.
pub fn durability_refusal(star: Option<&StarConfig>, pdur: bool) -> Option<String> {
    let why = match (star.map(|s| s.algorithm), pdur) {
        (_, true) => {
            "P-DUR: each replica's partitions are multi-version stores of its own, filled by \
             certification of broadcast requests, not engine transactions; nothing there goes \
             through the engine's logged commit path"
        }
        (None, false) => {
            "RAMP: partition servers keep a multi-version store of their own, not the engine's, \
             so nothing they commit goes through the engine's logged commit path"
        }
        (Some(StarAlgorithm::Calvin), false) => {
            "calvin: a node commits through the engine's logged commit path, but with no epochs (epoch_interval 0, \
             which logging needs), and Calvin's durability is the sequencer's input log \
             replayed deterministically: each node's own log would recover it to a different \
             epoch than its replicas, and a Calvin node cannot rejoin"
        }
        (Some(a), false) => {
            return Some(format!(
                "{}: a node runs its phases with no epochs (epoch_interval 0) and installs the \
                 replication records and remote writes it receives outside the engine's logged \
                 commit path, so its log would miss writes",
                a.name()
            ));
        }
    };
    Some(why.to_string())
}

fn validate_data_dir(
    dir: &str,
    nodes: usize,
    star: Option<&StarConfig>,
    pdur: bool,
) -> Result<(), ConfigError> {
    if dir.trim().is_empty() {
        return Err(invalid("data_dir is empty"));
    }
    if nodes > 1 && !dir.contains(NODE_PLACEHOLDER) {
        return Err(invalid(format!(
            "data_dir {dir:?} must contain {NODE_PLACEHOLDER} with more than one node: two \
             nodes must never share a directory"
        )));
    }
    if let Some(why) = durability_refusal(star, pdur) {
        return Err(invalid(format!(
            "data_dir is not supported for this cluster: {why}"
        )));
    }
    Ok(())
}

/// The hash partition of `key` among `partitions` (a fixed mix, identical in every process).
pub fn partition_of(key: u64, partitions: u32) -> u32 {
    let mut z = key.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z % partitions as u64) as u32
}

fn invalid(msg: impl Into<String>) -> ConfigError {
    ConfigError::Invalid(msg.into())
}

impl ClusterConfig {
    /// Reads and validates a cluster file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_toml(&text)
    }

    /// Parses and validates a cluster description.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let raw: RawConfig =
            toml::from_str(text).map_err(|e| ConfigError::Syntax(e.to_string()))?;
        Self::validate(raw)
    }

    /// A cluster of `addrs.len()` nodes with one partition each, as the bench driver starts.
    pub fn local(
        addrs: &[SocketAddr],
        server: ServerSettings,
        net: NetSettings,
    ) -> Result<Self, ConfigError> {
        let raw = RawConfig {
            partitions: None,
            nodes: addrs
                .iter()
                .enumerate()
                .map(|(i, a)| RawNode {
                    id: i as u32,
                    addr: a.to_string(),
                    partitions: None,
                })
                .collect(),
            server,
            net,
            star: None,
            pdur: None,
            data_dir: None,
        };
        Self::validate(raw)
    }

    /// The configuration as a TOML file that [`ClusterConfig::from_toml`] reads back.
    pub fn to_toml(&self) -> String {
        let raw = RawConfig {
            partitions: Some(self.partitions),
            nodes: self
                .nodes
                .iter()
                .map(|n| RawNode {
                    id: n.id,
                    addr: n.addr.to_string(),
                    partitions: Some(n.partitions.clone()),
                })
                .collect(),
            server: self.server,
            net: self.net,
            star: self.star.clone(),
            pdur: self.pdur.clone(),
            data_dir: self.data_dir.clone(),
        };
        toml::to_string(&raw).expect("a validated configuration always serializes")
    }

    fn validate(raw: RawConfig) -> Result<Self, ConfigError> {
        let n = raw.nodes.len();
        if n == 0 {
            return Err(invalid("no [[nodes]]: a cluster needs at least one node"));
        }
        if n as u64 >= CLIENT_ADDR_BASE as u64 {
            return Err(invalid(format!(
                "{n} nodes are more than {CLIENT_ADDR_BASE}"
            )));
        }
        let partitions = raw.partitions.unwrap_or(n as u32);
        if partitions == 0 {
            return Err(invalid("partitions must be at least 1"));
        }
        if partitions > 1 << 16 {
            return Err(invalid(format!(
                "{partitions} partitions are more than 65536"
            )));
        }
        let ids: BTreeSet<u32> = raw.nodes.iter().map(|x| x.id).collect();
        if ids.len() != n {
            return Err(invalid("two nodes share an id"));
        }
        if ids.iter().copied().ne(0..n as u32) {
            return Err(invalid(format!(
                "node ids must be 0..{} with none missing, found {ids:?}",
                n - 1
            )));
        }
        let mut addrs = BTreeSet::new();
        let mut nodes: Vec<NodeConfig> = Vec::with_capacity(n);
        for rn in &raw.nodes {
            let addr: SocketAddr = rn.addr.parse().map_err(|e| {
                invalid(format!(
                    "node {}: address {:?} is not ip:port ({e})",
                    rn.id, rn.addr
                ))
            })?;
            if addr.port() == 0 {
                return Err(invalid(format!(
                    "node {}: port 0 is not a fixed address",
                    rn.id
                )));
            }
            if !addrs.insert(addr) {
                return Err(invalid(format!(
                    "node {}: address {addr} is used by another node",
                    rn.id
                )));
            }
            nodes.push(NodeConfig {
                id: rn.id,
                addr,
                partitions: Vec::new(),
            });
        }
        nodes.sort_by_key(|x| x.id);
        let explicit = raw.nodes.iter().filter(|x| x.partitions.is_some()).count();
        let mut placement = vec![u32::MAX; partitions as usize];
        if explicit == 0 {
            for p in 0..partitions {
                let node = p % n as u32;
                placement[p as usize] = node;
                nodes[node as usize].partitions.push(p);
            }
        } else if explicit != n {
            return Err(invalid(
                "some nodes list partitions and others do not: list them for all or none",
            ));
        } else {
            for rn in &raw.nodes {
                for &p in rn.partitions.as_deref().unwrap_or_default() {
                    if p >= partitions {
                        return Err(invalid(format!(
                            "node {} lists partition {p}, but there are only {partitions} (0..{})",
                            rn.id,
                            partitions - 1
                        )));
                    }
                    if placement[p as usize] != u32::MAX {
                        return Err(invalid(format!(
                            "partition {p} is placed on both node {} and node {}",
                            placement[p as usize], rn.id
                        )));
                    }
                    placement[p as usize] = rn.id;
                    nodes[rn.id as usize].partitions.push(p);
                }
            }
            if let Some(p) = placement.iter().position(|&x| x == u32::MAX) {
                return Err(invalid(format!("partition {p} is not placed on any node")));
            }
        }
        let s = raw.server;
        if s.gc_window_ms == 0 || s.ctp_timeout_ms == 0 || s.lock_lease_ms == 0 || s.tick_ms == 0 {
            return Err(invalid(
                "[server] gc_window_ms, ctp_timeout_ms, lock_lease_ms and tick_ms must be positive",
            ));
        }
        if s.tick_ms > s.ctp_timeout_ms.min(s.gc_window_ms).min(s.lock_lease_ms) {
            return Err(invalid(
                "[server] tick_ms must not exceed ctp_timeout_ms, gc_window_ms or lock_lease_ms",
            ));
        }
        if raw.net.delay_us > 10_000_000 {
            return Err(invalid("[net] delay_us must be at most 10 s"));
        }
        if raw.net.poll_us > 10_000 {
            return Err(invalid("[net] poll_us must be at most 10 ms"));
        }
        if let Some(star) = &raw.star {
            star.validate(n as u32)?;
        }
        if let Some(pdur) = &raw.pdur {
            pdur.validate(n as u32)?;
        }
        if let Some(dir) = &raw.data_dir {
            validate_data_dir(dir, n, raw.star.as_ref(), raw.pdur.is_some())?;
        }
        Ok(ClusterConfig {
            nodes,
            partitions,
            placement,
            server: raw.server,
            net: raw.net,
            star: raw.star,
            pdur: raw.pdur,
            data_dir: raw.data_dir,
        })
    }

    /// The node that serves `key`.
    pub fn node_of_key(&self, key: u64) -> Addr {
        self.placement[partition_of(key, self.partitions) as usize]
    }

    /// The data directory of node `id`, if the file has a `data_dir`.
    pub fn data_dir_of(&self, id: Addr) -> Option<std::path::PathBuf> {
        self.data_dir
            .as_ref()
            .map(|d| d.replace(NODE_PLACEHOLDER, &id.to_string()).into())
    }

    /// The member with id `id`.
    pub fn node(&self, id: Addr) -> Option<&NodeConfig> {
        self.nodes.get(id as usize)
    }

    /// Every member's address by id, as the TCP runtime dials them.
    pub fn peer_addrs(&self) -> Vec<(Addr, SocketAddr)> {
        self.nodes.iter().map(|n| (n.id, n.addr)).collect()
    }

    /// The injected one-way delay.
    pub fn delay(&self) -> Duration {
        Duration::from_micros(self.net.delay_us)
    }

    /// How long an idle event loop polls before it sleeps.
    pub fn poll(&self) -> Duration {
        Duration::from_micros(self.net.poll_us)
    }
}
