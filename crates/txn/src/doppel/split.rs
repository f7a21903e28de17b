//! What Doppel shares between workers: the split records of the current split phase, each worker's
//! per-core slices and samples, the manual labels and the coordinator's own state.

use std::cell::UnsafeCell;

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use phasedb_storage::{ColumnType, RecordPtr, TableId};
use rustc_hash::FxHashMap;

use super::policy::SplitPolicy;
use crate::database::MAX_WORKERS;
use crate::splittable::OpKind;
use crate::tid::TidWord;

/// "Split column `col` of row `key` of `table` for operation `kind`": what the coordinator decides,
/// and what a manual label says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SplitLabel {
    pub table: TableId,
    pub key: u64,
    pub col: u16,
    pub kind: OpKind,
}

/// A record split in the current split phase. Its group's TID word holds [`crate::tid::SPLIT`] and
/// the entry's index while the phase lasts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SplitEntry {
    pub label: SplitLabel,
    pub rec: RecordPtr<TidWord>,
    pub group: u8,
    pub ty: ColumnType,
    /// Offset of the entry's slice in every worker's slice arena, and its length in words.
    pub slice: usize,
    pub words: usize,
    /// The group's TID word before the split phase.
    pub pre_word: u64,
}

/// What a worker saw of one split record during a split phase. Aligned to its own cache lines:
/// every worker counts into its own array at every operation, and two arrays must never share a line.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(128))]
pub(crate) struct EntrySample {
    /// Operations applied to the worker's slice (committed).
    pub ops: u64,
    /// Transactions stashed because they read the record.
    pub reads: u64,
    /// Transactions stashed because they ran another splittable operation on it, by kind.
    pub other: [u64; 6],
}

impl EntrySample {
    /// Adds another worker's sample of the same record.
    pub fn absorb(&mut self, o: &EntrySample) {
        self.ops += o.ops;
        self.reads += o.reads;
        for (x, y) in self.other.iter_mut().zip(o.other) {
            *x += y;
        }
    }

    /// What a record split for `label` is in the next split phase, by what reached it in this
    /// one: split for the same operation while it was applied often enough and made enough of the
    /// accesses; split for another splittable operation that fits the column (`ty`) when that one
    /// was stashed more often than the operation was applied; otherwise reconciled (`None`).
    pub fn next_label(
        &self,
        label: SplitLabel,
        ty: ColumnType,
        policy: &SplitPolicy,
    ) -> Option<SplitLabel> {
        let total = self.ops + self.reads + self.other.iter().sum::<u64>();
        if self.ops >= policy.min_ops && self.ops as f64 >= policy.min_stay_share * total as f64 {
            return Some(label);
        }
        self.other
            .iter()
            .enumerate()
            .max_by_key(|(_, n)| **n)
            .map(|(k, &n)| (OpKind::ALL[k], n))
            .filter(|&(k, n)| n > self.ops && n >= policy.min_ops && fits(k, ty))
            .map(|(kind, _)| SplitLabel { kind, ..label })
    }
}

/// Whether operation `kind` can be split on a column of type `ty`.
pub(crate) fn fits(kind: OpKind, ty: ColumnType) -> bool {
    match kind {
        OpKind::OPut => matches!(ty, ColumnType::Tuple(_)),
        OpKind::TopKInsert => matches!(ty, ColumnType::TopK { .. }),
        _ => matches!(ty, ColumnType::I64 | ColumnType::U64),
    }
}

/// A conflict sample of a joined phase: how often a record's group made a transaction abort; how
/// many of those transactions touched it only by a splittable operation (a split would spare them)
/// and how many also wrote it otherwise or read it besides a commutative update (a split would
/// stash them and keep their conflicts; plain readers count only in `count`); and the splittable
/// operation (column and kind) transactions ran on it, if any.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ConflictSample {
    pub count: u64,
    pub by_op: u64,
    pub others: u64,
    pub op: Option<(u16, OpKind)>,
}

impl ConflictSample {
    /// Whether these conflicts make the record worth splitting for their operation: enough of them,
    /// and the operation's share large enough both of the transactions a split would spare or stash
    /// and of all conflicts, plain readers' included (a split stashes those too).
    pub fn worth_splitting(&self, policy: &SplitPolicy) -> bool {
        let by_op = self.by_op as f64;
        self.op.is_some()
            && self.count >= policy.min_conflicts
            && by_op >= policy.min_op_share * (self.by_op + self.others) as f64
            && by_op >= policy.min_conflict_share * self.count as f64
    }
}

