//! Client of `phasedb serve` (protocol: `docs/wire-protocol.md`).
//!
//! - [`Client`]: a blocking connection. [`Client::call`] sends one request and waits;
//!   [`Client::pipeline`] sends many before reading their responses (one write, one round trip).
//! - [`Transaction`]: an interactive transaction on a [`Client`]; [`Client::transact`] runs a
//!   closure as one and retries it when the server reports a conflict or stale reads.
//! - [`Pool`]: blocking connections shared by threads.
//! - [`AsyncClient`]: a tokio connection on which any number of tasks have requests in flight at
//!   once, matched to their responses by id.
//!
//! ```no_run
//! use phasedb_client::{Client, ColumnDef, ColumnKind, Op, TableDef, Value};
//! let mut c = Client::connect("127.0.0.1:7600", None)?;
//! let t = c.create_table(TableDef {
//!     name: "accounts".into(),
//!     columns: vec![ColumnDef { name: "balance".into(), kind: ColumnKind::I64, group: 0 }],
//!     capacity: 1000,
//!     ordered: false,
//! })?;
//! c.execute(vec![Op::Put { table: t.id, key: 1, values: vec![(0, Value::I64(100))] }])?;
//! c.transact(|tx| {
//!     let balance = match tx.get(t.id, 1, &[0])? {
//!         Some(row) => row[0].clone(),
//!         None => Value::I64(0),
//!     };
//!     let Value::I64(b) = balance else { unreachable!() };
//!     tx.update(t.id, 1, vec![(0, Value::I64(b + 1))])?;
//!     Ok(())
//! })?;
//! # Ok::<(), phasedb_client::ClientError>(())
//! ```

mod async_client;
mod pool;

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};

pub use async_client::AsyncClient;
pub use phasedb_proto::{
    AUTO_GROUP, AbortCause, Arith, ColumnDef, ColumnKind, ErrorKind, Op, OpResult, OrderedOp,
    Request, Response, StatsReply, TableDef, TableInfo, Value, Welcome,
};
use phasedb_proto::{
    DEFAULT_MAX_FRAME, FrameReader, Hello, HelloReply, MAGIC, VERSION, decode, decode_response,
    encode, encode_request,
};
pub use pool::{Pool, Pooled};

/// What went wrong with a request.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The server sent bytes this client cannot decode.
    #[error("protocol: {0}")]
    Protocol(String),
    /// The server refused the request.
    #[error("server error {kind:?}: {message}")]
    Server { kind: ErrorKind, message: String },
    /// The transaction did not commit; nothing of it was applied.
    #[error("aborted ({cause:?}): {message}")]
    Aborted { cause: AbortCause, message: String },
    /// A response of another kind than the request asks for.
    #[error("unexpected response {0:?}")]
    Unexpected(Box<Response>),
}

impl ClientError {
    /// Whether running the transaction again may succeed (a conflict or stale reads).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ClientError::Aborted {
                cause: AbortCause::Conflict | AbortCause::Stale,
                ..
            }
        )
    }
}

/// Result of a client call.
pub type Result<T> = std::result::Result<T, ClientError>;

/// Turns error and abort responses into errors.
pub fn check(resp: Response) -> Result<Response> {
    match resp {
        Response::Error { kind, message } => Err(ClientError::Server { kind, message }),
        Response::Aborted { cause, message } => Err(ClientError::Aborted { cause, message }),
        r => Ok(r),
    }
}

/// The hello frame for `token`.
pub(crate) fn hello_frame(token: Option<&str>) -> Vec<u8> {
    let mut out = Vec::new();
    encode(
        &mut out,
        &Hello {
            magic: MAGIC,
            version: VERSION,
            token: token.map(str::to_string),
        },
    );
    out
}

/// Reads the hello's answer.
pub(crate) fn welcome(payload: &[u8]) -> Result<Welcome> {
    match decode::<HelloReply>(payload).map_err(|e| ClientError::Protocol(e.to_string()))? {
        Ok(w) => Ok(w),
        Err((kind, message)) => Err(ClientError::Server { kind, message }),
    }
}

/// A blocking connection.
pub struct Client {
    stream: TcpStream,
    reader: FrameReader,
    out: Vec<u8>,
    next_id: u64,
    welcome: Welcome,
}

