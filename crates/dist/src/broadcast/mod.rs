//! Atomic broadcast for P-DUR (Pacheco, Sciascia & Pedone, "Parallel Deferred Update
//! Replication", §III–V): deferred update replication terminates a
//! transaction by atomically broadcasting it, and P-DUR runs one independent broadcast group per
//! logical partition (§V). Each group is a raft log (TiKV's raft-rs, sans-I/O `RawNode`).
//!
//! - [`Broadcast`] (`mux.rs`): a node's members of every group it belongs to, multiplexed by
//!   [`GroupId`]: `propose`, `step`, `tick(now)`, `drain_outgoing`, `drain_deliveries`.
//! - [`Group`] (`group.rs`): one member of one group: batching and delivery numbering;
//!   `group/recovery.rs` snapshots and restarts, `group/membership.rs` raft ids and readmission.
//! - `batch.rs` (proposals gathered into one entry), `storage.rs` (raft storage with the
//!   application's snapshot), `wire.rs` ([`GroupMsg`], the message nodes exchange),
//!   `chunks.rs` (a snapshot message larger than a chunk sent in pieces and installed whole),
//!   `config.rs`, `error.rs`.
//!
//! A member's raft storage models its durable log: [`Broadcast::restart`] recovers from it. A node
//! that lost it (a process that died) must not vote under its old raft id, which a quorum may
//! remember votes and acknowledgements of; it rejoins with [`Broadcast::join_group`] under a new
//! id, which the leader swaps in by a joint-consensus membership change.
//!
//! Wiring into a node (P-DUR: a group per logical partition, every replica a member of each):
//!
//! ```text
//! let mut bcast = Broadcast::new(me, BroadcastConfig::default())?;
//! for p in 0..partitions { bcast.add_group(p, &replicas)?; }   // join_group(p, &replicas, inc) after losing storage
//! // on_message(from, Msg::Bcast(m)):  bcast.step(from, &m)   (an Err is a refused message)
//! // on_tick:                          bcast.tick(net.now())
//! // to broadcast a transaction:       bcast.propose(p, &bytes)?
//! // after every event:                bcast.send_all(net, Msg::Bcast);
//! //                                   for d in bcast.drain_deliveries() { certify / restore }
//! //                                   for p in bcast.snapshots_due() { bcast.offer_snapshot(p, applied, state)? }
//! ```
//!
//! Guarantees: every member of a group delivers the same payloads in the same order, each
//! numbered by its position in the group (1, 2, ...), exactly once per incarnation; a payload
//! delivered anywhere is never lost while a majority of the group keeps its storage. Proposals
//! are forwarded to the leader; one lost with a failed leader is not retried (delivery is the
//! acknowledgement). A member whose log fell behind the leader's compacted prefix receives the
//! snapshot its application offered ([`Broadcast::offer_snapshot`], [`SnapshotSource`]) and then
//! the log after it.

mod batch;
mod chunks;
mod config;
mod error;
mod group;
mod mux;
mod storage;
mod wire;

use bytes::Bytes;

pub use batch::{BatchError, BatchId};
pub use chunks::{Assembly, ChunkError, MAX_CHUNKS, MAX_SNAPSHOT_BYTES, SnapshotChunk, checksum};
pub use config::BroadcastConfig;
pub use error::BroadcastError;
pub use group::{Group, GroupStats, addr_of, member_id, raft_id};
pub use mux::Broadcast;
pub use storage::SnapshotBody;
pub use wire::{GroupMsg, RaftBytes};

/// Names one broadcast group (P-DUR: a logical partition).
pub type GroupId = u32;

/// What a member hands its application, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// The payload at position `index` of `group`'s total order.
    Entry {
        /// The group.
        group: GroupId,
        /// Position in the group's order: 1, 2, ... with no gap.
        index: u64,
        /// The proposed bytes.
        payload: Bytes,
    },
    /// Replace the application's state of `group` with `state`, which reflects every payload up
    /// to `index`; the next `Entry` of the group has `index + 1`. Comes after a restart (an empty
    /// state at index 0 when the group has no snapshot yet) and when a leader transfers its
    /// snapshot to a member that fell behind.
    Restore {
        /// The group.
        group: GroupId,
        /// The last position the state reflects.
        index: u64,
        /// The state, as the application offered it.
        state: Bytes,
    },
}

/// The application snapshot hook: the state of one group's application, for state transfer.
pub trait SnapshotSource {
    /// The application's current state of `group` and the position of the last payload it
    /// reflects (at most what was delivered).
    fn snapshot(&mut self, group: GroupId) -> (u64, Vec<u8>);
}
