//! What a node does for a [`crate::star::msg::Query::Check`] (the workload's consistency check on
//! the partitions it holds) and a [`crate::star::msg::Query::Rows`] (rows read back as they are).

use std::panic::{AssertUnwindSafe, catch_unwind};

use serde::Serialize;
use serde::de::DeserializeOwned;

use phasedb_net::Addr;
use phasedb_txn::{Database, Procedures, Protocol, Star};

use crate::star::layout::Layout;
use crate::star::msg::{MAX_ROWS_PER_QUERY, RowImage};
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
        check_replica(self.db, self.workload, &self.layout, self.me)
    }
}

/// `Procedures::check` on the partitions node `me` holds; a check that panics is a failure.
pub(crate) fn check_replica<W: Procedures>(
    db: &Database<Star>,
    workload: &W,
    layout: &Layout,
    me: Addr,
) -> Result<(), String> {
    let held = layout.held(me);
    match catch_unwind(AssertUnwindSafe(|| workload.check(db, &held))) {
        Ok(verdict) => verdict.map_err(|e| format!("node {me}: {e}")),
        Err(_) => Err(format!(
            "node {me}: the consistency check of {} panicked",
            workload.name()
        )),
    }
}

/// The rows of `table` with keys `first..first + count` present in `db` (at most
/// [`MAX_ROWS_PER_QUERY`] keys), each column's bytes as stored; none for a table `db` lacks.
pub(crate) fn read_rows<P: Protocol>(
    db: &Database<P>,
    table: u32,
    first: u64,
    count: u32,
) -> Vec<RowImage> {
    if table as usize >= db.tables().len() {
        return Vec::new();
    }
    let last = first.saturating_add(count.min(MAX_ROWS_PER_QUERY) as u64);
    (first..last)
        .filter_map(|key| {
            db.read_quiescent(table, key, |row| RowImage {
                key,
                columns: (0..row.schema().columns().len())
                    .map(|c| row.raw(c).to_vec())
                    .collect(),
            })
        })
        .collect()
}