impl Client {
    /// Connects and says hello, with the server's token if it needs one.
    pub fn connect(addr: impl ToSocketAddrs, token: Option<&str>) -> Result<Client> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        let mut c = Client {
            stream,
            reader: FrameReader::new(DEFAULT_MAX_FRAME * 4),
            out: Vec::with_capacity(64 << 10),
            next_id: 1,
            welcome: Welcome {
                version: 0,
                protocol: String::new(),
                threads: 0,
            },
        };
        c.stream.write_all(&hello_frame(token))?;
        let payload = c.read_frame()?;
        c.welcome = welcome(&payload)?;
        Ok(c)
    }

    /// What the server said at hello: its version, protocol and engine threads.
    pub fn welcome(&self) -> &Welcome {
        &self.welcome
    }

    fn read_frame(&mut self) -> Result<Vec<u8>> {
        loop {
            match self.reader.next_frame() {
                Ok(Some(p)) => return Ok(p.to_vec()),
                Ok(None) => {}
                Err(e) => return Err(ClientError::Protocol(e.to_string())),
            }
            let buf = self.reader.spare(64 << 10);
            let n = self.stream.read(buf)?;
            self.reader.filled(64 << 10, n);
            if n == 0 {
                return Err(ClientError::Io(std::io::ErrorKind::UnexpectedEof.into()));
            }
        }
    }

    fn read_response(&mut self) -> Result<(u64, Response)> {
        let payload = self.read_frame()?;
        decode_response(&payload).map_err(|e| ClientError::Protocol(e.to_string()))
    }

    /// Sends `requests` in one write, then reads their responses, in order. Errors and aborts are
    /// returned as responses, so one refused request does not hide the others.
    pub fn pipeline(&mut self, requests: &[Request]) -> Result<Vec<Response>> {
        self.out.clear();
        let first = self.next_id;
        for r in requests {
            encode_request(&mut self.out, self.next_id, r);
            self.next_id += 1;
        }
        self.stream.write_all(&self.out)?;
        let mut responses = Vec::with_capacity(requests.len());
        for i in 0..requests.len() as u64 {
            let (id, resp) = self.read_response()?;
            if id != first + i {
                // Id 0: the server could not read a frame and closes the connection.
                return match resp {
                    Response::Error { kind, message } => Err(ClientError::Server { kind, message }),
                    other => Err(ClientError::Protocol(format!(
                        "response {id} to request {}: {other:?}",
                        first + i
                    ))),
                };
            }
            responses.push(resp);
        }
        Ok(responses)
    }

    /// Reserves `n` request ids for frames encoded by the caller (with
    /// [`phasedb_proto::wire`]); returns the first (they are consecutive).
    pub fn reserve_ids(&mut self, n: usize) -> u64 {
        let first = self.next_id;
        self.next_id += n as u64;
        first
    }

    /// [`Client::pipeline`] without building messages: sends `frames`, `count` request frames
    /// already encoded with ids `first..first + count` (see [`Client::reserve_ids`]), in one
    /// write, then hands each response's payload, in order, to `each` as it lies in the receive
    /// buffer (read it with [`phasedb_proto::wire::peek`] or [`phasedb_proto::decode_response`]).
    /// Nothing is allocated per request.
    pub fn pipeline_raw(
        &mut self,
        frames: &[u8],
        first: u64,
        count: usize,
        mut each: impl FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        self.stream.write_all(frames)?;
        let mut expect = first;
        while expect < first + count as u64 {
            match self.reader.next_frame() {
                Ok(Some(p)) => {
                    if phasedb_proto::wire::peek(p).map(|(id, _)| id) != Some(expect) {
                        // Id 0: the server could not read a frame and closes the connection.
                        return match decode_response(p) {
                            Ok((_, Response::Error { kind, message })) => {
                                Err(ClientError::Server { kind, message })
                            }
                            other => Err(ClientError::Protocol(format!(
                                "response {other:?} to request {expect}"
                            ))),
                        };
                    }
                    each(p)?;
                    expect += 1;
                    continue;
                }
                Ok(None) => {}
                Err(e) => return Err(ClientError::Protocol(e.to_string())),
            }
            let buf = self.reader.spare(64 << 10);
            let n = self.stream.read(buf)?;
            self.reader.filled(64 << 10, n);
            if n == 0 {
                return Err(ClientError::Io(std::io::ErrorKind::UnexpectedEof.into()));
            }
        }
        Ok(())
    }

    /// Sends one request and waits for its response (errors and aborts as [`ClientError`]).
    pub fn call(&mut self, request: &Request) -> Result<Response> {
        let resp = self
            .pipeline(std::slice::from_ref(request))?
            .pop()
            .expect("one response");
        check(resp)
    }

    /// Writes raw bytes to the connection (tests of malformed frames use it).
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.stream.write_all(bytes)?;
        Ok(())
    }

    /// Reads the next response, whatever its id.
    pub fn recv(&mut self) -> Result<(u64, Response)> {
        self.read_response()
    }

    /// Health check.
    pub fn ping(&mut self) -> Result<()> {
        self.call(&Request::Ping).map(|_| ())
    }

    /// The engine's counters.
    pub fn stats(&mut self) -> Result<StatsReply> {
        match self.call(&Request::Stats)? {
            Response::Stats(s) => Ok(s),
            r => Err(ClientError::Unexpected(Box::new(r))),
        }
    }

    /// Creates a table.
    pub fn create_table(&mut self, def: TableDef) -> Result<TableInfo> {
        match self.call(&Request::CreateTable(def))? {
            Response::Table(t) => Ok(t),
            r => Err(ClientError::Unexpected(Box::new(r))),
        }
    }

    /// Every table.
    pub fn list_tables(&mut self) -> Result<Vec<TableInfo>> {
        match self.call(&Request::ListTables)? {
            Response::Tables(t) => Ok(t),
            r => Err(ClientError::Unexpected(Box::new(r))),
        }
    }

    /// Table `name`.
    pub fn describe_table(&mut self, name: &str) -> Result<TableInfo> {
        match self.call(&Request::DescribeTable(name.into()))? {
            Response::Table(t) => Ok(t),
            r => Err(ClientError::Unexpected(Box::new(r))),
        }
    }

    /// Drops table `name`.
    pub fn drop_table(&mut self, name: &str) -> Result<()> {
        self.call(&Request::DropTable(name.into())).map(|_| ())
    }

    /// Runs `ops` as one transaction, atomically, in one round trip.
    pub fn execute(&mut self, ops: Vec<Op>) -> Result<Vec<OpResult>> {
        match self.call(&Request::Execute(ops))? {
            Response::Results(r) => Ok(r),
            r => Err(ClientError::Unexpected(Box::new(r))),
        }
    }

    /// Runs stored procedure `name`.
    pub fn call_procedure(&mut self, name: &str, args: Vec<Value>) -> Result<Vec<Value>> {
        match self.call(&Request::Call {
            name: name.into(),
            args,
        })? {
            Response::Values(v) => Ok(v),
            r => Err(ClientError::Unexpected(Box::new(r))),
        }
    }

    /// Starts an interactive transaction.
    pub fn begin(&mut self) -> Result<Transaction<'_>> {
        match self.call(&Request::Begin)? {
            Response::Begun { txn } => Ok(Transaction {
                client: self,
                txn,
                open: true,
            }),
            r => Err(ClientError::Unexpected(Box::new(r))),
        }
    }

    /// Runs `body` as an interactive transaction and commits it, running it again (up to 100
    /// times) when the server reports a conflict or stale reads. Another error from `body` rolls
    /// the transaction back and is returned.
    pub fn transact<R>(
        &mut self,
        mut body: impl FnMut(&mut Transaction<'_>) -> Result<R>,
    ) -> Result<R> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut tx = self.begin()?;
            let outcome = body(&mut tx).and_then(|r| tx.commit().map(|()| r));
            match outcome {
                Err(e) if e.is_retryable() && attempt < 100 => continue,
                other => return other,
            }
        }
    }
}

