//! Per-worker log buffers (SiloR §4.1: "each worker constructs log records in its own buffers").
//!
//! A committing worker appends its transaction's after-images to the buffer of its activity slot
//! while it still holds the write locks, so a buffer never holds an older image of a group after a
//! newer one. The buffer's mutex is on the worker's own cache line: only the worker takes it per
//! transaction, and its logger takes it to swap the buffer out, so no cache line shared by workers
//! is written per transaction.

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use phasedb_storage::{RecordPtr, Schema, Table};

use crate::star::format;
use crate::state::{WriteEntry, WriteKind};
use crate::tid::TidMeta;

/// One activity slot's log buffer: records in the replication record format, TIDs and all.
#[derive(Default)]
pub(crate) struct WorkerLog {
    buf: CachePadded<Mutex<Vec<u8>>>,
}

impl WorkerLog {
    /// Appends the log records of one committed transaction with TID `tid`: for each updated row
    /// the columns it wrote, for each inserted row every column, read from the record as installed
    /// (the locks are still held, so later writers of the group wait), and for each deleted row a
    /// delete. An update carries only its columns, not their whole groups: recovery replays such
    /// partial images in TID order per row (see `recovery.rs`). `row` is scratch of a row's words.
    /// `at` is (TID, epoch): the epoch is carried in each record if set (a TID that is not a Silo
    /// TID, such as TicToc's commit timestamp, says nothing of the epoch).
    pub(crate) fn append<M: TidMeta>(
        &self,
        tables: &[Table<M>],
        writes: &[WriteEntry<M>],
        row: &mut [u64],
        at: (u64, Option<u64>),
    ) {
        let mut buf = self.buf.lock();
        reserve_first(&mut buf);
        for w in writes {
            let table = &tables[w.table as usize];
            match w.kind {
                WriteKind::Cancelled => {}
                WriteKind::Delete => format::push_delete_in(&mut buf, w.table, w.key, at),
                WriteKind::Update | WriteKind::Insert => {
                    let rec = w.rec.expect("an installed write knows its record");
                    let groups = copy_groups(table, rec, w.groups(table.schema()), row);
                    let columns = match w.kind {
                        WriteKind::Update => w.columns & groups,
                        _ => groups,
                    };
                    format::push_upsert_in(
                        &mut buf,
                        table.schema(),
                        w.table,
                        w.key,
                        at,
                        columns,
                        row,
                    );
                }
            }
        }
    }

    /// Appends an upsert of the columns `columns` of row `key` of table `t`, the bytes taken from
    /// the row image `row`, with `at` as in [`WorkerLog::append`]: a value produced outside a
    /// transaction's write set (Doppel's reconciled records).
    pub(crate) fn append_row(
        &self,
        schema: &Schema,
        (t, key): (phasedb_storage::TableId, u64),
        at: (u64, Option<u64>),
        columns: u64,
        row: &[u64],
    ) {
        let mut buf = self.buf.lock();
        reserve_first(&mut buf);
        format::push_upsert_in(&mut buf, schema, t, key, at, columns, row);
    }

    /// Swaps the buffer's contents with `spare` (left empty, with its capacity), for the logger.
    pub(crate) fn take(&self, spare: &mut Vec<u8>) {
        spare.clear();
        std::mem::swap(&mut *self.buf.lock(), spare);
    }
}

/// Gives a slot's buffer its starting capacity at its first use (slots never used take no memory):
/// a buffer then grows only in a round busier than any before, not from empty in every slot.
#[inline]
fn reserve_first(buf: &mut Vec<u8>) {
    if buf.capacity() == 0 {
        buf.reserve(super::logger::BUFFER_START);
    }
}

/// Copies the groups `groups` of `rec` into the row image `row`; returns their columns.
fn copy_groups<M: Send + Sync>(
    table: &Table<M>,
    rec: RecordPtr<M>,
    groups: u32,
    row: &mut [u64],
) -> u64 {
    let schema: &Schema = table.schema();
    let mut columns = 0;
    let mut m = groups;
    while m != 0 {
        let g = m.trailing_zeros() as usize;
        m &= m - 1;
        let group = &schema.groups()[g];
        rec.copy_group(
            table.layout(),
            g,
            &mut row[group.word..group.word + group.words],
        );
        columns |= group.columns;
    }
    columns
}
