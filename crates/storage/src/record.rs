use std::alloc::{Layout, alloc, dealloc};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::row::column_word_mask;
use crate::schema::Schema;

/// Where the parts of a record sit in its allocation: the key, one `M` per column group, then the row
/// image as atomic words (so that optimistic readers may copy it while a writer installs a new image).
#[derive(Clone, Copy, Debug)]
pub struct RecordLayout {
    meta_offset: usize,
    data_offset: usize,
    groups: usize,
    row_words: usize,
    layout: Layout,
}

impl RecordLayout {
    /// The layout of records of `schema` whose groups carry metadata of type `M`.
    pub fn of<M>(schema: &Schema) -> RecordLayout {
        let groups = schema.groups().len();
        let head = Layout::new::<u64>();
        let metas = Layout::array::<M>(groups).expect("metadata array fits in memory");
        let (l, meta_offset) = head.extend(metas).expect("record fits in memory");
        let words = Layout::array::<AtomicU64>(schema.row_words()).expect("row fits in memory");
        let (l, data_offset) = l.extend(words).expect("record fits in memory");
        RecordLayout {
            meta_offset,
            data_offset,
            groups,
            row_words: schema.row_words(),
            layout: l.pad_to_align(),
        }
    }

    /// Bytes one record occupies (before allocator overhead).
    pub fn size(&self) -> usize {
        self.layout.size()
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
    /// Allocates a record with `key`, metadata from `meta(group)` and row image `row` (zero if `None`).
    pub(crate) fn allocate(
        layout: &RecordLayout,
        key: u64,
        mut meta: impl FnMut(usize) -> M,
        row: Option<&[u64]>,
    ) -> RecordPtr<M> {
        // SAFETY: the layout has non-zero size (it holds at least the key); every part is initialised
        // before the pointer is returned.
        unsafe {
            let raw = alloc(layout.layout);
            let Some(ptr) = NonNull::new(raw) else {
                std::alloc::handle_alloc_error(layout.layout)
            };
            ptr.as_ptr().cast::<u64>().write(key);
            let metas = ptr.as_ptr().add(layout.meta_offset).cast::<M>();
            for g in 0..layout.groups {
                metas.add(g).write(meta(g));
            }
            let words = ptr.as_ptr().add(layout.data_offset).cast::<AtomicU64>();
            for w in 0..layout.row_words {
                let v = row.map_or(0, |r| r[w]);
                words.add(w).write(AtomicU64::new(v));
            }
            RecordPtr {
                ptr,
                _meta: PhantomData,
            }
        }
    }

    /// Drops the metadata and frees the record.
    ///
    /// # Safety
    /// No one may use the record afterwards: it is unlinked and every guard that could see it is gone.
    pub(crate) unsafe fn free(self, layout: &RecordLayout) {
        // SAFETY: the caller guarantees exclusive ownership; the metas were initialised in `allocate`.
        unsafe {
            let metas = self.ptr.as_ptr().add(layout.meta_offset).cast::<M>();
            for g in 0..layout.groups {
                std::ptr::drop_in_place(metas.add(g));
            }
            dealloc(self.ptr.as_ptr(), layout.layout);
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

    /// The record's primary key.
    #[inline]
    pub fn key(&self) -> u64 {
        // SAFETY: the key is written once at allocation and never changes.
        unsafe { *self.ptr.as_ptr().cast::<u64>() }
    }

    /// The metadata of column group `g`. `layout` must be the record's table layout.
    #[inline]
    pub fn meta(&self, layout: &RecordLayout, g: usize) -> &M {
        debug_assert!(g < layout.groups);
        // SAFETY: `g` is in range and the record is alive (see the type's documentation).
        unsafe { &*self.ptr.as_ptr().add(layout.meta_offset).cast::<M>().add(g) }
    }

    /// The row image as atomic words.
    #[inline]
    pub fn words(&self, layout: &RecordLayout) -> &[AtomicU64] {
        // SAFETY: the words were initialised at allocation and live as long as the record.
        unsafe {
            std::slice::from_raw_parts(
                self.ptr
                    .as_ptr()
                    .add(layout.data_offset)
                    .cast::<AtomicU64>(),
                layout.row_words,
            )
        }
    }

    /// Starts loading the record's metadata and row words `first..first + words` into the cache.
    #[inline]
    pub fn prefetch(&self, layout: &RecordLayout, first: usize, words: usize) {
        let base = self.ptr.as_ptr();
        crate::prefetch::line(base);
        // SAFETY: the offsets stay inside the record's allocation.
        let data = unsafe { base.add(layout.data_offset + first * 8) };
        let end = (first + words).min(layout.row_words) - first.min(layout.row_words);
        for off in (0..end * 8).step_by(64) {
            // SAFETY: `off` is inside the row, which is inside the allocation.
            crate::prefetch::line(unsafe { data.add(off) });
        }
    }

    /// Copies row words `first..first + out.len()` into `out` with relaxed loads. The copy may be torn
    /// if a writer is installing; the caller detects that with its metadata (seqlock style).
    #[inline]
    pub fn copy_words(&self, layout: &RecordLayout, first: usize, out: &mut [u64]) {
        let words = &self.words(layout)[first..first + out.len()];
        for (o, w) in out.iter_mut().zip(words) {
            *o = w.load(Ordering::Relaxed);
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
        let words = self.words(layout);
        for group in schema.groups() {
            let cols = group.columns & columns;
            if cols == 0 {
                continue;
            }
            if cols == group.columns {
                for w in group.word..group.word + group.words {
                    words[w].store(src[w], Ordering::Relaxed);
                }
                continue;
            }
            let mut m = cols;
            while m != 0 {
                let c = m.trailing_zeros() as usize;
                m &= m - 1;
                let (first, last) = schema.column(c).word_span();
                for (w, word) in words.iter().enumerate().take(last + 1).skip(first) {
                    let mask = column_word_mask(schema, c, w);
                    let old = word.load(Ordering::Relaxed);
                    word.store((old & !mask) | (src[w] & mask), Ordering::Relaxed);
                }
            }
        }
    }
}
