//! Prepared transactions: two-phase commit's first phase on one node (STAR's Dist-OCC and
//! Dist-S2PL, Lu et al., VLDB 2019, §8.1.2). With [`Worker::set_prepare`], Silo's commit locks the
//! write set and validates the reads, then stops: the locks stay held and nothing is installed
//! until the coordinator's decision, [`Worker::finish_prepared`] (install with a TID, keeping the
//! locks under [`Worker::set_hold_locks`]) or [`Worker::abort_prepared`]. Meanwhile the caller
//! reads the transaction's sets ([`Worker::prepared_reads`], [`Worker::prepared_writes`],
//! [`Worker::last_misses`]) to send their remote parts to the other participants.

use phasedb_storage::TableId;

use crate::commit;
use crate::protocol::Protocol;
use crate::state::WriteKind;
use crate::tid::{LOCK, TidWord};
use crate::worker::Worker;

impl<'db, P: Protocol<Meta = TidWord>> Worker<'db, P> {
    /// Makes commits stop prepared (see the module doc); NO_WAIT callers want it with
    /// [`Worker::set_no_wait`].
    pub fn set_prepare(&mut self, on: bool) {
        self.prepare = on;
        self.release_prepared = Some(commit::release::<P>);
    }

    /// Makes [`Worker::execute`] run procedures without committing them (a *dry run*): a
    /// procedure that ends well returns its value, but nothing is locked, validated, inserted or
    /// installed, and it counts in no statistics or history. An insert does not check whether its
    /// key is taken, since a dry run may read stale rows that name a key an earlier run used. Its attempt's sets stay readable
    /// ([`Worker::prepared_reads`], [`Worker::last_misses`], [`Worker::last_scans`]), which is
    /// what a dry run is for: a Calvin participant learns from one which of its rows a
    /// transaction reads, to send their values to the other participants before it runs.
    pub fn set_dry_run(&mut self, on: bool) {
        self.state.dry_run = on;
    }

    /// Whether the last transaction is prepared, waiting for its decision.
    pub fn is_prepared(&self) -> bool {
        self.prepared
    }

    /// Validates the prepared transaction's reads again (a second round of validation, run once
    /// every participant holds its locks, so that all of a distributed transaction's locks are held
    /// when each of its reads is last validated). False: it must abort.
    pub fn validate_prepared(&mut self) -> bool {
        assert!(self.prepared, "no transaction is prepared");
        let guard = self.epoch_handle.pin();
        commit::validate(&mut self.state, self.db, &guard).is_ok()
    }

    /// Commits the prepared transaction: installs its writes with `tid` (or, given `None`, a TID
    /// chosen as Silo's commit does: above everything it read or overwrote and this worker's last),
    /// and releases the locks, or keeps them until [`Worker::release_locks`] under
    /// [`Worker::set_hold_locks`]. Returns the TID (0 if it wrote nothing).
    pub fn finish_prepared(&mut self, tid: Option<u64>) -> u64 {
        self.finish(tid, 0)
    }

    /// Commits the prepared transaction as [`Worker::finish_prepared`] with a TID of its own
    /// choosing, above `floor` too: the highest TID the other participants hold for the rows it
    /// writes there (a home's copies of remote rows may be older than their primaries').
    pub fn finish_prepared_above(&mut self, floor: u64) -> u64 {
        self.finish(None, floor)
    }

    fn finish(&mut self, tid: Option<u64>, floor: u64) -> u64 {
        assert!(self.prepared, "no transaction is prepared");
        self.prepared = false;
        let db = self.db;
        db.activity.enter(self.slot, db.epoch.current());
        let writes = self
            .state
            .writes
            .iter()
            .any(|w| w.kind != WriteKind::Cancelled);
        let tid = if writes {
            let tid = tid.unwrap_or_else(|| {
                commit::choose_tid(&self.state, self.last_tid.max(floor), db.epoch.current())
            });
            if self.hold_locks {
                commit::install_held(&mut self.state, db, tid);
            } else {
                commit::install(&mut self.state, db, tid);
            }
            self.last_tid = self.last_tid.max(tid);
            tid
        } else {
            0
        };
        if let Some(h) = &mut self.history {
            crate::record::record_commit(db, &self.state, tid, self.id, h);
        }
        db.activity.leave(self.slot);
        self.committed = tid;
        self.holding = self.hold_locks && self.state.locks.iter().any(|l| l.held);
        if !self.holding {
            P::reclaim(&mut self.state, db);
        }
        tid
    }

    /// Aborts the prepared transaction: releases its locks, installing nothing.
    pub fn abort_prepared(&mut self) {
        assert!(self.prepared, "no transaction is prepared");
        self.prepared = false;
        commit::release(&mut self.state, self.db);
        P::abort(&mut self.state, self.db);
        P::reclaim(&mut self.state, self.db);
        self.committed = 0;
        self.committed_type = None;
    }

    /// The column groups the last attempt read: table, key, group and the TID word observed
    /// (without the lock bit).
    pub fn prepared_reads(&self) -> impl Iterator<Item = (TableId, u64, u8, u64)> + '_ {
        self.state
            .reads
            .iter()
            .map(|r| (r.table, r.key, r.group, r.observed & !LOCK))
    }

    /// The rows the last attempt wrote: table, key, and whether the write is an update (inserts
    /// and deletes are `false`).
    pub fn prepared_writes(&self) -> impl Iterator<Item = (TableId, u64, bool)> + '_ {
        self.state
            .writes
            .iter()
            .filter(|w| w.kind != WriteKind::Cancelled)
            .map(|w| (w.table, w.key, w.kind == WriteKind::Update))
    }

    /// The rows the last attempt looked up and found no record for (kept after it ends, until the
    /// next one starts): a node that holds a copy of only some partitions learns from them which
    /// rows to fetch from others.
    pub fn last_misses(&self) -> impl Iterator<Item = (TableId, u64)> + '_ {
        self.state.misses.iter().map(|m| (m.table, m.key))
    }

    /// The key ranges the last attempt scanned: table, low and high key.
    pub fn last_scans(&self) -> impl Iterator<Item = (TableId, u64, u64)> + '_ {
        self.state.scans.iter().map(|s| (s.table, s.lo, s.hi))
    }
}
