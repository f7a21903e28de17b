//! One client connection: the hello, then batches of pipelined requests.
//!
//! Each read of the socket yields every whole frame that arrived; they are decoded first, then
//! run in order: runs of transaction requests go to the connection's engine thread as one batch,
//! table changes and stats in between run on a blocking thread, pings here. The responses of the
//! batch are written with one write. A frame that does not decode, or announces more than the
//! limit, gets an error response (id 0) and the connection is closed: the requests before it run,
//! nothing of it or after it does.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use phasedb_proto::{
    DecodeError, ErrorKind, FrameReader, Hello, HelloReply, MAGIC, Request, Response, VERSION,
    Welcome, decode, decode_request, encode, encode_response,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::Shared;
use crate::engine::{Job, Session, is_control};

/// How long a new connection has to send its hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

fn error(kind: ErrorKind, message: impl Into<String>) -> Response {
    Response::Error {
        kind,
        message: message.into(),
    }
}

/// Serves one connection until it closes, fails, or the server shuts down.
pub async fn serve(mut stream: TcpStream, shared: Arc<Shared>, shard: usize) {
    let _ = stream.set_nodelay(true);
    let mut reader = FrameReader::new(shared.max_frame);
    if !handshake(&mut stream, &mut reader, &shared).await {
        return;
    }
    let mut session = Box::new(Session::default());
    let mut batch = Vec::new();
    let mut out = Vec::new();
    let mut shutdown = shared.shutdown.subscribe();
    loop {
        // Read until at least one whole frame (or a bad one) is buffered.
        let mut closing = None;
        batch.clear();
        while batch.is_empty() && closing.is_none() {
            loop {
                match reader.next_frame() {
                    Ok(Some(payload)) => match decode_request(payload) {
                        Ok(r) => batch.push(r),
                        Err(e) => {
                            closing = Some(error(ErrorKind::Malformed, e.to_string()));
                            break;
                        }
                    },
                    Ok(None) => break,
                    Err(e @ DecodeError::TooLarge { .. }) => {
                        closing = Some(error(ErrorKind::TooLarge, e.to_string()));
                        break;
                    }
                    Err(e) => {
                        closing = Some(error(ErrorKind::Malformed, e.to_string()));
                        break;
                    }
                }
            }
            if !batch.is_empty() || closing.is_some() {
                break;
            }
            let buf = reader.spare(64 << 10);
            let n = tokio::select! {
                n = stream.read(buf) => n.unwrap_or(0),
                _ = shutdown.changed() => 0,
            };
            reader.filled(64 << 10, n);
            if n == 0 {
                return;
            }
        }
        out.clear();
        if shared.shutting_down.load(Ordering::Acquire) {
            for (id, _) in batch.drain(..) {
                encode_response(
                    &mut out,
                    id,
                    &error(ErrorKind::ShuttingDown, "the server is shutting down"),
                );
            }
            let _ = stream.write_all(&out).await;
            return;
        }
        session = run_batch(&mut batch, session, &shared, shard, &mut out).await;
        if let Some(resp) = &closing {
            encode_response(&mut out, 0, resp);
        }
        if stream.write_all(&out).await.is_err() || closing.is_some() {
            let _ = stream.shutdown().await;
            return;
        }
    }
}

/// Runs the batch in order, appending the encoded responses to `out`.
async fn run_batch(
    batch: &mut Vec<(u64, Request)>,
    mut session: Box<Session>,
    shared: &Arc<Shared>,
    shard: usize,
    out: &mut Vec<u8>,
) -> Box<Session> {
    let mut requests = std::mem::take(batch).into_iter().peekable();
    while requests.peek().is_some() {
        let mut run = Vec::new();
        while let Some((_, r)) = requests.peek() {
            if is_control(r) || matches!(r, Request::Ping | Request::Stats) {
                break;
            }
            run.push(requests.next().expect("peeked"));
        }
        if !run.is_empty() {
            let (tx, rx) = tokio::sync::oneshot::channel();
            shared.engine.submit(
                shard,
                Job {
                    requests: run,
                    session,
                    reply: tx,
                },
            );
            let (bytes, back, held) = rx.await.expect("engine threads answer every batch");
            out.extend_from_slice(&bytes);
            if let Some(held) = held {
                let (s, epoch) = (shared.clone(), held.epoch);
                let failure = tokio::task::spawn_blocking(move || s.engine.wait_durable(epoch))
                    .await
                    .unwrap_or_else(|e| Err(e.to_string()))
                    .err();
                crate::engine::release(held, failure, out);
            }
            session = back;
        }
        if let Some((id, req)) = requests.next() {
            let resp = match req {
                Request::Ping => Response::Pong {
                    uptime_s: shared.started.elapsed().as_secs_f64(),
                    connections: shared.connections.load(Ordering::Relaxed),
                },
                Request::Stats => {
                    let s = shared.clone();
                    let mut stats = tokio::task::spawn_blocking(move || s.engine.stats())
                        .await
                        .unwrap_or_default();
                    stats.connections = shared.connections.load(Ordering::Relaxed);
                    stats.uptime_s = shared.started.elapsed().as_secs_f64();
                    Response::Stats(stats)
                }
                req => {
                    let s = shared.clone();
                    tokio::task::spawn_blocking(move || s.engine.control(&req))
                        .await
                        .unwrap_or_else(|e| error(ErrorKind::BadTable, e.to_string()))
                }
            };
            encode_response(out, id, &resp);
        }
    }
    session
}

/// Reads and checks the hello; answers it. False: the connection is refused (and closed).
async fn handshake(stream: &mut TcpStream, reader: &mut FrameReader, shared: &Shared) -> bool {
    let hello = tokio::time::timeout(HELLO_TIMEOUT, async {
        loop {
            match reader.next_frame() {
                Ok(Some(p)) => return Some(decode::<Hello>(p).ok()),
                Ok(None) => {}
                Err(_) => return Some(None),
            }
            let buf = reader.spare(4096);
            let n = stream.read(buf).await.unwrap_or(0);
            reader.filled(4096, n);
            if n == 0 {
                return None;
            }
        }
    })
    .await;
    let hello = match hello {
        Ok(Some(h)) => h,
        _ => return false,
    };
    let reply: HelloReply = match hello {
        None => Err((
            ErrorKind::Malformed,
            "the first frame is not a hello".into(),
        )),
        Some(h) if h.magic != MAGIC || h.version != VERSION => Err((
            ErrorKind::Version,
            format!(
                "this server speaks phasedb protocol version {VERSION}; the hello asked for {}",
                h.version
            ),
        )),
        Some(h) if !token_ok(shared.token.as_deref(), h.token.as_deref()) => Err((
            ErrorKind::Unauthorized,
            "missing or wrong token".to_string(),
        )),
        Some(_) => Ok(Welcome {
            version: VERSION,
            protocol: shared.engine.protocol().to_string(),
            threads: shared.engine.threads() as u32,
        }),
    };
    let ok = reply.is_ok();
    let mut out = Vec::new();
    encode(&mut out, &reply);
    if stream.write_all(&out).await.is_err() {
        return false;
    }
    if !ok {
        let _ = stream.shutdown().await;
    }
    ok
}

/// Whether `given` is the server's token (compared in time independent of where they differ).
fn token_ok(expected: Option<&str>, given: Option<&str>) -> bool {
    let Some(expected) = expected else {
        return true;
    };
    let given = given.unwrap_or("");
    let (a, b) = (expected.as_bytes(), given.as_bytes());
    let mut diff = (a.len() != b.len()) as u8;
    for (i, x) in a.iter().enumerate() {
        diff |= x ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
}
