//! The byte format of replication records (STAR §5.2), and its checked decoder.
//!
//! ```text
//! batch  := block*
//! block  := MAGIC (1 byte, 0xA5) · count (u32, little-endian) · record × count
//! record := kind (1 byte: 0 upsert, 1 delete; 2, 3 the same with an epoch) · table (varint)
//!           · key (varint) · TID (varint) · [kinds 2, 3 only: epoch (varint)]
//!           · [upsert only: columns (varint bit mask) · the bytes of each column in the mask,
//!              in column order, exactly as stored in the row]
//! ```
//!
//! Kinds 2 and 3 are for durability logs of protocols whose TIDs are not Silo TIDs (TicToc's
//! logical commit timestamps): the record carries the epoch its transaction committed in, which
//! group commit and recovery need, apart from the TID that orders a row's versions. Only a
//! decoder made [`Decoder::with_epochs`] accepts them; replication refuses them as unknown kinds.
//!
//! Varints are LEB128 (7 bits a byte, low bits first). A column's bytes take its schema width
//! ([`phasedb_storage::ColumnType::width`]), so a record carries no lengths: the receiving node has
//! the same tables, and the table id names the schema. [`crate::Worker::write_replication`] starts a
//! block when it first appends to an empty buffer and counts each record it appends in the block's
//! header; the count makes a batch cut anywhere but at its end an error, and buffers shipped one
//! after another may also be concatenated into one batch (several blocks).
//!
//! The decoder checks everything before anything is applied: the header, every varint (at most
//! 64 bits), the kind, the table, the TID (nonzero, within the TID bits), the column mask (nonzero,
//! within the schema) and that the bytes are all there. It never panics, whatever the input.

use std::ops::Range;

use phasedb_storage::{RowView, Schema, TableId};
use thiserror::Error;

use crate::tid::TID_MASK;

/// First byte of every block.
pub const MAGIC: u8 = 0xA5;
/// Bytes of a block header: [`MAGIC`] and the record count.
const HEADER: usize = 5;
/// The largest batch [`crate::Database::apply_replication`] accepts; a larger one is refused whole.
pub const MAX_BATCH_BYTES: usize = 64 << 20;

/// What a replication record does to its row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// Creates the row if absent and sets the carried columns.
    Upsert = 0,
    /// Removes the row.
    Delete = 1,
}

/// Why a batch of replication records was refused; nothing of it was applied.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ReplicationError {
    #[error("replication batch of {len} bytes exceeds the limit of {max} bytes")]
    Oversized { len: usize, max: usize },
    #[error("replication batch has no block header at byte {at} (found {found:#04x})")]
    BadHeader { at: usize, found: u8 },
    #[error("replication batch ends inside the record or block header at byte {at}")]
    Truncated { at: usize },
    #[error("replication record at byte {at} has unknown kind {kind}")]
    BadKind { at: usize, kind: u8 },
    #[error("replication record at byte {at} names unknown table {table}")]
    UnknownTable { at: usize, table: u64 },
    #[error("replication record at byte {at}: the {field} does not fit 64 bits")]
    VarintOverflow { at: usize, field: &'static str },
    #[error("replication record at byte {at} carries TID {tid:#x}, zero or beyond the TID bits")]
    BadTid { at: usize, tid: u64 },
    #[error(
        "replication record at byte {at} carries columns {columns:#x}, none or beyond table {table}'s schema"
    )]
    BadColumns {
        at: usize,
        table: TableId,
        columns: u64,
    },
}

/// One decoded record; `data` holds the carried columns' bytes (in [`column_runs`] order).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record<'a> {
    pub kind: RecordKind,
    pub table: TableId,
    pub key: u64,
    pub tid: u64,
    /// The epoch its transaction committed in, if the record carries one (kinds 2 and 3).
    pub epoch: Option<u64>,
    pub columns: u64,
    pub data: &'a [u8],
}

