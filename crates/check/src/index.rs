//! One hash lookup per (item, version): who wrote it and who replaced it.
//! Building it also finds the anomalies that need no graph.

use crate::anomaly::Anomaly;
use crate::history::{History, Item, Version};
use rustc_hash::{FxHashMap, FxHashSet};

/// Marks an absent transaction position.
pub(crate) const NONE: u32 = u32::MAX;

/// What the history says about one version of one item.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot {
    /// Position in `History::txns` of the writer, or `NONE`.
    pub writer: u32,
    /// Position of the transaction whose write replaced this version, or `NONE`.
    pub next_writer: u32,
    /// The version that replaced this one (valid when `next_writer` is set).
    pub next_version: Version,
}

impl Default for Slot {
    fn default() -> Self {
        Slot {
            writer: NONE,
            next_writer: NONE,
            next_version: 0,
        }
    }
}

/// Per-version facts for the whole history, indexed once.
pub(crate) struct VersionIndex {
    slots: FxHashMap<(Item, Version), Slot>,
}

impl VersionIndex {
    /// Indexes every write, failing on duplicate ids, zero versions,
    /// duplicate versions and forks in a version chain.
    pub fn build(h: &History) -> Result<Self, Anomaly> {
        check_unique_ids(h)?;
        let writes: usize = h.txns.iter().map(|t| t.writes.len()).sum();
        let mut slots = FxHashMap::with_capacity_and_hasher(writes * 2, Default::default());
        for (pos, txn) in h.txns.iter().enumerate() {
            let pos = pos as u32;
            for w in &txn.writes {
                if w.version == 0 {
                    return Err(Anomaly::ZeroVersionWrite {
                        txn: txn.id,
                        item: w.item,
                    });
                }
                let slot: &mut Slot = slots.entry((w.item, w.version)).or_default();
                if slot.writer != NONE {
                    return Err(Anomaly::DuplicateVersion {
                        item: w.item,
                        version: w.version,
                        txns: (h.txns[slot.writer as usize].id, txn.id),
                    });
                }
                slot.writer = pos;
                let before: &mut Slot = slots.entry((w.item, w.prev)).or_default();
                if before.next_writer != NONE {
                    return Err(Anomaly::WriteFork {
                        item: w.item,
                        prev: w.prev,
                        txns: (h.txns[before.next_writer as usize].id, txn.id),
                        versions: (before.next_version, w.version),
                    });
                }
                before.next_writer = pos;
                before.next_version = w.version;
            }
        }
        Ok(VersionIndex { slots })
    }

    /// The facts about `version` of `item`, if any write mentions it.
    pub fn get(&self, item: Item, version: Version) -> Option<&Slot> {
        self.slots.get(&(item, version))
    }

    /// Position of the writer of `version` of `item`, or `NONE`.
    pub fn writer(&self, item: Item, version: Version) -> u32 {
        self.get(item, version).map_or(NONE, |s| s.writer)
    }

    /// Position of the writer that replaced `version` of `item`, or `NONE`.
    pub fn next_writer(&self, item: Item, version: Version) -> u32 {
        self.get(item, version).map_or(NONE, |s| s.next_writer)
    }

    /// Every indexed version with its facts, in no particular order.
    pub fn slots(&self) -> impl Iterator<Item = (&(Item, Version), &Slot)> {
        self.slots.iter()
    }
}

/// Fails on the first transaction id seen twice.
fn check_unique_ids(h: &History) -> Result<(), Anomaly> {
    let mut seen = FxHashSet::with_capacity_and_hasher(h.len(), Default::default());
    for txn in &h.txns {
        if !seen.insert(txn.id) {
            return Err(Anomaly::DuplicateTxnId { id: txn.id });
        }
    }
    Ok(())
}
