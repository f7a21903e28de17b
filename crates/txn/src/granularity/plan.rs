//! The planner: from a table's sampled access patterns and conflict rate, the column groups that
//! minimise the predicted cost per transaction, and whether changing to them is worth it.
//!
//! The model follows the granularity paper's account of false conflicts (§3): a transaction that
//! read columns `R` of a record is invalidated by a concurrent writer of columns `W'` of the same
//! record when some group holds columns of both. Columns a transaction writes without reading them
//! (commutative updates, blind overwrites) are locked and versioned but never validated, so they
//! make it no victim: counting them as read kept a table's blind-written counter (TPC-C's `W_YTD`)
//! with the columns its writers read. For a grouping `G` the planner counts,
//! over pairs of sampled patterns weighted by frequency, the share that collide at group level
//! (`collide(G)`); true conflicts (shared columns) collide under every grouping. The observed abort
//! rate `A` was produced by the current grouping `G₀`, so the abort rate predicted for `G` is
//! `A · collide(G) / collide(G₀)`. Every group a transaction touches costs a TID word to read,
//! validate and lock, so
//!
//! `cost(G) = abort_cost · A · collide(G) / collide(G₀) + group_cost · groups touched per transaction`
//!
//! With no conflicts the second term alone decides: one group (coarse), no false splitting.
//!
//! Search: columns that no pattern tells apart (the same patterns read them, the same write them)
//! are never worth separating, so they form one *atom*. Starting from every atom in its own group,
//! groups are merged greedily, the merge that costs least first, while merging does not raise the
//! cost (or while there are more than [`Schema::MAX_GROUPS`] groups). The result is compared with
//! the coarse grouping and the current one. Hysteresis: a change is proposed only when it lowers
//! the cost by [`PlanConfig::min_gain`] of the current cost and by [`PlanConfig::min_abs_gain`].

use phasedb_storage::Schema;

/// One sampled way transactions access a table: the columns they read and those they write, and
/// how often (a decayed count).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pattern {
    pub read: u64,
    pub write: u64,
    pub weight: f64,
}

/// What the planner knows of one table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TableStats {
    /// Distinct access patterns of sampled committed transactions.
    pub patterns: Vec<Pattern>,
    /// Sampled committed transactions that touched the table (decayed, scaled to all commits).
    pub commits: f64,
    /// Conflict aborts in which a version of the table read by the aborted attempt had changed
    /// (decayed).
    pub conflicts: f64,
    /// The contention intensity (see [`intensity`]) measured last, used while the current
    /// grouping makes too few patterns collide to measure it (a split that removed every false
    /// conflict must not be undone because conflicts stopped).
    pub intensity: f64,
}

/// The planner's constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlanConfig {
    /// Cost of one aborted attempt, in transactions.
    pub abort_cost: f64,
    /// Cost of one more column group touched by a transaction (a TID word read, validated and
    /// perhaps locked), in transactions.
    pub group_cost: f64,
    /// Least relative gain (a fraction of the current cost) for which the grouping changes.
    pub min_gain: f64,
    /// Least absolute gain (in transactions per transaction) for which the grouping changes.
    pub min_abs_gain: f64,
    /// Fewest sampled commits before the planner decides anything for a table.
    pub min_commits: f64,
}

impl Default for PlanConfig {
    fn default() -> Self {
        PlanConfig {
            abort_cost: 1.0,
            // A TID word is a few nanoseconds against microseconds of a transaction that touches
            // several tables (TPC-C); at 0.01 Customer stayed whole until 3% of its transactions
            // aborted on it, which already doubles TPC-C's abort rate at two threads.
            group_cost: 0.002,
            min_gain: 0.2,
            // At two threads TPC-C's District aborts ~0.2% of its transactions on Payment's
            // writes: small, yet half of the run's aborts.
            min_abs_gain: 0.0005,
            min_commits: 64.0,
        }
    }
}

/// A grouping the planner proposes.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The group of each column, numbered by their lowest column (see [`canonical`]).
    pub group_of: Vec<usize>,
    /// Predicted cost per transaction of the proposed grouping.
    pub cost: f64,
    /// Predicted (that is, observed) cost per transaction of the current grouping.
    pub current_cost: f64,
}

