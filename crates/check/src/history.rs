//! The recorded history of committed transactions that every checker reads.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Identifies one logical item: a table id and a 64-bit primary key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Item {
    /// The table the item lives in.
    pub table: u32,
    /// The item's primary key within its table.
    pub key: u64,
}

impl Item {
    /// Builds an item from its table and key.
    pub const fn new(table: u32, key: u64) -> Self {
        Self { table, key }
    }
}

impl fmt::Display for Item {
    /// Writes `table/key`, the form used in anomaly reports.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.table, self.key)
    }
}

/// A version id, unique per item. Every version other than [`ABSENT`] and [`LOADED`] is written by
/// exactly one committed transaction of the history. Ids from [`SYNTHETIC_VERSIONS`] up are
/// reserved for versions the exports make up ([`crate::flatten`]).
pub type Version = u64;

/// The version of a key that has never existed: the initial version of every item not loaded.
pub const ABSENT: Version = 0;

/// The version of a row bulk-loaded before the history started (written by no transaction of the
/// history). An item is either loaded or absent at the start, so a transaction that saw one version
/// where another saw the other is an anomaly ([`crate::Anomaly::LoadedRowMissed`]): a miss of a
/// loaded row is checkable.
pub const LOADED: Version = 1 << 62;

/// The first version id reserved for the exports: from here up to [`LOADED`], the start of split
/// phases ([`crate::flatten`]). Engine versions stay below `1 << 60`.
pub const SYNTHETIC_VERSIONS: Version = 1 << 61;

/// The worker of Doppel's merge transactions (reconciliations), run by no client thread.
pub const MERGE_WORKER: u32 = u32::MAX;
/// The worker of the split-phase starts that [`crate::flatten`] adds.
pub const PHASE_WORKER: u32 = u32::MAX - 1;
/// The worker of the loader transaction that [`crate::flatten`] adds (it installs [`LOADED`]).
pub const LOAD_WORKER: u32 = u32::MAX - 2;
/// The worker of the read-only observer that [`crate::with_observer`] adds.
pub const OBSERVER_WORKER: u32 = u32::MAX - 3;
/// Worker ids from here up are reserved for the transactions above; client threads use lower ones.
pub const FIRST_RESERVED_WORKER: u32 = OBSERVER_WORKER;

/// What a write did to its item; a delete installs a tombstone version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WriteKind {
    /// Replaced an existing row.
    Update,
    /// Created a row that did not exist (its `prev` is usually a tombstone or 0).
    Insert,
    /// Removed a row by installing a tombstone version.
    Delete,
}

/// One read of a committed version from the store (never of the reader's own
/// buffered writes). A read of a deleted item reads the tombstone version.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReadEvent {
    /// The item read.
    pub item: Item,
    /// The version observed.
    pub version: Version,
}

/// One installed write. `prev` is the version this write replaced (the one
/// installed just before it); this gives the exact per-item version order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WriteEvent {
    /// The item written.
    pub item: Item,
    /// The new version id, unique for the item.
    pub version: Version,
    /// The version this write replaced.
    pub prev: Version,
    /// Whether the write updated, inserted or deleted.
    pub kind: WriteKind,
}

/// A commutative operation a transaction applied to a per-core slice of `item` in split phase
/// `phase` (Doppel): it takes effect in the version that phase's merge of the item installs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SplitOpEvent {
    /// The item operated on.
    pub item: Item,
    /// The split phase.
    pub phase: u64,
}

/// Marks a merge transaction: its write of `item` installs the slices of split phase `phase`, and
/// with them every [`SplitOpEvent`] of that phase on the item.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MergeEvent {
    /// The item merged.
    pub item: Item,
    /// The split phase whose slices were merged.
    pub phase: u64,
}

/// One committed transaction: who ran it, what it read and what it installed. Every field is
/// written, empty or not: a binary encoding (postcard, on the cluster's wire) cannot tell a left
/// out field from the next one's bytes; a missing one still reads as empty from JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TxnEvent {
    /// Unique id within the history.
    pub id: u64,
    /// The worker (client process) that ran it.
    pub worker: u32,
    /// Versions read from the store.
    pub reads: Vec<ReadEvent>,
    /// Versions installed at commit.
    pub writes: Vec<WriteEvent>,
    /// Commutative operations applied to per-core slices (they commute with each other).
    #[serde(default)]
    pub split_ops: Vec<SplitOpEvent>,
    /// Split phases' slices this transaction merged (a reconciliation).
    #[serde(default)]
    pub merges: Vec<MergeEvent>,
}

/// Committed transactions only, in any order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct History {
    /// The committed transactions.
    pub txns: Vec<TxnEvent>,
}

impl History {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one committed transaction.
    pub fn push(&mut self, txn: TxnEvent) {
        self.txns.push(txn);
    }

    /// Number of committed transactions.
    pub fn len(&self) -> usize {
        self.txns.len()
    }

    /// True when no transaction was recorded.
    pub fn is_empty(&self) -> bool {
        self.txns.is_empty()
    }

    /// Serializes the history as JSON, e.g. to save a failing run for replay.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a history always serializes")
    }

    /// Reads a history saved by [`History::to_json`].
    pub fn from_json(text: &str) -> Result<History, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Concatenates per-worker (or per-node) histories into one.
    pub fn merge(parts: Vec<History>) -> History {
        let total = parts.iter().map(History::len).sum();
        let mut txns = Vec::with_capacity(total);
        for part in parts {
            txns.extend(part.txns);
        }
        History { txns }
    }
}

impl FromIterator<TxnEvent> for History {
    /// Collects transactions into a history.
    fn from_iter<I: IntoIterator<Item = TxnEvent>>(iter: I) -> Self {
        History {
            txns: iter.into_iter().collect(),
        }
    }
}
