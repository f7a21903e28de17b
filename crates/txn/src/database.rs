use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use phasedb_check::History;
use phasedb_storage::{InsertOutcome, RowBuf, RowView, Table, TableId, TableSpec};

use crate::tid::TidMeta;

use crate::activity::Activity;
use crate::epoch::EpochClock;
use crate::error::{TxError, TxResult};
use crate::protocol::Protocol;
use crate::state::Unlink;
use crate::tx::Tx;
use crate::worker::Worker;

/// Most workers alive at once on one database.
pub const MAX_WORKERS: usize = 1024;

/// Settings of an embedded database.
#[derive(Clone, Debug)]
pub struct Config {
    /// Record every committed transaction's reads and writes for the history checkers (slow; tests).
    pub record_history: bool,
    /// How often the global epoch advances; zero: only through [`Database::set_epoch`].
    pub epoch_interval: Duration,
    /// Give up on a transaction after this many conflicting attempts (`None`: retry forever).
    pub max_retries: Option<u32>,
    /// Upper bound of the randomised exponential backoff between retries, in spin iterations.
    pub max_backoff_spins: u32,
    /// Length of a split phase under phased protocols (Doppel's cycle; 20 ms in the paper).
    pub phase_length: Duration,
    /// How Doppel decides which records to split.
    pub split: crate::doppel::SplitPolicy,
    /// Durable operation (SiloR's logging, checkpoints and recovery) in a data directory; `None`
    /// keeps everything in memory. Started by [`Database::start_durability`].
    pub durability: Option<crate::durability::Durability>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            record_history: false,
            epoch_interval: Duration::from_millis(40),
            max_retries: None,
            max_backoff_spins: 1 << 14,
            phase_length: Duration::from_millis(20),
            split: Default::default(),
            durability: None,
        }
    }
}

/// An in-memory database running protocol `P`: its tables, its epoch clock and what its workers share.
///
/// ```
/// use phasedb_storage::{ColumnType, Schema, TableSpec};
/// use phasedb_txn::{Config, Database, Occ};
///
/// let mut db = Database::<Occ>::open(Config::default());
/// let schema = Schema::builder().column("balance", ColumnType::I64, 0).build().unwrap();
/// let accounts = db.create_table(TableSpec::new("accounts", schema, 16));
/// for id in 0..2 {
///     db.load(accounts, id, |row| row.set_i64(0, 100)).unwrap();
/// }
/// db.execute(|tx| {
///     let from = tx.get(accounts, 0)?.expect("account 0").i64(0);
///     let to = tx.get(accounts, 1)?.expect("account 1").i64(0);
///     tx.update(accounts, 0, |row| row.set_i64(0, from - 30))?;
///     tx.update(accounts, 1, |row| row.set_i64(0, to + 30))?;
///     Ok(())
/// })
/// .unwrap();
/// let balance = db.execute(|tx| Ok(tx.get(accounts, 1)?.unwrap().i64(0))).unwrap();
/// assert_eq!(balance, 130);
/// ```
pub struct Database<P: Protocol> {
    /// Shared with the background checkpointer once durable operation started (tables are then
    /// fixed).
    pub(crate) tables: std::sync::Arc<Vec<Table<P::Meta>>>,
    pub(crate) config: Config,
    pub(crate) epoch: EpochClock,
    next_worker: AtomicU32,
    /// While recording: the last version of keys whose records were unlinked, so a later insert of the
    /// key continues the key's version chain.
    pub(crate) graveyard: Mutex<HashMap<(TableId, u64), u64>>,
    histories: Mutex<Vec<History>>,
    pub(crate) activity: std::sync::Arc<Activity>,
    /// Per table, a logical time every new record must be installed after: the latest commit time of
    /// transactions that saw a key absent without a record to carry it (TicToc).
    pub(crate) phantom_ts: Vec<crossbeam_utils::CachePadded<std::sync::atomic::AtomicU64>>,
    /// Per activity slot, the age timestamp of a transaction another one asked to abort (SwissTM's
    /// contention manager); the slot's owner checks it at each access.
    pub(crate) abort_requests: Vec<crossbeam_utils::CachePadded<std::sync::atomic::AtomicU64>>,
    /// A cheap clock (the CPU's time-stamp counter) for per-transaction timing, and its reading when
    /// the database was opened: the origin of transactions' age timestamps.
    pub(crate) clock: quanta::Clock,
    pub(crate) opened_raw: u64,
    /// Deleted records left waiting by workers that were dropped; the next reclaiming worker adopts them.
    orphans: Mutex<VecDeque<Unlink>>,
    has_orphans: AtomicBool,
    /// The phase mechanism (used by phased protocols only).
    pub(crate) phases: crate::phase::Phases,
    /// The protocol's database-wide state.
    pub(crate) shared: P::Shared,
    /// Each table's spec, to make the tables afresh for recovery.
    specs: Vec<TableSpec>,
    /// The loggers, once durable operation started.
    pub(crate) durable: Option<Durable>,
    /// Automatic column groups: samples, planner, changes.
    pub(crate) granularity: crate::granularity::Granularity,
}