/// Least share of colliding pattern pairs under the current grouping from which the contention
/// intensity is measured rather than remembered.
pub const CALIBRATION: f64 = 0.001;

/// At most this many patterns (the heaviest) enter the model.
pub const MAX_PATTERNS: usize = 32;

/// Renumbers groups in the order of their lowest column, so equal groupings compare equal.
pub fn canonical(group_of: &[usize]) -> Vec<usize> {
    let mut map: Vec<Option<usize>> = vec![None; group_of.len().max(1) + Schema::MAX_GROUPS];
    let mut next = 0;
    group_of
        .iter()
        .map(|&g| {
            if g >= map.len() {
                map.resize(g + 1, None);
            }
            *map[g].get_or_insert_with(|| {
                next += 1;
                next - 1
            })
        })
        .collect()
}

/// Column masks of the groups of `group_of`.
fn masks(group_of: &[usize]) -> Vec<u64> {
    let n = group_of.iter().max().map_or(0, |g| g + 1);
    let mut m = vec![0u64; n];
    for (c, &g) in group_of.iter().enumerate() {
        m[g] |= 1 << c;
    }
    m
}

/// One pattern in the model: columns touched, columns read, columns written, frequency.
type Access = (u64, u64, u64, f64);

/// The model of one table's patterns, ready to price groupings.
struct Model {
    patterns: Vec<Access>,
    abort_rate: f64,
    all: u64,
}

impl Model {
    fn new(columns: usize, stats: &TableStats) -> Model {
        let all = if columns >= 64 {
            u64::MAX
        } else {
            (1u64 << columns) - 1
        };
        let mut ps: Vec<Pattern> = stats
            .patterns
            .iter()
            .filter(|p| p.weight > 0.0)
            .copied()
            .collect();
        ps.sort_by(|a, b| b.weight.total_cmp(&a.weight));
        ps.truncate(MAX_PATTERNS);
        let total: f64 = ps.iter().map(|p| p.weight).sum();
        Model {
            patterns: ps
                .iter()
                .map(|p| {
                    let (r, w) = (p.read & all, p.write & all);
                    (r | w, r, w, p.weight / total)
                })
                .collect(),
            abort_rate: if stats.commits > 0.0 {
                stats.conflicts / stats.commits
            } else {
                0.0
            },
            all,
        }
    }

    /// Bit mask of the groups (by index into `groups`) that hold columns of `cols`.
    fn touched(groups: &[u64], cols: u64) -> u64 {
        (groups.iter().enumerate())
            .filter(|(_, g)| *g & cols != 0)
            .fold(0, |m, (i, _)| m | 1 << i)
    }

    /// Frequency-weighted share of pattern pairs that collide at group level, and groups touched
    /// per transaction.
    fn measure(&self, groups: &[u64]) -> (f64, f64) {
        let touched: Vec<Access> = (self.patterns.iter())
            .map(|&(a, r, w, p)| {
                let g = |m| Self::touched(groups, m);
                (g(a), g(r), g(w), p)
            })
            .collect();
        let mut collide = 0.0;
        let mut per_tx = 0.0;
        for &(a, r, _, p) in &touched {
            per_tx += p * (a.count_ones().max(1) as f64);
            for &(_, _, w, q) in &touched {
                if r & w != 0 {
                    collide += p * q;
                }
            }
        }
        (collide, per_tx)
    }

    /// Predicted cost per transaction of `groups` at contention intensity `kappa`.
    fn cost(&self, groups: &[u64], kappa: f64, cfg: &PlanConfig) -> f64 {
        let (collide, per_tx) = self.measure(groups);
        cfg.abort_cost * kappa * collide + cfg.group_cost * per_tx
    }

    /// Columns no pattern tells apart, as masks (the untouched columns form one of them).
    fn atoms(&self) -> Vec<u64> {
        let mut atoms: Vec<((u64, u64, u64), u64)> = Vec::new();
        let mut m = self.all;
        while m != 0 {
            let c = m.trailing_zeros();
            m &= m - 1;
            let sig = |f: &dyn Fn(&Access) -> u64| {
                (self.patterns.iter().enumerate())
                    .filter(|(_, p)| f(p) & 1 << c != 0)
                    .fold(0u64, |s, (i, _)| s | 1 << i)
            };
            let key = (sig(&|p| p.0), sig(&|p| p.1), sig(&|p| p.2));
            match atoms.iter_mut().find(|a| a.0 == key) {
                Some(a) => a.1 |= 1 << c,
                None => atoms.push((key, 1 << c)),
            }
        }
        atoms.into_iter().map(|a| a.1).collect()
    }
}

