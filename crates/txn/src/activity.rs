use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;

const IDLE: u64 = u64::MAX;

/// The epoch in which each worker's running transaction started (Silo's epoch-based garbage
/// collection). A deleted record stays linked, as a tombstone, until every transaction that was
/// running when it was deleted has finished; only then may it leave the indexes. That keeps scans and
/// point misses from missing an insert-then-delete that happened while they ran (the ABA problem).
///
/// Each worker writes only its own cache line, twice per transaction.
pub struct Activity {
    slots: Box<[CachePadded<AtomicU64>]>,
    free: Mutex<Vec<usize>>,
    high: AtomicUsize,
}

impl Activity {
    /// Room for `n` workers at once.
    pub fn new(n: usize) -> Activity {
        Activity {
            slots: (0..n)
                .map(|_| CachePadded::new(AtomicU64::new(IDLE)))
                .collect(),
            free: Mutex::new((0..n).rev().collect()),
            high: AtomicUsize::new(0),
        }
    }

    /// Claims a slot for a new worker.
    pub fn register(&self) -> usize {
        let slot = self.free.lock().pop().unwrap_or_else(|| {
            panic!(
                "more than {} workers alive at once on one database",
                self.slots.len()
            )
        });
        self.high.fetch_max(slot + 1, Ordering::AcqRel);
        slot
    }

    /// Returns a worker's slot.
    pub fn release(&self, slot: usize) {
        self.slots[slot].store(IDLE, Ordering::Release);
        self.free.lock().push(slot);
    }

    /// Marks the slot's transaction as running since `epoch`, before it reads anything.
    #[inline]
    pub fn enter(&self, slot: usize, epoch: u64) {
        self.slots[slot].store(epoch, Ordering::SeqCst);
    }

    /// Marks the slot idle.
    #[inline]
    pub fn leave(&self, slot: usize) {
        self.slots[slot].store(IDLE, Ordering::Release);
    }

    /// The oldest epoch in which a running transaction started (`u64::MAX` if none runs).
    pub fn oldest(&self) -> u64 {
        let high = self.high.load(Ordering::Acquire);
        self.slots[..high]
            .iter()
            .map(|s| s.load(Ordering::SeqCst))
            .min()
            .unwrap_or(IDLE)
    }
}
