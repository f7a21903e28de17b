use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Silo's global epoch: a counter a background thread advances every interval. Workers only read it
/// (to put it in their TIDs), so it costs no shared write per transaction.
pub struct EpochClock {
    shared: Arc<Shared>,
    ticker: Option<JoinHandle<()>>,
}

struct Shared {
    epoch: AtomicU64,
    stop: AtomicBool,
}

impl EpochClock {
    /// Starts the clock at epoch 1, advancing every `interval`.
    pub fn start(interval: Duration) -> EpochClock {
        let shared = Arc::new(Shared {
            epoch: AtomicU64::new(1),
            stop: AtomicBool::new(false),
        });
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
