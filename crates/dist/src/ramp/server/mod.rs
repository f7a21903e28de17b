//! The partition server (RAMP Algorithms 1–3, server side) and the server halves of the baselines.
//!
//! One [`PartitionServer`] holds the items of every partition its node serves. It is a sans-I/O
//! state machine: [`PartitionServer::handle`] takes one message and answers through the transport.

mod ctp;
mod stats_text;
pub mod store;

use rustc_hash::FxHashMap;

use crate::ramp::epci::server::EpciState;
use crate::ramp::expiring::Expiring;
use crate::ramp::hint::ReadSetFilter;
use crate::ramp::locking::table::{LockTable, Waiter};
use crate::ramp::msg::{
    GetMode, Key, Meta, Msg, Participants, ReadResult, ReadSetHint, Ts, TxnStatus, Value, WriteSet,
};
use phasedb_net::config::ServerSettings;
use phasedb_net::{Addr, Transport};
use store::{Store, StoreStats};

const MS: u64 = 1_000_000;

/// A transaction prepared here whose COMMIT has not arrived.
#[derive(Clone, Debug)]
pub(crate) struct PendingTxn {
    pub keys: WriteSet,
    pub participants: Participants,
    pub coordinator: Option<Addr>,
    pub prepared_at: u64,
    /// When the current cooperative-termination round started, and who answered Prepared.
    pub ctp: Option<(u64, Vec<Addr>)>,
}

/// The outcome of a transaction as this server will always report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    Committed(u64),
    Aborted,
}

/// Counters of a server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Store counters (versions held, collected).
    pub store: StoreStats,
    /// Transactions prepared here and not yet decided.
    pub pending: usize,
    /// Transactions committed by the cooperative termination protocol.
    pub ctp_commits: u64,
    /// Transactions aborted by the cooperative termination protocol.
    pub ctp_aborts: u64,
    /// Transactions committed early because a GET returned one of their prepared versions.
    pub fast_commits: u64,
    /// GET items answered Gone because the version was collected.
    pub gone: u64,
    /// E-PCI commit checks sent to coordinators.
    pub commit_checks: u64,
    /// Items with a lock holder or waiter now (lock baselines).
    pub locked: usize,
    /// Locks taken back because their holder stayed silent past the lock lease.
    pub lease_expiries: u64,
}

/// The server state machine.
pub struct PartitionServer {
    pub(crate) me: Addr,
    pub(crate) settings: ServerSettings,
    pub(crate) store: Store,
    pub(crate) pending: FxHashMap<Ts, PendingTxn>,
    decided: Expiring<Ts, Decision>,
    locks: LockTable,
    pub(crate) epci: EpciState,
    pub(crate) stats: ServerStats,
}

impl PartitionServer {
    /// An empty server for node `me`.
    pub fn new(me: Addr, settings: ServerSettings) -> Self {
        PartitionServer {
            me,
            settings,
            store: Store::new(settings.gc_window_ms * MS),
            pending: FxHashMap::default(),
            decided: Expiring::new((settings.gc_window_ms + 20 * settings.ctp_timeout_ms) * MS),
            locks: LockTable::new(settings.lock_lease_ms * MS),
            epci: EpciState::default(),
            stats: ServerStats::default(),
        }
    }

    /// Counters, with the store's.
    pub fn stats(&self) -> ServerStats {
        ServerStats {
            store: self.store.stats(),
            pending: self.pending.len(),
            locked: self.locks.len(),
            ..self.stats
        }
    }

