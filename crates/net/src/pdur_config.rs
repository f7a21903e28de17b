//! The `[pdur]` table of the cluster file: every node is a P-DUR replica (Pacheco, Sciascia,
//! Pedone), holding the whole database in `partitions` logical partitions with one atomic
//! broadcast group per partition over all the nodes; DUR is `partitions = 1`.
//!
//! ```toml
//! [pdur]
//! partitions = 2                 # logical partitions of each replica (1: DUR)
//! workload = "micro"             # "micro" (types I, II, III) or "twitter"
//! micro_type = "I"               # micro: I (2 r, 2 w), II (32 r, 2 w), III (16 r, 16 w)
//! items = 420000                 # micro: items (4-byte keys and values)
//! users = 42000                  # twitter: users
//! cross_partition = 0.1          # micro: share of transactions touching 2 partitions
//! follow_cross = 0.5            # twitter: share of follows touching 2 partitions
//! clients_per_partition = 8      # closed-loop clients each replica runs per partition
//! local_clients = true           # false: no load inside the replicas, clients come over TCP
//! client_addrs = ["127.0.0.1:7100", "127.0.0.1:7101"]  # node i's client endpoint (optional)
//! warmup_ms = 1000               # load before counting
//! duration_ms = 5000             # load counted
//! tick_us = 1000                 # raft tick
//! batch_bytes = 65536            # a broadcast batch is proposed once it holds this much
//! snapshot_entries = 10000       # broadcast entries between two snapshots (state transfer)
//! snapshot_chunk_bytes = 1048576 # a snapshot larger than this travels in chunks of this size
//! rebroadcast_ms = 1200          # a request delivered by only some of its groups goes to the others after this
//! seed = 1
//! ```

use serde::{Deserialize, Serialize};

use crate::config::ConfigError;

/// The `[pdur]` table: what every replica of a P-DUR (or DUR) cluster loads and runs.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PdurTable {
    /// Logical partitions of each replica, one worker thread and one broadcast group each.
    pub partitions: u32,
    /// "micro" or "twitter".
    #[serde(default = "PdurTable::default_workload")]
    pub workload: String,
    /// The micro-benchmark's transaction type: "I", "II" or "III".
    #[serde(default = "PdurTable::default_micro_type")]
    pub micro_type: String,
    /// Items of the micro-benchmark.
    #[serde(default = "PdurTable::default_items")]
    pub items: u64,
    /// Users of the Twitter-like workload.
    #[serde(default = "PdurTable::default_users")]
    pub users: u64,
    /// Share of the micro-benchmark's transactions that touch two partitions (0 to 1).
    #[serde(default)]
    pub cross_partition: f64,
    /// Twitter: probability that a follow touches two partitions (the paper's 0.5).
    #[serde(default = "PdurTable::default_follow_cross")]
    pub follow_cross: f64,
    /// Closed-loop clients each replica runs per partition.
    #[serde(default = "PdurTable::default_clients")]
    pub clients_per_partition: u32,
    /// Whether each replica runs its own closed-loop clients (`false`: the load comes from clients
    /// over TCP, through [`PdurTable::client_addrs`]).
    #[serde(default = "PdurTable::default_local_clients")]
    pub local_clients: bool,
    /// Where node `i` serves clients over TCP (empty: no client endpoint).
    #[serde(default)]
    pub client_addrs: Vec<std::net::SocketAddr>,
    /// Milliseconds of load before transactions are counted.
    #[serde(default = "PdurTable::default_warmup_ms")]
    pub warmup_ms: u64,
    /// Milliseconds of counted load.
    #[serde(default = "PdurTable::default_duration_ms")]
    pub duration_ms: u64,
    /// Microseconds of one raft tick.
    #[serde(default = "PdurTable::default_tick_us")]
    pub tick_us: u64,
    /// Payload bytes at which a broadcast batch is proposed without waiting.
    #[serde(default = "PdurTable::default_batch_bytes")]
    pub batch_bytes: u64,
    /// Broadcast entries a group applies between two snapshots of its partition (the state a
    /// replica that fell behind or restarted receives, with the log after it).
    #[serde(default = "PdurTable::default_snapshot_entries")]
    pub snapshot_entries: u64,
    /// Bytes of one chunk of a snapshot sent to a replica that fell behind or rejoins: a larger
    /// snapshot travels as chunks of this size, installed once whole. At least 64 KiB (a
    /// snapshot has at most 65,536 chunks, so up to 4 GiB of image) and at most half a transport
    /// frame.
    #[serde(default = "PdurTable::default_snapshot_chunk_bytes")]
    pub snapshot_chunk_bytes: u64,
    /// Milliseconds a cross-partition request may stay delivered by only some of the groups it
    /// names before a replica proposes it to the others (its client's replica may have died
    /// between its proposals, leaving the partitions that delivered it waiting for votes). The
    /// default, twice the time after which a replica proposes its own undelivered requests
    /// again, lets a live client's replica do it first; a copy to a group that delivered it is
    /// ignored, so shorter is safe, only more traffic.
    #[serde(default = "PdurTable::default_rebroadcast_ms")]
    pub rebroadcast_ms: u64,
    /// Seed of the replicas' load generators (replica `i` mixes in `i`).
    #[serde(default = "PdurTable::default_seed")]
    pub seed: u64,
}

/// The smallest [`PdurTable::snapshot_chunk_bytes`] accepted: a snapshot travels in at most
/// 65,536 chunks, so this lets images up to 4 GiB through.
pub const MIN_SNAPSHOT_CHUNK_BYTES: u64 = 64 << 10;

