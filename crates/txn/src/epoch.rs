use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Silo's global epoch: a counter a background thread advances every interval. Workers only read it
/// (to put it in their TIDs), so it costs no shared write per transaction. With a zero interval no
/// thread runs and the epoch moves only through [`EpochClock::set`] (STAR: one epoch per phase).
pub struct EpochClock {
    shared: Arc<Shared>,
    ticker: Option<JoinHandle<()>>,
}

struct Shared {
    epoch: AtomicU64,
    stop: AtomicBool,
}

impl EpochClock {
    /// Starts the clock at epoch 1, advancing every `interval` (never by itself if it is zero).
    pub fn start(interval: Duration) -> EpochClock {
        let shared = Arc::new(Shared {
            epoch: AtomicU64::new(1),
            stop: AtomicBool::new(false),
        });
        if interval.is_zero() {
            return EpochClock {
                shared,
                ticker: None,
            };
        }
        let s = shared.clone();
        let ticker = std::thread::Builder::new()
            .name("phasedb-epoch".into())
            .spawn(move || {
                while !s.stop.load(Ordering::Relaxed) {
                    std::thread::park_timeout(interval);
                    s.epoch.fetch_add(1, Ordering::Release);
                }
            })
            .expect("spawn the epoch thread");
        EpochClock {
            shared,
            ticker: Some(ticker),
        }
    }

    /// The current epoch.
    #[inline]
    pub fn current(&self) -> u64 {
        self.shared.epoch.load(Ordering::Acquire)
    }

    /// A handle that reads the epoch from another thread (a logger), outliving no borrow.
    pub(crate) fn reader(&self) -> EpochReader {
        EpochReader(self.shared.clone())
    }

    /// Raises the epoch to `epoch`; a value at or below the current epoch changes nothing, so the
    /// epoch never goes back.
    pub fn set(&self, epoch: u64) {
        self.shared.epoch.fetch_max(epoch, Ordering::AcqRel);
    }
}

/// Reads the global epoch of an [`EpochClock`] from a thread that does not borrow the database.
#[derive(Clone)]
pub(crate) struct EpochReader(Arc<Shared>);

impl EpochReader {
    /// The current epoch.
    pub(crate) fn current(&self) -> u64 {
        self.0.epoch.load(Ordering::SeqCst)
    }

    /// Raises the epoch to `epoch` (never lowers it).
    pub(crate) fn set(&self, epoch: u64) {
        self.0.epoch.fetch_max(epoch, Ordering::AcqRel);
    }
}

impl Drop for EpochClock {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}
