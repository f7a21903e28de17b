//! One TCP connection: a reader task that decodes frames and a writer task that batches them.

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::time::Instant;
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};

use crate::Addr;
use crate::wire::{MAX_FRAME, decode_batch, decode_hello, hello_frame};

/// Bytes handed to a writer: one or more complete frames, to be written no earlier than `due`.
pub(crate) struct Outgoing {
    pub due: Option<Instant>,
    pub bytes: Vec<u8>,
}

/// What connection tasks report to the node's event loop.
pub(crate) enum Event<M> {
    Msgs {
        from: Addr,
        msgs: Vec<M>,
    },
    Connected {
        peer: Addr,
        conn: u64,
        tx: UnboundedSender<Outgoing>,
    },
    Closed {
        peer: Addr,
        conn: u64,
        error: Option<String>,
    },
}

type Frames = FramedRead<OwnedReadHalf, LengthDelimitedCodec>;

fn framed(read: OwnedReadHalf) -> Frames {
    FramedRead::new(
        read,
        LengthDelimitedCodec::builder()
            .max_frame_length(MAX_FRAME)
            .new_codec(),
    )
}

/// Reads frames until the connection closes or sends bytes that do not decode.
async fn read_loop<M: DeserializeOwned>(
    mut frames: Frames,
    peer: Addr,
    conn: u64,
    events: UnboundedSender<Event<M>>,
) {
    let error = loop {
        match frames.next().await {
            None => break None,
            Some(Err(e)) => break Some(format!("read from {peer}: {e}")),
            Some(Ok(bytes)) => {
                let mut msgs = Vec::new();
                let decoded = decode_batch(&bytes, &mut msgs);
                if !msgs.is_empty() && events.send(Event::Msgs { from: peer, msgs }).is_err() {
                    return;
                }
                if let Err(e) = decoded {
                    break Some(format!("closing connection from {peer}: {e}"));
                }
            }
        }
    };
    let _ = events.send(Event::Closed { peer, conn, error });
}

/// Writes frames in arrival order, coalescing every frame already due into one `write_all`.
async fn write_loop(mut write: OwnedWriteHalf, mut rx: UnboundedReceiver<Outgoing>) {
    let mut held: Option<Outgoing> = None;
    let mut batch: Vec<u8> = Vec::new();
    loop {
        let first = match held.take() {
            Some(o) => o,
            None => match rx.recv().await {
                Some(o) => o,
                None => return,
            },
        };
        if let Some(due) = first.due {
            tokio::time::sleep_until(due).await;
        }
        batch.clear();
        batch.extend_from_slice(&first.bytes);
        while batch.len() < (1 << 20) {
            match rx.try_recv() {
                Ok(next) if next.due.is_none_or(|d| d <= Instant::now()) => {
                    batch.extend_from_slice(&next.bytes)
                }
                Ok(next) => {
                    held = Some(next);
                    break;
                }
                Err(_) => break,
            }
        }
        if write.write_all(&batch).await.is_err() {
            return;
        }
    }
}

/// Dials `addr` (retrying until `timeout`), announces `me`, then runs the connection to `peer`.
pub(crate) async fn dial<M: DeserializeOwned + Send + 'static>(
    me: Addr,
    peer: Addr,
    addr: SocketAddr,
    conn: u64,
    timeout: Duration,
    rx: UnboundedReceiver<Outgoing>,
    events: UnboundedSender<Event<M>>,
) {
    let deadline = Instant::now() + timeout;
    let mut backoff = Duration::from_millis(5);
    let stream = loop {
        match TcpStream::connect(addr).await {
            Ok(s) => break s,
            Err(e) if Instant::now() + backoff >= deadline => {
                let error = Some(format!("cannot connect to node {peer} at {addr}: {e}"));
                let _ = events.send(Event::Closed { peer, conn, error });
                return;
            }
            Err(_) => {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(200));
            }
        }
    };
    let _ = stream.set_nodelay(true);
    let (read, mut write) = stream.into_split();
    if let Err(e) = write.write_all(&hello_frame(me)).await {
        let error = Some(format!("hello to node {peer} at {addr}: {e}"));
        let _ = events.send(Event::Closed { peer, conn, error });
        return;
    }
    let frames = framed(read);
    tokio::spawn(read_loop(frames, peer, conn, events));
    tokio::spawn(write_loop(write, rx));
}

/// Reads an inbound connection's hello, registers it with the event loop, then runs it.
pub(crate) async fn accept<M: DeserializeOwned + Send + 'static>(
    stream: TcpStream,
    conn: u64,
    events: UnboundedSender<Event<M>>,
) {
    let _ = stream.set_nodelay(true);
    let (read, write) = stream.into_split();
    let mut frames = framed(read);
    let hello = tokio::time::timeout(Duration::from_secs(10), frames.next()).await;
    let peer = match hello {
        Ok(Some(Ok(bytes))) => match decode_hello(&bytes) {
            Ok(peer) => peer,
            Err(e) => {
                eprintln!("phasedb-net: refused a connection: {e}");
                return;
            }
        },
        _ => return,
    };
    let (tx, rx) = unbounded_channel();
    if events.send(Event::Connected { peer, conn, tx }).is_err() {
        return;
    }
    tokio::spawn(read_loop(frames, peer, conn, events));
    tokio::spawn(write_loop(write, rx));
}
