//! The lock-based baselines LWNR, LWSR and LWLR: server-side lock table and client transactions.
//!
//! Against the RAMP paper (§5.1) and its prototype, these are the strong form of the baselines:
//! - As both, a client takes its locks one at a time in key order (the paper's deadlock avoidance:
//!   "lexicographically orders lock requests by item and performs them sequentially"), and reads that
//!   take no lock (LWNR's) go to all servers in parallel.
//! - As the prototype, a read lock's grant carries the item's committed version, so locking and
//!   reading an item is one round trip.
//! - The prototype ships each written value with its write-lock request and then unlocks in a
//!   separate round; here the write lock is taken alone and the values travel with the release
//!   (one PUT per server that installs and unlocks): the same N + 1 round trips for N written items.
//! - A read-only LWLR transaction finishes as soon as its last lock is granted; its release is sent
//!   behind it (resent until acknowledged) where the prototype waits for the unlock round.
//! - The lock table queues waiters FIFO; the prototype's lets a reader join held read locks ahead of
//!   a queued writer. FIFO keeps writers from starving under the read-heavy YCSB mixes, at the price
//!   of some read concurrency on hot items.
//! - A batched form (one request per server, servers visited in a global order) would lock in fewer
//!   round trips without deadlock, but it is not the algorithm the paper measured, so it is not used.

pub mod client;
pub mod table;
