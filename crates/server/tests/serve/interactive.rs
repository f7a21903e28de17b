use phasedb_client::{AbortCause, Client, ClientError, Op, OpResult, Request, Response, Value};

use crate::{accounts, balance, connect, put, server};

fn i64_of(row: Option<Vec<Value>>) -> i64 {
    match row.as_deref() {
        Some([Value::I64(b), ..]) => *b,
        other => panic!("expected a balance, got {other:?}"),
    }
}

#[test]
fn interactive_transactions_see_their_own_writes_and_commit_them() {
    let s = server("occ", None);
    let mut c = connect(&s);
    let t = accounts(&mut c).id;
    c.execute(vec![put(t, 1, 100)]).unwrap();
    let mut tx = c.begin().unwrap();
    let b = i64_of(tx.get(t, 1, &[0]).unwrap());
    assert!(tx.update(t, 1, vec![(0, Value::I64(b - 30))]).unwrap());
    assert!(!tx.put(t, 2, vec![(0, Value::I64(30))]).unwrap());
    assert_eq!(i64_of(tx.get(t, 1, &[0]).unwrap()), 70);
    assert_eq!(i64_of(tx.get(t, 2, &[0]).unwrap()), 30);
    tx.commit().unwrap();
    assert_eq!(balance(&mut c, t, 1), Some(70));
    assert_eq!(balance(&mut c, t, 2), Some(30));
    // A rolled-back transaction applies nothing.
    let mut tx = c.begin().unwrap();
    tx.put(t, 1, vec![(0, Value::I64(0))]).unwrap();
    tx.rollback().unwrap();
    assert_eq!(balance(&mut c, t, 1), Some(70));
}

#[test]
fn a_read_that_changed_before_commit_aborts_it_as_stale() {
    let s = server("occ", None);
    let mut a = connect(&s);
    let mut b = connect(&s);
    let t = accounts(&mut a).id;
    a.execute(vec![put(t, 1, 100)]).unwrap();
    let mut tx = a.begin().unwrap();
    let seen = i64_of(tx.get(t, 1, &[0]).unwrap());
    b.execute(vec![put(t, 1, 500)]).unwrap();
    tx.update(t, 1, vec![(0, Value::I64(seen + 1))]).unwrap();
    let err = tx.commit().unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::Aborted {
                cause: AbortCause::Stale,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(balance(&mut a, t, 1), Some(500));
}

#[test]
fn concurrent_interactive_transfers_with_retry_keep_the_total() {
    let s = server("occ", None);
    let mut c = connect(&s);
    let t = accounts(&mut c).id;
    let accounts_n = 4u64;
    c.execute((0..accounts_n).map(|k| put(t, k, 1000)).collect())
        .unwrap();
    let addr = s.addr();
    let threads: Vec<_> = (0..4u64)
        .map(|i| {
            std::thread::spawn(move || {
                let mut c = Client::connect(addr, None).unwrap();
                for n in 0..50u64 {
                    let (from, to) = ((i + n) % accounts_n, (i + n + 1) % accounts_n);
                    c.transact(|tx| {
                        let f = i64_of(tx.get(t, from, &[0])?);
                        let g = i64_of(tx.get(t, to, &[0])?);
                        tx.update(t, from, vec![(0, Value::I64(f - 7))])?;
                        tx.update(t, to, vec![(0, Value::I64(g + 7))])?;
                        Ok(())
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    let total: i64 = (0..accounts_n)
        .map(|k| balance(&mut c, t, k).unwrap())
        .sum();
    assert_eq!(total, 4000);
    assert!(c.stats().unwrap().committed >= 200);
}

/// A client that vanishes mid-transaction: under 2PL, whose statements take locks while they
/// run, and OCC alike, another client then writes the row at once and nothing of the vanished
/// transaction was applied.
#[test]
fn a_client_killed_mid_transaction_leaves_no_lock_held_and_nothing_applied() {
    for protocol in ["2pl-nowait", "occ"] {
        let s = server(protocol, None);
        let mut c = connect(&s);
        let t = accounts(&mut c).id;
        c.execute(vec![put(t, 1, 100)]).unwrap();
        let mut victim = Client::connect(s.addr(), None).unwrap();
        let mut tx = victim.begin().unwrap();
        tx.update(t, 1, vec![(0, Value::I64(-1))]).unwrap();
        tx.put(t, 2, vec![(0, Value::I64(-1))]).unwrap();
        // The connection dies without a commit or a rollback.
        std::mem::forget(tx);
        drop(victim);
        let r = c
            .execute(vec![Op::Apply {
                table: t,
                key: 1,
                column: 0,
                op: phasedb_client::Arith::Add,
                arg: 1,
                commute: false,
            }])
            .unwrap();
        assert_eq!(r, vec![OpResult::Done(true)], "{protocol}");
        assert_eq!(balance(&mut c, t, 1), Some(101), "{protocol}");
        assert_eq!(balance(&mut c, t, 2), None, "{protocol}");
        // The server answers normally afterwards.
        assert!(matches!(c.call(&Request::Ping), Ok(Response::Pong { .. })));
    }
}

/// A transaction of 6,000 pipelined statements (a put and a read of 3,000 rows) sees its own
/// writes and commits them all; each statement replays only the earlier writes to its row, so it
/// takes a moment rather than the quadratic time of replaying the whole log each time.
#[test]
fn a_long_interactive_transaction_commits_every_statement() {
    let s = server("occ", None);
    let mut c = connect(&s);
    let t = accounts(&mut c).id;
    let Response::Begun { txn } = c.call(&Request::Begin).unwrap() else {
        panic!("begin");
    };
    let n = 3000u64;
    let started = std::time::Instant::now();
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let reqs: Vec<Request> = chunk
            .iter()
            .flat_map(|&k| {
                [
                    Request::Statement {
                        txn,
                        op: put(t, k, k as i64 * 2),
                    },
                    Request::Statement {
                        txn,
                        op: Op::Get {
                            table: t,
                            key: k,
                            columns: vec![0],
                        },
                    },
                ]
            })
            .collect();
        for (i, r) in c.pipeline(&reqs).unwrap().into_iter().enumerate() {
            let k = chunk[i / 2] as i64;
            let want = if i % 2 == 0 {
                OpResult::Done(false)
            } else {
                OpResult::Row(Some(vec![Value::I64(k * 2)]))
            };
            assert_eq!(r, Response::Result(want));
        }
    }
    assert_eq!(
        c.call(&Request::Commit { txn }).unwrap(),
        Response::Committed
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    for k in [0, n / 2, n - 1] {
        assert_eq!(balance(&mut c, t, k), Some(k as i64 * 2));
    }
}
