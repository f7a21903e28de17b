use phasedb_client::{
    AbortCause, Arith, ClientError, ErrorKind, Op, OpResult, Request, Response, Value,
};

use crate::{accounts, balance, connect, put, server};

#[test]
fn one_shot_transactions_read_write_scan_and_apply_atomically() {
    let s = server("occ", None);
    let mut c = connect(&s);
    let t = accounts(&mut c).id;
    let r = c
        .execute(vec![
            put(t, 1, 10),
            put(t, 2, 20),
            Op::Insert {
                table: t,
                key: 3,
                values: vec![(0, Value::I64(30)), (1, Value::Bytes(b"carol".to_vec()))],
            },
            Op::Apply {
                table: t,
                key: 1,
                column: 0,
                op: Arith::Add,
                arg: 5,
                commute: false,
            },
            Op::Apply {
                table: t,
                key: 2,
                column: 0,
                op: Arith::Max,
                arg: 7,
                commute: true,
            },
            Op::Delete { table: t, key: 9 },
        ])
        .unwrap();
    assert_eq!(
        r,
        vec![
            OpResult::Done(false),
            OpResult::Done(false),
            OpResult::Done(true),
            OpResult::Done(true),
            OpResult::Done(true),
            OpResult::Done(false)
        ]
    );
    let rows = c
        .execute(vec![Op::Scan {
            table: t,
            lo: 2,
            hi: 100,
            limit: 10,
            columns: vec![],
        }])
        .unwrap();
    assert_eq!(
        rows,
        vec![OpResult::Rows(vec![
            (2, vec![Value::I64(20), Value::Bytes(vec![])]),
            (3, vec![Value::I64(30), Value::Bytes(b"carol".to_vec())]),
        ])]
    );
    assert_eq!(balance(&mut c, t, 1), Some(15));
    // Tables: list, describe, drop; a dropped table's id is refused.
    assert_eq!(c.list_tables().unwrap().len(), 1);
    assert_eq!(c.describe_table("accounts").unwrap().id, t);
    c.drop_table("accounts").unwrap();
    assert!(c.list_tables().unwrap().is_empty());
    assert!(matches!(
        c.execute(vec![put(t, 1, 1)]),
        Err(ClientError::Aborted {
            cause: AbortCause::Invalid,
            ..
        })
    ));
    assert!(matches!(
        c.describe_table("accounts"),
        Err(ClientError::Server {
            kind: ErrorKind::NoSuchTable,
            ..
        })
    ));
    // The name is free again, under a new id.
    assert_ne!(accounts(&mut c).id, t);
}

#[test]
fn a_one_shot_transaction_that_fails_part_way_applies_nothing() {
    let s = server("occ", None);
    let mut c = connect(&s);
    let t = accounts(&mut c).id;
    c.execute(vec![put(t, 1, 10)]).unwrap();
    // A type error is found before anything runs.
    let bad_type = Op::Update {
        table: t,
        key: 1,
        values: vec![(0, Value::Bytes(b"x".to_vec()))],
    };
    assert!(matches!(
        c.execute(vec![put(t, 2, 20), bad_type]),
        Err(ClientError::Aborted {
            cause: AbortCause::Invalid,
            ..
        })
    ));
    // A duplicate key is found by the engine mid-transaction.
    let dup = Op::Insert {
        table: t,
        key: 1,
        values: vec![],
    };
    assert!(matches!(
        c.execute(vec![put(t, 2, 20), dup]),
        Err(ClientError::Aborted {
            cause: AbortCause::DuplicateKey,
            ..
        })
    ));
    assert_eq!(balance(&mut c, t, 2), None);
    assert_eq!(balance(&mut c, t, 1), Some(10));
}

#[test]
fn pipelined_requests_are_answered_in_order_by_id() {
    let s = server("tictoc", None);
    let mut c = connect(&s);
    let t = accounts(&mut c).id;
    let writes: Vec<Request> = (0..200)
        .map(|k| Request::Execute(vec![put(t, k, k as i64 * 3)]))
        .collect();
    assert!(
        c.pipeline(&writes)
            .unwrap()
            .iter()
            .all(|r| matches!(r, Response::Results(_)))
    );
    let reads: Vec<Request> = (0..200)
        .map(|k| {
            Request::Execute(vec![Op::Get {
                table: t,
                key: k,
                columns: vec![0],
            }])
        })
        .collect();
    for (k, r) in c.pipeline(&reads).unwrap().into_iter().enumerate() {
        assert_eq!(
            r,
            Response::Results(vec![OpResult::Row(Some(vec![Value::I64(k as i64 * 3)]))])
        );
    }
}

