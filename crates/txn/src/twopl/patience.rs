//! How long a parked 2PL waiter waits before it presumes a deadlock (`2pl`'s timeout-based deadlock
//! resolution).
//!
//! The wait is measured from the last *progress* the waiter saw on the lock's group, not from its
//! first park: progress is a change of the group's TID word other than the lock bit, that is, a
//! holder committed a new version (or an insert or delete). On a hot record a waiter that loses the
//! race for the lock at every release keeps seeing commits, and waits on instead of aborting
//! although no deadlock exists. A deadlock still ends within [`DEADLOCK_TIMEOUT`] of forming: every
//! member of a cycle waits for a lock held by another member, and a held group cannot get a new
//! version (its exclusive holder is blocked; writers cannot commit past its shared holders), while an
//! outsider that takes and drops the lock bit in between puts the old word back.

use std::time::Instant;

use crate::tid::LOCK;

use super::DEADLOCK_TIMEOUT;

/// A waiter's deadline, moved forward whenever the group's holders make progress.
#[derive(Default)]
pub(super) struct Patience {
    /// When the wait ends in an abort; set at the first park.
    deadline: Option<Instant>,
    /// The group's word, less the lock bit, when the deadline was last set.
    seen: u64,
}

impl Patience {
    /// Whether a waiter that looks at `now` at a group whose word is `word` has waited too long;
    /// progress since its last look restarts the wait.
    pub(super) fn expired(&mut self, now: Instant, word: u64) -> bool {
        let version = word & !LOCK;
        match self.deadline {
            Some(deadline) if version == self.seen => now >= deadline,
            _ => {
                self.seen = version;
                self.deadline = Some(now + DEADLOCK_TIMEOUT);
                false
            }
        }
    }

    /// The instant a park started now may sleep until.
    pub(super) fn deadline(&self) -> Instant {
        self.deadline.expect("set by `expired` before a park")
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const WORD: u64 = 0x1234;

    #[test]
    fn a_static_word_times_out_after_the_deadlock_timeout() {
        let start = Instant::now();
        let mut p = Patience::default();
        assert!(!p.expired(start, WORD | LOCK));
        assert_eq!(p.deadline(), start + DEADLOCK_TIMEOUT);
        let just_before = start + DEADLOCK_TIMEOUT - Duration::from_nanos(1);
        assert!(!p.expired(just_before, WORD | LOCK));
        assert!(p.expired(start + DEADLOCK_TIMEOUT, WORD | LOCK));
    }

    #[test]
    fn commits_by_the_holders_restart_the_wait() {
        let start = Instant::now();
        let mut p = Patience::default();
        let step = DEADLOCK_TIMEOUT * 3 / 4;
        // A hundred holders one after another, each holding longer than half the timeout: the
        // waiter has waited 75 timeouts in all, but never one timeout without a new version.
        for i in 0..100u64 {
            let now = start + step * i as u32;
            assert!(!p.expired(now, (WORD + i) | LOCK), "holder {i}");
        }
        let last = start + step * 99;
        assert!(p.expired(last + DEADLOCK_TIMEOUT, (WORD + 99) | LOCK));
    }

    #[test]
    fn taking_and_dropping_the_lock_bit_is_not_progress() {
        let start = Instant::now();
        let mut p = Patience::default();
        assert!(!p.expired(start, WORD | LOCK));
        // An outsider that locked and aborted puts the old word back.
        assert!(!p.expired(start + DEADLOCK_TIMEOUT / 2, WORD));
        assert!(p.expired(start + DEADLOCK_TIMEOUT, WORD | LOCK));
    }
}
