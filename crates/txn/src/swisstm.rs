//! SwissTM's concurrency control (Dragojević et al., PLDI 2009) as the timestamp-granularity paper
//! uses it: writes take a write lock eagerly, when first buffered, while reads stay optimistic and are
//! validated at commit as in OCC. A conflict on a write lock goes to a timestamp-based contention
//! manager that favours the older (longer-running) transaction: an older requester asks the younger
//! holder to abort and waits for the lock; a younger requester aborts itself. Each transaction checks,
//! at every access and before it commits, whether it was asked to abort.
//!
//! A group has two locks: the eager write lock (owned from the first write to the end of the
//! transaction; readers ignore it, since the committed version stays in place) and the TID word's lock
//! bit, taken only while committing, which readers wait for as in OCC.

use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::time::{Duration, Instant};

use phasedb_storage::{RecordLayout, RecordPtr, TableId};

use crate::commit;
use crate::database::Database;
use crate::error::{Conflict, TxError, TxResult};
use crate::protocol::Protocol;
use crate::state::{CommitCtx, TxState, WriteKind};
use crate::tid::{ABSENT, TidMeta, TidWord};

/// How long an older transaction waits for a younger one to honour its abort request.
const VICTIM_WAIT: Duration = Duration::from_millis(2);

/// SwissTM.
pub struct SwissTm;

/// A group's metadata: the TID word and the eager write lock (the owner's age timestamp, 0 if free).
pub struct SwissMeta {
    word: TidWord,
    write_lock: AtomicU64,
}

impl TidMeta for SwissMeta {
    #[inline]
    fn tid(&self) -> &TidWord {
        &self.word
    }

    fn unshared(&self) -> bool {
        self.write_lock.load(Ordering::SeqCst) == 0
    }
}

fn conflict<T>(c: Conflict) -> TxResult<T> {
    Err(TxError::Conflict(c))
}

/// Aborts (once) if another transaction asked this one to.
#[inline]
fn check_abort_request(st: &TxState<SwissMeta>, db: &Database<SwissTm>) -> TxResult<()> {
    let request = &db.abort_requests[st.slot];
    if request.load(Ordering::Acquire) == st.ts {
        request.store(0, Ordering::Relaxed);
        return conflict(Conflict::WriteLocked);
    }
    Ok(())
}

fn release_write_locks(st: &mut TxState<SwissMeta>, db: &Database<SwissTm>) {
    for h in st.take_held() {
        h.rec
            .meta(db.table(h.table).layout(), h.group as usize)
            .write_lock
            .store(0, Ordering::Release);
    }
}

impl Protocol for SwissTm {
    const NAME: &'static str = "swisstm";
    const PARTIAL_READS: bool = true;
    type Shared = ();
    const USES_AGE: bool = true;
    type Meta = SwissMeta;

    fn start_durability(
        db: &mut Database<Self>,
    ) -> Result<crate::durability::Recovery, crate::durability::DurabilityError> {
        crate::durability::start(db)
    }

    fn new_meta(word: u64) -> SwissMeta {
        SwissMeta {
            word: TidWord::new(word),
            write_lock: AtomicU64::new(0),
        }
    }

    #[allow(clippy::too_many_arguments)] // the hot read path; kept flat so it inlines
    #[inline]
    fn read_group(
        st: &mut TxState<SwissMeta>,
        db: &Database<Self>,
        _table: TableId,
        rec: RecordPtr<SwissMeta>,
        layout: &RecordLayout,
        g: usize,
        first: usize,
        words: usize,
    ) -> TxResult<u64> {
        check_abort_request(st, db)?;
        let m = rec.meta(layout, g);
        let out = &mut st.row[first..first + words];
        m.word.read_stable(|word| {
            if word & ABSENT == 0 {
                rec.copy_part(layout, g, first, out);
            }
        })
    }

    fn on_write(
        st: &mut TxState<SwissMeta>,
        db: &Database<Self>,
        table: TableId,
        rec: RecordPtr<SwissMeta>,
        layout: &RecordLayout,
        groups: u32,
        _write: usize,
    ) -> TxResult<()> {
        check_abort_request(st, db)?;
        let mut mask = groups;
        while mask != 0 {
            let g = mask.trailing_zeros() as u8;
            mask &= mask - 1;
            let m = rec.meta(layout, g as usize);
            let mut since: Option<Instant> = None;
            loop {
                let owner = m.write_lock.load(Ordering::Acquire);
                if owner == st.ts {
                    break;
                }
                if owner == 0 {
                    if m.write_lock
                        .compare_exchange(0, st.ts, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok()
                    {
                        st.hold(table, rec, g);
                        break;
                    }
                    continue;
                }
                // The contention manager: the older transaction wins.
                if st.ts > owner {
                    return conflict(Conflict::WriteLocked);
                }
                db.abort_requests[(owner & 0x3ff) as usize].store(owner, Ordering::Release);
                if since.get_or_insert_with(Instant::now).elapsed() > VICTIM_WAIT {
                    return conflict(Conflict::WriteLocked);
                }
                check_abort_request(st, db)?;
                std::hint::spin_loop();
            }
        }
        Ok(())
    }

    fn commit(st: &mut TxState<SwissMeta>, ctx: &mut CommitCtx<'_, Self>) -> TxResult<()> {
        let db = ctx.db;
        let writes = st.writes.iter().any(|w| w.kind != WriteKind::Cancelled);
        let locked = check_abort_request(st, db).and_then(|()| {
            if writes {
                commit::lock_inserts(st, db, ctx.guard)
                    .and_then(|()| commit::lock_writes(st, db, 0))
            } else {
                Ok(())
            }
        });
        if let Err(e) = locked {
            commit::release(st, db);
            release_write_locks(st, db);
            return Err(e);
        }
        fence(Ordering::SeqCst);
        let epoch = db.epoch.current();
        let valid = commit::validate(st, db, ctx.guard);
        if let Err(e) = valid {
            commit::release(st, db);
            release_write_locks(st, db);
            return Err(e);
        }
        if writes {
            let tid = commit::choose_tid(st, *ctx.last_tid, epoch);
            commit::install(st, db, tid);
            *ctx.last_tid = tid;
            ctx.tid = tid;
        }
        release_write_locks(st, db);
        Ok(())
    }

    fn abort(st: &mut TxState<SwissMeta>, db: &Database<Self>) {
        release_write_locks(st, db);
    }

    #[inline]
    fn reclaim(st: &mut TxState<SwissMeta>, db: &Database<Self>) {
        commit::reclaim(db, st);
    }
}
