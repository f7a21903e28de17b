use crate::btree::BTree;

/// Entries a leaf of the ordered index holds.
const LEAF: usize = 32;
/// Children an inner node of the ordered index holds.
const FANOUT: usize = 64;

/// An ordered index from 64-bit keys to record addresses, for range scans and, in a table without a
/// hash index, lookups: a B+-tree with optimistic lock coupling ([`BTree`]), leaves of 32 entries
/// (four cache lines of keys) and inner nodes of 64 children. Readers take no lock and write nothing.
pub type OrderedIndex = BTree<LEAF, FANOUT>;

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
        assert_eq!(idx.len(guard), 8999);
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
