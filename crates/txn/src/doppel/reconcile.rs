//! The reconciliation phase: merging a worker's per-core slices into the split records.

use std::sync::atomic::Ordering;

use phasedb_check::{
    History, MERGE_WORKER, MergeEvent, ReadEvent, TxnEvent, WriteEvent, WriteKind,
};

use super::Doppel;
use super::split::SplitEntry;
use crate::database::Database;
use crate::record::{for_each_item, history_version};
use crate::splittable;
use crate::tid::LOCK;

/// Merges the slices of activity slot `slot` into the split records and empties them. Each record
/// is locked while its slice is merged, since workers merge in parallel; split-phase transactions
/// still running elsewhere never touch the records themselves, only their own slices.
pub(crate) fn merge_slot(db: &Database<Doppel>, slot: usize) {
    // SAFETY: the slot's worker merges its own slot during its phase change, or the coordinator
    // merges for it while it is claimed; the entries do not change before the next joined phase.
    let (entries, s) = unsafe { (db.shared.entries(), db.shared.slot(slot)) };
    if s.slices.is_empty() {
        return;
    }
    for e in entries {
        let slice = &mut s.slices[e.slice..e.slice + e.words];
        if slice.iter().all(|&w| w == 0) {
            continue;
        }
        merge_entry(db, e, slice, &mut s.merge_buf);
        slice.fill(0);
    }
}

fn merge_entry(db: &Database<Doppel>, e: &SplitEntry, slice: &[u64], buf: &mut Vec<u64>) {
    let table = db.table(e.label.table);
    let layout = table.layout();
    let col = table.schema().column(e.label.col as usize);
    let meta = e.rec.meta(layout, e.group as usize);
    let word = loop {
        let w = meta.load();
        if meta.try_lock(w) {
            break w;
        }
        std::hint::spin_loop();
    };
    let (first, last) = col.word_span();
    let group = &table.schema().groups()[e.group as usize];
    let words =
        &e.rec.group_words(layout, e.group as usize)[first - group.word..=last - group.word];
    buf.clear();
    buf.extend(words.iter().map(|w| w.load(Ordering::Relaxed)));
    let start = col.offset - first * 8;
    // SAFETY: `buf` holds plain words; viewing them as bytes is sound.
    let bytes =
        unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<u8>(), buf.len() * 8) };
    splittable::slice_merge(
        e.label.kind,
        col.ty,
        slice,
        &mut bytes[start..start + col.ty.width()],
    );
    for (w, v) in words.iter().zip(buf.iter()) {
        w.store(*v, Ordering::Relaxed);
    }
    debug_assert_eq!(word & LOCK, 0);
    meta.publish(word);
}

/// Logs the merged value of split record `e` (its whole column group, as the reconciliation left
/// it, with the TID `tid` it was given) to `log`: durability logs the values split-phase
/// operations produce, not the operations (SiloR's value logging). Called while no worker runs.
pub(crate) fn log_merged(
    db: &Database<Doppel>,
    e: &SplitEntry,
    tid: u64,
    log: &crate::durability::WorkerLog,
) {
    let table = db.table(e.label.table);
    let schema = table.schema();
    let group = &schema.groups()[e.group as usize];
    let mut row = vec![0u64; schema.row_words()];
    e.rec.copy_group(
        table.layout(),
        e.group as usize,
        &mut row[group.word..group.word + group.words],
    );
    log.append_row(
        schema,
        (e.label.table, e.label.key),
        (tid, None),
        group.columns,
        &row,
    );
}

/// Records the merge of split record `e` into version `version` as a transaction of its own: it
/// reads the version before the split phase, writes the merged one, and absorbs the operations the
/// split phase `phase` applied to the record's slices (for each column of the group, in a table
/// with automatic groups).
pub(crate) fn record_merge(db: &Database<Doppel>, e: &SplitEntry, version: u64, phase: u64) {
    let before = history_version(e.pre_word);
    let mut ev = TxnEvent {
        id: (1 << 62) | (phase << 20) | (e.slice as u64 & 0xfffff),
        worker: MERGE_WORKER,
        reads: Vec::new(),
        writes: Vec::new(),
        split_ops: Vec::new(),
        merges: Vec::new(),
    };
    for_each_item(db, e.label.table, e.group, e.label.key, |item| {
        ev.reads.push(ReadEvent {
            item,
            version: before,
        });
        ev.writes.push(WriteEvent {
            item,
            version,
            prev: before,
            kind: WriteKind::Update,
        });
        ev.merges.push(MergeEvent { item, phase });
    });
    db.deposit_history(History { txns: vec![ev] });
}
