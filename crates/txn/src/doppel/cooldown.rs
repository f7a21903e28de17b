//! The records a split phase let go, and how many split decisions each sits out before it may be
//! split again.
//!
//! A record is let go when its split phase was mostly reads (which stash) or too few operations.
//! Its wait doubles each time the same record is split and let go again, up to the policy's
//! longest, so a page read about as often as it is liked stops paying for split phases over and
//! over; a split phase that keeps the record resets it. Once a record has gone as long again as its
//! last wait without being let go, it is forgotten.

use rustc_hash::FxHashMap;

use super::policy::SplitPolicy;
use super::split::SplitLabel;
use phasedb_storage::TableId;

/// One let-go record's wait.
#[derive(Clone, Copy, Debug)]
struct Wait {
    /// Split decisions left to sit out; at zero or below the record may be split again.
    left: i64,
    /// The length of its last wait, which the next release doubles.
    wait: u32,
}

/// Let-go records by (table, key, column).
#[derive(Default)]
pub(crate) struct Cooldowns(FxHashMap<(TableId, u64, u16), Wait>);

fn id(l: &SplitLabel) -> (TableId, u64, u16) {
    (l.table, l.key, l.col)
}

impl Cooldowns {
    /// One split decision passes.
    pub fn tick(&mut self) {
        self.0.retain(|_, w| {
            w.left -= 1;
            w.left > -i64::from(w.wait)
        });
    }

    /// Whether the record still sits out split decisions.
    pub fn cooling(&self, l: &SplitLabel) -> bool {
        self.0.get(&id(l)).is_some_and(|w| w.left > 0)
    }

    /// A split phase let the record go: it waits the policy's cooldown, or twice its last wait.
    pub fn let_go(&mut self, l: &SplitLabel, policy: &SplitPolicy) {
        let wait = self.0.get(&id(l)).map_or(policy.cooldown, |w| {
            w.wait.saturating_mul(2).min(policy.max_cooldown)
        });
        self.0.insert(
            id(l),
            Wait {
                left: i64::from(wait),
                wait,
            },
        );
    }

    /// A split phase kept the record split: its record of releases is cleared.
    pub fn kept(&mut self, l: &SplitLabel) {
        self.0.remove(&id(l));
    }

    /// Records with a wait on record (cooling or not yet forgotten).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::splittable::OpKind;

    fn label(key: u64) -> SplitLabel {
        SplitLabel {
            table: 0,
            key,
            col: 0,
            kind: OpKind::Add,
        }
    }

    /// Split decisions the record sits out after being let go now.
    fn sat_out(c: &mut Cooldowns, l: &SplitLabel) -> u32 {
        let mut n = 0;
        while c.cooling(l) {
            c.tick();
            n += 1;
        }
        n
    }

    #[test]
    fn the_wait_doubles_per_release_up_to_the_longest_and_resets_when_kept() {
        let policy = SplitPolicy {
            cooldown: 4,
            max_cooldown: 20,
            ..SplitPolicy::default()
        };
        let (mut c, page) = (Cooldowns::default(), label(7));
        let mut waits = Vec::new();
        for _ in 0..5 {
            c.let_go(&page, &policy);
            waits.push(sat_out(&mut c, &page));
        }
        assert_eq!(waits, [4, 8, 16, 20, 20]);
        // Another record is unaffected.
        assert!(!c.cooling(&label(8)));
        c.kept(&page);
        c.let_go(&page, &policy);
        assert_eq!(sat_out(&mut c, &page), 4);
    }

    #[test]
    fn a_record_not_let_go_for_as_long_again_is_forgotten() {
        let policy = SplitPolicy {
            cooldown: 4,
            ..SplitPolicy::default()
        };
        let (mut c, page) = (Cooldowns::default(), label(1));
        c.let_go(&page, &policy);
        assert_eq!(sat_out(&mut c, &page), 4);
        for _ in 0..3 {
            c.tick();
        }
        assert_eq!(c.len(), 1, "remembered while within its last wait");
        c.tick();
        assert_eq!(c.len(), 0, "forgotten after as long again");
        c.let_go(&page, &policy);
        assert_eq!(sat_out(&mut c, &page), 4);
    }
}
