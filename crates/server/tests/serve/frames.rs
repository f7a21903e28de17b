use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use phasedb_client::{Client, ClientError, ErrorKind, Request, Response};
use phasedb_proto::{
    FrameReader, HelloReply, MAGIC, VERSION, decode, decode_response, encode, encode_request,
};

use crate::{accounts, balance, connect, put, server};

/// A connection that said hello; returns it.
pub fn hello(addr: std::net::SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = Vec::new();
    encode(
        &mut out,
        &phasedb_proto::Hello {
            magic: MAGIC,
            version: VERSION,
            token: None,
        },
    );
    s.write_all(&out).unwrap();
    let payload = read_frame(&mut s).expect("welcome");
    assert!(decode::<HelloReply>(&payload).unwrap().is_ok());
    s
}

thread_local! {
    /// Bytes read past the last frame, per test thread (one connection is read at a time).
    static READER: std::cell::RefCell<FrameReader> = std::cell::RefCell::new(FrameReader::new(1 << 24));
}

/// The next frame's payload; `None` once the server closed the connection.
pub fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    READER.with(|r| read_frame_with(&mut r.borrow_mut(), s))
}

fn read_frame_with(reader: &mut FrameReader, s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = [0u8; 4096];
    loop {
        if let Some(p) = reader.next_frame().unwrap() {
            return Some(p.to_vec());
        }
        let n = s.read(&mut buf).unwrap_or(0);
        if n == 0 {
            return None;
        }
        reader.extend(&buf[..n]);
    }
}

/// Reads until the server closes; true if it did (rather than time out).
fn closed(s: &mut TcpStream) -> bool {
    READER.with(|r| *r.borrow_mut() = FrameReader::new(1 << 24));
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

#[test]
fn malformed_truncated_and_oversized_frames_get_an_error_or_close_and_apply_nothing() {
    let s = server("occ", None);
    let mut c = connect(&s);
    let t = accounts(&mut c).id;
    let mut write = Vec::new();
    encode_request(&mut write, 7, &Request::Execute(vec![put(t, 1, 42)]));

    // Garbage after a valid frame: the valid one runs, the garbage gets a Malformed error (id 0)
    // and the connection is closed.
    let mut conn = hello(s.addr());
    let mut bytes = write.clone();
    bytes.extend_from_slice(&5u32.to_be_bytes());
    bytes.extend_from_slice(&[0xff; 5]);
    conn.write_all(&bytes).unwrap();
    let (id, r) = decode_response(&read_frame(&mut conn).unwrap()).unwrap();
    assert_eq!((id, matches!(r, Response::Results(_))), (7, true));
    let (id, r) = decode_response(&read_frame(&mut conn).unwrap()).unwrap();
    assert!(
        matches!(
            r,
            Response::Error {
                kind: ErrorKind::Malformed,
                ..
            }
        ) && id == 0,
        "{r:?}"
    );
    assert!(closed(&mut conn));
    assert_eq!(balance(&mut c, t, 1), Some(42));

    // A valid write whose payload is corrupted in its value: refused, not applied.
    let mut conn = hello(s.addr());
    let mut other = Vec::new();
    encode_request(&mut other, 8, &Request::Execute(vec![put(t, 2, 42)]));
    other.push(0); // a trailing byte after the message
    let len = (other.len() - 4) as u32;
    other[..4].copy_from_slice(&len.to_be_bytes());
    conn.write_all(&other).unwrap();
    let (_, r) = decode_response(&read_frame(&mut conn).unwrap()).unwrap();
    assert!(
        matches!(
            r,
            Response::Error {
                kind: ErrorKind::Malformed,
                ..
            }
        ),
        "{r:?}"
    );
    assert!(closed(&mut conn));

    // A write cut short, then the client goes away: nothing applied.
    let mut conn = hello(s.addr());
    let mut cut = Vec::new();
    encode_request(&mut cut, 9, &Request::Execute(vec![put(t, 3, 42)]));
    conn.write_all(&cut[..cut.len() - 2]).unwrap();
    drop(conn);

    // A length above the server's limit: TooLarge, then closed, before the bytes arrive.
    let mut conn = hello(s.addr());
    conn.write_all(&(64u32 << 20).to_be_bytes()).unwrap();
    let (_, r) = decode_response(&read_frame(&mut conn).unwrap()).unwrap();
    assert!(
        matches!(
            r,
            Response::Error {
                kind: ErrorKind::TooLarge,
                ..
            }
        ),
        "{r:?}"
    );
    assert!(closed(&mut conn));

    // A hello of another version, or not a hello at all: refused and closed.
    let mut conn = TcpStream::connect(s.addr()).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut out = Vec::new();
    encode(
        &mut out,
        &phasedb_proto::Hello {
            magic: MAGIC,
            version: VERSION + 1,
            token: None,
        },
    );
    conn.write_all(&out).unwrap();
    let reply: HelloReply = decode(&read_frame(&mut conn).unwrap()).unwrap();
    assert!(matches!(reply, Err((ErrorKind::Version, _))));
    assert!(closed(&mut conn));
    let mut conn = TcpStream::connect(s.addr()).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    conn.write_all(&write).unwrap();
    let reply: HelloReply = decode(&read_frame(&mut conn).unwrap()).unwrap();
    assert!(matches!(reply, Err((ErrorKind::Malformed, _))));
    assert!(closed(&mut conn));

    assert_eq!(balance(&mut c, t, 2), None);
    assert_eq!(balance(&mut c, t, 3), None);
    c.ping().unwrap();
}

#[test]
fn a_server_with_a_token_refuses_clients_without_it() {
    let s = server("occ", Some("s3cret"));
    assert!(matches!(
        Client::connect(s.addr(), None),
        Err(ClientError::Server {
            kind: ErrorKind::Unauthorized,
            ..
        })
    ));
    assert!(matches!(
        Client::connect(s.addr(), Some("s3cre")),
        Err(ClientError::Server {
            kind: ErrorKind::Unauthorized,
            ..
        })
    ));
    let mut c = Client::connect(s.addr(), Some("s3cret")).unwrap();
    c.ping().unwrap();
}