/// Durable operation of a database: what its workers log into and the loggers' threads.
pub(crate) struct Durable {
    /// Stopped first: it waits on the loggers.
    pub(crate) checkpointer: crate::durability::Checkpointer,
    pub(crate) logging: std::sync::Arc<crate::durability::Logging>,
    /// Dropped with the database: makes everything committed durable, then stops the loggers.
    #[allow(dead_code)]
    pub(crate) loggers: crate::durability::Loggers,
}

impl<P: Protocol> Drop for Database<P> {
    /// Under durable operation a phased protocol first brings every committed write into the
    /// records (Doppel's reconciliation logs the values split phases produced), so the loggers'
    /// last round makes it durable.
    fn drop(&mut self) {
        if P::PHASED && self.durable.is_some() {
            self.settle();
        }
    }
}

impl<P: Protocol> Database<P> {
    /// An empty database.
    pub fn open(config: Config) -> Database<P> {
        let clock = quanta::Clock::new();
        let opened_raw = clock.raw();
        let mut phases = crate::phase::Phases::new(MAX_WORKERS, 0);
        if P::PHASED {
            phases.start_ticker(config.phase_length);
        }
        Database {
            phases,
            shared: P::Shared::default(),
            tables: Default::default(),
            epoch: EpochClock::start(config.epoch_interval),
            config,
            next_worker: AtomicU32::new(0),
            graveyard: Mutex::new(HashMap::new()),
            histories: Mutex::new(Vec::new()),
            activity: std::sync::Arc::new(Activity::new(MAX_WORKERS)),
            specs: Vec::new(),
            durable: None,
            granularity: Default::default(),
            phantom_ts: Vec::new(),
            abort_requests: (0..MAX_WORKERS).map(|_| Default::default()).collect(),
            clock,
            opened_raw,
            orphans: Mutex::new(VecDeque::new()),
            has_orphans: AtomicBool::new(false),
        }
    }

    /// Raises the global epoch to `epoch` (monotone: a value at or below the current epoch is
    /// ignored). With [`Config::epoch_interval`] zero no epoch thread runs and the epoch moves only
    /// through this call: STAR sets it to the phase number at each phase switch, so every TID of a
    /// later phase is above every TID of earlier phases on every node (STAR §3: "STAR commits
    /// transactions and increments the global epoch when the system switches to the next phase").
    /// Panics if `epoch` does not fit the TID's epoch bits ([`crate::tid::MAX_EPOCH`]).
    pub fn set_epoch(&self, epoch: u64) {
        assert!(
            epoch <= crate::tid::MAX_EPOCH,
            "epoch {epoch} does not fit a TID (at most {})",
            crate::tid::MAX_EPOCH
        );
        self.epoch.set(epoch);
    }

    /// The current global epoch (the high bits of the TIDs chosen now).
    pub fn epoch(&self) -> u64 {
        self.epoch.current()
    }

