//! Logger threads and the durable epoch (SiloR §4.1–4.2: epoch-based group commit).
//!
//! Each logger owns a file and the log buffers of every `loggers`-th activity slot. A round reads
//! the global epoch `E` and the oldest epoch any running transaction started in, takes the smaller
//! as `safe` (every transaction whose records are not yet in a buffer commits in `safe` or later),
//! swaps its workers' buffers out and writes them as one checksummed block each; if `safe - 1`
//! passed its last marker, it follows them with a marker block `durable = safe - 1` and fsyncs
//! (under [`FsyncPolicy::Group`]), so a logger fsyncs about once per epoch. Between rounds it
//! sleeps until the epoch moves or a quarter epoch passed. The database's durable
//! epoch is the smallest marker over all loggers: a transaction is durable once its epoch is at
//! or below it, on every logger at once. A failed write or fsync stops the logger for good and
//! makes every later commit fail ([`crate::TxError::NotDurable`]) rather than acknowledge
//! transactions that are not durable.

use std::fs::{File, OpenOptions};
use std::io::{IoSlice, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_utils::CachePadded;
use parking_lot::{Condvar, Mutex};

use super::block::{self, Kind};
use super::buffer::WorkerLog;
use super::checkpoint::sync_dir;
use super::recovery::file_name;
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
    /// The log segment loggers are asked to write to (a checkpoint starts by moving them to a new
    /// one, so the older segments can be deleted once it is complete).
    rotate_to: AtomicU64,
    /// Per logger, the segment it writes to.
    segments: Box<[CachePadded<AtomicU64>]>,
    /// Per logger, the bytes it wrote to its files (blocks and markers).
    written: Box<[CachePadded<AtomicU64>]>,
    /// Waiters for the durable epoch.
    moved: Mutex<()>,
    moved_cv: Condvar,
    stop: AtomicBool,
    /// Set by [`crate::Database::crash`]: loggers exit at once, writing nothing more.
    halt: AtomicBool,
    /// Epochs no marker may name (see [`Logging::hold_from`]): `start..end`.
    hold: Mutex<(u64, u64)>,
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
            rotate_to: AtomicU64::new(0),
            segments: (0..loggers)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            written: (0..loggers)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            moved: Mutex::new(()),
            moved_cv: Condvar::new(),
            stop: AtomicBool::new(false),
            halt: AtomicBool::new(false),
            hold: Mutex::new((u64::MAX, u64::MAX)),
        }
    }

    /// Keeps the durable epoch below `start` until [`Logging::release_at`] (Doppel's split
    /// phases). A transaction of a split phase commits its per-core slice operations into the
    /// records only at the reconciliation, which logs the values they produce in its epoch `end`;
    /// a durable epoch from `start` (the split phase's first) to `end - 1` would recover some of
    /// the phase's transactions without their slice operations. So the durable epoch goes from
    /// below `start` to `end` or later at once. Called while no transaction runs; a hold not yet
    /// passed (the durable epoch still below its end) is extended instead, keeping its start.
    pub(crate) fn hold_from(&self, start: u64) {
        let mut hold = self.hold.lock();
        if hold.0 == u64::MAX || self.durable() >= hold.1 {
            hold.0 = start;
        }
        hold.1 = u64::MAX;
    }

    /// Ends the hold at `end`: the epoch in which the values the held epochs produced were
    /// appended to a log buffer (before this call).
    pub(crate) fn release_at(&self, end: u64) {
        let mut hold = self.hold.lock();
        if hold.0 != u64::MAX {
            hold.1 = end;
        }
    }

    /// Whether a split phase holds the durable epoch back and has not ended yet.
    pub(crate) fn split_phase_holds(&self) -> bool {
        let (start, end) = *self.hold.lock();
        start != u64::MAX && end == u64::MAX
    }

    /// `durable` as a marker may name it: below the hold if inside it (never below `floor`, the
    /// logger's last marker, which was safe when written).
    fn held(&self, durable: u64, floor: u64) -> u64 {
        let (start, end) = *self.hold.lock();
        if (start..end).contains(&durable) {
            start.saturating_sub(1).max(floor)
        } else {
            durable
        }
    }

    /// The durable epoch: every transaction of this epoch or an earlier one is on disk.
    #[inline]
    pub(crate) fn durable(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    /// Bytes the loggers wrote to their files so far.
    pub(crate) fn bytes_written(&self) -> u64 {
        self.written.iter().map(|w| w.load(Ordering::Relaxed)).sum()
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
        while !self.wait_for(epoch, Duration::from_secs(3600))? {}
        Ok(())
    }

    /// Waits at most `limit` until `epoch` is durable: whether it is; an error if logging failed
    /// first.
    pub(crate) fn wait_for(&self, epoch: u64, limit: Duration) -> Result<bool, DurabilityError> {
        let until = std::time::Instant::now() + limit;
        let mut guard = self.moved.lock();
        loop {
            if self.durable() >= epoch {
                return Ok(true);
            }
            if let Some(why) = self.failure() {
                return Err(DurabilityError::Failed(why));
            }
            let now = std::time::Instant::now();
            if now >= until {
                return Ok(false);
            }
            self.moved_cv
                .wait_for(&mut guard, (until - now).min(Duration::from_millis(5)));
        }
    }

    /// Asks every logger to close its file and go on in log segment `segment`.
    pub(crate) fn rotate(&self, segment: u64) {
        self.rotate_to.fetch_max(segment, Ordering::AcqRel);
    }

    /// The oldest segment a logger writes to: every record taken from a buffer before it moved
    /// there is in an older segment.
    pub(crate) fn segment(&self) -> u64 {
        self.segments
            .iter()
            .map(|s| s.load(Ordering::Acquire))
            .min()
            .unwrap_or(0)
    }

    /// Makes the loggers exit at their next round without writing (a simulated crash).
    pub(crate) fn halt(&self) {
        self.halt.store(true, Ordering::Release);
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

    /// Stops logging for good with `why`; the first failure's reason is kept (a later one, such
    /// as another logger's write to a filesystem the first failure made read-only, is its
    /// consequence).
    fn fail(&self, why: String) {
        self.failure.lock().get_or_insert(why);
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

    /// Creates the file of `logger` in `segment` of generation `generation` in `dir`.
    pub(crate) fn create(
        dir: &Path,
        generation: u64,
        segment: u64,
        logger: usize,
        fsync: FsyncPolicy,
        limit: Option<u64>,
    ) -> Result<LogFile, DurabilityError> {
        let path = dir.join(file_name(generation, segment, logger));
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|e| DurabilityError::io("create", &path, e))?;
        Ok(LogFile::new(file, fsync, limit))
    }

    /// Fsyncs what was appended, under [`FsyncPolicy::Group`].
    fn sync(&mut self) -> std::io::Result<()> {
        if self.fsync == FsyncPolicy::Group {
            self.file.sync_data()?;
        }
        Ok(())
    }

    /// Appends `bytes`; with `sync`, then fsyncs under [`FsyncPolicy::Group`].
    fn append(&mut self, bytes: &[u8], sync: bool) -> std::io::Result<()> {
        self.append_parts(&mut [IoSlice::new(bytes)], sync)
            .map(|_| ())
    }

    /// Appends `parts` one after another in as few writes as the system takes (a block's header
    /// and its payload are written from where they are, not copied together first); with `sync`,
    /// then fsyncs under [`FsyncPolicy::Group`]. Returns the bytes appended.
    fn append_parts(&mut self, mut parts: &mut [IoSlice<'_>], sync: bool) -> std::io::Result<u64> {
        let total: u64 = parts.iter().map(|p| p.len() as u64).sum();
        if self.limit.is_some_and(|l| self.written + total > l) {
            return Err(failed(
                "write",
                std::io::Error::from_raw_os_error(libc_enospc()),
            ));
        }
        while !parts.is_empty() {
            let n = self
                .file
                .write_vectored(parts)
                .map_err(|e| failed("write", e))?;
            if n == 0 {
                return Err(failed("write", std::io::ErrorKind::WriteZero.into()));
            }
            IoSlice::advance_slices(&mut parts, n);
        }
        self.written += total;
        if sync {
            self.sync().map_err(|e| failed("fsync", e))?;
        }
        Ok(total)
    }
}

/// `e` saying which system call failed: a full disk shows in a write, or only in the fsync that
/// writes the pages back (a filesystem that accepted the data in its cache).
fn failed(call: &str, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{call} failed: {e}"))
}

/// ENOSPC ("No space left on device") on Linux and the BSDs.
const fn libc_enospc() -> i32 {
    28
}

/// Bytes a log buffer starts with (each slot has two that alternate): enough for a round of a busy
/// worker, so buffers rarely grow, and growing (faulting in fresh pages) is off the common path.
pub(crate) const BUFFER_START: usize = 1 << 20;

/// Longest a round waits for transactions of the previous epoch to end.
const OLDEST_WAIT: Duration = Duration::from_micros(500);
/// How often a round looks again while it waits for them.
const OLDEST_POLL: Duration = Duration::from_micros(50);

/// One logger thread's state.
struct Logger {
    index: usize,
    loggers: usize,
    shared: Arc<Logging>,
    activity: Arc<Activity>,
    epoch: EpochReader,
    file: LogFile,
    /// Where new segments' files go.
    dir: PathBuf,
    generation: u64,
    segment: u64,
    last_marker: u64,
    /// Whether the current file holds a marker yet (a new generation's files start without one).
    marked: bool,
    /// Per slot this logger serves, the buffer swapped in at the next round: each slot alternates
    /// between two buffers of its own, so their capacities settle and a worker stops growing
    /// (and faulting in) its buffer once it has seen its busiest round.
    spares: Vec<Vec<u8>>,
    /// Per slot, the header of the block its spare is written in this round.
    headers: Vec<[u8; block::HEADER]>,
    /// The longest a logger waits between rounds while the epoch stays the same.
    pace: Duration,
}

impl Logger {
    /// One group commit: collects the buffers and writes them; if the durable epoch can advance,
    /// also a marker, then fsyncs and publishes (SiloR §4.2: one fsync per logger per epoch, not
    /// per round — records written in rounds between are made durable by the next marker's
    /// fsync). Returns whether it wrote anything.
    fn round(&mut self) -> std::io::Result<bool> {
        let now = self.epoch.current();
        fence(Ordering::SeqCst);
        let safe = now.min(self.oldest_after(now));
        // Read before the buffers are taken: what a released hold waited for is in them.
        let durable = self.shared.held(safe.saturating_sub(1), self.last_marker);
        let high = self.activity.high();
        let mut taken = 0;
        for (i, slot) in (self.index..high).step_by(self.loggers).enumerate() {
            if i == self.spares.len() {
                self.spares.push(Vec::with_capacity(BUFFER_START));
                self.headers.push([0; block::HEADER]);
            }
            let spare = &mut self.spares[i];
            self.shared.logs[slot].take(spare);
            if !spare.is_empty() {
                self.headers[i] = block::header(Kind::Records, spare);
            }
            taken = i + 1;
        }
        let mut parts: Vec<IoSlice<'_>> = Vec::with_capacity(2 * taken + 2);
        for (spare, header) in self.spares[..taken].iter().zip(&self.headers) {
            if !spare.is_empty() {
                parts.push(IoSlice::new(header));
                parts.push(IoSlice::new(spare));
            }
        }
        let advance = durable > self.last_marker || !self.marked;
        if !advance {
            if parts.is_empty() {
                return Ok(false);
            }
            let n = self.file.append_parts(&mut parts, false)?;
            self.shared.written[self.index].fetch_add(n, Ordering::Relaxed);
            return Ok(true);
        }
        let durable = durable.max(self.last_marker);
        let payload = durable.to_le_bytes();
        let marker = block::header(Kind::Durable, &payload);
        parts.push(IoSlice::new(&marker));
        parts.push(IoSlice::new(&payload));
        let n = self.file.append_parts(&mut parts, true)?;
        self.shared.written[self.index].fetch_add(n, Ordering::Relaxed);
        self.last_marker = durable;
        self.marked = true;
        self.shared.publish(self.index, durable);
        Ok(true)
    }

    /// The oldest epoch a running transaction started in, after waiting briefly for those that
    /// started before `now` to end: workers run transactions back to back, so right after the
    /// epoch moved one is almost always still in the previous one, and without the wait the
    /// marker for that epoch would wait for the next round.
    fn oldest_after(&self, now: u64) -> u64 {
        let until = std::time::Instant::now() + OLDEST_WAIT;
        loop {
            let oldest = self.activity.oldest();
            if oldest >= now || std::time::Instant::now() >= until {
                return oldest;
            }
            // Sleeps rather than spins: on a machine with no core to spare, a spinning logger
            // takes one from the very workers it waits for.
            std::thread::sleep(OLDEST_POLL);
        }
    }

    /// Moves to the requested segment if asked: a new file that starts with the last marker (so
    /// every segment's file says how far its logger's records are complete), made durable.
    fn rotate(&mut self) -> Result<(), DurabilityError> {
        let to = self.shared.rotate_to.load(Ordering::Acquire);
        if to <= self.segment {
            return Ok(());
        }
        // Rounds that wrote no marker did not fsync: their records must be on disk before a marker
        // in the new segment's file claims them.
        let old = self
            .dir
            .join(file_name(self.generation, self.segment, self.index));
        self.file
            .sync()
            .map_err(|e| DurabilityError::io("fsync", &old, e))?;
        let mut file = LogFile::create(
            &self.dir,
            self.generation,
            to,
            self.index,
            self.file.fsync,
            self.file.limit,
        )?;
        let mut marker = Vec::new();
        block::push(&mut marker, Kind::Durable, &self.last_marker.to_le_bytes());
        let path = self.dir.join(file_name(self.generation, to, self.index));
        file.append(&marker, true)
            .map_err(|e| DurabilityError::io("write", &path, e))?;
        if self.file.fsync == FsyncPolicy::Group {
            sync_dir(&self.dir)?;
        }
        self.file = file;
        self.segment = to;
        self.shared.segments[self.index].store(to, Ordering::Release);
        Ok(())
    }

    /// Whether a round is due: the epoch moved since the last one (a marker may advance), the
    /// pace passed (the buffers do not grow without bound), or a stop or a new segment is asked.
    /// Between, the logger sleeps instead of taking a core from the workers: SiloR's loggers
    /// write when the epoch advances or a buffer fills, not continuously.
    fn due(&self, last: (u64, std::time::Instant)) -> bool {
        self.epoch.current() != last.0
            || last.1.elapsed() >= self.pace
            || self.shared.stop.load(Ordering::Acquire)
            || self.shared.rotate_to.load(Ordering::Acquire) > self.segment
    }

    fn run(mut self) {
        let mut last = (0, std::time::Instant::now());
        loop {
            if self.shared.halt.load(Ordering::Acquire) {
                return;
            }
            if !self.due(last) {
                std::thread::park_timeout(Duration::from_millis(1));
                continue;
            }
            last = (self.epoch.current(), std::time::Instant::now());
            let stopping = self.shared.stop.load(Ordering::Acquire);
            let round = self.round().map_err(|e| e.to_string()).and_then(|wrote| {
                self.rotate().map_err(|e| e.to_string())?;
                Ok(wrote)
            });
            match round {
                Err(e) => {
                    self.shared.fail(format!("logger {}: {e}", self.index));
                    return;
                }
                Ok(_) if stopping => return,
                Ok(_) => {}
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
    /// Starts one logger per file of `files` (segment 0 of `generation` in `dir`), whose markers
    /// begin at `durable`; a logger's rounds are at most `pace` apart while the epoch stays.
    pub(crate) fn start(
        shared: Arc<Logging>,
        activity: Arc<Activity>,
        (epoch, pace): (EpochReader, Duration),
        files: Vec<LogFile>,
        (dir, generation): (&Path, u64),
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
                    dir: dir.to_path_buf(),
                    generation,
                    segment: 0,
                    last_marker: durable,
                    marked: false,
                    spares: Vec::new(),
                    headers: Vec::new(),
                    pace,
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