/// Greedy agglomeration of `groups` while merging does not raise the cost.
fn agglomerate(model: &Model, mut groups: Vec<u64>, kappa: f64, cfg: &PlanConfig) -> Vec<u64> {
    let mut cost = model.cost(&groups, kappa, cfg);
    while groups.len() > 1 {
        let mut best: Option<(f64, usize, usize)> = None;
        for i in 0..groups.len() {
            for j in i + 1..groups.len() {
                let mut merged = groups.clone();
                merged[i] |= merged[j];
                merged.swap_remove(j);
                let c = model.cost(&merged, kappa, cfg);
                if best.is_none_or(|b| c < b.0) {
                    best = Some((c, i, j));
                }
            }
        }
        let Some((c, i, j)) = best else { break };
        if c > cost + 1e-12 && groups.len() <= Schema::MAX_GROUPS {
            break;
        }
        groups[i] |= groups[j];
        groups.swap_remove(j);
        cost = c;
    }
    groups
}

/// The grouping (group of each column) that `masks` describe.
fn group_of(columns: usize, groups: &[u64]) -> Vec<usize> {
    let mut out = vec![0; columns];
    for (g, m) in groups.iter().enumerate() {
        for (c, slot) in out.iter_mut().enumerate() {
            if m & 1 << c != 0 {
                *slot = g;
            }
        }
    }
    canonical(&out)
}

/// Aborts per transaction per unit of colliding pattern pairs: the observed abort rate divided by
/// the share of pairs that collide under the `current` grouping, or `None` when too few collide to
/// tell (below [`CALIBRATION`]).
pub fn intensity(current: &[usize], stats: &TableStats) -> Option<f64> {
    let model = Model::new(current.len().clamp(1, 64), stats);
    let base = model.measure(&masks(&canonical(current))).0;
    (base >= CALIBRATION).then(|| model.abort_rate / base)
}

