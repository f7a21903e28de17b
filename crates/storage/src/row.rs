use crate::schema::{ColumnId, ColumnType, Schema};

/// A typed column value, for generic code and display; the hot path uses the typed accessors.
#[derive(Clone, Debug, PartialEq)]
pub enum Value<'a> {
    U64(u64),
    I64(i64),
    F64(f64),
    Bytes(&'a [u8]),
}

fn bytes(words: &[u64]) -> &[u8] {
    // SAFETY: u8 has no alignment or validity requirement and the length covers the same memory.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), words.len() * 8) }
}

fn bytes_mut(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: as in `bytes`, with the unique borrow carried over.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), words.len() * 8) }
}

/// Calls `f(w, mask)` for every row word `w` that column `c` occupies, with the bits of its bytes
/// in that word.
#[inline]
pub(crate) fn for_column_words(schema: &Schema, c: ColumnId, mut f: impl FnMut(usize, u64)) {
    let s = schema.span(c);
    f(s.first, s.first_mask);
    if s.last > s.first {
        for w in s.first + 1..s.last {
            f(w, u64::MAX);
        }
        f(s.last, s.last_mask);
    }
}

/// Copies the columns in `columns` from row image `src` into row image `dst`, leaving other bytes.
pub fn merge_columns(schema: &Schema, columns: u64, src: &[u64], dst: &mut [u64]) {
    let mut m = columns;
    while m != 0 {
        let c = m.trailing_zeros() as usize;
        m &= m - 1;
        for_column_words(schema, c, |w, mask| {
            dst[w] = (dst[w] & !mask) | (src[w] & mask);
        });
    }
}

/// Copies every column of row image `src`, laid out by `from`, to its place in row image `dst`, laid
/// out by `to` (the same columns grouped differently: see [`Schema::regrouped`]).
pub fn move_columns(from: &Schema, to: &Schema, src: &[u64], dst: &mut [u64]) {
    let (src, dst) = (bytes(src), bytes_mut(dst));
    for (a, b) in from.columns().iter().zip(to.columns()) {
        let n = a.ty.width();
        dst[b.offset..b.offset + n].copy_from_slice(&src[a.offset..a.offset + n]);
    }
}

/// A read-only view of a row image with typed accessors.
#[derive(Clone, Copy)]
pub struct RowView<'a> {
    schema: &'a Schema,
    words: &'a [u64],
}

impl<'a> RowView<'a> {
    /// Views `words` (at least `schema.row_words()` long) as a row of `schema`.
    pub fn new(schema: &'a Schema, words: &'a [u64]) -> Self {
        debug_assert!(words.len() >= schema.row_words());
        RowView { schema, words }
    }

    /// The schema of the row.
    pub fn schema(&self) -> &'a Schema {
        self.schema
    }

    /// The raw row image.
    pub fn words(&self) -> &'a [u64] {
        self.words
    }

    /// The row image's bytes (little-endian words): columns packed one after another in a group
    /// are one run of it, copied at once.
    #[inline]
    pub fn as_bytes(&self) -> &'a [u8] {
        bytes(self.words)
    }

    /// A column's stored bytes, whatever its type.
    #[inline]
    pub fn raw(&self, c: ColumnId) -> &'a [u8] {
        let col = self.schema.column(c);
        &bytes(self.words)[col.offset..col.offset + col.ty.width()]
    }

    /// An unsigned integer column.
    #[inline]
    pub fn u64(&self, c: ColumnId) -> u64 {
        debug_assert_eq!(self.schema.column(c).ty, ColumnType::U64);
        u64::from_le_bytes(self.raw(c).try_into().unwrap())
    }

    /// A signed integer column.
    #[inline]
    pub fn i64(&self, c: ColumnId) -> i64 {
        debug_assert_eq!(self.schema.column(c).ty, ColumnType::I64);
        i64::from_le_bytes(self.raw(c).try_into().unwrap())
    }

    /// A floating-point column.
    #[inline]
    pub fn f64(&self, c: ColumnId) -> f64 {
        debug_assert_eq!(self.schema.column(c).ty, ColumnType::F64);
        f64::from_le_bytes(self.raw(c).try_into().unwrap())
    }

    /// A string column's bytes: all of a fixed column, the stored length of a bounded one.
    #[inline]
    pub fn bytes(&self, c: ColumnId) -> &'a [u8] {
        let raw = self.raw(c);
        match self.schema.column(c).ty {
            ColumnType::Bounded(n) => {
                let len = (u16::from_le_bytes([raw[0], raw[1]]) as usize).min(n as usize);
                &raw[2..2 + len]
            }
            _ => raw,
        }
    }

    /// An ordered-tuple column's tuple; `None` while empty.
    pub fn tuple(&self, c: ColumnId) -> Option<crate::ordered::Tuple<'a>> {
        debug_assert!(matches!(self.schema.column(c).ty, ColumnType::Tuple(_)));
        crate::ordered::tuple(self.raw(c))
    }

    /// A top-K column's tuples, largest order first.
    pub fn topk(&self, c: ColumnId) -> impl Iterator<Item = crate::ordered::Tuple<'a>> + 'a {
        let ColumnType::TopK { n, .. } = self.schema.column(c).ty else {
            panic!("column {c} is not a top-K set");
        };
        crate::ordered::topk(self.raw(c), n)
    }

    /// Any column as a [`Value`].
    pub fn value(&self, c: ColumnId) -> Value<'a> {
        match self.schema.column(c).ty {
            ColumnType::U64 => Value::U64(self.u64(c)),
            ColumnType::I64 => Value::I64(self.i64(c)),
            ColumnType::F64 => Value::F64(self.f64(c)),
            ColumnType::Fixed(_)
            | ColumnType::Bounded(_)
            | ColumnType::Tuple(_)
            | ColumnType::TopK { .. } => Value::Bytes(self.bytes(c)),
        }
    }
}

