//! The Doppel paper's `Atomic` baseline: splittable operations applied directly to the record with an
//! atomic instruction and no other concurrency control. It is the upper bound for locking schemes on
//! single-record increment workloads and runs nothing else: reads and ordinary writes are refused with
//! a clear error.

use std::sync::atomic::Ordering;

use phasedb_storage::{ColumnType, Guard, RecordLayout, RecordPtr, TableId};

use crate::commit;
use crate::database::Database;
use crate::error::{TxError, TxResult};
use crate::protocol::Protocol;
use crate::splittable::SplitOp;
use crate::state::{CommitCtx, TxState, WriteKind};
use crate::tid::{ABSENT, TidWord};

/// The atomic-instruction baseline.
pub struct Atomic;

const ONLY_SPLITTABLE: TxError = TxError::Invalid(
    "the atomic protocol runs only splittable operations (add, max, min, mult) on 8-byte columns",
);

impl Protocol for Atomic {
    const NAME: &'static str = "atomic";
    type Shared = ();
    type Meta = TidWord;

    fn new_meta(word: u64) -> TidWord {
        TidWord::new(word)
    }

    #[allow(clippy::too_many_arguments)] // the hot read path; kept flat so it inlines
    fn read_group(
        _st: &mut TxState<TidWord>,
        _db: &Database<Self>,
        _table: TableId,
        _rec: RecordPtr<TidWord>,
        _layout: &RecordLayout,
        _g: usize,
        _first: usize,
        _words: usize,
    ) -> TxResult<u64> {
        Err(ONLY_SPLITTABLE)
    }

    fn apply_in_place(
        _st: &mut TxState<TidWord>,
        db: &Database<Self>,
        table: TableId,
        key: u64,
        col: usize,
        op: SplitOp<'_>,
        guard: &Guard,
    ) -> Option<TxResult<bool>> {
        let table = db.table(table);
        let column = table.schema().column(col);
        if !column.offset.is_multiple_of(8) {
            return Some(Err(ONLY_SPLITTABLE));
        }
        let Some(rec) = table.get(key, guard) else {
            return Some(Ok(false));
        };
        if rec.meta(table.layout(), column.group).load() & ABSENT != 0 {
            return Some(Ok(false));
        }
        let word = rec.word(table.layout(), column.offset / 8);
        if matches!(op, SplitOp::OPut { .. } | SplitOp::TopKInsert { .. }) {
            return Some(Err(ONLY_SPLITTABLE));
        }
        match (op, column.ty) {
            (SplitOp::Add(d), _) => {
                word.fetch_add(d as u64, Ordering::Relaxed);
            }
            (op, ColumnType::U64) => {
                let _ = word.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                    Some(match op {
                        SplitOp::Max(x) => v.max(x as u64),
                        SplitOp::Min(x) => v.min(x as u64),
                        _ => op.apply(v as i64) as u64,
                    })
                });
            }
            (op, _) => {
                let _ = word.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                    Some(op.apply(v as i64) as u64)
                });
            }
        }
        Some(Ok(true))
    }

    fn on_write(
        _st: &mut TxState<TidWord>,
        _db: &Database<Self>,
        _table: TableId,
        _rec: RecordPtr<TidWord>,
        _layout: &RecordLayout,
        _groups: u32,
        _write: usize,
    ) -> TxResult<()> {
        Err(ONLY_SPLITTABLE)
    }

    /// Refused: its operations change the records in place with atomic instructions as they run,
    /// with no commit and no TID, so nothing orders them for a log, and a crash could keep any
    /// subset of a transaction's operations.
    fn start_durability(
        _db: &mut Database<Self>,
    ) -> Result<crate::durability::Recovery, crate::durability::DurabilityError> {
        Err(crate::durability::DurabilityError::Unsupported(
            Self::NAME,
            "its increments are applied in place by atomic instructions, with no commit and no TID \
             to log them at, so a crash could keep any part of a transaction",
        ))
    }

    fn commit(st: &mut TxState<TidWord>, _ctx: &mut CommitCtx<'_, Self>) -> TxResult<()> {
        if st.writes.iter().any(|w| w.kind != WriteKind::Cancelled) || !st.scans.is_empty() {
            return Err(ONLY_SPLITTABLE);
        }
        Ok(())
    }

    #[inline]
    fn reclaim(st: &mut TxState<TidWord>, db: &Database<Self>) {
        commit::reclaim(db, st);
    }
}
