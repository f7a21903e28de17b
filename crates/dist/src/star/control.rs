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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::star::node::open_database;
    use phasedb_net::StarConfig;
    use phasedb_workloads::ycsb::{YcsbProcedures, YcsbProceduresConfig};

    #[test]
    fn rows_read_back_as_stored_and_a_query_out_of_range_reads_nothing() {
        let mut w = YcsbProcedures::new(YcsbProceduresConfig {
            rows_per_partition: 10,
            ..YcsbProceduresConfig::star(2)
        });
        let layout = Layout::new(2, &StarConfig::new(2)).unwrap();
        // Node 0, the full replica, holds both partitions: keys 0..20.
        let db = open_database(&mut w, &layout, 0, false).unwrap();
        let mut stored = std::collections::HashMap::new();
        db.for_each_row_quiescent(w.table(), |key, row| {
            stored.insert(
                key,
                (0..10).map(|c| row.raw(c).to_vec()).collect::<Vec<_>>(),
            );
        });
        let rows = read_rows(&db, w.table(), 5, 10);
        assert_eq!(
            rows.iter().map(|r| r.key).collect::<Vec<_>>(),
            (5..15).collect::<Vec<_>>()
        );
        for r in &rows {
            assert_eq!(r.columns, stored[&r.key], "row {}", r.key);
            assert!(r.columns.iter().all(|c| c.len() == 10));
        }
        assert_eq!(read_rows(&db, w.table(), 15, u32::MAX).len(), 5);
        assert!(read_rows(&db, w.table() + 1, 0, 10).is_empty());
        assert!(read_rows(&db, u32::MAX, 0, 10).is_empty());
        assert!(read_rows(&db, w.table(), u64::MAX - 2, 10).is_empty());
    }
}
