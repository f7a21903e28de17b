//! The client side: one sans-I/O state machine per concurrent client ([`TxnClient`]), pools of them
//! multiplexed on one endpoint, and the node types that host them.

pub mod pool;
pub mod router;

use rustc_hash::FxHashMap;

use crate::ramp::epci::client as epci;
use crate::ramp::hint::{RoundHints, sibling_sigs};
use crate::ramp::locking::client as locking;
use crate::ramp::msg::{
    Algorithm, GetMode, Key, LockMode, Meta, Msg, Outcome, Participants, ReadResult, ReadValue, Ts,
    TxnSpec,
};
use crate::ramp::rounds::{self as ramp, FirstRoundView, RampKind};
use crate::ramp::ts::TsGen;
use phasedb_net::{Addr, Transport};
pub use router::Router;

/// How a client runs transactions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClientSettings {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// RAMP-H Bloom filter size in bits.
    pub bloom_bits: usize,
    /// RAMP-H Bloom filter hash count.
    pub bloom_hashes: u8,
    /// Resend unanswered requests after this many ns (0: never). Every request is idempotent.
    pub retry_ns: u64,
    /// Share of RAMP writes that skip COMMIT and return after PREPARE, leaving the commit to the
    /// cooperative termination protocol (the paper's blocked-writes experiment, §5.3).
    pub skip_commit: f64,
}

impl ClientSettings {
    /// Defaults for `algorithm`: 256-bit, 4-hash filters and a 200 ms resend timeout.
    pub fn new(algorithm: Algorithm) -> Self {
        ClientSettings {
            algorithm,
            bloom_bits: crate::ramp::bloom::DEFAULT_BITS,
            bloom_hashes: crate::ramp::bloom::DEFAULT_HASHES,
            retry_ns: 200_000_000,
            skip_commit: 0.0,
        }
    }
}

/// One server's share of a one-round write: its writes and the locks it releases.
type PutGroup = (Addr, Vec<(Key, Vec<u8>)>, Vec<Key>);

/// The group of server `to`, added if missing.
fn put_group(groups: &mut Vec<PutGroup>, to: Addr) -> &mut PutGroup {
    let i = match groups.iter().position(|g| g.0 == to) {
        Some(i) => i,
        None => {
            groups.push((to, Vec::new(), Vec::new()));
            groups.len() - 1
        }
    };
    &mut groups[i]
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Idle,
    Read1,
    Read2,
    Lock(usize),
    Prepare,
    Commit,
    Put,
}

struct Slot {
    key: Key,
    ts: Ts,
    ctime: u64,
    value: Vec<u8>,
    meta: Meta,
}

impl FirstRoundView for Slot {
    fn key(&self) -> Key {
        self.key
    }

    fn ts(&self) -> Ts {
        self.ts
    }

    fn meta(&self) -> &Meta {
        &self.meta
    }
}

/// One client: runs one transaction at a time through GET_ALL and PUT_ALL (or a baseline's rounds).
pub struct TxnClient {
    slot: u32,
    settings: ClientSettings,
    router: Router,
    tsgen: TsGen,
    clock: u64,
    seq: u32,
    step: Step,
    requests: Vec<(Addr, Msg)>,
    answered: Vec<bool>,
    remaining: usize,
    sent_at: u64,
    txn: TxnSpec,
    reads: Vec<Slot>,
    index: FxHashMap<Key, usize>,
    restart: bool,
    /// Whether a first-round version named siblings (RAMP-F/H): without any, none can be missing.
    siblings: bool,
    rounds: u8,
    restarts: u32,
    /// Requests resent after the resend timeout, over the client's life.
    resends: u64,
    write_ts: Option<Ts>,
    ctime: u64,
    prepare_clock: u64,
    refused: bool,
    locks: Vec<(Key, LockMode)>,
    owner: Ts,
    /// Unlocks of finished read-only lock transactions, resent until acknowledged.
    trailing: Vec<(Addr, Msg)>,
    trailing_sent_at: u64,
}

impl TxnClient {
    /// Client `client_id` (unique in the cluster; it makes timestamps unique) at position `slot` of its
    /// endpoint (replies find it by the slot in their request id).
    pub fn new(slot: u32, client_id: u32, settings: ClientSettings, router: Router) -> Self {
        TxnClient {
            slot,
            settings,
            router,
            tsgen: TsGen::new(client_id),
            clock: 0,
            seq: 0,
            step: Step::Idle,
            requests: Vec::new(),
            answered: Vec::new(),
            remaining: 0,
            sent_at: 0,
            txn: TxnSpec::default(),
            reads: Vec::new(),
            index: FxHashMap::default(),
            restart: false,
            siblings: false,
            rounds: 0,
            restarts: 0,
            resends: 0,
            write_ts: None,
            ctime: 0,
            prepare_clock: 0,
            refused: false,
            locks: Vec::new(),
            owner: 0,
            trailing: Vec::new(),
            trailing_sent_at: 0,
        }
    }