/// Typed writes into a mutable row image.
pub struct RowBuf<'a> {
    schema: &'a Schema,
    words: &'a mut [u64],
}

impl<'a> RowBuf<'a> {
    /// Writes into `words` (at least `schema.row_words()` long) as a row of `schema`.
    pub fn new(schema: &'a Schema, words: &'a mut [u64]) -> Self {
        debug_assert!(words.len() >= schema.row_words());
        RowBuf { schema, words }
    }

    /// The row image's bytes, to write runs of columns at once (see [`RowView::as_bytes`]).
    #[inline]
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        bytes_mut(self.words)
    }

    #[inline]
    fn raw(&mut self, c: ColumnId) -> &mut [u8] {
        let col = self.schema.column(c);
        let (off, w) = (col.offset, col.ty.width());
        &mut bytes_mut(self.words)[off..off + w]
    }

    /// Sets an unsigned integer column.
    #[inline]
    pub fn set_u64(&mut self, c: ColumnId, v: u64) {
        debug_assert_eq!(self.schema.column(c).ty, ColumnType::U64);
        self.raw(c).copy_from_slice(&v.to_le_bytes());
    }

    /// Sets a signed integer column.
    #[inline]
    pub fn set_i64(&mut self, c: ColumnId, v: i64) {
        debug_assert_eq!(self.schema.column(c).ty, ColumnType::I64);
        self.raw(c).copy_from_slice(&v.to_le_bytes());
    }

    /// Sets a floating-point column.
    #[inline]
    pub fn set_f64(&mut self, c: ColumnId, v: f64) {
        debug_assert_eq!(self.schema.column(c).ty, ColumnType::F64);
        self.raw(c).copy_from_slice(&v.to_le_bytes());
    }

    /// Sets a string column: a fixed column is zero-padded, a bounded one records the length.
    /// Bytes past the column's capacity are cut off.
    #[inline]
    pub fn set_bytes(&mut self, c: ColumnId, v: &[u8]) {
        let ty = self.schema.column(c).ty;
        let raw = self.raw(c);
        match ty {
            ColumnType::Bounded(n) => {
                let len = v.len().min(n as usize);
                raw[..2].copy_from_slice(&(len as u16).to_le_bytes());
                raw[2..2 + len].copy_from_slice(&v[..len]);
                raw[2 + len..].fill(0);
            }
            _ => {
                let len = v.len().min(raw.len());
                raw[..len].copy_from_slice(&v[..len]);
                raw[len..].fill(0);
            }
        }
    }

    /// The column's stored bytes, to change in place (ordered tuples and top-K sets).
    #[inline]
    pub fn raw_mut(&mut self, c: ColumnId) -> &mut [u8] {
        self.raw(c)
    }

    /// Sets any column from a [`Value`] of the matching type.
    pub fn set(&mut self, c: ColumnId, v: &Value<'_>) {
        match *v {
            Value::U64(x) => self.set_u64(c, x),
            Value::I64(x) => self.set_i64(c, x),
            Value::F64(x) => self.set_f64(c, x),
            Value::Bytes(b) => self.set_bytes(c, b),
        }
    }

    /// A read view of the row being written.
    pub fn view(&self) -> RowView<'_> {
        RowView::new(self.schema, self.words)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Schema {
        Schema::builder()
            .column("a", ColumnType::Fixed(3), 0)
            .column("b", ColumnType::U64, 0)
            .column("c", ColumnType::Bounded(9), 0)
            .column("d", ColumnType::I64, 1)
            .column("e", ColumnType::F64, 1)
            .build()
            .unwrap()
    }

    #[test]
    fn typed_round_trip() {
        let s = schema();
        let mut w = vec![0u64; s.row_words()];
        let mut r = RowBuf::new(&s, &mut w);
        r.set_bytes(0, b"xyzzy");
        r.set_u64(1, u64::MAX - 3);
        r.set_bytes(2, b"hi");
        r.set_i64(3, -5);
        r.set_f64(4, 2.5);
        let v = RowView::new(&s, &w);
        assert_eq!(v.bytes(0), b"xyz");
        assert_eq!(v.u64(1), u64::MAX - 3);
        assert_eq!(v.bytes(2), b"hi");
        assert_eq!(v.i64(3), -5);
        assert_eq!(v.f64(4), 2.5);
        assert_eq!(v.value(2), Value::Bytes(b"hi"));
    }

    #[test]
    fn merge_copies_only_chosen_columns() {
        let s = schema();
        let mut src = vec![0u64; s.row_words()];
        let mut dst = vec![0u64; s.row_words()];
        {
            let mut r = RowBuf::new(&s, &mut src);
            r.set_bytes(0, b"new");
            r.set_u64(1, 7);
            r.set_bytes(2, b"fresh");
            r.set_i64(3, 1);
        }
        {
            let mut r = RowBuf::new(&s, &mut dst);
            r.set_bytes(0, b"old");
            r.set_u64(1, 1);
            r.set_bytes(2, b"stale");
            r.set_i64(3, 2);
        }
        merge_columns(&s, 0b0110, &src, &mut dst);
        let v = RowView::new(&s, &dst);
        assert_eq!(v.bytes(0), b"old");
        assert_eq!(v.u64(1), 7);
        assert_eq!(v.bytes(2), b"fresh");
        assert_eq!(v.i64(3), 2);
    }
}
