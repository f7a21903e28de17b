//! Splittable operations (Doppel §4): updates of one column that return nothing and commute with
//! themselves — Add, Max, Min and Mult on integers, OPut on ordered tuples and TopKInsert on top-K
//! sets. Every protocol runs them; most as a read-modify-write of the column, the `atomic` baseline in
//! place, and Doppel, during a split phase, on per-core slices.
//!
//! A per-core slice is a small buffer whose size depends only on the column's type, never on how many
//! operations were applied to it; merging a slice into the column is O(1) (O(K) for top-K sets).

use phasedb_storage::ordered::{self, Tuple};
use phasedb_storage::{ColumnType, Schema};

use crate::error::{TxError, TxResult};

/// A splittable operation on one column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitOp<'a> {
    /// Add a (possibly negative) amount; wraps on overflow like the hardware instruction.
    Add(i64),
    /// Keep the larger of the value and the argument (unsigned comparison on `U64` columns).
    Max(i64),
    /// Keep the smaller of the value and the argument (unsigned comparison on `U64` columns).
    Min(i64),
    /// Multiply by the argument (wrapping).
    Mult(i64),
    /// Replace an ordered tuple by `(order, core, value)` if that beats it.
    OPut { order: i64, value: &'a [u8] },
    /// Insert `(order, core, value)` into a top-K set.
    TopKInsert { order: i64, value: &'a [u8] },
}

/// Which splittable operation, without its argument: what a split record is split for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum OpKind {
    Add,
    Max,
    Min,
    Mult,
    OPut,
    TopKInsert,
}

impl OpKind {
    /// Every kind, in declaration order.
    pub const ALL: [OpKind; 6] = [
        OpKind::Add,
        OpKind::Max,
        OpKind::Min,
        OpKind::Mult,
        OpKind::OPut,
        OpKind::TopKInsert,
    ];

    /// Name used in statistics and reports.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Add => "add",
            OpKind::Max => "max",
            OpKind::Min => "min",
            OpKind::Mult => "mult",
            OpKind::OPut => "oput",
            OpKind::TopKInsert => "topk-insert",
        }
    }
}

impl SplitOp<'_> {
    /// The operation's kind.
    #[inline]
    pub fn kind(&self) -> OpKind {
        match self {
            SplitOp::Add(_) => OpKind::Add,
            SplitOp::Max(_) => OpKind::Max,
            SplitOp::Min(_) => OpKind::Min,
            SplitOp::Mult(_) => OpKind::Mult,
            SplitOp::OPut { .. } => OpKind::OPut,
            SplitOp::TopKInsert { .. } => OpKind::TopKInsert,
        }
    }

    /// Name used in statistics and reports.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// The integer operation applied to `value`, comparing as signed integers. Tuple operations
    /// leave it unchanged.
    #[inline]
    pub fn apply(&self, value: i64) -> i64 {
        match *self {
            SplitOp::Add(d) => value.wrapping_add(d),
            SplitOp::Max(v) => value.max(v),
            SplitOp::Min(v) => value.min(v),
            SplitOp::Mult(v) => value.wrapping_mul(v),
            SplitOp::OPut { .. } | SplitOp::TopKInsert { .. } => value,
        }
    }
}

/// Applies integer operation `kind` with argument `arg` to `value`, typed by the column.
#[inline]
fn combine(kind: OpKind, ty: ColumnType, value: u64, arg: u64) -> u64 {
    let unsigned = ty == ColumnType::U64;
    match kind {
        OpKind::Add => value.wrapping_add(arg),
        OpKind::Mult => value.wrapping_mul(arg),
        OpKind::Max if unsigned => value.max(arg),
        OpKind::Min if unsigned => value.min(arg),
        OpKind::Max => (value as i64).max(arg as i64) as u64,
        OpKind::Min => (value as i64).min(arg as i64) as u64,
        OpKind::OPut | OpKind::TopKInsert => unreachable!("not an integer operation"),
    }
}

