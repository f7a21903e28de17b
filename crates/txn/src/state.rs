//! The per-worker, reusable sets of a transaction: reads, buffered writes, point misses and scans.
//! They are cleared, not freed, between attempts, so a worker in steady state allocates nothing.

use std::ops::Range;

use phasedb_storage::{Guard, RecordPtr, Schema, TableId};

use crate::database::Database;
use crate::footprint::Footprint;
use crate::protocol::Protocol;
use crate::splittable::SplitOp;

/// A column group read: the record, the group and the TID word observed.
pub struct ReadEntry<M> {
    pub table: TableId,
    pub group: u8,
    /// The row's key (records do not store it; the history records it).
    pub key: u64,
    pub rec: RecordPtr<M>,
    pub observed: u64,
    /// The columns of the group the transaction read (sampled for automatic column groups).
    pub columns: u64,
    /// A second word some protocols keep per read (TicToc: the read timestamp seen).
    pub extra: u64,
}

/// What a buffered write does to its record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    /// Overwrite the columns in `columns`.
    Update,
    /// Create the row with the whole image.
    Insert,
    /// Remove the row.
    Delete,
    /// An insert later deleted by the same transaction: nothing to do.
    Cancelled,
}

/// One buffered write per record; its new column values live in [`TxState::images`].
pub struct WriteEntry<M> {
    pub table: TableId,
    pub key: u64,
    /// The record, once known (inserts find or create theirs at commit).
    pub rec: Option<RecordPtr<M>>,
    pub kind: WriteKind,
    /// Columns written, as a bit mask.
    pub columns: u64,
    /// Of `columns`, those whose value is computed at install by applying this write's
    /// [`DeferredOp`]s to the value committed then (commutative updates).
    pub deferred: u64,
    /// Offset of the row image in [`TxState::images`].
    pub image: usize,
    /// An insert for which this commit linked a new placeholder, which it holds locked (set when
    /// the inserts are locked).
    pub placeholder: bool,
}

impl<M> WriteEntry<M> {
    /// The column groups whose values this write decides: those of the written columns for an
    /// update, the whole row otherwise.
    pub fn groups(&self, schema: &Schema) -> u32 {
        match self.kind {
            WriteKind::Update => schema.groups_of(self.columns),
            _ => schema.all_groups(),
        }
    }
}

/// A commutative operation on column `col` of write `write`, applied at install under the write lock
/// to the value committed then (see [`crate::Tx::commute`]).
#[derive(Clone, Copy, Debug)]
pub struct DeferredOp {
    pub write: u32,
    pub col: u16,
    pub op: SplitOp<'static>,
}

/// A group locked at commit, with the word it held before (to restore on abort).
pub struct LockEntry<M> {
    pub rec: RecordPtr<M>,
    pub group: u8,
    /// Index of the write the lock serves.
    pub write: u32,
    pub prev: u64,
    /// The record was created by this commit as a placeholder.
    pub fresh: bool,
    /// The lock is held (entries are listed before they are acquired, to sort them).
    pub held: bool,
    /// The attempt also holds the group's shared lock, released after this one (2PL: that
    /// release, not this one, tells parked waiters).
    pub shared: bool,
}

/// Where group `g` of the record at address `addr` stands in the global lock order: by address, then
/// group, packed into one word so that sorting a commit's locks compares integers (user-space
/// addresses fit in 56 bits, groups in 8).
#[inline]
fn lock_order(addr: usize, g: u8) -> u64 {
    debug_assert!(addr < 1 << 56);
    ((addr as u64) << 8) | g as u64
}

impl<M> LockEntry<M> {
    /// This lock's place in the global lock order.
    #[inline]
    pub fn order(&self) -> u64 {
        lock_order(self.rec.addr(), self.group)
    }
}

/// A point read that found no record; validated by looking the key up again.
pub struct MissEntry {
    pub table: TableId,
    pub key: u64,
    /// The key's version confirmed at validation (recorded only while recording histories).
    pub version: u64,
    /// The insert that found the key missing ([`MissEntry::READ`] for a read).
    pub write: u32,
}

impl MissEntry {
    /// [`MissEntry::write`] of a miss no insert made.
    pub const READ: u32 = u32::MAX;
}

/// A range scan: the key range examined and the records seen present, validated by scanning again
/// (the equivalent of Silo's node-set validation for a lock-free ordered index).
pub struct ScanEntry {
    pub table: TableId,
    pub lo: u64,
    pub hi: u64,
    pub seen: Range<usize>,
}

