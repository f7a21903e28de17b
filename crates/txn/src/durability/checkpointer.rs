//! The background checkpointer (SiloR §4.3): while workers run, it writes a consistent image of
//! every table as of an epoch, periodically ([`super::Durability::checkpoint_interval`]) and on
//! demand ([`crate::Database::checkpoint`]), then deletes the checkpoints and log segments no
//! longer needed, so a long run's disk use stays bounded.
//!
//! One checkpoint, in steps:
//! 1. Every logger moves to a new log segment `s`: each record taken from a worker's buffer before
//!    the last logger moved is in an older segment, and its epoch is at most `E`, the epoch read
//!    once all have moved.
//! 2. The start epoch is `S = E + 1`. The checkpointer waits until the global epoch reaches `S`
//!    and no running transaction started before `S`: every transaction of an epoch before `S` has
//!    then installed its writes.
//! 3. The tables' parts are read with stable reads and written by a few threads (a *fuzzy* image:
//!    it holds every write of epochs before `S` and some later ones).
//! 4. Before it is marked complete, the checkpointer waits until the epoch current at the end of
//!    the scan is durable: every write in the image is then in the logs, so the image never holds
//!    a write that recovery would drop (SiloR's condition that the checkpoint's end epoch be
//!    persistent).
//! 5. Recovery from it loads the image and replays the logs from segment `s` on, records of epoch
//!    `S` or later, with the Thomas write rule. The previous checkpoint is kept as the fallback,
//!    with the log segments from its start; older checkpoints and segments are deleted.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};
use phasedb_storage::Table;

use super::checkpoint::{self, Start};
use super::logger::Logging;
use super::{CheckpointReport, DurabilityError, start};
use crate::activity::Activity;
use crate::epoch::EpochReader;
use crate::tid::TidMeta;

/// What the checkpointer thread and the database share.
#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    cv: Condvar,
    stop: AtomicBool,
}

#[derive(Default)]
struct State {
    /// Tickets of checkpoints asked for on demand, and the newest ticket a finished checkpoint
    /// started after.
    requested: u64,
    finished: u64,
    /// The outcome of the last checkpoint.
    last: Option<Result<CheckpointReport, DurabilityError>>,
    totals: super::CheckpointStats,
}

/// The checkpointer thread; dropping it stops it (a checkpoint under way is abandoned).
pub(crate) struct Checkpointer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// Everything one checkpoint needs, owned by the checkpointer thread.
pub(crate) struct Context<M> {
    pub tables: Arc<Vec<Table<M>>>,
    /// Read while the image is written, so no table changes its groups meanwhile (see
    /// `crate::granularity`).
    pub layout_gate: Arc<RwLock<()>>,
    pub logging: Arc<Logging>,
    pub activity: Arc<Activity>,
    pub epoch: EpochReader,
    pub dir: PathBuf,
    pub generation: u64,
    pub threads: usize,
    pub interval: Option<Duration>,
    /// [`super::Durability::checkpoint_wait_limit`].
    pub wait_limit: Duration,
    /// The newest complete checkpoint (the one written at start) and where its replay starts.
    pub newest: (u64, Start),
}

