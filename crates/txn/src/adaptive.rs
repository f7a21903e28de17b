//! Adaptive reader-writer locking: each column group carries a reader-writer lock that works in one of
//! two modes, chosen by the contention observed on that group. In optimistic mode reads only observe
//! the version, as in OCC, and are validated at commit; in pessimistic mode reads take the shared lock
//! and keep it to the end, so writers cannot invalidate them. A group turns pessimistic after several
//! transactions aborted because of it, and optimistic again after a run of uncontended locked reads.
//! One commit protocol serves both kinds of read in the same transaction: writers lock at commit
//! without waiting and must find no other reader holding the group.

use std::sync::atomic::{AtomicU32, Ordering, fence};

use phasedb_storage::{RecordLayout, RecordPtr, TableId};

use crate::commit;
use crate::database::Database;
use crate::error::{Conflict, TxError, TxResult};
use crate::protocol::Protocol;
use crate::state::{CommitCtx, TxState, WriteKind};
use crate::tid::{ABSENT, LOCK, TidMeta, TidWord};

/// Contention score at which a group turns pessimistic; it stays so until the score decays to zero.
const PESSIMISTIC_AT: u32 = 8;
/// Score added when a transaction aborts because of the group.
const ABORT_PENALTY: u32 = 2;
/// Highest score.
const MAX_SCORE: u32 = 32;
/// Marks a read taken under the shared lock (in [`crate::state::ReadEntry::extra`]).
const LOCKED_READ: u64 = 1;
/// Adaptive optimistic/pessimistic reader-writer locking.
pub struct Adaptive;

/// A group's lock: the TID word (its lock bit is the writer's), the shared-holder count, and the
/// contention score with the mode in its top bit.
pub struct AdaptiveMeta {
    word: TidWord,
    readers: AtomicU32,
    score: AtomicU32,
}

const PESSIMISTIC: u32 = 1 << 31;

impl AdaptiveMeta {
    fn pessimistic(&self) -> bool {
        self.score.load(Ordering::Relaxed) & PESSIMISTIC != 0
    }

    /// Records that a transaction aborted because of this group.
    fn penalise(&self) {
        let _ = self
            .score
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                let score = ((s & !PESSIMISTIC) + ABORT_PENALTY).min(MAX_SCORE);
                let mode = if score >= PESSIMISTIC_AT {
                    PESSIMISTIC
                } else {
                    s & PESSIMISTIC
                };
                Some(score | mode)
            });
    }

    /// Records an uncontended locked read: the score decays and the group turns optimistic at zero.
    fn relax(&self) {
        let _ = self
            .score
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                let score = (s & !PESSIMISTIC).saturating_sub(1);
                Some(if score == 0 {
                    0
                } else {
                    score | (s & PESSIMISTIC)
                })
            });
    }

    /// Whether this is a pessimistic group (for tests and reports).
    pub fn is_pessimistic(&self) -> bool {
        self.pessimistic()
    }
}

impl TidMeta for AdaptiveMeta {
    #[inline]
    fn tid(&self) -> &TidWord {
        &self.word
    }

    fn unshared(&self) -> bool {
        self.readers.load(Ordering::SeqCst) == 0
    }
}

fn conflict<T>(c: Conflict) -> TxResult<T> {
    Err(TxError::Conflict(c))
}

fn holds_shared(st: &TxState<AdaptiveMeta>, rec: RecordPtr<AdaptiveMeta>, g: u8) -> bool {
    st.holds(rec, g)
}

fn release_shared(st: &mut TxState<AdaptiveMeta>, db: &Database<Adaptive>, relax: bool) {
    for h in st.take_held() {
        let m = h.rec.meta(db.table(h.table).layout(), h.group as usize);
        m.readers.fetch_sub(1, Ordering::AcqRel);
        if relax {
            m.relax();
        }
    }
}

fn abort_with(st: &mut TxState<AdaptiveMeta>, db: &Database<Adaptive>, e: TxError) -> TxResult<()> {
    commit::release(st, db);
    release_shared(st, db, false);
    Err(e)
}

impl Protocol for Adaptive {
    const NAME: &'static str = "adaptive";
    const PARTIAL_READS: bool = true;
    type Shared = ();
    type Meta = AdaptiveMeta;

