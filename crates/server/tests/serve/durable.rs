//! A durable server (`--data-dir`): commits answered once durable, while the connection goes on
//! running its later requests.

use std::io::Write;
use std::time::{Duration, Instant};

use phasedb_client::{Request, Response};
use phasedb_proto::{decode_response, encode_request};

use crate::frames::{hello, read_frame};
use crate::{TempDir, accounts, balance, connect, durable_server, put};

/// Polls `key` on `c` until it is present (at most 10 s).
fn await_row(c: &mut phasedb_client::Client, table: u32, key: u64) {
    let start = Instant::now();
    while balance(c, table, key).is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "row {key} never appeared"
        );
    }
}

/// A connection sends a put, then (once another connection sees it applied) a second put. The
/// second one runs while the first one's answer still waits for its epoch to become durable:
/// another connection sees it applied before the first answer is on the socket. (A server that
/// read a connection's next requests only after writing its held answers never shows that: the
/// answer is on the loopback socket before the second put is read.) Both answers come, in
/// order, and nothing is ever answered before the other connection could read it.
#[test]
fn a_durable_connection_runs_later_requests_while_earlier_commits_wait() {
    let dir = TempDir::new("pipelined");
    let s = durable_server("occ", &dir.0).expect("occ is durable");
    let mut b = connect(&s);
    let t = accounts(&mut b).id;
    let mut a = hello(s.addr());
    let mut pipelined = 0;
    let mut id = 0;
    // Each attempt is a race with the epoch boundary; under a loaded machine many attempts may
    // find the first commit already durable, so up to 100 are tried (it stops after 3 overlaps).
    for attempt in 0..100u64 {
        let keys = [2 * attempt + 1, 2 * attempt + 2];
        let mut out = Vec::new();
        for (i, &k) in keys.iter().enumerate() {
            out.clear();
            id += 1;
            encode_request(&mut out, id, &Request::Execute(vec![put(t, k, k as i64)]));
            a.write_all(&out).unwrap();
            await_row(&mut b, t, k);
            if i == 0 {
                continue;
            }
            // The second put ran: was the first one answered by then?
            a.set_nonblocking(true).unwrap();
            let answered = a.peek(&mut [0u8; 1]).is_ok_and(|n| n > 0);
            a.set_nonblocking(false).unwrap();
            pipelined += usize::from(!answered);
        }
        for want in id - 1..=id {
            let (got, resp) = decode_response(&read_frame(&mut a).expect("an answer")).unwrap();
            assert_eq!(got, want);
            assert!(matches!(resp, Response::Results(_)), "{resp:?}");
        }
        if pipelined >= 3 {
            break;
        }
    }
    assert!(
        pipelined >= 1,
        "a later put never ran while an earlier commit waited for durability"
    );
    s.shutdown(Duration::from_secs(5));
}

/// Runs `f` on a thread of its own and fails if it takes longer than `limit`: a server that
/// never answers fails the test instead of hanging it.
fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|e| panic!("{what}: no end within {limit:?} ({e})"))
}

/// Every protocol the server offers either serves durably — pipelined puts, an interactive
/// transaction, a setup procedure that copies the database into a new generation, a stored
/// procedure, then a clean stop and a restart that brings them all back — or is refused at start
/// with the engine's reason, leaving the directory unused.
#[test]
fn every_protocol_serves_durably_across_a_restart_or_is_refused() {
    let mut durable = Vec::new();
    for &protocol in phasedb_server::PROTOCOLS {
        if within(Duration::from_secs(30), protocol, move || {
            restarts(protocol)
        }) {
            durable.push(protocol);
        }
    }
    for protocol in ["occ", "2pl", "swisstm"] {
        assert!(durable.contains(&protocol), "{protocol} is durable");
    }
}

/// One protocol's run of the test above; false if it was refused.
fn restarts(protocol: &'static str) -> bool {
    use phasedb_client::Value;
    let dir = TempDir::new(&format!("every-{protocol}"));
    let s = match durable_server(protocol, &dir.0) {
        Ok(s) => s,
        Err(e) => {
            assert!(
                e.contains(&format!("protocol {protocol} does not support durability")),
                "{e}"
            );
            assert!(!dir.0.join("CURRENT").exists(), "{protocol}");
            return false;
        }
    };
    let mut c = connect(&s);
    let t = accounts(&mut c).id;
    let puts: Vec<Request> = (0..64u64)
        .map(|k| Request::Execute(vec![put(t, k, k as i64 * 10)]))
        .collect();
    for r in c.pipeline(&puts).unwrap() {
        assert!(matches!(r, Response::Results(_)), "{protocol}: {r:?}");
    }
    let mut tx = c.begin().unwrap();
    let read = tx.get(t, 1, &[0]).unwrap();
    assert_eq!(read, Some(vec![Value::I64(10)]), "{protocol}");
    tx.put(t, 100, vec![(0, Value::I64(11))]).unwrap();
    tx.commit().unwrap();
    let setup = [500u64, 2, 8].map(Value::U64).to_vec();
    c.call_procedure("ycsb.setup", setup).unwrap();
    let ycsb = [0, 1, 1, 0, 2, 1, 3, 0, 5].map(Value::U64).to_vec();
    c.call_procedure("ycsb", ycsb.clone()).unwrap();
    c.execute(vec![put(t, 101, 12)]).unwrap();
    s.shutdown(Duration::from_secs(5));

    let s = durable_server(protocol, &dir.0).expect("restarts");
    let mut c = connect(&s);
    for k in 0..64u64 {
        assert_eq!(
            balance(&mut c, t, k),
            Some(k as i64 * 10),
            "{protocol}: {k}"
        );
    }
    assert_eq!(balance(&mut c, t, 100), Some(11), "{protocol}");
    assert_eq!(balance(&mut c, t, 101), Some(12), "{protocol}");
    c.call_procedure("ycsb", ycsb).unwrap();
    s.shutdown(Duration::from_secs(5));
    true
}
