//! What a node does for a [`crate::star::msg::Query::Check`]: the workload's consistency check on
//! the partitions it holds.

use std::panic::{AssertUnwindSafe, catch_unwind};

use serde::Serialize;
use serde::de::DeserializeOwned;

use phasedb_txn::Procedures;

use crate::star::node::StarNode;

impl<'db, W> StarNode<'db, W>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    /// `Procedures::check` on the partitions this node holds. Every replica must pass it once a
    /// fence has applied every write (§4.4): a failure on one replica only is a replication bug.
    /// A check that panics is reported as a failure, and the node keeps serving.
    pub(crate) fn check(&self) -> Result<(), String> {
        let held = self.layout.held(self.me);
        let (workload, db) = (self.workload, self.db);
        match catch_unwind(AssertUnwindSafe(|| workload.check(db, &held))) {
            Ok(verdict) => verdict.map_err(|e| format!("node {}: {e}", self.me)),
            Err(_) => Err(format!(
                "node {}: the consistency check of {} panicked",
                self.me,
                workload.name()
            )),
        }
    }
}
