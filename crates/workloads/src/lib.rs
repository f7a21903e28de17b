//! Workloads of phasedb and the driver that runs them. Each workload creates and loads its tables,
//! generates transactions, runs them as stored procedures through the `Tx` API only (so it runs
//! unchanged on every protocol), and can check its own consistency afterwards.

pub mod append;
pub mod bank;
mod driver;
mod durable_acks;
pub mod incr;
pub mod like;
pub mod pdur_micro;
pub mod rubis;
pub mod shift;
pub mod tpcc;
pub mod ycsb;

pub use driver::{BenchOptions, BenchResult, run_bench};
pub use durable_acks::DurableStats;
pub use phasedb_keys::Zipf;

use phasedb_txn::{Database, Protocol, TxResult, Worker};

/// A benchmark workload, generic over the protocol it runs on.
pub trait Workload: Sync {
    /// Per-thread generator state (random numbers, reusable buffers).
    type Thread: Send;

    /// The workload's name.
    fn name(&self) -> &'static str;

    /// Names of the transaction types, indexed like the statistics.
    fn txn_types(&self) -> Vec<&'static str>;

    /// Creates the tables and loads the initial data.
    fn setup<P: Protocol>(&mut self, db: &mut Database<P>);

    /// The generator state of thread `index`, seeded from `seed`.
    fn thread(&self, index: usize, seed: u64) -> Self::Thread;

    /// The thread's random number generator. `run_one` must generate its transaction from it (and
    /// the thread's fixed settings) alone: a copy taken before `run_one` then replays the same
    /// transaction, which is how the driver reruns transactions a phased protocol stashed.
    fn rng<'a>(&self, thread: &'a mut Self::Thread) -> &'a mut rand::rngs::SmallRng;

    /// Generates and runs one transaction on `worker`.
    fn run_one<P: Protocol>(
        &self,
        thread: &mut Self::Thread,
        worker: &mut Worker<'_, P>,
    ) -> TxResult<()>;

    /// Takes back a thread's state when its worker stops (before [`Workload::check`]).
    fn finish(&self, _thread: Self::Thread) {}

    /// Checks the workload's consistency conditions after a run.
    fn check<P: Protocol>(&self, _db: &Database<P>) -> Result<(), String> {
        Ok(())
    }

    /// The history of what the workload's transactions observed, when it records one (list-append,
    /// while the database records its history); taken once, after [`Workload::check`].
    fn take_observed(&self) -> Option<phasedb_check::ListAppendHistory> {
        None
    }

    /// Prepares to run on a database recovered from a data directory (after
    /// [`Database::start_durability`] replaced the loaded rows): a workload whose generators
    /// depend on what earlier runs inserted picks up from the recovered rows. Workloads that keep
    /// state outside the database (counts their check compares against) refuse.
    fn recovered<P: Protocol>(&mut self, _db: &Database<P>) -> Result<(), String> {
        Err(format!(
            "{} keeps state outside the database, so it cannot run on a recovered one \
             (--data-dir with an existing database runs ycsb, tpcc and bank)",
            self.name()
        ))
    }

    /// The workload's settings, for reports.
    fn settings(&self) -> Vec<(&'static str, String)>;
}
