//! The lock table of the lock-based baselines: shared and exclusive locks per item, FIFO waiters.
//!
//! Clients request locks one at a time in key order, so no wait-for cycle can form and no baseline
//! deadlocks; the FIFO queue keeps writers from starving behind a stream of readers.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use crate::msg::{Key, LockMode, Ts};
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

#[derive(Default, Debug)]
struct LockState {
    writer: Option<Ts>,
    readers: Vec<Ts>,
    queue: VecDeque<Waiter>,
}

impl LockState {
    fn grantable(&self, w: &Waiter) -> bool {
        let writer_ok = self.writer.is_none_or(|o| o == w.owner);
        match w.mode {
            LockMode::Read | LockMode::ShortRead => writer_ok,
            LockMode::Write => writer_ok && self.readers.iter().all(|&r| r == w.owner),
        }
    }

    fn take(&mut self, w: &Waiter) {
        match w.mode {
            LockMode::ShortRead => {}
            LockMode::Read => self.readers.push(w.owner),
            LockMode::Write => self.writer = Some(w.owner),
        }
    }

    fn idle(&self) -> bool {
        self.writer.is_none() && self.readers.is_empty() && self.queue.is_empty()
    }
}

/// Every item's lock on one server.
#[derive(Default)]
pub struct LockTable {
    locks: FxHashMap<Key, LockState>,
}

impl LockTable {
    /// Grants `w` now (returned) or queues it behind earlier requests.
    pub fn acquire(&mut self, w: Waiter) -> Option<Waiter> {
        let st = self.locks.entry(w.key).or_default();
        if st.queue.is_empty() && st.grantable(&w) {
            st.take(&w);
            if st.idle() {
                self.locks.remove(&w.key);
            }
            Some(w)
        } else {
            st.queue.push_back(w);
            None
        }
    }

    /// Releases `owner`'s lock on `key`; returns the waiters granted as a result, in order.
    pub fn release(&mut self, key: Key, owner: Ts) -> Vec<Waiter> {
        let Some(st) = self.locks.get_mut(&key) else {
            return Vec::new();
        };
        if st.writer == Some(owner) {
            st.writer = None;
        }
        st.readers.retain(|&r| r != owner);
        let mut granted = Vec::new();
        while let Some(w) = st.queue.front() {
            if !st.grantable(w) {
                break;
            }
            let w = st.queue.pop_front().expect("front exists");
            st.take(&w);
            granted.push(w);
        }
        if st.idle() {
            self.locks.remove(&key);
        }
        granted
    }

    /// Forgets every lock (a crashed server).
    pub fn clear(&mut self) {
        self.locks.clear();
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

    fn w(key: Key, mode: LockMode, owner: Ts) -> Waiter {
        Waiter {
            from: 0,
            rid: owner,
            key,
            mode,
            owner,
        }
    }

    #[test]
    fn writers_exclude_everyone_and_waiters_are_granted_in_order() {
        let mut t = LockTable::default();
        assert!(t.acquire(w(1, LockMode::Write, 10)).is_some());
        assert!(t.acquire(w(1, LockMode::Read, 11)).is_none());
        assert!(t.acquire(w(1, LockMode::ShortRead, 12)).is_none());
        assert!(t.acquire(w(1, LockMode::Write, 13)).is_none());
        let g = t.release(1, 10);
        assert_eq!(g.iter().map(|x| x.owner).collect::<Vec<_>>(), vec![11, 12]);
        assert!(t.release(1, 12).is_empty(), "a short read holds nothing");
        let g = t.release(1, 11);
        assert_eq!(g.iter().map(|x| x.owner).collect::<Vec<_>>(), vec![13]);
        t.release(1, 13);
        assert!(t.is_empty());
    }

    #[test]
    fn readers_share_and_block_a_writer_until_all_leave() {
        let mut t = LockTable::default();
        assert!(t.acquire(w(1, LockMode::Read, 1)).is_some());
        assert!(t.acquire(w(1, LockMode::Read, 2)).is_some());
        assert!(t.acquire(w(1, LockMode::Write, 3)).is_none());
        assert!(t.release(1, 1).is_empty());
        assert_eq!(t.release(1, 2).len(), 1);
    }
}
