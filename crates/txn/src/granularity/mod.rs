//! Automatic timestamp granularity: column groups chosen and changed while the database runs.
//!
//! The timestamp-granularity paper shows that OCC under contention is limited by *false
//! conflicts* (a reader's and a writer's columns share a record but not a column) and that
//! splitting TPC-C's hot tables into groups of columns accessed together removes most of them; it
//! leaves the split to the schema's author. Here a table declared with automatic groups
//! ([`Database::set_auto_groups`]) has them chosen by the engine:
//!
//! 1. *Sampling* (`sample.rs`): workers note the per-table column footprint of one commit in
//!    sixteen and, on each conflict abort, the tables whose read versions changed, in their own
//!    slot's counters.
//! 2. *Planning* (`plan.rs`, a pure function): a cost model of false conflicts against TID words
//!    per transaction proposes groups; hysteresis (a least gain, a least interval between changes)
//!    keeps it from flapping.
//! 3. *Regrouping* (`regroup.rs`): at a quiescent point every record moves to the new layout with
//!    conservative TIDs.
//!
//! Planning is epoch-driven: at a transaction's start a worker whose epoch reached the next
//! planning epoch takes the planner's role (if no one else has it), collects the samples, plans
//! each automatic table and regroups those that gain. There is no planner thread.
//!
//! Every protocol that validates by group is supported, Doppel's joined phases included (a
//! regrouping settles the database into a joined phase first), and so is durable operation (log
//! records name their columns, and each checkpoint records the groups its image was written in).
//! Workers that hold locks across transactions (`Worker::set_hold_locks`, prepared commits) are
//! not.

mod plan;
mod regroup;
mod sample;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use parking_lot::{Mutex, MutexGuard, RwLock};
use phasedb_storage::TableId;

use crate::database::{Database, MAX_WORKERS};
use crate::protocol::Protocol;

pub use plan::{CALIBRATION, Pattern, Plan, PlanConfig, TableStats, canonical, intensity, plan};
pub use regroup::{RegroupError, column_item};
pub(crate) use sample::{commit as sample_commit, conflict as sample_conflict};

use sample::SlotSample;

/// How automatic groups are planned.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GranularityConfig {
    /// Epochs between two planning rounds (an epoch is [`crate::Config::epoch_interval`]).
    pub plan_every_epochs: u64,
    /// Least time between two changes of one table's groups.
    pub min_interval: Duration,
    /// Least time after a change before another may put back together columns it separated.
    /// Once columns are split their false conflicts stop showing, so a merge rests on remembered
    /// counts only; a split rests on aborts seen, so it is never held this way.
    pub rejoin_hold: Duration,
    /// How many times [`PlanConfig::min_gain`] such a rejoining change must gain.
    pub rejoin_gain: f64,
    /// Weight kept by the counts of earlier rounds at each round (older samples fade).
    pub decay: f64,
    /// Weight kept by a remembered contention intensity at each round it is not measured.
    pub intensity_decay: f64,
    /// Planning rounds, from the first transaction on and again after a table's groups change,
    /// during which every commit's footprint is sampled rather than one in
    /// [`crate::worker::LATENCY_SAMPLE`]: the first decision rests on enough samples after one
    /// round instead of several.
    pub dense_rounds: u32,
    /// The planner's cost model and margins.
    pub plan: PlanConfig,
}

impl Default for GranularityConfig {
    fn default() -> Self {
        GranularityConfig {
            plan_every_epochs: 1,
            min_interval: Duration::from_millis(150),
            rejoin_hold: Duration::from_secs(1),
            rejoin_gain: 2.0,
            decay: 0.7,
            intensity_decay: 0.99,
            dense_rounds: 8,
            plan: PlanConfig::default(),
        }
    }
}

/// A change of a table's groups, for reports.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupChange {
    /// Time since the first planning round (the first transaction after a table was made
    /// automatic, so loading the data does not count).
    pub at: Duration,
    pub table: String,
    /// Column names of each new group.
    pub groups: Vec<Vec<String>>,
    /// Predicted cost per transaction before and after (see [`Plan`]).
    pub predicted: (f64, f64),
}

/// The planner's memory of one table.
#[derive(Default)]
struct TableMemory {
    stats: TableStats,
    last_change: Option<Instant>,
    /// Each column's group before the last change.
    before_last: Option<Vec<usize>>,
}

