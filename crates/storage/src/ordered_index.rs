use congee::Congee;
use crossbeam_epoch::Guard;

/// An ordered index from 64-bit keys to record addresses, for range scans: an adaptive radix tree
/// with optimistic lock coupling (ART-OLC, `congee`). Readers take no lock.
#[derive(Default)]
pub struct OrderedIndex {
    tree: Congee<usize, usize>,
}

/// Entries a scan takes from the tree at a time: few at first, as most scans stop early.
const FIRST_BATCH: usize = 4;
const BATCH: usize = 32;

impl OrderedIndex {
    /// Adds `key -> value`; returns false if the key is present.
    pub fn insert(&self, key: u64, value: usize, guard: &Guard) -> bool {
        let mut fresh = true;
        self.tree
            .compute_or_insert(
                key as usize,
                |old| match old {
                    Some(old) => {
                        fresh = false;
                        old
                    }
                    None => value,
                },
                guard,
            )
            .expect("ordered index node allocation");
        fresh
    }

    /// Removes `key` if it maps to `value`.
    pub fn remove(&self, key: u64, value: usize, guard: &Guard) -> bool {
        matches!(
            self.tree
                .compute_if_present(&(key as usize), |v| (v != value).then_some(v), guard),
            Some((old, None)) if old == value
        )
    }

    /// Calls `f(key, value)` on keys in `lo..=hi` in ascending order until it returns false.
    pub fn scan(&self, lo: u64, hi: u64, guard: &Guard, mut f: impl FnMut(u64, usize) -> bool) {
        if lo > hi {
            return;
        }
        let mut buf = [(0usize, 0usize); BATCH];
        let mut batch = FIRST_BATCH;
        // The tree's ranges exclude their end; a key of u64::MAX is looked up on its own.
        let end = hi.saturating_add(1) as usize;
        let mut start = lo as usize;
        while start < end {
            let n = self.tree.range(&start, &end, &mut buf[..batch], guard);
            for &(k, v) in &buf[..n] {
                if !f(k as u64, v) {
                    return;
                }
            }
            if n < batch {
                break;
            }
            start = buf[n - 1].0 + 1;
            batch = BATCH;
        }
        if hi == u64::MAX
            && let Some(v) = self.tree.get(&usize::MAX, guard)
        {
            f(u64::MAX, v);
        }
    }

    /// Number of keys (walks the tree).
    pub fn len(&self) -> usize {
        let guard = crossbeam_epoch::pin();
        let mut n = 0;
        self.scan(0, u64::MAX, &guard, |_, _| {
            n += 1;
            true
        });
        n
    }

    /// Whether the index is empty.
    pub fn is_empty(&self) -> bool {
        self.tree.is_empty(&crossbeam_epoch::pin())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_below_the_first_key_stop_early() {
        let idx = OrderedIndex::default();
        let guard = &crossbeam_epoch::pin();
        for k in 1000..10_000u64 {
            assert!(idx.insert(k, k as usize * 8, guard));
        }
        assert!(!idx.insert(1000, 1, guard));
        let mut seen = vec![];
        idx.scan(0, u64::MAX, guard, |k, _| {
            seen.push(k);
            seen.len() < 3
        });
        assert_eq!(seen, vec![1000, 1001, 1002]);
        let start = std::time::Instant::now();
        for _ in 0..1000 {
            idx.scan(5, 2000, guard, |_, _| false);
        }
        let per_scan = start.elapsed() / 1000;
        seen.clear();
        idx.scan(1500, 1502, guard, |k, _| {
            seen.push(k);
            true
        });
        assert_eq!(seen, vec![1500, 1501, 1502]);
        assert!(idx.remove(1500, 1500 * 8, guard));
        assert!(!idx.remove(1501, 0, guard));
        assert_eq!(idx.len(), 8999);
        seen.clear();
        idx.scan(1490, 1530, guard, |k, _| {
            seen.push(k);
            true
        });
        assert_eq!(
            seen,
            (1490..=1530).filter(|&k| k != 1500).collect::<Vec<_>>()
        );
        assert!(idx.insert(u64::MAX, 8, guard));
        seen.clear();
        idx.scan(9998, u64::MAX, guard, |k, _| {
            seen.push(k);
            true
        });
        assert_eq!(seen, vec![9998, 9999, u64::MAX]);
        eprintln!("scan from below the first key, stopped at once: {per_scan:?}");
    }
}
