//! Stored procedures as a partitioned deployment sees them.
//!
//! A partitioned, replicated deployment (STAR's nodes, and later P-DUR's replicas and the Dist-*
//! baselines) runs a workload's stored procedures, but it has to know more than a benchmark driver
//! does: which partition every record lives in (to route a request to the partition's master and to
//! replicate each write to that partition's secondaries), which partitions a request touches before it
//! runs (a single-partition request runs on its partition's master, a cross-partition one is deferred
//! or coordinated), and how to load only the partitions a node holds. A request is a plain value
//! (its parameters), so it can be generated on one node and run on another.
//!
//! The workloads crate implements this for YCSB and TPC-C; the protocol code that uses it knows no
//! workload.

use phasedb_storage::TableId;

use crate::database::Database;
use crate::error::TxResult;
use crate::protocol::Protocol;
use crate::worker::Worker;

/// Partition numbers: `0..Procedures::partitions()`.
pub type PartitionId = u32;

/// The partitions one request touches: its home partition first, then any others, without repeats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Touched {
    parts: [PartitionId; Touched::MAX],
    len: u8,
}

impl Touched {
    /// The most partitions a request may name (TPC-C's NewOrder reaches at most 15 supply warehouses
    /// besides its home).
    pub const MAX: usize = 16;

    /// Only the home partition.
    pub fn home(p: PartitionId) -> Touched {
        let mut t = Touched::default();
        t.add(p);
        t
    }

    /// Adds `p` unless it is already named (or the list is full, which a request never reaches).
    pub fn add(&mut self, p: PartitionId) {
        if !self.as_slice().contains(&p) && (self.len as usize) < Self::MAX {
            self.parts[self.len as usize] = p;
            self.len += 1;
        }
    }

    /// The partitions, home first.
    pub fn as_slice(&self) -> &[PartitionId] {
        &self.parts[..self.len as usize]
    }

    /// The home partition (the first one added).
    pub fn first(&self) -> PartitionId {
        self.parts[0]
    }

    /// Whether the request touches more than one partition.
    pub fn is_cross(&self) -> bool {
        self.len > 1
    }
}

/// A workload's stored procedures over a database split into partitions.
pub trait Procedures: Send + Sync {
    /// One transaction's parameters; running it twice from the same value does the same thing.
    type Request: Clone + Send + 'static;
    /// Per-thread generator state (random numbers, reusable buffers).
    type Gen: Send;

    /// The workload's name.
    fn name(&self) -> &'static str;

    /// How many partitions the data is split into.
    fn partitions(&self) -> u32;

    /// Names of the transaction types, indexed like the statistics.
    fn txn_types(&self) -> Vec<&'static str>;

    /// Creates the tables (empty). Every node creates them all, in the same order, so table ids agree
    /// across nodes.
    fn create_tables<P: Protocol>(&mut self, db: &mut Database<P>);

    /// Loads partition `p`'s initial rows (and, on every node, rows that belong to no partition, such
    /// as TPC-C's read-only items: `load_partition` is called for each held partition, and
    /// [`Procedures::load_shared`] once).
    fn load_partition<P: Protocol>(&self, db: &Database<P>, p: PartitionId);

    /// Loads the rows that belong to no partition (read-only tables replicated everywhere).
    fn load_shared<P: Protocol>(&self, _db: &Database<P>) {}

    /// The partition a record belongs to, or `None` for a row of a table replicated everywhere and
    /// never written.
    fn partition_of(&self, table: TableId, key: u64) -> Option<PartitionId>;

    /// The generator of thread `index`, seeded from `seed`.
    fn generator(&self, index: usize, seed: u64) -> Self::Gen;

    /// Draws a request whose home is partition `home`; with probability `cross` it also touches
    /// another partition (YCSB: keys from a second partition; TPC-C: a remote supply warehouse or
    /// customer).
    fn generate(&self, thread: &mut Self::Gen, home: PartitionId, cross: f64) -> Self::Request;

    /// The partitions `req` touches, home first.
    fn touched(&self, req: &Self::Request) -> Touched;

    /// The request's transaction type (an index into [`Procedures::txn_types`]).
    fn txn_type(&self, req: &Self::Request) -> usize;

    /// Whether `req` only reads (such a request may run on a secondary at read committed).
    fn read_only(&self, _req: &Self::Request) -> bool {
        false
    }

    /// Runs `req` as one transaction on `worker`.
    fn run<P: Protocol>(&self, req: &Self::Request, worker: &mut Worker<'_, P>) -> TxResult<()>;

    /// Checks the workload's consistency conditions on the partitions `held` of `db`.
    fn check<P: Protocol>(&self, _db: &Database<P>, _held: &[PartitionId]) -> Result<(), String> {
        Ok(())
    }
}
