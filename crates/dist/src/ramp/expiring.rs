//! Facts a server remembers for a fixed window after it first learns them, then forgets oldest
//! first: CTP decisions, and owners that released their locks.

use std::collections::VecDeque;
use std::hash::Hash;

use rustc_hash::FxHashMap;

/// A map whose entries live `window` ns from their first insertion.
pub struct Expiring<K, V> {
    map: FxHashMap<K, V>,
    log: VecDeque<(u64, K)>,
    window: u64,
}

impl<K: Hash + Eq + Copy, V> Expiring<K, V> {
    /// An empty map whose entries live `window` ns.
    pub fn new(window: u64) -> Self {
        Expiring {
            map: FxHashMap::default(),
            log: VecDeque::new(),
            window,
        }
    }

    /// Records `v` for `k`; a key already present takes the new value and keeps its first time.
    pub fn insert(&mut self, k: K, v: V, now: u64) {
        if self.map.insert(k, v).is_none() {
            self.log.push_back((now, k));
        }
    }

    /// The value of `k`, if remembered.
    pub fn get(&self, k: &K) -> Option<&V> {
        self.map.get(k)
    }

    /// True when `k` is remembered.
    pub fn contains_key(&self, k: &K) -> bool {
        self.map.contains_key(k)
    }

    /// Forgets the entries older than the window.
    pub fn expire(&mut self, now: u64) {
        while let Some(&(at, k)) = self.log.front() {
            if at + self.window > now {
                break;
            }
            self.log.pop_front();
            self.map.remove(&k);
        }
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.map.clear();
        self.log.clear();
    }

    /// Entries remembered.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_live_one_window_from_their_first_insertion() {
        let mut m: Expiring<u64, &str> = Expiring::new(10);
        m.insert(1, "a", 0);
        m.insert(2, "b", 5);
        m.insert(1, "c", 8);
        assert_eq!(m.get(&1), Some(&"c"), "the value is replaced");
        m.expire(9);
        assert_eq!(m.len(), 2);
        m.expire(10);
        assert!(!m.contains_key(&1), "the first insertion's time counts");
        assert!(m.contains_key(&2));
        m.expire(15);
        assert!(m.is_empty());
    }
}
