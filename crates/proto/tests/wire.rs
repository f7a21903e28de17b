//! The allocation-free reader and writers of `wire` agree with postcard byte for byte: a one-shot
//! read as views is the `Execute` postcard decodes, anything postcard refuses as an `Execute` the
//! view reader refuses too, arbitrary bytes never panic it, and the writers' frames decode to the
//! requests they describe.

use phasedb_proto::wire::{self, OpView, ValueView, WriteKind};
use phasedb_proto::*;
use proptest::prelude::*;

/// The owned op a view describes (`Tuples` values, which no write may carry, as empty).
fn owned(op: &OpView<'_>) -> Op {
    let value = |v: ValueView<'_>| match v {
        ValueView::U64(x) => Value::U64(x),
        ValueView::I64(x) => Value::I64(x),
        ValueView::F64(x) => Value::F64(x),
        ValueView::Bytes(b) => Value::Bytes(b.to_vec()),
        ValueView::Tuples => Value::Tuples(vec![]),
    };
    match *op {
        OpView::Get {
            table,
            key,
            columns,
        } => Op::Get {
            table,
            key,
            columns: columns.iter().collect(),
        },
        OpView::Write {
            kind,
            table,
            key,
            values,
        } => {
            let values = values.iter().map(|(c, v)| (c, value(v))).collect();
            match kind {
                WriteKind::Insert => Op::Insert { table, key, values },
                WriteKind::Update => Op::Update { table, key, values },
                WriteKind::Put => Op::Put { table, key, values },
            }
        }
        OpView::Delete { table, key } => Op::Delete { table, key },
        OpView::Scan {
            table,
            lo,
            hi,
            limit,
            columns,
        } => Op::Scan {
            table,
            lo,
            hi,
            limit,
            columns: columns.iter().collect(),
        },
        OpView::Apply {
            table,
            key,
            column,
            op,
            arg,
            commute,
        } => Op::Apply {
            table,
            key,
            column,
            op,
            arg,
            commute,
        },
        OpView::Ordered {
            table,
            key,
            column,
            op,
            order,
            value,
        } => Op::Ordered {
            table,
            key,
            column,
            op,
            order,
            value: value.to_vec(),
        },
    }
}

/// `Tuples` values emptied, as [`owned`] gives them back.
fn normalised(ops: Vec<Op>) -> Vec<Op> {
    let fix = |vs: Vec<(u16, Value)>| {
        vs.into_iter()
            .map(|(c, v)| match v {
                Value::Tuples(_) => (c, Value::Tuples(vec![])),
                v => (c, v),
            })
            .collect()
    };
    ops.into_iter()
        .map(|op| match op {
            Op::Insert { table, key, values } => Op::Insert {
                table,
                key,
                values: fix(values),
            },
            Op::Update { table, key, values } => Op::Update {
                table,
                key,
                values: fix(values),
            },
            Op::Put { table, key, values } => Op::Put {
                table,
                key,
                values: fix(values),
            },
            op => op,
        })
        .collect()
}

/// The row an owned operation names by key: a scan names none.
fn row_of_op(op: &Op) -> Option<(u32, u64)> {
    match op {
        Op::Get { table, key, .. }
        | Op::Insert { table, key, .. }
        | Op::Update { table, key, .. }
        | Op::Put { table, key, .. }
        | Op::Delete { table, key }
        | Op::Apply { table, key, .. }
        | Op::Ordered { table, key, .. } => Some((*table, *key)),
        Op::Scan { .. } => None,
    }
}

/// The view reader and postcard agree on `payload`.
fn agree(payload: &[u8]) -> Result<(), TestCaseError> {
    let mut views = Vec::new();
    let fast = wire::decode_execute(payload, &mut views);
    // Appended after other views (a batch's), the same operations come out; refused, nothing does.
    let mut batch = views.clone();
    let had = batch.len();
    let appended = wire::append_execute(payload, &mut batch);
    prop_assert_eq!(&appended, &fast);
    if matches!(fast, Ok(Some(_))) {
        prop_assert_eq!(format!("{:?}", &batch[had..]), format!("{views:?}"));
    } else {
        prop_assert_eq!(batch.len(), had);
    }
    match decode_request(payload) {
        Ok((id, Request::Execute(ops))) => {
            prop_assert_eq!(fast, Ok(Some(id)));
            // Compared encoded, so a NaN read back compares equal to itself.
            let (mut got, mut want) = (Vec::new(), Vec::new());
            encode_request(
                &mut got,
                id,
                &Request::Execute(views.iter().map(owned).collect()),
            );
            let named: Vec<_> = views.iter().map(wire::row_of).collect();
            let keyed: Vec<_> = ops.iter().map(row_of_op).collect();
            prop_assert_eq!(named, keyed);
            encode_request(&mut want, id, &Request::Execute(normalised(ops)));
            prop_assert_eq!(got, want);
        }
        Ok(_) => prop_assert_eq!(fast, Ok(None)),
        // Postcard refuses it: the view reader refuses it too, or it is not an Execute at all.
        Err(_) => prop_assert!(!matches!(fast, Ok(Some(_)))),
    }
    Ok(())
}

fn arb_value() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        any::<u64>().prop_map(Value::U64),
        any::<i64>().prop_map(Value::I64),
        any::<f64>()
            .prop_filter("comparable", |f| !f.is_nan())
            .prop_map(Value::F64),
        proptest::collection::vec(any::<u8>(), 0..20).prop_map(Value::Bytes),
        proptest::collection::vec(
            (
                any::<i64>(),
                any::<u32>(),
                proptest::collection::vec(any::<u8>(), 0..4)
            ),
            0..3
        )
        .prop_map(Value::Tuples),
    ]
}

