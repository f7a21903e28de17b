//! Virtual workers: the engine workers a baseline node runs its transactions on, several in flight
//! on the node's one event-loop thread. A transaction that must wait for messages (synchronous
//! replication's acknowledgement now; remote reads and two-phase-commit votes for the distributed
//! baselines) keeps its worker — with its read and write sets and, after a held commit, its write
//! locks — while the node runs other transactions on the free ones.
//!
//! Every worker is NO_WAIT ([`Worker::set_no_wait`]): a lock another in-flight transaction holds
//! cannot be released while this thread waits for it, so the conflict is returned and the node
//! reruns the transaction later.

use phasedb_check::History;
use phasedb_txn::{Database, Star, Worker};

/// A node's pool of workers, and which are free.
pub(crate) struct VirtualWorkers<'db> {
    workers: Vec<Worker<'db, Star>>,
    free: Vec<usize>,
}

impl<'db> VirtualWorkers<'db> {
    /// `n` workers over `db`; with `hold_locks` their commits keep their write locks until
    /// [`VirtualWorkers::put`] releases them ([`Worker::set_hold_locks`]).
    pub(crate) fn new(db: &'db Database<Star>, n: usize, hold_locks: bool) -> Self {
        let workers: Vec<Worker<'db, Star>> = (0..n)
            .map(|_| {
                let mut w = db.worker();
                w.set_no_wait(true);
                w.set_hold_locks(hold_locks);
                w
            })
            .collect();
        VirtualWorkers {
            free: (0..n).rev().collect(),
            workers,
        }
    }

    /// A free worker's index, now taken.
    pub(crate) fn take(&mut self) -> Option<usize> {
        self.free.pop()
    }

    /// Whether a worker is free.
    pub(crate) fn any_free(&self) -> bool {
        !self.free.is_empty()
    }

    /// Worker `i`.
    pub(crate) fn get(&mut self, i: usize) -> &mut Worker<'db, Star> {
        &mut self.workers[i]
    }

    /// Frees worker `i`, releasing the write locks its last commit kept (or its prepared
    /// transaction's).
    pub(crate) fn put(&mut self, i: usize) {
        if self.workers[i].is_prepared() {
            self.workers[i].abort_prepared();
        }
        self.workers[i].release_locks();
        self.free.push(i);
    }

    /// The histories the workers recorded since the last call.
    pub(crate) fn take_histories(&mut self) -> Vec<History> {
        self.workers.iter_mut().map(Worker::take_history).collect()
    }
}
