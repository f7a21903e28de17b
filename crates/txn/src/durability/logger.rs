//! Logger threads and the durable epoch (SiloR §4.1–4.2: epoch-based group commit).
//!
//! Each logger owns a file and the log buffers of every `loggers`-th activity slot. A round reads
//! the global epoch `E` and the oldest epoch any running transaction started in, takes the smaller
//! as `safe` (every transaction whose records are not yet in a buffer commits in `safe` or later),
//! swaps its workers' buffers out, writes them as one checksummed block each followed by a marker
//! block `durable = safe - 1`, and fsyncs (under [`FsyncPolicy::Group`]). The database's durable
//! epoch is the smallest marker over all loggers: a transaction is durable once its epoch is at
//! or below it, on every logger at once. A failed write or fsync stops the logger for good and
//! makes every later commit fail ([`crate::TxError::NotDurable`]) rather than acknowledge
//! transactions that are not durable.

use std::fs::File;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_utils::CachePadded;
use parking_lot::{Condvar, Mutex};

use super::block::{self, Kind};
use super::buffer::WorkerLog;
use super::{DurabilityError, FsyncPolicy};
use crate::activity::Activity;
use crate::epoch::EpochReader;

/// What workers, waiters and loggers share.
pub(crate) struct Logging {
    /// One log buffer per activity slot.
    pub(crate) logs: Box<[WorkerLog]>,
    /// Per logger, the epoch up to which its file holds every record (its last marker).
    per_logger: Box<[CachePadded<AtomicU64>]>,
    /// The database's durable epoch: the smallest of `per_logger`.
    durable: CachePadded<AtomicU64>,
    /// Set once a logger failed; commits then fail.
    failed: AtomicBool,
    failure: Mutex<Option<String>>,
    /// Waiters for the durable epoch.
    moved: Mutex<()>,
    moved_cv: Condvar,
    stop: AtomicBool,
}

impl Logging {
    pub(crate) fn new(slots: usize, loggers: usize, durable: u64) -> Logging {
        Logging {
            logs: (0..slots).map(|_| WorkerLog::default()).collect(),
            per_logger: (0..loggers)
                .map(|_| CachePadded::new(AtomicU64::new(durable)))
                .collect(),
            durable: CachePadded::new(AtomicU64::new(durable)),
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            moved: Mutex::new(()),
            moved_cv: Condvar::new(),
            stop: AtomicBool::new(false),
        }
    }

    /// The durable epoch: every transaction of this epoch or an earlier one is on disk.
    #[inline]
    pub(crate) fn durable(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    /// Why logging stopped, if it did.
    #[inline]
    pub(crate) fn failure(&self) -> Option<String> {
        if self.failed.load(Ordering::Relaxed) {
            self.failure.lock().clone()
        } else {
            None
        }
    }

    /// Waits until `epoch` is durable; an error if logging failed first.
    pub(crate) fn wait(&self, epoch: u64) -> Result<(), DurabilityError> {
        let mut guard = self.moved.lock();
        loop {
            if self.durable() >= epoch {
                return Ok(());
            }
            if let Some(why) = self.failure() {
                return Err(DurabilityError::Failed(why));
            }
            self.moved_cv.wait_for(&mut guard, Duration::from_millis(5));
        }
    }

    fn publish(&self, logger: usize, durable: u64) {
        self.per_logger[logger].store(durable, Ordering::Release);
        let min = self
            .per_logger
            .iter()
            .map(|d| d.load(Ordering::Acquire))
            .min()
            .unwrap_or(durable);
        self.durable.fetch_max(min, Ordering::AcqRel);
        let _guard = self.moved.lock();
        self.moved_cv.notify_all();
    }

    fn fail(&self, why: String) {
        *self.failure.lock() = Some(why);
        self.failed.store(true, Ordering::Release);
        let _guard = self.moved.lock();
        self.moved_cv.notify_all();
    }
}

/// A logger's file: a real file, or one that fails as a full disk would past a byte budget.
pub(crate) struct LogFile {
    file: File,
    fsync: FsyncPolicy,
    written: u64,
    limit: Option<u64>,
}

impl LogFile {
    pub(crate) fn new(file: File, fsync: FsyncPolicy, limit: Option<u64>) -> LogFile {
        LogFile {
            file,
            fsync,
            written: 0,
            limit,
        }
    }

    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self
            .limit
            .is_some_and(|l| self.written + bytes.len() as u64 > l)
        {
            return Err(std::io::Error::from_raw_os_error(libc_enospc()));
        }
        self.file.write_all(bytes)?;
        self.written += bytes.len() as u64;
        if self.fsync == FsyncPolicy::Group {
            self.file.sync_data()?;
        }
        Ok(())
    }
}

