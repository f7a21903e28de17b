//! Doppel: phase reconciliation (Narula et al., OSDI 2014).
//!
//! The database cycles through phases ([`crate::phase`]). In a **joined phase** every record is
//! reconciled and transactions run Silo's OCC; conflicts are sampled. At the change to a **split
//! phase** the coordinator marks the most conflicted records as split data for one splittable
//! operation each: transactions apply that operation to their worker's **per-core slice** with no
//! locking, while the rest of their accesses still run OCC; a transaction that reads a split record,
//! or runs another operation on it, is **stashed** until the next joined phase. In the
//! **reconciliation phase** each worker merges its slices into the records, and the next joined phase
//! starts once all have.

mod cooldown;
mod coordinator;
mod directory;
mod policy;
mod reconcile;
mod split;

use phasedb_storage::{Guard, RecordLayout, RecordPtr, TableId};

use crate::commit;
use crate::database::Database;
use crate::error::{TxError, TxResult};
use crate::occ::silo_commit;
use crate::phase::{self, PhaseWord};
use crate::protocol::Protocol;
use crate::splittable::{self, OpKind, SplitOp};
use crate::state::{CommitCtx, SplitWrite, TxState};
use crate::tid::{ABSENT, SPLIT, TID_MASK, TidWord};

pub use policy::SplitPolicy;
pub use split::{DoppelShared, PhaseStats, SplitLabel};

/// Doppel's protocol: Silo OCC in joined phases, per-core slices for split records in split phases.
pub struct Doppel;

/// Phase kinds.
pub(crate) const JOINED: u8 = 0;
pub(crate) const SPLIT_PHASE: u8 = 1;
pub(crate) const RECONCILE: u8 = 2;

impl Protocol for Doppel {
    const NAME: &'static str = "doppel";
    type Meta = TidWord;
    type Shared = DoppelShared;
    const PHASED: bool = true;
    const PARTIAL_READS: bool = true;

    fn new_meta(word: u64) -> TidWord {
        TidWord::new(word)
    }

    /// Durable operation logs the joined phases' and the split phases' OCC writes at commit like
    /// Silo, and each split record's reconciled value at the reconciliation (the durable epoch is
    /// held below the split phase until then, so a split phase's transactions are recovered with
    /// their per-core slice operations or not at all).
    fn start_durability(
        db: &mut Database<Self>,
    ) -> Result<crate::durability::Recovery, crate::durability::DurabilityError> {
        crate::durability::start(db)
    }

    #[allow(clippy::too_many_arguments)] // the hot read path; kept flat so it inlines
    #[inline]
    fn read_group(
        st: &mut TxState<TidWord>,
        db: &Database<Self>,
        _table: TableId,
        rec: RecordPtr<TidWord>,
        layout: &RecordLayout,
        g: usize,
        first: usize,
        words: usize,
    ) -> TxResult<u64> {
        let out = &mut st.row[first..first + words];
        let word = rec.meta(layout, g).read_stable_unless(SPLIT, |word| {
            if word & ABSENT == 0 {
                rec.copy_part(layout, g, first, out);
            }
        })?;
        if word & SPLIT != 0 && words != 0 {
            // A read of split data (an existence check reads none: split records exist).
            return Err(stash(st, db, word, None));
        }
        Ok(word)
    }

    #[inline(always)]
    fn apply_in_place(
        st: &mut TxState<TidWord>,
        db: &Database<Self>,
        t: TableId,
        key: u64,
        col: usize,
        op: SplitOp<'_>,
        _guard: &Guard,
    ) -> Option<TxResult<bool>> {
        if phase::kind(st.phase) != SPLIT_PHASE {
            st.split_candidates.push((t, key, col as u16, op.kind()));
            return None;
        }
        match apply_split(st, db, t, key, col, op) {
            SplitApply::Reconciled => None,
            SplitApply::Applied => Some(Ok(true)),
            SplitApply::Stashed => Some(Err(TxError::Stashed)),
        }
    }

    fn commit(st: &mut TxState<TidWord>, ctx: &mut CommitCtx<'_, Self>) -> TxResult<()> {
        match silo_commit::<Self, true>(st, ctx) {
            Ok(()) if !st.split_writes.is_empty() => {
                apply_to_slices(st, ctx.db);
                if ctx.tid == 0 {
                    // Durable once the reconciliation's values are (see `Logging::hold_from`):
                    // any epoch of the split phase is held until then.
                    ctx.epoch = ctx.db.epoch.current();
                }
            }
            Ok(()) => {}
            Err(TxError::Stashed) => return Err(stash_at_commit(st, ctx.db)),
            Err(e) => return Err(e),
        }
        Ok(())
    }

