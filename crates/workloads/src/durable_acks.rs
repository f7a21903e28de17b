//! `--durable-results`: a benchmark worker acknowledges a transaction only once it is durable
//! (SiloR §4.2: results are released when the transaction's epoch is durable), and measures the
//! time from commit to that acknowledgement.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;
use phasedb_txn::{Database, Protocol, Worker};

/// Transactions acknowledged durable in the measured window and their commit-to-durable latency.
#[derive(Clone, Debug)]
pub struct DurableStats {
    /// Transactions whose durability the workers learned in the measured window.
    pub durable: u64,
    /// Of them, per transaction type.
    pub per_type: Vec<u64>,
    /// Commit-to-durable latency in nanoseconds, for one transaction in [`SAMPLE`].
    pub latency_ns: Histogram<u64>,
    /// The epoch length, to express latencies in epochs.
    pub epoch_interval: Duration,
}

impl DurableStats {
    /// Adds another worker's figures.
    pub fn merge(&mut self, other: &DurableStats) {
        self.durable += other.durable;
        for (a, b) in self.per_type.iter_mut().zip(&other.per_type) {
            *a += b;
        }
        let _ = self.latency_ns.add(&other.latency_ns);
    }
}

/// One committed transaction in this many has its commit-to-durable latency measured.
pub const SAMPLE: u64 = 16;

/// A worker's transactions waiting to be acknowledged: counts per commit epoch, and sampled
/// commit times. Allocation-free once the queues have grown to an epoch's worth.
pub(crate) struct DurableAcks {
    /// (commit epoch, type, transactions) in commit order.
    pending: VecDeque<(u64, usize, u64)>,
    samples: VecDeque<(u64, Instant)>,
    seen: u64,
    stats: DurableStats,
}

impl DurableAcks {
    pub(crate) fn new(epoch_interval: Duration, types: usize) -> DurableAcks {
        DurableAcks {
            pending: VecDeque::with_capacity(16),
            samples: VecDeque::with_capacity(1024),
            seen: 0,
            stats: DurableStats {
                durable: 0,
                per_type: vec![0; types],
                latency_ns: Histogram::new(3).expect("a histogram of 3 significant digits"),
                epoch_interval,
            },
        }
    }

    /// Notes the transaction `worker` just ran, if it committed (a workload may count a
    /// transaction that aborted by its own choice as run): durable with its commit epoch, or for a
    /// read-only one with the epoch current now (what it read was committed by then).
    pub(crate) fn committed<P: Protocol>(&mut self, db: &Database<P>, worker: &Worker<'_, P>) {
        let Some(ty) = worker.committed_type() else {
            return;
        };
        let epoch = worker.commit_epoch().unwrap_or_else(|| db.epoch());
        match self.pending.back_mut() {
            Some((e, t, n)) if *e == epoch && *t == ty => *n += 1,
            _ => self.pending.push_back((epoch, ty, 1)),
        }
        self.seen += 1;
        if self.seen.is_multiple_of(SAMPLE) {
            self.samples.push_back((epoch, Instant::now()));
        }
    }

    /// Acknowledges what the durable epoch now covers: adds it to `acked` (per type, the whole
    /// run) and, if `measuring`, to the measured figures.
    pub(crate) fn poll<P: Protocol>(
        &mut self,
        db: &Database<P>,
        measuring: bool,
        acked: &[CachePadded<AtomicU64>],
    ) {
        let Some(&(oldest, _, _)) = self.pending.front() else {
            return;
        };
        let durable = db.durable_epoch().unwrap_or(0);
        if oldest > durable {
            return;
        }
        while let Some(&(e, ty, n)) = self.pending.front() {
            if e > durable {
                break;
            }
            self.pending.pop_front();
            if let Some(c) = acked.get(ty) {
                c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
            }
            if measuring {
                self.stats.durable += n;
                if let Some(c) = self.stats.per_type.get_mut(ty) {
                    *c += n;
                }
            }
        }
        let now = Instant::now();
        while let Some(&(e, at)) = self.samples.front() {
            if e > durable {
                break;
            }
            self.samples.pop_front();
            if measuring {
                let ns = now.duration_since(at).as_nanos() as u64;
                let _ = self.stats.latency_ns.record(ns.max(1));
            }
        }
    }

    /// Forgets what was counted so far (at the start of the measured window).
    pub(crate) fn reset(&mut self) {
        self.stats.durable = 0;
        self.stats.per_type.fill(0);
        self.stats.latency_ns.reset();
    }

    pub(crate) fn into_stats(self) -> DurableStats {
        self.stats
    }
}
