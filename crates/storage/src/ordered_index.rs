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
        // scc's bounded range walks every entry when the lower bound lies below the smallest key, so
        // such scans start from the beginning instead.
        let below_first = self
            .tree
            .iter(&guard)
            .next()
            .is_none_or(|(first, _)| lo <= *first);
        if below_first {
            for (k, v) in self.tree.range(..=hi, &guard) {
                if !f(*k, *v) {
                    break;
                }
            }
        } else {
            for (k, v) in self.tree.range(lo..=hi, &guard) {
                if !f(*k, *v) {
                    break;
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_below_the_first_key_stop_early() {
        let idx = OrderedIndex::default();
        for k in 1000..10_000u64 {
            assert!(idx.insert(k, k as usize * 8));
        }
        let mut seen = vec![];
        idx.scan(0, u64::MAX, |k, _| {
            seen.push(k);
            seen.len() < 3
        });
        assert_eq!(seen, vec![1000, 1001, 1002]);
        let start = std::time::Instant::now();
        for _ in 0..1000 {
            idx.scan(5, 2000, |_, _| false);
        }
        let per_scan = start.elapsed() / 1000;
        seen.clear();
        idx.scan(1500, 1502, |k, _| {
            seen.push(k);
            true
        });
        assert_eq!(seen, vec![1500, 1501, 1502]);
        assert!(idx.remove(1500, 1500 * 8));
        assert!(!idx.remove(1501, 0));
        eprintln!("scan from below the first key, stopped at once: {per_scan:?}");
    }
}