/// An interactive transaction: reads are answered at once, writes are buffered by the server and
/// applied at [`Transaction::commit`], which checks that every read still holds. Dropped without
/// commit, it is rolled back.
pub struct Transaction<'c> {
    client: &'c mut Client,
    txn: u64,
    open: bool,
}

impl Transaction<'_> {
    /// Runs one statement.
    pub fn statement(&mut self, op: Op) -> Result<OpResult> {
        let resp = self.client.call(&Request::Statement { txn: self.txn, op });
        if resp.is_err() {
            // The server ended the transaction.
            self.open = false;
        }
        match resp? {
            Response::Result(r) => Ok(r),
            r => Err(ClientError::Unexpected(Box::new(r))),
        }
    }

    /// Reads columns `columns` (all if empty) of row `key`.
    pub fn get(&mut self, table: u32, key: u64, columns: &[u16]) -> Result<Option<Vec<Value>>> {
        match self.statement(Op::Get {
            table,
            key,
            columns: columns.to_vec(),
        })? {
            OpResult::Row(r) => Ok(r),
            r => Err(ClientError::Unexpected(Box::new(Response::Result(r)))),
        }
    }

    /// Overwrites columns of row `key`; false if there is no such row.
    pub fn update(&mut self, table: u32, key: u64, values: Vec<(u16, Value)>) -> Result<bool> {
        match self.statement(Op::Update { table, key, values })? {
            OpResult::Done(d) => Ok(d),
            r => Err(ClientError::Unexpected(Box::new(Response::Result(r)))),
        }
    }

    /// Updates row `key` or inserts it.
    pub fn put(&mut self, table: u32, key: u64, values: Vec<(u16, Value)>) -> Result<bool> {
        match self.statement(Op::Put { table, key, values })? {
            OpResult::Done(d) => Ok(d),
            r => Err(ClientError::Unexpected(Box::new(Response::Result(r)))),
        }
    }

    /// Commits.
    pub fn commit(mut self) -> Result<()> {
        self.open = false;
        self.client
            .call(&Request::Commit { txn: self.txn })
            .map(|_| ())
    }

    /// Rolls back (nothing is applied).
    pub fn rollback(mut self) -> Result<()> {
        self.open = false;
        self.client
            .call(&Request::Rollback { txn: self.txn })
            .map(|_| ())
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.client.call(&Request::Rollback { txn: self.txn });
        }
    }
}
