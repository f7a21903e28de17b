//! The footprint of a stashed transaction: the rows its stashed attempt named, so that its rerun
//! can find them in the cache.
//!
//! A phased protocol reruns a split phase's stashed transactions as one batch in the next joined
//! phase, and their first attempts already said which rows they touch. As a worker starts one rerun
//! it prefetches rows of the ones queued behind it: the index slots [`SLOTS_AHEAD`] reruns ahead and
//! the records (looked up through those slots, now cached) [`RECORDS_AHEAD`] ahead, so each rerun
//! finds its rows in the cache instead of waiting for memory. Transactions arriving from clients
//! give no such notice; a stash does.
//!
//! On LIKE at half writes (2 workers, `bench like`), where about a third of the committed
//! transactions are reruns of stashed reads, this made Doppel about 7% faster (16 paired rounds);
//! records 1 ahead and slots 2 ahead gained about half as much, since a rerun is shorter than a
//! memory access and the record lookup then waited for its slot.

use phasedb_storage::{Guard, TableId};

use crate::database::Database;
use crate::protocol::Protocol;

/// Most rows a footprint keeps.
pub const FOOTPRINT_ROWS: usize = 4;

/// How many reruns ahead a rerun prefetches records.
pub const RECORDS_AHEAD: usize = 2;

/// How many reruns ahead a rerun prefetches index slots: far enough ahead of [`RECORDS_AHEAD`] that
/// the slots are cached when the record lookup reads them.
pub const SLOTS_AHEAD: usize = 4;

/// The first rows (table, key) a stashed attempt named: its prefetch hints, then its reads and
/// writes, at most [`FOOTPRINT_ROWS`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    keys: [u64; FOOTPRINT_ROWS],
    tables: [TableId; FOOTPRINT_ROWS],
    len: u8,
}

impl Footprint {
    /// Adds row `key` of table `t` unless the footprint is full or holds it already.
    #[inline]
    pub fn add(&mut self, t: TableId, key: u64) {
        let n = self.len as usize;
        if n == FOOTPRINT_ROWS || self.rows().any(|r| r == (t, key)) {
            return;
        }
        self.keys[n] = key;
        self.tables[n] = t;
        self.len += 1;
    }

    /// Forgets every row.
    #[inline]
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Whether it holds no row.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Its rows, as (table, key), in the order they were added.
    pub fn rows(&self) -> impl Iterator<Item = (TableId, u64)> + '_ {
        let n = self.len as usize;
        self.tables[..n]
            .iter()
            .copied()
            .zip(self.keys[..n].iter().copied())
    }

    /// Starts loading its rows' index slots into the cache.
    pub(crate) fn prefetch_slots<P: Protocol>(&self, db: &Database<P>, guard: &Guard) {
        for (t, key) in self.rows() {
            db.table(t).prefetch_slot(key, guard);
        }
    }

    /// Looks its rows up and starts loading their records into the cache (their slots should be
    /// there from [`Footprint::prefetch_slots`]).
    pub(crate) fn prefetch_records<P: Protocol>(&self, db: &Database<P>, guard: &Guard) {
        for (t, key) in self.rows() {
            db.table(t).prefetch_record(key, guard);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_distinct_rows_in_order() {
        let mut f = Footprint::default();
        assert!(f.is_empty());
        f.add(1, 10);
        f.add(1, 10);
        f.add(2, 10);
        f.add(1, 11);
        f.add(3, 7);
        f.add(4, 8);
        assert_eq!(
            f.rows().collect::<Vec<_>>(),
            vec![(1, 10), (2, 10), (1, 11), (3, 7)]
        );
        f.clear();
        assert!(f.is_empty());
        f.add(5, 5);
        assert_eq!(f.rows().collect::<Vec<_>>(), vec![(5, 5)]);
    }
}
