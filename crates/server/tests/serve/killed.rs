//! Durable servers in a process of their own, killed with SIGKILL (or stopped with SIGTERM) and
//! restarted on their data directory. The child process is this test binary running
//! [`child_server`], which serves until a signal.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use phasedb_client::{Client, Op, OpResult, Request, Response, Value};
use phasedb_workloads::tpcc::schema::order_key;

use crate::{TempDir, durable_server};

const CHILD_DIR: &str = "PHASEDB_SERVE_TEST_DIR";
const CHILD_PROTOCOL: &str = "PHASEDB_SERVE_TEST_PROTOCOL";

/// The child side: a durable server of the protocol and directory its parent named, serving
/// until SIGINT or SIGTERM (or SIGKILL). Does nothing when run as a test.
#[test]
#[ignore = "a server process for the tests of this module, which start it"]
fn child_server() {
    let (Ok(dir), Ok(protocol)) = (std::env::var(CHILD_DIR), std::env::var(CHILD_PROTOCOL)) else {
        return;
    };
    match durable_server(&protocol, Path::new(&dir)) {
        Ok(s) => {
            println!("serving on {}", s.addr());
            s.run_until_signal().expect("stops on a signal");
        }
        Err(e) => println!("refused: {e}"),
    }
}

/// A server process of `protocol` durable in `dir` and its address, or the engine's refusal.
fn spawn(protocol: &str, dir: &Path) -> Result<(Child, String), String> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "killed::child_server",
            "--nocapture",
        ])
        .env(CHILD_DIR, dir)
        .env(CHILD_PROTOCOL, protocol)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the server process");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    while let Some(Ok(line)) = lines.next() {
        if let Some(addr) = line.strip_prefix("serving on ") {
            let addr = addr.to_string();
            // Read what else it prints (its test harness's verdict), so no write of it fails.
            std::thread::spawn(move || lines.for_each(drop));
            return Ok((child, addr));
        }
        if let Some(e) = line.strip_prefix("refused: ") {
            let e = e.to_string();
            child.wait().unwrap();
            return Err(e);
        }
    }
    let status = child.wait().unwrap();
    panic!("the server process of {protocol} ended ({status}) without a word");
}

fn sigkill(mut child: Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Sends SIGTERM and waits for a clean exit.
fn sigterm(mut child: Child) {
    // SAFETY: kill(2) on our own child's pid, which has not been waited for.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    assert!(child.wait().unwrap().success(), "a clean stop");
}

fn kv(c: &mut Client) -> u32 {
    c.create_table(phasedb_client::TableDef {
        name: "kv".into(),
        columns: vec![phasedb_client::ColumnDef {
            name: "v".into(),
            kind: phasedb_client::ColumnKind::U64,
            group: 0,
        }],
        capacity: 1 << 16,
        ordered: false,
    })
    .unwrap()
    .id
}

/// Writers pipelining puts of `3 * key` to `table` until `stop` (or 100K each): the keys whose
/// puts were answered committed before the connection went.
fn pipelined_puts(addr: &str, table: u32, first: u64, stop: &AtomicBool) -> Vec<u64> {
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..2u64)
            .map(|w| {
                s.spawn(move || {
                    let mut c = Client::connect(addr, None).unwrap();
                    let mut acked = Vec::new();
                    let mut next = first + w * 1_000_000;
                    while !stop.load(Ordering::Relaxed) && acked.len() < 100_000 {
                        let keys: Vec<u64> = (next..next + 16).collect();
                        next += 16;
                        let reqs: Vec<Request> = keys
                            .iter()
                            .map(|&key| {
                                Request::Execute(vec![Op::Put {
                                    table,
                                    key,
                                    values: vec![(0, Value::U64(key * 3))],
                                }])
                            })
                            .collect();
                        let Ok(resps) = c.pipeline(&reqs) else {
                            break;
                        };
                        for (r, &k) in resps.iter().zip(&keys) {
                            assert!(matches!(r, Response::Results(_)), "{r:?}");
                            acked.push(k);
                        }
                    }
                    acked
                })
            })
            .collect();
        writers
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

/// Runs `f` (which starts `writers`) for `ms`, then `end`s the server and stops the writers.
fn load_then<T: Send>(
    ms: u64,
    writers: impl FnOnce(&AtomicBool) -> T + Send,
    end: impl FnOnce(),
) -> T {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let running = s.spawn(|| writers(&stop));
        std::thread::sleep(Duration::from_millis(ms));
        end();
        stop.store(true, Ordering::Relaxed);
        running.join().unwrap()
    })
}

