//! Rows read, locked and written on behalf of a transaction another node runs (STAR's distributed
//! baselines, Dist-OCC and Dist-S2PL, Lu et al., VLDB 2019, §8.1.2): the *participant* side of
//! remote reads and two-phase commit, and the *home* side's copies of the rows it fetched.
//!
//! - [`Database::read_rows`]: a remote read — the rows' column groups with their TID words, as
//!   replication records (one upsert per group, carrying the group's TID, loaded rows TID 0).
//! - [`RowLocks`]: the NO_WAIT locks a participant holds for one remote transaction — taken as it
//!   reads (S2PL) or at prepare (OCC), validated against the versions the home read, then released
//!   unchanged or with the transaction's writes installed (kept locked until the secondaries
//!   acknowledged, under synchronous replication).
//! - [`Database::cache_rows`]: the home node keeps the rows it fetched as records of its own
//!   database, in partitions it does not hold, so the stored procedure reruns over them through
//!   the ordinary `Tx` API; their TID words are the primary's, so the versions it reads are the
//!   ones the participants validate.
//! - [`Database::range_keys`] and [`Database::forget_range`]: remote scans — the participant
//!   names the rows a key range holds (fetched like any remote read, and checked again at
//!   prepare for phantoms), and the home clears its cached copy of the range before it caches
//!   the owner's rows, so a row deleted at the owner does not linger in the home's scans.
//! - [`Database::install_rows`]: the same for Calvin's remote reads (Thomson et al., SIGMOD 2012,
//!   §4.2), where the rows sent are the owner's current values and always replace the copy here.

use std::sync::atomic::{Ordering, fence};

use phasedb_storage::{RecordPtr, TableId};

use crate::database::Database;
use crate::error::Conflict;
use crate::protocol::Protocol;
use crate::tid::{ABSENT, LOCK, TidWord, UNLINKED, tid};

use super::Star;
use super::apply::unpack;
use super::format::{Decoder, RecordKind, ReplicationError, push_upsert};
use super::upsert::InstallRule;

/// One locked column group.
struct Held {
    table: TableId,
    rec: RecordPtr<TidWord>,
    group: u8,
    /// The word before the lock, restored by a release that installs nothing.
    prev: u64,
    /// The word installed (under its lock while held), published by the release.
    installed: Option<u64>,
}

/// The locks a participant holds for one remote transaction (see the module doc).
#[derive(Default)]
pub struct RowLocks {
    held: Vec<Held>,
    row: Vec<u64>,
}

impl RowLocks {
    /// No locks.
    pub fn new() -> Self {
        RowLocks::default()
    }

    /// Whether no lock is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// The highest TID among the versions these locks cover: a distributed transaction that
    /// writes them must commit above it (Silo's TID rule, taken across its participants).
    pub fn max_tid(&self) -> u64 {
        self.held
            .iter()
            .map(|h| crate::tid::tid(h.prev))
            .max()
            .unwrap_or(0)
    }

    fn holds(&self, rec: RecordPtr<TidWord>, g: usize) -> bool {
        self.held
            .iter()
            .any(|h| h.rec == rec && h.group as usize == g)
    }

    /// Locks every column group of row `key` of table `t`, NO_WAIT: a group another holds is a
    /// conflict (the locks taken so far stay, for [`RowLocks::release`]). False if no such row.
    pub fn lock(&mut self, db: &Database<Star>, t: TableId, key: u64) -> Result<bool, Conflict> {
        let guard = phasedb_storage::pin();
        let table = db.table(t);
        let Some(rec) = table.get(key, &guard) else {
            return Ok(false);
        };
        let layout = table.layout();
        for g in 0..table.schema().groups().len() {
            if self.holds(rec, g) {
                continue;
            }
            let meta = rec.meta(layout, g);
            let word = meta.load();
            if word & LOCK != 0 {
                return Err(Conflict::WriteLocked);
            }
            if word & (ABSENT | UNLINKED) != 0 {
                return Ok(false);
            }
            if !meta.try_lock(word) {
                return Err(Conflict::WriteLocked);
            }
            self.held.push(Held {
                table: t,
                rec,
                group: g as u8,
                prev: word,
                installed: None,
            });
        }
        fence(Ordering::Release);
        Ok(true)
    }

    /// Whether group `g` of row `key` still holds the version `observed` (a word without the lock
    /// bit) and nobody else has it locked.
    pub fn validate(
        &self,
        db: &Database<Star>,
        t: TableId,
        key: u64,
        g: u8,
        observed: u64,
    ) -> bool {
        let guard = phasedb_storage::pin();
        let table = db.table(t);
        let Some(rec) = table.get(key, &guard) else {
            return false;
        };
        if g as usize >= table.schema().groups().len() {
            return false;
        }
        let word = rec.meta(table.layout(), g as usize).load();
        word & !LOCK == observed && (word & LOCK == 0 || self.holds(rec, g as usize))
    }

    /// Installs the upserts of `bytes` (replication records carrying the transaction's TID) into
    /// the rows they name, which must be locked here; the groups stay locked, now holding the new
    /// TID, until [`RowLocks::release`]. Returns the records installed; a record of a row not
    /// locked here is refused.
    pub fn install(
        &mut self,
        db: &Database<Star>,
        bytes: &[u8],
    ) -> Result<usize, ReplicationError> {
        let schema_of = |t: TableId| db.tables().get(t as usize).map(|t| t.schema());
        Decoder::new(bytes, schema_of).try_for_each(|r| r.map(|_| ()))?;
        let guard = phasedb_storage::pin();
        let mut n = 0;
        for r in Decoder::new(bytes, schema_of).flatten() {
            if r.kind != RecordKind::Upsert {
                continue;
            }
            let table = db.table(r.table);
            let (schema, layout) = (table.schema(), table.layout());
            let Some(rec) = table.get(r.key, &guard) else {
                continue;
            };
            self.row.resize(schema.row_words(), 0);
            unpack(schema, r.columns, r.data, &mut self.row);
            let groups = schema.groups_of(r.columns);
            for h in &mut self.held {
                if h.rec != rec || groups & (1 << h.group) == 0 {
                    continue;
                }
                let cols = schema.groups()[h.group as usize].columns & r.columns;
                rec.install_columns(layout, schema, cols, &self.row);
                rec.meta(layout, h.group as usize).publish(r.tid | LOCK);
                h.installed = Some(r.tid);
            }
            n += 1;
        }
        Ok(n)
    }

