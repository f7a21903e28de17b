//! Calvin: deterministic transaction scheduling over replicated inputs (Thomson et al., SIGMOD
//! 2012), as STAR's paper ran it beside STAR (§8.3) — sans-I/O [`phasedb_net::Node`]s that embed
//! the single-node engine and run any workload that implements [`phasedb_txn::Procedures`] and
//! names its read/write sets ([`node::LockSet`]).
//!
//! - [`groups`]: replica groups (Calvin-1:3, -2:2, -4) and who owns which partition in each.
//! - [`locks`]: the deterministic lock manager, granting locks in the global order.
//! - [`node`]: [`CalvinNode`] — sequencer (node 0), scheduler, remote-read round and execution;
//!   its module doc says what it assumes and does not do.
//! - [`serve`](mod@serve): a node over TCP from the cluster file's `[star]` table
//!   (`algorithm = "calvin"`).
//! - [`bench`](mod@bench): the cluster benchmark, on STAR's driver pieces.
//!
//! Nodes speak [`crate::star::StarMsg`] (its `Calvin*` messages, and STAR's queries and answers),
//! so STAR's client and benchmark pieces serve Calvin clusters too.

pub mod bench;
pub mod groups;
pub mod locks;
pub mod node;
pub mod serve;

pub use groups::Groups;
pub use node::{
    CalvinNode, CalvinSettings, Lock, LockSet, ReadRows, dry_run_reads, open_database,
    partition_locks,
};
