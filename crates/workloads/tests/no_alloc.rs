//! The hot-path rule of the design: a worker in steady state allocates nothing per transaction.
//!
//! A counting global allocator counts the allocations (and reallocations) of the current thread only,
//! and only while the thread has armed it, so the test harness's other threads and the database's
//! epoch thread do not interfere. Each test sets up a workload, warms a worker up, then counts the
//! allocations of the next transactions on that thread.
//!
//! `PHASEDB_ALLOC_TRACE=1` prints a backtrace for the first few counted allocations, to find where
//! they come from. `PHASEDB_SEED=<seed>` changes the workload's seed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use phasedb_txn::{Config, Database, NoCc, Occ, Protocol, Stats};
use phasedb_workloads::Workload;
use phasedb_workloads::bank::{Bank, BankConfig};
use phasedb_workloads::ycsb::{Variant, Ycsb, YcsbConfig};

struct Counting;

thread_local! {
    /// Whether this thread counts its allocations now.
    static ARMED: Cell<bool> = const { Cell::new(false) };
    /// Allocations and reallocations counted on this thread.
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

/// Print a backtrace of counted allocations (set from `PHASEDB_ALLOC_TRACE` before arming).
static TRACE: AtomicBool = AtomicBool::new(false);
/// Backtraces still to print, over all tests.
static TRACES_LEFT: AtomicU32 = AtomicU32::new(5);

fn note(size: usize) {
    // `try_with`: allocations can happen while the thread's locals are being torn down.
    let _ = ARMED.try_with(|armed| {
        if !armed.get() {
            return;
        }
        COUNT.with(|c| c.set(c.get() + 1));
        if TRACE.load(Ordering::Relaxed) && TRACES_LEFT.fetch_sub(1, Ordering::Relaxed) > 0 {
            // Disarmed while capturing and printing, which allocate themselves.
            armed.set(false);
            let bt = std::backtrace::Backtrace::force_capture();
            eprintln!("counted allocation of {size} bytes at:\n{bt}");
            armed.set(true);
        }
    });
}

// SAFETY: every call is forwarded unchanged to the system allocator; counting touches only
// const-initialised thread locals without destructors, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` with this thread's allocations counted; returns the count.
fn count_allocations(f: impl FnOnce()) -> u64 {
    TRACE.store(
        std::env::var_os("PHASEDB_ALLOC_TRACE").is_some(),
        Ordering::Relaxed,
    );
    COUNT.with(|c| c.set(0));
    ARMED.with(|a| a.set(true));
    f();
    ARMED.with(|a| a.set(false));
    COUNT.with(|c| c.get())
}

/// The bank's audit transaction type.
const AUDIT: usize = 1;
const WARMUP: usize = 20_000;
const MEASURED: usize = 20_000;

mod common;

fn seed() -> u64 {
    common::seed_or(0xa110c)
}

/// Sets `workload` up on protocol `P`, runs `WARMUP` transactions on one worker, then returns the
/// allocations of the next `MEASURED` ones, after checking they all ran and committed or aborted by
/// the procedure's choice, and that the workload's own check still passes.
fn steady_state_allocations<P: Protocol, W: Workload>(mut workload: W) -> (u64, Stats) {
    let seed = seed();
    let name = format!("{} on {}, seed {seed}", workload.name(), P::NAME);
    let mut db = Database::<P>::open(Config::default());
    workload.setup(&mut db);
    let mut worker = db.worker();
    let mut th = workload.thread(0, seed);
    let mut run = |n: usize| {
        for _ in 0..n {
            if let Err(e) = workload.run_one(&mut th, &mut worker) {
                panic!("{name}: transaction failed: {e}");
            }
        }
    };
    run(WARMUP);
    let allocations = count_allocations(|| run(MEASURED));
    let stats = worker.stats().clone();
    let total = stats.total();
    assert_eq!(
        total.committed + total.user_aborts,
        (WARMUP + MEASURED) as u64,
        "{name}: every transaction ran to an end"
    );
    assert!(total.committed > 0, "{name}: nothing committed");
    assert_eq!(total.conflicts, 0, "{name}: a lone worker met a conflict");
    drop(worker);
    assert_eq!(workload.check(&db), Ok(()), "{name}");
    eprintln!("{name}: {allocations} allocations in {MEASURED} transactions");
    (allocations, stats)
}

fn ycsb_star() -> Ycsb {
    Ycsb::new(YcsbConfig {
        rows: 10_000,
        ..YcsbConfig::defaults(Variant::Star)
    })
}

fn ycsb_granularity_fine() -> Ycsb {
    Ycsb::new(YcsbConfig {
        rows: 10_000,
        fine: true,
        ..YcsbConfig::defaults(Variant::Granularity)
    })
}

fn bank(audit_ratio: f64) -> Bank {
    Bank::new(BankConfig {
        accounts: 1000,
        audit_ratio,
        ..BankConfig::default()
    })
}

#[test]
fn ycsb_star_allocates_nothing_occ() {
    assert_eq!(steady_state_allocations::<Occ, _>(ycsb_star()).0, 0);
}

#[test]
fn ycsb_star_allocates_nothing_nocc() {
    assert_eq!(steady_state_allocations::<NoCc, _>(ycsb_star()).0, 0);
}

#[test]
fn ycsb_granularity_fine_allocates_nothing_occ() {
    assert_eq!(
        steady_state_allocations::<Occ, _>(ycsb_granularity_fine()).0,
        0
    );
}

#[test]
fn ycsb_granularity_fine_allocates_nothing_nocc() {
    assert_eq!(
        steady_state_allocations::<NoCc, _>(ycsb_granularity_fine()).0,
        0
    );
}

#[test]
fn bank_transfers_allocate_nothing_occ() {
    assert_eq!(steady_state_allocations::<Occ, _>(bank(0.0)).0, 0);
}

#[test]
fn bank_transfers_allocate_nothing_nocc() {
    assert_eq!(steady_state_allocations::<NoCc, _>(bank(0.0)).0, 0);
}

/// Transfers and audits; audits scan all 1000 accounts through the ordered index.
fn bank_with_audits<P: Protocol>() {
    let (allocations, stats) = steady_state_allocations::<P, _>(bank(0.05));
    assert!(
        stats.types.len() == 2 && stats.types[AUDIT].committed > 0,
        "{}: no audit ran",
        P::NAME
    );
    assert_eq!(allocations, 0, "{}", P::NAME);
}

#[test]
fn bank_with_audits_allocates_nothing_occ() {
    bank_with_audits::<Occ>();
}

#[test]
fn bank_with_audits_allocates_nothing_nocc() {
    bank_with_audits::<NoCc>();
}

/// INCR1 on its hot key: the one-pass read-modify-write of a splittable operation under locking
/// and under OCC allocates nothing.
#[test]
fn hot_increments_allocate_nothing_2pl_and_occ() {
    use phasedb_txn::TwoPlBlocking;
    use phasedb_workloads::incr::{Incr, IncrConfig, KeyChoice};
    let incr1 = || {
        Incr::new(IncrConfig {
            keys: 1000,
            choice: KeyChoice::Hot(1.0),
        })
    };
    assert_eq!(
        steady_state_allocations::<TwoPlBlocking, _>(incr1()).0,
        0,
        "2pl"
    );
    assert_eq!(steady_state_allocations::<Occ, _>(incr1()).0, 0, "occ");
}

/// STAR's hot path: a partition's only worker commits without locks and appends operation records;
/// a single-master worker commits with Silo and appends value records (reading each written group
/// back). Once the buffers have grown, neither allocates per transaction.
#[test]
fn star_commits_and_their_replication_records_allocate_nothing() {
    use phasedb_txn::{ReplicationMode, Star, StarMode};
    for (mode, records) in [
        (StarMode::Partitioned, ReplicationMode::Operation),
        (StarMode::SingleMaster, ReplicationMode::Value),
    ] {
        let mut workload = ycsb_star();
        let mut db = Database::<Star>::open(Config::default());
        workload.setup(&mut db);
        db.set_star_mode(mode);
        let mut worker = db.worker();
        let mut th = workload.thread(0, seed());
        let mut bufs: Vec<Vec<u8>> = (0..2).map(|_| Vec::with_capacity(1 << 20)).collect();
        let mut shipped = 0;
        let mut run = |n: usize| {
            for _ in 0..n {
                workload
                    .run_one(&mut th, &mut worker)
                    .expect("YCSB commits");
                shipped +=
                    worker.write_replication(records, &mut bufs, |_, key| Some(key as usize % 2));
                if bufs.iter().any(|b| b.len() > 1 << 16) {
                    bufs.iter_mut().for_each(Vec::clear);
                }
            }
        };
        run(WARMUP);
        let allocations = count_allocations(|| run(MEASURED));
        assert!(shipped > 0, "{mode:?}: no record written");
        assert_eq!(allocations, 0, "{mode:?} with {records:?} records");
    }
}

/// Doppel in split phases: increments of a split record go to the worker's per-core slice without
/// allocating. Phase changes (run by this worker, the only one, as coordinator) may allocate a few
/// buffers each, so the bound is per phase change, not zero.
#[test]
fn doppel_split_increments_allocate_nothing_per_transaction() {
    use phasedb_txn::{Doppel, OpKind};
    use phasedb_workloads::incr::{Incr, IncrConfig, KeyChoice};
    let mut workload = Incr::new(IncrConfig {
        keys: 1000,
        choice: KeyChoice::Hot(1.0),
    });
    let mut db = Database::<Doppel>::open(Config {
        phase_length: std::time::Duration::from_millis(5),
        ..Config::default()
    });
    workload.setup(&mut db);
    db.split(0, 0, 0, OpKind::Add);
    let mut worker = db.worker();
    let mut th = workload.thread(0, seed());
    let mut run = |n: usize| {
        for _ in 0..n {
            workload
                .run_one(&mut th, &mut worker)
                .expect("increments commit");
        }
    };
    run(WARMUP);
    let before = db.phase_stats();
    let allocations = count_allocations(|| run(MEASURED * 10));
    let after = db.phase_stats();
    let changes = 2 * (after.split_phases - before.split_phases) + 2;
    eprintln!(
        "doppel: {allocations} allocations in {} transactions, {changes} phase changes",
        MEASURED * 10
    );
    assert!(after.slice_ops > 0 || after.split_phases > 0, "{after:?}");
    assert!(
        allocations <= 16 * changes,
        "{allocations} allocations for {changes} phase changes"
    );
    drop(worker);
    assert_eq!(workload.check(&db), Ok(()));
    assert!(db.phase_stats().slice_ops > 0, "nothing went to a slice");
}

/// The counter itself works: it sees an allocation made while armed, and none made on other threads.
#[test]
fn the_counter_counts_this_thread_only() {
    let n = count_allocations(|| {
        let v: Vec<u64> = std::hint::black_box(Vec::with_capacity(8));
        drop(v);
    });
    assert_eq!(n, 1);
    // Another thread allocates while this one counts: not counted here.
    let (go, done) = (Barrier::new(2), Barrier::new(2));
    std::thread::scope(|s| {
        s.spawn(|| {
            go.wait();
            drop(std::hint::black_box(vec![1u8; 64]));
            done.wait();
        });
        let n = count_allocations(|| {
            go.wait();
            done.wait();
        });
        assert_eq!(n, 0);
    });
}