    /// True when no transaction is running.
    pub fn is_idle(&self) -> bool {
        self.step == Step::Idle
    }

    /// The algorithm this client runs.
    pub fn algorithm(&self) -> Algorithm {
        self.settings.algorithm
    }

    /// Moves the E-PCI logical clock forward (a proxy starts from its server's clock, so its reads are
    /// not older than what that server has seen).
    pub fn observe_clock(&mut self, clock: u64) {
        self.clock = self.clock.max(clock);
    }

    /// Switches algorithm or settings between transactions (proxies serve any algorithm).
    pub fn reconfigure(&mut self, settings: ClientSettings) {
        debug_assert!(self.is_idle());
        self.settings = settings;
    }

    /// The slot of a request id.
    pub fn slot_of(rid: u64) -> u32 {
        (rid >> 32) as u32
    }

    fn next_rid(&mut self) -> u64 {
        self.seq = self.seq.wrapping_add(1);
        ((self.slot as u64) << 32) | self.seq as u64
    }

    fn send_round<T: Transport<Msg>>(
        &mut self,
        net: &mut T,
        step: Step,
        requests: Vec<(Addr, Msg)>,
    ) {
        self.step = step;
        self.remaining = requests.len();
        self.answered.clear();
        self.answered.resize(requests.len(), false);
        self.sent_at = net.now();
        for (to, m) in &requests {
            net.send_copy(*to, m);
        }
        self.requests = requests;
    }

    /// Starts `txn` (the client must be idle). Reads run first (GET_ALL), then writes (PUT_ALL).
    pub fn start<T: Transport<Msg>>(&mut self, net: &mut T, txn: TxnSpec) {
        debug_assert!(self.is_idle(), "one transaction at a time per client");
        self.txn = txn;
        self.restarts = 0;
        self.write_ts = None;
        self.ctime = 0;
        self.prepare_clock = 0;
        self.refused = false;
        self.reads.clear();
        self.index.clear();
        for (i, &key) in self.txn.reads.iter().enumerate() {
            self.index.insert(key, i);
            self.reads.push(Slot {
                key,
                ts: 0,
                ctime: 0,
                value: Vec::new(),
                meta: Meta::None,
            });
        }
        if self.settings.algorithm == Algorithm::Lwlr {
            self.owner = self.tsgen.next_ts();
            self.locks = locking::lwlr_plan(&self.txn);
            self.send_lock(net, 0);
        } else if !self.txn.reads.is_empty() {
            self.start_reads(net);
        } else {
            self.start_writes(net);
        }
    }

    fn start_reads<T: Transport<Msg>>(&mut self, net: &mut T) {
        self.restart = false;
        self.siblings = false;
        self.rounds = 1;
        let mode = match self.settings.algorithm {
            Algorithm::RampSmall => GetMode::LatestTs,
            Algorithm::Epci => GetMode::AtTime(self.clock),
            Algorithm::Lwsr => {
                self.owner = self.tsgen.next_ts();
                self.locks = locking::short_read_plan(&self.txn);
                self.send_lock(net, 0);
                return;
            }
            _ => GetMode::Latest,
        };
        let keys: Vec<(Key, GetMode)> = self.txn.reads.iter().map(|&k| (k, mode.clone())).collect();
        self.send_gets(net, Step::Read1, keys, Vec::new(), true);
    }

    /// One GET per server. A first round (`whole`: every item of the read set) tells RAMP-F/H servers
    /// about the read set, so they answer only the metadata the reader can use; each server's share
    /// of it comes from the grouping, so no item is routed twice.
    fn send_gets<T: Transport<Msg>>(
        &mut self,
        net: &mut T,
        step: Step,
        reads: Vec<(Key, GetMode)>,
        ts_set: Vec<Ts>,
        whole: bool,
    ) {
        let rid = self.next_rid();
        let kind = match self.settings.algorithm {
            Algorithm::RampFast if whole => Some(RampKind::Fast),
            Algorithm::RampHybrid if whole => Some(RampKind::Hybrid),
            _ => None,
        };
        let groups = self.router.group(reads);
        let mut hints = RoundHints::new(kind, self.txn.reads.len(), &groups);
        let requests = groups
            .into_iter()
            .enumerate()
            .map(|(i, (to, reads))| {
                let m = Msg::Get {
                    rid,
                    reads,
                    ts_set: ts_set.clone(),
                    hint: hints.take(i),
                };
                (to, m)
            })
            .collect();
        self.send_round(net, step, requests);
    }