impl TableMemory {
    /// Whether proposal `p` may replace grouping `current` at `now` (the caller plans only once
    /// [`GranularityConfig::min_interval`] has passed since the last change): if it puts back
    /// together columns the last change separated, only after [`GranularityConfig::rejoin_hold`]
    /// and for [`GranularityConfig::rejoin_gain`] times the usual least gain (hysteresis against
    /// splitting and merging the same columns in turn).
    fn admits(&self, current: &[usize], p: &Plan, now: Instant, cfg: &GranularityConfig) -> bool {
        let Some(at) = self.last_change else {
            return true;
        };
        let since = now.duration_since(at);
        let rejoins = self
            .before_last
            .as_ref()
            .is_some_and(|before| rejoins(before, current, &p.group_of));
        !rejoins
            || (since >= cfg.rejoin_hold
                && p.current_cost - p.cost > cfg.rejoin_gain * cfg.plan.min_gain * p.current_cost)
    }
}

/// Whether `proposed` groups together two columns that were together in `before` and apart in
/// `current` (each slice gives every column's group).
fn rejoins(before: &[usize], current: &[usize], proposed: &[usize]) -> bool {
    let n = current.len().min(before.len()).min(proposed.len());
    (0..n).any(|a| {
        (a + 1..n).any(|b| {
            before[a] == before[b] && current[a] != current[b] && proposed[a] == proposed[b]
        })
    })
}

struct Planner {
    tables: Vec<TableMemory>,
    /// When the first planning round ran.
    started: Option<Instant>,
    /// Planning rounds left with every commit sampled (see [`GranularityConfig::dense_rounds`]).
    dense_left: u32,
}

/// The database-wide state of automatic groups.
pub(crate) struct Granularity {
    /// Per table: whether its groups are automatic (a table mask).
    auto: u64,
    /// Epoch at which the next planning round is due (`u64::MAX`: never).
    next_epoch: CachePadded<AtomicU64>,
    /// Whether every commit's footprint is sampled (written by the planner only).
    dense: CachePadded<AtomicBool>,
    /// Per activity slot, its worker's samples (empty until a table is made automatic).
    slots: Box<[CachePadded<Mutex<SlotSample>>]>,
    planner: Mutex<Planner>,
    changes: Mutex<Vec<GroupChange>>,
    events: AtomicU64,
    config: GranularityConfig,
    /// Set when planning is paused ([`Database::pause_granularity`]).
    paused: AtomicBool,
    /// Set while a regrouping waits for a quiescent point ([`Granularity::due`] is then true, so
    /// workers wait before their next transaction instead of racing the claims).
    pending: AtomicBool,
    /// Held for writing by a regrouping and for reading by the checkpointer while it writes an
    /// image: a checkpoint sees each table in one layout, the one it records.
    pub(crate) layout_gate: Arc<RwLock<()>>,
}

impl Default for Granularity {
    fn default() -> Self {
        Granularity {
            auto: 0,
            next_epoch: CachePadded::new(AtomicU64::new(u64::MAX)),
            dense: CachePadded::new(AtomicBool::new(false)),
            slots: Box::new([]),
            planner: Mutex::new(Planner {
                tables: Vec::new(),
                started: None,
                dense_left: 0,
            }),
            changes: Mutex::new(Vec::new()),
            events: AtomicU64::new(0),
            config: GranularityConfig::default(),
            paused: AtomicBool::new(false),
            pending: AtomicBool::new(false),
            layout_gate: Arc::new(RwLock::new(())),
        }
    }
}

impl Granularity {
    /// Whether any table has automatic groups (sampling is on).
    #[inline(always)]
    pub(crate) fn active(&self) -> bool {
        self.auto != 0
    }

    /// Whether table `t` has automatic groups.
    #[inline]
    pub(crate) fn is_auto(&self, t: TableId) -> bool {
        (t as usize) < 64 && self.auto & 1 << t != 0
    }

    /// Whether a planning round is due at `epoch`.
    #[inline(always)]
    pub(crate) fn due(&self, epoch: u64) -> bool {
        epoch >= self.next_epoch.load(Ordering::Relaxed)
    }

