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

/// Raises this process's soft limit of open files toward `want` (at most the hard limit); returns
/// the limit now in force.
fn raise_fd_limit(want: u64) -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        if lim.rlim_cur < want {
            let raised = libc::rlimit {
                rlim_cur: want.min(lim.rlim_max),
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim = raised;
            }
        }
    }
    lim.rlim_cur
}

/// A thousand connections open at once (fewer only if the hard limit of open files cannot hold
/// both ends of them), each running an interactive transaction and a one-shot add, within a
/// minute: every transaction commits, and a connection's statements see its own writes.
#[test]
fn a_thousand_concurrent_connections_each_run_a_transaction() {
    // Both ends of every connection live in this process, plus the runtime's and the test's.
    let limit = raise_fd_limit(4096);
    let conns = 1000u64.min(limit.saturating_sub(200) / 2);
    if conns < 1000 {
        eprintln!("open-file limit {limit}: {conns} connections");
    }
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
    let peak = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(60), async {
            let mut clients = Vec::new();
            for _ in 0..conns {
                clients.push(AsyncClient::connect(&addr, None).await.unwrap());
            }
            let mut tasks = tokio::task::JoinSet::new();
            for (i, client) in clients.into_iter().enumerate() {
                let key = 1 + i as u64;
                tasks.spawn(async move {
                    let Response::Begun { txn } = client.call(&Request::Begin).await.unwrap()
                    else {
                        panic!("begin");
                    };
                    let stmt = |op| Request::Statement { txn, op };
                    let r = client.call(&stmt(put(t, key, key as i64))).await.unwrap();
                    assert_eq!(r, Response::Result(phasedb_client::OpResult::Done(false)));
                    let get = Op::Get {
                        table: t,
                        key,
                        columns: vec![0],
                    };
                    let r = client.call(&stmt(get)).await.unwrap();
                    let want = vec![phasedb_client::Value::I64(key as i64)];
                    assert_eq!(
                        r,
                        Response::Result(phasedb_client::OpResult::Row(Some(want)))
                    );
                    let r = client.call(&Request::Commit { txn }).await.unwrap();
                    assert_eq!(r, Response::Committed);
                    let add = Request::Execute(vec![Op::Apply {
                        table: t,
                        key: 0,
                        column: 0,
                        op: Arith::Add,
                        arg: 1,
                        commute: true,
                    }]);
                    assert!(matches!(
                        client.call(&add).await.unwrap(),
                        Response::Results(_)
                    ));
                    client
                });
            }
            let mut done = Vec::new();
            while let Some(r) = tasks.join_next().await {
                done.push(r.unwrap());
            }
            // Every connection is still open here.
            let peak = s.connections();
            drop(done);
            peak
        })
        .await
        .expect("a thousand connections are served within a minute")
    });
    // The test's own blocking connection is open too.
    assert_eq!(peak, conns + 1);
    assert_eq!(balance(&mut c, t, 0), Some(conns as i64));
    for key in [1, conns / 2, conns] {
        assert_eq!(balance(&mut c, t, key), Some(key as i64));
    }
}

/// Each engine thread serves its own connections: table changes, which pause every engine
/// thread, interleave with clients on both threads adding to counters, and neither side stalls
/// or loses an add.
#[test]
fn tables_change_while_connections_on_every_engine_thread_run_transactions() {
    let s = server("occ", None);
    let mut c = connect(&s);
    let t = accounts(&mut c).id;
    let clients = 4u64;
    let adds = 300;
    for k in 0..clients {
        c.execute(vec![put(t, k, 0)]).unwrap();
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let workers: Vec<_> = (0..clients)
        .map(|k| {
            let mut w = connect(&s);
            let tx = tx.clone();
            std::thread::spawn(move || {
                for _ in 0..adds {
                    w.execute(vec![Op::Apply {
                        table: t,
                        key: k,
                        column: 0,
                        op: Arith::Add,
                        arg: 1,
                        commute: false,
                    }])
                    .unwrap();
                }
                tx.send(()).unwrap();
            })
        })
        .collect();
    drop(tx);
    let mut changes = 0;
    loop {
        let name = format!("extra{changes}");
        c.create_table(phasedb_client::TableDef {
            name: name.clone(),
            ..crate::accounts_def()
        })
        .expect("a table is created while transactions run");
        c.drop_table(&name).expect("and dropped");
        changes += 1;
        match rx.recv_timeout(Duration::from_millis(1)) {
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            _ => assert!(changes < 100_000, "the clients stalled"),
        }
    }
    for w in workers {
        w.join().unwrap();
    }
    assert!(changes > 0);
    for k in 0..clients {
        assert_eq!(balance(&mut c, t, k), Some(adds));
    }
}
