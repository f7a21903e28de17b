use std::sync::atomic::{Ordering, fence};

use phasedb_storage::{RecordLayout, RecordPtr, TableId};

use crate::commit;
use crate::database::Database;
use crate::error::TxResult;
use crate::protocol::Protocol;
use crate::state::{CommitCtx, TxState, WriteKind};
use crate::tid::{ABSENT, TidWord};

/// Silo's optimistic concurrency control: reads copy a group and remember its TID word without
/// writing shared memory; commit locks the write set in address order (no-wait), reads the epoch,
/// validates reads, point misses and scans, then installs and unlocks with a TID chosen locally.
pub struct Occ;

impl Protocol for Occ {
    const NAME: &'static str = "occ";
    type Meta = TidWord;

    fn new_meta(word: u64) -> TidWord {
        TidWord::new(word)
    }

    #[allow(clippy::too_many_arguments)] // the hot read path; kept flat so it inlines
    #[inline]
    fn read_group(
        st: &mut TxState<TidWord>,
        _db: &Database<Self>,
        _table: TableId,
        rec: RecordPtr<TidWord>,
        layout: &RecordLayout,
        g: usize,
        first: usize,
        words: usize,
    ) -> TxResult<u64> {
        let meta = rec.meta(layout, g);
        let out = &mut st.row[first..first + words];
        meta.read_stable(|word| {
            if word & ABSENT == 0 {
                rec.copy_words(layout, first, out);
            }
        })
    }

    fn commit(st: &mut TxState<TidWord>, ctx: &mut CommitCtx<'_, Self>) -> TxResult<()> {
        let db = ctx.db;
        let writes = st.writes.iter().any(|w| w.kind != WriteKind::Cancelled);
        if writes {
            let locked =
                commit::lock_inserts(st, db, ctx.guard).and_then(|()| commit::lock_writes(st, db));
            if let Err(e) = locked {
                commit::release(st, db);
                return Err(e);
            }
        }
        fence(Ordering::SeqCst);
        let epoch = db.epoch.current();
        let valid = commit::validate(st, db, ctx.guard);
        if let Err(e) = valid {
            commit::release(st, db);
            return Err(e);
        }
        if writes {
            let tid = commit::choose_tid(st, *ctx.last_tid, epoch);
            commit::install(st, db, tid);
            *ctx.last_tid = tid;
            ctx.tid = tid;
        }
        Ok(())
    }

    fn reclaim(st: &mut TxState<TidWord>, db: &Database<Self>) {
        commit::reclaim(db, st);
    }
}
