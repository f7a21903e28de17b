//! STAR's two commit rules over one database (§4.1, §4.2): the partitioned phase's, for a partition
//! run by exactly one thread, and the single-master phase's, Silo's OCC.

use std::sync::atomic::{AtomicU8, Ordering};

use phasedb_storage::{Guard, RecordLayout, RecordPtr, TableId};

use crate::commit;
use crate::database::Database;
use crate::error::TxResult;
use crate::occ::silo_commit;
use crate::protocol::Protocol;
use crate::state::{CommitCtx, LockEntry, TxState, WriteKind};
use crate::tid::{ABSENT, TID_MASK, TidWord};

/// STAR's concurrency control (Lu et al., VLDB 2019): the phase the database runs in decides the
/// commit rule ([`StarMode`], switched between phases by [`Database::set_star_mode`]).
///
/// - **Partitioned phase** (§4.1): each partition has exactly one thread running its transactions,
///   and a transaction touches one partition. Reads are plain loads, commit takes no lock on the
///   records it updates or deletes and validates nothing; it still keeps the read and write sets (a
///   user abort, such as TPC-C's invalid item, writes nothing), chooses a TID above every TID it read
///   or overwrote and the worker's last one, in the current epoch, and installs. Inserts go through
///   the shared insert step, which links new records locked and locks a reused tombstone with one
///   compare-and-swap: a tombstone left by an earlier phase may be unlinked by whichever worker
///   deleted it, and the compare-and-swap settles that race.
/// - **Single-master phase** (§4.2): any transaction, on any number of threads: Silo's reads and
///   commit ([`crate::Occ`]).
///
/// Replication records are written by [`crate::Worker::write_replication`] and applied by
/// [`Database::apply_replication`] (see [`crate::star`]).
pub struct Star;

/// Which of STAR's phases the database runs in; it decides the commit rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StarMode {
    /// Each partition is run by one thread; no locks, no validation (§4.1).
    Partitioned,
    /// Any transaction on any thread; Silo's OCC (§4.2).
    SingleMaster,
}

/// Star's database-wide state: the current mode. A new database runs the single-master rule,
/// which is correct whatever the threads do; the STAR node switches it to the partitioned phase.
#[derive(Debug)]
pub struct StarShared {
    mode: AtomicU8,
}

const PARTITIONED: u8 = 0;
const SINGLE_MASTER: u8 = 1;

impl Default for StarShared {
    fn default() -> Self {
        StarShared {
            mode: AtomicU8::new(SINGLE_MASTER),
        }
    }
}

impl StarShared {
    #[inline(always)]
    fn partitioned(&self) -> bool {
        self.mode.load(Ordering::Acquire) == PARTITIONED
    }
}

impl Database<Star> {
    /// Switches the commit rule. Called only while no worker runs a transaction (between phases,
    /// after the replication fence): a transaction runs wholly under one rule.
    pub fn set_star_mode(&self, mode: StarMode) {
        let m = match mode {
            StarMode::Partitioned => PARTITIONED,
            StarMode::SingleMaster => SINGLE_MASTER,
        };
        self.shared.mode.store(m, Ordering::Release);
    }

    /// The current commit rule.
    pub fn star_mode(&self) -> StarMode {
        if self.shared.partitioned() {
            StarMode::Partitioned
        } else {
            StarMode::SingleMaster
        }
    }
}

impl Protocol for Star {
    const NAME: &'static str = "star";
    const PARTIAL_READS: bool = true;
    type Shared = StarShared;
    type Meta = TidWord;

    fn new_meta(word: u64) -> TidWord {
        TidWord::new(word)
    }

    #[allow(clippy::too_many_arguments)] // the hot read path; kept flat so it inlines
    #[inline(always)] // with its two rules it is past `#[inline]`'s threshold, and a call costs ~8%
    fn read_group(
        st: &mut TxState<TidWord>,
        db: &Database<Self>,
        _table: TableId,
        rec: RecordPtr<TidWord>,
        layout: &RecordLayout,
        g: usize,
        first: usize,
        words: usize,
    ) -> TxResult<u64> {
        let meta = rec.meta(layout, g);
        let out = &mut st.row[first..first + words];
        if db.shared.partitioned() {
            // The partition's only writer is this thread (replication applies only other
            // partitions' records here).
            let word = meta.load();
            if word & ABSENT == 0 {
                rec.copy_part(layout, g, first, out);
            }
            return Ok(word & (TID_MASK | ABSENT));
        }
        meta.read_stable(|word| {
            if word & ABSENT == 0 {
                rec.copy_part(layout, g, first, out);
            }
        })
    }

    fn commit(st: &mut TxState<TidWord>, ctx: &mut CommitCtx<'_, Self>) -> TxResult<()> {
        if ctx.db.shared.partitioned() {
            partitioned_commit(st, ctx)
        } else {
            silo_commit::<Self, false>(st, ctx)
        }
    }

    fn reads_valid(st: &mut TxState<TidWord>, db: &Database<Self>, guard: &Guard) -> bool {
        // Nobody else writes a partition during the partitioned phase: what was read holds.
        db.shared.partitioned() || commit::validate(st, db, guard).is_ok()
    }

    #[inline]
    fn reclaim(st: &mut TxState<TidWord>, db: &Database<Self>) {
        commit::reclaim(db, st);
    }
}

/// The partitioned phase's commit (§4.1): inserts find or create their records (locked, as in
/// Silo), the groups that updates and deletes overwrite are listed with the words they hold without
/// locking them, and the writes are installed with a TID above everything read or overwritten and
/// the worker's last TID, in the current epoch. While histories are recorded, point misses (of
/// read-only transactions too) are looked up again only to learn the version of absence they saw.
#[inline(always)]
fn partitioned_commit(st: &mut TxState<TidWord>, ctx: &mut CommitCtx<'_, Star>) -> TxResult<()> {
    let db = ctx.db;
    let writes = st.writes.iter().any(|w| w.kind != WriteKind::Cancelled);
    if writes {
        if let Err(e) = commit::lock_inserts(st, db, ctx.guard) {
            commit::release(st, db);
            return Err(e);
        }
        list_overwritten(st, db);
    }
    if db.config.record_history && !st.misses.is_empty() {
        st.locks.sort_unstable_by_key(LockEntry::order);
        if let Err(e) = commit::validate_misses(st, db, ctx.guard) {
            commit::release(st, db);
            return Err(e);
        }
    }
    if writes {
        let tid = commit::choose_tid(st, *ctx.last_tid, db.epoch.current());
        commit::install(st, db, tid);
        *ctx.last_tid = tid;
        ctx.tid = tid;
    }
    Ok(())
}

/// Lists the groups updates and deletes overwrite, with the words they hold, without locking them.
#[inline(always)]
fn list_overwritten(st: &mut TxState<TidWord>, db: &Database<Star>) {
    for (w, entry) in st.writes.iter().enumerate() {
        if matches!(entry.kind, WriteKind::Insert | WriteKind::Cancelled) {
            continue;
        }
        let table = db.table(entry.table);
        let rec = entry.rec.expect("updates and deletes know their record");
        let mut m = entry.groups(table.schema());
        while m != 0 {
            let g = m.trailing_zeros() as u8;
            m &= m - 1;
            st.locks.push(LockEntry {
                rec,
                group: g,
                write: w as u32,
                prev: rec.meta(table.layout(), g as usize).load(),
                fresh: false,
                held: false,
                shared: false,
            });
        }
    }
}