/// The reusable state of one transaction attempt.
pub struct TxState<M> {
    pub reads: Vec<ReadEntry<M>>,
    pub writes: Vec<WriteEntry<M>>,
    pub images: Vec<u64>,
    /// A 64-bit Bloom filter over (table, key) of `writes`, to skip the search on most reads.
    pub write_filter: u64,
    pub misses: Vec<MissEntry>,
    pub scans: Vec<ScanEntry>,
    pub scan_seen: Vec<usize>,
    pub pending_inserts: Vec<(u64, usize)>,
    pub locks: Vec<LockEntry<M>>,
    pub row: Vec<u64>,
    /// Records to unlink after the attempt: placeholders of aborted inserts (at once) and records
    /// this commit deleted (once no transaction that ran during the delete is left).
    pub unlink: Vec<Unlink>,
    /// Deleted records waiting for their grace period, oldest first.
    pub limbo: std::collections::VecDeque<Unlink>,
    /// Locks a protocol holds while executing: shared locks (2PL), eager write locks (SwissTM).
    pub held: Vec<HeldLock<M>>,
    /// The (record address, group) pairs of `held`, for constant-time "do I hold it" checks.
    pub held_set: rustc_hash::FxHashSet<(usize, u8)>,
    /// The transaction's age priority: smaller is older; kept across retries. Its low 10 bits are
    /// the worker's activity slot, so it also names the transaction.
    pub ts: u64,
    /// The worker's activity slot.
    pub slot: usize,
    /// Set by a protocol's `read_group` for the read being registered (TicToc: the read timestamp).
    pub last_extra: u64,
    /// The attempt is a dry run ([`crate::Worker::set_dry_run`]): it will not commit, and its
    /// inserts do not check whether their keys are taken.
    pub dry_run: bool,
    /// The row last read by a point read, as (table, key, record, whether the read registered group
    /// 0 and so the row's existence): an update of that row right after, if it did, needs no second
    /// lookup. Set after every point read, whichever groups it read, so that which group a read hit
    /// (random under fine groups) is not a branch.
    pub last_read: Option<(TableId, u64, RecordPtr<M>, bool)>,
    /// The id of the worker running the transaction: the core id of ordered tuples it writes.
    pub worker: u32,
    /// A column's bytes during a splittable operation's read-modify-write.
    pub scratch: Vec<u8>,
    /// The phase the worker runs in (phased protocols; see [`crate::phase`]).
    pub phase: u64,
    /// Durable operation's log buffers: install appends the commit's after-images to the slot's.
    pub(crate) log: Option<std::sync::Arc<crate::durability::Logging>>,
    /// The worker's caller holds stashed transactions to rerun: a phased protocol may put off a
    /// phase in which they could not run.
    pub stash_pending: bool,
    /// Splittable operations on split records, applied to the worker's per-core slices at commit.
    pub split_writes: Vec<SplitWrite>,
    /// The byte arguments of `split_writes`.
    pub split_bytes: Vec<u8>,
    /// Splittable operations run as read-modify-writes, as (table, key, column, kind): what a
    /// conflict on those records would be about (Doppel's conflict sampling).
    pub split_candidates: Vec<(TableId, u64, u16, crate::splittable::OpKind)>,
    /// Commutative operations of `writes`, in the order the transaction ran them.
    pub deferred_ops: Vec<DeferredOp>,
    /// The rows this attempt hinted (phased protocols): kept with the transaction if it is stashed.
    pub footprint: Footprint,
}

/// A splittable operation buffered for a per-core slice: the split entry it updates, its kind and
/// argument, and where its bytes are in [`TxState::split_bytes`].
#[derive(Clone, Debug)]
pub struct SplitWrite {
    pub entry: u32,
    pub kind: crate::splittable::OpKind,
    pub arg: i64,
    pub bytes: Range<usize>,
}

/// A lock a protocol holds on a group while the transaction executes.
pub struct HeldLock<M> {
    pub table: TableId,
    pub rec: RecordPtr<M>,
    pub group: u8,
}

/// A record to unlink: by key and address, since it may be gone by then, with the word it must still
/// hold and the epoch after which no transaction that could have seen it linked is running.
#[derive(Clone, Copy, Debug)]
pub struct Unlink {
    pub table: TableId,
    pub key: u64,
    pub addr: usize,
    pub word: u64,
    /// 0 for a placeholder that may go at once.
    pub stamp: u64,
}

impl<M> TxState<M> {
    /// Empty sets with a row buffer of `row_words` words.
    pub fn new(row_words: usize) -> Self {
        TxState {
            reads: Vec::with_capacity(64),
            writes: Vec::with_capacity(32),
            images: Vec::with_capacity(1024),
            write_filter: 0,
            misses: Vec::with_capacity(16),
            scans: Vec::with_capacity(8),
            scan_seen: Vec::with_capacity(256),
            pending_inserts: Vec::new(),
            locks: Vec::with_capacity(32),
            row: vec![0; row_words.max(1)],
            unlink: Vec::new(),
            limbo: std::collections::VecDeque::new(),
            held: Vec::with_capacity(64),
            held_set: rustc_hash::FxHashSet::default(),
            ts: 0,
            slot: 0,
            last_extra: 0,
            dry_run: false,
            last_read: None,
            worker: 0,
            scratch: Vec::with_capacity(64),
            phase: 0,
            log: None,
            stash_pending: false,
            split_writes: Vec::new(),
            split_bytes: Vec::new(),
            split_candidates: Vec::new(),
            deferred_ops: Vec::new(),
            footprint: Footprint::default(),
        }
    }

