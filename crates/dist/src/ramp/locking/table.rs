//! The lock table of the lock-based baselines: shared and exclusive locks per item, FIFO waiters.
//!
//! Clients request locks one at a time in key order, so no wait-for cycle can form and no baseline
//! deadlocks; the FIFO queue keeps writers from starving behind a stream of readers.
//!
//! Messages may be lost and resent, so every request is idempotent: a holder asking again is granted
//! again, a waiter asking again keeps its place, and an owner that has released its locks here is
//! remembered for one lease so a late copy of its request cannot lock anything. A lock whose holder
//! stays silent past the lease (a crashed client) is taken back; a client cut off for longer than the
//! lease loses the isolation its locks gave, as with any lease.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use crate::ramp::expiring::Expiring;
use crate::ramp::msg::{Key, LockMode, Ts};
use phasedb_net::Addr;

/// A lock request: who asked, and how to answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiter {
    /// The client endpoint (or proxy) to answer.
    pub from: Addr,
    /// Its request id.
    pub rid: u64,
    /// The item.
    pub key: Key,
    /// Requested mode.
    pub mode: LockMode,
    /// The transaction.
    pub owner: Ts,
}

/// A granted lock: its owner and when it was granted (the lease runs from then).
#[derive(Clone, Copy, Debug)]
struct Holder {
    owner: Ts,
    since: u64,
}

#[derive(Default, Debug)]
struct LockState {
    writer: Option<Holder>,
    readers: Vec<Holder>,
    queue: VecDeque<Waiter>,
}

impl LockState {
    fn grantable(&self, w: &Waiter) -> bool {
        let writer_ok = self.writer.is_none_or(|h| h.owner == w.owner);
        match w.mode {
            LockMode::Read | LockMode::ShortRead => writer_ok,
            LockMode::Write => writer_ok && self.readers.iter().all(|r| r.owner == w.owner),
        }
    }

    /// True when `w`'s owner already holds a lock at least as strong as the one it asks for.
    fn held(&self, w: &Waiter) -> bool {
        let writes = self.writer.is_some_and(|h| h.owner == w.owner);
        let reads = self.readers.iter().any(|r| r.owner == w.owner);
        match w.mode {
            LockMode::Write => writes,
            LockMode::Read => writes || reads,
            LockMode::ShortRead => false,
        }
    }

    fn take(&mut self, w: &Waiter, now: u64) {
        let h = Holder {
            owner: w.owner,
            since: now,
        };
        match w.mode {
            LockMode::ShortRead => {}
            LockMode::Read => self.readers.push(h),
            LockMode::Write => self.writer = Some(h),
        }
    }

    fn release(&mut self, owner: Ts) {
        if self.writer.is_some_and(|h| h.owner == owner) {
            self.writer = None;
        }
        self.readers.retain(|r| r.owner != owner);
    }

    /// Grants the waiters at the head of the queue that no longer conflict, in order.
    fn grant_queued(&mut self, now: u64, granted: &mut Vec<Waiter>) {
        while let Some(w) = self.queue.front() {
            if !self.grantable(w) {
                break;
            }
            let w = self.queue.pop_front().expect("front exists");
            self.take(&w, now);
            granted.push(w);
        }
    }

    fn idle(&self) -> bool {
        self.writer.is_none() && self.readers.is_empty() && self.queue.is_empty()
    }
}

/// Every item's lock on one server.
pub struct LockTable {
    locks: FxHashMap<Key, LockState>,
    lease: u64,
    /// Owners that released their locks here; forgotten after one lease.
    released: Expiring<Ts, ()>,
}

impl LockTable {
    /// An empty table whose locks are taken back after `lease` ns without release.
    pub fn new(lease: u64) -> Self {
        LockTable {
            locks: FxHashMap::default(),
            lease,
            released: Expiring::new(lease),
        }
    }

    /// Grants `w` now (returned) or queues it behind earlier requests. A repeated request is granted
    /// again if held, keeps its place if queued, and is ignored once its owner has released.
    pub fn acquire(&mut self, w: Waiter, now: u64) -> Option<Waiter> {
        if self.released.contains_key(&w.owner) {
            return None;
        }
        let st = self.locks.entry(w.key).or_default();
        if st.held(&w) {
            return Some(w);
        }
        if let Some(q) = st.queue.iter_mut().find(|q| q.owner == w.owner) {
            *q = w;
            return None;
        }
        if st.queue.is_empty() && st.grantable(&w) {
            st.take(&w, now);
            if st.idle() {
                self.locks.remove(&w.key);
            }
            Some(w)
        } else {
            st.queue.push_back(w);
            None
        }
    }

    /// Releases `owner`'s locks on `keys`; returns the waiters granted as a result, in order.
    pub fn release(&mut self, keys: &[Key], owner: Ts, now: u64) -> Vec<Waiter> {
        if keys.is_empty() {
            return Vec::new();
        }
        self.remember_released(owner, now);
        let mut granted = Vec::new();
        for key in keys {
            let Some(st) = self.locks.get_mut(key) else {
                continue;
            };
            st.release(owner);
            st.queue.retain(|q| q.owner != owner);
            st.grant_queued(now, &mut granted);
            if st.idle() {
                self.locks.remove(key);
            }
        }
        granted
    }

