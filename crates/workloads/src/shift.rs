//! A workload whose conflicting columns change halfway through a run (issue 39's changing-workload
//! target for automatic column groups).
//!
//! One table of a few hot rows with four counters `c0..c3`. A share of the transactions
//! ([`ShiftConfig::write_share`]) are *writers*: on [`ShiftConfig::ops`] distinct rows they read
//! two counters and add one to each; the others are *readers* of two other counters on as many
//! rows. Which counters depends on the phase:
//!
//! | phase | writers update | readers read |
//! |-------|----------------|--------------|
//! | 1     | `c0`, `c1`     | `c2`, `c3`   |
//! | 2     | `c0`, `c2`     | `c1`, `c3`   |
//!
//! so the split that removes phase 1's false conflicts (`{c0 c1}{c2 c3}`, [`ShiftGroups::First`])
//! puts phase 2's readers and writers in the same groups again, and phase 2 wants
//! `{c0 c2}{c1 c3}` ([`ShiftGroups::Second`]). The phase changes [`ShiftConfig::switch_after`]
//! after the tables are loaded.
//!
//! Each thread counts committed transactions and conflicting attempts per
//! [`ShiftConfig::interval`] (its procedure counts its own attempts: `Tx` API only), so a run
//! reports its abort rate over time ([`Shift::intervals`]). Every committed writer adds one to `c0`
//! and one to `c1` or `c2`, so `c0 = c1 + c2` on every row, and `c0` sums to the writes committed.

use std::sync::Mutex;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use phasedb_storage::{ColumnType, Schema, TableSpec};
use phasedb_txn::{Database, MAX_WORKERS, Protocol, TableId, TxResult, Worker, columns};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::Workload;

/// The counters.
const COLUMNS: usize = 4;

/// The fixed column groups a run can declare (or `Auto`: the engine chooses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShiftGroups {
    /// One group per row.
    Coarse,
    /// One group per counter.
    Fine,
    /// Phase 1's split: `{c0 c1}{c2 c3}`.
    First,
    /// Phase 2's split: `{c0 c2}{c1 c3}`.
    Second,
    /// Declared automatic; starts coarse.
    Auto,
}

impl ShiftGroups {
    /// Every choice, fixed ones first.
    pub const ALL: [ShiftGroups; 5] = [
        ShiftGroups::Coarse,
        ShiftGroups::Fine,
        ShiftGroups::First,
        ShiftGroups::Second,
        ShiftGroups::Auto,
    ];

    /// The name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ShiftGroups::Coarse => "coarse",
            ShiftGroups::Fine => "fine",
            ShiftGroups::First => "first",
            ShiftGroups::Second => "second",
            ShiftGroups::Auto => "auto",
        }
    }

    /// The group of each counter.
    fn group_of(self) -> [usize; COLUMNS] {
        match self {
            ShiftGroups::Coarse | ShiftGroups::Auto => [0; COLUMNS],
            ShiftGroups::Fine => [0, 1, 2, 3],
            ShiftGroups::First => [0, 0, 1, 1],
            ShiftGroups::Second => [0, 1, 0, 1],
        }
    }
}

/// Settings of the shifting workload.
#[derive(Clone, Debug)]
pub struct ShiftConfig {
    /// Rows (all hot).
    pub rows: u64,
    /// Distinct rows per transaction.
    pub ops: usize,
    /// Share of transactions that are writers.
    pub write_share: f64,
    /// Time from the load to the change of phase.
    pub switch_after: Duration,
    /// Length of a counting interval.
    pub interval: Duration,
    /// The table's column groups.
    pub groups: ShiftGroups,
}

impl Default for ShiftConfig {
    fn default() -> Self {
        ShiftConfig {
            // Half the rows per transaction and one writer in ten: readers then meet writers far
            // more often than writers meet each other, so the aborts a grouping can remove (false
            // conflicts) outnumber those none can (16 rows, 4 per transaction, half writers
            // aborted 15-18% under every grouping, the right split included).
            rows: 16,
            ops: 8,
            write_share: 0.1,
            switch_after: Duration::from_secs(2),
            interval: Duration::from_millis(100),
            groups: ShiftGroups::Auto,
        }
    }
}

impl ShiftConfig {
    /// Checks the settings, with a message fit for a command-line user.
    pub fn validate(&self) -> Result<(), String> {
        if self.ops == 0 || self.rows < self.ops as u64 {
            return Err("--ops must be at least 1 and at most --rows".into());
        }
        if !(0.0..=1.0).contains(&self.write_share) {
            return Err("--write-share must be between 0 and 1".into());
        }
        if self.interval.is_zero() {
            return Err("the counting interval must be positive".into());
        }
        Ok(())
    }
}

/// Committed transactions and conflicting attempts in one interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Interval {
    pub committed: u64,
    pub conflicts: u64,
}

impl Interval {
    /// Conflicting attempts over all attempts.
    pub fn abort_rate(&self) -> f64 {
        let attempts = self.committed + self.conflicts;
        if attempts == 0 {
            0.0
        } else {
            self.conflicts as f64 / attempts as f64
        }
    }
}

/// The shifting workload.
pub struct Shift {
    cfg: ShiftConfig,
    table: TableId,
    loaded: OnceLock<Instant>,
    /// Committed writers per thread, for the check.
    writes: Vec<CachePadded<AtomicU64>>,
    /// Every finished thread's intervals, summed.
    intervals: Mutex<Vec<Interval>>,
}

/// A thread's generator state and counts.
pub struct ShiftThread {
    rng: SmallRng,
    index: usize,
    keys: Vec<u64>,
    intervals: Vec<Interval>,
}

