//! History recording types and isolation checkers for phasedb.
//!
//! The engine records committed transactions as a [`History`]; tests then
//! call [`check_serializable`] on it, or export it with [`to_elle_edn`] for
//! Jepsen's Elle (and the adya crate, which reads the same format). A
//! workload that records what its reads returned keeps a
//! [`ListAppendHistory`], checked from those values alone.

#![warn(missing_docs)]

mod anomaly;
pub mod elle;
pub mod flatten;
mod graph;
pub mod history;
mod index;
pub mod list_append;
pub mod read_atomic;
pub mod serializability;

pub use anomaly::{Anomaly, Cycle, CycleEdge, EdgeKind};
pub use elle::{
    elle_key, to_elle_edn, to_elle_list_append_edn, to_elle_list_append_edn_within, with_observer,
};
pub use flatten::flatten;
pub use history::{
    ABSENT, FIRST_RESERVED_WORKER, History, Item, LOAD_WORKER, LOADED, MERGE_WORKER, MergeEvent,
    OBSERVER_WORKER, PHASE_WORKER, ReadEvent, SYNTHETIC_VERSIONS, SplitOpEvent, TxnEvent, Version,
    WriteEvent, WriteKind,
};
pub use list_append::ListAppendHistory;
pub use serializability::{CheckStats, check_serializable};
