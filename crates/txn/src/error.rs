use phasedb_storage::TableId;
use thiserror::Error;

/// Why a transaction did not commit.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum TxError {
    /// A concurrency-control conflict; the engine retries the procedure.
    #[error("conflict: {0}")]
    Conflict(Conflict),
    /// The procedure asked to abort; not retried.
    #[error("aborted by the procedure")]
    UserAbort,
    /// An insert found the key present; not retried unless the procedure handles it.
    #[error("duplicate key {key} in table {table}")]
    DuplicateKey { table: TableId, key: u64 },
    /// A scan on a table without an ordered index, a protocol that cannot run an operation, or
    /// another misuse of the API; not retried.
    #[error("invalid operation: {0}")]
    Invalid(&'static str),
    /// The procedure panicked; its writes were discarded. Not retried.
    #[error("procedure panicked: {0}")]
    Panicked(String),
    /// The transaction touched split data in a way the split phase cannot run (a read, or another
    /// operation than the record's selected one): it must run again in the next joined phase. A
    /// worker in stash mode returns it to its caller; otherwise the worker waits and reruns it.
    #[error("stashed until the next joined phase")]
    Stashed,
    /// The retry limit of the configuration was reached.
    #[error("gave up after {0} conflicting attempts")]
    TooManyRetries(u32),
    /// Logging failed (a write or fsync error, a full disk): the database refuses commits rather
    /// than acknowledge transactions that would not be durable.
    #[error("not durable: {0}")]
    NotDurable(String),
}

/// The conflict behind a [`TxError::Conflict`]; kept for statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Conflict {
    /// A record read was locked for too long or changed while being read.
    ReadLocked,
    /// A write lock was held by another transaction (no-wait).
    WriteLocked,
    /// Validation found a read version changed.
    Validation,
    /// A scan or a point miss was invalidated by an insert or delete (phantom).
    Phantom,
    /// An insert raced with another insert of the same key.
    InsertRace,
    /// Waiting for a lock would close a cycle: this transaction upgrades a shared lock whose exclusive
    /// lock another upgrader holds while it waits for this one's shared lock to go.
    Deadlock,
    /// A blocking wait for a lock outlasted the deadlock timeout (a presumed deadlock).
    LockTimeout,
}

impl Conflict {
    /// A short machine-readable name (reports key conflict counts by it).
    pub fn name(self) -> &'static str {
        match self {
            Conflict::ReadLocked => "read_locked",
            Conflict::WriteLocked => "write_locked",
            Conflict::Validation => "validation",
            Conflict::Phantom => "phantom",
            Conflict::InsertRace => "insert_race",
            Conflict::Deadlock => "deadlock",
            Conflict::LockTimeout => "lock_timeout",
        }
    }
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            Conflict::ReadLocked => "read a locked record",
            Conflict::WriteLocked => "write lock held by another transaction",
            Conflict::Validation => "read set changed before commit",
            Conflict::Phantom => "phantom insert or delete in a read range",
            Conflict::InsertRace => "concurrent insert of the same key",
            Conflict::Deadlock => "lock upgrade that would deadlock",
            Conflict::LockTimeout => "lock wait past the deadlock timeout",
        };
        f.write_str(s)
    }
}

/// Result of a transaction operation.
pub type TxResult<T> = Result<T, TxError>;