impl Checkpointer {
    /// Starts the thread.
    pub(crate) fn start<M: TidMeta>(ctx: Context<M>) -> Checkpointer {
        let shared = Arc::new(Shared::default());
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("phasedb-checkpointer".into())
                .spawn(move || run(ctx, &shared))
                .expect("spawn the checkpointer thread")
        };
        Checkpointer {
            shared,
            thread: Some(thread),
        }
    }

    /// Takes a checkpoint now (after the one under way, if any) and waits for it, calling
    /// `waited` (with the lock released) each time it has waited `patience` more: a phased
    /// protocol settles its phase there, as the image waits for epochs that a split phase holds
    /// back until its reconciliation, which idle workers would never start.
    pub(crate) fn checkpoint(
        &self,
        patience: Duration,
        mut waited: impl FnMut(),
    ) -> Result<CheckpointReport, DurabilityError> {
        let mut state = self.shared.state.lock();
        state.requested += 1;
        let ticket = state.requested;
        self.shared.cv.notify_all();
        let mut since = Instant::now();
        while state.finished < ticket {
            if self.thread.as_ref().is_none_or(|t| t.is_finished()) {
                return Err(DurabilityError::Checkpoint(
                    "the checkpointer stopped".into(),
                ));
            }
            if since.elapsed() >= patience {
                parking_lot::MutexGuard::unlocked(&mut state, &mut waited);
                since = Instant::now();
            }
            self.shared
                .cv
                .wait_for(&mut state, Duration::from_millis(10));
        }
        state
            .last
            .clone()
            .expect("a finished checkpoint left its outcome")
    }

    /// Checkpoints taken so far.
    pub(crate) fn stats(&self) -> super::CheckpointStats {
        self.shared.state.lock().totals.clone()
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run<M: TidMeta>(mut ctx: Context<M>, shared: &Shared) {
    let mut next_due = ctx.interval.map(|i| Instant::now() + i);
    let mut seq = ctx.newest.0;
    loop {
        let serving = {
            let mut state = shared.state.lock();
            loop {
                if shared.stop.load(Ordering::Acquire) {
                    return;
                }
                if state.requested > state.finished || next_due.is_some_and(|d| Instant::now() >= d)
                {
                    break;
                }
                let wait = next_due.map_or(Duration::from_millis(100), |d| {
                    d.saturating_duration_since(Instant::now())
                        .min(Duration::from_millis(100))
                });
                shared.cv.wait_for(&mut state, wait);
            }
            state.requested
        };
        seq += 1;
        let outcome = take(&mut ctx, seq, &shared.stop);
        let mut state = shared.state.lock();
        match &outcome {
            Ok(r) => {
                state.totals.taken += 1;
                state.totals.rows += r.rows;
                state.totals.seconds += r.seconds;
                state.totals.image_seconds += r.image_seconds;
            }
            Err(e) => {
                state.totals.failed += 1;
                state.totals.last_error = Some(e.to_string());
            }
        }
        state.last = Some(outcome);
        state.finished = serving;
        shared.cv.notify_all();
        drop(state);
        next_due = ctx.interval.map(|i| Instant::now() + i);
    }
}

/// Takes checkpoint `seq` (the steps of the module's doc) and truncates.
fn take<M: TidMeta>(
    ctx: &mut Context<M>,
    seq: u64,
    stop: &AtomicBool,
) -> Result<CheckpointReport, DurabilityError> {
    let started = Instant::now();
    let segment = ctx.logging.segment() + 1;
    ctx.logging.rotate(segment);
    wait_until(ctx, stop, "the loggers to move to a new segment", |c| {
        c.logging.segment() >= segment
    })?;
    let start_epoch = ctx.epoch.current() + 1;
    wait_until(ctx, stop, "the transactions of older epochs to end", |c| {
        c.epoch.current() >= start_epoch && c.activity.oldest() >= start_epoch
    })?;
    let start = Start {
        generation: ctx.generation,
        segment,
        epoch: start_epoch,
    };
    let layouts_still = ctx.layout_gate.read();
    let (rows, image_seconds) =
        checkpoint::write(&ctx.dir, seq, &ctx.tables, ctx.threads, start, stop, || {
            // The image is written, in the groups recorded for it: tables may change theirs.
            drop(layouts_still);
            let end = ctx.epoch.current();
            wait_until(ctx, stop, "the image's epochs to be durable", |c| {
                c.logging.durable() >= end
            })
        })?;
    let previous = std::mem::replace(&mut ctx.newest, (seq, start));
    let removed = start::truncate(
        &ctx.dir,
        &[seq, previous.0],
        (previous.1.generation, previous.1.segment),
    )?;
    Ok(CheckpointReport {
        seq,
        rows,
        image_seconds,
        start_epoch,
        seconds: started.elapsed().as_secs_f64(),
        removed_files: removed,
    })
}

/// Waits (polling every millisecond) until `done`; an error if logging failed, the checkpointer
/// is stopping, or the wait limit passed outside a split phase's hold on the durable epoch (which
/// lasts while the workers are idle: the checkpoint goes on once they end the phase, or once
/// [`Checkpointer::checkpoint`] settles it).
fn wait_until<M: TidMeta>(
    ctx: &Context<M>,
    stop: &AtomicBool,
    what: &str,
    done: impl Fn(&Context<M>) -> bool,
) -> Result<(), DurabilityError> {
    let mut since = Instant::now();
    while !done(ctx) {
        if ctx.logging.split_phase_holds() {
            since = Instant::now();
        }
        if let Some(why) = ctx.logging.failure() {
            return Err(DurabilityError::Failed(why));
        }
        if stop.load(Ordering::Acquire) {
            return Err(DurabilityError::Checkpoint(
                "the checkpoint was interrupted by a shutdown".into(),
            ));
        }
        if since.elapsed() > ctx.wait_limit {
            return Err(DurabilityError::Checkpoint(format!(
                "a checkpoint waited more than {:?} for {what}",
                ctx.wait_limit
            )));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}