/// The longest [`PdurTable::rebroadcast_ms`] accepted (ten minutes): a partial request blocks
/// its partitions' stable snapshots until it is finished.
pub const MAX_REBROADCAST_MS: u64 = 600_000;

impl PdurTable {
    fn default_workload() -> String {
        "micro".into()
    }
    fn default_micro_type() -> String {
        "I".into()
    }
    fn default_items() -> u64 {
        420_000
    }
    fn default_users() -> u64 {
        42_000
    }
    fn default_follow_cross() -> f64 {
        0.5
    }
    fn default_clients() -> u32 {
        8
    }
    fn default_local_clients() -> bool {
        true
    }
    fn default_warmup_ms() -> u64 {
        1000
    }
    fn default_duration_ms() -> u64 {
        5000
    }
    fn default_tick_us() -> u64 {
        1000
    }
    fn default_batch_bytes() -> u64 {
        64 << 10
    }
    fn default_snapshot_entries() -> u64 {
        10_000
    }
    fn default_snapshot_chunk_bytes() -> u64 {
        1 << 20
    }
    fn default_rebroadcast_ms() -> u64 {
        1200
    }
    fn default_seed() -> u64 {
        1
    }

    /// The micro-benchmark on `partitions` partitions with every other field at its default.
    pub fn new(partitions: u32) -> PdurTable {
        PdurTable {
            partitions,
            workload: Self::default_workload(),
            micro_type: Self::default_micro_type(),
            items: Self::default_items(),
            users: Self::default_users(),
            cross_partition: 0.0,
            follow_cross: Self::default_follow_cross(),
            clients_per_partition: Self::default_clients(),
            local_clients: Self::default_local_clients(),
            client_addrs: Vec::new(),
            warmup_ms: Self::default_warmup_ms(),
            duration_ms: Self::default_duration_ms(),
            tick_us: Self::default_tick_us(),
            batch_bytes: Self::default_batch_bytes(),
            snapshot_entries: Self::default_snapshot_entries(),
            snapshot_chunk_bytes: Self::default_snapshot_chunk_bytes(),
            rebroadcast_ms: Self::default_rebroadcast_ms(),
            seed: Self::default_seed(),
        }
    }

    /// Checks each field's range for a cluster of `nodes` replicas.
    pub fn validate(&self, nodes: u32) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(format!("[pdur] {m}")));
        if !(1..=128).contains(&self.partitions) {
            return bad(format!(
                "partitions must be 1..=128, not {}",
                self.partitions
            ));
        }
        if nodes > 255 {
            return bad(format!("at most 255 replicas, not {nodes}"));
        }
        if !matches!(self.workload.as_str(), "micro" | "twitter") {
            return bad(format!(
                "workload must be \"micro\" or \"twitter\", not {:?}",
                self.workload
            ));
        }
        if !matches!(self.micro_type.as_str(), "I" | "II" | "III") {
            return bad(format!(
                "micro_type must be \"I\", \"II\" or \"III\", not {:?}",
                self.micro_type
            ));
        }
        if self.items < 64 || self.items > 1 << 32 {
            return bad(format!("items must be 64..=2^32, not {}", self.items));
        }
        if self.users < 16 || self.users > 1 << 28 {
            return bad(format!("users must be 16..=2^28, not {}", self.users));
        }
        if !(0.0..=1.0).contains(&self.cross_partition) {
            return bad(format!(
                "cross_partition must be between 0 and 1, not {}",
                self.cross_partition
            ));
        }
        if !(0.0..=1.0).contains(&self.follow_cross) {
            return bad(format!(
                "follow_cross must be between 0 and 1, not {}",
                self.follow_cross
            ));
        }
        if !(1..=1024).contains(&self.clients_per_partition) {
            return bad(format!(
                "clients_per_partition must be 1..=1024, not {}",
                self.clients_per_partition
            ));
        }
        if !self.client_addrs.is_empty() && self.client_addrs.len() != nodes as usize {
            return bad(format!(
                "client_addrs names {} endpoints for {nodes} nodes",
                self.client_addrs.len()
            ));
        }
        if !self.local_clients && self.client_addrs.is_empty() {
            return bad(
                "local_clients = false needs client_addrs (the load comes over TCP)".into(),
            );
        }
        if self.duration_ms == 0 || self.duration_ms > 86_400_000 || self.warmup_ms > 86_400_000 {
            return bad("duration_ms must be 1..=86400000 and warmup_ms at most that".into());
        }
        if !(100..=100_000).contains(&self.tick_us) {
            return bad(format!(
                "tick_us must be 100..=100000, not {}",
                self.tick_us
            ));
        }
        if !(64..=16 << 20).contains(&self.batch_bytes) {
            return bad(format!(
                "batch_bytes must be 64..=16777216, not {}",
                self.batch_bytes
            ));
        }
        if self.snapshot_entries == 0 {
            return bad("snapshot_entries must be positive".into());
        }
        let chunks = MIN_SNAPSHOT_CHUNK_BYTES..=crate::wire::MAX_FRAME as u64 / 2;
        if !chunks.contains(&self.snapshot_chunk_bytes) {
            return bad(format!(
                "snapshot_chunk_bytes must be {}..={} (64 KiB to half a transport frame), not {}",
                chunks.start(),
                chunks.end(),
                self.snapshot_chunk_bytes
            ));
        }
        if !(1..=MAX_REBROADCAST_MS).contains(&self.rebroadcast_ms) {
            return bad(format!(
                "rebroadcast_ms must be 1..={MAX_REBROADCAST_MS} (milliseconds), not {}",
                self.rebroadcast_ms
            ));
        }
        Ok(())
    }
}
