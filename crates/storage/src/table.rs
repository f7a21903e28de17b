use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, Ordering};

use crossbeam_epoch::Guard;

use crate::arena::RecordArena;
use crate::hash_index::HashIndex;
use crate::ordered_index::OrderedIndex;
use crate::record::{RecordLayout, RecordPtr};
use crate::row::move_columns;
use crate::schema::{Schema, SchemaError};

/// Identifies a table within a database.
pub type TableId = u32;

/// What a table is made of: name, schema, expected size, and its indexes.
#[derive(Clone, Debug)]
pub struct TableSpec {
    pub name: String,
    pub schema: Schema,
    /// Expected number of rows; the hash index is sized for it and grows past it.
    pub capacity: usize,
    /// How rows are found.
    pub indexes: Indexes,
}

/// The indexes of a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Indexes {
    /// A hash index: point lookups only, in one probe.
    Hash,
    /// A hash index for point lookups and an ordered index for range scans.
    HashAndOrdered,
    /// An ordered index alone, for both. A lookup descends the tree, but inserts of keys that arrive
    /// in order (order ids, sequence numbers) go to the few leaves at the ends of their runs, which
    /// stay in the cache, where a hash index puts each in a random slot.
    Ordered,
}

impl TableSpec {
    /// A table with a hash index only.
    pub fn new(name: &str, schema: Schema, capacity: usize) -> TableSpec {
        TableSpec {
            name: name.to_string(),
            schema,
            capacity,
            indexes: Indexes::Hash,
        }
    }

    /// Also keep an ordered index, for range scans.
    pub fn ordered(mut self) -> TableSpec {
        self.indexes = Indexes::HashAndOrdered;
        self
    }

