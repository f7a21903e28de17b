use std::alloc::Layout;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::arena::RecordArena;
use crate::row::for_column_words;
use crate::schema::Schema;

/// Where the parts of a record sit in its allocation: for each column group its metadata `M`
/// immediately followed by the group's row words (atomic, so that optimistic readers may copy them
/// while a writer installs). Keeping a group's metadata beside its data means reading one group
/// touches one run of memory, whatever the number of groups. The key is not stored: the indexes hold
/// it. A record that nearly fills whole cache lines is aligned to them, so that it spans no more
/// lines than it must.
#[derive(Clone, Copy, Debug)]
pub struct RecordLayout {
    groups: usize,
    /// Per group: byte offset of its metadata, byte offset of its first word, its first row word and
    /// its number of words.
    meta_offset: [u32; Schema::MAX_GROUPS],
    data_offset: [u32; Schema::MAX_GROUPS],
    first_word: [u32; Schema::MAX_GROUPS],
    words: [u32; Schema::MAX_GROUPS],
    layout: Layout,
}

impl RecordLayout {
    /// The layout of records of `schema` whose groups carry metadata of type `M`.
    pub fn of<M>(schema: &Schema) -> RecordLayout {
        let groups = schema.groups();
        let mut l = Layout::from_size_align(0, std::mem::align_of::<u64>()).expect("valid layout");
        let mut r = RecordLayout {
            groups: groups.len(),
            meta_offset: [0; Schema::MAX_GROUPS],
            data_offset: [0; Schema::MAX_GROUPS],
            first_word: [0; Schema::MAX_GROUPS],
            words: [0; Schema::MAX_GROUPS],
            layout: l,
        };
        for (g, group) in groups.iter().enumerate() {
            let (with_meta, meta) = l.extend(Layout::new::<M>()).expect("record fits in memory");
            let words = Layout::array::<AtomicU64>(group.words).expect("row fits in memory");
            let (with_data, data) = with_meta.extend(words).expect("record fits in memory");
            l = with_data;
            r.meta_offset[g] = meta as u32;
            r.data_offset[g] = data as u32;
            r.first_word[g] = group.word as u32;
            r.words[g] = group.words as u32;
        }
        r.layout = Self::line_aligned(l.pad_to_align());
        r
    }

    /// `l` rounded up to whole cache lines and aligned to one when that wastes at most a quarter of
    /// its size; otherwise `l` (packed by the allocator, it may straddle one more line than needed).
    fn line_aligned(l: Layout) -> Layout {
        const LINE: usize = 64;
        let up = l.size().next_multiple_of(LINE);
        if l.size() > 0 && (up - l.size()) * 4 <= l.size() {
            Layout::from_size_align(up, LINE.max(l.align())).expect("record fits in memory")
        } else {
            l
        }
    }

    /// Bytes one record occupies (before allocator overhead).
    pub fn size(&self) -> usize {
        self.layout.size()
    }

    /// Alignment of a record.
    pub fn align(&self) -> usize {
        self.layout.align()
    }

    /// The group holding row word `w`.
    #[inline]
    fn group_of(&self, w: usize) -> usize {
        let mut g = 0;
        while g + 1 < self.groups && self.first_word[g + 1] as usize <= w {
            g += 1;
        }
        g
    }
}

/// A stable pointer to a record whose groups carry metadata `M`. It stays valid while the record is
/// linked in its table's indexes, and after unlinking for as long as an epoch guard pinned before the
/// unlink is held.
pub struct RecordPtr<M> {
    ptr: NonNull<u8>,
    _meta: PhantomData<*const M>,
}

impl<M> Clone for RecordPtr<M> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<M> Copy for RecordPtr<M> {}
impl<M> PartialEq for RecordPtr<M> {
    fn eq(&self, other: &Self) -> bool {
        self.ptr == other.ptr
    }
}
impl<M> Eq for RecordPtr<M> {}
impl<M> std::fmt::Debug for RecordPtr<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Record@{:p}", self.ptr)
    }
}
// SAFETY: a record is shared by design; its contents are atomics (`M` must be Sync for the table).
unsafe impl<M: Sync> Send for RecordPtr<M> {}
unsafe impl<M: Sync> Sync for RecordPtr<M> {}

