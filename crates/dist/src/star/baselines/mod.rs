//! The baselines STAR is compared with "in the same framework" (Lu et al., VLDB 2019, §8.1.2):
//! they run on STAR's nodes, engine ([`phasedb_txn::Database`] under [`phasedb_txn::Star`] in its
//! single-master rule, which is Silo's OCC), layout, replication streams, requests, counters,
//! benchmark and digests, and differ only in how transactions run and when results are released.
//!
//! - [`pb_occ`]: PB-OCC — a primary runs every transaction with Silo's OCC and replicates values to
//!   its backup, which applies them with the Thomas write rule.
//! - `workers`: *virtual workers* — several transactions in flight on a node's one thread, each on
//!   an engine worker of its own, parked while they wait for messages.
//! - `acks`: which replication the receivers acknowledged; what synchronous replication and group
//!   commit wait for.
//!
//! Each runs with **asynchronous replication and a group commit** every 10 ms (results released
//! once every write before the group commit is on every replica; locks released at commit) or with
//! **synchronous replication** (write locks held until the replicas acknowledged the transaction's
//! writes, then its result released), §8.1.3. What they assume: no node fails and the network
//! loses nothing. A STAR node that lost its last full replica runs a [`DistNode`] of Dist-OCC
//! from then on (§7.2, `crate::star::fallback`).
//!
//! - [`dist`]: Dist-OCC and Dist-S2PL — partitioned, a transaction's home primary runs it, remote
//!   reads from the other primaries, two-phase commit with NO_WAIT locks; a transaction parks on
//!   its virtual worker while it waits for rows and votes. `participant`: the other primaries'
//!   side.

mod acks;
pub mod dist;
mod participant;
pub mod pb_occ;
mod workers;

pub use dist::{DistNode, DistProtocol};
pub use pb_occ::PbOccNode;