fn arb_op() -> impl Strategy<Value = Op> {
    let values = || proptest::collection::vec((any::<u16>(), arb_value()), 0..4);
    let cols = proptest::collection::vec(any::<u16>(), 0..4);
    prop_oneof![
        (any::<u32>(), any::<u64>(), cols.clone()).prop_map(|(table, key, columns)| Op::Get {
            table,
            key,
            columns
        }),
        (any::<u32>(), any::<u64>(), values())
            .prop_map(|(table, key, values)| { Op::Insert { table, key, values } }),
        (any::<u32>(), any::<u64>(), values())
            .prop_map(|(table, key, values)| { Op::Update { table, key, values } }),
        (any::<u32>(), any::<u64>(), values()).prop_map(|(table, key, values)| Op::Put {
            table,
            key,
            values
        }),
        (any::<u32>(), any::<u64>()).prop_map(|(table, key)| Op::Delete { table, key }),
        (any::<u32>(), any::<u64>(), any::<u64>(), any::<u32>(), cols).prop_map(
            |(table, lo, hi, limit, columns)| Op::Scan {
                table,
                lo,
                hi,
                limit,
                columns
            }
        ),
        (
            any::<u32>(),
            any::<u64>(),
            any::<u16>(),
            0u8..4,
            any::<i64>(),
            any::<bool>()
        )
            .prop_map(|(table, key, column, op, arg, commute)| Op::Apply {
                table,
                key,
                column,
                op: [Arith::Add, Arith::Max, Arith::Min, Arith::Mult][op as usize],
                arg,
                commute
            }),
        (
            any::<u32>(),
            any::<u64>(),
            any::<u16>(),
            any::<bool>(),
            any::<i64>(),
            proptest::collection::vec(any::<u8>(), 0..8)
        )
            .prop_map(|(table, key, column, top, order, value)| Op::Ordered {
                table,
                key,
                column,
                op: if top {
                    OrderedOp::TopK
                } else {
                    OrderedOp::OPut
                },
                order,
                value
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn views_read_what_postcard_reads(
        id in any::<u64>(),
        ops in proptest::collection::vec(arb_op(), 0..6),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..3),
        cut in any::<usize>(),
    ) {
        let mut frame = Vec::new();
        encode_request(&mut frame, id, &Request::Execute(ops));
        let payload = &frame[HEADER..];
        agree(payload)?;
        let mut bad = payload.to_vec();
        for (at, b) in flips {
            let i = at % bad.len();
            bad[i] ^= b;
        }
        agree(&bad)?;
        agree(&payload[..cut % payload.len()])?;
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_view_reader(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        agree(&bytes)?;
        // An Execute tag after any id, then arbitrary bytes.
        let mut tagged = vec![0x05, 0x06];
        tagged.extend_from_slice(&bytes);
        agree(&tagged)?;
    }

    #[test]
    fn the_writers_write_what_postcard_writes(
        id in any::<u64>(),
        table in any::<u32>(),
        key in any::<u64>(),
        columns in proptest::collection::vec(any::<u16>(), 0..4),
        values in proptest::collection::vec((any::<u16>(), proptest::collection::vec(any::<u8>(), 0..200)), 0..4),
    ) {
        let mut fast = Vec::new();
        let start = wire::begin_execute(&mut fast, id, 4);
        wire::put_get(&mut fast, table, key, &columns);
        for kind in [wire::op::INSERT, wire::op::UPDATE, wire::op::PUT] {
            wire::put_write(&mut fast, kind, table, key, values.iter().map(|(c, v)| (*c, v.as_slice())));
        }
        wire::end_frame(&mut fast, start);
        let values: Vec<(u16, Value)> = values.into_iter().map(|(c, v)| (c, Value::Bytes(v))).collect();
        let mut slow = Vec::new();
        encode_request(&mut slow, id, &Request::Execute(vec![
            Op::Get { table, key, columns },
            Op::Insert { table, key, values: values.clone() },
            Op::Update { table, key, values: values.clone() },
            Op::Put { table, key, values },
        ]));
        prop_assert_eq!(fast, slow);
    }
}

#[test]
fn peek_reads_the_id_and_kind_of_responses() {
    let mut out = Vec::new();
    encode_response(
        &mut out,
        300,
        &Response::Results(vec![OpResult::Done(true)]),
    );
    encode_response(
        &mut out,
        301,
        &Response::Aborted {
            cause: AbortCause::Conflict,
            message: "x".into(),
        },
    );
    encode_response(
        &mut out,
        302,
        &Response::Error {
            kind: ErrorKind::BadCall,
            message: "y".into(),
        },
    );
    let mut reader = FrameReader::new(DEFAULT_MAX_FRAME);
    reader.extend(&out);
    let mut seen = Vec::new();
    while let Some(p) = reader.next_frame().unwrap() {
        seen.push(wire::peek(p).unwrap());
    }
    assert_eq!(
        seen,
        vec![
            (300, wire::RESPONSE_RESULTS),
            (301, wire::RESPONSE_ABORTED),
            (302, wire::RESPONSE_ERROR)
        ]
    );
    assert_eq!(wire::peek(&[]), None);
    assert_eq!(wire::peek(&[0x80]), None);
}
