//! Running the protocol's [`Op`]s on a [`Tx`]: checking them against the catalog first (so a bad
//! operation aborts before anything runs, with a message), then reading and writing through the
//! engine's `Tx` API only.

use phasedb_proto::{AbortCause, Arith, ColumnKind, Op, OpResult, OrderedOp, Value};
use phasedb_storage::{ColumnType, RowView, Schema};
use phasedb_txn::{Protocol, SplitOp, Tx, TxError, TxResult, columns};

use crate::catalog::Catalog;

/// Why an operation cannot run: aborts its transaction with [`AbortCause::Invalid`].
pub type Invalid = String;

/// Checks `op` against the catalog: the table exists, the columns exist, the values have the
/// columns' types, a scan's table is ordered, an arithmetic column is an integer.
pub fn validate(op: &Op, catalog: &Catalog) -> Result<(), Invalid> {
    match op {
        Op::Get { table, columns, .. } => check_columns(catalog, *table, columns.iter().copied()),
        Op::Insert { table, values, .. }
        | Op::Update { table, values, .. }
        | Op::Put { table, values, .. } => check_values(
            catalog,
            *table,
            values.iter().map(|(c, v)| (*c, ValueShape::of(v))),
        ),
        Op::Delete { table, .. } => check_columns(catalog, *table, std::iter::empty()),
        Op::Scan { table, columns, .. } => check_scan(catalog, *table, columns.iter().copied()),
        Op::Apply { table, column, .. } => check_apply(catalog, *table, *column),
        Op::Ordered {
            table,
            column,
            op,
            value,
            ..
        } => check_ordered(catalog, *table, *column, *op, value.len()),
    }
}

/// What [`check_values`] needs to know of a value: its type, and a byte string's length.
#[derive(Clone, Copy, Debug)]
pub enum ValueShape {
    U64,
    I64,
    F64,
    Bytes(usize),
    Tuples,
}

impl ValueShape {
    fn of(v: &Value) -> ValueShape {
        match v {
            Value::U64(_) => ValueShape::U64,
            Value::I64(_) => ValueShape::I64,
            Value::F64(_) => ValueShape::F64,
            Value::Bytes(b) => ValueShape::Bytes(b.len()),
            Value::Tuples(_) => ValueShape::Tuples,
        }
    }
}

/// The table exists and has every column of `cols`.
pub fn check_columns(
    catalog: &Catalog,
    table: u32,
    mut cols: impl Iterator<Item = u16>,
) -> Result<(), Invalid> {
    let def = catalog.get(table)?;
    if let Some(c) = cols.find(|&c| c as usize >= def.columns.len()) {
        return Err(format!("table {} has no column {c}", def.name));
    }
    Ok(())
}

/// Each `(column, value)` exists and fits its column (ordered tuples are written by their
/// operations only).
pub fn check_values(
    catalog: &Catalog,
    table: u32,
    values: impl Iterator<Item = (u16, ValueShape)>,
) -> Result<(), Invalid> {
    let def = catalog.get(table)?;
    for (c, v) in values {
        let col = def
            .columns
            .get(c as usize)
            .ok_or_else(|| format!("table {} has no column {c}", def.name))?;
        let fits = match (col.kind, v) {
            (ColumnKind::U64, ValueShape::U64)
            | (ColumnKind::I64, ValueShape::I64)
            | (ColumnKind::F64, ValueShape::F64) => true,
            (ColumnKind::Fixed(n) | ColumnKind::Bounded(n), ValueShape::Bytes(len)) => {
                len <= n as usize
            }
            _ => false,
        };
        if matches!(col.kind, ColumnKind::Tuple(_) | ColumnKind::TopK { .. }) {
            return Err(format!(
                "column {} of {} holds ordered tuples: write it with oput or topk",
                col.name, def.name
            ));
        }
        if !fits {
            return Err(format!(
                "column {} of {} is {:?}; a {v:?} value does not fit it",
                col.name, def.name, col.kind
            ));
        }
    }
    Ok(())
}

/// The table is ordered and has every column of `cols`.
pub fn check_scan(
    catalog: &Catalog,
    table: u32,
    cols: impl Iterator<Item = u16>,
) -> Result<(), Invalid> {
    let def = catalog.get(table)?;
    if !def.ordered {
        return Err(format!(
            "table {} has no ordered index (create it with ordered = true to scan)",
            def.name
        ));
    }
    check_columns(catalog, table, cols)
}

/// `column` is an integer column.
pub fn check_apply(catalog: &Catalog, table: u32, column: u16) -> Result<(), Invalid> {
    let def = catalog.get(table)?;
    match def.columns.get(column as usize) {
        Some(c) if matches!(c.kind, ColumnKind::I64 | ColumnKind::U64) => Ok(()),
        Some(c) => Err(format!("column {} is not an integer", c.name)),
        None => Err(format!("table {} has no column {column}", def.name)),
    }
}

/// `column` has the kind `op` needs, with room for `len` bytes.
pub fn check_ordered(
    catalog: &Catalog,
    table: u32,
    column: u16,
    op: OrderedOp,
    len: usize,
) -> Result<(), Invalid> {
    let def = catalog.get(table)?;
    let col = def
        .columns
        .get(column as usize)
        .ok_or_else(|| format!("table {} has no column {column}", def.name))?;
    let room = match (op, col.kind) {
        (OrderedOp::OPut, ColumnKind::Tuple(n)) => n,
        (OrderedOp::TopK, ColumnKind::TopK { n, .. }) => n,
        (OrderedOp::OPut, _) => {
            return Err(format!("oput needs a Tuple column; {} is not", col.name));
        }
        (OrderedOp::TopK, _) => {
            return Err(format!("topk needs a TopK column; {} is not", col.name));
        }
    };
    if len > room as usize {
        return Err(format!(
            "a value of {len} bytes does not fit column {}'s {room}",
            col.name
        ));
    }
    Ok(())
}