    pub(crate) fn slot(&self, slot: usize) -> MutexGuard<'_, SlotSample> {
        self.slots[slot].lock()
    }

    /// Marks a regrouping pending until the returned guard drops.
    pub(crate) fn hold_workers(&self) -> HoldWorkers<'_> {
        self.pending.store(true, Ordering::Release);
        let saved = self.next_epoch.swap(0, Ordering::AcqRel);
        HoldWorkers { g: self, saved }
    }

    /// The weight of the worker's `n`th commit's footprint in the samples (the commits it
    /// stands for), or `None` when it is not sampled.
    #[inline]
    pub(crate) fn commit_weight(&self, n: u64) -> Option<u64> {
        if self.dense.load(Ordering::Relaxed) {
            Some(1)
        } else {
            sampled(n).then_some(crate::worker::LATENCY_SAMPLE)
        }
    }

    pub(crate) fn next_event(&self) -> u64 {
        self.events.fetch_add(1, Ordering::Relaxed)
    }
}

/// A pending regrouping (see [`Granularity::hold_workers`]).
pub(crate) struct HoldWorkers<'a> {
    g: &'a Granularity,
    saved: u64,
}

impl Drop for HoldWorkers<'_> {
    fn drop(&mut self) {
        self.g.next_epoch.store(self.saved, Ordering::Release);
        self.g.pending.store(false, Ordering::Release);
    }
}

/// Whether the worker's `n`th transaction is sampled: one in [`crate::worker::LATENCY_SAMPLE`],
/// by the top bits of `n` times the golden ratio (Fibonacci hashing), so a workload that cycles
/// through transaction types with a period dividing the rate is still sampled evenly.
#[inline]
fn sampled(n: u64) -> bool {
    const SHIFT: u32 = 64 - crate::worker::LATENCY_SAMPLE.trailing_zeros();
    n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> SHIFT == 0
}

/// A planning round, run by the worker in `slot` between transactions when one is due.
#[cold]
pub(crate) fn tick<P: Protocol>(db: &Database<P>, epoch: u64) {
    let g = &db.granularity;
    let Some(mut planner) = g.planner.try_lock() else {
        // A regrouping waits for a quiescent point: stay out of transactions until it is done.
        while g.pending.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        return;
    };
    if !g.due(epoch) {
        return;
    }
    g.next_epoch
        .store(epoch + g.config.plan_every_epochs.max(1), Ordering::Relaxed);
    if g.paused.load(Ordering::Relaxed) {
        return;
    }
    let now = Instant::now();
    if planner.started.is_none() {
        planner.started = Some(now);
        planner.dense_left = g.config.dense_rounds;
    }
    collect(g, &mut planner);
    let started = planner.started.unwrap_or(now);
    let mut regrouped = false;
    for t in 0..planner.tables.len() {
        let t_id = t as TableId;
        if !g.is_auto(t_id) {
            continue;
        }
        let current = db.table(t_id).schema().group_of_columns();
        let memory = &mut planner.tables[t];
        if let Some(k) = intensity(&current, &memory.stats) {
            memory.stats.intensity = k;
        }
        let recent = memory
            .last_change
            .is_some_and(|at| now.duration_since(at) < g.config.min_interval);
        let proposal = if recent {
            None
        } else {
            plan(&current, &memory.stats, &g.config.plan)
                .filter(|p| memory.admits(&current, p, now, &g.config))
        };
        // While a checkpoint writes its image the change waits for a later round.
        if let Some(p) = proposal
            && let Some(_gate) = g.layout_gate.try_write()
            && regroup::regroup(db, t_id, &p.group_of) == Ok(true)
        {
            memory.last_change = Some(now);
            memory.before_last = Some(current);
            // Counts measured under the old groups would misjudge the new ones' conflicts.
            memory.stats.conflicts = 0.0;
            memory.stats.commits = 0.0;
            regrouped = true;
            g.changes.lock().push(GroupChange {
                at: now.duration_since(started),
                table: db.table(t_id).name().to_string(),
                groups: describe(db.table(t_id).schema()),
                predicted: (p.current_cost, p.cost),
            });
        }
        memory.stats.intensity *= g.config.intensity_decay;
    }
    // The new groups' first decision (to keep them or not) rests on dense samples too.
    if regrouped {
        planner.dense_left = g.config.dense_rounds;
    }
    g.dense.store(planner.dense_left > 0, Ordering::Relaxed);
    planner.dense_left = planner.dense_left.saturating_sub(1);
}

