//! The shared phase mechanism: a coordinator publishes the next phase, workers acknowledge it between
//! transactions, and the coordinator releases them into it once every worker has. A transaction
//! therefore runs entirely within one phase. Doppel's joined / split / reconciliation phases run on it.
//!
//! There is no coordinator thread: a ticker thread only marks a change as due, and the first worker to
//! notice between two transactions takes the coordinator's role. A worker that is not inside
//! [`crate::Worker::execute`] cannot acknowledge, so the coordinator claims its activity slot (see
//! `Activity::try_claim`) and does the worker's part of the change for it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use parking_lot::{Mutex, MutexGuard};

use crate::activity::Activity;

/// A phase: a sequence number that grows with every change (high bits) and a kind the protocol
/// defines (low 8 bits). Comparing words compares sequence numbers.
pub type PhaseWord = u64;

/// The kind of a phase word.
#[inline]
pub const fn kind(p: PhaseWord) -> u8 {
    p as u8
}

/// The sequence number of a phase word.
#[inline]
pub const fn seq(p: PhaseWord) -> u64 {
    p >> 8
}

/// How long the coordinator waits for a worker that holds transactions back before it acts for the
/// worker anyway (a worker that stopped running transactions without running them).
const HOLDING_PATIENCE: Duration = Duration::from_millis(500);

/// What the phase mechanism shares between workers.
pub struct Phases {
    /// The phase the coordinator asks for.
    published: CachePadded<AtomicU64>,
    /// The latest phase workers may run in.
    released: CachePadded<AtomicU64>,
    /// Per activity slot, the phase the slot acknowledged last.
    acked: Box<[CachePadded<AtomicU64>]>,
    /// Per activity slot, whether its worker holds transactions back for its current phase (Doppel's
    /// stashed transactions): the coordinator then waits for the worker's own acknowledgement
    /// rather than acting for it while it is between transactions.
    holding: Box<[CachePadded<AtomicBool>]>,
    /// Held by whoever coordinates.
    coordinator: Mutex<()>,
    /// Changes in which the coordinator stopped waiting for a worker that held transactions back
    /// for longer than [`HOLDING_PATIENCE`] and acted for it.
    overdue: AtomicU64,
    /// Nanoseconds coordinators spent in [`Phases::publish_and_wait`].
    waited_ns: AtomicU64,
    /// Set when a change is due (by the ticker, or by a worker that wants one sooner).
    due: Arc<CachePadded<AtomicBool>>,
    ticker: Option<Ticker>,
}

struct Ticker {
    stop: Arc<AtomicBool>,
    /// Nanoseconds after `origin` when the next change is due (`u64::MAX`: none scheduled).
    deadline: Arc<AtomicU64>,
    origin: Instant,
    thread: JoinHandle<()>,
}

impl Phases {
    /// Phases for `slots` activity slots, starting in phase 0 of kind `initial`; without a ticker.
    pub fn new(slots: usize, initial: u8) -> Phases {
        let p = initial as u64;
        Phases {
            published: CachePadded::new(AtomicU64::new(p)),
            released: CachePadded::new(AtomicU64::new(p)),
            acked: (0..slots)
                .map(|_| CachePadded::new(AtomicU64::new(p)))
                .collect(),
            holding: (0..slots)
                .map(|_| CachePadded::new(AtomicBool::new(false)))
                .collect(),
            coordinator: Mutex::new(()),
            overdue: AtomicU64::new(0),
            waited_ns: AtomicU64::new(0),
            due: Arc::new(CachePadded::new(AtomicBool::new(false))),
            ticker: None,
        }
    }

