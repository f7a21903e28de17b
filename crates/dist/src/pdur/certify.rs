//! Certification of a delivered transaction at one partition (Algorithm 4, `certify`, lines 18–24),
//! with the stronger test that independent broadcasts per partition need (§V).
//!
//! # The test
//!
//! Partition `p` certifies `t` against every transaction delivered before it at `p` that voted
//! commit here — still waiting for votes or not, and whatever its final outcome, so the vote
//! depends only on `p`'s delivery order and never on when other partitions' votes arrived. Their
//! versions are summarised per key by the store's marks ([`crate::ramp::server::store::Store::marks`]):
//! the newest version that wrote the key, and the newest that read it.
//!
//! - **Algorithm 4 (every transaction).** Abort if a key `t` read at `p` has a version newer than
//!   `t.st[p]`: something `t` did not see overwrote what it read.
//! - **The stronger test (cross-partition transactions).** Abort also if a key `t` writes at `p`
//!   was written or read by a transaction with a version newer than `t.st[p]`.
//!
//! # Why the stronger test (§V)
//!
//! The paper's Algorithm 4 assumes atomic multicast: two transactions that share partitions are
//! delivered in the same order by all of them. Its prototype, like this replica, broadcasts to
//! each partition through an independent atomic broadcast, so partition `p` may deliver `t1`
//! before `t2` while `q` delivers `t2` before `t1`. Algorithm 4's test makes every conflict among
//! committed transactions at `p` point forward in `p`'s delivery order, and at `q` in `q`'s; with
//! the two orders crossed, `t1 → t2` at `p` and `t2 → t1` at `q` close a cycle. The paper answers
//! with a stronger test that lets the two be serialised in either order: `t1`'s read set against
//! `t2`'s write set and the other way round. Here it is made exact in two ways:
//!
//! 1. *Write sets too.* Blind writes (the micro-benchmark's) order two writers of a key by
//!    version: `t1` then `t2` at `p` and `t2` then `t1` at `q` leave a final state no serial
//!    order produces. So a write of `t` at `p` must not follow a concurrent write either.
//! 2. *Against every concurrent transaction, not only cross-partition ones.* A single-partition
//!    transaction carries order between two cross-partition ones: with `t1 ≺p s ≺p t2`, `t1 → s`
//!    (s overwrites what t1 read) and `s → t2` (t2 overwrites what s read), and symmetrically
//!    `t2 → s' → t1` at `q`, no pair of the cross-partition transactions conflicts directly, yet
//!    `t1 → s → t2 → s' → t1` is a cycle.
//!
//! "Concurrent" is "not in `t`'s snapshot": a version above `t.st[p]`. That is what makes the test
//! sufficient. Everything in `t.st[p]` was decided at `p` before `t` read there, so every partition
//! of such a transaction had delivered it before `t` was even broadcast, and delivers it before
//! `t`: its order with `t` is the same everywhere. With the test, every conflict that leads into a
//! cross-partition `t` at `p` comes from such a transaction (a read of `t` comes from its snapshot
//! by construction; a write of `t` follows no concurrent reader or writer). Take a cycle of
//! committed transactions; split it at its cross-partition transactions `c0 → … → c1 → … → c0`.
//! Each stretch lies in one partition and goes forward in its version order, and ends in a
//! conflict into `c(i+1)` from a version in `c(i+1)`'s snapshot, so `c(i)` (no newer than that
//! version) was decided before `c(i+1)` was broadcast. In real time then
//! `bcast(c0) < decide(c0) < bcast(c1) < … < bcast(c0)`: impossible. A cycle without
//! cross-partition transactions lies in one partition and would have to go backwards in its
//! version order. So the committed transactions are serializable, whatever order each
//! partition's broadcast chose. A transaction that writes a partition without reading it needs a
//! snapshot there too for "concurrent" to mean anything: the client takes that partition's stable
//! snapshot when it broadcasts ([`crate::pdur::client`]).
//!
//! Single-partition transactions keep Algorithm 4's test: the argument above needs the stronger
//! one only on the conflicts that lead into cross-partition transactions. The stronger test costs
//! the read marks — one store write per key read by a committed transaction — which a replica
//! with one partition (DUR) skips.

use super::request::{CertRequest, PartitionId, Sc, partition_of};
use crate::ramp::server::store::Store;

/// A partition's local outcome for a transaction (its vote, Algorithm 4 line 8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vote {
    /// Passed certification here.
    Commit,
    /// Failed, for this reason.
    Abort(AbortReason),
}

/// Why a partition voted abort.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AbortReason {
    /// Algorithm 4: an item read has a version newer than the snapshot.
    StaleRead,
    /// The stronger test: an item written was written or read by a concurrent transaction.
    ConcurrentConflict,
    /// The request names a snapshot this partition has not created yet (a malformed request).
    FutureSnapshot,
    /// Another partition voted abort (only in final outcomes).
    OtherPartition,
}

/// Certifies `req` at partition `p` of `partitions`, whose counter is at `sc`. `strong` selects the
/// stronger test for a cross-partition transaction (always wanted; false only to show what goes
/// wrong without it).
pub fn certify(
    store: &Store,
    req: &CertRequest,
    p: PartitionId,
    partitions: usize,
    sc: Sc,
    strong: bool,
) -> Vote {
    let Some(st) = req.snapshot(p) else {
        return Vote::Abort(AbortReason::FutureSnapshot);
    };
    if st > sc {
        return Vote::Abort(AbortReason::FutureSnapshot);
    }
    let here = |key| partition_of(key, partitions) == p;
    for r in req.reads.iter().filter(|r| here(r.key)) {
        if store.marks(r.key).0 > st {
            return Vote::Abort(AbortReason::StaleRead);
        }
    }
    if strong && req.is_cross_partition() {
        for (key, _) in req.writes.iter().filter(|w| here(w.0)) {
            let (written, read) = store.marks(*key);
            if written > st || read > st {
                return Vote::Abort(AbortReason::ConcurrentConflict);
            }
        }
    }
    Vote::Commit
}
