//! The messages of the client protocol. Every type is encoded with postcard (varint integers,
//! zigzag for signed ones, a varint variant index before an enum's fields, a varint length before
//! sequences, strings and byte strings, little-endian `f64`); `docs/wire-protocol.md` spells out
//! each layout byte by byte for clients in other languages.

use serde::{Deserialize, Serialize};

/// The first frame a client sends on a connection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// [`crate::MAGIC`].
    pub magic: [u8; 4],
    /// The protocol version the client speaks ([`crate::VERSION`]).
    pub version: u16,
    /// The server's token, when it requires one.
    pub token: Option<String>,
}

/// The server's answer to a [`Hello`]: accepted, with what the server runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Welcome {
    /// The protocol version the server speaks.
    pub version: u16,
    /// The concurrency-control protocol of the engine (`occ`, `tictoc`, ...).
    pub protocol: String,
    /// Engine worker threads.
    pub threads: u32,
}

/// A column's type, as in the engine's schemas.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ColumnKind {
    U64,
    I64,
    F64,
    /// Exactly `n` bytes.
    Fixed(u16),
    /// Up to `n` bytes.
    Bounded(u16),
    /// An ordered tuple `(order, core, up to n bytes)`: written by [`OrderedOp::OPut`] only, read
    /// as [`Value::Tuples`] of at most one tuple.
    Tuple(u16),
    /// A top-K set of at most `k` ordered tuples of up to `n` bytes each: written by
    /// [`OrderedOp::TopK`] only, read as [`Value::Tuples`], best first.
    TopK {
        k: u8,
        n: u16,
    },
}

/// The [`ColumnDef::group`] of a column whose group the server chooses. A table whose columns
/// all have it gets automatic column groups: the engine groups the columns by how transactions
/// use them, and changes the groups as the workload changes (one group where the engine cannot).
pub const AUTO_GROUP: u8 = u8::MAX;

/// A column of a table definition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnDef {
    pub name: String,
    pub kind: ColumnKind,
    /// The column group: columns of one group share their version (the unit of conflict); or
    /// [`AUTO_GROUP`] in every column of the table.
    pub group: u8,
}

/// A table definition for [`Request::CreateTable`], and what [`Request::DescribeTable`] returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableDef {
    pub name: String,
    pub columns: Vec<ColumnDef>,
    /// Rows expected (sizes the hash index; it grows past it).
    pub capacity: u64,
    /// Keep an ordered index too, so [`Op::Scan`] works.
    pub ordered: bool,
}

/// A table as the server knows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableInfo {
    /// The id operations name the table by.
    pub id: u32,
    pub def: TableDef,
}

/// A column value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Value {
    U64(u64),
    I64(i64),
    F64(f64),
    Bytes(Vec<u8>),
    /// The ordered tuples `(order, core, value)` of a `Tuple` or `TopK` column (read only).
    Tuples(Vec<(i64, u32, Vec<u8>)>),
}

/// A splittable operation on an ordered-tuple column (Doppel's `OPut` and `TopKInsert`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OrderedOp {
    /// Replaces a `Tuple` column's tuple by `(order, core, value)` if that ranks higher (a larger
    /// order; ties broken by the writing core, then the value).
    OPut,
    /// Inserts `(order, core, value)` into a `TopK` column's set, which keeps the `k` best.
    TopK,
}

/// A splittable operation on an integer column (Doppel's `add`, `max`, `min`, `mult`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Arith {
    Add,
    Max,
    Min,
    Mult,
}

/// One operation of a transaction. Columns are indexes into the table's definition; an empty list
/// reads every column.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// Reads row `key`: [`OpResult::Row`].
    Get {
        table: u32,
        key: u64,
        columns: Vec<u16>,
    },
    /// Inserts row `key` (columns not given are zero); a present key aborts the transaction with
    /// [`AbortCause::DuplicateKey`]. [`OpResult::Done`]`(true)`.
    Insert {
        table: u32,
        key: u64,
        values: Vec<(u16, Value)>,
    },
    /// Overwrites the given columns of row `key`: [`OpResult::Done`] (false: no such row).
    Update {
        table: u32,
        key: u64,
        values: Vec<(u16, Value)>,
    },
    /// Updates row `key` if it exists, inserts it otherwise: [`OpResult::Done`] (true: it existed).
    Put {
        table: u32,
        key: u64,
        values: Vec<(u16, Value)>,
    },
    /// Deletes row `key`: [`OpResult::Done`] (false: no such row).
    Delete { table: u32, key: u64 },
    /// Rows with keys in `lo..=hi`, at most `limit`, in key order: [`OpResult::Rows`]. Needs a table
    /// created `ordered`; concurrent inserts into the range conflict (phantom protection).
    Scan {
        table: u32,
        lo: u64,
        hi: u64,
        limit: u32,
        columns: Vec<u16>,
    },
    /// Applies `op` with argument `arg` to integer column `column` of row `key`: [`OpResult::Done`]
    /// (false: no such row). With `commute` the operation is a commutative update (applied at commit
    /// to the value then; transactions that only commute on a column never conflict on it).
    Apply {
        table: u32,
        key: u64,
        column: u16,
        op: Arith,
        arg: i64,
        commute: bool,
    },
    /// Applies `op` with `(order, value)` to ordered-tuple column `column` of row `key`:
    /// [`OpResult::Done`] (false: no such row). Concurrent ones never conflict under `doppel`,
    /// which splits a contended row for them.
    Ordered {
        table: u32,
        key: u64,
        column: u16,
        op: OrderedOp,
        order: i64,
        value: Vec<u8>,
    },
}

