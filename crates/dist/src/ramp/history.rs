//! Turns clients' transactions and outcomes into a Read Atomic history for the checker.

use phasedb_check::Item;
use phasedb_check::read_atomic::{RaHistory, RaRead, RaTxn, RaWrite};

use crate::ramp::msg::{Outcome, Ts, TxnSpec};

/// The table id of every cluster item in recorded histories.
pub const TABLE: u32 = 0;

/// Collects transactions as clients finish them.
#[derive(Default, Clone, Debug)]
pub struct Recorder {
    history: RaHistory,
    /// Writes whose outcome the client never learned (it crashed): resolved later by asking servers.
    in_doubt: Vec<(Ts, RaTxn)>,
    next_id: u64,
}

fn ra_txn(id: u64, txn: &TxnSpec, outcome: Option<&Outcome>, ts: Ts, ctime: u64) -> RaTxn {
    RaTxn {
        id,
        reads: outcome
            .map(|o| {
                o.reads
                    .iter()
                    .map(|r| RaRead {
                        item: Item::new(TABLE, r.key),
                        version: r.ts,
                    })
                    .collect()
            })
            .unwrap_or_default(),
        writes: txn
            .writes
            .iter()
            .map(|(k, _)| RaWrite {
                item: Item::new(TABLE, *k),
                version: ts,
                order: (ctime, ts),
            })
            .collect(),
    }
}

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a finished transaction.
    pub fn record(&mut self, txn: &TxnSpec, outcome: &Outcome) {
        self.next_id += 1;
        let t = ra_txn(
            self.next_id,
            txn,
            Some(outcome),
            outcome.ts.unwrap_or(0),
            outcome.ctime,
        );
        if outcome.committed {
            self.history.committed.push(t);
        } else {
            self.history.aborted.push(t);
        }
    }

    /// Records a write whose client crashed before learning its outcome.
    pub fn record_in_doubt(&mut self, txn: &TxnSpec, ts: Ts) {
        self.next_id += 1;
        let mut write_only = txn.clone();
        write_only.reads.clear();
        self.in_doubt
            .push((ts, ra_txn(self.next_id, &write_only, None, ts, 0)));
    }

    /// Decides in-doubt writes with `commit_time(ts)` (e.g. by asking the servers): `Some(ctime)` when
    /// the write committed (ctime 0 outside E-PCI, which orders versions by commit time), `None` when
    /// it did not. Returns the history.
    pub fn finish(mut self, mut commit_time: impl FnMut(Ts) -> Option<u64>) -> RaHistory {
        for (ts, mut t) in self.in_doubt.drain(..) {
            match commit_time(ts) {
                Some(ctime) => {
                    for w in &mut t.writes {
                        w.order = (ctime, ts);
                    }
                    self.history.committed.push(t);
                }
                None => self.history.aborted.push(t),
            }
        }
        self.history
    }

    /// Appends another recorder's transactions (ids are renumbered to stay unique).
    pub fn merge(&mut self, other: Recorder) {
        let base = self.next_id;
        let shift = |mut t: RaTxn| {
            t.id += base;
            t
        };
        self.history
            .committed
            .extend(other.history.committed.into_iter().map(shift));
        self.history
            .aborted
            .extend(other.history.aborted.into_iter().map(shift));
        self.in_doubt
            .extend(other.in_doubt.into_iter().map(|(ts, t)| (ts, shift(t))));
        self.next_id += other.next_id;
    }

    /// Number of transactions recorded.
    pub fn len(&self) -> usize {
        self.history.committed.len() + self.history.aborted.len() + self.in_doubt.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
