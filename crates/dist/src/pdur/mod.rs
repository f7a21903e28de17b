//! P-DUR and DUR: deferred update replication on atomic broadcast, scaled up by partitions
//! (Pacheco, Sciascia, Pedone, "Parallel Deferred Update Replication").
//!
//! A replica holds the whole database split into `P` logical partitions (§IV-A), each with its
//! own multi-version store and snapshot counter `SC` and run by one thread. Clients execute
//! transactions against one replica (Algorithm 3, [`client`]): reads at a snapshot per partition,
//! writes buffered; read-only transactions commit there; update transactions become a
//! [`CertRequest`] that is atomically broadcast to the partitions they touched — one independent
//! broadcast per partition, as the paper's prototype does (§V). Each partition certifies the
//! requests its broadcast delivers, in delivery order (Algorithm 4, [`certify`]); a
//! cross-partition transaction's partitions exchange votes inside the replica and commit only if
//! all vote commit. DUR (Algorithms 1–2) is a replica with one partition.
//!
//! The replica consumes delivered sequences: whatever implements the broadcast calls
//! [`Replica::deliver`] (threaded: [`threaded::ThreadedReplica::deliver`]) with each
//! partition's delivered payloads in order, the bytes of [`CertRequest::encode`].
//!
//! - [`request`]: the certification request, its payload bytes and their validation.
//! - [`certify`]: Algorithm 4's test and §V's stronger test, with the argument for it.
//! - [`snapshots`]: the decided prefix (stable snapshot) and the snapshots in use (GC).
//! - [`partition`]: one partition's state machine — reads, deliveries, votes, decisions, GC.
//! - [`replica`]: the partitions driven from one thread, votes through a queue (tests, DUR).
//! - [`threaded`]: one worker thread per partition, votes, reads and outcomes through
//!   channels, and the replica's own load.
//! - [`client`]: Algorithm 3.
//! - [`node`]: the replica as a cluster node: a broadcast group per partition, its own clients.
//! - [`endpoint`]: clients over TCP — one endpoint per replica, its sessions, a remote load.
//! - [`serve`]: the threaded replica behind its broadcast groups over TCP (`phasedb node`).
//! - [`history`]: committed transactions as a `check` history.
//! - [`model`]: the analytical scaling models of DUR (equation 3) and P-DUR (equation 5).
//! - [`workload`]: the paper's micro-benchmark and Twitter-like workload.

pub mod certify;
pub mod client;
pub mod endpoint;
pub mod history;
pub mod model;
pub mod node;
pub mod partition;
pub mod replica;
pub mod request;
pub mod serve;
pub mod snapshots;
pub mod threaded;
pub mod workload;

pub use certify::{AbortReason, Vote};
pub use client::{Finish, SnapshotSource, Transaction};
pub use partition::{
    Answer, Decision, Effects, ImageError, OUTCOMES_KEPT, Partition, ReadError, ReadReply,
    VoteKind, VoteMsg,
};
pub use replica::Replica;
pub use request::{
    CertRequest, PartitionId, ReadItem, RequestError, Sc, TxnId, first_seq, partition_of,
};
