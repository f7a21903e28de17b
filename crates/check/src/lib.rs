//! History recording types and isolation checkers for phasedb.
//!
//! The engine records committed transactions as a [`History`]; tests then
//! call [`check_serializable`] on it, or export it with [`to_elle_edn`] for
//! Jepsen's Elle (and the adya crate, which reads the same format).

#![warn(missing_docs)]

mod anomaly;
pub mod elle;
mod graph;
pub mod history;
mod index;
pub mod read_atomic;
pub mod serializability;

pub use anomaly::{Anomaly, Cycle, CycleEdge, EdgeKind};
pub use elle::{elle_key, to_elle_edn, to_elle_list_append_edn, with_observer};
pub use history::{
    History, Item, MergeEvent, ReadEvent, SplitOpEvent, TxnEvent, Version, WriteEvent, WriteKind,
};
pub use serializability::{CheckStats, check_serializable};