impl<M> RecordPtr<M> {
    /// Allocates a record from `arena` (whose slots fit `layout`) with metadata from `meta(group)`
    /// and row image `row` (zero if `None`).
    pub(crate) fn allocate(
        layout: &RecordLayout,
        arena: &RecordArena,
        mut meta: impl FnMut(usize) -> M,
        row: Option<&[u64]>,
    ) -> RecordPtr<M> {
        // SAFETY: the slot fits the layout; every part is initialised before the pointer is returned.
        unsafe {
            let ptr = arena.alloc();
            for g in 0..layout.groups {
                ptr.as_ptr()
                    .add(layout.meta_offset[g] as usize)
                    .cast::<M>()
                    .write(meta(g));
                let words = ptr
                    .as_ptr()
                    .add(layout.data_offset[g] as usize)
                    .cast::<AtomicU64>();
                let first = layout.first_word[g] as usize;
                for w in 0..layout.words[g] as usize {
                    let v = row.map_or(0, |r| r[first + w]);
                    words.add(w).write(AtomicU64::new(v));
                }
            }
            RecordPtr {
                ptr,
                _meta: PhantomData,
            }
        }
    }

    /// Drops the metadata; the caller returns the memory to its arena (or drops the arena).
    ///
    /// # Safety
    /// No one may use the record afterwards: it is unlinked and every guard that could see it is gone.
    pub(crate) unsafe fn drop_meta(self, layout: &RecordLayout) {
        // SAFETY: the caller guarantees exclusive ownership; the metas were initialised in `allocate`.
        unsafe {
            for g in 0..layout.groups {
                let meta = self.ptr.as_ptr().add(layout.meta_offset[g] as usize);
                std::ptr::drop_in_place(meta.cast::<M>());
            }
        }
    }