/// What one [`Op`] returned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum OpResult {
    /// The requested columns of a row, or `None` if it does not exist.
    Row(Option<Vec<Value>>),
    /// Whether the write found its row (see each [`Op`]).
    Done(bool),
    /// `(key, columns)` of the rows a scan visited.
    Rows(Vec<(u64, Vec<Value>)>),
}

/// A request; every frame after the hello carries one, with its id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Request {
    /// Health check: [`Response::Pong`].
    Ping,
    /// The engine's counters: [`Response::Stats`].
    Stats,
    /// [`Response::Table`].
    CreateTable(TableDef),
    /// [`Response::Tables`].
    ListTables,
    /// [`Response::Table`].
    DescribeTable(String),
    /// [`Response::Done`].
    DropTable(String),
    /// A one-shot transaction: every operation, atomically, in one round trip:
    /// [`Response::Results`] or [`Response::Aborted`].
    Execute(Vec<Op>),
    /// Starts an interactive transaction: [`Response::Begun`].
    Begin,
    /// One statement of interactive transaction `txn`: reads are answered, writes buffered:
    /// [`Response::Result`] (or [`Response::Aborted`], which ends the transaction).
    Statement { txn: u64, op: Op },
    /// Commits interactive transaction `txn`: [`Response::Committed`] or [`Response::Aborted`].
    Commit { txn: u64 },
    /// Abandons interactive transaction `txn` (nothing is applied): [`Response::Done`].
    Rollback { txn: u64 },
    /// Runs a stored procedure by name (see `docs/wire-protocol.md`): [`Response::Values`] or
    /// [`Response::Aborted`].
    Call { name: String, args: Vec<Value> },
}

/// Why a transaction did not commit. Nothing of it was applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AbortCause {
    /// The engine's protocol kept finding conflicts (it retries them up to the server's limit).
    Conflict,
    /// An interactive transaction's reads no longer hold at commit: retry it.
    Stale,
    /// An insert found its key present.
    DuplicateKey,
    /// The operation cannot run (wrong column type, scan without an ordered index, ...).
    Invalid,
    /// The procedure asked to abort (TPC-C's rollback of an unused item).
    UserAbort,
    /// The server is shutting down.
    ShuttingDown,
    /// The engine's log failed (a full disk, a failed fsync): the transaction may not survive a
    /// crash, and the server takes no more writes.
    NotDurable,
}

/// Errors that are not a transaction's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorKind {
    /// The frame could not be decoded (the server closes the connection after it).
    Malformed,
    /// A frame longer than the server's limit (the server closes the connection after it).
    TooLarge,
    /// The hello's magic or version is not this protocol's (the connection is closed).
    Version,
    /// The token is missing or wrong (the connection is closed).
    Unauthorized,
    /// No table of that name or id.
    NoSuchTable,
    /// A table of that name exists.
    TableExists,
    /// The table definition is not valid.
    BadTable,
    /// No interactive transaction of that id on this connection.
    NoSuchTransaction,
    /// No stored procedure of that name, or wrong arguments.
    BadCall,
    /// The server is shutting down and takes no new work.
    ShuttingDown,
}

/// The engine's counters since the server started.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatsReply {
    pub committed: u64,
    /// Conflicting attempts (each was retried).
    pub conflicts: u64,
    /// Transactions that did not commit (any cause).
    pub aborted: u64,
    pub latency_p50_us: f64,
    pub latency_p99_us: f64,
    pub latency_p999_us: f64,
    pub connections: u64,
    pub uptime_s: f64,
}

/// A response; the frame carrying it has the id of its request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Response {
    Pong { uptime_s: f64, connections: u64 },
    Stats(StatsReply),
    Table(TableInfo),
    Tables(Vec<TableInfo>),
    Done,
    Results(Vec<OpResult>),
    Begun { txn: u64 },
    Result(OpResult),
    Committed,
    Aborted { cause: AbortCause, message: String },
    Values(Vec<Value>),
    Error { kind: ErrorKind, message: String },
}
