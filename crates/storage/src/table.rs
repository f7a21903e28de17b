use crossbeam_epoch::Guard;

use crate::arena::RecordArena;
use crate::hash_index::HashIndex;
use crate::ordered_index::OrderedIndex;
use crate::record::{RecordLayout, RecordPtr};
use crate::schema::Schema;

/// Identifies a table within a database.
pub type TableId = u32;

/// What a table is made of: name, schema, expected size, and whether it needs range scans.
#[derive(Clone, Debug)]
pub struct TableSpec {
    pub name: String,
    pub schema: Schema,
    /// Expected number of rows; the hash index is sized for it and grows past it.
    pub capacity: usize,
    /// Keep an ordered index too, for range scans.
    pub ordered: bool,
}

impl TableSpec {
    /// A table with a hash index only.
    pub fn new(name: &str, schema: Schema, capacity: usize) -> TableSpec {
        TableSpec {
            name: name.to_string(),
            schema,
            capacity,
            ordered: false,
        }
    }

    /// Also keep an ordered index, for range scans.
    pub fn ordered(mut self) -> TableSpec {
        self.ordered = true;
        self
    }
}

/// The result of [`Table::insert_with`].
#[derive(Debug)]
pub enum InsertOutcome<M> {
    /// A new record was allocated and linked.
    Inserted(RecordPtr<M>),
    /// A record with the key was already linked; nothing was allocated.
    Exists(RecordPtr<M>),
}

/// A table: records of one schema with metadata `M` per column group, found by a primary hash index
/// and, optionally, an ordered index. Linked records keep their address until unlinked; unlinked records
/// are freed once no epoch guard can still see them.
pub struct Table<M> {
    id: TableId,
    name: String,
    schema: Schema,
    layout: RecordLayout,
    arena: RecordArena,
    hash: HashIndex,
    ordered: Option<OrderedIndex>,
    _meta: std::marker::PhantomData<M>,
}

// SAFETY: records are reached only through `RecordPtr`, whose contents are atomics or `M: Sync`.
unsafe impl<M: Send + Sync> Send for Table<M> {}
unsafe impl<M: Send + Sync> Sync for Table<M> {}

impl<M: Send + Sync> Table<M> {
    /// An empty table.
    pub fn new(id: TableId, spec: TableSpec) -> Table<M> {
        let layout = RecordLayout::of::<M>(&spec.schema);
        Table {
            id,
            arena: RecordArena::new(layout.size(), layout.align()),
            layout,
            hash: HashIndex::with_capacity(spec.capacity),
            ordered: spec.ordered.then(OrderedIndex::default),
            name: spec.name,
            schema: spec.schema,
            _meta: std::marker::PhantomData,
        }
    }

