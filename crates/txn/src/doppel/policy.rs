//! The knobs of Doppel's split decisions and phase lengths.

/// How Doppel decides which records to split and how long phases last.
#[derive(Clone, Debug)]
pub struct SplitPolicy {
    /// Split records automatically from conflict samples (manual labels apply either way).
    pub auto: bool,
    /// Conflicts on a record in one joined phase (over all workers) that make it split.
    pub min_conflicts: u64,
    /// Most records split at once.
    pub max_split: usize,
    /// A record is split only if its operation is at least this share of its sampled joined-phase
    /// conflicts whose transactions touched it only by the operation, or also wrote it otherwise or
    /// read it besides a commutative update (a split would stash these and keep their conflicts).
    pub min_op_share: f64,
    /// A record is split only if its operation caused at least this share of all its sampled
    /// joined-phase conflicts, those of transactions that only read it included. A split stashes
    /// every read of the record, so a record read far more often than it is updated (LIKE's popular
    /// pages when a tenth of the transactions like) would stash many readers to spare a few
    /// conflicts, and its split phases would then let it go.
    pub min_conflict_share: f64,
    /// A split record stays split while its operation is at least this share of the accesses that
    /// reached it in a split phase (operations applied plus transactions stashed). An operation on a
    /// slice spares a conflict and a cache line moving between cores; a stashed reader costs a
    /// second start in the next joined phase, where it reads the record with the other readers. At 2
    /// workers that is about even: keeping LIKE's top page split at half writes (ops about half of
    /// the accesses) measured about 5% faster than letting it go, at 40% writes no different.
    pub min_stay_share: f64,
    /// Fewest operations on a split record in one split phase for it to stay split.
    pub min_ops: u64,
    /// Split decisions a record sits out after a split phase that did not keep it split. The wait
    /// doubles each time the same record is split and let go again, up to `max_cooldown`, so a
    /// record whose reads make splitting it a loss (a page read as often as liked) stops paying for
    /// split phases; a split phase that keeps it resets the wait.
    pub cooldown: u32,
    /// Longest wait the doubling of `cooldown` reaches.
    pub max_cooldown: u32,
    /// Transactions one worker may stash in a split phase before it hurries the next joined phase.
    pub hurry_stashed: u64,
    /// Length of the joined phase between two split phases, as a share of the phase length, while
    /// records stay split (the joined phase runs stashed transactions and samples new conflicts).
    /// After a split phase that stashed nothing the joined phase is as short as may be (0.2 ms).
    pub joined_share: f64,
}

impl Default for SplitPolicy {
    fn default() -> Self {
        SplitPolicy {
            auto: true,
            min_conflicts: 8,
            max_split: 64,
            min_op_share: 0.6,
            min_conflict_share: 0.2,
            min_stay_share: 0.45,
            min_ops: 16,
            cooldown: 8,
            max_cooldown: 256,
            hurry_stashed: 10_000,
            joined_share: 0.1,
        }
    }
}

impl SplitPolicy {
    /// Checks the settings, with a message fit for a command-line user.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.min_op_share) {
            return Err("the split operation share must be between 0 and 1".into());
        }
        if !(0.0..=1.0).contains(&self.min_stay_share) {
            return Err("the share that keeps a record split must be between 0 and 1".into());
        }
        if !(0.0..=1.0).contains(&self.min_conflict_share) {
            return Err("the split operation's conflict share must be between 0 and 1".into());
        }
        if !(self.joined_share > 0.0 && self.joined_share <= 1.0) {
            return Err("the joined phase share must be in (0, 1]".into());
        }
        if self.max_cooldown < self.cooldown {
            return Err("the longest cooldown must be at least the cooldown".into());
        }
        if self.max_split == 0 && self.auto {
            return Err("automatic splitting needs room for at least one split record".into());
        }
        Ok(())
    }
}