/// ENOSPC ("No space left on device") on Linux and the BSDs.
const fn libc_enospc() -> i32 {
    28
}

/// One logger thread's state.
struct Logger {
    index: usize,
    loggers: usize,
    shared: Arc<Logging>,
    activity: Arc<Activity>,
    epoch: EpochReader,
    file: LogFile,
    last_marker: u64,
    /// Per slot this logger serves, the buffer swapped in at the next round: each slot alternates
    /// between two buffers of its own, so their capacities settle and a worker stops growing
    /// (and faulting in) its buffer once it has seen its busiest round.
    spares: Vec<Vec<u8>>,
    out: Vec<u8>,
}

impl Logger {
    /// One group commit: collects the buffers, writes them and a durable marker, fsyncs, publishes.
    /// Returns whether it wrote anything.
    fn round(&mut self) -> std::io::Result<bool> {
        let now = self.epoch.current();
        fence(Ordering::SeqCst);
        let safe = now.min(self.activity.oldest());
        let durable = safe.saturating_sub(1);
        self.out.clear();
        let high = self.activity.high();
        for (i, slot) in (self.index..high).step_by(self.loggers).enumerate() {
            if i == self.spares.len() {
                self.spares.push(Vec::new());
            }
            let spare = &mut self.spares[i];
            self.shared.logs[slot].take(spare);
            if !spare.is_empty() {
                block::push(&mut self.out, Kind::Records, spare);
            }
        }
        if self.out.is_empty() && durable <= self.last_marker {
            return Ok(false);
        }
        let durable = durable.max(self.last_marker);
        block::push(&mut self.out, Kind::Durable, &durable.to_le_bytes());
        self.file.append(&self.out)?;
        self.last_marker = durable;
        self.shared.publish(self.index, durable);
        Ok(true)
    }

    fn run(mut self) {
        loop {
            let stopping = self.shared.stop.load(Ordering::Acquire);
            match self.round() {
                Err(e) => {
                    self.shared.fail(format!(
                        "logger {} could not write or fsync its log: {e}",
                        self.index
                    ));
                    return;
                }
                Ok(_) if stopping => return,
                Ok(true) => {}
                Ok(false) => std::thread::park_timeout(Duration::from_millis(1)),
            }
        }
    }
}

/// The running loggers; dropping it makes everything committed durable, then stops them.
pub(crate) struct Loggers {
    pub(crate) shared: Arc<Logging>,
    epoch: EpochReader,
    threads: Vec<JoinHandle<()>>,
}

impl Loggers {
    /// Starts one logger per file of `files`, whose markers begin at `durable`.
    pub(crate) fn start(
        shared: Arc<Logging>,
        activity: Arc<Activity>,
        epoch: EpochReader,
        files: Vec<LogFile>,
        durable: u64,
    ) -> Loggers {
        let loggers = files.len();
        let threads = files
            .into_iter()
            .enumerate()
            .map(|(index, file)| {
                let logger = Logger {
                    index,
                    loggers,
                    shared: shared.clone(),
                    activity: activity.clone(),
                    epoch: epoch.clone(),
                    file,
                    last_marker: durable,
                    spares: Vec::new(),
                    out: Vec::new(),
                };
                std::thread::Builder::new()
                    .name(format!("phasedb-logger-{index}"))
                    .spawn(move || logger.run())
                    .expect("spawn a logger thread")
            })
            .collect();
        Loggers {
            shared,
            epoch,
            threads,
        }
    }
}

impl Drop for Loggers {
    fn drop(&mut self) {
        // No worker runs any more (they borrow the database): closing the epoch makes all it held
        // durable in the loggers' last round.
        self.epoch.set(self.epoch.current() + 1);
        self.shared.stop.store(true, Ordering::Release);
        for t in self.threads.drain(..) {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}
