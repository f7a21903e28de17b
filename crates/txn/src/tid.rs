//! The TID word: one `u64` per column group holding a lock bit, status bits and the transaction id of
//! the version installed last (Silo §4.2). TIDs embed the global epoch in their high bits, so workers
//! choose them from local state without a shared counter.

use std::sync::atomic::{AtomicU64, Ordering, fence};

use crate::error::{Conflict, TxError, TxResult};

/// Set while a committing writer holds the group.
pub const LOCK: u64 = 1 << 63;
/// The record does not exist (never committed, or deleted); its TID is the deleting version.
pub const ABSENT: u64 = 1 << 62;
/// The record is being unlinked from its indexes; it stays locked and must be looked up again.
pub const UNLINKED: u64 = 1 << 61;
/// The group is split data in the current split phase (Doppel); the TID bits then hold the index of
/// its split entry instead of a TID, and every access other than the selected splittable operation
/// must wait for the next joined phase.
pub const SPLIT: u64 = 1 << 60;
/// Bits of the word that hold the TID.
pub const TID_MASK: u64 = SPLIT - 1;
/// The epoch occupies the TID bits above this shift; the sequence within the epoch the bits below.
pub const EPOCH_SHIFT: u32 = 32;

/// The largest epoch a TID can carry.
pub const MAX_EPOCH: u64 = TID_MASK >> EPOCH_SHIFT;

/// The TID held by a word.
#[inline]
pub const fn tid(word: u64) -> u64 {
    word & TID_MASK
}

/// The epoch a TID was chosen in.
#[inline]
pub const fn epoch_of(tid: u64) -> u64 {
    tid >> EPOCH_SHIFT
}

/// One group's TID word.
#[derive(Debug, Default)]
#[repr(transparent)]
pub struct TidWord(pub AtomicU64);

impl TidWord {
    /// A word holding `value`.
    pub const fn new(value: u64) -> TidWord {
        TidWord(AtomicU64::new(value))
    }

    /// The current word (acquire).
    #[inline]
    pub fn load(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// Locks the word if it is unlocked and equals `expected`. No waiting.
    #[inline]
    pub fn try_lock(&self, expected: u64) -> bool {
        expected & LOCK == 0
            && self
                .0
                .compare_exchange(
                    expected,
                    expected | LOCK,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    /// Publishes `word` (normally unlocking) with release order, so readers that see it see the data.
    #[inline]
    pub fn publish(&self, word: u64) {
        debug_assert!(
            self.0.load(Ordering::Relaxed) & LOCK != 0,
            "publish by the lock holder only"
        );
        self.0.store(word, Ordering::Release);
    }
}

/// Spins a reader waits on a group being installed before it aborts (a lock is held only while its
/// writer commits, so a long wait means the writer was descheduled).
const READ_SPIN_LIMIT: u32 = 2_000;

impl TidWord {
    /// Silo's optimistic read: waits out a committing writer, runs `copy(word)` (which copies the
    /// group's data, and whatever else must be seen with this version), and returns the word, which
    /// held still across the copy. A retired word, or a writer that holds on too long, is a conflict.
    #[inline]
    pub fn read_stable(&self, copy: impl FnMut(u64)) -> TxResult<u64> {
        self.read_stable_unless(0, copy)
    }

    /// [`TidWord::read_stable`], except that a word with a bit of `stop` set is returned at once,
    /// without copying (Doppel's split records): the check shares the branch of the lock check.
    #[inline(always)]
    pub fn read_stable_unless(&self, stop: u64, mut copy: impl FnMut(u64)) -> TxResult<u64> {
        let mut spins = 0;
        loop {
            let before = self.load();
            if before & (LOCK | stop) != 0 {
                if before & stop != 0 {
                    return Ok(before);
                }
                if before & UNLINKED != 0 || spins >= READ_SPIN_LIMIT {
                    return Err(TxError::Conflict(Conflict::ReadLocked));
                }
                spins += 1;
                std::hint::spin_loop();
                continue;
            }
            copy(before);
            fence(Ordering::Acquire);
            if self.0.load(Ordering::Relaxed) == before {
                return Ok(before);
            }
        }
    }

    /// Stores `word` with release order, for protocols without locks (no-CC).
    #[inline]
    pub fn store(&self, word: u64) {
        self.0.store(word, Ordering::Release);
    }

    /// Marks a deleted, unlocked group (holding exactly `expected`) as being unlinked: locked for
    /// good, so every reader or writer that still finds the record looks it up again.
    #[inline]
    pub fn retire(&self, expected: u64) -> bool {
        self.0
            .compare_exchange(
                expected,
                expected | LOCK | UNLINKED,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
    }
}

/// Metadata that contains a TID word: the commit steps shared by several protocols (inserts, install,
/// unlinking) work through it.
pub trait TidMeta: Send + Sync + 'static {
    /// The group's TID word.
    fn tid(&self) -> &TidWord;

    /// Whether no transaction holds the group in a way the TID word does not show (a shared lock).
    /// Asked after the word was retired, so that a record is never unlinked under a reader.
    fn unshared(&self) -> bool {
        true
    }

    /// The latest logical time up to which readers have claimed the group's version (TicToc's read
    /// timestamp); 0 for protocols without one. Kept per table when a record is unlinked, so a later
    /// insert of the key is ordered after those readers.
    fn read_ts(&self) -> u64 {
        0
    }

    /// Raises the read timestamp to at least `ts` (protocols without one ignore it): a record
    /// copied to new column groups keeps the claims readers made on its old groups.
    fn raise_read_ts(&self, _ts: u64) {}
}

impl TidMeta for TidWord {
    #[inline]
    fn tid(&self) -> &TidWord {
        self
    }
}