    fn send_lock<T: Transport<Msg>>(&mut self, net: &mut T, i: usize) {
        let (key, mode) = self.locks[i];
        let rid = self.next_rid();
        let to = self.router.node_of(key);
        let owner = self.owner;
        self.send_round(
            net,
            Step::Lock(i),
            vec![(
                to,
                Msg::Lock {
                    rid,
                    key,
                    mode,
                    owner,
                },
            )],
        );
    }

    fn start_writes<T: Transport<Msg>>(&mut self, net: &mut T) {
        let algorithm = self.settings.algorithm;
        match algorithm {
            Algorithm::RampFast
            | Algorithm::RampSmall
            | Algorithm::RampHybrid
            | Algorithm::Epci => {
                let ts = self.tsgen.next_ts();
                self.write_ts = Some(ts);
                let kind = match algorithm {
                    Algorithm::RampFast => Some(RampKind::Fast),
                    Algorithm::RampHybrid => Some(RampKind::Hybrid),
                    _ => None,
                };
                let meta = kind.map_or(Meta::None, |k| {
                    ramp::write_meta(
                        k,
                        self.txn.writes.iter().map(|(k, _)| *k),
                        self.settings.bloom_bits,
                        self.settings.bloom_hashes,
                    )
                });
                let groups = self.router.group(self.txn.writes.iter().cloned());
                let participants: Participants = groups.iter().map(|g| g.0).collect();
                let coordinator =
                    (algorithm == Algorithm::Epci).then(|| epci::coordinator(ts, &participants));
                let sigs = sibling_sigs(&meta, &groups);
                let rid = self.next_rid();
                let requests = groups
                    .into_iter()
                    .zip(sigs)
                    .map(|((to, writes), sibling_sig)| {
                        let m = Msg::Prepare {
                            rid,
                            ts,
                            writes,
                            sibling_sig,
                            meta: meta.clone(),
                            participants: participants.clone(),
                            coordinator,
                        };
                        (to, m)
                    })
                    .collect();
                self.send_round(net, Step::Prepare, requests);
            }
            Algorithm::Nwnr => {
                let ts = self.tsgen.next_ts();
                self.write_ts = Some(ts);
                self.send_puts(net, ts, &[]);
            }
            Algorithm::Lwnr | Algorithm::Lwsr => {
                self.owner = self.tsgen.next_ts();
                self.locks = locking::write_plan(&self.txn);
                self.send_lock(net, 0);
            }
            Algorithm::Lwlr => unreachable!("LWLR locks reads and writes together in start"),
        }
    }

    /// Installs the writes in one round; `unlock` lists every locked item (empty without locks).
    /// A server holding locks but no writes gets an empty PUT, so every release is acknowledged.
    fn send_puts<T: Transport<Msg>>(&mut self, net: &mut T, ts: Ts, unlock: &[Key]) {
        let rid = self.next_rid();
        let owner = self.owner;
        let mut groups: Vec<PutGroup> = Vec::new();
        for (k, v) in &self.txn.writes {
            put_group(&mut groups, self.router.node_of(*k))
                .1
                .push((*k, v.clone()));
        }
        for &k in unlock {
            put_group(&mut groups, self.router.node_of(k)).2.push(k);
        }
        let requests: Vec<(Addr, Msg)> = groups
            .into_iter()
            .map(|(to, writes, unlock)| {
                let m = Msg::Put {
                    rid,
                    ts,
                    writes,
                    unlock,
                    owner,
                };
                (to, m)
            })
            .collect();
        self.send_round(net, Step::Put, requests);
    }

