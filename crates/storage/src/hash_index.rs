use std::sync::Arc;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use crossbeam_epoch::Guard;
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;

use crate::huge_pieces::{HugePieces, Piece};
use crate::mapping::Mapping;

const EMPTY: usize = 0;
const TOMBSTONE: usize = 1;
const SHARD_BITS: u32 = 6;
const SHARDS: usize = 1 << SHARD_BITS;

/// A primary hash index from 64-bit keys to non-null addresses (of records).
///
/// Open addressing with linear probing, split into shards by the top bits of the hash. Lookups take no
/// lock and write nothing; inserts and removals take their shard's mutex, and a shard grows by building
/// a new slot array and retiring the old one through the epoch guard. Values are addresses greater
/// than 1 (0 and 1 mark empty and removed slots).
pub struct HashIndex {
    shards: Box<[CachePadded<Shard>]>,
    /// Huge pages the shards' mid-sized slot arrays are carved from.
    pieces: Arc<HugePieces>,
}

struct Shard {
    slots: AtomicPtr<Slots>,
    writer: Mutex<Counts>,
    /// The next slot array, zeroed and touched by the background thread ahead of the shard's growth.
    spare: Arc<Mutex<Option<SlotMemory>>>,
}

#[derive(Default)]
struct Counts {
    live: usize,
    used: usize,
    /// A spare slot array was asked for since the last growth.
    spare_asked: bool,
}

/// Slot arrays at least this large are mapped (pieces of huge pages up to a huge page, their own
/// mapping beyond), and prepared ahead of growth by the background thread.
const MAPPED_BYTES: usize = crate::huge_pieces::MIN_PIECE;

struct Slots {
    mask: usize,
    /// `mask + 1` slots, in `_mem`.
    base: *const Slot,
    _mem: SlotMemory,
}

/// Where a slot array lives. An all-zero slot is empty, so zeroed memory needs no initialising.
enum SlotMemory {
    Boxed(Box<[Slot]>),
    Piece(Piece),
    Mapped(Mapping),
}

impl SlotMemory {
    /// Zeroed memory for `bytes` of slots (at least [`MAPPED_BYTES`]), every page faulted in if
    /// `touch`.
    fn mapped(bytes: usize, pieces: &Arc<HugePieces>, touch: bool) -> SlotMemory {
        match () {
            _ if HugePieces::fits(bytes) => SlotMemory::Piece(pieces.take(bytes, touch)),
            _ if touch => SlotMemory::Mapped(Mapping::touched(bytes)),
            _ => SlotMemory::Mapped(Mapping::new(bytes)),
        }
    }

    fn len(&self) -> usize {
        match self {
            SlotMemory::Boxed(b) => std::mem::size_of_val(&**b),
            SlotMemory::Piece(p) => p.len(),
            SlotMemory::Mapped(m) => m.len(),
        }
    }

    fn base(&self) -> *const Slot {
        match self {
            SlotMemory::Boxed(b) => b.as_ptr(),
            SlotMemory::Piece(p) => p.addr() as *const Slot,
            SlotMemory::Mapped(m) => m.addr() as *const Slot,
        }
    }
}

// SAFETY: `base` points into `_mem`, owned by the `Slots`; slots are atomics.
unsafe impl Send for Slots {}
unsafe impl Sync for Slots {}

struct Slot {
    key: AtomicU64,
    value: AtomicUsize,
}