impl Record<'_> {
    /// The epoch the record's transaction committed in: carried, or the Silo TID's.
    #[inline]
    pub fn epoch(&self) -> u64 {
        self.epoch.unwrap_or(crate::tid::epoch_of(self.tid))
    }
}

/// Appends an upsert of the columns `columns` of row `key`, whose bytes are taken from the row
/// image `row` (laid out by `schema`), to `buf`.
pub(crate) fn push_upsert(
    buf: &mut Vec<u8>,
    schema: &Schema,
    table: TableId,
    key: u64,
    tid: u64,
    columns: u64,
    row: &[u64],
) {
    push_upsert_in(buf, schema, table, key, (tid, None), columns, row);
}

/// [`push_upsert`] of a record that carries `epoch` besides its TID if `epoch` is set (`at`:
/// (TID, epoch)).
pub(crate) fn push_upsert_in(
    buf: &mut Vec<u8>,
    schema: &Schema,
    table: TableId,
    key: u64,
    at: (u64, Option<u64>),
    columns: u64,
    row: &[u64],
) {
    push_head(buf, RecordKind::Upsert, table, key, at, Some(columns));
    let bytes = RowView::new(schema, row).as_bytes();
    column_runs(schema, columns, |run| buf.extend_from_slice(&bytes[run]));
}

/// Calls `f` with the byte ranges of the row image that the columns in `columns` occupy, in
/// column order, with ranges that follow one another in the image joined: the carried bytes of a
/// record are these ranges one after another. Column order rather than the layout's, so a record
/// decodes the same in every grouping of its table's columns: automatic groups change while
/// records wait in logs, and each replica chooses its own. When the layout keeps column order
/// (every declared schema whose groups do not interleave columns) the ranges are taken group by
/// group, a whole group as one range.
#[inline]
pub(crate) fn column_runs(schema: &Schema, columns: u64, mut f: impl FnMut(Range<usize>)) {
    let mut run: Option<Range<usize>> = None;
    let mut add = |start: usize, end: usize| {
        run = match run.take() {
            Some(r) if r.end == start => Some(r.start..end),
            Some(r) => {
                f(r);
                Some(start..end)
            }
            None => Some(start..end),
        };
    };
    fn each_column(schema: &Schema, mut m: u64, add: &mut impl FnMut(usize, usize)) {
        while m != 0 {
            let col = schema.column(m.trailing_zeros() as usize);
            m &= m - 1;
            add(col.offset, col.offset + col.ty.width());
        }
    }
    if !schema.in_column_order() {
        each_column(schema, columns, &mut add);
    } else {
        let mut groups = schema.groups_of(columns);
        while groups != 0 {
            let g = groups.trailing_zeros() as usize;
            groups &= groups - 1;
            let group = &schema.groups()[g];
            let m = columns & group.columns;
            if m == group.columns {
                let last = schema.column(63 - m.leading_zeros() as usize);
                add(group.word * 8, last.offset + last.ty.width());
            } else {
                each_column(schema, m, &mut add);
            }
        }
    }
    if let Some(r) = run {
        f(r);
    }
}

/// Appends a delete of row `key` to `buf`.
pub(crate) fn push_delete(buf: &mut Vec<u8>, table: TableId, key: u64, tid: u64) {
    push_head(buf, RecordKind::Delete, table, key, (tid, None), None);
}

/// [`push_delete`] of a record that carries `at.1`, an epoch, besides its TID `at.0` if set.
pub(crate) fn push_delete_in(buf: &mut Vec<u8>, table: TableId, key: u64, at: (u64, Option<u64>)) {
    push_head(buf, RecordKind::Delete, table, key, at, None);
}

/// The kind byte of a record carrying an epoch: the plain kind's plus this.
const WITH_EPOCH: u8 = 2;

