use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use std::collections::VecDeque;

use phasedb_txn::{
    Config, Database, Footprint, Protocol, RECORDS_AHEAD, SLOTS_AHEAD, Stamp, Stats, TxError,
    TxResult, Worker,
};
use rand::rngs::SmallRng;

use crate::Workload;
use crate::durable_acks::{DurableAcks, DurableStats};

/// How to run a benchmark.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    pub threads: usize,
    pub warmup: Duration,
    pub duration: Duration,
    pub seed: u64,
    pub config: Config,
    /// Count a transaction only once it is durable (needs `config.durability`), and measure its
    /// commit-to-durable latency ([`BenchResult::durable`]).
    pub durable_results: bool,
    /// With `durable_results`: print the transactions acknowledged durable so far, per type, to
    /// stderr every 100 ms (`durable <seconds> <type>=<count> ...`), so a crash test knows what
    /// was reported durable before it killed the process.
    pub durable_progress: bool,
}

/// What a benchmark run measured.
#[derive(Clone, Debug)]
pub struct BenchResult {
    pub protocol: &'static str,
    /// Statistics over the measured window, per transaction type.
    pub stats: Stats,
    pub txn_types: Vec<&'static str>,
    /// Length of the measured window.
    pub measured: Duration,
    /// Seconds spent creating and loading the tables.
    pub load_seconds: f64,
    /// Approximate bytes held by the tables after the run.
    pub memory_bytes: usize,
    /// The workload's consistency check after the run.
    pub check: Result<(), String>,
    /// The recorded history (empty unless the configuration records).
    pub history: phasedb_txn::History,
    /// The protocol's own figures (Doppel: phases, split records, stashed transactions).
    pub protocol_report: Vec<(&'static str, String)>,
    /// CPU time the worker threads used in the measured window (all workers together). Committed
    /// transactions per CPU second compare protocols even when other processes take CPU time.
    pub worker_cpu: Duration,
    /// What starting durable operation recovered (with `config.durability`).
    pub recovery: Option<phasedb_txn::Recovery>,
    /// Bytes the loggers wrote during the measured window (with `config.durability`).
    pub log_bytes: Option<u64>,
    /// The checkpoints the background checkpointer took during the run (with `config.durability`).
    pub checkpoints: Option<phasedb_txn::CheckpointStats>,
    /// With [`BenchOptions::durable_results`]: transactions acknowledged durable and their
    /// commit-to-durable latency.
    pub durable: Option<DurableStats>,
    /// False when the run never started (durable operation refused, or the data directory holds
    /// another workload's database); `check` then says why.
    pub started: bool,
    /// Why logging failed, if it did (a full disk, a failed fsync): the run stopped at the first
    /// commit refused as not durable, and the workload's check was not run (it needs
    /// transactions, which are refused too).
    pub logging_failure: Option<String>,
}

impl BenchResult {
    /// Committed transactions per second over the measured window.
    /// With [`BenchOptions::durable_results`], only transactions acknowledged durable count.
    pub fn throughput(&self) -> f64 {
        let counted = match &self.durable {
            Some(d) => d.durable,
            None => self.stats.total().committed,
        };
        counted as f64 / self.measured.as_secs_f64()
    }

