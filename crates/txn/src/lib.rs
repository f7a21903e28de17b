//! The single-node transaction engine of phasedb.
//!
//! Stored procedures are closures over a [`Tx`] handle, run by a [`Worker`] (one per thread) to
//! completion and retried on conflict. A [`Protocol`] decides what each column group's metadata is and
//! how reads and commits work; the engine is generic over it. Protocols here: [`NoCc`] (no concurrency
//! control, the overhead baseline) and [`Occ`] (Silo's optimistic concurrency control with per-group
//! TIDs, epochs and phantom protection).

mod activity;
mod adaptive;
mod atomic;
mod commit;
mod commute;
mod database;
mod doppel;
pub mod durability;
mod epoch;
mod error;
mod footprint;
pub mod granularity;
mod nocc;
mod occ;
pub mod phase;
mod prepared;
mod procedures;
mod protocol;
mod record;
mod splittable;
pub mod star;
mod state;
mod stats;
mod swisstm;
mod tictoc;
pub mod tid;
mod twopl;
mod tx;
mod worker;

pub use adaptive::{Adaptive, AdaptiveMeta};
pub use atomic::Atomic;
pub use database::{Config, Database, MAX_WORKERS};
pub use doppel::{Doppel, DoppelShared, PhaseStats, SplitLabel, SplitPolicy};
pub use durability::{
    CheckpointReport, CheckpointStats, Durability, DurabilityError, FsyncPolicy, Recovery,
};
pub use error::{Conflict, TxError, TxResult};
pub use footprint::{FOOTPRINT_ROWS, Footprint, RECORDS_AHEAD, SLOTS_AHEAD};
pub use granularity::{GranularityConfig, GroupChange, RegroupError};
pub use nocc::NoCc;
pub use occ::Occ;
pub use procedures::{PartitionId, Procedures, Touched};
pub use protocol::Protocol;
pub use record::item;
pub use splittable::{OpKind, SplitOp};
pub use star::{
    Applied, BeforeImages, ReplicationError, ReplicationMode, RowLocks, Star, StarMode,
};
pub use state::{CommitCtx, TxState};
pub use stats::{CONFLICT_KINDS, Stats, TypeStats};
pub use swisstm::{SwissMeta, SwissTm};
pub use tictoc::{TicToc, TicTocMeta};
pub use twopl::{DEADLOCK_TIMEOUT, LockMeta, TwoPl, TwoPlBlocking, TwoPlNoWait, TwoPlWaitDie};
pub use tx::{RowWriter, Tx, columns};
pub use worker::{Stamp, Worker};

pub use phasedb_check::History;
pub use phasedb_storage::{ColumnId, ColumnType, RowView, Schema, TableId, TableSpec};
