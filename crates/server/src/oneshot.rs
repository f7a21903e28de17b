//! One-shot transactions run straight from the received bytes: the `Execute` request is read as
//! [`OpView`]s borrowing the batch's buffer, run on the engine thread's `Worker`, and its
//! `Results` response is written into the batch's output buffer as it is produced, so a one-shot
//! allocates nothing on the server (the bytes are the postcard encoding of the same `Response`,
//! see [`phasedb_proto::wire`]).

use phasedb_proto::wire::{
    self, Columns, OpView, ValueView, Values, WriteKind, begin_frame, end_frame, put_bytes,
    put_i64, put_varint,
};
use phasedb_proto::{AbortCause, OrderedOp, Response, encode_response};
use phasedb_storage::{ColumnType, RowView, Schema};
use phasedb_txn::{Protocol, SplitOp, Tx, TxResult, Worker, columns};

use crate::catalog::Catalog;
use crate::exec::{self, Invalid, ValueShape, cause};
use crate::interactive::TYPE_EXECUTE;

/// Runs one-shot `ops` with request id `id` and appends its response frame to `out`: the
/// results, or `Aborted` (nothing applied) if an operation is invalid or the engine gave up.
/// True if it committed.
pub fn execute<P: Protocol>(
    worker: &mut Worker<'_, P>,
    catalog: &Catalog,
    id: u64,
    ops: &[OpView<'_>],
    out: &mut Vec<u8>,
) -> bool {
    let start = out.len();
    if let Err(m) = ops.iter().try_for_each(|op| validate(op, catalog)) {
        encode_response(out, id, &aborted(AbortCause::Invalid, m));
        return false;
    }
    let frame = begin_frame(out);
    put_varint(out, id);
    put_varint(out, wire::RESPONSE_RESULTS as u64);
    put_varint(out, ops.len() as u64);
    let body = out.len();
    let outcome = worker.execute(TYPE_EXECUTE, |tx| {
        out.truncate(body);
        for op in ops {
            run(tx, op, out)?;
        }
        Ok(())
    });
    match outcome {
        Ok(()) => {
            end_frame(out, frame);
            true
        }
        Err(e) => {
            out.truncate(start);
            encode_response(out, id, &aborted(cause(&e), e.to_string()));
            false
        }
    }
}

fn aborted(cause: AbortCause, message: String) -> Response {
    Response::Aborted { cause, message }
}

fn shape(v: &ValueView<'_>) -> ValueShape {
    match v {
        ValueView::U64(_) => ValueShape::U64,
        ValueView::I64(_) => ValueShape::I64,
        ValueView::F64(_) => ValueShape::F64,
        ValueView::Bytes(b) => ValueShape::Bytes(b.len()),
        ValueView::Tuples => ValueShape::Tuples,
    }
}

/// [`exec::validate`] for a view: the same checks, the same messages.
fn validate(op: &OpView<'_>, catalog: &Catalog) -> Result<(), Invalid> {
    match op {
        OpView::Get { table, columns, .. } => exec::check_columns(catalog, *table, columns.iter()),
        OpView::Write { table, values, .. } => {
            exec::check_values(catalog, *table, values.iter().map(|(c, v)| (c, shape(&v))))
        }
        OpView::Delete { table, .. } => exec::check_columns(catalog, *table, std::iter::empty()),
        OpView::Scan { table, columns, .. } => exec::check_scan(catalog, *table, columns.iter()),
        OpView::Apply { table, column, .. } => exec::check_apply(catalog, *table, *column),
        OpView::Ordered {
            table,
            column,
            op,
            value,
            ..
        } => exec::check_ordered(catalog, *table, *column, *op, value.len()),
    }
}

fn mask(schema: &Schema, cols: &Columns<'_>) -> u64 {
    if cols.is_empty() {
        schema.all_columns()
    } else {
        cols.iter().fold(0, |m, c| m | columns(&[c as usize]))
    }
}

/// Appends column `c` of `row` as a `Value`.
fn put_value(out: &mut Vec<u8>, row: &RowView<'_>, c: usize) {
    match row.schema().column(c).ty {
        ColumnType::U64 => {
            out.push(wire::value::U64);
            put_varint(out, row.u64(c));
        }
        ColumnType::I64 => {
            out.push(wire::value::I64);
            put_i64(out, row.i64(c));
        }
        ColumnType::F64 => {
            out.push(wire::value::F64);
            out.extend_from_slice(&row.f64(c).to_le_bytes());
        }
        ColumnType::Tuple(_) => {
            out.push(wire::value::TUPLES);
            let t = row.tuple(c);
            put_varint(out, t.is_some() as u64);
            if let Some(t) = t {
                put_tuple(out, t);
            }
        }
        ColumnType::TopK { .. } => {
            out.push(wire::value::TUPLES);
            put_varint(out, row.topk(c).count() as u64);
            for t in row.topk(c) {
                put_tuple(out, t);
            }
        }
        _ => {
            out.push(wire::value::BYTES);
            put_bytes(out, row.bytes(c));
        }
    }
}

fn put_tuple(out: &mut Vec<u8>, t: phasedb_storage::ordered::Tuple<'_>) {
    put_i64(out, t.order);
    put_varint(out, t.core as u64);
    put_bytes(out, t.value);
}

/// Appends the `Vec<Value>` of columns `cols` (all when empty) of `row`.
fn put_row(out: &mut Vec<u8>, row: &RowView<'_>, cols: &Columns<'_>) {
    if cols.is_empty() {
        let n = row.schema().columns().len();
        put_varint(out, n as u64);
        for c in 0..n {
            put_value(out, row, c);
        }
    } else {
        put_varint(out, cols.len() as u64);
        for c in cols.iter() {
            put_value(out, row, c as usize);
        }
    }
}

fn fill(w: &mut phasedb_txn::RowWriter<'_>, values: &Values<'_>) {
    for (c, v) in values.iter() {
        let c = c as usize;
        match v {
            ValueView::U64(x) => w.set_u64(c, x),
            ValueView::I64(x) => w.set_i64(c, x),
            ValueView::F64(x) => w.set_f64(c, x),
            ValueView::Bytes(b) => w.set_bytes(c, b),
            // Refused by `validate`: ordered tuples are written by their operations only.
            ValueView::Tuples => {}
        }
    }
}

fn done(out: &mut Vec<u8>, found: bool) {
    out.push(wire::result::DONE);
    out.push(found as u8);
}

/// Runs one validated operation, appending its `OpResult`.
fn run<P: Protocol>(tx: &mut Tx<'_, '_, P>, op: &OpView<'_>, out: &mut Vec<u8>) -> TxResult<()> {
    match *op {
        OpView::Get {
            table,
            key,
            ref columns,
        } => {
            let m = mask(tx.schema(table), columns);
            out.push(wire::result::ROW);
            match tx.get_columns(table, key, m)? {
                None => out.push(0),
                Some(row) => {
                    out.push(1);
                    put_row(out, &row, columns);
                }
            }
        }
        OpView::Write {
            kind,
            table,
            key,
            ref values,
        } => {
            let found = match kind {
                WriteKind::Insert => {
                    tx.insert(table, key, |w| fill(w, values))?;
                    true
                }
                WriteKind::Update => tx.update(table, key, |w| fill(w, values))?,
                WriteKind::Put => {
                    let existed = tx.update(table, key, |w| fill(w, values))?;
                    if !existed {
                        tx.insert(table, key, |w| fill(w, values))?;
                    }
                    existed
                }
            };
            done(out, found);
        }
        OpView::Delete { table, key } => {
            let found = tx.delete(table, key)?;
            done(out, found);
        }
        OpView::Scan {
            table,
            lo,
            hi,
            limit,
            ref columns,
        } => {
            let m = mask(tx.schema(table), columns);
            out.push(wire::result::ROWS);
            // The count comes first: collect the rows' bytes after a placeholder, then move them.
            let count_at = out.len();
            let mut rows = 0u64;
            tx.scan(table, lo, hi, limit as usize, m, |k, r| {
                rows += 1;
                put_varint(out, k);
                put_row(out, &r, columns);
                true
            })?;
            let mut count = Vec::with_capacity(10);
            put_varint(&mut count, rows);
            out.splice(count_at..count_at, count);
        }
        OpView::Apply {
            table,
            key,
            column,
            op,
            arg,
            commute,
        } => {
            let split = exec::split_op(op, arg);
            let c = column as usize;
            let found = if commute {
                tx.commute(table, key, c, split)?
            } else {
                tx.apply(table, key, c, split)?
            };
            done(out, found);
        }
        OpView::Ordered {
            table,
            key,
            column,
            op,
            order,
            value,
        } => {
            let split = match op {
                OrderedOp::OPut => SplitOp::OPut { order, value },
                OrderedOp::TopK => SplitOp::TopKInsert { order, value },
            };
            let found = tx.apply(table, key, column as usize, split)?;
            done(out, found);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use phasedb_proto::{
        Arith, ColumnDef, ColumnKind, Op, Request, TableDef, Value, encode_request,
    };
    use phasedb_txn::{Config, Database, Occ};

    use super::*;
    use crate::catalog;
    use crate::exec::{run_op, validate};

    /// The response the owned path (decode, run, encode with postcard) gives.
    fn owned<P: Protocol>(w: &mut Worker<'_, P>, cat: &Catalog, id: u64, ops: &[Op]) -> Vec<u8> {
        let mut out = Vec::new();
        let resp = match ops.iter().try_for_each(|op| validate(op, cat)) {
            Err(m) => aborted(AbortCause::Invalid, m),
            Ok(()) => {
                let mut results = Vec::new();
                match w.execute(TYPE_EXECUTE, |tx| {
                    results.clear();
                    for op in ops {
                        results.push(run_op(tx, op)?);
                    }
                    Ok(())
                }) {
                    Ok(()) => Response::Results(results),
                    Err(e) => aborted(cause(&e), e.to_string()),
                }
            }
        };
        encode_response(&mut out, id, &resp);
        out
    }

    /// The response the view path gives, from the request's encoded bytes.
    fn viewed<P: Protocol>(w: &mut Worker<'_, P>, cat: &Catalog, id: u64, ops: &[Op]) -> Vec<u8> {
        let mut frame = Vec::new();
        encode_request(&mut frame, id, &Request::Execute(ops.to_vec()));
        let mut views = Vec::new();
        let payload = &frame[phasedb_proto::HEADER..];
        assert_eq!(wire::decode_execute(payload, &mut views), Ok(Some(id)));
        let mut out = vec![7u8; 3];
        execute(w, cat, id, &views, &mut out);
        assert_eq!(out[..3], [7, 7, 7], "appends after what the buffer holds");
        out.split_off(3)
    }

    /// Every operation kind and column kind, and the invalid, duplicate and missing cases: the
    /// view path answers the bytes the owned path answers, on two databases run in step.
    #[test]
    fn views_answer_what_the_owned_path_answers() {
        let def = TableDef {
            name: "t".into(),
            columns: vec![
                ColumnDef {
                    name: "u".into(),
                    kind: ColumnKind::U64,
                    group: 0,
                },
                ColumnDef {
                    name: "i".into(),
                    kind: ColumnKind::I64,
                    group: 0,
                },
                ColumnDef {
                    name: "f".into(),
                    kind: ColumnKind::F64,
                    group: 1,
                },
                ColumnDef {
                    name: "b".into(),
                    kind: ColumnKind::Bounded(8),
                    group: 1,
                },
                ColumnDef {
                    name: "x".into(),
                    kind: ColumnKind::Fixed(4),
                    group: 2,
                },
                ColumnDef {
                    name: "o".into(),
                    kind: ColumnKind::Tuple(4),
                    group: 2,
                },
                ColumnDef {
                    name: "k".into(),
                    kind: ColumnKind::TopK { k: 3, n: 4 },
                    group: 3,
                },
            ],
            capacity: 64,
            ordered: true,
        };
        let open = || {
            let mut db = Database::<Occ>::open(Config::default());
            let mut cat = Catalog::default();
            let id = db.create_table(catalog::spec(&def, &cat).unwrap());
            cat.add(id, def.clone());
            (db, cat)
        };
        let ((a, cat_a), (b, cat_b)) = (open(), open());
        let (mut wa, mut wb) = (a.worker(), b.worker());
        let put = |key: u64| Op::Put {
            table: 0,
            key,
            values: vec![
                (0, Value::U64(key * 1000)),
                (1, Value::I64(-(key as i64))),
                (2, Value::F64(key as f64 / 3.0)),
                (3, Value::Bytes(vec![key as u8; (key % 9) as usize])),
                (4, Value::Bytes(vec![1, 2, 3, 4])),
            ],
        };
        let get = |key: u64, columns: Vec<u16>| Op::Get {
            table: 0,
            key,
            columns,
        };
        let ordered = |key: u64, column: u16, op: OrderedOp, order: i64| Op::Ordered {
            table: 0,
            key,
            column,
            op,
            order,
            value: vec![order as u8; 3],
        };
        let requests: Vec<Vec<Op>> = vec![
            (1..=5).map(put).collect(),
            vec![get(1, vec![]), get(2, vec![3, 0, 2]), get(99, vec![])],
            vec![
                ordered(1, 5, OrderedOp::OPut, 4),
                ordered(1, 6, OrderedOp::TopK, 2),
                ordered(1, 6, OrderedOp::TopK, 9),
                ordered(99, 6, OrderedOp::TopK, 9),
            ],
            vec![
                get(1, vec![5, 6]),
                Op::Scan {
                    table: 0,
                    lo: 1,
                    hi: 4,
                    limit: 3,
                    columns: vec![],
                },
                Op::Scan {
                    table: 0,
                    lo: 50,
                    hi: 60,
                    limit: 3,
                    columns: vec![1],
                },
            ],
            vec![
                Op::Update {
                    table: 0,
                    key: 3,
                    values: vec![(1, Value::I64(5))],
                },
                Op::Update {
                    table: 0,
                    key: 77,
                    values: vec![],
                },
                Op::Apply {
                    table: 0,
                    key: 3,
                    column: 1,
                    op: Arith::Max,
                    arg: 9,
                    commute: false,
                },
                Op::Apply {
                    table: 0,
                    key: 2,
                    column: 0,
                    op: Arith::Add,
                    arg: 1,
                    commute: true,
                },
                Op::Delete { table: 0, key: 4 },
                Op::Delete { table: 0, key: 4 },
                get(3, vec![]),
            ],
            // Duplicate key: aborted, nothing applied.
            vec![Op::Delete { table: 0, key: 5 }, put(6), {
                let Op::Put { table, key, values } = put(1) else {
                    unreachable!()
                };
                Op::Insert { table, key, values }
            }],
            vec![get(5, vec![]), get(6, vec![])],
            // Invalid: a missing column, a wrong type, a value too long, tuples written.
            vec![get(1, vec![7])],
            vec![Op::Put {
                table: 0,
                key: 1,
                values: vec![(0, Value::I64(1))],
            }],
            vec![Op::Put {
                table: 0,
                key: 1,
                values: vec![(3, Value::Bytes(vec![0; 9]))],
            }],
            vec![Op::Put {
                table: 0,
                key: 1,
                values: vec![(5, Value::Tuples(vec![]))],
            }],
            vec![ordered(1, 5, OrderedOp::TopK, 1)],
            vec![Op::Delete { table: 9, key: 1 }],
            vec![],
        ];
        for (i, ops) in requests.iter().enumerate() {
            let id = 1 << (7 * (i % 9));
            let want = owned(&mut wa, &cat_a, id, ops);
            let got = viewed(&mut wb, &cat_b, id, ops);
            assert_eq!(got, want, "request {i}: {ops:?}");
        }
    }
}
