//! E-PCI's server side: a logical clock, commit times, and GETs that wait on commit checks.

use rustc_hash::FxHashMap;

use crate::ramp::msg::{GetMode, Key, Msg, Ts};
use crate::ramp::server::PartitionServer;
use phasedb_net::{Addr, Transport};

struct Waiting {
    from: Addr,
    rid: u64,
    reads: Vec<(Key, u64)>,
    outstanding: usize,
}

/// Per-server E-PCI state: the Lamport clock and reads waiting for commit checks.
#[derive(Default)]
pub struct EpciState {
    clock: u64,
    next: u64,
    waiting: FxHashMap<u64, Waiting>,
    by_ts: FxHashMap<Ts, Vec<(u64, u64)>>,
}

impl EpciState {
    /// The clock now.
    pub fn clock(&self) -> u64 {
        self.clock
    }

    /// Moves the clock to at least `t`.
    pub fn observe(&mut self, t: u64) {
        self.clock = self.clock.max(t);
    }

    /// Drops the reads waiting for commit checks (a crash; their clients ask again).
    pub fn forget_waiting_reads(&mut self) {
        self.waiting.clear();
        self.by_ts.clear();
    }

    /// A commit time above everything this server has seen (reads, prepares, commits).
    pub fn tick_commit_time(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }
}

impl PartitionServer {
    /// A GET at read timestamps: ask the coordinator of every overlapping prepared write first.
    pub(crate) fn epci_get<T: Transport<Msg>>(
        &mut self,
        net: &mut T,
        from: Addr,
        rid: u64,
        reads: Vec<(Key, GetMode)>,
    ) {
        let reads: Vec<(Key, u64)> = reads
            .into_iter()
            .map(|(k, m)| match m {
                GetMode::AtTime(t) => (k, t),
                _ => (k, u64::MAX),
            })
            .collect();
        let mut checks: Vec<(Ts, Addr, u64)> = Vec::new();
        for &(key, read_ts) in &reads {
            self.epci.observe(read_ts.min(u64::MAX / 2));
            for ts in self.store.prepared(key) {
                let coordinator = self.pending.get(&ts).and_then(|p| p.coordinator);
                if let Some(c) = coordinator
                    && c != self.me
                    && !checks.iter().any(|x| x.0 == ts)
                {
                    checks.push((ts, c, read_ts));
                }
            }
        }
        if checks.is_empty() {
            self.epci_answer(net, from, rid, &reads);
            return;
        }
        let id = self.epci.next;
        self.epci.next += 1;
        self.epci.waiting.insert(
            id,
            Waiting {
                from,
                rid,
                reads,
                outstanding: checks.len(),
            },
        );
        for (ts, c, read_ts) in checks {
            self.stats.commit_checks += 1;
            self.epci.by_ts.entry(ts).or_default().push((id, read_ts));
            net.send(c, Msg::CheckCommit { ts, read_ts });
        }
    }

    /// The coordinator's answer: the commit time, or None after promising to commit later than `read_ts`.
    pub(crate) fn check_commit(&mut self, ts: Ts, read_ts: u64) -> Option<u64> {
        match self.decision(ts) {
            Some(crate::ramp::server::Decision::Committed(c)) => Some(c),
            _ => {
                self.epci.observe(read_ts);
                None
            }
        }
    }

    /// A coordinator's answer settles the waits it covers: all of them once `ts` committed, otherwise
    /// only those reading at or before the `read_ts` the coordinator promised to commit after.
    pub(crate) fn on_check_reply<T: Transport<Msg>>(
        &mut self,
        net: &mut T,
        ts: Ts,
        ctime: Option<u64>,
        read_ts: u64,
    ) {
        if let Some(c) = ctime {
            self.commit_txn(ts, c, net.now());
        }
        let Some(waits) = self.epci.by_ts.get_mut(&ts) else {
            return;
        };
        let mut settled = Vec::new();
        waits.retain(|&(id, t)| {
            let covered = ctime.is_some() || t <= read_ts;
            if covered {
                settled.push(id);
            }
            !covered
        });
        if waits.is_empty() {
            self.epci.by_ts.remove(&ts);
        }
        for id in settled {
            let done = match self.epci.waiting.get_mut(&id) {
                Some(w) => {
                    w.outstanding -= 1;
                    w.outstanding == 0
                }
                None => false,
            };
            if done {
                let w = self.epci.waiting.remove(&id).expect("present");
                self.epci_answer(net, w.from, w.rid, &w.reads);
            }
        }
    }

    fn epci_answer<T: Transport<Msg>>(
        &mut self,
        net: &mut T,
        from: Addr,
        rid: u64,
        reads: &[(Key, u64)],
    ) {
        let results = reads
            .iter()
            .map(|&(k, t)| self.store.at_time(k, t))
            .collect();
        let clock = self.epci.clock();
        net.send(
            from,
            Msg::GetReply {
                rid,
                results,
                clock,
            },
        );
    }
}
