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
    _db: &Database<P>,
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
    // Tables with automatic groups record each column of a group as an item of its own, so
    // items outlive regroupings (see `granularity::column_item`).
    let columns = |t: TableId, g: u8| {
        let schema = _db.table(t).schema();
        let mut m = schema.groups()[g as usize].columns;
        std::iter::from_fn(move || {
            (m != 0).then(|| {
                let c = m.trailing_zeros() as usize;
                m &= m - 1;
                c
            })
        })
    };
    let auto = |t: TableId| _db.granularity.is_auto(t);
    for r in &st.reads {
        if r.observed & SPLIT != 0 {
            // Doppel: an insert found a split record present; split operations never change that.
            continue;
        }
        let version = history_version(r.observed);
        if auto(r.table) {
            for c in columns(r.table, r.group) {
                let item = column_item(r.table, c, r.key);
                ev.reads.push(ReadEvent { item, version });
            }
            continue;
        }
        ev.reads.push(ReadEvent {
            item: item(r.table, r.group, r.key),
            version,
        });
    }
    for m in &st.misses {
        if auto(m.table) {
            for c in columns(m.table, 0) {
                let item = column_item(m.table, c, m.key);
                ev.reads.push(ReadEvent {
                    item,
                    version: m.version,
                });
            }
            continue;
        }
        ev.reads.push(ReadEvent {
            item: item(m.table, 0, m.key),
            version: m.version,
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
        if auto(w.table) {
            for c in columns(w.table, l.group) {
                let item = column_item(w.table, c, w.key);
                ev.writes.push(WriteEvent {
                    item,
                    version,
                    prev,
                    kind,
                });
            }
            continue;
        }
        ev.writes.push(WriteEvent {
            item: item(w.table, l.group, w.key),
            version,
            prev,
            kind,
        });
    }
    P::record_split_ops(_db, st, &mut ev);
    history.txns.push(ev);
}
