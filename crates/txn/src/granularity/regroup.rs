//! Online regrouping: a table's column groups change at a quiescent point.
//!
//! The regrouper claims every activity slot (as the phase coordinator claims an idle worker's,
//! `Activity::try_claim`): a worker inside a transaction finishes it first, and a worker between
//! transactions waits at its next start until the claims end. No transaction is in flight while
//! the records are copied into the new layout (`Table::regroup`), so none straddles two layouts.
//!
//! Under a phased protocol the regrouper first takes the phase coordinator's role and settles the
//! database (Doppel: merges every per-core slice and returns to a joined phase), then holds the
//! role while it regroups: no record is split, and no split phase starts, while the layout
//! changes. Under durable operation the regrouper holds the layout gate
//! ([`super::Granularity::layout_gate`]) that the checkpointer reads under, so an image is written
//! in one layout per table, the one its checkpoint records for recovery.
//!
//! Each new group of a record takes the largest TID (and, under TicToc, read timestamp) of the old
//! groups that held its columns: every column's version can only move up, so validation stays
//! conservative. While recording, the regrouping is itself a history event: for every column whose
//! version moved, a read of the old version and a write of the new one (history items of tables
//! with automatic groups are columns, see [`column_item`], so they survive regroupings).

use phasedb_check::{Item, ReadEvent, TxnEvent, WriteEvent, WriteKind};
use phasedb_storage::{Schema, SchemaError, TableId};
use thiserror::Error;

use crate::activity::Activity;
use crate::database::{Database, MAX_WORKERS};
use crate::protocol::Protocol;
use crate::record::history_version;
use crate::tid::{ABSENT, LOCK, TID_MASK, TidMeta, UNLINKED, tid};

/// Why a table's groups cannot be chosen automatically or changed.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RegroupError {
    #[error("no table {0}")]
    NoTable(TableId),
    #[error("table {0}: automatic column groups are limited to the first 64 tables")]
    TooManyTables(TableId),
    #[error(transparent)]
    Schema(#[from] SchemaError),
}

/// The history item of column `col` of row `key` in a table with automatic groups.
pub fn column_item(table: TableId, col: usize, key: u64) -> Item {
    Item {
        table: COLUMN_ITEMS + table * 64 + col as u32,
        key,
    }
}

/// History items of tables with automatic groups start here (group items are below `2^24`).
const COLUMN_ITEMS: u32 = 1 << 24;

/// The worker id of regrouping events in histories.
const REGROUP_WORKER: u32 = phasedb_check::FIRST_RESERVED_WORKER - 1;

/// Every activity slot claimed, released on drop.
struct Quiescent<'a> {
    activity: &'a Activity,
}

impl<'a> Quiescent<'a> {
    fn reach(activity: &'a Activity) -> Quiescent<'a> {
        for slot in 0..MAX_WORKERS {
            while !activity.try_claim(slot) {
                std::thread::yield_now();
            }
        }
        Quiescent { activity }
    }
}

impl Drop for Quiescent<'_> {
    fn drop(&mut self) {
        for slot in 0..MAX_WORKERS {
            self.activity.unclaim(slot);
        }
    }
}

/// Checks that table `t` of `db` may have its groups changed.
pub(crate) fn check<P: Protocol>(db: &Database<P>, t: TableId) -> Result<(), RegroupError> {
    if t as usize >= db.tables().len() {
        return Err(RegroupError::NoTable(t));
    }
    if t as usize >= super::sample::MAX_AUTO_TABLES {
        return Err(RegroupError::TooManyTables(t));
    }
    Ok(())
}

/// Changes table `t`'s groups to `group_of` (each column's group) at a quiescent point. The
/// caller runs no transaction and holds the layout gate for writing. False if the table already
/// had these groups.
pub(crate) fn regroup<P: Protocol>(
    db: &Database<P>,
    t: TableId,
    group_of: &[usize],
) -> Result<bool, RegroupError> {
    check(db, t)?;
    let table = db.table(t);
    let schema = table.schema().regrouped(group_of)?;
    if schema.group_of_columns() == table.schema().group_of_columns() {
        return Ok(false);
    }
    let _hold = db.granularity.hold_workers();
    let role = P::PHASED.then(|| db.phases.coordinate());
    if let Some(role) = &role {
        P::settle(db, role);
    }
    let _quiet = Quiescent::reach(&db.activity);
    let guard = phasedb_storage::pin();
    let (old, layout) = (table.schema().clone(), *table.layout());
    let covering: Vec<u32> = (schema.groups().iter())
        .map(|g| old.groups_of(g.columns))
        .collect();
    let mut event = db.config.record_history.then(|| TxnEvent {
        id: (1 << 63) | db.granularity.next_event(),
        worker: REGROUP_WORKER,
        reads: Vec::new(),
        writes: Vec::new(),
        split_ops: Vec::new(),
        merges: Vec::new(),
    });
    let merged = |words: &[u64], mask: u32| {
        let mut m = mask;
        let (mut word, mut rts) = (0u64, 0u64);
        while m != 0 {
            let g = m.trailing_zeros() as usize;
            m &= m - 1;
            word = (word & ABSENT) | (words[g] & ABSENT) | tid(word).max(tid(words[g]));
            rts = rts.max(words[g + Schema::MAX_GROUPS]);
        }
        (word, rts)
    };
    // Per old group: its word, then (at + MAX_GROUPS) its read timestamp.
    let words = std::cell::RefCell::new([0u64; 2 * Schema::MAX_GROUPS]);
    table.regroup(
        schema.clone(),
        &guard,
        |key, rec| {
            let words = &mut *words.borrow_mut();
            for g in 0..old.groups().len() {
                let meta = rec.meta(&layout, g);
                words[g] = meta.tid().load();
                words[g + Schema::MAX_GROUPS] = meta.read_ts();
            }
            if words[..old.groups().len()]
                .iter()
                .any(|w| w & UNLINKED != 0)
            {
                return false;
            }
            if let Some(ev) = &mut event
                && words[0] & ABSENT == 0
            {
                record_moves(ev, t, key, &old, &schema, &covering, words, merged);
            }
            true
        },
        |_, covering| {
            let (word, rts) = merged(&*words.borrow(), covering);
            debug_assert_eq!(word & LOCK, 0, "no lock is held at a quiescent point");
            let meta = P::new_meta(word & (ABSENT | TID_MASK));
            meta.raise_read_ts(rts);
            meta
        },
    )?;
    if let Some(ev) = event {
        db.deposit_history(phasedb_check::History { txns: vec![ev] });
    }
    Ok(true)
}

/// Adds to `ev` the version moves of the columns of record `key`.
#[allow(clippy::too_many_arguments)]
fn record_moves(
    ev: &mut TxnEvent,
    t: TableId,
    key: u64,
    old: &Schema,
    new: &Schema,
    covering: &[u32],
    words: &[u64],
    merged: impl Fn(&[u64], u32) -> (u64, u64),
) {
    for (c, col) in old.columns().iter().enumerate() {
        let before = history_version(words[col.group]);
        let after = history_version(merged(words, covering[new.column(c).group]).0);
        if before != after {
            let item = column_item(t, c, key);
            ev.reads.push(ReadEvent {
                item,
                version: before,
            });
            ev.writes.push(WriteEvent {
                item,
                version: after,
                prev: before,
                kind: WriteKind::Update,
            });
        }
    }
}
