//! Commutative updates (STO's commutators): an integer splittable operation buffered without reading
//! its column, and applied at install, under the write lock, to the value committed then. Two
//! transactions that only commute on a column never conflict on it.

use phasedb_storage::{ColumnId, RowBuf, RowView, Schema};

use crate::database::Database;
use crate::protocol::Protocol;
use crate::splittable::apply_raw;
use crate::state::{TxState, WriteKind};

/// Applies write `w`'s deferred operations on the columns in `cols` to the committed row image in
/// `st.row` (the caller has just read, and so registered, their groups), stores the results in the
/// write's image, and makes those columns ordinary written columns.
#[inline]
pub(crate) fn resolve_on_read<M>(st: &mut TxState<M>, schema: &Schema, w: usize, cols: u64) {
    let mut m = st.writes[w].deferred & cols;
    if m == 0 {
        return;
    }
    st.writes[w].deferred &= !m;
    while m != 0 {
        let c = m.trailing_zeros() as usize;
        m &= m - 1;
        fold_into_image(st, schema, w, c);
    }
}

/// Computes every deferred column from its record's current value, just before the images are
/// installed. The caller holds the write locks of those columns' groups, so the values are final.
pub(crate) fn resolve_at_install<P: Protocol>(st: &mut TxState<P::Meta>, db: &Database<P>) {
    for w in 0..st.writes.len() {
        let entry = &st.writes[w];
        let mut m = entry.deferred;
        if m == 0 || entry.kind != WriteKind::Update {
            continue;
        }
        let table = db.table(entry.table);
        let (schema, layout) = (table.schema(), table.layout());
        let rec = entry.rec.expect("updates know their record");
        st.writes[w].deferred = 0;
        while m != 0 {
            let c = m.trailing_zeros() as usize;
            m &= m - 1;
            let (first, last) = schema.column(c).word_span();
            rec.copy_words(layout, first, &mut st.row[first..=last]);
            fold_into_image(st, schema, w, c);
        }
    }
}

/// Applies, in order, write `w`'s deferred operations on column `c` to the value of `c` in `st.row`,
/// and stores the result in the write's image.
fn fold_into_image<M>(st: &mut TxState<M>, schema: &Schema, w: usize, c: ColumnId) {
    let n = schema.row_words();
    let ty = schema.column(c).ty;
    let core = st.worker;
    let mut row = RowBuf::new(schema, &mut st.row[..n]);
    for d in &st.deferred_ops {
        if d.write as usize == w && d.col as usize == c {
            apply_raw(&d.op, ty, row.raw_mut(c), core);
        }
    }
    let value = RowView::new(schema, &st.row[..n]).raw(c);
    let img = st.writes[w].image;
    RowBuf::new(schema, &mut st.images[img..img + n])
        .raw_mut(c)
        .copy_from_slice(value);
}
