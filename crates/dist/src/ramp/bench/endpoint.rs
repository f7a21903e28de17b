//! A benchmark endpoint: many closed-loop clients multiplexed over one set of connections.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Instant;

use super::stats::Stats;
use super::workload::{TxnGen, TxnKind};
use crate::ramp::client::pool::ClientPool;
use crate::ramp::history::Recorder;
use crate::ramp::msg::{Msg, TxnSpec};
use phasedb_net::{Addr, Node, Transport};

/// Warm-up: transactions run but are not counted.
pub const WARMUP: u8 = 0;
/// Measuring: finished transactions are counted.
pub const MEASURE: u8 = 1;
/// Stopping: no new transaction starts and the endpoint finishes.
pub const STOP: u8 = 2;

/// What the driver and an endpoint share: the phase, a progress counter and when each server
/// last answered.
pub struct Control {
    /// [`WARMUP`], [`MEASURE`] or [`STOP`].
    pub phase: AtomicU8,
    /// Transactions finished so far (for the progress bar and the throughput per interval).
    pub finished: AtomicU64,
    /// The clock of `last_reply_ms`.
    pub epoch: Instant,
    /// Per server, milliseconds from `epoch` to its latest reply (updated at most every
    /// [`REPLY_MARK_MS`] per endpoint), 0 if it never answered.
    pub last_reply_ms: Vec<AtomicU64>,
    /// Per server, milliseconds from `epoch` to the latest time a client found a request to it
    /// unanswered past the resend timeout (marked like `last_reply_ms`), 0 if never: a server
    /// nobody waits on is idle, not silent.
    pub waited_ms: Vec<AtomicU64>,
}

/// How stale an endpoint lets its mark of a server's latest reply get, in milliseconds.
pub const REPLY_MARK_MS: u64 = 10;

impl Control {
    /// Shared state for a run against `servers` servers (addresses `0..servers`).
    pub fn new(servers: usize) -> Control {
        Control {
            phase: AtomicU8::new(WARMUP),
            finished: AtomicU64::new(0),
            epoch: Instant::now(),
            last_reply_ms: (0..servers).map(|_| AtomicU64::new(0)).collect(),
            waited_ms: (0..servers).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Milliseconds since `epoch` of `server`'s latest reply, if any.
    pub fn last_reply(&self, server: usize) -> Option<u64> {
        match self.last_reply_ms.get(server)?.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(ms),
        }
    }

    /// Milliseconds since `epoch` when a client last found a request to `server` overdue, if ever.
    pub fn last_waited(&self, server: usize) -> Option<u64> {
        match self.waited_ms.get(server)?.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(ms),
        }
    }

    fn mark_reply(&self, server: usize, marked: &mut u64) {
        Self::mark(&self.last_reply_ms, self.epoch, server, marked);
    }

    fn mark_waited(&self, server: usize, marked: &mut u64) {
        Self::mark(&self.waited_ms, self.epoch, server, marked);
    }

    fn mark(slots: &[AtomicU64], epoch: Instant, server: usize, marked: &mut u64) {
        let ms = epoch.elapsed().as_millis() as u64 + 1;
        if ms >= *marked + REPLY_MARK_MS
            && let Some(slot) = slots.get(server)
        {
            *marked = ms;
            slot.fetch_max(ms, Ordering::Relaxed);
        }
    }
}

/// The endpoint node.
pub struct BenchEndpoint {
    pool: ClientPool,
    gens: Vec<TxnGen>,
    running: Vec<(TxnKind, TxnSpec, u64)>,
    control: Arc<Control>,
    /// Per server, this endpoint's latest mark of its reply in `control`.
    marked: Vec<u64>,
    /// Per server, this endpoint's latest mark of an overdue request in `control`.
    waited: Vec<u64>,
    /// Counters of the measured window.
    pub stats: Stats,
    /// Every transaction, when the run checks its history.
    pub recorder: Option<Recorder>,
}

impl BenchEndpoint {
    /// An endpoint whose client `i` draws transactions from `gens[i]`.
    pub fn new(pool: ClientPool, gens: Vec<TxnGen>, control: Arc<Control>, record: bool) -> Self {
        let n = pool.len();
        BenchEndpoint {
            pool,
            gens,
            running: vec![(TxnKind::Read, TxnSpec::default(), 0); n],
            marked: vec![0; control.last_reply_ms.len()],
            waited: vec![0; control.waited_ms.len()],
            control,
            stats: Stats::default(),
            recorder: record.then(Recorder::new),
        }
    }

    /// Requests this endpoint's clients resent after their resend timeout.
    pub fn resends(&self) -> u64 {
        self.pool.resends()
    }

    fn start_next<T: Transport<Msg>>(&mut self, net: &mut T, slot: u32) {
        let (kind, spec) = self.gens[slot as usize].next_txn();
        self.running[slot as usize] = (kind, spec.clone(), net.now());
        self.pool.start(net, slot, spec);
    }
}

impl Node for BenchEndpoint {
    type Msg = Msg;

    fn on_start<T: Transport<Msg>>(&mut self, net: &mut T) {
        for slot in 0..self.pool.len() as u32 {
            self.start_next(net, slot);
        }
    }

    fn on_message<T: Transport<Msg>>(&mut self, net: &mut T, from: Addr, msg: Msg) {
        if let Some(marked) = self.marked.get_mut(from as usize) {
            self.control.mark_reply(from as usize, marked);
        }
        let Some((slot, outcome)) = self.pool.on_reply(net, from, msg) else {
            return;
        };
        let (kind, spec, started) = &self.running[slot as usize];
        let phase = self.control.phase.load(Ordering::Relaxed);
        if phase == MEASURE {
            self.stats
                .kind_mut(*kind)
                .record(&outcome, net.now().saturating_sub(*started));
        }
        if let Some(r) = &mut self.recorder {
            r.record(spec, &outcome);
        }
        self.control.finished.fetch_add(1, Ordering::Relaxed);
        if phase != STOP {
            self.start_next(net, slot);
        }
    }

    fn on_tick<T: Transport<Msg>>(&mut self, net: &mut T) {
        let (control, waited) = (&self.control, &mut self.waited);
        self.pool.for_each_overdue(net.now(), |server| {
            if let Some(marked) = waited.get_mut(server as usize) {
                control.mark_waited(server as usize, marked);
            }
        });
        self.pool.on_tick(net);
    }

    /// Done once stopping and every client has finished its last transaction, so every write the
    /// history holds is complete.
    fn is_done(&self) -> bool {
        self.control.phase.load(Ordering::Relaxed) == STOP && self.pool.all_idle()
    }
}
