//! Parking for 2PL's lock waiters: a waiter that has spun for a while sleeps until the lock it
//! wants is released, so that a descheduled holder gets the core back instead of waiters burning
//! their slices (issue 38).
//!
//! A group's reader count doubles as its "somebody is parked" flag: [`PARKED`] is one bit of it. A
//! waiter sets the bit with a read-modify-write before it looks at the lock one last time, under the
//! parking lot's lock, and sleeps only if the lock is still held and the bit still set (a waker
//! clears it before waking the lot, so a waiter that finds it cleared may have missed that wake and
//! sets it again). Every release is followed by a
//! read-modify-write of the same count (the shared holder's decrement, or [`released_exclusive`]
//! after an exclusive holder's publish), so the two are ordered: either the releaser's operation
//! comes later and returns the bit, and it wakes the group's sleepers, or the waiter's comes later,
//! synchronises with the release through the count's chain of read-modify-writes, and its last look
//! sees the lock free. A release with nobody parked pays one branch on a value it already has; only
//! a purely exclusive holder pays a read-modify-write, on a cache line its publish just wrote.
//!
//! The atomics and the parking lot come from the parent's `sync` module: `parking_lot_core` keyed
//! by the count's address in the engine, a model of it in the `shuttle` test that checks the
//! protocol loses no wake-up.

use std::time::Instant;

use super::sync::{AtomicU32, AtomicU64, Ordering, park_until, unpark_all};

/// Bit of a group's reader count set while a waiter may be parked on the group.
pub(crate) const PARKED: u32 = 1 << 31;

/// The number of shared holders a reader count stands for.
#[inline(always)]
pub(crate) const fn holders(readers: u32) -> u32 {
    readers & !PARKED
}

/// Parks the calling waiter on the group of TID word `word` and reader count `readers` until a
/// release wakes it or `deadline` passes, unless `blocked(word, holders)` is already false when
/// looked at after the flag is set. Returns without a promise: the caller looks at the lock again.
pub(crate) fn park(
    word: &AtomicU64,
    readers: &AtomicU32,
    blocked: impl Fn(u64, u32) -> bool,
    deadline: Instant,
) {
    readers.fetch_or(PARKED, Ordering::AcqRel);
    park_until(
        key(readers),
        || {
            // A waker clears the flag before it wakes the lot: a waiter that finds it cleared
            // may have been counted in a wake that came before its sleep, so it looks again.
            let r = readers.load(Ordering::Acquire);
            r & PARKED != 0 && blocked(word.load(Ordering::Acquire), holders(r))
        },
        deadline,
    );
}

/// The releaser's side, given the count `prev` returned by the read-modify-write that followed its
/// release: wakes the group's sleepers if one was flagged.
#[inline(always)]
pub(crate) fn after_release(readers: &AtomicU32, prev: u32) {
    if prev & PARKED != 0 {
        wake(readers);
    }
}

/// Completes the release of an exclusive lock whose holder holds no shared count on the group (it
/// must follow the publish of the unlocked word).
#[inline(always)]
pub(crate) fn released_exclusive(readers: &AtomicU32) {
    after_release(readers, readers.fetch_or(0, Ordering::AcqRel));
}

/// Clears the flag and wakes every sleeper of the group; those still blocked set it again.
#[cold]
fn wake(readers: &AtomicU32) {
    readers.fetch_and(!PARKED, Ordering::AcqRel);
    unpark_all(key(readers));
}

fn key(readers: &AtomicU32) -> usize {
    readers as *const AtomicU32 as usize
}
