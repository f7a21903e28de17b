//! The algorithms the STAR experiments compare (§8.1.2): STAR and the baselines of its framework,
//! each with the replication it runs (§8.1.3). [`CONTENDERS`] is the one list every comparison
//! takes its lines from; a baseline joins every experiment by a line there.

use phasedb_net::{ReplicationSync, StarAlgorithm};

use crate::experiment::Settings;

/// One line of a comparison: an algorithm and how it replicates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Contender {
    /// The protocol the nodes run.
    pub algorithm: StarAlgorithm,
    /// Baselines: synchronous replication, or asynchronous with a group commit; STAR replicates
    /// asynchronously and releases results at its replication fences.
    pub replication: ReplicationSync,
}

impl Contender {
    /// STAR itself.
    pub const STAR: Contender = Contender::new(StarAlgorithm::Star, ReplicationSync::Async);

    /// `algorithm` replicating as `replication`.
    pub const fn new(algorithm: StarAlgorithm, replication: ReplicationSync) -> Contender {
        Contender {
            algorithm,
            replication,
        }
    }

    /// The algorithm's name ("star", "pb-occ", ...), the `algorithm` column of the rows.
    pub fn algorithm_name(&self) -> &'static str {
        self.algorithm.name()
    }

    /// The replication's name ("async" or "sync"), the `replication` column of the rows.
    pub fn replication_name(&self) -> &'static str {
        self.replication.name()
    }

    /// Whether this is STAR (not a baseline).
    pub fn is_star(&self) -> bool {
        self.algorithm == StarAlgorithm::Star
    }

    /// The line's name: "star", or a baseline with its replication ("pb-occ async").
    pub fn label(&self) -> String {
        if self.is_star() {
            self.algorithm_name().to_string()
        } else {
            format!("{} {}", self.algorithm_name(), self.replication_name())
        }
    }
}

/// STAR and every baseline, with both replications (§8.1.3).
pub const CONTENDERS: &[Contender] = &[
    Contender::STAR,
    Contender::new(StarAlgorithm::PbOcc, ReplicationSync::Async),
    Contender::new(StarAlgorithm::PbOcc, ReplicationSync::Sync),
    Contender::new(StarAlgorithm::DistOcc, ReplicationSync::Async),
    Contender::new(StarAlgorithm::DistOcc, ReplicationSync::Sync),
    Contender::new(StarAlgorithm::DistS2pl, ReplicationSync::Async),
    Contender::new(StarAlgorithm::DistS2pl, ReplicationSync::Sync),
];

/// What a `--quick` run measures: STAR, PB-OCC both ways and Dist-OCC and Dist-S2PL asynchronous,
/// enough to check end to end that every algorithm runs and its replicas agree.
const QUICK: &[Contender] = &[
    Contender::STAR,
    Contender::new(StarAlgorithm::PbOcc, ReplicationSync::Async),
    Contender::new(StarAlgorithm::PbOcc, ReplicationSync::Sync),
    Contender::new(StarAlgorithm::DistOcc, ReplicationSync::Async),
    Contender::new(StarAlgorithm::DistS2pl, ReplicationSync::Async),
];

/// The contenders a run measures: every one, or with `--quick` those of [`QUICK`].
pub fn contenders(s: &Settings) -> &'static [Contender] {
    if s.quick { QUICK } else { CONTENDERS }
}

/// The contenders of a run ([`contenders`]) replicating as `replication` (STAR counted as
/// asynchronous).
pub fn replicating(s: &Settings, replication: ReplicationSync) -> impl Iterator<Item = Contender> {
    contenders(s)
        .iter()
        .copied()
        .filter(move |c| c.replication == replication)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_comes_first_and_every_baseline_runs_both_replications() {
        assert_eq!(CONTENDERS[0], Contender::STAR);
        assert_eq!(Contender::STAR.label(), "star");
        for c in CONTENDERS.iter().filter(|c| !c.is_star()) {
            let other = match c.replication {
                ReplicationSync::Async => ReplicationSync::Sync,
                ReplicationSync::Sync => ReplicationSync::Async,
            };
            assert!(CONTENDERS.contains(&Contender::new(c.algorithm, other)));
        }
        assert_eq!(CONTENDERS[2].label(), "pb-occ sync");
    }
}