/// Words left empty before and after the slices in each worker's arena, so that no two workers'
/// slices share a cache line (the arenas are separate allocations that may sit side by side).
pub(crate) const SLICE_PAD: usize = 16;

/// Most distinct records a worker samples per joined phase.
pub(crate) const MAX_SAMPLED: usize = 4096;

/// One worker's part: its per-core slices and samples.
#[derive(Default)]
pub(crate) struct SlotState {
    /// The per-core slices of every split entry, back to back between [`SLICE_PAD`] empty words on
    /// each side.
    pub slices: Vec<u64>,
    /// Per split entry, this split phase's samples.
    pub samples: Vec<EntrySample>,
    /// Joined-phase conflicts by (table, key, group).
    pub conflicts: FxHashMap<(TableId, u64, u8), ConflictSample>,
    /// Transactions stashed in this split phase.
    pub stashed: u64,
    /// Column bytes being merged.
    pub merge_buf: Vec<u64>,
}

/// A cell shared between workers whose accesses the phase mechanism orders: a worker's own
/// [`SlotState`] is touched by that worker while it is inside a transaction or its own phase change,
/// and by the coordinator only while every worker is stopped at a phase barrier or the slot is
/// claimed; the split entries change only at barriers and are read only in split phases.
pub(crate) struct PhaseCell<T>(UnsafeCell<T>);

// SAFETY: see the type's documentation: the phase barrier (its SeqCst acknowledgements and release)
// orders every access; no two threads touch a cell at once.
unsafe impl<T: Send> Sync for PhaseCell<T> {}

impl<T: Default> Default for PhaseCell<T> {
    fn default() -> Self {
        PhaseCell(UnsafeCell::new(T::default()))
    }
}

impl<T> PhaseCell<T> {
    /// # Safety
    /// The caller is the cell's current owner under the phase rules above.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub unsafe fn get_mut(&self) -> &mut T {
        unsafe { &mut *self.0.get() }
    }

    /// # Safety
    /// No one changes the cell meanwhile under the phase rules above.
    #[inline]
    pub unsafe fn get(&self) -> &T {
        unsafe { &*self.0.get() }
    }
}

/// Figures about phases, kept by the coordinator.
#[derive(Clone, Debug, Default)]
pub struct PhaseStats {
    /// Split phases run.
    pub split_phases: u64,
    /// Joined phases that ended without a split phase (nothing contended enough).
    pub skipped_splits: u64,
    /// Split phases ended early because too many transactions were stashed.
    pub hurried: u64,
    /// The records split in the latest split phase.
    pub split: Vec<SplitLabel>,
    /// The most records split in one phase.
    pub most_split: usize,
    /// Distinct records ever split.
    pub ever_split: usize,
    /// Operations applied to per-core slices.
    pub slice_ops: u64,
    /// Transactions stashed in split phases.
    pub stashed: u64,
    /// Phase changes that stopped waiting for a worker holding stashed transactions (see
    /// [`crate::phase::Phases::overdue`]).
    pub overdue: u64,
    /// Time coordinators spent at phase-change barriers waiting for workers to acknowledge (see
    /// [`crate::phase::Phases::barrier_wait`]): time a worker ran no transactions.
    pub barrier_wait: std::time::Duration,
}

/// The coordinator's state between phases.
#[derive(Default)]
pub(crate) struct CoordState {
    /// Labels that stay split into the next split phase.
    pub keep: Vec<SplitLabel>,
    /// Every label ever split.
    pub ever: rustc_hash::FxHashSet<SplitLabel>,
    /// Records split phases let go, sitting out split decisions.
    pub cooldown: super::cooldown::Cooldowns,
    pub stats: PhaseStats,
    /// Reused buffer for aggregating conflict samples.
    pub conflicts: FxHashMap<(TableId, u64, u8), ConflictSample>,
}

/// Doppel's database-wide state.
pub struct DoppelShared {
    pub(crate) entries: PhaseCell<Vec<SplitEntry>>,
    /// The entries by (table, key, group), for split-phase operations.
    pub(crate) directory: CachePadded<PhaseCell<super::directory::Directory>>,
    pub(crate) slots: Box<[CachePadded<PhaseCell<SlotState>>]>,
    pub(crate) manual: Mutex<Vec<SplitLabel>>,
    pub(crate) coord: Mutex<CoordState>,
    /// Split phases workers asked to end early.
    pub(crate) hurried: std::sync::atomic::AtomicU64,
}