fn present(c: &mut Client, table: u32, key: u64) -> bool {
    let get = Op::Get {
        table,
        key,
        columns: vec![0],
    };
    matches!(c.execute(vec![get]).unwrap()[..], [OpResult::Row(Some(_))])
}

/// Every protocol the server offers either serves durably in a process of its own — puts
/// answered before a SIGKILL are all back after a restart, as are those answered before a
/// SIGTERM — or is refused at start with the engine's reason, and nothing is left in the
/// directory.
#[test]
fn every_protocol_keeps_its_answered_puts_through_sigkill_and_sigterm_or_is_refused() {
    let mut durable = Vec::new();
    for &protocol in phasedb_server::PROTOCOLS {
        let dir = TempDir::new(&format!("killed-{protocol}"));
        let (child, addr) = match spawn(protocol, &dir.0) {
            Ok(started) => started,
            Err(e) => {
                assert!(
                    e.contains(&format!("protocol {protocol} does not support durability")),
                    "{e}"
                );
                assert!(!dir.0.join("CURRENT").exists(), "{protocol}");
                continue;
            }
        };
        durable.push(protocol);
        let table = kv(&mut Client::connect(&addr, None).unwrap());
        let mut acked = load_then(
            300,
            |stop| pipelined_puts(&addr, table, 1, stop),
            || sigkill(child),
        );
        let killed = acked.len();
        assert!(killed > 0, "{protocol}: nothing answered before the kill");
        let (child, addr) = spawn(protocol, &dir.0).expect("restarts");
        acked.extend(load_then(
            200,
            |stop| pipelined_puts(&addr, table, 1 << 40, stop),
            || {},
        ));
        sigterm(child);
        let (child, addr) = spawn(protocol, &dir.0).expect("restarts");
        let mut c = Client::connect(&addr, None).unwrap();
        let gets: Vec<Request> = acked
            .iter()
            .map(|&key| {
                Request::Execute(vec![Op::Get {
                    table,
                    key,
                    columns: vec![0],
                }])
            })
            .collect();
        for (chunk, keys) in gets.chunks(256).zip(acked.chunks(256)) {
            for (r, &key) in c.pipeline(chunk).unwrap().iter().zip(keys) {
                let want = OpResult::Row(Some(vec![Value::U64(key * 3)]));
                assert!(
                    matches!(r, Response::Results(v) if v[..] == [want.clone()]),
                    "{protocol}: put {key} answered, then {r:?}"
                );
            }
        }
        sigterm(child);
        eprintln!(
            "{protocol}: {killed} puts answered before SIGKILL and {} before SIGTERM, all back",
            acked.len() - killed
        );
    }
    for protocol in ["occ", "2pl", "swisstm"] {
        assert!(durable.contains(&protocol), "{protocol} serves durably");
    }
}

/// What a TPC-C terminal was answered.
#[derive(Default)]
struct Answered {
    /// (district, order id) of every NewOrder answered committed.
    orders: Vec<(u32, u32)>,
    /// The history row of every Payment answered committed.
    payments: Vec<u64>,
    /// (district, order id) of every order a Delivery answered committed delivered.
    delivered: Vec<(u32, u32)>,
}