    /// Starts a ticker thread that marks a change due when the time [`Phases::schedule`]d comes;
    /// the first change is due after `first`.
    pub fn start_ticker(&mut self, first: Duration) {
        let stop = Arc::new(AtomicBool::new(false));
        let origin = Instant::now();
        let deadline = Arc::new(AtomicU64::new(first.as_nanos() as u64));
        let (due, s, d) = (self.due.clone(), stop.clone(), deadline.clone());
        let thread = std::thread::Builder::new()
            .name("phasedb-phases".into())
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    let at = d.load(Ordering::Acquire);
                    let now = origin.elapsed().as_nanos() as u64;
                    if at == u64::MAX {
                        std::thread::park_timeout(Duration::from_millis(100));
                    } else if now >= at {
                        due.store(true, Ordering::Release);
                        let _ =
                            d.compare_exchange(at, u64::MAX, Ordering::AcqRel, Ordering::Relaxed);
                    } else {
                        std::thread::park_timeout(Duration::from_nanos(at - now));
                    }
                }
            })
            .expect("spawn the phase ticker");
        self.ticker = Some(Ticker {
            stop,
            deadline,
            origin,
            thread,
        });
    }

    /// Schedules the next change `after` from now (replacing any scheduled one).
    pub fn schedule(&self, after: Duration) {
        if let Some(t) = &self.ticker {
            let at = t.origin.elapsed() + after;
            t.deadline.store(at.as_nanos() as u64, Ordering::Release);
            t.thread.thread().unpark();
        }
    }

    /// The phase published last.
    #[inline]
    pub fn published(&self) -> PhaseWord {
        self.published.load(Ordering::SeqCst)
    }

    /// The phase released last.
    #[inline]
    pub fn released(&self) -> PhaseWord {
        self.released.load(Ordering::Acquire)
    }

    /// Whether a change is due.
    #[inline]
    pub fn due(&self) -> bool {
        self.due.load(Ordering::Relaxed)
    }

    /// Changes so far in which a worker held transactions back past the coordinator's patience (a
    /// worker stalled, or a fault in the phase protocol: it should always run them promptly).
    pub fn overdue(&self) -> u64 {
        self.overdue.load(Ordering::Relaxed)
    }

    /// Time coordinators have spent waiting for workers to acknowledge published phases.
    pub fn barrier_wait(&self) -> Duration {
        Duration::from_nanos(self.waited_ns.load(Ordering::Relaxed))
    }

    /// Asks for a change as soon as a worker reaches a transaction boundary.
    pub fn hurry(&self) {
        self.due.store(true, Ordering::Release);
    }

    /// The phase `slot` acknowledged last.
    #[inline]
    pub fn acked(&self, slot: usize) -> PhaseWord {
        self.acked[slot].load(Ordering::SeqCst)
    }

    /// Marks whether `slot`'s worker holds transactions back for its current phase.
    pub fn set_holding(&self, slot: usize, holding: bool) {
        self.holding[slot].store(holding, Ordering::SeqCst);
    }

    /// Whether a worker other than `me`'s, among activity slots below `high`, holds transactions
    /// back for its current phase.
    pub fn held_by_others(&self, me: usize, high: usize) -> bool {
        self.holding[..high.min(self.holding.len())]
            .iter()
            .enumerate()
            .any(|(slot, h)| slot != me && h.load(Ordering::SeqCst))
    }

    /// Records that `slot` acknowledged `p`.
    #[inline]
    pub fn ack(&self, slot: usize, p: PhaseWord) {
        self.acked[slot].store(p, Ordering::SeqCst);
    }

    /// Takes the coordinator's role if nobody holds it, clearing the due mark.
    pub fn try_coordinate(&self) -> Option<MutexGuard<'_, ()>> {
        let g = self.coordinator.try_lock()?;
        self.due.store(false, Ordering::Relaxed);
        Some(g)
    }

    /// Takes the coordinator's role, waiting for it.
    pub fn coordinate(&self) -> MutexGuard<'_, ()> {
        let g = self.coordinator.lock();
        self.due.store(false, Ordering::Relaxed);
        g
    }

    /// Coordinator: publishes a phase of kind `k` and waits until every activity slot has
    /// acknowledged it. Slots of workers outside a transaction are claimed and `on_idle(slot)` does
    /// their part; `me` (the coordinating worker's slot, if any) is taken as acknowledged. The caller
    /// then does what the phase needs before [`Phases::release`]. Returns the published word.
    pub fn publish_and_wait(
        &self,
        _coordinator: &MutexGuard<'_, ()>,
        k: u8,
        activity: &Activity,
        me: Option<usize>,
        mut on_idle: impl FnMut(usize),
    ) -> PhaseWord {
        let p = ((seq(self.published()) + 1) << 8) | k as u64;
        self.published.store(p, Ordering::SeqCst);
        if let Some(me) = me {
            self.ack(me, p);
        }
        let start = Instant::now();
        for slot in 0..activity.high() {
            let mut spins = 0u32;
            while self.acked[slot].load(Ordering::SeqCst) < p {
                let holding = self.holding[slot].load(Ordering::SeqCst);
                let patient = holding && start.elapsed() < HOLDING_PATIENCE;
                if !patient && activity.try_claim(slot) {
                    if self.acked[slot].load(Ordering::SeqCst) < p {
                        if holding {
                            self.overdue.fetch_add(1, Ordering::Relaxed);
                        }
                        on_idle(slot);
                        self.ack(slot, p);
                    }
                    activity.unclaim(slot);
                    break;
                }
                spins += 1;
                if spins > 64 {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
                debug_assert!(
                    start.elapsed() < Duration::from_secs(60),
                    "a worker has not acknowledged phase {p:#x} for a minute"
                );
            }
        }
        self.waited_ns
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        p
    }

    /// Coordinator: publishes `p` if it is newer and lets workers run in it.
    pub fn release(&self, _coordinator: &MutexGuard<'_, ()>, p: PhaseWord) {
        if self.published() < p {
            self.published.store(p, Ordering::SeqCst);
        }
        self.released.store(p, Ordering::SeqCst);
    }

    /// The word of the next phase of kind `k` (after the published one).
    pub fn next_word(&self, k: u8) -> PhaseWord {
        ((seq(self.published()) + 1) << 8) | k as u64
    }
}

impl Drop for Phases {
    fn drop(&mut self) {
        if let Some(t) = self.ticker.take() {
            t.stop.store(true, Ordering::Relaxed);
            t.thread.thread().unpark();
            let _ = t.thread.join();
        }
    }
}
