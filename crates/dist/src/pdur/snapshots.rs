//! The snapshots of one partition: which versions are decided (so a snapshot may include them)
//! and which snapshots readers still use (so GC keeps what they can read).

use std::collections::BTreeMap;

use super::request::Sc;

/// The decided prefix of a partition's versions. A version is given out at certification
/// (Algorithm 4 line 23, `SC ← SC + 1`) but a cross-partition transaction stays undecided until
/// every vote is in; a snapshot must not include it before then, or a read could see a state
/// that the outcome later changes. The stable snapshot is the highest `s` with every version up
/// to `s` decided (Algorithm 4 hands out `SC` itself: there a partition waits for the votes
/// before it delivers the next transaction, so every version it gave out is decided).
#[derive(Debug, Default)]
pub struct DecidedPrefix {
    undecided: BTreeMap<Sc, ()>,
}

impl DecidedPrefix {
    /// Version `v` now waits for votes.
    pub fn hold(&mut self, v: Sc) {
        self.undecided.insert(v, ());
    }

    /// Version `v`'s transaction is decided.
    pub fn release(&mut self, v: Sc) {
        self.undecided.remove(&v);
    }

    /// The stable snapshot when the counter is at `sc`.
    pub fn stable(&self, sc: Sc) -> Sc {
        self.undecided.keys().next().map_or(sc, |v| v - 1)
    }

    /// Versions waiting for votes.
    pub fn undecided(&self) -> usize {
        self.undecided.len()
    }
}

/// Snapshots handed to transactions still executing, counted; the oldest bounds version GC.
#[derive(Debug, Default)]
pub struct SnapshotsInUse {
    counts: BTreeMap<Sc, u32>,
}

impl SnapshotsInUse {
    /// A transaction took snapshot `s`.
    pub fn acquire(&mut self, s: Sc) {
        *self.counts.entry(s).or_default() += 1;
    }

    /// A transaction is done with snapshot `s`; false if `s` was not in use.
    pub fn release(&mut self, s: Sc) -> bool {
        match self.counts.get_mut(&s) {
            Some(n) if *n > 1 => *n -= 1,
            Some(_) => {
                self.counts.remove(&s);
            }
            None => return false,
        }
        true
    }

    /// The oldest snapshot in use.
    pub fn oldest(&self) -> Option<Sc> {
        self.counts.keys().next().copied()
    }

    /// Snapshots in use (counting repeats).
    pub fn len(&self) -> usize {
        self.counts.values().map(|&n| n as usize).sum()
    }

    /// True when no snapshot is in use.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stable_snapshot_stops_below_the_oldest_undecided_version() {
        let mut d = DecidedPrefix::default();
        assert_eq!(d.stable(4), 4);
        d.hold(5);
        d.hold(7);
        assert_eq!(d.stable(8), 4);
        d.release(5);
        assert_eq!(d.stable(8), 6);
        d.release(7);
        assert_eq!(d.stable(8), 8);
    }

    #[test]
    fn the_oldest_snapshot_in_use_follows_acquires_and_releases() {
        let mut s = SnapshotsInUse::default();
        s.acquire(3);
        s.acquire(3);
        s.acquire(5);
        assert_eq!(s.oldest(), Some(3));
        assert!(s.release(3));
        assert_eq!(s.oldest(), Some(3));
        assert!(s.release(3));
        assert_eq!(s.oldest(), Some(5));
        assert!(!s.release(3), "not in use");
        assert_eq!(s.len(), 1);
    }
}