/// Starts a block if `buf` is empty, counts one more record in it, and appends the record's fields
/// up to its column mask (an upsert's).
fn push_head(
    buf: &mut Vec<u8>,
    kind: RecordKind,
    table: TableId,
    key: u64,
    (tid, epoch): (u64, Option<u64>),
    columns: Option<u64>,
) {
    if buf.is_empty() {
        buf.push(MAGIC);
        buf.extend_from_slice(&0u32.to_le_bytes());
    }
    assert!(
        buf.len() >= HEADER && buf[0] == MAGIC,
        "replication records go to buffers that are empty or hold only replication records"
    );
    let count = u32::from_le_bytes([buf[1], buf[2], buf[3], buf[4]]);
    let count = count
        .checked_add(1)
        .expect("a replication buffer holds at most u32::MAX records: ship it sooner");
    buf[1..HEADER].copy_from_slice(&count.to_le_bytes());
    // Encoded on the stack and appended at once: one capacity check instead of one per byte.
    // Kind, table (a u32: at most 5 bytes), key, TID, epoch and column mask.
    let mut head = [0u8; 1 + 5 + 4 * VARINT_MAX];
    head[0] = kind as u8 + if epoch.is_some() { WITH_EPOCH } else { 0 };
    let mut len = 1;
    for v in [table as u64, key, tid] {
        len += put_varint(&mut head[len..], v);
    }
    if let Some(epoch) = epoch {
        len += put_varint(&mut head[len..], epoch);
    }
    if let Some(columns) = columns {
        len += put_varint(&mut head[len..], columns);
    }
    buf.extend_from_slice(&head[..len]);
}

/// Bytes of the longest varint (a 64-bit value).
const VARINT_MAX: usize = 10;

/// Writes `v` as a varint at the start of `out` (at least [`VARINT_MAX`] bytes); returns its length.
fn put_varint(out: &mut [u8], mut v: u64) -> usize {
    let mut i = 0;
    while v >= 0x80 {
        out[i] = v as u8 | 0x80;
        v >>= 7;
        i += 1;
    }
    out[i] = v as u8;
    i + 1
}

/// Reads a batch record by record, checking each against the schemas `schema_of` gives (`None`:
/// no such table).
pub(crate) struct Decoder<'a, F> {
    bytes: &'a [u8],
    pos: usize,
    /// Records left in the current block.
    left: u32,
    schema_of: F,
    failed: bool,
    /// The smallest TID accepted: 1, or 0 for checkpoint images (loaded rows carry TID 0).
    min_tid: u64,
    /// The largest batch accepted ([`MAX_BATCH_BYTES`] for replication).
    limit: usize,
    /// Whether records carrying an epoch (kinds 2 and 3: durability logs) are accepted.
    epochs: bool,
}

impl<'a, 's, F: Fn(TableId) -> Option<&'s Schema>> Decoder<'a, F> {
    /// A decoder of `bytes`; refuses a batch over [`MAX_BATCH_BYTES`] at its first step.
    pub fn new(bytes: &'a [u8], schema_of: F) -> Self {
        Decoder {
            bytes,
            pos: 0,
            left: 0,
            schema_of,
            failed: false,
            min_tid: 1,
            limit: MAX_BATCH_BYTES,
            epochs: false,
        }
    }

    /// Accepts records that carry an epoch (a durability log's, see the module's format).
    pub fn with_epochs(mut self) -> Self {
        self.epochs = true;
        self
    }

    /// Accepts TID 0 too: the rows of a checkpoint image, where loaded rows carry TID 0.
    pub fn with_zero_tids(mut self) -> Self {
        self.min_tid = 0;
        self
    }

    /// Accepts a batch of any size: a block of a durable file, already bounded by its framing.
    pub fn unbounded(mut self) -> Self {
        self.limit = usize::MAX;
        self
    }

