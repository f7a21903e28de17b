//! The hot-path rule for TPC-C: in steady state the workload's own code — generating a transaction's
//! input and running its procedure body, `Tx` calls included — allocates nothing. The engine's commit
//! takes inserted records from the tables' arenas, not the allocator, but still allocates
//! ordered-index nodes and epoch garbage bags (about 0.3 per inserted row), so the whole transaction
//! is bounded rather than zero; see the report printed with `--nocapture`.
//!
//! `PHASEDB_ALLOC_TRACE=1` prints a backtrace of the first few allocations counted inside the
//! workload's code. `PHASEDB_SEED=<seed>` changes the seed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use phasedb_txn::{Config, Database, Occ, Protocol};
use phasedb_workloads::Workload;
use phasedb_workloads::tpcc::{DELIVERY, ORDER_STATUS, STOCK_LEVEL, Tpcc, TpccConfig};

struct Counting;

thread_local! {
    /// Whether this thread counts its allocations now.
    static ARMED: Cell<bool> = const { Cell::new(false) };
    /// Whether the thread is inside the workload's own code (set by the TPC-C probe).
    static IN_WORKLOAD: Cell<bool> = const { Cell::new(false) };
    /// Allocations counted on this thread.
    static ALL: Cell<u64> = const { Cell::new(0) };
    /// Of those, the ones made inside the workload's own code.
    static WORKLOAD: Cell<u64> = const { Cell::new(0) };
}

static TRACE: AtomicBool = AtomicBool::new(false);
static TRACES_LEFT: AtomicU32 = AtomicU32::new(5);

fn note(size: usize) {
    // `try_with`: allocations can happen while the thread's locals are being torn down.
    let _ = ARMED.try_with(|armed| {
        if !armed.get() {
            return;
        }
        ALL.with(|c| c.set(c.get() + 1));
        if !IN_WORKLOAD.with(Cell::get) {
            return;
        }
        WORKLOAD.with(|c| c.set(c.get() + 1));
        if TRACE.load(Ordering::Relaxed) && TRACES_LEFT.fetch_sub(1, Ordering::Relaxed) > 0 {
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

/// The TPC-C probe: marks the workload's own code.
fn probe(inside: bool) {
    IN_WORKLOAD.with(|c| c.set(inside));
}

const WARMUP: usize = 20_000;
const MEASURED: usize = 20_000;

fn seed() -> u64 {
    match std::env::var("PHASEDB_SEED") {
        Ok(s) => s.parse().expect("PHASEDB_SEED is a number"),
        Err(_) => 0x7cc0,
    }
}

/// Runs the standard mix on one worker: `WARMUP` transactions, then `MEASURED` counted ones.
fn standard_mix<P: Protocol>(fine: bool) {
    let seed = seed();
    let name = format!(
        "tpcc standard mix on {}, fine = {fine}, seed {seed}",
        P::NAME
    );
    let mut tpcc = Tpcc::new(TpccConfig {
        fine,
        ..TpccConfig::default()
    });
    let mut db = Database::<P>::open(Config::default());
    tpcc.setup(&mut db);
    let t = *tpcc.tables();
    let mut worker = db.worker();
    let mut th = tpcc.thread(0, seed);
    th.set_probe(probe);
    let mut run = |n: usize| {
        for _ in 0..n {
            if let Err(e) = tpcc.run_one(&mut th, &mut worker) {
                panic!("{name}: transaction failed: {e}");
            }
        }
    };
    run(WARMUP);
    let len = |t| db.table(t).len() as u64;
    let before = [len(t.order), len(t.order_line), len(t.history)];
    TRACE.store(
        std::env::var_os("PHASEDB_ALLOC_TRACE").is_some(),
        Ordering::Relaxed,
    );
    ALL.with(|c| c.set(0));
    WORKLOAD.with(|c| c.set(0));
    ARMED.with(|a| a.set(true));
    run(MEASURED);
    ARMED.with(|a| a.set(false));
    let (all, workload) = (ALL.with(Cell::get), WORKLOAD.with(Cell::get));
    let orders = len(t.order) - before[0];
    // Each committed NewOrder inserts an order, a new-order row, a by-customer index entry and its
    // lines; each Payment a history row.
    let inserted = 3 * orders + (len(t.order_line) - before[1]) + (len(t.history) - before[2]);
    let stats = worker.stats().clone();
    drop(worker);
    eprintln!(
        "{name}: {workload} allocations in the workload's code, {all} in all for {inserted} \
         rows inserted ({:.2} per row) in {MEASURED} transactions",
        all as f64 / inserted as f64
    );
    for ty in [ORDER_STATUS, DELIVERY, STOCK_LEVEL] {
        assert!(stats.types[ty].committed > 0, "{name}: type {ty} never ran");
    }
    assert_eq!(
        stats.total().conflicts,
        0,
        "{name}: a lone worker conflicted"
    );
    assert_eq!(tpcc.check(&db), Ok(()), "{name}");
    assert_eq!(workload, 0, "{name}: the workload's own code allocated");
    assert!(orders > 0, "{name}: no order was entered");
    assert!(
        all <= inserted + inserted / 2,
        "{name}: {all} allocations for {inserted} inserted rows"
    );
}

#[test]
fn standard_mix_allocates_nothing_but_inserted_rows_occ() {
    standard_mix::<Occ>(false);
}

#[test]
fn standard_mix_fine_allocates_nothing_but_inserted_rows_occ() {
    standard_mix::<Occ>(true);
}

/// The counter works: an allocation inside the probe counts as the workload's, one outside does not.
#[test]
fn the_probe_separates_the_workload_from_the_engine() {
    ALL.with(|c| c.set(0));
    WORKLOAD.with(|c| c.set(0));
    ARMED.with(|a| a.set(true));
    drop(std::hint::black_box(Vec::<u64>::with_capacity(4)));
    probe(true);
    drop(std::hint::black_box(Vec::<u64>::with_capacity(4)));
    probe(false);
    ARMED.with(|a| a.set(false));
    assert_eq!((ALL.with(Cell::get), WORKLOAD.with(Cell::get)), (2, 1));
}
