//! 2PL's park/unpark protocol (`src/twopl/park.rs`) under shuttle's schedulers, with the parking lot
//! modelled by a mutex and a condition variable and no deadline: a lost wake-up leaves a waiter
//! asleep for good, which shuttle reports as a deadlock.

/// The model of the engine's `twopl::sync`: shuttle's atomics and a parking lot on one condition
/// variable (keys are ignored: every sleeper wakes at every unpark, which only adds spurious
/// wake-ups).
mod sync {
    use std::time::Instant;

    pub use shuttle::sync::atomic::{AtomicU32, AtomicU64, Ordering};
    use shuttle::sync::{Condvar, Mutex};

    shuttle::lazy_static! {
        static ref LOT: (Mutex<u64>, Condvar) = (Mutex::new(0), Condvar::new());
    }

    pub fn park_until(_key: usize, validate: impl FnOnce() -> bool, _deadline: Instant) {
        let (wakes, cv) = &*LOT;
        let seen = wakes.lock().unwrap();
        if !validate() {
            return;
        }
        let at = *seen;
        drop(cv.wait_while(seen, |n| *n == at).unwrap());
    }

    pub fn unpark_all(_key: usize) {
        let (wakes, cv) = &*LOT;
        *wakes.lock().unwrap() += 1;
        cv.notify_all();
    }
}

#[path = "../src/twopl/park.rs"]
mod park;

use std::sync::Arc;
use std::time::{Duration, Instant};

use park::{after_release, holders, park, released_exclusive};
use sync::{AtomicU32, AtomicU64, Ordering};

const LOCK: u64 = 1 << 63;

struct Group {
    word: AtomicU64,
    readers: AtomicU32,
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

/// Takes the exclusive lock, parking while it is held, then bumps the version and releases it.
fn lock_and_release(g: &Group) {
    loop {
        let w = g.word.load(Ordering::Acquire);
        if w & LOCK == 0
            && g.word
                .compare_exchange(w, w | LOCK, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            g.word.store(w + 1, Ordering::Release);
            released_exclusive(&g.readers);
            return;
        }
        park(&g.word, &g.readers, |w, _| w & LOCK != 0, far());
    }
}

/// A held exclusive lock, two waiters that each take and release it after the holder: every one
/// gets through, so the version ends at 2.
fn exclusive_hand_off() {
    let g = Arc::new(Group {
        word: AtomicU64::new(LOCK),
        readers: AtomicU32::new(0),
    });
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let g = g.clone();
            shuttle::thread::spawn(move || lock_and_release(&g))
        })
        .collect();
    g.word.store(0, Ordering::Release);
    released_exclusive(&g.readers);
    for w in waiters {
        w.join().unwrap();
    }
    assert_eq!(g.word.load(Ordering::Acquire), 2);
}

/// A writer holding the lock bit waits for two shared holders to leave; each leaves with the
/// decrement that also reports a parked waiter.
fn readers_drain() {
    let g = Arc::new(Group {
        word: AtomicU64::new(LOCK),
        readers: AtomicU32::new(2),
    });
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let g = g.clone();
            shuttle::thread::spawn(move || {
                let prev = g.readers.fetch_sub(1, Ordering::AcqRel);
                after_release(&g.readers, prev);
            })
        })
        .collect();
    while holders(g.readers.load(Ordering::Acquire)) != 0 {
        park(&g.word, &g.readers, |_, n| n != 0, far());
    }
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(holders(g.readers.load(Ordering::Acquire)), 0);
}

#[test]
fn exclusive_release_wakes_every_parked_waiter() {
    shuttle::check_random(exclusive_hand_off, 10000);
    shuttle::check_pct(exclusive_hand_off, 10000, 3);
}

#[test]
fn last_shared_release_wakes_the_parked_writer() {
    shuttle::check_random(readers_drain, 10000);
    shuttle::check_pct(readers_drain, 10000, 3);
}