    /// A run that did not start: `why` in its check.
    fn not_started<W: Workload>(workload: &W, protocol: &'static str, why: String) -> BenchResult {
        BenchResult {
            protocol,
            stats: Stats::default(),
            txn_types: workload.txn_types(),
            measured: Duration::ZERO,
            load_seconds: 0.0,
            memory_bytes: 0,
            check: Err(why),
            history: Default::default(),
            protocol_report: Vec::new(),
            worker_cpu: Duration::ZERO,
            recovery: None,
            log_bytes: None,
            checkpoints: None,
            durable: None,
            started: false,
            logging_failure: None,
        }
    }
}

/// How often `durable_progress` prints.
const PRINT_EVERY: Duration = Duration::from_millis(100);

const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;

/// Runs `workload` on protocol `P`: loads it, runs `threads` closed-loop workers for the warm-up and
/// then the measured window, and checks the workload's consistency. `progress` is called every 20 ms
/// with the elapsed time and the number of transactions run so far (committed or stashed).
pub fn run_bench<P: Protocol, W: Workload>(
    workload: &mut W,
    opts: &BenchOptions,
    mut progress: impl FnMut(Duration, u64),
) -> BenchResult {
    let load_start = Instant::now();
    let mut db = Database::<P>::open(opts.config.clone());
    workload.setup(&mut db);
    let mut recovery = None;
    if opts.config.durability.is_some() {
        match db.start_durability() {
            Ok(r) => {
                if !r.fresh
                    && let Err(e) = workload.recovered(&db)
                {
                    return BenchResult::not_started(workload, P::NAME, e);
                }
                if opts.durable_progress {
                    let tables: Vec<String> = r
                        .table_records
                        .iter()
                        .map(|(name, n)| format!("{name}={n}"))
                        .collect();
                    eprintln!("recovered epoch {} {}", r.durable_epoch, tables.join(" "));
                }
                recovery = Some(r);
            }
            Err(e) => return BenchResult::not_started(workload, P::NAME, e.to_string()),
        }
    } else if opts.durable_results {
        return BenchResult::not_started(
            workload,
            P::NAME,
            "durable results need a data directory".into(),
        );
    }
    let load_seconds = load_start.elapsed().as_secs_f64();
    let workload = &*workload;
    let phase = AtomicU8::new(WARMUP);
    let counters: Vec<CachePadded<AtomicU64>> = (0..opts.threads)
        .map(|_| CachePadded::new(AtomicU64::new(0)))
        .collect();
    let ready = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    // Set by the first worker whose commit is refused as not durable: the run stops.
    let logging_failure = std::sync::OnceLock::new();
    let mut measured = Duration::ZERO;
    let mut log_bytes = None;
    let mut merged = Stats::default();
    let mut worker_cpu = Duration::ZERO;
    let types = workload.txn_types();
    let mut durable = opts
        .durable_results
        .then(|| DurableAcks::new(opts.config.epoch_interval, types.len()).into_stats());
    // Per worker and type, transactions acknowledged durable so far.
    let acked: Vec<Vec<CachePadded<AtomicU64>>> = (0..opts.threads)
        .map(|_| (0..types.len()).map(|_| Default::default()).collect())
        .collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..opts.threads)
            .map(|i| {
                let (db, phase, counters, ready, failed, logging_failure) =
                    (&db, &phase, &counters, &ready, &failed, &logging_failure);
                let (acked, types) = (&acked[i], types.len());
                s.spawn(move || {
                    let mut worker = db.worker();
                    counters[i].store(0, Ordering::Relaxed);
                    let mut th = workload.thread(i, opts.seed);
                    let mut stash = Stash::new::<P>(&mut worker);
                    let mut acks = opts
                        .durable_results
                        .then(|| DurableAcks::new(opts.config.epoch_interval, types));
                    ready.fetch_add(1, Ordering::AcqRel);
                    let mut measuring = false;
                    let mut cpu_start = Duration::ZERO;
                    let mut done = 0u64;
                    loop {
                        let p = phase.load(Ordering::Relaxed);
                        if p == STOP {
                            break;
                        }
                        if p == MEASURE && !measuring {
                            measuring = true;
                            worker.stats_mut().reset();
                            if let Some(a) = &mut acks {
                                a.reset();
                            }
                            cpu_start = thread_cpu_time();
                        }
                        match stash.run_one(workload, &mut th, &mut worker) {
                            Ok(()) => {
                                if let Some(a) = &mut acks {
                                    a.committed(db, &worker);
                                }
                            }
                            Err(TxError::NotDurable(why)) => {
                                // Logging stopped: every later commit is refused too, so this
                                // worker stops, and the run with it.
                                if logging_failure.set(why.clone()).is_ok() {
                                    eprintln!("worker {i}: commit refused, not durable: {why}");
                                }
                                break;
                            }
                            Err(e) => {
                                if !matches!(e, phasedb_txn::TxError::UserAbort)
                                    && !failed.swap(true, Ordering::Relaxed)
                                {
                                    eprintln!("worker {i}: transaction failed: {e}");
                                }
                            }
                        }
                        if let Some(a) = &mut acks {
                            a.poll(db, measuring, acked);
                        }
                        done += 1;
                        counters[i].store(done, Ordering::Relaxed);
                    }
                    let cpu = if measuring {
                        thread_cpu_time().saturating_sub(cpu_start)
                    } else {
                        Duration::ZERO
                    };
                    workload.finish(th);
                    (
                        worker.stats().clone(),
                        cpu,
                        acks.map(DurableAcks::into_stats),
                    )
                })
            })
            .collect();
        while ready.load(Ordering::Acquire) < opts.threads as u64 {
            std::thread::yield_now();
        }
        let start = Instant::now();
        let sum = || {
            counters
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .sum::<u64>()
        };
        let tick = Duration::from_millis(20);
        let mut last_print = Instant::now();
        let mut print_durable = |force: bool| {
            if !(opts.durable_progress && (force || last_print.elapsed() >= PRINT_EVERY)) {
                return;
            }
            last_print = Instant::now();
            let counts: Vec<String> = types
                .iter()
                .enumerate()
                .map(|(t, name)| {
                    let n: u64 = acked.iter().map(|w| w[t].load(Ordering::Relaxed)).sum();
                    format!("{name}={n}")
                })
                .collect();
            eprintln!(
                "durable {:.3} {}",
                start.elapsed().as_secs_f64(),
                counts.join(" ")
            );
        };
        let stopped = || logging_failure.get().is_some();
        while start.elapsed() < opts.warmup && !stopped() {
            std::thread::sleep(tick.min(opts.warmup.saturating_sub(start.elapsed())));
            progress(start.elapsed(), sum());
            print_durable(false);
        }
        let measure_start = Instant::now();
        let bytes_start = db.log_bytes();
        phase.store(MEASURE, Ordering::Relaxed);
        while measure_start.elapsed() < opts.duration && !stopped() {
            std::thread::sleep(tick.min(opts.duration.saturating_sub(measure_start.elapsed())));
            progress(start.elapsed(), sum());
            print_durable(false);
        }
        phase.store(STOP, Ordering::Relaxed);
        measured = measure_start.elapsed();
        log_bytes = db.log_bytes().zip(bytes_start).map(|(b, a)| b - a);
        for h in handles {
            let (stats, cpu, acks) = h.join().expect("benchmark worker panicked");
            merged.merge(&stats);
            worker_cpu += cpu;
            if let (Some(d), Some(a)) = (&mut durable, &acks) {
                d.merge(a);
            }
        }
        print_durable(true);
    });
    let checkpoints = db.checkpoint_stats();
    db.settle();
    let protocol_report = db.protocol_report();
    let logging_failure = logging_failure.into_inner();
    let mut check = match &logging_failure {
        None => workload.check(&db),
        Some(_) => Err("not run: logging failed, so transactions are refused".into()),
    };
    if failed.load(Ordering::Relaxed) && check.is_ok() {
        check = Err("some transactions failed with an error (see above)".into());
    }
    BenchResult {
        protocol: P::NAME,
        stats: merged,
        txn_types: workload.txn_types(),
        measured,
        load_seconds,
        memory_bytes: db.memory_bytes(),
        check,
        history: db.take_history(),
        protocol_report,
        worker_cpu,
        recovery,
        log_bytes,
        checkpoints,
        durable,
        started: true,
        logging_failure,
    }
}

