//! Ids of the rows transactions insert. The load numbers each table's rows `1..=n`; afterwards a
//! worker takes ids in blocks from a per-table counter, so ids stay dense (they fit the key fields
//! of [`super::schema`] however long a run is) and the counters are touched once per block.

use std::sync::atomic::{AtomicU64, Ordering};

/// Ids a worker takes from a counter at a time.
const BLOCK: u64 = 256;

/// The tables rows are inserted into at run time.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Users,
    Items,
    Bids,
    Comments,
    BuyNow,
}

/// The next free id of every table, shared by the workers.
#[derive(Debug, Default)]
pub struct IdSource {
    next: [AtomicU64; 5],
}

impl IdSource {
    /// Counters starting above the loaded rows: `loaded[k]` rows of the table of kind `k`.
    pub fn new(loaded: [u64; 5]) -> IdSource {
        IdSource {
            next: loaded.map(|n| AtomicU64::new(n + 1)),
        }
    }
}

/// A worker's current block of ids per table.
#[derive(Clone, Debug, Default)]
pub struct IdBlocks {
    /// Per kind, the next id and the end of the block.
    blocks: [(u64, u64); 5],
}

impl IdBlocks {
    /// A fresh id of kind `kind`, unique over all workers.
    pub fn take(&mut self, source: &IdSource, kind: Kind) -> u64 {
        let (next, end) = &mut self.blocks[kind as usize];
        if *next == *end {
            *next = source.next[kind as usize].fetch_add(BLOCK, Ordering::Relaxed);
            *end = *next + BLOCK;
        }
        *next += 1;
        *next - 1
    }
}