impl Default for DoppelShared {
    fn default() -> Self {
        DoppelShared {
            entries: PhaseCell::default(),
            directory: Default::default(),
            slots: (0..MAX_WORKERS)
                .map(|_| CachePadded::new(PhaseCell::default()))
                .collect(),
            manual: Mutex::new(Vec::new()),
            coord: Mutex::new(CoordState::default()),
            hurried: Default::default(),
        }
    }
}

impl DoppelShared {
    /// The split entries (in a split phase, or by the coordinator at a barrier).
    ///
    /// # Safety
    /// See [`PhaseCell`].
    #[inline]
    pub(crate) unsafe fn entries(&self) -> &[SplitEntry] {
        unsafe { self.entries.get() }
    }

    /// The split entries' directory (in a split phase).
    ///
    /// # Safety
    /// See [`PhaseCell`].
    #[inline]
    pub(crate) unsafe fn directory(&self) -> &super::directory::Directory {
        unsafe { self.directory.get() }
    }

    /// A slot's state.
    ///
    /// # Safety
    /// See [`PhaseCell`].
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub(crate) unsafe fn slot(&self, slot: usize) -> &mut SlotState {
        unsafe { self.slots[slot].get_mut() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(by_op: u64, others: u64, readers: u64) -> ConflictSample {
        ConflictSample {
            count: by_op + others + readers,
            by_op,
            others,
            op: Some((0, OpKind::Add)),
        }
    }

    fn seen(ops: u64, reads: u64, other: (OpKind, u64)) -> EntrySample {
        let mut s = EntrySample {
            ops,
            reads,
            ..EntrySample::default()
        };
        s.other[OpKind::ALL.iter().position(|&k| k == other.0).unwrap()] = other.1;
        s
    }

    #[test]
    fn a_split_record_stays_split_while_its_operation_is_enough_of_what_reaches_it() {
        let policy = SplitPolicy::default();
        let page = SplitLabel {
            table: 0,
            key: 0,
            col: 0,
            kind: OpKind::Add,
        };
        let next = |s: EntrySample| s.next_label(page, ColumnType::I64, &policy);
        // INCR1's hot key: nothing but adds.
        assert_eq!(next(seen(5000, 0, (OpKind::Max, 0))), Some(page));
        // LIKE's top page at half writes: about as many readers stashed as likes applied.
        assert_eq!(next(seen(1000, 1050, (OpKind::Max, 0))), Some(page));
        // At 30% writes: more than two readers stashed per like.
        assert_eq!(next(seen(300, 700, (OpKind::Max, 0))), None);
        // Too few operations to be worth a split phase.
        assert_eq!(next(seen(10, 0, (OpKind::Max, 0))), None);
        // Another operation was stashed more often than the split one was applied: split for it.
        assert_eq!(
            next(seen(20, 0, (OpKind::Max, 100))),
            Some(SplitLabel {
                kind: OpKind::Max,
                ..page
            })
        );
        // ... unless it cannot be split on the column's type.
        assert_eq!(next(seen(20, 0, (OpKind::OPut, 100))), None);
        // Merging the workers' samples adds them up.
        let mut all = seen(400, 300, (OpKind::Max, 0));
        all.absorb(&seen(600, 200, (OpKind::Max, 7)));
        assert_eq!(
            (all.ops, all.reads, all.other.iter().sum::<u64>()),
            (1000, 500, 7)
        );
    }

    #[test]
    fn a_record_is_worth_splitting_when_its_operation_causes_enough_of_its_conflicts() {
        let policy = SplitPolicy::default();
        // INCR1's hot key: every conflict is between adds.
        assert!(sample(40, 0, 0).worth_splitting(&policy));
        // A LIKE page at half writes: readers cause most conflicts, likes still a fair share.
        assert!(sample(29, 0, 71).worth_splitting(&policy));
        // The same page at a tenth writes: a split would stash some thirty readers per like.
        assert!(!sample(3, 0, 97).worth_splitting(&policy));
        // A District row: the adds' transactions mostly also write it otherwise.
        assert!(!sample(30, 70, 0).worth_splitting(&policy));
        // Too few conflicts, or none from a splittable operation.
        assert!(!sample(7, 0, 0).worth_splitting(&policy));
        assert!(
            !ConflictSample {
                op: None,
                ..sample(0, 0, 40)
            }
            .worth_splitting(&policy)
        );
    }
}
