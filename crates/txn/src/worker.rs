use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use phasedb_check::History;

use crate::database::Database;
use crate::error::{Conflict, TxError, TxResult};
use crate::footprint::Footprint;
use crate::phase::PhaseWord;
use crate::protocol::Protocol;
use crate::state::{CommitCtx, TxState};
use crate::stats::Stats;
use crate::tx::Tx;

/// A per-thread context that runs transactions: its reusable transaction sets, its TID state,
/// statistics and (when recording) its history. Create one per thread with [`Database::worker`].
pub struct Worker<'db, P: Protocol> {
    pub(crate) db: &'db Database<P>,
    pub(crate) id: u32,
    pub(crate) slot: usize,
    pub(crate) state: TxState<P::Meta>,
    pub(crate) last_tid: u64,
    rng: u64,
    stats: Stats,
    progress: Arc<CachePadded<AtomicU64>>,
    pub(crate) history: Option<History>,
    stash_mode: bool,
    origin: Option<Stamp>,
    /// The phase in which this worker last left a due change to workers still rerunning stashed
    /// transactions, and when it first did in that phase (a cycle-counter reading).
    deferred_since: Option<(PhaseWord, u64)>,
    /// Counts transactions, to time one in [`LATENCY_SAMPLE`].
    sample: u64,
    /// The worker's registration with the epoch-based reclamation of the storage layer (pinning
    /// through it skips a thread-local lookup per attempt).
    pub(crate) epoch_handle: crossbeam_epoch::LocalHandle,
    /// The footprint of the transaction last stashed.
    stashed: Footprint,
    /// Rows to prefetch when the next attempt starts: records, and index slots (see
    /// [`Worker::prefetch_ahead`]).
    ahead_records: Footprint,
    ahead_slots: Footprint,
    /// The TID of the transaction [`Worker::execute`] last committed with writes (0: the last call
    /// committed nothing, or only read); its sets stay in `state` until the next call.
    pub(crate) committed: u64,
    /// The epoch of that transaction if its TID does not carry it ([`CommitCtx::epoch`]; 0: the
    /// TID's).
    pub(crate) committed_epoch: u64,
    /// Commits keep their write locks until [`Worker::release_locks`] ([`CommitCtx::hold_locks`]).
    pub(crate) hold_locks: bool,
    /// Conflicts abort at once and are returned, without waiting for locks ([`CommitCtx::no_wait`]).
    no_wait: bool,
    /// The last commit installed its writes and still holds their locks.
    pub(crate) holding: bool,
    /// Commits stop prepared ([`CommitCtx::prepare`], see [`Worker::set_prepare`]).
    pub(crate) prepare: bool,
    /// The last transaction is prepared: its write locks held, nothing installed.
    pub(crate) prepared: bool,
    /// How a prepared transaction's locks are released (set by [`Worker::set_prepare`]).
    pub(crate) release_prepared: Option<ReleasePrepared<P>>,
    /// How held locks are released (set by [`Worker::set_hold_locks`], for protocols with TID
    /// words); the worker's drop releases what it still holds.
    release_held: Option<ReleaseHeld<P>>,
    /// The type (statistics index) of the transaction the last call of [`Worker::execute`]
    /// committed (`None`: it did not commit).
    pub(crate) committed_type: Option<usize>,
}

/// Releases a prepared transaction's locks, restoring the words they replaced.
pub(crate) type ReleasePrepared<P> = fn(&mut TxState<<P as Protocol>::Meta>, &Database<P>);

/// Releases the locks a held commit kept, publishing its TID (see [`Worker::set_hold_locks`]).
type ReleaseHeld<P> = fn(&mut TxState<<P as Protocol>::Meta>, &Database<P>, u64);

/// One committed transaction in this many has its latency measured: reading the clock twice costs
/// about as much as a short transaction (on this VM, `perf` put 1-in-4 timing at about 6% of
/// Doppel's split-phase cycles), and 1 in 16 of millions still gives steady p99s. Stashed
/// transactions are sampled alike, so they weigh in the percentiles as often as they occur.
pub const LATENCY_SAMPLE: u64 = 16;