/// A pipelined batch mixing one-shots on a live table with one-shots naming tables that do not
/// exist or were dropped (whose rows the engine thread must not look up ahead), interactive
/// requests and a read of the batch's own writes: each is answered in order, the bad ones
/// `Invalid`, and the server goes on serving.
#[test]
fn a_batch_naming_missing_and_dropped_tables_is_answered_in_order() {
    let s = server("occ", None);
    let mut c = connect(&s);
    let t = accounts(&mut c).id;
    let gone = c
        .create_table(phasedb_client::TableDef {
            name: "gone".into(),
            columns: vec![phasedb_client::ColumnDef {
                name: "v".into(),
                kind: phasedb_client::ColumnKind::I64,
                group: 0,
            }],
            capacity: 16,
            ordered: false,
        })
        .unwrap()
        .id;
    c.drop_table("gone").unwrap();
    let get = |table, key| {
        Request::Execute(vec![Op::Get {
            table,
            key,
            columns: vec![0],
        }])
    };
    let mut batch = Vec::new();
    for k in 0..40 {
        batch.push(Request::Execute(vec![put(t, k, k as i64)]));
        batch.push(get(gone, k));
        batch.push(get(u32::MAX - k as u32, k));
        if k % 10 == 0 {
            batch.push(Request::Begin);
        }
        batch.push(get(t, k));
    }
    let answers = c.pipeline(&batch).unwrap();
    assert_eq!(answers.len(), batch.len());
    let mut k = 0;
    for (req, resp) in batch.iter().zip(&answers) {
        match req {
            Request::Begin => assert!(matches!(resp, Response::Begun { .. }), "{resp:?}"),
            Request::Execute(ops) => match &ops[0] {
                Op::Put { .. } => assert!(matches!(resp, Response::Results(_)), "{resp:?}"),
                Op::Get { table, .. } if *table == t => {
                    assert_eq!(
                        *resp,
                        Response::Results(vec![OpResult::Row(Some(vec![Value::I64(k)]))])
                    );
                    k += 1;
                }
                _ => assert!(
                    matches!(
                        resp,
                        Response::Aborted {
                            cause: AbortCause::Invalid,
                            ..
                        }
                    ),
                    "{resp:?}"
                ),
            },
            other => panic!("unexpected request {other:?}"),
        }
    }
    assert_eq!(k, 40);
    assert!(c.execute(vec![put(t, 1, 7)]).is_ok(), "the server goes on");
}

/// A table whose columns all leave their group to the server (`AUTO_GROUP`) is created with
/// automatic groups and serves transactions; a definition that mixes both ways is refused.
#[test]
fn a_table_without_declared_groups_is_created_and_mixing_is_refused() {
    use phasedb_client::{AUTO_GROUP, ColumnDef, ColumnKind, TableDef};
    let s = server("occ", None);
    let mut c = connect(&s);
    let def = |groups: [u8; 2]| TableDef {
        name: format!("auto{}", groups[0]),
        columns: ["balance", "visits"]
            .iter()
            .zip(groups)
            .map(|(name, group)| ColumnDef {
                name: name.to_string(),
                kind: ColumnKind::I64,
                group,
            })
            .collect(),
        capacity: 64,
        ordered: false,
    };
    let t = c.create_table(def([AUTO_GROUP; 2])).unwrap();
    assert_eq!(t.def.columns[1].group, AUTO_GROUP);
    c.execute(vec![put(t.id, 1, 5)]).unwrap();
    assert_eq!(balance(&mut c, t.id, 1), Some(5));
    match c.create_table(def([0, AUTO_GROUP])) {
        Err(ClientError::Server { message, .. }) => {
            assert!(
                message.contains("no group while others have one"),
                "{message}"
            )
        }
        other => panic!("a mixed definition was not refused: {other:?}"),
    }
}
