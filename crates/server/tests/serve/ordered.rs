//! Doppel's ordered-tuple operations, `oput` and `topk`, in one-shot and interactive transactions.

use phasedb_client::{
    AbortCause, ClientError, ColumnDef, ColumnKind, Op, OpResult, OrderedOp, Request, Response,
    TableDef, Value,
};

use crate::{connect, server};

fn ordered(table: u32, column: u16, op: OrderedOp, order: i64, value: &[u8]) -> Op {
    Op::Ordered {
        table,
        key: 1,
        column,
        op,
        order,
        value: value.to_vec(),
    }
}

/// The orders and values of the tuples of row 1's columns `best` and `top`.
fn read(c: &mut phasedb_client::Client, t: u32) -> Vec<Vec<(i64, Vec<u8>)>> {
    let got = c
        .execute(vec![Op::Get {
            table: t,
            key: 1,
            columns: vec![0, 1],
        }])
        .unwrap();
    let [OpResult::Row(Some(row))] = &got[..] else {
        panic!("{got:?}");
    };
    row.iter()
        .map(|v| match v {
            Value::Tuples(ts) => ts.iter().map(|(o, _, v)| (*o, v.clone())).collect(),
            other => panic!("{other:?}"),
        })
        .collect()
}

fn invalid(r: Result<Vec<OpResult>, ClientError>) -> bool {
    matches!(
        r,
        Err(ClientError::Aborted {
            cause: AbortCause::Invalid,
            ..
        })
    )
}

/// Threads racing oputs and topk inserts on one row (under occ, and under doppel, which splits
/// the row for them): the row ends with the highest-ordered tuple and the three best; an
/// interactive transaction sees its own topk insert; misuse is refused before anything runs.
#[test]
fn oput_and_topk_keep_the_best_tuples_in_one_shot_and_interactive_transactions() {
    for protocol in ["occ", "doppel"] {
        let s = server(protocol, None);
        let mut c = connect(&s);
        let t = c
            .create_table(TableDef {
                name: "leaders".into(),
                columns: vec![
                    ColumnDef {
                        name: "best".into(),
                        kind: ColumnKind::Tuple(16),
                        group: 0,
                    },
                    ColumnDef {
                        name: "top".into(),
                        kind: ColumnKind::TopK { k: 3, n: 8 },
                        group: 1,
                    },
                ],
                capacity: 16,
                ordered: false,
            })
            .unwrap()
            .id;
        c.execute(vec![Op::Insert {
            table: t,
            key: 1,
            values: vec![],
        }])
        .unwrap();
        assert_eq!(read(&mut c, t), vec![vec![], vec![]]);
        let addr = s.addr();
        std::thread::scope(|scope| {
            for w in 0..4i64 {
                scope.spawn(move || {
                    let mut c = phasedb_client::Client::connect(addr, None).unwrap();
                    let reqs: Vec<Request> = (0..50i64)
                        .map(|i| {
                            let order = i * 4 + w;
                            Request::Execute(vec![
                                ordered(t, 0, OrderedOp::OPut, order, &order.to_le_bytes()),
                                ordered(t, 1, OrderedOp::TopK, order, &[w as u8]),
                            ])
                        })
                        .collect();
                    for r in c.pipeline(&reqs).unwrap() {
                        assert_eq!(
                            r,
                            Response::Results(vec![OpResult::Done(true), OpResult::Done(true)])
                        );
                    }
                });
            }
        });
        let got = read(&mut c, t);
        assert_eq!(
            got[0],
            vec![(199, 199i64.to_le_bytes().to_vec())],
            "{protocol}"
        );
        assert_eq!(
            got[1],
            vec![(199, vec![3]), (198, vec![2]), (197, vec![1])],
            "{protocol}"
        );
        // An interactive transaction reads its own topk insert and commits it.
        let mut tx = c.begin().unwrap();
        let done = tx
            .statement(ordered(t, 1, OrderedOp::TopK, 500, b"mine"))
            .unwrap();
        assert_eq!(done, OpResult::Done(true));
        let seen = tx.get(t, 1, &[1]).unwrap().unwrap();
        let Value::Tuples(top) = &seen[0] else {
            panic!("{seen:?}");
        };
        assert_eq!((top[0].0, &top[0].2[..]), (500, &b"mine"[..]));
        tx.commit().unwrap();
        assert_eq!(read(&mut c, t)[1][0], (500, b"mine".to_vec()));
        // Misuse: oput on a top-K column, a value too long, a tuple column written by put.
        assert!(invalid(c.execute(vec![ordered(
            t,
            1,
            OrderedOp::OPut,
            1,
            b""
        )])));
        assert!(invalid(c.execute(vec![ordered(
            t,
            1,
            OrderedOp::TopK,
            1,
            &[0; 9]
        )])));
        assert!(invalid(c.execute(vec![Op::Put {
            table: t,
            key: 1,
            values: vec![(0, Value::Tuples(vec![(1, 0, vec![])]))],
        }])));
        assert_eq!(read(&mut c, t)[0][0].0, 199);
    }
}