    /// Keep only an ordered index (see [`Indexes::Ordered`]).
    pub fn ordered_only(mut self) -> TableSpec {
        self.indexes = Indexes::Ordered;
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

/// A table: records of one schema with metadata `M` per column group, found by a hash index, an
/// ordered index, or both (see [`Indexes`]). Where there are both, the hash index is the primary one:
/// its shard lock orders inserts and removals of a key, and the ordered index follows it. Linked
/// records keep their address until unlinked; unlinked records are freed once no epoch guard can
/// still see them.
///
/// A table's column groups may change ([`Table::regroup`]): the records are then copied into a new
/// *version* of the table (schema, layout, arena, indexes) that replaces the current one. Earlier
/// versions stay allocated until the table is dropped, so a reference taken from one stays valid.
pub struct Table<M> {
    id: TableId,
    name: String,
    first: Version<M>,
    /// The version [`Table::regroup`] made last; null while `first` is current.
    current: AtomicPtr<Version<M>>,
    /// Every version after `first`, kept until the table is dropped; boxed so that a published
    /// version keeps its address when the vector grows.
    #[allow(clippy::vec_box)]
    later: Mutex<Vec<Box<Version<M>>>>,
}

/// One layout of a table's records and the indexes that find them.
struct Version<M> {
    schema: Schema,
    layout: RecordLayout,
    arena: RecordArena,
    /// At least one of the two.
    hash: Option<HashIndex>,
    ordered: Option<OrderedIndex>,
    _meta: std::marker::PhantomData<M>,
}

impl<M> Version<M> {
    fn new(schema: Schema, capacity: usize, indexes: Indexes) -> Version<M> {
        let layout = RecordLayout::of::<M>(&schema);
        Version {
            arena: RecordArena::new(layout.size(), layout.align()),
            layout,
            hash: (indexes != Indexes::Ordered).then(|| HashIndex::with_capacity(capacity)),
            ordered: (indexes != Indexes::Hash).then(OrderedIndex::default),
            schema,
            _meta: std::marker::PhantomData,
        }
    }

    /// The ordered index of a version without a hash index.
    #[inline]
    fn ordered_index(&self) -> &OrderedIndex {
        self.ordered
            .as_ref()
            .expect("a table without a hash index has an ordered one")
    }

    /// Links a new record under `key` unless one is linked already (see [`Table::insert_with`]).
    fn insert_with(
        &self,
        key: u64,
        guard: &Guard,
        meta: impl FnMut(usize) -> M,
        row: Option<&[u64]>,
    ) -> InsertOutcome<M>
    where
        M: Send + Sync,
    {
        let link = |current: Option<usize>| match current {
            // SAFETY: the index holds addresses of linked records, kept alive by `guard`.
            Some(addr) => (
                None,
                InsertOutcome::Exists(unsafe { RecordPtr::from_addr(addr) }),
            ),
            None => {
                let rec = RecordPtr::allocate(&self.layout, &self.arena, meta, row);
                (Some(rec.addr()), InsertOutcome::Inserted(rec))
            }
        };
        let Some(hash) = &self.hash else {
            return self.ordered_index().upsert_with(key, guard, link);
        };
        hash.upsert_with(key, guard, |current| {
            let (insert, outcome) = link(current);
            if let (Some(addr), Some(ordered)) = (insert, &self.ordered) {
                let fresh = ordered.insert(key, addr, guard);
                debug_assert!(
                    fresh,
                    "ordered index agrees with the hash index under the shard lock"
                );
            }
            (insert, outcome)
        })
    }

    fn indexes(&self) -> Indexes {
        match (&self.hash, &self.ordered) {
            (Some(_), Some(_)) => Indexes::HashAndOrdered,
            (Some(_), None) => Indexes::Hash,
            _ => Indexes::Ordered,
        }
    }
}

// SAFETY: records are reached only through `RecordPtr`, whose contents are atomics or `M: Sync`.
unsafe impl<M: Send + Sync> Send for Table<M> {}
unsafe impl<M: Send + Sync> Sync for Table<M> {}

/// Key ranges [`Table::for_each_in_part`] splits a table with only an ordered index into.
const ORDERED_PARTS: usize = 16;

impl<M: Send + Sync> Table<M> {
    /// An empty table.
    pub fn new(id: TableId, spec: TableSpec) -> Table<M> {
        Table {
            id,
            first: Version::new(spec.schema, spec.capacity, spec.indexes),
            current: AtomicPtr::new(std::ptr::null_mut()),
            later: Mutex::new(Vec::new()),
            name: spec.name,
        }
    }

    /// The current version.
    #[inline(always)]
    fn v(&self) -> &Version<M> {
        let p = self.current.load(Ordering::Acquire);
        if p.is_null() {
            &self.first
        } else {
            // SAFETY: a published version is boxed in `later` and lives as long as the table.
            unsafe { &*p }
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
        &self.v().schema
    }

    /// The layout of the table's records.
    pub fn layout(&self) -> &RecordLayout {
        &self.v().layout
    }

    /// Whether the table keeps an ordered index.
    pub fn is_ordered(&self) -> bool {
        let v = self.v();
        v.ordered.is_some()
    }

    /// The record linked under `key`.
    #[inline]
    pub fn get(&self, key: u64, guard: &Guard) -> Option<RecordPtr<M>> {
        let v = self.v();
        let addr = match &v.hash {
            Some(hash) => hash.get(key, guard),
            None => v.ordered_index().get(key, guard),
        };
        // SAFETY: the index holds addresses of linked records, kept alive by `guard`.
        addr.map(|a| unsafe { RecordPtr::from_addr(a) })
    }

    /// Starts loading the index entry of `key` into the cache (first step of a batched lookup): its
    /// hash slot, or its leaf in a table with only an ordered index.
    #[inline]
    pub fn prefetch_slot(&self, key: u64, guard: &Guard) {
        let v = self.v();
        match &v.hash {
            Some(hash) => hash.prefetch(key, guard),
            None => v.ordered_index().prefetch(key, guard),
        }
    }

    /// Starts loading into the cache where an insert of `key` will go in each index: its hash slot,
    /// and the ordered index's leaf.
    #[inline]
    pub fn prefetch_insert(&self, key: u64, guard: &Guard) {
        let v = self.v();
        if let Some(hash) = &v.hash {
            hash.prefetch(key, guard);
        }
        if let Some(ordered) = &v.ordered {
            ordered.prefetch(key, guard);
        }
    }

    /// Looks `key` up and starts loading its record's metadata and row into the cache (second step of
    /// a batched lookup).
    #[inline]
    pub fn prefetch_record(&self, key: u64, guard: &Guard) {
        let v = self.v();
        if let Some(rec) = self.get(key, guard) {
            rec.prefetch(&v.layout);
        }
    }

    /// Looks `key` up and starts loading into the cache the lines of its record that a read of the
    /// columns in `cols` touches (second step of a batched lookup).
    #[inline]
    pub fn prefetch_record_columns(&self, key: u64, guard: &Guard, cols: u64) {
        let v = self.v();
        if let Some(rec) = self.get(key, guard) {
            rec.prefetch_columns(&v.layout, &v.schema, cols);
        }
    }

    /// Starts loading into the cache the memory of the next `n` records this thread's inserts will
    /// create (see the arena's `prefetch`).
    #[inline]
    pub fn prefetch_inserts(&self, n: usize) {
        let v = self.v();
        v.arena.prefetch(n);
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
        self.v().insert_with(key, guard, meta, row)
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
        let v = self.v();
        let removed = match &v.hash {
            Some(hash) => hash.remove_if(
                key,
                addr,
                guard,
                || decide(rec()),
                || {
                    if let Some(ordered) = &v.ordered {
                        ordered.remove(key, addr, guard);
                    }
                },
            ),
            None => v
                .ordered_index()
                .remove_if(key, addr, guard, || decide(rec()), || ()),
        };
        if removed {
            let (layout, arena) = (v.layout, v.arena.handle());
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
            .v()
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
        let v = self.v();
        // SAFETY: the index holds addresses of linked records, kept alive by `guard`.
        let mut visit = |key, addr| f(key, unsafe { RecordPtr::from_addr(addr) });
        match &v.hash {
            Some(hash) => hash.for_each(guard, visit),
            None => v.ordered_index().scan(0, u64::MAX, guard, |key, addr| {
                visit(key, addr);
                true
            }),
        }
    }

    /// Number of parts [`Table::for_each_in_part`] divides the records into, so that several
    /// threads can visit one table (a checkpoint writer's ranges): the hash index's shards, or
    /// ranges of the key space's top bits in a table with only an ordered index.
    pub fn parts(&self) -> usize {
        let v = self.v();
        match &v.hash {
            Some(hash) => hash.shards(),
            None => ORDERED_PARTS,
        }
    }

    /// Calls `f(key, record)` on every linked record of part `part` (below [`Table::parts`]), in
    /// no particular order. `f` runs while the part is locked against inserts in a hash table:
    /// it must not wait for a committer (gather, then read).
    pub fn for_each_in_part(
        &self,
        part: usize,
        guard: &Guard,
        mut f: impl FnMut(u64, RecordPtr<M>),
    ) {
        let v = self.v();
        // SAFETY: the index holds addresses of linked records, kept alive by `guard`.
        let mut visit = |key, addr| f(key, unsafe { RecordPtr::from_addr(addr) });
        match &v.hash {
            Some(hash) => hash.for_each_in_shard(part, guard, visit),
            None => {
                let width = 64 - ORDERED_PARTS.trailing_zeros();
                let lo = (part as u64) << width;
                let hi = lo | ((1u64 << width) - 1);
                v.ordered_index().scan(lo, hi, guard, |key, addr| {
                    visit(key, addr);
                    true
                })
            }
        }
    }

    /// Number of linked records (a walk of the tree in a table with only an ordered index).
    pub fn len(&self) -> usize {
        let v = self.v();
        match &v.hash {
            Some(hash) => hash.len(),
            None => v.ordered_index().len(&crossbeam_epoch::pin()),
        }
    }

    /// Changes the table's column groups: copies the records (those `keep` accepts) into a new
    /// version laid out by `schema`, which must have the same columns in the same order, and makes
    /// it current; `keep(key, record)` is asked first for each. `meta(old, covering)` gives the metadata of each new group of the copy of record
    /// `old`, where `covering` is the mask of the old groups that hold the new group's columns.
    /// Records keep their keys and row values but not their addresses.
    ///
    /// The caller must make sure that no other thread reads or writes the table's records while
    /// this runs (a quiescent point: in phasedb, every worker held between transactions), and that
    /// no record, schema or layout taken from the table before is used afterwards with the new
    /// version. Unlinks by other threads may still run: a record found linked is copied. The old
    /// version's memory stays allocated until the table is dropped.
    pub fn regroup(
        &self,
        schema: Schema,
        guard: &Guard,
        mut keep: impl FnMut(u64, RecordPtr<M>) -> bool,
        mut meta: impl FnMut(RecordPtr<M>, u32) -> M,
    ) -> Result<(), SchemaError> {
        let old = self.v();
        if !old.schema.same_columns(&schema) {
            return Err(SchemaError::ColumnsDiffer);
        }
        let covering: Vec<u32> = (schema.groups().iter())
            .map(|g| old.schema.groups_of(g.columns))
            .collect();
        let new = Box::new(Version::<M>::new(schema, self.len().max(16), old.indexes()));
        let mut src = vec![0u64; old.schema.row_words()];
        let mut dst = vec![0u64; new.schema.row_words()];
        let mut records = Vec::new();
        for part in 0..self.parts() {
            records.clear();
            self.for_each_in_part(part, guard, |key, rec| records.push((key, rec)));
            for &(key, rec) in &records {
                if !keep(key, rec) {
                    continue;
                }
                rec.copy_words(&old.layout, 0, &mut src);
                dst.fill(0);
                move_columns(&old.schema, &new.schema, &src, &mut dst);
                new.insert_with(key, guard, |g| meta(rec, covering[g]), Some(&dst));
            }
        }
        let mut later = self.later.lock().unwrap_or_else(|e| e.into_inner());
        let ptr: *const Version<M> = &*new;
        later.push(new);
        self.current.store(ptr.cast_mut(), Ordering::Release);
        Ok(())
    }

    /// Number of times [`Table::regroup`] changed the table's groups.
    pub fn regroupings(&self) -> usize {
        self.later.lock().map_or(0, |l| l.len())
    }

    /// Whether no record is linked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Approximate bytes used by the records (before allocator overhead) and the indexes.
    pub fn memory_bytes(&self) -> usize {
        let v = self.v();
        let hash = v.hash.as_ref().map_or(0, HashIndex::memory_bytes);
        let ordered = (v.ordered.as_ref()).map_or(0, |o| o.memory_bytes(&crossbeam_epoch::pin()));
        self.len() * v.layout.size() + hash + ordered
    }
}

impl<M> Drop for Version<M> {
    fn drop(&mut self) {
        let guard = crossbeam_epoch::pin();
        let layout = self.layout;
        // SAFETY: the table is being dropped, so nobody else can reach its linked records; their
        // memory goes with the arena.
        let drop_meta = |addr| unsafe { RecordPtr::<M>::from_addr(addr).drop_meta(&layout) };
        match (&self.hash, &self.ordered) {
            (Some(hash), _) => hash.for_each(&guard, |_, addr| drop_meta(addr)),
            (None, Some(ordered)) => ordered.scan(0, u64::MAX, &guard, |_, addr| {
                drop_meta(addr);
                true
            }),
            (None, None) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::ColumnType;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn table(indexes: Indexes) -> Table<AtomicU64> {
        let schema = Schema::builder()
            .column("v", ColumnType::U64, 0)
            .build()
            .unwrap();
        let mut spec = TableSpec::new("t", schema, 4);
        spec.indexes = indexes;
        Table::new(0, spec)
    }

    #[test]
    fn insert_lookup_scan_unlink() {
        for indexes in [Indexes::HashAndOrdered, Indexes::Ordered] {
            insert_lookup_scan_unlink_with(table(indexes));
        }
    }

    fn insert_lookup_scan_unlink_with(t: Table<AtomicU64>) {
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

    #[test]
    fn a_regrouped_table_keeps_its_rows_and_indexes_and_takes_the_new_layout() {
        for indexes in [Indexes::Hash, Indexes::HashAndOrdered, Indexes::Ordered] {
            let schema = Schema::builder()
                .column("a", ColumnType::U64, 0)
                .column("b", ColumnType::Fixed(12), 0)
                .column("c", ColumnType::U64, 0)
                .build()
                .unwrap();
            let mut spec = TableSpec::new("t", schema.clone(), 4);
            spec.indexes = indexes;
            let t: Table<AtomicU64> = Table::new(0, spec);
            let guard = crossbeam_epoch::pin();
            let mut row = vec![0u64; schema.row_words()];
            for k in 0..100u64 {
                let mut b = crate::RowBuf::new(&schema, &mut row);
                b.set_u64(0, k);
                b.set_bytes(1, &[k as u8; 12]);
                b.set_u64(2, k * 7);
                t.insert_with(k, &guard, |_| AtomicU64::new(k + 1000), Some(&row));
            }
            let fine = schema.regrouped(&[1, 0, 1]).unwrap();
            let bad = Schema::builder()
                .column("a", ColumnType::U64, 0)
                .build()
                .unwrap();
            assert_eq!(
                t.regroup(bad, &guard, |_, _| true, |_, _| AtomicU64::new(0))
                    .unwrap_err(),
                SchemaError::ColumnsDiffer
            );
            t.regroup(
                fine.clone(),
                &guard,
                |_, r| r.meta(t.layout(), 0).load(Ordering::Relaxed) != 1013,
                |r, covering| {
                    assert_eq!(covering, 1);
                    AtomicU64::new(r.meta(t.layout(), 0).load(Ordering::Relaxed) + 1)
                },
            )
            .unwrap();
            assert_eq!(t.regroupings(), 1);
            assert_eq!(t.schema().groups().len(), 2);
            assert_eq!(t.len(), 99, "{indexes:?}");
            assert!(t.get(13, &guard).is_none());
            let r = t.get(42, &guard).unwrap();
            let mut img = vec![0u64; fine.row_words()];
            r.copy_words(t.layout(), 0, &mut img);
            let view = crate::RowView::new(&fine, &img);
            assert_eq!(
                (view.u64(0), view.bytes(1), view.u64(2)),
                (42, &[42u8; 12][..], 294)
            );
            for g in 0..2 {
                assert_eq!(r.meta(t.layout(), g).load(Ordering::Relaxed), 1043);
            }
        }
    }
}
