//! What a checker reports when a history is not serializable.

use crate::history::{Item, Version};
use std::fmt;

/// The kind of a direct serialization graph edge (Adya's dependencies).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EdgeKind {
    /// Write dependency: the target installed the version after the source's.
    Ww,
    /// Read dependency: the target read a version the source wrote.
    Wr,
    /// Anti-dependency: the target overwrote a version the source read.
    Rw,
    /// Through a commutative operation applied to a per-core slice: the source wrote or read the
    /// version the operation's merge replaced, or the target is that merge.
    Split,
}

impl EdgeKind {
    /// The short lowercase name used in reports (`ww`, `wr`, `rw`).
    pub fn name(self) -> &'static str {
        match self {
            EdgeKind::Ww => "ww",
            EdgeKind::Wr => "wr",
            EdgeKind::Rw => "rw",
            EdgeKind::Split => "split",
        }
    }
}

/// One edge of a reported cycle, with the item and version behind it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CycleEdge {
    /// Id of the transaction the edge leaves.
    pub from: u64,
    /// Id of the transaction the edge enters.
    pub to: u64,
    /// Which dependency this is.
    pub kind: EdgeKind,
    /// The item both transactions touched.
    pub item: Item,
    /// The linking version: for ww the one `to` replaced, for wr the one
    /// `to` read, for rw the one `from` read and `to` replaced.
    pub version: Version,
}

/// A cycle in the direct serialization graph, as a closed walk of edges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cycle {
    /// Consecutive edges; the last one returns to the first one's source.
    pub edges: Vec<CycleEdge>,
}

impl Cycle {
    /// Ids of the transactions on the cycle, in order.
    pub fn txns(&self) -> Vec<u64> {
        self.edges.iter().map(|e| e.from).collect()
    }

    /// Number of edges of the given kind on the cycle.
    pub fn count(&self, kind: EdgeKind) -> usize {
        self.edges.iter().filter(|e| e.kind == kind).count()
    }

    /// Adya's name for this cycle (G0, G1c, G-single, G2), so reports can be
    /// compared with Elle's and adya's item-level names.
    pub fn adya_class(&self) -> &'static str {
        match self.count(EdgeKind::Rw) {
            0 if self.count(EdgeKind::Wr) == 0 => "G0",
            0 => "G1c",
            1 => "G-single",
            _ => "G2",
        }
    }
}

impl fmt::Display for Cycle {
    /// Writes `T1 -rw(item 0/5)-> T2 -...-> T1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(first) = self.edges.first() else {
            return f.write_str("(empty cycle)");
        };
        write!(f, "T{}", first.from)?;
        for e in &self.edges {
            write!(f, " -{}(item {})-> T{}", e.kind.name(), e.item, e.to)?;
        }
        Ok(())
    }
}

/// Why a history is not serializable; the first problem found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Anomaly {
    /// Two transactions share an id, so edges could not name them.
    DuplicateTxnId {
        /// The repeated id.
        id: u64,
    },
    /// A write claims version 0, which is reserved for the initial state.
    ZeroVersionWrite {
        /// The writing transaction.
        txn: u64,
        /// The item written.
        item: Item,
    },
    /// Two writes installed the same version id of one item.
    DuplicateVersion {
        /// The item.
        item: Item,
        /// The repeated version.
        version: Version,
        /// The two writing transactions (the same one if it wrote it twice).
        txns: (u64, u64),
    },
    /// Two writes replaced the same version: the version chain forks, one
    /// update was lost.
    WriteFork {
        /// The item.
        item: Item,
        /// The version both writes replaced.
        prev: Version,
        /// The two writing transactions.
        txns: (u64, u64),
        /// The two versions they installed.
        versions: (Version, Version),
    },
    /// A read of a non-zero version no committed transaction wrote (aborted,
    /// uncommitted or garbage data; Adya's G1a).
    ReadOfUnwrittenVersion {
        /// The reading transaction.
        txn: u64,
        /// The item read.
        item: Item,
        /// The version nobody wrote.
        version: Version,
    },
    /// A transaction found a loaded row absent from the start (read, or replaced, version
    /// [`crate::ABSENT`] of an item whose initial version other transactions saw as
    /// [`crate::LOADED`]): a wrong miss, or an insert over a row that existed.
    LoadedRowMissed {
        /// The transaction that saw the item absent.
        txn: u64,
        /// The item.
        item: Item,
        /// A transaction that saw the loaded version.
        witness: u64,
    },
    /// A commutative operation applied to a per-core slice whose merge the history does not hold.
    UnmergedSplitOp {
        /// The transaction that applied it.
        txn: u64,
        /// The item.
        item: Item,
        /// The split phase it ran in.
        phase: u64,
    },
    /// A merge transaction that does not write the item it merges.
    MergeWithoutWrite {
        /// The merge transaction.
        txn: u64,
        /// The item.
        item: Item,
    },
    /// A cycle of dependencies: no serial order explains the history.
    Cycle(Cycle),
}

impl fmt::Display for Anomaly {
    /// A one-line human-readable explanation.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Anomaly::DuplicateTxnId { id } => {
                write!(f, "transaction id T{id} appears more than once")
            }
            Anomaly::ZeroVersionWrite { txn, item } => {
                write!(
                    f,
                    "T{txn} wrote version 0 of item {item}, which is reserved"
                )
            }
            Anomaly::DuplicateVersion {
                item,
                version,
                txns: (a, b),
            } => write!(
                f,
                "version {version} of item {item} was written twice, by T{a} and T{b}"
            ),
            Anomaly::WriteFork {
                item,
                prev,
                txns: (a, b),
                versions: (va, vb),
            } => write!(
                f,
                "write fork (lost update) on item {item}: T{a} (version {va}) and T{b} \
                 (version {vb}) both replaced version {prev}"
            ),
            Anomaly::ReadOfUnwrittenVersion { txn, item, version } => write!(
                f,
                "T{txn} read version {version} of item {item}, which no committed \
                 transaction wrote (G1a)"
            ),
            Anomaly::LoadedRowMissed { txn, item, witness } => write!(
                f,
                "T{txn} saw item {item} absent from the start, but it was loaded (T{witness} \
                 saw the loaded version)"
            ),
            Anomaly::UnmergedSplitOp { txn, item, phase } => write!(
                f,
                "T{txn} applied a split operation to item {item} in split phase {phase}, \
                 which was never merged"
            ),
            Anomaly::MergeWithoutWrite { txn, item } => {
                write!(f, "merge T{txn} does not write the item {item} it merges")
            }
            Anomaly::Cycle(c) => write!(
                f,
                "cycle of {} transactions: {c} [{}]",
                c.edges.len(),
                c.adya_class()
            ),
        }
    }
}

impl std::error::Error for Anomaly {}