    /// The protocol's name.
    pub fn protocol(&self) -> &'static str {
        P::NAME
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Adds a table; tables are created before transactions start. A schema declared without
    /// column groups ([`phasedb_storage::Schema::auto_groups`]) gets automatic groups
    /// ([`Database::set_auto_groups`]), under every protocol and with or without durability.
    pub fn create_table(&mut self, spec: TableSpec) -> TableId {
        let id = self.tables.len() as TableId;
        let auto = spec.schema.auto_groups();
        self.specs.push(spec.clone());
        std::sync::Arc::get_mut(&mut self.tables)
            .expect("tables are created before durable operation starts")
            .push(Table::new(id, spec));
        self.phantom_ts.push(Default::default());
        if auto {
            // A refusal (past the 64 tables sampling covers) leaves the table as laid out: one
            // group, like a coarse schema.
            let _ = self.set_auto_groups(id);
        }
        id
    }

    /// The table `t`.
    pub fn table(&self, t: TableId) -> &Table<P::Meta> {
        &self.tables[t as usize]
    }

    /// All tables.
    pub fn tables(&self) -> &[Table<P::Meta>] {
        &self.tables
    }

    /// Finds a table by name.
    pub fn table_id(&self, name: &str) -> Option<TableId> {
        self.tables
            .iter()
            .position(|t| t.name() == name)
            .map(|i| i as TableId)
    }

