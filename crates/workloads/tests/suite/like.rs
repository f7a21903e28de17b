//! LIKE under Doppel through the benchmark driver: reads of split pages are stashed and rerun, none
//! is lost, and a rerun read's latency counts from when it first started while every other
//! transaction's counts from its own start.

use std::any::Any;
use std::time::Duration;

use phasedb_txn::{Config, Database, Doppel, Occ, OpKind, Protocol, TxResult, Worker};
use phasedb_workloads::like::{Like, LikeConfig};
use phasedb_workloads::{BenchOptions, BenchResult, Workload, run_bench};
use rand::rngs::SmallRng;

const READ: usize = 0;
/// The popular page the test labels as split (rank 0 of the zipfian choice).
const HOT_PAGE: u64 = 0;

/// LIKE with the most popular page's count labelled split under Doppel, so that its reads are
/// stashed whether or not the scheduler lets the two workers conflict.
struct Labelled(Like);

impl Workload for Labelled {
    type Thread = <Like as Workload>::Thread;

    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn txn_types(&self) -> Vec<&'static str> {
        self.0.txn_types()
    }

    fn setup<P: Protocol>(&mut self, db: &mut Database<P>) {
        self.0.setup(db);
        let pages = db.table_id("pages").expect("LIKE has a pages table");
        if let Some(doppel) = (db as &mut dyn Any).downcast_mut::<Database<Doppel>>() {
            doppel.split(pages, HOT_PAGE, 0, OpKind::Add);
        }
    }

    fn thread(&self, index: usize, seed: u64) -> Self::Thread {
        self.0.thread(index, seed)
    }

    fn rng<'a>(&self, thread: &'a mut Self::Thread) -> &'a mut SmallRng {
        self.0.rng(thread)
    }

    fn run_one<P: Protocol>(&self, th: &mut Self::Thread, w: &mut Worker<'_, P>) -> TxResult<()> {
        self.0.run_one(th, w)
    }

    fn check<P: Protocol>(&self, db: &Database<P>) -> Result<(), String> {
        self.0.check(db)
    }

    fn settings(&self) -> Vec<(&'static str, String)> {
        self.0.settings()
    }
}

fn run<P: Protocol>() -> BenchResult {
    let mut w = Labelled(Like::new(LikeConfig {
        users: 10_000,
        pages: 1000,
        alpha: 1.4,
        write_ratio: 0.5,
    }));
    let opts = BenchOptions {
        threads: 2,
        warmup: Duration::from_millis(100),
        duration: Duration::from_millis(400),
        seed: 5,
        durable_results: false,
        durable_progress: false,
        config: Config {
            phase_length: Duration::from_millis(10),
            ..Config::default()
        },
    };
    run_bench::<P, _>(&mut w, &opts, |_, _| {})
}

#[test]
fn stashed_reads_all_run_and_count_their_wait_for_the_joined_phase() {
    let r = run::<Doppel>();
    assert_eq!(r.check, Ok(()), "{:?}", r.protocol_report);
    let reads = &r.stats.types[READ];
    // About a third of the reads are of the labelled page; split phases take most of the time.
    let stashed_share = (reads.stashed as f64 / reads.committed as f64).min(1.0);
    assert!(
        (0.05..0.9).contains(&stashed_share),
        "{stashed_share:.2} of the reads stashed; {:?}",
        r.protocol_report
    );
    // A stashed read waits for the end of its split phase (10 ms); the others wait for nothing, so
    // the fastest half of the reads that were never stashed take well under a millisecond.
    let low = (1.0 - stashed_share) / 2.0;
    let (fast, p99) = (
        reads.latency_ns.value_at_quantile(low),
        reads.latency_ns.value_at_quantile(0.99),
    );
    assert!(
        p99 >= 1_000_000,
        "read p99 {p99} ns: stashed reads' waits are not counted"
    );
    assert!(
        fast < 1_000_000,
        "read latency at quantile {low:.2} is {fast} ns: reads never stashed count a wait"
    );
}

#[test]
fn occ_runs_the_same_likes_without_stashing() {
    let r = run::<Occ>();
    assert_eq!(r.check, Ok(()));
    assert_eq!(r.stats.total().stashed, 0);
    assert!(r.stats.types[READ].committed > 1000);
}