/// Checks `op` fits column `col` of `schema`, with a clear error if not.
pub(crate) fn check(schema: &Schema, col: usize, op: &SplitOp<'_>) -> TxResult<ColumnType> {
    let Some(ty) = schema.columns().get(col).map(|c| c.ty) else {
        return Err(TxError::Invalid("no such column"));
    };
    match (op, ty) {
        (
            SplitOp::Add(_) | SplitOp::Max(_) | SplitOp::Min(_) | SplitOp::Mult(_),
            ColumnType::I64 | ColumnType::U64,
        ) => Ok(ty),
        (SplitOp::Add(_) | SplitOp::Max(_) | SplitOp::Min(_) | SplitOp::Mult(_), _) => Err(
            TxError::Invalid("add, max, min and mult need an integer column"),
        ),
        (SplitOp::OPut { value, .. }, ColumnType::Tuple(n)) if value.len() <= n as usize => Ok(ty),
        (SplitOp::OPut { .. }, ColumnType::Tuple(_)) => Err(TxError::Invalid(
            "the value is longer than the ordered tuple's capacity",
        )),
        (SplitOp::OPut { .. }, _) => Err(TxError::Invalid("oput needs an ordered-tuple column")),
        (SplitOp::TopKInsert { value, .. }, ColumnType::TopK { n, .. })
            if value.len() <= n as usize =>
        {
            Ok(ty)
        }
        (SplitOp::TopKInsert { .. }, ColumnType::TopK { .. }) => Err(TxError::Invalid(
            "the value is longer than the top-K set's tuple capacity",
        )),
        (SplitOp::TopKInsert { .. }, _) => {
            Err(TxError::Invalid("topk-insert needs a top-K set column"))
        }
    }
}

/// Applies `op`, run by core `core`, to a column's stored bytes `raw` of type `ty`.
pub(crate) fn apply_raw(op: &SplitOp<'_>, ty: ColumnType, raw: &mut [u8], core: u32) {
    match *op {
        SplitOp::OPut { order, value } => {
            ordered::oput(raw, Tuple { order, core, value });
        }
        SplitOp::TopKInsert { order, value } => {
            let ColumnType::TopK { n, .. } = ty else {
                unreachable!("checked column type")
            };
            ordered::topk_insert(raw, n, Tuple { order, core, value });
        }
        SplitOp::Add(a) | SplitOp::Max(a) | SplitOp::Min(a) | SplitOp::Mult(a) => {
            let v = u64::from_le_bytes(raw[..8].try_into().unwrap());
            raw[..8].copy_from_slice(&combine(op.kind(), ty, v, a as u64).to_le_bytes());
        }
    }
}

/// Words a per-core slice of a column of type `ty` needs: a presence flag and an accumulator for
/// integers, the column's own encoding (empty when zeroed) for tuples and top-K sets.
pub(crate) fn slice_words(ty: ColumnType) -> usize {
    match ty {
        ColumnType::Tuple(_) | ColumnType::TopK { .. } => ty.width().div_ceil(8),
        _ => 2,
    }
}

/// Applies `op`, run by core `core`, to a slice of a column of type `ty` (zeroed = nothing applied).
#[inline]
pub(crate) fn slice_apply(op: &SplitOp<'_>, ty: ColumnType, slice: &mut [u64], core: u32) {
    match *op {
        SplitOp::Add(a) | SplitOp::Max(a) | SplitOp::Min(a) | SplitOp::Mult(a) => {
            slice[1] = if slice[0] == 0 {
                a as u64
            } else {
                combine(op.kind(), ty, slice[1], a as u64)
            };
            slice[0] = 1;
        }
        _ => apply_raw(op, ty, &mut as_bytes_mut(slice)[..ty.width()], core),
    }
}

/// Merges a slice for operation `kind` into the column's stored bytes `raw`: the same effect as
/// applying every operation the slice absorbed.
pub(crate) fn slice_merge(kind: OpKind, ty: ColumnType, slice: &[u64], raw: &mut [u8]) {
    match kind {
        OpKind::OPut => {
            if let Some(t) = ordered::tuple(&as_bytes(slice)[..ty.width()]) {
                ordered::oput(raw, t);
            }
        }
        OpKind::TopKInsert => {
            let ColumnType::TopK { n, .. } = ty else {
                unreachable!("checked column type")
            };
            ordered::topk_merge(raw, &as_bytes(slice)[..ty.width()], n);
        }
        _ if slice[0] != 0 => {
            let v = u64::from_le_bytes(raw[..8].try_into().unwrap());
            raw[..8].copy_from_slice(&combine(kind, ty, v, slice[1]).to_le_bytes());
        }
        _ => {}
    }
}

fn as_bytes(words: &[u64]) -> &[u8] {
    // SAFETY: u64 has no padding and any byte pattern is a valid u8; the length covers the words.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast(), words.len() * 8) }
}