#[inline]
fn hash(key: u64) -> u64 {
    let mut h = key ^ (key >> 33);
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// Slots in an array of at least `cap` (a power of two at least 16).
fn slot_count(cap: usize) -> usize {
    cap.next_power_of_two().max(16)
}

impl Slots {
    /// An empty array of at least `cap` slots, in `spare` if that is the right size.
    fn with_capacity(
        cap: usize,
        spare: Option<SlotMemory>,
        pieces: &Arc<HugePieces>,
    ) -> Box<Slots> {
        let cap = slot_count(cap);
        let bytes = cap * std::mem::size_of::<Slot>();
        let mem = match spare {
            Some(m) if m.len() == bytes => m,
            _ if bytes >= MAPPED_BYTES => SlotMemory::mapped(bytes, pieces, false),
            _ => SlotMemory::Boxed(
                (0..cap)
                    .map(|_| Slot {
                        key: AtomicU64::new(0),
                        value: AtomicUsize::new(EMPTY),
                    })
                    .collect(),
            ),
        };
        Box::new(Slots {
            mask: cap - 1,
            base: mem.base(),
            _mem: mem,
        })
    }

    /// Slot `i` (masked into the array).
    #[inline]
    fn slot(&self, i: usize) -> &Slot {
        // SAFETY: `i & mask` is below the array's length; zeroed memory is valid empty slots.
        unsafe { &*self.base.add(i & self.mask) }
    }

    /// Every slot.
    fn all(&self) -> &[Slot] {
        // SAFETY: `base` holds `mask + 1` slots.
        unsafe { std::slice::from_raw_parts(self.base, self.mask + 1) }
    }

    #[inline]
    fn find(&self, key: u64, h: u64) -> Option<&Slot> {
        let mut i = h as usize & self.mask;
        loop {
            let slot = self.slot(i);
            let v = slot.value.load(Ordering::Acquire);
            if v == EMPTY {
                return None;
            }
            if v != TOMBSTONE && slot.key.load(Ordering::Relaxed) == key {
                return Some(slot);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Places a key known to be absent; the caller holds the shard lock and ensured there is room.
    fn place(&self, key: u64, h: u64, value: usize) {
        let mut i = h as usize & self.mask;
        loop {
            let slot = self.slot(i);
            if slot.value.load(Ordering::Relaxed) == EMPTY {
                slot.key.store(key, Ordering::Relaxed);
                slot.value.store(value, Ordering::Release);
                return;
            }
            i = (i + 1) & self.mask;
        }
    }
}

impl HashIndex {
    /// An index sized for about `capacity` keys without growing.
    pub fn with_capacity(capacity: usize) -> HashIndex {
        let per_shard = (capacity / SHARDS + 1) * 3 / 2;
        let pieces = Arc::new(HugePieces::default());
        let shards = (0..SHARDS)
            .map(|_| {
                let slots = Slots::with_capacity(per_shard, None, &pieces);
                CachePadded::new(Shard {
                    slots: AtomicPtr::new(Box::into_raw(slots)),
                    writer: Mutex::new(Counts::default()),
                    spare: Arc::new(Mutex::new(None)),
                })
            })
            .collect();
        HashIndex { shards, pieces }
    }

    #[inline]
    fn shard(&self, h: u64) -> &Shard {
        &self.shards[(h >> (64 - SHARD_BITS)) as usize]
    }

    /// The value stored under `key`, if any.
    #[inline]
    pub fn get(&self, key: u64, _guard: &Guard) -> Option<usize> {
        let h = hash(key);
        // SAFETY: slot arrays are retired through the epoch, and `_guard` keeps this one alive.
        let slots = unsafe { &*self.shard(h).slots.load(Ordering::Acquire) };
        let v = slots.find(key, h)?.value.load(Ordering::Acquire);
        (v != TOMBSTONE).then_some(v)
    }

    /// Starts loading the slots where a lookup of `key` begins into the cache, so that lookups of
    /// several keys overlap their cache misses: the first slot's line and the next, since a probe for
    /// an absent key (an insert's) runs on past occupied slots, about eight of them near the largest
    /// load factor.
    #[inline]
    pub fn prefetch(&self, key: u64, _guard: &Guard) {
        let h = hash(key);
        // SAFETY: as in `get`; the slot index is masked into the array.
        let slots = unsafe { &*self.shard(h).slots.load(Ordering::Acquire) };
        let first = slots.slot(h as usize) as *const Slot as *const u8;
        crate::prefetch::line(first);
        // A prefetch never faults, even past the end of the array.
        crate::prefetch::line(first.wrapping_add(64));
    }

    /// Runs `f` with exclusive insert/remove rights over `key`'s shard; `f` receives the current value
    /// and may return a new value to insert when there was none. Returns what `f` returned.
    pub fn upsert_with<R>(
        &self,
        key: u64,
        guard: &Guard,
        f: impl FnOnce(Option<usize>) -> (Option<usize>, R),
    ) -> R {
        let h = hash(key);
        let shard = self.shard(h);
        let mut counts = shard.writer.lock();
        // SAFETY: under the shard lock the slot array cannot be replaced.
        let slots = unsafe { &*shard.slots.load(Ordering::Acquire) };
        let current = slots
            .find(key, h)
            .map(|s| s.value.load(Ordering::Acquire))
            .filter(|&v| v != TOMBSTONE);
        let (insert, result) = f(current);
        if let Some(value) = insert {
            debug_assert!(current.is_none() && value > TOMBSTONE);
            let slots = if (counts.used + 1) * 4 > (slots.mask + 1) * 3 {
                counts.used = counts.live;
                counts.spare_asked = false;
                self.grow(shard, slots, counts.live + 1, guard)
            } else {
                slots
            };
            slots.place(key, h, value);
            counts.used += 1;
            counts.live += 1;
            self.ask_spare(shard, &mut counts, slots.mask + 1);
        }
        result
    }

    /// Once a large shard is half full, asks the background thread for its next slot array (the size
    /// growth will want if nothing is removed meanwhile), so that growing does not fault in fresh
    /// pages on the inserting thread.
    #[inline]
    fn ask_spare(&self, shard: &Shard, counts: &mut Counts, cap: usize) {
        let bytes = 2 * cap * std::mem::size_of::<Slot>();
        if counts.spare_asked || counts.used * 2 < cap || bytes < MAPPED_BYTES {
            return;
        }
        counts.spare_asked = true;
        let (spare, pieces) = (shard.spare.clone(), self.pieces.clone());
        crate::prefault::submit(Box::new(move || {
            let m = SlotMemory::mapped(bytes, &pieces, true);
            *spare.lock() = Some(m);
        }));
    }

    /// Removes `key` if it maps to `value` and `decide()` (run under the shard lock, while the mapping
    /// is known to hold) agrees; `also` runs under the same lock after the removal. Returns whether it
    /// removed.
    pub fn remove_if(
        &self,
        key: u64,
        value: usize,
        _guard: &Guard,
        decide: impl FnOnce() -> bool,
        also: impl FnOnce(),
    ) -> bool {
        let h = hash(key);
        let shard = self.shard(h);
        let mut counts = shard.writer.lock();
        // SAFETY: under the shard lock the slot array cannot be replaced.
        let slots = unsafe { &*shard.slots.load(Ordering::Acquire) };
        match slots.find(key, h) {
            Some(slot) if slot.value.load(Ordering::Relaxed) == value && decide() => {
                slot.value.store(TOMBSTONE, Ordering::Release);
                counts.live -= 1;
                also();
                true
            }
            _ => false,
        }
    }

    fn grow<'g>(&self, shard: &Shard, old: &Slots, live: usize, guard: &'g Guard) -> &'g Slots {
        let spare = shard.spare.lock().take();
        let fresh = Slots::with_capacity(live * 2, spare, &self.pieces);
        for slot in old.all() {
            let v = slot.value.load(Ordering::Relaxed);
            if v > TOMBSTONE {
                let k = slot.key.load(Ordering::Relaxed);
                fresh.place(k, hash(k), v);
            }
        }
        let fresh = Box::into_raw(fresh);
        let old = shard.slots.swap(fresh, Ordering::AcqRel);
        // SAFETY: `old` came from Box::into_raw and is unreachable for guards pinned from now on.
        unsafe { guard.defer_unchecked(move || drop(Box::from_raw(old))) };
        // SAFETY: `fresh` stays alive at least as long as the guard.
        unsafe { &*fresh }
    }

    /// Calls `f` on every stored value (not concurrently with removals of the caller's own making).
    pub fn for_each(&self, guard: &Guard, mut f: impl FnMut(u64, usize)) {
        let _ = guard;
        for shard in self.shards.iter() {
            let _w = shard.writer.lock();
            // SAFETY: under the shard lock the slot array cannot be replaced.
            let slots = unsafe { &*shard.slots.load(Ordering::Acquire) };
            for slot in slots.all() {
                let v = slot.value.load(Ordering::Acquire);
                if v > TOMBSTONE {
                    f(slot.key.load(Ordering::Relaxed), v);
                }
            }
        }
    }

    /// Number of shards: the parts [`HashIndex::for_each_in_shard`] visits one at a time.
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// Calls `f` on every value stored in shard `shard` (under that shard's writer lock: `f` must
    /// not wait for anything an inserter may hold).
    pub fn for_each_in_shard(&self, shard: usize, guard: &Guard, mut f: impl FnMut(u64, usize)) {
        let _ = guard;
        let shard = &self.shards[shard];
        let _w = shard.writer.lock();
        // SAFETY: under the shard lock the slot array cannot be replaced.
        let slots = unsafe { &*shard.slots.load(Ordering::Acquire) };
        for slot in slots.all() {
            let v = slot.value.load(Ordering::Acquire);
            if v > TOMBSTONE {
                f(slot.key.load(Ordering::Relaxed), v);
            }
        }
    }

    /// Number of keys stored.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.writer.lock().live).sum()
    }

    /// Whether no key is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held by the slot arrays.
    pub fn memory_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let _w = s.writer.lock();
                // SAFETY: under the shard lock the slot array cannot be replaced.
                let slots = unsafe { &*s.slots.load(Ordering::Acquire) };
                (slots.mask + 1) * std::mem::size_of::<Slot>()
            })
            .sum()
    }
}