    /// The table's id.
    pub fn id(&self) -> TableId {
        self.id
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The table's schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The layout of the table's records.
    pub fn layout(&self) -> &RecordLayout {
        &self.layout
    }

    /// Whether the table keeps an ordered index.
    pub fn is_ordered(&self) -> bool {
        self.ordered.is_some()
    }

    /// The record linked under `key`.
    #[inline]
    pub fn get(&self, key: u64, guard: &Guard) -> Option<RecordPtr<M>> {
        // SAFETY: the index holds addresses of linked records, kept alive by `guard`.
        self.hash
            .get(key, guard)
            .map(|a| unsafe { RecordPtr::from_addr(a) })
    }

    /// Starts loading the index slot of `key` into the cache (first step of a batched lookup).
    #[inline]
    pub fn prefetch_slot(&self, key: u64, guard: &Guard) {
        self.hash.prefetch(key, guard);
    }

    /// Looks `key` up and starts loading its record's metadata and row into the cache (second step of
    /// a batched lookup).
    #[inline]
    pub fn prefetch_record(&self, key: u64, guard: &Guard) {
        if let Some(rec) = self.get(key, guard) {
            rec.prefetch(&self.layout, 0, self.schema.row_words());
        }
    }

    /// Looks `key` up and starts loading into the cache the lines of its record that a read of the
    /// columns in `cols` touches (second step of a batched lookup).
    #[inline]
    pub fn prefetch_record_columns(&self, key: u64, guard: &Guard, cols: u64) {
        if let Some(rec) = self.get(key, guard) {
            rec.prefetch_columns(&self.layout, &self.schema, cols);
        }
    }

    /// Starts loading into the cache the memory of the next `n` records this thread's inserts will
    /// create (see [`RecordArena::prefetch`]).
    #[inline]
    pub fn prefetch_inserts(&self, n: usize) {
        self.arena.prefetch(n);
    }

    /// Links a new record under `key` unless one is linked already. `meta` gives each group's initial
    /// metadata, `row` the initial image (zeros if `None`).
    pub fn insert_with(
        &self,
        key: u64,
        guard: &Guard,
        meta: impl FnMut(usize) -> M,
        row: Option<&[u64]>,
    ) -> InsertOutcome<M> {
        self.hash.upsert_with(key, guard, |current| match current {
            // SAFETY: the index holds addresses of linked records, kept alive by `guard`.
            Some(addr) => (
                None,
                InsertOutcome::Exists(unsafe { RecordPtr::from_addr(addr) }),
            ),
            None => {
                let rec = RecordPtr::allocate(&self.layout, &self.arena, meta, row);
                if let Some(ordered) = &self.ordered {
                    let fresh = ordered.insert(key, rec.addr(), guard);
                    debug_assert!(
                        fresh,
                        "ordered index agrees with the hash index under the shard lock"
                    );
                }
                (Some(rec.addr()), InsertOutcome::Inserted(rec))
            }
        })
    }

    /// Unlinks the record at address `addr` from the indexes if `key` still maps to it and `decide(rec)`
    /// agrees. `decide` runs under the index shard lock while the record is known to be linked (hence
    /// alive), so the caller may hold only the key and address. The record is freed once every guard
    /// pinned before now is dropped.
    pub fn unlink_if(
        &self,
        key: u64,
        addr: usize,
        guard: &Guard,
        decide: impl FnOnce(RecordPtr<M>) -> bool,
    ) -> bool {
        // SAFETY: `decide` is called only while the index maps `key` to `addr`, so the record is linked.
        let rec = || unsafe { RecordPtr::from_addr(addr) };
        let removed = self.hash.remove_if(
            key,
            addr,
            guard,
            || decide(rec()),
            || {
                if let Some(ordered) = &self.ordered {
                    ordered.remove(key, addr, guard);
                }
            },
        );
        if removed {
            let (layout, arena) = (self.layout, self.arena.handle());
            let rec = rec();
            // SAFETY: the record is unreachable from the indexes; guards pinned earlier may still read
            // it, and the deferred free runs only after they are all dropped. The handle keeps the
            // arena's memory mapped until then.
            unsafe {
                guard.defer_unchecked(move || {
                    rec.drop_meta(&layout);
                    arena.free(rec.addr());
                })
            };
        }
        removed
    }

    /// Calls `f(key, record)` on the records with keys in `lo..=hi`, in key order, until it returns
    /// false. Panics if the table has no ordered index.
    pub fn scan(
        &self,
        lo: u64,
        hi: u64,
        guard: &Guard,
        mut f: impl FnMut(u64, RecordPtr<M>) -> bool,
    ) {
        let ordered = self
            .ordered
            .as_ref()
            .unwrap_or_else(|| panic!("table `{}` has no ordered index", self.name));
        // SAFETY: the index holds addresses of linked records, kept alive by `guard`.
        ordered.scan(lo, hi, guard, |key, addr| {
            f(key, unsafe { RecordPtr::from_addr(addr) })
        });
    }

    /// Calls `f(key, record)` on every linked record, in no particular order.
    pub fn for_each(&self, guard: &Guard, mut f: impl FnMut(u64, RecordPtr<M>)) {
        // SAFETY: the index holds addresses of linked records, kept alive by `guard`.
        self.hash.for_each(guard, |key, addr| {
            f(key, unsafe { RecordPtr::from_addr(addr) })
        });
    }

    /// Number of linked records.
    pub fn len(&self) -> usize {
        self.hash.len()
    }

    /// Whether no record is linked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Approximate bytes used by the records (before allocator overhead) and the hash index.
    pub fn memory_bytes(&self) -> usize {
        self.len() * self.layout.size() + self.hash.memory_bytes()
    }
}

impl<M> Drop for Table<M> {
    fn drop(&mut self) {
        let guard = crossbeam_epoch::pin();
        let layout = self.layout;
        self.hash.for_each(&guard, |_, addr| {
            // SAFETY: the table is being dropped, so nobody else can reach its linked records; their
            // memory goes with the arena.
            unsafe { RecordPtr::<M>::from_addr(addr).drop_meta(&layout) }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::ColumnType;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn table(ordered: bool) -> Table<AtomicU64> {
        let schema = Schema::builder()
            .column("v", ColumnType::U64, 0)
            .build()
            .unwrap();
        let mut spec = TableSpec::new("t", schema, 4);
        spec.ordered = ordered;
        Table::new(0, spec)
    }

    #[test]
    fn insert_lookup_scan_unlink() {
        let t = table(true);
        let guard = crossbeam_epoch::pin();
        for k in [5u64, 1, 9, 3] {
            match t.insert_with(k, &guard, |_| AtomicU64::new(k), Some(&[k * 10])) {
                InsertOutcome::Inserted(r) => assert_eq!(t.get(k, &guard), Some(r)),
                InsertOutcome::Exists(_) => panic!("fresh key"),
            }
        }
        assert!(matches!(
            t.insert_with(5, &guard, |_| AtomicU64::new(0), None),
            InsertOutcome::Exists(_)
        ));
        let r = t.get(9, &guard).unwrap();
        assert_eq!(r.meta(t.layout(), 0).load(Ordering::Relaxed), 9);
        assert_eq!(r.word(t.layout(), 0).load(Ordering::Relaxed), 90);
        let mut keys = vec![];
        t.scan(2, 9, &guard, |k, r| {
            assert_eq!(t.get(k, &guard), Some(r));
            keys.push(k);
            true
        });
        assert_eq!(keys, vec![3, 5, 9]);
        assert!(!t.unlink_if(9, r.addr(), &guard, |_| false));
        assert!(t.unlink_if(9, r.addr(), &guard, |x| x == r));
        assert!(!t.unlink_if(9, r.addr(), &guard, |_| true));
        assert!(t.get(9, &guard).is_none());
        keys.clear();
        t.scan(0, u64::MAX, &guard, |k, _| {
            keys.push(k);
            keys.len() < 2
        });
        assert_eq!(keys, vec![1, 3]);
        assert_eq!(t.len(), 3);
    }
}