fn as_bytes_mut(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: as in `as_bytes`, and the borrow is exclusive.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast(), words.len() * 8) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TOPK: ColumnType = ColumnType::TopK { k: 4, n: 3 };
    const TUPLE: ColumnType = ColumnType::Tuple(3);

    fn op_of(kind: OpKind, arg: i64, value: &[u8]) -> SplitOp<'_> {
        match kind {
            OpKind::Add => SplitOp::Add(arg),
            OpKind::Max => SplitOp::Max(arg),
            OpKind::Min => SplitOp::Min(arg),
            OpKind::Mult => SplitOp::Mult(arg),
            OpKind::OPut => SplitOp::OPut { order: arg, value },
            OpKind::TopKInsert => SplitOp::TopKInsert { order: arg, value },
        }
    }

    fn column_type(kind: OpKind, unsigned: bool) -> ColumnType {
        match kind {
            OpKind::OPut => TUPLE,
            OpKind::TopKInsert => TOPK,
            _ if unsigned => ColumnType::U64,
            _ => ColumnType::I64,
        }
    }

    /// (argument, core, payload byte) per operation; small ranges so orders collide.
    fn ops() -> impl Strategy<Value = Vec<(i64, u32, u8)>> {
        prop::collection::vec((-6i64..6, 0u32..4, any::<u8>()), 0..24)
    }

    fn serial(kind: OpKind, ty: ColumnType, init: &[u8], ops: &[(i64, u32, u8)]) -> Vec<u8> {
        let mut raw = init.to_vec();
        for &(arg, core, byte) in ops {
            apply_raw(&op_of(kind, arg, &[byte; 2]), ty, &mut raw, core);
        }
        raw
    }

    proptest! {
        /// For every operation: applying a sequence to per-core slices (each operation on its core's
        /// slice) and merging the slices equals applying it serially, in the original or any other order.
        #[test]
        fn slices_then_merge_equal_serial_application(
            kind in prop::sample::select(OpKind::ALL.to_vec()),
            unsigned in any::<bool>(),
            init_arg in -5i64..5,
            ops in ops(),
            shuffle_seed in any::<u64>(),
        ) {
            let ty = column_type(kind, unsigned);
            let mut init = vec![0u8; ty.width()];
            apply_raw(&op_of(kind, init_arg, b"i"), ty, &mut init, 7);
            let expected = serial(kind, ty, &init, &ops);
            let mut shuffled = ops.clone();
            let mut s = shuffle_seed | 1;
            for i in (1..shuffled.len()).rev() {
                s ^= s << 13; s ^= s >> 7; s ^= s << 17;
                shuffled.swap(i, (s % (i as u64 + 1)) as usize);
            }
            prop_assert_eq!(&serial(kind, ty, &init, &shuffled), &expected);
            let mut slices = vec![vec![0u64; slice_words(ty)]; 4];
            for &(arg, core, byte) in &ops {
                slice_apply(&op_of(kind, arg, &[byte; 2]), ty, &mut slices[core as usize], core);
            }
            let mut merged = init.clone();
            for slice in &slices {
                slice_merge(kind, ty, slice, &mut merged);
            }
            prop_assert_eq!(merged, expected);
        }
    }

    #[test]
    fn checks_column_types() {
        let schema = Schema::builder()
            .column("n", ColumnType::I64, 0)
            .column("t", TUPLE, 0)
            .column("k", TOPK, 0)
            .build()
            .unwrap();
        assert!(check(&schema, 0, &SplitOp::Add(1)).is_ok());
        assert!(check(&schema, 1, &SplitOp::Add(1)).is_err());
        let long = [0u8; 4];
        assert!(
            check(
                &schema,
                1,
                &SplitOp::OPut {
                    order: 1,
                    value: &long[..3]
                }
            )
            .is_ok()
        );
        assert!(
            check(
                &schema,
                1,
                &SplitOp::OPut {
                    order: 1,
                    value: &long
                }
            )
            .is_err()
        );
        assert!(
            check(
                &schema,
                2,
                &SplitOp::TopKInsert {
                    order: 1,
                    value: b"a"
                }
            )
            .is_ok()
        );
        assert!(
            check(
                &schema,
                0,
                &SplitOp::TopKInsert {
                    order: 1,
                    value: b"a"
                }
            )
            .is_err()
        );
        assert!(check(&schema, 9, &SplitOp::Add(1)).is_err());
    }
}