    #[inline(always)]
    fn reclaim(st: &mut TxState<TidWord>, db: &Database<Self>) {
        commit::reclaim(db, st);
    }

    fn on_conflict(st: &mut TxState<TidWord>, db: &Database<Self>) {
        if phase::kind(st.phase) == JOINED {
            coordinator::sample_conflict(st, db);
        }
    }

    fn enter_phase(st: &mut TxState<TidWord>, db: &Database<Self>, to: PhaseWord) -> bool {
        match phase::kind(to) {
            SPLIT_PHASE => !st.stash_pending,
            RECONCILE => {
                reconcile::merge_slot(db, st.slot);
                true
            }
            _ => true,
        }
    }

    fn coordinate(
        db: &Database<Self>,
        role: &parking_lot::MutexGuard<'_, ()>,
        me: Option<&mut TxState<TidWord>>,
    ) {
        coordinator::change_phase(db, role, me);
    }

    fn settle(db: &Database<Self>, role: &parking_lot::MutexGuard<'_, ()>) {
        if phase::kind(db.phases.published()) != JOINED {
            coordinator::change_phase(db, role, None);
        }
    }

    fn resumes_stashed(p: PhaseWord) -> bool {
        phase::kind(p) == JOINED
    }

    fn report(db: &Database<Self>) -> Vec<(&'static str, String)> {
        coordinator::report(db)
    }

    fn record_split_ops(
        db: &Database<Self>,
        st: &TxState<TidWord>,
        event: &mut phasedb_check::TxnEvent,
    ) {
        let phase = phase::seq(st.phase);
        // SAFETY: the worker records its own split-phase commit; the entries last until the phase ends.
        let entries = unsafe { db.shared.entries() };
        for w in &st.split_writes {
            let e = &entries[w.entry as usize];
            let (t, key) = (e.label.table, e.label.key);
            event.split_ops.push(phasedb_check::SplitOpEvent {
                item: crate::record::column_or_group_item(db, t, e.label.col.into(), e.group, key),
                phase,
            });
        }
    }
}

/// What a split-phase `apply` did. Small enough to come back in a register: the out-of-line
/// [`apply_split`] returning `Option<TxResult<bool>>` through memory cost a store-forwarding stall
/// per operation (`perf annotate`: about 6% of INCR1's split-phase cycles).
enum SplitApply {
    /// The record is reconciled: the read-modify-write applies the operation.
    Reconciled,
    /// Buffered for the worker's slice.
    Applied,
    /// The record is split for another operation: the transaction is stashed.
    Stashed,
}

/// Doppel's split-phase `apply`: runs the operation on the worker's slice if the record is split for
/// it, stashes the transaction if the record is split for another operation, and leaves reconciled
/// records to the read-modify-write.
#[inline(never)]
fn apply_split(
    st: &mut TxState<TidWord>,
    db: &Database<Doppel>,
    t: TableId,
    key: u64,
    col: usize,
    op: SplitOp<'_>,
) -> SplitApply {
    let schema = db.table(t).schema();
    let group = schema.column(col).group as u16;
    if let Some(i) = st.find_write(t, key) {
        // A write of this group (or of the whole row) holds the value the operation must apply
        // to: the read-modify-write finds it there, and a split group is stashed when the write is
        // locked at commit. A write of the row's other groups leaves this one to its slice.
        if st.writes[i].groups(schema) & (1 << group) != 0 {
            return SplitApply::Reconciled;
        }
    }
    // SAFETY: the directory and entries change only at phase barriers, and this worker is in a
    // split phase.
    let Some(index) = unsafe { db.shared.directory() }.find(t, key, group) else {
        return SplitApply::Reconciled;
    };
    let entry = unsafe { &db.shared.entries()[index] };
    if entry.label.col as usize != col || entry.label.kind != op.kind() {
        stash(st, db, SPLIT | index as u64, Some(op.kind()));
        return SplitApply::Stashed;
    }
    let (arg, bytes) = match op {
        SplitOp::Add(a) | SplitOp::Max(a) | SplitOp::Min(a) | SplitOp::Mult(a) => (a, &[][..]),
        SplitOp::OPut { order, value } | SplitOp::TopKInsert { order, value } => (order, value),
    };
    let from = st.split_bytes.len();
    st.split_bytes.extend_from_slice(bytes);
    st.split_writes.push(SplitWrite {
        entry: index as u32,
        kind: op.kind(),
        arg,
        bytes: from..st.split_bytes.len(),
    });
    SplitApply::Applied
}

