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
    for attempt in 0..20u64 {
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
