//! TicToc (Yu et al., SIGMOD 2016): optimistic concurrency control with data-driven logical
//! timestamps. Each column group carries a write timestamp (in its TID word, with the lock and status
//! bits) and a read timestamp, 64 bits each — the uncompressed 128-bit form the timestamp-granularity
//! paper found faster than the compressed one. A transaction commits at the earliest logical time its
//! reads and writes allow, extending the read timestamps of what it read (with compare-and-swap) instead
//! of aborting when a version is still valid at that time.
//!
//! Phantoms: a key read as absent through a record (a tombstone) extends that record's read timestamp;
//! a key read as absent with no record, or a scanned range, raises the table's phantom time before it is
//! re-checked, and every new record is installed after the table's phantom time.

use std::sync::atomic::{AtomicU64, Ordering, fence};

use phasedb_storage::{RecordLayout, RecordPtr, TableId};

use crate::commit;
use crate::database::Database;
use crate::error::{Conflict, TxError, TxResult};
use crate::protocol::Protocol;
use crate::state::{CommitCtx, TxState, WriteKind};
use crate::tid::{ABSENT, LOCK, TidMeta, TidWord, tid};

/// TicToc.
pub struct TicToc;

/// A group's timestamps: the TID word holds the write timestamp (`wts`), `rts` the read timestamp.
pub struct TicTocMeta {
    word: TidWord,
    rts: AtomicU64,
}

impl TidMeta for TicTocMeta {
    #[inline]
    fn tid(&self) -> &TidWord {
        &self.word
    }

    fn read_ts(&self) -> u64 {
        self.rts.load(Ordering::SeqCst)
    }

    fn raise_read_ts(&self, ts: u64) {
        self.rts.fetch_max(ts, Ordering::SeqCst);
    }
}

fn conflict<T>(c: Conflict) -> TxResult<T> {
    Err(TxError::Conflict(c))
}

impl Protocol for TicToc {
    const NAME: &'static str = "tictoc";
    const PARTIAL_READS: bool = true;
    type Shared = ();
    type Meta = TicTocMeta;

    /// Durable operation logs each commit's writes with its commit timestamp (which orders a row's
    /// versions in recovery, as it does in the database) and the epoch it committed in (which
    /// group commit and recovery's durable cut-off count); recovery gives every group its
    /// recovered timestamp as both write and read timestamp.
    fn start_durability(
        db: &mut Database<Self>,
    ) -> Result<crate::durability::Recovery, crate::durability::DurabilityError> {
        crate::durability::start(db)
    }

    fn new_meta(word: u64) -> TicTocMeta {
        TicTocMeta {
            word: TidWord::new(word),
            rts: AtomicU64::new(tid(word)),
        }
    }

    #[allow(clippy::too_many_arguments)] // the hot read path; kept flat so it inlines
    #[inline]
    fn read_group(
        st: &mut TxState<TicTocMeta>,
        _db: &Database<Self>,
        _table: TableId,
        rec: RecordPtr<TicTocMeta>,
        layout: &RecordLayout,
        g: usize,
        first: usize,
        words: usize,
    ) -> TxResult<u64> {
        let m = rec.meta(layout, g);
        let out = &mut st.row[first..first + words];
        let mut rts = 0;
        let word = m.word.read_stable(|word| {
            rts = m.rts.load(Ordering::Acquire);
            if word & ABSENT == 0 {
                rec.copy_part(layout, g, first, out);
            }
        })?;
        st.last_extra = rts.max(tid(word));
        Ok(word)
    }

    fn commit(st: &mut TxState<TicTocMeta>, ctx: &mut CommitCtx<'_, Self>) -> TxResult<()> {
        let db = ctx.db;
        let writes = st.writes.iter().any(|w| w.kind != WriteKind::Cancelled);
        if writes {
            let locked = commit::lock_inserts(st, db, ctx.guard)
                .and_then(|()| commit::lock_writes(st, db, 0));
            if let Err(e) = locked {
                commit::release(st, db);
                return Err(e);
            }
        }
        // The commit time: after every version read and every read claim on what is overwritten, and
        // after the phantom time of tables that get new records.
        let mut cts = st.reads.iter().map(|r| tid(r.observed)).max().unwrap_or(0);
        for l in &st.locks {
            let t = st.writes[l.write as usize].table;
            let m = l.rec.meta(db.table(t).layout(), l.group as usize);
            cts = cts
                .max(m.rts.load(Ordering::SeqCst) + 1)
                .max(tid(l.prev) + 1);
            if l.fresh {
                cts = cts.max(db.phantom_ts[t as usize].load(Ordering::SeqCst) + 1);
            }
        }
        if !st.misses.is_empty() || !st.scans.is_empty() {
            for m in &st.misses {
                db.phantom_ts[m.table as usize].fetch_max(cts, Ordering::SeqCst);
            }
            for s in &st.scans {
                db.phantom_ts[s.table as usize].fetch_max(cts, Ordering::SeqCst);
            }
        }
        fence(Ordering::SeqCst);
        // The epoch the commit counts in for durability (its timestamp carries none): read with
        // the locks held, as Silo reads it, so a later writer of the same groups reads the same
        // epoch or a later one, and after the worker entered its activity slot.
        let epoch = db.epoch.current();
        let valid = validate_and_extend(st, db, cts)
            .and_then(|()| commit::validate_misses(st, db, ctx.guard))
            .and_then(|()| commit::validate_scans(st, db, ctx.guard));
        if let Err(e) = valid {
            commit::release(st, db);
            return Err(e);
        }
        if writes {
            for l in &st.locks {
                let t = st.writes[l.write as usize].table;
                l.rec
                    .meta(db.table(t).layout(), l.group as usize)
                    .rts
                    .store(cts, Ordering::SeqCst);
            }
            commit::install_logged(st, db, cts, Some(epoch));
            *ctx.last_tid = cts;
            ctx.tid = cts;
            ctx.epoch = epoch;
        }
        Ok(())
    }

    #[inline]
    fn reclaim(st: &mut TxState<TicTocMeta>, db: &Database<Self>) {
        commit::reclaim(db, st);
    }
}

/// Checks every read is still valid at `cts`, extending its read timestamp where it ends earlier.
fn validate_and_extend(st: &TxState<TicTocMeta>, db: &Database<TicToc>, cts: u64) -> TxResult<()> {
    for r in &st.reads {
        if r.extra >= cts {
            continue;
        }
        let m = r.rec.meta(db.table(r.table).layout(), r.group as usize);
        let word = m.word.0.load(Ordering::SeqCst);
        if word & !LOCK != r.observed {
            return conflict(Conflict::Validation);
        }
        if word & LOCK != 0 {
            if st.holds_lock(r.rec, r.group).is_none() {
                return conflict(Conflict::Validation);
            }
            // Our own write lock: the version is ours to replace at cts.
            continue;
        }
        m.rts.fetch_max(cts, Ordering::SeqCst);
        // A writer that locked meanwhile may have read the old read timestamp: back off.
        if m.word.0.load(Ordering::SeqCst) != word {
            return conflict(Conflict::Validation);
        }
    }
    Ok(())
}