/// Longest a worker leaves a due phase change to others rerunning stashed transactions (see
/// `Worker::defer_to_replays`); a worker reruns at most a split phase's stashed transactions, a
/// few milliseconds' work.
const REPLAY_PATIENCE_NS: u64 = 100_000_000;

/// A reading of the database's cycle counter: taken for every stashed transaction, where
/// `Instant::now` would cost a clock read through the VM's clock source.
#[derive(Clone, Copy, Debug)]
pub struct Stamp(u64);

impl<'db, P: Protocol> Worker<'db, P> {
    pub(crate) fn new(db: &'db Database<P>, id: u32) -> Self {
        let slot = db.activity.register();
        let mut state = TxState::new(db.max_row_words());
        state.slot = slot;
        state.worker = id;
        state.log = db.durable.as_ref().map(|d| d.logging.clone());
        Worker {
            db,
            id,
            slot,
            state,
            last_tid: 0,
            rng: 0x2545_f491_4f6c_dd1d ^ ((id as u64 + 1) << 17),
            stats: Stats::default(),
            progress: Arc::new(CachePadded::new(AtomicU64::new(0))),
            history: db.config.record_history.then(History::default),
            stash_mode: false,
            origin: None,
            deferred_since: None,
            sample: id as u64,
            epoch_handle: crossbeam_epoch::default_collector().register(),
            stashed: Footprint::default(),
            ahead_records: Footprint::default(),
            ahead_slots: Footprint::default(),
            committed: 0,
            committed_epoch: 0,
            hold_locks: false,
            no_wait: false,
            holding: false,
            prepare: false,
            prepared: false,
            release_prepared: None,
            release_held: None,
            committed_type: None,
        }
    }

