//! The cooperative termination protocol (§4.6) for prepared writes whose COMMIT never arrives.
//!
//! After `ctp_timeout_ms` a server asks every other participant what it knows. Any COMMIT seen
//! anywhere commits; a participant that never saw the PREPARE promises never to accept it and the
//! transaction aborts everywhere; when every participant has prepared, the writer could only have
//! committed (RAMP writes have no abort vote), so the servers commit it themselves. Under E-PCI the
//! coordinator alone turns "all prepared" into a commit, since it picks the commit time.

use super::{Decision, MS, PartitionServer};
use crate::ramp::msg::{Msg, Ts, TxnStatus};
use phasedb_net::{Addr, Transport};

impl PartitionServer {
    pub(super) fn run_ctp<T: Transport<Msg>>(&mut self, net: &mut T, now: u64) {
        let timeout = self.settings.ctp_timeout_ms * MS;
        let mut due: Vec<Ts> = Vec::new();
        for (&ts, p) in self.pending.iter_mut() {
            let stalled = now >= p.prepared_at + timeout;
            let round_over = p.ctp.as_ref().is_none_or(|(at, _)| now >= at + timeout);
            if stalled && round_over {
                p.ctp = Some((now, Vec::new()));
                due.push(ts);
            }
        }
        due.sort_unstable();
        for ts in due {
            let p = &self.pending[&ts];
            let ask: Vec<Addr> = match p.coordinator {
                Some(c) if c != self.me => vec![c],
                _ => p
                    .participants
                    .iter()
                    .copied()
                    .filter(|&a| a != self.me)
                    .collect(),
            };
            if ask.is_empty() {
                self.all_prepared(net, ts);
                continue;
            }
            for to in ask {
                net.send(to, Msg::Status { ts });
            }
        }
    }

    /// What this server tells a peer about `ts`; an unknown timestamp is promised aborted.
    pub(super) fn status_for_peer(&mut self, ts: Ts, now: u64) -> (TxnStatus, u64) {
        if self.pending.contains_key(&ts) {
            return (TxnStatus::Prepared, 0);
        }
        match self.decision(ts) {
            Some(Decision::Committed(ctime)) => (TxnStatus::Committed, ctime),
            Some(Decision::Aborted) => (TxnStatus::Aborted, 0),
            None => {
                self.promise_abort(ts, now);
                (TxnStatus::Aborted, 0)
            }
        }
    }

    pub(super) fn on_status_reply<T: Transport<Msg>>(
        &mut self,
        net: &mut T,
        from: Addr,
        ts: Ts,
        status: TxnStatus,
        ctime: u64,
    ) {
        let now = net.now();
        let Some(p) = self.pending.get_mut(&ts) else {
            return;
        };
        match status {
            TxnStatus::Committed => {
                if self.commit_txn(ts, ctime, now) {
                    self.stats.ctp_commits += 1;
                }
            }
            TxnStatus::Aborted => {
                self.abort_txn(ts, now);
                self.stats.ctp_aborts += 1;
            }
            TxnStatus::Prepared => {
                let Some((_, prepared)) = p.ctp.as_mut() else {
                    return;
                };
                if !prepared.contains(&from) {
                    prepared.push(from);
                }
                let me = self.me;
                let everyone = p
                    .participants
                    .iter()
                    .all(|a| *a == me || prepared.contains(a));
                if everyone {
                    self.all_prepared(net, ts);
                }
            }
        }
    }

    fn all_prepared<T: Transport<Msg>>(&mut self, net: &mut T, ts: Ts) {
        let now = net.now();
        let Some(p) = self.pending.get(&ts) else {
            return;
        };
        match p.coordinator {
            None => {
                self.commit_txn(ts, 0, now);
                self.stats.ctp_commits += 1;
            }
            Some(c) if c == self.me => {
                let others: Vec<Addr> = p
                    .participants
                    .iter()
                    .copied()
                    .filter(|&a| a != self.me)
                    .collect();
                let ctime = self.epci.tick_commit_time();
                self.commit_txn(ts, ctime, now);
                self.stats.ctp_commits += 1;
                for to in others {
                    net.send(to, Msg::CommitAt { ts, ctime });
                }
            }
            Some(_) => {}
        }
    }
}