/// Decays the planner's counts and adds every worker's samples since the last round.
fn collect(g: &Granularity, planner: &mut Planner) {
    let decay = g.config.decay;
    for m in &mut planner.tables {
        m.stats.commits *= decay;
        m.stats.conflicts *= decay;
        for p in &mut m.stats.patterns {
            p.weight *= decay;
        }
        m.stats.patterns.retain(|p| p.weight >= 0.5);
    }
    for slot in g.slots.iter() {
        let mut s = slot.lock();
        for (t, ts) in s.tables.iter_mut().enumerate() {
            if ts.commits == 0 && ts.conflicts == 0 {
                continue;
            }
            if planner.tables.len() <= t {
                planner.tables.resize_with(t + 1, TableMemory::default);
            }
            let stats = &mut planner.tables[t].stats;
            stats.commits += ts.commits as f64;
            stats.conflicts += ts.conflicts as f64;
            for &(read, write, n) in &ts.patterns {
                match (stats.patterns.iter_mut()).find(|p| p.read == read && p.write == write) {
                    Some(p) => p.weight += n as f64,
                    None => stats.patterns.push(Pattern {
                        read,
                        write,
                        weight: n as f64,
                    }),
                }
            }
            ts.patterns.clear();
            ts.commits = 0;
            ts.conflicts = 0;
        }
    }
    for m in &mut planner.tables {
        m.stats.bound_patterns();
    }
}

impl TableStats {
    /// Keeps the heaviest patterns only, so the planner's memory stays bounded.
    fn bound_patterns(&mut self) {
        if self.patterns.len() > 4 * plan::MAX_PATTERNS {
            self.patterns.sort_by(|a, b| b.weight.total_cmp(&a.weight));
            self.patterns.truncate(2 * plan::MAX_PATTERNS);
        }
    }
}

