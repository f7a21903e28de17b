use phasedb_storage::{
    ColumnId, ColumnType, Guard, RecordPtr, RowBuf, RowView, Schema, Table, TableId, merge_columns,
};

use crate::database::Database;
use crate::error::{TxError, TxResult};
use crate::protocol::Protocol;
use crate::splittable::SplitOp;
use crate::state::{MissEntry, ReadEntry, ScanEntry, TxState, WriteEntry, WriteKind};
use crate::tid::{ABSENT, LOCK, TidMeta};

/// The handle a stored procedure uses to read and write: every access goes through it, so the protocol
/// sees them all. Writes are buffered until commit; reads see the transaction's own writes.
pub struct Tx<'w, 'db, P: Protocol> {
    pub(crate) db: &'db Database<P>,
    pub(crate) st: &'w mut TxState<P::Meta>,
    pub(crate) guard: &'w Guard,
}

/// Bit mask of the given columns, for [`Tx::get_columns`] and [`Tx::scan`].
pub fn columns(ids: &[ColumnId]) -> u64 {
    ids.iter().fold(0, |m, &c| m | 1 << c)
}

/// Writes columns of a buffered row image and remembers which ones were written.
pub struct RowWriter<'a> {
    buf: RowBuf<'a>,
    columns: &'a mut u64,
}

impl RowWriter<'_> {
    /// Sets an unsigned integer column.
    pub fn set_u64(&mut self, c: ColumnId, v: u64) {
        self.buf.set_u64(c, v);
        *self.columns |= 1 << c;
    }

    /// Sets a signed integer column.
    pub fn set_i64(&mut self, c: ColumnId, v: i64) {
        self.buf.set_i64(c, v);
        *self.columns |= 1 << c;
    }

    /// Sets a floating-point column.
    pub fn set_f64(&mut self, c: ColumnId, v: f64) {
        self.buf.set_f64(c, v);
        *self.columns |= 1 << c;
    }

    /// Sets a string column (cut to its width).
    pub fn set_bytes(&mut self, c: ColumnId, v: &[u8]) {
        self.buf.set_bytes(c, v);
        *self.columns |= 1 << c;
    }

    /// Sets a column's stored bytes as they are (`raw` is exactly the column's width).
    pub fn set_raw(&mut self, c: ColumnId, raw: &[u8]) {
        self.buf.raw_mut(c).copy_from_slice(raw);
        *self.columns |= 1 << c;
    }

    /// The image as written so far (columns not written hold zeros or earlier writes).
    pub fn view(&self) -> RowView<'_> {
        self.buf.view()
    }
}