    fn start_durability(
        db: &mut Database<Self>,
    ) -> Result<crate::durability::Recovery, crate::durability::DurabilityError> {
        crate::durability::start(db)
    }

    fn new_meta(word: u64) -> AdaptiveMeta {
        AdaptiveMeta {
            word: TidWord::new(word),
            readers: AtomicU32::new(0),
            score: AtomicU32::new(0),
        }
    }

    #[allow(clippy::too_many_arguments)] // the hot read path; kept flat so it inlines
    #[inline]
    fn read_group(
        st: &mut TxState<AdaptiveMeta>,
        _db: &Database<Self>,
        table: TableId,
        rec: RecordPtr<AdaptiveMeta>,
        layout: &RecordLayout,
        g: usize,
        first: usize,
        words: usize,
    ) -> TxResult<u64> {
        let m = rec.meta(layout, g);
        if m.pessimistic() || holds_shared(st, rec, g as u8) {
            if !holds_shared(st, rec, g as u8) {
                m.readers.fetch_add(1, Ordering::SeqCst);
                let word = m.word.0.load(Ordering::SeqCst);
                if word & LOCK != 0 {
                    m.readers.fetch_sub(1, Ordering::AcqRel);
                    m.penalise();
                    return conflict(Conflict::ReadLocked);
                }
                st.hold(table, rec, g as u8);
            }
            let word = m.word.0.load(Ordering::Acquire);
            if word & ABSENT == 0 {
                rec.copy_part(layout, g, first, &mut st.row[first..first + words]);
            }
            st.last_extra = LOCKED_READ;
            return Ok(word);
        }
        st.last_extra = 0;
        let out = &mut st.row[first..first + words];
        m.word.read_stable(|word| {
            if word & ABSENT == 0 {
                rec.copy_part(layout, g, first, out);
            }
        })
    }

    fn commit(st: &mut TxState<AdaptiveMeta>, ctx: &mut CommitCtx<'_, Self>) -> TxResult<()> {
        let db = ctx.db;
        let writes = st.writes.iter().any(|w| w.kind != WriteKind::Cancelled);
        if writes {
            if let Err(e) = commit::lock_inserts(st, db, ctx.guard)
                .and_then(|()| commit::lock_writes(st, db, 0))
            {
                return abort_with(st, db, e);
            }
            // Writers must not overtake readers holding a group in pessimistic mode.
            for l in st.locks.iter().filter(|l| l.held && !l.fresh) {
                let m = l.rec.meta(
                    db.table(st.writes[l.write as usize].table).layout(),
                    l.group as usize,
                );
                if m.readers.load(Ordering::SeqCst) != holds_shared(st, l.rec, l.group) as u32 {
                    m.penalise();
                    return abort_with(st, db, TxError::Conflict(Conflict::WriteLocked));
                }
            }
        }
        fence(Ordering::SeqCst);
        let epoch = db.epoch.current();
        for r in st.reads.iter().filter(|r| r.extra != LOCKED_READ) {
            let m = r.rec.meta(db.table(r.table).layout(), r.group as usize);
            let word = m.word.load();
            if word & !LOCK != r.observed
                || (word & LOCK != 0 && st.holds_lock(r.rec, r.group).is_none())
            {
                m.penalise();
                return abort_with(st, db, TxError::Conflict(Conflict::Validation));
            }
        }
        let phantoms = commit::validate_misses(st, db, ctx.guard)
            .and_then(|()| commit::validate_scans(st, db, ctx.guard));
        if let Err(e) = phantoms {
            return abort_with(st, db, e);
        }
        if writes {
            let tid = commit::choose_tid(st, *ctx.last_tid, epoch);
            commit::install(st, db, tid);
            *ctx.last_tid = tid;
            ctx.tid = tid;
        }
        release_shared(st, db, true);
        Ok(())
    }

    fn abort(st: &mut TxState<AdaptiveMeta>, db: &Database<Self>) {
        release_shared(st, db, false);
    }

    #[inline]
    fn reclaim(st: &mut TxState<AdaptiveMeta>, db: &Database<Self>) {
        commit::reclaim(db, st);
    }
}
