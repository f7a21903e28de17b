//! One client connection: the hello, then batches of pipelined requests.
//!
//! Each read of the socket yields every whole frame that arrived; they are decoded first, then
//! run in order: runs of transaction requests go to the connection's engine thread as one batch,
//! table changes and stats in between run on a blocking thread, pings here. The responses of the
//! batch are written with one write. A durable server's connection has a writer task besides:
//! the reader queues each batch's responses to it and goes on reading and running later requests,
//! and the writer sends them in request order, each commit's once its epoch is durable (so many
//! batches share one epoch's wait). A frame that does not decode, or announces more than the
//! limit, gets an error response (id 0) and the connection is closed: the requests before it run,
//! nothing of it or after it does.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use phasedb_proto::{
    DecodeError, ErrorKind, FrameReader, Hello, HelloReply, MAGIC, Request, Response, VERSION,
    Welcome, decode, decode_request, encode, encode_response, wire,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::{mpsc, watch};

use crate::Shared;
use crate::engine::{DurableEpoch, Held, Item, Job, Session, is_control};

/// How long a new connection has to send its hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

fn error(kind: ErrorKind, message: impl Into<String>) -> Response {
    Response::Error {
        kind,
        message: message.into(),
    }
}

/// What a connection sends back, in request order.
enum Piece {
    /// Encoded responses, ready.
    Bytes(Vec<u8>),
    /// Responses to release once their epoch is durable.
    Held(Held),
}

/// Where a connection's responses go: written at once (no data directory: nothing is ever held),
/// or queued to the connection's writer, which releases held responses as their epochs become
/// durable while the reader goes on reading and running later requests.
enum Sink {
    Direct(OwnedWriteHalf),
    Queue(mpsc::Sender<Piece>, tokio::task::JoinHandle<()>),
}

/// Responses a durable connection may have queued (in pieces) before its reader waits.
const MAX_QUEUED: usize = 256;

impl Sink {
    /// Sends `pieces`; false if the connection is gone.
    async fn send(&mut self, pieces: &mut Vec<Piece>) -> bool {
        match self {
            Sink::Direct(w) => {
                for p in pieces.drain(..) {
                    let Piece::Bytes(b) = p else {
                        unreachable!("a server without a data directory holds no responses")
                    };
                    if w.write_all(&b).await.is_err() {
                        return false;
                    }
                }
                true
            }
            Sink::Queue(q, _) => {
                for p in pieces.drain(..) {
                    if q.send(p).await.is_err() {
                        return false;
                    }
                }
                true
            }
        }
    }

    /// Writes what is queued (held responses once durable), then closes the connection.
    async fn close(self) {
        match self {
            Sink::Direct(mut w) => {
                let _ = w.shutdown().await;
            }
            Sink::Queue(q, writer) => {
                drop(q);
                let _ = writer.await;
            }
        }
    }
}

/// A durable connection's writer: writes the pieces in order, each held one once the durable
/// epoch reaches it (SiloR §4.2: a commit is acknowledged only once durable), coalescing what is
/// ready into one write.
async fn write_held(
    mut w: OwnedWriteHalf,
    mut queue: mpsc::Receiver<Piece>,
    mut durable: watch::Receiver<DurableEpoch>,
) {
    let mut out = Vec::new();
    while let Some(first) = queue.recv().await {
        let mut next = Some(first);
        while let Some(piece) = next.take() {
            match piece {
                Piece::Bytes(b) => out.extend_from_slice(&b),
                Piece::Held(held) => {
                    if !durable.borrow().settles(held.epoch) {
                        if !out.is_empty() && w.write_all(&out).await.is_err() {
                            return;
                        }
                        out.clear();
                    }
                    let failure = match durable.wait_for(|d| d.settles(held.epoch)).await {
                        Ok(d) if d.epoch >= held.epoch => None,
                        Ok(d) => d.failure.clone(),
                        Err(_) => Some("the server stopped before it was durable".to_string()),
                    };
                    crate::engine::release(held, failure, &mut out);
                }
            }
            next = queue.try_recv().ok();
        }
        if w.write_all(&out).await.is_err() {
            return;
        }
        out.clear();
    }
    let _ = w.shutdown().await;
}