    /// The record's address: a total order over records, used to lock in a global order.
    pub fn addr(self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// # Safety
    /// `addr` must come from [`RecordPtr::addr`] of a live record.
    pub(crate) unsafe fn from_addr(addr: usize) -> RecordPtr<M> {
        // SAFETY: the caller passes an address taken from a live record, which is non-null.
        RecordPtr {
            ptr: unsafe { NonNull::new_unchecked(addr as *mut u8) },
            _meta: PhantomData,
        }
    }

    /// The metadata of column group `g`. `layout` must be the record's table layout.
    #[inline]
    pub fn meta(&self, layout: &RecordLayout, g: usize) -> &M {
        debug_assert!(g < layout.groups);
        // SAFETY: `g` is in range and the record is alive (see the type's documentation).
        unsafe {
            &*self
                .ptr
                .as_ptr()
                .add(layout.meta_offset[g] as usize)
                .cast::<M>()
        }
    }

    /// The row words of column group `g` (row words `group.word..group.word + group.words`).
    #[inline]
    pub fn group_words(&self, layout: &RecordLayout, g: usize) -> &[AtomicU64] {
        debug_assert!(g < layout.groups);
        // SAFETY: the group's words were initialised at allocation and live as long as the record.
        unsafe {
            std::slice::from_raw_parts(
                self.ptr
                    .as_ptr()
                    .add(layout.data_offset[g] as usize)
                    .cast::<AtomicU64>(),
                layout.words[g] as usize,
            )
        }
    }

    /// Row word `w` of the record.
    #[inline]
    pub fn word(&self, layout: &RecordLayout, w: usize) -> &AtomicU64 {
        let g = layout.group_of(w);
        &self.group_words(layout, g)[w - layout.first_word[g] as usize]
    }

    /// Starts loading the whole record (every group's metadata and words) into the cache.
    #[inline]
    pub fn prefetch(&self, layout: &RecordLayout) {
        let base = self.ptr.as_ptr() as usize;
        let mut line = base & !63;
        while line < base + layout.size() {
            crate::prefetch::line(line as *const u8);
            line += 64;
        }
    }

    /// Starts loading group `g`'s metadata and words owned, for a write that follows at once (see
    /// `prefetch::line_for_write`): a read-modify-write of a contended record then takes its line
    /// once instead of reading it shared and upgrading it to lock it.
    #[inline]
    pub fn prefetch_group_for_write(&self, layout: &RecordLayout, g: usize) {
        let base = self.ptr.as_ptr() as usize;
        let meta = (base + layout.meta_offset[g] as usize) & !63;
        crate::prefetch::line_for_write(meta as *const u8);
        let first = (base + layout.data_offset[g] as usize) & !63;
        let end = base + layout.data_offset[g] as usize + 8 * layout.words[g] as usize;
        let mut line = first;
        while line < end {
            if line != meta {
                crate::prefetch::line_for_write(line as *const u8);
            }
            line += 64;
        }
    }

    /// Starts loading into the cache the lines a read of the columns in `cols` touches: each
    /// involved group's metadata and the words of those columns, skipping the lines between.
    #[inline]
    pub fn prefetch_columns(&self, layout: &RecordLayout, schema: &Schema, cols: u64) {
        let base = self.ptr.as_ptr() as usize;
        let mut last_line = usize::MAX;
        let mut line = |addr: usize| {
            let l = addr & !63;
            if l != last_line {
                crate::prefetch::line(l as *const u8);
                last_line = l;
            }
        };
        let mut m = cols & schema.all_columns();
        let mut group = usize::MAX;
        while m != 0 {
            let c = m.trailing_zeros() as usize;
            m &= m - 1;
            let g = schema.column(c).group;
            if g != group {
                group = g;
                line(base + layout.meta_offset[g] as usize);
            }
            let span = schema.span(c);
            let data = base + layout.data_offset[g] as usize - layout.first_word[g] as usize * 8;
            let mut addr = (data + span.first * 8) & !63;
            while addr <= data + span.last * 8 {
                line(addr);
                addr += 64;
            }
        }
    }

    /// Copies the row words of group `g` into `out` (exactly as long) with relaxed loads; torn copies
    /// as in [`RecordPtr::copy_words`].
    #[inline]
    pub fn copy_group(&self, layout: &RecordLayout, g: usize, out: &mut [u64]) {
        for (o, x) in out.iter_mut().zip(self.group_words(layout, g)) {
            *o = x.load(Ordering::Relaxed);
        }
    }

    /// Copies the row words `first..first + out.len()`, all in group `g`, into `out` with relaxed
    /// loads; torn copies as in [`RecordPtr::copy_words`].
    #[inline]
    pub fn copy_part(&self, layout: &RecordLayout, g: usize, first: usize, out: &mut [u64]) {
        let from = first - layout.first_word[g] as usize;
        let words = &self.group_words(layout, g)[from..from + out.len()];
        for (o, x) in out.iter_mut().zip(words) {
            *o = x.load(Ordering::Relaxed);
        }
    }

    /// Copies row words `first..first + out.len()` into `out` with relaxed loads. The copy may be torn
    /// if a writer is installing; the caller detects that with its metadata (seqlock style).
    #[inline]
    pub fn copy_words(&self, layout: &RecordLayout, first: usize, out: &mut [u64]) {
        let mut w = first;
        let end = first + out.len();
        while w < end {
            let g = layout.group_of(w);
            let start = layout.first_word[g] as usize;
            let words = self.group_words(layout, g);
            let n = (start + words.len()).min(end) - w;
            for (o, x) in out[w - first..w - first + n]
                .iter_mut()
                .zip(&words[w - start..w - start + n])
            {
                *o = x.load(Ordering::Relaxed);
            }
            w += n;
        }
    }

    /// Writes the columns in `columns` of row image `src` into the record. The caller holds whatever
    /// excludes other writers of the groups involved.
    pub fn install_columns(
        &self,
        layout: &RecordLayout,
        schema: &Schema,
        columns: u64,
        src: &[u64],
    ) {
        // Only the groups written: under fine groups which one a write hits is as random as its
        // column, and skipping the others by a test per group mispredicts that often.
        let mut written = schema.groups_of(columns);
        while written != 0 {
            let g = written.trailing_zeros() as usize;
            written &= written - 1;
            let group = &schema.groups()[g];
            let cols = group.columns & columns;
            let words = self.group_words(layout, g);
            if cols == group.columns {
                for (word, v) in words.iter().zip(&src[group.word..group.word + group.words]) {
                    word.store(*v, Ordering::Relaxed);
                }
                continue;
            }
            let mut m = cols;
            while m != 0 {
                let c = m.trailing_zeros() as usize;
                m &= m - 1;
                for_column_words(schema, c, |w, mask| {
                    let word = &words[w - group.word];
                    let v = if mask == u64::MAX {
                        src[w]
                    } else {
                        (word.load(Ordering::Relaxed) & !mask) | (src[w] & mask)
                    };
                    word.store(v, Ordering::Relaxed);
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::ColumnType;

    fn schema() -> Schema {
        Schema::builder()
            .column("a", ColumnType::U64, 0)
            .column("b", ColumnType::Fixed(20), 1)
            .column("c", ColumnType::U64, 2)
            .build()
            .unwrap()
    }

    #[test]
    fn each_group_sits_beside_its_metadata() {
        let s = schema();
        let l = RecordLayout::of::<u64>(&s);
        for g in 0..3 {
            assert_eq!(l.data_offset[g] - l.meta_offset[g], 8, "group {g}");
        }
        assert!(l.meta_offset[1] as usize >= l.data_offset[0] as usize + 8);
        let row: Vec<u64> = (10..10 + s.row_words() as u64).collect();
        let arena = RecordArena::new(l.size(), l.align());
        let r = RecordPtr::<u64>::allocate(&l, &arena, |g| 100 + g as u64, Some(&row));
        for (g, group) in s.groups().iter().enumerate() {
            assert_eq!(*r.meta(&l, g), 100 + g as u64);
            let words: Vec<u64> = r
                .group_words(&l, g)
                .iter()
                .map(|w| w.load(Ordering::Relaxed))
                .collect();
            assert_eq!(words, row[group.word..group.word + group.words]);
        }
        let mut all = vec![0; s.row_words()];
        r.copy_words(&l, 0, &mut all);
        assert_eq!(all, row);
        let mut middle = vec![0; s.row_words() - 1];
        r.copy_words(&l, 1, &mut middle);
        assert_eq!(middle, row[1..]);
        let mut src = vec![0u64; s.row_words()];
        src[s.row_words() - 1] = 99;
        r.install_columns(&l, &s, 1 << 2, &src);
        assert_eq!(r.word(&l, s.row_words() - 1).load(Ordering::Relaxed), 99);
        assert_eq!(r.word(&l, 0).load(Ordering::Relaxed), row[0]);
        // SAFETY: the record was never shared.
        unsafe { r.drop_meta(&l) };
    }

    fn words(n: usize, groups: usize) -> Schema {
        let mut b = Schema::builder();
        for c in 0..n {
            b = b.column(&format!("c{c}"), ColumnType::U64, c % groups);
        }
        b.build().unwrap()
    }

    #[test]
    fn records_nearly_filling_lines_are_line_aligned() {
        // 2 groups × (8 B meta + 7 words) = 128 B: exactly two lines, aligned to them.
        let l = RecordLayout::of::<u64>(&words(14, 2));
        assert_eq!((l.size(), l.layout.align()), (128, 64));
        // 8 + 13 × 8 = 112 B: rounding to 128 wastes an eighth, so it is rounded and aligned.
        let l = RecordLayout::of::<u64>(&words(13, 1));
        assert_eq!((l.size(), l.layout.align()), (128, 64));
        // 8 + 8 × 8 = 72 B: rounding to 128 would waste 56 B, so it stays packed.
        let l = RecordLayout::of::<u64>(&words(8, 1));
        assert_eq!((l.size(), l.layout.align()), (72, 8));
        let l = RecordLayout::of::<u64>(&words(14, 2));
        let arena = RecordArena::new(l.size(), l.align());
        let r = RecordPtr::<u64>::allocate(&l, &arena, |_| 0, None);
        assert_eq!(r.addr() % 64, 0);
        // SAFETY: the record was never shared.
        unsafe { r.drop_meta(&l) };
    }
}
