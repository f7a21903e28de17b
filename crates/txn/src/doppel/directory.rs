//! The split phase's directory: which split entry, if any, holds a (table, key, column group).
//!
//! Every split-phase `apply` asks whether its record is split. Looking that up in the table's index
//! and reading the record's TID word costs a walk through memory shared with every other worker;
//! the directory answers from a few cache lines built once per split phase, and a miss leaves the
//! operation to the usual read-modify-write, which looks the record up itself.

use phasedb_storage::TableId;

use super::split::SplitEntry;

/// One directory slot; `entry == EMPTY` marks a free one.
#[derive(Clone, Copy)]
struct Slot {
    key: u64,
    table: TableId,
    group: u16,
    entry: u32,
}

const EMPTY: u32 = u32::MAX;

/// An open-addressed map from (table, key, group) to the index of its split entry, at most half
/// full. Rebuilt by the coordinator at each split barrier, read by every worker during the phase.
#[derive(Default)]
pub(crate) struct Directory {
    slots: Vec<Slot>,
    mask: usize,
}

impl Directory {
    /// Rebuilds the directory for `entries` (at a split barrier).
    pub fn rebuild(&mut self, entries: &[SplitEntry]) {
        let cap = (entries.len() * 2).next_power_of_two().max(8);
        self.slots.clear();
        self.slots.resize(
            cap,
            Slot {
                key: 0,
                table: 0,
                group: 0,
                entry: EMPTY,
            },
        );
        self.mask = cap - 1;
        for (i, e) in entries.iter().enumerate() {
            let group = e.group as u16;
            let mut at = hash(e.label.table, e.label.key, group) & self.mask;
            while self.slots[at].entry != EMPTY {
                at = (at + 1) & self.mask;
            }
            self.slots[at] = Slot {
                key: e.label.key,
                table: e.label.table,
                group,
                entry: i as u32,
            };
        }
    }

    /// Empties the directory (when the split phase ends).
    pub fn clear(&mut self) {
        self.slots.clear();
        self.mask = 0;
    }

    /// The split entry of column group `group` of row `key` of table `table`, if it is split.
    #[inline(always)]
    pub fn find(&self, table: TableId, key: u64, group: u16) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mut at = hash(table, key, group) & self.mask;
        loop {
            let s = &self.slots[at];
            if s.entry == EMPTY {
                return None;
            }
            if s.key == key && s.table == table && s.group == group {
                return Some(s.entry as usize);
            }
            at = (at + 1) & self.mask;
        }
    }
}

#[inline(always)]
fn hash(table: TableId, key: u64, group: u16) -> usize {
    let h =
        (key ^ ((table as u64) << 48) ^ ((group as u64) << 40)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 32) as usize
}
