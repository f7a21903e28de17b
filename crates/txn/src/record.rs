//! Turns a committed transaction's sets into a history event for the checkers.

use phasedb_check::{
    History, Item, LOADED, ReadEvent, TxnEvent, Version, WriteEvent, WriteKind as EventKind,
};
use phasedb_storage::TableId;

use crate::database::Database;
use crate::granularity::column_item;
use crate::protocol::Protocol;
use crate::state::{TxState, WriteKind};
use crate::tid::{ABSENT, SPLIT, tid};

/// The history item of column group `group` of row `key` in table `table`: each group is a register.
pub fn item(table: TableId, group: u8, key: u64) -> Item {
    Item {
        table: table * 16 + group as u32,
        key,
    }
}

/// Calls `f` with the history items of group `group` of row `key` of table `t`: the group, or
/// each of its columns in a table with automatic groups, so that items outlive regroupings (see
/// [`column_item`]).
pub(crate) fn for_each_item<P: Protocol>(
    db: &Database<P>,
    t: TableId,
    group: u8,
    key: u64,
    mut f: impl FnMut(Item),
) {
    if !db.granularity.is_auto(t) {
        return f(item(t, group, key));
    }
    let mut m = db.table(t).schema().groups()[group as usize].columns;
    while m != 0 {
        let c = m.trailing_zeros() as usize;
        m &= m - 1;
        f(column_item(t, c, key));
    }
}

/// The history item of column `col` (in group `group`) of row `key`: the column's own item in a
/// table with automatic groups, else its group's.
pub(crate) fn column_or_group_item<P: Protocol>(
    db: &Database<P>,
    t: TableId,
    col: usize,
    group: u8,
    key: u64,
) -> Item {
    if db.granularity.is_auto(t) {
        column_item(t, col, key)
    } else {
        item(t, group, key)
    }
}

/// The history version a TID word stands for: [`LOADED`] for a row bulk-loaded and not written
/// since (present with TID 0: every commit's TID is above 0), otherwise its TID, which is 0
/// ([`phasedb_check::ABSENT`]) for a key that never existed.
pub(crate) fn history_version(word: u64) -> Version {
    match tid(word) {
        0 if word & ABSENT == 0 => LOADED,
        t => t,
    }
}

/// Appends the just-committed transaction (TID `version`) to `history`.
pub(crate) fn record_commit<P: Protocol>(
    db: &Database<P>,
    st: &TxState<P::Meta>,
    version: u64,
    worker: u32,
    history: &mut History,
) {
    let mut ev = TxnEvent {
        id: ((worker as u64 + 1) << 40) | history.txns.len() as u64,
        worker,
        reads: Vec::with_capacity(st.reads.len() + st.misses.len()),
        writes: Vec::with_capacity(st.locks.len()),
        split_ops: Vec::new(),
        merges: Vec::new(),
    };
    for r in &st.reads {
        if r.observed & SPLIT != 0 {
            // Doppel: an insert found a split record present; split operations never change that.
            continue;
        }
        let version = history_version(r.observed);
        for_each_item(db, r.table, r.group, r.key, |item| {
            ev.reads.push(ReadEvent { item, version })
        });
    }
    for m in &st.misses {
        let version = m.version;
        for_each_item(db, m.table, 0, m.key, |item| {
            ev.reads.push(ReadEvent { item, version })
        });
    }
    for l in &st.locks {
        let w = &st.writes[l.write as usize];
        let kind = match w.kind {
            WriteKind::Update => EventKind::Update,
            WriteKind::Insert => EventKind::Insert,
            WriteKind::Delete => EventKind::Delete,
            WriteKind::Cancelled => continue,
        };
        let prev = history_version(l.prev);
        for_each_item(db, w.table, l.group, w.key, |item| {
            ev.writes.push(WriteEvent {
                item,
                version,
                prev,
                kind,
            })
        });
    }
    P::record_split_ops(db, st, &mut ev);
    history.txns.push(ev);
}
