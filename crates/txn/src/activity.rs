use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;

const IDLE: u64 = u64::MAX;
/// An idle slot the phase coordinator is acting for; its worker waits to enter.
const CLAIMED: u64 = u64::MAX - 1;

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

    /// Returns a worker's slot (idle: outside any transaction).
    pub fn release(&self, slot: usize) {
        self.free.lock().push(slot);
    }

    /// Marks the slot's transaction as running since `epoch`, before it reads anything; waits while
    /// the phase coordinator holds the slot.
    #[inline]
    pub fn enter(&self, slot: usize, epoch: u64) {
        while self.slots[slot]
            .compare_exchange(IDLE, epoch, Ordering::SeqCst, Ordering::Relaxed)
            .is_err()
        {
            debug_assert_eq!(self.slots[slot].load(Ordering::Relaxed), CLAIMED);
            std::thread::yield_now();
        }
    }

    /// Claims an idle slot so its worker cannot enter a transaction until [`Activity::unclaim`]:
    /// the phase coordinator then acts for the worker. False if the slot is busy.
    pub fn try_claim(&self, slot: usize) -> bool {
        self.slots[slot]
            .compare_exchange(IDLE, CLAIMED, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    }

    /// Ends a claim.
    pub fn unclaim(&self, slot: usize) {
        self.slots[slot].store(IDLE, Ordering::SeqCst);
    }

    /// One past the highest slot ever handed out.
    pub fn high(&self) -> usize {
        self.high.load(Ordering::Acquire)
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
            .filter(|&e| e != CLAIMED)
            .min()
            .unwrap_or(IDLE)
    }
}
