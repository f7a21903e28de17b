//! Distributed protocols of phasedb (layer 4, "dist"), one folder per paper, each a set of sans-I/O
//! state machines over [`phasedb_net::Transport`] (the same code runs over TCP and under the
//! deterministic simulator):
//!
//! - [`ramp`]: Read Atomic Multi-Partition transactions (Bailis et al., SIGMOD 2014) — partition
//!   servers, clients, the lock and E-PCI baselines, the cluster benchmark.
//! - [`star`]: STAR's phase-switching nodes (Lu et al., VLDB 2019) over the single-node engine, and
//!   in [`star::baselines`] the baselines STAR is measured against in its framework (PB-OCC,
//!   Dist-OCC, Dist-S2PL).
//! - [`calvin`]: Calvin's sequencer, deterministic lock manager and replica groups (Thomson et
//!   al., SIGMOD 2012), as STAR's paper compares against it (§8.3).
//! - [`pdur`]: P-DUR and DUR replicas (Pacheco et al.): partitions certifying delivered transactions.
//! - [`broadcast`]: atomic broadcast on raft-rs, one independent group per logical partition (P-DUR's
//!   termination).
//! - [`host`]: how node processes sit on their machine (shared by every paper's nodes).

#![warn(missing_docs)]

pub mod broadcast;
pub mod calvin;
pub mod host;
pub mod pdur;
pub mod ramp;
pub mod star;

pub use ramp::msg::{Algorithm, Key, Msg, Outcome, ReadValue, Ts, TxnSpec, Value};