    /// The varint at the read position, or why there is none: the batch ends first (`None`
    /// inside), or it does not fit 64 bits.
    #[inline]
    fn varint(&mut self) -> Result<Option<u64>, ()> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&b) = self.bytes.get(self.pos) else {
                return Ok(None);
            };
            self.pos += 1;
            let bits = (b & 0x7f) as u64;
            if shift == 63 && bits > 1 {
                return Err(());
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(Some(v));
            }
        }
        Err(())
    }

    /// The record at the read position, which it passes.
    fn record(&mut self) -> Result<Record<'a>, ReplicationError> {
        let at = self.pos;
        let truncated = ReplicationError::Truncated { at };
        let varint = |d: &mut Self, field| match d.varint() {
            Ok(Some(v)) => Ok(v),
            Ok(None) => Err(truncated.clone()),
            Err(()) => Err(ReplicationError::VarintOverflow { at, field }),
        };
        let (kind, carries_epoch) = match self.bytes.get(at) {
            None => return Err(truncated),
            Some(0) => (RecordKind::Upsert, false),
            Some(1) => (RecordKind::Delete, false),
            Some(2) if self.epochs => (RecordKind::Upsert, true),
            Some(3) if self.epochs => (RecordKind::Delete, true),
            Some(&kind) => return Err(ReplicationError::BadKind { at, kind }),
        };
        self.pos += 1;
        let table = varint(self, "table id")?;
        let schema = u32::try_from(table)
            .ok()
            .and_then(|t| (self.schema_of)(t))
            .ok_or(ReplicationError::UnknownTable { at, table })?;
        let table = table as TableId;
        let key = varint(self, "key")?;
        let tid = varint(self, "TID")?;
        if tid < self.min_tid || tid > TID_MASK {
            return Err(ReplicationError::BadTid { at, tid });
        }
        let epoch = if carries_epoch {
            Some(varint(self, "epoch")?)
        } else {
            None
        };
        let (columns, data) = match kind {
            RecordKind::Delete => (0, &self.bytes[..0]),
            RecordKind::Upsert => {
                let columns = varint(self, "column mask")?;
                if columns == 0 || columns & !schema.all_columns() != 0 {
                    return Err(ReplicationError::BadColumns { at, table, columns });
                }
                let len = columns_width(schema, columns);
                let data = self.bytes.get(self.pos..self.pos + len).ok_or(truncated)?;
                self.pos += len;
                (columns, data)
            }
        };
        Ok(Record {
            kind,
            table,
            key,
            tid,
            epoch,
            columns,
            data,
        })
    }

    fn step(&mut self) -> Option<Result<Record<'a>, ReplicationError>> {
        if self.pos == 0 && self.bytes.len() > self.limit {
            return Some(Err(ReplicationError::Oversized {
                len: self.bytes.len(),
                max: self.limit,
            }));
        }
        while self.left == 0 {
            if self.pos == self.bytes.len() {
                return None;
            }
            let at = self.pos;
            if self.bytes[at] != MAGIC {
                return Some(Err(ReplicationError::BadHeader {
                    at,
                    found: self.bytes[at],
                }));
            }
            let Some(count) = self.bytes.get(at + 1..at + HEADER) else {
                return Some(Err(ReplicationError::Truncated { at }));
            };
            self.left = u32::from_le_bytes([count[0], count[1], count[2], count[3]]);
            self.pos = at + HEADER;
        }
        self.left -= 1;
        Some(self.record())
    }
}

impl<'a, 's, F: Fn(TableId) -> Option<&'s Schema>> Iterator for Decoder<'a, F> {
    type Item = Result<Record<'a>, ReplicationError>;

    /// The next record, or the error that ends the batch (after which it yields nothing).
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = self.step();
        self.failed = matches!(item, Some(Err(_)));
        item
    }
}

/// Bytes the columns in `columns` take in a record.
pub(crate) fn columns_width(schema: &Schema, columns: u64) -> usize {
    let mut len = 0;
    column_runs(schema, columns, |run| len += run.len());
    len
}

#[cfg(test)]
mod tests {
    use phasedb_storage::{ColumnType, Schema};

    use super::*;

