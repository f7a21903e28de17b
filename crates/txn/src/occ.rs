use std::sync::atomic::{Ordering, fence};

use phasedb_storage::{RecordLayout, RecordPtr, TableId};

use crate::commit;
use crate::database::Database;
use crate::error::{TxError, TxResult};
use crate::protocol::Protocol;
use crate::state::{CommitCtx, TxState, WriteKind};
use crate::tid::{ABSENT, SPLIT, TidWord};

/// Silo's optimistic concurrency control: reads copy a group and remember its TID word without
/// writing shared memory; commit locks the write set in address order (no-wait), reads the epoch,
/// validates reads, point misses and scans, then installs and unlocks with a TID chosen locally.
pub struct Occ;

impl Protocol for Occ {
    const NAME: &'static str = "occ";
    const PARTIAL_READS: bool = true;
    type Shared = ();
    type Meta = TidWord;

    fn new_meta(word: u64) -> TidWord {
        TidWord::new(word)
    }

    fn start_durability(
        db: &mut Database<Self>,
    ) -> Result<crate::durability::Recovery, crate::durability::DurabilityError> {
        crate::durability::start(db)
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
                rec.copy_part(layout, g, first, out);
            }
        })
    }

    fn commit(st: &mut TxState<TidWord>, ctx: &mut CommitCtx<'_, Self>) -> TxResult<()> {
        silo_commit::<Self, false>(st, ctx)
    }

    #[inline]
    fn reclaim(st: &mut TxState<TidWord>, db: &Database<Self>) {
        commit::reclaim(db, st);
    }
}

/// Silo's commit: locks the write set (inserts first), reads the epoch, validates, then installs with
/// a TID chosen locally (keeping the locks with [`CommitCtx::hold_locks`], waiting for none with
/// [`CommitCtx::no_wait`]). With `SPLIT_AWARE` (Doppel) a locked group that is split data in the current
/// split phase stashes the transaction.
#[inline(always)]
pub(crate) fn silo_commit<P: Protocol<Meta = TidWord>, const SPLIT_AWARE: bool>(
    st: &mut TxState<TidWord>,
    ctx: &mut CommitCtx<'_, P>,
) -> TxResult<()> {
    let db = ctx.db;
    let writes = st.writes.iter().any(|w| w.kind != WriteKind::Cancelled);
    if writes {
        let mut locked = commit::lock_inserts(st, db, ctx.guard).and_then(|()| {
            let patience = if ctx.no_wait {
                0
            } else {
                commit::LOCK_PATIENCE
            };
            commit::lock_writes(st, db, patience)
        });
        if SPLIT_AWARE && locked.is_ok() && st.locks.iter().any(|l| l.prev & SPLIT != 0) {
            locked = Err(TxError::Stashed);
        }
        if let Err(e) = locked {
            commit::release(st, db);
            return Err(e);
        }
    }
    if writes && !(cfg!(target_arch = "x86_64") && cas_locked_only(st)) {
        // The locks must be visible before the epoch is read and the reads validated.
        fence(Ordering::SeqCst);
    }
    let epoch = db.epoch.current();
    let valid = commit::validate(st, db, ctx.guard);
    if let Err(e) = valid {
        commit::release(st, db);
        return Err(e);
    }
    if ctx.prepare {
        return Ok(());
    }
    if writes {
        let tid = commit::choose_tid(st, *ctx.last_tid, epoch);
        if ctx.hold_locks {
            commit::install_held(st, db, tid);
        } else {
            commit::install(st, db, tid);
        }
        *ctx.last_tid = tid;
        ctx.tid = tid;
    }
    Ok(())
}

/// Whether every lock of the write set was taken by a compare-and-swap (no insert linked a
/// placeholder, whose index insert may end with a plain store). On x86_64 such a lock is a locked
/// instruction, a full barrier there, and acquiring, so neither the CPU nor the compiler moves the
/// epoch read and validation loads above it: Silo's fence after locking would only stall the commit
/// while it holds its locks (on a hot record, lengthening every hand-off).
#[inline(always)]
fn cas_locked_only(st: &TxState<TidWord>) -> bool {
    st.writes.iter().all(|w| w.kind != WriteKind::Insert)
}
