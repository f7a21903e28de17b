//! The cluster substrate of phasedb (layer 3, "net").
//!
//! Distributed protocols are written *sans-I/O*: a [`Node`] is a state machine that takes messages and
//! periodic ticks and sends messages through a [`Transport`]. Two runtimes drive the same nodes:
//! [`tcp`] (tokio, length-prefixed frames, batching, optional injected delay) for real clusters, and
//! [`sim`] (virtual time, seeded delay, reordering, drops, partitions, crashes) for deterministic tests.
//! [`config`] reads and validates the cluster file that `phasedb node` and the client library share.

#![warn(missing_docs)]

pub mod config;
mod node;
pub mod pdur_config;
pub mod sim;
pub mod tcp;
pub mod wire;

pub use config::{
    ClusterConfig, ConfigError, NODE_PLACEHOLDER, NodeConfig, ReplicationSync, StarAlgorithm,
    StarConfig, durability_refusal, partition_of,
};
pub use node::{Addr, CLIENT_ADDR_BASE, Node, Transport, is_client_addr};
pub use pdur_config::PdurTable;