    /// Feeds a reply; returns the outcome when the transaction finishes.
    pub fn on_reply<T: Transport<Msg>>(
        &mut self,
        net: &mut T,
        from: Addr,
        msg: Msg,
    ) -> Option<Outcome> {
        let rid = msg.reply_rid()?;
        if let Msg::UnlockAck { rid } = msg {
            self.trailing.retain(|(to, m)| {
                *to != from || !matches!(m, Msg::Unlock { rid: r, .. } if *r == rid)
            });
            return None;
        }
        if self.step == Step::Idle || rid as u32 != self.seq {
            return None;
        }
        let i =
            (0..self.requests.len()).find(|&i| self.requests[i].0 == from && !self.answered[i])?;
        self.answered[i] = true;
        self.remaining -= 1;
        match msg {
            Msg::GetReply { results, clock, .. } => {
                self.clock = self.clock.max(clock);
                for r in results {
                    self.take_read(r);
                }
            }
            Msg::LockGranted { result, .. } => self.take_read(result),
            Msg::PrepareAck {
                ok, clock, newest, ..
            } => {
                self.tsgen.observe(newest);
                self.refused |= !ok;
                self.prepare_clock = self.prepare_clock.max(clock);
            }
            Msg::PutAck { newest, .. } => self.tsgen.observe(newest),
            Msg::CommitAck { ctime, .. } => {
                self.ctime = self.ctime.max(ctime);
                self.clock = self.clock.max(ctime);
            }
            _ => {}
        }
        if self.remaining > 0 {
            return None;
        }
        self.advance(net)
    }

    fn take_read(&mut self, r: ReadResult) {
        match r {
            ReadResult::Found {
                key,
                ts,
                ctime,
                value,
                meta,
            } => {
                self.tsgen.observe(ts);
                self.siblings |= meta != Meta::None;
                if let Some(&i) = self.index.get(&key) {
                    let s = &mut self.reads[i];
                    if self.step == Step::Read1 || (ctime, ts) >= (s.ctime, s.ts) {
                        *s = Slot {
                            key,
                            ts,
                            ctime,
                            value,
                            meta,
                        };
                    }
                }
            }
            ReadResult::Missing { .. } => {
                if self.settings.algorithm == Algorithm::RampFast {
                    self.restart = true;
                }
            }
            ReadResult::Gone { .. } => self.restart = true,
        }
    }

    fn advance<T: Transport<Msg>>(&mut self, net: &mut T) -> Option<Outcome> {
        match self.step {
            Step::Read1 | Step::Read2 if self.restart => {
                self.restarts += 1;
                self.start_reads(net);
                None
            }
            Step::Read1 => {
                let first = &self.reads;
                let (second, ts_set) = match self.settings.algorithm {
                    Algorithm::RampFast | Algorithm::RampHybrid if !self.siblings => {
                        (Vec::new(), Vec::new())
                    }
                    Algorithm::RampFast => (ramp::second_round_fast(first), Vec::new()),
                    Algorithm::RampSmall => ramp::second_round_small(first),
                    Algorithm::RampHybrid => ramp::second_round_hybrid(first),
                    _ => (Vec::new(), Vec::new()),
                };
                if second.is_empty() {
                    self.reads_done(net)
                } else {
                    self.rounds = 2;
                    self.send_gets(net, Step::Read2, second, ts_set, false);
                    None
                }
            }
            Step::Read2 => self.reads_done(net),
            Step::Lock(i) if i + 1 < self.locks.len() => {
                self.send_lock(net, i + 1);
                None
            }
            Step::Lock(_) => self.locks_done(net),
            Step::Prepare if self.refused => Some(self.finish(false)),
            Step::Prepare if self.settings.algorithm.is_ramp() && self.skips_commit() => {
                Some(self.finish(true))
            }
            Step::Prepare => {
                let ts = self.write_ts.expect("prepared a write");
                let rid = self.next_rid();
                let after = self.prepare_clock;
                let mut requests = std::mem::take(&mut self.requests);
                if self.settings.algorithm == Algorithm::Epci {
                    let participants: Participants = requests.iter().map(|r| r.0).collect();
                    let coordinator = epci::coordinator(ts, &participants);
                    requests.retain(|r| r.0 == coordinator);
                }
                for (_, m) in &mut requests {
                    *m = Msg::Commit { rid, ts, after };
                }
                self.send_round(net, Step::Commit, requests);
                None
            }
            Step::Commit | Step::Put => Some(self.finish(true)),
            Step::Idle => None,
        }
    }

    /// Whether this write leaves its COMMIT to CTP, decided by a hash of its timestamp.
    fn skips_commit(&self) -> bool {
        let p = self.settings.skip_commit;
        if p <= 0.0 {
            return false;
        }
        let h = self
            .write_ts
            .unwrap_or(0)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            >> 11;
        (h as f64 / (1u64 << 53) as f64) < p
    }