    /// Restarts the lease of `owner`'s locks on `keys` (a live holder that is still waiting).
    pub fn renew(&mut self, keys: &[Key], owner: Ts, now: u64) {
        for key in keys {
            let Some(st) = self.locks.get_mut(key) else {
                continue;
            };
            let holders = st.writer.iter_mut().chain(st.readers.iter_mut());
            for h in holders.filter(|h| h.owner == owner) {
                h.since = now;
            }
        }
    }

    /// Takes back every lock held longer than the lease and forgets released owners older than it;
    /// returns the number of locks taken back and the waiters granted as a result.
    pub fn expire(&mut self, now: u64) -> (u64, Vec<Waiter>) {
        self.released.expire(now);
        let lease = self.lease;
        let stale = |h: &Holder| h.since + lease <= now;
        let mut expired: Vec<Ts> = Vec::new();
        let mut granted = Vec::new();
        self.locks.retain(|_, st| {
            if let Some(h) = st.writer.filter(|h| stale(h)) {
                expired.push(h.owner);
                st.writer = None;
            }
            st.readers.retain(|r| {
                if stale(r) {
                    expired.push(r.owner);
                }
                !stale(r)
            });
            st.grant_queued(now, &mut granted);
            !st.idle()
        });
        for &owner in &expired {
            self.remember_released(owner, now);
        }
        (expired.len() as u64, granted)
    }

    fn remember_released(&mut self, owner: Ts, now: u64) {
        self.released.insert(owner, (), now);
    }

    /// Forgets every lock (a crashed server).
    pub fn clear(&mut self) {
        self.locks.clear();
        self.released.clear();
    }

    /// Items with a holder or a waiter.
    pub fn len(&self) -> usize {
        self.locks.len()
    }

    /// True when no item is locked.
    pub fn is_empty(&self) -> bool {
        self.locks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: u64 = 1_000;

    fn w(key: Key, mode: LockMode, owner: Ts) -> Waiter {
        Waiter {
            from: 0,
            rid: owner,
            key,
            mode,
            owner,
        }
    }

    fn owners(g: &[Waiter]) -> Vec<Ts> {
        g.iter().map(|x| x.owner).collect()
    }

    #[test]
    fn writers_exclude_everyone_and_waiters_are_granted_in_order() {
        let mut t = LockTable::new(LEASE);
        assert!(t.acquire(w(1, LockMode::Write, 10), 0).is_some());
        assert!(t.acquire(w(1, LockMode::Read, 11), 0).is_none());
        assert!(t.acquire(w(1, LockMode::ShortRead, 12), 0).is_none());
        assert!(t.acquire(w(1, LockMode::Write, 13), 0).is_none());
        assert_eq!(owners(&t.release(&[1], 10, 0)), vec![11, 12]);
        assert_eq!(owners(&t.release(&[1], 11, 0)), vec![13]);
        t.release(&[1], 13, 0);
        assert!(t.is_empty());
    }

    #[test]
    fn readers_share_and_block_a_writer_until_all_leave() {
        let mut t = LockTable::new(LEASE);
        assert!(t.acquire(w(1, LockMode::Read, 1), 0).is_some());
        assert!(t.acquire(w(1, LockMode::Read, 2), 0).is_some());
        assert!(t.acquire(w(1, LockMode::Write, 3), 0).is_none());
        assert!(t.release(&[1], 1, 0).is_empty());
        assert_eq!(t.release(&[1], 2, 0).len(), 1);
    }

    #[test]
    fn repeated_requests_are_idempotent() {
        let mut t = LockTable::new(LEASE);
        assert!(t.acquire(w(1, LockMode::Write, 1), 0).is_some());
        assert!(
            t.acquire(w(1, LockMode::Write, 1), 5).is_some(),
            "a holder asking again is granted again"
        );
        assert!(t.acquire(w(1, LockMode::Read, 2), 5).is_none());
        let mut again = w(1, LockMode::Read, 2);
        again.rid = 99;
        assert!(t.acquire(again, 6).is_none());
        let g = t.release(&[1], 1, 7);
        assert_eq!(owners(&g), vec![2], "a waiter asking again keeps one place");
        assert_eq!(g[0].rid, 99, "and is answered under its latest request id");
        t.release(&[1], 2, 8);
        assert!(
            t.acquire(w(1, LockMode::Write, 1), 9).is_none(),
            "a late copy of a released owner's request locks nothing"
        );
        assert!(t.is_empty());
    }

    #[test]
    fn locks_of_a_silent_holder_are_taken_back_after_the_lease() {
        let mut t = LockTable::new(LEASE);
        assert!(t.acquire(w(1, LockMode::Write, 1), 0).is_some());
        assert!(t.acquire(w(2, LockMode::Read, 1), 0).is_some());
        assert!(t.acquire(w(1, LockMode::Write, 2), 10).is_none());
        assert!(t.acquire(w(3, LockMode::Write, 3), 0).is_some());
        t.renew(&[3], 3, LEASE / 2);
        assert_eq!(t.expire(LEASE - 1), (0, Vec::new()));
        let (expired, granted) = t.expire(LEASE);
        assert_eq!(expired, 2);
        assert_eq!(owners(&granted), vec![2]);
        assert_eq!(t.len(), 2, "the new holder's and the renewed lock are left");
        assert!(
            t.acquire(w(2, LockMode::Read, 1), LEASE + 1).is_none(),
            "the silent owner cannot lock again"
        );
        t.expire(3 * LEASE);
        assert!(
            t.is_empty(),
            "the new holder and the renewed one fell silent too"
        );
        assert_eq!(
            t.released.len(),
            2,
            "released owners are forgotten after a lease"
        );
    }
}