impl Shift {
    /// A workload with settings `cfg` (validated by the caller).
    pub fn new(cfg: ShiftConfig) -> Shift {
        Shift {
            cfg,
            table: 0,
            loaded: OnceLock::new(),
            writes: (0..MAX_WORKERS).map(|_| CachePadded::default()).collect(),
            intervals: Mutex::new(Vec::new()),
        }
    }

    /// Committed transactions and conflicting attempts per [`ShiftConfig::interval`] since the
    /// load, summed over the threads that finished.
    pub fn intervals(&self) -> Vec<Interval> {
        self.intervals.lock().expect("not poisoned").clone()
    }

    /// The counters writers and readers use now: (written, read), as masks.
    fn phase(&self, since: Duration) -> (u64, u64) {
        if since < self.cfg.switch_after {
            (columns(&[0, 1]), columns(&[2, 3]))
        } else {
            (columns(&[0, 2]), columns(&[1, 3]))
        }
    }
}

impl Workload for Shift {
    type Thread = ShiftThread;

    fn name(&self) -> &'static str {
        "shift"
    }

    fn txn_types(&self) -> Vec<&'static str> {
        vec!["write", "read"]
    }

    fn setup<P: Protocol>(&mut self, db: &mut Database<P>) {
        let groups = self.cfg.groups.group_of();
        let schema = (0..COLUMNS)
            .fold(Schema::builder(), |b, c| {
                b.column(&format!("c{c}"), ColumnType::U64, groups[c])
            })
            .build()
            .expect("the counters' schema is valid");
        let spec = TableSpec::new("shift", schema, self.cfg.rows as usize);
        self.table = db.create_table(spec);
        for k in 0..self.cfg.rows {
            db.load(self.table, k, |_| {}).expect("keys are distinct");
        }
        if self.cfg.groups == ShiftGroups::Auto {
            db.set_auto_groups(self.table)
                .unwrap_or_else(|e| panic!("--granularity auto: {e}"));
        }
        let _ = self.loaded.set(Instant::now());
    }

    fn thread(&self, index: usize, seed: u64) -> ShiftThread {
        ShiftThread {
            rng: SmallRng::seed_from_u64(seed ^ (index as u64 + 1).wrapping_mul(0x9e37_79b9)),
            index,
            keys: Vec::with_capacity(self.cfg.ops),
            intervals: Vec::new(),
        }
    }

    fn rng<'a>(&self, thread: &'a mut ShiftThread) -> &'a mut SmallRng {
        &mut thread.rng
    }

    fn run_one<P: Protocol>(
        &self,
        th: &mut ShiftThread,
        worker: &mut Worker<'_, P>,
    ) -> TxResult<()> {
        let since = self.loaded.get_or_init(Instant::now).elapsed();
        let (written, read) = self.phase(since);
        let write = th.rng.random_bool(self.cfg.write_share);
        th.keys.clear();
        while th.keys.len() < self.cfg.ops {
            let k = th.rng.random_range(0..self.cfg.rows);
            if !th.keys.contains(&k) {
                th.keys.push(k);
            }
        }
        let (t, keys) = (self.table, &th.keys);
        let mut attempts = 0u64;
        let outcome = worker.execute(usize::from(!write), |tx| {
            attempts += 1;
            for &k in keys {
                let cols = if write { written } else { read };
                let row = tx.get_columns(t, k, cols)?.expect("rows are never deleted");
                if write {
                    let (a, b) = (
                        written.trailing_zeros() as usize,
                        63 - written.leading_zeros() as usize,
                    );
                    let (va, vb) = (row.u64(a), row.u64(b));
                    tx.update(t, k, |r| {
                        r.set_u64(a, va + 1);
                        r.set_u64(b, vb + 1);
                    })?;
                }
            }
            Ok(())
        });
        let i = (since.as_nanos() / self.cfg.interval.as_nanos()) as usize;
        if th.intervals.len() <= i {
            th.intervals.resize(i + 1, Interval::default());
        }
        let slot = &mut th.intervals[i];
        slot.conflicts += attempts.saturating_sub(1);
        if outcome.is_ok() {
            slot.committed += 1;
            if write {
                let w = &self.writes[th.index % MAX_WORKERS];
                w.store(w.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            }
        }
        outcome
    }

    fn finish(&self, th: ShiftThread) {
        let mut all = self.intervals.lock().expect("not poisoned");
        if all.len() < th.intervals.len() {
            all.resize(th.intervals.len(), Interval::default());
        }
        for (sum, own) in all.iter_mut().zip(&th.intervals) {
            sum.committed += own.committed;
            sum.conflicts += own.conflicts;
        }
    }

    fn check<P: Protocol>(&self, db: &Database<P>) -> Result<(), String> {
        let expected: u64 = self.writes.iter().map(|w| w.load(Ordering::Relaxed)).sum();
        let mut sum = 0u64;
        let mut bad = None;
        db.for_each_row_quiescent(self.table, |key, row| {
            let (c0, c1, c2) = (row.u64(0), row.u64(1), row.u64(2));
            sum += c0;
            if c0 != c1 + c2 && bad.is_none() {
                bad = Some(format!("row {key}: c0 = {c0} but c1 + c2 = {}", c1 + c2));
            }
        });
        if let Some(b) = bad {
            return Err(b);
        }
        let ops = self.cfg.ops as u64;
        if sum != expected * ops {
            return Err(format!(
                "c0 sums to {sum}, but {expected} writers of {ops} rows committed"
            ));
        }
        Ok(())
    }

    fn settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("rows", self.cfg.rows.to_string()),
            ("ops", self.cfg.ops.to_string()),
            ("write_share", self.cfg.write_share.to_string()),
            (
                "switch_after_s",
                self.cfg.switch_after.as_secs_f64().to_string(),
            ),
            ("granularity", self.cfg.groups.name().into()),
        ]
    }
}
