//! A STAR node's counters: transactions by type, commit latency, phases and their times, the
//! replication stream and requests. [`StarStats`] travels in a [`crate::star::msg::Answer`], so a
//! benchmark can gather every node's counters over the wire and merge them.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use phasedb_net::Addr;

/// Committed and aborted transactions of one type.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypeCounts {
    /// The type's name (`Procedures::txn_types`).
    pub name: String,
    /// Committed, counted when their phase ended (§4: results are released only then).
    pub committed: u64,
    /// Of those, committed in single-master phases: the cross-partition ones (§4.2).
    pub committed_cross: u64,
    /// Aborted by their procedure, counted when their phase ended.
    pub aborted: u64,
    /// Failed in the engine (a panic in the procedure, a misuse of the API).
    pub failed: u64,
}

/// A latency histogram as (value, count) pairs of its non-empty buckets, so it crosses the wire
/// and merges exactly at the other end.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencySnapshot {
    /// Bucket values (ns) and their counts.
    pub buckets: Vec<(u64, u64)>,
}

impl LatencySnapshot {
    /// The buckets of `h`.
    pub fn of(h: &Histogram<u64>) -> LatencySnapshot {
        LatencySnapshot {
            buckets: h
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect(),
        }
    }

    /// A histogram holding these counts (values beyond its range are clamped to its top).
    pub fn histogram(&self) -> Histogram<u64> {
        let mut h = latency_histogram();
        for &(v, n) in &self.buckets {
            h.saturating_record_n(v.max(1), n);
        }
        h
    }
}

/// The histogram commit latencies go into: 1 ns to 100 s, 3 significant digits.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// What went through the replication stream (§5), from this node's side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicationCounts {
    /// Records written by this node's committed transactions (each once, whatever its copies).
    pub records: u64,
    /// Bytes of those records written in partitioned phases.
    pub bytes_partitioned: u64,
    /// Bytes of those records written in single-master phases.
    pub bytes_single_master: u64,
    /// Batches sent (one per receiver).
    pub batches_sent: u64,
    /// Bytes sent, counting each receiver's copy.
    pub bytes_sent: u64,
    /// Batches received and applied.
    pub batches_applied: u64,
    /// Records applied.
    pub records_applied: u64,
    /// Batches the engine refused (malformed); their records are lost, which a replica digest shows.
    pub refused: u64,
    /// Times a batch met a lock held across messages (a Dist-* transaction prepared on this node)
    /// and was kept to apply again on a later tick.
    #[serde(default)]
    pub blocked: u64,
}

/// Time spent per phase kind and in fences, as this node saw it (ns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseTimes {
    /// Phases begun.
    pub phases: u64,
    /// From the begin of partitioned phases to their start fence.
    pub partitioned_ns: u64,
    /// From the begin of single-master phases to their start fence.
    pub single_master_ns: u64,
    /// From a start fence to the next phase's begin.
    pub fence_ns: u64,
}

/// Requests from clients and nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestCounts {
    /// Requests received from clients.
    pub received: u64,
    /// Requests forwarded to the node that runs them.
    pub forwarded: u64,
    /// Requests answered with an error.
    pub errors: u64,
    /// Forwarded requests whose node failed before it answered: their clients were told the
    /// outcome is unknown.
    pub orphaned: u64,
    /// Requests waiting now.
    pub queued: u64,
    /// Requests the node generated itself.
    pub generated: u64,
    /// Generated requests dropped because they did not touch what the phase runs (the workload
    /// drew a cross-partition request when asked for a single-partition one).
    pub discarded: u64,
    /// Read-only requests run at read committed on this node's copies ([`crate::star::msg::StarMsg::ReadCommitted`]).
    pub read_committed: u64,
    /// Distributed baselines: rounds of messages a transaction sent to other nodes' primaries
    /// (one per node fetched from, one per participant prepared): the remote work of
    /// cross-partition transactions.
    pub remote_rounds: u64,
    /// Transactions rerun after a NO_WAIT conflict, a failed validation or a participant's no
    /// (the distributed baselines).
    pub retried: u64,
}

/// Counters of a recovery, on the restarted node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryStats {
    /// The phase from which the node was a member again (0: it never rejoined).
    pub rejoined_phase: u64,
    /// When it learned it rejoins (ns of its clock).
    pub started_ns: u64,
    /// When every partition was copied (0: not yet).
    pub copied_ns: u64,
    /// Column groups of copied rows installed (those the stream had not brought newer).
    pub rows: u64,
    /// Bytes of copy chunks received.
    pub bytes: u64,
    /// Partitions copied.
    pub partitions: u64,
}

