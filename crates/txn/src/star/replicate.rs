//! Writing the replication records of a committed transaction (STAR §5.2): operation replication
//! in the partitioned phase, value replication in the single-master phase.

use std::sync::atomic::{Ordering, fence};

use phasedb_storage::{RecordLayout, RecordPtr, TableId};

use crate::protocol::Protocol;
use crate::state::WriteKind;
use crate::tid::{ABSENT, LOCK, TidWord, UNLINKED};
use crate::worker::Worker;

use super::format;

/// What a replication record of an update carries (STAR §5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicationMode {
    /// Only the columns the transaction wrote. Right when one thread writes each partition and its
    /// records reach every replica in commit order: the partitioned phase.
    Operation,
    /// Every column of every column group the transaction wrote, as installed: replicas may apply
    /// records in any order, and the Thomas write rule keeps the newest version of each group. The
    /// single-master phase.
    Value,
}

impl<'db, P: Protocol<Meta = TidWord>> Worker<'db, P> {
    /// Appends the replication records of the transaction [`Worker::execute`] last committed (none
    /// if it wrote nothing, or if that call did not commit) to `bufs[route(table, key)]` (an index
    /// into `bufs`); a `None` route skips the row (a table no other node holds). Returns the number
    /// of records appended.
    /// Buffers must be empty or hold only what this method appended (see [`crate::star`] for the
    /// format); the node ships each one whole. Once the buffers have grown it allocates nothing.
    ///
    /// - [`ReplicationMode::Operation`] (partitioned phase): an insert carries every column, an
    ///   update the columns it wrote, a delete nothing, all with the transaction's TID.
    /// - [`ReplicationMode::Value`] (single-master phase): each column group the transaction wrote is
    ///   read back from the record with a stable read and carried whole with the transaction's TID.
    ///   A group that no longer holds this TID was overwritten since by a later transaction; it is
    ///   left out, since that transaction's own value record carries newer content with a higher
    ///   TID, so replicas lose nothing.
    pub fn write_replication(
        &mut self,
        mode: ReplicationMode,
        bufs: &mut [Vec<u8>],
        mut route: impl FnMut(TableId, u64) -> Option<usize>,
    ) -> usize {
        let db = self.database();
        let Some((tid, st)) = self.last_commit() else {
            return 0;
        };
        let guard = (mode == ReplicationMode::Value).then(phasedb_storage::pin);
        let mut appended = 0;
        for entry in &st.writes {
            let kind = entry.kind;
            if kind == WriteKind::Cancelled {
                continue;
            }
            let Some(dest) = route(entry.table, entry.key) else {
                continue;
            };
            let table = db.table(entry.table);
            let schema = table.schema();
            let buf = &mut bufs[dest];
            if kind == WriteKind::Delete {
                format::push_delete(buf, entry.table, entry.key, tid);
                appended += 1;
                continue;
            }
            let (columns, row) = match &guard {
                None => {
                    let n = schema.row_words();
                    (entry.columns, &st.images[entry.image..entry.image + n])
                }
                Some(guard) => {
                    // Looked up again: the record may have been deleted and freed since commit.
                    let Some(rec) = table.get(entry.key, guard) else {
                        continue;
                    };
                    let mut columns = 0;
                    let mut m = entry.groups(schema);
                    while m != 0 {
                        let g = m.trailing_zeros() as usize;
                        m &= m - 1;
                        let group = schema.groups()[g];
                        let held = st.holds_lock(rec, g as u8).is_some_and(|l| l.held);
                        let out = &mut st.row[group.word..group.word + group.words];
                        if read_back(rec, table.layout(), g, held, out) == Some(tid) {
                            columns |= group.columns;
                        }
                    }
                    (columns, &st.row[..])
                }
            };
            if columns == 0 {
                continue;
            }
            format::push_upsert(buf, schema, entry.table, entry.key, tid, columns, row);
            appended += 1;
        }
        appended
    }
}

/// Copies group `g` of `rec` into `out` consistently and returns its word, or `None` if the group is
/// absent or its record is being unlinked (then deleted by a later transaction). Waits out a
/// committer that holds the group: until it publishes, which version the group will hold is unknown.
/// A group this transaction still holds (`held`, [`Worker::set_hold_locks`]) is stable: it is read
/// as it is.
fn read_back(
    rec: RecordPtr<TidWord>,
    layout: &RecordLayout,
    g: usize,
    held: bool,
    out: &mut [u64],
) -> Option<u64> {
    let meta = rec.meta(layout, g);
    if held {
        let word = meta.load() & !LOCK;
        if word & ABSENT != 0 {
            return None;
        }
        rec.copy_group(layout, g, out);
        return Some(word);
    }
    let mut spins = 0u32;
    loop {
        let before = meta.load();
        if before & UNLINKED != 0 {
            return None;
        }
        if before & LOCK != 0 {
            spins += 1;
            if spins > 64 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            continue;
        }
        if before & ABSENT != 0 {
            return None;
        }
        rec.copy_group(layout, g, out);
        fence(Ordering::Acquire);
        if meta.0.load(Ordering::Relaxed) == before {
            return Some(before);
        }
    }
}