/// Plans table groups: `current` gives each column's group now. Returns a proposed grouping when
/// one beats the current by the configured margins, `None` to keep the current one.
pub fn plan(current: &[usize], stats: &TableStats, cfg: &PlanConfig) -> Option<Plan> {
    let columns = current.len();
    if columns == 0 || columns > 64 || stats.commits < cfg.min_commits {
        return None;
    }
    let model = Model::new(columns, stats);
    if model.patterns.is_empty() {
        return None;
    }
    let kappa = intensity(current, stats).unwrap_or(stats.intensity);
    let now = masks(&canonical(current));
    let current_cost = model.cost(&now, kappa, cfg);
    let best = if kappa * cfg.abort_cost == 0.0 {
        // Without conflicts only TID words count, and one group touches the fewest (one per
        // transaction): coarse is the optimum, and the search (cubic in the atoms, every planning
        // round) is skipped.
        let all = vec![model.all];
        (model.cost(&all, kappa, cfg), all)
    } else {
        let greedy = agglomerate(&model, model.atoms(), kappa, cfg);
        [greedy, vec![model.all]]
            .into_iter()
            .map(|g| (model.cost(&g, kappa, cfg), g))
            .min_by(|a, b| a.0.total_cmp(&b.0))?
    };
    let proposed = group_of(columns, &best.1);
    let gain = current_cost - best.0;
    (proposed != canonical(current)
        && gain > cfg.min_gain * current_cost
        && gain > cfg.min_abs_gain)
        .then_some(Plan {
            group_of: proposed,
            cost: best.0,
            current_cost,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn stats(patterns: &[(u64, u64, f64)], commits: f64, conflicts: f64) -> TableStats {
        TableStats {
            patterns: patterns
                .iter()
                .map(|&(read, write, weight)| Pattern {
                    read,
                    write,
                    weight,
                })
                .collect(),
            commits,
            conflicts,
            intensity: 0.0,
        }
    }

    /// TPC-C's District: NewOrder reads tax and next order id and writes the id; Payment reads
    /// the address and year-to-date and writes year-to-date. Columns: 0 next_o_id, 1 tax, 2 ytd,
    /// 3..=7 name and address, 8 unused.
    fn district(conflicts: f64) -> TableStats {
        stats(
            &[(0b11, 0b1, 45.0), (0b1111_1100, 0b100, 43.0)],
            1000.0,
            conflicts,
        )
    }

    #[test]
    fn contended_readers_and_writers_of_different_columns_are_separated() {
        let p = plan(&[0; 9], &district(300.0), &PlanConfig::default()).expect("a change");
        let g = &p.group_of;
        assert_ne!(g[0], g[2], "NewOrder's and Payment's written columns apart");
        assert_eq!(g[0], g[1], "NewOrder's columns together");
        assert!(
            (3..8).all(|c| g[c] == g[2]),
            "Payment's columns together: {g:?}"
        );
        assert!(p.cost < p.current_cost);
        let groups = g.iter().max().unwrap() + 1;
        assert_eq!(groups, 2, "{g:?}");
    }

    /// TPC-C's Warehouse: NewOrder reads the tax (6); Payment reads the name and address (0..=5)
    /// and adds to the year-to-date total (7) without reading it.
    #[test]
    fn a_blind_written_column_is_separated_from_the_columns_its_writers_read() {
        let s = stats(
            &[(1 << 6, 0, 50.0), (0b11_1111, 1 << 7, 50.0)],
            1000.0,
            100.0,
        );
        let p = plan(&[0; 8], &s, &PlanConfig::default()).expect("a change");
        let g = &p.group_of;
        assert!((0..7).all(|c| g[c] != g[7]), "W_YTD alone: {g:?}");
        assert!(
            p.cost < 0.05 * p.current_cost,
            "only TID words are left: {p:?}"
        );
        // Written but not read, the column makes its writers no victims of each other.
        let model = Model::new(8, &s);
        assert_eq!(model.measure(&masks(g)).0, 0.0);
    }

    #[test]
    fn an_uncontended_table_stays_coarse_and_a_split_one_is_merged_back() {
        let cfg = PlanConfig::default();
        assert_eq!(plan(&[0; 9], &district(0.0), &cfg), None);
        let split: Vec<usize> = (0..9).collect();
        let p = plan(&split, &district(0.0), &cfg).expect("merge");
        assert!(p.group_of.iter().all(|&g| g == 0), "{:?}", p.group_of);
    }

    #[test]
    fn a_split_that_removed_all_collisions_is_kept_by_the_remembered_intensity() {
        let cfg = PlanConfig::default();
        // Many readers of column 0, few writers of column 1: once split, too few pairs collide
        // to measure the intensity.
        let s = stats(&[(0b01, 0, 98.0), (0, 0b10, 2.0)], 1000.0, 200.0);
        let p = plan(&[0, 0], &s, &cfg).expect("split");
        assert_eq!(p.group_of, vec![0, 1]);
        let kappa = intensity(&[0, 0], &s).unwrap();
        assert_eq!(intensity(&[0, 1], &s), None);
        let mut after = stats(&[(0b01, 0, 98.0), (0, 0b10, 2.0)], 1000.0, 0.0);
        after.intensity = kappa;
        assert_eq!(plan(&[0, 1], &after, &cfg), None);
        after.intensity = 0.0;
        assert!(plan(&[0, 1], &after, &cfg).is_none_or(|p| p.group_of == vec![0, 0]));
    }

    /// TPC-C's Customer (columns 0..=12 static, 13..=16 balances and counts, 17 `C_DATA`):
    /// NewOrder reads three static columns, Payment reads the static ones and the balances and
    /// writes the balances (and `C_DATA` for bad credit), OrderStatus reads names and balance.
    fn customer(abort_rate: f64) -> TableStats {
        let stat = (1u64 << 13) - 1;
        let bal = 0b1111u64 << 13;
        let data = 1u64 << 17;
        stats(
            &[
                (1 << 2 | 1 << 10 | 1 << 12, 0, 45.0),
                (stat | bal, 0b111 << 13, 38.7),
                (stat | bal | data, 0b111 << 13 | data, 4.3),
                (1 << 13 | 0b111, 0, 4.0),
            ],
            10_000.0,
            10_000.0 * abort_rate,
        )
    }

    #[test]
    fn customer_is_split_once_one_percent_of_its_transactions_abort_on_it() {
        let cfg = PlanConfig::default();
        assert_eq!(plan(&[0; 18], &customer(0.001), &cfg), None);
        let p = plan(&[0; 18], &customer(0.01), &cfg).expect("a split");
        let g = &p.group_of;
        assert!(
            [2, 10, 12].iter().all(|&c| g[c] != g[13]),
            "NewOrder's columns apart from Payment's writes: {g:?}"
        );
        assert!((13..16).all(|c| g[c] == g[13]), "{g:?}");
    }

    #[test]
    fn too_few_samples_decide_nothing() {
        let mut s = district(300.0);
        s.commits = 10.0;
        assert_eq!(plan(&[0; 9], &s, &PlanConfig::default()), None);
    }

    #[test]
    fn canonical_numbers_groups_by_their_lowest_column() {
        assert_eq!(canonical(&[3, 1, 3, 0]), vec![0, 1, 0, 2]);
        assert_eq!(canonical(&[]), Vec::<usize>::new());
    }

    fn arb_stats(columns: usize) -> impl Strategy<Value = TableStats> {
        let mask = (1u64 << columns) - 1;
        (
            prop::collection::vec((any::<u64>(), any::<u64>(), 1.0f64..100.0), 1..8),
            0.0f64..0.8,
        )
            .prop_map(move |(ps, rate)| {
                let ps: Vec<(u64, u64, f64)> = ps
                    .into_iter()
                    .map(|(r, w, n)| (r & mask, w & mask & (r | (w >> 7)), n))
                    .collect();
                stats(&ps, 1000.0, 1000.0 * rate)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn plans_are_valid_groupings_cheaper_than_the_current_one(
            columns in 1usize..12,
            seed in any::<u64>(),
            s in arb_stats(12),
        ) {
            let current: Vec<usize> = (0..columns).map(|c| ((seed >> (c * 2)) & 3) as usize).collect();
            let current = canonical(&current);
            let mut s = s;
            for p in &mut s.patterns {
                p.read &= (1 << columns) - 1;
                p.write &= (1 << columns) - 1;
            }
            let cfg = PlanConfig::default();
            if let Some(p) = plan(&current, &s, &cfg) {
                prop_assert_eq!(p.group_of.len(), columns);
                prop_assert_eq!(canonical(&p.group_of), p.group_of.clone());
                let n = p.group_of.iter().max().unwrap() + 1;
                prop_assert!(n <= Schema::MAX_GROUPS);
                prop_assert!(p.cost < p.current_cost * (1.0 - cfg.min_gain));
                prop_assert_ne!(&p.group_of, &current);
                // No flapping: once applied, and with the abort rate the model predicted for
                // it, the planner keeps the new grouping.
                let model = Model::new(columns, &s);
                let kappa = intensity(&current, &s).unwrap_or(s.intensity);
                let after = model.measure(&masks(&p.group_of)).0;
                let mut then = s.clone();
                then.conflicts = s.commits * kappa * after;
                then.intensity = kappa;
                prop_assert_eq!(plan(&p.group_of, &then, &cfg), None);
            }
        }

        #[test]
        fn without_conflicts_the_plan_is_one_group(
            columns in 1usize..12,
            s in arb_stats(12),
        ) {
            let mut s = s;
            s.conflicts = 0.0;
            let current: Vec<usize> = (0..columns).collect();
            for p in &mut s.patterns {
                p.read &= (1 << columns) - 1;
                p.write &= (1 << columns) - 1;
            }
            match plan(&current, &s, &PlanConfig::default()) {
                Some(p) => prop_assert!(p.group_of.iter().all(|&g| g == 0)),
                // Splitting costs too little to be worth a change.
                None => prop_assert!(
                    Model::new(columns, &s).measure(&masks(&current)).1 <= 1.5 + 1e-9
                ),
            }
        }
    }
}