/// For reports: each automatic table's groups now, and every change (time since the database
/// opened, table, new groups).
pub(crate) fn report<P: Protocol>(db: &Database<P>) -> Vec<(&'static str, String)> {
    if !db.granularity.active() {
        return Vec::new();
    }
    let show = |groups: &[Vec<String>]| {
        (groups.iter())
            .map(|g| format!("[{}]", g.join(" ")))
            .collect::<Vec<_>>()
            .join("")
    };
    let now = (0..db.tables().len() as TableId)
        .filter(|&t| db.granularity.is_auto(t))
        .map(|t| format!("{} {}", db.table(t).name(), show(&db.groups_of(t))))
        .collect::<Vec<_>>()
        .join("; ");
    let changes = (db.group_changes().iter())
        .map(|c| format!("{:.2}s {} {}", c.at.as_secs_f64(), c.table, show(&c.groups)))
        .collect::<Vec<_>>()
        .join("; ");
    let counts = {
        let planner = db.granularity.planner.lock();
        (planner.tables.iter().enumerate())
            .filter(|&(t, m)| db.granularity.is_auto(t as TableId) && m.stats.commits > 0.0)
            .map(|(t, m)| {
                let s = &m.stats;
                format!(
                    "{} commits {:.0} conflicts {:.1} ({:.3}%) intensity {:.4}",
                    db.table(t as TableId).name(),
                    s.commits,
                    s.conflicts,
                    100.0 * s.conflicts / s.commits,
                    s.intensity,
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    vec![
        ("auto_groups", now),
        ("planner_counts", counts),
        (
            "group_changes",
            if changes.is_empty() {
                "none".into()
            } else {
                changes
            },
        ),
    ]
}

/// Column names of each group of `schema`.
fn describe(schema: &phasedb_storage::Schema) -> Vec<Vec<String>> {
    (schema.groups().iter())
        .map(|g| {
            (schema.columns().iter().enumerate())
                .filter(|(c, _)| g.columns & 1 << c != 0)
                .map(|(_, col)| col.name.clone())
                .collect()
        })
        .collect()
}

impl<P: Protocol> Database<P> {
    /// Makes table `t`'s column groups automatic: the engine samples how transactions use its
    /// columns and conflict on them, and changes its groups while it runs (see
    /// [`crate::granularity`]). Its groups as declared are the starting point.
    pub fn set_auto_groups(&mut self, t: TableId) -> Result<(), RegroupError> {
        regroup::check(self, t)?;
        let g = &mut self.granularity;
        if g.slots.is_empty() {
            g.slots = (0..MAX_WORKERS).map(|_| Default::default()).collect();
        }
        g.auto |= 1 << t;
        g.next_epoch.store(0, Ordering::Relaxed);
        Ok(())
    }

    /// Whether table `t`'s column groups are automatic.
    pub fn auto_groups(&self, t: TableId) -> bool {
        self.granularity.is_auto(t)
    }

    /// Sets how automatic groups are planned (before workers start).
    pub fn set_granularity_config(&mut self, config: GranularityConfig) {
        self.granularity.config = config;
    }

    /// Stops (or resumes) planning automatic groups; sampling goes on.
    pub fn pause_granularity(&self, paused: bool) {
        self.granularity.paused.store(paused, Ordering::Relaxed);
    }

    /// Changes table `t`'s column groups now (`group_of[c]`: the group of column `c`), waiting
    /// for a checkpoint writing its image, then for a quiescent point (under Doppel, for the
    /// split phase under way to be reconciled). Call it from a thread that is not running a
    /// transaction. False if the table had these groups already.
    pub fn regroup(&self, t: TableId, group_of: &[usize]) -> Result<bool, RegroupError> {
        let _planner = self.granularity.planner.lock();
        let _gate = self.granularity.layout_gate.write();
        regroup::regroup(self, t, group_of)
    }

    /// The changes of automatic groups so far, oldest first.
    pub fn group_changes(&self) -> Vec<GroupChange> {
        self.granularity.changes.lock().clone()
    }

    /// Column names of each of table `t`'s current groups.
    pub fn groups_of(&self, t: TableId) -> Vec<Vec<String>> {
        describe(self.table(t).schema())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proposal(group_of: &[usize], current_cost: f64, cost: f64) -> Plan {
        Plan {
            group_of: group_of.to_vec(),
            cost,
            current_cost,
        }
    }

    /// Counts that alternate every 50 ms between favouring a split of column 2 and favouring
    /// one group: the split is taken, the merges that follow are held off, and no change flips
    /// back and forth within a second.
    #[test]
    fn alternating_counts_split_once_and_do_not_flip_back() {
        let cfg = GranularityConfig::default();
        let start = Instant::now();
        let mut memory = TableMemory::default();
        let mut current = vec![0, 0, 0];
        let mut changes = Vec::new();
        for round in 0..20u32 {
            let now = start + Duration::from_millis(50 * round as u64);
            // A split gains a lot (aborts seen); a merge saves a TID word (a clear relative
            // gain once the split stopped the aborts, but not twice the least gain).
            let p = if round % 2 == 0 {
                proposal(&[0, 0, 1], 0.05, 0.01)
            } else {
                proposal(&[0, 0, 0], 0.0104, 0.0080)
            };
            if p.group_of != current && memory.admits(&current, &p, now, &cfg) {
                memory.last_change = Some(now);
                memory.before_last = Some(std::mem::replace(&mut current, p.group_of));
                changes.push(round);
            }
        }
        assert_eq!(changes, vec![0], "changes at rounds {changes:?}");
        // After the hold, a merge that gains more than twice the least gain is taken.
        let later = start + cfg.rejoin_hold + Duration::from_millis(50);
        assert!(!memory.admits(&current, &proposal(&[0, 0, 0], 0.0104, 0.0080), later, &cfg));
        assert!(memory.admits(&current, &proposal(&[0, 0, 0], 0.0104, 0.0050), later, &cfg));
        // A further split is never held by the rejoin rule.
        let soon = start + cfg.min_interval + Duration::from_millis(1);
        assert!(memory.admits(&current, &proposal(&[0, 1, 2], 0.05, 0.01), soon, &cfg));
    }

    #[test]
    fn rejoining_means_merging_columns_the_last_change_separated() {
        assert!(rejoins(&[0, 0, 0], &[0, 0, 1], &[0, 0, 0]));
        assert!(!rejoins(&[0, 0, 0], &[0, 0, 1], &[0, 1, 2]));
        assert!(!rejoins(&[0, 1, 1], &[0, 1, 2], &[0, 0, 2]));
        assert!(rejoins(&[0, 1, 1], &[0, 1, 2], &[0, 1, 1]));
    }
}
