use hdrhistogram::Histogram;

use crate::error::Conflict;

/// Counters and latencies of one transaction type, kept per worker and merged on read.
#[derive(Clone, Debug)]
pub struct TypeStats {
    /// Committed transactions.
    pub committed: u64,
    /// Attempts aborted by a conflict (each retried).
    pub conflicts: u64,
    /// Conflicts by cause, indexed like [`CONFLICT_KINDS`].
    pub conflict_kinds: [u64; 7],
    /// Transactions the procedure aborted.
    pub user_aborts: u64,
    /// Transactions that ended in another error (duplicate key, panic, retry limit...).
    pub failures: u64,
    /// Attempts stashed until a later phase (Doppel: they touched split data).
    pub stashed: u64,
    /// Latency of committed transactions in nanoseconds, from first attempt to commit, for one
    /// transaction in `LATENCY_SAMPLE` (see `Worker::execute`).
    pub latency_ns: Histogram<u64>,
}

/// The conflict causes in the order of [`TypeStats::conflict_kinds`].
pub const CONFLICT_KINDS: [Conflict; 7] = [
    Conflict::ReadLocked,
    Conflict::WriteLocked,
    Conflict::Validation,
    Conflict::Phantom,
    Conflict::InsertRace,
    Conflict::Deadlock,
    Conflict::LockTimeout,
];

impl Default for TypeStats {
    fn default() -> Self {
        TypeStats {
            committed: 0,
            conflicts: 0,
            conflict_kinds: [0; 7],
            user_aborts: 0,
            failures: 0,
            stashed: 0,
            latency_ns: Histogram::new_with_bounds(1, 60_000_000_000, 3)
                .expect("valid histogram bounds"),
        }
    }
}

impl TypeStats {
    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &TypeStats) {
        self.committed += other.committed;
        self.conflicts += other.conflicts;
        for (a, b) in self.conflict_kinds.iter_mut().zip(other.conflict_kinds) {
            *a += b;
        }
        self.user_aborts += other.user_aborts;
        self.failures += other.failures;
        self.stashed += other.stashed;
        self.latency_ns
            .add(&other.latency_ns)
            .expect("histograms with equal bounds merge");
    }

    /// Conflicting attempts over all attempts.
    pub fn abort_rate(&self) -> f64 {
        let attempts = self.committed + self.conflicts + self.user_aborts + self.failures;
        if attempts == 0 {
            0.0
        } else {
            self.conflicts as f64 / attempts as f64
        }
    }

    pub(crate) fn count_conflict(&mut self, c: Conflict) {
        self.conflicts += 1;
        let i = CONFLICT_KINDS.iter().position(|k| *k == c).unwrap_or(0);
        self.conflict_kinds[i] += 1;
    }
}

/// Statistics of a worker (or of several merged), one entry per transaction type.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub types: Vec<TypeStats>,
}

impl Stats {
    /// The entry of type `ty`, created on first use.
    #[inline]
    pub fn of_type(&mut self, ty: usize) -> &mut TypeStats {
        if self.types.len() <= ty {
            self.types.resize_with(ty + 1, TypeStats::default);
        }
        &mut self.types[ty]
    }

    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &Stats) {
        for (ty, s) in other.types.iter().enumerate() {
            self.of_type(ty).merge(s);
        }
    }

    /// All types together.
    pub fn total(&self) -> TypeStats {
        let mut t = TypeStats::default();
        for s in &self.types {
            t.merge(s);
        }
        t
    }

    /// Clears every counter and histogram (at the end of a warm-up).
    pub fn reset(&mut self) {
        for s in &mut self.types {
            *s = TypeStats::default();
        }
    }
}