    /// Clears the sets for the next attempt (keeping `unlink` and `limbo`, which the worker drains).
    pub fn reset(&mut self) {
        self.reads.clear();
        self.writes.clear();
        self.images.clear();
        self.write_filter = 0;
        self.last_read = None;
        self.misses.clear();
        self.scans.clear();
        self.scan_seen.clear();
        self.locks.clear();
        self.held.clear();
        self.held_set.clear();
        self.split_writes.clear();
        self.split_bytes.clear();
        self.split_candidates.clear();
        self.deferred_ops.clear();
        self.footprint.clear();
    }

    /// The attempt's footprint for a rerun: the rows it hinted, then those it read and wrote.
    #[cold]
    #[inline(never)]
    pub(crate) fn stashed_footprint(&self) -> Footprint {
        let mut f = self.footprint;
        for (t, key) in self.reads.iter().map(|r| (r.table, r.key)) {
            f.add(t, key);
        }
        for (t, key) in self.writes.iter().map(|w| (w.table, w.key)) {
            f.add(t, key);
        }
        f
    }

    #[inline]
    pub(crate) fn filter_bit(table: TableId, key: u64) -> u64 {
        let h = (key ^ ((table as u64) << 56)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        1 << (h >> 58)
    }

    /// The buffered write of `(table, key)`, if any.
    #[inline]
    pub fn find_write(&self, table: TableId, key: u64) -> Option<usize> {
        if self.write_filter & Self::filter_bit(table, key) == 0 {
            return None;
        }
        self.writes
            .iter()
            .position(|w| w.key == key && w.table == table)
    }

    /// Records a lock held while executing.
    pub fn hold(&mut self, table: TableId, rec: RecordPtr<M>, group: u8) {
        self.held.push(HeldLock { table, rec, group });
        self.held_set.insert((rec.addr(), group));
    }

    /// Whether the attempt holds an executing-time lock on group `g` of `rec`.
    pub fn holds(&self, rec: RecordPtr<M>, g: u8) -> bool {
        !self.held.is_empty() && self.held_set.contains(&(rec.addr(), g))
    }

    /// Takes the executing-time locks, to release them.
    pub fn take_held(&mut self) -> std::vec::Drain<'_, HeldLock<M>> {
        self.held_set.clear();
        self.held.drain(..)
    }

    /// Whether this attempt holds the lock on group `g` of `rec` (`locks` must be sorted).
    pub fn holds_lock(&self, rec: RecordPtr<M>, g: u8) -> Option<&LockEntry<M>> {
        let key = lock_order(rec.addr(), g);
        self.locks
            .binary_search_by_key(&key, LockEntry::order)
            .ok()
            .map(|i| &self.locks[i])
    }
}

/// What a protocol's commit needs besides the transaction's sets.
pub struct CommitCtx<'a, P: Protocol> {
    pub db: &'a Database<P>,
    pub guard: &'a Guard,
    pub worker: u32,
    /// The worker's last TID, to keep its TIDs increasing.
    pub last_tid: &'a mut u64,
    /// Set by a successful commit: the TID chosen (0 for a read-only transaction).
    pub tid: u64,
    /// Set by a commit whose TID carries no epoch (TicToc's timestamps) or that wrote outside its
    /// TID (Doppel's per-core slices): the epoch it committed in, which durability counts (0: the
    /// TID's epoch).
    pub epoch: u64,
    /// Silo commits install the writes but keep their write locks until
    /// [`crate::Worker::release_locks`] (synchronous replication holds them until the secondaries
    /// acknowledged, STAR §8.1.3). Other protocols ignore it.
    pub hold_locks: bool,
    /// Silo commits take write locks no-wait: a lock another transaction holds aborts at once
    /// instead of being waited for (the NO_WAIT policy of STAR's distributed baselines, §8.1.2).
    pub no_wait: bool,
    /// Silo commits stop once the writes are locked and the reads validated, keeping the locks and
    /// installing nothing: the transaction is *prepared* (two-phase commit's first phase, STAR's
    /// Dist-OCC and Dist-S2PL, §8.1.2) until [`crate::Worker::finish_prepared`] installs it or
    /// [`crate::Worker::abort_prepared`] releases it. Other protocols ignore it.
    pub prepare: bool,
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::lock_order;

    proptest! {
        /// The packed lock order is the order of (address, group) pairs, so every committer still
        /// locks in one global order.
        #[test]
        fn packed_lock_order_is_address_then_group(
            a in 0usize..1 << 56,
            b in 0usize..1 << 56,
            ga: u8,
            gb: u8,
            near in 0usize..64,
        ) {
            let close = (a + near) % (1 << 56);
            for (x, y) in [(a, b), (a, a), (a, close)] {
                prop_assert_eq!(
                    lock_order(x, ga).cmp(&lock_order(y, gb)),
                    (x, ga).cmp(&(y, gb))
                );
            }
        }
    }
}
