//! The paper's workloads (§VI-A): the micro-benchmark's transaction types I–III and the
//! Twitter-like social network.
//!
//! They live beside the replica rather than in `phasedb-workloads`: that crate's workloads are
//! stored procedures over the single-node engine's `Tx` API, while a P-DUR transaction executes
//! against a replica's snapshots (Algorithm 3: reads per partition snapshot, buffered writes, a
//! certification request), which only this crate offers; the key choice itself needs nothing but
//! `rand`. A transaction is a [`Logic`]: rounds of reads whose keys may depend on what earlier
//! rounds returned, then writes; [`execute`] runs one against a [`SnapshotSource`] in one go, the
//! threaded replica runs it in steps, sending reads of other partitions to their threads.

pub mod micro;
pub mod twitter;

use super::client::{Finish, SnapshotSource, Transaction};
use super::partition::ReadError;
use super::request::PartitionId;
use crate::ramp::msg::Key;

/// One transaction's program.
pub trait Logic {
    /// The keys to read in the next round, into `out` (left empty when reads are done), given
    /// what the transaction has read so far.
    fn next_reads(&mut self, tx: &Transaction, out: &mut Vec<Key>);
    /// The writes, once reads are done (none for a read-only transaction).
    fn write(&mut self, tx: &mut Transaction);
    /// The transaction type's name, for statistics.
    fn kind(&self) -> &'static str;
}

/// Draws the transactions of clients whose home is one partition.
pub trait Generator {
    /// The next transaction of a client at partition `home`.
    fn next_txn(&mut self, home: PartitionId) -> Box<dyn Logic>;
}

impl Generator for micro::MicroGen {
    fn next_txn(&mut self, home: PartitionId) -> Box<dyn Logic> {
        Box::new(self.next(home))
    }
}

impl Generator for twitter::TwitterGen {
    fn next_txn(&mut self, home: PartitionId) -> Box<dyn Logic> {
        Box::new(self.next(home))
    }
}

/// Runs `logic` in `tx` against `src` and terminates it (Algorithm 3); a read that fails (a
/// collected snapshot) aborts it.
pub fn execute<L: Logic + ?Sized>(
    mut tx: Transaction,
    logic: &mut L,
    src: &mut impl SnapshotSource,
) -> Result<Finish, ReadError> {
    let mut keys = Vec::new();
    loop {
        keys.clear();
        logic.next_reads(&tx, &mut keys);
        if keys.is_empty() {
            break;
        }
        for &k in &keys {
            if let Err(e) = tx.read(k, src) {
                tx.abort(src);
                return Err(e);
            }
        }
    }
    logic.write(&mut tx);
    Ok(tx.finish(src))
}
