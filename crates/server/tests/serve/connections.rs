use std::time::Duration;

use phasedb_client::{Arith, AsyncClient, Op, Request, Response};

use crate::{accounts, balance, connect, put, server};

/// 200 connections open at once, each adding to one counter through pipelined async calls: every
/// add is applied once.
#[test]
fn two_hundred_concurrent_connections_are_served() {
    let s = server("occ", None);
    let mut c = connect(&s);
    let t = accounts(&mut c).id;
    c.execute(vec![put(t, 0, 0)]).unwrap();
    let addr = s.addr().to_string();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let conns = 200;
    let adds = 10;
    rt.block_on(async {
        let mut clients = Vec::new();
        for _ in 0..conns {
            clients.push(AsyncClient::connect(&addr, None).await.unwrap());
        }
        let mut tasks = tokio::task::JoinSet::new();
        for client in clients {
            for _ in 0..adds {
                let client = client.clone();
                tasks.spawn(async move {
                    let add = Request::Execute(vec![Op::Apply {
                        table: t,
                        key: 0,
                        column: 0,
                        op: Arith::Add,
                        arg: 1,
                        commute: true,
                    }]);
                    client.call(&add).await.unwrap()
                });
            }
        }
        while let Some(r) = tasks.join_next().await {
            assert!(matches!(r.unwrap(), Response::Results(_)));
        }
    });
    assert_eq!(balance(&mut c, t, 0), Some(conns * adds));
}

/// Shutdown while clients pipeline transfers: every answered request either committed or was
/// refused as shutting down, and the server stops.
#[test]
fn shutdown_finishes_or_refuses_in_flight_requests() {
    let s = server("occ", None);
    let mut c = connect(&s);
    let t = accounts(&mut c).id;
    c.execute(vec![put(t, 0, 0), put(t, 1, 0)]).unwrap();
    let addr = s.addr();
    let clients: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = phasedb_client::Client::connect(addr, None).unwrap();
                let transfer = Request::Execute(vec![
                    Op::Apply {
                        table: t,
                        key: 0,
                        column: 0,
                        op: Arith::Add,
                        arg: -1,
                        commute: false,
                    },
                    Op::Apply {
                        table: t,
                        key: 1,
                        column: 0,
                        op: Arith::Add,
                        arg: 1,
                        commute: false,
                    },
                ]);
                let batch = vec![transfer; 32];
                let (mut committed, mut refused) = (0, 0);
                while let Ok(rs) = c.pipeline(&batch) {
                    for r in rs {
                        match r {
                            Response::Results(_) => committed += 1,
                            Response::Error {
                                kind: phasedb_client::ErrorKind::ShuttingDown,
                                ..
                            } => refused += 1,
                            other => panic!("unexpected {other:?}"),
                        }
                    }
                }
                (committed, refused)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    // Every transfer so far committed whole: the two counters still sum to zero.
    let mut sum_client = connect(&s);
    let pair = sum_client
        .execute(vec![
            Op::Get {
                table: t,
                key: 0,
                columns: vec![0],
            },
            Op::Get {
                table: t,
                key: 1,
                columns: vec![0],
            },
        ])
        .unwrap();
    assert_eq!(sum_of(&pair), 0);
    s.shutdown(Duration::from_secs(5));
    let mut committed = 0;
    for h in clients {
        committed += h.join().unwrap().0;
    }
    assert!(committed > 0);
}

fn sum_of(rows: &[phasedb_client::OpResult]) -> i64 {
    rows.iter()
        .map(|r| match r {
            phasedb_client::OpResult::Row(Some(v)) => match v[0] {
                phasedb_client::Value::I64(b) => b,
                _ => panic!("not a balance"),
            },
            other => panic!("{other:?}"),
        })
        .sum()
}

/// Threads sharing a pool of connections: connections are reused, not opened per request.
#[test]
fn a_pool_reuses_its_connections_across_threads() {
    let s = server("occ", None);
    let mut c = connect(&s);
    let t = accounts(&mut c).id;
    c.execute(vec![put(t, 0, 0)]).unwrap();
    let pool = phasedb_client::Pool::new(s.addr(), None, 4);
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..25 {
                    let mut conn = pool.get().unwrap();
                    conn.execute(vec![Op::Apply {
                        table: t,
                        key: 0,
                        column: 0,
                        op: Arith::Add,
                        arg: 1,
                        commute: true,
                    }])
                    .unwrap();
                }
            });
        }
    });
    assert_eq!(balance(&mut c, t, 0), Some(100));
    assert!(pool.idle() >= 1 && pool.idle() <= 4);
    // 4 threads x 25 requests went over at most 4 pooled connections (plus this test's own).
    assert!(s.connections() <= 5);
}
