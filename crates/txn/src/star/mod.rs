//! STAR: asymmetric replication with phase switching (Lu et al., VLDB 2019) — the engine's side.
//!
//! A STAR cluster alternates two phases (§4); this module holds what one node's engine does in
//! them, and the STAR node (`phasedb-dist`) drives it.
//!
//! - **Commit rules** ([`Star`], `protocol.rs`): in the *partitioned phase* each partition is run by
//!   one thread and a transaction commits without locks or read validation (§4.1); in the
//!   *single-master phase* it runs Silo's OCC (§4.2). [`crate::Database::set_star_mode`] switches
//!   between them while no transaction runs, and [`crate::Database::set_epoch`] (with
//!   `Config::epoch_interval` zero) makes the phase number the epoch, so TIDs of a later phase are
//!   above every TID of an earlier one on every node (§3).
//! - **Replication records** (`format.rs`, `replicate.rs`): after each commit the worker appends its
//!   records to per-destination buffers ([`crate::Worker::write_replication`]). *Operation
//!   replication* (partitioned phase) carries only the columns written; *value replication*
//!   (single-master phase) carries whole column groups as installed (§5.2). The byte format is
//!   documented in `format.rs`: blocks of a header (`0xA5`, record count as a little-endian `u32`)
//!   and records (kind, table, key and TID as varints, then for an upsert the column mask and the
//!   carried columns' stored bytes).
//! - **Applying** (`apply.rs`, [`crate::Database::apply_replication`]): the Thomas write rule per
//!   column group, so value records may arrive in any order; each group is locked while installed.
//!   Records keep their writer's TID, so histories recorded on different nodes agree on versions.
//! - **Digest** (`digest.rs`, [`crate::Database::digest`]): an order-independent hash of a table's
//!   rows, to check after a replication fence that replicas agree.
//!
//! What it assumes: the node routes a transaction to the partitioned phase only if it touches one
//! partition mastered by the running thread, applies only other partitions' records meanwhile, and
//! switches modes and epochs only at replication fences (so every record of a phase is applied
//! before tombstones of that phase may be unlinked). What it does not do: the phase switching,
//! routing and fences themselves, and durability. For recovery (§7.2) it keeps, on request, what
//! replication batches are about to change of their rows (`undo.rs`, [`BeforeImages`]), so the
//! writes of a node that failed in the current phase can be taken back, and it copies partitions to a
//! restarted node and installs them there with the Thomas write rule (`copy.rs`).

pub(crate) mod apply;
mod copy;
mod digest;
pub(crate) mod format;
mod protocol;
mod remote;
mod replicate;
mod undo;
mod upsert;

pub use apply::{Applied, HELD_LOCK_SPINS};
pub use format::{MAGIC, MAX_BATCH_BYTES, RecordKind, ReplicationError};
pub use protocol::{Star, StarMode, StarShared};
pub use remote::RowLocks;
pub use replicate::ReplicationMode;
pub use undo::BeforeImages;