/// A terminal: TPC-C's procedures by name on warehouse 1, 8 pipelined at a time, until `stop`
/// or the connection goes, in about the standard mix's proportions (clause 5.2.3: 45% NewOrder,
/// 43% Payment, 4% each of Order-Status, Delivery and Stock-Level; here 10, 10, 1, 1, 1 of 23).
fn terminal(addr: &str, stop: &AtomicBool, first: usize) -> Answered {
    let mut answered = Answered::default();
    let Ok(mut c) = Client::connect(addr, None) else {
        return answered;
    };
    let mut names = ["tpcc.new_order", "tpcc.payment"].repeat(10);
    names.extend(["tpcc.order_status", "tpcc.delivery", "tpcc.stock_level"]);
    let mut i = first;
    while !stop.load(Ordering::Relaxed) {
        let batch: Vec<&str> = (0..8).map(|j| names[(i + j) % names.len()]).collect();
        i += 5;
        let reqs: Vec<Request> = batch
            .iter()
            .map(|&name| Request::Call {
                name: name.into(),
                args: vec![Value::U64(1)],
            })
            .collect();
        let Ok(resps) = c.pipeline(&reqs) else {
            break;
        };
        for (resp, &name) in resps.into_iter().zip(&batch) {
            match (name, resp) {
                ("tpcc.new_order", Response::Values(v)) => match v[..] {
                    [Value::U64(d), Value::U64(o)] => answered.orders.push((d as u32, o as u32)),
                    ref other => panic!("new_order answered {other:?}"),
                },
                ("tpcc.payment", Response::Values(v)) => match v[..] {
                    [Value::U64(h)] => answered.payments.push(h),
                    ref other => panic!("payment answered {other:?}"),
                },
                ("tpcc.delivery", Response::Values(v)) => {
                    assert_eq!(v.len(), 10, "delivery answered {v:?}");
                    for (d, o) in v.iter().enumerate() {
                        match *o {
                            Value::U64(0) => {}
                            Value::U64(o) => answered.delivered.push((d as u32 + 1, o as u32)),
                            ref other => panic!("delivery answered {other:?}"),
                        }
                    }
                }
                (_, Response::Values(_)) => {}
                // The 1% of NewOrders TPC-C rolls back.
                ("tpcc.new_order", Response::Aborted { .. }) => {}
                (name, other) => panic!("{name} answered {other:?}"),
            }
        }
    }
    answered
}

/// TPC-C through a durable server: three terminals run the five procedures by name while the
/// server process is killed with SIGKILL at a random moment, three times. After each restart
/// every NewOrder and Payment answered committed (in any round) is there, every order a Delivery
/// answered is delivered (its new-order row gone), and TPC-C's consistency conditions hold
/// (`tpcc.check`, condition 11 counting the deliveries).
#[test]
fn tpcc_keeps_every_answered_transaction_through_sigkills() {
    let dir = TempDir::new("killed-tpcc");
    let (mut child, mut addr) = spawn("occ", &dir.0).expect("occ is durable");
    Client::connect(&addr, None)
        .unwrap()
        .call_procedure("tpcc.setup", vec![Value::U64(1)])
        .unwrap();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    let mut all = Answered::default();
    for round in 0..3u64 {
        // Killed 0.2 to 1 s into the round.
        let ms = 200 + (seed >> (8 * round)) % 800;
        let answered: Vec<Answered> = load_then(
            ms,
            |stop| {
                std::thread::scope(|s| {
                    let terminals: Vec<_> = (0..3)
                        .map(|t| {
                            let addr = &addr;
                            s.spawn(move || terminal(addr, stop, t * 2))
                        })
                        .collect();
                    terminals.into_iter().map(|h| h.join().unwrap()).collect()
                })
            },
            || sigkill(child),
        );
        for a in answered {
            all.orders.extend(a.orders);
            all.payments.extend(a.payments);
            all.delivered.extend(a.delivered);
        }
        (child, addr) = spawn("occ", &dir.0).expect("restarts");
        let mut c = Client::connect(&addr, None).unwrap();
        let orders = c.describe_table("orders").unwrap().id;
        let history = c.describe_table("history").unwrap().id;
        let new_order = c.describe_table("new_order").unwrap().id;
        for &(d, o) in &all.orders {
            assert!(present(&mut c, orders, order_key(1, d, o)), "order {d}/{o}");
        }
        for &h in &all.payments {
            assert!(present(&mut c, history, h), "history row {h:#x}");
        }
        for &(d, o) in &all.delivered {
            let key = order_key(1, d, o);
            assert!(present(&mut c, orders, key), "delivered order {d}/{o}");
            assert!(
                !present(&mut c, new_order, key),
                "order {d}/{o} undelivered"
            );
        }
        let verdict = c.call_procedure("tpcc.check", vec![]).unwrap();
        let why = verdict.first().map(|v| match v {
            Value::Bytes(b) => String::from_utf8_lossy(b).to_string(),
            other => format!("{other:?}"),
        });
        assert_eq!(why, None, "round {round} (seed {seed})");
        eprintln!(
            "round {round}: killed {ms} ms in; {} NewOrders, {} Payments and {} delivered orders \
             answered so far, all back, consistent",
            all.orders.len(),
            all.payments.len(),
            all.delivered.len()
        );
    }
    assert!(
        !all.orders.is_empty() && !all.payments.is_empty() && !all.delivered.is_empty(),
        "nothing answered"
    );
    sigterm(child);
}