    /// Bulk-loads a row outside any transaction (before workers run): `fill` writes its columns.
    pub fn load(&self, t: TableId, key: u64, fill: impl FnOnce(&mut RowBuf<'_>)) -> TxResult<()> {
        let table = self.table(t);
        let mut words = vec![0u64; table.schema().row_words()];
        fill(&mut RowBuf::new(table.schema(), &mut words));
        self.load_image(t, key, &words)
    }

    /// Bulk-loads a row image (`schema.row_words()` words) outside any transaction.
    pub fn load_image(&self, t: TableId, key: u64, words: &[u64]) -> TxResult<()> {
        let guard = phasedb_storage::pin();
        match self
            .table(t)
            .insert_with(key, &guard, |_| P::new_meta(0), Some(words))
        {
            InsertOutcome::Inserted(_) => Ok(()),
            InsertOutcome::Exists(_) => Err(TxError::DuplicateKey { table: t, key }),
        }
    }

    /// Calls `f(key, row)` on every existing row of table `t`, outside any transaction. Only for use
    /// when no transaction runs (consistency checks after a run): it reads without concurrency control.
    pub fn for_each_row_quiescent(&self, t: TableId, mut f: impl FnMut(u64, RowView<'_>)) {
        self.settle();
        let table = self.table(t);
        let schema = table.schema();
        let mut words = vec![0u64; schema.row_words()];
        let guard = phasedb_storage::pin();
        table.for_each(&guard, |key, rec| {
            if rec.meta(table.layout(), 0).tid().load() & crate::tid::ABSENT == 0 {
                rec.copy_words(table.layout(), 0, &mut words);
                f(key, RowView::new(schema, &words));
            }
        });
    }

    /// Row `key` of table `t` as `f` sees it (`None` if there is no such row), outside any
    /// transaction: like [`Database::for_each_row_quiescent`], it reads without concurrency
    /// control, so only for when no transaction and no replication runs.
    pub fn read_quiescent<R>(
        &self,
        t: TableId,
        key: u64,
        f: impl FnOnce(RowView<'_>) -> R,
    ) -> Option<R> {
        self.settle();
        let table = self.table(t);
        let schema = table.schema();
        let guard = phasedb_storage::pin();
        let rec = table.get(key, &guard)?;
        if rec.meta(table.layout(), 0).tid().load() & crate::tid::ABSENT != 0 {
            return None;
        }
        let mut words = vec![0u64; schema.row_words()];
        rec.copy_words(table.layout(), 0, &mut words);
        Some(f(RowView::new(schema, &words)))
    }

    /// Brings every committed write into the records themselves, for a phased protocol (Doppel
    /// merges all per-core slices and returns to a joined phase). Waits for running transactions'
    /// phase to end; meant for when no worker runs (checks after a run), harmless otherwise.
    pub fn settle(&self) {
        if P::PHASED {
            let role = self.phases.coordinate();
            P::settle(self, &role);
        }
    }

    /// The protocol's own figures (Doppel: phases, split records, stashed transactions), as
    /// name/value pairs for reports.
    pub fn protocol_report(&self) -> Vec<(&'static str, String)> {
        let mut r = P::report(self);
        r.extend(crate::granularity::report(self));
        r
    }

    /// Starts durable operation in [`Config::durability`]'s directory (SiloR). Call it once the
    /// tables are created and loaded, before any worker runs a transaction.
    ///
    /// - A new (or empty) directory: the loaded rows are written as the first checkpoint.
    /// - A directory holding a database of the same schema: its newest checkpoint that verifies is
    ///   loaded (replacing the rows loaded before the call) and the logs are replayed in parallel up
    ///   to the last epoch durable on every logger, each record applied with the Thomas write rule;
    ///   a torn log tail is cut at its last whole block. The recovered state is written as a new
    ///   checkpoint and older logs and checkpoints are deleted (the previous checkpoint is kept to
    ///   fall back to). The epoch moves past every recovered TID.
    /// - A directory of another schema or format version, or holding foreign files, is refused.
    ///
    /// Then logger threads start; every commit's after-images are logged, and a transaction is
    /// durable once its epoch is at or below [`Database::durable_epoch`] (see
    /// [`Worker::wait_durable`]). Returns what was recovered. Only protocols whose commit logs
    /// support it (every protocol but `atomic`, `nocc` and `star`); others get
    /// [`crate::DurabilityError::Unsupported`].
    pub fn start_durability(
        &mut self,
    ) -> Result<crate::durability::Recovery, crate::durability::DurabilityError> {
        P::start_durability(self)
    }

    /// The durable epoch (every transaction committed in it or before is on disk in every
    /// logger's file), or `None` if durable operation has not started.
    pub fn durable_epoch(&self) -> Option<u64> {
        self.durable.as_ref().map(|d| d.logging.durable())
    }

    /// Bytes the loggers wrote to the log files since durable operation started (records,
    /// block headers and markers), or `None` if it has not started: for bytes per transaction.
    pub fn log_bytes(&self) -> Option<u64> {
        self.durable.as_ref().map(|d| d.logging.bytes_written())
    }

    /// Waits until epoch `epoch` is durable; an error if durability is off or logging failed.
    ///
    /// Under a phased protocol (Doppel) a split phase's epochs become durable only at its
    /// reconciliation, which workers start at a transaction boundary: if the epoch is not durable
    /// after a few epochs (workers idle, or all of them waiting), the phase is settled here.
    pub fn wait_durable(&self, epoch: u64) -> Result<(), crate::durability::DurabilityError> {
        match &self.durable {
            None => Err(crate::durability::DurabilityError::NotConfigured),
            Some(d) if P::PHASED => {
                let patience = (self.config.epoch_interval * 4).max(Duration::from_millis(1));
                while !d.logging.wait_for(epoch, patience)? {
                    self.settle();
                }
                Ok(())
            }
            Some(d) => d.logging.wait(epoch),
        }
    }

    /// Writes a checkpoint now (SiloR's fuzzy checkpoint, taken by the background checkpointer
    /// while workers run) and deletes the checkpoints and log segments it makes unneeded; waits
    /// for it. An error if durable operation has not started or the checkpoint failed. Under a
    /// phased protocol the image waits for a split phase's epochs to be durable, so the phase is
    /// settled here, as in [`Database::wait_durable`], if the checkpoint takes four epochs.
    pub fn checkpoint(
        &self,
    ) -> Result<crate::durability::CheckpointReport, crate::durability::DurabilityError> {
        match &self.durable {
            None => Err(crate::durability::DurabilityError::NotConfigured),
            Some(d) => {
                let patience = (self.config.epoch_interval * 4).max(Duration::from_millis(1));
                d.checkpointer.checkpoint(patience, || self.settle())
            }
        }
    }

    /// The checkpoints taken during this run (periodic and on demand), or `None` if durable
    /// operation has not started.
    pub fn checkpoint_stats(&self) -> Option<crate::durability::CheckpointStats> {
        self.durable.as_ref().map(|d| d.checkpointer.stats())
    }

    /// Ends the database as a process crash would, for crash tests: the checkpointer and the
    /// loggers stop without writing anything more (a checkpoint under way stays incomplete, the
    /// buffered log records are lost), then the memory is freed. Returns the durable epoch at the
    /// crash (`None` without durable operation): every transaction of it or before is in the
    /// data directory.
    pub fn crash(mut self) -> Option<u64> {
        let d = self.durable.take()?;
        d.logging.halt();
        drop(d.checkpointer);
        drop(d.loggers);
        Some(d.logging.durable())
    }

    /// Makes every table afresh, empty (recovery replaces what was loaded).
    /// The tables as created (declared groups), which [`Database::reset_tables`] goes back to.
    pub(crate) fn specs(&self) -> &[TableSpec] {
        &self.specs
    }

    pub(crate) fn reset_tables(&mut self) {
        self.tables = std::sync::Arc::new(
            self.specs
                .iter()
                .enumerate()
                .map(|(i, s)| Table::new(i as TableId, s.clone()))
                .collect(),
        );
        self.phantom_ts = (0..self.tables.len()).map(|_| Default::default()).collect();
        self.graveyard.lock().clear();
    }

    /// A new worker: the per-thread context that runs transactions. Create one per thread.
    ///
    /// Panics if [`Config::durability`] is set and [`Database::start_durability`] has not run:
    /// its transactions would not be logged.
    pub fn worker(&self) -> Worker<'_, P> {
        assert!(
            self.config.durability.is_none() || self.durable.is_some(),
            "Config::durability is set: call Database::start_durability after loading the tables, \
             before running transactions"
        );
        Worker::new(self, self.next_worker.fetch_add(1, Ordering::Relaxed))
    }

    /// Runs one transaction on a temporary worker (convenient; threads that run many keep a
    /// [`Worker`]). Conflicts are retried; other errors are returned.
    pub fn execute<R>(
        &self,
        procedure: impl FnMut(&mut Tx<'_, '_, P>) -> TxResult<R>,
    ) -> TxResult<R> {
        self.worker().execute(0, procedure)
    }

    /// Takes the histories recorded so far by workers that have been dropped.
    pub fn take_history(&self) -> History {
        let mut all = History::default();
        for h in self.histories.lock().drain(..) {
            all.txns.extend(h.txns);
        }
        all
    }

    pub(crate) fn deposit_history(&self, h: History) {
        if !h.txns.is_empty() {
            self.histories.lock().push(h);
        }
    }

    /// Approximate bytes held by all tables.
    pub fn memory_bytes(&self) -> usize {
        self.tables.iter().map(|t| t.memory_bytes()).sum()
    }

    /// Takes over the waiting unlinks of a worker that goes away.
    pub(crate) fn adopt_limbo(&self, limbo: &mut VecDeque<Unlink>) {
        if !limbo.is_empty() {
            self.orphans.lock().extend(limbo.drain(..));
            self.has_orphans.store(true, Ordering::Release);
        }
    }

    /// Moves waiting unlinks of dropped workers into `limbo`.
    #[inline]
    pub(crate) fn take_orphans(&self, limbo: &mut VecDeque<Unlink>) {
        if self.has_orphans.load(Ordering::Acquire) {
            let mut orphans = self.orphans.lock();
            limbo.extend(orphans.drain(..));
            self.has_orphans.store(false, Ordering::Release);
        }
    }

    pub(crate) fn max_row_words(&self) -> usize {
        self.tables
            .iter()
            .map(|t| t.schema().row_words())
            .max()
            .unwrap_or(1)
    }
}