/// Every counter of a STAR node.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StarStats {
    /// The node.
    pub node: Addr,
    /// The phase it is in.
    pub phase: u64,
    /// Per transaction type, indexed like `Procedures::txn_types`.
    pub types: Vec<TypeCounts>,
    /// Commit latency of committed transactions: from arrival (or generation) to release.
    pub latency: LatencySnapshot,
    /// Phase times.
    pub times: PhaseTimes,
    /// The replication stream.
    pub replication: ReplicationCounts,
    /// Requests.
    pub requests: RequestCounts,
    /// Nothing left to do on the node: no transaction waiting or in flight, no result held, no
    /// replication unsent, unacknowledged or held back (what a quiesce waits for).
    #[serde(default)]
    pub idle: bool,
    /// The node's recovery after a restart (§7.2); zero if it never restarted.
    #[serde(default)]
    pub recovery: RecoveryStats,
    /// Since when the cluster runs Dist-OCC over the partial replicas because no full replica is
    /// left (§7.2); `None` while it runs STAR's phases.
    #[serde(default)]
    pub fall_back: Option<FallBackStats>,
}

/// The fall-back to Dist-OCC (§7.2), as one node saw it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FallBackStats {
    /// When the node switched (ns of its clock).
    pub since_ns: u64,
    /// The first group commit of the fall-back: the phase after the one the last full replica's
    /// failure interrupted.
    pub phase: u64,
    /// Failures announced when it switched.
    pub view: u64,
}

impl StarStats {
    /// Committed transactions of every type.
    pub fn committed(&self) -> u64 {
        self.types.iter().map(|t| t.committed).sum()
    }

    /// Aborted transactions of every type.
    pub fn aborted(&self) -> u64 {
        self.types.iter().map(|t| t.aborted).sum()
    }

    /// Replication bytes written per committed transaction (0 with none committed).
    pub fn replicated_bytes_per_commit(&self) -> f64 {
        let bytes = self.replication.bytes_partitioned + self.replication.bytes_single_master;
        match self.committed() {
            0 => 0.0,
            n => bytes as f64 / n as f64,
        }
    }

    /// Adds `other`'s counters (another node's) to these; the phase becomes the later one.
    pub fn merge(&mut self, other: &StarStats) {
        self.phase = self.phase.max(other.phase);
        self.fall_back = match (self.fall_back, other.fall_back) {
            (Some(a), Some(b)) => Some(if b.since_ns < a.since_ns { b } else { a }),
            (a, b) => a.or(b),
        };
        if self.types.len() < other.types.len() {
            self.types
                .resize_with(other.types.len(), TypeCounts::default);
        }
        for (mine, theirs) in self.types.iter_mut().zip(&other.types) {
            if mine.name.is_empty() {
                mine.name = theirs.name.clone();
            }
            mine.committed += theirs.committed;
            mine.committed_cross += theirs.committed_cross;
            mine.aborted += theirs.aborted;
            mine.failed += theirs.failed;
        }
        let mut h = self.latency.histogram();
        h.add(other.latency.histogram())
            .expect("histograms of the same bounds merge");
        self.latency = LatencySnapshot::of(&h);
        let (a, b) = (&mut self.times, &other.times);
        a.phases = a.phases.max(b.phases);
        a.partitioned_ns += b.partitioned_ns;
        a.single_master_ns += b.single_master_ns;
        a.fence_ns += b.fence_ns;
        let (a, b) = (&mut self.replication, &other.replication);
        a.records += b.records;
        a.bytes_partitioned += b.bytes_partitioned;
        a.bytes_single_master += b.bytes_single_master;
        a.batches_sent += b.batches_sent;
        a.bytes_sent += b.bytes_sent;
        a.batches_applied += b.batches_applied;
        a.records_applied += b.records_applied;
        a.refused += b.refused;
        let (a, b) = (&mut self.requests, &other.requests);
        a.received += b.received;
        a.forwarded += b.forwarded;
        a.errors += b.errors;
        a.queued += b.queued;
        a.generated += b.generated;
        a.discarded += b.discarded;
        a.read_committed += b.read_committed;
        a.remote_rounds += b.remote_rounds;
        a.retried += b.retried;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latency_snapshot_round_trips_its_counts() {
        let mut h = latency_histogram();
        for v in [1_000u64, 2_000, 2_000, 5_000_000] {
            h.record(v).unwrap();
        }
        let back = LatencySnapshot::of(&h).histogram();
        assert_eq!(back.len(), 4);
        assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
        assert_eq!(back.max(), h.max());
    }

    #[test]
    fn merging_adds_counts_and_latencies() {
        let mut a = StarStats {
            types: vec![TypeCounts {
                name: "t".into(),
                committed: 2,
                aborted: 1,
                ..TypeCounts::default()
            }],
            ..StarStats::default()
        };
        let mut h = latency_histogram();
        h.record(10).unwrap();
        a.latency = LatencySnapshot::of(&h);
        let b = a.clone();
        a.merge(&b);
        assert_eq!(a.committed(), 4);
        assert_eq!(a.aborted(), 2);
        assert_eq!(a.latency.histogram().len(), 2);
    }
}