    /// Releases every lock: a group installed publishes its new TID, the others their old word.
    pub fn release(&mut self, db: &Database<Star>) {
        for h in self.held.drain(..) {
            let layout = db.table(h.table).layout();
            h.rec
                .meta(layout, h.group as usize)
                .publish(h.installed.unwrap_or(h.prev));
        }
    }
}

impl<P: Protocol<Meta = TidWord>> Database<P> {
    /// Appends rows `keys` (table, key) to `buf` as replication records, one upsert per column
    /// group with the group's TID (a remote read). Rows absent here are left out. A group locked by
    /// a transaction other than the one holding `locks` is a conflict (NO_WAIT).
    pub fn read_rows(
        &self,
        keys: impl IntoIterator<Item = (TableId, u64)>,
        locks: Option<&RowLocks>,
        buf: &mut Vec<u8>,
    ) -> Result<(), Conflict> {
        let guard = phasedb_storage::pin();
        let mut row = Vec::new();
        for (t, key) in keys {
            let Some(table) = self.tables().get(t as usize) else {
                continue;
            };
            let Some(rec) = table.get(key, &guard) else {
                continue;
            };
            let (schema, layout) = (table.schema(), table.layout());
            row.clear();
            row.resize(schema.row_words(), 0);
            for (g, group) in schema.groups().iter().enumerate() {
                let out = &mut row[group.word..group.word + group.words];
                let meta = rec.meta(layout, g);
                let word = if locks.is_some_and(|l| l.holds(rec, g)) {
                    rec.copy_group(layout, g, out);
                    meta.load() & !LOCK
                } else {
                    meta.read_stable(|_| rec.copy_group(layout, g, out))
                        .map_err(|_| Conflict::WriteLocked)?
                };
                if word & (ABSENT | UNLINKED) != 0 {
                    continue;
                }
                push_upsert(buf, schema, t, key, tid(word), group.columns, &row);
            }
        }
        Ok(())
    }

    /// Appends to `out` the keys of table `t` in `lo..=hi`, in key order, whose row may be
    /// present: every linked row but those absent or unlinked and unlocked (a locked absent row
    /// is an insert in progress). What a scan there could see: a remote scan's rows, and at
    /// prepare, what the home's scan must have read for the range to hold no phantom. False if
    /// `t` is no table with an ordered index.
    pub fn range_keys(&self, t: TableId, lo: u64, hi: u64, out: &mut Vec<u64>) -> bool {
        let Some(table) = self.tables().get(t as usize) else {
            return false;
        };
        if !table.is_ordered() || lo > hi {
            return false;
        }
        let layout = table.layout();
        let guard = phasedb_storage::pin();
        table.scan(lo, hi, &guard, |key, rec| {
            let word = rec.meta(layout, 0).load();
            if word & LOCK != 0 || word & (ABSENT | UNLINKED) == 0 {
                out.push(key);
            }
            true
        });
        true
    }

    /// Makes the unlocked rows of table `t` in `lo..=hi` absent at TID 0, so that rows fetched
    /// from their owner land and nothing else in the range stays visible: a home's cached copy
    /// of a range in a partition it does not hold, cleared before a remote scan's rows are
    /// cached. Never for a partition this node holds (its copy is a replica). Returns the rows
    /// cleared; nothing if `t` has no ordered index.
    pub fn forget_range(&self, t: TableId, lo: u64, hi: u64) -> usize {
        let Some(table) = self.tables().get(t as usize) else {
            return 0;
        };
        if !table.is_ordered() || lo > hi {
            return 0;
        }
        let (groups, layout) = (table.schema().groups().len(), table.layout());
        let guard = phasedb_storage::pin();
        let mut rows = 0;
        table.scan(lo, hi, &guard, |_, rec| {
            rows += 1;
            for g in 0..groups {
                let meta = rec.meta(layout, g);
                let word = meta.load();
                if word & LOCK == 0 && meta.try_lock(word) {
                    meta.publish(ABSENT);
                }
            }
            true
        });
        rows
    }

    /// Keeps the rows of `bytes` (from [`Database::read_rows`]) as records here, each group with
    /// the TID it carries unless it holds a later one or is locked by a transaction running here.
    /// For rows of partitions this node does not hold: it never replicates or digests them.
    pub fn cache_rows(&self, bytes: &[u8]) -> Result<usize, ReplicationError> {
        Ok(self.upsert_rows(bytes, InstallRule::Fill)?.rows)
    }

    /// Installs the rows of `bytes` (from [`Database::read_rows`] on the node owning them) over
    /// this node's copy, whatever TIDs the copy holds, as the values a transaction about to run
    /// here must read: Calvin's remote reads, where every participant runs the whole procedure
    /// and a participant's copy of others' partitions is written by its own runs, with TIDs not
    /// comparable with the owner's. Groups locked here are left alone. Returns the rows read.
    pub fn install_rows(&self, bytes: &[u8]) -> Result<usize, ReplicationError> {
        Ok(self.upsert_rows(bytes, InstallRule::Overwrite)?.rows)
    }
}