impl<'w, 'db, P: Protocol> Tx<'w, 'db, P> {
    /// The schema of table `t`.
    pub fn schema(&self, t: TableId) -> &'db Schema {
        self.db.table(t).schema()
    }

    /// Applies the splittable operation `op` to column `col` of row `key`; false if the row does not
    /// exist. The protocol decides how: in place, on a per-core slice, or (by default) as a
    /// read-modify-write of the column.
    pub fn apply(
        &mut self,
        t: TableId,
        key: u64,
        col: ColumnId,
        op: SplitOp<'_>,
    ) -> TxResult<bool> {
        let ty = crate::splittable::check(self.table(t).schema(), col, &op)?;
        if let Some(done) = P::apply_in_place(self.st, self.db, t, key, col, op, self.guard) {
            return done;
        }
        let mut current = std::mem::take(&mut self.st.scratch);
        let outcome = self.read_modify_write(t, key, col, ty, &op, &mut current);
        self.st.scratch = current;
        outcome
    }

    /// Applies the integer operation `op` (add, max, min or mult) to column `col` of row `key` without
    /// reading the column: it is applied at commit, under the write lock, to the value committed then
    /// (a commutative update, as STO's commutators). Transactions that only commute on a column never
    /// conflict on it; reading the column later in this transaction reads it, as usual, and sees the
    /// operation applied. False if the row does not exist. Where a protocol applies splittable
    /// operations itself (Doppel's split records, `atomic`), and for tuple operations, this is
    /// [`Tx::apply`].
    pub fn commute(
        &mut self,
        t: TableId,
        key: u64,
        col: ColumnId,
        op: SplitOp<'_>,
    ) -> TxResult<bool> {
        let op = match op {
            SplitOp::Add(a) => SplitOp::Add(a),
            SplitOp::Max(a) => SplitOp::Max(a),
            SplitOp::Min(a) => SplitOp::Min(a),
            SplitOp::Mult(a) => SplitOp::Mult(a),
            SplitOp::OPut { .. } | SplitOp::TopKInsert { .. } => {
                return self.apply(t, key, col, op);
            }
        };
        let ty = crate::splittable::check(self.table(t).schema(), col, &op)?;
        if let Some(done) = P::apply_in_place(self.st, self.db, t, key, col, op, self.guard) {
            return done;
        }
        // The existence check below would otherwise share-lock the row, and the write upgrade.
        self.lock_for_update(t, key, columns(&[col]))?;
        let Some(w) = self.update_entry(t, key)? else {
            return Ok(false);
        };
        let schema = self.table(t).schema();
        let bit = 1u64 << col;
        let entry = &mut self.st.writes[w];
        if entry.kind == WriteKind::Insert || entry.columns & bit & !entry.deferred != 0 {
            // The transaction set the value itself: apply the operation to its image.
            let n = schema.row_words();
            let mut image = RowBuf::new(schema, &mut self.st.images[entry.image..entry.image + n]);
            crate::splittable::apply_raw(&op, ty, image.raw_mut(col), self.st.worker);
            return Ok(true);
        }
        let before = entry.columns;
        entry.columns |= bit;
        entry.deferred |= bit;
        self.st.deferred_ops.push(crate::state::DeferredOp {
            write: w as u32,
            col: col as u16,
            op,
        });
        self.on_new_groups(t, w, before)?;
        Ok(true)
    }

    /// Tells the protocol about the groups update `w` writes now and did not when it wrote only the
    /// columns `before` (2PL and SwissTM lock them at once).
    fn on_new_groups(&mut self, t: TableId, w: usize, before: u64) -> TxResult<()> {
        let entry = &self.st.writes[w];
        if let (WriteKind::Update, Some(rec)) = (entry.kind, entry.rec) {
            let schema = self.table(t).schema();
            let new_groups = schema.groups_of(entry.columns) & !schema.groups_of(before);
            if new_groups != 0 {
                P::on_write(
                    self.st,
                    self.db,
                    t,
                    rec,
                    self.table(t).layout(),
                    new_groups,
                    w,
                )?;
            }
        }
        Ok(())
    }

    /// The write entry through which the transaction changes row `key`: its own insert or update, or
    /// a new update if the row exists. `None` if the row does not exist for the transaction (a miss is
    /// registered when no record is linked).
    fn update_entry(&mut self, t: TableId, key: u64) -> TxResult<Option<usize>> {
        if let Some(w) = self.st.find_write(t, key) {
            return Ok(match self.st.writes[w].kind {
                WriteKind::Delete | WriteKind::Cancelled => None,
                WriteKind::Update | WriteKind::Insert => Some(w),
            });
        }
        let rec = match self.st.last_read.take() {
            // Just read, existence included, and registered: no need to look it up again.
            Some((lt, lk, rec, exists)) if lk == key && lt == t && exists => rec,
            _ => match self.present_record(t, key)? {
                Some(rec) => rec,
                None => return Ok(None),
            },
        };
        Ok(Some(self.push_write(t, key, Some(rec), WriteKind::Update)))
    }

    /// The record of row `key` if the row exists, registering what was observed: a miss when no record
    /// is linked, the absence when the record is a tombstone.
    fn present_record(&mut self, t: TableId, key: u64) -> TxResult<Option<RecordPtr<P::Meta>>> {
        let Some(rec) = self.table(t).get(key, self.guard) else {
            self.st.misses.push(MissEntry {
                table: t,
                key,
                version: 0,
                write: MissEntry::READ,
            });
            return Ok(None);
        };
        Ok(self.exists(t, key, rec)?.then_some(rec))
    }

    fn read_modify_write(
        &mut self,
        t: TableId,
        key: u64,
        col: ColumnId,
        ty: ColumnType,
        op: &SplitOp<'_>,
        current: &mut Vec<u8>,
    ) -> TxResult<bool> {
        if self.st.find_write(t, key).is_none()
            && let Some(done) = self.fresh_read_modify_write(t, key, col, ty, op)?
        {
            return Ok(done);
        }
        self.lock_for_update(t, key, columns(&[col]))?;
        let Some(row) = self.get_columns(t, key, columns(&[col]))? else {
            return Ok(false);
        };
        current.clear();
        current.extend_from_slice(row.raw(col));
        let core = self.st.worker;
        crate::splittable::apply_raw(op, ty, current, core);
        self.update(t, key, |w| w.set_raw(col, current))
    }

    /// The read-modify-write of a row the transaction has not written yet, in one pass: one index
    /// lookup, the write lock first where reads take shared locks (as [`Tx::lock_for_update`]), the
    /// column's group read and registered, the operation applied in the row buffer and the column
    /// copied into a new update's image. On a contended record under locking, all of this runs while
    /// the lock is held, so its length is the hand-off's. `None` leaves the cases it does not cover
    /// to the general path: a tombstone under locking, and, under optimistic protocols, a column
    /// outside group 0 (whose read would not register the row's existence).
    fn fresh_read_modify_write(
        &mut self,
        t: TableId,
        key: u64,
        col: ColumnId,
        ty: ColumnType,
        op: &SplitOp<'_>,
    ) -> TxResult<Option<bool>> {
        let table = self.table(t);
        let (schema, layout) = (table.schema(), table.layout());
        let cols = 1u64 << col;
        let groups = schema.groups_of(cols);
        if !P::READS_LOCK && groups & 1 == 0 {
            return Ok(None);
        }
        let Some(rec) = table.get(key, self.guard) else {
            self.st.misses.push(MissEntry {
                table: t,
                key,
                version: 0,
                write: MissEntry::READ,
            });
            return Ok(Some(false));
        };
        // The groups are locked and written next: take their lines owned now (on a hot record, one
        // coherence round trip instead of a shared read and an upgrade by the lock).
        let mut mask = groups;
        while mask != 0 {
            rec.prefetch_group_for_write(layout, mask.trailing_zeros() as usize);
            mask &= mask - 1;
        }
        if P::READS_LOCK {
            if rec.meta(layout, 0).tid().load() & ABSENT != 0 {
                return Ok(None);
            }
            let w = self.push_write(t, key, Some(rec), WriteKind::Update);
            P::on_write(self.st, self.db, t, rec, layout, groups, w)?;
            self.read_write_locked(t, key, rec, groups, cols, w);
            let st = &mut *self.st;
            let entry = &mut st.writes[w];
            let image = &mut st.images[entry.image..entry.image + schema.row_words()];
            crate::splittable::apply_raw(
                op,
                ty,
                RowBuf::new(schema, image).raw_mut(col),
                st.worker,
            );
            entry.columns = cols;
            return Ok(Some(true));
        }
        if !self.read_record(t, key, rec, groups, cols)? {
            return Ok(Some(false));
        }
        let w = self.push_write(t, key, Some(rec), WriteKind::Update);
        let st = &mut *self.st;
        let mut row = RowBuf::new(schema, &mut st.row);
        crate::splittable::apply_raw(op, ty, row.raw_mut(col), st.worker);
        let entry = &mut st.writes[w];
        let n = schema.row_words();
        RowBuf::new(schema, &mut st.images[entry.image..entry.image + n])
            .raw_mut(col)
            .copy_from_slice(RowView::new(schema, &st.row).raw(col));
        entry.columns = cols;
        P::on_write(self.st, self.db, t, rec, layout, groups, w)?;
        Ok(Some(true))
    }

    /// Reads columns `cols` of the groups `groups` of `rec`, which this attempt has just
    /// write-locked (under [`Protocol::READS_LOCK`], `on_write` returned with every group's
    /// exclusive lock held and the record present), straight into update `w`'s image, and registers
    /// the reads: no lock to look up or wait for, no copy through the row buffer.
    fn read_write_locked(
        &mut self,
        t: TableId,
        key: u64,
        rec: RecordPtr<P::Meta>,
        groups: u32,
        cols: u64,
        w: usize,
    ) {
        let table = self.table(t);
        let (schema, layout) = (table.schema(), table.layout());
        let image = self.st.writes[w].image;
        let mut m = groups;
        while m != 0 {
            let g = m.trailing_zeros() as usize;
            m &= m - 1;
            let group = schema.groups()[g];
            let (first, words) = words_of(schema, &group, cols);
            let observed = rec.meta(layout, g).tid().load() & !LOCK;
            rec.copy_part(
                layout,
                g,
                first,
                &mut self.st.images[image + first..image + first + words],
            );
            self.record_read(t, g as u8, key, rec, observed, cols & group.columns);
        }
    }

    /// Under protocols whose reads take shared locks, takes the write locks of the groups of `cols`
    /// of row `key` before the row is read or checked for existence: two writers that each
    /// share-locked first would deadlock upgrading. Buffers an update that writes nothing yet; does
    /// nothing if the row is not there (the access that follows finds that out as usual).
    fn lock_for_update(&mut self, t: TableId, key: u64, cols: u64) -> TxResult<()> {
        if !P::READS_LOCK || self.st.find_write(t, key).is_some() {
            return Ok(());
        }
        let table = self.table(t);
        let Some(rec) = table.get(key, self.guard) else {
            return Ok(());
        };
        if rec.meta(table.layout(), 0).tid().load() & ABSENT != 0 {
            // Deleted: the read that follows registers that (and takes its locks) as usual.
            return Ok(());
        }
        let w = self.push_write(t, key, Some(rec), WriteKind::Update);
        P::on_write(
            self.st,
            self.db,
            t,
            rec,
            table.layout(),
            table.schema().groups_of(cols),
            w,
        )
    }

    /// OPut: replaces the ordered tuple in column `col` of row `key` by `(order, this worker, value)`
    /// if that beats it (see [`phasedb_storage::ordered`]); false if the row does not exist.
    pub fn oput(
        &mut self,
        t: TableId,
        key: u64,
        col: ColumnId,
        order: i64,
        value: &[u8],
    ) -> TxResult<bool> {
        self.apply(t, key, col, SplitOp::OPut { order, value })
    }

    /// TopKInsert: inserts `(order, this worker, value)` into the top-K set in column `col` of row
    /// `key`; false if the row does not exist.
    pub fn topk_insert(
        &mut self,
        t: TableId,
        key: u64,
        col: ColumnId,
        order: i64,
        value: &[u8],
    ) -> TxResult<bool> {
        self.apply(t, key, col, SplitOp::TopKInsert { order, value })
    }

    /// Adds `delta` to integer column `col` of row `key` (see [`Tx::apply`]).
    pub fn add(&mut self, t: TableId, key: u64, col: ColumnId, delta: i64) -> TxResult<bool> {
        self.apply(t, key, col, SplitOp::Add(delta))
    }

    /// Raises integer column `col` of row `key` to at least `v` (see [`Tx::apply`]).
    pub fn max(&mut self, t: TableId, key: u64, col: ColumnId, v: i64) -> TxResult<bool> {
        self.apply(t, key, col, SplitOp::Max(v))
    }

    /// Lowers integer column `col` of row `key` to at most `v` (see [`Tx::apply`]).
    pub fn min(&mut self, t: TableId, key: u64, col: ColumnId, v: i64) -> TxResult<bool> {
        self.apply(t, key, col, SplitOp::Min(v))
    }

    /// Multiplies integer column `col` of row `key` by `v` (see [`Tx::apply`]).
    pub fn mult(&mut self, t: TableId, key: u64, col: ColumnId, v: i64) -> TxResult<bool> {
        self.apply(t, key, col, SplitOp::Mult(v))
    }

    /// An error that aborts the transaction without retry: `return Err(tx.abort())`.
    pub fn abort(&self) -> TxError {
        TxError::UserAbort
    }

    #[inline]
    fn table(&self, t: TableId) -> &'db Table<P::Meta> {
        self.db.table(t)
    }

    /// Hints that the transaction will access rows `keys` of table `t`: looks them up in two passes
    /// (index slots, then records) issuing cache prefetches, so their memory misses overlap instead of
    /// being paid one after another. Changes nothing and registers nothing.
    pub fn prefetch(&mut self, t: TableId, keys: impl Iterator<Item = u64> + Clone) {
        let table = self.table(t);
        for k in keys.clone() {
            table.prefetch_slot(k, self.guard);
            self.note_footprint(t, k);
        }
        for k in keys {
            table.prefetch_record(k, self.guard);
        }
    }

    /// Like [`Tx::prefetch`], for a transaction that will read only the columns in `cols` (a mask, see
    /// [`columns`]) of those rows: only the cache lines holding them are loaded.
    pub fn prefetch_columns(
        &mut self,
        t: TableId,
        keys: impl Iterator<Item = u64> + Clone,
        cols: u64,
    ) {
        let table = self.table(t);
        for k in keys.clone() {
            table.prefetch_slot(k, self.guard);
            self.note_footprint(t, k);
        }
        for k in keys {
            table.prefetch_record_columns(k, self.guard, cols);
        }
    }

    /// Hints that the transaction will look up rows `keys` of table `t`: issues cache prefetches of
    /// their index slots only, so that a [`Tx::prefetch`] of several tables issued after finds its
    /// slots arriving. Changes nothing and registers nothing.
    pub fn prefetch_index(&mut self, t: TableId, keys: impl Iterator<Item = u64>) {
        let table = self.table(t);
        for k in keys {
            table.prefetch_slot(k, self.guard);
            self.note_footprint(t, k);
        }
    }

    /// Under a phased protocol, notes a hinted row in the attempt's footprint: were the attempt
    /// stashed, its rerun would find the row prefetched (see [`crate::footprint`]).
    #[inline(always)]
    fn note_footprint(&mut self, t: TableId, key: u64) {
        if P::PHASED {
            self.st.footprint.add(t, key);
        }
    }

    /// Hints that the transaction will insert rows `keys` into table `t`: issues cache prefetches of
    /// where each index will place them (the hash slots, and the ordered index's leaves). Changes
    /// nothing and registers nothing.
    pub fn prefetch_insert(&self, t: TableId, keys: impl Iterator<Item = u64>) {
        let table = self.table(t);
        for k in keys {
            table.prefetch_insert(k, self.guard);
        }
    }

    /// Reads every column of the row `key` of table `t`; `None` if it does not exist.
    #[inline]
    pub fn get(&mut self, t: TableId, key: u64) -> TxResult<Option<RowView<'_>>> {
        let all = self.table(t).schema().all_columns();
        self.get_columns(t, key, all)
    }

    /// Reads the columns in `cols` (a mask, see [`columns`]) of row `key`; only their column groups are
    /// registered, so writers of other groups do not conflict. Other columns of the view are undefined.
    pub fn get_columns(
        &mut self,
        t: TableId,
        key: u64,
        cols: u64,
    ) -> TxResult<Option<RowView<'_>>> {
        let table = self.table(t);
        let schema = table.schema();
        let own = self.st.find_write(t, key);
        if let Some(w) = own {
            let entry = &self.st.writes[w];
            match entry.kind {
                WriteKind::Delete | WriteKind::Cancelled => return Ok(None),
                WriteKind::Insert => {
                    let n = schema.row_words();
                    let img = entry.image;
                    self.st.row[..n].copy_from_slice(&self.st.images[img..img + n]);
                    return Ok(Some(RowView::new(schema, &self.st.row)));
                }
                WriteKind::Update => {}
            }
        }
        // An update of the row knows its record already (a record keeps its address while linked,
        // and one unlinked since is seen retired when read): no second lookup.
        let known = own
            .map(|w| &self.st.writes[w])
            .filter(|e| e.kind == WriteKind::Update)
            .and_then(|e| e.rec);
        let Some(rec) = known.or_else(|| table.get(key, self.guard)) else {
            self.st.misses.push(MissEntry {
                table: t,
                key,
                version: 0,
                write: MissEntry::READ,
            });
            return Ok(None);
        };
        let groups = schema.groups_of(cols);
        if !self.read_record(t, key, rec, groups, cols)? {
            return Ok(None);
        }
        self.st.last_read = Some((t, key, rec, groups & 1 != 0));
        if let Some(w) = own.filter(|&w| self.st.writes[w].columns != 0) {
            crate::commute::resolve_on_read(self.st, schema, w, cols);
            let entry = &self.st.writes[w];
            let n = schema.row_words();
            merge_columns(
                schema,
                entry.columns,
                &self.st.images[entry.image..entry.image + n],
                &mut self.st.row,
            );
        }
        Ok(Some(RowView::new(schema, &self.st.row)))
    }

    /// Reads the groups in `groups` of `rec` into the row buffer and registers them; false if absent.
    /// Where the protocol allows, only the words of the columns in `cols` are copied.
    fn read_record(
        &mut self,
        t: TableId,
        key: u64,
        rec: RecordPtr<P::Meta>,
        groups: u32,
        cols: u64,
    ) -> TxResult<bool> {
        let table = self.table(t);
        let layout = table.layout();
        let schema = table.schema();
        let mut m = groups;
        while m != 0 {
            let g = m.trailing_zeros() as usize;
            m &= m - 1;
            let group = schema.groups()[g];
            let (first, words) = if P::PARTIAL_READS {
                words_of(schema, &group, cols)
            } else {
                (group.word, group.words)
            };
            let observed = P::read_group(self.st, self.db, t, rec, layout, g, first, words)?;
            self.record_read(t, g as u8, key, rec, observed, cols & group.columns);
            if observed & ABSENT != 0 {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Observes whether `rec` exists, registering the observation; used by writes that need the row.
    fn exists(&mut self, t: TableId, key: u64, rec: RecordPtr<P::Meta>) -> TxResult<bool> {
        let layout = self.table(t).layout();
        let observed = P::read_group(self.st, self.db, t, rec, layout, 0, 0, 0)?;
        if observed & ABSENT != 0 {
            self.record_read(t, 0, key, rec, observed, 0);
            return Ok(false);
        }
        Ok(true)
    }

    /// Adds what was observed of one column group to the read set, for validation at commit.
    #[inline]
    fn record_read(
        &mut self,
        t: TableId,
        group: u8,
        key: u64,
        rec: RecordPtr<P::Meta>,
        observed: u64,
        columns: u64,
    ) {
        self.st.reads.push(ReadEntry {
            table: t,
            group,
            key,
            rec,
            observed,
            columns,
            extra: self.st.last_extra,
        });
    }

    fn push_write(
        &mut self,
        t: TableId,
        key: u64,
        rec: Option<RecordPtr<P::Meta>>,
        kind: WriteKind,
    ) -> usize {
        let n = self.table(t).schema().row_words();
        let image = self.st.images.len();
        self.st.images.resize(image + n, 0);
        self.st.writes.push(WriteEntry {
            table: t,
            key,
            rec,
            kind,
            columns: 0,
            deferred: 0,
            image,
            placeholder: false,
        });
        self.st.write_filter |= TxState::<P::Meta>::filter_bit(t, key);
        self.st.writes.len() - 1
    }

    fn write_image(&mut self, t: TableId, w: usize, fill: impl FnOnce(&mut RowWriter<'_>)) {
        let schema = self.db.table(t).schema();
        let entry = &mut self.st.writes[w];
        let n = schema.row_words();
        let words = &mut self.st.images[entry.image..entry.image + n];
        let mut written = 0;
        let mut writer = RowWriter {
            buf: RowBuf::new(schema, words),
            columns: &mut written,
        };
        fill(&mut writer);
        entry.columns |= written;
        // An overwrite supersedes the commutative operations buffered before it.
        entry.deferred &= !written;
    }

    /// Overwrites columns of row `key` with what `fill` sets; false (and no write) if the row does not
    /// exist. Only the groups of the columns written are locked and versioned at commit.
    pub fn update(
        &mut self,
        t: TableId,
        key: u64,
        fill: impl FnOnce(&mut RowWriter<'_>),
    ) -> TxResult<bool> {
        let Some(w) = self.update_entry(t, key)? else {
            return Ok(false);
        };
        let before = self.st.writes[w].columns;
        self.write_image(t, w, fill);
        self.on_new_groups(t, w, before)?;
        Ok(true)
    }

    /// Inserts row `key` with the columns `fill` sets (others zero). Fails with
    /// [`TxError::DuplicateKey`] if the row exists.
    pub fn insert(
        &mut self,
        t: TableId,
        key: u64,
        fill: impl FnOnce(&mut RowWriter<'_>),
    ) -> TxResult<()> {
        let w = match self.st.find_write(t, key) {
            Some(w) => match self.st.writes[w].kind {
                WriteKind::Delete => {
                    let all = self.table(t).schema().all_columns();
                    let entry = &mut self.st.writes[w];
                    entry.kind = WriteKind::Update;
                    entry.columns = all;
                    w
                }
                WriteKind::Cancelled => {
                    self.st.writes[w].kind = WriteKind::Insert;
                    w
                }
                WriteKind::Update | WriteKind::Insert => {
                    return Err(TxError::DuplicateKey { table: t, key });
                }
            },
            None => {
                let rec = self.table(t).get(key, self.guard);
                if let Some(rec) = rec {
                    let layout = self.table(t).layout();
                    let observed = P::read_group(self.st, self.db, t, rec, layout, 0, 0, 0)?;
                    self.record_read(t, 0, key, rec, observed, 0);
                    if observed & ABSENT == 0 && !self.st.dry_run {
                        return Err(TxError::DuplicateKey { table: t, key });
                    }
                }
                let w = self.push_write(t, key, rec, WriteKind::Insert);
                if rec.is_none() {
                    self.st.misses.push(MissEntry {
                        table: t,
                        key,
                        version: 0,
                        write: w as u32,
                    });
                }
                w
            }
        };
        let n = self.table(t).schema().row_words();
        let img = self.st.writes[w].image;
        if self.st.writes[w].kind == WriteKind::Insert {
            self.st.images[img..img + n].fill(0);
        }
        self.write_image(t, w, fill);
        if self.st.writes[w].kind == WriteKind::Insert {
            self.st.writes[w].columns = self.table(t).schema().all_columns();
        }
        Ok(())
    }

    /// Deletes row `key`; false if it does not exist.
    pub fn delete(&mut self, t: TableId, key: u64) -> TxResult<bool> {
        match self.st.find_write(t, key) {
            Some(w) => {
                let entry = &mut self.st.writes[w];
                match entry.kind {
                    WriteKind::Delete | WriteKind::Cancelled => Ok(false),
                    WriteKind::Insert => {
                        entry.kind = WriteKind::Cancelled;
                        Ok(true)
                    }
                    WriteKind::Update => {
                        entry.kind = WriteKind::Delete;
                        entry.deferred = 0;
                        let (rec, written) =
                            (entry.rec.expect("updates know their record"), entry.columns);
                        let schema = self.table(t).schema();
                        let rest = schema.all_groups() & !schema.groups_of(written);
                        if rest != 0 {
                            P::on_write(self.st, self.db, t, rec, self.table(t).layout(), rest, w)?;
                        }
                        Ok(true)
                    }
                }
            }
            None => {
                let Some(rec) = self.present_record(t, key)? else {
                    return Ok(false);
                };
                let w = self.push_write(t, key, Some(rec), WriteKind::Delete);
                let all = self.table(t).schema().all_groups();
                P::on_write(self.st, self.db, t, rec, self.table(t).layout(), all, w)?;
                Ok(true)
            }
        }
    }

    /// Visits rows with keys in `lo..=hi` in key order, at most `limit` of them, reading the columns in
    /// `cols`; `visit(key, row)` returns false to stop early. Sees the transaction's own inserts, updates
    /// and deletes. Concurrent inserts into the range are caught at commit (phantom protection).
    /// Returns the number of rows visited.
    pub fn scan(
        &mut self,
        t: TableId,
        lo: u64,
        hi: u64,
        limit: usize,
        cols: u64,
        mut visit: impl FnMut(u64, RowView<'_>) -> bool,
    ) -> TxResult<usize> {
        let table = self.table(t);
        if !table.is_ordered() {
            return Err(TxError::Invalid("scan on a table without an ordered index"));
        }
        let schema = table.schema();
        let groups = schema.groups_of(cols);
        let n = schema.row_words();
        // The transaction's own pending inserts in the range, in key order.
        let mut pending = std::mem::take(&mut self.st.pending_inserts);
        pending.clear();
        for (i, w) in self.st.writes.iter().enumerate() {
            if w.table == t && w.kind == WriteKind::Insert && (lo..=hi).contains(&w.key) {
                pending.push((w.key, i));
            }
        }
        pending.sort_unstable();
        let seen_start = self.st.scan_seen.len();
        let mut cursor = PendingCursor {
            pending: &pending,
            next: 0,
            visited: 0,
            limit,
        };
        let mut last_examined = None;
        let mut stopped = false;
        let mut failure = None;
        let db = self.db;
        let guard = self.guard;
        let st = &mut *self.st;
        table.scan(lo, hi, guard, |key, rec| {
            if !cursor.emit_below(Some(key), st, schema, &mut visit) || cursor.visited >= limit {
                stopped = true;
                return false;
            }
            last_examined = Some(key);
            st.scan_seen.push(rec.addr());
            match (Tx {
                db,
                st: &mut *st,
                guard,
            })
            .read_record(t, key, rec, groups, u64::MAX)
            {
                Err(e) => {
                    failure = Some(e);
                    return false;
                }
                Ok(false) => return true,
                Ok(true) => {}
            }
            if let Some(w) = st.find_write(t, key) {
                if matches!(st.writes[w].kind, WriteKind::Delete | WriteKind::Cancelled) {
                    return true;
                }
                crate::commute::resolve_on_read(st, schema, w, cols);
                let entry = &st.writes[w];
                merge_columns(
                    schema,
                    entry.columns,
                    &st.images[entry.image..entry.image + n],
                    &mut st.row,
                );
            }
            cursor.visited += 1;
            if !visit(key, RowView::new(schema, &st.row)) {
                stopped = true;
                return false;
            }
            true
        });
        if let Some(e) = failure {
            self.st.pending_inserts = pending;
            return Err(e);
        }
        if !stopped {
            cursor.emit_below(None, st, schema, &mut visit);
        }
        let visited = cursor.visited;
        let checked_to = if stopped { last_examined } else { Some(hi) };
        let seen = seen_start..self.st.scan_seen.len();
        if let Some(hi) = checked_to {
            self.st.scans.push(ScanEntry {
                table: t,
                lo,
                hi,
                seen,
            });
        }
        self.st.pending_inserts = pending;
        Ok(visited)
    }
}

/// The row words `(first, count)` of group `group` that hold the columns of `cols` in it: the whole
/// group when it reads all of them. A group packs its columns in id order, so the lowest and highest
/// ids bound the words.
#[inline]
fn words_of(schema: &Schema, group: &phasedb_storage::Group, cols: u64) -> (usize, usize) {
    let m = cols & group.columns;
    if m == group.columns {
        return (group.word, group.words);
    }
    let first = schema.span(m.trailing_zeros() as usize).first;
    let last = schema.span(63 - m.leading_zeros() as usize).last;
    (first, last + 1 - first)
}

/// Walks a scan's pending own inserts in key order, merging them with the rows of the index.
struct PendingCursor<'p> {
    pending: &'p [(u64, usize)],
    next: usize,
    visited: usize,
    limit: usize,
}

impl PendingCursor<'_> {
    /// Visits pending inserts with keys below `bound` (all if `None`); false once the scan must stop.
    fn emit_below<M>(
        &mut self,
        bound: Option<u64>,
        st: &mut TxState<M>,
        schema: &Schema,
        visit: &mut impl FnMut(u64, RowView<'_>) -> bool,
    ) -> bool {
        let n = schema.row_words();
        while let Some(&(key, w)) = self.pending.get(self.next) {
            if bound.is_some_and(|b| key >= b) {
                break;
            }
            if self.visited >= self.limit {
                return false;
            }
            self.next += 1;
            let img = st.writes[w].image;
            st.row[..n].copy_from_slice(&st.images[img..img + n]);
            self.visited += 1;
            if !visit(key, RowView::new(schema, &st.row)) {
                return false;
            }
        }
        true
    }
}