    /// The worker's id, unique within its database.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The database.
    pub fn database(&self) -> &'db Database<P> {
        self.db
    }

    /// Statistics since creation or the last reset.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Mutable statistics (to reset them after a warm-up).
    pub fn stats_mut(&mut self) -> &mut Stats {
        &mut self.stats
    }

    /// A counter of committed transactions that another thread may read while the worker runs.
    pub fn progress(&self) -> Arc<CachePadded<AtomicU64>> {
        self.progress.clone()
    }

    /// Runs `procedure` as one transaction of type `ty` (an index for statistics). A conflict aborts
    /// the attempt, waits a randomised exponential backoff and runs the procedure again; any other
    /// error (including a panic in the procedure) is returned with nothing written.
    ///
    /// Under a phased protocol a transaction that cannot run in the current phase (Doppel: it reads
    /// split data) is stashed: in stash mode ([`Worker::set_stash_mode`]) `execute` returns
    /// [`TxError::Stashed`] at once so the caller can rerun it later; otherwise it waits for a phase
    /// that can run it.
    #[inline]
    pub fn execute<R>(
        &mut self,
        ty: usize,
        mut procedure: impl FnMut(&mut Tx<'_, 'db, P>) -> TxResult<R>,
    ) -> TxResult<R> {
        assert!(
            !self.holding && !self.prepared,
            "Worker::release_locks (or finish_prepared/abort_prepared) must end the last commit's hold before the next transaction"
        );
        let clock = &self.db.clock;
        self.sample = self.sample.wrapping_add(1);
        let timed = self.sample.is_multiple_of(LATENCY_SAMPLE);
        let start = if timed || P::USES_AGE { clock.raw() } else { 0 };
        if P::USES_AGE {
            self.state.ts = (clock.delta_as_nanos(self.db.opened_raw, start) << 10)
                | (self.slot as u64 & 0x3ff);
        }
        let mut attempt = 0u32;
        self.committed = 0;
        self.committed_epoch = 0;
        self.committed_type = None;
        if let Some(log) = &self.state.log
            && let Some(why) = log.failure()
        {
            self.stats.of_type(ty).failures += 1;
            return Err(TxError::NotDurable(why));
        }
        loop {
            let epoch = self.db.epoch.current();
            if self.db.granularity.due(epoch) {
                crate::granularity::tick(self.db, epoch);
            }
            self.db.activity.enter(self.slot, epoch);
            if P::PHASED {
                self.phase_boundary();
            }
            let guard = self.epoch_handle.pin();
            if !(self.ahead_records.is_empty() && self.ahead_slots.is_empty()) {
                self.issue_prefetch_ahead(&guard);
            }
            self.state.reset();
            let db = self.db;
            let outcome = {
                let st = &mut self.state;
                let run = catch_unwind(AssertUnwindSafe(|| {
                    procedure(&mut Tx {
                        db,
                        st,
                        guard: &guard,
                    })
                }));
                match run {
                    Ok(Ok(value)) if self.state.dry_run => Ok((value, 0, 0)),
                    Ok(Ok(value)) => {
                        let mut ctx = CommitCtx {
                            db,
                            guard: &guard,
                            worker: self.id,
                            last_tid: &mut self.last_tid,
                            tid: 0,
                            epoch: 0,
                            hold_locks: self.hold_locks,
                            no_wait: self.no_wait,
                            prepare: self.prepare,
                        };
                        let committed = P::commit(&mut self.state, &mut ctx);
                        let (tid, epoch) = (ctx.tid, ctx.epoch);
                        committed.map(|()| (value, tid, epoch))
                    }
                    Ok(Err(e)) => Err(e),
                    Err(panic) => Err(TxError::Panicked(panic_message(&*panic))),
                }
                .map_err(|e| match e {
                    TxError::Conflict(_) | TxError::Stashed => e,
                    // An optimistic attempt may have failed only because it saw an inconsistent view.
                    _ if !P::reads_valid(&mut self.state, db, &guard) => {
                        TxError::Conflict(Conflict::Validation)
                    }
                    _ => e,
                })
            };
            if outcome.is_err() || self.state.dry_run {
                if P::PHASED && matches!(outcome, Err(TxError::Stashed)) {
                    self.stashed = self.state.stashed_footprint();
                }
                P::abort(&mut self.state, db);
                if matches!(outcome, Err(TxError::Conflict(_))) {
                    P::on_conflict(&mut self.state, db);
                    if db.granularity.active() {
                        crate::granularity::sample_conflict(db, &self.state, self.slot);
                    }
                }
            }
            let record = !self.prepare && !self.state.dry_run;
            if let (Ok((_, tid, _)), Some(h), true) = (&outcome, &mut self.history, record) {
                crate::record::record_commit(db, &self.state, *tid, self.id, h);
            }
            if outcome.is_ok()
                && !self.state.dry_run
                && db.granularity.active()
                && let Some(weight) = db.granularity.commit_weight(self.sample)
            {
                crate::granularity::sample_commit(db, &self.state, self.slot, weight);
            }
            drop(guard);
            self.db.activity.leave(self.slot);
            P::reclaim(&mut self.state, db);
            match outcome {
                Ok((value, _, _)) if self.state.dry_run => return Ok(value),
                Ok((value, tid, epoch)) => {
                    self.committed = tid;
                    self.committed_epoch = epoch;
                    self.prepared = self.prepare;
                    self.holding =
                        !self.prepare && self.hold_locks && self.state.locks.iter().any(|l| l.held);
                    self.committed_type = Some(ty);
                    let s = self.stats.of_type(ty);
                    s.committed += 1;
                    if timed {
                        let from = self.origin.map_or(start, |o| o.0);
                        let _ = s
                            .latency_ns
                            .record(clock.delta_as_nanos(from, clock.raw()).max(1));
                    }
                    self.progress
                        .store(self.progress.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                    return Ok(value);
                }
                Err(TxError::Conflict(c)) => {
                    self.stats.of_type(ty).count_conflict(c);
                    if self.no_wait {
                        return Err(TxError::Conflict(c));
                    }
                    attempt += 1;
                    if self.db.config.max_retries.is_some_and(|m| attempt >= m) {
                        self.stats.of_type(ty).failures += 1;
                        return Err(TxError::TooManyRetries(attempt));
                    }
                    self.backoff(attempt);
                }
                Err(TxError::Stashed) => {
                    self.stats.of_type(ty).stashed += 1;
                    if self.stash_mode {
                        return Err(TxError::Stashed);
                    }
                    self.wait_for_stashed_phase();
                }
                Err(e) => {
                    let s = self.stats.of_type(ty);
                    if e == TxError::UserAbort {
                        s.user_aborts += 1;
                    } else {
                        s.failures += 1;
                    }
                    return Err(e);
                }
            }
        }
    }

    /// NO_WAIT (STAR §8.1.2): a conflict aborts the attempt and [`Worker::execute`] returns it
    /// ([`TxError::Conflict`]) instead of retrying, and a write lock another transaction holds is not
    /// waited for. For callers that run several transactions on one thread, where the holder cannot
    /// release while this one waits, and that retry later themselves.
    pub fn set_no_wait(&mut self, on: bool) {
        self.no_wait = on;
    }

    /// Whether the last commit still holds its write locks (see `Worker::set_hold_locks`).
    pub fn holds_locks(&self) -> bool {
        self.holding
    }

    /// The epoch of the transaction [`Worker::execute`] last committed, if it wrote (`None` if it
    /// only read or did not commit): under durable operation it is durable once
    /// [`Database::durable_epoch`] reaches this epoch (SiloR's epoch-based group commit).
    pub fn commit_epoch(&self) -> Option<u64> {
        match (self.committed, self.committed_epoch) {
            (0, 0) => None,
            (tid, 0) => Some(crate::tid::epoch_of(tid)),
            (_, epoch) => Some(epoch),
        }
    }

    /// The type (the `ty` given to [`Worker::execute`]) of the transaction the last call
    /// committed, or `None` if that call did not commit (an abort, an error).
    pub fn committed_type(&self) -> Option<usize> {
        self.committed_type
    }

    /// Waits until the transaction [`Worker::execute`] last committed is durable (at once if it
    /// wrote nothing). An error if durable operation is off, or if logging failed: then the
    /// transaction may be lost.
    pub fn wait_durable(&self) -> Result<(), crate::durability::DurabilityError> {
        match self.commit_epoch() {
            Some(epoch) => self.db.wait_durable(epoch),
            None if self.db.durable.is_some() => Ok(()),
            None => Err(crate::durability::DurabilityError::NotConfigured),
        }
    }

    /// Makes [`Worker::execute`] return [`TxError::Stashed`] instead of waiting when a phased protocol
    /// stashes a transaction; the caller then reruns it once [`Worker::may_resume_stashed`] says so.
    pub fn set_stash_mode(&mut self, on: bool) {
        self.stash_mode = on;
    }

    /// The footprint of the transaction [`Worker::execute`] last returned [`TxError::Stashed`] for:
    /// the rows its attempt named, to keep with it for [`Worker::prefetch_ahead`].
    pub fn stashed_footprint(&self) -> Footprint {
        self.stashed
    }

    /// Has the next attempt start by prefetching the records of `records` and the index slots of
    /// `slots`: a caller that knows the transactions queued behind the next one (stashed reruns, a
    /// server's batch of one-shots) passes the footprints of those [`crate::RECORDS_AHEAD`] and
    /// [`crate::SLOTS_AHEAD`] behind it, so that each finds its rows in the cache (see
    /// [`Footprint`]).
    pub fn prefetch_ahead(&mut self, records: Option<&Footprint>, slots: Option<&Footprint>) {
        self.ahead_records = records.copied().unwrap_or_default();
        self.ahead_slots = slots.copied().unwrap_or_default();
    }

    #[cold]
    #[inline(never)]
    fn issue_prefetch_ahead(&mut self, guard: &phasedb_storage::Guard) {
        self.ahead_records.prefetch_records(self.db, guard);
        self.ahead_slots.prefetch_slots(self.db, guard);
        self.ahead_records.clear();
        self.ahead_slots.clear();
    }

    /// Makes the next transactions' latency count from `origin` (when a stashed transaction first
    /// started) instead of from the call to [`Worker::execute`]; `None` goes back to the call.
    pub fn set_origin(&mut self, origin: Option<Stamp>) {
        self.origin = origin;
    }

    /// The time now, for [`Worker::set_origin`].
    pub fn stamp(&self) -> Stamp {
        Stamp(self.db.clock.raw())
    }

    /// Tells the worker its caller holds stashed transactions, so it puts off phases that would
    /// stash them again until they have run.
    pub fn set_stash_pending(&mut self, pending: bool) {
        if pending != self.state.stash_pending {
            self.state.stash_pending = pending;
            if P::PHASED {
                self.db.phases.set_holding(self.slot, pending);
            }
        }
    }

    /// Whether stashed transactions can run now (always true for protocols without phases): the
    /// worker is in a phase that runs them, and stays in it while it holds them (see
    /// [`Worker::set_stash_pending`]) even if the coordinator has published the next one.
    pub fn may_resume_stashed(&self) -> bool {
        if !P::PHASED {
            return true;
        }
        let phases = &self.db.phases;
        let p = phases.published();
        let own = self.state.phase;
        if p == own {
            phases.released() >= p && P::resumes_stashed(p)
        } else {
            P::resumes_stashed(own) && phases.acked(self.slot) < p && phases.released() >= own
        }
    }

    /// Whether the database is released into a phase that runs stashed transactions.
    fn stashed_phase_released(&self) -> bool {
        let phases = &self.db.phases;
        let p = phases.published();
        phases.released() == p && P::resumes_stashed(p)
    }

    /// At a transaction boundary, with the slot marked busy: takes the coordinator's role if a phase
    /// change is due, and follows the published phase.
    #[inline]
    fn phase_boundary(&mut self) {
        let phases = &self.db.phases;
        // A worker holding stashed transactions for its phase leaves the change to others.
        if phases.due() && !(self.state.stash_pending && P::resumes_stashed(self.state.phase)) {
            self.coordinate();
        }
        if phases.published() != self.state.phase {
            self.follow_phase();
        }
    }

    #[cold]
    fn coordinate(&mut self) {
        if self.defer_to_replays() {
            return;
        }
        if let Some(role) = self.db.phases.try_coordinate() {
            P::coordinate(self.db, &role, Some(&mut self.state));
        }
    }

    /// Whether to leave a due change to the workers still rerunning their stashed transactions in
    /// this phase, and go on running transactions meanwhile: whoever starts the change waits at its
    /// barrier until they have run them, and the last of them to finish starts it instead. This
    /// worker stops deferring after [`REPLAY_PATIENCE_NS`] (a worker that stopped with stashed
    /// transactions is then handled by the barrier's own patience).
    fn defer_to_replays(&mut self) -> bool {
        let phases = &self.db.phases;
        // The phase the change would leave: this worker may not have followed into it yet.
        let current = phases.published();
        if !P::resumes_stashed(current)
            || !phases.held_by_others(self.slot, self.db.activity.high())
        {
            self.deferred_since = None;
            return false;
        }
        let clock = &self.db.clock;
        let now = clock.raw();
        let since = match self.deferred_since {
            Some((phase, since)) if phase == current => since,
            _ => {
                self.deferred_since = Some((current, now));
                now
            }
        };
        clock.delta_as_nanos(since, now) < REPLAY_PATIENCE_NS
    }

    /// Acknowledges published phases (doing the worker's part of each change) and waits until the
    /// coordinator releases the worker into the latest one.
    #[cold]
    fn follow_phase(&mut self) {
        let phases = &self.db.phases;
        let mut spins = 0u32;
        loop {
            let p = phases.published();
            if p != self.state.phase {
                if phases.acked(self.slot) >= p {
                    // The coordinator did this worker's part while it was idle.
                    self.state.phase = p;
                } else if P::enter_phase(&mut self.state, self.db, p) {
                    self.state.phase = p;
                    phases.ack(self.slot, p);
                } else {
                    // The worker holds transactions back from `p`. It still enters the phase it
                    // was released into if `p` was published before it got there (it acknowledged
                    // the change before that one): its held transactions run in that phase, and
                    // the coordinator of `p` waits for them.
                    let r = phases.released();
                    if r > self.state.phase && r < p && P::enter_phase(&mut self.state, self.db, r)
                    {
                        self.state.phase = r;
                        phases.ack(self.slot, r);
                    }
                    return;
                }
            }
            if phases.released() >= p {
                return;
            }
            spins += 1;
            if spins > 64 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// Waits, outside any transaction, until a phase that can run stashed transactions; asks the
    /// coordinator to hurry there, and takes its role if nobody else does.
    #[cold]
    fn wait_for_stashed_phase(&mut self) {
        let phases = &self.db.phases;
        phases.hurry();
        while !self.stashed_phase_released() {
            if phases.due() {
                self.db.activity.enter(self.slot, self.db.epoch.current());
                self.coordinate();
                self.db.activity.leave(self.slot);
            }
            std::thread::yield_now();
        }
    }

    fn backoff(&mut self, attempt: u32) {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let cap = (1u64 << attempt.min(20)).min(self.db.config.max_backoff_spins as u64);
        let spins = self.rng % cap.max(1);
        for _ in 0..spins {
            std::hint::spin_loop();
        }
        if attempt > 8 {
            std::thread::yield_now();
        }
    }

    /// The transaction [`Worker::execute`] last committed, if it wrote: its TID and its sets (writes,
    /// images, locks with the words they replaced), as its commit and reclamation left them.
    pub(crate) fn last_commit(&mut self) -> Option<(u64, &mut TxState<P::Meta>)> {
        (self.committed != 0).then_some((self.committed, &mut self.state))
    }

    /// Takes the history recorded so far (empty unless the database records).
    pub fn take_history(&mut self) -> History {
        self.history
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }
}

impl<P: Protocol> Drop for Worker<'_, P> {
    fn drop(&mut self) {
        if let (true, Some(release)) = (self.prepared, self.release_prepared) {
            release(&mut self.state, self.db);
        }
        if let (true, Some(release)) = (self.holding, self.release_held) {
            release(&mut self.state, self.db, self.committed);
        }
        self.set_stash_pending(false);
        if let Some(h) = self.history.take() {
            self.db.deposit_history(h);
        }
        self.db.activity.release(self.slot);
        self.db.adopt_limbo(&mut self.state.limbo);
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

impl<'db, P: Protocol<Meta = crate::tid::TidWord>> Worker<'db, P> {
    /// Makes Silo commits (OCC, and STAR's single-master rule) install their writes but keep the
    /// write locks until [`Worker::release_locks`]: synchronous replication holds a transaction's
    /// write locks until its secondaries acknowledged its writes (STAR §8.1.3). The transaction is
    /// committed when `execute` returns (its TID chosen, its writes in place, its replication
    /// records readable with [`Worker::write_replication`]); meanwhile other transactions that read
    /// or write those groups conflict. The worker runs no other transaction before the release.
    /// A commit that fails validation releases its locks as usual.
    pub fn set_hold_locks(&mut self, on: bool) {
        self.hold_locks = on;
        self.release_held = Some(crate::commit::release_held::<P>);
    }

    /// Releases the write locks the last commit kept ([`Worker::set_hold_locks`]), publishing its
    /// writes' TIDs; then unlinks what it deleted once nobody can see it. Does nothing if it holds
    /// none.
    pub fn release_locks(&mut self) {
        if !self.holding {
            return;
        }
        crate::commit::release_held(&mut self.state, self.db, self.committed);
        self.holding = false;
        P::reclaim(&mut self.state, self.db);
    }
}
