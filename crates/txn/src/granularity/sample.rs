//! Sampling what the planner needs, per worker: the column footprint (read and written columns per
//! table) of one committed transaction in [`crate::worker::LATENCY_SAMPLE`] (every one during the
//! planner's dense rounds, see `Granularity::commit_weight`), and for every conflict abort the
//! tables whose versions changed under the aborted attempt.
//!
//! Each worker writes only its own activity slot's sample, under a mutex that only the planner
//! (every planning round) also takes; a transaction that commits unsampled writes nothing, and the
//! no-conflict path pays one predictable branch.

use phasedb_storage::TableId;

use crate::database::Database;
use crate::protocol::Protocol;
use crate::state::{TxState, WriteKind};
use crate::tid::TidMeta;

use super::plan::MAX_PATTERNS;

/// A worker's counts for one table since the planner last collected them.
#[derive(Clone, Debug, Default)]
pub(crate) struct TableSample {
    /// (read columns, written columns, commits they stand for).
    pub patterns: Vec<(u64, u64, u64)>,
    /// Commits the samples stand for.
    pub commits: u64,
    pub conflicts: u64,
}

/// A worker's counts, by table id.
#[derive(Debug, Default)]
pub(crate) struct SlotSample {
    pub tables: Vec<TableSample>,
}

impl SlotSample {
    fn table(&mut self, t: usize) -> &mut TableSample {
        if self.tables.len() <= t {
            self.tables.resize_with(t + 1, TableSample::default);
        }
        &mut self.tables[t]
    }
}

/// Tables with ids from here on are never planned (footprints are kept in a 64-bit table mask).
pub(crate) const MAX_AUTO_TABLES: usize = 64;

/// Records the footprint of the transaction `st` just committed by the worker in `slot`, standing
/// for `weight` commits.
#[cold]
pub(crate) fn commit<P: Protocol>(
    db: &Database<P>,
    st: &TxState<P::Meta>,
    slot: usize,
    weight: u64,
) {
    let g = &db.granularity;
    let mut read = [0u64; MAX_AUTO_TABLES];
    let mut write = [0u64; MAX_AUTO_TABLES];
    let mut touched = 0u64;
    for r in &st.reads {
        if g.is_auto(r.table) {
            read[r.table as usize] |= r.columns;
            touched |= 1 << r.table;
        }
    }
    for w in &st.writes {
        if g.is_auto(w.table) {
            write[w.table as usize] |= match w.kind {
                WriteKind::Update => w.columns,
                WriteKind::Insert | WriteKind::Delete => u64::MAX,
                WriteKind::Cancelled => continue,
            };
            touched |= 1 << w.table;
        }
    }
    if touched == 0 {
        return;
    }
    let mut sample = g.slot(slot);
    while touched != 0 {
        let t = touched.trailing_zeros() as usize;
        touched &= touched - 1;
        let ts = sample.table(t);
        ts.commits += weight;
        let key = (read[t], write[t]);
        let full = ts.patterns.len() >= MAX_PATTERNS * 2;
        match ts.patterns.iter_mut().find(|p| (p.0, p.1) == key) {
            Some(p) => p.2 += weight,
            None if !full => ts.patterns.push((key.0, key.1, weight)),
            None => {}
        }
    }
}

/// Records a conflict abort of the attempt in `st`: the tables of which it read a version that
/// has changed since. Called before the worker leaves its activity slot, so the records are
/// still those of the tables' current versions.
#[cold]
pub(crate) fn conflict<P: Protocol>(db: &Database<P>, st: &TxState<P::Meta>, slot: usize) {
    let g = &db.granularity;
    let mut changed = 0u64;
    for r in &st.reads {
        if g.is_auto(r.table) && changed & 1 << r.table == 0 {
            let layout = db.table(r.table).layout();
            if r.rec.meta(layout, r.group as usize).tid().load() != r.observed {
                changed |= 1 << r.table;
            }
        }
    }
    if changed == 0 {
        return;
    }
    let mut sample = g.slot(slot);
    while changed != 0 {
        let t = changed.trailing_zeros() as TableId;
        changed &= changed - 1;
        sample.table(t as usize).conflicts += 1;
    }
}