    /// Timestamps of transactions prepared here and undecided.
    pub fn pending_txns(&self) -> Vec<Ts> {
        let mut v: Vec<Ts> = self.pending.keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// What this server will report about `ts`, if it knows it.
    pub fn status(&self, ts: Ts) -> Option<TxnStatus> {
        if self.pending.contains_key(&ts) {
            return Some(TxnStatus::Prepared);
        }
        self.decided.get(&ts).map(|d| match d {
            Decision::Committed(_) => TxnStatus::Committed,
            Decision::Aborted => TxnStatus::Aborted,
        })
    }

    /// The commit time of `ts` if it committed here (0 outside E-PCI), for tools and tests.
    pub fn commit_time(&self, ts: Ts) -> Option<u64> {
        match self.decided.get(&ts) {
            Some(Decision::Committed(ctime)) => Some(*ctime),
            _ => None,
        }
    }

    /// The E-PCI logical clock: at least every commit time and read timestamp seen here.
    pub fn clock(&self) -> u64 {
        self.epci.clock()
    }

    /// The version at lastCommit of `key` (for tests and tools).
    pub fn latest(&self, key: Key) -> ReadResult {
        self.store.latest(key, true)
    }

    /// A crash: in-flight protocol rounds and locks are lost; versions, prepared transactions,
    /// decisions and the E-PCI clock (with the promises to commit after readers it embodies) survive,
    /// as they would in the log the paper asks for.
    pub fn on_crash(&mut self) {
        for p in self.pending.values_mut() {
            p.ctp = None;
        }
        self.locks.clear();
        self.epci.forget_waiting_reads();
    }

    /// Handles one message from `from`.
    pub fn handle<T: Transport<Msg>>(&mut self, net: &mut T, from: Addr, msg: Msg) {
        match msg {
            Msg::Prepare {
                rid,
                ts,
                writes,
                meta,
                sibling_sig,
                participants,
                coordinator,
            } => {
                let versions = (meta, sibling_sig);
                let ok = self.prepare(net.now(), ts, writes, versions, participants, coordinator);
                let clock = self.epci.clock();
                let newest = self.store.newest();
                net.send(
                    from,
                    Msg::PrepareAck {
                        rid,
                        ok,
                        clock,
                        newest,
                    },
                );
            }
            Msg::Commit { rid, ts, after } => {
                self.epci.observe(after);
                let ctime = self.commit_request(net, ts);
                net.send(from, Msg::CommitAck { rid, ctime });
            }
            Msg::Get {
                rid,
                reads,
                ts_set,
                hint,
            } => self.get(net, from, rid, reads, &ts_set, &hint),
            Msg::Put {
                rid,
                ts,
                writes,
                unlock,
                owner,
            } => {
                let now = net.now();
                for (key, value) in writes {
                    self.store.put(key, ts, value, now);
                }
                self.unlock(net, &unlock, owner, now);
                let newest = self.store.newest();
                net.send(from, Msg::PutAck { rid, newest });
            }
            Msg::Lock {
                rid,
                key,
                mode,
                owner,
            } => {
                let w = Waiter {
                    from,
                    rid,
                    key,
                    mode,
                    owner,
                };
                if let Some(w) = self.locks.acquire(w, net.now()) {
                    self.grant(net, w);
                }
            }
            Msg::Renew { keys, owner } => self.locks.renew(&keys, owner, net.now()),
            Msg::Unlock { rid, keys, owner } => {
                let now = net.now();
                self.unlock(net, &keys, owner, now);
                net.send(from, Msg::UnlockAck { rid });
            }
            Msg::Status { ts } => {
                let (status, ctime) = self.status_for_peer(ts, net.now());
                net.send(from, Msg::StatusReply { ts, status, ctime });
            }
            Msg::StatusReply { ts, status, ctime } => {
                self.on_status_reply(net, from, ts, status, ctime)
            }
            Msg::CommitAt { ts, ctime } => {
                self.commit_txn(ts, ctime, net.now());
            }
            Msg::CheckCommit { ts, read_ts } => {
                let ctime = self.check_commit(ts, read_ts);
                net.send(from, Msg::CheckReply { ts, ctime, read_ts });
            }
            Msg::CheckReply { ts, ctime, read_ts } => self.on_check_reply(net, ts, ctime, read_ts),
            Msg::PrepareAck { .. }
            | Msg::CommitAck { .. }
            | Msg::GetReply { .. }
            | Msg::PutAck { .. }
            | Msg::LockGranted { .. }
            | Msg::UnlockAck { .. }
            | Msg::Run { .. }
            | Msg::RunReply { .. } => {}
        }
    }

    fn prepare(
        &mut self,
        now: u64,
        ts: Ts,
        writes: Vec<(Key, Value)>,
        (meta, sibling_sig): (Meta, u64),
        participants: Participants,
        coordinator: Option<Addr>,
    ) -> bool {
        match self.decided.get(&ts) {
            Some(Decision::Aborted) => return false,
            Some(Decision::Committed(_)) => return true,
            None => {}
        }
        if self.pending.contains_key(&ts) {
            return true;
        }
        let keys: WriteSet = writes.iter().map(|(k, _)| *k).collect();
        for (key, value) in writes {
            self.store
                .prepare(key, ts, value, meta.clone(), sibling_sig);
        }
        self.pending.insert(
            ts,
            PendingTxn {
                keys,
                participants,
                coordinator,
                prepared_at: now,
                ctp: None,
            },
        );
        true
    }

    /// COMMIT from a client. Under E-PCI the coordinator picks the commit time and tells the cohort.
    fn commit_request<T: Transport<Msg>>(&mut self, net: &mut T, ts: Ts) -> u64 {
        // The writes in flight are few and their table stays in cache; the decisions of the last
        // window are many, so a COMMIT looks there only for a transaction no longer pending.
        let Some(p) = self.pending.get(&ts) else {
            return match self.decided.get(&ts) {
                Some(Decision::Committed(ctime)) => *ctime,
                _ => 0,
            };
        };
        if p.coordinator == Some(self.me) {
            let others: Vec<Addr> = p
                .participants
                .iter()
                .copied()
                .filter(|&a| a != self.me)
                .collect();
            let ctime = self.epci.tick_commit_time();
            self.commit_txn(ts, ctime, net.now());
            for to in others {
                net.send(to, Msg::CommitAt { ts, ctime });
            }
            ctime
        } else {
            self.commit_txn(ts, 0, net.now());
            0
        }
    }

    /// Makes every version of `ts` here committed and records the decision.
    pub(crate) fn commit_txn(&mut self, ts: Ts, ctime: u64, now: u64) -> bool {
        let Some(p) = self.pending.remove(&ts) else {
            return false;
        };
        for &key in p.keys.iter() {
            self.store.commit(key, ts, ctime, now);
        }
        self.epci.observe(ctime);
        self.decide(ts, Decision::Committed(ctime), now);
        true
    }

    /// Discards every prepared version of `ts` here and records the abort.
    pub(crate) fn abort_txn(&mut self, ts: Ts, now: u64) {
        if let Some(p) = self.pending.remove(&ts) {
            for &key in p.keys.iter() {
                self.store.discard(key, ts);
            }
        }
        self.decide(ts, Decision::Aborted, now);
    }

    fn decide(&mut self, ts: Ts, d: Decision, now: u64) {
        self.decided.insert(ts, d, now);
    }

    /// Answers a GET item by item; E-PCI reads may first need commit checks. With a read-set hint,
    /// the metadata of lastCommit versions (first rounds) is reduced to the reader's possible
    /// siblings elsewhere ([`Meta::Siblings`]); other lookups answer it whole.
    fn get<T: Transport<Msg>>(
        &mut self,
        net: &mut T,
        from: Addr,
        rid: u64,
        reads: Vec<(Key, GetMode)>,
        ts_set: &[Ts],
        hint: &ReadSetHint,
    ) {
        if reads.iter().any(|(_, m)| matches!(m, GetMode::AtTime(_))) {
            self.epci_get(net, from, rid, reads);
            return;
        }
        let now = net.now();
        let mut filter = ReadSetFilter::new(hint);
        let mut results = Vec::with_capacity(reads.len());
        for &(key, ref mode) in &reads {
            let (r, prepared) = match mode {
                GetMode::Latest => {
                    let r = self
                        .store
                        .latest_as(key, true, |m, sig, ts| filter.siblings(m, sig, key, ts));
                    (r, false)
                }
                GetMode::LatestTs => (self.store.latest(key, false), false),
                GetMode::Exact(ts) => self.store.exact(key, *ts),
                GetMode::InRequestSet => self.store.in_set(key, ts_set),
                GetMode::AtTime(_) => unreachable!("handled by epci_get"),
            };
            if prepared && let ReadResult::Found { ts, .. } = r {
                // Faster commit detection (§4.7): a second-round read names a committed sibling.
                if self.commit_txn(ts, 0, now) {
                    self.stats.fast_commits += 1;
                }
            }
            if matches!(r, ReadResult::Gone { .. }) {
                self.stats.gone += 1;
            }
            results.push(r);
        }
        net.send(
            from,
            Msg::GetReply {
                rid,
                results,
                clock: 0,
            },
        );
    }

    /// Answers a granted lock request with the item's committed version (a short read lock holds
    /// nothing once answered).
    fn grant<T: Transport<Msg>>(&mut self, net: &mut T, w: Waiter) {
        let result = self.store.latest(w.key, true);
        net.send(w.from, Msg::LockGranted { rid: w.rid, result });
    }

    /// Releases `owner`'s locks on `keys` at `now` (the handler's clock reading, taken once per
    /// message) and grants what waited on them.
    fn unlock<T: Transport<Msg>>(&mut self, net: &mut T, keys: &[Key], owner: Ts, now: u64) {
        for g in self.locks.release(keys, owner, now) {
            self.grant(net, g);
        }
    }

    /// Periodic work: cooperative termination of stalled writes, GC of versions and old decisions.
    pub fn tick<T: Transport<Msg>>(&mut self, net: &mut T) {
        let now = net.now();
        self.run_ctp(net, now);
        self.store.collect(now);
        let (expired, granted) = self.locks.expire(now);
        self.stats.lease_expiries += expired;
        for g in granted {
            self.grant(net, g);
        }
        self.decided.expire(now);
    }

    pub(crate) fn decision(&self, ts: Ts) -> Option<Decision> {
        self.decided.get(&ts).copied()
    }

    pub(crate) fn promise_abort(&mut self, ts: Ts, now: u64) {
        self.decide(ts, Decision::Aborted, now);
    }
}
