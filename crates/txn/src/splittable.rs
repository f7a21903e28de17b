//! Splittable operations (Doppel §4): commutative updates of one integer column that return nothing —
//! Add, Max, Min and Mult. Every protocol runs them; most as a read-modify-write of the column, while a
//! protocol may apply them in place (the `atomic` baseline) or, under phase reconciliation, to per-core
//! slices.

use phasedb_storage::{ColumnType, RowView, Schema};

use crate::error::{TxError, TxResult};

/// A splittable operation on one integer column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitOp {
    /// Add a (possibly negative) amount; wraps on overflow like the hardware instruction.
    Add(i64),
    /// Keep the larger of the value and the argument.
    Max(i64),
    /// Keep the smaller of the value and the argument.
    Min(i64),
    /// Multiply by the argument (wrapping).
    Mult(i64),
}

impl SplitOp {
    /// The operation applied to `value`.
    #[inline]
    pub fn apply(self, value: i64) -> i64 {
        match self {
            SplitOp::Add(d) => value.wrapping_add(d),
            SplitOp::Max(v) => value.max(v),
            SplitOp::Min(v) => value.min(v),
            SplitOp::Mult(v) => value.wrapping_mul(v),
        }
    }

    /// Name used in statistics and reports.
    pub fn name(self) -> &'static str {
        match self {
            SplitOp::Add(_) => "add",
            SplitOp::Max(_) => "max",
            SplitOp::Min(_) => "min",
            SplitOp::Mult(_) => "mult",
        }
    }
}

/// The column's value as a signed integer (`U64` columns are read as two's complement), or an error
/// if the column is not an integer.
#[inline]
pub(crate) fn read_int(row: &RowView<'_>, col: usize) -> TxResult<i64> {
    match row.schema().column(col).ty {
        ColumnType::I64 => Ok(row.i64(col)),
        ColumnType::U64 => Ok(row.u64(col) as i64),
        _ => Err(TxError::Invalid(
            "splittable operations need an integer column",
        )),
    }
}

/// Checks `col` is an integer column of `schema`.
pub(crate) fn check_int(schema: &Schema, col: usize) -> TxResult<ColumnType> {
    match schema.columns().get(col).map(|c| c.ty) {
        Some(ty @ (ColumnType::I64 | ColumnType::U64)) => Ok(ty),
        _ => Err(TxError::Invalid(
            "splittable operations need an integer column",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_commute_with_themselves() {
        let args = [5, -3, 17, 0, 9, -11];
        for make in [SplitOp::Add, SplitOp::Max, SplitOp::Min, SplitOp::Mult] {
            let forward = args.iter().fold(7, |v, &a| make(a).apply(v));
            let backward = args.iter().rev().fold(7, |v, &a| make(a).apply(v));
            assert_eq!(forward, backward, "{:?}", make(0));
        }
        assert_eq!(SplitOp::Add(i64::MAX).apply(1), i64::MIN);
    }
}