    /// Abandons the running transaction (a crashed client); returns its write timestamp if it had
    /// started writing, since that write may still commit through CTP.
    pub fn abandon(&mut self) -> Option<Ts> {
        let writing = matches!(self.step, Step::Prepare | Step::Commit | Step::Put);
        self.step = Step::Idle;
        self.requests.clear();
        self.trailing.clear();
        if writing { self.write_ts } else { None }
    }

    fn reads_done<T: Transport<Msg>>(&mut self, net: &mut T) -> Option<Outcome> {
        if self.txn.writes.is_empty() {
            return Some(self.finish(true));
        }
        self.start_writes(net);
        None
    }

    fn locks_done<T: Transport<Msg>>(&mut self, net: &mut T) -> Option<Outcome> {
        let short_reads = self.locks.iter().all(|l| l.1 == LockMode::ShortRead);
        if short_reads {
            return self.reads_done(net);
        }
        let locked: Vec<Key> = self.locks.iter().map(|l| l.0).collect();
        if self.txn.writes.is_empty() {
            // Nothing waits for the release: the client finishes now and resends it until acknowledged.
            let owner = self.owner;
            for (to, keys) in self.router.group(locked.into_iter().map(|k| (k, ()))) {
                let m = Msg::Unlock {
                    rid: self.next_rid(),
                    keys: keys.into_iter().map(|k| k.0).collect(),
                    owner,
                };
                net.send_copy(to, &m);
                self.trailing.push((to, m));
            }
            self.trailing_sent_at = net.now();
            return Some(self.finish(true));
        }
        let ts = self.tsgen.next_ts();
        self.write_ts = Some(ts);
        self.send_puts(net, ts, &locked);
        None
    }

    fn finish(&mut self, committed: bool) -> Outcome {
        self.step = Step::Idle;
        self.requests.clear();
        Outcome {
            committed,
            ts: self.write_ts,
            ctime: self.ctime,
            reads: self
                .reads
                .drain(..)
                .map(|s| ReadValue {
                    key: s.key,
                    ts: s.ts,
                    ctime: s.ctime,
                    value: s.value,
                })
                .collect(),
            read_rounds: self.rounds,
            restarts: self.restarts,
        }
    }

    /// Resends the unanswered requests of the current round, and unacknowledged unlocks, once the
    /// resend timeout has passed.
    pub fn on_tick<T: Transport<Msg>>(&mut self, net: &mut T) {
        let retry = self.settings.retry_ns;
        if retry == 0 {
            return;
        }
        let now = net.now();
        if !self.trailing.is_empty() && now >= self.trailing_sent_at + retry {
            self.trailing_sent_at = now;
            self.resends += self.trailing.len() as u64;
            for (to, m) in &self.trailing {
                net.send_copy(*to, m);
            }
        }
        if self.step == Step::Idle || now < self.sent_at + retry {
            return;
        }
        self.sent_at = now;
        for (i, (to, m)) in self.requests.iter().enumerate() {
            if !self.answered[i] {
                self.resends += 1;
                net.send_copy(*to, m);
            }
        }
        self.renew_held_locks(net);
    }

    /// Calls `f` with the server of every request still unanswered past the resend timeout at
    /// `now` (those the next tick resends): the servers this client is waiting on.
    pub fn for_each_overdue(&self, now: u64, mut f: impl FnMut(Addr)) {
        let retry = self.settings.retry_ns;
        if retry == 0 {
            return;
        }
        if now >= self.trailing_sent_at + retry {
            self.trailing.iter().for_each(|(to, _)| f(*to));
        }
        if self.step == Step::Idle || now < self.sent_at + retry {
            return;
        }
        self.requests
            .iter()
            .zip(&self.answered)
            .filter(|(_, answered)| !**answered)
            .for_each(|((to, _), _)| f(*to));
    }

    /// Requests this client resent because no answer came within the resend timeout (a server
    /// slow, or down).
    pub fn resends(&self) -> u64 {
        self.resends
    }

    /// A lock transaction waiting past the resend timeout tells every server holding its locks that
    /// it is alive, so their leases do not run out under it.
    fn renew_held_locks<T: Transport<Msg>>(&mut self, net: &mut T) {
        let held = match self.step {
            Step::Lock(i) => i,
            Step::Put if self.settings.algorithm.takes_locks() => self.locks.len(),
            _ => 0,
        };
        let keys = self.locks[..held]
            .iter()
            .filter(|l| l.1 != LockMode::ShortRead)
            .map(|l| (l.0, ()));
        let owner = self.owner;
        for (to, keys) in self.router.group(keys) {
            let keys = keys.into_iter().map(|k| k.0).collect();
            net.send(to, Msg::Renew { keys, owner });
        }
    }
}