/// Serves one connection until it closes, fails, or the server shuts down.
pub async fn serve(mut stream: TcpStream, shared: Arc<Shared>, shard: usize) {
    let _ = stream.set_nodelay(true);
    let mut reader = FrameReader::new(shared.max_frame);
    if !handshake(&mut stream, &mut reader, &shared).await {
        return;
    }
    let (mut stream, w) = stream.into_split();
    let mut sink = match shared.engine.durable() {
        None => Sink::Direct(w),
        Some(durable) => {
            let (tx, rx) = mpsc::channel(MAX_QUEUED);
            Sink::Queue(tx, tokio::spawn(write_held(w, rx, durable)))
        }
    };
    let mut session = Box::new(Session::default());
    let mut batch = Vec::new();
    let mut run = Vec::new();
    let mut raw = Vec::new();
    let mut out = Vec::new();
    let mut pieces = Vec::new();
    let mut shutdown = shared.shutdown.subscribe();
    loop {
        // Read until at least one whole frame (or a bad one) is buffered.
        let mut closing = None;
        batch.clear();
        raw.clear();
        while batch.is_empty() && closing.is_none() {
            loop {
                match reader.next_frame() {
                    Ok(Some(payload)) => match read_request(payload, &mut raw) {
                        Ok(item) => batch.push(item),
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
                sink.close().await;
                return;
            }
        }
        out.clear();
        if shared.shutting_down.load(Ordering::Acquire) {
            for item in batch.drain(..) {
                let id = match item {
                    Item::Request(id, _) => id,
                    Item::Execute(range) => wire::peek(&raw[range]).map_or(0, |p| p.0),
                };
                encode_response(
                    &mut out,
                    id,
                    &error(ErrorKind::ShuttingDown, "the server is shutting down"),
                );
            }
            pieces.push(Piece::Bytes(std::mem::take(&mut out)));
            sink.send(&mut pieces).await;
            sink.close().await;
            return;
        }
        let mut bufs = Buffers {
            run: &mut run,
            raw: &mut raw,
            out: &mut out,
            pieces: &mut pieces,
        };
        let malformed;
        (session, malformed) = run_batch(&mut batch, session, &shared, shard, &mut bufs).await;
        // A one-shot that did not decode is answered by the engine thread, and nothing after it
        // runs; a frame the connection could not read is answered here, after the batch.
        if !malformed && let Some(resp) = &closing {
            encode_response(&mut out, 0, resp);
        }
        let sent = match &mut sink {
            // Nothing held: the batch's responses go out in one write, from the reused buffer.
            Sink::Direct(w) if pieces.is_empty() => w.write_all(&out).await.is_ok(),
            _ => {
                pieces.push(Piece::Bytes(std::mem::take(&mut out)));
                sink.send(&mut pieces).await
            }
        };
        if !sent || closing.is_some() || malformed {
            sink.close().await;
            return;
        }
    }
}

/// A connection's buffers, reused from batch to batch.
struct Buffers<'b> {
    /// The run of engine requests being handed over.
    run: &'b mut Vec<Item>,
    /// The payloads of the batch's one-shot requests.
    raw: &'b mut Vec<u8>,
    /// The encoded responses.
    out: &'b mut Vec<u8>,
    /// The responses in order when some are held for durability.
    pieces: &'b mut Vec<Piece>,
}

/// Reads one request payload: a one-shot `Execute` is kept as bytes in `raw` for the engine
/// thread to read and run ([`crate::oneshot`]; if it does not decode, the engine thread answers
/// `Malformed` and runs nothing after it); any other request is decoded.
fn read_request(payload: &[u8], raw: &mut Vec<u8>) -> Result<Item, DecodeError> {
    if wire::peek(payload).is_some_and(|(_, kind)| kind == wire::REQUEST_EXECUTE) {
        let at = raw.len();
        raw.extend_from_slice(payload);
        return Ok(Item::Execute(at..raw.len()));
    }
    let (id, req) = decode_request(payload)?;
    Ok(Item::Request(id, req))
}

/// Runs the batch in order, appending the encoded responses to `bufs.out`, or, when some are
/// held for durability, moving what `out` has and the held ones to `bufs.pieces` in order.
/// True with the session: a one-shot did not decode, was answered `Malformed`, and nothing after
/// it ran (the connection is to be closed).
async fn run_batch(
    batch: &mut Vec<Item>,
    mut session: Box<Session>,
    shared: &Arc<Shared>,
    shard: usize,
    bufs: &mut Buffers<'_>,
) -> (Box<Session>, bool) {
    let mut requests = batch.drain(..).peekable();
    while requests.peek().is_some() {
        bufs.run.clear();
        while let Some(item) = requests.peek() {
            if let Item::Request(_, r) = item
                && (is_control(r) || matches!(r, Request::Ping | Request::Stats))
            {
                break;
            }
            bufs.run.extend(requests.next());
        }
        if !bufs.run.is_empty() {
            let (tx, rx) = tokio::sync::oneshot::channel();
            shared.engine.submit(
                shard,
                Job {
                    requests: std::mem::take(bufs.run),
                    raw: std::mem::take(bufs.raw),
                    out: std::mem::take(bufs.out),
                    session,
                    reply: tx,
                },
            );
            let back = rx.await.expect("engine threads answer every batch");
            (*bufs.run, *bufs.raw, *bufs.out) = (back.requests, back.raw, back.out);
            session = back.session;
            if let Some(held) = back.held {
                bufs.pieces.push(Piece::Bytes(std::mem::take(bufs.out)));
                bufs.pieces.push(Piece::Held(held));
            }
            if back.malformed {
                // Answered `Malformed`: nothing after it runs, and the connection closes.
                requests.for_each(drop);
                return (session, true);
            }
        }
        // The run stops only before a request of these kinds (or at the end).
        if let Some(Item::Request(id, req)) = requests.next() {
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
            encode_response(bufs.out, id, &resp);
        }
    }
    (session, false)
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