impl Drop for HashIndex {
    fn drop(&mut self) {
        for shard in self.shards.iter() {
            // SAFETY: we own the index exclusively; the pointer came from Box::into_raw.
            unsafe { drop(Box::from_raw(shard.slots.load(Ordering::Relaxed))) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn insert_get_remove_and_grow() {
        let idx = HashIndex::with_capacity(10);
        let guard = crossbeam_epoch::pin();
        let mut model = HashMap::new();
        for i in 0..20_000u64 {
            let k = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let v = (i as usize + 2) * 8;
            idx.upsert_with(k, &guard, |cur| {
                assert!(cur.is_none());
                (Some(v), ())
            });
            model.insert(k, v);
            if i % 3 == 0 {
                assert!(idx.remove_if(k, v, &guard, || true, || ()));
                model.remove(&k);
            }
        }
        assert_eq!(idx.len(), model.len());
        for (k, v) in &model {
            assert_eq!(idx.get(*k, &guard), Some(*v));
        }
        assert_eq!(idx.get(12345, &guard), None);
        let mut seen = 0;
        idx.for_each(&guard, |k, v| {
            assert_eq!(model[&k], v);
            seen += 1;
        });
        assert_eq!(seen, model.len());
    }

    #[test]
    fn large_shards_grow_into_mapped_and_prepared_arrays() {
        let idx = HashIndex::with_capacity(1);
        let guard = crossbeam_epoch::pin();
        let n = 1_500_000u64;
        for k in 0..n {
            idx.upsert_with(k, &guard, |cur| {
                assert!(cur.is_none());
                (Some(k as usize * 8 + 8), ())
            });
            if k % 100_000 == 0 {
                // Give the background thread a chance to prepare the next arrays.
                std::thread::yield_now();
            }
        }
        assert_eq!(idx.len(), n as usize);
        assert!(idx.memory_bytes() >= SHARDS * MAPPED_BYTES);
        // About 23K keys a shard: 1 MiB arrays, carved from huge pages.
        assert!(idx.pieces.mapped_bytes() >= idx.memory_bytes());
        assert!((0..n).all(|k| idx.get(k, &guard) == Some(k as usize * 8 + 8)));
    }

    #[test]
    fn readers_see_every_key_while_writers_grow_the_index() {
        let idx = HashIndex::with_capacity(1);
        std::thread::scope(|s| {
            s.spawn(|| {
                for k in 0..50_000u64 {
                    let guard = crossbeam_epoch::pin();
                    idx.upsert_with(k, &guard, |_| (Some(k as usize * 8 + 8), ()));
                }
            });
            s.spawn(|| {
                for _ in 0..20 {
                    let guard = crossbeam_epoch::pin();
                    let mut found = 0;
                    for k in 0..50_000u64 {
                        if let Some(v) = idx.get(k, &guard) {
                            assert_eq!(v, k as usize * 8 + 8);
                            found += 1;
                        }
                    }
                    assert!(found <= 50_000);
                }
            });
        });
        let guard = crossbeam_epoch::pin();
        assert!((0..50_000u64).all(|k| idx.get(k, &guard).is_some()));
    }
}
