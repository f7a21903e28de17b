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

    /// Raises the epoch to `epoch`; a value at or below the current epoch changes nothing, so the
    /// epoch never goes back.
    pub fn set(&self, epoch: u64) {
        self.shared.epoch.fetch_max(epoch, Ordering::AcqRel);
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
