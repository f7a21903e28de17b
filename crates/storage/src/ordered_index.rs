use scc::TreeIndex;

/// An ordered index from 64-bit keys to record addresses, for range scans. Readers take no lock.
pub struct OrderedIndex {
    tree: TreeIndex<u64, usize>,
}

impl Default for OrderedIndex {
    fn default() -> Self {
        OrderedIndex {
            tree: TreeIndex::new(),
        }
    }
}

impl OrderedIndex {
    /// Adds `key -> value`; returns false if the key is present.
    pub fn insert(&self, key: u64, value: usize) -> bool {
        self.tree.insert_sync(key, value).is_ok()
    }

    /// Removes `key` if it maps to `value`.
    pub fn remove(&self, key: u64, value: usize) -> bool {
        self.tree.remove_if_sync(&key, |v| *v == value)
    }

    /// Calls `f(key, value)` on keys in `lo..=hi` in ascending order until it returns false.
    pub fn scan(&self, lo: u64, hi: u64, mut f: impl FnMut(u64, usize) -> bool) {
        if lo > hi {
            return;
        }
        let guard = scc::Guard::new();
        for (k, v) in self.tree.range(lo..=hi, &guard) {
            if !f(*k, *v) {
                break;
            }
        }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.tree.len()
    }

    /// Whether the index is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
