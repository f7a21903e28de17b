//! STAR: asymmetric replication with phase switching (Lu, Yu, Cao, Madden; VLDB 2019), as a
//! cluster of sans-I/O [`phasedb_net::Node`]s that each embed the single-node engine
//! ([`phasedb_txn::Database`] under [`phasedb_txn::Star`]) and run any workload that implements
//! [`phasedb_txn::Procedures`].
//!
//! - [`layout`]: full and partial replicas, each partition's primary and secondaries, the
//!   coordinator (§3, §5.1, Figure 2).
//! - [`msg`]: phase begin, the replication fence, the replication stream, requests and replies,
//!   queries.
//! - [`node`]: [`StarNode`], one cluster member; [`open_database`] builds its engine.
//! - `execute`: transactions in slices on the node's thread — partitioned phase (§4.1) on each
//!   partition's primary, single-master phase (§4.2) on the coordinator.
//! - [`phase`]: when phases end and how the iteration is split between them (§4.3).
//! - `fence`: the replication fence between phases (§4.3, Figure 4).
//! - `failover`: heartbeats, failed nodes, taking back an interrupted phase's writes and
//!   re-mastering (§7.1, §7.2).
//! - `fallback`: with no full replica left, the lowest live node ends the interrupted phase and
//!   switches the cluster to Dist-OCC over the partial replicas, each node running the
//!   baseline's [`baselines::DistNode`] inside its [`StarNode`] (§7.2).
//! - `recover`: a restarted node rejoins, copies its partitions from live replicas beside the
//!   replication stream, and goes back to being a secondary (§7.2).
//! - [`replicate`]: operation and value replication streams, applied in stream order (§5.2).
//! - `requests`: routing, queues, and results held until their phase ends (§4, §7.1).
//! - `read_committed`: read-only requests a client sends to any replica, run there at once at
//!   read committed (§4.3).
//! - [`stats`]: counters a benchmark gathers with a [`msg::Query`].
//! - [`serve`](mod@serve): running a node over TCP from the cluster file's `[star]` table.
//! - [`history_log`]: a node's committed history appended to a file as it goes (so a killed
//!   node's survives), and every node's file read back into one history for the checkers.
//! - [`client`]: a blocking client that sends requests and queries to a node over TCP.
//! - [`baselines`]: PB-OCC, Dist-OCC and Dist-S2PL on these nodes (§8.1.2).
//! - [`bench`](mod@bench): the cluster benchmark — the nodes' own load, counters polled every
//!   100 ms, then quiescing and comparing every partition's replicas.
//!
//! What it guarantees: transactions are serializable (§4.4) — one phase at a time, single-partition
//! transactions one after another on their partition's primary, cross-partition ones under OCC on
//! the coordinator, and a fence between phases after which every replica of every partition holds
//! every write of the phase; a client hears of a transaction only after that fence. What it
//! assumes: fail-stop failures (detected by heartbeats; a failed coordinator is replaced by the
//! next live full replica, see `failover`, or with none left the cluster falls back to Dist-OCC,
//! see `fallback`; a restarted node recovers, see `recover`) and a network that loses nothing
//! between live nodes. What it does not do yet: worker threads per node (the layout records
//! `workers`, but a node runs its transactions inline on its event-loop thread); detecting
//! failures under the fall-back, and going back from it to STAR's phases once a full replica
//! recovers.

pub mod baselines;
pub mod bench;
pub mod client;
pub(crate) mod control;
mod execute;
mod failover;
mod fallback;
mod fence;
pub mod history_log;
pub mod layout;
pub mod msg;
pub mod node;
pub mod phase;
mod read_committed;
mod recover;
pub mod replicate;
pub(crate) mod requests;
mod sampler;
pub mod serve;
pub mod stats;

pub use layout::{Layout, LayoutError, spread_placement};
pub use msg::{Answer, Outcome, PartitionDigest, Phase, PhaseKind, Query, RowImage, StarMsg};
pub use node::{StarNode, StarSettings, open_database, open_empty_database};
pub use recover::CHUNK_BYTES;
pub use stats::{FallBackStats, RecoveryStats, StarStats};
