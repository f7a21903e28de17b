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
    let (table, cols): (u32, Vec<u16>) = match op {
        Op::Get { table, columns, .. } => (*table, columns.clone()),
        Op::Insert { table, values, .. }
        | Op::Update { table, values, .. }
        | Op::Put { table, values, .. } => {
            let def = catalog.get(*table)?;
            for (c, v) in values {
                let col = def
                    .columns
                    .get(*c as usize)
                    .ok_or_else(|| format!("table {} has no column {c}", def.name))?;
                let fits = matches!(
                    (col.kind, v),
                    (ColumnKind::U64, Value::U64(_))
                        | (ColumnKind::I64, Value::I64(_))
                        | (ColumnKind::F64, Value::F64(_))
                );
                let bytes_fit = match (col.kind, v) {
                    (ColumnKind::Fixed(n) | ColumnKind::Bounded(n), Value::Bytes(b)) => {
                        b.len() <= n as usize
                    }
                    _ => false,
                };
                if matches!(col.kind, ColumnKind::Tuple(_) | ColumnKind::TopK { .. }) {
                    return Err(format!(
                        "column {} of {} holds ordered tuples: write it with oput or topk",
                        col.name, def.name
                    ));
                }
                if !fits && !bytes_fit {
                    return Err(format!(
                        "column {} of {} is {:?}; {v:?} does not fit it",
                        col.name, def.name, col.kind
                    ));
                }
            }
            return Ok(());
        }
        Op::Delete { table, .. } => (*table, vec![]),
        Op::Scan { table, columns, .. } => {
            if !catalog.get(*table)?.ordered {
                return Err(format!(
                    "table {} has no ordered index (create it with ordered = true to scan)",
                    catalog.get(*table)?.name
                ));
            }
            (*table, columns.clone())
        }
        Op::Apply { table, column, .. } => {
            let def = catalog.get(*table)?;
            match def.columns.get(*column as usize) {
                Some(c) if matches!(c.kind, ColumnKind::I64 | ColumnKind::U64) => return Ok(()),
                Some(c) => return Err(format!("column {} is not an integer", c.name)),
                None => return Err(format!("table {} has no column {column}", def.name)),
            }
        }
        Op::Ordered {
            table,
            column,
            op,
            value,
            ..
        } => {
            let def = catalog.get(*table)?;
            let col = def
                .columns
                .get(*column as usize)
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
            if value.len() > room as usize {
                return Err(format!(
                    "a value of {} bytes does not fit column {}'s {room}",
                    value.len(),
                    col.name
                ));
            }
            return Ok(());
        }
    };
    let def = catalog.get(table)?;
    if let Some(c) = cols.iter().find(|&&c| c as usize >= def.columns.len()) {
        return Err(format!("table {} has no column {c}", def.name));
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
            let split = match op {
                Arith::Add => SplitOp::Add(*arg),
                Arith::Max => SplitOp::Max(*arg),
                Arith::Min => SplitOp::Min(*arg),
                Arith::Mult => SplitOp::Mult(*arg),
            };
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