/// Counts a stash of the attempt (by a read, or by another operation `other`) on the split record
/// whose word is `word`, hurries the next joined phase if the worker stashed too many, and returns
/// the error that ends the attempt.
#[cold]
fn stash(
    st: &mut TxState<TidWord>,
    db: &Database<Doppel>,
    word: u64,
    other: Option<OpKind>,
) -> TxError {
    let index = (word & TID_MASK) as usize;
    // SAFETY: the worker is inside its own transaction: its slot is its own.
    let slot = unsafe { db.shared.slot(st.slot) };
    if let Some(sample) = slot.samples.get_mut(index) {
        match other {
            Some(k) => sample.other[k as usize] += 1,
            None => sample.reads += 1,
        }
    }
    slot.stashed += 1;
    if slot.stashed == db.config.split.hurry_stashed {
        db.phases.hurry();
        db.shared
            .hurried
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    TxError::Stashed
}

/// Stashes a transaction whose commit locked a split record. Writes meet split records when they
/// are locked, not when they are buffered: a write to a split record is rare (reads and other
/// operations on one are stashed earlier).
#[cold]
#[inline(never)]
fn stash_at_commit(st: &mut TxState<TidWord>, db: &Database<Doppel>) -> TxError {
    let word = st.locks.iter().map(|l| l.prev).find(|w| w & SPLIT != 0);
    stash(st, db, word.unwrap_or(SPLIT), None)
}

/// Applies a committed transaction's split operations to its worker's slices.
fn apply_to_slices(st: &TxState<TidWord>, db: &Database<Doppel>) {
    // SAFETY: the worker is inside its own split-phase transaction.
    let (entries, slot) = unsafe { (db.shared.entries(), db.shared.slot(st.slot)) };
    if slot.samples.len() < entries.len() {
        // The worker's slot was handed out after the split phase began.
        let words = entries.last().map_or(0, |e| e.slice + e.words) + split::SLICE_PAD;
        slot.slices.clear();
        slot.slices.resize(words, 0);
        slot.samples.clear();
        slot.samples.resize(entries.len(), Default::default());
    }
    for w in &st.split_writes {
        let e = &entries[w.entry as usize];
        let value = &st.split_bytes[w.bytes.clone()];
        let op = match w.kind {
            OpKind::Add => SplitOp::Add(w.arg),
            OpKind::Max => SplitOp::Max(w.arg),
            OpKind::Min => SplitOp::Min(w.arg),
            OpKind::Mult => SplitOp::Mult(w.arg),
            OpKind::OPut => SplitOp::OPut {
                order: w.arg,
                value,
            },
            OpKind::TopKInsert => SplitOp::TopKInsert {
                order: w.arg,
                value,
            },
        };
        splittable::slice_apply(
            &op,
            e.ty,
            &mut slot.slices[e.slice..e.slice + e.words],
            st.worker,
        );
        slot.samples[w.entry as usize].ops += 1;
    }
}

impl Database<Doppel> {
    /// Labels column `col` of row `key` of table `t` as split data for operation `kind` in every
    /// split phase from the next one on, whatever the conflict samples say.
    pub fn split(&self, t: TableId, key: u64, col: usize, kind: OpKind) {
        let label = SplitLabel {
            table: t,
            key,
            col: col as u16,
            kind,
        };
        let mut manual = self.shared.manual.lock();
        manual.retain(|l| (l.table, l.key, l.col) != (t, key, col as u16));
        manual.push(label);
        self.phases.hurry();
    }

    /// Removes a manual label set by [`Database::split`].
    pub fn unsplit(&self, t: TableId, key: u64, col: usize) {
        self.shared
            .manual
            .lock()
            .retain(|l| (l.table, l.key, l.col) != (t, key, col as u16));
    }

    /// Doppel's phase figures so far.
    pub fn phase_stats(&self) -> PhaseStats {
        let mut stats = self.shared.coord.lock().stats.clone();
        stats.overdue = self.phases.overdue();
        stats.barrier_wait = self.phases.barrier_wait();
        stats
    }
}
