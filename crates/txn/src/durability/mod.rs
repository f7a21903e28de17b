//! Durability as SiloR does it (Zheng et al., "Fast Databases with Fast Durability and Recovery
//! Through Multicore Parallelism", OSDI 2014): value logging per worker, epoch-based group commit,
//! checkpoints and parallel recovery with the Thomas write rule.
//!
//! - **Logging** (`buffer.rs`, §4.1): a committing worker appends the after-images of the column
//!   groups it wrote (with its TID; deletes as deletes) to its own buffer while it holds the write
//!   locks. Records use STAR's replication record format (`crate::star` `format.rs`): one encoder,
//!   one checked decoder, one Thomas-write-rule apply path for replicas and recovery alike.
//! - **Group commit** (`logger.rs`, §4.2): logger threads swap the buffers out, write them in
//!   checksummed blocks (`block.rs`) to a file each, fsync, and mark the epoch up to which their
//!   file is complete. The *durable epoch* is the smallest mark over all loggers; a transaction is
//!   durable once its epoch is at or below it ([`crate::Worker::commit_epoch`],
//!   [`crate::Worker::wait_durable`], [`crate::Database::durable_epoch`]).
//! - **Checkpoints** (`checkpoint.rs`, §4.3): an image of every table with its TIDs, one file per
//!   table written in parallel, made complete by an atomic rename.
//! - **Recovery** (`recovery.rs`, §5): the newest checkpoint that verifies (else the one before),
//!   then every log file replayed in parallel up to its generation's durable epoch, each record
//!   applied to a group only if its TID is newer (Thomas write rule); indexes are rebuilt as rows
//!   are inserted. A torn tail ends a file at its last whole block, and records past the durable
//!   epoch are dropped, so recovery ends at the last epoch durable on every logger.
//! - **Start** (`start.rs`): [`crate::Database::start_durability`] checks the directory's
//!   manifest (`manifest.rs`: format version and schema), recovers or writes the first image,
//!   starts a new log *generation* (a log file per logger), and starts the loggers.
//!
//! - **Background checkpoints** (`checkpointer.rs`, §4.3): during a run, periodically or on
//!   demand, the loggers move to a new log segment, and an image as of a start epoch is written
//!   without stopping workers; once it is complete the checkpoints and log segments that the two
//!   newest checkpoints do not need are deleted.
//!
//! Data directory layout: `MANIFEST`, `ckpt-<seq>/` (`meta`, `p<writer>.img`) and
//! `log-<generation>-<logger>-<segment>.log`. Each start after a recovery writes a fresh
//! checkpoint of the recovered state and opens a new generation; checkpoints during a run open
//! new segments. After each checkpoint, what the two newest checkpoints no longer need is
//! deleted (log truncation).

mod block;
mod buffer;
mod checkpoint;
mod checkpointer;
mod logger;
mod manifest;
mod recovery;
mod start;

pub(crate) use start::start;

use std::path::{Path, PathBuf};

use thiserror::Error;

pub(crate) use buffer::WorkerLog;
pub(crate) use checkpointer::Checkpointer;
pub(crate) use logger::{Loggers, Logging};

/// When loggers fsync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// After every group of buffers written (SiloR's group commit): durable means on disk.
    Group,
    /// Never: durable means handed to the operating system. For measuring logging without the
    /// disk; a machine crash can lose what a process crash cannot.
    None,
}

/// Settings of durable operation ([`crate::Config::durability`]).
#[derive(Clone, Debug)]
pub struct Durability {
    /// The data directory (created if missing).
    pub dir: PathBuf,
    /// When loggers fsync.
    pub fsync: FsyncPolicy,
    /// Number of logger threads, each with a log file of its own.
    pub loggers: usize,
    /// A simulated disk capacity per log file: a logger write that would pass it fails as a full
    /// disk does (testing the failure path). `None` in normal use.
    pub disk_limit_bytes: Option<u64>,
    /// How often the background checkpointer writes an image of the tables during a run (and
    /// then deletes the logs it makes unneeded); `None`: only at start and on
    /// [`crate::Database::checkpoint`].
    pub checkpoint_interval: Option<std::time::Duration>,
    /// Threads that write a checkpoint, sharing the tables' parts (1 by default: on a machine
    /// with few cores, each writer takes a core from the workers while a checkpoint runs).
    pub checkpoint_threads: usize,
    /// Longest a checkpoint waits for the loggers or the epoch before it reports a failure. Time
    /// in which a split phase (Doppel) holds the durable epoch back does not count: workers left
    /// idle in one would otherwise fail every periodic checkpoint, though nothing is wrong.
    pub checkpoint_wait_limit: std::time::Duration,
}

