//! An async connection: any number of tasks may have requests in flight on it at once; a reader
//! task hands each response to the caller waiting for its id.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use phasedb_proto::{DEFAULT_MAX_FRAME, FrameReader, Request, Response, decode_response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::oneshot;

use crate::{ClientError, Result, Welcome, check, hello_frame, welcome};

type Waiters = Arc<Mutex<Option<HashMap<u64, oneshot::Sender<Response>>>>>;

/// An async, pipelined connection (clone the `Arc` to share it between tasks).
pub struct AsyncClient {
    writer: tokio::sync::Mutex<(OwnedWriteHalf, Vec<u8>, u64)>,
    waiters: Waiters,
    welcome: Welcome,
    reader: tokio::task::JoinHandle<()>,
}

impl AsyncClient {
    /// Connects and says hello.
    pub async fn connect(addr: &str, token: Option<&str>) -> Result<Arc<AsyncClient>> {
        let mut stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        stream.write_all(&hello_frame(token)).await?;
        let mut reader = FrameReader::new(DEFAULT_MAX_FRAME * 4);
        let welcome = loop {
            if let Some(p) = reader
                .next_frame()
                .map_err(|e| ClientError::Protocol(e.to_string()))?
            {
                break welcome(p)?;
            }
            let buf = reader.spare(4096);
            let n = stream.read(buf).await?;
            reader.filled(4096, n);
            if n == 0 {
                return Err(ClientError::Io(std::io::ErrorKind::UnexpectedEof.into()));
            }
        };
        let (mut read, write) = stream.into_split();
        let waiters: Waiters = Arc::new(Mutex::new(Some(HashMap::new())));
        let w = waiters.clone();
        let reader = tokio::spawn(async move {
            loop {
                loop {
                    match reader.next_frame() {
                        Ok(Some(p)) => {
                            let Ok((id, resp)) = decode_response(p) else {
                                w.lock().take();
                                return;
                            };
                            let waiter = w.lock().as_mut().and_then(|m| m.remove(&id));
                            if let Some(tx) = waiter {
                                let _ = tx.send(resp);
                            }
                        }
                        Ok(None) => break,
                        Err(_) => {
                            w.lock().take();
                            return;
                        }
                    }
                }
                let buf = reader.spare(64 << 10);
                let n = read.read(buf).await.unwrap_or(0);
                reader.filled(64 << 10, n);
                if n == 0 {
                    // Closed: every waiter's sender is dropped, so each call sees an error.
                    w.lock().take();
                    return;
                }
            }
        });
        Ok(Arc::new(AsyncClient {
            writer: tokio::sync::Mutex::new((write, Vec::new(), 1)),
            waiters,
            welcome,
            reader,
        }))
    }

    /// What the server said at hello.
    pub fn welcome(&self) -> &Welcome {
        &self.welcome
    }

    /// Sends `request` and waits for its response (errors and aborts as [`ClientError`]). Calls
    /// from many tasks are pipelined on the one connection.
    pub async fn call(&self, request: &Request) -> Result<Response> {
        let (tx, rx) = oneshot::channel();
        {
            let mut w = self.writer.lock().await;
            let (half, buf, next) = &mut *w;
            let id = *next;
            *next += 1;
            match self.waiters.lock().as_mut() {
                Some(m) => m.insert(id, tx),
                None => return Err(ClientError::Io(std::io::ErrorKind::BrokenPipe.into())),
            };
            buf.clear();
            phasedb_proto::encode_request(buf, id, request);
            half.write_all(buf).await?;
        }
        let resp = rx
            .await
            .map_err(|_| ClientError::Io(std::io::ErrorKind::ConnectionReset.into()))?;
        check(resp)
    }
}

impl Drop for AsyncClient {
    fn drop(&mut self) {
        self.reader.abort();
    }
}
