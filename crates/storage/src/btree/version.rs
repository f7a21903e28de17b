//! The version lock of a B+-tree node, for optimistic lock coupling (Leis et al., "Optimistic Lock
//! Coupling", 2019): readers note the version, read, and check the version is unchanged; writers
//! upgrade a noted version to the lock, so a writer never waits and a reader never writes.

use crate::sync::{AtomicU64, Ordering, fence};

/// Set while a writer holds the lock.
const LOCKED: u64 = 0b10;
/// Set for good when the node is unlinked from the tree: whoever still reaches it starts over.
const OBSOLETE: u64 = 0b01;
/// What unlocking adds: clears `LOCKED` and counts one more version.
const NEXT: u64 = 0b100;

/// A node's version word: a counter of writes above the two flag bits.
pub(crate) struct VersionLock(AtomicU64);

/// An optimistic step saw a concurrent write (or a lock it may not wait for) and must start over.
#[derive(Debug)]
pub(crate) struct Restart;

impl VersionLock {
    /// The lock of a new node: unlocked, first version.
    pub(crate) fn new() -> VersionLock {
        VersionLock(AtomicU64::new(0))
    }

    /// The current version, to be checked after reading; a locked or obsolete node restarts.
    #[inline]
    pub(crate) fn read(&self) -> Result<u64, Restart> {
        let v = self.0.load(Ordering::Acquire);
        if v & (LOCKED | OBSOLETE) == 0 {
            Ok(v)
        } else {
            Err(Restart)
        }
    }

    /// Whether everything read since [`VersionLock::read`] returned `v` is a consistent snapshot.
    #[inline]
    pub(crate) fn check(&self, v: u64) -> Result<(), Restart> {
        // Orders the relaxed reads of the node before the version's second load.
        fence(Ordering::Acquire);
        if self.0.load(Ordering::Relaxed) == v {
            Ok(())
        } else {
            Err(Restart)
        }
    }

    /// Takes the write lock if the version is still `v` (nothing changed since it was read).
    #[inline]
    pub(crate) fn upgrade(&self, v: u64) -> Result<(), Restart> {
        self.0
            .compare_exchange(v, v | LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .map_err(|_| Restart)?;
        // A reader that sees any write made under the lock must also see the lock taken.
        fence(Ordering::Release);
        Ok(())
    }

    /// Releases the lock taken by `upgrade(v)`, publishing the next version.
    #[inline]
    pub(crate) fn unlock(&self, v: u64) {
        self.0.store(v + NEXT, Ordering::Release);
    }

    /// Releases the lock taken by `upgrade(v)` and marks the node unlinked.
    #[inline]
    pub(crate) fn unlock_obsolete(&self, v: u64) {
        self.0.store((v + NEXT) | OBSOLETE, Ordering::Release);
    }
}

/// A write lock held on a node, released (with the next version) when dropped, so that a panic in
/// code run under it does not leave the node locked.
pub(super) struct Locked<'a> {
    lock: &'a VersionLock,
    version: u64,
}

impl<'a> Locked<'a> {
    /// Takes the write lock if the version is still `version`.
    #[inline]
    pub(super) fn upgrade(lock: &'a VersionLock, version: u64) -> Result<Locked<'a>, Restart> {
        lock.upgrade(version)?;
        Ok(Locked { lock, version })
    }
}

impl Drop for Locked<'_> {
    #[inline]
    fn drop(&mut self) {
        self.lock.unlock(self.version);
    }
}
