//! Per-transaction-kind counters and latency histograms of a cluster benchmark.

use hdrhistogram::Histogram;

use super::workload::TxnKind;
use crate::ramp::msg::Outcome;

/// Counters of one kind of transaction.
#[derive(Clone, Debug)]
pub struct KindStats {
    /// Committed in the measured window.
    pub committed: u64,
    /// Refused (a PREPARE hit a CTP abort) in the measured window.
    pub aborted: u64,
    /// Read sets that needed a second round.
    pub two_round_reads: u64,
    /// Read restarts after garbage collection.
    pub restarts: u64,
    /// Latency of committed transactions (ns).
    pub latency_ns: Histogram<u64>,
}

impl Default for KindStats {
    fn default() -> Self {
        KindStats {
            committed: 0,
            aborted: 0,
            two_round_reads: 0,
            restarts: 0,
            latency_ns: Histogram::new_with_bounds(1_000, 120_000_000_000, 3)
                .expect("valid bounds"),
        }
    }
}

impl KindStats {
    /// Adds one finished transaction.
    pub fn record(&mut self, o: &Outcome, latency_ns: u64) {
        if o.committed {
            self.committed += 1;
            let _ = self
                .latency_ns
                .record(latency_ns.clamp(1_000, 120_000_000_000));
        } else {
            self.aborted += 1;
        }
        self.two_round_reads += (o.read_rounds >= 2) as u64;
        self.restarts += o.restarts as u64;
    }

    /// Adds another's counts.
    pub fn merge(&mut self, other: &KindStats) {
        self.committed += other.committed;
        self.aborted += other.aborted;
        self.two_round_reads += other.two_round_reads;
        self.restarts += other.restarts;
        let _ = self.latency_ns.add(&other.latency_ns);
    }

    /// Latency at quantile `q` in microseconds (0 when nothing committed).
    pub fn latency_us(&self, q: f64) -> f64 {
        if self.latency_ns.is_empty() {
            0.0
        } else {
            self.latency_ns.value_at_quantile(q) as f64 / 1000.0
        }
    }
}

/// Counters per kind: read-only, write-only, read-write.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Read-only transactions.
    pub read: KindStats,
    /// Write-only transactions.
    pub write: KindStats,
    /// Read-write transactions.
    pub read_write: KindStats,
}

impl Stats {
    /// The counters of `kind`.
    pub fn kind_mut(&mut self, kind: TxnKind) -> &mut KindStats {
        match kind {
            TxnKind::Read => &mut self.read,
            TxnKind::Write => &mut self.write,
            TxnKind::ReadWrite => &mut self.read_write,
        }
    }

    /// Adds another's counts.
    pub fn merge(&mut self, other: &Stats) {
        self.read.merge(&other.read);
        self.write.merge(&other.write);
        self.read_write.merge(&other.read_write);
    }

    /// All kinds together.
    pub fn total(&self) -> KindStats {
        let mut t = KindStats::default();
        t.merge(&self.read);
        t.merge(&self.write);
        t.merge(&self.read_write);
        t
    }
}