    /// Records carrying an epoch (durability logs) decode with it only where accepted; replication
    /// refuses them as unknown kinds, and a record cut inside its epoch is an error, not a panic.
    #[test]
    fn records_with_an_epoch_decode_only_in_logs() {
        let schema = Schema::builder()
            .column("v", ColumnType::U64, 0)
            .build()
            .unwrap();
        let schema_of = |t: TableId| (t == 0).then_some(&schema);
        let mut buf = Vec::new();
        push_upsert_in(&mut buf, &schema, 0, 5, (17, Some(300)), 1, &[42]);
        push_delete_in(&mut buf, 0, 6, (18, Some(301)));
        push_delete(&mut buf, 0, 7, 9 << crate::tid::EPOCH_SHIFT);
        let logged: Vec<_> = Decoder::new(&buf, schema_of)
            .with_epochs()
            .map(|r| r.map(|r| (r.kind, r.key, r.tid, r.epoch())))
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            logged,
            [
                (RecordKind::Upsert, 5, 17, 300),
                (RecordKind::Delete, 6, 18, 301),
                (RecordKind::Delete, 7, 9 << crate::tid::EPOCH_SHIFT, 9),
            ]
        );
        let replicated = Decoder::new(&buf, schema_of).next().unwrap();
        assert!(
            matches!(replicated, Err(ReplicationError::BadKind { kind: 2, .. })),
            "{replicated:?}"
        );
        for cut in 0..buf.len() {
            let ended = Decoder::new(&buf[..cut], schema_of)
                .with_epochs()
                .find_map(Result::err);
            assert!(cut == 0 || ended.is_some(), "cut at {cut}");
        }
    }

    proptest::proptest! {
        /// A record packed in one grouping of a table's columns unpacks to the same column values
        /// in any other grouping (automatic groups change while records wait in logs): the carried
        /// bytes are in column order whatever the layout.
        #[test]
        fn records_decode_the_same_in_every_grouping(
            widths in proptest::collection::vec(1usize..4, 1..8),
            from in proptest::collection::vec(0usize..3, 8),
            to in proptest::collection::vec(0usize..3, 8),
            carried in 1u64..256,
        ) {
            let n = widths.len();
            let schema = |groups: &[usize]| {
                // Groups numbered by first appearance, so none is empty.
                let mut order: Vec<usize> = Vec::new();
                let mut b = Schema::builder();
                for c in 0..n {
                    let g = match order.iter().position(|&x| x == groups[c]) {
                        Some(g) => g,
                        None => {
                            order.push(groups[c]);
                            order.len() - 1
                        }
                    };
                    let ty = match widths[c] {
                        1 => ColumnType::U64,
                        w => ColumnType::Fixed(4 * w as u16),
                    };
                    b = b.column(&format!("c{c}"), ty, g);
                }
                b.build().unwrap()
            };
            let (a, b) = (schema(&from), schema(&to));
            let columns = carried & ((1u64 << n) - 1);
            proptest::prop_assume!(columns != 0);
            let mut row = vec![0u64; a.row_words()];
            {
                let mut r = phasedb_storage::RowBuf::new(&a, &mut row);
                for c in 0..n {
                    match a.column(c).ty {
                        ColumnType::U64 => r.set_u64(c, 1000 + c as u64),
                        _ => r.set_bytes(c, &[c as u8 + 1; 12][..a.column(c).ty.width()]),
                    }
                }
            }
            let mut buf = Vec::new();
            push_upsert(&mut buf, &a, 0, 1, 7, columns, &row);
            let schema_of = |_: TableId| Some(&b);
            let r = Decoder::new(&buf, schema_of).next().unwrap().unwrap();
            let mut out = vec![0u64; b.row_words()];
            crate::star::apply::unpack(&b, r.columns, r.data, &mut out);
            let (va, vb) = (
                phasedb_storage::RowView::new(&a, &row),
                phasedb_storage::RowView::new(&b, &out),
            );
            for c in (0..n).filter(|c| columns & 1 << c != 0) {
                proptest::prop_assert_eq!(va.bytes(c), vb.bytes(c), "column {}", c);
            }
        }
    }
}
