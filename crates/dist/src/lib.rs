//! Distributed protocols of phasedb (layer 4, "dist"): Read Atomic Multi-Partition transactions and STAR.
//!
//! - [`server`]: the partition server of Algorithms 1–3 — multi-version store with lastCommit and
//!   prepared versions, PREPARE/COMMIT/GET, cooperative termination, faster commit detection and GC —
//!   plus the server halves of the baselines.
//! - [`client`]: one sans-I/O [`client::TxnClient`] per concurrent client, running GET_ALL/PUT_ALL for
//!   RAMP-F/S/H ([`ramp`]) or a baseline (NWNR, [`locking`] LWNR/LWSR/LWLR, [`epci`] E-PCI).
//! - [`pdur`]: P-DUR and DUR replicas (Pacheco et al.): partitions certifying delivered transactions.
//! - [`star`]: STAR's phase-switching nodes (Lu et al., VLDB 2019) over the single-node engine.
//! - [`node`]: a cluster member (server + proxy clients) over TCP; [`library`]: a blocking client;
//!   [`bench`](mod@bench): the closed-loop cluster benchmark; [`sim`]: actors and histories for simulator tests.
//!
//! Everything here is a state machine over [`phasedb_net::Transport`], so the same code runs over TCP
//! and under the deterministic simulator.

#![warn(missing_docs)]

pub mod bench;
pub mod bloom;
pub mod broadcast;
pub mod client;
pub mod epci;
pub mod expiring;
pub mod history;
pub mod host;
pub mod library;
pub mod locking;
pub mod msg;
pub mod node;
pub mod pdur;
pub mod ramp;
pub mod server;
pub mod sim;
pub mod star;
pub mod ts;
pub mod txn_check;
pub mod words;
pub mod write_set;

pub use msg::{Algorithm, Key, Msg, Outcome, ReadValue, Ts, TxnSpec, Value};