/// CPU time the calling thread has used.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write to; the clock id is a constant the OS knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Transactions a phased protocol stashed, kept as copies of the generator taken before each was
/// generated (with the time it first started and its footprint), and rerun first once the protocol
/// allows, each prefetching the rows of those queued behind it.
struct Stash {
    phased: bool,
    pending: VecDeque<(SmallRng, Stamp, Footprint)>,
}

impl Stash {
    fn new<P: Protocol>(worker: &mut Worker<'_, P>) -> Stash {
        worker.set_stash_mode(P::PHASED);
        Stash {
            phased: P::PHASED,
            pending: VecDeque::with_capacity(if P::PHASED { 1024 } else { 0 }),
        }
    }

    /// Runs a stashed transaction if one may run now, else a new one.
    #[inline]
    fn run_one<P: Protocol, W: Workload>(
        &mut self,
        workload: &W,
        th: &mut W::Thread,
        worker: &mut Worker<'_, P>,
    ) -> TxResult<()> {
        if !self.phased {
            return workload.run_one(th, worker);
        }
        if !self.pending.is_empty() && worker.may_resume_stashed() {
            return self.resume(workload, th, worker);
        }
        // The generator as it is before this transaction: replaying it regenerates the transaction.
        let replay = workload.rng(th).clone();
        match workload.run_one(th, worker) {
            Err(TxError::Stashed) => {
                let now = worker.stamp();
                self.hold(replay, now, worker);
                Ok(())
            }
            other => other,
        }
    }

    /// Reruns the oldest stashed transaction from its copy of the generator (the thread's own is
    /// put back after), its latency counted from when it first started; its attempt starts by
    /// prefetching rows of the reruns queued behind it.
    #[inline(never)]
    fn resume<P: Protocol, W: Workload>(
        &mut self,
        workload: &W,
        th: &mut W::Thread,
        worker: &mut Worker<'_, P>,
    ) -> TxResult<()> {
        let (replay, started, _) = self.pending.pop_front().expect("a stashed transaction");
        // The queue now starts with the next rerun.
        worker.prefetch_ahead(
            self.pending.get(RECORDS_AHEAD - 1).map(|p| &p.2),
            self.pending.get(SLOTS_AHEAD - 1).map(|p| &p.2),
        );
        worker.set_origin(Some(started));
        let own = std::mem::replace(workload.rng(th), replay.clone());
        let outcome = workload.run_one(th, worker);
        worker.set_origin(None);
        *workload.rng(th) = own;
        match outcome {
            Err(TxError::Stashed) => {
                self.hold(replay, started, worker);
                Ok(())
            }
            other => {
                worker.set_stash_pending(!self.pending.is_empty());
                other
            }
        }
    }

    /// Keeps a stashed transaction to rerun, and tells the worker it holds one.
    #[cold]
    fn hold<P: Protocol>(&mut self, replay: SmallRng, started: Stamp, worker: &mut Worker<'_, P>) {
        self.pending
            .push_back((replay, started, worker.stashed_footprint()));
        worker.set_stash_pending(true);
    }
}