/// The column mask of `cols` (every column when empty).
fn mask(schema: &Schema, cols: &[u16]) -> u64 {
    if cols.is_empty() {
        schema.all_columns()
    } else {
        cols.iter().fold(0, |m, &c| m | columns(&[c as usize]))
    }
}

/// The values of columns `cols` (all when empty) of `row`.
fn values(row: &RowView<'_>, cols: &[u16]) -> Vec<Value> {
    let schema = row.schema();
    let one = |c: usize| match schema.column(c).ty {
        ColumnType::U64 => Value::U64(row.u64(c)),
        ColumnType::I64 => Value::I64(row.i64(c)),
        ColumnType::F64 => Value::F64(row.f64(c)),
        ColumnType::Tuple(_) => Value::Tuples(row.tuple(c).into_iter().map(owned).collect()),
        ColumnType::TopK { .. } => Value::Tuples(row.topk(c).map(owned).collect()),
        _ => Value::Bytes(row.bytes(c).to_vec()),
    };
    if cols.is_empty() {
        (0..schema.columns().len()).map(one).collect()
    } else {
        cols.iter().map(|&c| one(c as usize)).collect()
    }
}

fn owned(t: phasedb_storage::ordered::Tuple<'_>) -> (i64, u32, Vec<u8>) {
    (t.order, t.core, t.value.to_vec())
}

fn fill(w: &mut phasedb_txn::RowWriter<'_>, values: &[(u16, Value)]) {
    for (c, v) in values {
        let c = *c as usize;
        match v {
            Value::U64(x) => w.set_u64(c, *x),
            Value::I64(x) => w.set_i64(c, *x),
            Value::F64(x) => w.set_f64(c, *x),
            Value::Bytes(b) => w.set_bytes(c, b),
            // Refused by `validate`: ordered tuples are written by their operations only.
            Value::Tuples(_) => {}
        }
    }
}

/// Runs one validated operation.
pub fn run_op<P: Protocol>(tx: &mut Tx<'_, '_, P>, op: &Op) -> TxResult<OpResult> {
    Ok(match op {
        Op::Get {
            table,
            key,
            columns: cols,
        } => {
            let m = mask(tx.schema(*table), cols);
            OpResult::Row(tx.get_columns(*table, *key, m)?.map(|r| values(&r, cols)))
        }
        Op::Insert { table, key, values } => {
            tx.insert(*table, *key, |w| fill(w, values))?;
            OpResult::Done(true)
        }
        Op::Update { table, key, values } => {
            OpResult::Done(tx.update(*table, *key, |w| fill(w, values))?)
        }
        Op::Put { table, key, values } => {
            let existed = tx.update(*table, *key, |w| fill(w, values))?;
            if !existed {
                tx.insert(*table, *key, |w| fill(w, values))?;
            }
            OpResult::Done(existed)
        }
        Op::Delete { table, key } => OpResult::Done(tx.delete(*table, *key)?),
        Op::Scan {
            table,
            lo,
            hi,
            limit,
            columns: cols,
        } => {
            let m = mask(tx.schema(*table), cols);
            let mut rows = Vec::new();
            tx.scan(*table, *lo, *hi, *limit as usize, m, |k, r| {
                rows.push((k, values(&r, cols)));
                true
            })?;
            OpResult::Rows(rows)
        }
        Op::Apply {
            table,
            key,
            column,
            op,
            arg,
            commute,
        } => {
            let split = split_op(*op, *arg);
            let c = *column as usize;
            OpResult::Done(if *commute {
                tx.commute(*table, *key, c, split)?
            } else {
                tx.apply(*table, *key, c, split)?
            })
        }
        Op::Ordered {
            table,
            key,
            column,
            op,
            order,
            value,
        } => {
            let (order, value) = (*order, value.as_slice());
            let split = match op {
                OrderedOp::OPut => SplitOp::OPut { order, value },
                OrderedOp::TopK => SplitOp::TopKInsert { order, value },
            };
            OpResult::Done(tx.apply(*table, *key, *column as usize, split)?)
        }
    })
}

/// Whether `op` only reads.
pub fn is_read(op: &Op) -> bool {
    matches!(op, Op::Get { .. } | Op::Scan { .. })
}

/// The cause a client sees for an engine error.
pub fn cause(e: &TxError) -> AbortCause {
    match e {
        TxError::Conflict(_) | TxError::TooManyRetries(_) | TxError::Stashed => {
            AbortCause::Conflict
        }
        TxError::UserAbort => AbortCause::UserAbort,
        TxError::DuplicateKey { .. } => AbortCause::DuplicateKey,
        TxError::Invalid(_) | TxError::Panicked(_) => AbortCause::Invalid,
        TxError::NotDurable(_) => AbortCause::NotDurable,
    }
}

/// The engine's splittable operation for a wire `op` with argument `arg`.
pub(crate) fn split_op(op: Arith, arg: i64) -> SplitOp<'static> {
    match op {
        Arith::Add => SplitOp::Add(arg),
        Arith::Max => SplitOp::Max(arg),
        Arith::Min => SplitOp::Min(arg),
        Arith::Mult => SplitOp::Mult(arg),
    }
}