impl Durability {
    /// Durable operation in `dir`: group fsync, one logger, one checkpoint writer.
    pub fn new(dir: impl Into<PathBuf>) -> Durability {
        Durability {
            dir: dir.into(),
            fsync: FsyncPolicy::Group,
            loggers: 1,
            disk_limit_bytes: None,
            checkpoint_interval: None,
            checkpoint_threads: 1,
            checkpoint_wait_limit: std::time::Duration::from_secs(60),
        }
    }
}

/// What [`crate::Database::start_durability`] found and did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recovery {
    /// The directory held no database: the loaded rows were written as its first checkpoint.
    pub fresh: bool,
    /// The checkpoint loaded (its sequence number).
    pub checkpoint: Option<u64>,
    /// Newer checkpoints that failed to verify and were passed over, with the reason.
    pub skipped_checkpoints: Vec<String>,
    /// Rows loaded from the checkpoint.
    pub checkpoint_rows: u64,
    /// Log records replayed (each applied with the Thomas write rule).
    pub log_records: u64,
    /// Log records left out: beyond their generation's durable epoch, or before the checkpoint.
    pub dropped_records: u64,
    /// Bytes cut from torn or corrupt log tails.
    pub torn_bytes: u64,
    /// The newest epoch recovered (every transaction of it and before that was durable is back).
    pub durable_epoch: u64,
    /// Seconds spent recovering (checkpoint, logs and the new checkpoint).
    pub seconds: f64,
    /// Of them, seconds replaying logs.
    pub replay_seconds: f64,
    /// The most threads replay ran on at once (one per log file, or per core, whichever is fewer;
    /// the pass over partial images uses every core): what a rate per core divides by.
    pub replay_threads: usize,
    /// Per table (by name), the records linked after recovery (rows, and tombstones of deletes
    /// replayed that workers have not unlinked yet).
    pub table_records: Vec<(String, u64)>,
}

/// One checkpoint taken during a run ([`crate::Database::checkpoint`]).
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointReport {
    /// Its sequence number (`ckpt-<seq>` in the data directory).
    pub seq: u64,
    /// Rows in the image.
    pub rows: u64,
    /// Log records of this epoch and later are replayed over it.
    pub start_epoch: u64,
    /// Seconds from the request to the image being complete and old files deleted.
    pub seconds: f64,
    /// Of them, seconds reading and writing the image (the rest waits for the loggers' segments,
    /// for older epochs' transactions to end and for the image's epochs to be durable).
    pub image_seconds: f64,
    /// Checkpoints and log files deleted after it (log truncation).
    pub removed_files: u64,
}

/// The background checkpointer's totals ([`crate::Database::checkpoint_stats`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CheckpointStats {
    /// Checkpoints completed, and the rows and seconds they took in all.
    pub taken: u64,
    pub rows: u64,
    pub seconds: f64,
    /// Of the seconds, those reading and writing images.
    pub image_seconds: f64,
    /// Checkpoints that failed, and why the last one did.
    pub failed: u64,
    pub last_error: Option<String>,
}

/// Why durable operation could not start or go on.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum DurabilityError {
    #[error("cannot {what} {path}: {error}")]
    Io {
        what: String,
        path: PathBuf,
        error: String,
    },
    #[error(
        "{0} is not a phasedb data directory (it holds other files and no phasedb MANIFEST); use an empty or new directory"
    )]
    NotADataDirectory(PathBuf),
    #[error("data directory {dir} has format version {found}; this build reads version {expected}")]
    Version {
        dir: PathBuf,
        found: String,
        expected: u32,
    },
    #[error("data directory {dir} was written for another schema: {detail}")]
    Schema { dir: PathBuf, detail: String },
    #[error("data directory {dir} has no complete checkpoint to recover from: {detail}")]
    NoCheckpoint { dir: PathBuf, detail: String },
    #[error("log file {path} is corrupt inside a block whose checksum holds: {detail}")]
    Corrupt { path: PathBuf, detail: String },
    #[error(
        "protocol {0} does not support durability: {1} (see docs/durability.md for the protocols that log)"
    )]
    Unsupported(&'static str, &'static str),
    #[error("durability needs epochs: Config::epoch_interval must be nonzero")]
    NoEpochs,
    #[error("Config::durability is not set")]
    NotConfigured,
    #[error("durability needs at least one logger")]
    NoLoggers,
    #[error("durability was already started")]
    AlreadyStarted,
    #[error("logging failed, commits are refused: {0}")]
    Failed(String),
    /// A checkpoint did not complete (commits go on; the previous checkpoint stays the newest).
    #[error("the checkpoint did not complete: {0}")]
    Checkpoint(String),
}

impl DurabilityError {
    pub(crate) fn io(what: &str, path: &Path, e: std::io::Error) -> DurabilityError {
        DurabilityError::Io {
            what: what.to_string(),
            path: path.to_path_buf(),
            error: e.to_string(),
        }
    }
}
